//! Fork (issue 23 §2, `Engine::fork`): a new run from a stored run's log up to an event from
//! outside — those executions reused, not run again — with that event sent again, replaced
//! or preceded by another, the original's later events sent again (or not); after the fork
//! point an execution with the inputs of one of the original takes its outputs, the rest run
//! live (or all of them, without reuse); the original left alone; fork points that cannot be forked at are refused with what to do. (The
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
use tokio::sync::Semaphore;

event!(Asked, "ControlEvent");
event!(Hint, "ControlEvent");
event!(Noted, "ControlEvent");
event!(Answer, "ControlEvent");
event!(Done, "StopEvent");

/// How often each step's body ran.
#[derive(Default)]
struct Calls {
    ask: AtomicU32,
    note: AtomicU32,
    decide: AtomicU32,
    tally: AtomicU32,
}

impl Calls {
    /// ask, note, decide, tally.
    fn get(&self) -> [u32; 4] {
        [&self.ask, &self.note, &self.decide, &self.tally].map(|c| c.load(Ordering::SeqCst))
    }
}

/// `ask` turns the question into `Asked`; `note` turns a `Hint` into `Noted`; `decide` stops
/// with the sum once it has both and an `Answer`. Each counts its calls in `calls`.
fn agent(calls: Arc<Calls>) -> Workflow {
    let (c1, c2, c3) = (calls.clone(), calls.clone(), calls);
    Workflow::builder("Forked")
        .step(Step::new(
            "ask",
            move |q: Required<UserMessageEvent>, _: StepCtx| {
                c1.ask.fetch_add(1, Ordering::SeqCst);
                async move {
                    Ok::<_, StepError>(Asked {
                        n: q.message.len() as u32,
                    })
                }
            },
        ))
        .step(Step::new("note", move |h: Required<Hint>, _: StepCtx| {
            c2.note.fetch_add(1, Ordering::SeqCst);
            async move { Ok::<_, StepError>(Noted { n: h.n * 10 }) }
        }))
        .step(Step::new(
            "decide",
            move |(a, n, x): (Required<Asked>, Required<Noted>, Required<Answer>), _: StepCtx| {
                c3.decide.fetch_add(1, Ordering::SeqCst);
                async move { Ok::<_, StepError>(Done { n: a.n + n.n + x.n }) }
            },
        ))
        .build()
        .unwrap()
}

struct Fixture {
    engine: Engine,
    runner: TestRunner,
    calls: Arc<Calls>,
    run: TestRun,
    _dir: tempfile::TempDir,
}

/// A run on SQLite that got a hint and an answer: its log is [0] UserMessageEvent,
/// [1] Asked, [2] Hint, [3] Noted, [4] Answer, [5] Done (4 + 10 + 5 = 19).
async fn answered() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(SqliteBackend::open(dir.path().join("saap.db")).unwrap());
    let calls = Arc::new(Calls::default());
    let engine = Engine::new(agent(calls.clone()), backend, EngineOptions::default());
    let runner = TestRunner::new(engine.clone());
    let run = runner.start(UserMessageEvent::new("why?")).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    run.send(Hint { n: 1 }).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    run.send(Answer { n: 5 }).await.unwrap();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    assert_eq!(snap.events_of::<Done>(), vec![Done { n: 19 }]);
    assert_eq!(calls.get(), [1, 1, 1, 0]);
    Fixture {
        engine,
        runner,
        calls,
        run,
        _dir: dir,
    }
}

/// Run `run_id` as its store keeps it.
async fn read(f: &Fixture, run_id: &str) -> saap::backend::StoredRun {
    f.engine
        .backend()
        .read_run("Forked", run_id)
        .wait()
        .await
        .unwrap()
        .unwrap()
}

