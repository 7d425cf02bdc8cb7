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

/** Calls into the module with a request body; an API error it returns is thrown as an `ApiRequestError`. */
function withRequest(call, body) {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  const result = JSON.parse(call(text));
  if (result !== null && typeof result === "object" && result.apiError) {
    throw new ApiRequestError(result.apiError.status, result.apiError.body);
  }
  return result;
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

/**
 * Which gateway must serve a request, when several share the work: `{kind: "new"}` (any), or
 * `{kind: "conversation", key}` — the gateway that claimed `key` (a `Gateway` with
 * `publishIndex` reports its claims).
 */
export function routeKey(body, { api, tenant = "" }) {
  check();
  return withRequest((text) => wasm.routeKey(api, text, String(tenant)), body);
}

/** The history hash of a request body (`null` before the first assistant message). */
export function historyHash(body, options) {
  return canonicalRequest(body, options).history_hash;
}

/** The chunk types a response encoder reads (from the module, on first use). */
let encoded;

/**
 * One Anthropic Messages, OpenAI Chat Completions or OpenAI Responses response built from the
 * chunks of a turn:
 * SSE frames as the chunks come when streaming, the JSON body once the response is complete.
 */
export class ResponseEncoder {
  #inner;

  static {
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

  /** Ends the response with an error (`status`: 400, 401, 402, 403, 404, 405, 408, 413, 415, 422, 429, 500, 503 or 529); returns the SSE frames. */
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

/** Text as UTF-8 bytes; bytes as they are. */
const utf8 = new TextEncoder();
function bytesOf(data, what) {
  if (typeof data === "string") return utf8.encode(data);
  if (data instanceof Uint8Array) return data;
  throw new TypeError(`ccwire/conversation: ${what} must be a string or a Uint8Array`);
}

/** Request headers as JSON `[[name, value], …]`, names in lower case. */
function headerList(headers = []) {
  const entries = typeof headers.entries === "function" && !Array.isArray(headers)
    ? [...headers.entries()]
    : Array.isArray(headers) ? headers : Object.entries(headers);
  return JSON.stringify(entries.filter(([, v]) => v != null)
    .map(([n, v]) => [String(n).toLowerCase(), Array.isArray(v) ? v.join(", ") : String(v)]));
}

/**
 * The gateway of `ccwire serve` as a sans-IO engine, for a gateway of your own: it owns every
 * conversation's CLI session and the response of every request in flight. Give it what
 * happened — a client's request, what a CLI printed, a CLI's exit, a client gone, the time —
 * and carry out the outputs each call returns, in order:
 *
 * - `{type: "spawn", session, spec: {args, env, env_remove}}`: start the CLI with these
 *   arguments; feed its stdout to `handleStdout`, its end to `handleExit` (or a failure to
 *   start to `handleSpawnFailed`); with `spec.resume`, first write the transcript it resumes
 *   at `spec.resume.path` (`Gateway.writtenTranscript(spec)`, a history the gateway wrote
 *   from a client's request; with `tenantRoot` only);
 * - `{type: "write", session, data}`: write to that CLI's stdin;
 * - `{type: "close", session}`: close its stdin, end it after a grace period;
 * - `{type: "respond", request, status, headers}`, `{type: "body", request, data}`,
 *   `{type: "end", request}`: the response of a request (SSE frames or a JSON body);
 * - `{type: "fetch", request, url, headers, body}`: `POST` `body` to `url` (a token count
 *   the model API makes) and give the answer's body to `handleFetched`;
 * - `{type: "drain_requested"}`: an admin asked for a drain over HTTP; it has begun, exit
 *   once `isDrained`;
 * - `{type: "remove_dir", path}`: delete that directory once the CLIs closed before it have
 *   exited (a deleted Managed Agents session's own, with `tenantRoot`).
 *
 * Then call `handleTimeout` when `nextDeadline().atMs` passes.
 */
export class Gateway {
  #inner;

  /**
   * @param {{heldCallTimeoutMs?: number, idleTtlMs?: number, maxStoredResponses?: number,
   *   maxSessions?: number, enabledTools?: string[], defaultModel?: string,
   *   pingEveryMs?: number, settleGraceMs?: number, startTimeoutMs?: number, seed?: number,
   *   unixEpochMs?: number}} [options] Without `seed`, the ids clients see (`resp_…`,
   *   `appr_…`) are keyed with 32 bytes of `crypto.getRandomValues`; with it, they repeat
   *   from run to run (tests only).
   */
  constructor(options = {}) {
    check();
    if (options === null || typeof options !== "object") {
      throw new TypeError("ccwire/conversation: Gateway options must be an object");
    }
    const { http = {}, ...engine } = options;
    const random = engine.seed === undefined;
    const seed = engine.seed ?? globalThis.crypto.getRandomValues(new Uint32Array(1))[0] * 2 ** 21;
    const idKey = random
      ? Array.from(globalThis.crypto.getRandomValues(new Uint8Array(32)),
        (b) => b.toString(16).padStart(2, "0")).join("")
      : undefined;
    this.#inner = new wasm.WasmGateway(JSON.stringify({ ...engine, seed, idKey }),
      JSON.stringify(http));
  }

  /**
   * The transcript a CLI of a `spawn` output resumes when the gateway wrote it from a
   * client's history (`spec.resume.written`): JSONL text to write at `spec.resume.path`
   * (its directory created, owner-only) before the CLI starts; `null` for any other spec.
   */
  static writtenTranscript(spec) {
    check();
    const text = wasm.writtenTranscript(JSON.stringify(spec));
    return text === "" ? null : text;
  }

  /**
   * Decides on an HTTP request from its head (`headers`: a `Headers`, Node's
   * `IncomingMessage.headers` or `[name, value]` pairs), before its body is read: returns
   * `{respond: {status, headers, body}}` to send as it is, or `{admit: {tenant, cors}}`.
   */
  admit({ method, path, headers }) {
    return JSON.parse(this.#inner.admit(String(method), String(path), headerList(headers)));
  }

  /**
   * An admitted request with its body (`{error: "too_large"}` when it was over `maxBody`,
   * `{error: "timed_out:<ms>"}` when it did not arrive within the host's body timeout,
   * `{error: reason}` when it could not be read): returns the outputs, like every input.
   */
  handleHttp(requestId, { method, path, headers }, tenant, body, nowMs) {
    const error = body?.error === undefined ? undefined : String(body.error);
    const data = error === undefined ? bytesOf(body ?? "", "body") : undefined;
    return JSON.parse(this.#inner.handleHttp(
      requestId, String(method), String(path), headerList(headers), String(tenant), data, error, nowMs,
    ));
  }

  /**
   * The answer to a `fetch` output: the body of the upstream's answer when it succeeded, else
   * `null` (an error status, no answer). A token count answers with the upstream's count when
   * the body has one, else with the gateway's estimate.
   */
  handleFetched(requestId, answerBody, nowMs) {
    const data = answerBody == null ? undefined : bytesOf(answerBody, "answer body");
    return JSON.parse(this.#inner.handleFetched(requestId, data, nowMs));
  }

  /**
   * A client's request: `requestId` is the host's (unique among requests not ended), `tenant`
   * the caller's key (it scopes conversations), `body` the request body as sent.
   */
  handleRequest(requestId, { api, tenant = "" }, body, nowMs) {
    const data = typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body);
    return JSON.parse(this.#inner.handleRequest(requestId, String(api), String(tenant), bytesOf(data, "body"), nowMs));
  }

  /** What a session's CLI printed on stdout (any piece of it). */
  handleStdout(session, data, nowMs) {
    return JSON.parse(this.#inner.handleStdout(session, bytesOf(data, "stdout data"), nowMs));
  }

  /** A session's CLI ended: its exit code or signal, and the end of its stderr. */
  handleExit(session, { code = null, signal = null, stderr = "" } = {}, nowMs) {
    return JSON.parse(this.#inner.handleExit(session, code ?? undefined, signal ?? undefined, String(stderr), nowMs));
  }

  /** A session's CLI could not be started. */
  handleSpawnFailed(session, error, nowMs) {
    return JSON.parse(this.#inner.handleSpawnFailed(session, String(error), nowMs));
  }

  /** The client of a request went away before its response ended. */
  handleClientGone(requestId, nowMs) {
    return JSON.parse(this.#inner.handleClientGone(requestId, nowMs));
  }

  /** Applies the deadlines that passed by `nowMs`. */
  handleTimeout(nowMs) {
    return JSON.parse(this.#inner.handleTimeout(nowMs));
  }

  /** Closes a session (shutting down). */
  close(session, nowMs) {
    return JSON.parse(this.#inner.close(session, nowMs));
  }

  /** When to call `handleTimeout` next, and why; `null` when nothing waits. */
  nextDeadline() {
    return JSON.parse(this.#inner.nextDeadline());
  }

  /** The permission requests of `tenant`'s conversations waiting for a person (`approvals: true`). */
  approvals({ tenant = "" } = {}) {
    return JSON.parse(this.#inner.approvals(String(tenant)));
  }

  /**
   * A person's answer to an approval (`{behavior: "allow" | "deny", message?, updated_input?,
   * remember?}`): returns `{decided, outputs}`; an unknown approval or a bad answer throws an
   * `ApiRequestError` (404, 400).
   */
  answerApproval(id, { tenant = "" }, answer, nowMs) {
    const text = typeof answer === "string" ? answer : JSON.stringify(answer);
    return withRequest(
      (body) => this.#inner.answerApproval(String(tenant), String(id), utf8.encode(body), nowMs),
      text,
    );
  }

  /** Opens a stream (SSE) of `tenant`'s approval events as the response of `requestId`. */
  handleApprovalEvents(requestId, { tenant = "" }, nowMs) {
    return JSON.parse(this.#inner.handleApprovalEvents(requestId, String(tenant), nowMs));
  }

  /** Starts draining: new conversations are refused, running turns get `graceMs` to finish. */
  drain(graceMs, nowMs) {
    return JSON.parse(this.#inner.drain(graceMs, nowMs));
  }

  /** Whether the gateway is draining and no CLI is left. */
  get isDrained() {
    return this.#inner.isDrained();
  }

  /** The body of `GET /metrics`: counters, gauges and latency histograms, Prometheus text. */
  metrics() {
    return this.#inner.metrics();
  }

  /** The body of `GET /v1/models`. */
  models() {
    return JSON.parse(this.#inner.models());
  }

  /** Live sessions. */
  get sessionCount() {
    return this.#inner.sessionCount();
  }

  /** Held client tool calls, over all sessions. */
  get heldCount() {
    return this.#inner.heldCount();
  }

  /** Responses in flight. */
  get requestCount() {
    return this.#inner.requestCount();
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
