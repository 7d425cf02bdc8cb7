//! The wire model: typed views of the stream-json messages, both directions.
//!
//! Parsing borrows from the line: strings are `Cow` (borrowed unless they hold escapes) and the
//! parts a chunk carries verbatim are `&RawValue`, so a message is scanned once and nothing is
//! copied that no chunk needs. Fields a view does not name are still there: the session keeps
//! the line each view was read from.
//!
//! The catalogue of message types and subtypes is in docs/PROTOCOL.md §3–§5; [`MessageType`]
//! and [`InboundRequest`] name the ones ccwire models.

use std::borrow::Cow;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

/// Top-level message types (`type`), both directions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MessageType {
    /// `system` (CLI → host), many subtypes.
    System,
    /// `assistant`: one completed content block of a model message.
    Assistant,
    /// `user`: a prompt (host → CLI) or user-role content the CLI adds (tool results).
    User,
    /// `result`: the end of a turn.
    Result,
    /// `stream_event`: a raw Messages API stream event (partial messages).
    StreamEvent,
    /// `tool_progress`: a running tool's elapsed time, or a heartbeat of a held MCP call.
    ToolProgress,
    /// `tool_use_summary`.
    ToolUseSummary,
    /// `auth_status`.
    AuthStatus,
    /// `rate_limit_event`.
    RateLimitEvent,
    /// `prompt_suggestion`.
    PromptSuggestion,
    /// `conversation_reset`.
    ConversationReset,
    /// `command_lifecycle`: the state of a uuid-stamped user message.
    CommandLifecycle,
    /// `control_request`, either direction.
    ControlRequest,
    /// `control_response`, either direction.
    ControlResponse,
    /// `control_cancel_request`, either direction.
    ControlCancelRequest,
    /// `keep_alive`: liveness, no payload.
    KeepAlive,
    /// `transcript_mirror` (with `--session-mirror`).
    TranscriptMirror,
    /// `update_environment_variables` (host → CLI).
    UpdateEnvironmentVariables,
    /// One of the engine's events ccwire names without modelling them ([`CLI_EVENTS`]).
    CliEvent,
}

impl MessageType {
    /// Looks up a `type` value.
    pub fn from_wire(name: &str) -> Option<MessageType> {
        Some(match name {
            "system" => MessageType::System,
            "assistant" => MessageType::Assistant,
            "user" => MessageType::User,
            "result" => MessageType::Result,
            "stream_event" => MessageType::StreamEvent,
            "tool_progress" => MessageType::ToolProgress,
            "tool_use_summary" => MessageType::ToolUseSummary,
            "auth_status" => MessageType::AuthStatus,
            "rate_limit_event" => MessageType::RateLimitEvent,
            "prompt_suggestion" => MessageType::PromptSuggestion,
            "conversation_reset" => MessageType::ConversationReset,
            "command_lifecycle" => MessageType::CommandLifecycle,
            "control_request" => MessageType::ControlRequest,
            "control_response" => MessageType::ControlResponse,
            "control_cancel_request" => MessageType::ControlCancelRequest,
            "keep_alive" => MessageType::KeepAlive,
            "transcript_mirror" => MessageType::TranscriptMirror,
            "update_environment_variables" => MessageType::UpdateEnvironmentVariables,
            name if CLI_EVENTS.contains(&name) => MessageType::CliEvent,
            _ => return None,
        })
    }
}

/// The arguments that make the CLI speak this wire: stream-json out and in, every message.
pub const STREAM_JSON_ARGS: [&str; 5] = [
    "--output-format",
    "stream-json",
    "--verbose",
    "--input-format",
    "stream-json",
];

