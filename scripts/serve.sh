#!/usr/bin/env bash
# Builds ccwire, installs the Claude Code CLI release it is tested against (unless CCWIRE_CLAUDE
# names another), and runs `ccwire serve` with it. Arguments go to `ccwire serve`
# (`scripts/serve.sh --help` lists them). The CLI uses your credentials: ANTHROPIC_API_KEY or
# your Claude Code login.
set -euo pipefail
cd "$(dirname "$0")/.."

claude="${CCWIRE_CLAUDE:-}"
if [ -z "$claude" ]; then
  claude="$(scripts/install-cli.sh)"
fi
cargo build --release --quiet -p ccwire-host
exec target/release/ccwire serve --claude "$claude" "$@"
