#!/usr/bin/env bash
# Run the peer benchmarks (LlamaIndex Workflows, LangGraph, plain-asyncio floor) and saap's
# runtime benchmark side by side in ONE invocation and print a markdown table of ratios
# (peer / saap; > 1 means saap is faster or smaller).
#
# Usage: bench/compare.sh [--reps N] [--quick] [--no-peers] [--no-core] [--threads N] [--out DIR]
#   --reps N     interleaved repetitions (fresh processes) of the peers and saap (default 3)
#   --quick      1 repetition, dispatch-core bench in its --quick mode
#   --no-peers   saap only (no venv, no Python peers)
#   --no-core    skip the dispatch-core bench (saap-dispatch --bench core)
#   --threads N  SAAP_BENCH_THREADS for saap (default 1: current-thread runtime, like the
#                single-threaded asyncio peers)
#   --out DIR    where raw outputs and report.md go (default ${TMPDIR:-/tmp}/saap-compare-<UTC time>)
# Env: PEERS_DIR (default /work/shared/bench/peers), PEERS_VENV, PYTHON (see PEERS_DIR/run.sh),
#      CARGO_TARGET_DIR (default <repo>/target-bench).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PEERS_DIR="${PEERS_DIR:-/work/shared/bench/peers}"
export PEERS_VENV="${PEERS_VENV:-${TMPDIR:-/tmp}/peers-venv}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target-bench}"

ORIG_ARGS="$*"
REPS=3; QUICK=0; PEERS=1; CORE=1; THREADS=1; OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS="$2"; shift 2 ;;
    --reps=*) REPS="${1#*=}"; shift ;;
    --quick) QUICK=1; shift ;;
    --no-peers) PEERS=0; shift ;;
    --no-core) CORE=0; shift ;;
    --threads) THREADS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$QUICK" = 1 ]; then REPS=1; fi
case "$REPS" in ''|*[!0-9]*|0) echo "compare.sh: --reps needs a positive integer" >&2; exit 2 ;; esac
OUT="${OUT:-${TMPDIR:-/tmp}/saap-compare-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT"
: > "$OUT/commands.txt"
: > "$OUT/saap.jsonl"

log() { echo "[compare] $*" >&2; }
# run CMD... : record it, run it from the repo root
record() { printf '%s\n' "$*" >> "$OUT/commands.txt"; }

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
DATE_START="$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
LOAD_START="$(loadavg)"
log "output in $OUT; load average at start: $LOAD_START ($(nproc) cores)"

cd "$ROOT"

# 1. Build the saap bench binaries (release profile, via cargo bench --no-run).
log "building saap bench binaries (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
# The benches then run from these binaries (not `cargo bench` again), so every rep measures the
# same build even if the shared working tree changes meanwhile.
bench_exe() { # package bench-name -> path of the built bench executable
  cargo bench -q -p "$1" --bench "$2" --no-run --message-format=json 2>>"$OUT/build.log" |
    python3 -c 'import sys, json
for l in sys.stdin:
    try: j = json.loads(l)
    except ValueError: continue
    if j.get("reason") == "compiler-artifact" and j.get("executable") and j["target"]["name"] == sys.argv[1]:
        print(j["executable"])' "$2" | tail -n 1
}
record "CARGO_TARGET_DIR=$CARGO_TARGET_DIR cargo bench -p saap --bench runtime --no-run"
RUNTIME_BIN="$(bench_exe saap runtime)" || true
[ -n "$RUNTIME_BIN" ] && [ -x "$RUNTIME_BIN" ] || {
  echo "compare.sh: building saap's runtime bench failed; last lines of $OUT/build.log:" >&2
  tail -n 25 "$OUT/build.log" | sed 's/^/  | /' >&2; exit 5; }
if [ "$CORE" = 1 ]; then
  record "CARGO_TARGET_DIR=$CARGO_TARGET_DIR cargo bench -p saap-dispatch --bench core --no-run"
  # informational only: if it does not build (e.g. the working tree is mid-edit), go on without it
  CORE_BIN="$(bench_exe saap-dispatch core)" || true
  if [ -z "$CORE_BIN" ] || [ ! -x "$CORE_BIN" ]; then
    cargo bench -q -p saap-dispatch --bench core --no-run > "$OUT/core-build.log" 2>&1 || true
    log "WARNING: the dispatch core bench did not build; skipping it (see $OUT/core-build.log)"
    CORE=skipped
    echo "(not run: \`cargo bench -p saap-dispatch --bench core --no-run\` failed: $(grep -m1 '^error' "$OUT/core-build.log" || echo 'see core-build.log'))" > "$OUT/core.txt"
  fi
fi

