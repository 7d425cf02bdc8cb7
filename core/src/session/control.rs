//! The control channel: requests both ways, their answers, cancellations and deadlines.

use std::borrow::Cow;

use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::state::{Incoming, IncomingKind, Outgoing, State};
use super::{line_error, Mode};
use crate::chunk::{
    Behavior, Chunk, ElicitationDetails, ErrorKind, ResolveReason, StatusReason, ToolStatus,
};
use crate::json::Json;
use crate::mcp::{self, McpCallResult};
use crate::wire::{
    CancelledParams, ControlRequestBody, ControlResponseBody, HookAnswer, HookInput,
    InboundRequest, InitializeResponse, JsonRpc, PermissionAnswer, ToolsCallParams, WireMessage,
};
use crate::Timestamp;

/// Control requests the official SDKs deliberately leave unanswered (as they do dialogs).
fn left_unanswered(subtype: &str) -> bool {
    subtype.starts_with("remote_")
}

impl State {
    // ---- CLI → host requests -------------------------------------------------------------

    pub fn on_cli_request(&mut self, now: Timestamp, msg: &WireMessage<'_>, text: &str) {
        let (Some(request_id), Some(raw)) = (msg.request_id.as_deref(), msg.request) else {
            self.invalid("a control_request needs `request_id` and `request`", text);
            return;
        };
        let Ok(body) = serde_json::from_str::<ControlRequestBody<'_>>(raw.get()) else {
            self.invalid("`request` needs a string `subtype`", text);
            return;
        };
        if self.incoming.iter().any(|r| r.request_id == request_id) || self.is_settled(request_id) {
            // A request id is asked once (as the SDKs render a replayed request once): one
            // answer settles the CLI's one pending request under it, so the repeat is reported
            // and gets no second request chunk, nor a second answer.
            let chunk = line_error(
                ErrorKind::InvalidMessage,
                format!(
                    "a control_request reuses the id {request_id} of a request already seen; \
                     the repeat was dropped"
                ),
                text.as_bytes(),
            );
            self.emit(chunk);
            return;
        }
        let request_id = request_id.to_owned();
        match InboundRequest::from_wire(&body.subtype) {
            Some(InboundRequest::CanUseTool) => self.on_can_use_tool(now, request_id, &body),
            Some(InboundRequest::HookCallback) => self.on_hook_callback(now, request_id, &body),
            Some(InboundRequest::McpMessage) => self.on_mcp_message(now, request_id, &body, text),
            Some(InboundRequest::Elicitation) => self.on_elicitation(now, request_id, raw, text),
            Some(InboundRequest::RequestUserDialog) => {
                self.on_user_dialog(now, request_id, raw, text);
            }
            None => {
                self.unknown(text);
                if left_unanswered(&body.subtype) {
                    return;
                }
                self.push_incoming(request_id.clone(), IncomingKind::Other, None, None);
                if self.mode == Mode::Driver {
                    let error = format!("Unsupported control request subtype: {}", body.subtype);
                    self.answer_error(&request_id, &error, Some("unsupported_request"));
                }
            }
        }
    }

    fn on_elicitation(&mut self, now: Timestamp, request_id: String, raw: &RawValue, text: &str) {
        #[derive(serde::Deserialize)]
        struct Elicitation<'a> {
            #[serde(borrow)]
            mcp_server_name: Cow<'a, str>,
            #[serde(borrow)]
            message: Cow<'a, str>,
            #[serde(borrow, default)]
            mode: Option<Cow<'a, str>>,
            #[serde(borrow, default)]
            url: Option<Cow<'a, str>>,
            #[serde(borrow, default)]
            elicitation_id: Option<Cow<'a, str>>,
            #[serde(borrow, default)]
            requested_schema: Option<&'a RawValue>,
            #[serde(borrow, default)]
            title: Option<Cow<'a, str>>,
            #[serde(borrow, default)]
            display_name: Option<Cow<'a, str>>,
            #[serde(borrow, default)]
            description: Option<Cow<'a, str>>,
        }
        let own = |s: Option<Cow<'_, str>>| s.map(Cow::into_owned);
        let handled = self.mode == Mode::Observer || self.config.elicitations;
        match serde_json::from_str::<Elicitation<'_>>(raw.get()) {
            Ok(e) => {
                // The elicitation holds up the running call of that server's tool, if any.
                let prefix = format!("mcp__{}__", e.mcp_server_name);
                let tool_use_id = self.running_tool(&prefix);
                let deadline = if handled && self.mode == Mode::Driver {
                    self.config.timeouts.elicitation_ms.map(|t| now + t)
                } else {
                    None
                };
                self.emit(Chunk::ElicitationRequest {
                    request_id: request_id.clone(),
                    server: e.mcp_server_name.into_owned(),
                    message: e.message.into_owned(),
                    details: Box::new(ElicitationDetails {
                        mode: own(e.mode),
                        url: own(e.url),
                        elicitation_id: own(e.elicitation_id),
                        requested_schema: e
                            .requested_schema
                            .map(Json::canonical)
                            .unwrap_or_else(Json::null),
                        title: own(e.title),
                        display_name: own(e.display_name),
                        description: own(e.description),
                    }),
                    tool_use_id: tool_use_id.clone(),
                    deadline_ms: deadline,
                });
                self.push_incoming(
                    request_id.clone(),
                    IncomingKind::Elicitation,
                    tool_use_id,
                    deadline,
                );
            }
            Err(err) => {
                self.invalid(&format!("an elicitation {err}"), text);
                self.push_incoming(request_id.clone(), IncomingKind::Elicitation, None, None);
            }
        }
        if !handled {
            // What the official SDKs answer when no handler is set.
            self.resolve(
                &request_id,
                ResolveReason::Default,
                json!({"action": "decline"}),
            );
        }
    }

    fn on_user_dialog(&mut self, now: Timestamp, request_id: String, raw: &RawValue, text: &str) {
        #[derive(serde::Deserialize)]
        struct Dialog<'a> {
            #[serde(borrow)]
            dialog_kind: Cow<'a, str>,
            #[serde(borrow, default)]
            payload: Option<&'a RawValue>,
            #[serde(borrow, default)]
            tool_use_id: Option<Cow<'a, str>>,
        }
        match serde_json::from_str::<Dialog<'_>>(raw.get()) {
            Ok(d) => {
                let deadline = if self.mode == Mode::Driver {
                    self.config.timeouts.dialog_ms.map(|t| now + t)
                } else {
                    None
                };
                let tool_use_id = d.tool_use_id.map(Cow::into_owned);
                self.emit(Chunk::DialogRequest {
                    request_id: request_id.clone(),
                    dialog_kind: d.dialog_kind.into_owned(),
                    payload: d
                        .payload
                        .map(Json::canonical)
                        .unwrap_or_else(Json::empty_object),
                    tool_use_id: tool_use_id.clone(),
                    deadline_ms: deadline,
                });
                self.push_incoming(request_id, IncomingKind::Dialog, tool_use_id, deadline);
            }
            // Left unanswered, as any dialog: the host must not answer a kind it cannot show.
            Err(err) => self.invalid(&format!("a request_user_dialog {err}"), text),
        }
    }

    /// The running tool whose name starts with `prefix`, the latest first.
    fn running_tool(&self, prefix: &str) -> Option<String> {
        self.turn_tools
            .iter()
            .rev()
            .find(|id| {
                self.tools.get(*id).is_some_and(|t| {
                    t.name.starts_with(prefix) && !t.has_result && !t.status.is_final()
                })
            })
            .cloned()
    }

    /// Answers an elicitation or a dialog and says who settled it.
    pub(super) fn resolve(&mut self, request_id: &str, reason: ResolveReason, answer: Value) {
        let response = Json::from_value(&answer);
        self.answer_success(request_id, answer);
        self.emit(Chunk::RequestResolved {
            request_id: request_id.to_owned(),
            reason,
            response,
        });
    }

    fn push_incoming(
        &mut self,
        request_id: String,
        kind: IncomingKind,
        tool_use_id: Option<String>,
        deadline: Option<Timestamp>,
    ) {
        self.incoming.push(Incoming {
            request_id,
            kind,
            tool_use_id,
            deadline,
        });
    }

    fn on_can_use_tool(
        &mut self,
        now: Timestamp,
        request_id: String,
        body: &ControlRequestBody<'_>,
    ) {
        let deadline = self.config.timeouts.permission_ms.map(|t| now + t);
        let tool_use_id = body.tool_use_id.as_deref().map(str::to_owned);
        let input = body
            .input
            .map(Json::canonical)
            .unwrap_or_else(Json::empty_object);
        self.emit(Chunk::PermissionRequest {
            request_id: request_id.clone(),
            tool_use_id: tool_use_id.clone(),
            tool_name: body.tool_name.as_deref().unwrap_or_default().to_owned(),
            input: input.clone(),
            suggestions: body
                .permission_suggestions
                .map(Json::canonical)
                .unwrap_or_else(|| Json::parse("[]").expect("[] is JSON")),
            blocked_path: body.blocked_path.as_deref().map(str::to_owned),
            deadline_ms: deadline,
        });
        if let Some(id) = &tool_use_id {
            self.set_status(id, ToolStatus::AwaitingApproval, None);
        }
        self.push_incoming(
            request_id,
            IncomingKind::Permission { input },
            tool_use_id,
            deadline,
        );
    }

    fn on_hook_callback(
        &mut self,
        now: Timestamp,
        request_id: String,
        body: &ControlRequestBody<'_>,
    ) {
        let deadline = self.config.timeouts.hook_ms.map(|t| now + t);
        let event = body
            .input
            .and_then(|raw| serde_json::from_str::<HookInput<'_>>(raw.get()).ok())
            .and_then(|h| h.hook_event_name.map(|e| e.into_owned()));
        let tool_use_id = body.tool_use_id.as_deref().map(str::to_owned);
        self.emit(Chunk::HookRequest {
            request_id: request_id.clone(),
            callback_id: body.callback_id.as_deref().unwrap_or_default().to_owned(),
            event: event.clone(),
            tool_use_id: tool_use_id.clone(),
            input: body.input.map(Json::canonical).unwrap_or_else(Json::null),
            deadline_ms: deadline,
        });
        let pre_tool = event.as_deref() == Some("PreToolUse");
        self.push_incoming(
            request_id,
            IncomingKind::Hook { pre_tool },
            tool_use_id,
            deadline,
        );
    }

    fn on_mcp_message(
        &mut self,
        now: Timestamp,
        request_id: String,
        body: &ControlRequestBody<'_>,
        text: &str,
    ) {
        let server = body.server_name.as_deref().unwrap_or_default().to_owned();
        let Some(rpc) = body
            .message
            .and_then(|raw| serde_json::from_str::<JsonRpc<'_>>(raw.get()).ok())
        else {
            self.invalid("`message` of mcp_message must be a JSON-RPC message", text);
            return;
        };
        match rpc.method.as_deref() {
            Some("tools/call") => {
                let params = rpc
                    .params
                    .and_then(|raw| serde_json::from_str::<ToolsCallParams<'_>>(raw.get()).ok());
                let tool = params
                    .as_ref()
                    .and_then(|p| p.name.as_deref())
                    .unwrap_or_default()
                    .to_owned();
                let tool_use_id = params
                    .as_ref()
                    .and_then(|p| p.meta.as_ref())
                    .and_then(|m| m.tool_use_id.as_deref())
                    .map(str::to_owned);
                let arguments = params
                    .as_ref()
                    .and_then(|p| p.arguments)
                    .map(Json::canonical)
                    .unwrap_or_else(Json::empty_object);
                let deadline = self.config.timeouts.mcp_call_ms.map(|t| now + t);
                self.emit(Chunk::McpToolCall {
                    request_id: request_id.clone(),
                    server: server.clone(),
                    tool: tool.clone(),
                    arguments,
                    tool_use_id: tool_use_id.clone(),
                    deadline_ms: deadline,
                });
                if let Some(id) = &tool_use_id {
                    self.mark_running(id);
                }
                let rpc_id = rpc.id.map(Json::canonical).unwrap_or_else(Json::null);
                let kind = IncomingKind::McpCall {
                    server,
                    rpc_id,
                    tool,
                };
                self.push_incoming(request_id, kind, tool_use_id, deadline);
            }
            Some("notifications/cancelled") => {
                let params = rpc
                    .params
                    .and_then(|raw| serde_json::from_str::<CancelledParams<'_>>(raw.get()).ok());
                let cancelled_rpc = params
                    .as_ref()
                    .and_then(|p| p.request_id)
                    .map(Json::canonical);
                let reason = params
                    .as_ref()
                    .and_then(|p| p.reason.as_deref())
                    .map(str::to_owned);
                let held = self.incoming.iter().position(|req| {
                    matches!(&req.kind, IncomingKind::McpCall { server: s, rpc_id, .. }
                        if *s == server && Some(rpc_id) == cancelled_rpc.as_ref())
                });
                if let Some(pos) = held {
                    let call = self.incoming.remove(pos);
                    if let Some(id) = &call.tool_use_id {
                        self.note_reason(id, StatusReason::Interrupted);
                    }
                    self.emit(Chunk::McpToolCancelled {
                        request_id: call.request_id.clone(),
                        cancel_request_id: request_id.clone(),
                        tool_use_id: call.tool_use_id.clone(),
                        reason,
                    });
                    self.settle(call.request_id);
                }
                self.answer_mcp_internally(request_id, &server, &rpc);
            }
            method => {
                // Driver mode answers these itself; the chunk keeps driver and observer output
                // alike, so a recorded session replays to the chunks it produced live.
                self.emit(Chunk::McpRequest {
                    request_id: request_id.clone(),
                    server: server.clone(),
                    method: method.map(str::to_owned),
                });
                self.answer_mcp_internally(request_id, &server, &rpc);
            }
        }
    }

    /// Records an MCP request the session answers itself (driver mode) or sees answered.
    fn answer_mcp_internally(&mut self, request_id: String, server: &str, rpc: &JsonRpc<'_>) {
        self.push_incoming(request_id.clone(), IncomingKind::Other, None, None);
        if self.mode != Mode::Driver {
            return;
        }
        if let Some(line) = mcp::tools_list_line(&self.config.mcp_servers, server, &request_id, rpc)
        {
            // Written straight from the tools: a client's tools can be hundreds of thousands,
            // too many to copy into JSON values first.
            self.write_line(line);
            self.host_answered(&request_id, true, &Value::Null);
            return;
        }
        let id: Option<Value> = rpc.id.and_then(|raw| serde_json::from_str(raw.get()).ok());
        let params: Option<Value> = rpc
            .params
            .and_then(|raw| serde_json::from_str(raw.get()).ok());
        let answer = mcp::answer_handshake(
            &self.config.mcp_servers,
            server,
            rpc.method.as_deref(),
            id.as_ref(),
            params.as_ref(),
        );
        self.answer_success(&request_id, json!({"mcp_response": answer}));
    }

    // ---- CLI → host answers and cancellations --------------------------------------------

    pub fn on_cli_response(&mut self, msg: &WireMessage<'_>, text: &str) {
        let Some(body) = self.response_body(msg, text) else {
            return;
        };
        let request_id = body.request_id.as_ref();
        let subtype = match self
            .outgoing
            .iter()
            .position(|o| o.request_id == request_id)
        {
            Some(pos) => Some(self.outgoing.remove(pos).subtype),
            None if self.is_settled(request_id) => return,
            None => None,
        };
        let ok = body.subtype == "success";
        let response = ok.then(|| {
            body.response
                .map(Json::canonical)
                .unwrap_or_else(Json::empty_object)
        });
        let is_initialize = subtype.as_deref() == Some("initialize");
        let is_interrupt = subtype.as_deref() == Some("interrupt");
        let ready = if ok {
            body.response
                .and_then(|raw| serde_json::from_str::<InitializeResponse<'_>>(raw.get()).ok())
                .filter(|init| {
                    is_initialize
                        || (subtype.is_none()
                            && init.claude_code_version.is_some()
                            && init.commands.is_some())
                })
                .map(|init| Chunk::Ready {
                    claude_code_version: init.claude_code_version.map(|v| v.into_owned()),
                    models: init.models.map(Json::canonical).unwrap_or_else(Json::null),
                    commands: init
                        .commands
                        .map(Json::canonical)
                        .unwrap_or_else(Json::null),
                })
        } else {
            None
        };
        self.emit(Chunk::ControlResult {
            request_id: request_id.to_owned(),
            subtype,
            ok,
            response,
            error: body.error.as_deref().map(str::to_owned).or_else(|| {
                (!ok).then(|| "the CLI answered with an error and no message".to_owned())
            }),
            error_code: body.error_code.as_deref().map(str::to_owned),
        });
        if let Some(ready) = ready {
            self.emit(ready);
        }
        if ok && is_interrupt {
            self.interrupt_tools();
        }
    }

    pub fn on_cli_cancel(&mut self, msg: &WireMessage<'_>, text: &str) {
        let Some(request_id) = msg.request_id.as_deref() else {
            self.invalid("a control_cancel_request needs `request_id`", text);
            return;
        };
        let Some(req) = self.take_incoming(request_id) else {
            if !self.is_settled(request_id) {
                self.unknown(text);
            }
            return;
        };
        self.settle(req.request_id.clone());
        match req.kind {
            IncomingKind::Permission { .. } => {
                if let Some(id) = &req.tool_use_id {
                    self.note_reason(id, StatusReason::Cancelled);
                }
                self.emit(Chunk::PermissionResolved {
                    request_id: req.request_id,
                    tool_use_id: req.tool_use_id,
                    behavior: Behavior::Deny,
                    reason: ResolveReason::Cancelled,
                });
            }
            _ => self.emit(Chunk::RequestCancelled {
                request_id: req.request_id,
            }),
        }
    }

    /// A tool_result arrived while its permission request was open: the CLI went on without
    /// the answer.
    pub fn resolve_open_permission(&mut self, tool_use_id: &str) {
        let open = self.incoming.iter().position(|req| {
            matches!(req.kind, IncomingKind::Permission { .. })
                && req.tool_use_id.as_deref() == Some(tool_use_id)
        });
        let Some(pos) = open else {
            return;
        };
        let req = self.incoming.remove(pos);
        self.settle(req.request_id.clone());
        self.note_reason(tool_use_id, StatusReason::Cancelled);
        self.emit(Chunk::PermissionResolved {
            request_id: req.request_id,
            tool_use_id: req.tool_use_id,
            behavior: Behavior::Deny,
            reason: ResolveReason::Cancelled,
        });
    }

    // ---- host → CLI requests and answers (observed, or written in driver mode) -----------

    pub fn on_host_request(&mut self, now: Timestamp, msg: &WireMessage<'_>, text: &str) {
        let (Some(request_id), Some(raw)) = (msg.request_id.as_deref(), msg.request) else {
            self.invalid("a control_request needs `request_id` and `request`", text);
            return;
        };
        let subtype = raw_subtype(raw.get()).unwrap_or_default();
        self.host_request(now, request_id.to_owned(), subtype);
    }

    /// A control request the host sent: its answer is awaited (until the request deadline).
    /// The body of a `control_response` (either way); one without its subtype and request id
    /// is reported as invalid.
    fn response_body<'m>(
        &mut self,
        msg: &WireMessage<'m>,
        text: &str,
    ) -> Option<ControlResponseBody<'m>> {
        let body = (msg.response)
            .and_then(|raw| serde_json::from_str::<ControlResponseBody<'m>>(raw.get()).ok());
        if body.is_none() {
            self.invalid(
                "a control_response needs `response.subtype` and `response.request_id`",
                text,
            );
        }
        body
    }

    pub fn host_request(&mut self, now: Timestamp, request_id: String, subtype: String) {
        self.outgoing.push(Outgoing {
            request_id,
            subtype,
            deadline: self.config.timeouts.request_ms.map(|t| now + t),
        });
    }

    pub fn on_host_response(&mut self, msg: &WireMessage<'_>, text: &str) {
        let Some(body) = self.response_body(msg, text) else {
            return;
        };
        let Some(req) = self.take_incoming(&body.request_id) else {
            return;
        };
        self.settle(req.request_id.clone());
        let ok = body.subtype == "success";
        if matches!(req.kind, IncomingKind::Elicitation | IncomingKind::Dialog)
            && self.mode == Mode::Observer
        {
            // (A driver's own answers say who settled them as they are written.)
            self.emit(Chunk::RequestResolved {
                request_id: req.request_id.clone(),
                reason: ResolveReason::Host,
                response: body
                    .response
                    .map(Json::canonical)
                    .unwrap_or_else(Json::null),
            });
        }
        let response = body.response.map(RawValue::get);
        let permission = match req.kind {
            IncomingKind::Permission { .. } => {
                response.and_then(|raw| serde_json::from_str::<PermissionAnswer<'_>>(raw).ok())
            }
            _ => None,
        };
        let hook = match req.kind {
            IncomingKind::Hook { pre_tool: true } => {
                response.and_then(|raw| serde_json::from_str::<HookAnswer<'_>>(raw).ok())
            }
            _ => None,
        };
        let answer = HostAnswer {
            behavior: permission.as_ref().and_then(|a| a.behavior.as_deref()),
            interrupt: permission.as_ref().and_then(|a| a.interrupt) == Some(true),
            hook_decision: hook
                .as_ref()
                .and_then(|a| a.hook_specific_output.as_ref())
                .and_then(|h| h.permission_decision.as_deref()),
        };
        self.answered(req, ok, &answer);
    }

    /// What the host's answer (`ok`: a success) to one of the CLI's requests means for its tool.
    pub(super) fn answered(&mut self, req: Incoming, ok: bool, answer: &HostAnswer<'_>) {
        match req.kind {
            IncomingKind::Permission { .. } => {
                let allow = ok && answer.behavior == Some("allow");
                let behavior = if allow {
                    Behavior::Allow
                } else {
                    Behavior::Deny
                };
                self.emit(Chunk::PermissionResolved {
                    request_id: req.request_id,
                    tool_use_id: req.tool_use_id.clone(),
                    behavior,
                    reason: ResolveReason::Host,
                });
                if let Some(id) = &req.tool_use_id {
                    if allow {
                        self.mark_running(id);
                    } else {
                        self.note_reason(id, StatusReason::Denied);
                        if answer.interrupt {
                            self.interrupt_tools();
                        }
                    }
                }
            }
            IncomingKind::Hook { pre_tool: true } if ok => {
                if let Some(id) = &req.tool_use_id {
                    match answer.hook_decision {
                        Some("allow") => self.mark_running(id),
                        Some("deny") => self.note_reason(id, StatusReason::Denied),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }

    // ---- deadlines -----------------------------------------------------------------------

    pub fn handle_timeout(&mut self, now: Timestamp) {
        let expired: Vec<String> = self
            .incoming
            .iter()
            .filter(|r| r.deadline.is_some_and(|d| d <= now))
            .map(|r| r.request_id.clone())
            .collect();
        for request_id in expired {
            let Some(req) = self.incoming.iter().find(|r| r.request_id == request_id) else {
                continue;
            };
            match &req.kind {
                IncomingKind::Permission { .. } => {
                    let tool_use_id = req.tool_use_id.clone();
                    if let Some(id) = &tool_use_id {
                        self.note_reason(id, StatusReason::Timeout);
                    }
                    self.emit(Chunk::PermissionResolved {
                        request_id: request_id.clone(),
                        tool_use_id,
                        behavior: Behavior::Deny,
                        reason: ResolveReason::Timeout,
                    });
                    // Resolved above; the answer below is then observed as settled.
                    let pos = self
                        .incoming
                        .iter()
                        .position(|r| r.request_id == request_id);
                    let req = self.incoming.remove(pos.expect("found above"));
                    self.settle(request_id.clone());
                    let payload = json!({
                        "behavior": "deny",
                        "message": "The host did not answer the permission request in time.",
                    });
                    drop(req);
                    self.answer_success(&request_id, payload);
                }
                IncomingKind::Hook { .. } => {
                    self.answer_success(&request_id, json!({}));
                }
                IncomingKind::McpCall { tool, rpc_id, .. } => {
                    let text =
                        format!("The client did not return a result for tool '{tool}' in time.");
                    let answer = mcp::call_result(&rpc_id.to_value(), &McpCallResult::error(text));
                    self.answer_success(&request_id, json!({"mcp_response": answer}));
                }
                IncomingKind::Elicitation => {
                    let answer = json!({"action": "cancel"});
                    self.resolve(&request_id, ResolveReason::Timeout, answer);
                }
                IncomingKind::Dialog => {
                    let answer = json!({"behavior": "cancelled"});
                    self.resolve(&request_id, ResolveReason::Timeout, answer);
                }
                IncomingKind::Other => {}
            }
        }
        let (expired, pending): (Vec<Outgoing>, Vec<Outgoing>) = std::mem::take(&mut self.outgoing)
            .into_iter()
            .partition(|o| o.deadline.is_some_and(|d| d <= now));
        self.outgoing = pending;
        for req in expired {
            self.emit(Chunk::ControlResult {
                request_id: req.request_id.clone(),
                subtype: Some(req.subtype),
                ok: false,
                response: None,
                error: Some("timeout".to_owned()),
                error_code: None,
            });
            self.settle(req.request_id);
        }
    }
}

/// The `subtype` of a request object.
/// The parts of a host's answer to a CLI request the engine follows.
pub(super) struct HostAnswer<'a> {
    /// A permission answer's `behavior`.
    pub(super) behavior: Option<&'a str>,
    /// A permission denial's `interrupt`.
    pub(super) interrupt: bool,
    /// A PreToolUse hook answer's `hookSpecificOutput.permissionDecision`.
    pub(super) hook_decision: Option<&'a str>,
}

fn raw_subtype(request: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Sub<'a> {
        #[serde(borrow)]
        subtype: Option<std::borrow::Cow<'a, str>>,
    }
    let sub: Sub<'_> = serde_json::from_str(request).ok()?;
    sub.subtype.map(|s| s.into_owned())
}
