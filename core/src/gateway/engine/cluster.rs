//! Where a request is served when gateways share a cluster. The engine decides: which key's
//! holder serves a request ([`Gateway::placement`]), whether this gateway claims a key no one
//! holds, what it does with the cluster registry's answer ([`Gateway::placed`]), what a
//! draining gateway passes on, and which answers are the whole cluster's
//! ([`fans_out`]). The host asks its registry and moves the bytes.

use super::http::{approval_route, managed_route};
use super::routes::Route;
use super::{Gateway, HttpHead, PreparedRequest, RouteKey};
use crate::api::ApiError;

/// What a request's key names, and so who serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// A conversation (or a new one): the gateway whose CLI runs it.
    Conversation,
    /// A pending approval: the gateway whose CLI waits for the answer, or none (it is
    /// answered with a 404 where it lands).
    Approval,
    /// A tenant's Managed Agents resources: one gateway serves each tenant's.
    Managed,
}

/// Where in a cluster a request goes, before it is handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The key whose holder serves it ([`RouteKey::New`]: no one holds it yet).
    pub key: RouteKey,
    /// What the key names.
    pub held: Held,
    /// Whether this gateway claims the key when no live gateway holds it (the host asks its
    /// registry to, atomically with the lookup).
    pub claim: bool,
}

/// Who holds a request's key, as the cluster's registry answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// Another live gateway.
    Other,
    /// No other live gateway: this one holds it, or no one does (a new conversation's key
    /// too); `taken` when this gateway claimed it just now.
    Here {
        /// It was claimed by this lookup.
        taken: bool,
    },
    /// The registry could not be asked.
    Unknown,
}

/// What the host does with a request once it knows its key's [`Holder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// Forward it to the gateway that holds its key.
    ToHolder,
    /// Forward it to any other live gateway (this one drains); served here when there is
    /// none.
    ToAnyOther,
    /// Serve it here.
    Here,
}

/// A cluster-wide answer of a route: every live gateway's merged
/// ([`merge_node_answers`](super::merge_node_answers)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FanOut {
    /// A whole answer (`/v1/approvals`, `/v1/conversations`, `/v1/stats`): every gateway's,
    /// merged.
    List,
    /// An event stream (`/v1/approvals/events`): every gateway's events, interleaved.
    Events,
}

/// Whether the answer to `path` is the whole cluster's, and how.
pub fn fans_out(path: &str) -> Option<FanOut> {
    match path {
        "/v1/approvals" | "/v1/conversations" | "/v1/stats" => Some(FanOut::List),
        "/v1/approvals/events" => Some(FanOut::Events),
        _ => None,
    }
}

impl Gateway {
    /// Where in a cluster an [admitted](Self::admit) request goes: the key whose holder
    /// serves it, for a turn (from its `prepared` request), an approval's answer or a Managed
    /// Agents request; `None` for the rest, served where they land. A draining gateway claims
    /// nothing; no one claims an approval (it lives where its CLI waits).
    pub fn placement(
        &self,
        head: &HttpHead<'_>,
        tenant: &str,
        prepared: Option<&Result<PreparedRequest, ApiError>>,
    ) -> Option<Placement> {
        let (key, held) = match (Route::parse(head.path)?, prepared) {
            (Route::Turn(_), Some(Ok(prepared))) => {
                (prepared.route_key(tenant), Held::Conversation)
            }
            (Route::Approval(_), _) => (
                RouteKey::Conversation(approval_route(head.path)?),
                Held::Approval,
            ),
            (Route::Managed(_), _) => (
                RouteKey::Conversation(managed_route(head.path, tenant)?),
                Held::Managed,
            ),
            _ => return None,
        };
        let claim = held != Held::Approval && !self.is_draining();
        Some(Placement { key, held, claim })
    }

    /// What the host does with a request once the registry said who holds its key. A key
    /// this gateway claimed just now may have been another's until then: what it knew of a
    /// tenant's Managed Agents resources is read again. A draining gateway passes on every
    /// request but an approval's answer; a registry that cannot be asked leaves the request
    /// here.
    pub fn placed(&mut self, placement: &Placement, tenant: &str, holder: Holder) -> Placed {
        match holder {
            Holder::Other => Placed::ToHolder,
            Holder::Here { taken: true } => {
                self.holder_unreachable(placement, tenant);
                Placed::Here
            }
            Holder::Here { taken: false }
                if self.is_draining() && placement.held != Held::Approval =>
            {
                Placed::ToAnyOther
            }
            Holder::Here { .. } | Holder::Unknown => Placed::Here,
        }
    }

    /// The gateway that holds a request's key cannot be reached: the request is served here,
    /// and what this gateway knew of what the key names may be stale (a tenant's Managed
    /// Agents resources are read again from the session store).
    pub fn holder_unreachable(&mut self, placement: &Placement, tenant: &str) {
        if placement.held == Held::Managed {
            self.forget_managed(tenant);
        }
    }
}
