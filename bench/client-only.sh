#!/usr/bin/env bash
# What a client-only app builds: bench/client-only (one turn with ccwire_host::Client) built
# from scratch (dev profile, the workspace's Cargo.lock) with ccwire-host's default features and
# without them, one after the other; prints the crates and the build time of each, and their ratio.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$repo/bench/client-only/." "$work/"
sed -i "s|path = \"../../|path = \"$repo/|" "$work/Cargo.toml"
cp "$repo/Cargo.lock" "$work/"
build() { # $1: the ccwire-host dependency line
  sed -i "s|^ccwire-host = .*|$1|" "$work/Cargo.toml"
  rm -rf "$work/target"
  local start end tree compiled
  start=$(date +%s.%N)
  compiled=$(cd "$work" && cargo build 2>&1 | grep -c '^ *Compiling ')
  end=$(date +%s.%N)
  tree=$(cd "$work" && cargo tree --prefix none -e normal | sort -u | wc -l)
  echo "$tree $compiled $(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')"
}
read -r full_tree full_built full_s < <(build "ccwire-host = { path = \"$repo/host\" }")
read -r lean_tree lean_built lean_s < <(build "ccwire-host = { path = \"$repo/host\", default-features = false }")
echo "| ccwire-host dependency | crates in the tree | crates compiled | build |"
echo "|---|---:|---:|---:|"
printf '| default features | %d | %d | %.0f s |\n' "$full_tree" "$full_built" "$full_s"
printf '| default-features = false | %d | %d | %.0f s (%.2f×) |\n' "$lean_tree" "$lean_built" "$lean_s" "$(awk -v a="$lean_s" -v b="$full_s" 'BEGIN { print a / b }')"
