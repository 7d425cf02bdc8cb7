//! Driver mode against the corpus: every transcript is driven again through the session's
//! commands. Each line the host wrote in the recording must come out of the session as the same
//! JSON (host request ids aside), MCP handshakes must be answered by the session itself, and the
//! chunks must equal the observer replay of the recording.

mod common;

use std::collections::BTreeMap;

use ccwire_core::{
    Chunk, HookMatcher, McpCallResult, McpServer, McpTool, PermissionDecision, Session,
    SessionConfig, UserMessage,
};
use common::{corpus, drain, lines, to_jsonl, Line};
use serde_json::{json, Map, Value};

/// The in-process MCP servers of a recording, rebuilt from its `tools/list` answers.
fn servers_of(recorded: &[Line]) -> Vec<McpServer> {
    let mut list_requests: BTreeMap<String, String> = BTreeMap::new();
    let mut servers: Vec<McpServer> = Vec::new();
    for line in recorded {
        let m = &line.msg;
        if line.dir == "out" && m["request"]["message"]["method"] == "tools/list" {
            let server = m["request"]["server_name"].as_str().unwrap().to_owned();
            list_requests.insert(m["request_id"].as_str().unwrap().to_owned(), server);
        }
        if line.dir == "in" && m["type"] == "control_response" {
            let id = m["response"]["request_id"].as_str().unwrap_or_default();
            let Some(server) = list_requests.get(id) else {
                continue;
            };
            if servers.iter().any(|s| &s.name == server) {
                continue;
            }
            let tools = &m["response"]["response"]["mcp_response"]["result"]["tools"];
            let tools: Vec<McpTool> = serde_json::from_value(tools.clone()).unwrap();
            let mut listed = McpServer::new(server.clone());
            listed.tools = tools;
            servers.push(listed);
        }
    }
    servers
}

struct Drive {
    session: Session,
    chunks: Vec<Chunk>,
    /// Host → CLI lines the session wrote that no recorded line has matched yet.
    unmatched_writes: Vec<Value>,
    /// Recorded host request id → the id the session chose.
    ids: BTreeMap<String, String>,
    /// Open CLI requests by id: the chunk that announced them.
    open: BTreeMap<String, Chunk>,
}

impl Drive {
    fn collect(&mut self) {
        let (chunks, writes) = drain(&mut self.session);
        for c in &chunks {
            match c {
                Chunk::PermissionRequest { request_id, .. }
                | Chunk::HookRequest { request_id, .. }
                | Chunk::McpToolCall { request_id, .. } => {
                    self.open.insert(request_id.clone(), c.clone());
                }
                _ => {}
            }
        }
        self.chunks.extend(chunks);
        self.unmatched_writes.extend(writes);
    }

    /// Runs the command that reproduces a recorded host line; false when the session rightly
    /// writes nothing (an answer to a call the CLI had already cancelled).
    fn command(&mut self, name: &str, now: u64, msg: &Value) -> bool {
        let s = &mut self.session;
        match msg["type"].as_str().unwrap() {
            "user" => {
                let mut extra: Map<String, Value> = msg.as_object().unwrap().clone();
                for k in ["type", "message", "parent_tool_use_id", "uuid", "priority"] {
                    extra.remove(k);
                }
                let message = UserMessage {
                    content: msg["message"]["content"].clone(),
                    uuid: msg["uuid"].as_str().map(str::to_owned),
                    priority: msg["priority"].as_str().map(str::to_owned),
                    extra,
                    // The recorded host wrote its lines as typed text.
                    typed: true,
                };
                s.send_user_message(now, message).unwrap();
            }
            "control_request" => {
                let recorded_id = msg["request_id"].as_str().unwrap().to_owned();
                let mut request = msg["request"].as_object().unwrap().clone();
                let subtype = request.remove("subtype").unwrap();
                let id = if subtype == "initialize" {
                    let hooks = hook_matchers(request.remove("hooks").unwrap_or(Value::Null));
                    s.initialize(now, &hooks, request).unwrap().0
                } else {
                    s.send_control(now, subtype.as_str().unwrap(), request)
                        .unwrap()
                };
                self.ids.insert(recorded_id, id);
            }
            "control_response" => {
                let response = &msg["response"];
                let id = response["request_id"].as_str().unwrap();
                let Some(open) = self.open.remove(id) else {
                    // An MCP handshake answer: the session wrote it already.
                    return true;
                };
                if response["subtype"] == "error" {
                    let error = response["error"].as_str().unwrap();
                    assert_eq!(
                        s.respond_error(now, id, error),
                        Ok(ccwire_core::Delivery::Sent)
                    );
                    return true;
                }
                let payload = response["response"].clone();
                let delivery = match open {
                    Chunk::PermissionRequest { .. } => {
                        let decision = if payload["behavior"] == "allow" {
                            PermissionDecision::Allow {
                                updated_input: Some(payload["updatedInput"].clone()),
                                updated_permissions: payload["updatedPermissions"]
                                    .as_array()
                                    .cloned()
                                    .unwrap_or_default(),
                            }
                        } else {
                            PermissionDecision::Deny {
                                message: payload["message"].as_str().unwrap().to_owned(),
                                interrupt: payload["interrupt"] == true,
                            }
                        };
                        s.respond_permission(now, id, decision)
                    }
                    Chunk::HookRequest { .. } => s.respond_hook(now, id, payload),
                    Chunk::McpToolCall { .. } => {
                        let result = &payload["mcp_response"]["result"];
                        let result: McpCallResult = serde_json::from_value(result.clone()).unwrap();
                        s.respond_mcp(now, id, result)
                    }
                    other => panic!("{name}: unexpected open request {other:?}"),
                };
                let delivery = delivery.unwrap_or_else(|e| panic!("{name}: answer to {id}: {e}"));
                if delivery == ccwire_core::Delivery::Dropped {
                    let cancelled = self.chunks.iter().any(|c| {
                        matches!(c, Chunk::McpToolCancelled { request_id, .. } if request_id == id)
                    });
                    assert!(
                        cancelled,
                        "{name}: answer to {id} dropped, but it was not cancelled"
                    );
                    return false;
                }
            }
            other => panic!("{name}: no command writes a {other} line"),
        }
        true
    }

