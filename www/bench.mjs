// The pages' speed in Chromium (a benchmark, not a test): `node bench.mjs` from www/, after
// `scripts/setup.sh` and `cargo build -p ccwire-host -p ccwire-tests --bins`.
//
// 1. The inspector renders a 10,000-line transcript (x_long_session.jsonl, repeated with its
//    ids made unique): from choosing the file to its cards drawn (target ≤ 2 s).
// 2. The console with 100 live conversations (`ccwire serve --console` in front of
//    fake-claude, which answers at once): from opening the page to the 100 rows drawn
//    (target ≤ 1 s).
// It prints each time against its target as a ratio (≤ 1.00 meets it).

import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { serve } from "./serve.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "..");
process.env.CCWIRE_CLAUDE ||= join(repo, "target/debug/fake-claude");
const { Fake, Gateway, KEY, makeHome, onAny, echo } = await import("../tests/sdk/ts/test/rig.mjs");
const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";
const RUNS = 5;

/** `x_long_session.jsonl` repeated to at least `lines` lines, each copy's ids its own. */
function longTranscript(lines) {
  const one = readFileSync(join(repo, "tests/corpus/x_long_session.jsonl"), "utf8").trim().split("\n");
  const out = [];
  let offset = 0;
  for (let k = 0; out.length < lines; k++) {
    let last = 0;
    for (const line of one) {
      const entry = JSON.parse(line.replace(/\b((?:toolu|msg|req|call)_[A-Za-z0-9_]+)/g, `$1_r${k}`));
      last = Math.max(last, entry.t_ms ?? 0);
      entry.t_ms = (entry.t_ms ?? 0) + offset;
      out.push(JSON.stringify(entry));
    }
    offset += last + 1;
  }
  return out.slice(0, Math.max(lines, one.length)).join("\n") + "\n";
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

for (const path of [executablePath, process.env.CCWIRE_CLAUDE]) {
  if (!existsSync(path)) throw new Error(`missing ${path}`);
}
const www = await serve(0);
const profile = mkdtempSync(join(tmpdir(), "ccwire-bench-"));
const browser = await chromium.launchPersistentContext(profile, {
  executablePath,
  viewport: { width: 1280, height: 900 },
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
});
const home = makeHome();
let fake, gateway;
try {
  // 1. The inspector.
  const text = longTranscript(10_000);
  const lines = text.trim().split("\n").length;
  const times = [];
  let cards = 0;
  for (let run = 0; run < RUNS; run++) {
    const page = await browser.newPage();
    await page.goto(www.url);
    await page.waitForSelector("body[data-ready=true]");
    const start = Date.now();
    await page.setInputFiles("#file", { name: `long-${run}.jsonl`, mimeType: "application/x-ndjson", buffer: Buffer.from(text) });
    await page.waitForSelector(`body[data-loaded="long-${run}.jsonl"]`, { timeout: 60_000 });
    times.push(Date.now() - start);
    cards = await page.locator("#conversation > *").count();
    await page.close();
  }
  const inspector = median(times);
  console.log(`inspector: a ${lines}-line transcript (${cards} items) drawn in ${inspector} ms (median of ${RUNS}; ${times.join(", ")}) — ${(inspector / 2000).toFixed(2)}× the 2 s target`);

  // 2. The console with 100 live conversations.
  fake = await Fake.start();
  await fake.script(onAny(echo()));
  gateway = await Gateway.start(home, fake, ["--console", "--max-sessions", "200"]);
  await Promise.all(
    Array.from({ length: 100 }, (_, i) =>
      fetch(`${gateway.url}/v1/messages`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": KEY },
        body: JSON.stringify({ model: "claude-sonnet-4-5-20250929", max_tokens: 50, messages: [{ role: "user", content: `conversation ${i}` }] }),
      }).then((r) => r.json()),
    ),
  );
  const loads = [];
  for (let run = 0; run < RUNS; run++) {
    const page = await browser.newPage();
    await page.goto(`${gateway.url}/console/`);
    await page.waitForSelector("body[data-ready=true]");
    await page.fill("#key", KEY);
    await page.click("#connect button[type=submit]");
    await page.waitForSelector("body[data-connected=true]");
    // Opened again (the key kept in the tab), measured from the navigation.
    const start = Date.now();
    await page.reload();
    await page.waitForFunction(() => document.querySelectorAll("#conversations tbody tr").length >= 100, null, { timeout: 30_000 });
    loads.push(Date.now() - start);
    await page.close();
  }
  const console100 = median(loads);
  console.log(`console: 100 live conversations listed ${console100} ms after the page was opened (median of ${RUNS}; ${loads.join(", ")}) — ${(console100 / 1000).toFixed(2)}× the 1 s target`);
} finally {
  await browser.close();
  await gateway?.stop();
  await fake?.stop();
  await www.close();
  rmSync(profile, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
}
