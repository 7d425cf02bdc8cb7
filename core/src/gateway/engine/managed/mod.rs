//! The Managed Agents API (beta `managed-agents-2026-04-01`), a wing of the gateway: agents
//! with versions ([`agents`]) and environments ([`environments`]), kept per tenant
//! ([`resources`]), and sessions ([`sessions`]): an agent's
//! conversation with its event log, each turn of which is a Messages request the gateway
//! makes of itself ([`turns`]), so a session's CLI is found, held and resumed like any
//! conversation's. Its state is typed ([`state`], its log [`events`]); JSON is read where a request comes in and
//! written where an answer or a stored record goes out. Every resource belongs to the
//! tenant (API key) that made it.
//!
//! Its self-made turns are numbered from [`TURNS_FROM`], a range of [`RequestId`] no host
//! numbers its own requests in.

mod agents;
mod api;
mod environments;
mod events;
mod resources;
mod sessions;
mod state;
mod tools;
mod turns;

pub(super) use api::{param, query};
pub(super) use resources::Managed;
pub(super) use state::{AgentSessions, Previews};
pub(super) use tools::SessionTools;
pub(super) use turns::PermissionAsked;

use super::RequestId;

/// The first id of the requests the gateway makes of itself for sessions' turns: ids from
/// here on (2⁶²) are the gateway's own, far above any a host numbers its requests with.
pub(in crate::gateway::engine) const TURNS_FROM: RequestId = 1 << 62;

/// What a request of this API asks, from its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Route<'a> {
    /// Agents and environments.
    Resource(ResourceRoute<'a>),
    /// Sessions and their events.
    Session(SessionRoute<'a>),
}

/// A route of the agents and environments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ResourceRoute<'a> {
    Agents,
    Agent(&'a str),
    AgentArchive(&'a str),
    AgentVersions(&'a str),
    Environments,
    Environment(&'a str),
    EnvironmentArchive(&'a str),
}

/// A route of the sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SessionRoute<'a> {
    AgentSessions,
    AgentSession(&'a str),
    Archive(&'a str),
    Events(&'a str),
    Stream(&'a str),
}

impl<'a> Route<'a> {
    /// The route of a path of this API, if it is one.
    pub(super) fn parse(path: &'a str) -> Option<Route<'a>> {
        let id = |s: &str| !s.is_empty() && s.len() <= 128;
        let parts: Vec<&str> = path.strip_prefix("/v1/")?.split('/').collect();
        Some(match parts[..] {
            ["agents"] => Route::Resource(ResourceRoute::Agents),
            ["agents", a] if id(a) => Route::Resource(ResourceRoute::Agent(a)),
            ["agents", a, "archive"] if id(a) => Route::Resource(ResourceRoute::AgentArchive(a)),
            ["agents", a, "versions"] if id(a) => Route::Resource(ResourceRoute::AgentVersions(a)),
            ["environments"] => Route::Resource(ResourceRoute::Environments),
            ["environments", e] if id(e) => Route::Resource(ResourceRoute::Environment(e)),
            ["environments", e, "archive"] if id(e) => {
                Route::Resource(ResourceRoute::EnvironmentArchive(e))
            }
            ["sessions"] => Route::Session(SessionRoute::AgentSessions),
            ["sessions", s] if id(s) => Route::Session(SessionRoute::AgentSession(s)),
            ["sessions", s, "archive"] if id(s) => Route::Session(SessionRoute::Archive(s)),
            ["sessions", s, "events"] if id(s) => Route::Session(SessionRoute::Events(s)),
            ["sessions", s, "events", "stream"] if id(s) => Route::Session(SessionRoute::Stream(s)),
            _ => return None,
        })
    }

    /// The methods the route takes.
    pub(super) fn methods(self) -> &'static [&'static str] {
        use {ResourceRoute as R, SessionRoute as S};
        match self {
            Route::Resource(R::Agents | R::Environments | R::Agent(_))
            | Route::Session(S::AgentSessions | S::Events(_)) => &["GET", "POST"],
            Route::Resource(R::Environment(_)) | Route::Session(S::AgentSession(_)) => {
                &["GET", "POST", "DELETE"]
            }
            Route::Resource(R::AgentArchive(_) | R::EnvironmentArchive(_))
            | Route::Session(S::Archive(_)) => &["POST"],
            Route::Resource(R::AgentVersions(_)) | Route::Session(S::Stream(_)) => &["GET"],
        }
    }

    /// Whether a POST's body must be JSON (an archive's POST has none, and the SDKs send it
    /// without a `Content-Type`).
    pub(super) fn json_body(self) -> bool {
        !matches!(
            self,
            Route::Resource(ResourceRoute::AgentArchive(_) | ResourceRoute::EnvironmentArchive(_))
                | Route::Session(SessionRoute::Archive(_))
        )
    }
}
