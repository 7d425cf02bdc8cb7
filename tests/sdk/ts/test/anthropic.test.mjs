// The official Anthropic TypeScript SDK, unchanged, against `ccwire serve` in front of the real
// Claude Code CLI and the scripted fake model.

import assert from 'node:assert/strict';
import { after as afterAll, before, describe, test } from 'node:test';

import Anthropic from '@anthropic-ai/sdk';

import {
  ANTHROPIC_MODEL,
  HELD_CALL_TIMEOUT_TEXT,
  KEY,
  LOOKUP_TOOL,
  Rig,
  echo,
  lookups,
  onAny,
  onPrompt,
  onToolResult,
  poll,
  resultText,
  sleep,
  text,
  toolResultsOf,
} from './rig.mjs';

// The SDK warns on every request that the (pinned) model name is deprecated: drop just that line.
const warn = console.warn;
console.warn = (...args) => {
  if (typeof args[0] === 'string' && args[0].startsWith(`The model '${ANTHROPIC_MODEL}' is deprecated`)) return;
  warn(...args);
};

let rig;

before(async () => {
  rig = await Rig.start();
});

afterAll(async () => {
  await rig?.stop();
});

function client(apiKey = KEY) {
  return new Anthropic({ baseURL: rig.gateway.url, apiKey, timeout: 60_000 });
}

const params = (messages) => ({ model: ANTHROPIC_MODEL, max_tokens: 1024, tools: [LOOKUP_TOOL], messages });

/** `messages.create`: the message and the `x-ccwire-session` header. */
async function create(messages, c = client()) {
  const { data, response } = await c.messages.create(params(messages)).withResponse();
  return { message: data, session: response.headers.get('x-ccwire-session'), reason: response.headers.get('x-ccwire-session-reason') };
}

/** `messages.stream`: the final message, the header, the text deltas and the event types. */
async function stream(messages) {
  const s = client().messages.stream(params(messages));
  const deltas = [];
  const events = [];
  const jsonDeltas = [];
  s.on('text', (delta) => deltas.push(delta));
  s.on('inputJson', (partial) => jsonDeltas.push(partial));
  s.on('streamEvent', (event) => events.push(event.type));
  const { response } = await s.withResponse();
  const message = await s.finalMessage();
  return { message, session: response.headers.get('x-ccwire-session'), deltas, events, jsonDeltas };
}

const textOf = (message) =>
  message.content
    .filter((b) => b.type === 'text')
    .map((b) => b.text)
    .join('');
const toolUses = (message) => message.content.filter((b) => b.type === 'tool_use');

/** The client's results for the calls of a message: `record-<query>`. */
const resultsFor = (message) =>
  toolUses(message).map((b) => ({
    type: 'tool_result',
    tool_use_id: b.id,
    content: `record-${b.input.query}`,
  }));

/** The model calls the fake received from `since` (an earlier count) on. */
async function callsSince(since) {
  return (await rig.fake.calls()).slice(since);
}
const callCount = async () => (await rig.fake.calls()).length;

