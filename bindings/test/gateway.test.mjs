// The gateway state machine of `ccwire/conversation`, driven from JavaScript the way
// `ccwire serve` drives it: route a request, build the response with a ResponseEncoder from the
// turn's chunks, record it, answer the CLI's tool calls, apply the deadlines. Mirrors the core's
// unit tests, over both APIs' request shapes.

import assert from "node:assert/strict";
import { test } from "node:test";
import { ApiRequestError, Gateway, HELD_CALL_TIMEOUT_TEXT, ResponseEncoder } from "ccwire/conversation";

const TOOLS = [{ name: "lookup", description: "Looks a word up.", input_schema: { type: "object" } }];
const ANTHROPIC = { api: "anthropic", tenant: "key-1" };
const OPENAI = { api: "openai", tenant: "key-1" };

/** An Anthropic Messages request. */
function request(messages, extra = {}) {
  return { model: "claude-x", max_tokens: 100, tools: TOOLS, messages, ...extra };
}

const user = (content) => ({ role: "user", content });
const result = (id, text) => ({ type: "tool_result", tool_use_id: id, content: text });

// ---- the CLI's side of a turn, as chunks ---------------------------------------------------

let messageCount = 0;

/** The chunks of a model message calling `lookup` once per id (in parallel). */
function toolCallTurn(ids) {
  const id = `msg_${++messageCount}`;
  return [
    { type: "message_start", message_id: id, model: "claude-x", parent_tool_use_id: null },
    ...ids.map((toolId, index) => ({
      type: "tool_use",
      id: toolId,
      name: "mcp__client__lookup",
      message_id: id,
      index,
      parent_tool_use_id: null,
      complete: true,
      input: { q: toolId },
    })),
    { type: "message_delta", message_id: id, stop_reason: "tool_use", usage: {} },
    { type: "message_stop", message_id: id },
  ];
}

/** The chunks of a model message answering with text, to the end of the turn. */
function textTurn(text) {
  const id = `msg_${++messageCount}`;
  return [
    { type: "message_start", message_id: id, model: "claude-x", parent_tool_use_id: null },
    { type: "text_delta", message_id: id, index: 0, text, parent_tool_use_id: null },
    { type: "message_delta", message_id: id, stop_reason: "end_turn", usage: {} },
    { type: "message_stop", message_id: id },
    { type: "turn_complete", subtype: "success", is_error: false, result: text, usage: {} },
  ];
}

/**
 * The host's part after `route`: encodes the turn's chunks as the request's API wants, records
 * the response with the gateway and returns the response body the client gets.
 */
function respond(gateway, route, chunks, nowMs) {
  const encoder = new ResponseEncoder({
    api: route.request.api,
    stream: false,
    model: route.request.model,
    created: 0,
    clientTools: route.clientTools,
  });
  for (const chunk of chunks) encoder.push(chunk);
  assert.notEqual(encoder.outcome, null, "the response is complete");
  gateway.responseDone(route.session, encoder, nowMs);
  const body = encoder.body();
  encoder.free();
  return body;
}

/** A conversation whose first response called lookup for `a` and `b`: the client's history and the session. */
function waitingForTools(gateway, options = ANTHROPIC) {
  const messages = [user("hi")];
  const route = gateway.route(request(messages), options, 0);
  assert.equal(route.kind, "start");
  const body = respond(gateway, route, toolCallTurn(["a", "b"]), 10);
  assert.equal(body.stop_reason, "tool_use");
  return { session: route.session, history: [...messages, { role: "assistant", content: body.content }] };
}

/** An `ApiRequestError` check with the status and words in the message. */
function apiError(status, ...words) {
  return (err) => {
    assert.ok(err instanceof ApiRequestError, `an ApiRequestError, got ${err}`);
    assert.equal(err.status, status);
    for (const word of words) assert.match(err.message, new RegExp(word), err.message);
    return true;
  };
}

// ---- the flow of ccwire serve ------------------------------------------------------------

test("a new conversation starts a session whose prompt is the user's message", () => {
  const gateway = new Gateway();
  const route = gateway.route(request([user("hi")], { stream: true }), ANTHROPIC, 0);
  assert.equal(route.kind, "start");
  assert.equal(route.sessionKind, "new");
  assert.equal(route.replaces, null);
  assert.deepEqual(route.prompt, [{ type: "text", text: "hi" }]);
  assert.equal(route.request.model, "claude-x");
  assert.equal(route.request.stream, true);
  assert.equal(route.request.api, "anthropic");
  assert.deepEqual(route.request.tools, TOOLS);
  assert.deepEqual(route.clientTools, { mcp__client__lookup: "lookup" });
  assert.ok(!("messages" in route.request), "the gateway keeps the messages");
  assert.equal(gateway.sessionCount, 1);
});

