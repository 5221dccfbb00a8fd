//! Replay's cost next to the run it replays (issue 23: replay of a stored run costs no more
//! than 2× its in-memory run): the same workflow, a loop of N executions each returning the
//! next event, run to its end on the in-memory engine, then run on the embedded store and
//! replayed from it (`Engine::replay_stored`: the journal through the core, every recorded
//! completion's body run again and compared). Reading the stored run is timed apart.
//!
//! `cargo bench -p saap --bench replay` (N = 1,000 and 10,000; `SAAP_BENCH_REPLAY_N=N` for
//! one size; `SAAP_BENCH_REPLAY_REPS=N` replays N times instead of 7, for a profiler). Prints
//! one JSON line per size: medians of 7 in milliseconds, and the ratio.
#![allow(clippy::unwrap_used)]

use saap::backend::memory::MemoryBackend;
use saap::{Engine, EngineOptions, SqliteBackend, UserMessageEvent, Workflow};
use std::sync::Arc;
use std::time::Instant;

#[macro_use]
mod common;

/// A message "N" runs `tick` N times, each returning the next tick, then stops.
fn workflow() -> Workflow {
    common::tick_loop("ReplayBench")
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

fn main() {
    let sizes: Vec<u32> = match std::env::var("SAAP_BENCH_REPLAY_N")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(n) => vec![n],
        None => vec![1_000, 10_000],
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let wf = workflow();
    for n in sizes {
        let message = n.to_string();
        let in_memory: Vec<f64> = (0..7)
            .map(|_| {
                rt.block_on(async {
                    let engine = Engine::new(
                        wf.clone(),
                        Arc::new(MemoryBackend::new()),
                        EngineOptions::default(),
                    );
                    let t = Instant::now();
                    let id = engine
                        .start_run(UserMessageEvent::new(message.clone()))
                        .await
                        .unwrap();
                    let _ = engine.wait_for_end(&id).await;
                    t.elapsed().as_secs_f64() * 1e3
                })
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let (stored, effects) = rt.block_on(async {
            let backend = Arc::new(SqliteBackend::open(dir.path().join("r.db")).unwrap());
            let engine = Engine::new(wf.clone(), backend, EngineOptions::default());
            let id = engine
                .start_run(UserMessageEvent::new(message.clone()))
                .await
                .unwrap();
            let _ = engine.wait_for_end(&id).await;
            let b = engine.backend();
            let stored = b.read_run(wf.name(), &id).wait().await.unwrap().unwrap();
            let effects = b.effects(&id).wait().await.unwrap();
            (stored, effects)
        });
        let mut read = Vec::new();
        let mut replay = Vec::new();
        let reps: usize = std::env::var("SAAP_BENCH_REPLAY_REPS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(7);
        for _ in 0..reps {
            let t = Instant::now();
            let report = rt
                .block_on(Engine::replay_stored(&wf, &stored, effects.clone()))
                .unwrap();
            replay.push(t.elapsed().as_secs_f64() * 1e3);
            assert!(report.reproduced(), "{report:?}");
            assert_eq!(report.executions_run, n + 1);
        }
        rt.block_on(async {
            let backend = SqliteBackend::open(dir.path().join("r.db")).unwrap();
            let id = stored.meta.run_id.to_string();
            for _ in 0..7 {
                let t = Instant::now();
                let _ = saap::backend::Backend::read_run(&backend, wf.name(), &id)
                    .wait()
                    .await
                    .unwrap();
                read.push(t.elapsed().as_secs_f64() * 1e3);
            }
        });
        let (m, r, rd) = (median(in_memory), median(replay), median(read));
        println!(
            "{}",
            serde_json::json!({
                "executions": n + 1,
                "in_memory_run_ms": (m * 100.0).round() / 100.0,
                "replay_ms": (r * 100.0).round() / 100.0,
                "read_stored_run_ms": (rd * 100.0).round() / 100.0,
                "replay_over_run": (r / m * 100.0).round() / 100.0,
                "target_ratio": 2.0,
            })
        );
    }
}
