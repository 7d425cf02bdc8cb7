//! End-to-end: `ccwire serve` in front of the real Claude Code CLI (offline, against the scripted
//! fake Messages API), spoken to over HTTP as an API client would.

mod support;

use std::time::Duration;

use ccwire_core::gateway::Limits;
use ccwire_host::serve::{GatewayOptions, Server};
use ccwire_tests::{Match, Reply, Script};
use futures::StreamExt;
use serde_json::{json, Value};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_tool_round_trip_and_a_third_turn_on_one_process() {
    let gw = Gw::start(|_| {}).await;
    let first_user = json!({"role": "user", "content": "PLEASE-LOOKUP alpha and beta"});
    let (status, kind, body) = gw
        .call("/v1/messages", &anthropic(json!([first_user])), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(kind, "new");
    assert_eq!(body["stop_reason"], "tool_use");
    let calls: Vec<(&str, &Value)> = body["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .map(|b| (b["name"].as_str().unwrap(), &b["input"]))
        .collect();
    assert_eq!(
        calls,
        [
            ("lookup", &json!({"query": "alpha"})),
            ("lookup", &json!({"query": "beta"}))
        ],
        "both calls of the model message, under the client's tool name"
    );
    let pids = gw.server().session_pids();
    assert_eq!(pids.len(), 1);

    // The results, streamed answer: the same CLI turn goes on.
    let mut messages = vec![
        first_user.clone(),
        json!({"role": "assistant", "content": body["content"]}),
        json!({"role": "user", "content": results_for(&body)}),
    ];
    let mut request = anthropic(json!(messages));
    request["stream"] = json!(true);
    let (status, kind, data) = gw.stream("/v1/messages", &request).await;
    assert_eq!(status, 200);
    assert_eq!(kind, "continued");
    let events: Vec<Value> = data
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(events.first().unwrap()["type"], "message_start");
    assert_eq!(events.last().unwrap()["type"], "message_stop");
    let streamed: String = events
        .iter()
        .filter_map(|e| e["delta"]["text"].as_str())
        .collect();
    assert!(streamed.contains("record-alpha"), "{streamed}");
    assert!(streamed.contains("record-beta"), "{streamed}");
    // What the model got: both results in one user message, on the same conversation.
    let last = gw.fake.model_calls().last().unwrap().body.clone();
    let results: Vec<&Value> = last["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .collect();
    assert_eq!(results.len(), 2, "{last}");
    assert_eq!(
        gw.server().session_pids(),
        pids,
        "no respawn for the results"
    );

    // A third turn continues the same process.
    messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": streamed}]}));
    messages.push(json!({"role": "user", "content": "PLEASE-THIRD turn"}));
    let (status, kind, body) = gw
        .call("/v1/messages", &anthropic(json!(messages)), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(kind, "continued");
    assert!(text_of(&body).contains("PLEASE-THIRD"), "{body}");
    assert_eq!(gw.server().session_pids(), pids);
    let model_messages = gw.fake.model_calls().last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .len();
    assert!(model_messages >= 5, "the model saw the whole conversation");

    let pids = gw.stop().await;
    assert!(
        pids.iter().all(|p| !alive(*p)),
        "no claude process outlives the gateway"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_streamed_tool_calls_and_a_json_answer() {
    let gw = Gw::start(|_| {}).await;
    let tools = json!([{"type": "function", "function": {
        "name": "lookup", "description": "Looks a record up.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    }}]);
    let user = json!({"role": "user", "content": "PLEASE-LOOKUP both"});
    let request = json!({
        "model": "gpt-4o", "stream": true, "stream_options": {"include_usage": true},
        "tools": tools, "messages": [{"role": "system", "content": "Be brief."}, user],
    });
    let (status, kind, data) = gw.stream("/v1/chat/completions", &request).await;
    assert_eq!(status, 200, "{data:?}");
    assert_eq!(kind, "new");
    assert_eq!(data.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let mut calls: Vec<(String, String, String)> = Vec::new();
    let mut finish = None;
    let mut content = String::new();
    for chunk in &chunks {
        if let Some(choice) = chunk["choices"].get(0) {
            content += choice["delta"]["content"].as_str().unwrap_or("");
            for call in choice["delta"]["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let i = call["index"].as_u64().unwrap() as usize;
                if i == calls.len() {
                    calls.push((
                        call["id"].as_str().unwrap().into(),
                        call["function"]["name"].as_str().unwrap().into(),
                        String::new(),
                    ));
                }
                calls[i].2 += call["function"]["arguments"].as_str().unwrap_or("");
            }
            if !choice["finish_reason"].is_null() {
                finish = Some(choice["finish_reason"].clone());
            }
        }
    }
    assert_eq!(finish, Some(json!("tool_calls")));
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].1, "lookup");
    assert_eq!(
        serde_json::from_str::<Value>(&calls[1].2).unwrap(),
        json!({"query": "beta"})
    );
    assert!(
        chunks.last().unwrap()["usage"]["total_tokens"].is_u64(),
        "a usage chunk"
    );
    // The system prompt reached the model.
    let first_call = gw.fake.model_calls().last().unwrap().body.clone();
    assert!(
        first_call["system"].to_string().contains("Be brief."),
        "{}",
        first_call["system"]
    );

    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
        .collect();
    let mut messages = vec![
        json!({"role": "system", "content": "Be brief."}),
        user,
        json!({"role": "assistant", "content": content, "tool_calls": tool_calls}),
    ];
    for (id, _, args) in &calls {
        let q: Value = serde_json::from_str(args).unwrap();
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": format!("record-{}", q["query"].as_str().unwrap())}));
    }
    let request = json!({"model": "gpt-4o", "tools": tools, "messages": messages});
    let (status, kind, body) = gw.call("/v1/chat/completions", &request, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(kind, "continued");
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    let content = body["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(
        content.contains("record-alpha") && content.contains("record-beta"),
        "{content}"
    );
    assert_eq!(gw.server().session_pids().len(), 1);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_gateway_rebuilds_the_conversation() {
    let mut gw = Gw::start(|_| {}).await;
    let user = json!({"role": "user", "content": "My codename is PLEASE-REMEMBER-ORCHID."});
    let (status, _, body) = gw
        .call("/v1/messages", &anthropic(json!([user])), None)
        .await;
    assert_eq!(status, 200, "{body}");
    let old = gw.server().session_pids();
    gw.restart(|_| {}).await;
    assert!(old.iter().all(|p| !alive(*p)));
    let messages = json!([
        user,
        {"role": "assistant", "content": body["content"]},
        {"role": "user", "content": "What is my codename?"},
    ]);
    let (status, kind, body) = gw.call("/v1/messages", &anthropic(messages), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(kind, "rebuilt");
    let seen = gw.fake.model_calls().last().unwrap().last_user_text();
    assert!(
        seen.contains("PLEASE-REMEMBER-ORCHID"),
        "the model saw the earlier turn: {seen}"
    );
    assert!(seen.contains("What is my codename?"), "{seen}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_is_closed_and_its_conversation_rebuilt() {
    let gw = Gw::start(|o| {
        o.engine.limits = Limits {
            idle_ttl_ms: 1500,
            ..Limits::default()
        }
    })
    .await;
    let user = json!({"role": "user", "content": "My codename is PLEASE-IDLE-HERON."});
    let (status, kind, body) = gw
        .call("/v1/messages", &anthropic(json!([user])), None)
        .await;
    assert_eq!((status, kind.as_str()), (200, "new"), "{body}");
    let pids = gw.server().session_pids();
    assert_eq!(pids.len(), 1);
    // Past the TTL the process is ended and the health endpoint counts no session.
    eventually("the idle session is closed", || {
        !alive(pids[0]) && gw.server().session_pids().is_empty()
    })
    .await;
    let health = gw.health().await;
    assert_eq!(health["sessions"], 0, "{health}");
    // The conversation goes on in a new process that knows the earlier turn.
    let messages = json!([
        user,
        {"role": "assistant", "content": body["content"]},
        {"role": "user", "content": "What is my codename?"},
    ]);
    let (status, kind, body) = gw.call("/v1/messages", &anthropic(messages), None).await;
    assert_eq!((status, kind.as_str()), (200, "rebuilt"), "{body}");
    let seen = gw.fake.model_calls().last().unwrap().last_user_text();
    assert!(seen.contains("PLEASE-IDLE-HERON"), "{seen}");
    assert_ne!(gw.server().session_pids(), pids);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_call_past_its_deadline_gets_an_error_and_late_results_rebuild() {
    let gw = Gw::start(|o| {
        o.engine.limits = Limits {
            held_call_timeout_ms: 1500,
            ..Limits::default()
        }
    })
    .await;
    let (user, body) = ask_for_lookups(&gw).await;
    // No result in time: the gateway answers the held calls with an error, the model sees it.
    model_sees_the_held_call_timeout(&gw).await;
    let messages = json!([
        user,
        {"role": "assistant", "content": body["content"]},
        {"role": "user", "content": results_for(&body)},
    ]);
    let (status, kind, body) = gw.call("/v1/messages", &anthropic(messages), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        kind, "rebuilt",
        "the turn went on without the client: a new session"
    );
    assert!(gw
        .fake
        .model_calls()
        .last()
        .unwrap()
        .last_user_text()
        .contains("record-alpha"));
    let pids = gw.stop().await;
    assert!(pids.iter().all(|p| !alive(*p)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_mid_stream_interrupts_the_turn() {
    let gw = Gw::start(|_| {}).await;
    gw.fake.set_script(
        Script::new()
            .when(Match::Probe, Reply::text("ok"))
            // The CLI sends the interrupted prompt and the next one as one user message.
            .when(
                Match::LastUserContains {
                    text: "PLEASE-AFTER".into(),
                },
                Reply::Echo,
            )
            .when_slow(
                Match::LastUserContains {
                    text: "PLEASE-SLOW".into(),
                },
                Reply::text("slow ".repeat(100)),
                Duration::from_millis(100),
            )
            .when(Match::Any, Reply::Echo),
    );
    let user = json!({"role": "user", "content": "hello"});
    let (status, _, body) = gw
        .call("/v1/messages", &anthropic(json!([user])), None)
        .await;
    assert_eq!(status, 200, "{body}");
    let pid = gw.server().session_pids()[0];
    let mut messages = vec![
        user,
        json!({"role": "assistant", "content": body["content"]}),
        json!({"role": "user", "content": "PLEASE-SLOW please"}),
    ];
    let mut request = anthropic(json!(messages));
    request["stream"] = json!(true);
    let response = gw.post("/v1/messages", &request, None).await;
    let mut bytes = response.bytes_stream();
    let first = bytes.next().await.expect("a first frame").unwrap();
    assert!(String::from_utf8_lossy(&first).contains("message_start"));
    drop(bytes);
    // The interrupted turn settles and the conversation goes on, on the same process.
    messages[2] = json!({"role": "user", "content": "PLEASE-AFTER the interrupt"});
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let body = loop {
        let (status, kind, body) = gw
            .call("/v1/messages", &anthropic(json!(messages)), None)
            .await;
        if status == 200 {
            assert_eq!(kind, "continued");
            break body;
        }
        assert_eq!(status, 429, "busy while the interrupt settles: {body}");
        assert!(std::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(text_of(&body).contains("PLEASE-AFTER"), "{body}");
    assert_eq!(gw.server().session_pids(), [pid]);
    // The slow answer was cut short, and the model heard of the interrupt with the next prompt.
    let calls = gw.fake.model_calls();
    let slow_calls = calls
        .iter()
        .filter(|c| c.last_user_text().contains("PLEASE-SLOW"))
        .filter(|c| !c.last_user_text().contains("PLEASE-AFTER"))
        .count();
    assert_eq!(slow_calls, 1);
    let last = calls.last().expect("a model call").last_user_text();
    assert!(last.contains("[Request interrupted by user]"), "{last}");
    assert!(!text_of(&body).contains("slow slow"), "{body}");
    let pids = gw.stop().await;
    assert!(pids.iter().all(|p| !alive(*p)));
}

/// A system prompt of any size reaches the model whole: it goes to the CLI in its
/// `initialize` request, not on its command line (where 128 KiB is the most one argument may be).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_mebibyte_system_prompt_reaches_the_model() {
    let script = Script::new()
        .when(Match::Probe, Reply::text("ok"))
        .when(
            Match::SystemContains {
                text: "SYS-MARKER-BEGIN".into(),
            },
            Reply::text("I read the whole system prompt."),
        )
        .when(Match::Any, Reply::Echo);
    let gw = Gw::start_with(script, |_| {}).await;
    let system = format!(
        "SYS-MARKER-BEGIN {} SYS-MARKER-END",
        "All work and no play. ".repeat(48 * 1024)
    );
    assert!(system.len() > 1024 * 1024);
    let mut body = anthropic(json!([{"role": "user", "content": "Hello"}]));
    body["system"] = json!(system);
    let (status, _, answer) = gw.call("/v1/messages", &body, None).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(text_of(&answer), "I read the whole system prompt.");
    let seen = gw
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.is_model_call() && r.body["max_tokens"] != 1)
        .map(|r| r.body["system"].to_string())
        .find(|s| s.contains("SYS-MARKER-BEGIN"))
        .expect("the model got the system prompt");
    assert!(seen.contains("SYS-MARKER-END"), "cut short");
    assert!(
        seen.len() >= system.len(),
        "{} < {}",
        seen.len(),
        system.len()
    );
    // The model's name does go on the command line: a name no model has is a 400 naming it.
    let mut body = anthropic(json!([{"role": "user", "content": "Hello"}]));
    body["model"] = json!(format!("claude-{}", "x".repeat(200 * 1024)));
    let (status, _, answer) = gw.call("/v1/messages", &body, None).await;
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("model:"),
        "{answer}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_or_unknown_tool_results_get_a_400_and_lose_nothing() {
    let gw = Gw::start(|_| {}).await;
    let user = json!({"role": "user", "content": "PLEASE-LOOKUP both"});
    let (status, _, body) = gw
        .call("/v1/messages", &anthropic(json!([user])), None)
        .await;
    assert_eq!(status, 200, "{body}");
    let results = results_for(&body);
    assert_eq!(results.len(), 2);
    let assistant = json!({"role": "assistant", "content": body["content"]});
    // One result of two: refused, naming the missing call.
    let partial = json!([user, assistant, {"role": "user", "content": [results[0]]}]);
    let (status, _, error) = gw.call("/v1/messages", &anthropic(partial), None).await;
    assert_eq!(status, 400, "{error}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(results[1]["tool_use_id"].as_str().unwrap()),
        "{message}"
    );
    // A result for a call that does not exist: refused, naming it.
    let mut wrong = results.clone();
    wrong[1]["tool_use_id"] = json!("toolu_nope");
    let unknown = json!([user, assistant, {"role": "user", "content": wrong}]);
    let (status, _, error) = gw.call("/v1/messages", &anthropic(unknown), None).await;
    assert_eq!(status, 400, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("toolu_nope"),
        "{error}"
    );
    // The corrected request continues the same turn.
    let fixed = json!([user, assistant, {"role": "user", "content": results}]);
    let (status, kind, body) = gw.call("/v1/messages", &anthropic(fixed), None).await;
    assert_eq!((status, kind.as_str()), (200, "continued"), "{body}");
    assert!(text_of(&body).contains("record-beta"), "{body}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_checked_and_tenants_never_share_a_session() {
    let gw = Gw::start(|o| o.engine.http.api_keys = vec!["key-a".into(), "key-b".into()]).await;
    let user = json!({"role": "user", "content": "hi there"});
    let request = anthropic(json!([user]));
    let (status, _, body) = gw.call("/v1/messages", &request, None).await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["type"], "authentication_error");
    let (status, _, body) = gw.call("/v1/messages", &request, Some("wrong")).await;
    assert_eq!(status, 401, "{body}");
    let response = gw
        .http
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", "Bearer wrong")
        .json(&json!({"model": "gpt-4o", "messages": [user]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 401);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["error"]["type"], "authentication_error",
        "OpenAI's error shape"
    );

    let (status, _, body) = gw.call("/v1/messages", &request, Some("key-a")).await;
    assert_eq!(status, 200, "{body}");
    let next = anthropic(json!([
        user,
        {"role": "assistant", "content": body["content"]},
        {"role": "user", "content": "and again"},
    ]));
    let (_, kind_a, _) = gw.call("/v1/messages", &next, Some("key-a")).await;
    assert_eq!(kind_a, "continued");
    let (status, kind_b, _) = gw.call("/v1/messages", &next, Some("key-b")).await;
    assert_eq!(status, 200);
    assert_eq!(
        kind_b, "rebuilt",
        "the same history under another key is another session"
    );
    assert_eq!(gw.server().session_pids().len(), 2);
    // Metrics need a key too: they tell how the gateway is used.
    let scrape = |key: Option<&'static str>| {
        let mut request = gw.http.get(gw.url("/metrics"));
        if let Some(key) = key {
            request = request.header("authorization", format!("Bearer {key}"));
        }
        request.send()
    };
    assert_eq!(scrape(None).await.unwrap().status().as_u16(), 401);
    // A key sees its own figures only.
    let text = scrape(Some("key-b")).await.unwrap().text().await.unwrap();
    assert!(text.contains("ccwire_sessions 1\n"), "{text}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_errors_in_each_api_s_shape() {
    let gw = Gw::start(|o| o.engine.http.max_body = 4096).await;
    let big = json!({"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "x".repeat(10_000)}]});
    let (status, _, body) = gw.call("/v1/messages", &big, None).await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["error"]["type"], "request_too_large");
    let (status, _, body) = gw
        .call(
            "/v1/messages",
            &json!({"model": MODEL, "messages": []}),
            None,
        )
        .await;
    assert_eq!(status, 400);
    assert_eq!(body["type"], "error");
    let (status, _, body) = gw
        .call(
            "/v1/chat/completions",
            &json!({"model": "gpt-4o", "n": 2, "messages": [{"role": "user", "content": "hi"}]}),
            None,
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "n");
    // Results for calls nobody made.
    let (status, _, body) = gw
        .call(
            "/v1/messages",
            &anthropic(json!([
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_nope", "content": "x"}]},
            ])),
            None,
        )
        .await;
    assert_eq!(status, 400);
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("toolu_nope"));
    let health = gw.health().await;
    assert_eq!(health["cli"]["found"], true);
    assert_eq!(health["cli"]["version"], "2.1.332");
    let models: Value = gw
        .http
        .get(gw.url("/v1/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(models["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["id"] == "sonnet"));
    gw.stop().await;

    let refused = Server::start("0.0.0.0:0".parse().unwrap(), GatewayOptions::default()).await;
    assert!(refused.is_err(), "a public address needs a key");
}

/// The request shape Claude Code itself sends its API, with fields this gateway has never
/// heard of.
fn claude_code_style(messages: Value) -> Value {
    json!({
        "model": MODEL, "max_tokens": 32000,
        "system": [{"type": "text", "text": "You are a helpful agent.", "cache_control": {"type": "ephemeral"}}],
        "messages": messages,
        "tools": [lookup_tool()],
        "metadata": {"user_id": "user-1"},
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "medium"},
        "context_management": {"edits": []},
        "a_field_from_next_month": true,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_s_request_shape_is_served_and_what_was_ignored_is_named() {
    let gw = Gw::start(|_| {}).await;
    let first = json!([
        {"role": "system", "content": "Today is CODENAME-DAY."},
        {"role": "user", "content": [{"type": "text", "text": "PLEASE-GREET me", "cache_control": {"type": "ephemeral"}}]},
    ]);
    let response = gw
        .http
        .post(gw.url("/v1/messages"))
        .header(
            "anthropic-beta",
            "per-turn-control-2026-07-01,mid-conversation-tool-changes-2026-07-01",
        )
        .json(&claude_code_style(first.clone()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["x-ccwire-ignored"],
        "a_field_from_next_month, context_management, metadata",
        "thinking and effort are honoured, the rest named"
    );
    let body: Value = response.json().await.unwrap();
    let seen = gw.fake.model_calls().last().unwrap().last_user_text();
    assert!(
        seen.contains("<system>\nToday is CODENAME-DAY.\n</system>\n\nPLEASE-GREET me"),
        "the system message reached the model in the user turn: {seen}"
    );

    // The next turn carries another system message and continues the same session.
    let mut messages = first.as_array().unwrap().clone();
    messages.push(json!({"role": "assistant", "content": body["content"]}));
    messages.push(json!({"role": "system", "content": "Keep it short."}));
    messages.push(json!({"role": "user", "content": "PLEASE-AGAIN"}));
    let (status, kind, _) = gw
        .call("/v1/messages", &claude_code_style(json!(messages)), None)
        .await;
    assert_eq!((status, kind.as_str()), (200, "continued"));
    let seen = gw.fake.model_calls().last().unwrap().last_user_text();
    assert!(
        seen.contains("Keep it short.") && seen.contains("PLEASE-AGAIN"),
        "{seen}"
    );
    assert_eq!(gw.server().session_pids().len(), 1);
    gw.stop().await;
}

/// With a warm pool, a new conversation with the settings of an earlier one is answered by a
/// CLI that was started ahead, and the pool is refilled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_pool_answers_new_conversations_with_started_clis() {
    let gw = Gw::start(|o| o.engine.pool = 2).await;
    let first = anthropic(json!([{"role": "user", "content": "first conversation"}]));
    let (status, kind, _) = gw.call("/v1/messages", &first, None).await;
    assert_eq!((status, kind.as_str()), (200, "new"));
    eventually("two CLIs started ahead", || {
        gw.server().session_pids().len() == 3
    })
    .await;
    let health = gw.health().await;
    assert_eq!(
        (health["sessions"].as_u64(), health["pool"].as_u64()),
        (Some(1), Some(2))
    );
    let before = gw.server().session_pids();
    let second = anthropic(json!([{"role": "user", "content": "second conversation"}]));
    let (status, kind, body) = gw.call("/v1/messages", &second, None).await;
    assert_eq!((status, kind.as_str()), (200, "new"), "{body}");
    assert!(text_of(&body).contains("second conversation"), "{body}");
    let metrics = gw.http.get(gw.url("/metrics")).send().await.unwrap();
    let metrics = metrics.text().await.unwrap();
    assert!(metrics.contains("ccwire_pool_hits_total 1\n"), "{metrics}");
    // One more CLI replaces the one the conversation took; the first three are still there.
    eventually("the pool refilled", || {
        gw.server().session_pids().len() == 4
    })
    .await;
    let after = gw.server().session_pids();
    assert!(
        before.iter().all(|p| after.contains(p)),
        "{before:?} {after:?}"
    );
    assert_eq!(gw.health().await["sessions"], 2);
    gw.stop().await;
}
