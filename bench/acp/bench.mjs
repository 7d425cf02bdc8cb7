// `ccwire acp` beside @agentclientprotocol/claude-agent-acp, the TypeScript adapter, on one
// scripted scenario in one run: the same client (@agentclientprotocol/sdk), the same Claude Code
// CLI, the same fake model. Prints each measure for both and their ratio.
//
//   bench/acp/run.sh [ROUNDS]
//
// - start: process start until `initialize` is answered;
// - first chunk: `session/new` sent until the first `agent_message_chunk` of a prompt sent as
//   soon as the session exists (the CLI's start included);
// - turn: a prompt with a one-line answer, sent to a warm session, until its answer;
// - memory: resident memory of the adapter process alone, and of the adapter with its CLIs,
//   with one and with four sessions open (per session: the difference, over three).

import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';

import { client, methods, ndJsonStream } from '@agentclientprotocol/sdk';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../..');
const CCWIRE = process.env.CCWIRE_BIN || path.join(repo, 'target/release/ccwire');
const FAKE = process.env.FAKE_ANTHROPIC_BIN || path.join(repo, 'target/release/fake-anthropic');
const CLAUDE = process.env.CCWIRE_CLAUDE || path.join(repo, 'tests/.cli/node_modules/.bin/claude');
const ANCHOR = path.join(here, 'node_modules/@agentclientprotocol/claude-agent-acp/dist/index.js');
const ROUNDS = Number(process.argv[2] || 5);
const TURNS = 10;

const home = mkdtempSync(path.join(tmpdir(), 'ccwire-bench-acp-'));
mkdirSync(path.join(home, 'tmp'));
mkdirSync(path.join(home, 'work'));

function env(fakeUrl) {
  const out = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^(ANTHROPIC_|CLAUDE|OTEL_)/.test(k)) out[k] = v;
  return Object.assign(out, {
    HOME: home,
    TMPDIR: path.join(home, 'tmp'),
    ANTHROPIC_BASE_URL: fakeUrl,
    ANTHROPIC_API_KEY: 'dummy',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_AUTOUPDATER: '1',
    // The TypeScript adapter's CLI: the same one ccwire starts.
    CLAUDE_CODE_EXECUTABLE: CLAUDE,
    // The TypeScript adapter starts the CLI allowing bypassPermissions, which the CLI refuses
    // to root outside a sandbox (this machine's CI runs as root).
    IS_SANDBOX: '1',
  });
}

async function startFake() {
  const child = spawn(FAKE, ['--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise((resolve, reject) => {
    let buffer = '';
    child.stdout.setEncoding('utf8').on('data', (chunk) => {
      buffer += chunk;
      const m = buffer.match(/^(http:\/\/\S+)$/m);
      if (m) resolve(m[1]);
    });
    child.once('exit', () => reject(new Error('fake-anthropic exited')));
  });
  const rules = [
    { when: { kind: 'probe' }, reply: { kind: 'text', text: 'ok' }, event_delay_ms: 0 },
    { when: { kind: 'any' }, reply: { kind: 'text', text: 'Done.' }, event_delay_ms: 0 },
  ];
  const put = await fetch(`${url}/_fake/script`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ rules }),
  });
  if (put.status !== 204) throw new Error(`the fake refused the script: ${put.status}`);
  return { child, url };
}

/** Resident memory (KiB) of `pid` and of it with every descendant. */
function rss(pid) {
  const kib = (p) => {
    try {
      const m = readFileSync(`/proc/${p}/status`, 'utf8').match(/^VmRSS:\s+(\d+)/m);
      return m ? Number(m[1]) : 0;
    } catch {
      return 0;
    }
  };
  const parent = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      parent.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {}
  }
  const under = (p) => {
    for (let q = parent.get(p); q; q = parent.get(q)) if (q === pid) return true;
    return false;
  };
  let tree = kib(pid);
  for (const p of parent.keys()) if (under(p)) tree += kib(p);
  return { own: kib(pid), tree };
}

