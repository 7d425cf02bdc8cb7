//! `ccwire serve`: the Claude Code CLI behind the Anthropic Messages, OpenAI Chat Completions
//! and OpenAI Responses APIs (GATEWAY.md). Every decision — which session a request continues,
//! held client tool calls, deadlines, the CLI's command line, response framing — is made by
//! the sans-IO [`Endpoint`] of `ccwire_core::gateway`; this module moves its bytes: HTTP
//! requests and responses, CLI processes and their pipes, and a timer.
//!
//! All of the endpoint's inputs go through [`App::input`], which holds one lock while it calls
//! the endpoint and carries out what it asks for, so outputs happen in the order they were
//! made.

mod http;
mod upstream;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use axum::Router;
use ccwire_core::api::guard::{ApiKeys, BrowserPolicy, InvalidAllowance};
use ccwire_core::api::{Api, ApiError, ApiErrorKind};
use ccwire_core::gateway::{
    env_to_remove, CliSpec, Endpoint, EndpointConfig, EndpointOutput, RequestId, SessionId,
};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::ChildStdout;
use tokio::sync::{mpsc, oneshot, Notify};

use crate::claude::find_cli;
use crate::process::CliProcess;
use http::{api_of, authenticate, error_response, read_body};

pub use ccwire_core::gateway::CODE_TOOLS;

/// How the gateway runs.
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    /// API keys; empty = no authentication (loopback only).
    pub api_keys: Vec<String>,
    /// The `claude` executable (found with [`find_cli`] when `None`).
    pub claude: Option<PathBuf>,
    /// The engine's settings: deadlines, caps, enabled tools, the default model (its seed and
    /// clock are set at start).
    pub engine: EndpointConfig,
    /// The largest request body accepted, in bytes.
    pub max_body: usize,
    /// The CLI's working directory.
    pub cwd: Option<PathBuf>,
    /// Further CLI environment (tests point the CLI at a fake model with it).
    pub env: Vec<(String, String)>,
    /// Variables removed from the environment the CLI and its tools inherit (a name, or a
    /// prefix ending in `*`), besides every `CCWIRE_*` variable and those that would let the
    /// CLI time out or background a held call.
    pub env_remove: Vec<String>,
    /// Web origins whose pages may use the gateway (`--allow-origin`); none by default.
    pub allow_origins: Vec<String>,
    /// Host names accepted in the `Host` header on a loopback listener besides `localhost` and
    /// loopback addresses (`--allow-host`).
    pub allow_hosts: Vec<String>,
    /// How long running turns may take to finish when the gateway drains (SIGTERM,
    /// `POST /admin/drain`).
    pub drain_grace: Duration,
    /// The key `POST /admin/drain` needs (`Authorization: Bearer`); without one it is refused.
    pub admin_key: Option<String>,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        GatewayOptions {
            api_keys: Vec::new(),
            claude: None,
            engine: EndpointConfig::default(),
            max_body: 32 * 1024 * 1024,
            cwd: None,
            env: Vec::new(),
            env_remove: Vec::new(),
            allow_origins: Vec::new(),
            allow_hosts: Vec::new(),
            drain_grace: Duration::from_secs(30),
            admin_key: None,
        }
    }
}

