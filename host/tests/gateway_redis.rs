//! End-to-end: gateways that share one Redis session store (a real `redis-server`), in front
//! of the real CLI. A conversation goes on on another gateway when its own has closed its CLI
//! or was killed, with the same messages reaching the model; tenants stay apart across
//! gateways; a Redis server that goes away gets clear 503s and loses nothing acknowledged.

mod support;

use std::sync::Arc;
use std::time::Duration;

use ccwire_host::store::{RedisStore, SessionStore};
use ccwire_tests::cli::OfflineHome;
use ccwire_tests::{FakeAnthropic, RedisServer};
use serde_json::{json, Value};
use support::*;

/// `ccwire serve` with the Redis store at `redis`, its state in `state`, which it sees at
/// `at` (a mount namespace of its own, made by bubblewrap): as on machines of one
/// configuration, every gateway's CLIs work in the same directories, so a CLI that resumes
/// another gateway's conversation finds it where it was.
async fn serve(
    home: &OfflineHome,
    fake: &FakeAnthropic,
    (state, at): (&tempfile::TempDir, &tempfile::TempDir),
    redis: &RedisServer,
    extra: &[&str],
) -> ServeProcess {
    let url = redis.url();
    let at = at.path().to_str().unwrap();
    let mut args = vec![
        "--state-dir",
        at,
        "--sandbox",
        "off",
        "--store",
        &url,
        "--api-key",
        "key-one",
        "--api-key",
        "key-two",
    ];
    args.extend_from_slice(extra);
    let wrapper: Vec<String> = [
        "bwrap",
        "--dev-bind",
        "/",
        "/",
        "--bind",
        state.path().to_str().unwrap(),
        at,
        "--die-with-parent",
        "--",
    ]
    .map(str::to_owned)
    .to_vec();
    ServeProcess::start_wrapped(&wrapper, home, fake, &args, &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_goes_on_on_another_gateway_when_its_own_is_killed() {
    let redis = RedisServer::start();
    let fake = FakeAnthropic::start(script()).await;
    let home = OfflineHome::new();
    let http = reqwest::Client::new();
    let (state_one, state_two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let at = tempfile::tempdir().unwrap();
    let one = serve(&home, &fake, (&state_one, &at), &redis, &[]).await;
    let url_one = format!("http://{}", one.addr);

    // The conversation as it goes on one gateway.
    let mut messages = Vec::new();
    for text in TURNS {
        turn_as(&http, &url_one, Some("key-one"), &mut messages, text).await;
    }
    let unpaused = model_messages(&fake, 0);

    // Half of it on gateway one, killed; the rest on gateway two.
    let from = fake.model_calls().len();
    let mut messages = Vec::new();
    for text in &TURNS[..2] {
        turn_as(&http, &url_one, Some("key-one"), &mut messages, text).await;
    }
    let half = messages.clone();
    one.kill().await;
    let two = serve(&home, &fake, (&state_two, &at), &redis, &[]).await;
    let url_two = format!("http://{}", two.addr);
    let mut kinds = Vec::new();
    for text in &TURNS[2..] {
        kinds.extend(turn_as(&http, &url_two, Some("key-one"), &mut messages, text).await);
    }
    assert_eq!(
        kinds[0],
        ("resumed".to_owned(), "restarted".to_owned()),
        "{kinds:?}"
    );
    assert_same_calls(&fake, from, &unpaused);

    // Another tenant sending the same history finds nothing of the first one's: its history
    // is its own (written from what its request carries), not the stored conversation.
    let mut theirs = half;
    let kinds = turn_as(&http, &url_two, Some("key-two"), &mut theirs, TURNS[2]).await;
    assert_eq!(
        kinds[0],
        ("resumed".to_owned(), "history".to_owned()),
        "{kinds:?}"
    );
    // Killed with its bubblewrap (which passes no SIGTERM on) when dropped.
    drop(two);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_started_on_one_gateway_is_continued_on_others() {
    let redis = RedisServer::start();
    let fake = FakeAnthropic::start(script()).await;
    let home = OfflineHome::new();
    let http = reqwest::Client::new();
    let states: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let at = tempfile::tempdir().unwrap();
    let mut gateways = Vec::new();
    for state in &states {
        gateways.push(
            serve(
                &home,
                &fake,
                (state, &at),
                &redis,
                &["--hibernate-after", "0.5"],
            )
            .await,
        );
    }
    let urls: Vec<String> = gateways
        .iter()
        .map(|g| format!("http://{}", g.addr))
        .collect();
    let mut messages = Vec::new();
    let mut kinds = Vec::new();
    for (i, text) in ["Hello, who are you?", "And then?", "One more thing."]
        .iter()
        .enumerate()
    {
        kinds.extend(turn_as(&http, &urls[i], Some("key-one"), &mut messages, text).await);
        // Idle past the hibernation delay: the CLI is closed, the conversation in Redis.
        tokio::time::sleep(Duration::from_millis(2000)).await;
    }
    assert_eq!(
        kinds,
        [
            ("new", ""),
            ("resumed", "hibernated"),
            ("resumed", "hibernated")
        ]
        .map(|(k, r)| (k.to_owned(), r.to_owned()))
    );
    // The third gateway's CLI read the whole conversation from the store.
    let last = fake.model_calls().pop().unwrap().body["messages"].to_string();
    for text in ["Hello, who are you?", "And then?", "One more thing."] {
        assert!(last.contains(text), "{last}");
    }
    drop(gateways);
}

/// A plain-text turn against an in-process gateway: its status, `x-ccwire-session` with its
/// reason, `retry-after`, and the body.
async fn plain(gw: &Gw, messages: &[Value]) -> (u16, String, String, Value) {
    let body = json!({"model": MODEL, "max_tokens": 256, "messages": messages});
    let response = gw.post("/v1/messages", &body, None).await;
    let kind = format!(
        "{} {}",
        header(&response, "x-ccwire-session"),
        header(&response, "x-ccwire-session-reason")
    );
    let retry = header(&response, "retry-after");
    (
        response.status().as_u16(),
        kind.trim().to_owned(),
        retry,
        response.json().await.unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_gone_gets_clear_503s_and_back_loses_nothing_acknowledged() {
    let mut redis = RedisServer::start();
    let store: Arc<dyn SessionStore> = Arc::new(
        RedisStore::connect(&redis.url(), Duration::from_secs(3600))
            .await
            .unwrap(),
    );
    let gw = Gw::start(|options| {
        options.store = Some(store);
        options.engine.limits.hibernate_after_ms = 2000;
    })
    .await;
    let texts = ["Hello, who are you?", "And then?", "One more thing."];
    let answered = |messages: &mut Vec<Value>, answer: &Value, next: &str| {
        messages.push(json!({"role": "assistant", "content": answer["content"].clone()}));
        messages.push(json!({"role": "user", "content": next}));
    };

    // The conversation with Redis up all along.
    let mut messages = vec![json!({"role": "user", "content": texts[0]})];
    for next in &texts[1..] {
        let (status, _, _, answer) = plain(&gw, &messages).await;
        assert_eq!(status, 200, "{answer}");
        answered(&mut messages, &answer, next);
    }
    let (status, _, _, _) = plain(&gw, &messages).await;
    assert_eq!(status, 200);
    let unpaused = model_messages(&gw.fake, 0);

    // The same, Redis stopped after the first turn: the live CLI goes on; its transcript and
    // record wait in the gateway.
    let from = gw.fake.model_calls().len();
    let mut messages = vec![json!({"role": "user", "content": texts[0]})];
    let (status, kind, _, answer) = plain(&gw, &messages).await;
    assert_eq!((status, kind.as_str()), (200, "new"), "{answer}");
    answered(&mut messages, &answer, texts[1]);
    redis.stop();
    let (status, kind, _, answer) = plain(&gw, &messages).await;
    assert_eq!((status, kind.as_str()), (200, "continued"), "{answer}");
    answered(&mut messages, &answer, texts[2]);
    // Idle past the hibernation delay: the CLI is closed, the conversation only in the
    // gateway's backlog. Its next turn cannot be looked up: a clear 503.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let (status, _, retry, answer) = plain(&gw, &messages).await;
    assert_eq!(status, 503, "{answer}");
    assert_eq!(retry, "2");
    assert_eq!(answer["error"]["type"], "api_error", "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("session store"),
        "{answer}"
    );

    // Redis back: the backlog is written, the conversation resumed as if nothing happened.
    redis.restart();
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let (status, kind, _, answer) = plain(&gw, &messages).await;
    assert_eq!(
        (status, kind.as_str()),
        (200, "resumed hibernated"),
        "{answer}"
    );
    let resumed = model_messages(&gw.fake, from);
    assert_eq!(resumed, unpaused, "the model saw the same conversation");

    let metrics = gw
        .http
        .get(gw.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("ccwire_store_failures_total{op=\"find\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("ccwire_store_failures_total{op=\"write\"}"),
        "{metrics}"
    );
    gw.stop().await;
}
