// Types of `ccwire/conversation`.

import type { Chunk, Input, Json, McpCallResult } from "./index.js";

export type ApiName = "anthropic" | "openai" | "responses";
export interface CanonicalBlock {
  type: "text" | "image" | "tool_use" | "tool_result" | "other";
  [field: string]: Json | undefined;
}
/** A message in canonical form. */
export interface CanonicalMessage {
  role: "user" | "assistant";
  content: CanonicalBlock[];
}
/** A request body in canonical form (the gateway's view of it). */
export interface CanonicalRequest {
  api: ApiName;
  model: string;
  stream: boolean;
  max_tokens: number | null;
  include_usage: boolean;
  tool_choice: { type: "auto" | "any" | "none" } | { type: "tool"; name: string };
  system: string | null;
  messages: CanonicalMessage[];
  tools: { name: string; description: string; input_schema: Json }[];
  /** Messages up to the last assistant message: the history a previous response produced. */
  history_len: number;
  /** SHA-256 (hex) of that history, namespaced by tenant; `null` before any assistant message. */
  history_hash: string | null;
  tool_signature: string;
  ignored: string[];
  /** Responses API: the stored response the request continues (cleared once the gateway has put its history in front). */
  previous_response_id: string | null;
  /** Responses API: whether the response is to be stored (`false` in the other APIs). */
  store: boolean;
  /** Whether the response shows the model's thinking (the `showThinking` of its `ResponseEncoder`). */
  show_thinking: boolean;
}
/** A request the gateway would refuse. */
export class ApiRequestError extends Error {
  readonly status: number;
  /** The error body in the API's own shape. */
  readonly body: Json;
}
export function canonicalRequest(
  body: string | object,
  options: { api: ApiName; tenant?: string },
): CanonicalRequest;
/** Which gateway must serve a request: any (`new`), or the one that claimed `key`. */
export function routeKey(
  body: string | object,
  options: { api: ApiName; tenant?: string },
): { kind: "new" } | { kind: "conversation"; key: string };
export function historyHash(
  body: string | object,
  options: { api: ApiName; tenant?: string },
): string | null;

/** What a response encoder needs to know about the request. */
export interface ResponseEncoderOptions<A extends ApiName = ApiName> {
  /** The API to answer in. */
  api: A;
  /** Whether to produce SSE frames. */
  stream: boolean;
  /** The model name to report (the one the client asked for). */
  model: string;
  /** The response id; by default the first model message's id (OpenAI: with `chatcmpl-` before it). */
  id?: string;
  /** Unix seconds for OpenAI's `created`; by default now. */
  created?: number;
  /** OpenAI `stream_options.include_usage`: `usage: null` on every chunk, then a usage chunk. */
  includeUsage?: boolean;
  /** Client tools: the name the model calls them by (`mcp__client__lookup`) → the client's own name (`lookup`). */
  clientTools?: Record<string, string>;
  /** Also treat tools whose name starts with this prefix as client tools, named by the rest. */
  clientToolPrefix?: string;
  /** Responses API: the `previous_response_id` the request continued, echoed in the response. */
  previousResponseId?: string | null;
  /** Responses API: whether the response is stored, echoed in the response. */
  store?: boolean;
  /** Show the model's thinking: Anthropic `thinking` blocks, Chat Completions `reasoning_content`, Responses `reasoning` items (default false). */
  showThinking?: boolean;
}
/** The HTTP statuses of API errors. */
export type ApiErrorStatus = 400 | 401 | 402 | 403 | 404 | 405 | 408 | 413 | 415 | 422 | 429 | 500 | 503 | 529;
/** Why a response failed. */
export interface ResponseError {
  status: ApiErrorStatus;
  message: string;
  /** The request field at fault (OpenAI `param`). */
  param: string | null;
  /** When to try again, in seconds (the `Retry-After` header), when the model's API said. */
  retryAfter: number | null;
  /** The error body in the encoder's API shape: the HTTP body, or the data of the stream's error event. */
  body: Json;
}
/** How a response ended. */
export type ResponseOutcome =
  /** The model finished; `stopReason` in the Anthropic spelling (`end_turn`, `max_tokens`, …). */
  | { kind: "finished"; stopReason: string }
  /** The model called client tools: the response carries them and the turn waits for their results. */
  | { kind: "tool_calls" }
  /** The turn failed, or `fail` was called. */
  | { kind: "failed"; error: ResponseError };
