//! The gateway engine in simulation ([`sim`]): the Managed Agents API's sessions — turns, custom
//! tools, built-in tools and their confirmations, interrupts, streams, the store.

mod sim;

use sim::*;

#[test]
fn a_deleted_session_s_cli_is_closed_and_its_own_directory_deleted_after() {
    let mut sim = Sim::new(GatewayConfig {
        tenant_root: Some("/state/tenants".to_owned()),
        http: ccwire_core::gateway::HttpConfig {
            api_keys: vec!["alice".into(), "bob".into()],
            ..ccwire_core::gateway::HttpConfig::default()
        },
        ..GatewayConfig::default()
    });
    let agent = json!({"name": "Helper", "model": "sonnet"});
    let session = new_session(&mut sim, agent, json!({}));
    let id = session["id"].as_str().unwrap().to_owned();
    let send =
        json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": "hi"}]}]});
    let events = format!("/v1/sessions/{id}/events");
    assert_eq!(managed(&mut sim, "alice", "POST", &events, send).0, 200);
    let (cli, spec) = sim
        .specs
        .iter()
        .next()
        .map(|(s, spec)| (*s, spec.clone()))
        .unwrap();
    let dir = spec.cwd.clone().expect("its own directory");
    assert!(
        dir.starts_with("/state/tenants/") && dir.ends_with(&format!("/sessions/{id}")),
        "{dir}"
    );
    assert!(sim.removed.is_empty());

    // Another tenant cannot delete it; its owner can.
    let path = format!("/v1/sessions/{id}");
    assert_eq!(
        managed(&mut sim, "bob", "DELETE", &path, Value::Null).0,
        404
    );
    assert!(sim.closed.is_empty() && sim.removed.is_empty());
    assert_eq!(
        managed(&mut sim, "alice", "DELETE", &path, Value::Null).0,
        200
    );
    assert_eq!(sim.closed, [cli], "its CLI is closed");
    assert_eq!(sim.removed, [(dir, 1)], "then its directory deleted");
    assert_eq!(managed(&mut sim, "alice", "GET", &path, Value::Null).0, 404);
}

#[test]
fn a_stream_that_asks_for_previews_gets_the_agent_s_words_as_they_come_and_no_other_does() {
    let mut sim = with_keys(false);
    let agent = json!({"name": "Helper", "model": "sonnet"});
    let session = new_session(&mut sim, agent, json!({}));
    let id = session["id"].as_str().unwrap().to_owned();
    let stream = |sim: &mut Sim, query: &str| {
        let path = format!("/v1/sessions/{id}/events/stream{query}");
        sim.http("GET", &path, &[JSON, ("authorization", "Bearer alice")], "")
            .unwrap()
    };
    let previewed = stream(
        &mut sim,
        "?event_deltas[]=agent.message&event_deltas[]=agent.thinking",
    );
    let plain = stream(&mut sim, "");
    let unknown = stream(&mut sim, "?event_deltas=agent.future_kind");
    let send = json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": "hello there"}]}]});
    let path = format!("/v1/sessions/{id}/events");
    assert_eq!(managed(&mut sim, "alice", "POST", &path, send).0, 200);

    // Frames of the stream: (event name, data).
    let frames = |text: &str| -> Vec<(String, Value)> {
        (text.split("\n\n"))
            .filter_map(|f| {
                let name = f.lines().find_map(|l| l.strip_prefix("event: "))?;
                let data = f.lines().find_map(|l| l.strip_prefix("data: "))?;
                Some((name.to_owned(), serde_json::from_str(data).unwrap()))
            })
            .collect()
    };
    let seen = frames(&sim.response(previewed).text());
    let start = seen
        .iter()
        .position(|(n, _)| n == "event_start")
        .expect("a preview");
    let message_at = seen.iter().position(|(n, _)| n == "agent.message").unwrap();
    assert!(start < message_at);
    let event_id = seen[start].1["event"]["id"].as_str().unwrap().to_owned();
    assert_eq!(seen[start].1["event"]["type"], "agent.message");
    let deltas: Vec<&Value> = (seen[start..message_at].iter())
        .filter(|(n, _)| n == "event_delta")
        .map(|(_, d)| d)
        .collect();
    assert!(!deltas.is_empty());
    let mut text = String::new();
    for delta in &deltas {
        assert_eq!(delta["event_id"], event_id.as_str());
        assert_eq!(delta["delta"]["type"], "content_delta");
        assert_eq!(delta["delta"]["index"], 0);
        assert_eq!(delta["delta"]["content"]["type"], "text");
        text.push_str(delta["delta"]["content"]["text"].as_str().unwrap());
    }
    // The buffered message carries the preview's id and the whole text.
    let message = &seen[message_at].1;
    assert_eq!(message["id"], event_id.as_str());
    assert_eq!(message["content"][0]["text"], text.as_str());
    assert_eq!(text, "echo: hello there");

    // Streams that did not ask (or asked for a kind this gateway does not preview) get none,
    // and the log has none.
    for other in [plain, unknown] {
        let theirs = sim.response(other).text();
        assert!(
            !theirs.contains("event_start") && !theirs.contains("event_delta"),
            "{theirs}"
        );
        assert!(
            theirs.contains(&format!("\"id\":\"{event_id}\"")),
            "the same message"
        );
    }
    let (_, log) = managed(&mut sim, "alice", "GET", &path, Value::Null);
    let types: Vec<&str> = (log["data"].as_array().unwrap().iter())
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert!(
        !types.contains(&"event_start") && !types.contains(&"event_delta"),
        "{types:?}"
    );
}

