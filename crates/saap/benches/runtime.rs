//! Shapes S1–S3 of `shared/bench/peers/` through the real runtime (engine + dispatch core +
//! decision records), on the in-memory and the embedded (SQLite, fsync per commit) backend.
//!
//! `cargo bench -p saap --bench runtime` (all), or with filters:
//! `cargo bench -p saap --bench runtime -- s1 memory`. Prints one JSON line per scenario.
//! `SAAP_BENCH_OTLP=1` exports every run live (`EngineOptions::telemetry`) to an OTLP
//! receiver in the process (its own thread), and prints the exporter's counts at the end.
#![allow(clippy::unwrap_used)]

use saap::{
    Engine, EngineOptions, FixedList, MemoryBackend, Required, SqliteBackend, Step, StepCtx,
    StepError, UserMessageEvent, Workflow,
};
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

macro_rules! ev {
    ($($name:ident : $parent:literal),*) => {$(
        #[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
        struct $name { #[serde(default)] v: u32 }
        impl saap::Event for $name {
            const NAME: &'static str = stringify!($name);
            const PARENTS: &'static [&'static str] = &[$parent];
            fn try_clone_event(&self) -> Option<Self> {
                Some(self.clone())
            }
        }
    )*};
}
ev!(E1: "ControlEvent", E2: "ControlEvent", E3: "ControlEvent", E4: "ControlEvent",
    E5: "ControlEvent", E6: "ControlEvent", E7: "ControlEvent", E8: "ControlEvent",
    E9: "ControlEvent", Done: "StopEvent", Item: "ControlEvent", Res: "ControlEvent");

macro_rules! link {
    ($b:expr, $name:literal, $from:ident => $to:ident) => {
        $b.step(Step::new(
            $name,
            |e: Required<$from>, _: StepCtx| async move { Ok::<_, StepError>($to { v: e.v + 1 }) },
        ))
    };
}

/// S1: a 10-step chain.
fn chain() -> Workflow {
    let b = Workflow::builder("S1Chain").step(Step::new(
        "s0",
        |_: Required<UserMessageEvent>, _: StepCtx| async { Ok::<_, StepError>(E1 { v: 1 }) },
    ));
    let b = link!(b, "s1", E1 => E2);
    let b = link!(b, "s2", E2 => E3);
    let b = link!(b, "s3", E3 => E4);
    let b = link!(b, "s4", E4 => E5);
    let b = link!(b, "s5", E5 => E6);
    let b = link!(b, "s6", E6 => E7);
    let b = link!(b, "s7", E7 => E8);
    let b = link!(b, "s8", E8 => E9);
    let b = link!(b, "s9", E9 => Done);
    b.build().unwrap()
}

fn fan(n: u32, fixed: bool) -> Workflow {
    let b = Workflow::builder(if fixed { "S2Fixed" } else { "S2List" })
        .step(Step::new(
            "start",
            move |_: Required<UserMessageEvent>, _: StepCtx| async move {
                Ok::<_, StepError>((0..n).map(|v| Item { v }).collect::<Vec<_>>())
            },
        ))
        .step(Step::new(
            "work",
            |i: Required<Item>, _: StepCtx| async move { Ok::<_, StepError>(Res { v: i.v }) },
        ));
    let b = if fixed {
        // FixedList's N is a type parameter: the sizes measured are listed here.
        match n {
            100 => b.step(Step::new(
                "collect",
                |r: FixedList<Res, 100>, _: StepCtx| async move {
                    Ok::<_, StepError>(Done { v: r.len() as u32 })
                },
            )),
            1000 => b.step(Step::new(
                "collect",
                |r: FixedList<Res, 1000>, _: StepCtx| async move {
                    Ok::<_, StepError>(Done { v: r.len() as u32 })
                },
            )),
            _ => b.step(Step::new(
                "collect",
                |r: FixedList<Res, 10000>, _: StepCtx| async move {
                    Ok::<_, StepError>(Done { v: r.len() as u32 })
                },
            )),
        }
    } else {
        b.step(
            Step::new("collect", |r: Vec<Res>, _: StepCtx| async move {
                Ok::<_, StepError>(Done { v: r.len() as u32 })
            })
            .precondition("all_arrived", move |r: &Vec<Res>| r.len() as u32 == n),
        )
    };
    b.build().unwrap()
}

struct Env {
    engine: Engine,
    _dir: Option<tempfile::TempDir>,
}

