//! The checks a gateway makes before it reads a request: is it borne by a browser that may not
//! use the gateway (a foreign `Origin`, a cross-site fetch, a DNS-rebinding `Host`), and is its
//! body JSON. Any web page the user visits can send "simple" cross-origin POSTs (`text/plain`,
//! form encodings, no preflight) to a loopback gateway, and a page behind a rebinding DNS name
//! can even read the answers; these checks refuse all of that before anything is spawned or sent
//! to the model.
//!
//! [`BrowserPolicy::check`] runs on every request; [`BrowserPolicy::preflight`] answers CORS
//! preflights (`OPTIONS`) for the origins the operator allowed, and [`BrowserPolicy::cors_headers`]
//! are the headers to add to the responses of those origins. [`check_content_type`] runs on the
//! API routes.

use super::{Api, ApiError, ApiErrorKind};

/// Request headers a browser client of the gateway may send: those of the Anthropic and OpenAI
/// SDKs. Besides these, every `x-stainless-*` header is allowed.
pub const ALLOWED_REQUEST_HEADERS: &[&str] = &[
    "x-api-key",
    "authorization",
    "content-type",
    "anthropic-version",
    "anthropic-beta",
    "anthropic-dangerous-direct-browser-access",
    "openai-organization",
    "openai-project",
    "openai-beta",
    "idempotency-key",
];

/// Response headers a browser client may read besides the CORS-safelisted ones.
pub const EXPOSED_RESPONSE_HEADERS: &str =
    "x-ccwire-session, x-ccwire-ignored, x-ccwire-token-count, retry-after";

/// How long a browser may cache a preflight answer, in seconds.
const PREFLIGHT_MAX_AGE: &str = "600";

/// Which browser-borne requests a gateway accepts.
///
/// By default none: a request with an `Origin` header, or that a browser marks as cross-site
/// (`Sec-Fetch-Site`), is refused; on a loopback listener so is a `Host` that is not a loopback
/// name (DNS rebinding). Origins and host names are opened one by one. There is no default:
/// whether the `Host` check applies depends on the listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowserPolicy {
    loopback: bool,
    origins: Vec<String>,
    hosts: Vec<String>,
    same_origin: bool,
}

/// An origin or host name that cannot be allowed, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot allow {value:?}: {reason}")]
pub struct InvalidAllowance {
    /// What was given.
    pub value: String,
    /// Why it cannot be allowed.
    pub reason: &'static str,
}

/// The request headers the browser checks look at, as the request carried them (`None` when
/// absent or not text).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BrowserHeaders<'a> {
    /// `Host` (or the HTTP/2 `:authority`).
    pub host: Option<&'a str>,
    /// `Origin`.
    pub origin: Option<&'a str>,
    /// `Sec-Fetch-Site`.
    pub sec_fetch_site: Option<&'a str>,
}

impl BrowserPolicy {
    /// The policy of a gateway listening on a loopback address (`loopback: true`: the `Host`
    /// check applies) or on another one, with nothing opened.
    pub fn new(loopback: bool) -> BrowserPolicy {
        BrowserPolicy {
            loopback,
            origins: Vec::new(),
            hosts: Vec::new(),
            same_origin: false,
        }
    }

    /// Allows requests from the gateway's own pages (the console it serves): a request whose
    /// `Origin` is the origin of its own `Host` and that the browser marks
    /// `Sec-Fetch-Site: same-origin` (a header no page can set). With the `Host` check of a
    /// loopback listener, a page of another site that rebinds a name to the gateway is not
    /// one of these.
    pub fn allow_same_origin(&mut self) {
        self.same_origin = true;
    }

    /// Allows requests from a web origin (`scheme://host[:port]`, as browsers send it; a
    /// trailing `/` and the scheme's default port are dropped, letters lowercased).
    ///
    /// # Errors
    /// `*`, `null`, and anything that is not an origin (no scheme, a path, a query).
    pub fn allow_origin(&mut self, origin: &str) -> Result<(), InvalidAllowance> {
        let invalid = |reason| InvalidAllowance {
            value: origin.to_owned(),
            reason,
        };
        match origin.trim() {
            "*" => {
                return Err(invalid(
                    "name each origin; any page on the web could use the gateway",
                ))
            }
            "null" => {
                return Err(invalid(
                    "the null origin is what sandboxed frames and local files of any site send",
                ))
            }
            _ => {}
        }
        let normalized = normalize_origin(origin)
            .ok_or_else(|| invalid("an origin is scheme://host[:port], with no path"))?;
        if !self.origins.contains(&normalized) {
            self.origins.push(normalized);
        }
        Ok(())
    }

