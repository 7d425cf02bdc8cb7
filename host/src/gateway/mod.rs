//! `ccwire serve`: the Claude Code CLI behind the Anthropic Messages, OpenAI Chat Completions
//! and OpenAI Responses APIs (docs/GATEWAY.md). Every decision — which session a request
//! continues, held client tool calls, deadlines, the CLI's command line, response framing — is
//! made by the sans-IO [`Gateway`] of `ccwire_core::gateway`; this module moves its bytes: HTTP
//! requests and responses, CLI processes and their pipes, and a timer.
//!
//! All of the gateway's inputs go through `App::input`, which holds one lock while it calls
//! the gateway and carries out what it asks for, so outputs happen in the order they were
//! made.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use axum::Router;
use ccwire_core::api::{ApiError, ApiErrorKind};
use ccwire_core::gateway::{
    approval_route, env_to_remove, managed_route, prepare, Admission, BodyError, CliSpec,
    ConfigError, ConversationKey, ConversationRecord, Gateway, GatewayConfig, GatewayOutput,
    HttpConfig, HttpHead, Prepared, RequestId, ResumeSpec, RouteKey, SessionId, StoreAnswer,
    StoreAsk,
};
use futures::StreamExt;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::ChildStdout;
use tokio::sync::{mpsc, Notify};

use crate::claude::{cli_version, find_cli};
use crate::cluster::{Claimed, Cluster, Owner};
use crate::egress::{Allowed, Egress};
use crate::process::CliProcess;
use crate::sandbox::{Sandbox, SandboxMode, SandboxSetup};
use crate::store::{is_superseded, materialize, SessionStore};
use crate::tree::{Marks, MARKER_ENV};

mod conn;

pub use conn::ConnOptions;

pub use ccwire_core::gateway::CODE_TOOLS;

/// How the gateway runs.
#[derive(Debug, Clone, Default)]
pub struct GatewayOptions {
    /// The `claude` executable (found with [`find_cli`] when `None`).
    pub claude: Option<PathBuf>,
    /// The engine's settings: deadlines, caps, enabled tools, the default model, the HTTP face
    /// (API keys, the admin key, allowed origins and hosts, the body limit, the drain grace;
    /// the listener is set at start, as are the clock and, unless [`seed`](Self::seed) is
    /// given, the seed).
    pub engine: GatewayConfig,
    /// The seed of the ids the gateway makes up (`resp_…`); `None`: the OS's randomness.
    pub seed: Option<u64>,
    /// The connections: timeouts for a request's head and body and for idle connections, and
    /// the caps on open connections.
    pub conn: ConnOptions,
    /// One working directory for every tenant's CLI (shared by all of them); `None`: each
    /// tenant works in its own directory under the state directory.
    pub cwd: Option<PathBuf>,
    /// Whether the CLIs run in the OS sandbox ([`crate::sandbox`]); it needs
    /// [`state_dir`](Self::state_dir).
    pub sandbox: SandboxMode,
    /// Where each tenant (API key, or the keyless loopback caller) gets its own CLI home,
    /// working and temporary directories (`<state_dir>/tenants/<id>/…`); `None`: the CLIs
    /// run in the gateway's own home, as a library user's CLI would (no isolation).
    pub state_dir: Option<PathBuf>,
    /// The `ccwire` executable whose `sandbox-relay` command starts each sandbox (the relay
    /// to the proxy, [`crate::egress`]); `None`: this process's own executable.
    pub sandbox_relay: Option<PathBuf>,
    /// Hosts a sandboxed CLI and its tools reach besides the model API (`HOST[:PORT]`, port
    /// 443 when none is given), through the gateway's proxy ([`crate::egress`]).
    pub allow_egress: Vec<String>,
    /// Further CLI environment (tests point the CLI at a fake model with it).
    pub env: Vec<(String, String)>,
    /// Variables removed from the environment the CLI and its tools inherit (a name, or a
    /// prefix ending in `*`), besides every `CCWIRE_*` variable and those that would let the
    /// CLI time out or background a held call.
    pub env_remove: Vec<String>,
    /// Variables of the gateway's environment the CLI and its tools inherit besides those of
    /// [`PASSED_ENV`](ccwire_core::gateway::PASSED_ENV) (a name, or a prefix ending in `*`);
    /// every other one is removed.
    pub pass_env: Vec<String>,
    /// Where conversations are kept so they outlive their CLIs ([`crate::store`]): a
    /// conversation with no live CLI — hibernated, expired, after a restart — is resumed from
    /// it exactly. `None`: such a conversation is rebuilt from the history its request
    /// carries.
    pub store: Option<Arc<dyn SessionStore>>,
    /// The memory the CLIs may take together (bytes, their proportional set size): over it,
    /// the CLIs of conversations that wait for nothing are closed, least recently used first,
    /// and resumed on their next request. `None`: no budget.
    pub memory_budget: Option<u64>,
    /// This gateway as a node of the gateways that share its Redis session store
    /// ([`crate::cluster`]): a request whose conversation another live node runs is
    /// forwarded there. `None`: every request is served here.
    pub cluster: Option<Cluster>,
}

/// Why the gateway cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The HTTP settings do not suit the listener (no key on a public address, an origin or
    /// host that cannot be allowed).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The sandbox was asked for and cannot work here.
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    /// The socket could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The server failed.
    #[error("the server failed: {0}")]
    Io(#[from] std::io::Error),
}

/// How long a closed session's CLI may take to exit once its stdin is closed, before it is
/// signalled (SIGTERM, then SIGKILL).
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// Bodies up to this size are parsed on the connection's own task; larger ones on a blocking
/// thread.
const PARSE_INLINE: usize = 256 * 1024;

/// A live CLI, as the host holds it.
struct Cli {
    /// Lines for its stdin; dropped when the gateway closes the session, it closes stdin and
    /// the CLI has [`CLOSE_GRACE`] to exit.
    stdin: mpsc::UnboundedSender<Vec<u8>>,
    pid: u32,
}

/// A piece of a response, as the gateway's outputs give it; the channel closes at its end.
enum Part {
    Head(u16, Vec<(String, String)>),
    Body(Bytes),
}

/// The gateway and what its outputs act on, under one lock.
struct Core {
    gateway: Gateway,
    clis: HashMap<SessionId, Cli>,
    responders: HashMap<RequestId, mpsc::UnboundedSender<Part>>,
    /// Responses that end once the session store has kept their conversation's record.
    saving: HashMap<RequestId, tokio::sync::oneshot::Receiver<()>>,
    /// Route keys were claimed since the last response ended: the next one ends once the
    /// cluster registry has them, so the client's next request finds its conversation.
    claimed: bool,
    /// The working directory of each CLI process, until it has exited.
    working: HashMap<SessionId, String>,
}

struct App {
    options: GatewayOptions,
    /// Sends the gateway's outbound requests (token counts).
    http: reqwest::Client,
    /// Forwards requests to the node of the cluster that runs their conversation (no
    /// overall timeout: a response streams as long as it takes).
    forwarder: reqwest::Client,
    /// Renews this node's lease in the cluster, until the gateway stops.
    heartbeat: Mutex<Option<tokio::task::JoinHandle<()>>>,
    claude: Result<PathBuf, String>,
    /// The sandbox every CLI runs in, when on.
    sandbox: Option<Sandbox>,
    /// The proxy the sandboxed CLIs reach the model through, with the sandbox.
    egress: Option<Egress>,
    /// The names of the gateway's variables the CLIs inherit.
    passed_env: Vec<String>,
    /// Why the CLIs run without it, when `auto` found it cannot work.
    no_sandbox: Option<String>,
    /// Whether the CLIs get a credential for the model API from their environment.
    credential: bool,
    /// What each CLI is marked with, for the sweep of what it leaves running.
    marks: Marks,
    core: Mutex<Core>,
    /// The tasks that own CLI processes, to wait for at shutdown.
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    next_request: AtomicU64,
    start: Instant,
    /// Wakes the timer task when a deadline may have moved.
    wake: Notify,
    /// `POST /admin/drain` was called.
    drain_asked: Notify,
    /// The session store's work, in the order the gateway asked for it; `None` without a
    /// store, or once shut down.
    store: Mutex<Option<mpsc::UnboundedSender<StoreOp>>>,
    /// The task that does it.
    store_task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// What the session store is asked to do.
enum StoreOp {
    /// What the engine asks ([`GatewayOutput::Store`]); `done`, when given, hears once a
    /// write is kept (or failed): a response that waits for it ends then.
    Ask(StoreAsk, Option<tokio::sync::oneshot::Sender<()>>),
    /// Write a stored transcript where a resuming CLI reads it.
    Resume {
        spec: ResumeSpec,
        home: Option<PathBuf>,
        done: tokio::sync::oneshot::Sender<Result<(), NotResumed>>,
    },
    /// Claim a route key in the cluster registry.
    Claim(String),
    /// Release one.
    Release(String),
    /// Hear when everything asked before is done.
    Barrier(tokio::sync::oneshot::Sender<()>),
}

/// Why a stored conversation's transcript could not be written for a CLI to resume it.
#[derive(Debug)]
struct NotResumed {
    detail: String,
    /// The session store failed or did not answer in time (the client is asked to retry),
    /// rather than the transcript being missing or not writable.
    unavailable: bool,
}

impl NotResumed {
    fn unavailable(detail: impl Into<String>) -> NotResumed {
        NotResumed {
            detail: detail.into(),
            unavailable: true,
        }
    }

