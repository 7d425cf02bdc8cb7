//! The gateway's HTTP face: which requests it accepts and where each goes.
//!
//! A host hands each HTTP request to the [`Gateway`] in two steps: the head
//! ([`admit`](Gateway::admit): browser-borne requests refused, CORS preflights answered, the
//! route, method, `Content-Type` and API key checked — before any body byte is read), then the
//! body ([`handle_http`](Gateway::handle_http): the API requests, models, metrics, approvals,
//! token counts, health and the admin drain, answered through the gateway's outputs like any
//! other response). So a host's HTTP server is one handler, and every host answers every path
//! alike.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::routes::Route;
use super::{Gateway, GatewayOutput, PreparedRequest, RequestId};
use crate::api::guard::{self, ApiKeys, BrowserHeaders, BrowserPolicy, InvalidAllowance};
use crate::api::{anthropic, Api, ApiError, ApiErrorKind};
use crate::gateway::CODE_TOOLS;
use crate::Timestamp;

/// How a gateway's HTTP face behaves.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// API keys; empty = no authentication (loopback only).
    pub api_keys: Vec<String>,
    /// The key `POST /admin/drain` and `/v1/keys` need (`Authorization: Bearer`); without one
    /// they are refused.
    pub admin_key: Option<String>,
    /// Tenant keys are made over `POST /v1/keys` (with the admin key and a session store):
    /// a key is needed even when `api_keys` is empty.
    pub managed_keys: bool,
    /// Web origins whose pages may use the gateway (`--allow-origin`); none by default.
    pub allow_origins: Vec<String>,
    /// Host names accepted in the `Host` header on a loopback listener besides `localhost` and
    /// loopback addresses (`--allow-host`).
    pub allow_hosts: Vec<String>,
    /// The largest request body accepted, in bytes.
    pub max_body: usize,
    /// How long running turns may take to finish when the gateway drains (ms).
    pub drain_grace_ms: u64,
    /// The address the host listens on, for error messages.
    pub listener: String,
    /// Whether that address is a loopback one: only a loopback listener may go without API
    /// keys, and its `Host` header must name it.
    pub loopback: bool,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            api_keys: Vec::new(),
            admin_key: None,
            managed_keys: false,
            allow_origins: Vec::new(),
            allow_hosts: Vec::new(),
            max_body: 32 * 1024 * 1024,
            drain_grace_ms: 30_000,
            listener: "127.0.0.1".to_owned(),
            loopback: true,
        }
    }
}

/// Why a gateway cannot run as configured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A listener other than loopback without an API key.
    #[error(
        "refusing to listen on {listener} without an API key{}: give --api-key or \
         CCWIRE_API_KEYS, or listen on 127.0.0.1",
        code_tools_reason(code_tools)
    )]
    NoKey {
        /// The listener's address.
        listener: String,
        /// The enabled tools that run code on the gateway's machine.
        code_tools: Vec<String>,
    },
    /// An `--allow-origin` or `--allow-host` value that cannot be allowed.
    #[error(transparent)]
    Allowance(#[from] InvalidAllowance),
    /// Keys made over the API without an admin key to make them with.
    #[error("--managed-keys needs an admin key (--admin-key, CCWIRE_ADMIN_KEY or --admin-key-file) to make keys with")]
    ManagedKeysWithoutAdmin,
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

/// A request's head as the host received it.
#[derive(Debug, Clone, Copy)]
pub struct HttpHead<'a> {
    /// `GET`, `POST`, …
    pub method: &'a str,
    /// The path, without the query.
    pub path: &'a str,
    /// The query, without its `?` (empty when there is none).
    pub query: &'a str,
    /// The headers, names in lower case (`Host` as the HTTP/2 `:authority` too); a value that
    /// is not text as any text no check accepts.
    pub headers: &'a [(&'a str, &'a str)],
}

impl HttpHead<'_> {
    /// A header's value (the first of its name).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }

    /// The API whose error shape the path's errors take.
    pub fn api(&self) -> Api {
        guard::api_of_path(self.path, self.header("anthropic-version").is_some())
    }
}

/// A whole response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// The status.
    pub status: u16,
    /// The headers.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

/// What [`Gateway::admit`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Answer with this and read nothing more: a refusal or a preflight's answer.
    Respond(HttpResponse),
    /// Read the body (at most [`Gateway::max_body`] bytes) and [`handle_http`](Gateway::handle_http)
    /// the request.
    Admit {
        /// The caller's tenant (its API key; empty without keys).
        tenant: String,
        /// Headers to add to the response's head (CORS, for an allowed origin).
        cors: Vec<(String, String)>,
    },
}

