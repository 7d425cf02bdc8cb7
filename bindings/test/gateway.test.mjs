// The gateway endpoint of `ccwire/conversation`, the engine `ccwire serve` runs on. The core's
// simulation records one scenario over the three APIs — every input (requests, CLI output,
// exits, clients gone, the clock) and every output — as a snapshot; replayed here through the
// npm package, it must give the same outputs, byte for byte.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { ApiRequestError, Gateway, HELD_CALL_TIMEOUT_TEXT, routeKey } from "ccwire/conversation";
import { snapshotDir } from "./helpers.mjs";

/** The inputs and outputs of the core's `gateway_sim::scenario`, in order. */
function scenario() {
  const text = readFileSync(join(snapshotDir, "gateway_sim__scenario.snap"), "utf8");
  const lines = text.split("\n");
  const end = lines.indexOf("---", 1);
  assert.ok(lines[0] === "---" && end > 0, "an insta snapshot");
  return lines.slice(end + 1).filter((l) => l.length > 0).map((l) => JSON.parse(l));
}

/** Gives the gateway one recorded input; returns what it made, each as the trace writes it. */
function feed(gateway, input) {
  if (input.op === "http") {
    const head = { method: input.method, path: input.path, headers: input.headers };
    const admission = gateway.admit(head);
    if (admission.respond) return [{ admission }];
    const outputs = gateway.handleHttp(input.request, head, admission.admit.tenant, input.body, input.now);
    return [{ admission }, ...outputs.map((out) => ({ out }))];
  }
  return outputsOf(gateway, input).map((out) => ({ out }));
}

function outputsOf(gateway, input) {
  switch (input.op) {
    case "request":
      return gateway.handleRequest(input.request, { api: input.api, tenant: input.tenant }, input.body, input.now);
    case "stdout":
      return gateway.handleStdout(input.session, input.data, input.now);
    case "timeout":
      return gateway.handleTimeout(input.now);
    case "client_gone":
      return gateway.handleClientGone(input.request, input.now);
    case "exit":
      return gateway.handleExit(input.session, input, input.now);
    case "spawn_failed":
      return gateway.handleSpawnFailed(input.session, input.error, input.now);
    default:
      throw new Error(`an input the test does not know: ${input.op}`);
  }
}

test("the npm Gateway makes exactly the outputs of the core's Gateway, over a whole scenario", () => {
  const steps = scenario();
  const gateway = new Gateway({ seed: 42, unixEpochMs: 1_800_000_000_000 });
  const expected = [];
  const got = [];
  for (const step of steps) {
    if (!step.in) {
      expected.push(JSON.stringify(step));
      continue;
    }
    // Outputs come out of the input that made them, in the same order.
    assert.deepEqual(got.length, expected.length, "outputs before the next input");
    for (const made of feed(gateway, step.in)) got.push(JSON.stringify(made));
  }
  assert.equal(got.length, expected.length, "as many outputs");
  for (let i = 0; i < got.length; i++) assert.equal(got[i], expected[i], `output ${i}`);
  // The scenario covers what it says it does.
  const kinds = new Set(steps.filter((s) => s.out).map((s) => s.out.type));
  assert.deepEqual([...kinds].sort(), ["body", "close", "end", "respond", "spawn", "write"]);
  const statuses = new Set(steps.filter((s) => s.out?.type === "respond").map((s) => s.out.status));
  assert.ok(statuses.has(400) && statuses.has(200), [...statuses].join());
  const refused = steps.filter((s) => s.admission?.respond).map((s) => s.admission.respond.status);
  assert.deepEqual(refused, [405, 404, 415, 403]);
  assert.ok(steps.some((s) => s.out?.type === "write" && s.out.data.includes(HELD_CALL_TIMEOUT_TEXT)));
  assert.ok(steps.some((s) => s.out?.type === "body" && s.out.data.includes("event: response.in_progress")));
  assert.equal(gateway.sessionCount, 0);
  assert.equal(gateway.requestCount, 0);
  const metrics = gateway.metrics();
  // Responses of the APIs' turns; models, health and token counts are not turns.
  const notTurns = new Set(steps.filter((s) => s.in?.op === "http" && !/^\/v1\/(messages|chat\/completions|responses)$/.test(s.in.path)).map((s) => s.in.request));
  const responded = steps.filter((s) => s.out?.type === "respond" && !notTurns.has(s.out.request)).length;
  const counted = metrics
    .split("\n")
    .filter((l) => l.startsWith("ccwire_requests_total{"))
    .reduce((n, l) => n + Number(l.split(" ").at(-1)), 0);
  assert.equal(counted, responded, "every response counted once");
});

