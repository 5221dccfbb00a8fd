//! Cancelling a run (DESIGN §8, issue 21 §4): `Engine::cancel` ends a live run with a
//! `RunCancelledEvent`; its pending timers never fire, its running bodies see their
//! cancellation token, what they return afterwards is after-stop evidence, and the run
//! reports `cancelled` — after a restart too. An ended or unknown run is refused.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Kind, WAIT, harness};
use saap::testing::TestRunner;
use saap::{
    Delayed, Engine, EngineOptions, Required, RunCancelledEvent, SqliteBackend, Step, StepCtx,
    StepError, UserMessageEvent, Workflow,
};
use saap_dispatch::run::progress::Progress;
use std::sync::Arc;
use std::time::Duration;

event!(Asked, "ControlEvent");
event!(Answer, "ControlEvent");
event!(TimedOut, "ControlEvent");
event!(Working, "ControlEvent");
event!(Done, "StopEvent");

/// `ask` returns `Asked` and a timeout an hour away; `decide` ends the run on either.
fn waiting() -> Workflow {
    Workflow::builder("Waiting")
        .step(Step::new(
            "ask",
            |_: Required<UserMessageEvent>, _: StepCtx| async move {
                Ok::<_, StepError>((
                    Asked { n: 0 },
                    Delayed::after(Duration::from_secs(3600), TimedOut { n: 0 }),
                ))
            },
        ))
        .step(Step::new(
            "decide",
            |_: Required<saap::Either<Answer, TimedOut>>, _: StepCtx| async move {
                Ok::<_, StepError>(Done { n: 1 })
            },
        ))
        .build()
        .unwrap()
}

async fn cancelling_a_waiting_run_ends_it_as_cancelled_and_drops_its_timer(kind: Kind) {
    let h = harness(kind, waiting());
    let run = h.runner.start(UserMessageEvent::new("x")).await.unwrap();
    run.wait_for_event::<Asked>(WAIT).await.unwrap();
    h.runner
        .engine()
        .cancel(run.run_id(), "the customer withdrew")
        .await
        .unwrap();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    assert_eq!(snap.run.progress(), Progress::Cancelled);
    let cancelled = run.events_of::<RunCancelledEvent>();
    assert_eq!(cancelled.len(), 1);
    assert_eq!(cancelled[0].reason, "the customer withdrew");
    assert_eq!(cancelled[0].http_status_code, 499);
    let timeline = snap.timeline();
    assert!(timeline.contains("timer 0 dropped"), "{timeline}");
    assert!(run.events_of::<Done>().is_empty());
    // A second cancellation is refused: the run has ended.
    let again = h.runner.engine().cancel(run.run_id(), "again").await;
    let e = again.unwrap_err();
    assert_eq!(e.code(), "SAAP-E012");
    assert!(e.to_string().contains("cancelled"), "{e}");
    // A store that lists runs lists it as cancelled, not failed.
    if !matches!(kind, Kind::Memory) {
        use saap::backend::{RunQuery, StatusFilter};
        let engine = h.runner.engine();
        let list = |status| {
            let query = RunQuery {
                status: Some(status),
                ..RunQuery::default()
            };
            async move {
                engine
                    .backend()
                    .list_runs(engine.workflow().name(), &query)
                    .wait()
                    .await
                    .unwrap()
                    .runs
            }
        };
        let cancelled = list(StatusFilter::Cancelled).await;
        assert_eq!(cancelled.len(), 1, "{cancelled:?}");
        assert_eq!(cancelled[0].status(), "cancelled");
        assert!(list(StatusFilter::Failed).await.is_empty());
    }
}

/// `work` waits on its cancellation token, then returns `Working`: after the cancellation
/// that output is only evidence.
fn long_running() -> Workflow {
    Workflow::builder("LongRunning")
        .step(Step::new(
            "work",
            |_: Required<UserMessageEvent>, ctx: StepCtx| async move {
                let token = ctx.cancellation();
                tokio::time::timeout(WAIT, token.cancelled())
                    .await
                    .map_err(|_| StepError::new("never told of the cancellation"))?;
                Ok::<_, StepError>(Working { n: 9 })
            },
        ))
        .step(Step::new(
            "finish",
            |_: Required<Working>, _: StepCtx| async move { Ok::<_, StepError>(Done { n: 2 }) },
        ))
        .build()
        .unwrap()
}

async fn a_running_body_is_told_and_its_late_output_is_evidence(kind: Kind) {
    let h = harness(kind, long_running());
    let run = h.runner.start(UserMessageEvent::new("x")).await.unwrap();
    // The body is running (its execution started) before the cancellation.
    tokio::time::timeout(WAIT, async {
        while run.snapshot().run.running().next().is_none() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    h.runner
        .engine()
        .cancel(run.run_id(), "stop")
        .await
        .unwrap();
    // The body returns once told; its output arrives after the stop.
    let snap = tokio::time::timeout(WAIT, async {
        loop {
            let s = run.snapshot();
            if s.run.running().next().is_none() {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    assert_eq!(snap.run.progress(), Progress::Cancelled);
    let timeline = snap.timeline();
    assert!(timeline.contains("Working after the stop"), "{timeline}");
    assert_eq!(run.executions_of("finish"), 0);
}

on_both_backends! {
    cancelling_a_waiting_run_ends_it_as_cancelled_and_drops_its_timer =>
        cancelling_a_waiting_run_ends_it_as_cancelled_and_drops_its_timer;
    a_running_body_is_told_and_its_late_output_is_evidence =>
        a_running_body_is_told_and_its_late_output_is_evidence;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_an_unknown_run_is_refused() {
    let runner = TestRunner::in_memory(waiting());
    let e = runner.engine().cancel("ffffffff", "x").await.unwrap_err();
    assert_eq!(e.code(), "SAAP-E001");
}

/// A cancelled run stays cancelled: the journal replays it at the next open, which resumes
/// nothing and fires no timer.
#[test]
fn a_cancelled_run_stays_cancelled_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let rt = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    };
    let run_id = rt().block_on(async {
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let (engine, _) = Engine::open(waiting(), backend, EngineOptions::default())
            .await
            .unwrap();
        let run = TestRunner::new(engine.clone())
            .start(UserMessageEvent::new("x"))
            .await
            .unwrap();
        run.wait_for_event::<Asked>(WAIT).await.unwrap();
        engine.cancel(run.run_id(), "done with it").await.unwrap();
        run.run_id().to_string()
    });
    rt().block_on(async {
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let (engine, recovery) = Engine::open(waiting(), backend, EngineOptions::default())
            .await
            .unwrap();
        assert_eq!(recovery.resumed_runs, 0);
        assert!(recovery.failed.is_empty(), "{:?}", recovery.failed);
        let snap = engine.stored_snapshot(&run_id).await.unwrap().unwrap();
        assert_eq!(snap.run.progress(), Progress::Cancelled);
        assert_eq!(
            engine.cancel(&run_id, "again").await.unwrap_err().code(),
            "SAAP-E012"
        );
    });
}
