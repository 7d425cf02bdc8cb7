#!/usr/bin/env bash
# ccwire as users install it, with no Rust on the PATH: the npm packages and the PyPI wheels
# that scripts/release.sh makes, installed from the packed files into empty directories, run
# `ccwire --version` and a `ccwire serve` that answers /health; the arm64 Linux binary under
# emulation (qemu-user, from the system's packages); the container image's Dockerfile linted and
# its entrypoint's choices checked.
#
# Builds linux-arm64-gnu and linux-x64-musl with scripts/release.sh (into target/dist/, kept
# between runs); linux-x64-gnu is the debug binary the test run built (target/debug/ccwire).
# Prints how long each install took.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
export npm_config_update_notifier=false
work=$repo/target/install-test
rm -rf "$work"
mkdir -p "$work"

say() { echo "-- install: $*"; }
fail() { echo "install test: $*" >&2; exit 1; }
[ -x target/debug/ccwire ] || fail "target/debug/ccwire is not built (cargo build -p ccwire-host --bins)"
version=$(sed -nE 's/^version = "([^"]+)"/\1/p' Cargo.toml | head -1)
commit=$(git rev-parse --short=12 HEAD)

# The binaries: two built for release, one from the test build; then every package of them
# (the main package's WebAssembly is the one scripts/test.sh built).
scripts/release.sh --out "$work" --no-package linux-arm64-gnu linux-x64-musl >/dev/null
mkdir -p "$work/bin/linux-x64-gnu"
cp target/debug/ccwire "$work/bin/linux-x64-gnu/ccwire"
strip "$work/bin/linux-x64-gnu/ccwire"
tools=$(scripts/release/install-tools.sh)
PATH="$tools/bin:$PATH" node scripts/release/package.mjs "$work" linux-x64-gnu linux-x64-musl linux-arm64-gnu >/dev/null
npm_main=$work/npm/ccwire-$version.tgz
for file in "$npm_main" "$work"/npm/ccwire-linux-{x64-gnu,x64-musl,arm64-gnu}-"$version".tgz; do
  [ -f "$file" ] || fail "scripts/release/package.mjs made no $file"
done

# A PATH with Node, npm and Python but no Rust toolchain.
node_dir=$(dirname "$(command -v node)")
python=$(python3 -c 'import sys; print(sys.executable)')
bare=$work/bare-bin
mkdir -p "$bare"
ln -s "$python" "$bare/python3"
no_rust="$bare:$node_dir:/usr/bin:/bin"
for tool in cargo rustc rustup; do
  if PATH=$no_rust command -v "$tool" >/dev/null; then fail "$tool is on the PATH meant to have no Rust: $no_rust"; fi
done

# `serves NAME COMMAND...`: COMMAND with `serve --listen 127.0.0.1:0` appended, in an empty
# home with the pinned CLI, answers GET /health with 200, status "ok" and the CLI found, then
# ends on SIGTERM, leaving no process.
claude=$(scripts/install-cli.sh)
serves() {
  local name=$1
  shift
  local home=$work/home-$name log=$work/serve-$name.log
  mkdir -p "$home"
  (cd "$home" && exec env -i PATH="$no_rust" HOME="$home" TMPDIR="$home" CCWIRE_CLAUDE="$claude" \
    "$@" serve --listen 127.0.0.1:0 >"$log" 2>&1) &
  local pid=$! url=""
  for _ in $(seq 1 300); do
    url=$(sed -nE 's|.*listening on (http://[0-9.:]+).*|\1|p' "$log")
    [ -z "$url" ] || break
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; fail "$name: ccwire serve ended before it listened"; }
    sleep 0.1
  done
  [ -n "$url" ] || { cat "$log" >&2; fail "$name: ccwire serve did not listen within 30 s"; }
  local health
  health=$(node -e '
    fetch(process.argv[1]).then(async (r) => {
      const body = await r.text();
      const h = JSON.parse(body);
      console.log(r.status === 200 && h.status === "ok" && h.cli?.found === true ? "ok" : `${r.status} ${body}`);
    })' "$url/health")
  [ "$health" = ok ] || { cat "$log" >&2; fail "$name: GET /health answered: $health"; }
  kill -TERM "$pid"
  local status=0
  wait "$pid" || status=$?
  # The gateway drains first; a CLI it was asking for its version gets up to 20 s.
  for _ in $(seq 1 300); do
    pgrep -f "$work/" >/dev/null || break
    sleep 0.1
  done
  if pgrep -af "$work/" >&2; then fail "$name: a process of the gateway outlived it by 30 s"; fi
  [ "$status" = 0 ] || { cat "$log" >&2; fail "$name: ccwire serve ended with status $status after SIGTERM, not 0"; }
  say "$name: ccwire serve answered /health and drained on SIGTERM"
}

