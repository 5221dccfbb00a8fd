//! Durable timers (DESIGN §8, issue 21 §2): an event a step returns as `Delayed` arrives
//! when due, as the step's output; a deadline is a step that takes `Either<Answer,
//! TimedOut>`; pending timers die with the run; a timer due while the engine was down fires
//! when it opens; one in the past fires at once; one beyond the horizon fails the step.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Kind, WAIT, harness};
use saap::testing::TestRunner;
use saap::{
    Delayed, Either, Engine, EngineOptions, Required, SqliteBackend, Step, StepCtx, StepError,
    UserMessageEvent, Workflow,
};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

event!(Asked, "ControlEvent");
event!(Answer, "ControlEvent");
event!(TimedOut, "ControlEvent");
event!(Decided, "StopEvent");

/// `ask` returns `Asked` now and `TimedOut` after `delay`; `decide` ends the run with
/// whichever of `Answer` and `TimedOut` came first (`n`: 1 answered, 2 timed out).
fn approval(delay: Duration) -> Workflow {
    Workflow::builder("Approval")
        .step(Step::new(
            "ask",
            move |_: Required<UserMessageEvent>, _: StepCtx| async move {
                Ok::<_, StepError>((Asked { n: 0 }, Delayed::after(delay, TimedOut { n: 7 })))
            },
        ))
        .step(Step::new(
            "decide",
            |a: Required<Either<Answer, TimedOut>>, _: StepCtx| async move {
                let n = match a.into_inner() {
                    Either::Left(_) => 1,
                    Either::Right(t) => {
                        assert_eq!(t.n, 7, "the timer's event arrives as returned");
                        2
                    }
                };
                Ok::<_, StepError>(Decided { n })
            },
        ))
        .build()
        .unwrap()
}

async fn deadline_passes_without_an_answer(kind: Kind) {
    let h = harness(kind, approval(Duration::from_millis(100)));
    let set_at = SystemTime::now();
    let run = h
        .runner
        .start(UserMessageEvent::new("approve?"))
        .await
        .unwrap();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    let decided = run.events_of::<Decided>();
    assert_eq!(decided.len(), 1);
    assert_eq!(decided[0].n, 2, "decided by the timeout");
    // Not before it was due.
    assert!(SystemTime::now().duration_since(set_at).unwrap() >= Duration::from_millis(100));
    let timeline = snap.timeline();
    assert!(timeline.contains("set timer 0: TimedOut due"), "{timeline}");
    assert!(timeline.contains("timer 0 fired: TimedOut"), "{timeline}");
    // The timer's event is the output of the step that set it.
    let timed_out = snap
        .events()
        .into_iter()
        .find(|e| e.name == "TimedOut")
        .unwrap();
    assert!(matches!(timed_out.origin, saap_dispatch::Origin::Execution(x) if x.0 == 0));
}

async fn an_answer_before_the_deadline_drops_the_timer(kind: Kind) {
    let h = harness(kind, approval(Duration::from_secs(3600)));
    let run = h
        .runner
        .start(UserMessageEvent::new("approve?"))
        .await
        .unwrap();
    run.wait_for_event::<Asked>(WAIT).await.unwrap();
    let waiting = run.snapshot().waiting_for();
    assert!(waiting.contains("1 timer(s) pending"), "{waiting}");
    run.send(Answer { n: 1 }).await.unwrap();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    assert_eq!(run.events_of::<Decided>()[0].n, 1, "decided by the answer");
    let timeline = snap.timeline();
    assert!(timeline.contains("timer 0 dropped"), "{timeline}");
    assert!(!timeline.contains("fired"), "{timeline}");
    assert_eq!(snap.run.next_due(), None);
}