    /// Checks that the session wrote what the recording shows.
    fn expect_written(&mut self, name: &str, recorded: &Value) {
        let want = self.normalize(recorded.clone());
        let pos = self
            .unmatched_writes
            .iter()
            .position(|w| same_line(w, &want))
            .unwrap_or_else(|| {
                panic!(
                    "{name}: the session did not write\n  {want}\nit wrote\n  {:?}",
                    self.unmatched_writes
                )
            });
        self.unmatched_writes.remove(pos);
    }

    fn normalize(&self, mut msg: Value) -> Value {
        if let Some(id) = msg["request_id"].as_str().and_then(|id| self.ids.get(id)) {
            msg["request_id"] = json!(id);
        }
        msg
    }
}

/// Hook matchers as the recording registered them, in callback-id order.
fn hook_matchers(hooks: Value) -> Vec<HookMatcher> {
    let mut matchers = Vec::new();
    for (event, entries) in hooks.as_object().into_iter().flatten() {
        for entry in entries.as_array().unwrap() {
            let n: usize = entry["hookCallbackIds"][0].as_str().unwrap()[5..]
                .parse()
                .unwrap();
            matchers.push((
                n,
                HookMatcher {
                    event: event.clone(),
                    matcher: entry["matcher"].as_str().map(str::to_owned),
                    timeout_s: entry["timeout"].as_u64(),
                },
            ));
        }
    }
    matchers.sort_by_key(|(n, _)| *n);
    matchers.into_iter().map(|(_, m)| m).collect()
}

/// Two host lines are the same message; MCP handshake answers are compared by what a client
/// relies on (id, tools), since servers may word their capabilities differently.
fn same_line(written: &Value, recorded: &Value) -> bool {
    let w = &written["response"]["response"]["mcp_response"];
    let r = &recorded["response"]["response"]["mcp_response"];
    if !r.is_null() && r["result"]["protocolVersion"].is_string() {
        return written["response"]["request_id"] == recorded["response"]["request_id"]
            && w["id"] == r["id"]
            && w["result"]["protocolVersion"] == r["result"]["protocolVersion"]
            && w["result"]["serverInfo"]["name"] == r["result"]["serverInfo"]["name"];
    }
    written == recorded
}

#[test]
fn driving_every_transcript_writes_the_recorded_lines_and_replays_alike() {
    for (name, bytes) in corpus() {
        let recorded = lines(&bytes);
        let config = SessionConfig {
            mcp_servers: servers_of(&recorded),
            ..SessionConfig::default()
        };
        let mut drive = Drive {
            session: Session::driver(config),
            chunks: Vec::new(),
            unmatched_writes: Vec::new(),
            ids: BTreeMap::new(),
            open: BTreeMap::new(),
        };
        let mut now = 0;
        for line in &recorded {
            now = line.t_ms;
            match line.dir.as_str() {
                "out" => {
                    let mut text = line.raw.clone();
                    for (recorded_id, id) in &drive.ids {
                        text = text.replace(recorded_id.as_str(), id);
                    }
                    text.push('\n');
                    drive.session.handle_stdout(now, text.as_bytes());
                }
                "in" => {
                    let written = drive.command(&name, now, &line.msg);
                    drive.collect();
                    if written {
                        drive.expect_written(&name, &line.msg);
                    }
                }
                _ => {}
            }
            drive.collect();
        }
        drive.session.handle_stdout_eof(now);
        drive.collect();
        assert!(
            drive.unmatched_writes.is_empty(),
            "{name}: the session wrote lines the recording does not have: {:?}",
            drive.unmatched_writes
        );
        // The chunks equal the observer replay, with the session's own request ids.
        let mut observed = to_jsonl(&ccwire_core::replay(&bytes));
        for (recorded_id, id) in &drive.ids {
            observed = observed.replace(recorded_id.as_str(), id);
        }
        let live = to_jsonl(&drive.chunks);
        for (i, (a, b)) in live.lines().zip(observed.lines()).enumerate() {
            assert_eq!(
                a, b,
                "{name}: chunk {i} differs between driver and observer"
            );
        }
        assert_eq!(live.lines().count(), observed.lines().count(), "{name}");
    }
}
