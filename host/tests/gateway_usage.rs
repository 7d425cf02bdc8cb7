//! End-to-end: the token usage a client of `ccwire serve` gets is exactly what the model
//! reported — input, output and prompt-cache tokens, in each API's own fields (Messages, Chat
//! Completions, Responses), streamed and not, and for each response of a turn that a client
//! tool call splits.

mod support;

use ccwire_tests::{Match, Reply, Script, Usage};
use serde_json::{json, Value};
use support::*;

const ANSWER: Usage = Usage {
    input_tokens: 1234,
    output_tokens: 56,
    cache_creation_input_tokens: 700,
    cache_read_input_tokens: 8000,
};
const CALLS: Usage = Usage {
    input_tokens: 300,
    output_tokens: 40,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 5000,
};
const AFTER_RESULTS: Usage = Usage {
    input_tokens: 310,
    output_tokens: 21,
    cache_creation_input_tokens: 90,
    cache_read_input_tokens: 5300,
};

fn usage_script() -> Script {
    Script::new()
        .when(Match::Probe, Reply::text("ok"))
        .on_tool_result(Reply::text("Both found."))
        .usage(AFTER_RESULTS)
        .on_prompt("PLEASE-LOOKUP", two_lookups())
        .usage(CALLS)
        .when(Match::Any, Reply::text("Counted."))
        .usage(ANSWER)
}

fn anthropic_usage(u: Usage) -> Value {
    json!({"input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
        "cache_creation_input_tokens": u.cache_creation_input_tokens,
        "cache_read_input_tokens": u.cache_read_input_tokens})
}