# `says_version NAME TARGET COMMAND...`: COMMAND --version names the version, TARGET and commit.
says_version() {
  local name=$1 target=$2
  shift 2
  local said
  said=$(env -i PATH="$no_rust" HOME="$work" npm_config_update_notifier=false "$@" --version)
  [ "$said" = "ccwire $version ($target, commit $commit)" ] \
    || fail "$name: --version said \"$said\", not ccwire $version ($target, commit $commit)"
}

# npm: the main package and this machine's platform package, from their tarballs, offline.
app=$work/npm-app
mkdir -p "$app"
echo '{"name":"app","private":true}' > "$app/package.json"
start=$(date +%s%N)
(cd "$app" && PATH=$no_rust npm install --offline --no-audit --no-fund --loglevel=error \
  "$npm_main" "$work/npm/ccwire-linux-x64-gnu-$version.tgz")
say "npm install of ccwire and @ccwire/linux-x64-gnu from the tarballs: $(( ($(date +%s%N) - start) / 1000000 )) ms"
(cd "$app" && says_version npm x86_64-unknown-linux-gnu npx --offline ccwire)
# The installed package names every platform's package, at its own version.
node --input-type=module -e '
  import { readFileSync } from "node:fs";
  const [app, version] = process.argv.slice(1);
  const { PLATFORMS } = await import(`${app}/node_modules/ccwire/js/native.js`);
  const deps = JSON.parse(readFileSync(`${app}/node_modules/ccwire/package.json`, "utf8")).optionalDependencies ?? {};
  for (const p of Object.values(PLATFORMS)) {
    if (deps[p.package] !== version) throw new Error(`ccwire does not name ${p.package}@${version}: ${JSON.stringify(deps)}`);
  }' "$app" "$version"
serves npm "$app/node_modules/.bin/ccwire"
# The package of another platform is not installed here: npm skips it by its os, cpu and libc.
refused=$(cd "$app" && PATH=$no_rust npm install --offline --no-audit --no-fund --loglevel=error \
  "$work/npm/ccwire-linux-arm64-gnu-$version.tgz" 2>&1) \
  && fail "npm installed the linux-arm64-gnu package on $(uname -m)"
grep -q EBADPLATFORM <<<"$refused" || fail "npm refused the linux-arm64-gnu package, not for its platform: $refused"

# PyPI: pip picks this machine's wheel from the directory of all of them.
venv=$work/venv
python3 -m venv "$venv"
pip_install() {
  PATH=$no_rust "$venv/bin/pip" install --quiet --disable-pip-version-check --no-index \
    --find-links "$work/pypi" "$@" ccwire
}
start=$(date +%s%N)
pip_install
say "pip install ccwire from the wheels: $(( ($(date +%s%N) - start) / 1000000 )) ms"
says_version pip x86_64-unknown-linux-gnu "$venv/bin/ccwire"
serves pip "$venv/bin/ccwire"

# uvx: the wheel's command in an environment uv makes for it, as `uvx ccwire serve` runs it.
wheel=$(ls "$work"/pypi/ccwire-"$version"-py3-none-*manylinux_2_17_x86_64*.whl)
says_version uvx x86_64-unknown-linux-gnu "$tools/bin/uvx" --offline --no-config --from "$wheel" ccwire
serves uvx "$tools/bin/uvx" --offline --no-config --from "$wheel" ccwire

# pipx: `pipx run` installs the wheel into an environment of its own and runs the command.
says_version pipx x86_64-unknown-linux-gnu \
  env PIPX_HOME="$work/pipx" PIPX_BIN_DIR="$work/pipx/bin" "$tools/bin/pipx" run --spec "$wheel" ccwire

# musl: the static binary from its wheel (pip fetches by the musllinux tag) runs on any Linux.
pip_install --platform musllinux_1_2_x86_64 --only-binary=:all: --target "$work/musl"
says_version musl x86_64-unknown-linux-musl "$work/musl/bin/ccwire"
serves musl "$work/musl/bin/ccwire"