/// `system` subtypes named in docs/PROTOCOL.md §3.3: with [`PLUGIN_UI_SUBTYPES`], the pinned
/// CLI's whole catalogue (the drift check in `tests/sdk/drift/` reads it from the CLI's own
/// schemas). `init` and the notices with
/// chunks of their own are typed; every other named subtype becomes a `status` chunk with every
/// field, and a subtype not named here an `unknown` chunk.
pub const SYSTEM_SUBTYPES: &[&str] = &[
    "init",
    "status",
    "compact_boundary",
    "api_retry",
    "session_state_changed",
    "task_started",
    "task_progress",
    "task_updated",
    "task_notification",
    "background_tasks_changed",
    "hook_started",
    "hook_progress",
    "hook_response",
    "informational",
    "notification",
    "local_command_output",
    "commands_changed",
    "control_request_progress",
    "permission_denied",
    "model_refusal_fallback",
    "model_refusal_no_fallback",
    "thinking_tokens",
    "memory_recall",
    "files_persisted",
    "elicitation_complete",
    "plugin_install",
    "session_writes_lost",
    "worker_shutting_down",
    "post_turn_summary",
    "task_summary",
    "session_metadata",
    "turn_preempted",
    "turn_handoff_available",
    "session_title_changed",
    "instruction_size_warning",
    "file_attachments_missing",
    "permission_check_status",
    "inherited_asks_settled",
    "api_error",
    "mirror_error",
    "model_fallback",
    "model_consent_fallback",
    "per_turn_effort_changed",
    "shell_cwd",
    "vcs_state_changed",
    "code_change_published",
    "task_list_statuses",
    "stop_hook_summary",
    "turn_duration",
    "thinking",
    "agents_killed",
    "away_summary",
    "memory_saved",
    "file_snapshot",
    "permission_retry",
    "scheduled_task_fire",
    "feedback_draft_queued",
    "dev_intent",
    "peer_message_hold",
    "late_allow_not_run",
    "cloud_session_delta",
    "upgrade_relay_marker",
];

/// The `ui_*` subtypes [`PluginUi`](crate::PluginUi) stands for.
pub const PLUGIN_UI_SUBTYPES: &[&str] = &[
    "ui_log",
    "ui_toast",
    "ui_status",
    "ui_notify",
    "ui_notify_cancel",
    "ui_invalidate",
    "ui_panes",
    "ui_placed",
    "ui_scroll",
    "ui_focus",
];

/// Top-level message types of the CLI's engine that ccwire passes on as [`CliEvent`](crate::CliEvent)s: goals,
/// compaction state and progress, metrics, notifications and hints for an interactive surface,
/// and the frames a cloud backend sends the CLI.
pub const CLI_EVENTS: &[&str] = &[
    "active_goal",
    "autocompact_state",
    "api_metrics",
    "apply_flag_settings",
    "attachment",
    "bash_command",
    "compact_progress",
    "hint_clears",
    "open_message_selector",
    "os_notification",
    "queued_notification",
    "response_length",
    "session_notice",
    "set_expanded_view",
    "set_in_progress_tool_use_ids",
    "stream_mode",
    "tombstone",
];

/// Control requests the CLI sends to the host (docs/PROTOCOL.md §5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum InboundRequest {
    /// `can_use_tool`: may this tool run?
    CanUseTool,
    /// `hook_callback`: a hook registered in `initialize` fired.
    HookCallback,
    /// `mcp_message`: JSON-RPC for an in-process MCP server.
    McpMessage,
    /// `elicitation`: an MCP server asks the user for input.
    Elicitation,
    /// `request_user_dialog`: a dialog of a kind the host declared.
    RequestUserDialog,
}

impl InboundRequest {
    /// Looks up a `request.subtype` value.
    pub fn from_wire(name: &str) -> Option<InboundRequest> {
        Some(match name {
            "can_use_tool" => InboundRequest::CanUseTool,
            "hook_callback" => InboundRequest::HookCallback,
            "mcp_message" => InboundRequest::McpMessage,
            "elicitation" => InboundRequest::Elicitation,
            "request_user_dialog" => InboundRequest::RequestUserDialog,
            _ => return None,
        })
    }
}

