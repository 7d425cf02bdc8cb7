// Types of the `ccwire` package. Chunks are the objects of CHUNKS.md: a `type` tag and
// snake_case fields; parts taken from the wire are plain JSON values.

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export type ToolStatusName =
  | "pending"
  | "awaiting_approval"
  | "running"
  | "success"
  | "error"
  | "cancelled";
export type StatusReason =
  | "denied"
  | "cancelled"
  | "timeout"
  | "interrupted"
  | "turn_ended"
  | "process_exit";
export type ErrorKind =
  | "malformed_line"
  | "invalid_message"
  | "line_too_long"
  | "malformed_transcript_line"
  | "process_exit"
  | "malformed_tool_input";

export interface BlockedOn {
  request_id: string;
  kind: "permission" | "mcp_tool_call" | "hook" | "elicitation" | "dialog";
  tool_use_id: string;
}
/** Is the CLI waiting for the embedder to deliver something a tool needs? */
export interface ToolWait {
  waiting: boolean;
  tool_use_ids: string[];
  blocked_on: BlockedOn[];
}

export interface SessionInitChunk {
  type: "session_init";
  session_id: string | null;
  model: string | null;
  cwd: string | null;
  tools: Json;
  mcp_servers: Json;
  permission_mode: string | null;
  claude_code_version: string | null;
}
export interface UserPromptChunk {
  type: "user_prompt";
  content: Json;
  uuid?: string;
  priority?: string;
}
export interface MessageStartChunk {
  type: "message_start";
  message_id: string;
  model: string | null;
  parent_tool_use_id: string | null;
  /** Input and cache tokens as the model reported them at the start; `null` when it did not. */
  usage: Json;
}
export interface TextDeltaChunk {
  type: "text_delta";
  message_id: string;
  index: number;
  text: string;
  parent_tool_use_id: string | null;
}
export interface ThinkingDeltaChunk {
  type: "thinking_delta";
  message_id: string;
  index: number;
  thinking: string;
  parent_tool_use_id?: string;
}
export interface ThinkingRedactedChunk {
  type: "thinking_redacted";
  message_id: string;
  index: number;
  parent_tool_use_id?: string;
}
export interface CitationChunk {
  type: "citation";
  message_id: string;
  index: number;
  citation: Json;
  parent_tool_use_id?: string;
}
export interface ToolUseChunk {
  type: "tool_use";
  id: string;
  name: string;
  message_id: string;
  index: number;
  parent_tool_use_id: string | null;
  complete: boolean;
  /** `null` until `complete`. */
  input: Json;
  server?: true;
}
export interface ToolInputDeltaChunk {
  type: "tool_input_delta";
  id: string;
  partial_json: string;
}
export interface MessageDeltaChunk {
  type: "message_delta";
  message_id: string;
  stop_reason: string | null;
  usage: Json;
}
export interface MessageStopChunk {
  type: "message_stop";
  message_id: string;
  abandoned_from_index?: number;
}
export interface ToolStatusChunk {
  type: "tool_status";
  id: string;
  status: ToolStatusName;
  reason?: StatusReason;
}
export interface ToolStartChunk {
  type: "tool_start";
  id: string;
  name: string | null;
  elapsed_s: number;
  parent_tool_use_id?: string;
}
export interface ToolProgressChunk {
  type: "tool_progress";
  id: string;
  elapsed_s: number;
}
export interface ToolHeartbeatChunk {
  type: "tool_heartbeat";
  id: string;
  elapsed_s: number;
  seq: number;
}
export interface ToolResultChunk {
  type: "tool_result";
  id: string;
  content: Json;
  is_error: boolean;
  server?: true;
  parent_tool_use_id?: string;
}
export interface UserTextChunk {
  type: "user_text";
  text: string;
  parent_tool_use_id: string | null;
}
export interface PermissionRequestChunk {
  type: "permission_request";
  request_id: string;
  tool_use_id: string | null;
  tool_name: string;
  input: Json;
  suggestions: Json;
  blocked_path: string | null;
  deadline_ms: number | null;
}
export interface PermissionResolvedChunk {
  type: "permission_resolved";
  request_id: string;
  tool_use_id: string | null;
  behavior: "allow" | "deny";
  reason: "host" | "timeout" | "cancelled";
}
export interface HookRequestChunk {
  type: "hook_request";
  request_id: string;
  callback_id: string;
  event: string | null;
  tool_use_id: string | null;
  input: Json;
  deadline_ms: number | null;
}
export interface McpToolCallChunk {
  type: "mcp_tool_call";
  request_id: string;
  server: string;
  tool: string;
  arguments: Json;
  tool_use_id: string | null;
  deadline_ms: number | null;
}
export interface McpToolCancelledChunk {
  type: "mcp_tool_cancelled";
  request_id: string;
  cancel_request_id: string;
  tool_use_id: string | null;
  reason: string | null;
}
export interface McpRequestChunk {
  type: "mcp_request";
  request_id: string;
  server: string;
  method: string | null;
}
export interface RequestCancelledChunk {
  type: "request_cancelled";
  request_id: string;
}
/** A `system` frame other than `init`, with every field of the frame. */
/**
 * A `system` frame other than `init`: its subtype and every field of the frame. The subtypes of
 * the Agent SDK's wire are typed below (task and hook lifecycle, compact boundaries, API retries
 * with their delay, …); any other subtype is a `StatusChunkOf<string>` with its fields as sent.
 */
