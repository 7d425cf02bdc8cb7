#!/usr/bin/env bash
# Installs the wasm-bindgen CLI whose version equals the `wasm-bindgen = "=x.y.z"` pin in
# bindings/Cargo.toml (the CLI and the library must match exactly). Skipped when it is there.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -nE 's/^wasm-bindgen = \{ version = "=([0-9.]+)".*/\1/p; s/^wasm-bindgen = "=([0-9.]+)"/\1/p' bindings/Cargo.toml)
if [ -z "$version" ]; then
  echo "install-wasm-bindgen: no \`wasm-bindgen = \"=x.y.z\"\` pin found in bindings/Cargo.toml" >&2
  exit 1
fi
if command -v wasm-bindgen >/dev/null 2>&1 \
  && [ "$(wasm-bindgen --version | awk '{print $2}')" = "$version" ]; then
  exit 0
fi
echo "install-wasm-bindgen: installing wasm-bindgen-cli $version"
# --locked first (the CLI's own lockfile); a registry mirror that lacks one of its locked
# versions makes that fail, and then the newest compatible versions are resolved instead.
cargo install --locked --quiet --version "$version" wasm-bindgen-cli \
  || cargo install --quiet --version "$version" wasm-bindgen-cli
