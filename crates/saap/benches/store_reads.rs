//! Stored-run reads on the embedded store at a given store size: what `runs` (a page of
//! summaries) and `show RUN` (one run read and rebuilt) cost now, next to the whole-store
//! read + rebuild they used to do, and `Engine::open` (live runs only) next to loading every
//! run.
//!
//! `cargo bench -p saap --bench store_reads` (stores of 1,000 and 10,000 runs), or
//! `SAAP_BENCH_STORE_RUNS=50000 cargo bench -p saap --bench store_reads`. Then the same on
//! the NATS journal with 1,000 runs (`SAAP_BENCH_NATS_RUNS=N`, 0 to skip; needs nats-server,
//! `scripts/nats-server-install`). Prints one JSON line per store; times are medians (7
//! repetitions on SQLite, 5 on NATS), in microseconds.
#![allow(clippy::unwrap_used)]

use saap::backend::{Backend, RunQuery, StatusFilter};
use saap::history::StoredRunView;
use saap::{
    Engine, EngineOptions, Required, SqliteBackend, Step, StepCtx, StepError, UserMessageEvent,
    Workflow,
};
use std::sync::Arc;
use std::time::Instant;

#[macro_use]
mod common;
ev!(A: "ControlEvent", B: "ControlEvent", Answer: "ControlEvent", Done: "StopEvent");

/// Three steps to the stop; a message "wait" leaves the run live (it waits for `Answer`).
fn workflow() -> Workflow {
    Workflow::builder("Reads")
        .step(Step::new(
            "a",
            |q: Required<UserMessageEvent>, _: StepCtx| async move {
                Ok::<_, StepError>((q.message != "wait").then_some(A { v: 1 }))
            },
        ))
        .step(Step::new("b", |a: Required<A>, _: StepCtx| async move {
            Ok::<_, StepError>(B { v: a.v + 1 })
        }))
        .step(Step::new("c", |b: Required<B>, _: StepCtx| async move {
            Ok::<_, StepError>(Done { v: b.v + 1 })
        }))
        .step(Step::new(
            "answered",
            |x: Required<Answer>, _: StepCtx| async move { Ok::<_, StepError>(Done { v: x.v }) },
        ))
        .build()
        .unwrap()
}

fn median(mut f: impl FnMut() -> f64) -> f64 {
    let mut xs: Vec<f64> = (0..7).map(|_| f()).collect();
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[3]
}

fn us(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e6
}

/// Starts `n` runs, one in 100 left live, 200 at a time, each waited for (ended or idle).
/// Returns a run id from the middle and the number left live.
async fn fill(engine: &Engine, n: usize) -> (String, usize) {
    let mut some = String::new();
    let mut live = 0;
    for chunk in (0..n).collect::<Vec<_>>().chunks(200) {
        let mut ids = Vec::new();
        for i in chunk {
            let waits = i % 100 == 0;
            live += usize::from(waits);
            let msg = if waits { "wait" } else { "go" };
            let id = engine.start_run(UserMessageEvent::new(msg)).await.unwrap();
            ids.push((id, waits));
        }
        let runner = saap::testing::TestRunner::new(engine.clone());
        for (id, waits) in &ids {
            if *waits {
                let run = runner.attach(id).unwrap();
                run.wait_idle(std::time::Duration::from_secs(60))
                    .await
                    .unwrap();
            } else {
                // An evicted run (ended, keep_ended_runs off) is unknown: done too.
                let _ = engine.wait_for_end(id).await;
            }
        }
        some = ids[ids.len() / 2].0.clone();
    }
    (some, live)
}

