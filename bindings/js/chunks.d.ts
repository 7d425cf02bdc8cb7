// Generated from core/src/chunk/ by scripts/gen-types.sh; do not edit.
import type { Json } from "./index.js";

/**
 * One thing that happened on the wire, as a UI or an API encoder wants to see it.
 */
export type Chunk = { "type": "session_init", 
/**
 * The CLI's session id.
 */
session_id: string | null, 
/**
 * The resolved model id.
 */
model: string | null, 
/**
 * The CLI's working directory.
 */
cwd: string | null, 
/**
 * Tool names the model may call.
 */
tools: Json, 
/**
 * MCP servers and their connection status.
 */
mcp_servers: Json, 
/**
 * The permission mode in force.
 */
permission_mode: string | null, 
/**
 * The CLI version.
 */
claude_code_version: string | null, } | { "type": "user_prompt", 
/**
 * The message content: a string or content blocks.
 */
content: Json, 
/**
 * The client uuid of the message, when it had one.
 */
uuid?: string, 
/**
 * `now`, `next` or `later` when the message carried a priority.
 */
priority?: string, } | { "type": "message_start", 
/**
 * The API message id.
 */
message_id: string, 
/**
 * The model answering.
 */
model: string | null, 
/**
 * The Agent/Task tool call this message belongs to, for sub-agent output.
 */
parent_tool_use_id: string | null, 
/**
 * Token usage known at the start (`input_tokens`, `cache_creation_input_tokens`,
 * `cache_read_input_tokens`, a first `output_tokens`), as the model reported it;
 * `null` when it reported none. `message_delta` carries the output tokens.
 */
usage: Json, } | { "type": "text_delta", 
/**
 * The API message id.
 */
message_id: string, 
/**
 * The content block index within the message.
 */
index: number, 
/**
 * The text piece.
 */
text: string, 
/**
 * The Agent/Task tool call this message belongs to, for sub-agent output.
 */
parent_tool_use_id: string | null, } | { "type": "thinking_delta", 
/**
 * The API message id.
 */
message_id: string, 
/**
 * The content block index within the message.
 */
index: number, 
/**
 * The thinking piece.
 */
thinking: string, 
/**
 * The Agent/Task tool call this message belongs to, for sub-agent output.
 */
parent_tool_use_id?: string, } | { "type": "thinking_redacted", 
/**
 * The API message id.
 */
message_id: string, 
/**
 * The content block index within the message.
 */
index: number, 
/**
 * The Agent/Task tool call this message belongs to, for sub-agent output.
 */
parent_tool_use_id?: string, } | { "type": "citation", 
/**
 * The API message id.
 */
message_id: string, 
/**
 * The content block index within the message.
 */
index: number, 
/**
 * The citation object as the API sent it.
 */
citation: Json, 
/**
 * The Agent/Task tool call this message belongs to, for sub-agent output.
 */
parent_tool_use_id?: string, } | { "type": "tool_use", 
/**
 * The tool_use id.
 */
id: string, 
/**
 * The tool name as the model called it.
 */
name: string, 
/**
 * The API message id.
 */
message_id: string, 
/**
 * The content block index within the message.
 */
index: number, 
/**
 * The Agent/Task tool call this call belongs to, for sub-agent output.
 */
parent_tool_use_id: string | null, 
/**
 * Whether the input is complete.
 */
complete: boolean, 
/**
 * The input, when complete; `null` before.
 */
input: Json, 
/**
 * `true` for a server-executed tool (`server_tool_use`).
 */
server?: true, } | { "type": "tool_input_delta", 
/**
 * The tool_use id.
 */
id: string, 
/**
 * The piece of JSON text (may be empty).
 */
partial_json: string, } | { "type": "message_delta", 
/**
 * The API message id.
 */
message_id: string, 
/**
 * Why the model stopped (`end_turn`, `tool_use`, …); `null` passes through.
 */
stop_reason: string | null, 
/**
 * Token usage.
 */
usage: Json, } | { "type": "message_stop", 
/**
 * The API message id.
 */
message_id: string, 
/**
 * After an interrupt: the first content block index the CLI abandoned.
 */
abandoned_from_index?: number, } | { "type": "tool_status", 
/**
 * The tool_use id.
 */
id: string, 
/**
 * The new status.
 */
status: ToolStatusName, 
/**
 * Why, when the change has a reason.
 */
reason?: StatusReason, } | { "type": "tool_start", 
/**
 * The tool_use id.
 */
id: string, 
/**
 * The tool name.
 */
name: string | null, 
/**
 * Seconds since the tool started, as the CLI reports it.
 */
elapsed_s: number, 
/**
 * The Agent/Task tool call this call belongs to, for sub-agent output.
 */
parent_tool_use_id?: string, } | { "type": "tool_progress", 
/**
 * The tool_use id.
 */
id: string, 
/**
 * Seconds since the tool started.
 */
elapsed_s: number, } | { "type": "tool_heartbeat", 
/**
 * The tool_use id of the held call.
 */
id: string, 
/**
 * Seconds since the call started.
 */
elapsed_s: number, 
/**
 * The heartbeat's sequence number.
 */
seq: number, } | { "type": "tool_result", 
/**
 * The tool_use id.
 */
id: string, 
/**
 * The result content: a string or content blocks.
 */
content: Json, 
/**
 * Whether the result is an error.
 */
is_error: boolean, 
/**
 * `true` for the result of a server-executed tool.
 */
server?: true, 
/**
 * The Agent/Task tool call this result belongs to, for sub-agent output.
 */
parent_tool_use_id?: string, } | { "type": "user_text", 
/**
 * The text.
 */
text: string, 
/**
 * The Agent/Task tool call this text belongs to, for sub-agent output.
 */
parent_tool_use_id: string | null, } | { "type": "permission_request", 
/**
 * The control request id to answer.
 */
request_id: string, 
/**
 * The tool_use id.
 */
tool_use_id: string | null, 
/**
 * The tool name.
 */
tool_name: string, 
/**
 * The tool input.
 */
input: Json, 
/**
 * Permission updates the CLI suggests (`permission_suggestions`).
 */
suggestions: Json, 
/**
 * The path that triggered the prompt, when there is one.
 */
blocked_path: string | null, 
/**
 * When the request times out (ms), when a timeout policy is set.
 */
deadline_ms: number | null, } | { "type": "permission_resolved", 
/**
 * The control request id.
 */
request_id: string, 
/**
 * The tool_use id.
 */
tool_use_id: string | null, 
/**
 * The outcome.
 */
behavior: Behavior, 
/**
 * Who settled it (never the session's `default`: an unanswered permission request
 * waits for the host or its deadline).
 */
reason: "host" | "timeout" | "cancelled", } | { "type": "hook_request", 
/**
 * The control request id to answer.
 */
request_id: string, 
/**
 * The hook callback id (`hook_<n>`).
 */
callback_id: string, 
/**
 * The hook event (`PreToolUse`, `PostToolUse`, …).
 */
event: string | null, 
/**
 * The tool_use id the CLI attached (not always a tool's).
 */
tool_use_id: string | null, 
/**
 * The hook input.
 */
input: Json, 
/**
 * When the request times out (ms), when a timeout policy is set.
 */
deadline_ms: number | null, } | { "type": "mcp_tool_call", 
/**
 * The control request id to answer.
 */
request_id: string, 
/**
 * The MCP server name.
 */
server: string, 
/**
 * The tool name as given in `params.name`.
 */
tool: string, 
/**
 * The call arguments.
 */
arguments: Json, 
/**
 * The tool_use id (`_meta["claudecode/toolUseId"]`).
 */
tool_use_id: string | null, 
/**
 * When the call times out (ms), when a timeout policy is set.
 */
deadline_ms: number | null, } | { "type": "mcp_tool_cancelled", 
/**
 * The control request id of the cancelled `tools/call`.
 */
request_id: string, 
/**
 * The control request id of the cancel notification.
 */
cancel_request_id: string, 
/**
 * The tool_use id of the cancelled call.
 */
tool_use_id: string | null, 
/**
 * The reason the CLI gave.
 */
reason: string | null, } | { "type": "mcp_request", 
/**
 * The control request id.
 */
request_id: string, 
/**
 * The MCP server name.
 */
server: string, 
/**
 * The JSON-RPC method.
 */
method: string | null, } | { "type": "elicitation_request", 
/**
 * The control request id to answer.
 */
request_id: string, 
/**
 * The MCP server asking.
 */
server: string, 
/**
 * What it asks.
 */
message: string, 
/**
 * The running tool of that server the elicitation holds up, when there is one.
 */
tool_use_id: string | null, 
/**
 * When the request times out (ms), when a timeout policy is set.
 */
deadline_ms: number | null, 
/**
 * `form` (answer with content matching `requested_schema`) or `url` (the user opens
 * `url`).
 */
mode: "form" | "url" | (string & {}) | null, 
/**
 * The URL to open (`url` mode).
 */
url: string | null, 
/**
 * The server's id for the elicitation.
 */
elicitation_id: string | null, 
/**
 * The JSON Schema of the content asked for (`form` mode).
 */
requested_schema: Json, 
/**
 * A title to show, from the server's permission display.
 */
title: string | null, 
/**
 * A short server or tool label to show.
 */
display_name: string | null, 
/**
 * A description to show.
 */
description: string | null, } | { "type": "dialog_request", 
/**
 * The control request id to answer.
 */
request_id: string, 
/**
 * Which dialog (`refusal_fallback_prompt`, …).
 */
dialog_kind: string, 
/**
 * The dialog's data, shaped by its kind.
 */
payload: Json, 
/**
 * The tool call it belongs to, when there is one.
 */
tool_use_id: string | null, 
/**
 * When the request times out (ms), when a timeout policy is set.
 */
deadline_ms: number | null, } | { "type": "request_resolved", 
/**
 * The control request id.
 */
request_id: string, 
/**
 * Who settled it.
 */
reason: ResolveReason, 
/**
 * The answer the CLI got.
 */
response: Json, } | { "type": "request_cancelled", 
/**
 * The withdrawn control request id.
 */
request_id: string, } | { "type": "status", 
/**
 * The system subtype.
 */
subtype: string, } | { "type": "rate_limit", 
/**
 * `allowed`, `allowed_warning` or `rejected`.
 */
status: "allowed" | "allowed_warning" | "rejected" | (string & {}), 
/**
 * When the limit resets (Unix seconds), when known.
 */
resets_at: number | null, 
/**
 * Which limit (`five_hour`, `seven_day`, …), when known.
 */
rate_limit_type: string | null, 
/**
 * How much of it is used (0 to 1), when known.
 */
utilization: number | null, 
/**
 * Every field of `rate_limit_info` (overage state and more).
 */
info: Json, } | { "type": "api_error", 
/**
 * The CLI's message standing for the error.
 */
message_id: string, 
/**
 * The subagent's tool_use when the failed request was one of a subagent's.
 */
parent_tool_use_id: string | null, 
/**
 * The CLI's class of the error (`authentication_failed`, `billing_error`,
 * `rate_limit`, `overloaded`, `invalid_request`, `model_not_found`, `server_error`,
 * `unknown`, …), when it gives one.
 */
error: string | null, 
/**
 * Its typed cause (`connection_failed`, `stream_idle_timeout`,
 * `stored_login_refused`, `unattended_start_limit`, …), when the CLI gives one.
 */
cause: string | null, 
/**
 * The model API's HTTP status, when it answered.
 */
status: number | null, 
/**
 * The model API's error type (`invalid_request_error`, …), when it gave one.
 */
error_type: string | null, 
/**
 * The CLI's words (the message's text).
 */
text: string, } | { "type": "tool_use_summary", 
/**
 * The summary text.
 */
summary: string, 
/**
 * The tool_use ids it summarizes.
 */
tool_use_ids: Array<string>, } | { "type": "auth_status", 
/**
 * Whether it is authenticating now.
 */
authenticating: boolean, 
/**
 * Lines of its output (a URL to open, a code to enter, …).
 */
output: Array<string>, 
/**
 * What went wrong, when something did.
 */
error: string | null, } | { "type": "prompt_suggestion", 
/**
 * The suggested prompt.
 */
suggestion: string, } | { "type": "conversation_reset", 
/**
 * The new conversation id.
 */
new_conversation_id: string, 
/**
 * What reset it (`clear`, `plan_mode_exit`, `fresh_session`, `onboarding`), when said.
 */
trigger: "clear" | "plan_mode_exit" | "fresh_session" | "onboarding" | (string & {}) | null, } | { "type": "transcript_mirror", 
/**
 * The transcript's path on the CLI's machine.
 */
file_path: string, 
/**
 * The entries, in the order written.
 */
entries: Array<Record<string, unknown>>, } | { "type": "title_changed" } & TitleChanged | { "type": "instruction_size_warning" } & InstructionSizeWarning | { "type": "file_attachments_missing" } & FileAttachmentsMissing | { "type": "permission_check" } & PermissionCheck | { "type": "inherited_asks_settled" } & InheritedAsksSettled | { "type": "plugin_ui" } & PluginUi | { "type": "command_lifecycle" } & CommandLifecycle | { "type": "cli_event" } & CliEvent | { "type": "turn_complete", 
/**
 * `success` or an `error_*` subtype.
 */
subtype: string | null, 
/**
 * Whether the turn ended in error (not implied by the subtype).
 */
is_error: boolean, 
/**
 * The final text (the last text block), or the error text.
 */
result: string | null, 
/**
 * The last API stop reason.
 */
stop_reason: string | null, 
/**
 * Why the turn ended (`completed`, `aborted_tools`, …).
 */
terminal_reason: string | null, 
/**
 * The HTTP status of the API error that ended the turn, when one did.
 */
api_error_status?: number, 
/**
 * The type of that API error (`invalid_request_error`, `rate_limit_error`, …).
 */
api_error_type?: string, 
/**
 * The API error's own code, when it gave one (`error.details.error_code`).
 */
api_error_code?: string, 
/**
 * Model round trips in the turn.
 */
num_turns: number | null, 
/**
 * Wall time of the turn.
 */
duration_ms: number | null, 
/**
 * Token usage of the turn.
 */
usage: Json, 
/**
 * Cumulative cost of the process.
 */
total_cost_usd: Json, 
/**
 * Per model, the process's cumulative tokens and cost (`modelUsage`: `inputTokens`,
 * `outputTokens`, `cacheReadInputTokens`, `cacheCreationInputTokens`, `costUSD`, …),
 * subagents' models included.
 */
model_usage: Json, 
/**
 * The CLI's session id.
 */
session_id: string | null, 
/**
 * Tools the user or a rule refused.
 */
permission_denials: Json, 
/**
 * Error texts on error subtypes.
 */
errors: Json, 
/**
 * The object the model produced in structured-output mode (the CLI's `--json-schema`,
 * `initialize.jsonSchema`), validated against the schema by the CLI.
 */
structured_output?: Json, } | { "type": "control_result", 
/**
 * The host's request id.
 */
request_id: string, 
/**
 * The host request's subtype, `null` when the request was not seen.
 */
subtype: string | null, 
/**
 * Whether the CLI answered with success.
 */
ok: boolean, 
/**
 * The success payload.
 */
response?: Json, 
/**
 * The error message.
 */
error?: string, 
/**
 * The error code, when the CLI gave one.
 */
error_code?: string, } | { "type": "ready", 
/**
 * The CLI version.
 */
claude_code_version: string | null, 
/**
 * The models the CLI offers.
 */
models: Json, 
/**
 * The slash commands the CLI offers.
 */
commands: Json, } | { "type": "tool_wait" } & ToolWait | { "type": "error", 
/**
 * What went wrong.
 */
kind: ErrorKind, 
/**
 * A human-readable explanation.
 */
detail: string, 
/**
 * The start of the offending line (at most 200 bytes), when there is one.
 */
excerpt?: string, 
/**
 * The size of a skipped line.
 */
bytes?: number, } | { "type": "unknown", 
/**
 * The whole message.
 */
message: Json, } | { "type": "process_exit", 
/**
 * The exit code, when it exited normally.
 */
code: number | null, 
/**
 * The signal that ended it, when one did.
 */
signal: number | null, };

