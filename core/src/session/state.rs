//! The session's state: turns, tools, pending requests, and line dispatch.

use std::collections::VecDeque;

use crate::lookup::{LookupMap, LookupSet};

use serde_json::Value;

use super::{line_error, CommandError, Dir, Mode, Output, Outputs, SessionConfig, TimeoutReason};
use crate::chunk::{BlockedKind, BlockedOn, Chunk, ErrorKind, StatusReason, ToolStatus, ToolWait};
use crate::framing::Frame;
use crate::json::Json;
use crate::wire::{parse_message, MessageType, WireMessage};
use crate::Timestamp;

/// Finished tools older than the current turn are forgotten beyond this many, so a long session
/// does not grow without bound.
const TOOL_MEMORY: usize = 4096;
/// Settled request ids remembered to drop late answers quietly.
const SETTLED_MEMORY: usize = 1024;

#[derive(Debug)]
pub(crate) struct Tool {
    pub name: String,
    pub message_id: String,
    pub index: u32,
    pub server: bool,
    pub status: ToolStatus,
    pub turn: u64,
    pub parent: Option<String>,
    pub complete: bool,
    pub has_result: bool,
    pub started: bool,
    pub pending_reason: Option<StatusReason>,
    /// The streamed input pieces joined, until the tool is complete.
    pub input_buf: String,
}

/// A request from the CLI that waits for the embedder.
#[derive(Debug)]
pub(crate) struct Incoming {
    pub request_id: String,
    pub kind: IncomingKind,
    pub tool_use_id: Option<String>,
    pub deadline: Option<Timestamp>,
}

#[derive(Debug)]
pub(crate) enum IncomingKind {
    Permission {
        input: Json,
    },
    Hook {
        pre_tool: bool,
    },
    McpCall {
        server: String,
        rpc_id: Json,
        tool: String,
    },
    Elicitation,
    Dialog,
    Other,
}

impl IncomingKind {
    pub fn name(&self) -> &'static str {
        match self {
            IncomingKind::Permission { .. } => "permission",
            IncomingKind::Hook { .. } => "hook",
            IncomingKind::McpCall { .. } => "MCP tool call",
            IncomingKind::Elicitation => "elicitation",
            IncomingKind::Dialog => "dialog",
            IncomingKind::Other => "other",
        }
    }
}

/// A request of the host that waits for the CLI.
#[derive(Debug)]
pub(crate) struct Outgoing {
    pub request_id: String,
    pub subtype: String,
    pub deadline: Option<Timestamp>,
}

/// Streaming bookkeeping of one API message.
#[derive(Debug, Default)]
pub(crate) struct MessageState {
    /// Blocks announced by `content_block_start`, in order.
    pub streamed: Vec<StreamedBlock>,
    /// `assistant` frames seen for this message.
    pub frames: u32,
    /// Frames seen per block kind (text, thinking, redacted thinking).
    pub frames_by_kind: [u32; 3],
}

#[derive(Debug)]
pub(crate) struct StreamedBlock {
    pub index: u32,
    pub kind: crate::wire::BlockKind,
    /// Text blocks: the text streamed so far.
    pub text: String,
    /// Tool blocks: the tool_use id.
    pub tool_id: Option<String>,
}

#[derive(Debug)]
pub(crate) struct State {
    pub mode: Mode,
    pub config: SessionConfig,
    pub outputs: Outputs,
    pub next_request: u64,
    pub next_hook: u64,

    pub turn: u64,
    pub turn_running: bool,
    pub session_id: Option<String>,
    pub tools: LookupMap<String, Tool>,
    pub tool_order: VecDeque<String>,
    pub turn_tools: Vec<String>,
    pub messages: LookupMap<String, MessageState>,
    pub current_message: Option<String>,

    pub incoming: Vec<Incoming>,
    pub outgoing: Vec<Outgoing>,
    settled: LookupSet<String>,
    settled_order: VecDeque<String>,

