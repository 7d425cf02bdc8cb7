//! The console's view of the gateway ([`GatewayConfig::console`](super::GatewayConfig::console)):
//! the conversations (`GET /v1/conversations`: the live ones, and with a session store those
//! no CLI runs) and each one's chunks (`GET /v1/conversations/{id}/events`, SSE: a live one's
//! as they come, a stored one's from its transcript) — for an API key its own conversations,
//! for the admin key every one.

use std::collections::VecDeque;

use serde_json::{json, Value};

use super::managed::{param, query};
use super::types::{ConversationKey, ConversationRecord, RecordState};
use super::StoreAsk;
use super::{tenant_id, Gateway, GatewayOutput, HttpHead, Live, RequestId, Watch};
use crate::api::{ApiError, ApiErrorKind};
use crate::gateway::metrics::{Metrics, RECENT_BUCKET_MS};
use crate::gateway::SessionId;
use crate::{Chunk, Timestamp};

/// How much of a conversation's current turn is kept for a stream that opens mid-turn.
const KEPT_BYTES: usize = 1 << 20;

/// How many stored conversations the console lists at most (those saved last).
const STORED_LISTED: usize = 100;

/// A console request waiting for the session store.
#[derive(Debug)]
pub(super) enum Waiting {
    /// `GET /v1/conversations` of a tenant (`None`: the admin).
    List(Option<String>),
    /// `GET /v1/conversations/{id}/events` of a stored conversation.
    Transcript(ConversationKey),
}

/// What the console shows of a live CLI beyond what the gateway keeps anyway.
#[derive(Debug, Default)]
pub(super) struct Watched {
    /// The model its CLI said it runs.
    pub(super) model: Option<String>,
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
    /// `/v1/stats`.
    Stats,
}

/// The console's route of a path, if it is one.
pub(super) fn route(path: &str) -> Option<ConsoleRoute<'_>> {
    if path == "/console" {
        return Some(ConsoleRoute::Redirect);
    }
    if path == "/v1/conversations" {
        return Some(ConsoleRoute::List);
    }
    if path == "/v1/stats" {
        return Some(ConsoleRoute::Stats);
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
    format!("event: chunk\ndata: {}\n\n", chunk.to_json())
}

/// The SSE frame that ends a conversation's stream: its CLI is gone.
fn closed(id: &str) -> String {
    format!("event: closed\ndata: {}\n\n", json!({"id": id}))
}

/// Whether `key` is one the gateway could have made: a conversation id as the CLI's session
/// ids are (a UUID, lower-case hex) and a tenant id as [`tenant_id`] makes them.
fn stored_key(key: &ConversationKey) -> bool {
    let hex = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let parts: Vec<&str> = key.id.split('-').collect();
    let uuid = parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12]) && parts.iter().all(|p| hex(p));
    uuid && super::is_tenant_id(&key.tenant)
}

impl Gateway {
    /// The console's page and views (with `--console`).
    pub(super) fn handle_console(
        &mut self,
        request: RequestId,
        route: ConsoleRoute<'_>,
        head: &HttpHead<'_>,
    ) {
        let api = head.api();
        if !self.config.console {
            let error = ApiError::new(
                ApiErrorKind::NotFound,
                format!(
                    "no endpoint {}: the console is off (ccwire serve --console)",
                    head.path
                ),
            );
            return self.respond_error(request, api, &[], &error);
        }
        // The operator (the admin key, or any caller of a gateway without keys) sees
        // every conversation; a key its own.
        let scope = || self.front.scope(head);
        let answered = match route {
            ConsoleRoute::Redirect => return self.console_page(request, None),
            ConsoleRoute::File(kind, body) => {
                return self.console_page(request, Some((kind, body)))
            }
            ConsoleRoute::List => {
                scope().map(|scope| self.handle_conversations(request, scope, head.query))
            }
            ConsoleRoute::Stats => scope().map(|scope| {
                let stats = self.stats(scope.as_deref());
                self.respond_json(request, 200, &stats);
            }),
            ConsoleRoute::Events(id) => scope().and_then(|scope| {
                self.handle_conversation_events(request, id, scope.as_deref(), head.query)
            }),
        };
        if let Err(e) = answered {
            self.respond_error(request, api, &[], &e);
        }
    }

