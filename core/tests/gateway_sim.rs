//! The gateway engine in simulation ([`sim`]): conversations on live CLIs, held client tool
//! calls, caps and queues, the warm pool, drains, approvals and determinism. Each test asserts
//! what a client of `ccwire serve` would see.

mod sim;

use sim::*;

#[test]
fn a_conversation_continues_on_its_live_session() {
    let mut sim = Sim::default();
    let first = sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "Hi"}]), false),
    );
    let response = sim.response(first).clone();
    assert_eq!(response.status, 200);
    assert!(response.ended);
    assert_eq!(response.header("x-ccwire-session"), Some("new"));
    assert_eq!(response.json()["content"][0]["text"], "echo: Hi");
    assert_eq!(response.json()["usage"]["input_tokens"], 12);
    let spec = &sim.specs[&1];
    assert!(spec.args.iter().any(|a| a == "--include-partial-messages"));
    assert!(spec.args.join(" ").contains("--allowedTools mcp__client"));
    assert!(spec.env_remove.iter().any(|v| v == "MCP_TOOL_TIMEOUT"));

    let second = sim.send(
        Api::Anthropic,
        "t",
        anthropic(
            json!([{"role": "user", "content": "Hi"},
                   {"role": "assistant", "content": "echo: Hi"},
                   {"role": "user", "content": "Again"}]),
            false,
        ),
    );
    let response = sim.response(second);
    assert_eq!(response.header("x-ccwire-session"), Some("continued"));
    assert_eq!(response.json()["content"][0]["text"], "echo: Again");
    assert_eq!(sim.clis.len(), 1, "no second CLI");
    // The prompt waited for the CLI's answer to `initialize`, then each turn's prompt came.
    let kinds: Vec<&str> = sim
        .cli(1)
        .stdin
        .iter()
        .map(|m| m["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["control_request", "user", "user"]);
}

#[test]
fn a_held_tool_call_ends_the_response_and_the_result_continues_the_turn() {
    let mut sim = Sim::default();
    let ask = json!([{"role": "user", "content": "lookup: paris"}]);
    let first = sim.send(Api::Anthropic, "t", anthropic(ask.clone(), true));
    let response = sim.response(first).clone();
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    assert!(response.ended);
    let events = events(&response.text());
    let delta = events
        .iter()
        .find(|e| e["type"] == "message_delta")
        .unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    let start = events
        .iter()
        .find(|e| e["type"] == "content_block_start")
        .unwrap();
    assert_eq!(
        start["content_block"]["name"], "lookup",
        "the client's own name"
    );
    assert_eq!(sim.gateway.held_count(), 1);

    let messages = with_result(&ask, "paris", "sunny");
    let second = sim.send(Api::Anthropic, "t", anthropic(json!(messages), false));
    let response = sim.response(second);
    assert_eq!(response.header("x-ccwire-session"), Some("continued"));
    assert_eq!(response.json()["content"][0]["text"], "done: sunny");
    assert_eq!(sim.gateway.held_count(), 0);
    assert_eq!(sim.clis.len(), 1);
}

#[test]
fn parallel_calls_need_every_result_and_a_partial_request_loses_nothing() {
    let mut sim = Sim::default();
    let ask = json!([{"role": "user", "content": "lookup: paris, rome"}]);
    let first = sim.send(
        Api::OpenAi,
        "t",
        json!({"model": "sonnet", "tools": [
        {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}],
        "messages": ask}),
    );
    let body = sim.response(first).json();
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        sim.gateway.held_count(),
        2,
        "both calls reached the gateway"
    );

    let mut messages = ask.as_array().unwrap().clone();
    messages.push(body["choices"][0]["message"].clone());
    let with = |results: &[(&str, &str)]| {
        let mut m = messages.clone();
        for (id, text) in results {
            m.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
        }
        json!({"model": "sonnet", "tools": [{"type": "function", "function": {
            "name": "lookup", "parameters": {"type": "object"}}}], "messages": m})
    };
    let partial = sim.send(Api::OpenAi, "t", with(&[("toolu_1", "sunny")]));
    let response = sim.response(partial);
    assert_eq!(response.status, 400);
    assert!(response.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("toolu_2"));
    assert_eq!(sim.gateway.held_count(), 2, "nothing was lost");

    let full = sim.send(
        Api::OpenAi,
        "t",
        with(&[("toolu_1", "sunny"), ("toolu_2", "rain")]),
    );
    let body = sim.response(full).json();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "done: sunny | rain"
    );
}

