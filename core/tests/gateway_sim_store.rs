//! The gateway engine in simulation ([`sim`]) with a session store: conversations resumed from
//! their stored transcripts, stored responses, other gateways' conversations.

mod sim;

use sim::*;

#[test]
fn a_hibernated_conversation_is_resumed_from_its_stored_transcript() {
    let mut sim = with_store(GatewayConfig {
        limits: Limits {
            hibernate_after_ms: 60_000,
            ..Limits::default()
        },
        ..GatewayConfig::default()
    });
    let first = sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "One"}]), false),
    );
    assert_eq!(sim.response(first).status, 200);
    // The CLI names its transcript for the conversation and mirrors it.
    let args = &sim.specs[&1].args;
    let id = args
        .iter()
        .find_map(|a| a.strip_prefix("--session-id="))
        .expect("a named session")
        .to_owned();
    assert!(args.contains(&"--session-mirror".to_owned()), "{args:?}");
    let store = sim.store.as_ref().unwrap();
    assert_eq!(
        store.transcripts[&id],
        [json!({"type": "user", "message": {"role": "user", "content": "One"}})],
        "its own transcript, not a subagent's"
    );
    let saved = store.saves.last().unwrap().clone();
    assert_eq!(saved.key.id, id);
    assert_eq!(saved.state, RecordState::Live);
    assert_eq!(
        saved.transcript,
        format!("/home/.claude/projects/-work/{id}.jsonl")
    );

    // Idle past the hibernation delay: the CLI is closed, the record says why.
    sim.advance(60_000);
    assert_eq!(sim.closed, [1]);
    assert_eq!(sim.gateway.session_count(), 0);
    let store = sim.store.as_ref().unwrap();
    assert_eq!(store.saves.last().unwrap().state, RecordState::Hibernated);

    // The next request resumes it: a new CLI reads the stored transcript and gets only the
    // new message.
    let back = json!([{"role": "user", "content": "One"}, {"role": "assistant", "content": "echo: One"},
                      {"role": "user", "content": "Again"}]);
    let again = sim.send(Api::Anthropic, "t", anthropic(back, false));
    let response = sim.response(again);
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.header("x-ccwire-session"), Some("resumed"));
    assert_eq!(
        response.header("x-ccwire-session-reason"),
        Some("hibernated")
    );
    let spec = &sim.specs[&2];
    assert!(spec.args.contains(&format!("--resume={id}")), "{spec:?}");
    assert!(!spec.args.iter().any(|a| a.starts_with("--session-id")));
    let resume = spec.resume.as_ref().expect("a transcript to write");
    assert_eq!(
        (resume.key.id.as_str(), resume.path.as_str()),
        (id.as_str(), saved.transcript.as_str())
    );
    let prompts: Vec<&Value> = sim
        .cli(2)
        .stdin
        .iter()
        .filter(|m| m["type"] == "user")
        .collect();
    assert_eq!(prompts.len(), 1);
    assert_eq!(
        prompts[0]["message"]["content"],
        json!([{"type": "text", "text": "Again"}])
    );
    assert!(sim
        .gateway
        .metrics()
        .contains("ccwire_resumes_total{reason=\"hibernated\"} 1"));
}

#[test]
fn a_conversation_another_gateway_resumed_is_closed_here_without_a_save() {
    let mut sim = with_store(GatewayConfig::default());
    let first = sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "One"}]), false),
    );
    assert_eq!(sim.response(first).status, 200);
    let key = sim
        .store
        .as_ref()
        .unwrap()
        .saves
        .last()
        .unwrap()
        .key
        .clone();
    let saves = sim.store.as_ref().unwrap().saves.len();

    // Another tenant's conversation of the same id (none) is not this one.
    let theirs = ccwire_core::gateway::ConversationKey {
        tenant: "someone else".to_owned(),
        id: key.id.clone(),
    };
    sim.gateway
        .handle_store(sim.now, StoreAnswer::Superseded { key: theirs });
    sim.run();
    assert_eq!(sim.gateway.session_count(), 1);

    // The store refused this gateway's write: its CLI is closed, nothing more saved, and
    // the conversation's next request is looked up in the store.
    sim.gateway
        .handle_store(sim.now, StoreAnswer::Superseded { key });
    sim.run();
    assert_eq!(sim.closed, [1]);
    assert_eq!(sim.gateway.session_count(), 0);
    assert_eq!(sim.store.as_ref().unwrap().saves.len(), saves);
    assert!(sim
        .gateway
        .metrics()
        .contains("ccwire_cli_exits_total{how=\"superseded\"} 1"));
}

