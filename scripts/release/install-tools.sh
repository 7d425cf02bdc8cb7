#!/usr/bin/env bash
# Installs what scripts/release.sh needs beyond the Rust toolchain: the Rust targets asked for
# (as arguments) and, from PyPI, cargo-zigbuild, Zig and wheel into .tools/release/ (gitignored).
# Prints the directory whose bin/ holds them. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."

for target in "$@"; do
  rustup target list --installed | grep -qx "$target" || rustup target add "$target" >&2
done
venv=.tools/release
want="$( (sha256sum scripts/release/requirements.txt | cut -d' ' -f1; python3 -V) | tr '\n' ' ')"
if [ "$(cat "$venv/.stamp" 2>/dev/null)" != "$want" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r scripts/release/requirements.txt >&2
  echo "$want" > "$venv/.stamp"
fi
echo "$PWD/$venv"
