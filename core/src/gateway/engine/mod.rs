//! [`Gateway`]: the whole gateway as one sans-IO state machine.

use std::collections::{BTreeMap, VecDeque};

use serde_json::{json, Value};

mod approvals;
mod closing;
mod cluster;
mod console;
mod context;
mod flights;
mod http;
mod keeping;
mod keys;
mod managed;
mod metering;
mod pool;
mod prepared;
mod requests;
mod routes;
mod seam;
mod store;
mod timers;
mod types;
mod views;

pub use cluster::{fans_out, FanOut, Held, Holder, Placed, Placement};
pub use console::merge_node_answers;

pub use http::{
    prepare, Admission, BodyError, ConfigError, HttpConfig, HttpHead, HttpResponse, Prepared,
};
use prepared::prepare_request;
pub use prepared::PreparedRequest;
pub use seam::{StoreAnswer, StoreAsk};
pub use types::{
    fair_share, is_tenant_id, tenant_id, CliSpec, ConversationKey, ConversationRecord,
    GatewayConfig, GatewayOutput, GatewayTimeout, RecordState, ResumeSpec, RouteKey, TenantDirs,
};

use approvals::Approval;
use pool::Warm;
use store::{Finding, Opening};

use super::metrics::{Gauges, Metrics};
use super::registry::{
    Action, Ahead, CallAction, IndexChange, Match, Registry, ResumeReason, SessionId, SessionKind,
};
use super::translate::{check_request, prompt_content};
use crate::api::response::{EncoderOptions, Outcome, ResponseEncoder};
use crate::api::{self, Api, ApiError, ApiErrorKind, ApiRequest};
use crate::session::{CommandError, Output, PermissionDecision, ReadyPrompt, Session, UserMessage};
use crate::{Chunk, Timestamp};

/// A request's id, chosen by the host; unique among the requests the gateway has not ended.
/// A host numbers its requests below 2⁶²: the ids from there up are the gateway's own (the
/// turns of Managed Agents sessions, which it makes of itself).
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
    /// Its first turn, watched for the context it records (a conversation it started).
    first_turn: Option<context::FirstTurn>,
    /// What its turns used, from its results.
    meter: crate::gateway::usage::TurnMeter,
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
    /// A tenant's approvals (`None`: every tenant's, for the operator).
    Approvals(Option<String>),
    /// A Managed Agents session (its id), with the previews it opted into (`event_deltas`).
    AgentSession(String, managed::Previews),
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
///         request body  => (in a cluster: gateway.placement(head, tenant, prepared) names
///                          the key whose holder serves it; ask the registry, then
///                          gateway.placed(placement, tenant, holder) says: forward it to the
///                          holder, to any other node, or serve it here)
///                          gateway.handle_http(now, req, head, tenant, body),
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
///                          FoundResponse, Listed, ManagedLoaded, TranscriptLoaded,
///                          UsageRead), or that a lookup, a write or a resume's transcript
///                          failed, or that another gateway resumed a conversation since
///                          (Superseded)
///         keys (at start, every few seconds, when gateway.manages_keys())
///                       => gateway.handle_keys_loaded(now, the store's key records),
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
///                                               Pool, Response, Managed, KeepKey, AddUsage,
///                                               KeepWindow) or look up (Find, FindResponse,
///                                               List, LoadManaged, Load, Usage, ReadUsage)
///                                               and give the answer to handle_store (and each
///                                               tenant's usage after an append),
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
/// gateway claims, forwards it there, as [`Gateway::placement`] and [`Gateway::placed`] decide. A key nobody claims (the owner died or expired it) is
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
    agent_sessions: managed::AgentSessions,
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
    /// Responses whose end waits for the session store to keep their turn.
    keeping: BTreeMap<RequestId, keeping::Keeping>,
    /// What keys used, the rate-limit windows, the store's byte counts.
    metering: metering::Metering,
    /// The context its CLIs record after a conversation's first message, by tenant and
    /// model, with when it was learned ([`context`]).
    contexts: context::Contexts,
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
            agent_sessions: managed::AgentSessions::default(),
            next_approval: 0,
            watchers: BTreeMap::new(),
            console_waiting: BTreeMap::new(),
            front,
            finding: BTreeMap::new(),
            fetching: BTreeMap::new(),
            next_conversation: 0,
            keeping: BTreeMap::new(),
            metering: metering::Metering::new(),
            contexts: BTreeMap::new(),
        })
    }

    // ---- inputs --------------------------------------------------------------------------

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
            || self.metering.waiting.remove(&request).is_some()
            || self.front.counting.remove(&request).is_some()
        {
            return;
        }
        if let Some(tenant) = self.metering.forget_waiting(request) {
            self.arrivals.remove(&request);
            self.count(&tenant, |m| m.clients_gone += 1);
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
