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

test("the page logged no errors", () => {
  assert.deepEqual(consoleErrors, []);
});
