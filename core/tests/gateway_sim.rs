//! The gateway engine in simulation: clients, CLIs and a clock driven in one thread, time
//! jumping from deadline to deadline. Each fake CLI speaks the wire as CLI 2.1.330 does in the
//! corpus (partial messages, held `tools/call`s, interrupts); each test asserts what a client of
//! `ccwire serve` would see.

use std::collections::{BTreeMap, VecDeque};

use ccwire_core::api::Api;
use ccwire_core::gateway::{
    Admission, CliSpec, ConversationRecord, Gateway, GatewayConfig, GatewayOutput, HttpHead,
    Limits, RecordState, RequestId, RouteKey, SessionId, StoreAnswer, StoreAsk,
    HELD_CALL_TIMEOUT_TEXT,
};
use serde_json::{json, Value};

// ---- a fake CLI -------------------------------------------------------------------------

/// A CLI that answers prompts: `lookup: a, b` makes the model call the client's `lookup`
/// tool once per key (in one message, so the calls are parallel), `bash: COMMAND` asks
/// permission for a Bash call (`bash: COMMAND | blocked: PATH` names PATH as the blocked
/// path), `stall` starts a message and stops there, anything else is echoed.
#[derive(Debug, Default)]
struct FakeCli {
    /// Every line written to its stdin.
    stdin: Vec<Value>,
    messages: u32,
    calls: u32,
    /// `tools/call`s waiting for the host: control request id → (JSON-RPC id, tool_use id).
    pending: BTreeMap<String, (u64, String)>,
    /// Results of the current turn's calls, in the order they came.
    results: Vec<(String, String, bool)>,
    /// The model's message stalled mid-stream.
    stalled: bool,
    /// A permission request waiting for the host: control request id → tool_use id.
    asking: BTreeMap<String, String>,
    /// Its session's id, when started with `--session-mirror`: each prompt is mirrored as a
    /// transcript line.
    mirror: Option<String>,
}

impl FakeCli {
    /// Takes what the host wrote, returns what the CLI prints.
    fn write(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        for line in String::from_utf8(bytes.to_vec()).unwrap().lines() {
            let message: Value = serde_json::from_str(line).expect("the host writes JSON lines");
            self.stdin.push(message.clone());
            self.take(&message, &mut out);
        }
        out
    }

    fn take(&mut self, message: &Value, out: &mut Vec<String>) {
        match message["type"].as_str() {
            Some("control_request") => {
                let id = message["request_id"].as_str().unwrap();
                match message["request"]["subtype"].as_str() {
                    Some("initialize") => out.push(control_ok(
                        id,
                        json!({
                            "models": [{"value": "sonnet", "displayName": "Sonnet (fake)"}]
                        }),
                    )),
                    Some("interrupt") => self.interrupt(id, out),
                    other => panic!("the fake CLI got an unexpected control request {other:?}"),
                }
            }
            Some("user") => {
                let text = user_text(&message["message"]["content"]);
                self.prompt(&text, out);
            }
            Some("control_response") => {
                let id = message["response"]["request_id"].as_str().unwrap();
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
                    self.after_tools(out);
                    return;
                }
                let Some((_, tool_use_id)) = self.pending.remove(id) else {
                    return;
                };
                let result = &message["response"]["response"]["mcp_response"]["result"];
                let text = result["content"][0]["text"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned();
                let is_error = result["isError"].as_bool().unwrap_or(false);
                self.results.push((tool_use_id, text, is_error));
                if self.pending.is_empty() {
                    self.after_tools(out);
                }
            }
            other => panic!("the fake CLI got an unexpected line type {other:?}"),
        }
    }

