//! [`Session`]: the protocol engine of one CLI process.

mod answers;
mod control;
mod messages;
mod notices;
mod state;
mod user;

use std::collections::VecDeque;
use std::fmt;

use serde_json::{json, Map, Value};

use crate::chunk::{Chunk, ErrorKind, ToolStatus, ToolWait};
use crate::framing::{Frame, LineFramer, DEFAULT_LINE_LIMIT};
use crate::json::Json;
use crate::mcp::{McpCallResult, McpServer};
use crate::Timestamp;

use state::State;
use user::user_frame;
pub(crate) use user::ReadyPrompt;
pub use user::UserMessage;

/// How a session is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The embedder owns the CLI's stdin: commands produce the bytes to write.
    Driver,
    /// Both directions are fed as observed traffic; commands are refused.
    Observer,
}

/// Timeouts for requests the embedder must answer, and for the embedder's own requests.
///
/// `None` waits forever (the CLI itself waits indefinitely for permissions and MCP calls).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timeouts {
    /// A `can_use_tool` not answered in time is denied.
    pub permission_ms: Option<u64>,
    /// A `hook_callback` not answered in time gets an empty answer.
    pub hook_ms: Option<u64>,
    /// An MCP `tools/call` not answered in time gets an `isError` result.
    pub mcp_call_ms: Option<u64>,
    /// A control request of the embedder not answered in time fails with `timeout`.
    pub request_ms: Option<u64>,
    /// An `elicitation` not answered in time is cancelled (`{"action":"cancel"}`).
    pub elicitation_ms: Option<u64>,
    /// A `request_user_dialog` not answered in time is dismissed (`{"behavior":"cancelled"}`).
    pub dialog_ms: Option<u64>,
}

/// Session settings.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// The longest line accepted, in bytes (default 32 MiB).
    pub line_limit: usize,
    /// Seed for request ids (`req_<n>_<hex>`); a host passes randomness in here.
    pub seed: u64,
    /// Deadlines applied by [`Session::handle_timeout`].
    pub timeouts: Timeouts,
    /// In-process MCP servers whose handshake the session answers (driver mode).
    pub mcp_servers: Vec<McpServer>,
    /// The embedder answers MCP servers' elicitations itself
    /// ([`Session::respond_elicitation`]). When `false` (the default) the session declines each
    /// at once, as the official SDKs do for a host with no elicitation handler; the
    /// `elicitation_request` chunk is still emitted, followed by its `request_resolved`.
    pub elicitations: bool,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            line_limit: DEFAULT_LINE_LIMIT,
            seed: 0,
            timeouts: Timeouts::default(),
            mcp_servers: Vec::new(),
            elicitations: false,
        }
    }
}

/// What the session produced; drain with [`Session::poll_output`].
#[derive(Debug, Clone, PartialEq)]
// Nearly every output is a chunk: boxing chunks would cost an allocation each to save the
// rare write a few bytes.
#[allow(clippy::large_enum_variant)]
pub enum Output {
    /// A chunk for the embedder (UI, API encoder).
    Chunk(Chunk),
    /// Bytes to write to the CLI's stdin, in order (each a whole line with its newline).
    Write(Vec<u8>),
}

/// Why [`Session::poll_timeout`] wants to be woken.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimeoutReason {
    /// A permission request waits for the embedder.
    Permission {
        /// The control request id.
        request_id: String,
    },
    /// A hook callback waits for the embedder.
    Hook {
        /// The control request id.
        request_id: String,
    },
    /// An MCP tool call waits for the embedder.
    McpCall {
        /// The control request id.
        request_id: String,
    },
    /// An elicitation waits for the embedder.
    Elicitation {
        /// The control request id.
        request_id: String,
    },
    /// A dialog waits for the embedder.
    Dialog {
        /// The control request id.
        request_id: String,
    },
    /// A request of the embedder waits for the CLI.
    Request {
        /// The request id.
        request_id: String,
        /// Its subtype.
        subtype: String,
    },
}