/**
 * What an [`Chunk::ElicitationRequest`](crate::Chunk::ElicitationRequest) asks for and how to
 * show it.
 */
export type ElicitationDetails = { 
/**
 * `form` (answer with content matching `requested_schema`) or `url` (the user opens
 * `url`).
 */
mode: "form" | "url" | (string & {}) | null, 
/**
 * The URL to open (`url` mode).
 */
url: string | null, 
/**
 * The server's id for the elicitation.
 */
elicitation_id: string | null, 
/**
 * The JSON Schema of the content asked for (`form` mode).
 */
requested_schema: Json, 
/**
 * A title to show, from the server's permission display.
 */
title: string | null, 
/**
 * A short server or tool label to show.
 */
display_name: string | null, 
/**
 * A description to show.
 */
description: string | null, };

/**
 * A tool call's status.
 */
export type ToolStatusName = "pending" | "awaiting_approval" | "running" | "success" | "error" | "cancelled";

/**
 * Why a tool's status changed.
 */
export type StatusReason = "denied" | "cancelled" | "timeout" | "interrupted" | "turn_ended" | "process_exit";

/**
 * The outcome of a permission request.
 */
export type Behavior = "allow" | "deny";

/**
 * Who settled a permission request.
 */
export type ResolveReason = "host" | "timeout" | "cancelled" | "default";

