//! The CLI's informational messages — rate limits, tool-use summaries, auth status, prompt
//! suggestions, conversation resets — and the notices beyond the Agent SDK's types (titles,
//! instruction sizes, permission checks, plugin UI pushes, prompt lifecycles, engine events)
//! become typed chunks, not `unknown`.

mod common;

use ccwire_core::{Session, SessionConfig};
use common::{drain, values};
use serde_json::{json, Value};

fn chunks_of(line: Value) -> Vec<Value> {
    let mut session = Session::observer(SessionConfig::default());
    session.handle_stdout(0, format!("{line}\n").as_bytes());
    values(&drain(&mut session).0)
}

#[test]
fn a_rate_limit_event_is_a_rate_limit_chunk_with_its_reset_time() {
    let chunks = chunks_of(
        json!({"type": "rate_limit_event", "uuid": "u", "session_id": "s",
        "rate_limit_info": {"status": "allowed_warning", "resetsAt": 1_764_000_000,
                            "rateLimitType": "five_hour", "utilization": 0.9,
                            "overageStatus": "allowed"}}),
    );
    assert_eq!(
        chunks,
        vec![json!({"type": "rate_limit", "status": "allowed_warning",
            "resets_at": 1_764_000_000u64, "rate_limit_type": "five_hour", "utilization": 0.9,
            "info": {"status": "allowed_warning", "resetsAt": 1_764_000_000,
                     "rateLimitType": "five_hour", "utilization": 0.9,
                     "overageStatus": "allowed"}})]
    );
    // A reset time in milliseconds is read as such.
    let chunks = chunks_of(json!({"type": "rate_limit_event",
        "rate_limit_info": {"status": "rejected", "resetsAt": 1_764_000_000_000u64}}));
    assert_eq!(chunks[0]["resets_at"], 1_764_000_000u64);
    assert_eq!(chunks[0]["rate_limit_type"], Value::Null);
}

#[test]
fn summaries_auth_suggestions_and_resets_are_typed() {
    let chunks = chunks_of(
        json!({"type": "tool_use_summary", "summary": "Read two files",
        "preceding_tool_use_ids": ["t1", "t2"], "uuid": "u", "session_id": "s"}),
    );
    assert_eq!(
        chunks,
        vec![
            json!({"type": "tool_use_summary", "summary": "Read two files",
                    "tool_use_ids": ["t1", "t2"]})
        ]
    );
    let chunks = chunks_of(json!({"type": "auth_status", "isAuthenticating": true,
        "output": ["Open https://example.test"], "uuid": "u", "session_id": "s"}));
    assert_eq!(
        chunks,
        vec![json!({"type": "auth_status", "authenticating": true,
                    "output": ["Open https://example.test"], "error": null})]
    );
    let chunks = chunks_of(
        json!({"type": "prompt_suggestion", "suggestion": "Run the tests",
        "uuid": "u", "session_id": "s"}),
    );
    assert_eq!(
        chunks,
        vec![json!({"type": "prompt_suggestion", "suggestion": "Run the tests"})]
    );
    let chunks = chunks_of(
        json!({"type": "conversation_reset", "new_conversation_id": "c2",
        "trigger": "clear", "uuid": "u", "session_id": "s"}),
    );
    assert_eq!(
        chunks,
        vec![
            json!({"type": "conversation_reset", "new_conversation_id": "c2",
                    "trigger": "clear"})
        ]
    );
}

#[test]
fn an_informational_message_of_the_wrong_shape_is_an_invalid_message() {
    let chunks = chunks_of(json!({"type": "prompt_suggestion", "suggestion": 3}));
    assert_eq!(chunks[0]["type"], "error");
    assert_eq!(chunks[0]["kind"], "invalid_message");
    let chunks = chunks_of(json!({"type": "rate_limit_event"}));
    assert_eq!(chunks[0]["kind"], "invalid_message");
}

#[test]
fn the_notices_beyond_the_sdk_types_are_typed() {
    for (frame, chunk) in common::notice_frames() {
        assert_eq!(chunks_of(frame.clone()), vec![chunk], "{frame}");
    }
}

#[test]
fn a_typed_notice_missing_a_field_is_an_invalid_message_and_the_session_goes_on() {
    let mut session = Session::observer(SessionConfig::default());
    session.handle_stdout(
        0,
        b"{\"type\":\"system\",\"subtype\":\"session_title_changed\",\"given_by\":\"user\"}\n",
    );
    let chunks = values(&drain(&mut session).0);
    assert_eq!(chunks[0]["type"], "error");
    assert_eq!(chunks[0]["kind"], "invalid_message");
    assert!(
        chunks[0]["detail"]
            .as_str()
            .unwrap()
            .contains("session_title_changed"),
        "{}",
        chunks[0]
    );
    let (frame, chunk) = common::notice_frames().remove(0);
    session.handle_stdout(1, format!("{frame}\n").as_bytes());
    assert_eq!(values(&drain(&mut session).0), vec![chunk]);
}