/// Control requests the host sends to the CLI (docs/PROTOCOL.md §5.2).
pub const OUTBOUND_REQUESTS: &[&str] = &[
    "initialize",
    "interrupt",
    "set_permission_mode",
    "set_model",
    "set_max_thinking_tokens",
    "mcp_status",
    "get_context_usage",
    "rewind_files",
    "mcp_reconnect",
    "mcp_toggle",
    "stop_task",
    "mcp_set_servers",
    "apply_flag_settings",
    "update_settings",
    "get_settings",
    "reload_plugins",
    "mcp_message",
];

/// Control requests the host may send; the common ones get typed commands on
/// [`Session`](crate::Session), the rest go through
/// [`Session::send_control`](crate::Session::send_control).
pub type OutboundRequest = &'static str;

/// One wire message, parsed into the fields the engine reads.
///
/// The union of the top-level fields of every message type; a field a type does not have is
/// `None`. `raw` is the whole message.
#[derive(Debug, Deserialize)]
pub struct WireMessage<'a> {
    /// `type`.
    #[serde(rename = "type", borrow, default)]
    pub ty: Option<Cow<'a, str>>,
    /// `subtype` (system, result).
    #[serde(borrow, default)]
    pub subtype: Option<Cow<'a, str>>,
    /// `message` (assistant, user).
    #[serde(borrow, default)]
    pub message: Option<&'a RawValue>,
    /// `event` (stream_event), typed as the line is read: the most frequent message is
    /// scanned once.
    #[serde(borrow, default)]
    pub event: Option<StreamEvent<'a>>,
    /// `request` (control_request).
    #[serde(borrow, default)]
    pub request: Option<&'a RawValue>,
    /// `response` (control_response).
    #[serde(borrow, default)]
    pub response: Option<&'a RawValue>,
    /// `request_id` (control_request, control_cancel_request).
    #[serde(borrow, default)]
    pub request_id: Option<Cow<'a, str>>,
    /// `parent_tool_use_id`: the Agent/Task call a sub-agent frame belongs to.
    #[serde(borrow, default)]
    pub parent_tool_use_id: Option<Cow<'a, str>>,
    /// `api_message_id` (stream_event).
    #[serde(borrow, default)]
    pub api_message_id: Option<Cow<'a, str>>,
    /// `tool_use_id` (tool_progress).
    #[serde(borrow, default)]
    pub tool_use_id: Option<Cow<'a, str>>,
    /// `tool_name` (tool_progress).
    #[serde(borrow, default)]
    pub tool_name: Option<Cow<'a, str>>,
    /// `elapsed_time_seconds` (tool_progress).
    #[serde(default)]
    pub elapsed_time_seconds: Option<f64>,
    /// `heartbeat` (tool_progress).
    #[serde(default)]
    pub heartbeat: Option<bool>,
    /// `aborted` (assistant).
    #[serde(default)]
    pub aborted: Option<bool>,
    /// `abandoned_blocks` (stream_event message_stop after an interrupt).
    #[serde(borrow, default)]
    pub abandoned_blocks: Option<&'a RawValue>,
    /// `priority` (host user message).
    #[serde(borrow, default)]
    pub priority: Option<Cow<'a, str>>,
    /// `uuid`.
    #[serde(borrow, default)]
    pub uuid: Option<Cow<'a, str>>,
    /// `session_id`.
    #[serde(borrow, default)]
    pub session_id: Option<Cow<'a, str>>,
    /// `is_error` (result).
    #[serde(default)]
    pub is_error: Option<bool>,
    /// `result` (result).
    #[serde(borrow, default)]
    pub result: Option<Cow<'a, str>>,
    /// `stop_reason` (result).
    #[serde(borrow, default)]
    pub stop_reason: Option<Cow<'a, str>>,
    /// `terminal_reason` (result).
    #[serde(borrow, default)]
    pub terminal_reason: Option<Cow<'a, str>>,
    /// `api_error_status` (result): the HTTP status of the API error that ended the turn.
    #[serde(default)]
    pub api_error_status: Option<u16>,
    /// `api_error_type` (result): the type of that API error (`rate_limit_error`, …).
    #[serde(borrow, default)]
    pub api_error_type: Option<Cow<'a, str>>,
    /// `api_error_code` (result): the API error's own code (`error.details.error_code`).
    #[serde(borrow, default)]
    pub api_error_code: Option<Cow<'a, str>>,
    /// `error` (assistant, system/api_retry): the CLI's class of a failed model request
    /// (`authentication_failed`, `billing_error`, `rate_limit`, …), as given.
    #[serde(borrow, default)]
    pub error: Option<&'a RawValue>,
    /// `is_api_error_message` (assistant): the message stands for a failed model request.
    #[serde(default)]
    pub is_api_error_message: Option<bool>,
    /// `api_error` (assistant): the typed cause of that failure (`connection_failed`,
    /// `stored_login_refused`, …), when the CLI gives one.
    #[serde(borrow, default)]
    pub api_error: Option<Cow<'a, str>>,
    /// `num_turns` (result).
    #[serde(default)]
    pub num_turns: Option<u64>,
    /// `duration_ms` (result).
    #[serde(default)]
    pub duration_ms: Option<u64>,
    /// `usage` (result).
    #[serde(borrow, default)]
    pub usage: Option<&'a RawValue>,
    /// `total_cost_usd` (result).
    #[serde(borrow, default)]
    pub total_cost_usd: Option<&'a RawValue>,
    /// `modelUsage` (result): per model, the process's cumulative tokens and cost.
    #[serde(borrow, default, rename = "modelUsage")]
    pub model_usage: Option<&'a RawValue>,
    /// `permission_denials` (result).
    #[serde(borrow, default)]
    pub permission_denials: Option<&'a RawValue>,
    /// `errors` (result).
    #[serde(borrow, default)]
    pub errors: Option<&'a RawValue>,
    /// `structured_output` (result): the object of a turn in structured-output mode.
    #[serde(borrow, default)]
    pub structured_output: Option<&'a RawValue>,
    /// `model` (system/init).
    #[serde(borrow, default)]
    pub model: Option<Cow<'a, str>>,
    /// `cwd` (system/init).
    #[serde(borrow, default)]
    pub cwd: Option<Cow<'a, str>>,
    /// `tools` (system/init).
    #[serde(borrow, default)]
    pub tools: Option<&'a RawValue>,
    /// `mcp_servers` (system/init).
    #[serde(borrow, default)]
    pub mcp_servers: Option<&'a RawValue>,
    /// `permissionMode` (system/init).
    #[serde(rename = "permissionMode", borrow, default)]
    pub permission_mode: Option<Cow<'a, str>>,
    /// `claude_code_version` (system/init).
    #[serde(borrow, default)]
    pub claude_code_version: Option<Cow<'a, str>>,
    /// `state` (system/session_state_changed).
    #[serde(borrow, default)]
    pub state: Option<Cow<'a, str>>,
    /// `task_id` (system/task_*).
    #[serde(borrow, default)]
    pub task_id: Option<Cow<'a, str>>,
}

