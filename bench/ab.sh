#!/usr/bin/env bash
# Side-by-side wall clock of two (or more) builds of saap's runtime bench: runs each binary
# REPS times, interleaved, in fresh processes, and prints the min and median of one field
# of the scenario's JSON line. Build the binaries first, e.g. for a commit A and the tree:
#   git stash; cargo bench -p saap --bench runtime --no-run; cp target/release/deps/runtime-<hash> /tmp/rt-a
#   git stash pop; cargo bench -p saap --bench runtime --no-run; cp target/release/deps/runtime-<hash> /tmp/rt-b
#
# Usage: bench/ab.sh REPS SCENARIO BACKEND FIELD BIN...
#   bench/ab.sh 7 s1 memory per_step_us /tmp/rt-a /tmp/rt-b
#   bench/ab.sh 5 s2 memory mean_run_us /tmp/rt-a /tmp/rt-b        # first line: fixed list
#   SAAP_BENCH_API=start_run bench/ab.sh 7 s3 memory total_ms /tmp/rt-a /tmp/rt-b
# The load average is printed at the end: wall figures are only comparable within one run.
set -euo pipefail
if [ $# -lt 5 ]; then
  sed -n '2,12p' "$0" >&2
  exit 2
fi
reps=$1 scenario=$2 backend=$3 field=$4
shift 4
declare -A vals
for _ in $(seq "$reps"); do
  for bin in "$@"; do
    v=$("$bin" --bench "$scenario" "$backend" | grep -o "\"$field\":[0-9.]*" | head -1 | cut -d: -f2 || true)
    if [ -z "$v" ]; then
      echo "error: $bin printed no \"$field\" for $scenario $backend; check the field name in its JSON line" >&2
      exit 1
    fi
    vals[$bin]="${vals[$bin]:-} $v"
  done
done
for bin in "$@"; do
  echo "$bin: $(echo ${vals[$bin]} | tr ' ' '\n' | sort -g |
    awk '{a[NR]=$1} END {printf "min %s  median %s  (n=%d)", a[1], a[int((NR+1)/2)], NR}')"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
