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
export type ApiErrorStatus = 400 | 401 | 403 | 404 | 413 | 415 | 429 | 500 | 529;
/** Why a response failed. */
export interface ResponseError {
  status: ApiErrorStatus;
  message: string;
  /** The request field at fault (OpenAI `param`). */
  param: string | null;
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
/** Time limits of a gateway, and the MCP server its host offers the client's tools through. */
export interface GatewayOptions {
  /** How long a held client tool call waits for the client's result (default 10 min). */
  heldCallTimeoutMs?: number;
  /** How long a session may sit without a request before it is closed (default 30 min); a stored Responses API response is kept as long after its last use. */
  idleTtlMs?: number;
  /** The most stored Responses API responses kept at once, the least recently used going first (default 10,000). */
  maxStoredResponses?: number;
  /** The name of the in-process MCP server that offers the client's tools to the CLI (default `client`): the model calls them `mcp__<clientServer>__<name>`. */
  clientServer?: string;
}
/** What the host needs of the request besides its messages (the gateway keeps those). */
export type GatewayRequest = Omit<CanonicalRequest, "messages" | "history_len" | "history_hash">;
/** The content blocks of a user message for the CLI: `session.sendUserMessage({ content: prompt }, nowMs)`. */
export type PromptContent = Json[];
/** What a route has in common. */
interface RouteBase {
  /** The session, the gateway's id; the host maps it to its CLI process. */
  session: number;
  /** The request's fields: the model, `stream`, `include_usage`, the tools (for the MCP server), the system prompt, … */
  request: GatewayRequest;
  /** The `clientTools` of the request's `ResponseEncoder`: the name the model calls each client tool by → the client's name. */
  clientTools: Record<string, string>;
  /** Responses API: the `id` of the request's `ResponseEncoder`; its response is stored under it when the request asks (`store`). */
  responseId?: string;
  /** Responses API: the `previousResponseId` of the request's `ResponseEncoder`. */
  previousResponseId?: string | null;
}
/** The request continues a live session: answer the held calls, then send the prompt, if any. */
export interface ContinueRoute extends RouteBase {
  kind: "continue";
  /** The `x-ccwire-session` header. */
  sessionKind: "continued";
  /** Held `tools/call` requests of the session to answer now (`Session.respondMcp(requestId, result)`). */
  answers: { requestId: string; result: McpCallResult }[];
  /** What the request adds besides tool results, as a user message; `null` when it adds nothing. */
  prompt: PromptContent | null;
}
/** The request starts a new CLI session, which gets the prompt as its first user message. */
export interface StartRoute extends RouteBase {
  kind: "start";
  /** `rebuilt` when the history has assistant turns but no live session: the prompt carries the earlier turns. The `x-ccwire-session` header. */
  sessionKind: "new" | "rebuilt";
  prompt: PromptContent;
  /** A live session this one replaces: close its CLI process (the gateway has forgotten it). */
  replaces: number | null;
}
/** What the host must do for a request. */
export type Route = ContinueRoute | StartRoute;
/** What to do with a `tools/call` of the CLI. */
export type CallAction =
  /** Answer it now (`Session.respondMcp`). */
  | { action: "answer"; result: McpCallResult }
  /** Hold it: the client's result comes with a later request, or the deadline answers it. */
  | { action: "hold" };
/** What to do after a deadline. */
export type GatewayAction =
  /** Answer a held call of a session (its deadline passed: an error result with `HELD_CALL_TIMEOUT_TEXT`). */
  | { action: "answer"; session: number; requestId: string; result: McpCallResult }
  /** Close a session (idle too long): close the CLI's stdin, then end the process after a grace period. */
  | { action: "close"; session: number };
/** When the gateway wants `handleTimeout`, and why. */
export interface GatewayDeadline {
  atMs: number;
  reason: "held_call" | "idle" | "stored_response";
}
/** The text of the error result a held call gets when the client's result does not come in time. */
export const HELD_CALL_TIMEOUT_TEXT: string;
/**
 * The gateway state machine of `ccwire serve`: which live CLI session a request continues or
 * starts (found from the history alone, per tenant), the client tool calls held open across
 * requests, and their deadlines. The host owns the CLI processes and sockets; it tells the
 * gateway what happened, with the time (`nowMs`, milliseconds on the host's clock), and does
 * what it answers.
 */
export class Gateway {
  constructor(options?: GatewayOptions);
  /**
   * Parses a request body and finds the session it continues, or starts one. The session is
   * busy until `responseDone` or `responseFailed`.
   * @throws {ApiRequestError} An invalid request or one the CLI cannot honour (400), tool
   * results that do not match the calls of the previous response (400, naming the ids), or a
   * conversation busy with another request (429: answer with `Retry-After`); for a
   * Responses request, an unknown `previous_response_id` (400). A Responses request gets a
   * new `responseId` for its encoder.
   */
  route(body: string | object, options: { api: ApiName; tenant?: string }, nowMs: number): Route;
  /** A response ended normally: the `ResponseEncoder` that built it has the assistant message and its client tool calls. */
  responseDone(session: number, encoder: ResponseEncoder, nowMs: number): void;
  /** A response ended normally with this assistant message (canonical form, as `ResponseEncoder.message()` returns it) and client tool calls. */
  responseDone(session: number, message: CanonicalMessage, toolCallIds: string[], nowMs: number): void;
  /** A response ended without completing (an error, the client went away); the session stays. */
  responseFailed(session: number, nowMs: number): void;
  /** The CLI calls a client tool (`mcp_tool_call` with the tool_use id in `tool_use_id`). */
  toolCall(session: number, requestId: string, toolUseId: string | null | undefined, nowMs: number): CallAction;
  /** The CLI cancelled a held call; a result that comes for it later is dropped. */
  toolCancelled(session: number, toolUseId: string): void;
  /** Forgets a session (closed, or its process ended). */
  close(session: number): void;
  /** When to call `handleTimeout` next, and why; `null` when nothing waits. */
  nextDeadline(): GatewayDeadline | null;
  /** Applies the deadlines that passed by `nowMs`; returns what to do. */
  handleTimeout(nowMs: number): GatewayAction[];
  /** Live sessions. */
  readonly sessionCount: number;
  /** Held client tool calls, over all sessions. */
  readonly heldCount: number;
  /** Stored Responses API responses, over all tenants. */
  readonly storedCount: number;
  /** Frees the WebAssembly memory now (it is also freed when the object is collected). */
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
