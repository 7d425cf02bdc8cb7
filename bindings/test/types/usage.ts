// Type-checked by `tsc --noEmit` in `npm test`: the package's types describe its API.

import {
  ApiRequestError,
  Gateway,
  HELD_CALL_TIMEOUT_TEXT,
  ResponseEncoder,
  canonicalRequest,
  encodeTranscript,
  historyHash,
  type AnthropicMessage,
  type CanonicalMessage,
  type ChatCompletion,
  type ClientToolCall,
  type GatewayOutput,
  type CliSpec,
  type Approval,
  type GatewayDeadline,
  type ResponseFormat,
  type ResponseOutcome,
} from "ccwire/conversation";
import {
  Replayer,
  Session,
  init,
  replayTranscript,
  type Chunk,
  type Deadline,
  type Step,
  type ToolWait,
} from "ccwire";

await init();

function describe(chunk: Chunk): string {
  switch (chunk.type) {
    case "text_delta":
      return chunk.text;
    case "thinking_delta":
      return chunk.thinking;
    case "tool_use":
      return `${chunk.name} ${chunk.complete ? JSON.stringify(chunk.input) : "…"}`;
    case "tool_status":
      return `${chunk.id}: ${chunk.status}${chunk.reason ? ` (${chunk.reason})` : ""}`;
    case "tool_result":
      return `${chunk.id} ${chunk.is_error ? "failed" : "ok"}`;
    case "permission_request":
      return `${chunk.tool_name} needs approval until ${chunk.deadline_ms ?? "forever"}`;
    case "tool_wait":
      return chunk.blocked_on.map((b) => `${b.kind}:${b.request_id}`).join(",");
    case "turn_complete":
      return chunk.result ?? "";
    case "error":
      return `${chunk.kind}: ${chunk.detail}`;
    case "status":
      if (chunk.subtype === "api_retry") {
        const retry = chunk as import("ccwire").ApiRetryStatus;
        return `retry ${retry.attempt}/${retry.max_retries} in ${retry.retry_delay_ms} ms`;
      }
      return chunk.subtype;
    case "elicitation_request":
      return `${chunk.server} asks ${chunk.message} (${chunk.mode ?? "form"})`;
    case "dialog_request":
      return chunk.dialog_kind;
    case "request_resolved":
      return `${chunk.request_id} settled by ${chunk.reason}`;
    case "rate_limit":
      return `${chunk.status} until ${chunk.resets_at ?? "?"}`;
    case "title_changed":
      return chunk.title;
    case "plugin_ui":
      return `${chunk.plugin ?? "?"} ${chunk.kind}: ${chunk.text ?? ""}`;
    case "command_lifecycle":
      return `${chunk.command_uuid} ${chunk.state}`;
    case "permission_check":
      return `${chunk.tool_use_id} ${chunk.status}`;
    case "file_attachments_missing":
      return chunk.missing.map((m) => `${m.file_uuid}: ${m.reason}`).join(", ");
    case "cli_event":
      return chunk.event;
    case "prompt_suggestion":
      return chunk.suggestion;
    default:
      return chunk.type;
  }
}

const chunks: Chunk[] = replayTranscript('{"type":"system","subtype":"status"}\n');
chunks.map(describe);
replayTranscript(new Uint8Array([10]));

const replayer = new Replayer();
const more: Chunk[] = [...replayer.push("{}\n"), ...replayer.finish()];
const at: number = replayer.nowMs;
replayer.free();

