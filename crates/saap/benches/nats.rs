//! The NATS engine next to the embedded one, in the same process run (issue 4's speed
//! targets): steps/s with 1 and 2 workers, and the latency of one step hop (p50/p99).
//!
//! `cargo bench -p saap --bench nats` (needs nats-server >= 2.10: `scripts/nats-server-install`).
//! Arguments filter: `hop` / `throughput` / `spill` / `floor` (scenario), `local` / `shared-adaptive` /
//! `shared-forced` (where NATS step bodies run: `Steps::Local`, `Steps::Shared` with the
//! default `local_slots`, `Steps::Shared` with `local_slots: 0`, every body through the work
//! queue; all three by default), `nats-only` (skip memory/SQLite).
//! The server is started by the test harness on a free loopback port with a temporary store,
//! once with `sync_interval: always` (one fsync per JetStream write, as the durability tests
//! use; `"sync":"always"`) and once with the server's default syncing (`"sync":"default"`),
//! which separates the cost of fsync from the rest.
//!
//! - `hop`: one S1 run (10-step chain) at a time; each step body records `Instant::now()`;
//!   a hop is the time from one step's body to the next step's body (the completion made
//!   durable, the core's decision, the next execution started). Memory, SQLite, NATS.
//! - Every NATS line says how many bodies went through the work queue (`queued`, the work
//!   stream's last sequence; `shared-adaptive` queues a body only when its owner's local
//!   slots are full).
//! - `spill`: 100 runs of an 8-wide fan-out whose bodies wait 10 ms (as on I/O), started at
//!   once on 1 or 2 workers (default syncing): bodies/s. `Local` runs every body of a run on
//!   its owner, unbounded; adaptive `Shared` runs `local_slots` at a time per worker and
//!   queues the rest; forced `Shared` queues all.
//! - `throughput`: S1 runs started at once; wall time until every run ended. Embedded runs
//!   go through `Engine::start_run`; NATS runs are published on the class stream by a client
//!   (as any producer would) and served by 1 or 2 workers (in this process, own connections);
//!   their end is seen on the `Done` events the owners publish. 500 runs; `SAAP_BENCH_TP_RUNS=N`
//!   for another count. NATS lines also give the journal's messages, entries and mean
//!   message size, and journal entries/s.
//! - `floor`: what the server itself persists with the same settings, to compare journal
//!   entries/s with: a plain async-publish loop (no engine) of as many messages as the
//!   throughput runs wrote entries, of the journal's mean message size, over one subject per
//!   run of a stream configured as the journal; with as many acknowledgements outstanding as
//!   runs, one at a time (each awaited), and spread over two streams. Messages/s.
#![allow(clippy::unwrap_used)]

use saap::event::to_payload;
use saap::nats::{Steps, Worker, WorkerOptions};
use saap::{
    Engine, EngineOptions, MemoryBackend, Required, SqliteBackend, Step, StepCtx, StepError,
    UserMessageEvent, Workflow,
};
use saap_nats::SaapNats;
use saap_nats::testing::{NatsServer, connect};
use saap_protocol::{EventEnvelope, RunAddress};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[macro_use]
mod common;
ev!(E1: "ControlEvent", E2: "ControlEvent", E3: "ControlEvent", E4: "ControlEvent",
    E5: "ControlEvent", E6: "ControlEvent", E7: "ControlEvent", E8: "ControlEvent",
    E9: "ControlEvent", Done: "StopEvent");

type Stamps = Arc<Mutex<Vec<Instant>>>;

macro_rules! link {
    ($b:expr, $stamps:expr, $name:literal, $from:ident => $to:ident) => {{
        let s = $stamps.clone();
        $b.step(Step::new($name, move |e: Required<$from>, _: StepCtx| {
            s.lock().unwrap().push(Instant::now());
            async move { Ok::<_, StepError>($to { v: e.v + 1 }) }
        }))
    }};
}

