//! `ccwire serve`: the Claude Code CLI behind the Anthropic Messages and OpenAI Chat Completions
//! APIs (GATEWAY.md). One live CLI process per conversation; client-defined tools go through an
//! in-process MCP server whose calls are held open until the client's next request brings the
//! results. Every decision (which session, which calls to answer, deadlines, response framing)
//! is made by [`ccwire_core::gateway`] and [`ccwire_core::api`]; this module does the sockets
//! and the processes.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use axum::Router;
use ccwire_core::api::guard::{self, BrowserHeaders, BrowserPolicy, InvalidAllowance};
use ccwire_core::api::response::{EncoderOptions, Outcome, ResponseEncoder};
use ccwire_core::api::{self, Api, ApiError, ApiErrorKind, ApiRequest};
use ccwire_core::conversation::Block;
use ccwire_core::gateway::{
    self, Action, CallAction, Gateway, GatewayConfig, Route, SessionId, SessionKind,
};
use ccwire_core::{Chunk, McpCallResult, McpServer, McpTool, UserMessage};
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, Notify};

use crate::claude::{find_cli, ClaudeOptions, SystemPrompt};
use crate::client::{Client, ClientHandle, ClientOptions, Event};

/// The name of the in-process MCP server that carries the client's tools.
pub const CLIENT_SERVER: &str = "client";

/// Variables that would let the CLI time out, defer or background a held call (HOLD.md §9).
const STRIPPED_ENV: &[&str] = &[
    "MCP_TOOL_TIMEOUT",
    "CLAUDE_CODE_SDK_MCP_TOOL_IDLE_TIMEOUT",
    "CLAUDE_AUTO_BACKGROUND_TASKS",
];

/// Built-in CLI tools that run code or change files on the gateway's machine.
pub const CODE_TOOLS: &[&str] = &[
    "Bash",
    "BashOutput",
    "KillShell",
    "Write",
    "Edit",
    "MultiEdit",
    "NotebookEdit",
];

/// The prefix of the gateway's own variables, which no CLI inherits.
const OWN_ENV_PREFIX: &str = "CCWIRE_";

/// How long an interrupted turn may take to settle before its session is closed.
const SETTLE_GRACE: Duration = Duration::from_secs(10);

/// Anthropic `ping` events on a quiet stream.
const PING_EVERY: Duration = Duration::from_secs(15);

/// How the gateway runs.
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    /// API keys; empty = no authentication (loopback only).
    pub api_keys: Vec<String>,
    /// The `claude` executable (found with [`find_cli`] when `None`).
    pub claude: Option<PathBuf>,
    /// Built-in CLI tools offered to the model, by name (`Read`, `Bash`, …); none by default.
    pub enabled_tools: Vec<String>,
    /// Deadlines of held calls and idle sessions.
    pub limits: GatewayConfig,
    /// The largest request body accepted, in bytes.
    pub max_body: usize,
    /// The most live sessions; a new conversation over the cap gets 429.
    pub max_sessions: usize,
    /// The CLI's working directory.
    pub cwd: Option<PathBuf>,
    /// The model used when a request names one the CLI cannot use (not a Claude model).
    pub default_model: Option<String>,
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
}