    fn failed(detail: impl Into<String>) -> NotResumed {
        NotResumed {
            detail: detail.into(),
            unavailable: false,
        }
    }
}

/// Every two seconds, the memory the CLIs take (their process trees' proportional set size);
/// over `budget`, the gateway hibernates as many idle CLIs as the excess is worth. Ends with
/// the gateway.
async fn memory_watch(app: std::sync::Weak<App>, budget: u64) {
    let mut tick = tokio::time::interval(Duration::from_secs(2));
    loop {
        tick.tick().await;
        let Some(app) = app.upgrade() else {
            return;
        };
        let pids: Vec<u32> = app.core().clis.values().map(|c| c.pid).collect();
        let pids: Vec<u32> = pids.into_iter().filter(|p| *p != 0).collect();
        if pids.is_empty() {
            continue;
        }
        let used = tokio::task::spawn_blocking({
            let pids = pids.clone();
            move || pids.iter().map(|p| tree_pss(*p)).sum::<u64>()
        })
        .await
        .unwrap_or(0);
        if used <= budget {
            continue;
        }
        let each = (used / pids.len() as u64).max(1);
        let over = (used - budget).div_ceil(each) as usize;
        let closed = app.input(|gateway, now| gateway.hibernate_idle(now, over));
        if closed > 0 {
            tracing::info!(
                used_mib = used >> 20,
                budget_mib = budget >> 20,
                closed,
                "over the memory budget: idle CLIs hibernated"
            );
        }
    }
}

/// The proportional set size of a process and its descendants, in bytes (0 where unreadable).
fn tree_pss(pid: u32) -> u64 {
    let own = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("Pss:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024);
    let children: u64 = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|children| {
            children
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .map(tree_pss)
        .sum();
    own + children
}

/// How long one call of the session store may take; past it the call counts as failed (a
/// lookup answers its request with a 503, a write waits in the backlog to be written again),
/// so a stuck store holds no request forever.
const STORE_TIMEOUT: Duration = Duration::from_secs(30);

/// A session store call, bounded by [`STORE_TIMEOUT`].
async fn bounded<T>(
    call: impl std::future::Future<Output = std::io::Result<T>>,
) -> std::io::Result<T> {
    tokio::time::timeout(STORE_TIMEOUT, call)
        .await
        .unwrap_or_else(|_| {
            Err(std::io::Error::other(
                "the session store did not answer in time",
            ))
        })
}

/// A write the session store has not taken yet.
enum Unwritten {
    Lines(Vec<String>),
    Record(ConversationRecord),
}

/// Each conversation's writes the session store has not taken yet, in order.
#[derive(Default)]
struct Backlog(HashMap<ConversationKey, std::collections::VecDeque<Unwritten>>);

impl Backlog {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Queues a write; a record replaces a record queued before it (the newer one says all).
    fn push(&mut self, key: &ConversationKey, write: Unwritten) {
        let queue = self.0.entry(key.clone()).or_default();
        if let (Unwritten::Record(_), Some(Unwritten::Record(_))) = (&write, queue.back()) {
            queue.pop_back();
        }
        queue.push_back(write);
    }

    /// Writes a conversation's queue in order; at the first failure, the rest is kept (or,
    /// when another gateway has taken the conversation over, dropped).
    async fn flush(&mut self, store: &dyn SessionStore, key: &ConversationKey) -> Flushed {
        let Some(queue) = self.0.get_mut(key) else {
            return Flushed::Written;
        };
        while let Some(write) = queue.front() {
            let written = match write {
                Unwritten::Lines(lines) => bounded(store.append(key, lines.clone())).await,
                Unwritten::Record(record) => bounded(store.save(record)).await,
            };
            match written {
                Ok(()) => {}
                Err(error) if is_superseded(&error) => {
                    tracing::warn!(%error, "a conversation moved to another gateway");
                    self.0.remove(key);
                    return Flushed::Superseded;
                }
                Err(error) => {
                    tracing::warn!(%error, conversation = %key.id, "cannot keep a conversation yet; trying again");
                    return Flushed::Failed;
                }
            }
            queue.pop_front();
        }
        self.0.remove(key);
        Flushed::Written
    }

    /// Writes every queue; whether all were written (or dropped), and the conversations
    /// found taken over by another gateway.
    async fn flush_all(&mut self, store: &dyn SessionStore) -> (bool, Vec<ConversationKey>) {
        let keys: Vec<ConversationKey> = self.0.keys().cloned().collect();
        let mut moved = Vec::new();
        for key in keys {
            match self.flush(store, &key).await {
                Flushed::Written => {}
                Flushed::Superseded => moved.push(key),
                Flushed::Failed => return (false, moved),
            }
        }
        (true, moved)
    }
}

/// What [`Backlog::flush`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flushed {
    /// Everything queued is kept.
    Written,
    /// Something failed; it and what follows wait for the next try.
    Failed,
    /// Another gateway has resumed the conversation: what was queued is dropped.
    Superseded,
}

/// Carries out the session store's work in order; a lookup's answer goes to the gateway. Ends
/// when the gateway shuts down. Forgets old conversations at its start and hourly.
///
/// What the store could not take (transcript lines, a record) is kept, in order, and written
/// again every two seconds and before anything else of its conversation: a record is saved
/// only once every line before it is kept, so a store that comes back after a failure has
/// lost nothing the gateway acknowledged (while the gateway lives).
async fn store_worker(
    app: std::sync::Weak<App>,
    store: Arc<dyn SessionStore>,
    cluster: Option<Cluster>,
    mut ops: mpsc::UnboundedReceiver<StoreOp>,
) {
    let mut sweep = tokio::time::interval(Duration::from_secs(3600));
    let mut retry = tokio::time::interval(Duration::from_secs(2));
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut backlog = Backlog::default();
    // Claims (true) and releases the cluster registry could not take yet, in order.
    let mut routes = std::collections::VecDeque::<(bool, String)>::new();
    let write_failed = |app: &std::sync::Weak<App>| {
        if let Some(app) = app.upgrade() {
            app.input(|gateway, now| gateway.handle_store(now, StoreAnswer::WriteFailed));
        }
    };
    // A conversation another gateway has resumed: its CLI here is stale.
    let superseded = |app: &std::sync::Weak<App>, key: &ConversationKey| {
        if let Some(app) = app.upgrade() {
            app.input(|gateway, now| {
                gateway.handle_store(now, StoreAnswer::Superseded { key: key.clone() })
            });
        }
    };
    let flushed =
        |app: &std::sync::Weak<App>, key: &ConversationKey, flushed: Flushed| match flushed {
            Flushed::Written => {}
            Flushed::Failed => write_failed(app),
            Flushed::Superseded => superseded(app, key),
        };
    loop {
        let op = tokio::select! {
            op = ops.recv() => match op {
                Some(op) => op,
                None => {
                    // What is still unwritten gets one more try before the gateway ends.
                    backlog.flush_all(store.as_ref()).await;
                    return;
                }
            },
            _ = sweep.tick() => {
                match store.sweep().await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(conversations = n, "the session store forgot old conversations"),
                    Err(error) => tracing::warn!(%error, "cannot sweep the session store"),
                }
                continue;
            }
            _ = retry.tick(), if !backlog.is_empty() || !routes.is_empty() => {
                if !routes.is_empty() && flush_routes(cluster.as_ref(), &mut routes).await {
                    tracing::info!("the cluster registry has the claims it could not take before");
                }
                let waiting = !backlog.is_empty();
                let (all, moved) = backlog.flush_all(store.as_ref()).await;
                if waiting && all {
                    tracing::info!("the session store has kept what it could not take before");
                }
                for key in &moved {
                    superseded(&app, key);
                }
                continue;
            }
        };
        match op {
            StoreOp::Ask(StoreAsk::Append { key, entries }, _) => {
                let lines = entries.iter().map(|e| e.get().to_owned()).collect();
                backlog.push(&key, Unwritten::Lines(lines));
                flushed(&app, &key, backlog.flush(store.as_ref(), &key).await);
            }
            StoreOp::Ask(StoreAsk::Save { record, .. }, done) => {
                let key = record.key.clone();
                backlog.push(&key, Unwritten::Record(record));
                flushed(&app, &key, backlog.flush(store.as_ref(), &key).await);
                if let Some(done) = done {
                    let _ = done.send(());
                }
            }
            StoreOp::Ask(
                StoreAsk::Response {
                    tenant,
                    id,
                    response,
                },
                _,
            ) => {
                if let Err(error) = bounded(store.save_response(&tenant, &id, response)).await {
                    tracing::warn!(%error, response = %id, "cannot keep a stored response");
                    write_failed(&app);
                }
            }
            StoreOp::Ask(
                StoreAsk::FindResponse {
                    request,
                    tenant,
                    id,
                },
                _,
            ) => {
                // An id that is no store key (a client's invention) is no stored response.
                let found = match bounded(store.load_response(&tenant, &id)).await {
                    Err(error) if error.kind() == std::io::ErrorKind::InvalidInput => Ok(None),
                    found => found,
                };
                let Some(app) = app.upgrade() else {
                    return;
                };
                match found {
                    Ok(found) => app.input(|gateway, now| {
                        gateway.handle_store(
                            now,
                            StoreAnswer::FoundResponse {
                                request,
                                response: found,
                            },
                        );
                    }),
                    Err(error) => {
                        tracing::warn!(%error, "cannot read a stored response from the session store");
                        app.input(|gateway, now| {
                            gateway.handle_store(now, StoreAnswer::LookupFailed { request })
                        });
                    }
                }
            }
            StoreOp::Ask(StoreAsk::Pool { settings }, _) => {
                if let Err(error) = bounded(store.save_pool(settings)).await {
                    tracing::warn!(%error, "cannot keep the warm pool's settings");
                }
            }
            StoreOp::Ask(
                StoreAsk::Find {
                    request,
                    tenant,
                    hash,
                },
                _,
            ) => {
                let found = bounded(store.find(&tenant, &hash)).await;
                let Some(app) = app.upgrade() else {
                    return;
                };
                match found {
                    Ok(found) => app.input(|gateway, now| {
                        gateway.handle_store(
                            now,
                            StoreAnswer::Found {
                                request,
                                record: found,
                            },
                        )
                    }),
                    Err(error) => {
                        tracing::warn!(%error, "cannot look a conversation up in the session store");
                        app.input(|gateway, now| {
                            gateway.handle_store(now, StoreAnswer::LookupFailed { request })
                        });
                    }
                }
            }
            StoreOp::Resume { spec, home, done } => {
                // (What this gateway could not write of a conversation taken over since is
                // dropped: the store's transcript is the one to resume.)
                let loaded = if backlog.flush(store.as_ref(), &spec.key).await != Flushed::Failed {
                    bounded(store.load(&spec.key)).await
                } else {
                    Err(std::io::Error::other(
                        "what the gateway keeps of it cannot be written to the session store",
                    ))
                };
                let written = match loaded {
                    Ok(Some(lines)) => tokio::task::spawn_blocking(move || {
                        let lines = spec.transcript(lines);
                        let path = PathBuf::from(&spec.path);
                        materialize(&lines, &path, &spec.key.id, home.as_deref())
                    })
                    .await
                    .map_err(|e| NotResumed::failed(e.to_string()))
                    .and_then(|r| r.map_err(|e| NotResumed::failed(e.to_string()))),
                    Ok(None) => Err(NotResumed::failed(
                        "its transcript is not in the session store",
                    )),
                    Err(error) => Err(NotResumed::unavailable(error.to_string())),
                };
                let _ = done.send(written);
            }
            StoreOp::Ask(
                StoreAsk::Managed {
                    tenant,
                    kind,
                    id,
                    json,
                    ..
                },
                done,
            ) => {
                // Answered only once kept or failed: the client learns which.
                if let Err(error) = bounded(store.save_managed(&tenant, &kind, &id, json)).await {
                    tracing::warn!(%error, resource = %id, "cannot keep a Managed Agents resource");
                    write_failed(&app);
                }
                if let Some(done) = done {
                    let _ = done.send(());
                }
            }
            StoreOp::Ask(
                StoreAsk::List {
                    request,
                    tenant,
                    limit,
                },
                _,
            ) => {
                // Reads for the console, after the writes before them, but not holding up
                // the writes after them.
                let (store, app) = (store.clone(), app.clone());
                tokio::spawn(async move {
                    let listed = bounded(store.list(tenant.as_deref(), limit)).await;
                    let Some(app) = app.upgrade() else {
                        return;
                    };
                    let listed = listed
                        .map_err(|error| {
                            tracing::warn!(%error, "cannot list the conversations of the session store");
                        })
                        .ok();
                    app.input(|gateway, now| {
                        gateway.handle_store(
                            now,
                            StoreAnswer::Listed {
                                request,
                                records: listed,
                            },
                        )
                    });
                });
            }
            StoreOp::Ask(StoreAsk::Load { request, key }, _) => {
                let (store, app) = (store.clone(), app.clone());
                tokio::spawn(async move {
                    let read = bounded(store.peek(&key)).await;
                    let Some(app) = app.upgrade() else {
                        return;
                    };
                    let read = read.map_err(|error| {
                        tracing::warn!(%error, "cannot read a transcript of the session store");
                    });
                    app.input(|gateway, now| {
                        gateway.handle_store(
                            now,
                            StoreAnswer::TranscriptLoaded {
                                request,
                                lines: read,
                            },
                        )
                    });
                });
            }
            StoreOp::Ask(StoreAsk::LoadManaged { request, tenant }, _) => {
                let loaded = bounded(store.load_managed(&tenant)).await;
                let Some(app) = app.upgrade() else {
                    return;
                };
                let loaded = loaded
                    .map_err(|error| {
                        tracing::warn!(%error, "cannot read Managed Agents resources from the session store");
                    })
                    .ok();
                app.input(|gateway, now| {
                    gateway.handle_store(
                        now,
                        StoreAnswer::ManagedLoaded {
                            request,
                            resources: loaded,
                        },
                    )
                });
            }
            StoreOp::Ask(ask, _) => {
                tracing::warn!(
                    ?ask,
                    "a session store request this gateway does not carry out"
                );
            }
            StoreOp::Claim(key) => {
                routes.push_back((true, key));
                flush_routes(cluster.as_ref(), &mut routes).await;
            }
            StoreOp::Release(key) => {
                routes.push_back((false, key));
                flush_routes(cluster.as_ref(), &mut routes).await;
            }
            StoreOp::Barrier(done) => {
                let _ = done.send(());
            }
        }
    }
}

/// Writes the claims and releases not written yet, in order; whether all were (at the first
/// failure, it and the rest wait for the next try).
async fn flush_routes(
    cluster: Option<&Cluster>,
    routes: &mut std::collections::VecDeque<(bool, String)>,
) -> bool {
    let Some(cluster) = cluster else {
        routes.clear();
        return true;
    };
    while let Some((claim, key)) = routes.front() {
        let written = match claim {
            true => cluster.claim(key).await,
            false => cluster.release(key).await,
        };
        if let Err(error) = written {
            tracing::warn!(%error, waiting = routes.len(), "cannot write to the cluster registry yet; other gateways resume this one's new conversations from the store meanwhile");
            return false;
        }
        routes.pop_front();
    }
    true
}

/// Renews this node's lease every [`RENEW`](crate::cluster::RENEW) until aborted; says so
/// when it cannot, and when it can again. Once the lease had lapsed, the CLIs that wait for
/// nothing are closed: other nodes may have resumed their conversations meanwhile (those
/// that did not are resumed here, exactly, on their next request).
async fn heartbeat(app: std::sync::Weak<App>, cluster: Cluster) {
    let mut tick = tokio::time::interval(crate::cluster::RENEW);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tick.tick().await;
        match cluster.renew().await {
            Ok(lapsed) => {
                if std::mem::take(&mut failing) {
                    tracing::info!(
                        node = cluster.node(),
                        "this gateway's lease in the cluster is renewed again"
                    );
                }
                if lapsed {
                    let Some(app) = app.upgrade() else {
                        return;
                    };
                    let closed = app.input(|gateway, now| gateway.hibernate_idle(now, usize::MAX));
                    tracing::warn!(node = cluster.node(), closed, "this gateway's lease in the cluster had lapsed; its idle CLIs are closed, as other gateways may have taken their conversations over");
                }
            }
            Err(error) if !failing => {
                failing = true;
                tracing::warn!(%error, node = cluster.node(), "cannot renew this gateway's lease in the cluster; once it lapses, other gateways resume its conversations");
            }
            Err(_) => {}
        }
    }
}

