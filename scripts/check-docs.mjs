#!/usr/bin/env node
// Every doc reference in the repository resolves. Fails (exit 1) listing each offender as
// file:line when:
//
// - a relative Markdown link or image, `[text](path)`, `[text](path#anchor)` or a reference
//   definition `[name]: path`, in a Markdown file names a file or folder that is not in the
//   repository, or an anchor that no heading of the target Markdown file makes;
// - a source or doc file (.rs, .ts, .js, .mjs, .md, .toml) names a doc by its upper-case file
//   name (a bare `NAME.md`, or a path such as `docs/NAME.md`) that does not resolve: a bare name
//   resolves at the root, in docs/ or beside the file that names it, a path from the root or
//   from the file's folder;
// - the gateway's run loop (the doc of `Gateway`) leaves out an input (`handle_*`) or an output
//   (`GatewayOutput` variant) of the engine;
// - a section of BENCHMARKS.md has no command block, or a command there names a benchmark
//   program (`--bin NAME`, `node PATH`, a script path) that is not in the repository;
// - such a name is followed by a section number (`§3.3`, `§3–§5`) that no numbered heading of
//   that doc has. In a Markdown file a bare `§N` names a section of the file itself.
//
// Files are those git lists (tracked, and new ones not ignored), without dependencies, build
// output and third-party folders. No dependencies: `node scripts/check-docs.mjs`.

import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const self = path.relative(root, fileURLToPath(import.meta.url)).split(path.sep).join("/");

/** Folders whose files are not the project's own. */
const SKIPPED = [
  /(^|\/)node_modules\//,
  /(^|\/)target\//,
  /(^|\/)\.venv\//,
  /^bindings\/pkg\//,
  /(^|\/)(vendor|third_party|third-party)\//,
];

/** Upper-case `.md` names that are not docs of this repository: the CLI's own memory file. */
const NOT_REPO_DOCS = new Set(["CLAUDE.md"]);

const SOURCE = /\.(rs|ts|js|mjs|md|toml)$/;

const listed = execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
  cwd: root,
  encoding: "utf8",
  maxBuffer: 64 * 1024 * 1024,
})
  .split("\0")
  .filter((f) => f && !SKIPPED.some((re) => re.test(f)));

/** Every file in the repository (present on disk), and every folder that holds one. */
const files = new Set(listed.filter((f) => existsSync(path.join(root, f)) && statSync(path.join(root, f)).isFile()));
const folders = new Set([""]);
for (const f of files) {
  for (let dir = path.posix.dirname(f); dir !== "." && !folders.has(dir); dir = path.posix.dirname(dir)) {
    folders.add(dir);
  }
}

const offenders = [];
const offend = (file, line, message) => offenders.push(`${file}:${line}: ${message}`);
let links = 0;
let names = 0;
let sections = 0;

// ---- Markdown structure -------------------------------------------------------------------