export type StatusChunk =
  | ApiRetryStatus
  | CompactBoundaryStatus
  | StatusStatus
  | TaskStartedStatus
  | TaskProgressStatus
  | TaskUpdatedStatus
  | TaskNotificationStatus
  | BackgroundTasksChangedStatus
  | HookStartedStatus
  | HookProgressStatus
  | HookResponseStatus
  | SessionStateChangedStatus
  | PermissionDeniedStatus
  | NotificationStatus
  | InformationalStatus
  | ThinkingTokensStatus
  | ModelRefusalFallbackStatus
  | ElicitationCompleteStatus
  | LocalCommandOutputStatus
  | StatusChunkOf<string>;
/** A `status` chunk of one subtype, with every field of the frame. */
export interface StatusChunkOf<S extends string> {
  type: "status";
  subtype: S;
  session_id?: string;
  uuid?: string;
  [field: string]: Json | undefined;
}
/** The CLI waits before retrying the model: attempt `attempt` of `max_retries`, in `retry_delay_ms`. */
export interface ApiRetryStatus extends StatusChunkOf<"api_retry"> {
  attempt: number;
  max_retries: number;
  retry_delay_ms: number;
  error_status: number | null;
  error: Json;
}
/** The conversation was compacted (`auto` or `manual`) from `pre_tokens` tokens. */
export interface CompactBoundaryStatus extends StatusChunkOf<"compact_boundary"> {
  compact_metadata: { trigger: "auto" | "manual"; pre_tokens: number; [field: string]: Json };
}
/** What the CLI is doing (`requesting`, `compacting`, …), or its permission mode changed. */
export interface StatusStatus extends StatusChunkOf<"status"> {
  status: string | null;
  permissionMode?: string;
}
/** A background task or sub-agent started. */
export interface TaskStartedStatus extends StatusChunkOf<"task_started"> {
  task_id: string;
  tool_use_id?: string;
  description: string;
  subagent_type?: string;
}
/** A task's progress: tokens, tool uses, time so far. */
export interface TaskProgressStatus extends StatusChunkOf<"task_progress"> {
  task_id: string;
  tool_use_id?: string;
  description: string;
  usage: { total_tokens: number; tool_uses: number; duration_ms: number; [field: string]: Json };
  last_tool_name?: string;
  summary?: string;
}
/** A task's state changed. */
export interface TaskUpdatedStatus extends StatusChunkOf<"task_updated"> {
  task_id: string;
  patch: Json;
}
/** A task ended: `completed`, `failed` or `stopped`, with a summary. */
export interface TaskNotificationStatus extends StatusChunkOf<"task_notification"> {
  task_id: string;
  tool_use_id?: string;
  status: "completed" | "failed" | "stopped";
  output_file: string;
  summary: string;
}
/** The set of background tasks changed. */
export interface BackgroundTasksChangedStatus extends StatusChunkOf<"background_tasks_changed"> {
  tasks: Json[];
}
/** A hook (a settings hook, not the embedder's) started. */
export interface HookStartedStatus extends StatusChunkOf<"hook_started"> {
  hook_id: string;
  hook_name: string;
  hook_event: string;
}
/** A running hook's output so far. */
export interface HookProgressStatus extends StatusChunkOf<"hook_progress"> {
  hook_id: string;
  hook_name: string;
  hook_event: string;
  stdout: string;
  stderr: string;
  output: string;
}
/** A hook ended. */
export interface HookResponseStatus extends StatusChunkOf<"hook_response"> {
  hook_id: string;
  hook_name: string;
  hook_event: string;
  output: string;
  stdout: string;
  stderr: string;
  exit_code?: number;
  outcome: "success" | "error" | "cancelled";
}
/** The session is `running`, `idle`, or `requires_action` (waiting on the host). */
export interface SessionStateChangedStatus extends StatusChunkOf<"session_state_changed"> {
  state: "running" | "idle" | "requires_action";
}
/** A tool call was denied without asking (a rule, a mode). */
export interface PermissionDeniedStatus extends StatusChunkOf<"permission_denied"> {
  tool_name: string;
  tool_use_id: string;
  message: string;
  decision_reason?: string;
}
/** A notification for the user. */
export interface NotificationStatus extends StatusChunkOf<"notification"> {
  key: string;
  text: string;
  priority: "low" | "medium" | "high" | "immediate";
}
/** An informational message for the user. */
export interface InformationalStatus extends StatusChunkOf<"informational"> {
  content: string;
  level: "info" | "notice" | "suggestion" | "warning";
}
/** How many tokens the model has thought so far (an estimate). */
export interface ThinkingTokensStatus extends StatusChunkOf<"thinking_tokens"> {
  estimated_tokens: number;
  estimated_tokens_delta: number;
}
/** The model refused and the CLI fell back to another model. */
export interface ModelRefusalFallbackStatus extends StatusChunkOf<"model_refusal_fallback"> {
  original_model: string;
  fallback_model: string;
  content: string;
}
/** An MCP server's URL elicitation was completed. */
export interface ElicitationCompleteStatus extends StatusChunkOf<"elicitation_complete"> {
  mcp_server_name: string;
  elicitation_id: string;
}
/** The output of a local slash command. */
export interface LocalCommandOutputStatus extends StatusChunkOf<"local_command_output"> {
  content: string;
}
export interface TurnCompleteChunk {
  type: "turn_complete";
  subtype: string | null;
  is_error: boolean;
  result: string | null;
  stop_reason: string | null;
  terminal_reason: string | null;
  num_turns: number | null;
  duration_ms: number | null;
  usage: Json;
  total_cost_usd: Json;
  session_id: string | null;
  permission_denials: Json;
  errors: Json;
}
export interface ControlResultChunk {
  type: "control_result";
  request_id: string;
  subtype: string | null;
  ok: boolean;
  response?: Json;
  error?: string;
  error_code?: string;
}
export interface ReadyChunk {
  type: "ready";
  claude_code_version: string | null;
  models: Json;
  commands: Json;
}
export interface ToolWaitChunk extends ToolWait {
  type: "tool_wait";
}
export interface ErrorChunk {
  type: "error";
  kind: ErrorKind;
  detail: string;
  excerpt?: string;
  bytes?: number;
}
/** An MCP server asks the user for input (`elicitation`). */
export interface ElicitationRequestChunk {
  type: "elicitation_request";
  request_id: string;
  server: string;
  message: string;
  mode: "form" | "url" | (string & {}) | null;
  url: string | null;
  elicitation_id: string | null;
  /** The JSON Schema of the content asked for (`form` mode). */
  requested_schema: Json;
  title: string | null;
  display_name: string | null;
  description: string | null;
  /** The running tool of that server it holds up, when there is one. */
  tool_use_id: string | null;
  deadline_ms: number | null;
}
/** The CLI asks the host to render a dialog of a kind it declared (`request_user_dialog`). */
export interface DialogRequestChunk {
  type: "dialog_request";
  request_id: string;
  dialog_kind: string;
  payload: Json;
  tool_use_id: string | null;
  deadline_ms: number | null;
}
/** An elicitation or a dialog was settled. */
export interface RequestResolvedChunk {
  type: "request_resolved";
  request_id: string;
  reason: "host" | "timeout" | "default";
  /** The answer the CLI got. */
  response: Json;
}
/** The account's rate limit (`rate_limit_event`). */
export interface RateLimitChunk {
  type: "rate_limit";
  status: "allowed" | "allowed_warning" | "rejected" | (string & {});
  /** When the limit resets, in Unix seconds. */
  resets_at: number | null;
  rate_limit_type: string | null;
  /** How much of the limit is used, 0 to 1. */
  utilization: number | null;
  /** Every field of the wire's `rate_limit_info`. */
  info: Json;
}
/** A summary of tool calls (`tool_use_summary`). */
export interface ToolUseSummaryChunk {
  type: "tool_use_summary";
  summary: string;
  tool_use_ids: string[];
}
/** The CLI's authentication progress (`auth_status`). */
export interface AuthStatusChunk {
  type: "auth_status";
  authenticating: boolean;
  output: string[];
  error: string | null;
}
/** A prompt the user might send next (`prompt_suggestion`). */
export interface PromptSuggestionChunk {
  type: "prompt_suggestion";
  suggestion: string;
}
/** The conversation was reset (`conversation_reset`). */
export interface ConversationResetChunk {
  type: "conversation_reset";
  new_conversation_id: string;
  trigger: "clear" | "plan_mode_exit" | "fresh_session" | "onboarding" | (string & {}) | null;
}
export interface UnknownChunk {
  type: "unknown";
  message: Json;
}
export interface ProcessExitChunk {
  type: "process_exit";
  code: number | null;
  signal: number | null;
}

