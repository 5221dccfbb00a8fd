//! Fork (issue 23 §2, `Engine::fork`): a new run from a stored run's log up to an event from
//! outside — those executions reused, not run again — with that event sent again, replaced
//! or preceded by another, the original's later events sent again (or not), the original
//! left alone; fork points that cannot be forked at are refused with what to do. (The
//! property over generated workflows is in `differential.rs`.)
#![allow(clippy::unwrap_used)]

mod common;

use common::WAIT;
use saap::event::Payload;
use saap::fork::{ForkChange, ForkOptions};
use saap::testing::{TestRun, TestRunner};
use saap::{
    Engine, EngineError, EngineOptions, Required, SqliteBackend, Step, StepCtx, StepError,
    UserMessageEvent, Workflow,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

event!(Asked, "ControlEvent");
event!(Hint, "ControlEvent");
event!(Noted, "ControlEvent");
event!(Answer, "ControlEvent");
event!(Done, "StopEvent");

/// `ask` (counted in `asks`) turns the question into `Asked`; `note` turns a `Hint` into
/// `Noted`; `decide` stops with the sum once it has both and an `Answer`.
fn agent(asks: Arc<AtomicU32>) -> Workflow {
    Workflow::builder("Forked")
        .step(Step::new(
            "ask",
            move |q: Required<UserMessageEvent>, _: StepCtx| {
                let asks = asks.clone();
                async move {
                    asks.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, StepError>(Asked {
                        n: q.message.len() as u32,
                    })
                }
            },
        ))
        .step(Step::new(
            "note",
            |h: Required<Hint>, _: StepCtx| async move { Ok::<_, StepError>(Noted { n: h.n * 10 }) },
        ))
        .step(Step::new(
            "decide",
            |(a, n, x): (Required<Asked>, Required<Noted>, Required<Answer>), _: StepCtx| async move {
                Ok::<_, StepError>(Done { n: a.n + n.n + x.n })
            },
        ))
        .build()
        .unwrap()
}

struct Fixture {
    engine: Engine,
    runner: TestRunner,
    asks: Arc<AtomicU32>,
    run: TestRun,
    _dir: tempfile::TempDir,
}

/// A run on SQLite that got a hint and an answer: its log is [0] UserMessageEvent,
/// [1] Asked, [2] Hint, [3] Noted, [4] Answer, [5] Done (4 + 10 + 5 = 19).
async fn answered() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(SqliteBackend::open(dir.path().join("saap.db")).unwrap());
    let asks = Arc::new(AtomicU32::new(0));
    let engine = Engine::new(agent(asks.clone()), backend, EngineOptions::default());
    let runner = TestRunner::new(engine.clone());
    let run = runner.start(UserMessageEvent::new("why?")).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    run.send(Hint { n: 1 }).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    run.send(Answer { n: 5 }).await.unwrap();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    assert_eq!(snap.events_of::<Done>(), vec![Done { n: 19 }]);
    Fixture {
        engine,
        runner,
        asks,
        run,
        _dir: dir,
    }
}

fn names(run: &TestRun) -> Vec<String> {
    run.snapshot()
        .events()
        .into_iter()
        .map(|e| e.name)
        .collect()
}

