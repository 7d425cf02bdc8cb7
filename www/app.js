// The transcript inspector: a transcript is replayed line by line through the package's
// Replayer; each line is one step of the timeline with the chunks it produced and its t_ms.
// The view at step k is the chunks of steps 0..k applied to an empty conversation.

import { init, Replayer } from "./ccwire/js/web.js";
import { STATUS_LABEL, apply, el, emptyModel, escapeHtml, markMatches, renderItem, saveAsHtml, tokensOf, view } from "./console/cards.js";

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
const state = { steps: [], at: 0, timer: null, name: "", toolTimeline: null };

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
  // The transcript's tools are those of its last line's model, the one load() renders first.
  if (!state.toolTimeline && state.at === state.steps.length - 1) state.toolTimeline = buildToolTimeline(model);
  drawToolTimeline(model, step?.t ?? 0);
  $("timeline").value = String(state.at);
  $("clock").textContent = `${((step?.t ?? 0) / 1000).toFixed(1)} s / ${(end / 1000).toFixed(1)} s · line ${state.at + 1}/${state.steps.length}`;
}

const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;
/** A tool's duration in words: `40 ms` under a second, else `1.2 s`. */
const took = (ms) => (ms < 1000 ? `${Math.round(ms)} ms` : seconds(ms));
const DONE = new Set(["success", "error", "cancelled"]);

/**
 * The tool timeline's rows, one per tool call of the transcript (`final`: the model at its last
 * line), ordered by start, on an axis from the first line's time to the last's. Built once per
 * transcript; `drawToolTimeline` places the bars as they were at the current line.
 */
function buildToolTimeline(final) {
  const steps = state.steps;
  const t0 = steps[0]?.t ?? 0;
  const t1 = Math.max(t0, steps[steps.length - 1]?.t ?? 0);
  // The line where each tool call first appears: where a click on its bar goes.
  const startStep = new Map();
  steps.forEach((s, i) => {
    for (const c of s.chunks) if (c.type === "tool_use" && !startStep.has(c.id)) startStep.set(c.id, i);
  });
  const depthOf = (tool) => {
    let depth = 0;
    for (let p = tool.parent, seen = 0; p != null && seen < 16; seen++) {
      depth += 1;
      p = final.tools.get(p)?.parent ?? null;
    }
    return depth;
  };
  const tools = [...final.tools.values()]
    .map((tool) => ({ tool, step: startStep.get(tool.id) ?? 0 }))
    .sort((a, b) => (a.tool.startedMs ?? t0) - (b.tool.startedMs ?? t0) || a.step - b.step);
  const rows = tools.map(({ tool, step }) => {
    const depth = depthOf(tool);
    const name = tool.name + (tool.server ? " (server)" : "");
    const bar = el("button", { type: "button", class: "tl-bar", "data-step": String(step), "data-tool-id": tool.id, "data-name": tool.name });
    const dur = el("span", { class: "tl-dur" });
    const row = el("div", { class: `tl-row${depth ? " tl-sub" : ""}`, "data-step": String(step), "data-tool-id": tool.id },
      el("span", { class: "tl-name", title: `${name}${depth ? " (in a sub-agent)" : ""} · line ${step + 1}` }, depth ? "↳ " : null, name),
      el("div", { class: "tl-track" }, bar),
      dur);
    row.style.setProperty("--depth", String(depth));
    return { id: tool.id, name, depth, step, final: tool, row, bar, dur };
  });
  const span = Math.max(1, t1 - t0);
  const ticks = el("div", { class: "tl-track tl-ticks" },
    ...[0, 0.25, 0.5, 0.75, 1].map((f) => {
      const tick = el("span", { class: "tl-tick" }, `${((t0 + f * (t1 - t0)) / 1000).toFixed(t1 - t0 < 5000 ? 2 : 1)} s`);
      tick.style.left = `${f * 100}%`;
      tick.style.transform = `translateX(-${f * 100}%)`;
      return tick;
    }));
  const marker = el("div", { class: "tl-now" });
  const sub = rows.filter((r) => r.depth > 0).length;
  $("tl-summary").textContent = rows.length === 0
    ? "no tool calls in this transcript"
    : `${rows.length} tool call${rows.length === 1 ? "" : "s"}${sub ? `, ${sub} in a sub-agent` : ""} · click one to go to the line where it started`;
  $("tl-rows").replaceChildren(
    ...(rows.length ? [el("div", { class: "tl-row tl-axis" }, el("span", { class: "tl-name" }), ticks, el("span", { class: "tl-dur" }))] : []),
    ...rows.map((r) => r.row),
    ...(rows.length ? [el("div", { class: "tl-marks" }, marker)] : []));
  $("tool-timeline").hidden = false;
  return { t0, span, rows, marker };
}