#[test]
fn a_session_runs_its_agent_turn_by_turn_with_a_custom_tool_round_trip() {
    let mut sim = with_keys(false);
    let agent = json!({"name": "Helper", "model": "sonnet", "system": "Be brief.",
        "tools": [{"type": "custom", "name": "lookup", "description": "Looks a key up.",
                   "input_schema": {"type": "object", "properties": {"key": {"type": "string"}}}}]});
    let session = new_session(&mut sim, agent, json!({"title": "t"}));
    assert_eq!(session["status"], "idle");
    let id = session["id"].as_str().unwrap().to_owned();

    // A stream of its events, from now on.
    let stream = sim
        .http(
            "GET",
            &format!("/v1/sessions/{id}/events/stream"),
            &[JSON, ("authorization", "Bearer alice")],
            "",
        )
        .unwrap();
    assert_eq!(
        sim.response(stream).header("content-type"),
        Some("text/event-stream")
    );

    // A message: the agent answers, the session is idle again.
    let send = json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": "hello there"}]}]});
    let (status, sent) = managed(
        &mut sim,
        "alice",
        "POST",
        &format!("/v1/sessions/{id}/events"),
        send,
    );
    assert_eq!(status, 200, "{sent}");
    assert_eq!(sent["data"][0]["type"], "user.message");
    let (_, events) = managed(
        &mut sim,
        "alice",
        "GET",
        &format!("/v1/sessions/{id}/events"),
        Value::Null,
    );
    let types: Vec<&str> = events["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "user.message",
            "session.status_running",
            "span.model_request_start",
            "agent.message",
            "span.model_request_end",
            "session.status_idle"
        ]
    );
    let message = &events["data"][3];
    assert_eq!(message["content"][0]["text"], "echo: hello there");
    assert_eq!(events["data"][5]["stop_reason"]["type"], "end_turn");
    let streamed = sim.response(stream).text();
    assert!(
        streamed.contains("event: agent.message\ndata: "),
        "{streamed}"
    );
    assert!(
        streamed.contains("event: session.status_idle\n"),
        "{streamed}"
    );

    // The agent calls the client's tool: the session waits for its result.
    let send = json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": "lookup: k1"}]}]});
    managed(
        &mut sim,
        "alice",
        "POST",
        &format!("/v1/sessions/{id}/events"),
        send,
    );
    let (_, events) = managed(
        &mut sim,
        "alice",
        "GET",
        &format!("/v1/sessions/{id}/events?order=desc&limit=2"),
        Value::Null,
    );
    let idle = &events["data"][0];
    let call = &events["data"][1];
    assert_eq!(
        (call["type"].as_str(), call["name"].as_str()),
        (Some("agent.custom_tool_use"), Some("lookup"))
    );
    assert_eq!(call["input"], json!({"key": "k1"}));
    assert_eq!(
        idle["stop_reason"],
        json!({"type": "requires_action", "event_ids": [call["id"]]})
    );
    let result = json!({"events": [{"type": "user.custom_tool_result", "custom_tool_use_id": call["id"],
        "content": [{"type": "text", "text": "v1"}]}]});
    let (status, _) = managed(
        &mut sim,
        "alice",
        "POST",
        &format!("/v1/sessions/{id}/events"),
        result,
    );
    assert_eq!(status, 200);
    let (_, events) = managed(
        &mut sim,
        "alice",
        "GET",
        &format!("/v1/sessions/{id}/events?order=desc&limit=3"),
        Value::Null,
    );
    assert_eq!(events["data"][0]["stop_reason"]["type"], "end_turn");
    assert_eq!(events["data"][2]["type"], "agent.message");
    // One CLI ran the whole session: the held call was answered, not retold.
    assert_eq!(sim.specs.len(), 1);
    let (_, session) = managed(
        &mut sim,
        "alice",
        "GET",
        &format!("/v1/sessions/{id}"),
        Value::Null,
    );
    assert_eq!(session["status"], "idle");
    assert!(
        session["usage"]["output_tokens"].as_u64().unwrap() > 0,
        "{session}"
    );

    // Another tenant sees none of it.
    let (status, _) = managed(
        &mut sim,
        "bob",
        "GET",
        &format!("/v1/sessions/{id}"),
        Value::Null,
    );
    assert_eq!(status, 404);
    let (_, list) = managed(&mut sim, "bob", "GET", "/v1/sessions", Value::Null);
    assert_eq!(list["data"], json!([]));
    let (_, list) = managed(&mut sim, "alice", "GET", "/v1/sessions", Value::Null);
    assert_eq!(list["data"].as_array().unwrap().len(), 1);

    // Deleted: its stream ends with the API's last word.
    let (status, deleted) = managed(
        &mut sim,
        "alice",
        "DELETE",
        &format!("/v1/sessions/{id}"),
        Value::Null,
    );
    assert_eq!(
        (status, deleted["type"].as_str()),
        (200, Some("session_deleted"))
    );
    assert!(sim.response(stream).ended);
    assert!(sim
        .response(stream)
        .text()
        .contains("event: session.deleted\n"));
}

