// `ccwire/node`: run the Claude Code CLI from Node through the package's Session.

import type {
  Chunk,
  DialogAnswer,
  DialogRequestChunk,
  ElicitationAnswer,
  ElicitationRequestChunk,
  HostRequest,
  Json,
  McpCallResult,
  PermissionDecision,
  PermissionRequestChunk,
  SessionOptions,
  UserMessage,
} from "./index.js";

/** The CLI's settings: each becomes the flag ccwire's Rust `ClaudeOptions` gives it. */
export interface ClaudeSettings {
  model?: string;
  maxTurns?: number;
  /** A string replaces Claude Code's system prompt; `{append}` adds to it (any size: it goes in `initialize`). */
  systemPrompt?: string | { append: string };
  allowedTools?: string[];
  disallowedTools?: string[];
  /** The built-in tools offered (`[]`: none). */
  tools?: string[];
  permissionMode?: "default" | "acceptEdits" | "plan" | "bypassPermissions" | (string & {});
  /** Ask permission over the control channel (set when `canUseTool` is). */
  permissionPrompts?: boolean;
  /** External MCP servers by name: `{type: "stdio", command, args, env}`, `{type: "http" | "sse", url, headers}`. */
  mcpServers?: { [name: string]: { [field: string]: Json } };
  strictMcpConfig?: boolean;
  /** A settings file, or the settings themselves. */
  settings?: string | { [field: string]: Json };
  /** Which settings files load, with their hooks, skills, plugins and CLAUDE.md files (default: none, as the Agent SDKs). */
  settingSources?: ("user" | "project" | "local")[];
  addDirs?: string[];
  fallbackModel?: string;
  betas?: string[];
  maxBudgetUsd?: number;
  thinking?: "adaptive" | "disabled" | { budgetTokens: number };
  effort?: "low" | "medium" | "high" | "xhigh" | "max" | (string & {});
  /** Custom sub-agents by name (sent in `initialize`). */
  agents?: { [name: string]: Json };
  /**
   * Structured output: every turn ends with an object this JSON Schema (object root) validates,
   * in the `turn_complete` chunk's `structured_output` (sent in `initialize`).
   */
  jsonSchema?: { [field: string]: Json };
  includePartialMessages?: boolean;
  resume?: string;
  continue?: boolean;
  forkSession?: boolean;
  /** The id (a UUID) of the new session, its transcript's name (`--session-id`). */
  sessionId?: string;
  /**
   * Every line the CLI adds to its session transcript comes as a `transcript_mirror` chunk
   * too (`--session-mirror`): store them to resume the conversation elsewhere.
   */
  sessionMirror?: boolean;
  extraArgs?: string[];
}

export interface ToolDefinition {
  name: string;
  description?: string;
  inputSchema?: Json;
  handler(args: Json): McpCallResult | Promise<McpCallResult>;
}

export interface HookDefinition {
  event: string;
  matcher?: string | null;
  timeoutS?: number;
  handler(input: Json): Json | Promise<Json>;
}

export interface ClientOptions extends ClaudeSettings {
  /** The executable (default `$CCWIRE_CLAUDE`, else `claude` on PATH). */
  claude?: string;
  cwd?: string;
  /** Variables for the CLI's environment; `null` removes one. */
  env?: { [name: string]: string | null };
  canUseTool?(request: PermissionRequestChunk): PermissionDecision | Promise<PermissionDecision>;
  hooks?: HookDefinition[];
  /** In-process MCP servers by name; the model sees their tools as `mcp__<server>__<tool>`. */
  toolServers?: { [server: string]: ToolDefinition[] };
  /** Answers MCP servers' elicitations; without it each is declined at once. */
  onElicitation?(request: ElicitationRequestChunk): ElicitationAnswer | Promise<ElicitationAnswer>;
  /** Renders the dialogs of `dialogKinds`; without it a dialog is left unanswered. */
  onUserDialog?(request: DialogRequestChunk): DialogAnswer | Promise<DialogAnswer>;
  dialogKinds?: string[];
  timeouts?: SessionOptions["timeouts"];
  /** More fields of the `initialize` request (`agents`, `forwardSubagentText`, …). */
  initialize?: { [field: string]: Json };
  initializeTimeoutMs?: number;
  /**
   * Write a transcript of the session to this file: every wire line, both directions, in the
   * format of `ccwire record` and the Rust client's `record` (replay it with
   * `replayTranscript`, play it as the CLI with `ccwire/play`).
   */
  record?: string;
}

/**
 * The CLI's arguments for these settings: the flags, in the order, of the Rust `ClaudeOptions`
 * and `ccwire serve` (one builder). Throws an `Error` naming a field of the wrong type.
 */
export function claudeArgs(options?: ClaudeSettings & { sdkMcpServers?: string[] }): string[];

/**
 * The fields of the CLI's `initialize` request for these settings: `systemPrompt` or
 * `appendSystemPrompt`, `agents`, `jsonSchema` — the values `claudeArgs` leaves off the command
 * line, which has a size limit. Throws an `Error` naming a field of the wrong type.
 */
export function claudeInitialize(options?: ClaudeSettings): { [field: string]: Json };

export class ProcessExitedError extends Error {
  readonly exit: { code: number | null; signal: string | null };
  readonly stderr: string;
  readonly result: string | null;
}

export class RefusedError extends Error {
  readonly subtype: string;
  readonly error: string;
}

export type ClientEvent = { chunk: Chunk; error?: undefined } | { error: Error; end: true; chunk?: undefined };

export class Client {
  static connect(options?: ClientOptions): Promise<Client>;
  readonly pid: number;
  /** The CLI's answer to `initialize`. */
  readonly serverInfo: Json;
  /** Sends a prompt and yields the turn's chunks up to its `turn_complete`. */
  query(message: string | UserMessage): AsyncGenerator<Chunk, void, undefined>;
  send(message: string | UserMessage): void;
  nextEvent(): Promise<ClientEvent>;
  interrupt(): Promise<Json>;
  setModel(model: string | null): Promise<Json>;
  /** Resolves with `{mode}`, the mode now in effect (not always the one asked). */
  setPermissionMode(mode: string): Promise<{ mode?: string } | null>;
  request(request: HostRequest): Promise<Json>;
  respondTool(requestId: string, result: McpCallResult): void;
  close(graceMs?: number): Promise<{ code: number | null; signal: string | null }>;
}
