//! How to connect: [`ClientOptions`], and the embedder's handlers and tools it carries.

use std::sync::Arc;
use std::time::Duration;

use ccwire_core::{HookMatcher, McpCallResult, McpServer, McpTool, PermissionDecision};
use futures::future::BoxFuture;
use serde_json::{Map, Value};

use crate::claude::ClaudeOptions;

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
    /// surfaces as a [`Chunk::McpToolCall`](ccwire_core::Chunk::McpToolCall) and is answered with
    /// [`ClientHandle::respond_tool`](super::ClientHandle::respond_tool), as late as needed.
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