    pub tool_wait: ToolWait,
    /// A host → CLI line was seen (observer mode) or written (driver mode).
    pub saw_in: bool,
    /// The CLI's output ended.
    pub ended: bool,
    /// A `message_delta` said `tool_use` since the last tool result.
    pub tool_use_stop: bool,
    pub exited: bool,
}

impl State {
    pub fn new(mode: Mode, config: SessionConfig) -> State {
        State {
            mode,
            config,
            outputs: VecDeque::new(),
            next_request: 1,
            next_hook: 0,
            turn: 0,
            turn_running: false,
            session_id: None,
            tools: LookupMap::new(),
            tool_order: VecDeque::new(),
            turn_tools: Vec::new(),
            messages: LookupMap::new(),
            current_message: None,
            incoming: Vec::new(),
            outgoing: Vec::new(),
            settled: LookupSet::new(),
            settled_order: VecDeque::new(),
            tool_wait: ToolWait::default(),
            saw_in: false,
            ended: false,
            tool_use_stop: false,
            exited: false,
        }
    }

    pub fn emit(&mut self, chunk: Chunk) {
        self.outputs.push_back(Output::Chunk(chunk));
    }

    pub fn check_driver(&self) -> Result<(), CommandError> {
        if self.mode != Mode::Driver {
            return Err(CommandError::NotDriver);
        }
        if self.exited {
            return Err(CommandError::ProcessEnded);
        }
        Ok(())
    }

    /// Request ids: a counter and eight hex digits derived from the seed.
    pub fn next_request_id(&mut self) -> String {
        let n = self.next_request;
        self.next_request += 1;
        let mut x = self.config.seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 31;
        format!("req_{n}_{:08x}", x as u32)
    }

    /// Queues a host → CLI message for stdin. The caller hands what it says to the same
    /// handlers an observed one goes to (`host_prompt`, `host_request`, `host_answered`), from
    /// the values it was built from: the line is not read back.
    pub fn write(&mut self, frame: &Value) {
        let mut line = serde_json::to_vec(frame).expect("a Value always serializes");
        line.push(b'\n');
        self.write_line(line);
    }

    /// Writes a whole line (its newline included) made elsewhere.
    pub fn write_line(&mut self, line: Vec<u8>) {
        self.saw_in = true;
        self.outputs.push_back(Output::Write(line));
    }

    // ---- dispatch ------------------------------------------------------------------------

    pub fn handle_frame(&mut self, now: Timestamp, dir: Dir, frame: Frame<'_>) {
        let line = match frame {
            Frame::Line(line) => line,
            Frame::TooLong { bytes } => {
                let limit = self.config.line_limit;
                self.emit(Chunk::Error {
                    kind: ErrorKind::LineTooLong,
                    detail: format!(
                        "a line of {bytes} bytes exceeds the limit of {limit} bytes and was skipped"
                    ),
                    excerpt: None,
                    bytes: Some(bytes),
                });
                return;
            }
        };
        self.handle_line(now, dir, line);
    }

    pub fn handle_line(&mut self, now: Timestamp, dir: Dir, line: &[u8]) {
        let Ok(text) = std::str::from_utf8(line) else {
            let chunk = line_error(
                ErrorKind::MalformedLine,
                "the line is not valid UTF-8".to_owned(),
                line,
            );
            self.emit(chunk);
            return;
        };
        let msg = match parse_message(text) {
            Ok(msg) => msg,
            Err(err) => {
                // A type ccwire does not know may shape its fields its own way.
                if err.is_data()
                    && string_type(text).is_some_and(|t| MessageType::from_wire(&t).is_none())
                {
                    self.unknown(text);
                    return;
                }
                let detail = if err.is_data() {
                    format!("the message does not have the expected shape: {err}")
                } else {
                    format!("the line is not a JSON object: {err}")
                };
                let kind = if err.is_data() && string_type(text).is_some() {
                    ErrorKind::InvalidMessage
                } else {
                    ErrorKind::MalformedLine
                };
                self.emit(line_error(kind, detail, line));
                return;
            }
        };
        let Some(ty) = msg.ty.as_deref() else {
            let chunk = line_error(
                ErrorKind::MalformedLine,
                "the message has no string `type`".to_owned(),
                line,
            );
            self.emit(chunk);
            return;
        };
        let Some(ty) = MessageType::from_wire(ty) else {
            self.unknown(text);
            return;
        };
        if dir == Dir::In {
            self.saw_in = true;
            self.handle_in(now, ty, &msg, text);
        } else {
            self.handle_out(now, ty, &msg, text);
        }
    }

