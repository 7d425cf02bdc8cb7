//! End-to-end: the thinking and effort a request asks for reach the model through the CLI's
//! own settings (`--thinking`, `--max-thinking-tokens`, `--effort`), a live session keeps the
//! settings it started with, and the model's thinking comes back to clients that asked for it,
//! in each API's shape.

mod support;

use ccwire_tests::{Match, Reply, Script};
use serde_json::{json, Value};
use support::*;

fn thinking_script() -> Script {
    Script::new()
        .when(Match::Probe, Reply::text("ok"))
        .on_prompt(
            "PLEASE-THINK",
            Reply::Thinking {
                thinking: "Pondering the question.".into(),
                text: "Thought it through.".into(),
            },
        )
        .when(Match::Any, Reply::Echo)
}

/// What the model received in the last model call: its `thinking` and `output_config`.
fn model_settings(gw: &Gw) -> (Value, Value) {
    let call = gw.fake.model_calls().pop().unwrap();
    (
        call.body["thinking"].clone(),
        call.body["output_config"].clone(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_and_effort_reach_the_model_in_every_api() {
    let gw = Gw::start_with(thinking_script(), |_| {}).await;
    let anthropic_request = |model: &str, thinking: Value, effort: Value| {
        let mut body =
            anthropic(json!([{"role": "user", "content": format!("Hi {thinking} {effort}")}]));
        body["model"] = json!(model);
        body["thinking"] = thinking;
        body["output_config"] = json!({"effort": effort});
        body
    };
    let cases = [
        (
            anthropic_request(
                "claude-sonnet-4-5",
                json!({"type": "disabled"}),
                Value::Null,
            ),
            json!({"type": "disabled"}),
            Value::Null,
        ),
        (
            anthropic_request(
                "claude-sonnet-4-5",
                json!({"type": "enabled", "budget_tokens": 2048}),
                Value::Null,
            ),
            json!({"type": "enabled", "budget_tokens": 2048, "display": "updates"}),
            Value::Null,
        ),
        (
            anthropic_request("claude-opus-4-7", json!({"type": "adaptive"}), json!("low")),
            json!({"type": "adaptive", "display": "updates"}),
            json!({"effort": "low"}),
        ),
    ];
    for (body, thinking, output_config) in cases {
        let (status, _, answer) = gw.call("/v1/messages", &body, None).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(model_settings(&gw), (thinking, output_config), "{body}");
    }

    // Chat Completions: `reasoning_effort`, `none` turning thinking off.
    let chat = json!({"model": "claude-opus-4-7", "reasoning_effort": "high",
        "messages": [{"role": "user", "content": "Hi chat"}]});
    let (status, _, answer) = gw.call("/v1/chat/completions", &chat, None).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(model_settings(&gw).1, json!({"effort": "high"}));
    let chat = json!({"model": "claude-opus-4-7", "reasoning_effort": "none",
        "messages": [{"role": "user", "content": "Hi chat again"}]});
    let (status, _, answer) = gw.call("/v1/chat/completions", &chat, None).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(model_settings(&gw).0, json!({"type": "disabled"}));

    // Responses: `reasoning.effort`, `minimal` being the CLI's `low`.
    let responses = json!({"model": "claude-opus-4-7", "reasoning": {"effort": "minimal"},
        "input": "Hi responses"});
    let (status, _, answer) = gw.call("/v1/responses", &responses, None).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(model_settings(&gw).1, json!({"effort": "low"}));

    // A value the API would refuse is a 400 naming the field.
    let mut bad = anthropic_request("claude-opus-4-7", Value::Null, json!("extreme"));
    bad["thinking"] = Value::Null;
    let (status, _, answer) = gw.call("/v1/messages", &bad, None).await;
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("output_config.effort"),
        "{answer}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_session_keeps_its_settings_and_a_change_starts_another() {
    let gw = Gw::start_with(thinking_script(), |_| {}).await;
    let request = |messages: Value, effort: &str| {
        let mut body = anthropic(messages);
        body["model"] = json!("claude-opus-4-7");
        body["output_config"] = json!({"effort": effort});
        body
    };
    let user = json!({"role": "user", "content": "One"});
    let (status, kind, first) = gw
        .call("/v1/messages", &request(json!([user]), "low"), None)
        .await;
    assert_eq!((status, kind.as_str()), (200, "new"), "{first}");
    let history = json!([user, {"role": "assistant", "content": first["content"]},
        {"role": "user", "content": "Two"}]);
    let (status, kind, _) = gw
        .call("/v1/messages", &request(history.clone(), "low"), None)
        .await;
    assert_eq!((status, kind.as_str()), (200, "continued"));
    let mut changed = history.as_array().unwrap().clone();
    changed[2] = json!({"role": "user", "content": "Two, harder"});
    let (status, kind, _) = gw
        .call("/v1/messages", &request(json!(changed), "max"), None)
        .await;
    assert_eq!(
        (status, kind.as_str()),
        (200, "rebuilt"),
        "another effort: another session"
    );
    assert_eq!(model_settings(&gw).1, json!({"effort": "max"}));
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_s_thinking_comes_back_when_asked_for() {
    let gw = Gw::start_with(thinking_script(), |_| {}).await;
    // Anthropic: thinking enabled shows thinking blocks, streamed and not; not enabled, none.
    let mut body = anthropic(json!([{"role": "user", "content": "PLEASE-THINK one"}]));
    let (status, _, answer) = gw.call("/v1/messages", &body, None).await;
    assert_eq!(status, 200, "{answer}");
    let types: Vec<&str> = answer["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["text"], "thinking not asked for: {answer}");
    body["messages"][0]["content"] = json!("PLEASE-THINK two");
    body["thinking"] = json!({"type": "enabled", "budget_tokens": 1024});
    let (status, _, answer) = gw.call("/v1/messages", &body, None).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["content"][0]["type"], "thinking", "{answer}");
    assert_eq!(answer["content"][0]["thinking"], "Pondering the question.");
    assert_eq!(answer["content"][1]["text"], "Thought it through.");
    body["messages"][0]["content"] = json!("PLEASE-THINK three");
    body["stream"] = json!(true);
    let (status, _, data) = gw.stream("/v1/messages", &body).await;
    assert_eq!(status, 200);
    let thinking: String = data
        .iter()
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .filter(|e| e["delta"]["type"] == "thinking_delta")
        .map(|e| e["delta"]["thinking"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(thinking, "Pondering the question.");

    // Chat Completions with a reasoning effort: reasoning_content.
    let chat = json!({"model": "gpt-5", "reasoning_effort": "low",
        "messages": [{"role": "user", "content": "PLEASE-THINK four"}]});
    let (status, _, answer) = gw.call("/v1/chat/completions", &chat, None).await;
    assert_eq!(status, 200, "{answer}");
    let message = &answer["choices"][0]["message"];
    assert_eq!(message["reasoning_content"], "Pondering the question.");
    assert_eq!(message["content"], "Thought it through.");

    // Responses with a reasoning summary: a reasoning item before the message.
    let responses = json!({"model": "gpt-5", "reasoning": {"summary": "auto"},
        "input": "PLEASE-THINK five"});
    let (status, _, answer) = gw.call("/v1/responses", &responses, None).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["output"][0]["type"], "reasoning", "{answer}");
    assert_eq!(
        answer["output"][0]["summary"],
        json!([{"type": "summary_text", "text": "Pondering the question."}])
    );
    assert_eq!(
        answer["output"][1]["content"][0]["text"],
        "Thought it through."
    );
    gw.stop().await;
}