test("tool results in the next request continue the same session and answer both held calls", () => {
  const gateway = new Gateway();
  const { session, history } = waitingForTools(gateway);
  // The CLI asks for both calls at once (readOnlyHint): both are held.
  assert.deepEqual(gateway.toolCall(session, "req-a", "a", 20), { action: "hold" });
  assert.deepEqual(gateway.toolCall(session, "req-b", "b", 20), { action: "hold" });
  assert.equal(gateway.heldCount, 2);
  const route = gateway.route(request([...history, user([result("b", "B"), result("a", "A")])]), ANTHROPIC, 30);
  assert.equal(route.kind, "continue");
  assert.equal(route.sessionKind, "continued");
  assert.equal(route.session, session);
  assert.equal(route.prompt, null, "the request adds only tool results");
  assert.deepEqual(route.answers, [
    { requestId: "req-b", result: { content: [{ type: "text", text: "B" }], isError: false } },
    { requestId: "req-a", result: { content: [{ type: "text", text: "A" }], isError: false } },
  ]);
  assert.equal(gateway.heldCount, 0);
  // The turn goes on and finishes; the client's next message continues the session again.
  const body = respond(gateway, route, textTurn("Both found."), 40);
  const next = [
    ...history,
    user([result("b", "B"), result("a", "A")]),
    { role: "assistant", content: body.content },
    user("thanks"),
  ];
  const again = gateway.route(request(next), ANTHROPIC, 50);
  assert.equal(again.kind, "continue");
  assert.equal(again.session, session);
  assert.deepEqual(again.prompt, [{ type: "text", text: "thanks" }]);
  assert.deepEqual(again.answers, []);
  assert.equal(gateway.sessionCount, 1);
});

test("a result that comes before the CLI asks answers the call at once", () => {
  const gateway = new Gateway();
  const { session, history } = waitingForTools(gateway);
  assert.deepEqual(gateway.toolCall(session, "req-a", "a", 20), { action: "hold" });
  const route = gateway.route(request([...history, user([result("a", "A"), result("b", "B")])]), ANTHROPIC, 30);
  assert.deepEqual(route.answers.map((a) => a.requestId), ["req-a"]);
  // Serial calls: the CLI asks for b after a was answered.
  assert.deepEqual(gateway.toolCall(session, "req-b", "b", 40), {
    action: "answer",
    result: { content: [{ type: "text", text: "B" }], isError: false },
  });
  assert.equal(gateway.heldCount, 0);
});

test("missing and unknown tool results are a 400 naming the ids, and a corrected request still continues", () => {
  const gateway = new Gateway();
  const { session, history } = waitingForTools(gateway);
  assert.throws(
    () => gateway.route(request([...history, user([result("a", "A")])]), ANTHROPIC, 30),
    apiError(400, "tool calls b have no tool result"),
  );
  assert.throws(
    () => gateway.route(request([...history, user([result("a", "A"), result("b", "B"), result("zz", "?")])]), ANTHROPIC, 30),
    apiError(400, "unknown tool_use id zz"),
  );
  const route = gateway.route(request([...history, user([result("a", "A"), result("b", "B")])]), ANTHROPIC, 30);
  assert.equal(route.kind, "continue");
  assert.equal(route.session, session);
});

test("a 400 for tool results comes in the request's API shape", () => {
  const gateway = new Gateway();
  const { history } = waitingForTools(gateway);
  assert.throws(
    () => gateway.route(request([...history, user([result("a", "A")])]), ANTHROPIC, 30),
    (err) => err.body.type === "error" && err.body.error.type === "invalid_request_error",
  );
});

test("a conversation busy with another request is a 429, free again once the response failed", () => {
  const gateway = new Gateway();
  const first = gateway.route(request([user("hi")]), ANTHROPIC, 0);
  const body = respond(gateway, first, textTurn("Hello."), 10);
  const next = request([user("hi"), { role: "assistant", content: body.content }, user("more")]);
  const route = gateway.route(next, ANTHROPIC, 20);
  assert.equal(route.kind, "continue");
  assert.throws(() => gateway.route(next, ANTHROPIC, 21), apiError(429, "busy"));
  // The session stays; the client's retry continues it.
  gateway.responseFailed(route.session, 30);
  const retry = gateway.route(next, ANTHROPIC, 40);
  assert.equal(retry.kind, "continue");
  assert.equal(retry.session, first.session);
});

