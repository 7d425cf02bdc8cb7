//! `POST /v1/messages/count_tokens`: counted by the upstream Messages API when the CLI's
//! environment has a key for it, else estimated.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use ccwire_core::api::{self, Api};
use serde_json::{json, Value};

use super::http::{authenticate, error_response, read_body};
use super::App;

/// `POST /v1/messages/count_tokens`: the upstream API's count when the CLI's environment
/// has an API key for it, else [`api::anthropic::estimate_input_tokens`]. The
/// `x-ccwire-token-count` header says which (`upstream` or `estimate`).
pub(super) async fn count_tokens(
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
pub(super) struct Upstream {
    count_url: String,
    auth: (&'static str, String),
    http: reqwest::Client,
}

impl Upstream {
    /// From the variables the CLI gets (`env` over the gateway's own, less `removed`):
    /// `ANTHROPIC_BASE_URL` (default the public API) and `ANTHROPIC_API_KEY` or
    /// `ANTHROPIC_AUTH_TOKEN`. `None` without a key (a Claude login cannot count tokens).
    pub(super) fn from_cli_env(
        env: &[(String, String)],
        removed: &[std::ffi::OsString],
    ) -> Option<Upstream> {
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