test("a request the gateway refuses is answered at once in the API's shape, and nothing starts", () => {
  const gateway = new Gateway();
  const outputs = gateway.handleRequest(
    7,
    { api: "openai", tenant: "k" },
    { model: "gpt-4o", n: 3, messages: [{ role: "user", content: "Hi" }] },
    1000,
  );
  assert.deepEqual(outputs.map((o) => o.type), ["respond", "body", "end"]);
  assert.equal(outputs[0].status, 400);
  assert.equal(JSON.parse(outputs[1].data).error.param, "n");
  assert.equal(gateway.sessionCount, 0);
});

test("a new conversation spawns a CLI with the client's tools behind an MCP server", () => {
  const gateway = new Gateway({ defaultModel: "sonnet", enabledTools: ["Read"] });
  const outputs = gateway.handleRequest(
    1,
    { api: "anthropic", tenant: "k" },
    {
      model: "gpt-4o",
      max_tokens: 10,
      tools: [{ name: "lookup", input_schema: { type: "object" } }],
      messages: [{ role: "user", content: "Hi" }],
    },
    0,
  );
  const [spawn, write] = outputs;
  assert.equal(spawn.type, "spawn");
  const args = spawn.spec.args.join(" ");
  assert.match(args, /--model sonnet/);
  assert.match(args, /--tools Read/);
  assert.match(args, /--allowedTools Read,mcp__client/);
  assert.ok(spawn.spec.env_remove.includes("MCP_TOOL_TIMEOUT"));
  assert.equal(write.type, "write");
  assert.equal(JSON.parse(write.data).request.subtype, "initialize");
  assert.equal(gateway.nextDeadline().atMs, 60_000, "the CLI has a minute to start");
  // The CLI never came: the request fails, the session is closed.
  const late = gateway.handleTimeout(60_000);
  assert.deepEqual(late.map((o) => o.type), ["close", "respond", "body", "end"]);
  assert.equal(late[1].status, 500);
  assert.ok(gateway.models().data.some((m) => m.id === "sonnet"));
});

