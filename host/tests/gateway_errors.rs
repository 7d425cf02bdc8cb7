//! End-to-end: the model's failures and the gateway's own reach the client as each API says
//! them — the status the model API gave, billing as a 402, credentials its operator must set
//! as words that say which — against the real CLI and the scripted fake Messages API.

mod support;

use ccwire_tests::{Match, Reply, Script};
use serde_json::{json, Value};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_s_errors_keep_their_status_in_each_api_s_shape() {
    let gw = Gw::start(|_| {}).await;
    gw.fake.set_script(
        Script::new()
            .when(Match::Probe, Reply::text("ok"))
            .on_prompt(
                "PLEASE-OVERLOAD",
                Reply::error(529, "overloaded_error", "Overloaded"),
            )
            .on_prompt(
                "PLEASE-REJECT",
                Reply::error(
                    400,
                    "invalid_request_error",
                    "fake: this request is refused",
                ),
            )
            .on_prompt(
                "PLEASE-TOO-LONG",
                Reply::error(
                    400,
                    "invalid_request_error",
                    "prompt is too long: 250000 tokens > 200000 maximum",
                ),
            )
            .when(Match::Any, Reply::Echo),
    );
    // A prompt over the model's context: a 400 in each API's shape, which no SDK retries (the
    // CLI's words for it, with what it tried).
    let too_long = |content: &str| json!([{"role": "user", "content": content}]);
    let history = json!([{"role": "user", "content": "hello one"},
        {"role": "assistant", "content": "hi there"},
        {"role": "user", "content": "PLEASE-TOO-LONG again"}]);
    for (path, request) in [
        ("/v1/messages", anthropic(too_long("PLEASE-TOO-LONG"))),
        ("/v1/messages", anthropic(history)),
        (
            "/v1/chat/completions",
            json!({"model": "gpt-4o", "messages": too_long("PLEASE-TOO-LONG")}),
        ),
        (
            "/v1/responses",
            json!({"model": "gpt-4o", "input": "PLEASE-TOO-LONG"}),
        ),
    ] {
        let (status, _, body) = gw.call(path, &request, None).await;
        assert_eq!(status, 400, "{path}: {body}");
        assert_eq!(
            body["error"]["type"], "invalid_request_error",
            "{path}: {body}"
        );
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("Prompt is too long"), "{path}: {body}");
    }
    let overloaded = json!([{"role": "user", "content": "PLEASE-OVERLOAD now"}]);
    let (status, _, body) = gw.call("/v1/messages", &anthropic(overloaded), None).await;
    assert_eq!(status, 529, "{body}");
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "overloaded_error", "{body}");
    let request =
        json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "PLEASE-REJECT this"}]});
    let (status, _, body) = gw.call("/v1/chat/completions", &request, None).await;
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("this request is refused"), "{body}");
    // The conversation that failed is not lost: it can be sent again.
    let request = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hello after the error"}]});
    let (status, _, body) = gw.call("/v1/chat/completions", &request, None).await;
    assert_eq!(status, 200, "{body}");
    gw.stop().await;
}

/// A CLI that cannot start is a 500 that says why without the gateway's paths.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cli_that_cannot_start_is_reported_without_the_gateway_s_paths() {
    let gw = Gw::start(|o| o.claude = Some("/nonexistent/secret-dir/claude".into())).await;
    let body = anthropic(json!([{"role": "user", "content": "Hello"}]));
    let (status, _, answer) = gw.call("/v1/messages", &body, None).await;
    assert_eq!(status, 500, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("no Claude Code CLI"), "{message}");
    assert!(!message.contains("secret-dir"), "{message}");
    gw.stop().await;
}

/// A gateway whose Claude Code has no credentials at all answers with a status and words its
/// operator can act on — which variables to set — not the CLI's "Please run /login".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_without_credentials_says_what_its_operator_sets() {
    let gw = Gw::start(|o| {
        o.env.retain(|(k, _)| k != "ANTHROPIC_API_KEY");
        o.env_remove.extend(
            [
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_AUTH_TOKEN",
                "CLAUDE_CODE_OAUTH_TOKEN",
            ]
            .map(String::from),
        );
    })
    .await;
    let messages = json!([{"role": "user", "content": "hello"}]);
    let response = gw.post("/v1/messages", &anthropic(messages), None).await;
    assert_eq!(response.status().as_u16(), 503);
    let body: Value = response.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    for said in [
        "ANTHROPIC_API_KEY",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "ccwire serve",
        "Not logged in",
    ] {
        assert!(message.contains(said), "{said}: {message}");
    }
    assert!(
        gw.fake.model_calls().is_empty(),
        "no model request could be made"
    );
    gw.stop().await;
}

