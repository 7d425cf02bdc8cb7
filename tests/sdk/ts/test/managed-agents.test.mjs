// The Managed Agents API (`client.beta.agents`, `.environments`, `.sessions`) of the official
// Anthropic TypeScript SDK, unchanged, against `ccwire serve` (real CLI, fake model).

import assert from 'node:assert/strict';
import { after as afterAll, before, test } from 'node:test';

import Anthropic from '@anthropic-ai/sdk';

import { KEY, Rig, echo, onAny, onPrompt, onToolResult, rule } from './rig.mjs';

let rig;

before(async () => {
  // The gateway runs the CLI's Bash for the agents whose toolset has it.
  rig = await Rig.start(['--enable-tool', 'Bash']);
});

afterAll(async () => {
  await rig?.stop();
});

const client = () => new Anthropic({ baseURL: rig.gateway.url, apiKey: KEY, maxRetries: 0 });

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

test('a bash call asks first: confirmed it runs, denied it does not', async () => {
  const bash = {
    kind: 'tool_use',
    calls: [{ name: 'Bash', input: { command: 'echo ts-bash-ran in $(pwd)', description: 'Says where' } }],
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
  assert.match(result.content[0].text, new RegExp(`ts-bash-ran in /.*/sessions/${session.id}`));
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
  assert.doesNotMatch(result.content[0].text, /ts-bash-ran/);
  const answer = seen.filter((e) => e.type === 'agent.message').at(-1).content[0].text;
  assert.match(answer, /Not today\./);
});
