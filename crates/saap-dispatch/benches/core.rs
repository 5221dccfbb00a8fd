//! Benchmark of the dispatch core alone, decision records on (issue 2's shapes):
//! S1 a 10-step chain, S2 fan-out of N with fan-in by list (+ precondition) and by fixed
//! list, S3 1,000 concurrent 10-step runs. Prints medians of several repetitions.
//!
//! Run: `cargo bench -p saap-dispatch --bench core` (add `-- --quick` for a short run).
//!
//! Instruction counts (see `BENCHMARKS.md`): `--count s1 --runs R` drives R fresh chain-10
//! runs once, the way the engine does (`Run::complete_returned` with a reused output
//! buffer), and prints nothing else; `--count s2 --n N` drives one fan-out of N (fixed
//! list; `--count s2list` for list + precondition; `--count s2w` with a worker execution
//! per item between the fan-out and the fan-in, as issue 3's S2; `--count s1reset` recycles
//! one run with `Run::reset` as the engine does). Run each at two sizes under
//! `valgrind --tool=callgrind` and divide the difference by the added steps or arrivals
//! (`benches/callgrind.sh` does it; figures in `BENCHMARKS.md`).

use saap_dispatch::{
    CompiledSpec, DeclaredConditions, NewEvent, Outcome, Run, SpecSyntax, compile_spec_text,
};
use saap_dispatch::{counter_event_id, derived_event_id};
use std::sync::Arc;
use std::time::Instant;

/// `println!` that ends the bench quietly when stdout is closed (e.g. piped to `head`).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!(std::io::stdout().lock(), $($arg)*) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                std::process::exit(0);
            }
            panic!("cannot write the bench output: {e}");
        }
    }};
}

fn chain_spec(n: usize) -> CompiledSpec {
    let mut y = String::from("name: Chain\nevents:\n");
    for i in 0..n {
        y += &format!("  - {{name: E{i}}}\n");
    }
    y += "  - {name: Done, parents: [StopEvent]}\nsteps:\n";
    for i in 0..n {
        let input = if i == 0 {
            "StartEvent".to_string()
        } else {
            format!("E{}", i - 1)
        };
        let output = if i == n - 1 {
            "Done".to_string()
        } else {
            format!("E{i}")
        };
        y += &format!(
            "  - {{name: s{i}, params: [{{name: x, kind: required, types: [{input}]}}], outputs: [{output}]}}\n"
        );
    }
    compile_spec_text(&y, SpecSyntax::Yaml).expect("chain spec")
}

fn fan_spec(n: usize, fixed: bool) -> CompiledSpec {
    let join = if fixed {
        format!("params: [{{name: items, kind: fixed_list, size: {n}, types: [Item]}}]")
    } else {
        format!(
            "params: [{{name: items, kind: list, types: [Item]}}]\n    precondition: {{name: all_in, when: {{count_at_least: {{param: items, n: {n}}}}}}}"
        )
    };
    let y = format!(
        "name: Fan
events:
  - {{name: Item}}
  - {{name: Done, parents: [StopEvent]}}
steps:
  - name: fan
    params: [{{name: q, kind: required, types: [StartEvent]}}]
    outputs: [Item]
  - name: join
    {join}
    outputs: [Done]
"
    );
    compile_spec_text(&y, SpecSyntax::Yaml).expect("fan spec")
}

/// Issue 3's S2 as an engine runs it: `fan` emits `n` items, a `work` execution per item
/// returns one result, and a fixed list of `n` results joins them.
fn fan_workers_spec(n: usize) -> CompiledSpec {
    let y = format!(
        "name: FanWork
events:
  - {{name: Item}}
  - {{name: Res}}
  - {{name: Done, parents: [StopEvent]}}
steps:
  - name: fan
    params: [{{name: q, kind: required, types: [StartEvent]}}]
    outputs: [Item]
  - name: work
    params: [{{name: item, kind: required, types: [Item]}}]
    outputs: [Res]
  - name: join
    params: [{{name: results, kind: fixed_list, size: {n}, types: [Res]}}]
    outputs: [Done]
"
    );
    compile_spec_text(&y, SpecSyntax::Yaml).expect("fan-work spec")
}

