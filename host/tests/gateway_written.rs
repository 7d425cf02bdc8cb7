//! End-to-end: a history the gateway writes for a new CLI (few-shot examples, an edited past,
//! tool results its CLI no longer waits for) reaches the model as a conversation the CLI ran
//! from its start does: the context the CLI records after a first prompt (its environment,
//! model, listings, date), learned from the key's own conversations, is written there, so
//! the model finds it after the first message and not after the last, and no empty system turn
//! stands in for it.

mod support;

use std::sync::Arc;
use std::time::Duration;

use ccwire_host::store::DirStore;
use ccwire_tests::{Match, Reply, Script};
use serde_json::{json, Value};
use support::*;

/// Where in a model call's messages the CLI's environment context is (by index).
fn environment_at(messages: &[Value]) -> Vec<usize> {
    (messages.iter().enumerate())
        .filter(|(_, m)| m["content"].to_string().contains("# Environment"))
        .map(|(i, _)| i)
        .collect()
}

/// An Anthropic request of `model` with client tools.
fn with_model(model: &str, messages: Value) -> Value {
    json!({"model": model, "max_tokens": 1024, "tools": [lookup_tool()], "messages": messages})
}

/// A message's shape: its role and the kinds of its blocks (the client's words left out).
fn shape(messages: &[Value]) -> Vec<(String, usize)> {
    (messages.iter())
        .map(|m| {
            let blocks = m["content"].as_array().map_or(1, Vec::len);
            (m["role"].as_str().unwrap_or_default().to_owned(), blocks)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_written_history_reaches_the_model_as_the_cli_s_own_conversation_does() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(DirStore::new(
        dir.path().join("store"),
        Duration::from_secs(3600),
    ));
    let script = Script::new()
        .when(Match::Probe, Reply::text("ok"))
        .when(Match::Any, Reply::text("An answer."));
    let gw = Gw::start_with(script, |o| {
        o.store = Some(store);
        o.state_dir = Some(dir.path().join("state"));
        o.cwd = None;
    })
    .await;
    // A Claude model, and an OpenAI name: the CLI's own default (which speaks of its context in
    // system turns).
    for model in [MODEL, "gpt-4o"] {
        // A conversation the CLI runs from its start, two turns.
        let mut native =
            vec![json!({"role": "user", "content": format!("The first question ({model}).")})];
        let (status, kind, answer) = gw
            .call("/v1/messages", &with_model(model, json!(native)), None)
            .await;
        assert_eq!((status, kind.as_str()), (200, "new"), "{answer}");
        native.push(json!({"role": "assistant", "content": answer["content"]}));
        native.push(json!({"role": "user", "content": format!("The second question ({model}).")}));
        let (status, kind, _) = gw
            .call("/v1/messages", &with_model(model, json!(native)), None)
            .await;
        assert_eq!((status, kind.as_str()), (200, "continued"));
        let own = gw.fake.model_calls().pop().unwrap().body["messages"]
            .as_array()
            .unwrap()
            .clone();

        // The same shape of conversation, written by the gateway for a new CLI.
        let written = json!([
            {"role": "user", "content": format!("An example question ({model}).")},
            {"role": "assistant", "content": "An example answer."},
            {"role": "user", "content": format!("The real question ({model}).")},
        ]);
        let response = gw
            .post("/v1/messages", &with_model(model, written), None)
            .await;
        assert_eq!(session_header(&response), "resumed");
        assert_eq!(header(&response, "x-ccwire-session-reason"), "history");
        let sent = gw.fake.model_calls().pop().unwrap().body["messages"]
            .as_array()
            .unwrap()
            .clone();
        assert!(!environment_at(&own).is_empty(), "{own:?}");
        assert_eq!(
            environment_at(&sent),
            environment_at(&own),
            "{}\n--\n{}",
            brief(&sent),
            brief(&own)
        );
        assert_eq!(
            shape(&sent),
            shape(&own),
            "{}\n{}",
            brief(&sent),
            brief(&own)
        );
        let empty_system = |m: &&Value| m["role"] == "system" && m["content"] == json!([]);
        assert!(!sent.iter().any(|m| empty_system(&m)), "{sent:#?}");
        let last = sent.last().unwrap().to_string();
        assert!(
            last.contains(&format!("The real question ({model})."))
                && !last.contains("# Environment")
        );
    }
    gw.stop().await;
}

/// Each message's role and its blocks' first words, for a failure's message.
fn brief(messages: &[Value]) -> String {
    (messages.iter())
        .map(|m| {
            let blocks: Vec<String> = match m["content"].as_array() {
                Some(blocks) => blocks
                    .iter()
                    .map(|b| b["text"].as_str().unwrap_or("?").chars().take(40).collect())
                    .collect(),
                None => vec![m["content"].to_string().chars().take(40).collect()],
            };
            format!("{}: {blocks:?}", m["role"])
        })
        .collect::<Vec<_>>()
        .join("\n")
}
