#!/usr/bin/env bash
# End-to-end tests of `ccwire serve` with the official TypeScript SDKs (@anthropic-ai/sdk, openai)
# the Vercel AI SDK (ai, @ai-sdk/anthropic, @ai-sdk/openai, @ai-sdk/openai-compatible) and LangChain JS
# against the real Claude Code CLI and the scripted fake model. Needs Node 20+ and the built
# binaries (cargo build -p ccwire-host -p ccwire-tests --bins) and CLI (scripts/install-cli.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"

export CCWIRE_BIN="${CCWIRE_BIN:-$repo/target/debug/ccwire}"
export FAKE_ANTHROPIC_BIN="${FAKE_ANTHROPIC_BIN:-$repo/target/debug/fake-anthropic}"
export CCWIRE_CLAUDE="${CCWIRE_CLAUDE:-$repo/tests/.cli/node_modules/.bin/claude}"
for bin in "$CCWIRE_BIN" "$FAKE_ANTHROPIC_BIN" "$CCWIRE_CLAUDE"; do
  if [ ! -x "$bin" ]; then
    echo "run.sh: $bin is missing (cargo build -p ccwire-host -p ccwire-tests --bins; scripts/install-cli.sh)" >&2
    exit 1
  fi
done
major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 20 ]; then
  echo "run.sh: Node 20 or newer is needed, found $(node --version)" >&2
  exit 1
fi

cd "$here"
# The SDKs exactly as locked; reinstalled only when package-lock.json changed since the last install.
stamp=node_modules/.ccwire-installed-lock
if ! cmp -s package-lock.json "$stamp" 2>/dev/null; then
  # The Agent SDK's optional packages carry a CLI of their own; these tests name the executable.
  npm ci --omit=optional --no-audit --no-fund --loglevel=error
  cp package-lock.json "$stamp"
fi
npm test --silent
