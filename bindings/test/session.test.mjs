// The Session class: driver mode (commands → stdin lines), observer mode, deadlines, bad input.

import assert from "node:assert/strict";
import { test } from "node:test";
import { Session } from "ccwire";

const canUseTool = (requestId, toolUseId) =>
  JSON.stringify({
    type: "control_request",
    request_id: requestId,
    request: {
      subtype: "can_use_tool",
      tool_name: "Bash",
      input: { command: "echo hi" },
      permission_suggestions: [],
      tool_use_id: toolUseId,
    },
  }) + "\n";

const toolUse = (id) =>
  JSON.stringify({
    type: "assistant",
    message: {
      id: "msg_1",
      role: "assistant",
      model: "m",
      content: [{ type: "tool_use", id, name: "Bash", input: { command: "echo hi" } }],
    },
    parent_tool_use_id: null,
    session_id: "s",
  }) + "\n";

test("a driver session writes the prompt it sends", () => {
  const session = Session.driver();
  const step = session.sendUserMessage("hello", 10);
  assert.equal(step.stdin.length, 1);
  assert.ok(step.stdin[0].endsWith("\n"));
  const written = JSON.parse(step.stdin[0]);
  assert.equal(written.type, "user");
  assert.deepEqual(written.message, { role: "user", content: "hello" });
  assert.deepEqual(step.chunks, [{ type: "user_prompt", content: "hello" }]);
});

test("a permission request is answered with the bytes the CLI expects", () => {
  const session = Session.driver();
  session.sendUserMessage("run it", 0);
  session.push(toolUse("toolu_1"), 5);
  const asked = session.push(canUseTool("req-1", "toolu_1"), 10);
  const request = asked.chunks.find((c) => c.type === "permission_request");
  assert.equal(request.request_id, "req-1");
  assert.equal(request.tool_name, "Bash");
  assert.deepEqual(asked.chunks.find((c) => c.type === "tool_status"), {
    type: "tool_status",
    id: "toolu_1",
    status: "awaiting_approval",
  });
  assert.equal(session.toolWait().waiting, true);
  assert.deepEqual(session.toolWait().blocked_on, [
    { request_id: "req-1", kind: "permission", tool_use_id: "toolu_1" },
  ]);

  const answered = session.respondPermission("req-1", { behavior: "allow" }, 20);
  assert.equal(answered.delivery, "sent");
  assert.equal(answered.stdin.length, 1);
  const response = JSON.parse(answered.stdin[0]);
  assert.equal(response.type, "control_response");
  assert.equal(response.response.request_id, "req-1");
  assert.equal(response.response.response.behavior, "allow");
  assert.ok(answered.chunks.some((c) => c.type === "permission_resolved" && c.behavior === "allow"));
  assert.equal(session.toolStatuses().toolu_1, "running");

  const again = session.respondPermission("req-1", { behavior: "deny", message: "no" }, 30);
  assert.equal(again.delivery, "dropped");
  assert.deepEqual(again.stdin, []);
});

test("a permission deadline is reported and applied by handleTimeout", () => {
  const session = Session.driver({ timeouts: { permissionMs: 1000 } });
  session.sendUserMessage("run it", 0);
  session.push(toolUse("toolu_2"), 0);
  const asked = session.push(canUseTool("req-2", "toolu_2"), 100);
  assert.equal(asked.chunks.find((c) => c.type === "permission_request").deadline_ms, 1100);
  const deadline = session.nextDeadline();
  assert.equal(deadline.atMs, 1100);
  assert.deepEqual(deadline.reason, { kind: "permission", requestId: "req-2" });
  assert.match(deadline.description, /req-2/);

  assert.deepEqual(session.handleTimeout(1099).chunks, []);
  const timedOut = session.handleTimeout(1100);
  assert.ok(
    timedOut.chunks.some(
      (c) => c.type === "permission_resolved" && c.behavior === "deny" && c.reason === "timeout",
    ),
  );
  assert.equal(JSON.parse(timedOut.stdin[0]).response.response.behavior, "deny");
  assert.equal(session.nextDeadline(), null);
});

const elicitation = (requestId) =>
  JSON.stringify({
    type: "control_request",
    request_id: requestId,
    request: {
      subtype: "elicitation",
      mcp_server_name: "notes",
      message: "Which folder?",
      mode: "form",
      requested_schema: { type: "object", properties: { folder: { type: "string" } } },
    },
  }) + "\n";

test("an elicitation is declined at once unless the embedder answers elicitations", () => {
  const declined = Session.driver().push(elicitation("e-1"), 0);
  assert.equal(declined.chunks[0].type, "elicitation_request");
  assert.deepEqual(JSON.parse(declined.stdin[0]).response.response, { action: "decline" });
  assert.deepEqual(declined.chunks.at(-1), {
    type: "request_resolved",
    request_id: "e-1",
    reason: "default",
    response: { action: "decline" },
  });

  const session = Session.driver({ elicitations: true, timeouts: { elicitationMs: 500 } });
  const asked = session.push(elicitation("e-2"), 100);
  assert.deepEqual(asked.stdin, []);
  assert.equal(asked.chunks[0].server, "notes");
  assert.equal(asked.chunks[0].deadline_ms, 600);
  assert.deepEqual(session.nextDeadline().reason, { kind: "elicitation", requestId: "e-2" });
  const answer = { action: "accept", content: { folder: "inbox" } };
  const answered = session.respondElicitation("e-2", answer, 200);
  assert.equal(answered.delivery, "sent");
  assert.deepEqual(JSON.parse(answered.stdin[0]).response.response, answer);
  assert.equal(answered.chunks[0].reason, "host");
  assert.throws(() => session.respondElicitation("e-2", "accept", 300), Error);
});

