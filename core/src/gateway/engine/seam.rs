//! The store seam: what the gateway asks of the session store ([`StoreAsk`]) and what the
//! store answers ([`StoreAnswer`]).

use serde::Serialize;

use super::{ConversationKey, ConversationRecord, RequestId};
use crate::gateway::registry::SessionId;
use crate::gateway::usage::{Tally, UsageRow, Window};

/// What the gateway asks of the session store ([`GatewayOutput::Store`](super::GatewayOutput::Store)). The writes
/// (`Append`, `Save`, `Response`, `Managed`, `Pool`) have no answer but their failure
/// ([`StoreAnswer::WriteFailed`]); each lookup names the [`StoreAnswer`] that answers it (or
/// [`StoreAnswer::LookupFailed`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "ask", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StoreAsk {
    /// Append lines to a conversation's stored transcript.
    Append {
        /// The conversation.
        key: ConversationKey,
        /// The transcript's new lines, in order.
        entries: Vec<crate::Json>,
    },
    /// Save a conversation's record, replacing the one saved before, and let the store find it
    /// by [`ConversationRecord::hash`]. Carried out after the appends before it.
    Save {
        /// The record.
        record: ConversationRecord,
        /// The request whose response ended with this record: the end of that response waits
        /// for [`StoreAnswer::Kept`] or [`StoreAnswer::NotKept`].
        request: Option<RequestId>,
    },
    /// Find the stored conversation of `tenant` (its id) whose history hashes to `hash`, and
    /// answer with [`StoreAnswer::Found`] (its record, or none). Carried out after the
    /// appends and saves before it.
    Find {
        /// The request waiting for it.
        request: RequestId,
        /// The tenant's id.
        tenant: String,
        /// The history's hash.
        hash: String,
    },
    /// Keep a response stored for `previous_response_id` (Responses API), so it outlives the
    /// gateway; kept as long as conversations.
    Response {
        /// The tenant's id.
        tenant: String,
        /// The response's id (`resp_…`).
        id: String,
        /// What to keep (opaque JSON).
        response: String,
    },
    /// Read the stored response `id` of `tenant` (its id) and answer with
    /// [`StoreAnswer::FoundResponse`] (it, or none): a request continues a response this
    /// gateway does not hold.
    FindResponse {
        /// The request waiting for it.
        request: RequestId,
        /// The tenant's id.
        tenant: String,
        /// The response's id, as the client gave it.
        id: String,
    },
    /// Keep a Managed Agents resource of `tenant`: `json` replaces what was kept under `kind`
    /// and `id`; `None` deletes it. Opaque JSON. With a `request`, answer with
    /// [`StoreAnswer::Kept`] or [`StoreAnswer::NotKept`]: its response ends once every change
    /// it made is kept (or with a 503 when one cannot be).
    Managed {
        /// The request that changed it (none: a session's turn did).
        request: Option<RequestId>,
        /// The tenant's id.
        tenant: String,
        /// `agent` or `environment`.
        kind: String,
        /// The resource's id.
        id: String,
        /// What to keep; `None`: forget it.
        json: Option<String>,
    },
    /// Read every Managed Agents resource `tenant` (its id) has, as
    /// [`Managed`](Self::Managed) kept them, and answer with [`StoreAnswer::ManagedLoaded`]:
    /// the first request of a tenant this gateway has not read.
    LoadManaged {
        /// The request waiting for them.
        request: RequestId,
        /// The tenant's id.
        tenant: String,
    },
    /// List the stored conversations of `tenant` (its id; `None`: every tenant's), those saved
    /// most recently first, at most `limit`, and answer with [`StoreAnswer::Listed`] (with
    /// [`GatewayConfig::console`](super::GatewayConfig::console)): the console lists the conversations no CLI runs.
    List {
        /// The request waiting for them.
        request: RequestId,
        /// The tenant's id, or `None` for the admin.
        tenant: Option<String>,
        /// The most records wanted.
        limit: usize,
    },
    /// Read the stored transcript of conversation `key` and answer with
    /// [`StoreAnswer::TranscriptLoaded`] (with [`GatewayConfig::console`](super::GatewayConfig::console)): the console shows
    /// a conversation no CLI runs.
    Load {
        /// The request waiting for it.
        request: RequestId,
        /// The conversation.
        key: ConversationKey,
    },
    /// Say how many bytes `tenant`'s transcripts take now, with [`StoreAnswer::Usage`]: a
    /// tenant refused for [`GatewayConfig::store_quota`](super::GatewayConfig::store_quota) may have had old conversations
    /// expire since the store last said.
    Usage {
        /// The tenant's id.
        tenant: String,
    },
    /// Add what a key used (a CLI turn's figures for one model) to its row of the day: a
    /// store shared by several gateways sums what each adds.
    AddUsage {
        /// The key's tenant id.
        tenant: String,
        /// The day (UTC, `YYYY-MM-DD`).
        day: String,
        /// The model.
        model: String,
        /// What to add.
        tally: Tally,
    },
    /// Keep a subscription rate-limit window as a CLI reported it, unless the store keeps an
    /// observation of it (same credential and kind) made later.
    KeepWindow {
        /// The window.
        window: Window,
    },
    /// Read the usage rows of the days from `from` to `to` (UTC, `YYYY-MM-DD`, both
    /// included) of `tenant` (its id; `None`: every key's), and the windows kept, and answer
    /// with [`StoreAnswer::UsageRead`] (`GET /v1/usage`).
    ReadUsage {
        /// The request waiting for them; none when the gateway reads a key's usage to check
        /// its quota.
        request: Option<RequestId>,
        /// The key's tenant id, or `None` for the admin.
        tenant: Option<String>,
        /// The first day.
        from: String,
        /// The last day.
        to: String,
    },
    /// Keep a tenant key made over `/v1/keys`, or the label and quota set there for a key
    /// given at start (opaque JSON, with the key's SHA-256 digest, never the key), replacing
    /// what was kept under `id`; `None` forgets it. With a `request`, answer with
    /// [`StoreAnswer::Kept`] or [`StoreAnswer::NotKept`]: its response ends once it is kept.
    /// Every key kept is read back by the host (at start and now and then) for
    /// [`Gateway::handle_keys_loaded`](super::Gateway::handle_keys_loaded).
    KeepKey {
        /// The request that changed it.
        request: Option<RequestId>,
        /// The key's id.
        id: String,
        /// What to keep; `None`: forget it.
        json: Option<String>,
    },
    /// Keep the warm pool's settings (with a pool): a restarted
    /// gateway gives them to [`restore_pool`](super::Gateway::restore_pool). Opaque JSON, no
    /// secrets (the CLI's variables are left out).
    Pool {
        /// The settings.
        settings: String,
    },
}