#[test]
fn a_session_outlives_its_gateway_through_the_store() {
    let mut sim = with_keys(true);
    let first = json!({"initial_events": [{"type": "user.message",
        "content": [{"type": "text", "text": "first"}]}]});
    let session = new_session(&mut sim, json!({"name": "A", "model": "sonnet"}), first);
    let id = session["id"].as_str().unwrap().to_owned();
    let (_, before) = managed(
        &mut sim,
        "alice",
        "GET",
        &format!("/v1/sessions/{id}/events"),
        Value::Null,
    );
    assert_eq!(
        before["data"].as_array().unwrap().last().unwrap()["type"],
        "session.status_idle"
    );

    // A new gateway on the same store: the session, its log and its conversation are back.
    let store = sim.store.take();
    let mut sim = with_keys(true);
    sim.store = store;
    let (status, after) = managed(
        &mut sim,
        "alice",
        "GET",
        &format!("/v1/sessions/{id}/events"),
        Value::Null,
    );
    assert_eq!((status, &after), (200, &before));
    let send = json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": "second"}]}]});
    managed(
        &mut sim,
        "alice",
        "POST",
        &format!("/v1/sessions/{id}/events"),
        send,
    );
    let (_, events) = managed(
        &mut sim,
        "alice",
        "GET",
        &format!("/v1/sessions/{id}/events?order=desc&limit=3"),
        Value::Null,
    );
    assert_eq!(events["data"][2]["content"][0]["text"], "echo: second");
    // Its CLI resumed the stored conversation: it was told only the new message.
    let spec = &sim.specs[&1];
    assert!(
        spec.args.iter().any(|a| a.starts_with("--resume=")),
        "{spec:?}"
    );
}