test("a history no CLI wrote is a transcript the host writes before the CLI resumes it", () => {
  const gateway = new Gateway({ tenantRoot: "/state/tenants", seed: 7 });
  const outputs = gateway.handleRequest(
    1,
    { api: "anthropic", tenant: "k" },
    {
      model: "sonnet",
      max_tokens: 10,
      system: "Be brief.",
      tools: [{ name: "lookup", input_schema: { type: "object" } }],
      messages: [
        { role: "user", content: "Look it up" },
        { role: "assistant", content: [{ type: "tool_use", id: "toolu_9", name: "lookup", input: {} }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_9", content: "found" }] },
      ],
    },
    0,
  );
  const [spawn, write] = outputs;
  assert.equal(spawn.type, "spawn");
  const { resume } = spawn.spec;
  assert.ok(spawn.spec.args.includes(`--resume=${resume.key.id}`));
  assert.match(resume.path, /^\/state\/tenants\/.*\.jsonl$/);
  // The CLI goes on from the tool result by itself: after initialize, no prompt.
  assert.equal(resume.rerun, true);
  assert.ok(spawn.spec.env.some(([k, v]) => k === "CLAUDE_CODE_RESUME_INTERRUPTED_TURN" && v === "1"));
  assert.equal(JSON.parse(write.data).request.subtype, "initialize");
  const lines = Gateway.writtenTranscript(spawn.spec).trimEnd().split("\n").map((l) => JSON.parse(l));
  assert.deepEqual(lines.map((l) => l.type), ["user", "assistant", "user", "attachment"]);
  assert.equal(lines[1].message.content[0].name, "mcp__client__lookup");
  assert.equal(lines[2].message.content[0].tool_use_id, "toolu_9");
  assert.equal(lines[2].parentUuid, lines[1].uuid);
  assert.deepEqual(lines[3].attachment, { type: "prompt_snapshot", systemPrompt: ["Be brief."] });
  // A spec that resumes nothing has no transcript to write.
  assert.equal(Gateway.writtenTranscript({ ...spawn.spec, resume: undefined }), null);
});

test("bad options, ids, APIs and times are errors", () => {
  assert.throws(() => new Gateway({ heldCallMs: 5 }), /unknown field `heldCallMs`/);
  assert.throws(() => new Gateway(null), TypeError);
  const gateway = new Gateway();
  assert.throws(() => gateway.handleRequest(1, { api: "gemini" }, "{}", 0), /api must be/);
  assert.throws(() => gateway.handleRequest(-1, { api: "openai" }, "{}", 0), /request must be an integer id/);
  assert.throws(() => gateway.handleStdout(1, 5, 0), TypeError);
  assert.throws(() => gateway.handleTimeout(Number.NaN), /nowMs must be a finite number/);
  // Input for a session it does not know is ignored.
  assert.deepEqual(gateway.handleStdout(99, "{}\n", 0), []);
  assert.deepEqual(gateway.handleClientGone(99, 0), []);
});

test("with publishIndex a gateway claims the key routeKey gives for the conversation's next request", () => {
  const steps = scenario();
  const gateway = new Gateway({ seed: 42, unixEpochMs: 1_800_000_000_000, publishIndex: true });
  const claims = [];
  for (const step of steps) {
    if (!step.in) continue;
    for (const { out } of feed(gateway, step.in)) {
      if (out?.type === "claim") claims.push(out.key);
    }
  }
  // The scenario's first conversation, continued after its tool round trip.
  const body = {
    model: "sonnet", max_tokens: 100, stream: true,
    tools: [{ name: "lookup", description: "Look a key up.", input_schema: { type: "object", properties: { key: { type: "string" } } } }],
    messages: [
      { role: "user", content: "lookup: paris" },
      { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "lookup", input: { key: "paris" } }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "sunny" }] },
      { role: "assistant", content: "done: sunny" },
      { role: "user", content: "And now?" },
    ],
  };
  const key = routeKey(body, { api: "anthropic", tenant: "alice" });
  assert.equal(key.kind, "conversation");
  assert.ok(claims.includes(key.key), "the gateway claimed it");
  assert.ok(!claims.includes(routeKey(body, { api: "anthropic", tenant: "bob" }).key), "keys are per tenant");
  assert.deepEqual(routeKey({ model: "m", max_tokens: 1, messages: [{ role: "user", content: "Hi" }] }, { api: "anthropic" }), { kind: "new" });
});

