//! Conversations kept in a session store ([`GatewayConfig::store`](super::GatewayConfig::store)): every CLI's transcript
//! as it writes it, each conversation's record as its responses end, and the resume of a
//! history no live CLI continues by a new CLI that reads the stored transcript.

use super::prepared::{Offer, SessionTurn};
use super::seam::{StoreAnswer, StoreAsk};
use super::types::{ConversationKey, ConversationRecord, RecordState, ResumeSpec, TenantDirs};
use super::{tenant_id, Gateway, GatewayOutput, PreparedRequest, Queued, RequestId, CLIENT_SERVER};
use crate::api::{Api, ApiError, ApiErrorKind, ApiRequest};
use crate::conversation::{Block, Message, Role};
use crate::gateway::registry::{
    busy, Match, Parted, ResumeReason, SessionId, SessionKind, StoredOut,
};
use crate::gateway::translate::{cli_model, prompt_blocks, rebuild_prompt, tool_results};
use crate::gateway::written::WrittenHistory;
use crate::{Json, Timestamp};

/// A routed request, what its response needs before its session is known.
#[derive(Debug)]
pub(super) struct Opening {
    pub(super) api: Api,
    pub(super) tenant: String,
    pub(super) parsed: ApiRequest,
    pub(super) offer: Offer,
    pub(super) headers: Vec<(String, String)>,
    pub(super) response_id: Option<String>,
    pub(super) previous_response_id: Option<String>,
    /// A Managed Agents session's turn: its session and the agent's tools.
    pub(super) session: Option<SessionTurn>,
}

/// A request waiting for the session store ([`StoreAsk::Find`]).
#[derive(Debug)]
pub(super) struct Finding {
    pub(super) opening: Opening,
    /// Its history's hash in the tenant's scope.
    pub(super) hash: String,
    /// What a live conversation says of its history ([`Match::Find`]).
    pub(super) parted: Option<Parted>,
}

/// How long a tenant refused for its store quota waits before the store is asked again how
/// much its conversations take (ms).
pub(super) const USAGE_RECHECK_MS: u64 = 10_000;

impl Gateway {
    /// A new conversation's id: a UUID of keyed hash bits, never the same twice (the wall
    /// clock at the gateway's start is part of it, so a restarted gateway makes new ones).
    pub(super) fn conversation_id(&mut self) -> String {
        self.next_conversation += 1;
        let epoch = self.config.unix_epoch_ms.to_le_bytes();
        self.uuid(&[
            b"conversation",
            &epoch,
            &self.next_conversation.to_le_bytes(),
        ])
    }

    /// A UUID of the keyed hash of `parts`.
    fn uuid(&self, parts: &[&[u8]]) -> String {
        crate::conversation::keyed_uuid(&self.config.id_key, parts)
    }

    /// Parks a request whose history no live session continues until the session store has
    /// looked it up ([`store_found`](Self::store_found)).
    pub(super) fn find(
        &mut self,
        request: RequestId,
        opening: Opening,
        hash: String,
        parted: Option<Parted>,
    ) {
        self.outputs.push_back(GatewayOutput::Store(StoreAsk::Find {
            request,
            tenant: tenant_id(&opening.tenant),
            hash: hash.clone(),
        }));
        let finding = Finding {
            opening,
            hash,
            parted,
        };
        self.finding.insert(request, finding);
    }

    /// The session store's answer to one of its [`StoreAsk`]s, or its failure: the one input
    /// of the store seam (each answer's page says what follows).
    pub fn handle_store(&mut self, now: Timestamp, answer: StoreAnswer) {
        match answer {
            StoreAnswer::Found { request, record } => self.store_found(now, request, record),
            StoreAnswer::FoundResponse { request, response } => {
                self.store_found_response(now, request, response.as_deref());
            }
            StoreAnswer::Listed { request, records } => self.store_listed(now, request, records),
            StoreAnswer::ManagedLoaded { request, resources } => {
                self.store_managed_loaded(now, request, resources);
            }
            StoreAnswer::TranscriptLoaded { request, lines } => {
                self.store_transcript_loaded(now, request, lines);
            }
            StoreAnswer::LookupFailed { request } => self.store_lookup_failed(now, request),
            StoreAnswer::WriteFailed => self.store_write_failed(),
            StoreAnswer::Kept { request } => {
                self.key_kept(now, request, true);
                self.kept(now, request, true);
            }
            StoreAnswer::NotKept { request } => {
                self.key_kept(now, request, false);
                self.kept(now, request, false);
            }
            StoreAnswer::ResumeUnavailable { session } => {
                self.store_resume_unavailable(now, session);
            }
            StoreAnswer::Superseded { key } => self.store_superseded(now, &key),
            StoreAnswer::UsageRead {
                request,
                tenant,
                read,
            } => self.store_usage_read(now, request, tenant, read),
            StoreAnswer::Usage { tenant, bytes } => {
                self.metering.store_bytes.insert(tenant, (bytes, now));
            }
        }
    }