/// The same reads on the NATS journal (a nats-server started for the bench, default
/// syncing): a page (run ids from the stream's subject list, then two direct reads per
/// listed run), a page of live runs (the last message of every run passed over), one run
/// read and rebuilt, and the old whole-journal read + rebuild.
fn nats_store(rt: &tokio::runtime::Runtime, n: usize) {
    use saap::nats::{NatsBackend, NatsBackendOptions};
    let server = saap_nats::testing::NatsServer::start();
    let wf = workflow();
    rt.block_on(async {
        let nats = saap_nats::testing::connect(&server).await;
        let backend = NatsBackend::open(
            nats,
            wf.name(),
            wf.compiled().hierarchy.clone(),
            NatsBackendOptions {
                publish_outputs: false,
                ..Default::default()
            },
        )
        .await
        .unwrap();
        let engine = Engine::new(
            wf.clone(),
            Arc::new(backend.clone()),
            EngineOptions {
                keep_ended_runs: false,
                ..Default::default()
            },
        );
        let fill_t = Instant::now();
        let (some_id, live) = fill(&engine, n).await;
        let fill_s = fill_t.elapsed().as_secs_f64();
        let b: Arc<dyn Backend> = Arc::new(backend);
        let page = |q: RunQuery| {
            let b = b.clone();
            async move {
                let mut xs = Vec::new();
                for _ in 0..5 {
                    let t = Instant::now();
                    let p = b.list_runs("Reads", &q).wait().await.unwrap();
                    assert!(!p.runs.is_empty());
                    xs.push(us(t));
                }
                xs.sort_by(|a, b| a.total_cmp(b));
                xs[2]
            }
        };
        let first_page = page(RunQuery {
            limit: 20,
            ..Default::default()
        })
        .await;
        let live_page = page(RunQuery {
            limit: 20,
            status: Some(StatusFilter::Live),
            ..Default::default()
        })
        .await;
        let mut xs = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            let s = b.read_run("Reads", &some_id).wait().await.unwrap().unwrap();
            StoredRunView::rebuild(&wf, &s).unwrap();
            xs.push(us(t));
        }
        xs.sort_by(|a, b| a.total_cmp(b));
        let show_one = xs[2];
        let t = Instant::now();
        let all = b.load_runs("Reads", false).wait().await.unwrap();
        assert_eq!(all.len(), n);
        for s in &all {
            StoredRunView::rebuild(&wf, s).unwrap();
        }
        let whole = us(t);
        engine.halt();
        println!(
            "{}",
            serde_json::json!({
                "bench": "store_reads", "backend": "nats", "runs": n, "live": live,
                "fill_s": (fill_s * 100.0).round() / 100.0,
                "list_first_page_us": first_page.round(),
                "list_live_page_us": live_page.round(),
                "show_one_us": show_one.round(),
                "before_read_and_rebuild_all_us": whole.round(),
            })
        );
    });
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without
    // it: then one small store checks that every measurement works.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let sizes: Vec<usize> = match std::env::var("SAAP_BENCH_STORE_RUNS") {
        Ok(v) => vec![v.parse::<usize>().unwrap().max(100)],
        Err(_) if smoke => vec![200],
        Err(_) => vec![1_000, 10_000],
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for n in sizes {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reads.db");
        let wf = workflow();
        // Fill: n runs, one in 100 left live, 200 started at a time.
        let fill_t = Instant::now();
        let (some_id, live) = rt.block_on(async {
            let opts = saap::backend::sqlite::SqliteOptions {
                full_sync: false,
                ..Default::default()
            };
            let backend = Arc::new(SqliteBackend::open_with(&path, opts).unwrap());
            let engine = Engine::new(
                wf.clone(),
                backend,
                EngineOptions {
                    keep_ended_runs: false,
                    ..Default::default()
                },
            );
            let filled = fill(&engine, n).await;
            // Everything is durable (ended runs waited for, live ones idle): close the file.
            engine.halt();
            filled
        });
        let fill_s = fill_t.elapsed().as_secs_f64();
        let backend: Arc<dyn Backend> = Arc::new(SqliteBackend::open(&path).unwrap());
        let rtr = &rt;
        let page = |q: RunQuery| {
            let b = backend.clone();
            move || {
                rtr.block_on(async {
                    let t = Instant::now();
                    let p = b.list_runs("Reads", &q).wait().await.unwrap();
                    assert!(!p.runs.is_empty());
                    us(t)
                })
            }
        };
        let first_page = median(page(RunQuery {
            limit: 20,
            ..Default::default()
        }));
        let last_page = median(page(RunQuery {
            limit: 20,
            offset: n - 20,
            ..Default::default()
        }));
        let cursor = rt.block_on(async {
            let q = RunQuery {
                limit: 1,
                offset: n - 21,
                ..Default::default()
            };
            backend.list_runs("Reads", &q).wait().await.unwrap().runs[0]
                .run_id
                .clone()
        });
        let last_page_by_cursor = median(page(RunQuery {
            limit: 20,
            after: Some(cursor),
            ..Default::default()
        }));
        let live_page = median(page(RunQuery {
            limit: 20,
            status: Some(StatusFilter::Live),
            ..Default::default()
        }));
        let by_prefix = median(page(RunQuery {
            limit: 2,
            id_prefix: Some(some_id[..12].to_string()),
            ..Default::default()
        }));
        let show_one = median(|| {
            rt.block_on(async {
                let t = Instant::now();
                let s = backend
                    .read_run("Reads", &some_id)
                    .wait()
                    .await
                    .unwrap()
                    .unwrap();
                StoredRunView::rebuild(&wf, &s).unwrap();
                us(t)
            })
        });
        // What `runs`/`show` did before: every run read and rebuilt.
        let whole = {
            let mut xs: Vec<f64> = (0..3)
                .map(|_| {
                    rt.block_on(async {
                        let t = Instant::now();
                        let all = backend.load_runs("Reads", false).wait().await.unwrap();
                        assert_eq!(all.len(), n);
                        for s in &all {
                            StoredRunView::rebuild(&wf, s).unwrap();
                        }
                        us(t)
                    })
                })
                .collect();
            xs.sort_by(|a, b| a.total_cmp(b));
            xs[1]
        };
        backend.halt();
        drop(backend);
        let open = median(|| {
            rt.block_on(async {
                let b = Arc::new(SqliteBackend::open(&path).unwrap());
                let t = Instant::now();
                let (engine, rec) = Engine::open(wf.clone(), b, EngineOptions::default())
                    .await
                    .unwrap();
                let took = us(t);
                assert_eq!(rec.resumed_runs, live);
                engine.halt();
                took
            })
        });
        println!(
            "{}",
            serde_json::json!({
                "bench": "store_reads", "backend": "sqlite", "runs": n, "live": live,
                "fill_s": (fill_s * 100.0).round() / 100.0,
                "list_first_page_us": first_page.round(),
                "list_last_page_by_offset_us": last_page.round(),
                "list_last_page_by_cursor_us": last_page_by_cursor.round(),
                "list_live_page_us": live_page.round(),
                "resolve_id_prefix_us": by_prefix.round(),
                "show_one_us": show_one.round(),
                "before_read_and_rebuild_all_us": whole.round(),
                "open_live_only_us": open.round(),
            })
        );
    }
    let nats_runs: usize = match std::env::var("SAAP_BENCH_NATS_RUNS") {
        Ok(v) => v.parse().unwrap(),
        Err(_) if smoke => 50,
        Err(_) => 1_000,
    };
    if nats_runs > 0 {
        nats_store(&rt, nats_runs.max(25));
    }
}
