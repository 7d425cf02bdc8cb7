// The Managed Agents API (`client.beta.agents`, `.environments`, `.sessions`) of the official
// Anthropic TypeScript SDK, unchanged, against `ccwire serve` (real CLI, fake model).

import assert from 'node:assert/strict';
import { after as afterAll, before, test } from 'node:test';

import Anthropic from '@anthropic-ai/sdk';

import { KEY, Rig, echo, lookups, onAny, onPrompt, onToolResult, poll, rule, text } from './rig.mjs';

let rig;
// A second tenant.
const OTHER_KEY = 'sdk-test-key-2';

before(async () => {
  // The gateway runs the CLI's Bash for the agents whose toolset has it.
  rig = await Rig.start(['--enable-tool', 'Bash', '--api-key', OTHER_KEY]);
});

afterAll(async () => {
  await rig?.stop();
});

const client = (apiKey = KEY) => new Anthropic({ baseURL: rig.gateway.url, apiKey });

/** A session's event stream read turn by turn: `untilIdle()` gives the events up to the next idle. */
async function watch(c, sessionId, options = undefined) {
  const stream = await c.beta.sessions.events.stream(sessionId, {}, options);
  const iterator = stream[Symbol.asyncIterator]();
  return {
    async untilIdle() {
      const seen = [];
      for (;;) {
        const { value, done } = await iterator.next();
        assert.ok(!done, `the stream ended before the session was idle: ${JSON.stringify(seen)}`);
        seen.push(value);
        if (value.type === 'session.status_idle') return seen;
      }
    },
    async until(type) {
      for (;;) {
        const { value, done } = await iterator.next();
        assert.ok(!done, `the stream ended before ${type}`);
        if (value.type === type) return value;
      }
    },
    close: () => iterator.return?.(),
  };
}

const userMessage = (text) => ({ events: [{ type: 'user.message', content: [{ type: 'text', text }] }] });

async function lookupSession(c) {
  const agent = await c.beta.agents.create({
    name: 'TS lookups',
    model: 'claude-sonnet-4-5-20250929',
    tools: [
      {
        type: 'custom',
        name: 'lookup',
        description: 'Looks a record up.',
        input_schema: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] },
      },
    ],
  });
  const env = await c.beta.environments.create({ name: 'local' });
  return c.beta.sessions.create({ agent: agent.id, environment_id: env.id });
}

test('a custom tool round trip, and another key sees none of it', async () => {
  await rig.fake.script(
    rule({ kind: 'probe' }, { kind: 'text', text: 'ok' }),
    onToolResult(echo()),
    onPrompt('TS-LOOKUP', lookups('alpha')),
    onAny(echo()),
  );
  const c = client();
  const session = await lookupSession(c);
  const events = await watch(c, session.id);
  await c.beta.sessions.events.send(session.id, userMessage('TS-LOOKUP please'));
  let seen = await events.untilIdle();
  const call = seen.find((e) => e.type === 'agent.custom_tool_use');
  assert.equal(call.name, 'lookup');
  assert.deepEqual(call.input, { query: 'alpha' });
  assert.deepEqual(seen.at(-1).stop_reason, { type: 'requires_action', event_ids: [call.id] });
  await c.beta.sessions.events.send(session.id, {
    events: [
      {
        type: 'user.custom_tool_result',
        custom_tool_use_id: call.id,
        content: [{ type: 'text', text: 'record of alpha: 42' }],
      },
    ],
  });
  seen = await events.untilIdle();
  await events.close();
  assert.equal(seen.at(-1).stop_reason.type, 'end_turn');
  assert.match(seen.filter((e) => e.type === 'agent.message').at(-1).content[0].text, /record of alpha: 42/);

  const other = client(OTHER_KEY);
  await assert.rejects(other.beta.sessions.retrieve(session.id), Anthropic.NotFoundError);
  await assert.rejects(other.beta.sessions.events.send(session.id, userMessage('x')), Anthropic.NotFoundError);
  const theirs = [];
  for await (const s of other.beta.sessions.list()) theirs.push(s.id);
  assert.ok(!theirs.includes(session.id));
});

