// The transcript inspector: a transcript is replayed line by line through the package's
// Replayer; each line is one step of the timeline with the chunks it produced and its t_ms.
// The view at step k is the chunks of steps 0..k applied to an empty conversation.

import { init, Replayer } from "./ccwire/js/web.js";

const SAMPLES = [
  "b_bash_allow.jsonl",
  "c_bash_deny_interrupt.jsonl",
  "d_sdk_mcp.jsonl",
  "w_hold_perm_070.jsonl",
  "x_thinking.jsonl",
  "x_subagent.jsonl",
  "x_server_tool.jsonl",
  "x_long_session.jsonl",
];
const STATUS_LABEL = {
  pending: "pending",
  awaiting_approval: "awaiting approval",
  running: "running",
  success: "success",
  error: "error",
  cancelled: "cancelled",
};

const $ = (id) => document.getElementById(id);
const state = { steps: [], at: 0, timer: null, name: "" };

/** Splits a transcript into timeline steps: `{t, chunks}` per line, plus the end of input. */
export function stepsOf(text) {
  const replayer = new Replayer();
  const steps = [];
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    const chunks = replayer.push(line + "\n");
    steps.push({ t: replayer.nowMs, chunks });
  }
  const last = replayer.finish();
  if (steps.length === 0) steps.push({ t: 0, chunks: [] });
  steps[steps.length - 1].chunks.push(...last);
  replayer.free();
  return steps;
}

function emptyModel() {
  return { items: [], tools: new Map(), blocks: new Map(), toolWait: null, session: null };
}

/** Applies one chunk to the conversation model. */
function apply(model, chunk) {
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
        tool = { kind: "tool", id: chunk.id, name: chunk.name, status: "pending", partial: "", input: null, parent, server: !!chunk.server };
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
      if (tool) tool.result = { content: chunk.content, isError: chunk.is_error };
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
      if (chunk.subtype === "api_retry") model.items.push({ kind: "status", text: `API retry (${chunk.error ?? "error"})` });
      break;
    default:
      break;
  }
}

function contentText(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((b) => (b?.type === "text" ? b.text : b?.type === "image" ? "[image]" : JSON.stringify(b)))
      .join("\n");
  }
  return JSON.stringify(content);
}

function pretty(value) {
  return JSON.stringify(value, null, 2);
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const child of children) if (child != null) node.append(child);
  return node;
}

function renderItem(item) {
  const sub = item.parent ? " sub" : "";
  switch (item.kind) {
    case "init":
      return el("div", { class: "item init" }, `turn start · ${item.chunk.model ?? "model?"} · ${item.chunk.permission_mode ?? ""}`);
    case "user":
      return el("div", { class: "item user" }, item.text);
    case "user-text":
      return el("div", { class: `item user-text${sub}` }, item.text);
    case "assistant":
      return el("div", { class: `item assistant${sub}` }, item.text);
    case "thinking":
      return el("details", { class: `item thinking${sub}`, open: true }, el("summary", {}, "thinking"), item.text);
    case "tool":
      return renderTool(item);
    case "turn": {
      const c = item.chunk;
      const cost = typeof c.total_cost_usd === "number" ? ` · $${c.total_cost_usd.toFixed(4)}` : "";
      return el("div", { class: `item turn${c.is_error ? " error" : ""}` }, `turn complete · ${c.subtype ?? ""}${c.is_error ? " (error)" : ""} · ${c.num_turns ?? "?"} round trips · ${c.duration_ms ?? "?"} ms${cost}`);
    }
    case "error":
      return el("div", { class: "item error-chunk" }, `${item.chunk.kind}: ${item.chunk.detail}`);
    case "status":
      return el("div", { class: "item status" }, item.text);
    default:
      return null;
  }
}

function renderTool(tool) {
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
      tool.elapsed != null ? el("span", { class: "reason" }, `${tool.elapsed}s`) : null,
      el("span", { class: "id" }, tool.id)));
  if (tool.permission) {
    const text = tool.permission.outcome ? `permission: ${tool.permission.outcome}` : "awaiting approval";
    card.append(el("div", { class: "note permission" }, text));
  }
  if (tool.mcp) card.append(el("div", { class: "note" }, `MCP call: ${tool.mcp}`));
  card.append(el("div", { class: "label" }, tool.input === null ? "input (streaming)" : "input"));
  card.append(el("pre", { class: "input" }, tool.input === null ? tool.partial : pretty(tool.input)));
  if (tool.result) {
    card.append(el("div", { class: "label" }, tool.result.isError ? "result (error)" : "result"));
    card.append(el("pre", { class: "result" }, contentText(tool.result.content)));
  }
  return card;
}

