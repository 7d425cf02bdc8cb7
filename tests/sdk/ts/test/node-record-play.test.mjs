// `ccwire/node` records tapes and `ccwire/play` plays them, with no Rust binary: a JS app's
// session on the real CLI is recorded, replays to the chunks the app saw, and plays back as
// the CLI of the same app (checked line by line) and of the official TypeScript Agent SDK.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { query } from '@anthropic-ai/claude-agent-sdk';

import { replayTranscript } from '../../../../bindings/js/node.js';
import { Client } from '../../../../bindings/js/client.js';
import { Fake, clientOptions, echo, makeHome, onPrompt, onToolResult, text } from './rig.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../../../..');
const PLAY = path.join(repo, 'bindings/js/play-cli.js');

let fake;
let home;
let work;

before(async () => {
  fake = await Fake.start();
  home = makeHome();
  work = mkdtempSync(path.join(tmpdir(), 'ccwire-tapes-'));
});

after(async () => {
  await fake?.stop();
  for (const dir of [home, work]) if (dir) rmSync(dir, { recursive: true, force: true });
});

function options(extra = {}) {
  return clientOptions(home, fake.url, extra);
}

async function collect(turn) {
  const chunks = [];
  for await (const chunk of turn) chunks.push(chunk);
  return chunks;
}

/** A `claude` executable that plays `tape` with `ccwire-play`. */
function player(tape, ...flags) {
  const script = path.join(work, `claude-${path.basename(tape)}`);
  writeFileSync(script, `#!/bin/sh\nexec '${process.execPath}' '${PLAY}' '${tape}' ${flags.join(' ')} -- "$@"\n`);
  chmodSync(script, 0o755);
  return script;
}

/** The session the tests record: a greeting, then a Bash call the app allows. */
async function session(clientOptions) {
  const asked = [];
  const client = await Client.connect({
    ...clientOptions,
    canUseTool: async (request) => (asked.push(request.tool_name), { behavior: 'allow' }),
  });
  const turns = [];
  try {
    turns.push(await collect(client.query('PLEASE-GREET me')));
    turns.push(await collect(client.query('PLEASE-SHELL: run it')));
  } finally {
    await client.close();
  }
  return { turns, asked };
}

test('a session recorded from Node replays and plays back as its CLI', async () => {
  await fake.script(
    onPrompt('PLEASE-SHELL', { kind: 'tool_use', calls: [{ name: 'Bash', input: { command: `node -p "'recorded-' + 'shell'"`, description: 'greet' } }] }),
    onToolResult(echo()),
    onPrompt('PLEASE-GREET', text('Hello from the recording.')),
  );
  const tape = path.join(work, 'node-session.jsonl');
  const live = await session(options({ record: tape }));
  assert.deepEqual(live.asked, ['Bash']);
  assert.equal(live.turns[0].at(-1).result, 'Hello from the recording.');

  // The transcript format of `ccwire record`: every line has its direction and time, and
  // the CLI's lines are its stdout's messages.
  const lines = readFileSync(tape, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  assert.ok(lines.every((l) => (l.dir === 'in' || l.dir === 'out') && Number.isInteger(l.t_ms) && l.msg), tape);
  assert.equal(lines[0].dir, 'in');
  assert.equal(lines[0].msg.request.subtype, 'initialize');
  assert.ok(lines.some((l) => l.dir === 'out' && l.msg.type === 'result'));

  // Replayed, it gives the chunks the app saw (the text of both turns, the tool's result).
  const replayed = replayTranscript(readFileSync(tape));
  const results = replayed.filter((c) => c.type === 'turn_complete').map((c) => c.result);
  assert.deepEqual(results, live.turns.map((t) => t.at(-1).result));
  const shell = (chunks) => JSON.stringify(chunks.find((c) => c.type === 'tool_result')?.content);
  assert.match(shell(replayed), /recorded-shell/);

  // Played as the CLI of the same app, with every host line checked against the recording.
  const played = await session({ ...options(), claude: player(tape, '--verify', '--instant') });
  assert.deepEqual(played.asked, ['Bash']);
  assert.deepEqual(
    played.turns.map((t) => t.at(-1).result),
    live.turns.map((t) => t.at(-1).result),
  );
  assert.match(shell(played.turns[1]), /recorded-shell/);
});

test('a changed decision is a divergence: the player says where and ends the CLI', async () => {
  const tape = path.join(work, 'node-session.jsonl');
  const client = await Client.connect({
    ...options(),
    claude: player(tape, '--verify', '--instant'),
    canUseTool: async () => ({ behavior: 'deny', message: 'Not this time.' }),
  });
  await collect(client.query('PLEASE-GREET me'));
  const turn = collect(client.query('PLEASE-SHELL: run it'));
  await assert.rejects(turn, (err) => {
    assert.match(err.stderr ?? String(err), /diverged/);
    assert.match(err.stderr ?? '', /Not this time/);
    return true;
  });
  await client.close().catch(() => {});
});

test('the official Agent SDK runs on a tape through ccwire/play, with no Rust binary', async () => {
  const tape = path.join(repo, 'tests/corpus/b_bash_allow.jsonl');
  const recorded = readFileSync(tape, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l))
    .find((e) => e.msg?.type === 'result').msg.result;
  async function* prompt() {
    yield {
      type: 'user',
      message: { role: 'user', content: 'Run echo hi in the shell, writing it to out.txt.' },
      parent_tool_use_id: null,
      session_id: '',
    };
  }
  const asked = [];
  const session = query({
    prompt: prompt(),
    options: {
      // The player itself, named by the variables it reads: no script in between.
      pathToClaudeCodeExecutable: PLAY,
      env: { ...process.env, CCWIRE_TAPE: tape, CCWIRE_PLAY: 'verify,instant' },
      canUseTool: async (name, input) => {
        asked.push([name, input.command]);
        return { behavior: 'allow', updatedInput: input };
      },
    },
  });
  let result;
  try {
    for await (const message of session) {
      if (message.type === 'result') {
        result = message;
        break;
      }
    }
  } finally {
    session.close();
  }
  assert.equal(result?.subtype, 'success');
  assert.equal(result.result, recorded);
  assert.deepEqual(asked, [['Bash', 'echo hi > out.txt']]);
});

test("the package README's Agent SDK example runs on a tape and prints what it says", async () => {
  const readme = readFileSync(path.join(repo, 'bindings/README.md'), 'utf8');
  const section = readme.split('## Recording and playing sessions')[1].split('\n## ')[0];
  const code = [...section.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]).find((c) => c.includes('claude-agent-sdk'));
  const printed = /```text\n([\s\S]*?)```/.exec(section)[1];
  // Beside this package's node_modules (the SDK), with the package itself installed as `ccwire`.
  const dir = mkdtempSync(path.join(here, '..', '.readme-'));
  try {
    mkdirSync(path.join(dir, 'node_modules'));
    symlinkSync(path.join(repo, 'bindings'), path.join(dir, 'node_modules', 'ccwire'));
    writeFileSync(path.join(dir, 'example.mjs'), code);
    copyFileSync(path.join(repo, 'tests/corpus/b_bash_allow.jsonl'), path.join(dir, 'tape.jsonl'));
    const out = execFileSync(process.execPath, ['example.mjs'], { cwd: dir, encoding: 'utf8', timeout: 30_000 });
    assert.equal(out, printed);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