impl Default for GatewayOptions {
    fn default() -> Self {
        GatewayOptions {
            api_keys: Vec::new(),
            claude: None,
            enabled_tools: Vec::new(),
            limits: GatewayConfig::default(),
            max_body: 32 * 1024 * 1024,
            max_sessions: 64,
            cwd: None,
            default_model: None,
            env: Vec::new(),
            env_remove: Vec::new(),
            allow_origins: Vec::new(),
            allow_hosts: Vec::new(),
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

/// Commands to a session task.
enum SessionCmd {
    /// A request: answer these held calls, send this prompt, forward chunks to `sink`.
    Turn {
        answers: Vec<(String, McpCallResult)>,
        prompt: Option<UserMessage>,
        sink: mpsc::UnboundedSender<Chunk>,
    },
    /// Answer one held call (deadline).
    Answer(String, McpCallResult),
    /// The client went away mid-turn: interrupt, and close if the turn does not settle.
    Interrupt,
    /// The response is over: stop forwarding chunks.
    Detach,
    /// Close the session.
    Close,
}

struct LiveSession {
    commands: mpsc::UnboundedSender<SessionCmd>,
    pid: u32,
}

struct App {
    options: GatewayOptions,
    /// Where token counts come from, when the CLI's environment names an API key.
    upstream: Option<Upstream>,
    browser: BrowserPolicy,
    /// Inherited variables no CLI gets.
    env_remove: Vec<std::ffi::OsString>,
    claude: Result<PathBuf, String>,
    claude_version: Option<String>,
    gateway: Mutex<Gateway>,
    sessions: Mutex<HashMap<SessionId, LiveSession>>,
    /// Session tasks still running, to wait for at shutdown.
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    models: Mutex<Option<Value>>,
    start: Instant,
    wake: Notify,
}

impl App {
    fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn gateway(&self) -> std::sync::MutexGuard<'_, Gateway> {
        self.gateway.lock().expect("gateway lock")
    }
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
        let env_remove = removed_env(std::env::vars_os().map(|(k, _)| k), &options.env_remove);
        let upstream = Upstream::from_cli_env(&options.env, &env_remove);
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind { addr, source })?;
        let addr = listener.local_addr()?;
        let claude = find_cli(options.claude.as_deref()).map_err(|e| e.to_string());
        let claude_version = match &claude {
            Ok(path) => cli_version(path).await,
            Err(_) => None,
        };
        let app = Arc::new(App {
            gateway: Mutex::new(Gateway::new(options.limits)),
            options,
            upstream,
            browser,
            env_remove,
            claude,
            claude_version,
            sessions: Mutex::new(HashMap::new()),
            tasks: Mutex::new(Vec::new()),
            models: Mutex::new(None),
            start: Instant::now(),
            wake: Notify::new(),
        });
        tokio::spawn(deadlines(app.clone()));
        let api_routes = Router::new()
            .route("/v1/messages", post(anthropic_messages))
            .route("/v1/chat/completions", post(openai_completions))
            .route("/v1/responses", post(openai_responses))
            .route("/v1/messages/count_tokens", post(count_tokens))
            .route_layer(middleware::from_fn(require_json));
        let router = Router::new()
            .merge(api_routes)
            .route("/v1/models", get(models))
            .route("/health", get(health))
            .fallback(not_found)
            .layer(DefaultBodyLimit::max(app.options.max_body))
            .layer(middleware::from_fn_with_state(app.clone(), browser_guard))
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
        let sessions = self.app.sessions.lock().expect("sessions lock");
        sessions.values().map(|s| s.pid).collect()
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
    {
        let sessions = app.sessions.lock().expect("sessions lock");
        for session in sessions.values() {
            let _ = session.commands.send(SessionCmd::Close);
        }
    }
    let tasks: Vec<_> = std::mem::take(&mut *app.tasks.lock().expect("tasks lock"));
    for task in tasks {
        // The client escalates to SIGTERM and SIGKILL by itself; this bounds the wait.
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
    }
    eprintln!("ccwire serve: shutting down");
    server.shutdown().await;
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

/// Applies the gateway's deadlines as they come.
async fn deadlines(app: Arc<App>) {
    loop {
        let next = app.gateway().poll_timeout();
        let sleep = match next {
            Some((at, _)) => Duration::from_millis(at.saturating_sub(app.now())),
            None => Duration::from_secs(3600),
        };
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {}
            _ = app.wake.notified() => continue,
        }
        let actions = app.gateway().handle_timeout(app.now());
        let sessions = app.sessions.lock().expect("sessions lock");
        for action in actions {
            match action {
                Action::Answer {
                    session,
                    request_id,
                    result,
                } => {
                    tracing::info!(session, request_id, "a held tool call passed its deadline");
                    if let Some(live) = sessions.get(&session) {
                        let _ = live.commands.send(SessionCmd::Answer(request_id, result));
                    }
                }
                Action::Close { session } => {
                    tracing::info!(session, "closing an idle session");
                    if let Some(live) = sessions.get(&session) {
                        let _ = live.commands.send(SessionCmd::Close);
                    }
                }
            }
        }
    }
}

// ---- requests ---------------------------------------------------------------------------

/// The variables no CLI inherits: every `CCWIRE_*` one, those the operator named (a name or a
/// `PREFIX*`), and those that would let the CLI time out or background a held call.
fn removed_env(
    inherited: impl Iterator<Item = std::ffi::OsString>,
    named: &[String],
) -> Vec<std::ffi::OsString> {
    let matches = |name: &str| {
        name.starts_with(OWN_ENV_PREFIX)
            || named.iter().any(|n| match n.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => name == n,
            })
    };
    let mut removed: Vec<std::ffi::OsString> = STRIPPED_ENV
        .iter()
        .map(Into::into)
        .chain(named.iter().filter(|n| !n.ends_with('*')).map(Into::into))
        .collect();
    for name in inherited {
        if name.to_str().is_some_and(matches) && !removed.contains(&name) {
            removed.push(name);
        }
    }
    removed
}