#[test]
fn a_held_call_past_its_deadline_gets_an_error_and_a_late_result_rebuilds() {
    let mut sim = Sim::default();
    let ask = json!([{"role": "user", "content": "lookup: paris"}]);
    sim.send(Api::Anthropic, "t", anthropic(ask.clone(), false));
    assert_eq!(sim.gateway.held_count(), 1);

    sim.advance(10 * 60 * 1000);
    assert_eq!(sim.gateway.held_count(), 0);
    let answer = sim.cli(1).stdin.last().unwrap().clone();
    let result = &answer["response"]["response"]["mcp_response"]["result"];
    assert_eq!(result["isError"], true);
    assert_eq!(result["content"][0]["text"], HELD_CALL_TIMEOUT_TEXT);

    let messages = with_result(&ask, "paris", "sunny");
    let late = sim.send(Api::Anthropic, "t", anthropic(json!(messages), false));
    assert_eq!(
        sim.response(late).header("x-ccwire-session"),
        Some("rebuilt")
    );
    assert_eq!(sim.closed, [1], "the old session was closed");
    assert_eq!(sim.clis.len(), 2);
    let prompt = user_text(&sim.cli(2).stdin[1]["message"]["content"]);
    assert!(prompt.contains("<conversation_history>") && prompt.contains("sunny"));
}

#[test]
fn an_idle_session_is_closed_past_its_ttl() {
    let mut sim = Sim::default();
    sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "Hi"}]), false),
    );
    assert_eq!(sim.gateway.session_count(), 1);
    sim.advance(30 * 60 * 1000 - 1);
    assert_eq!(sim.gateway.session_count(), 1);
    sim.advance(1);
    assert_eq!(sim.gateway.session_count(), 0);
    assert_eq!(sim.closed, [1]);
    assert_eq!(sim.gateway.poll_timeout(), None, "nothing left to wake for");
}

#[test]
fn a_client_gone_mid_stream_interrupts_and_the_conversation_goes_on() {
    let mut sim = Sim::default();
    let ask = json!([{"role": "user", "content": "stall"}]);
    let first = sim.send(Api::Anthropic, "t", anthropic(ask, true));
    assert_eq!(sim.response(first).status, 200);
    assert!(!sim.response(first).ended);
    // A quiet stream gets keep-alives.
    sim.advance(15_000);
    assert!(sim
        .response(first)
        .text()
        .ends_with("event: ping\ndata: {\"type\":\"ping\"}\n\n"));

    sim.gone(first);
    let last = sim.cli(1).stdin.last().unwrap();
    assert_eq!(last["request"]["subtype"], "interrupt");
    assert!(
        !sim.response(first).ended,
        "nothing more is sent to a client that left"
    );
    // The interrupted turn ended (the fake CLI answers at once): the conversation is free.
    let next = sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "Hello again"}]), false),
    );
    assert_eq!(sim.response(next).status, 200);
}

#[test]
fn a_conversation_is_busy_until_its_interrupted_turn_ends_then_closed_if_it_never_does() {
    let mut sim = Sim::default();
    let ask = json!([{"role": "user", "content": "lookup: paris"}]);
    sim.send(Api::Anthropic, "t", anthropic(ask.clone(), false));
    let messages = with_result(&ask, "paris", "sunny");
    // The CLI goes quiet: the result is delivered, but the turn never ends.
    sim.muted.push(1);
    let second = sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!(messages.clone()), true),
    );
    sim.gone(second);
    let again = sim.send(Api::Anthropic, "t", anthropic(json!(messages), false));
    assert_eq!(sim.response(again).status, 429);
    assert_eq!(sim.response(again).header("retry-after"), Some("1"));
    sim.advance(10_000);
    assert_eq!(sim.closed, [1], "closed after the settle grace");
    assert_eq!(sim.gateway.session_count(), 0);
}

#[test]
fn a_cli_that_dies_mid_turn_fails_the_response_in_the_api_s_shape() {
    let mut sim = Sim::default();
    let first = sim.send(
        Api::OpenAi,
        "t",
        json!({"model": "sonnet", "stream": true,
        "messages": [{"role": "user", "content": "stall"}]}),
    );
    assert_eq!(sim.response(first).status, 200);
    sim.exit(1, 1);
    let response = sim.response(first);
    assert!(response.ended);
    let text = response.text();
    assert!(
        text.contains("exited with status 1 before the response was complete: boom"),
        "{text}"
    );
    assert!(text.ends_with("data: [DONE]\n\n"));
    assert_eq!(sim.gateway.session_count(), 0);

    // Before anything was streamed, the error is an HTTP status.
    sim.muted.push(2);
    let second = sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "Hi"}]), true),
    );
    assert_eq!(sim.response(second).status, 0, "still starting");
    sim.exit(2, 127);
    let response = sim.response(second);
    assert_eq!(response.status, 500);
    assert_eq!(response.json()["type"], "error");
    assert!(response.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("cannot start a Claude Code session: the CLI exited with status 127"));
}

#[test]
fn a_cli_that_does_not_start_in_time_fails_its_request() {
    let mut sim = Sim::default();
    sim.muted.push(1);
    let first = sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "Hi"}]), false),
    );
    sim.advance(60_000);
    let response = sim.response(first);
    assert_eq!(response.status, 500);
    assert!(response.text().contains("did not answer within 60 s"));
    assert_eq!(sim.closed, [1]);
}

