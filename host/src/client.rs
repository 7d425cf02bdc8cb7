//! The async client: one live CLI process driven through a [`Session`] in driver mode.
//!
//! A background task owns the process and the session. It feeds stdout into the session, writes
//! what the session asks for to stdin, runs the embedder's permission, hook and MCP tool handlers
//! concurrently (the reader never waits on a handler), and applies deadlines. The [`Client`]
//! talks to it over channels; every chunk reaches the client in order.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ccwire_core::{
    Chunk, HookMatcher, HostRequest, McpCallResult, McpServer, McpTool, Output, PermissionDecision,
    Session, SessionConfig, Timeouts, UserMessage,
};
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, Stream, StreamExt};
use serde_json::{json, Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::claude::ClaudeOptions;
use crate::process::{CliProcess, ExitInfo, SpawnError, StderrTail};
use crate::record::{Direction, TranscriptWriter};

/// A permission request, as the handler sees it.
#[derive(Debug, Clone)]
pub struct PermissionRequest {
    /// The tool name.
    pub tool_name: String,
    /// The tool input.
    pub input: Value,
    /// The tool_use id.
    pub tool_use_id: Option<String>,
    /// Permission updates the CLI suggests.
    pub suggestions: Value,
    /// The path that triggered the prompt.
    pub blocked_path: Option<String>,
}

/// Decides permission requests.
pub type PermissionHandler =
    Arc<dyn Fn(PermissionRequest) -> BoxFuture<'static, PermissionDecision> + Send + Sync>;

/// Answers a hook: gets the hook input, returns the hook output (`{}` = no opinion).
pub type HookHandler = Arc<dyn Fn(Value) -> BoxFuture<'static, Value> + Send + Sync>;

/// Answers an MCP server's elicitation: gets the `elicitation_request` chunk (as JSON: `server`,
/// `message`, `mode`, `requested_schema`, …), returns MCP's `ElicitResult`
/// (`{"action":"accept","content":{…}}`, `{"action":"decline"}` or `{"action":"cancel"}`).
pub type ElicitationHandler = Arc<dyn Fn(Value) -> BoxFuture<'static, Value> + Send + Sync>;

/// Renders a dialog: gets the `dialog_request` chunk (as JSON: `dialog_kind`, `payload`,
/// `tool_use_id`), returns `{"behavior":"completed","result":…}` or
/// `{"behavior":"cancelled"}`.
pub type DialogHandler = Arc<dyn Fn(Value) -> BoxFuture<'static, Value> + Send + Sync>;

/// Runs an in-process MCP tool: gets the arguments, returns the result.
pub type ToolHandler = Arc<dyn Fn(Value) -> BoxFuture<'static, McpCallResult> + Send + Sync>;

/// A hook registered at connect time.
#[derive(Clone)]
pub struct Hook {
    /// The event and tool-name pattern.
    pub matcher: HookMatcher,
    /// The callback.
    pub handler: HookHandler,
}

/// An in-process MCP tool written in Rust.
#[derive(Clone)]
pub struct Tool {
    /// Name, description and JSON schema.
    pub definition: McpTool,
    /// The implementation.
    pub handler: ToolHandler,
}

impl Tool {
    /// A tool from its name, description, input schema and an async function.
    pub fn new<F, Fut>(name: &str, description: &str, input_schema: Value, run: F) -> Tool
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = McpCallResult> + Send + 'static,
    {
        Tool {
            definition: McpTool::new(name, description, input_schema),
            handler: Arc::new(move |args| Box::pin(run(args))),
        }
    }
}

/// An in-process MCP server: the model sees its tools as `mcp__<name>__<tool>`.
#[derive(Clone)]
pub struct ToolServer {
    /// The server name.
    pub name: String,
    /// Its tools.
    pub tools: Vec<Tool>,
}

/// How to connect.
#[derive(Clone, Default)]
pub struct ClientOptions {
    /// How to start the CLI.
    pub claude: ClaudeOptions,
    /// Decides permission prompts; when set the CLI asks over the control channel.
    pub permission: Option<PermissionHandler>,
    /// A permission not decided in time is denied.
    pub permission_timeout: Option<Duration>,
    /// Hooks.
    pub hooks: Vec<Hook>,
    /// In-process MCP servers.
    pub tool_servers: Vec<ToolServer>,
    /// In-process MCP servers whose calls the embedder answers itself: each `tools/call`
    /// surfaces as a [`Chunk::McpToolCall`] and is answered with
    /// [`ClientHandle::respond_tool`], as late as needed.
    pub held_tool_servers: Vec<McpServer>,
    /// Extra `initialize` fields (`agents`, `forwardSubagentText`, …).
    pub initialize: Map<String, Value>,
    /// How long to wait for the CLI to answer `initialize` (default 60 s).
    pub initialize_timeout: Option<Duration>,
    /// How long to wait for the CLI to answer a control request (default: forever).
    pub request_timeout: Option<Duration>,
    /// How long the CLI may write nothing while a turn runs and it waits for nothing from
    /// this client (no permission, hook or tool answer owed) before it is stopped, and the turn
    /// fails saying so (default: forever — a long tool run can be silent).
    pub stall_timeout: Option<Duration>,
    /// Write a transcript of the session here.
    pub record: Option<std::path::PathBuf>,
    /// Answers MCP servers' elicitations; without one, each is declined at once (as the
    /// official SDKs do).
    pub elicitation: Option<ElicitationHandler>,
    /// Renders the dialogs of [`dialog_kinds`](ClientOptions::dialog_kinds).
    pub user_dialog: Option<DialogHandler>,
    /// The dialog kinds the handler renders (`initialize.supportedDialogKinds`): the CLI sends
    /// only these, and without any it sends none.
    pub dialog_kinds: Vec<String>,
}

impl ClientOptions {
    /// Sets the permission handler from an async function.
    pub fn on_permission<F, Fut>(mut self, handler: F) -> ClientOptions
    where
        F: Fn(PermissionRequest) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = PermissionDecision> + Send + 'static,
    {
        self.permission = Some(Arc::new(move |req| Box::pin(handler(req))));
        self
    }

    /// Adds a hook from an async function.
    pub fn hook<F, Fut>(mut self, event: &str, matcher: Option<&str>, handler: F) -> ClientOptions
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Value> + Send + 'static,
    {
        self.hooks.push(Hook {
            matcher: HookMatcher {
                event: event.to_owned(),
                matcher: matcher.map(str::to_owned),
                timeout_s: None,
            },
            handler: Arc::new(move |input| Box::pin(handler(input))),
        });
        self
    }

    /// Sets the elicitation handler from an async function.
    pub fn on_elicitation<F, Fut>(mut self, handler: F) -> ClientOptions
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Value> + Send + 'static,
    {
        self.elicitation = Some(Arc::new(move |req| Box::pin(handler(req))));
        self
    }

    /// Sets the dialog handler from an async function, for these dialog kinds
    /// (`refusal_fallback_prompt`, …).
    pub fn on_user_dialog<F, Fut>(mut self, kinds: &[&str], handler: F) -> ClientOptions
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Value> + Send + 'static,
    {
        self.user_dialog = Some(Arc::new(move |req| Box::pin(handler(req))));
        self.dialog_kinds = kinds.iter().map(|k| (*k).to_owned()).collect();
        self
    }

    /// Adds an in-process MCP server.
    pub fn tool_server(mut self, name: &str, tools: Vec<Tool>) -> ClientOptions {
        self.tool_servers.push(ToolServer {
            name: name.to_owned(),
            tools,
        });
        self
    }
}

/// What can go wrong with a client.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The CLI could not be started.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// The CLI did not answer `initialize` in time.
    #[error("the CLI did not answer initialize within {0:?}")]
    InitializeTimeout(Duration),
    /// The CLI answered a request with an error.
    #[error("the CLI refused {subtype}: {error}")]
    Refused {
        /// The request subtype.
        subtype: String,
        /// The CLI's message.
        error: String,
    },
    /// The CLI process ended.
    #[error("{}", process_exit_message(.exit, .result.as_deref(), .stderr))]
    ProcessExited {
        /// How it ended.
        exit: ExitInfo,
        /// The text of the last error result, when the CLI reported one.
        result: Option<String>,
        /// The end of its stderr.
        stderr: String,
    },
    /// The client was closed.
    #[error("the client is closed")]
    Closed,
    /// ccwire itself was stopped (a signal); the CLI was ended with it.
    #[error("{0}")]
    Stopped(&'static str),
    /// The session refused a command.
    #[error(transparent)]
    Command(#[from] ccwire_core::CommandError),
}

fn process_exit_message(exit: &ExitInfo, result: Option<&str>, stderr: &str) -> String {
    let mut text = format!("the Claude Code CLI ended ({exit})");
    if let Some(result) = result {
        text.push_str(&format!(": {result}"));
    }
    if !stderr.is_empty() {
        text.push_str(&format!("; stderr: {stderr}"));
    }
    text
}

/// The answer to a control request.
#[derive(Debug, Clone)]
pub struct ControlAnswer {
    /// The success payload.
    pub response: Value,
}

enum Command {
    Send(UserMessage, oneshot::Sender<Result<(), ClientError>>),
    Control(
        String,
        Map<String, Value>,
        oneshot::Sender<Result<ControlAnswer, ClientError>>,
    ),
    RespondTool(String, McpCallResult),
    Close,
}

/// What the client receives.
#[derive(Debug, Clone)]
// Nearly every event is a chunk: boxing chunks would cost an allocation each to save the one
// exit event a few bytes.
#[allow(clippy::large_enum_variant)]
pub enum Event {
    /// A chunk.
    Chunk(Chunk),
    /// The process ended; no more events follow.
    Exited {
        /// How.
        exit: ExitInfo,
        /// The text of the last error result, if the last turn failed.
        result: Option<String>,
        /// The end of stderr.
        stderr: String,
    },
}

/// Commands for a [`Client`] from anywhere: cheap to clone.
#[derive(Debug, Clone)]
pub struct ClientHandle {
    commands: mpsc::UnboundedSender<Command>,
}

impl ClientHandle {
    /// Answers a `tools/call` of a held tool server
    /// ([`ClientOptions::held_tool_servers`]); an answer to a call the CLI has cancelled is
    /// dropped.
    pub fn respond_tool(&self, request_id: &str, result: McpCallResult) {
        let _ = self
            .commands
            .send(Command::RespondTool(request_id.to_owned(), result));
    }

    /// Sends a prompt; its chunks arrive through [`Client::next_event`]. The prompt is queued
    /// when this is called; the future says whether it was written.
    ///
    /// # Errors
    /// When the process has ended or the client is closed.
    pub fn send(
        &self,
        message: UserMessage,
    ) -> impl std::future::Future<Output = Result<(), ClientError>> + Send + 'static {
        let (tx, rx) = oneshot::channel();
        let queued = self.commands.send(Command::Send(message, tx));
        async move {
            queued.map_err(|_| ClientError::Closed)?;
            rx.await.map_err(|_| ClientError::Closed)?
        }
    }

    /// Interrupts the running turn.
    ///
    /// # Errors
    /// When the CLI refuses or the process has ended.
    pub async fn interrupt(&self) -> Result<ControlAnswer, ClientError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::Control("interrupt".to_owned(), Map::new(), tx))
            .map_err(|_| ClientError::Closed)?;
        rx.await.map_err(|_| ClientError::Closed)?
    }

    /// Closes the CLI's stdin: it finishes and exits.
    pub fn end_input(&self) {
        let _ = self.commands.send(Command::Close);
    }
}

