// The live console in a real browser (Chromium driven by playwright-core): `ccwire serve
// --console --approvals http --enable-tool Bash` in front of the real Claude Code CLI and the
// scripted fake model (the SDK tests' rig), the console page served by serve.mjs on another
// origin the gateway allows. Screenshots go to www/test-artifacts/.

import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { serve } from "../serve.mjs";
import {
  CCWIRE_BIN,
  CLAUDE,
  FAKE_ANTHROPIC_BIN,
  Fake,
  Gateway,
  KEY,
  makeHome,
  onAny,
  onPrompt,
  onToolResult,
  echo,
} from "../../tests/sdk/ts/test/rig.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const artifacts = join(here, "..", "test-artifacts");
const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";
const OTHER_KEY = "console-other-key";
const ADMIN_KEY = "console-admin-key";

const WINDOW_HEADERS = [
  ["anthropic-ratelimit-unified-status", "allowed_warning"],
  ["anthropic-ratelimit-unified-representative-claim", "five_hour"],
  ["anthropic-ratelimit-unified-5h-utilization", "0.8"],
  ["anthropic-ratelimit-unified-5h-reset", "1893456000"],
  ["anthropic-ratelimit-unified-5h-surpassed-threshold", "0.75"],
];

let www, fake, gateway, home, browser, profile;
const pageErrors = [];

before(async () => {
  for (const path of [executablePath, CCWIRE_BIN, FAKE_ANTHROPIC_BIN, CLAUDE]) {
    assert.ok(existsSync(path), `missing ${path} (scripts/setup.sh; cargo build -p ccwire-host -p ccwire-tests --bins)`);
  }
  mkdirSync(artifacts, { recursive: true });
  www = await serve(0);
  const origin = new URL(www.url).origin;
  home = makeHome();
  fake = await Fake.start();
  // Every answer says how much of the subscription's windows is used (the CLI, signed in with
  // a subscription's token, reports it; the console shows it).
  const windows = (rule) => ({ ...rule, headers: WINDOW_HEADERS });
  await fake.script(
    windows(onToolResult(echo())),
    windows(onPrompt("CONSOLE-ALLOW", {
      kind: "tool_use",
      calls: [{ name: "Bash", input: { command: "touch allowed-from-the-console.txt", description: "Create a file" } }],
    })),
    windows(onPrompt("CONSOLE-DENY", {
      kind: "tool_use",
      calls: [{ name: "Bash", input: { command: "touch denied-from-the-console.txt", description: "Create a file" } }],
    })),
    windows(onPrompt("CONSOLE-ADMIN", {
      kind: "tool_use",
      calls: [{ name: "Bash", input: { command: "touch approved-by-the-operator.txt", description: "Create a file" } }],
    })),
    windows(onPrompt("CONSOLE-SELF", {
      kind: "tool_use",
      calls: [{ name: "Bash", input: { command: "touch approved-on-the-gateway-s-page.txt", description: "Create a file" } }],
    })),
    windows(onAny(echo())),
  );
  const adminKeyFile = join(home, "admin-key");
  writeFileSync(adminKeyFile, `${ADMIN_KEY}\n`, { mode: 0o600 });
  gateway = await Gateway.start(home, fake, [
    "--admin-key-file", adminKeyFile,
    "--console",
    "--approvals", "http",
    "--enable-tool", "Bash",
    "--api-key", OTHER_KEY,
    "--allow-origin", origin,
    // Idle conversations are hibernated (their CLIs closed, kept in the session store).
    "--hibernate-after", "1",
  ], { ANTHROPIC_API_KEY: null, CLAUDE_CODE_OAUTH_TOKEN: "dummy" });
  profile = mkdtempSync(join(tmpdir(), "ccwire-chromium-"));
  browser = await chromium.launchPersistentContext(profile, {
    executablePath,
    viewport: { width: 1280, height: 900 },
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-sync"],
  });
});

after(async () => {
  await browser?.close();
  await gateway?.stop();
  await fake?.stop();
  await www?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
  if (home) rmSync(home, { recursive: true, force: true });
  assert.deepEqual(pageErrors, [], "the page logged errors");
});