#[test]
fn a_spawn_failure_is_a_500_naming_it() {
    let mut sim = Sim::default();
    sim.fail_spawns = true;
    let first = sim.send(
        Api::Responses,
        "t",
        json!({"model": "sonnet", "input": "Hi"}),
    );
    let response = sim.response(first);
    assert_eq!(response.status, 500);
    assert!(response
        .text()
        .contains("cannot start a Claude Code session: no such file"));
    assert_eq!(sim.gateway.session_count(), 0);
}

#[test]
fn the_session_cap_makes_room_from_idle_conversations_and_is_a_429_when_none_is() {
    let mut sim = Sim::new(GatewayConfig {
        max_sessions: 1,
        ..GatewayConfig::default()
    });
    sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "One"}]), false),
    );
    // The first conversation waits for nothing: its CLI gives way.
    let second = sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "Two"}]), false),
    );
    assert_eq!(sim.response(second).status, 200);
    assert_eq!(sim.gateway.session_count(), 1);
    assert!(sim
        .gateway
        .metrics()
        .contains("ccwire_cli_exits_total{how=\"evicted_idle\"} 1"));
    // It comes back rebuilt, in its turn making room.
    let back = json!([{"role": "user", "content": "One"}, {"role": "assistant", "content": "echo: One"},
                      {"role": "user", "content": "Again"}]);
    let third = sim.send(Api::Anthropic, "t", anthropic(back, false));
    assert_eq!(sim.response(third).status, 200);
    assert_eq!(
        sim.response(third).header("x-ccwire-session"),
        Some("rebuilt")
    );
    // A conversation whose turn waits for the client's tool result is not idle.
    let ask = json!([{"role": "user", "content": "lookup: paris"}]);
    let asked = sim.send(Api::Anthropic, "t", anthropic(ask, false));
    assert_eq!(sim.response(asked).status, 200);
    let fourth = sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "Four"}]), false),
    );
    let response = sim.response(fourth);
    assert_eq!(response.status, 429);
    assert_eq!(response.json()["error"]["type"], "rate_limit_error");
    assert_eq!(sim.gateway.session_count(), 1);
}

#[test]
fn a_key_at_its_own_cap_makes_room_from_its_own_conversations_and_spares_the_others() {
    let mut sim = Sim::new(GatewayConfig {
        max_sessions: 3,
        max_sessions_per_key: 2,
        ..GatewayConfig::default()
    });
    let ask = |text: &str| anthropic(json!([{"role": "user", "content": text}]), false);
    // Alice's conversation, idle.
    sim.send(Api::Anthropic, "alice", ask("Alice one"));
    // Mallory fills her share; a third of hers closes her own oldest, not Alice's.
    sim.send(Api::Anthropic, "mallory", ask("M1"));
    sim.send(Api::Anthropic, "mallory", ask("M2"));
    let third = sim.send(Api::Anthropic, "mallory", ask("M3"));
    assert_eq!(sim.response(third).status, 200);
    assert_eq!(sim.gateway.tenant_counts("mallory").0, 2);
    assert_eq!(
        sim.gateway.tenant_counts("alice").0,
        1,
        "alice's CLI is spared"
    );
    let back = json!([{"role": "user", "content": "Alice one"}, {"role": "assistant", "content": "echo: Alice one"},
                      {"role": "user", "content": "Alice two"}]);
    let alice = sim.send(Api::Anthropic, "alice", anthropic(back, false));
    assert_eq!(
        sim.response(alice).header("x-ccwire-session"),
        Some("continued")
    );
    // Both of Mallory's wait for the client's tool result: nothing of hers can give way.
    sim.send(Api::Anthropic, "mallory", ask("lookup: a"));
    sim.send(Api::Anthropic, "mallory", ask("lookup: b"));
    let refused = sim.send(Api::Anthropic, "mallory", ask("M4"));
    assert_eq!(sim.response(refused).status, 429);
    assert!(sim.response(refused).json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("this key runs its maximum of 2"));
    assert_eq!(sim.gateway.tenant_counts("alice").0, 1);
}

#[test]
fn tenants_never_share_a_session() {
    let mut sim = Sim::default();
    let hi = json!([{"role": "user", "content": "Hi"}]);
    sim.send(Api::Anthropic, "alice", anthropic(hi.clone(), false));
    let next = json!([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "echo: Hi"},
                      {"role": "user", "content": "More"}]);
    let bob = sim.send(Api::Anthropic, "bob", anthropic(next.clone(), false));
    assert_eq!(
        sim.response(bob).header("x-ccwire-session"),
        Some("rebuilt")
    );
    let alice = sim.send(Api::Anthropic, "alice", anthropic(next, false));
    assert_eq!(
        sim.response(alice).header("x-ccwire-session"),
        Some("continued")
    );
}

