//! Helpers shared by the core's integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use ccwire_core::{Chunk, Output, Session};
use serde_json::Value;

/// The recorded corpus folder.
pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus")
}

/// Every corpus transcript, sorted by name.
pub fn corpus() -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(corpus_dir())
        .expect("the corpus folder exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect()
}

/// One transcript by name.
pub fn transcript(name: &str) -> Vec<u8> {
    std::fs::read(corpus_dir().join(format!("{name}.jsonl"))).expect("transcript exists")
}

/// A transcript line.
#[derive(Debug, Clone)]
pub struct Line {
    pub dir: String,
    pub t_ms: u64,
    pub msg: Value,
    /// The message exactly as recorded.
    pub raw: String,
}

/// Parses a transcript into its wire lines (notes included).
pub fn lines(bytes: &[u8]) -> Vec<Line> {
    std::str::from_utf8(bytes)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            #[derive(serde::Deserialize)]
            struct Raw<'a> {
                #[serde(borrow)]
                msg: Option<&'a serde_json::value::RawValue>,
            }
            let v: Value = serde_json::from_str(l).unwrap();
            let raw: Raw<'_> = serde_json::from_str(l).unwrap();
            Line {
                dir: v["dir"].as_str().unwrap_or("out").to_owned(),
                t_ms: v["t_ms"].as_u64().unwrap_or(0),
                msg: v.get("msg").cloned().unwrap_or(Value::Null),
                raw: raw
                    .msg
                    .map(|m| m.get().to_owned())
                    .unwrap_or_else(|| l.to_owned()),
            }
        })
        .collect()
}

/// Chunks as JSON lines.
pub fn to_jsonl(chunks: &[Chunk]) -> String {
    let mut out = String::new();
    for c in chunks {
        out.push_str(&c.to_json());
        out.push('\n');
    }
    out
}

/// Drains a session into chunks and written lines (parsed as JSON).
pub fn drain(session: &mut Session) -> (Vec<Chunk>, Vec<Value>) {
    let mut chunks = Vec::new();
    let mut writes = Vec::new();
    while let Some(out) = session.poll_output() {
        match out {
            Output::Chunk(c) => chunks.push(c),
            Output::Write(bytes) => {
                assert_eq!(bytes.last(), Some(&b'\n'), "writes are whole lines");
                assert_eq!(
                    bytes.iter().filter(|b| **b == b'\n').count(),
                    1,
                    "one message per write"
                );
                writes.push(serde_json::from_slice(&bytes).unwrap());
            }
        }
    }
    (chunks, writes)
}

/// Chunks as JSON values.
pub fn values(chunks: &[Chunk]) -> Vec<Value> {
    chunks
        .iter()
        .map(|c| serde_json::from_str(&c.to_json()).unwrap())
        .collect()
}

/// One frame of each notice with a chunk of its own, shaped as the pinned CLI's schemas declare
/// them, each with the chunk it must give.
#[allow(dead_code)]
pub fn notice_frames() -> Vec<(Value, Value)> {
    use serde_json::json;
    let ids = |mut frame: Value| {
        frame["uuid"] = json!("5e8d2c1a-0000-4000-8000-000000000001");
        frame["session_id"] = json!("s1");
        frame
    };
    vec![
        (
            ids(json!({"type": "system", "subtype": "session_title_changed",
                "title": "Fix the flaky test", "given_by": "user"})),
            json!({"type": "title_changed", "title": "Fix the flaky test", "given_by": "user"}),
        ),
        (
            ids(
                json!({"type": "system", "subtype": "instruction_size_warning",
                "total_chars": 61000, "total_limit_chars": 40000, "file_count": 3,
                "largest_chars": 52000}),
            ),
            json!({"type": "instruction_size_warning", "total_chars": 61000,
                "total_limit_chars": 40000, "file_count": 3, "largest_chars": 52000}),
        ),
        (
            ids(
                json!({"type": "system", "subtype": "file_attachments_missing",
                "message_uuid": "m1", "sent_count": 2,
                "missing": [{"file_uuid": "f2", "reason": "no_space"}]}),
            ),
            json!({"type": "file_attachments_missing", "message_uuid": "m1", "sent_count": 2,
                "missing": [{"file_uuid": "f2", "reason": "no_space"}]}),
        ),
        (
            ids(
                json!({"type": "system", "subtype": "permission_check_status",
                "tool_use_id": "toolu_1", "status": "checking"}),
            ),
            json!({"type": "permission_check", "tool_use_id": "toolu_1", "agent_id": null,
                "status": "checking"}),
        ),
        (
            ids(
                json!({"type": "system", "subtype": "inherited_asks_settled",
                "kept_request_ids": ["r1", "r2"]}),
            ),
            json!({"type": "inherited_asks_settled", "kept_request_ids": ["r1", "r2"]}),
        ),
        (
            ids(
                json!({"type": "system", "subtype": "ui_toast", "plugin": "deploy",
                "text": "<b>Deployed</b>", "timeout_ms": 4000}),
            ),
            json!({"type": "plugin_ui", "kind": "toast", "plugin": "deploy",
                "text": "<b>Deployed</b>", "fields": {"timeout_ms": 4000,
                "uuid": "5e8d2c1a-0000-4000-8000-000000000001", "session_id": "s1"}}),
        ),
        (
            ids(
                json!({"type": "system", "subtype": "ui_status", "plugin": "deploy",
                "text": null}),
            ),
            json!({"type": "plugin_ui", "kind": "status", "plugin": "deploy", "text": null,
                "fields": {"uuid": "5e8d2c1a-0000-4000-8000-000000000001",
                "session_id": "s1"}}),
        ),
        (
            ids(
                json!({"type": "command_lifecycle", "command_uuid": "c1", "state": "started",
                "wakeup_source": "loop_wakeup", "scheduled_for": 1_764_000_000_000u64}),
            ),
            json!({"type": "command_lifecycle", "command_uuid": "c1", "state": "started",
                "wakeup_source": "loop_wakeup", "scheduled_for": 1_764_000_000_000u64}),
        ),
        (
            ids(json!({"type": "active_goal", "value": null})),
            json!({"type": "cli_event", "event": "active_goal",
                "message": ids(json!({"type": "active_goal", "value": null}))}),
        ),
    ]
}
