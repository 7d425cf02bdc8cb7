//! The chunks a session emits: the output contract of docs/CHUNKS.md.
//!
//! Every chunk serializes as a JSON object with a `type` tag and snake_case fields. Parts taken
//! from the wire are [`Json`] values in canonical form, so native and wasm builds emit the same
//! bytes for the same input.

use serde::Serialize;

use crate::json::{serialize_js_number, Json};

mod notice;
mod parts;

pub(crate) use notice::NoticeFields;
pub use notice::{
    CliEvent, CommandLifecycle, FileAttachmentsMissing, InheritedAsksSettled,
    InstructionSizeWarning, MissingFile, PermissionCheck, PluginUi, TitleChanged,
};
pub use parts::*;

/// One thing that happened on the wire, as a UI or an API encoder wants to see it.
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(feature = "deserialize", derive(serde::Deserialize))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Chunk {
    /// A turn started (`system/init`, sent by the CLI at the start of every turn).
    SessionInit {
        /// The CLI's session id.
        session_id: Option<String>,
        /// The resolved model id.
        model: Option<String>,
        /// The CLI's working directory.
        cwd: Option<String>,
        /// Tool names the model may call.
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        tools: Json,
        /// MCP servers and their connection status.
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        mcp_servers: Json,
        /// The permission mode in force.
        permission_mode: Option<String>,
        /// The CLI version.
        claude_code_version: Option<String>,
    },
    /// A prompt the host sent to the CLI.
    UserPrompt {
        /// The message content: a string or content blocks.
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        content: Json,
        /// The client uuid of the message, when it had one.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        uuid: Option<String>,
        /// `now`, `next` or `later` when the message carried a priority.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        priority: Option<String>,
    },
    /// A model message started streaming.
    MessageStart {
        /// The API message id.
        message_id: String,
        /// The model answering.
        model: Option<String>,
        /// The Agent/Task tool call this message belongs to, for sub-agent output.
        parent_tool_use_id: Option<String>,
        /// Token usage known at the start (`input_tokens`, `cache_creation_input_tokens`,
        /// `cache_read_input_tokens`, a first `output_tokens`), as the model reported it;
        /// `null` when it reported none. `message_delta` carries the output tokens.
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        usage: Json,
    },
    /// A piece of assistant text.
    TextDelta {
        /// The API message id.
        message_id: String,
        /// The content block index within the message.
        index: u32,
        /// The text piece.
        text: String,
        /// The Agent/Task tool call this message belongs to, for sub-agent output.
        parent_tool_use_id: Option<String>,
    },
    /// A piece of the model's thinking.
    ThinkingDelta {
        /// The API message id.
        message_id: String,
        /// The content block index within the message.
        index: u32,
        /// The thinking piece.
        thinking: String,
        /// The Agent/Task tool call this message belongs to, for sub-agent output.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        parent_tool_use_id: Option<String>,
    },
    /// A redacted thinking block (its content is encrypted).
    ThinkingRedacted {
        /// The API message id.
        message_id: String,
        /// The content block index within the message.
        index: u32,
        /// The Agent/Task tool call this message belongs to, for sub-agent output.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        parent_tool_use_id: Option<String>,
    },
    /// A citation attached to a text block.
    Citation {
        /// The API message id.
        message_id: String,
        /// The content block index within the message.
        index: u32,
        /// The citation object as the API sent it.
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        citation: Json,
        /// The Agent/Task tool call this message belongs to, for sub-agent output.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        parent_tool_use_id: Option<String>,
    },
    /// A tool call: first with `complete:false` when it starts, then once with `complete:true`
    /// and the whole input.
    ToolUse {
        /// The tool_use id.
        id: String,
        /// The tool name as the model called it.
        name: String,
        /// The API message id.
        message_id: String,
        /// The content block index within the message.
        index: u32,
        /// The Agent/Task tool call this call belongs to, for sub-agent output.
        parent_tool_use_id: Option<String>,
        /// Whether the input is complete.
        complete: bool,
        /// The input, when complete; `null` before.
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        input: Json,
        /// `true` for a server-executed tool (`server_tool_use`).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        #[cfg_attr(feature = "deserialize", serde(default))]
        #[cfg_attr(test, ts(as = "Option<typescript::True>", optional, inline))]
        server: bool,
    },
    /// A piece of a tool call's input JSON as it streams.
    ToolInputDelta {
        /// The tool_use id.
        id: String,
        /// The piece of JSON text (may be empty).
        partial_json: String,
    },
    /// The model message's stop reason and usage (`message_delta`).
    MessageDelta {
        /// The API message id.
        message_id: String,
        /// Why the model stopped (`end_turn`, `tool_use`, …); `null` passes through.
        stop_reason: Option<String>,
        /// Token usage.
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        usage: Json,
    },
    /// The model message ended (`message_stop`).
    MessageStop {
        /// The API message id.
        message_id: String,
        /// After an interrupt: the first content block index the CLI abandoned.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        #[cfg_attr(test, ts(type = "number"))]
        abandoned_from_index: Option<u64>,
    },
    /// A tool's status changed.
    ToolStatus {
        /// The tool_use id.
        id: String,
        /// The new status.
        status: ToolStatus,
        /// Why, when the change has a reason.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        reason: Option<StatusReason>,
    },
    /// A tool started executing (its first `tool_progress`).
    ToolStart {
        /// The tool_use id.
        id: String,
        /// The tool name.
        name: Option<String>,
        /// Seconds since the tool started, as the CLI reports it.
        #[serde(serialize_with = "serialize_js_number")]
        elapsed_s: f64,
        /// The Agent/Task tool call this call belongs to, for sub-agent output.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        parent_tool_use_id: Option<String>,
    },
    /// A running tool reported progress.
    ToolProgress {
        /// The tool_use id.
        id: String,
        /// Seconds since the tool started.
        #[serde(serialize_with = "serialize_js_number")]
        elapsed_s: f64,
    },
    /// The CLI's heartbeat for a held MCP call (every 30 s).
    ToolHeartbeat {
        /// The tool_use id of the held call.
        id: String,
        /// Seconds since the call started.
        #[serde(serialize_with = "serialize_js_number")]
        elapsed_s: f64,
        /// The heartbeat's sequence number.
        #[cfg_attr(test, ts(type = "number"))]
        seq: u64,
    },
    /// A tool's result.
    ToolResult {
        /// The tool_use id.
        id: String,
        /// The result content: a string or content blocks.
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        content: Json,
        /// Whether the result is an error.
        is_error: bool,
        /// `true` for the result of a server-executed tool.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        #[cfg_attr(feature = "deserialize", serde(default))]
        #[cfg_attr(test, ts(as = "Option<typescript::True>", optional, inline))]
        server: bool,
        /// The Agent/Task tool call this result belongs to, for sub-agent output.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        parent_tool_use_id: Option<String>,
    },
    /// User-role text the CLI added (`[Request interrupted by user]`, a sub-agent's prompt, …).
    UserText {
        /// The text.
        text: String,
        /// The Agent/Task tool call this text belongs to, for sub-agent output.
        parent_tool_use_id: Option<String>,
    },
    /// The CLI asks whether a tool may run (`can_use_tool`). Answer with
    /// [`Session::respond_permission`](crate::Session::respond_permission).
    PermissionRequest {
        /// The control request id to answer.
        request_id: String,
        /// The tool_use id.
        tool_use_id: Option<String>,
        /// The tool name.
        tool_name: String,
        /// The tool input.
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        input: Json,
        /// Permission updates the CLI suggests (`permission_suggestions`).
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        suggestions: Json,
        /// The path that triggered the prompt, when there is one.
        blocked_path: Option<String>,
        /// When the request times out (ms), when a timeout policy is set.
        #[cfg_attr(test, ts(type = "number | null"))]
        deadline_ms: Option<u64>,
    },
    /// A permission request was settled, exactly once.
    PermissionResolved {
        /// The control request id.
        request_id: String,
        /// The tool_use id.
        tool_use_id: Option<String>,
        /// The outcome.
        behavior: Behavior,
        /// Who settled it (never the session's `default`: an unanswered permission request
        /// waits for the host or its deadline).
        #[cfg_attr(test, ts(type = r#""host" | "timeout" | "cancelled""#))]
        reason: ResolveReason,
    },
    /// The CLI calls a hook registered in `initialize`. Answer with
    /// [`Session::respond_hook`](crate::Session::respond_hook).
    HookRequest {
        /// The control request id to answer.
        request_id: String,
        /// The hook callback id (`hook_<n>`).
        callback_id: String,
        /// The hook event (`PreToolUse`, `PostToolUse`, …).
        event: Option<String>,
        /// The tool_use id the CLI attached (not always a tool's).
        tool_use_id: Option<String>,
        /// The hook input.
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        input: Json,
        /// When the request times out (ms), when a timeout policy is set.
        #[cfg_attr(test, ts(type = "number | null"))]
        deadline_ms: Option<u64>,
    },
    /// The CLI calls a tool of an in-process MCP server. Answer with
    /// [`Session::respond_mcp`](crate::Session::respond_mcp).
    McpToolCall {
        /// The control request id to answer.
        request_id: String,
        /// The MCP server name.
        server: String,
        /// The tool name as given in `params.name`.
        tool: String,
        /// The call arguments.
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        arguments: Json,
        /// The tool_use id (`_meta["claudecode/toolUseId"]`).
        tool_use_id: Option<String>,
        /// When the call times out (ms), when a timeout policy is set.
        #[cfg_attr(test, ts(type = "number | null"))]
        deadline_ms: Option<u64>,
    },
    /// The CLI cancelled a held MCP tool call (`notifications/cancelled`).
    McpToolCancelled {
        /// The control request id of the cancelled `tools/call`.
        request_id: String,
        /// The control request id of the cancel notification.
        cancel_request_id: String,
        /// The tool_use id of the cancelled call.
        tool_use_id: Option<String>,
        /// The reason the CLI gave.
        reason: Option<String>,
    },
    /// An MCP request other than `tools/call` (handshake, `tools/list`, notifications). In driver
    /// mode the session has already answered it from the registered servers.
    McpRequest {
        /// The control request id.
        request_id: String,
        /// The MCP server name.
        server: String,
        /// The JSON-RPC method.
        method: Option<String>,
    },
    /// An MCP server asks the user for input (`elicitation`), through the CLI. Answer with
    /// [`Session::respond_elicitation`](crate::Session::respond_elicitation) when
    /// [`SessionConfig::elicitations`](crate::SessionConfig) is set; otherwise the session
    /// declines it at once.
    ElicitationRequest {
        /// The control request id to answer.
        request_id: String,
        /// The MCP server asking.
        server: String,
        /// What it asks.
        message: String,
        /// How to show it and what to collect.
        #[serde(flatten)]
        details: Box<ElicitationDetails>,
        /// The running tool of that server the elicitation holds up, when there is one.
        tool_use_id: Option<String>,
        /// When the request times out (ms), when a timeout policy is set.
        #[cfg_attr(test, ts(type = "number | null"))]
        deadline_ms: Option<u64>,
    },
    /// The CLI asks the host to render a dialog of a kind it declared
    /// (`request_user_dialog`, `initialize.supportedDialogKinds`). Answer with
    /// [`Session::respond_user_dialog`](crate::Session::respond_user_dialog).
    DialogRequest {
        /// The control request id to answer.
        request_id: String,
        /// Which dialog (`refusal_fallback_prompt`, …).
        dialog_kind: String,
        /// The dialog's data, shaped by its kind.
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        payload: Json,
        /// The tool call it belongs to, when there is one.
        tool_use_id: Option<String>,
        /// When the request times out (ms), when a timeout policy is set.
        #[cfg_attr(test, ts(type = "number | null"))]
        deadline_ms: Option<u64>,
    },
    /// An elicitation or a dialog was settled: by the host, by the session's default (an
    /// elicitation with no handler is declined), or by its deadline. (A request the CLI
    /// withdraws is a `request_cancelled`.)
    RequestResolved {
        /// The control request id.
        request_id: String,
        /// Who settled it.
        reason: ResolveReason,
        /// The answer the CLI got.
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        response: Json,
    },
    /// The CLI withdrew a request other than a permission (`control_cancel_request`); an answer
    /// to it is no longer wanted.
    RequestCancelled {
        /// The withdrawn control request id.
        request_id: String,
    },
    /// A `system` frame other than `init`: every field of the frame.
    Status {
        /// The system subtype.
        subtype: String,
        /// The frame's other fields.
        #[serde(flatten)]
        // index.d.ts types the fields per subtype.
        #[cfg_attr(test, ts(skip))]
        fields: Fields,
    },
    /// The account's rate limit (`rate_limit_event`): allowed, close to the limit
    /// (`allowed_warning`) or reached (`rejected`), and when it resets.
    RateLimit {
        /// `allowed`, `allowed_warning` or `rejected`.
        #[cfg_attr(
            test,
            ts(type = r#""allowed" | "allowed_warning" | "rejected" | (string & {})"#)
        )]
        status: String,
        /// When the limit resets (Unix seconds), when known.
        #[cfg_attr(test, ts(type = "number | null"))]
        resets_at: Option<u64>,
        /// Which limit (`five_hour`, `seven_day`, …), when known.
        rate_limit_type: Option<String>,
        /// How much of it is used (0 to 1), when known.
        utilization: Option<f64>,
        /// Every field of `rate_limit_info` (overage state and more).
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        info: Json,
    },
    /// A model request failed, and the CLI says so in an assistant message of its own
    /// (`is_api_error_message`, its text also a [`TextDelta`](Chunk::TextDelta)): the error as
    /// data, for a host to key on instead of the words.
    ApiError {
        /// The CLI's message standing for the error.
        message_id: String,
        /// The subagent's tool_use when the failed request was one of a subagent's.
        parent_tool_use_id: Option<String>,
        /// The CLI's class of the error (`authentication_failed`, `billing_error`,
        /// `rate_limit`, `overloaded`, `invalid_request`, `model_not_found`, `server_error`,
        /// `unknown`, …), when it gives one.
        error: Option<String>,
        /// Its typed cause (`connection_failed`, `stream_idle_timeout`,
        /// `stored_login_refused`, `unattended_start_limit`, …), when the CLI gives one.
        cause: Option<String>,
        /// The model API's HTTP status, when it answered.
        status: Option<u16>,
        /// The model API's error type (`invalid_request_error`, …), when it gave one.
        error_type: Option<String>,
        /// The CLI's words (the message's text).
        text: String,
    },
    /// A summary of tool calls the CLI made (`tool_use_summary`).
    ToolUseSummary {
        /// The summary text.
        summary: String,
        /// The tool_use ids it summarizes.
        tool_use_ids: Vec<String>,
    },
    /// The CLI's authentication progress (`auth_status`).
    AuthStatus {
        /// Whether it is authenticating now.
        authenticating: bool,
        /// Lines of its output (a URL to open, a code to enter, …).
        output: Vec<String>,
        /// What went wrong, when something did.
        error: Option<String>,
    },
    /// A prompt the user might send next (`prompt_suggestion`).
    PromptSuggestion {
        /// The suggested prompt.
        suggestion: String,
    },
    /// The conversation was reset (`conversation_reset`: `/clear`, leaving plan mode, …): the
    /// model's context starts afresh under a new id.
    ConversationReset {
        /// The new conversation id.
        new_conversation_id: String,
        /// What reset it (`clear`, `plan_mode_exit`, `fresh_session`, `onboarding`), when said.
        #[cfg_attr(
            test,
            ts(
                type = r#""clear" | "plan_mode_exit" | "fresh_session" | "onboarding" | (string & {}) | null"#
            )
        )]
        trigger: Option<String>,
    },
    /// Lines the CLI appended to its session transcript (`transcript_mirror`, with
    /// `--session-mirror`): the file it wrote them to and the entries, one JSON object per
    /// line. Stored, they let a later CLI resume the conversation exactly (`--resume`).
    TranscriptMirror {
        /// The transcript's path on the CLI's machine.
        file_path: String,
        /// The entries, in the order written.
        #[cfg_attr(test, ts(type = "Array<Record<string, unknown>>"))]
        #[cfg_attr(
            feature = "deserialize",
            serde(deserialize_with = "crate::json::buffered_vec")
        )]
        entries: Vec<Json>,
    },
    /// The session's name changed (`system/session_title_changed`).
    TitleChanged(TitleChanged),
    /// The session's instruction files are longer than the model's recommended limit
    /// (`system/instruction_size_warning`).
    InstructionSizeWarning(InstructionSizeWarning),
    /// Files a prompt named in `file_attachments` could not be attached
    /// (`system/file_attachments_missing`).
    FileAttachmentsMissing(FileAttachmentsMissing),
    /// A tool call's permission check is taking a while, or is over
    /// (`system/permission_check_status`).
    PermissionCheck(PermissionCheck),
    /// The control requests a cloud worker keeps from the one before it
    /// (`system/inherited_asks_settled`).
    InheritedAsksSettled(InheritedAsksSettled),
    /// A plugin's push to the UI (`system/ui_*`).
    PluginUi(PluginUi),
    /// Where a prompt sent with a `uuid` is: queued, started, completed, cancelled, …
    /// (`command_lifecycle`).
    CommandLifecycle(CommandLifecycle),
    /// An event of the CLI's engine that ccwire names but does not model (`active_goal`,
    /// `tombstone`, …): the whole message.
    CliEvent(CliEvent),
    /// A turn ended (`result`).
    TurnComplete {
        /// `success` or an `error_*` subtype.
        subtype: Option<String>,
        /// Whether the turn ended in error (not implied by the subtype).
        is_error: bool,
        /// The final text (the last text block), or the error text.
        result: Option<String>,
        /// The last API stop reason.
        stop_reason: Option<String>,
        /// Why the turn ended (`completed`, `aborted_tools`, …).
        terminal_reason: Option<String>,
        /// The HTTP status of the API error that ended the turn, when one did.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        api_error_status: Option<u16>,
        /// The type of that API error (`invalid_request_error`, `rate_limit_error`, …).
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        #[cfg_attr(feature = "deserialize", serde(default))]
        api_error_type: Option<String>,
        /// The API error's own code, when it gave one (`error.details.error_code`).
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        #[cfg_attr(feature = "deserialize", serde(default))]
        api_error_code: Option<String>,
        /// Model round trips in the turn.
        #[cfg_attr(test, ts(type = "number | null"))]
        num_turns: Option<u64>,
        /// Wall time of the turn.
        #[cfg_attr(test, ts(type = "number | null"))]
        duration_ms: Option<u64>,
        /// Token usage of the turn.
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        usage: Json,
        /// Cumulative cost of the process.
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        total_cost_usd: Json,
        /// Per model, the process's cumulative tokens and cost (`modelUsage`: `inputTokens`,
        /// `outputTokens`, `cacheReadInputTokens`, `cacheCreationInputTokens`, `costUSD`, …),
        /// subagents' models included.
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        model_usage: Json,
        /// The CLI's session id.
        session_id: Option<String>,
        /// Tools the user or a rule refused.
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        permission_denials: Json,
        /// Error texts on error subtypes.
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        errors: Json,
        /// The object the model produced in structured-output mode (the CLI's `--json-schema`,
        /// `initialize.jsonSchema`), validated against the schema by the CLI.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered_option")
        )]
        structured_output: Option<Json>,
    },
    /// The answer to a control request the host sent.
    ControlResult {
        /// The host's request id.
        request_id: String,
        /// The host request's subtype, `null` when the request was not seen.
        subtype: Option<String>,
        /// Whether the CLI answered with success.
        ok: bool,
        /// The success payload.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered_option")
        )]
        response: Option<Json>,
        /// The error message.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        error: Option<String>,
        /// The error code, when the CLI gave one.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        error_code: Option<String>,
    },
    /// The CLI answered `initialize`.
    Ready {
        /// The CLI version.
        claude_code_version: Option<String>,
        /// The models the CLI offers.
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        models: Json,
        /// The slash commands the CLI offers.
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        commands: Json,
    },
    /// The tool-wait state changed; see [`ToolWait`].
    ToolWait(ToolWait),
    /// Input the session could not use. The session goes on.
    Error {
        /// What went wrong.
        kind: ErrorKind,
        /// A human-readable explanation.
        detail: String,
        /// The start of the offending line (at most 200 bytes), when there is one.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        excerpt: Option<String>,
        /// The size of a skipped line.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        #[cfg_attr(test, ts(type = "number"))]
        bytes: Option<u64>,
    },
    /// A well-formed message of a type or subtype the core does not model.
    Unknown {
        /// The whole message.
        #[cfg_attr(
            feature = "deserialize",
            serde(default, deserialize_with = "crate::json::buffered")
        )]
        message: Json,
    },
    /// The host reported that the CLI process ended.
    ProcessExit {
        /// The exit code, when it exited normally.
        code: Option<i32>,
        /// The signal that ended it, when one did.
        signal: Option<i32>,
    },
}

