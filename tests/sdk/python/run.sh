#!/usr/bin/env bash
# End-to-end tests of `ccwire serve` with the official Python `anthropic` and `openai` SDKs (and
# the structured-output libraries built on them: instructor, pydantic-ai, openai-agents, LangChain).
# Needs the built binaries (cargo build -p ccwire-host -p ccwire-tests --bins) and the CLI
# (scripts/setup.sh). Extra arguments go to pytest (e.g. -k openai, -x).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"

export CCWIRE_BIN="${CCWIRE_BIN:-$repo/target/debug/ccwire}"
export FAKE_ANTHROPIC_BIN="${FAKE_ANTHROPIC_BIN:-$repo/target/debug/fake-anthropic}"
export CCWIRE_CLAUDE="${CCWIRE_CLAUDE:-$repo/tests/.cli/node_modules/.bin/claude}"
for bin in "$CCWIRE_BIN" "$FAKE_ANTHROPIC_BIN" "$CCWIRE_CLAUDE"; do
  if [[ ! -x "$bin" ]]; then
    echo "sdk-python: missing executable $bin" >&2
    echo "  build: cargo build -p ccwire-host -p ccwire-tests --bins; the CLI: scripts/setup.sh" >&2
    exit 2
  fi
done

venv="$here/.venv"
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
# Install only when the requirements (or the interpreter) changed since the last install.
# requirements-no-deps.txt holds a package whose declared dependencies conflict with the pins
# (the file says why): it goes in with --no-deps, after the rest.
want="$( (sha256sum "$here/requirements.txt" "$here/requirements-no-deps.txt" | cut -d' ' -f1; "$venv/bin/python" -V) | tr '\n' ' ')"
stamp="$venv/.requirements.stamp"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    -r "$here/requirements-no-deps.txt"
  printf '%s' "$want" >"$stamp"
fi

report="$(mktemp "${TMPDIR:-/tmp}/ccwire-sdk-python.XXXXXX")"
trap 'rm -f "$report"' EXIT
cd "$here"
status=0
# A hard limit for the whole run (it takes about a minute); on SIGTERM the rig still stops the
# gateway and its CLI processes.
timeout --kill-after=30 "${CCWIRE_SDK_TIME_LIMIT:-300}" \
  "$venv/bin/python" -m pytest -q -rfE --junitxml="$report" "$@" || status=$?

# One closing line: passed and failed counts (a failing fixture teardown counts as failed).
"$venv/bin/python" - "$report" "$status" <<'EOF' || true
import sys
import xml.etree.ElementTree as ET

try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError):
    print("sdk-python: no test report")
    sys.exit(0)
suite = root if root.tag == "testsuite" else root.find("testsuite")
total, failures, errors, skipped = (
    int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")
)
failed = failures + errors
status = int(sys.argv[2])
if status != 0 and failed == 0:
    if status in (124, 137):
        print("sdk-python: the run was stopped at its time limit")
    else:
        print(f"sdk-python: pytest exited with status {status}")
    failed = 1
passed = max(total - failures - errors - skipped, 0)
line = f"sdk-python: {passed} passed, {failed} failed"
print(line + (f", {skipped} skipped" if skipped else ""))
EOF
exit "$status"
