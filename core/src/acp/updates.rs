//! What each chunk of a session's CLI means to the editor: `session/update` notifications, the
//! answers to `session/new`, `session/load`, `session/resume`, `session/prompt` and the
//! settings, permission questions, and the tool calls the editor carries out.

use serde_json::{json, Value};

use super::schema::v1::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, ContentBlock, ContentChunk,
    Cost, Error, LoadSessionResponse, NewSessionResponse, PermissionOption, PermissionOptionKind,
    PromptResponse, RequestPermissionRequest, ResumeSessionResponse, SessionNotification,
    SessionUpdate, StopReason, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
    UnstructuredCommandInput, UsageUpdate, CLIENT_METHOD_NAMES,
};
use super::{editor, rpc, settings, tools, AcpOutput, Agent, Ask, Opening, MODES};
use crate::Chunk;

impl Agent {
    /// What one chunk of a session's CLI means to the editor.
    pub(super) fn chunk(&mut self, session_id: &str, chunk: Chunk) {
        let now = self.now;
        let Some(live) = self.sessions.get_mut(session_id) else {
            return;
        };
        // A tool call for the editor to carry out, once the lines before it are out.
        let mut editor_call = None;
        // Lines for the editor, in order.
        let mut lines: Vec<Vec<u8>> = Vec::new();
        let update = |update: SessionUpdate| {
            rpc::notification(
                CLIENT_METHOD_NAMES.session_update,
                SessionNotification::new(session_id.to_owned(), update),
            )
        };
        match chunk {
            Chunk::Ready {
                commands, models, ..
            } => {
                live.models = settings::models(&models.to_value(), &live.model);
                if let Some((id, opening)) = live.opening.take() {
                    let (modes, options) =
                        (settings::modes(&live.mode), settings::config_options(live));
                    let response = match opening {
                        Opening::New => serde_json::to_value(
                            NewSessionResponse::new(session_id.to_owned())
                                .modes(modes)
                                .config_options(options),
                        ),
                        Opening::Load => serde_json::to_value(
                            LoadSessionResponse::new()
                                .modes(modes)
                                .config_options(options),
                        ),
                        Opening::Resume => serde_json::to_value(
                            ResumeSessionResponse::new()
                                .modes(modes)
                                .config_options(options),
                        ),
                    };
                    lines.push(rpc::response(
                        id,
                        Ok(response.expect("a response serializes")),
                    ));
                }
                lines.push(update(SessionUpdate::AvailableCommandsUpdate(
                    AvailableCommandsUpdate::new(available_commands(&commands.to_value())),
                )));
            }
            Chunk::SessionInit {
                permission_mode: Some(mode),
                ..
            } if mode != live.mode && MODES.iter().any(|(m, ..)| *m == mode) => {
                lines.extend(settings::mode_changed(live, mode).into_iter().map(update));
            }
            Chunk::MessageStart {
                message_id,
                parent_tool_use_id: None,
                usage,
                ..
            } => {
                let usage = usage.to_value();
                let tokens = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
                let given = tokens("input_tokens")
                    + tokens("cache_creation_input_tokens")
                    + tokens("cache_read_input_tokens");
                live.context = Some((message_id, given, tokens("output_tokens")));
            }
            Chunk::MessageDelta {
                message_id, usage, ..
            } => {
                let written = usage
                    .to_value()
                    .get("output_tokens")
                    .and_then(Value::as_u64);
                if let (Some((id, _, out)), Some(written)) = (&mut live.context, written) {
                    if *id == message_id {
                        *out = written;
                    }
                }
            }
            Chunk::TextDelta {
                text,
                parent_tool_use_id: None,
                ..
            } => lines.push(update(SessionUpdate::AgentMessageChunk(ContentChunk::new(
                ContentBlock::from(text),
            )))),
            Chunk::ThinkingDelta {
                thinking,
                parent_tool_use_id: None,
                ..
            } => lines.push(update(SessionUpdate::AgentThoughtChunk(ContentChunk::new(
                ContentBlock::from(thinking),
            )))),
            Chunk::ToolUse {
                id,
                name,
                input,
                complete,
                ..
            } => {
                let input = if complete {
                    input.to_value()
                } else {
                    Value::Null
                };
                let seen = live.tools.get(&id).is_some_and(|(_, seen)| *seen);
                live.tools.insert(id.clone(), (name.clone(), true));
                if seen && name != "TodoWrite" {
                    lines.push(update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                        id,
                        tools::describe(&name, &input),
                    ))));
                } else if let Some(call) = tools::call(&id, &name, &input) {
                    lines.push(update(call));
                }
            }
            Chunk::ToolStart { id, .. }
                if live.tools.get(&id).is_some_and(|(n, _)| n != "TodoWrite") =>
            {
                lines.push(update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    id,
                    ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
                ))));
            }
            Chunk::ToolResult {
                id,
                content,
                is_error,
                ..
            } => {
                let result = (live.tools.get(&id))
                    .and_then(|(name, _)| tools::result(&id, name, &content.to_value(), is_error));
                if let Some(result) = result {
                    lines.push(update(result));
                }
            }
            Chunk::PermissionRequest {
                request_id,
                tool_use_id,
                tool_name,
                input,
                suggestions,
                ..
            } => {
                let input = input.to_value();
                let decided = (tool_name.strip_prefix(editor::PREFIX))
                    .and_then(|tool| editor::decide(tool, &input, &live.mode, &live.cwd));
                if let Some(decision) = decided {
                    let _ = live.session.respond_permission(now, &request_id, decision);
                    self.outputs.extend(lines.into_iter().map(AcpOutput::Send));
                    return;
                }
                let call_id = tool_use_id.unwrap_or_else(|| request_id.clone());
                let mut fields = tools::describe(&tool_name, &input);
                fields.status = Some(ToolCallStatus::Pending);
                let options = permission_options(&tool_name);
                let params = RequestPermissionRequest::new(
                    session_id.to_owned(),
                    ToolCallUpdate::new(call_id, fields),
                    options,
                );
                self.next_id += 1;
                let n = i64::try_from(self.next_id).expect("fewer than 2^63 requests");
                live.asked.insert(request_id.clone(), n);
                self.asks.insert(
                    n,
                    Ask::Permission {
                        session: session_id.to_owned(),
                        request_id,
                        tool: tool_name,
                        suggestions: suggestions.to_value(),
                    },
                );
                lines.push(rpc::request(
                    n,
                    CLIENT_METHOD_NAMES.session_request_permission,
                    params,
                ));
            }
            Chunk::ControlResult {
                request_id,
                ok,
                error,
                ..
            } => {
                if let Some((id, answer, updates)) =
                    settings::answered(live, &request_id, ok, error)
                {
                    lines.push(rpc::response(id, answer));
                    lines.extend(updates.into_iter().map(update));
                }
            }
            Chunk::TurnComplete {
                subtype,
                is_error,
                result,
                stop_reason,
                total_cost_usd,
                model_usage,
                ..
            } => {
                // How much of the context window the session takes now, and what it cost.
                let windows = model_usage.to_value();
                let window = (windows.as_object().into_iter().flatten())
                    .filter_map(|(_, m)| m.get("contextWindow")?.as_u64())
                    .max();
                live.window = window.or(live.window);
                if let (Some((_, given, written)), Some(size)) = (&live.context, live.window) {
                    let mut usage = UsageUpdate::new(given + written, size);
                    if let Some(cost) = total_cost_usd.to_value().as_f64() {
                        usage = usage.cost(Cost::new(cost, "USD"));
                    }
                    lines.push(update(SessionUpdate::UsageUpdate(usage)));
                }
                if let Some(id) = live.prompt.take() {
                    let cancelled = std::mem::take(&mut live.cancelled);
                    let stop = match (subtype.as_deref(), stop_reason.as_deref()) {
                        _ if cancelled => Ok(StopReason::Cancelled),
                        (Some("error_max_turns"), _) => Ok(StopReason::MaxTurnRequests),
                        _ if is_error => Err(result.unwrap_or_else(|| "the turn failed".into())),
                        (_, Some("max_tokens")) => Ok(StopReason::MaxTokens),
                        (_, Some("refusal")) => Ok(StopReason::Refusal),
                        _ => Ok(StopReason::EndTurn),
                    };
                    match stop {
                        Ok(stop) => lines.push(rpc::response(id, Ok(PromptResponse::new(stop)))),
                        // The CLI has no login: the editor offers its authentication methods.
                        Err(why) if why.contains("/login") => lines.push(rpc::response::<()>(
                            id,
                            Err(Error::auth_required().data(json!(why))),
                        )),
                        Err(why) => lines.push(rpc::response::<()>(
                            id,
                            Err(Error::internal_error().data(json!(why))),
                        )),
                    }
                }
            }
            Chunk::ProcessExit { code, signal } => {
                live.ended = true;
                let why = json!(format!(
                    "the Claude Code CLI exited ({}); is it installed and logged in (`claude /login`, or ANTHROPIC_API_KEY)?",
                    match (code, signal) {
                        (Some(code), _) => format!("status {code}"),
                        (None, Some(signal)) => format!("signal {signal}"),
                        (None, None) => "no status".to_owned(),
                    }
                ));
                for id in [live.opening.take().map(|(id, _)| id), live.prompt.take()]
                    .into_iter()
                    .flatten()
                {
                    lines.push(rpc::response::<()>(
                        id,
                        Err(Error::internal_error().data(why.clone())),
                    ));
                }
            }
            Chunk::McpToolCall {
                request_id,
                server,
                tool,
                arguments,
                tool_use_id,
                ..
            } if server == editor::SERVER => {
                editor_call = Some((request_id, tool, arguments.to_value(), tool_use_id));
            }
            Chunk::McpToolCancelled { request_id, .. } => {
                self.kill_terminals(session_id, Some(&request_id));
            }
            _ => {}
        }
        self.outputs.extend(lines.into_iter().map(AcpOutput::Send));
        if let Some((request_id, tool, arguments, tool_use_id)) = editor_call {
            self.editor_call(session_id, request_id, &tool, &arguments, tool_use_id);
        }
    }
}