/// The API whose error shape a path's errors take.
fn api_of(path: &str, headers: &HeaderMap) -> Api {
    let openai = path.starts_with("/v1/chat")
        || (path == "/v1/models" && !headers.contains_key("anthropic-version"));
    if path.starts_with("/v1/responses") {
        Api::Responses
    } else if openai {
        Api::OpenAi
    } else {
        Api::Anthropic
    }
}

/// A header's value; one that is not text reads as a value no check accepts.
fn header_text(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<&str> {
    headers
        .get(name)
        .map(|v| v.to_str().unwrap_or("(not text)"))
}

/// Refuses browser-borne requests the operator did not allow, before anything else runs;
/// answers CORS preflights and adds CORS headers for the allowed origins.
async fn browser_guard(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let browser = BrowserHeaders {
        host: header_text(headers, header::HOST)
            .or_else(|| request.uri().authority().map(|a| a.as_str())),
        origin: header_text(headers, header::ORIGIN),
        sec_fetch_site: header_text(headers, "sec-fetch-site"),
    };
    let api = api_of(request.uri().path(), headers);
    let origin = match app.browser.check(&browser) {
        Ok(origin) => origin.map(str::to_owned),
        Err(e) => {
            tracing::warn!(
                host = ?browser.host,
                origin = ?browser.origin,
                path = request.uri().path(),
                "refused a browser-borne request"
            );
            return error_response(api, &e);
        }
    };
    let preflight = request.method() == Method::OPTIONS
        && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let Some(origin) = origin else {
        return next.run(request).await;
    };
    if preflight {
        let method = header_text(headers, header::ACCESS_CONTROL_REQUEST_METHOD).unwrap_or("");
        let wanted = header_text(headers, header::ACCESS_CONTROL_REQUEST_HEADERS);
        return match app.browser.preflight(&origin, method, wanted) {
            Ok(cors) => with_headers(StatusCode::NO_CONTENT.into_response(), cors),
            Err(e) => error_response(api, &e),
        };
    }
    let response = next.run(request).await;
    with_headers(response, app.browser.cors_headers(&origin))
}

fn with_headers(mut response: Response, extra: Vec<(&'static str, String)>) -> Response {
    for (name, value) in extra {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().append(name, value);
        }
    }
    response
}

/// Refuses API requests whose body is not JSON (form posts and `text/plain` are what a web
/// page can send without a preflight), before the body is read.
async fn require_json(request: Request, next: Next) -> Response {
    let headers = request.headers();
    match guard::check_content_type(header_text(headers, header::CONTENT_TYPE)) {
        Ok(()) => next.run(request).await,
        Err(e) => error_response(api_of(request.uri().path(), headers), &e),
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

/// A new Responses API response id: `resp_` and 128 random bits.
fn new_response_id() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::getrandom(&mut bytes).is_err() {
        // No system randomness: unique within this process still.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        bytes[..8].copy_from_slice(&n.to_le_bytes());
        bytes[8..].copy_from_slice(&u64::from(std::process::id()).to_le_bytes());
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("resp_{hex}")
}

fn error_response(api: Api, error: &ApiError) -> Response {
    let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, axum::Json(error.body(api))).into_response();
    if error.kind == ApiErrorKind::RateLimit {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

/// The caller's tenant (its key), or a 401.
fn authenticate(app: &App, headers: &HeaderMap) -> Result<String, ApiError> {
    if app.options.api_keys.is_empty() {
        return Ok(String::new());
    }
    let given = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .or_else(|| {
            headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
        })
        .map(str::trim);
    match given {
        Some(key) if app.options.api_keys.iter().any(|k| k == key) => Ok(key.to_owned()),
        Some(_) => Err(ApiError::new(
            ApiErrorKind::Authentication,
            "invalid API key",
        )),
        None => Err(ApiError::new(
            ApiErrorKind::Authentication,
            "an API key is required (x-api-key or Authorization: Bearer)",
        )),
    }
}

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
    let parsed = match api {
        Api::Anthropic => api::anthropic::parse_request(&body),
        Api::OpenAi => api::openai::parse_request(&body),
        Api::Responses => api::responses::parse_request(&body),
    };
    let request = match parsed.and_then(|r| gateway::check_request(&r).map(|()| r)) {
        Ok(r) => r,
        Err(e) => return error_response(api, &e),
    };
    tracing::debug!(?api, model = %request.model, stream = request.stream, ignored = ?request.ignored, "request");
    // Fields accepted but not honoured, so a client can see what had no effect.
    let ignored = (!request.ignored.is_empty())
        .then(|| HeaderValue::from_str(&request.ignored.join(", ")).ok())
        .flatten();
    let mut response = match turn(app, api, tenant, request).await {
        Ok(response) => response,
        Err(e) => error_response(api, &e),
    };
    if let Some(ignored) = ignored {
        response.headers_mut().insert("x-ccwire-ignored", ignored);
    }
    response
}

fn read_body(
    app: &App,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                ApiErrorKind::RequestTooLarge,
                format!(
                    "the request body is larger than {} bytes",
                    app.options.max_body
                ),
            )
        } else {
            ApiError::new(ApiErrorKind::InvalidRequest, rejection.body_text())
        }
    })
}