/** One thing that happened on the wire; discriminate on `type`. */
export type Chunk =
  | SessionInitChunk
  | UserPromptChunk
  | MessageStartChunk
  | TextDeltaChunk
  | ThinkingDeltaChunk
  | ThinkingRedactedChunk
  | CitationChunk
  | ToolUseChunk
  | ToolInputDeltaChunk
  | MessageDeltaChunk
  | MessageStopChunk
  | ToolStatusChunk
  | ToolStartChunk
  | ToolProgressChunk
  | ToolHeartbeatChunk
  | ToolResultChunk
  | UserTextChunk
  | PermissionRequestChunk
  | PermissionResolvedChunk
  | HookRequestChunk
  | McpToolCallChunk
  | McpToolCancelledChunk
  | McpRequestChunk
  | ElicitationRequestChunk
  | DialogRequestChunk
  | RequestResolvedChunk
  | RequestCancelledChunk
  | StatusChunk
  | RateLimitChunk
  | ToolUseSummaryChunk
  | AuthStatusChunk
  | PromptSuggestionChunk
  | ConversationResetChunk
  | TurnCompleteChunk
  | ControlResultChunk
  | ReadyChunk
  | ToolWaitChunk
  | ErrorChunk
  | UnknownChunk
  | ProcessExitChunk;