/// The exporter of `SAAP_BENCH_OTLP=1`: to an OTLP receiver on its own thread (and tokio
/// runtime) that takes every request, with a queue that holds a whole S1 run of jobs.
fn bench_exporter() -> Option<saap::otel::Exporter> {
    static EXPORTER: std::sync::OnceLock<Option<saap::otel::Exporter>> = std::sync::OnceLock::new();
    EXPORTER
        .get_or_init(|| {
            std::env::var_os("SAAP_BENCH_OTLP")?;
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    let app = axum::Router::new().route(
                        "/v1/traces",
                        axum::routing::post(|_body: axum::body::Bytes| async { "" }),
                    );
                    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                    tx.send(listener.local_addr().unwrap().port()).unwrap();
                    axum::serve(listener, app).await.unwrap();
                });
            });
            let port = rx.recv().unwrap();
            let mut config =
                saap::otel::OtlpConfig::new(format!("http://127.0.0.1:{port}/v1/traces")).unwrap();
            config.queue_capacity = 1 << 20;
            Some(saap::otel::Exporter::start(config).unwrap())
        })
        .clone()
}

fn env(kind: &str, wf: Workflow) -> Env {
    // A server does not keep ended runs in memory; the store (sqlite) keeps them.
    let opts = EngineOptions {
        keep_ended_runs: false,
        telemetry: bench_exporter(),
        ..EngineOptions::default()
    };
    match kind {
        "memory" => Env {
            engine: Engine::new(wf, Arc::new(MemoryBackend::new()), opts),
            _dir: None,
        },
        _ => {
            let dir = tempfile::tempdir().unwrap();
            let b = SqliteBackend::open(dir.path().join("bench.db")).unwrap();
            Env {
                engine: Engine::new(wf, Arc::new(b), opts),
                _dir: Some(dir),
            }
        }
    }
}

/// How a run is run: `Engine::run` (one awaited call, driven on the caller's task) or
/// `Engine::start_run` + `Engine::wait_for_end` (the run on its own task, watched).
#[derive(Clone, Copy, PartialEq)]
enum Api {
    Run,
    StartWait,
}

impl Api {
    fn name(self) -> &'static str {
        match self {
            Api::Run => "run",
            Api::StartWait => "start_run+wait_for_end",
        }
    }
}

async fn one_run(engine: &Engine, api: Api) {
    match api {
        Api::Run => {
            engine.run(UserMessageEvent::new("go")).await.unwrap();
        }
        Api::StartWait => {
            let id = engine.start_run(UserMessageEvent::new("go")).await.unwrap();
            // A run evicted on its end (keep_ended_runs = false) is unknown afterwards: ended.
            let _ = engine.wait_for_end(&id).await;
        }
    }
}

/// Peak resident set size so far (VmHWM), KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

async fn s1(kind: &str, runs: usize, api: Api) -> String {
    let e = env(kind, chain());
    for _ in 0..runs / 20 + 1 {
        one_run(&e.engine, api).await;
    }
    let t = Instant::now();
    for _ in 0..runs {
        one_run(&e.engine, api).await;
    }
    let total = t.elapsed().as_secs_f64();
    format!(
        r#"{{"scenario":"s1","backend":"{kind}","api":"{}","runs":{runs},"steps_per_run":10,"mean_run_us":{:.2},"per_step_us":{:.3},"steps_per_s":{:.0}}}"#,
        api.name(),
        total / runs as f64 * 1e6,
        total / (runs * 10) as f64 * 1e6,
        (runs * 10) as f64 / total
    )
}

async fn s2(kind: &str, n: u32, fixed: bool, runs: usize, api: Api) -> String {
    let e = env(kind, fan(n, fixed));
    one_run(&e.engine, api).await;
    let t = Instant::now();
    for _ in 0..runs {
        one_run(&e.engine, api).await;
    }
    let total = t.elapsed().as_secs_f64();
    format!(
        r#"{{"scenario":"s2","backend":"{kind}","api":"{}","fan_in":"{}","n":{n},"runs":{runs},"mean_run_us":{:.1}}}"#,
        api.name(),
        if fixed {
            "fixed_list"
        } else {
            "list+precondition"
        },
        total / runs as f64 * 1e6
    )
}

