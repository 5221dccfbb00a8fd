//! Engine options: eviction of ended runs.
#![allow(clippy::unwrap_used)]

mod common;

use saap::{
    Engine, EngineOptions, MemoryBackend, Required, Step, StepCtx, StepError, UserMessageEvent,
    Workflow,
};
use std::sync::Arc;

event!(Done, "StopEvent");

#[tokio::test]
async fn ended_runs_leave_memory_when_not_kept() {
    let wf = Workflow::builder("Evict")
        .step(Step::new(
            "stop",
            |_: Required<UserMessageEvent>, _: StepCtx| async {
                Ok::<_, StepError>(Done::default())
            },
        ))
        .build()
        .unwrap();
    let opts = EngineOptions {
        keep_ended_runs: false,
        ..EngineOptions::default()
    };
    let engine = Engine::new(wf.clone(), Arc::new(MemoryBackend::new()), opts);
    let id = engine.start_run(UserMessageEvent::new("x")).await.unwrap();
    let _ = engine.wait_for_end(&id).await;
    let mut rx = None;
    // The eviction happens right after the stop is durable; wait for it through the watch.
    if let Ok(r) = engine.watch(&id) {
        rx = Some(r);
    }
    if let Some(mut rx) = rx {
        while engine.snapshot(&id).is_some() {
            if rx.changed().await.is_err() {
                break;
            }
        }
    }
    assert!(engine.snapshot(&id).is_none());
    assert_eq!(
        engine
            .send(&id, Done::default())
            .await
            .err()
            .unwrap()
            .code(),
        "SAAP-E001"
    );

    let kept = Engine::in_memory(wf);
    let id = kept.start_run(UserMessageEvent::new("x")).await.unwrap();
    kept.wait_for_end(&id).await.unwrap();
    assert!(kept.snapshot(&id).unwrap().has_stop());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_does_not_keep_ended_runs_does_not_load_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live-only.db");
    let wf = || {
        Workflow::builder("LiveOnly")
            .step(Step::new(
                "stop",
                |_: Required<UserMessageEvent>, _: StepCtx| async {
                    Ok::<_, StepError>(Done::default())
                },
            ))
            .build()
            .unwrap()
    };
    {
        let backend = Arc::new(saap::SqliteBackend::open(&path).unwrap());
        let (engine, _) = Engine::open(wf(), backend, EngineOptions::default())
            .await
            .unwrap();
        let id = engine.start_run(UserMessageEvent::new("x")).await.unwrap();
        engine.wait_for_end(&id).await.unwrap();
        engine.halt();
    }
    let opts = EngineOptions {
        keep_ended_runs: false,
        ..EngineOptions::default()
    };
    let backend = Arc::new(saap::SqliteBackend::open(&path).unwrap());
    let (engine, rec) = Engine::open(wf(), backend, opts).await.unwrap();
    assert_eq!((rec.resumed_runs, rec.ended_runs), (0, 0));
    assert!(engine.run_ids().is_empty());
}
