// The official TypeScript Agent SDK (@anthropic-ai/claude-agent-sdk) with `ccwire play` as its
// CLI: an app runs a recorded session with no model, the example of docs/USING.md runs as written,
// and a changed decision fails with a clear message.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { query } from '@anthropic-ai/claude-agent-sdk';
import { CCWIRE_BIN } from './rig.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../../../..');
const TAPE = path.join(repo, 'tests/corpus/b_bash_allow.jsonl');
const PROMPT = 'Run echo hi in the shell, writing it to out.txt.';

/** A `claude` that plays the tape, as the script of docs/USING.md does. */
function player(...options) {
  const dir = mkdtempSync(path.join(tmpdir(), 'ccwire-play-'));
  const script = path.join(dir, 'claude-from-tape');
  writeFileSync(
    script,
    `#!/bin/sh\nexec '${CCWIRE_BIN}' play '${TAPE}' --instant ${options.join(' ')} -- "$@"\n`,
  );
  chmodSync(script, 0o755);
  return script;
}

function recordedResult() {
  for (const line of readFileSync(TAPE, 'utf8').split('\n').filter(Boolean)) {
    const entry = JSON.parse(line);
    if (entry.msg?.type === 'result') return entry.msg.result;
  }
  throw new Error('the tape has a result');
}

async function* prompt() {
  yield { type: 'user', message: { role: 'user', content: PROMPT }, parent_tool_use_id: null, session_id: '' };
}

async function run(cli, canUseTool, stderr = []) {
  const session = query({
    prompt: prompt(),
    options: { pathToClaudeCodeExecutable: cli, canUseTool, stderr: (d) => stderr.push(d) },
  });
  try {
    for await (const message of session) {
      if (message.type === 'result') return message;
    }
  } finally {
    session.close();
  }
  throw new Error('no result');
}

test('an app on the SDK gets the recorded session', async () => {
  const asked = [];
  const result = await run(player('--verify'), async (name, input) => {
    asked.push([name, input.command]);
    return { behavior: 'allow', updatedInput: input };
  });
  assert.equal(result.subtype, 'success');
  assert.equal(result.result, recordedResult());
  assert.deepEqual(asked, [['Bash', 'echo hi > out.txt']]);
});

test('verify fails an app that denies what was allowed', async () => {
  const stderr = [];
  await assert.rejects(
    run(player('--verify'), async () => ({ behavior: 'deny', message: 'No shell here.' }), stderr),
  );
  const said = stderr.join('');
  assert.ok(said.includes('diverged') && said.includes('"deny"') && said.includes('No shell here.'), said);
});

test("the example of docs/USING.md runs and prints what it says", () => {
  const readme = readFileSync(path.join(repo, 'docs/USING.md'), 'utf8');
  const section = readme.split('## Testing your app against recordings')[1].split('\n## ')[0];
  const script = /```sh\n([\s\S]*?)```/.exec(section)[1];
  const code = /```js\n([\s\S]*?)```/.exec(section)[1];
  const printed = /```text\n([\s\S]*?)```/.exec(section)[1];
  // Beside this package's node_modules, so the example's import resolves as in an app.
  const dir = mkdtempSync(path.join(here, '..', '.readme-'));
  writeFileSync(
    path.join(dir, 'claude-from-tape'),
    script.replace('exec ccwire', `exec '${CCWIRE_BIN}'`).replace('tape.jsonl', TAPE),
  );
  chmodSync(path.join(dir, 'claude-from-tape'), 0o755);
  writeFileSync(path.join(dir, 'example.mjs'), code);
  try {
    const out = execFileSync(process.execPath, ['example.mjs'], {
      cwd: dir,
      encoding: 'utf8',
      timeout: 30_000,
    });
    assert.equal(out, printed);
  } finally {
    execFileSync('rm', ['-rf', dir]);
  }
});

