#!/usr/bin/env bash
# Runs every test of ccwire: formatting, lints, the portability gate, the Rust test suites
# (end-to-end tests with the real CLI included), the JavaScript package's tests and the official
# SDK clients' end-to-end tests.
# `.ci/run` calls exactly this.
#
# `scripts/test.sh quick` is the fast tier a maintainer runs between changes (a couple of
# minutes once built): formatting, the doc references, clippy, the portability gate and the
# core's tests (the engines in simulation, the corpus, the fuzz regressions).
set -euo pipefail
cd "$(dirname "$0")/.."

tier="${1:-all}"
case "$tier" in
  all | quick) ;;
  *)
    echo "usage: scripts/test.sh [quick]" >&2
    exit 2
    ;;
esac

if [ "$tier" = all ]; then
  # A full run builds each crate once: incremental state would only fill the disk (gigabytes).
  export CARGO_INCREMENTAL=0
fi

scripts/setup.sh

echo "== cargo fmt --check"
cargo fmt --all --check
echo "== docs: every doc reference resolves"
node scripts/check-docs.mjs
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
echo "== portability gate"
scripts/check-portability.sh
if [ "$tier" = quick ]; then
  echo "== cargo test -p ccwire-core"
  cargo test -p ccwire-core
  exit 0
fi
echo "== the published crates build with the oldest Rust they declare (rust-version)"
msrv=$(sed -nE 's/^rust-version = "([0-9.]+)"/\1/p' Cargo.toml)
CARGO_TARGET_DIR=target/msrv cargo "+$msrv" check --quiet -p ccwire-core -p ccwire-host --locked
echo "== cargo doc: every intra-doc link resolves"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
echo "== the client library alone: ccwire-host without default features"
cargo clippy --quiet -p ccwire-host --no-default-features -- -D warnings
if cargo tree -p ccwire-host --no-default-features -e normal --prefix none \
    | grep -E '^(axum|hyper|reqwest|clap|mimalloc|tracing-subscriber) '; then
  echo "the client library pulls in the gateway's or the binary's dependencies" >&2
  exit 1
fi
echo "== macOS: ccwire-host compiles for aarch64-apple-darwin, with no warning (zig compiles the C; no link)"
tools=$(scripts/release/install-tools.sh aarch64-apple-darwin)
PATH="$tools/bin:$PATH" CARGO_TARGET_DIR=target/macos cargo-zigbuild clippy --quiet --locked \
  --target aarch64-apple-darwin -p ccwire-host -- -D warnings
echo "== npm package: build and test"
(cd bindings && npm run --silent build && npm test)
echo "== npm package: what npm publish would upload"
(cd bindings && npm publish --dry-run --silent)
echo "== cargo test"
# The differential test runs the module the portability gate just built, and the npm package.
CCWIRE_WASM_ENTRY="$PWD/target/wasm32-unknown-unknown/wasm-release/ccwire_wasm_entry.wasm" \
  cargo test --workspace
echo "== crates: what cargo publish would upload, each built from its own tarball"
# Cargo takes a registry crate of a given name and version to never change: what it unpacked
# and built of an earlier run's tarballs would stand in for today's. Both are dropped first;
# the dependencies stay built in a target directory of their own.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/ccwire-core-* \
  "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/ccwire-host-* \
  target/publish/debug/.fingerprint/ccwire-* target/publish/debug/deps/*ccwire_*
CARGO_TARGET_DIR=target/publish cargo publish --workspace --dry-run --allow-dirty --quiet
echo "== SDK end-to-end tests: the official Python and TypeScript clients and the AI SDK against ccwire serve"
cargo build --quiet -p ccwire-host -p ccwire-tests --bins
echo "== drift: every message type of the Agent SDK release ccwire follows is modelled"
node tests/sdk/drift/drift.mjs
echo "== drift: every frame kind the pinned CLI declares is typed, the corpus gives no unknown chunk"
node tests/sdk/drift/cli.mjs > target/drift-cli.txt || { cat target/drift-cli.txt; exit 1; }
tail -1 target/drift-cli.txt
tests/sdk/python/run.sh
tests/sdk/ts/run.sh
echo "== installs: the npm packages, the wheels and the arm64 build with no Rust on the PATH; the Dockerfile"
scripts/release/test-install.sh
echo "== www: the inspector and the live console in Chromium"
(cd www && npm test)
echo "== fuzz targets build"
scripts/fuzz-build.sh
