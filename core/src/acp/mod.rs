//! The Agent Client Protocol engine behind `ccwire acp` (docs/ACP.md).
//!
//! An editor (the ACP *client*: Zed, a JetBrains IDE, Neovim, Emacs) speaks JSON-RPC 2.0, one
//! message per line, on the agent's stdin and stdout. [`Agent`] is the agent's side. Each ACP
//! session is one CLI process driven by a [`Session`]: a prompt becomes the CLI's user message;
//! what the CLI streams becomes `session/update` notifications (message and thought chunks, tool
//! calls with their kind, title, files and diffs, the plan, the slash commands, the mode); a
//! permission request of the CLI becomes a `session/request_permission` request to the editor.
//! A session loaded again (`session/load`) is shown from the CLI's own transcript, then resumed
//! by a new CLI.
//!
//! Like the other engines it does no IO: the editor's bytes, each CLI's stdout and the time come
//! in; lines for the editor, CLIs to start, bytes for their stdin and a deadline go out. The
//! protocol's types are those of the published schema, re-exported as [`schema`].
//!
//! ## The run loop
//!
//! 1. Call an input: [`Agent::handle_input`] with what the editor wrote,
//!    [`Agent::handle_cli_stdout`] / [`Agent::handle_cli_exit`] for a CLI, or
//!    [`Agent::handle_timeout`] when the deadline passed.
//! 2. Drain [`Agent::poll_output`]: write [`AcpOutput::Send`] to the editor, start the CLI of an
//!    [`AcpOutput::Spawn`], write [`AcpOutput::Write`] to that CLI's stdin, end the CLI of an
//!    [`AcpOutput::Stop`], read the CLI's transcript of an [`AcpOutput::ReadTranscript`] and
//!    pass it to [`Agent::handle_transcript`], find those of an [`AcpOutput::ListTranscripts`]
//!    and pass them to [`Agent::handle_transcript_list`].
//! 3. Sleep until [`Agent::poll_timeout`] or more input.

mod content;
mod editor;
mod history;
mod open;
mod rpc;
mod settings;
mod tools;
mod updates;

use std::collections::{BTreeMap, VecDeque};

pub use agent_client_protocol_schema as schema;
use schema::v1::{
    AgentCapabilities, AuthMethod, AuthMethodTerminal, AuthenticateResponse, Error, Implementation,
    InitializeResponse, McpCapabilities, PromptCapabilities, PromptRequest, RequestId,
    RequestPermissionOutcome, RequestPermissionResponse, SessionCapabilities,
    SessionCloseCapabilities, SessionListCapabilities, SessionResumeCapabilities,
};
use schema::ProtocolVersion;
use serde_json::{json, Value};

use crate::args::CliArgs;
use crate::framing::{Frame, LineFramer, DEFAULT_LINE_LIMIT};
use crate::session::{Output, PermissionDecision, Session, Timeouts, UserMessage};
use crate::Timestamp;
use open::{Loading, Opening};
use settings::{Pending, Setting};

/// Settings of an [`Agent`].
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// What every session's CLI starts with (model, tools, settings files, …). The engine sets
    /// the rest: `--session-id`, the editor's MCP servers, permission prompts over the control
    /// channel and token streaming.
    pub cli: CliArgs,
    /// The key session ids and request-id seeds are derived from: randomness from the host (a
    /// fixed key makes runs reproducible, for tests).
    pub id_key: [u8; 32],
    /// ccwire's version, as `initialize` names the agent.
    pub version: String,
    /// Deadlines of each session's requests.
    pub timeouts: Timeouts,
    /// The longest line taken from the editor, in bytes.
    pub line_limit: usize,
    /// Whether the CLIs use the editor's files and terminals where it offers them
    /// (`ccwire acp --no-editor-tools` turns it off).
    pub editor_tools: bool,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            cli: CliArgs::default(),
            id_key: [0; 32],
            version: env!("CARGO_PKG_VERSION").to_owned(),
            timeouts: Timeouts::default(),
            line_limit: DEFAULT_LINE_LIMIT,
            editor_tools: true,
        }
    }
}

/// A CLI process of the agent, one per ACP session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CliId(pub u64);

