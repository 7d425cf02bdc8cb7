// Types of `ccwire/conversation`.

import type { Chunk, Input, Json } from "./index.js";

export type ApiName = "anthropic" | "openai";
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
}
/** The HTTP statuses of API errors. */
export type ApiErrorStatus = 400 | 401 | 404 | 413 | 429 | 500 | 529;
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
  /** A keep-alive frame: Anthropic's `ping` event, or an SSE comment for OpenAI. */
  ping(): string;
  /** Whether any SSE frame has been produced: after that, errors go into the stream instead of an HTTP status. */
  readonly started: boolean;
  /** How the response ended, or `null` while it runs. */
  readonly outcome: ResponseOutcome | null;
  /** The client tool calls in the response, in order. */
  toolCalls(): ClientToolCall[];
  /** The non-streaming response body, once complete; `null` before, and after a failure. */
  body(): (A extends "anthropic" ? AnthropicMessage : A extends "openai" ? ChatCompletion : AnthropicMessage | ChatCompletion) | null;
  /** The response as an assistant message in canonical form (what the next request's history hash covers). */
  message(): CanonicalMessage;
  /** Frees the WebAssembly memory now (it is also freed when the object is collected). */
  free(): void;
}
/** The output formats of `ccwire replay --format`. */
export type ResponseFormat = "anthropic-sse" | "openai-sse" | "anthropic-json" | "openai-json";
/**
 * The responses `ccwire replay --format <format>` prints for a transcript, byte for byte: each
 * turn as an HTTP client of the gateway would get it (model `claude-code`, tools named
 * `mcp__client__*` as the client's). Replays with the main module: in browsers, `init()` from
 * `ccwire` too.
 */
export function encodeTranscript(transcript: Input, format: ResponseFormat): string;

/** Loads the WebAssembly module (browsers); a no-op in Node, where it loads on import. */
export function init(moduleOrPath?: string | URL | Request | Response | BufferSource | WebAssembly.Module): Promise<void>;
