//! `ccwire serve`: the Claude Code CLI behind the Anthropic Messages, OpenAI Chat Completions
//! and OpenAI Responses APIs (docs/GATEWAY.md). Every decision — which session a request
//! continues, held client tool calls, deadlines, the CLI's command line, response framing — is
//! made by the sans-IO [`Gateway`] of `ccwire_core::gateway`; this module moves its bytes: HTTP
//! requests and responses, CLI processes and their pipes, and a timer.
//!
//! All of the gateway's inputs go through `App::input`, which holds one lock while it calls
//! the gateway and carries out what it asks for, so outputs happen in the order they were
//! made.
//!
//! By job: this module holds the options, the server's start and drain, and the one place
//! outputs are carried out (`App::carry_out`); `http` reads and answers requests, `conn` keeps
//! the connections bounded, `clis` starts, reads and ends the CLI processes, `store_worker`
//! carries out the session store's asks in order, and `forward` is the cluster's transport.

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
    env_to_remove, fans_out, prepare, Admission, BodyError, CliSpec, ConfigError, ConversationKey,
    ConversationRecord, Gateway, GatewayConfig, GatewayOutput, Holder, HttpConfig, HttpHead,
    Placed, Placement, Prepared, RequestId, ResumeSpec, RouteKey, SessionId, StoreAnswer, StoreAsk,
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
use crate::store::{is_superseded, materialize, ConversationStore};
use crate::tree::{Marks, MARKER_ENV};

mod clis;
mod conn;
mod forward;
mod http;
mod store_worker;

use clis::*;
use forward::*;
use http::*;
use store_worker::*;

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
    pub store: Option<Arc<dyn ConversationStore>>,
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
                if let (Some(responder), true) = (responder, std::mem::take(&mut core.claimed)) {
                    // Ends once the claims made before it are in the registry (the store's
                    // work is done in order).
                    let (done, registered) = tokio::sync::oneshot::channel();
                    self.to_store(StoreOp::Barrier(done));
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(Duration::from_secs(10), registered).await;
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
            GatewayOutput::Store(ask) => self.to_store(StoreOp::Ask(ask)),
            _ => {}
        }
    }

    /// Queues work for the session store.
    fn to_store(&self, op: StoreOp) {
        if let Some(store) = self.store.lock().expect("store lock").as_ref() {
            let _ = store.send(op);
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
        gateway.set_credential(ccwire_core::gateway::usage::credential_id(cli_var));
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
            // Keys made over /v1/keys work from the first request (the worker reads them again
            // now and then).
            if app.input(|gateway, _| gateway.manages_keys()) {
                match store.load_keys().await {
                    Ok(keys) => app.input(|gateway, now| gateway.handle_keys_loaded(now, &keys)),
                    Err(error) => {
                        tracing::warn!(%error, "cannot read the keys from the session store")
                    }
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
        let sessions: Vec<SessionId> = gateway.cli_sessions().collect();
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
    // Watched before the first connection is taken: a SIGTERM that comes as soon as the
    // gateway answers drains it, rather than ending it unclean by the default action.
    use tokio::signal::unix::{signal, SignalKind};
    let (mut term, mut interrupt) = (
        signal(SignalKind::terminate())?,
        signal(SignalKind::interrupt())?,
    );
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
    let engine = &server.app.options.engine;
    let per_key = match (engine.max_sessions_per_key, engine.max_concurrent_per_key) {
        (usize::MAX, usize::MAX) => String::new(),
        (sessions, concurrent) => {
            let most = |n: usize| match n {
                usize::MAX => "no cap".to_owned(),
                n => n.to_string(),
            };
            format!("; each key {} and {}", most(sessions), most(concurrent))
        }
    };
    eprintln!(
        "ccwire serve: at most {} live conversations and {} responses at once{per_key}",
        engine.max_sessions, engine.max_concurrent
    );
    if let (Some(_), Some(quota)) = (&server.app.options.store, engine.store_quota) {
        eprintln!(
            "ccwire serve: the session store keeps at most {quota} bytes of each key's \
             conversations (--store-quota)"
        );
    }
    for (key, quota) in &engine.quotas {
        eprintln!("ccwire serve: quota of {key}: {quota}");
    }
    if server.app.input(|gateway, _| gateway.manages_keys()) {
        eprintln!(
            "ccwire serve: keys are made, capped and revoked over /v1/keys with the admin key"
        );
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
    tokio::select! {
        _ = interrupt.recv() => {}
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
