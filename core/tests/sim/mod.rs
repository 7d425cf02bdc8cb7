//! The gateway engine in simulation, the harness the `gateway_sim*` tests share: clients,
//! CLIs and a clock driven in one thread, time jumping from deadline to deadline. Each CLI is
//! the fake of `tests/src/fake_cli.rs`, the one the `fake-claude` binary runs: it speaks the
//! wire as CLI 2.1.330 does in the corpus (partial messages, held `tools/call`s, permission
//! prompts, interrupts).
#![allow(dead_code, unused_imports)] // each test file uses its own part of it

pub use std::collections::{BTreeMap, VecDeque};

pub use ccwire_core::api::Api;
pub use ccwire_core::gateway::usage::{Tally, UsageRow, Window};
pub use ccwire_core::gateway::{
    tenant_id, Admission, CliSpec, ConversationRecord, Gateway, GatewayConfig, GatewayOutput,
    HttpHead, Limits, RecordState, RequestId, RouteKey, SessionId, StoreAnswer, StoreAsk,
    HELD_CALL_TIMEOUT_TEXT,
};
pub use serde_json::{json, Value};

// ---- a fake CLI -------------------------------------------------------------------------

// The fake CLI the `fake-claude` binary runs too: one file, included as it is (the core cannot
// depend on `ccwire-tests`, which depends on it).
#[path = "../../../tests/src/fake_cli.rs"]
mod fake_cli;

pub use fake_cli::user_text;

/// A session's fake CLI: the shared fake (`tests/src/fake_cli.rs`), and every line written to
/// its stdin. A line it does not expect fails the test.
#[derive(Debug)]
pub struct SimCli {
    /// Every line written to its stdin.
    pub stdin: Vec<Value>,
    pub cli: fake_cli::FakeCli,
}

impl SimCli {
    /// A fake CLI started with `args`, as the simulation's: it lists the model `sonnet`, and
    /// mirrors only the prompts, to transcripts under `/home/.claude/projects/-work`.
    pub fn new(args: &[String]) -> SimCli {
        let config = fake_cli::Config {
            model: ("sonnet", "Sonnet (fake)"),
            projects_dir: "/home/.claude/projects/-work".to_owned(),
            transcript: fake_cli::Transcript::Prompts,
        };
        SimCli {
            stdin: Vec::new(),
            cli: fake_cli::FakeCli::new(config, args),
        }
    }

    /// Takes what the host wrote at `now`, returns what the CLI prints.
    pub fn write(&mut self, now: u64, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        for line in String::from_utf8(bytes.to_vec()).unwrap().lines() {
            let message: Value = serde_json::from_str(line).expect("the host writes JSON lines");
            self.stdin.push(message);
            out.extend(self.cli.handle_line(now, line));
            assert!(
                self.cli.unexpected.is_empty(),
                "the fake CLI got a line it does not expect: {:?}",
                self.cli.unexpected
            );
        }
        out
    }
}

// ---- the harness ------------------------------------------------------------------------

/// A response as the client received it.
#[derive(Debug, Default, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub ended: bool,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    pub fn text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap()
    }
}

/// The gateway, its CLIs and its clients on one clock.
pub struct Sim {
    pub now: u64,
    pub gateway: Gateway,
    pub clis: BTreeMap<SessionId, SimCli>,
    pub specs: BTreeMap<SessionId, CliSpec>,
    pub closed: Vec<SessionId>,
    /// Directories the gateway asked to delete, with how many sessions were closed before.
    pub removed: Vec<(String, usize)>,
    pub responses: BTreeMap<RequestId, Response>,
    pub next_request: RequestId,
    /// Every input and output in order, one JSON object each (`{"in": …}` / `{"out": …}`): the
    /// scenario the npm package's Gateway replays to show it makes the same bytes.
    pub trace: Vec<String>,
    /// Sessions whose CLI prints nothing until released (to stall a start).
    pub muted: Vec<SessionId>,
    /// Spawns to refuse.
    pub fail_spawns: bool,
    /// The session store, when the gateway keeps one: transcripts by conversation id,
    /// records by (tenant, hash).
    pub store: Option<SimStore>,
}