fn replace<T: serde::Serialize>(name: &str, fields: T) -> ForkChange {
    ForkChange::Replace {
        name: name.to_string(),
        payload: Payload::from_json(serde_json::to_value(fields).unwrap()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_with_the_same_event_reuses_the_prefix_and_reproduces_the_run() {
    let f = answered().await;
    let forked = f
        .engine
        .fork(f.run.run_id(), ForkOptions::new(2, ForkChange::Same))
        .await
        .unwrap();
    assert_ne!(forked.run_id, f.run.run_id());
    assert_eq!(forked.forked_from, f.run.run_id());
    assert_eq!((forked.entries_reused, forked.executions_reused), (2, 1));
    assert_eq!(forked.reapplied, vec![4], "the answer is sent again");
    assert!(forked.not_reapplied.is_empty());
    let fork = f.runner.attach(&forked.run_id).unwrap();
    let snap = fork.wait_for_end(WAIT).await.unwrap();
    assert_eq!(snap.events_of::<Done>(), vec![Done { n: 19 }]);
    assert_eq!(
        serde_json::to_value(snap.run.records()).unwrap(),
        serde_json::to_value(f.run.snapshot().run.records()).unwrap()
    );
    assert_eq!(
        f.asks.load(Ordering::SeqCst),
        1,
        "`ask` was reused, not run again"
    );
    assert_ne!(
        snap.thread_id,
        f.run.snapshot().thread_id,
        "a thread of its own"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_event_changes_the_fork_and_leaves_the_original_alone() {
    let f = answered().await;
    let forked = f
        .engine
        .fork(
            f.run.run_id(),
            ForkOptions::new(4, replace("Answer", Answer { n: 7 })),
        )
        .await
        .unwrap();
    let fork = f.runner.attach(&forked.run_id).unwrap();
    let snap = fork.wait_for_end(WAIT).await.unwrap();
    assert_eq!(snap.events_of::<Done>(), vec![Done { n: 21 }]);
    assert_eq!(f.run.events_of::<Done>(), vec![Done { n: 19 }]);
    assert_eq!(forked.entries_reused, 4);
    assert_eq!(forked.executions_reused, 2);
    // Stored as a run of its own: read back from the store, naming its origin.
    let stored = f
        .engine
        .backend()
        .read_run("Forked", &forked.run_id)
        .wait()
        .await
        .unwrap()
        .unwrap();
    let origin = stored.journal[0].fork.clone().unwrap();
    assert_eq!(
        (origin.run_id.as_str(), origin.at, origin.entries),
        (f.run.run_id(), 4, 4)
    );
    assert!(stored.ended);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_added_event_comes_first_then_the_original_one_and_those_after_it() {
    let f = answered().await;
    let add = ForkChange::Add {
        name: "Hint".into(),
        payload: Payload::from_json(serde_json::json!({ "n": 2 })),
    };
    let forked = f
        .engine
        .fork(f.run.run_id(), ForkOptions::new(4, add))
        .await
        .unwrap();
    assert_eq!(forked.reapplied, vec![4]);
    let fork = f.runner.attach(&forked.run_id).unwrap();
    fork.wait_for_end(WAIT).await.unwrap();
    let names = names(&fork);
    assert_eq!(names[4], "Hint", "{names:?}");
    assert!(names.contains(&"Answer".to_string()), "{names:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_reapply_the_fork_waits_and_says_what_it_did_not_send() {
    let f = answered().await;
    let opts = ForkOptions {
        reapply: false,
        ..ForkOptions::new(2, ForkChange::Same)
    };
    let forked = f.engine.fork(f.run.run_id(), opts).await.unwrap();
    assert!(forked.reapplied.is_empty());
    assert_eq!(forked.not_reapplied.len(), 1);
    assert_eq!(forked.not_reapplied[0].seq, 4);
    assert_eq!(forked.not_reapplied[0].name, "Answer");
    let fork = f.runner.attach(&forked.run_id).unwrap();
    fork.wait_idle(WAIT).await.unwrap();
    assert_eq!(fork.status(), "waiting_event");
    assert_eq!(fork.events_of::<Noted>(), vec![Noted { n: 10 }]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_points_that_cannot_be_forked_at_are_refused_with_what_to_do() {
    let f = answered().await;
    // Kept as evidence after the stop: [6].
    f.run.send(Hint { n: 3 }).await.unwrap();
    let refused = |at: u32, change: ForkChange| {
        let engine = f.engine.clone();
        let run = f.run.run_id().to_string();
        async move {
            match engine.fork(&run, ForkOptions::new(at, change)).await {
                Err(e @ EngineError::BadForkPoint { .. }) => {
                    assert_eq!(e.code(), "SAAP-E024");
                    e.to_string()
                }
                other => panic!("fork at [{at}]: {other:?}"),
            }
        }
    };
    let start = refused(0, ForkChange::Same).await;
    assert!(start.contains("starts the run"), "{start}");
    assert!(start.contains("[2] Hint, [4] Answer"), "{start}");
    let past = refused(99, ForkChange::Same).await;
    assert!(past.contains("its log has 7 events"), "{past}");
    let output = refused(1, ForkChange::Same).await;
    assert!(
        output.contains("event [1] (Asked) is an output of execution x0 (step `ask`)"),
        "{output}"
    );
    let end = refused(7, ForkChange::Same).await;
    assert!(end.contains("end of its log"), "{end}");
    let ended = refused(6, ForkChange::Same).await;
    assert!(ended.contains("had ended before event [6]"), "{ended}");
    // An event of no type of the workflow: refused, nothing written.
    let before = f
        .engine
        .backend()
        .load_runs("Forked", false)
        .wait()
        .await
        .unwrap()
        .len();
    let unknown = f
        .engine
        .fork(
            f.run.run_id(),
            ForkOptions::new(4, replace("Answr", Answer { n: 7 })),
        )
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), "SAAP-E004", "{unknown}");
    let after = f
        .engine
        .backend()
        .load_runs("Forked", false)
        .wait()
        .await
        .unwrap()
        .len();
    assert_eq!(before, after);
    match f
        .engine
        .fork(
            "ffffffffffffffffffffffff",
            ForkOptions::new(2, ForkChange::Same),
        )
        .await
    {
        Err(EngineError::UnknownRun { .. }) => {}
        other => panic!("{other:?}"),
    }
    // A store that keeps no journal has nothing to fork from.
    let memory = TestRunner::in_memory(agent(Arc::default()));
    let run = memory.start(UserMessageEvent::new("why?")).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    match memory
        .engine()
        .fork(run.run_id(), ForkOptions::new(1, ForkChange::Same))
        .await
    {
        Err(e @ EngineError::BadForkPoint { .. }) => {
            assert!(e.to_string().contains("keeps no journal"), "{e}")
        }
        other => panic!("{other:?}"),
    }
}
