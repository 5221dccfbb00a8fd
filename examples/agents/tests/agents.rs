//! The example agents: the happy paths, on the in-memory engine and the embedded one.
#![allow(clippy::unwrap_used)]

use saap::testing::TestRunner;
use saap::{ChunkEvent, Engine, EngineOptions, SqliteBackend, UserMessageEvent};
use saap_examples::approval::{self, ApprovalGiven, ApprovalRequested, Declined, Executed};
use saap_examples::rag::{self, Answered, Retrieved};
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rag_agent_fans_out_fans_in_and_answers_once() {
    let runner = TestRunner::in_memory(rag::workflow());
    let run = runner
        .start(UserMessageEvent::new("How do I reset my password?"))
        .await
        .unwrap();
    let answer = run.wait_for_event::<Answered>(WAIT).await.unwrap();
    assert!(
        answer.text.contains("Settings > Security"),
        "{}",
        answer.text
    );
    let snap = run.wait_for_end(WAIT).await.unwrap();
    assert_eq!(snap.executions_of("search"), 3);
    assert_eq!(snap.executions_of("rank"), 1);
    assert_eq!(snap.executions_of("answer"), 1);
    assert_eq!(snap.events_of::<Retrieved>().len(), 3);
    assert!(
        snap.events_of::<ChunkEvent>().len() >= 2,
        "the answer is streamed as chunks"
    );
    assert!(!snap.has_exception());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rag_agent_on_the_embedded_engine() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(SqliteBackend::open(dir.path().join("rag.db")).unwrap());
    let (engine, _) = Engine::open(rag::workflow(), backend, EngineOptions::default())
        .await
        .unwrap();
    let run = TestRunner::new(engine.clone())
        .start(UserMessageEvent::new("reset password"))
        .await
        .unwrap();
    run.wait_for_event::<Answered>(WAIT).await.unwrap();
    // Engine::wait_for_end returns once the end is durable; then a crash loses nothing.
    engine.wait_for_end(run.run_id()).await.unwrap();
    let before = run.timeline();
    assert!(
        before.contains("[display]") && before.contains("from x5 answer"),
        "{before}"
    );
    engine.halt();
    let backend = Arc::new(SqliteBackend::open(dir.path().join("rag.db")).unwrap());
    let (engine, rec) = Engine::open(rag::workflow(), backend, EngineOptions::default())
        .await
        .unwrap();
    assert_eq!(rec.resumed_runs, 0);
    let after = engine
        .stored_snapshot(run.run_id())
        .await
        .unwrap()
        .unwrap()
        .timeline();
    assert_eq!(
        before, after,
        "the timeline is rebuilt from the store exactly"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_agent_waits_for_the_human_then_executes() {
    let runner = TestRunner::in_memory(approval::workflow());
    let run = runner
        .start(UserMessageEvent::new("refund order 17"))
        .await
        .unwrap();
    let req = run.wait_for_event::<ApprovalRequested>(WAIT).await.unwrap();
    assert_eq!(req.action, "refund order 17");
    let idle = run.wait_idle(WAIT).await.unwrap();
    assert!(!idle.is_ended());
    assert!(
        idle.waiting_for()
            .contains("step `decide` waits for: required `approval_given`"),
        "{}",
        idle.waiting_for()
    );
    run.send(ApprovalGiven {
        approved: true,
        by: "ana".into(),
    })
    .await
    .unwrap();
    let done = run.wait_for_event::<Executed>(WAIT).await.unwrap();
    assert_eq!(done.approved_by, "ana");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_agent_declines_when_the_human_says_no() {
    let runner = TestRunner::in_memory(approval::workflow());
    let run = runner
        .start(UserMessageEvent::new("delete the database"))
        .await
        .unwrap();
    run.wait_for_event::<ApprovalRequested>(WAIT).await.unwrap();
    run.send(ApprovalGiven {
        approved: false,
        by: "bo".into(),
    })
    .await
    .unwrap();
    run.wait_for_event::<Declined>(WAIT).await.unwrap();
    assert!(run.events_of::<Executed>().is_empty());
}
