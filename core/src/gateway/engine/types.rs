//! The gateway's settings, outputs and timeout reasons.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{RequestId, StoreAsk};
use crate::gateway::registry::{Limits, RegistryTimeout, SessionId};
use crate::gateway::STRIPPED_ENV;
use crate::session::TimeoutReason;

/// Settings of an [`Gateway`](super::Gateway).
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Held-call and idle deadlines, stored responses.
    pub limits: Limits,
    /// The most live CLI sessions at once; a request that needs one more closes a warm CLI, else
    /// the CLI of the conversation least recently used that waits for nothing, else gets a 429.
    pub max_sessions: usize,
    /// The most live CLI sessions of one tenant (API key): a new conversation of a tenant at
    /// its cap closes that tenant's conversation least recently used that waits for nothing,
    /// else gets a 429; no tenant crowds the others out of `max_sessions`.
    pub max_sessions_per_key: usize,
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
    /// Seed of the ids of a session's own requests to its CLI (not shown to clients).
    pub seed: u64,
    /// Key of the ids clients see (`resp_…`, `appr_…`): each is a keyed SHA-256 of a counter,
    /// unpredictable without the key. A host fills it from the OS's CSPRNG; tests that want
    /// the same ids every run use [`id_key_from_seed`](Self::id_key_from_seed).
    pub id_key: [u8; 32],
    /// The wall clock at `now = 0`, in Unix milliseconds (OpenAI's `created`).
    pub unix_epoch_ms: u64,
    /// Report every change of the routing index as `Claim` / `Release` outputs (for a host
    /// that shares it with other gateways; see [`Gateway`](super::Gateway), "Scale-out"):
    /// conversations, stored responses and pending approvals
    /// ([`approval_route_key`](crate::gateway::approval_route_key)).
    pub publish_index: bool,
    /// This gateway's name among the gateways it scales out with: every series of
    /// `/metrics` has it as the label `node`, and each approval says it (`node`).
    pub node: Option<String>,
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
    /// ([`approvals`](super::Gateway::approvals), [`answer_approval`](super::Gateway::answer_approval),
    /// [`handle_approval_events`](super::Gateway::handle_approval_events)) instead of running
    /// outright.
    pub approvals: bool,
    /// How long an approval waits for its answer before the tool is denied (ms); also how
    /// long a Managed Agents session's tool call waits for its `user.tool_confirmation`.
    pub approval_timeout_ms: u64,
    /// Whether a Managed Agents session's CLI connects to the URL MCP servers of its agent
    /// (`mcp_servers` with an `mcp_toolset`). Off by default: the servers are any URL a
    /// caller names, reached from the gateway's machine.
    pub allow_mcp_servers: bool,
    /// Serve the console's view: `GET /v1/conversations` (the live conversations a key sees:
    /// its own, or with the admin key every one) and `GET /v1/conversations/{id}/events`
    /// (SSE: each chunk of the conversation's CLI as it comes, after those of its current
    /// turn). Off, those routes are 404s and nothing is kept for them.
    pub console: bool,
    /// Variables every CLI gets (after the gateway's own, so they win; but a tenant's
    /// directories, with [`tenant_root`](Self::tenant_root), win over these).
    pub cli_env: Vec<(String, String)>,
    /// Variables no CLI inherits, besides those the gateway always removes: whole names, as
    /// [`env_to_remove`](crate::gateway::env_to_remove) lists them from the host's
    /// environment.
    pub cli_env_remove: Vec<String>,
    /// The directory under which each tenant (API key) gets its own CLI home, working and
    /// temporary directories ([`TenantDirs`]); `None`: every CLI runs in the host's home and
    /// working directory, as a library user's own CLI would.
    pub tenant_root: Option<String>,
    /// One working directory for the CLIs of every tenant instead of each tenant's own (the
    /// homes stay apart).
    pub shared_cwd: Option<String>,
    /// Each key's quota, by its tenant id ([`tenant_id`]); `*`: the quota of every key
    /// without its own.
    pub quotas: BTreeMap<String, crate::gateway::quota::Quota>,
    /// The HTTP face: keys, browser policy, body limit, drain grace.
    pub http: super::HttpConfig,
    /// The settings files the CLIs load (`user`, `project`, `local`: the tenant's home, the
    /// working directory's `.claude/settings.json` and `settings.local.json`), with the hooks,
    /// skills, plugins, agents and CLAUDE.md files they bring. None by default.
    pub setting_sources: Vec<String>,
    /// Keep conversations in a session store: every CLI mirrors its session transcript
    /// ([`StoreAsk::Append`]), each response saves its conversation's record
    /// ([`StoreAsk::Save`]), and a history no live CLI continues is looked up there
    /// ([`StoreAsk::Find`]) and resumed exactly by a new CLI. Off: such a history is
    /// rebuilt as one prompt.
    pub store: bool,
    /// How long the end of a turn's response waits for the session store to keep its
    /// conversation's record ([`StoreAnswer::Kept`](super::StoreAnswer::Kept)) before the turn fails with a 503 (ms):
    /// a backstop for a host that never answers (`ccwire serve` answers within 20 s).
    pub keep_timeout_ms: u64,
    /// The most bytes the session store may keep of one tenant's conversation transcripts
    /// (as the store counts them, [`StoreAnswer::Usage`](super::StoreAnswer::Usage)): a turn of a tenant at or over it
    /// gets a 413 that names the limit, before any CLI work, until old conversations expire.
    /// `None` (or no [`store`](Self::store)): no limit.
    pub store_quota: Option<u64>,
}

