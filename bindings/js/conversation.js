// `ccwire/conversation`: the canonical conversation of an Anthropic Messages or OpenAI Chat
// Completions request and its history hash, the responses of both APIs built from chunks, and
// the gateway state machine of `ccwire serve`. A module of its own, so that pages that only
// replay or drive sessions do not load the request parsers and encoders.

import * as wasm from "../pkg/ccwire_conversation.js";
import { isReady as mainReady, replayTranscriptJson } from "./api.js";

let ready = false;
let loadMain = () => {};

/**
 * Marks the module as instantiated (called by the entry points), with how to load the main
 * module when `encodeTranscript` needs it (Node reads it from disk; browsers `init()` it).
 */
export function markReady(mainLoader) {
  ready = true;
  if (mainLoader) loadMain = mainLoader;
}

function check() {
  if (!ready) {
    throw new Error("ccwire/conversation: the WebAssembly module is not loaded yet; `await init()` first");
  }
}

/** An API request the gateway would refuse, with the HTTP status and the API's error body. */
export class ApiRequestError extends Error {
  constructor(status, body) {
    super(body?.error?.message ?? `invalid request (${status})`);
    this.name = "ApiRequestError";
    this.status = status;
    this.body = body;
  }
}

const API_ERROR = /^ccwire-api-error (\d+) (.*)$/s;

/** Calls into the module with a request body; API errors become `ApiRequestError`s. */
/** A Responses API response id: `resp_` and 128 random bits. */
function newResponseId() {
  return `resp_${globalThis.crypto.randomUUID().replaceAll("-", "")}`;
}

function withRequest(call, body) {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  try {
    return JSON.parse(call(text));
  } catch (err) {
    const m = API_ERROR.exec(err?.message ?? "");
    if (m) throw new ApiRequestError(Number(m[1]), JSON.parse(m[2]));
    throw err;
  }
}

/**
 * Parses an Anthropic Messages, OpenAI Chat Completions or OpenAI Responses request body into
 * its canonical conversation, with the history hash namespaced by `tenant`.
 * @param {string | object} body
 * @param {{api: "anthropic" | "openai" | "responses", tenant?: string}} options
 */
export function canonicalRequest(body, { api, tenant = "" }) {
  check();
  return withRequest((text) => wasm.canonicalRequest(api, text, tenant), body);
}

/** The history hash of a request body (`null` before the first assistant message). */
export function historyHash(body, options) {
  return canonicalRequest(body, options).history_hash;
}

/** The chunk types a response encoder reads (from the module, on first use). */
let encoded;
/** The WebAssembly object of a `ResponseEncoder` (for `Gateway.responseDone`). */
let innerOf;

/**
 * One Anthropic Messages, OpenAI Chat Completions or OpenAI Responses response built from the
 * chunks of a turn:
 * SSE frames as the chunks come when streaming, the JSON body once the response is complete.
 */
export class ResponseEncoder {
  #inner;

  static {
    innerOf = (encoder) => encoder.#inner;
  }

  /**
   * @param {{api: "anthropic" | "openai" | "responses", stream: boolean, model: string,
   *   id?: string, created?: number, includeUsage?: boolean,
   *   clientTools?: Record<string, string>, clientToolPrefix?: string,
   *   previousResponseId?: string | null, store?: boolean, showThinking?: boolean}} options
   */
  constructor(options) {
    check();
    if (options === null || typeof options !== "object") {
      throw new TypeError("ccwire/conversation: ResponseEncoder options must be an object");
    }
    const { created = Math.floor(Date.now() / 1000), ...rest } = options;
    this.#inner = new wasm.WasmResponseEncoder(JSON.stringify({ ...rest, created }));
  }

