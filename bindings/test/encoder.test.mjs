// The Anthropic and OpenAI response encoders of `ccwire/conversation`: every corpus transcript
// encodes to what the native `ccwire replay --format` prints, byte for byte, both through
// `encodeTranscript` and through a `ResponseEncoder` fed the chunks the package hands out; and
// the grammar of each API's stream, failures and misuse, one behaviour per test.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { test } from "node:test";
import { replayTranscript } from "ccwire";
import { ResponseEncoder, encodeTranscript } from "ccwire/conversation";
import { corpus, corpusDir, nativeCcwire, root } from "./helpers.mjs";

const FORMATS = ["anthropic-sse", "openai-sse", "responses-sse", "anthropic-json", "openai-json", "responses-json"];

/** What `ccwire replay --format` prints, rebuilt in JavaScript from a `ResponseEncoder` per turn. */
function encodeWithClass(chunks, format) {
  const [api, kind] = format.split("-");
  const stream = kind === "sse";
  const options = { api, stream, model: "claude-code", created: 0, includeUsage: true, clientToolPrefix: "mcp__client__" };
  let encoder = new ResponseEncoder(options);
  let out = "";
  for (const chunk of chunks) {
    for (const frame of encoder.push(chunk)) out += frame;
    const outcome = encoder.outcome;
    if (outcome === null) continue;
    if (outcome.kind === "failed" && (!encoder.started || !stream)) {
      const body = JSON.stringify(outcome.error.body);
      if (!stream) out += `${body}\n`;
      else if (api !== "openai") out += `event: error\ndata: ${body}\n\n`;
      else out += `data: ${body}\n\n`;
    } else if (!stream) {
      out += `${JSON.stringify(encoder.body())}\n`;
    }
    encoder.free();
    encoder = new ResponseEncoder(options);
  }
  encoder.free();
  return out;
}

/** The first differing line of two outputs, for a readable failure. */
function assertSameText(actual, expected, what) {
  if (actual === expected) return;
  const a = actual.split("\n");
  const e = expected.split("\n");
  const at = a.findIndex((line, i) => line !== e[i]);
  assert.fail(`${what}: line ${at} differs\n  package: ${a[at]}\n  native:  ${e[at]}`);
}

const transcripts = corpus();
const ccwire = nativeCcwire();

for (const { name, bytes } of transcripts) {
  test(`${name} encodes in every format as \`ccwire replay --format\` prints it`, () => {
    const chunks = replayTranscript(bytes);
    for (const format of FORMATS) {
      const native = execFileSync(ccwire, ["replay", "--format", format, join(corpusDir, name)], {
        encoding: "utf8",
        maxBuffer: 64 << 20,
      });
      assertSameText(encodeTranscript(bytes, format), native, `${name} ${format} (encodeTranscript)`);
      assertSameText(encodeWithClass(chunks, format), native, `${name} ${format} (ResponseEncoder)`);
    }
  });
}

test("the corpus has responses of every kind", () => {
  const all = transcripts.map(({ bytes }) => encodeTranscript(bytes, "anthropic-json")).join("");
  const bodies = all.trim().split("\n").map((line) => JSON.parse(line));
  assert.ok(bodies.some((b) => b.stop_reason === "tool_use"), "a client tool call");
  assert.ok(bodies.some((b) => b.stop_reason === "end_turn"), "a finished answer");
  assert.ok(bodies.some((b) => b.type === "error"), "a failed turn");
});

// ---- unit tests: hand-made chunks --------------------------------------------------------

