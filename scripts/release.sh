#!/usr/bin/env bash
# Builds ccwire's release binaries and packages them: the npm platform packages and the main
# npm package, a PyPI wheel per platform, and SHA256SUMS, into dist/ (gitignored).
#
#   scripts/release.sh [--out DIR] [--no-package | --package-only] [PLATFORM...]
#
# PLATFORMs are the keys of bindings/js/native.js (linux-x64-gnu, linux-x64-musl,
# linux-arm64-gnu, linux-arm64-musl, darwin-arm64, darwin-x64); the default is every Linux one.
# The Linux binaries are built here whatever the machine, with cargo-zigbuild (Zig links them:
# glibc 2.17 for the gnu ones, static musl for the others); the macOS ones on a Mac (the
# release workflow, .github/workflows/release.yml, runs both). Each binary says its version,
# target and commit in `ccwire --version`. `--no-package` stops at DIR/bin/<PLATFORM>/ccwire;
# `--package-only` packs the binaries already there (the workflow builds on two machines, packs
# on one).
set -euo pipefail
cd "$(dirname "$0")/.."

out=dist
package=yes
platforms=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --no-package) package=no; shift ;;
    --package-only) package=only; shift ;;
    -*) echo "usage: scripts/release.sh [--out DIR] [--no-package | --package-only] [PLATFORM...]" >&2; exit 2 ;;
    *) platforms+=("$1"); shift ;;
  esac
done
# The platform table of bindings/js/native.js, as "key target os" lines (plain bash 3: the
# macOS runner's).
table=$(node --input-type=module -e '
  import { PLATFORMS } from "./bindings/js/native.js";
  for (const [key, p] of Object.entries(PLATFORMS)) console.log(key, p.target, p.os);')
target_of() { awk -v k="$1" '$1 == k { print $2 }' <<<"$table"; }
if [ ${#platforms[@]} -eq 0 ]; then
  while read -r key _ os; do
    [ "$os" != linux ] || platforms+=("$key")
  done <<<"$table"
fi
targets=()
for key in "${platforms[@]}"; do
  target=$(target_of "$key")
  [ -n "$target" ] || { echo "scripts/release.sh: no platform $key (there are $(cut -d' ' -f1 <<<"$table" | xargs))" >&2; exit 2; }
  targets+=("$target")
done
if [ "$(uname -s)" = Linux ]; then
  tools=$(scripts/release/install-tools.sh "${targets[@]}")
  export PATH="$tools/bin:$PATH"
else
  for target in "${targets[@]}"; do rustup target add "$target" >&2; done
fi
export CCWIRE_COMMIT="${CCWIRE_COMMIT:-$(git rev-parse --short=12 HEAD)}"
# No path of this machine in the binaries.
export RUSTFLAGS="${RUSTFLAGS:-} --remap-path-prefix=$PWD=/ccwire --remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=/cargo"

mkdir -p "$out/bin"
for key in "${platforms[@]}"; do
  [ "$package" != only ] || break
  target=$(target_of "$key")
  case "$target" in
    *-linux-gnu) build=(cargo zigbuild --target "$target.2.17") ;;
    *-linux-musl) build=(cargo zigbuild --target "$target") ;;
    *-apple-darwin)
      [ "$(uname -s)" = Darwin ] || { echo "scripts/release.sh: $key is built on macOS" >&2; exit 2; }
      build=(cargo build --target "$target") ;;
  esac
  echo "== $key: ${build[*]} --release" >&2
  CARGO_TARGET_DIR=target/dist "${build[@]}" --locked --release -p ccwire-host --bin ccwire
  mkdir -p "$out/bin/$key"
  cp "target/dist/$target/release/ccwire" "$out/bin/$key/ccwire"
done
[ "$package" != no ] || exit 0
# The main package: its WebAssembly built from this commit.
rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown >&2
scripts/install-wasm-bindgen.sh >&2
(cd bindings && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error; } && npm run --silent build) >&2
node scripts/release/package.mjs "$out" "${platforms[@]}"
