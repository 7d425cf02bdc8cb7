// Types of `ccwire/conversation`.

import type { Json } from "./index.js";

export type ApiName = "anthropic" | "openai";
export interface CanonicalBlock {
  type: "text" | "image" | "tool_use" | "tool_result" | "other";
  [field: string]: Json | undefined;
}
/** A request body in canonical form (the gateway's view of it). */
export interface CanonicalRequest {
  api: ApiName;
  model: string;
  stream: boolean;
  max_tokens: number | null;
  include_usage: boolean;
  tool_choice: { type: "auto" | "any" | "none" } | { type: "tool"; name: string };
  system: string | null;
  messages: { role: "user" | "assistant"; content: CanonicalBlock[] }[];
  tools: { name: string; description: string; input_schema: Json }[];
  /** Messages up to the last assistant message: the history a previous response produced. */
  history_len: number;
  /** SHA-256 (hex) of that history, namespaced by tenant; `null` before any assistant message. */
  history_hash: string | null;
  tool_signature: string;
  ignored: string[];
}
/** A request the gateway would refuse. */
export class ApiRequestError extends Error {
  readonly status: number;
  /** The error body in the API's own shape. */
  readonly body: Json;
}
export function canonicalRequest(
  body: string | object,
  options: { api: ApiName; tenant?: string },
): CanonicalRequest;
export function historyHash(
  body: string | object,
  options: { api: ApiName; tenant?: string },
): string | null;

/** Loads the WebAssembly module (browsers); a no-op in Node, where it loads on import. */
export function init(moduleOrPath?: string | URL | Request | Response | BufferSource | WebAssembly.Module): Promise<void>;