test("a held call past its deadline is answered with the timeout text, and late results rebuild the session", () => {
  const gateway = new Gateway({ heldCallTimeoutMs: 1000, idleTtlMs: 60_000 });
  const { session, history } = waitingForTools(gateway);
  gateway.toolCall(session, "req-a", "a", 100);
  gateway.toolCall(session, "req-b", "b", 100);
  assert.deepEqual(gateway.nextDeadline(), { atMs: 1100, reason: "held_call" });
  assert.deepEqual(gateway.handleTimeout(1099), []);
  const actions = gateway.handleTimeout(1100);
  const timedOut = { content: [{ type: "text", text: HELD_CALL_TIMEOUT_TEXT }], isError: true };
  assert.deepEqual(
    actions.sort((x, y) => x.requestId.localeCompare(y.requestId)),
    [
      { action: "answer", session, requestId: "req-a", result: timedOut },
      { action: "answer", session, requestId: "req-b", result: timedOut },
    ],
  );
  assert.equal(gateway.heldCount, 0);
  // The turn went on without the client: its late results start a session carrying the history.
  const route = gateway.route(request([...history, user([result("a", "A"), result("b", "B")])]), ANTHROPIC, 2000);
  assert.equal(route.kind, "start");
  assert.equal(route.sessionKind, "rebuilt");
  assert.equal(route.replaces, session);
  assert.match(route.prompt[0].text, /<tool_result tool_use_id="a" is_error="false">A<\/tool_result>/);
  assert.equal(gateway.sessionCount, 1, "the replaced session is forgotten");
});

test("an idle session is closed at its deadline and a busy one has none", () => {
  const gateway = new Gateway({ heldCallTimeoutMs: 1000, idleTtlMs: 5000 });
  const { session, history } = waitingForTools(gateway);
  assert.deepEqual(gateway.nextDeadline(), { atMs: 5010, reason: "idle" });
  gateway.route(request([...history, user([result("a", "A"), result("b", "B")])]), ANTHROPIC, 4000);
  assert.equal(gateway.nextDeadline(), null, "a busy session has no idle deadline");
  gateway.responseFailed(session, 4500);
  assert.deepEqual(gateway.handleTimeout(9499), []);
  assert.deepEqual(gateway.handleTimeout(9500), [{ action: "close", session }]);
  assert.equal(gateway.sessionCount, 0);
  assert.equal(gateway.nextDeadline(), null);
});

test("a history with no live session is rebuilt with the earlier turns in the prompt", () => {
  const gateway = new Gateway();
  const messages = [
    user("What is 2+2?"),
    { role: "assistant", content: [{ type: "text", text: "4" }] },
    user("And 3+3?"),
  ];
  const route = gateway.route(request(messages), ANTHROPIC, 0);
  assert.equal(route.kind, "start");
  assert.equal(route.sessionKind, "rebuilt");
  assert.equal(route.replaces, null);
  const [first] = route.prompt;
  assert.equal(first.type, "text");
  assert.match(first.text, /<conversation_history>\n<user>\nWhat is 2\+2\?\n<\/user>\n<assistant>\n4\n<\/assistant>/);
  assert.match(first.text, /<user>\nAnd 3\+3\?\n<\/user>\n<\/conversation_history>$/);
});

test("two tenants never share a session", () => {
  const gateway = new Gateway();
  const { session, history } = waitingForTools(gateway);
  const body = request([...history, user([result("a", "A"), result("b", "B")])]);
  const other = gateway.route(body, { api: "anthropic", tenant: "key-2" }, 30);
  assert.equal(other.kind, "start");
  assert.equal(other.sessionKind, "rebuilt");
  assert.notEqual(other.session, session);
  const own = gateway.route(body, ANTHROPIC, 30);
  assert.equal(own.kind, "continue");
  assert.equal(own.session, session);
});

