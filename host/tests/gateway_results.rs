//! End-to-end: a client's tool results reach the model as `tool_result` blocks whatever
//! became of the CLI that made the calls — it gave up waiting for them, the request changed
//! the conversation's settings, the call was a forced one whose CLI is gone, the gateway was
//! restarted. A new CLI resumes the history written with the results and goes on from them
//! by itself; no held call is left waiting.

mod support;

use std::sync::Arc;
use std::time::Duration;

use ccwire_core::gateway::{Limits, HELD_CALL_TIMEOUT_TEXT};
use ccwire_host::serve::GatewayOptions;
use ccwire_host::store::DirStore;
use ccwire_tests::{Match, Reply, Script};
use serde_json::{json, Value};
use support::*;

/// A gateway as `ccwire serve` runs by default: a state directory with each tenant's own.
fn with_state(dir: &std::path::Path) -> impl FnOnce(&mut GatewayOptions) + '_ {
    move |options: &mut GatewayOptions| {
        options.state_dir = Some(dir.join("state"));
        options.cwd = None;
    }
}

/// The messages of the model's last call.
fn last_sent(gw: &Gw) -> Vec<Value> {
    let call = gw.fake.model_calls().pop().expect("a model call");
    call.body["messages"].as_array().unwrap().clone()
}

/// The model's last call saw the two lookups as calls of the client's tool followed by their
/// results, as blocks: never retold as text.
fn assert_results_as_blocks(gw: &Gw, first: &Value) {
    let sent = last_sent(gw);
    let text = Value::Array(sent.clone()).to_string();
    assert!(!text.contains("conversation_history"), "{text}");
    let calls: Vec<&Value> = sent
        .iter()
        .filter(|m| m["role"] == "assistant")
        .flat_map(|m| m["content"].as_array().unwrap())
        .filter(|b| b["type"] == "tool_use")
        .collect();
    let ids: Vec<&Value> = first["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .map(|b| &b["id"])
        .collect();
    assert_eq!(calls.len(), ids.len(), "{text}");
    for (call, id) in calls.iter().zip(&ids) {
        assert_eq!(
            (&call["id"], &call["name"]),
            (*id, &json!("mcp__client__lookup"))
        );
    }
    let results: Vec<&Value> = sent
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .collect();
    assert_eq!(results.len(), ids.len(), "{text}");
    for (result, id) in results.iter().zip(&ids) {
        assert_eq!(&result["tool_use_id"], *id);
    }
    assert!(
        text.contains("record-alpha") && text.contains("record-beta"),
        "{text}"
    );
    // The calls' message is followed by the results'.
    let at = sent
        .iter()
        .position(|m| m.to_string().contains("tool_use"))
        .unwrap();
    assert_eq!(sent[at + 1]["content"][0]["type"], "tool_result", "{text}");
}

/// Sends `body`, which a new CLI must take as a resumed conversation for `reason`; the
/// answer, the model's last (not a call).
async fn resumed_because(gw: &Gw, body: &Value, reason: &str) -> Value {
    let response = gw.post("/v1/messages", body, None).await;
    assert_eq!(response.status(), 200);
    assert_eq!(session_header(&response), "resumed");
    assert_eq!(header(&response, "x-ccwire-session-reason"), reason);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["stop_reason"], "end_turn", "{answer}");
    answer
}