/// Drives one run to its end: every started execution completes with its step's
/// declared outputs (`fan` emits `n` items). Returns the number of step executions.
fn drive(run: &mut Run, fan_n: usize, buf: &mut Vec<saap_dispatch::ExecutionId>) -> usize {
    let start = run.spec().type_id("StartEvent").expect("start");
    run.append(
        NewEvent::known(counter_event_id(1), start),
        &mut DeclaredConditions,
    )
    .expect("start");
    let mut steps = 0;
    run.drain_started_into(buf);
    while let Some(x) = buf.pop() {
        steps += 1;
        let exec = run.execution(x).expect("exec");
        let s = &run.spec().steps[exec.step as usize];
        let reps = if s.name == "fan" { fan_n } else { 1 };
        let outs: Vec<NewEvent> = (0..reps)
            .flat_map(|i| {
                s.outputs
                    .iter()
                    .enumerate()
                    .map(move |(j, t)| (i * 8 + j, *t))
            })
            .map(|(i, t)| NewEvent::known(derived_event_id(run.run_key(), x, i as u32), t))
            .collect();
        run.complete(x, 1, Outcome::Returned(outs), &mut DeclaredConditions)
            .expect("complete");
        run.drain_started_into(buf);
    }
    steps
}

/// Drives one run to its end like the engine: outputs handed over in a reused buffer
/// (`Run::complete_returned`). Returns the number of step executions.
fn drive_returned(
    run: &mut Run,
    start: saap_dispatch::TypeId,
    fan_n: usize,
    buf: &mut Vec<saap_dispatch::ExecutionId>,
    outs: &mut Vec<NewEvent>,
) -> usize {
    run.append(
        NewEvent::known(counter_event_id(1), start),
        &mut DeclaredConditions,
    )
    .expect("start");
    let mut steps = 0;
    run.drain_started_into(buf);
    while let Some(x) = buf.pop() {
        steps += 1;
        let step = run.execution(x).expect("exec").step;
        let s = &run.spec().steps[step as usize];
        // The fan-out step is step 0 of the fan spec.
        let reps = if step == 0 { fan_n } else { 1 };
        for i in 0..reps {
            for (j, t) in s.outputs.iter().enumerate() {
                let id = derived_event_id(run.run_key(), x, (i * 8 + j) as u32);
                outs.push(NewEvent::known(id, *t));
            }
        }
        run.complete_returned(x, 1, outs, &mut DeclaredConditions)
            .expect("complete");
        run.drain_started_into(buf);
    }
    steps
}