async fn s3(kind: &str, concurrent: usize, api: Api) -> String {
    let e = env(kind, chain());
    one_run(&e.engine, api).await;
    let rss0 = rss_kib();
    let t = Instant::now();
    let mut tasks = Vec::with_capacity(concurrent);
    for _ in 0..concurrent {
        let engine = e.engine.clone();
        // One future type per API: a task is as large as its future, and `one_run` would
        // size every task for the larger of the two.
        tasks.push(match api {
            Api::Run => tokio::spawn(async move {
                engine.run(UserMessageEvent::new("go")).await.unwrap();
            }),
            Api::StartWait => tokio::spawn(async move {
                let id = engine.start_run(UserMessageEvent::new("go")).await.unwrap();
                let _ = engine.wait_for_end(&id).await;
            }),
        });
    }
    for t in tasks {
        t.await.unwrap();
    }
    let total = t.elapsed().as_secs_f64();
    let rss1 = rss_kib();
    format!(
        r#"{{"scenario":"s3","backend":"{kind}","api":"{}","concurrent_runs":{concurrent},"steps_per_run":10,"total_ms":{:.2},"steps_per_s":{:.0},"peak_rss_growth_kib_per_run":{:.2}}}"#,
        api.name(),
        total * 1e3,
        (concurrent * 10) as f64 / total,
        rss1.saturating_sub(rss0) as f64 / concurrent as f64
    )
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without
    // it: then only a small smoke run checks that every scenario works.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let want = |s: &str, k: &str| filters.iter().all(|f| f == s || f == k);
    let threads: usize = std::env::var("SAAP_BENCH_THREADS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let rt = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
            .unwrap()
    };
    // SAAP_BENCH_API=start_run runs every scenario through start_run + wait_for_end;
    // otherwise they use Engine::run, and S1 prints a second line with the older API.
    let api_env = std::env::var("SAAP_BENCH_API").ok();
    let api = match api_env.as_deref() {
        Some("start_run") => Api::StartWait,
        _ => Api::Run,
    };
    let s1_apis: &[Api] = match api_env.as_deref() {
        Some("start_run") => &[Api::StartWait],
        Some(_) => &[Api::Run],
        None => &[Api::Run, Api::StartWait],
    };
    rt.block_on(async {
        if smoke {
            for kind in ["memory", "sqlite"] {
                for &a in [Api::Run, Api::StartWait].iter() {
                    out!("{}", s1(kind, 3, a).await);
                    out!("{}", s2(kind, 100, true, 1, a).await);
                    out!("{}", s2(kind, 100, false, 1, a).await);
                    out!("{}", s3(kind, 20, a).await);
                }
            }
            return;
        }
        for kind in ["memory", "sqlite"] {
            // SAAP_BENCH_RUNS overrides the S1 run count (instruction counts per step are
            // the difference of two counts under callgrind).
            let seq_runs = std::env::var("SAAP_BENCH_RUNS")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(if kind == "memory" { 1000 } else { 100 });
            if want("s1", kind) {
                for &a in s1_apis {
                    out!("{}", s1(kind, seq_runs, a).await);
                }
            }
            if want("s2", kind) {
                // SAAP_BENCH_N restricts S2 to one fan-out size (for profiling).
                let only_n: Option<u32> = std::env::var("SAAP_BENCH_N")
                    .ok()
                    .and_then(|s| s.parse().ok());
                // SAAP_BENCH_FAN=fixed or =list restricts S2 to one fan-in (for profiling).
                let fan_in = std::env::var("SAAP_BENCH_FAN").ok();
                for n in [100u32, 1000, 10000] {
                    if only_n.is_some_and(|o| o != n) {
                        continue;
                    }
                    // In memory, 20 runs at N = 10,000 (~45 ms): 3 (~7 ms) read 2.2 to 4.1 ms
                    // per run over processes of one binary, too short a window for this VM.
                    let runs = if n >= 10000 {
                        if kind == "memory" { 20 } else { 3 }
                    } else if kind == "memory" {
                        30
                    } else {
                        5
                    };
                    if fan_in.as_deref() != Some("list") {
                        out!("{}", s2(kind, n, true, runs, api).await);
                    }
                    // The list fan-in at N = 10,000 only when asked for (SAAP_BENCH_N=10000).
                    if (n <= 1000 || only_n == Some(n)) && fan_in.as_deref() != Some("fixed") {
                        out!("{}", s2(kind, n, false, runs, api).await);
                    }
                }
            }
            if want("s3", kind) {
                // SAAP_BENCH_S3_RUNS overrides the 1,000 runs in flight (instruction counts
                // per run are the difference of two counts under callgrind).
                let concurrent = std::env::var("SAAP_BENCH_S3_RUNS")
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(1000);
                out!("{}", s3(kind, concurrent, api).await);
            }
        }
    });
    if let Some(exporter) = bench_exporter() {
        let flushed = exporter.flush(std::time::Duration::from_secs(60));
        eprintln!("OTLP export: {:?} (flush: {flushed:?})", exporter.stats());
    }
}
