// `ccwire/node` without the real CLI (tests/sdk/ts has those): a missing executable, a CLI that
// refuses to start, one that dies mid-turn, and the answers a small stand-in CLI gets.

import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { Client, ProcessExitedError, RefusedError, claudeArgs } from "ccwire/node";

const dir = mkdtempSync(join(tmpdir(), "ccwire-node-client-"));

/** A stand-in CLI: a Node script answering each stdin line as `behaviour` says. */
function cli(name, behaviour) {
  const path = join(dir, name);
  writeFileSync(
    path,
    `#!${process.execPath}
const rl = require("node:readline").createInterface({ input: process.stdin });
const out = (m) => process.stdout.write(JSON.stringify(m) + "\\n");
const behaviour = ${behaviour.toString()};
rl.on("line", (line) => behaviour(JSON.parse(line), out));
`,
  );
  chmodSync(path, 0o755);
  return path;
}

const answers = (message, out) => {
  if (message.type === "control_request") {
    const ok = { subtype: "success", request_id: message.request_id, response: {} };
    if (message.request.subtype === "initialize") ok.response = { commands: [], claude_code_version: "0.0.0" };
    if (message.request.subtype === "get_settings") {
      return out({ type: "control_response", response: { subtype: "error", request_id: message.request_id, error: "no settings here" } });
    }
    return out({ type: "control_response", response: ok });
  }
  if (message.type === "control_response") {
    // The host's answer to the permission request: the turn ends with what it said.
    const behavior = message.response.response.behavior;
    return out({ type: "result", subtype: "success", is_error: false, result: `permission: ${behavior}`, session_id: "s" });
  }
  if (message.type === "user") {
    const text = message.message.content;
    if (text === "die") process.exit(7);
    if (text === "ask") {
      return out({
        type: "control_request",
        request_id: "perm-1",
        request: { subtype: "can_use_tool", tool_name: "Bash", input: { command: "ls" }, tool_use_id: "t1" },
      });
    }
    out({ type: "result", subtype: "success", is_error: false, result: `echo: ${text}`, session_id: "s" });
  }
};

test("a missing executable is a clear error", async () => {
  await assert.rejects(Client.connect({ claude: join(dir, "no-such-claude") }), /cannot start the Claude Code CLI .*no-such-claude/);
});

test("a CLI that exits before initialize is a ProcessExitedError with its stderr", async () => {
  const path = join(dir, "fails");
  writeFileSync(path, "#!/bin/sh\necho 'bad flag' >&2\nexit 3\n");
  chmodSync(path, 0o755);
  await assert.rejects(
    Client.connect({ claude: path }),
    (err) => err instanceof ProcessExitedError && err.exit.code === 3 && err.stderr === "bad flag",
  );
});

test("turns, permission answers, refusals and a CLI that dies mid-turn", async () => {
  const client = await Client.connect({
    claude: cli("echo", answers),
    canUseTool: async (request) => ({ behavior: request.tool_name === "Bash" ? "deny" : "allow", message: "no shell" }),
  });
  assert.equal(client.serverInfo.claude_code_version, "0.0.0");
  const turn = [];
  for await (const chunk of client.query("hello")) turn.push(chunk);
  assert.equal(turn.at(-1).result, "echo: hello");

  const asked = [];
  for await (const chunk of client.query("ask")) asked.push(chunk);
  assert.ok(asked.some((c) => c.type === "permission_request"));
  assert.equal(asked.at(-1).result, "permission: deny");

  await assert.rejects(client.request({ subtype: "get_settings" }), (err) => err instanceof RefusedError && err.error === "no settings here");
  assert.deepEqual(await client.request({ subtype: "mcp_status" }), {});

  const dying = client.query("die");
  await assert.rejects(
    (async () => {
      for await (const _ of dying);
    })(),
    (err) => err instanceof ProcessExitedError && err.exit.code === 7,
  );
  assert.throws(() => client.send("again"), ProcessExitedError);
  assert.deepEqual(await client.close(), { code: 7, signal: null });
});

test("claudeArgs keeps a resume id that looks like a flag a value", () => {
  assert.ok(claudeArgs({ resume: "--danger" }).includes("--resume=--danger"));
});