/** A console page connected to the gateway with `key`. */
async function consolePage(key) {
  const page = await browser.newPage();
  page.on("pageerror", (err) => pageErrors.push(String(err)));
  await page.goto(`${www.url}console/console.html`);
  await page.waitForSelector("body[data-ready=true]");
  await page.fill("#gateway", gateway.url);
  await page.fill("#key", key);
  await page.click("#connect button[type=submit]");
  await page.waitForSelector("body[data-connected=true]", { timeout: 10_000 });
  return page;
}

/** A Messages request of the first key, answered in the background. */
function ask(prompt) {
  return fetch(`${gateway.url}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": KEY },
    body: JSON.stringify({
      model: "claude-sonnet-4-5-20250929",
      max_tokens: 100,
      messages: [{ role: "user", content: prompt }],
    }),
  }).then((r) => r.json());
}

test("a live conversation's Bash call is approved with a click and runs", async () => {
  const page = await consolePage(KEY);
  const answer = ask("CONSOLE-ALLOW please");
  const row = page.locator("#conversations tbody tr[data-state=waiting_for_approval]");
  await row.first().waitFor({ timeout: 30_000 });
  await row.first().click();
  const card = page.locator(".tool-card", { hasText: "touch allowed-from-the-console.txt" });
  await card.locator(".approval button.allow").waitFor({ timeout: 15_000 });
  // What "Always allow" would remember: the CLI's suggested rule, in words.
  assert.match(await card.locator(".suggestions").textContent(), /^Always allow would allow Bash\(.+\) in .+\.$/);
  assert.ok(await card.locator(".approval button.always").isEnabled());
  await page.screenshot({ path: join(artifacts, "console-approval.png"), fullPage: true });
  await card.locator(".approval button.allow").click();
  const body = await answer;
  assert.equal(body.stop_reason, "end_turn", JSON.stringify(body));
  assert.ok(existsSync(join(home, "work", "allowed-from-the-console.txt")), "the allowed command ran");
  await page.locator(".tool-card[data-status=success]", { hasText: "touch allowed-from-the-console.txt" }).waitFor({ timeout: 15_000 });
  // The charts of the last ten minutes count the turn and its tokens; the warm pool is the
  // operator's, not shown to a tenant's key.
  await page.locator("#chart-turns figcaption", { hasText: /^Turns: [1-9]\d* in 10 min/ }).waitFor({ timeout: 5_000 });
  assert.ok((await page.locator("#chart-turns svg rect.turns").count()) >= 1, "a bar for the turn");
  await page.locator("#chart-tokens figcaption", { hasText: /^Tokens: [1-9][\d.]*k? in · [1-9][\d.]*k? out$/ }).waitFor({ timeout: 5_000 });
  assert.match(await page.locator("#chart-added figcaption").textContent(), /^Added latency: \d+ ms avg · \d+ ms max$/);
  assert.ok(await page.locator("#chart-pool").isHidden(), "no pool chart for a tenant");
  // Usage: the key's own turns and cost, and the subscription's five-hour window.
  const mine = page.locator("#usage-keys tbody tr");
  await mine.first().waitFor({ timeout: 15_000 });
  assert.equal(await mine.count(), 1, "the key's own row only");
  const cells = await mine.first().locator("td").allTextContents();
  assert.match(cells[0], /^k[0-9a-f]{24}$/);
  assert.ok(Number(cells[1]) >= 1, `turns: ${cells}`);
  assert.match(cells[4], /^\$\d+\.\d{4}$/);
  const window = page.locator("#windows .window[data-kind=five_hour]");
  await window.waitFor({ timeout: 5_000 });
  assert.equal(await window.locator("meter").evaluate((m) => m.value), 0.8);
  assert.match(await window.textContent(), /five-hour:.*80% · resets .* · allowed_warning/);
  assert.match(await page.locator("#windows .window[data-kind=unified]").textContent(), /allowed_warning \(limited by the five-hour window\)/);
  await page.screenshot({ path: join(artifacts, "console-allowed.png"), fullPage: true });
  await page.close();
});

test("a denial with a message reaches the model and nothing runs", async () => {
  const page = await consolePage(KEY);
  const answer = ask("CONSOLE-DENY please");
  const row = page.locator("#conversations tbody tr[data-state=waiting_for_approval]");
  await row.first().waitFor({ timeout: 30_000 });
  await row.first().click();
  const card = page.locator(".tool-card", { hasText: "touch denied-from-the-console.txt" });
  await card.locator(".approval .deny-message").waitFor({ timeout: 15_000 });
  // Typed as a person types (over several of the page's refreshes): nothing is lost.
  await card.locator(".approval .deny-message").pressSequentially("Not from the console.", { delay: 120 });
  await card.locator(".approval button.deny").click();
  const body = await answer;
  assert.equal(body.stop_reason, "end_turn", JSON.stringify(body));
  assert.match(JSON.stringify(body.content), /Not from the console\./);
  assert.ok(!existsSync(join(home, "work", "denied-from-the-console.txt")), "the denied command did not run");
  await page.close();
});

test("another key sees none of the first key's conversations", async () => {
  const page = await consolePage(OTHER_KEY);
  await page.locator("#none").waitFor({ state: "visible" });
  assert.equal(await page.locator("#conversations tbody tr").count(), 0);
  await page.screenshot({ path: join(artifacts, "console-other-key.png"), fullPage: true });
  await page.close();
});

test("the admin key sees every key's conversations and approves another key's call", async () => {
  const page = await consolePage(ADMIN_KEY);
  const answer = ask("CONSOLE-ADMIN please");
  const row = page.locator("#conversations tbody tr[data-state=waiting_for_approval]");
  await row.first().waitFor({ timeout: 30_000 });
  // The tenant's id names whose it is.
  assert.match(await row.first().locator(".tenant").textContent(), /^k[0-9a-f]{24}/);
  await row.first().click();
  const card = page.locator(".tool-card", { hasText: "touch approved-by-the-operator.txt" });
  await card.locator(".approval button.allow").waitFor({ timeout: 15_000 });
  await page.screenshot({ path: join(artifacts, "console-admin.png"), fullPage: true });
  await card.locator(".approval button.allow").click();
  const body = await answer;
  assert.equal(body.stop_reason, "end_turn", JSON.stringify(body));
  assert.ok(existsSync(join(home, "work", "approved-by-the-operator.txt")), "the approved command ran");
  await page.locator(".tool-card[data-status=success]", { hasText: "touch approved-by-the-operator.txt" }).waitFor({ timeout: 15_000 });
  await page.close();
});

test("a page of a foreign origin cannot read the console's data", async () => {
  const page = await browser.newPage();
  // The same server under another name: another origin, which the gateway does not allow.
  const foreign = www.url.replace("127.0.0.1", "localhost");
  await page.goto(`${foreign}console/console.html`);
  const result = await page.evaluate(async ([url, key]) => {
    try {
      const res = await fetch(`${url}/v1/conversations`, { headers: { authorization: `Bearer ${key}` } });
      return `read: ${res.status}`;
    } catch (err) {
      return `refused: ${err.name}`;
    }
  }, [gateway.url, KEY]);
  assert.match(result, /^refused/, result);
  await page.close();
});

test("ccwire serve serves the console itself: open it, approve with a click", async () => {
  // Framed by no one, its own files only.
  const head = await fetch(`${gateway.url}/console/`);
  assert.equal(head.status, 200);
  assert.match(head.headers.get("content-security-policy"), /frame-ancestors 'none'/);
  assert.equal((await fetch(`${gateway.url}/console`, { redirect: "manual" })).headers.get("location"), "/console/");

  const page = await browser.newPage();
  page.on("pageerror", (err) => pageErrors.push(String(err)));
  await page.goto(`${gateway.url}/console`);
  await page.waitForSelector("body[data-ready=true]");
  assert.equal(await page.inputValue("#gateway"), new URL(gateway.url).origin);
  await page.fill("#key", KEY);
  await page.click("#connect button[type=submit]");
  await page.waitForSelector("body[data-connected=true]", { timeout: 10_000 });
  const answer = ask("CONSOLE-SELF please");
  const row = page.locator("#conversations tbody tr[data-state=waiting_for_approval]");
  await row.first().waitFor({ timeout: 30_000 });
  await row.first().click();
  const card = page.locator(".tool-card", { hasText: "touch approved-on-the-gateway-s-page.txt" });
  await card.locator(".approval button.allow").click({ timeout: 15_000 });
  const body = await answer;
  assert.equal(body.stop_reason, "end_turn", JSON.stringify(body));
  assert.ok(existsSync(join(home, "work", "approved-on-the-gateway-s-page.txt")), "the allowed command ran");
  await page.locator(".tool-card[data-status=success]", { hasText: "touch approved-on-the-gateway-s-page.txt" }).waitFor({ timeout: 15_000 });
  await page.screenshot({ path: join(artifacts, "console-served-by-the-gateway.png"), fullPage: true });
  // The conversation as one HTML file that opens offline (the page's policy lets it save).
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#export")]);
  assert.match(download.suggestedFilename(), /^conversation-[0-9a-f]{8}\.html$/);
  const saved = join(artifacts, "console-export.html");
  await download.saveAs(saved);
  const html = readFileSync(saved, "utf8");
  assert.ok(html.includes("touch approved-on-the-gateway-s-page.txt") && html.includes("<style>"), "its cards and their style");
  assert.ok(!/<script|<link|src=|<button|<input/i.test(html), "nothing to load, nothing to press");
  const offline = await browser.newPage();
  await offline.goto(`file://${saved}`);
  assert.equal(await offline.locator(".tool-card[data-status=success]").count(), 1);
  await offline.close();
  await page.close();
});