impl App {
    fn core(&self) -> std::sync::MutexGuard<'_, Core> {
        self.core.lock().expect("core lock")
    }

    /// Where the tenants' directories are (the engine's
    /// [`tenant_root`](GatewayConfig::tenant_root)), with a state directory.
    fn tenant_root(&self) -> Option<PathBuf> {
        let dir = self.options.state_dir.as_ref()?;
        Some(tenant_root(dir))
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// Gives the gateway an input, then carries out every output it makes, in order.
    fn input<T>(self: &Arc<Self>, f: impl FnOnce(&mut Gateway, u64) -> T) -> T {
        self.input_core(|core, now| f(&mut core.gateway, now))
    }

    /// [`input`](Self::input) with what the outputs act on at hand.
    fn input_core<T>(self: &Arc<Self>, f: impl FnOnce(&mut Core, u64) -> T) -> T {
        let mut core = self.core();
        let now = self.now();
        let value = f(&mut core, now);
        while let Some(output) = core.gateway.poll_output() {
            self.carry_out(&mut core, output);
        }
        // Ended sessions are freed once the lock is released (a session's client tools can
        // be hundreds of thousands).
        let ended = core.gateway.take_ended();
        drop(core);
        drop(ended);
        self.wake.notify_one();
        value
    }

    fn carry_out(self: &Arc<Self>, core: &mut Core, output: GatewayOutput) {
        match output {
            GatewayOutput::Spawn { session, spec } if spec.resume.is_some() => {
                self.spawn_resumed(core, session, spec);
            }
            GatewayOutput::Spawn { session, spec } => {
                if let Err(failure) = self.spawn(core, session, &spec, None) {
                    let error = &failure.detail;
                    tracing::warn!(session, %error, "cannot start a Claude Code session");
                    let now = self.now();
                    // The client learns why without the gateway's paths; the log has them.
                    core.gateway
                        .handle_spawn_failed(now, session, &failure.reason);
                }
            }
            GatewayOutput::Write { session, bytes } => {
                if let Some(cli) = core.clis.get(&session) {
                    trace_lines(">", &mut Vec::new(), &bytes);
                    let _ = cli.stdin.send(bytes);
                }
            }
            GatewayOutput::RemoveDir { path } => {
                tokio::spawn(remove_when_unused(self.clone(), path));
            }
            GatewayOutput::Close { session } => {
                if let Some(cli) = core.clis.remove(&session) {
                    tracing::info!(session, pid = cli.pid, "closing a Claude Code session");
                }
            }
            GatewayOutput::Respond {
                request,
                status,
                headers,
            } => {
                let header = |name: &str| {
                    headers
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, v)| v.as_str())
                };
                if let Some(session) = header("x-ccwire-session") {
                    let reason = header("x-ccwire-session-reason").unwrap_or("");
                    tracing::info!(
                        request,
                        status,
                        session,
                        reason,
                        "a request reached its conversation"
                    );
                }
                if let Some(responder) = core.responders.get(&request) {
                    let _ = responder.send(Part::Head(status, headers));
                }
            }
            GatewayOutput::Body { request, bytes } => {
                if let Some(responder) = core.responders.get(&request) {
                    let _ = responder.send(Part::Body(bytes.into()));
                }
            }
            GatewayOutput::End { request } => {
                let responder = core.responders.remove(&request);
                let mut kept = core.saving.remove(&request);
                if std::mem::take(&mut core.claimed) {
                    // Ends once the claims made before it are in the registry (after the
                    // record it may wait for: the store's work is done in order).
                    let (done, registered) = tokio::sync::oneshot::channel();
                    self.to_store(StoreOp::Barrier(done));
                    kept = Some(registered);
                }
                if let (Some(responder), Some(kept)) = (responder, kept) {
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(Duration::from_secs(10), kept).await;
                        drop(responder);
                    });
                }
            }
            GatewayOutput::Fetch {
                request,
                url,
                headers,
                body,
            } => {
                let app = self.clone();
                tokio::spawn(async move {
                    let answer = send(&app.http, &url, &headers, body).await;
                    app.input(|gateway, now| {
                        gateway.handle_fetched(now, request, answer.as_deref());
                    });
                });
            }
            GatewayOutput::DrainRequested => self.drain_asked.notify_one(),
            GatewayOutput::Claim { key } if self.options.cluster.is_some() => {
                core.claimed = true;
                self.to_store(StoreOp::Claim(key));
            }
            GatewayOutput::Release { key } if self.options.cluster.is_some() => {
                self.to_store(StoreOp::Release(key));
            }
            GatewayOutput::Store(ask) => {
                // A response ends once what it changed is kept: a gateway killed after its
                // client has the answer loses no turn.
                let waiting = match &ask {
                    StoreAsk::Save { request, .. } | StoreAsk::Managed { request, .. } => *request,
                    _ => None,
                };
                let done = waiting.map(|request| {
                    let (done, kept) = tokio::sync::oneshot::channel();
                    core.saving.insert(request, kept);
                    done
                });
                self.to_store(StoreOp::Ask(ask, done));
            }
            _ => {}
        }
    }

    /// Queues work for the session store.
    fn to_store(&self, op: StoreOp) {
        if let Some(store) = self.store.lock().expect("store lock").as_ref() {
            let _ = store.send(op);
        }
    }

    /// Starts a CLI that resumes a stored conversation, once its transcript is written where
    /// the CLI reads it; what the gateway writes to it meanwhile waits.
    fn spawn_resumed(self: &Arc<Self>, core: &mut Core, session: SessionId, spec: CliSpec) {
        let Some(resume) = spec.resume.clone() else {
            return;
        };
        let (lines, to_write) = mpsc::unbounded_channel::<Vec<u8>>();
        core.clis.insert(
            session,
            Cli {
                stdin: lines,
                pid: 0,
            },
        );
        let (done, written) = tokio::sync::oneshot::channel();
        let home = spec.tenant.as_ref().map(|d| PathBuf::from(&d.home));
        if resume.lines.is_empty() {
            self.to_store(StoreOp::Resume {
                spec: resume.clone(),
                home,
                done,
            });
        } else {
            // A transcript the gateway wrote: no store to read.
            let resume = resume.clone();
            tokio::task::spawn_blocking(move || {
                let path = PathBuf::from(&resume.path);
                let written = materialize(&resume.lines, &path, &resume.key.id, home.as_deref());
                let _ = done.send(written.map_err(|e| NotResumed::failed(e.to_string())));
            });
        }
        let app = self.clone();
        tokio::spawn(async move {
            let written = written
                .await
                .unwrap_or_else(|_| Err(NotResumed::unavailable("the session store stopped")));
            app.input_core(|core, now| {
                // Closed meanwhile (its client went away).
                if !core.clis.contains_key(&session) {
                    return;
                }
                if let Err(NotResumed {
                    detail,
                    unavailable: true,
                }) = &written
                {
                    let id = &resume.key.id;
                    tracing::warn!(session, error = %detail, "cannot read conversation {id} from the session store");
                    core.clis.remove(&session);
                    core.gateway.handle_store(now, StoreAnswer::ResumeUnavailable { session });
                    return;
                }
                let started = written
                    .map_err(|error| SpawnFailure {
                        detail: format!(
                            "cannot resume conversation {}: {}",
                            resume.key.id, error.detail
                        ),
                        reason: "the stored conversation cannot be read".to_owned(),
                    })
                    .and_then(|()| app.spawn(core, session, &spec, Some(to_write)));
                if let Err(failure) = started {
                    let error = &failure.detail;
                    tracing::warn!(session, %error, "cannot start a Claude Code session");
                    core.clis.remove(&session);
                    core.gateway
                        .handle_spawn_failed(now, session, &failure.reason);
                }
            });
        });
    }

    /// Starts a session's CLI and the tasks that move its bytes.
    fn spawn(
        self: &Arc<Self>,
        core: &mut Core,
        session: SessionId,
        spec: &CliSpec,
        writes: Option<mpsc::UnboundedReceiver<Vec<u8>>>,
    ) -> Result<(), SpawnFailure> {
        let path = self.claude.clone().map_err(|detail| SpawnFailure {
            detail,
            reason: "the gateway has no Claude Code CLI".to_owned(),
        })?;
        if let (Some(dirs), Some(root)) = (&spec.tenant, self.tenant_root()) {
            // A Managed Agents session's own working directory is beside the tenant's.
            let own_cwd = (spec.cwd.as_ref()).filter(|cwd| {
                !dirs.sessions.is_empty() && cwd.starts_with(&format!("{}/", dirs.sessions))
            });
            // Each made or opened one component at a time, no link followed: the bubblewrap
            // binds below are of directories whose every parent the gateway alone writes.
            let made = private_dir(&root).and_then(|()| {
                [&dirs.home, &dirs.work, &dirs.tmp]
                    .into_iter()
                    .chain(own_cwd)
                    .try_for_each(|dir| {
                        crate::beneath::make_dir_below(&root, Path::new(dir)).map(drop)
                    })
            });
            made.map_err(|e| SpawnFailure {
                detail: format!(
                    "cannot make the tenant directories under {}: {e}",
                    root.display()
                ),
                reason: format!("cannot make the conversation's directories: {e}"),
            })?;
        }
        let cwd = spec.cwd.as_deref().map(Path::new);
        let mark = (MARKER_ENV.to_owned(), self.marks.of(session));
        let proxy = match (&self.egress, &spec.tenant) {
            (Some(egress), Some(_)) => {
                for url in &spec.egress {
                    egress.allow_url(url);
                }
                crate::egress::proxy_env()
            }
            _ => Vec::new(),
        };
        let set = spec.env.iter().cloned().chain(proxy).chain([mark]);
        let (program, args) = match (&self.sandbox, &spec.tenant) {
            (Some(sandbox), Some(dirs)) => {
                let mut writable = vec![dirs.home.as_str(), dirs.work.as_str(), dirs.tmp.as_str()];
                writable.extend(spec.cwd.as_deref().filter(|c| *c != dirs.work));
                let cwd = spec.cwd.as_deref().unwrap_or(&dirs.work);
                sandbox.wrap(&path, &spec.args, &writable, cwd)
            }
            _ => (path, spec.args.iter().map(Into::into).collect()),
        };
        let mut process = CliProcess::spawn_command(&program, &args, cwd, set, &spec.env_remove)
            .map_err(|e| SpawnFailure {
                reason: match &e {
                    crate::process::SpawnError::Io { source, .. } => source.to_string(),
                    crate::process::SpawnError::NotFound(_) => {
                        "the gateway has no Claude Code CLI".to_owned()
                    }
                },
                detail: e.to_string(),
            })?;
        let pid = process.pid();
        let (Some(mut stdin), Some(stdout)) = (process.take_stdin(), process.take_stdout()) else {
            return Err(SpawnFailure {
                detail: "the CLI's pipes are missing".to_owned(),
                reason: "the CLI's pipes are missing".to_owned(),
            });
        };
        let (lines, mut to_write) = match writes {
            Some(waiting) => (None, waiting),
            None => {
                let (lines, to_write) = mpsc::unbounded_channel::<Vec<u8>>();
                (Some(lines), to_write)
            }
        };
        // Ends (dropping stdin, which closes it) once the session is closed.
        let closed = tokio::spawn(async move {
            let mut open = true;
            while let Some(bytes) = to_write.recv().await {
                open = open && stdin.write_all(&bytes).await.is_ok();
            }
        });
        match lines {
            Some(lines) => {
                core.clis.insert(session, Cli { stdin: lines, pid });
            }
            None => {
                if let Some(cli) = core.clis.get_mut(&session) {
                    cli.pid = pid;
                }
            }
        }
        tracing::info!(session, pid, "started a Claude Code session");
        if let Some(cwd) = &spec.cwd {
            core.working.insert(session, cwd.clone());
        }
        let task = tokio::spawn(run_cli(self.clone(), session, process, stdout, closed));
        let mut tasks = self.tasks.lock().expect("tasks lock");
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
        Ok(())
    }
}

