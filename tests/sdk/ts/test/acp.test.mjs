// `ccwire acp` driven by the official ACP client SDK (@agentclientprotocol/sdk), as an editor
// drives it, in front of the real Claude Code CLI and the scripted fake model.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { client, methods, ndJsonStream } from '@agentclientprotocol/sdk';

import { CCWIRE_BIN, CLAUDE, Fake, echo, makeHome, onPrompt, onToolResult, rule, serveEnv, text } from './rig.mjs';

const ASK_SERVER = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../mcp/ask-server.mjs');

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

/** Every agent started, killed at the end if a failed test left it running. */
const agents = new Set();
after(() => {
  for (const agent of agents) if (agent.child.exitCode === null) agent.child.kill('SIGKILL');
});

/** A running `ccwire acp`, its stdio as an ACP stream. */
function startAgent(args = [], { claude = CLAUDE } = {}) {
  // ACP_TEST_RECORD=DIR keeps the sessions' CLI transcripts, to look at a failure.
  if (process.env.ACP_TEST_RECORD && !args.includes('--record')) args = [...args, '--record', process.env.ACP_TEST_RECORD];
  // The settings files as an editor's user has them (the HOME and the work directories are the
  // test's): "always allow" saves its rule in the project's local settings.
  const child = spawn(CCWIRE_BIN, ['acp', '--claude', claude, ...args], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: serveEnv(home, fake.url),
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk) => {
    stderr += chunk;
    if (process.env.CCWIRE_SDK_TEST_LOG) process.stderr.write(chunk);
  });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const agent = { child, stream, exited, stderr: () => stderr };
  agents.add(agent);
  return agent;
}

/**
 * An editor: records every `session/update` per session, answers permission requests with
 * `decide(request)` (an option id, or null for cancelled), and runs `op(ctx, editor)`. With
 * `offers`, it is an editor whose files and terminals the agent uses: its buffers
 * (`editor.buffers`, path → unsaved text) are read before the disk, writes go to the disk and
 * are kept in `editor.writes`, commands run in its terminals (`editor.terminals`).
 */
