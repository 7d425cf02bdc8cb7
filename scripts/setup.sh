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
# The Claude Code CLI the end-to-end tests run (into tests/.cli/, gitignored).
scripts/install-cli.sh >/dev/null