#[test]
fn an_interrupt_stops_a_session_s_turn_and_the_next_message_goes_on_in_the_same_cli() {
    let mut sim = with_keys(false);
    let session = new_session(&mut sim, json!({"name": "A", "model": "sonnet"}), json!({}));
    let id = session["id"].as_str().unwrap().to_owned();
    let events = format!("/v1/sessions/{id}/events");
    let say = |text: &str| json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": text}]}]});

    // A first turn, then one that does not end by itself.
    managed(&mut sim, "alice", "POST", &events, say("hello"));
    managed(&mut sim, "alice", "POST", &events, say("stall"));
    let (_, now) = managed(
        &mut sim,
        "alice",
        "GET",
        &format!("/v1/sessions/{id}"),
        Value::Null,
    );
    assert_eq!(now["status"], "running");
    let (status, _) = managed(
        &mut sim,
        "alice",
        "POST",
        &events,
        json!({"events": [{"type": "user.interrupt"}]}),
    );
    assert_eq!(status, 200);
    let (_, now) = managed(
        &mut sim,
        "alice",
        "GET",
        &format!("/v1/sessions/{id}"),
        Value::Null,
    );
    assert_eq!(now["status"], "idle");
    let (_, log) = managed(
        &mut sim,
        "alice",
        "GET",
        &format!("{events}?order=desc&limit=3"),
        Value::Null,
    );
    let types: Vec<&str> = log["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "session.status_idle",
            "span.model_request_end",
            "user.interrupt"
        ]
    );
    assert_eq!(log["data"][1]["is_error"], true);

    // The next message is answered by the same CLI.
    managed(
        &mut sim,
        "alice",
        "POST",
        &events,
        say("after the interrupt"),
    );
    sim.advance(2_000);
    let (_, log) = managed(
        &mut sim,
        "alice",
        "GET",
        &format!("{events}?order=desc&limit=3"),
        Value::Null,
    );
    assert_eq!(log["data"][0]["stop_reason"]["type"], "end_turn", "{log}");
    assert_eq!(
        log["data"][2]["content"][0]["text"],
        "echo: after the interrupt"
    );
    assert_eq!(sim.specs.len(), 1, "one CLI all along");
}

