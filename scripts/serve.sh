#!/usr/bin/env bash
# Builds ccwire, installs the Claude Code CLI release it is tested against (unless CCWIRE_CLAUDE
# names another), and runs `ccwire serve` with it. Arguments go to `ccwire serve`
# (`scripts/serve.sh --help` lists them). On Linux it also installs bubblewrap, the OS sandbox
# each CLI runs in, when it is missing. The CLIs use the credentials in the environment:
# ANTHROPIC_API_KEY, or for a Claude subscription the token `claude setup-token` prints, as
# CLAUDE_CODE_OAUTH_TOKEN (each caller's CLI has a home of its own, without your login).
set -euo pipefail
cd "$(dirname "$0")/.."

claude="${CCWIRE_CLAUDE:-}"
if [ -z "$claude" ]; then
  claude="$(scripts/install-cli.sh)"
fi
if [ "$(uname -s)" = Linux ] && ! command -v bwrap >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "serve.sh: installing bubblewrap (the CLIs' sandbox)" >&2
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq bubblewrap; } >/dev/null \
    || echo "serve.sh: could not install bubblewrap; the CLIs will run without the sandbox" >&2
fi
cargo build --release --quiet -p ccwire-host
exec target/release/ccwire serve --claude "$claude" "$@"