/// For each completion in the run's journal after its copied entries: the original's
/// execution whose outputs it took (`None`: it ran).
fn reused_from(stored: &saap::backend::StoredRun) -> Vec<Option<u32>> {
    let copied = stored.journal[0]
        .fork
        .as_ref()
        .map_or(0, |o| o.entries as usize);
    stored.journal[copied..]
        .iter()
        .filter_map(|e| match &e.input {
            saap::backend::StoredInput::Complete { reused, .. } => Some(*reused),
            _ => None,
        })
        .collect()
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
        f.calls.get(),
        [1, 1, 1, 0],
        "`ask` was in the copied prefix; `note` and `decide` got the inputs the original's \
         got after the fork point: all three reused, none run again"
    );
    let stored = read(&f, &forked.run_id).await;
    assert_eq!(reused_from(&stored), [Some(1), Some(2)]);
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

event!(Tallied, "ControlEvent");

/// Holds `note` on a hint of 2: a permit on `entered` when it starts, then it waits on
/// `gate` (never opened).
type Gate = (Arc<Semaphore>, Arc<Semaphore>);

/// `note` turns a `Hint` into `Noted`, `tally` an `Answer` into `Tallied` (each counted in
/// `calls`), and `decide` stops with the sum of both.
fn two_branches(calls: Arc<Calls>, gate: Option<Gate>) -> Workflow {
    let (c1, c2, c3) = (calls.clone(), calls.clone(), calls);
    Workflow::builder("Forked")
        .step(Step::new("note", move |h: Required<Hint>, _: StepCtx| {
            c1.note.fetch_add(1, Ordering::SeqCst);
            let gate = gate.clone().filter(|_| h.n == 2);
            async move {
                if let Some((entered, gate)) = gate {
                    entered.add_permits(1);
                    let _never = gate.acquire().await;
                }
                Ok::<_, StepError>(Noted { n: h.n * 10 })
            }
        }))
        .step(Step::new(
            "tally",
            move |a: Required<Answer>, _: StepCtx| {
                c2.tally.fetch_add(1, Ordering::SeqCst);
                async move { Ok::<_, StepError>(Tallied { n: a.n }) }
            },
        ))
        .step(Step::new(
            "decide",
            move |(n, t): (Required<Noted>, Required<Tallied>), _: StepCtx| {
                c3.decide.fetch_add(1, Ordering::SeqCst);
                async move { Ok::<_, StepError>(Done { n: n.n + t.n }) }
            },
        ))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_fork_point_an_execution_with_changed_inputs_runs_live_and_one_without_is_reused()
{
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(SqliteBackend::open(dir.path().join("saap.db")).unwrap());
    let calls = Arc::new(Calls::default());
    let engine = Engine::new(
        two_branches(calls.clone(), None),
        backend,
        EngineOptions::default(),
    );
    let runner = TestRunner::new(engine.clone());
    // [0] UserMessageEvent, [1] Hint, [2] Noted, [3] Answer, [4] Tallied, [5] Done.
    let run = runner.start(UserMessageEvent::new("go")).await.unwrap();
    run.send(Hint { n: 1 }).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    run.send(Answer { n: 5 }).await.unwrap();
    assert_eq!(
        run.wait_for_end(WAIT).await.unwrap().events_of::<Done>(),
        vec![Done { n: 15 }]
    );
    // Another hint: `note` and `decide` get other fields and run; `tally` gets the answer
    // the original's got and takes its outputs.
    let forked = engine
        .fork(
            run.run_id(),
            ForkOptions::new(1, replace("Hint", Hint { n: 2 })),
        )
        .await
        .unwrap();
    let fork = runner.attach(&forked.run_id).unwrap();
    let snap = fork.wait_for_end(WAIT).await.unwrap();
    assert_eq!(snap.events_of::<Done>(), vec![Done { n: 25 }]);
    assert_eq!(snap.events_of::<Tallied>(), vec![Tallied { n: 5 }]);
    assert_eq!(
        calls.get(),
        [0, 2, 2, 1],
        "`tally` did not run again; the others did"
    );
    let stored = engine
        .backend()
        .read_run("Forked", &forked.run_id)
        .wait()
        .await
        .unwrap()
        .unwrap();
    // note ran, tally took the original's execution 1, decide ran.
    assert_eq!(reused_from(&stored), [None, Some(1), None]);
    // The original's outputs, under the fork's own event ids.
    let tallied_id = |run: &TestRun| {
        run.snapshot()
            .events()
            .into_iter()
            .find(|e| e.name == "Tallied")
            .unwrap()
            .id
    };
    assert_ne!(tallied_id(&fork), tallied_id(&run));
}

/// A fork stopped by a crash goes on reusing the original's outputs after it is opened
/// again: which outputs it may take comes from its journal (its origin, and the executions
/// it took), not from the process that forked it.
#[test]
fn a_fork_reopened_after_a_crash_still_takes_the_originals_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("saap.db");
    let calls = Arc::new(Calls::default());
    let rt = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    };
    // Before the crash: the original ends; its fork (another hint, the answer not sent
    // again) is stuck in `note`.
    let rt1 = rt();
    let (original, fork) = rt1.block_on(async {
        let entered = Arc::new(Semaphore::new(0));
        let gate = (entered.clone(), Arc::new(Semaphore::new(0)));
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let wf = two_branches(calls.clone(), Some(gate));
        let (engine, _) = Engine::open(wf, backend, EngineOptions::default())
            .await
            .unwrap();
        let runner = TestRunner::new(engine.clone());
        let run = runner.start(UserMessageEvent::new("go")).await.unwrap();
        run.send(Hint { n: 1 }).await.unwrap();
        run.wait_idle(WAIT).await.unwrap();
        run.send(Answer { n: 5 }).await.unwrap();
        run.wait_for_end(WAIT).await.unwrap();
        let opts = ForkOptions {
            reapply: false,
            ..ForkOptions::new(1, replace("Hint", Hint { n: 2 }))
        };
        let forked = engine.fork(run.run_id(), opts).await.unwrap();
        let _in_note = entered.acquire().await.unwrap();
        engine.halt();
        (run.run_id().to_string(), forked.run_id)
    });
    drop(rt1);
    assert_eq!(calls.get(), [0, 2, 1, 1]);
    // Opened again: `note` runs again; the answer sent now reaches `tally` with the
    // original's inputs, which takes the original's outputs.
    let rt2 = rt();
    rt2.block_on(async {
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let wf = two_branches(calls.clone(), None);
        let (engine, rec) = Engine::open(wf, backend, EngineOptions::default())
            .await
            .unwrap();
        assert_eq!(rec.resumed_runs, 1, "{rec:?}");
        let runner = TestRunner::new(engine.clone());
        let run = runner.attach(&fork).unwrap();
        run.wait_idle(WAIT).await.unwrap();
        run.send(Answer { n: 5 }).await.unwrap();
        let snap = run.wait_for_end(WAIT).await.unwrap();
        assert_eq!(snap.events_of::<Done>(), vec![Done { n: 25 }]);
        let stored = engine
            .backend()
            .read_run("Forked", &fork)
            .wait()
            .await
            .unwrap()
            .unwrap();
        assert_eq!(reused_from(&stored), [None, Some(1), None], "{original}");
    });
    drop(rt2);
    assert_eq!(calls.get(), [0, 3, 2, 1], "`tally` did not run again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_reuse_every_execution_after_the_fork_point_runs_live() {
    let f = answered().await;
    let opts = ForkOptions {
        reuse: false,
        ..ForkOptions::new(2, ForkChange::Same)
    };
    let forked = f.engine.fork(f.run.run_id(), opts).await.unwrap();
    let fork = f.runner.attach(&forked.run_id).unwrap();
    let snap = fork.wait_for_end(WAIT).await.unwrap();
    assert_eq!(snap.events_of::<Done>(), vec![Done { n: 19 }]);
    assert_eq!(
        f.calls.get(),
        [1, 2, 2, 0],
        "`ask` copied; `note` and `decide` ran"
    );
    assert_eq!(reused_from(&read(&f, &forked.run_id).await), [None, None]);
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