test('an interrupt stops the turn and the session goes on', async () => {
  await rig.fake.script(
    rule({ kind: 'probe' }, { kind: 'text', text: 'ok' }),
    // The CLI merges an interrupted prompt with the next one: the newest marker first.
    onPrompt('TS-AFTER', echo()),
    onPrompt('TS-SLOW', text('slow '.repeat(100)), 250),
    onAny(echo()),
  );
  const c = client();
  const session = await lookupSession(c);
  const events = await watch(c, session.id);
  await c.beta.sessions.events.send(session.id, userMessage('TS-SLOW then stop'));
  await events.until('span.model_request_start');
  await c.beta.sessions.events.send(session.id, { events: [{ type: 'user.interrupt' }] });
  let seen = await events.untilIdle();
  assert.equal(seen.at(-1).stop_reason.type, 'end_turn');
  await c.beta.sessions.events.send(session.id, userMessage('TS-AFTER the interrupt'));
  seen = await events.untilIdle();
  await events.close();
  assert.match(seen.filter((e) => e.type === 'agent.message').at(-1).content[0].text, /TS-AFTER the interrupt/);
});

test('a dropped stream is picked up after its last event, and the session outlives a restart', async () => {
  await rig.fake.script(rule({ kind: 'probe' }, { kind: 'text', text: 'ok' }), onAny(echo()));
  let c = client();
  const session = await lookupSession(c);
  let events = await watch(c, session.id);
  await c.beta.sessions.events.send(session.id, userMessage('TS-DROP first turn'));
  const running = await events.until('session.status_running');
  await events.close();
  await poll(async () => (await c.beta.sessions.retrieve(session.id)).status === 'idle');
  // Reopened with the last event it saw: what came since, nothing twice.
  events = await watch(c, session.id, { headers: { 'Last-Event-ID': running.id } });
  const after = await events.untilIdle();
  await events.close();
  const logged = [];
  for await (const e of c.beta.sessions.events.list(session.id)) logged.push(e.id);
  const at = logged.indexOf(running.id);
  assert.deepEqual(after.map((e) => e.id), logged.slice(at + 1));

  await rig.restart();
  c = client();
  const again = [];
  for await (const e of c.beta.sessions.events.list(session.id)) again.push(e.id);
  assert.deepEqual(again, logged);
  events = await watch(c, session.id);
  await c.beta.sessions.events.send(session.id, userMessage('TS-DROP second turn'));
  const seen = await events.untilIdle();
  await events.close();
  assert.match(seen.filter((e) => e.type === 'agent.message').at(-1).content[0].text, /TS-DROP second turn/);
  // The model was given the turn before the restart too.
  const calls = (await rig.fake.calls()).filter((call) =>
    JSON.stringify(call.body.messages ?? []).includes('TS-DROP second turn'),
  );
  assert.match(JSON.stringify(calls.at(-1).body.messages), /TS-DROP first turn/);
});

test('an agent is created, versioned, paged through and archived', async () => {
  const c = client();
  const agent = await c.beta.agents.create({
    name: 'Reviewer',
    model: { id: 'claude-sonnet-4-6', effort: 'high' },
    tools: [{ type: 'agent_toolset_20260401', default_config: { permission_policy: { type: 'always_ask' } } }],
  });
  assert.match(agent.id, /^agent_/);
  assert.deepEqual(agent.model, { id: 'claude-sonnet-4-6', effort: { type: 'high' } });
  assert.ok(agent.tools[0].configs.every((t) => t.permission_policy.type === 'always_ask'));

  const updated = await c.beta.agents.update(agent.id, { version: 1, description: 'Reads diffs.' });
  assert.equal(updated.version, 2);
  await assert.rejects(c.beta.agents.update(agent.id, { version: 1, description: 'x' }), Anthropic.ConflictError);

  const made = [];
  for (let i = 0; i < 3; i++) made.push((await c.beta.agents.create({ name: `P${i}`, model: 'claude-haiku-4-5' })).id);
  const seen = [];
  for await (const a of c.beta.agents.list({ limit: 2 })) seen.push(a.id);
  assert.deepEqual(seen.slice(0, 3), made.reverse());
  assert.ok(seen.includes(agent.id));

  const archived = await c.beta.agents.archive(agent.id);
  assert.ok(archived.archived_at);
});

