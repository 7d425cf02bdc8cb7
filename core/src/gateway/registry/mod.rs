//! The conversation registry: which live CLI session a request continues, the client tool
//! calls held open across requests, stored responses, and the deadlines of held calls, idle
//! sessions and stored responses. Private to the [`Gateway`](super::Gateway), which tells it
//! what happened and carries out what it answers.
//!
//! A request's history (the messages up to its last assistant message) is hashed in a *scope*:
//! the caller's API key and everything a live session cannot change (tool set, system prompt,
//! model). After each response the registry stores the hash of the history extended by the
//! assistant message it returned, so the client's next request finds the session again.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::api::{Api, ApiError, ApiErrorKind, ApiRequest};
use crate::conversation::{Block, Conversation, HistoryHasher, Message};
use crate::mcp::McpCallResult;
use crate::Timestamp;

use super::translate::{
    history_hashes, live_hash, prompt_blocks, rebuild_prompt, tool_results, Hashes,
};

mod matching;
mod stored;

/// What a request's routing needs that was computed ahead, off the endpoint: the request's
/// `scope` ([`request_scope`](super::translate::request_scope)), its `hashes` (the history's and the hasher over all its
/// messages) and whether the prompt a new session starts with is made already
/// (`prompt_ready`: a `Start` match's prompt is left empty). A request that continues a stored
/// response has neither: the stored history goes in front of it first.
pub(crate) struct Ahead<'a> {
    pub(crate) scope: &'a str,
    pub(crate) hashes: Option<Hashes>,
    pub(crate) prompt_ready: bool,
    /// A history no live session continues is looked up in the session store
    /// ([`Match::Find`]) instead of rebuilt.
    pub(crate) find: bool,
}

/// A live session's id, given by the gateway.
pub type SessionId = u64;

/// Time limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// How long a held client tool call waits for the client's result (ms).
    pub held_call_timeout_ms: u64,
    /// How long a session may sit without a request before it is closed (ms); a stored
    /// response (Responses API, `store: true`) is kept as long after it was last used.
    pub idle_ttl_ms: u64,
    /// The most stored responses kept at once, over all tenants; the least recently used go
    /// first.
    pub max_stored_responses: usize,
    /// How long an idle session's CLI lives before it is closed to be resumed on demand (ms;
    /// with a session store); `u64::MAX`: only after `idle_ttl_ms`.
    pub hibernate_after_ms: u64,
}

impl Limits {
    /// How long a session may sit idle before its CLI is closed, and whether that is its
    /// idle time-to-live (rather than the hibernation delay).
    fn idle_limit(&self) -> (u64, bool) {
        if self.hibernate_after_ms < self.idle_ttl_ms {
            (self.hibernate_after_ms, false)
        } else {
            (self.idle_ttl_ms, true)
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            held_call_timeout_ms: 10 * 60 * 1000,
            idle_ttl_ms: 30 * 60 * 1000,
            max_stored_responses: 10_000,
            hibernate_after_ms: u64::MAX,
        }
    }
}

/// How a request's session was found; the `x-ccwire-session` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionKind {
    /// The history matched a live session.
    Continued,
    /// The history is a stored conversation's: a new CLI resumes its transcript.
    Resumed(ResumeReason),
    /// The history has assistant turns but no live session: a new one carries them.
    Rebuilt,
    /// No history: a new session.
    New,
}

/// Why a conversation was resumed rather than continued: what ended its last CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumeReason {
    /// Its CLI was closed while idle, to make room or after `hibernate_after`.
    Hibernated,
    /// Its CLI was closed after the idle time-to-live.
    Expired,
    /// The gateway that ran its CLI stopped (or another gateway ran it).
    Restarted,
    /// Its CLI ended by itself.
    Ended,
    /// The request changed the conversation's settings (system prompt, tools, model, …):
    /// its CLI was closed and a new one resumes it under the new ones.
    Settings,
    /// The history is not one a CLI of the gateway wrote (few-shot examples, an edited or
    /// reordered past, a conversation of another gateway without a shared store): the gateway
    /// wrote it as a transcript, which a new CLI resumes.
    History,
    /// Like [`History`](Self::History), a history that goes on from a live conversation's
    /// first this many messages and then differs from it (a client that answered another way
    /// or edited the answer).
    Diverged(usize),
    /// The client's tool results came after the gateway gave up waiting for them (the
    /// held-call timeout) and the CLI's turn went on without them: a new CLI resumes the
    /// history with the results.
    Late,
    /// The client's tool results were handed to the CLI by a request whose response did not
    /// reach the client, and came again: a new CLI resumes the history with them.
    Retried,
}

impl ResumeReason {
    /// The reason in one word (the `x-ccwire-session-reason` header, the metrics' label).
    pub fn as_str(self) -> &'static str {
        match self {
            ResumeReason::Hibernated => "hibernated",
            ResumeReason::Expired => "expired",
            ResumeReason::Restarted => "restarted",
            ResumeReason::Ended => "ended",
            ResumeReason::Settings => "settings",
            ResumeReason::History => "history",
            ResumeReason::Diverged(_) => "diverged",
            ResumeReason::Late => "late",
            ResumeReason::Retried => "retried",
        }
    }
}

impl std::fmt::Display for ResumeReason {
    /// The reason as the `x-ccwire-session-reason` header says it (`diverged at message 4`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResumeReason::Diverged(at) => write!(f, "diverged at message {at}"),
            other => f.write_str(other.as_str()),
        }
    }
}

impl SessionKind {
    /// The header value.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionKind::Continued => "continued",
            SessionKind::Resumed(_) => "resumed",
            SessionKind::Rebuilt => "rebuilt",
            SessionKind::New => "new",
        }
    }
}

