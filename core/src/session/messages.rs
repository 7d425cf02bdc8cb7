//! The message channel: `system/init`, assistant, user, result, stream_event and tool_progress
//! frames, and the host's prompts. The notices beside them are in `notices.rs`.

use std::borrow::Cow;

use serde_json::value::RawValue;

use super::state::{State, StreamedBlock};
use crate::chunk::{Chunk, ErrorKind, ToolStatus};
use crate::json::Json;
use crate::wire::{ApiMessage, Block, BlockKind, Content, WireMessage};

fn canon(raw: Option<&RawValue>) -> Json {
    raw.map(Json::canonical).unwrap_or_else(Json::null)
}

fn owned(s: &Option<Cow<'_, str>>) -> Option<String> {
    s.as_deref().map(str::to_owned)
}

/// Index into `MessageState::frames_by_kind`.
fn kind_slot(kind: BlockKind) -> Option<usize> {
    match kind {
        BlockKind::Text => Some(0),
        BlockKind::Thinking => Some(1),
        BlockKind::RedactedThinking => Some(2),
        _ => None,
    }
}

impl State {
    // ---- system --------------------------------------------------------------------------

    pub fn on_system(&mut self, msg: &WireMessage<'_>, text: &str) {
        let Some(subtype) = msg.subtype.as_deref() else {
            self.unknown(text);
            return;
        };
        if subtype == "init" {
            if !self.turn_running {
                self.start_turn();
            }
            self.session_id = owned(&msg.session_id);
            self.emit(Chunk::SessionInit {
                session_id: owned(&msg.session_id),
                model: owned(&msg.model),
                cwd: owned(&msg.cwd),
                tools: canon(msg.tools),
                mcp_servers: canon(msg.mcp_servers),
                permission_mode: owned(&msg.permission_mode),
                claude_code_version: owned(&msg.claude_code_version),
            });
            return;
        }
        self.on_system_notice(subtype, text);
    }

    // ---- assistant frames ----------------------------------------------------------------

