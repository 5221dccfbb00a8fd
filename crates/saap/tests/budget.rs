//! Run budgets (DESIGN §8, issue 21 §5): a run that spends its executions or its wall time
//! parks in `waiting_budget` — what it would run next is held, nothing lost — and
//! `Engine::resume` grants more; the pause and the grants survive a restart; resuming a run
//! that is not paused is refused with a clear error.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Kind, WAIT};
use saap::testing::TestRunner;
use saap::{
    Delayed, Engine, EngineError, EngineOptions, Raise, Required, RunBudget, SqliteBackend, Step,
    StepCtx, StepError, UserMessageEvent, Workflow,
};
use std::sync::Arc;
use std::time::Duration;

event!(A, "ControlEvent");
event!(B, "ControlEvent");
event!(C, "ControlEvent");
event!(Later, "ControlEvent");
event!(Done, "StopEvent");

/// `s0 → A → s1 → B → s2 → C → s3 → Done`: four executions.
fn chain(name: &str) -> Workflow {
    Workflow::builder(name)
        .step(Step::new(
            "s0",
            |_: Required<UserMessageEvent>, _: StepCtx| async move { Ok::<_, StepError>(A { n: 0 }) },
        ))
        .step(Step::new("s1", |_: Required<A>, _: StepCtx| async move {
            Ok::<_, StepError>(B { n: 1 })
        }))
        .step(Step::new("s2", |_: Required<B>, _: StepCtx| async move {
            Ok::<_, StepError>(C { n: 2 })
        }))
        .step(Step::new("s3", |_: Required<C>, _: StepCtx| async move {
            Ok::<_, StepError>(Done { n: 3 })
        }))
        .build()
        .unwrap()
}

/// `s0` returns `A` now and `Later` after `delay`; `s1` takes `Later` and stops the run.
fn delayed(delay: Duration) -> Workflow {
    Workflow::builder("Delayed")
        .step(Step::new(
            "s0",
            move |_: Required<UserMessageEvent>, _: StepCtx| async move {
                Ok::<_, StepError>((A { n: 0 }, Delayed::after(delay, Later { n: 1 })))
            },
        ))
        .step(Step::new(
            "s1",
            |_: Required<Later>, _: StepCtx| async move { Ok::<_, StepError>(Done { n: 1 }) },
        ))
        .build()
        .unwrap()
}

fn budget(executions: Option<u32>, time: Option<Duration>) -> EngineOptions {
    EngineOptions {
        run_budget: RunBudget {
            max_executions: executions,
            max_wall_time: time,
            ..RunBudget::default()
        },
        ..EngineOptions::default()
    }
}

/// `chain`, each step reporting a model call of 100 tokens costing 0.05.
fn metered_chain() -> Workflow {
    Workflow::builder("Metered")
        .step(Step::new(
            "s0",
            |_: Required<UserMessageEvent>, ctx: StepCtx| async move {
                ctx.report_usage(100, 0.05);
                Ok::<_, StepError>(A { n: 0 })
            },
        ))
        .step(Step::new("s1", |_: Required<A>, ctx: StepCtx| async move {
            ctx.report_usage(100, 0.05);
            Ok::<_, StepError>(B { n: 1 })
        }))
        .step(Step::new("s2", |_: Required<B>, ctx: StepCtx| async move {
            ctx.report_usage(100, 0.05);
            Ok::<_, StepError>(C { n: 2 })
        }))
        .step(Step::new("s3", |_: Required<C>, ctx: StepCtx| async move {
            ctx.report_usage(100, 0.05);
            Ok::<_, StepError>(Done { n: 3 })
        }))
        .build()
        .unwrap()
}