const session = Session.driver({ timeouts: { permissionMs: 60_000 }, seed: 1 });
const init1 = session.initialize({ hooks: [{ event: "PreToolUse", matcher: "Bash" }] }, 0);
const ids: string[] = init1.callbackIds;
const sent: Step = session.sendUserMessage({ content: "hi", priority: "now" }, 1);
const lines: string[] = sent.stdin;
const pushed: Step = session.push(new Uint8Array(0), 2);
const answer = session.respondPermission("req", { behavior: "deny", message: "no", interrupt: true }, 3);
const delivered: "sent" | "dropped" = answer.delivery;
session.respondMcp("req", { content: [{ type: "text", text: "ok" }], isError: false }, 4);
session.respondHook("req", {}, 5);
session.request({ subtype: "get_context_usage", detail: "full" }, 5);
session.request({ subtype: "mcp_toggle", serverName: "notes", enabled: true }, 5);
session.respondElicitation("req", { action: "accept", content: { folder: "inbox" } }, 5);
session.respondUserDialog("req", { behavior: "completed", result: { choice: 1 } }, 5);
session.respondError("req", "failed", 6);
const interrupted: string = session.interrupt(7).requestId;
session.setModel(null, 8);
session.setPermissionMode("plan", 9);
session.sendControl("mcp_status", undefined, 10);
const deadline: Deadline | null = session.nextDeadline();
if (deadline) session.handleTimeout(deadline.atMs);
const wait: ToolWait = session.toolWait();
const statuses: Record<string, string> = session.toolStatuses();
const running: boolean = session.turnRunning;
session.processExit({ code: 0 }, 11);
session.free();

const observer = Session.observer();
observer.observeIn({ type: "user" }, 0);
observer.observeOut('{"type":"result"}', 1);
observer.pushStdin("{}\n", 2);
observer.endStdout(3);

const request = canonicalRequest({ model: "m", messages: [] }, { api: "openai", tenant: "t" });
const hash: string | null = request.history_hash ?? historyHash("{}", { api: "anthropic" });
try {
  canonicalRequest("{", { api: "anthropic" });
} catch (err) {
  if (err instanceof ApiRequestError) console.log(err.status, err.body);
}

const encoder = new ResponseEncoder({
  api: "anthropic",
  stream: true,
  model: "claude-x",
  clientTools: { mcp__client__lookup: "lookup" },
});
const frames: string[] = [...chunks.flatMap((c) => encoder.push(c)), ...encoder.fail("gone", 529)];
const keepAlive: string = encoder.ping();
const started: boolean = encoder.started;
const outcome: ResponseOutcome | null = encoder.outcome;
switch (outcome?.kind) {
  case "finished":
    console.log(outcome.stopReason);
    break;
  case "failed":
    console.log(outcome.error.status, outcome.error.body);
    break;
}
const calls: ClientToolCall[] = encoder.toolCalls();
const message: CanonicalMessage = encoder.message();
const anthropicBody: AnthropicMessage | null = encoder.body();
encoder.free();
const openai = new ResponseEncoder({ api: "openai", stream: false, model: "gpt", created: 0, includeUsage: true, clientToolPrefix: "mcp__client__" });
const completion: ChatCompletion | null = openai.body();
const finish = completion?.choices[0].finish_reason;
// @ts-expect-error: a status no API error has
openai.fail("teapot", 418);
// @ts-expect-error: the API is "anthropic" or "openai"
new ResponseEncoder({ api: "gemini", stream: false, model: "m" });
const format: ResponseFormat = "openai-sse";
const sse: string = encodeTranscript(new Uint8Array(0), format);
// @ts-expect-error: not a replay format
encodeTranscript("", "chunks");