/// What the session store answered, or that it failed: the one input of the store seam,
/// [`Gateway::handle_store`](super::Gateway::handle_store).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StoreAnswer {
    /// [`StoreAsk::Find`]: the conversation's record, or none.
    Found {
        /// The request waiting for it.
        request: RequestId,
        /// What the store found.
        record: Option<ConversationRecord>,
    },
    /// [`StoreAsk::FindResponse`]: the stored response (as [`StoreAsk::Response`] kept it),
    /// or none.
    FoundResponse {
        /// The request waiting for it.
        request: RequestId,
        /// What the store found.
        response: Option<String>,
    },
    /// [`StoreAsk::List`]: the records, saved last first; `None` when the store failed (the
    /// live conversations are listed alone, with `stored_error` saying why).
    Listed {
        /// The request waiting for them.
        request: RequestId,
        /// What the store listed.
        records: Option<Vec<ConversationRecord>>,
    },
    /// [`StoreAsk::LoadManaged`]: the tenant's resources (`kind`, `json`), or `None` when
    /// the store failed (the request gets a 503 that asks to retry shortly).
    ManagedLoaded {
        /// The request waiting for them.
        request: RequestId,
        /// What the store kept.
        resources: Option<Vec<(String, String)>>,
    },
    /// [`StoreAsk::Load`]: the conversation's transcript, `None` when the store keeps none,
    /// or `Err` when it failed (a 503).
    TranscriptLoaded {
        /// The request waiting for it.
        request: RequestId,
        /// What the store read.
        lines: Result<Option<Vec<String>>, ()>,
    },
    /// A [`StoreAsk::Find`] or [`StoreAsk::FindResponse`] the store could not answer (the
    /// host logs why): the request gets a 503 that asks to retry shortly, instead of a
    /// conversation started without its history.
    LookupFailed {
        /// The request waiting for it.
        request: RequestId,
    },
    /// A write failed (the host keeps what it could not write and tries again with the
    /// conversation's next write): counted in `/metrics`.
    WriteFailed,
    /// The record of a [`StoreAsk::Save`] naming `request` is kept, with every line of its
    /// transcript before it: the response ends as its turn made it. (Or a
    /// [`StoreAsk::Managed`] change naming it: its response ends once all are.)
    Kept {
        /// The request whose response waits for it.
        request: RequestId,
    },
    /// The record of a [`StoreAsk::Save`] naming `request` could not be kept (the store
    /// failed, or another gateway has taken the conversation over): the response ends with a
    /// 503 that asks to retry, so its client is not told the turn succeeded, and the
    /// conversation's CLI is closed without saving it. The host writes nothing more of what
    /// it was asked to keep of that conversation since its last kept record: the store keeps
    /// the conversation as it was before the turn, which the retry goes on from.
    NotKept {
        /// The request whose response waits for it.
        request: RequestId,
    },
    /// The store could not give the transcript a new CLI was to resume (it failed or did not
    /// answer in time): the CLI is not started, and its request gets a 503 that asks to retry
    /// shortly.
    ResumeUnavailable {
        /// The CLI that was to resume it.
        session: SessionId,
    },
    /// The store refused a write of conversation `key` because another gateway resumed it
    /// since (a shared store's fencing): the CLI this gateway drives it with is stale, so it
    /// is closed without saving anything more, and its next request is served from the store
    /// like any conversation with no live CLI.
    Superseded {
        /// The conversation.
        key: ConversationKey,
    },
    /// [`StoreAsk::ReadUsage`]: the rows and the windows, or `None` when the store failed
    /// (the request gets a 503 that asks to retry shortly).
    UsageRead {
        /// The request waiting for them, as the ask named it.
        request: Option<RequestId>,
        /// The key whose rows were read, as the ask named it.
        tenant: Option<String>,
        /// The rows and windows read.
        read: Option<(Vec<UsageRow>, Vec<Window>)>,
    },
    /// How many bytes the store keeps of a tenant's conversation transcripts, after a write
    /// of them or when asked ([`StoreAsk::Usage`]): what [`GatewayConfig::store_quota`](super::GatewayConfig::store_quota) is
    /// checked against.
    Usage {
        /// The tenant's id ([`ConversationKey::tenant`]).
        tenant: String,
        /// The bytes its transcripts take.
        bytes: u64,
    },
}