    fn prompt(&mut self, text: &str, out: &mut Vec<String>) {
        out.push(line(
            json!({"type": "system", "subtype": "init", "session_id": "fake-session"}),
        ));
        if let Some(id) = &self.mirror {
            out.push(line(json!({"type": "transcript_mirror",
                "filePath": format!("/home/.claude/projects/-work/{id}.jsonl"),
                "entries": [{"type": "user", "message": {"role": "user", "content": text}}]})));
            // A subagent's transcript is not the conversation's.
            out.push(line(json!({"type": "transcript_mirror",
                "filePath": format!("/home/.claude/projects/-work/{id}/subagents/agent-1.jsonl"),
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
            self.message(
                vec![json!({"type": "text", "text": format!("echo: {text}")})],
                "end_turn",
                out,
            );
            out.push(result("success", false, &format!("echo: {text}")));
        }
    }

    fn after_tools(&mut self, out: &mut Vec<String>) {
        let results: Vec<Value> = self
            .results
            .iter()
            .map(|(id, text, is_error)| {
                json!({"type": "tool_result", "tool_use_id": id, "content": text, "is_error": is_error})
            })
            .collect();
        out.push(line(
            json!({"type": "user", "message": {"role": "user", "content": results},
                             "parent_tool_use_id": null, "session_id": "fake-session"}),
        ));
        let text = format!(
            "done: {}",
            self.results
                .drain(..)
                .map(|(_, text, _)| text)
                .collect::<Vec<_>>()
                .join(" | ")
        );
        self.message(vec![json!({"type": "text", "text": text})], "end_turn", out);
        out.push(result("success", false, &text));
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
        out.push(control_ok(id, json!({"still_queued": []})));
        if std::mem::take(&mut self.stalled) {
            out.push(line(
                json!({"type": "user", "message": {"role": "user", "content": [
                {"type": "text", "text": "[Request interrupted by user]"}]},
                "parent_tool_use_id": null, "session_id": "fake-session"}),
            ));
        }
        out.push(result("error_during_execution", true, ""));
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
        out.push(line(json!({"type": "assistant", "message": {
            "id": id, "type": "message", "role": "assistant", "model": "fake", "content": blocks,
            "stop_reason": null, "usage": {"input_tokens": 12, "output_tokens": 5}},
            "parent_tool_use_id": null, "session_id": "fake-session"})));
        out.push(stream_event(
            n,
            json!({"type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"input_tokens": 12, "output_tokens": 5,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}),
        ));
        out.push(stream_event(n, json!({"type": "message_stop"})));
    }
}

fn line(value: Value) -> String {
    format!("{value}\n")
}

fn control_ok(id: &str, response: Value) -> String {
    line(json!({"type": "control_response",
                "response": {"subtype": "success", "request_id": id, "response": response}}))
}

fn stream_event(message: u32, event: Value) -> String {
    line(
        json!({"type": "stream_event", "event": event, "session_id": "fake-session",
                "parent_tool_use_id": null, "api_message_id": format!("msg_{message}")}),
    )
}

fn result(subtype: &str, is_error: bool, text: &str) -> String {
    line(
        json!({"type": "result", "subtype": subtype, "is_error": is_error, "result": text,
                "stop_reason": "end_turn", "num_turns": 1, "session_id": "fake-session",
                "usage": {"input_tokens": 12, "output_tokens": 5}}),
    )
}

fn user_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

// ---- the harness ------------------------------------------------------------------------

/// A response as the client received it.
#[derive(Debug, Default, Clone)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    ended: bool,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    fn text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap()
    }
}

/// The gateway, its CLIs and its clients on one clock.
struct Sim {
    now: u64,
    gateway: Gateway,
    clis: BTreeMap<SessionId, FakeCli>,
    specs: BTreeMap<SessionId, CliSpec>,
    closed: Vec<SessionId>,
    /// Directories the gateway asked to delete, with how many sessions were closed before.
    removed: Vec<(String, usize)>,
    responses: BTreeMap<RequestId, Response>,
    next_request: RequestId,
    /// Every input and output in order, one JSON object each (`{"in": …}` / `{"out": …}`): the
    /// scenario the npm package's Gateway replays to show it makes the same bytes.
    trace: Vec<String>,
    /// Sessions whose CLI prints nothing until released (to stall a start).
    muted: Vec<SessionId>,
    /// Spawns to refuse.
    fail_spawns: bool,
    /// The session store, when the gateway keeps one: transcripts by conversation id,
    /// records by (tenant, hash).
    store: Option<SimStore>,
}

#[derive(Debug, Default)]
struct SimStore {
    transcripts: BTreeMap<String, Vec<Value>>,
    records: BTreeMap<(String, String), ConversationRecord>,
    saves: Vec<ConversationRecord>,
    responses: BTreeMap<(String, String), String>,
    /// The Managed Agents API's resources: (tenant, kind, id) → JSON.
    managed: BTreeMap<(String, String, String), String>,
}

impl Sim {
    fn new(config: GatewayConfig) -> Sim {
        Sim {
            now: 1_000,
            // The HTTP face as a JS `Gateway` without `http` options has it.
            gateway: Gateway::new(config).expect("a loopback gateway"),
            clis: BTreeMap::new(),
            specs: BTreeMap::new(),
            closed: Vec::new(),
            removed: Vec::new(),
            responses: BTreeMap::new(),
            next_request: 0,
            trace: Vec::new(),
            muted: Vec::new(),
            fail_spawns: false,
            store: None,
        }
    }

    fn default() -> Sim {
        Sim::new(GatewayConfig::default())
    }

    /// Sends a request; runs until everything is quiet; returns its id.
    fn send(&mut self, api: Api, tenant: &str, body: Value) -> RequestId {
        self.next_request += 1;
        let id = self.next_request;
        self.responses.insert(id, Response::default());
        let body = body.to_string();
        let api_name = match api {
            Api::Anthropic => "anthropic",
            Api::OpenAi => "openai",
            Api::Responses => "responses",
        };
        self.input(
            json!({"op": "request", "now": self.now, "request": id, "api": api_name,
                          "tenant": tenant, "body": body}),
        );
        self.gateway
            .handle_request(self.now, id, api, tenant, body.as_bytes());
        self.run();
        id
    }

    /// Sends an HTTP request through the HTTP face; runs until quiet; returns its id if
    /// admitted.
    fn http(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Option<RequestId> {
        let id = self.next_request + 1;
        self.input(
            json!({"op": "http", "now": self.now, "request": id, "method": method,
                          "path": path, "headers": headers, "body": body}),
        );
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        let head = HttpHead {
            method,
            path,
            query,
            headers,
        };
        let admission = self.gateway.admit(&head);
        self.trace
            .push(json!({ "admission": admission.to_json() }).to_string());
        let Admission::Admit { tenant, .. } = admission else {
            return None;
        };
        self.next_request = id;
        self.responses.insert(id, Response::default());
        self.gateway
            .handle_http(self.now, id, &head, &tenant, Ok(body.as_bytes()));
        self.run();
        Some(id)
    }

    fn response(&self, id: RequestId) -> &Response {
        &self.responses[&id]
    }

    /// Carries out the gateway's outputs and feeds back what the CLIs print, until quiet.
    fn run(&mut self) {
        let mut stdout: VecDeque<(SessionId, String)> = VecDeque::new();
        loop {
            while let Some(output) = self.gateway.poll_output() {
                self.trace.push(format!("{{\"out\":{}}}", output.to_json()));
                match output {
                    GatewayOutput::Spawn { session, spec } => {
                        if self.fail_spawns {
                            self.input(json!({"op": "spawn_failed", "now": self.now,
                                              "session": session, "error": "no such file"}));
                            self.gateway
                                .handle_spawn_failed(self.now, session, "no such file");
                            continue;
                        }
                        let mirror = spec.args.iter().find_map(|a| {
                            a.strip_prefix("--session-id=")
                                .or_else(|| a.strip_prefix("--resume="))
                                .map(str::to_owned)
                        });
                        self.specs.insert(session, spec);
                        self.clis.insert(
                            session,
                            FakeCli {
                                mirror,
                                ..FakeCli::default()
                            },
                        );
                    }
                    GatewayOutput::Write { session, bytes } => {
                        let cli = self.clis.get_mut(&session).expect("written after spawn");
                        for l in cli.write(&bytes) {
                            stdout.push_back((session, l));
                        }
                    }
                    GatewayOutput::Close { session } => self.closed.push(session),
                    GatewayOutput::RemoveDir { path } => {
                        self.removed.push((path, self.closed.len()));
                    }
                    GatewayOutput::Respond {
                        request,
                        status,
                        headers,
                    } => {
                        let response = self.responses.get_mut(&request).unwrap();
                        assert_eq!(response.status, 0, "one head per response");
                        response.status = status;
                        response.headers = headers;
                    }
                    GatewayOutput::Body { request, bytes } => {
                        let response = self.responses.get_mut(&request).unwrap();
                        assert!(response.status != 0 && !response.ended, "body after head");
                        response.body.extend(bytes);
                    }
                    GatewayOutput::End { request } => {
                        let response = self.responses.get_mut(&request).unwrap();
                        assert!(response.status != 0 && !response.ended, "one end");
                        response.ended = true;
                    }
                    GatewayOutput::Claim { .. } | GatewayOutput::Release { .. } => {}
                    GatewayOutput::Store(StoreAsk::Append { key, entries }) => {
                        let store = self.store.as_mut().expect("a store");
                        let lines = store.transcripts.entry(key.id).or_default();
                        lines.extend(entries.iter().map(|e| e.to_value()));
                    }
                    GatewayOutput::Store(StoreAsk::Save { record, .. }) => {
                        let store = self.store.as_mut().expect("a store");
                        store.records.retain(|_, r| r.key != record.key);
                        let at = (record.key.tenant.clone(), record.hash.clone());
                        store.records.insert(at, record.clone());
                        store.saves.push(record);
                    }
                    GatewayOutput::Store(StoreAsk::Find {
                        request,
                        tenant,
                        hash,
                    }) => {
                        let store = self.store.as_ref().expect("a store");
                        let found = store.records.get(&(tenant, hash)).cloned();
                        self.gateway.handle_store(
                            self.now,
                            StoreAnswer::Found {
                                request,
                                record: found,
                            },
                        );
                    }
                    GatewayOutput::Store(StoreAsk::Response {
                        tenant,
                        id,
                        response,
                    }) => {
                        let store = self.store.as_mut().expect("a store");
                        store.responses.insert((tenant, id), response);
                    }
                    GatewayOutput::Store(StoreAsk::Managed {
                        tenant,
                        kind,
                        id,
                        json,
                        ..
                    }) => {
                        let store = self.store.as_mut().expect("a store");
                        match json {
                            Some(json) => store.managed.insert((tenant, kind, id), json),
                            None => store.managed.remove(&(tenant, kind, id)),
                        };
                    }
                    GatewayOutput::Store(StoreAsk::LoadManaged { request, tenant }) => {
                        let store = self.store.as_ref().expect("a store");
                        let kept: Vec<(String, String)> = store
                            .managed
                            .iter()
                            .filter(|((t, _, _), _)| *t == tenant)
                            .map(|((_, kind, _), json)| (kind.clone(), json.clone()))
                            .collect();
                        self.gateway.handle_store(
                            self.now,
                            StoreAnswer::ManagedLoaded {
                                request,
                                resources: Some(kept),
                            },
                        );
                    }
                    GatewayOutput::Store(StoreAsk::FindResponse {
                        request,
                        tenant,
                        id,
                    }) => {
                        let store = self.store.as_ref().expect("a store");
                        let found = store.responses.get(&(tenant, id)).cloned();
                        self.gateway.handle_store(
                            self.now,
                            StoreAnswer::FoundResponse {
                                request,
                                response: found,
                            },
                        );
                    }
                    GatewayOutput::Store(StoreAsk::List {
                        request,
                        tenant,
                        limit,
                    }) => {
                        let store = self.store.as_ref().expect("a store");
                        let mut listed: Vec<ConversationRecord> = (store.records.values())
                            .filter(|r| tenant.as_ref().is_none_or(|t| r.key.tenant == *t))
                            .cloned()
                            .collect();
                        listed.sort_by_key(|r| std::cmp::Reverse(r.saved_ms));
                        listed.truncate(limit);
                        self.gateway.handle_store(
                            self.now,
                            StoreAnswer::Listed {
                                request,
                                records: Some(listed),
                            },
                        );
                    }
                    GatewayOutput::Store(StoreAsk::Load { request, key }) => {
                        let store = self.store.as_ref().expect("a store");
                        // (Transcripts are kept by id here: the tenant's is the record's.)
                        let lines = (store.transcripts.get(&key.id))
                            .filter(|_| store.records.values().any(|r| r.key == key))
                            .map(|lines| lines.iter().map(Value::to_string).collect());
                        self.gateway.handle_store(
                            self.now,
                            StoreAnswer::TranscriptLoaded {
                                request,
                                lines: Ok(lines),
                            },
                        );
                    }
                    other => panic!("an output the harness does not know: {other:?}"),
                }
            }
            let Some((session, l)) = stdout.pop_front() else {
                return;
            };
            if self.muted.contains(&session) {
                continue;
            }
            self.input(json!({"op": "stdout", "now": self.now, "session": session, "data": l}));
            self.gateway.handle_stdout(self.now, session, l.as_bytes());
        }
    }

    /// Jumps the clock by `ms`, through every deadline on the way.
    fn advance(&mut self, ms: u64) {
        let until = self.now + ms;
        while let Some((at, _)) = self.gateway.poll_timeout() {
            if at > until {
                break;
            }
            self.now = self.now.max(at);
            self.input(json!({"op": "timeout", "now": self.now}));
            self.gateway.handle_timeout(self.now);
            self.run();
        }
        self.now = until;
    }

    fn exit(&mut self, session: SessionId, code: i32) {
        self.input(
            json!({"op": "exit", "now": self.now, "session": session, "code": code,
                          "signal": null, "stderr": "boom"}),
        );
        self.gateway
            .handle_exit(self.now, session, Some(code), None, "boom");
        self.run();
    }

    fn gone(&mut self, request: RequestId) {
        self.input(json!({"op": "client_gone", "now": self.now, "request": request}));
        self.gateway.handle_client_gone(self.now, request);
        self.run();
    }

    fn input(&mut self, input: Value) {
        self.trace.push(json!({"in": input}).to_string());
    }

    fn cli(&self, session: SessionId) -> &FakeCli {
        &self.clis[&session]
    }
}

fn tools() -> Value {
    json!([{"name": "lookup", "description": "Look a key up.",
            "input_schema": {"type": "object", "properties": {"key": {"type": "string"}}}}])
}

fn anthropic(messages: Value, stream: bool) -> Value {
    json!({"model": "sonnet", "max_tokens": 100, "stream": stream, "tools": tools(),
           "messages": messages})
}

/// A one-call conversation `ask` continued: the model's call of `lookup` for `key` (the fake
/// CLI's first call, `toolu_1`) and the client's `result`.
fn with_result(ask: &Value, key: &str, result: &str) -> Vec<Value> {
    let mut messages = ask.as_array().unwrap().clone();
    messages.push(json!({"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"key": key}}]}));
    messages.push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": result}]}));
    messages
}

/// The SSE `data:` payloads of a body.
fn events(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

// ---- the tests --------------------------------------------------------------------------

#[test]
fn a_conversation_continues_on_its_live_session() {
    let mut sim = Sim::default();
    let first = sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "Hi"}]), false),
    );
    let response = sim.response(first).clone();
    assert_eq!(response.status, 200);
    assert!(response.ended);
    assert_eq!(response.header("x-ccwire-session"), Some("new"));
    assert_eq!(response.json()["content"][0]["text"], "echo: Hi");
    assert_eq!(response.json()["usage"]["input_tokens"], 12);
    let spec = &sim.specs[&1];
    assert!(spec.args.iter().any(|a| a == "--include-partial-messages"));
    assert!(spec.args.join(" ").contains("--allowedTools mcp__client"));
    assert!(spec.env_remove.iter().any(|v| v == "MCP_TOOL_TIMEOUT"));

    let second = sim.send(
        Api::Anthropic,
        "t",
        anthropic(
            json!([{"role": "user", "content": "Hi"},
                   {"role": "assistant", "content": "echo: Hi"},
                   {"role": "user", "content": "Again"}]),
            false,
        ),
    );
    let response = sim.response(second);
    assert_eq!(response.header("x-ccwire-session"), Some("continued"));
    assert_eq!(response.json()["content"][0]["text"], "echo: Again");
    assert_eq!(sim.clis.len(), 1, "no second CLI");
    // The prompt waited for the CLI's answer to `initialize`, then each turn's prompt came.
    let kinds: Vec<&str> = sim
        .cli(1)
        .stdin
        .iter()
        .map(|m| m["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["control_request", "user", "user"]);
}

#[test]
fn a_held_tool_call_ends_the_response_and_the_result_continues_the_turn() {
    let mut sim = Sim::default();
    let ask = json!([{"role": "user", "content": "lookup: paris"}]);
    let first = sim.send(Api::Anthropic, "t", anthropic(ask.clone(), true));
    let response = sim.response(first).clone();
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    assert!(response.ended);
    let events = events(&response.text());
    let delta = events
        .iter()
        .find(|e| e["type"] == "message_delta")
        .unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    let start = events
        .iter()
        .find(|e| e["type"] == "content_block_start")
        .unwrap();
    assert_eq!(
        start["content_block"]["name"], "lookup",
        "the client's own name"
    );
    assert_eq!(sim.gateway.held_count(), 1);

    let messages = with_result(&ask, "paris", "sunny");
    let second = sim.send(Api::Anthropic, "t", anthropic(json!(messages), false));
    let response = sim.response(second);
    assert_eq!(response.header("x-ccwire-session"), Some("continued"));
    assert_eq!(response.json()["content"][0]["text"], "done: sunny");
    assert_eq!(sim.gateway.held_count(), 0);
    assert_eq!(sim.clis.len(), 1);
}

#[test]
fn parallel_calls_need_every_result_and_a_partial_request_loses_nothing() {
    let mut sim = Sim::default();
    let ask = json!([{"role": "user", "content": "lookup: paris, rome"}]);
    let first = sim.send(
        Api::OpenAi,
        "t",
        json!({"model": "sonnet", "tools": [
        {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}],
        "messages": ask}),
    );
    let body = sim.response(first).json();
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        sim.gateway.held_count(),
        2,
        "both calls reached the gateway"
    );

    let mut messages = ask.as_array().unwrap().clone();
    messages.push(body["choices"][0]["message"].clone());
    let with = |results: &[(&str, &str)]| {
        let mut m = messages.clone();
        for (id, text) in results {
            m.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
        }
        json!({"model": "sonnet", "tools": [{"type": "function", "function": {
            "name": "lookup", "parameters": {"type": "object"}}}], "messages": m})
    };
    let partial = sim.send(Api::OpenAi, "t", with(&[("toolu_1", "sunny")]));
    let response = sim.response(partial);
    assert_eq!(response.status, 400);
    assert!(response.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("toolu_2"));
    assert_eq!(sim.gateway.held_count(), 2, "nothing was lost");

    let full = sim.send(
        Api::OpenAi,
        "t",
        with(&[("toolu_1", "sunny"), ("toolu_2", "rain")]),
    );
    let body = sim.response(full).json();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "done: sunny | rain"
    );
}

#[test]
fn a_held_call_past_its_deadline_gets_an_error_and_a_late_result_rebuilds() {
    let mut sim = Sim::default();
    let ask = json!([{"role": "user", "content": "lookup: paris"}]);
    sim.send(Api::Anthropic, "t", anthropic(ask.clone(), false));
    assert_eq!(sim.gateway.held_count(), 1);

    sim.advance(10 * 60 * 1000);
    assert_eq!(sim.gateway.held_count(), 0);
    let answer = sim.cli(1).stdin.last().unwrap().clone();
    let result = &answer["response"]["response"]["mcp_response"]["result"];
    assert_eq!(result["isError"], true);
    assert_eq!(result["content"][0]["text"], HELD_CALL_TIMEOUT_TEXT);

    let messages = with_result(&ask, "paris", "sunny");
    let late = sim.send(Api::Anthropic, "t", anthropic(json!(messages), false));
    assert_eq!(
        sim.response(late).header("x-ccwire-session"),
        Some("rebuilt")
    );
    assert_eq!(sim.closed, [1], "the old session was closed");
    assert_eq!(sim.clis.len(), 2);
    let prompt = user_text(&sim.cli(2).stdin[1]["message"]["content"]);
    assert!(prompt.contains("<conversation_history>") && prompt.contains("sunny"));
}

#[test]
fn an_idle_session_is_closed_past_its_ttl() {
    let mut sim = Sim::default();
    sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "Hi"}]), false),
    );
    assert_eq!(sim.gateway.session_count(), 1);
    sim.advance(30 * 60 * 1000 - 1);
    assert_eq!(sim.gateway.session_count(), 1);
    sim.advance(1);
    assert_eq!(sim.gateway.session_count(), 0);
    assert_eq!(sim.closed, [1]);
    assert_eq!(sim.gateway.poll_timeout(), None, "nothing left to wake for");
}