/// What the agent asks of its host; drain with [`Agent::poll_output`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AcpOutput {
    /// A line (with its newline) for the editor: the agent's stdout.
    Send(Vec<u8>),
    /// Start a CLI with these settings in `cwd`, for ACP session `session_id`.
    Spawn {
        /// The CLI's id in later inputs and outputs.
        cli: CliId,
        /// The ACP session (also the CLI's session id).
        session_id: String,
        /// The working directory the editor gave.
        cwd: String,
        /// The CLI's settings: `to_args()` is its command line.
        args: Box<CliArgs>,
    },
    /// Bytes for a CLI's stdin, in order.
    Write {
        /// The CLI.
        cli: CliId,
        /// Whole lines.
        bytes: Vec<u8>,
    },
    /// End a CLI: close its stdin, then stop it.
    Stop {
        /// The CLI.
        cli: CliId,
    },
    /// Read the CLI's transcript of session `session_id`, which the CLI wrote for work
    /// directory `cwd` (`<config dir>/projects/<cwd, each character not a letter or digit a
    /// dash>/<session id>.jsonl`), and pass it to [`Agent::handle_transcript`].
    ReadTranscript {
        /// The session, a UUID.
        session_id: String,
        /// The work directory the editor gave.
        cwd: String,
    },
    /// Find the CLI's transcripts, of work directory `cwd` (`None`: of every directory), the
    /// most recently changed first, and pass entries `skip..skip + take` of that order to
    /// [`Agent::handle_transcript_list`] with the first 256 KiB of each.
    ListTranscripts {
        /// Names the answer.
        list: u64,
        /// The work directory (`<config dir>/projects/<cwd, each character not a letter or
        /// digit a dash>/`), or every project directory.
        cwd: Option<String>,
        /// How many of the most recent to pass over.
        skip: usize,
        /// How many to pass on at most.
        take: usize,
    },
}

/// A transcript of the CLI's as the host found it ([`AcpOutput::ListTranscripts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptHead {
    /// The session id: the file's name without `.jsonl`.
    pub session_id: String,
    /// When the file last changed, in milliseconds since the Unix epoch.
    pub modified_ms: u64,
    /// The file's first bytes (256 KiB at most).
    pub head: Vec<u8>,
}

/// The agent's side of ACP: every session the editor opens, each on its own CLI.
#[derive(Debug)]
pub struct Agent {
    config: AgentConfig,
    input: LineFramer,
    outputs: VecDeque<AcpOutput>,
    sessions: BTreeMap<String, Live>,
    /// `session/load` and `session/resume` requests waiting for their transcript, by session.
    loading: BTreeMap<String, Loading>,
    /// `session/list` requests waiting for the transcripts: the request, the directory asked
    /// for and how many entries went before.
    lists: BTreeMap<u64, (RequestId, Option<String>, usize)>,
    clis: BTreeMap<CliId, String>,
    /// Requests of the agent the editor has not answered, by id.
    asks: BTreeMap<i64, Ask>,
    next_id: u64,
    /// What the editor carries out for the CLIs (its files, its terminals).
    offers: editor::Offers,
    /// The time of the latest input.
    now: Timestamp,
}

/// An ACP session and its CLI.
#[derive(Debug)]
struct Live {
    cli: CliId,
    session: Session,
    /// The session's working directory.
    cwd: String,
    /// The `session/new`, `session/load` or `session/resume` answered when the CLI is ready.
    opening: Option<(RequestId, Opening)>,
    /// The `session/prompt` of the running turn.
    prompt: Option<RequestId>,
    cancelled: bool,
    mode: String,
    /// The model in use (`default`: the CLI's), and the models the CLI offers: value, name
    /// and description.
    model: String,
    models: Vec<(String, String, Option<String>)>,
    /// Tool calls by tool_use id: the tool's name, and whether the editor has seen the call.
    tools: BTreeMap<String, (String, bool)>,
    /// Mode and model changes waiting for the CLI, by its control request id.
    settings: BTreeMap<String, Pending>,
    /// The context the model's latest message (of the session, not of a subagent) took: its
    /// id, the tokens it was given (input and cache) and the tokens it wrote.
    context: Option<(String, u64, u64)>,
    /// The model's context window, once a turn has said it.
    window: Option<u64>,
    /// The CLI's permission requests the editor was asked about, by control request id.
    asked: BTreeMap<String, i64>,
    ended: bool,
}

/// A request of the agent to the editor.
#[derive(Debug)]
enum Ask {
    Permission {
        session: String,
        request_id: String,
        tool: String,
        suggestions: Value,
    },
    /// A step of a tool call the editor carries out.
    Tool(editor::Job),
    /// A request whose answer changes nothing (`terminal/kill`).
    Nothing,
}

