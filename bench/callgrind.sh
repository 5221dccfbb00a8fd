#!/usr/bin/env bash
# Instruction counts of saap's runtime bench under callgrind: repeatable whatever else the
# machine does, so two builds can be compared on a loaded machine (wall clock cannot).
# For each binary (a built `runtime` bench, e.g. target/release/deps/runtime-<hash>):
#   S1 per step  = (total of SAAP_BENCH_RUNS=3000 - total of 1000) / 21,000   (Engine::run)
#   S3 per run   = (total of SAAP_BENCH_S3_RUNS=2000 - total of 1000) / 1,000 (start_run)
#   S2 per item  = (total of N = 1,000 - total of N = 100) / (31 runs x 900)  (fixed list;
#                  the marginal cost of one more item, which needs no symbols)
# Build a binary: `cargo bench -p saap --bench runtime --no-run` (the path is printed).
# Usage: bench/callgrind.sh BIN [BIN...]
set -euo pipefail
if [ $# -lt 1 ]; then
  sed -n '2,10p' "$0" >&2
  exit 2
fi
command -v valgrind >/dev/null || { echo "error: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
total() { # env assignments..., then the bench arguments
  local out="$tmp/cg.out"
  env "$@" valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" --bench "${args[@]}" >/dev/null 2>&1
  awk '/^totals:|^summary:/ {print $2; exit}' "$out"
}
for bin in "$@"; do
  args=(s1 memory); a=$(total SAAP_BENCH_API=run SAAP_BENCH_RUNS=1000); b=$(total SAAP_BENCH_API=run SAAP_BENCH_RUNS=3000)
  s1=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.1f", (b - a) / 21000}')
  args=(s3 memory); a=$(total SAAP_BENCH_API=start_run SAAP_BENCH_S3_RUNS=1000); b=$(total SAAP_BENCH_API=start_run SAAP_BENCH_S3_RUNS=2000)
  s3=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.0f", (b - a) / 1000}')
  args=(s2 memory); a=$(total SAAP_BENCH_FAN=fixed SAAP_BENCH_N=100); b=$(total SAAP_BENCH_FAN=fixed SAAP_BENCH_N=1000)
  s2=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.1f", (b - a) / (31 * 900)}')
  echo "$bin: S1 $s1 instructions/step  S3 $s3 instructions/run  S2 $s2 instructions/item (marginal, N 100 -> 1,000)"
done