export type ChunkType = Chunk["type"];

/** What one call produced: chunks for the UI and, in driver mode, lines for the CLI's stdin. */
export interface Step {
  chunks: Chunk[];
  /** Whole lines (each ending in "\n") to write to the CLI's stdin, in order. */
  stdin: string[];
}
/** A command that sent a control request; its answer arrives as a `control_result` chunk. */
export interface RequestStep extends Step {
  requestId: string;
}
export interface InitializeStep extends RequestStep {
  /** The callback id given to each hook matcher, in order. */
  callbackIds: string[];
}
/** An answer to a request of the CLI: `dropped` when it was already settled. */
export interface ResponseStep extends Step {
  delivery: "sent" | "dropped";
}

export interface Deadline {
  atMs: number;
  reason:
    | { kind: "permission" | "hook" | "mcp_call" | "elicitation" | "dialog"; requestId: string }
    | { kind: "request"; requestId: string; subtype: string }
    | { kind: "other" };
  description: string;
}

export interface McpToolDefinition {
  name: string;
  description?: string;
  inputSchema: Json;
  annotations?: Json;
  _meta?: Json;
  [field: string]: Json | undefined;
}
export interface McpServerDefinition {
  name: string;
  version?: string;
  tools?: McpToolDefinition[];
}
export interface SessionOptions {
  /** The longest line accepted, in bytes (default 32 MiB). */
  lineLimit?: number;
  /** Seed for request ids. */
  seed?: number;
  timeouts?: {
    permissionMs?: number;
    hookMs?: number;
    mcpCallMs?: number;
    requestMs?: number;
    /** An elicitation not answered in time is cancelled. */
    elicitationMs?: number;
    /** A dialog not answered in time is dismissed. */
    dialogMs?: number;
  };
  /** In-process MCP servers whose handshake a driver session answers itself. */
  mcpServers?: McpServerDefinition[];
  /**
   * The embedder answers elicitations itself (`respondElicitation`); otherwise a driver
   * session declines each at once, as the official SDKs do with no handler.
   */
  elicitations?: boolean;
}
export interface InitializeOptions {
  hooks?: { event: string; matcher?: string | null; timeoutS?: number }[];
  /** More fields of the `initialize` request (`agents`, `systemPrompt`, …). */
  extra?: { [field: string]: Json };
}
export interface UserMessage {
  content: string | Json[];
  uuid?: string;
  priority?: "now" | "next" | "later";
  extra?: { [field: string]: Json };
}
export type PermissionDecision =
  | { behavior: "allow"; updatedInput?: Json; updatedPermissions?: Json[] }
  | { behavior: "deny"; message: string; interrupt?: boolean };
