//! The console's view of the gateway ([`GatewayConfig::console`](super::GatewayConfig::console)):
//! the live conversations (`GET /v1/conversations`) and each one's chunks as they come
//! (`GET /v1/conversations/{id}/events`, SSE) — for an API key its own conversations, for the
//! admin key every one.

use std::collections::VecDeque;

use serde_json::{json, Value};

use super::{tenant_id, Gateway, GatewayOutput, Live, RequestId, Watch};
use crate::api::{ApiError, ApiErrorKind};
use crate::gateway::SessionId;
use crate::{Chunk, Timestamp};

/// How much of a conversation's current turn is kept for a stream that opens mid-turn.
const KEPT_BYTES: usize = 1 << 20;

/// What the console shows of a live CLI beyond what the gateway keeps anyway.
#[derive(Debug, Default)]
pub(super) struct Watched {
    /// The model its CLI said it runs.
    model: Option<String>,
    /// When it started.
    started: Timestamp,
    /// The frames of its current turn, oldest first (at most [`KEPT_BYTES`]).
    turn: VecDeque<String>,
    bytes: usize,
}

impl Watched {
    /// A CLI started at `now`.
    pub(super) fn new(now: Timestamp) -> Watched {
        Watched {
            started: now,
            ..Watched::default()
        }
    }
}

/// The console's page and its files, served at `/console/` (`/console` sends there).
const PAGE: [(&str, &str, &str); 4] = [
    (
        "/console/",
        "text/html; charset=utf-8",
        include_str!("../console/console.html"),
    ),
    (
        "/console/console.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/console.js"),
    ),
    (
        "/console/cards.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/cards.js"),
    ),
    (
        "/console/style.css",
        "text/css; charset=utf-8",
        include_str!("../console/style.css"),
    ),
];

/// What the console's pages may do: load their own files, call their own gateway, be framed
/// by no one (its buttons answer approvals).
const PAGE_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; \
    form-action 'none'";

/// What a request of the console's routes asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ConsoleRoute<'a> {
    /// `/console`: sent on to `/console/`.
    Redirect,
    /// A file of its page: its content type and content.
    File(&'static str, &'static str),
    /// `/v1/conversations`.
    List,
    /// `/v1/conversations/{id}/events`.
    Events(&'a str),
}

/// The console's route of a path, if it is one.
pub(super) fn route(path: &str) -> Option<ConsoleRoute<'_>> {
    if path == "/console" {
        return Some(ConsoleRoute::Redirect);
    }
    if path == "/v1/conversations" {
        return Some(ConsoleRoute::List);
    }
    if let Some((_, kind, body)) = PAGE.iter().find(|(p, ..)| *p == path) {
        return Some(ConsoleRoute::File(kind, body));
    }
    let id = path
        .strip_prefix("/v1/conversations/")?
        .strip_suffix("/events")?;
    (!id.is_empty() && !id.contains('/') && id.len() <= 64).then_some(ConsoleRoute::Events(id))
}

/// The SSE frame of a chunk.
fn frame(chunk: &Chunk) -> String {
    let data = serde_json::to_string(chunk).expect("chunks serialize");
    format!("event: chunk\ndata: {data}\n\n")
}

