//! The fake `claude` CLI the tests share, without IO: lines the host writes to its stdin go in,
//! the lines it prints come out, and time is passed in. The `fake-claude` binary runs it over
//! stdin and stdout for the benches; the gateway simulation (`core/tests/sim/`) runs one per
//! session on its jumping clock. It depends on `serde_json` and `std` only, so that the core's
//! tests can include this file as it is.
//!
//! It speaks the wire as the CLI does in stream-json mode with partial messages: it answers
//! `initialize` and `interrupt`, and streams each answer as partial messages, then whole. A
//! prompt is answered by what it starts with:
//!
//! - `lookup: a, b`: the model calls the client's `lookup` tool (MCP server `client`) once per
//!   key, in one message, so the calls are parallel; each `tools/call` is held until the host
//!   answers it, then the model answers `done: ` and the results joined with ` | `.
//! - `bash: COMMAND` asks permission for a Bash call (`bash: COMMAND | blocked: PATH` names
//!   PATH as the blocked path); then `done: ran COMMAND (rules N)` or `done: denied: …`.
//! - `slow: MS …` is echoed MS milliseconds later, unless an interrupt comes first.
//! - `stall` starts a message and stops there.
//! - `limit: STATUS UTILIZATION` reports the five-hour rate-limit window so
//!   (`rate_limit_event`), then is echoed.
//! - anything else is echoed at once (`echo: PROMPT`); a prompt over 4 KiB as its start and its
//!   length, as a model's answer is short.
//!
//! An interrupt cancels the held calls and a coming `slow:` answer, and ends the turn with an
//! error result. With `--session-mirror`, the lines of the session's transcript
//! (named by `--session-id` or `--resume`) come as `transcript_mirror` lines, with a line of a
//! subagent's transcript beside each prompt, as the CLI's would.

use std::collections::BTreeMap;

use serde_json::{json, Value};

/// Where the fake runs: what `initialize` says and how its transcripts are mirrored.
#[derive(Debug, Clone)]
pub struct Config {
    /// The one model `initialize` lists: its value and display name.
    pub model: (&'static str, &'static str),
    /// The directory of the session transcripts (`~/.claude/projects/<project>`): a session's
    /// is `<dir>/<session id>.jsonl`.
    pub projects_dir: String,
    /// What the mirrored transcript holds.
    pub transcript: Transcript,
}

/// What the mirrored transcript of a session holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transcript {
    /// The prompts only, each as `{"role":"user","content":TEXT}`: a test can compare what a
    /// store keeps line for line.
    Prompts,
    /// Every message, as the CLI's has them: the prompts as sent, the model's messages and
    /// the tool results.
    Whole,
}

/// One fake CLI process: its state between lines.
#[derive(Debug)]
pub struct FakeCli {
    config: Config,
    /// The session whose transcript is mirrored, with `--session-mirror`.
    mirror: Option<String>,
    messages: u32,
    calls: u32,
    /// Turns ended (results sent).
    turns_ended: u32,
    /// `tools/call`s waiting for the host: control request id → (JSON-RPC id, tool_use id).
    pending: BTreeMap<String, (u64, String)>,
    /// Results of the current turn's calls, in the order they came.
    results: Vec<(String, String, bool)>,
    /// The model's message stalled mid-stream.
    stalled: bool,
    /// A permission request waiting for the host: control request id → tool_use id.
    asking: BTreeMap<String, String>,
    /// A `slow:` prompt being answered: when (ms), and the answer.
    slow: Option<(u64, String)>,
    /// Lines it did not expect, as they came: not JSON, of a type it does not take, or a
    /// control request it does not know (answered with success all the same). A test fails on
    /// them; the binary skips them.
    pub unexpected: Vec<String>,
    /// The tool results its resumed transcript ends with, which it goes on from once
    /// initialized ([`go_on_from`](Self::go_on_from)).
    rerun: Vec<(String, String, bool)>,
}

impl FakeCli {
    /// A fake started with these arguments (of which only `--session-mirror`, `--session-id`
    /// and `--resume` count).
    pub fn new(config: Config, args: &[String]) -> FakeCli {
        FakeCli {
            config,
            mirror: mirrored_session(args),
            messages: 0,
            calls: 0,
            turns_ended: 0,
            pending: BTreeMap::new(),
            results: Vec::new(),
            stalled: false,
            asking: BTreeMap::new(),
            slow: None,
            unexpected: Vec::new(),
            rerun: Vec::new(),
        }
    }

    /// A CLI resumed with `CLAUDE_CODE_RESUME_INTERRUPTED_TURN` from a transcript that ends
    /// with these tool results (tool_use id, text, is_error): it goes on from them once
    /// initialized, with no prompt, as the CLI does.
    pub fn go_on_from(&mut self, results: Vec<(String, String, bool)>) {
        self.rerun = results;
    }