test("approvals: an enabled tool's permission request waits for answerApproval, scoped by tenant", () => {
  const gateway = new Gateway({ enabledTools: ["Bash"], approvals: true, seed: 3 });
  const started = gateway.handleRequest(1, { api: "anthropic", tenant: "alice" },
    { model: "sonnet", max_tokens: 10, messages: [{ role: "user", content: "List the files" }] }, 0);
  assert.match(started[0].spec.args.join(" "), /--permission-prompt-tool stdio/);
  const init = JSON.parse(started.find((o) => o.type === "write").data);
  gateway.handleStdout(1, JSON.stringify({ type: "control_response",
    response: { subtype: "success", request_id: init.request_id, response: {} } }) + "\n", 10);
  const watching = gateway.handleApprovalEvents(2, { tenant: "alice" }, 20);
  assert.deepEqual(watching.map((o) => o.type), ["respond", "body"]);
  const asked = gateway.handleStdout(1, JSON.stringify({ type: "control_request", request_id: "perm_1",
    request: { subtype: "can_use_tool", tool_name: "Bash", input: { command: "ls" }, tool_use_id: "toolu_1" } }) + "\n", 30);
  const event = asked.find((o) => o.type === "body" && o.request === 2);
  assert.match(event.data, /^event: approval\n/);
  const [pending] = gateway.approvals({ tenant: "alice" }).data;
  assert.equal(pending.tool_name, "Bash");
  assert.deepEqual(pending.input, { command: "ls" });
  assert.deepEqual(gateway.approvals({ tenant: "bob" }).data, []);
  assert.throws(() => gateway.answerApproval(pending.id, { tenant: "bob" }, { behavior: "allow" }, 40),
    (err) => err instanceof ApiRequestError && err.status === 404);
  assert.throws(() => gateway.answerApproval(pending.id, { tenant: "alice" }, { behavior: "perhaps" }, 40),
    (err) => err instanceof ApiRequestError && err.status === 400);
  const { decided, outputs } = gateway.answerApproval(pending.id, { tenant: "alice" }, { behavior: "allow" }, 50);
  assert.deepEqual(decided, { id: pending.id, behavior: "allow" });
  const write = outputs.find((o) => o.type === "write");
  assert.equal(JSON.parse(write.data).response.response.behavior, "allow");
  assert.ok(outputs.some((o) => o.type === "body" && o.data.startsWith("event: resolved")));
  // Draining ends the event stream and refuses new conversations.
  const drained = gateway.drain(1_000, 60);
  assert.ok(drained.some((o) => o.type === "end" && o.request === 2));
  const refused = gateway.handleRequest(3, { api: "openai" }, { model: "m", messages: [{ role: "user", content: "Hi" }] }, 70);
  assert.equal(refused[0].status, 503);
  assert.equal(gateway.isDrained, false, "the turn still runs");
  gateway.handleExit(1, { code: 0 }, 80);
  assert.equal(gateway.isDrained, true);
});

