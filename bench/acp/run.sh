#!/usr/bin/env bash
# `ccwire acp` beside @agentclientprotocol/claude-agent-acp (bench.mjs): builds ccwire and the
# fake model in release, installs the pinned CLI and the two npm packages, then runs.
#   bench/acp/run.sh [ROUNDS]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"
scripts/install-cli.sh >/dev/null
cargo build --release --quiet -p ccwire-host -p ccwire-tests --bins
cd "$here"
# The Agent SDK's optional packages carry a CLI of their own; the adapter is pointed at the
# pinned one (CLAUDE_CODE_EXECUTABLE).
npm ci --omit=optional --no-audit --no-fund --loglevel=error
node bench.mjs "$@"