    /// Allows a host name in the `Host` header of requests to a loopback listener, with any
    /// port (a port given here is ignored).
    ///
    /// # Errors
    /// An empty name, or one with characters no host name has.
    pub fn allow_host(&mut self, host: &str) -> Result<(), InvalidAllowance> {
        let name = host_name(host.trim()).to_ascii_lowercase();
        let valid = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._[]:".contains(&b));
        if !valid {
            return Err(InvalidAllowance {
                value: host.to_owned(),
                reason: "a host name (letters, digits, '-', '.') or an IP address is required",
            });
        }
        if !self.hosts.contains(&name) {
            self.hosts.push(name);
        }
        Ok(())
    }

    /// The allowed origins, normalized.
    pub fn origins(&self) -> &[String] {
        &self.origins
    }

    /// The allowed host names besides the loopback ones.
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// Whether a request may go on; `Ok(Some(origin))` when it came from an allowed origin (its
    /// responses then carry [`cors_headers`](Self::cors_headers)).
    ///
    /// # Errors
    /// A 403 saying what was refused and how to open it.
    pub fn check<'h>(&self, headers: &BrowserHeaders<'h>) -> Result<Option<&'h str>, ApiError> {
        if self.loopback {
            if let Some(host) = headers.host {
                let name = host_name(host).to_ascii_lowercase();
                if !is_loopback_name(&name) && !self.hosts.contains(&name) {
                    return Err(forbidden(format!(
                        "requests for host {name:?} are refused: this gateway listens on a \
                         loopback address and answers only localhost, 127.0.0.1 and [::1] \
                         (start it with --allow-host {name} to accept this name)"
                    )));
                }
            }
        }
        match headers.origin {
            Some(origin) => {
                if self.allows_origin(origin) {
                    Ok(Some(origin))
                } else if self.same_origin
                    && headers.sec_fetch_site == Some("same-origin")
                    && headers.host.is_some_and(|host| is_own_origin(origin, host))
                {
                    Ok(None)
                } else {
                    Err(forbidden(format!(
                        "requests from web pages are refused, and origin {origin:?} is not \
                         allowed (start the gateway with --allow-origin {origin} to allow it)"
                    )))
                }
            }
            None => match headers.sec_fetch_site {
                Some("cross-site" | "same-site") => Err(forbidden(
                    "cross-site requests from web pages are refused".to_owned(),
                )),
                _ => Ok(None),
            },
        }
    }

    /// The answer to a CORS preflight (`OPTIONS` with `Origin` and
    /// `Access-Control-Request-Method`): the headers of a `204`.
    ///
    /// # Errors
    /// A 403 when the origin is not allowed, or the method or a requested header is not one
    /// the gateway's clients use.
    pub fn preflight(
        &self,
        origin: &str,
        method: &str,
        request_headers: Option<&str>,
    ) -> Result<Vec<(&'static str, String)>, ApiError> {
        if !self.allows_origin(origin) {
            return Err(forbidden(format!(
                "origin {origin:?} is not allowed (start the gateway with --allow-origin \
                 {origin} to allow it)"
            )));
        }
        if !matches!(method.trim(), "GET" | "POST") {
            return Err(forbidden(format!(
                "method {method:?} is not allowed from web pages (GET and POST are)"
            )));
        }
        let mut allowed = Vec::new();
        for name in request_headers
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
        {
            let name = name.to_ascii_lowercase();
            if !is_allowed_request_header(&name) {
                return Err(forbidden(format!(
                    "request header {name:?} is not allowed from web pages"
                )));
            }
            allowed.push(name);
        }
        let mut headers = self.cors_headers(origin);
        headers.push(("access-control-allow-methods", "GET, POST".to_owned()));
        if !allowed.is_empty() {
            headers.push(("access-control-allow-headers", allowed.join(", ")));
        }
        headers.push(("access-control-max-age", PREFLIGHT_MAX_AGE.to_owned()));
        headers.push((
            "vary",
            "Origin, Access-Control-Request-Method, Access-Control-Request-Headers".to_owned(),
        ));
        Ok(headers)
    }

    /// The CORS headers of a response to an allowed origin (as [`check`](Self::check)
    /// returned it).
    pub fn cors_headers(&self, origin: &str) -> Vec<(&'static str, String)> {
        vec![
            ("access-control-allow-origin", origin.to_owned()),
            (
                "access-control-expose-headers",
                EXPOSED_RESPONSE_HEADERS.to_owned(),
            ),
            ("vary", "Origin".to_owned()),
        ]
    }

    fn allows_origin(&self, origin: &str) -> bool {
        normalize_origin(origin).is_some_and(|o| self.origins.contains(&o))
    }
}