#[test]
fn bad_requests_are_answered_in_the_api_s_shape_and_start_nothing() {
    let mut sim = Sim::default();
    let bad = sim.send(
        Api::OpenAi,
        "t",
        json!({"model": "sonnet", "n": 2,
        "messages": [{"role": "user", "content": "Hi"}]}),
    );
    let response = sim.response(bad);
    assert_eq!(response.status, 400);
    assert!(response.ended);
    assert!(response.json()["error"]["message"].is_string());
    let ignored = sim.send(
        Api::Anthropic,
        "t",
        json!({"model": "sonnet", "max_tokens": 10,
        "some_new_field": 1, "messages": [{"role": "user", "content": "Hi"}]}),
    );
    assert_eq!(sim.response(ignored).status, 200);
    assert_eq!(
        sim.response(ignored).header("x-ccwire-ignored"),
        Some("some_new_field")
    );
    assert_eq!(sim.clis.len(), 1);
}

#[test]
fn many_conversations_give_the_same_outputs_every_time() {
    let (first, ok) = many(7);
    let (second, _) = many(7);
    assert_eq!(ok, 120, "every request answered");
    assert_eq!(first, second);
}

/// One scenario over the three APIs — held calls (parallel ones too), a partial request, a
/// keep-alive, a client gone, a stored response continued, an expiry, a rebuild, a CLI that
/// dies — kept as a snapshot of every input and output. The npm package's Gateway replays its
/// inputs and must make the same outputs, byte for byte (`bindings/test/gateway.test.mjs`).
#[test]
fn scenario() {
    let mut sim = Sim::new(GatewayConfig {
        seed: 42,
        id_key: GatewayConfig::id_key_from_seed(42),
        unix_epoch_ms: 1_800_000_000_000,
        ..GatewayConfig::default()
    });
    // Anthropic, streamed: a held call and its result.
    let ask = json!([{"role": "user", "content": "lookup: paris"}]);
    sim.send(Api::Anthropic, "alice", anthropic(ask.clone(), true));
    let messages = with_result(&ask, "paris", "sunny");
    sim.send(Api::Anthropic, "alice", anthropic(json!(messages), true));
    // Chat Completions: parallel calls, a partial answer (400), then both.
    let tools = json!([{"type": "function", "function": {"name": "lookup",
        "parameters": {"type": "object"}}}]);
    let ask = json!([{"role": "user", "content": "lookup: rome, oslo"}]);
    sim.send(
        Api::OpenAi,
        "bob",
        json!({"model": "gpt-4o", "tools": tools, "messages": ask,
        "stream": true, "stream_options": {"include_usage": true}}),
    );
    let calls = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "toolu_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"key\":\"rome\"}"}},
        {"id": "toolu_2", "type": "function", "function": {"name": "lookup", "arguments": "{\"key\":\"oslo\"}"}}]});
    let one =
        json!([ask[0], calls, {"role": "tool", "tool_call_id": "toolu_1", "content": "warm"}]);
    sim.send(
        Api::OpenAi,
        "bob",
        json!({"model": "gpt-4o", "tools": tools, "messages": one}),
    );
    let both = json!([ask[0], calls, {"role": "tool", "tool_call_id": "toolu_1", "content": "warm"},
                      {"role": "tool", "tool_call_id": "toolu_2", "content": "cold"}]);
    sim.send(
        Api::OpenAi,
        "bob",
        json!({"model": "gpt-4o", "tools": tools, "messages": both}),
    );
    // Responses: a stored response, continued by id; a stream that stalls, pings and is left.
    let first = sim.send(
        Api::Responses,
        "carol",
        json!({"model": "sonnet", "input": "Hi",
        "store": true}),
    );
    let id = sim.response(first).json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    sim.send(
        Api::Responses,
        "carol",
        json!({"model": "sonnet", "input": "More",
        "previous_response_id": id}),
    );
    let stall = sim.send(
        Api::Responses,
        "dave",
        json!({"model": "sonnet", "input": "stall",
        "stream": true}),
    );
    sim.advance(15_000);
    sim.gone(stall);
    // A held call expires; its late result rebuilds the conversation.
    let ask = json!([{"role": "user", "content": "lookup: lima"}]);
    sim.send(Api::Anthropic, "erin", anthropic(ask.clone(), false));
    sim.advance(10 * 60 * 1000);
    let late = json!([ask[0], {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"key": "lima"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "dry"}]}]);
    sim.send(Api::Anthropic, "erin", anthropic(late, false));
    // A CLI dies mid-stream; idle sessions close.
    let dies = sim.send(
        Api::Anthropic,
        "frank",
        anthropic(json!([{"role": "user", "content": "stall"}]), true),
    );
    let session = sim.gateway.request_session(dies).unwrap();
    sim.exit(session, 1);
    // Through the HTTP face: refusals from the head, the routes, a conversation.
    let json_body = [("content-type", "application/json")];
    assert_eq!(sim.http("GET", "/v1/messages", &json_body, ""), None);
    assert_eq!(sim.http("POST", "/v1/nothing", &json_body, "{}"), None);
    assert_eq!(
        sim.http(
            "POST",
            "/v1/messages",
            &[("content-type", "text/plain")],
            "{}"
        ),
        None
    );
    let page = [
        ("origin", "https://evil.example"),
        ("content-type", "application/json"),
    ];
    assert_eq!(sim.http("POST", "/v1/messages", &page, "{}"), None);
    let models = sim.http("GET", "/v1/models", &[], "").unwrap();
    assert!(sim.response(models).text().contains("\"sonnet\""));
    sim.http("GET", "/health", &[], "");
    let count = json!({"model": "sonnet", "messages": [{"role": "user", "content": "How many?"}]});
    sim.http(
        "POST",
        "/v1/messages/count_tokens",
        &json_body,
        &count.to_string(),
    );
    let ask = anthropic(json!([{"role": "user", "content": "Hi over HTTP"}]), true).to_string();
    let turn = sim.http("POST", "/v1/messages", &json_body, &ask).unwrap();
    assert_eq!(sim.response(turn).status, 200);
    sim.advance(31 * 60 * 1000);
    assert_eq!(sim.gateway.session_count(), 0);
    assert!(
        sim.responses.values().all(|r| r.status != 0),
        "every request was answered"
    );
    insta::assert_snapshot!(sim.trace.join("\n"));
}