# 2. Peers: make sure the venv exists (run.sh creates it), then run the driver.
if [ "$PEERS" = 1 ]; then
  [ -x "$PEERS_DIR/run.sh" ] || { echo "compare.sh: $PEERS_DIR/run.sh not found (set PEERS_DIR or use --no-peers)" >&2; exit 3; }
  [ -x /usr/bin/time ] || { echo "compare.sh: the peers need /usr/bin/time: apt-get install -y time (or use --no-peers)" >&2; exit 3; }
  if ! "$PEERS_VENV/bin/python" -c "import workflows, langgraph" 2>/dev/null; then
    log "creating the peers venv at $PEERS_VENV (pip install llama-index-workflows, langgraph; takes minutes)"
    # run.sh creates the venv, then `driver.py --help` exits at once.
    if ! "$PEERS_DIR/run.sh" --help > "$OUT/venv-install.log" 2>&1 \
       || ! "$PEERS_VENV/bin/python" -c "import workflows, langgraph" 2>>"$OUT/venv-install.log"; then
      echo "compare.sh: could not create the peers venv at $PEERS_VENV" >&2
      echo "  (needs ${PYTHON:-python3.11} with venv and pip access to PyPI; log: $OUT/venv-install.log)" >&2
      tail -n 15 "$OUT/venv-install.log" | sed 's/^/  | /' >&2
      echo "  Run with --no-peers to measure saap alone." >&2
      exit 3
    fi
  fi
fi

# 3. Interleave: rep k = one peers' driver pass (--reps 1, every scenario in a fresh process),
#    then one saap pass, so both sides see the same load drift; medians are taken over reps.
#    saap's S3 runs alone per backend in its own process so its peak-RSS growth is measured
#    from a fresh process (in an all-scenarios run the S2 N=10,000 runs already set the
#    process peak and S3 reads 0).
PEER_ARGS=()
for rep in $(seq 1 "$REPS"); do
  if [ "$PEERS" = 1 ]; then
    log "rep $rep/$REPS: peers (each scenario in a fresh process)"
    [ "$rep" = 1 ] && record "PEERS_VENV=$PEERS_VENV $PEERS_DIR/run.sh --reps 1 --out $OUT/peers-rep<k>.json   # x$REPS, interleaved with saap"
    "$PEERS_DIR/run.sh" --reps 1 --out "$OUT/peers-rep$rep.json" > "$OUT/peers-rep$rep.md" 2>> "$OUT/peers.log" || {
      echo "compare.sh: the peer driver failed; last lines of $OUT/peers.log:" >&2
      tail -n 20 "$OUT/peers.log" | sed 's/^/  | /' >&2; exit 4; }
    PEER_ARGS+=(--peers "$OUT/peers-rep$rep.json")
  fi
  log "rep $rep/$REPS: saap runtime bench (SAAP_BENCH_THREADS=$THREADS)"
  for filter in "s1" "s2" "s3 memory" "s3 sqlite"; do
    # S3 in memory with start_run + wait_for_end: all 1,000 runs are started before the
    # engine's driver executes any, as the peers' asyncio.gather has them all in flight.
    # (With Engine::run, a run whose steps never wait ends inside its task's first poll, so
    # the runs would follow one another.)
    api=()
    [ "$filter" = "s3 memory" ] && api=(SAAP_BENCH_API=start_run)
    [ "$rep" = 1 ] && record "(cd crates/saap && SAAP_BENCH_THREADS=$THREADS ${api[*]} $RUNTIME_BIN --bench $filter)   # = cargo bench -p saap --bench runtime -- $filter; x$REPS"
    # shellcheck disable=SC2086
    (cd "$ROOT/crates/saap" && env SAAP_BENCH_THREADS="$THREADS" "${api[@]}" "$RUNTIME_BIN" --bench $filter) \
      2> "$OUT/saap.err" | grep '^{' | sed "s/^{/{\"rep\":$rep,/" >> "$OUT/saap.jsonl" || {
        echo "compare.sh: saap bench ($filter) failed:" >&2; tail -n 20 "$OUT/saap.err" >&2; exit 5; }
  done
done

# 4. Dispatch core alone (text lines, shown verbatim).
if [ "$CORE" = 1 ]; then
  CORE_ARGS=""; [ "$QUICK" = 1 ] && CORE_ARGS="--quick"
  record "(cd crates/saap-dispatch && $CORE_BIN --bench $CORE_ARGS)   # = cargo bench -p saap-dispatch --bench core -- $CORE_ARGS"
  # shellcheck disable=SC2086
  (cd "$ROOT/crates/saap-dispatch" && "$CORE_BIN" --bench $CORE_ARGS) > "$OUT/core.txt" 2> "$OUT/core.err" || {
    echo "compare.sh: dispatch core bench failed:" >&2; tail -n 20 "$OUT/core.err" >&2; exit 5; }
fi

LOAD_END="$(loadavg)"
DATE_END="$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
cat > "$OUT/meta.json" <<EOF
{"date_start": "$DATE_START", "date_end": "$DATE_END", "nproc": $(nproc),
 "load_start": "$LOAD_START", "load_end": "$LOAD_END", "reps": $REPS, "quick": $QUICK,
 "threads": $THREADS, "git": "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$( [ -n "$(git status --porcelain -- crates Cargo.toml Cargo.lock 2>/dev/null)" ] && echo ' + uncommitted changes in crates/')",
 "invocation": "bench/compare.sh $ORIG_ARGS"}
EOF

python3 "$HERE/compare_report.py" --meta "$OUT/meta.json" --commands "$OUT/commands.txt" \
  --saap "$OUT/saap.jsonl" \
  "${PEER_ARGS[@]}" \
  $( [ "$CORE" != 0 ] && echo "--core $OUT/core.txt" ) | tee "$OUT/report.md"
log "report: $OUT/report.md"
