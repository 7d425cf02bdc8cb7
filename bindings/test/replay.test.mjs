// The package replays every corpus transcript to the core's golden chunks, byte for byte,
// however the bytes are split.

import assert from "node:assert/strict";
import { test } from "node:test";
import { Replayer, replayTranscript } from "ccwire";
import { corpus, firstDifference, golden, prng } from "./helpers.mjs";

function assertSame(name, chunks, expected) {
  const lines = chunks.map((c) => JSON.stringify(c));
  const at = firstDifference(lines, expected);
  assert.equal(
    at,
    -1,
    `${name}: chunk ${at} differs\n  package: ${lines[at]}\n  golden:  ${expected[at]}`,
  );
}

const transcripts = corpus();

test("the corpus is there", () => {
  assert.ok(transcripts.length >= 30, `only ${transcripts.length} transcripts found`);
});

for (const { name, bytes } of transcripts) {
  test(`${name} replays to its golden chunks`, () => {
    assertSame(name, replayTranscript(bytes), golden(name));
  });

  test(`${name} replays the same from text and from random byte splits`, () => {
    const expected = golden(name);
    assertSame(name, replayTranscript(bytes.toString("utf8")), expected);
    const random = prng(name.length * 7919 + bytes.length);
    for (let round = 0; round < 3; round++) {
      const replayer = new Replayer();
      const chunks = [];
      for (let at = 0; at < bytes.length; ) {
        const size = 1 + Math.floor(random() * (round === 0 ? 7 : 4096));
        chunks.push(...replayer.push(bytes.subarray(at, at + size)));
        at += size;
      }
      chunks.push(...replayer.finish());
      assertSame(`${name} (split round ${round})`, chunks, expected);
      replayer.free();
    }
  });
}

test("the replayer reports the time of the last line and the tool-wait state", () => {
  const replayer = new Replayer();
  replayer.push('{"dir":"out","t_ms":1234,"msg":{"type":"system","subtype":"status","status":null}}\n');
  assert.equal(replayer.nowMs, 1234);
  assert.deepEqual(replayer.toolWait(), { waiting: false, tool_use_ids: [], blocked_on: [] });
});

test("text outside ASCII, lone surrogates included, reaches JavaScript as the CLI wrote it", () => {
  // The module hands its JSON over in ASCII (\u escapes); the strings must come out unchanged.
  const text = "caf\u00e9 \ud83d lone, \udc00 low, a pair \ud83d\ude00, \u2028, \u0000 end";
  const line = JSON.stringify({ type: "mystery_message", text, nested: { "k\u00e9y": [text] } });
  for (const chunks of [replayTranscript(line + "\n"), new Replayer().push(line + "\n")]) {
    const unknown = chunks.find((c) => c.type === "unknown");
    assert.equal(unknown.message.text, text);
    assert.deepEqual(unknown.message.nested, { "k\u00e9y": [text] });
  }
});
