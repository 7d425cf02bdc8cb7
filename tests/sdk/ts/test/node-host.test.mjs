// `ccwire/node`: the npm package runs the real Claude Code CLI from Node, on the fake model —
// permissions, hooks, an in-process MCP tool, an external MCP server's elicitation, typed
// control requests, an interrupt, a CLI that dies, and a clean close.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { Client, ProcessExitedError, claudeArgs, claudeInitialize } from '../../../../bindings/js/client.js';
import { Fake, alive, clientOptions, echo, makeHome, onPrompt, onToolResult, text } from './rig.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const askServer = path.resolve(here, '../../../mcp/ask-server.mjs');

let fake;
let home;

before(async () => {
  fake = await Fake.start();
  home = makeHome();
});

after(async () => {
  await fake?.stop();
  if (home) rmSync(home, { recursive: true, force: true });
});

/** Options for a client of the real CLI, offline on the fake. */
function options(extra = {}) {
  return clientOptions(home, fake.url, extra);
}

const toolUse = (name, input) => ({ kind: 'tool_use', calls: [{ name, input }] });

async function collect(turn) {
  const chunks = [];
  for await (const chunk of turn) chunks.push(chunk);
  return chunks;
}

test('the arguments are the ones the Rust ClaudeOptions gives', () => {
  const args = claudeArgs({
    systemPrompt: '',
    model: 'sonnet',
    maxTurns: 3,
    allowedTools: ['Read', 'mcp__calc'],
    permissionPrompts: true,
    sdkMcpServers: ['calc'],
    mcpServers: { files: { type: 'stdio', command: 'files-server' } },
    settingSources: [],
    addDirs: ['/data'],
    thinking: { budgetTokens: 4096 },
    includePartialMessages: true,
    resume: '-id',
    // A client's own option: not the CLI's.
    cwd: '/tmp',
  });
  // The same list as core/src/args.rs's `the_npm_client_builds_the_same_arguments`.
  const config = args.indexOf('--mcp-config') + 1;
  assert.deepEqual(JSON.parse(args[config]), {
    mcpServers: { calc: { type: 'sdk', name: 'calc' }, files: { type: 'stdio', command: 'files-server' } },
  });
  args[config] = '(config)';
  assert.deepEqual(args, [
    '--output-format', 'stream-json', '--verbose', '--input-format', 'stream-json',
    '--model', 'sonnet', '--max-turns', '3',
    '--allowedTools', 'Read,mcp__calc', '--permission-prompt-tool', 'stdio',
    '--mcp-config', '(config)',
    '--setting-sources=', '--max-thinking-tokens', '4096',
    '--include-partial-messages', '--resume=-id', '--add-dir', '/data',
  ]);
  // What can be large goes in `initialize` (the Rust `CliArgs::initialize`).
  assert.deepEqual(claudeInitialize({ systemPrompt: '', model: 'sonnet' }), { systemPrompt: [''] });
  assert.deepEqual(
    claudeInitialize({ systemPrompt: { append: 'More.' }, agents: { a: { description: 'd', prompt: 'p' } }, jsonSchema: { type: 'object' } }),
    { appendSystemPrompt: 'More.', agents: { a: { description: 'd', prompt: 'p' } }, jsonSchema: { type: 'object' } },
  );
  assert.throws(() => claudeInitialize({ jsonSchema: 'object' }), /claudeInitialize: jsonSchema must be a JSON Schema object/);
  assert.throws(() => claudeArgs({ thinking: 'lots' }), /claudeArgs: thinking must be/);
  assert.throws(() => claudeArgs({ allowedTools: 'Read' }), /allowedTools must be an array of strings/);
});

