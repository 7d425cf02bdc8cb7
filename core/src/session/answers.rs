//! The host's answers to the CLI's control requests (in driver mode): permission decisions,
//! elicitation and dialog results, hook and MCP answers, errors; each checked against the
//! request it answers.

use serde_json::{json, Value};

use super::control::HostAnswer;
use super::state::{Incoming, IncomingKind, State};
use super::{CommandError, Delivery, PermissionDecision};
use crate::chunk::ResolveReason;
use crate::mcp::{self, McpCallResult};
use crate::Timestamp;

impl State {
    fn find_incoming(&self, request_id: &str) -> Result<Option<&Incoming>, CommandError> {
        self.check_driver()?;
        match self.incoming.iter().find(|r| r.request_id == request_id) {
            Some(req) => Ok(Some(req)),
            None if self.is_settled(request_id) => Ok(None),
            None => Err(CommandError::UnknownRequest(request_id.to_owned())),
        }
    }

    fn wrong_kind(request_id: &str, expected: &'static str, req: &Incoming) -> CommandError {
        CommandError::WrongRequestKind {
            request_id: request_id.to_owned(),
            expected,
            actual: req.kind.name(),
        }
    }

    pub fn respond_permission(
        &mut self,
        _now: Timestamp,
        request_id: &str,
        decision: PermissionDecision,
    ) -> Result<Delivery, CommandError> {
        let Some(req) = self.find_incoming(request_id)? else {
            return Ok(Delivery::Dropped);
        };
        let IncomingKind::Permission { input } = &req.kind else {
            return Err(Self::wrong_kind(request_id, "permission", req));
        };
        let payload = match decision {
            PermissionDecision::Allow {
                updated_input,
                updated_permissions,
            } => {
                let mut payload = json!({
                    "behavior": "allow",
                    "updatedInput": updated_input.unwrap_or_else(|| input.to_value()),
                });
                if !updated_permissions.is_empty() {
                    payload["updatedPermissions"] = Value::Array(updated_permissions);
                }
                payload
            }
            PermissionDecision::Deny { message, interrupt } => {
                let mut payload = json!({"behavior": "deny", "message": message});
                if interrupt {
                    payload["interrupt"] = json!(true);
                }
                payload
            }
        };
        self.answer_success(request_id, payload);
        Ok(Delivery::Sent)
    }

    pub fn respond_elicitation(
        &mut self,
        _now: Timestamp,
        request_id: &str,
        answer: Value,
    ) -> Result<Delivery, CommandError> {
        self.respond_request(request_id, answer, "elicitation", |k| {
            matches!(k, IncomingKind::Elicitation)
        })
    }

    pub fn respond_user_dialog(
        &mut self,
        _now: Timestamp,
        request_id: &str,
        answer: Value,
    ) -> Result<Delivery, CommandError> {
        self.respond_request(request_id, answer, "dialog", |k| {
            matches!(k, IncomingKind::Dialog)
        })
    }

    fn respond_request(
        &mut self,
        request_id: &str,
        answer: Value,
        expected: &'static str,
        is: fn(&IncomingKind) -> bool,
    ) -> Result<Delivery, CommandError> {
        let Some(req) = self.find_incoming(request_id)? else {
            return Ok(Delivery::Dropped);
        };
        if !is(&req.kind) {
            return Err(Self::wrong_kind(request_id, expected, req));
        }
        self.resolve(request_id, ResolveReason::Host, answer);
        Ok(Delivery::Sent)
    }

    pub fn respond_hook(
        &mut self,
        _now: Timestamp,
        request_id: &str,
        output: Value,
    ) -> Result<Delivery, CommandError> {
        let Some(req) = self.find_incoming(request_id)? else {
            return Ok(Delivery::Dropped);
        };
        if !matches!(req.kind, IncomingKind::Hook { .. }) {
            return Err(Self::wrong_kind(request_id, "hook", req));
        }
        self.answer_success(request_id, output);
        Ok(Delivery::Sent)
    }

    pub fn respond_mcp(
        &mut self,
        _now: Timestamp,
        request_id: &str,
        result: &McpCallResult,
    ) -> Result<Delivery, CommandError> {
        let Some(req) = self.find_incoming(request_id)? else {
            return Ok(Delivery::Dropped);
        };
        let IncomingKind::McpCall { rpc_id, .. } = &req.kind else {
            return Err(Self::wrong_kind(request_id, "MCP tool call", req));
        };
        let answer = mcp::call_result(&rpc_id.to_value(), result);
        self.answer_success(request_id, json!({"mcp_response": answer}));
        Ok(Delivery::Sent)
    }

    pub fn respond_error(
        &mut self,
        _now: Timestamp,
        request_id: &str,
        message: &str,
    ) -> Result<Delivery, CommandError> {
        if self.find_incoming(request_id)?.is_none() {
            return Ok(Delivery::Dropped);
        }
        self.answer_error(request_id, message, None);
        Ok(Delivery::Sent)
    }

    pub(super) fn answer_success(&mut self, request_id: &str, payload: Value) {
        let frame = json!({"type": "control_response", "response": {
            "subtype": "success", "request_id": request_id, "response": payload,
        }});
        self.write(&frame);
        self.host_answered(request_id, true, &frame["response"]["response"]);
    }

    pub(super) fn answer_error(&mut self, request_id: &str, error: &str, code: Option<&str>) {
        let mut response = json!({"subtype": "error", "request_id": request_id, "error": error});
        if let Some(code) = code {
            response["error_code"] = json!(code);
        }
        self.write(&json!({"type": "control_response", "response": response}));
        self.host_answered(request_id, false, &Value::Null);
    }

    /// The host's own answer, written: settled as an observed one would be.
    pub(super) fn host_answered(&mut self, request_id: &str, ok: bool, payload: &Value) {
        let Some(req) = self.take_incoming(request_id) else {
            return;
        };
        self.settle(req.request_id.clone());
        let answer = HostAnswer {
            behavior: payload.get("behavior").and_then(Value::as_str),
            interrupt: payload.get("interrupt").and_then(Value::as_bool) == Some(true),
            hook_decision: payload
                .get("hookSpecificOutput")
                .and_then(|h| h.get("permissionDecision"))
                .and_then(Value::as_str),
        };
        self.answered(req, ok, &answer);
    }
}
