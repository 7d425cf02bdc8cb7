// The public API of the `ccwire` package, shared by the Node and browser entry points.
//
// The WebAssembly module speaks JSON text; this wrapper JSON.stringify's arguments and
// JSON.parse's results, so every object handed out is plain data whose JSON.stringify equals
// the native core's serde_json output byte for byte.

import * as wasm from "../pkg/ccwire_wasm.js";

let ready = false;

/** Marks the module as instantiated (called by the entry points). */
export function markReady() {
  ready = true;
}

/** Whether the module is instantiated. */
export function isReady() {
  return ready;
}

function check() {
  if (!ready) {
    throw new Error("ccwire: the WebAssembly module is not loaded yet; `await init()` first");
  }
}

const encoder = new TextEncoder();
/** JSON as the module writes it (ASCII bytes) as text; in Node one byte is one character. */
const asciiText = typeof Buffer === "function"
  ? (b) => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("latin1")
  : ((decoder) => (b) => decoder.decode(b))(new TextDecoder());
const parseAscii = (b) => JSON.parse(asciiText(b));

function bytes(data, what) {
  if (typeof data === "string") return encoder.encode(data);
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  throw new TypeError(`ccwire: ${what} must be a string or a Uint8Array`);
}

function line(message, what) {
  if (typeof message === "string") return message;
  if (message !== null && typeof message === "object") return JSON.stringify(message);
  throw new TypeError(`ccwire: ${what} must be a JSON string or an object`);
}

function time(nowMs) {
  if (typeof nowMs !== "number") {
    throw new TypeError(`ccwire: nowMs must be a number of milliseconds, got ${typeof nowMs}`);
  }
  return nowMs;
}

/**
 * Replays a whole transcript (JSONL text or bytes) and returns its chunks.
 * @param {string | Uint8Array} transcript
 */
export function replayTranscript(transcript) {
  return JSON.parse(replayTranscriptJson(transcript));
}

/** The chunks of a whole transcript as the JSON text of an array (`encodeTranscript` reads it). */
export function replayTranscriptJson(transcript) {
  check();
  return asciiText(typeof transcript === "string"
    ? wasm.replayTranscriptText(transcript)
    : wasm.replayTranscript(bytes(transcript, "transcript")));
}

/** A transcript replayed piece by piece: push bytes, get the chunks they produced. */
export class Replayer {
  #inner;

  constructor() {
    check();
    this.#inner = new wasm.WasmReplayer();
  }

  /** Feeds transcript text or bytes, split anywhere. */
  push(data) {
    return parseAscii(
      typeof data === "string" ? this.#inner.pushText(data) : this.#inner.push(bytes(data, "data")),
    );
  }

