// `ccwire/conversation` for browsers: `await init()` once before use.

import initWasm from "../pkg/ccwire_conversation.js";
import { markReady } from "./conversation.js";

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

/**
 * Loads the module (by default fetched from beside this file). `encodeTranscript` also needs
 * the main module: `init()` from `ccwire` as well.
 */
export async function init(moduleOrPath) {
  await initWasm(moduleOrPath === undefined ? undefined : { module_or_path: moduleOrPath });
  markReady();
}