/// A tenant's directories under [`GatewayConfig::tenant_root`]: `<root>/<id>/home` (its
/// CLI's `HOME` and `CLAUDE_CONFIG_DIR` parent: settings, sessions, credentials), `work` (the
/// working directory), `tmp` (`TMPDIR`) and `sessions/<session>` (a Managed Agents session's
/// working directory). `id` is `local` for the keyless tenant and a hash
/// of the key otherwise (the key itself is never a path).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantDirs {
    /// The tenant's id, its directory's name.
    pub id: String,
    /// Its CLI's home.
    pub home: String,
    /// Its CLI's working directory.
    pub work: String,
    /// Its CLI's temporary directory.
    pub tmp: String,
    /// The parent of its Managed Agents sessions' own working directories
    /// ([`session_dir`](Self::session_dir)): beside `work`, not in it, so that no tool of the
    /// tenant can rename or replace a session's directory (it sees only its own, bound in).
    #[serde(default)]
    pub sessions: String,
}

impl TenantDirs {
    /// The directories of `tenant` (an API key, or empty for the keyless one) under `root`.
    pub fn new(root: &str, tenant: &str) -> TenantDirs {
        let id = tenant_id(tenant);
        let base = format!("{}/{id}", root.trim_end_matches('/'));
        TenantDirs {
            home: format!("{base}/home"),
            work: format!("{base}/work"),
            tmp: format!("{base}/tmp"),
            sessions: format!("{base}/sessions"),
            id,
        }
    }

    /// The working directory of the tenant's Managed Agents session `id`.
    pub fn session_dir(&self, id: &str) -> String {
        format!("{}/{id}", self.sessions)
    }
}

/// A tenant's id: `local` for the keyless tenant, else `k` and 24 hex digits of a hash of its
/// key (stable across restarts, and reveals nothing of the key).
pub fn tenant_id(tenant: &str) -> String {
    use sha2::Digest;
    if tenant.is_empty() {
        return "local".to_owned();
    }
    let mut hash = sha2::Sha256::new();
    hash.update(b"ccwire tenant\0");
    hash.update(tenant.as_bytes());
    format!("k{}", crate::conversation::hex(&hash.finalize()[..12]))
}