/// Two gateways behind a router that knows nothing but `route_key` and the keys each gateway
/// claims: every request of a conversation reaches the gateway that holds it.
#[test]
fn a_router_with_the_published_index_keeps_each_conversation_on_its_gateway() {
    let config = GatewayConfig {
        publish_index: true,
        ..GatewayConfig::default()
    };
    let mut gateways = [Sim::new(config.clone()), Sim::new(config)];
    let mut owner: BTreeMap<String, usize> = BTreeMap::new();
    let mut next_new = 0;
    let mut conversations: Vec<Vec<Value>> = (0..4)
        .map(|c| vec![json!({"role": "user", "content": format!("lookup: k{c}")})])
        .collect();
    for _round in 0..3 {
        for (c, messages) in conversations.iter_mut().enumerate() {
            let body = anthropic(json!(messages), false);
            let key = Gateway::route_key(Api::Anthropic, "t", body.to_string().as_bytes()).unwrap();
            let at = match &key {
                RouteKey::New => {
                    next_new += 1;
                    next_new % 2
                }
                RouteKey::Conversation(key) => *owner.get(key).expect("a claimed key"),
            };
            let sim = &mut gateways[at];
            let seen = sim.trace.len();
            let id = sim.send(Api::Anthropic, "t", body);
            let response = sim.response(id).clone();
            let expected = if matches!(key, RouteKey::New) {
                "new"
            } else {
                "continued"
            };
            assert_eq!(
                response.header("x-ccwire-session"),
                Some(expected),
                "conversation {c}"
            );
            // The router learns what the gateway claimed and released.
            for line in &sim.trace[seen..] {
                let step: Value = serde_json::from_str(line).unwrap();
                match step["out"]["type"].as_str() {
                    Some("claim") => {
                        owner.insert(step["out"]["key"].as_str().unwrap().to_owned(), at);
                    }
                    Some("release") => {
                        owner.remove(step["out"]["key"].as_str().unwrap());
                    }
                    _ => {}
                }
            }
            let content = response.json()["content"].clone();
            messages.push(json!({"role": "assistant", "content": content}));
            messages.push(match content[0]["type"].as_str() {
                Some("tool_use") => json!({"role": "user", "content": [{"type": "tool_result",
                    "tool_use_id": content[0]["id"], "content": "v"}]}),
                _ => json!({"role": "user", "content": "lookup: again"}),
            });
        }
    }
    assert_eq!(gateways[0].gateway.session_count(), 2);
    assert_eq!(gateways[1].gateway.session_count(), 2);
    assert_eq!(owner.len(), 4, "one live key per conversation");
    // A closed conversation releases its key: its next request may go anywhere (and rebuilds).
    gateways[0].advance(31 * 60 * 1000);
    assert!(gateways[0]
        .trace
        .iter()
        .any(|l| l.contains(r#""type":"release""#)));
}

#[test]
fn metrics_count_requests_turns_tokens_and_latency() {
    let mut sim = Sim::default();
    let ask = json!([{"role": "user", "content": "lookup: paris"}]);
    sim.send(Api::Anthropic, "t", anthropic(ask.clone(), true));
    sim.advance(250);
    let messages = with_result(&ask, "paris", "sunny");
    sim.send(Api::Anthropic, "t", anthropic(json!(messages), false));
    sim.send(
        Api::OpenAi,
        "t",
        json!({"model": "m", "n": 2, "messages": []}),
    );
    let text = sim.gateway.metrics();
    for line in [
        "ccwire_requests_total{api=\"anthropic\",status=\"200\"} 2",
        "ccwire_requests_total{api=\"openai\",status=\"400\"} 1",
        "ccwire_turns_total{session=\"continued\"} 1",
        "ccwire_turns_total{session=\"new\"} 1",
        "ccwire_sessions 1",
        "ccwire_held_tool_calls 0",
        "ccwire_responses_in_flight 0",
        "ccwire_cli_spawns_total 1",
        // Each of the two responses had one model message: 12 in, 5 out.
        "ccwire_tokens_total{kind=\"input\"} 24",
        "ccwire_tokens_total{kind=\"output\"} 10",
        "ccwire_response_seconds_count 3",
        // Both turns reached the CLI; the refused request did not.
        "ccwire_added_seconds_count 2",
        // The fake CLI answers at once and the engine adds no time of its own.
        "ccwire_added_seconds_bucket{le=\"0.001\"} 2",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
    // Every series is declared, and the output parses as name, optional labels, value.
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, value) = l.rsplit_once(' ').unwrap();
        assert!(series.starts_with("ccwire_"), "{l}");
        value.parse::<f64>().unwrap_or_else(|_| panic!("{l}"));
    }
}

#[test]
fn requests_over_the_concurrency_cap_wait_in_order_and_a_full_queue_is_a_429() {
    let mut sim = Sim::new(GatewayConfig {
        max_concurrent: 2,
        max_queue: 1,
        ..GatewayConfig::default()
    });
    let first = stall(&mut sim, "a");
    let _second = stall(&mut sim, "b");
    let third = stall(&mut sim, "c");
    assert_eq!(sim.clis.len(), 2, "the third waits");
    assert_eq!(sim.response(third).status, 0);
    let fourth = stall(&mut sim, "d");
    assert_eq!(sim.response(fourth).status, 429);
    assert_eq!(sim.response(fourth).header("retry-after"), Some("1"));
    assert!(sim.gateway.metrics().contains("ccwire_requests_queued 1\n"));
    // A turn ends: the waiting request is served.
    sim.gone(first);
    assert_eq!(sim.clis.len(), 3);
    assert_eq!(sim.response(third).status, 200);
    assert!(sim.gateway.metrics().contains("ccwire_requests_queued 0\n"));
}

#[test]
fn a_tenant_at_its_own_cap_waits_without_holding_up_the_others() {
    let mut sim = Sim::new(GatewayConfig {
        max_concurrent_per_key: 1,
        ..GatewayConfig::default()
    });
    let a1 = stall(&mut sim, "a");
    let a2 = stall(&mut sim, "a");
    let b1 = stall(&mut sim, "b");
    assert_eq!(sim.response(a2).status, 0, "a waits for its own turn");
    assert_eq!(sim.response(b1).status, 200, "b does not wait behind a");
    sim.gone(a1);
    assert_eq!(sim.response(a2).status, 200);
}

#[test]
fn a_request_that_waits_too_long_gets_a_429() {
    let mut sim = Sim::new(GatewayConfig {
        max_concurrent: 1,
        queue_timeout_ms: 5_000,
        ..GatewayConfig::default()
    });
    stall(&mut sim, "a");
    let waiting = stall(&mut sim, "b");
    sim.advance(4_999);
    assert_eq!(sim.response(waiting).status, 0);
    sim.advance(1);
    let response = sim.response(waiting);
    assert_eq!(response.status, 429);
    assert!(response.text().contains("for 5 s"), "{}", response.text());
    // A client that leaves the queue is forgotten.
    let left = stall(&mut sim, "c");
    sim.gone(left);
    assert_eq!(sim.gateway.request_count(), 1);
    assert!(sim.gateway.metrics().contains("ccwire_requests_queued 0\n"));
}

#[test]
fn a_warm_pool_gives_new_conversations_a_started_cli_and_refills() {
    let mut sim = Sim::new(GatewayConfig {
        pool: 2,
        ..GatewayConfig::default()
    });
    let first = sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "One"}]), false),
    );
    assert_eq!(sim.response(first).status, 200);
    assert_eq!(spawns(&sim), 3, "its own CLI, and two for the pool");
    assert!(sim.gateway.metrics().contains("ccwire_pool_sessions 2\n"));
    // Both warm CLIs answered initialize and wait, with no prompt.
    for id in [2, 3] {
        let kinds: Vec<&str> = sim
            .cli(id)
            .stdin
            .iter()
            .map(|m| m["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["control_request"], "session {id}");
    }

    let second = sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "Two"}]), false),
    );
    let response = sim.response(second);
    assert_eq!(response.status, 200);
    assert_eq!(response.header("x-ccwire-session"), Some("new"));
    assert_eq!(response.json()["content"][0]["text"], "echo: Two");
    let kinds: Vec<&str> = sim
        .cli(2)
        .stdin
        .iter()
        .map(|m| m["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["control_request", "user"],
        "the oldest warm CLI took it"
    );
    assert_eq!(spawns(&sim), 4, "one more to replace it");
    let metrics = sim.gateway.metrics();
    for line in [
        "ccwire_pool_hits_total 1",
        "ccwire_pool_misses_total 1",
        "ccwire_pool_sessions 2",
        "ccwire_sessions 2",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }
    // The conversation the warm CLI took goes on there.
    let next = json!([{"role": "user", "content": "Two"}, {"role": "assistant", "content": "echo: Two"},
                      {"role": "user", "content": "Three"}]);
    let third = sim.send(Api::Anthropic, "t", anthropic(next, false));
    assert_eq!(
        sim.response(third).header("x-ccwire-session"),
        Some("continued")
    );
    assert_eq!(sim.cli(2).stdin.len(), 3);
}