/**
 * Kinds of [`Chunk::Error`](crate::Chunk::Error).
 */
export type ErrorKind = "malformed_line" | "invalid_message" | "line_too_long" | "malformed_transcript_line" | "process_exit" | "malformed_tool_input";

/**
 * Is the CLI waiting for the embedder to deliver something a tool needs?
 */
export type ToolWait = { 
/**
 * Whether the CLI is waiting for a tool.
 */
waiting: boolean, 
/**
 * The outstanding tools of the current turn: complete, without a result.
 */
tool_use_ids: Array<string>, 
/**
 * The pending requests the embedder must answer for an outstanding tool.
 */
blocked_on: Array<BlockedOn>, };

/**
 * A pending request that holds up an outstanding tool.
 */
export type BlockedOn = { 
/**
 * The control request id to answer.
 */
request_id: string, 
/**
 * What kind of request it is.
 */
kind: BlockedKind, 
/**
 * The tool it holds up.
 */
tool_use_id: string, };

/**
 * Kinds of [`BlockedOn`] requests.
 */
export type BlockedKind = "permission" | "mcp_tool_call" | "hook" | "elicitation" | "dialog";

/**
 * The session's name changed (`system/session_title_changed`).
 */
export type TitleChanged = { 
/**
 * The name now, cleaned by the CLI (one line, at most 200 code points).
 */
title: string, 
/**
 * Who named it: `user` (a rename) or `other` (the CLI or a host), when said.
 */
given_by: "user" | "other" | (string & {}) | null, };