/// Whether `id` is a tenant id as [`tenant_id`] makes them.
pub fn is_tenant_id(id: &str) -> bool {
    id == "local"
        || id.strip_prefix('k').is_some_and(|h| {
            h.len() == 24
                && h.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
}

impl GatewayConfig {
    /// An id key made from a number, for reproducible ids (tests, `ccwire serve --seed`):
    /// never for a gateway that others can reach.
    pub fn id_key_from_seed(seed: u64) -> [u8; 32] {
        use sha2::Digest;
        let mut hash = sha2::Sha256::new();
        hash.update(b"ccwire id key\0");
        hash.update(seed.to_le_bytes());
        hash.finalize().into()
    }

    /// The value a CLI sees for variable `name`, given the host's own variables (`inherited`).
    pub fn cli_var(
        &self,
        name: &str,
        inherited: impl Fn(&str) -> Option<String>,
    ) -> Option<String> {
        if let Some((_, value)) = self.cli_env.iter().rev().find(|(k, _)| k == name) {
            return Some(value.clone());
        }
        let removed = self.cli_env_remove.iter().map(String::as_str);
        if name == "CLAUDECODE"
            || STRIPPED_ENV.contains(&name)
            || removed.into_iter().any(|r| r == name)
        {
            return None;
        }
        inherited(name)
    }
}

/// A tenant's fair share of a gateway-wide cap of `total` shared by `keys` API keys: all of it
/// with one key (or none), else half of it (at least one), so that no tenant crowds the
/// others out (the default of [`GatewayConfig::max_sessions_per_key`] and
/// [`GatewayConfig::max_concurrent_per_key`] in `ccwire serve`).
pub fn fair_share(total: usize, keys: usize) -> usize {
    if keys <= 1 {
        total
    } else {
        total.div_ceil(2).max(1)
    }
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            limits: Limits::default(),
            max_sessions: 64,
            enabled_tools: Vec::new(),
            default_model: None,
            ping_every_ms: 15_000,
            settle_grace_ms: 10_000,
            start_timeout_ms: 60_000,
            seed: 0,
            id_key: GatewayConfig::id_key_from_seed(0),
            unix_epoch_ms: 0,
            publish_index: false,
            node: None,
            max_concurrent: 64,
            max_concurrent_per_key: usize::MAX,
            max_sessions_per_key: usize::MAX,
            max_queue: 256,
            queue_timeout_ms: 30_000,
            pool: 0,
            approvals: false,
            allow_mcp_servers: false,
            console: false,
            approval_timeout_ms: 5 * 60 * 1000,
            cli_env: Vec::new(),
            cli_env_remove: Vec::new(),
            tenant_root: None,
            shared_cwd: None,
            setting_sources: Vec::new(),
            quotas: BTreeMap::new(),
            http: super::HttpConfig::default(),
            store: false,
            keep_timeout_ms: 60_000,
            store_quota: None,
        }
    }
}

/// How to start a CLI for a session: data, so every host starts it the same way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CliSpec {
    /// The arguments after the executable, the stream-json flags included.
    pub args: Vec<String>,
    /// Variables the CLI must not inherit (besides those the host removes of its own).
    pub env_remove: Vec<String>,
    /// Variables to set.
    pub env: Vec<(String, String)>,
    /// The working directory; `None`: the host's.
    pub cwd: Option<String>,
    /// The tenant's directories, which the host creates (owner-only) before the start and a
    /// sandbox leaves writable; `None` without [`GatewayConfig::tenant_root`].
    pub tenant: Option<TenantDirs>,
    /// The URLs this CLI must reach besides the model API: a Managed Agents session's URL
    /// MCP servers, with [`GatewayConfig::allow_mcp_servers`]. A sandboxed CLI reaches no
    /// other host: the host's proxy lets these through.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<String>,
    /// A stored conversation this CLI resumes (its arguments say `--resume`): before the
    /// start, the host writes the conversation's stored transcript to this file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<ResumeSpec>,
}

