// `ccwire/conversation`: the canonical conversation of an Anthropic Messages or OpenAI Chat
// Completions request and its history hash, and the responses of both APIs built from chunks.
// A module of its own, so that pages that only replay or drive sessions do not load the
// request parsers and encoders.

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

/**
 * Parses an Anthropic Messages or OpenAI Chat Completions request body into its canonical
 * conversation, with the history hash namespaced by `tenant`.
 * @param {string | object} body
 * @param {{api: "anthropic" | "openai", tenant?: string}} options
 */
export function canonicalRequest(body, { api, tenant = "" }) {
  check();
  const text = typeof body === "string" ? body : JSON.stringify(body);
  let out;
  try {
    out = wasm.canonicalRequest(api, text, tenant);
  } catch (err) {
    const m = API_ERROR.exec(err?.message ?? "");
    if (m) throw new ApiRequestError(Number(m[1]), JSON.parse(m[2]));
    throw err;
  }
  return JSON.parse(out);
}

/** The history hash of a request body (`null` before the first assistant message). */
export function historyHash(body, options) {
  return canonicalRequest(body, options).history_hash;
}

/** The chunk types a response encoder reads (from the module, on first use). */
let encoded;

/**
 * One Anthropic Messages or OpenAI Chat Completions response built from the chunks of a turn:
 * SSE frames as the chunks come when streaming, the JSON body once the response is complete.
 */
export class ResponseEncoder {
  #inner;

  /**
   * @param {{api: "anthropic" | "openai", stream: boolean, model: string, id?: string,
   *   created?: number, includeUsage?: boolean, clientTools?: Record<string, string>,
   *   clientToolPrefix?: string}} options
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

  /** Ends the response with an error (`status`: 400, 401, 404, 413, 429, 500 or 529); returns the SSE frames. */
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

/**
 * The responses `ccwire replay --format <format>` prints for a transcript: every turn as an
 * HTTP client of the gateway would get it. Replays with the main module (`ccwire`).
 * @param {string | Uint8Array} transcript
 * @param {"anthropic-sse" | "openai-sse" | "anthropic-json" | "openai-json"} format
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
