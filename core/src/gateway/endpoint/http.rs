//! The gateway's HTTP face: which requests it accepts and where each goes.
//!
//! An [`HttpFront`] stands before an [`Endpoint`]. A host hands it each request in two steps:
//! the head ([`admit`](HttpFront::admit): browser-borne requests refused, CORS preflights
//! answered, the route, method, `Content-Type` and API key checked — before any body byte is
//! read), then the body ([`handle`](HttpFront::handle): the API requests, models, metrics,
//! approvals, health and the admin drain, answered through the endpoint's outputs like any
//! other response). So a host's HTTP server is one handler, and every host answers every path
//! alike.
//!
//! ```text
//! match front.admit(&head) {
//!     Admission::Respond(response) => send it,
//!     Admission::Admit { tenant, cors } => {
//!         body = read at most front.max_body() bytes
//!         match front.handle(&mut endpoint, now, id, &head, &tenant, body) {
//!             Routed::Endpoint => {}
//!             Routed::CountTokens { estimate, upstream } => send `upstream` (if any), then
//!                 front.token_count(&mut endpoint, id, estimate, its answer's body),
//!             Routed::Drain => exit once endpoint.is_drained(),
//!         }
//!         relay the outputs of request id, with `cors` added to its head
//!     }
//! }
//! ```

use serde_json::{json, Value};

use super::{Endpoint, PreparedRequest, RequestId};
use crate::api::guard::{self, ApiKeys, BrowserHeaders, BrowserPolicy, InvalidAllowance};
use crate::api::{anthropic, Api, ApiError, ApiErrorKind};
use crate::gateway::CODE_TOOLS;
use crate::Timestamp;

/// How a gateway's HTTP face behaves.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// API keys; empty = no authentication (loopback only).
    pub api_keys: Vec<String>,
    /// The key `POST /admin/drain` needs (`Authorization: Bearer`); without one it is refused.
    pub admin_key: Option<String>,
    /// Web origins whose pages may use the gateway (`--allow-origin`); none by default.
    pub allow_origins: Vec<String>,
    /// Host names accepted in the `Host` header on a loopback listener besides `localhost` and
    /// loopback addresses (`--allow-host`).
    pub allow_hosts: Vec<String>,
    /// The largest request body accepted, in bytes.
    pub max_body: usize,
    /// How long running turns may take to finish when the gateway drains (ms).
    pub drain_grace_ms: u64,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            api_keys: Vec::new(),
            admin_key: None,
            allow_origins: Vec::new(),
            allow_hosts: Vec::new(),
            max_body: 32 * 1024 * 1024,
            drain_grace_ms: 30_000,
        }
    }
}

/// Why a gateway must not listen as configured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontError {
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

/// What [`HttpFront::admit`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Answer with this and read nothing more: a refusal or a preflight's answer.
    Respond(HttpResponse),
    /// Read the body (at most [`HttpFront::max_body`] bytes) and [`handle`](HttpFront::handle)
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
    /// It is larger than [`HttpFront::max_body`].
    TooLarge,
    /// It could not be read (the reason).
    Unreadable(String),
    /// It did not arrive whole within the host's body timeout (answered with a 408).
    TimedOut {
        /// The timeout.
        after_ms: u64,
    },
}

/// An HTTP request the host sends for the gateway: `POST` the client's body to `url` with
/// these headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outbound {
    /// Where.
    pub url: String,
    /// The headers.
    pub headers: Vec<(String, String)>,
}

/// What the host does besides relaying the request's outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Routed {
    /// Nothing: the endpoint answers.
    Endpoint,
    /// `POST /v1/messages/count_tokens`: send `upstream` (when there is one) and give its
    /// answer to [`HttpFront::token_count`].
    CountTokens {
        /// The gateway's own estimate, the answer without an upstream count.
        estimate: u64,
        /// The model API's count request, when the CLI's environment has a key for it.
        upstream: Option<Outbound>,
    },
    /// `POST /admin/drain` was accepted: the endpoint drains; the host exits once it
    /// [`is_drained`](Endpoint::is_drained).
    Drain,
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

