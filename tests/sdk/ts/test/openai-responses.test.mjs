// The official OpenAI TypeScript SDK, unchanged, against `ccwire serve`'s Responses API
// (`client.responses`) in front of the real Claude Code CLI and the scripted fake model: the
// SDK's own stream accumulator checks the event sequence.

import assert from 'node:assert/strict';
import { after as afterAll, before, describe, test } from 'node:test';

import OpenAI from 'openai';

import {
  KEY,
  LOOKUP_TOOL,
  OPENAI_MODEL,
  Rig,
  echo,
  lookups,
  onAny,
  onPrompt,
  onToolResult,
  resultText,
  text,
  toolResultsOf,
  withUsage,
} from './rig.mjs';

let rig;

before(async () => {
  rig = await Rig.start();
});

afterAll(async () => {
  await rig?.stop();
});

const client = () =>
  new OpenAI({ baseURL: `${rig.gateway.url}/v1`, apiKey: KEY, timeout: 60_000 });

/** The client tool, as a Responses API function tool. */
const LOOKUP = {
  type: 'function',
  name: 'lookup',
  description: LOOKUP_TOOL.description,
  parameters: LOOKUP_TOOL.input_schema,
  strict: false,
};

const params = (input, extra = {}) => ({ model: OPENAI_MODEL, tools: [LOOKUP], input, ...extra });

/** The function_call_output items answering a response's calls: `record-<query>`. */
const outputsFor = (response) =>
  response.output
    .filter((item) => item.type === 'function_call')
    .map((call) => ({
      type: 'function_call_output',
      call_id: call.call_id,
      output: `record-${JSON.parse(call.arguments).query}`,
    }));

const USAGE = { input_tokens: 40, output_tokens: 9, cache_creation_input_tokens: 5, cache_read_input_tokens: 300 };

async function callsSince(since) {
  return (await rig.fake.calls()).slice(since);
}
const callCount = async () => (await rig.fake.calls()).length;

describe('openai through ccwire serve (Responses)', () => {
  test('a text answer with instructions, and its exact usage', async () => {
    await rig.fake.script(withUsage(onPrompt('PLEASE-RESP-TEXT', text('Hello from the model.')), USAGE), onAny(echo()));
    const since = await callCount();
    const { result } = await rig.newSession(() =>
      client()
        .responses.create(params('PLEASE-RESP-TEXT now', { instructions: 'Be brief PLEASE-INSTR.' }))
        .withResponse(),
    );
    const { data: response, response: http } = result;
    assert.equal(http.headers.get('x-ccwire-session'), 'new');
    assert.equal(response.object, 'response');
    assert.equal(response.status, 'completed');
    assert.equal(response.output_text, 'Hello from the model.', 'the SDK reads the output text');
    assert.deepEqual(response.usage, {
      input_tokens: 345,
      input_tokens_details: { cached_tokens: 300 },
      output_tokens: 9,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 354,
    });
    const calls = await callsSince(since);
    assert.equal(calls.length, 1);
    assert.match(JSON.stringify(calls[0].body.system), /Be brief PLEASE-INSTR\./, 'instructions are the system prompt');
  });

  test('a streamed tool round trip continued by previous_response_id', async () => {
    await rig.fake.script(onToolResult(echo()), onPrompt('PLEASE-RESP-LOOKUP', lookups('alpha', 'beta')), onAny(echo()));
    const since = await callCount();
    const { result: first, pid } = await rig.newSession(async () => {
      const events = [];
      const stream = client().responses.stream(params('PLEASE-RESP-LOOKUP alpha and beta'));
      stream.on('event', (event) => events.push(event));
      return { events, response: await stream.finalResponse() };
    });
    const types = first.events.map((e) => e.type);
    assert.deepEqual(types.slice(0, 2), ['response.created', 'response.in_progress']);
    assert.equal(types.at(-1), 'response.completed');
    assert.ok(types.includes('response.function_call_arguments.delta'), types.join());
    const calls = first.response.output.filter((item) => item.type === 'function_call');
    assert.deepEqual(
      calls.map((c) => [c.name, JSON.parse(c.arguments)]),
      [
        ['lookup', { query: 'alpha' }],
        ['lookup', { query: 'beta' }],
      ],
      'the calls, as the SDK accumulated them',
    );
    assert.equal(first.response.output_text, 'Looking them up.');

    const { data: second, response: http } = await client()
      .responses.create(params(outputsFor(first.response), { previous_response_id: first.response.id }))
      .withResponse();
    assert.equal(http.headers.get('x-ccwire-session'), 'continued');
    assert.equal(second.previous_response_id, first.response.id);
    assert.match(second.output_text, /record-alpha/);
    assert.ok(rig.gateway.cliPids().includes(pid), 'the same CLI process');
    const seen = await callsSince(since);
    assert.equal(seen.length, 2, 'one model call per model message');
    assert.deepEqual(toolResultsOf(seen[1]).map(resultText), ['record-alpha', 'record-beta']);
  });

  test('the whole input every turn (store: false), streamed', async () => {
    await rig.fake.script(onToolResult(echo()), onPrompt('PLEASE-RESP-FULL', lookups('gamma')), onAny(echo()));
    const input = [{ role: 'user', content: [{ type: 'input_text', text: 'PLEASE-RESP-FULL gamma' }] }];
    const { result: first } = await rig.newSession(() =>
      client().responses.stream(params(input, { store: false })).finalResponse(),
    );
    assert.equal(first.store, false);
    // The output items go back as the SDK returned them, then the results.
    input.push(...first.output, ...outputsFor(first));
    const { data: stream, response: http } = await client()
      .responses.create(params(input, { store: false, stream: true }))
      .withResponse();
    let completed;
    for await (const event of stream) {
      if (event.type === 'response.completed') completed = event.response;
    }
    assert.equal(http.headers.get('x-ccwire-session'), 'continued');
    assert.match(completed.output[0].content[0].text, /record-gamma/);
  });
});