/// `--count <shape>`: one pass of a shape, for instruction counting under callgrind.
fn count_mode(shape: &str, arg: impl Fn(&str) -> Option<usize>) {
    let mut buf = Vec::new();
    let mut outs = Vec::new();
    let steps = match shape {
        "s1" => {
            let proto = Run::new(Arc::new(chain_spec(10)), 0);
            let start = proto.spec().type_id("StartEvent").expect("start");
            let runs = arg("--runs").unwrap_or(1_000);
            let mut steps = 0;
            for r in 0..runs {
                let mut run = proto.sibling(r as u64);
                steps += drive_returned(&mut run, start, 1, &mut buf, &mut outs);
                std::hint::black_box(&run);
            }
            // Bytes of one run (Run::memory_bytes): fresh, after its start event, ended.
            let mut run = proto.sibling(1);
            let fresh = run.memory_bytes();
            run.append(
                NewEvent::known(counter_event_id(1), start),
                &mut DeclaredConditions,
            )
            .expect("start");
            let started = run.memory_bytes();
            run.take_started();
            let mut run = proto.sibling(1);
            drive_returned(&mut run, start, 1, &mut buf, &mut outs);
            out!(
                "s1: bytes per chain-10 run: {fresh} fresh, {started} started, {} ended",
                run.memory_bytes()
            );
            steps
        }
        // One run recycled with `Run::reset`, as the engine does: the steady per-step cost
        // without run creation, growth and drop.
        "s1reset" => {
            let mut run = Run::new(Arc::new(chain_spec(10)), 0);
            let start = run.spec().type_id("StartEvent").expect("start");
            let runs = arg("--runs").unwrap_or(1_000);
            let mut steps = 0;
            for r in 0..runs {
                run.reset(r as u64);
                steps += drive_returned(&mut run, start, 1, &mut buf, &mut outs);
                std::hint::black_box(&run);
            }
            steps
        }
        "s2" | "s2list" => {
            let n = arg("--n").unwrap_or(1_000);
            let spec = Arc::new(fan_spec(n, shape == "s2"));
            let start = spec.type_id("StartEvent").expect("start");
            let mut run = Run::new(spec, 1);
            let steps = drive_returned(&mut run, start, n, &mut buf, &mut outs);
            std::hint::black_box(&run);
            steps
        }
        "s2w" => {
            let n = arg("--n").unwrap_or(1_000);
            let spec = Arc::new(fan_workers_spec(n));
            let start = spec.type_id("StartEvent").expect("start");
            let mut run = Run::new(spec, 1);
            let steps = drive_returned(&mut run, start, n, &mut buf, &mut outs);
            std::hint::black_box(&run);
            steps
        }
        other => panic!("--count takes s1, s1reset, s2, s2list or s2w, not {other}"),
    };
    out!("{shape}: {steps} step executions");
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    // `--shape s1` (or s2, s3) runs one shape only, e.g. under a profiler.
    let only = args
        .iter()
        .position(|a| a == "--shape")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.to_ascii_lowercase());
    let want = |shape: &str| only.as_deref().is_none_or(|o| o == shape);
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse::<usize>().ok())
    };
    if let Some(shape) = args
        .iter()
        .position(|a| a == "--count")
        .and_then(|i| args.get(i + 1))
    {
        count_mode(shape, arg);
        return;
    }
    let reps = if quick { 3 } else { 9 };
    let mut buf = Vec::new();

    // S1: 10-step chain, many runs; ns per step (append + candidacy + readiness + binding +
    // start + completion + records).
    let spec = Arc::new(chain_spec(10));
    let runs = if quick { 2_000 } else { 20_000 };
    let proto = Run::new(spec.clone(), 0);
    let mut samples = Vec::new();
    for _ in 0..if want("s1") { reps } else { 0 } {
        let t = Instant::now();
        let mut steps = 0;
        for r in 0..runs {
            let mut run = proto.sibling(r as u64);
            steps += drive(&mut run, 1, &mut buf);
            std::hint::black_box(&run);
        }
        samples.push(t.elapsed().as_nanos() as f64 / steps as f64);
    }
    // The same with one run's tables recycled (`Run::reset`), as an engine that reuses
    // ended runs does: no allocation for the run itself.
    let mut recycled = Vec::new();
    let mut reused = proto.sibling(0);
    for _ in 0..if want("s1") { reps } else { 0 } {
        let t = Instant::now();
        let mut steps = 0;
        for r in 0..runs {
            reused.reset(r as u64);
            steps += drive(&mut reused, 1, &mut buf);
            std::hint::black_box(&reused);
        }
        recycled.push(t.elapsed().as_nanos() as f64 / steps as f64);
    }
    // The harness alone: what `drive` does outside the core for each step (look up the
    // step's outputs, build the output Vec with derived ids, hand it over), so that the
    // decision work can be reported as the difference.
    let mut harness = Vec::new();
    for _ in 0..if want("s1") { reps } else { 0 } {
        let t = Instant::now();
        let mut steps = 0usize;
        let outputs = &proto.spec().steps[0].outputs;
        for r in 0..runs {
            for x in 0..10u32 {
                let outs: Vec<NewEvent> = outputs
                    .iter()
                    .enumerate()
                    .map(|(i, t)| {
                        NewEvent::known(
                            derived_event_id(r as u64, saap_dispatch::ExecutionId(x), i as u32),
                            *t,
                        )
                    })
                    .collect();
                std::hint::black_box(outs);
                steps += 1;
            }
        }
        harness.push(t.elapsed().as_nanos() as f64 / steps as f64);
    }
    if want("s1") {
        let (total, alone) = (median(samples.clone()), median(harness));
        let reused = median(recycled);
        out!(
            "S1 chain-10: harness alone {:.3} µs per step; decision work (total − harness) {:.3} µs per step with a new run each time, {:.3} µs with recycled run tables",
            alone / 1000.0,
            (total - alone) / 1000.0,
            (reused - alone) / 1000.0
        );
        out!(
            "S1 chain-10: {:.3} µs per step (median of {reps}, {runs} runs each, run creation included)",
            median(samples) / 1000.0
        );
    }

    // S2: fan-out N, fan-in by list+precondition and by fixed list.
    for fixed in [false, true].into_iter().filter(|_| want("s2")) {
        for n in [100usize, 1_000, 10_000] {
            let spec = Arc::new(fan_spec(n, fixed));
            let mut samples = Vec::new();
            let mut bytes = 0;
            for _ in 0..reps {
                let t = Instant::now();
                let mut run = Run::new(spec.clone(), 1);
                let steps = drive(&mut run, n, &mut buf);
                assert_eq!(steps, 2, "fan then one join");
                samples.push(t.elapsed().as_nanos() as f64);
                bytes = run.state_bytes();
                std::hint::black_box(&run);
            }
            let total = median(samples);
            out!(
                "S2 fan-in by {:<10} N={n:>6}: {:>9.1} µs total, {:.3} µs per arrival, state {bytes} B",
                if fixed { "fixed list" } else { "list+pre" },
                total / 1000.0,
                total / n as f64 / 1000.0
            );
        }
    }

    // L: `saap explain` on an unbounded Ping/Pong loop (issue 19): simulate to the
    // completion bound, then explain every step. The cost per completion should not grow
    // with the bound (it was quadratic: a scan of earlier executions and records per
    // execution); the ratio of the two per-completion figures says so.
    if want("l") {
        let spec = Arc::new(
            compile_spec_text(
                "name: Loop
events: [{name: Ping}, {name: Pong}]
steps:
  - {name: start, params: [{name: m, kind: required, types: [UserMessageEvent]}], outputs: [Ping]}
  - {name: ping, params: [{name: p, kind: required, types: [Ping]}], outputs: [Pong]}
  - {name: pong, params: [{name: p, kind: required, types: [Pong]}], outputs: [Ping]}
simulation: {arrivals: [UserMessageEvent]}
",
                SpecSyntax::Yaml,
            )
            .expect("loop spec"),
        );
        let small = if quick { 5_000 } else { 20_000 };
        let mut per = Vec::new();
        for n in [small, small * 4] {
            let mut samples = Vec::new();
            for _ in 0..reps.min(5) {
                let t = Instant::now();
                let sim =
                    saap_dispatch::sim::simulate(spec.clone(), saap_dispatch::sim::Policy::Fifo, n)
                        .expect("simulate");
                let labels = saap_dispatch::render::EventLabels::for_run(&sim.run, &sim.arrivals);
                let cut = saap_dispatch::explain::CutOff::of(sim.completions, sim.unfinished.len());
                let e = saap_dispatch::explain::explain_run(&sim.run, &labels, &[0, 1, 2], cut);
                std::hint::black_box(e);
                samples.push(t.elapsed().as_nanos() as f64 / n as f64);
            }
            per.push(median(samples));
        }
        out!(
            "L explain on an unbounded loop: {:.2} µs per completion at {small}, {:.2} µs at {} (ratio {:.2}; linear ≈ 1)",
            per[0] / 1000.0,
            per[1] / 1000.0,
            small * 4,
            per[1] / per[0]
        );
    }

    // S3: 1,000 concurrent 10-step runs, advanced round-robin one completion at a time.
    if !want("s3") {
        return;
    }
    let n_runs = 1_000;
    let mut samples = Vec::new();
    let mut per_run_state = 0;
    let mut per_run_total = 0;
    for _ in 0..reps {
        let t = Instant::now();
        let start = spec.type_id("StartEvent").expect("start");
        let mut runs: Vec<(Run, Vec<saap_dispatch::ExecutionId>)> = (0..n_runs)
            .map(|r| {
                let mut run = proto.sibling(r as u64);
                run.append(
                    NewEvent::known(counter_event_id(1), start),
                    &mut DeclaredConditions,
                )
                .expect("start");
                let started = run.take_started();
                (run, started)
            })
            .collect();
        let mut live = n_runs;
        while live > 0 {
            live = 0;
            for (run, pending) in runs.iter_mut() {
                if let Some(x) = pending.pop() {
                    live += 1;
                    let s = run.execution(x).expect("exec").step;
                    let out = run.spec().steps[s as usize].outputs[0];
                    let ev = NewEvent::known(derived_event_id(run.run_key(), x, 0), out);
                    run.complete(x, 1, Outcome::Returned(vec![ev]), &mut DeclaredConditions)
                        .expect("complete");
                    run.drain_started_into(pending);
                }
            }
        }
        samples.push(t.elapsed().as_nanos() as f64);
        per_run_state = runs.iter().map(|(r, _)| r.state_bytes()).sum::<usize>() / n_runs;
        per_run_total = runs.iter().map(|(r, _)| r.memory_bytes()).sum::<usize>() / n_runs;
    }
    let m = median(samples);
    out!(
        "S3 1,000 concurrent chain-10 runs: {:.2} ms total, {:.3} µs per step; per run: bookkeeping {per_run_state} B, all (Run::memory_bytes: with log, records, Run header) {per_run_total} B",
        m / 1e6,
        m / (n_runs * 10) as f64 / 1000.0
    );
}
