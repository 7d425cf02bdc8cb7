#!/usr/bin/env bash
# Writes bindings/js/chunks.d.ts, the chunks' TypeScript types, from the Rust chunk types
# (core/src/chunk/, with ts-rs in core's tests); `cargo test` fails while it is stale.
set -euo pipefail
cd "$(dirname "$0")/.."
PRINT_TYPES=1 cargo test --quiet -p ccwire-core --lib chunk::typescript::chunk_types -- --exact --nocapture \
  | awk '/^TYPES>>>$/ { inside = 0 } inside { print } /^<<<TYPES$/ { inside = 1 }' > bindings/js/chunks.d.ts.new
mv bindings/js/chunks.d.ts.new bindings/js/chunks.d.ts
echo "gen-types: wrote bindings/js/chunks.d.ts"
