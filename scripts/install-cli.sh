#!/usr/bin/env bash
# Installs the Claude Code CLI release ccwire is tested against into tests/.cli/ (gitignored) and
# prints the path of its executable. Skipped when that release is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

version=2.1.332
dir=tests/.cli
claude=$dir/node_modules/.bin/claude

if [ -x "$claude" ] && "$claude" --version 2>/dev/null | grep -q "^$version "; then
  echo "$PWD/$claude"
  exit 0
fi
mkdir -p "$dir"
[ -f "$dir/package.json" ] || echo '{"name":"ccwire-test-cli","private":true}' > "$dir/package.json"
# The exact version: on Node 20 a plain install picks an older release (2.1.332 declares node >=22).
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "@anthropic-ai/claude-code@$version" >&2
"$claude" --version >&2
echo "$PWD/$claude"