/**
 * The instruction files in the session's prompt (CLAUDE.md files, rules and their imports)
 * are longer than the model's recommended limit (`system/instruction_size_warning`).
 */
export type InstructionSizeWarning = { 
/**
 * Their combined length, in characters.
 */
total_chars: number, 
/**
 * The recommended limit for that length on the turn's model.
 */
total_limit_chars: number, 
/**
 * How many files.
 */
file_count: number, 
/**
 * The longest file's length, when said.
 */
largest_chars: number | null, };

/**
 * Files a prompt's `file_attachments` named that the CLI could not attach
 * (`system/file_attachments_missing`).
 */
export type FileAttachmentsMissing = { 
/**
 * The `uuid` of the prompt that named them.
 */
message_uuid: string, 
/**
 * How many well-formed entries the prompt's `file_attachments` had.
 */
sent_count: number, 
/**
 * The files missing, one entry per file.
 */
missing: Array<MissingFile>, };

/**
 * One file of [`FileAttachmentsMissing`].
 */
export type MissingFile = { 
/**
 * The entry's `file_uuid`.
 */
file_uuid: string, 
/**
 * Why it is missing (`no_space`, …).
 */
reason: string, };

/**
 * A tool call's permission check has been running for a while (`checking`, after about four
 * seconds) or is over (`done`) (`system/permission_check_status`).
 */