#[test]
fn a_client_gone_mid_stream_interrupts_and_the_conversation_goes_on() {
    let mut sim = Sim::default();
    let ask = json!([{"role": "user", "content": "stall"}]);
    let first = sim.send(Api::Anthropic, "t", anthropic(ask, true));
    assert_eq!(sim.response(first).status, 200);
    assert!(!sim.response(first).ended);
    // A quiet stream gets keep-alives.
    sim.advance(15_000);
    assert!(sim
        .response(first)
        .text()
        .ends_with("event: ping\ndata: {\"type\":\"ping\"}\n\n"));

    sim.gone(first);
    let last = sim.cli(1).stdin.last().unwrap();
    assert_eq!(last["request"]["subtype"], "interrupt");
    assert!(
        !sim.response(first).ended,
        "nothing more is sent to a client that left"
    );
    // The interrupted turn ended (the fake CLI answers at once): the conversation is free.
    let next = sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "Hello again"}]), false),
    );
    assert_eq!(sim.response(next).status, 200);
}

#[test]
fn a_conversation_is_busy_until_its_interrupted_turn_ends_then_closed_if_it_never_does() {
    let mut sim = Sim::default();
    let ask = json!([{"role": "user", "content": "lookup: paris"}]);
    sim.send(Api::Anthropic, "t", anthropic(ask.clone(), false));
    let messages = with_result(&ask, "paris", "sunny");
    // The CLI goes quiet: the result is delivered, but the turn never ends.
    sim.muted.push(1);
    let second = sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!(messages.clone()), true),
    );
    sim.gone(second);
    let again = sim.send(Api::Anthropic, "t", anthropic(json!(messages), false));
    assert_eq!(sim.response(again).status, 429);
    assert_eq!(sim.response(again).header("retry-after"), Some("1"));
    sim.advance(10_000);
    assert_eq!(sim.closed, [1], "closed after the settle grace");
    assert_eq!(sim.gateway.session_count(), 0);
}

#[test]
fn a_cli_that_dies_mid_turn_fails_the_response_in_the_api_s_shape() {
    let mut sim = Sim::default();
    let first = sim.send(
        Api::OpenAi,
        "t",
        json!({"model": "sonnet", "stream": true,
        "messages": [{"role": "user", "content": "stall"}]}),
    );
    assert_eq!(sim.response(first).status, 200);
    sim.exit(1, 1);
    let response = sim.response(first);
    assert!(response.ended);
    let text = response.text();
    assert!(
        text.contains("exited with status 1 before the response was complete: boom"),
        "{text}"
    );
    assert!(text.ends_with("data: [DONE]\n\n"));
    assert_eq!(sim.gateway.session_count(), 0);

    // Before anything was streamed, the error is an HTTP status.
    sim.muted.push(2);
    let second = sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "Hi"}]), true),
    );
    assert_eq!(sim.response(second).status, 0, "still starting");
    sim.exit(2, 127);
    let response = sim.response(second);
    assert_eq!(response.status, 500);
    assert_eq!(response.json()["type"], "error");
    assert!(response.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("cannot start a Claude Code session: the CLI exited with status 127"));
}

#[test]
fn a_cli_that_does_not_start_in_time_fails_its_request() {
    let mut sim = Sim::default();
    sim.muted.push(1);
    let first = sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "Hi"}]), false),
    );
    sim.advance(60_000);
    let response = sim.response(first);
    assert_eq!(response.status, 500);
    assert!(response.text().contains("did not answer within 60 s"));
    assert_eq!(sim.closed, [1]);
}

#[test]
fn a_spawn_failure_is_a_500_naming_it() {
    let mut sim = Sim::default();
    sim.fail_spawns = true;
    let first = sim.send(
        Api::Responses,
        "t",
        json!({"model": "sonnet", "input": "Hi"}),
    );
    let response = sim.response(first);
    assert_eq!(response.status, 500);
    assert!(response
        .text()
        .contains("cannot start a Claude Code session: no such file"));
    assert_eq!(sim.gateway.session_count(), 0);
}

#[test]
fn the_session_cap_makes_room_from_idle_conversations_and_is_a_429_when_none_is() {
    let mut sim = Sim::new(GatewayConfig {
        max_sessions: 1,
        ..GatewayConfig::default()
    });
    sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "One"}]), false),
    );
    // The first conversation waits for nothing: its CLI gives way.
    let second = sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "Two"}]), false),
    );
    assert_eq!(sim.response(second).status, 200);
    assert_eq!(sim.gateway.session_count(), 1);
    assert!(sim
        .gateway
        .metrics()
        .contains("ccwire_cli_exits_total{how=\"evicted_idle\"} 1"));
    // It comes back rebuilt, in its turn making room.
    let back = json!([{"role": "user", "content": "One"}, {"role": "assistant", "content": "echo: One"},
                      {"role": "user", "content": "Again"}]);
    let third = sim.send(Api::Anthropic, "t", anthropic(back, false));
    assert_eq!(sim.response(third).status, 200);
    assert_eq!(
        sim.response(third).header("x-ccwire-session"),
        Some("rebuilt")
    );
    // A conversation whose turn waits for the client's tool result is not idle.
    let ask = json!([{"role": "user", "content": "lookup: paris"}]);
    let asked = sim.send(Api::Anthropic, "t", anthropic(ask, false));
    assert_eq!(sim.response(asked).status, 200);
    let fourth = sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "Four"}]), false),
    );
    let response = sim.response(fourth);
    assert_eq!(response.status, 429);
    assert_eq!(response.json()["error"]["type"], "rate_limit_error");
    assert_eq!(sim.gateway.session_count(), 1);
}