async fn a_token_budget_holds_what_runs_after_the_tokens_are_used_up(kind: Kind) {
    let dir = tempfile::tempdir().unwrap();
    let opts = EngineOptions {
        run_budget: RunBudget {
            max_tokens: Some(250),
            ..RunBudget::default()
        },
        ..EngineOptions::default()
    };
    let runner = TestRunner::new(engine(kind, metered_chain(), opts, &dir));
    let run = runner.start(UserMessageEvent::new("go")).await.unwrap();
    let snap = run.wait_idle(WAIT).await.unwrap();
    // s0, s1 and s2 used 300 of 250 tokens: s3, started by s2's completion, is held.
    assert_eq!(run.status(), "waiting_budget");
    assert_eq!(snap.run.held().count(), 1);
    assert!(run.events_of::<Done>().is_empty());
    let waiting = snap.waiting_for();
    assert!(waiting.contains("its steps used 300 tokens"), "{waiting}");
    let timeline = snap.timeline();
    assert!(
        timeline.contains("budget spent (250 tokens used)"),
        "{timeline}"
    );
    let r = run
        .resume(Raise {
            tokens: Some(1_000),
            ..Raise::default()
        })
        .await
        .unwrap();
    assert_eq!(r.released, 1);
    run.wait_for_end(WAIT).await.unwrap();
    assert_eq!(run.events_of::<Done>().len(), 1);
}

async fn a_cost_budget_holds_what_runs_after_the_cost_is_reached(kind: Kind) {
    let dir = tempfile::tempdir().unwrap();
    let opts = EngineOptions {
        run_budget: RunBudget {
            max_cost: Some(0.08),
            ..RunBudget::default()
        },
        ..EngineOptions::default()
    };
    let runner = TestRunner::new(engine(kind, metered_chain(), opts, &dir));
    let run = runner.start(UserMessageEvent::new("go")).await.unwrap();
    let snap = run.wait_idle(WAIT).await.unwrap();
    // s0 and s1 cost 0.10 of 0.08: s2 is held.
    assert_eq!(run.status(), "waiting_budget");
    assert_eq!(run.executions_of("s2"), 1);
    assert!(run.events_of::<C>().is_empty());
    assert!(
        snap.timeline().contains("budget spent (cost 0.08 reached)"),
        "{}",
        snap.timeline()
    );
    // Without amounts: the first budget again, 0.08 more (0.16 in all): s2 runs (0.15, still
    // under), then s3, which stops the run.
    run.resume(Raise::default()).await.unwrap();
    run.wait_for_end(WAIT).await.unwrap();
    assert_eq!(run.events_of::<Done>().len(), 1);
}

/// An engine with `opts` on `kind`'s store (kept in `dir` for SQLite).
fn engine(kind: Kind, wf: Workflow, opts: EngineOptions, dir: &tempfile::TempDir) -> Engine {
    match kind {
        Kind::Sqlite => {
            let backend = SqliteBackend::open(dir.path().join("saap.db")).unwrap();
            Engine::new(wf, Arc::new(backend), opts)
        }
        _ => Engine::new(wf, Arc::new(saap::MemoryBackend::new()), opts),
    }
}

async fn an_executions_budget_parks_the_run_until_it_is_resumed(kind: Kind) {
    let dir = tempfile::tempdir().unwrap();
    let runner = TestRunner::new(engine(kind, chain("Chain"), budget(Some(2), None), &dir));
    let run = runner.start(UserMessageEvent::new("go")).await.unwrap();
    let snap = run.wait_idle(WAIT).await.unwrap();
    assert_eq!(run.status(), "waiting_budget");
    assert_eq!(run.executions_of("s0") + run.executions_of("s1"), 2);
    // s2 was decided and is held: started on record, never run.
    assert_eq!(snap.run.held().count(), 1);
    assert!(run.events_of::<C>().is_empty());
    let waiting = snap.waiting_for();
    assert!(
        waiting.contains("budget spent: it ran the 2 executions it was granted"),
        "{waiting}"
    );
    assert!(waiting.contains("`s2`"), "{waiting}");
    let timeline = snap.timeline();
    assert!(
        timeline.contains("budget granted: 2 executions in all"),
        "{timeline}"
    );
    assert!(
        timeline.contains("budget spent (2 executions ran)"),
        "{timeline}"
    );

    // A resume without amounts grants the first budget again: two more, enough to stop.
    let resumed = run.resume(Raise::default()).await.unwrap();
    assert_eq!(resumed.released, 1);
    assert_eq!(resumed.grant.executions, Some(2));
    run.wait_for_end(WAIT).await.unwrap();
    assert_eq!(run.status(), "stopped");
    assert_eq!(run.events_of::<Done>().len(), 1);
}