/// Why the gateway cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A non-loopback address without an API key.
    #[error(
        "refusing to listen on {addr} without an API key{}: give --api-key or \
         CCWIRE_API_KEYS, or listen on 127.0.0.1",
        code_tools_reason(code_tools)
    )]
    NoKeyOnPublicAddress {
        /// The address.
        addr: SocketAddr,
        /// The enabled tools that run code on this machine.
        code_tools: Vec<String>,
    },
    /// An `--allow-origin` or `--allow-host` value that cannot be allowed.
    #[error(transparent)]
    Allowance(#[from] InvalidAllowance),
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

fn code_tools_reason(tools: &[String]) -> String {
    if tools.is_empty() {
        return String::new();
    }
    format!(
        " (--enable-tool {} would let anyone who reaches it run code on this machine)",
        tools.join(", ")
    )
}

/// How long a closed session's CLI may take to exit once its stdin is closed, before it is
/// signalled (SIGTERM, then SIGKILL).
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// A live CLI, as the host holds it.
struct Cli {
    /// Lines for its stdin; dropped, it closes stdin.
    stdin: mpsc::UnboundedSender<Vec<u8>>,
    /// Dropped when the endpoint closes the session: the CLI then has [`CLOSE_GRACE`].
    _closing: oneshot::Sender<()>,
    pid: u32,
}

/// A response head: the status and headers.
type Head = (u16, Vec<(String, String)>);

/// A response being sent.
struct Responder {
    head: Option<oneshot::Sender<Head>>,
    body: mpsc::UnboundedSender<Bytes>,
}

/// The endpoint and what its outputs act on, under one lock.
struct Core {
    endpoint: Endpoint,
    clis: HashMap<SessionId, Cli>,
    responders: HashMap<RequestId, Responder>,
}

struct App {
    options: GatewayOptions,
    /// Where token counts come from, when the CLI's environment names an API key.
    upstream: Option<upstream::Upstream>,
    browser: BrowserPolicy,
    keys: ApiKeys,
    /// Inherited variables no CLI gets.
    env_remove: Vec<std::ffi::OsString>,
    claude: Result<PathBuf, String>,
    claude_version: Option<String>,
    core: Mutex<Core>,
    /// The tasks that own CLI processes, to wait for at shutdown.
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    next_request: AtomicU64,
    start: Instant,
    /// Wakes the timer task when a deadline may have moved.
    wake: Notify,
    /// `POST /admin/drain` was called.
    drain_asked: Notify,
}

impl App {
    fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// Gives the endpoint an input, then carries out every output it makes, in order.
    fn input<T>(self: &Arc<Self>, f: impl FnOnce(&mut Endpoint, u64) -> T) -> T {
        let mut core = self.core.lock().expect("core lock");
        let now = self.now();
        let value = f(&mut core.endpoint, now);
        while let Some(output) = core.endpoint.poll_output() {
            self.carry_out(&mut core, output);
        }
        drop(core);
        self.wake.notify_one();
        value
    }

    fn carry_out(self: &Arc<Self>, core: &mut Core, output: EndpointOutput) {
        match output {
            EndpointOutput::Spawn { session, spec } => {
                if let Err(error) = self.spawn(core, session, &spec) {
                    tracing::warn!(session, %error, "cannot start a Claude Code session");
                    let now = self.now();
                    core.endpoint.handle_spawn_failed(now, session, &error);
                }
            }
            EndpointOutput::Write { session, bytes } => {
                if let Some(cli) = core.clis.get(&session) {
                    if tracing::enabled!(target: "ccwire::wire", tracing::Level::TRACE) {
                        for line in String::from_utf8_lossy(&bytes).lines() {
                            tracing::trace!(target: "ccwire::wire", "> {line}");
                        }
                    }
                    let _ = cli.stdin.send(bytes);
                }
            }
            EndpointOutput::Close { session } => {
                if let Some(cli) = core.clis.remove(&session) {
                    tracing::info!(session, pid = cli.pid, "closing a Claude Code session");
                }
            }
            EndpointOutput::Respond {
                request,
                status,
                headers,
            } => {
                if let Some(head) = core
                    .responders
                    .get_mut(&request)
                    .and_then(|r| r.head.take())
                {
                    let _ = head.send((status, headers));
                }
            }
            EndpointOutput::Body { request, bytes } => {
                if let Some(responder) = core.responders.get(&request) {
                    let _ = responder.body.send(Bytes::from(bytes));
                }
            }
            EndpointOutput::End { request } => {
                core.responders.remove(&request);
            }
            _ => {}
        }
    }

    /// Starts a session's CLI and the tasks that move its bytes.
    fn spawn(
        self: &Arc<Self>,
        core: &mut Core,
        session: SessionId,
        spec: &CliSpec,
    ) -> Result<(), String> {
        let path = self.claude.clone()?;
        let set = spec
            .env
            .iter()
            .cloned()
            .chain(self.options.env.iter().cloned());
        let remove = spec
            .env_remove
            .iter()
            .map(std::ffi::OsString::from)
            .chain(self.env_remove.iter().cloned());
        let mut process =
            CliProcess::spawn_command(&path, &spec.args, self.options.cwd.as_deref(), set, remove)
                .map_err(|e| e.to_string())?;
        let pid = process.pid();
        let (Some(mut stdin), Some(stdout)) = (process.take_stdin(), process.take_stdout()) else {
            return Err("the CLI's pipes are missing".to_owned());
        };
        let (lines, mut to_write) = mpsc::unbounded_channel::<Vec<u8>>();
        tokio::spawn(async move {
            while let Some(bytes) = to_write.recv().await {
                if stdin.write_all(&bytes).await.is_err() {
                    break;
                }
            }
            // Dropping stdin closes it: the CLI ends its session and exits.
        });
        let (closing, closed) = oneshot::channel();
        core.clis.insert(
            session,
            Cli {
                stdin: lines,
                _closing: closing,
                pid,
            },
        );
        tracing::info!(session, pid, "started a Claude Code session");
        let task = tokio::spawn(run_cli(self.clone(), session, process, stdout, closed));
        let mut tasks = self.tasks.lock().expect("tasks lock");
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
        Ok(())
    }
}

/// Reads a CLI's stdout into the endpoint until it ends, then reports its exit. Once the
/// endpoint has closed the session, the CLI has [`CLOSE_GRACE`] to exit by itself.
async fn run_cli(
    app: Arc<App>,
    session: SessionId,
    mut process: CliProcess,
    mut stdout: ChildStdout,
    mut closed: oneshot::Receiver<()>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut trace = Vec::new();
    let mut closing = false;
    let mut grace_passed = false;
    let grace = tokio::time::sleep(Duration::from_secs(86_400 * 365));
    tokio::pin!(grace);
    loop {
        tokio::select! {
            read = stdout.read(&mut buf) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tracing::enabled!(target: "ccwire::wire", tracing::Level::TRACE) {
                        trace_lines(&mut trace, &buf[..n]);
                    }
                    app.input(|endpoint, now| endpoint.handle_stdout(now, session, &buf[..n]));
                }
            },
            _ = &mut closed, if !closing => {
                closing = true;
                grace.as_mut().reset(tokio::time::Instant::now() + CLOSE_GRACE);
            }
            () = &mut grace, if closing => {
                grace_passed = true;
                break;
            }
        }
    }
    let grace = if grace_passed {
        Duration::ZERO
    } else {
        CLOSE_GRACE
    };
    let exit = match process.shutdown(grace).await {
        Ok(exit) => exit,
        Err(error) => {
            tracing::warn!(session, %error, "cannot wait for a Claude Code session");
            crate::process::ExitInfo {
                code: None,
                signal: None,
            }
        }
    };
    let stderr = process.stderr().text();
    tracing::info!(session, ?exit, stderr = %stderr.trim_end(), "a Claude Code session ended");
    app.input(|endpoint, now| {
        endpoint.handle_exit(now, session, exit.code, exit.signal, &stderr);
    });
    app.core.lock().expect("core lock").clis.remove(&session);
}

