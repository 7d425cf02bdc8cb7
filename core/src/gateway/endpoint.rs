//! [`Endpoint`]: the whole gateway as one sans-IO state machine.
//!
//! It is to [`Session`] what quinn-proto's `Endpoint` is to its `Connection`: it owns every
//! conversation's CLI [`Session`] and the [`ResponseEncoder`] of every response in flight, the
//! history-hash index and held client tool calls ([`Gateway`]), the session cap and the CLI's
//! spawn policy. A host (`ccwire serve`, the npm `Gateway`) only moves bytes and time:
//!
//! ```text
//! loop {
//!     select! {
//!         http request  => endpoint.handle_request(now, req, api, tenant, body),
//!         client gone   => endpoint.handle_client_gone(now, req),
//!         CLI stdout    => endpoint.handle_stdout(now, session, bytes),
//!         CLI exited    => endpoint.handle_exit(now, session, code, signal, stderr),
//!         spawn failed  => endpoint.handle_spawn_failed(now, session, error),
//!         timer         => endpoint.handle_timeout(now),
//!     }
//!     while let Some(output) = endpoint.poll_output() {
//!         match output {
//!             Spawn { session, spec }        => start the CLI with spec.args, without spec.env_remove,
//!             Write { session, bytes }       => write to that CLI's stdin,
//!             Close { session }              => close its stdin; kill it after a grace period,
//!             Respond { request, status, headers } => send the response head,
//!             Body { request, bytes }        => send body bytes (SSE frames or JSON),
//!             End { request }                => finish the response,
//!         }
//!     }
//!     timer = endpoint.poll_timeout();
//! }
//! ```
//!
//! Every request gets exactly one `Respond`, then any number of `Body`, then one `End`. Output
//! order is deterministic: the same inputs give the same outputs.
//!
//! ## Scale-out
//!
//! A conversation lives in one CLI process on one machine, with its held tool calls, so more
//! than one gateway needs affinity: each request must reach the gateway that holds its
//! conversation. The seam for that is two pieces of data, no IO:
//!
//! - [`Endpoint::route_key`] computes, from a request alone, the key of the conversation it
//!   continues (the scoped history hash, or the stored response it names), or that it starts a
//!   new one (any gateway will do). Any gateway, or a router in front of them, can compute it.
//! - With [`EndpointConfig::publish_index`], every change of what this gateway serves comes out
//!   as [`EndpointOutput::Claim`] and [`EndpointOutput::Release`] with such keys (digests: no
//!   tenant key leaves the gateway).
//!
//! A host that scales out writes claims and releases to a shared registry (a Redis hash of key
//! → gateway address, with the gateway's liveness as a TTL) and, for a request whose key another
//! gateway claims, forwards it there. A key nobody claims (the owner died or expired it) is
//! served here and rebuilt from the history, as after a restart. The in-memory registry of one
//! gateway is the default; a shared one is a backend of the host, not a change of this engine.

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::metrics::{Gauges, Metrics};
use super::{
    check_request, cli_model, cli_settings_args, client_tool_names, prompt_content, CallAction,
    Gateway, GatewayConfig, GatewayTimeout, IndexChange, Route, SessionId, SessionKind,
};
use crate::api::response::{EncoderOptions, Outcome, ResponseEncoder};
use crate::api::{self, Api, ApiError, ApiErrorKind, ApiRequest};
use crate::mcp::{McpServer, McpTool};
use crate::session::{
    Output, PermissionDecision, Session, SessionConfig, TimeoutReason, UserMessage,
};
use crate::{Chunk, Timestamp};

/// A request's id, chosen by the host; unique among the requests the endpoint has not ended.
pub type RequestId = u64;

/// The name of the in-process MCP server that carries the client's tools: the model sees them
/// as `mcp__client__<name>`.
pub const CLIENT_SERVER: &str = "client";

/// Variables that would let the CLI time out, defer or background a held call (HOLD.md §9).
pub const STRIPPED_ENV: &[&str] = &[
    "MCP_TOOL_TIMEOUT",
    "CLAUDE_CODE_SDK_MCP_TOOL_IDLE_TIMEOUT",
    "CLAUDE_AUTO_BACKGROUND_TASKS",
];

/// Settings of an [`Endpoint`].
#[derive(Debug, Clone)]
pub struct EndpointConfig {
    /// Held-call and idle deadlines, stored responses.
    pub limits: GatewayConfig,
    /// The most live CLI sessions at once; a request that needs one more gets a 429.
    pub max_sessions: usize,
    /// Built-in CLI tools the model may use (they run on the gateway's machine).
    pub enabled_tools: Vec<String>,
    /// The model for requests that name a model the CLI does not know (`gpt-4o`).
    pub default_model: Option<String>,
    /// A keep-alive frame on a stream that sent nothing for this long (ms).
    pub ping_every_ms: u64,
    /// How long an interrupted turn (client gone) may take to end before its session is
    /// closed (ms).
    pub settle_grace_ms: u64,
    /// How long a new CLI may take to answer `initialize` (ms).
    pub start_timeout_ms: u64,
    /// Seed of generated ids (Responses API response ids); a host passes randomness in here.
    pub seed: u64,
    /// The wall clock at `now = 0`, in Unix milliseconds (OpenAI's `created`).
    pub unix_epoch_ms: u64,
    /// Report every change of the routing index as `Claim` / `Release` outputs (for a host
    /// that shares it with other gateways; see the module docs).
    pub publish_index: bool,
    /// The most responses produced at once; more requests wait in the queue.
    pub max_concurrent: usize,
    /// The most responses produced at once for one tenant (API key).
    pub max_concurrent_per_key: usize,
    /// The most requests waiting for a free turn; one more gets a 429.
    pub max_queue: usize,
    /// How long a request may wait in the queue before it gets a 429 (ms).
    pub queue_timeout_ms: u64,
    /// CLIs kept started and initialized ahead of need, for new conversations with the
    /// settings (tools, system prompt, model, thinking) of recent ones; they count toward
    /// `max_sessions`.
    pub pool: usize,
    /// Enabled built-in tools wait for a person's approval over HTTP
    /// ([`approvals`](Endpoint::approvals), [`answer_approval`](Endpoint::answer_approval),
    /// [`handle_approval_events`](Endpoint::handle_approval_events)) instead of running
    /// outright.
    pub approvals: bool,
    /// How long an approval waits for its answer before the tool is denied (ms).
    pub approval_timeout_ms: u64,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            limits: GatewayConfig::default(),
            max_sessions: 64,
            enabled_tools: Vec::new(),
            default_model: None,
            ping_every_ms: 15_000,
            settle_grace_ms: 10_000,
            start_timeout_ms: 60_000,
            seed: 0,
            unix_epoch_ms: 0,
            publish_index: false,
            max_concurrent: 64,
            max_concurrent_per_key: usize::MAX,
            max_queue: 256,
            queue_timeout_ms: 30_000,
            pool: 0,
            approvals: false,
            approval_timeout_ms: 5 * 60 * 1000,
        }
    }
}

