// The transcript inspector: a transcript is replayed line by line through the package's
// Replayer; each line is one step of the timeline with the chunks it produced and its t_ms.
// The view at step k is the chunks of steps 0..k applied to an empty conversation.

import { init, Replayer } from "./ccwire/js/web.js";
import { STATUS_LABEL, apply, el, emptyModel, renderItem, tokensOf, view } from "./console/cards.js";

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

function render() {
  const model = emptyModel();
  for (let i = 0; i <= state.at && i < state.steps.length; i++) {
    model.now = state.steps[i].t;
    for (const chunk of state.steps[i].chunks) apply(model, chunk);
  }
  $("conversation").replaceChildren(...model.items.map((item) => renderItem(item)).filter(Boolean));
  search();
  // Tokens and cost over the turns so far.
  const turns = model.items.filter((i) => i.kind === "turn").map((i) => i.chunk);
  const sum = {};
  for (const t of turns) {
    for (const [k, v] of Object.entries(t.usage ?? {})) if (typeof v === "number") sum[k] = (sum[k] ?? 0) + v;
  }
  const cost = turns.map((t) => t.total_cost_usd).filter((c) => typeof c === "number").at(-1);
  $("totals").textContent = turns.length
    ? `${turns.length} turn${turns.length === 1 ? "" : "s"} · ${tokensOf(sum) || "no token counts"}${cost != null ? ` · $${cost.toFixed(4)}` : ""}`
    : "no turn completed yet";

  const wait = model.toolWait;
  const waitBox = $("tool-wait");
  waitBox.dataset.waiting = String(!!wait?.waiting);
  if (!wait || (!wait.waiting && wait.tool_use_ids.length === 0)) {
    waitBox.textContent = "not waiting";
  } else {
    const name = (id) => model.tools.get(id)?.name ?? id;
    const what = { permission: "permission to run", mcp_call: "the client's result of", hook: "a hook before", elicitation: "an answer for" };
    const blocked = wait.blocked_on.map((b) => `${what[b.kind] ?? b.kind.replace(/_/g, " ")} ${name(b.tool_use_id)}`);
    waitBox.textContent = (wait.waiting ? "waiting for " : "still open: ") +
      (blocked.length ? blocked.join("; ") : wait.tool_use_ids.map(name).join(", "));
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

/** Marks the items that hold the search text; says how many. */
function search() {
  const query = $("search").value.trim().toLowerCase();
  let found = 0;
  for (const item of $("conversation").children) {
    const hit = query !== "" && item.textContent.toLowerCase().includes(query);
    item.classList.toggle("match", hit);
    if (hit) found += 1;
  }
  $("search-count").textContent = query === "" ? "" : found === 0 ? "no match" : `${found} match${found === 1 ? "" : "es"}`;
  return found;
}

/** The view as one HTML file that opens offline: the cards as shown (redacted if they are). */
async function exportHtml() {
  const css = await (await fetch("console/style.css")).text();
  const title = `ccwire · ${state.name}`;
  const escape = (t) => t.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  const html = `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>${escape(title)}</title><style>${css}</style></head>\n<body><header><h1>${escape(title)}</h1></header><main><div id="conversation">${$("conversation").innerHTML}</div><aside><h2>Totals</h2><div>${escape($("totals").textContent)}</div></aside></main></body></html>\n`;
  const link = el("a", { href: URL.createObjectURL(new Blob([html], { type: "text/html" })), download: `${state.name.replace(/\.[^.]*$/, "")}.html` });
  document.body.append(link);
  link.click();
  link.remove();
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
  $("search").addEventListener("input", search);
  $("redact").addEventListener("change", (e) => {
    view.redact = e.target.checked;
    if (state.steps.length) render();
  });
  $("patterns").addEventListener("change", (e) => {
    view.patterns = e.target.value
      .split(",")
      .map((p) => p.trim())
      .filter(Boolean)
      .map((p) => new RegExp(p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "gi"));
    if (state.steps.length) render();
  });
  $("export").addEventListener("click", exportHtml);
  // ← and → step through the timeline, the space bar plays and pauses.
  document.addEventListener("keydown", (e) => {
    if (!state.steps.length || e.target.closest?.("input, select, textarea")) return;
    if (e.key === "ArrowLeft" || e.key === "ArrowRight") {
      e.preventDefault();
      stop();
      state.at = Math.max(0, Math.min(state.steps.length - 1, state.at + (e.key === "ArrowLeft" ? -1 : 1)));
      render();
    } else if (e.key === " ") {
      e.preventDefault();
      play();
    }
  });
  // A transcript named by the link: `?url=<address>` or `#file=<corpus transcript>`.
  const url = new URLSearchParams(location.search).get("url");
  const file = new URLSearchParams(location.hash.slice(1)).get("file");
  if (url) {
    const res = await fetch(url);
    if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
    load(decodeURIComponent(new URL(url, location.href).pathname.split("/").pop() || "transcript"), await res.text());
  } else if (file) {
    await loadSample(file);
  }
  document.body.dataset.ready = "true";
}

main().catch((err) => {
  document.body.dataset.error = String(err);
  $("conversation").textContent = `Could not start: ${err}`;
});
