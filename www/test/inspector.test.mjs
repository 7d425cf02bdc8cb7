// The inspector in a real browser: Chromium (the system's, `CHROMIUM` or /usr/bin/chromium)
// driven by playwright-core loads the page, opens corpus transcripts and checks what it shows.
// Screenshots go to www/test-artifacts/.

import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { serve } from "../serve.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const artifacts = join(here, "..", "test-artifacts");
const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";

let server;
let browser;
let page;
let profile;
const consoleErrors = [];

before(async () => {
  assert.ok(
    existsSync(executablePath),
    `no Chromium at ${executablePath} (scripts/setup.sh installs it; or set CHROMIUM)`,
  );
  assert.ok(
    existsSync(join(here, "../../bindings/pkg/ccwire_wasm_bg.wasm")),
    "the npm package is not built: run `npm run build` in bindings/",
  );
  mkdirSync(artifacts, { recursive: true });
  server = await serve(0);
  profile = mkdtempSync(join(tmpdir(), "ccwire-chromium-"));
  // A persistent context on a fresh profile directory: the --user-data-dir Chromium needs.
  browser = await chromium.launchPersistentContext(profile, {
    executablePath,
    viewport: { width: 1280, height: 900 },
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  page = browser.pages()[0] ?? (await browser.newPage());
  page.on("console", (msg) => msg.type() === "error" && consoleErrors.push(msg.text()));
  page.on("pageerror", (err) => consoleErrors.push(String(err)));
  await page.goto(server.url);
  await page.waitForSelector("body[data-ready=true]", { timeout: 15_000 });
});

after(async () => {
  await browser?.close();
  await server?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

async function open(name) {
  await page.click(`#samples button[data-name="${name}"]`);
  await page.waitForSelector(`body[data-loaded="${name}"]`);
}

const card = (id) => page.locator(`.tool-card[data-tool-id="${id}"]`);

test("an allowed Bash call shows as a green success card with its input, result and text", async () => {
  await open("b_bash_allow.jsonl");
  const cards = page.locator(".tool-card");
  assert.equal(await cards.count(), 1);
  const bash = cards.first();
  assert.equal(await bash.getAttribute("data-status"), "success");
  assert.match(await bash.locator(".name").innerText(), /Bash/);
  assert.match(await bash.locator(".badge").innerText(), /success/i);
  assert.match(await bash.locator("pre.input").innerText(), /echo hi/);
  assert.match(await bash.locator(".permission").innerText(), /allow \(host\)/);
  const color = await bash.evaluate((e) => getComputedStyle(e).borderLeftColor);
  assert.equal(color, "rgb(43, 138, 62)");
  assert.match(await page.locator(".user").first().innerText(), /echo hi/);
  assert.ok((await page.locator(".assistant").count()) > 0, "assistant text is shown");
  assert.match(await page.locator(".turn").last().innerText(), /turn complete/);
  assert.equal(await page.locator("#tool-wait").getAttribute("data-waiting"), "false");
  await page.screenshot({ path: join(artifacts, "inspector-bash-allow.png"), fullPage: true });
});

test("scrubbing the timeline walks the card through pending, approval, running and success", async () => {
  await open("b_bash_allow.jsonl");
  const steps = Number(await page.locator("#timeline").getAttribute("max"));
  const colors = {};
  let approvalStep = -1;
  for (let i = 0; i <= steps; i++) {
    await page.locator("#timeline").fill(String(i));
    const cards = page.locator(".tool-card");
    if ((await cards.count()) === 0) continue;
    const status = await cards.first().getAttribute("data-status");
    colors[status] ??= await cards.first().evaluate((e) => getComputedStyle(e).borderLeftColor);
    if (status === "awaiting_approval" && approvalStep < 0) approvalStep = i;
  }
  assert.deepEqual(colors, {
    pending: "rgb(224, 176, 0)",
    awaiting_approval: "rgb(217, 72, 15)",
    running: "rgb(28, 126, 214)",
    success: "rgb(43, 138, 62)",
  });

  await page.locator("#timeline").fill(String(approvalStep));
  const bash = page.locator(".tool-card").first();
  assert.match(await bash.locator(".badge").innerText(), /awaiting approval/i);
  assert.match(await bash.locator(".permission").innerText(), /awaiting approval/);
  assert.equal(await page.locator("#tool-wait").getAttribute("data-waiting"), "true");
  assert.match(await page.locator("#tool-wait").innerText(), /permission/);
  await page.screenshot({ path: join(artifacts, "inspector-awaiting-approval.png"), fullPage: true });
});

test("a sub-agent's calls are nested under the Agent call", async () => {
  await open("x_subagent.jsonl");
  assert.ok((await page.locator(".tool-card.sub").count()) > 0, "nested tool cards");
  const statuses = await page.locator(".tool-card").evaluateAll((cs) => cs.map((c) => c.dataset.status));
  assert.ok(statuses.every((s) => ["success", "error", "cancelled"].includes(s)), `statuses: ${statuses}`);
  await page.screenshot({ path: join(artifacts, "inspector-subagent.png"), fullPage: true });
});

test("a denied call is a red error card", async () => {
  await open("c_bash_deny_interrupt.jsonl");
  const statuses = await page.locator(".tool-card").evaluateAll((cs) => cs.map((c) => c.dataset.status));
  assert.ok(statuses.includes("error"), `statuses: ${statuses}`);
  const denied = page.locator('.tool-card[data-status="error"]').first();
  assert.match(await denied.locator(".permission").innerText(), /deny/);
  assert.equal(await denied.evaluate((e) => getComputedStyle(e).borderLeftColor), "rgb(201, 42, 42)");
});

test("thinking is shown and playback at recorded speed runs from the start", async () => {
  await open("x_thinking.jsonl");
  assert.ok((await page.locator(".thinking").count()) > 0, "a thinking block is shown");
  await page.selectOption("#speed", "20");
  await page.locator("#timeline").fill("0");
  await page.click("#play");
  await page.waitForFunction(
    () => document.getElementById("timeline").value === document.getElementById("timeline").max,
    null,
    { timeout: 30_000 },
  );
  assert.ok((await page.locator(".assistant").count()) > 0);
});

test("a transcript opened from disk is shown", async () => {
  const file = join(here, "../../tests/corpus/d_sdk_mcp.jsonl");
  await page.setInputFiles("#file", {
    name: "my-session.jsonl",
    mimeType: "application/x-ndjson",
    buffer: readFileSync(file),
  });
  await page.waitForSelector('body[data-loaded="my-session.jsonl"]');
  assert.match(await page.locator("#title").innerText(), /my-session/);
  const statuses = await page.locator(".tool-card").evaluateAll((cs) => cs.map((c) => c.dataset.status));
  assert.ok(statuses.length > 0 && statuses.every((s) => s === "success"), `statuses: ${statuses}`);
  assert.ok((await page.locator(".tool-card .note").allInnerTexts()).some((t) => /MCP call/.test(t)));
  await page.screenshot({ path: join(artifacts, "inspector-mcp.png"), fullPage: true });
});

test("search marks the items that hold the text and counts them", async () => {
  await open("b_bash_allow.jsonl");
  await page.fill("#search", "echo hi");
  const count = await page.locator("#search-count").innerText();
  assert.match(count, /^\d+ match(es)?$/, count);
  assert.ok((await page.locator(".item.match").count()) > 0);
  assert.ok((await page.locator(".tool-card.match").count()) === 1, "the Bash card holds it");
  await page.screenshot({ path: join(artifacts, "inspector-search.png"), fullPage: true });
  await page.fill("#search", "nothing-like-this");
  assert.equal(await page.locator("#search-count").innerText(), "no match");
  assert.equal(await page.locator(".item.match").count(), 0);
  await page.fill("#search", "");
});

const SECRET = "sk-ant-api03-SECRETSECRETSECRET0123456789";
const EMAIL = "someone@example.com";

async function openWithSecrets() {
  const text = readFileSync(join(here, "../../tests/corpus/b_bash_allow.jsonl"), "utf8")
    .replaceAll("echo hi", `echo ${SECRET} ${EMAIL} project-zebra`);
  await page.setInputFiles("#file", { name: "secrets.jsonl", mimeType: "application/x-ndjson", buffer: Buffer.from(text) });
  await page.waitForSelector('body[data-loaded="secrets.jsonl"]');
}

test("secrets are redacted before they are shown, and so are the user's own patterns", async () => {
  await openWithSecrets();
  let shown = await page.locator("#conversation").innerText();
  assert.ok(!shown.includes(SECRET) && !shown.includes(EMAIL), shown);
  assert.match(shown, /\[redacted\]/);
  assert.match(shown, /project-zebra/);
  await page.fill("#patterns", "project-zebra");
  await page.locator("#patterns").press("Enter");
  await page.locator("#patterns").blur();
  shown = await page.locator("#conversation").innerText();
  assert.ok(!shown.includes("project-zebra"), shown);
  await page.screenshot({ path: join(artifacts, "inspector-redacted.png"), fullPage: true });
  await page.uncheck("#redact");
  shown = await page.locator("#conversation").innerText();
  assert.ok(shown.includes(SECRET) && shown.includes("project-zebra"), "shown when asked");
  await page.check("#redact");
  await page.fill("#patterns", "");
  await page.locator("#patterns").blur();
});

test("the export is one HTML file that opens offline, redacted", async () => {
  await openWithSecrets();
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#export")]);
  assert.equal(download.suggestedFilename(), "secrets.html");
  const path = join(artifacts, "export.html");
  await download.saveAs(path);
  const html = readFileSync(path, "utf8");
  assert.ok(html.includes("tool-card") && html.includes("<style>"), "cards and their style");
  assert.ok(!/<script|<link|src=/i.test(html), "nothing to load from elsewhere");
  assert.ok(!html.includes(SECRET) && !html.includes(EMAIL), "redacted");
  // Opened on its own, offline, it shows the same cards.
  const offline = await browser.newPage();
  await offline.goto(`file://${path}`);
  assert.equal(await offline.locator(".tool-card").count(), 1);
  assert.equal(await offline.locator(".tool-card").getAttribute("data-status"), "success");
  await offline.screenshot({ path: join(artifacts, "inspector-export.png"), fullPage: true });
  await offline.close();
});

test("a link opens a transcript (?url= or #file=), and the arrow keys step through it", async () => {
  const other = await browser.newPage();
  other.on("pageerror", (err) => consoleErrors.push(String(err)));
  await other.goto(`${server.url}?url=${encodeURIComponent(`${server.url}corpus/x_thinking.jsonl`)}`);
  await other.waitForSelector('body[data-loaded="x_thinking.jsonl"]');
  await other.goto(`${server.url}#file=b_bash_allow.jsonl`);
  await other.reload();
  await other.waitForSelector('body[data-loaded="b_bash_allow.jsonl"]');
  const last = Number(await other.locator("#timeline").getAttribute("max"));
  assert.equal(Number(await other.locator("#timeline").inputValue()), last);
  await other.locator("body").press("ArrowLeft");
  await other.locator("body").press("ArrowLeft");
  assert.equal(Number(await other.locator("#timeline").inputValue()), last - 2);
  await other.locator("body").press("ArrowRight");
  assert.equal(Number(await other.locator("#timeline").inputValue()), last - 1);
  await other.close();
});

test("a tool card says how long the tool took, and the totals count the turn's tokens", async () => {
  await open("b_bash_allow.jsonl");
  assert.match(await page.locator(".tool-card .duration").first().innerText(), /^took \d+\.\d s$/);
  assert.match(await page.locator("#totals").innerText(), /^1 turn · [\d,]+ in · [\d,]+ out/);
});

/** The tool calls of a corpus transcript, read from the file itself: for each, in order of
 * first appearance, its name, the line (0-based) where it starts, and its start and result times. */
function toolCallsOf(name) {
  const lines = readFileSync(join(here, "../../tests/corpus", name), "utf8").split("\n").filter((l) => l.trim() !== "");
  const calls = new Map();
  lines.forEach((line, step) => {
    const t = JSON.parse(line).t_ms;
    for (const m of line.matchAll(/"type": "tool_use", "id": "([^"]+)", "name": "([^"]+)"/g)) {
      if (!calls.has(m[1])) calls.set(m[1], { id: m[1], name: m[2], step, start: t, end: null, endStep: null });
    }
    if (!line.includes('"tool_result"')) return;
    for (const m of line.matchAll(/"tool_use_id": "([^"]+)"/g)) {
      const call = calls.get(m[1]);
      if (call && call.end === null) Object.assign(call, { end: t, endStep: step });
    }
  });
  return { calls: [...calls.values()], lines: lines.length, t0: JSON.parse(lines[0]).t_ms, t1: JSON.parse(lines.at(-1)).t_ms };
}

/** Each bar of the tool timeline: its tool, status, place and size in pixels (relative to its track). */
const timelineBars = () =>
  page.locator("#tool-timeline .tl-bar").evaluateAll((bars) =>
    bars.map((b) => {
      const box = b.getBoundingClientRect();
      const track = b.parentElement.getBoundingClientRect();
      return {
        id: b.dataset.toolId, name: b.dataset.name, status: b.dataset.status, className: b.className, title: b.title,
        step: Number(b.dataset.step), sub: b.closest(".tl-row").classList.contains("tl-sub"),
        label: b.closest(".tl-row").querySelector(".tl-name").textContent,
        x: box.left - track.left, width: box.width, trackWidth: track.width, color: getComputedStyle(b).backgroundColor,
      };
    }));

test("the tool timeline draws each tool call on the transcript's time axis, and a click on one goes to its start", async () => {
  const name = "x_long_session.jsonl";
  const { calls, lines, t0, t1 } = toolCallsOf(name);
  assert.ok(calls.length >= 5 && calls.every((c) => c.end !== null), `the transcript's tools: ${JSON.stringify(calls)}`);
  await open(name);
  assert.match(await page.locator("#tl-summary").innerText(), new RegExp(`^${calls.length} tool calls`));

  // At the end: one bar per call, in order of start, each where and as long as the tool ran.
  let bars = await timelineBars();
  assert.deepEqual(bars.map((b) => [b.id, b.name, b.step]), calls.map((c) => [c.id, c.name, c.step]));
  for (let i = 0; i < bars.length; i++) {
    const [bar, call] = [bars[i], calls[i]];
    assert.ok(bar.width > 0, `bar ${i} has a width: ${bar.width}`);
    if (i > 0) assert.ok(bar.x >= bars[i - 1].x, `bar ${i} starts no earlier than bar ${i - 1}: ${bar.x} < ${bars[i - 1].x}`);
    const x = ((call.start - t0) / (t1 - t0)) * bar.trackWidth;
    const width = Math.max(3, ((call.end - call.start) / (t1 - t0)) * bar.trackWidth);
    assert.ok(Math.abs(bar.x - x) < 1.5, `bar ${i} starts at ${bar.x}px, the tool at ${x}px`);
    assert.ok(Math.abs(bar.width - width) < 1.5, `bar ${i} is ${bar.width}px long, the tool ${width}px`);
    assert.equal(bar.status, "success");
    assert.equal(bar.color, "rgb(43, 138, 62)");
    assert.ok(bar.title.startsWith(`${call.name} · success · took ${call.end - call.start} ms`), bar.title);
    assert.ok(!bar.sub && bar.label === call.name, bar.label);
  }
  const markerX = async () => page.locator("#tool-timeline .tl-now").evaluate((m) => m.getBoundingClientRect().left);
  const trackOf = async (i) => page.locator("#tool-timeline .tl-bar").nth(i).evaluate((b) => b.parentElement.getBoundingClientRect().right);
  assert.ok(Math.abs((await markerX()) - (await trackOf(0))) < 2, "the marker is at the end");

  // A click on the fourth call's bar: the scrubber goes to the line where it started.
  const k = 3;
  await page.locator("#tool-timeline .tl-bar").nth(k).click();
  assert.equal(Number(await page.locator("#timeline").inputValue()), calls[k].step);
  assert.equal(
    await page.locator("#clock").innerText(),
    `${(calls[k].start / 1000).toFixed(1)} s / ${(t1 / 1000).toFixed(1)} s · line ${calls[k].step + 1}/${lines}`,
  );
  assert.equal(await page.locator(`.tool-card[data-tool-id="${calls[k].id}"]`).count(), 1, "its card is drawn");
  assert.equal(await page.locator(`.tool-card[data-tool-id="${calls[k + 1].id}"]`).count(), 0, "the next one's is not yet");
  bars = await timelineBars();
  assert.equal(bars.length, calls.length, "the later calls stay on the timeline");
  // The calls started before: done, or (one run in parallel) still open up to this line.
  const done = calls.slice(0, k).map((c) => c.endStep <= calls[k].step);
  assert.ok(done.includes(true) && done.includes(false), `both kinds before the call: ${done}`);
  for (let i = 0; i <= k; i++) {
    if (i < k && done[i]) {
      assert.equal(bars[i].status, "success", `bar ${i}`);
      assert.ok(!bars[i].className.includes("open"), bars[i].className);
    } else {
      assert.ok(bars[i].className.includes("open") && !["success", "later"].includes(bars[i].status), `bar ${i}: ${bars[i].className}`);
      assert.match(bars[i].title, /so far/);
      const width = Math.max(3, ((calls[k].start - calls[i].start) / (t1 - t0)) * bars[i].trackWidth);
      assert.ok(Math.abs(bars[i].width - width) < 1.5, `open bar ${i} reaches this line: ${bars[i].width}px, not ${width}px`);
    }
  }
  assert.deepEqual(bars.slice(k + 1).map((b) => b.status), Array(calls.length - k - 1).fill("later"));
  const barX = await page.locator("#tool-timeline .tl-bar").nth(k).evaluate((b) => b.getBoundingClientRect().left);
  assert.ok(Math.abs((await markerX()) - barX) < 2, `the marker (${await markerX()}px) is at the call's start (${barX}px)`);
  await page.locator("#tool-timeline").scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(artifacts, "inspector-timeline.png") });

  // And back to the first one.
  await page.locator("#tool-timeline .tl-bar").first().click();
  assert.equal(Number(await page.locator("#timeline").inputValue()), calls[0].step);
  assert.match(await page.locator("#clock").innerText(), new RegExp(` · line ${calls[0].step + 1}/${lines}$`));
});

test("the tool timeline marks a sub-agent's calls, within its Agent call", async () => {
  const { calls } = toolCallsOf("x_subagent.jsonl");
  await open("x_subagent.jsonl");
  const bars = await timelineBars();
  assert.deepEqual(bars.map((b) => b.name), ["Agent", "Bash"]);
  assert.deepEqual(bars.map((b) => b.id), calls.map((c) => c.id));
  const [agent, bash] = bars;
  assert.ok(!agent.sub && bash.sub, "the Bash row is a sub-agent's");
  assert.equal(bash.label, "↳ Bash");
  assert.match(bash.title, /in a sub-agent/);
  assert.ok(bash.x >= agent.x && bash.x + bash.width <= agent.x + agent.width + 0.5, "the Bash call runs within the Agent call");
  assert.match(await page.locator("#tl-summary").innerText(), /^2 tool calls, 1 in a sub-agent/);
});

test("the page logged no errors", () => {
  assert.deepEqual(consoleErrors, []);
});
