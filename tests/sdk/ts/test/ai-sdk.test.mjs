// The Vercel AI SDK (`ai` with `@ai-sdk/anthropic`, `@ai-sdk/openai` — its default, the Responses
// API, which names the model's earlier text by `item_reference` — and `@ai-sdk/openai-compatible`),
// unchanged, against `ccwire serve` in front of the real Claude Code CLI and the scripted fake
// model: multi-step tool use with tools the SDK runs itself, streaming, and exact usage.

import assert from 'node:assert/strict';
import { after as afterAll, before, describe, test } from 'node:test';

import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, stepCountIs, streamText, tool } from 'ai';
import { z } from 'zod';

import { ANTHROPIC_MODEL, KEY, Rig, lookups, onAny, onPrompt, onToolResult, text, toolResultsOf, withUsage } from './rig.mjs';

let rig;

before(async () => {
  rig = await Rig.start();
});

afterAll(async () => {
  await rig?.stop();
});

const CALL = { input_tokens: 410, output_tokens: 33 };
const ANSWER = { input_tokens: 455, output_tokens: 17 };

const providers = {
  anthropic: () => createAnthropic({ baseURL: `${rig.gateway.url}/v1`, apiKey: KEY })(ANTHROPIC_MODEL),
  openai: () => createOpenAI({ baseURL: `${rig.gateway.url}/v1`, apiKey: KEY })('gpt-4o'),
  'openai-compatible': () =>
    createOpenAICompatible({ name: 'ccwire', baseURL: `${rig.gateway.url}/v1`, apiKey: KEY, includeUsage: true })(
      'gpt-4o',
    ),
};

/** A tool the SDK runs itself, and the queries it was called with. */
function lookupTool() {
  const queries = [];
  const lookup = tool({
    description: 'Looks a record up.',
    inputSchema: z.object({ query: z.string() }),
    execute: async ({ query }) => {
      queries.push(query);
      return `record-${query}`;
    },
  });
  return { lookup, queries };
}

for (const [name, model] of Object.entries(providers)) {
  describe(`AI SDK, ${name} provider`, () => {
    test('generateText runs the client tool over two steps with exact usage', async () => {
      await rig.fake.script(
        withUsage(onPrompt('PLEASE-LOOKUP', lookups('alpha')), CALL),
        withUsage(onToolResult(text('Found record-alpha.')), ANSWER),
      );
      const { lookup, queries } = lookupTool();
      const result = await generateText({
        model: model(),
        tools: { lookup },
        stopWhen: stepCountIs(3),
        prompt: `PLEASE-LOOKUP alpha (${name})`,
      });
      assert.deepEqual(queries, ['alpha'], 'the SDK ran its tool once');
      assert.equal(result.steps.length, 2);
      assert.equal(result.steps[0].finishReason, 'tool-calls');
      assert.equal(result.text, 'Found record-alpha.');
      assert.equal(result.steps[0].usage.inputTokens, CALL.input_tokens);
      assert.equal(result.steps[0].usage.outputTokens, CALL.output_tokens);
      assert.equal(result.totalUsage.inputTokens, CALL.input_tokens + ANSWER.input_tokens);
      assert.equal(result.totalUsage.outputTokens, CALL.output_tokens + ANSWER.output_tokens);
      // What the model received after the tool ran: the SDK's result, on the same conversation.
      const last = await rig.fake.lastCall();
      assert.ok(JSON.stringify(toolResultsOf(last)).includes('record-alpha'), JSON.stringify(last.body.messages));
    });

    test('streamText runs the client tool over two steps on one conversation', async () => {
      await rig.fake.script(
        onPrompt('PLEASE-LOOKUP', lookups('beta')),
        onToolResult(text('Found record-beta.')),
      );
      const { lookup, queries } = lookupTool();
      const result = streamText({
        model: model(),
        tools: { lookup },
        stopWhen: stepCountIs(3),
        prompt: `PLEASE-LOOKUP beta, streamed (${name})`,
      });
      let streamed = '';
      for await (const piece of result.textStream) streamed += piece;
      assert.deepEqual(queries, ['beta'], 'the SDK ran its tool once');
      assert.equal(streamed, 'Looking it up.Found record-beta.');
      const steps = await result.steps;
      assert.equal(steps.length, 2);
      assert.equal(steps[1].response.headers['x-ccwire-session'], 'continued');
      // The model received its own words and call, then the result, as blocks (not retold).
      const last = await rig.fake.lastCall();
      const assistant = last.body.messages.at(-2);
      assert.equal(assistant.role, 'assistant');
      assert.deepEqual(
        assistant.content.filter((b) => b.type !== 'thinking').map((b) => b.type),
        ['text', 'tool_use'],
        JSON.stringify(assistant),
      );
      assert.ok(JSON.stringify(toolResultsOf(last)).includes('record-beta'));
    });

    test('streamText streams the answer with usage', async () => {
      const answer = 'A streamed answer in several pieces.';
      await rig.fake.script(withUsage(onAny(text(answer)), ANSWER));
      const result = streamText({ model: model(), prompt: `Say something (${name})` });
      let streamed = '';
      let pieces = 0;
      for await (const piece of result.textStream) {
        streamed += piece;
        pieces += 1;
      }
      assert.equal(streamed, answer);
      assert.ok(pieces > 1, `streamed in ${pieces} piece(s)`);
      const usage = await result.usage;
      assert.equal(usage.inputTokens, ANSWER.input_tokens);
      assert.equal(usage.outputTokens, ANSWER.output_tokens);
      assert.equal(await result.finishReason, 'stop');
    });
  });
}