/// The permission modes an editor can switch between (`session/set_mode`).
const MODES: [(&str, &str, &str); 4] = [
    ("default", "Default", "Asks before edits and commands"),
    ("acceptEdits", "Accept Edits", "Edits files without asking"),
    ("plan", "Plan Mode", "Plans without changing anything"),
    (
        "bypassPermissions",
        "Bypass Permissions",
        "Runs every tool without asking",
    ),
];

impl Agent {
    /// An agent with no session yet.
    pub fn new(config: AgentConfig) -> Agent {
        Agent {
            input: LineFramer::new(config.line_limit),
            config,
            outputs: VecDeque::new(),
            sessions: BTreeMap::new(),
            loading: BTreeMap::new(),
            lists: BTreeMap::new(),
            clis: BTreeMap::new(),
            asks: BTreeMap::new(),
            next_id: 0,
            offers: editor::Offers::default(),
            now: 0,
        }
    }

    /// What the editor wrote, in pieces of any size.
    pub fn handle_input(&mut self, now: Timestamp, data: &[u8]) {
        self.now = now;
        let mut lines: Vec<Result<Vec<u8>, u64>> = Vec::new();
        self.input.push(data, |frame| {
            lines.push(match frame {
                Frame::Line(line) => Ok(line.to_vec()),
                Frame::TooLong { bytes } => Err(bytes),
            });
        });
        for line in lines {
            match line {
                Ok(line) => self.handle_line(now, &line),
                Err(bytes) => self.send(rpc::response::<()>(
                    RequestId::Null,
                    Err(Error::invalid_request().data(json!(format!(
                        "a message of {bytes} bytes is over the limit"
                    )))),
                )),
            }
        }
    }

    /// The editor closed the agent's stdin: every CLI is stopped.
    pub fn handle_input_eof(&mut self, now: Timestamp) {
        self.now = now;
        let mut last = Vec::new();
        self.input.finish(|frame| {
            if let Frame::Line(line) = frame {
                last = line.to_vec();
            }
        });
        if !last.is_empty() {
            self.handle_line(now, &last);
        }
        for live in self.sessions.values_mut() {
            if !live.ended {
                live.ended = true;
                self.outputs.push_back(AcpOutput::Stop { cli: live.cli });
            }
        }
    }

    /// What a CLI wrote on its stdout.
    pub fn handle_cli_stdout(&mut self, now: Timestamp, cli: CliId, data: &[u8]) {
        self.now = now;
        if let Some(id) = self.clis.get(&cli).cloned() {
            if let Some(live) = self.sessions.get_mut(&id).filter(|l| l.cli == cli) {
                live.session.handle_stdout(now, data);
            }
            self.pump(&id);
        }
    }

    /// A CLI's process ended (after its stdout reached its end).
    pub fn handle_cli_exit(
        &mut self,
        now: Timestamp,
        cli: CliId,
        code: Option<i32>,
        signal: Option<i32>,
    ) {
        self.now = now;
        // (A session loaded again has a new CLI: the old one's end is not the session's.)
        if let Some(id) = self.clis.remove(&cli) {
            if let Some(live) = self.sessions.get_mut(&id).filter(|l| l.cli == cli) {
                live.session.handle_stdout_eof(now);
                live.session.handle_process_exit(now, code, signal);
            }
            self.pump(&id);
        }
    }