// A JS gateway host: hand the gateway what happened, carry out what it returns.
const gateway = new Gateway({ heldCallTimeoutMs: 60_000, idleTtlMs: 600_000, maxSessions: 8, publishIndex: true, pool: 2, approvals: true, maxConcurrent: 4 });
function carryOut(outputs: GatewayOutput[]): void {
  for (const output of outputs) {
    switch (output.type) {
      case "spawn": {
        const spec: CliSpec = output.spec;
        console.log(output.session, spec.args.join(" "), spec.env_remove, spec.env);
        break;
      }
      case "write":
        console.log(output.session, output.data.length);
        break;
      case "close":
        console.log(output.session);
        break;
      case "respond":
        console.log(output.request, output.status, output.headers[0]?.[0]);
        break;
      case "body":
        console.log(output.request, output.data);
        break;
      case "end":
        console.log(output.request);
        break;
      case "claim":
      case "release":
        console.log(output.key);
        break;
    }
  }
}
carryOut(gateway.handleRequest(1, { api: "anthropic", tenant: "key" }, { model: "m", max_tokens: 1, messages: [] }, Date.now()));
carryOut(gateway.handleStdout(1, new Uint8Array(0), Date.now()));
carryOut(gateway.handleStdout(1, "{}\n", Date.now()));
carryOut(gateway.handleExit(1, { code: 1, stderr: "boom" }, Date.now()));
carryOut(gateway.handleSpawnFailed(2, "ENOENT", Date.now()));
carryOut(gateway.handleClientGone(1, Date.now()));
const gatewayDeadline: GatewayDeadline | null = gateway.nextDeadline();
carryOut(gateway.handleTimeout(gatewayDeadline?.atMs ?? Date.now()));
carryOut(gateway.close(1, Date.now()));
// The HTTP face: the head first, then the body.
const web = new Gateway({ http: { apiKeys: ["k"], allowOrigins: ["http://localhost:3000"], maxBody: 1 << 20 } });
const head = { method: "POST", path: "/v1/messages", headers: { "x-api-key": "k", "content-type": "application/json" } };
const admission = web.admit(head);
if ("respond" in admission) {
  console.log(admission.respond.status, admission.respond.headers, admission.respond.body);
} else {
  for (const output of web.handleHttp(3, head, admission.admit.tenant, "{}", Date.now())) {
    if (output.type === "fetch") carryOut(web.handleFetched(output.request, output.body.length > 0 ? "{}" : null, Date.now()));
    else if (output.type === "drain_requested") console.log("exit once drained:", web.isDrained);
    else carryOut([output]);
  }
  console.log(admission.admit.cors.map(([name, value]) => `${name}: ${value}`));
}
web.handleHttp(4, { method: "GET", path: "/health", headers: [["host", "localhost"]] }, "", { error: "too_large" }, 0);
const modelIds: string[] = gateway.models().data.map((m) => m.id);
const scrape: string = gateway.metrics();
const waiting: Approval[] = gateway.approvals({ tenant: "key" }).data;
const answered = gateway.answerApproval("appr_1", { tenant: "key" }, { behavior: "deny", message: "no" }, Date.now());
carryOut(answered.outputs);
carryOut(gateway.handleApprovalEvents(9, { tenant: "key" }, Date.now()));
carryOut(gateway.drain(30_000, Date.now()));
const drainedYet: boolean = gateway.isDrained;
// @ts-expect-error: a behavior is allow or deny
gateway.answerApproval("appr_1", {}, { behavior: "maybe" }, 0);
const counts: number = gateway.sessionCount + gateway.heldCount + gateway.requestCount;
const timeoutText: string = HELD_CALL_TIMEOUT_TEXT;
gateway.free();
// @ts-expect-error: a time is required
gateway.handleRequest(1, { api: "openai" }, "{}");
// @ts-expect-error: the API is "anthropic", "openai" or "responses"
gateway.handleRequest(1, { api: "gemini" }, "{}", 0);
// @ts-expect-error: session ids are numbers
gateway.close("1", 0);
// @ts-expect-error: not an option
new Gateway({ heldCallMs: 5 });
// @ts-expect-error: a write has no status
const noStatus = (gateway.handleTimeout(0)[0] as Extract<GatewayOutput, { type: "write" }>).status;

// @ts-expect-error: a chunk type that does not exist
const wrong: Chunk["type"] = "text";

export { more, at, ids, lines, pushed, delivered, interrupted, wait, statuses, running, hash, wrong };
export { frames, keepAlive, started, calls, message, anthropicBody, finish, sse };
export { counts, timeoutText, noStatus, modelIds, scrape, waiting, drainedYet };

// A server tool's flag is there only when set; a permission is never settled by a default.
const serverCall: import("ccwire").ToolUseChunk = {
  type: "tool_use", id: "t", name: "web_search", message_id: "m", index: 0, parent_tool_use_id: null,
  complete: true, input: {}, server: true,
};
// @ts-expect-error: `server` is absent or true
const notServer: import("ccwire").ToolUseChunk = { ...serverCall, server: false };
const settled: import("ccwire").PermissionResolvedChunk["reason"] = "timeout";
// @ts-expect-error: only elicitations and dialogs are settled by the session's default
const byDefault: import("ccwire").PermissionResolvedChunk["reason"] = "default";
void [serverCall, notServer, settled, byDefault];