#[test]
fn a_key_at_its_own_cap_makes_room_from_its_own_conversations_and_spares_the_others() {
    let mut sim = Sim::new(GatewayConfig {
        max_sessions: 3,
        max_sessions_per_key: 2,
        ..GatewayConfig::default()
    });
    let ask = |text: &str| anthropic(json!([{"role": "user", "content": text}]), false);
    // Alice's conversation, idle.
    sim.send(Api::Anthropic, "alice", ask("Alice one"));
    // Mallory fills her share; a third of hers closes her own oldest, not Alice's.
    sim.send(Api::Anthropic, "mallory", ask("M1"));
    sim.send(Api::Anthropic, "mallory", ask("M2"));
    let third = sim.send(Api::Anthropic, "mallory", ask("M3"));
    assert_eq!(sim.response(third).status, 200);
    assert_eq!(sim.gateway.tenant_counts("mallory").0, 2);
    assert_eq!(
        sim.gateway.tenant_counts("alice").0,
        1,
        "alice's CLI is spared"
    );
    let back = json!([{"role": "user", "content": "Alice one"}, {"role": "assistant", "content": "echo: Alice one"},
                      {"role": "user", "content": "Alice two"}]);
    let alice = sim.send(Api::Anthropic, "alice", anthropic(back, false));
    assert_eq!(
        sim.response(alice).header("x-ccwire-session"),
        Some("continued")
    );
    // Both of Mallory's wait for the client's tool result: nothing of hers can give way.
    sim.send(Api::Anthropic, "mallory", ask("lookup: a"));
    sim.send(Api::Anthropic, "mallory", ask("lookup: b"));
    let refused = sim.send(Api::Anthropic, "mallory", ask("M4"));
    assert_eq!(sim.response(refused).status, 429);
    assert!(sim.response(refused).json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("this key runs its maximum of 2"));
    assert_eq!(sim.gateway.tenant_counts("alice").0, 1);
}

#[test]
fn tenants_never_share_a_session() {
    let mut sim = Sim::default();
    let hi = json!([{"role": "user", "content": "Hi"}]);
    sim.send(Api::Anthropic, "alice", anthropic(hi.clone(), false));
    let next = json!([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "echo: Hi"},
                      {"role": "user", "content": "More"}]);
    let bob = sim.send(Api::Anthropic, "bob", anthropic(next.clone(), false));
    assert_eq!(
        sim.response(bob).header("x-ccwire-session"),
        Some("rebuilt")
    );
    let alice = sim.send(Api::Anthropic, "alice", anthropic(next, false));
    assert_eq!(
        sim.response(alice).header("x-ccwire-session"),
        Some("continued")
    );
}

#[test]
fn bad_requests_are_answered_in_the_api_s_shape_and_start_nothing() {
    let mut sim = Sim::default();
    let bad = sim.send(
        Api::OpenAi,
        "t",
        json!({"model": "sonnet", "n": 2,
        "messages": [{"role": "user", "content": "Hi"}]}),
    );
    let response = sim.response(bad);
    assert_eq!(response.status, 400);
    assert!(response.ended);
    assert!(response.json()["error"]["message"].is_string());
    let ignored = sim.send(
        Api::Anthropic,
        "t",
        json!({"model": "sonnet", "max_tokens": 10,
        "some_new_field": 1, "messages": [{"role": "user", "content": "Hi"}]}),
    );
    assert_eq!(sim.response(ignored).status, 200);
    assert_eq!(
        sim.response(ignored).header("x-ccwire-ignored"),
        Some("some_new_field")
    );
    assert_eq!(sim.clis.len(), 1);
}

/// Many conversations, clients and CLIs interleaved over an hour of simulated time.
fn many(seed: u64) -> (Vec<String>, usize) {
    let mut sim = Sim::new(GatewayConfig {
        seed,
        ..GatewayConfig::default()
    });
    let mut histories: Vec<Vec<Value>> = Vec::new();
    for round in 0..6 {
        for c in 0..20 {
            if round == 0 {
                histories.push(vec![
                    json!({"role": "user", "content": format!("lookup: k{c}")}),
                ]);
            }
            let messages = histories[c].clone();
            let id = sim.send(
                Api::Anthropic,
                &format!("tenant{}", c % 3),
                anthropic(json!(messages), false),
            );
            let body = sim.response(id).json();
            let content = body["content"].clone();
            histories[c].push(json!({"role": "assistant", "content": content}));
            let next = match content[0]["type"].as_str() {
                Some("tool_use") => json!({"role": "user", "content": [{"type": "tool_result",
                    "tool_use_id": content[0]["id"], "content": format!("v{c}.{round}")}]}),
                _ if c % 2 == 0 => {
                    json!({"role": "user", "content": format!("lookup: k{c}.{round}")})
                }
                _ => json!({"role": "user", "content": format!("plain {round}")}),
            };
            histories[c].push(next);
        }
        // Some held calls expire, idle sessions close; their conversations rebuild.
        sim.advance(if round == 3 { 31 * 60 * 1000 } else { 1_000 });
    }
    let ok = sim
        .responses
        .values()
        .filter(|r| r.status == 200 && r.ended)
        .count();
    (sim.trace, ok)
}

#[test]
fn many_conversations_give_the_same_outputs_every_time() {
    let (first, ok) = many(7);
    let (second, _) = many(7);
    assert_eq!(ok, 120, "every request answered");
    assert_eq!(first, second);
}

/// One scenario over the three APIs — held calls (parallel ones too), a partial request, a
/// keep-alive, a client gone, a stored response continued, an expiry, a rebuild, a CLI that
/// dies — kept as a snapshot of every input and output. The npm package's Gateway replays its
/// inputs and must make the same outputs, byte for byte (`bindings/test/gateway.test.mjs`).
#[test]
fn scenario() {
    let mut sim = Sim::new(GatewayConfig {
        seed: 42,
        id_key: GatewayConfig::id_key_from_seed(42),
        unix_epoch_ms: 1_800_000_000_000,
        ..GatewayConfig::default()
    });
    // Anthropic, streamed: a held call and its result.
    let ask = json!([{"role": "user", "content": "lookup: paris"}]);
    sim.send(Api::Anthropic, "alice", anthropic(ask.clone(), true));
    let messages = with_result(&ask, "paris", "sunny");
    sim.send(Api::Anthropic, "alice", anthropic(json!(messages), true));
    // Chat Completions: parallel calls, a partial answer (400), then both.
    let tools = json!([{"type": "function", "function": {"name": "lookup",
        "parameters": {"type": "object"}}}]);
    let ask = json!([{"role": "user", "content": "lookup: rome, oslo"}]);
    sim.send(
        Api::OpenAi,
        "bob",
        json!({"model": "gpt-4o", "tools": tools, "messages": ask,
        "stream": true, "stream_options": {"include_usage": true}}),
    );
    let calls = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "toolu_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"key\":\"rome\"}"}},
        {"id": "toolu_2", "type": "function", "function": {"name": "lookup", "arguments": "{\"key\":\"oslo\"}"}}]});
    let one =
        json!([ask[0], calls, {"role": "tool", "tool_call_id": "toolu_1", "content": "warm"}]);
    sim.send(
        Api::OpenAi,
        "bob",
        json!({"model": "gpt-4o", "tools": tools, "messages": one}),
    );
    let both = json!([ask[0], calls, {"role": "tool", "tool_call_id": "toolu_1", "content": "warm"},
                      {"role": "tool", "tool_call_id": "toolu_2", "content": "cold"}]);
    sim.send(
        Api::OpenAi,
        "bob",
        json!({"model": "gpt-4o", "tools": tools, "messages": both}),
    );
    // Responses: a stored response, continued by id; a stream that stalls, pings and is left.
    let first = sim.send(
        Api::Responses,
        "carol",
        json!({"model": "sonnet", "input": "Hi",
        "store": true}),
    );
    let id = sim.response(first).json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    sim.send(
        Api::Responses,
        "carol",
        json!({"model": "sonnet", "input": "More",
        "previous_response_id": id}),
    );
    let stall = sim.send(
        Api::Responses,
        "dave",
        json!({"model": "sonnet", "input": "stall",
        "stream": true}),
    );
    sim.advance(15_000);
    sim.gone(stall);
    // A held call expires; its late result rebuilds the conversation.
    let ask = json!([{"role": "user", "content": "lookup: lima"}]);
    sim.send(Api::Anthropic, "erin", anthropic(ask.clone(), false));
    sim.advance(10 * 60 * 1000);
    let late = json!([ask[0], {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"key": "lima"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "dry"}]}]);
    sim.send(Api::Anthropic, "erin", anthropic(late, false));
    // A CLI dies mid-stream; idle sessions close.
    let dies = sim.send(
        Api::Anthropic,
        "frank",
        anthropic(json!([{"role": "user", "content": "stall"}]), true),
    );
    let session = sim.gateway.request_session(dies).unwrap();
    sim.exit(session, 1);
    // Through the HTTP face: refusals from the head, the routes, a conversation.
    let json_body = [("content-type", "application/json")];
    assert_eq!(sim.http("GET", "/v1/messages", &json_body, ""), None);
    assert_eq!(sim.http("POST", "/v1/nothing", &json_body, "{}"), None);
    assert_eq!(
        sim.http(
            "POST",
            "/v1/messages",
            &[("content-type", "text/plain")],
            "{}"
        ),
        None
    );
    let page = [
        ("origin", "https://evil.example"),
        ("content-type", "application/json"),
    ];
    assert_eq!(sim.http("POST", "/v1/messages", &page, "{}"), None);
    let models = sim.http("GET", "/v1/models", &[], "").unwrap();
    assert!(sim.response(models).text().contains("\"sonnet\""));
    sim.http("GET", "/health", &[], "");
    let count = json!({"model": "sonnet", "messages": [{"role": "user", "content": "How many?"}]});
    sim.http(
        "POST",
        "/v1/messages/count_tokens",
        &json_body,
        &count.to_string(),
    );
    let ask = anthropic(json!([{"role": "user", "content": "Hi over HTTP"}]), true).to_string();
    let turn = sim.http("POST", "/v1/messages", &json_body, &ask).unwrap();
    assert_eq!(sim.response(turn).status, 200);
    sim.advance(31 * 60 * 1000);
    assert_eq!(sim.gateway.session_count(), 0);
    assert!(
        sim.responses.values().all(|r| r.status != 0),
        "every request was answered"
    );
    insta::assert_snapshot!(sim.trace.join("\n"));
}