test("the same conversation in the OpenAI shape continues a session its Anthropic request started", () => {
  const gateway = new Gateway();
  const { session, history } = waitingForTools(gateway, ANTHROPIC);
  gateway.toolCall(session, "req-a", "a", 20);
  const calls = history[1].content.filter((b) => b.type === "tool_use");
  const openai = {
    model: "claude-x",
    tools: TOOLS.map((t) => ({
      type: "function",
      function: { name: t.name, description: t.description, parameters: t.input_schema },
    })),
    messages: [
      { role: "user", content: "hi" },
      {
        role: "assistant",
        content: null,
        tool_calls: calls.map((c) => ({
          id: c.id,
          type: "function",
          function: { name: c.name, arguments: JSON.stringify(c.input) },
        })),
      },
      { role: "tool", tool_call_id: "a", content: "A" },
      { role: "tool", tool_call_id: "b", content: "B" },
    ],
  };
  const route = gateway.route(openai, OPENAI, 30);
  assert.equal(route.kind, "continue");
  assert.equal(route.session, session);
  assert.equal(route.request.api, "openai");
  assert.deepEqual(route.answers, [
    { requestId: "req-a", result: { content: [{ type: "text", text: "A" }], isError: false } },
  ]);
  // The response in OpenAI's shape is recorded alike: the client's next request continues.
  const body = respond(gateway, route, textTurn("Done."), 40);
  assert.equal(body.object, "chat.completion");
  openai.messages.push(body.choices[0].message, { role: "user", content: "thanks" });
  const next = gateway.route(openai, OPENAI, 50);
  assert.equal(next.kind, "continue");
  assert.equal(next.session, session);
});

// ---- the rest of the API --------------------------------------------------------------------

test("responseDone takes the assistant message and the tool call ids as plain data too", () => {
  const gateway = new Gateway();
  const route = gateway.route(request([user("hi")]), ANTHROPIC, 0);
  const message = {
    role: "assistant",
    content: [
      { type: "text", text: "Let me " },
      { type: "text", text: "look." },
      { type: "tool_use", id: "a", name: "lookup", input: { q: "a" } },
    ],
  };
  gateway.responseDone(route.session, message, ["a"], 10);
  const history = [
    user("hi"),
    { role: "assistant", content: [{ type: "text", text: "Let me look." }, message.content[2]] },
  ];
  const next = gateway.route(request([...history, user([result("a", "A")])]), ANTHROPIC, 20);
  assert.equal(next.kind, "continue");
  assert.equal(next.session, route.session);
});

test("responseDone refuses an encoder whose response is not complete, a second call, and bad messages", () => {
  const gateway = new Gateway();
  const route = gateway.route(request([user("hi")]), ANTHROPIC, 0);
  const encoder = new ResponseEncoder({ api: "anthropic", stream: false, model: "m", created: 0 });
  assert.throws(() => gateway.responseDone(route.session, encoder, 10), /not complete/);
  encoder.fail("boom");
  assert.throws(() => gateway.responseDone(route.session, encoder, 10), /responseFailed/);
  assert.throws(() => gateway.responseDone(route.session, encoder, [], 10), /three arguments/);
  assert.throws(() => gateway.responseDone(route.session, { role: "user", content: [] }, [], 10), /assistant/);
  assert.throws(() => gateway.responseDone(route.session, { role: "assistant", content: [] }, "a", 10), TypeError);
  gateway.responseDone(route.session, { role: "assistant", content: [{ type: "text", text: "ok" }] }, [], 10);
  assert.throws(
    () => gateway.responseDone(route.session, { role: "assistant", content: [] }, [], 20),
    /no request in flight/,
  );
  // A session closed while its response ran: nothing to record, no error.
  const other = gateway.route(request([user("again")]), ANTHROPIC, 30);
  gateway.close(other.session);
  gateway.responseDone(other.session, { role: "assistant", content: [] }, [], 40);
  encoder.free();
});

test("a cancelled call drops its late result", () => {
  const gateway = new Gateway();
  const { session, history } = waitingForTools(gateway);
  gateway.toolCall(session, "req-a", "a", 20);
  gateway.toolCall(session, "req-b", "b", 20);
  gateway.toolCancelled(session, "a");
  const route = gateway.route(request([...history, user([result("a", "A"), result("b", "B")])]), ANTHROPIC, 30);
  assert.deepEqual(route.answers.map((a) => a.requestId), ["req-b"]);
});

test("a tool call without a tool_use id, or of a closed session, is answered with an error", () => {
  const gateway = new Gateway();
  const { session } = waitingForTools(gateway);
  const noId = gateway.toolCall(session, "req-x", null, 20);
  assert.equal(noId.action, "answer");
  assert.equal(noId.result.isError, true);
  gateway.close(session);
  const closed = gateway.toolCall(session, "req-y", "a", 30);
  assert.deepEqual(closed, { action: "answer", result: { content: [{ type: "text", text: "The session is closed." }], isError: true } });
  assert.equal(gateway.sessionCount, 0);
});

