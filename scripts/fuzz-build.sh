#!/usr/bin/env bash
# Builds the fuzz targets (nightly + cargo-fuzz). Fuzz for real with e.g.
#   cd fuzz && cargo +nightly fuzz run session -- -max_total_time=300
set -euo pipefail
cd "$(dirname "$0")/.."

if ! rustup toolchain list | grep -q '^nightly'; then
  echo "fuzz-build: no nightly toolchain; skipping the fuzz build" >&2
  exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  cargo install --locked cargo-fuzz
fi
cd fuzz
cargo +nightly fuzz build --dev
echo "fuzz-build: the fuzz targets build"