export type PermissionCheck = { 
/**
 * The tool call being checked.
 */
tool_use_id: string, 
/**
 * The subagent that made the call, when one did.
 */
agent_id: string | null, 
/**
 * `checking` or `done`.
 */
status: "checking" | "done" | (string & {}), };

/**
 * A cloud worker taking over a session reports which of its predecessor's requests it keeps
 * answerable (`system/inherited_asks_settled`); any other request pending from before is void.
 */
export type InheritedAsksSettled = { 
/**
 * The control request ids still open.
 */
kept_request_ids: Array<string>, };

/**
 * A plugin's push to the host's UI (`system/ui_*`: a log line, a toast, a status line, a
 * notification, a redraw, …). Plain text from a plugin is data: show it as text, never as
 * markup.
 */
export type PluginUi = { 
/**
 * Which push: the frame's subtype without `ui_`.
 */
kind: "log" | "toast" | "status" | "notify" | "notify_cancel" | "invalidate" | "panes" | "placed" | "scroll" | "focus", 
/**
 * The plugin's registry name, when the push names one.
 */
plugin: string | null, 
/**
 * The plugin's text (`log`, `toast`, `status`, `notify`), when there is one.
 */
text: string | null, 
/**
 * The frame's other fields (`timeout_ms`, `title`, `key`, `rows`, …), `uuid` and
 * `session_id` among them.
 */
fields: Record<string, unknown>, };

