// Builds the npm package: the core compiled to wasm32 with the workspace's size-tuned
// `wasm-release` profile, wasm-bindgen's `web` glue into pkg/, and a size report. Two modules:
// ccwire_wasm (the engines, the package's main entry; held to the size budget) and
// ccwire_conversation (request canonicalization and history hash, `ccwire/conversation`).
//
// `npm run build` (needs the wasm32-unknown-unknown target and the wasm-bindgen CLI that
// scripts/install-wasm-bindgen.sh installs).

import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const bindings = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const root = resolve(bindings, "..");
const pkg = join(bindings, "pkg");
const BUDGET_GZIP = 210 * 1024;

function run(cmd, args, env = {}) {
  execFileSync(cmd, args, { cwd: root, stdio: "inherit", env: { ...process.env, ...env } });
}

const targetDir = process.env.CARGO_TARGET_DIR
  ? resolve(root, process.env.CARGO_TARGET_DIR)
  : join(root, "target");
// The features rustc enables by default for wasm32-unknown-unknown (and Node 20 supports).
const features = [
  "--enable-bulk-memory", "--enable-mutable-globals", "--enable-nontrapping-float-to-int",
  "--enable-sign-ext", "--enable-multivalue", "--enable-reference-types",
];
const kb = (n) => `${(n / 1024).toFixed(1)} KiB`;

rmSync(pkg, { recursive: true, force: true });
mkdirSync(pkg, { recursive: true });

/** Builds one module of the crate (with one feature) into pkg/<name>.js and pkg/<name>_bg.wasm. */
function buildModule(feature, name) {
  // wasm-bindgen reads the `target_features` section to know which wasm features the module
  // uses, so this build keeps custom sections; wasm-bindgen drops the ones it does not need.
  run(
    "cargo",
    [
      "build", "--quiet", "-p", "ccwire-wasm", "--target", "wasm32-unknown-unknown",
      "--profile", "wasm-release", "--no-default-features", "--features", feature,
    ],
    { CARGO_PROFILE_WASM_RELEASE_STRIP: "false" },
  );
  const module = join(targetDir, "wasm32-unknown-unknown", "wasm-release", "ccwire_wasm.wasm");
  run("wasm-bindgen", [
    "--target", "web",
    "--weak-refs",
    "--no-typescript",
    "--out-dir", pkg,
    "--out-name", name,
    module,
  ]);
  // Names and producer data are for debugging only. (An -Oz pass of wasm-opt makes this module
  // smaller raw but larger gzipped, so only the stripping pass runs.)
  const wasmFile = join(pkg, `${name}_bg.wasm`);
  const wasmOpt = join(bindings, "node_modules", ".bin", "wasm-opt");
  run(wasmOpt, [...features, "--strip-debug", "--strip-producers", wasmFile, "-o", wasmFile]);
  const raw = statSync(wasmFile).size;
  const gzip = gzipSync(readFileSync(wasmFile), { level: 9 }).length;
  console.log(`${name}_bg.wasm: ${raw} bytes (${kb(raw)}) raw, ${gzip} bytes (${kb(gzip)}) gzipped`);
  return gzip;
}

const main = buildModule("session", "ccwire_wasm");
buildModule("conversation", "ccwire_conversation");
if (main > BUDGET_GZIP) {
  console.error(`the main module is over the ${kb(BUDGET_GZIP)} gzipped budget by ${kb(main - BUDGET_GZIP)}`);
  process.exit(1);
}