test("a tool_choice the CLI cannot honour is a 400 and an invalid request an ApiRequestError", () => {
  const gateway = new Gateway();
  assert.throws(
    () => gateway.route(request([user("hi")], { tool_choice: { type: "any" } }), ANTHROPIC, 0),
    apiError(400, "tool_choice"),
  );
  assert.throws(() => gateway.route("{", ANTHROPIC, 0), apiError(400));
  assert.throws(() => gateway.route(request([user("hi")]), { api: "gemini" }, 0), /anthropic/);
  assert.equal(gateway.sessionCount, 0);
});

test("clientServer names the MCP server the client's tools are offered through", () => {
  const gateway = new Gateway({ clientServer: "app" });
  const route = gateway.route(request([user("hi")], { tools: [{ ...TOOLS[0], name: "get-weather" }] }), ANTHROPIC, 0);
  assert.deepEqual(route.clientTools, { "mcp__app__get-weather": "get-weather" });
});

test("a tool name the API refuses is a 400 naming the tool", () => {
  const gateway = new Gateway({});
  assert.throws(
    () => gateway.route(request([user("hi")], { tools: [{ ...TOOLS[0], name: "get.weather" }] }), ANTHROPIC, 0),
    (err) => err instanceof ApiRequestError && err.status === 400 && /tools\.0\.name: "get\.weather"/.test(err.message),
  );
  assert.equal(gateway.sessionCount, 0);
});

test("bad options, session ids and times are errors", () => {
  assert.throws(() => new Gateway({ heldCallMs: 5 }), /heldCallMs/);
  assert.throws(() => new Gateway(null), TypeError);
  const gateway = new Gateway();
  assert.throws(() => gateway.route(request([user("hi")]), ANTHROPIC), /nowMs/);
  assert.throws(() => gateway.responseFailed(0, 1), /session/);
  assert.throws(() => gateway.close(1.5), /session/);
  gateway.free();
});

test("a Responses conversation: held calls, a stored response continued by previous_response_id", () => {
  const gateway = new Gateway();
  const RESPONSES = { api: "responses", tenant: "key-1" };
  const tools = TOOLS.map((t) => ({ type: "function", name: t.name, description: t.description, parameters: t.input_schema }));
  const encode = (route, chunks) => {
    const encoder = new ResponseEncoder({
      api: "responses",
      stream: false,
      model: route.request.model,
      id: route.responseId,
      previousResponseId: route.previousResponseId,
      store: route.request.store,
      clientTools: route.clientTools,
    });
    for (const chunk of chunks) encoder.push(chunk);
    gateway.responseDone(route.session, encoder, 10);
    const body = encoder.body();
    encoder.free();
    return body;
  };
  const first = gateway.route({ model: "gpt-5", tools, input: "hi" }, RESPONSES, 0);
  assert.equal(first.kind, "start");
  assert.match(first.responseId, /^resp_[0-9a-f]{32}$/);
  const body = encode(first, toolCallTurn(["r1", "r2"]));
  assert.equal(body.object, "response");
  assert.equal(body.id, first.responseId);
  assert.deepEqual(
    body.output.map((item) => [item.type, item.call_id, item.name, item.arguments]),
    [
      ["function_call", "r1", "lookup", '{"q":"r1"}'],
      ["function_call", "r2", "lookup", '{"q":"r2"}'],
    ],
  );
  assert.equal(gateway.storedCount, 1, "store defaults to true");
  for (const call of ["r1", "r2"]) gateway.toolCall(first.session, `req-${call}`, call, 5);
  const next = gateway.route(
    {
      model: "gpt-5",
      tools,
      previous_response_id: body.id,
      input: body.output.map((c) => ({ type: "function_call_output", call_id: c.call_id, output: c.call_id.toUpperCase() })),
    },
    RESPONSES,
    20,
  );
  assert.equal(next.kind, "continue");
  assert.equal(next.session, first.session);
  assert.equal(next.previousResponseId, body.id);
  assert.notEqual(next.responseId, first.responseId);
  assert.deepEqual(
    next.answers.map((a) => [a.requestId, a.result.content[0].text]),
    [
      ["req-r1", "R1"],
      ["req-r2", "R2"],
    ],
  );
  const done = encode(next, textTurn("Both."));
  assert.equal(done.previous_response_id, body.id);
  assert.equal(done.output[0].content[0].text, "Both.");
  assert.throws(
    () => gateway.route({ model: "gpt-5", input: "x", previous_response_id: "resp_unknown" }, RESPONSES, 30),
    (err) => err instanceof ApiRequestError && err.status === 400 && err.body.error.param === "previous_response_id",
  );
});