/** A client tool call in a response. */
export interface ClientToolCall {
  /** The tool_use id. */
  id: string;
  /** The client's name of the tool. */
  name: string;
  input: Json;
}
/** An Anthropic Messages API response body. */
export interface AnthropicMessage {
  id: string;
  type: "message";
  role: "assistant";
  model: string;
  content: (
    | { type: "text"; text: string }
    | { type: "tool_use"; id: string; name: string; input: Json }
  )[];
  stop_reason: string;
  stop_sequence: null;
  usage: { input_tokens: number; output_tokens: number };
}
/** An OpenAI Chat Completions response body. */
export interface ChatCompletion {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  choices: {
    index: 0;
    message: {
      role: "assistant";
      content: string | null;
      refusal: null;
      tool_calls?: { id: string; type: "function"; function: { name: string; arguments: string } }[];
    };
    logprobs: null;
    finish_reason: "stop" | "length" | "tool_calls" | "content_filter";
  }[];
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}
/** An OpenAI Responses API output item the encoder produces. */
export type ResponsesOutputItem =
  | {
      id: string;
      type: "message";
      status: "in_progress" | "completed";
      role: "assistant";
      content: { type: "output_text"; text: string; annotations: []; logprobs: [] }[];
    }
  | {
      id: string;
      type: "function_call";
      status: "in_progress" | "completed";
      call_id: string;
      name: string;
      arguments: string;
    };
/** An OpenAI Responses API response body. */
export interface ResponsesResponse {
  id: string;
  object: "response";
  created_at: number;
  status: "completed" | "incomplete" | "failed" | "in_progress";
  error: { code: string; message: string } | null;
  incomplete_details: { reason: "max_output_tokens" | "content_filter" } | null;
  model: string;
  output: ResponsesOutputItem[];
  previous_response_id: string | null;
  store: boolean;
  usage: {
    input_tokens: number;
    input_tokens_details: { cached_tokens: number };
    output_tokens: number;
    output_tokens_details: { reasoning_tokens: number };
    total_tokens: number;
  } | null;
  [field: string]: Json | undefined;
}
/**
 * One Anthropic Messages or OpenAI Chat Completions response built from the chunks of a turn:
 * SSE frames as the chunks come when streaming, the JSON body once the response is complete.
 * The response is complete when a model message that calls client tools ends, or the turn ends.
 */
