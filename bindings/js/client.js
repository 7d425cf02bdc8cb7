// `ccwire/node`: runs the Claude Code CLI from Node and drives it through the package's
// WebAssembly Session — what the Rust `Client` does, for JavaScript apps. Node only.

import { spawn } from "node:child_process";
import { randomInt } from "node:crypto";
import { closeSync, openSync, readFileSync, writeSync } from "node:fs";
import { Session } from "./node.js";
import { cliArgs, cliInitialize, initSync as initConversation, transcriptLine } from "../pkg/ccwire_conversation.js";

/**
 * The CLI's arguments for these options: the same flags, in the same order, as ccwire's Rust
 * `ClaudeOptions` and `ccwire serve` (one builder, in the package's WebAssembly module).
 */
export function claudeArgs(options = {}) {
  loadConversation();
  return JSON.parse(cliArgs(JSON.stringify(options ?? {})));
}

/**
 * The fields of the CLI's `initialize` request for these options: the system prompt, agents
 * and output schema, which can be larger than a command line takes (`claudeArgs` leaves them
 * out).
 */
export function claudeInitialize(options = {}) {
  loadConversation();
  return JSON.parse(cliInitialize(JSON.stringify(options ?? {})));
}

let conversationReady = false;

/**
 * Loads the `ccwire/conversation` module, where the command line's builder and the transcript
 * format live (once, on first use; a second load elsewhere is harmless): the package's main
 * module stays small.
 */
function loadConversation() {
  if (!conversationReady) {
    initConversation({ module: readFileSync(new URL("../pkg/ccwire_conversation_bg.wasm", import.meta.url)) });
    conversationReady = true;
  }
}

/** The longest stdout line a transcript keeps, as the Rust client's (32 MiB). */
const RECORD_LINE_LIMIT = 32 * 1024 * 1024;

/**
 * Writes the transcript of a session, in the format of `ccwire record` and the Rust client's
 * `record`: every wire line, both directions, with the milliseconds since the CLI started.
 */
class Recorder {
  #fd;
  #partial = [];
  #partialBytes = 0;
  #skipping = false;

  constructor(path) {
    loadConversation();
    this.#fd = openSync(path, "w");
  }

  /** A whole line the host wrote (with or without its newline). */
  stdin(line, tMs) {
    const bytes = typeof line === "string" ? Buffer.from(line) : Buffer.from(line);
    const end = bytes.length > 0 && bytes[bytes.length - 1] === 10 ? bytes.length - 1 : bytes.length;
    this.#write("in", bytes.subarray(0, end), tMs);
  }

  /** What the CLI wrote to stdout, split anywhere. */
  stdout(data, tMs) {
    let rest = Buffer.from(data);
    for (let nl = rest.indexOf(10); nl !== -1; nl = rest.indexOf(10)) {
      if (!this.#skipping) {
        this.#partial.push(rest.subarray(0, nl));
        this.#write("out", Buffer.concat(this.#partial), tMs);
      }
      this.#partial = [];
      this.#partialBytes = 0;
      this.#skipping = false;
      rest = rest.subarray(nl + 1);
    }
    if (rest.length > 0 && !this.#skipping) {
      this.#partial.push(rest);
      this.#partialBytes += rest.length;
      if (this.#partialBytes > RECORD_LINE_LIMIT) {
        // Over the limit: not kept, as the Rust client does not keep it.
        this.#partial = [];
        this.#partialBytes = 0;
        this.#skipping = true;
      }
    }
  }

