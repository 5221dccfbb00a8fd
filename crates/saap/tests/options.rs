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
    assert_eq!(rec.resumed_runs, 0);
    assert!(engine.run_ids().is_empty());
}

event!(Ping, "ControlEvent");
event!(Pong, "ControlEvent");

/// Steps that become ready together must run concurrently even where the engine does not
/// spawn them (a current-thread runtime with the in-memory backend polls them on one task):
/// `wait` can only finish after `signal` ran, whichever is polled first.
#[tokio::test]
async fn steps_ready_together_run_concurrently_on_a_current_thread_runtime() {
    let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
    let tx = Arc::new(std::sync::Mutex::new(Some(tx)));
    let rx = Arc::new(std::sync::Mutex::new(Some(rx)));
    let wf = Workflow::builder("Together")
        .step(Step::new(
            "fork",
            |_: Required<UserMessageEvent>, _: StepCtx| async {
                Ok::<_, StepError>((Ping::default(), Pong::default()))
            },
        ))
        .step(Step::new("wait", move |_: Required<Ping>, _: StepCtx| {
            let rx = rx.lock().unwrap().take();
            async move {
                let n = rx
                    .ok_or_else(|| StepError::new("ran twice"))?
                    .await
                    .map_err(|_| StepError::new("signal dropped"))?;
                Ok::<_, StepError>(Done { n })
            }
        }))
        .step(Step::new("signal", move |_: Required<Pong>, _: StepCtx| {
            let tx = tx.lock().unwrap().take();
            async move {
                tokio::task::yield_now().await;
                if let Some(tx) = tx {
                    let _ = tx.send(7);
                }
                Ok::<_, StepError>(())
            }
        }))
        .build()
        .unwrap();
    let engine = Engine::in_memory(wf);
    let id = engine.start_run(UserMessageEvent::new("x")).await.unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(10), engine.wait_for_end(&id))
        .await
        .expect("the two steps ran concurrently")
        .unwrap();
    let snap = engine.snapshot(&id).unwrap();
    assert_eq!(snap.events_of::<Done>(), vec![Done { n: 7 }]);
    assert_eq!(
        (snap.executions_of("wait"), snap.executions_of("signal")),
        (1, 1)
    );
}
