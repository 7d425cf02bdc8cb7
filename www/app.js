// The transcript inspector: a transcript is replayed line by line through the package's
// Replayer; each line is one step of the timeline with the chunks it produced and its t_ms.
// The view at step k is the chunks of steps 0..k applied to an empty conversation.

import { init, Replayer } from "./ccwire/js/web.js";
import { STATUS_LABEL, apply, el, emptyModel, renderItem } from "./cards.js";

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
    for (const chunk of state.steps[i].chunks) apply(model, chunk);
  }
  $("conversation").replaceChildren(...model.items.map((item) => renderItem(item)).filter(Boolean));

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