type JsonObject = { [field: string]: Json };
/** A control request from the host to the CLI: every subtype a host sends, with its fields. */
export type HostRequest =
  | { subtype: "interrupt"; cancel_queued?: boolean }
  | { subtype: "set_permission_mode"; mode: string }
  | { subtype: "set_model"; model: string | null }
  | {
      subtype: "set_max_thinking_tokens";
      max_thinking_tokens: number | null;
      thinking_display?: "summarized" | "omitted" | "highlights";
    }
  | { subtype: "rename_session"; title: string; source?: "remote" | "host"; session_id?: string }
  | { subtype: "set_color"; color: string }
  | { subtype: "mcp_status"; liveReply?: boolean }
  | { subtype: "get_context_usage"; detail?: "summary" | "full" }
  | { subtype: "get_session_cost" }
  | { subtype: "list_models" }
  | { subtype: "get_usage"; skip_behaviors?: boolean }
  | { subtype: "get_binary_version" }
  | {
      subtype: "mcp_call";
      tool: string;
      arguments?: JsonObject;
      expires_at?: string;
      timeout_ms?: number;
      result_not_for_model?: boolean;
      check_permissions?: boolean;
      input_files?: Json;
      output_files?: Json;
    }
  | { subtype: "file_suggestions"; query: string }
  | { subtype: "rewind_files"; user_message_id: string; dry_run?: boolean }
  | { subtype: "cancel_async_message"; message_uuid: string }
  | { subtype: "read_file"; path: string; max_bytes?: number; encoding?: "utf-8" | "base64" }
  | { subtype: "seed_read_state"; path: string; mtime: number }
  | { subtype: "mcp_set_servers"; servers: JsonObject }
  | {
      subtype: "register_repo_root";
      directory: string;
      reload_claude_md?: boolean;
      reload_plugins?: boolean;
      reload_skills?: boolean;
    }
  | {
      subtype: "reload_plugins";
      hold_on_cache_impact?: boolean;
      add_plugins?: Json[];
      refuse_if_busy?: boolean;
    }
  | { subtype: "reload_skills" }
  | { subtype: "reload_output_styles" }
  | { subtype: "mcp_reconnect"; serverName: string }
  | { subtype: "mcp_toggle"; serverName: string; enabled: boolean }
  | { subtype: "set_has_subscribers"; has_subscribers: boolean | null }
  | { subtype: "stop_task"; task_id: string }
  | { subtype: "background_tasks"; tool_use_id?: string }
  | { subtype: "get_task_output"; task_id: string }
  | { subtype: "apply_flag_settings"; settings: JsonObject }
  | { subtype: "get_settings" }
  | { subtype: "get_hooks_listing" }
  | { subtype: "update_settings"; source: "localSettings" | "userSettings"; settings: JsonObject }
  | { subtype: "list_permission_rules" }
  | { subtype: "mcp_read_resource"; serverName: string; uri: string };
