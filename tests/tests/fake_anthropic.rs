//! The fake Messages API answers as the real one does.

use ccwire_tests::{FakeAnthropic, Match, Reply, Script};
use serde_json::{json, Value};

async fn post(server: &FakeAnthropic, path: &str, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}{path}", server.base_url()))
        .header("x-api-key", "dummy")
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// The `data:` payloads of an SSE body.
fn sse_data(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

fn request(prompt: &str, stream: bool) -> Value {
    json!({"model": "m", "max_tokens": 100, "stream": stream, "messages": [{"role": "user", "content": prompt}]})
}

#[tokio::test]
async fn streams_text_as_the_real_api_does() {
    let server =
        FakeAnthropic::start(Script::new().on_prompt("hi", Reply::text("Hello there, friend.")))
            .await;
    let response = post(&server, "/v1/messages?beta=true", request("hi", true)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let events = sse_data(&response.text().await.unwrap());
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"message_start"));
    assert_eq!(types.last(), Some(&"message_stop"));
    let text: String = events
        .iter()
        .filter(|e| e["delta"]["type"] == "text_delta")
        .map(|e| e["delta"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Hello there, friend.");
    assert!(
        events
            .iter()
            .filter(|e| e["delta"]["type"] == "text_delta")
            .count()
            > 1
    );
    let delta = events
        .iter()
        .find(|e| e["type"] == "message_delta")
        .unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
}

#[tokio::test]
async fn streams_several_tool_calls_with_input_in_pieces() {
    let reply = Reply::ToolUse {
        text: Some("Checking.".into()),
        calls: vec![
            ccwire_tests::fake_anthropic::ToolCall {
                name: "lookup".into(),
                input: json!({"query": "alpha"}),
            },
            ccwire_tests::fake_anthropic::ToolCall {
                name: "lookup".into(),
                input: json!({"query": "beta"}),
            },
        ],
    };
    let server = FakeAnthropic::start(Script::new().on_prompt("go", reply)).await;
    let events = sse_data(
        &post(&server, "/v1/messages", request("go", true))
            .await
            .text()
            .await
            .unwrap(),
    );
    for index in [1, 2] {
        let joined: String = events
            .iter()
            .filter(|e| e["index"] == index && e["delta"]["type"] == "input_json_delta")
            .map(|e| e["delta"]["partial_json"].as_str().unwrap())
            .collect();
        let input: Value = serde_json::from_str(&joined).unwrap();
        assert_eq!(input["query"], if index == 1 { "alpha" } else { "beta" });
    }
    let delta = events
        .iter()
        .find(|e| e["type"] == "message_delta")
        .unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
}

#[tokio::test]
async fn answers_json_when_not_streaming_and_errors_with_headers() {
    let script = Script::new()
        .on_prompt(
            "fail",
            Reply::Error {
                status: 529,
                error_type: "overloaded_error".into(),
                message: "Overloaded".into(),
                retry_after: Some(7),
                should_retry: Some(false),
            },
        )
        .when(Match::Any, Reply::text("plain"));
    let server = FakeAnthropic::start(script).await;
    let message: Value = post(&server, "/v1/messages", request("x", false))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(message["content"][0]["text"], "plain");
    assert_eq!(message["stop_reason"], "end_turn");

    let response = post(&server, "/v1/messages", request("fail", true)).await;
    assert_eq!(response.status(), 529);
    assert_eq!(response.headers()["retry-after"], "7");
    assert_eq!(response.headers()["x-should-retry"], "false");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "overloaded_error");
}

#[tokio::test]
async fn counts_tokens_and_records_every_request() {
    let server = FakeAnthropic::start(Script::new()).await;
    let counted: Value = post(&server, "/v1/messages/count_tokens", request("foo", false))
        .await
        .json()
        .await
        .unwrap();
    assert!(counted["input_tokens"].as_u64().unwrap() > 0);
    post(&server, "/v1/messages", request("remember me", true))
        .await
        .text()
        .await
        .unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].path, "/v1/messages/count_tokens");
    assert!(requests[1].is_model_call());
    assert_eq!(requests[1].last_user_text(), "remember me");
    assert!(requests[1]
        .headers
        .iter()
        .any(|(k, v)| k == "x-api-key" && v == "dummy"));
    let missing = reqwest::get(format!("{}/nope", server.base_url()))
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}

#[tokio::test]
async fn rules_match_on_the_conversation_not_the_call_order() {
    let script = Script::new()
        .when(
            Match::ToolResult {
                tool: Some("lookup".into()),
            },
            Reply::text("after lookup"),
        )
        .on_prompt("weather", Reply::tool("lookup", json!({"q": 1})));
    let server = FakeAnthropic::start(script).await;
    let after = json!({"model": "m", "max_tokens": 10, "stream": false, "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}]}
    ]});
    let message: Value = post(&server, "/v1/messages", after.clone())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(message["content"][0]["text"], "after lookup");
    let first: Value = post(&server, "/v1/messages", request("weather?", false))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(first["content"][0]["name"], "lookup");
    // The script also loads from JSON.
    let from_json: Script = serde_json::from_value(json!({"rules": [
        {"when": {"kind": "any"}, "reply": {"kind": "text", "text": "hi"}}
    ]}))
    .unwrap();
    assert_eq!(from_json.rules.len(), 1);
}

#[tokio::test]
async fn the_control_api_sets_the_script_and_lists_model_calls() {
    let server = FakeAnthropic::start(Script::new()).await;
    let http = reqwest::Client::new();
    let script = Script::new().on_prompt("ping", Reply::text("pong"));
    let set = http
        .put(format!("{}/_fake/script", server.base_url()))
        .json(&script)
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), 204);
    let bad = http
        .put(format!("{}/_fake/script", server.base_url()))
        .json(&json!({"rules": [{"when": {"kind": "nope"}}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let response = post(&server, "/v1/messages", request("ping", true)).await;
    let events = sse_data(&response.text().await.unwrap());
    let text: String = events
        .iter()
        .filter_map(|e| e["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "pong");
    let calls: Value = http
        .get(format!("{}/_fake/calls", server.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(calls.as_array().unwrap().len(), 1, "{calls}");
    assert_eq!(calls[0]["last_user_text"], "ping");
    assert_eq!(calls[0]["body"]["messages"][0]["content"], "ping");
}