    fn handle_out(&mut self, now: Timestamp, ty: MessageType, msg: &WireMessage<'_>, text: &str) {
        match ty {
            MessageType::System => self.on_system(msg, text),
            MessageType::Assistant => self.on_assistant(msg, text),
            MessageType::User => self.on_user_frame(msg, text),
            MessageType::Result => self.on_result(msg),
            MessageType::StreamEvent => self.on_stream_event(msg, text),
            MessageType::ToolProgress => self.on_tool_progress(msg, text),
            MessageType::RateLimitEvent
            | MessageType::ToolUseSummary
            | MessageType::AuthStatus
            | MessageType::PromptSuggestion
            | MessageType::ConversationReset
            | MessageType::TranscriptMirror
            | MessageType::CommandLifecycle
            | MessageType::CliEvent => {
                self.on_info(ty, msg.ty.as_deref().unwrap_or_default(), text)
            }
            MessageType::ControlRequest => self.on_cli_request(now, msg, text),
            MessageType::ControlResponse => self.on_cli_response(msg, text),
            MessageType::ControlCancelRequest => self.on_cli_cancel(msg, text),
            MessageType::KeepAlive => {}
            _ => self.unknown(text),
        }
    }

    fn handle_in(&mut self, now: Timestamp, ty: MessageType, msg: &WireMessage<'_>, text: &str) {
        match ty {
            MessageType::User => self.on_host_user(msg, text),
            MessageType::ControlRequest => self.on_host_request(now, msg, text),
            MessageType::ControlResponse => self.on_host_response(msg, text),
            MessageType::ControlCancelRequest => {
                if let Some(id) = msg.request_id.as_deref() {
                    self.outgoing.retain(|o| o.request_id != id);
                    self.settle(id.to_owned());
                }
            }
            MessageType::KeepAlive | MessageType::UpdateEnvironmentVariables => {}
            _ => self.unknown(text),
        }
    }

    pub fn unknown(&mut self, text: &str) {
        match Json::parse(text) {
            Ok(message) => self.emit(Chunk::Unknown { message }),
            Err(err) => {
                let chunk = line_error(ErrorKind::MalformedLine, err.to_string(), text.as_bytes());
                self.emit(chunk);
            }
        }
    }

    pub fn invalid(&mut self, what: &str, text: &str) {
        let chunk = line_error(
            ErrorKind::InvalidMessage,
            format!("the message does not have the expected shape: {what}"),
            text.as_bytes(),
        );
        self.emit(chunk);
    }

    // ---- turns ---------------------------------------------------------------------------

    pub fn start_turn(&mut self) {
        self.turn += 1;
        self.turn_running = true;
        self.turn_tools.clear();
        self.tool_use_stop = false;
    }

    pub fn end_turn(&mut self) {
        let ids: Vec<String> = self.turn_tools.clone();
        for id in ids {
            let Some(tool) = self.tools.get(&id) else {
                continue;
            };
            // A sub-agent's tools may outlive the main turn (background agents).
            if tool.status.is_final() || tool.parent.is_some() {
                continue;
            }
            self.set_status(&id, ToolStatus::Cancelled, Some(StatusReason::TurnEnded));
        }
        self.turn_running = false;
        self.messages.clear();
        self.current_message = None;
        self.tool_use_stop = false;
        self.forget_old_tools();
    }

    fn forget_old_tools(&mut self) {
        while self.tool_order.len() > TOOL_MEMORY {
            let Some(id) = self.tool_order.pop_front() else {
                break;
            };
            let keep = self
                .tools
                .get(&id)
                .is_some_and(|t| !t.status.is_final() || t.turn == self.turn);
            if keep {
                self.tool_order.push_back(id);
                break;
            }
            self.tools.remove(&id);
        }
    }