/// `POST /v1/messages/count_tokens`: the upstream API's count when the CLI's environment
/// has an API key for it, else [`api::anthropic::estimate_input_tokens`]. The
/// `x-ccwire-token-count` header says which (`upstream` or `estimate`).
async fn count_tokens(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    let api = Api::Anthropic;
    if let Err(e) = authenticate(&app, &headers) {
        return error_response(api, &e);
    }
    let body = match read_body(&app, body) {
        Ok(body) => body,
        Err(e) => return error_response(api, &e),
    };
    let request = match api::anthropic::parse_count_tokens_request(&body) {
        Ok(request) => request,
        Err(e) => return error_response(api, &e),
    };
    let (tokens, source) = match &app.upstream {
        Some(upstream) => match upstream.count_tokens(&headers, body).await {
            Ok(tokens) => (tokens, "upstream"),
            Err(err) => {
                tracing::debug!(%err, "the upstream did not count the tokens; estimating");
                (
                    api::anthropic::estimate_input_tokens(&request.conversation),
                    "estimate",
                )
            }
        },
        None => (
            api::anthropic::estimate_input_tokens(&request.conversation),
            "estimate",
        ),
    };
    let mut response = axum::Json(json!({"input_tokens": tokens})).into_response();
    response
        .headers_mut()
        .insert("x-ccwire-token-count", HeaderValue::from_static(source));
    response
}

/// The Messages API the CLI talks to, as its environment names it.
struct Upstream {
    count_url: String,
    auth: (&'static str, String),
    http: reqwest::Client,
}

impl Upstream {
    /// From the variables the CLI gets (`env` over the gateway's own, less `removed`):
    /// `ANTHROPIC_BASE_URL` (default the public API) and `ANTHROPIC_API_KEY` or
    /// `ANTHROPIC_AUTH_TOKEN`. `None` without a key (a Claude login cannot count tokens).
    fn from_cli_env(env: &[(String, String)], removed: &[std::ffi::OsString]) -> Option<Upstream> {
        let var = |name: &str| {
            if let Some((_, value)) = env.iter().rev().find(|(k, _)| k == name) {
                return Some(value.clone());
            }
            if removed.iter().any(|r| r == name) {
                return None;
            }
            std::env::var(name).ok()
        };
        let non_empty = |v: Option<String>| v.filter(|v| !v.is_empty());
        let auth = match (
            non_empty(var("ANTHROPIC_API_KEY")),
            non_empty(var("ANTHROPIC_AUTH_TOKEN")),
        ) {
            (Some(key), _) => ("x-api-key", key),
            (None, Some(token)) => ("authorization", format!("Bearer {token}")),
            (None, None) => return None,
        };
        let base = non_empty(var("ANTHROPIC_BASE_URL"))
            .unwrap_or_else(|| "https://api.anthropic.com".to_owned());
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .ok()?;
        Some(Upstream {
            count_url: format!("{}/v1/messages/count_tokens", base.trim_end_matches('/')),
            auth,
            http,
        })
    }