impl Chunk {
    /// The chunk as one line of JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("chunks always serialize")
    }

    /// The `type` tag of the chunk.
    pub fn kind(&self) -> &'static str {
        match self {
            Chunk::SessionInit { .. } => "session_init",
            Chunk::UserPrompt { .. } => "user_prompt",
            Chunk::MessageStart { .. } => "message_start",
            Chunk::TextDelta { .. } => "text_delta",
            Chunk::ThinkingDelta { .. } => "thinking_delta",
            Chunk::ThinkingRedacted { .. } => "thinking_redacted",
            Chunk::Citation { .. } => "citation",
            Chunk::ToolUse { .. } => "tool_use",
            Chunk::ToolInputDelta { .. } => "tool_input_delta",
            Chunk::MessageDelta { .. } => "message_delta",
            Chunk::MessageStop { .. } => "message_stop",
            Chunk::ToolStatus { .. } => "tool_status",
            Chunk::ToolStart { .. } => "tool_start",
            Chunk::ToolProgress { .. } => "tool_progress",
            Chunk::ToolHeartbeat { .. } => "tool_heartbeat",
            Chunk::ToolResult { .. } => "tool_result",
            Chunk::UserText { .. } => "user_text",
            Chunk::PermissionRequest { .. } => "permission_request",
            Chunk::PermissionResolved { .. } => "permission_resolved",
            Chunk::HookRequest { .. } => "hook_request",
            Chunk::McpToolCall { .. } => "mcp_tool_call",
            Chunk::McpToolCancelled { .. } => "mcp_tool_cancelled",
            Chunk::McpRequest { .. } => "mcp_request",
            Chunk::ElicitationRequest { .. } => "elicitation_request",
            Chunk::DialogRequest { .. } => "dialog_request",
            Chunk::RequestResolved { .. } => "request_resolved",
            Chunk::RequestCancelled { .. } => "request_cancelled",
            Chunk::Status { .. } => "status",
            Chunk::RateLimit { .. } => "rate_limit",
            Chunk::ToolUseSummary { .. } => "tool_use_summary",
            Chunk::AuthStatus { .. } => "auth_status",
            Chunk::PromptSuggestion { .. } => "prompt_suggestion",
            Chunk::ConversationReset { .. } => "conversation_reset",
            Chunk::TranscriptMirror { .. } => "transcript_mirror",
            Chunk::ApiError { .. } => "api_error",
            Chunk::TitleChanged(_) => "title_changed",
            Chunk::InstructionSizeWarning(_) => "instruction_size_warning",
            Chunk::FileAttachmentsMissing(_) => "file_attachments_missing",
            Chunk::PermissionCheck(_) => "permission_check",
            Chunk::InheritedAsksSettled(_) => "inherited_asks_settled",
            Chunk::PluginUi(_) => "plugin_ui",
            Chunk::CommandLifecycle(_) => "command_lifecycle",
            Chunk::CliEvent(_) => "cli_event",
            Chunk::TurnComplete { .. } => "turn_complete",
            Chunk::ControlResult { .. } => "control_result",
            Chunk::Ready { .. } => "ready",
            Chunk::ToolWait(_) => "tool_wait",
            Chunk::Error { .. } => "error",
            Chunk::Unknown { .. } => "unknown",
            Chunk::ProcessExit { .. } => "process_exit",
        }
    }
}

#[cfg(test)]
mod typescript;
