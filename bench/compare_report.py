#!/usr/bin/env python3
"""Build the markdown comparison table for bench/compare.sh (stdlib only).

Inputs (all written by compare.sh into its output directory):
  --saap     saap.jsonl: the JSON lines of `cargo bench -p saap --bench runtime`, each with
             an added "rep" field; medians are taken over reps.
  --peers    peers.json: the `--out` file of the peers' driver.py (its "summary" rows are
             already medians over the driver's reps).
  --core     core.txt: text output of `cargo bench -p saap-dispatch --bench core`.
  --meta     meta.json: date, nproc, load averages, reps.
  --commands commands.txt: the exact commands, one a line.

Ratios are peer / saap on wall-clock figures: > 1 means saap is faster (or smaller).
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

PEERS = [("llama-index-workflows", "LlamaIndex Workflows"), ("langgraph", "LangGraph"),
         ("python-floor", "asyncio floor")]


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def num(x):
    if x is None:
        return "–"
    a = abs(x)
    if a >= 1000:
        return f"{x:,.0f}"
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def ratio(p, s):
    if p is None or s is None or s <= 0:
        return "–"
    r = p / s
    if r >= 100:
        return f"{r:,.0f}×"
    if r >= 10:
        return f"{r:.0f}×"
    if r >= 1:
        return f"{r:.1f}×"
    return f"{r:.2f}×"


def load_saap(path):
    groups = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        d = json.loads(line)
        scenario = d["scenario"]
        # S1 is `Engine::run`'s figure; the bench also prints `start_run` + `wait_for_end`
        # (slower: a driver task and a watch per run), kept apart so medians do not mix them.
        if scenario == "s1" and d.get("api") not in (None, "run"):
            scenario = f"s1:{d['api']}"
        key = (scenario, d["backend"], d.get("fan_in"), d.get("n"))
        groups.setdefault(key, []).append(d)
    return groups


def saap_get(groups, scenario, backend, field, fan_in=None, n=None, scale=1.0):
    ds = groups.get((scenario, backend, fan_in, n), [])
    v = med([d.get(field) for d in ds])
    return None if v is None else v * scale


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--saap", required=True)
    ap.add_argument("--peers", action="append", default=[],
                    help="driver.py --out JSON; repeat: medians over files")
    ap.add_argument("--core")
    ap.add_argument("--meta", required=True)
    ap.add_argument("--commands", required=True)
    a = ap.parse_args()

    meta = json.loads(Path(a.meta).read_text())
    sg = load_saap(a.saap)
    peers = {}
    pdoc = None
    pdocs = [json.loads(Path(f).read_text()) for f in a.peers]
    peer_reps = {}  # peer -> list of summary rows (one per driver pass)
    for doc in pdocs:
        for r in doc["summary"]:
            peer_reps.setdefault(r["peer"], []).append(r)
    for p, rs in peer_reps.items():
        row = dict(rs[0])
        for k, v in rs[0].items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                row[k] = med([r.get(k) for r in rs])
        peers[p] = row
    if pdocs:
        pdoc = {"machine": pdocs[0]["machine"],
                "raw": {f"{i}|{k}": v for i, doc in enumerate(pdocs) for k, v in doc["raw"].items()}}

    def pv(key, scale=1.0):
        out = []
        for p, _ in PEERS:
            v = peers.get(p, {}).get(key)
            out.append(None if v is None else v * scale)
        return out

    none3 = [None, None, None]
    s3_mem_us_step = saap_get(sg, "s3", "memory", "total_ms", scale=0.1)  # ms*1000/10,000 steps
    s3_sql_us_step = saap_get(sg, "s3", "sqlite", "total_ms", scale=0.1)
    rows = [
        ("S1 per step, µs (10-step run ÷ 10; saap: `Engine::run`)", pv("per_step_us_avg"),
         saap_get(sg, "s1", "memory", "per_step_us"), saap_get(sg, "s1", "sqlite", "per_step_us")),
        ("S1 per step, µs — peers marginal ((10-step − 1-step) ÷ 9)", pv("per_step_us_marginal"),
         saap_get(sg, "s1", "memory", "per_step_us"), saap_get(sg, "s1", "sqlite", "per_step_us")),
        ("S1 per run (10 steps, sequential), µs", pv("s1_mean_run_us"),
         saap_get(sg, "s1", "memory", "mean_run_us"), saap_get(sg, "s1", "sqlite", "mean_run_us")),
    ]
    for n in (100, 1000, 10000):
        for fan_in, label in (("fixed_list", "fixed list"), ("list+precondition", "list + precondition")):
            m = saap_get(sg, "s2", "memory", "mean_run_us", fan_in, n)
            s = saap_get(sg, "s2", "sqlite", "mean_run_us", fan_in, n)
            if m is None and s is None:
                continue
            # the peers' driver runs S2 at N = 100 only (their primary fan-in variant)
            p = pv("s2_mean_run_ms", 1000.0) if n == 100 else none3
            rows.append((f"S2 fan-out/fan-in N={n:,} per run, µs (saap: {label})", p, m, s))
    rows += [
        ("S3 1,000 concurrent 10-step runs, total ms (saap memory: start_run, all in flight)", pv("s3_wall_s", 1000.0),
         saap_get(sg, "s3", "memory", "total_ms"), saap_get(sg, "s3", "sqlite", "total_ms")),
        ("S3 per step (total ÷ 10,000 steps), µs", pv("s3_wall_s", 100.0),
         s3_mem_us_step, s3_sql_us_step),
        # peers: ru_maxrss growth over the 1,000 runs (MiB); saap: VmHWM growth (KiB) / run
        ("S3 peak RSS growth per in-flight run, KiB", pv("s3_rss_growth_mib", 1024.0 / 1000.0),
         saap_get(sg, "s3", "memory", "peak_rss_growth_kib_per_run"),
         saap_get(sg, "s3", "sqlite", "peak_rss_growth_kib_per_run")),
    ]

    L = []
    L.append(f"## saap vs peers — {meta['date_start']} (git {meta['git']})\n")
    L.append(f"- Machine: `nproc` = {meta['nproc']}; 1-min/5-min/15-min load average "
             f"at start **{meta['load_start']}**, at end **{meta['load_end']}** "
             f"(finished {meta['date_end']}).")
    if pdoc:
        loads = [d.get("loadavg1_before") for v in pdoc.get("raw", {}).values() for d in v]
        loads = [x for x in loads if x is not None]
        vers = ", ".join(f"{p} {peers[p]['version']}" for p, _ in PEERS if p in peers)
        L.append(f"- Peers: {vers}; Python {pdoc['machine']['python']}; medians of "
                 f"{len(pdocs)} driver pass(es) (each scenario a fresh process), interleaved "
                 f"with the saap passes; 1-min load before each peer "
                 f"process min {min(loads):.2f} / median {med(loads):.2f} / max {max(loads):.2f}.")
    else:
        L.append("- Peers: not run (`--no-peers`).")
    L.append(f"- saap: `SAAP_BENCH_THREADS={meta['threads']}` "
             f"({'current-thread' if meta['threads'] <= 1 else 'multi-thread'} tokio runtime), "
             f"decision records on, median of {meta['reps']} process(es) per scenario; "
             "S3 runs alone per backend (fresh process) so its RSS growth is its own.")
    L.append("- All figures are wall-clock. **Ratio = peer / saap**: > 1× means saap is "
             "faster (or smaller); < 1× means the peer is. Ratio cells list "
             "LlamaIndex · LangGraph · asyncio floor.\n")

    L.append("| shape | LlamaIndex Workflows | LangGraph | asyncio floor | saap memory | saap sqlite "
             "| peer / saap memory | peer / saap sqlite |")
    L.append("|---|---|---|---|---|---|---|---|")
    for label, p, m, s in rows:
        rm = " · ".join(ratio(x, m) for x in p) if any(x is not None for x in p) else "–"
        rs = " · ".join(ratio(x, s) for x in p) if any(x is not None for x in p) else "–"
        L.append(f"| {label} | " + " | ".join(num(x) for x in p)
                 + f" | {num(m)} | {num(s)} | {rm} | {rs} |")
    if pdoc:
        variants = ", ".join(f"{p}: {peers[p]['s2_variant']}" for p, _ in PEERS if p in peers)
        L.append(f"\nPeer S2 variants: {variants}; the peers' driver runs S2 at N = 100 only, so "
                 "N = 1,000 and 10,000 have saap figures only.")

    # Spread across reps: how much to trust a ratio.
    def spread(vals, unit):
        vals = [v for v in vals if v is not None]
        if len(vals) < 2:
            return "–"
        return f"{num(min(vals))}–{num(max(vals))} {unit}"
    def saap_all(scenario, backend, field, scale=1.0):
        return [d.get(field) * scale for d in sg.get((scenario, backend, None, None), [])
                if d.get(field) is not None]
    def peer_all(p, key, scale=1.0):
        return [r[key] * scale for r in peer_reps.get(p, []) if r.get(key) is not None]
    if meta["reps"] > 1:
        L.append(f"\nSpread over the {meta['reps']} reps (min–max):\n")
        L.append("| figure | " + " | ".join(n for _, n in PEERS) + " | saap memory | saap sqlite |")
        L.append("|---|---|---|---|---|---|")
        L.append("| S1 per step | " + " | ".join(spread(peer_all(p, "per_step_us_avg"), "µs") for p, _ in PEERS)
                 + f" | {spread(saap_all('s1', 'memory', 'per_step_us'), 'µs')}"
                 + f" | {spread(saap_all('s1', 'sqlite', 'per_step_us'), 'µs')} |")
        L.append("| S3 total | " + " | ".join(spread(peer_all(p, "s3_wall_s", 1000.0), "ms") for p, _ in PEERS)
                 + f" | {spread(saap_all('s3', 'memory', 'total_ms'), 'ms')}"
                 + f" | {spread(saap_all('s3', 'sqlite', 'total_ms'), 'ms')} |")

    # Issue 3 targets against the saap medians.
    def status(v, limit):
        if v is None:
            return "–"
        return "met" if v <= limit else f"**missed** ({v / limit:.2f}× the target)"
    s2_100 = saap_get(sg, "s2", "memory", "mean_run_us", "fixed_list", 100)
    s2_10k = saap_get(sg, "s2", "memory", "mean_run_us", "fixed_list", 10000)
    lin = (s2_10k / (100 * s2_100)) if s2_100 and s2_10k else None
    s1_sql = saap_get(sg, "s1", "sqlite", "per_step_us")
    s3_mem = saap_get(sg, "s3", "memory", "total_ms")
    rss_mem = saap_get(sg, "s3", "memory", "peak_rss_growth_kib_per_run")
    targets = [
        ("in-memory S1 per step ≤ 0.2 µs", saap_get(sg, "s1", "memory", "per_step_us"), 0.2, "µs"),
        ("in-memory S2 N=100 ≤ 40 µs (fixed list)", s2_100, 40.0, "µs"),
        ("in-memory S2 linear to N=10,000: t(10k) ÷ (100 × t(100)) ≤ 1.2 (linear within 20 %)", lin, 1.2, "×"),
        ("in-memory S3 (1,000 in-flight 10-step runs) ≤ 5 ms", s3_mem, 5.0, "ms"),
        ("in-memory S3 ≤ 2 KiB per in-flight run", rss_mem, 2.0, "KiB"),
        ("embedded durable ≤ 20 µs per step — sequential S1 (one fsync per step)", s1_sql, 20.0, "µs"),
        ("embedded durable ≤ 20 µs per step — S3 concurrent (group commit)", s3_sql_us_step, 20.0, "µs"),
    ]
    L.append("\n### Issue 3 targets (saap medians of this run)\n")
    L.append("| target | saap | status |")
    L.append("|---|---|---|")
    for label, v, limit, unit in targets:
        L.append(f"| {label} | {num(v)} {unit if v is not None else ''} | {status(v, limit)} |")

    if a.core and Path(a.core).exists():
        L.append("\n### Dispatch core alone (`saap-dispatch --bench core`, no engine, no store)\n")
        L.append("```")
        L.extend(l for l in Path(a.core).read_text().splitlines() if l.strip())
        L.append("```")

    L.append("\n### Commands\n")
    L.append("```sh")
    L.append(f"{meta['invocation'].strip()}   # which ran:")
    L.extend(Path(a.commands).read_text().splitlines())
    L.append("```")
    print("\n".join(L))


if __name__ == "__main__":
    main()