#[test]
fn a_history_the_store_does_not_know_is_rebuilt_and_a_lookup_without_its_client_starts_nothing() {
    let mut sim = with_store(GatewayConfig::default());
    let unknown = json!([{"role": "user", "content": "One"}, {"role": "assistant", "content": "Hi"},
                         {"role": "user", "content": "Again"}]);
    let request = sim.send(Api::Anthropic, "t", anthropic(unknown.clone(), false));
    let response = sim.response(request);
    assert_eq!(response.status, 200);
    assert_eq!(response.header("x-ccwire-session"), Some("rebuilt"));
    assert!(sim.specs[&1].resume.is_none());

    // Another tenant's conversation is not found under its history.
    let other = sim.send(Api::Anthropic, "u", anthropic(unknown, false));
    assert_eq!(
        sim.response(other).header("x-ccwire-session"),
        Some("rebuilt")
    );

    // A request whose client goes away while the store looks: nothing starts.
    let mut held = with_store(GatewayConfig::default());
    held.next_request += 1;
    let id = held.next_request;
    held.responses.insert(id, Response::default());
    let body = anthropic(
        json!([{"role": "user", "content": "A"}, {"role": "assistant", "content": "B"},
               {"role": "user", "content": "C"}]),
        false,
    )
    .to_string();
    held.gateway
        .handle_request(held.now, id, Api::Anthropic, "t", body.as_bytes());
    let find = held.gateway.poll_output();
    assert!(
        matches!(find, Some(GatewayOutput::Store(StoreAsk::Find { request, .. })) if request == id),
        "{find:?}"
    );
    assert!(held.gateway.is_finding(id));
    held.gateway.handle_client_gone(held.now, id);
    held.gateway.handle_store(
        held.now,
        StoreAnswer::Found {
            request: id,
            record: None,
        },
    );
    held.run();
    assert!(held.specs.is_empty(), "no CLI for a client gone");
    assert!(!held.response(id).ended);
}

#[test]
fn tool_results_continue_the_session_holding_their_calls_whatever_the_order_of_the_turn() {
    let mut sim = Sim::default();
    let ask = json!([{"role": "user", "content": "lookup: paris, rome"}]);
    let first = sim.send(Api::Anthropic, "t", anthropic(ask.clone(), false));
    let answer = sim.response(first).json();
    let mut blocks = answer["content"].as_array().unwrap().clone();
    assert_eq!(blocks.len(), 2);
    // The client sends the turn back with its blocks in another order (as LiteLLM's adapters
    // do): another history hash, the same calls.
    blocks.reverse();
    let mut messages = ask.as_array().unwrap().clone();
    messages.push(json!({"role": "assistant", "content": blocks}));
    messages.push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "rainy"},
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]}));
    // Another tenant's results for those ids continue nothing of it.
    let other = sim.send(Api::Anthropic, "u", anthropic(json!(messages), false));
    assert_eq!(
        sim.response(other).header("x-ccwire-session"),
        Some("rebuilt")
    );
    assert_eq!(
        sim.gateway.held_count(),
        2,
        "still held for their own client"
    );
    let results = sim.send(Api::Anthropic, "t", anthropic(json!(messages), false));
    let response = sim.response(results);
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.header("x-ccwire-session"), Some("continued"));
    assert_eq!(
        sim.specs.len(),
        2,
        "no new CLI for it (one for the other tenant)"
    );
    assert_eq!(sim.gateway.held_count(), 0, "both calls answered");
    // The conversation goes on from the client's own order.
    messages.push(json!({"role": "assistant", "content": response.json()["content"]}));
    messages.push(json!({"role": "user", "content": "Thanks"}));
    let next = sim.send(Api::Anthropic, "t", anthropic(json!(messages), false));
    assert_eq!(
        sim.response(next).header("x-ccwire-session"),
        Some("continued")
    );
}

