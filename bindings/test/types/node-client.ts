// Type-checked by `tsc --noEmit` in `npm test`: the types of `ccwire/node`.

import { Client, ProcessExitedError, claudeArgs, type ClientOptions } from "ccwire/node";
import { cliVersion, play } from "ccwire/play";
import { NoBinaryError, PLATFORMS, binaryPath, platformKey, type Platform } from "ccwire/native";

const options: ClientOptions = {
  model: "sonnet",
  thinking: { budgetTokens: 4096 },
  mcpServers: { files: { type: "stdio", command: "files-server" } },
  canUseTool: async (request) =>
    request.tool_name === "Bash" ? { behavior: "deny", message: "no" } : { behavior: "allow" },
  hooks: [{ event: "PreToolUse", matcher: "Write", handler: async () => ({}) }],
  toolServers: {
    calc: [{ name: "add", handler: async () => ({ content: [{ type: "text", text: "5" }] }) }],
  },
  onElicitation: async (request) => ({ action: "accept", content: { folder: request.server } }),
  onUserDialog: async () => ({ behavior: "cancelled" }),
  dialogKinds: ["refusal_fallback_prompt"],
  env: { DEBUG: null },
};
const args: string[] = claudeArgs(options);

export async function drive(): Promise<number> {
  const client = await Client.connect(options);
  let text = "";
  try {
    for await (const chunk of client.query("hi")) {
      if (chunk.type === "text_delta") text += chunk.text;
    }
  } catch (err) {
    if (err instanceof ProcessExitedError) return err.exit.code ?? -1;
    throw err;
  }
  await client.request({ subtype: "mcp_toggle", serverName: "files", enabled: false });
  const exit = await client.close();
  return (exit.code ?? 0) + text.length + args.length;
}

// A tape recorded by `record`, played as the CLI.
const recorded: ClientOptions = { record: "/tmp/session.jsonl" };
const exitCode: Promise<number> = play("/tmp/session.jsonl", { verify: true, speed: 2, onDiverged: (m: string) => console.error(m) });
const version: string = cliVersion();
console.log(recorded, exitCode, version);

// The native binary's path, for a child process of `ccwire serve`.
let binary: string | null = null;
try {
  binary = binaryPath();
} catch (err) {
  if (!(err instanceof NoBinaryError)) throw err;
}
const here: Platform | undefined = PLATFORMS[platformKey()];
console.log(binary, here?.target, here?.libc ?? "no libc");