function tapePlayer(tape, ...options) {
  const dir = mkdtempSync(path.join(tmpdir(), 'ccwire-play-'));
  const script = path.join(dir, `claude-${tape}`);
  writeFileSync(
    script,
    `#!/bin/sh\nexec '${CCWIRE_BIN}' play '${path.join(repo, 'tests/corpus', `${tape}.jsonl`)}' --instant ${options.join(' ')} -- "$@"\n`,
  );
  chmodSync(script, 0o755);
  return script;
}

function resultOf(tape) {
  for (const line of readFileSync(path.join(repo, 'tests/corpus', `${tape}.jsonl`), 'utf8').split('\n').filter(Boolean)) {
    const entry = JSON.parse(line);
    if (entry.msg?.type === 'result') return entry.msg.result ?? '';
  }
  throw new Error('the tape has a result');
}

/** One turn with these options; `onMessage` sees every message (with the session). */
async function oneTurn(text, options, onMessage = async () => {}) {
  // The input stays open until the turn is over, so the session can still be interrupted (the
  // SDK closes the CLI's stdin when its input ends).
  let finish;
  const over = new Promise((resolve) => {
    finish = resolve;
  });
  async function* input() {
    yield { type: 'user', message: { role: 'user', content: text }, parent_tool_use_id: null, session_id: '' };
    await over;
  }
  const session = query({ prompt: input(), options });
  try {
    for await (const message of session) {
      await onMessage(session, message);
      if (message.type === 'result') return message;
    }
  } finally {
    finish();
    session.close();
  }
  throw new Error('no result');
}

test('hooks are called with the recorded inputs', async () => {
  const calls = [];
  const result = await oneTurn('Echo something in the shell.', {
    pathToClaudeCodeExecutable: tapePlayer('i_hook_pretooluse'),
    hooks: {
      PreToolUse: [{ matcher: 'Bash', hooks: [async (input) => {
        calls.push(['PreToolUse', input.tool_name]);
        return { hookSpecificOutput: { hookEventName: 'PreToolUse', permissionDecision: 'allow',
          permissionDecisionReason: 'allowed by the recording hook' } };
      }] }],
      PostToolUse: [{ hooks: [async (input) => {
        calls.push(['PostToolUse', input.tool_name]);
        return {};
      }] }],
    },
  });
  assert.equal(result.result, resultOf('i_hook_pretooluse'));
  assert.deepEqual(calls, [['PreToolUse', 'Bash'], ['PostToolUse', 'Bash']]);
});

test('an in-process MCP tool is called by the recorded model', async () => {
  const { createSdkMcpServer, tool } = await import('@anthropic-ai/claude-agent-sdk');
  const { z } = await import('zod');
  const called = [];
  const add = tool('add', 'Add two numbers', { a: z.number(), b: z.number() }, async ({ a, b }) => {
    called.push([a, b]);
    return { content: [{ type: 'text', text: String(a + b) }] };
  });
  const result = await oneTurn('Use the calc tool to add 2 and 3.', {
    pathToClaudeCodeExecutable: tapePlayer('d_sdk_mcp'),
    mcpServers: { calc: createSdkMcpServer({ name: 'calc', version: '1.0.0', tools: [add] }) },
    allowedTools: ['mcp__calc__add'],
  });
  assert.deepEqual(called, [[2, 3]]);
  assert.equal(result.result, resultOf('d_sdk_mcp'));
});

test('an interrupt is answered from the tape', async () => {
  let interrupted = false;
  const result = await oneTurn(
    'Sleep for a while in the shell.',
    { pathToClaudeCodeExecutable: tapePlayer('g_interrupt_tool', '--verify') },
    async (session, message) => {
      if (!interrupted && message.type === 'assistant' && message.message.content.some((b) => b.type === 'tool_use')) {
        interrupted = true;
        await session.interrupt();
      }
    },
  );
  assert.ok(interrupted);
  assert.equal(result.subtype, 'error_during_execution');
});
