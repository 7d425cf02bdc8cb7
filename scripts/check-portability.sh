#!/usr/bin/env bash
# The portability gate: ccwire-core builds for wasm32-unknown-unknown and uses no clock, sleep,
# threads, filesystem, network or ambient randomness.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  rustup target add wasm32-unknown-unknown
fi
cargo build --quiet -p ccwire-core --target wasm32-unknown-unknown --release

forbidden='Instant::now|SystemTime::now|thread::sleep|thread::spawn|tokio::|std::fs::|std::net::|rand::|getrandom'
if grep -rnE "$forbidden" core/src | grep -vE ':[0-9]+:\s*//'; then
  echo "check-portability: core/ must stay sans-IO (no clock, sleep, threads, IO or randomness)" >&2
  exit 1
fi
if grep -nE '^(tokio|wasm-bindgen|getrandom|rand)\b' core/Cargo.toml; then
  echo "check-portability: core/ must not depend on tokio, wasm-bindgen or randomness" >&2
  exit 1
fi
# A module built from the core must import nothing at all (no `env`, no WASI).
cargo build --quiet -p ccwire-wasm-entry --target wasm32-unknown-unknown --profile wasm-release
module=target/wasm32-unknown-unknown/wasm-release/ccwire_wasm_entry.wasm
node -e '
  const bytes = require("fs").readFileSync(process.argv[1]);
  const imports = WebAssembly.Module.imports(new WebAssembly.Module(bytes));
  if (imports.length) {
    console.error("check-portability: the core wasm module imports", JSON.stringify(imports));
    process.exit(1);
  }
' "$module"
echo "check-portability: ccwire-core builds for wasm32, imports nothing, and stays sans-IO"