const MSG = "msg_1";
const start = {
  type: "message_start",
  message_id: MSG,
  model: "claude-x",
  parent_tool_use_id: null,
  usage: { input_tokens: 10, cache_creation_input_tokens: 2, cache_read_input_tokens: 5, output_tokens: 1 },
};
const text = (t, index = 0) => ({ type: "text_delta", message_id: MSG, index, text: t, parent_tool_use_id: null });
const toolUse = (complete, input = null) => ({
  type: "tool_use",
  id: "toolu_1",
  name: "mcp__client__lookup",
  message_id: MSG,
  index: 1,
  parent_tool_use_id: null,
  complete,
  input,
});
const inputDelta = (partial) => ({ type: "tool_input_delta", id: "toolu_1", partial_json: partial });
const delta = (stop) => ({
  type: "message_delta",
  message_id: MSG,
  stop_reason: stop,
  usage: { output_tokens: 7 },
});
const stop = { type: "message_stop", message_id: MSG };
const turnComplete = (fields = {}) => ({
  type: "turn_complete",
  subtype: "success",
  is_error: false,
  result: "",
  stop_reason: "end_turn",
  terminal_reason: null,
  num_turns: 1,
  duration_ms: 5,
  usage: {},
  total_cost_usd: 0,
  session_id: "s",
  permission_denials: [],
  errors: [],
  ...fields,
});
const toolTurn = [start, text("Let me look."), toolUse(false), inputDelta('{"q":'), inputDelta('"x"}'), toolUse(true, { q: "x" }), delta("tool_use"), stop];

function encoder(options) {
  return new ResponseEncoder({ model: "m", id: "msg_r", created: 1700000000, ...options });
}

function pushAll(enc, chunks) {
  return chunks.flatMap((chunk) => enc.push(chunk));
}

/** The JSON payloads of OpenAI SSE frames (`data: …`), `[DONE]` kept as a string. */
function dataOf(frames) {
  return frames.map((f) => {
    assert.match(f, /^data: .*\n\n$/s);
    const data = f.slice("data: ".length, -2);
    return data === "[DONE]" ? data : JSON.parse(data);
  });
}

test("an OpenAI stream of a client tool call follows the chunk grammar: tool_calls deltas, finish, usage, [DONE]", () => {
  const enc = encoder({ api: "openai", stream: true, includeUsage: true, clientToolPrefix: "mcp__client__" });
  const data = dataOf(pushAll(enc, toolTurn));
  const deltas = data.slice(0, -1).map((d) => d.choices[0]?.delta);
  assert.deepEqual(deltas.slice(0, 2), [{ role: "assistant", content: "" }, { content: "Let me look." }]);
  assert.deepEqual(deltas[2], {
    tool_calls: [{ index: 0, id: "toolu_1", type: "function", function: { name: "lookup", arguments: "" } }],
  });
  assert.deepEqual(deltas.slice(3, 5), [
    { tool_calls: [{ index: 0, function: { arguments: '{"q":' } }] },
    { tool_calls: [{ index: 0, function: { arguments: '"x"}' } }] },
  ]);
  const finish = data[5];
  assert.equal(finish.choices[0].finish_reason, "tool_calls");
  assert.deepEqual(finish.choices[0].delta, {});
  assert.equal(finish.usage, null, "every chunk carries usage: null when usage is included");
  const usage = data[6];
  assert.deepEqual(usage.choices, []);
  assert.deepEqual(usage.usage, {
    prompt_tokens: 17,
    completion_tokens: 7,
    total_tokens: 24,
    prompt_tokens_details: { cached_tokens: 5 },
  });
  assert.equal(data[7], "[DONE]");
  assert.equal(data.length, 8);
  for (const d of data.slice(0, -1)) {
    assert.equal(d.id, "chatcmpl-msg_r");
    assert.equal(d.object, "chat.completion.chunk");
    assert.equal(d.created, 1700000000);
  }
  assert.deepEqual(enc.outcome, { kind: "tool_calls" });
  assert.deepEqual(enc.toolCalls(), [{ id: "toolu_1", name: "lookup", input: { q: "x" } }]);
});

test("an OpenAI stream without includeUsage has no usage chunk and no usage field", () => {
  const enc = encoder({ api: "openai", stream: true, clientToolPrefix: "mcp__client__" });
  const data = dataOf(pushAll(enc, toolTurn));
  assert.equal(data.at(-1), "[DONE]");
  assert.equal(data.at(-2).choices[0].finish_reason, "tool_calls");
  assert.ok(data.slice(0, -1).every((d) => !("usage" in d)));
});

test("the OpenAI body of a tool call has the calls, null content and finish_reason tool_calls", () => {
  const enc = encoder({ api: "openai", stream: false, clientTools: { mcp__client__lookup: "find" } });
  assert.deepEqual(pushAll(enc, toolTurn), [], "no frames without streaming");
  const body = enc.body();
  assert.equal(body.object, "chat.completion");
  assert.equal(body.choices[0].finish_reason, "tool_calls");
  assert.deepEqual(body.choices[0].message.tool_calls, [
    { id: "toolu_1", type: "function", function: { name: "find", arguments: '{"q":"x"}' } },
  ]);
  assert.equal(body.choices[0].message.content, "Let me look.");
});