async function asEditor(agent, op, decide = () => 'allow', offers = false) {
  const editor = { updates: new Map(), asked: [], buffers: new Map(), writes: [], terminals: new Map(), offers };
  editor.of = (sessionId) => editor.updates.get(sessionId) ?? [];
  editor.text = (sessionId) =>
    editor
      .of(sessionId)
      .filter((u) => u.sessionUpdate === 'agent_message_chunk')
      .map((u) => u.content.text)
      .join('');
  const app = client({ name: 'ccwire-acp-test' })
    .onNotification(methods.client.session.update, ({ params }) => {
      if (!editor.updates.has(params.sessionId)) editor.updates.set(params.sessionId, []);
      editor.updates.get(params.sessionId).push(params.update);
    })
    .onRequest(methods.client.session.requestPermission, async ({ params }) => {
      editor.asked.push(params);
      const optionId = await decide(params);
      return optionId === null
        ? { outcome: { outcome: 'cancelled' } }
        : { outcome: { outcome: 'selected', optionId } };
    })
    .onRequest(methods.client.fs.readTextFile, async ({ params }) => {
      const text = editor.buffers.get(params.path) ?? readFileSync(params.path, 'utf8');
      const lines = text.split('\n');
      const from = (params.line ?? 1) - 1;
      return { content: lines.slice(from, params.limit ? from + params.limit : undefined).join('\n') };
    })
    .onRequest(methods.client.fs.writeTextFile, async ({ params }) => {
      editor.writes.push({ path: params.path, content: params.content });
      editor.buffers.delete(params.path);
      writeFileSync(params.path, params.content);
      return {};
    })
    .onRequest(methods.client.terminal.create, async ({ params }) => {
      const id = `term-${editor.terminals.size + 1}`;
      const child = spawn(params.command, params.args, { cwd: params.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
      const terminal = { params, output: '', killed: false };
      for (const stream of [child.stdout, child.stderr]) stream.setEncoding('utf8').on('data', (d) => (terminal.output += d));
      terminal.exit = new Promise((resolve) =>
        child.once('close', (code, signal) => resolve({ exitCode: code, signal })),
      );
      terminal.kill = () => {
        terminal.killed = true;
        child.kill('SIGKILL');
      };
      editor.terminals.set(id, terminal);
      return { terminalId: id };
    })
    .onRequest(methods.client.terminal.waitForExit, async ({ params }) => editor.terminals.get(params.terminalId).exit)
    .onRequest(methods.client.terminal.output, async ({ params }) => {
      const terminal = editor.terminals.get(params.terminalId);
      return { output: terminal.output, truncated: false, exitStatus: await terminal.exit };
    })
    .onRequest(methods.client.terminal.kill, async ({ params }) => {
      editor.terminals.get(params.terminalId).kill();
      return {};
    })
    .onRequest(methods.client.terminal.release, async ({ params }) => {
      editor.terminals.get(params.terminalId).released = true;
      return {};
    });
  return app.connectWith(agent.stream, (ctx) => op(ctx, editor));
}

async function initialize(ctx, offers = false) {
  return ctx.request(methods.agent.initialize, {
    protocolVersion: 1,
    clientCapabilities: { fs: { readTextFile: offers, writeTextFile: offers }, terminal: offers },
  });
}

async function newSession(ctx, extra = {}) {
  const work = mkdtempSync(path.join(home, 'work-'));
  const session = await ctx.request(methods.agent.session.new, { cwd: work, mcpServers: [], ...extra });
  return { ...session, work };
}

const prompt = (ctx, sessionId, ...blocks) =>
  ctx.request(methods.agent.session.prompt, {
    sessionId,
    prompt: blocks.map((b) => (typeof b === 'string' ? { type: 'text', text: b } : b)),
  });

async function stop(agent) {
  agent.child.stdin.end();
  const exit = await agent.exited;
  assert.deepEqual(exit, { code: 0, signal: null }, agent.stderr());
}

/** A command that runs for 30 seconds (the CLI refuses a bare `sleep 30`). */
const SLEEP = 'python3 -c "import time; time.sleep(30)"';

const bash = (command, reply = 'Ran it.') => [
  onPrompt(`run ${command}`, {
    kind: 'tool_use',
    text: 'Running it.',
    calls: [{ name: 'Bash', input: { command, description: 'A command' } }],
  }),
  rule({ kind: 'tool_result', tool: 'Bash' }, text(reply)),
];

test('a streamed answer: initialize, session/new, agent_message_chunks, end_turn', async () => {
  await fake.script(onPrompt('hello', text('Hello from the fake model, in pieces.'), 5));
  const agent = startAgent();
  await asEditor(agent, async (ctx, editor) => {
    const init = await initialize(ctx);
    assert.equal(init.protocolVersion, 1);
    assert.equal(init.agentInfo.name, 'ccwire');
    assert.equal(init.agentCapabilities.promptCapabilities.image, true);
    const session = await newSession(ctx);
    assert.equal(session.modes.currentModeId, 'default');
    const answer = await prompt(ctx, session.sessionId, 'hello there');
    assert.equal(answer.stopReason, 'end_turn');
    assert.equal(editor.text(session.sessionId), 'Hello from the fake model, in pieces.');
    const chunks = editor.of(session.sessionId).filter((u) => u.sessionUpdate === 'agent_message_chunk');
    assert.ok(chunks.length > 1, `streamed in ${chunks.length} chunk(s)`);
    const commands = editor.of(session.sessionId).find((u) => u.sessionUpdate === 'available_commands_update');
    assert.ok(commands?.availableCommands.some((c) => c.name === 'compact'), JSON.stringify(commands));
  });
  await stop(agent);
});

test('a tool call the editor allows runs; one it rejects does not; always allow stops asking', async () => {
  await fake.script(...bash('echo hi > out.txt'), ...bash('echo no > refused.txt'), ...bash('git --version'));
  const agent = startAgent();
  const decisions = [];
  await asEditor(
    agent,
    async (ctx, editor) => {
      await initialize(ctx);
      const session = await newSession(ctx);
      const sid = session.sessionId;

      decisions.push('allow');
      assert.equal((await prompt(ctx, sid, 'please run echo hi > out.txt')).stopReason, 'end_turn');
      assert.equal(readFileSync(path.join(session.work, 'out.txt'), 'utf8'), 'hi\n');
      const ask = editor.asked.at(-1);
      assert.equal(ask.sessionId, sid);
      assert.equal(ask.toolCall.kind, 'execute');
      assert.equal(ask.toolCall.title, '`echo hi > out.txt`');
      assert.deepEqual(
        ask.options.map((o) => o.kind),
        ['allow_always', 'allow_once', 'reject_once'],
      );
      const calls = editor.of(sid).filter((u) => u.toolCallId === ask.toolCall.toolCallId);
      assert.equal(calls[0].sessionUpdate, 'tool_call');
      assert.equal(calls.at(-1).status, 'completed');

      decisions.push('reject');
      assert.equal((await prompt(ctx, sid, 'please run echo no > refused.txt')).stopReason, 'end_turn');
      assert.equal(existsSync(path.join(session.work, 'refused.txt')), false);
      const refused = (await fake.lastCall()).body.messages.at(-1).content.find((b) => b.type === 'tool_result');
      assert.equal(refused.is_error, true, JSON.stringify(refused));
      const failed = editor.of(sid).filter((u) => u.toolCallId === editor.asked.at(-1).toolCall.toolCallId);
      assert.equal(failed.at(-1).status, 'failed');

      decisions.push('allow_always');
      const asked = editor.asked.length;
      assert.equal((await prompt(ctx, sid, 'please run git --version')).stopReason, 'end_turn');
      assert.equal(editor.asked.length, asked + 1);
      // Asked once (the answer was "always"), then not again for that command.
      decisions.push('reject');
      assert.equal((await prompt(ctx, sid, 'please run git --version')).stopReason, 'end_turn');
      assert.equal(editor.asked.length, asked + 1, JSON.stringify(editor.asked.at(-1)));
      const ran = (await fake.lastCall()).body.messages.at(-1).content.find((b) => b.type === 'tool_result');
      assert.equal(ran.is_error ?? false, false, JSON.stringify(ran));
    },
    () => decisions.at(-1),
  );
  await stop(agent);
});

test('an edit is a tool call with its diff, in the session cwd', async () => {
  const agent = startAgent();
  await asEditor(agent, async (ctx, editor) => {
    await initialize(ctx);
    const session = await newSession(ctx);
    const file = path.join(session.work, 'notes.md');
    await fake.script(
      onPrompt('write notes', {
        kind: 'tool_use',
        calls: [{ name: 'Write', input: { file_path: file, content: 'first line\n' } }],
      }),
      rule({ kind: 'tool_result', tool: 'Write' }, text('Written.')),
    );
    assert.equal((await prompt(ctx, session.sessionId, 'write notes please')).stopReason, 'end_turn');
    assert.equal(readFileSync(file, 'utf8'), 'first line\n');
    const ask = editor.asked.at(-1);
    assert.equal(ask.toolCall.kind, 'edit');
    assert.deepEqual(ask.toolCall.content, [{ type: 'diff', path: file, newText: 'first line\n' }]);
    assert.deepEqual(ask.toolCall.locations, [{ path: file }]);
  });
  await stop(agent);
});

test('cancel during a running tool: the prompt answers cancelled, the session goes on', async () => {
  // (The prompt after the cancel first: its message also holds the interrupted call's result.)
  await fake.script(onPrompt('after', text('Still here.')), ...bash(SLEEP));
  const agent = startAgent();
  await asEditor(agent, async (ctx, editor) => {
    await initialize(ctx);
    const session = await newSession(ctx);
    const sid = session.sessionId;
    const running = prompt(ctx, sid, `please run ${SLEEP}`);
    // Cancel once the call is shown (asked about or not) and the command has had a second to
    // start.
    const shown = () => editor.of(sid).some((u) => u.sessionUpdate === 'tool_call_update' && u.rawInput);
    for (let i = 0; i < 600 && !shown(); i++) await new Promise((r) => setTimeout(r, 50));
    assert.ok(shown(), JSON.stringify(editor.of(sid)));
    await new Promise((r) => setTimeout(r, 1000));
    const started = Date.now();
    await ctx.notify(methods.agent.session.cancel, { sessionId: sid });
    assert.equal((await running).stopReason, 'cancelled');
    assert.ok(Date.now() - started < 10_000, 'cancelled in time');
    assert.equal((await prompt(ctx, sid, 'after that')).stopReason, 'end_turn');
    assert.equal(editor.text(sid).endsWith('Still here.'), true, editor.text(sid));
  });
  await stop(agent);
});

test('two sessions at once, each on its own CLI', async () => {
  await fake.script(onPrompt('first', text('Answer one.'), 10), onPrompt('second', text('Answer two.'), 10));
  const agent = startAgent();
  await asEditor(agent, async (ctx, editor) => {
    await initialize(ctx);
    const [a, b] = await Promise.all([newSession(ctx), newSession(ctx)]);
    assert.notEqual(a.sessionId, b.sessionId);
    const [ra, rb] = await Promise.all([prompt(ctx, a.sessionId, 'the first'), prompt(ctx, b.sessionId, 'the second')]);
    assert.deepEqual([ra.stopReason, rb.stopReason], ['end_turn', 'end_turn']);
    assert.equal(editor.text(a.sessionId), 'Answer one.');
    assert.equal(editor.text(b.sessionId), 'Answer two.');
  });
  await stop(agent);
});

test("an image prompt reaches the model as an image; a client's MCP server's tool is called", async () => {
  const png =
    'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
  await fake.script(
    onPrompt('describe', text('A small image.')),
    onPrompt('echo it', { kind: 'tool_use', calls: [{ name: 'mcp__ask__echo', input: { text: 'ping' } }] }),
    rule({ kind: 'tool_result', tool: 'mcp__ask__echo' }, { kind: 'echo' }),
  );
  const agent = startAgent();
  await asEditor(agent, async (ctx, editor) => {
    await initialize(ctx);
    const session = await newSession(ctx, {
      mcpServers: [{ name: 'ask', command: process.execPath, args: [ASK_SERVER], env: [] }],
    });
    const sid = session.sessionId;
    const answer = await prompt(ctx, sid, 'describe this', { type: 'image', mimeType: 'image/png', data: png });
    assert.equal(answer.stopReason, 'end_turn');
    // The call that answered the prompt (the CLI may make others of its own after it).
    const call = (await fake.calls()).find((c) => JSON.stringify(c.body.messages).includes('describe this'));
    const user = call.body.messages.filter((m) => m.role === 'user').at(-1);
    const image = user.content.find((b) => b.type === 'image');
    assert.deepEqual(
      image?.source,
      { type: 'base64', media_type: 'image/png', data: png },
      JSON.stringify(call.body.messages.map((m) => [m.role, (Array.isArray(m.content) ? m.content : [m.content]).map((b) => b.type ?? typeof b)])),
    );

    assert.equal((await prompt(ctx, sid, 'echo it please')).stopReason, 'end_turn');
    const echo = editor.of(sid).find((u) => u.sessionUpdate === 'tool_call' && u.title === 'echo (ask)');
    assert.ok(echo, JSON.stringify(editor.of(sid)));
    const done = editor.of(sid).filter((u) => u.toolCallId === echo.toolCallId).at(-1);
    assert.equal(done.status, 'completed');
    assert.match(JSON.stringify(done.content), /ping/);
  });
  await stop(agent);
});

test('bad JSON-RPC gets a clear error and the agent lives on', async () => {
  const agent = startAgent();
  const lines = [];
  let buffer = '';
  agent.child.stdout.setEncoding('utf8').on('data', (chunk) => {
    buffer += chunk;
    let nl;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      lines.push(JSON.parse(buffer.slice(0, nl)));
      buffer = buffer.slice(nl + 1);
    }
  });
  const waitFor = async (n) => {
    for (let i = 0; i < 200 && lines.length < n; i++) await new Promise((r) => setTimeout(r, 25));
    assert.ok(lines.length >= n, JSON.stringify(lines));
  };
  agent.child.stdin.write('this is not json\n');
  agent.child.stdin.write('{"jsonrpc":"2.0","id":1,"method":"session/teleport","params":{}}\n');
  agent.child.stdin.write('{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":7}}\n');
  agent.child.stdin.write('{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":1}}\n');
  await waitFor(4);
  assert.deepEqual(
    lines.map((l) => [l.id, l.error?.code ?? 'ok']),
    [
      [null, -32700],
      [1, -32601],
      [2, -32602],
      [3, 'ok'],
    ],
  );
  assert.equal(lines[3].result.protocolVersion, 1);
  await stop(agent);
});

test('a recorded session plays back through `ccwire play` with no model', async () => {
  const dir = mkdtempSync(path.join(home, 'record-'));
  await fake.script(...bash('echo recorded > rec.txt', 'Recorded run done.'));
  const scenario = async (agent) => {
    let result;
    await asEditor(agent, async (ctx, editor) => {
      await initialize(ctx);
      const session = await newSession(ctx);
      const answer = await prompt(ctx, session.sessionId, 'please run echo recorded > rec.txt');
      result = {
        stopReason: answer.stopReason,
        text: editor.text(session.sessionId),
        tools: editor
          .of(session.sessionId)
          .filter((u) => u.sessionUpdate === 'tool_call')
          .map((u) => [u.kind, u.title]),
        asked: editor.asked.map((a) => a.toolCall.title),
      };
    });
    await stop(agent);
    return result;
  };
  const live = await scenario(startAgent(['--record', dir]));
  const [file] = readdirSync(dir);
  assert.match(file, /^[0-9a-f-]{36}\.jsonl$/);
  const transcript = path.join(dir, file);
  // The CLI the agent starts is `ccwire play` of the recording.
  const player = path.join(dir, 'claude-play');
  writeFileSync(player, `#!/bin/sh\nexec "${CCWIRE_BIN}" play --instant "${transcript}" -- "$@"\n`);
  chmodSync(player, 0o755);
  const calls = (await fake.calls()).length;
  const played = await scenario(startAgent([], { claude: player }));
  assert.deepEqual(played, live);
  assert.equal(live.text, 'Running it.Recorded run done.');
  assert.equal((await fake.calls()).length, calls, 'the model was not called');
});

test('a session loads after the agent restarted: its history is shown again and the CLI goes on from it', async () => {
  await fake.script(...bash('echo kept > kept.txt', 'Kept it.'), onPrompt('what did I ask', text('To keep a file.')));
  let first;
  const records = mkdtempSync(path.join(home, 'record-'));
  const agent = startAgent(['--record', records]);
  await asEditor(agent, async (ctx, editor) => {
    await initialize(ctx);
    first = await newSession(ctx);
    assert.equal((await prompt(ctx, first.sessionId, 'please run echo kept > kept.txt')).stopReason, 'end_turn');
    first.shown = editor.of(first.sessionId);
  });
  await stop(agent);

  const again = startAgent(['--record', records]);
  await asEditor(again, async (ctx, editor) => {
    const init = await initialize(ctx);
    assert.equal(init.agentCapabilities.loadSession, true);
    // The session is listed, with its first prompt as the title.
    const listed = await ctx.request(methods.agent.session.list, { cwd: first.work });
    assert.deepEqual(
      listed.sessions.map((s) => [s.sessionId, s.cwd, s.title]),
      [[first.sessionId, first.work, 'please run echo kept > kept.txt']],
    );
    assert.ok(Date.now() - Date.parse(listed.sessions[0].updatedAt) < 120_000, listed.sessions[0].updatedAt);
    const loaded = await ctx.request(methods.agent.session.load, {
      sessionId: first.sessionId,
      cwd: first.work,
      mcpServers: [],
    });
    assert.equal(loaded.modes.currentModeId, 'default');
    // Before the answer: the conversation as the editor saw it, the prompt included.
    const history = editor.of(first.sessionId);
    const said = (kind) => history.filter((u) => u.sessionUpdate === kind).map((u) => u.content.text).join('');
    assert.equal(said('user_message_chunk'), 'please run echo kept > kept.txt');
    assert.equal(said('agent_message_chunk'), 'Running it.Kept it.');
    const call = history.find((u) => u.sessionUpdate === 'tool_call');
    const live = first.shown.find((u) => u.sessionUpdate === 'tool_call');
    assert.equal(call.toolCallId, live.toolCallId);
    assert.deepEqual([call.kind, call.title], ['execute', '`echo kept > kept.txt`']);
    assert.equal(history.filter((u) => u.toolCallId === call.toolCallId).at(-1).status, 'completed');

    // The CLI resumed the session: the model sees the earlier turn.
    assert.equal((await prompt(ctx, first.sessionId, 'what did I ask before?')).stopReason, 'end_turn');
    assert.equal(editor.text(first.sessionId).endsWith('To keep a file.'), true, editor.text(first.sessionId));
    const seen = JSON.stringify((await fake.lastCall()).body.messages);
    assert.match(seen, /please run echo kept > kept\.txt/);
    assert.match(seen, /Kept it\./);

    // A session Claude Code never had is not found; a closed session takes no prompt.
    await assert.rejects(
      ctx.request(methods.agent.session.load, { sessionId: '00000000-0000-4000-8000-000000000000', cwd: first.work, mcpServers: [] }),
      (err) => err.code === -32002,
    );
    assert.deepEqual(await ctx.request(methods.agent.session.close, { sessionId: first.sessionId }), {});
    await assert.rejects(prompt(ctx, first.sessionId, 'still there?'), (err) => err.code === -32002);
  });
  await stop(again);
  // Each CLI of the session has its recording; the first is kept.
  assert.deepEqual(readdirSync(records).sort(), [`${first.sessionId}-1.jsonl`, `${first.sessionId}.jsonl`]);
});

test('the model is a config option: the editor lists the CLI\'s models and switches', async () => {
  await fake.script(onPrompt('which model', text('This one.')));
  const agent = startAgent();
  await asEditor(agent, async (ctx) => {
    const init = await ctx.request(methods.agent.initialize, {
      protocolVersion: 1,
      clientCapabilities: { auth: { terminal: true } },
    });
    assert.deepEqual(
      init.authMethods.map((m) => [m.id, m.type, m.args]),
      [['claude-login', 'terminal', ['--login']]],
    );
    const session = await newSession(ctx);
    const model = session.configOptions.find((o) => o.id === 'model');
    assert.equal(model.category, 'model');
    assert.ok(model.options.some((o) => o.value === 'haiku'), JSON.stringify(model.options));
    const set = await ctx.request(methods.agent.session.setConfigOption, {
      sessionId: session.sessionId,
      configId: 'model',
      value: 'haiku',
    });
    assert.equal(set.configOptions.find((o) => o.id === 'model').currentValue, 'haiku');
    assert.equal((await prompt(ctx, session.sessionId, 'which model are you')).stopReason, 'end_turn');
    assert.match((await fake.lastCall()).body.model, /haiku/);
  });
  await stop(agent);
});

test("the editor's files: a read sees its unsaved buffer, an edit is written through it with its diff", async () => {
  const agent = startAgent();
  await asEditor(
    agent,
    async (ctx, editor) => {
      await initialize(ctx, true);
      const session = await newSession(ctx);
      const sid = session.sessionId;
      const file = path.join(session.work, 'notes.md');
      writeFileSync(file, 'on disk\n');
      editor.buffers.set(file, 'first draft\nsecond line\n');
      await fake.script(
        onPrompt('read the notes', { kind: 'tool_use', calls: [{ name: 'mcp__acp__Read', input: { file_path: file } }] }),
        rule({ kind: 'tool_result', tool: 'mcp__acp__Read' }, echo()),
        onPrompt('fix the notes', {
          kind: 'tool_use',
          calls: [{ name: 'mcp__acp__Edit', input: { file_path: file, old_string: 'first draft', new_string: 'final' } }],
        }),
        rule({ kind: 'tool_result', tool: 'mcp__acp__Edit' }, echo()),
      );
      // A read inside the session's directory is not asked about; the model sees the buffer.
      assert.equal((await prompt(ctx, sid, 'read the notes please')).stopReason, 'end_turn');
      assert.equal(editor.asked.length, 0, JSON.stringify(editor.asked));
      // The model is offered the editor's tools in place of the CLI's own.
      const offered = (await fake.lastCall()).body.tools.map((t) => t.name);
      for (const tool of ['Read', 'Write', 'Edit', 'Bash']) {
        assert.ok(offered.includes(`mcp__acp__${tool}`), `mcp__acp__${tool} in ${offered}`);
        assert.ok(!offered.includes(tool), `${tool} in ${offered}`);
      }
      assert.match(editor.text(sid), /1\tfirst draft/);
      assert.doesNotMatch(editor.text(sid), /on disk/);
      const call = editor.of(sid).find((u) => u.sessionUpdate === 'tool_call');
      const read = editor.of(sid).find((u) => u.toolCallId === call.toolCallId && u.rawInput);
      assert.deepEqual([read.kind, read.title, read.locations], ['read', `Read ${file}`, [{ path: file }]]);

      // An edit is asked about with its diff, then written through the editor.
      assert.equal((await prompt(ctx, sid, 'fix the notes please')).stopReason, 'end_turn');
      const ask = editor.asked.at(-1);
      assert.equal(ask.toolCall.kind, 'edit');
      assert.deepEqual(ask.toolCall.content, [{ type: 'diff', path: file, oldText: 'first draft', newText: 'final' }]);
      assert.deepEqual(editor.writes, [{ path: file, content: 'final\nsecond line\n' }]);
      assert.equal(readFileSync(file, 'utf8'), 'final\nsecond line\n');
      assert.match(editor.text(sid), /has been updated/);
    },
    () => 'allow',
    true,
  );
  await stop(agent);
});

test("the editor's terminal: a command runs there and is shown; cancel stops it", async () => {
  await fake.script(
    onPrompt('run the greeting', {
      kind: 'tool_use',
      calls: [{ name: 'mcp__acp__Bash', input: { command: 'echo from-the-terminal; exit 3', description: 'Greet' } }],
    }),
    onPrompt('run the sleeper', { kind: 'tool_use', calls: [{ name: 'mcp__acp__Bash', input: { command: SLEEP } }] }),
    rule({ kind: 'tool_result', tool: 'mcp__acp__Bash' }, echo()),
  );
  const agent = startAgent();
  await asEditor(
    agent,
    async (ctx, editor) => {
      await initialize(ctx, true);
      const session = await newSession(ctx);
      const sid = session.sessionId;
      assert.equal((await prompt(ctx, sid, 'run the greeting please')).stopReason, 'end_turn');
      // Asked about once, with no "always": the CLI's rule would allow every command.
      assert.deepEqual(editor.asked.at(-1).options.map((o) => o.kind), ['allow_once', 'reject_once']);
      const [terminal] = editor.terminals.values();
      assert.deepEqual([terminal.params.command, terminal.params.args, terminal.params.cwd], ['bash', ['-c', 'echo from-the-terminal; exit 3'], session.work]);
      assert.equal(terminal.released, true);
      const call = editor.of(sid).find((u) => u.sessionUpdate === 'tool_call');
      const updates = editor.of(sid).filter((u) => u.toolCallId === call.toolCallId);
      assert.ok(updates.some((u) => u.content?.[0]?.type === 'terminal' && u.content[0].terminalId === 'term-1'), JSON.stringify(updates));
      assert.equal(updates.at(-1).status, 'failed');
      // The model got the output and the exit status.
      assert.match(editor.text(sid), /from-the-terminal/);
      assert.match(editor.text(sid), /Exit code 3/);

      const running = prompt(ctx, sid, 'run the sleeper please');
      for (let i = 0; i < 600 && editor.terminals.size < 2; i++) await new Promise((r) => setTimeout(r, 50));
      assert.equal(editor.terminals.size, 2);
      await ctx.notify(methods.agent.session.cancel, { sessionId: sid });
      assert.equal((await running).stopReason, 'cancelled');
      assert.equal(editor.terminals.get('term-2').killed, true);
    },
    () => 'allow',
    true,
  );
  await stop(agent);
});