    /// The 413 a turn of `tenant` (its key) gets while the store keeps as much of its
    /// conversations as [`GatewayConfig::store_quota`] allows. A figure older than
    /// [`USAGE_RECHECK_MS`] is asked for again (old conversations may have expired since), and
    /// so is a key's first after the gateway starts (that turn goes ahead).
    pub(super) fn over_store_quota(&mut self, tenant: &str) -> Option<ApiError> {
        let quota = self.config.store_quota.filter(|_| self.config.store)?;
        let id = tenant_id(tenant);
        // A key this gateway has not heard of yet (since it started): the store is asked,
        // and answers before this turn's own writes.
        let Some((used, asked)) = self.metering.store_bytes.get_mut(&id) else {
            self.metering.store_bytes.insert(id.clone(), (0, self.now));
            (self.outputs).push_back(GatewayOutput::Store(StoreAsk::Usage { tenant: id }));
            return None;
        };
        if *used < quota {
            return None;
        }
        let used = *used;
        if self.now.saturating_sub(*asked) >= USAGE_RECHECK_MS {
            *asked = self.now;
            (self.outputs).push_back(GatewayOutput::Store(StoreAsk::Usage { tenant: id }));
        }
        Some(ApiError::new(
            ApiErrorKind::RequestTooLarge,
            format!(
                "this key's stored conversations take {used} bytes, at or over the gateway's \
                 limit of {quota} bytes per key: no new turn is taken until older \
                 conversations expire from the session store"
            ),
        ))
    }

    /// The session store's answer to a [`StoreAsk::Find`]: the record of the
    /// conversation whose history the request continues, or none. With a record, a new CLI
    /// resumes the stored transcript and the request's new messages go to it (`resumed`);
    /// without one, the history is written as a transcript a new CLI resumes (`resumed`,
    /// `history`), or where it cannot be, retold in one prompt (`rebuilt`). A request whose
    /// client went away meanwhile is dropped.
    pub(super) fn store_found(
        &mut self,
        now: Timestamp,
        request: RequestId,
        record: Option<ConversationRecord>,
    ) {
        self.now = now;
        let Some(Finding {
            mut opening,
            hash,
            parted,
        }) = self.finding.remove(&request)
        else {
            return;
        };
        let Some(session) = self.registry.found(&hash, now) else {
            return;
        };
        let tenant = tenant_id(&opening.tenant);
        // A record is the conversation of this history only if the store kept it under both
        // (the store's index may lag behind), and it can resume only where the CLI's turn
        // ended: a call still waiting for the client's result is in no transcript. (A request
        // with tool results is not looked up: they go in the history written for a new CLI.)
        let record = record.filter(|r| r.hash == hash && r.key.tenant == tenant);
        let messages = &opening.parsed.conversation.messages;
        let n = opening.parsed.conversation.history_len();
        let mut reason = parted.map(|p| p.reason);
        let mut replaces = parted.and_then(|p| p.replaces);
        let (kind, prompt, resume) = match record {
            Some(record) if !record.pending.is_empty() => {
                // What ended the conversation's last CLI, unless a live one says more.
                reason.get_or_insert(record_reason(record.state));
                let prompt = match opening.offer.start_prompt {
                    Some(_) => Vec::new(),
                    None => rebuild_prompt(messages),
                };
                (SessionKind::Rebuilt, prompt, None)
            }
            Some(record) => {
                let mut reason = record_reason(record.state);
                // Its CLI is live under other settings: closed, when it waits for nothing.
                let live = self
                    .lives
                    .iter()
                    .find(|(id, l)| l.cli_id == record.key.id && !self.pool.contains_key(id))
                    .map(|(id, _)| *id);
                if let Some(old) = live {
                    if !self.is_waiting_for_nothing(old) {
                        self.registry.close(session);
                        let error = busy();
                        return self.respond_error(request, opening.api, &opening.headers, &error);
                    }
                    reason = ResumeReason::Settings;
                    self.close(now, old);
                }
                opening.offer.start_prompt = None;
                // Where this gateway's CLI reads it (another gateway sharing the store may
                // have kept it from elsewhere).
                let path = self
                    .transcript_path(&opening.tenant, session_of(&opening), &record.key.id)
                    .unwrap_or(record.transcript);
                let resume = ResumeSpec {
                    key: record.key,
                    path,
                    system_prompt: opening.parsed.conversation.system.clone(),
                    written: None,
                    rerun: false,
                };
                replaces = None;
                (
                    SessionKind::Resumed(reason),
                    prompt_blocks(&messages[n..]),
                    Some(resume),
                )
            }
            _ => {
                let prompt = match opening.offer.start_prompt {
                    Some(_) => Vec::new(),
                    None => rebuild_prompt(messages),
                };
                (SessionKind::Rebuilt, prompt, None)
            }
        };
        // A live conversation this one parted from, waiting for results it will not get from
        // this client, is closed (when it still waits).
        let replaces =
            replaces.filter(|old| self.lives.contains_key(old) && !self.registry.is_idle(*old));
        let route = Match::Start {
            session,
            kind,
            prompt,
            replaces,
            reason,
        };
        self.open(now, request, opening, route, resume);
    }