    /// Takes one line the host wrote (without its newline) at `now` (ms); returns the lines it
    /// prints, each ending with a newline.
    pub fn handle_line(&mut self, now: u64, line: &str) -> Vec<String> {
        let mut out = Vec::new();
        let Ok(message) = serde_json::from_str::<Value>(line) else {
            self.unexpected.push(line.to_owned());
            return out;
        };
        match message["type"].as_str() {
            Some("control_request") => {
                let id = message["request_id"].as_str().unwrap_or_default();
                match message["request"]["subtype"].as_str() {
                    Some("initialize") => {
                        let (value, name) = self.config.model;
                        out.push(control_ok(
                            id,
                            json!({"models": [{"value": value, "displayName": name}]}),
                        ));
                        if !self.rerun.is_empty() {
                            let init = json!({"type": "system", "subtype": "init",
                                              "session_id": SESSION});
                            out.push(self::line(init));
                            self.results = std::mem::take(&mut self.rerun);
                            self.after_tools(&mut out);
                        }
                    }
                    Some("interrupt") => self.interrupt(id, &mut out),
                    _ => {
                        self.unexpected.push(line.to_owned());
                        out.push(control_ok(id, json!({})));
                    }
                }
            }
            Some("user") => {
                let text = user_text(&message["message"]["content"]);
                self.prompt(now, &text, &message["message"], &mut out);
            }
            Some("control_response") => {
                let id = message["response"]["request_id"]
                    .as_str()
                    .unwrap_or_default();
                if let Some(tool_use_id) = self.asking.remove(id) {
                    let answer = &message["response"]["response"];
                    let (text, is_error) = match answer["behavior"].as_str() {
                        Some("allow") => {
                            let input = answer.get("updatedInput").cloned().unwrap_or(Value::Null);
                            let command = input["command"].as_str().unwrap_or("?").to_owned();
                            let rules = answer["updatedPermissions"].as_array().map_or(0, Vec::len);
                            (format!("ran {command} (rules {rules})"), false)
                        }
                        _ => (
                            format!("denied: {}", answer["message"].as_str().unwrap_or("")),
                            true,
                        ),
                    };
                    self.results.push((tool_use_id, text, is_error));
                    self.after_tools(&mut out);
                    return out;
                }
                // An answer to a call the interrupt cancelled is dropped.
                let Some((_, tool_use_id)) = self.pending.remove(id) else {
                    return out;
                };
                let result = &message["response"]["response"]["mcp_response"]["result"];
                let text = user_text(&result["content"]);
                let is_error = result["isError"].as_bool().unwrap_or(false);
                self.results.push((tool_use_id, text, is_error));
                if self.pending.is_empty() {
                    self.after_tools(&mut out);
                }
            }
            _ => self.unexpected.push(line.to_owned()),
        }
        out
    }

