// Entry point for Node 20+: the WebAssembly module is read from disk and instantiated
// synchronously, so everything is usable as soon as the import resolves.

import { readFileSync } from "node:fs";
import { initSync } from "../pkg/ccwire_wasm.js";
import { markReady } from "./api.js";

initSync({ module: readFileSync(new URL("../pkg/ccwire_wasm_bg.wasm", import.meta.url)) });
markReady();

export { Replayer, Session, replayTranscript } from "./api.js";

/** Already done in Node; kept so code written for browsers runs unchanged. */
export async function init() {}
