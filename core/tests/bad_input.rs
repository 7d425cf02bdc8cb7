//! Bad input becomes an `error` or `unknown` chunk, and the session goes on.

mod common;

use ccwire_core::{Session, SessionConfig};
use common::{drain, values};
use serde_json::Value;

const RESULT: &str =
    r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s"}"#;

fn feed(session: &mut Session, bytes: &[u8]) -> Vec<Value> {
    session.handle_stdout(0, bytes);
    values(&drain(session).0)
}

fn observer() -> Session {
    Session::observer(SessionConfig::default())
}

/// The session still works: a result line after the bad input is understood.
fn assert_alive(session: &mut Session) {
    let chunks = feed(session, format!("{RESULT}\n").as_bytes());
    assert_eq!(chunks[0]["type"], "turn_complete");
    assert_eq!(chunks[0]["result"], "ok");
}

fn error_kind(chunk: &Value) -> &str {
    assert_eq!(chunk["type"], "error", "{chunk}");
    chunk["kind"].as_str().unwrap()
}

#[test]
fn garbage_is_a_malformed_line() {
    let mut s = observer();
    let chunks = feed(&mut s, b"[SandboxDebug] starting\n");
    assert_eq!(chunks.len(), 1);
    assert_eq!(error_kind(&chunks[0]), "malformed_line");
    assert_eq!(chunks[0]["excerpt"], "[SandboxDebug] starting");
    assert_alive(&mut s);
}

#[test]
fn truncated_json_is_a_malformed_line() {
    let mut s = observer();
    let chunks = feed(&mut s, b"{\"type\":\"assistant\",\"message\":{\"id\":\n");
    assert_eq!(error_kind(&chunks[0]), "malformed_line");
    assert_alive(&mut s);
}

#[test]
fn a_truncated_last_line_at_eof_is_reported() {
    let mut s = observer();
    s.handle_stdout(0, b"{\"type\":\"result\",\"subt");
    assert!(
        drain(&mut s).0.is_empty(),
        "an incomplete line is not an error yet"
    );
    s.handle_stdout_eof(1);
    let chunks = values(&drain(&mut s).0);
    assert_eq!(error_kind(&chunks[0]), "malformed_line");
}

#[test]
fn invalid_utf8_is_a_malformed_line() {
    let mut s = observer();
    let chunks = feed(&mut s, b"{\"type\":\"user\",\"x\":\"\xff\xfe\"}\n");
    assert_eq!(error_kind(&chunks[0]), "malformed_line");
    assert!(chunks[0]["detail"].as_str().unwrap().contains("UTF-8"));
    assert_alive(&mut s);
}

#[test]
fn json_that_is_not_an_object_with_a_type_is_malformed() {
    let mut s = observer();
    for line in ["42", "\"text\"", "{\"no_type\":1}", "{\"type\":7}", "[1,2]"] {
        let chunks = feed(&mut s, format!("{line}\n").as_bytes());
        assert_eq!(chunks.len(), 1, "{line}");
        assert_eq!(error_kind(&chunks[0]), "malformed_line", "{line}");
    }
    assert_alive(&mut s);
}

#[test]
fn a_known_type_with_a_wrong_shape_is_an_invalid_message() {
    let mut s = observer();
    let chunks = feed(&mut s, b"{\"type\":\"assistant\",\"message\":42}\n");
    assert_eq!(error_kind(&chunks[0]), "invalid_message");
    assert_alive(&mut s);
}

#[test]
fn a_stream_event_that_is_not_one_is_an_invalid_message() {
    let mut s = observer();
    for event in [
        "\"text\"",
        "{\"index\":0}",
        "{\"type\":\"content_block_delta\",\"index\":\"x\"}",
    ] {
        let line = format!("{{\"type\":\"stream_event\",\"event\":{event}}}\n");
        let chunks = feed(&mut s, line.as_bytes());
        assert_eq!(chunks.len(), 1, "{line}");
        assert_eq!(error_kind(&chunks[0]), "invalid_message", "{line}");
    }
    assert_alive(&mut s);
}