    /// The deadline of [`poll_timeout`](Self::poll_timeout) passed.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        self.now = now;
        let due: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, live)| live.session.poll_timeout().is_some_and(|(at, _)| at <= now))
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            if let Some(live) = self.sessions.get_mut(&id) {
                live.session.handle_timeout(now);
            }
            self.pump(&id);
        }
    }

    /// The next output, if any.
    pub fn poll_output(&mut self) -> Option<AcpOutput> {
        self.outputs.pop_front()
    }

    /// When to call [`handle_timeout`](Self::handle_timeout).
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.sessions
            .values()
            .filter_map(|live| live.session.poll_timeout().map(|(at, _)| at))
            .min()
    }

    /// The ACP sessions open now.
    pub fn sessions(&self) -> impl Iterator<Item = &str> {
        self.sessions.keys().map(String::as_str)
    }

    fn handle_line(&mut self, now: Timestamp, line: &[u8]) {
        match rpc::parse(line) {
            Err(refused) => {
                let (id, error) = *refused;
                self.send(rpc::response::<()>(id, Err(error)));
            }
            Ok(rpc::Incoming::Request { id, method, params }) => match rpc::call(&method, params) {
                Ok(call) => self.request(now, id, call),
                Err(Some(why)) => self.fail(id, Error::invalid_params().data(json!(why))),
                Err(None) => self.fail(id, Error::method_not_found().data(json!(method))),
            },
            Ok(rpc::Incoming::Notification { method, params }) => {
                // A notification is never answered, not even when it is not understood.
                if let Some(cancel) = rpc::cancel(&method, params) {
                    self.cancel(now, &cancel.session_id.0);
                }
            }
            Ok(rpc::Incoming::Response { id, result }) => self.answered(now, id, result),
        }
    }

    fn request(&mut self, now: Timestamp, id: RequestId, call: rpc::Call) {
        match call {
            rpc::Call::Initialize(request) => {
                let client = &request.client_capabilities;
                let used = self.config.editor_tools;
                self.offers = editor::Offers {
                    fs: used && client.fs.read_text_file && client.fs.write_text_file,
                    terminal: used && client.terminal,
                };
                let sessions = SessionCapabilities::new()
                    .list(SessionListCapabilities::new())
                    .resume(SessionResumeCapabilities::new())
                    .close(SessionCloseCapabilities::new());
                let capabilities = AgentCapabilities::new()
                    .load_session(true)
                    .session_capabilities(sessions)
                    .prompt_capabilities(
                        PromptCapabilities::new().image(true).embedded_context(true),
                    )
                    .mcp_capabilities(McpCapabilities::new().http(true).sse(true));
                let info = Implementation::new("ccwire", self.config.version.clone())
                    .title("Claude Code (ccwire)".to_owned());
                // An editor that runs agents in a terminal to log in is offered the CLI's
                // login: the agent's command with `--login` runs `claude auth login`.
                let login = AuthMethodTerminal::new("claude-login", "Log in to Claude Code")
                    .description("Runs `claude auth login` in a terminal".to_owned())
                    .args(vec!["--login".to_owned()]);
                let methods = if request.client_capabilities.auth.terminal {
                    vec![AuthMethod::Terminal(login)]
                } else {
                    vec![]
                };
                self.reply(
                    id,
                    InitializeResponse::new(ProtocolVersion::V1)
                        .agent_capabilities(capabilities)
                        .auth_methods(methods)
                        .agent_info(info),
                );
            }
            // The CLI logs in by itself (`claude /login`, or a key in its environment).
            rpc::Call::Authenticate => self.reply(id, AuthenticateResponse::new()),
            rpc::Call::NewSession(request) => self.new_session(now, id, request),
            rpc::Call::Load {
                session_id,
                cwd,
                mcp,
                replay,
            } => self.load(id, session_id, &cwd, mcp, replay),
            rpc::Call::ListSessions(request) => self.list(id, request),
            rpc::Call::CloseSession(request) => {
                self.close(id, &request.session_id.0);
            }
            rpc::Call::Prompt(request) => self.prompt(now, id, request),
            rpc::Call::SetMode(request) => {
                let mode = request.mode_id.0.to_string();
                self.set(now, id, &request.session_id.0, Setting::Mode(mode), false);
            }
            rpc::Call::SetConfigOption(request) => {
                let value = request.value.as_value_id().map(|v| v.0.to_string());
                let setting = match (&*request.config_id.0, value) {
                    ("mode", Some(mode)) => Setting::Mode(mode),
                    ("model", Some(model)) => Setting::Model(model),
                    (option, _) => {
                        let why = format!("no option {option} with a value of that kind");
                        return self.fail(id, Error::invalid_params().data(json!(why)));
                    }
                };
                self.set(now, id, &request.session_id.0, setting, true);
            }
        }
    }

    fn prompt(&mut self, now: Timestamp, id: RequestId, request: PromptRequest) {
        let session_id = request.session_id.0.to_string();
        let blocks = match content::user_blocks(&request.prompt) {
            Ok(blocks) => blocks,
            Err(why) => return self.fail(id, Error::invalid_params().data(json!(why))),
        };
        let refusal = match self.sessions.get(&session_id) {
            None => Some(Error::session_not_found(session_id.clone())),
            Some(live) if live.ended => Some(
                Error::invalid_request()
                    .data(json!("the session's CLI has ended; open a new session")),
            ),
            Some(live) if live.prompt.is_some() => Some(Error::invalid_request().data(json!(
                "a prompt of this session is running; cancel it or wait for its answer"
            ))),
            Some(_) => None,
        };
        if let Some(error) = refusal {
            return self.fail(id, error);
        }
        let live = self.sessions.get_mut(&session_id).expect("checked above");
        live.prompt = Some(id);
        live.cancelled = false;
        live.session
            .send_user_message(now, UserMessage::blocks(blocks))
            .expect("a live driver session takes commands");
        self.pump(&session_id);
    }

    fn cancel(&mut self, now: Timestamp, session_id: &str) {
        let Some(live) = self.sessions.get_mut(session_id) else {
            return;
        };
        if live.prompt.is_none() || live.cancelled || live.ended {
            return;
        }
        live.cancelled = true;
        // The CLI's questions to the editor are settled now; the editor's late answers are
        // dropped.
        for (request_id, _) in std::mem::take(&mut live.asked) {
            let decision = PermissionDecision::Deny {
                message: "The user cancelled the turn.".into(),
                interrupt: true,
            };
            let _ = live.session.respond_permission(now, &request_id, decision);
        }
        let _ = live.session.interrupt(now);
        self.kill_terminals(session_id, None);
        self.pump(session_id);
    }

    /// The editor answered a request of the agent.
    fn answered(&mut self, now: Timestamp, id: RequestId, result: Result<Value, Error>) {
        let RequestId::Number(n) = id else { return };
        let (session, request_id, tool, suggestions) = match self.asks.remove(&n) {
            Some(Ask::Permission {
                session,
                request_id,
                tool,
                suggestions,
            }) => (session, request_id, tool, suggestions),
            Some(Ask::Tool(job)) => return self.editor_answered(job, result),
            Some(Ask::Nothing) | None => return,
        };
        let Some(live) = self.sessions.get_mut(&session) else {
            return;
        };
        if live.asked.remove(&request_id).is_none() {
            return; // settled already (the turn was cancelled)
        }
        let outcome = result
            .ok()
            .and_then(|r| serde_json::from_value::<RequestPermissionResponse>(r).ok())
            .map(|r| r.outcome);
        let option = match &outcome {
            Some(RequestPermissionOutcome::Selected(selected)) => {
                Some(selected.option_id.0.as_ref())
            }
            _ => None,
        };
        let decision = match option {
            Some("allow") => PermissionDecision::allow(),
            Some("allow_always") => PermissionDecision::Allow {
                updated_input: None,
                updated_permissions: always(&tool, &suggestions),
            },
            Some(mode @ ("acceptEdits" | "default")) if tool == "ExitPlanMode" => {
                PermissionDecision::Allow {
                    updated_input: None,
                    updated_permissions: vec![
                        json!({"type": "setMode", "mode": mode, "destination": "session"}),
                    ],
                }
            }
            Some(_) => PermissionDecision::deny("The user refused this tool call."),
            None => PermissionDecision::Deny {
                message: "The user cancelled the turn.".into(),
                interrupt: true,
            },
        };
        let _ = live.session.respond_permission(now, &request_id, decision);
        self.pump(&session);
    }

    /// Moves a session's outputs out: its stdin lines to the host, its chunks to the editor.
    fn pump(&mut self, session_id: &str) {
        loop {
            let Some(live) = self.sessions.get_mut(session_id) else {
                return;
            };
            let outputs = live.session.drain_outputs();
            if outputs.is_empty() {
                return;
            }
            let cli = live.cli;
            for output in outputs {
                match output {
                    Output::Write(bytes) => {
                        self.outputs.push_back(AcpOutput::Write { cli, bytes });
                    }
                    Output::Chunk(chunk) => self.chunk(session_id, chunk),
                }
            }
        }
    }

    fn reply<T: serde::Serialize>(&mut self, id: RequestId, result: T) {
        self.send(rpc::response(id, Ok(result)));
    }

    fn fail(&mut self, id: RequestId, error: Error) {
        self.send(rpc::response::<()>(id, Err(error)));
    }

    fn send(&mut self, line: Vec<u8>) {
        self.outputs.push_back(AcpOutput::Send(line));
    }
}

/// The permission updates of "always allow": the CLI's own suggestions, else a rule for the
/// tool for the rest of the session.
fn always(tool: &str, suggestions: &Value) -> Vec<Value> {
    match suggestions.as_array() {
        Some(list) if !list.is_empty() => list.clone(),
        _ => vec![json!({
            "type": "addRules",
            "rules": [{"toolName": tool}],
            "behavior": "allow",
            "destination": "session",
        })],
    }
}