/// Two gateways behind a router that knows nothing but `route_key` and the keys each gateway
/// claims: every request of a conversation reaches the gateway that holds it.
#[test]
fn a_router_with_the_published_index_keeps_each_conversation_on_its_gateway() {
    let config = GatewayConfig {
        publish_index: true,
        ..GatewayConfig::default()
    };
    let mut gateways = [Sim::new(config.clone()), Sim::new(config)];
    let mut owner: BTreeMap<String, usize> = BTreeMap::new();
    let mut next_new = 0;
    let mut conversations: Vec<Vec<Value>> = (0..4)
        .map(|c| vec![json!({"role": "user", "content": format!("lookup: k{c}")})])
        .collect();
    for _round in 0..3 {
        for (c, messages) in conversations.iter_mut().enumerate() {
            let body = anthropic(json!(messages), false);
            let key = Gateway::route_key(Api::Anthropic, "t", body.to_string().as_bytes()).unwrap();
            let at = match &key {
                RouteKey::New => {
                    next_new += 1;
                    next_new % 2
                }
                RouteKey::Conversation(key) => *owner.get(key).expect("a claimed key"),
            };
            let sim = &mut gateways[at];
            let seen = sim.trace.len();
            let id = sim.send(Api::Anthropic, "t", body);
            let response = sim.response(id).clone();
            let expected = if matches!(key, RouteKey::New) {
                "new"
            } else {
                "continued"
            };
            assert_eq!(
                response.header("x-ccwire-session"),
                Some(expected),
                "conversation {c}"
            );
            // The router learns what the gateway claimed and released.
            for line in &sim.trace[seen..] {
                let step: Value = serde_json::from_str(line).unwrap();
                match step["out"]["type"].as_str() {
                    Some("claim") => {
                        owner.insert(step["out"]["key"].as_str().unwrap().to_owned(), at);
                    }
                    Some("release") => {
                        owner.remove(step["out"]["key"].as_str().unwrap());
                    }
                    _ => {}
                }
            }
            let content = response.json()["content"].clone();
            messages.push(json!({"role": "assistant", "content": content}));
            messages.push(match content[0]["type"].as_str() {
                Some("tool_use") => json!({"role": "user", "content": [{"type": "tool_result",
                    "tool_use_id": content[0]["id"], "content": "v"}]}),
                _ => json!({"role": "user", "content": "lookup: again"}),
            });
        }
    }
    assert_eq!(gateways[0].gateway.session_count(), 2);
    assert_eq!(gateways[1].gateway.session_count(), 2);
    assert_eq!(owner.len(), 4, "one live key per conversation");
    // A closed conversation releases its key: its next request may go anywhere (and rebuilds).
    gateways[0].advance(31 * 60 * 1000);
    assert!(gateways[0]
        .trace
        .iter()
        .any(|l| l.contains(r#""type":"release""#)));
}

#[test]
fn metrics_count_requests_turns_tokens_and_latency() {
    let mut sim = Sim::default();
    let ask = json!([{"role": "user", "content": "lookup: paris"}]);
    sim.send(Api::Anthropic, "t", anthropic(ask.clone(), true));
    sim.advance(250);
    let messages = with_result(&ask, "paris", "sunny");
    sim.send(Api::Anthropic, "t", anthropic(json!(messages), false));
    sim.send(
        Api::OpenAi,
        "t",
        json!({"model": "m", "n": 2, "messages": []}),
    );
    let text = sim.gateway.metrics();
    for line in [
        "ccwire_requests_total{api=\"anthropic\",status=\"200\"} 2",
        "ccwire_requests_total{api=\"openai\",status=\"400\"} 1",
        "ccwire_turns_total{session=\"continued\"} 1",
        "ccwire_turns_total{session=\"new\"} 1",
        "ccwire_sessions 1",
        "ccwire_held_tool_calls 0",
        "ccwire_responses_in_flight 0",
        "ccwire_cli_spawns_total 1",
        // Each of the two responses had one model message: 12 in, 5 out.
        "ccwire_tokens_total{kind=\"input\"} 24",
        "ccwire_tokens_total{kind=\"output\"} 10",
        "ccwire_response_seconds_count 3",
        // Both turns reached the CLI; the refused request did not.
        "ccwire_added_seconds_count 2",
        // The fake CLI answers at once and the engine adds no time of its own.
        "ccwire_added_seconds_bucket{le=\"0.001\"} 2",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
    // Every series is declared, and the output parses as name, optional labels, value.
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, value) = l.rsplit_once(' ').unwrap();
        assert!(series.starts_with("ccwire_"), "{l}");
        value.parse::<f64>().unwrap_or_else(|_| panic!("{l}"));
    }
}

fn stall(sim: &mut Sim, tenant: &str) -> RequestId {
    sim.send(
        Api::Anthropic,
        tenant,
        anthropic(json!([{"role": "user", "content": "stall"}]), true),
    )
}

#[test]
fn requests_over_the_concurrency_cap_wait_in_order_and_a_full_queue_is_a_429() {
    let mut sim = Sim::new(GatewayConfig {
        max_concurrent: 2,
        max_queue: 1,
        ..GatewayConfig::default()
    });
    let first = stall(&mut sim, "a");
    let _second = stall(&mut sim, "b");
    let third = stall(&mut sim, "c");
    assert_eq!(sim.clis.len(), 2, "the third waits");
    assert_eq!(sim.response(third).status, 0);
    let fourth = stall(&mut sim, "d");
    assert_eq!(sim.response(fourth).status, 429);
    assert_eq!(sim.response(fourth).header("retry-after"), Some("1"));
    assert!(sim.gateway.metrics().contains("ccwire_requests_queued 1\n"));
    // A turn ends: the waiting request is served.
    sim.gone(first);
    assert_eq!(sim.clis.len(), 3);
    assert_eq!(sim.response(third).status, 200);
    assert!(sim.gateway.metrics().contains("ccwire_requests_queued 0\n"));
}

#[test]
fn a_tenant_at_its_own_cap_waits_without_holding_up_the_others() {
    let mut sim = Sim::new(GatewayConfig {
        max_concurrent_per_key: 1,
        ..GatewayConfig::default()
    });
    let a1 = stall(&mut sim, "a");
    let a2 = stall(&mut sim, "a");
    let b1 = stall(&mut sim, "b");
    assert_eq!(sim.response(a2).status, 0, "a waits for its own turn");
    assert_eq!(sim.response(b1).status, 200, "b does not wait behind a");
    sim.gone(a1);
    assert_eq!(sim.response(a2).status, 200);
}

#[test]
fn a_request_that_waits_too_long_gets_a_429() {
    let mut sim = Sim::new(GatewayConfig {
        max_concurrent: 1,
        queue_timeout_ms: 5_000,
        ..GatewayConfig::default()
    });
    stall(&mut sim, "a");
    let waiting = stall(&mut sim, "b");
    sim.advance(4_999);
    assert_eq!(sim.response(waiting).status, 0);
    sim.advance(1);
    let response = sim.response(waiting);
    assert_eq!(response.status, 429);
    assert!(response.text().contains("for 5 s"), "{}", response.text());
    // A client that leaves the queue is forgotten.
    let left = stall(&mut sim, "c");
    sim.gone(left);
    assert_eq!(sim.gateway.request_count(), 1);
    assert!(sim.gateway.metrics().contains("ccwire_requests_queued 0\n"));
}

fn spawns(sim: &Sim) -> usize {
    sim.trace
        .iter()
        .filter(|l| l.contains(r#""type":"spawn""#))
        .count()
}

#[test]
fn a_warm_pool_gives_new_conversations_a_started_cli_and_refills() {
    let mut sim = Sim::new(GatewayConfig {
        pool: 2,
        ..GatewayConfig::default()
    });
    let first = sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "One"}]), false),
    );
    assert_eq!(sim.response(first).status, 200);
    assert_eq!(spawns(&sim), 3, "its own CLI, and two for the pool");
    assert!(sim.gateway.metrics().contains("ccwire_pool_sessions 2\n"));
    // Both warm CLIs answered initialize and wait, with no prompt.
    for id in [2, 3] {
        let kinds: Vec<&str> = sim
            .cli(id)
            .stdin
            .iter()
            .map(|m| m["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["control_request"], "session {id}");
    }

    let second = sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "Two"}]), false),
    );
    let response = sim.response(second);
    assert_eq!(response.status, 200);
    assert_eq!(response.header("x-ccwire-session"), Some("new"));
    assert_eq!(response.json()["content"][0]["text"], "echo: Two");
    let kinds: Vec<&str> = sim
        .cli(2)
        .stdin
        .iter()
        .map(|m| m["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["control_request", "user"],
        "the oldest warm CLI took it"
    );
    assert_eq!(spawns(&sim), 4, "one more to replace it");
    let metrics = sim.gateway.metrics();
    for line in [
        "ccwire_pool_hits_total 1",
        "ccwire_pool_misses_total 1",
        "ccwire_pool_sessions 2",
        "ccwire_sessions 2",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }
    // The conversation the warm CLI took goes on there.
    let next = json!([{"role": "user", "content": "Two"}, {"role": "assistant", "content": "echo: Two"},
                      {"role": "user", "content": "Three"}]);
    let third = sim.send(Api::Anthropic, "t", anthropic(next, false));
    assert_eq!(
        sim.response(third).header("x-ccwire-session"),
        Some("continued")
    );
    assert_eq!(sim.cli(2).stdin.len(), 3);
}

