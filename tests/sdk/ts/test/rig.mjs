// The rig: the scripted fake Messages API and `ccwire serve` in front of the real Claude Code
// CLI, as child processes of the test file, plus helpers to look at both.

import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');
const fromEnv = (name, fallback) => process.env[name] || fallback;

export const CCWIRE_BIN = fromEnv('CCWIRE_BIN', path.join(repo, 'target/debug/ccwire'));
export const FAKE_ANTHROPIC_BIN = fromEnv(
  'FAKE_ANTHROPIC_BIN',
  path.join(repo, 'target/debug/fake-anthropic'),
);
export const CLAUDE = fromEnv('CCWIRE_CLAUDE', path.join(repo, 'tests/.cli/node_modules/.bin/claude'));

export const KEY = 'sdk-test-key';
export const ANTHROPIC_MODEL = 'claude-sonnet-4-5-20250929';
export const OPENAI_MODEL = 'gpt-4o';
/** Seconds a client tool call is held for its result (`--held-call-timeout`). */
export const HELD_CALL_TIMEOUT_S = 3;
/** What the model sees when a held call passes its deadline. */
export const HELD_CALL_TIMEOUT_TEXT =
  'The client did not return a result for this tool call in time; the call was abandoned.';

/** The client tool, as an Anthropic tool definition. */
export const LOOKUP_TOOL = {
  name: 'lookup',
  description: 'Looks a record up.',
  input_schema: {
    type: 'object',
    properties: { query: { type: 'string' } },
    required: ['query'],
  },
};

/** The same tool, as an OpenAI function tool. */
export const LOOKUP_FUNCTION = {
  type: 'function',
  function: {
    name: 'lookup',
    description: LOOKUP_TOOL.description,
    parameters: LOOKUP_TOOL.input_schema,
  },
};

/** Script rules. */
export const rule = (when, reply, eventDelayMs = 0) => ({ when, reply, event_delay_ms: eventDelayMs });
/** The rule, reporting these tokens ({input_tokens, output_tokens, cache_*_input_tokens}). */
export const withUsage = (r, usage) => ({ ...r, usage });
export const probe = () => rule({ kind: 'probe' }, { kind: 'text', text: 'ok' });
export const onPrompt = (text, reply, eventDelayMs = 0) =>
  rule({ kind: 'last_user_contains', text }, reply, eventDelayMs);
export const onToolResult = (reply) => rule({ kind: 'tool_result' }, reply);
export const onAny = (reply) => rule({ kind: 'any' }, reply);
export const echo = () => ({ kind: 'echo' });
export const text = (t) => ({ kind: 'text', text: t });
export const lookups = (...queries) => ({
  kind: 'tool_use',
  text: queries.length > 1 ? 'Looking them up.' : 'Looking it up.',
  calls: queries.map((query) => ({ name: 'mcp__client__lookup', input: { query } })),
});

/** Every child process started here, SIGTERMed if the test process exits with them running. */
const children = new Set();
process.on('exit', () => {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  }
});
function track(child) {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/** Resolves with the first line of `stream` matching `pattern` (its match), or rejects. */
function waitForLine(child, stream, pattern, what, timeoutMs = 30_000) {
  return new Promise((resolve, reject) => {
    let buffer = '';
    const timer = setTimeout(() => finish(new Error(`${what}: no line matching ${pattern} in time`)), timeoutMs);
    const onData = (chunk) => {
      buffer += chunk;
      let nl;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        const m = line.match(pattern);
        if (m) return finish(null, m);
      }
    };
    const onExit = (code, signal) => finish(new Error(`${what} exited (${code ?? signal}) before it was ready`));
    const finish = (err, m) => {
      clearTimeout(timer);
      stream.off('data', onData);
      child.off('exit', onExit);
      if (err) reject(err);
      else resolve(m);
    };
    stream.setEncoding('utf8');
    stream.on('data', onData);
    child.on('exit', onExit);
  });
}

/** Waits for a child process to exit; SIGKILLs it (and throws) after `timeoutMs`. */
async function waitExit(child, timeoutMs, what) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  let timer;
  const timeout = new Promise((resolve) => {
    timer = setTimeout(() => resolve(true), timeoutMs);
  });
  const timedOut = await Promise.race([exited.then(() => false), timeout]);
  clearTimeout(timer);
  if (timedOut) {
    child.kill('SIGKILL');
    await exited;
    throw new Error(`${what} did not exit within ${timeoutMs} ms of SIGTERM`);
  }
}

/** `/proc/PID/stat` as {state, ppid, start}, or null when the process is gone. */
function stat(pid) {
  let raw;
  try {
    raw = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  const fields = raw.slice(raw.lastIndexOf(')') + 2).split(' ');
  // start: field 22, the start time, tells a process from a later one that reuses its pid.
  return { state: fields[0], ppid: Number(fields[1]), start: fields[19] };
}

/** Whether a process runs (a zombie does not count: it is someone else's to reap). */
export function alive(pid, start = undefined) {
  const s = stat(pid);
  return s !== null && s.state !== 'Z' && (start === undefined || s.start === start);
}

/** Whether a process is the watchdog `ccwire serve` starts (`ccwire watchdog …`). */
function isWatchdog(pid) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[1] === 'watchdog';
  } catch {
    return false;
  }
}