/// Why a CLI did not start: in full for the log, and without the gateway's paths for the
/// client.
struct SpawnFailure {
    detail: String,
    reason: String,
}

/// The directory of the tenants' directories in the state directory `dir`.
fn tenant_root(dir: &Path) -> PathBuf {
    std::path::absolute(dir)
        .unwrap_or_else(|_| dir.to_owned())
        .join("tenants")
}

/// Makes `dir` and its missing parents, the last one readable by its owner only.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Reads a CLI's stdout into the gateway until it ends, then reports its exit. Once the
/// gateway has closed the session (its stdin closed), its output is no longer read and it has
/// [`CLOSE_GRACE`] to exit by itself. Once it has ended, what its tools left running is killed.
async fn run_cli(
    app: Arc<App>,
    session: SessionId,
    mut process: CliProcess,
    mut stdout: ChildStdout,
    mut closed: tokio::task::JoinHandle<()>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut trace = Vec::new();
    loop {
        tokio::select! {
            read = stdout.read(&mut buf) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    trace_lines("<", &mut trace, &buf[..n]);
                    app.input(|gateway, now| gateway.handle_stdout(now, session, &buf[..n]));
                }
            },
            _ = &mut closed => break,
        }
    }
    drop(stdout);
    let exit = process.shutdown(CLOSE_GRACE).await.unwrap_or_else(|error| {
        tracing::warn!(session, %error, "cannot wait for a Claude Code session");
        crate::process::ExitInfo::default()
    });
    let stderr = process.stderr().text();
    tracing::info!(session, ?exit, stderr = %stderr.trim_end(), "a Claude Code session ended");
    // In the sandbox its PID namespace ended with it, and everything in it.
    if app.sandbox.is_none() {
        let mark = app.marks.of(session);
        let _ = tokio::task::spawn_blocking(move || crate::tree::sweep_session(&mark)).await;
    }
    app.input(|gateway, now| {
        gateway.handle_exit(now, session, exit.code, exit.signal, &stderr);
    });
    let mut core = app.core();
    core.clis.remove(&session);
    core.working.remove(&session);
}