    // ---- tools ---------------------------------------------------------------------------

    /// Registers a tool call when it is first seen. Returns false when it was known.
    pub fn add_tool(
        &mut self,
        id: &str,
        name: &str,
        parent: Option<&str>,
        message_id: &str,
        index: u32,
        server: bool,
    ) -> bool {
        if self.tools.contains_key(id) {
            return false;
        }
        if !self.turn_running && parent.is_none() {
            // Main-thread tool calls only come inside turns; a capture that starts mid-turn
            // opens one. A background sub-agent's calls may come after its turn's result.
            self.start_turn();
        }
        self.tools.insert(
            id.to_owned(),
            Tool {
                name: name.to_owned(),
                message_id: message_id.to_owned(),
                index,
                server,
                status: ToolStatus::Pending,
                turn: self.turn,
                parent: parent.map(str::to_owned),
                complete: false,
                has_result: false,
                started: false,
                pending_reason: None,
                input_buf: String::new(),
            },
        );
        self.tool_order.push_back(id.to_owned());
        self.turn_tools.push(id.to_owned());
        true
    }

    pub fn set_status(&mut self, id: &str, status: ToolStatus, reason: Option<StatusReason>) {
        let Some(tool) = self.tools.get_mut(id) else {
            return;
        };
        if tool.status == status || tool.status.is_final() {
            return;
        }
        tool.status = status;
        self.emit(Chunk::ToolStatus {
            id: id.to_owned(),
            status,
            reason,
        });
    }

    /// Moves a tool to `running` unless it is already running or final.
    pub fn mark_running(&mut self, id: &str) {
        let Some(tool) = self.tools.get(id) else {
            return;
        };
        if matches!(
            tool.status,
            ToolStatus::Pending | ToolStatus::AwaitingApproval
        ) {
            self.set_status(id, ToolStatus::Running, None);
        }
    }

    /// Records why a tool will end, unless a reason is already recorded.
    pub fn note_reason(&mut self, id: &str, reason: StatusReason) {
        if let Some(tool) = self.tools.get_mut(id) {
            if tool.pending_reason.is_none() && !tool.status.is_final() {
                tool.pending_reason = Some(reason);
            }
        }
    }

    /// Marks every unfinished tool of the running turn as interrupted.
    pub fn interrupt_tools(&mut self) {
        let ids: Vec<String> = self.turn_tools.clone();
        for id in ids {
            self.note_reason(&id, StatusReason::Interrupted);
        }
    }

    // ---- settled requests ----------------------------------------------------------------

    pub fn settle(&mut self, request_id: String) {
        if self.settled.insert(request_id.clone()) {
            self.settled_order.push_back(request_id);
            if self.settled_order.len() > SETTLED_MEMORY {
                if let Some(old) = self.settled_order.pop_front() {
                    self.settled.remove(&old);
                }
            }
        }
    }

    pub fn is_settled(&self, request_id: &str) -> bool {
        self.settled.contains(request_id)
    }

    pub fn take_incoming(&mut self, request_id: &str) -> Option<Incoming> {
        let pos = self
            .incoming
            .iter()
            .position(|i| i.request_id == request_id)?;
        Some(self.incoming.remove(pos))
    }

    // ---- tool wait -----------------------------------------------------------------------

    pub fn compute_tool_wait(&self) -> ToolWait {
        let mut wait = ToolWait::default();
        if !self.turn_running {
            return wait;
        }
        for id in &self.turn_tools {
            let Some(tool) = self.tools.get(id) else {
                continue;
            };
            if tool.complete && !tool.has_result && !tool.status.is_final() {
                wait.tool_use_ids.push(id.clone());
            }
        }
        for req in &self.incoming {
            let kind = match req.kind {
                IncomingKind::Permission { .. } => BlockedKind::Permission,
                IncomingKind::McpCall { .. } => BlockedKind::McpToolCall,
                IncomingKind::Hook { pre_tool: true } => BlockedKind::Hook,
                IncomingKind::Elicitation => BlockedKind::Elicitation,
                IncomingKind::Dialog => BlockedKind::Dialog,
                _ => continue,
            };
            let Some(tool_use_id) = req.tool_use_id.as_ref() else {
                continue;
            };
            if wait.tool_use_ids.contains(tool_use_id) {
                wait.blocked_on.push(BlockedOn {
                    request_id: req.request_id.clone(),
                    kind,
                    tool_use_id: tool_use_id.clone(),
                });
            }
        }
        let raw_capture = self.mode == Mode::Observer && !self.saw_in;
        wait.waiting = !wait.blocked_on.is_empty()
            || (raw_capture && (self.ended || self.tool_use_stop) && !wait.tool_use_ids.is_empty());
        wait
    }