test("an Anthropic stream has the Messages API event sequence", () => {
  const enc = encoder({ api: "anthropic", stream: true, clientToolPrefix: "mcp__client__" });
  const frames = pushAll(enc, toolTurn);
  const events = frames.map((f) => /^event: (\w+)\ndata: /.exec(f)[1]);
  assert.deepEqual(events, [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "content_block_start",
    "content_block_delta",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
  ]);
  const last = JSON.parse(frames[8].split("data: ")[1]);
  assert.deepEqual(last.delta, { stop_reason: "tool_use", stop_sequence: null });
  assert.deepEqual(enc.body().content[1], { type: "tool_use", id: "toolu_1", name: "lookup", input: { q: "x" } });
});

test("a finished answer reports its stop reason, body and canonical message", () => {
  const enc = encoder({ api: "anthropic", stream: false });
  pushAll(enc, [start, text("Hi"), text(" there"), delta("end_turn"), stop]);
  assert.equal(enc.outcome, null, "the response waits for the turn to end");
  assert.equal(enc.body(), null);
  enc.push(turnComplete());
  assert.deepEqual(enc.outcome, { kind: "finished", stopReason: "end_turn" });
  assert.deepEqual(enc.body(), {
    id: "msg_r",
    type: "message",
    role: "assistant",
    model: "m",
    content: [{ type: "text", text: "Hi there" }],
    stop_reason: "end_turn",
    stop_sequence: null,
    usage: { input_tokens: 10, cache_creation_input_tokens: 2, cache_read_input_tokens: 5, output_tokens: 7 },
  });
  assert.deepEqual(enc.message(), { role: "assistant", content: [{ type: "text", text: "Hi there" }] });
});

test("a turn that fails before the first frame has no frames and reports the upstream status", () => {
  for (const api of ["anthropic", "openai"]) {
    const enc = encoder({ api, stream: true });
    const frames = enc.push(turnComplete({ subtype: "error_during_execution", is_error: true, result: "slow down", api_error_status: 429 }));
    assert.deepEqual(frames, [], `${api}: nothing was streamed, so the error goes out as an HTTP status`);
    assert.equal(enc.started, false);
    assert.equal(enc.body(), null);
    const { kind, error } = enc.outcome;
    assert.equal(kind, "failed");
    assert.equal(error.status, 429);
    assert.equal(error.message, "slow down");
    assert.equal(error.param, null);
    const type = api === "anthropic" ? error.body.error.type : error.body.error.type;
    assert.equal(type, api === "anthropic" ? "rate_limit_error" : "rate_limit_exceeded");
  }
});

test("fail before the first frame gives no frames; after it, the error goes into the stream", () => {
  const early = encoder({ api: "openai", stream: true });
  assert.deepEqual(early.fail("gone"), []);
  assert.equal(early.outcome.error.status, 500);
  assert.equal(early.outcome.error.body.error.type, "server_error");

  const late = encoder({ api: "openai", stream: true });
  pushAll(late, [start, text("Hi")]);
  assert.equal(late.started, true);
  const data = dataOf(late.fail("overloaded", 529));
  assert.deepEqual(data, [
    { error: { message: "overloaded", type: "server_error", param: null, code: null } },
    "[DONE]",
  ]);
  assert.deepEqual(late.fail("again"), [], "a response ends once");
  assert.deepEqual(late.push(text("more")), [], "chunks after the end are ignored");

  const anthropic = encoder({ api: "anthropic", stream: true });
  pushAll(anthropic, [start, text("Hi")]);
  const frames = anthropic.fail("overloaded", 529);
  assert.equal(frames.at(-1), 'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"overloaded"}}\n\n');
});

test("ping is Anthropic's ping event or an SSE comment", () => {
  assert.equal(encoder({ api: "anthropic", stream: true }).ping(), 'event: ping\ndata: {"type":"ping"}\n\n');
  assert.equal(encoder({ api: "openai", stream: true }).ping(), ": ping\n\n");
});

