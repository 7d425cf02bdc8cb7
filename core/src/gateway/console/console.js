// The live console: a gateway's live conversations (`GET /v1/conversations`), one of them
// watched as it happens (`GET /v1/conversations/{id}/events`, its chunks drawn as the
// inspector's cards) and its pending approvals answered inline (`POST /v1/approvals/{id}`).
// The key is kept in this tab only (sessionStorage).

import { apply, el, emptyModel, markMatches, renderItem, saveAsHtml } from "./cards.js";

const $ = (id) => document.getElementById(id);
const STATE_LABEL = {
  starting: "starting",
  running: "running",
  waiting_for_client_tool: "waiting for a client tool",
  waiting_for_approval: "waiting for approval",
  idle: "idle",
  hibernated: "hibernated",
  elsewhere: "live on another gateway",
};
// Why a conversation no CLI runs was closed (its next request resumes it).
const CLOSED_LABEL = {
  hibernated: "hibernated",
  expired: "hibernated (idle too long)",
  ended: "hibernated (its CLI ended)",
  restarted: "hibernated (the gateway restarted)",
};
const state = { gateway: "", key: "", watching: null, model: null, approvals: [], poll: null, stream: null, tick: 0, stored: [], live: new Set(), denyText: new Map() };
// The stored conversations (the session store's list) are asked for every fifth refresh, and
// at once after a live one is gone; the live ones every second (`?live=only`).
const STORED_EVERY = 5;
const isStored = (c) => c.state === "hibernated" || c.state === "elsewhere";

function headers(json = false) {
  const h = {};
  if (state.key) h.authorization = `Bearer ${state.key}`;
  if (json) h["content-type"] = "application/json";
  return h;
}

async function get(path) {
  const res = await fetch(state.gateway + path, { headers: headers() });
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return res.json();
}

/** Held client calls in words: how long each has waited, and when it is given up. */
function heldText(held) {
  if (held.length === 0) return "0";
  const now = Date.now();
  const s = (ms) => `${Math.max(0, Math.round(ms / 1000))} s`;
  return held.map((h) => `${s(now - h.since_ms)} held, given up in ${s(h.deadline_ms - now)}`).join("; ");
}

const SVG = "http://www.w3.org/2000/svg";

/** An SVG element. */
function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  for (const child of children) if (child != null) node.append(child);
  return node;
}