/// A live CLI session.
pub struct Client {
    commands: mpsc::UnboundedSender<Command>,
    events: mpsc::UnboundedReceiver<Event>,
    pid: u32,
    ready: Value,
    task: Option<tokio::task::JoinHandle<()>>,
    exit: Option<Event>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Starts the CLI, sends `initialize` and waits for its answer.
    ///
    /// # Errors
    /// When the CLI cannot start, dies, or does not answer in time.
    pub async fn connect(options: ClientOptions) -> Result<Client, ClientError> {
        let mut claude = options.claude.clone();
        claude.args.permission_prompts |= options.permission.is_some();
        let mut servers = Vec::new();
        let mut tools: HashMap<(String, String), ToolHandler> = HashMap::new();
        for server in &options.tool_servers {
            let mut definition = McpServer::new(server.name.clone());
            for tool in &server.tools {
                definition.tools.push(tool.definition.clone());
                tools.insert(
                    (server.name.clone(), tool.definition.name.clone()),
                    tool.handler.clone(),
                );
            }
            servers.push(definition);
            if !claude
                .args
                .sdk_mcp_servers
                .iter()
                .any(|(n, _)| n == &server.name)
            {
                claude
                    .args
                    .sdk_mcp_servers
                    .push((server.name.clone(), Map::new()));
            }
        }
        let mut held = std::collections::HashSet::new();
        for server in &options.held_tool_servers {
            held.insert(server.name.clone());
            servers.push(server.clone());
            if !claude
                .args
                .sdk_mcp_servers
                .iter()
                .any(|(n, _)| n == &server.name)
            {
                claude
                    .args
                    .sdk_mcp_servers
                    .push((server.name.clone(), Map::new()));
            }
        }
        let config = SessionConfig {
            seed: seed(),
            timeouts: Timeouts {
                permission_ms: options.permission_timeout.map(|d| d.as_millis() as u64),
                request_ms: options.request_timeout.map(|d| d.as_millis() as u64),
                ..Timeouts::default()
            },
            mcp_servers: servers,
            elicitations: options.elicitation.is_some(),
            ..SessionConfig::default()
        };
        let recorder = match &options.record {
            Some(path) => Some(Recorder::create(path).map_err(|source| SpawnError::Io {
                path: path.display().to_string(),
                source,
            })?),
            None => None,
        };
        let mut process = CliProcess::spawn(&claude)?;
        let pid = process.pid();
        let mut session = Session::driver(config);
        let start = Instant::now();
        let matchers: Vec<HookMatcher> = options.hooks.iter().map(|h| h.matcher.clone()).collect();
        // The options' large values, then the app's own fields (which win).
        let mut initialize = claude.args.initialize();
        initialize.extend(options.initialize.clone());
        if !options.dialog_kinds.is_empty() {
            initialize
                .entry("supportedDialogKinds")
                .or_insert_with(|| json!(options.dialog_kinds));
        }
        let (init_id, callback_ids) = session.initialize(0, &matchers, initialize)?;
        let hooks: HashMap<String, HookHandler> = callback_ids
            .into_iter()
            .zip(options.hooks.iter().map(|h| h.handler.clone()))
            .collect();

        let (command_tx, command_rx) = mpsc::unbounded_channel();
        let (event_tx, event_rx) = mpsc::unbounded_channel();
        let (ready_tx, ready_rx) = oneshot::channel();
        let driver = Driver {
            stdin: process.take_stdin(),
            stdout: process.take_stdout(),
            stderr: process.stderr().clone(),
            process,
            session,
            start,
            events: event_tx,
            waiters: HashMap::new(),
            permission: options.permission.clone(),
            elicitation: options.elicitation.clone(),
            user_dialog: options.user_dialog.clone(),
            hooks,
            tools,
            held,
            handlers: FuturesUnordered::new(),
            last_error_result: None,
            recorder,
            framer: ccwire_core::framing::LineFramer::new(ccwire_core::framing::DEFAULT_LINE_LIMIT),
            stall_timeout: options.stall_timeout,
            last_output: Instant::now(),
        };
        let task = tokio::spawn(driver.run(command_rx, init_id, ready_tx));
        let mut client = Client {
            commands: command_tx,
            events: event_rx,
            pid,
            ready: Value::Null,
            task: Some(task),
            exit: None,
        };
        let limit = options
            .initialize_timeout
            .unwrap_or(Duration::from_secs(60));
        match tokio::time::timeout(limit, ready_rx).await {
            Ok(Ok(Ok(answer))) => client.ready = answer.response,
            Ok(Ok(Err(err))) => return Err(err),
            Ok(Err(_)) => return Err(client.exit_error().await),
            Err(_) => return Err(ClientError::InitializeTimeout(limit)),
        }
        Ok(client)
    }