/// What a request's history matched: the live session it continues, a lookup in the session
/// store, or a new session.
#[derive(Debug, Clone, PartialEq)]
pub enum Match {
    /// Continue a live session: answer these held calls, then send the prompt, if any.
    Continue {
        /// The session.
        session: SessionId,
        /// Held `tools/call` requests to answer now: (control request id, result).
        answers: Vec<(String, McpCallResult)>,
        /// Content to send as a user message (after the answers), when the request adds any.
        prompt: Option<Vec<Block>>,
    },
    /// No live session continues the history: look it up in the session store by its hash
    /// in the tenant's scope, then [`Registry::found`].
    Find {
        /// The history's hash in the tenant's scope.
        hash: String,
        /// What a live conversation of the tenant says of the history, when one does.
        parted: Option<Parted>,
    },
    /// Start a new CLI session and send it `prompt`.
    Start {
        /// The new session's id.
        session: SessionId,
        /// `New`, or `Rebuilt` when the prompt carries the earlier turns.
        kind: SessionKind,
        /// The first user message.
        prompt: Vec<Block>,
        /// A live session this one replaces, to close.
        replaces: Option<SessionId>,
        /// Why a history written for a new CLI is resumed, when a live conversation says
        /// ([`History`](ResumeReason::History) when none does).
        reason: Option<ResumeReason>,
    },
}

/// What a live conversation of the tenant says of a history that no live session continues:
/// why the conversation is resumed, and that conversation's session when it waits for client
/// tool results it will never get (to close).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parted {
    /// Why: [`Diverged`](ResumeReason::Diverged) where the history parted from the
    /// conversation's, [`Settings`](ResumeReason::Settings) where it brings the results of the
    /// calls the conversation holds under other settings.
    pub reason: ResumeReason,
    /// The session to close.
    pub replaces: Option<SessionId>,
}

/// What the host must do after a timeout or a tool call.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Answer a held `tools/call` of a session.
    Answer {
        /// The session.
        session: SessionId,
        /// The control request id of the call.
        request_id: String,
        /// The result.
        result: McpCallResult,
    },
    /// Close a session (idle too long).
    Close {
        /// The session.
        session: SessionId,
        /// Idle for the whole time-to-live (else for the hibernation delay).
        expired: bool,
    },
}

/// What the host should do with a `tools/call` the CLI just made.
#[derive(Debug, Clone, PartialEq)]
pub enum CallAction {
    /// Answer it now with this result.
    Answer(McpCallResult),
    /// Hold it: the client's result is not in yet.
    Hold,
}

/// Why [`Registry::poll_timeout`] wants to be woken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistryTimeout {
    /// A held call's deadline.
    HeldCall,
    /// A session's idle deadline.
    Idle,
    /// A stored response's deadline.
    StoredResponse,
}

#[derive(Debug)]
struct Held {
    request_id: String,
    since: Timestamp,
}

#[derive(Debug, Default)]
struct Entry {
    /// The scope of its requests ([`request_scope`](super::translate::request_scope)).
    scope: String,
    hashes: Vec<String>,
    /// The request in flight (the session is busy): the hash of its messages, which the
    /// response's message completes.
    in_flight: Option<HistoryHasher>,
    last_active: Timestamp,
    /// Client tool calls returned in the last response, awaiting the client's results.
    expected: Vec<String>,
    /// Held `tools/call`s by tool_use id.
    held: BTreeMap<String, Held>,
    /// Client results that came before the CLI asked.
    results: BTreeMap<String, McpCallResult>,
    /// Calls the gateway or the CLI ended without the client's result; a result for them is
    /// accepted and dropped.
    settled: BTreeSet<String>,
    /// Client results handed to the CLI by the request in flight (or by the last one, when its
    /// response failed): the CLI has them, so the same request sent again cannot continue.
    delivered: BTreeSet<String>,
    /// The request in flight asked for its response to be stored (Responses API).
    store: Option<PendingStore>,
}

/// What a response to store needs besides its message.
#[derive(Debug)]
struct PendingStore {
    tenant: String,
    response_id: String,
    previous: Option<String>,
    input: Vec<Message>,
}

impl Entry {
    fn busy(&self) -> bool {
        self.in_flight.is_some()
    }
}

/// The 429 of a conversation busy with another request.
pub(crate) fn busy() -> ApiError {
    ApiError::new(
        ApiErrorKind::RateLimit,
        "this conversation is busy with another request; retry when it has finished",
    )
    .retry_after(1)
}

/// The text a held call gets when the client does not answer in time.
pub const HELD_CALL_TIMEOUT_TEXT: &str =
    "The client did not return a result for this tool call in time; the call was abandoned.";

/// A stored response: a link of a chain that `previous_response_id` continues.
#[derive(Debug)]
struct StoredResponse {
    /// The stored response the request continued.
    previous: Option<String>,
    /// The request's own messages and the response's message.
    messages: Vec<Message>,
    /// The response's output message items: id and text (what `item_reference` names).
    items: Vec<(String, String)>,
    /// When it was stored or last continued.
    touched: Timestamp,
}

/// A request being looked up in the session store ([`Match::Find`]).
#[derive(Debug)]
struct Finding {
    scope: String,
    hasher: HistoryHasher,
    store: Option<PendingStore>,
}

/// A response stored for `previous_response_id`, as a session store keeps it
/// ([`Registry::take_stored`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredOut {
    /// The caller (its API key: the gateway turns it into the tenant's id).
    #[serde(skip)]
    pub tenant: String,
    /// The response's id.
    #[serde(skip)]
    pub id: String,
    /// The stored response it continued.
    pub previous: Option<String>,
    /// Its request's own messages and its message.
    pub messages: Vec<Message>,
    /// Its output message items: id and text.
    #[serde(default)]
    pub items: Vec<(String, String)>,
}