    /// Asks the upstream to count the client's request, sent as the client sent it.
    async fn count_tokens(&self, headers: &HeaderMap, body: Bytes) -> Result<u64, String> {
        let mut request = self
            .http
            .post(&self.count_url)
            .header(header::CONTENT_TYPE, "application/json")
            .header(self.auth.0, &self.auth.1)
            .body(body);
        let version = headers
            .get("anthropic-version")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("2023-06-01");
        request = request.header("anthropic-version", version);
        if let Some(beta) = headers.get("anthropic-beta").and_then(|v| v.to_str().ok()) {
            request = request.header("anthropic-beta", beta);
        }
        let response = request.send().await.map_err(|e| e.to_string())?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("status {status}"));
        }
        let answer: Value = response.json().await.map_err(|e| e.to_string())?;
        answer["input_tokens"]
            .as_u64()
            .ok_or_else(|| format!("no input_tokens in {answer}"))
    }
}

fn user_message(blocks: &[Block]) -> UserMessage {
    UserMessage::blocks(gateway::prompt_content(blocks))
}

async fn turn(
    app: Arc<App>,
    api: Api,
    tenant: String,
    mut request: ApiRequest,
) -> Result<Response, ApiError> {
    // Responses API ids are the gateway's own: stored responses are found by them.
    let response_id = (api == Api::Responses).then(new_response_id);
    let previous_response_id = request.previous_response_id.clone();
    let store = request.store;
    let mut attempts = 0;
    let (session, kind, commands, answers, prompt) = loop {
        attempts += 1;
        let route = app.gateway().route_request(
            &tenant,
            &mut request,
            response_id.as_deref().unwrap_or_default(),
            app.now(),
        )?;
        match route {
            Route::Continue {
                session,
                answers,
                prompt,
            } => {
                let live = app
                    .sessions
                    .lock()
                    .expect("sessions lock")
                    .get(&session)
                    .map(|s| s.commands.clone());
                match live {
                    Some(commands) => {
                        break (session, SessionKind::Continued, commands, answers, prompt)
                    }
                    None if attempts < 2 => {
                        // The process ended since: forget it and rebuild from the history.
                        app.gateway().close(session);
                        continue;
                    }
                    None => {
                        app.gateway().close(session);
                        return Err(ApiError::new(
                            ApiErrorKind::Api,
                            "the conversation's Claude Code session ended",
                        ));
                    }
                }
            }
            Route::Start {
                session,
                kind,
                prompt,
                replaces,
            } => {
                if let Some(old) = replaces {
                    if let Some(live) = app.sessions.lock().expect("sessions lock").get(&old) {
                        let _ = live.commands.send(SessionCmd::Close);
                    }
                }
                let live_count = app.sessions.lock().expect("sessions lock").len();
                if live_count >= app.options.max_sessions {
                    app.gateway().close(session);
                    return Err(ApiError::new(
                        ApiErrorKind::RateLimit,
                        format!(
                            "the gateway runs its maximum of {} sessions; retry later",
                            app.options.max_sessions
                        ),
                    ));
                }
                match start_session(&app, session, &request).await {
                    Ok(commands) => break (session, kind, commands, Vec::new(), Some(prompt)),
                    Err(e) => {
                        app.gateway().close(session);
                        return Err(e);
                    }
                }
            }
        }
    };
    let (sink, chunks) = mpsc::unbounded_channel();
    let _ = commands.send(SessionCmd::Turn {
        answers,
        prompt: prompt.as_deref().map(user_message),
        sink,
    });
    let encoder = ResponseEncoder::new(EncoderOptions {
        api,
        stream: request.stream,
        model: request.model.clone(),
        id: response_id,
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        include_usage: request.include_usage,
        client_tools: gateway::client_tool_names(&request.conversation, CLIENT_SERVER),
        client_tool_prefix: None,
        previous_response_id,
        store,
        show_thinking: request.show_thinking,
    });
    let mut pending = PendingResponse {
        app: app.clone(),
        session,
        commands,
        chunks,
        encoder,
        settled: false,
    };
    let header_value = HeaderValue::from_static(kind.as_str());
    if !request.stream {
        while pending.encoder.outcome().is_none() {
            match pending.chunks.recv().await {
                Some(chunk) => {
                    pending.encoder.push(&chunk);
                }
                None => {
                    pending.encoder.fail(ended_error());
                }
            }
        }
        pending.settle();
        let body = pending.encoder.body();
        return match (body, pending.encoder.outcome()) {
            (Some(body), _) => {
                let mut response = axum::Json(body).into_response();
                response
                    .headers_mut()
                    .insert("x-ccwire-session", header_value);
                Ok(response)
            }
            (None, Some(Outcome::Failed(e))) => Err(e.clone()),
            (None, _) => Err(ended_error()),
        };
    }
    // Streaming: wait for the first frames, so a turn that fails at once gets an HTTP status.
    let mut first = Vec::new();
    while first.is_empty() && pending.encoder.outcome().is_none() {
        match pending.chunks.recv().await {
            Some(chunk) => first = pending.encoder.push(&chunk),
            None => first = pending.encoder.fail(ended_error()),
        }
    }
    if first.is_empty() {
        pending.settle();
        if let Some(Outcome::Failed(e)) = pending.encoder.outcome() {
            return Err(e.clone());
        }
    }
    if pending.encoder.outcome().is_some() {
        pending.settle();
    }
    let stream = futures::stream::unfold(
        (
            pending,
            Some(first),
            tokio::time::interval_at(tokio::time::Instant::now() + PING_EVERY, PING_EVERY),
        ),
        |(mut pending, first, mut ping)| async move {
            if let Some(first) = first {
                return Some((
                    Ok::<_, Infallible>(Bytes::from(first.concat())),
                    (pending, None, ping),
                ));
            }
            if pending.encoder.outcome().is_some() {
                pending.settle();
                return None;
            }
            loop {
                tokio::select! {
                    chunk = pending.chunks.recv() => {
                        let frames = match chunk {
                            Some(chunk) => pending.encoder.push(&chunk),
                            None => pending.encoder.fail(ended_error()),
                        };
                        if pending.encoder.outcome().is_some() {
                            pending.settle();
                        }
                        if !frames.is_empty() {
                            return Some((Ok(Bytes::from(frames.concat())), (pending, None, ping)));
                        }
                        if pending.encoder.outcome().is_some() {
                            return None;
                        }
                    }
                    _ = ping.tick() => {
                        let frame = pending.encoder.ping();
                        return Some((Ok(Bytes::from(frame)), (pending, None, ping)));
                    }
                }
            }
        },
    );
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-ccwire-session", header_value);
    Ok(response)
}