/// The client tool calls the gateway holds, once they are `n` (waiting up to 30 s).
async fn held_calls_become(gw: &Gw, n: u64) {
    for _ in 0..150 {
        if gw.health().await["held_tool_calls"].as_u64() == Some(n) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the gateway does not hold {n} calls: {}", gw.health().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_after_the_held_call_timeout_resume_the_history_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let gw = Gw::start(|o| {
        with_state(dir.path())(o);
        o.engine.limits = Limits {
            held_call_timeout_ms: 1500,
            ..Limits::default()
        }
    })
    .await;
    let (user, first) = ask_for_lookups(&gw).await;
    // No result in time: the gateway answers the held calls with an error, the turn goes on.
    model_sees_the_held_call_timeout(&gw).await;
    let mut messages = vec![
        user,
        json!({"role": "assistant", "content": first["content"]}),
        json!({"role": "user", "content": results_for(&first)}),
    ];
    let answer = resumed_because(&gw, &anthropic(json!(messages)), "late").await;
    assert_results_as_blocks(&gw, &first);
    assert!(!last_sent(&gw)
        .iter()
        .any(|m| m.to_string().contains(HELD_CALL_TIMEOUT_TEXT)));

    // The conversation goes on in the CLI that took it.
    messages.push(json!({"role": "assistant", "content": answer["content"]}));
    messages.push(json!({"role": "user", "content": "Thanks."}));
    let (status, kind, body) = gw
        .call("/v1/messages", &anthropic(json!(messages)), None)
        .await;
    assert_eq!((status, kind.as_str()), (200, "continued"), "{body}");
    held_calls_become(&gw, 0).await;
    assert_eq!(gw.server().session_pids().len(), 1);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_under_new_settings_take_them_and_free_the_cli_that_held_the_calls() {
    let dir = tempfile::tempdir().unwrap();
    let gw = Gw::start(with_state(dir.path())).await;
    let (user, first) = ask_for_lookups(&gw).await;
    let holder = gw.server().session_pids();
    assert_eq!(holder.len(), 1);
    held_calls_become(&gw, 2).await;

    // AutoGen's reflection: the results, with no tools and a system prompt of its own.
    let body = json!({"model": MODEL, "max_tokens": 1024, "system": "Reflect on the results.",
    "messages": [
        user,
        {"role": "assistant", "content": first["content"]},
        {"role": "user", "content": results_for(&first)},
    ]});
    resumed_because(&gw, &body, "settings").await;
    assert_results_as_blocks(&gw, &first);
    let call = gw.fake.model_calls().pop().unwrap();
    assert!(call.body["system"]
        .to_string()
        .contains("Reflect on the results."));
    // The CLI that held the calls is closed: nothing waits.
    held_calls_become(&gw, 0).await;
    eventually("the holder is closed", || holder.iter().all(|p| !alive(*p))).await;
    assert_eq!(gw.server().session_pids().len(), 1);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_call_s_result_and_the_next_words_reach_the_model_as_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::new()
        .when(Match::Probe, Reply::text("ok"))
        .on_prompt(
            "PLEASE-FORCE",
            Reply::tool("StructuredOutput", json!({"query": "alpha"})),
        )
        .when(Match::Any, Reply::Echo);
    let gw = Gw::start_with(script, with_state(dir.path())).await;
    // instructor's and pydantic-ai's way: the tool forced, then its result sent back.
    let user = json!({"role": "user", "content": "PLEASE-FORCE a lookup"});
    let mut body = anthropic(json!([user]));
    body["tool_choice"] = json!({"type": "tool", "name": "lookup"});
    let (status, _, first) = gw.call("/v1/messages", &body, None).await;
    assert_eq!(status, 200, "{first}");
    let call = &first["content"][0];
    assert_eq!(
        (&call["name"], &call["input"]),
        (&json!("lookup"), &json!({"query": "alpha"}))
    );

    let messages = json!([
        user,
        {"role": "assistant", "content": first["content"]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call["id"], "content": "record-alpha"},
            {"type": "text", "text": "Summarize it."},
        ]},
    ]);
    resumed_because(&gw, &anthropic(messages), "history").await;
    let sent = last_sent(&gw);
    let text = Value::Array(sent.clone()).to_string();
    assert!(!text.contains("conversation_history"), "{text}");
    let at = sent
        .iter()
        .position(|m| m["role"] == "assistant" && m.to_string().contains("tool_use"))
        .expect("the call");
    assert_eq!(
        sent[at]["content"][0]["name"], "mcp__client__lookup",
        "{text}"
    );
    assert_eq!(sent[at]["content"][0]["id"], call["id"]);
    // The result, then the client's words in the same user message, and nothing of ours.
    let next = sent[at + 1]["content"].as_array().unwrap();
    assert_eq!(next[0]["type"], "tool_result", "{text}");
    assert_eq!(next[0]["tool_use_id"], call["id"]);
    assert_eq!(next.last().unwrap()["text"], "Summarize it.", "{text}");
    assert!(!text.contains("Continue from where you left off"), "{text}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_for_calls_a_stopped_gateway_held_reach_the_model_as_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(DirStore::new(
        dir.path().join("store"),
        Duration::from_secs(3600),
    ));
    let configure = |o: &mut GatewayOptions| {
        with_state(dir.path())(o);
        o.store = Some(store.clone());
    };
    let mut gw = Gw::start(configure).await;
    let (user, first) = ask_for_lookups(&gw).await;
    // The gateway stops while the client runs its tools.
    gw.restart(configure).await;
    let messages = json!([
        user,
        {"role": "assistant", "content": first["content"]},
        {"role": "user", "content": results_for(&first)},
    ]);
    // The stopped gateway kept no transcript of a turn it held: the history the client sent
    // is the one there is.
    resumed_because(&gw, &anthropic(messages), "history").await;
    assert_results_as_blocks(&gw, &first);
    gw.stop().await;
}