/// Deletes a deleted Managed Agents session's directory ([`GatewayOutput::RemoveDir`]) once
/// no CLI process works in it any more (one closed just before has [`CLOSE_GRACE`] to exit).
/// Only a directory of a session under the tenants' root is deleted.
async fn remove_when_unused(app: Arc<App>, path: String) {
    let root = app.tenant_root();
    let inside = root.is_some_and(|root| {
        Path::new(&path).starts_with(&root) && path.contains("/sessions/") && !path.contains("..")
    });
    if !inside {
        tracing::warn!(path, "not a session's directory: left alone");
        return;
    }
    let deadline = tokio::time::Instant::now() + CLOSE_GRACE + Duration::from_secs(10);
    while app.core().working.values().any(|cwd| *cwd == path) {
        if tokio::time::Instant::now() > deadline {
            tracing::warn!(
                path,
                "a CLI still works in a deleted session's directory: left alone"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    match tokio::fs::remove_dir_all(&path).await {
        Ok(()) => tracing::info!(path, "deleted a deleted session's directory"),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => tracing::warn!(path, %error, "cannot delete a deleted session's directory"),
    }
}

/// Logs whole lines read (`<`) or written (`>`) at TRACE (`ccwire::wire`), keeping a partial
/// line for later.
fn trace_lines(direction: &str, partial: &mut Vec<u8>, bytes: &[u8]) {
    if tracing::enabled!(target: "ccwire::wire", tracing::Level::TRACE) {
        partial.extend_from_slice(bytes);
        let end = partial
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        for line in partial.drain(..end).as_slice().split(|b| *b == b'\n') {
            if !line.is_empty() {
                let line = String::from_utf8_lossy(line);
                tracing::trace!(target: "ccwire::wire", "{direction} {line}");
            }
        }
    }
}

/// Applies the gateway's deadlines as they come.
async fn timers(app: Arc<App>) {
    loop {
        let next = app.core().gateway.poll_timeout();
        let sleep = match next {
            Some((at, _)) => Duration::from_millis(at.saturating_sub(app.now())),
            None => Duration::from_secs(3600),
        };
        tokio::select! {
            () = tokio::time::sleep(sleep) => {}
            () = app.wake.notified() => continue,
        }
        app.input(|gateway, now| gateway.handle_timeout(now));
    }
}

/// A request the gateway answers. Dropped before its response ended (the client went away),
/// it tells the gateway.
struct InFlight {
    app: Arc<App>,
    id: RequestId,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let id = self.id;
        self.app.input(|gateway, now| {
            if gateway.holds(id) {
                tracing::info!(request = id, "the client went away mid-response");
                gateway.handle_client_gone(now, id);
            }
        });
        self.app.core().responders.remove(&id);
    }
}

/// Every request: its head decided on by the front, its body read, then handed to the
/// gateway, whose outputs for it are relayed — a stream as it comes, or a whole answer.
async fn handle(State(app): State<Arc<App>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let mut headers: Vec<(&str, &str)> = parts
        .headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.to_str().unwrap_or("(not text)")))
        .collect();
    if let (false, Some(authority)) = (
        parts.headers.contains_key(header::HOST),
        parts.uri.authority(),
    ) {
        headers.push(("host", authority.as_str()));
    }
    let head = HttpHead {
        method: parts.method.as_str(),
        path: parts.uri.path(),
        query: parts.uri.query().unwrap_or(""),
        headers: &headers,
    };
    let (admission, max_body) = {
        let core = app.core();
        (core.gateway.admit(&head), core.gateway.max_body())
    };
    let (tenant, cors) = match admission {
        Admission::Respond(r) => return response(r.status, r.headers, Body::from(r.body)),
        Admission::Admit { tenant, cors } => (tenant, cors),
    };
    let timeout = app.options.conn.body_timeout;
    let body = tokio::time::timeout(timeout, read_body(body, max_body))
        .await
        .unwrap_or_else(|_| {
            let after_ms = timeout.as_millis() as u64;
            tracing::debug!(after_ms, "a request's body did not arrive in time");
            Err(BodyError::TimedOut { after_ms })
        });
    // An API request is read before the gateway's lock is taken (and, when large, off the
    // threads that serve the other connections), so it holds up no other request.
    let parsed = match &body {
        Ok(bytes) if bytes.len() > PARSE_INLINE => {
            let (path, bytes, tenant) = (head.path.to_owned(), bytes.clone(), tenant.clone());
            tokio::task::spawn_blocking(move || prepare(&path, &tenant, &bytes))
                .await
                .ok()
                .flatten()
        }
        Ok(bytes) => prepare(head.path, &tenant, bytes),
        Err(_) => None,
    };
    // A conversation, or an approval, another node of the cluster holds is served there.
    let mut merge = None;
    if let (Some(cluster), Ok(bytes)) = (&app.options.cluster, &body) {
        let forwarded = parts
            .headers
            .get(FORWARDED_BY)
            .is_some_and(|h| cluster.forwarded(h.as_bytes()));
        if !forwarded {
            let route = match &parsed {
                Some(Ok(prepared)) => Some((Held::Conversation, prepared.route_key(&tenant))),
                _ => approval_route(head.path, &tenant)
                    .map(|key| (Held::Approval, RouteKey::Conversation(key)))
                    .or_else(|| {
                        managed_route(head.path, &tenant)
                            .map(|key| (Held::Managed, RouteKey::Conversation(key)))
                    }),
            };
            if let Some((held, route)) = route {
                let routed = to_cluster(&app, cluster, &parts, head.api(), route, held, bytes);
                match routed.await {
                    Routed::There(response) => return response,
                    Routed::Stale if held == Held::Managed => {
                        // What this gateway knew of the tenant's resources may be stale.
                        app.core().gateway.forget_managed(&tenant);
                    }
                    Routed::Stale | Routed::Here => {}
                }
            }
            if matches!(
                head.path,
                "/v1/approvals" | "/v1/approvals/events" | "/v1/conversations" | "/v1/stats"
            ) {
                let asked = parts.uri.path_and_query().map_or(head.path, |p| p.as_str());
                merge = Some((cluster.clone(), parts.headers.clone(), asked.to_owned()));
            }
            // A conversation the console watches whose CLI runs on another node: streamed
            // from there.
            let elsewhere = app.core().gateway.streams_elsewhere(head.path);
            if elsewhere {
                if let Some(there) = live_elsewhere(&app, cluster, &parts).await {
                    return there;
                }
            }
        }
    }
    let id = app.next_request.fetch_add(1, Ordering::Relaxed);
    let (responder, mut parts) = mpsc::unbounded_channel();
    app.core().responders.insert(id, responder);
    let in_flight = InFlight {
        app: app.clone(),
        id,
    };
    let bytes = body.as_ref().map(|b| &b[..]).map_err(Clone::clone);
    let prepared = Prepared::new(bytes, parsed);
    app.input(|gateway, now| gateway.handle_http(now, id, &head, &tenant, prepared));
    let Some(Part::Head(status, mut headers)) = parts.recv().await else {
        let error = ApiError::new(ApiErrorKind::Api, "the gateway dropped the request");
        return response(500, Vec::new(), error.body(head.api()).to_string().into());
    };
    headers.extend(cors);
    if let Some(cluster) = &app.options.cluster {
        headers.push((NODE_HEADER.to_owned(), cluster.node().to_owned()));
    }
    let body = if headers
        .iter()
        .any(|(n, v)| n == "content-type" && v == "text/event-stream")
    {
        let stream = futures::stream::unfold((parts, in_flight), |(mut parts, in_flight)| async {
            let Part::Body(bytes) = parts.recv().await? else {
                return None;
            };
            Some((Ok::<_, Infallible>(bytes), (parts, in_flight)))
        });
        match merge {
            // Every node's approvals as they come, for as long as this node's stream lasts.
            Some((cluster, asked, _)) if status == 200 => {
                Body::from_stream(cluster_events(app.clone(), cluster, asked, stream))
            }
            _ => Body::from_stream(stream),
        }
    } else {
        // A whole answer is sent at once: its body is already in the channel.
        let mut bytes = Vec::new();
        while let Some(Part::Body(piece)) = parts.recv().await {
            bytes.extend_from_slice(&piece);
        }
        drop(in_flight);
        match merge {
            // The approvals, conversations or charts of every node.
            Some((cluster, asked, path)) if status == 200 => {
                Body::from(cluster_list(&app, &cluster, &asked, &path, bytes).await)
            }
            _ => Body::from(bytes),
        }
    };
    response(status, headers, body)
}