/// S1: a 10-step chain; every step body stamps the time.
fn chain(stamps: &Stamps) -> Workflow {
    let s0 = stamps.clone();
    let b = Workflow::builder("S1Chain").step(Step::new(
        "s0",
        move |_: Required<UserMessageEvent>, _: StepCtx| {
            s0.lock().unwrap().push(Instant::now());
            async { Ok::<_, StepError>(E1 { v: 1 }) }
        },
    ));
    let b = link!(b, stamps, "s1", E1 => E2);
    let b = link!(b, stamps, "s2", E2 => E3);
    let b = link!(b, stamps, "s3", E3 => E4);
    let b = link!(b, stamps, "s4", E4 => E5);
    let b = link!(b, stamps, "s5", E5 => E6);
    let b = link!(b, stamps, "s6", E6 => E7);
    let b = link!(b, stamps, "s7", E7 => E8);
    let b = link!(b, stamps, "s8", E8 => E9);
    let b = link!(b, stamps, "s9", E9 => Done);
    b.build().unwrap()
}

fn opts() -> EngineOptions {
    EngineOptions {
        keep_ended_runs: false,
        ..EngineOptions::default()
    }
}

fn embedded(kind: &str, wf: Workflow) -> (Engine, Option<tempfile::TempDir>) {
    if kind == "memory" {
        return (
            Engine::new(wf, Arc::new(MemoryBackend::new()), opts()),
            None,
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let b = SqliteBackend::open(dir.path().join("bench.db")).unwrap();
    (Engine::new(wf, Arc::new(b), opts()), Some(dir))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn server(default_sync: bool) -> NatsServer {
    NatsServer::start_with(saap_nats::testing::ServerOptions {
        default_sync,
        ..Default::default()
    })
}

fn sync_name(default_sync: bool) -> &'static str {
    if default_sync { "default" } else { "always" }
}

fn hops_line(engine: &str, hops: &mut [f64], runs: usize) -> String {
    hops.sort_by(|a, b| a.partial_cmp(b).unwrap());
    format!(
        r#"{{"scenario":"hop","engine":"{engine}","runs":{runs},"hops":{},"p50_us":{:.0},"p99_us":{:.0},"max_us":{:.0}}}"#,
        hops.len(),
        percentile(hops, 0.5),
        percentile(hops, 0.99),
        hops.last().copied().unwrap_or(0.0)
    )
}

fn take_hops(stamps: &Stamps, out: &mut Vec<f64>) {
    let mut s = stamps.lock().unwrap();
    out.extend(s.windows(2).map(|w| (w[1] - w[0]).as_secs_f64() * 1e6));
    s.clear();
}

async fn hop_embedded(kind: &str, runs: usize) -> String {
    let stamps: Stamps = Arc::default();
    let (engine, _dir) = embedded(kind, chain(&stamps));
    let mut hops = Vec::new();
    for i in 0..runs + 5 {
        let id = engine.start_run(UserMessageEvent::new("go")).await.unwrap();
        let _ = engine.wait_for_end(&id).await;
        if i < 5 {
            stamps.lock().unwrap().clear(); // warm-up
        } else {
            take_hops(&stamps, &mut hops);
        }
    }
    hops_line(kind, &mut hops, runs)
}

fn start_envelope(wf: &Workflow) -> EventEnvelope {
    let mut env = EventEnvelope::new(
        &wf.compiled().hierarchy,
        "UserMessageEvent",
        saap_nats::ids::fresh_event_id(),
        saap_nats::ids::now_ns(),
    )
    .unwrap();
    if let serde_json::Value::Object(f) = &*to_payload(&UserMessageEvent::new("go")).unwrap() {
        for (k, v) in f {
            env = env.with_field(k, v.clone());
        }
    }
    env
}

/// Where NATS step bodies run: `Steps::Local`, `Steps::Shared` with adaptive placement
/// (default `local_slots`), or `Steps::Shared` with every body through the work queue
/// (`local_slots: 0`).
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Local,
    Adaptive,
    Forced,
}

async fn workers(server: &NatsServer, wf: &Workflow, n: usize, mode: Mode) -> Vec<Worker> {
    let mut out = Vec::new();
    for _ in 0..n {
        let defaults = WorkerOptions::default();
        let opts = match mode {
            Mode::Local => WorkerOptions {
                steps: Steps::Local,
                ..defaults
            },
            Mode::Adaptive => WorkerOptions {
                steps: Steps::Shared,
                ..defaults
            },
            Mode::Forced => WorkerOptions {
                steps: Steps::Shared,
                local_slots: 0,
                ..defaults
            },
        };
        let w = Worker::with_connection(connect(server).await, wf.clone(), opts)
            .await
            .unwrap();
        let serving = w.clone();
        tokio::spawn(async move { serving.serve().await.unwrap() });
        out.push(w);
    }
    out
}

/// How many bodies went through the class's work queue (its last sequence; 0 without one).
async fn work_items(nats: &SaapNats, class: &str) -> u64 {
    match nats
        .jetstream()
        .get_stream(saap::nats::work_stream(class))
        .await
    {
        Ok(mut stream) => stream
            .info()
            .await
            .map(|i| i.state.last_sequence)
            .unwrap_or(0),
        Err(_) => 0,
    }
}

/// Counts `Done` events of the class on core NATS.
async fn done_counter(nats: &SaapNats, class: &str) -> async_nats::Subscriber {
    let sub = nats
        .client()
        .subscribe(format!("agent.{class}.*.*.*.*.control_event.Done.*"))
        .await
        .unwrap();
    nats.sync().await.unwrap();
    sub
}

async fn wait_done(sub: &mut async_nats::Subscriber, n: usize) {
    use futures_util::StreamExt;
    let mut seen = std::collections::HashSet::new();
    while seen.len() < n {
        let m = tokio::time::timeout(Duration::from_secs(120), sub.next())
            .await
            .expect("runs did not end within 120 s")
            .unwrap();
        seen.insert(m.subject.to_string());
    }
}

fn steps_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Local => "local",
        Mode::Adaptive => "shared-adaptive",
        Mode::Forced => "shared-forced",
    }
}

