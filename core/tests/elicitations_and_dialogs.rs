//! The CLI's `elicitation` and `request_user_dialog` requests: request chunks the embedder
//! answers, deadlines, the tool-wait state, and the SDKs' defaults for a host with no handler.

mod common;

use ccwire_core::{Delivery, Session, SessionConfig, Timeouts};
use common::{drain, values};
use serde_json::{json, Value};

fn feed(session: &mut Session, now: u64, line: Value) -> (Vec<Value>, Vec<Value>) {
    session.handle_stdout(now, format!("{line}\n").as_bytes());
    let (chunks, writes) = drain(session);
    (values(&chunks), writes)
}

fn of_type<'a>(chunks: &'a [Value], kind: &str) -> Vec<&'a Value> {
    chunks.iter().filter(|c| c["type"] == kind).collect()
}

fn elicitation(id: &str) -> Value {
    json!({"type": "control_request", "request_id": id, "request": {
        "subtype": "elicitation", "mcp_server_name": "notes", "message": "Which folder?",
        "mode": "form", "requested_schema": {"type": "object",
            "properties": {"folder": {"type": "string"}}}}})
}

/// A turn in which the model called the `notes` server's `save` tool.
fn turn_with_tool(session: &mut Session) {
    session
        .send_user_message(0, ccwire_core::UserMessage::text("Save it."))
        .unwrap();
    feed(
        session,
        0,
        json!({"type": "assistant", "session_id": "s", "parent_tool_use_id": null,
        "message": {"id": "m1", "role": "assistant", "model": "x", "content": [
            {"type": "tool_use", "id": "t1", "name": "mcp__notes__save", "input": {}}]}}),
    );
}

#[test]
fn with_no_handler_an_elicitation_is_shown_and_declined_at_once() {
    let mut session = Session::driver(SessionConfig::default());
    let (chunks, writes) = feed(&mut session, 0, elicitation("e1"));
    let request = of_type(&chunks, "elicitation_request");
    assert_eq!(request.len(), 1);
    assert_eq!(request[0]["server"], "notes");
    assert_eq!(request[0]["message"], "Which folder?");
    assert_eq!(request[0]["mode"], "form");
    assert_eq!(
        request[0]["requested_schema"]["properties"]["folder"]["type"],
        "string"
    );
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0]["response"]["request_id"], "e1");
    assert_eq!(
        writes[0]["response"]["response"],
        json!({"action": "decline"})
    );
    let resolved = of_type(&chunks, "request_resolved");
    assert_eq!(resolved[0]["reason"], "default");
    assert_eq!(resolved[0]["response"], json!({"action": "decline"}));
}

#[test]
fn an_elicitation_the_host_answers_holds_its_tool_until_answered_once() {
    let mut session = Session::driver(SessionConfig {
        elicitations: true,
        timeouts: Timeouts {
            elicitation_ms: Some(5_000),
            ..Timeouts::default()
        },
        ..SessionConfig::default()
    });
    turn_with_tool(&mut session);
    let (chunks, writes) = feed(&mut session, 100, elicitation("e1"));
    assert!(writes.is_empty(), "the host answers, not the session");
    let request = of_type(&chunks, "elicitation_request")[0];
    assert_eq!(request["tool_use_id"], "t1");
    assert_eq!(request["deadline_ms"], 5_100);
    let wait = session.tool_wait();
    assert!(wait.waiting);
    assert_eq!(wait.blocked_on[0].request_id, "e1");
    let answer = json!({"action": "accept", "content": {"folder": "inbox"}});
    assert_eq!(
        session.respond_elicitation(200, "e1", answer.clone()),
        Ok(Delivery::Sent)
    );
    let (chunks, writes) = drain(&mut session);
    assert_eq!(writes[0]["response"]["response"], answer);
    let chunks = values(&chunks);
    assert_eq!(of_type(&chunks, "request_resolved")[0]["reason"], "host");
    assert!(!session.tool_wait().waiting);
    assert_eq!(
        session.respond_elicitation(300, "e1", json!({"action": "decline"})),
        Ok(Delivery::Dropped)
    );
    assert!(drain(&mut session).1.is_empty(), "answered once");
    assert!(
        session.respond_user_dialog(300, "e1", json!({})).is_ok(),
        "a settled id is dropped whatever the call"
    );
}

