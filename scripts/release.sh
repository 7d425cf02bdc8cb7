#!/usr/bin/env bash
# Builds ccwire's release binaries and packages them: the npm platform packages and the main
# npm package, a PyPI wheel per platform, and SHA256SUMS, into dist/ (gitignored).
#
#   scripts/release.sh [--out DIR] [--profile NAME] [--no-package | --package-only] [PLATFORM...]
#
# PLATFORMs are the keys of bindings/js/native.js (linux-x64-gnu, linux-x64-musl,
# linux-arm64-gnu, linux-arm64-musl, darwin-arm64, darwin-x64); the default is every Linux one.
# The Linux binaries are built here whatever the machine, with cargo-zigbuild (Zig links them:
# glibc 2.17 for the gnu ones, static musl for the others); the macOS ones on a Mac (the
# release workflow, .github/workflows/release.yml, runs both). Each binary says its version,
# target and commit in `ccwire --version`. `--profile` builds another Cargo profile; the
# default is `release`. `--no-package` stops at DIR/bin/<PLATFORM>/ccwire; `--package-only`
# packs the binaries already there (the workflow builds on two machines, packs on one).
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
out=dist
package=yes
platforms=()
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no-package) package=no; shift ;;
    --package-only) package=only; shift ;;
    -*) echo "usage: scripts/release.sh [--out DIR] [--profile NAME] [--no-package | --package-only] [PLATFORM...]" >&2; exit 2 ;;
    *) platforms+=("$1"); shift ;;
  esac
done
table() { node --input-type=module -e "
  import { PLATFORMS } from './bindings/js/native.js';
  const [key, field] = process.argv.slice(1);
  if (!key) { console.log(Object.keys(PLATFORMS).join(' ')); process.exit(0); }
  const p = PLATFORMS[key];
  if (!p) { console.error('scripts/release.sh: no platform ' + key + ' (there are ' + Object.keys(PLATFORMS).join(', ') + ')'); process.exit(2); }
  console.log(p[field] ?? '');
" "$@"; }
if [ ${#platforms[@]} -eq 0 ]; then
  for key in $(table); do
    [ "$(table "$key" os)" != linux ] || platforms+=("$key")
  done
fi

targets=()
for key in "${platforms[@]}"; do targets+=("$(table "$key" target)"); done
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
build_these=("${platforms[@]}")
[ "$package" != only ] || build_these=()
for key in "${build_these[@]}"; do
  target=$(table "$key" target)
  case "$target" in
    *-linux-gnu) build=(cargo zigbuild --target "$target.2.17") ;;
    *-linux-musl) build=(cargo zigbuild --target "$target") ;;
    *-apple-darwin)
      [ "$(uname -s)" = Darwin ] || { echo "scripts/release.sh: $key is built on macOS" >&2; exit 2; }
      build=(cargo build --target "$target") ;;
  esac
  echo "== $key: ${build[*]} --profile $profile" >&2
  CARGO_TARGET_DIR=target/dist "${build[@]}" --locked --profile "$profile" -p ccwire-host --bin ccwire
  dir=target/dist/$target/$profile
  [ "$profile" != dev ] || dir=target/dist/$target/debug
  mkdir -p "$out/bin/$key"
  cp "$dir/ccwire" "$out/bin/$key/ccwire"
done
[ "$package" != no ] || exit 0
# The main package: its WebAssembly built from this commit.
rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown >&2
scripts/install-wasm-bindgen.sh >&2
(cd bindings && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error; } && npm run --silent build) >&2
node scripts/release/package.mjs "$out" "${platforms[@]}"
