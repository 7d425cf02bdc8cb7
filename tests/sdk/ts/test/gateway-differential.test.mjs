// `ccwire serve` and a plain Node host of the npm package's `Gateway`, side by side: the same
// requests (three APIs, streamed and whole, a client tool held across two requests and one held
// past its deadline, refusals, count_tokens forwarded to the model API)
// reach two copies of the same setup — the real CLI, a fake model with the same script, the same
// seed — and every response must be the same, status, gateway headers and body byte for byte.
// Only the clock differs (`created` fields are set to 0 before comparing).

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { startJsGateway } from './js-gateway.mjs';
import {
  ANTHROPIC_MODEL,
  CLAUDE,
  Fake,
  Gateway,
  HELD_CALL_TIMEOUT_S,
  HELD_CALL_TIMEOUT_TEXT,
  KEY,
  LOOKUP_TOOL,
  OPENAI_MODEL,
  lookups,
  makeHome,
  onAny,
  onPrompt,
  onToolResult,
  poll,
  serveEnv,
  text,
  toolResultsOf,
  withUsage,
} from './rig.mjs';

const SEED = 4242;
/** Headers of the transport, not the gateway's: they may differ between HTTP stacks. */
const TRANSPORT = new Set(['date', 'connection', 'keep-alive', 'transfer-encoding', 'content-length']);

let native;
let js;

async function setup(start) {
  const home = makeHome();
  const fake = await Fake.start();
  await fake.script(
    withUsage(onPrompt('PLEASE-LOOKUP', lookups('alpha')), { input_tokens: 410, output_tokens: 33 }),
    withUsage(onToolResult(text('Found record-alpha.')), { input_tokens: 455, output_tokens: 17 }),
    withUsage(onAny(text('A plain answer, in a few words.')), { input_tokens: 120, output_tokens: 9 }),
  );
  const host = await start(home, fake);
  return { home, fake, host };
}

async function teardown(side) {
  if (!side) return;
  await side.host?.stop();
  await side.fake.stop().catch(() => {});
  rmSync(side.home, { recursive: true, force: true });
}

before(async () => {
  native = await setup((home, fake) => Gateway.start(home, fake, ['--seed', String(SEED)]));
  js = await setup((home, fake) =>
    startJsGateway({
      claude: CLAUDE,
      cwd: path.join(home, 'work'),
      env: serveEnv(home, fake.url),
      // `ccwire serve`'s defaults, and the settings the rig gives it.
      options: {
        seed: SEED,
        heldCallTimeoutMs: HELD_CALL_TIMEOUT_S * 1000,
        idleTtlMs: 1_800_000,
        maxSessions: 64,
        maxConcurrent: 64,
        maxQueue: 256,
        queueTimeoutMs: 30_000,
        approvalTimeoutMs: 300_000,
        // Each tenant's directories under a state directory, the working directory shared
        // (`--cwd`), as ccwire serve's.
        tenantRoot: path.join(home, 'js-state', 'tenants'),
        sharedCwd: path.join(home, 'work'),
      },
      // The CLI's environment: count_tokens goes to its model API, as ccwire serve's does.
      http: { apiKeys: [KEY], env: serveEnv(home, fake.url) },
    }),
  );
});

after(async () => {
  await teardown(native);
  await teardown(js);
});

async function send(base, { method = 'POST', path: route, headers = {}, body }) {
  const response = await fetch(`${base}${route}`, {
    method,
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const kept = [...response.headers].filter(([name]) => !TRANSPORT.has(name)).sort();
  const text = (await response.text()).replace(/"(created|created_at)":\d+/g, '"$1":0');
  return { status: response.status, headers: kept, body: text };
}

/** Sends `request` to both hosts at once; their answers must be equal. Returns the answer. */
async function both(request) {
  const url = native.host.url;
  const [a, b] = await Promise.all([send(url, request), send(js.host.url, request)]);
  assert.deepEqual(b, a, `${request.method ?? 'POST'} ${request.path}: the npm Gateway answered otherwise`);
  return a;
}

const anthropic = (body) => ({ path: '/v1/messages', headers: { 'x-api-key': KEY }, body });
const openai = (route, body) => ({ path: route, headers: { authorization: `Bearer ${KEY}` }, body });

test('a conversation: a whole answer, then a streamed second turn on the same CLI', async () => {
  const first = [{ role: 'user', content: 'Say something (differential)' }];
  const one = await both(anthropic({ model: ANTHROPIC_MODEL, max_tokens: 256, messages: first }));
  assert.equal(one.status, 200, one.body);
  const reply = JSON.parse(one.body);
  assert.equal(reply.content[0].text, 'A plain answer, in a few words.');
  const two = await both(
    anthropic({
      model: ANTHROPIC_MODEL,
      max_tokens: 256,
      stream: true,
      messages: [...first, { role: 'assistant', content: reply.content }, { role: 'user', content: 'And again' }],
    }),
  );
  assert.equal(two.status, 200, two.body);
  assert.match(two.body, /event: message_stop/);
  assert.ok(two.headers.some(([name, value]) => name === 'x-ccwire-session' && value !== 'new'), 'the live session went on');
});

test('a client tool: the call is held between two requests, the result answered, streamed', async () => {
  const ask = [{ role: 'user', content: 'PLEASE-LOOKUP alpha (differential)' }];
  const call = await both(anthropic({ model: ANTHROPIC_MODEL, max_tokens: 256, tools: [LOOKUP_TOOL], messages: ask }));
  const response = JSON.parse(call.body);
  assert.equal(response.stop_reason, 'tool_use', call.body);
  const use = response.content.find((b) => b.type === 'tool_use');
  const answer = await both(
    anthropic({
      model: ANTHROPIC_MODEL,
      max_tokens: 256,
      stream: true,
      tools: [LOOKUP_TOOL],
      messages: [
        ...ask,
        { role: 'assistant', content: response.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'record-alpha' }] },
      ],
    }),
  );
  const deltas = answer.body
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => JSON.parse(line.slice(6)).delta)
    .filter((delta) => delta?.type === 'text_delta')
    .map((delta) => delta.text);
  assert.equal(deltas.join(''), 'Found record-alpha.', answer.body);
});

