// `ccwire/conversation` for Node 20+: the module loads on import.

import { readFileSync } from "node:fs";
import { initSync } from "../pkg/ccwire_conversation.js";
import { markReady } from "./conversation.js";

initSync({ module: readFileSync(new URL("../pkg/ccwire_conversation_bg.wasm", import.meta.url)) });
markReady();

export { ApiRequestError, canonicalRequest, historyHash } from "./conversation.js";

/** Already done in Node; kept so code written for browsers runs unchanged. */
export async function init() {}
