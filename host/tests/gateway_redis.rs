//! End-to-end: gateways that share one Redis session store (a real `redis-server`), in front
//! of the real CLI. A conversation goes on on another gateway when its own has closed its CLI
//! or was killed, with the same messages reaching the model; tenants stay apart across
//! gateways; a Redis server that goes away gets clear 503s and loses nothing acknowledged.

mod support;

use std::sync::Arc;
use std::time::Duration;

use ccwire_host::store::{ConversationStore, RedisStore};
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
    // Gateways of a cluster: the killed one's lease is still valid when the next request
    // comes; it is found unreachable and the conversation resumed where the request is.
    let node = ["--advertise", "127.0.0.1"];
    let one = serve(&home, &fake, (&state_one, &at), &redis, &node).await;
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
    let two = serve(&home, &fake, (&state_two, &at), &redis, &node).await;
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
    // What each gateway metered sums in the store: any of them says the key's three turns.
    for url in &urls {
        let usage: Value = (http.get(format!("{url}/v1/usage")))
            .header("x-api-key", "key-one")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(usage["total"]["turns"], 3, "{url}: {usage}");
        assert!(
            usage["total"]["cost_usd"].as_f64().unwrap() > 0.0,
            "{usage}"
        );
    }
    drop(gateways);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_on_any_gateway_of_a_cluster_reaches_the_cli_that_runs_its_conversation() {
    let redis = RedisServer::start();
    let fake = FakeAnthropic::start(script()).await;
    let home = OfflineHome::new();
    let http = reqwest::Client::new();

    // The conversation on one gateway alone.
    let states: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let at = tempfile::tempdir().unwrap();
    let unpaused = calls_alone(&home, &fake, (&states[3], &at), &redis, &TURNS).await;

    // Three gateways; each turn starts on the next one, each client tool call made is
    // answered through yet another. All of it reaches gateway one's CLI.
    let (gateways, urls) = cluster(&home, &fake, (&states[..3], &at), &redis, &[]).await;
    let from = fake.model_calls().len();
    let mut messages = Vec::new();
    let mut reached = Vec::new();
    for (i, text) in TURNS.iter().enumerate() {
        let order: Vec<&str> = (0..3).map(|k| urls[(i + 2 * k) % 3].as_str()).collect();
        reached.extend(turn_via(&http, &order, Some("key-one"), &mut messages, text).await);
    }
    let served: Vec<(&str, &str)> = reached
        .iter()
        .map(|r| (r.session.as_str(), r.node.as_str()))
        .collect();
    // Turn two's lookups are asked for on gateway two and answered through gateway one,
    // turn four's asked for on gateway one and answered through gateway three: all of it
    // served by gateway one's live CLI.
    let mut expected = vec![("new", "one")];
    expected.resize(reached.len(), ("continued", "one"));
    assert_eq!(served, expected, "{reached:?}");
    // Exactly the model calls of the conversation on one gateway: two per lookup, none
    // rebuilt.
    assert_same_calls(&fake, from, &unpaused);

    // A stream passes through as it comes.
    messages.push(json!({"role": "user", "content": "Say it as a stream."}));
    let body = json!({"model": MODEL, "max_tokens": 256, "stream": true, "tools": [lookup_tool()], "messages": messages});
    let response = as_key_one(&http, &urls[1], &body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-type"), "text/event-stream");
    assert_eq!(header(&response, "x-ccwire-node"), "one");
    assert_eq!(header(&response, "x-ccwire-session"), "continued");
    let events = response.text().await.unwrap();
    assert!(events.contains("event: message_stop"), "{events}");

    // Another tenant's request with the same history is its own: served where it comes.
    let mut theirs = vec![json!({"role": "user", "content": TURNS[0]})];
    theirs.push(messages[1].clone());
    let reached = turn_via(&http, &[&urls[2]], Some("key-two"), &mut theirs, TURNS[2]).await;
    assert_eq!(reached[0].node, "three", "{reached:?}");
    assert_ne!(reached[0].session, "continued", "{reached:?}");
    drop(gateways);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_back_from_a_lapsed_lease_runs_no_conversation_another_took_over() {
    let redis = RedisServer::start();
    let fake = FakeAnthropic::start(script()).await;
    let home = OfflineHome::new();
    let http = reqwest::Client::new();
    let states: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let at = tempfile::tempdir().unwrap();
    let args = ["--admin-key", "admin"];
    let (gateways, urls) = cluster(&home, &fake, (&states, &at), &redis, &args).await;
    let send = |url: &str, messages: &[Value], forwarded: &str| {
        let body = json!({"model": MODEL, "max_tokens": 256, "messages": messages});
        http.post(format!("{url}/v1/messages"))
            .header("x-api-key", "key-one")
            .header("x-ccwire-forwarded-by", forwarded)
            .json(&body)
            .send()
    };
    let served = |response: &reqwest::Response| {
        (
            response.status().as_u16(),
            header(response, "x-ccwire-node"),
            header(response, "x-ccwire-session"),
        )
    };
    let mut messages = vec![json!({"role": "user", "content": "Hello, who are you?"})];
    let response = send(&urls[0], &messages, "").await.unwrap();
    assert_eq!(served(&response), (200, "one".into(), "new".into()));
    let answer: Value = response.json().await.unwrap();
    messages.push(json!({"role": "assistant", "content": answer["content"].clone()}));

    // A client cannot make a request look forwarded: it still goes to gateway one.
    let mut next = messages.clone();
    next.push(json!({"role": "user", "content": "And then?"}));
    let response = send(&urls[1], &next, "a guess").await.unwrap();
    assert_eq!(served(&response), (200, "one".into(), "continued".into()));
    let answer: Value = response.json().await.unwrap();
    next.push(json!({"role": "assistant", "content": answer["content"].clone()}));

    // Gateway one stops answering past its lease; the next turn comes to gateway two, which
    // resumes the conversation from the store.
    gateways[0].signal_serve(nix::sys::signal::Signal::SIGSTOP);
    tokio::time::sleep(Duration::from_secs(11)).await;
    let mut theirs = next.clone();
    theirs.push(json!({"role": "user", "content": "One more thing."}));
    let response = send(&urls[1], &theirs, "").await.unwrap();
    assert_eq!(served(&response), (200, "two".into(), "resumed".into()));
    let answer: Value = response.json().await.unwrap();
    theirs.push(json!({"role": "assistant", "content": answer["content"].clone()}));

    // Gateway one is back, its CLI of the conversation still running. The turn it was last
    // asked, asked again (a client's retry) on gateway one, is not run by that stale CLI: the
    // conversation is gateway two's.
    gateways[0].signal_serve(nix::sys::signal::Signal::SIGCONT);
    let mut retry = next.clone();
    retry.push(json!({"role": "user", "content": "A BRANCH FROM THE PAST"}));
    let response = send(&urls[0], &retry, "").await.unwrap();
    assert_eq!(served(&response).1, "two");
    // And the conversation goes on on gateway two from either gateway.
    theirs.push(json!({"role": "user", "content": "Thanks."}));
    let response = send(&urls[0], &theirs, "").await.unwrap();
    assert_eq!(served(&response), (200, "two".into(), "continued".into()));

    // Gateway one closed its stale CLI once it saw its lease had lapsed, and wrote nothing.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let metrics = http
        .get(format!("{}/metrics", urls[0]))
        .bearer_auth("admin")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("ccwire_sessions{node=\"one\"} 0"),
        "{metrics}"
    );
    let stored = redis_transcripts(&redis).await;
    assert!(stored.contains("One more thing."), "{stored}");
    drop(gateways);
}

/// The model calls of a conversation of `texts` on one gateway alone (its state in `state`),
/// stopped after: what a conversation spread over gateways must give the model too.
async fn calls_alone(
    home: &OfflineHome,
    fake: &FakeAnthropic,
    (state, at): (&tempfile::TempDir, &tempfile::TempDir),
    redis: &RedisServer,
    texts: &[&str],
) -> Vec<String> {
    let from = fake.model_calls().len();
    let alone = serve(home, fake, (state, at), redis, &[]).await;
    let url = format!("http://{}", alone.addr);
    let http = reqwest::Client::new();
    let mut messages = Vec::new();
    for text in texts {
        turn_as(&http, &url, Some("key-one"), &mut messages, text).await;
    }
    drop(alone);
    model_messages(fake, from)
}

/// Three nodes of a cluster, named `one`, `two`, `three`, with `extra` arguments, and their
/// base URLs; their state directories are in `states`.
async fn cluster(
    home: &OfflineHome,
    fake: &FakeAnthropic,
    (states, at): (&[tempfile::TempDir], &tempfile::TempDir),
    redis: &RedisServer,
    extra: &[&str],
) -> (Vec<ServeProcess>, Vec<String>) {
    let mut gateways = Vec::new();
    for (state, name) in states.iter().zip(["one", "two", "three"]) {
        let mut args = vec!["--advertise", "127.0.0.1", "--node", name];
        args.extend_from_slice(extra);
        gateways.push(serve(home, fake, (state, at), redis, &args).await);
    }
    let urls = gateways
        .iter()
        .map(|g| format!("http://{}", g.addr))
        .collect();
    (gateways, urls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_are_listed_streamed_and_answered_on_any_gateway_of_a_cluster() {
    let redis = RedisServer::start();
    let script = bash_calls(&[("PLEASE-TOUCH", "touch approved.txt", "Create a file")]);
    let fake = FakeAnthropic::start(script).await;
    let home = OfflineHome::new();
    let http = reqwest::Client::new();
    let states: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let at = tempfile::tempdir().unwrap();
    let args = [
        "--enable-tool",
        "Bash",
        "--approvals",
        "http",
        "--admin-key",
        "admin",
        "--console",
    ];
    let (gateways, urls) = cluster(&home, &fake, (&states, &at), &redis, &args).await;
    let list = |url: &str, key: &str| {
        let request = http
            .get(format!("{url}/v1/approvals"))
            .header("x-api-key", key);
        async move {
            let list: Value = request.send().await.unwrap().json().await.unwrap();
            list["data"].as_array().unwrap().clone()
        }
    };

    // Gateway three's event stream, from before anything waits.
    let events = http
        .get(format!("{}/v1/approvals/events", urls[2]))
        .header("x-api-key", "key-one")
        .send()
        .await
        .unwrap();
    assert_eq!(header(&events, "content-type"), "text/event-stream");
    let (seen, mut frames) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        let mut stream = events.bytes_stream();
        let mut text = String::new();
        while let Some(Ok(bytes)) = futures::StreamExt::next(&mut stream).await {
            text.push_str(&String::from_utf8_lossy(&bytes));
            while let Some(at) = text.find("\n\n") {
                let frame: String = text.drain(..at + 2).collect();
                let _ = seen.send(frame);
            }
        }
    });
    // The model's Bash call on gateway one waits for a person.
    let body = json!({"model": MODEL, "max_tokens": 256,
        "messages": [{"role": "user", "content": "PLEASE-TOUCH a file"}]});
    let turn = http
        .post(format!("{}/v1/messages", urls[0]))
        .header("x-api-key", "key-one")
        .json(&body)
        .send();
    let turn = tokio::spawn(async move { turn.await.unwrap().json::<Value>().await.unwrap() });

    // Listed on gateway two, for its tenant only, with the node it waits on.
    let mut waiting = Vec::new();
    for _ in 0..150 {
        waiting = list(&urls[1], "key-one").await;
        if !waiting.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert_eq!(
        (
            waiting[0]["tool_name"].as_str(),
            waiting[0]["node"].as_str()
        ),
        (Some("Bash"), Some("one"))
    );
    assert!(list(&urls[1], "key-two").await.is_empty());
    let id = waiting[0]["id"].as_str().unwrap().to_owned();
    // Streamed on gateway three.
    let event = next_event(&mut frames, "approval").await;
    assert_eq!(event["id"], id.as_str(), "{event}");

    // The console of gateway two lists the conversation gateway one runs, once, with its
    // node; gateway three streams it from there.
    let console = |url: &str, path: &str, key: &str| {
        http.get(format!("{url}{path}"))
            .header("x-api-key", key)
            .send()
    };
    let list: Value = console(&urls[1], "/v1/conversations", "key-one")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rows = list["data"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{list}");
    assert_eq!(
        (rows[0]["state"].as_str(), rows[0]["node"].as_str()),
        (Some("waiting_for_approval"), Some("one")),
        "{list}"
    );
    let other: Value = console(&urls[1], "/v1/conversations", "key-two")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(other["data"], json!([]));
    let conversation = rows[0]["id"].as_str().unwrap().to_owned();
    let events = format!("/v1/conversations/{conversation}/events");
    assert_eq!(
        console(&urls[2], &events, "key-two")
            .await
            .unwrap()
            .status(),
        404
    );
    let mut watched = console(&urls[2], &events, "key-one").await.unwrap();
    assert_eq!(watched.status(), 200);
    assert_eq!(header(&watched, "x-ccwire-node"), "one");
    let mut seen = String::new();
    while !seen.contains("\"type\":\"permission_request\"") {
        let chunk = tokio::time::timeout(Duration::from_secs(30), watched.chunk())
            .await
            .expect("the stream goes on")
            .unwrap()
            .expect("the stream is open");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(seen.starts_with("event: conversation\n"), "{seen}");

    // Answered through gateway three; the turn on gateway one goes on.
    let answer = |url: &str| {
        http.post(format!("{url}/v1/approvals/{id}"))
            .header("x-api-key", "key-one")
            .json(&json!({"behavior": "allow"}))
            .send()
    };
    let response = answer(&urls[2]).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "x-ccwire-node"), "one");
    let body = turn.await.unwrap();
    assert_eq!(body["stop_reason"], "end_turn", "{body}");
    let event = next_event(&mut frames, "resolved").await;
    assert_eq!(
        (event["id"].as_str(), event["behavior"].as_str()),
        (Some(id.as_str()), Some("allow")),
        "{event}"
    );
    assert_eq!(
        answer(&urls[1]).await.unwrap().status(),
        404,
        "answered once"
    );

    // The charts of gateway three count the turn gateway one ran.
    let stats: Value = console(&urls[2], "/v1/stats", "key-one")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let turns: u64 = (stats["buckets"].as_array().unwrap().iter())
        .map(|b| b["turns"].as_u64().unwrap())
        .sum();
    assert_eq!(turns, 1, "{stats}");
    assert_eq!(stats["now"]["conversations"], 1, "{stats}");

    // Each node's metrics name it.
    let metrics = http
        .get(format!("{}/metrics", urls[0]))
        .bearer_auth("admin")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("ccwire_cli_spawns_total{node=\"one\"} 1"),
        "{metrics}"
    );
    drop(gateways);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_gateway_sends_new_conversations_to_the_others_and_finishes_its_own() {
    let redis = RedisServer::start();
    let fake = FakeAnthropic::start(script()).await;
    let home = OfflineHome::new();
    let http = reqwest::Client::new();
    let states: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let at = tempfile::tempdir().unwrap();
    let args = ["--admin-key", "admin", "--drain-grace", "60"];
    let (mut gateways, urls) = cluster(&home, &fake, (&states, &at), &redis, &args).await;

    // Gateway one holds a client tool call when it is asked to drain.
    let mut messages = vec![json!({"role": "user", "content": TURNS[1]})];
    let body =
        json!({"model": MODEL, "max_tokens": 1024, "tools": [lookup_tool()], "messages": messages});
    let response = as_key_one(&http, &urls[0], &body).await;
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["stop_reason"], "tool_use", "{answer}");
    let drain = http
        .post(format!("{}/admin/drain", urls[0]))
        .bearer_auth("admin")
        .send()
        .await
        .unwrap();
    assert!(drain.status().is_success(), "{}", drain.status());

    // A new conversation that reaches it is started on another node.
    let mut other = Vec::new();
    let reached = turn_via(&http, &[&urls[0]], Some("key-one"), &mut other, TURNS[0]).await;
    assert_eq!(reached[0].session, "new");
    assert!(
        ["two", "three"].contains(&reached[0].node.as_str()),
        "{reached:?}"
    );

    // The held call's results, sent to gateway two, finish the turn on gateway one.
    messages.push(json!({"role": "assistant", "content": answer["content"].clone()}));
    let results: Vec<Value> = answer["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .map(|c| json!({"type": "tool_result", "tool_use_id": c["id"], "content": "record"}))
        .collect();
    messages.push(json!({"role": "user", "content": results}));
    let body =
        json!({"model": MODEL, "max_tokens": 1024, "tools": [lookup_tool()], "messages": messages});
    let response = as_key_one(&http, &urls[1], &body).await;
    assert_eq!(
        (
            header(&response, "x-ccwire-node"),
            header(&response, "x-ccwire-session")
        ),
        ("one".to_owned(), "continued".to_owned())
    );
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["stop_reason"], "end_turn", "{answer}");

    // With nothing left to run, gateway one ends; the conversation goes on elsewhere.
    let one = gateways.remove(0);
    let mut child = one.child;
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the drained gateway ends")
        .unwrap();
    assert!(status.success(), "{status}");
    messages.push(json!({"role": "assistant", "content": answer["content"].clone()}));
    let reached = turn_via(&http, &[&urls[1]], Some("key-one"), &mut messages, TURNS[2]).await;
    assert_eq!(
        (reached[0].session.as_str(), reached[0].node.as_str()),
        ("resumed", "two"),
        "{reached:?}"
    );
    drop(gateways);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_whose_redis_restarts_gets_clear_503s_then_goes_on_where_it_was() {
    let mut redis = RedisServer::start();
    let fake = FakeAnthropic::start(script()).await;
    let home = OfflineHome::new();
    let http = reqwest::Client::new();
    let states: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let at = tempfile::tempdir().unwrap();
    let texts = ["Hello, who are you?", "And then?", "One more thing."];

    // The conversation on one gateway alone, Redis up all along.
    let unpaused = calls_alone(&home, &fake, (&states[2], &at), &redis, &texts).await;

    // Two nodes; Redis goes away after the first turn.
    let (gateways, urls) = cluster(&home, &fake, (&states[..2], &at), &redis, &[]).await;
    let from = fake.model_calls().len();
    let mut messages = Vec::new();
    let reached = turn_via(&http, &[&urls[0]], Some("key-one"), &mut messages, texts[0]).await;
    assert_eq!(
        (reached[0].session.as_str(), reached[0].node.as_str()),
        ("new", "one")
    );
    redis.stop();
    // Gateway one's CLI answers, but the turn cannot be kept: a clear 503, and the CLI that
    // has the turn the store does not is closed.
    let mut next = messages.clone();
    next.push(json!({"role": "user", "content": texts[1]}));
    let body =
        json!({"model": MODEL, "max_tokens": 1024, "tools": [lookup_tool()], "messages": next});
    for (url, said) in [(&urls[0], "could not keep"), (&urls[1], "is unavailable")] {
        // Gateway two can neither find where it runs nor read it: a clear 503 too.
        let response = as_key_one(&http, url, &body).await;
        assert_eq!(response.status(), 503);
        assert_eq!(header(&response, "retry-after"), "2");
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer["error"]["type"], "api_error", "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(said), "{answer}");
    }

    // Redis back: the turn, sent again to either gateway, goes on from what the store kept,
    // and the conversation goes on as if Redis had never gone.
    redis.restart();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let before = fake.model_calls().len();
    let reached = turn_via(&http, &[&urls[1]], Some("key-one"), &mut messages, texts[1]).await;
    assert_eq!(reached[0].session, "resumed", "{reached:?}");
    let reached = turn_via(&http, &[&urls[0]], Some("key-one"), &mut messages, texts[2]).await;
    assert_eq!(reached[0].session, "continued", "{reached:?}");
    // The model saw the same conversation (its failed turn aside).
    let mut calls = model_messages(&fake, from);
    calls.remove(before - from - 1);
    assert_eq!(calls, unpaused);
    drop(gateways);
}

/// A gateway killed while Redis is away loses no turn its clients were told succeeded: the
/// turn Redis could not keep was a 503, and every acknowledged one is resumed exactly by the
/// next gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_killed_during_a_redis_outage_loses_no_acknowledged_turn() {
    let mut redis = RedisServer::start();
    let fake = FakeAnthropic::start(script()).await;
    let home = OfflineHome::new();
    let http = reqwest::Client::new();
    let (state, at) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let texts = ["Hello, who are you?", "And then?", "One more thing."];
    let one = serve(&home, &fake, (&state, &at), &redis, &[]).await;
    let url = format!("http://{}", one.addr);

    let mut messages = Vec::new();
    turn_as(&http, &url, Some("key-one"), &mut messages, texts[0]).await;
    let acknowledged = messages.clone();
    redis.stop();
    for stream in [true, false] {
        let mut next = acknowledged.clone();
        next.push(json!({"role": "user", "content": texts[1]}));
        let body = json!({"model": MODEL, "max_tokens": 1024, "stream": stream,
                          "tools": [lookup_tool()], "messages": next});
        let response = as_key_one(&http, &url, &body).await;
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        assert!(
            !text.contains("message_stop"),
            "never told it succeeded: {text}"
        );
        assert!(text.contains("session store"), "{text}");
        if stream {
            // The live CLI answered: the stream ends with an error event, not `message_stop`.
            assert_eq!(status, 200, "{text}");
            assert!(text.contains("event: error"), "{text}");
        } else {
            // Its CLI closed, nothing to look the conversation up in.
            assert_eq!(status, 503, "{text}");
        }
    }
    one.kill().await;

    redis.restart();
    let two = serve(&home, &fake, (&state, &at), &redis, &[]).await;
    let url = format!("http://{}", two.addr);
    let from = fake.model_calls().len();
    let kinds = turn_as(&http, &url, Some("key-one"), &mut messages, texts[1]).await;
    assert_eq!(kinds[0].0, "resumed", "{kinds:?}");
    turn_as(&http, &url, Some("key-one"), &mut messages, texts[2]).await;
    // The model saw the acknowledged turn once, and the failed ones not at all.
    let calls = fake.model_calls();
    let last: Vec<Value> = calls[calls.len() - 1].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let users: Vec<&Value> = last.iter().filter(|m| m["role"] == "user").collect();
    assert_eq!(users.len(), 3, "{last:?}");
    assert!(calls.len() > from);
    drop(two);
}

/// A Messages request to the gateway at `url` as tenant `key-one`.
async fn as_key_one(http: &reqwest::Client, url: &str, body: &Value) -> reqwest::Response {
    http.post(format!("{url}/v1/messages"))
        .header("x-api-key", "key-one")
        .json(body)
        .send()
        .await
        .unwrap()
}

/// The data of the next event `kind` among an SSE stream's `frames` (20 s at most).
async fn next_event(
    frames: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    kind: &str,
) -> Value {
    let wanted = format!("event: {kind}\n");
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let frame = frames.recv().await.expect("the stream goes on");
            if let Some(data) = frame.strip_prefix(&wanted) {
                let data = data.trim().strip_prefix("data: ").unwrap();
                return serde_json::from_str::<Value>(data).unwrap();
            }
        }
    })
    .await
    .expect("the event in time")
}

