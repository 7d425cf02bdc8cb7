//! [`Gateway`]: the whole gateway as one sans-IO state machine.

use std::collections::{BTreeMap, VecDeque};

use serde_json::{json, Value};

mod agent_tools;
mod approvals;
mod console;
mod http;
mod managed;
mod pool;
mod prepared;
mod sessions;
mod store;
mod types;

pub use console::merge_node_answers;

pub use http::{
    approval_route, managed_route, prepare, Admission, BodyError, ConfigError, HttpConfig,
    HttpHead, HttpResponse, Prepared,
};
use prepared::prepare_request;
pub use prepared::PreparedRequest;
pub use types::{
    tenant_id, CliSpec, ConversationKey, ConversationRecord, GatewayConfig, GatewayOutput,
    GatewayTimeout, RecordState, ResumeSpec, RouteKey, StoreAnswer, StoreAsk, TenantDirs,
};

use approvals::Approval;
use pool::Warm;
use store::{Finding, Opening};

use super::metrics::{Gauges, Metrics};
use super::registry::{
    Action, Ahead, CallAction, IndexChange, Registry, ResumeReason, Route, SessionId, SessionKind,
};
use super::translate::{check_request, prompt_content};
use crate::api::response::{EncoderOptions, Outcome, ResponseEncoder};
use crate::api::{self, Api, ApiError, ApiErrorKind, ApiRequest};
use crate::session::{CommandError, Output, PermissionDecision, ReadyPrompt, Session, UserMessage};
use crate::{Chunk, Timestamp};

/// A request's id, chosen by the host; unique among the requests the gateway has not ended.
pub type RequestId = u64;

/// The name of the in-process MCP server that carries the client's tools: the model sees them
/// as `mcp__client__<name>`.
pub const CLIENT_SERVER: &str = "client";

/// Variables that would let the CLI time out, defer or background a held call (docs/HOLD.md,
/// "Settings that do limit it").
pub const STRIPPED_ENV: &[&str] = &[
    "MCP_TOOL_TIMEOUT",
    "CLAUDE_CODE_SDK_MCP_TOOL_IDLE_TIMEOUT",
    "CLAUDE_AUTO_BACKGROUND_TASKS",
];

/// One live CLI.
#[derive(Debug)]
struct Live {
    session: Session,
    /// The caller whose conversation it holds (empty for a warm CLI nobody took yet).
    tenant: String,
    /// The request whose response this session's chunks feed.
    request: Option<RequestId>,
    /// The `initialize` request not answered yet, the prompt waiting for it and the deadline.
    starting: Option<Starting>,
    /// The turn was interrupted (its client went away): close the session if it has not ended
    /// by then.
    settle_by: Option<Timestamp>,
    /// When the account's rate limit lifts (Unix ms), after the CLI said it was reached
    /// (`rate_limit_event`, status `rejected`).
    rate_limit_resets_ms: Option<u64>,
    /// The id of its CLI session (a UUID), which names its transcript: the stored
    /// conversation's id.
    cli_id: String,
    /// Where its CLI writes its transcript, once known.
    transcript: Option<String>,
    /// Transcript lines a warm CLI mirrored before a conversation took it.
    mirrored: Vec<crate::Json>,
    /// The conversation's record as last saved to the session store.
    record: Option<ConversationRecord>,
    /// What the console shows of it.
    watched: console::Watched,
    /// The directory it works in, when the gateway chose one.
    cwd: Option<String>,
}

#[derive(Debug)]
struct Starting {
    init_id: String,
    /// The first prompt, sent once the CLI has answered; none for a warm CLI.
    prompt: Option<FirstPrompt>,
    deadline: Timestamp,
}

/// How many ended sessions wait for [`Gateway::take_ended`] before the gateway frees them
/// itself.
const ENDED_KEPT: usize = 16;