#[derive(Debug, Default)]
pub struct SimStore {
    pub transcripts: BTreeMap<String, Vec<Value>>,
    pub records: BTreeMap<(String, String), ConversationRecord>,
    pub saves: Vec<ConversationRecord>,
    pub responses: BTreeMap<(String, String), String>,
    /// The Managed Agents API's resources: (tenant, kind, id) → JSON.
    pub managed: BTreeMap<(String, String, String), String>,
    /// The store is down: records are not kept (a response waiting for one fails), or not
    /// answered at all (`Some(false)`: a store that hangs).
    pub down: Option<bool>,
    /// The bytes each tenant's transcripts take (each line and its newline), as a store
    /// counts them for its quota.
    pub usage: BTreeMap<String, u64>,
    /// What keys used: (day, tenant, model) → figures.
    pub metered: BTreeMap<(String, String, String), Tally>,
    /// The rate-limit windows kept.
    pub windows: Vec<Window>,
    /// The tenant keys' records, by id.
    pub keys: BTreeMap<String, String>,
}

impl Sim {
    pub fn new(config: GatewayConfig) -> Sim {
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

    pub fn default() -> Sim {
        Sim::new(GatewayConfig::default())
    }

    /// Sends a request; runs until everything is quiet; returns its id.
    pub fn send(&mut self, api: Api, tenant: &str, body: Value) -> RequestId {
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
    pub fn http(
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

    pub fn response(&self, id: RequestId) -> &Response {
        &self.responses[&id]
    }

    /// Carries out the gateway's outputs and feeds back what the CLIs print, until quiet.
    pub fn run(&mut self) {
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
                        let mut cli = SimCli::new(&spec.args);
                        if let Some(results) = rerun_results(&spec) {
                            cli.cli.go_on_from(results);
                        }
                        self.clis.insert(session, cli);
                        self.specs.insert(session, spec);
                    }
                    GatewayOutput::Write { session, bytes } => {
                        let cli = self.clis.get_mut(&session).expect("written after spawn");
                        for l in cli.write(self.now, &bytes) {
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
                        let added: usize = entries.iter().map(|e| e.get().len() + 1).sum();
                        let used = store.usage.entry(key.tenant.clone()).or_default();
                        *used += added as u64;
                        let answer = StoreAnswer::Usage {
                            tenant: key.tenant,
                            bytes: *used,
                        };
                        self.gateway.handle_store(self.now, answer);
                    }
                    GatewayOutput::Store(StoreAsk::Usage { tenant }) => {
                        let store = self.store.as_ref().expect("a store");
                        let bytes = store.usage.get(&tenant).copied().unwrap_or(0);
                        let answer = StoreAnswer::Usage { tenant, bytes };
                        self.gateway.handle_store(self.now, answer);
                    }
                    GatewayOutput::Store(StoreAsk::Save { record, request }) => {
                        let store = self.store.as_mut().expect("a store");
                        let answer = match (store.down, request) {
                            (Some(false), _) => None,
                            (Some(true), request) => {
                                request.map(|request| StoreAnswer::NotKept { request })
                            }
                            (None, request) => {
                                store.records.retain(|_, r| r.key != record.key);
                                let at = (record.key.tenant.clone(), record.hash.clone());
                                store.records.insert(at, record.clone());
                                store.saves.push(record);
                                request.map(|request| StoreAnswer::Kept { request })
                            }
                        };
                        if let Some(answer) = answer {
                            self.gateway.handle_store(self.now, answer);
                        }
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
                        request,
                        tenant,
                        kind,
                        id,
                        json,
                    }) => {
                        let store = self.store.as_mut().expect("a store");
                        let answer = match store.down {
                            Some(false) => None,
                            Some(true) => request.map(|request| StoreAnswer::NotKept { request }),
                            None => {
                                match json {
                                    Some(json) => store.managed.insert((tenant, kind, id), json),
                                    None => store.managed.remove(&(tenant, kind, id)),
                                };
                                request.map(|request| StoreAnswer::Kept { request })
                            }
                        };
                        if let Some(answer) = answer {
                            self.gateway.handle_store(self.now, answer);
                        }
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
                    GatewayOutput::Store(StoreAsk::AddUsage {
                        tenant,
                        day,
                        model,
                        tally,
                    }) => {
                        let store = self.store.as_mut().expect("a store");
                        let row = store.metered.entry((day, tenant, model)).or_default();
                        row.add(&tally);
                    }
                    GatewayOutput::Store(StoreAsk::KeepKey { request, id, json }) => {
                        let store = self.store.as_mut().expect("a store");
                        let kept = store.down.is_none();
                        if store.down == Some(false) {
                            // A store that hangs: its answer comes when a test gives it.
                            continue;
                        }
                        if kept {
                            match json {
                                Some(json) => store.keys.insert(id, json),
                                None => store.keys.remove(&id),
                            };
                        }
                        if let Some(request) = request {
                            let answer = match kept {
                                true => StoreAnswer::Kept { request },
                                false => StoreAnswer::NotKept { request },
                            };
                            self.gateway.handle_store(self.now, answer);
                        }
                    }
                    GatewayOutput::Store(StoreAsk::KeepWindow { window }) => {
                        let store = self.store.as_mut().expect("a store");
                        let same =
                            |w: &Window| w.credential == window.credential && w.kind == window.kind;
                        store.windows.retain(|w| !same(w));
                        store.windows.push(window);
                    }
                    GatewayOutput::Store(StoreAsk::ReadUsage {
                        request,
                        tenant,
                        from,
                        to,
                    }) => {
                        let store = self.store.as_ref().expect("a store");
                        let rows = (store.metered.iter())
                            .filter(|((day, key, _), _)| {
                                (from.as_str()..=to.as_str()).contains(&day.as_str())
                                    && tenant.as_ref().is_none_or(|t| t == key)
                            })
                            .map(|((day, key, model), tally)| UsageRow {
                                key: key.clone(),
                                day: day.clone(),
                                model: model.clone(),
                                tally: *tally,
                            })
                            .collect();
                        let read = store.down.is_none().then(|| (rows, store.windows.clone()));
                        let answer = StoreAnswer::UsageRead {
                            request,
                            tenant,
                            read,
                        };
                        self.gateway.handle_store(self.now, answer);
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
    pub fn advance(&mut self, ms: u64) {
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

    pub fn exit(&mut self, session: SessionId, code: i32) {
        self.input(
            json!({"op": "exit", "now": self.now, "session": session, "code": code,
                          "signal": null, "stderr": "boom"}),
        );
        self.gateway
            .handle_exit(self.now, session, Some(code), None, "boom");
        self.run();
    }

    pub fn gone(&mut self, request: RequestId) {
        self.input(json!({"op": "client_gone", "now": self.now, "request": request}));
        self.gateway.handle_client_gone(self.now, request);
        self.run();
    }

    pub fn input(&mut self, input: Value) {
        self.trace.push(json!({"in": input}).to_string());
    }

    pub fn cli(&self, session: SessionId) -> &SimCli {
        &self.clis[&session]
    }
}

/// The tool results a CLI started with `CLAUDE_CODE_RESUME_INTERRUPTED_TURN` goes on from:
/// those its written transcript ends with.
fn rerun_results(spec: &CliSpec) -> Option<Vec<(String, String, bool)>> {
    use ccwire_core::conversation::Block;
    let rerun =
        (spec.env.iter()).any(|(k, v)| k == "CLAUDE_CODE_RESUME_INTERRUPTED_TURN" && v == "1");
    let written = spec.resume.as_ref()?.written.as_ref()?;
    let results = (written.messages.iter().rev())
        .take_while(|m| {
            m.content
                .iter()
                .all(|b| !matches!(b, Block::ToolUse { .. }))
        })
        .flat_map(|m| m.content.iter().rev())
        .filter_map(|b| match b {
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                let text = (content.iter())
                    .filter_map(|c| match c {
                        Block::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect::<String>();
                Some((tool_use_id.clone(), text, *is_error))
            }
            _ => None,
        })
        .collect::<Vec<_>>();
    (rerun && !results.is_empty()).then(|| results.into_iter().rev().collect())
}

pub fn tools() -> Value {
    json!([{"name": "lookup", "description": "Look a key up.",
            "input_schema": {"type": "object", "properties": {"key": {"type": "string"}}}}])
}

pub fn anthropic(messages: Value, stream: bool) -> Value {
    json!({"model": "sonnet", "max_tokens": 100, "stream": stream, "tools": tools(),
           "messages": messages})
}

/// A one-call conversation `ask` continued: the model's call of `lookup` for `key` (the fake
/// CLI's first call, `toolu_1`) and the client's `result`.
pub fn with_result(ask: &Value, key: &str, result: &str) -> Vec<Value> {
    let mut messages = ask.as_array().unwrap().clone();
    messages.push(json!({"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"key": key}}]}));
    messages.push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": result}]}));
    messages
}

/// The SSE `data:` payloads of a body.
pub fn events(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

// ---- helpers the tests share ---------------------------------------------------------------

/// Many conversations, clients and CLIs interleaved over an hour of simulated time.
pub fn many(seed: u64) -> (Vec<String>, usize) {
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

pub fn stall(sim: &mut Sim, tenant: &str) -> RequestId {
    sim.send(
        Api::Anthropic,
        tenant,
        anthropic(json!([{"role": "user", "content": "stall"}]), true),
    )
}

pub fn spawns(sim: &Sim) -> usize {
    sim.trace
        .iter()
        .filter(|l| l.contains(r#""type":"spawn""#))
        .count()
}

pub fn approvals_sim() -> Sim {
    Sim::new(GatewayConfig {
        approvals: true,
        enabled_tools: vec!["Bash".to_owned()],
        approval_timeout_ms: 60_000,
        unix_epoch_ms: 1_800_000_000_000,
        ..GatewayConfig::default()
    })
}

pub fn bash(sim: &mut Sim, tenant: &str, command: &str) -> RequestId {
    let body = json!({"model": "sonnet", "max_tokens": 100, "stream": true,
                      "messages": [{"role": "user", "content": format!("bash: {command}")}]});
    sim.send(Api::Anthropic, tenant, body)
}

pub fn answer(sim: &mut Sim, tenant: &str, id: &str, body: Value) -> Result<Value, u16> {
    let result = sim
        .gateway
        .answer_approval(sim.now, tenant, id, body.to_string().as_bytes())
        .map_err(|e| e.status());
    sim.run();
    result
}

pub fn with_store(config: GatewayConfig) -> Sim {
    let mut sim = Sim::new(GatewayConfig {
        store: true,
        ..config
    });
    sim.store = Some(SimStore::default());
    sim
}

pub const JSON: (&str, &str) = ("content-type", "application/json");

/// A request of the Managed Agents API through the HTTP face, as tenant `key`: its response.
pub fn managed(sim: &mut Sim, key: &str, method: &str, path: &str, body: Value) -> (u16, Value) {
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
pub fn with_keys(store: bool) -> Sim {
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
pub fn new_session(sim: &mut Sim, agent: Value, extra: Value) -> Value {
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

/// The types of session `id`'s events after the first `skip`.
pub fn event_types(sim: &mut Sim, id: &str, skip: usize) -> (Vec<String>, Vec<Value>) {
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

/// A `GET` of the console's view with `key` that answers 200: its JSON.
pub fn console_json(sim: &mut Sim, key: &str, path: &str) -> Value {
    let (status, body, _) = console(sim, key, path);
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// A `GET` of the console's view with `key` (`Bearer`): its status and body.
pub fn console(sim: &mut Sim, key: &str, path: &str) -> (u16, String, RequestId) {
    let auth = format!("Bearer {key}");
    let id = sim
        .http("GET", path, &[("authorization", auth.as_str())], "")
        .expect("admitted");
    let response = sim.response(id);
    (response.status, response.text(), id)
}