/// The API keys a gateway accepts. A key is also the caller's tenant: conversations and stored
/// responses are scoped by it.
#[derive(Clone, Default)]
pub struct ApiKeys {
    /// Each tenant with the SHA-256 digest of its key; a key is found by comparing digests in
    /// constant time, so the time an answer takes says nothing about how much of a key was
    /// right. A key given at start is its own tenant; a key known by its digest alone
    /// ([`insert_digest`](Self::insert_digest)) has a tenant made of the digest.
    keys: Vec<(String, [u8; 32])>,
    /// Whether a key is needed even with none known (keys are made at run time).
    required: bool,
}

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ApiKeys({} keys)", self.keys.len())
    }
}

impl ApiKeys {
    /// These keys (none: every caller is accepted, as one tenant).
    pub fn new(keys: &[String]) -> ApiKeys {
        ApiKeys {
            keys: keys.iter().map(|k| (k.clone(), digest(k))).collect(),
            required: !keys.is_empty(),
        }
    }

    /// Needs a key from now on, even while none is known.
    pub fn require(&mut self) {
        self.required = true;
    }

    /// Whether no key is needed.
    pub fn is_empty(&self) -> bool {
        !self.required
    }

    /// Accepts the key whose SHA-256 digest is `sha256` (a key made at run time, whose
    /// secret the gateway does not keep): its tenant is [`digest_tenant`]`(sha256)`.
    pub fn insert_digest(&mut self, sha256: [u8; 32]) {
        let tenant = digest_tenant(&sha256);
        if !self.keys.iter().any(|(t, _)| *t == tenant) {
            self.keys.push((tenant, sha256));
        }
    }

    /// No longer accepts the key of `tenant`.
    pub fn remove(&mut self, tenant: &str) {
        self.keys.retain(|(t, _)| t != tenant);
    }

    /// The caller's tenant from its `x-api-key` or `Authorization: Bearer` header (`""` when
    /// no keys are set).
    ///
    /// # Errors
    /// A 401 for a missing or wrong key.
    pub fn authenticate(
        &self,
        x_api_key: Option<&str>,
        authorization: Option<&str>,
    ) -> Result<String, ApiError> {
        if !self.required {
            return Ok(String::new());
        }
        let given = x_api_key
            .or_else(|| authorization.and_then(|v| v.strip_prefix("Bearer ")))
            .map(str::trim);
        let Some(given) = given else {
            return Err(ApiError::new(
                ApiErrorKind::Authentication,
                "an API key is required (x-api-key or Authorization: Bearer)",
            ));
        };
        let given = digest(given);
        // Every key is compared, found or not.
        let mut found = None;
        for (key, known) in &self.keys {
            if bool::from(subtle::ConstantTimeEq::ct_eq(&known[..], &given[..])) {
                found = Some(key);
            }
        }
        found
            .cloned()
            .ok_or_else(|| ApiError::new(ApiErrorKind::Authentication, "invalid API key"))
    }
}

/// The SHA-256 digest of a key.
pub fn digest(key: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(key.as_bytes()).into()
}