/// The model API's billing refusal ("credit balance is too low") is not an outage: every API
/// answers 402 in its own shape (Anthropic's `billing_error`, OpenAI's `insufficient_quota`),
/// which the SDKs do not retry — streamed or not — and the conversation can be sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_billing_refusal_is_a_402_the_sdks_do_not_retry() {
    let credit = "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.";
    let script = Script::new()
        .when(Match::Probe, Reply::text("ok"))
        .on_prompt(
            "PLEASE-PAY",
            Reply::error(400, "invalid_request_error", credit),
        )
        .when(Match::Any, Reply::Echo);
    let gw = Gw::start_with(script, |_| {}).await;
    let messages = json!([{"role": "user", "content": "PLEASE-PAY first"}]);
    let (status, _, body) = gw.call("/v1/messages", &anthropic(messages), None).await;
    assert_eq!(status, 402, "{body}");
    assert_eq!(body["error"]["type"], "billing_error", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("redit balance is too low"),
        "{body}"
    );
    let request =
        json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "PLEASE-PAY now"}]});
    let (status, _, body) = gw.call("/v1/chat/completions", &request, None).await;
    assert_eq!(status, 402, "{body}");
    assert_eq!(body["error"]["type"], "insufficient_quota", "{body}");
    assert_eq!(body["error"]["code"], "insufficient_quota", "{body}");
    let request = json!({"model": "gpt-4o", "input": "PLEASE-PAY later"});
    let (status, _, body) = gw.call("/v1/responses", &request, None).await;
    assert_eq!(status, 402, "{body}");
    // Streamed, the error comes in the stream once it has started, as the APIs send it.
    let request = json!({"model": "gpt-4o", "stream": true,
                         "messages": [{"role": "user", "content": "PLEASE-PAY streaming"}]});
    let response = gw.post("/v1/chat/completions", &request, None).await;
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    assert!(
        status == 402 || text.contains("insufficient_quota"),
        "{status}: {text}"
    );
    let again = json!([{"role": "user", "content": "hello after paying"}]);
    let (status, _, body) = gw.call("/v1/messages", &anthropic(again), None).await;
    assert_eq!(status, 200, "{body}");
    gw.stop().await;
}

/// The model's limits and outages reach the client as themselves: 401, 403, 503 and 429 keep
/// their status, and a 429 the CLI retried carries the wait the model's API asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_statuses_keep_their_meaning_and_a_rate_limit_its_retry_after() {
    let limited = Reply::Error {
        status: 429,
        error_type: "rate_limit_error".into(),
        message: "fake: slow down".into(),
        retry_after: Some(2),
        should_retry: Some(true),
    };
    let script = Script::new()
        .when(Match::Probe, Reply::text("ok"))
        .on_prompt(
            "PLEASE-401",
            Reply::error(401, "authentication_error", "fake: bad key"),
        )
        .on_prompt(
            "PLEASE-403",
            Reply::error(403, "permission_error", "fake: not yours"),
        )
        .on_prompt("PLEASE-503", Reply::error(503, "api_error", "fake: down"))
        .on_prompt("PLEASE-429", limited)
        .when(Match::Any, Reply::Echo);
    let mut gw = Gw::start_with(script, |_| {}).await;
    // One retry: the CLI waits what the model's API asked, then gives up.
    gw.restart(|o| o.env.push(("CLAUDE_CODE_MAX_RETRIES".into(), "1".into())))
        .await;
    for (prompt, status, anthropic_type) in [
        ("PLEASE-401", 401, "authentication_error"),
        ("PLEASE-403", 403, "permission_error"),
        ("PLEASE-503", 503, "api_error"),
    ] {
        let messages = json!([{"role": "user", "content": prompt}]);
        let response = gw.post("/v1/messages", &anthropic(messages), None).await;
        assert_eq!(response.status().as_u16(), status, "{prompt}");
        assert!(
            response.headers().get("retry-after").is_none(),
            "{prompt}: no wait known"
        );
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["type"], anthropic_type, "{body}");
    }
    let request =
        json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "PLEASE-429"}]});
    let response = gw.post("/v1/chat/completions", &request, None).await;
    assert_eq!(response.status().as_u16(), 429);
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(
        retry_after.as_deref(),
        Some("2"),
        "the model's own Retry-After"
    );
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "rate_limit_exceeded", "{body}");
    gw.stop().await;
}
