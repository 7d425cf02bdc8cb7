#!/usr/bin/env bash
# Installs the Codex CLI release the end-to-end tests drive through `ccwire serve`'s Responses
# API into tests/.codex/ (gitignored) and prints the path of its executable. Skipped when that
# release is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.171.0
dir=tests/.codex
codex=$dir/node_modules/.bin/codex

if [ -x "$codex" ] && "$codex" --version 2>/dev/null | grep -q " $version\$"; then
  echo "$PWD/$codex"
  exit 0
fi
mkdir -p "$dir"
[ -f "$dir/package.json" ] || echo '{"name":"ccwire-test-codex","private":true}' > "$dir/package.json"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "@openai/codex@$version" >&2
"$codex" --version >&2
echo "$PWD/$codex"