#[test]
fn other_settings_miss_the_pool_and_take_the_oldest_slot() {
    let mut sim = Sim::new(GatewayConfig {
        pool: 1,
        ..GatewayConfig::default()
    });
    sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "One"}]), false),
    );
    assert_eq!(spawns(&sim), 2);
    // No client tools: other settings, so the warm CLI does not fit.
    let plain = json!({"model": "sonnet", "max_tokens": 10, "messages": [{"role": "user", "content": "Plain"}]});
    let id = sim.send(Api::Anthropic, "t", plain);
    assert_eq!(sim.response(id).status, 200);
    assert_eq!(
        sim.closed,
        [2],
        "the warm CLI of the other settings made room"
    );
    assert_eq!(
        spawns(&sim),
        4,
        "its own CLI and a warm one with its settings"
    );
    assert!(!sim.specs[&4].args.iter().any(|a| a == "--mcp-config"));
}

#[test]
fn warm_clis_count_toward_the_session_cap_and_give_way_to_conversations() {
    let mut sim = Sim::new(GatewayConfig {
        pool: 2,
        max_sessions: 2,
        ..GatewayConfig::default()
    });
    sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "One"}]), false),
    );
    assert_eq!(spawns(&sim), 2, "one warm CLI fits under the cap");
    let plain = json!({"model": "sonnet", "max_tokens": 10, "messages": [{"role": "user", "content": "Plain"}]});
    let id = sim.send(Api::Anthropic, "t", plain);
    assert_eq!(sim.response(id).status, 200, "a warm CLI gave way");
    assert_eq!(sim.gateway.session_count(), 2);
}

