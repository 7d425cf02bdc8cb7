//! A session's turns: each is a Messages request the gateway makes of itself (the agent's
//! system prompt, model and custom tools; the session's conversation), numbered from
//! [`TURNS_FROM`]. As its CLI streams, the turn becomes the API's events (`agent.message`,
//! `agent.thinking`, the agent's tool calls and results, `span.model_request_*`); its answer
//! ends it (`agent.custom_tool_use`, `session.status_*`, `session.error`). Permission requests
//! of the CLI are answered by the agent's policy or wait for the user's confirmation.

use serde_json::{json, Map, Value};

use super::events::{EventBody, ModelUsage, StopReason};
use super::state::{user_message, Confirming, CustomCall, Message, Previews, Progress, Role, Span};
use super::tools::{Permission, ToolName};
use super::TURNS_FROM;
use crate::api::Api;
use crate::gateway::engine::prepared::{PreparedRequest, SessionTurn};
use crate::gateway::engine::{approvals::sse, Gateway, RequestId, Watch, CLIENT_SERVER};
use crate::gateway::SessionId;
use crate::session::PermissionDecision;
use crate::{Chunk, Timestamp};

/// A permission request of a session's CLI: its control request, and the call it asks for.
#[derive(Debug, Clone, Copy)]
pub(in crate::gateway::engine) struct PermissionAsked<'a> {
    pub(in crate::gateway::engine) request_id: &'a String,
    pub(in crate::gateway::engine) tool_use_id: Option<&'a str>,
    pub(in crate::gateway::engine) tool_name: &'a String,
    pub(in crate::gateway::engine) input: &'a crate::Json,
}

/// How long a turn waits before it is tried again when the session's CLI is still settling an
/// interrupted turn (ms).
const RETRY_MS: u64 = 300;

/// An SSE frame of a preview (`event_start`, `event_delta`).
fn preview_frame(preview: &Value) -> Vec<u8> {
    let name = preview["type"].as_str().unwrap_or("message");
    sse(name, preview).into_bytes()
}

