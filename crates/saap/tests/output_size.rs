//! DESIGN §4.8: a step that returns an event larger than the engine's event size limit fails
//! on a durable backend (the output would be stored), with a message that says what to do.
#![allow(clippy::unwrap_used)]

mod common;

use saap::testing::TestRunner;
use saap::{
    Engine, EngineOptions, ExceptionEvent, Required, SqliteBackend, Step, StepCtx, StepError,
    UserMessageEvent, Workflow,
};
use std::sync::Arc;

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Blob {
    data: String,
}
impl saap::Event for Blob {
    const NAME: &'static str = "Blob";
    const PARENTS: &'static [&'static str] = &["StopEvent"];
}

fn returning(bytes: usize) -> Workflow {
    Workflow::builder("BigOutput")
        .step(Step::new(
            "load",
            move |_: Required<UserMessageEvent>, _: StepCtx| async move {
                Ok::<_, StepError>(Blob {
                    data: "x".repeat(bytes),
                })
            },
        ))
        .build()
        .unwrap()
}

fn sqlite(wf: Workflow, dir: &tempfile::TempDir) -> TestRunner {
    let backend = SqliteBackend::open(dir.path().join("big.db")).unwrap();
    TestRunner::new(Engine::new(wf, Arc::new(backend), EngineOptions::default()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_larger_than_the_event_limit_fails_its_step_on_a_durable_store() {
    let dir = tempfile::tempdir().unwrap();
    let limit = EngineOptions::default().max_event_bytes;
    let runner = sqlite(returning(limit + 1), &dir);
    let run = runner.start(UserMessageEvent::new("go")).await.unwrap();
    let ex = run
        .wait_for_event::<ExceptionEvent>(common::WAIT)
        .await
        .unwrap();
    assert!(
        ex.message.contains("`Blob`")
            && ex.message.contains(&limit.to_string())
            && ex.message.contains("by reference"),
        "{}",
        ex.message
    );
    let snap = run.snapshot();
    assert!(snap.events_of::<Blob>().is_empty());
    assert!(!run.has_stop());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_at_the_event_limit_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    // `{"data":"…"}`: 11 bytes around the string.
    let limit = EngineOptions::default().max_event_bytes;
    let runner = sqlite(returning(limit - 11), &dir);
    let run = runner.start(UserMessageEvent::new("go")).await.unwrap();
    let blob = run.wait_for_event::<Blob>(common::WAIT).await.unwrap();
    assert_eq!(blob.data.len(), limit - 11);
    assert!(!run.has_exception());
}
