// Records a corpus transcript: the pinned CLI against the scripted fake model, through
// `ccwire record`, then anonymised (the temporary directories it ran in become fixed names).
//
//   node tests/corpus/record.mjs tests/corpus/recipes/<name>.json
//
// A recipe is `{out, script, args, env, unset, lines}`: the transcript to write (under
// tests/corpus/), the fake model's script (tests/src/fake_anthropic.rs `Script`), the CLI's
// arguments after the stream-json ones, environment variables to add or remove, and the lines
// to send. A line `{"wait": "result"}` (or any other `type`) waits for the CLI to write a
// message of that type before the next line; stdin closes after the last line, and the
// recording ends when the CLI exits. Needs `cargo build -p ccwire-host -p ccwire-tests --bins`
// and the CLI (scripts/install-cli.sh).
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const recipe = JSON.parse(readFileSync(process.argv[2], "utf8"));
const bin = (name) => join(repo, "target/debug", name);
const work = mkdtempSync(join(tmpdir(), "ccwire-record-"));
const home = join(work, "home");
const cwd = join(work, "project");
for (const dir of [home, cwd, join(work, "tmp")]) mkdirSync(dir, { recursive: true });

// The fake model, on a port of its own.
writeFileSync(join(work, "script.json"), JSON.stringify(recipe.script ?? { rules: [] }));
const fake = spawn(bin("fake-anthropic"), ["--script", join(work, "script.json")], {
  stdio: ["ignore", "pipe", "inherit"],
});
const baseUrl = await new Promise((ok) => createInterface({ input: fake.stdout }).once("line", ok));

const env = {
  ...process.env,
  HOME: home,
  TMPDIR: join(work, "tmp"),
  ANTHROPIC_BASE_URL: baseUrl,
  ANTHROPIC_API_KEY: "dummy",
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  ...recipe.env,
};
for (const name of recipe.unset ?? []) delete env[name];
const out = join(work, "transcript.jsonl");
const cli = spawn(
  bin("ccwire"),
  [
    "record",
    "--out",
    out,
    "--claude",
    process.env.CCWIRE_CLAUDE ?? join(repo, "tests/.cli/node_modules/.bin/claude"),
    "--",
    "--output-format",
    "stream-json",
    "--input-format",
    "stream-json",
    "--verbose",
    ...(recipe.args ?? []),
  ],
  { cwd, env, stdio: ["pipe", "pipe", "inherit"] },
);
const waiting = new Map();
createInterface({ input: cli.stdout }).on("line", (line) => {
  let type;
  try {
    type = JSON.parse(line).type;
  } catch {
    return;
  }
  waiting.get(type)?.();
  waiting.delete(type);
});
const timeout = setTimeout(() => {
  console.error(`record: ${recipe.out} did not finish in 60 s`);
  cli.kill();
  fake.kill();
  process.exit(1);
}, 60_000);
for (const line of recipe.lines) {
  if (line.wait) {
    await new Promise((ok) => waiting.set(line.wait, ok));
  } else {
    cli.stdin.write(`${JSON.stringify(line)}\n`);
  }
}
cli.stdin.end();
await new Promise((ok) => cli.once("exit", ok));
clearTimeout(timeout);
fake.kill();

// Anonymised: the directories of this run become fixed names.
let text = readFileSync(out, "utf8");
for (const [from, to] of [
  [cwd, "/project"],
  [cwd.replace(/[^A-Za-z0-9]/g, "-"), "-project"],
  [home, "/home/user"],
  [join(work, "tmp"), "/tmp"],
  [work, "/work"],
  [baseUrl, "http://127.0.0.1:8080"],
]) {
  text = text.split(from).join(to);
}
writeFileSync(join(repo, "tests/corpus", recipe.out), text);
rmSync(work, { recursive: true, force: true });
console.log(`record: wrote tests/corpus/${recipe.out} (${text.split("\n").length - 1} lines)`);