/** A number in few characters: 950, 1.2k, 3.4M. */
function short(n) {
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)}M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)}k`;
  return String(Math.round(n));
}

/**
 * A small bar chart of the buckets: each bucket one column of stacked `parts` (`{key, cls,
 * label}`, each part's value read by `value(bucket, key)`), its numbers in its tooltip.
 */
function bars(buckets, parts, value) {
  const width = 240, height = 40, gap = 1;
  const w = width / buckets.length;
  const totals = buckets.map((b) => parts.reduce((sum, p) => sum + (value(b, p.key) ?? 0), 0));
  const top = Math.max(1, ...totals);
  const columns = buckets.map((b, i) => {
    let y = height;
    const time = new Date(b.at_ms).toLocaleTimeString();
    const rects = parts.map((p) => {
      const v = value(b, p.key) ?? 0;
      const h = (v / top) * (height - 2);
      y -= h;
      return v > 0 ? svg("rect", { x: i * w, y, width: Math.max(0.5, w - gap), height: h, class: p.cls }) : null;
    });
    const words = parts.map((p) => `${p.label} ${short(value(b, p.key) ?? 0)}`).join(", ");
    return svg("g", {}, svg("title", {}, `${time}: ${words}`),
      svg("rect", { x: i * w, y: 0, width: w, height, class: "hover" }), ...rects);
  });
  return svg("svg", { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none", role: "img" },
    svg("line", { x1: 0, y1: height - 0.5, x2: width, y2: height - 0.5, class: "axis" }), ...columns);
}

/** One chart: its caption and its bars. */
function chart(id, caption, drawing) {
  const figure = $(id);
  figure.hidden = drawing == null;
  if (drawing == null) return;
  figure.querySelector("figcaption").textContent = caption;
  figure.querySelector("svg")?.remove();
  figure.append(drawing);
}

const sum = (buckets, f) => buckets.reduce((n, b) => n + (f(b) ?? 0), 0);
const INPUT = ["input", "cache_read", "cache_creation"];

/** The charts of the last ten minutes (`GET /v1/stats`): turns, tokens, added latency, pool. */
function drawStats(stats) {
  const b = stats.buckets;
  const now = stats.now;
  chart("chart-turns", `Turns: ${sum(b, (x) => x.turns)} in 10 min · ${now.conversations} live, ${now.in_flight} answering`,
    bars(b, [{ key: "turns", cls: "turns", label: "turns" }], (x, k) => x[k]));
  const tokens = (x, k) => (k === "in" ? INPUT.reduce((n, kind) => n + (x.tokens[kind] ?? 0), 0) : x.tokens.output ?? 0);
  chart("chart-tokens", `Tokens: ${short(sum(b, (x) => tokens(x, "in")))} in · ${short(sum(b, (x) => tokens(x, "out")))} out`,
    bars(b, [{ key: "in", cls: "tokens-in", label: "in" }, { key: "out", cls: "tokens-out", label: "out" }], tokens));
  const timed = b.filter((x) => x.added_ms_avg != null);
  const max = Math.max(0, ...timed.map((x) => x.added_ms_max));
  const responses = sum(timed, (x) => x.added_count);
  chart("chart-added", timed.length
    ? `Added latency: ${Math.round(sum(timed, (x) => x.added_ms_sum) / Math.max(1, responses))} ms avg · ${max} ms max`
    : "Added latency: no response yet",
  bars(b, [{ key: "added_ms_avg", cls: "added", label: "ms avg" }], (x, k) => x[k]));
  chart("chart-pool", now.pool
    ? `Warm pool: ${now.pool.ready}/${now.pool.size} ready · ${sum(b, (x) => x.pool_hits)} hits, ${sum(b, (x) => x.pool_misses)} misses`
    : "", now.pool
    ? bars(b, [{ key: "pool_hits", cls: "hits", label: "hits" }, { key: "pool_misses", cls: "misses", label: "misses" }], (x, k) => x[k])
    : null);
}

const WINDOW_LABEL = {
  five_hour: "five-hour",
  seven_day: "weekly",
  seven_day_opus: "weekly (Opus)",
  seven_day_sonnet: "weekly (Sonnet)",
  seven_day_overage_included: "weekly with extra usage",
  overage: "extra usage",
};

/** A time in words: its hour today, else its day. */
function when(unixSeconds) {
  const at = new Date(unixSeconds * 1000);
  const today = at.toDateString() === new Date().toDateString();
  return today ? at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) : at.toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
}

/**
 * Usage (`GET /v1/usage`): each key's turns, tokens and cost over the last 30 days (the
 * caller's own, or with the admin key every key's), and the subscription's rate-limit
 * windows as the CLIs last reported them.
 */
function drawUsage(usage) {
  $("usage-range").textContent = `${usage.from} to ${usage.to} (UTC)`;
  const keys = new Map();
  for (const row of usage.data) {
    const k = keys.get(row.key) ?? { key: row.key, turns: 0, input: 0, output: 0, cost: 0 };
    k.turns += row.turns;
    k.input += row.input_tokens + row.cache_read_input_tokens + row.cache_creation_input_tokens;
    k.output += row.output_tokens;
    k.cost += row.cost_usd;
    keys.set(row.key, k);
  }
  const sorted = [...keys.values()].sort((a, b) => b.cost - a.cost || b.turns - a.turns);
  $("usage-keys").tBodies[0].replaceChildren(...sorted.map((k) =>
    el("tr", { "data-key": k.key },
      el("td", {}, el("code", {}, k.key)),
      el("td", {}, String(k.turns)),
      el("td", { title: `${k.input} tokens` }, short(k.input)),
      el("td", { title: `${k.output} tokens` }, short(k.output)),
      el("td", {}, `$${k.cost.toFixed(4)}`))));
  $("usage-none").hidden = sorted.length > 0;
  const current = usage.windows.filter((w) => !w.has_reset);
  const account = current.find((w) => w.kind === "unified");
  const windows = current.filter((w) => w.kind !== "unified").map((w) => {
    const label = WINDOW_LABEL[w.kind] ?? w.kind;
    const used = w.utilization != null ? `${Math.round(w.utilization * 100)}%` : "";
    const parts = [used, w.resets_at ? `resets ${when(w.resets_at)}` : "", w.status ?? ""].filter(Boolean);
    return el("span", { class: "window", "data-kind": w.kind, title: `${w.credential}, reported ${new Date(w.observed_ms).toLocaleString()}` },
      `${label}:`,
      w.utilization != null ? el("meter", { min: 0, max: 1, low: 0.5, high: 0.8, optimum: 0, value: Math.min(1, w.utilization) }) : null,
      el("span", { class: w.status ?? "" }, parts.join(" · ")));
  });
  if (account) {
    const limited = account.claim ? ` (limited by the ${WINDOW_LABEL[account.claim] ?? account.claim} window)` : "";
    windows.unshift(el("span", { class: "window", "data-kind": "unified" }, "account: ",
      el("span", { class: account.status ?? "" }, `${account.status ?? "unknown"}${limited}`)));
  }
  $("windows").replaceChildren(...(windows.length ? windows
    : [el("span", {}, "No rate-limit window reported (the CLI reports them when it is signed in with a Claude subscription).")]));
}

/** Usage, every few refreshes (it is read from the session store). */
async function refreshUsage() {
  try {
    drawUsage(await get("/v1/usage"));
    $("usage-error").hidden = true;
  } catch (err) {
    $("usage-error").hidden = false;
    $("usage-error").textContent = String(err.message ?? err);
  }
}

/** The conversations, the pending approvals and the charts, every second. */
async function refresh() {
  try {
    const full = state.tick++ % STORED_EVERY === 0;
    const [list, approvals, stats] = await Promise.all([
      get(full ? "/v1/conversations" : "/v1/conversations?live=only"),
      get("/v1/approvals"),
      get("/v1/stats"),
    ]);
    drawStats(stats);
    if (full) refreshUsage();
    const live = list.data.filter((c) => !isStored(c));
    const ids = new Set(live.map((c) => c.id));
    if (full) {
      state.stored = list.data.filter(isStored);
      state.storedError = list.stored_error;
    } else if ([...state.live].some((id) => !ids.has(id))) {
      // A conversation's CLI is gone: the store's list is asked for at the next refresh.
      state.tick = 0;
    }
    state.live = ids;
    list.data = [...live, ...state.stored.filter((c) => !ids.has(c.id))];
    list.stored_error = state.storedError;
    const asked = (list) => list.map((a) => a.id).join(" ");
    const changed = asked(approvals.data ?? []) !== asked(state.approvals);
    state.approvals = approvals.data ?? [];
    $("connection").textContent = "connected";
    document.body.dataset.connected = "true";
    const stored = isStored;
    // The row that has the keyboard's focus keeps it.
    const focused = document.activeElement?.closest?.("#conversations tbody tr")?.dataset.id;
    const open = (c) => watch(c.id, stored(c) ? c.tenant : null);
    const rows = list.data.map((c) =>
      el("tr", {
        "data-id": c.id,
        "data-state": c.state,
        tabIndex: 0,
        onclick: () => open(c),
        onkeydown: (e) => {
          if (e.key === "Enter" || e.key === " ") {
            e.preventDefault();
            open(c);
          }
        },
      },
        el("td", {}, el("code", {}, c.id.slice(0, 8)), " ", el("span", { class: "tenant" }, c.node ? `${c.tenant} · on ${c.node}` : c.tenant)),
        el("td", {}, c.model ?? "—"),
        el("td", { class: `state ${c.state}`, title: c.last_active_ms ? `last active ${new Date(c.last_active_ms).toLocaleString()}` : "" },
          (c.closed && CLOSED_LABEL[c.closed]) || STATE_LABEL[c.state] || c.state),
        el("td", { class: "held" }, stored(c) ? "—" : heldText(c.held ?? [])),
        el("td", {}, stored(c) ? "—" : String(c.approvals.length))));
    $("conversations").tBodies[0].replaceChildren(...rows);
    if (focused) rows.find((r) => r.dataset.id === focused)?.focus();
    $("none").hidden = rows.length > 0;
    $("stored-error").hidden = !list.stored_error;
    $("stored-error").textContent = list.stored_error ?? "";
    // The cards are drawn again only when the approvals waiting change (their buttons).
    if (state.model && changed) draw();
  } catch (err) {
    $("connection").textContent = String(err.message ?? err);
    document.body.dataset.connected = "false";
  }
}

/** The answer to an approval, then a refresh. */
async function answer(id, body) {
  const res = await fetch(`${state.gateway}/v1/approvals/${id}`, {
    method: "POST",
    headers: headers(true),
    body: JSON.stringify(body),
  });
  if (!res.ok) $("connection").textContent = `answer: ${res.status} ${await res.text()}`;
  await refresh();
}

const WHERE = {
  localSettings: "this project's local settings",
  projectSettings: "this project's settings",
  userSettings: "the user's settings",
  session: "this session",
  cliArg: "this run",
};

/** A permission update the CLI suggests, in words: what "Always allow" would apply. */
export function suggestionText(update) {
  const where = WHERE[update.destination] ?? update.destination ?? "";
  const rule = (r) => (r.ruleContent ? `${r.toolName}(${r.ruleContent})` : r.toolName);
  switch (update.type) {
    case "addRules":
    case "replaceRules":
      return `${update.behavior ?? "allow"} ${(update.rules ?? []).map(rule).join(", ")} in ${where}`;
    case "removeRules":
      return `stop ${update.behavior ?? "allowing"} ${(update.rules ?? []).map(rule).join(", ")} in ${where}`;
    case "setMode":
      return `switch to the ${update.mode} permission mode for ${where}`;
    case "addDirectories":
      return `allow work in ${(update.directories ?? []).join(", ")} for ${where}`;
    case "removeDirectories":
      return `stop work in ${(update.directories ?? []).join(", ")} for ${where}`;
    default:
      return JSON.stringify(update);
  }
}

/** The approval buttons of a tool card waiting for one, with what "Always allow" applies. */
function decorate(tool, card) {
  if (!tool.permission || tool.permission.outcome) return;
  const approval = state.approvals.find((a) => a.tool_use_id === tool.id && a.conversation === state.watching);
  if (!approval) return;
  const suggested = Array.isArray(approval.suggestions) ? approval.suggestions.map(suggestionText) : [];
  // What the person typed survives the cards being drawn again.
  const message = el("input", {
    type: "text",
    placeholder: "why (for the model)",
    class: "deny-message",
    value: state.denyText.get(approval.id) ?? "",
    oninput: (e) => state.denyText.set(approval.id, e.target.value),
  });
  const always = el("button", {
    type: "button",
    class: "always",
    disabled: suggested.length === 0,
    title: suggested.length ? `Allow, and ${suggested.join("; ")}` : "The CLI suggested no rule to remember",
    onclick: () => answer(approval.id, { behavior: "allow", remember: true }),
  }, "Always allow");
  const buttons = el("div", { class: "approval", "data-approval": approval.id },
    el("button", { type: "button", class: "allow", onclick: () => answer(approval.id, { behavior: "allow" }) }, "Allow"),
    always,
    message,
    el("button", { type: "button", class: "deny", onclick: () => answer(approval.id, { behavior: "deny", ...(message.value ? { message: message.value } : {}) }) }, "Deny"));
  card.append(buttons);
  if (suggested.length) {
    card.append(el("div", { class: "suggestions" }, `Always allow would ${suggested.join("; ")}.`));
  }
}

/** Marks the cards that hold the search text; says how many. */
function search() {
  return markMatches($("conversation"), $("search").value, $("search-count"));
}

function draw() {
  // The message being typed keeps the focus and its caret.
  const typing = document.activeElement?.classList?.contains("deny-message")
    ? { approval: document.activeElement.closest("[data-approval]")?.dataset.approval, at: document.activeElement.selectionStart }
    : null;
  const items = state.model.items.map((item) => renderItem(item, decorate)).filter(Boolean);
  $("conversation").replaceChildren(...items);
  search();
  if (typing?.approval) {
    const input = $("conversation").querySelector(`[data-approval="${CSS.escape(typing.approval)}"] .deny-message`);
    input?.focus();
    input?.setSelectionRange(typing.at, typing.at);
  }
}

/**
 * Watches a conversation: its stream's chunks folded into the model as they come. One no CLI
 * runs (`tenant` given) is read from the session store: its transcript, then the stream ends.
 */
async function watch(id, tenant = null) {
  state.stream?.abort();
  const controller = new AbortController();
  state.stream = controller;
  state.watching = id;
  state.model = emptyModel();
  // The link to this view: `#conversation=<id>` (and its tenant for a stored one).
  const link = new URLSearchParams({ conversation: id, ...(tenant ? { tenant } : {}) });
  history.replaceState(null, "", `#${link}`);
  $("watching").textContent = `Conversation ${id}`;
  $("export").hidden = false;
  $("search").hidden = false;
  document.body.dataset.watching = id;
  draw();
  let res;
  try {
    const query = tenant ? `?tenant=${encodeURIComponent(tenant)}` : "";
    res = await fetch(`${state.gateway}/v1/conversations/${encodeURIComponent(id)}/events${query}`, { headers: headers(), signal: controller.signal });
  } catch {
    return;
  }
  if (!res.ok) {
    $("watching").textContent = `Conversation ${id}: ${res.status}`;
    return;
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    let next;
    try {
      next = await reader.read();
    } catch {
      return;
    }
    if (next.done) break;
    buffer += next.value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = /^event: (.*)$/m.exec(frame)?.[1];
      const data = frame.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
      if (state.watching !== id) return;
      if (event === "chunk") apply(state.model, JSON.parse(data));
      if (event === "closed") {
        $("watching").textContent = tenant
          ? `Conversation ${id} (no CLI runs it: its next request resumes it)`
          : `Conversation ${id} (ended)`;
      }
    }
    if (state.model.items.some((i) => i.kind === "tool" && i.permission && !i.permission.outcome)) {
      // A permission request: its approval is listed by a refresh.
      await refresh();
    }
    draw();
  }
}

