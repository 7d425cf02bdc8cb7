//! The HTTP edge: browser-borne requests refused, keys checked, errors in each API's shape.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ccwire_core::api::guard::{self, BrowserHeaders};
use ccwire_core::api::{Api, ApiError, ApiErrorKind};

use super::App;

/// The API whose error shape a path's errors take.
pub(super) fn api_of(path: &str, headers: &HeaderMap) -> Api {
    guard::api_of_path(path, headers.contains_key("anthropic-version"))
}

/// A header's value; one that is not text reads as a value no check accepts.
pub(super) fn header_text(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<&str> {
    headers
        .get(name)
        .map(|v| v.to_str().unwrap_or("(not text)"))
}

/// Refuses browser-borne requests the operator did not allow, before anything else runs;
/// answers CORS preflights and adds CORS headers for the allowed origins.
pub(super) async fn browser_guard(
    State(app): State<Arc<App>>,
    request: Request,
    next: Next,
) -> Response {
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

pub(super) fn with_headers(mut response: Response, extra: Vec<(&'static str, String)>) -> Response {
    for (name, value) in extra {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().append(name, value);
        }
    }
    response
}

/// Refuses API requests whose body is not JSON (form posts and `text/plain` are what a web
/// page can send without a preflight), before the body is read.
pub(super) async fn require_json(request: Request, next: Next) -> Response {
    let headers = request.headers();
    match guard::check_content_type(header_text(headers, header::CONTENT_TYPE)) {
        Ok(()) => next.run(request).await,
        Err(e) => error_response(api_of(request.uri().path(), headers), &e),
    }
}

pub(super) fn error_response(api: Api, error: &ApiError) -> Response {
    let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, axum::Json(error.body(api))).into_response();
    if let Some(seconds) = error.retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// The caller's tenant (its key), or a 401.
pub(super) fn authenticate(app: &App, headers: &HeaderMap) -> Result<String, ApiError> {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    app.keys.authenticate(
        text(header::HeaderName::from_static("x-api-key")),
        text(header::AUTHORIZATION),
    )
}

pub(super) fn read_body(
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
