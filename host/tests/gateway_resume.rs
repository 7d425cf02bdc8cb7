//! End-to-end: conversations outlive their CLIs. With a session store, a conversation whose
//! CLI was closed — hibernated when idle, closed to make room, lost with a gateway killed by
//! SIGKILL — is resumed by a new CLI from its stored transcript, and the model receives the
//! same messages, block for block, as from a CLI that never stopped.

mod support;

use std::sync::Arc;
use std::time::Duration;

use ccwire_core::gateway::{ConversationKey, ConversationRecord};
use ccwire_host::serve::GatewayOptions;
use ccwire_host::store::{ConversationStore, DirStore};
use ccwire_tests::cli::OfflineHome;
use ccwire_tests::{FakeAnthropic, Match, Reply, Script};
use serde_json::{json, Value};
use support::*;

fn store(dir: &std::path::Path) -> Arc<dyn ConversationStore> {
    Arc::new(DirStore::new(dir, Duration::from_secs(3600)))
}

fn with_store(dir: &std::path::Path, hibernate_after_ms: u64) -> impl FnOnce(&mut GatewayOptions) {
    let store = store(dir);
    move |options: &mut GatewayOptions| {
        options.store = Some(store);
        options.engine.limits.hibernate_after_ms = hibernate_after_ms;
    }
}

/// What `GET /metrics` says.
async fn metrics(gw: &Gw) -> String {
    let response = gw.http.get(gw.url("/metrics")).send().await.unwrap();
    response.text().await.unwrap()
}