/** MCP's `ElicitResult`. */
export type ElicitationAnswer =
  | { action: "accept"; content?: { [field: string]: Json } }
  | { action: "decline" | "cancel" };
export type DialogAnswer = { behavior: "completed"; result: Json } | { behavior: "cancelled" };
export interface McpCallResult {
  content: Json[];
  isError?: boolean;
}

/** Bytes or text; bytes may be split anywhere, even inside a UTF-8 character. */
export type Input = string | Uint8Array | ArrayBuffer | ArrayBufferView;

/** One CLI process's protocol engine. Every `nowMs` is milliseconds on the caller's clock. */
export class Session {
  constructor(mode: "driver" | "observer", options?: SessionOptions);
  static driver(options?: SessionOptions): Session;
  static observer(options?: SessionOptions): Session;
  readonly mode: "driver" | "observer";
  readonly turnRunning: boolean;
  readonly sessionId: string | null;

  push(data: Input, nowMs: number): Step;
  pushStdin(data: Input, nowMs: number): Step;
  endStdout(nowMs: number): Step;
  observeOut(message: string | object, nowMs: number): Step;
  observeIn(message: string | object, nowMs: number): Step;
  processExit(exit: { code?: number | null; signal?: number | null }, nowMs: number): Step;
  handleTimeout(nowMs: number): Step;
  nextDeadline(): Deadline | null;
  toolWait(): ToolWait;
  toolStatuses(): Record<string, ToolStatusName>;

  initialize(options: InitializeOptions | undefined, nowMs: number): InitializeStep;
  sendUserMessage(message: string | UserMessage, nowMs: number): Step;
  respondPermission(requestId: string, decision: PermissionDecision, nowMs: number): ResponseStep;
  respondHook(requestId: string, output: Json, nowMs: number): ResponseStep;
  respondMcp(requestId: string, result: McpCallResult, nowMs: number): ResponseStep;
  respondElicitation(requestId: string, answer: ElicitationAnswer, nowMs: number): ResponseStep;
  respondUserDialog(requestId: string, answer: DialogAnswer, nowMs: number): ResponseStep;
  respondError(requestId: string, message: string, nowMs: number): ResponseStep;
  interrupt(nowMs: number): RequestStep;
  setModel(model: string | null, nowMs: number): RequestStep;
  setPermissionMode(mode: string, nowMs: number): RequestStep;
  /** A typed control request; its answer comes as a `control_result` chunk. */
  request(request: HostRequest, nowMs: number): RequestStep;
  sendControl(subtype: string, fields: { [field: string]: Json } | undefined, nowMs: number): RequestStep;
  free(): void;
}

/** A transcript replayed piece by piece. */
export class Replayer {
  constructor();
  push(data: Input): Chunk[];
  finish(): Chunk[];
  /** The `t_ms` of the last transcript line read. */
  readonly nowMs: number;
  toolWait(): ToolWait;
  free(): void;
}

/** Replays a whole transcript (JSONL: `{"dir","t_ms","msg"}` lines, or bare stream-json). */
export function replayTranscript(transcript: Input): Chunk[];

/** Loads the WebAssembly module (browsers); a no-op in Node, where it loads on import. */
export function init(moduleOrPath?: string | URL | Request | Response | BufferSource | WebAssembly.Module): Promise<void>;