impl Gateway {
    /// What a live CLI is doing, in the console's words.
    fn conversation_state(&self, id: SessionId, live: &Live) -> &'static str {
        if live.starting.is_some() {
            "starting"
        } else if self.approvals.values().any(|a| a.session == id) || self.sessions.confirming(id) {
            "waiting_for_approval"
        } else if self.registry.held_in(id) > 0 {
            "waiting_for_client_tool"
        } else if live.request.is_some() || !self.registry.is_idle(id) {
            "running"
        } else {
            "idle"
        }
    }

    /// A live conversation as the console lists it.
    fn conversation_json(&self, id: SessionId, live: &Live) -> Value {
        let unix = |t: Timestamp| self.config.unix_epoch_ms.saturating_add(t);
        let approvals: Vec<&String> = (self.approvals.iter())
            .filter(|(_, a)| a.session == id)
            .map(|(approval, _)| approval)
            .collect();
        json!({
            "id": live.cli_id,
            "tenant": tenant_id(&live.tenant),
            "model": live.watched.model,
            "state": self.conversation_state(id, live),
            "started_at_ms": unix(live.watched.started),
            "last_active_ms": self.registry.last_active(id).map(unix),
            "held_tool_calls": self.registry.held_in(id),
            "held": self.registry.held_calls(id).into_iter().map(|(call, since, deadline)| {
                json!({"tool_use_id": call, "since_ms": unix(since), "deadline_ms": unix(deadline)})
            }).collect::<Vec<Value>>(),
            "approvals": approvals,
        })
    }

    /// The live conversations `tenant` sees (every one for `None`: the admin), those that
    /// served a request most recently first.
    pub(super) fn conversations(&self, tenant: Option<&str>) -> Value {
        let mut mine: Vec<(SessionId, &Live)> = (self.lives.iter())
            .filter(|(id, _)| !self.pool.contains_key(id))
            .filter(|(_, live)| tenant.is_none_or(|t| live.tenant == t))
            .map(|(id, live)| (*id, live))
            .collect();
        mine.sort_by_key(|(id, live)| {
            std::cmp::Reverse(
                self.registry
                    .last_active(*id)
                    .unwrap_or(live.watched.started),
            )
        });
        let data: Vec<Value> = (mine.into_iter())
            .map(|(id, live)| self.conversation_json(id, live))
            .collect();
        json!({"object": "list", "data": data})
    }

    /// `GET /v1/conversations/{id}/events`: the conversation as listed (`event:
    /// conversation`), the chunks of its current turn so far, then each chunk as it comes
    /// (`event: chunk`), with keep-alives, until it ends (`event: closed`).
    ///
    /// # Errors
    /// 404 for a conversation `tenant` does not see (none, or another tenant's).
    pub(super) fn handle_conversation_events(
        &mut self,
        request: RequestId,
        id: &str,
        tenant: Option<&str>,
    ) -> Result<(), ApiError> {
        let found = (self.lives.iter())
            .filter(|(s, _)| !self.pool.contains_key(s))
            .find(|(_, live)| live.cli_id == id && tenant.is_none_or(|t| live.tenant == t))
            .map(|(s, live)| (*s, self.conversation_json(*s, live)));
        let Some((session, listed)) = found else {
            return Err(ApiError::new(
                ApiErrorKind::NotFound,
                format!("no live conversation {id:?}"),
            ));
        };
        let mut bytes = format!("event: conversation\ndata: {listed}\n\n");
        if let Some(live) = self.lives.get(&session) {
            for kept in &live.watched.turn {
                bytes.push_str(kept);
            }
        }
        self.open_watch(request, Watch::Conversation(session), bytes.into_bytes());
        Ok(())
    }

    /// `GET /console/…`: the console's page and its files (`file`: `None` for `/console`,
    /// sent on to `/console/`).
    pub(super) fn console_page(
        &mut self,
        request: RequestId,
        file: Option<(&'static str, &'static str)>,
    ) {
        let mut headers: Vec<(String, String)> = [
            ("content-security-policy", PAGE_POLICY),
            ("x-frame-options", "DENY"),
            ("x-content-type-options", "nosniff"),
            ("referrer-policy", "no-referrer"),
            ("cache-control", "no-cache"),
        ]
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .into();
        let (status, body) = match file {
            None => {
                headers.push(("location".to_owned(), "/console/".to_owned()));
                (308, Vec::new())
            }
            Some((kind, body)) => {
                headers.push(("content-type".to_owned(), kind.to_owned()));
                (200, body.as_bytes().to_vec())
            }
        };
        self.respond_whole(request, status, headers, body);
    }

    /// A chunk of a live CLI, for the console: kept with its turn and sent to its streams.
    pub(super) fn console_chunk(&mut self, session: SessionId, chunk: &Chunk) {
        let Some(live) = self.lives.get_mut(&session) else {
            return;
        };
        let watched = &mut live.watched;
        if let Chunk::SessionInit { model, .. } = chunk {
            watched.model.clone_from(model);
        }
        if matches!(chunk, Chunk::UserPrompt { .. }) {
            // A new turn: what a stream opened now starts with.
            watched.turn.clear();
            watched.bytes = 0;
        }
        let frame = frame(chunk);
        watched.bytes += frame.len();
        watched.turn.push_back(frame.clone());
        while watched.bytes > KEPT_BYTES {
            match watched.turn.pop_front() {
                Some(old) => watched.bytes -= old.len(),
                None => break,
            }
        }
        let at = self.now.saturating_add(self.config.ping_every_ms);
        for (&request, (watch, next_ping)) in &mut self.watchers {
            if matches!(watch, Watch::Conversation(s) if *s == session) {
                *next_ping = at;
                self.outputs.push_back(GatewayOutput::Body {
                    request,
                    bytes: frame.clone().into_bytes(),
                });
            }
        }
    }

    /// A live CLI is gone: its streams say so and end.
    pub(super) fn console_closed(&mut self, session: SessionId, cli_id: &str) {
        let watching: Vec<RequestId> = (self.watchers.iter())
            .filter(|(_, (w, _))| matches!(w, Watch::Conversation(s) if *s == session))
            .map(|(r, _)| *r)
            .collect();
        for request in watching {
            self.watchers.remove(&request);
            let bytes = format!("event: closed\ndata: {}\n\n", json!({"id": cli_id}));
            self.outputs.push_back(GatewayOutput::Body {
                request,
                bytes: bytes.into_bytes(),
            });
            self.outputs.push_back(GatewayOutput::End { request });
        }
    }
}