/// A stored response's key: the tenant and the response id (one tenant cannot continue
/// another's responses).
type StoredKey = (String, String);

/// The gateway state machine. See the [module docs](self).
#[derive(Debug, Default)]
pub struct Registry {
    config: Limits,
    sessions: BTreeMap<SessionId, Entry>,
    by_hash: BTreeMap<String, SessionId>,
    next_id: SessionId,
    stored: BTreeMap<StoredKey, StoredResponse>,
    /// The stored responses by the time they were last used, oldest first.
    stored_by_time: BTreeSet<(Timestamp, StoredKey)>,
    /// Requests looked up in the session store, by their history's hash in the tenant's scope.
    finding: BTreeMap<String, Finding>,
    /// Changes of the routing index, kept for a host that shares it (see
    /// [`Gateway::route_key`](super::Gateway::route_key)); `None` when nobody reads them.
    index_changes: Option<Vec<IndexChange>>,
    /// Responses stored since [`take_stored`](Self::take_stored) was last called, for a
    /// session store to keep too; `None` when nobody reads them.
    stored_out: Option<Vec<StoredOut>>,
}

/// A change of what this gateway serves: a key a front router may look up to find the gateway
/// that holds a conversation (see [`Gateway::route_key`](super::Gateway::route_key)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexChange {
    /// Requests with this key belong here now.
    Claim(String),
    /// They no longer do.
    Release(String),
}

/// The routing key of a stored response: a digest, so the tenant (an API key) never leaves the
/// gateway.
pub fn stored_response_key(tenant: &str, response_id: &str) -> String {
    use sha2::Digest;
    let mut sha = sha2::Sha256::new();
    sha.update(b"ccwire-stored-v1\0");
    sha.update(tenant.as_bytes());
    sha.update(b"\0");
    sha.update(response_id.as_bytes());
    crate::conversation::hex(&sha.finalize())
}

/// The routing key of a pending approval (`POST /v1/approvals/{id}`): a digest of its id,
/// which is unguessable and the gateway's own (so the operator, who answers any tenant's,
/// reaches it too; whose it is, is checked where it waits).
pub fn approval_route_key(id: &str) -> String {
    use sha2::Digest;
    let mut sha = sha2::Sha256::new();
    sha.update(b"ccwire-approval-v2\0");
    sha.update(id.as_bytes());
    crate::conversation::hex(&sha.finalize())
}

impl Registry {
    /// A gateway with these limits.
    pub fn new(config: Limits) -> Registry {
        Registry {
            config,
            ..Registry::default()
        }
    }

    /// Whether a session has no turn running: no request in flight and no tool call waiting
    /// for the client (a session the gateway does not know counts as idle).
    pub fn is_idle(&self, session: SessionId) -> bool {
        self.sessions
            .get(&session)
            .is_none_or(|e| !e.busy() && e.held.is_empty() && e.expected.is_empty())
    }

    /// When a session last served a request (`None` for one the registry does not know).
    pub fn last_active(&self, session: SessionId) -> Option<Timestamp> {
        self.sessions.get(&session).map(|e| e.last_active)
    }

    /// A session id for a session the host starts ahead of need ([`rekey`](Self::rekey) gives
    /// it a conversation later).
    pub fn allocate_id(&mut self) -> SessionId {
        self.next_id += 1;
        self.next_id
    }

    /// Moves a conversation's state from session `from` to session `to` (a CLI started ahead
    /// takes the conversation that [`match_prepared`](Self::match_prepared) started as `from`).
    pub fn rekey(&mut self, from: SessionId, to: SessionId) {
        let Some(entry) = self.sessions.remove(&from) else {
            return;
        };
        for hash in &entry.hashes {
            self.by_hash.insert(hash.clone(), to);
        }
        self.sessions.insert(to, entry);
    }

    /// Keeps the routing index's changes for [`take_index_changes`](Self::take_index_changes).
    pub fn publish_index(&mut self) {
        self.index_changes.get_or_insert_with(Vec::new);
    }

