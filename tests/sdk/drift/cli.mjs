// Lists the frame kinds the pinned Claude Code CLI declares that ccwire does not type.
//
//   node tests/sdk/drift/cli.mjs                 # the CLI under tests/.cli (or CCWIRE_CLAUDE)
//   node tests/sdk/drift/cli.mjs path/to/bundle  # another build of the CLI
//
// The CLI carries the schemas of the messages it writes on stdout (zod objects, minified:
// `X=p(()=>u({type:P("system"),subtype:P("session_title_changed"),title:r(),…,session_id:r()})`).
// This reads every top-level message schema (one with a `session_id`) from the CLI's bundle,
// builds a line of each `type` (and `system` `subtype`), and runs it through `ccwire replay`
// (CCWIRE_BIN, default target/debug/ccwire). A line that comes out `unknown`, or as nothing, is
// a kind ccwire does not type: it prints each and what it became and exits 1 when any is. A
// line that comes out as an `invalid_message` error is typed (the sample lacks the fields the
// chunk needs). Every transcript of tests/corpus is replayed too: none may give `unknown`. And
// the check checks itself: a bundle declaring two kinds ccwire does not type must be caught.
import { execFileSync } from "node:child_process";
import {
  existsSync,
  fstatSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  realpathSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../../..");
const target = process.argv.slice(2).find((a) => !a.startsWith("--"));
const bundle = realpathSync(
  target ?? process.env.CCWIRE_CLAUDE ?? join(repo, "tests/.cli/node_modules/.bin/claude"),
);

/** `type` (and `type/subtype`) of every message schema the bundle defines. */
function declaredKinds(file) {
  const fd = openSync(file, "r");
  const size = fstatSync(fd).size;
  const step = 32 << 20;
  const overlap = 16384;
  const buf = Buffer.alloc(step + overlap);
  // A schema definition: `<name>=<lazy>(()=><object>({type:<literal>("…")[,subtype:<literal>("…")]`.
  const definition =
    /=[\w$]{1,3}\(\(\)=>[\w$]{1,3}\(\{type:[\w$]{1,3}\("([a-z_]+)"\)(?:,subtype:[\w$]{1,3}\("([a-z_]+)"\))?/g;
  const kinds = new Set();
  let kept = 0; // bytes at the start of `buf` carried over from the last read
  for (let pos = 0; pos < size; ) {
    const n = readSync(fd, buf, kept, step, pos);
    const text = buf.toString("latin1", 0, kept + n);
    const last = pos + n >= size;
    const hits = [...text.matchAll(definition)];
    for (const [i, hit] of hits.entries()) {
      // A definition starting in the carried-over bytes was read last time; one starting in
      // the overlap at the end is read next time, whole.
      if (pos > 0 && hit.index < kept) continue;
      if (!last && hit.index >= text.length - overlap) continue;
      const end = Math.min(hits[i + 1]?.index ?? text.length, hit.index + 8000);
      if (!text.slice(hit.index, end).includes("session_id:")) continue;
      kinds.add(hit[2] ? `${hit[1]}/${hit[2]}` : hit[1]);
    }
    pos += n;
    const tail = Math.min(overlap, kept + n);
    buf.copy(buf, 0, kept + n - tail, kept + n);
    kept = tail;
  }
  return [...kinds].sort();
}

const ccwire = process.env.CCWIRE_BIN ?? join(repo, "target/debug/ccwire");
if (!existsSync(ccwire)) {
  console.error(`drift: ${ccwire} is missing (cargo build -p ccwire-host)`);
  process.exit(2);
}
const replay = (input) =>
  execFileSync(ccwire, ["replay", "-"], { input, maxBuffer: 1 << 28 })
    .toString()
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l));

/** What each declared kind becomes in ccwire: `typed` unless `unknown` or nothing. */
function check(file) {
  const kinds = declaredKinds(file);
  // Fewer than this means the pattern no longer fits the bundle's minified schemas.
  if (kinds.length < 40 || !kinds.includes("assistant")) {
    console.error(`drift: found ${kinds.length} message schemas in ${file}; the pattern needs updating`);
    process.exit(2);
  }
  return kinds.map((key) => {
    const [type, subtype] = key.split("/");
    const line = { type, ...(subtype && { subtype }), uuid: "u1", session_id: "s1" };
    const chunks = replay(`${JSON.stringify(line)}\n`);
    const typed =
      chunks.length > 0 &&
      !chunks.some((c) => c.type === "unknown" || (c.type === "error" && c.kind !== "invalid_message"));
    return { key, typed, outcome: chunks.map((c) => (c.type === "error" ? `error ${c.kind}` : c.type)).join(", ") };
  });
}

const rows = check(bundle);

// The check itself: a CLI that declares kinds ccwire does not type (a bundle of the pinned
// CLI's schemas and two more) must come out red, naming exactly those.
const made = ["system/brand_new_notice", "brand_new_event"];
const fixture = join(mkdtempSync(join(tmpdir(), "ccwire-drift-")), "cli.js");
writeFileSync(
  fixture,
  [...rows.map((r) => r.key), ...made]
    .map((key, i) => {
      const [type, subtype] = key.split("/");
      const sub = subtype ? `,subtype:P("${subtype}")` : "";
      return `var s${i}=p(()=>u({type:P("${type}")${sub},uuid:g(),session_id:r()}));`;
    })
    .join("\n"),
);
const caught = check(fixture)
  .filter((r) => !r.typed)
  .map((r) => r.key);
const selfCheck = {
  key: "(a CLI declaring kinds ccwire does not type)",
  typed: JSON.stringify(caught.sort()) === JSON.stringify([...made].sort()),
  outcome: `caught ${caught.join(", ") || "nothing"}`,
};

const corpusDir = join(repo, "tests/corpus");
const corpus = readdirSync(corpusDir)
  .filter((f) => f.endsWith(".jsonl"))
  .map((f) => {
    const unknown = replay(readFileSync(join(corpusDir, f))).filter((c) => c.type === "unknown");
    return { key: `tests/corpus/${f}`, typed: unknown.length === 0, outcome: unknown.length ? `${unknown.length} unknown` : "typed" };
  });

const all = [...rows, ...corpus, selfCheck];
const untyped = all.filter((r) => !r.typed);
for (const r of all) {
  console.log(`${(r.typed ? "ok" : "UNTYPED").padEnd(8)} ${r.key.padEnd(44)} → ${r.outcome || "(nothing)"}`);
}
console.log(
  `\n${rows.length} frame kinds declared in ${bundle}, ${corpus.length} corpus transcripts; ${untyped.length} not typed by ccwire`,
);
process.exit(untyped.length ? 1 : 0);
