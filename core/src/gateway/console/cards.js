// The conversation model and its cards, shared by the inspector (a replayed transcript) and
// the console (a live conversation's chunks): `apply` folds a chunk into the model,
// `renderItem` draws one of its items.

export const STATUS_LABEL = {
  pending: "pending",
  awaiting_approval: "awaiting approval",
  running: "running",
  success: "success",
  error: "error",
  cancelled: "cancelled",
};

export function emptyModel() {
  return { items: [], tools: new Map(), blocks: new Map(), toolWait: null, session: null, now: null };
}

/** What a view shows: secrets redacted (and the user's own patterns). */
export const view = { redact: true, patterns: [] };

// Secrets as they commonly appear: API keys and tokens of the usual services, bearer tokens,
// private keys, e-mail addresses.
const SECRETS = [
  /sk-(?:ant-)?[A-Za-z0-9_-]{16,}/g,
  /\b(?:ghp|gho|ghu|ghs|github_pat)_[A-Za-z0-9_]{20,}/g,
  /\bxox[abprs]-[A-Za-z0-9-]{10,}/g,
  /\bAKIA[0-9A-Z]{16}\b/g,
  /\bAIza[0-9A-Za-z_-]{35}\b/g,
  /\b[Bb]earer\s+[A-Za-z0-9._~+\/=-]{16,}/g,
  /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----/g,
  /[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/g,
];

/** `text` with what looks like a secret, and what matches the user's patterns, replaced. */
export function redact(text) {
  if (!view.redact || typeof text !== "string") return text;
  let out = text;
  for (const re of [...SECRETS, ...view.patterns]) out = out.replace(re, "[redacted]");
  return out;
}

/** Applies one chunk to the conversation model. */
export function apply(model, chunk) {
  const parent = chunk.parent_tool_use_id ?? null;
  switch (chunk.type) {
    case "session_init":
      model.session = chunk;
      model.items.push({ kind: "init", chunk });
      break;
    case "user_prompt":
      model.items.push({ kind: "user", text: contentText(chunk.content) });
      break;
    case "user_text":
      model.items.push({ kind: "user-text", text: chunk.text, parent });
      break;
    case "text_delta":
    case "thinking_delta": {
      const kind = chunk.type === "text_delta" ? "assistant" : "thinking";
      const key = `${kind}:${chunk.message_id}:${chunk.index}`;
      let item = model.blocks.get(key);
      if (!item) {
        item = { kind, text: "", parent };
        model.blocks.set(key, item);
        model.items.push(item);
      }
      item.text += chunk.type === "text_delta" ? chunk.text : chunk.thinking;
      break;
    }
    case "thinking_redacted":
      model.items.push({ kind: "thinking", text: "(redacted thinking)", parent });
      break;
    case "tool_use": {
      let tool = model.tools.get(chunk.id);
      if (!tool) {
        tool = { kind: "tool", id: chunk.id, name: chunk.name, status: "pending", partial: "", input: null, parent, server: !!chunk.server, startedMs: model.now, endedMs: null };
        model.tools.set(chunk.id, tool);
        model.items.push(tool);
      }
      if (chunk.complete) tool.input = chunk.input;
      break;
    }
    case "tool_input_delta": {
      const tool = model.tools.get(chunk.id);
      if (tool) tool.partial += chunk.partial_json;
      break;
    }
    case "tool_status": {
      const tool = model.tools.get(chunk.id);
      if (tool) {
        tool.status = chunk.status;
        tool.reason = chunk.reason ?? null;
      }
      break;
    }
    case "tool_start":
    case "tool_progress": {
      const tool = model.tools.get(chunk.id);
      if (tool) tool.elapsed = chunk.elapsed_s;
      break;
    }
    case "tool_result": {
      const tool = model.tools.get(chunk.id);
      if (tool) {
        tool.result = { content: chunk.content, isError: chunk.is_error };
        tool.endedMs = model.now;
      }
      break;
    }
    case "permission_request": {
      const tool = model.tools.get(chunk.tool_use_id);
      if (tool) tool.permission = { requestId: chunk.request_id, outcome: null };
      break;
    }
    case "permission_resolved": {
      const tool = model.tools.get(chunk.tool_use_id);
      if (tool?.permission) tool.permission.outcome = `${chunk.behavior} (${chunk.reason})`;
      break;
    }
    case "mcp_tool_call": {
      const tool = model.tools.get(chunk.tool_use_id);
      if (tool) tool.mcp = `${chunk.server} / ${chunk.tool}`;
      break;
    }
    case "tool_wait":
      model.toolWait = chunk;
      break;
    case "turn_complete":
      model.items.push({ kind: "turn", chunk });
      break;
    case "error":
      model.items.push({ kind: "error", chunk });
      break;
    case "status":
      if (chunk.subtype === "api_retry") {
        const status = chunk.error_status ? ` ${chunk.error_status}` : "";
        const attempt = chunk.attempt != null ? ` ${chunk.attempt}${chunk.max_retries != null ? ` of ${chunk.max_retries}` : ""}` : "";
        const delay = chunk.retry_delay_ms != null ? ` in ${(chunk.retry_delay_ms / 1000).toFixed(1)} s` : "";
        model.items.push({ kind: "status", text: `The API answered${status} (${chunk.error ?? "error"}): retry${attempt}${delay}` });
      }
      break;
    default:
      break;
  }
}

export function contentText(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((b) => (b?.type === "text" ? b.text : b?.type === "image" ? "[image]" : JSON.stringify(b)))
      .join("\n");
  }
  return JSON.stringify(content);
}

export function pretty(value) {
  return JSON.stringify(value, null, 2);
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const child of children) if (child != null) node.append(child);
  return node;
}

