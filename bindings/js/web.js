// Entry point for browsers (and any ESM runtime with fetch): `await init()` once before use.

import initWasm from "../pkg/ccwire_wasm.js";
import { markReady } from "./api.js";

export { Replayer, Session, replayTranscript } from "./api.js";

/**
 * Loads the WebAssembly module. By default it is fetched from beside this file; pass a URL,
 * a Response, bytes or a compiled WebAssembly.Module to load it from elsewhere.
 */
export async function init(moduleOrPath) {
  await initWasm(moduleOrPath === undefined ? undefined : { module_or_path: moduleOrPath });
  markReady();
}
