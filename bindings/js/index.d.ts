// Types of the `ccwire` package. Chunks are the objects of docs/CHUNKS.md: a `type` tag and
// snake_case fields; parts taken from the wire are plain JSON values.

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

// The chunk types are generated from the Rust ones (chunks.d.ts: each chunk type, `ChunkOf`,
// `ToolUseChunk` and the others by name); the status chunk is typed here per subtype.
import type { Chunk as AnyChunk, ToolStatusName, ToolWait } from "./chunks.js";
export * from "./chunks.js";

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

/** One thing that happened on the wire; discriminate on `type`. */
export type Chunk = Exclude<AnyChunk, { type: "status" }> | StatusChunk;

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
      /** The tool's error result as a success with `isError: true` (CLI capability `mcp_call_soft_error_result_v1`). */
      soft_error_result?: boolean;
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
  | { subtype: "mcp_read_resource"; serverName: string; uri: string }
  | { subtype: "prompt_draft_activity" };
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