/** The watched conversation's cards as one HTML file that opens offline (no buttons, no script). */
function exportHtml() {
  const cards = $("conversation").cloneNode(true);
  for (const live of cards.querySelectorAll(".approval, .suggestions")) live.remove();
  const filename = `conversation-${(state.watching ?? "").slice(0, 8)}.html`;
  return saveAsHtml(filename, $("watching").textContent, "style.css", `<div id="conversation">${cards.innerHTML}</div>`);
}

function connect(event) {
  event?.preventDefault();
  state.gateway = $("gateway").value.replace(/\/+$/, "");
  state.key = $("key").value;
  sessionStorage.setItem("ccwire.gateway", state.gateway);
  sessionStorage.setItem("ccwire.key", state.key);
  clearInterval(state.poll);
  Object.assign(state, { tick: 0, stored: [], live: new Set() });
  state.poll = setInterval(refresh, 1000);
  refresh();
}

$("connect").addEventListener("submit", connect);
$("export").addEventListener("click", exportHtml);
$("search").addEventListener("input", search);
// The gateway named by the link, the one this tab used, or the one that serves this page.
$("gateway").value =
  new URLSearchParams(location.search).get("gateway") ?? sessionStorage.getItem("ccwire.gateway") ?? location.origin;
$("key").value = sessionStorage.getItem("ccwire.key") ?? "";
if ($("key").value || location.pathname.startsWith("/console")) {
  connect();
  // A link to a conversation opens it.
  const linked = new URLSearchParams(location.hash.slice(1));
  if (linked.get("conversation")) watch(linked.get("conversation"), linked.get("tenant"));
}
document.body.dataset.ready = "true";
