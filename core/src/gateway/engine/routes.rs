//! The gateway's routes: a request's path read once into a [`Route`], which admission checks
//! (its methods, whether its body is JSON, whether it takes a key) and the HTTP face then
//! carries to the route's handler.

use super::console::ConsoleRoute;
use super::managed;
use crate::api::{Api, ApiError, ApiErrorKind};

/// What a request asks, by its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Route<'a> {
    /// `/v1/messages`, `/v1/chat/completions`, `/v1/responses`: a turn in that API.
    Turn(Api),
    /// `/v1/messages/count_tokens`.
    CountTokens,
    /// `/v1/models`.
    Models,
    /// `/v1/approvals`: the tenant's held permission requests.
    Approvals,
    /// `/v1/approvals/events`: them as they come.
    ApprovalEvents,
    /// `/v1/approvals/{id}`: an answer to one.
    Approval(&'a str),
    /// `/v1/usage`: a key's usage and the rate-limit windows.
    Usage,
    /// `/v1/keys`: the tenant keys (the admin's).
    Keys,
    /// `/v1/keys/{id}`: one of them.
    Key(&'a str),
    /// `/metrics`.
    Metrics,
    /// `/health`.
    Health,
    /// `/admin/drain`.
    Drain,
    /// The console's page and views.
    Console(ConsoleRoute<'a>),
    /// The Managed Agents API.
    Managed(managed::Route<'a>),
}

impl<'a> Route<'a> {
    /// The route of `path`, if the gateway has one.
    pub(super) fn parse(path: &'a str) -> Option<Route<'a>> {
        Some(match path {
            "/v1/messages" => Route::Turn(Api::Anthropic),
            "/v1/chat/completions" => Route::Turn(Api::OpenAi),
            "/v1/responses" => Route::Turn(Api::Responses),
            "/v1/messages/count_tokens" => Route::CountTokens,
            "/v1/models" => Route::Models,
            "/v1/approvals" => Route::Approvals,
            "/v1/approvals/events" => Route::ApprovalEvents,
            "/v1/usage" => Route::Usage,
            "/v1/keys" => Route::Keys,
            "/metrics" => Route::Metrics,
            "/health" => Route::Health,
            "/admin/drain" => Route::Drain,
            _ => {
                if let Some(route) = managed::Route::parse(path) {
                    return Some(Route::Managed(route));
                }
                if let Some(route) = super::console::route(path) {
                    return Some(Route::Console(route));
                }
                if let Some(id) = path.strip_prefix("/v1/keys/") {
                    return (!id.is_empty() && !id.contains('/')).then_some(Route::Key(id));
                }
                let id = path.strip_prefix("/v1/approvals/")?;
                return (!id.is_empty() && !id.contains('/')).then_some(Route::Approval(id));
            }
        })
    }

    /// The methods the route takes.
    pub(super) fn methods(self) -> &'static [&'static str] {
        match self {
            Route::Turn(_) | Route::CountTokens | Route::Approval(_) | Route::Drain => &["POST"],
            Route::Models
            | Route::Approvals
            | Route::ApprovalEvents
            | Route::Usage
            | Route::Metrics
            | Route::Health
            | Route::Console(_) => &["GET"],
            Route::Keys => &["GET", "POST"],
            Route::Key(_) => &["GET", "PATCH", "DELETE"],
            Route::Managed(route) => route.methods(),
        }
    }

    /// Whether a POST's body must be JSON.
    pub(super) fn json_body(self) -> bool {
        match self {
            Route::Turn(_)
            | Route::CountTokens
            | Route::Approval(_)
            | Route::Keys
            | Route::Key(_) => true,
            Route::Managed(route) => route.json_body(),
            _ => false,
        }
    }

    /// Whether the caller needs a tenant's API key. `/metrics`, `/v1/usage`, `/v1/keys`, the approvals, the console's
    /// views and `/admin/drain` check the key themselves (a tenant's key sees its own, the
    /// admin key all); `/health` gives its status to anyone and details with a key; the
    /// console's page is for anyone.
    pub(super) fn needs_key(self) -> bool {
        !matches!(
            self,
            Route::Metrics
                | Route::Usage
                | Route::Keys
                | Route::Key(_)
                | Route::Health
                | Route::Drain
                | Route::Console(_)
                | Route::Approvals
                | Route::ApprovalEvents
                | Route::Approval(_)
        )
    }
}

/// The 404 of a path no route takes, saying why for an endpoint of the APIs the gateway
/// deliberately does not offer.
pub(super) fn no_endpoint(path: &str) -> ApiError {
    let why = match path {
        "/v1/responses/compact" => {
            ": remote compaction is not offered (each conversation's Claude Code session \
             compacts its own context); compact on the client's side (Codex does for a provider \
             without remote compaction)"
        }
        _ => "",
    };
    ApiError::new(ApiErrorKind::NotFound, format!("no endpoint {path}{why}"))
}