    /// What a live CLI is doing, in the console's words.
    fn conversation_state(&self, id: SessionId, live: &Live) -> &'static str {
        if live.starting.is_some() {
            "starting"
        } else if self.approvals.values().any(|a| a.session == id)
            || self.agent_sessions.confirming(id)
        {
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
            "node": self.config.node,
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

    /// `GET /v1/conversations`: the conversations `tenant` sees (every one for `None`: the
    /// admin). With a session store, the live ones and those the store keeps, once it has
    /// listed them ([`store_listed`](Self::store_listed)); without, or with `?live=only`,
    /// the live ones at once.
    pub(super) fn handle_conversations(
        &mut self,
        request: RequestId,
        tenant: Option<String>,
        query_string: &str,
    ) {
        let live_only = param(&query(query_string), "live") == Some("only");
        if !self.config.store || live_only {
            let list = self.conversations(tenant.as_deref(), None);
            return self.respond_json(request, 200, &list);
        }
        self.outputs.push_back(GatewayOutput::Store(StoreAsk::List {
            request,
            tenant: tenant.as_deref().map(tenant_id),
            limit: STORED_LISTED,
        }));
        self.console_waiting.insert(request, Waiting::List(tenant));
    }

    /// The session store's answer to a [`StoreAsk::List`]: its records, saved last
    /// first, or `None` when it failed (the live conversations are listed alone, with
    /// `stored_error` saying why).
    pub(super) fn store_listed(
        &mut self,
        now: Timestamp,
        request: RequestId,
        records: Option<Vec<ConversationRecord>>,
    ) {
        self.now = now;
        let Some(Waiting::List(tenant)) = self.console_waiting.remove(&request) else {
            return;
        };
        let mut list = self.conversations(tenant.as_deref(), records.as_deref());
        if records.is_none() {
            list["stored_error"] =
                json!("the session store is unavailable: only live conversations are listed");
        }
        self.respond_json(request, 200, &list);
    }

    /// Whether `path` asks (with the console) for the stream of a conversation no CLI of this
    /// gateway runs: a host whose gateway scales out asks the other nodes for it first.
    pub fn streams_elsewhere(&self, path: &str) -> bool {
        let Some(ConsoleRoute::Events(id)) = route(path).filter(|_| self.config.console) else {
            return false;
        };
        !(self.lives.iter()).any(|(s, live)| live.cli_id == id && !self.pool.contains_key(s))
    }

    /// `GET /v1/stats`: the console's charts — the last ten minutes in ten-second buckets
    /// (`buckets`: turns, tokens by kind, the latency the gateway added to first bytes, and
    /// for the operator the warm pool's hits and misses) and what is happening now — of
    /// `tenant`'s own requests, or for `None` (the operator) the whole gateway's.
    pub(super) fn stats(&self, tenant: Option<&str>) -> Value {
        let epoch = self.config.unix_epoch_ms;
        let empty = Metrics::default();
        let metrics = match tenant {
            None => &self.metrics,
            Some(t) => self.tenant_metrics.get(t).unwrap_or(&empty),
        };
        let mine: Vec<SessionId> = (self.lives.iter())
            .filter(|(id, live)| {
                !self.pool.contains_key(id) && tenant.is_none_or(|t| live.tenant == t)
            })
            .map(|(id, _)| *id)
            .collect();
        let mut now = json!({
            "conversations": mine.len(),
            "held_tool_calls": mine.iter().map(|id| self.registry.held_in(*id)).sum::<usize>(),
            "approvals": (self.approvals.values())
                .filter(|a| tenant.is_none_or(|t| a.tenant == t))
                .count(),
            "in_flight": (self.requests.values())
                .filter(|r| mine.contains(&r.session))
                .count(),
        });
        if tenant.is_none() {
            let ready = (self.pool.keys())
                .filter(|id| self.lives.get(id).is_some_and(|l| l.starting.is_none()))
                .count();
            now["pool"] = json!({"size": self.pool.len(), "ready": ready});
            now["queued"] = self.queue.len().into();
        }
        json!({
            "bucket_ms": RECENT_BUCKET_MS,
            "buckets": metrics.recent.series(epoch.saturating_add(self.now), tenant.is_none()),
            "now": now,
        })
    }

    /// A stored conversation no CLI runs here, as the console lists it.
    fn stored_json(&self, record: &ConversationRecord) -> Value {
        // A record saved as live that no CLI of this gateway runs: another gateway's (with a
        // shared index), or one a restart left.
        let state = match record.state {
            RecordState::Live if self.config.publish_index => "elsewhere",
            _ => "hibernated",
        };
        let closed = match record.state {
            RecordState::Live => "restarted",
            RecordState::Hibernated => "hibernated",
            RecordState::Expired => "expired",
            RecordState::Ended => "ended",
        };
        json!({
            "id": record.key.id,
            "tenant": record.key.tenant,
            "model": record.model,
            "state": state,
            "closed": (state == "hibernated").then_some(closed),
            "started_at_ms": null,
            "last_active_ms": record.saved_ms,
            "held_tool_calls": 0,
            "held": [],
            "approvals": [],
        })
    }

    /// The conversations `tenant` sees (every one for `None`: the admin): the live ones, those
    /// that served a request most recently first, then the `stored` ones no CLI here runs.
    pub(super) fn conversations(
        &self,
        tenant: Option<&str>,
        stored: Option<&[ConversationRecord]>,
    ) -> Value {
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
        let mut data: Vec<Value> = (mine.into_iter())
            .map(|(id, live)| self.conversation_json(id, live))
            .collect();
        let scope = tenant.map(tenant_id);
        let running = |record: &ConversationRecord| {
            (self.lives.values()).any(|live| {
                live.cli_id == record.key.id && tenant_id(&live.tenant) == record.key.tenant
            })
        };
        data.extend(
            (stored.unwrap_or_default().iter())
                .filter(|r| scope.as_ref().is_none_or(|t| r.key.tenant == *t))
                .filter(|r| !running(r))
                .map(|r| self.stored_json(r)),
        );
        json!({"object": "list", "data": data})
    }

    /// `GET /v1/conversations/{id}/events`: the conversation as listed (`event:
    /// conversation`), the chunks of its current turn so far, then each chunk as it comes
    /// (`event: chunk`), with keep-alives, until it ends (`event: closed`).
    ///
    /// # Errors
    /// 404 for a conversation `tenant` does not see (none, or another tenant's).
    ///
    /// A conversation no CLI runs here (with a session store; the admin names its tenant,
    /// `?tenant=`): the conversation as listed, its stored transcript's chunks, then `event:
    /// closed` ([`store_transcript_loaded`](Self::store_transcript_loaded)); `?live=only`
    /// asks for a live one alone (another node of a cluster looking for it).
    pub(super) fn handle_conversation_events(
        &mut self,
        request: RequestId,
        id: &str,
        tenant: Option<&str>,
        query_string: &str,
    ) -> Result<(), ApiError> {
        let found = (self.lives.iter())
            .filter(|(s, _)| !self.pool.contains_key(s))
            .find(|(_, live)| live.cli_id == id && tenant.is_none_or(|t| live.tenant == t))
            .map(|(s, live)| (*s, self.conversation_json(*s, live)));
        let Some((session, listed)) = found else {
            let params = query(query_string);
            let named = param(&params, "tenant");
            let live_only = param(&params, "live") == Some("only");
            let key = match tenant {
                Some(tenant) => Some(tenant_id(tenant)).filter(|t| named.is_none_or(|n| n == t)),
                None => named.map(str::to_owned),
            }
            .map(|tenant| ConversationKey {
                tenant,
                id: id.to_owned(),
            });
            return match key {
                // Only what the gateway itself names a conversation and a tenant by asks the
                // store: anything else (`..`, `*`, a NUL) is no conversation.
                Some(key) if self.config.store && !live_only && stored_key(&key) => {
                    self.outputs.push_back(GatewayOutput::Store(StoreAsk::Load {
                        request,
                        key: key.clone(),
                    }));
                    self.console_waiting
                        .insert(request, Waiting::Transcript(key));
                    Ok(())
                }
                _ => Err(ApiError::new(
                    ApiErrorKind::NotFound,
                    format!("no conversation {id:?}"),
                )),
            };
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

    /// The session store's answer to a [`StoreAsk::Load`]: the conversation's
    /// transcript, `None` when it keeps none, or `Err` when it failed (`503`). Its chunks are
    /// sent as one stream that then ends.
    pub(super) fn store_transcript_loaded(
        &mut self,
        now: Timestamp,
        request: RequestId,
        lines: Result<Option<Vec<String>>, ()>,
    ) {
        self.now = now;
        let Some(Waiting::Transcript(key)) = self.console_waiting.remove(&request) else {
            return;
        };
        let lines = match lines {
            Ok(Some(lines)) => lines,
            Ok(None) => {
                let error = ApiError::new(
                    ApiErrorKind::NotFound,
                    format!("no conversation {:?}", key.id),
                );
                return self.respond_error(request, crate::api::Api::Anthropic, &[], &error);
            }
            Err(()) => {
                let error = ApiError::new(
                    ApiErrorKind::Unavailable,
                    "the session store that keeps this conversation is unavailable; retry shortly",
                )
                .retry_after(2);
                return self.respond_error(request, crate::api::Api::Anthropic, &[], &error);
            }
        };
        let listed = json!({
            "id": key.id,
            "tenant": key.tenant,
            "state": "hibernated",
        });
        let mut bytes = format!("event: conversation\ndata: {listed}\n\n");
        // The conversation's messages; the CLI's own bookkeeping lines (queue operations,
        // attachments, prompt snapshots, meta messages …) are not shown.
        #[derive(serde::Deserialize)]
        struct Entry<'a> {
            #[serde(borrow, rename = "type")]
            kind: Option<&'a str>,
            #[serde(default, rename = "isMeta")]
            meta: bool,
        }
        let mut text = String::new();
        for line in &lines {
            let shown = serde_json::from_str::<Entry<'_>>(line)
                .is_ok_and(|e| matches!(e.kind, Some("user" | "assistant")) && !e.meta);
            if shown {
                text.push_str(line);
                text.push('\n');
            }
        }
        for chunk in crate::transcript::replay(text.as_bytes()) {
            bytes.push_str(&frame(&chunk));
        }
        bytes.push_str(&closed(&key.id));
        let headers = vec![
            ("content-type".to_owned(), "text/event-stream".to_owned()),
            ("cache-control".to_owned(), "no-store".to_owned()),
        ];
        self.respond_whole(request, 200, headers, bytes.into_bytes());
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
        self.send_to_watches(
            |w| matches!(w, Watch::Conversation(s) if *s == session),
            frame.as_bytes(),
        );
    }

    /// A live CLI is gone: its streams say so and end.
    pub(super) fn console_closed(&mut self, session: SessionId, cli_id: &str) {
        self.end_watches(
            |w| matches!(w, Watch::Conversation(s) if *s == session),
            Some(closed(cli_id).as_bytes()),
        );
    }
}

/// The cluster's answer to `GET path` (`/v1/approvals`, `/v1/conversations`, `/v1/stats`)
/// from this node's answer (`mine`) and the other nodes' (`theirs`), for a host that asks
/// every node of its cluster:
/// approvals oldest first; conversations each once (one a node runs before its stored
/// record), those running first, most recently active first; the charts' buckets and counts
/// summed.
pub fn merge_node_answers(
    path: &str,
    mut mine: serde_json::Value,
    theirs: Vec<serde_json::Value>,
) -> serde_json::Value {
    use serde_json::Value;
    if path == "/v1/stats" {
        for other in &theirs {
            add_numbers(&mut mine["now"], &other["now"]);
            let (Some(buckets), Some(others)) =
                (mine["buckets"].as_array_mut(), other["buckets"].as_array())
            else {
                continue;
            };
            for bucket in buckets {
                if let Some(same) = others.iter().find(|b| b["at_ms"] == bucket["at_ms"]) {
                    add_numbers(bucket, same);
                    // The average of the nodes' latencies, weighted by their responses.
                    let (sum, count) = (
                        bucket["added_ms_sum"].as_u64(),
                        bucket["added_count"].as_u64(),
                    );
                    if let (Some(sum), Some(count @ 1..)) = (sum, count) {
                        bucket["added_ms_avg"] = (sum / count).into();
                    }
                }
            }
        }
        return mine;
    }
    let mut data: Vec<Value> = mine["data"].as_array().cloned().unwrap_or_default();
    for other in theirs {
        data.extend(other["data"].as_array().cloned().unwrap_or_default());
    }
    if path == "/v1/approvals" {
        data.sort_by_key(|a| a["created_at_ms"].as_u64().unwrap_or(0));
    } else {
        let stored = |c: &Value| matches!(c["state"].as_str(), Some("hibernated" | "elsewhere"));
        let running: std::collections::BTreeSet<String> = (data.iter())
            .filter(|c| !stored(c))
            .filter_map(|c| c["id"].as_str().map(str::to_owned))
            .collect();
        let mut seen = std::collections::BTreeSet::new();
        data.retain(|c| {
            let id = c["id"].as_str().unwrap_or_default().to_owned();
            !(stored(c) && running.contains(&id)) && seen.insert(id)
        });
        data.sort_by_key(|c| {
            (
                stored(c),
                std::cmp::Reverse(c["last_active_ms"].as_u64().unwrap_or(0)),
            )
        });
    }
    mine["data"] = Value::Array(data);
    mine
}

/// Adds `other`'s numbers into `into`'s, field by field (objects recursively; a null or
/// missing one counts as none; of maxima and averages the largest is kept — an average the
/// caller can weigh again is recomputed by it).
fn add_numbers(into: &mut serde_json::Value, other: &serde_json::Value) {
    use serde_json::Value;
    let (Value::Object(into), Value::Object(other)) = (into, other) else {
        return;
    };
    for (name, theirs) in other {
        if name == "at_ms" {
            continue;
        }
        let mine = into.entry(name.clone()).or_insert(Value::Null);
        match (&mut *mine, theirs) {
            (Value::Object(_), Value::Object(_)) => add_numbers(mine, theirs),
            (Value::Null, Value::Object(_)) => *mine = theirs.clone(),
            (_, Value::Number(n)) => {
                let (a, b) = (mine.as_u64(), n.as_u64());
                *mine = match (name.as_str(), a, b) {
                    ("added_ms_avg" | "added_ms_max", Some(a), Some(b)) => a.max(b).into(),
                    (_, Some(a), Some(b)) => (a + b).into(),
                    (_, None, Some(b)) => b.into(),
                    _ => mine.clone(),
                };
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::merge_node_answers;
    use serde_json::json;

    #[test]
    fn the_cluster_lists_each_conversation_once_running_first_and_sums_the_charts() {
        let mine = json!({"object": "list", "data": [
            {"id": "a", "state": "idle", "node": "one", "last_active_ms": 5},
            {"id": "b", "state": "elsewhere", "last_active_ms": 9},
            {"id": "c", "state": "hibernated", "last_active_ms": 7},
        ]});
        let theirs = vec![
            json!({"object": "list", "data": [
                {"id": "b", "state": "running", "node": "two", "last_active_ms": 9},
                {"id": "c", "state": "hibernated", "last_active_ms": 7},
            ]}),
            json!({"object": "list", "data": [{"id": "d", "state": "hibernated", "last_active_ms": 8}]}),
        ];
        let merged = merge_node_answers("/v1/conversations", mine, theirs);
        let rows: Vec<(&str, &str)> = (merged["data"].as_array().unwrap().iter())
            .map(|c| (c["id"].as_str().unwrap(), c["state"].as_str().unwrap()))
            .collect();
        assert_eq!(
            rows,
            [
                ("b", "running"),
                ("a", "idle"),
                ("d", "hibernated"),
                ("c", "hibernated")
            ]
        );

        // `turns` responses, each `avg` ms added (the largest `max`).
        let bucket = |at: u64, turns: u64, avg: Option<u64>, max: Option<u64>| {
            json!({"at_ms": at, "turns": turns, "tokens": {"output": turns * 10},
                   "added_ms_avg": avg, "added_ms_max": max,
                   "added_ms_sum": avg.map_or(0, |a| a * turns), "added_count": if avg.is_some() { turns } else { 0 }})
        };
        let mine = json!({"bucket_ms": 10_000,
            "buckets": [bucket(0, 1, Some(30), Some(30)), bucket(10_000, 0, None, None)],
            "now": {"conversations": 1, "pool": {"size": 2, "ready": 1}}});
        let theirs = vec![json!({"bucket_ms": 10_000,
            "buckets": [bucket(0, 3, Some(50), Some(70)), bucket(10_000, 3, Some(20), Some(25))],
            "now": {"conversations": 4, "pool": {"size": 1, "ready": 1}}})];
        let merged = merge_node_answers("/v1/stats", mine, theirs);
        assert_eq!(merged["bucket_ms"], 10_000);
        // (30 + 3 × 50) / 4 = 45, weighted; the largest of the maxima.
        assert_eq!(merged["buckets"][0], bucket(0, 4, Some(45), Some(70)));
        assert_eq!(merged["buckets"][1], bucket(10_000, 3, Some(20), Some(25)));
        assert_eq!(
            merged["now"],
            json!({"conversations": 5, "pool": {"size": 3, "ready": 2}})
        );
    }
}
