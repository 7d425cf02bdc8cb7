// Replay throughput of the npm package beside the native core and a bare JavaScript parse loop,
// in one run, on the same large transcript as `replay-throughput` (the corpus repeated to at
// least the given size, every copy with its own ids).
//
// node bench/npm-throughput.mjs [MB] [--compact]   (needs the built package: `npm run build` in
// bindings/). `--compact`: every line as the CLI writes it (JSON.stringify's form) instead of the
// corpus's spaced form.

import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const { Replayer, replayTranscript } = await import(join(root, "bindings/js/node.js"));
const args = process.argv.slice(2);
const compact = args.includes("--compact");
const mb = Number(args.find((a) => /^\d+$/.test(a)) ?? 50);

function largeTranscript(minBytes) {
  const dir = join(root, "tests/corpus");
  const files = readdirSync(dir).filter((f) => f.endsWith(".jsonl")).sort();
  const corpus = files.map((f) => readFileSync(join(dir, f), "utf8"));
  const parts = [];
  let size = 0;
  for (let copy = 1; size < minBytes; copy++) {
    for (const file of corpus) {
      let text = file
        .replaceAll("toolu_", `toolu_c${copy}_`)
        .replaceAll("msg_", `msg_c${copy}_`)
        .replaceAll('"request_id": "', `"request_id": "c${copy}-`);
      if (compact) {
        text = text.split("\n").filter((l) => l.length > 0)
          .map((l) => JSON.stringify(JSON.parse(l))).join("\n");
      }
      if (!text.endsWith("\n")) text += "\n";
      parts.push(text);
      size += Buffer.byteLength(text);
    }
  }
  return parts.join("");
}

function bestOf(runs, f) {
  let best = Infinity;
  let result;
  for (let i = 0; i < runs; i++) {
    const start = process.hrtime.bigint();
    result = f();
    const took = Number(process.hrtime.bigint() - start) / 1e9;
    best = Math.min(best, took);
  }
  return { seconds: best, result };
}

const text = largeTranscript(mb << 20);
const bytes = Buffer.from(text);
const sizeMb = bytes.length / (1 << 20);
const lines = text.split("\n").filter((l) => l.length > 0).length;
console.log(`transcript: ${sizeMb.toFixed(1)} MiB, ${lines} lines (the corpus repeated, ${compact ? "compact" : "spaced"})`);

// A plain JS loop: split the text into lines and JSON.parse each (no protocol work at all).
const baseline = bestOf(3, () => {
  let n = 0;
  for (const line of text.split("\n")) {
    if (line.length === 0) continue;
    const value = JSON.parse(line);
    if (value !== null) n++;
  }
  return n;
});

// The package as the native benchmark feeds the core: 64 KiB pieces into a Replayer, every
// chunk handed out as a JS object.
const piecewise = bestOf(3, () => {
  const replayer = new Replayer();
  let chunks = 0;
  for (let at = 0; at < bytes.length; at += 64 * 1024) {
    chunks += replayer.push(bytes.subarray(at, at + 64 * 1024)).length;
  }
  chunks += replayer.finish().length;
  replayer.free();
  return chunks;
});

// The package in one call on the whole transcript.
const whole = bestOf(3, () => replayTranscript(bytes).length);

// The native core: the bench binary's engine figure, same transcript construction and size.
const native = execFileSync(
  "cargo",
  ["run", "--quiet", "--release", "-p", "ccwire-bench", "--bin", "replay-throughput", "--", String(mb), ...(compact ? ["--compact"] : [])],
  { cwd: root, encoding: "utf8" },
);
const nativeMbS = Number(/engine[^\n]*?([\d.]+) MB\/s/.exec(native)?.[1]);
if (!Number.isFinite(nativeMbS)) throw new Error(`unexpected output of replay-throughput:\n${native}`);

const rate = (s) => sizeMb / s;
const row = (label, s, extra = "") =>
  console.log(`${label.padEnd(44)} ${rate(s).toFixed(1).padStart(7)} MB/s ${(lines / s).toFixed(0).padStart(9)} msg/s${extra}`);
row("JS baseline (split + JSON.parse per line)", baseline.seconds);
row("npm package, Replayer in 64 KiB pieces", piecewise.seconds, `  (${piecewise.result} chunks)`);
row("npm package, replayTranscript(bytes)", whole.seconds, `  (${whole.result} chunks)`);
console.log(`${"native core (replay-throughput engine)".padEnd(44)} ${nativeMbS.toFixed(1).padStart(7)} MB/s`);
console.log(`ratio package(pieces)/native: ${(rate(piecewise.seconds) / nativeMbS).toFixed(2)}`);
console.log(`ratio package(pieces)/JS baseline: ${(baseline.seconds / piecewise.seconds).toFixed(2)}`);
console.log(`ratio package(whole)/native: ${(rate(whole.seconds) / nativeMbS).toFixed(2)}`);
console.log(`ratio package(whole)/JS baseline: ${(baseline.seconds / whole.seconds).toFixed(2)}`);
