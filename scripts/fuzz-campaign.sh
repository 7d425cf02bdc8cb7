#!/usr/bin/env bash
# Runs every fuzz target (or the ones named) for a number of executions and prints, per
# target, the executions, time, coverage and findings as a Markdown table (also written to
# fuzz/logs/summary.md). Needs a nightly toolchain; installs cargo-fuzz when missing.
#
#   scripts/fuzz-campaign.sh                      # 10,000,000 executions of every target
#   scripts/fuzz-campaign.sh --runs 100000 gateway play
#
# Each target starts from its committed corpus (fuzz/corpus/<target>.tar.gz, unpacked into
# fuzz/corpus/<target>/, where new inputs are kept), seeds built from the transcript corpus
# (fuzz/seed.py) and its regression inputs. Crashes land in fuzz/artifacts/<target>/; copy each
# into fuzz/regressions/<target>/ with the fix, so that `cargo test` replays it for ever. At the
# end each corpus is merged down to the smallest set of inputs that covers what the run covered
# and packed again into fuzz/corpus/<target>.tar.gz (commit it).
set -euo pipefail
cd "$(dirname "$0")/.."

runs=10000000
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    -h|--help) sed -n 2,14p "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
all=(session replay driver api_requests history encoders gateway play)
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")

if ! rustup toolchain list | grep -q '^nightly'; then
  echo "fuzz-campaign: needs a nightly toolchain (rustup toolchain install nightly)" >&2
  exit 2
fi
cargo +nightly fuzz --version >/dev/null 2>&1 || cargo install --locked cargo-fuzz

cd fuzz
python3 seed.py
# No sanitizer: the core is safe Rust, and the campaign wants executions.
flags=(-O -s none)
cargo +nightly fuzz build "${flags[@]}" >/dev/null
# The built binaries run directly, so that edits made meanwhile do not rebuild them.
bin=target/x86_64-unknown-linux-gnu/release
mkdir -p logs
summary=logs/summary.md
{
  echo "| target | executions | seconds | exec/s | coverage (edges) | features | corpus kept | crashes |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
} > "$summary"
status=0
for t in "${targets[@]}"; do
  mkdir -p "artifacts/$t"
  if [ ! -d "corpus/$t" ]; then
    mkdir -p "corpus/$t"
    [ ! -f "corpus/$t.tar.gz" ] || tar -xzf "corpus/$t.tar.gz" -C "corpus/$t"
  fi
  log="logs/$t.log"
  before=$(ls "artifacts/$t" | wc -l)
  start=$(date +%s)
  set +e
  "$bin/$t" -artifact_prefix="artifacts/$t/" -runs="$runs" -max_len=4096 -timeout=10 \
    -print_final_stats=1 "corpus/$t" "seeds/$t" "regressions/$t" >"$log" 2>&1
  rc=$?
  set -e
  secs=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  # Keep the smallest set of inputs that covers what the run covered, packed reproducibly.
  rm -rf "corpus/$t.min" && mkdir -p "corpus/$t.min"
  "$bin/$t" -set_cover_merge=1 -max_len=4096 "corpus/$t.min" "corpus/$t" >/dev/null 2>&1
  rm -rf "corpus/$t" && mv "corpus/$t.min" "corpus/$t"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - -C "corpus/$t" . \
    | gzip -n -9 > "corpus/$t.tar.gz"
  kept=$(ls "corpus/$t" | wc -l)
  crashes=$(( $(ls "artifacts/$t" | wc -l) - before ))
  [ "$rc" -eq 0 ] && [ "$crashes" -eq 0 ] || status=1
  echo "| $t | ${execs:-?} | $secs | ${rate:-?} | ${cov:-?} | ${ft:-?} | $kept | $crashes |" | tee -a "$summary"
done
echo
cat "$summary"
exit $status