function render() {
  const model = emptyModel();
  for (let i = 0; i <= state.at && i < state.steps.length; i++) {
    for (const chunk of state.steps[i].chunks) apply(model, chunk);
  }
  $("conversation").replaceChildren(...model.items.map(renderItem).filter(Boolean));

  const wait = model.toolWait;
  const waitBox = $("tool-wait");
  waitBox.dataset.waiting = String(!!wait?.waiting);
  if (!wait || (!wait.waiting && wait.tool_use_ids.length === 0)) {
    waitBox.textContent = "not waiting";
  } else {
    const blocked = wait.blocked_on.map((b) => `${b.kind.replace(/_/g, " ")} ${b.request_id} → ${b.tool_use_id}`);
    waitBox.textContent = (wait.waiting ? "waiting for the host: " : "outstanding: ") +
      (blocked.length ? blocked.join("; ") : wait.tool_use_ids.join(", "));
  }
  $("tool-list").replaceChildren(
    ...[...model.tools.values()].map((t) =>
      el("li", { "data-tool-id": t.id }, el("code", {}, t.name), el("span", {}, el("span", { class: `dot ${t.status}` }), " ", STATUS_LABEL[t.status] ?? t.status))));
  $("session").textContent = model.session ? `session ${model.session.session_id ?? "?"} · CLI ${model.session.claude_code_version ?? "?"}` : "";

  const step = state.steps[state.at];
  const end = state.steps[state.steps.length - 1]?.t ?? 0;
  $("timeline").value = String(state.at);
  $("clock").textContent = `${((step?.t ?? 0) / 1000).toFixed(1)} s / ${(end / 1000).toFixed(1)} s · line ${state.at + 1}/${state.steps.length}`;
}

function stop() {
  clearTimeout(state.timer);
  state.timer = null;
  $("play").textContent = "▶ Play";
}

function play() {
  if (state.timer) return stop();
  const speed = Number($("speed").value);
  if (state.at >= state.steps.length - 1) state.at = 0;
  if (speed === 0) {
    state.at = state.steps.length - 1;
    render();
    return;
  }
  $("play").textContent = "❚❚ Pause";
  const tick = () => {
    if (state.at >= state.steps.length - 1) return stop();
    const gap = Math.max(0, state.steps[state.at + 1].t - state.steps[state.at].t);
    state.timer = setTimeout(() => {
      state.at += 1;
      render();
      tick();
    }, Math.min(gap / speed, 5000));
  };
  render();
  tick();
}

/** Shows a transcript; the timeline starts at its end. */
export function load(name, text) {
  stop();
  state.name = name;
  state.steps = stepsOf(text);
  state.at = state.steps.length - 1;
  $("timeline").max = String(state.steps.length - 1);
  $("player").hidden = false;
  $("title").textContent = name;
  for (const b of $("samples").children) b.classList.toggle("active", b.dataset.name === name);
  render();
  document.body.dataset.loaded = name;
}

async function loadSample(name) {
  const res = await fetch(`corpus/${name}`);
  if (!res.ok) throw new Error(`${name}: HTTP ${res.status}`);
  load(name, await res.text());
}

async function main() {
  await init();
  for (const name of SAMPLES) {
    $("samples").append(el("button", { type: "button", "data-name": name, onclick: () => loadSample(name) }, name.replace(/\.jsonl$/, "")));
  }
  $("file").addEventListener("change", async (e) => {
    const file = e.target.files[0];
    if (file) load(file.name, await file.text());
  });
  document.addEventListener("dragover", (e) => {
    e.preventDefault();
    document.body.classList.add("dragging");
  });
  document.addEventListener("dragleave", () => document.body.classList.remove("dragging"));
  document.addEventListener("drop", async (e) => {
    e.preventDefault();
    document.body.classList.remove("dragging");
    const file = e.dataTransfer.files[0];
    if (file) load(file.name, await file.text());
  });
  $("timeline").addEventListener("input", (e) => {
    stop();
    state.at = Number(e.target.value);
    render();
  });
  $("play").addEventListener("click", play);
  document.body.dataset.ready = "true";
}

main().catch((err) => {
  document.body.dataset.error = String(err);
  $("conversation").textContent = `Could not start: ${err}`;
});