/// The parse of one line.
pub(crate) fn parse_message(line: &str) -> Result<WireMessage<'_>, serde_json::Error> {
    serde_json::from_str(line)
}

/// `message` of an `assistant` or `user` frame: a Messages API message.
#[derive(Debug, Deserialize)]
pub struct ApiMessage<'a> {
    /// The API message id (assistant).
    #[serde(borrow, default)]
    pub id: Option<Cow<'a, str>>,
    /// The model (assistant).
    #[serde(borrow, default)]
    pub model: Option<Cow<'a, str>>,
    /// The content: a string or content blocks.
    #[serde(borrow, default)]
    pub content: Content<'a>,
}

/// Message content: a plain string or a list of blocks.
#[derive(Debug, Default)]
pub enum Content<'a> {
    /// No content.
    #[default]
    Empty,
    /// A string.
    Text(Cow<'a, str>),
    /// Content blocks.
    Blocks(Vec<Block<'a>>),
}

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ContentVisitor;
        impl<'de> Visitor<'de> for ContentVisitor {
            type Value = Content<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or a list of content blocks")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Content::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Content::Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Content::Text(Cow::Owned(v)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Content::Empty)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut blocks = Vec::with_capacity(seq.size_hint().unwrap_or(1));
                while let Some(block) = seq.next_element()? {
                    blocks.push(block);
                }
                Ok(Content::Blocks(blocks))
            }
        }
        deserializer.deserialize_any(ContentVisitor)
    }
}