describe('@anthropic-ai/sdk through ccwire serve', () => {
  test('a text answer', async () => {
    await rig.fake.script(onAny(echo()));
    const since = await callCount();
    const { result, pid } = await rig.newSession(() =>
      client()
        .messages.create({
          ...params([{ role: 'user', content: 'Hello PLEASE-TEXT-A' }]),
          system: 'Be brief PLEASE-SYSTEM-A.',
        })
        .withResponse(),
    );
    const { data: message, response } = result;
    assert.equal(response.headers.get('x-ccwire-session'), 'new');
    assert.equal(message.type, 'message');
    assert.equal(message.role, 'assistant');
    assert.equal(message.model, ANTHROPIC_MODEL);
    assert.equal(message.stop_reason, 'end_turn');
    assert.match(textOf(message), /^You said: .*Hello PLEASE-TEXT-A/s);
    assert.ok(pid > 0);

    const calls = await callsSince(since);
    assert.equal(calls.length, 1, 'one model call for one prompt');
    const [call] = calls;
    assert.match(call.last_user_text, /Hello PLEASE-TEXT-A/);
    assert.match(JSON.stringify(call.body.system), /Be brief PLEASE-SYSTEM-A\./, 'the system prompt reached the model');
    const offered = (call.body.tools ?? []).map((t) => t.name);
    assert.ok(offered.includes('mcp__client__lookup'), `the client tool is offered: ${offered}`);
  });

  test('a streamed answer (messages.stream)', async () => {
    const answer = 'The quick brown fox jumps over the lazy dog.';
    await rig.fake.script(onPrompt('PLEASE-STREAM-TEXT', text(answer)), onAny(echo()));
    const { result } = await rig.newSession(() => stream([{ role: 'user', content: 'PLEASE-STREAM-TEXT now' }]));
    const { message, session, deltas, events } = result;
    assert.equal(session, 'new');
    assert.equal(textOf(message), answer);
    assert.equal(message.stop_reason, 'end_turn');
    assert.ok(deltas.length >= 2, `streamed in pieces: ${JSON.stringify(deltas)}`);
    assert.equal(deltas.join(''), answer);
    assert.equal(events[0], 'message_start');
    assert.equal(events.at(-1), 'message_stop');
    for (const type of ['content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta']) {
      assert.ok(events.includes(type), `a ${type} event: ${events}`);
    }
  });

  test('a client tool round trip, not streamed', async () => {
    await rig.fake.script(onToolResult(echo()), onPrompt('PLEASE-ONE-LOOKUP', lookups('alpha')), onAny(echo()));
    const since = await callCount();
    const user = { role: 'user', content: 'PLEASE-ONE-LOOKUP alpha' };
    const { result: first, pid } = await rig.newSession(() => create([user]));
    assert.equal(first.session, 'new');
    assert.equal(first.message.stop_reason, 'tool_use');
    const calls = toolUses(first.message);
    assert.equal(calls.length, 1);
    assert.equal(calls[0].name, 'lookup', 'the client sees its own tool name');
    assert.deepEqual(calls[0].input, { query: 'alpha' });

    const second = await create([
      user,
      { role: 'assistant', content: first.message.content },
      { role: 'user', content: resultsFor(first.message) },
    ]);
    assert.equal(second.session, 'continued');
    assert.equal(second.message.stop_reason, 'end_turn');
    assert.match(textOf(second.message), /record-alpha/);
    assert.deepEqual(rig.gateway.cliPids().filter((p) => p === pid), [pid], 'the same CLI process');

    const seen = await callsSince(since);
    assert.equal(seen.length, 2, 'one model call per model message');
    const results = toolResultsOf(seen[1]);
    assert.equal(results.length, 1);
    assert.equal(resultText(results[0]), 'record-alpha', 'the model got the client result');
    assert.notEqual(results[0].is_error, true);
    const modelCall = seen[1].body.messages.at(-2).content.find((b) => b.type === 'tool_use');
    assert.equal(modelCall.name, 'mcp__client__lookup');
    assert.equal(results[0].tool_use_id, modelCall.id);
  });

  test('a client tool round trip, streamed', async () => {
    await rig.fake.script(onToolResult(echo()), onPrompt('PLEASE-STREAM-LOOKUP', lookups('alpha')), onAny(echo()));
    const since = await callCount();
    const user = { role: 'user', content: 'PLEASE-STREAM-LOOKUP alpha' };
    const { result: first, pid } = await rig.newSession(() => stream([user]));
    assert.equal(first.session, 'new');
    assert.equal(first.message.stop_reason, 'tool_use');
    const calls = toolUses(first.message);
    assert.equal(calls.length, 1);
    assert.equal(calls[0].name, 'lookup');
    assert.deepEqual(calls[0].input, { query: 'alpha' }, 'input assembled from input_json_delta');
    assert.ok(first.jsonDeltas.length >= 1);
    assert.equal(first.events.at(-1), 'message_stop');

    const second = await stream([
      user,
      { role: 'assistant', content: first.message.content },
      { role: 'user', content: resultsFor(first.message) },
    ]);
    assert.equal(second.session, 'continued');
    assert.equal(second.message.stop_reason, 'end_turn');
    assert.match(second.deltas.join(''), /record-alpha/);
    assert.ok(rig.gateway.cliPids().includes(pid), 'the same CLI process');

    const seen = await callsSince(since);
    const results = toolResultsOf(seen.at(-1));
    assert.deepEqual(results.map(resultText), ['record-alpha']);
  });

  test('two tool calls in one model message, answered in one follow-up', async () => {
    await rig.fake.script(onToolResult(echo()), onPrompt('PLEASE-TWO-LOOKUPS', lookups('alpha', 'beta')), onAny(echo()));
    const since = await callCount();
    const user = { role: 'user', content: 'PLEASE-TWO-LOOKUPS alpha and beta' };
    const { result: first, pid } = await rig.newSession(() => create([user]));
    assert.equal(first.message.stop_reason, 'tool_use');
    assert.equal(textOf(first.message), 'Looking them up.');
    assert.deepEqual(
      toolUses(first.message).map((b) => [b.name, b.input]),
      [
        ['lookup', { query: 'alpha' }],
        ['lookup', { query: 'beta' }],
      ],
      'both calls of the model message',
    );
    const ids = toolUses(first.message).map((b) => b.id);
    assert.equal(new Set(ids).size, 2);

    const second = await create([
      user,
      { role: 'assistant', content: first.message.content },
      { role: 'user', content: resultsFor(first.message) },
    ]);
    assert.equal(second.session, 'continued');
    assert.match(textOf(second.message), /record-alpha/);
    assert.match(textOf(second.message), /record-beta/);
    assert.ok(rig.gateway.cliPids().includes(pid));

    const seen = await callsSince(since);
    assert.equal(seen.length, 2, 'both results went to the model in one call');
    const results = toolResultsOf(seen[1]);
    assert.deepEqual(
      results.map((r) => resultText(r)).sort(),
      ['record-alpha', 'record-beta'],
    );
  });

  test('a third turn continues the same CLI process', async () => {
    await rig.fake.script(
      onToolResult(echo()),
      onPrompt('PLEASE-THIRD-TURN', echo()),
      onPrompt('PLEASE-THIRD-LOOKUP', lookups('gamma')),
      onAny(echo()),
    );
    const since = await callCount();
    const user = { role: 'user', content: 'PLEASE-THIRD-LOOKUP gamma' };
    const { result: first, pid } = await rig.newSession(() => create([user]));
    assert.equal(first.session, 'new');
    const messages = [
      user,
      { role: 'assistant', content: first.message.content },
      { role: 'user', content: resultsFor(first.message) },
    ];
    const second = await create(messages);
    assert.equal(second.session, 'continued');
    const pidsAfterSecond = rig.gateway.cliPids();

    messages.push({ role: 'assistant', content: second.message.content });
    messages.push({ role: 'user', content: 'And now PLEASE-THIRD-TURN please' });
    const { data: third, response } = await client().messages.create(params(messages)).withResponse();
    assert.equal(response.headers.get('x-ccwire-session'), 'continued');
    assert.match(textOf(third), /PLEASE-THIRD-TURN/);
    assert.deepEqual(rig.gateway.cliPids(), pidsAfterSecond, 'no process started or ended');
    assert.ok(pidsAfterSecond.includes(pid), 'the same CLI process');

    const seen = await callsSince(since);
    assert.equal(seen.length, 3);
    const last = seen.at(-1).body.messages;
    assert.ok(last.length >= 5, `the model saw the whole conversation (${last.length} messages)`);
    const all = JSON.stringify(last);
    for (const part of ['PLEASE-THIRD-LOOKUP gamma', 'record-gamma', 'You said: record-gamma', 'PLEASE-THIRD-TURN']) {
      assert.ok(all.includes(part), `the model saw ${part}`);
    }
  });

  test('a restarted gateway resumes the conversation', async () => {
    await rig.fake.script(onAny(echo()));
    const user = { role: 'user', content: 'My codename is PLEASE-REMEMBER-ORCHID.' };
    const first = await create([user]);
    assert.equal(first.session, 'new');
    const oldPids = await rig.restart(); // asserts every old CLI process is gone
    assert.ok(oldPids.length >= 1);

    const since = await callCount();
    const second = await create([
      user,
      { role: 'assistant', content: first.message.content },
      { role: 'user', content: 'What is my codename?' },
    ]);
    assert.equal(second.session, 'resumed');
    assert.equal(second.message.stop_reason, 'end_turn');
    const seen = await callsSince(since);
    assert.ok(seen.length >= 1);
    // The earlier turns reach the model as the messages they were, not retold.
    const last = seen.at(-1);
    assert.ok(last.last_user_text.includes('What is my codename?'), last.last_user_text);
    assert.ok(!last.last_user_text.includes('PLEASE-REMEMBER-ORCHID'), last.last_user_text);
    const earlier = JSON.stringify(last.body.messages.slice(0, -1));
    assert.ok(earlier.includes('My codename is PLEASE-REMEMBER-ORCHID.'), `the model saw the first turn: ${earlier}`);
    assert.ok(earlier.includes(JSON.stringify(textOf(first.message)).slice(1, -1)), `the model saw its own earlier answer: ${earlier}`);
    assert.ok(!earlier.includes('conversation_history'), earlier);
  });

  test('a held call past its deadline is answered with an error; a late result rebuilds', async () => {
    await rig.fake.script(
      onToolResult(echo()),
      // The rebuilt session carries the earlier turns, the late result included, as text.
      onPrompt('record-alpha', echo()),
      onPrompt('PLEASE-HELD', lookups('alpha')),
      onAny(echo()),
    );
    const since = await callCount();
    const user = { role: 'user', content: 'PLEASE-HELD alpha' };
    const first = await create([user]);
    assert.equal(first.message.stop_reason, 'tool_use');

    // No result from the client: the gateway answers the held call with an error the model sees.
    const timedOut = await poll(async () => {
      const seen = await callsSince(since);
      return seen.find((c) => toolResultsOf(c).some((r) => resultText(r).includes(HELD_CALL_TIMEOUT_TEXT)));
    });
    assert.ok(timedOut, 'the model saw the held-call timeout');
    assert.equal(toolResultsOf(timedOut)[0].is_error, true);

    const second = await create([
      user,
      { role: 'assistant', content: first.message.content },
      { role: 'user', content: resultsFor(first.message) },
    ]);
    // The turn went on without the client: a new CLI resumes the history with the result.
    assert.equal(second.session, 'resumed');
    assert.equal(second.reason, 'late');
    assert.equal(second.message.stop_reason, 'end_turn');
    assert.match(textOf(second.message), /record-alpha/);
    const last = await rig.fake.lastCall();
    assert.match(last.last_user_text, /record-alpha/);
  });

  test('a client that disconnects mid-stream interrupts the turn', async () => {
    await rig.fake.script(
      // The CLI sends the interrupted prompt and the next one as one user message.
      onPrompt('PLEASE-AFTER', echo()),
      onPrompt('PLEASE-SLOW', text('slow '.repeat(100)), 250),
      onAny(echo()),
    );
    const user = { role: 'user', content: 'hello before the interrupt' };
    const { result: first, pid } = await rig.newSession(() => create([user]));
    const since = await callCount();
    const messages = [
      user,
      { role: 'assistant', content: first.message.content },
      { role: 'user', content: 'PLEASE-SLOW please' },
    ];

    const s = client().messages.stream(params(messages));
    s.on('error', () => {});
    let firstEvent;
    for await (const event of s) {
      firstEvent = event;
      break; // leaving the loop aborts the request
    }
    s.abort();
    assert.equal(firstEvent?.type, 'message_start');
    await s.done().catch(() => {});
    assert.ok(s.aborted, 'the SDK aborted the request');

    // The interrupted turn settles and the conversation goes on, on the same process.
    messages[2] = { role: 'user', content: 'PLEASE-AFTER the interrupt' };
    const deadline = Date.now() + 30_000;
    let answer;
    for (;;) {
      try {
        answer = await create(messages);
        break;
      } catch (err) {
        assert.ok(err instanceof Anthropic.RateLimitError, `busy while the interrupt settles: ${err}`);
        assert.equal(err.status, 429);
        assert.ok(Date.now() < deadline, 'the session never became free');
        await sleep(100);
      }
    }
    assert.equal(answer.session, 'continued');
    assert.match(textOf(answer.message), /PLEASE-AFTER/);
    assert.doesNotMatch(textOf(answer.message), /slow slow/);
    assert.ok(rig.gateway.cliPids().includes(pid), 'the same CLI process');

    const seen = await callsSince(since);
    const slowAlone = seen.filter((c) => c.last_user_text.includes('PLEASE-SLOW') && !c.last_user_text.includes('PLEASE-AFTER'));
    assert.equal(slowAlone.length, 1, 'the slow prompt reached the model once');
    assert.match(seen.at(-1).last_user_text, /\[Request interrupted by user\]/);
  });

  test('a wrong key gets AuthenticationError (401)', async () => {
    const before = rig.gateway.cliPids();
    await assert.rejects(
      create([{ role: 'user', content: 'hi' }], client('wrong-key')),
      (err) => {
        assert.ok(err instanceof Anthropic.AuthenticationError, `${err}`);
        assert.equal(err.status, 401);
        assert.equal(err.error?.type, 'error');
        assert.equal(err.error?.error?.type, 'authentication_error');
        return true;
      },
    );
    assert.deepEqual(rig.gateway.cliPids(), before, 'no CLI process for a refused request');
  });

  test('stopping the gateway leaves no CLI process behind', async () => {
    const pids = await rig.stopGateway(); // throws if any outlives it
    assert.ok(pids.length >= 3, `CLI processes were seen: ${pids}`);
  });
});
