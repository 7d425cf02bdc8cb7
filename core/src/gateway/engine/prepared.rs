//! [`PreparedRequest`]: the work on a request that is linear in its size and needs no
//! gateway state, done before the gateway takes it.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::managed::SessionTools;
use super::{RouteKey, CLIENT_SERVER};
use crate::api::{Api, ApiError, ApiRequest};
use crate::gateway::registry::stored_response_key;
use crate::gateway::translate::{
    client_tool_names, history_hashes, prompt_blocks, prompt_content, rebuild_prompt,
    request_scope, structured, Hashes, Structured,
};
use crate::mcp::McpTool;
use crate::session::ReadyPrompt;

/// A request of one of the three APIs, read, checked, and made ready to route: its history's
/// hashes, its client tools as MCP tools. Building one takes time linear in the request and
/// needs only the request and its tenant, so a host that shares the [`Gateway`](super::Gateway)
/// between threads builds it first ([`prepare`](super::prepare)), outside its lock, and
/// [`handle_http`](super::Gateway::handle_http) has only the conversation's state to look up.
#[derive(Debug)]
pub struct PreparedRequest {
    /// The request; its tools are in `tools`.
    pub(super) request: ApiRequest,
    /// The scope its history is hashed in (the stored history a `previous_response_id` puts
    /// in front does not change it).
    pub(super) scope: String,
    /// The hashes of its history and the hasher over all its messages; `None` when it
    /// continues a stored response, whose history goes first.
    pub(super) hashes: Option<Hashes>,
    /// What its CLI is set up with and first told.
    pub(super) offer: Offer,
    /// A Managed Agents session's turn: the session, whose conversation it continues alone,
    /// and the agent's tools its CLI runs. `None` for a client's request.
    pub(super) session: Option<SessionTurn>,
}

/// What a request's CLI is set up with and first told, made ahead of the engine's lock: its
/// client tools, the prompt a new session starts with, and its structured-output mode.
#[derive(Debug)]
pub(super) struct Offer {
    /// The names the model sees for its client tools, with the client's own.
    pub(super) client_tools: BTreeMap<String, String>,
    /// Its tools as the client MCP server offers them (enabled built-ins included: they are
    /// left out when its CLI starts).
    pub(super) tools: Vec<McpTool>,
    /// The tools' JSON, as `tools/list` lists them.
    pub(super) listed: std::sync::Arc<str>,
    /// SHA-256 (hex) of the tools' JSON: the part of a CLI's settings they make.
    pub(super) tools_digest: String,
    /// The prompt a new session for it starts with — its messages, or for a history the
    /// gateway does not hold, the rebuilt transcript — serialized; `None` with `hashes`.
    pub(super) start_prompt: Option<ReadyPrompt>,
    /// The structured-output mode it asks for, if any.
    pub(super) structured: Option<Structured>,
}

/// What a Managed Agents session's turn adds to its Messages request.
#[derive(Debug, Clone)]
pub(super) struct SessionTurn {
    /// The session's id.
    pub(super) id: String,
    /// The agent's tools its CLI runs.
    pub(super) tools: SessionTools,
}

impl PreparedRequest {
    /// Prepares a read and checked request of `tenant`.
    pub fn new(tenant: &str, request: ApiRequest) -> PreparedRequest {
        PreparedRequest::prepare(tenant, request, None)
    }

    /// A Managed Agents session's turn, prepared: its history is hashed in the session's own
    /// scope, so that its conversation continues no other session's (and no client's) even
    /// where their messages are the same.
    pub(super) fn for_session(
        tenant: &str,
        request: ApiRequest,
        session: SessionTurn,
    ) -> PreparedRequest {
        PreparedRequest::prepare(tenant, request, Some(session))
    }

    fn prepare(
        tenant: &str,
        mut request: ApiRequest,
        session: Option<SessionTurn>,
    ) -> PreparedRequest {
        let mut scope = request_scope(tenant, &request);
        let mut namespace = tenant.to_owned();
        if let Some(turn) = &session {
            scope.push_str("\nsession ");
            scope.push_str(&turn.id);
            namespace.push_str("\nsession ");
            namespace.push_str(&turn.id);
        }
        // (A history made whole by the gateway first is hashed then.)
        let whole = request.previous_response_id.is_none() && request.references.is_empty();
        let hashes = whole.then(|| history_hashes(&namespace, &scope, &request.conversation));
        let start_prompt = hashes.as_ref().map(|_| {
            let messages = &request.conversation.messages;
            let blocks = match request.conversation.history_len() {
                0 => prompt_blocks(messages),
                _ => rebuild_prompt(messages),
            };
            ReadyPrompt::new(&Value::Array(prompt_content(&blocks)))
        });
        let structured = structured(&request);
        let client_tools = client_tool_names(&request.conversation, CLIENT_SERVER);
        let tools: Vec<McpTool> = std::mem::take(&mut request.conversation.tools)
            .into_iter()
            .map(|t| {
                let mut tool = McpTool::new(t.name, t.description, t.input_schema);
                // Lets the CLI ask for every call of one message at once (docs/HOLD.md,
                // "Several calls in one model message").
                tool.annotations = Some(json!({"readOnlyHint": true}));
                tool
            })
            .collect();
        // Serialized here, ahead of the engine: the digest, and what the CLI's `tools/list`
        // is answered with.
        let listed: std::sync::Arc<str> = serde_json::to_string(&tools)
            .expect("tools serialize")
            .into();
        // The digest does not depend on the order of the keys of the tools' schemas.
        let tools_digest = {
            use sha2::Digest;
            let value = serde_json::to_value(&tools).expect("tools serialize");
            let mut sha = sha2::Sha256::new();
            serde_json::to_writer(
                crate::conversation::ShaWriter(&mut sha),
                &crate::json::Sorted(&value),
            )
            .expect("a value serializes");
            crate::conversation::hex(&sha.finalize())
        };
        let offer = Offer {
            client_tools,
            tools,
            listed,
            tools_digest,
            start_prompt,
            structured,
        };
        PreparedRequest {
            request,
            scope,
            hashes,
            offer,
            session,
        }
    }

    /// The request (its `tools` moved out, to the MCP tools its CLI will offer).
    pub fn request(&self) -> &ApiRequest {
        &self.request
    }

    /// The key that says which gateway must serve it, for `tenant` (the one it was prepared
    /// for): what [`Gateway::route_key`](super::Gateway::route_key) computes from its body.
    pub fn route_key(&self, tenant: &str) -> RouteKey {
        if let Some(previous) = &self.request.previous_response_id {
            return RouteKey::Conversation(stored_response_key(tenant, previous));
        }
        // The gateway that holds the responses whose items it names.
        let referenced = self.request.references.iter().find_map(|r| r.response_id());
        if let Some(response) = referenced {
            return RouteKey::Conversation(stored_response_key(tenant, &response));
        }
        match &self.hashes {
            Some(hashes) if self.request.conversation.history_len() > 0 => {
                RouteKey::Conversation(hashes.live.clone())
            }
            _ => RouteKey::New,
        }
    }
}

/// Reads a request of one of the three APIs, checks that the gateway can serve it
/// ([`parse_request`](super::parse_request)) and prepares it for `tenant`. Linear in the
/// body's size.
///
/// # Errors
/// Those of [`parse_request`](super::parse_request).
pub(crate) fn prepare_request(
    api: Api,
    tenant: &str,
    body: &[u8],
) -> Result<PreparedRequest, ApiError> {
    super::parse_request(api, body).map(|r| PreparedRequest::new(tenant, r))
}