async fn a_raise_names_how_much_more(kind: Kind) {
    let dir = tempfile::tempdir().unwrap();
    let runner = TestRunner::new(engine(kind, chain("Chain"), budget(Some(1), None), &dir));
    let run = runner.start(UserMessageEvent::new("go")).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    assert_eq!(run.status(), "waiting_budget");
    // One more at a time: s1, then s2, then s3.
    for expected in ["s1", "s2"] {
        let r = run
            .resume(Raise {
                executions: Some(1),
                time: None,
                ..Raise::default()
            })
            .await
            .unwrap();
        assert_eq!(r.released, 1);
        run.wait_idle(WAIT).await.unwrap();
        assert_eq!(run.executions_of(expected), 1);
        assert_eq!(run.status(), "waiting_budget");
    }
    run.resume(Raise {
        executions: Some(5),
        time: None,
        ..Raise::default()
    })
    .await
    .unwrap();
    run.wait_for_end(WAIT).await.unwrap();
    assert_eq!(run.events_of::<Done>().len(), 1);
}

async fn a_wall_time_budget_holds_what_comes_after_its_end(kind: Kind) {
    let dir = tempfile::tempdir().unwrap();
    let wf = delayed(Duration::from_millis(300));
    let opts = budget(None, Some(Duration::from_millis(50)));
    let runner = TestRunner::new(engine(kind, wf, opts, &dir));
    let run = runner.start(UserMessageEvent::new("go")).await.unwrap();
    // The timer fires after the time ended: its event is logged, the step it starts held.
    run.wait_for_event::<Later>(WAIT).await.unwrap();
    let snap = run.wait_idle(WAIT).await.unwrap();
    assert_eq!(run.status(), "waiting_budget");
    assert_eq!(snap.run.held().count(), 1);
    let timeline = snap.timeline();
    assert!(timeline.contains("budget spent (time ended"), "{timeline}");
    let r = run
        .resume(Raise {
            executions: None,
            time: Some(Duration::from_secs(60)),
            ..Raise::default()
        })
        .await
        .unwrap();
    assert_eq!(r.released, 1);
    run.wait_for_end(WAIT).await.unwrap();
    assert_eq!(run.events_of::<Done>().len(), 1);
}

async fn resuming_a_run_that_is_not_paused_is_refused(kind: Kind) {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(kind, chain("Chain"), budget(Some(10), None), &dir);
    let runner = TestRunner::new(e.clone());
    let run = runner.run(UserMessageEvent::new("go")).await.unwrap();
    // Ended: nothing of it runs again.
    let err = run.resume(Raise::default()).await.unwrap_err();
    assert_eq!(err.code(), "SAAP-E020");
    assert!(err.to_string().contains("(stopped)"), "{err}");
    assert!(err.to_string().contains("start a new run"), "{err}");
    // Unknown.
    let err = e.resume("nope", Raise::default()).await.unwrap_err();
    assert!(matches!(err, EngineError::UnknownRun { .. }), "{err}");
    // A raise of nothing.
    let err = run
        .resume(Raise {
            executions: Some(0),
            time: None,
            ..Raise::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), "SAAP-E021");
}

async fn a_run_waiting_for_an_event_is_not_paused(kind: Kind) {
    let dir = tempfile::tempdir().unwrap();
    // `s1` takes `Later`, which never comes (the timer is an hour away).
    let wf = delayed(Duration::from_secs(3600));
    let runner = TestRunner::new(engine(kind, wf, budget(Some(5), None), &dir));
    let run = runner.start(UserMessageEvent::new("go")).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    assert_eq!(run.status(), "waiting_timer");
    let err = run.resume(Raise::default()).await.unwrap_err();
    assert_eq!(err.code(), "SAAP-E020");
    assert!(err.to_string().contains("waiting_timer"), "{err}");
}