#[test]
fn other_settings_miss_the_pool_and_take_the_oldest_slot() {
    let mut sim = Sim::new(GatewayConfig {
        pool: 1,
        ..GatewayConfig::default()
    });
    sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "One"}]), false),
    );
    assert_eq!(spawns(&sim), 2);
    // No client tools: other settings, so the warm CLI does not fit.
    let plain = json!({"model": "sonnet", "max_tokens": 10, "messages": [{"role": "user", "content": "Plain"}]});
    let id = sim.send(Api::Anthropic, "t", plain);
    assert_eq!(sim.response(id).status, 200);
    assert_eq!(
        sim.closed,
        [2],
        "the warm CLI of the other settings made room"
    );
    assert_eq!(
        spawns(&sim),
        4,
        "its own CLI and a warm one with its settings"
    );
    assert!(!sim.specs[&4].args.iter().any(|a| a == "--mcp-config"));
}

#[test]
fn warm_clis_count_toward_the_session_cap_and_give_way_to_conversations() {
    let mut sim = Sim::new(GatewayConfig {
        pool: 2,
        max_sessions: 2,
        ..GatewayConfig::default()
    });
    sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "One"}]), false),
    );
    assert_eq!(spawns(&sim), 2, "one warm CLI fits under the cap");
    let plain = json!({"model": "sonnet", "max_tokens": 10, "messages": [{"role": "user", "content": "Plain"}]});
    let id = sim.send(Api::Anthropic, "t", plain);
    assert_eq!(sim.response(id).status, 200, "a warm CLI gave way");
    assert_eq!(sim.gateway.session_count(), 2);
}

#[test]
fn a_drain_refuses_new_conversations_lets_held_turns_finish_and_closes_every_cli() {
    let mut sim = Sim::new(GatewayConfig {
        pool: 1,
        ..GatewayConfig::default()
    });
    // An idle conversation, and one whose turn waits for the client's tool result.
    sim.send(
        Api::Anthropic,
        "t",
        anthropic(json!([{"role": "user", "content": "Idle"}]), false),
    );
    let ask = json!([{"role": "user", "content": "lookup: paris"}]);
    sim.send(Api::Anthropic, "t", anthropic(ask.clone(), false));
    assert_eq!(
        sim.gateway.session_count(),
        3,
        "two conversations and a warm CLI"
    );

    sim.gateway.drain(sim.now, 30_000);
    sim.run();
    assert_eq!(
        sim.gateway.session_count(),
        1,
        "the idle one and the warm one are closed"
    );
    assert!(!sim.gateway.is_drained());
    let new = sim.send(
        Api::OpenAi,
        "t",
        json!({"model": "m", "messages": [{"role": "user", "content": "New"}]}),
    );
    assert_eq!(sim.response(new).status, 503);
    assert_eq!(sim.response(new).header("retry-after"), Some("1"));

    // The held turn finishes; then its CLI is closed too.
    let messages = with_result(&ask, "paris", "sunny");
    let done = sim.send(Api::Anthropic, "t", anthropic(json!(messages), false));
    assert_eq!(
        sim.response(done).json()["content"][0]["text"],
        "done: sunny"
    );
    assert!(sim.gateway.is_drained());
    assert_eq!(sim.gateway.poll_timeout(), None);
}

#[test]
fn a_drain_closes_what_still_runs_at_the_end_of_its_grace() {
    let mut sim = Sim::default();
    let stalled = stall(&mut sim, "t");
    sim.gateway.drain(sim.now, 5_000);
    sim.run();
    assert!(!sim.gateway.is_drained());
    sim.advance(5_000);
    assert!(sim.gateway.is_drained());
    let response = sim.response(stalled);
    assert!(response.ended);
    assert!(
        response
            .text()
            .contains("closed before the response was complete"),
        "{}",
        response.text()
    );
}

fn approvals_sim() -> Sim {
    Sim::new(GatewayConfig {
        approvals: true,
        enabled_tools: vec!["Bash".to_owned()],
        approval_timeout_ms: 60_000,
        unix_epoch_ms: 1_800_000_000_000,
        ..GatewayConfig::default()
    })
}

fn bash(sim: &mut Sim, tenant: &str, command: &str) -> RequestId {
    let body = json!({"model": "sonnet", "max_tokens": 100, "stream": true,
                      "messages": [{"role": "user", "content": format!("bash: {command}")}]});
    sim.send(Api::Anthropic, tenant, body)
}

fn answer(sim: &mut Sim, tenant: &str, id: &str, body: Value) -> Result<Value, u16> {
    let result = sim
        .gateway
        .answer_approval(sim.now, tenant, id, body.to_string().as_bytes())
        .map_err(|e| e.status());
    sim.run();
    result
}

#[test]
fn an_enabled_tool_waits_for_a_person_and_runs_once_allowed() {
    let mut sim = approvals_sim();
    let watch = sim.next_request + 100;
    sim.responses.insert(watch, Response::default());
    sim.gateway.handle_approval_events(sim.now, watch, "alice");
    sim.run();
    let turn = bash(&mut sim, "alice", "ls");
    let spec = sim.specs[&1].args.join(" ");
    assert!(spec.contains("--permission-prompt-tool stdio"), "{spec}");
    assert!(
        !spec.contains("--allowedTools Bash"),
        "Bash must ask: {spec}"
    );
    // The turn waits; the approval is listed for its tenant only.
    assert!(!sim.response(turn).ended);
    let list = sim.gateway.approvals("alice");
    assert_eq!(list["data"].as_array().unwrap().len(), 1, "{list}");
    let pending = &list["data"][0];
    assert_eq!(pending["tool_name"], "Bash");
    assert_eq!(pending["input"], json!({"command": "ls"}));
    assert_eq!(
        pending["expires_at_ms"],
        1_800_000_000_000u64 + 1_000 + 60_000
    );
    assert_eq!(sim.gateway.approvals("bob")["data"], json!([]));
    let id = pending["id"].as_str().unwrap().to_owned();
    assert_eq!(
        answer(&mut sim, "bob", &id, json!({"behavior": "allow"})),
        Err(404)
    );
    assert_eq!(
        answer(&mut sim, "alice", &id, json!({"behavior": "maybe"})),
        Err(400)
    );
    assert!(sim
        .gateway
        .metrics()
        .contains("ccwire_pending_approvals 1\n"));

    let decided = answer(
        &mut sim,
        "alice",
        &id,
        json!({"behavior": "allow", "remember": true,
        "updated_input": {"command": "ls -la"}}),
    );
    assert_eq!(decided, Ok(json!({"id": id, "behavior": "allow"})));
    let response = sim.response(turn);
    assert!(response.ended);
    assert!(
        response.text().contains("done: ran ls -la (rules 1)"),
        "{}",
        response.text()
    );
    assert_eq!(
        answer(&mut sim, "alice", &id, json!({"behavior": "allow"})),
        Err(404),
        "once"
    );
    // The watcher saw it come and go.
    let events = sim.response(watch).text();
    assert!(
        events.contains("event: approval\ndata: {")
            && events.contains(&format!(
                "event: resolved\ndata: {{\"behavior\":\"allow\",\"id\":\"{id}\"}}"
            )),
        "{events}"
    );
}

#[test]
fn a_denied_or_unanswered_approval_tells_the_model_the_tool_did_not_run() {
    let mut sim = approvals_sim();
    let turn = bash(&mut sim, "alice", "rm -rf /");
    let id = sim.gateway.approvals("alice")["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    answer(
        &mut sim,
        "alice",
        &id,
        json!({"behavior": "deny", "message": "not that"}),
    )
    .unwrap();
    assert!(sim.response(turn).text().contains("done: denied: not that"));

    let next = json!([{"role": "user", "content": "bash: rm -rf /"}, {"role": "assistant", "content": "done: denied: not that"},
                      {"role": "user", "content": "bash: rm -rf / again"}]);
    let body = json!({"model": "sonnet", "max_tokens": 100, "messages": next});
    let late = sim.send(Api::Anthropic, "alice", body);
    sim.advance(60_000);
    let text = sim.response(late).text();
    assert!(
        text.contains("No one answered this approval in time"),
        "{text}"
    );
    assert_eq!(sim.gateway.approvals("alice")["data"], json!([]));
}

#[test]
fn without_approvals_a_permission_request_is_denied_at_once() {
    let mut sim = Sim::default();
    let turn = bash(&mut sim, "alice", "ls");
    assert!(sim
        .response(turn)
        .text()
        .contains("has no one to approve tools"));
}

#[test]
fn an_account_limit_the_cli_reported_gives_the_429_its_retry_after() {
    let mut sim = Sim::new(GatewayConfig {
        unix_epoch_ms: 1_800_000_000_000,
        ..GatewayConfig::default()
    });
    let asked = sim.send(
        Api::OpenAi,
        "t",
        json!({"model": "m", "messages": [{"role": "user", "content": "stall"}]}),
    );
    // Now = 1 s after the epoch; the limit lifts 90 s later.
    let resets_at = (1_800_000_000_000u64 + 1_000) / 1000 + 90;
    for line in [
        json!({"type": "rate_limit_event", "rate_limit_info": {"status": "rejected",
               "resetsAt": resets_at, "rateLimitType": "five_hour"}, "session_id": "s"}),
        json!({"type": "result", "subtype": "success", "is_error": true, "api_error_status": 429,
               "result": "Claude usage limit reached.", "session_id": "s"}),
    ] {
        sim.gateway
            .handle_stdout(sim.now, 1, format!("{line}\n").as_bytes());
        sim.run();
    }
    let response = sim.response(asked);
    assert_eq!(response.status, 429, "{}", response.text());
    assert_eq!(response.header("retry-after"), Some("90"));
    assert!(response.text().contains("usage limit reached"));
}