/// How to start a CLI for a session: data, so every host starts it the same way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CliSpec {
    /// The arguments after the executable, the stream-json flags included.
    pub args: Vec<String>,
    /// Variables the CLI must not inherit (besides those the host removes of its own).
    pub env_remove: Vec<String>,
    /// Variables to set.
    pub env: Vec<(String, String)>,
}

/// What the host must do; drain with [`Endpoint::poll_output`]. Serialized (as the npm package
/// hands it out) with a `type` tag and the bytes as text.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EndpointOutput {
    /// Start a CLI process for `session`. Its stdout goes to
    /// [`handle_stdout`](Endpoint::handle_stdout), its end to
    /// [`handle_exit`](Endpoint::handle_exit); a failure to start to
    /// [`handle_spawn_failed`](Endpoint::handle_spawn_failed).
    Spawn {
        /// The session.
        session: SessionId,
        /// Arguments and environment.
        spec: CliSpec,
    },
    /// Write these bytes (whole lines) to the session's stdin, in order.
    Write {
        /// The session.
        session: SessionId,
        /// The bytes.
        #[serde(rename = "data", serialize_with = "as_text")]
        bytes: Vec<u8>,
    },
    /// Close the session's stdin, then end the process after a grace period. The endpoint has
    /// forgotten the session; its later output and its exit are ignored.
    Close {
        /// The session.
        session: SessionId,
    },
    /// Send the response head of a request.
    Respond {
        /// The request.
        request: RequestId,
        /// The HTTP status.
        status: u16,
        /// Response headers (`content-type` among them).
        headers: Vec<(String, String)>,
    },
    /// Send body bytes of a request's response.
    Body {
        /// The request.
        request: RequestId,
        /// SSE frames, or the JSON body.
        #[serde(rename = "data", serialize_with = "as_text")]
        bytes: Vec<u8>,
    },
    /// The response is complete; the request is forgotten.
    End {
        /// The request.
        request: RequestId,
    },
    /// Requests whose [`route_key`](Endpoint::route_key) is `key` belong to this gateway now
    /// (only with [`EndpointConfig::publish_index`]).
    Claim {
        /// The key.
        key: String,
    },
    /// Requests with this key no longer do.
    Release {
        /// The key.
        key: String,
    },
}

/// Which gateway a request must reach ([`Endpoint::route_key`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteKey {
    /// It starts a conversation: any gateway.
    New,
    /// It continues the conversation with this key: the gateway that claimed it.
    Conversation(String),
}

impl EndpointOutput {
    /// The output as one line of JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("outputs always serialize")
    }
}

/// Bytes the endpoint made (always UTF-8: JSON lines, SSE frames, JSON bodies) as text.
fn as_text<S: serde::Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&String::from_utf8_lossy(bytes))
}

/// Why [`Endpoint::poll_timeout`] wants to be woken.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EndpointTimeout {
    /// A held call, idle session or stored response deadline.
    Gateway(GatewayTimeout),
    /// A quiet stream is due a keep-alive frame.
    Ping {
        /// The request.
        request: RequestId,
    },
    /// An interrupted turn has not ended in time; its session will be closed.
    Settle {
        /// The session.
        session: SessionId,
    },
    /// A new CLI has not answered `initialize` in time.
    Start {
        /// The session.
        session: SessionId,
    },
    /// Draining: the grace period for running turns is over.
    Drain,
    /// An approval has waited for its answer as long as it may.
    Approval,
    /// A request has waited in the queue as long as it may.
    Queued {
        /// The request.
        request: RequestId,
    },
    /// A deadline of a session's own.
    Session {
        /// The session.
        session: SessionId,
        /// What it waits for.
        reason: TimeoutReason,
    },
}