/** Text as HTML. */
export function escapeHtml(text) {
  return text.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

/**
 * Saves a page as one HTML file that opens offline: `title`, the stylesheet at `cssUrl`
 * inlined, and `main` (HTML) as its content; no script, nothing fetched.
 */
export async function saveAsHtml(filename, title, cssUrl, main) {
  const css = await (await fetch(cssUrl)).text();
  const html = `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title><style>${css}</style></head>\n<body><header><h1>${escapeHtml(title)}</h1></header><main>${main}</main></body></html>\n`;
  const link = el("a", { href: URL.createObjectURL(new Blob([html], { type: "text/html" })), download: filename });
  document.body.append(link);
  link.click();
  link.remove();
}

/**
 * Marks the cards of `container` that hold `text` (any case) with the class `match`; returns
 * how many, and says so in `count` ("3 matches", "no match", nothing for no text).
 */
export function markMatches(container, text, count) {
  const query = text.trim().toLowerCase();
  let found = 0;
  for (const item of container.children) {
    const hit = query !== "" && item.textContent.toLowerCase().includes(query);
    item.classList.toggle("match", hit);
    if (hit) found += 1;
  }
  count.textContent = query === "" ? "" : found === 0 ? "no match" : `${found} match${found === 1 ? "" : "es"}`;
  return found;
}

export function renderItem(item, decorate = undefined) {
  const sub = item.parent ? " sub" : "";
  switch (item.kind) {
    case "init":
      return el("div", { class: "item init" }, `turn start · ${item.chunk.model ?? "model?"} · ${item.chunk.permission_mode ?? ""}`);
    case "user":
      return el("div", { class: "item user" }, redact(item.text));
    case "user-text":
      return el("div", { class: `item user-text${sub}` }, redact(item.text));
    case "assistant":
      return el("div", { class: `item assistant${sub}` }, redact(item.text));
    case "thinking":
      return el("details", { class: `item thinking${sub}`, open: true }, el("summary", {}, "thinking"), redact(item.text));
    case "tool":
      return renderTool(item, decorate);
    case "turn": {
      const c = item.chunk;
      const cost = typeof c.total_cost_usd === "number" ? ` · $${c.total_cost_usd.toFixed(4)} so far` : "";
      const tokens = tokensOf(c.usage);
      const how = c.is_error
        ? `turn failed${c.api_error_status ? ` · API error ${c.api_error_status}${c.api_error_type ? ` (${c.api_error_type})` : ""}` : c.subtype && c.subtype !== "success" ? ` · ${c.subtype.replace(/_/g, " ")}` : ""}`
        : "turn complete";
      const round = c.num_turns === 1 ? "1 model call" : `${c.num_turns ?? "?"} model calls`;
      return el("div", { class: `item turn${c.is_error ? " error" : ""}` },
        `${how} · ${round} · ${((c.duration_ms ?? 0) / 1000).toFixed(1)} s${tokens ? ` · ${tokens}` : ""}${cost}`);
    }
    case "error":
      return el("div", { class: "item error-chunk" }, redact(`${item.chunk.kind}: ${item.chunk.detail}`));
    case "status":
      return el("div", { class: "item status" }, item.text);
    default:
      return null;
  }
}

/** A tool's card; `decorate(tool, card)` may add to it (the console's approval buttons). */
export function renderTool(tool, decorate = undefined) {
  const card = el("div", {
    class: `item tool-card status-${tool.status}${tool.parent ? " sub" : ""}`,
    "data-tool-id": tool.id,
    "data-status": tool.status,
  });
  card.append(
    el("div", { class: "head" },
      el("span", { class: "badge" }, STATUS_LABEL[tool.status] ?? tool.status),
      el("span", { class: "name" }, tool.name + (tool.server ? " (server)" : "")),
      tool.reason ? el("span", { class: "reason" }, `(${tool.reason})`) : null,
      duration(tool) ? el("span", { class: "duration" }, duration(tool)) : null,
      el("span", { class: "id" }, tool.id)));
  if (tool.permission) {
    const text = tool.permission.outcome ? `permission: ${tool.permission.outcome}` : "awaiting approval";
    card.append(el("div", { class: "note permission" }, text));
  }
  if (tool.mcp) card.append(el("div", { class: "note" }, `MCP call: ${tool.mcp}`));
  card.append(el("div", { class: "label" }, tool.input === null ? "input (streaming)" : "input"));
  card.append(el("pre", { class: "input" }, redact(tool.input === null ? tool.partial : pretty(tool.input))));
  if (tool.result) {
    card.append(el("div", { class: "label" }, tool.result.isError ? "result (error)" : "result"));
    card.append(el("pre", { class: "result" }, redact(contentText(tool.result.content))));
  }
  decorate?.(tool, card);
  return card;
}

/** A turn's tokens, in words (`1,234 in · 56 out · 7,890 cached`), or "" without usage. */
export function tokensOf(usage) {
  if (!usage || typeof usage !== "object") return "";
  const n = (v) => Number(v ?? 0);
  const input = n(usage.input_tokens);
  const cached = n(usage.cache_read_input_tokens) + n(usage.cache_creation_input_tokens);
  const output = n(usage.output_tokens);
  if (!input && !cached && !output) return "";
  const f = (v) => v.toLocaleString("en-US");
  return `${f(input)} in · ${f(output)} out${cached ? ` · ${f(cached)} cached` : ""}`;
}

/** How long a tool ran (`0.4 s`), or how long it has run so far, when the times are known. */
function duration(tool) {
  if (tool.startedMs != null && tool.endedMs != null) return `took ${((tool.endedMs - tool.startedMs) / 1000).toFixed(1)} s`;
  if (tool.elapsed != null) return `${tool.elapsed} s`;
  return "";
}
