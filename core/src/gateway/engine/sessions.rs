//! The Managed Agents API's sessions (`/v1/sessions`): an agent's conversation with its event
//! log, run by the gateway's own machinery. Each turn of a session is a Messages request the
//! gateway makes of itself (the agent's system prompt, model and custom tools; the session's
//! history), so a session's CLI is found, held and resumed like any conversation's; the
//! turn's answer becomes the API's events (`agent.message`, `agent.thinking`,
//! `agent.custom_tool_use`, `span.model_request_*`, `session.status_*`, `session.error`), kept
//! in the session's log and sent to its streams.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::agent_tools::{Permission, SessionTools, ToolName};
use super::approvals::sse;
use super::managed_api::{invalid, json_object, not_found, page, param, Refusal};
use super::prepared::{PreparedRequest, SessionTurn};
use super::StoreAsk;
use super::{tenant_id, Gateway, GatewayOutput, HttpHead, RequestId, Watch};
use crate::api::Api;
use crate::gateway::SessionId;
use crate::session::PermissionDecision;
use crate::{Chunk, Timestamp};

/// The first id of the requests the gateway makes of itself for sessions' turns (far above
/// any a host numbers its own with).
const TURNS_FROM: RequestId = 1 << 62;

/// Every session, by id.
#[derive(Debug, Default)]
pub(super) struct AgentSessions {
    by_id: BTreeMap<String, AgentSession>,
    /// Each turn in flight: its session.
    turns: BTreeMap<RequestId, String>,
    next_turn: u64,
    next: u64,
}

#[derive(Debug)]
struct AgentSession {
    tenant: String,
    /// The order it was made in, among its tenant's.
    order: u64,
    /// The session as the API shows it (`status`, `usage`… kept up to date).
    json: Value,
    /// The Messages request fields of its turns: model, system, tools (the custom tools).
    request: Value,
    events: Vec<Value>,
    /// The conversation so far, as Messages API messages.
    history: Vec<Value>,
    /// User content sent while a turn runs, for the next one.
    queued: Vec<Value>,
    /// Custom tool calls waiting for results: (event id, tool_use id), and the results so far.
    waiting: Vec<(String, String)>,
    results: Vec<Value>,
    running: bool,
    /// When a turn its CLI was not ready for is tried again.
    retry_at: Option<crate::Timestamp>,
    /// The agent's tools its CLI runs (from the agent's snapshot and the gateway's settings).
    tools: SessionTools,
    /// The running turn as its CLI streams it.
    progress: Progress,
}

/// The previews of events being produced that a stream opted into (`event_deltas`): they go
/// to that stream only, never into the session's log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Previews {
    /// `agent.message`: an `event_start`, then the text as `event_delta`s.
    message: bool,
    /// `agent.thinking`: an `event_start` when thinking begins.
    thinking: bool,
}

impl Previews {
    /// The previews a stream's query asks for: `event_deltas` (repeated, `[]`-suffixed or
    /// comma-separated); types it does not know are left out (previews are best-effort).
    fn of(params: &[(String, String)]) -> Previews {
        let mut previews = Previews::default();
        let asked = (params.iter())
            .filter(|(k, _)| k == "event_deltas")
            .flat_map(|(_, v)| v.split(','));
        for kind in asked {
            match kind.trim() {
                "agent.message" => previews.message = true,
                "agent.thinking" => previews.thinking = true,
                _ => {}
            }
        }
        previews
    }
}

/// A turn's progress as its CLI streams it (not kept in the store: a turn the gateway's end
/// cuts short is not continued).
#[derive(Debug, Default)]
struct Progress {
    /// Text of the model message streaming, not logged yet.
    said: String,
    /// The id the `agent.message` of that text will carry, once it has a preview.
    said_id: Option<String>,
    /// Whether the message streaming has its `agent.thinking` logged.
    thought: bool,
    /// The agent's tool calls: the CLI's tool_use id → the event's id and the tool.
    calls: BTreeMap<String, (String, ToolName)>,
    /// Calls waiting for the user's `user.tool_confirmation`.
    confirming: Vec<Confirming>,
    /// The model request whose `span.model_request_start` is logged and its end not yet.
    span: Option<Span>,
}

/// A model request of a turn: its `span.model_request_start` event, its message (once it
/// streams) and the usage reported so far.
#[derive(Debug)]
struct Span {
    start: String,
    message: Option<String>,
    usage: Map<String, Value>,
}

/// A call of the agent's tools waiting for the user's confirmation: the CLI's permission
/// request.
#[derive(Debug)]
struct Confirming {
    /// The call's event (`agent.tool_use` or `agent.mcp_tool_use`).
    event: String,
    /// The CLI and its control request.
    cli: SessionId,
    request_id: String,
    /// When it is denied for want of an answer.
    deadline: Timestamp,
}

/// How long a turn waits before it is tried again when the session's CLI is still settling an
/// interrupted turn (ms).
const RETRY_MS: u64 = 300;

impl AgentSessions {
    /// The earliest time a session's turn is due again, or a confirmation it waits for is
    /// given up.
    pub(super) fn next_retry(&self) -> Option<crate::Timestamp> {
        let confirms =
            (self.by_id.values()).flat_map(|s| s.progress.confirming.iter().map(|c| c.deadline));
        (self.by_id.values().filter_map(|s| s.retry_at))
            .chain(confirms)
            .min()
    }

    /// Whether a session waits for its user to confirm a call of the CLI `cli`.
    pub(super) fn confirming(&self, cli: SessionId) -> bool {
        (self.by_id.values()).any(|s| s.progress.confirming.iter().any(|c| c.cli == cli))
    }

    /// Whether `request` is a session's turn (the gateway's own request).
    pub(super) fn is_turn(&self, request: RequestId) -> bool {
        self.turns.contains_key(&request)
    }
}

