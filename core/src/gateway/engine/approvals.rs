//! Approvals over HTTP: permission requests of the CLI that wait for a person's answer.

use serde_json::{json, Value};

use super::{tenant_id, Gateway, GatewayOutput, RequestId, Watch};
use crate::api::{ApiError, ApiErrorKind};
use crate::gateway::{approval_route_key, SessionId};
use crate::session::PermissionDecision;
use crate::{Chunk, Timestamp};

/// A permission request of the CLI waiting for a person's answer.
#[derive(Debug)]
pub(super) struct Approval {
    pub(super) session: SessionId,
    /// The conversation's id as the console lists it: its CLI session's id, which tells
    /// nothing of the gateway's other conversations.
    pub(super) conversation: String,
    /// The CLI's control request id.
    pub(super) request_id: String,
    pub(super) tenant: String,
    pub(super) tool_name: String,
    pub(super) tool_use_id: Option<String>,
    pub(super) input: crate::Json,
    pub(super) suggestions: crate::Json,
    pub(super) blocked_path: Option<String>,
    pub(super) created: Timestamp,
    pub(super) deadline: Timestamp,
}

impl Gateway {
    /// `GET /v1/approvals`: the permission requests of `tenant`'s conversations waiting for an
    /// answer, oldest first.
    pub fn approvals(&self, tenant: &str) -> Value {
        self.approvals_in(Some(tenant))
    }

    /// [`approvals`](Self::approvals) of a tenant (`Some`) or, for the operator, of every
    /// tenant (`None`: each names its tenant's id).
    pub(super) fn approvals_in(&self, scope: Option<&str>) -> Value {
        let data: Vec<Value> = (self.approvals.iter())
            .filter(|(_, a)| scope.is_none_or(|t| a.tenant == t))
            .map(|(id, a)| self.approval_json(id, a, scope.is_none()))
            .collect();
        json!({"object": "list", "data": data})
    }

    /// The CLI's suggested permission updates, made to save to the tenant's own settings
    /// (its home's) where tenants have their own homes: the working directory's settings
    /// files may be shared by every tenant ([`shared_cwd`](super::GatewayConfig::shared_cwd)).
    fn own_settings(&self, mut updates: Vec<Value>) -> Vec<Value> {
        if self.config.tenant_root.is_some() {
            for update in &mut updates {
                if let Some(destination) = update.get_mut("destination") {
                    if matches!(
                        destination.as_str(),
                        Some("localSettings" | "projectSettings")
                    ) {
                        *destination = Value::from("userSettings");
                    }
                }
            }
        }
        updates
    }

    /// `POST /v1/approvals/{id}`: a person's answer, `{"behavior": "allow" | "deny",
    /// "message"?, "updated_input"?, "remember"?}` (`remember` applies the CLI's suggested
    /// permission updates, so it stops asking for the like). Returns what was decided.
    ///
    /// # Errors
    /// 404 for an id `tenant` has no pending approval under (answered, expired, another's),
    /// 400 for a body of another shape.
    pub fn answer_approval(
        &mut self,
        now: Timestamp,
        tenant: &str,
        id: &str,
        body: &[u8],
    ) -> Result<Value, ApiError> {
        self.answer_approval_in(now, Some(tenant), id, body)
    }

