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
