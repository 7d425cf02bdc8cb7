// Replays every transcript named on the command line through the built npm package and prints
// a JSON object: file name → chunk lines (each chunk JSON.stringify'd, newline-terminated).
// Used by tests/tests/differential.rs.

import { existsSync, readFileSync } from "node:fs";
import { basename } from "node:path";

const entry = new URL("../../bindings/js/node.js", import.meta.url);
const wasm = new URL("../../bindings/pkg/ccwire_wasm_bg.wasm", import.meta.url);
if (!existsSync(wasm)) {
  console.error("replay-npm: the npm package is not built; run `npm ci && npm run build` in bindings/");
  process.exit(2);
}
const { replayTranscript } = await import(entry);

const out = {};
for (const file of process.argv.slice(2)) {
  let text = "";
  for (const chunk of replayTranscript(readFileSync(file))) text += JSON.stringify(chunk) + "\n";
  out[basename(file)] = text;
}
process.stdout.write(JSON.stringify(out));