    /// The routing index's changes since the last call (none unless
    /// [`publish_index`](Self::publish_index) was called).
    pub fn take_index_changes(&mut self) -> Vec<IndexChange> {
        self.index_changes
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    fn changed(&mut self, change: IndexChange) {
        if let Some(changes) = &mut self.index_changes {
            changes.push(change);
        }
    }

    /// A response ended normally with the assistant `message`; `tool_calls` are the client
    /// tool calls in it. The request's messages and this message are the history the next
    /// request continues; a response [`match_prepared`](Self::match_prepared) was asked to
    /// store is stored. Returns that history's hash in the tenant's scope (what the session
    /// store finds the conversation by), or `None` (and does nothing) when the session has no
    /// request in flight: it was closed, or its response already ended.
    pub fn response_done(
        &mut self,
        session: SessionId,
        (message, items): (&Message, Vec<(String, String)>),
        tool_calls: Vec<String>,
        now: Timestamp,
    ) -> Option<String> {
        let entry = self.sessions.get_mut(&session)?;
        let mut hasher = entry.in_flight.take()?;
        hasher.extend(std::slice::from_ref(message));
        let stored_hash = hasher.finish();
        let hash = live_hash(&entry.scope, &stored_hash);
        let store = entry.store.take();
        // One live entry per session: older hashes cannot be continued any more.
        let old: Vec<String> = entry.hashes.drain(..).collect();
        entry.hashes.push(hash.clone());
        entry.expected = tool_calls;
        entry.delivered.clear();
        entry.last_active = now;
        for old in old {
            self.by_hash.remove(&old);
            self.changed(IndexChange::Release(old));
        }
        self.changed(IndexChange::Claim(hash.clone()));
        if let Some(previous) = self.by_hash.insert(hash, session) {
            if previous != session {
                if let Some(other) = self.sessions.get_mut(&previous) {
                    other.hashes.clear();
                }
            }
        }
        if let Some(store) = store {
            self.store_response(
                &store.tenant,
                &store.response_id,
                store.previous.as_deref(),
                store.input,
                (message.clone(), items),
                now,
            );
        }
        Some(stored_hash)
    }

    /// A response ended without completing (error, client gone); the session stays.
    pub fn response_failed(&mut self, session: SessionId, now: Timestamp) {
        if let Some(entry) = self.sessions.get_mut(&session) {
            entry.in_flight = None;
            entry.store = None;
            entry.last_active = now;
        }
    }

    /// The CLI calls a client tool.
    pub fn tool_call(
        &mut self,
        session: SessionId,
        request_id: &str,
        tool_use_id: Option<&str>,
        now: Timestamp,
    ) -> CallAction {
        let Some(entry) = self.sessions.get_mut(&session) else {
            return CallAction::Answer(McpCallResult::error("The session is closed."));
        };
        let Some(id) = tool_use_id else {
            return CallAction::Answer(McpCallResult::error(
                "The tool call carries no tool_use id; the gateway cannot route it.",
            ));
        };
        if let Some(result) = entry.results.remove(id) {
            return CallAction::Answer(result);
        }
        entry.held.insert(
            id.to_owned(),
            Held {
                request_id: request_id.to_owned(),
                since: now,
            },
        );
        CallAction::Hold
    }

    /// The CLI cancelled a held call (`notifications/cancelled`); a later result is dropped.
    pub fn tool_cancelled(&mut self, session: SessionId, tool_use_id: &str) {
        if let Some(entry) = self.sessions.get_mut(&session) {
            if entry.held.remove(tool_use_id).is_some() {
                entry.settled.insert(tool_use_id.to_owned());
            }
        }
    }

    /// Forgets a session (closed, or its process ended).
    pub fn close(&mut self, session: SessionId) {
        if let Some(entry) = self.sessions.remove(&session) {
            for hash in entry.hashes {
                self.by_hash.remove(&hash);
                self.changed(IndexChange::Release(hash));
            }
        }
    }

    /// The next deadline.
    pub fn poll_timeout(&self) -> Option<(Timestamp, RegistryTimeout)> {
        let mut next: Option<(Timestamp, RegistryTimeout)> = None;
        let mut consider = |at: Timestamp, why: RegistryTimeout| {
            if next.is_none_or(|(t, _)| at < t) {
                next = Some((at, why));
            }
        };
        for entry in self.sessions.values() {
            for held in entry.held.values() {
                consider(
                    held.since.saturating_add(self.config.held_call_timeout_ms),
                    RegistryTimeout::HeldCall,
                );
            }
            // A session whose calls wait for the client's results is not idle: its held
            // calls' own deadline ends them first.
            if !entry.busy() && entry.held.is_empty() {
                consider(
                    entry.last_active.saturating_add(self.config.idle_limit().0),
                    RegistryTimeout::Idle,
                );
            }
        }
        if let Some((touched, _)) = self.stored_by_time.first() {
            consider(
                touched.saturating_add(self.config.idle_ttl_ms),
                RegistryTimeout::StoredResponse,
            );
        }
        next
    }

    /// Applies the deadlines that passed by `now`.
    pub fn handle_timeout(&mut self, now: Timestamp) -> Vec<Action> {
        let mut actions = Vec::new();
        let held_limit = self.config.held_call_timeout_ms;
        let (idle_limit, ttl) = self.config.idle_limit();
        for (&session, entry) in &mut self.sessions {
            let expired: Vec<String> = entry
                .held
                .iter()
                .filter(|(_, h)| h.since.saturating_add(held_limit) <= now)
                .map(|(id, _)| id.clone())
                .collect();
            for id in expired {
                let held = entry.held.remove(&id).expect("listed above");
                entry.settled.insert(id);
                actions.push(Action::Answer {
                    session,
                    request_id: held.request_id,
                    result: McpCallResult::error(HELD_CALL_TIMEOUT_TEXT),
                });
            }
            let idle = entry.last_active.saturating_add(idle_limit) <= now;
            if !entry.busy() && entry.held.is_empty() && idle {
                actions.push(Action::Close {
                    session,
                    expired: ttl,
                });
            }
        }
        for action in &actions {
            if let Action::Close { session, .. } = action {
                self.close(*session);
            }
        }
        while let Some((touched, _)) = self.stored_by_time.first() {
            if touched.saturating_add(self.config.idle_ttl_ms) > now {
                break;
            }
            let (_, key) = self.stored_by_time.pop_first().expect("looked at above");
            self.stored.remove(&key);
            self.changed(IndexChange::Release(stored_response_key(&key.0, &key.1)));
        }
        actions
    }

    #[cfg(test)]
    /// Live sessions.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Held client tool calls, over all sessions.
    pub fn held_count(&self) -> usize {
        self.sessions.values().map(|e| e.held.len()).sum()
    }

    /// Held client tool calls of one session.
    pub fn held_in(&self, session: SessionId) -> usize {
        self.sessions.get(&session).map_or(0, |e| e.held.len())
    }

    /// The held client tool calls of one session: each call's tool_use id, when it was held
    /// and when it is given up, oldest first.
    pub fn held_calls(&self, session: SessionId) -> Vec<(String, Timestamp, Timestamp)> {
        let mut calls: Vec<(String, Timestamp, Timestamp)> = (self.sessions.get(&session))
            .into_iter()
            .flat_map(|e| e.held.iter())
            .map(|(id, held)| {
                let deadline = held.since.saturating_add(self.config.held_call_timeout_ms);
                (id.clone(), held.since, deadline)
            })
            .collect();
        calls.sort_by_key(|(_, since, _)| *since);
        calls
    }

    #[cfg(test)]
    /// The ids of live sessions.
    pub fn sessions(&self) -> impl Iterator<Item = SessionId> + '_ {
        self.sessions.keys().copied()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::super::translate::*;
    use super::*;
    use crate::conversation::Role;

    #[test]
    fn no_cli_inherits_the_gateway_s_variables_but_those_it_needs_and_those_passed() {
        let inherited = [
            "PATH",
            "CCWIRE_API_KEYS",
            "CCWIRE_X",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_REGION",
            "GITHUB_TOKEN",
            "DB_PASSWORD",
            "HOME",
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_CUSTOM",
            "CLAUDE_CODE_USE_BEDROCK",
            "LC_ALL",
        ];
        let named = [
            "ANTHROPIC_CUSTOM".to_owned(),
            "DB_PASSWORD".to_owned(),
            "NOT_SET".to_owned(),
        ];
        let removed = env_to_remove(inherited.into_iter(), &named, &["AWS_*".to_owned()]);
        assert_eq!(
            removed,
            [
                "ANTHROPIC_CUSTOM",
                "DB_PASSWORD",
                "NOT_SET",
                "CCWIRE_API_KEYS",
                "CCWIRE_X",
                "GITHUB_TOKEN"
            ]
        );
        let removed = env_to_remove(inherited.into_iter(), &[], &[]);
        assert!(removed.contains(&"AWS_SECRET_ACCESS_KEY".to_owned()));
        for kept in [
            "PATH",
            "HOME",
            "ANTHROPIC_API_KEY",
            "CLAUDE_CODE_USE_BEDROCK",
            "LC_ALL",
        ] {
            assert!(!removed.contains(&kept.to_owned()), "{kept}");
        }
    }

    fn text(t: &str) -> Block {
        Block::Text { text: t.into() }
    }

    fn conversation(messages: Vec<(Role, Vec<Block>)>) -> Conversation {
        let mut c = Conversation::default();
        for (role, blocks) in messages {
            c.push(role, blocks);
        }
        c
    }

    fn tool_use(id: &str) -> Block {
        Block::ToolUse {
            id: id.into(),
            name: "lookup".into(),
            input: json!({"q": id}),
        }
    }

    fn result(id: &str, t: &str) -> Block {
        Block::ToolResult {
            tool_use_id: id.into(),
            content: vec![text(t)],
            is_error: false,
        }
    }

    /// A session that answered `hi` with two tool calls, a and b.
    fn waiting_for_tools(gw: &mut Registry) -> (SessionId, Vec<Message>) {
        let c = conversation(vec![(Role::User, vec![text("hi")])]);
        let Match::Start { session, kind, .. } = gw.match_conversation("k", &c, 0).unwrap() else {
            panic!()
        };
        assert_eq!(kind, SessionKind::New);
        let mut history = c.messages.clone();
        history.push(Message {
            role: Role::Assistant,
            content: vec![tool_use("a"), tool_use("b")],
        });
        assert!(gw
            .response_done(
                session,
                (history.last().expect("the answer"), Vec::new()),
                vec!["a".into(), "b".into()],
                10
            )
            .is_some());
        assert!(
            gw.response_done(
                session,
                (history.last().expect("the answer"), Vec::new()),
                Vec::new(),
                11,
            )
            .is_none(),
            "a response ends once"
        );
        (session, history)
    }

    fn with_results(history: &[Message], results: Vec<Block>) -> Conversation {
        let mut c = Conversation {
            messages: history.to_vec(),
            ..Conversation::default()
        };
        c.push(Role::User, results);
        c
    }

    #[test]
    fn results_answer_held_calls_and_wait_for_calls_not_yet_made() {
        let mut gw = Registry::new(Limits::default());
        let (session, history) = waiting_for_tools(&mut gw);
        assert_eq!(
            gw.tool_call(session, "req-a", Some("a"), 20),
            CallAction::Hold
        );
        let c = with_results(&history, vec![result("b", "B"), result("a", "A")]);
        let Match::Continue {
            session: s,
            answers,
            prompt,
        } = gw.match_conversation("k", &c, 30).unwrap()
        else {
            panic!()
        };
        assert_eq!(s, session);
        assert_eq!(prompt, None);
        assert_eq!(answers.len(), 1);
        assert_eq!(answers[0].0, "req-a");
        assert_eq!(
            answers[0].1.content,
            vec![json!({"type":"text","text":"A"})]
        );
        // The CLI asks for b after a was answered (serial calls): answered from what was kept.
        let CallAction::Answer(b) = gw.tool_call(session, "req-b", Some("b"), 40) else {
            panic!()
        };
        assert_eq!(b.content, vec![json!({"type":"text","text":"B"})]);
    }

    #[test]
    fn missing_and_unknown_results_are_named_and_nothing_is_lost() {
        let mut gw = Registry::new(Limits::default());
        let (session, history) = waiting_for_tools(&mut gw);
        let err = gw
            .match_conversation("k", &with_results(&history, vec![result("a", "A")]), 30)
            .unwrap_err();
        assert_eq!(err.status(), 400);
        assert!(err.message.contains('b'), "{}", err.message);
        let err = gw
            .match_conversation(
                "k",
                &with_results(
                    &history,
                    vec![result("a", "A"), result("b", "B"), result("zz", "?")],
                ),
                30,
            )
            .unwrap_err();
        assert!(err.message.contains("zz"), "{}", err.message);
        // A corrected request still continues the session.
        let matched = gw
            .match_conversation(
                "k",
                &with_results(&history, vec![result("a", "A"), result("b", "B")]),
                30,
            )
            .unwrap();
        assert!(matches!(matched, Match::Continue { session: s, .. } if s == session));
    }

    #[test]
    fn results_sent_again_after_a_failed_response_rebuild() {
        let mut gw = Registry::new(Limits::default());
        let (session, history) = waiting_for_tools(&mut gw);
        let request = with_results(&history, vec![result("a", "A"), result("b", "B")]);
        let matched = gw.match_conversation("k", &request, 30).unwrap();
        assert!(matches!(matched, Match::Continue { session: s, .. } if s == session));
        // The client went away mid-answer; the CLI has the results, the retry cannot continue.
        gw.response_failed(session, 40);
        let matched = gw.match_conversation("k", &request, 50).unwrap();
        assert!(
            matches!(
                matched,
                Match::Start {
                    kind: SessionKind::Rebuilt,
                    replaces: Some(s),
                    ..
                } if s == session
            ),
            "{matched:?}"
        );
    }

    #[test]
    fn claude_models_pass_and_others_take_the_default() {
        assert_eq!(
            cli_model("claude-sonnet-4-5", None).as_deref(),
            Some("claude-sonnet-4-5")
        );
        assert_eq!(
            cli_model("Opus[1m]", Some("haiku")).as_deref(),
            Some("Opus[1m]")
        );
        assert_eq!(
            cli_model("gpt-4o", Some("sonnet")).as_deref(),
            Some("sonnet")
        );
        assert_eq!(cli_model("gpt-4o", None), None);
        assert_eq!(cli_model("sonnetish", None), None);
    }

    #[test]
    fn tenants_never_share_a_session() {
        let mut gw = Registry::new(Limits::default());
        let (_, history) = waiting_for_tools(&mut gw);
        let c = with_results(&history, vec![result("a", "A"), result("b", "B")]);
        let matched = gw.match_conversation("other-key", &c, 30).unwrap();
        assert!(
            matches!(
                matched,
                Match::Start {
                    kind: SessionKind::Rebuilt,
                    ..
                }
            ),
            "{matched:?}"
        );
    }

    #[test]
    fn a_held_call_past_its_deadline_is_answered_with_an_error() {
        let mut gw = Registry::new(Limits {
            held_call_timeout_ms: 1000,
            idle_ttl_ms: 60_000,
            ..Limits::default()
        });
        let (session, history) = waiting_for_tools(&mut gw);
        assert_eq!(
            gw.tool_call(session, "req-a", Some("a"), 100),
            CallAction::Hold
        );
        assert_eq!(
            gw.tool_call(session, "req-b", Some("b"), 100),
            CallAction::Hold
        );
        assert_eq!(gw.poll_timeout(), Some((1100, RegistryTimeout::HeldCall)));
        assert!(gw.handle_timeout(1099).is_empty());
        let actions = gw.handle_timeout(1100);
        assert_eq!(actions.len(), 2);
        assert!(actions.iter().all(|a| matches!(a,
            Action::Answer { result, .. } if result.is_error)));
        assert_eq!(gw.held_count(), 0);
        // The client's late results: the turn went on without them, so the history is rebuilt.
        let c = with_results(&history, vec![result("a", "A"), result("b", "B")]);
        let matched = gw.match_conversation("k", &c, 2000).unwrap();
        let Match::Start {
            kind,
            replaces,
            prompt,
            ..
        } = matched
        else {
            panic!("{matched:?}")
        };
        assert_eq!(kind, SessionKind::Rebuilt);
        assert_eq!(replaces, Some(session));
        let Block::Text { text } = &prompt[0] else {
            panic!()
        };
        assert!(text.contains("<tool_result tool_use_id=\"a\" is_error=\"false\">A</tool_result>"));
    }

    #[test]
    fn a_session_with_held_calls_is_not_closed_as_idle() {
        let mut gw = Registry::new(Limits {
            held_call_timeout_ms: 5000,
            idle_ttl_ms: 1000,
            ..Limits::default()
        });
        let (session, _) = waiting_for_tools(&mut gw);
        assert_eq!(
            gw.tool_call(session, "req-a", Some("a"), 100),
            CallAction::Hold
        );
        // Idle longer than the TTL, but a call waits for the client's result.
        assert_eq!(gw.poll_timeout(), Some((5100, RegistryTimeout::HeldCall)));
        assert!(gw.handle_timeout(3000).is_empty());
        // Once the held call has its answer (the timeout's error), the TTL applies.
        let actions = gw.handle_timeout(5100);
        assert!(
            matches!(&actions[0], Action::Answer { result, .. } if result.is_error),
            "{actions:?}"
        );
        assert_eq!(
            actions.last(),
            Some(&Action::Close {
                session,
                expired: true
            })
        );
    }

    #[test]
    fn idle_sessions_close_and_busy_ones_do_not() {
        let mut gw = Registry::new(Limits {
            held_call_timeout_ms: 1000,
            idle_ttl_ms: 5000,
            ..Limits::default()
        });
        let (session, history) = waiting_for_tools(&mut gw);
        assert_eq!(gw.poll_timeout(), Some((5010, RegistryTimeout::Idle)));
        let c = with_results(&history, vec![result("a", "A"), result("b", "B")]);
        gw.match_conversation("k", &c, 4000).unwrap();
        assert_eq!(
            gw.poll_timeout(),
            None,
            "a busy session has no idle deadline"
        );
        let err = gw.match_conversation("k", &c, 4001).unwrap_err();
        assert_eq!(err.status(), 429);
        gw.response_failed(session, 4500);
        assert_eq!(
            gw.handle_timeout(9500),
            vec![Action::Close {
                session,
                expired: true
            }]
        );
        assert_eq!(gw.session_count(), 0);
    }

    /// A live session keeps the tools it offers and its output schema: a request that changes
    /// the choice of tools or the schema is found in another scope (and is `rebuilt`).
    #[test]
    fn the_tool_choice_and_the_output_schema_are_part_of_the_scope() {
        let scope = |extra: Value| {
            let mut body = json!({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"name": "lookup", "input_schema": {"type": "object"}}]});
            for (k, v) in extra.as_object().unwrap() {
                body[k] = v.clone();
            }
            let request =
                crate::api::anthropic::parse_request(body.to_string().as_bytes()).unwrap();
            crate::gateway::translate::request_scope("k", &request)
        };
        let auto = scope(json!({}));
        assert_eq!(auto, scope(json!({"tool_choice": {"type": "auto"}})));
        let others = [
            scope(json!({"tool_choice": {"type": "none"}})),
            scope(json!({"tool_choice": {"type": "tool", "name": "lookup"}})),
            scope(json!({"output_format": {"type": "json_schema", "schema": {"type": "object"}}})),
            scope(
                json!({"output_format": {"type": "json_schema", "schema": {"type": "object", "title": "T"}}}),
            ),
        ];
        for (i, other) in others.iter().enumerate() {
            assert_ne!(&auto, other, "{i}");
            for later in &others[i + 1..] {
                assert_ne!(other, later);
            }
        }
    }

    #[test]
    fn a_tool_choice_must_name_a_tool_the_request_has() {
        let with = |choice: &str, tools: bool| {
            let tools = if tools {
                r#","tools":[{"name":"lookup","input_schema":{"type":"object"}}]"#
            } else {
                ""
            };
            let body = format!(
                r#"{{"model":"m","max_tokens":1,"messages":[{{"role":"user","content":"hi"}}],"tool_choice":{choice}{tools}}}"#
            );
            check_request(&crate::api::anthropic::parse_request(body.as_bytes()).unwrap())
        };
        for ok in [
            (r#"{"type":"auto"}"#, true),
            (r#"{"type":"none"}"#, false),
            (r#"{"type":"none"}"#, true),
            (r#"{"type":"any"}"#, true),
            (r#"{"type":"tool","name":"lookup"}"#, true),
        ] {
            assert!(with(ok.0, ok.1).is_ok(), "{ok:?}");
        }
        for (choice, tools, says) in [
            (r#"{"type":"any"}"#, false, "has no tools"),
            (
                r#"{"type":"tool","name":"other"}"#,
                true,
                "\"other\", which is not in tools",
            ),
        ] {
            let err = with(choice, tools).unwrap_err();
            assert_eq!(err.status(), 400);
            assert_eq!(err.param.as_deref(), Some("tool_choice"));
            assert!(err.message.contains(says), "{}", err.message);
        }
        let many: Vec<Value> = (0..=256)
            .map(|i| json!({"name": format!("t{i}"), "input_schema": {"type": "object"}}))
            .collect();
        let body = json!({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}],
            "tools": many, "tool_choice": {"type": "any"}});
        let err = check_request(
            &crate::api::anthropic::parse_request(body.to_string().as_bytes()).unwrap(),
        )
        .unwrap_err();
        assert!(err.message.contains("more than the 256"), "{}", err.message);
    }

    #[test]
    fn prompt_content_is_what_the_cli_takes() {
        let other = json!({"type": "document", "source": {"type": "text", "data": "d"}});
        let content = prompt_content(&[
            text("hi"),
            Block::Image {
                source: json!({"type": "url", "url": "u"}),
            },
            Block::Other {
                block: other.clone(),
            },
        ]);
        assert_eq!(
            content,
            vec![
                json!({"type": "text", "text": "hi"}),
                json!({"type": "image", "source": {"type": "url", "url": "u"}}),
                other,
            ]
        );
    }

    #[test]
    fn a_cancelled_call_drops_its_late_result() {
        let mut gw = Registry::new(Limits::default());
        let (session, history) = waiting_for_tools(&mut gw);
        assert_eq!(
            gw.tool_call(session, "req-a", Some("a"), 20),
            CallAction::Hold
        );
        assert_eq!(
            gw.tool_call(session, "req-b", Some("b"), 20),
            CallAction::Hold
        );
        gw.tool_cancelled(session, "a");
        let c = with_results(&history, vec![result("a", "A"), result("b", "B")]);
        let Match::Continue { answers, .. } = gw.match_conversation("k", &c, 30).unwrap() else {
            panic!()
        };
        assert_eq!(answers.len(), 1);
        assert_eq!(answers[0].0, "req-b");
    }

    fn responses_request(body: Value) -> ApiRequest {
        crate::api::responses::parse_request(body.to_string().as_bytes()).unwrap()
    }

    fn answer(t: &str) -> Message {
        Message {
            role: Role::Assistant,
            content: vec![text(t)],
        }
    }

    /// Matches a Responses request and ends its response with `reply`.
    fn respond(gw: &mut Registry, tenant: &str, body: Value, id: &str, reply: &str, now: u64) {
        let mut request = responses_request(body);
        let matched = gw.match_request(tenant, &mut request, id, now).unwrap();
        let session = match matched {
            Match::Continue { session, .. } | Match::Start { session, .. } => session,
            Match::Find { .. } => unreachable!("no lookups here"),
        };
        assert!(gw
            .response_done(session, (&answer(reply), Vec::new()), Vec::new(), now)
            .is_some());
    }

    #[test]
    fn stored_responses_chain_and_expire_after_their_last_use() {
        let mut gw = Registry::new(Limits {
            idle_ttl_ms: 1000,
            ..Limits::default()
        });
        respond(
            &mut gw,
            "t",
            json!({"model": "m", "input": "one"}),
            "resp_1",
            "1",
            0,
        );
        respond(
            &mut gw,
            "t",
            json!({"model": "m", "input": "two", "previous_response_id": "resp_1"}),
            "resp_2",
            "2",
            600,
        );
        assert_eq!(gw.stored_count(), 2);
        // A store:false response is not kept.
        respond(
            &mut gw,
            "t",
            json!({"model": "m", "input": "x", "store": false}),
            "resp_x",
            "x",
            600,
        );
        assert_eq!(gw.stored_count(), 2);
        // Continuing resp_2 at 1200 puts the whole chain in front, and keeps resp_1 (stored at
        // 0) alive with it.
        let mut request = responses_request(
            json!({"model": "m", "input": "three", "previous_response_id": "resp_2"}),
        );
        gw.resolve_previous("t", &mut request, 900).unwrap();
        let texts: Vec<String> = request
            .conversation
            .messages
            .iter()
            .map(|m| match &m.content[..] {
                [Block::Text { text }] => text.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(texts, ["one", "1", "two", "2", "three"]);
        assert_eq!(request.previous_response_id, None, "resolved");
        let sessions: Vec<SessionId> = gw.sessions().collect();
        for session in sessions {
            gw.close(session);
        }
        assert_eq!(
            gw.poll_timeout(),
            Some((1900, RegistryTimeout::StoredResponse)),
            "the chain was used at 900"
        );
        gw.handle_timeout(1500);
        assert_eq!(gw.stored_count(), 2, "used at 900: kept until 1900");
        // Another tenant does not see them.
        let mut other = responses_request(
            json!({"model": "m", "input": "x", "previous_response_id": "resp_2"}),
        );
        let err = gw.resolve_previous("u", &mut other, 1000).unwrap_err();
        assert_eq!(err.param.as_deref(), Some("previous_response_id"));
        assert_eq!(other.previous_response_id.as_deref(), Some("resp_2"));
        gw.handle_timeout(1900);
        assert_eq!(gw.stored_count(), 0);
        let err = gw
            .resolve_previous("t", &mut request_with_previous(), 2000)
            .unwrap_err();
        assert!(err.message.contains("resp_2"), "{}", err.message);
    }

    #[test]
    fn an_item_reference_is_the_text_of_the_stored_item_it_names() {
        let mut gw = Registry::new(Limits::default());
        // A response whose model said something, then called a client tool.
        let mut request = responses_request(json!({"model": "m", "input": "weather?"}));
        let Match::Start { session, .. } =
            gw.match_request("t", &mut request, "resp_9", 0).unwrap()
        else {
            panic!()
        };
        let said = Message {
            role: Role::Assistant,
            content: vec![text("Let me look."), tool_use("call_1")],
        };
        let items = vec![("msg_9_0".to_owned(), "Let me look.".to_owned())];
        gw.response_done(session, (&said, items), vec!["call_1".into()], 1);
        // The client's next step names the text by its item, then sends the call and its
        // result: the same history as the one the live session holds.
        let next = json!({"model": "m", "input": [
            {"role": "user", "content": "weather?"},
            {"type": "item_reference", "id": "msg_9_0"},
            {"type": "reasoning", "id": "rs_9_1", "summary": []},
            {"type": "item_reference", "id": "rs_9_1"},
            {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": "{\"q\":\"call_1\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        ]});
        let mut request = responses_request(next.clone());
        assert_eq!(
            request.references.len(),
            1,
            "the reasoning item is no history"
        );
        let matched = gw.match_request("t", &mut request, "resp_10", 2).unwrap();
        assert!(
            matches!(matched, Match::Continue { session: s, .. } if s == session),
            "{matched:?}"
        );
        assert_eq!(
            request.conversation.messages[1].content[0],
            text("Let me look.")
        );
        // Another tenant's, or an item no response has: a 400 naming it.
        for (tenant, id) in [("u", "msg_9_0"), ("t", "msg_9_7"), ("t", "msg_x")] {
            let mut body = next.clone();
            body["input"][1]["id"] = json!(id);
            let mut request = responses_request(body);
            let error = gw
                .match_request(tenant, &mut request, "resp_11", 3)
                .unwrap_err();
            assert_eq!(error.param.as_deref(), Some("input[1].id"), "{tenant} {id}");
            assert!(error.message.contains(id), "{}", error.message);
        }
        // A reference to what is not one of this gateway's message items.
        let body = json!({"model": "m", "input": [{"type": "item_reference", "id": "fc_1"}]});
        let error = crate::api::responses::parse_request(body.to_string().as_bytes()).unwrap_err();
        assert_eq!(error.param.as_deref(), Some("input[0].id"));
    }

    fn request_with_previous() -> ApiRequest {
        responses_request(json!({"model": "m", "input": "x", "previous_response_id": "resp_2"}))
    }

    #[test]
    fn stored_responses_beyond_the_cap_go_least_recently_used_first() {
        let mut gw = Registry::new(Limits {
            max_stored_responses: 2,
            ..Limits::default()
        });
        for (i, id) in ["resp_a", "resp_b"].into_iter().enumerate() {
            let body = json!({"model": "m", "input": id});
            respond(&mut gw, "t", body, id, "ok", i as u64);
        }
        // resp_a used again: resp_b is now the least recently used.
        let mut request = responses_request(
            json!({"model": "m", "input": "x", "previous_response_id": "resp_a"}),
        );
        gw.resolve_previous("t", &mut request, 5).unwrap();
        respond(
            &mut gw,
            "t",
            json!({"model": "m", "input": "c"}),
            "resp_c",
            "ok",
            6,
        );
        assert_eq!(gw.stored_count(), 2);
        for (id, kept) in [("resp_a", true), ("resp_b", false), ("resp_c", true)] {
            let mut request =
                responses_request(json!({"model": "m", "input": "x", "previous_response_id": id}));
            assert_eq!(
                gw.resolve_previous("t", &mut request, 7).is_ok(),
                kept,
                "{id}"
            );
        }
    }
}
