#!/usr/bin/env bash
# How long installing ccwire takes, each way a user has: npm (the main package and this
# machine's platform package) and pip (this machine's wheel) from the files scripts/release.sh
# made in dist/, each into a new empty directory, five times (the median, from local files: the
# registry's download is left out); and building the binary from source with cargo into an
# empty target directory (once: what `cargo install ccwire-host` does). Prints a table, with the
# ratio of each install to the build from source, and the size of each file installed; and
# what the npm package's `ccwire` command (a Node launcher) adds to the binary's start.
#
#   scripts/release.sh linux-x64-gnu && bench/install.sh [--no-source]
set -euo pipefail
cd "$(dirname "$0")/.."
platform=linux-x64-gnu
version=$(sed -nE 's/^version = "([^"]+)"/\1/p' Cargo.toml | head -1)
main=$PWD/dist/npm/ccwire-$version.tgz
plat=$PWD/dist/npm/ccwire-$platform-$version.tgz
wheel=$(ls "$PWD"/dist/pypi/ccwire-"$version"-py3-none-*manylinux_2_17_x86_64*.whl 2>/dev/null | head -1 || true)
for file in "$main" "$plat" "$wheel"; do
  [ -n "$file" ] && [ -f "$file" ] || { echo "bench/install.sh: run scripts/release.sh $platform first" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { print b - a }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

npm_runs=()
for i in 1 2 3 4 5; do
  app=$work/npm-$i
  mkdir -p "$app"
  echo '{"name":"app","private":true}' > "$app/package.json"
  start=$(now)
  (cd "$app" && npm install --offline --no-audit --no-fund --loglevel=error "$main" "$plat" >/dev/null)
  npm_runs+=("$(since "$start")")
  "$app/node_modules/.bin/ccwire" --version >/dev/null
done
pip_runs=()
for i in 1 2 3 4 5; do
  python3 -m venv "$work/venv-$i"
  start=$(now)
  "$work/venv-$i/bin/pip" install --quiet --disable-pip-version-check --no-index "$wheel"
  pip_runs+=("$(since "$start")")
  "$work/venv-$i/bin/ccwire" --version >/dev/null
done
# What the npm command's launcher adds to each start: `ccwire --version` through it and direct.
launch_runs=()
direct_runs=()
for i in $(seq 1 10); do
  start=$(now)
  "$work/npm-1/node_modules/.bin/ccwire" --version >/dev/null
  launch_runs+=("$(since "$start")")
  start=$(now)
  "$work/npm-1/node_modules/@ccwire/$platform/bin/ccwire" --version >/dev/null
  direct_runs+=("$(since "$start")")
done
launch_s=$(printf '%s\n' "${launch_runs[@]}" | median)
direct_s=$(printf '%s\n' "${direct_runs[@]}" | median)
npm_s=$(printf '%s\n' "${npm_runs[@]}" | median)
pip_s=$(printf '%s\n' "${pip_runs[@]}" | median)
source_s=""
if [ "${1:-}" != --no-source ]; then
  start=$(now)
  CARGO_TARGET_DIR=$work/target cargo build --quiet --release --locked -p ccwire-host --bin ccwire
  source_s=$(since "$start")
fi
kib() { echo $(( $(stat -c %s "$1") / 1024 )); }
ratio() { [ -n "$source_s" ] && awk -v a="$1" -v b="$source_s" 'BEGIN { printf " (%.4f×)", a / b }'; }
echo "| way | what is installed | time |"
echo "|---|---|---:|"
printf '| npm install (median of 5) | %s %d KiB + %s %d KiB | %.2f s%s |\n' "$(basename "$main")" "$(kib "$main")" "$(basename "$plat")" "$(kib "$plat")" "$npm_s" "$(ratio "$npm_s")"
printf '| pip install (median of 5) | %s %d KiB | %.2f s%s |\n' "$(basename "$wheel")" "$(kib "$wheel")" "$pip_s" "$(ratio "$pip_s")"
[ -z "$source_s" ] || printf '| cargo build --release from source (cold, once) | the crates of ccwire-host | %.0f s (1×) |\n' "$source_s"
echo
printf 'ccwire --version, median of 10: %.0f ms through the npm command, %.0f ms run directly (the launcher adds %.0f ms to a start)\n' \
  "$(awk -v a="$launch_s" 'BEGIN { print a * 1000 }')" "$(awk -v a="$direct_s" 'BEGIN { print a * 1000 }')" "$(awk -v a="$launch_s" -v b="$direct_s" 'BEGIN { print (a - b) * 1000 }')"