/// The tenant of a key known by its digest alone: the digest in hex behind a NUL, which no
/// key given in a header can hold (so no such key is the same tenant).
pub fn digest_tenant(sha256: &[u8; 32]) -> String {
    format!("\u{0}sha256:{}", crate::conversation::hex(sha256))
}

/// The API whose error shape a path's errors take: `/v1/chat/*` and `/v1/responses*` are
/// OpenAI's, `/v1/models` too unless the client sent `anthropic-version`; the rest Anthropic's.
pub fn api_of_path(path: &str, anthropic_version: bool) -> Api {
    if path.starts_with("/v1/responses") {
        Api::Responses
    } else if path.starts_with("/v1/chat") || (path == "/v1/models" && !anthropic_version) {
        Api::OpenAi
    } else {
        Api::Anthropic
    }
}

/// Whether a request body's `Content-Type` is JSON (`application/json`, parameters allowed).
///
/// # Errors
/// A 415 naming what was sent. Browsers send `text/plain`, form encodings or nothing without a
/// preflight, so anything but JSON is refused.
pub fn check_content_type(content_type: Option<&str>) -> Result<(), ApiError> {
    let essence = content_type
        .map(|c| c.split(';').next().unwrap_or_default().trim())
        .unwrap_or_default();
    if essence.eq_ignore_ascii_case("application/json") {
        return Ok(());
    }
    let got = match content_type {
        None => "none".to_owned(),
        Some(c) => format!("{c:?}"),
    };
    Err(ApiError::new(
        ApiErrorKind::UnsupportedMediaType,
        format!("the request body must be sent as Content-Type: application/json (got {got})"),
    ))
}

fn forbidden(message: String) -> ApiError {
    ApiError::new(ApiErrorKind::Forbidden, message)
}

fn is_allowed_request_header(name: &str) -> bool {
    ALLOWED_REQUEST_HEADERS.contains(&name) || name.starts_with("x-stainless-")
}

/// `localhost` and loopback IP addresses.
fn is_loopback_name(name: &str) -> bool {
    if name == "localhost" {
        return true;
    }
    let ip = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name);
    ip.parse::<core::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

