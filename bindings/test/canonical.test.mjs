// Conversation canonicalization and history hashes across the two APIs.

import assert from "node:assert/strict";
import { test } from "node:test";
import { ApiRequestError, canonicalRequest, historyHash } from "ccwire/conversation";

const anthropic = {
  model: "claude-x",
  max_tokens: 100,
  messages: [
    { role: "user", content: "What is 2+2?" },
    { role: "assistant", content: [{ type: "text", text: "4" }] },
    { role: "user", content: "And 3+3?" },
  ],
};
const openai = {
  model: "claude-x",
  messages: [
    { role: "user", content: "What is 2+2?" },
    { role: "assistant", content: "4" },
    { role: "user", content: "And 3+3?" },
  ],
};

test("the Anthropic and OpenAI shapes of one conversation hash the same", () => {
  const a = canonicalRequest(anthropic, { api: "anthropic", tenant: "t1" });
  const o = canonicalRequest(JSON.stringify(openai), { api: "openai", tenant: "t1" });
  assert.equal(a.history_len, 2);
  assert.match(a.history_hash, /^[0-9a-f]{64}$/);
  assert.equal(a.history_hash, o.history_hash);
  assert.deepEqual(a.messages, o.messages);
  assert.deepEqual(a.messages[0], { role: "user", content: [{ type: "text", text: "What is 2+2?" }] });
});

test("the tenant namespaces the hash", () => {
  const one = historyHash(anthropic, { api: "anthropic", tenant: "a" });
  const two = historyHash(anthropic, { api: "anthropic", tenant: "b" });
  assert.notEqual(one, two);
});

test("no assistant message yet means no history hash", () => {
  const body = { ...anthropic, messages: [anthropic.messages[0]] };
  assert.equal(historyHash(body, { api: "anthropic" }), null);
});

test("an invalid request throws an ApiRequestError with the API's error body", () => {
  assert.throws(
    () => canonicalRequest({ messages: [] }, { api: "anthropic" }),
    (err) =>
      err instanceof ApiRequestError &&
      err instanceof Error &&
      err.status === 400 &&
      err.body.type === "error" &&
      err.body.error.type === "invalid_request_error",
  );
  assert.throws(() => canonicalRequest("{", { api: "openai" }), ApiRequestError);
  assert.throws(() => canonicalRequest(anthropic, { api: "gemini" }), /anthropic/);
});