async fn two_resumes_of_one_pause_grant_once(kind: Kind) {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(kind, chain("Chain"), budget(Some(1), None), &dir);
    let runner = TestRunner::new(e.clone());
    let run = runner.start(UserMessageEvent::new("go")).await.unwrap();
    let snap = run.wait_idle(WAIT).await.unwrap();
    assert_eq!(run.status(), "waiting_budget");
    // Two people (or one message delivered twice) resume the pause they saw: one grant.
    let seen = snap.run.budget().unwrap().grants;
    assert_eq!(seen, 1);
    let one = Raise {
        executions: Some(1),
        ..Raise::default()
    };
    let (a, b) = tokio::join!(
        e.resume_seen(run.run_id(), one, seen),
        e.resume_seen(run.run_id(), one, seen)
    );
    let (granted, refused) = match (a, b) {
        (Ok(g), Err(r)) | (Err(r), Ok(g)) => (g, r),
        other => panic!("exactly one resume must grant: {other:?}"),
    };
    assert_eq!(granted.grant.executions, Some(1));
    assert_eq!(refused.code(), "SAAP-E020");
    assert!(refused.to_string().contains("resumed since"), "{refused}");
    let snap = run.wait_idle(WAIT).await.unwrap();
    assert_eq!(snap.run.budget().unwrap().grants, 2);
    // One more execution ran (s1); s2 is held.
    assert_eq!(run.events_of::<B>().len(), 1);
    assert!(run.events_of::<C>().is_empty());
    // Paused again: the old pause's resume still grants nothing, this pause's does.
    assert_eq!(run.status(), "waiting_budget");
    assert!(e.resume_seen(run.run_id(), one, seen).await.is_err());
    e.resume_seen(run.run_id(), one, 2).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    assert_eq!(run.events_of::<C>().len(), 1);
}

on_both_backends! {
    two_resumes_of_one_pause_grant_once => two_resumes_of_one_pause_grant_once;
    an_executions_budget_parks_the_run_until_it_is_resumed => an_executions_budget_parks_the_run_until_it_is_resumed;
    a_raise_names_how_much_more => a_raise_names_how_much_more;
    a_wall_time_budget_holds_what_comes_after_its_end => a_wall_time_budget_holds_what_comes_after_its_end;
    resuming_a_run_that_is_not_paused_is_refused => resuming_a_run_that_is_not_paused_is_refused;
    a_run_waiting_for_an_event_is_not_paused => a_run_waiting_for_an_event_is_not_paused;
    a_token_budget_holds_what_runs_after_the_tokens_are_used_up => a_token_budget_holds_what_runs_after_the_tokens_are_used_up;
    a_cost_budget_holds_what_runs_after_the_cost_is_reached => a_cost_budget_holds_what_runs_after_the_cost_is_reached;
}

