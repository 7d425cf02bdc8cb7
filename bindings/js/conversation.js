// `ccwire/conversation`: the canonical conversation of an Anthropic Messages or OpenAI Chat
// Completions request and its history hash. A module of its own, so that pages that only
// replay or drive sessions do not load the request parsers.

import * as wasm from "../pkg/ccwire_conversation.js";

let ready = false;

/** Marks the module as instantiated (called by the entry points). */
export function markReady() {
  ready = true;
}

function check() {
  if (!ready) {
    throw new Error("ccwire/conversation: the WebAssembly module is not loaded yet; `await init()` first");
  }
}

/** An API request the gateway would refuse, with the HTTP status and the API's error body. */
export class ApiRequestError extends Error {
  constructor(status, body) {
    super(body?.error?.message ?? `invalid request (${status})`);
    this.name = "ApiRequestError";
    this.status = status;
    this.body = body;
  }
}

const API_ERROR = /^ccwire-api-error (\d+) (.*)$/s;

/**
 * Parses an Anthropic Messages or OpenAI Chat Completions request body into its canonical
 * conversation, with the history hash namespaced by `tenant`.
 * @param {string | object} body
 * @param {{api: "anthropic" | "openai", tenant?: string}} options
 */
export function canonicalRequest(body, { api, tenant = "" }) {
  check();
  const text = typeof body === "string" ? body : JSON.stringify(body);
  let out;
  try {
    out = wasm.canonicalRequest(api, text, tenant);
  } catch (err) {
    const m = API_ERROR.exec(err?.message ?? "");
    if (m) throw new ApiRequestError(Number(m[1]), JSON.parse(m[2]));
    throw err;
  }
  return JSON.parse(out);
}

/** The history hash of a request body (`null` before the first assistant message). */
export function historyHash(body, options) {
  return canonicalRequest(body, options).history_hash;
}
