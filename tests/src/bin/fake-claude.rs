//! A light stand-in for the `claude` CLI in stream-json mode, for load tests: it answers
//! `initialize`, answers every prompt at once with partial messages (echoing it; a prompt over
//! 4 KiB is echoed as its start and its length, as a model's answer is short), and for a
//! prompt `lookup: KEY` calls the client's `lookup` tool through the `client` MCP server first
//! (a held call), answering once the result comes; a prompt `slow: MS …` is answered after MS
//! milliseconds unless an interrupt comes first. Of its argv, only `--session-mirror` counts:
//! with it, each message it takes and gives comes back as a `transcript_mirror` line of the
//! session named by `--session-id` or `--resume`, as the CLI's would, so a session store
//! keeps the conversation. It exits when its stdin closes. A few kilobytes of memory and no
//! model: thousands can run at once.

use std::io::{BufRead, BufWriter, Write};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

fn main() {
    // Lines are read on a thread of their own, so that a slow answer can be interrupted.
    let (lines, input) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut cli = Fake {
        mirror: mirror_path(std::env::args().skip(1).collect()),
        ..Fake::default()
    };
    loop {
        let line = match cli.slow.as_ref().map(|(at, _)| *at) {
            Some(at) => match input.recv_timeout(at.saturating_duration_since(Instant::now())) {
                Ok(line) => Some(line),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return,
            },
            None => match input.recv() {
                Ok(line) => Some(line),
                Err(_) => return,
            },
        };
        let replies = match line {
            Some(line) => match serde_json::from_str::<Value>(&line) {
                Ok(message) => cli.take(&message),
                Err(_) => continue,
            },
            None => cli.answer_slow(),
        };
        for reply in replies {
            if writeln!(out, "{reply}").is_err() {
                return;
            }
        }
        if out.flush().is_err() {
            return;
        }
    }
}

#[derive(Default)]
struct Fake {
    messages: u64,
    calls: u64,
    /// The held `tools/call`: its control request id.
    pending: Option<String>,
    /// A `slow: MS …` prompt being answered: when, and the answer.
    slow: Option<(Instant, String)>,
    /// The session transcript whose lines are mirrored, with `--session-mirror`.
    mirror: Option<String>,
}

/// The transcript the CLI would write for the session its arguments name, when they ask for
/// its lines on stdout (`--session-mirror`).
fn mirror_path(args: Vec<String>) -> Option<String> {
    if !args.iter().any(|a| a == "--session-mirror") {
        return None;
    }
    let id = args.iter().enumerate().find_map(|(i, a)| {
        ["--session-id", "--resume"].iter().find_map(|flag| {
            a.strip_prefix(&format!("{flag}="))
                .map(str::to_owned)
                .or_else(|| (a == flag).then(|| args.get(i + 1).cloned()).flatten())
        })
    })?;
    let config = std::env::var("CLAUDE_CONFIG_DIR")
        .unwrap_or_else(|_| format!("{}/.claude", std::env::var("HOME").unwrap_or_default()));
    let cwd = std::env::current_dir().unwrap_or_default();
    let project: String = cwd
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    Some(format!("{config}/projects/{project}/{id}.jsonl"))
}

impl Fake {
    /// A `transcript_mirror` line with `entry`, when mirroring.
    fn mirror(&self, entry: Value, out: &mut Vec<Value>) {
        if let Some(path) = &self.mirror {
            out.push(json!({"type": "transcript_mirror", "filePath": path, "entries": [entry]}));
        }
    }