/**
 * Where a prompt sent with a `uuid` is (`command_lifecycle`).
 */
export type CommandLifecycle = { 
/**
 * The prompt's `uuid`.
 */
command_uuid: string, 
/**
 * `queued`, `started`, `completed`, `cancelled`, `discarded` or `refused`.
 */
state: "queued" | "started" | "completed" | "cancelled" | "discarded" | "refused" | (string & {}), 
/**
 * On `started` of a scheduled prompt: `loop_wakeup` or `schedule_wakeup`.
 */
wakeup_source: string | null, 
/**
 * Beside `loop_wakeup`: the time the wakeup was set for (Unix milliseconds).
 */
scheduled_for: number | null, };

/**
 * One of the CLI engine's own events that ccwire names but does not model (`active_goal`,
 * `autocompact_state`, `tombstone`, …: [`CLI_EVENTS`](crate::wire::CLI_EVENTS)); the whole message.
 */
export type CliEvent = { 
/**
 * The message's `type`.
 */
event: string, 
/**
 * The whole message.
 */
message: Json, };

/** The chunk of one `type`. */
export type ChunkOf<T extends Chunk["type"]> = Extract<Chunk, { type: T }>;

/**
 * A turn started (`system/init`, sent by the CLI at the start of every turn).
 */
export type SessionInitChunk = ChunkOf<"session_init">;

/**
 * A prompt the host sent to the CLI.
 */
export type UserPromptChunk = ChunkOf<"user_prompt">;

/**
 * A model message started streaming.
 */
export type MessageStartChunk = ChunkOf<"message_start">;