    /// A handle for commands that does not borrow the client, so one task can read events
    /// while others answer tools, send prompts or interrupt.
    pub fn handle(&self) -> ClientHandle {
        ClientHandle {
            commands: self.commands.clone(),
        }
    }

    /// The CLI's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The CLI's answer to `initialize` (version, models, commands, …).
    pub fn server_info(&self) -> &Value {
        &self.ready
    }

    /// Sends a prompt and returns the turn's events.
    ///
    /// # Errors
    /// When the process has ended or the client is closed.
    pub async fn send(&mut self, message: UserMessage) -> Result<Turn<'_>, ClientError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::Send(message, tx))
            .map_err(|_| ClientError::Closed)?;
        rx.await.map_err(|_| ClientError::Closed)??;
        Ok(Turn {
            client: self,
            done: false,
        })
    }

    /// Sends a text prompt and returns the turn's events.
    ///
    /// # Errors
    /// When the process has ended or the client is closed.
    pub async fn query(&mut self, text: &str) -> Result<Turn<'_>, ClientError> {
        self.send(UserMessage::text(text)).await
    }

    /// Interrupts the running turn.
    ///
    /// # Errors
    /// When the CLI refuses or the process has ended.
    pub async fn interrupt(&self) -> Result<ControlAnswer, ClientError> {
        self.control("interrupt", Map::new()).await
    }

    /// Switches the model (`None` = default).
    ///
    /// # Errors
    /// When the CLI refuses or the process has ended.
    pub async fn set_model(&self, model: Option<&str>) -> Result<ControlAnswer, ClientError> {
        let mut fields = Map::new();
        fields.insert("model".into(), model.into());
        self.control("set_model", fields).await
    }

    /// Switches the permission mode; the answer is `{mode}`, the mode now in effect (`manual`
    /// is `default`).
    ///
    /// # Errors
    /// When the CLI refuses (an unknown mode: `error_code` `invalid_mode`) or the process has
    /// ended.
    pub async fn set_permission_mode(&self, mode: &str) -> Result<ControlAnswer, ClientError> {
        let mut fields = Map::new();
        fields.insert("mode".into(), mode.into());
        self.control("set_permission_mode", fields).await
    }

    /// Sends a typed control request ([`HostRequest`]: `mcp_status`, `get_context_usage`,
    /// `stop_task`, `apply_flag_settings`, …) and waits for its answer.
    ///
    /// # Errors
    /// When the CLI refuses or the process has ended.
    pub async fn request(&self, request: HostRequest) -> Result<ControlAnswer, ClientError> {
        let (subtype, fields) = request.into_parts();
        self.control(&subtype, fields).await
    }

    /// Sends any control request and waits for its answer.
    ///
    /// # Errors
    /// When the CLI refuses or the process has ended.
    pub async fn control(
        &self,
        subtype: &str,
        fields: Map<String, Value>,
    ) -> Result<ControlAnswer, ClientError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::Control(subtype.to_owned(), fields, tx))
            .map_err(|_| ClientError::Closed)?;
        rx.await.map_err(|_| ClientError::Closed)?
    }

    /// The next event (any turn); `None` after the process ended and everything was read.
    pub async fn next_event(&mut self) -> Option<Event> {
        if let Some(exit) = &self.exit {
            let _ = exit;
            return None;
        }
        let event = self.events.recv().await?;
        if matches!(event, Event::Exited { .. }) {
            self.exit = Some(event.clone());
        }
        Some(event)
    }

    /// Closes the CLI's stdin: it finishes its work and exits. Remaining events are still read
    /// with [`next_event`](Client::next_event), ending with [`Event::Exited`].
    pub fn end_input(&self) {
        let _ = self.commands.send(Command::Close);
    }

    /// Closes stdin and waits for the CLI to exit (5 s grace, then SIGTERM, then SIGKILL).
    /// Returns how it ended.
    pub async fn close(mut self) -> Option<ExitInfo> {
        let _ = self.commands.send(Command::Close);
        while let Some(event) = self.next_event().await {
            if let Event::Exited { exit, .. } = event {
                return Some(exit);
            }
        }
        match &self.exit {
            Some(Event::Exited { exit, .. }) => Some(*exit),
            _ => None,
        }
    }

    async fn exit_error(&mut self) -> ClientError {
        while let Some(event) = self.next_event().await {
            if let Event::Exited {
                exit,
                result,
                stderr,
            } = event
            {
                return ClientError::ProcessExited {
                    exit,
                    result,
                    stderr,
                };
            }
        }
        match self.exit.clone() {
            Some(Event::Exited {
                exit,
                result,
                stderr,
            }) => ClientError::ProcessExited {
                exit,
                result,
                stderr,
            },
            _ => ClientError::Closed,
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Close);
        if let Some(task) = self.task.take() {
            // The driver ends the process when its command channel closes; let it finish.
            drop(task);
        }
    }
}