  /** Takes the next chunk of the turn; returns the SSE frames it produced (none when not streaming). */
  push(chunk) {
    if (chunk === null || typeof chunk !== "object" || typeof chunk.type !== "string") {
      throw new TypeError("ccwire/conversation: push takes a chunk (an object with a string `type`)");
    }
    // Most chunks (tool statuses, permission requests, `ready` with its model list, …) do not
    // touch the response: they stay on this side of the boundary, unserialized.
    encoded ??= new Set(JSON.parse(wasm.encoderChunkTypes()));
    if (!encoded.has(chunk.type)) return [];
    return JSON.parse(this.#inner.push(JSON.stringify(chunk)));
  }

  /** Ends the response with an error (`status`: 400, 401, 403, 404, 413, 415, 429, 500 or 529); returns the SSE frames. */
  fail(message, status = 500) {
    if (typeof status !== "number") {
      throw new TypeError(`ccwire/conversation: status must be a number, got ${typeof status}`);
    }
    return JSON.parse(this.#inner.fail(String(message), status));
  }

  /** A keep-alive frame: Anthropic's `ping` event, or an SSE comment for OpenAI. */
  ping() {
    return this.#inner.ping();
  }

  /** Whether any SSE frame has been produced: after that, errors go into the stream. */
  get started() {
    return this.#inner.started();
  }

  /** How the response ended, or `null` while it runs. */
  get outcome() {
    return JSON.parse(this.#inner.outcome());
  }

  /** The client tool calls in the response, in order. */
  toolCalls() {
    return JSON.parse(this.#inner.toolCalls());
  }

  /** The non-streaming response body, once complete (`null` before, and after a failure). */
  body() {
    return JSON.parse(this.#inner.body());
  }

  /** The response as an assistant message in canonical form (what the history hash covers). */
  message() {
    return JSON.parse(this.#inner.message());
  }

  /** Frees the WebAssembly memory now (it is also freed when the object is collected). */
  free() {
    this.#inner.free();
  }
}

/** The text of the error result a held call gets when the client's result does not come in time. */
export const HELD_CALL_TIMEOUT_TEXT =
  "The client did not return a result for this tool call in time; the call was abandoned.";

/**
 * The gateway state machine of `ccwire serve`: which live CLI session a request continues or
 * starts, the client tool calls held open across requests, and their deadlines. The host owns
 * the CLI processes and sockets, tells the gateway what happened (with the time), and does what
 * it answers.
 */
export class Gateway {
  #inner;

  /** @param {{heldCallTimeoutMs?: number, idleTtlMs?: number, clientServer?: string}} [options] */
  constructor(options = {}) {
    check();
    if (options === null || typeof options !== "object") {
      throw new TypeError("ccwire/conversation: Gateway options must be an object");
    }
    this.#inner = new wasm.WasmGateway(JSON.stringify(options));
  }

  /**
   * Parses a request body and finds the session it continues, or starts one. The session is
   * busy until `responseDone` or `responseFailed`. A Responses request gets a new response id
   * (`route.responseId`, for its encoder), under which its response is stored when it asks.
   */
  route(body, { api, tenant = "" }, nowMs) {
    const responseId = api === "responses" ? newResponseId() : undefined;
    return withRequest(
      (text) => this.#inner.route(api, text, String(tenant), nowMs, responseId),
      body,
    );
  }

  /**
   * A response ended normally: `responseDone(session, encoder, nowMs)` with the
   * `ResponseEncoder` that built it, or `responseDone(session, message, toolCallIds, nowMs)`
   * with the assistant message (canonical form) and the ids of its client tool calls.
   */
  responseDone(session, response, toolCallIds, nowMs) {
    if (response instanceof ResponseEncoder) {
      if (arguments.length !== 3) {
        throw new TypeError("ccwire/conversation: responseDone(session, encoder, nowMs) takes three arguments");
      }
      this.#inner.responseDoneWith(session, innerOf(response), toolCallIds);
      return;
    }
    if (response === null || typeof response !== "object" || !Array.isArray(toolCallIds)) {
      throw new TypeError(
        "ccwire/conversation: responseDone takes (session, encoder, nowMs) or (session, message, toolCallIds, nowMs)",
      );
    }
    this.#inner.responseDone(session, JSON.stringify(response), JSON.stringify(toolCallIds), nowMs);
  }

  /** A response ended without completing (an error, the client went away); the session stays. */
  responseFailed(session, nowMs) {
    this.#inner.responseFailed(session, nowMs);
  }

  /** The CLI calls a client tool: answer it now, or hold it until the client's result comes. */
  toolCall(session, requestId, toolUseId, nowMs) {
    return JSON.parse(this.#inner.toolCall(session, String(requestId), toolUseId ?? undefined, nowMs));
  }

  /** The CLI cancelled a held call; a result that comes for it later is dropped. */
  toolCancelled(session, toolUseId) {
    this.#inner.toolCancelled(session, String(toolUseId));
  }

  /** Forgets a session (closed, or its process ended). */
  close(session) {
    this.#inner.close(session);
  }

  /** When to call `handleTimeout` next, and why; `null` when nothing waits. */
  nextDeadline() {
    return JSON.parse(this.#inner.nextDeadline());
  }

  /** Applies the deadlines that passed by `nowMs`; returns what to do. */
  handleTimeout(nowMs) {
    return JSON.parse(this.#inner.handleTimeout(nowMs));
  }

  /** Live sessions. */
  get sessionCount() {
    return this.#inner.sessionCount();
  }

  /** Held client tool calls, over all sessions. */
  get heldCount() {
    return this.#inner.heldCount();
  }

  /** Stored Responses API responses, over all tenants. */
  get storedCount() {
    return this.#inner.storedCount();
  }

  /** Frees the WebAssembly memory now (it is also freed when the object is collected). */
  free() {
    this.#inner.free();
  }
}

/**
 * The responses `ccwire replay --format <format>` prints for a transcript: every turn as an
 * HTTP client of the gateway would get it. Replays with the main module (`ccwire`).
 * @param {string | Uint8Array} transcript
 * @param {"anthropic-sse" | "openai-sse" | "responses-sse" | "anthropic-json" | "openai-json" | "responses-json"} format
 */
export function encodeTranscript(transcript, format) {
  check();
  loadMain();
  if (!mainReady()) {
    throw new Error(
      'ccwire/conversation: encodeTranscript replays with the main module; `await init()` from "ccwire" first',
    );
  }
  return wasm.encodeChunks(replayTranscriptJson(transcript), String(format));
}