#[test]
fn a_new_type_may_shape_known_field_names_its_own_way() {
    let mut s = observer();
    let line = r#"{"type":"brand_new","event":"started","subtype":7,"uuid":["u"]}"#;
    let chunks = feed(&mut s, format!("{line}\n").as_bytes());
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0]["type"], "unknown", "{}", chunks[0]);
    assert_eq!(chunks[0]["message"]["subtype"], 7);
    assert_alive(&mut s);
}

#[test]
fn a_100_mib_line_is_skipped_without_being_held() {
    let mut s = observer();
    let piece = vec![b'x'; 1 << 20];
    let head = b"{\"type\":\"assistant\",\"pad\":\"";
    s.handle_stdout(0, head);
    for _ in 0..100 {
        s.handle_stdout(0, &piece);
        assert!(drain(&mut s).0.is_empty());
    }
    let chunks = feed(&mut s, format!("\"}}\n{RESULT}\n").as_bytes());
    assert_eq!(error_kind(&chunks[0]), "line_too_long");
    assert_eq!(
        chunks[0]["bytes"],
        (head.len() + 100 * (1 << 20) + 2) as u64
    );
    assert_eq!(chunks[1]["type"], "turn_complete");
}

#[test]
fn the_line_limit_is_configurable() {
    let mut s = Session::observer(SessionConfig {
        line_limit: 128,
        ..SessionConfig::default()
    });
    let long = format!(
        "{{\"type\":\"keep_alive\",\"pad\":\"{}\"}}\n",
        "y".repeat(200)
    );
    let chunks = feed(&mut s, long.as_bytes());
    assert_eq!(error_kind(&chunks[0]), "line_too_long");
    assert_alive(&mut s);
}

#[test]
fn unknown_types_and_subtypes_are_kept_whole() {
    let mut s = observer();
    let line = r#"{"type":"brand_new","payload":{"a":[1,2]},"note":"kept"}"#;
    let chunks = feed(&mut s, format!("{line}\n").as_bytes());
    assert_eq!(chunks[0]["type"], "unknown");
    assert_eq!(
        chunks[0]["message"],
        serde_json::from_str::<Value>(line).unwrap()
    );

    let request = r#"{"type":"control_request","request_id":"r1","request":{"subtype":"future_thing","x":1}}"#;
    let chunks = feed(&mut s, format!("{request}\n").as_bytes());
    assert_eq!(chunks[0]["type"], "unknown");
    assert_eq!(chunks[0]["message"]["request"]["x"], 1);
    assert_alive(&mut s);
}

#[test]
fn a_named_system_subtype_is_a_status_with_every_field_and_an_unnamed_one_unknown() {
    let mut s = observer();
    let chunks = feed(
        &mut s,
        b"{\"type\":\"system\",\"subtype\":\"turn_duration\",\"level\":3,\"x\":{\"y\":null}}\n",
    );
    assert_eq!(
        chunks[0],
        serde_json::json!({"type":"status","subtype":"turn_duration","level":3,"x":{"y":null}})
    );
    let line = r#"{"type":"system","subtype":"brand_new","level":3,"x":{"y":null}}"#;
    let chunks = feed(&mut s, format!("{line}\n").as_bytes());
    assert_eq!(
        chunks[0],
        serde_json::json!({"type":"unknown","message":serde_json::from_str::<Value>(line).unwrap()})
    );
    assert_alive(&mut s);
}

#[test]
fn a_control_response_for_an_unknown_request_id_is_reported() {
    let mut s = observer();
    let line = r#"{"type":"control_response","response":{"subtype":"success","request_id":"nobody","response":{"x":1}}}"#;
    let chunks = feed(&mut s, format!("{line}\n").as_bytes());
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0]["type"], "control_result");
    assert_eq!(chunks[0]["request_id"], "nobody");
    assert_eq!(chunks[0]["subtype"], Value::Null);
    assert_eq!(chunks[0]["response"]["x"], 1);
    assert_alive(&mut s);
}