async fn a_timer_in_the_past_fires_at_once(kind: Kind) {
    let wf = Workflow::builder("Past")
        .step(Step::new(
            "late",
            |_: Required<UserMessageEvent>, _: StepCtx| async move {
                Ok::<_, StepError>(Delayed::at(
                    SystemTime::UNIX_EPOCH + Duration::from_secs(1),
                    TimedOut { n: 1 },
                ))
            },
        ))
        .step(Step::new(
            "end",
            |_: Required<TimedOut>, _: StepCtx| async move { Ok::<_, StepError>(Decided { n: 3 }) },
        ))
        .build()
        .unwrap();
    let h = harness(kind, wf);
    let run = h.runner.run(UserMessageEvent::new("x")).await.unwrap();
    assert_eq!(run.events_of::<Decided>().len(), 1);
}

on_both_backends! {
    deadline_passes_without_an_answer => deadline_passes_without_an_answer;
    an_answer_before_the_deadline_drops_the_timer => an_answer_before_the_deadline_drops_the_timer;
    a_timer_in_the_past_fires_at_once => a_timer_in_the_past_fires_at_once;
}

/// `Engine::run` on a current-thread runtime (the local driver) waits for the timer too.
#[tokio::test(flavor = "current_thread")]
async fn engine_run_waits_for_the_runs_timers_on_a_current_thread_runtime() {
    let runner = TestRunner::in_memory(approval(Duration::from_millis(20)));
    let run = runner.run(UserMessageEvent::new("x")).await.unwrap();
    assert_eq!(run.events_of::<Decided>()[0].n, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timer_further_away_than_the_horizon_fails_the_step() {
    let runner = TestRunner::in_memory(approval(Duration::from_secs(400 * 86_400)));
    let run = runner.run(UserMessageEvent::new("x")).await.unwrap();
    assert!(run.has_exception());
    let timeline = run.timeline();
    assert!(timeline.contains("SAAP-E011"), "{timeline}");
    assert!(timeline.contains("max_timer_horizon"), "{timeline}");
}

/// A timer due while no engine had the store open fires when one opens it, once.
#[test]
fn a_timer_due_during_downtime_fires_when_the_store_is_opened() {
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
        let (engine, _) = Engine::open(
            approval(Duration::from_millis(300)),
            backend,
            EngineOptions::default(),
        )
        .await
        .unwrap();
        let runner = TestRunner::new(engine.clone());
        let run = runner.start(UserMessageEvent::new("x")).await.unwrap();
        run.wait_for_event::<Asked>(WAIT).await.unwrap();
        engine.halt();
        run.run_id().to_string()
    });
    // Down past the due time.
    std::thread::sleep(Duration::from_millis(400));
    rt().block_on(async {
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let (engine, recovery) = Engine::open(
            approval(Duration::from_millis(300)),
            backend,
            EngineOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(recovery.resumed_runs, 1);
        let run = TestRunner::new(engine.clone()).attach(&run_id).unwrap();
        run.wait_for_end(WAIT).await.unwrap();
        assert_eq!(run.events_of::<Decided>()[0].n, 2);
        assert_eq!(run.events_of::<TimedOut>().len(), 1, "fired once");
    });
    // A third open replays the fired timer from the journal and finds the run ended.
    rt().block_on(async {
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let (engine, recovery) = Engine::open(
            approval(Duration::from_millis(300)),
            backend,
            EngineOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(recovery.resumed_runs, 0);
        assert!(recovery.failed.is_empty(), "{:?}", recovery.failed);
        let snap = engine.stored_snapshot(&run_id).await.unwrap().unwrap();
        assert!(snap.run.is_terminated());
        assert!(snap.timeline().contains("timer 0 fired"));
    });
}

/// Many runs waiting on timers hold no task each; they all fire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_waiting_runs_all_fire() {
    let runner = TestRunner::in_memory(approval(Duration::from_millis(50)));
    let mut runs = Vec::new();
    for i in 0..500 {
        runs.push(
            runner
                .start(UserMessageEvent::new(format!("{i}")))
                .await
                .unwrap(),
        );
    }
    for run in runs {
        run.wait_for_end(WAIT).await.unwrap();
        assert_eq!(run.events_of::<Decided>()[0].n, 2);
    }
}
