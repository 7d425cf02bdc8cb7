// Shared pieces of the package tests: the corpus, its golden chunk files and the native CLI.

import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const corpusDir = join(root, "tests", "corpus");
export const snapshotDir = join(root, "core", "tests", "snapshots");

/** The corpus transcripts, sorted by name. */
export function corpus() {
  return readdirSync(corpusDir)
    .filter((f) => f.endsWith(".jsonl"))
    .sort()
    .map((name) => ({ name, bytes: readFileSync(join(corpusDir, name)) }));
}

/**
 * The golden chunk lines of a transcript: the body of its insta snapshot (a header between
 * `---` lines, then one chunk JSON per line).
 */
export function golden(name) {
  const text = readFileSync(join(snapshotDir, `golden__replay@${name}.snap`), "utf8");
  const lines = text.split("\n");
  if (lines[0] !== "---") throw new Error(`${name}: the snapshot does not start with ---`);
  const end = lines.indexOf("---", 1);
  if (end < 0) throw new Error(`${name}: the snapshot header does not end`);
  return lines.slice(end + 1).filter((l) => l.length > 0);
}

/** A small deterministic PRNG (mulberry32), so a failing split is reproducible. */
export function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The first index where two line arrays differ, or -1. */
export function firstDifference(a, b) {
  const n = Math.max(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return -1;
}

let native;

/**
 * The native `ccwire` executable, to compare the package with: `$CCWIRE_BIN` when set, otherwise
 * built here (`cargo build -p ccwire-host`, into `$CARGO_TARGET_DIR` or `target/`).
 */
export function nativeCcwire() {
  if (native) return native;
  if (process.env.CCWIRE_BIN) {
    native = resolve(process.env.CCWIRE_BIN);
    if (!existsSync(native)) throw new Error(`CCWIRE_BIN names ${native}, which does not exist`);
    return native;
  }
  execFileSync("cargo", ["build", "--quiet", "-p", "ccwire-host", "--bin", "ccwire"], {
    cwd: root,
    stdio: ["ignore", "inherit", "inherit"],
  });
  const target = process.env.CARGO_TARGET_DIR ? resolve(root, process.env.CARGO_TARGET_DIR) : join(root, "target");
  native = join(target, "debug", process.platform === "win32" ? "ccwire.exe" : "ccwire");
  return native;
}