// ---- the session store -------------------------------------------------------------------

fn with_store(config: GatewayConfig) -> Sim {
    let mut sim = Sim::new(GatewayConfig {
        store: true,
        ..config
    });
    sim.store = Some(SimStore::default());
    sim
}

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
    assert_eq!(resume.lines.len(), 4);
    assert!(resume.lines[1].contains("mcp__client__lookup"));
    assert!(sim
        .gateway
        .metrics()
        .contains("ccwire_resumes_total{reason=\"diverged\"} 1"));
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
    let store = sim.store.take();
    let mut sim = with_store(GatewayConfig {
        unix_epoch_ms: 1,
        ..GatewayConfig::default()
    });
    sim.store = store;
    let third = sim.send(
        Api::Responses,
        "t",
        json!({"model": "sonnet", "input": "Three", "previous_response_id": two}),
    );
    let response = sim.response(third);
    assert_eq!(response.status, 200, "{}", response.text());
    let finds = sim
        .trace
        .iter()
        .filter(|l| l.contains("\"ask\":\"find_response\""))
        .count();
    assert_eq!(finds, 2, "one read per link");
    // The whole chain is the history of a stored conversation: a CLI resumes it and gets the
    // new input alone.
    assert_eq!(response.header("x-ccwire-session"), Some("resumed"));
    assert!(sim.specs[&1].resume.is_some());
    let prompt = sim
        .cli(1)
        .stdin
        .iter()
        .find(|m| m["type"] == "user")
        .unwrap();
    assert_eq!(
        prompt["message"]["content"],
        json!([{"type": "text", "text": "Three"}])
    );
}

// ---- the Managed Agents API's sessions ----------------------------------------------------

const JSON: (&str, &str) = ("content-type", "application/json");

/// A request of the Managed Agents API through the HTTP face, as tenant `key`: its response.
fn managed(sim: &mut Sim, key: &str, method: &str, path: &str, body: Value) -> (u16, Value) {
    let auth = format!("Bearer {key}");
    let headers = [JSON, ("authorization", auth.as_str())];
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let id = sim.http(method, path, &headers, &body).expect("admitted");
    let response = sim.response(id);
    let value = serde_json::from_str(&response.text()).unwrap_or(Value::Null);
    (response.status, value)
}

/// A gateway whose keys are `alice` and `bob`, with a session store if `store`.
fn with_keys(store: bool) -> Sim {
    let mut sim = Sim::new(GatewayConfig {
        store,
        http: ccwire_core::gateway::HttpConfig {
            api_keys: vec!["alice".into(), "bob".into()],
            ..ccwire_core::gateway::HttpConfig::default()
        },
        ..GatewayConfig::default()
    });
    if store {
        sim.store = Some(SimStore::default());
    }
    sim
}

/// A session of `alice`'s with `agent` in a new environment and `extra` fields: its JSON.
fn new_session(sim: &mut Sim, agent: Value, extra: Value) -> Value {
    let (_, agent) = managed(sim, "alice", "POST", "/v1/agents", agent);
    let (_, env) = managed(
        sim,
        "alice",
        "POST",
        "/v1/environments",
        json!({"name": "e"}),
    );
    let mut body = json!({"agent": agent["id"], "environment_id": env["id"]});
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            body[k] = v;
        }
    }
    let (status, session) = managed(sim, "alice", "POST", "/v1/sessions", body);
    assert_eq!(status, 200, "{session}");
    session
}

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