fn session_kinds(kinds: &[(String, String)]) -> Vec<&str> {
    kinds.iter().map(|(k, _)| k.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hibernated_conversation_resumes_with_the_same_messages() {
    let dir = tempfile::tempdir().unwrap();
    let mut gw = Gw::start(with_store(dir.path(), u64::MAX)).await;
    let url = gw.url("");

    // A conversation that never pauses.
    let mut messages = Vec::new();
    let mut kinds = Vec::new();
    for text in TURNS {
        kinds.extend(turn(&gw.http, &url, &mut messages, text).await);
    }
    assert_eq!(
        session_kinds(&kinds),
        [
            "new",
            "continued",
            "continued",
            "continued",
            "continued",
            "continued"
        ]
    );
    let unpaused = model_messages(&gw.fake, 0);
    assert_eq!(unpaused.len(), 6, "four turns, two tool round trips");

    // The same conversation, its CLI hibernated whenever it waits for nothing: between turns
    // (a turn's tool round trip holds it).
    gw.restart(with_store(dir.path(), 300)).await;
    let url = gw.url("");
    let from = gw.fake.model_calls().len();
    let mut messages = Vec::new();
    let mut kinds = Vec::new();
    for text in TURNS {
        kinds.extend(turn(&gw.http, &url, &mut messages, text).await);
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    assert_eq!(
        kinds,
        [
            ("new", ""),
            ("resumed", "hibernated"),
            ("continued", ""),
            ("resumed", "hibernated"),
            ("resumed", "hibernated"),
            ("continued", ""),
        ]
        .map(|(k, r)| (k.to_owned(), r.to_owned()))
    );
    let paused = model_messages(&gw.fake, from);
    assert_eq!(paused.len(), unpaused.len());
    for (i, (a, b)) in unpaused.iter().zip(&paused).enumerate() {
        assert_eq!(a, b, "the model's call {i} after a resume");
    }

    let metrics = metrics(&gw).await;
    assert!(
        metrics.contains("ccwire_resumes_total{reason=\"hibernated\"} 3"),
        "{metrics}"
    );
    assert!(
        metrics.contains("ccwire_turns_total{session=\"resumed\"} 3"),
        "{metrics}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversations_over_the_cap_take_turns_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let gw = Gw::start(|options| {
        with_store(dir.path(), u64::MAX)(options);
        options.engine.max_sessions = 1;
    })
    .await;
    let url = gw.url("");
    let mut conversations = [Vec::new(), Vec::new(), Vec::new()];
    let mut kinds = Vec::new();
    for text in ["Hello, who are you?", "And what do you make of them?"] {
        for (n, messages) in conversations.iter_mut().enumerate() {
            let text = format!("{text} (conversation {n})");
            kinds.extend(turn(&gw.http, &url, messages, &text).await);
        }
    }
    // Each new conversation closes the idle CLI of the one before; each comes back resumed.
    assert_eq!(
        session_kinds(&kinds),
        ["new", "new", "new", "resumed", "resumed", "resumed"]
    );
    // Each conversation's last call carries its own history, whole.
    let calls = gw.fake.model_calls();
    for (n, call) in calls[3..].iter().enumerate() {
        let sent = call.body["messages"].to_string();
        assert!(
            sent.contains(&format!("Hello, who are you? (conversation {n})")),
            "{sent}"
        );
        for other in (0..3).filter(|o| *o != n) {
            assert!(!sent.contains(&format!("(conversation {other})")), "{sent}");
        }
    }
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_resumes_after_the_gateway_is_killed() {
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_str().unwrap();
    let fake = FakeAnthropic::start(script()).await;
    let home = OfflineHome::new();
    let http = reqwest::Client::new();
    let args = ["--state-dir", state_dir, "--sandbox", "off"];

    // The conversation as it goes with one gateway.
    let serve = ServeProcess::start(&home, &fake, &args, &[]).await;
    let url = format!("http://{}", serve.addr);
    let mut messages = Vec::new();
    for text in TURNS {
        turn(&http, &url, &mut messages, text).await;
    }
    let unpaused = model_messages(&fake, 0);

    // Half of it, the gateway killed, the rest with a new gateway on the same state.
    let from = fake.model_calls().len();
    let mut messages = Vec::new();
    for text in &TURNS[..2] {
        turn(&http, &url, &mut messages, text).await;
    }
    serve.kill().await;
    let serve = ServeProcess::start(&home, &fake, &args, &[]).await;
    let url = format!("http://{}", serve.addr);
    let mut kinds = Vec::new();
    for text in &TURNS[2..] {
        kinds.extend(turn(&http, &url, &mut messages, text).await);
    }
    assert_eq!(
        kinds[0],
        ("resumed".to_owned(), "restarted".to_owned()),
        "{kinds:?}"
    );
    assert_same_calls(&fake, from, &unpaused);
    serve.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_system_prompt_resumes_the_conversation_under_it() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::new()
        .when(Match::Probe, Reply::text("ok"))
        .when(
            Match::SystemContains {
                text: "You are a pirate.".into(),
            },
            Reply::text("Arr."),
        )
        .when(Match::Any, Reply::Echo);
    let gw = Gw::start_with(script, with_store(dir.path(), u64::MAX)).await;
    let first = json!({"model": MODEL, "max_tokens": 1024, "system": "You are terse.",
        "messages": [{"role": "user", "content": "Hello there"}]});
    let (status, kind, answer) = gw.call("/v1/messages", &first, None).await;
    assert_eq!((status, kind.as_str()), (200, "new"), "{answer}");
    let second = json!({"model": MODEL, "max_tokens": 1024, "system": "You are a pirate.",
    "messages": [
        {"role": "user", "content": "Hello there"},
        {"role": "assistant", "content": answer["content"]},
        {"role": "user", "content": "Who are you now?"},
    ]});
    let response = gw.post("/v1/messages", &second, None).await;
    assert_eq!(session_header(&response), "resumed");
    assert_eq!(
        response.headers()["x-ccwire-session-reason"],
        "settings",
        "the settings changed"
    );
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["content"][0]["text"], "Arr.", "{answer}");
    // The model saw the new system prompt and the conversation as messages.
    let call = gw.fake.model_calls().pop().unwrap();
    let sent = call.body["messages"].to_string();
    assert!(sent.contains("Hello there") && sent.contains("Who are you now?"));
    assert!(
        !sent.contains("conversation_history"),
        "not flattened: {sent}"
    );
    assert_eq!(gw.server().session_pids().len(), 1, "the old CLI is closed");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_few_shot_history_reaches_the_model_as_messages_and_then_continues() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let gw = Gw::start(|options| {
        with_store(&dir.path().join("store"), u64::MAX)(options);
        options.state_dir = Some(state);
        options.cwd = None;
    })
    .await;
    // Aider's way: worked examples first, a tool call among them, then the real request.
    let mut messages = vec![
        json!({"role": "user", "content": "Example: change greeting.py to say hello"}),
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "Let me look it up."},
            {"type": "tool_use", "id": "toolu_example_1", "name": "lookup", "input": {"query": "greeting.py"}},
        ]}),
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_example_1", "content": "print('hi')"},
        ]}),
        json!({"role": "assistant", "content": "Done: it now says hello."}),
        json!({"role": "user", "content": "Now the real change, please."}),
    ];
    let body = json!({"model": MODEL, "max_tokens": 1024, "tools": [lookup_tool()],
        "system": "You are Aider, an editor of code.", "messages": messages});
    let response = gw.post("/v1/messages", &body, None).await;
    assert_eq!(session_header(&response), "resumed");
    assert_eq!(response.headers()["x-ccwire-session-reason"], "history");
    let answer: Value = response.json().await.unwrap();
    let call = gw.fake.model_calls().pop().unwrap();
    // Under the client's system prompt.
    assert!(call.body["system"].to_string().contains("You are Aider"));
    let sent = call.body["messages"].as_array().unwrap().clone();
    // The examples are messages, the tool call and its result a pair, named as the CLI
    // offers the client's tool; nothing is retold as text.
    let texts = |m: &Value| -> String { m["content"].to_string() };
    assert!(
        texts(&sent[0]).contains("Example: change greeting.py"),
        "{sent:?}"
    );
    assert_eq!(sent[1]["role"], "assistant");
    assert_eq!(sent[1]["content"][1]["type"], "tool_use");
    assert_eq!(sent[1]["content"][1]["name"], "mcp__client__lookup");
    assert_eq!(sent[2]["content"][0]["type"], "tool_result");
    assert_eq!(sent[2]["content"][0]["tool_use_id"], "toolu_example_1");
    assert!(texts(&sent[3]).contains("Done: it now says hello."));
    assert!(texts(sent.last().unwrap()).contains("Now the real change, please."));
    assert!(!call.body["messages"]
        .to_string()
        .contains("conversation_history"));

    // The next request continues the CLI that took the history.
    messages.push(json!({"role": "assistant", "content": answer["content"]}));
    messages.push(json!({"role": "user", "content": "Thanks."}));
    let body = json!({"model": MODEL, "max_tokens": 1024, "tools": [lookup_tool()],
        "system": "You are Aider, an editor of code.", "messages": messages});
    let (status, kind, _) = gw.call("/v1/messages", &body, None).await;
    assert_eq!((status, kind.as_str()), (200, "continued"));
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_for_a_turn_sent_back_in_another_order_continue_its_cli() {
    let gw = Gw::start(|_| {}).await;
    let mut messages = vec![json!({"role": "user", "content": "PLEASE-LOOKUP both"})];
    let body =
        json!({"model": MODEL, "max_tokens": 1024, "tools": [lookup_tool()], "messages": messages});
    let (status, kind, answer) = gw.call("/v1/messages", &body, None).await;
    assert_eq!((status, kind.as_str()), (200, "new"), "{answer}");
    let mut blocks = answer["content"].as_array().unwrap().clone();
    let calls: Vec<Value> = blocks
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .cloned()
        .collect();
    assert_eq!(calls.len(), 2, "{answer}");
    // The calls first, then the text, the calls swapped: as some adapters rebuild a turn.
    blocks.sort_by_key(|b| b["type"] != "tool_use");
    blocks.swap(0, 1);
    messages.push(json!({"role": "assistant", "content": blocks}));
    messages.push(json!({"role": "user", "content": calls.iter().map(|c| json!({
        "type": "tool_result", "tool_use_id": c["id"],
        "content": format!("record-{}", c["input"]["query"].as_str().unwrap())})).collect::<Vec<_>>()}));
    let body =
        json!({"model": MODEL, "max_tokens": 1024, "tools": [lookup_tool()], "messages": messages});
    let (status, kind, answer) = gw.call("/v1/messages", &body, None).await;
    assert_eq!((status, kind.as_str()), (200, "continued"), "{answer}");
    let sent = gw.fake.model_calls().pop().unwrap().body["messages"].to_string();
    assert!(
        sent.contains("record-alpha") && sent.contains("record-beta"),
        "{sent}"
    );
    assert_eq!(gw.server().session_pids().len(), 1);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_memory_budget_idle_clis_are_hibernated_and_their_conversations_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let gw = Gw::start(|options| {
        with_store(dir.path(), u64::MAX)(options);
        // Less than any CLI takes.
        options.memory_budget = Some(1);
    })
    .await;
    let url = gw.url("");
    let mut messages = Vec::new();
    let kinds = turn(&gw.http, &url, &mut messages, "Hello, who are you?").await;
    assert_eq!(session_kinds(&kinds), ["new"]);
    eventually("the idle CLI is hibernated", || {
        gw.server().session_pids().is_empty()
    })
    .await;
    let kinds = turn(&gw.http, &url, &mut messages, "And now?").await;
    assert_eq!(
        kinds,
        [("resumed".to_owned(), "hibernated".to_owned())],
        "{kinds:?}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_gateway_s_pool_fills_with_what_it_learned_before() {
    let dir = tempfile::tempdir().unwrap();
    let with_pool = |options: &mut GatewayOptions| {
        with_store(dir.path(), u64::MAX)(options);
        options.engine.pool = 2;
    };
    let mut gw = Gw::start(with_pool).await;
    let url = gw.url("");
    // One conversation teaches the pool its settings.
    turn(&gw.http, &url, &mut Vec::new(), "Hello, who are you?").await;
    gw.restart(with_pool).await;
    // Without any request, the pool fills with CLIs of those settings...
    eventually("the pool fills", || gw.server().session_pids().len() == 2).await;
    let metric = |text: &str, name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    let url = gw.url("");
    for _ in 0..150 {
        if metric(&metrics(&gw).await, "ccwire_pool_ready") >= 2.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // ...and the next new conversation with them takes one.
    let kinds = turn(&gw.http, &url, &mut Vec::new(), "A new conversation.").await;
    assert_eq!(session_kinds(&kinds), ["new"]);
    let text = metrics(&gw).await;
    assert_eq!(metric(&text, "ccwire_pool_hits_total"), 1.0, "{text}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_answers_its_tool_calls_another_way_frees_the_waiting_cli() {
    let dir = tempfile::tempdir().unwrap();
    let gw = Gw::start(|options| {
        options.state_dir = Some(dir.path().to_owned());
        options.cwd = None;
    })
    .await;
    let mut messages = vec![json!({"role": "user", "content": "PLEASE-LOOKUP both"})];
    let body =
        json!({"model": MODEL, "max_tokens": 1024, "tools": [lookup_tool()], "messages": messages});
    let (status, _, answer) = gw.call("/v1/messages", &body, None).await;
    assert_eq!(status, 200, "{answer}");
    let waiting = gw.server().session_pids();
    assert_eq!(waiting.len(), 1);
    // The client makes up its own ending for that turn and goes on.
    let calls: Vec<Value> = answer["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .cloned()
        .collect();
    messages.push(json!({"role": "assistant", "content": answer["content"]}));
    messages.push(json!({"role": "user", "content": calls.iter().map(|c| json!({
        "type": "tool_result", "tool_use_id": c["id"], "content": "nothing found"})).collect::<Vec<_>>()}));
    messages.push(json!({"role": "assistant", "content": "Nothing was found."}));
    messages.push(json!({"role": "user", "content": "Then say hello."}));
    let body =
        json!({"model": MODEL, "max_tokens": 1024, "tools": [lookup_tool()], "messages": messages});
    let response = gw.post("/v1/messages", &body, None).await;
    assert_eq!(session_header(&response), "resumed");
    assert_eq!(
        response.headers()["x-ccwire-session-reason"],
        "diverged at message 2"
    );
    assert_eq!(response.status(), 200);
    let sent = gw.fake.model_calls().pop().unwrap().body["messages"].to_string();
    assert!(
        sent.contains("Nothing was found.") && sent.contains("nothing found"),
        "{sent}"
    );
    eventually("the CLI that waited is gone", || !alive(waiting[0])).await;
    assert_eq!(gw.server().session_pids().len(), 1);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_response_outlives_the_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let keyed = |options: &mut GatewayOptions| {
        with_store(dir.path(), u64::MAX)(options);
        options.engine.http.api_keys = vec!["key-a".into(), "key-b".into()];
    };
    let mut gw = Gw::start(keyed).await;
    let key = Some("key-a");
    let first = json!({"model": MODEL, "input": "My codename is ORCHID-R7."});
    let (status, kind, answer) = gw.call("/v1/responses", &first, key).await;
    assert_eq!((status, kind.as_str()), (200, "new"), "{answer}");
    let id = answer["id"].as_str().unwrap().to_owned();

    gw.restart(keyed).await;
    // Another key does not reach it.
    let next = json!({"model": MODEL, "previous_response_id": id, "input": "What is my codename?"});
    let (status, _, error) = gw.call("/v1/responses", &next, Some("key-b")).await;
    assert_eq!(status, 400, "{error}");
    let (status, kind, answer) = gw.call("/v1/responses", &next, key).await;
    assert_eq!((status, kind.as_str()), (200, "resumed"), "{answer}");
    let sent = gw.fake.model_calls().pop().unwrap().body["messages"].clone();
    let last = sent.as_array().unwrap().last().unwrap().to_string();
    assert!(
        last.contains("What is my codename?") && !last.contains("ORCHID-R7"),
        "{last}"
    );
    assert!(
        sent.to_string().contains("My codename is ORCHID-R7."),
        "{sent}"
    );

    // An id the store never kept is still the 400 that names it.
    let unknown = json!({"model": MODEL, "previous_response_id": "resp_0123", "input": "Hi"});
    let (status, _, error) = gw.call("/v1/responses", &unknown, key).await;
    assert_eq!(status, 400, "{error}");
    assert!(
        error.to_string().contains("previous_response_id"),
        "{error}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_thinking_a_client_sends_back_reaches_the_model_again() {
    let dir = tempfile::tempdir().unwrap();
    let gw = Gw::start(|options| {
        options.state_dir = Some(dir.path().to_owned());
        options.cwd = None;
    })
    .await;
    let body = json!({"model": MODEL, "max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 1024},
    "messages": [
        {"role": "user", "content": "What is 6 times 7?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Six sevens are forty-two.", "signature": "sig-from-the-api"},
            {"type": "text", "text": "42."},
        ]},
        {"role": "user", "content": "And 6 times 8?"},
    ]});
    let response = gw.post("/v1/messages", &body, None).await;
    assert_eq!(session_header(&response), "resumed");
    assert_eq!(response.status(), 200);
    let sent = gw.fake.model_calls().pop().unwrap().body["messages"].clone();
    let answer = sent
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .cloned()
        .unwrap();
    assert_eq!(
        answer["content"][0],
        json!({"type": "thinking", "thinking": "Six sevens are forty-two.", "signature": "sig-from-the-api"}),
        "{answer}"
    );
    gw.stop().await;
}

/// `GET /v1/conversations` with `key`.
async fn listed(gw: &Gw, key: &str) -> Value {
    let response = gw
        .http
        .get(gw.url("/v1/conversations"))
        .header("x-api-key", key)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    response.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_lists_a_hibernated_conversation_and_shows_its_stored_transcript() {
    let dir = tempfile::tempdir().unwrap();
    let stored = with_store(dir.path(), 300);
    let gw = Gw::start(|options| {
        stored(options);
        options.engine.console = true;
        options.engine.http.api_keys = vec!["alice".into(), "bob".into()];
    })
    .await;
    let ask = json!([{"role": "user", "content": "Remember PINEAPPLE"}]);
    let first = gw
        .post("/v1/messages", &anthropic(ask), Some("alice"))
        .await;
    assert_eq!(first.status().as_u16(), 200);
    let answer = text_of(&first.json().await.unwrap());
    assert!(answer.contains("PINEAPPLE"), "{answer}");

    // Hibernated after 0.3 s idle: still listed, from the store, with its model.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let row = loop {
        let list = listed(&gw, "alice").await;
        let rows = list["data"].as_array().unwrap().clone();
        assert_eq!(rows.len(), 1, "listed once: {list}");
        if rows[0]["state"] == "hibernated" {
            break rows[0].clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never hibernated: {list}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(row["closed"], "hibernated", "{row}");
    assert!(row["model"].is_string(), "the model its CLI ran: {row}");
    assert_eq!(listed(&gw, "bob").await["data"], json!([]));

    // Its stream: the stored transcript's cards (the prompt and the model's answer), then
    // its end; another key cannot read it.
    let id = row["id"].as_str().unwrap();
    let events = gw.url(&format!("/v1/conversations/{id}/events"));
    let response = gw
        .http
        .get(&events)
        .header("x-api-key", "alice")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let text = response.text().await.unwrap();
    assert!(text.starts_with("event: conversation\n"), "{text}");
    assert!(
        text.contains("\"type\":\"user_text\",\"text\":\"Remember PINEAPPLE\""),
        "{text}"
    );
    let escaped = json!(answer).to_string();
    assert!(
        text.contains(&escaped[1..escaped.len() - 1]),
        "the model's answer: {text}"
    );
    assert!(
        !text.contains("\"type\":\"unknown\""),
        "only its messages: {text}"
    );
    assert!(
        text.ends_with("\n\n") && text.contains("event: closed\n"),
        "{text}"
    );
    let tenant = row["tenant"].as_str().unwrap();
    let theirs = gw
        .http
        .get(format!("{events}?tenant={tenant}"))
        .header("x-api-key", "bob")
        .send()
        .await
        .unwrap();
    assert_eq!(theirs.status().as_u16(), 404);
    gw.stop().await;
}

/// A directory store whose transcript reads fail while `down` is set.
#[derive(Debug)]
struct LoadsFail {
    inner: DirStore,
    down: std::sync::atomic::AtomicBool,
}

type Fut<'a, T> = futures::future::BoxFuture<'a, std::io::Result<T>>;

impl ConversationStore for LoadsFail {
    fn append<'a>(&'a self, key: &'a ConversationKey, lines: Vec<String>) -> Fut<'a, u64> {
        self.inner.append(key, lines)
    }
    fn usage<'a>(&'a self, tenant: &'a str) -> Fut<'a, u64> {
        self.inner.usage(tenant)
    }
    fn save<'a>(&'a self, record: &'a ConversationRecord) -> Fut<'a, ()> {
        self.inner.save(record)
    }
    fn find<'a>(&'a self, tenant: &'a str, hash: &'a str) -> Fut<'a, Option<ConversationRecord>> {
        self.inner.find(tenant, hash)
    }
    fn load<'a>(&'a self, key: &'a ConversationKey) -> Fut<'a, Option<Vec<String>>> {
        if self.down.load(std::sync::atomic::Ordering::SeqCst) {
            return Box::pin(async { Err(std::io::Error::other("the disk is gone")) });
        }
        self.inner.load(key)
    }
    fn peek<'a>(&'a self, key: &'a ConversationKey) -> Fut<'a, Option<Vec<String>>> {
        self.inner.peek(key)
    }
    fn list<'a>(
        &'a self,
        tenant: Option<&'a str>,
        limit: usize,
    ) -> Fut<'a, Vec<ConversationRecord>> {
        self.inner.list(tenant, limit)
    }
    fn save_response<'a>(&'a self, tenant: &'a str, id: &'a str, response: String) -> Fut<'a, ()> {
        self.inner.save_response(tenant, id, response)
    }
    fn load_response<'a>(&'a self, tenant: &'a str, id: &'a str) -> Fut<'a, Option<String>> {
        self.inner.load_response(tenant, id)
    }
    fn save_managed<'a>(
        &'a self,
        tenant: &'a str,
        kind: &'a str,
        id: &'a str,
        json: Option<String>,
    ) -> Fut<'a, ()> {
        self.inner.save_managed(tenant, kind, id, json)
    }
    fn load_managed<'a>(&'a self, tenant: &'a str) -> Fut<'a, Vec<(String, String)>> {
        self.inner.load_managed(tenant)
    }
    fn add_usage<'a>(
        &'a self,
        day: &'a str,
        tenant: &'a str,
        model: &'a str,
        tally: ccwire_core::gateway::usage::Tally,
    ) -> Fut<'a, ()> {
        self.inner.add_usage(day, tenant, model, tally)
    }
    fn read_usage<'a>(
        &'a self,
        from: &'a str,
        to: &'a str,
        tenant: Option<&'a str>,
    ) -> Fut<'a, Vec<ccwire_core::gateway::usage::UsageRow>> {
        self.inner.read_usage(from, to, tenant)
    }
    fn keep_window<'a>(&'a self, window: &'a ccwire_core::gateway::usage::Window) -> Fut<'a, ()> {
        self.inner.keep_window(window)
    }
    fn windows(&self) -> Fut<'_, Vec<ccwire_core::gateway::usage::Window>> {
        self.inner.windows()
    }
    fn save_key<'a>(&'a self, id: &'a str, json: Option<String>) -> Fut<'a, ()> {
        self.inner.save_key(id, json)
    }
    fn load_keys(&self) -> Fut<'_, Vec<String>> {
        self.inner.load_keys()
    }
    fn save_pool(&self, settings: String) -> Fut<'_, ()> {
        self.inner.save_pool(settings)
    }
    fn load_pool(&self) -> Fut<'_, Option<String>> {
        self.inner.load_pool()
    }
    fn sweep(&self, budget: usize) -> Fut<'_, ccwire_host::store::Swept> {
        self.inner.sweep(budget)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transcript_the_store_cannot_give_back_is_a_503_to_retry_not_a_500() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(LoadsFail {
        inner: DirStore::new(dir.path(), Duration::from_secs(3600)),
        down: std::sync::atomic::AtomicBool::new(false),
    });
    let kept = store.clone();
    let gw = Gw::start(move |options| {
        options.store = Some(kept);
        options.engine.limits.hibernate_after_ms = 300;
    })
    .await;
    let url = gw.url("");
    let mut messages = Vec::new();
    turn(&gw.http, &url, &mut messages, "Remember MANGO").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // Hibernated; its transcript cannot be read back now.
    store.down.store(true, std::sync::atomic::Ordering::SeqCst);
    messages.push(json!({"role": "user", "content": "And now?"}));
    let refused = gw
        .post("/v1/messages", &anthropic(json!(messages)), None)
        .await;
    assert_eq!(refused.status().as_u16(), 503);
    assert_eq!(header(&refused, "retry-after"), "2");
    let body: Value = refused.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("retry shortly"),
        "{body}"
    );

    // Back: the same request, sent again after the `retry-after` (before it, a store that has
    // just failed is not called again), resumes it.
    store.down.store(false, std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let again = gw
        .post("/v1/messages", &anthropic(json!(messages)), None)
        .await;
    assert_eq!(again.status().as_u16(), 200);
    assert_eq!(header(&again, "x-ccwire-session"), "resumed");
    let metrics = metrics(&gw).await;
    assert!(
        metrics.contains("ccwire_store_failures_total{op=\"load\"} 1"),
        "{metrics}"
    );
    gw.stop().await;
}