    /// When the answer to a `slow:` prompt is due (ms), if one is coming.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.slow.as_ref().map(|(at, _)| *at)
    }

    /// Prints what is due at `now` (ms): the answer to a `slow:` prompt.
    pub fn handle_timeout(&mut self, now: u64) -> Vec<String> {
        let mut out = Vec::new();
        if self.slow.as_ref().is_some_and(|(at, _)| *at <= now) {
            let (_, answer) = self.slow.take().expect("checked above");
            self.message(
                vec![json!({"type": "text", "text": answer})],
                "end_turn",
                &mut out,
            );
            out.push(self.result("success", false, &answer));
        }
        out
    }

    fn prompt(&mut self, now: u64, text: &str, message: &Value, out: &mut Vec<String>) {
        out.push(line(
            json!({"type": "system", "subtype": "init", "session_id": SESSION}),
        ));
        let entry = match self.config.transcript {
            Transcript::Prompts => {
                json!({"type": "user", "message": {"role": "user", "content": text}})
            }
            Transcript::Whole => json!({"type": "user", "message": message}),
        };
        self.mirror(entry, out);
        if let Some(id) = &self.mirror {
            // A subagent's transcript is not the conversation's.
            out.push(line(json!({"type": "transcript_mirror",
                "filePath": format!("{}/{id}/subagents/agent-1.jsonl", self.config.projects_dir),
                "entries": [{"type": "user"}]})));
        }
        if let Some(keys) = text.strip_prefix("lookup: ") {
            let keys: Vec<&str> = keys.split(", ").collect();
            let ids: Vec<String> = keys
                .iter()
                .map(|_| {
                    self.calls += 1;
                    format!("toolu_{}", self.calls)
                })
                .collect();
            let blocks: Vec<Value> = keys
                .iter()
                .zip(&ids)
                .map(|(key, id)| {
                    json!({"type": "tool_use", "id": id, "name": "mcp__client__lookup",
                           "input": {"key": key}})
                })
                .collect();
            self.message(blocks, "tool_use", out);
            for (key, id) in keys.iter().zip(&ids) {
                let rpc = u64::from(self.calls) + 100;
                let request_id = format!("cli_call_{id}");
                self.pending.insert(request_id.clone(), (rpc, id.clone()));
                out.push(line(json!({
                    "type": "control_request", "request_id": request_id,
                    "request": {"subtype": "mcp_message", "server_name": "client", "message": {
                        "method": "tools/call", "jsonrpc": "2.0", "id": rpc,
                        "params": {"name": "lookup", "arguments": {"key": key},
                                   "_meta": {"claudecode/toolUseId": id}}}}
                })));
            }
        } else if let Some(command) = text.strip_prefix("bash: ") {
            let (command, blocked) = match command.split_once(" | blocked: ") {
                Some((command, path)) => (command, Some(path)),
                None => (command, None),
            };
            self.calls += 1;
            let id = format!("toolu_{}", self.calls);
            let input = json!({"command": command});
            self.message(
                vec![json!({"type": "tool_use", "id": id, "name": "Bash", "input": input})],
                "tool_use",
                out,
            );
            let request_id = format!("perm_{}", self.calls);
            self.asking.insert(request_id.clone(), id.clone());
            out.push(line(json!({
                "type": "control_request", "request_id": request_id,
                "request": {"subtype": "can_use_tool", "tool_name": "Bash", "input": input,
                    "tool_use_id": id, "permission_suggestions": [{"type": "addRules",
                    "rules": [{"toolName": "Bash", "ruleContent": command}],
                    "behavior": "allow", "destination": "session"}],
                    "blocked_path": blocked}
            })));
        } else if let Some((ms, _)) = text
            .strip_prefix("slow: ")
            .and_then(|rest| rest.split_once(' '))
        {
            let ms: u64 = ms.parse().unwrap_or(1000);
            self.slow = Some((now + ms, format!("echo: {text}")));
        } else if text == "stall" {
            self.messages += 1;
            self.stalled = true;
            out.push(stream_event(
                self.messages,
                json!({"type": "message_start", "message": {
                    "id": format!("msg_{}", self.messages), "type": "message", "role": "assistant",
                    "model": "fake", "content": [], "stop_reason": null,
                    "usage": {"input_tokens": 12, "output_tokens": 1}}}),
            ));
        } else {
            if let Some(limit) = text.strip_prefix("limit: ") {
                out.push(rate_limit_event(limit));
            }
            let answer = echo(text);
            self.message(
                vec![json!({"type": "text", "text": answer})],
                "end_turn",
                out,
            );
            out.push(self.result("success", false, &answer));
        }
    }

    /// A turn's result: its usage, and the process's cumulative figures as the CLI gives
    /// them (`total_cost_usd`, `modelUsage`): each turn 12 input and 5 output tokens of the
    /// model `fake`, at a hundredth of a cent.
    fn result(&mut self, subtype: &str, is_error: bool, text: &str) -> String {
        self.turns_ended += 1;
        let n = u64::from(self.turns_ended);
        let cost = n as f64 / 10_000.0;
        line(
            json!({"type": "result", "subtype": subtype, "is_error": is_error, "result": text,
                    "stop_reason": "end_turn", "num_turns": 1, "session_id": SESSION,
                    "usage": {"input_tokens": 12, "output_tokens": 5}, "total_cost_usd": cost,
                    "modelUsage": {"fake": {"inputTokens": 12 * n, "outputTokens": 5 * n,
                        "cacheReadInputTokens": 0, "cacheCreationInputTokens": 0,
                        "costUSD": cost}}}),
        )
    }

    /// The turn after its tool calls: their results, then the model's answer.
    fn after_tools(&mut self, out: &mut Vec<String>) {
        let results: Vec<Value> = self
            .results
            .iter()
            .map(|(id, text, is_error)| {
                json!({"type": "tool_result", "tool_use_id": id, "content": text, "is_error": is_error})
            })
            .collect();
        let message = json!({"role": "user", "content": results});
        if self.config.transcript == Transcript::Whole {
            self.mirror(json!({"type": "user", "message": message}), out);
        }
        out.push(line(json!({"type": "user", "message": message,
                             "parent_tool_use_id": null, "session_id": SESSION})));
        let text = format!(
            "done: {}",
            self.results
                .drain(..)
                .map(|(_, text, _)| text)
                .collect::<Vec<_>>()
                .join(" | ")
        );
        self.message(vec![json!({"type": "text", "text": text})], "end_turn", out);
        out.push(self.result("success", false, &text));
    }

    fn interrupt(&mut self, id: &str, out: &mut Vec<String>) {
        for (request_id, (rpc, _)) in std::mem::take(&mut self.pending) {
            out.push(line(json!({
                "type": "control_request", "request_id": format!("cancel_{request_id}"),
                "request": {"subtype": "mcp_message", "server_name": "client", "message": {
                    "jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": rpc, "reason": "AbortError: remote-cancel"}}}
            })));
        }
        self.results.clear();
        self.slow = None;
        out.push(control_ok(id, json!({"still_queued": []})));
        if std::mem::take(&mut self.stalled) {
            out.push(line(
                json!({"type": "user", "message": {"role": "user", "content": [
                {"type": "text", "text": "[Request interrupted by user]"}]},
                "parent_tool_use_id": null, "session_id": SESSION}),
            ));
        }
        out.push(self.result("error_during_execution", true, ""));
    }

    /// One model message, streamed as partial messages and then whole.
    fn message(&mut self, blocks: Vec<Value>, stop: &str, out: &mut Vec<String>) {
        self.messages += 1;
        let n = self.messages;
        let id = format!("msg_{n}");
        out.push(stream_event(
            n,
            json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": "fake", "content": [],
            "stop_reason": null, "usage": {"input_tokens": 12, "output_tokens": 1,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}}),
        ));
        for (index, block) in blocks.iter().enumerate() {
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
            out.push(stream_event(
                n,
                json!({"type": "content_block_start", "index": index, "content_block": start}),
            ));
            out.push(stream_event(
                n,
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
            out.push(stream_event(
                n,
                json!({"type": "content_block_stop", "index": index}),
            ));
        }
        let whole = json!({
            "id": id, "type": "message", "role": "assistant", "model": "fake", "content": blocks,
            "stop_reason": null, "usage": {"input_tokens": 12, "output_tokens": 5}});
        if self.config.transcript == Transcript::Whole {
            self.mirror(json!({"type": "assistant", "message": whole}), out);
        }
        out.push(line(json!({"type": "assistant", "message": whole,
            "parent_tool_use_id": null, "session_id": SESSION})));
        out.push(stream_event(
            n,
            json!({"type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"input_tokens": 12, "output_tokens": 5,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}),
        ));
        out.push(stream_event(n, json!({"type": "message_stop"})));
    }

    /// A `transcript_mirror` line of the session's transcript with `entry`, when mirroring.
    fn mirror(&self, entry: Value, out: &mut Vec<String>) {
        if let Some(id) = &self.mirror {
            out.push(line(json!({"type": "transcript_mirror",
                "filePath": format!("{}/{id}.jsonl", self.config.projects_dir),
                "entries": [entry]})));
        }
    }
}

/// The text of a message's content: a string, or its text blocks joined.
pub fn user_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
        _ => String::new(),
    }
}