/// The types of session `id`'s events after the first `skip`.
fn event_types(sim: &mut Sim, id: &str, skip: usize) -> (Vec<String>, Vec<Value>) {
    let (_, log) = managed(
        sim,
        "alice",
        "GET",
        &format!("/v1/sessions/{id}/events?limit=1000"),
        Value::Null,
    );
    let events: Vec<Value> = log["data"].as_array().unwrap()[skip..].to_vec();
    let types = events
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect();
    (types, events)
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

/// A `GET` of the console's view with `key` that answers 200: its JSON.
fn console_json(sim: &mut Sim, key: &str, path: &str) -> Value {
    let (status, body, _) = console(sim, key, path);
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// A `GET` of the console's view with `key` (`Bearer`): its status and body.
fn console(sim: &mut Sim, key: &str, path: &str) -> (u16, String, RequestId) {
    let auth = format!("Bearer {key}");
    let id = sim
        .http("GET", path, &[("authorization", auth.as_str())], "")
        .expect("admitted");
    let response = sim.response(id);
    (response.status, response.text(), id)
}

#[test]
fn the_console_lists_a_key_s_live_conversations_and_streams_their_chunks() {
    let mut sim = Sim::new(GatewayConfig {
        console: true,
        approvals: true,
        enabled_tools: vec!["Bash".to_owned()],
        approval_timeout_ms: 60_000,
        http: ccwire_core::gateway::HttpConfig {
            api_keys: vec!["alice".into(), "bob".into()],
            admin_key: Some("root".into()),
            ..ccwire_core::gateway::HttpConfig::default()
        },
        ..GatewayConfig::default()
    });
    let turn = bash(&mut sim, "alice", "ls");

    // Alice sees her conversation, waiting for a person; Bob nothing; the admin all.
    let list = console_json(&mut sim, "alice", "/v1/conversations");
    let listed = &list["data"][0];
    assert_eq!(list["data"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(listed["state"], "waiting_for_approval");
    assert_eq!(listed["tenant"], ccwire_core::gateway::tenant_id("alice"));
    let approval = sim.gateway.approvals("alice")["data"][0]["id"].clone();
    assert_eq!(listed["approvals"], json!([approval]));
    let id = listed["id"].as_str().unwrap().to_owned();
    assert_eq!(
        console_json(&mut sim, "bob", "/v1/conversations")["data"],
        json!([])
    );
    assert_eq!(
        console_json(&mut sim, "root", "/v1/conversations")["data"][0]["id"],
        id
    );
    let (status, _, _) = console(&mut sim, "nobody", "/v1/conversations");
    assert_eq!(status, 401);

    // Its stream starts with the conversation and its turn so far, then goes on.
    let path = format!("/v1/conversations/{id}/events");
    assert_eq!(console(&mut sim, "bob", &path).0, 404);
    let (status, text, stream) = console(&mut sim, "alice", &path);
    assert_eq!(status, 200);
    assert!(text.starts_with("event: conversation\ndata: {"), "{text}");
    assert!(text.contains("\"type\":\"user_prompt\""), "{text}");
    assert!(text.contains("\"type\":\"permission_request\""), "{text}");
    let id_str = approval.as_str().unwrap().to_owned();
    answer(&mut sim, "alice", &id_str, json!({"behavior": "allow"})).unwrap();
    assert!(sim.response(turn).ended);
    let text = sim.response(stream).text();
    assert!(text.contains("\"type\":\"tool_result\""), "{text}");
    assert!(text.contains("\"type\":\"turn_complete\""), "{text}");
    let list = console_json(&mut sim, "alice", "/v1/conversations");
    assert_eq!(list["data"][0]["state"], "idle");

    // Closed: the stream says so and ends.
    let session = *sim.specs.keys().next().unwrap();
    sim.gateway.close(sim.now, session);
    sim.run();
    assert!(sim.response(stream).ended);
    assert!(sim.response(stream).text().contains("event: closed\n"));
}

#[test]
fn an_approval_names_its_conversation_as_the_console_does_and_no_server_path() {
    let mut sim = Sim::new(GatewayConfig {
        console: true,
        approvals: true,
        enabled_tools: vec!["Bash".to_owned()],
        approval_timeout_ms: 60_000,
        tenant_root: Some("/state/tenants/".into()),
        http: ccwire_core::gateway::HttpConfig {
            api_keys: vec!["alice".into(), "bob".into()],
            ..ccwire_core::gateway::HttpConfig::default()
        },
        ..GatewayConfig::default()
    });
    let alice = ccwire_core::gateway::tenant_id("alice");
    let blocked = format!("/state/tenants/{alice}/work/notes.txt");
    bash(
        &mut sim,
        "alice",
        &format!("touch notes.txt | blocked: {blocked}"),
    );
    bash(&mut sim, "bob", "touch motd | blocked: /etc/motd");

    let approval = &sim.gateway.approvals("alice")["data"][0];
    let listed = console_json(&mut sim, "alice", "/v1/conversations");
    assert_eq!(
        approval["conversation"], listed["data"][0]["id"],
        "{approval}"
    );
    assert!(
        approval["conversation"]
            .as_str()
            .is_some_and(|c| c.len() == 36),
        "the conversation's UUID, no counter: {approval}"
    );
    assert_eq!(approval["blocked_path"], "work/notes.txt");
    assert!(
        !approval.to_string().contains("/state/tenants"),
        "{approval}"
    );
    // A path outside the tenant's directory is as the CLI gave it.
    let theirs = &sim.gateway.approvals("bob")["data"][0];
    assert_eq!(theirs["blocked_path"], "/etc/motd");
    assert_ne!(theirs["conversation"], approval["conversation"]);
}

#[test]
fn without_the_console_its_routes_are_not_there() {
    let mut sim = with_keys(false);
    let (status, body, _) = console(&mut sim, "alice", "/v1/conversations");
    assert_eq!(status, 404);
    assert!(body.contains("--console"), "{body}");
}

#[test]
fn the_console_lists_conversations_no_cli_runs_and_shows_their_stored_transcripts() {
    let mut sim = with_store(GatewayConfig {
        console: true,
        limits: Limits {
            hibernate_after_ms: 60_000,
            ..Limits::default()
        },
        http: ccwire_core::gateway::HttpConfig {
            api_keys: vec!["alice".into(), "bob".into()],
            admin_key: Some("root".into()),
            ..ccwire_core::gateway::HttpConfig::default()
        },
        ..GatewayConfig::default()
    });
    let first = sim.send(
        Api::Anthropic,
        "alice",
        anthropic(
            json!([{"role": "user", "content": "Remember PINEAPPLE"}]),
            false,
        ),
    );
    assert_eq!(sim.response(first).status, 200);
    let list = console_json(&mut sim, "alice", "/v1/conversations");
    assert_eq!(
        list["data"].as_array().unwrap().len(),
        1,
        "live, listed once: {list}"
    );
    assert_eq!(list["data"][0]["state"], "idle");
    let id = list["data"][0]["id"].as_str().unwrap().to_owned();

    // Hibernated: listed from the store, with why and when.
    sim.advance(60_000);
    assert_eq!(sim.gateway.session_count(), 0);
    let list = console_json(&mut sim, "alice", "/v1/conversations");
    let listed = &list["data"][0];
    assert_eq!(list["data"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(
        (&listed["id"], &listed["state"], &listed["closed"]),
        (&json!(id), &json!("hibernated"), &json!("hibernated"))
    );
    let tenant = ccwire_core::gateway::tenant_id("alice");
    assert_eq!(listed["tenant"], tenant);
    assert!(listed["last_active_ms"].as_u64().unwrap() > 0, "{listed}");
    assert_eq!(
        console_json(&mut sim, "bob", "/v1/conversations")["data"],
        json!([])
    );
    // The live ones alone: the store is not asked.
    assert_eq!(
        console_json(&mut sim, "alice", "/v1/conversations?live=only")["data"],
        json!([])
    );
    assert_eq!(
        console_json(&mut sim, "root", "/v1/conversations")["data"][0]["id"],
        id
    );

    // Its stream is its stored transcript's chunks, then its end; another key's is a 404
    // whichever tenant it names.
    let path = format!("/v1/conversations/{id}/events");
    let (status, text, stream) = console(&mut sim, "alice", &path);
    assert_eq!(status, 200, "{text}");
    assert!(text.starts_with("event: conversation\ndata: {"), "{text}");
    assert!(
        text.contains("\"type\":\"user_text\",\"text\":\"Remember PINEAPPLE\""),
        "{text}"
    );
    assert!(
        text.ends_with(&format!("event: closed\ndata: {{\"id\":\"{id}\"}}\n\n")),
        "{text}"
    );
    assert!(sim.response(stream).ended);
    assert_eq!(console(&mut sim, "bob", &path).0, 404);
    let theirs = format!("{path}?tenant={tenant}");
    assert_eq!(console(&mut sim, "bob", &theirs).0, 404);
    let (status, text, _) = console(&mut sim, "root", &theirs);
    assert_eq!(status, 200);
    assert!(text.contains("Remember PINEAPPLE"), "{text}");
    assert_eq!(
        console(&mut sim, "root", &path).0,
        404,
        "the admin names the tenant"
    );
    assert_eq!(
        console(&mut sim, "alice", "/v1/conversations/nope/events").0,
        404
    );

    // Resumed: live again, listed once.
    let back = json!([{"role": "user", "content": "Remember PINEAPPLE"},
                      {"role": "assistant", "content": "echo: Remember PINEAPPLE"},
                      {"role": "user", "content": "Again"}]);
    let again = sim.send(Api::Anthropic, "alice", anthropic(back, false));
    assert_eq!(
        sim.response(again).header("x-ccwire-session"),
        Some("resumed")
    );
    let list = console_json(&mut sim, "alice", "/v1/conversations");
    assert_eq!(list["data"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(
        (&list["data"][0]["id"], &list["data"][0]["state"]),
        (&json!(id), &json!("idle"))
    );
}

#[test]
fn the_console_s_charts_count_each_key_s_turns_tokens_and_added_latency_per_ten_seconds() {
    let mut sim = Sim::new(GatewayConfig {
        console: true,
        http: ccwire_core::gateway::HttpConfig {
            api_keys: vec!["alice".into(), "bob".into()],
            admin_key: Some("root".into()),
            ..ccwire_core::gateway::HttpConfig::default()
        },
        ..GatewayConfig::default()
    });
    let say = |text: &str| anthropic(json!([{"role": "user", "content": text}]), false);
    sim.advance(5_000);
    sim.send(Api::Anthropic, "alice", say("One"));
    sim.advance(20_000);
    sim.send(Api::Anthropic, "alice", say("Two"));
    sim.send(Api::Anthropic, "bob", say("Three"));
    let stats = |sim: &mut Sim, key: &str| console_json(sim, key, "/v1/stats");

    let mine = stats(&mut sim, "alice");
    assert_eq!(mine["bucket_ms"], 10_000);
    let buckets = mine["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), 60, "ten minutes");
    let turns: Vec<u64> = buckets
        .iter()
        .map(|b| b["turns"].as_u64().unwrap())
        .collect();
    // One turn in the bucket of 0:05, one in that of 0:25 (the last, now).
    assert_eq!(turns.iter().sum::<u64>(), 2);
    assert_eq!((turns[57], turns[58], turns[59]), (1, 0, 1), "{turns:?}");
    let last = &buckets[59];
    assert!(last["tokens"]["output"].as_u64().unwrap() > 0, "{last}");
    assert!(
        last["added_ms_avg"].is_u64() && last["added_ms_max"].is_u64(),
        "{last}"
    );
    assert!(buckets[58]["added_ms_avg"].is_null());
    assert_eq!(last["added_count"], 1, "one response: {last}");
    assert_eq!(last["added_ms_sum"], last["added_ms_avg"]);
    assert!(
        last.get("pool_hits").is_none(),
        "the pool is the operator's"
    );
    assert!(mine["now"].get("pool").is_none());
    assert_eq!(mine["now"]["conversations"], 2, "{mine}");
    // A bucket starts on its ten seconds (Unix ms).
    let (a, b) = (
        buckets[58]["at_ms"].as_u64().unwrap(),
        last["at_ms"].as_u64().unwrap(),
    );
    assert_eq!(b - a, 10_000);

    let theirs = stats(&mut sim, "bob");
    let turns: u64 = (theirs["buckets"].as_array().unwrap().iter())
        .map(|b| b["turns"].as_u64().unwrap())
        .sum();
    assert_eq!((turns, &theirs["now"]["conversations"]), (1, &json!(1)));
    let all = stats(&mut sim, "root");
    let turns: u64 = (all["buckets"].as_array().unwrap().iter())
        .map(|b| b["turns"].as_u64().unwrap())
        .sum();
    assert_eq!(turns, 3);
    assert!(all["now"]["pool"].is_object(), "{all}");
    assert!(all["buckets"][59]["pool_misses"].is_u64());
    assert_eq!(console(&mut sim, "nobody", "/v1/stats").0, 401);

    // Ten minutes on, the old buckets are gone.
    sim.advance(600_000);
    let later = stats(&mut sim, "alice");
    let turns: u64 = (later["buckets"].as_array().unwrap().iter())
        .map(|b| b["turns"].as_u64().unwrap())
        .sum();
    assert_eq!(turns, 0);
}

#[test]
fn the_console_lists_held_client_calls_with_their_deadlines() {
    let mut sim = Sim::new(GatewayConfig {
        console: true,
        limits: ccwire_core::gateway::Limits {
            held_call_timeout_ms: 30_000,
            ..ccwire_core::gateway::Limits::default()
        },
        ..GatewayConfig::default()
    });
    let ask = json!([{"role": "user", "content": "lookup: paris"}]);
    sim.send(Api::Anthropic, "", anthropic(ask, false));
    sim.advance(2_000);
    let list = console_json(&mut sim, "", "/v1/conversations");
    let listed = &list["data"][0];
    assert_eq!(listed["state"], "waiting_for_client_tool", "{listed}");
    assert_eq!(listed["held_tool_calls"], 1);
    let held = &listed["held"][0];
    assert_eq!(held["tool_use_id"], "toolu_1");
    let (since, deadline) = (
        held["since_ms"].as_u64().unwrap(),
        held["deadline_ms"].as_u64().unwrap(),
    );
    assert_eq!(deadline - since, 30_000, "{held}");
}

/// Several Managed Agents sessions whose tool confirmations and several conversations whose
/// held calls all fall due at one instant, run twice: the same inputs give the same outputs,
/// byte for byte, in the same order (no map's iteration order decides what comes first).
#[test]
fn the_same_inputs_give_the_same_outputs_when_many_deadlines_fall_together() {
    fn scenario() -> Vec<String> {
        let mut sim = Sim::new(GatewayConfig {
            enabled_tools: vec!["Bash".to_owned()],
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
        for _ in 0..6 {
            let session = new_session(&mut sim, agent.clone(), json!({}));
            let events = format!("/v1/sessions/{}/events", session["id"].as_str().unwrap());
            let say = json!({"events": [{"type": "user.message",
                "content": [{"type": "text", "text": "bash: ls"}]}]});
            managed(&mut sim, "alice", "POST", &events, say);
        }
        for (tenant, key) in [("alice", "a"), ("bob", "b"), ("alice", "c"), ("bob", "d")] {
            let ask = json!([{"role": "user", "content": format!("lookup: {key}")}]);
            sim.send(Api::Anthropic, tenant, anthropic(ask, false));
        }
        assert_eq!(sim.gateway.held_count(), 4);
        // Every confirmation's and every held call's deadline passes in one step.
        sim.advance(10 * 60 * 1000);
        assert_eq!(sim.gateway.held_count(), 0);
        sim.trace
    }
    let (one, two) = (scenario(), scenario());
    assert_eq!(one.len(), two.len());
    for (i, (a, b)) in one.iter().zip(&two).enumerate() {
        assert_eq!(a, b, "line {i} of the trace differs");
    }
}
