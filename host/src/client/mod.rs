//! The async client: one live CLI process driven through a [`Session`] in driver mode.
//!
//! A background task owns the process and the session. It feeds stdout into the session, writes
//! what the session asks for to stdin, runs the embedder's permission, hook and MCP tool handlers
//! concurrently (the reader never waits on a handler), and applies deadlines. The [`Client`]
//! talks to it over channels; every chunk reaches the client in order.

mod driver;
mod error;
mod handle;
mod options;
mod turn;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use ccwire_core::{
    HookMatcher, HostRequest, McpServer, Session, SessionConfig, Timeouts, UserMessage,
};
use futures::stream::FuturesUnordered;
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

pub use error::ClientError;
pub use handle::{ClientHandle, ControlAnswer};
pub use options::{
    ClientOptions, DialogHandler, ElicitationHandler, Hook, HookHandler, PermissionHandler,
    PermissionRequest, Tool, ToolHandler, ToolServer,
};
pub use turn::{Event, Turn};

use crate::process::{CliProcess, ExitInfo, SpawnError};
use driver::{Driver, Recorder};
use handle::Command;

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
            declare_sdk_server(&mut claude.args, &server.name);
        }
        let mut held = HashSet::new();
        for server in &options.held_tool_servers {
            held.insert(server.name.clone());
            servers.push(server.clone());
            declare_sdk_server(&mut claude.args, &server.name);
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

/// A seed for request ids: the host may use randomness, the core may not.
fn seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.finish()
}

/// Names in-process MCP server `name` on the CLI's command line, once.
fn declare_sdk_server(args: &mut ccwire_core::args::CliArgs, name: &str) {
    if !args.sdk_mcp_servers.iter().any(|(n, _)| n == name) {
        args.sdk_mcp_servers.push((name.to_owned(), Map::new()));
    }
}