/// The events of one turn, up to and including its `turn_complete`.
pub struct Turn<'a> {
    client: &'a mut Client,
    done: bool,
}

impl<'a> Turn<'a> {
    /// The next chunk of the turn; `None` after `turn_complete`.
    ///
    /// # Errors
    /// [`ClientError::ProcessExited`] when the process ends before the turn completes.
    pub async fn next(&mut self) -> Option<Result<Chunk, ClientError>> {
        if self.done {
            return None;
        }
        match self.client.next_event().await {
            Some(Event::Chunk(chunk)) => {
                if matches!(chunk, Chunk::TurnComplete { .. }) {
                    self.done = true;
                }
                Some(Ok(chunk))
            }
            Some(Event::Exited {
                exit,
                result,
                stderr,
            }) => {
                self.done = true;
                Some(Err(ClientError::ProcessExited {
                    exit,
                    result,
                    stderr,
                }))
            }
            None => {
                self.done = true;
                Some(Err(self.client.exit_error().await))
            }
        }
    }

    /// Reads the turn to its end and returns every chunk.
    ///
    /// # Errors
    /// As [`Turn::next`].
    pub async fn collect(mut self) -> Result<Vec<Chunk>, ClientError> {
        let mut chunks = Vec::new();
        while let Some(chunk) = self.next().await {
            chunks.push(chunk?);
        }
        Ok(chunks)
    }