#[test]
fn an_unanswered_elicitation_is_cancelled_at_its_deadline() {
    let mut session = Session::driver(SessionConfig {
        elicitations: true,
        timeouts: Timeouts {
            elicitation_ms: Some(1_000),
            ..Timeouts::default()
        },
        ..SessionConfig::default()
    });
    feed(&mut session, 0, elicitation("e1"));
    let (at, reason) = session.poll_timeout().unwrap();
    assert_eq!(at, 1_000);
    assert_eq!(reason.to_string(), "waiting on elicitation e1");
    session.handle_timeout(1_000);
    let (chunks, writes) = drain(&mut session);
    assert_eq!(
        writes[0]["response"]["response"],
        json!({"action": "cancel"})
    );
    assert_eq!(values(&chunks)[0]["reason"], "timeout");
}

#[test]
fn a_dialog_waits_for_the_host_and_is_dismissed_at_its_deadline() {
    let mut session = Session::driver(SessionConfig {
        timeouts: Timeouts {
            dialog_ms: Some(1_000),
            ..Timeouts::default()
        },
        ..SessionConfig::default()
    });
    turn_with_tool(&mut session);
    let dialog = |id: &str| {
        json!({"type": "control_request", "request_id": id, "request": {
            "subtype": "request_user_dialog", "dialog_kind": "refusal_fallback_prompt",
            "payload": {"model": "x"}, "tool_use_id": "t1"}})
    };
    let (chunks, writes) = feed(&mut session, 0, dialog("d1"));
    assert!(writes.is_empty(), "a dialog is never answered for the host");
    let request = of_type(&chunks, "dialog_request")[0];
    assert_eq!(request["dialog_kind"], "refusal_fallback_prompt");
    assert_eq!(request["payload"], json!({"model": "x"}));
    assert_eq!(session.tool_wait().blocked_on[0].request_id, "d1");
    let answer = json!({"behavior": "completed", "result": {"choice": "retry"}});
    assert_eq!(
        session.respond_user_dialog(10, "d1", answer.clone()),
        Ok(Delivery::Sent)
    );
    assert_eq!(drain(&mut session).1[0]["response"]["response"], answer);
    assert!(
        session
            .respond_permission(10, "d1", ccwire_core::PermissionDecision::allow())
            .is_ok(),
        "settled"
    );
    // A second dialog, unanswered: dismissed at its deadline.
    feed(&mut session, 20, dialog("d2"));
    assert!(session
        .respond_elicitation(30, "d2", json!({"action": "accept"}))
        .is_err());
    session.handle_timeout(1_020);
    let (chunks, writes) = drain(&mut session);
    assert_eq!(
        writes[0]["response"]["response"],
        json!({"behavior": "cancelled"})
    );
    assert_eq!(
        of_type(&values(&chunks), "request_resolved")[0]["reason"],
        "timeout"
    );
}

#[test]
fn an_observer_sees_the_request_and_the_host_s_answer() {
    let mut session = Session::observer(SessionConfig::default());
    let (chunks, _) = feed(&mut session, 0, elicitation("e1"));
    assert_eq!(of_type(&chunks, "elicitation_request").len(), 1);
    assert!(of_type(&chunks, "request_resolved").is_empty());
    let answer = json!({"type": "control_response", "response": {"subtype": "success",
        "request_id": "e1", "response": {"action": "accept", "content": {"folder": "a"}}}});
    session.handle_stdin(1, format!("{answer}\n").as_bytes());
    let chunks = values(&drain(&mut session).0);
    let resolved = of_type(&chunks, "request_resolved")[0];
    assert_eq!(resolved["reason"], "host");
    assert_eq!(resolved["response"]["content"]["folder"], "a");
    // The CLI withdrawing a request is a request_cancelled.
    feed(&mut session, 2, elicitation("e2"));
    let (chunks, _) = feed(
        &mut session,
        3,
        json!({"type": "control_cancel_request", "request_id": "e2"}),
    );
    assert_eq!(of_type(&chunks, "request_cancelled")[0]["request_id"], "e2");
}