    /// Whether a live session's CLI waits for nothing (no turn, call or approval): it may be
    /// closed.
    pub(super) fn is_waiting_for_nothing(&self, session: SessionId) -> bool {
        self.lives.get(&session).is_some_and(|live| {
            live.request.is_none()
                && live.starting.is_none()
                && live.settle_by.is_none()
                && self.registry.is_idle(session)
                && !self.approvals.values().any(|a| a.session == session)
        })
    }

    /// Parks a request until the session store has read the stored response `id` it
    /// continues ([`store_found_response`](Self::store_found_response)).
    pub(super) fn fetch_response(
        &mut self,
        request: RequestId,
        api: Api,
        tenant: &str,
        prepared: PreparedRequest,
        id: String,
    ) {
        self.outputs
            .push_back(GatewayOutput::Store(StoreAsk::FindResponse {
                request,
                tenant: tenant_id(tenant),
                id,
            }));
        let queued = Queued {
            request,
            api,
            tenant: tenant.to_owned(),
            parsed: prepared,
            deadline: 0,
        };
        self.fetching.insert(request, queued);
    }

    /// The session store's answer to a [`StoreAsk::FindResponse`]: the stored
    /// response (as [`StoreAsk::Response`] kept it), or none. Found, it is held again
    /// and the next link of its chain (or the next response whose items the request
    /// references) is read the same way; the request is served once all are held, or, with
    /// one the store does not have either, answered with the 400 that names it.
    pub(super) fn store_found_response(
        &mut self,
        now: Timestamp,
        request: RequestId,
        response: Option<&str>,
    ) {
        self.now = now;
        let Some(queued) = self.fetching.remove(&request) else {
            return;
        };
        let Queued {
            api,
            tenant,
            parsed,
            ..
        } = queued;
        let missing = self.missing_response(&tenant, &parsed);
        let stored = response.and_then(|r| serde_json::from_str::<StoredOut>(r).ok());
        if let (Some(id), Some(stored)) = (missing, stored) {
            self.registry.restore_response(&tenant, &id, stored, now);
            // Held again, the chain goes on to its next link (or the next response it
            // references); one the store gave but that cannot be held ends here.
            if self.missing_response(&tenant, &parsed) != Some(id) {
                return self.serve(now, request, (api, &tenant), parsed, false);
            }
        }
        self.serve(now, request, (api, &tenant), parsed, true);
    }