    /// [`answer_approval`](Self::answer_approval) as a tenant (`Some`), or as the operator, who
    /// answers any tenant's (`None`).
    pub(super) fn answer_approval_in(
        &mut self,
        now: Timestamp,
        scope: Option<&str>,
        id: &str,
        body: &[u8],
    ) -> Result<Value, ApiError> {
        self.now = now;
        let theirs = |a: &Approval| scope.is_some_and(|t| a.tenant != t);
        if self.approvals.get(id).is_none_or(theirs) {
            return Err(ApiError::new(
                ApiErrorKind::NotFound,
                format!("no pending approval {id:?}"),
            ));
        }
        let answer: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::invalid("body", format!("the body is not JSON: {e}")))?;
        let message = answer.get("message").and_then(Value::as_str);
        if answer.get("message").is_some_and(|m| !m.is_string()) {
            return Err(ApiError::invalid("message", "message: must be a string"));
        }
        let remember = match answer.get("remember") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(ApiError::invalid("remember", "remember: must be a boolean")),
        };
        let updated_input = match answer.get("updated_input") {
            None | Some(Value::Null) => None,
            Some(v @ Value::Object(_)) => Some(v.clone()),
            Some(_) => {
                return Err(ApiError::invalid(
                    "updated_input",
                    "updated_input: must be an object (the tool's input)",
                ))
            }
        };
        let approval = &self.approvals[id];
        let decision = match answer.get("behavior").and_then(Value::as_str) {
            Some("allow") => PermissionDecision::Allow {
                updated_input,
                updated_permissions: if remember {
                    match approval.suggestions.to_value() {
                        Value::Array(updates) => self.own_settings(updates),
                        _ => Vec::new(),
                    }
                } else {
                    Vec::new()
                },
            },
            Some("deny") => PermissionDecision::deny(
                message
                    .unwrap_or("A person denied this tool call.")
                    .to_owned(),
            ),
            _ => {
                return Err(ApiError::invalid(
                    "behavior",
                    "behavior: must be \"allow\" or \"deny\"",
                ))
            }
        };
        let behavior = answer["behavior"].as_str().unwrap_or_default().to_owned();
        self.settle_approval(now, id, decision, &behavior);
        Ok(json!({"id": id, "behavior": behavior}))
    }

    /// `GET /v1/approvals/events`: a stream (SSE) of `tenant`'s approvals as they come
    /// (`event: approval`, the pending ones first) and go (`event: resolved`), with
    /// keep-alives, until the client goes away or the gateway drains.
    pub fn handle_approval_events(&mut self, now: Timestamp, request: RequestId, tenant: &str) {
        self.approval_events_in(now, request, Some(tenant));
    }

    /// [`handle_approval_events`](Self::handle_approval_events) of a tenant (`Some`) or, for
    /// the operator, of every tenant (`None`).
    pub(super) fn approval_events_in(
        &mut self,
        now: Timestamp,
        request: RequestId,
        scope: Option<&str>,
    ) {
        self.now = now;
        let mut frames = String::new();
        for (id, approval) in &self.approvals {
            if scope.is_none_or(|t| approval.tenant == t) {
                let json = self.approval_json(id, approval, scope.is_none());
                frames.push_str(&sse("approval", &json));
            }
        }
        if frames.is_empty() {
            frames.push_str(": no approval is pending\n\n");
        }
        let watch = Watch::Approvals(scope.map(str::to_owned));
        self.open_watch(request, watch, frames.into_bytes());
    }

    /// An approval as the API shows it (with its tenant's id for the operator, `whose`).
    pub(super) fn approval_json(&self, id: &str, a: &Approval, whose: bool) -> Value {
        let unix = |t: Timestamp| self.config.unix_epoch_ms.saturating_add(t);
        let mut json = json!({
            "id": id,
            "tool_name": a.tool_name,
            "input": a.input.as_raw(),
            "tool_use_id": a.tool_use_id,
            "blocked_path": a.blocked_path.as_deref().map(|p| self.tenant_path(&a.tenant, p)),
            "suggestions": a.suggestions.as_raw(),
            "conversation": a.conversation,
            "created_at_ms": unix(a.created),
            "expires_at_ms": unix(a.deadline),
        });
        if let Some(node) = &self.config.node {
            json["node"] = Value::from(node.as_str());
        }
        if whose {
            json["tenant"] = Value::from(tenant_id(&a.tenant));
        }
        json
    }

    /// `path` as `tenant` is shown it: relative to the tenant's own directory under the
    /// tenant root (`work/…`, `home/…`, `tmp/…`) when it lies there, so that no server path
    /// reaches the caller; any other path as the CLI gave it.
    fn tenant_path<'a>(&self, tenant: &str, path: &'a str) -> &'a str {
        let Some(root) = self.config.tenant_root.as_deref() else {
            return path;
        };
        let own = format!("{}/{}", root.trim_end_matches('/'), tenant_id(tenant));
        match path.strip_prefix(own.as_str()) {
            Some("" | "/") => ".",
            Some(rest) => rest.strip_prefix('/').unwrap_or(path),
            None => path,
        }
    }

    pub(super) fn on_permission_request(
        &mut self,
        now: Timestamp,
        session: SessionId,
        chunk: &Chunk,
    ) {
        let Chunk::PermissionRequest {
            request_id,
            tool_use_id,
            tool_name,
            input,
            suggestions,
            blocked_path,
            ..
        } = chunk
        else {
            return;
        };
        let Some(live) = self.lives.get_mut(&session) else {
            return;
        };
        // A Managed Agents session's CLI: the agent's policy answers, or the session's user.
        if let Some(turn) = live.request.filter(|r| self.agent_sessions.is_turn(*r)) {
            let asked = super::managed::PermissionAsked {
                request_id,
                tool_use_id: tool_use_id.as_deref(),
                tool_name,
                input,
            };
            return self.session_permission(now, session, turn, asked);
        }
        if !self.config.approvals {
            let decision = PermissionDecision::deny(
                "This gateway has no one to approve tools; the tool did not run.",
            );
            let _ = live.session.respond_permission(now, request_id, decision);
            return;
        }
        let (tenant, conversation) = (live.tenant.clone(), live.cli_id.clone());
        self.next_approval += 1;
        let id = self.secret_id("appr_", self.next_approval);
        let approval = Approval {
            session,
            conversation,
            request_id: request_id.clone(),
            tenant,
            tool_name: tool_name.clone(),
            tool_use_id: tool_use_id.clone(),
            input: input.clone(),
            suggestions: suggestions.clone(),
            blocked_path: blocked_path.clone(),
            created: now,
            deadline: now.saturating_add(self.config.approval_timeout_ms),
        };
        let tenant = approval.tenant.clone();
        if self.config.publish_index {
            let key = approval_route_key(&id);
            self.outputs.push_back(GatewayOutput::Claim { key });
        }
        self.approvals.insert(id.clone(), approval);
        self.approval_event(&tenant, "approval", |gateway, whose| {
            gateway.approval_json(&id, &gateway.approvals[&id], whose)
        });
    }

    /// Answers an approval's permission request and tells the watchers.
    pub(super) fn settle_approval(
        &mut self,
        now: Timestamp,
        id: &str,
        decision: PermissionDecision,
        how: &str,
    ) {
        let Some(approval) = self.approvals.get(id) else {
            return;
        };
        let (session, request_id) = (approval.session, approval.request_id.clone());
        self.forget_approval(id, how);
        if let Some(live) = self.lives.get_mut(&session) {
            let _ = live.session.respond_permission(now, &request_id, decision);
            self.drain_session(now, session);
        }
    }

    pub(super) fn forget_session_approvals(&mut self, session: SessionId) {
        let ids: Vec<String> = self
            .approvals
            .iter()
            .filter(|(_, a)| a.session == session)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            self.forget_approval(&id, "cancelled");
        }
    }

    /// Drops an approval and tells the watchers how it ended.
    pub(super) fn forget_approval(&mut self, id: &str, how: &str) {
        if let Some(approval) = self.approvals.remove(id) {
            if self.config.publish_index {
                let key = approval_route_key(id);
                self.outputs.push_back(GatewayOutput::Release { key });
            }
            self.approval_event(
                &approval.tenant,
                "resolved",
                |_, _| json!({"id": id, "behavior": how}),
            );
        }
    }

    /// Sends `event` to the streams of `tenant`'s approvals (`data` as it sees it) and to the
    /// operator's (as the operator sees it: `whose`).
    pub(super) fn approval_event(
        &mut self,
        tenant: &str,
        event: &str,
        data: impl Fn(&Gateway, bool) -> Value,
    ) {
        let theirs = sse(event, &data(self, false));
        let operator = sse(event, &data(self, true));
        self.send_to_watches(
            |w| matches!(w, Watch::Approvals(Some(t)) if t == tenant),
            theirs.as_bytes(),
        );
        self.send_to_watches(|w| matches!(w, Watch::Approvals(None)), operator.as_bytes());
    }
}

/// A server-sent event named `event` with `data`.
pub(super) fn sse(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}