/// What a request's route key names, for the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// A conversation (or a new one).
    Conversation,
    /// A pending approval: where it waits, or nowhere.
    Approval,
    /// A tenant's Managed Agents resources.
    Managed,
}

/// Where [`to_cluster`] sent a request.
enum Routed {
    /// To another node: its response.
    There(Response),
    /// Nowhere: it is served here.
    Here,
    /// Nowhere, and what this node knew of it may be stale: it took the key's claim just
    /// now, or the node that claims it cannot be reached.
    Stale,
}

/// Sends a request to the node of the cluster that must serve it, if another: the live node
/// that claims its route key (a key nobody holds is claimed here, but an approval's), or,
/// while this node drains, any other for what it would start here.
async fn to_cluster(
    app: &Arc<App>,
    cluster: &Cluster,
    parts: &axum::http::request::Parts,
    api: ccwire_core::api::Api,
    route: RouteKey,
    held: Held,
    body: &Bytes,
) -> Routed {
    let draining = app.core().gateway.is_draining();
    let claimed = match &route {
        RouteKey::Conversation(key) => {
            let take = held != Held::Approval && !draining;
            match cluster.owner(key, take).await {
                Ok(claimed) => claimed,
                Err(error) => {
                    tracing::warn!(%error, "cannot look a request up in the cluster; serving it here");
                    return Routed::Here;
                }
            }
        }
        RouteKey::New => Claimed::Here { taken: false },
    };
    let owner = match claimed {
        Claimed::Elsewhere(owner) => owner,
        Claimed::Here { taken: true } => return Routed::Stale,
        Claimed::Here { taken: false } if draining && held != Held::Approval => {
            // Another node starts what this one, draining, would refuse.
            let peers = cluster.peers().await.unwrap_or_default();
            let turn = app.next_request.fetch_add(1, Ordering::Relaxed) as usize;
            match peers.get(turn % peers.len().max(1)) {
                Some(peer) => peer.clone(),
                None => return Routed::Here,
            }
        }
        Claimed::Here { .. } => return Routed::Here,
    };
    match forward(app, cluster, &owner, parts, body.clone()).await {
        Ok(response) => Routed::There(response),
        Err(error) if error.is_connect() => {
            tracing::info!(node = owner.node, %error, "the gateway a request belongs to is unreachable; serving it here");
            Routed::Stale
        }
        Err(error) => {
            tracing::warn!(node = owner.node, %error, "a forwarded request failed");
            let message = format!(
                "the gateway that holds this conversation ({}) did not answer",
                owner.node
            );
            let error = ApiError::new(ApiErrorKind::Api, message);
            Routed::There(response(
                502,
                vec![("content-type".into(), "application/json".into())],
                error.body(api).to_string().into(),
            ))
        }
    }
}

/// How long a node waits for another's part of a cluster-wide answer.
const PEER_TIMEOUT: Duration = Duration::from_secs(2);

/// A `method` request to `path` on `peer` as the client asked it of this node (its own headers, so the
/// peer authenticates it again), marked as forwarded.
fn to_peer(
    app: &App,
    cluster: &Cluster,
    peer: &Owner,
    method: axum::http::Method,
    path: &str,
    asked: &axum::http::HeaderMap,
) -> reqwest::RequestBuilder {
    let mut request = app
        .forwarder
        .request(method, format!("{}{path}", peer.url))
        .header(FORWARDED_BY, cluster.forwarding_header());
    for (name, value) in asked {
        if !hop_by_hop(name.as_str()) && name.as_str() != FORWARDED_BY {
            request = request.header(name, value);
        }
    }
    request
}

/// `GET path` (with its query) of the whole cluster (`/v1/approvals`, `/v1/conversations`,
/// `/v1/stats`): this node's answer (`local`) with every other live node's, merged
/// ([`merge_node_answers`](ccwire_core::gateway::merge_node_answers)); a node that does not
/// answer in time is left out (and logged).
async fn cluster_list(
    app: &App,
    cluster: &Cluster,
    asked: &axum::http::HeaderMap,
    path: &str,
    local: Vec<u8>,
) -> Vec<u8> {
    let Ok(mine) = serde_json::from_slice::<serde_json::Value>(&local) else {
        return local;
    };
    let peers = match cluster.peers().await {
        Ok(peers) => peers,
        Err(error) => {
            tracing::warn!(%error, path, "cannot list the cluster's nodes; this one's answer only");
            return local;
        }
    };
    let answers = futures::future::join_all(peers.iter().map(|peer| async move {
        let answer = to_peer(app, cluster, peer, axum::http::Method::GET, path, asked)
            .timeout(PEER_TIMEOUT)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status);
        let answer = match answer {
            Ok(answer) => answer.json::<serde_json::Value>().await,
            Err(error) => Err(error),
        };
        answer
            .map_err(|error| tracing::warn!(node = peer.node, %error, path, "a node's answer is left out"))
            .ok()
    }))
    .await;
    let theirs: Vec<serde_json::Value> = answers.into_iter().flatten().collect();
    let route = path.split_once('?').map_or(path, |(route, _)| route);
    ccwire_core::gateway::merge_node_answers(route, mine, theirs)
        .to_string()
        .into_bytes()
}

/// `GET /v1/conversations/{id}/events` of a conversation no CLI of this node runs: the stream
/// of the node whose CLI runs it (asked with `live=only`), if one does.
async fn live_elsewhere(
    app: &App,
    cluster: &Cluster,
    parts: &axum::http::request::Parts,
) -> Option<Response> {
    let peers = cluster.peers().await.ok()?;
    let query = parts.uri.query().map_or(String::new(), |q| format!("{q}&"));
    let path = format!("{}?{query}live=only", parts.uri.path());
    for peer in &peers {
        let request = to_peer(
            app,
            cluster,
            peer,
            axum::http::Method::GET,
            &path,
            &parts.headers,
        );
        let Ok(Ok(answer)) = tokio::time::timeout(PEER_TIMEOUT, request.send()).await else {
            continue;
        };
        if answer.status() != 200 {
            continue;
        }
        let headers = answer.headers().clone();
        let mut response = Response::new(Body::from_stream(answer.bytes_stream()));
        for (name, value) in &headers {
            if !hop_by_hop(name.as_str()) {
                response.headers_mut().append(name, value.clone());
            }
        }
        return Some(response);
    }
    None
}

