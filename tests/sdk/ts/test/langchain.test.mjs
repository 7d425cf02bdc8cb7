// LangChain JS (`@langchain/openai`, `@langchain/anthropic`), unchanged and with its default
// retries, against `ccwire serve` in front of the real Claude Code CLI and the scripted fake
// model: `withStructuredOutput` with a zod 4 schema, in every method each chat model offers. zod 4
// writes JSON Schema draft 2020-12 (and says so in `$schema`); the CLI checks schemas as draft-07.

import assert from 'node:assert/strict';
import { after as afterAll, before, describe, test } from 'node:test';

import { ChatAnthropic } from '@langchain/anthropic';
import { ChatOpenAI } from '@langchain/openai';
import { z } from 'zod';

import { ANTHROPIC_MODEL, KEY, OPENAI_MODEL, Rig, onPrompt } from './rig.mjs';

let rig;

before(async () => {
  rig = await Rig.start();
});

afterAll(async () => {
  await rig?.stop();
});

const Person = z.object({
  name: z.string().min(1),
  age: z.number().int().nonnegative(),
  known_for: z.tuple([z.string(), z.number().int()]),
});
const ADA = { name: 'Ada', age: 36, known_for: ['the first program', 1843] };
// LangChain's Anthropic `jsonSchema` method refuses a schema node without a `type` (its own check,
// before any request): the tuple's `items: false` is one. The same person without it.
const PersonWithoutTuple = Person.omit({ known_for: true });

/** The model gives its structured answer (the CLI's structured-output tool) when it sees `marker`. */
const answers = (marker, input) =>
  onPrompt(marker, { kind: 'tool_use', text: 'Here it is.', calls: [{ name: 'StructuredOutput', input }] });

const models = {
  'ChatOpenAI (Chat Completions)': () =>
    new ChatOpenAI({ model: OPENAI_MODEL, apiKey: KEY, configuration: { baseURL: `${rig.gateway.url}/v1` } }),
  'ChatOpenAI (Responses)': () =>
    new ChatOpenAI({
      model: OPENAI_MODEL,
      apiKey: KEY,
      useResponsesApi: true,
      configuration: { baseURL: `${rig.gateway.url}/v1` },
    }),
  ChatAnthropic: () => new ChatAnthropic({ model: ANTHROPIC_MODEL, apiKey: KEY, anthropicApiUrl: rig.gateway.url }),
};

const methods = {
  'ChatOpenAI (Chat Completions)': [undefined, 'jsonSchema', 'functionCalling', 'jsonMode'],
  'ChatOpenAI (Responses)': [undefined, 'jsonSchema', 'functionCalling', 'jsonMode'],
  ChatAnthropic: [undefined, 'functionCalling', 'jsonSchema'],
};

test('zod 4 writes draft 2020-12, which the gateway must take', () => {
  const schema = z.toJSONSchema(Person);
  assert.equal(schema.$schema, 'https://json-schema.org/draft/2020-12/schema');
  assert.ok(JSON.stringify(schema).includes('prefixItems'), JSON.stringify(schema));
});

for (const [name, model] of Object.entries(models)) {
  describe(`LangChain JS, ${name}`, () => {
    for (const method of methods[name]) {
      test(`withStructuredOutput, method ${method ?? 'default'}`, async () => {
        const marker = `[lc-${name}-${method ?? 'default'}]`;
        const tuple = !(name === 'ChatAnthropic' && method === 'jsonSchema');
        const [schema, expected] = tuple ? [Person, ADA] : [PersonWithoutTuple, { name: ADA.name, age: ADA.age }];
        await rig.fake.script(answers(marker, expected));
        const structured = model().withStructuredOutput(schema, method ? { method } : undefined);
        const person = await structured.invoke(`Who wrote the first program? ${marker}`);
        assert.deepEqual(person, expected);
        // The CLI took the schema: the model was offered its structured-output tool.
        const call = await rig.fake.lastCall();
        const tools = (call.body.tools ?? []).map((t) => t.name);
        assert.ok(tools.includes('StructuredOutput'), tools.join(', '));
      });
    }
  });
}