test('a JS app drives the CLI: permissions, hooks, an in-process tool, typed requests, interrupt', async (t) => {
  await fake.script(
    onPrompt('PLEASE-SHELL', toolUse('Bash', { command: `node -p "'from-' + 'bash'"`, description: 'greet' })),
    onPrompt('PLEASE-ADD', toolUse('mcp__calc__add', { a: 2, b: 3 })),
    onToolResult(echo()),
    onPrompt('PLEASE-GREET', text('Hello from the fake model.')),
  );
  const asked = [];
  const hooked = [];
  const client = await Client.connect(
    options({
      canUseTool: async (request) => {
        asked.push(request.tool_name);
        return { behavior: 'allow' };
      },
      hooks: [{ event: 'PreToolUse', matcher: 'Bash', handler: async (input) => (hooked.push(input.tool_name), {}) }],
      toolServers: {
        calc: [
          {
            name: 'add',
            description: 'Adds two numbers.',
            inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } },
            handler: async ({ a, b }) => ({ content: [{ type: 'text', text: `sum ${a + b}` }] }),
          },
        ],
      },
      allowedTools: ['mcp__calc__add'],
    }),
  );
  t.after(() => client.close());
  assert.ok(client.serverInfo.commands.length > 0, 'initialize answered');

  let chunks = await collect(client.query('PLEASE-GREET me'));
  assert.equal(chunks.at(-1).type, 'turn_complete');
  assert.equal(chunks.at(-1).result, 'Hello from the fake model.');
  assert.ok(chunks.some((c) => c.type === 'text_delta'), 'streamed');

  chunks = await collect(client.query('PLEASE-SHELL: run it'));
  assert.deepEqual(asked, ['Bash']);
  assert.deepEqual(hooked, ['Bash']);
  const bash = chunks.find((c) => c.type === 'tool_result');
  assert.match(JSON.stringify(bash.content), /from-bash/);

  chunks = await collect(client.query('PLEASE-ADD 2 and 3'));
  const sum = chunks.find((c) => c.type === 'tool_result');
  assert.match(JSON.stringify(sum.content), /sum 5/);
  assert.equal(sum.is_error, false);

  const settings = await client.request({ subtype: 'get_settings' });
  assert.equal(typeof settings, 'object');
  const usage = await client.request({ subtype: 'get_context_usage' });
  assert.ok(usage);
  await client.interrupt();

  const pid = client.pid;
  const exit = await client.close();
  assert.equal(exit.code, 0);
  assert.equal(alive(pid), false, 'no process is left');
});

test("an external MCP server's elicitation is answered by onElicitation", async (t) => {
  await fake.script(onPrompt('PLEASE-SAVE', toolUse('mcp__ask__ask', {})), onToolResult(echo()));
  const client = await Client.connect(
    options({
      mcpServers: { ask: { type: 'stdio', command: process.execPath, args: [askServer] } },
      strictMcpConfig: true,
      allowedTools: ['mcp__ask__ask'],
      onElicitation: async (request) => {
        assert.equal(request.server, 'ask');
        return { action: 'accept', content: { folder: 'inbox' } };
      },
    }),
  );
  t.after(() => client.close());
  const chunks = await collect(client.query('PLEASE-SAVE the note'));
  assert.ok(chunks.some((c) => c.type === 'elicitation_request'));
  const result = chunks.find((c) => c.type === 'tool_result');
  assert.match(JSON.stringify(result.content), /folder: inbox/);
});

test('a CLI that dies mid-turn ends the turn with a ProcessExitedError', async () => {
  await fake.script(onPrompt('PLEASE-WAIT', text('never seen'), 5_000));
  const client = await Client.connect(options());
  const turn = client.query('PLEASE-WAIT a while');
  const first = await turn.next();
  assert.equal(first.done, false);
  process.kill(client.pid, 'SIGKILL');
  await assert.rejects(
    (async () => {
      for await (const _ of turn);
    })(),
    (err) => err instanceof ProcessExitedError && err.exit.signal === 'SIGKILL',
  );
  await client.close();
});

test('a system prompt of any size and an output schema go in initialize', async (t) => {
  const marker = 'END-OF-THE-LONG-PROMPT';
  await fake.script(
    { when: { kind: 'system_contains', text: marker }, reply: toolUse('StructuredOutput', { answer: 42 }) },
    { when: { kind: 'any' }, reply: text('the prompt did not arrive') },
  );
  const client = await Client.connect(
    options({
      systemPrompt: 'All work and no play. '.repeat(48 << 10) + marker,
      jsonSchema: { type: 'object', properties: { answer: { type: 'integer' } }, required: ['answer'] },
    }),
  );
  t.after(() => client.close());
  const chunks = await collect(client.query('what is the answer?'));
  const done = chunks.at(-1);
  assert.equal(done.type, 'turn_complete');
  assert.deepEqual(done.structured_output, { answer: 42 });
});