  /** The CLI's stdout ended: a last line without its newline is kept too; the file closes. */
  close(tMs) {
    if (this.#fd === null) return;
    if (this.#partialBytes > 0 && !this.#skipping) this.#write("out", Buffer.concat(this.#partial), tMs);
    closeSync(this.#fd);
    this.#fd = null;
  }

  #write(dir, bytes, tMs) {
    if (this.#fd === null) return;
    const line = transcriptLine(dir, Math.max(0, Math.floor(tMs)), bytes);
    if (line.length > 0) writeSync(this.#fd, line);
  }
}

/** The CLI ended: how, the end of its stderr, and the last error result it reported. */
export class ProcessExitedError extends Error {
  constructor(exit, stderr, result) {
    const how = exit.signal ? `killed by ${exit.signal}` : `exit code ${exit.code}`;
    super(`the Claude Code CLI ended (${how})${result ? `: ${result}` : ""}${stderr ? `; stderr: ${stderr}` : ""}`);
    this.name = "ProcessExitedError";
    this.exit = exit;
    this.stderr = stderr;
    this.result = result;
  }
}

/** The CLI refused a control request. */
export class RefusedError extends Error {
  constructor(subtype, error) {
    super(`the CLI refused ${subtype}: ${error}`);
    this.name = "RefusedError";
    this.subtype = subtype;
    this.error = error;
  }
}

const STDERR_TAIL = 4096;

/** A live CLI session. Start one with `Client.connect(options)`. */
export class Client {
  #child;
  #session;
  #start = performance.now();
  #queue = [];
  #wake = null;
  #waiters = new Map();
  #timer = null;
  #options;
  #hooks = new Map();
  #tools = new Map();
  #stderr = "";
  #lastErrorResult = null;
  #exit = null;
  #exited;
  #ready = null;
  #closing = null;
  #recorder = null;

  /**
   * Starts the CLI, sends `initialize` and waits for its answer.
   * @param {import("./client.d.ts").ClientOptions} options
   */
  static async connect(options = {}) {
    const client = new Client(options);
    await client.#initialize();
    return client;
  }

  constructor(options) {
    this.#options = options;
    const toolServers = Object.entries(options.toolServers ?? {});
    for (const [server, tools] of toolServers) {
      for (const tool of tools) this.#tools.set(`${server}\u0000${tool.name}`, tool.handler);
    }
    const args = claudeArgs({
      ...options,
      permissionPrompts: options.permissionPrompts || typeof options.canUseTool === "function",
      sdkMcpServers: toolServers.map(([name]) => name),
    });
    const env = { ...process.env, CLAUDE_CODE_SDK_READS_SESSION_STATE: "1" };
    // A parent Claude Code session would make the child think it is nested.
    delete env.CLAUDECODE;
    for (const [key, value] of Object.entries(options.env ?? {})) {
      if (value === null || value === undefined) delete env[key];
      else env[key] = String(value);
    }
    const claude = options.claude ?? process.env.CCWIRE_CLAUDE ?? "claude";
    this.#session = Session.driver({
      seed: randomInt(2 ** 47),
      timeouts: options.timeouts ?? {},
      elicitations: typeof options.onElicitation === "function",
      mcpServers: toolServers.map(([name, tools]) => ({
        name,
        tools: tools.map((t) => ({ name: t.name, description: t.description ?? "", inputSchema: t.inputSchema ?? { type: "object" } })),
      })),
    });
    this.#recorder = options.record ? new Recorder(options.record) : null;
    this.#child = spawn(claude, args, { cwd: options.cwd, env, stdio: ["pipe", "pipe", "pipe"] });
    this.#exited = new Promise((resolve) => {
      this.#child.once("close", (code, signal) => resolve({ code, signal }));
    });
    this.#child.once("error", (err) => this.#fail(new Error(`cannot start the Claude Code CLI (${claude}): ${err.message}`)));
    this.#child.stdin.on("error", () => {});
    this.#child.stdout.on("data", (data) => {
      this.#recorder?.stdout(data, this.#now());
      this.#apply(this.#session.push(data, this.#now()));
    });
    this.#child.stderr.on("data", (data) => {
      this.#stderr = (this.#stderr + data.toString()).slice(-STDERR_TAIL);
    });
    this.#exited.then((exit) => {
      this.#exit = exit;
      this.#recorder?.close(this.#now());
      const error = new ProcessExitedError(exit, this.#stderr.trim(), this.#lastErrorResult);
      // Requests still waiting fail with how the CLI ended, not with the session's note that
      // it ended; the last chunks (the process exit) still reach the app before the error.
      for (const waiter of this.#waiters.values()) waiter.reject(error);
      this.#waiters.clear();
      this.#apply(this.#session.endStdout(this.#now()));
      this.#apply(this.#session.processExit(exit, this.#now()));
      this.#fail(error);
    });
  }

  /** The CLI's process id. */
  get pid() {
    return this.#child.pid;
  }

  /** The CLI's answer to `initialize` (commands, models, account, …). */
  get serverInfo() {
    return this.#ready;
  }

  #now() {
    return performance.now() - this.#start;
  }

  async #initialize() {
    const hooks = (this.#options.hooks ?? []).map((h) => ({ event: h.event, matcher: h.matcher ?? null, timeoutS: h.timeoutS }));
    // The options' large values, then the app's own fields (which win).
    const extra = { ...claudeInitialize(this.#options), ...(this.#options.initialize ?? {}) };
    if (this.#options.dialogKinds?.length) extra.supportedDialogKinds = this.#options.dialogKinds;
    const step = this.#session.initialize({ hooks, extra }, this.#now());
    (this.#options.hooks ?? []).forEach((hook, i) => this.#hooks.set(step.callbackIds[i], hook.handler));
    const answer = this.#await(step.requestId, "initialize");
    this.#apply(step);
    const limit = this.#options.initializeTimeoutMs ?? 60_000;
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the CLI did not answer initialize within ${limit} ms`)), limit);
    });
    try {
      this.#ready = await Promise.race([answer, timeout]);
    } catch (err) {
      this.#child.kill("SIGTERM");
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  #await(requestId, subtype) {
    return new Promise((resolve, reject) => this.#waiters.set(requestId, { subtype, resolve, reject }));
  }

  /** Writes what the session asks for, runs the handlers, and queues the chunks. */
  #apply(step) {
    for (const line of step.stdin ?? []) {
      this.#recorder?.stdin(line, this.#now());
      if (this.#child.stdin.writable) this.#child.stdin.write(line);
    }
    for (const chunk of step.chunks ?? []) this.#chunk(chunk);
    this.#schedule();
  }

  #schedule() {
    clearTimeout(this.#timer);
    const next = this.#session.nextDeadline();
    if (next && !this.#exit) {
      this.#timer = setTimeout(() => this.#apply(this.#session.handleTimeout(this.#now())), Math.max(0, next.atMs - this.#now()));
      this.#timer.unref?.();
    }
  }

  #answer(run, respond) {
    Promise.resolve()
      .then(run)
      .then(
        (answer) => this.#apply(respond(answer)),
        (err) => this.#apply(this.#session.respondError(respond.requestId, String(err?.message ?? err), this.#now())),
      )
      .catch(() => {});
  }

  #chunk(chunk) {
    const now = () => this.#now();
    const respondTo = (requestId, fn) => Object.assign((answer) => fn(requestId, answer, now()), { requestId });
    switch (chunk.type) {
      case "permission_request": {
        const handler = this.#options.canUseTool;
        const respond = respondTo(chunk.request_id, (id, d) => this.#session.respondPermission(id, d, now()));
        if (handler) this.#answer(() => handler(chunk), respond);
        else this.#answer(() => ({ behavior: "deny", message: "No permission handler is configured." }), respond);
        break;
      }
      case "hook_request": {
        const handler = this.#hooks.get(chunk.callback_id);
        const respond = respondTo(chunk.request_id, (id, out) => this.#session.respondHook(id, out ?? {}, now()));
        this.#answer(() => (handler ? handler(chunk.input) : {}), respond);
        break;
      }
      case "mcp_tool_call": {
        const handler = this.#tools.get(`${chunk.server}\u0000${chunk.tool}`);
        const respond = respondTo(chunk.request_id, (id, r) => this.#session.respondMcp(id, r, now()));
        this.#answer(
          () => (handler ? handler(chunk.arguments) : { content: [{ type: "text", text: `Tool '${chunk.tool}' not found` }], isError: true }),
          respond,
        );
        break;
      }
      case "elicitation_request": {
        // Without a handler the session has declined it already.
        const handler = this.#options.onElicitation;
        if (handler) {
          this.#answer(() => handler(chunk), respondTo(chunk.request_id, (id, a) => this.#session.respondElicitation(id, a, now())));
        }
        break;
      }
      case "dialog_request": {
        // Without a handler it is left unanswered, as the official SDKs do.
        const handler = this.#options.onUserDialog;
        if (handler) {
          this.#answer(() => handler(chunk), respondTo(chunk.request_id, (id, a) => this.#session.respondUserDialog(id, a, now())));
        }
        break;
      }
      case "control_result": {
        const waiter = this.#waiters.get(chunk.request_id);
        if (waiter) {
          this.#waiters.delete(chunk.request_id);
          if (chunk.ok) waiter.resolve(chunk.response ?? null);
          else waiter.reject(new RefusedError(waiter.subtype, chunk.error ?? "no message"));
        }
        break;
      }
      case "turn_complete":
        if (chunk.is_error) this.#lastErrorResult = chunk.result ?? null;
        break;
    }
    this.#push({ chunk });
  }

  #push(event) {
    this.#queue.push(event);
    this.#wake?.();
    this.#wake = null;
  }

  #fail(error) {
    for (const waiter of this.#waiters.values()) waiter.reject(error);
    this.#waiters.clear();
    clearTimeout(this.#timer);
    this.#push({ error, end: true });
  }

  /** The next chunk of the session (any turn), `{error}` when the CLI ended, or `null` after that. */
  async nextEvent() {
    while (this.#queue.length === 0) {
      await new Promise((resolve) => {
        this.#wake = resolve;
      });
    }
    const event = this.#queue[0];
    if (!event.end) this.#queue.shift();
    return event;
  }

  /**
   * Sends a prompt and yields the turn's chunks up to its `turn_complete`. Throws a
   * `ProcessExitedError` when the CLI ends first.
   * @param {string | import("./index.d.ts").UserMessage} message
   */
  async *query(message) {
    this.send(message);
    for (;;) {
      const event = await this.nextEvent();
      if (event.error) throw event.error;
      yield event.chunk;
      if (event.chunk.type === "turn_complete") return;
    }
  }

  /** Sends a prompt; its chunks come from `nextEvent()` (or iterate `query` instead). */
  send(message) {
    if (this.#exit) throw new ProcessExitedError(this.#exit, this.#stderr.trim(), this.#lastErrorResult);
    this.#apply(this.#session.sendUserMessage(message, this.#now()));
  }

  async #control(step, subtype) {
    const answer = this.#await(step.requestId, subtype);
    this.#apply(step);
    return answer;
  }

  /** Interrupts the running turn; resolves with the CLI's answer. */
  interrupt() {
    return this.#control(this.#session.interrupt(this.#now()), "interrupt");
  }

  /** Switches the model (`null`: the session's default). */
  setModel(model) {
    return this.#control(this.#session.setModel(model, this.#now()), "set_model");
  }

  /** Switches the permission mode; resolves with `{mode}`, the mode now in effect (not always the one asked). */
  setPermissionMode(mode) {
    return this.#control(this.#session.setPermissionMode(mode, this.#now()), "set_permission_mode");
  }

  /** Sends a typed control request (`{subtype: "mcp_status"}`, …) and resolves with the CLI's answer. */
  request(request) {
    return this.#control(this.#session.request(request, this.#now()), request.subtype);
  }

  /** Answers an `mcp_tool_call` of a server whose tools have no handler here. */
  respondTool(requestId, result) {
    this.#apply(this.#session.respondMcp(requestId, result, this.#now()));
  }

  /**
   * Closes the CLI's stdin and waits for it to exit (SIGTERM after `graceMs`, SIGKILL after
   * as long again). Resolves with `{code, signal}`.
   */
  close(graceMs = 5_000) {
    this.#closing ??= this.#close(graceMs);
    return this.#closing;
  }

  async #close(graceMs) {
    this.#child.stdin.end();
    const timeout = (ms) => new Promise((resolve) => setTimeout(() => resolve(null), ms).unref?.());
    let exit = await Promise.race([this.#exited, timeout(graceMs)]);
    if (!exit) {
      this.#child.kill("SIGTERM");
      exit = await Promise.race([this.#exited, timeout(graceMs)]);
    }
    if (!exit) {
      this.#child.kill("SIGKILL");
      exit = await this.#exited;
    }
    this.#session.free();
    return exit;
  }
}