/// Logs whole stdout lines at TRACE (`ccwire::wire`), keeping a partial line for later.
fn trace_lines(partial: &mut Vec<u8>, bytes: &[u8]) {
    partial.extend_from_slice(bytes);
    let Some(end) = partial.iter().rposition(|b| *b == b'\n') else {
        return;
    };
    for line in partial[..end].split(|b| *b == b'\n') {
        tracing::trace!(target: "ccwire::wire", "< {}", String::from_utf8_lossy(line));
    }
    partial.drain(..=end);
}

/// Applies the endpoint's deadlines as they come.
async fn timers(app: Arc<App>) {
    loop {
        let next = app.core.lock().expect("core lock").endpoint.poll_timeout();
        let sleep = match next {
            Some((at, _)) => Duration::from_millis(at.saturating_sub(app.now())),
            None => Duration::from_secs(3600),
        };
        tokio::select! {
            () = tokio::time::sleep(sleep) => {}
            () = app.wake.notified() => continue,
        }
        app.input(|endpoint, now| endpoint.handle_timeout(now));
    }
}

/// A request the endpoint answers. Dropped before its response ended (the client went away),
/// it tells the endpoint.
struct InFlight {
    app: Arc<App>,
    id: RequestId,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let id = self.id;
        self.app.input(|endpoint, now| {
            if endpoint.request_session(id).is_some() {
                tracing::info!(request = id, "the client went away mid-response");
                endpoint.handle_client_gone(now, id);
            }
        });
        self.app
            .core
            .lock()
            .expect("core lock")
            .responders
            .remove(&id);
    }
}