/// The CLI's slash commands (`initialize`'s `commands`: name, description, argumentHint).
fn available_commands(commands: &Value) -> Vec<AvailableCommand> {
    commands
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let name = c.get("name")?.as_str()?;
            let about = c.get("description").and_then(Value::as_str).unwrap_or("");
            let hint = c
                .get("argumentHint")
                .and_then(Value::as_str)
                .filter(|h| !h.is_empty())
                .map(|h| AvailableCommandInput::Unstructured(UnstructuredCommandInput::new(h)));
            Some(AvailableCommand::new(name, about).input(hint))
        })
        .collect()
}

fn permission_options(tool: &str) -> Vec<PermissionOption> {
    if tool == "ExitPlanMode" {
        return vec![
            PermissionOption::new(
                "acceptEdits",
                "Yes, and auto-accept edits",
                PermissionOptionKind::AllowAlways,
            ),
            PermissionOption::new(
                "default",
                "Yes, and manually approve edits",
                PermissionOptionKind::AllowOnce,
            ),
            PermissionOption::new(
                "plan",
                "No, keep planning",
                PermissionOptionKind::RejectOnce,
            ),
        ];
    }
    let once = [
        PermissionOption::new("allow", "Allow", PermissionOptionKind::AllowOnce),
        PermissionOption::new("reject", "Reject", PermissionOptionKind::RejectOnce),
    ];
    // The CLI's rule for a tool of the editor's terminal would allow every command, not the
    // one asked about: that is not offered.
    if tool == "mcp__acp__Bash" {
        return once.into();
    }
    let always = PermissionOption::new(
        "allow_always",
        "Always Allow",
        PermissionOptionKind::AllowAlways,
    );
    [vec![always], once.into()].concat()
}