fn ended_error() -> ApiError {
    ApiError::new(
        ApiErrorKind::Api,
        "the Claude Code session ended before the response was complete",
    )
}

/// A response in flight. Dropped before it settles (the client went away), it interrupts the
/// turn.
struct PendingResponse {
    app: Arc<App>,
    session: SessionId,
    commands: mpsc::UnboundedSender<SessionCmd>,
    chunks: mpsc::UnboundedReceiver<Chunk>,
    encoder: ResponseEncoder,
    settled: bool,
}

impl PendingResponse {
    /// Records the outcome with the gateway once.
    fn settle(&mut self) {
        if self.settled {
            return;
        }
        self.settled = true;
        let _ = self.commands.send(SessionCmd::Detach);
        let now = self.app.now();
        match self.encoder.outcome() {
            Some(Outcome::ToolCalls | Outcome::Finished(_)) => {
                let calls = self
                    .encoder
                    .tool_calls()
                    .into_iter()
                    .map(|c| c.id.clone())
                    .collect();
                self.app
                    .gateway()
                    .response_done(self.session, &self.encoder.message(), calls, now);
            }
            _ => self.app.gateway().response_failed(self.session, now),
        }
        self.app.wake.notify_one();
    }
}

impl Drop for PendingResponse {
    fn drop(&mut self) {
        if !self.settled {
            tracing::info!(
                session = self.session,
                "the client went away mid-turn; interrupting"
            );
            // The conversation stays busy until the interrupted turn has ended (the session
            // task reports it), so the next request does not meet the old turn's end.
            self.settled = true;
            let _ = self.commands.send(SessionCmd::Interrupt);
        }
    }
}