/**
 * A piece of assistant text.
 */
export type TextDeltaChunk = ChunkOf<"text_delta">;

/**
 * A piece of the model's thinking.
 */
export type ThinkingDeltaChunk = ChunkOf<"thinking_delta">;

/**
 * A redacted thinking block (its content is encrypted).
 */
export type ThinkingRedactedChunk = ChunkOf<"thinking_redacted">;

/**
 * A citation attached to a text block.
 */
export type CitationChunk = ChunkOf<"citation">;

/**
 * A tool call: first with `complete:false` when it starts, then once with `complete:true`
 * and the whole input.
 */
export type ToolUseChunk = ChunkOf<"tool_use">;

/**
 * A piece of a tool call's input JSON as it streams.
 */
export type ToolInputDeltaChunk = ChunkOf<"tool_input_delta">;

/**
 * The model message's stop reason and usage (`message_delta`).
 */
export type MessageDeltaChunk = ChunkOf<"message_delta">;

/**
 * The model message ended (`message_stop`).
 */
export type MessageStopChunk = ChunkOf<"message_stop">;

/**
 * A tool's status changed.
 */
export type ToolStatusChunk = ChunkOf<"tool_status">;

/**
 * A tool started executing (its first `tool_progress`).
 */
export type ToolStartChunk = ChunkOf<"tool_start">;

/**
 * A running tool reported progress.
 */
export type ToolProgressChunk = ChunkOf<"tool_progress">;

/**
 * The CLI's heartbeat for a held MCP call (every 30 s).
 */
export type ToolHeartbeatChunk = ChunkOf<"tool_heartbeat">;

/**
 * A tool's result.
 */
export type ToolResultChunk = ChunkOf<"tool_result">;

/**
 * User-role text the CLI added (`[Request interrupted by user]`, a sub-agent's prompt, …).
 */
export type UserTextChunk = ChunkOf<"user_text">;

/**
 * The CLI asks whether a tool may run (`can_use_tool`). Answer with
 * `Session::respond_permission`.
 */
export type PermissionRequestChunk = ChunkOf<"permission_request">;

/**
 * A permission request was settled, exactly once.
 */
export type PermissionResolvedChunk = ChunkOf<"permission_resolved">;

/**
 * The CLI calls a hook registered in `initialize`. Answer with
 * `Session::respond_hook`.
 */
export type HookRequestChunk = ChunkOf<"hook_request">;

/**
 * The CLI calls a tool of an in-process MCP server. Answer with
 * `Session::respond_mcp`.
 */
export type McpToolCallChunk = ChunkOf<"mcp_tool_call">;

/**
 * The CLI cancelled a held MCP tool call (`notifications/cancelled`).
 */
export type McpToolCancelledChunk = ChunkOf<"mcp_tool_cancelled">;

/**
 * An MCP request other than `tools/call` (handshake, `tools/list`, notifications). In driver
 * mode the session has already answered it from the registered servers.
 */
export type McpRequestChunk = ChunkOf<"mcp_request">;

/**
 * An MCP server asks the user for input (`elicitation`), through the CLI. Answer with
 * `Session::respond_elicitation` when
 * `SessionConfig::elicitations` is set; otherwise the session
 * declines it at once.
 */
export type ElicitationRequestChunk = ChunkOf<"elicitation_request">;

/**
 * The CLI asks the host to render a dialog of a kind it declared
 * (`request_user_dialog`, `initialize.supportedDialogKinds`). Answer with
 * `Session::respond_user_dialog`.
 */
export type DialogRequestChunk = ChunkOf<"dialog_request">;

/**
 * An elicitation or a dialog was settled: by the host, by the session's default (an
 * elicitation with no handler is declined), or by its deadline. (A request the CLI
 * withdraws is a `request_cancelled`.)
 */
export type RequestResolvedChunk = ChunkOf<"request_resolved">;

/**
 * The CLI withdrew a request other than a permission (`control_cancel_request`); an answer
 * to it is no longer wanted.
 */