async fn hop_nats(runs: usize, default_sync: bool, steps: Mode) -> String {
    let server = server(default_sync);
    let stamps: Stamps = Arc::default();
    let wf = chain(&stamps);
    let ws = workers(&server, &wf, 1, steps).await;
    let client = connect(&server).await;
    let mut done = done_counter(&client, wf.name()).await;
    let mut hops = Vec::new();
    for i in 0..runs + 5 {
        let run = format!("h{i}");
        let addr = RunAddress::new(wf.name(), "bench", &run, &run, &run).unwrap();
        client
            .publish_control(&addr, &start_envelope(&wf))
            .await
            .unwrap();
        wait_done(&mut done, 1).await;
        if i < 5 {
            stamps.lock().unwrap().clear();
        } else {
            take_hops(&stamps, &mut hops);
        }
    }
    let queued = work_items(&client, wf.name()).await;
    for w in ws {
        w.shutdown();
    }
    hops_line(
        &format!(
            "nats-1-worker\",\"sync\":\"{}\",\"steps\":\"{}\",\"queued\":\"{queued}",
            sync_name(default_sync),
            steps_name(steps)
        ),
        &mut hops,
        runs,
    )
}

async fn throughput_embedded(kind: &str, runs: usize) -> String {
    let stamps: Stamps = Arc::default();
    let (engine, _dir) = embedded(kind, chain(&stamps));
    let t = Instant::now();
    let mut tasks = Vec::with_capacity(runs);
    for _ in 0..runs {
        let e = engine.clone();
        tasks.push(tokio::spawn(async move {
            let id = e.start_run(UserMessageEvent::new("go")).await.unwrap();
            let _ = e.wait_for_end(&id).await;
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    throughput_line(kind, runs, t.elapsed())
}

fn throughput_line(engine: &str, runs: usize, took: Duration) -> String {
    format!(
        r#"{{"scenario":"throughput","engine":"{engine}","runs":{runs},"steps":{},"total_ms":{:.0},"steps_per_s":{:.0}}}"#,
        runs * 10,
        took.as_secs_f64() * 1e3,
        (runs * 10) as f64 / took.as_secs_f64()
    )
}

/// Publishes the start events of `runs` runs at once (run ids `{prefix}{i}`) as a client
/// would, waits until each ended, and returns the wall time and how many work items the
/// class's work queue received meanwhile.
async fn run_all(client: &SaapNats, wf: &Workflow, runs: usize, prefix: &str) -> (Duration, u64) {
    let mut done = done_counter(client, wf.name()).await;
    let starts: Vec<(RunAddress, EventEnvelope)> = (0..runs)
        .map(|i| {
            let run = format!("{prefix}{i}");
            (
                RunAddress::new(wf.name(), "bench", &run, &run, &run).unwrap(),
                start_envelope(wf),
            )
        })
        .collect();
    let t = Instant::now();
    for r in client.publish_controls(&starts).await {
        r.unwrap();
    }
    wait_done(&mut done, runs).await;
    let took = t.elapsed();
    (took, work_items(client, wf.name()).await)
}

/// A NATS throughput line, and the mean size of a journal message (for `floor`).
async fn throughput_nats(
    n_workers: usize,
    runs: usize,
    default_sync: bool,
    steps: Mode,
) -> (String, usize) {
    let server = server(default_sync);
    let stamps: Stamps = Arc::default();
    let wf = chain(&stamps);
    let ws = workers(&server, &wf, n_workers, steps).await;
    let client = connect(&server).await;
    let (took, queued) = run_all(&client, &wf, runs, "t").await;
    for w in ws {
        w.shutdown();
    }
    let (messages, bytes, entries) = journal_stats(&client, wf.name()).await;
    let line = throughput_line(
        &format!(
            "nats-{n_workers}-worker\",\"sync\":\"{}\",\"steps\":\"{}\",\"queued\":\"{queued}",
            sync_name(default_sync),
            steps_name(steps)
        ),
        runs,
        took,
    );
    let size = (bytes / messages.max(1)) as usize;
    let line = format!(
        r#"{},"journal_messages":{messages},"entries":{entries},"message_bytes":{size},"entries_per_s":{:.0}}}"#,
        line.trim_end_matches('}'),
        entries as f64 / took.as_secs_f64()
    );
    (line, size)
}

/// What the journal stream of `class` holds after a scenario: messages, bytes, and journal
/// entries (each run's last message names its last entry's index).
async fn journal_stats(nats: &SaapNats, class: &str) -> (u64, u64, u64) {
    use futures_util::StreamExt;
    let js = nats.jetstream();
    let mut stream = js
        .get_stream(saap::nats::journal_stream(class))
        .await
        .unwrap();
    let state = stream.info().await.unwrap().state.clone();
    let mut subjects = stream
        .info_with_subjects(format!("saap.journal.{class}.*"))
        .await
        .unwrap();
    let mut names = Vec::new();
    while let Some(s) = subjects.next().await {
        names.push(s.unwrap().0);
    }
    let mut entries = 0;
    for name in names {
        let m = stream.get_last_raw_message_by_subject(&name).await.unwrap();
        let v: serde_json::Value = serde_json::from_slice(&m.payload).unwrap();
        entries += v["b"]
            .as_array()
            .and_then(|b| b.last())
            .and_then(|e| e["x"].as_u64())
            .map_or(0, |x| x + 1);
    }
    (state.messages, state.bytes, entries)
}

type AckFuture = std::pin::Pin<
    Box<
        dyn std::future::Future<
                Output = Result<
                    async_nats::jetstream::publish::PublishAck,
                    async_nats::jetstream::context::PublishError,
                >,
            > + Send,
    >,
>;

/// `floor`: what the server itself persists with the same settings: a plain async-publish
/// loop of `n` messages of `size` bytes over `subjects` subjects (one per run, as the
/// journal), with at most `window` acknowledgements outstanding, on `streams` streams
/// configured as the journal (subjects spread over them). Messages/s from the first
/// publication to the last acknowledgement.
async fn floor(
    default_sync: bool,
    n: usize,
    size: usize,
    subjects: usize,
    window: usize,
    streams: usize,
) -> String {
    use futures_util::StreamExt;
    let server = server(default_sync);
    let nats = connect(&server).await;
    let js = nats.jetstream();
    for k in 0..streams {
        js.create_stream(async_nats::jetstream::stream::Config {
            name: format!("floor{k}"),
            subjects: vec![format!("floor{k}.*")],
            storage: async_nats::jetstream::stream::StorageType::File,
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        })
        .await
        .unwrap();
    }
    let names: Vec<String> = (0..subjects)
        .map(|i| format!("floor{}.r{i}", i % streams))
        .collect();
    let payload = bytes::Bytes::from(vec![b'x'; size]);
    let mut acks: futures_util::stream::FuturesUnordered<AckFuture> = Default::default();
    let t = Instant::now();
    for i in 0..n {
        if acks.len() >= window {
            acks.next().await.unwrap().unwrap();
        }
        let ack = js
            .publish(names[i % subjects].clone(), payload.clone())
            .await
            .unwrap();
        acks.push(Box::pin(ack.into_future()));
    }
    while let Some(a) = acks.next().await {
        a.unwrap();
    }
    let took = t.elapsed();
    format!(
        r#"{{"scenario":"floor","sync":"{}","messages":{n},"bytes":{size},"subjects":{subjects},"streams":{streams},"window":{window},"total_ms":{:.0},"messages_per_s":{:.0}}}"#,
        sync_name(default_sync),
        took.as_secs_f64() * 1e3,
        n as f64 / took.as_secs_f64()
    )
}

/// The mean size of an S1 journal message (one entry with its records), for `floor` run
/// without `throughput`.
const JOURNAL_MESSAGE_BYTES: usize = 538;

/// Bodies of the `spill` scenario: one run's fan-out width and each body's wait.
const SPILL_FAN: usize = 8;
const SPILL_BODY: Duration = Duration::from_millis(10);

/// `split(UserMessage) -> [E1; 8]`, `work(E1) -> E2` (waits 10 ms, as a body waiting on I/O
/// would), `join([E2; 8]) -> Done`.
fn spill_fan() -> Workflow {
    Workflow::builder("SpillFan")
        .step(Step::new(
            "split",
            |_: Required<UserMessageEvent>, _: StepCtx| async {
                Ok::<_, StepError>((0..SPILL_FAN as u32).map(|v| E1 { v }).collect::<Vec<_>>())
            },
        ))
        .step(Step::new(
            "work",
            |e: Required<E1>, _: StepCtx| async move {
                tokio::time::sleep(SPILL_BODY).await;
                Ok::<_, StepError>(E2 { v: e.v })
            },
        ))
        .step(
            Step::new(
                "join",
                |es: saap::FixedList<E2, SPILL_FAN>, _: StepCtx| async move {
                    Ok::<_, StepError>(Done {
                        v: es.iter().map(|e| e.v).sum(),
                    })
                },
            )
            .max_executions_per_run(1),
        )
        .build()
        .unwrap()
}

/// `spill`: runs of an 8-wide fan-out of waiting bodies started at once (default syncing);
/// wall time until all ended, as bodies/s, and how many bodies were queued. Shows what the
/// slots of adaptive placement cost waiting bodies, and what a second worker adds.
async fn spill(n_workers: usize, runs: usize, mode: Mode) -> String {
    let server = server(true);
    let wf = spill_fan();
    let ws = workers(&server, &wf, n_workers, mode).await;
    let client = connect(&server).await;
    let (took, queued) = run_all(&client, &wf, runs, "p").await;
    for w in ws {
        w.shutdown();
    }
    let bodies = runs * SPILL_FAN;
    format!(
        r#"{{"scenario":"spill","engine":"nats-{n_workers}-worker","steps":"{}","runs":{runs},"bodies":{bodies},"body_ms":{},"queued":{queued},"total_ms":{:.0},"bodies_per_s":{:.0}}}"#,
        steps_name(mode),
        SPILL_BODY.as_millis(),
        took.as_secs_f64() * 1e3,
        bodies as f64 / took.as_secs_f64()
    )
}

fn main() {
    // `cargo test --all-targets` runs this binary without `--bench`: a small smoke run.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let scenario = |s: &str| {
        !filters
            .iter()
            .any(|f| f == "hop" || f == "throughput" || f == "spill" || f == "floor")
            || filters.iter().any(|f| f == s)
    };
    let want = |s: &str| scenario(s);
    // `local` / `shared-adaptive` / `shared-forced` pick where NATS step bodies run (all by
    // default).
    let modes: Vec<Mode> = [Mode::Local, Mode::Adaptive, Mode::Forced]
        .into_iter()
        .filter(|m| {
            !filters
                .iter()
                .any(|f| f.starts_with("local") || f.starts_with("shared"))
                || filters.iter().any(|f| f == steps_name(*m))
        })
        .collect();
    let embedded_too = !filters.iter().any(|f| f == "nats-only");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // `SAAP_BENCH_TP_RUNS` lengthens the throughput scenario (500 runs take ~0.5 s, short
    // enough for the VM's speed changes to show).
    let tp_default = std::env::var("SAAP_BENCH_TP_RUNS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(500);
    let (hop_runs, tp_runs) = if smoke { (2, 10) } else { (200, tp_default) };
    rt.block_on(async {
        // The mean journal message size of the throughput runs (`floor` publishes messages of
        // that size; about this size when it runs alone).
        let mut msg_size = 0;
        if want("hop") {
            for kind in ["memory", "sqlite"].into_iter().filter(|_| embedded_too) {
                println!("{}", hop_embedded(kind, hop_runs).await);
            }
            for &steps in &modes {
                for default_sync in [false, true] {
                    println!("{}", hop_nats(hop_runs, default_sync, steps).await);
                }
            }
        }
        if want("spill") {
            let runs = if smoke { 4 } else { 100 };
            for &mode in &modes {
                for n in [1, 2] {
                    println!("{}", spill(n, runs, mode).await);
                }
            }
        }
        if want("throughput") {
            for kind in ["memory", "sqlite"].into_iter().filter(|_| embedded_too) {
                println!("{}", throughput_embedded(kind, tp_runs).await);
            }
            for &steps in &modes {
                for default_sync in [false, true] {
                    for n in [1, 2] {
                        let (line, size) = throughput_nats(n, tp_runs, default_sync, steps).await;
                        println!("{line}");
                        msg_size = msg_size.max(size);
                    }
                }
            }
        }
        if want("floor") {
            // As many journal-sized messages as S1 runs write entries (11 per run), over one
            // subject per run: with as many acknowledgements outstanding as runs (as the
            // journal's writer), one at a time, and spread over two streams.
            let size = if msg_size > 0 {
                msg_size
            } else {
                JOURNAL_MESSAGE_BYTES
            };
            for default_sync in [false, true] {
                for (window, streams) in [(tp_runs, 1), (1, 1), (tp_runs, 2)] {
                    let n = tp_runs * 11;
                    println!(
                        "{}",
                        floor(default_sync, n, size, tp_runs, window, streams).await
                    );
                }
            }
        }
    });
}