impl Routed {
    /// As JSON: `{"type": "endpoint" | "drain"}` or `{"type": "count_tokens", estimate,
    /// upstream: {url, headers} | null}`.
    pub fn to_json(&self) -> Value {
        match self {
            Routed::Endpoint => json!({"type": "endpoint"}),
            Routed::Drain => json!({"type": "drain"}),
            Routed::CountTokens { estimate, upstream } => json!({
                "type": "count_tokens",
                "estimate": estimate,
                "upstream": upstream.as_ref().map(|u| json!({"url": u.url, "headers": u.headers})),
            }),
        }
    }
}

/// The routes: path, method, whether the body must be JSON, whether the caller needs an API
/// key. `/v1/approvals/{id}` is matched apart.
const ROUTES: &[(&str, &str, bool, bool)] = &[
    ("/v1/messages", "POST", true, true),
    ("/v1/chat/completions", "POST", true, true),
    ("/v1/responses", "POST", true, true),
    ("/v1/messages/count_tokens", "POST", true, true),
    ("/v1/models", "GET", false, true),
    ("/v1/approvals", "GET", false, true),
    ("/v1/approvals/events", "GET", false, true),
    // A tenant's key sees its own series, the admin key all (checked by the route itself).
    ("/metrics", "GET", false, false),
    // Status for anyone; details with a key.
    ("/health", "GET", false, false),
    // The admin key is checked by the route itself.
    ("/admin/drain", "POST", false, false),
];

/// The route of a path: its method, JSON body, key.
fn route(path: &str) -> Option<(&'static str, bool, bool)> {
    if let Some(&(_, method, json, key)) = ROUTES.iter().find(|r| r.0 == path) {
        return Some((method, json, key));
    }
    approval_id(path).map(|_| ("POST", true, true))
}

/// The API of a path that takes API requests.
fn api_of(path: &str) -> Option<Api> {
    match path {
        "/v1/messages" => Some(Api::Anthropic),
        "/v1/chat/completions" => Some(Api::OpenAi),
        "/v1/responses" => Some(Api::Responses),
        _ => None,
    }
}

/// A request's body as [`HttpFront::handle`] takes it: as read, or with an API request
/// already read and prepared by [`HttpFront::parse_body`].
#[derive(Debug)]
pub struct Prepared<'a> {
    body: Result<&'a [u8], BodyError>,
    parsed: Option<Result<PreparedRequest, ApiError>>,
}