test("chunks the encoder does not read are accepted and change nothing", () => {
  const enc = encoder({ api: "anthropic", stream: true });
  assert.deepEqual(enc.push({ type: "tool_status", id: "t", status: "running" }), []);
  assert.deepEqual(enc.push({ type: "status", subtype: "x", server: 3, index: "not a number" }), []);
  assert.equal(enc.started, false);
  assert.equal(enc.outcome, null);
});

test("created defaults to now, and the id to the first model message's", () => {
  const before = Math.floor(Date.now() / 1000);
  const enc = new ResponseEncoder({ api: "openai", stream: false, model: "m" });
  pushAll(enc, [start, text("Hi"), stop, turnComplete()]);
  const body = enc.body();
  assert.ok(body.created >= before && body.created <= before + 5, `created ${body.created}`);
  assert.equal(body.id, "chatcmpl-msg_1");
});

test("bad options, chunks and arguments throw real Errors that say what is wrong", () => {
  const base = { api: "anthropic", stream: false, model: "m" };
  const cases = [
    [() => new ResponseEncoder({ ...base, api: "gemini" }), /ResponseEncoder options: unknown variant `gemini`, expected one of `anthropic`, `openai`, `responses`/],
    [() => new ResponseEncoder({ api: "openai", stream: true }), /ResponseEncoder options: missing field `model`/],
    [() => new ResponseEncoder({ ...base, stream: "yes" }), /ResponseEncoder options: invalid type: string "yes", expected a boolean/],
    [() => new ResponseEncoder({ ...base, includeUsge: true }), /ResponseEncoder options: unknown field `includeUsge`/],
    [() => new ResponseEncoder({ ...base, created: -1 }), /ResponseEncoder options: invalid value: integer `-1`, expected u64/],
    [() => new ResponseEncoder({ ...base, clientTools: ["lookup"] }), /ResponseEncoder options: invalid type: sequence, expected a map/],
    [() => new ResponseEncoder(), /options must be an object/],
    [() => new ResponseEncoder(base).push("text_delta"), /push takes a chunk/],
    [() => new ResponseEncoder(base).push({ text: "x" }), /push takes a chunk/],
    [() => new ResponseEncoder(base).push({ type: "text_delta", index: 0, text: "x" }), /chunk: a text_delta chunk: missing field `message_id`/],
    [() => new ResponseEncoder(base).push({ ...text("x"), index: "0" }), /chunk: a text_delta chunk: invalid type: string "0", expected u32/],
    [() => new ResponseEncoder(base).fail("x", 418), /status must be one of 400, 401, 402, 403, 404, 405, 408, 413, 415, 422, 429, 500, 503, 529, got 418/],
    [() => new ResponseEncoder(base).fail("x", "500"), /status must be a number/],
    [() => encodeTranscript("", "anthropic"), /format must be "anthropic-sse", "openai-sse", "responses-sse", "anthropic-json", "openai-json" or "responses-json", got "anthropic"/],
  ];
  for (const [make, message] of cases) {
    assert.throws(make, (err) => err instanceof Error && message.test(err.message), `expected ${message}`);
  }
});

test("in browsers encodeTranscript asks for the main module until it is loaded", () => {
  // The browser entry points, in a fresh process (this one has both modules loaded).
  const script = `
    import { readFileSync } from "node:fs";
    import { init as initMain } from "./js/web.js";
    import { init, encodeTranscript } from "./js/conversation-web.js";
    await init(readFileSync("./pkg/ccwire_conversation_bg.wasm"));
    try {
      encodeTranscript("", "openai-sse");
      console.log("no error");
    } catch (err) {
      console.log(err.message);
    }
    await initMain(readFileSync("./pkg/ccwire_wasm_bg.wasm"));
    const transcript = readFileSync(${JSON.stringify(join(corpusDir, "a_text.jsonl"))});
    console.log(encodeTranscript(transcript, "openai-json").startsWith('{"id":"chatcmpl-'));
  `;
  const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], {
    cwd: join(root, "bindings"),
    encoding: "utf8",
  });
  assert.equal(
    out,
    'ccwire/conversation: encodeTranscript replays with the main module; `await init()` from "ccwire" first\ntrue\n',
  );
});