/// Why the host has no body to give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// It is larger than [`Gateway::max_body`].
    TooLarge,
    /// It could not be read (the reason).
    Unreadable(String),
    /// It did not arrive whole within the host's body timeout (answered with a 408).
    TimedOut {
        /// The timeout.
        after_ms: u64,
    },
}

impl Admission {
    /// As JSON (the npm package hands it out so): `{"respond": {status, headers, body}}` or
    /// `{"admit": {tenant, cors}}`.
    pub fn to_json(&self) -> Value {
        match self {
            Admission::Respond(r) => json!({"respond": {
                "status": r.status,
                "headers": r.headers,
                "body": String::from_utf8_lossy(&r.body),
            }}),
            Admission::Admit { tenant, cors } => json!({"admit": {"tenant": tenant, "cors": cors}}),
        }
    }
}

/// A request's body as [`Gateway::handle_http`] takes it: as read, or with an API request
/// already read and prepared by [`prepare`].
#[derive(Debug)]
pub struct Prepared<'a> {
    body: Result<&'a [u8], BodyError>,
    parsed: Option<Result<PreparedRequest, ApiError>>,
}

impl<'a> Prepared<'a> {
    /// A body with its request as [`prepare`] read and prepared it.
    pub fn new(
        body: Result<&'a [u8], BodyError>,
        parsed: Option<Result<PreparedRequest, ApiError>>,
    ) -> Prepared<'a> {
        Prepared { body, parsed }
    }
}

impl<'a> From<Result<&'a [u8], BodyError>> for Prepared<'a> {
    fn from(body: Result<&'a [u8], BodyError>) -> Prepared<'a> {
        Prepared { body, parsed: None }
    }
}

/// The routing key of a request to `path` that answers an approval (`/v1/approvals/{id}`;
/// see [`approval_route_key`](crate::gateway::approval_route_key)), for a host that forwards
/// it to the gateway whose CLI waits for the answer.
pub(super) fn approval_route(path: &str) -> Option<String> {
    match Route::parse(path)? {
        Route::Approval(id) => Some(crate::gateway::approval_route_key(id)),
        _ => None,
    }
}

/// The routing key of a request to `path` of the Managed Agents API (agents, environments),
/// if it is one: one per tenant, so that the gateways of a cluster serve each tenant's
/// resources from one of them (a digest; no key is in it).
pub(super) fn managed_route(path: &str, tenant: &str) -> Option<String> {
    super::managed::Route::parse(path)?;
    use sha2::Digest;
    let mut sha = sha2::Sha256::new();
    sha.update(b"ccwire-managed-v1\0");
    sha.update(tenant.as_bytes());
    Some(crate::conversation::hex(&sha.finalize()))
}