test("a dialog waits for respondUserDialog", () => {
  const session = Session.driver();
  const dialog = JSON.stringify({
    type: "control_request",
    request_id: "d-1",
    request: { subtype: "request_user_dialog", dialog_kind: "refusal_fallback_prompt", payload: {} },
  });
  const asked = session.push(dialog + "\n", 0);
  assert.equal(asked.chunks[0].type, "dialog_request");
  assert.equal(asked.chunks[0].dialog_kind, "refusal_fallback_prompt");
  assert.deepEqual(asked.stdin, [], "never answered for the embedder");
  const answered = session.respondUserDialog("d-1", { behavior: "cancelled" }, 10);
  assert.deepEqual(JSON.parse(answered.stdin[0]).response.response, { behavior: "cancelled" });
});

test("typed control requests are written as the CLI reads them, and checked", () => {
  const session = Session.driver({ seed: 3 });
  const step = session.request({ subtype: "mcp_toggle", serverName: "notes", enabled: false }, 0);
  const written = JSON.parse(step.stdin[0]);
  assert.equal(written.request_id, step.requestId);
  assert.deepEqual(written.request, { subtype: "mcp_toggle", serverName: "notes", enabled: false });
  assert.throws(() => session.request({ subtype: "no_such_thing" }, 1), /no_such_thing/);
  assert.throws(() => session.request({ mode: "plan" }, 1), /subtype/);
});

test("commands return their request id", () => {
  const session = Session.driver({ seed: 7 });
  const init = session.initialize({ hooks: [{ event: "PreToolUse", matcher: "Bash" }] }, 0);
  assert.match(init.requestId, /^req_/);
  assert.deepEqual(init.callbackIds, ["hook_0"]);
  const request = JSON.parse(init.stdin[0]);
  assert.equal(request.request.subtype, "initialize");
  assert.deepEqual(request.request.hooks.PreToolUse[0].hookCallbackIds, ["hook_0"]);
  for (const step of [
    session.interrupt(1),
    session.setModel("claude-x", 2),
    session.setPermissionMode("plan", 3),
    session.sendControl("mcp_status", {}, 4),
  ]) {
    assert.match(step.requestId, /^req_/);
    assert.equal(JSON.parse(step.stdin[0]).request_id, step.requestId);
  }
});

test("an observer sees both directions and refuses commands with a real Error", () => {
  const session = Session.observer();
  const step = session.observeIn({ type: "user", message: { role: "user", content: "hi" } }, 0);
  assert.deepEqual(step.chunks, [{ type: "user_prompt", content: "hi" }]);
  assert.deepEqual(step.stdin, []);
  assert.throws(() => session.interrupt(1), (err) => err instanceof Error && /observer/.test(err.message));
});

test("bad input becomes error chunks and the session goes on", () => {
  const session = Session.observer();
  const bad = session.push("this is not json\n", 0);
  assert.equal(bad.chunks[0].type, "error");
  assert.equal(bad.chunks[0].kind, "malformed_line");
  assert.equal(bad.chunks[0].excerpt, "this is not json");
  const unknown = session.push('{"type":"brand_new","x":1}\n', 1);
  assert.deepEqual(unknown.chunks, [{ type: "unknown", message: { type: "brand_new", x: 1 } }]);
});

test("a line over the limit is skipped with a line_too_long error", () => {
  const session = Session.observer({ lineLimit: 64 });
  const step = session.push(`{"type":"x","pad":"${"a".repeat(200)}"}\n{"type":"y"}\n`, 0);
  assert.equal(step.chunks[0].kind, "line_too_long");
  assert.equal(step.chunks[1].type, "unknown");
});

test("bytes split inside a UTF-8 character are put back together", () => {
  const line = new TextEncoder().encode('{"type":"brand_new","text":"héllo ✓"}\n');
  const session = Session.observer();
  const chunks = [];
  for (let i = 0; i < line.length; i++) chunks.push(...session.push(line.subarray(i, i + 1), i).chunks);
  assert.deepEqual(chunks, [{ type: "unknown", message: { type: "brand_new", text: "héllo ✓" } }]);
});

test("misuse throws real Errors", () => {
  const session = Session.driver();
  assert.throws(() => session.respondPermission("nope", { behavior: "allow" }, 0), Error);
  assert.throws(() => session.push("{}", -1), /nowMs/);
  assert.throws(() => session.push("{}", Number.NaN), /nowMs/);
  assert.throws(() => session.push("{}"), TypeError);
  assert.throws(() => session.respondPermission("x", { behavior: "maybe" }, 0), /`behavior` must be "allow" or "deny"/);
  assert.throws(() => session.respondPermission("x", { behavior: "deny" }, 0), /a denial needs a string `message`/);
  assert.throws(() => session.respondPermission("x", { behavior: "allow", updatedPermissions: {} }, 0), /must be an array/);
  assert.throws(() => session.respondPermission("x", { behavior: "allow", extra: 1 }, 0), /unknown field `extra`/);
  assert.throws(() => session.push("{}", 1.5e300 * 1e10), /got Infinity/);
  assert.throws(() => session.push("{}", -2.5), /got -2\.5/);
  assert.throws(() => new Session("driver", { bogus: 1 }), /bogus/);
  assert.throws(() => new Session("spectator"), TypeError);
});

test("the process exit ends the running turn's tools", () => {
  const session = Session.driver();
  session.sendUserMessage("go", 0);
  session.push(toolUse("toolu_3"), 1);
  const step = session.processExit({ code: 1 }, 2);
  assert.ok(step.chunks.some((c) => c.type === "process_exit" && c.code === 1 && c.signal === null));
  assert.equal(session.toolStatuses().toolu_3, "cancelled");
});