  /** Ends the transcript (a last line without newline is read). */
  finish() {
    return parseAscii(this.#inner.finish());
  }

  /** The `t_ms` of the last transcript line read. */
  get nowMs() {
    return this.#inner.nowMs();
  }

  /** Whether the CLI is waiting for a tool, and on what. */
  toolWait() {
    return JSON.parse(this.#inner.toolWait());
  }

  /** Frees the WebAssembly memory now (it is also freed when the object is collected). */
  free() {
    this.#inner.free();
  }
}

/** One CLI process's protocol engine, in driver or observer mode. */
export class Session {
  #inner;

  /**
   * @param {"driver" | "observer"} mode
   * @param {object} [options] `{lineLimit, seed, timeouts, mcpServers}`
   */
  constructor(mode, options = {}) {
    check();
    if (mode !== "driver" && mode !== "observer") {
      throw new TypeError(`ccwire: mode must be "driver" or "observer", got ${JSON.stringify(mode)}`);
    }
    this.#inner = new wasm.WasmSession(mode === "driver", JSON.stringify(options));
    this.mode = mode;
  }

  /** A session that owns the CLI's stdin: commands return the lines to write. */
  static driver(options) {
    return new Session("driver", options);
  }

  /** A session that watches traffic in both directions. */
  static observer(options) {
    return new Session("observer", options);
  }

  /** Feeds what the CLI wrote to stdout (text or bytes, split anywhere). */
  push(data, nowMs) {
    time(nowMs);
    return parseAscii(
      typeof data === "string"
        ? this.#inner.pushText(nowMs, data)
        : this.#inner.push(nowMs, bytes(data, "data")),
    );
  }

  /** Observer mode: feeds what the host wrote to the CLI's stdin (split anywhere). */
  pushStdin(data, nowMs) {
    return parseAscii(this.#inner.pushStdin(time(nowMs), bytes(data, "data")));
  }

  /** Reports the end of the CLI's stdout. */
  endStdout(nowMs) {
    return parseAscii(this.#inner.endStdout(time(nowMs)));
  }

  /** Feeds one whole CLI → host message (a JSON line or an object). */
  observeOut(message, nowMs) {
    return parseAscii(this.#inner.observeOut(time(nowMs), line(message, "message")));
  }

  /** Feeds one whole host → CLI message (a JSON line or an object). */
  observeIn(message, nowMs) {
    return parseAscii(this.#inner.observeIn(time(nowMs), line(message, "message")));
  }

  /** Reports that the CLI process ended. */
  processExit({ code = null, signal = null }, nowMs) {
    return parseAscii(this.#inner.processExit(time(nowMs), code ?? undefined, signal ?? undefined));
  }

  /** Applies the timeout policy to every deadline at or before `nowMs`. */
  handleTimeout(nowMs) {
    return parseAscii(this.#inner.handleTimeout(time(nowMs)));
  }

  /** The earliest deadline and why, or `null`. */
  nextDeadline() {
    return JSON.parse(this.#inner.nextDeadline());
  }

  /** Whether the CLI is waiting for a tool, and on what (equals the last `tool_wait` chunk). */
  toolWait() {
    return JSON.parse(this.#inner.toolWait());
  }

  /** Every tool call the session remembers, with its status. */
  toolStatuses() {
    return JSON.parse(this.#inner.toolStatuses());
  }

  /** Whether a turn is running. */
  get turnRunning() {
    return this.#inner.turnRunning();
  }

  /** The CLI's session id, from the latest `system/init`, or `null`. */
  get sessionId() {
    return this.#inner.sessionId() ?? null;
  }

  /** Sends `initialize` (`{hooks: [{event, matcher, timeoutS}], extra}`). */
  initialize(options, nowMs) {
    return parseAscii(this.#inner.initialize(time(nowMs), JSON.stringify(options ?? {})));
  }

  /** Sends a prompt: a string, or `{content, uuid, priority, extra}`. */
  sendUserMessage(message, nowMs) {
    const m = typeof message === "string" ? { content: message } : message;
    return parseAscii(this.#inner.sendUserMessage(time(nowMs), JSON.stringify(m)));
  }

  /** Answers a `permission_request`: `{behavior:"allow"}` or `{behavior:"deny", message}`. */
  respondPermission(requestId, decision, nowMs) {
    return parseAscii(
      this.#inner.respondPermission(time(nowMs), requestId, JSON.stringify(decision)),
    );
  }

  /** Answers a `hook_request` with the hook's output (`{}`: no opinion). */
  respondHook(requestId, output, nowMs) {
    return parseAscii(this.#inner.respondHook(time(nowMs), requestId, JSON.stringify(output)));
  }

  /** Answers an `elicitation_request`: `{action:"accept", content}`, `{action:"decline"}` or `{action:"cancel"}`. */
  respondElicitation(requestId, answer, nowMs) {
    return parseAscii(
      this.#inner.respondElicitation(time(nowMs), requestId, JSON.stringify(answer)),
    );
  }

  /** Answers a `dialog_request`: `{behavior:"completed", result}` or `{behavior:"cancelled"}`. */
  respondUserDialog(requestId, answer, nowMs) {
    return parseAscii(
      this.#inner.respondUserDialog(time(nowMs), requestId, JSON.stringify(answer)),
    );
  }

  /** Answers an `mcp_tool_call` with `{content: [...], isError?}`. */
  respondMcp(requestId, result, nowMs) {
    return parseAscii(this.#inner.respondMcp(time(nowMs), requestId, JSON.stringify(result)));
  }

  /** Answers any request from the CLI with a control error. */
  respondError(requestId, message, nowMs) {
    return parseAscii(this.#inner.respondError(time(nowMs), requestId, String(message)));
  }

  /** Interrupts the running turn. */
  interrupt(nowMs) {
    return parseAscii(this.#inner.interrupt(time(nowMs)));
  }

  /** Switches the model (`null`: the session default). */
  setModel(model, nowMs) {
    return parseAscii(this.#inner.setModel(time(nowMs), model ?? undefined));
  }

  /** Switches the permission mode (`default`, `acceptEdits`, `plan`, …). */
  setPermissionMode(mode, nowMs) {
    return parseAscii(this.#inner.setPermissionMode(time(nowMs), mode));
  }

    /** Sends a typed control request (`{subtype: "mcp_status"}`, `{subtype: "stop_task", task_id}`, …). */
  request(request, nowMs) {
    return parseAscii(this.#inner.request(time(nowMs), JSON.stringify(request)));
  }

/** Sends any control request. */
  sendControl(subtype, fields, nowMs) {
    return parseAscii(this.#inner.sendControl(time(nowMs), subtype, JSON.stringify(fields ?? {})));
  }

  /** Frees the WebAssembly memory now (it is also freed when the object is collected). */
  free() {
    this.#inner.free();
  }
}