async fn anthropic_messages(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    handle(app, Api::Anthropic, headers, body).await
}

async fn openai_completions(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    handle(app, Api::OpenAi, headers, body).await
}

async fn openai_responses(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    handle(app, Api::Responses, headers, body).await
}

/// Hands a request to the endpoint and relays its response.
async fn handle(
    app: Arc<App>,
    api: Api,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    let tenant = match authenticate(&app, &headers) {
        Ok(t) => t,
        Err(e) => return error_response(api, &e),
    };
    let body = match read_body(&app, body) {
        Ok(body) => body,
        Err(e) => return error_response(api, &e),
    };
    tracing::debug!(?api, "request");
    relay(&app, api, |endpoint, now, id| {
        endpoint.handle_request(now, id, api, &tenant, &body);
    })
    .await
}

/// Gives the endpoint a request (`start` hands it over under the request's id) and relays
/// the response it makes: a stream as it comes, or a whole answer.
async fn relay(
    app: &Arc<App>,
    api: Api,
    start: impl FnOnce(&mut Endpoint, u64, RequestId),
) -> Response {
    let id = app.next_request.fetch_add(1, Ordering::Relaxed);
    let (head, head_rx) = oneshot::channel();
    let (body_tx, mut body_rx) = mpsc::unbounded_channel();
    app.core.lock().expect("core lock").responders.insert(
        id,
        Responder {
            head: Some(head),
            body: body_tx,
        },
    );
    let in_flight = InFlight {
        app: app.clone(),
        id,
    };
    app.input(|endpoint, now| start(endpoint, now, id));
    let Ok((status, response_headers)) = head_rx.await else {
        let error = ApiError::new(ApiErrorKind::Api, "the gateway dropped the request");
        return error_response(api, &error);
    };
    let streaming = response_headers
        .iter()
        .any(|(n, v)| n == "content-type" && v == "text/event-stream");
    let body = if streaming {
        let stream = futures::stream::unfold((body_rx, in_flight), |(mut rx, in_flight)| async {
            let bytes = rx.recv().await?;
            Some((Ok::<_, Infallible>(bytes), (rx, in_flight)))
        });
        Body::from_stream(stream)
    } else {
        // A whole answer is sent at once: its body is already in the channel.
        let mut bytes = Vec::new();
        while let Some(piece) = body_rx.recv().await {
            bytes.extend_from_slice(&piece);
        }
        drop(in_flight);
        Body::from(bytes)
    };
    let mut response = Response::new(body);
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    for (name, value) in response_headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// `GET /v1/approvals`: the caller's pending approvals.
async fn approvals(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    match authenticate(&app, &headers) {
        Ok(tenant) => {
            let list = app
                .core
                .lock()
                .expect("core lock")
                .endpoint
                .approvals(&tenant);
            axum::Json(list).into_response()
        }
        Err(e) => error_response(Api::Anthropic, &e),
    }
}

/// `POST /v1/approvals/{id}`: a person's answer.
async fn answer_approval(
    State(app): State<Arc<App>>,
    axum::extract::Path(id): axum::extract::Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    let tenant = match authenticate(&app, &headers) {
        Ok(t) => t,
        Err(e) => return error_response(Api::Anthropic, &e),
    };
    let body = match read_body(&app, body) {
        Ok(body) => body,
        Err(e) => return error_response(Api::Anthropic, &e),
    };
    match app.input(|endpoint, now| endpoint.answer_approval(now, &tenant, &id, &body)) {
        Ok(decided) => axum::Json(decided).into_response(),
        Err(e) => error_response(Api::Anthropic, &e),
    }
}

/// `GET /v1/approvals/events`: the caller's approvals as server-sent events.
async fn approval_events(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    match authenticate(&app, &headers) {
        Ok(tenant) => {
            relay(&app, Api::Anthropic, |endpoint, now, id| {
                endpoint.handle_approval_events(now, id, &tenant);
            })
            .await
        }
        Err(e) => error_response(Api::Anthropic, &e),
    }
}

async fn models(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if let Err(e) = authenticate(&app, &headers) {
        return error_response(api_of("/v1/models", &headers), &e);
    }
    let list = app.core.lock().expect("core lock").endpoint.models();
    axum::Json(list).into_response()
}

/// `POST /admin/drain`: starts the drain `ccwire serve` does on SIGTERM; it exits once no CLI
/// is left.
async fn admin_drain(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let Some(admin) = &app.options.admin_key else {
        let error = ApiError::new(
            ApiErrorKind::Forbidden,
            "no admin key is set (--admin-key or CCWIRE_ADMIN_KEY)",
        );
        return error_response(Api::Anthropic, &error);
    };
    let keys = ApiKeys::new(std::slice::from_ref(admin));
    let bearer = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if let Err(e) = keys.authenticate(None, bearer) {
        return error_response(Api::Anthropic, &e);
    }
    let grace = app.options.drain_grace;
    let sessions = app.input(|endpoint, now| {
        endpoint.drain(now, grace.as_millis() as u64);
        endpoint.session_count()
    });
    app.drain_asked.notify_one();
    (
        StatusCode::ACCEPTED,
        axum::Json(
            json!({"draining": true, "sessions": sessions, "grace_seconds": grace.as_secs()}),
        ),
    )
        .into_response()
}

/// `GET /metrics`, for Prometheus; with keys set, a scraper sends one (`Authorization: Bearer`).
async fn metrics(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if let Err(e) = authenticate(&app, &headers) {
        return error_response(Api::Anthropic, &e);
    }
    let text = app.core.lock().expect("core lock").endpoint.metrics();
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

async fn health(State(app): State<Arc<App>>) -> Response {
    let (sessions, held, pool) = {
        let core = app.core.lock().expect("core lock");
        let e = &core.endpoint;
        (
            e.session_count() - e.pool_count(),
            e.held_count(),
            e.pool_count(),
        )
    };
    let cli = match &app.claude {
        Ok(path) => json!({"found": true, "path": path, "version": app.claude_version}),
        Err(error) => json!({"found": false, "error": error}),
    };
    axum::Json(json!({
        "status": "ok",
        "cli": cli,
        "sessions": sessions,
        "pool": pool,
        "held_tool_calls": held,
    }))
    .into_response()
}

async fn not_found(uri: axum::http::Uri, headers: HeaderMap) -> Response {
    error_response(
        api_of(uri.path(), &headers),
        &ApiError::new(
            ApiErrorKind::NotFound,
            format!("no endpoint {}", uri.path()),
        ),
    )
}

/// A seed for the endpoint's ids.
fn seed() -> u64 {
    let mut bytes = [0u8; 8];
    if getrandom::getrandom(&mut bytes).is_err() {
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        return t ^ u64::from(std::process::id()).rotate_left(32);
    }
    u64::from_le_bytes(bytes)
}

/// A running gateway.
pub struct Server {
    addr: SocketAddr,
    app: Arc<App>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// Binds and starts serving.
    ///
    /// # Errors
    /// A public address without keys, or a socket that cannot be bound.
    pub async fn start(addr: SocketAddr, options: GatewayOptions) -> Result<Server, ServeError> {
        if !addr.ip().is_loopback() && options.api_keys.is_empty() {
            let code_tools = options
                .engine
                .enabled_tools
                .iter()
                .filter(|t| CODE_TOOLS.contains(&t.as_str()))
                .cloned()
                .collect();
            return Err(ServeError::NoKeyOnPublicAddress { addr, code_tools });
        }
        let mut browser = BrowserPolicy::new(addr.ip().is_loopback());
        for origin in &options.allow_origins {
            browser.allow_origin(origin)?;
        }
        for host in &options.allow_hosts {
            browser.allow_host(host)?;
        }
        let inherited: Vec<String> = std::env::vars_os()
            .filter_map(|(k, _)| k.into_string().ok())
            .collect();
        let env_remove: Vec<std::ffi::OsString> =
            env_to_remove(inherited.iter().map(String::as_str), &options.env_remove)
                .into_iter()
                .map(Into::into)
                .collect();
        let upstream = upstream::Upstream::from_cli_env(&options.env, &env_remove);
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind { addr, source })?;
        let addr = listener.local_addr()?;
        let claude = find_cli(options.claude.as_deref()).map_err(|e| e.to_string());
        let claude_version = match &claude {
            Ok(path) => cli_version(path).await,
            Err(_) => None,
        };
        let endpoint = Endpoint::new(EndpointConfig {
            seed: seed(),
            unix_epoch_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            ..options.engine.clone()
        });
        let app = Arc::new(App {
            keys: ApiKeys::new(&options.api_keys),
            options,
            upstream,
            browser,
            env_remove,
            claude,
            claude_version,
            core: Mutex::new(Core {
                endpoint,
                clis: HashMap::new(),
                responders: HashMap::new(),
            }),
            tasks: Mutex::new(Vec::new()),
            next_request: AtomicU64::new(0),
            start: Instant::now(),
            wake: Notify::new(),
            drain_asked: Notify::new(),
        });
        tokio::spawn(timers(app.clone()));
        let api_routes = Router::new()
            .route("/v1/messages", post(anthropic_messages))
            .route("/v1/chat/completions", post(openai_completions))
            .route("/v1/responses", post(openai_responses))
            .route("/v1/messages/count_tokens", post(upstream::count_tokens))
            .route("/v1/approvals/{id}", post(answer_approval))
            .route_layer(middleware::from_fn(http::require_json));
        let router = Router::new()
            .merge(api_routes)
            .route("/v1/models", get(models))
            .route("/metrics", get(metrics))
            .route("/admin/drain", post(admin_drain))
            .route("/v1/approvals", get(approvals))
            .route("/v1/approvals/events", get(approval_events))
            .route("/health", get(health))
            .fallback(not_found)
            .layer(DefaultBodyLimit::max(app.options.max_body))
            .layer(middleware::from_fn_with_state(
                app.clone(),
                http::browser_guard,
            ))
            .with_state(app.clone());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        // Without TCP_NODELAY a response's last small write can wait for the client's
        // delayed acknowledgement (tens of milliseconds).
        let listener = listener.tap_io(|tcp| {
            if let Err(err) = tcp.set_nodelay(true) {
                tracing::debug!(%err, "cannot set TCP_NODELAY");
            }
        });
        let task = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await
        });
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
        let core = self.app.core.lock().expect("core lock");
        core.clis.values().map(|c| c.pid).collect()
    }

    /// Drains, then shuts down: new conversations get a 503 while running turns finish (held
    /// tool calls included, up to the drain grace), each CLI is closed once its turn is done,
    /// and the server stops when none is left.
    pub async fn drain(self) {
        let grace = self.app.options.drain_grace;
        self.app
            .input(|endpoint, now| endpoint.drain(now, grace.as_millis() as u64));
        // The endpoint closes what still runs at the end of the grace; this bounds the wait.
        let deadline = tokio::time::Instant::now() + grace + Duration::from_secs(10);
        while !self
            .app
            .core
            .lock()
            .expect("core lock")
            .endpoint
            .is_drained()
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.shutdown().await;
    }

    /// Stops accepting requests, closes every session (stdin closed, grace, then killed) and
    /// waits for the CLI processes to end.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        close_all(&self.app).await;
        let _ = tokio::time::timeout(Duration::from_secs(5), &mut self.task).await;
        self.task.abort();
    }
}

async fn close_all(app: &Arc<App>) {
    app.input(|endpoint, now| {
        let sessions: Vec<SessionId> = endpoint.sessions().collect();
        for session in sessions {
            endpoint.close(now, session);
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
    eprintln!("ccwire serve: listening on http://{}", server.addr());
    if let Err(err) = &server.app.claude {
        eprintln!("ccwire serve: warning: {err}");
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
        () = server.app.drain_asked.notified() => {}
    }
    eprintln!(
        "ccwire serve: draining (running turns have {} s to finish)",
        server.app.options.drain_grace.as_secs()
    );
    server.drain().await;
    eprintln!("ccwire serve: stopped");
    Ok(())
}

async fn cli_version(path: &std::path::Path) -> Option<String> {
    let output = tokio::time::timeout(
        Duration::from_secs(20),
        tokio::process::Command::new(path)
            .arg("--version")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .ok()?
    .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.split_whitespace().next().map(str::to_owned)
}