impl fmt::Display for TimeoutReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimeoutReason::Permission { request_id } => {
                write!(f, "waiting on permission request {request_id}")
            }
            TimeoutReason::Hook { request_id } => {
                write!(f, "waiting on hook callback {request_id}")
            }
            TimeoutReason::McpCall { request_id } => {
                write!(f, "waiting on MCP tool call {request_id}")
            }
            TimeoutReason::Elicitation { request_id } => {
                write!(f, "waiting on elicitation {request_id}")
            }
            TimeoutReason::Dialog { request_id } => {
                write!(f, "waiting on dialog {request_id}")
            }
            TimeoutReason::Request {
                request_id,
                subtype,
            } => write!(
                f,
                "waiting for the CLI to answer {subtype} request {request_id}"
            ),
        }
    }
}

/// Misuse of the session by the embedder.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// Commands need a driver-mode session.
    #[error("the session is an observer; commands need a driver-mode session")]
    NotDriver,
    /// No request with that id was ever received.
    #[error("no request {0} was received from the CLI")]
    UnknownRequest(String),
    /// The request is of another kind than the answer.
    #[error("request {request_id} is a {actual} request, not a {expected} request")]
    WrongRequestKind {
        /// The request id.
        request_id: String,
        /// The kind the answer is for.
        expected: &'static str,
        /// The kind of the request.
        actual: &'static str,
    },
    /// The CLI process has ended.
    #[error("the CLI process has ended")]
    ProcessEnded,
}

/// What became of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Delivery {
    /// The answer was written.
    Sent,
    /// The request had already been settled (cancelled by the CLI, timed out, or answered), so
    /// the answer was dropped and nothing was written.
    Dropped,
}

/// The embedder's answer to a permission request.
#[derive(Debug, Clone, PartialEq)]
pub enum PermissionDecision {
    /// Let the tool run.
    Allow {
        /// The input to run it with; `None` sends the original input.
        updated_input: Option<Value>,
        /// Permission updates to apply (`addRules`, `setMode`, …), in wire form.
        updated_permissions: Vec<Value>,
    },
    /// Refuse the tool.
    Deny {
        /// Shown to the model as the error tool result.
        message: String,
        /// Also abort the turn.
        interrupt: bool,
    },
}

impl PermissionDecision {
    /// Allow with the original input.
    pub fn allow() -> PermissionDecision {
        PermissionDecision::Allow {
            updated_input: None,
            updated_permissions: Vec::new(),
        }
    }

    /// Deny with a message.
    pub fn deny(message: impl Into<String>) -> PermissionDecision {
        PermissionDecision::Deny {
            message: message.into(),
            interrupt: false,
        }
    }
}

/// A hook matcher to register in `initialize`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookMatcher {
    /// The hook event (`PreToolUse`, `PostToolUse`, …).
    pub event: String,
    /// The tool-name pattern (`"Bash"`, `"Write|Edit"`); `None` matches everything.
    pub matcher: Option<String>,
    /// The CLI-side timeout in seconds.
    pub timeout_s: Option<u64>,
}

/// The protocol engine of one CLI process.
///
/// Feed it what the CLI wrote ([`handle_stdout`](Session::handle_stdout)) and, in observer mode,
/// what the host wrote ([`handle_stdin`](Session::handle_stdin)); call commands in driver mode;
/// then drain [`poll_output`](Session::poll_output) and ask
/// [`poll_timeout`](Session::poll_timeout) when to call
/// [`handle_timeout`](Session::handle_timeout).
#[derive(Debug)]
pub struct Session {
    out_framer: LineFramer,
    in_framer: LineFramer,
    state: State,
}

/// Which way a line travelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    /// CLI → host (stdout).
    Out,
    /// Host → CLI (stdin).
    In,
}

impl Session {
    /// A driver-mode session: the embedder owns the CLI's stdin.
    pub fn driver(config: SessionConfig) -> Session {
        Session::new(Mode::Driver, config)
    }

    /// An observer-mode session: both directions are observed.
    pub fn observer(config: SessionConfig) -> Session {
        Session::new(Mode::Observer, config)
    }

    fn new(mode: Mode, config: SessionConfig) -> Session {
        Session {
            out_framer: LineFramer::new(config.line_limit),
            in_framer: LineFramer::new(config.line_limit),
            state: State::new(mode, config),
        }
    }

    // ---- getters -------------------------------------------------------------------------

    /// The mode the session was created in.
    pub fn mode(&self) -> Mode {
        self.state.mode
    }

