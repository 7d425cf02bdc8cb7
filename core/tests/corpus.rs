//! What a reader of docs/CHUNKS.md checks on every recorded transcript: texts equal the
//! assistant texts, every tool call ends with its result and a final status, permissions resolve
//! once, and the tool-wait state is right where the transcript stops.

mod common;

use std::collections::BTreeMap;

use ccwire_core::{Chunk, Replayer, ToolStatus};
use common::{corpus, lines, values};
use serde_json::Value;

fn replay_all(bytes: &[u8]) -> (Vec<Chunk>, Replayer) {
    let mut replayer = Replayer::new();
    replayer.push(bytes);
    replayer.finish();
    let chunks = std::iter::from_fn(|| replayer.poll_chunk()).collect();
    (chunks, replayer)
}

/// Joined text per message id, of one block type, from the `assistant` frames.
fn frame_texts(bytes: &[u8], block: &str, field: &str) -> BTreeMap<String, String> {
    let mut texts = BTreeMap::new();
    for line in lines(bytes) {
        if line.dir != "out" || line.msg["type"] != "assistant" {
            continue;
        }
        let id = line.msg["message"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let content = &line.msg["message"]["content"];
        let mut text = String::new();
        if let Some(s) = content.as_str() {
            if block == "text" {
                text.push_str(s);
            }
        }
        for b in content.as_array().into_iter().flatten() {
            if b["type"] == block {
                text.push_str(b[field].as_str().unwrap_or_default());
            }
        }
        texts.entry(id).or_insert_with(String::new).push_str(&text);
    }
    texts.retain(|_, t| !t.is_empty());
    texts
}

fn chunk_texts(chunks: &[Value], kind: &str, field: &str) -> BTreeMap<String, String> {
    let mut texts = BTreeMap::new();
    for c in chunks.iter().filter(|c| c["type"] == kind) {
        let id = c["message_id"].as_str().unwrap().to_owned();
        texts
            .entry(id)
            .or_insert_with(String::new)
            .push_str(c[field].as_str().unwrap());
    }
    texts.retain(|_, t| !t.is_empty());
    texts
}

#[test]
fn streamed_and_framed_texts_equal_the_assistant_frames() {
    for (name, bytes) in corpus() {
        let (chunks, _) = replay_all(&bytes);
        let chunks = values(&chunks);
        assert_eq!(
            chunk_texts(&chunks, "text_delta", "text"),
            frame_texts(&bytes, "text", "text"),
            "{name}: text"
        );
        assert_eq!(
            chunk_texts(&chunks, "thinking_delta", "thinking"),
            frame_texts(&bytes, "thinking", "thinking"),
            "{name}: thinking"
        );
    }
}

#[test]
fn every_tool_call_has_its_result_and_a_final_status() {
    for (name, bytes) in corpus() {
        let (chunks, replayer) = replay_all(&bytes);
        let chunks = values(&chunks);
        let mut last_status: BTreeMap<String, String> = BTreeMap::new();
        let mut results: BTreeMap<String, bool> = BTreeMap::new();
        for c in &chunks {
            let id = || c["id"].as_str().unwrap().to_owned();
            match c["type"].as_str().unwrap() {
                "tool_status" => {
                    let prev = last_status.insert(id(), c["status"].as_str().unwrap().to_owned());
                    let was_final = prev
                        .as_deref()
                        .is_some_and(|s| matches!(s, "success" | "error" | "cancelled"));
                    assert!(!was_final, "{name}: status of {} changed after final", id());
                }
                "tool_result" => {
                    results.insert(id(), c["is_error"].as_bool().unwrap());
                }
                _ => {}
            }
        }
        let completed: Vec<String> = chunks
            .iter()
            .filter(|c| c["type"] == "tool_use" && c["complete"] == true)
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .collect();
        let announced = chunks
            .iter()
            .filter(|c| c["type"] == "tool_use" && c["complete"] == false)
            .count();
        assert_eq!(
            completed.len(),
            announced,
            "{name}: each tool_use completes once"
        );
        for id in completed {
            let is_error = results
                .get(&id)
                .unwrap_or_else(|| panic!("{name}: {id} has no result"));
            let want = if *is_error { "error" } else { "success" };
            assert_eq!(
                last_status.get(&id).map(String::as_str),
                Some(want),
                "{name}: {id}"
            );
            let status = replayer.session().tool_status(&id).unwrap();
            assert_eq!(status.as_str(), want, "{name}: session status of {id}");
        }
    }
}

#[test]
fn every_permission_request_is_resolved_exactly_once() {
    for (name, bytes) in corpus() {
        let chunks = values(&replay_all(&bytes).0);
        for req in chunks.iter().filter(|c| c["type"] == "permission_request") {
            let resolved = chunks
                .iter()
                .filter(|c| {
                    c["type"] == "permission_resolved" && c["request_id"] == req["request_id"]
                })
                .count();
            assert_eq!(resolved, 1, "{name}: {}", req["request_id"]);
        }
    }
}

#[test]
fn one_turn_complete_per_result_and_no_errors() {
    for (name, bytes) in corpus() {
        let chunks = values(&replay_all(&bytes).0);
        let results = lines(&bytes)
            .iter()
            .filter(|l| l.dir == "out" && l.msg["type"] == "result")
            .count();
        let turns = chunks
            .iter()
            .filter(|c| c["type"] == "turn_complete")
            .count();
        assert_eq!(turns, results, "{name}");
        let bad: Vec<_> = chunks
            .iter()
            .filter(|c| c["type"] == "error" || c["type"] == "unknown")
            .collect();
        assert!(bad.is_empty(), "{name}: {bad:?}");
    }
}

#[test]
fn the_last_tool_wait_chunk_equals_the_final_state() {
    for (name, bytes) in corpus() {
        let (chunks, replayer) = replay_all(&bytes);
        let last = chunks.iter().rev().find_map(|c| match c {
            Chunk::ToolWait(w) => Some(w.clone()),
            _ => None,
        });
        assert_eq!(last.unwrap_or_default(), *replayer.tool_wait(), "{name}");
        // Every recorded transcript ends after its last result: nothing is outstanding.
        assert!(!replayer.tool_wait().waiting, "{name}");
        assert!(replayer.tool_wait().tool_use_ids.is_empty(), "{name}");
    }
}

/// The transcript cut right after the first line matching `cut`.
fn cut_after(bytes: &[u8], cut: impl Fn(&Value) -> bool) -> Vec<u8> {
    let text = std::str::from_utf8(bytes).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        out.push_str(line);
        out.push('\n');
        let v: Value = serde_json::from_str(line).unwrap();
        if cut(&v["msg"]) {
            break;
        }
    }
    out.into_bytes()
}