    /// The first stored response a request needs that this gateway does not hold (it expired
    /// here, or was stored before a restart or by another gateway): a link of the chain its
    /// `previous_response_id` starts, else a response whose output items it references.
    pub(super) fn missing_response(
        &self,
        tenant: &str,
        prepared: &PreparedRequest,
    ) -> Option<String> {
        let request = &prepared.request;
        (request.previous_response_id.as_deref())
            .and_then(|id| self.registry.missing_link(tenant, id))
            .or_else(|| self.registry.missing_referenced(tenant, request))
    }

    /// The session store could not answer a [`StoreAsk::Find`] or
    /// [`StoreAsk::FindResponse`] (`detail` says why; it stays in the gateway's
    /// log): the request gets a 503 that asks to retry shortly, instead of a conversation
    /// started without the history the store keeps.
    pub(super) fn store_lookup_failed(&mut self, now: Timestamp, request: RequestId) {
        self.now = now;
        let api = if let Some(finding) = self.finding.remove(&request) {
            self.registry.abandon(&finding.hash);
            finding.opening.api
        } else if let Some(queued) = self.fetching.remove(&request) {
            queued.api
        } else {
            return;
        };
        *self.metrics.store_failures.entry("find").or_default() += 1;
        let error = ApiError::new(
            ApiErrorKind::Unavailable,
            "the session store that keeps this conversation is unavailable; retry shortly",
        )
        .retry_after(2);
        self.respond_error(request, api, &[], &error);
    }

    /// A write to the session store failed (the host keeps what it could not write and tries
    /// again with the conversation's next write): counted in `/metrics`.
    pub(super) fn store_write_failed(&mut self) {
        *self.metrics.store_failures.entry("write").or_default() += 1;
    }

    /// The session store refused a write of conversation `key` because another gateway has
    /// resumed it since (a shared store's fencing): the CLI this gateway drives it with is
    /// stale, so it is closed without saving anything more (a response it was making fails),
    /// and its next request is served from the store like any conversation with no live CLI.
    /// Counted in `/metrics` as a CLI exit `superseded`.
    pub(super) fn store_superseded(&mut self, now: Timestamp, key: &ConversationKey) {
        self.now = now;
        let stale: Vec<SessionId> = self
            .lives
            .iter()
            .filter(|(_, live)| live.cli_id == key.id && tenant_id(&live.tenant) == key.tenant)
            .map(|(session, _)| *session)
            .collect();
        for session in stale {
            *self.metrics.exits.entry("superseded").or_default() += 1;
            self.close(now, session);
        }
    }

    /// Closes the CLIs of up to `count` conversations that wait for nothing, least recently used
    /// first (a host over its memory budget); each is resumed on its next request. Returns how
    /// many were closed.
    pub fn hibernate_idle(&mut self, now: Timestamp, count: usize) -> usize {
        self.now = now;
        let mut closed = 0;
        while closed < count {
            let Some(idle) = self.idle_to_evict(None) else {
                break;
            };
            *self.metrics.exits.entry("hibernated").or_default() += 1;
            self.record_closed(idle, RecordState::Hibernated);
            self.close(now, idle);
            closed += 1;
        }
        closed
    }

    /// A request waiting for the session store lost its client.
    pub(super) fn forget_finding(&mut self, request: RequestId) -> Option<String> {
        let finding = self.finding.remove(&request)?;
        self.registry.abandon(&finding.hash);
        Some(finding.opening.tenant)
    }

    /// Lines a session's CLI added to a transcript: those of its own transcript go to the
    /// store (a warm CLI's wait for the conversation that takes it); a subagent's are not
    /// kept.
    pub(super) fn on_mirror(&mut self, session: SessionId, file_path: &str, entries: Vec<Json>) {
        if !self.config.store {
            return;
        }
        let warm = self.pool.contains_key(&session);
        let Some(live) = self.lives.get_mut(&session) else {
            return;
        };
        let own = file_path
            .strip_suffix(".jsonl")
            .and_then(|p| p.strip_suffix(live.cli_id.as_str()))
            .is_some_and(|dir| dir.ends_with('/'));
        if !own {
            return;
        }
        if live.transcript.is_none() {
            live.transcript = Some(file_path.to_owned());
        }
        if live.first_turn.is_some() {
            self.watch_first_turn(session, &entries);
        }
        let Some(live) = self.lives.get_mut(&session) else {
            return;
        };
        if warm {
            live.mirrored.extend(entries);
            return;
        }
        let key = ConversationKey {
            tenant: tenant_id(&live.tenant),
            id: live.cli_id.clone(),
        };
        self.outputs
            .push_back(GatewayOutput::Store(StoreAsk::Append { key, entries }));
    }