/** Places the timeline's bars as they were at the current line (`model`, at `now` ms). */
function drawToolTimeline(model, now) {
  const tl = state.toolTimeline;
  if (!tl) return;
  const at = (ms) => Math.min(1, Math.max(0, (ms - tl.t0) / tl.span)) * 100;
  for (const r of tl.rows) {
    const tool = model.tools.get(r.id);
    const start = (tool ?? r.final).startedMs ?? tl.t0;
    const where = r.depth ? " · in a sub-agent" : "";
    let end, cls, title, dur;
    if (!tool) {
      // Not started yet at this line: drawn faintly where it will run.
      end = r.final.endedMs ?? tl.t0 + tl.span;
      cls = "later";
      title = `${r.name}${where} · starts at ${seconds(start)}, after this line`;
      dur = "";
    } else if (tool.endedMs != null) {
      end = tool.endedMs;
      cls = `status-${tool.status}`;
      title = `${r.name}${where} · ${STATUS_LABEL[tool.status] ?? tool.status} · took ${took(end - start)} (from ${seconds(start)} to ${seconds(end)})`;
      dur = took(end - start);
    } else {
      // No result yet: it runs up to this line.
      end = Math.max(start, now);
      const still = !DONE.has(tool.status);
      cls = `status-${tool.status}${still ? " open" : " no-result"}`;
      title = `${r.name}${where} · ${STATUS_LABEL[tool.status] ?? tool.status} · ${still ? `${took(end - start)} so far` : "no result"} (since ${seconds(start)})`;
      dur = still ? `${took(end - start)}…` : "no result";
    }
    const left = at(start);
    r.bar.className = `tl-bar ${cls}`;
    r.bar.dataset.status = tool ? tool.status : "later";
    r.bar.style.left = `${left}%`;
    r.bar.style.width = `${Math.max(0, at(end) - left)}%`;
    r.bar.title = title;
    r.dur.textContent = dur;
  }
  tl.marker.style.left = `${at(now)}%`;
  tl.marker.title = `this line: ${seconds(now)}`;
}

/** Marks the cards that hold the search text; says how many. */
function search() {
  return markMatches($("conversation"), $("search").value, $("search-count"));
}

/** The view as one HTML file that opens offline: the cards as shown (redacted if they are). */
function exportHtml() {
  const main = `<div id="conversation">${$("conversation").innerHTML}</div><aside><h2>Totals</h2><div>${escapeHtml($("totals").textContent)}</div></aside>`;
  return saveAsHtml(`${state.name.replace(/\.[^.]*$/, "")}.html`, `ccwire · ${state.name}`, "console/style.css", main);
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
  state.toolTimeline = null;
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
  // A click on a tool's bar (or its name) goes to the line where the tool started.
  $("tool-timeline").addEventListener("click", (e) => {
    const row = e.target.closest?.("[data-step]");
    if (!row || !state.steps.length) return;
    stop();
    state.at = Math.max(0, Math.min(state.steps.length - 1, Number(row.dataset.step)));
    render();
  });
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