#[test]
fn a_drain_refuses_new_conversations_lets_held_turns_finish_and_closes_every_cli() {
    let mut sim = Sim::new(GatewayConfig {
        pool: 1,
        ..GatewayConfig::default()
    });
    // An idle conversation, and one whose turn waits for the client's tool result.
    sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "Idle"}]), false),
    );
    let ask = json!([{"role": "user", "content": "lookup: paris"}]);
    sim.send(Api::Anthropic, "t", anthropic(ask.clone(), false));
    assert_eq!(
        sim.gateway.session_count(),
        3,
        "two conversations and a warm CLI"
    );

    sim.gateway.drain(sim.now, 30_000);
    sim.run();
    assert_eq!(
        sim.gateway.session_count(),
        1,
        "the idle one and the warm one are closed"
    );
    assert!(!sim.gateway.is_drained());
    let new = sim.send(
        Api::OpenAi,
        "t",
        json!({"model": "m", "messages": [{"role": "user", "content": "New"}]}),
    );
    assert_eq!(sim.response(new).status, 503);
    assert_eq!(sim.response(new).header("retry-after"), Some("1"));

    // The held turn finishes; then its CLI is closed too.
    let messages = with_result(&ask, "paris", "sunny");
    let done = sim.send(Api::Anthropic, "t", anthropic(json!(messages), false));
    assert_eq!(
        sim.response(done).json()["content"][0]["text"],
        "done: sunny"
    );
    assert!(sim.gateway.is_drained());
    assert_eq!(sim.gateway.poll_timeout(), None);
}

#[test]
fn a_drain_closes_what_still_runs_at_the_end_of_its_grace() {
    let mut sim = Sim::default();
    let stalled = stall(&mut sim, "t");
    sim.gateway.drain(sim.now, 5_000);
    sim.run();
    assert!(!sim.gateway.is_drained());
    sim.advance(5_000);
    assert!(sim.gateway.is_drained());
    let response = sim.response(stalled);
    assert!(response.ended);
    assert!(
        response
            .text()
            .contains("closed before the response was complete"),
        "{}",
        response.text()
    );
}

