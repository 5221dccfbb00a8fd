#!/usr/bin/env bash
# Instruction counts of the dispatch core (see ../BENCHMARKS.md): builds the core bench with
# symbols, runs its --count shapes under callgrind at two sizes and prints the cost per step
# (S1) or per arrival (S2) by difference, plus Run::returned's inclusive cost per completion.
# Usage: bash crates/saap-dispatch/benches/callgrind.sh [output dir]   (needs valgrind)
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${1:-$(mktemp -d)}
mkdir -p "$out"
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
bin=$(CARGO_PROFILE_BENCH_STRIP=false CARGO_PROFILE_BENCH_DEBUG=line-tables-only \
    cargo bench -p saap-dispatch --bench core --no-run --message-format=json 2>/dev/null |
    sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
[ -x "$bin" ] || { echo "could not build the core bench" >&2; exit 1; }
uptime
ir() { # name args...: total instructions of one run
    valgrind --tool=callgrind --callgrind-out-file="$out/$1.out" "${@:2}" 2>&1 |
        sed -n 's/.*refs: *\([0-9,]*\).*/\1/p' | tr -d ,
}
incl() { # file function: inclusive instructions of a function
    callgrind_annotate --inclusive=yes --threshold=100 "$out/$1.out" 2>/dev/null |
        grep -F "$2 [" | head -1 | awk '{print $1}' | tr -d ,
}
a=$(ir s1a "$bin" --count s1 --runs 1000)
b=$(ir s1b "$bin" --count s1 --runs 2000)
echo "S1 chain-10: $(((b - a) / 10000)) instructions per step in total (harness, run creation and drop included)"
r=$(incl s1b 'saap_dispatch::run::Run::returned')
echo "S1 chain-10: $((r / 20000)) instructions per completion in Run::returned (append, dispatch, start, records)"
for shape in s1reset; do
    a=$(ir "${shape}a" "$bin" --count "$shape" --runs 1000)
    b=$(ir "${shape}b" "$bin" --count "$shape" --runs 2000)
    echo "$shape chain-10, one recycled run: $(((b - a) / 10000)) instructions per step in total"
done
harness() { # file: the bench driver's own instructions (its self cost, all inlined parts)
    callgrind_annotate --inclusive=no --threshold=100 "$out/$1.out" 2>/dev/null |
        grep -F ':core::drive_returned' | grep -vF '=>' | awk '{gsub(",", "", $1); s += $1} END {print s + 0}'
}
for shape in s2 s2list s2w; do
    a=$(ir "${shape}a" "$bin" --count "$shape" --n 1000)
    b=$(ir "${shape}b" "$bin" --count "$shape" --n 2000)
    h=$(($(harness "${shape}b") - $(harness "${shape}a")))
    echo "$shape: $(((b - a) / 1000)) instructions per arrival (N = 2,000 minus N = 1,000);" \
        "$(((b - a - h) / 1000)) without the bench driver's own work (deriving ids, filling the buffer)"
done
"$bin" --count s1 --runs 1 | grep bytes
echo "callgrind files: $out"