/// The transcript a resuming CLI reads ([`CliSpec::resume`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeSpec {
    /// The stored conversation.
    pub key: ConversationKey,
    /// Where the CLI reads its transcript: the path its last CLI wrote it to.
    pub path: String,
    /// The system prompt the conversation goes on with (`None`: Claude Code's own).
    pub system_prompt: Option<String>,
    /// The history to write as the transcript, when no CLI wrote it (few-shot examples, an
    /// edited past); `None`: the stored one. The host makes it into lines
    /// ([`WrittenHistory::lines`](crate::gateway::WrittenHistory::lines), off the engine's lock: a history can be tens of megabytes),
    /// appends them to the session store (with one) and writes them to `path` before the CLI
    /// starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written: Option<std::sync::Arc<crate::gateway::WrittenHistory>>,
    /// The transcript ends with the client's tool results: the CLI goes on from them by
    /// itself (started with `CLAUDE_CODE_RESUME_INTERRUPTED_TURN=1`), and is sent no prompt.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rerun: bool,
}

impl ResumeSpec {
    /// The stored transcript's lines as the resuming CLI must read them: the CLI resumes
    /// with the system prompt its transcript recorded (`prompt_snapshot` entries), so those
    /// record the one the conversation goes on with (without one of the request's own, none:
    /// the CLI makes its own again). Other lines are left as they are.
    pub fn transcript(&self, lines: Vec<String>) -> Vec<String> {
        lines
            .into_iter()
            .map(|line| {
                if !line.contains("\"prompt_snapshot\"") {
                    return line;
                }
                let Ok(mut entry) = serde_json::from_str::<serde_json::Value>(&line) else {
                    return line;
                };
                let Some(snapshot) = entry
                    .get_mut("attachment")
                    .filter(|a| a["type"] == "prompt_snapshot")
                    .and_then(serde_json::Value::as_object_mut)
                else {
                    return line;
                };
                match &self.system_prompt {
                    Some(system) => {
                        snapshot.insert("systemPrompt".into(), serde_json::json!([system]));
                    }
                    None => {
                        snapshot.remove("systemPrompt");
                    }
                }
                entry.to_string()
            })
            .collect()
    }
}

/// A stored conversation's key: its tenant's id ([`tenant_id`]; never the API key) and its
/// id, which is also the id of its CLI's session (a UUID).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ConversationKey {
    /// The tenant's id.
    pub tenant: String,
    /// The conversation's id.
    pub id: String,
}

/// What the session store keeps of a conversation besides its transcript: what a gateway needs
/// to find it from a request's history and to resume it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationRecord {
    /// The conversation.
    pub key: ConversationKey,
    /// The hash of its history in the tenant's scope: a request whose history has this hash
    /// continues it. The store finds the record by it.
    pub hash: String,
    /// Client tool calls its last response returned, whose results the next request brings.
    #[serde(default)]
    pub pending: Vec<String>,
    /// Where its CLI wrote its transcript.
    pub transcript: String,
    /// Whether a CLI runs it, and if not, what closed the last one.
    pub state: RecordState,
    /// When it was saved (Unix ms).
    pub saved_ms: u64,
    /// The model its CLI ran, if it said (shown by the console).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// Whether a stored conversation has a live CLI ([`ConversationRecord::state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordState {
    /// A gateway runs its CLI (found like this by another gateway, or after a restart, it
    /// is resumed as `restarted`).
    Live,
    /// Its CLI was closed while idle, to make room or after `hibernate_after`.
    Hibernated,
    /// Its CLI was closed after the idle time-to-live.
    Expired,
    /// Its CLI ended by itself.
    Ended,
}