export class ResponseEncoder<A extends ApiName = ApiName> {
  constructor(options: ResponseEncoderOptions<A>);
  /** Takes the next chunk of the turn; returns the SSE frames it produced (none when not streaming, or once complete). */
  push(chunk: Chunk): string[];
  /** Ends the response with an error (default status 500); returns the SSE frames (none before the first frame). */
  fail(message: string, status?: ApiErrorStatus): string[];
  /** A keep-alive frame: Anthropic's `ping` event, an SSE comment for Chat Completions, a `response.in_progress` event for the Responses API once started. */
  ping(): string;
  /** Whether any SSE frame has been produced: after that, errors go into the stream instead of an HTTP status. */
  readonly started: boolean;
  /** How the response ended, or `null` while it runs. */
  readonly outcome: ResponseOutcome | null;
  /** The client tool calls in the response, in order. */
  toolCalls(): ClientToolCall[];
  /** The non-streaming response body, once complete; `null` before, and after a failure. */
  body(): (A extends "anthropic" ? AnthropicMessage : A extends "openai" ? ChatCompletion : A extends "responses" ? ResponsesResponse : AnthropicMessage | ChatCompletion | ResponsesResponse) | null;
  /** The response as an assistant message in canonical form (what the next request's history hash covers). */
  message(): CanonicalMessage;
  /** Frees the WebAssembly memory now (it is also freed when the object is collected). */
  free(): void;
}
/** Settings of a `Gateway`; every one optional. */
export interface GatewayOptions {
  /** How long a held client tool call waits for the client's result (default 10 min). */
  heldCallTimeoutMs?: number;
  /** How long a session may sit without a request before it is closed (default 30 min). */
  idleTtlMs?: number;
  /** The most stored Responses API responses kept (default 10,000). */
  maxStoredResponses?: number;
  /** The most live CLI sessions; a request that needs one more gets a 429 (default 64). */
  maxSessions?: number;
  /** Built-in CLI tools the model may use (they run where the CLI runs); none by default. */
  enabledTools?: string[];
  /** The model for requests that name one the CLI does not know (`gpt-4o`). */
  defaultModel?: string;
  /** A keep-alive frame on a stream quiet this long (default 15 s). */
  pingEveryMs?: number;
  /** How long an interrupted turn may take to end before its session is closed (default 10 s). */
  settleGraceMs?: number;
  /** How long a new CLI may take to answer `initialize` (default 60 s). */
  startTimeoutMs?: number;
  /** For tests: ids (`resp_…`, `appr_…`) made from this number, the same every run and so
   * guessable; by default they are keyed with 32 random bytes. */
  seed?: number;
  /**
   * The wall clock at `nowMs = 0`, in Unix milliseconds, for OpenAI's `created`: 0 (the
   * default) when `nowMs` is `Date.now()`; `Date.now() - performance.now()` when it is
   * `performance.now()`.
   */
  unixEpochMs?: number;
  /** Report every change of the routing index as `claim` / `release` outputs (scale-out). */
  publishIndex?: boolean;
  /** The most responses produced at once (default 64); more wait in the queue. */
  maxConcurrent?: number;
  /** The most responses produced at once for one tenant (no limit by default). */
  maxConcurrentPerKey?: number;
  /** The most live CLI sessions of one tenant: a new conversation over it closes that tenant's
   * conversation least recently used that waits for nothing, else gets a 429. */
  maxSessionsPerKey?: number;
  /** The most requests waiting for a free turn (default 256). */
  maxQueue?: number;
  /** How long a request may wait in the queue (default 30 s). */
  queueTimeoutMs?: number;
  /** CLIs kept started ahead of need (default 0). */
  pool?: number;
  /** Enabled tools wait for a person's approval (`approvals`, `answerApproval`). */
  approvals?: boolean;
  /** How long an approval waits before the tool is denied (default 5 min). */
  approvalTimeoutMs?: number;
  /** Each tenant's CLI home, working and temporary directories go under this directory
   * (`CliSpec.tenant`; the host creates them); by default every CLI runs in the host's own. */
  tenantRoot?: string;
  /** One working directory for every tenant's CLI instead of its own. */
  sharedCwd?: string;
  /** The settings files the CLIs load (`user`, `project`, `local`); none by default. */
  settingSources?: ("user" | "project" | "local")[];
}
/** How to start a session's CLI. */
export interface CliSpec {
  /** The arguments after the executable. */
  args: string[];
  /** Variables to set. */
  env: [string, string][];
  /** Variables the CLI must not inherit. */
  env_remove: string[];
  /** The working directory (`null`: the host's). */
  cwd: string | null;
  /** The tenant's directories, to create (owner-only) before the start; `null` without
   * `tenantRoot`. */
  tenant: { id: string; home: string; work: string; tmp: string } | null;
  /** A transcript this CLI resumes (its arguments say `--resume`): before the start, write
   * `Gateway.writtenTranscript(spec)` at `path`. Only with `tenantRoot`. */
  resume?: {
    key: { tenant: string; id: string };
    path: string;
    system_prompt: string | null;
    /** The history the gateway wrote from a client's request. */
    written?: Json;
    /** The transcript ends with the client's tool results: the CLI goes on from them by
     * itself (the spec's `env` says so) and is sent no prompt. */
    rerun?: boolean;
  };
}
/** What the host must do, in order. */
export type GatewayOutput =
  | { type: "spawn"; session: number; spec: CliSpec }
  | { type: "write"; session: number; data: string }
  | { type: "close"; session: number }
  | { type: "respond"; request: number; status: number; headers: [string, string][] }
  | { type: "body"; request: number; data: string }
  | { type: "end"; request: number }
  /** Requests with this routing key belong to this gateway now (with `publishIndex`). */
  | { type: "claim"; key: string }
  /** They no longer do. */
  | { type: "release"; key: string }
  /** `POST` `body` to `url` with `headers` (a token count the model API makes); give the
   * answer's body to `handleFetched`. */
  | { type: "fetch"; request: number; url: string; headers: [string, string][]; body: string }
  /** An admin asked for a drain over HTTP: it has begun; exit once `isDrained`. */
  | { type: "drain_requested" }
  /** Delete this directory and all it holds once the CLIs closed before it have exited: a
   * deleted Managed Agents session's own working directory (with `tenantRoot`). */
  | { type: "remove_dir"; path: string };