export type RequestCancelledChunk = ChunkOf<"request_cancelled">;

/**
 * The account's rate limit (`rate_limit_event`): allowed, close to the limit
 * (`allowed_warning`) or reached (`rejected`), and when it resets.
 */
export type RateLimitChunk = ChunkOf<"rate_limit">;

/**
 * A model request failed, and the CLI says so in an assistant message of its own
 * (`is_api_error_message`, its text also a `TextDelta`): the error as
 * data, for a host to key on instead of the words.
 */
export type ApiErrorChunk = ChunkOf<"api_error">;

/**
 * A summary of tool calls the CLI made (`tool_use_summary`).
 */
export type ToolUseSummaryChunk = ChunkOf<"tool_use_summary">;

/**
 * The CLI's authentication progress (`auth_status`).
 */
export type AuthStatusChunk = ChunkOf<"auth_status">;

/**
 * A prompt the user might send next (`prompt_suggestion`).
 */
export type PromptSuggestionChunk = ChunkOf<"prompt_suggestion">;

/**
 * The conversation was reset (`conversation_reset`: `/clear`, leaving plan mode, …): the
 * model's context starts afresh under a new id.
 */
export type ConversationResetChunk = ChunkOf<"conversation_reset">;

/**
 * Lines the CLI appended to its session transcript (`transcript_mirror`, with
 * `--session-mirror`): the file it wrote them to and the entries, one JSON object per
 * line. Stored, they let a later CLI resume the conversation exactly (`--resume`).
 */
export type TranscriptMirrorChunk = ChunkOf<"transcript_mirror">;

/**
 * The session's name changed (`system/session_title_changed`).
 */
export type TitleChangedChunk = ChunkOf<"title_changed">;

/**
 * The session's instruction files are longer than the model's recommended limit
 * (`system/instruction_size_warning`).
 */
export type InstructionSizeWarningChunk = ChunkOf<"instruction_size_warning">;

/**
 * Files a prompt named in `file_attachments` could not be attached
 * (`system/file_attachments_missing`).
 */
export type FileAttachmentsMissingChunk = ChunkOf<"file_attachments_missing">;

/**
 * A tool call's permission check is taking a while, or is over
 * (`system/permission_check_status`).
 */
export type PermissionCheckChunk = ChunkOf<"permission_check">;

/**
 * The control requests a cloud worker keeps from the one before it
 * (`system/inherited_asks_settled`).
 */
export type InheritedAsksSettledChunk = ChunkOf<"inherited_asks_settled">;

/**
 * A plugin's push to the UI (`system/ui_*`).
 */
export type PluginUiChunk = ChunkOf<"plugin_ui">;

/**
 * Where a prompt sent with a `uuid` is: queued, started, completed, cancelled, …
 * (`command_lifecycle`).
 */
export type CommandLifecycleChunk = ChunkOf<"command_lifecycle">;

/**
 * An event of the CLI's engine that ccwire names but does not model (`active_goal`,
 * `tombstone`, …): the whole message.
 */
export type CliEventChunk = ChunkOf<"cli_event">;

/**
 * A turn ended (`result`).
 */
export type TurnCompleteChunk = ChunkOf<"turn_complete">;

/**
 * The answer to a control request the host sent.
 */
export type ControlResultChunk = ChunkOf<"control_result">;

/**
 * The CLI answered `initialize`.
 */
export type ReadyChunk = ChunkOf<"ready">;

/**
 * The tool-wait state changed; see `ToolWait`.
 */
export type ToolWaitChunk = ChunkOf<"tool_wait">;

/**
 * Input the session could not use. The session goes on.
 */
export type ErrorChunk = ChunkOf<"error">;

/**
 * A well-formed message of a type or subtype the core does not model.
 */
export type UnknownChunk = ChunkOf<"unknown">;

/**
 * The host reported that the CLI process ended.
 */
export type ProcessExitChunk = ChunkOf<"process_exit">;