    /// Sends what a warm CLI mirrored before a conversation took it.
    pub(super) fn flush_mirrored(&mut self, session: SessionId) {
        let Some(live) = self.lives.get_mut(&session) else {
            return;
        };
        if live.mirrored.is_empty() || self.pool.contains_key(&session) {
            return;
        }
        let entries = std::mem::take(&mut live.mirrored);
        let key = ConversationKey {
            tenant: tenant_id(&live.tenant),
            id: live.cli_id.clone(),
        };
        self.outputs
            .push_back(GatewayOutput::Store(StoreAsk::Append { key, entries }));
    }

    /// A session's response ended: its conversation's record says which history continues
    /// it (`hash`, in the tenant's scope) and which client tool calls wait for results.
    /// Whether the store is asked to keep it for the response of `request` (a client's: a
    /// Managed Agents session's turn keeps its session's own record).
    pub(super) fn save_record(
        &mut self,
        session: SessionId,
        hash: String,
        pending: Vec<String>,
        request: RequestId,
    ) -> bool {
        if !self.config.store {
            return false;
        }
        let wall = self.config.unix_epoch_ms.saturating_add(self.now);
        let Some(live) = self.lives.get(&session) else {
            return false;
        };
        let Some(transcript) = live
            .transcript
            .clone()
            .or_else(|| self.transcript_path(&live.tenant, None, &live.cli_id))
        else {
            return false;
        };
        let record = ConversationRecord {
            key: ConversationKey {
                tenant: tenant_id(&live.tenant),
                id: live.cli_id.clone(),
            },
            hash,
            pending,
            transcript,
            state: RecordState::Live,
            saved_ms: wall,
            model: live.watched.model.clone(),
        };
        if let Some(live) = self.lives.get_mut(&session) {
            live.record = Some(record.clone());
        }
        let client = !self.agent_sessions.is_turn(request);
        self.outputs.push_back(GatewayOutput::Store(StoreAsk::Save {
            record,
            request: client.then_some(request),
        }));
        client
    }

    /// A session's CLI is being closed or has ended: its record says why, so the request that
    /// resumes it can.
    pub(super) fn record_closed(&mut self, session: SessionId, state: RecordState) {
        let wall = self.config.unix_epoch_ms.saturating_add(self.now);
        let Some(live) = self.lives.get_mut(&session) else {
            return;
        };
        let Some(mut record) = live.record.take() else {
            return;
        };
        record.state = state;
        record.saved_ms = wall;
        self.outputs.push_back(GatewayOutput::Store(StoreAsk::Save {
            record,
            request: None,
        }));
    }

    /// The working directory and home of `tenant`'s CLIs (with tenant directories): a
    /// Managed Agents session's own directory for its CLI.
    pub(super) fn cli_dirs(&self, tenant: &str, session: Option<&str>) -> Option<(String, String)> {
        let root = self.config.tenant_root.as_deref()?;
        let dirs = TenantDirs::new(root, tenant);
        let cwd = match session {
            Some(id) => dirs.session_dir(id),
            None => self.config.shared_cwd.clone().unwrap_or(dirs.work),
        };
        Some((cwd, dirs.home))
    }