#[test]
fn a_cancel_for_an_unknown_request_is_kept_as_unknown() {
    let mut s = observer();
    let chunks = feed(
        &mut s,
        b"{\"type\":\"control_cancel_request\",\"request_id\":\"nobody\"}\n",
    );
    assert_eq!(chunks[0]["type"], "unknown");
}

#[test]
fn a_repeated_request_id_is_reported_and_answered_once() {
    let mut s = Session::driver(SessionConfig::default());
    let request = r#"{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"ls"},"tool_use_id":"t1"}}"#;
    let first = feed(&mut s, format!("{request}\n").as_bytes());
    assert_eq!(first[0]["type"], "permission_request");
    let again = feed(&mut s, format!("{request}\n").as_bytes());
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(error_kind(&again[0]), "invalid_message");
    assert!(again[0]["detail"]
        .as_str()
        .unwrap()
        .contains("reuses the id r1"));
    assert_eq!(
        s.respond_permission(0, "r1", ccwire_core::PermissionDecision::allow()),
        Ok(ccwire_core::Delivery::Sent)
    );
    let (_, writes) = drain(&mut s);
    assert_eq!(writes.len(), 1, "one answer");
    assert_eq!(
        s.respond_permission(0, "r1", ccwire_core::PermissionDecision::allow()),
        Ok(ccwire_core::Delivery::Dropped)
    );
    // Repeated after its answer, it is not asked again either.
    let late = feed(&mut s, format!("{request}\n").as_bytes());
    assert_eq!(late.len(), 1, "{late:?}");
    assert_eq!(error_kind(&late[0]), "invalid_message");
    assert!(drain(&mut s).1.is_empty(), "no second answer");
    assert_alive(&mut s);
}

#[test]
fn streamed_tool_input_that_is_not_json_is_reported() {
    let mut s = observer();
    let lines = [
        r#"{"type":"stream_event","event":{"type":"message_start","message":{"id":"m1","model":"x"}}}"#,
        r#"{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"Bash","input":{}}},"api_message_id":"m1"}"#,
        r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}},"api_message_id":"m1"}"#,
        r#"{"type":"stream_event","event":{"type":"content_block_stop","index":0},"api_message_id":"m1"}"#,
    ];
    let chunks = feed(&mut s, (lines.join("\n") + "\n").as_bytes());
    let err = chunks.iter().find(|c| c["type"] == "error").unwrap();
    assert_eq!(error_kind(err), "malformed_tool_input");
    let complete = chunks
        .iter()
        .find(|c| c["type"] == "tool_use" && c["complete"] == true)
        .unwrap();
    assert_eq!(complete["input"], Value::Null);
}

#[test]
fn errors_carry_at_most_200_bytes_of_the_line() {
    let mut s = observer();
    let line = format!("not json {}\n", "é".repeat(300));
    let chunks = feed(&mut s, line.as_bytes());
    let excerpt = chunks[0]["excerpt"].as_str().unwrap();
    assert!(excerpt.len() <= 200);
    assert!(excerpt.starts_with("not json é"));
}

#[test]
fn a_tool_progress_or_a_tool_result_naming_no_tool_is_an_invalid_message() {
    let mut s = observer();
    for line in [
        r#"{"type":"tool_progress","tool_name":"Bash","elapsed_time_seconds":1}"#,
        r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"ok"}]}}"#,
    ] {
        let chunks = feed(&mut s, format!("{line}\n").as_bytes());
        assert_eq!(chunks.len(), 1, "{line}: {chunks:?}");
        assert_eq!(chunks[0]["type"], "error", "{line}");
        assert_eq!(chunks[0]["kind"], "invalid_message", "{line}");
        assert!(
            chunks[0]["detail"]
                .as_str()
                .unwrap()
                .contains("tool_use_id"),
            "{line}"
        );
    }
    assert_alive(&mut s);
}