test('OpenAI Chat Completions streamed with usage, and the Responses API', async () => {
  const chat = await both(
    openai('/v1/chat/completions', {
      model: OPENAI_MODEL,
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'Hello over Chat Completions' }],
    }),
  );
  assert.match(chat.body, /data: \[DONE\]/);
  const whole = await both(openai('/v1/responses', { model: OPENAI_MODEL, input: 'Hello over Responses' }));
  assert.equal(JSON.parse(whole.body).status, 'completed', whole.body);
  const streamed = await both(
    openai('/v1/responses', { model: OPENAI_MODEL, input: 'Hello over Responses, streamed', stream: true }),
  );
  assert.match(streamed.body, /event: response\.completed/);
});

test('refusals and the routes around the APIs', async () => {
  const cases = [
    anthropic({ model: 1, messages: 'no' }),
    { ...anthropic({ model: ANTHROPIC_MODEL, max_tokens: 8, messages: [] }), headers: {} },
    { ...anthropic({ model: ANTHROPIC_MODEL, max_tokens: 8, messages: [] }), headers: { 'x-api-key': KEY, origin: 'https://evil.example' } },
    { ...anthropic('{"model":'), path: '/v1/messages' },
    { method: 'GET', path: '/v1/messages', headers: { 'x-api-key': KEY } },
    { method: 'GET', path: '/v1/nothing-here', headers: { 'x-api-key': KEY } },
    { method: 'OPTIONS', path: '/v1/messages', headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' } },
    { method: 'GET', path: '/v1/models', headers: { 'x-api-key': KEY } },
    { ...anthropic({ model: ANTHROPIC_MODEL, messages: [{ role: 'user', content: 'Count me' }] }), path: '/v1/messages/count_tokens' },
  ];
  const answers = [];
  for (const request of cases) answers.push(await both(request));
  assert.deepEqual(answers.map((a) => a.status), [400, 401, 403, 400, 405, 404, 403, 200, 200]);
  const counted = answers.at(-1);
  assert.ok(counted.headers.some(([n, v]) => n === 'x-ccwire-token-count' && v === 'upstream'), counted.headers);
});

test('a call held past its deadline: the model gets the error, the late result is resumed with the history', async () => {
  for (const side of [native, js]) {
    await side.fake.script(
      onToolResult(text('Noted the tool result.')),
      onPrompt('PLEASE-HELD', lookups('alpha')),
      onAny(text('A plain answer, in a few words.')),
    );
  }
  const ask = [{ role: 'user', content: 'PLEASE-HELD alpha (differential)' }];
  const call = await both(anthropic({ model: ANTHROPIC_MODEL, max_tokens: 256, tools: [LOOKUP_TOOL], messages: ask }));
  const response = JSON.parse(call.body);
  assert.equal(response.stop_reason, 'tool_use', call.body);
  // No result in time: each gateway answers its CLI's held call with the timeout error.
  for (const side of [native, js]) {
    const timedOut = await poll(async () =>
      (await side.fake.calls()).some((c) => JSON.stringify(toolResultsOf(c)).includes(HELD_CALL_TIMEOUT_TEXT)),
    );
    assert.ok(timedOut, 'the model saw the held-call timeout');
  }
  const use = response.content.find((b) => b.type === 'tool_use');
  const late = await both(
    anthropic({
      model: ANTHROPIC_MODEL,
      max_tokens: 256,
      tools: [LOOKUP_TOOL],
      messages: [
        ...ask,
        { role: 'assistant', content: response.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'record-alpha' }] },
      ],
    }),
  );
  // A new CLI resumes the history written with the late result and goes on from it.
  assert.ok(late.headers.some(([n, v]) => n === 'x-ccwire-session' && v === 'resumed'), late.headers);
  assert.ok(late.headers.some(([n, v]) => n === 'x-ccwire-session-reason' && v === 'late'), late.headers);
  assert.equal(JSON.parse(late.body).content[0].text, 'Noted the tool result.', late.body);
  for (const side of [native, js]) {
    const last = (await side.fake.calls()).at(-1);
    assert.ok(toolResultsOf(last).some((r) => r.tool_use_id === use.id && JSON.stringify(r).includes('record-alpha')));
    assert.ok(!JSON.stringify(last.body.messages).includes('conversation_history'));
  }
});
