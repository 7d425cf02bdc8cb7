#!/usr/bin/env bash
# Installs what building and testing ccwire needs beyond the Rust toolchain, Node and npm.
# Idempotent: every step is skipped when its result is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

for component in rustfmt clippy; do
  rustup component list --installed | grep -q "^$component" || rustup component add "$component"
done
rustup target list --installed | grep -qx wasm32-unknown-unknown \
  || rustup target add wasm32-unknown-unknown
# The oldest Rust the published crates declare (`rust-version`), which the full test run builds.
msrv=$(sed -nE 's/^rust-version = "([0-9.]+)"/\1/p' Cargo.toml)
rustup toolchain list | grep -q "^$msrv-" || rustup toolchain install "$msrv" --profile minimal
# The Claude Code CLI the end-to-end tests run (into tests/.cli/, gitignored).
scripts/install-cli.sh >/dev/null
# The Codex CLI, a client of the gateway's Responses API in the end-to-end tests (tests/.codex/).
scripts/install-codex.sh >/dev/null
# The wasm-bindgen CLI matching the pinned library (the npm package build).
scripts/install-wasm-bindgen.sh
# From the system's packages: Chromium for the inspector's browser test (www/), bubblewrap,
# the OS sandbox `ccwire serve` runs each CLI in (its tests need it), and the Redis server
# the tests of the shared session store start on loopback ports of their own.
missing=""
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v bwrap >/dev/null 2>&1 || missing="$missing bubblewrap"
command -v redis-server >/dev/null 2>&1 || missing="$missing redis-server"
# qemu-user and the arm64 C library: the install test runs the arm64 Linux build under emulation.
command -v qemu-aarch64 >/dev/null 2>&1 || missing="$missing qemu-user"
[ -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ] || missing="$missing libc6-arm64-cross"
if [ -n "$missing" ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
fi
# The JavaScript dependencies, exactly as locked (skipped when installed from this lock).
# (tests/sdk/drift reads the Agent SDK's types only: its optional native CLI is not needed.)
for dir in bindings www tests/sdk/drift; do
  stamp="$dir/node_modules/.ccwire-installed-lock"
  omit=""
  [ "$dir" != tests/sdk/drift ] || omit="--omit=optional"
  if ! cmp -s "$dir/package-lock.json" "$stamp" 2>/dev/null; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error $omit)
    cp "$dir/package-lock.json" "$stamp"
  fi
done