/// What the HTTP face knows: made once from the [`HttpConfig`].
#[derive(Debug, Clone)]
pub(super) struct Front {
    config: HttpConfig,
    browser: BrowserPolicy,
    pub(super) keys: ApiKeys,
    /// The keys made over `/v1/keys` and the labels and quotas set there, by key id.
    pub(super) made: BTreeMap<String, super::keys::KeyRecord>,
    /// The ids of the keys given at start.
    given: Vec<String>,
    /// Keys made over `/v1/keys` by this gateway since it started.
    pub(super) made_count: u64,
    /// The changes of `/v1/keys` the store has not kept yet, by request.
    pub(super) unkept: BTreeMap<RequestId, super::keys::Unkept>,
    admin: Option<ApiKeys>,
    /// What `GET /health` says of the CLI.
    pub(super) cli: Value,
    /// The model API's `count_tokens` and its key header.
    count_tokens: Option<(String, (&'static str, String))>,
    /// The estimates of `count_tokens` requests whose upstream answer is awaited.
    pub(super) counting: std::collections::BTreeMap<RequestId, u64>,
}

impl Front {
    /// The face `config` describes, of a gateway that enables `enabled_tools`.
    ///
    /// # Errors
    /// A listener other than loopback without API keys (naming the enabled tools that run
    /// code), or an origin or host name that cannot be allowed.
    pub(super) fn new(
        config: HttpConfig,
        enabled_tools: &[String],
        console: bool,
    ) -> Result<Front, ConfigError> {
        if config.managed_keys && config.admin_key.is_none() {
            return Err(ConfigError::ManagedKeysWithoutAdmin);
        }
        if !config.loopback && config.api_keys.is_empty() && !config.managed_keys {
            let code_tools = enabled_tools
                .iter()
                .filter(|t| CODE_TOOLS.contains(&t.as_str()))
                .cloned()
                .collect();
            return Err(ConfigError::NoKey {
                listener: config.listener.clone(),
                code_tools,
            });
        }
        let mut browser = BrowserPolicy::new(config.loopback);
        for origin in &config.allow_origins {
            browser.allow_origin(origin)?;
        }
        for host in &config.allow_hosts {
            browser.allow_host(host)?;
        }
        if console {
            // The console's page calls the gateway from the gateway's own origin.
            browser.allow_same_origin();
        }
        let mut keys = ApiKeys::new(&config.api_keys);
        if config.managed_keys {
            keys.require();
        }
        Ok(Front {
            keys,
            made: BTreeMap::new(),
            made_count: 0,
            given: config
                .api_keys
                .iter()
                .map(|k| super::tenant_id(k))
                .collect(),
            unkept: BTreeMap::new(),
            admin: config
                .admin_key
                .as_ref()
                .map(|k| ApiKeys::new(std::slice::from_ref(k))),
            browser,
            config,
            cli: Value::Null,
            count_tokens: None,
            counting: std::collections::BTreeMap::new(),
        })
    }

    /// Whether an admin key is set.
    pub(super) fn has_admin(&self) -> bool {
        self.admin.is_some()
    }

    /// The ids of the keys given at start.
    pub(super) fn given_ids(&self) -> &[String] {
        &self.given
    }

    /// Whether the request carries the admin key (`Authorization: Bearer`).
    pub(super) fn is_admin(&self, head: &HttpHead<'_>) -> bool {
        self.admin.as_ref().is_some_and(|admin| {
            admin
                .authenticate(None, head.header("authorization"))
                .is_ok()
        })
    }

    /// Whose view a request has: the operator's (`None`: the admin key, or any caller of a
    /// gateway without keys), or its key's tenant's.
    pub(super) fn scope(&self, head: &HttpHead<'_>) -> Result<Option<String>, ApiError> {
        if self.is_admin(head) || self.keys.is_empty() {
            Ok(None)
        } else {
            self.authenticate(head).map(Some)
        }
    }

    fn authenticate(&self, head: &HttpHead<'_>) -> Result<String, ApiError> {
        self.keys
            .authenticate(head.header("x-api-key"), head.header("authorization"))
    }
}

/// Reads and prepares the body of an [admitted](Gateway::admit) request to `path` for its
/// `tenant` when the path takes API requests (`None` for others): the work linear in its size,
/// which needs neither the gateway nor its lock ([`PreparedRequest`]). A host that shares the
/// gateway between threads runs it before taking its lock, on a thread of its own for a large
/// body, and gives the result to [`handle_http`](Gateway::handle_http) with [`Prepared::new`],
/// so one large request does not hold up the others.
pub fn prepare(path: &str, tenant: &str, body: &[u8]) -> Option<Result<PreparedRequest, ApiError>> {
    match Route::parse(path)? {
        Route::Turn(api) => Some(super::prepare_request(api, tenant, body)),
        _ => None,
    }
}

impl Gateway {
    /// What `GET /health` says of the CLI (the host finds it: path, version, or why not).
    pub fn set_cli(&mut self, cli: Value) {
        self.front.cli = cli;
    }

    /// Counts `count_tokens` requests with the Messages API the CLI talks to, as the variables
    /// it gets (`var`) name it: `ANTHROPIC_BASE_URL` (default the public API) with
    /// `ANTHROPIC_API_KEY` or `ANTHROPIC_AUTH_TOKEN`; the host sends what
    /// [`GatewayOutput::Fetch`] asks. Without a key (a Claude login cannot count tokens) the
    /// gateway's estimate answers.
    pub fn count_tokens_upstream(&mut self, var: impl Fn(&str) -> Option<String>) {
        let var = |name| var(name).filter(|v| !v.is_empty());
        let auth = match (var("ANTHROPIC_API_KEY"), var("ANTHROPIC_AUTH_TOKEN")) {
            (Some(key), _) => ("x-api-key", key),
            (None, Some(token)) => ("authorization", format!("Bearer {token}")),
            (None, None) => return,
        };
        let base = var("ANTHROPIC_BASE_URL").unwrap_or_else(|| "https://api.anthropic.com".into());
        let url = format!("{}/v1/messages/count_tokens", base.trim_end_matches('/'));
        self.front.count_tokens = Some((url, auth));
    }

    /// The largest body [`handle_http`](Self::handle_http) takes.
    pub fn max_body(&self) -> usize {
        self.front.config.max_body
    }

    /// Decides on a request from its head alone: browser-borne requests the operator did not
    /// allow are refused before anything else, CORS preflights of allowed origins answered,
    /// unknown paths (404), wrong methods (405), bodies that are not JSON (415), missing or
    /// wrong API keys (401) and a `Content-Length` over [`max_body`](Self::max_body) (413)
    /// refused. Changes nothing.
    pub fn admit(&self, head: &HttpHead<'_>) -> Admission {
        let front = &self.front;
        let api = head.api();
        let browser = BrowserHeaders {
            host: head.header("host"),
            origin: head.header("origin"),
            sec_fetch_site: head.header("sec-fetch-site"),
        };
        let origin = match front.browser.check(&browser) {
            Ok(origin) => origin,
            Err(e) => return Admission::Respond(error_response(api, &e, Vec::new())),
        };
        let cors: Vec<(String, String)> = origin
            .map(|o| front.browser.cors_headers(o))
            .unwrap_or_default()
            .into_iter()
            .map(|(n, v)| (n.to_owned(), v))
            .collect();
        let refuse = |e: ApiError| Admission::Respond(error_response(api, &e, cors.clone()));
        if let (Some(origin), "OPTIONS", Some(method)) = (
            origin,
            head.method,
            head.header("access-control-request-method"),
        ) {
            let wanted = head.header("access-control-request-headers");
            return match front.browser.preflight(origin, method, wanted) {
                Ok(headers) => Admission::Respond(HttpResponse {
                    status: 204,
                    headers: headers
                        .into_iter()
                        .map(|(n, v)| (n.to_owned(), v))
                        .collect(),
                    body: Vec::new(),
                }),
                // A refused preflight says nothing to the page.
                Err(e) => Admission::Respond(error_response(api, &e, Vec::new())),
            };
        }
        let Some(route) = Route::parse(head.path) else {
            let error = super::routes::no_endpoint(head.path);
            return refuse(error);
        };
        if !route.methods().contains(&head.method) {
            let allow = route.methods().join(", ");
            let error = ApiError::new(
                ApiErrorKind::MethodNotAllowed,
                format!("{} takes {allow}, not {}", head.path, head.method),
            );
            let mut response = error_response(api, &error, cors);
            response.headers.push(("allow".to_owned(), allow));
            return Admission::Respond(response);
        }
        if route.json_body() && head.method == "POST" {
            if let Err(e) = guard::check_content_type(head.header("content-type")) {
                return refuse(e);
            }
        }
        let tenant = if route.needs_key() {
            match front.authenticate(head) {
                Ok(tenant) => tenant,
                Err(e) => return refuse(e),
            }
        } else {
            String::new()
        };
        // A body declared larger than the gateway takes is refused from the head, at once:
        // the connection cannot carry another request (the body may still come).
        let declared = head
            .header("content-length")
            .and_then(|l| l.trim().parse::<u64>().ok());
        if declared.is_some_and(|length| length > front.config.max_body as u64) {
            let message = format!(
                "the request body is larger than {} bytes",
                front.config.max_body
            );
            let error = ApiError::new(ApiErrorKind::RequestTooLarge, message);
            let mut headers = cors;
            headers.push(("connection".to_owned(), "close".to_owned()));
            return Admission::Respond(error_response(api, &error, headers));
        }
        Admission::Admit { tenant, cors }
    }

    /// Handles an [admitted](Self::admit) request with its body (read, or
    /// [prepared](prepare)): the outputs for `request` answer it (a body that could not be
    /// read gets a 413, 408 or 400). A `count_tokens` request with an upstream asks the host
    /// to send it ([`GatewayOutput::Fetch`]); an accepted `POST /admin/drain` starts the
    /// drain and says so ([`GatewayOutput::DrainRequested`]).
    pub fn handle_http<'a>(
        &mut self,
        now: Timestamp,
        request: RequestId,
        head: &HttpHead<'_>,
        tenant: &str,
        body: impl Into<Prepared<'a>>,
    ) {
        self.now = now;
        let api = head.api();
        let Prepared { body, parsed } = body.into();
        let body = match body {
            Ok(body) => body,
            Err(BodyError::TooLarge) => {
                let message = format!(
                    "the request body is larger than {} bytes",
                    self.front.config.max_body
                );
                let error = ApiError::new(ApiErrorKind::RequestTooLarge, message);
                return self.respond_error(request, api, &[], &error);
            }
            Err(BodyError::Unreadable(reason)) => {
                let error = ApiError::new(ApiErrorKind::InvalidRequest, reason);
                return self.respond_error(request, api, &[], &error);
            }
            Err(BodyError::TimedOut { after_ms }) => {
                let message = format!(
                    "the request body did not arrive within {} s",
                    after_ms.div_ceil(1000)
                );
                let error = ApiError::new(ApiErrorKind::Timeout, message);
                // The rest of the body may still come: the connection cannot carry another
                // request.
                let close = [("connection".to_owned(), "close".to_owned())];
                return self.respond_error(request, api, &close, &error);
            }
        };
        let Some(route) = Route::parse(head.path) else {
            let error = super::routes::no_endpoint(head.path);
            return self.respond_error(request, api, &[], &error);
        };
        match route {
            Route::Turn(api) => {
                let parsed = parsed.unwrap_or_else(|| super::prepare_request(api, tenant, body));
                self.handle_prepared(now, request, api, tenant, parsed);
            }
            Route::Managed(route) => self.handle_managed(request, route, head, tenant, body),
            Route::CountTokens => self.count_tokens(request, head, body),
            Route::Models => {
                let models = self.models();
                self.respond_json(request, 200, &models);
            }
            // A tenant's key sees and answers its own approvals, the operator's every one.
            Route::Approvals | Route::ApprovalEvents | Route::Approval(_) => {
                let scope = match self.front.scope(head) {
                    Ok(scope) => scope,
                    Err(e) => return self.respond_error(request, api, &[], &e),
                };
                let scope = scope.as_deref();
                match route {
                    Route::Approvals => {
                        let list = self.approvals_in(scope);
                        self.respond_json(request, 200, &list);
                    }
                    Route::Approval(id) => match self.answer_approval_in(now, scope, id, body) {
                        Ok(decided) => self.respond_json(request, 200, &decided),
                        Err(e) => self.respond_error(request, api, &[], &e),
                    },
                    _ => self.approval_events_in(now, request, scope),
                }
            }
            Route::Metrics => self.handle_metrics(request, head),
            Route::Usage => self.handle_usage(request, head),
            Route::Keys | Route::Key(_) => {
                let id = match route {
                    Route::Key(id) => Some(id),
                    _ => None,
                };
                self.handle_keys(now, request, head, id, body);
            }
            Route::Health => self.handle_health(request, head),
            Route::Drain => self.admin_drain(now, request, head),
            Route::Console(route) => self.handle_console(request, route, head),
        }
    }

    /// `GET /metrics`: the whole gateway's series for the operator, a tenant's own for its key.
    fn handle_metrics(&mut self, request: RequestId, head: &HttpHead<'_>) {
        let text = match self.front.scope(head) {
            Ok(None) => self.metrics(),
            Ok(Some(tenant)) => self.tenant_metrics(&tenant),
            Err(e) => return self.respond_error(request, head.api(), &[], &e),
        }
        .into_bytes();
        let content_type = "text/plain; version=0.0.4; charset=utf-8";
        let headers = vec![("content-type".to_owned(), content_type.to_owned())];
        self.respond_whole(request, 200, headers, text);
    }

    /// `GET /health`: the status, with details for a key.
    fn handle_health(&mut self, request: RequestId, head: &HttpHead<'_>) {
        // Draining, load balancers must stop sending new conversations here.
        let (status, code) = if self.is_draining() {
            ("draining", 503)
        } else {
            ("ok", 200)
        };
        // The operator (the admin key, or any caller of a gateway without keys) sees
        // the whole gateway; a tenant its own conversations and the CLI's release; a
        // caller without a key the status alone.
        let whole = self.front.is_admin(head) || self.front.keys.is_empty();
        let health = if whole {
            json!({
                "status": status,
                "cli": self.front.cli,
                "sessions": self.session_count() - self.pool_count(),
                "pool": self.pool_count(),
                "held_tool_calls": self.held_count(),
            })
        } else if let Ok(tenant) = self.front.authenticate(head) {
            let (sessions, held) = self.tenant_counts(&tenant);
            let cli: serde_json::Map<String, Value> = ["found", "version"]
                .into_iter()
                .filter_map(|k| Some((k.to_owned(), self.front.cli.get(k)?.clone())))
                .collect();
            json!({
                "status": status,
                "cli": cli,
                "sessions": sessions,
                "held_tool_calls": held,
            })
        } else {
            json!({"status": status})
        };
        self.respond_json(request, code, &health);
    }

    /// `POST /v1/messages/count_tokens`: the upstream's count when there is one to ask, else
    /// the estimate.
    fn count_tokens(&mut self, request: RequestId, head: &HttpHead<'_>, body: &[u8]) {
        let parsed = match anthropic::parse_count_tokens_request(body) {
            Ok(parsed) => parsed,
            Err(e) => return self.respond_error(request, Api::Anthropic, &[], &e),
        };
        let estimate = anthropic::estimate_input_tokens(&parsed.conversation);
        let Some((url, (name, value))) = &self.front.count_tokens else {
            return self.token_count(request, estimate, None);
        };
        let version = head.header("anthropic-version").unwrap_or("2023-06-01");
        let mut headers = vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ((*name).to_owned(), value.clone()),
            ("anthropic-version".to_owned(), version.to_owned()),
        ];
        if let Some(beta) = head.header("anthropic-beta") {
            headers.push(("anthropic-beta".to_owned(), beta.to_owned()));
        }
        self.front.counting.insert(request, estimate);
        self.outputs.push_back(GatewayOutput::Fetch {
            request,
            url: url.clone(),
            headers,
            body: body.to_vec(),
        });
    }