    /// The client, for commands during the turn (interrupt, …).
    pub fn client(&self) -> &Client {
        self.client
    }

    /// A `Stream` of the turn's chunks.
    pub fn into_stream(self) -> impl Stream<Item = Result<Chunk, ClientError>> + Send + 'a {
        futures::stream::unfold(self, |mut turn| async move {
            let item = turn.next().await?;
            Some((item, turn))
        })
    }
}

enum HandlerDone {
    Permission(String, PermissionDecision),
    Hook(String, Value),
    Tool(String, McpCallResult),
    Elicitation(String, Value),
    Dialog(String, Value),
}

type Waiter = oneshot::Sender<Result<ControlAnswer, ClientError>>;

/// How long the CLI may take to exit after its stdin closes (it flushes its session file).
const CLOSE_GRACE: Duration = Duration::from_secs(5);

struct Driver {
    process: CliProcess,
    stdin: Option<tokio::process::ChildStdin>,
    stdout: Option<tokio::process::ChildStdout>,
    stderr: StderrTail,
    session: Session,
    start: Instant,
    events: mpsc::UnboundedSender<Event>,
    waiters: HashMap<String, (String, Waiter)>,
    permission: Option<PermissionHandler>,
    elicitation: Option<ElicitationHandler>,
    user_dialog: Option<DialogHandler>,
    hooks: HashMap<String, HookHandler>,
    tools: HashMap<(String, String), ToolHandler>,
    held: std::collections::HashSet<String>,
    handlers: FuturesUnordered<Pin<Box<dyn std::future::Future<Output = HandlerDone> + Send>>>,
    last_error_result: Option<String>,
    recorder: Option<Recorder>,
    framer: ccwire_core::framing::LineFramer,
    stall_timeout: Option<Duration>,
    /// When the CLI last wrote anything.
    last_output: Instant,
}

/// A chunk as the JSON value its handler gets.
fn chunk_value(chunk: &Chunk) -> Value {
    serde_json::to_value(chunk).expect("chunks always serialize")
}

/// Records the wire lines of a client session, in the order the session handles them.
struct Recorder {
    writer: TranscriptWriter<std::io::BufWriter<std::fs::File>>,
}

impl Recorder {
    fn create(path: &std::path::Path) -> std::io::Result<Recorder> {
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

    async fn run(
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

/// A seed for request ids: the host may use randomness, the core may not.
fn seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.finish()
}