/** The live direct children of a process: [{pid, start}], by pid. */
export function childrenOf(ppid) {
  const children = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const s = stat(entry);
    if (s && s.ppid === ppid && s.state !== 'Z') children.push({ pid: Number(entry), start: s.start });
  }
  return children.sort((a, b) => a.pid - b.pid);
}

/** The fake model server. */
export class Fake {
  static async start() {
    const child = track(spawn(FAKE_ANTHROPIC_BIN, ['--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] }));
    const [url] = await waitForLine(child, child.stdout, /^http:\/\/\S+$/, 'fake-anthropic');
    child.stdout.resume();
    return new Fake(child, url);
  }

  constructor(child, url) {
    this.child = child;
    this.url = url;
    this.exited = null;
    child.once('exit', (code, signal) => {
      this.exited = { code, signal, at: new Date().toISOString() };
    });
  }

  /** `fetch` on the control API, naming how the fake ended if it is gone. */
  async fetch(path, init) {
    try {
      return await fetch(`${this.url}${path}`, init);
    } catch (err) {
      const how = this.exited ? `; fake-anthropic exited: ${JSON.stringify(this.exited)}` : '';
      throw new Error(`${init?.method ?? 'GET'} ${path} failed: ${err.cause?.message ?? err.message}${how}`);
    }
  }

  /** Replaces the script (the probe rule goes first). */
  async script(...rules) {
    const response = await this.fetch('/_fake/script', {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ rules: [probe(), ...rules] }),
    });
    if (response.status !== 204) {
      throw new Error(`the fake refused the script: ${response.status} ${await response.text()}`);
    }
  }

  /** Every model call so far: [{body, last_user_text}]. */
  async calls() {
    const response = await this.fetch('/_fake/calls');
    if (!response.ok) throw new Error(`GET /_fake/calls: ${response.status}`);
    return response.json();
  }

  async lastCall() {
    const calls = await this.calls();
    if (calls.length === 0) throw new Error('the fake model was never called');
    return calls[calls.length - 1];
  }

  async stop() {
    this.child.kill('SIGTERM');
    await waitExit(this.child, 5_000, 'fake-anthropic');
  }
}

/** A private HOME for the CLI, with tmp/ and work/. */
export function makeHome() {
  const home = mkdtempSync(path.join(tmpdir(), 'ccwire-sdk-ts-'));
  mkdirSync(path.join(home, 'tmp'));
  mkdirSync(path.join(home, 'work'));
  return home;
}

/** Options of `ccwire/node`'s `Client` for the real CLI, offline on the fake, in `home`. */
export function clientOptions(home, fakeUrl, extra = {}) {
  const env = serveEnv(home, fakeUrl);
  // What serveEnv leaves out of the inherited environment is removed here too.
  for (const key of Object.keys(process.env)) if (!(key in env)) env[key] = null;
  return {
    claude: CLAUDE,
    model: ANTHROPIC_MODEL,
    maxTurns: 6,
    systemPrompt: '',
    includePartialMessages: true,
    cwd: path.join(home, 'work'),
    env,
    ...extra,
  };
}

/** The environment for `ccwire serve` (and so for the CLI it starts): offline, on the fake. */
export function serveEnv(home, fakeUrl) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(ANTHROPIC_|CLAUDE|OTEL_)/.test(k)) continue;
    env[k] = v;
  }
  Object.assign(env, {
    HOME: home,
    TMPDIR: path.join(home, 'tmp'),
    CLAUDE_CODE_TMPDIR: path.join(home, 'tmp'),
    ANTHROPIC_BASE_URL: fakeUrl,
    ANTHROPIC_API_KEY: 'dummy',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_AUTOUPDATER: '1',
    CLAUDE_CODE_SDK_READS_SESSION_STATE: '1',
  });
  return env;
}

/** A running `ccwire serve`. */
export class Gateway {
  /** `env` is added to the environment (a `null` value removes a variable). */
  static async start(home, fake, extraArgs = [], env = {}) {
    const args = [
      'serve',
      '--listen', '127.0.0.1:0',
      '--api-key', KEY,
      '--held-call-timeout', String(HELD_CALL_TIMEOUT_S),
      '--claude', CLAUDE,
      '--cwd', path.join(home, 'work'),
      ...extraArgs,
    ];
    const child = track(
      spawn(CCWIRE_BIN, args, {
        env: Object.fromEntries(
          Object.entries({ ...serveEnv(home, fake.url), ...env }).filter(([, v]) => v != null),
        ),
        stdio: ['ignore', 'ignore', 'pipe'],
      }),
    );
    const gateway = new Gateway(child);
    const ready = waitForLine(child, child.stderr, /listening on (http:\/\/\S+)/, 'ccwire serve');
    child.stderr.on('data', (chunk) => {
      gateway.log.push(chunk);
      // CCWIRE_SDK_TEST_LOG=1 shows the gateway's log (and its CLI processes') as it runs.
      if (process.env.CCWIRE_SDK_TEST_LOG) process.stderr.write(chunk);
    });
    const [, url] = await ready;
    gateway.url = url;
    return gateway;
  }