impl std::fmt::Display for EndpointTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EndpointTimeout::Gateway(GatewayTimeout::HeldCall) => {
                write!(f, "a held tool call's deadline")
            }
            EndpointTimeout::Gateway(GatewayTimeout::Idle) => write!(f, "an idle session's TTL"),
            EndpointTimeout::Gateway(GatewayTimeout::StoredResponse) => {
                write!(f, "a stored response's TTL")
            }
            EndpointTimeout::Ping { request } => {
                write!(f, "a keep-alive frame for request {request}")
            }
            EndpointTimeout::Settle { session } => {
                write!(f, "session {session}'s interrupted turn has not ended")
            }
            EndpointTimeout::Start { session } => {
                write!(f, "session {session}'s CLI has not answered initialize")
            }
            EndpointTimeout::Drain => write!(f, "the end of the drain's grace period"),
            EndpointTimeout::Approval => write!(f, "an approval's deadline"),
            EndpointTimeout::Queued { request } => {
                write!(f, "request {request} has waited for a free turn too long")
            }
            EndpointTimeout::Session { session, reason } => {
                write!(f, "session {session} is {reason}")
            }
        }
    }
}

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
}

#[derive(Debug)]
struct Starting {
    init_id: String,
    /// The first prompt, sent once the CLI has answered; none for a warm CLI.
    prompt: Option<UserMessage>,
    deadline: Timestamp,
}

/// A CLI started ahead of need, waiting for a conversation with its settings.
#[derive(Debug)]
struct Warm {
    /// The settings it was started with (command line and client tools).
    signature: String,
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

/// The gateway: conversations, their CLI sessions and the responses in flight. See the
/// [module docs](self).
#[derive(Debug)]
pub struct Endpoint {
    config: EndpointConfig,
    registry: Gateway,
    lives: BTreeMap<SessionId, Live>,
    requests: BTreeMap<RequestId, InFlight>,
    outputs: VecDeque<EndpointOutput>,
    /// The CLI's model list, from the first `initialize` answer.
    models: Option<Value>,
    next_response: u64,
    /// The time of the latest input.
    now: Timestamp,
    /// Each request not ended yet: its API and when it came (for the metrics).
    arrivals: BTreeMap<RequestId, Arrival>,
    metrics: Metrics,
    /// Requests waiting for a free turn, oldest first.
    queue: VecDeque<Queued>,
    /// A response ended since the queue was last looked at.
    turn_freed: bool,
    /// CLIs started ahead of need, by session (oldest first).
    pool: BTreeMap<SessionId, Warm>,
    /// Warm CLIs to start, one at a time: their settings.
    pool_wanted: VecDeque<(String, CliSpec, Vec<McpServer>)>,
    /// Draining (shutting down): until when running turns may finish.
    draining: Option<Timestamp>,
    /// Permission requests waiting for a person, by approval id.
    approvals: BTreeMap<String, Approval>,
    next_approval: u64,
    /// Streams of approval events (`GET /v1/approvals/events`): their tenant and next
    /// keep-alive.
    watchers: BTreeMap<RequestId, (String, Timestamp)>,
}

/// A permission request of the CLI waiting for a person's answer.
#[derive(Debug)]
struct Approval {
    session: SessionId,
    /// The CLI's control request id.
    request_id: String,
    tenant: String,
    tool_name: String,
    tool_use_id: Option<String>,
    input: crate::Json,
    suggestions: crate::Json,
    blocked_path: Option<String>,
    created: Timestamp,
    deadline: Timestamp,
}

/// When a request came and, for the added-latency histogram, when its turn reached the CLI
/// and when the CLI first answered it.
#[derive(Debug, Clone, Copy)]
struct Arrival {
    api: Api,
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
    parsed: ApiRequest,
    deadline: Timestamp,
}

impl Endpoint {
    /// An endpoint with these settings.
    pub fn new(config: EndpointConfig) -> Endpoint {
        let mut registry = Gateway::new(config.limits);
        if config.publish_index {
            registry.publish_index();
        }
        Endpoint {
            registry,
            config,
            lives: BTreeMap::new(),
            requests: BTreeMap::new(),
            outputs: VecDeque::new(),
            models: None,
            next_response: 0,
            now: 0,
            arrivals: BTreeMap::new(),
            metrics: Metrics::default(),
            queue: VecDeque::new(),
            turn_freed: false,
            pool: BTreeMap::new(),
            pool_wanted: VecDeque::new(),
            draining: None,
            approvals: BTreeMap::new(),
            next_approval: 0,
            watchers: BTreeMap::new(),
        }
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

    /// CLIs started ahead of need, waiting for a conversation.
    pub fn pool_count(&self) -> usize {
        self.pool.len()
    }

    /// Responses in flight.
    pub fn request_count(&self) -> usize {
        self.requests.len()
    }

    /// The ids of live sessions, in order.
    pub fn sessions(&self) -> impl Iterator<Item = SessionId> + '_ {
        self.lives.keys().copied()
    }

    /// The session a request's response comes from, while it is in flight.
    pub fn request_session(&self, request: RequestId) -> Option<SessionId> {
        self.requests.get(&request).map(|r| r.session)
    }