const adapters = {
  ccwire: () => spawn(CCWIRE, ['acp', '--claude', CLAUDE, '--setting-sources', ''], { stdio: ['pipe', 'pipe', 'ignore'], env: env(fake.url) }),
  'claude-agent-acp': () => spawn(process.execPath, [ANCHOR], { stdio: ['pipe', 'pipe', 'ignore'], env: { ...env(fake.url), CLAUDE_CONFIG_DIR: path.join(home, '.claude') } }),
};

async function round(name) {
  const t0 = performance.now();
  const child = adapters[name]();
  const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const firstChunk = new Map();
  const app = client({ name: 'bench' })
    .onNotification(methods.client.session.update, ({ params }) => {
      if (params.update.sessionUpdate === 'agent_message_chunk' && !firstChunk.has(params.sessionId)) {
        firstChunk.set(params.sessionId, performance.now());
      }
    })
    .onRequest(methods.client.session.requestPermission, () => ({ outcome: { outcome: 'cancelled' } }));
  const out = {};
  await app.connectWith(stream, async (ctx) => {
    await ctx.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
    out.start = performance.now() - t0;
    const cwd = path.join(home, 'work');
    const ask = (sessionId) => ctx.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'Say done.' }] });
    const tNew = performance.now();
    const { sessionId } = await ctx.request(methods.agent.session.new, { cwd, mcpServers: [] });
    await ask(sessionId);
    out.firstChunk = firstChunk.get(sessionId) - tNew;
    const turns = [];
    for (let i = 0; i < TURNS; i++) {
      const t = performance.now();
      await ask(sessionId);
      turns.push(performance.now() - t);
    }
    turns.sort((a, b) => a - b);
    out.turn = turns[Math.floor(turns.length / 2)];
    const one = rss(child.pid);
    const more = await Promise.all([0, 1, 2].map(() => ctx.request(methods.agent.session.new, { cwd, mcpServers: [] })));
    await Promise.all(more.map((s) => ask(s.sessionId)));
    const four = rss(child.pid);
    out.own1 = one.own / 1024;
    out.ownPerSession = (four.own - one.own) / 3 / 1024;
    out.tree1 = one.tree / 1024;
    out.treePerSession = (four.tree - one.tree) / 3 / 1024;
  });
  child.stdin.end();
  await new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      resolve();
    }, 10_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  return out;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const fake = await startFake();
try {
  const results = { ccwire: [], 'claude-agent-acp': [] };
  // Alternating, after one round each to warm the file cache.
  for (const name of Object.keys(results)) await round(name);
  for (let i = 0; i < ROUNDS; i++) for (const name of Object.keys(results)) results[name].push(await round(name));
  const rows = [
    ['start to initialize answered (ms)', 'start'],
    ['session/new to first agent_message_chunk (ms)', 'firstChunk'],
    ['a warm turn, prompt to answer (ms)', 'turn'],
    ['adapter resident memory, one session (MiB)', 'own1'],
    ['adapter resident memory per further session (MiB)', 'ownPerSession'],
    ['adapter + CLIs resident memory, one session (MiB)', 'tree1'],
    ['adapter + CLIs resident memory per further session (MiB)', 'treePerSession'],
  ];
  console.log(`rounds: ${ROUNDS} (medians); CLI ${CLAUDE}`);
  console.log('| measure | ccwire acp | claude-agent-acp | ratio |');
  console.log('|---|---:|---:|---:|');
  for (const [label, key] of rows) {
    const a = median(results.ccwire.map((r) => r[key]));
    const b = median(results['claude-agent-acp'].map((r) => r[key]));
    console.log(`| ${label} | ${a.toFixed(1)} | ${b.toFixed(1)} | ${(a / b).toFixed(2)} |`);
  }
} finally {
  fake.child.kill('SIGTERM');
  rmSync(home, { recursive: true, force: true });
}
