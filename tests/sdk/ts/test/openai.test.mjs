// The official OpenAI TypeScript SDK, unchanged, against `ccwire serve` (Chat Completions) in
// front of the real Claude Code CLI and the scripted fake model.

import assert from 'node:assert/strict';
import { after as afterAll, before, describe, test } from 'node:test';

import OpenAI from 'openai';
import { ChatCompletionStream } from 'openai/lib/ChatCompletionStream';

import {
  HELD_CALL_TIMEOUT_TEXT,
  KEY,
  LOOKUP_FUNCTION,
  OPENAI_MODEL,
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

let rig;

before(async () => {
  rig = await Rig.start();
});

afterAll(async () => {
  await rig?.stop();
});

function client(apiKey = KEY) {
  return new OpenAI({ baseURL: `${rig.gateway.url}/v1`, apiKey, timeout: 60_000 });
}

const params = (messages, extra = {}) => ({ model: OPENAI_MODEL, tools: [LOOKUP_FUNCTION], messages, ...extra });

/** `chat.completions.create`: the completion and the `x-ccwire-session` header. */
async function create(messages, c = client()) {
  const { data, response } = await c.chat.completions.create(params(messages)).withResponse();
  return { completion: data, message: data.choices[0].message, session: response.headers.get('x-ccwire-session'), reason: response.headers.get('x-ccwire-session-reason') };
}

/**
 * `chat.completions.create({stream: true})`: the chunks, the completion the SDK's own
 * `ChatCompletionStream` accumulates from them, and the header.
 */
async function stream(messages) {
  const { data: chunks, response } = await client()
    .chat.completions.create(params(messages, { stream: true, stream_options: { include_usage: true } }))
    .withResponse();
  const seen = [];
  const accumulated = ChatCompletionStream.fromReadableStream(chunks.toReadableStream());
  accumulated.on('chunk', (chunk) => seen.push(chunk));
  const completion = await accumulated.finalChatCompletion();
  return {
    chunks: seen,
    completion,
    message: completion.choices[0].message,
    session: response.headers.get('x-ccwire-session'),
  };
}

/** The tool messages answering an assistant message's calls: `record-<query>`. */
const resultsFor = (message) =>
  message.tool_calls.map((call) => ({
    role: 'tool',
    tool_call_id: call.id,
    content: `record-${JSON.parse(call.function.arguments).query}`,
  }));

/** An assistant message as a client sends it back (only the fields the API takes). */
const asHistory = (message) => ({
  role: 'assistant',
  content: message.content ?? null,
  ...(message.tool_calls?.length ? { tool_calls: message.tool_calls } : {}),
});

async function callsSince(since) {
  return (await rig.fake.calls()).slice(since);
}
const callCount = async () => (await rig.fake.calls()).length;

describe('openai through ccwire serve (Chat Completions)', () => {
  test('a text answer', async () => {
    await rig.fake.script(onAny(echo()));
    const since = await callCount();
    const { result, pid } = await rig.newSession(() =>
      create([
        { role: 'system', content: 'Be brief PLEASE-SYSTEM-O.' },
        { role: 'user', content: 'Hello PLEASE-TEXT-O' },
      ]),
    );
    const { completion, message, session } = result;
    assert.equal(session, 'new');
    assert.equal(completion.object, 'chat.completion');
    assert.equal(completion.choices.length, 1);
    assert.equal(completion.choices[0].finish_reason, 'stop');
    assert.equal(message.role, 'assistant');
    assert.match(message.content, /^You said: .*Hello PLEASE-TEXT-O/s);
    assert.ok(!message.tool_calls?.length);
    assert.equal(typeof completion.usage.total_tokens, 'number');
    assert.ok(pid > 0);

    const calls = await callsSince(since);
    assert.equal(calls.length, 1);
    assert.match(calls[0].last_user_text, /Hello PLEASE-TEXT-O/);
    assert.match(JSON.stringify(calls[0].body.system), /Be brief PLEASE-SYSTEM-O\./, 'the system message reached the model');
    const offered = (calls[0].body.tools ?? []).map((t) => t.name);
    assert.ok(offered.includes('mcp__client__lookup'), `the client tool is offered: ${offered}`);
  });

  test('a streamed answer (stream: true)', async () => {
    const answer = 'The quick brown fox jumps over the lazy dog.';
    await rig.fake.script(onPrompt('PLEASE-STREAM-TEXT', text(answer)), onAny(echo()));
    const { result } = await rig.newSession(async () => {
      const { data, response } = await client()
        .chat.completions.create(
          params([{ role: 'user', content: 'PLEASE-STREAM-TEXT now' }], {
            stream: true,
            stream_options: { include_usage: true },
          }),
        )
        .withResponse();
      const chunks = [];
      for await (const chunk of data) chunks.push(chunk);
      return { chunks, session: response.headers.get('x-ccwire-session'), reason: response.headers.get('x-ccwire-session-reason') };
    });
    const { chunks, session } = result;
    assert.equal(session, 'new');
    assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk'));
    assert.equal(new Set(chunks.map((c) => c.id)).size, 1, 'one id for the whole stream');
    const withChoice = chunks.filter((c) => c.choices.length > 0);
    assert.equal(withChoice[0].choices[0].delta.role, 'assistant');
    const pieces = withChoice.map((c) => c.choices[0].delta.content ?? '').filter((p) => p !== '');
    assert.ok(pieces.length >= 2, `streamed in pieces: ${JSON.stringify(pieces)}`);
    assert.equal(pieces.join(''), answer);
    assert.equal(withChoice.at(-1).choices[0].finish_reason, 'stop');
    const usage = chunks.at(-1);
    assert.deepEqual(usage.choices, [], 'the usage chunk comes last, with no choices');
    assert.equal(typeof usage.usage.total_tokens, 'number');
  });

  test('a client tool round trip, not streamed', async () => {
    await rig.fake.script(onToolResult(echo()), onPrompt('PLEASE-ONE-LOOKUP', lookups('alpha')), onAny(echo()));
    const since = await callCount();
    const user = { role: 'user', content: 'PLEASE-ONE-LOOKUP alpha' };
    const { result: first, pid } = await rig.newSession(() => create([user]));
    assert.equal(first.session, 'new');
    assert.equal(first.completion.choices[0].finish_reason, 'tool_calls');
    const calls = first.message.tool_calls;
    assert.equal(calls.length, 1);
    assert.equal(calls[0].type, 'function');
    assert.equal(calls[0].function.name, 'lookup', 'the client sees its own tool name');
    assert.deepEqual(JSON.parse(calls[0].function.arguments), { query: 'alpha' });

    // The SDK's message object goes back verbatim (refusal, annotations, … included), as clients do.
    const second = await create([user, first.message, ...resultsFor(first.message)]);
    assert.equal(second.session, 'continued');
    assert.equal(second.completion.choices[0].finish_reason, 'stop');
    assert.match(second.message.content, /record-alpha/);
    assert.ok(rig.gateway.cliPids().includes(pid), 'the same CLI process');

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
    assert.equal(first.completion.choices[0].finish_reason, 'tool_calls');
    const calls = first.message.tool_calls;
    assert.equal(calls.length, 1);
    assert.equal(calls[0].function.name, 'lookup');
    assert.deepEqual(JSON.parse(calls[0].function.arguments), { query: 'alpha' }, 'arguments assembled from deltas');
    assert.ok(
      first.chunks.some((c) => c.choices[0]?.delta?.tool_calls?.length),
      'tool calls arrive as tool_calls deltas',
    );

    // The message ChatCompletionStream accumulated goes back verbatim.
    const second = await stream([user, first.message, ...resultsFor(first.message)]);
    assert.equal(second.session, 'continued');
    assert.equal(second.completion.choices[0].finish_reason, 'stop');
    assert.match(second.message.content, /record-alpha/);
    assert.ok(rig.gateway.cliPids().includes(pid), 'the same CLI process');

    const seen = await callsSince(since);
    assert.deepEqual(toolResultsOf(seen.at(-1)).map(resultText), ['record-alpha']);
  });

  test('two tool calls in one model message, answered in one follow-up', async () => {
    await rig.fake.script(onToolResult(echo()), onPrompt('PLEASE-TWO-LOOKUPS', lookups('alpha', 'beta')), onAny(echo()));
    const since = await callCount();
    const user = { role: 'user', content: 'PLEASE-TWO-LOOKUPS alpha and beta' };
    const { result: first, pid } = await rig.newSession(() => create([user]));
    assert.equal(first.completion.choices[0].finish_reason, 'tool_calls');
    assert.deepEqual(
      first.message.tool_calls.map((c) => [c.function.name, JSON.parse(c.function.arguments)]),
      [
        ['lookup', { query: 'alpha' }],
        ['lookup', { query: 'beta' }],
      ],
      'both calls of the model message',
    );
    assert.equal(new Set(first.message.tool_calls.map((c) => c.id)).size, 2);

    const second = await create([user, asHistory(first.message), ...resultsFor(first.message)]);
    assert.equal(second.session, 'continued');
    assert.match(second.message.content, /record-alpha/);
    assert.match(second.message.content, /record-beta/);
    assert.ok(rig.gateway.cliPids().includes(pid));

    const seen = await callsSince(since);
    assert.equal(seen.length, 2, 'both results went to the model in one call');
    assert.deepEqual(toolResultsOf(seen[1]).map(resultText).sort(), ['record-alpha', 'record-beta']);
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
    const messages = [user, asHistory(first.message), ...resultsFor(first.message)];
    const second = await create(messages);
    assert.equal(second.session, 'continued');
    const pidsAfterSecond = rig.gateway.cliPids();

    messages.push(asHistory(second.message));
    messages.push({ role: 'user', content: 'And now PLEASE-THIRD-TURN please' });
    const { data: third, response } = await client().chat.completions.create(params(messages)).withResponse();
    assert.equal(response.headers.get('x-ccwire-session'), 'continued');
    assert.match(third.choices[0].message.content, /PLEASE-THIRD-TURN/);
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
    const user = { role: 'user', content: 'My codename is PLEASE-REMEMBER-TULIP.' };
    const first = await create([user]);
    assert.equal(first.session, 'new');
    const oldPids = await rig.restart(); // asserts every old CLI process is gone
    assert.ok(oldPids.length >= 1);

    const since = await callCount();
    const second = await create([user, asHistory(first.message), { role: 'user', content: 'What is my codename?' }]);
    assert.equal(second.session, 'resumed');
    assert.equal(second.completion.choices[0].finish_reason, 'stop');
    const seen = await callsSince(since);
    assert.ok(seen.length >= 1);
    // The earlier turns reach the model as the messages they were, not retold.
    const last = seen.at(-1);
    assert.ok(last.last_user_text.includes('What is my codename?'), last.last_user_text);
    assert.ok(!last.last_user_text.includes('PLEASE-REMEMBER-TULIP'), last.last_user_text);
    const earlier = JSON.stringify(last.body.messages.slice(0, -1));
    assert.ok(earlier.includes('My codename is PLEASE-REMEMBER-TULIP.'), `the model saw the first turn: ${earlier}`);
    assert.ok(earlier.includes(JSON.stringify(first.message.content).slice(1, -1)), `the model saw its own earlier answer: ${earlier}`);
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
    assert.equal(first.completion.choices[0].finish_reason, 'tool_calls');

    // No result from the client: the gateway answers the held call with an error the model sees.
    const timedOut = await poll(async () => {
      const seen = await callsSince(since);
      return seen.find((c) => toolResultsOf(c).some((r) => resultText(r).includes(HELD_CALL_TIMEOUT_TEXT)));
    });
    assert.ok(timedOut, 'the model saw the held-call timeout');
    assert.equal(toolResultsOf(timedOut)[0].is_error, true);

    const second = await create([user, asHistory(first.message), ...resultsFor(first.message)]);
    // The turn went on without the client: a new CLI resumes the history with the result.
    assert.equal(second.session, 'resumed');
    assert.equal(second.reason, 'late');
    assert.equal(second.completion.choices[0].finish_reason, 'stop');
    assert.match(second.message.content, /record-alpha/);
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
    const messages = [user, asHistory(first.message), { role: 'user', content: 'PLEASE-SLOW please' }];

    const s = await client().chat.completions.create(params(messages, { stream: true }));
    let firstChunk;
    for await (const chunk of s) {
      firstChunk = chunk;
      break; // leaving the loop aborts the request
    }
    assert.equal(firstChunk?.object, 'chat.completion.chunk');
    assert.ok(s.controller.signal.aborted, 'the SDK aborted the request');

    // The interrupted turn settles and the conversation goes on, on the same process.
    messages[2] = { role: 'user', content: 'PLEASE-AFTER the interrupt' };
    const deadline = Date.now() + 30_000;
    let answer;
    for (;;) {
      try {
        answer = await create(messages);
        break;
      } catch (err) {
        assert.ok(err instanceof OpenAI.RateLimitError, `busy while the interrupt settles: ${err}`);
        assert.equal(err.status, 429);
        assert.ok(Date.now() < deadline, 'the session never became free');
        await sleep(100);
      }
    }
    assert.equal(answer.session, 'continued');
    assert.match(answer.message.content, /PLEASE-AFTER/);
    assert.doesNotMatch(answer.message.content, /slow slow/);
    assert.ok(rig.gateway.cliPids().includes(pid), 'the same CLI process');

    const seen = await callsSince(since);
    const slowAlone = seen.filter((c) => c.last_user_text.includes('PLEASE-SLOW') && !c.last_user_text.includes('PLEASE-AFTER'));
    assert.equal(slowAlone.length, 1, 'the slow prompt reached the model once');
    assert.match(seen.at(-1).last_user_text, /\[Request interrupted by user\]/);
  });

  test('a wrong key gets AuthenticationError (401)', async () => {
    const before = rig.gateway.cliPids();
    await assert.rejects(create([{ role: 'user', content: 'hi' }], client('wrong-key')), (err) => {
      assert.ok(err instanceof OpenAI.AuthenticationError, `${err}`);
      assert.equal(err.status, 401);
      assert.equal(err.type, 'authentication_error', "OpenAI's error shape");
      return true;
    });
    assert.deepEqual(rig.gateway.cliPids(), before, 'no CLI process for a refused request');
  });

  test('stopping the gateway leaves no CLI process behind', async () => {
    const pids = await rig.stopGateway(); // throws if any outlives it
    assert.ok(pids.length >= 3, `CLI processes were seen: ${pids}`);
  });
});