#[test]
fn a_history_that_parts_from_a_live_conversation_says_where_and_frees_its_cli() {
    let mut sim = Sim::new(GatewayConfig {
        tenant_root: Some("/state/tenants".into()),
        ..GatewayConfig::default()
    });
    let ask = json!([{"role": "user", "content": "lookup: paris"}]);
    let first = sim.send(Api::Anthropic, "t", anthropic(ask.clone(), false));
    let answer = sim.response(first).json();
    assert_eq!(sim.gateway.held_count(), 1);
    // The client answers the call itself, another way, and goes on.
    let mut messages = ask.as_array().unwrap().clone();
    messages.push(json!({"role": "assistant", "content": answer["content"]}));
    messages.push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]}));
    messages.push(json!({"role": "assistant", "content": "It is sunny in Paris."}));
    messages.push(json!({"role": "user", "content": "Thanks"}));
    let other = sim.send(Api::Anthropic, "t", anthropic(json!(messages), false));
    let response = sim.response(other);
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.header("x-ccwire-session"), Some("resumed"));
    assert_eq!(
        response.header("x-ccwire-session-reason"),
        Some("diverged at message 2")
    );
    // The CLI that waited for the result is closed, its call no longer held.
    assert_eq!(sim.closed, [1]);
    assert_eq!(sim.gateway.held_count(), 0);
    // The new CLI resumes the client's history, written as its transcript.
    let resume = sim.specs[&2].resume.as_ref().expect("a transcript");
    assert!(
        sim.specs[&2]
            .args
            .contains(&format!("--resume={}", resume.key.id)),
        "a store or not, the CLI resumes what was written for it"
    );
    let lines = resume.written.as_ref().expect("a written history").lines();
    assert_eq!(lines.len(), 4);
    assert!(lines[1].get().contains("mcp__client__lookup"));
    assert!(sim
        .gateway
        .metrics()
        .contains("ccwire_resumes_total{reason=\"diverged\"} 1"));
}

/// A new gateway on `sim`'s session store.
fn restarted(mut sim: Sim) -> Sim {
    let store = sim.store.take();
    let mut sim = with_store(GatewayConfig {
        unix_epoch_ms: 1,
        ..GatewayConfig::default()
    });
    sim.store = store;
    sim
}

/// How many stored responses the gateway asked the store for.
fn stored_responses_read(sim: &Sim) -> usize {
    (sim.trace.iter())
        .filter(|l| l.contains("\"ask\":\"find_response\""))
        .count()
}

/// The content of the first prompt the first CLI got.
fn first_prompt(sim: &Sim) -> Value {
    let cli = sim.cli(1);
    let prompt = cli.stdin.iter().find(|m| m["type"] == "user").unwrap();
    prompt["message"]["content"].clone()
}

#[test]
fn a_chain_of_stored_responses_is_read_back_link_by_link_after_a_restart() {
    let mut sim = with_store(GatewayConfig::default());
    let first = sim.send(
        Api::Responses,
        "t",
        json!({"model": "sonnet", "input": "One"}),
    );
    let one = sim.response(first).json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let second = sim.send(
        Api::Responses,
        "t",
        json!({"model": "sonnet", "input": "Two", "previous_response_id": one}),
    );
    let two = sim.response(second).json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(sim.store.as_ref().unwrap().responses.len(), 2);

    // A new gateway on the same store holds none of them: it reads both links.
    let mut sim = restarted(sim);
    let third = sim.send(
        Api::Responses,
        "t",
        json!({"model": "sonnet", "input": "Three", "previous_response_id": two}),
    );
    let response = sim.response(third);
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(stored_responses_read(&sim), 2, "one read per link");
    // The whole chain is the history of a stored conversation: a CLI resumes it and gets the
    // new input alone.
    assert_eq!(response.header("x-ccwire-session"), Some("resumed"));
    assert!(sim.specs[&1].resume.is_some());
    assert_eq!(
        first_prompt(&sim),
        json!([{"type": "text", "text": "Three"}])
    );
}