// ---- sessions ---------------------------------------------------------------------------

async fn start_session(
    app: &Arc<App>,
    session: SessionId,
    request: &ApiRequest,
) -> Result<mpsc::UnboundedSender<SessionCmd>, ApiError> {
    let path = app
        .claude
        .clone()
        .map_err(|e| ApiError::new(ApiErrorKind::Api, e))?;
    let enabled = &app.options.enabled_tools;
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
    let mut allowed = enabled.clone();
    let mut servers = Vec::new();
    let mut sdk_servers = Vec::new();
    if !external.is_empty() {
        allowed.push(format!("mcp__{CLIENT_SERVER}"));
        let mut server = McpServer::new(CLIENT_SERVER);
        server.tools = external;
        servers.push(server);
        let config: Map<String, Value> = json!({"alwaysLoad": true, "disableAutoBackground": true})
            .as_object()
            .expect("an object")
            .clone();
        sdk_servers.push((CLIENT_SERVER.to_owned(), config));
    }
    let claude = ClaudeOptions {
        claude: Some(path),
        model: gateway::cli_model(&request.model, app.options.default_model.as_deref()),
        system_prompt: match &request.conversation.system {
            Some(system) => SystemPrompt::Custom(system.clone()),
            None => SystemPrompt::Preset,
        },
        tools: Some(enabled.clone()),
        allowed_tools: allowed,
        sdk_mcp_servers: sdk_servers,
        include_partial_messages: true,
        cwd: app.options.cwd.clone(),
        env: app
            .options
            .env
            .iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect(),
        env_remove: app.env_remove.clone(),
        extra_args: gateway::cli_settings_args(request)
            .into_iter()
            .map(Into::into)
            .collect(),
        ..ClaudeOptions::default()
    };
    let options = ClientOptions {
        claude,
        held_tool_servers: servers,
        ..ClientOptions::default()
    };
    let client = Client::connect(options).await.map_err(|e| {
        ApiError::new(
            ApiErrorKind::Api,
            format!("cannot start a Claude Code session: {e}"),
        )
    })?;
    {
        let mut models = app.models.lock().expect("models lock");
        if models.is_none() {
            *models = client.server_info().get("models").cloned();
        }
    }
    let pid = client.pid();
    let (commands, receiver) = mpsc::unbounded_channel();
    app.sessions.lock().expect("sessions lock").insert(
        session,
        LiveSession {
            commands: commands.clone(),
            pid,
        },
    );
    tracing::info!(session, pid, "started a Claude Code session");
    let task = tokio::spawn(run_session(app.clone(), session, client, receiver));
    let mut tasks = app.tasks.lock().expect("tasks lock");
    tasks.retain(|t| !t.is_finished());
    tasks.push(task);
    Ok(commands)
}