/// What a run's steps used is journaled with their completions: a run paused on its tokens
/// is still paused after a restart, with the same count.
#[test]
fn a_token_count_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let opts = || EngineOptions {
        run_budget: RunBudget {
            max_tokens: Some(150),
            ..RunBudget::default()
        },
        ..EngineOptions::default()
    };
    let run_id = rt().block_on(async {
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let (engine, _) = Engine::open(metered_chain(), backend, opts())
            .await
            .unwrap();
        let run = TestRunner::new(engine.clone())
            .start(UserMessageEvent::new("go"))
            .await
            .unwrap();
        run.wait_idle(WAIT).await.unwrap();
        assert_eq!(run.status(), "waiting_budget");
        engine.halt();
        run.run_id().to_string()
    });
    rt().block_on(async {
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let (engine, _) = Engine::open(metered_chain(), backend, EngineOptions::default())
            .await
            .unwrap();
        let run = TestRunner::new(engine.clone()).attach(&run_id).unwrap();
        let snap = run.wait_idle(WAIT).await.unwrap();
        assert_eq!(run.status(), "waiting_budget");
        let b = snap.run.budget().unwrap();
        assert_eq!(b.tokens.max, Some(150));
        // 200 (s0, s1), or more if s1's completion was lost with the process and s1 ran
        // again: its count is the new attempt's, never both.
        assert_eq!(b.tokens.used, 200, "{}", snap.timeline());
        let r = run
            .resume(Raise {
                tokens: Some(1_000),
                ..Raise::default()
            })
            .await
            .unwrap();
        assert_eq!(r.grant.tokens, Some(1_000));
        run.wait_for_end(WAIT).await.unwrap();
        assert_eq!(run.events_of::<Done>().len(), 1);
    });
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A paused run stays paused across a restart (its held execution is not run again at
/// open, as an interrupted one would be), and is resumed by the next process.
#[test]
fn a_paused_run_survives_a_restart_and_is_resumed_there() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let open = |opts: EngineOptions| {
        let path = path.clone();
        async move {
            let backend = Arc::new(SqliteBackend::open(&path).unwrap());
            Engine::open(chain("Chain"), backend, opts).await.unwrap()
        }
    };
    let run_id = rt().block_on(async {
        let (engine, _) = open(budget(Some(2), None)).await;
        let run = TestRunner::new(engine.clone())
            .start(UserMessageEvent::new("go"))
            .await
            .unwrap();
        run.wait_idle(WAIT).await.unwrap();
        assert_eq!(run.status(), "waiting_budget");
        engine.halt();
        run.run_id().to_string()
    });
    rt().block_on(async {
        // Opened without a budget option: the run's own budget is in its journal.
        let (engine, recovery) = open(EngineOptions::default()).await;
        assert_eq!(recovery.resumed_runs, 1);
        let run = TestRunner::new(engine.clone()).attach(&run_id).unwrap();
        // (s1 runs again if its completion was not durable when the process stopped.)
        let snap = run.wait_idle(WAIT).await.unwrap();
        assert!(
            !snap.run.records().iter().any(|r| matches!(
                r,
                saap_dispatch::Record::ExecutionRetried { execution, .. } if snap.run.is_held(execution)
            )),
            "a held execution is not run again at open"
        );
        assert_eq!(run.status(), "waiting_budget");
        assert_eq!(run.executions_of("s2"), 1, "started on record");
        assert!(run.events_of::<C>().is_empty(), "and never run");
        let r = run.resume(Raise::default()).await.unwrap();
        assert_eq!(r.grant.executions, Some(2), "the first budget, read from the journal");
        run.wait_for_end(WAIT).await.unwrap();
        assert_eq!(run.events_of::<Done>().len(), 1);
        // The end is durable before the process stops.
        engine.wait_for_end(&run_id).await.unwrap();
        engine.halt();
    });
    rt().block_on(async {
        let (engine, recovery) = open(EngineOptions::default()).await;
        assert_eq!(recovery.resumed_runs, 0);
        assert!(recovery.failed.is_empty(), "{:?}", recovery.failed);
        let snap = engine.stored_snapshot(&run_id).await.unwrap().unwrap();
        assert_eq!(snap.run.progress().as_str(), "stopped");
        // Replayed: the journal has the start's budget and the resume's grant.
        let timeline = snap.timeline();
        assert_eq!(timeline.matches("budget granted").count(), 2, "{timeline}");
    });
}

/// A wall time that ended while no process had the run open is spent when one opens it.
#[test]
fn a_wall_time_that_ends_during_downtime_is_spent_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let wf = || delayed(Duration::from_millis(400));
    let run_id = rt().block_on(async {
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let opts = budget(None, Some(Duration::from_millis(200)));
        let (engine, _) = Engine::open(wf(), backend, opts).await.unwrap();
        let run = TestRunner::new(engine.clone())
            .start(UserMessageEvent::new("go"))
            .await
            .unwrap();
        run.wait_for_event::<A>(WAIT).await.unwrap();
        engine.halt();
        run.run_id().to_string()
    });
    // Down past the budget's end and the timer's due time.
    std::thread::sleep(Duration::from_millis(500));
    rt().block_on(async {
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let (engine, _) = Engine::open(wf(), backend, EngineOptions::default())
            .await
            .unwrap();
        let run = TestRunner::new(engine.clone()).attach(&run_id).unwrap();
        // The clock reading at open spends the time first, then fires the timer: its step
        // is held.
        run.wait_for_event::<Later>(WAIT).await.unwrap();
        let snap = run.wait_idle(WAIT).await.unwrap();
        assert_eq!(run.status(), "waiting_budget");
        assert_eq!(snap.run.held().count(), 1);
        assert!(run.events_of::<Done>().is_empty());
    });
}