    /// Whether the CLI is waiting for a tool, and on what. Equals the last `tool_wait` chunk.
    pub fn tool_wait(&self) -> &ToolWait {
        &self.state.tool_wait
    }

    /// The status of a tool call, if the session knows it.
    pub fn tool_status(&self, tool_use_id: &str) -> Option<ToolStatus> {
        self.state.tools.get(tool_use_id).map(|t| t.status)
    }

    /// Every tool call the session remembers with its status, in the order they appeared.
    pub fn tool_statuses(&self) -> impl Iterator<Item = (&str, ToolStatus)> {
        self.state
            .tool_order
            .iter()
            .filter_map(|id| self.state.tools.get(id).map(|t| (id.as_str(), t.status)))
    }

    /// Whether a turn is running (between its start and its `result`).
    pub fn turn_running(&self) -> bool {
        self.state.turn_running
    }

    /// The CLI's session id, from the latest `system/init`.
    pub fn session_id(&self) -> Option<&str> {
        self.state.session_id.as_deref()
    }

    /// Whether the host reported the process's end.
    pub fn process_exited(&self) -> bool {
        self.state.exited
    }

    // ---- inputs --------------------------------------------------------------------------

    /// Feeds bytes the CLI wrote to stdout, split anywhere.
    pub fn handle_stdout(&mut self, now: Timestamp, data: &[u8]) {
        let Session {
            out_framer, state, ..
        } = self;
        out_framer.push(data, |frame| state.handle_frame(now, Dir::Out, frame));
        state.refresh_tool_wait();
    }

    /// Reports the end of the CLI's stdout; a final line without newline is processed.
    pub fn handle_stdout_eof(&mut self, now: Timestamp) {
        let Session {
            out_framer, state, ..
        } = self;
        out_framer.finish(|frame| state.handle_frame(now, Dir::Out, frame));
        state.ended = true;
        state.refresh_tool_wait();
    }

    /// Observer mode: feeds bytes the host wrote to the CLI's stdin, split anywhere.
    pub fn handle_stdin(&mut self, now: Timestamp, data: &[u8]) {
        let Session {
            in_framer, state, ..
        } = self;
        in_framer.push(data, |frame| state.handle_frame(now, Dir::In, frame));
        state.refresh_tool_wait();
    }

    /// Feeds one whole CLI → host message (a line without its newline).
    pub fn observe_out(&mut self, now: Timestamp, line: &str) {
        self.state
            .handle_frame(now, Dir::Out, Frame::Line(line.as_bytes()));
        self.state.refresh_tool_wait();
    }

    /// Feeds one whole host → CLI message (a line without its newline).
    pub fn observe_in(&mut self, now: Timestamp, line: &str) {
        self.state
            .handle_frame(now, Dir::In, Frame::Line(line.as_bytes()));
        self.state.refresh_tool_wait();
    }

    /// Feeds one frame of the CLI's stdout framed by the embedder (which may keep its own
    /// [`LineFramer`], e.g. to record each line next to what the session wrote in answer).
    pub fn handle_stdout_frame(&mut self, now: Timestamp, frame: Frame<'_>) {
        self.feed_frame(now, Dir::Out, frame);
    }

    /// The longest line the session accepts, in bytes.
    pub fn line_limit(&self) -> usize {
        self.out_framer.limit()
    }

    /// Feeds one framed line (or an over-long line report) in the given direction.
    pub(crate) fn feed_frame(&mut self, now: Timestamp, dir: Dir, frame: Frame<'_>) {
        self.state.handle_frame(now, dir, frame);
        self.state.refresh_tool_wait();
    }

    /// Queues a chunk produced outside the session (transcript format errors).
    pub(crate) fn push_chunk(&mut self, chunk: Chunk) {
        self.state.emit(chunk);
    }

    /// Reports that the CLI process ended, with its exit code or the signal that ended it.
    pub fn handle_process_exit(&mut self, now: Timestamp, code: Option<i32>, signal: Option<i32>) {
        self.state.process_exit(now, code, signal);
        self.state.refresh_tool_wait();
    }

