// `ccwire/conversation` for Node 20+: the module loads on import.

import { readFileSync } from "node:fs";
import { initSync } from "../pkg/ccwire_conversation.js";
import { initSync as initMainSync } from "../pkg/ccwire_wasm.js";
import { markReady as markMainReady } from "./api.js";
import { markReady } from "./conversation.js";

initSync({ module: readFileSync(new URL("../pkg/ccwire_conversation_bg.wasm", import.meta.url)) });
// The main module (for encodeTranscript) loads on first use: most users of this module never
// replay. Loading it twice is harmless: the glue keeps the first instance.
markReady(() => {
  initMainSync({ module: readFileSync(new URL("../pkg/ccwire_wasm_bg.wasm", import.meta.url)) });
  markMainReady();
});

export {
  ApiRequestError,
  Gateway,
  HELD_CALL_TIMEOUT_TEXT,
  ResponseEncoder,
  canonicalRequest,
  encodeTranscript,
  historyHash,
  routeKey,
} from "./conversation.js";

/** Already done in Node; kept so code written for browsers runs unchanged. */
export async function init() {}