#[test]
fn an_enabled_tool_waits_for_a_person_and_runs_once_allowed() {
    let mut sim = approvals_sim();
    let watch = sim.next_request + 100;
    sim.responses.insert(watch, Response::default());
    sim.gateway.handle_approval_events(sim.now, watch, "alice");
    sim.run();
    let turn = bash(&mut sim, "alice", "ls");
    let spec = sim.specs[&1].args.join(" ");
    assert!(spec.contains("--permission-prompt-tool stdio"), "{spec}");
    assert!(
        !spec.contains("--allowedTools Bash"),
        "Bash must ask: {spec}"
    );
    // The turn waits; the approval is listed for its tenant only.
    assert!(!sim.response(turn).ended);
    let list = sim.gateway.approvals("alice");
    assert_eq!(list["data"].as_array().unwrap().len(), 1, "{list}");
    let pending = &list["data"][0];
    assert_eq!(pending["tool_name"], "Bash");
    assert_eq!(pending["input"], json!({"command": "ls"}));
    assert_eq!(
        pending["expires_at_ms"],
        1_800_000_000_000u64 + 1_000 + 60_000
    );
    assert_eq!(sim.gateway.approvals("bob")["data"], json!([]));
    let id = pending["id"].as_str().unwrap().to_owned();
    assert_eq!(
        answer(&mut sim, "bob", &id, json!({"behavior": "allow"})),
        Err(404)
    );
    assert_eq!(
        answer(&mut sim, "alice", &id, json!({"behavior": "maybe"})),
        Err(400)
    );
    assert!(sim
        .gateway
        .metrics()
        .contains("ccwire_pending_approvals 1\n"));

    let decided = answer(
        &mut sim,
        "alice",
        &id,
        json!({"behavior": "allow", "remember": true,
        "updated_input": {"command": "ls -la"}}),
    );
    assert_eq!(decided, Ok(json!({"id": id, "behavior": "allow"})));
    let response = sim.response(turn);
    assert!(response.ended);
    assert!(
        response.text().contains("done: ran ls -la (rules 1)"),
        "{}",
        response.text()
    );
    assert_eq!(
        answer(&mut sim, "alice", &id, json!({"behavior": "allow"})),
        Err(404),
        "once"
    );
    // The watcher saw it come and go.
    let events = sim.response(watch).text();
    assert!(
        events.contains("event: approval\ndata: {")
            && events.contains(&format!(
                "event: resolved\ndata: {{\"id\":\"{id}\",\"behavior\":\"allow\"}}"
            )),
        "{events}"
    );
}

#[test]
fn a_denied_or_unanswered_approval_tells_the_model_the_tool_did_not_run() {
    let mut sim = approvals_sim();
    let turn = bash(&mut sim, "alice", "rm -rf /");
    let id = sim.gateway.approvals("alice")["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    answer(
        &mut sim,
        "alice",
        &id,
        json!({"behavior": "deny", "message": "not that"}),
    )
    .unwrap();
    assert!(sim.response(turn).text().contains("done: denied: not that"));

    let next = json!([{"role": "user", "content": "bash: rm -rf /"}, {"role": "assistant", "content": "done: denied: not that"},
                      {"role": "user", "content": "bash: rm -rf / again"}]);
    let body = json!({"model": "sonnet", "max_tokens": 100, "messages": next});
    let late = sim.send(Api::Anthropic, "alice", body);
    sim.advance(60_000);
    let text = sim.response(late).text();
    assert!(
        text.contains("No one answered this approval in time"),
        "{text}"
    );
    assert_eq!(sim.gateway.approvals("alice")["data"], json!([]));
}

#[test]
fn without_approvals_a_permission_request_is_denied_at_once() {
    let mut sim = Sim::default();
    let turn = bash(&mut sim, "alice", "ls");
    assert!(sim
        .response(turn)
        .text()
        .contains("has no one to approve tools"));
}

#[test]
fn an_account_limit_the_cli_reported_gives_the_429_its_retry_after() {
    let mut sim = Sim::new(GatewayConfig {
        unix_epoch_ms: 1_800_000_000_000,
        ..GatewayConfig::default()
    });
    let asked = sim.send(
        Api::OpenAi,
        "t",
        json!({"model": "m", "messages": [{"role": "user", "content": "stall"}]}),
    );
    // Now = 1 s after the epoch; the limit lifts 90 s later.
    let resets_at = (1_800_000_000_000u64 + 1_000) / 1000 + 90;
    for line in [
        json!({"type": "rate_limit_event", "rate_limit_info": {"status": "rejected",
               "resetsAt": resets_at, "rateLimitType": "five_hour"}, "session_id": "s"}),
        json!({"type": "result", "subtype": "success", "is_error": true, "api_error_status": 429,
               "result": "Claude usage limit reached.", "session_id": "s"}),
    ] {
        sim.gateway
            .handle_stdout(sim.now, 1, format!("{line}\n").as_bytes());
        sim.run();
    }
    let response = sim.response(asked);
    assert_eq!(response.status, 429, "{}", response.text());
    assert_eq!(response.header("retry-after"), Some("90"));
    assert!(response.text().contains("usage limit reached"));
}