    /// Applies the timeout policy to every deadline at or before `now`.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        self.state.handle_timeout(now);
        self.state.refresh_tool_wait();
    }

    // ---- commands (driver mode) ----------------------------------------------------------

    /// Sends `initialize` with hook matchers and further fields (`agents`, `systemPrompt`, …).
    /// Returns the request id and the callback id assigned to each hook matcher, in order.
    ///
    /// # Errors
    /// [`CommandError::NotDriver`] in observer mode, [`CommandError::ProcessEnded`] after exit.
    pub fn initialize(
        &mut self,
        now: Timestamp,
        hooks: &[HookMatcher],
        extra: Map<String, Value>,
    ) -> Result<(String, Vec<String>), CommandError> {
        self.state.check_driver()?;
        let mut callback_ids = Vec::with_capacity(hooks.len());
        let hooks_value = if hooks.is_empty() {
            Value::Null
        } else {
            let mut by_event: Map<String, Value> = Map::new();
            for hook in hooks {
                let id = format!("hook_{}", self.state.next_hook);
                self.state.next_hook += 1;
                let mut entry = json!({"matcher": hook.matcher, "hookCallbackIds": [id]});
                if let Some(t) = hook.timeout_s {
                    entry["timeout"] = json!(t);
                }
                callback_ids.push(id);
                by_event
                    .entry(hook.event.clone())
                    .or_insert_with(|| Value::Array(Vec::new()))
                    .as_array_mut()
                    .expect("hook events hold arrays")
                    .push(entry);
            }
            Value::Object(by_event)
        };
        let mut fields = Map::new();
        fields.insert("hooks".into(), hooks_value);
        fields.extend(extra);
        let id = self.send_control(now, "initialize", fields)?;
        Ok((id, callback_ids))
    }

    /// Sends a prompt.
    ///
    /// # Errors
    /// [`CommandError::NotDriver`] in observer mode, [`CommandError::ProcessEnded`] after exit.
    pub fn send_user_message(
        &mut self,
        _now: Timestamp,
        message: UserMessage,
    ) -> Result<(), CommandError> {
        self.state.check_driver()?;
        let content = Json::from_value(&message.content);
        let (uuid, priority) = (message.uuid.clone(), message.priority.clone());
        let frame = user_frame(message);
        self.state.write(&frame);
        if content.is_null() {
            // Written all the same; said as an observer of the line would say it.
            let text = frame.to_string();
            self.state
                .invalid("a user message needs `message.content`", &text);
        } else {
            self.state.host_prompt(content, uuid, priority);
        }
        self.state.refresh_tool_wait();
        Ok(())
    }

    /// [`send_user_message`](Self::send_user_message) of a prompt of data (no uuid, priority
    /// or further field) whose content was serialized beforehand — off whatever lock guards
    /// the session, for a large prompt. Writes the same line.
    ///
    /// # Errors
    /// As [`send_user_message`](Self::send_user_message).
    pub(crate) fn send_ready_prompt(
        &mut self,
        _now: Timestamp,
        prompt: ReadyPrompt,
    ) -> Result<(), CommandError> {
        self.state.check_driver()?;
        // The line `send_user_message` writes around a mark, then the content's text where
        // the mark is.
        const MARK: &str = "\u{0}ccwire:content\u{0}";
        let around = user_frame(UserMessage::text(MARK)).to_string();
        let mark = Value::from(MARK).to_string();
        let at = around.find(&mark).expect("the mark is in the line");
        let mut line = Vec::with_capacity(around.len() + prompt.text.len() + 1);
        line.extend_from_slice(&around.as_bytes()[..at]);
        line.extend_from_slice(prompt.text.as_bytes());
        line.extend_from_slice(&around.as_bytes()[at + mark.len()..]);
        line.push(b'\n');
        self.state.write_line(line);
        self.state.host_prompt(prompt.content, None, None);
        self.state.refresh_tool_wait();
        Ok(())
    }

    /// Answers a `permission_request`.
    ///
    /// # Errors
    /// [`CommandError::UnknownRequest`] or [`CommandError::WrongRequestKind`] for an id that is
    /// not a permission request the CLI sent; [`CommandError::NotDriver`] in observer mode.
    pub fn respond_permission(
        &mut self,
        now: Timestamp,
        request_id: &str,
        decision: PermissionDecision,
    ) -> Result<Delivery, CommandError> {
        let result = self.state.respond_permission(now, request_id, decision);
        self.state.refresh_tool_wait();
        result
    }

    /// Answers a `hook_request` with the hook's JSON output (`{}` means no opinion).
    ///
    /// # Errors
    /// As [`respond_permission`](Session::respond_permission), for hook requests.
    pub fn respond_hook(
        &mut self,
        now: Timestamp,
        request_id: &str,
        output: Value,
    ) -> Result<Delivery, CommandError> {
        let result = self.state.respond_hook(now, request_id, output);
        self.state.refresh_tool_wait();
        result
    }

    /// Answers an `mcp_tool_call`.
    ///
    /// # Errors
    /// As [`respond_permission`](Session::respond_permission), for MCP tool calls.
    pub fn respond_mcp(
        &mut self,
        now: Timestamp,
        request_id: &str,
        result: McpCallResult,
    ) -> Result<Delivery, CommandError> {
        let result = self.state.respond_mcp(now, request_id, &result);
        self.state.refresh_tool_wait();
        result
    }

    /// Answers an `elicitation_request`: `{"action":"accept","content":{…}}`, `{"action":
    /// "decline"}` or `{"action":"cancel"}` (MCP's `ElicitResult`).
    ///
    /// # Errors
    /// As [`respond_permission`](Session::respond_permission), for elicitations.
    pub fn respond_elicitation(
        &mut self,
        now: Timestamp,
        request_id: &str,
        answer: Value,
    ) -> Result<Delivery, CommandError> {
        let result = self.state.respond_elicitation(now, request_id, answer);
        self.state.refresh_tool_wait();
        result
    }

    /// Answers a `dialog_request`: `{"behavior":"completed","result":…}`, or
    /// `{"behavior":"cancelled"}` when the user dismissed it (or the kind is not one the
    /// embedder renders: the CLI then applies the dialog's default).
    ///
    /// # Errors
    /// As [`respond_permission`](Session::respond_permission), for dialogs.
    pub fn respond_user_dialog(
        &mut self,
        now: Timestamp,
        request_id: &str,
        answer: Value,
    ) -> Result<Delivery, CommandError> {
        let result = self.state.respond_user_dialog(now, request_id, answer);
        self.state.refresh_tool_wait();
        result
    }

    /// Answers any request from the CLI with a control error.
    ///
    /// # Errors
    /// [`CommandError::UnknownRequest`] for an id the CLI never sent; [`CommandError::NotDriver`]
    /// in observer mode.
    pub fn respond_error(
        &mut self,
        now: Timestamp,
        request_id: &str,
        message: &str,
    ) -> Result<Delivery, CommandError> {
        let result = self.state.respond_error(now, request_id, message);
        self.state.refresh_tool_wait();
        result
    }

    /// Interrupts the running turn. Returns the request id.
    ///
    /// # Errors
    /// [`CommandError::NotDriver`] in observer mode, [`CommandError::ProcessEnded`] after exit.
    pub fn interrupt(&mut self, now: Timestamp) -> Result<String, CommandError> {
        self.send_control(now, "interrupt", Map::new())
    }

    /// Switches the model (`None` = the session default). Returns the request id.
    ///
    /// # Errors
    /// [`CommandError::NotDriver`] in observer mode, [`CommandError::ProcessEnded`] after exit.
    pub fn set_model(
        &mut self,
        now: Timestamp,
        model: Option<&str>,
    ) -> Result<String, CommandError> {
        let mut fields = Map::new();
        fields.insert("model".into(), json!(model));
        self.send_control(now, "set_model", fields)
    }

    /// Switches the permission mode (`default`, `acceptEdits`, `plan`, …). Returns the request id;
    /// the answer is `{mode}`, the mode now in effect (`manual` is `default`).
    ///
    /// # Errors
    /// [`CommandError::NotDriver`] in observer mode, [`CommandError::ProcessEnded`] after exit.
    pub fn set_permission_mode(
        &mut self,
        now: Timestamp,
        mode: &str,
    ) -> Result<String, CommandError> {
        let mut fields = Map::new();
        fields.insert("mode".into(), json!(mode));
        self.send_control(now, "set_permission_mode", fields)
    }

    /// Sends a typed control request ([`HostRequest`](crate::requests::HostRequest): every
    /// subtype a host sends, with its fields). Returns the request id; the answer arrives as a
    /// `control_result` chunk.
    ///
    /// # Errors
    /// [`CommandError::NotDriver`] in observer mode, [`CommandError::ProcessEnded`] after exit.
    pub fn request(
        &mut self,
        now: Timestamp,
        request: crate::requests::HostRequest,
    ) -> Result<String, CommandError> {
        let (subtype, fields) = request.into_parts();
        self.send_control(now, &subtype, fields)
    }

    /// Sends any control request (`mcp_status`, `get_context_usage`, `stop_task`, …). Returns
    /// the request id; the answer arrives as a `control_result` chunk.
    ///
    /// # Errors
    /// [`CommandError::NotDriver`] in observer mode, [`CommandError::ProcessEnded`] after exit.
    pub fn send_control(
        &mut self,
        now: Timestamp,
        subtype: &str,
        fields: Map<String, Value>,
    ) -> Result<String, CommandError> {
        self.state.check_driver()?;
        let request_id = self.state.next_request_id();
        let mut request = Map::new();
        request.insert("subtype".into(), json!(subtype));
        request.extend(fields);
        let frame =
            json!({"type": "control_request", "request_id": request_id, "request": request});
        self.state.write(&frame);
        self.state
            .host_request(now, request_id.clone(), subtype.to_owned());
        self.state.refresh_tool_wait();
        Ok(request_id)
    }

    // ---- outputs -------------------------------------------------------------------------

    /// The next output, in order; `None` when drained.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.state.outputs.pop_front()
    }

    /// Drains every pending output into a vector.
    pub fn drain_outputs(&mut self) -> Vec<Output> {
        self.state.outputs.drain(..).collect()
    }

    /// The earliest deadline and why, when one is set.
    pub fn poll_timeout(&self) -> Option<(Timestamp, TimeoutReason)> {
        self.state.next_deadline()
    }
}