/// Owns one CLI process: hands its chunks to the response in flight and its client tool
/// calls to the gateway.
async fn run_session(
    app: Arc<App>,
    session: SessionId,
    mut client: Client,
    mut commands: mpsc::UnboundedReceiver<SessionCmd>,
) {
    let handle: ClientHandle = client.handle();
    let mut sink: Option<mpsc::UnboundedSender<Chunk>> = None;
    let mut settle_by: Option<tokio::time::Instant> = None;
    let mut commands_open = true;
    loop {
        tokio::select! {
            event = client.next_event() => match event {
                Some(Event::Chunk(chunk)) => {
                    tracing::trace!(session, chunk = %chunk.to_json(), "chunk");
                    on_chunk(&app, session, &handle, &chunk);
                    if matches!(chunk, Chunk::TurnComplete { .. }) && settle_by.take().is_some() {
                        app.gateway().response_failed(session, app.now());
                        app.wake.notify_one();
                    }
                    if let Some(s) = &sink {
                        if s.send(chunk).is_err() {
                            sink = None;
                        }
                    }
                }
                Some(Event::Exited { exit, stderr, .. }) => {
                    tracing::info!(session, ?exit, stderr = %stderr.trim_end(), "a Claude Code session ended");
                    if let Some(s) = &sink {
                        let _ = s.send(Chunk::ProcessExit { code: exit.code, signal: exit.signal });
                    }
                    break;
                }
                None => break,
            },
            command = commands.recv(), if commands_open => match command {
                Some(SessionCmd::Turn { answers, prompt, sink: s }) => {
                    sink = Some(s);
                    for (request_id, result) in answers {
                        handle.respond_tool(&request_id, result);
                    }
                    if let Some(prompt) = prompt {
                        // Queued now, in order after the answers; only the outcome is awaited.
                        let sent = handle.send(prompt);
                        tokio::spawn(async move {
                            if let Err(err) = sent.await {
                                tracing::warn!(%err, "cannot send a prompt");
                            }
                        });
                    }
                }
                Some(SessionCmd::Answer(request_id, result)) => handle.respond_tool(&request_id, result),
                Some(SessionCmd::Interrupt) => {
                    sink = None;
                    settle_by = Some(tokio::time::Instant::now() + SETTLE_GRACE);
                    let handle = handle.clone();
                    tokio::spawn(async move {
                        let _ = handle.interrupt().await;
                    });
                }
                Some(SessionCmd::Detach) => sink = None,
                Some(SessionCmd::Close) | None => {
                    commands_open = false;
                    handle.end_input();
                }
            },
            _ = sleep_until(settle_by), if settle_by.is_some() => {
                tracing::warn!(session, "an interrupted turn did not settle; closing the session");
                settle_by = None;
                commands_open = false;
                handle.end_input();
            }
        }
    }
    app.gateway().close(session);
    app.sessions.lock().expect("sessions lock").remove(&session);
    app.wake.notify_one();
}

fn on_chunk(app: &App, session: SessionId, handle: &ClientHandle, chunk: &Chunk) {
    match chunk {
        Chunk::McpToolCall {
            request_id,
            server,
            tool_use_id,
            ..
        } if server == CLIENT_SERVER => {
            let action =
                app.gateway()
                    .tool_call(session, request_id, tool_use_id.as_deref(), app.now());
            match action {
                CallAction::Answer(result) => handle.respond_tool(request_id, result),
                CallAction::Hold => app.wake.notify_one(),
            }
        }
        Chunk::McpToolCancelled {
            tool_use_id: Some(id),
            ..
        } => app.gateway().tool_cancelled(session, id),
        _ => {}
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

// ---- other endpoints --------------------------------------------------------------------

async fn models(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if let Err(e) = authenticate(&app, &headers) {
        return error_response(api_of("/v1/models", &headers), &e);
    }
    let mut ids: Vec<(String, String)> = Vec::new();
    if let Some(Value::Array(list)) = app.models.lock().expect("models lock").clone() {
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
    if let Some(default) = &app.options.default_model {
        if !ids.iter().any(|(id, _)| id == default) {
            ids.push((default.clone(), default.clone()));
        }
    }
    // One list that reads as both APIs' shapes.
    let data: Vec<Value> = ids
        .iter()
        .map(|(id, name)| {
            json!({
                "id": id, "type": "model", "object": "model", "display_name": name,
                "created_at": "1970-01-01T00:00:00Z", "created": 0, "owned_by": "anthropic",
            })
        })
        .collect();
    axum::Json(json!({
        "object": "list",
        "data": data,
        "has_more": false,
        "first_id": ids.first().map(|(id, _)| id),
        "last_id": ids.last().map(|(id, _)| id),
    }))
    .into_response()
}

async fn health(State(app): State<Arc<App>>) -> Response {
    let (sessions, held) = {
        let gateway = app.gateway();
        (gateway.session_count(), gateway.held_count())
    };
    let cli = match &app.claude {
        Ok(path) => json!({"found": true, "path": path, "version": app.claude_version}),
        Err(error) => json!({"found": false, "error": error}),
    };
    axum::Json(json!({
        "status": "ok",
        "cli": cli,
        "sessions": sessions,
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