/// The AI SDK's default OpenAI provider names the model's earlier text by `item_reference`:
/// after a restart, the response that holds the item is read back from the store first.
#[test]
fn an_item_reference_is_read_back_from_the_store_after_a_restart() {
    let mut sim = with_store(GatewayConfig::default());
    let first = sim.send(
        Api::Responses,
        "t",
        json!({"model": "sonnet", "input": "One"}),
    );
    let body = sim.response(first).json();
    let item = body["output"][0]["id"].as_str().unwrap().to_owned();
    assert!(item.starts_with("msg_"), "{body}");
    let text = body["output"][0]["content"][0]["text"].clone();

    let mut sim = restarted(sim);
    let input = |item: &str| {
        json!({"model": "sonnet", "input": [
            {"role": "user", "content": "One"},
            {"type": "item_reference", "id": item},
            {"role": "user", "content": "Again"},
        ]})
    };
    let next = sim.send(Api::Responses, "t", input(&item));
    let response = sim.response(next);
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(stored_responses_read(&sim), 1);
    // The history is whole, the referenced text in its place: the stored conversation is
    // resumed and its CLI gets the new input alone.
    assert_eq!(response.header("x-ccwire-session"), Some("resumed"));
    assert!(sim.specs[&1].resume.is_some(), "a transcript to write");
    assert_eq!(
        first_prompt(&sim),
        json!([{"type": "text", "text": "Again"}])
    );
    assert_eq!(text, json!("echo: One"));
    // An item the store does not have either: a 400 naming it.
    let missing = item.replace("msg_", "msg_0");
    let refused = sim.send(Api::Responses, "t", input(&missing));
    let response = sim.response(refused);
    assert_eq!(response.status, 400, "{}", response.text());
    assert_eq!(response.json()["error"]["param"], "input[1].id");
}

/// A turn is acknowledged only once its record is kept: the response's end (its whole body,
/// or its stream's last events) waits for the store, and a store that cannot keep it makes
/// the turn fail with a 503 (an error event in a started stream), never a success a gateway
/// killed a moment later would lose.
#[test]
fn a_turn_ends_only_once_its_record_is_kept() {
    let mut sim = with_store(GatewayConfig {
        keep_timeout_ms: 5_000,
        ..GatewayConfig::default()
    });
    let kept = sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "One"}]), false),
    );
    assert_eq!(sim.response(kept).status, 200, "a healthy store");

    // The store cannot keep records: the whole answer becomes a 503 to retry.
    sim.store.as_mut().unwrap().down = Some(true);
    let history = |last: &str| {
        json!([{"role": "user", "content": "One"}, {"role": "assistant", "content": "echo: One"},
               {"role": "user", "content": last}])
    };
    let refused = sim.send(Api::Anthropic, "t", anthropic(history("Two"), false));
    let response = sim.response(refused);
    assert_eq!(response.status, 503, "{}", response.text());
    assert!(
        response.text().contains("session store"),
        "{}",
        response.text()
    );
    assert_eq!(response.header("retry-after"), Some("2"));
    assert!(!response.text().contains("echo: Two"), "no answer given");
    // The CLI that has the turn the store does not is closed: the retry goes on from the
    // conversation as the store kept it.
    assert_eq!(sim.closed, [1]);

    // A stream that has begun ends with the API's error event instead of `message_stop`.
    let streamed = sim.send(Api::Anthropic, "t", anthropic(history("Three"), true));
    let response = sim.response(streamed);
    assert!(response.ended);
    let types: Vec<Value> = events(&response.text())
        .iter()
        .map(|e| e["type"].clone())
        .collect();
    assert!(types.contains(&json!("message_start")), "{types:?}");
    assert_eq!(types.last(), Some(&json!("error")), "{types:?}");
    assert!(!types.contains(&json!("message_stop")), "{types:?}");
    assert_eq!(
        response.header("x-ccwire-session"),
        Some("resumed"),
        "from the record kept before the failed turn"
    );
    assert_eq!(sim.closed, [1, 2]);

    // A store that does not answer: the answer waits, then fails at the deadline.
    sim.store.as_mut().unwrap().down = Some(false);
    let hung = sim.send(
        Api::OpenAi,
        "t",
        json!({"model": "claude-sonnet-4-5",
        "messages": [{"role": "user", "content": "Four"}]}),
    );
    assert!(!sim.response(hung).ended, "waits for the store");
    assert_eq!(sim.response(hung).status, 0, "nothing told yet");
    sim.advance(5_000);
    let response = sim.response(hung);
    assert_eq!(response.status, 503, "{}", response.text());
    assert!(response.ended);
    // An answer after the deadline changes nothing.
    sim.gateway
        .handle_store(sim.now, StoreAnswer::Kept { request: hung });
    sim.run();
    assert_eq!(sim.response(hung).status, 503);
    assert!(
        sim.gateway
            .metrics()
            .contains("ccwire_store_failures_total{op=\"turn\"} 3"),
        "{}",
        sim.gateway.metrics()
    );
}

