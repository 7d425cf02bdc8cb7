#!/usr/bin/env bash
# Runs every test of ccwire: formatting, lints, the portability gate, the Rust test suites
# (end-to-end tests with the real CLI included) and the JavaScript package's tests.
# `.ci/run` calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh

echo "== cargo fmt --check"
cargo fmt --all --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
echo "== portability gate"
scripts/check-portability.sh
echo "== cargo test"
cargo test --workspace
echo "== fuzz targets build"
scripts/fuzz-build.sh