test('an environment is created and deleted', async () => {
  const c = client();
  const env = await c.beta.environments.create({ name: 'dev' });
  assert.match(env.id, /^env_/);
  assert.equal(env.config.networking.type, 'unrestricted');
  assert.equal((await c.beta.environments.retrieve(env.id)).name, 'dev');
  const deleted = await c.beta.environments.delete(env.id);
  assert.deepEqual(deleted, { id: env.id, type: 'environment_deleted' });
  await assert.rejects(c.beta.environments.retrieve(env.id), Anthropic.NotFoundError);
});

test('a session answers a message on its event stream', async () => {
  await rig.fake.script(onAny(echo()));
  const c = client();
  const agent = await c.beta.agents.create({ name: 'TS session', model: 'claude-sonnet-4-5-20250929' });
  const env = await c.beta.environments.create({ name: 'local' });
  const session = await c.beta.sessions.create({ agent: agent.id, environment_id: env.id });
  assert.equal(session.status, 'idle');

  const stream = await c.beta.sessions.events.stream(session.id);
  await c.beta.sessions.events.send(session.id, {
    events: [{ type: 'user.message', content: [{ type: 'text', text: 'TS-SESSION hello' }] }],
  });
  const seen = [];
  for await (const event of stream) {
    seen.push(event);
    if (event.type === 'session.status_idle') break;
  }
  const message = seen.filter((e) => e.type === 'agent.message').at(-1);
  assert.match(message.content[0].text, /TS-SESSION hello/);
  assert.equal(seen.at(-1).stop_reason.type, 'end_turn');
  const logged = [];
  for await (const event of c.beta.sessions.events.list(session.id)) logged.push(event.id);
  assert.deepEqual(logged, seen.map((e) => e.id));
});