/// `GET /v1/approvals/events` of the whole cluster: this node's stream (`local`), and every
/// other live node's, whole events interleaved, the nodes looked up again every few seconds
/// (a node that joins is added; one whose stream ends is connected again while it lives).
/// It ends with this node's stream; a client that goes away closes them all.
fn cluster_events(
    app: Arc<App>,
    cluster: Cluster,
    asked: axum::http::HeaderMap,
    local: impl futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
) -> impl futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
    let (frames, out) = mpsc::channel::<Bytes>(64);
    let (ended, end) = tokio::sync::watch::channel(false);
    let to_client = frames.clone();
    tokio::spawn(async move {
        let mut local = std::pin::pin!(local);
        loop {
            tokio::select! {
                item = local.next() => {
                    let Some(Ok(bytes)) = item else { break };
                    if to_client.send(bytes).await.is_err() {
                        break;
                    }
                }
                // The client went away: so does this node's stream, now.
                () = to_client.closed() => break,
            }
        }
        let _ = ended.send(true);
    });
    tokio::spawn(async move {
        let connected = Arc::new(Mutex::new(std::collections::HashSet::<String>::new()));
        let mut tick = tokio::time::interval(crate::cluster::RENEW);
        let mut end = end;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = end.changed() => return,
            }
            if frames.is_closed() {
                return;
            }
            let Ok(peers) = cluster.peers().await else {
                continue;
            };
            for peer in peers {
                if !connected
                    .lock()
                    .expect("peers lock")
                    .insert(peer.node.clone())
                {
                    continue;
                }
                let request = to_peer(
                    &app,
                    &cluster,
                    &peer,
                    axum::http::Method::GET,
                    "/v1/approvals/events",
                    &asked,
                );
                let (frames, connected, mut end) = (frames.clone(), connected.clone(), end.clone());
                tokio::spawn(async move {
                    let relay = async {
                        let Ok(answer) = request
                            .send()
                            .await
                            .and_then(reqwest::Response::error_for_status)
                        else {
                            return;
                        };
                        let mut stream = answer.bytes_stream();
                        let mut partial = Vec::new();
                        while let Some(Ok(bytes)) = stream.next().await {
                            partial.extend_from_slice(&bytes);
                            // Whole events only, so no two nodes' events interleave.
                            while let Some(at) = partial.windows(2).position(|w| w == b"\n\n") {
                                let frame: Vec<u8> = partial.drain(..at + 2).collect();
                                if frames.send(Bytes::from(frame)).await.is_err() {
                                    return;
                                }
                            }
                        }
                    };
                    tokio::select! {
                        () = relay => {}
                        _ = end.changed() => {}
                    }
                    connected.lock().expect("peers lock").remove(&peer.node);
                });
            }
        }
    });
    futures::stream::unfold(out, |mut out| async move {
        out.recv().await.map(|bytes| (Ok(bytes), out))
    })
}

/// The header a forwarded request carries: the cluster's secret
/// ([`Cluster::forwarded`]). A gateway serves such a request itself, whatever the registry
/// says (no request goes round in circles); a client cannot make one.
const FORWARDED_BY: &str = "x-ccwire-forwarded-by";

/// The header that names the node of a cluster that served a response.
const NODE_HEADER: &str = "x-ccwire-node";

/// Headers that belong to one connection, not to the request or response it carries.
fn hop_by_hop(name: &str) -> bool {
    matches!(
        name,
        "connection"
            | "keep-alive"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
            | "content-length"
    )
}

/// Sends a request to the node that runs its conversation and relays its response as it
/// comes (a stream stays a stream; a client that goes away closes the forwarded request, so
/// the owner sees it go away too).
///
/// # Errors
/// The node's connection's: when [`is_connect`](reqwest::Error::is_connect), nothing was sent.
async fn forward(
    app: &App,
    cluster: &Cluster,
    owner: &Owner,
    parts: &axum::http::request::Parts,
    body: Bytes,
) -> Result<Response, reqwest::Error> {
    let path = parts
        .uri
        .path_and_query()
        .map_or(parts.uri.path(), |p| p.as_str());
    let request = to_peer(
        app,
        cluster,
        owner,
        parts.method.clone(),
        path,
        &parts.headers,
    );
    let answer = request.body(body).send().await?;
    tracing::debug!(node = owner.node, path, "forwarded a request");
    let status = answer.status();
    let headers = answer.headers().clone();
    let mut response = Response::new(Body::from_stream(answer.bytes_stream()));
    *response.status_mut() = status;
    for (name, value) in &headers {
        if !hop_by_hop(name.as_str()) {
            response.headers_mut().append(name, value.clone());
        }
    }
    Ok(response)
}

/// Sends an outbound request of the gateway (`POST url` with `headers` and `body`): the
/// body of a successful answer.
async fn send(
    http: &reqwest::Client,
    url: &str,
    headers: &[(String, String)],
    body: Vec<u8>,
) -> Option<Bytes> {
    let mut request = http.post(url).body(body);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let answer = async { request.send().await?.error_for_status()?.bytes().await }.await;
    answer
        .map_err(|err| tracing::debug!(%err, url, "no answer from the upstream"))
        .ok()
}

/// A request body, up to `max` bytes.
async fn read_body(body: Body, max: usize) -> Result<Bytes, BodyError> {
    let mut stream = body.into_data_stream();
    let mut bytes = Vec::new();
    while let Some(piece) = stream.next().await {
        let piece = piece.map_err(|e| BodyError::Unreadable(e.to_string()))?;
        if bytes.len() + piece.len() > max {
            return Err(BodyError::TooLarge);
        }
        bytes.extend_from_slice(&piece);
    }
    Ok(bytes.into())
}

fn response(status: u16, headers: Vec<(String, String)>, body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            response.headers_mut().append(name, value);
        }
    }
    response
}