/// A content block (text, thinking, tool_use, tool_result, server tool blocks, …).
#[derive(Debug, Deserialize)]
pub struct Block<'a> {
    /// The block type.
    #[serde(rename = "type", borrow)]
    pub ty: Cow<'a, str>,
    /// `text` (text blocks).
    #[serde(borrow, default)]
    pub text: Option<Cow<'a, str>>,
    /// `thinking` (thinking blocks).
    #[serde(borrow, default)]
    pub thinking: Option<Cow<'a, str>>,
    /// `id` (tool_use, server_tool_use).
    #[serde(borrow, default)]
    pub id: Option<Cow<'a, str>>,
    /// `name` (tool_use, server_tool_use).
    #[serde(borrow, default)]
    pub name: Option<Cow<'a, str>>,
    /// `input` (tool_use, server_tool_use).
    #[serde(borrow, default)]
    pub input: Option<&'a RawValue>,
    /// `tool_use_id` (tool_result and server tool results).
    #[serde(borrow, default)]
    pub tool_use_id: Option<Cow<'a, str>>,
    /// `content` (tool_result and server tool results).
    #[serde(borrow, default)]
    pub content: Option<&'a RawValue>,
    /// `is_error` (tool_result); missing means `false`.
    #[serde(default)]
    pub is_error: Option<bool>,
}

impl Block<'_> {
    /// What kind of block this is, for streaming bookkeeping.
    pub fn kind(&self) -> BlockKind {
        BlockKind::of(&self.ty)
    }
}

/// Kinds of content blocks the engine tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// `text`.
    Text,
    /// `thinking`.
    Thinking,
    /// `redacted_thinking`.
    RedactedThinking,
    /// `tool_use`.
    ToolUse,
    /// `server_tool_use`.
    ServerToolUse,
    /// `tool_result` (user frames).
    ToolResult,
    /// A server tool's result (`web_search_tool_result`, any `*_tool_result`).
    ServerToolResult,
    /// Anything else.
    Other,
}

impl BlockKind {
    /// Classifies a block `type`.
    pub fn of(ty: &str) -> BlockKind {
        match ty {
            "text" => BlockKind::Text,
            "thinking" => BlockKind::Thinking,
            "redacted_thinking" => BlockKind::RedactedThinking,
            "tool_use" => BlockKind::ToolUse,
            "server_tool_use" => BlockKind::ServerToolUse,
            "tool_result" => BlockKind::ToolResult,
            t if t.ends_with("_tool_result") => BlockKind::ServerToolResult,
            _ => BlockKind::Other,
        }
    }
}

/// `event` of a `stream_event` frame: a raw Messages API SSE event.
#[derive(Debug, Deserialize)]
pub struct StreamEvent<'a> {
    /// The event type.
    #[serde(rename = "type", borrow)]
    pub ty: Cow<'a, str>,
    /// `index` (content block events).
    #[serde(default)]
    pub index: Option<u32>,
    /// `message` (message_start).
    #[serde(borrow, default)]
    pub message: Option<StartMessage<'a>>,
    /// `content_block` (content_block_start).
    #[serde(borrow, default)]
    pub content_block: Option<Block<'a>>,
    /// `delta` (content_block_delta, message_delta).
    #[serde(borrow, default)]
    pub delta: Option<Delta<'a>>,
    /// `usage` (message_delta).
    #[serde(borrow, default)]
    pub usage: Option<&'a RawValue>,
}