/// What the host must do; drain with [`Gateway::poll_output`](super::Gateway::poll_output). Serialized (as the npm package
/// hands it out) with a `type` tag and the bytes as text.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum GatewayOutput {
    /// Start a CLI process for `session`. Its stdout goes to
    /// [`handle_stdout`](super::Gateway::handle_stdout), its end to
    /// [`handle_exit`](super::Gateway::handle_exit); a failure to start to
    /// [`handle_spawn_failed`](super::Gateway::handle_spawn_failed).
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
    /// Close the session's stdin, then end the process after a grace period. The gateway has
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
    /// Requests whose [`route_key`](super::Gateway::route_key) is `key` belong to this gateway now
    /// (only with [`GatewayConfig::publish_index`]).
    Claim {
        /// The key.
        key: String,
    },
    /// Requests with this key no longer do.
    Release {
        /// The key.
        key: String,
    },
    /// `POST` `body` to `url` with `headers` for `request` (a `count_tokens` request the model
    /// API counts), and give the answer to
    /// [`handle_fetched`](super::Gateway::handle_fetched).
    Fetch {
        /// The request it answers.
        request: RequestId,
        /// Where.
        url: String,
        /// The headers.
        headers: Vec<(String, String)>,
        /// The body (JSON).
        #[serde(serialize_with = "as_text")]
        body: Vec<u8>,
    },
    /// An admin asked over HTTP that the gateway drain (`POST /admin/drain`): it drains; the
    /// host exits once it [`is_drained`](super::Gateway::is_drained).
    DrainRequested,
    /// Ask the session store (with [`GatewayConfig::store`]): keep something, or look
    /// something up and give the answer to [`handle_store`](super::Gateway::handle_store).
    /// Carried out in order: a lookup after the writes before it.
    Store(StoreAsk),
    /// Delete this directory and everything in it once the CLIs closed before this output
    /// (which worked in it) have exited: the working directory of a deleted Managed Agents
    /// session, under [`GatewayConfig::tenant_root`].
    RemoveDir {
        /// The directory.
        path: String,
    },
}

/// Which gateway a request must reach ([`Gateway::route_key`](super::Gateway::route_key)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteKey {
    /// It starts a conversation: any gateway.
    New,
    /// It continues the conversation with this key: the gateway that claimed it.
    Conversation(String),
}

impl GatewayOutput {
    /// The output as one line of JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("outputs always serialize")
    }
}

/// Bytes the gateway made (always UTF-8: JSON lines, SSE frames, JSON bodies) as text.
fn as_text<S: serde::Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&String::from_utf8_lossy(bytes))
}

/// Why [`Gateway::poll_timeout`](super::Gateway::poll_timeout) wants to be woken.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GatewayTimeout {
    /// A held client tool call has waited for the client's result as long as it may.
    HeldCall,
    /// A session has sat idle as long as it may.
    Idle,
    /// A stored response has gone unused as long as it may.
    StoredResponse,
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
    /// A Managed Agents session's turn is due again (its CLI was settling an interrupted
    /// turn).
    ManagedTurn,
    /// A response has waited as long as it may for the session store to keep its turn.
    Keep {
        /// The request.
        request: RequestId,
    },
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

impl std::fmt::Display for GatewayTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GatewayTimeout::HeldCall => write!(f, "a held tool call's deadline"),
            GatewayTimeout::Idle => write!(f, "an idle session's TTL"),
            GatewayTimeout::StoredResponse => write!(f, "a stored response's TTL"),
            GatewayTimeout::Ping { request } => {
                write!(f, "a keep-alive frame for request {request}")
            }
            GatewayTimeout::Settle { session } => {
                write!(f, "session {session}'s interrupted turn has not ended")
            }
            GatewayTimeout::Start { session } => {
                write!(f, "session {session}'s CLI has not answered initialize")
            }
            GatewayTimeout::Drain => write!(f, "the end of the drain's grace period"),
            GatewayTimeout::Approval => write!(f, "an approval's deadline"),
            GatewayTimeout::ManagedTurn => write!(f, "a session's turn is due again"),
            GatewayTimeout::Keep { request } => {
                write!(
                    f,
                    "request {request} has waited for the store to keep its turn too long"
                )
            }
            GatewayTimeout::Queued { request } => {
                write!(f, "request {request} has waited for a free turn too long")
            }
            GatewayTimeout::Session { session, reason } => {
                write!(f, "session {session} is {reason}")
            }
        }
    }
}

impl From<RegistryTimeout> for GatewayTimeout {
    fn from(why: RegistryTimeout) -> GatewayTimeout {
        match why {
            RegistryTimeout::HeldCall => GatewayTimeout::HeldCall,
            RegistryTimeout::Idle => GatewayTimeout::Idle,
            RegistryTimeout::StoredResponse => GatewayTimeout::StoredResponse,
        }
    }
}