    fn take(&mut self, message: &Value) -> Vec<Value> {
        let mut out = Vec::new();
        match message["type"].as_str() {
            Some("control_request") => {
                let id = message["request_id"].clone();
                let response = match message["request"]["subtype"].as_str() {
                    Some("initialize") => {
                        json!({"models": [{"value": "default", "displayName": "Default (fake)"}]})
                    }
                    Some("interrupt") => {
                        self.pending = None;
                        self.slow = None;
                        out.push(self.result(true, ""));
                        json!({})
                    }
                    _ => json!({}),
                };
                out.insert(
                    0,
                    json!({"type": "control_response", "response": {"subtype": "success",
                        "request_id": id, "response": response}}),
                );
            }
            Some("user") => {
                let text = text_of(&message["message"]["content"]);
                out.push(json!({"type": "system", "subtype": "init", "session_id": "fake"}));
                self.mirror(
                    json!({"type": "user", "message": message["message"]}),
                    &mut out,
                );
                if let Some(key) = text.strip_prefix("lookup: ") {
                    self.calls += 1;
                    let tool_use_id = format!("toolu_fake_{}", self.calls);
                    let input = json!({"key": key});
                    self.message(
                        json!({"type": "tool_use", "id": tool_use_id, "name": "mcp__client__lookup",
                               "input": input}),
                        "tool_use",
                        &mut out,
                    );
                    let request_id = format!("fake_call_{}", self.calls);
                    self.pending = Some(request_id.clone());
                    out.push(json!({"type": "control_request", "request_id": request_id,
                        "request": {"subtype": "mcp_message", "server_name": "client", "message": {
                            "jsonrpc": "2.0", "id": self.calls, "method": "tools/call",
                            "params": {"name": "lookup", "arguments": input,
                                       "_meta": {"claudecode/toolUseId": tool_use_id}}}}}));
                } else if let Some((ms, _)) = text
                    .strip_prefix("slow: ")
                    .and_then(|rest| rest.split_once(' '))
                {
                    let ms = ms.parse().unwrap_or(1000);
                    let at = Instant::now() + Duration::from_millis(ms);
                    self.slow = Some((at, format!("echo: {text}")));
                } else {
                    let answer = echo(&text);
                    self.message(
                        json!({"type": "text", "text": answer}),
                        "end_turn",
                        &mut out,
                    );
                    out.push(self.result(false, &answer));
                }
            }
            Some("control_response") => {
                let id = message["response"]["request_id"].as_str();
                if id.is_some() && id == self.pending.as_deref() {
                    self.pending = None;
                    let result = &message["response"]["response"]["mcp_response"]["result"];
                    let tool_use_id = format!("toolu_fake_{}", self.calls);
                    self.mirror(
                        json!({"type": "user", "message": {"role": "user", "content": [
                            {"type": "tool_result", "tool_use_id": tool_use_id,
                             "content": result["content"]}]}}),
                        &mut out,
                    );
                    let answer = format!("looked up: {}", text_of(&result["content"]));
                    self.message(
                        json!({"type": "text", "text": answer}),
                        "end_turn",
                        &mut out,
                    );
                    out.push(self.result(false, &answer));
                }
            }
            _ => {}
        }
        out
    }

    /// The answer to a `slow:` prompt, when its time has come.
    fn answer_slow(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        if let Some((_, answer)) = self.slow.take() {
            self.message(
                json!({"type": "text", "text": answer}),
                "end_turn",
                &mut out,
            );
            out.push(self.result(false, &answer));
        }
        out
    }

    /// One model message as partial messages, then whole.
    fn message(&mut self, block: Value, stop: &str, out: &mut Vec<Value>) {
        self.messages += 1;
        let id = format!("msg_fake_{}", self.messages);
        let event = |event: Value| {
            json!({"type": "stream_event", "event": event, "session_id": "fake",
                   "parent_tool_use_id": null, "api_message_id": id})
        };
        let usage = json!({"input_tokens": 10, "output_tokens": 5,
                           "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0});
        out.push(event(
            json!({"type": "message_start", "message": {"id": id, "type": "message",
            "role": "assistant", "model": "fake", "content": [], "stop_reason": null,
            "usage": usage}}),
        ));
        let (start, delta) = match block["type"].as_str() {
            Some("text") => (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": block["text"]}),
            ),
            _ => (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
            ),
        };
        out.push(event(
            json!({"type": "content_block_start", "index": 0, "content_block": start}),
        ));
        out.push(event(
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        ));
        out.push(event(json!({"type": "content_block_stop", "index": 0})));
        let whole = json!({"id": id, "type": "message", "role": "assistant", "model": "fake",
            "content": [block], "stop_reason": null, "usage": usage});
        self.mirror(json!({"type": "assistant", "message": whole.clone()}), out);
        out.push(
            json!({"type": "assistant", "message": whole, "parent_tool_use_id": null,
            "session_id": "fake"}),
        );
        out.push(event(json!({"type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": usage})));
        out.push(event(json!({"type": "message_stop"})));
    }

    fn result(&self, is_error: bool, text: &str) -> Value {
        let subtype = if is_error {
            "error_during_execution"
        } else {
            "success"
        };
        json!({"type": "result", "subtype": subtype, "is_error": is_error, "result": text,
               "stop_reason": "end_turn", "num_turns": 1, "session_id": "fake",
               "usage": {"input_tokens": 10, "output_tokens": 5}})
    }
}

/// The answer to a prompt: the prompt itself, or its start and length when it is long.
fn echo(text: &str) -> String {
    const LONG: usize = 4096;
    if text.len() <= LONG {
        return format!("echo: {text}");
    }
    let mut end = 64;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("echo: {}… ({} bytes)", &text[..end], text.len())
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
        _ => String::new(),
    }
}