#[test]
fn a_session_s_built_in_tool_asks_its_user_and_runs_in_the_session_s_own_directory() {
    let mut sim = Sim::new(GatewayConfig {
        enabled_tools: vec!["Bash".to_owned(), "Read".to_owned()],
        tenant_root: Some("/state/tenants".to_owned()),
        approval_timeout_ms: 60_000,
        http: ccwire_core::gateway::HttpConfig {
            api_keys: vec!["alice".into(), "bob".into()],
            ..ccwire_core::gateway::HttpConfig::default()
        },
        ..GatewayConfig::default()
    });
    let agent = json!({"name": "Shell", "model": "sonnet", "tools": [
        {"type": "agent_toolset_20260401",
         "configs": [{"name": "bash", "permission_policy": {"type": "always_ask"}}]}]});
    let session = new_session(&mut sim, agent, json!({}));
    let id = session["id"].as_str().unwrap().to_owned();
    let events = format!("/v1/sessions/{id}/events");
    let say = |text: &str| json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": text}]}]});
    let confirm = |call: &Value, answer: Value| {
        let mut event = json!({"type": "user.tool_confirmation", "tool_use_id": call["id"]});
        for (k, v) in answer.as_object().unwrap() {
            event[k] = v.clone();
        }
        json!({"events": [event]})
    };

    managed(&mut sim, "alice", "POST", &events, say("bash: ls"));
    // Its CLI runs the agent's tools the gateway enables, in a directory of its own; Bash
    // asks first.
    let spec = &sim.specs[&1];
    let args = spec.args.join(" ");
    assert!(args.contains("--tools Bash,Read"), "{args}");
    assert!(args.contains("--allowedTools Read"), "{args}");
    assert!(!args.contains("--allowedTools Bash"), "{args}");
    // Every Bash call asks, even one the CLI deems safe to run unasked.
    let init = &sim.cli(1).stdin[0]["request"];
    assert_eq!(init["hooks"]["PreToolUse"][0]["matcher"], "Bash", "{init}");
    let tenant = ccwire_core::gateway::tenant_id("alice");
    assert_eq!(
        spec.cwd.as_deref(),
        Some(format!("/state/tenants/{tenant}/sessions/{id}").as_str())
    );
    let (types, log) = event_types(&mut sim, &id, 0);
    assert_eq!(
        types,
        [
            "user.message",
            "session.status_running",
            "span.model_request_start",
            "agent.tool_use",
            "span.model_request_end",
            "session.status_idle"
        ]
    );
    let call = log[3].clone();
    // Each model request is a span, with its message's usage.
    assert_eq!(log[4]["model_request_start_id"], log[2]["id"]);
    assert_eq!(log[4]["model_usage"]["output_tokens"], 5);
    assert_eq!(log[4]["is_error"], false);
    assert_eq!(call["name"], "bash");
    assert_eq!(call["input"], json!({"command": "ls"}));
    assert_eq!(call["evaluated_permission"], "ask");
    assert_eq!(call["evaluation"], json!({"type": "always_ask"}));
    assert_eq!(
        log[5]["stop_reason"],
        json!({"type": "requires_action", "event_ids": [call["id"]]})
    );
    let (_, now) = managed(
        &mut sim,
        "alice",
        "GET",
        &format!("/v1/sessions/{id}"),
        Value::Null,
    );
    assert_eq!(now["status"], "idle");

    // Confirmations name a call that waits for one, and say allow or deny.
    let wrong = json!({"events": [{"type": "user.tool_confirmation", "tool_use_id": "sevt_nope", "result": "allow"}]});
    assert_eq!(managed(&mut sim, "alice", "POST", &events, wrong).0, 400);
    let maybe = confirm(&call, json!({"result": "maybe"}));
    assert_eq!(managed(&mut sim, "alice", "POST", &events, maybe).0, 400);
    let (status, _) = managed(
        &mut sim,
        "bob",
        "POST",
        &events,
        confirm(&call, json!({"result": "allow"})),
    );
    assert_eq!(status, 404, "another tenant's session");

    let (status, _) = managed(
        &mut sim,
        "alice",
        "POST",
        &events,
        confirm(&call, json!({"result": "allow"})),
    );
    assert_eq!(status, 200);
    let (types, log) = event_types(&mut sim, &id, 6);
    assert_eq!(
        types,
        [
            "user.tool_confirmation",
            "session.status_running",
            "agent.tool_result",
            "span.model_request_start",
            "agent.message",
            "span.model_request_end",
            "session.status_idle"
        ]
    );
    assert_eq!(log[2]["tool_use_id"], call["id"]);
    assert_eq!(log[2]["is_error"], false);
    assert_eq!(log[2]["content"][0]["text"], "ran ls (rules 0)");
    assert_eq!(log[4]["content"][0]["text"], "done: ran ls (rules 0)");
    assert_eq!(log[5]["model_request_start_id"], log[3]["id"]);
    assert_eq!(log[6]["stop_reason"]["type"], "end_turn");

    // Denied, with the user's words for the model.
    managed(&mut sim, "alice", "POST", &events, say("bash: rm -rf /"));
    let (_, log) = event_types(&mut sim, &id, 13);
    let call = log
        .iter()
        .find(|e| e["type"] == "agent.tool_use")
        .unwrap()
        .clone();
    let deny = confirm(&call, json!({"result": "deny", "deny_message": "not that"}));
    assert_eq!(managed(&mut sim, "alice", "POST", &events, deny).0, 200);
    let (_, log) = event_types(&mut sim, &id, 13);
    let result = log
        .iter()
        .find(|e| e["type"] == "agent.tool_result")
        .unwrap();
    assert_eq!(result["is_error"], true);
    assert_eq!(result["content"][0]["text"], "denied: not that");
    let said = log.iter().rfind(|e| e["type"] == "agent.message").unwrap();
    assert_eq!(said["content"][0]["text"], "done: denied: not that");

    // Unanswered: denied when the confirmation's time is up.
    managed(&mut sim, "alice", "POST", &events, say("bash: sleep 1"));
    sim.advance(60_001);
    let (_, log) = event_types(&mut sim, &id, 0);
    let result = log
        .iter()
        .rfind(|e| e["type"] == "agent.tool_result")
        .unwrap();
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("No one confirmed this tool call in time"),
        "{result}"
    );
    assert_eq!(log.last().unwrap()["stop_reason"]["type"], "end_turn");
    assert_eq!(sim.specs.len(), 1, "one CLI all along");
}