#[test]
fn a_key_whose_stored_conversations_fill_its_quota_gets_a_413_until_they_expire() {
    let mut sim = with_store(GatewayConfig {
        store_quota: Some(200),
        ..GatewayConfig::default()
    });
    let turn = |sim: &mut Sim, tenant: &str, text: &str| {
        let body = anthropic(json!([{"role": "user", "content": text}]), false);
        sim.send(Api::Anthropic, tenant, body)
    };
    // Under the quota, turns go on; the one that takes the key over it is still served.
    let first = turn(&mut sim, "a", "One");
    assert_eq!(sim.response(first).status, 200);
    let long = "x".repeat(300);
    let over = turn(&mut sim, "a", &long);
    assert_eq!(sim.response(over).status, 200);
    let used = sim.store.as_ref().unwrap().usage[&tenant_id("a")];
    assert!(used >= 200, "{used}");
    // Over it: a 413 in the API's shape, before any CLI work.
    let clis = sim.specs.len();
    let refused = turn(&mut sim, "a", "Three");
    let response = sim.response(refused);
    assert_eq!(response.status, 413, "{}", response.text());
    let body = response.json();
    assert_eq!(body["error"]["type"], "request_too_large");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("take {used} bytes")) && message.contains("limit of 200 bytes"),
        "{message}"
    );
    assert_eq!(sim.specs.len(), clis, "no CLI started");
    // Another key's turns go on.
    let other = turn(&mut sim, "b", "Hi");
    assert_eq!(sim.response(other).status, 200);
    // Its old conversations expire; the gateway hears it when it asks again, which it does
    // at most every 10 seconds while it refuses the key.
    sim.store.as_mut().unwrap().usage.insert(tenant_id("a"), 0);
    let refused = turn(&mut sim, "a", "Four");
    assert_eq!(sim.response(refused).status, 413, "not asked again yet");
    sim.advance(10_000);
    let refused = turn(&mut sim, "a", "Five");
    assert_eq!(
        sim.response(refused).status,
        413,
        "asked: this one's answer comes after"
    );
    let again = turn(&mut sim, "a", "Six");
    assert_eq!(sim.response(again).status, 200);
}

/// A gateway with tenant directories (as `ccwire serve` runs), without a store.
fn with_dirs(limits: Limits) -> Sim {
    Sim::new(GatewayConfig {
        tenant_root: Some("/state/tenants".into()),
        limits,
        ..GatewayConfig::default()
    })
}

/// The history of a `lookup: paris` turn with the client's result for its call.
fn with_paris_result(sim: &mut Sim, first: RequestId) -> Vec<Value> {
    let answer = sim.response(first).json();
    vec![
        json!({"role": "user", "content": "lookup: paris"}),
        json!({"role": "assistant", "content": answer["content"]}),
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]}),
    ]
}

