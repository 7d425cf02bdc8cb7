//! `ccwire replay` as a user runs it.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn corpus(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/corpus")
        .join(format!("{name}.jsonl"))
        .to_string_lossy()
        .into_owned()
}

fn ccwire(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ccwire"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    if let Some(input) = stdin {
        pipe.write_all(input).unwrap();
    }
    drop(pipe);
    child.wait_with_output().unwrap()
}

fn json_lines(out: &[u8]) -> Vec<Value> {
    std::str::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn prints_one_chunk_per_line() {
    let out = ccwire(&["replay", &corpus("a_text")], None);
    assert!(out.status.success());
    let chunks = json_lines(&out.stdout);
    let text: String = chunks
        .iter()
        .filter(|c| c["type"] == "text_delta")
        .map(|c| c["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Hello from the fake model. 2 + 2 = 4.");
    assert_eq!(
        chunks
            .iter()
            .filter(|c| c["type"] == "turn_complete")
            .count(),
        1
    );
}

#[test]
fn reads_stdin_when_the_file_is_a_dash() {
    let bytes = std::fs::read(corpus("a_text")).unwrap();
    let from_stdin = ccwire(&["replay", "-"], Some(&bytes));
    let from_file = ccwire(&["replay", &corpus("a_text")], None);
    assert!(from_stdin.status.success());
    assert_eq!(from_stdin.stdout, from_file.stdout);
}

#[test]
fn final_state_reports_tool_wait_and_statuses() {
    let out = ccwire(&["replay", "--final-state", &corpus("b_bash_allow")], None);
    assert!(out.status.success());
    let state = json_lines(&out.stdout);
    assert_eq!(state.len(), 1);
    assert_eq!(state[0]["tool_wait"]["waiting"], false);
    assert_eq!(state[0]["tools"]["toolu_fake_12f3f961030b4a95"], "success");

    // Cut right after the permission prompt: the CLI is waiting on it.
    let full = std::fs::read_to_string(corpus("b_bash_allow")).unwrap();
    let cut: String = full
        .lines()
        .take_while(|l| !(l.contains("\"dir\": \"in\"") && l.contains("33235b6b")))
        .map(|l| format!("{l}\n"))
        .collect();
    let out = ccwire(&["replay", "--final-state", "-"], Some(cut.as_bytes()));
    let state = &json_lines(&out.stdout)[0];
    assert_eq!(state["tool_wait"]["waiting"], true);
    assert_eq!(state["tool_wait"]["blocked_on"][0]["kind"], "permission");
    assert_eq!(
        state["tools"]["toolu_fake_12f3f961030b4a95"],
        "awaiting_approval"
    );
}

#[test]
fn an_unreadable_file_exits_2_with_a_message() {
    let out = ccwire(&["replay", "/nonexistent/transcript.jsonl"], None);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/transcript.jsonl"), "{err}");
}

#[test]
fn malformed_lines_become_error_chunks_and_strict_fails() {
    let input = b"garbage\n{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false}\n";
    let out = ccwire(&["replay", "-"], Some(input));
    assert_eq!(out.status.code(), Some(0));
    let chunks = json_lines(&out.stdout);
    assert_eq!(chunks[0]["type"], "error");
    assert_eq!(chunks[0]["kind"], "malformed_line");
    assert_eq!(chunks[1]["type"], "turn_complete");

    let strict = ccwire(&["replay", "--strict", "-"], Some(input));
    assert_eq!(strict.status.code(), Some(1));
    assert_eq!(strict.stdout, out.stdout);
}

/// The `data:` payloads of an SSE stream.
fn sse_data(out: &[u8]) -> Vec<String> {
    std::str::from_utf8(out)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn format_prints_the_responses_a_gateway_client_would_get() {
    // Two model messages: the client's two parallel tool calls, then the answer.
    let file = corpus("w_parallel_readonly");
    let out = ccwire(&["replay", "--format", "anthropic-json", &file], None);
    assert!(out.status.success());
    let bodies = json_lines(&out.stdout);
    assert_eq!(bodies.len(), 2, "one response per model message");
    assert_eq!(bodies[0]["stop_reason"], "tool_use");
    let names: Vec<&str> = bodies[0]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["lookup", "lookup"],
        "client tools under their own name"
    );
    assert_eq!(bodies[1]["stop_reason"], "end_turn");

    let out = ccwire(&["replay", "--format", "openai-sse", &file], None);
    assert!(out.status.success());
    let data = sse_data(&out.stdout);
    assert_eq!(data.iter().filter(|d| *d == "[DONE]").count(), 2);
    let chunks: Vec<Value> = data
        .iter()
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(chunks
        .iter()
        .all(|c| c["object"] == "chat.completion.chunk"));
    let finishes: Vec<&str> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["finish_reason"].as_str())
        .collect();
    assert_eq!(finishes, ["tool_calls", "stop"]);
    let call_ids: std::collections::BTreeSet<&str> = chunks
        .iter()
        .flat_map(|c| c["choices"][0]["delta"]["tool_calls"].as_array())
        .flatten()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert_eq!(call_ids.len(), 2);

    let out = ccwire(&["replay", "--format", "anthropic-sse", &file], None);
    let text = String::from_utf8(out.stdout).unwrap();
    let events: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(events.first(), Some(&"message_start"));
    assert_eq!(events.iter().filter(|e| **e == "message_stop").count(), 2);

    let out = ccwire(&["replay", "--format", "openai-json", &file], None);
    let bodies = json_lines(&out.stdout);
    assert_eq!(bodies[0]["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(
        bodies[0]["choices"][0]["message"]["tool_calls"][1]["function"]["name"],
        "lookup"
    );

    let out = ccwire(&["replay", "--format", "responses-json", &file], None);
    let bodies = json_lines(&out.stdout);
    assert_eq!(bodies.len(), 2);
    let calls: Vec<(&str, &str)> = bodies[0]["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            (
                item["name"].as_str().unwrap(),
                item["arguments"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("lookup", r#"{"query":"alpha"}"#),
            ("lookup", r#"{"query":"beta"}"#)
        ]
    );
    assert_eq!(bodies[1]["status"], "completed");
    let out = ccwire(&["replay", "--format", "responses-sse", &file], None);
    let text = String::from_utf8(out.stdout).unwrap();
    let events: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(events.first(), Some(&"response.created"));
    assert_eq!(
        events
            .iter()
            .filter(|e| **e == "response.completed")
            .count(),
        2
    );
}

#[test]
fn format_reports_a_failed_turn_in_the_api_s_error_shape() {
    let out = ccwire(
        &[
            "replay",
            "--format",
            "openai-json",
            &corpus("f_api_error_400"),
        ],
        None,
    );
    assert!(out.status.success());
    let bodies = json_lines(&out.stdout);
    let error = bodies.last().unwrap();
    assert!(error["error"]["message"].is_string(), "{error}");
    let out = ccwire(&["replay", "--format", "bogus", &corpus("a_text")], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("anthropic-sse"));
}