/// `message` of a `message_start` event.
#[derive(Debug, Deserialize)]
pub struct StartMessage<'a> {
    /// The API message id.
    #[serde(borrow, default)]
    pub id: Option<Cow<'a, str>>,
    /// The model.
    #[serde(borrow, default)]
    pub model: Option<Cow<'a, str>>,
    /// The token usage known at the start: input and cache tokens.
    #[serde(borrow, default)]
    pub usage: Option<&'a RawValue>,
}

/// `delta` of a `content_block_delta` or `message_delta` event.
#[derive(Debug, Deserialize)]
pub struct Delta<'a> {
    /// The delta type (content_block_delta).
    #[serde(rename = "type", borrow, default)]
    pub ty: Option<Cow<'a, str>>,
    /// `text` (text_delta).
    #[serde(borrow, default)]
    pub text: Option<Cow<'a, str>>,
    /// `thinking` (thinking_delta).
    #[serde(borrow, default)]
    pub thinking: Option<Cow<'a, str>>,
    /// `partial_json` (input_json_delta).
    #[serde(borrow, default)]
    pub partial_json: Option<Cow<'a, str>>,
    /// `citation` (citations_delta).
    #[serde(borrow, default)]
    pub citation: Option<&'a RawValue>,
    /// `stop_reason` (message_delta).
    #[serde(borrow, default)]
    pub stop_reason: Option<Cow<'a, str>>,
}

/// `request` of a `control_request`, either direction.
#[derive(Debug, Deserialize)]
pub struct ControlRequestBody<'a> {
    /// The request subtype.
    #[serde(borrow)]
    pub subtype: Cow<'a, str>,
    /// `tool_name` (can_use_tool).
    #[serde(borrow, default)]
    pub tool_name: Option<Cow<'a, str>>,
    /// `input` (can_use_tool, hook_callback).
    #[serde(borrow, default)]
    pub input: Option<&'a RawValue>,
    /// `tool_use_id` (can_use_tool, hook_callback).
    #[serde(borrow, default)]
    pub tool_use_id: Option<Cow<'a, str>>,
    /// `permission_suggestions` (can_use_tool).
    #[serde(borrow, default)]
    pub permission_suggestions: Option<&'a RawValue>,
    /// `blocked_path` (can_use_tool).
    #[serde(borrow, default)]
    pub blocked_path: Option<Cow<'a, str>>,
    /// `callback_id` (hook_callback).
    #[serde(borrow, default)]
    pub callback_id: Option<Cow<'a, str>>,
    /// `server_name` (mcp_message).
    #[serde(borrow, default)]
    pub server_name: Option<Cow<'a, str>>,
    /// `message` (mcp_message): a JSON-RPC message.
    #[serde(borrow, default)]
    pub message: Option<&'a RawValue>,
    /// `hooks` (initialize).
    #[serde(borrow, default)]
    pub hooks: Option<&'a RawValue>,
}

/// The `hook_event_name` inside a hook input.
#[derive(Debug, Deserialize)]
pub struct HookInput<'a> {
    /// The hook event.
    #[serde(borrow, default)]
    pub hook_event_name: Option<Cow<'a, str>>,
}

/// A JSON-RPC 2.0 message inside `mcp_message`.
#[derive(Debug, Deserialize)]
pub struct JsonRpc<'a> {
    /// The method (requests and notifications).
    #[serde(borrow, default)]
    pub method: Option<Cow<'a, str>>,
    /// The id (requests and responses); absent for notifications.
    #[serde(borrow, default)]
    pub id: Option<&'a RawValue>,
    /// The params.
    #[serde(borrow, default)]
    pub params: Option<&'a RawValue>,
}