    /// A frame's `message`, as the Messages API writes one; a frame without one is reported
    /// as invalid.
    fn api_message<'m>(&mut self, msg: &WireMessage<'m>, text: &str) -> Option<ApiMessage<'m>> {
        let api =
            (msg.message).and_then(|raw| serde_json::from_str::<ApiMessage<'m>>(raw.get()).ok());
        if api.is_none() {
            self.invalid("`message` must be a Messages API message", text);
        }
        api
    }

    pub fn on_assistant(&mut self, msg: &WireMessage<'_>, text: &str) {
        let Some(api) = self.api_message(msg, text) else {
            return;
        };
        let message_id = api.id.as_deref().unwrap_or_default().to_owned();
        let parent = msg.parent_tool_use_id.as_deref();
        let aborted = msg.aborted == Some(true);
        let blocks = match api.content {
            Content::Blocks(blocks) => blocks,
            Content::Text(t) => {
                // A string content is one text block.
                let text_block = Block {
                    ty: Cow::Borrowed("text"),
                    text: Some(t),
                    thinking: None,
                    id: None,
                    name: None,
                    input: None,
                    tool_use_id: None,
                    content: None,
                    is_error: None,
                };
                vec![text_block]
            }
            Content::Empty => Vec::new(),
        };
        let mut unknown_block = false;
        for block in &blocks {
            let state = self.messages.or_default(message_id.clone());
            let frame_index = state.frames;
            state.frames += 1;
            let kind = block.kind();
            // The k-th frame of a kind matches the k-th streamed block of that kind.
            let streamed = kind_slot(kind).and_then(|slot| {
                let k = state.frames_by_kind[slot];
                state.frames_by_kind[slot] += 1;
                state
                    .streamed
                    .iter()
                    .filter(|b| b.kind == kind)
                    .nth(k as usize)
                    .map(|b| (b.index, b.text.clone()))
            });
            match kind {
                BlockKind::Text => {
                    let full = block.text.as_deref().unwrap_or_default();
                    let (index, piece) = match streamed {
                        Some((index, seen)) => {
                            if !(aborted && full.len() > seen.len() && full.starts_with(&seen)) {
                                continue;
                            }
                            (index, &full[seen.len()..])
                        }
                        None => (frame_index, full),
                    };
                    if piece.is_empty() {
                        continue;
                    }
                    self.emit(Chunk::TextDelta {
                        message_id: message_id.clone(),
                        index,
                        text: piece.to_owned(),
                        parent_tool_use_id: parent.map(str::to_owned),
                    });
                }
                BlockKind::Thinking => {
                    if streamed.is_some() {
                        continue;
                    }
                    let thinking = block.thinking.as_deref().unwrap_or_default();
                    if thinking.is_empty() {
                        continue;
                    }
                    self.emit(Chunk::ThinkingDelta {
                        message_id: message_id.clone(),
                        index: frame_index,
                        thinking: thinking.to_owned(),
                        parent_tool_use_id: parent.map(str::to_owned),
                    });
                }
                BlockKind::RedactedThinking => {
                    if streamed.is_none() {
                        self.emit(Chunk::ThinkingRedacted {
                            message_id: message_id.clone(),
                            index: frame_index,
                            parent_tool_use_id: parent.map(str::to_owned),
                        });
                    }
                }
                BlockKind::ToolUse | BlockKind::ServerToolUse => {
                    let Some(id) = block.id.as_deref() else {
                        unknown_block = true;
                        continue;
                    };
                    let name = block.name.as_deref().unwrap_or_default();
                    let server = kind == BlockKind::ServerToolUse;
                    self.tool_started(id, name, &message_id, frame_index, parent, server);
                    let input = block
                        .input
                        .map(Json::canonical)
                        .unwrap_or_else(Json::empty_object);
                    self.complete_tool(id, input);
                }
                BlockKind::ServerToolResult => {
                    let Some(id) = block.tool_use_id.as_deref() else {
                        unknown_block = true;
                        continue;
                    };
                    if self.tools.get(id).is_some_and(|t| t.has_result) {
                        continue;
                    }
                    self.server_tool_result(id, canon(block.content), parent);
                }
                BlockKind::ToolResult | BlockKind::Other => unknown_block = true,
            }
        }
        if unknown_block {
            self.unknown(text);
        }
        // A failed model request the CLI tells as a message of its own: the error as data.
        if msg.is_api_error_message == Some(true) {
            let words: String = (blocks.iter())
                .filter(|b| b.kind() == BlockKind::Text)
                .filter_map(|b| b.text.as_deref())
                .collect();
            let error = msg
                .error
                .and_then(|e| serde_json::from_str::<String>(e.get()).ok());
            self.emit(Chunk::ApiError {
                message_id,
                parent_tool_use_id: parent.map(str::to_owned),
                error,
                cause: owned(&msg.api_error),
                status: msg.api_error_status,
                error_type: owned(&msg.api_error_type),
                text: words,
            });
        }
    }

    /// Announces a tool call (`tool_use complete:false` + `pending`) unless it is known.
    fn tool_started(
        &mut self,
        id: &str,
        name: &str,
        message_id: &str,
        index: u32,
        parent: Option<&str>,
        server: bool,
    ) {
        if !self.add_tool(id, name, parent, message_id, index, server) {
            return;
        }
        self.emit(Chunk::ToolUse {
            id: id.to_owned(),
            name: name.to_owned(),
            message_id: message_id.to_owned(),
            index,
            parent_tool_use_id: parent.map(str::to_owned),
            complete: false,
            input: Json::null(),
            server,
        });
        self.emit(Chunk::ToolStatus {
            id: id.to_owned(),
            status: ToolStatus::Pending,
            reason: None,
        });
    }

    /// Emits `tool_use complete:true` once per tool.
    fn complete_tool(&mut self, id: &str, input: Json) {
        let Some(tool) = self.tools.get_mut(id) else {
            return;
        };
        if tool.complete {
            return;
        }
        tool.complete = true;
        tool.input_buf = String::new();
        let chunk = Chunk::ToolUse {
            id: id.to_owned(),
            name: tool.name.clone(),
            message_id: tool.message_id.clone(),
            index: tool.index,
            parent_tool_use_id: tool.parent.clone(),
            complete: true,
            input,
            server: tool.server,
        };
        self.emit(chunk);
    }

    fn server_tool_result(&mut self, id: &str, content: Json, parent: Option<&str>) {
        if let Some(tool) = self.tools.get_mut(id) {
            tool.has_result = true;
        }
        self.mark_running(id);
        self.emit(Chunk::ToolResult {
            id: id.to_owned(),
            content,
            is_error: false,
            server: true,
            parent_tool_use_id: parent.map(str::to_owned),
        });
        self.set_status(id, ToolStatus::Success, None);
    }

    // ---- stream events -------------------------------------------------------------------

    pub fn on_stream_event(&mut self, msg: &WireMessage<'_>, text: &str) {
        let Some(event) = &msg.event else {
            self.invalid("`event` must be a Messages API stream event", text);
            return;
        };
        let parent = msg.parent_tool_use_id.as_deref();
        let message_id = match (&event.message, msg.api_message_id.as_deref()) {
            (Some(m), _) if m.id.is_some() && event.ty == "message_start" => {
                m.id.as_deref().unwrap_or_default().to_owned()
            }
            (_, Some(id)) => id.to_owned(),
            _ => self.current_message.clone().unwrap_or_default(),
        };
        match event.ty.as_ref() {
            "message_start" => {
                self.current_message = Some(message_id.clone());
                self.messages.or_default(message_id.clone());
                let model = event.message.as_ref().and_then(|m| owned(&m.model));
                let usage = canon(event.message.as_ref().and_then(|m| m.usage));
                self.emit(Chunk::MessageStart {
                    message_id,
                    model,
                    parent_tool_use_id: parent.map(str::to_owned),
                    usage,
                });
            }
            "content_block_start" => {
                let (Some(block), Some(index)) = (&event.content_block, event.index) else {
                    self.invalid(
                        "content_block_start needs `index` and `content_block`",
                        text,
                    );
                    return;
                };
                self.on_block_start(&message_id, index, block, parent);
            }
            "content_block_delta" => {
                let (Some(delta), Some(index)) = (&event.delta, event.index) else {
                    self.invalid("content_block_delta needs `index` and `delta`", text);
                    return;
                };
                let state = self.messages.or_default(message_id.clone());
                let block = state.streamed.iter_mut().rev().find(|b| b.index == index);
                match delta.ty.as_deref() {
                    Some("text_delta") => {
                        let piece = delta.text.as_deref().unwrap_or_default();
                        if let Some(block) = block {
                            block.text.push_str(piece);
                        }
                        self.emit(Chunk::TextDelta {
                            message_id,
                            index,
                            text: piece.to_owned(),
                            parent_tool_use_id: parent.map(str::to_owned),
                        });
                    }
                    Some("thinking_delta") => {
                        let piece = delta.thinking.as_deref().unwrap_or_default();
                        self.emit(Chunk::ThinkingDelta {
                            message_id,
                            index,
                            thinking: piece.to_owned(),
                            parent_tool_use_id: parent.map(str::to_owned),
                        });
                    }
                    Some("signature_delta") => {}
                    Some("input_json_delta") => {
                        let piece = delta.partial_json.as_deref().unwrap_or_default();
                        let Some(id) = block.and_then(|b| b.tool_id.clone()) else {
                            self.unknown(text);
                            return;
                        };
                        if let Some(tool) = self.tools.get_mut(&id) {
                            if !tool.complete {
                                tool.input_buf.push_str(piece);
                            }
                        }
                        self.emit(Chunk::ToolInputDelta {
                            id,
                            partial_json: piece.to_owned(),
                        });
                    }
                    Some("citations_delta") => {
                        self.emit(Chunk::Citation {
                            message_id,
                            index,
                            citation: canon(delta.citation),
                            parent_tool_use_id: parent.map(str::to_owned),
                        });
                    }
                    _ => self.unknown(text),
                }
            }
            "content_block_stop" => {
                let Some(index) = event.index else {
                    self.invalid("content_block_stop needs `index`", text);
                    return;
                };
                let tool_id = self
                    .messages
                    .get(&message_id)
                    .and_then(|s| s.streamed.iter().rev().find(|b| b.index == index))
                    .and_then(|b| b.tool_id.clone());
                if let Some(id) = tool_id {
                    self.complete_from_stream(&id);
                }
            }
            "message_delta" => {
                let stop_reason = event.delta.as_ref().and_then(|d| owned(&d.stop_reason));
                if stop_reason.as_deref() == Some("tool_use") {
                    self.tool_use_stop = true;
                }
                self.emit(Chunk::MessageDelta {
                    message_id,
                    stop_reason,
                    usage: canon(event.usage),
                });
            }
            "message_stop" => {
                let abandoned_from_index = msg.abandoned_blocks.and_then(|raw| {
                    serde_json::from_str::<serde_json::Value>(raw.get())
                        .ok()?
                        .get("from_block_index")?
                        .as_u64()
                });
                self.emit(Chunk::MessageStop {
                    message_id,
                    abandoned_from_index,
                });
            }
            "ping" => {}
            _ => self.unknown(text),
        }
    }

    fn on_block_start(
        &mut self,
        message_id: &str,
        index: u32,
        block: &Block<'_>,
        parent: Option<&str>,
    ) {
        let kind = block.kind();
        let mut streamed = StreamedBlock {
            index,
            kind,
            text: String::new(),
            tool_id: None,
        };
        match kind {
            BlockKind::ToolUse | BlockKind::ServerToolUse => {
                let id = block.id.as_deref().unwrap_or_default();
                let name = block.name.as_deref().unwrap_or_default();
                streamed.tool_id = Some(id.to_owned());
                self.push_streamed(message_id, streamed);
                let server = kind == BlockKind::ServerToolUse;
                self.tool_started(id, name, message_id, index, parent, server);
            }
            BlockKind::RedactedThinking => {
                self.push_streamed(message_id, streamed);
                self.emit(Chunk::ThinkingRedacted {
                    message_id: message_id.to_owned(),
                    index,
                    parent_tool_use_id: parent.map(str::to_owned),
                });
            }
            BlockKind::ServerToolResult => {
                self.push_streamed(message_id, streamed);
                let id = block.tool_use_id.as_deref().unwrap_or_default();
                if !self.tools.get(id).is_some_and(|t| t.has_result) {
                    self.server_tool_result(id, canon(block.content), parent);
                }
            }
            BlockKind::Text => {
                // A text block may start with text already in it.
                let initial = block.text.as_deref().unwrap_or_default().to_owned();
                streamed.text.push_str(&initial);
                self.push_streamed(message_id, streamed);
                if !initial.is_empty() {
                    self.emit(Chunk::TextDelta {
                        message_id: message_id.to_owned(),
                        index,
                        text: initial,
                        parent_tool_use_id: parent.map(str::to_owned),
                    });
                }
            }
            _ => self.push_streamed(message_id, streamed),
        }
    }

    fn push_streamed(&mut self, message_id: &str, block: StreamedBlock) {
        self.messages
            .or_default(message_id.to_owned())
            .streamed
            .push(block);
    }

    /// Completes a tool from its joined streamed input (at `content_block_stop`).
    fn complete_from_stream(&mut self, id: &str) {
        let Some(tool) = self.tools.get(id) else {
            return;
        };
        if tool.complete {
            return;
        }
        let joined = tool.input_buf.trim();
        let input = if joined.is_empty() {
            Json::empty_object()
        } else {
            match Json::parse(joined) {
                Ok(input) => input,
                Err(err) => {
                    let detail = format!("the streamed input of tool {id} is not JSON: {err}");
                    let excerpt = Some(crate::session::excerpt(joined.as_bytes()));
                    self.emit(Chunk::Error {
                        kind: ErrorKind::MalformedToolInput,
                        detail,
                        excerpt,
                        bytes: None,
                    });
                    Json::null()
                }
            }
        };
        self.complete_tool(id, input);
    }

    // ---- user frames from the CLI --------------------------------------------------------

    pub fn on_user_frame(&mut self, msg: &WireMessage<'_>, text: &str) {
        let Some(api) = self.api_message(msg, text) else {
            return;
        };
        let parent = msg.parent_tool_use_id.as_deref();
        match api.content {
            Content::Text(t) => self.emit(Chunk::UserText {
                text: t.into_owned(),
                parent_tool_use_id: parent.map(str::to_owned),
            }),
            Content::Empty => {}
            Content::Blocks(blocks) => {
                for block in blocks {
                    match block.kind() {
                        BlockKind::ToolResult => self.on_tool_result(&block, parent, text),
                        BlockKind::Text => self.emit(Chunk::UserText {
                            text: block.text.as_deref().unwrap_or_default().to_owned(),
                            parent_tool_use_id: parent.map(str::to_owned),
                        }),
                        // Images and other blocks of a prompt the CLI replays are the host's
                        // own (its `user_prompt`); the line keeps them.
                        _ => {}
                    }
                }
            }
        }
    }

    fn on_tool_result(&mut self, block: &Block<'_>, parent: Option<&str>, text: &str) {
        let Some(id) = block.tool_use_id.as_deref() else {
            self.invalid("a tool_result block needs a `tool_use_id`", text);
            return;
        };
        let is_error = block.is_error.unwrap_or(false);
        self.resolve_open_permission(id);
        self.tool_use_stop = false;
        if let Some(tool) = self.tools.get(id) {
            if !is_error && tool.status == ToolStatus::Pending {
                self.set_status(id, ToolStatus::Running, None);
            }
        }
        self.emit(Chunk::ToolResult {
            id: id.to_owned(),
            content: canon(block.content),
            is_error,
            server: false,
            parent_tool_use_id: parent.map(str::to_owned),
        });
        let Some(tool) = self.tools.get_mut(id) else {
            return;
        };
        tool.has_result = true;
        tool.complete = true;
        let reason = tool.pending_reason;
        let status = if is_error {
            ToolStatus::Error
        } else {
            ToolStatus::Success
        };
        self.set_status(id, status, reason);
    }

    // ---- result --------------------------------------------------------------------------

    pub fn on_result(&mut self, msg: &WireMessage<'_>) {
        self.emit(Chunk::TurnComplete {
            subtype: owned(&msg.subtype),
            is_error: msg.is_error.unwrap_or(false),
            result: owned(&msg.result),
            stop_reason: owned(&msg.stop_reason),
            terminal_reason: owned(&msg.terminal_reason),
            api_error_status: msg.api_error_status,
            api_error_type: owned(&msg.api_error_type),
            api_error_code: owned(&msg.api_error_code),
            num_turns: msg.num_turns,
            duration_ms: msg.duration_ms,
            usage: canon(msg.usage),
            total_cost_usd: canon(msg.total_cost_usd),
            model_usage: canon(msg.model_usage),
            session_id: owned(&msg.session_id),
            permission_denials: canon(msg.permission_denials),
            errors: canon(msg.errors),
            structured_output: msg
                .structured_output
                .filter(|raw| raw.get() != "null")
                .map(Json::canonical),
        });
        self.end_turn();
    }

    // ---- tool progress -------------------------------------------------------------------

    pub fn on_tool_progress(&mut self, msg: &WireMessage<'_>, text: &str) {
        let Some(tool_use_id) = msg.tool_use_id.as_deref() else {
            self.invalid("a tool_progress frame needs a `tool_use_id`", text);
            return;
        };
        let elapsed_s = msg.elapsed_time_seconds.unwrap_or(0.0);
        if msg.heartbeat == Some(true) {
            let (base, seq) = match tool_use_id.rsplit_once("-heartbeat-") {
                Some((base, n)) => (base, n.parse().unwrap_or(0)),
                None => (tool_use_id, 0),
            };
            let id = msg.parent_tool_use_id.as_deref().unwrap_or(base).to_owned();
            self.mark_running(&id);
            self.emit(Chunk::ToolHeartbeat { id, elapsed_s, seq });
            return;
        }
        let id = tool_use_id.to_owned();
        self.mark_running(&id);
        let first = match self.tools.get_mut(&id) {
            Some(tool) => !std::mem::replace(&mut tool.started, true),
            None => true,
        };
        if first {
            self.emit(Chunk::ToolStart {
                id,
                name: owned(&msg.tool_name),
                elapsed_s,
                parent_tool_use_id: owned(&msg.parent_tool_use_id),
            });
        } else {
            self.emit(Chunk::ToolProgress { id, elapsed_s });
        }
    }

    // ---- host user messages --------------------------------------------------------------

    pub fn on_host_user(&mut self, msg: &WireMessage<'_>, text: &str) {
        #[derive(serde::Deserialize)]
        struct Prompt<'a> {
            #[serde(borrow, default)]
            content: Option<&'a RawValue>,
        }
        let content = msg
            .message
            .and_then(|raw| serde_json::from_str::<Prompt<'_>>(raw.get()).ok())
            .and_then(|p| p.content);
        let Some(content) = content else {
            self.invalid("a user message needs `message.content`", text);
            return;
        };
        self.host_prompt(
            Json::canonical(content),
            owned(&msg.uuid),
            owned(&msg.priority),
        );
    }

    /// A prompt the host wrote: a turn starts (or, sent with priority `now` during one, the
    /// running tools are interrupted).
    pub fn host_prompt(&mut self, content: Json, uuid: Option<String>, priority: Option<String>) {
        if !self.turn_running {
            self.start_turn();
        } else if priority.as_deref() == Some("now") {
            self.interrupt_tools();
        }
        self.emit(Chunk::UserPrompt {
            content,
            uuid,
            priority,
        });
    }
}