impl Gateway {
    /// Sends a preview frame (`event_start`, `event_delta`) to the streams of session `id`
    /// that opted into previews of this kind (`wants`); nothing is logged.
    fn preview(&mut self, id: &str, wants: fn(&Previews) -> bool, preview: &Value) {
        self.send_to_watches(
            |w| matches!(w, Watch::AgentSession(s, previews) if s == id && wants(previews)),
            &preview_frame(preview),
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

    /// Logs the end of a session's model request (the span the event `start` began): with
    /// its `usage`, or as failed without one.
    fn end_model_request(&mut self, id: &str, start: String, usage: Option<&Map<String, Value>>) {
        let end = EventBody::ModelRequestEnd {
            model_request_start_id: start,
            is_error: usage.is_none(),
            model_usage: usage.map(ModelUsage::of).unwrap_or_default(),
        };
        self.session_event(id, None, end);
    }

    /// Starts the turns due again at `now`, and denies the tool calls no one confirmed in
    /// time.
    pub(in crate::gateway::engine) fn retry_turns(&mut self, now: Timestamp) {
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
        let due: Vec<String> = (self.agent_sessions.by_id.iter())
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
    pub(super) fn interrupt_session(&mut self, id: &str) {
        // What the model said before it was stopped is logged.
        self.said(id);
        let turn = (self.agent_sessions.turns.iter())
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
                self.end_model_request(id, span.start, None);
            }
        }
        self.session_status(id, EventBody::idle(StopReason::EndTurn));
    }

    /// An archived session ends: a running turn is stopped, what waits is given up, the log
    /// says `session.status_terminated` and its streams end (it takes no more events).
    pub(super) fn terminate_session(&mut self, id: &str) {
        self.interrupt_session(id);
        if let Some(session) = self.agent_sessions.by_id.get_mut(id) {
            session.queued.clear();
        }
        self.session_status(id, EventBody::Terminated {});
        self.end_watches(|w| matches!(w, Watch::AgentSession(s, _) if s == id), None);
    }

    /// Starts a session's next turn when it can: nothing runs, no call waits for a result,
    /// and something is to be said.
    pub(super) fn next_turn(&mut self, id: &str) {
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
        session.history.push(user_message(content));
        session.running = true;
        let mut body = serde_json::to_value(&session.request).unwrap_or_default();
        body["messages"] = serde_json::to_value(&session.history).unwrap_or_default();
        let tenant = session.tenant.clone();
        self.agent_sessions.next_turn += 1;
        let request = TURNS_FROM + self.agent_sessions.next_turn;
        let turn = SessionTurn {
            id: id.to_owned(),
            tools: session.tools.clone(),
        };
        session.progress = Progress::default();
        self.agent_sessions.turns.insert(request, id.to_owned());
        self.session_status(id, EventBody::Running {});
        self.open_span(id);
        let bytes = body.to_string().into_bytes();
        let prepared = crate::gateway::engine::parse_request(Api::Anthropic, &bytes)
            .map(|r| PreparedRequest::for_session(&tenant, r, turn));
        self.handle_prepared(self.now, request, Api::Anthropic, &tenant, prepared);
    }

    /// A chunk of a session's turn, as the session's events: the model's words and thinking,
    /// and the calls of the agent's tools and their results (the turn's answer, at its end,
    /// has the custom tools' calls).
    pub(in crate::gateway::engine) fn turn_chunk(&mut self, request: RequestId, chunk: &Chunk) {
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
                self.session_event(&id, Some(event_id), EventBody::AgentThinking {});
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
            } if !name.starts_with(&format!("mcp__{CLIENT_SERVER}__")) => {
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
                    let result =
                        EventBody::tool_result(tool, event, &content.to_value(), *is_error);
                    self.session_event(&id, None, result);
                }
            }
            _ => {}
        }
    }

    /// Logs the start of a model request of session `id`'s turn.
    fn open_span(&mut self, id: &str) {
        let event = self.session_event(id, None, EventBody::ModelRequestStart {});
        if let Some(session) = self.agent_sessions.by_id.get_mut(id) {
            session.progress.span = Some(Span {
                start: event.id,
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
            self.end_model_request(id, span.start, ok.then_some(&span.usage));
        }
    }

    /// Logs the text of the model's message so far as an `agent.message`.
    fn said(&mut self, id: &str) {
        let Some(session) = self.agent_sessions.by_id.get_mut(id) else {
            return;
        };
        let text = std::mem::take(&mut session.progress.said);
        // The message its preview announced keeps the id the preview gave.
        let previewed = session.progress.said_id.take();
        if !text.is_empty() {
            let content = vec![json!({"type": "text", "text": text})];
            self.session_event(id, previewed, EventBody::AgentMessage { content });
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
        let event = self.session_event(id, None, EventBody::tool_use(&tool, input, permission));
        if let Some(session) = self.agent_sessions.by_id.get_mut(id) {
            (session.progress.calls).insert(use_id.to_owned(), (event.id.clone(), tool));
        }
        event.id
    }

    /// A permission request of a session's CLI (`cli`, running turn `request`): answered by
    /// the agent's policy for the tool, or held for the user's `user.tool_confirmation`
    /// (the session idles with `requires_action` naming the call).
    pub(in crate::gateway::engine) fn session_permission(
        &mut self,
        now: Timestamp,
        cli: SessionId,
        request: RequestId,
        asked: PermissionAsked<'_>,
    ) {
        let PermissionAsked {
            request_id,
            tool_use_id,
            tool_name,
            input,
        } = asked;
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
        let known = tool_use_id
            .and_then(|u| session.progress.calls.get(u))
            .map(|(event, _)| event.clone());
        let event = match known {
            Some(event) => event,
            None => {
                self.said(&id);
                let use_id = tool_use_id.unwrap_or(request_id);
                self.tool_use(&id, use_id, tool, input.to_value(), permission)
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
        let event_ids = (session.progress.confirming.iter())
            .map(|c| c.event.clone())
            .collect();
        let tenant = session.tenant.clone();
        let stop = StopReason::RequiresAction { event_ids };
        self.session_status(&id, EventBody::idle(stop));
        self.persist_session(&tenant, &id, None);
    }

    /// The CLI settled a permission request itself (its turn was stopped).
    pub(in crate::gateway::engine) fn permission_settled(
        &mut self,
        cli: SessionId,
        request_id: &str,
    ) {
        for session in self.agent_sessions.by_id.values_mut() {
            (session.progress.confirming).retain(|c| !(c.cli == cli && c.request_id == request_id));
        }
    }

    /// Answers the call of session `id` whose event is `event` with `decision`; once no call
    /// waits for a confirmation, the session runs again.
    pub(super) fn confirm(&mut self, id: &str, event: &str, decision: PermissionDecision) {
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
            self.session_status(id, EventBody::Running {});
        }
    }

    /// A turn's whole answer (a Messages API response, or its error): the events it makes,
    /// kept with the session.
    pub(in crate::gateway::engine) fn turn_answered(
        &mut self,
        request: RequestId,
        status: u16,
        body: &[u8],
    ) {
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
        let answer: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let Some(session) = self.agent_sessions.by_id.get_mut(id) else {
            return;
        };
        session.running = false;
        let message = answer["error"]["message"].as_str();
        if status == 429 && message.is_some_and(|m| m.contains("is busy")) {
            // Its CLI is still settling an interrupted turn: the same turn again shortly.
            session.retry_at = Some(self.now.saturating_add(RETRY_MS));
            if let Some(asked) = session.history.pop() {
                let (results, mut said): (Vec<Value>, Vec<Value>) =
                    (asked.content.into_iter()).partition(|b| b["type"] == "tool_result");
                said.append(&mut session.queued);
                session.queued = said;
                session.results = results;
            }
            return;
        }
        if status != 200 {
            let message = message.unwrap_or("the turn failed").to_owned();
            // The user's turn is not in the conversation: its content waits for the next.
            if let Some(asked) = session.history.pop() {
                let mut again: Vec<Value> = (asked.content.into_iter())
                    .filter(|b| b["type"] != "tool_result")
                    .collect();
                again.append(&mut session.queued);
                session.queued = again;
            }
            self.close_span(id, false);
            let kind = if status == 429 || status == 529 {
                "model_overloaded_error"
            } else {
                "model_request_failed_error"
            };
            self.session_event(id, None, EventBody::error(kind, message));
            self.session_status(id, EventBody::idle(StopReason::RetriesExhausted));
            return;
        }
        let usage = answer["usage"].as_object().cloned().unwrap_or_default();
        let count = |name: &str| usage.get(name).and_then(Value::as_u64).unwrap_or(0);
        let total = &mut session.view.usage;
        total.input_tokens += count("input_tokens");
        total.output_tokens += count("output_tokens");
        total.cache_read_input_tokens += count("cache_read_input_tokens");
        let blocks = answer["content"].as_array().cloned().unwrap_or_default();
        session.history.push(Message {
            role: Role::Assistant,
            content: blocks.clone(),
        });
        // Each model request's span ended with its message; one the CLI did not stream ends
        // here, with the turn's usage.
        if let Some(span) = self.take_span(id) {
            self.end_model_request(id, span.start, Some(&usage));
        }
        // The model's words and thinking were logged as they came (`turn_chunk`).
        let mut waiting = Vec::new();
        for call in blocks.iter().filter(|b| b["type"] == "tool_use") {
            let body = EventBody::AgentCustomToolUse {
                name: call["name"].clone(),
                input: call["input"].clone(),
            };
            let event = self.session_event(id, None, body);
            let tool_use_id = call["id"].as_str().unwrap_or_default().to_owned();
            waiting.push(CustomCall(event.id, tool_use_id));
        }
        if waiting.is_empty() {
            self.session_status(id, EventBody::idle(StopReason::EndTurn));
            // What was sent meanwhile is the next turn.
            self.next_turn(id);
            return;
        }
        let event_ids = waiting.iter().map(|c| c.0.clone()).collect();
        if let Some(session) = self.agent_sessions.by_id.get_mut(id) {
            session.waiting = waiting;
        }
        self.session_status(
            id,
            EventBody::idle(StopReason::RequiresAction { event_ids }),
        );
    }
}