# arm64: the wheel pip picks for manylinux2014_aarch64, run under qemu-user.
if command -v qemu-aarch64 >/dev/null && [ -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ]; then
  pip_install --platform manylinux2014_aarch64 --only-binary=:all: --target "$work/arm64"
  ln -s "$(command -v qemu-aarch64)" "$bare/qemu-aarch64"
  says_version arm64 aarch64-unknown-linux-gnu qemu-aarch64 -L /usr/aarch64-linux-gnu "$work/arm64/bin/ccwire"
  serves arm64 qemu-aarch64 -L /usr/aarch64-linux-gnu "$work/arm64/bin/ccwire"
else
  say "arm64: skipped (no qemu-user or no arm64 C library: apt-get install qemu-user libc6-arm64-cross)"
fi

# The container image: no Docker engine builds it here; its Dockerfile is linted, its CLI
# release is the tests' own, and its entrypoint chooses the address as docs/INSTALL.md says.
"$tools/bin/hadolint" Dockerfile
cli_version=$(sed -nE 's/^version=([0-9.]+)$/\1/p' scripts/install-cli.sh)
grep -qx "ARG CLAUDE_CODE_VERSION=$cli_version" Dockerfile \
  || fail "the Dockerfile's CLAUDE_CODE_VERSION is not $cli_version (scripts/install-cli.sh)"
for doc in README.md docs/INSTALL.md; do
  if grep -o 'claude-code@[0-9.]*' "$doc" | grep -vx "claude-code@$cli_version"; then
    fail "$doc names a CLI release other than $cli_version (scripts/install-cli.sh)"
  fi
done
fake=$work/entrypoint-bin
mkdir -p "$fake"
printf '#!/bin/sh\necho "ccwire $*"\n' > "$fake/ccwire"
chmod +x "$fake/ccwire"
entry() { env -i PATH="$fake:/usr/bin:/bin" "$@" "$repo/docker/entrypoint.sh" 2>/dev/null; }
expect() { [ "$1" = "$2" ] || fail "the entrypoint ran \"$1\", not \"$2\""; }
expect "$(entry)" "ccwire serve --listen 127.0.0.1:8787"
expect "$(entry CCWIRE_API_KEYS=k1 sh -c 'exec "$0"')" "ccwire serve --listen 0.0.0.0:8787"
expect "$(entry CCWIRE_API_KEYS=k1 sh -c 'exec "$0" serve --console')" "ccwire serve --listen 0.0.0.0:8787 --console"
expect "$(entry sh -c 'exec "$0" serve --api-key k')" "ccwire serve --listen 0.0.0.0:8787 --api-key k"
expect "$(entry CCWIRE_ADMIN_KEY=a sh -c 'exec "$0" serve --managed-keys')" "ccwire serve --listen 0.0.0.0:8787 --managed-keys"
expect "$(entry sh -c 'exec "$0" serve --managed-keys')" "ccwire serve --listen 127.0.0.1:8787 --managed-keys"
expect "$(entry sh -c 'exec "$0" serve --listen 0.0.0.0:9000')" "ccwire serve --listen 0.0.0.0:9000"
expect "$(entry sh -c 'exec "$0" play tape.jsonl')" "ccwire play tape.jsonl"
say "the Dockerfile lints clean; the entrypoint listens beyond the container only with keys"

# The release workflow: it parses, each job runs on a machine and has steps, each shell step
# is shell (bash -n), and its builds name every platform of the table, each once.
platforms=$(node --input-type=module -e 'import { PLATFORMS } from "./bindings/js/native.js"; console.log(Object.keys(PLATFORMS).join(" "))')
"$tools/bin/python" - .github/workflows/release.yml "$platforms" <<'EOF'
import subprocess, sys, yaml
path, platforms = sys.argv[1], set(sys.argv[2].split())
workflow = yaml.safe_load(open(path))
built = []
for name, job in workflow["jobs"].items():
    assert job.get("runs-on") and job.get("steps"), f"{path}: job {name} has no runs-on or steps"
    for step in job["steps"]:
        assert "uses" in step or "run" in step, f"{path}: a step of {name} neither uses nor runs"
        script = step.get("run", "")
        subprocess.run(["bash", "-n", "-c", script], check=True)
        words = script.replace("\\\n", " ").split()
        if "scripts/release.sh" in words and "--no-package" in words:
            built += [w for w in words if w in platforms]
assert sorted(built) == sorted(platforms), f"{path} builds {sorted(built)}, not each of {sorted(platforms)} once"
EOF
say "the release workflow parses, its scripts are shell, and it builds every platform once"