fn openai_usage(u: Usage) -> Value {
    let prompt = u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens;
    json!({"prompt_tokens": prompt, "completion_tokens": u.output_tokens,
        "total_tokens": prompt + u.output_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cache_read_input_tokens}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_is_the_model_s_own_in_both_apis_streamed_and_not() {
    let gw = Gw::start_with(usage_script(), |_| {}).await;

    let (status, _, body) = gw
        .call(
            "/v1/messages",
            &anthropic(json!([{"role": "user", "content": "Count one"}])),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["usage"], anthropic_usage(ANSWER));

    let mut request = anthropic(json!([{"role": "user", "content": "Count two"}]));
    request["stream"] = json!(true);
    let (status, _, data) = gw.stream("/v1/messages", &request).await;
    assert_eq!(status, 200);
    let events: Vec<Value> = data
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let start = &events[0]["message"]["usage"];
    assert_eq!(start["input_tokens"], 1234, "message_start: {start}");
    assert_eq!(start["cache_read_input_tokens"], 8000, "{start}");
    assert_eq!(start["cache_creation_input_tokens"], 700, "{start}");
    let delta = events
        .iter()
        .find(|e| e["type"] == "message_delta")
        .unwrap();
    assert_eq!(delta["usage"], anthropic_usage(ANSWER));

    let openai =
        json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "Count three"}]});
    let (status, _, body) = gw.call("/v1/chat/completions", &openai, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["usage"], openai_usage(ANSWER));

    let streamed = json!({"model": "gpt-4o", "stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "Count four"}]});
    let (status, _, data) = gw.stream("/v1/chat/completions", &streamed).await;
    assert_eq!(status, 200);
    let last: Value = serde_json::from_str(&data[data.len() - 2]).unwrap();
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"], openai_usage(ANSWER));

    let responses = json!({"model": "gpt-5", "input": "Count five"});
    let (status, _, body) = gw.call("/v1/responses", &responses, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["usage"], responses_usage(ANSWER));

    let streamed = json!({"model": "gpt-5", "stream": true, "input": "Count six"});
    let (status, _, data) = gw.stream("/v1/responses", &streamed).await;
    assert_eq!(status, 200);
    let last: Value = serde_json::from_str(data.last().unwrap()).unwrap();
    assert_eq!(last["type"], "response.completed");
    assert_eq!(last["response"]["usage"], responses_usage(ANSWER));
    gw.stop().await;
}

fn responses_usage(u: Usage) -> Value {
    let input = u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens;
    json!({"input_tokens": input, "input_tokens_details": {"cached_tokens": u.cache_read_input_tokens},
        "output_tokens": u.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + u.output_tokens})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_response_of_a_turn_split_by_a_tool_call_has_its_own_usage() {
    let gw = Gw::start_with(usage_script(), |_| {}).await;
    let user = json!({"role": "user", "content": "PLEASE-LOOKUP alpha and beta"});
    let (status, _, body) = gw
        .call("/v1/messages", &anthropic(json!([user])), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["stop_reason"], "tool_use");
    assert_eq!(body["usage"], anthropic_usage(CALLS));

    let messages = json!([
        user,
        {"role": "assistant", "content": body["content"]},
        {"role": "user", "content": results_for(&body)},
    ]);
    let (status, kind, body) = gw.call("/v1/messages", &anthropic(messages), None).await;
    assert_eq!((status, kind.as_str()), (200, "continued"), "{body}");
    assert_eq!(
        body["usage"],
        anthropic_usage(AFTER_RESULTS),
        "the model call after the results, not the turn's total"
    );
    // The gateway's metrics count both responses' tokens and the one CLI they came from.
    let response = gw.http.get(gw.url("/metrics")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let text = response.text().await.unwrap();
    for (kind, n) in [
        ("input", CALLS.input_tokens + AFTER_RESULTS.input_tokens),
        ("output", CALLS.output_tokens + AFTER_RESULTS.output_tokens),
        (
            "cache_read",
            CALLS.cache_read_input_tokens + AFTER_RESULTS.cache_read_input_tokens,
        ),
    ] {
        let line = format!("ccwire_tokens_total{{kind=\"{kind}\"}} {n}");
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
    for line in [
        "ccwire_requests_total{api=\"anthropic\",status=\"200\"} 2",
        "ccwire_cli_spawns_total 1",
        "ccwire_sessions 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
    gw.stop().await;
}

async fn count(gw: &Gw, body: &Value) -> (u16, String, Value) {
    let response = gw
        .http
        .post(gw.url("/v1/messages/count_tokens"))
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let source = response
        .headers()
        .get("x-ccwire-token-count")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, source, response.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_tokens_asks_the_cli_s_upstream_and_validates_like_messages() {
    let gw = Gw::start(|_| {}).await;
    // No max_tokens, as the API's count endpoint takes it.
    let body = json!({"model": MODEL, "system": "Be brief.", "tools": [lookup_tool()],
        "messages": [{"role": "user", "content": "How many tokens is this?"}]});
    let (status, source, answer) = count(&gw, &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(source, "upstream");
    let calls: Vec<_> = gw
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/v1/messages/count_tokens"))
        .collect();
    assert_eq!(calls.len(), 1, "the upstream was asked once");
    assert_eq!(calls[0].body, body, "the request as the client sent it");
    let header = |name: &str| {
        calls[0]
            .headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(
        header("x-api-key").as_deref(),
        Some("dummy"),
        "the CLI's key"
    );
    // The fake counts a token per 4 bytes of the body it received.
    let sent = serde_json::to_vec(&body).unwrap().len() as u64;
    assert_eq!(answer, json!({"input_tokens": (sent / 4).max(1)}));

    let bad = json!({"model": MODEL, "tools": [{"name": "no spaces please", "input_schema": {}}],
        "messages": [{"role": "user", "content": "x"}]});
    let (status, _, answer) = count(&gw, &bad).await;
    assert_eq!(status, 400, "{answer}");
    assert!(answer["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("tools.0.name"));
    let (status, _, _) = count(&gw, &json!({"model": MODEL})).await;
    assert_eq!(status, 400);
    assert!(
        gw.server().session_pids().is_empty(),
        "counting spawns no CLI"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_tokens_estimates_without_an_upstream_key() {
    let gw = Gw::start(|o| o.env.retain(|(k, _)| k != "ANTHROPIC_API_KEY")).await;
    // 40 bytes of system prompt and 400 of text: 110 tokens, and 4 for the message.
    let body = json!({"model": MODEL, "system": "abcd".repeat(10),
        "messages": [{"role": "user", "content": "x".repeat(400)}]});
    let (status, source, answer) = count(&gw, &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(source, "estimate");
    assert_eq!(answer, json!({"input_tokens": 114}));
    assert!(gw.fake.requests().is_empty(), "nothing went upstream");
    gw.stop().await;
}