/// Builds the `error` chunk for a line that could not be used.
pub(crate) fn line_error(kind: ErrorKind, detail: String, line: &[u8]) -> Chunk {
    Chunk::Error {
        kind,
        detail,
        excerpt: Some(excerpt(line)),
        bytes: None,
    }
}

/// The first 200 bytes of a line, cut at a character boundary.
pub(crate) fn excerpt(line: &[u8]) -> String {
    let mut end = line.len().min(200);
    while end > 0 && end < line.len() && (line[end] & 0xC0) == 0x80 {
        end -= 1;
    }
    String::from_utf8_lossy(&line[..end]).into_owned()
}

/// Output queue helpers shared by the engine parts.
pub(crate) type Outputs = VecDeque<Output>;

#[cfg(test)]
mod ready_prompt_tests {
    use super::*;

    /// The line of a prompt serialized ahead is the line `send_user_message` writes.
    #[test]
    fn a_ready_prompt_writes_the_line_a_user_message_writes() {
        let content = json!([
            {"type": "text", "text": "/config \"x\" ünïcode \u{1F600} 1e21"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
            {"type": "other", "n": 1.5e300, "m": -0.0}
        ]);
        let line = |send: &dyn Fn(&mut Session)| {
            let mut session = Session::driver(SessionConfig::default());
            send(&mut session);
            let mut lines = Vec::new();
            let mut chunks = Vec::new();
            while let Some(output) = session.poll_output() {
                match output {
                    Output::Write(bytes) => lines.push(bytes),
                    Output::Chunk(chunk) => chunks.push(serde_json::to_string(&chunk).unwrap()),
                }
            }
            (lines, chunks)
        };
        let plain = line(&|s| {
            s.send_user_message(0, UserMessage::blocks(content.as_array().unwrap().clone()))
                .unwrap();
        });
        let ready = line(&|s| s.send_ready_prompt(0, ReadyPrompt::new(&content)).unwrap());
        assert_eq!(plain.0.len(), 1);
        assert_eq!(
            String::from_utf8_lossy(&ready.0[0]),
            String::from_utf8_lossy(&plain.0[0])
        );
        assert_eq!(ready.1, plain.1, "the same chunks");
    }
}