    /// A history no CLI wrote, written as the transcript a new CLI resumes: the spec of that
    /// CLI's start and the request's new messages, its first prompt. (The host makes the
    /// transcript's lines, off the engine's lock, and keeps them in the session store too:
    /// [`ResumeSpec::written`].) New messages with tool results are written too, and the CLI
    /// goes on from them by itself ([`ResumeSpec::rerun`]; no first prompt). `Err` says why it
    /// cannot be: the transcript's place cannot be told (no tenant directories, or a working
    /// directory whose name the CLI shortens).
    pub(super) fn write_history(
        &mut self,
        tenant: &str,
        session: Option<&str>,
        request: &ApiRequest,
    ) -> Result<(ResumeSpec, Vec<Block>), &'static str> {
        let messages = &request.conversation.messages;
        let n = request.conversation.history_len();
        let new = &messages[n..];
        // With the client's tool results the whole history is written, and the CLI goes on
        // from it by itself (`rerun`): the model gets the calls and their results as blocks.
        let rerun = !tool_results(new).is_empty();
        let (cwd, _) = self.cli_dirs(tenant, session).ok_or("no_tenant_dirs")?;
        let id = self.conversation_id();
        let path = self
            .transcript_path(tenant, session, &id)
            .ok_or("working_directory")?;
        // The context its CLIs record after the first message, when learned (a Managed
        // Agents session's CLI has settings of its own).
        let model = cli_model(&request.model, self.config.default_model.as_deref());
        let context = match session {
            None if n > 0 => self.context_for(tenant, model, &cwd),
            _ => Vec::new(),
        };
        let written_messages = if rerun {
            let mut written = messages[..n].to_vec();
            written.extend(new.iter().flat_map(results_first));
            written
        } else {
            messages[..n].to_vec()
        };
        // Its lines are made by the host, off the engine's lock.
        let written = WrittenHistory {
            uuids: (0..=written_messages.len() + context.len())
                .map(|i| self.uuid(&[b"entry", id.as_bytes(), &(i as u64).to_le_bytes()]))
                .collect(),
            messages: written_messages,
            thinking: request.conversation.thinking.clone(),
            session_id: id.clone(),
            cwd,
            model: request.model.clone(),
            wall_ms: self.config.unix_epoch_ms.saturating_add(self.now),
            server: CLIENT_SERVER.to_owned(),
            system_prompt: request.conversation.system.clone(),
            context,
        };
        let spec = ResumeSpec {
            key: ConversationKey {
                tenant: tenant_id(tenant),
                id,
            },
            path,
            system_prompt: request.conversation.system.clone(),
            written: Some(std::sync::Arc::new(written)),
            rerun,
        };
        let prompt = if rerun {
            Vec::new()
        } else {
            prompt_blocks(new)
        };
        Ok((spec, prompt))
    }

    /// Where the CLI of `tenant`'s conversation `id` writes its transcript, as the CLI names
    /// it: `<config dir>/projects/<working directory, each character not a letter or digit
    /// made a dash>/<id>.jsonl`; `None` where it cannot be told (no tenant directories, or a
    /// working directory whose name the CLI shortens).
    fn transcript_path(&self, tenant: &str, session: Option<&str>, id: &str) -> Option<String> {
        let (cwd, home) = self.cli_dirs(tenant, session)?;
        if !cwd.is_ascii() {
            return None;
        }
        let name: String = cwd
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        (name.len() <= 200).then(|| format!("{home}/.claude/projects/{name}/{id}.jsonl"))
    }
}

/// A message of a history written for a CLI to go on from: a user message with tool results
/// and more is written as two, the results first (the CLI goes on from results with its own
/// words, and from a prompt with none).
fn results_first(message: &Message) -> Vec<Message> {
    let is_result = |b: &&Block| matches!(b, Block::ToolResult { .. });
    let results: Vec<Block> = message.content.iter().filter(is_result).cloned().collect();
    if message.role != Role::User || results.is_empty() || results.len() == message.content.len() {
        return vec![message.clone()];
    }
    let rest = message.content.iter().filter(|b| !is_result(b)).cloned();
    vec![
        Message {
            role: Role::User,
            content: results,
        },
        Message {
            role: Role::User,
            content: rest.collect(),
        },
    ]
}

/// Why a stored conversation is resumed: what ended its last CLI.
fn record_reason(state: RecordState) -> ResumeReason {
    match state {
        RecordState::Live => ResumeReason::Restarted,
        RecordState::Hibernated => ResumeReason::Hibernated,
        RecordState::Expired => ResumeReason::Expired,
        RecordState::Ended => ResumeReason::Ended,
    }
}

/// The Managed Agents session whose turn `opening` is, if it is one.
fn session_of(opening: &Opening) -> Option<&str> {
    opening.session.as_ref().map(|s| s.id.as_str())
}