/// The directory store heals: a conversation whose stored record does not read, or whose
/// transcript is gone, goes on from the history its request carries (the record set aside,
/// once, instead of a 503 or a 500 on every retry); one whose transcript ends in a line a crash
/// cut short resumes from the store, the torn line left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_record_a_lost_transcript_and_a_torn_line_each_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let gw = Gw::start(with_store(dir.path(), 300)).await;
    let url = gw.url("");
    let mut conversations: Vec<Vec<Value>> = Vec::new();
    for word in ["MANGO", "KIWI", "PAPAYA"] {
        let mut messages = Vec::new();
        turn(&gw.http, &url, &mut messages, &format!("Remember {word}")).await;
        conversations.push(messages);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // Each conversation's directory in the store, by the word its transcript holds.
    let mut dirs = std::collections::BTreeMap::new();
    for tenant in std::fs::read_dir(dir.path()).unwrap().flatten() {
        for entry in std::fs::read_dir(tenant.path()).unwrap().flatten() {
            let transcript = entry.path().join("transcript.jsonl");
            let Ok(text) = std::fs::read_to_string(&transcript) else {
                continue;
            };
            for word in ["MANGO", "KIWI", "PAPAYA"] {
                if text.contains(word) {
                    dirs.insert(word, entry.path());
                }
            }
        }
    }
    assert_eq!(dirs.len(), 3, "{dirs:?}");
    std::fs::write(dirs["MANGO"].join("record.json"), b"{\"key\": {\"ten").unwrap();
    std::fs::remove_file(dirs["KIWI"].join("transcript.jsonl")).unwrap();
    let mut torn = std::fs::OpenOptions::new()
        .append(true)
        .open(dirs["PAPAYA"].join("transcript.jsonl"))
        .unwrap();
    std::io::Write::write_all(&mut torn, b"{\"type\":\"user\",\"mess").unwrap();

    for (messages, word) in conversations.iter_mut().zip(["MANGO", "KIWI", "PAPAYA"]) {
        let from = gw.fake.model_calls().len();
        let kinds = turn(&gw.http, &url, messages, "What did I ask you to remember?").await;
        let call = &gw.fake.model_calls()[from];
        assert!(
            call.body["messages"].to_string().contains(word),
            "{word}: the model has the history: {kinds:?}"
        );
        if word == "PAPAYA" {
            assert_eq!(kinds[0].0, "resumed", "{kinds:?}");
        }
    }
    assert!(dirs["MANGO"].join("record.json.broken").exists());
    assert!(dirs["KIWI"].join("record.json.broken").exists());
    let metrics = metrics(&gw).await;
    assert!(
        !metrics.contains("ccwire_store_failures_total{op=\"find\"}"),
        "{metrics}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_over_its_store_quota_gets_a_413_from_its_next_turn_on_after_a_restart_too() {
    let dir = tempfile::tempdir().unwrap();
    let quota = |dir: &std::path::Path| {
        let store = with_store(dir, u64::MAX);
        move |options: &mut GatewayOptions| {
            store(options);
            options.engine.store_quota = Some(2000);
        }
    };
    let post = |gw: &Gw, text: &str| {
        let body = json!({"model": "claude-sonnet-4-5", "max_tokens": 100,
                          "messages": [{"role": "user", "content": text}]});
        gw.http.post(gw.url("/v1/messages")).json(&body).send()
    };
    let gw = Gw::start(quota(dir.path())).await;
    // The first turn writes more than 2,000 bytes of transcript (the CLI's own lines).
    assert_eq!(post(&gw, "One").await.unwrap().status(), 200);
    let refused = post(&gw, "Two").await.unwrap();
    assert_eq!(refused.status(), 413);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["type"], "request_too_large", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("limit of 2000 bytes per key"), "{message}");
    let calls = gw.fake.model_calls().len();
    assert_eq!(calls, 1, "the refused turn reached no model");
    gw.stop().await;

    // A gateway started again asks the store when the key comes back: the first turn goes
    // ahead, the next is refused.
    let gw = Gw::start(quota(dir.path())).await;
    assert_eq!(post(&gw, "Three").await.unwrap().status(), 200);
    assert_eq!(post(&gw, "Four").await.unwrap().status(), 413);
    gw.stop().await;
}