    /// The answer to an [`GatewayOutput::Fetch`]: the body of the upstream's answer when it
    /// answered with success, else `None` (no answer, an error status, a network failure).
    /// The request gets the upstream's count when that body has one, else the estimate; the
    /// `x-ccwire-token-count` header says which (`upstream` or `estimate`). An answer for a
    /// request whose client went away is dropped.
    pub fn handle_fetched(&mut self, now: Timestamp, request: RequestId, answer: Option<&[u8]>) {
        self.now = now;
        if let Some(estimate) = self.front.counting.remove(&request) {
            self.token_count(request, estimate, answer);
        }
    }

    fn token_count(&mut self, request: RequestId, estimate: u64, upstream: Option<&[u8]>) {
        let counted = upstream
            .and_then(|body| serde_json::from_slice::<Value>(body).ok())
            .and_then(|answer| answer.get("input_tokens").and_then(Value::as_u64));
        let (tokens, source) = counted.map_or((estimate, "estimate"), |n| (n, "upstream"));
        let headers = vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("x-ccwire-token-count".to_owned(), source.to_owned()),
        ];
        let body = json!({"input_tokens": tokens}).to_string().into_bytes();
        self.respond_whole(request, 200, headers, body);
    }

    /// `POST /admin/drain`, with the admin key.
    fn admin_drain(&mut self, now: Timestamp, request: RequestId, head: &HttpHead<'_>) {
        let allowed = match &self.front.admin {
            None => Err(ApiError::new(
                ApiErrorKind::Forbidden,
                "no admin key is set (--admin-key or CCWIRE_ADMIN_KEY)",
            )),
            Some(admin) => admin.authenticate(None, head.header("authorization")),
        };
        if let Err(e) = allowed {
            return self.respond_error(request, Api::Anthropic, &[], &e);
        }
        let grace_ms = self.front.config.drain_grace_ms;
        self.drain(now, grace_ms);
        let answer = json!({
            "draining": true,
            "sessions": self.session_count(),
            "grace_seconds": grace_ms / 1000,
        });
        self.respond_json(request, 202, &answer);
        self.outputs.push_back(GatewayOutput::DrainRequested);
    }
}

/// An error's whole response in `api`'s shape (`retry-after` when it says when), with `extra`
/// headers.
pub(super) fn error_response(
    api: Api,
    error: &ApiError,
    extra: Vec<(String, String)>,
) -> HttpResponse {
    let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
    if let Some(seconds) = error.retry_after {
        headers.push(("retry-after".to_owned(), seconds.to_string()));
    }
    headers.extend(extra);
    HttpResponse {
        status: error.status(),
        headers,
        body: error.body(api).to_string().into_bytes(),
    }
}