/// A running gateway.
pub struct Server {
    addr: SocketAddr,
    app: Arc<App>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Binds and starts serving, once it has killed what the CLIs of gateways no longer
    /// running left behind outside the sandbox ([`crate::tree`]: a gateway killed by SIGKILL
    /// runs no code to do so).
    ///
    /// # Errors
    /// A public address without keys, or a socket that cannot be bound.
    pub async fn start(addr: SocketAddr, options: GatewayOptions) -> Result<Server, ServeError> {
        if options.cluster.is_some() && options.store.is_none() {
            return Err(ServeError::Io(std::io::Error::other(
                "a gateway in a cluster needs the cluster's session store",
            )));
        }
        let inherited: Vec<String> = std::env::vars_os()
            .filter_map(|(k, _)| k.into_string().ok())
            .collect();
        let engine = GatewayConfig {
            cli_env: options.env.clone(),
            cli_env_remove: env_to_remove(
                inherited.iter().map(String::as_str),
                &options.env_remove,
                &options.pass_env,
            ),
            seed: options.seed.unwrap_or_else(|| {
                std::hash::BuildHasher::hash_one(&std::hash::RandomState::new(), 0u8)
            }),
            id_key: match options.seed {
                Some(seed) => GatewayConfig::id_key_from_seed(seed),
                None => {
                    let mut key = [0u8; 32];
                    getrandom::getrandom(&mut key)
                        .map_err(|e| std::io::Error::other(e.to_string()))?;
                    key
                }
            },
            unix_epoch_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            tenant_root: (options.state_dir.as_ref())
                .map(|dir| tenant_root(dir).to_string_lossy().into_owned()),
            shared_cwd: options
                .cwd
                .as_ref()
                .map(|d| d.to_string_lossy().into_owned()),
            http: HttpConfig {
                listener: addr.to_string(),
                loopback: addr.ip().is_loopback(),
                ..options.engine.http.clone()
            },
            store: options.store.is_some(),
            publish_index: options.engine.publish_index || options.cluster.is_some(),
            node: options.cluster.as_ref().map(|c| c.node().to_owned()),
            ..options.engine.clone()
        };
        let cli_var = |name: &str| engine.cli_var(name, |n| std::env::var(n).ok());
        let passed_env: Vec<String> = (inherited.iter())
            .filter(|name| !engine.cli_env_remove.contains(name))
            .cloned()
            .collect();
        let mut gateway = Gateway::new(engine.clone())?;
        gateway.count_tokens_upstream(cli_var);
        let credential = [
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "CLAUDE_CODE_OAUTH_TOKEN",
        ]
        .into_iter()
        .any(|name| cli_var(name).is_some_and(|v| !v.is_empty()));
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind { addr, source })?;
        let addr = listener.local_addr()?;
        let mut options = options;
        if let Some(cluster) = &mut options.cluster {
            cluster.listening_on(addr.port());
            cluster.enter().await?;
        }
        let claude = find_cli(options.claude.as_deref()).map_err(|e| e.to_string());
        gateway.set_cli(match &claude {
            Ok(path) => json!({"found": true, "path": path, "version": cli_version(path).await}),
            Err(error) => json!({"found": false, "error": error}),
        });
        let (sandbox, no_sandbox) = match &options.state_dir {
            Some(dir) => {
                let setup = SandboxSetup {
                    run: std::path::absolute(dir)
                        .unwrap_or_else(|_| dir.clone())
                        .join("run"),
                    relay: match &options.sandbox_relay {
                        Some(relay) => relay.clone(),
                        None => std::env::current_exe()?,
                    },
                };
                Sandbox::for_mode(options.sandbox, &setup).await?
            }
            None if options.sandbox == SandboxMode::On => {
                let why = "the sandbox needs a state directory for the tenants' files";
                return Err(crate::sandbox::SandboxError::new(why).into());
            }
            None => (None, None),
        };
        // Unconfined tools are the gateway's own user: only the operator's explicit word
        // lets a gateway that runs them, or that serves several keys, go without the sandbox.
        if let Some(why) = &no_sandbox {
            let tools = engine
                .enabled_tools
                .iter()
                .any(|t| ccwire_core::gateway::CODE_TOOLS.contains(&t.as_str()));
            let keys = !engine.http.api_keys.is_empty();
            if tools || keys {
                let what = if tools {
                    "tools that run code are enabled"
                } else {
                    "API keys are configured (several tenants)"
                };
                return Err(crate::sandbox::SandboxError::new(format!(
                    "{why}; {what}, and without the sandbox every tenant's tools would run as \
                     the gateway's user. Install bubblewrap, or say --sandbox off to run \
                     unsandboxed anyway"
                ))
                .into());
            }
        }
        let egress = match &sandbox {
            Some(sandbox) => {
                let base = cli_var("ANTHROPIC_BASE_URL");
                let allowed = Allowed::new(base.as_deref(), &options.allow_egress)
                    .map_err(crate::sandbox::SandboxError::new)?;
                Some(Egress::start(&sandbox.socket(), allowed)?)
            }
            None => None,
        };
        let _ = tokio::task::spawn_blocking(crate::tree::sweep_orphans).await;
        let (store_ops, store_work) = mpsc::unbounded_channel();
        let store = options.store.clone();
        let app = Arc::new(App {
            options,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap_or_default(),
            forwarder: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(2))
                .build()
                .unwrap_or_default(),
            heartbeat: Mutex::new(None),
            claude,
            sandbox,
            no_sandbox,
            egress,
            passed_env,
            credential,
            marks: Marks::new(),
            core: Mutex::new(Core {
                gateway,
                clis: HashMap::new(),
                responders: HashMap::new(),
                saving: HashMap::new(),
                claimed: false,
                working: HashMap::new(),
            }),
            tasks: Mutex::new(Vec::new()),
            next_request: AtomicU64::new(0),
            start: Instant::now(),
            wake: Notify::new(),
            drain_asked: Notify::new(),
            store: Mutex::new(store.is_some().then_some(store_ops)),
            store_task: Mutex::new(None),
        });
        if let Some(store) = store {
            // The pool fills with what it learned before the restart.
            if app.options.engine.pool > 0 {
                match store.load_pool().await {
                    Ok(Some(settings)) => {
                        app.input(|gateway, now| gateway.restore_pool(now, &settings));
                    }
                    Ok(None) => {}
                    Err(error) => tracing::warn!(%error, "cannot read the warm pool's settings"),
                }
            }
            let cluster = app.options.cluster.clone();
            let task = tokio::spawn(store_worker(
                Arc::downgrade(&app),
                store,
                cluster,
                store_work,
            ));
            *app.store_task.lock().expect("store lock") = Some(task);
        }
        if let Some(cluster) = &app.options.cluster {
            let task = tokio::spawn(heartbeat(Arc::downgrade(&app), cluster.clone()));
            *app.heartbeat.lock().expect("heartbeat lock") = Some(task);
            tracing::info!(
                node = cluster.node(),
                advertise = cluster.advertise(),
                "this gateway is a node of a cluster"
            );
        }
        if let Some(budget) = app.options.memory_budget {
            tokio::spawn(memory_watch(Arc::downgrade(&app), budget));
        }
        tokio::spawn(timers(app.clone()));
        let router = Router::new().fallback(handle).with_state(app.clone());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(conn::serve(listener, router, app.options.conn.clone(), rx));
        tracing::debug!(%addr, "ccwire serve listening");
        Ok(Server {
            addr,
            app,
            shutdown: Some(tx),
            task,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The process ids of the live CLI sessions.
    pub fn session_pids(&self) -> Vec<u32> {
        let core = self.app.core();
        core.clis.values().map(|c| c.pid).collect()
    }

    /// Drains, then shuts down: new conversations get a 503 while running turns finish (held
    /// tool calls included, up to the drain grace), each CLI is closed once its turn is done,
    /// and the server stops when none is left.
    pub async fn drain(self) {
        let grace = Duration::from_millis(self.app.options.engine.http.drain_grace_ms);
        self.app
            .input(|gateway, now| gateway.drain(now, grace.as_millis() as u64));
        // The gateway closes what still runs at the end of the grace; this bounds the wait.
        let deadline = tokio::time::Instant::now() + grace + Duration::from_secs(10);
        let drained = || self.app.core().gateway.is_drained();
        while !drained() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.shutdown().await;
    }

    /// Stops accepting requests, closes every session (stdin closed, grace, then killed),
    /// waits for the CLI processes to end and kills what their tools left running.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        close_all(&self.app).await;
        // What the session store was asked to keep is kept before the gateway ends.
        self.app.store.lock().expect("store lock").take();
        let store_task = self.app.store_task.lock().expect("store lock").take();
        if let Some(task) = store_task {
            let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        }
        // The other nodes serve this one's conversations from the store from now on.
        let heartbeat = self.app.heartbeat.lock().expect("heartbeat lock").take();
        if let (Some(task), Some(cluster)) = (heartbeat, &self.app.options.cluster) {
            task.abort();
            if let Err(error) = cluster.leave().await {
                tracing::warn!(%error, "cannot leave the cluster; its lease lapses by itself");
            }
        }
        // Each session's own sweep has run, unless its CLI outlasted the wait for it.
        let marks = self.app.marks.clone();
        let _ = tokio::task::spawn_blocking(move || marks.sweep_all()).await;
        let _ = tokio::time::timeout(Duration::from_secs(5), &mut self.task).await;
        self.task.abort();
    }
}

async fn close_all(app: &Arc<App>) {
    app.input(|gateway, now| {
        let sessions: Vec<SessionId> = gateway.sessions().collect();
        for session in sessions {
            gateway.close(now, session);
        }
    });
    let tasks: Vec<_> = std::mem::take(&mut *app.tasks.lock().expect("tasks lock"));
    for task in tasks {
        // Each task escalates to SIGTERM and SIGKILL by itself; this bounds the wait.
        let _ = tokio::time::timeout(Duration::from_secs(20), task).await;
    }
}

/// Runs `ccwire serve` until SIGINT or SIGTERM.
///
/// # Errors
/// When the server cannot start.
pub async fn serve(addr: SocketAddr, options: GatewayOptions) -> Result<(), ServeError> {
    let server = Server::start(addr, options).await?;
    // Its only children from here on are CLIs: it can be the reaper of their orphans.
    if let Err(err) = crate::tree::adopt_orphans() {
        tracing::warn!(%err, "cannot reap the orphans of the CLIs' tools");
    }
    eprintln!("ccwire serve: listening on http://{}", server.addr());
    if let Err(err) = &server.app.claude {
        eprintln!("ccwire serve: warning: {err}");
    }
    if server.app.sandbox.is_some() {
        eprintln!("ccwire serve: each CLI runs in the OS sandbox (bubblewrap)");
    }
    if let Some(egress) = &server.app.egress {
        eprintln!(
            "ccwire serve: the sandboxed CLIs and their tools reach {} and nothing else",
            egress.allowed().describe()
        );
    }
    eprintln!(
        "ccwire serve: the CLIs inherit {} of this environment (--pass-env NAME for more)",
        match server.app.passed_env.as_slice() {
            [] => "nothing".to_owned(),
            names => names.join(", "),
        }
    );
    if let Some(why) = &server.app.no_sandbox {
        eprintln!("ccwire serve: warning: the CLIs run without the OS sandbox: {why}");
    }
    if let Some(dir) = &server.app.options.state_dir {
        eprintln!(
            "ccwire serve: tenants' homes under {}",
            dir.join("tenants").display()
        );
        if !server.app.credential {
            eprintln!(
                "ccwire serve: warning: no ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN: each \
                 caller's CLI has its own home, so a Claude Code login in yours is not used \
                 (`claude setup-token` prints a token for CLAUDE_CODE_OAUTH_TOKEN)"
            );
        }
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
        () = server.app.drain_asked.notified() => {}
    }
    eprintln!(
        "ccwire serve: draining (running turns have {} s to finish)",
        server.app.options.engine.http.drain_grace_ms / 1000
    );
    server.drain().await;
    eprintln!("ccwire serve: stopped");
    Ok(())
}
