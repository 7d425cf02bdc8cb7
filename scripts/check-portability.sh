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
echo "check-portability: ccwire-core builds for wasm32 and stays sans-IO"
