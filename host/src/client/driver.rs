//! The background task that owns the CLI process and its [`Session`]: it feeds stdout in,
//! writes what the session asks for, runs the embedder's handlers and applies deadlines.

use std::collections::{HashMap, HashSet};
use std::pin::Pin;
use std::time::Duration;

use ccwire_core::{Chunk, McpCallResult, Output, PermissionDecision, Session};
use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::{Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::handle::{Command, ControlAnswer};
use super::options::{
    DialogHandler, ElicitationHandler, HookHandler, PermissionHandler, PermissionRequest,
    ToolHandler,
};
use super::{ClientError, Event};
use crate::process::{CliProcess, ExitInfo, StderrTail};
use crate::record::{Direction, TranscriptWriter};

/// A handler that finished, with its answer to the request it was run for.
pub(super) enum HandlerDone {
    Permission(String, PermissionDecision),
    Hook(String, Value),
    Tool(String, McpCallResult),
    Elicitation(String, Value),
    Dialog(String, Value),
}

type Waiter = oneshot::Sender<Result<ControlAnswer, ClientError>>;

/// How long the CLI may take to exit after its stdin closes (it flushes its session file).
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// The task's state: the process, its session, the handlers running and the requests waiting
/// for an answer.
pub(super) struct Driver {
    pub(super) process: CliProcess,
    pub(super) stdin: Option<tokio::process::ChildStdin>,
    pub(super) stdout: Option<tokio::process::ChildStdout>,
    pub(super) stderr: StderrTail,
    pub(super) session: Session,
    pub(super) start: Instant,
    pub(super) events: mpsc::UnboundedSender<Event>,
    pub(super) waiters: HashMap<String, (String, Waiter)>,
    pub(super) permission: Option<PermissionHandler>,
    pub(super) elicitation: Option<ElicitationHandler>,
    pub(super) user_dialog: Option<DialogHandler>,
    pub(super) hooks: HashMap<String, HookHandler>,
    pub(super) tools: HashMap<(String, String), ToolHandler>,
    pub(super) held: HashSet<String>,
    pub(super) handlers:
        FuturesUnordered<Pin<Box<dyn std::future::Future<Output = HandlerDone> + Send>>>,
    pub(super) last_error_result: Option<String>,
    pub(super) recorder: Option<Recorder>,
    pub(super) framer: ccwire_core::framing::LineFramer,
    pub(super) stall_timeout: Option<Duration>,
    /// When the CLI last wrote anything.
    pub(super) last_output: Instant,
}

/// A chunk as the JSON value its handler gets.
fn chunk_value(chunk: &Chunk) -> Value {
    serde_json::to_value(chunk).expect("chunks always serialize")
}

/// Records the wire lines of a client session, in the order the session handles them.
pub(super) struct Recorder {
    writer: TranscriptWriter<std::io::BufWriter<std::fs::File>>,
}

impl Recorder {
    pub(super) fn create(path: &std::path::Path) -> std::io::Result<Recorder> {
        let file = std::fs::File::create(path)?;
        Ok(Recorder {
            writer: TranscriptWriter::new(std::io::BufWriter::new(file)),
        })
    }

    fn line(&mut self, dir: Direction, now: u64, line: &[u8]) {
        if let Err(err) = self.writer.line(dir, now, line) {
            tracing::warn!(%err, "cannot write the transcript");
        }
    }
}

/// A stdout frame, owned, so each can be handled and answered before the next.
enum OwnedFrame {
    Line(Vec<u8>),
    TooLong(u64),
}

impl Driver {
    fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    pub(super) async fn run(
        mut self,
        mut commands: mpsc::UnboundedReceiver<Command>,
        init_id: String,
        ready: oneshot::Sender<Result<ControlAnswer, ClientError>>,
    ) {
        self.waiters
            .insert(init_id, ("initialize".to_owned(), ready));
        self.flush().await;
        let mut stdout = self.stdout.take().expect("stdout is piped");
        let mut buf = vec![0u8; 64 * 1024];
        let mut commands_open = true;
        // After stdin closes: when to escalate (SIGTERM, then SIGKILL) if the CLI lingers.
        let mut escalate_at: Option<Instant> = None;
        let mut terminated = false;
        loop {
            let deadline = self
                .session
                .poll_timeout()
                .map(|(at, _)| self.start + Duration::from_millis(at));
            let stall_at = self.stall_timeout.filter(|_| {
                !terminated
                    && self.session.turn_running()
                    && self.session.tool_wait().blocked_on.is_empty()
                    && self.handlers.is_empty()
            });
            let stall_at = stall_at.map(|limit| self.last_output + limit);
            tokio::select! {
                read = stdout.read(&mut buf) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        self.last_output = Instant::now();
                        let mut frames = Vec::new();
                        self.framer.push(&buf[..n], |frame| frames.push(owned(frame)));
                        for frame in &frames {
                            if let OwnedFrame::Line(line) = frame {
                                tracing::trace!(target: "ccwire::wire", "< {}", String::from_utf8_lossy(line));
                            }
                        }
                        self.handle_frames(frames).await;
                    }
                },
                command = commands.recv(), if commands_open => match command {
                    Some(command) => self.command(command),
                    None => {
                        commands_open = false;
                        drop(self.stdin.take());
                    }
                },
                Some(done) = self.handlers.next() => self.answer(done),
                _ = sleep_until(deadline), if deadline.is_some() => {
                    let now = self.now();
                    self.session.handle_timeout(now);
                }
                _ = sleep_until(stall_at), if stall_at.is_some() => {
                    let limit = self.stall_timeout.unwrap_or_default();
                    tracing::warn!(?limit, "the CLI stalled in a turn; stopping it");
                    self.last_error_result = Some(format!(
                        "the CLI wrote nothing for {} s during a turn (stall timeout) and was stopped",
                        limit.as_secs_f64()
                    ));
                    self.process.terminate();
                    terminated = true;
                    escalate_at = Some(Instant::now() + Duration::from_secs(5));
                }
                _ = sleep_until(escalate_at), if escalate_at.is_some() => {
                    if terminated {
                        self.process.kill();
                        escalate_at = None;
                    } else {
                        self.process.terminate();
                        terminated = true;
                        escalate_at = Some(Instant::now() + Duration::from_secs(5));
                    }
                }
            }
            if self.stdin.is_none() && escalate_at.is_none() && !terminated {
                escalate_at = Some(Instant::now() + CLOSE_GRACE);
            }
            self.flush().await;
        }
        // stdout ended: the process is ending or gone.
        let mut frames = Vec::new();
        self.framer.finish(|frame| frames.push(owned(frame)));
        self.handle_frames(frames).await;
        let exit = self
            .process
            .shutdown(CLOSE_GRACE)
            .await
            .unwrap_or(ExitInfo {
                code: None,
                signal: None,
            });
        // A request the CLI never answered (`initialize`, when a bad flag ends it at once)
        // fails with how it ended and what it said on stderr.
        for (_, (subtype, waiter)) in self.waiters.drain() {
            let _ = waiter.send(Err(ClientError::ProcessExited {
                exit,
                result: self.last_error_result.clone(),
                stderr: self.stderr.text(),
            }));
            tracing::debug!(subtype, "request failed: the process ended");
        }
        let now = self.now();
        self.session.handle_stdout_eof(now);
        self.flush().await;
        let now = self.now();
        self.session
            .handle_process_exit(now, exit.code, exit.signal);
        self.flush().await;
        let _ = self.events.send(Event::Exited {
            exit,
            result: self.last_error_result.clone(),
            stderr: self.stderr.text(),
        });
    }

    fn command(&mut self, command: Command) {
        let now = self.now();
        match command {
            Command::Send(message, reply) => {
                let result = self.session.send_user_message(now, message);
                let _ = reply.send(result.map_err(ClientError::from));
            }
            Command::Control(subtype, fields, reply) => {
                match self.session.send_control(now, &subtype, fields) {
                    Ok(id) => {
                        self.waiters.insert(id, (subtype, reply));
                    }
                    Err(err) => {
                        let _ = reply.send(Err(err.into()));
                    }
                }
            }
            Command::RespondTool(id, result) => {
                if let Err(err) = self.session.respond_mcp(now, &id, result) {
                    tracing::debug!(%err, "a tool answer was refused");
                }
            }
            Command::Close => drop(self.stdin.take()),
        }
    }

    fn answer(&mut self, done: HandlerDone) {
        let now = self.now();
        let result = match done {
            HandlerDone::Permission(id, decision) => {
                self.session.respond_permission(now, &id, decision)
            }
            HandlerDone::Hook(id, output) => self.session.respond_hook(now, &id, output),
            HandlerDone::Tool(id, result) => self.session.respond_mcp(now, &id, result),
            HandlerDone::Elicitation(id, answer) => {
                self.session.respond_elicitation(now, &id, answer)
            }
            HandlerDone::Dialog(id, answer) => self.session.respond_user_dialog(now, &id, answer),
        };
        if let Err(err) = result {
            tracing::warn!(%err, "an answer was refused");
        }
    }

    /// Hands stdout frames to the session one at a time, each followed by what it answered, so
    /// a recording replays to exactly the chunks seen live.
    async fn handle_frames(&mut self, frames: Vec<OwnedFrame>) {
        use ccwire_core::framing::Frame;
        for frame in frames {
            let now = self.now();
            match &frame {
                OwnedFrame::Line(line) => {
                    if let Some(recorder) = self.recorder.as_mut() {
                        recorder.line(Direction::Out, now, line);
                    }
                    self.session.handle_stdout_frame(now, Frame::Line(line));
                }
                OwnedFrame::TooLong(bytes) => {
                    self.session
                        .handle_stdout_frame(now, Frame::TooLong { bytes: *bytes });
                }
            }
            self.flush().await;
        }
    }

    /// Writes what the session asks for and hands chunks on.
    async fn flush(&mut self) {
        while let Some(output) = self.session.poll_output() {
            match output {
                Output::Write(bytes) => {
                    let now = self.now();
                    if let Some(recorder) = self.recorder.as_mut() {
                        recorder.line(Direction::In, now, &bytes);
                    }
                    let Some(stdin) = self.stdin.as_mut() else {
                        continue;
                    };
                    tracing::trace!(target: "ccwire::wire", "> {}", String::from_utf8_lossy(&bytes).trim_end());
                    if stdin.write_all(&bytes).await.is_err() || stdin.flush().await.is_err() {
                        // The process is gone; stdout's end reports it.
                        self.stdin = None;
                    }
                }
                Output::Chunk(chunk) => self.chunk(chunk),
            }
        }
    }

    fn chunk(&mut self, chunk: Chunk) {
        match &chunk {
            Chunk::PermissionRequest {
                request_id,
                tool_use_id,
                tool_name,
                input,
                suggestions,
                blocked_path,
                ..
            } => {
                let id = request_id.clone();
                let request = PermissionRequest {
                    tool_name: tool_name.clone(),
                    input: input.to_value(),
                    tool_use_id: tool_use_id.clone(),
                    suggestions: suggestions.to_value(),
                    blocked_path: blocked_path.clone(),
                };
                match self.permission.clone() {
                    Some(handler) => self.handlers.push(Box::pin(async move {
                        HandlerDone::Permission(id, handler(request).await)
                    })),
                    None => self.handlers.push(Box::pin(async move {
                        let deny = PermissionDecision::deny("No permission handler is configured.");
                        HandlerDone::Permission(id, deny)
                    })),
                }
            }
            Chunk::HookRequest {
                request_id,
                callback_id,
                input,
                ..
            } => {
                let id = request_id.clone();
                let input = input.to_value();
                let handler = self.hooks.get(callback_id).cloned();
                self.handlers.push(Box::pin(async move {
                    let output = match handler {
                        Some(handler) => handler(input).await,
                        None => Value::Object(Map::new()),
                    };
                    HandlerDone::Hook(id, output)
                }));
            }
            Chunk::ElicitationRequest { request_id, .. } => {
                // Without a handler the session has declined it already.
                if let Some(handler) = self.elicitation.clone() {
                    let (id, request) = (request_id.clone(), chunk_value(&chunk));
                    self.handlers.push(Box::pin(async move {
                        HandlerDone::Elicitation(id, handler(request).await)
                    }));
                }
            }
            Chunk::DialogRequest { request_id, .. } => {
                // Without a handler it is left unanswered, as the official SDKs do: another
                // client may render it, else the CLI's own deadline settles it.
                if let Some(handler) = self.user_dialog.clone() {
                    let (id, request) = (request_id.clone(), chunk_value(&chunk));
                    self.handlers.push(Box::pin(async move {
                        HandlerDone::Dialog(id, handler(request).await)
                    }));
                }
            }
            Chunk::McpToolCall { server, .. } if self.held.contains(server) => {}
            Chunk::McpToolCall {
                request_id,
                server,
                tool,
                arguments,
                ..
            } => {
                let id = request_id.clone();
                let handler = self.tools.get(&(server.clone(), tool.clone())).cloned();
                let arguments = arguments.to_value();
                let tool = tool.clone();
                self.handlers.push(Box::pin(async move {
                    let result = match handler {
                        Some(handler) => handler(arguments).await,
                        None => McpCallResult::error(format!("Tool '{tool}' not found")),
                    };
                    HandlerDone::Tool(id, result)
                }));
            }
            Chunk::ControlResult {
                request_id,
                ok,
                response,
                error,
                ..
            } => {
                if let Some((subtype, waiter)) = self.waiters.remove(request_id) {
                    let answer = if *ok {
                        Ok(ControlAnswer {
                            response: response
                                .as_ref()
                                .map(|r| r.to_value())
                                .unwrap_or(Value::Null),
                        })
                    } else {
                        Err(ClientError::Refused {
                            subtype,
                            error: error.clone().unwrap_or_default(),
                        })
                    };
                    let _ = waiter.send(answer);
                }
            }
            Chunk::TurnComplete {
                is_error,
                result,
                errors,
                subtype,
                ..
            } => {
                self.last_error_result =
                    is_error.then(|| error_text(result.as_deref(), errors, subtype.as_deref()));
            }
            Chunk::SessionInit { .. } | Chunk::MessageStart { .. } | Chunk::UserPrompt { .. } => {
                self.last_error_result = None;
            }
            _ => {}
        }
        let _ = self.events.send(Event::Chunk(chunk));
    }
}

/// The text of an error result: its errors, else its result, else its subtype.
fn error_text(result: Option<&str>, errors: &ccwire_core::Json, subtype: Option<&str>) -> String {
    let errors: Vec<String> = serde_json::from_str(errors.get()).unwrap_or_default();
    if !errors.is_empty() {
        return errors.join("; ");
    }
    if let Some(result) = result.filter(|r| !r.is_empty()) {
        return result.to_owned();
    }
    subtype.unwrap_or("error").to_owned()
}

fn owned(frame: ccwire_core::framing::Frame<'_>) -> OwnedFrame {
    match frame {
        ccwire_core::framing::Frame::Line(line) => OwnedFrame::Line(line.to_vec()),
        ccwire_core::framing::Frame::TooLong { bytes } => OwnedFrame::TooLong(bytes),
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
