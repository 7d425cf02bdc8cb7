// The package as users get it: `npm pack`, install the tarball into a new project, import it
// from there and replay a transcript.

import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { test } from "node:test";
import { corpusDir, golden, root } from "./helpers.mjs";

const npm = process.platform === "win32" ? "npm.cmd" : "npm";

test("the packed tarball installs and replays a transcript", async () => {
  const work = mkdtempSync(join(tmpdir(), "ccwire-pack-"));
  try {
    const packed = JSON.parse(
      execFileSync(npm, ["pack", "--json", "--pack-destination", work], {
        cwd: join(root, "bindings"),
        encoding: "utf8",
        stdio: ["ignore", "pipe", "ignore"],
      }),
    );
    const files = packed[0].files.map((f) => f.path).sort();
    assert.deepEqual(files, [
      "LICENSE-APACHE",
      "LICENSE-MIT",
      "README.md",
      "js/api.js",
      "js/ccwire-cli.js",
      "js/chunks.d.ts",
      "js/client.d.ts",
      "js/client.js",
      "js/conversation-node.js",
      "js/conversation-web.js",
      "js/conversation.d.ts",
      "js/conversation.js",
      "js/index.d.ts",
      "js/native.d.ts",
      "js/native.js",
      "js/node.js",
      "js/play-cli.js",
      "js/play.d.ts",
      "js/play.js",
      "js/web.js",
      "package.json",
      "pkg/ccwire_conversation.js",
      "pkg/ccwire_conversation_bg.wasm",
      "pkg/ccwire_wasm.js",
      "pkg/ccwire_wasm_bg.wasm",
    ]);

    const project = join(work, "app");
    execFileSync("mkdir", ["-p", project]);
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
    execFileSync(npm, ["install", "--no-audit", "--no-fund", "--offline", resolve(work, packed[0].filename)], {
      cwd: project,
      stdio: ["ignore", "ignore", "inherit"],
    });
    const transcript = join(corpusDir, "b_bash_allow.jsonl");
    writeFileSync(
      join(project, "main.mjs"),
      `import { readFileSync } from "node:fs";
import { replayTranscript } from "ccwire";
import { encodeTranscript, Gateway, historyHash } from "ccwire/conversation";
import { claudeArgs } from "ccwire/node";
if (claudeArgs({ model: "m" }).join(" ") !== "--output-format stream-json --verbose --input-format stream-json --model m --setting-sources=") throw new Error("no ccwire/node");
const body = { model: "m", max_tokens: 10, messages: [{ role: "user", content: "hi" }, { role: "assistant", content: "yo" }, { role: "user", content: "and?" }] };
if (!/^[0-9a-f]{64}$/.test(historyHash(body, { api: "anthropic" }))) throw new Error("no hash");
if (new Gateway().handleRequest(1, { api: "anthropic" }, body, 0)[0]?.type !== "spawn") throw new Error("no spawn");
const responses = encodeTranscript(readFileSync(${JSON.stringify(transcript)}), "anthropic-json");
if (JSON.parse(responses.split("\\n")[0]).type !== "message") throw new Error("no response");
for (const chunk of replayTranscript(readFileSync(${JSON.stringify(transcript)}))) {
  console.log(JSON.stringify(chunk));
}
`,
    );
    const out = execFileSync(process.execPath, ["main.mjs"], { cwd: project, encoding: "utf8" });
    assert.deepEqual(out.trim().split("\n"), golden("b_bash_allow.jsonl"));

    // The player, as the installed `ccwire-play` command: it says it is the CLI, and plays
    // the tape's CLI lines once the host's lines before them have come.
    const bin = join(project, "node_modules", ".bin", "ccwire-play");
    const version = execFileSync(bin, [transcript, "--", "--version"], { encoding: "utf8" });
    assert.match(version, /^\d+\.\d+\.\d+ \(Claude Code\)\n$/);
    const tape = readFileSync(transcript, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
    const hostLines = tape.filter((e) => e.dir === "in").map((e) => JSON.stringify(e.msg)).join("\n");
    const played = execFileSync(bin, [transcript, "--instant"], { input: `${hostLines}\n`, encoding: "utf8" });
    const recorded = tape.filter((e) => e.dir === "out").map((e) => e.msg.type);
    assert.deepEqual(played.trim().split("\n").map((l) => JSON.parse(l).type), recorded);

    // The `ccwire` command runs the native binary of the platform package; installed offline,
    // there is none, and it says which package to install. (scripts/release/test-install.sh
    // installs the platform package too and runs `ccwire serve` through it.)
    const ccwire = join(project, "node_modules", ".bin", "ccwire");
    const { platformKey } = await import(join(project, "node_modules", "ccwire", "js", "native.js"));
    const missing = spawnSync(ccwire, ["--version"], { encoding: "utf8" });
    assert.equal(missing.status, 1);
    assert.match(missing.stderr, new RegExp(`^ccwire: ccwire's binary for ${platformKey()} is in the package @ccwire/${platformKey()}, which is not installed`));
    // CCWIRE_BINARY names the binary to run: arguments, streams and the exit status pass through.
    const fake = join(work, "fake-ccwire");
    writeFileSync(fake, '#!/bin/sh\necho "args: $*"; cat; exit 7\n', { mode: 0o755 });
    const ran = spawnSync(ccwire, ["serve", "--listen", "a b"], {
      encoding: "utf8",
      input: "stdin",
      env: { ...process.env, CCWIRE_BINARY: fake },
    });
    assert.equal(ran.status, 7);
    assert.equal(ran.stdout, "args: serve --listen a b\nstdin");
    // A binary ended by a signal: the command's status says which, as a shell's would.
    writeFileSync(fake, "#!/bin/sh\nkill -TERM $$\n", { mode: 0o755 });
    const killed = spawnSync(ccwire, [], { env: { ...process.env, CCWIRE_BINARY: fake } });
    assert.equal(killed.status, 128 + 15);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});

/** Runs the first ```js example after `heading` in a README; checks it prints the ```text block after it. */
function runExample(readmePath, heading) {
  const readme = readFileSync(readmePath, "utf8");
  const section = readme.split(heading)[1];
  assert.ok(section, `${readmePath} has a section \`${heading}\``);
  const snippet = /```js\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(snippet, "the section has a ```js example");
  const work = mkdtempSync(join(root, "bindings", ".readme-"));
  try {
    const file = join(work, "example.mjs");
    writeFileSync(file, snippet);
    const out = execFileSync(process.execPath, [file], {
      cwd: join(root, "bindings"),
      encoding: "utf8",
    });
    const expected = /```text\n([\s\S]*?)```/.exec(section)?.[1];
    assert.ok(expected, "the section shows the example's output in a ```text block");
    assert.equal(out, expected);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

test("the JavaScript example of docs/USING.md runs and prints what it says", () => {
  runExample(join(root, "docs/USING.md"), "## Using ccwire from JavaScript");
});

test("the package README's response encoder example runs and prints what it says", () => {
  runExample(join(root, "bindings", "README.md"), "## Responses of the Anthropic and OpenAI APIs");
});

test("the package README's gateway example runs and prints what it says", () => {
  runExample(join(root, "bindings", "README.md"), "## A gateway in JavaScript");
});