/// `params` of `tools/call`.
#[derive(Debug, Deserialize)]
pub struct ToolsCallParams<'a> {
    /// The tool name (un-prefixed).
    #[serde(borrow, default)]
    pub name: Option<Cow<'a, str>>,
    /// The arguments.
    #[serde(borrow, default)]
    pub arguments: Option<&'a RawValue>,
    /// `_meta`, carrying `claudecode/toolUseId`.
    #[serde(rename = "_meta", borrow, default)]
    pub meta: Option<ToolsCallMeta<'a>>,
}

/// `_meta` of `tools/call`.
#[derive(Debug, Deserialize)]
pub struct ToolsCallMeta<'a> {
    /// The tool_use id of the call.
    #[serde(rename = "claudecode/toolUseId", borrow, default)]
    pub tool_use_id: Option<Cow<'a, str>>,
}

/// `params` of `notifications/cancelled`.
#[derive(Debug, Deserialize)]
pub struct CancelledParams<'a> {
    /// The JSON-RPC id of the cancelled request.
    #[serde(rename = "requestId", borrow, default)]
    pub request_id: Option<&'a RawValue>,
    /// Why.
    #[serde(borrow, default)]
    pub reason: Option<Cow<'a, str>>,
}

/// `response` of a `control_response`, either direction.
#[derive(Debug, Deserialize)]
pub struct ControlResponseBody<'a> {
    /// `success` or `error`.
    #[serde(borrow)]
    pub subtype: Cow<'a, str>,
    /// The id of the request answered.
    #[serde(borrow)]
    pub request_id: Cow<'a, str>,
    /// The success payload.
    #[serde(borrow, default)]
    pub response: Option<&'a RawValue>,
    /// The error message.
    #[serde(borrow, default)]
    pub error: Option<Cow<'a, str>>,
    /// The error code.
    #[serde(borrow, default)]
    pub error_code: Option<Cow<'a, str>>,
}

/// The fields of a permission answer (`can_use_tool` success payload).
#[derive(Debug, Deserialize)]
pub struct PermissionAnswer<'a> {
    /// `allow` or `deny`.
    #[serde(borrow, default)]
    pub behavior: Option<Cow<'a, str>>,
    /// `interrupt` on a deny.
    #[serde(default)]
    pub interrupt: Option<bool>,
}

/// The fields of a hook answer the engine reads.
#[derive(Debug, Deserialize)]
pub struct HookAnswer<'a> {
    /// `hookSpecificOutput`.
    #[serde(rename = "hookSpecificOutput", borrow, default)]
    pub hook_specific_output: Option<HookSpecificOutput<'a>>,
}

/// `hookSpecificOutput` of a hook answer.
#[derive(Debug, Deserialize)]
pub struct HookSpecificOutput<'a> {
    /// `permissionDecision` (PreToolUse).
    #[serde(rename = "permissionDecision", borrow, default)]
    pub permission_decision: Option<Cow<'a, str>>,
}

/// The parts of the `initialize` success payload a `ready` chunk carries.
#[derive(Debug, Deserialize)]
pub struct InitializeResponse<'a> {
    /// The CLI version.
    #[serde(borrow, default)]
    pub claude_code_version: Option<Cow<'a, str>>,
    /// The models offered.
    #[serde(borrow, default)]
    pub models: Option<&'a RawValue>,
    /// The slash commands offered.
    #[serde(borrow, default)]
    pub commands: Option<&'a RawValue>,
}

/// The fields of an object, in order, as raw values.
pub(crate) struct RawFields<'a>(pub Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for RawFields<'a> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldsVisitor;
        impl<'de> Visitor<'de> for FieldsVisitor {
            type Value = RawFields<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut fields = Vec::new();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    let value: &'de RawValue = map.next_value()?;
                    fields.push((key, value));
                }
                Ok(RawFields(fields))
            }
        }
        deserializer.deserialize_map(FieldsVisitor)
    }
}