/// What a request of the sessions' routes asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SessionRoute<'a> {
    AgentSessions,
    AgentSession(&'a str),
    Archive(&'a str),
    Events(&'a str),
    Stream(&'a str),
}

/// The sessions' route of a path, if it is one: its methods, whether a POST's body is JSON.
pub(super) fn parse(path: &str) -> Option<SessionRoute<'_>> {
    let id = |s: &str| !s.is_empty() && s.len() <= 128;
    let parts: Vec<&str> = path.strip_prefix("/v1/sessions")?.split('/').collect();
    Some(match parts[..] {
        [""] => SessionRoute::AgentSessions,
        ["", s] if id(s) => SessionRoute::AgentSession(s),
        ["", s, "archive"] if id(s) => SessionRoute::Archive(s),
        ["", s, "events"] if id(s) => SessionRoute::Events(s),
        ["", s, "events", "stream"] if id(s) => SessionRoute::Stream(s),
        _ => return None,
    })
}

/// The methods of a sessions' route, and whether a POST's body is JSON.
pub(super) fn methods(route: SessionRoute<'_>) -> (&'static [&'static str], bool) {
    match route {
        SessionRoute::AgentSessions | SessionRoute::Events(_) => (&["GET", "POST"][..], true),
        SessionRoute::AgentSession(_) => (&["GET", "POST", "DELETE"][..], true),
        SessionRoute::Archive(_) => (&["POST"][..], false),
        SessionRoute::Stream(_) => (&["GET"][..], false),
    }
}

/// An SSE frame of an event, named by its type (the SDKs read the name), with its id (a
/// stream reopened with `Last-Event-ID` goes on after it).
fn frame(event: &Value) -> Vec<u8> {
    let name = event["type"].as_str().unwrap_or("message");
    match event["id"].as_str() {
        Some(id) => format!("id: {id}\n{}", sse(name, event)).into_bytes(),
        None => sse(name, event).into_bytes(),
    }
}

/// The custom tools of an agent's `tools`, as Messages API tools.
fn custom_tools(agent: &Value) -> Vec<Value> {
    agent["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["type"] == "custom")
        .map(|t| {
            json!({"name": t["name"], "description": t["description"],
                   "input_schema": t["input_schema"]})
        })
        .collect()
}

/// A user event's content blocks, checked (text, image, document).
fn user_content(event: &Value) -> Result<Vec<Value>, Refusal> {
    let Value::Array(blocks) = &event["content"] else {
        return Err(invalid(
            "events: user.message.content must be an array of blocks",
        ));
    };
    for block in blocks {
        match block["type"].as_str() {
            Some("text" | "image" | "document") => {}
            other => {
                return Err(invalid(format!(
                "events: user.message.content: a {} block is not supported (text, image, document)",
                other.unwrap_or("typeless")
            )))
            }
        }
    }
    if blocks.is_empty() {
        return Err(invalid("events: user.message.content must not be empty"));
    }
    Ok(blocks.clone())
}

impl Gateway {
    /// Keeps a session (its resource, log and conversation) in the session store, when there
    /// is one; `request`'s response ends once it is kept. A session gone is forgotten there.
    fn persist_session(&mut self, tenant: &str, id: &str, request: Option<RequestId>) {
        if !self.config.store {
            return;
        }
        let json = self.agent_sessions.by_id.get(id).map(|s| {
            let waiting: Vec<Value> = s.waiting.iter().map(|(e, t)| json!([e, t])).collect();
            json!({"order": s.order, "data": {"session": s.json, "request": s.request,
                "events": s.events, "history": s.history, "queued": s.queued,
                "waiting": waiting, "results": s.results, "running": s.running}})
            .to_string()
        });
        self.outputs
            .push_back(GatewayOutput::Store(StoreAsk::Managed {
                request,
                tenant: tenant_id(tenant),
                kind: "session".to_owned(),
                id: id.to_owned(),
                json,
            }));
    }

    /// A session of `tenant` as [`persist_session`](Self::persist_session) kept it, back in
    /// memory. One whose turn the gateway's end cut short says so in its log and is idle; the
    /// message of that turn waits for the next.
    pub(super) fn restore_session(&mut self, tenant: &str, order: u64, data: &Value) {
        let Some(id) = data["session"]["id"].as_str().map(str::to_owned) else {
            return;
        };
        if self.agent_sessions.by_id.contains_key(&id) {
            return;
        }
        let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
        let waiting = list(&data["waiting"])
            .iter()
            .filter_map(|p| Some((p[0].as_str()?.to_owned(), p[1].as_str()?.to_owned())))
            .collect();
        let mut session = AgentSession {
            tenant: tenant.to_owned(),
            order,
            json: data["session"].clone(),
            request: data["request"].clone(),
            events: list(&data["events"]),
            history: list(&data["history"]),
            queued: list(&data["queued"]),
            waiting,
            results: list(&data["results"]),
            running: false,
            retry_at: None,
            tools: self.session_tools(&data["session"]["agent"]).0,
            progress: Progress::default(),
        };
        let cut = data["running"] == true;
        if cut {
            if let Some(Value::Array(content)) = session.history.pop().map(|m| m["content"].clone())
            {
                let mut again: Vec<Value> = content;
                again.append(&mut session.queued);
                session.queued = again;
            }
        }
        self.agent_sessions.by_id.insert(id.clone(), session);
        if cut {
            self.session_event(
                &id,
                json!({"type": "session.error", "error": {"type": "unknown_error",
                "message": "the gateway stopped during this turn; send a message to go on",
                "retry_status": {"type": "exhausted"}}}),
            );
            self.session_status(
                &id,
                "idle",
                Some(json!({"stop_reason": {"type": "retries_exhausted"}, "stop_details": null})),
            );
            self.persist_session(tenant, &id, None);
        }
    }

    /// Forgets `tenant`'s sessions (read again from the store on its next request).
    pub(super) fn forget_sessions(&mut self, tenant: &str) {
        let gone: Vec<String> = self
            .agent_sessions
            .by_id
            .iter()
            .filter(|(_, s)| s.tenant == tenant)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &gone {
            self.agent_sessions.by_id.remove(id);
        }
        self.agent_sessions.turns.retain(|_, id| !gone.contains(id));
    }

    /// What a session of `agent` runs of the agent's tools on this gateway, with what it
    /// leaves out (for the response's warning).
    fn session_tools(&self, agent: &Value) -> (SessionTools, Vec<String>) {
        SessionTools::of(
            agent,
            &self.config.enabled_tools,
            self.config.allow_mcp_servers,
            self.config.approvals,
        )
    }

    fn session_id(&mut self, prefix: &str) -> String {
        self.agent_sessions.next += 1;
        self.secret_id(prefix, self.agent_sessions.next)
    }

    /// A session of `tenant` (another tenant's is not found).
    fn session_of(&mut self, tenant: &str, id: &str) -> Result<&mut AgentSession, Refusal> {
        self.agent_sessions
            .by_id
            .get_mut(id)
            .filter(|s| s.tenant == tenant)
            .ok_or_else(|| not_found("session", id))
    }

    /// Adds an event (its id and time given here) to a session's log and sends it to the
    /// session's streams.
    fn session_event(&mut self, id: &str, mut event: Value) -> Value {
        // (An event a preview announced carries the id it gave.)
        let event_id = match event["id"].as_str() {
            Some(given) => given.to_owned(),
            None => self.session_id("sevt_"),
        };
        let now = self.managed_now();
        event["id"] = json!(event_id);
        if event.get("processed_at").is_none() {
            event["processed_at"] = json!(now);
        }
        let bytes = frame(&event);
        self.send_to_watches(
            |w| matches!(w, Watch::AgentSession(s, _) if s == id),
            &bytes,
        );
        if let Some(session) = self.agent_sessions.by_id.get_mut(id) {
            session.events.push(event.clone());
        }
        event
    }

    /// The CLIs that work in deleted session `id`'s own directory are closed, and the
    /// directory is deleted once they have exited (with tenant directories).
    fn discard_session_dir(&mut self, tenant: &str, id: &str) {
        let Some((dir, _)) = self.cli_dirs(tenant, Some(id)) else {
            return;
        };
        let working: Vec<crate::gateway::SessionId> = (self.lives.iter())
            .filter(|(_, live)| live.cwd.as_deref() == Some(dir.as_str()))
            .map(|(s, _)| *s)
            .collect();
        for session in working {
            self.record_closed(session, super::types::RecordState::Ended);
            self.close(self.now, session);
        }
        self.outputs
            .push_back(GatewayOutput::RemoveDir { path: dir });
    }

    /// Sends a preview frame (`event_start`, `event_delta`) to the streams of session `id`
    /// that opted into previews of this kind (`wants`); nothing is logged.
    fn preview(&mut self, id: &str, wants: fn(&Previews) -> bool, frame_of: &Value) {
        self.send_to_watches(
            |w| matches!(w, Watch::AgentSession(s, previews) if s == id && wants(previews)),
            &frame(frame_of),
        );
    }

    /// Whether a stream of session `id` wants previews of this kind.
    fn previewed(&self, id: &str, wants: fn(&Previews) -> bool) -> bool {
        (self.watchers.values()).any(
            |(w, _)| matches!(w, Watch::AgentSession(s, previews) if s == id && wants(previews)),
        )
    }

    /// The model's text of session `id`'s turn, as it streams: kept until the message is
    /// logged, and previewed (`event_start` once, then `event_delta`s) to the streams that
    /// asked.
    fn text_delta(&mut self, id: &str, text: &str) {
        let Some(session) = self.agent_sessions.by_id.get_mut(id) else {
            return;
        };
        session.progress.said.push_str(text);
        if text.is_empty() || !self.previewed(id, |p| p.message) {
            return;
        }
        let opened = (self.agent_sessions.by_id.get(id)).and_then(|s| s.progress.said_id.clone());
        let event_id = match opened {
            Some(event_id) => event_id,
            None => {
                let event_id = self.session_id("sevt_");
                if let Some(session) = self.agent_sessions.by_id.get_mut(id) {
                    session.progress.said_id = Some(event_id.clone());
                }
                let start = json!({"type": "event_start",
                    "event": {"type": "agent.message", "id": event_id}});
                self.preview(id, |p| p.message, &start);
                event_id
            }
        };
        // The message's text is its one content block.
        let delta = json!({"type": "event_delta", "event_id": event_id,
            "delta": {"type": "content_delta", "index": 0,
                      "content": {"type": "text", "text": text}}});
        self.preview(id, |p| p.message, &delta);
    }

    /// Sets a session's status (and its `updated_at`), with the event that says so.
    fn session_status(&mut self, id: &str, status: &str, extra: Option<Value>) {
        let now = self.managed_now();
        if let Some(session) = self.agent_sessions.by_id.get_mut(id) {
            session.json["status"] = json!(status);
            session.json["updated_at"] = json!(now);
        }
        let mut event = json!({"type": format!("session.status_{status}")});
        if let Some(Value::Object(extra)) = extra {
            for (k, v) in extra {
                event[k] = v;
            }
        }
        self.session_event(id, event);
    }

    /// A request of the sessions' routes, answered: `None` for a stream, kept open. What it
    /// changed is kept in the session store before the answer ends.
    pub(super) fn handle_session(
        &mut self,
        request: RequestId,
        head: &HttpHead<'_>,
        params: &[(String, String)],
        tenant: &str,
        body: &[u8],
        warnings: &mut Vec<String>,
    ) -> Option<Result<(u16, Value), Refusal>> {
        let answer = self.session_answer(request, head, params, tenant, body, warnings)?;
        if let (Ok((_, value)), "POST" | "DELETE") = (&answer, head.method) {
            let id = match parse(head.path) {
                Some(SessionRoute::AgentSessions) => value["id"].as_str().map(str::to_owned),
                Some(
                    SessionRoute::AgentSession(id)
                    | SessionRoute::Archive(id)
                    | SessionRoute::Events(id),
                ) => Some(id.to_owned()),
                _ => None,
            };
            if let Some(id) = id {
                self.persist_session(tenant, &id, Some(request));
            }
        }
        Some(answer)
    }

    fn session_answer(
        &mut self,
        request: RequestId,
        head: &HttpHead<'_>,
        params: &[(String, String)],
        tenant: &str,
        body: &[u8],
        warnings: &mut Vec<String>,
    ) -> Option<Result<(u16, Value), Refusal>> {
        let (method, route) = (head.method, parse(head.path)?);
        let object = || json_object(body);
        Some(match (method, route) {
            ("POST", SessionRoute::AgentSessions) => {
                object().and_then(|b| self.create_session(tenant, &b, warnings))
            }
            ("GET", SessionRoute::AgentSessions) => {
                let archived = param(params, "include_archived") == Some("true");
                let statuses: Vec<&str> = params
                    .iter()
                    .filter(|(k, _)| k == "statuses")
                    .map(|(_, v)| v.as_str())
                    .collect();
                let agent = param(params, "agent_id");
                let mut mine: Vec<&AgentSession> = self
                    .agent_sessions
                    .by_id
                    .values()
                    .filter(|s| s.tenant == tenant)
                    .collect();
                mine.sort_by_key(|s| s.order);
                let mut items: Vec<Value> = mine
                    .into_iter()
                    .map(|s| &s.json)
                    .filter(|s| archived || s["archived_at"].is_null())
                    .filter(|s| statuses.is_empty() || statuses.iter().any(|w| s["status"] == *w))
                    .filter(|s| agent.is_none_or(|a| s["agent"]["id"] == a))
                    .cloned()
                    .collect();
                if param(params, "order") != Some("asc") {
                    items.reverse();
                }
                page(items, params, 100).map(|mut p| {
                    p["prev_page"] = Value::Null;
                    (200, p)
                })
            }
            ("GET", SessionRoute::AgentSession(id)) => {
                self.session_of(tenant, id).map(|s| (200, s.json.clone()))
            }
            ("POST", SessionRoute::AgentSession(id)) => object().and_then(|b| {
                let now = self.managed_now();
                let session = self.session_of(tenant, id)?;
                if let Some(t) = b.get("title") {
                    match t {
                        Value::Null | Value::String(_) => session.json["title"] = t.clone(),
                        _ => return Err(invalid("title: a string or null")),
                    }
                }
                if let Some(m) = b.get("metadata").filter(|m| !m.is_null()) {
                    let current = session.json["metadata"].clone();
                    session.json["metadata"] =
                        super::managed_api::metadata(m, Some(&current), true)?;
                }
                for field in ["agent", "budget", "vault_ids"] {
                    if b.get(field).is_some_and(|v| !v.is_null()) {
                        return Err(invalid(format!(
                            "{field}: not supported by this gateway on a session"
                        )));
                    }
                }
                session.json["updated_at"] = json!(now);
                Ok((200, session.json.clone()))
            }),
            ("DELETE", SessionRoute::AgentSession(id)) => {
                self.session_of(tenant, id).map(|_| ()).map(|()| {
                    // Its turn stops, its CLI is closed and its directory deleted.
                    self.interrupt_session(id);
                    self.discard_session_dir(tenant, id);
                    self.agent_sessions.by_id.remove(id);
                    // Its streams end with the API's last word.
                    let gone = json!({"type": "session.deleted", "id": self.session_id("sevt_"),
                    "processed_at": self.managed_now()});
                    self.end_watches(
                        |w| matches!(w, Watch::AgentSession(s, _) if s == id),
                        Some(&frame(&gone)),
                    );
                    (200, json!({"id": id, "type": "session_deleted"}))
                })
            }
            ("POST", SessionRoute::Archive(id)) => {
                let now = self.managed_now();
                let first = match self.session_of(tenant, id) {
                    Ok(s) => s.json["archived_at"].is_null(),
                    Err(e) => return Some(Err(e)),
                };
                if first {
                    self.terminate_session(id);
                }
                self.session_of(tenant, id).map(|s| {
                    if first {
                        s.json["archived_at"] = json!(now);
                    }
                    (200, s.json.clone())
                })
            }
            ("GET", SessionRoute::Events(id)) => self.session_of(tenant, id).and_then(|s| {
                let types: Vec<&str> = params
                    .iter()
                    .filter(|(k, _)| k == "types")
                    .map(|(_, v)| v.as_str())
                    .collect();
                let mut items: Vec<Value> = s
                    .events
                    .iter()
                    .filter(|e| types.is_empty() || types.iter().any(|t| e["type"] == *t))
                    .cloned()
                    .collect();
                if param(params, "order") == Some("desc") {
                    items.reverse();
                }
                page(items, params, 1000).map(|p| (200, p))
            }),
            ("POST", SessionRoute::Events(id)) => {
                object().and_then(|b| self.send_events(tenant, id, &b))
            }
            ("GET", SessionRoute::Stream(id)) => {
                if let Err(e) = self.session_of(tenant, id) {
                    return Some(Err(e));
                }
                // The head at once (the SDKs wait for it), then the events as they come. A
                // stream reopened after the event it saw last goes on from there.
                let mut bytes = b": the session's events as they come\n\n".to_vec();
                if let Some(last) = head.header("last-event-id") {
                    let events = &self.agent_sessions.by_id[id].events;
                    if let Some(at) = events.iter().position(|e| e["id"] == last) {
                        for event in &events[at + 1..] {
                            bytes.extend(frame(event));
                        }
                    }
                }
                let previews = Previews::of(params);
                self.open_watch(request, Watch::AgentSession(id.to_owned(), previews), bytes);
                return None;
            }
            (method, _) => Err(Refusal {
                status: 405,
                kind: "invalid_request_error",
                message: format!("this route does not take {method}"),
                code: None,
            }),
        })
    }

    fn create_session(
        &mut self,
        tenant: &str,
        body: &Map<String, Value>,
        warnings: &mut Vec<String>,
    ) -> Result<(u16, Value), Refusal> {
        let (agent_id, version) = match body.get("agent") {
            Some(Value::String(id)) => (id.clone(), None),
            Some(v @ Value::Object(_)) if v["type"] == "agent" && v["id"].is_string() => (
                v["id"].as_str().unwrap_or_default().to_owned(),
                v["version"].as_u64(),
            ),
            Some(v @ Value::Object(_)) if v["type"] == "agent_with_overrides" => {
                return Err(invalid(
                    "agent: agent_with_overrides is not supported by this gateway yet",
                ))
            }
            _ => {
                return Err(invalid(
                    "agent: an agent id, or {\"type\": \"agent\", \"id\": …}",
                ))
            }
        };
        let agent = self.managed_agent(tenant, &agent_id, version)?;
        if !agent["archived_at"].is_null() {
            return Err(invalid(format!("agent {agent_id} is archived")));
        }
        let Some(Value::String(environment_id)) = body.get("environment_id") else {
            return Err(invalid("environment_id: required"));
        };
        let environment = self.managed_environment(tenant, environment_id)?;
        if !environment["archived_at"].is_null() {
            return Err(invalid(format!("environment {environment_id} is archived")));
        }
        for field in ["resources", "vault_ids", "budget"] {
            let empty = match body.get(field) {
                None | Some(Value::Null) => true,
                Some(Value::Array(a)) => a.is_empty(),
                Some(_) => false,
            };
            if !empty {
                return Err(invalid(format!("{field}: not supported by this gateway (the session works in the local environment)")));
            }
        }
        let title = match body.get("title") {
            None | Some(Value::Null) => Value::Null,
            Some(t @ Value::String(_)) => t.clone(),
            Some(_) => return Err(invalid("title: a string or null")),
        };
        let metadata = match body.get("metadata") {
            None | Some(Value::Null) => json!({}),
            Some(m) => super::managed_api::metadata(m, None, false)?,
        };
        let initial: Vec<Value> = match body.get("initial_events") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(events)) => events.clone(),
            Some(_) => return Err(invalid("initial_events: an array of events")),
        };
        for event in &initial {
            if event["type"] != "user.message" {
                return Err(invalid(
                    "initial_events: only user.message events are supported",
                ));
            }
            user_content(event)?;
        }
        let (tools, left_out) = self.session_tools(&agent);
        warnings.extend(left_out);
        let mut snapshot = agent.clone();
        if let Value::Object(o) = &mut snapshot {
            for k in ["created_at", "updated_at", "archived_at", "metadata"] {
                o.remove(k);
            }
        }
        let id = self.session_id("sesn_");
        let now = self.managed_now();
        let json = json!({"id": id, "type": "session", "status": "idle", "agent": snapshot,
            "environment_id": environment_id, "title": title, "metadata": metadata,
            "resources": [], "vault_ids": [], "budget": null, "outcome_evaluations": [],
            "stats": {}, "usage": {"input_tokens": 0, "output_tokens": 0,
                                   "cache_read_input_tokens": 0},
            "created_at": now, "updated_at": now, "archived_at": null});
        let mut request = json!({"model": agent["model"]["id"], "max_tokens": 32000});
        if let Some(system) = agent["system"].as_str() {
            request["system"] = json!(system);
        }
        let custom = custom_tools(&agent);
        if !custom.is_empty() {
            request["tools"] = Value::Array(custom);
        }
        let order = self.managed_order();
        self.agent_sessions.by_id.insert(
            id.clone(),
            AgentSession {
                tenant: tenant.to_owned(),
                order,
                json,
                request,
                events: Vec::new(),
                history: Vec::new(),
                queued: Vec::new(),
                waiting: Vec::new(),
                results: Vec::new(),
                running: false,
                retry_at: None,
                tools,
                progress: Progress::default(),
            },
        );
        if !initial.is_empty() {
            self.send_events(
                tenant,
                &id,
                &json!({"events": initial})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            )?;
        }
        let json = self.session_of(tenant, &id)?.json.clone();
        Ok((200, json))
    }

    /// `POST /v1/sessions/{id}/events`: user events, echoed into the log; a message or the
    /// last result a turn waits for starts the next turn.
    fn send_events(
        &mut self,
        tenant: &str,
        id: &str,
        body: &Map<String, Value>,
    ) -> Result<(u16, Value), Refusal> {
        let Some(Value::Array(events)) = body.get("events") else {
            return Err(invalid("events: an array of events"));
        };
        // Everything is checked before anything is done.
        {
            let session = self.session_of(tenant, id)?;
            if !session.json["archived_at"].is_null() {
                return Err(invalid(format!("session {id} is archived")));
            }
            for event in events {
                match event["type"].as_str() {
                    Some("user.message") => {
                        user_content(event)?;
                    }
                    Some("user.custom_tool_result") => {
                        let call = event["custom_tool_use_id"].as_str().unwrap_or_default();
                        if !session.waiting.iter().any(|(e, _)| e == call) {
                            return Err(invalid(format!(
                                "events: no custom tool call {call:?} waits for a result"
                            )));
                        }
                    }
                    Some("user.interrupt") => {}
                    Some("user.tool_confirmation") => {
                        let call = event["tool_use_id"].as_str().unwrap_or_default();
                        if !session.progress.confirming.iter().any(|c| c.event == call) {
                            return Err(invalid(format!(
                                "events: no tool call {call:?} waits for a confirmation"
                            )));
                        }
                        match (event["result"].as_str(), &event["deny_message"]) {
                            (Some("allow"), Value::Null) => {}
                            (Some("deny"), Value::Null | Value::String(_)) => {}
                            (Some("allow"), _) => {
                                return Err(invalid(
                                    "events: user.tool_confirmation.deny_message is only for a deny",
                                ))
                            }
                            _ => {
                                return Err(invalid(
                                    "events: user.tool_confirmation.result must be \"allow\" or \"deny\"",
                                ))
                            }
                        }
                    }
                    Some(
                        other @ ("user.tool_result" | "user.define_outcome" | "system.message"),
                    ) => {
                        return Err(invalid(format!(
                            "events: {other} is not supported by this gateway yet"
                        )));
                    }
                    other => return Err(invalid(format!("events: no event type {other:?}"))),
                }
            }
        }
        let mut echoed = Vec::new();
        for event in events {
            let mut kept = event.clone();
            if kept["type"] == "user.message" {
                kept["processed_at"] = Value::Null;
            }
            echoed.push(self.session_event(id, kept));
            let session = self.session_of(tenant, id)?;
            match event["type"].as_str() {
                Some("user.message") => {
                    session.queued.extend(user_content(event)?);
                }
                Some("user.interrupt") => {
                    self.interrupt_session(id);
                }
                Some("user.tool_confirmation") => {
                    let call = event["tool_use_id"].as_str().unwrap_or_default();
                    let decision = match event["result"].as_str() {
                        Some("allow") => PermissionDecision::Allow {
                            updated_input: None,
                            updated_permissions: Vec::new(),
                        },
                        _ => PermissionDecision::deny(
                            event["deny_message"]
                                .as_str()
                                .unwrap_or("The user denied this tool call.")
                                .to_owned(),
                        ),
                    };
                    self.confirm(id, call, decision);
                }
                Some("user.custom_tool_result") => {
                    let call = event["custom_tool_use_id"].as_str().unwrap_or_default();
                    if let Some(at) = session.waiting.iter().position(|(e, _)| e == call) {
                        let (_, tool_use_id) = session.waiting.remove(at);
                        let mut result = json!({"type": "tool_result", "tool_use_id": tool_use_id,
                            "content": event.get("content").cloned().unwrap_or(json!([]))});
                        if event["is_error"] == true {
                            result["is_error"] = json!(true);
                        }
                        session.results.push(result);
                    }
                }
                _ => {}
            }
        }
        self.next_turn(id);
        Ok((200, json!({"data": echoed})))
    }

    /// Logs the end of a session's model request (the span the event `start` began): with
    /// its `usage`, or as failed without one.
    fn end_model_request(&mut self, id: &str, start: &str, usage: Option<&Value>) {
        let count = |name: &str| usage.and_then(|u| u[name].as_u64()).unwrap_or(0);
        self.session_event(
            id,
            json!({"type": "span.model_request_end", "model_request_start_id": start,
                "is_error": usage.is_none(),
                "model_usage": {"input_tokens": count("input_tokens"),
                    "output_tokens": count("output_tokens"),
                    "cache_creation_input_tokens": count("cache_creation_input_tokens"),
                    "cache_read_input_tokens": count("cache_read_input_tokens")}}),
        );
    }

    /// Starts the turns due again at `now`, and denies the tool calls no one confirmed in
    /// time.
    pub(super) fn retry_turns(&mut self, now: crate::Timestamp) {
        let expired: Vec<(String, String)> = (self.agent_sessions.by_id.iter())
            .flat_map(|(id, s)| {
                (s.progress.confirming.iter())
                    .filter(|c| c.deadline <= now)
                    .map(|c| (id.clone(), c.event.clone()))
            })
            .collect();
        for (id, event) in expired {
            let decision = PermissionDecision::deny(
                "No one confirmed this tool call in time; it did not run.".to_owned(),
            );
            self.confirm(&id, &event, decision);
        }
        let due: Vec<String> = self
            .agent_sessions
            .by_id
            .iter()
            .filter(|(_, s)| s.retry_at.is_some_and(|at| at <= now))
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            self.next_turn(&id);
        }
    }

    /// `user.interrupt`: the running turn is stopped (its CLI interrupted, as when a client goes
    /// away) and the session is idle; calls waiting for results are given up. What the turn
    /// was told stays with the CLI, which takes it with the next message.
    fn interrupt_session(&mut self, id: &str) {
        // What the model said before it was stopped is logged.
        self.said(id);
        let turn = self
            .agent_sessions
            .turns
            .iter()
            .find(|(_, s)| s.as_str() == id)
            .map(|(r, _)| *r);
        let Some(session) = self.agent_sessions.by_id.get_mut(id) else {
            return;
        };
        let waited = !session.waiting.is_empty();
        if !session.running && !waited && session.retry_at.is_none() {
            return;
        }
        session.running = false;
        // The CLI settles the permission requests of the turn it stops.
        let span = std::mem::take(&mut session.progress).span;
        if session.retry_at.take().is_some() {
            // A turn waiting to be tried again is given up with what it would have said.
            session.queued.clear();
            session.results.clear();
        }
        if waited {
            // The calls' message and the message that asked for them leave the conversation.
            session.waiting.clear();
            session.results.clear();
            session.history.pop();
        }
        if turn.is_some() || waited {
            session.history.pop();
        }
        if let Some(turn) = turn {
            self.agent_sessions.turns.remove(&turn);
            let now = self.now;
            self.handle_client_gone(now, turn);
            if let Some(span) = span {
                self.end_model_request(id, &span.start, None);
            }
        }
        self.session_status(
            id,
            "idle",
            Some(json!({"stop_reason": {"type": "end_turn"}, "stop_details": null})),
        );
    }

    /// An archived session ends: a running turn is stopped, what waits is given up, the log
    /// says `session.status_terminated` and its streams end (it takes no more events).
    fn terminate_session(&mut self, id: &str) {
        self.interrupt_session(id);
        if let Some(session) = self.agent_sessions.by_id.get_mut(id) {
            session.queued.clear();
        }
        self.session_status(id, "terminated", None);
        self.end_watches(|w| matches!(w, Watch::AgentSession(s, _) if s == id), None);
    }

    /// Starts a session's next turn when it can: nothing runs, no call waits for a result,
    /// and something is to be said.
    fn next_turn(&mut self, id: &str) {
        let Some(session) = self.agent_sessions.by_id.get_mut(id) else {
            return;
        };
        if session.running
            || !session.waiting.is_empty()
            || session.retry_at.is_some_and(|at| at > self.now)
        {
            return;
        }
        session.retry_at = None;
        let mut content = std::mem::take(&mut session.results);
        content.append(&mut session.queued);
        if content.is_empty() {
            return;
        }
        session
            .history
            .push(json!({"role": "user", "content": content}));
        session.running = true;
        let mut body = session.request.clone();
        body["messages"] = Value::Array(session.history.clone());
        let tenant = session.tenant.clone();
        self.agent_sessions.next_turn += 1;
        let request = TURNS_FROM + self.agent_sessions.next_turn;
        let turn = SessionTurn {
            id: id.to_owned(),
            tools: session.tools.clone(),
        };
        session.progress = Progress::default();
        self.agent_sessions.turns.insert(request, id.to_owned());
        self.session_status(id, "running", None);
        self.open_span(id);
        let bytes = body.to_string().into_bytes();
        let prepared = super::parse_request(Api::Anthropic, &bytes)
            .map(|r| PreparedRequest::for_session(&tenant, r, turn));
        self.handle_prepared(self.now, request, Api::Anthropic, &tenant, prepared);
    }

    /// A chunk of a session's turn, as the session's events: the model's words and thinking,
    /// and the calls of the agent's tools and their results (the turn's answer, at its end,
    /// has the custom tools' calls).
    pub(super) fn turn_chunk(&mut self, request: RequestId, chunk: &Chunk) {
        let Some(id) = self.agent_sessions.turns.get(&request).cloned() else {
            return;
        };
        let Some(session) = self.agent_sessions.by_id.get_mut(&id) else {
            return;
        };
        let progress = &mut session.progress;
        match chunk {
            Chunk::TextDelta {
                text,
                parent_tool_use_id: None,
                ..
            } => self.text_delta(&id, text),
            Chunk::ThinkingDelta {
                parent_tool_use_id: None,
                ..
            }
            | Chunk::ThinkingRedacted {
                parent_tool_use_id: None,
                ..
            } if !progress.thought => {
                progress.thought = true;
                // Thinking is logged as it begins: its preview (start-only) comes just before.
                let event_id = self.session_id("sevt_");
                let start = json!({"type": "event_start",
                    "event": {"type": "agent.thinking", "id": event_id}});
                self.preview(&id, |p| p.thinking, &start);
                self.session_event(&id, json!({"type": "agent.thinking", "id": event_id}));
            }
            Chunk::MessageStart {
                message_id,
                parent_tool_use_id: None,
                usage,
                ..
            } => {
                if progress.span.is_none() {
                    // The model's next request in the turn (after a tool's result).
                    self.open_span(&id);
                }
                let span =
                    (self.agent_sessions.by_id.get_mut(&id)).and_then(|s| s.progress.span.as_mut());
                if let Some(span) = span {
                    span.message = Some(message_id.clone());
                    if let Value::Object(usage) = usage.to_value() {
                        span.usage = usage;
                    }
                }
            }
            Chunk::MessageDelta {
                message_id, usage, ..
            } => {
                let span = progress.span.as_mut();
                if let Some(span) = span.filter(|s| s.message.as_ref() == Some(message_id)) {
                    if let Value::Object(usage) = usage.to_value() {
                        span.usage.extend(usage);
                    }
                }
            }
            Chunk::MessageStop { message_id, .. } => {
                progress.thought = false;
                let ends = (progress.span.as_ref())
                    .is_some_and(|s| s.message.as_ref() == Some(message_id));
                self.said(&id);
                if ends {
                    self.close_span(&id, true);
                }
            }
            Chunk::ToolUse {
                id: use_id,
                name,
                complete: true,
                input,
                parent_tool_use_id: None,
                server: false,
                ..
            } if !name.starts_with(&format!("mcp__{}__", super::CLIENT_SERVER)) => {
                let (permission, tool) = session.tools.permission(name);
                self.said(&id);
                self.tool_use(&id, use_id, tool, input.to_value(), permission);
            }
            Chunk::ToolResult {
                id: use_id,
                content,
                is_error,
                parent_tool_use_id: None,
                server: false,
            } => {
                if let Some((event, tool)) = progress.calls.get(use_id) {
                    let result = tool.result_event(event, &content.to_value(), *is_error);
                    self.session_event(&id, result);
                }
            }
            _ => {}
        }
    }

    /// Logs the start of a model request of session `id`'s turn.
    fn open_span(&mut self, id: &str) {
        let event = self.session_event(id, json!({"type": "span.model_request_start"}));
        if let Some(session) = self.agent_sessions.by_id.get_mut(id) {
            session.progress.span = Some(Span {
                start: event["id"].as_str().unwrap_or_default().to_owned(),
                message: None,
                usage: Map::new(),
            });
        }
    }

    /// The model request of session `id` that is open, if one is, no longer open.
    fn take_span(&mut self, id: &str) -> Option<Span> {
        (self.agent_sessions.by_id.get_mut(id)).and_then(|s| s.progress.span.take())
    }

    /// Logs the end of the model request of session `id` that is open, if one is: with the
    /// usage its message reported (`ok`), or as failed.
    fn close_span(&mut self, id: &str, ok: bool) {
        if let Some(span) = self.take_span(id) {
            let usage = Value::Object(span.usage);
            self.end_model_request(id, &span.start, ok.then_some(&usage));
        }
    }

    /// Logs the text of the model's message so far as an `agent.message`.
    fn said(&mut self, id: &str) {
        let Some(session) = self.agent_sessions.by_id.get_mut(id) else {
            return;
        };
        let text = std::mem::take(&mut session.progress.said);
        let previewed = session.progress.said_id.take();
        if !text.is_empty() {
            let content = json!([{"type": "text", "text": text}]);
            let mut event = json!({"type": "agent.message", "content": content});
            if let Some(event_id) = previewed {
                // The message its preview announced.
                event["id"] = json!(event_id);
            }
            self.session_event(id, event);
        }
    }

    /// Logs a call of the agent's tools (`agent.tool_use` / `agent.mcp_tool_use`); returns
    /// its event's id.
    fn tool_use(
        &mut self,
        id: &str,
        use_id: &str,
        tool: ToolName,
        input: Value,
        permission: Permission,
    ) -> String {
        let event = self.session_event(id, tool.use_event(input, permission));
        let event_id = event["id"].as_str().unwrap_or_default().to_owned();
        if let Some(session) = self.agent_sessions.by_id.get_mut(id) {
            (session.progress.calls).insert(use_id.to_owned(), (event_id.clone(), tool));
        }
        event_id
    }

    /// A permission request of a session's CLI (`cli`, running turn `request`): answered by
    /// the agent's policy for the tool, or held for the user's `user.tool_confirmation`
    /// (the session idles with `requires_action` naming the call).
    pub(super) fn session_permission(
        &mut self,
        now: Timestamp,
        cli: SessionId,
        request: RequestId,
        chunk: &Chunk,
    ) {
        let Chunk::PermissionRequest {
            request_id,
            tool_use_id,
            tool_name,
            input,
            ..
        } = chunk
        else {
            return;
        };
        let Some(id) = self.agent_sessions.turns.get(&request).cloned() else {
            return;
        };
        let Some(session) = self.agent_sessions.by_id.get(&id) else {
            return;
        };
        let (permission, tool) = session.tools.permission(tool_name);
        let decision = match permission {
            Permission::Allow => Some(PermissionDecision::Allow {
                updated_input: None,
                updated_permissions: Vec::new(),
            }),
            Permission::Deny => Some(PermissionDecision::deny(
                "This tool is not enabled in this session.".to_owned(),
            )),
            Permission::Ask => None,
        };
        if let Some(decision) = decision {
            if let Some(live) = self.lives.get_mut(&cli) {
                let _ = live.session.respond_permission(now, request_id, decision);
            }
            return;
        }
        let known = (tool_use_id.as_ref())
            .and_then(|u| session.progress.calls.get(u))
            .map(|(event, _)| event.clone());
        let event = match known {
            Some(event) => event,
            None => {
                self.said(&id);
                let use_id = tool_use_id.clone().unwrap_or_else(|| request_id.clone());
                self.tool_use(&id, &use_id, tool, input.to_value(), permission)
            }
        };
        let deadline = now.saturating_add(self.config.approval_timeout_ms);
        let Some(session) = self.agent_sessions.by_id.get_mut(&id) else {
            return;
        };
        session.progress.confirming.push(Confirming {
            event,
            cli,
            request_id: request_id.clone(),
            deadline,
        });
        let ids: Vec<Value> = (session.progress.confirming.iter())
            .map(|c| json!(c.event))
            .collect();
        let tenant = session.tenant.clone();
        let stop = json!({"type": "requires_action", "event_ids": ids});
        self.session_status(
            &id,
            "idle",
            Some(json!({"stop_reason": stop, "stop_details": null})),
        );
        self.persist_session(&tenant, &id, None);
    }

    /// The CLI settled a permission request itself (its turn was stopped).
    pub(super) fn permission_settled(&mut self, cli: SessionId, request_id: &str) {
        for session in self.agent_sessions.by_id.values_mut() {
            (session.progress.confirming).retain(|c| !(c.cli == cli && c.request_id == request_id));
        }
    }

    /// Answers the call of session `id` whose event is `event` with `decision`; once no call
    /// waits for a confirmation, the session runs again.
    fn confirm(&mut self, id: &str, event: &str, decision: PermissionDecision) {
        let Some(session) = self.agent_sessions.by_id.get_mut(id) else {
            return;
        };
        let confirming = &mut session.progress.confirming;
        let Some(at) = confirming.iter().position(|c| c.event == event) else {
            return;
        };
        let call = confirming.remove(at);
        let running = confirming.is_empty();
        let now = self.now;
        if let Some(live) = self.lives.get_mut(&call.cli) {
            let _ = live
                .session
                .respond_permission(now, &call.request_id, decision);
            self.drain_session(now, call.cli);
        }
        if running {
            self.session_status(id, "running", None);
        }
    }

    /// A turn's whole answer (a Messages API response, or its error): the events it makes,
    /// kept with the session.
    pub(super) fn turn_answered(&mut self, request: RequestId, status: u16, body: &[u8]) {
        let Some(id) = self.agent_sessions.turns.remove(&request) else {
            return;
        };
        self.said(&id);
        self.turn_events(&id, status, body);
        if let Some(session) = self.agent_sessions.by_id.get_mut(&id) {
            session.progress = Progress::default();
        }
        if let Some(tenant) = self.agent_sessions.by_id.get(&id).map(|s| s.tenant.clone()) {
            self.persist_session(&tenant, &id, None);
        }
    }

    fn turn_events(&mut self, id: &str, status: u16, body: &[u8]) {
        let id = id.to_owned();
        let answer: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        if let Some(session) = self.agent_sessions.by_id.get_mut(&id) {
            session.running = false;
        }
        let busy = answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("is busy"));
        if status == 429 && busy {
            // Its CLI is still settling an interrupted turn: the same turn again shortly.
            if let Some(session) = self.agent_sessions.by_id.get_mut(&id) {
                session.retry_at = Some(self.now.saturating_add(RETRY_MS));
                if let Some(Value::Array(content)) =
                    session.history.pop().map(|m| m["content"].clone())
                {
                    let (results, mut said): (Vec<Value>, Vec<Value>) = content
                        .into_iter()
                        .partition(|b| b["type"] == "tool_result");
                    said.append(&mut session.queued);
                    session.queued = said;
                    session.results = results;
                }
            }
            return;
        }
        if status != 200 {
            let message = answer["error"]["message"]
                .as_str()
                .unwrap_or("the turn failed")
                .to_owned();
            self.close_span(&id, false);
            // The user's turn is not in the conversation: its content waits for the next.
            if let Some(session) = self.agent_sessions.by_id.get_mut(&id) {
                if let Some(Value::Array(content)) =
                    session.history.pop().map(|m| m["content"].clone())
                {
                    let mut again: Vec<Value> = content
                        .into_iter()
                        .filter(|b| b["type"] != "tool_result")
                        .collect();
                    again.append(&mut session.queued);
                    session.queued = again;
                }
            }
            let kind = if status == 429 || status == 529 {
                "model_overloaded_error"
            } else {
                "model_request_failed_error"
            };
            self.session_event(
                &id,
                json!({"type": "session.error", "error": {"type": kind,
                "message": message, "retry_status": {"type": "exhausted"}}}),
            );
            self.session_status(
                &id,
                "idle",
                Some(json!({"stop_reason": {"type": "retries_exhausted"}, "stop_details": null})),
            );
            return;
        }
        let usage = &answer["usage"];
        let count = |name: &str| usage[name].as_u64().unwrap_or(0);
        // Each model request's span ended with its message; one the CLI did not stream ends
        // here, with the turn's usage.
        if let Some(span) = self.take_span(&id) {
            self.end_model_request(&id, &span.start, Some(usage));
        }
        if let Some(session) = self.agent_sessions.by_id.get_mut(&id) {
            let total = &mut session.json["usage"];
            for name in ["input_tokens", "output_tokens", "cache_read_input_tokens"] {
                total[name] = json!(total[name].as_u64().unwrap_or(0) + count(name));
            }
            session
                .history
                .push(json!({"role": "assistant", "content": answer["content"]}));
        }
        // The model's words and thinking were logged as they came (`turn_chunk`).
        let blocks = answer["content"].as_array().cloned().unwrap_or_default();
        let mut waiting = Vec::new();
        for call in blocks.iter().filter(|b| b["type"] == "tool_use") {
            let event = self.session_event(
                &id,
                json!({"type": "agent.custom_tool_use",
                "name": call["name"], "input": call["input"]}),
            );
            let event_id = event["id"].as_str().unwrap_or_default().to_owned();
            waiting.push((event_id, call["id"].as_str().unwrap_or_default().to_owned()));
        }
        if waiting.is_empty() {
            self.session_status(
                &id,
                "idle",
                Some(json!({"stop_reason": {"type": "end_turn"}, "stop_details": null})),
            );
            // What was sent meanwhile is the next turn.
            self.next_turn(&id);
            return;
        }
        let ids: Vec<Value> = waiting.iter().map(|(e, _)| json!(e)).collect();
        if let Some(session) = self.agent_sessions.by_id.get_mut(&id) {
            session.waiting = waiting;
        }
        self.session_status(&id, "idle", Some(json!({"stop_reason": {"type": "requires_action", "event_ids": ids}, "stop_details": null})));
    }
}