/** The lines of a Markdown file with fenced code blocks blanked (line numbers kept). */
function proseLines(text) {
  const lines = text.split("\n");
  let fence = null;
  return lines.map((line) => {
    const open = /^\s{0,3}(`{3,}|~{3,})/.exec(line);
    if (fence) {
      if (open && open[1][0] === fence[0] && open[1].length >= fence.length && line.trim() === open[1]) {
        fence = null;
      }
      return "";
    }
    if (open) {
      fence = open[1];
      return "";
    }
    return line;
  });
}

/** A line with its inline code spans blanked (same length). */
function withoutCode(line) {
  return line.replace(/(`+)([\s\S]*?[^`])\1(?!`)/g, (m) => " ".repeat(m.length));
}

/** GitHub's anchor for a heading's text. */
function slug(text) {
  return text
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/[`*_~]/g, (c) => (c === "_" ? "_" : ""))
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M} _-]/gu, "")
    .replace(/ /g, "-");
}

const headingCache = new Map();
/** The headings of a Markdown file: their anchors, and the section numbers they start with. */
function headings(file) {
  if (headingCache.has(file)) return headingCache.get(file);
  const anchors = new Set();
  const numbers = new Set();
  const seen = new Map();
  for (const line of proseLines(readFileSync(path.join(root, file), "utf8"))) {
    const h = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!h) continue;
    let anchor = slug(h[1]);
    const n = seen.get(anchor) ?? 0;
    seen.set(anchor, n + 1);
    if (n > 0) anchor = `${anchor}-${n}`;
    anchors.add(anchor);
    const number = /^(\d+(?:\.\d+)*)\.?(\s|$)/.exec(h[1].trim());
    if (number) numbers.add(number[1]);
  }
  const result = { anchors, numbers };
  headingCache.set(file, result);
  return result;
}

// ---- resolving ----------------------------------------------------------------------------

/** A repository path from `target` as written in `file`, or null when it leaves the repository. */
function resolve(file, target) {
  const joined = target.startsWith("/")
    ? path.posix.normalize(target.slice(1))
    : path.posix.normalize(path.posix.join(path.posix.dirname(file), target));
  const clean = joined.replace(/\/+$/, "");
  return clean === "." ? "" : clean.startsWith("../") || clean === ".." ? null : clean;
}

function exists(p) {
  return p !== null && (files.has(p) || folders.has(p));
}

/** Where a named doc is: the first candidate that exists, or null. */
function findDoc(file, name) {
  const candidates = name.includes("/")
    ? [resolve("", name), resolve(file, name)]
    : [name, `docs/${name}`, resolve(file, name)];
  return candidates.find((c) => c !== null && files.has(c)) ?? null;
}

/** Checks each `§N` in `refs` (the text right after a doc's name) against `doc`'s headings. */
function checkSections(file, line, doc, refs) {
  const { numbers } = headings(doc);
  for (const n of refs.match(/\d+(?:\.\d+)*/g) ?? []) {
    sections++;
    if (!numbers.has(n)) offend(file, line, `${doc} has no section ${n}`);
  }
}

// ---- the checks ---------------------------------------------------------------------------

const LINK = /!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^()\s<>]+)>?(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/g;
const DEFINITION = /^\s{0,3}\[[^\]]+\]:\s*<?([^\s<>]+)>?/;
const DOC_NAME = /(?<![\w./-])((?:[\w.-]+\/)*([A-Z][A-Z0-9_-]*\.md))(?![\w-])((?:\s*§\d+(?:\.\d+)*(?:\s*[–-]\s*§\d+(?:\.\d+)*)?)?)/g;

function checkLink(file, line, target) {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("//")) return;
  links++;
  const hash = target.indexOf("#");
  const rawPath = hash === -1 ? target : target.slice(0, hash);
  const anchor = hash === -1 ? "" : decodeURIComponent(target.slice(hash + 1));
  let targetFile = file;
  if (rawPath !== "") {
    targetFile = resolve(file, decodeURIComponent(rawPath));
    if (!exists(targetFile)) {
      offend(file, line, `link to ${rawPath}: no such file in the repository`);
      return;
    }
  }
  if (anchor && targetFile.endsWith(".md") && files.has(targetFile)) {
    if (!headings(targetFile).anchors.has(anchor)) {
      offend(file, line, `link to ${target}: ${targetFile} has no heading #${anchor}`);
    }
  }
}

for (const file of [...files].sort()) {
  if (!SOURCE.test(file) || file === self) continue;
  const text = readFileSync(path.join(root, file), "utf8");
  const markdown = file.endsWith(".md");
  const lines = text.split("\n");
  const prose = markdown ? proseLines(text) : lines;
  lines.forEach((raw, i) => {
    const n = i + 1;
    // (a) Markdown links, outside code.
    if (markdown) {
      const line = withoutCode(prose[i]);
      for (const m of line.matchAll(LINK)) checkLink(file, n, m[1]);
      const def = DEFINITION.exec(line);
      if (def) checkLink(file, n, def[1]);
    }
    // (b) named docs, and (c) the sections named after them; code included, where docs are
    // named as often as in prose.
    for (const m of raw.matchAll(DOC_NAME)) {
      const [, name, base, refs] = m;
      if (NOT_REPO_DOCS.has(base)) continue;
      names++;
      const doc = findDoc(file, name);
      if (!doc) {
        offend(file, n, `${name} names no file in the repository`);
        continue;
      }
      if (refs.trim()) checkSections(file, n, doc, refs);
    }
    // A bare `§N` in a Markdown file names a section of the file itself.
    if (markdown) {
      const bare = raw.replace(DOC_NAME, "");
      const refs = bare.match(/§\d+(?:\.\d+)*/g);
      if (refs && headings(file).numbers.size > 0) checkSections(file, n, file, refs.join(" "));
    }
  });
}

// The gateway's run loop on `Gateway`'s page names every input (`handle_*`) and every output
// (`GatewayOutput` variant) of the engine.
{
  const engine = "core/src/gateway/engine";
  const page = readFileSync(path.join(root, engine, "mod.rs"), "utf8");
  const start = page.indexOf("/// ```text\n/// loop {");
  const loop = start < 0 ? "" : page.slice(start, page.indexOf("/// ```\n", start + 10));
  const types = readFileSync(path.join(root, engine, "types.rs"), "utf8");
  const outputs = types.slice(types.indexOf("pub enum GatewayOutput {"));
  const variants = [...outputs.slice(0, outputs.indexOf("\n}\n")).matchAll(/^    ([A-Z]\w*)\b/gm)].map((m) => m[1]);
  const inputs = new Set();
  for (const name of execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard", engine], { cwd: root, encoding: "utf8" }).split("\n")) {
    if (!name.endsWith(".rs")) continue;
    for (const m of readFileSync(path.join(root, name), "utf8").matchAll(/^    pub fn (handle_\w+)/gm)) inputs.add(m[1]);
  }
  if (!loop || variants.length === 0 || inputs.size === 0) {
    offend(`${engine}/mod.rs`, 1, "the gateway's run loop, its outputs or its inputs are not where this check reads them");
  }
  for (const v of variants) {
    if (!new RegExp(`\\b${v}\\b`).test(loop)) offend(`${engine}/mod.rs`, 1, `the run loop does not name the output ${v}`);
  }
  for (const i of inputs) {
    if (!loop.includes(`.${i}(`)) offend(`${engine}/mod.rs`, 1, `the run loop does not name the input ${i}`);
  }
}

// Every section of BENCHMARKS.md says the commands that produce its rows, and they exist.
{
  const file = "BENCHMARKS.md";
  const lines = readFileSync(path.join(root, file), "utf8").split("\n");
  let section = null;
  let commands = 0;
  let fenced = false;
  let folder = "";
  const endSection = () => {
    if (section && commands === 0) offend(file, section.line, `the section "${section.title}" says no command that produces it`);
  };
  lines.forEach((text, i) => {
    if (text.startsWith("```")) {
      fenced = !fenced;
      folder = "";
      return;
    }
    if (!fenced && text.startsWith("## ")) {
      endSection();
      section = { title: text.slice(3), line: i + 1 };
      commands = 0;
      return;
    }
    if (!fenced || !section) return;
    const command = text.replace(/#.*$/, "").trim();
    if (!command) return;
    commands++;
    const cd = command.match(/(?:^|&&\s*)cd\s+(\S+)/);
    if (cd) folder = cd[1].replace(/^\(/, "");
    for (const m of command.matchAll(/--bin\s+([\w-]+)/g)) {
      const found = ["bench", "tests", "host"].some((crate) => existsSync(path.join(root, crate, "src/bin", `${m[1]}.rs`)));
      if (!found) offend(file, i + 1, `no program ${m[1]} (src/bin/${m[1]}.rs of bench, tests or host)`);
    }
    for (const m of command.matchAll(/\bnode\s+([\w./-]+\.m?js)/g)) {
      if (!existsSync(path.join(root, folder, m[1]))) offend(file, i + 1, `no script ${path.join(folder, m[1])}`);
    }
    for (const m of command.matchAll(/(?:^|\s|&&\s*)((?:bench|scripts)\/[\w./-]+\.sh)\b/g)) {
      if (!existsSync(path.join(root, m[1]))) offend(file, i + 1, `no script ${m[1]}`);
    }
  });
  endSection();
}

if (offenders.length > 0) {
  console.error(offenders.join("\n"));
  console.error(`check-docs: ${offenders.length} doc reference(s) do not resolve`);
  process.exit(1);
}
console.log(
  `check-docs: ${links} links, ${names} named docs and ${sections} section numbers resolve (${files.size} files)`,
);