/** When the gateway wants `handleTimeout`, and why (in words). */
export interface GatewayDeadline {
  atMs: number;
  reason: string;
}
/** A permission request waiting for a person. */
export interface Approval {
  id: string;
  tool_name: string;
  input: Json;
  tool_use_id: string | null;
  /** The path the tool was refused, relative to the tenant's own directory (`work/…`,
   * `home/…`, `tmp/…`) when it lies there (with `tenantRoot`); else as the CLI gave it. */
  blocked_path: string | null;
  /** Permission updates the CLI suggests (`remember: true` applies them). */
  suggestions: Json;
  /** The conversation it belongs to: its CLI session's id, the console's conversation id. */
  conversation: string;
  created_at_ms: number;
  expires_at_ms: number;
}
/** A person's answer to an approval. */
export interface ApprovalAnswer {
  behavior: "allow" | "deny";
  /** Told to the model when denied. */
  message?: string;
  /** The input to run the tool with instead. */
  updated_input?: { [key: string]: Json };
  /** Apply the CLI's suggested permission updates. */
  remember?: boolean;
}
/** The HTTP face of a `Gateway`, as `ccwire serve`'s options set it. */
export interface GatewayHttpOptions {
  /** API keys (`x-api-key` or `Authorization: Bearer`); none: every caller is one tenant. */
  apiKeys?: string[];
  /** The key `POST /admin/drain` needs; without one it is refused. */
  adminKey?: string;
  /** Web origins whose pages may use the gateway; none by default. */
  allowOrigins?: string[];
  /** Host names accepted in `Host` on a loopback listener besides loopback ones. */
  allowHosts?: string[];
  /** The largest request body, in bytes (default 32 MiB). */
  maxBody?: number;
  /** How long running turns may take to finish on `POST /admin/drain` (default 30 s). */
  drainGraceMs?: number;
  /** The listener's address, for messages (default `127.0.0.1`). */
  listener?: string;
  /** Whether the listener is loopback (default true); otherwise `apiKeys` are required. */
  loopback?: boolean;
  /** What `GET /health` says of the CLI. */
  cli?: Json;
  /**
   * The CLI's environment: `count_tokens` is forwarded to the model API it names
   * (`ANTHROPIC_BASE_URL`, with `ANTHROPIC_API_KEY` or `ANTHROPIC_AUTH_TOKEN`), as `ccwire serve`
   * does; without a key there, the gateway's estimate answers.
   */
  env?: Record<string, string>;
}
/** A request's head. */
export interface HttpHead {
  method: string;
  /** The path, without the query. */
  path: string;
  headers: Headers | { [name: string]: string | string[] | undefined } | [string, string][];
}
/** What `Gateway.admit` decided. */
export type HttpAdmission =
  | { respond: { status: number; headers: [string, string][]; body: string } }
  | { admit: { tenant: string; cors: [string, string][] } };
/** How a CLI ended. */
export interface CliExit {
  code?: number | null;
  signal?: number | null;
  /** The end of what it wrote on stderr. */
  stderr?: string;
}
/** The text of the error result a held call gets when the client's result does not come in time. */
export const HELD_CALL_TIMEOUT_TEXT: string;
/**
 * The gateway of `ccwire serve` as a sans-IO engine: give it requests, CLI output, exits and
 * the time; carry out the outputs every call returns, in order.
 */