  constructor(child) {
    this.child = child;
    this.url = null;
    this.log = [];
    /** Every CLI process seen under this gateway: pid → start time. */
    this.seen = new Map();
  }

  get pid() {
    return this.child.pid;
  }

  /** The CLI processes (direct children of the gateway, but its watchdog) now. */
  cliPids() {
    const children = childrenOf(this.child.pid).filter(({ pid }) => !isWatchdog(pid));
    for (const { pid, start } of children) this.seen.set(pid, start);
    return children.map((c) => c.pid);
  }

  /** SIGTERM, wait for the exit; returns the CLI processes it had (seen at any time). */
  async stop() {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.cliPids();
      this.child.kill('SIGTERM');
      await waitExit(this.child, 20_000, 'ccwire serve');
    }
    return [...this.seen].map(([pid, start]) => ({ pid, start }));
  }

  /** The last lines the gateway logged, for failure messages. */
  tail(n = 30) {
    return this.log.join('').split('\n').slice(-n).join('\n');
  }
}

/** Waits until none of `procs` ({pid, start}) runs; returns the pids still running after `timeoutMs`. */
export async function waitGone(procs, timeoutMs = 5_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = procs.filter(({ pid, start }) => alive(pid, start)).map((p) => p.pid);
    if (left.length === 0 || Date.now() > deadline) return left;
    await sleep(100);
  }
}

/** Polls `check` (async, truthy = done) every 200 ms until `timeoutMs`; returns its last value. */
export async function poll(check, timeoutMs = 30_000, intervalMs = 200) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value || Date.now() > deadline) return value;
    await sleep(intervalMs);
  }
}

/** A rig for one test file: a fake, a HOME, a gateway; `restart()` keeps the fake and HOME. */
export class Rig {
  /** `extraArgs` go to every `ccwire serve` of the rig. */
  static async start(extraArgs = []) {
    const rig = new Rig();
    rig.extraArgs = extraArgs;
    rig.home = makeHome();
    try {
      rig.fake = await Fake.start();
      rig.gateway = await Gateway.start(rig.home, rig.fake, extraArgs);
    } catch (err) {
      await rig.stop().catch(() => {});
      throw err;
    }
    return rig;
  }

  /** Stops the gateway (every CLI process it had must be gone) and starts a new one; returns the old pids. */
  async restart() {
    const pids = await this.stopGateway();
    this.gateway = await Gateway.start(this.home, this.fake, this.extraArgs);
    return pids;
  }

  /** Stops the gateway; returns its CLI pids, throwing if any outlives it. */
  async stopGateway() {
    const procs = await this.gateway.stop();
    const left = await waitGone(procs);
    if (left.length) throw new Error(`CLI processes outlived the gateway: ${left.join(', ')}`);
    return procs.map((p) => p.pid);
  }

  /** Stops everything (idempotent) and removes the HOME. */
  async stop() {
    try {
      if (this.gateway) await this.stopGateway();
    } finally {
      if (this.fake) await this.fake.stop().catch(() => {});
      if (this.home) rmSync(this.home, { recursive: true, force: true });
    }
  }

  /** Runs `request` and returns the one CLI pid it started. */
  async newSession(request) {
    const before = new Set(this.gateway.cliPids());
    const result = await request();
    const added = this.gateway.cliPids().filter((p) => !before.has(p));
    if (added.length !== 1) {
      throw new Error(`expected one new CLI process, got [${added}]; the gateway's log:\n${this.gateway.tail()}`);
    }
    return { result, pid: added[0] };
  }
}

/** Text of all tool_result blocks in a model call's last user message. */
export function toolResultsOf(call) {
  // The last user message: the CLI may put system turns after it.
  const last = call.body.messages.findLast((m) => m.role === 'user');
  if (!Array.isArray(last.content)) return [];
  return last.content.filter((b) => b.type === 'tool_result');
}

/** Text without the `<system-reminder>` blocks the CLI appends to what it sends the model. */
export const withoutReminders = (s) => s.replace(/<system-reminder>[\s\S]*?<\/system-reminder>/g, '').trim();

/** The plain text of a tool_result's content, without the CLI's system reminders. */
export function resultText(block) {
  const raw =
    typeof block.content === 'string' ? block.content : (block.content ?? []).map((p) => p.text ?? '').join('');
  return withoutReminders(raw);
}

export { sleep };
