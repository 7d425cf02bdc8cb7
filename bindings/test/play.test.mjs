// `ccwire-play` (the package's player, in Node) injects the same failures as the native
// `ccwire play`, with the same flags: for each fault, both players fed the same host lines
// write the same bytes and end the same way (exit status or signal).

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { corpusDir, nativeCcwire, root } from "./helpers.mjs";

const tape = join(corpusDir, "a_text.jsonl");
// The host's side of the recording, written at once; stdin then closes.
const hostLines = readFileSync(tape, "utf8")
  .split("\n")
  .filter(Boolean)
  .map((l) => JSON.parse(l))
  .filter((e) => e.dir === "in")
  .map((e) => `${JSON.stringify(e.msg)}\n`)
  .join("");

function run(command, args) {
  const out = spawnSync(command, args, {
    input: hostLines,
    maxBuffer: 256 << 20,
    // A stalled player stays up until its host ends it.
    timeout: 5000,
    killSignal: "SIGTERM",
  });
  return { stdout: out.stdout, status: out.status, signal: out.signal, stderr: out.stderr.toString() };
}

const native = (fault) => run(nativeCcwire(), ["play", tape, "--instant", "--fault", fault]);
const node = (fault) => run(process.execPath, [join(root, "bindings/js/play-cli.js"), tape, "--instant", "--fault", fault]);

for (const [fault, ending] of [
  ["garbage@3", { status: 0 }],
  ["oversize@3", { status: 0 }],
  ["duplicate@3", { status: 0 }],
  ["unknown-response@3", { status: 0 }],
  ["unknown-cancel@3", { status: 0 }],
  ["exit-mid-line@4", { status: 1 }],
  ["kill@4", { signal: "SIGKILL" }],
  ["stall@4", { signal: "SIGTERM" }],
  ["exit-code=7", { status: 7 }],
]) {
  test(`--fault ${fault}: the Node player writes and ends as the native one does`, () => {
    const want = native(fault);
    const got = node(fault);
    assert.equal(want.signal ?? null, ending.signal ?? null, `native: ${want.stderr}`);
    assert.equal(want.status, ending.status ?? null, `native: ${want.stderr}`);
    assert.equal(got.signal, want.signal, got.stderr);
    assert.equal(got.status, want.status, got.stderr);
    assert.ok(got.stdout.equals(want.stdout), `${fault}: the written bytes differ\n${got.stdout.subarray(0, 2000)}`);
    // The fault shows: every fault but exit-code changes what is written.
    const clean = native("exit-code=0").stdout;
    assert.equal(got.stdout.equals(clean), fault.startsWith("exit-code"), fault);
  });
}

test("a fault that is not one is refused by both players, naming it", () => {
  for (const out of [native("nonsense@1"), node("nonsense@1")]) {
    assert.equal(out.status, 2, out.stderr);
    assert.match(out.stderr, /no fault named "nonsense"/);
  }
});