test("the HTTP face: refusals from the head alone, then every route through the outputs", () => {
  const gw = new Gateway({ http: { apiKeys: ["k"], adminKey: "admin", maxBody: 64, cli: { found: true } } });
  const refusal = (head) => gw.admit(head).respond;
  const key = { "x-api-key": "k", "content-type": "application/json" };
  assert.equal(refusal({ method: "GET", path: "/v2/x", headers: key }).status, 404);
  const wrong = refusal({ method: "GET", path: "/v1/messages", headers: key });
  assert.equal(wrong.status, 405);
  assert.deepEqual(wrong.headers.find(([n]) => n === "allow"), ["allow", "POST"]);
  assert.equal(refusal({ method: "POST", path: "/v1/messages", headers: { "x-api-key": "k", "content-type": "text/plain" } }).status, 415);
  const noKey = refusal({ method: "POST", path: "/v1/chat/completions", headers: { "content-type": "application/json" } });
  assert.equal(noKey.status, 401);
  assert.equal(JSON.parse(noKey.body).error.type, "authentication_error");
  // A web page: refused before anything else, with fetch's Headers too.
  const page = new Headers({ origin: "https://evil.example", "content-type": "application/json", "x-api-key": "k" });
  assert.equal(refusal({ method: "POST", path: "/v1/messages", headers: page }).status, 403);
  assert.equal(refusal({ method: "GET", path: "/health", headers: [["Host", "attacker.example"]] }).status, 403);

  const head = { method: "POST", path: "/v1/messages", headers: key };
  assert.deepEqual(gw.admit(head), { admit: { tenant: "k", cors: [] } });
  const whole = (outputs, id) => {
    const respond = outputs.find((o) => o.type === "respond" && o.request === id);
    const body = outputs.filter((o) => o.type === "body" && o.request === id).map((o) => o.data).join("");
    assert.ok(outputs.some((o) => o.type === "end" && o.request === id));
    return { status: respond.status, headers: respond.headers, body };
  };
  const tooLarge = gw.handleHttp(1, head, "k", { error: "too_large" }, 0);
  assert.equal(whole(tooLarge, 1).status, 413);
  const slow = gw.handleHttp(21, head, "k", { error: "timed_out:60000" }, 0);
  const timedOut = whole(slow, 21);
  assert.equal(timedOut.status, 408);
  assert.match(JSON.parse(timedOut.body).error.message, /within 60 s/);
  // Health: the status alone without a key, the details with one.
  const bare = gw.handleHttp(20, { method: "GET", path: "/health", headers: {} }, "", "", 0);
  assert.deepEqual(JSON.parse(whole(bare, 20).body), { status: "ok" });
  const health = gw.handleHttp(2, { method: "GET", path: "/health", headers: key }, "", "", 0);
  assert.deepEqual(JSON.parse(whole(health, 2).body).cli, { found: true });
  // Without a key in the CLI's environment, the gateway's estimate answers at once.
  const countHead = { method: "POST", path: "/v1/messages/count_tokens", headers: key };
  const countBody = JSON.stringify({ model: "sonnet", messages: [{ role: "user", content: "hi there" }] });
  const counted = whole(gw.handleHttp(3, countHead, "k", countBody, 0), 3);
  const estimate = JSON.parse(counted.body).input_tokens;
  assert.ok(estimate > 0, counted.body);
  assert.ok(counted.headers.some(([n, v]) => n === "x-ccwire-token-count" && v === "estimate"));
  // Given the CLI's environment, count_tokens goes to the model API it uses.
  const env = { ANTHROPIC_BASE_URL: "http://127.0.0.1:9/", ANTHROPIC_API_KEY: "sk-model" };
  const upstreamGw = new Gateway({ http: { apiKeys: ["k"], env } });
  const [fetch] = upstreamGw.handleHttp(1, countHead, "k", countBody, 0);
  assert.equal(fetch.type, "fetch");
  assert.equal(fetch.url, "http://127.0.0.1:9/v1/messages/count_tokens");
  assert.equal(fetch.body, countBody);
  assert.ok(fetch.headers.some(([n, v]) => n === "x-api-key" && v === "sk-model"));
  const fromUpstream = whole(upstreamGw.handleFetched(1, '{"input_tokens": 42}', 1), 1);
  assert.deepEqual(JSON.parse(fromUpstream.body), { input_tokens: 42 });
  assert.ok(fromUpstream.headers.some(([n, v]) => n === "x-ccwire-token-count" && v === "upstream"));
  upstreamGw.handleHttp(2, countHead, "k", countBody, 0);
  const failed = whole(upstreamGw.handleFetched(2, null, 1), 2);
  assert.deepEqual(JSON.parse(failed.body), { input_tokens: estimate });
  // A request for the model goes to the endpoint: a new conversation starts a CLI.
  const turn = gw.handleHttp(4, head, "k", JSON.stringify({
    model: "sonnet", max_tokens: 10, messages: [{ role: "user", content: "hi" }],
  }), 0);
  assert.equal(turn[0].type, "spawn");
  const drain = gw.handleHttp(5, { method: "POST", path: "/admin/drain", headers: { authorization: "Bearer admin" } }, "", "", 1);
  assert.ok(drain.some((o) => o.type === "drain_requested"), JSON.stringify(drain));
  assert.equal(whole(drain, 5).status, 202);
  assert.throws(() => new Gateway({ http: { loopback: false, listener: "0.0.0.0:80" } }), /without an API key/);
});