#[test]
fn a_stream_reopened_with_last_event_id_goes_on_after_that_event() {
    let mut sim = with_keys(false);
    let first = json!({"initial_events": [{"type": "user.message",
        "content": [{"type": "text", "text": "first"}]}]});
    let session = new_session(&mut sim, json!({"name": "A", "model": "sonnet"}), first);
    let id = session["id"].as_str().unwrap().to_owned();
    let (_, log) = event_types(&mut sim, &id, 0);
    let seen = log[2]["id"].as_str().unwrap();
    let stream = sim
        .http(
            "GET",
            &format!("/v1/sessions/{id}/events/stream"),
            &[
                JSON,
                ("authorization", "Bearer alice"),
                ("last-event-id", seen),
            ],
            "",
        )
        .unwrap();
    let text = sim.response(stream).text();
    let ids: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .collect();
    let after: Vec<&str> = log[3..].iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids, after, "{text}");
}

#[test]
fn an_archived_session_stops_its_turn_and_terminates() {
    let mut sim = with_keys(false);
    let session = new_session(&mut sim, json!({"name": "A", "model": "sonnet"}), json!({}));
    let id = session["id"].as_str().unwrap().to_owned();
    let events = format!("/v1/sessions/{id}/events");
    let stream = sim
        .http(
            "GET",
            &format!("{events}/stream"),
            &[JSON, ("authorization", "Bearer alice")],
            "",
        )
        .unwrap();
    let say = |text: &str| json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": text}]}]});
    managed(&mut sim, "alice", "POST", &events, say("stall"));
    let (status, archived) = managed(
        &mut sim,
        "alice",
        "POST",
        &format!("/v1/sessions/{id}/archive"),
        Value::Null,
    );
    assert_eq!(status, 200);
    assert_eq!(archived["status"], "terminated");
    assert!(archived["archived_at"].is_string());
    let (types, _) = event_types(&mut sim, &id, 0);
    assert_eq!(
        types[types.len() - 3..],
        [
            "span.model_request_end",
            "session.status_idle",
            "session.status_terminated"
        ]
    );
    assert!(sim.response(stream).ended);
    assert!(sim
        .response(stream)
        .text()
        .contains("event: session.status_terminated\n"));
    assert_eq!(
        managed(&mut sim, "alice", "POST", &events, say("more")).0,
        400
    );
}