/// The new CLI `session` resumes the history written with the results and goes on from them
/// by itself: it was sent no prompt.
fn assert_goes_on_from_results(sim: &Sim, session: SessionId) {
    let spec = &sim.specs[&session];
    let resume = spec.resume.as_ref().expect("a transcript");
    assert!(resume.rerun);
    assert!(spec
        .env
        .contains(&("CLAUDE_CODE_RESUME_INTERRUPTED_TURN".into(), "1".into())));
    let written = resume.written.as_ref().expect("a written history");
    assert_eq!(
        written.messages.len(),
        3,
        "the prompt, the call, its result"
    );
    let lines = written.lines();
    assert!(lines[1].get().contains("mcp__client__lookup"));
    assert!(lines[2].get().contains("\"tool_result\""));
    assert!(
        !sim.cli(session).stdin.iter().any(|m| m["type"] == "user"),
        "no prompt"
    );
}

#[test]
fn results_under_other_settings_go_on_in_a_new_cli_and_free_the_one_that_held_the_calls() {
    let mut sim = with_dirs(Limits::default());
    let ask = json!([{"role": "user", "content": "lookup: paris"}]);
    let first = sim.send(Api::Anthropic, "t", anthropic(ask, false));
    assert_eq!(sim.gateway.held_count(), 1);
    // The results come without tools and with a system prompt: other settings.
    let body = json!({"model": "sonnet", "max_tokens": 100, "system": "Reflect.",
        "messages": with_paris_result(&mut sim, first)});
    // Another tenant's results for that id free nothing of it.
    let other = sim.send(Api::Anthropic, "u", body.clone());
    assert_eq!(
        sim.response(other).header("x-ccwire-session-reason"),
        Some("history")
    );
    assert_eq!(sim.gateway.held_count(), 1);
    let results = sim.send(Api::Anthropic, "t", body);
    let response = sim.response(results);
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.header("x-ccwire-session"), Some("resumed"));
    assert_eq!(response.header("x-ccwire-session-reason"), Some("settings"));
    assert_eq!(text_of(&response.json()), "done: sunny");
    assert_eq!(sim.closed, [1], "the CLI that held the call");
    assert_eq!(sim.gateway.held_count(), 0);
    assert_goes_on_from_results(&sim, 3);
    // The system prompt it goes on with is recorded after them, as the CLI records its own.
    let written = sim.specs[&3]
        .resume
        .as_ref()
        .unwrap()
        .written
        .clone()
        .unwrap();
    let last = written.lines().pop().unwrap();
    assert!(last.get().contains("\"prompt_snapshot\"") && last.get().contains("Reflect."));
}

#[test]
fn results_after_the_held_call_timeout_go_on_in_a_new_cli() {
    let mut sim = with_dirs(Limits {
        held_call_timeout_ms: 1000,
        ..Limits::default()
    });
    let ask = json!([{"role": "user", "content": "lookup: paris"}]);
    let first = sim.send(Api::Anthropic, "t", anthropic(ask, false));
    sim.advance(1500);
    assert_eq!(sim.gateway.held_count(), 0, "given up on");
    let messages = with_paris_result(&mut sim, first);
    let results = sim.send(Api::Anthropic, "t", anthropic(json!(messages), false));
    let response = sim.response(results);
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.header("x-ccwire-session"), Some("resumed"));
    assert_eq!(response.header("x-ccwire-session-reason"), Some("late"));
    assert_eq!(text_of(&response.json()), "done: sunny");
    assert_goes_on_from_results(&sim, 2);
    assert!(sim
        .gateway
        .metrics()
        .contains("ccwire_resumes_total{reason=\"late\"} 1"));
}

/// The text blocks of an Anthropic answer.
fn text_of(body: &Value) -> String {
    (body["content"].as_array().unwrap().iter())
        .filter_map(|b| b["text"].as_str())
        .collect()
}