/// Ended sessions and responses, to drop ([`Gateway::take_ended`]).
#[derive(Debug)]
pub struct Ended(#[allow(dead_code)] Vec<Retired>);

/// Something ended, kept to be freed by the host.
#[derive(Debug)]
enum Retired {
    Session(#[allow(dead_code)] Box<Live>),
    Response(#[allow(dead_code)] Box<InFlight>),
}

/// A new session's first prompt: made under the gateway, or serialized ahead with the
/// request ([`PreparedRequest`]).
#[derive(Debug)]
enum FirstPrompt {
    Message(UserMessage),
    Ready(ReadyPrompt),
}

impl FirstPrompt {
    fn send(self, session: &mut Session, now: Timestamp) -> Result<(), CommandError> {
        match self {
            FirstPrompt::Message(message) => session.send_user_message(now, message),
            FirstPrompt::Ready(ready) => session.send_ready_prompt(now, ready),
        }
    }
}

/// What an event stream watches.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Watch {
    /// A tenant's approvals.
    Approvals(String),
    /// A Managed Agents session (its id), with the previews it opted into (`event_deltas`).
    AgentSession(String, sessions::Previews),
    /// A live conversation's chunks, for the console.
    Conversation(SessionId),
}

/// One response in flight.
#[derive(Debug)]
struct InFlight {
    session: SessionId,
    /// The caller, for the per-key cap.
    tenant: String,
    api: Api,
    stream: bool,
    encoder: ResponseEncoder,
    /// The head has been sent (streams only; a JSON response is sent whole).
    responded: bool,
    /// Headers every answer of this request carries.
    headers: Vec<(String, String)>,
    /// The next keep-alive frame, once streaming.
    next_ping: Option<Timestamp>,
}

impl InFlight {
    fn new(
        session: SessionId,
        tenant: &str,
        api: Api,
        stream: bool,
        encoder: ResponseEncoder,
        headers: Vec<(String, String)>,
    ) -> InFlight {
        InFlight {
            session,
            tenant: tenant.to_owned(),
            api,
            stream,
            encoder,
            responded: false,
            headers,
            next_ping: None,
        }
    }
}

/// The whole gateway as one sans-IO state machine: the HTTP face, conversations, their CLI
/// sessions and the responses in flight.
///
/// It is to [`Session`] what quinn-proto's `Endpoint` is to its `Connection`: it owns every
/// conversation's CLI [`Session`] and the [`ResponseEncoder`] of every response in flight, the
/// conversation registry (history-hash index, held client tool calls, stored responses), the
/// session cap and the CLI's spawn policy (its arguments and environment, [`CliSpec`]), and it
/// decides on each HTTP request (browser guard, routes, keys). A host (`ccwire serve`, the npm
/// `Gateway`) only moves bytes and time:
///
/// ```text
/// loop {
///     select! {
///         request head  => match gateway.admit(head) {
///                              Respond(response) => send it,
///                              Admit { tenant, cors } => read at most gateway.max_body() bytes,
///                          }
///         request body  => gateway.handle_http(now, req, head, tenant, body),
///                          (the body read and prepared first with `prepare`, off any lock)
///         an API body   => gateway.handle_request(now, req, api, tenant, body),
///                          (a host that routes and authenticates itself)
///         approvals SSE => gateway.handle_approval_events(now, req, tenant),
///         client gone   => gateway.handle_client_gone(now, req),
///         CLI stdout    => gateway.handle_stdout(now, session, bytes),
///         CLI exited    => gateway.handle_exit(now, session, code, signal, stderr),
///         spawn failed  => gateway.handle_spawn_failed(now, session, error),
///         fetched       => gateway.handle_fetched(now, req, answer body),
///         the store     => gateway.handle_store(now, answer): what a lookup found (Found,
///                          FoundResponse, Listed, ManagedLoaded, TranscriptLoaded), or that
///                          a lookup, a write or a resume's transcript failed, or that another
///                          gateway resumed a conversation since (Superseded)
///         timer         => gateway.handle_timeout(now),
///     }
///     while let Some(output) = gateway.poll_output() {
///         match output {
///             Spawn { session, spec }        => (spec.resume: write its transcript first) start the CLI
///                                               with spec.args and spec.env, without spec.env_remove,
///             Write { session, bytes }       => write to that CLI's stdin,
///             Close { session }              => close its stdin; kill it after a grace period,
///             Respond { request, status, headers } => send the response head (with the cors headers),
///             Body { request, bytes }        => send body bytes (SSE frames or JSON),
///             End { request }                => finish the response,
///             Fetch { request, url, .. }     => POST it, then handle_fetched,
///             DrainRequested                 => exit once gateway.is_drained(),
///             Claim / Release { key }        => share the routing index (scale-out),
///             Store(ask)                     => carry the StoreAsk out in order: keep (Append,
///                                               Save: a response ends once its record is kept,
///                                               Pool, Response, Managed) or look up (Find,
///                                               FindResponse, List, LoadManaged, Load) and
///                                               give the answer to handle_store,
///             RemoveDir { path }             => delete a deleted session's directory once its CLI is gone,
///         }
///     }
///     timer = gateway.poll_timeout();
/// }
/// ```
///
/// (`scripts/check-docs.mjs` fails when an input or an output is missing here.)
///
/// Every request gets exactly one `Respond`, then any number of `Body`, then one `End`. Output
/// order is deterministic: the same inputs give the same outputs.
///
/// # Scale-out
///
/// A conversation lives in one CLI process on one machine, with its held tool calls, so more
/// than one gateway needs affinity: each request must reach the gateway that holds its
/// conversation. The seam for that is two pieces of data, no IO:
///
/// - [`Gateway::route_key`] computes, from a request alone, the key of the conversation it
///   continues (the scoped history hash, or the stored response it names), or that it starts a
///   new one (any gateway will do). Any gateway, or a router in front of them, can compute it.
/// - With [`GatewayConfig::publish_index`], every change of what this gateway serves comes out
///   as [`GatewayOutput::Claim`] and [`GatewayOutput::Release`] with such keys (digests: no
///   tenant key leaves the gateway).
///
/// A host that scales out writes claims and releases to a shared registry (a Redis hash of key
/// → gateway address, with the gateway's liveness as a TTL) and, for a request whose key another
/// gateway claims, forwards it there. A key nobody claims (the owner died or expired it) is
/// served here: resumed from the session store when the gateways share one, else from the
/// history the request carries, as after a restart. The in-memory registry of one
/// gateway is the default; a shared one is a backend of the host, not a change of this engine.
#[derive(Debug)]
pub struct Gateway {
    config: GatewayConfig,
    registry: Registry,
    lives: BTreeMap<SessionId, Live>,
    requests: BTreeMap<RequestId, InFlight>,
    outputs: VecDeque<GatewayOutput>,
    /// Ended sessions and responses not freed yet ([`take_ended`](Gateway::take_ended)).
    ended: Vec<Retired>,
    /// The CLI's model list, from the first `initialize` answer.
    models: Option<Value>,
    next_response: u64,
    /// The time of the latest input.
    now: Timestamp,
    /// Each request not ended yet: its API and when it came (for the metrics).
    arrivals: BTreeMap<RequestId, Arrival>,
    metrics: Metrics,
    /// The counters of each tenant's own requests ([`tenant_metrics`](Self::tenant_metrics)).
    tenant_metrics: BTreeMap<String, Metrics>,
    /// Requests waiting for a free turn, oldest first.
    queue: VecDeque<Queued>,
    /// A response ended since the queue was last looked at.
    turn_freed: bool,
    /// CLIs started ahead of need, by session (oldest first).
    pool: BTreeMap<SessionId, Warm>,
    /// Warm CLIs to start, one at a time: their settings.
    pool_wanted: VecDeque<(String, pool::NewCli)>,
    /// Draining (shutting down): until when running turns may finish.
    draining: Option<Timestamp>,
    /// Permission requests waiting for a person, by approval id.
    approvals: BTreeMap<String, Approval>,
    /// The Managed Agents API's agents and environments, by tenant.
    managed: managed::Managed,
    /// The Managed Agents API's sessions.
    agent_sessions: sessions::AgentSessions,
    next_approval: u64,
    /// Streams of approval events (`GET /v1/approvals/events`): their tenant and next
    /// keep-alive.
    watchers: BTreeMap<RequestId, (Watch, Timestamp)>,
    /// Console requests waiting for the session store.
    console_waiting: BTreeMap<RequestId, console::Waiting>,
    /// The HTTP face.
    front: http::Front,
    /// Requests waiting for the session store to find their conversation.
    finding: BTreeMap<RequestId, Finding>,
    /// Requests waiting for the session store to read a stored response they continue.
    fetching: BTreeMap<RequestId, Queued>,
    /// Conversation ids given out ([`conversation_id`](Self::conversation_id)).
    next_conversation: u64,
}

/// When a request came and, for the added-latency histogram, when its turn reached the CLI
/// and when the CLI first answered it.
#[derive(Debug, Clone)]
struct Arrival {
    api: Api,
    tenant: String,
    at: Timestamp,
    cli_sent: Option<Timestamp>,
    cli_first: Option<Timestamp>,
}

/// A request waiting for a free turn.
#[derive(Debug)]
struct Queued {
    request: RequestId,
    api: Api,
    tenant: String,
    parsed: PreparedRequest,
    deadline: Timestamp,
}

impl Gateway {
    /// A gateway with these settings.
    ///
    /// # Errors
    /// An HTTP face that must not serve: a listener other than loopback without API keys, or
    /// an origin or host name that cannot be allowed.
    pub fn new(config: GatewayConfig) -> Result<Gateway, ConfigError> {
        let front = http::Front::new(config.http.clone(), &config.enabled_tools, config.console)?;
        let mut registry = Registry::new(config.limits);
        if config.publish_index {
            registry.publish_index();
        }
        if config.store {
            registry.persist_stored();
        }
        Ok(Gateway {
            registry,
            config,
            lives: BTreeMap::new(),
            requests: BTreeMap::new(),
            outputs: VecDeque::new(),
            ended: Vec::new(),
            models: None,
            next_response: 0,
            now: 0,
            arrivals: BTreeMap::new(),
            metrics: Metrics::default(),
            tenant_metrics: BTreeMap::new(),
            queue: VecDeque::new(),
            turn_freed: false,
            pool: BTreeMap::new(),
            pool_wanted: VecDeque::new(),
            draining: None,
            approvals: BTreeMap::new(),
            managed: managed::Managed::default(),
            agent_sessions: sessions::AgentSessions::default(),
            next_approval: 0,
            watchers: BTreeMap::new(),
            console_waiting: BTreeMap::new(),
            front,
            finding: BTreeMap::new(),
            fetching: BTreeMap::new(),
            next_conversation: 0,
        })
    }

    // ---- getters -------------------------------------------------------------------------

    /// Live CLI sessions.
    pub fn session_count(&self) -> usize {
        self.lives.len()
    }

    /// Client tool calls held open, over all sessions.
    pub fn held_count(&self) -> usize {
        self.registry.held_count()
    }

    /// The live conversations of `tenant` (an API key) and the client tool calls they hold.
    pub fn tenant_counts(&self, tenant: &str) -> (usize, usize) {
        let mine = self.lives.iter().filter(|(_, live)| live.tenant == tenant);
        mine.fold((0, 0), |(sessions, held), (id, _)| {
            (sessions + 1, held + self.registry.held_in(*id))
        })
    }

    /// CLIs started ahead of need, waiting for a conversation.
    pub fn pool_count(&self) -> usize {
        self.pool.len()
    }

    /// Responses in flight.
    pub fn request_count(&self) -> usize {
        self.requests.len()
    }

    /// The ids of live sessions, in order.
    pub fn cli_sessions(&self) -> impl Iterator<Item = SessionId> + '_ {
        self.lives.keys().copied()
    }

    /// Whether a request waits for the session store to find its conversation or a stored
    /// response it continues ([`StoreAsk::Find`],
    /// [`StoreAsk::FindResponse`]).
    pub fn is_finding(&self, request: RequestId) -> bool {
        self.finding.contains_key(&request) || self.fetching.contains_key(&request)
    }

    /// Whether the gateway still holds `request` open: a response in flight, a lookup, an
    /// event stream (approvals, a session's). A host whose client went away from such a
    /// request says so ([`handle_client_gone`](Self::handle_client_gone)).
    pub fn holds(&self, request: RequestId) -> bool {
        self.requests.contains_key(&request)
            || self.is_finding(request)
            || self.watchers.contains_key(&request)
            || self.console_waiting.contains_key(&request)
            || self.managed.is_loading(request)
    }

    /// The session a request's response comes from, while it is in flight.
    pub fn request_session(&self, request: RequestId) -> Option<SessionId> {
        self.requests.get(&request).map(|r| r.session)
    }

    /// The time now as Unix ms.
    fn wall_ms(&self) -> u64 {
        self.config.unix_epoch_ms.saturating_add(self.now)
    }

    /// Counts for the gateway and for `tenant`.
    fn count(&mut self, tenant: &str, f: impl Fn(&mut Metrics)) {
        f(&mut self.metrics);
        if !self.tenant_metrics.contains_key(tenant) {
            self.tenant_metrics
                .insert(tenant.to_owned(), Metrics::default());
        }
        f(self.tenant_metrics.get_mut(tenant).expect("inserted above"));
    }

    /// `GET /metrics` with a tenant's key: the series of its own requests (responses, turns,
    /// tokens, latencies, clients gone) and its own sessions, responses, queued requests and
    /// approvals; nothing of other tenants or of the gateway's processes.
    pub fn tenant_metrics(&self, tenant: &str) -> String {
        let empty = Metrics::default();
        let mine = self.tenant_metrics.get(tenant).unwrap_or(&empty);
        let sessions = self.lives.values().filter(|l| l.tenant == tenant).count();
        let text = mine.render_tenant(&Gauges {
            sessions,
            starting: 0,
            pooled: 0,
            pool_ready: 0,
            held: 0,
            in_flight: self
                .requests
                .values()
                .filter(|r| r.tenant == tenant)
                .count(),
            queued: self.queue.iter().filter(|q| q.tenant == tenant).count(),
            stored: 0,
            approvals: self
                .approvals
                .values()
                .filter(|a| a.tenant == tenant)
                .count(),
        });
        self.labelled(text)
    }

    /// Metrics text with this gateway's [`node`](GatewayConfig::node) label, if it has one.
    fn labelled(&self, text: String) -> String {
        match &self.config.node {
            Some(node) => crate::gateway::metrics::with_label(&text, "node", node),
            None => text,
        }
    }

    /// `GET /metrics` with the admin key (or on a gateway without keys): the gateway's
    /// counters, gauges and latency histograms in the Prometheus text format.
    pub fn metrics(&self) -> String {
        let starting = self
            .lives
            .iter()
            .filter(|(id, l)| l.starting.is_some() && !self.pool.contains_key(id))
            .count();
        let text = self.metrics.render(&Gauges {
            sessions: self.lives.len() - starting - self.pool.len(),
            starting,
            pooled: self.pool.len(),
            pool_ready: self
                .pool
                .keys()
                .filter(|id| self.lives.get(id).is_some_and(|l| l.starting.is_none()))
                .count(),
            held: self.registry.held_count(),
            in_flight: self.requests.len(),
            queued: self.queue.len(),
            stored: self.registry.stored_count(),
            approvals: self.approvals.len(),
        });
        self.labelled(text)
    }

    /// `GET /v1/models`: the CLI's models (once a CLI has said which) and its aliases, in one
    /// list that reads as both APIs' shapes.
    pub fn models(&self) -> Value {
        let mut ids: Vec<(String, String)> = Vec::new();
        if let Some(Value::Array(list)) = &self.models {
            for model in list {
                if let Some(id) = model.get("value").and_then(Value::as_str) {
                    let name = model
                        .get("displayName")
                        .and_then(Value::as_str)
                        .unwrap_or(id);
                    ids.push((id.to_owned(), name.to_owned()));
                }
            }
        }
        for alias in ["default", "sonnet", "opus", "haiku"] {
            if !ids.iter().any(|(id, _)| id == alias) {
                ids.push((alias.to_owned(), alias.to_owned()));
            }
        }
        if let Some(default) = &self.config.default_model {
            if !ids.iter().any(|(id, _)| id == default) {
                ids.push((default.clone(), default.clone()));
            }
        }
        let data: Vec<Value> = ids
            .iter()
            .map(|(id, name)| {
                json!({
                    "id": id, "type": "model", "object": "model", "display_name": name,
                    "created_at": "1970-01-01T00:00:00Z", "created": 0, "owned_by": "anthropic",
                })
            })
            .collect();
        json!({
            "object": "list",
            "data": data,
            "has_more": false,
            "first_id": ids.first().map(|(id, _)| id),
            "last_id": ids.last().map(|(id, _)| id),
        })
    }

    /// The key that says which gateway must serve a request (see "Scale-out" above): the scoped
    /// hash of the history it continues, the stored response it names, or none for a new
    /// conversation. Changes nothing.
    ///
    /// # Errors
    /// The request's own validation error, as [`handle_request`](Self::handle_request) would
    /// answer it.
    pub fn route_key(api: Api, tenant: &str, body: &[u8]) -> Result<RouteKey, ApiError> {
        prepared::prepare_request(api, tenant, body).map(|r| r.route_key(tenant))
    }

    // ---- inputs --------------------------------------------------------------------------

    /// A client's request on one of the three APIs without its HTTP head (for a host that
    /// routes and authenticates requests itself; [`handle_http`](Self::handle_http) does both),
    /// authenticated as `tenant` (the caller's key; it scopes conversations and stored
    /// responses). The response comes out as `Respond`, `Body`… and `End` outputs for
    /// `request`.
    pub fn handle_request(
        &mut self,
        now: Timestamp,
        request: RequestId,
        api: Api,
        tenant: &str,
        body: &[u8],
    ) {
        let prepared = prepared::prepare_request(api, tenant, body);
        self.handle_prepared(now, request, api, tenant, prepared);
    }

    /// [`handle_request`](Self::handle_request) with its body already read and prepared by
    /// [`prepare_request`].
    fn handle_prepared(
        &mut self,
        now: Timestamp,
        request: RequestId,
        api: Api,
        tenant: &str,
        parsed: Result<PreparedRequest, ApiError>,
    ) {
        self.now = now;
        self.arrivals.insert(
            request,
            Arrival {
                api,
                tenant: tenant.to_owned(),
                at: now,
                cli_sent: None,
                cli_first: None,
            },
        );
        let parsed = match parsed {
            Ok(r) => r,
            Err(error) => return self.respond_error(request, api, &[], &error),
        };
        // Draining, nothing waits: a new conversation gets its 503 at once, a running one's
        // next turn goes ahead (only the live sessions' turns remain to be served).
        if self.draining.is_some() {
            return self.serve(now, request, api, tenant, parsed);
        }
        // Requests wait their turn in order: none overtakes one already waiting.
        if self.queue.is_empty() && self.has_room(tenant) {
            return self.serve(now, request, api, tenant, parsed);
        }
        if self.queue.len() >= self.config.max_queue {
            let error = ApiError::new(
                ApiErrorKind::RateLimit,
                format!(
                    "the gateway is at its limit of concurrent requests and {} are waiting; \
                     retry later",
                    self.queue.len()
                ),
            )
            .retry_after(1);
            return self.respond_error(request, api, &[], &error);
        }
        self.queue.push_back(Queued {
            request,
            api,
            tenant: tenant.to_owned(),
            parsed,
            deadline: now.saturating_add(self.config.queue_timeout_ms),
        });
        // It may fit now behind requests that wait for their own tenant's turns.
        self.turn_freed = true;
    }

    /// Whether a response may start now for `tenant`, under the concurrency caps.
    fn has_room(&self, tenant: &str) -> bool {
        if self.requests.len() >= self.config.max_concurrent {
            return false;
        }
        let mine = self
            .requests
            .values()
            .filter(|r| r.tenant == tenant)
            .count();
        mine < self.config.max_concurrent_per_key
    }

    /// Serves the waiting requests that fit now, oldest first (a tenant at its own cap does
    /// not hold up the others).
    fn run_queue(&mut self) {
        self.turn_freed = false;
        let now = self.now;
        let mut i = 0;
        while i < self.queue.len() && self.requests.len() < self.config.max_concurrent {
            if !self.has_room(&self.queue[i].tenant) {
                i += 1;
                continue;
            }
            let queued = self.queue.remove(i).expect("in range");
            self.serve(
                now,
                queued.request,
                queued.api,
                &queued.tenant,
                queued.parsed,
            );
        }
    }

    /// Routes a valid request and starts its response.
    fn serve(
        &mut self,
        now: Timestamp,
        request: RequestId,
        api: Api,
        tenant: &str,
        prepared: PreparedRequest,
    ) {
        // A stored response this gateway does not hold (it expired here, or was stored
        // before a restart) is read from the session store first.
        let previous = prepared.request.previous_response_id.as_deref();
        let missing = previous
            .filter(|_| self.config.store)
            .and_then(|id| self.registry.missing_link(tenant, id));
        if let Some(id) = missing {
            return self.fetch_response(request, api, tenant, prepared, id);
        }
        self.route(now, request, api, tenant, prepared);
    }

    /// [`serve`](Self::serve) with every stored response the request continues at hand.
    fn route(
        &mut self,
        now: Timestamp,
        request: RequestId,
        api: Api,
        tenant: &str,
        prepared: PreparedRequest,
    ) {
        let PreparedRequest {
            request: mut parsed,
            scope,
            hashes,
            client_tools,
            tools,
            tools_digest,
            start_prompt,
            structured,
            session: managed,
        } = prepared;
        let mut headers = Vec::new();
        if !parsed.ignored.is_empty() {
            headers.push((
                "x-ccwire-ignored".to_owned(),
                ignored_header(&parsed.ignored),
            ));
        }
        let response_id = (api == Api::Responses).then(|| self.response_id());
        let previous_response_id = parsed.previous_response_id.clone();
        let ahead = Ahead {
            scope: &scope,
            hashes,
            prompt_ready: start_prompt.is_some(),
            find: self.config.store,
        };
        let route = self.registry.route_prepared(
            tenant,
            &mut parsed,
            ahead,
            response_id.as_deref().unwrap_or_default(),
            now,
        );
        let route = match route {
            Ok(route) => route,
            Err(error) => return self.respond_error(request, api, &headers, &error),
        };
        let opening = Opening {
            api,
            tenant: tenant.to_owned(),
            parsed,
            client_tools,
            tools,
            tools_digest,
            start_prompt,
            structured,
            headers,
            response_id,
            previous_response_id,
            session: managed,
        };
        match route {
            Route::Find { hash, diverged } => self.find(request, opening, hash, diverged),
            route => self.open(now, request, opening, route, None),
        }
    }

    /// Starts the response of a routed request: continues its live session, or starts one
    /// (that resumes a stored conversation with `resume`).
    fn open(
        &mut self,
        now: Timestamp,
        request: RequestId,
        opening: Opening,
        route: Route,
        resume: Option<ResumeSpec>,
    ) {
        let Opening {
            api,
            tenant,
            parsed,
            client_tools,
            tools,
            tools_digest,
            start_prompt,
            structured,
            mut headers,
            response_id,
            previous_response_id,
            session: managed,
        } = opening;
        let managed_id = managed.as_ref().map(|m| m.id.as_str());
        let tenant = tenant.as_str();
        if let (
            Some(_),
            Route::Start {
                session, replaces, ..
            },
        ) = (self.draining, &route)
        {
            let (session, replaces) = (*session, *replaces);
            self.registry.close(session);
            if let Some(old) = replaces {
                self.close(now, old);
            }
            let error = ApiError::new(
                ApiErrorKind::Unavailable,
                "the gateway is shutting down and takes no new conversations; retry on another",
            )
            .retry_after(1);
            return self.respond_error(request, api, &headers, &error);
        }
        // A history no CLI wrote goes to a new CLI as the transcript it resumes; where it
        // cannot, as one prompt that retells it (counted, with why).
        let mut rebuilt_because = None;
        let (route, resume, start_prompt) = match (route, resume) {
            (
                Route::Start {
                    session,
                    kind: SessionKind::Rebuilt,
                    prompt,
                    replaces,
                    diverged,
                },
                None,
            ) => match self.write_history(tenant, managed_id, &parsed) {
                Ok((spec, prompt)) => {
                    let reason = match diverged {
                        Some(at) => ResumeReason::Diverged(at),
                        None => ResumeReason::History,
                    };
                    let route = Route::Start {
                        session,
                        kind: SessionKind::Resumed(reason),
                        prompt,
                        replaces,
                        diverged,
                    };
                    (route, Some(spec), None)
                }
                Err(why) => {
                    rebuilt_because = Some(why);
                    self.count(tenant, |m| *m.rebuilds.entry(why).or_default() += 1);
                    let route = Route::Start {
                        session,
                        kind: SessionKind::Rebuilt,
                        prompt,
                        replaces,
                        diverged,
                    };
                    (route, None, start_prompt)
                }
            },
            (route, resume) => (route, resume, start_prompt),
        };
        let kind = match &route {
            Route::Continue { .. } | Route::Find { .. } => SessionKind::Continued,
            Route::Start { kind, .. } => *kind,
        };
        headers.push(("x-ccwire-session".to_owned(), kind.as_str().to_owned()));
        if let Some(why) = rebuilt_because {
            headers.push(("x-ccwire-session-reason".to_owned(), why.to_owned()));
        }
        if let SessionKind::Resumed(reason) = kind {
            headers.push(("x-ccwire-session-reason".to_owned(), reason.to_string()));
            self.count(tenant, |m| {
                *m.resumes.entry(reason.as_str()).or_default() += 1
            });
        }
        let wall = self.wall_ms();
        self.count(tenant, |m| {
            *m.turns.entry(kind.as_str()).or_default() += 1;
            m.recent.at(wall).turns += 1;
        });
        let encoder = ResponseEncoder::new(EncoderOptions {
            api,
            stream: parsed.stream,
            model: parsed.model.clone(),
            id: response_id,
            created: (self.config.unix_epoch_ms.saturating_add(now)) / 1000,
            include_usage: parsed.include_usage,
            client_tools,
            client_tool_prefix: None,
            previous_response_id,
            store: parsed.store,
            show_thinking: parsed.show_thinking,
            structured: structured.as_ref().map(|s| s.answer.clone()),
        });
        match route {
            Route::Find { .. } => unreachable!("a request looked up is opened once found"),
            Route::Continue {
                session,
                answers,
                prompt,
            } => {
                let Some(live) = self.lives.get_mut(&session) else {
                    // The registry and the live sessions are closed together.
                    self.registry.close(session);
                    let error = ApiError::new(
                        ApiErrorKind::Api,
                        "the conversation's Claude Code session ended",
                    );
                    return self.respond_error(request, api, &headers, &error);
                };
                live.request = Some(request);
                let flight = InFlight::new(session, tenant, api, parsed.stream, encoder, headers);
                self.requests.insert(request, flight);
                for (request_id, result) in answers {
                    // A call the CLI gave up on meanwhile is answered no more.
                    let _ = live.session.respond_mcp(now, &request_id, result);
                }
                if let Some(prompt) = prompt {
                    let message = UserMessage::blocks(prompt_content(&prompt));
                    if let Err(error) = live.session.send_user_message(now, message) {
                        let error = ApiError::new(ApiErrorKind::Api, error.to_string());
                        self.fail(now, request, error);
                    }
                }
                self.sent_to_cli(request);
                self.drain_session(now, session);
            }
            Route::Start {
                session,
                prompt,
                replaces,
                ..
            } => {
                if let Some(old) = replaces {
                    self.close(now, old);
                }
                let cli = self.cli_for(
                    &parsed,
                    tools,
                    structured.as_ref(),
                    tenant,
                    managed.as_ref(),
                );
                // The pool starts more CLIs of these settings; without one they serve this
                // CLI alone (a request's tools are not copied). A resumed conversation's CLI
                // is its own, and so is a Managed Agents session's (its own directory).
                let settings = (self.config.pool > 0 && resume.is_none() && managed.is_none())
                    .then(|| cli.clone());
                let signature = format!(
                    "{}\n{:?}\n{}\n{tools_digest}",
                    cli.spec.args.join("\u{0}"),
                    cli.spec.tenant,
                    Value::Object(cli.init.clone()),
                );
                let prompt = match start_prompt {
                    Some(ready) => FirstPrompt::Ready(ready),
                    None => FirstPrompt::Message(UserMessage::blocks(prompt_content(&prompt))),
                };
                // A tenant at its own cap makes room from its own conversations.
                let own = self
                    .lives
                    .iter()
                    .filter(|(id, l)| l.tenant == tenant && !self.pool.contains_key(id))
                    .count();
                if own >= self.config.max_sessions_per_key {
                    let Some(idle) = self.idle_to_evict(Some(tenant)) else {
                        self.registry.close(session);
                        let limit = self.config.max_sessions_per_key;
                        let why = format!("this key runs its maximum of {limit} conversations");
                        return self.respond_error(request, api, &headers, &at_cap(why));
                    };
                    self.evict(now, idle);
                }
                let warm = match (&resume, &managed) {
                    (None, None) => self.take_warm(&signature),
                    _ => None,
                };
                let session = match warm {
                    Some(warm) => {
                        // A CLI started ahead takes the conversation.
                        self.registry.rekey(session, warm);
                        self.metrics.pool_hits += 1;
                        let wall = self.wall_ms();
                        self.metrics.recent.at(wall).pool_hits += 1;
                        let live = self.lives.get_mut(&warm).expect("warm CLIs are live");
                        match &mut live.starting {
                            Some(starting) => starting.prompt = Some(prompt),
                            None => {
                                let _ = prompt.send(&mut live.session, now);
                                self.sent_to_cli(request);
                            }
                        }
                        warm
                    }
                    None => {
                        if settings.is_some() {
                            self.metrics.pool_misses += 1;
                            let wall = self.wall_ms();
                            self.metrics.recent.at(wall).pool_misses += 1;
                        }
                        // A conversation goes before a warm CLI of other settings, and before
                        // the CLI of a conversation that waits for nothing (it is resumed or
                        // rebuilt when it comes back): the tenant's own first, the least
                        // recently used.
                        if self.lives.len() >= self.config.max_sessions {
                            if let Some(&oldest) = self.pool.keys().next() {
                                self.close(now, oldest);
                            } else if let Some(idle) = self
                                .idle_to_evict(Some(tenant))
                                .or_else(|| self.idle_to_evict(None))
                            {
                                self.evict(now, idle);
                            }
                        }
                        if self.lives.len() >= self.config.max_sessions {
                            self.registry.close(session);
                            let limit = self.config.max_sessions;
                            let why = format!("the gateway runs its maximum of {limit} sessions");
                            return self.respond_error(request, api, &headers, &at_cap(why));
                        }
                        self.spawn(now, session, cli, Some(prompt), resume);
                        session
                    }
                };
                if let Some(live) = self.lives.get_mut(&session) {
                    live.request = Some(request);
                    live.tenant = tenant.to_owned();
                }
                self.flush_mirrored(session);
                let flight = InFlight::new(session, tenant, api, parsed.stream, encoder, headers);
                self.requests.insert(request, flight);
                self.drain_session(now, session);
                if let Some(cli) = settings {
                    self.refill(now, &signature, &cli, warm.is_some());
                }
            }
        }
    }

    /// What a session's CLI wrote to its stdout, split anywhere.
    pub fn handle_stdout(&mut self, now: Timestamp, session: SessionId, bytes: &[u8]) {
        self.now = now;
        let Some(live) = self.lives.get_mut(&session) else {
            return;
        };
        live.session.handle_stdout(now, bytes);
        self.drain_session(now, session);
    }

    /// A session's CLI ended (`stderr`: the end of what it wrote there, for the error a
    /// waiting client gets).
    pub fn handle_exit(
        &mut self,
        now: Timestamp,
        session: SessionId,
        code: Option<i32>,
        signal: Option<i32>,
        stderr: &str,
    ) {
        self.now = now;
        let Some(live) = self.lives.get(&session) else {
            return;
        };
        let how = if signal.is_some() { "signal" } else { "exit" };
        *self.metrics.exits.entry(how).or_default() += 1;
        // The client hears why, with the CLI's last words, before the session's own account.
        if let Some(request) = live.request {
            let how = match (code, signal) {
                (_, Some(signal)) => format!("was killed by signal {signal}"),
                (Some(code), None) => format!("exited with status {code}"),
                (None, None) => "ended".to_owned(),
            };
            let mut message = if live.starting.is_some() {
                format!("cannot start a Claude Code session: the CLI {how}")
            } else {
                format!("the Claude Code session {how} before the response was complete")
            };
            let stderr = stderr.trim();
            if !stderr.is_empty() {
                message.push_str(": ");
                message.push_str(stderr);
            }
            self.fail(now, request, ApiError::new(ApiErrorKind::Api, message));
        }
        self.record_closed(session, RecordState::Ended);
        let Some(live) = self.lives.get_mut(&session) else {
            return;
        };
        live.session.handle_stdout_eof(now);
        live.session.handle_process_exit(now, code, signal);
        self.drain_session(now, session);
        if let Some(live) = self.lives.remove(&session) {
            self.console_closed(session, &live.cli_id);
            self.retire(Retired::Session(Box::new(live)));
        }
        self.pool.remove(&session);
        self.forget_session_approvals(session);
        self.registry.close(session);
    }

    /// The host could not start a session's CLI (`error` says why).
    pub fn handle_spawn_failed(&mut self, now: Timestamp, session: SessionId, error: &str) {
        let error = ApiError::new(
            ApiErrorKind::Api,
            format!("cannot start a Claude Code session: {error}"),
        );
        self.not_started(now, session, error);
    }

    /// The session store could not give the transcript a new CLI was to resume (it failed or
    /// did not answer in time; the host logs why): the CLI is not started, and the request
    /// gets a 503 that asks to retry shortly, like a lookup the store could not answer.
    pub(super) fn store_resume_unavailable(&mut self, now: Timestamp, session: SessionId) {
        *self.metrics.store_failures.entry("load").or_default() += 1;
        let error = ApiError::new(
            ApiErrorKind::Unavailable,
            "the session store that keeps this conversation is unavailable; retry shortly",
        )
        .retry_after(2);
        self.not_started(now, session, error);
    }

    /// A session whose CLI never started: gone, its request failed with `error`.
    fn not_started(&mut self, now: Timestamp, session: SessionId, error: ApiError) {
        self.now = now;
        let Some(live) = self.lives.remove(&session) else {
            return;
        };
        self.console_closed(session, &live.cli_id);
        *self.metrics.exits.entry("spawn_failed").or_default() += 1;
        self.pool.remove(&session);
        // What was queued for the process that never was.
        self.outputs
            .retain(|o| !matches!(o, GatewayOutput::Write { session: s, .. } if *s == session));
        self.registry.close(session);
        if let Some(request) = live.request {
            self.fail(now, request, error);
        }
    }

    /// The client of a request went away before its response ended: the turn is interrupted
    /// (the conversation stays busy until it has ended), or a session still starting is
    /// closed. Nothing more is sent for the request.
    pub fn handle_client_gone(&mut self, now: Timestamp, request: RequestId) {
        self.now = now;
        if self.watchers.remove(&request).is_some()
            || self.console_waiting.remove(&request).is_some()
            || self.front.counting.remove(&request).is_some()
        {
            return;
        }
        if let Some(at) = self.queue.iter().position(|q| q.request == request) {
            let gone = self.queue.remove(at).expect("in range");
            self.arrivals.remove(&request);
            self.count(&gone.tenant, |m| m.clients_gone += 1);
            return;
        }
        if let Some(gone) = self.fetching.remove(&request) {
            self.arrivals.remove(&request);
            self.count(&gone.tenant, |m| m.clients_gone += 1);
            return;
        }
        if let Some(tenant) = self.forget_finding(request) {
            self.arrivals.remove(&request);
            self.count(&tenant, |m| m.clients_gone += 1);
            return;
        }
        let Some(gone) = self.requests.remove(&request) else {
            return;
        };
        self.turn_freed = true;
        self.arrivals.remove(&request);
        self.count(&gone.tenant, |m| m.clients_gone += 1);
        let session = gone.session;
        let Some(live) = self.lives.get_mut(&session) else {
            return;
        };
        if live.request == Some(request) {
            live.request = None;
        }
        if live.starting.is_some() {
            self.close(now, session);
            return;
        }
        if live.session.interrupt(now).is_ok() {
            live.settle_by = Some(now.saturating_add(self.config.settle_grace_ms));
        } else {
            self.registry.response_failed(session, now);
        }
        self.drain_session(now, session);
    }

    /// Applies every deadline at or before `now`.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        self.now = now;
        if self.draining.is_some_and(|until| until <= now) {
            let all: Vec<SessionId> = self.lives.keys().copied().collect();
            for id in all {
                self.close(now, id);
            }
        }
        for action in self.registry.handle_timeout(now) {
            match action {
                Action::Answer {
                    session,
                    request_id,
                    result,
                } => {
                    self.metrics.held_call_timeouts += 1;
                    if let Some(live) = self.lives.get_mut(&session) {
                        let _ = live.session.respond_mcp(now, &request_id, result);
                        self.drain_session(now, session);
                    }
                }
                Action::Close { session, expired } => {
                    let state = if expired {
                        RecordState::Expired
                    } else {
                        *self.metrics.exits.entry("hibernated").or_default() += 1;
                        RecordState::Hibernated
                    };
                    self.record_closed(session, state);
                    self.close(now, session);
                }
            }
        }
        let ids: Vec<SessionId> = self.lives.keys().copied().collect();
        for session in ids {
            let Some(live) = self.lives.get_mut(&session) else {
                continue;
            };
            if live.starting.as_ref().is_some_and(|s| s.deadline <= now) {
                let request = live.request.take();
                self.close(now, session);
                if let Some(request) = request {
                    let error = ApiError::new(
                        ApiErrorKind::Api,
                        format!(
                            "cannot start a Claude Code session: the CLI did not answer within {} s",
                            self.config.start_timeout_ms / 1000
                        ),
                    );
                    self.fail(now, request, error);
                }
                continue;
            }
            if live.settle_by.is_some_and(|t| t <= now) {
                self.close(now, session);
                continue;
            }
            if live.session.poll_timeout().is_some_and(|(t, _)| t <= now) {
                live.session.handle_timeout(now);
                self.drain_session(now, session);
            }
        }
        let expired: Vec<String> = self
            .approvals
            .iter()
            .filter(|(_, a)| a.deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            let decision = PermissionDecision::deny(
                "No one answered this approval in time; the tool did not run.",
            );
            self.settle_approval(now, &id, decision, "expired");
        }
        self.retry_turns(now);
        for (&request, (_, next_ping)) in &mut self.watchers {
            if *next_ping <= now {
                *next_ping = now.saturating_add(self.config.ping_every_ms);
                self.outputs.push_back(GatewayOutput::Body {
                    request,
                    bytes: b": ping\n\n".to_vec(),
                });
            }
        }
        while let Some(at) = self.queue.iter().position(|q| q.deadline <= now) {
            let queued = self.queue.remove(at).expect("in range");
            let error = ApiError::new(
                ApiErrorKind::RateLimit,
                format!(
                    "the gateway stayed at its limit of concurrent requests for {} s; retry later",
                    self.config.queue_timeout_ms / 1000
                ),
            )
            .retry_after(1);
            self.respond_error(queued.request, queued.api, &[], &error);
        }
        let ping_every = self.config.ping_every_ms;
        for (&request, flight) in &mut self.requests {
            if flight.next_ping.is_some_and(|t| t <= now) {
                let frame = flight.encoder.ping();
                flight.next_ping = Some(now.saturating_add(ping_every));
                self.outputs.push_back(GatewayOutput::Body {
                    request,
                    bytes: frame.into_bytes(),
                });
            }
        }
    }

    // ---- outputs -------------------------------------------------------------------------

    /// The next thing for the host to do.
    pub fn poll_output(&mut self) -> Option<GatewayOutput> {
        if self.turn_freed && !self.queue.is_empty() {
            self.run_queue();
        }
        if !self.pool_wanted.is_empty() {
            self.pool_step();
        }
        if self.draining.is_some() && !self.lives.is_empty() {
            self.close_finished(self.now);
        }
        self.publish();
        self.outputs.pop_front()
    }

    /// The next deadline and why; call [`handle_timeout`](Self::handle_timeout) then.
    pub fn poll_timeout(&self) -> Option<(Timestamp, GatewayTimeout)> {
        let mut next: Option<(Timestamp, GatewayTimeout)> = None;
        let mut consider = |at: Timestamp, why: GatewayTimeout| {
            if next.as_ref().is_none_or(|(t, _)| at < *t) {
                next = Some((at, why));
            }
        };
        if let Some((at, why)) = self.registry.poll_timeout() {
            consider(at, why.into());
        }
        for (&session, live) in &self.lives {
            if let Some(starting) = &live.starting {
                consider(starting.deadline, GatewayTimeout::Start { session });
            }
            if let Some(at) = live.settle_by {
                consider(at, GatewayTimeout::Settle { session });
            }
            if let Some((at, reason)) = live.session.poll_timeout() {
                consider(at, GatewayTimeout::Session { session, reason });
            }
        }
        for (&request, flight) in &self.requests {
            if let Some(at) = flight.next_ping {
                consider(at, GatewayTimeout::Ping { request });
            }
        }
        if let Some(approval) = self.approvals.values().min_by_key(|a| a.deadline) {
            consider(approval.deadline, GatewayTimeout::Approval);
        }
        if let Some(at) = self.agent_sessions.next_retry() {
            consider(at, GatewayTimeout::ManagedTurn);
        }
        for (&request, (_, at)) in &self.watchers {
            consider(*at, GatewayTimeout::Ping { request });
        }
        if let Some(until) = self.draining.filter(|_| !self.lives.is_empty()) {
            consider(until, GatewayTimeout::Drain);
        }
        if let Some(queued) = self.queue.iter().min_by_key(|q| q.deadline) {
            consider(
                queued.deadline,
                GatewayTimeout::Queued {
                    request: queued.request,
                },
            );
        }
        next
    }

    // ---- internals -----------------------------------------------------------------------

    /// A Responses API id: `resp_` and 32 hex digits.
    fn response_id(&mut self) -> String {
        self.next_response += 1;
        self.secret_id("resp_", self.next_response)
    }

    /// `prefix` and 32 hex digits of the keyed SHA-256 of `prefix` and `counter`: 128 bits
    /// that no number of other ids reveals without the [id key](GatewayConfig::id_key).
    pub(super) fn secret_id(&self, prefix: &str, counter: u64) -> String {
        use sha2::Digest;
        let mut hash = sha2::Sha256::new();
        hash.update(self.config.id_key);
        hash.update(prefix.as_bytes());
        hash.update(counter.to_le_bytes());
        format!(
            "{prefix}{}",
            crate::conversation::hex(&hash.finalize()[..16])
        )
    }

    /// Starts shutting down: new conversations get a 503, warm CLIs are closed, every session
    /// is closed as soon as it has no turn running (no response in flight, no tool call
    /// waiting for the client), and whatever still runs after `grace_ms` is closed then.
    /// [`is_drained`](Self::is_drained) says when no CLI is left.
    pub fn drain(&mut self, now: Timestamp, grace_ms: u64) {
        self.now = now;
        if self.draining.is_some() {
            return;
        }
        self.draining = Some(now.saturating_add(grace_ms));
        self.pool_wanted.clear();
        for queued in std::mem::take(&mut self.queue) {
            let Queued {
                request,
                api,
                tenant,
                parsed,
                ..
            } = queued;
            self.serve(now, request, api, &tenant, parsed);
        }
        for request in std::mem::take(&mut self.watchers).into_keys() {
            self.outputs.push_back(GatewayOutput::End { request });
        }
        let warm: Vec<SessionId> = self.pool.keys().copied().collect();
        for id in warm {
            self.close(now, id);
        }
        self.close_finished(now);
    }

    /// Whether the gateway is draining ([`drain`](Self::drain)).
    pub fn is_draining(&self) -> bool {
        self.draining.is_some()
    }

    /// Whether the gateway is draining and no CLI is left.
    pub fn is_drained(&self) -> bool {
        self.draining.is_some() && self.lives.is_empty()
    }

    /// While draining: closes the sessions with no turn running.
    fn close_finished(&mut self, now: Timestamp) {
        let done: Vec<SessionId> = self
            .lives
            .iter()
            .filter(|(id, live)| {
                live.request.is_none() && live.settle_by.is_none() && self.registry.is_idle(**id)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in done {
            self.close(now, id);
        }
    }

    /// Closes a session (the gateway shutting down): its response, if any, fails, and the
    /// host is asked to end its process.
    pub fn close(&mut self, now: Timestamp, session: SessionId) {
        self.now = now;
        self.registry.close(session);
        self.pool.remove(&session);
        self.forget_session_approvals(session);
        let Some(live) = self.lives.remove(&session) else {
            return;
        };
        self.console_closed(session, &live.cli_id);
        self.outputs.push_back(GatewayOutput::Close { session });
        if let Some(request) = live.request {
            let error = ApiError::new(
                ApiErrorKind::Api,
                "the Claude Code session was closed before the response was complete",
            );
            self.fail(now, request, error);
        }
        self.retire(Retired::Session(Box::new(live)));
    }

    /// The live conversation used least recently whose CLI waits for nothing: no request in
    /// flight, no call held or expected from the client, no approval pending, not starting or
    /// settling an interrupted turn; of `tenant`'s conversations when one is named.
    fn idle_to_evict(&self, tenant: Option<&str>) -> Option<SessionId> {
        self.lives
            .iter()
            .filter(|(id, live)| {
                tenant.is_none_or(|t| live.tenant == t)
                    && !self.pool.contains_key(id)
                    && self.is_waiting_for_nothing(**id)
            })
            .min_by_key(|(id, _)| self.registry.last_active(**id))
            .map(|(id, _)| *id)
    }

    /// Closes an idle conversation's CLI to make room (it is resumed, or without a session
    /// store rebuilt, when it comes back).
    fn evict(&mut self, now: Timestamp, session: SessionId) {
        *self.metrics.exits.entry("evicted_idle").or_default() += 1;
        self.record_closed(session, RecordState::Hibernated);
        self.close(now, session);
    }

    /// Keeps an ended session for the host to free ([`take_ended`](Self::take_ended)); past
    /// a few, the oldest is freed here.
    fn retire(&mut self, retired: Retired) {
        if self.ended.len() >= ENDED_KEPT {
            self.ended.remove(0);
        }
        self.ended.push(retired);
    }

    /// The sessions and responses that ended since the last call, for the host to drop where
    /// it holds nothing up: freeing those of hundreds of thousands of client tools takes a while,
    /// and a host that shares the gateway between threads drops them after releasing its
    /// lock. A host that never calls this loses nothing: past a few, they are freed as they
    /// end.
    pub fn take_ended(&mut self) -> Ended {
        Ended(std::mem::take(&mut self.ended))
    }

    /// Drains a session's outputs: writes go to the host, chunks to the gateway's bookkeeping
    /// and the response in flight.
    fn drain_session(&mut self, now: Timestamp, session: SessionId) {
        loop {
            let Some(live) = self.lives.get_mut(&session) else {
                return;
            };
            let Some(output) = live.session.poll_output() else {
                return;
            };
            match output {
                Output::Write(bytes) => {
                    self.outputs
                        .push_back(GatewayOutput::Write { session, bytes });
                }
                Output::Chunk(chunk) => self.on_chunk(now, session, chunk),
            }
        }
    }

    fn on_chunk(&mut self, now: Timestamp, session: SessionId, chunk: Chunk) {
        if let Chunk::TranscriptMirror { file_path, entries } = chunk {
            return self.on_mirror(session, &file_path, entries);
        }
        if let (Chunk::SessionInit { model, .. }, Some(live)) =
            (&chunk, self.lives.get_mut(&session))
        {
            // Kept in its record (the console lists it).
            live.watched.model.clone_from(model);
        }
        if self.config.console {
            self.console_chunk(session, &chunk);
        }
        match &chunk {
            Chunk::PermissionRequest { .. } => self.on_permission_request(now, session, &chunk),
            Chunk::PermissionResolved { request_id, .. } => {
                self.permission_settled(session, request_id);
                let id = self
                    .approvals
                    .iter()
                    .find(|(_, a)| a.session == session && &a.request_id == request_id)
                    .map(|(id, _)| id.clone());
                if let Some(id) = id {
                    // The CLI settled it itself (the turn was interrupted).
                    self.forget_approval(&id, "cancelled");
                }
            }
            _ => {}
        }
        let Some(live) = self.lives.get_mut(&session) else {
            return;
        };
        match &chunk {
            Chunk::ControlResult {
                request_id,
                ok,
                response,
                error,
                ..
            } if live
                .starting
                .as_ref()
                .is_some_and(|s| &s.init_id == request_id) =>
            {
                let starting = live.starting.take().expect("checked above");
                if *ok {
                    if self.models.is_none() {
                        self.models = response
                            .as_ref()
                            .and_then(|r| r.to_value().get("models").cloned());
                    }
                    if let Some(prompt) = starting.prompt {
                        let request = live.request;
                        match prompt.send(&mut live.session, now) {
                            Ok(()) => {
                                if let Some(request) = request {
                                    self.sent_to_cli(request);
                                }
                            }
                            Err(error) => {
                                if let Some(request) = request {
                                    let error = ApiError::new(ApiErrorKind::Api, error.to_string());
                                    self.fail(now, request, error);
                                }
                            }
                        }
                    }
                } else {
                    let request = live.request.take();
                    self.close(now, session);
                    if let Some(request) = request {
                        let error = ApiError::new(
                            ApiErrorKind::Api,
                            format!(
                                "cannot start a Claude Code session: {}",
                                error.as_deref().unwrap_or("initialize failed")
                            ),
                        );
                        self.fail(now, request, error);
                    }
                }
                return;
            }
            Chunk::McpToolCall {
                request_id,
                server,
                tool_use_id,
                ..
            } if server == CLIENT_SERVER => {
                let action =
                    self.registry
                        .tool_call(session, request_id, tool_use_id.as_deref(), now);
                if let CallAction::Answer(result) = action {
                    let _ = live.session.respond_mcp(now, request_id, result);
                }
            }
            Chunk::McpToolCancelled {
                tool_use_id: Some(id),
                ..
            } => self.registry.tool_cancelled(session, id),
            Chunk::HookRequest {
                request_id, event, ..
            } => {
                // The only hook the gateway registers: tools whose every call must ask (even
                // one the CLI deems safe to run unasked) are sent to the permission request.
                let output = match event.as_deref() {
                    Some("PreToolUse") => json!({"hookSpecificOutput": {
                        "hookEventName": "PreToolUse", "permissionDecision": "ask",
                        "permissionDecisionReason": "every call of this tool needs permission"}}),
                    _ => json!({}),
                };
                let _ = live.session.respond_hook(now, request_id, output);
            }
            Chunk::RateLimit {
                status, resets_at, ..
            } if status == "rejected" => {
                live.rate_limit_resets_ms = resets_at.map(|at| at * 1000);
            }
            Chunk::TurnComplete { .. } if live.settle_by.is_some() => {
                // The interrupted turn has ended: the conversation takes requests again.
                live.settle_by = None;
                self.registry.response_failed(session, now);
            }
            _ => {}
        }
        let Some(request) = live.request else {
            return;
        };
        if self.agent_sessions.is_turn(request) {
            self.turn_chunk(request, &chunk);
        }
        if let Some(arrival) = self.arrivals.get_mut(&request) {
            if arrival.cli_sent.is_some() && arrival.cli_first.is_none() {
                arrival.cli_first = Some(now);
            }
        }
        let Some(flight) = self.requests.get_mut(&request) else {
            return;
        };
        let frames = flight.encoder.push(&chunk);
        self.emit(now, request, frames);
    }

    /// Starts a server-sent event stream for `request`: its head at once (clients wait for
    /// it), `first` as its first bytes, then what `watch` follows as it comes, with
    /// keep-alives while quiet.
    fn open_watch(&mut self, request: RequestId, watch: Watch, first: Vec<u8>) {
        self.outputs.push_back(GatewayOutput::Respond {
            request,
            status: 200,
            headers: vec![
                ("content-type".to_owned(), "text/event-stream".to_owned()),
                ("cache-control".to_owned(), "no-cache".to_owned()),
            ],
        });
        self.outputs.push_back(GatewayOutput::Body {
            request,
            bytes: first,
        });
        let next_ping = self.now.saturating_add(self.config.ping_every_ms);
        self.watchers.insert(request, (watch, next_ping));
    }

    /// Sends `bytes` to every event stream `which` picks (their keep-alives start over).
    fn send_to_watches(&mut self, which: impl Fn(&Watch) -> bool, bytes: &[u8]) {
        let next_ping = self.now.saturating_add(self.config.ping_every_ms);
        for (&request, (watch, ping)) in &mut self.watchers {
            if which(watch) {
                *ping = next_ping;
                self.outputs.push_back(GatewayOutput::Body {
                    request,
                    bytes: bytes.to_vec(),
                });
            }
        }
    }

    /// Ends every event stream `which` picks, `last` their last bytes.
    fn end_watches(&mut self, which: impl Fn(&Watch) -> bool, last: Option<&[u8]>) {
        let ending: Vec<RequestId> = (self.watchers.iter())
            .filter(|(_, (watch, _))| which(watch))
            .map(|(request, _)| *request)
            .collect();
        for request in ending {
            self.watchers.remove(&request);
            if let Some(bytes) = last {
                self.outputs.push_back(GatewayOutput::Body {
                    request,
                    bytes: bytes.to_vec(),
                });
            }
            self.outputs.push_back(GatewayOutput::End { request });
        }
    }

    /// Ends a request's response with an error: an HTTP error when nothing was sent yet, else
    /// the API's error event in the stream.
    fn fail(&mut self, now: Timestamp, request: RequestId, error: ApiError) {
        let Some(flight) = self.requests.get_mut(&request) else {
            return;
        };
        let frames = flight.encoder.fail(error);
        self.emit(now, request, frames);
    }

    /// Sends what the encoder produced for a request, and settles it once complete.
    fn emit(&mut self, now: Timestamp, request: RequestId, frames: Vec<String>) {
        let Some(flight) = self.requests.get_mut(&request) else {
            return;
        };
        if flight.stream && !frames.is_empty() {
            flight.next_ping = Some(now.saturating_add(self.config.ping_every_ms));
            if !flight.responded {
                flight.responded = true;
                let mut headers = vec![
                    ("content-type".to_owned(), "text/event-stream".to_owned()),
                    ("cache-control".to_owned(), "no-cache".to_owned()),
                ];
                headers.extend(flight.headers.iter().cloned());
                self.outputs.push_back(GatewayOutput::Respond {
                    request,
                    status: 200,
                    headers,
                });
                self.responded(request, 200);
            }
            self.outputs.push_back(GatewayOutput::Body {
                request,
                bytes: frames.concat().into_bytes(),
            });
        }
        let Some(flight) = self.requests.get(&request) else {
            return;
        };
        if flight.encoder.outcome().is_none() {
            return;
        }
        let mut flight = self.requests.remove(&request).expect("looked up above");
        self.end_flight(now, request, &mut flight);
        // Freed by the host where it holds nothing up: its client tool names can be many.
        self.retire(Retired::Response(Box::new(flight)));
    }

    /// A response whose turn has an outcome: the conversation's bookkeeping, then the end of
    /// its stream or its whole answer.
    fn end_flight(&mut self, now: Timestamp, request: RequestId, flight: &mut InFlight) {
        self.turn_freed = true;
        let session = flight.session;
        let done = matches!(
            flight.encoder.outcome(),
            Some(Outcome::ToolCalls | Outcome::Finished(_))
        );
        if let Some(live) = self.lives.get_mut(&session) {
            if live.request == Some(request) {
                live.request = None;
            }
        }
        if done {
            let usage = flight.encoder.usage();
            for (kind, n) in [
                ("input", usage.input_tokens),
                ("output", usage.output_tokens),
                ("cache_read", usage.cache_read_input_tokens),
                ("cache_creation", usage.cache_creation_input_tokens),
            ] {
                let wall = self.wall_ms();
                self.count(&flight.tenant, |m| {
                    *m.tokens.entry(kind).or_default() += n;
                    *m.recent.at(wall).tokens.entry(kind).or_default() += n;
                });
            }
            let pending: Vec<String> = flight
                .encoder
                .tool_calls()
                .into_iter()
                .map(|c| c.id.clone())
                .collect();
            let forced = flight.encoder.structured().is_some_and(|s| s.is_call());
            let hash = self.registry.response_done(
                session,
                &flight.encoder.message(),
                pending.clone(),
                now,
            );
            if forced {
                // The CLI's turn is over (its structured-output tool took the call), and its
                // session answers every turn against the call's schema: the conversation goes
                // on in a new one, from the history the next request carries (a stored
                // response stays). Its transcript holds the structured-output call, not the
                // client's: it is not resumed.
                self.close(now, session);
            } else if let Some(hash) = hash {
                self.save_record(session, hash, pending, request);
            }
        } else if self
            .lives
            .get(&session)
            .is_none_or(|live| live.settle_by.is_none())
        {
            self.registry.response_failed(session, now);
        }
        // The conversation's new key is claimed before the client can send its next request.
        self.publish();
        if flight.responded {
            self.outputs.push_back(GatewayOutput::End { request });
            self.ended(request);
            return;
        }
        match (flight.encoder.body(), flight.encoder.outcome()) {
            (Some(body), _) => {
                let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
                headers.extend(std::mem::take(&mut flight.headers));
                self.respond_whole(request, 200, headers, body.to_string().into_bytes());
            }
            (None, Some(Outcome::Failed(error))) => {
                let mut error = error.clone();
                // An account limit the CLI reported says when it lifts.
                let resets = self
                    .lives
                    .get(&session)
                    .and_then(|l| l.rate_limit_resets_ms);
                if let (ApiErrorKind::RateLimit, None, Some(resets)) =
                    (error.kind, error.retry_after, resets)
                {
                    let wall = self.config.unix_epoch_ms.saturating_add(now);
                    error = error.retry_after(resets.saturating_sub(wall).div_ceil(1000).max(1));
                }
                self.respond_error(request, flight.api, &flight.headers, &error);
            }
            (None, _) => {
                let error = ApiError::new(ApiErrorKind::Api, "the response ended without a body");
                self.respond_error(request, flight.api, &flight.headers, &error);
            }
        }
    }

    /// Moves the routing index's changes, and the responses stored for the session store,
    /// into the outputs.
    fn publish(&mut self) {
        for stored in self.registry.take_stored() {
            let response = serde_json::to_string(&stored).expect("a response serializes");
            self.outputs
                .push_back(GatewayOutput::Store(StoreAsk::Response {
                    tenant: tenant_id(&stored.tenant),
                    id: stored.id,
                    response,
                }));
        }
        for change in self.registry.take_index_changes() {
            self.outputs.push_back(match change {
                IndexChange::Claim(key) => GatewayOutput::Claim { key },
                IndexChange::Release(key) => GatewayOutput::Release { key },
            });
        }
    }

    fn respond_error(
        &mut self,
        request: RequestId,
        api: Api,
        extra: &[(String, String)],
        error: &ApiError,
    ) {
        let response = http::error_response(api, error, extra.to_vec());
        self.respond_whole(request, response.status, response.headers, response.body);
    }

    fn respond_whole(
        &mut self,
        request: RequestId,
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    ) {
        if self.agent_sessions.is_turn(request) {
            // A session's turn: its answer is the session's events, not a response.
            self.arrivals.remove(&request);
            return self.turn_answered(request, status, &body);
        }
        self.outputs.push_back(GatewayOutput::Respond {
            request,
            status,
            headers,
        });
        self.responded(request, status);
        self.outputs.push_back(GatewayOutput::Body {
            request,
            bytes: body,
        });
        self.outputs.push_back(GatewayOutput::End { request });
        self.ended(request);
    }

    /// Counts a response head: the request's API and status, its time to first byte.
    fn responded(&mut self, request: RequestId, status: u16) {
        let Some(arrival) = self.arrivals.get(&request).cloned() else {
            return;
        };
        let first_byte = self.now.saturating_sub(arrival.at);
        let added = (arrival.cli_sent.zip(arrival.cli_first))
            .map(|(sent, first)| first_byte.saturating_sub(first.saturating_sub(sent)));
        let wall = self.wall_ms();
        self.count(&arrival.tenant, |m| {
            *m.requests.entry((arrival.api.name(), status)).or_default() += 1;
            m.first_byte.observe(first_byte as f64 / 1000.0);
            if let Some(added) = added {
                m.added.observe(added as f64 / 1000.0);
                m.recent.at(wall).observe_added(added);
            }
        });
    }

    /// The request's turn reached the CLI now.
    fn sent_to_cli(&mut self, request: RequestId) {
        if let Some(arrival) = self.arrivals.get_mut(&request) {
            arrival.cli_sent.get_or_insert(self.now);
        }
    }

    /// Counts the end of a response.
    fn ended(&mut self, request: RequestId) {
        if let Some(arrival) = self.arrivals.remove(&request) {
            let took = seconds(self.now, arrival.at);
            self.count(&arrival.tenant, |m| m.response.observe(took));
        }
    }
}

/// The 429 of a cap, `why` in words; worth trying again in a second.
fn at_cap(why: String) -> ApiError {
    ApiError::new(ApiErrorKind::RateLimit, format!("{why}; retry later")).retry_after(1)
}

fn seconds(now: Timestamp, since: Timestamp) -> f64 {
    now.saturating_sub(since) as f64 / 1000.0
}

/// Reads a request of one of the three APIs and checks that the gateway can serve it (what
/// [`prepare`] prepares). Linear in the body's size.
///
/// # Errors
/// A 400 naming the field for a body that is not a valid request, or one the gateway cannot
/// honour (a `tool_choice` naming a tool the request does not have).
pub fn parse_request(api: Api, body: &[u8]) -> Result<ApiRequest, ApiError> {
    let parsed = match api {
        Api::Anthropic => api::anthropic::parse_request(body),
        Api::OpenAi => api::openai::parse_request(body),
        Api::Responses => api::responses::parse_request(body),
    };
    parsed.and_then(|r| check_request(&r).map(|()| r))
}

/// The most field names `x-ccwire-ignored` lists, and the most bytes of one name in it.
const IGNORED_NAMES: usize = 8;
const IGNORED_NAME_BYTES: usize = 64;

/// The `x-ccwire-ignored` header: the first few ignored fields and how many more (a request
/// with thousands of unknown fields must not make a header clients refuse).
fn ignored_header(ignored: &[String]) -> String {
    let mut names: Vec<String> = ignored
        .iter()
        .take(IGNORED_NAMES)
        .map(|name| {
            let mut end = name.len().min(IGNORED_NAME_BYTES);
            while !name.is_char_boundary(end) {
                end -= 1;
            }
            // Header values are visible ASCII: anything else is shown as `?`.
            let cut: String = name[..end]
                .chars()
                .map(|c| {
                    if c.is_ascii_graphic() || c == ' ' {
                        c
                    } else {
                        '?'
                    }
                })
                .collect();
            if end < name.len() {
                format!("{cut}...")
            } else {
                cut
            }
        })
        .collect();
    if ignored.len() > IGNORED_NAMES {
        names.push(format!("and {} more", ignored.len() - IGNORED_NAMES));
    }
    names.join(", ")
}

/// splitmix64's finalizer: spreads a seed and a counter over 64 bits.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ignored_header_names_a_few_and_counts_the_rest() {
        let many: Vec<String> = (0..5000).map(|i| format!("field_{i}")).collect();
        let header = ignored_header(&many);
        assert!(header.starts_with("field_0, field_1, "), "{header}");
        assert!(header.ends_with(", and 4992 more"), "{header}");
        assert!(header.len() < 200);
        let odd = vec!["x".repeat(1000), "é\u{0}".to_owned()];
        let header = ignored_header(&odd);
        assert_eq!(header, format!("{}..., ??", "x".repeat(64)));
        assert!(
            header.bytes().all(|b| b.is_ascii_graphic() || b == b' '),
            "a valid header value"
        );
    }

    #[test]
    fn ids_are_keyed_and_differ_for_every_key_and_counter() {
        let gateway = |key| {
            Gateway::new(GatewayConfig {
                id_key: key,
                ..GatewayConfig::default()
            })
            .expect("a gateway")
        };
        let (a, b) = (gateway([1; 32]), gateway([2; 32]));
        assert_eq!(
            a.secret_id("resp_", 1),
            gateway([1; 32]).secret_id("resp_", 1)
        );
        assert_ne!(a.secret_id("resp_", 1), b.secret_id("resp_", 1));
        assert_ne!(a.secret_id("resp_", 1), a.secret_id("resp_", 2));
        assert_ne!(a.secret_id("resp_", 1)[5..], a.secret_id("appr_", 1)[5..]);
        assert_eq!(a.secret_id("appr_", 7).len(), 5 + 32);
    }
}