#[test]
fn a_transcript_stopped_at_a_permission_prompt_is_waiting_on_it() {
    let bytes = common::transcript("b_bash_allow");
    let cut = cut_after(&bytes, |m| m["request"]["subtype"] == "can_use_tool");
    let (_, replayer) = replay_all(&cut);
    let wait = replayer.tool_wait();
    assert!(wait.waiting);
    assert_eq!(wait.tool_use_ids, ["toolu_fake_12f3f961030b4a95"]);
    assert_eq!(wait.blocked_on.len(), 1);
    assert_eq!(
        wait.blocked_on[0].request_id,
        "33235b6b-0d82-47ca-9356-2261531667e8"
    );
    let status = replayer
        .session()
        .tool_status("toolu_fake_12f3f961030b4a95");
    assert_eq!(status, Some(ToolStatus::AwaitingApproval));
}

#[test]
fn a_transcript_stopped_during_a_held_mcp_call_is_waiting_on_the_call() {
    let bytes = common::transcript("w_hold_call_100");
    let cut = cut_after(&bytes, |m| m["type"] == "tool_progress");
    let (chunks, replayer) = replay_all(&cut);
    let wait = replayer.tool_wait();
    assert!(wait.waiting);
    assert_eq!(wait.blocked_on.len(), 1);
    assert_eq!(
        serde_json::to_value(wait.blocked_on[0].kind).unwrap(),
        "mcp_tool_call"
    );
    let heartbeats = values(&chunks)
        .into_iter()
        .filter(|c| c["type"] == "tool_heartbeat")
        .collect::<Vec<_>>();
    assert_eq!(heartbeats.len(), 1);
    assert_eq!(heartbeats[0]["id"], wait.tool_use_ids[0].as_str());
}

#[test]
fn raw_stdout_stopped_after_a_tool_call_counts_as_waiting() {
    // Only what the CLI printed: no host direction at all.
    let bytes = common::transcript("e_partial_messages");
    let mut raw = String::new();
    for line in lines(&bytes) {
        if line.dir != "out" {
            continue;
        }
        raw.push_str(&line.msg.to_string());
        raw.push('\n');
        if line.msg["type"] == "assistant"
            && line.msg["message"]["content"][0]["type"] == "tool_use"
        {
            break;
        }
    }
    let (_, replayer) = replay_all(raw.as_bytes());
    let wait = replayer.tool_wait();
    assert!(wait.waiting, "{wait:?}");
    assert_eq!(wait.tool_use_ids.len(), 1);
    assert!(wait.blocked_on.is_empty());
}