/// The session id its lines carry.
const SESSION: &str = "fake-session";

/// The session whose transcript the arguments ask to mirror (`--session-mirror`, with
/// `--session-id` or `--resume`, in the equals form or not).
fn mirrored_session(args: &[String]) -> Option<String> {
    if !args.iter().any(|a| a == "--session-mirror") {
        return None;
    }
    args.iter().enumerate().find_map(|(i, a)| {
        ["--session-id", "--resume"].iter().find_map(|flag| {
            a.strip_prefix(&format!("{flag}="))
                .map(str::to_owned)
                .or_else(|| (a == flag).then(|| args.get(i + 1).cloned()).flatten())
        })
    })
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

fn line(value: Value) -> String {
    format!("{value}\n")
}

fn control_ok(id: &str, response: Value) -> String {
    line(json!({"type": "control_response",
                "response": {"subtype": "success", "request_id": id, "response": response}}))
}

/// The `rate_limit_event` of `limit: STATUS UTILIZATION`: the five-hour window, resetting
/// at 2030-01-01.
fn rate_limit_event(limit: &str) -> String {
    let mut words = limit.split(' ');
    let status = words.next().unwrap_or("allowed");
    let utilization: f64 = words.next().and_then(|u| u.parse().ok()).unwrap_or(0.5);
    line(
        json!({"type": "rate_limit_event", "session_id": SESSION, "uuid": "rl-1",
        "rate_limit_info": {"status": status, "resetsAt": 1_893_456_000u64,
            "rateLimitType": "five_hour", "utilization": utilization}}),
    )
}

fn stream_event(message: u32, event: Value) -> String {
    line(
        json!({"type": "stream_event", "event": event, "session_id": SESSION,
                "parent_tool_use_id": null, "api_message_id": format!("msg_{message}")}),
    )
}