test("a hibernated conversation is listed and its stored transcript shown", async () => {
  // The page is open while the conversation runs, then its CLI is hibernated (after 1 s idle).
  const page = await consolePage(KEY);
  // The earlier tests' conversations hibernated first, so the one live row is this one.
  const live = page.locator("#conversations tbody tr:not([data-state=hibernated])");
  for (let i = 0; i < 100 && (await live.count()) > 0; i++) await page.waitForTimeout(100);
  assert.equal(await live.count(), 0, "the earlier conversations are hibernated");
  const answer = ask("CONSOLE-SLEEPY remember the word KIWI");
  await live.first().waitFor({ timeout: 10_000 });
  const id = await live.first().getAttribute("data-id");
  const body = await answer;
  assert.equal(body.stop_reason, "end_turn", JSON.stringify(body));
  const row = page.locator(`#conversations tbody tr[data-id="${id}"][data-state=hibernated]`);
  await row.waitFor({ timeout: 10_000 });
  assert.equal(await page.locator(`#conversations tbody tr[data-id="${id}"]`).count(), 1, "listed once");
  assert.equal(await row.locator(".state").textContent(), "hibernated");
  // Opened from the keyboard: the row keeps the focus across the list's refreshes.
  await row.focus();
  await page.waitForTimeout(2_500);
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.id), id);
  await page.keyboard.press("Enter");
  await page.locator("#conversation", { hasText: "CONSOLE-SLEEPY remember the word KIWI" }).waitFor({ timeout: 10_000 });
  await page.locator("#watching", { hasText: "its next request resumes it" }).waitFor({ timeout: 10_000 });
  // Search marks the cards that hold the text.
  await page.fill("#search", "kiwi");
  const matches = page.locator("#conversation > .match");
  const found = await matches.count();
  assert.ok(found >= 1, "the prompt's card at least");
  assert.equal(await page.locator("#search-count").textContent(), found === 1 ? "1 match" : `${found} matches`);
  assert.match(await matches.first().textContent(), /kiwi/i);
  await page.fill("#search", "no-such-text-anywhere");
  assert.equal(await page.locator("#search-count").textContent(), "no match");
  assert.equal(await page.locator("#conversation > .match").count(), 0);
  await page.fill("#search", "");
  await page.screenshot({ path: join(artifacts, "console-hibernated.png"), fullPage: true });
  // The page's address links to the conversation: reloaded (the key kept in the tab), it
  // opens it again.
  assert.match(page.url(), new RegExp(`#conversation=${id}&tenant=k[0-9a-f]+$`));
  await page.reload();
  await page.locator("#conversation", { hasText: "CONSOLE-SLEEPY remember the word KIWI" }).waitFor({ timeout: 10_000 });
  await page.close();
});