impl<'a> Prepared<'a> {
    /// A body with its request as [`HttpFront::parse_body`] read and prepared it.
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

/// The `{id}` of `/v1/approvals/{id}`.
fn approval_id(path: &str) -> Option<&str> {
    let id = path.strip_prefix("/v1/approvals/")?;
    (!id.is_empty() && !id.contains('/') && id != "events").then_some(id)
}

/// The HTTP face of a gateway (see the module docs).
#[derive(Debug, Clone)]
pub struct HttpFront {
    config: HttpConfig,
    browser: BrowserPolicy,
    keys: ApiKeys,
    admin: Option<ApiKeys>,
    cli: Value,
    /// The model API's `count_tokens` and its key header.
    count_tokens: Option<(String, (&'static str, String))>,
}

impl HttpFront {
    /// The face of a gateway on `listener` (loopback or not) that enables `enabled_tools`.
    ///
    /// # Errors
    /// A listener other than loopback without API keys (naming the enabled tools that run
    /// code), or an origin or host name that cannot be allowed.
    pub fn new(
        config: HttpConfig,
        listener: &str,
        loopback: bool,
        enabled_tools: &[String],
    ) -> Result<HttpFront, FrontError> {
        if !loopback && config.api_keys.is_empty() {
            let code_tools = enabled_tools
                .iter()
                .filter(|t| CODE_TOOLS.contains(&t.as_str()))
                .cloned()
                .collect();
            return Err(FrontError::NoKey {
                listener: listener.to_owned(),
                code_tools,
            });
        }
        let mut browser = BrowserPolicy::new(loopback);
        for origin in &config.allow_origins {
            browser.allow_origin(origin)?;
        }
        for host in &config.allow_hosts {
            browser.allow_host(host)?;
        }
        Ok(HttpFront {
            keys: ApiKeys::new(&config.api_keys),
            admin: config
                .admin_key
                .as_ref()
                .map(|k| ApiKeys::new(std::slice::from_ref(k))),
            browser,
            config,
            cli: Value::Null,
            count_tokens: None,
        })
    }

    /// What `GET /health` says of the CLI (the host finds it: path, version, or why not).
    pub fn set_cli(&mut self, cli: Value) {
        self.cli = cli;
    }

    /// Counts `count_tokens` requests with the Messages API the CLI talks to, as the variables
    /// it gets (`var`) name it: `ANTHROPIC_BASE_URL` (default the public API) with
    /// `ANTHROPIC_API_KEY` or `ANTHROPIC_AUTH_TOKEN`. Without a key (a Claude login cannot
    /// count tokens) the gateway's estimate answers.
    pub fn count_tokens_upstream(&mut self, var: impl Fn(&str) -> Option<String>) {
        let var = |name| var(name).filter(|v| !v.is_empty());
        let auth = match (var("ANTHROPIC_API_KEY"), var("ANTHROPIC_AUTH_TOKEN")) {
            (Some(key), _) => ("x-api-key", key),
            (None, Some(token)) => ("authorization", format!("Bearer {token}")),
            (None, None) => return,
        };
        let base = var("ANTHROPIC_BASE_URL").unwrap_or_else(|| "https://api.anthropic.com".into());
        let url = format!("{}/v1/messages/count_tokens", base.trim_end_matches('/'));
        self.count_tokens = Some((url, auth));
    }

    /// The largest body [`handle`](Self::handle) takes.
    pub fn max_body(&self) -> usize {
        self.config.max_body
    }

    /// Decides on a request from its head alone: browser-borne requests the operator did not
    /// allow are refused before anything else, CORS preflights of allowed origins answered,
    /// unknown paths (404), wrong methods (405), bodies that are not JSON (415) and missing or
    /// wrong API keys (401) refused.
    pub fn admit(&self, head: &HttpHead<'_>) -> Admission {
        let api = head.api();
        let browser = BrowserHeaders {
            host: head.header("host"),
            origin: head.header("origin"),
            sec_fetch_site: head.header("sec-fetch-site"),
        };
        let origin = match self.browser.check(&browser) {
            Ok(origin) => origin,
            Err(e) => return Admission::Respond(error_response(api, &e, Vec::new())),
        };
        let cors: Vec<(String, String)> = origin
            .map(|o| self.browser.cors_headers(o))
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
            return match self.browser.preflight(origin, method, wanted) {
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
        let Some((method, json, key)) = route(head.path) else {
            let error = ApiError::new(ApiErrorKind::NotFound, format!("no endpoint {}", head.path));
            return refuse(error);
        };
        if head.method != method {
            let error = ApiError::new(
                ApiErrorKind::MethodNotAllowed,
                format!("{} takes {method}, not {}", head.path, head.method),
            );
            let mut response = error_response(api, &error, cors);
            response
                .headers
                .push(("allow".to_owned(), method.to_owned()));
            return Admission::Respond(response);
        }
        if json {
            if let Err(e) = guard::check_content_type(head.header("content-type")) {
                return refuse(e);
            }
        }
        let tenant = if key {
            match self.authenticate(head) {
                Ok(tenant) => tenant,
                Err(e) => return refuse(e),
            }
        } else {
            String::new()
        };
        Admission::Admit { tenant, cors }
    }

    /// Whether the request carries the admin key (`Authorization: Bearer`).
    fn is_admin(&self, head: &HttpHead<'_>) -> bool {
        self.admin.as_ref().is_some_and(|admin| {
            admin
                .authenticate(None, head.header("authorization"))
                .is_ok()
        })
    }

    fn authenticate(&self, head: &HttpHead<'_>) -> Result<String, ApiError> {
        self.keys
            .authenticate(head.header("x-api-key"), head.header("authorization"))
    }

    /// Reads and prepares the body of an [admitted](Self::admit) request for its `tenant` when
    /// its path takes API requests (`None` for others): the work linear in its size, which
    /// needs only the path and the tenant ([`PreparedRequest`]). A host that shares the
    /// endpoint between threads runs it before taking its lock, on a thread of its own for a
    /// large body, and gives the result to [`handle`](Self::handle) with [`Prepared::new`], so
    /// one large request does not hold up the others.
    pub fn parse_body(
        &self,
        path: &str,
        tenant: &str,
        body: &[u8],
    ) -> Option<Result<PreparedRequest, ApiError>> {
        api_of(path).map(|api| super::prepare_request(api, tenant, body))
    }

    /// Handles an [admitted](Self::admit) request with its body (read, or
    /// [prepared](Self::parse_body)): the endpoint's outputs for
    /// `request` answer it (a body that could not be read gets a 413 or 400).
    pub fn handle<'a>(
        &self,
        endpoint: &mut Endpoint,
        now: Timestamp,
        request: RequestId,
        head: &HttpHead<'_>,
        tenant: &str,
        body: impl Into<Prepared<'a>>,
    ) -> Routed {
        endpoint.now = now;
        let api = head.api();
        let Prepared { body, parsed } = body.into();
        let body = match body {
            Ok(body) => body,
            Err(BodyError::TooLarge) => {
                let message = format!(
                    "the request body is larger than {} bytes",
                    self.config.max_body
                );
                let error = ApiError::new(ApiErrorKind::RequestTooLarge, message);
                endpoint.respond_error(request, api, &[], &error);
                return Routed::Endpoint;
            }
            Err(BodyError::Unreadable(reason)) => {
                let error = ApiError::new(ApiErrorKind::InvalidRequest, reason);
                endpoint.respond_error(request, api, &[], &error);
                return Routed::Endpoint;
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
                endpoint.respond_error(request, api, &close, &error);
                return Routed::Endpoint;
            }
        };
        if let Some(api) = api_of(head.path) {
            let parsed = parsed.unwrap_or_else(|| super::prepare_request(api, tenant, body));
            endpoint.handle_prepared(now, request, api, tenant, parsed);
            return Routed::Endpoint;
        }
        match head.path {
            "/v1/messages/count_tokens" => {
                return match anthropic::parse_count_tokens_request(body) {
                    Ok(parsed) => Routed::CountTokens {
                        estimate: anthropic::estimate_input_tokens(&parsed.conversation),
                        upstream: self.count_tokens.as_ref().map(|(url, (name, value))| {
                            let version = head.header("anthropic-version").unwrap_or("2023-06-01");
                            let mut headers = vec![
                                ("content-type".to_owned(), "application/json".to_owned()),
                                ((*name).to_owned(), value.clone()),
                                ("anthropic-version".to_owned(), version.to_owned()),
                            ];
                            if let Some(beta) = head.header("anthropic-beta") {
                                headers.push(("anthropic-beta".to_owned(), beta.to_owned()));
                            }
                            Outbound {
                                url: url.clone(),
                                headers,
                            }
                        }),
                    },
                    Err(e) => {
                        endpoint.respond_error(request, api, &[], &e);
                        Routed::Endpoint
                    }
                };
            }
            "/v1/models" => {
                let models = endpoint.models();
                respond_json(endpoint, request, 200, &models);
            }
            "/v1/approvals" => {
                let list = endpoint.approvals(tenant);
                respond_json(endpoint, request, 200, &list);
            }
            "/v1/approvals/events" => endpoint.handle_approval_events(now, request, tenant),
            "/metrics" => {
                let text = if self.is_admin(head) || self.keys.is_empty() {
                    endpoint.metrics()
                } else {
                    match self.authenticate(head) {
                        Ok(tenant) => endpoint.tenant_metrics(&tenant),
                        Err(e) => {
                            endpoint.respond_error(request, api, &[], &e);
                            return Routed::Endpoint;
                        }
                    }
                }
                .into_bytes();
                let content_type = "text/plain; version=0.0.4; charset=utf-8";
                let headers = vec![("content-type".to_owned(), content_type.to_owned())];
                endpoint.respond_whole(request, 200, headers, text);
            }
            "/health" => {
                // Draining, load balancers must stop sending new conversations here.
                let (status, code) = if endpoint.is_draining() {
                    ("draining", 503)
                } else {
                    ("ok", 200)
                };
                // Without keys every caller is known.
                let known = self.is_admin(head) || self.authenticate(head).is_ok();
                let health = if known {
                    json!({
                        "status": status,
                        "cli": self.cli,
                        "sessions": endpoint.session_count() - endpoint.pool_count(),
                        "pool": endpoint.pool_count(),
                        "held_tool_calls": endpoint.held_count(),
                    })
                } else {
                    json!({"status": status})
                };
                respond_json(endpoint, request, code, &health);
            }
            "/admin/drain" => return self.drain(endpoint, now, request, head),
            path => match approval_id(path) {
                Some(id) => match endpoint.answer_approval(now, tenant, id, body) {
                    Ok(decided) => respond_json(endpoint, request, 200, &decided),
                    Err(e) => endpoint.respond_error(request, api, &[], &e),
                },
                None => {
                    let error =
                        ApiError::new(ApiErrorKind::NotFound, format!("no endpoint {path}"));
                    endpoint.respond_error(request, api, &[], &error);
                }
            },
        }
        Routed::Endpoint
    }

    /// `POST /admin/drain`, with the admin key.
    fn drain(
        &self,
        endpoint: &mut Endpoint,
        now: Timestamp,
        request: RequestId,
        head: &HttpHead<'_>,
    ) -> Routed {
        let allowed = match &self.admin {
            None => Err(ApiError::new(
                ApiErrorKind::Forbidden,
                "no admin key is set (--admin-key or CCWIRE_ADMIN_KEY)",
            )),
            Some(admin) => admin.authenticate(None, head.header("authorization")),
        };
        if let Err(e) = allowed {
            endpoint.respond_error(request, Api::Anthropic, &[], &e);
            return Routed::Endpoint;
        }
        endpoint.drain(now, self.config.drain_grace_ms);
        let answer = json!({
            "draining": true,
            "sessions": endpoint.session_count(),
            "grace_seconds": self.config.drain_grace_ms / 1000,
        });
        respond_json(endpoint, request, 202, &answer);
        Routed::Drain
    }

    /// Answers a [`Routed::CountTokens`] request with the upstream's count when its answer
    /// (the body of a successful one) has one, else the estimate; the `x-ccwire-token-count` header says
    /// which (`upstream` or `estimate`).
    pub fn token_count(
        &self,
        endpoint: &mut Endpoint,
        request: RequestId,
        estimate: u64,
        upstream: Option<&[u8]>,
    ) {
        let counted = upstream
            .and_then(|body| serde_json::from_slice::<Value>(body).ok())
            .and_then(|answer| answer.get("input_tokens").and_then(Value::as_u64));
        let (tokens, source) = counted.map_or((estimate, "estimate"), |n| (n, "upstream"));
        let headers = vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("x-ccwire-token-count".to_owned(), source.to_owned()),
        ];
        let body = json!({"input_tokens": tokens}).to_string().into_bytes();
        endpoint.respond_whole(request, 200, headers, body);
    }
}

fn respond_json(endpoint: &mut Endpoint, request: RequestId, status: u16, value: &Value) {
    let headers = vec![("content-type".to_owned(), "application/json".to_owned())];
    endpoint.respond_whole(request, status, headers, value.to_string().into_bytes());
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
