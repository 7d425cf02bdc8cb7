//! The Managed Agents API's sessions (`/v1/sessions`) as the API shows them: made, listed,
//! changed, archived and deleted; their events sent, listed and streamed; kept in the session
//! store and read back. How a session's turns run is the `turns` module's.

use serde_json::{json, Map, Value};

use super::agents::AgentSnapshot;
use super::api::{invalid, json_object, metadata, not_found, page, param, query, Refusal};
use super::events::{Confirmation, Event, EventBody, StopReason};
use super::state::{AgentSession, Previews, Progress, SessionView, Status, TurnRequest, Usage};
use super::tools::SessionTools;
use super::SessionRoute;
use crate::gateway::engine::approvals::sse;
use crate::gateway::engine::types::RecordState;
use crate::gateway::engine::{
    tenant_id, Gateway, GatewayOutput, HttpHead, RequestId, StoreAsk, Watch,
};
use crate::session::PermissionDecision;

/// An SSE frame of a logged event, named by its type (the SDKs read the name), with its id (a
/// stream reopened with `Last-Event-ID` goes on after it).
pub(super) fn frame(event: &Event) -> Vec<u8> {
    let json = serde_json::to_value(event).unwrap_or_default();
    format!("id: {}\n{}", event.id, sse(event.body.kind(), &json)).into_bytes()
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

/// A user's event as sent, read and checked (whether a call it answers waits is the
/// session's to say).
fn user_event(event: &Value) -> Result<EventBody, Refusal> {
    let text = |name: &str| event[name].as_str().unwrap_or_default().to_owned();
    Ok(match event["type"].as_str() {
        Some("user.message") => EventBody::UserMessage {
            content: user_content(event)?,
        },
        Some("user.custom_tool_result") => EventBody::UserCustomToolResult {
            custom_tool_use_id: text("custom_tool_use_id"),
            content: event.get("content").cloned(),
            is_error: event["is_error"].as_bool(),
        },
        Some("user.interrupt") => EventBody::UserInterrupt {},
        Some("user.tool_confirmation") => {
            let (result, deny_message) = match (event["result"].as_str(), &event["deny_message"]) {
                (Some("allow"), Value::Null) => (Confirmation::Allow, None),
                (Some("deny"), Value::Null) => (Confirmation::Deny, None),
                (Some("deny"), Value::String(m)) => (Confirmation::Deny, Some(m.clone())),
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
            };
            EventBody::UserToolConfirmation {
                tool_use_id: text("tool_use_id"),
                result,
                deny_message,
            }
        }
        Some(other @ ("user.tool_result" | "user.define_outcome" | "system.message")) => {
            return Err(invalid(format!(
                "events: {other} is not supported by this gateway yet"
            )));
        }
        other => return Err(invalid(format!("events: no event type {other:?}"))),
    })
}

impl Gateway {
    /// Keeps a session (its resource, log and conversation) in the session store, when there
    /// is one; `request`'s response ends once it is kept. A session gone is forgotten there.
    pub(super) fn persist_session(&mut self, tenant: &str, id: &str, request: Option<RequestId>) {
        if !self.config.store {
            return;
        }
        let json = (self.agent_sessions.by_id.get(id))
            .map(|s| json!({"order": s.order, "data": s}).to_string());
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
    /// memory (a record that does not read as one is passed over). One whose turn the
    /// gateway's end cut short says so in its log and is idle; the message of that turn waits
    /// for the next.
    pub(super) fn restore_session(&mut self, tenant: &str, order: u64, data: Value) {
        let Ok(mut session) = serde_json::from_value::<AgentSession>(data) else {
            return;
        };
        let id = session.view.id.clone();
        if self.agent_sessions.by_id.contains_key(&id) {
            return;
        }
        session.tenant = tenant.to_owned();
        session.order = order;
        session.tools = self.session_tools(&session.view.agent).0;
        let cut = std::mem::take(&mut session.running);
        if cut {
            if let Some(message) = session.history.pop() {
                let mut again = message.content;
                again.append(&mut session.queued);
                session.queued = again;
            }
        }
        self.agent_sessions.by_id.insert(id.clone(), session);
        if cut {
            let message = "the gateway stopped during this turn; send a message to go on";
            let error = EventBody::error("unknown_error", message.to_owned());
            self.session_event(&id, None, error);
            self.session_status(&id, EventBody::idle(StopReason::RetriesExhausted));
            self.persist_session(tenant, &id, None);
        }
    }

    /// Forgets `tenant`'s sessions (read again from the store on its next request).
    pub(super) fn forget_sessions(&mut self, tenant: &str) {
        let sessions = &mut self.agent_sessions;
        sessions.by_id.retain(|_, s| s.tenant != tenant);
        let by_id = &sessions.by_id;
        sessions.turns.retain(|_, id| by_id.contains_key(id));
    }

    /// What a session of `agent` runs of the agent's tools on this gateway, with what it
    /// leaves out (for the response's warning).
    fn session_tools(&self, agent: &AgentSnapshot) -> (SessionTools, Vec<String>) {
        SessionTools::of(
            agent,
            &self.config.enabled_tools,
            self.config.allow_mcp_servers,
            self.config.approvals,
        )
    }

    /// A new id of a session or an event: `prefix` and 32 hex digits.
    pub(super) fn session_id(&mut self, prefix: &str) -> String {
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

    /// Adds an event to session `id`'s log (with the id a preview announced it by, or a new
    /// one) and sends it to the session's streams; returns it.
    pub(super) fn session_event(
        &mut self,
        id: &str,
        event_id: Option<String>,
        body: EventBody,
    ) -> Event {
        let event = Event {
            id: event_id.unwrap_or_else(|| self.session_id("sevt_")),
            // A user's message is processed when its turn takes it.
            processed_at: (!matches!(body, EventBody::UserMessage { .. }))
                .then(|| self.managed_now()),
            body,
        };
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

    /// Sets a session's status (and its `updated_at`) as the event `status` says
    /// (`session.status_*`), and logs the event.
    pub(super) fn session_status(&mut self, id: &str, status: EventBody) {
        let now = self.managed_now();
        if let Some(session) = self.agent_sessions.by_id.get_mut(id) {
            session.view.status = match status {
                EventBody::Running {} => Status::Running,
                EventBody::Terminated {} => Status::Terminated,
                _ => Status::Idle,
            };
            session.view.updated_at = now;
        }
        self.session_event(id, None, status);
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
            self.record_closed(session, RecordState::Ended);
            self.close(self.now, session);
        }
        self.outputs
            .push_back(GatewayOutput::RemoveDir { path: dir });
    }

    /// What a request of the sessions' routes changed (`answer`, a POST's or a DELETE's),
    /// kept in the session store before the answer ends.
    fn persist_changed(
        &mut self,
        request: RequestId,
        route: SessionRoute<'_>,
        tenant: &str,
        answer: &Result<(u16, Value), Refusal>,
    ) {
        let Ok((_, value)) = answer else {
            return;
        };
        let id = match route {
            SessionRoute::AgentSessions => value["id"].as_str().map(str::to_owned),
            SessionRoute::AgentSession(id)
            | SessionRoute::Archive(id)
            | SessionRoute::Events(id) => Some(id.to_owned()),
            SessionRoute::Stream(_) => None,
        };
        if let Some(id) = id {
            self.persist_session(tenant, &id, Some(request));
        }
    }

    /// A request of the sessions' routes, answered: `None` for a stream, kept open. What it
    /// changed is kept in the session store before the answer ends.
    pub(super) fn handle_session(
        &mut self,
        request: RequestId,
        route: SessionRoute<'_>,
        head: &HttpHead<'_>,
        tenant: &str,
        body: &[u8],
        warnings: &mut Vec<String>,
    ) -> Option<Result<(u16, Value), Refusal>> {
        let params = &query(head.query);
        let object = || json_object(body);
        let view = |s: &AgentSession| serde_json::to_value(&s.view).unwrap_or_default();
        let answer = match (head.method, route) {
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
                let mut mine: Vec<&AgentSession> = (self.agent_sessions.by_id.values())
                    .filter(|s| s.tenant == tenant)
                    .filter(|s| archived || s.view.archived_at.is_none())
                    .filter(|s| statuses.is_empty() || statuses.contains(&s.view.status.as_str()))
                    .filter(|s| agent.is_none_or(|a| s.view.agent.id == a))
                    .collect();
                mine.sort_by_key(|s| s.order);
                let mut items: Vec<Value> = mine.into_iter().map(view).collect();
                if param(params, "order") != Some("asc") {
                    items.reverse();
                }
                page(items, params, 100).map(|mut p| {
                    p["prev_page"] = Value::Null;
                    (200, p)
                })
            }
            ("GET", SessionRoute::AgentSession(id)) => {
                self.session_of(tenant, id).map(|s| (200, view(s)))
            }
            ("POST", SessionRoute::AgentSession(id)) => object().and_then(|b| {
                let now = self.managed_now();
                let session = self.session_of(tenant, id)?;
                let title = match b.get("title") {
                    None => None,
                    Some(Value::Null) => Some(None),
                    Some(Value::String(t)) => Some(Some(t.clone())),
                    Some(_) => return Err(invalid("title: a string or null")),
                };
                let metadata = match b.get("metadata").filter(|m| !m.is_null()) {
                    None => None,
                    Some(m) => Some(metadata(m, Some(&session.view.metadata), true)?),
                };
                for field in ["agent", "budget", "vault_ids"] {
                    if b.get(field).is_some_and(|v| !v.is_null()) {
                        return Err(invalid(format!(
                            "{field}: not supported by this gateway on a session"
                        )));
                    }
                }
                if let Some(title) = title {
                    session.view.title = title;
                }
                if let Some(metadata) = metadata {
                    session.view.metadata = metadata;
                }
                session.view.updated_at = now;
                Ok((200, view(session)))
            }),
            ("DELETE", SessionRoute::AgentSession(id)) => {
                self.session_of(tenant, id).map(|_| ()).map(|()| {
                    // Its turn stops, its CLI is closed and its directory deleted.
                    self.interrupt_session(id);
                    self.discard_session_dir(tenant, id);
                    self.agent_sessions.by_id.remove(id);
                    // Its streams end with the API's last word.
                    let gone = Event {
                        id: self.session_id("sevt_"),
                        processed_at: Some(self.managed_now()),
                        body: EventBody::Deleted {},
                    };
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
                    Ok(s) => s.view.archived_at.is_none(),
                    Err(e) => return Some(Err(e)),
                };
                if first {
                    self.terminate_session(id);
                }
                self.session_of(tenant, id).map(|s| {
                    if first {
                        s.view.archived_at = Some(now);
                    }
                    (200, view(s))
                })
            }
            ("GET", SessionRoute::Events(id)) => self.session_of(tenant, id).and_then(|s| {
                let types: Vec<&str> = params
                    .iter()
                    .filter(|(k, _)| k == "types")
                    .map(|(_, v)| v.as_str())
                    .collect();
                let mut items: Vec<Value> = (s.events.iter())
                    .filter(|e| types.is_empty() || types.contains(&e.body.kind()))
                    .map(|e| serde_json::to_value(e).unwrap_or_default())
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
                    if let Some(at) = events.iter().position(|e| e.id == last) {
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
        };
        if matches!(head.method, "POST" | "DELETE") {
            self.persist_changed(request, route, tenant, &answer);
        }
        Some(answer)
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
        if agent.archived_at.is_some() {
            return Err(invalid(format!("agent {agent_id} is archived")));
        }
        let Some(Value::String(environment_id)) = body.get("environment_id") else {
            return Err(invalid("environment_id: required"));
        };
        let environment = self.managed_environment(tenant, environment_id)?;
        if environment.archived_at.is_some() {
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
            None | Some(Value::Null) => None,
            Some(Value::String(t)) => Some(t.clone()),
            Some(_) => return Err(invalid("title: a string or null")),
        };
        let metadata = match body.get("metadata") {
            None | Some(Value::Null) => Map::new(),
            Some(m) => metadata(m, None, false)?,
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
        let snapshot = agent.snapshot;
        let (tools, left_out) = self.session_tools(&snapshot);
        warnings.extend(left_out);
        let id = self.session_id("sesn_");
        let now = self.managed_now();
        let view = SessionView {
            agent: snapshot.clone(),
            archived_at: None,
            budget: None,
            created_at: now.clone(),
            environment_id: environment_id.clone(),
            id: id.clone(),
            metadata,
            outcome_evaluations: Vec::new(),
            resources: Vec::new(),
            stats: Map::new(),
            status: Status::Idle,
            title,
            kind: "session".to_owned(),
            updated_at: now,
            usage: Usage::default(),
            vault_ids: Vec::new(),
        };
        let request = TurnRequest {
            model: snapshot.definition.model.id.clone(),
            max_tokens: 32000,
            system: snapshot.definition.system.clone(),
            tools: snapshot.custom_tools(),
        };
        let order = self.managed_order();
        self.agent_sessions.by_id.insert(
            id.clone(),
            AgentSession {
                tenant: tenant.to_owned(),
                order,
                view,
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
            let mut events = Map::new();
            events.insert("events".to_owned(), Value::Array(initial));
            self.send_events(tenant, &id, &events)?;
        }
        let view = &self.session_of(tenant, &id)?.view;
        Ok((200, serde_json::to_value(view).unwrap_or_default()))
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
        let session = self.session_of(tenant, id)?;
        if session.view.archived_at.is_some() {
            return Err(invalid(format!("session {id} is archived")));
        }
        let mut bodies = Vec::new();
        for event in events {
            let body = user_event(event)?;
            match &body {
                EventBody::UserCustomToolResult {
                    custom_tool_use_id: call,
                    ..
                } if !session.waiting.iter().any(|c| &c.0 == call) => {
                    return Err(invalid(format!(
                        "events: no custom tool call {call:?} waits for a result"
                    )));
                }
                EventBody::UserToolConfirmation {
                    tool_use_id: call, ..
                } if !session.progress.confirming.iter().any(|c| &c.event == call) => {
                    return Err(invalid(format!(
                        "events: no tool call {call:?} waits for a confirmation"
                    )));
                }
                _ => {}
            }
            bodies.push(body);
        }
        let mut echoed = Vec::new();
        for body in bodies {
            let event = self.session_event(id, None, body.clone());
            echoed.push(serde_json::to_value(&event).unwrap_or_default());
            let session = self.session_of(tenant, id)?;
            match body {
                EventBody::UserMessage { content } => session.queued.extend(content),
                EventBody::UserInterrupt {} => self.interrupt_session(id),
                EventBody::UserToolConfirmation {
                    tool_use_id,
                    result,
                    deny_message,
                } => {
                    let decision = match result {
                        Confirmation::Allow => PermissionDecision::Allow {
                            updated_input: None,
                            updated_permissions: Vec::new(),
                        },
                        Confirmation::Deny => PermissionDecision::deny(
                            deny_message
                                .unwrap_or_else(|| "The user denied this tool call.".to_owned()),
                        ),
                    };
                    self.confirm(id, &tool_use_id, decision);
                }
                EventBody::UserCustomToolResult {
                    custom_tool_use_id,
                    content,
                    is_error,
                } => {
                    let waiting = &mut session.waiting;
                    if let Some(at) = waiting.iter().position(|c| c.0 == custom_tool_use_id) {
                        let call = waiting.remove(at);
                        let mut result = json!({"type": "tool_result", "tool_use_id": call.1,
                            "content": content.unwrap_or(json!([]))});
                        if is_error == Some(true) {
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
}