/// The name part of a `Host` value: `[::1]:8787` → `[::1]`, `localhost:8787` → `localhost`.
fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        return match host.find(']') {
            Some(end) => &host[..=end],
            None => host,
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// `scheme://host[:port]` in the form browsers send: lowercase, no default port, no trailing
/// slash. `None` when it is not an origin.
/// Whether `origin` is the origin of a page of the server that `host` names (either scheme).
fn is_own_origin(origin: &str, host: &str) -> bool {
    let Some(origin) = normalize_origin(origin) else {
        return false;
    };
    ["http", "https"]
        .iter()
        .any(|scheme| normalize_origin(&format!("{scheme}://{host}")).as_ref() == Some(&origin))
}

fn normalize_origin(origin: &str) -> Option<String> {
    let origin = origin.trim();
    let origin = origin.strip_suffix('/').unwrap_or(origin);
    let (scheme, authority) = origin.split_once("://")?;
    let scheme_ok = scheme
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b));
    let authority_ok = !authority.is_empty()
        && !authority
            .bytes()
            .any(|b| b"/?#@ \t".contains(&b) || b.is_ascii_control());
    if !scheme_ok || !authority_ok {
        return None;
    }
    let scheme = scheme.to_ascii_lowercase();
    let mut authority = authority.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => Some(":80"),
        "https" => Some(":443"),
        _ => None,
    };
    if let Some(port) = default_port {
        if authority.ends_with(port) {
            authority.truncate(authority.len() - port.len());
        }
    }
    Some(format!("{scheme}://{authority}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_the_tenant_and_anything_else_is_a_401() {
        let keys = ApiKeys::new(&["k-one".to_owned(), "k-two".to_owned()]);
        assert_eq!(keys.authenticate(Some("k-two"), None).unwrap(), "k-two");
        assert_eq!(
            keys.authenticate(None, Some("Bearer k-one")).unwrap(),
            "k-one"
        );
        assert_eq!(keys.authenticate(Some(" k-one "), None).unwrap(), "k-one");
        for (x_api_key, authorization) in [
            (None, None),
            (Some("k-on"), None),
            (Some("k-one-and-more"), None),
            (None, Some("k-one")),
            (None, Some("Basic k-one")),
        ] {
            let err = keys.authenticate(x_api_key, authorization).unwrap_err();
            assert_eq!(err.status(), 401, "{x_api_key:?} {authorization:?}");
        }
        assert_eq!(ApiKeys::new(&[]).authenticate(None, None).unwrap(), "");
        assert_eq!(format!("{keys:?}"), "ApiKeys(2 keys)", "no key in logs");
    }

    #[test]
    fn each_path_answers_errors_in_its_api_s_shape() {
        assert_eq!(api_of_path("/v1/responses", false), Api::Responses);
        assert_eq!(api_of_path("/v1/chat/completions", true), Api::OpenAi);
        assert_eq!(api_of_path("/v1/models", false), Api::OpenAi);
        assert_eq!(api_of_path("/v1/models", true), Api::Anthropic);
        assert_eq!(api_of_path("/v1/messages", false), Api::Anthropic);
        assert_eq!(api_of_path("/nowhere", false), Api::Anthropic);
    }

    fn loopback() -> BrowserPolicy {
        BrowserPolicy::new(true)
    }

    fn request<'a>(
        host: Option<&'a str>,
        origin: Option<&'a str>,
        site: Option<&'a str>,
    ) -> BrowserHeaders<'a> {
        BrowserHeaders {
            host,
            origin,
            sec_fetch_site: site,
        }
    }

    #[test]
    fn a_client_without_browser_headers_passes() {
        let policy = loopback();
        for host in [
            "127.0.0.1:8787",
            "localhost:8787",
            "[::1]:8787",
            "LOCALHOST",
            "127.0.0.2",
        ] {
            assert_eq!(
                policy.check(&request(Some(host), None, None)),
                Ok(None),
                "{host}"
            );
        }
        assert_eq!(policy.check(&request(None, None, None)), Ok(None));
        assert_eq!(
            policy.check(&request(Some("127.0.0.1"), None, Some("none"))),
            Ok(None)
        );
    }

    #[test]
    fn any_origin_is_refused_by_default() {
        let policy = loopback();
        for origin in ["http://evil.example", "null", "http://127.0.0.1:8787", ""] {
            let err = policy
                .check(&request(Some("127.0.0.1:8787"), Some(origin), None))
                .unwrap_err();
            assert_eq!(err.status(), 403, "{origin}");
            assert!(err.message.contains("--allow-origin"), "{}", err.message);
        }
    }

    #[test]
    fn the_gateway_s_own_pages_pass_only_when_allowed_and_marked_same_origin() {
        let own = request(
            Some("127.0.0.1:8787"),
            Some("http://127.0.0.1:8787"),
            Some("same-origin"),
        );
        assert_eq!(
            loopback().check(&own).unwrap_err().status(),
            403,
            "not by default"
        );
        let mut policy = loopback();
        policy.allow_same_origin();
        assert_eq!(policy.check(&own), Ok(None));
        let refused = [
            // Another origin, whatever it says of itself.
            request(
                Some("127.0.0.1:8787"),
                Some("http://evil.example"),
                Some("same-origin"),
            ),
            // The origin of another port.
            request(
                Some("127.0.0.1:8787"),
                Some("http://127.0.0.1:9999"),
                Some("same-origin"),
            ),
            // Without the browser's mark (a page cannot set it; a client may send anything).
            request(Some("127.0.0.1:8787"), Some("http://127.0.0.1:8787"), None),
            request(
                Some("127.0.0.1:8787"),
                Some("http://127.0.0.1:8787"),
                Some("cross-site"),
            ),
            // A rebound name: refused by the Host check before anything else.
            request(
                Some("evil.example:8787"),
                Some("http://evil.example:8787"),
                Some("same-origin"),
            ),
        ];
        for request in refused {
            assert_eq!(
                policy.check(&request).unwrap_err().status(),
                403,
                "{request:?}"
            );
        }
    }

    #[test]
    fn cross_site_fetches_without_origin_are_refused() {
        let policy = loopback();
        for site in ["cross-site", "same-site"] {
            let err = policy
                .check(&request(Some("localhost"), None, Some(site)))
                .unwrap_err();
            assert_eq!(err.status(), 403);
        }
    }

    #[test]
    fn a_rebinding_host_is_refused_on_loopback_only() {
        let err = loopback()
            .check(&request(Some("evil.example:8787"), None, None))
            .unwrap_err();
        assert_eq!(err.status(), 403);
        assert!(
            err.message.contains("--allow-host evil.example"),
            "{}",
            err.message
        );
        for host in [
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "[::2]",
            "0.0.0.0",
        ] {
            assert!(
                loopback().check(&request(Some(host), None, None)).is_err(),
                "{host}"
            );
        }
        let public = BrowserPolicy::new(false);
        assert_eq!(
            public.check(&request(Some("gw.example"), None, None)),
            Ok(None)
        );
    }

    #[test]
    fn an_allowed_host_passes_with_any_port() {
        let mut policy = loopback();
        policy.allow_host("Devbox.Local:9000").unwrap();
        assert_eq!(policy.hosts(), ["devbox.local"]);
        assert_eq!(
            policy.check(&request(Some("devbox.local:8787"), None, None)),
            Ok(None)
        );
        assert_eq!(
            policy.check(&request(Some("DEVBOX.local"), None, None)),
            Ok(None)
        );
        assert!(policy.allow_host("").is_err());
        assert!(policy.allow_host("a b").is_err());
    }

    #[test]
    fn an_allowed_origin_passes_and_others_do_not() {
        let mut policy = loopback();
        policy.allow_origin("HTTP://App.Example:80/").unwrap();
        policy.allow_origin("https://ide.example:8443").unwrap();
        assert_eq!(
            policy.origins(),
            ["http://app.example", "https://ide.example:8443"]
        );
        let ok = request(
            Some("localhost"),
            Some("http://app.example"),
            Some("cross-site"),
        );
        assert_eq!(policy.check(&ok), Ok(Some("http://app.example")));
        for other in [
            "https://app.example",
            "http://app.example:81",
            "http://evil.example",
        ] {
            assert!(
                policy.check(&request(None, Some(other), None)).is_err(),
                "{other}"
            );
        }
    }

    #[test]
    fn wildcards_null_and_non_origins_cannot_be_allowed() {
        let mut policy = loopback();
        for bad in [
            "*",
            "null",
            "app.example",
            "http://app.example/path",
            "http://",
            "http://a b",
        ] {
            assert!(policy.allow_origin(bad).is_err(), "{bad}");
        }
        assert!(policy.origins().is_empty());
    }

    #[test]
    fn preflight_answers_an_allowed_origin_with_the_sdk_headers() {
        let mut policy = loopback();
        policy.allow_origin("http://app.example").unwrap();
        let headers = policy
            .preflight(
                "http://app.example",
                "POST",
                Some("x-api-key, Content-Type,anthropic-version,x-stainless-retry-count"),
            )
            .unwrap();
        let get = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(
            get("access-control-allow-origin"),
            Some("http://app.example")
        );
        assert_eq!(get("access-control-allow-methods"), Some("GET, POST"));
        assert_eq!(
            get("access-control-allow-headers"),
            Some("x-api-key, content-type, anthropic-version, x-stainless-retry-count")
        );
    }

    #[test]
    fn preflight_refuses_other_origins_methods_and_headers() {
        let mut policy = loopback();
        policy.allow_origin("http://app.example").unwrap();
        assert!(policy
            .preflight("http://evil.example", "POST", None)
            .is_err());
        assert!(policy
            .preflight("http://app.example", "DELETE", None)
            .is_err());
        let err = policy
            .preflight(
                "http://app.example",
                "POST",
                Some("x-api-key, x-forwarded-for"),
            )
            .unwrap_err();
        assert!(err.message.contains("x-forwarded-for"), "{}", err.message);
    }

    #[test]
    fn only_json_bodies_are_accepted() {
        for ok in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
        ] {
            assert_eq!(check_content_type(Some(ok)), Ok(()), "{ok}");
        }
        for bad in [
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            Some("application/jsonx"),
            None,
        ] {
            let err = check_content_type(bad).unwrap_err();
            assert_eq!(err.status(), 415, "{bad:?}");
        }
    }
}