/// Every transcript line the Redis server keeps, as one text.
async fn redis_transcripts(redis: &RedisServer) -> String {
    let client = ::redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = ::redis::cmd("KEYS")
        .arg("ccwire:*:c:*:t")
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut text = String::new();
    for key in keys {
        let lines: Vec<String> = ::redis::cmd("LRANGE")
            .arg(&key)
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await
            .unwrap();
        text.push_str(&lines.join("\n"));
    }
    text
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
async fn redis_gone_gets_clear_503s_and_back_goes_on_from_what_it_kept() {
    let mut redis = RedisServer::start();
    let store: Arc<dyn ConversationStore> = Arc::new(
        RedisStore::connect(&redis.url(), Duration::from_secs(3600))
            .await
            .unwrap(),
    );
    let gw = Gw::start(|options| {
        options.store = Some(store);
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

    // The same, Redis stopped after the first turn: the live CLI answers the next, but its
    // turn cannot be kept: a clear 503 (the CLI is closed), and a 503 again while Redis is
    // away (nothing to look the conversation up in).
    let from = gw.fake.model_calls().len();
    let mut messages = vec![json!({"role": "user", "content": texts[0]})];
    let (status, kind, _, answer) = plain(&gw, &messages).await;
    assert_eq!((status, kind.as_str()), (200, "new"), "{answer}");
    answered(&mut messages, &answer, texts[1]);
    redis.stop();
    for said in ["could not keep", "is unavailable"] {
        let (status, _, retry, answer) = plain(&gw, &messages).await;
        assert_eq!((status, retry.as_str()), (503, "2"), "{answer}");
        assert_eq!(answer["error"]["type"], "api_error", "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("session store") && message.contains(said),
            "{answer}"
        );
    }

    // Redis back: the conversation goes on from what the store kept, as if nothing happened.
    redis.restart();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let failed = gw.fake.model_calls().len() - 1;
    let (status, kind, _, answer) = plain(&gw, &messages).await;
    assert!(
        status == 200 && kind.starts_with("resumed"),
        "{kind} {answer}"
    );
    answered(&mut messages, &answer, texts[2]);
    let (status, kind, _, answer) = plain(&gw, &messages).await;
    assert_eq!((status, kind.as_str()), (200, "continued"), "{answer}");
    let mut resumed = model_messages(&gw.fake, from);
    resumed.remove(failed - from);
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
        metrics.contains("ccwire_store_failures_total{op=\"turn\"} 1"),
        "{metrics}"
    );
    gw.stop().await;
}
