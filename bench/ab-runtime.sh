#!/usr/bin/env bash
# Interleaved A/B wall-clock runs of two builds of the runtime bench (crates/saap/benches/runtime.rs):
# A, B, A, B, ... so that both see the same load drift. Prints one JSON line per scenario,
# preceded by "== <label> rep <n> load <1/5/15-min load average>".
#
#   bench/ab-runtime.sh BEFORE_BIN AFTER_BIN [REPS]
#
# Build a bench binary with `cargo bench -p saap --bench runtime --no-run` and copy the
# printed executable aside before changing the code.
set -euo pipefail
if [[ $# -lt 2 || "$1" == "--help" ]]; then
  sed -n 2,9p "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
before=$1 after=$2 reps=${3:-3}
for rep in $(seq 1 "$reps"); do
  for pair in "before:$before" "after:$after"; do
    label=${pair%%:*} bin=${pair#*:}
    echo "== $label rep $rep load $(cut -d' ' -f1-3 /proc/loadavg)"
    "$bin" --bench s1 memory
    "$bin" --bench s2 memory
    "$bin" --bench s3 memory
    SAAP_BENCH_THREADS=2 "$bin" --bench s3 memory | sed 's/"s3"/"s3-2threads"/'
    "$bin" --bench s3 sqlite
    SAAP_BENCH_THREADS=2 "$bin" --bench s3 sqlite | sed 's/"s3"/"s3-2threads"/'
  done
done