export class Gateway {
  constructor(options?: GatewayOptions & { http?: GatewayHttpOptions });
  /**
   * The transcript a CLI of a `spawn` output resumes when the gateway wrote it from a client's
   * history (`spec.resume.written`): JSONL text to write at `spec.resume.path` (its directory
   * created, owner-only) before the CLI starts; `null` for any other spec.
   */
  static writtenTranscript(spec: CliSpec): string | null;
  /**
   * Decides on an HTTP request from its head, before its body is read: a response to send
   * as it is (a refusal: browser-borne, unknown path, wrong method, not JSON, no key; or a
   * CORS preflight's answer), or the caller's tenant and the CORS headers to add.
   */
  admit(head: HttpHead): HttpAdmission;
  /**
   * An admitted request with its body (`{error: "too_large"}` over `maxBody`,
   * `{error: "timed_out:<ms>"}` when it did not arrive within the host's body timeout of `<ms>`
   * (a 408; close the connection after the answer), `{error}` when it could not be read); its
   * response comes in the outputs.
   */
  handleHttp(
    requestId: number,
    head: HttpHead,
    tenant: string,
    body: string | Uint8Array | { error: string },
    nowMs: number,
  ): GatewayOutput[];
  /**
   * The answer to a `fetch` output: the body of the upstream's answer when it succeeded, else
   * `null`. A token count answers with the upstream's count when the body has one, else with
   * the gateway's estimate.
   */
  handleFetched(requestId: number, answerBody: string | Uint8Array | null, nowMs: number): GatewayOutput[];
  /** A client's request; `requestId` is yours, unique among requests not ended. */
  handleRequest(
    requestId: number,
    options: { api: ApiName; tenant?: string },
    body: string | Uint8Array | object,
    nowMs: number,
  ): GatewayOutput[];
  /** What a session's CLI printed on stdout. */
  handleStdout(session: number, data: string | Uint8Array, nowMs: number): GatewayOutput[];
  /** A session's CLI ended. */
  handleExit(session: number, exit: CliExit, nowMs: number): GatewayOutput[];
  /** A session's CLI could not be started. */
  handleSpawnFailed(session: number, error: string, nowMs: number): GatewayOutput[];
  /** The client of a request went away before its response ended. */
  handleClientGone(requestId: number, nowMs: number): GatewayOutput[];
  /** Applies the deadlines that passed by `nowMs`. */
  handleTimeout(nowMs: number): GatewayOutput[];
  /** Closes a session (shutting down). */
  close(session: number, nowMs: number): GatewayOutput[];
  /** When to call `handleTimeout` next; `null` when nothing waits. */
  nextDeadline(): GatewayDeadline | null;
  /** The permission requests of a tenant's conversations waiting for a person (`approvals: true`). */
  approvals(options?: { tenant?: string }): { object: "list"; data: Approval[] };
  /** A person's answer to an approval; throws an `ApiRequestError` (404 unknown, 400 bad answer). */
  answerApproval(
    id: string,
    options: { tenant?: string },
    answer: ApprovalAnswer | string,
    nowMs: number,
  ): { decided: { id: string; behavior: "allow" | "deny" }; outputs: GatewayOutput[] };
  /** Opens a stream (SSE) of a tenant's approval events as the response of `requestId`. */
  handleApprovalEvents(requestId: number, options: { tenant?: string }, nowMs: number): GatewayOutput[];
  /** Starts draining: new conversations get a 503, running turns get `graceMs` to finish. */
  drain(graceMs: number, nowMs: number): GatewayOutput[];
  /** Whether the gateway is draining and no CLI is left. */
  readonly isDrained: boolean;
  /** The body of `GET /metrics`: counters, gauges and latency histograms, Prometheus text. */
  metrics(): string;
  /** The body of `GET /v1/models`. */
  models(): { object: "list"; data: { id: string; display_name: string }[] };
  /** Live sessions. */
  readonly sessionCount: number;
  /** Held client tool calls, over all sessions. */
  readonly heldCount: number;
  /** Responses in flight. */
  readonly requestCount: number;
  /** Frees the WebAssembly memory now. */
  free(): void;
}

/** The output formats of `ccwire replay --format`. */
export type ResponseFormat =
  | "anthropic-sse"
  | "openai-sse"
  | "responses-sse"
  | "anthropic-json"
  | "openai-json"
  | "responses-json";
/**
 * The responses `ccwire replay --format <format>` prints for a transcript, byte for byte: each
 * turn as an HTTP client of the gateway would get it (model `claude-code`, tools named
 * `mcp__client__*` as the client's). Replays with the main module: in browsers, `init()` from
 * `ccwire` too.
 */
export function encodeTranscript(transcript: Input, format: ResponseFormat): string;

/** Loads the WebAssembly module (browsers); a no-op in Node, where it loads on import. */
export function init(moduleOrPath?: string | URL | Request | Response | BufferSource | WebAssembly.Module): Promise<void>;