    pub fn refresh_tool_wait(&mut self) {
        let wait = self.compute_tool_wait();
        if wait != self.tool_wait {
            self.tool_wait = wait.clone();
            self.emit(Chunk::ToolWait(wait));
        }
    }

    // ---- deadlines -----------------------------------------------------------------------

    pub fn next_deadline(&self) -> Option<(Timestamp, TimeoutReason)> {
        let incoming = self.incoming.iter().filter_map(|req| {
            let deadline = req.deadline?;
            let request_id = req.request_id.clone();
            let reason = match req.kind {
                IncomingKind::Permission { .. } => TimeoutReason::Permission { request_id },
                IncomingKind::Hook { .. } => TimeoutReason::Hook { request_id },
                IncomingKind::McpCall { .. } => TimeoutReason::McpCall { request_id },
                IncomingKind::Elicitation => TimeoutReason::Elicitation { request_id },
                IncomingKind::Dialog => TimeoutReason::Dialog { request_id },
                IncomingKind::Other => return None,
            };
            Some((deadline, reason))
        });
        let outgoing = self.outgoing.iter().filter_map(|req| {
            Some((
                req.deadline?,
                TimeoutReason::Request {
                    request_id: req.request_id.clone(),
                    subtype: req.subtype.clone(),
                },
            ))
        });
        incoming.chain(outgoing).min_by_key(|(t, _)| *t)
    }

    // ---- process end ---------------------------------------------------------------------

    pub fn process_exit(&mut self, _now: Timestamp, code: Option<i32>, signal: Option<i32>) {
        if self.exited {
            return;
        }
        self.exited = true;
        self.emit(Chunk::ProcessExit { code, signal });
        if self.turn_running {
            let how = match (code, signal) {
                (_, Some(sig)) => format!("was killed by signal {sig}"),
                (Some(code), None) => format!("exited with code {code}"),
                (None, None) => "ended".to_owned(),
            };
            self.emit(Chunk::Error {
                kind: ErrorKind::ProcessExit,
                detail: format!("the CLI process {how} while a turn was running"),
                excerpt: None,
                bytes: None,
            });
            self.turn_running = false;
        }
        let ids: Vec<String> = self.tool_order.iter().cloned().collect();
        for id in ids {
            self.set_status(&id, ToolStatus::Cancelled, Some(StatusReason::ProcessExit));
        }
        for req in std::mem::take(&mut self.outgoing) {
            self.emit(Chunk::ControlResult {
                request_id: req.request_id.clone(),
                subtype: Some(req.subtype),
                ok: false,
                response: None,
                error: Some("the CLI process ended before answering".to_owned()),
                error_code: None,
            });
            self.settle(req.request_id);
        }
        for req in std::mem::take(&mut self.incoming) {
            self.settle(req.request_id);
        }
    }
}

/// Whether a line is an object with a string `type` (its other fields may still be wrong).
/// The message's `type`, when it has a non-empty string one.
fn string_type(text: &str) -> Option<std::borrow::Cow<'_, str>> {
    #[derive(serde::Deserialize)]
    struct TypeOnly<'a> {
        #[serde(rename = "type", borrow)]
        ty: std::borrow::Cow<'a, str>,
    }
    let ty = serde_json::from_str::<TypeOnly<'_>>(text).ok()?.ty;
    (!ty.is_empty()).then_some(ty)
}