test('a bash call asks first, a read-only one too: confirmed it runs, denied it does not', async () => {
  const bash = {
    kind: 'tool_use',
    // A read-only command, which Claude Code would run unasked: always_ask asks all the same.
    calls: [{ name: 'Bash', input: { command: 'pwd', description: 'Says where' } }],
  };
  await rig.fake.script(
    rule({ kind: 'probe' }, { kind: 'text', text: 'ok' }),
    onToolResult(echo()),
    onPrompt('TS-BASH', bash),
    onAny(echo()),
  );
  const c = client();
  const agent = await c.beta.agents.create({
    name: 'TS shell',
    model: 'claude-sonnet-4-5-20250929',
    tools: [
      {
        type: 'agent_toolset_20260401',
        configs: [{ name: 'bash', permission_policy: { type: 'always_ask' } }],
      },
    ],
  });
  const env = await c.beta.environments.create({ name: 'shell' });
  const session = await c.beta.sessions.create({ agent: agent.id, environment_id: env.id });
  const stream = await c.beta.sessions.events.stream(session.id);
  const iterator = stream[Symbol.asyncIterator]();
  const untilIdle = async () => {
    const seen = [];
    for (;;) {
      const { value, done } = await iterator.next();
      assert.ok(!done, `the stream ended before the session was idle: ${JSON.stringify(seen)}`);
      seen.push(value);
      if (value.type === 'session.status_idle') return seen;
    }
  };
  const say = (text) =>
    c.beta.sessions.events.send(session.id, {
      events: [{ type: 'user.message', content: [{ type: 'text', text }] }],
    });

  await say('TS-BASH first');
  let seen = await untilIdle();
  let call = seen.find((e) => e.type === 'agent.tool_use');
  assert.equal(call.name, 'bash');
  assert.equal(call.evaluated_permission, 'ask');
  assert.deepEqual(seen.at(-1).stop_reason, { type: 'requires_action', event_ids: [call.id] });
  await c.beta.sessions.events.send(session.id, {
    events: [{ type: 'user.tool_confirmation', tool_use_id: call.id, result: 'allow' }],
  });
  seen = await untilIdle();
  let result = seen.find((e) => e.type === 'agent.tool_result');
  assert.equal(result.tool_use_id, call.id);
  assert.equal(result.is_error, false);
  assert.match(result.content[0].text, new RegExp(`^/.*/sessions/${session.id}$`));
  assert.equal(seen.at(-1).stop_reason.type, 'end_turn');

  await say('TS-BASH second');
  seen = await untilIdle();
  call = seen.find((e) => e.type === 'agent.tool_use');
  await c.beta.sessions.events.send(session.id, {
    events: [
      { type: 'user.tool_confirmation', tool_use_id: call.id, result: 'deny', deny_message: 'Not today.' },
    ],
  });
  seen = await untilIdle();
  await iterator.return?.();
  result = seen.find((e) => e.type === 'agent.tool_result');
  assert.equal(result.is_error, true);
  assert.match(result.content[0].text, /Not today\./);
  assert.doesNotMatch(result.content[0].text, /\/sessions\//);
  const answer = seen.filter((e) => e.type === 'agent.message').at(-1).content[0].text;
  assert.match(answer, /Not today\./);
});

test('a stream that asks for previews gets the thinking and the words as they come', async () => {
  await rig.fake.script(
    onPrompt('TS-PREVIEW', { kind: 'thinking', thinking: 'Weighing the answer.', text: 'A previewed answer, in pieces.' }),
    onAny(echo()),
  );
  const c = client();
  const agent = await c.beta.agents.create({ name: 'TS previews', model: 'claude-sonnet-4-5-20250929' });
  const env = await c.beta.environments.create({ name: 'local' });
  const session = await c.beta.sessions.create({ agent: agent.id, environment_id: env.id });
  // One stream without previews, one with.
  const plainStream = await watch(c, session.id);
  const stream = await c.beta.sessions.events.stream(session.id, { event_deltas: ['agent.message', 'agent.thinking'] });
  await c.beta.sessions.events.send(session.id, userMessage('TS-PREVIEW please'));
  const seen = [];
  for await (const event of stream) {
    seen.push(event);
    if (event.type === 'session.status_idle') break;
  }
  const starts = seen.filter((e) => e.type === 'event_start');
  assert.deepEqual(starts.map((s) => s.event.type), ['agent.thinking', 'agent.message'], JSON.stringify(seen));
  // Thinking: start-only, concluded by the agent.thinking event with its id.
  const thinking = seen.find((e) => e.type === 'agent.thinking');
  assert.equal(thinking.id, starts[0].event.id);
  assert.ok(seen.indexOf(starts[0]) < seen.indexOf(thinking));
  // The words: deltas whose text adds up to the message that carries the preview's id.
  const id = starts[1].event.id;
  const deltas = seen.filter((e) => e.type === 'event_delta');
  assert.ok(deltas.length >= 2, 'the text comes in pieces');
  assert.ok(deltas.every((d) => d.event_id === id && d.delta.type === 'content_delta'));
  const message = seen.find((e) => e.type === 'agent.message');
  assert.equal(message.id, id);
  assert.equal(deltas.map((d) => d.delta.content.text).join(''), message.content[0].text);
  assert.equal(message.content[0].text, 'A previewed answer, in pieces.');
  // A stream that did not ask, and the log, have the events without their previews.
  const plain = await plainStream.untilIdle();
  plainStream.close();
  assert.ok(!plain.some((e) => e.type === 'event_start' || e.type === 'event_delta'));
  assert.deepEqual(plain.map((e) => e.id), seen.filter((e) => e.id).map((e) => e.id));
  const logged = [];
  for await (const event of c.beta.sessions.events.list(session.id)) logged.push(event.type);
  assert.ok(!logged.includes('event_start') && !logged.includes('event_delta'));
});