    /// `GET /metrics`: the gateway's counters, gauges and latency histograms in the Prometheus
    /// text format.
    pub fn metrics(&self) -> String {
        let starting = self
            .lives
            .iter()
            .filter(|(id, l)| l.starting.is_some() && !self.pool.contains_key(id))
            .count();
        self.metrics.render(&Gauges {
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
        })
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

    /// The key that says which gateway must serve a request (see the module docs): the scoped
    /// hash of the history it continues, the stored response it names, or none for a new
    /// conversation. Changes nothing.
    ///
    /// # Errors
    /// The request's own validation error, as [`handle_request`](Self::handle_request) would
    /// answer it.
    pub fn route_key(api: Api, tenant: &str, body: &[u8]) -> Result<RouteKey, ApiError> {
        let request = match api {
            Api::Anthropic => api::anthropic::parse_request(body),
            Api::OpenAi => api::openai::parse_request(body),
            Api::Responses => api::responses::parse_request(body),
        }?;
        if let Some(previous) = &request.previous_response_id {
            return Ok(RouteKey::Conversation(super::stored_response_key(
                tenant, previous,
            )));
        }
        let n = request.conversation.history_len();
        if n == 0 {
            return Ok(RouteKey::New);
        }
        let scope = super::request_scope(tenant, &request);
        Ok(RouteKey::Conversation(crate::conversation::history_hash(
            &scope,
            &request.conversation.messages[..n],
        )))
    }

    // ---- inputs --------------------------------------------------------------------------

    /// A client's request on one of the three APIs, authenticated as `tenant` (the caller's
    /// key; it scopes conversations and stored responses). The response comes out as
    /// `Respond`, `Body`… and `End` outputs for `request`.
    pub fn handle_request(
        &mut self,
        now: Timestamp,
        request: RequestId,
        api: Api,
        tenant: &str,
        body: &[u8],
    ) {
        self.now = now;
        self.arrivals.insert(
            request,
            Arrival {
                api,
                at: now,
                cli_sent: None,
                cli_first: None,
            },
        );
        let parsed = match api {
            Api::Anthropic => api::anthropic::parse_request(body),
            Api::OpenAi => api::openai::parse_request(body),
            Api::Responses => api::responses::parse_request(body),
        };
        let parsed = parsed.and_then(|r| check_request(&r).map(|()| r));
        let parsed = match parsed {
            Ok(r) => r,
            Err(error) => return self.respond_error(request, api, &[], &error),
        };
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
        mut parsed: ApiRequest,
    ) {
        let mut headers = Vec::new();
        if !parsed.ignored.is_empty() {
            headers.push(("x-ccwire-ignored".to_owned(), parsed.ignored.join(", ")));
        }
        let response_id = (api == Api::Responses).then(|| self.response_id());
        let previous_response_id = parsed.previous_response_id.clone();
        let route = self.registry.route_request(
            tenant,
            &mut parsed,
            response_id.as_deref().unwrap_or_default(),
            now,
        );
        let route = match route {
            Ok(route) => route,
            Err(error) => return self.respond_error(request, api, &headers, &error),
        };
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
        let kind = match &route {
            Route::Continue { .. } => SessionKind::Continued,
            Route::Start { kind, .. } => *kind,
        };
        headers.push(("x-ccwire-session".to_owned(), kind.as_str().to_owned()));
        *self.metrics.turns.entry(kind.as_str()).or_default() += 1;
        let encoder = ResponseEncoder::new(EncoderOptions {
            api,
            stream: parsed.stream,
            model: parsed.model.clone(),
            id: response_id,
            created: (self.config.unix_epoch_ms.saturating_add(now)) / 1000,
            include_usage: parsed.include_usage,
            client_tools: client_tool_names(&parsed.conversation, CLIENT_SERVER),
            client_tool_prefix: None,
            previous_response_id,
            store: parsed.store,
            show_thinking: parsed.show_thinking,
        });
        match route {
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
                self.requests.insert(
                    request,
                    InFlight {
                        session,
                        tenant: tenant.to_owned(),
                        api,
                        stream: parsed.stream,
                        encoder,
                        responded: false,
                        headers,
                        next_ping: None,
                    },
                );
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
                let (spec, servers) = self.cli_for(&parsed);
                let signature = format!(
                    "{}\n{}",
                    spec.args.join("\u{0}"),
                    serde_json::to_string(&servers).expect("servers serialize")
                );
                let prompt = UserMessage::blocks(prompt_content(&prompt));
                let warm = self.take_warm(&signature);
                let session = match warm {
                    Some(warm) => {
                        // A CLI started ahead takes the conversation.
                        self.registry.rekey(session, warm);
                        self.metrics.pool_hits += 1;
                        let live = self.lives.get_mut(&warm).expect("warm CLIs are live");
                        match &mut live.starting {
                            Some(starting) => starting.prompt = Some(prompt),
                            None => {
                                let _ = live.session.send_user_message(now, prompt);
                                self.sent_to_cli(request);
                            }
                        }
                        warm
                    }
                    None => {
                        if self.config.pool > 0 {
                            self.metrics.pool_misses += 1;
                        }
                        // A conversation goes before a warm CLI of other settings.
                        if self.lives.len() >= self.config.max_sessions {
                            if let Some(&oldest) = self.pool.keys().next() {
                                self.close(now, oldest);
                            }
                        }
                        if self.lives.len() >= self.config.max_sessions {
                            self.registry.close(session);
                            let error = ApiError::new(
                                ApiErrorKind::RateLimit,
                                format!(
                                    "the gateway runs its maximum of {} sessions; retry later",
                                    self.config.max_sessions
                                ),
                            )
                            .retry_after(1);
                            return self.respond_error(request, api, &headers, &error);
                        }
                        self.spawn(now, session, spec.clone(), servers.clone(), Some(prompt));
                        session
                    }
                };
                if let Some(live) = self.lives.get_mut(&session) {
                    live.request = Some(request);
                    live.tenant = tenant.to_owned();
                }
                self.requests.insert(
                    request,
                    InFlight {
                        session,
                        tenant: tenant.to_owned(),
                        api,
                        stream: parsed.stream,
                        encoder,
                        responded: false,
                        headers,
                        next_ping: None,
                    },
                );
                self.drain_session(now, session);
                self.refill(now, &signature, &spec, &servers, warm.is_some());
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
        let Some(live) = self.lives.get_mut(&session) else {
            return;
        };
        live.session.handle_stdout_eof(now);
        live.session.handle_process_exit(now, code, signal);
        self.drain_session(now, session);
        self.lives.remove(&session);
        self.pool.remove(&session);
        self.forget_session_approvals(session);
        self.registry.close(session);
    }

    /// The host could not start a session's CLI (`error` says why).
    pub fn handle_spawn_failed(&mut self, now: Timestamp, session: SessionId, error: &str) {
        self.now = now;
        let Some(live) = self.lives.remove(&session) else {
            return;
        };
        *self.metrics.exits.entry("spawn_failed").or_default() += 1;
        self.pool.remove(&session);
        // What was queued for the process that never was.
        self.outputs
            .retain(|o| !matches!(o, EndpointOutput::Write { session: s, .. } if *s == session));
        self.registry.close(session);
        if let Some(request) = live.request {
            let error = ApiError::new(
                ApiErrorKind::Api,
                format!("cannot start a Claude Code session: {error}"),
            );
            self.fail(now, request, error);
        }
    }

    /// The client of a request went away before its response ended: the turn is interrupted
    /// (the conversation stays busy until it has ended), or a session still starting is
    /// closed. Nothing more is sent for the request.
    pub fn handle_client_gone(&mut self, now: Timestamp, request: RequestId) {
        self.now = now;
        if self.watchers.remove(&request).is_some() {
            return;
        }
        if let Some(at) = self.queue.iter().position(|q| q.request == request) {
            self.queue.remove(at);
            self.arrivals.remove(&request);
            self.metrics.clients_gone += 1;
            return;
        }
        let Some(gone) = self.requests.remove(&request) else {
            return;
        };
        self.turn_freed = true;
        self.arrivals.remove(&request);
        self.metrics.clients_gone += 1;
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
                super::Action::Answer {
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
                super::Action::Close { session } => self.close(now, session),
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
        for (&request, (_, next_ping)) in &mut self.watchers {
            if *next_ping <= now {
                *next_ping = now.saturating_add(self.config.ping_every_ms);
                self.outputs.push_back(EndpointOutput::Body {
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
                self.outputs.push_back(EndpointOutput::Body {
                    request,
                    bytes: frame.into_bytes(),
                });
            }
        }
    }

    // ---- outputs -------------------------------------------------------------------------

    /// The next thing for the host to do.
    pub fn poll_output(&mut self) -> Option<EndpointOutput> {
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
    pub fn poll_timeout(&self) -> Option<(Timestamp, EndpointTimeout)> {
        let mut next: Option<(Timestamp, EndpointTimeout)> = None;
        let mut consider = |at: Timestamp, why: EndpointTimeout| {
            if next.as_ref().is_none_or(|(t, _)| at < *t) {
                next = Some((at, why));
            }
        };
        if let Some((at, why)) = self.registry.poll_timeout() {
            consider(at, EndpointTimeout::Gateway(why));
        }
        for (&session, live) in &self.lives {
            if let Some(starting) = &live.starting {
                consider(starting.deadline, EndpointTimeout::Start { session });
            }
            if let Some(at) = live.settle_by {
                consider(at, EndpointTimeout::Settle { session });
            }
            if let Some((at, reason)) = live.session.poll_timeout() {
                consider(at, EndpointTimeout::Session { session, reason });
            }
        }
        for (&request, flight) in &self.requests {
            if let Some(at) = flight.next_ping {
                consider(at, EndpointTimeout::Ping { request });
            }
        }
        if let Some(approval) = self.approvals.values().min_by_key(|a| a.deadline) {
            consider(approval.deadline, EndpointTimeout::Approval);
        }
        for (&request, (_, at)) in &self.watchers {
            consider(*at, EndpointTimeout::Ping { request });
        }
        if let Some(until) = self.draining.filter(|_| !self.lives.is_empty()) {
            consider(until, EndpointTimeout::Drain);
        }
        if let Some(queued) = self.queue.iter().min_by_key(|q| q.deadline) {
            consider(
                queued.deadline,
                EndpointTimeout::Queued {
                    request: queued.request,
                },
            );
        }
        next
    }

    // ---- approvals over HTTP ----------------------------------------------------------------

    /// `GET /v1/approvals`: the permission requests of `tenant`'s conversations waiting for an
    /// answer, oldest first.
    pub fn approvals(&self, tenant: &str) -> Value {
        let data: Vec<Value> = self
            .approvals
            .iter()
            .filter(|(_, a)| a.tenant == tenant)
            .map(|(id, a)| self.approval_json(id, a))
            .collect();
        json!({"object": "list", "data": data})
    }

    /// `POST /v1/approvals/{id}`: a person's answer, `{"behavior": "allow" | "deny",
    /// "message"?, "updated_input"?, "remember"?}` (`remember` applies the CLI's suggested
    /// permission updates, so it stops asking for the like). Returns what was decided.
    ///
    /// # Errors
    /// 404 for an id `tenant` has no pending approval under (answered, expired, another's),
    /// 400 for a body of another shape.
    pub fn answer_approval(
        &mut self,
        now: Timestamp,
        tenant: &str,
        id: &str,
        body: &[u8],
    ) -> Result<Value, ApiError> {
        self.now = now;
        if self.approvals.get(id).is_none_or(|a| a.tenant != tenant) {
            return Err(ApiError::new(
                ApiErrorKind::NotFound,
                format!("no pending approval {id:?}"),
            ));
        }
        let answer: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::invalid("body", format!("the body is not JSON: {e}")))?;
        let message = answer.get("message").and_then(Value::as_str);
        if answer.get("message").is_some_and(|m| !m.is_string()) {
            return Err(ApiError::invalid("message", "message: must be a string"));
        }
        let remember = match answer.get("remember") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(ApiError::invalid("remember", "remember: must be a boolean")),
        };
        let updated_input = match answer.get("updated_input") {
            None | Some(Value::Null) => None,
            Some(v @ Value::Object(_)) => Some(v.clone()),
            Some(_) => {
                return Err(ApiError::invalid(
                    "updated_input",
                    "updated_input: must be an object (the tool's input)",
                ))
            }
        };
        let approval = &self.approvals[id];
        let decision = match answer.get("behavior").and_then(Value::as_str) {
            Some("allow") => PermissionDecision::Allow {
                updated_input,
                updated_permissions: if remember {
                    match approval.suggestions.to_value() {
                        Value::Array(updates) => updates,
                        _ => Vec::new(),
                    }
                } else {
                    Vec::new()
                },
            },
            Some("deny") => PermissionDecision::deny(
                message
                    .unwrap_or("A person denied this tool call.")
                    .to_owned(),
            ),
            _ => {
                return Err(ApiError::invalid(
                    "behavior",
                    "behavior: must be \"allow\" or \"deny\"",
                ))
            }
        };
        let behavior = answer["behavior"].as_str().unwrap_or_default().to_owned();
        self.settle_approval(now, id, decision, &behavior);
        Ok(json!({"id": id, "behavior": behavior}))
    }

    /// `GET /v1/approvals/events`: a stream (SSE) of `tenant`'s approvals as they come
    /// (`event: approval`, the pending ones first) and go (`event: resolved`), with
    /// keep-alives, until the client goes away or the gateway drains.
    pub fn handle_approval_events(&mut self, now: Timestamp, request: RequestId, tenant: &str) {
        self.now = now;
        self.outputs.push_back(EndpointOutput::Respond {
            request,
            status: 200,
            headers: vec![
                ("content-type".to_owned(), "text/event-stream".to_owned()),
                ("cache-control".to_owned(), "no-cache".to_owned()),
            ],
        });
        let mut frames = String::new();
        for (id, approval) in &self.approvals {
            if approval.tenant == tenant {
                frames.push_str(&sse("approval", &self.approval_json(id, approval)));
            }
        }
        if frames.is_empty() {
            frames.push_str(": no approval is pending\n\n");
        }
        self.outputs.push_back(EndpointOutput::Body {
            request,
            bytes: frames.into_bytes(),
        });
        let next_ping = now.saturating_add(self.config.ping_every_ms);
        self.watchers
            .insert(request, (tenant.to_owned(), next_ping));
    }

    fn approval_json(&self, id: &str, a: &Approval) -> Value {
        let unix = |t: Timestamp| self.config.unix_epoch_ms.saturating_add(t);
        json!({
            "id": id,
            "tool_name": a.tool_name,
            "input": a.input.as_raw(),
            "tool_use_id": a.tool_use_id,
            "blocked_path": a.blocked_path,
            "suggestions": a.suggestions.as_raw(),
            "conversation": a.session,
            "created_at_ms": unix(a.created),
            "expires_at_ms": unix(a.deadline),
        })
    }

    fn on_permission_request(&mut self, now: Timestamp, session: SessionId, chunk: &Chunk) {
        let Chunk::PermissionRequest {
            request_id,
            tool_use_id,
            tool_name,
            input,
            suggestions,
            blocked_path,
            ..
        } = chunk
        else {
            return;
        };
        let Some(live) = self.lives.get_mut(&session) else {
            return;
        };
        if !self.config.approvals {
            let decision = PermissionDecision::deny(
                "This gateway has no one to approve tools; the tool did not run.",
            );
            let _ = live.session.respond_permission(now, request_id, decision);
            return;
        }
        self.next_approval += 1;
        let id = format!(
            "appr_{:016x}",
            mix(self.config.seed ^ self.next_approval.rotate_left(40))
        );
        let approval = Approval {
            session,
            request_id: request_id.clone(),
            tenant: live.tenant.clone(),
            tool_name: tool_name.clone(),
            tool_use_id: tool_use_id.clone(),
            input: input.clone(),
            suggestions: suggestions.clone(),
            blocked_path: blocked_path.clone(),
            created: now,
            deadline: now.saturating_add(self.config.approval_timeout_ms),
        };
        let event = self.approval_json(&id, &approval);
        let tenant = approval.tenant.clone();
        self.approvals.insert(id, approval);
        self.approval_event(&tenant, "approval", &event);
    }

    /// Answers an approval's permission request and tells the watchers.
    fn settle_approval(
        &mut self,
        now: Timestamp,
        id: &str,
        decision: PermissionDecision,
        how: &str,
    ) {
        let Some(approval) = self.approvals.get(id) else {
            return;
        };
        let (session, request_id) = (approval.session, approval.request_id.clone());
        self.forget_approval(id, how);
        if let Some(live) = self.lives.get_mut(&session) {
            let _ = live.session.respond_permission(now, &request_id, decision);
            self.drain_session(now, session);
        }
    }

    fn forget_session_approvals(&mut self, session: SessionId) {
        let ids: Vec<String> = self
            .approvals
            .iter()
            .filter(|(_, a)| a.session == session)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            self.forget_approval(&id, "cancelled");
        }
    }

    /// Drops an approval and tells the watchers how it ended.
    fn forget_approval(&mut self, id: &str, how: &str) {
        if let Some(approval) = self.approvals.remove(id) {
            self.approval_event(
                &approval.tenant,
                "resolved",
                &json!({"id": id, "behavior": how}),
            );
        }
    }

    fn approval_event(&mut self, tenant: &str, event: &str, data: &Value) {
        let frame = sse(event, data);
        let ping_every = self.config.ping_every_ms;
        for (&request, (watching, next_ping)) in &mut self.watchers {
            if watching == tenant {
                *next_ping = self.now.saturating_add(ping_every);
                self.outputs.push_back(EndpointOutput::Body {
                    request,
                    bytes: frame.clone().into_bytes(),
                });
            }
        }
    }

    // ---- internals -----------------------------------------------------------------------

    /// A Responses API id: `resp_` and 32 hex digits from the seed and a counter.
    fn response_id(&mut self) -> String {
        self.next_response += 1;
        let a = mix(self.config.seed ^ self.next_response);
        let b = mix(a ^ self.next_response.rotate_left(32));
        format!("resp_{a:016x}{b:016x}")
    }

    /// How to start the CLI of a new conversation of `request`: the command line and the MCP
    /// server of the client's tools. Equal for requests a warm CLI can serve.
    fn cli_for(&self, request: &ApiRequest) -> (CliSpec, Vec<McpServer>) {
        let enabled = &self.config.enabled_tools;
        let external: Vec<McpTool> = request
            .conversation
            .tools
            .iter()
            .filter(|t| !enabled.contains(&t.name))
            .map(|t| {
                let mut tool = McpTool::new(&t.name, &t.description, t.input_schema.clone());
                // Lets the CLI ask for every call of one message at once (HOLD.md §4).
                tool.annotations = Some(json!({"readOnlyHint": true}));
                tool
            })
            .collect();
        let mut args: Vec<String> = [
            "--output-format",
            "stream-json",
            "--verbose",
            "--input-format",
            "stream-json",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        if let Some(system) = &request.conversation.system {
            args.extend(["--system-prompt".to_owned(), system.clone()]);
        }
        if let Some(model) = cli_model(&request.model, self.config.default_model.as_deref()) {
            args.extend(["--model".to_owned(), model]);
        }
        args.extend(["--tools".to_owned(), enabled.join(",")]);
        let mut allowed = enabled.clone();
        let mut servers = Vec::new();
        if !external.is_empty() {
            allowed.push(format!("mcp__{CLIENT_SERVER}"));
            let mut server = McpServer::new(CLIENT_SERVER);
            server.tools = external;
            servers.push(server);
            let config = json!({"mcpServers": {CLIENT_SERVER: {
                "type": "sdk", "name": CLIENT_SERVER,
                "alwaysLoad": true, "disableAutoBackground": true,
            }}});
            args.extend(["--mcp-config".to_owned(), config.to_string()]);
        }
        if self.config.approvals {
            // Enabled tools ask; a person answers over HTTP.
            allowed.retain(|t| !enabled.contains(t));
            args.extend(["--permission-prompt-tool".to_owned(), "stdio".to_owned()]);
        }
        if !allowed.is_empty() {
            args.extend(["--allowedTools".to_owned(), allowed.join(",")]);
        }
        args.push("--include-partial-messages".to_owned());
        args.extend(cli_settings_args(request));
        let spec = CliSpec {
            args,
            // A parent Claude Code session (`CLAUDECODE`) would make the CLI think it is nested.
            env_remove: std::iter::once("CLAUDECODE")
                .chain(STRIPPED_ENV.iter().copied())
                .map(str::to_owned)
                .collect(),
            env: vec![(
                "CLAUDE_CODE_SDK_READS_SESSION_STATE".to_owned(),
                "1".to_owned(),
            )],
        };
        (spec, servers)
    }

    /// Asks for a CLI for session `id` and sends it `initialize`; `prompt` goes to it once
    /// the CLI has answered (a warm CLI gets none until a conversation takes it).
    fn spawn(
        &mut self,
        now: Timestamp,
        id: SessionId,
        spec: CliSpec,
        servers: Vec<McpServer>,
        prompt: Option<UserMessage>,
    ) {
        let mut session = Session::driver(SessionConfig {
            seed: mix(self.config.seed ^ id.rotate_left(17)),
            mcp_servers: servers,
            ..SessionConfig::default()
        });
        self.metrics.spawns += 1;
        self.outputs
            .push_back(EndpointOutput::Spawn { session: id, spec });
        let init_id = match session.initialize(now, &[], Map::new()) {
            Ok((init_id, _)) => init_id,
            Err(_) => unreachable!("a new driver session takes commands"),
        };
        self.lives.insert(
            id,
            Live {
                session,
                tenant: String::new(),
                request: None,
                starting: Some(Starting {
                    init_id,
                    prompt,
                    deadline: now.saturating_add(self.config.start_timeout_ms),
                }),
                settle_by: None,
                rate_limit_resets_ms: None,
            },
        );
    }

    /// A warm CLI started for these settings, taken out of the pool (the oldest first).
    fn take_warm(&mut self, signature: &str) -> Option<SessionId> {
        let id = self
            .pool
            .iter()
            .find(|(_, warm)| warm.signature == signature)
            .map(|(id, _)| *id)?;
        self.pool.remove(&id);
        Some(id)
    }

    /// Keeps the pool stocked for the settings of a conversation that just started: one CLI
    /// for the one a conversation took, and after a miss as many as fit, making room by
    /// closing the oldest warm CLI of other settings (at most one). The CLIs start one at a
    /// time ([`pool_step`](Self::pool_step)), so a burst of new conversations does not share
    /// the machine with a burst of starting CLIs.
    fn refill(
        &mut self,
        now: Timestamp,
        signature: &str,
        spec: &CliSpec,
        servers: &[McpServer],
        hit: bool,
    ) {
        let want = self.config.pool;
        if want == 0 {
            return;
        }
        let mut room = want.saturating_sub(self.pool.len() + self.pool_wanted.len());
        if room == 0 {
            let other = self
                .pool
                .iter()
                .find(|(_, warm)| warm.signature != signature)
                .map(|(id, _)| *id);
            if let Some(oldest) = other {
                self.close(now, oldest);
                room = 1;
            }
        }
        let count = if hit { room.min(1) } else { room };
        for _ in 0..count {
            self.pool_wanted
                .push_back((signature.to_owned(), spec.clone(), servers.to_vec()));
        }
    }

    /// Starts the next wanted warm CLI when none is starting.
    fn pool_step(&mut self) {
        let starting = self
            .pool
            .keys()
            .any(|id| self.lives.get(id).is_some_and(|l| l.starting.is_some()));
        if starting || self.lives.len() >= self.config.max_sessions {
            return;
        }
        let Some((signature, spec, servers)) = self.pool_wanted.pop_front() else {
            return;
        };
        let now = self.now;
        let id = self.registry.allocate_id();
        self.pool.insert(id, Warm { signature });
        self.spawn(now, id, spec, servers, None);
        self.drain_session(now, id);
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
        for request in std::mem::take(&mut self.watchers).into_keys() {
            self.outputs.push_back(EndpointOutput::End { request });
        }
        let warm: Vec<SessionId> = self.pool.keys().copied().collect();
        for id in warm {
            self.close(now, id);
        }
        self.close_finished(now);
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
        self.outputs.push_back(EndpointOutput::Close { session });
        if let Some(request) = live.request {
            let error = ApiError::new(
                ApiErrorKind::Api,
                "the Claude Code session was closed before the response was complete",
            );
            self.fail(now, request, error);
        }
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
                        .push_back(EndpointOutput::Write { session, bytes });
                }
                Output::Chunk(chunk) => self.on_chunk(now, session, chunk),
            }
        }
    }

    fn on_chunk(&mut self, now: Timestamp, session: SessionId, chunk: Chunk) {
        match &chunk {
            Chunk::PermissionRequest { .. } => self.on_permission_request(now, session, &chunk),
            Chunk::PermissionResolved { request_id, .. } => {
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
                        match live.session.send_user_message(now, prompt) {
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
            Chunk::Unknown { message } if message.get().contains("\"rate_limit_event\"") => {
                let event = message.to_value();
                let info = &event["rate_limit_info"];
                if event["type"] == "rate_limit_event" && info["status"] == "rejected" {
                    // `resetsAt` is in Unix seconds (milliseconds accepted too).
                    live.rate_limit_resets_ms = info["resetsAt"].as_f64().map(|at| {
                        if at < 1e11 {
                            (at * 1000.0) as u64
                        } else {
                            at as u64
                        }
                    });
                }
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
                self.outputs.push_back(EndpointOutput::Respond {
                    request,
                    status: 200,
                    headers,
                });
                self.responded(request, 200);
            }
            self.outputs.push_back(EndpointOutput::Body {
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
        let flight = self.requests.remove(&request).expect("looked up above");
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
                *self.metrics.tokens.entry(kind).or_default() += n;
            }
            let calls = flight
                .encoder
                .tool_calls()
                .into_iter()
                .map(|c| c.id.clone())
                .collect();
            self.registry
                .response_done(session, &flight.encoder.message(), calls, now);
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
            self.outputs.push_back(EndpointOutput::End { request });
            self.ended(request);
            return;
        }
        match (flight.encoder.body(), flight.encoder.outcome()) {
            (Some(body), _) => {
                let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
                headers.extend(flight.headers);
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

    /// Moves the routing index's changes into the outputs.
    fn publish(&mut self) {
        for change in self.registry.take_index_changes() {
            self.outputs.push_back(match change {
                IndexChange::Claim(key) => EndpointOutput::Claim { key },
                IndexChange::Release(key) => EndpointOutput::Release { key },
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
        let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        if let Some(seconds) = error.retry_after {
            headers.push(("retry-after".to_owned(), seconds.to_string()));
        }
        headers.extend(extra.iter().cloned());
        let body = error.body(api).to_string().into_bytes();
        self.respond_whole(request, error.status(), headers, body);
    }

    fn respond_whole(
        &mut self,
        request: RequestId,
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    ) {
        self.outputs.push_back(EndpointOutput::Respond {
            request,
            status,
            headers,
        });
        self.responded(request, status);
        self.outputs.push_back(EndpointOutput::Body {
            request,
            bytes: body,
        });
        self.outputs.push_back(EndpointOutput::End { request });
        self.ended(request);
    }

    /// Counts a response head: the request's API and status, its time to first byte.
    fn responded(&mut self, request: RequestId, status: u16) {
        let Some(&arrival) = self.arrivals.get(&request) else {
            return;
        };
        *self
            .metrics
            .requests
            .entry((api_label(arrival.api), status))
            .or_default() += 1;
        let first_byte = self.now.saturating_sub(arrival.at);
        self.metrics.first_byte.observe(first_byte as f64 / 1000.0);
        if let (Some(sent), Some(first)) = (arrival.cli_sent, arrival.cli_first) {
            let cli = first.saturating_sub(sent);
            self.metrics
                .added
                .observe(first_byte.saturating_sub(cli) as f64 / 1000.0);
        }
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
            self.metrics.response.observe(seconds(self.now, arrival.at));
        }
    }
}

fn api_label(api: Api) -> &'static str {
    match api {
        Api::Anthropic => "anthropic",
        Api::OpenAi => "openai",
        Api::Responses => "responses",
    }
}

fn seconds(now: Timestamp, since: Timestamp) -> f64 {
    now.saturating_sub(since) as f64 / 1000.0
}

fn sse(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

/// splitmix64's finalizer: spreads a seed and a counter over 64 bits.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
