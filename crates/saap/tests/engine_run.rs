//! `Engine::run`: a run started and driven to its end by one awaited call.
#![allow(clippy::unwrap_used)]

mod common;

use saap::{
    Engine, EngineOptions, Required, SqliteBackend, Step, StepCtx, StepError, UserMessageEvent,
    Workflow,
};
use std::sync::Arc;

event!(Item, "ControlEvent");
event!(Res, "ControlEvent");
event!(Asked, "ControlEvent");
event!(Answer, "ControlEvent");
event!(Done, "StopEvent");
event!(Tick, "ControlEvent");

/// start → 3 × Item → work (3 executions, together) → collect 3 Res → Done.
fn fan() -> Workflow {
    Workflow::builder("RunFan")
        .step(Step::new(
            "start",
            |_: Required<UserMessageEvent>, _: StepCtx| async {
                Ok::<_, StepError>((0..3).map(|n| Item { n }).collect::<Vec<_>>())
            },
        ))
        .step(Step::new(
            "work",
            |i: Required<Item>, _: StepCtx| async move {
                tokio::task::yield_now().await;
                Ok::<_, StepError>(Res { n: i.n + 10 })
            },
        ))
        .step(Step::new(
            "collect",
            |r: saap::FixedList<Res, 3>, _: StepCtx| async move {
                Ok::<_, StepError>(Done {
                    n: r.iter().map(|r| r.n).sum(),
                })
            },
        ))
        .build()
        .unwrap()
}

async fn check_fan(engine: &Engine) {
    let id = engine.run(UserMessageEvent::new("go")).await.unwrap();
    let snap = engine.stored_snapshot(&id).await.unwrap().unwrap();
    assert!(snap.is_ended(), "{}", snap.timeline());
    assert_eq!(snap.running(), 0);
    assert_eq!(snap.executions_of("work"), 3);
    assert_eq!(snap.events_of::<Done>(), vec![Done { n: 33 }]);
}

#[tokio::test]
async fn run_drives_a_fan_out_to_its_end_on_a_current_thread_runtime() {
    check_fan(&Engine::in_memory(fan())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_drives_a_fan_out_to_its_end_on_worker_threads() {
    check_fan(&Engine::in_memory(fan())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_on_a_durable_store_returns_when_the_end_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.db");
    let engine = Engine::new(
        fan(),
        Arc::new(SqliteBackend::open(&path).unwrap()),
        EngineOptions {
            keep_ended_runs: false,
            ..EngineOptions::default()
        },
    );
    // The run is evicted on its end: `check_fan` reads it back from the store.
    check_fan(&engine).await;
}

#[tokio::test]
async fn run_with_ended_runs_evicted_reuses_slots_and_reports_each_run() {
    let engine = Engine::new(
        fan(),
        Arc::new(saap::MemoryBackend::new()),
        EngineOptions {
            keep_ended_runs: false,
            ..EngineOptions::default()
        },
    );
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(engine.run(UserMessageEvent::new("go")).await.unwrap());
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 5);
    assert!(engine.run_ids().is_empty());
}

/// A run that waits for an outside event: `run` keeps waiting while another task sends it,
/// and returns once the executions that event started have finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_sent_to_a_run_driven_by_its_caller_are_dispatched() {
    let wf = Workflow::builder("RunAsk")
        .step(Step::new(
            "ask",
            |_: Required<UserMessageEvent>, _: StepCtx| async {
                Ok::<_, StepError>(Asked { n: 1 })
            },
        ))
        .step(Step::new(
            "reply",
            |(a, b): (Required<Asked>, Required<Answer>), _: StepCtx| async move {
                Ok::<_, StepError>(Done { n: a.n + b.n })
            },
        ))
        .build()
        .unwrap();
    let engine = Engine::in_memory(wf);
    let sender = engine.clone();
    let send = tokio::spawn(async move {
        loop {
            if let Some(id) = sender.run_ids().into_iter().next() {
                sender.send(&id, Answer { n: 41 }).await.unwrap();
                return id;
            }
            tokio::task::yield_now().await;
        }
    });
    let id = tokio::time::timeout(common::WAIT, engine.run(UserMessageEvent::new("hi")))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(send.await.unwrap(), id);
    let snap = engine.snapshot(&id).unwrap();
    assert_eq!(snap.events_of::<Done>(), vec![Done { n: 42 }]);
    assert_eq!(snap.running(), 0);
}

#[tokio::test]
async fn run_refuses_an_event_that_is_not_a_start_event() {
    let engine = Engine::in_memory(fan());
    let err = engine.run(Item { n: 0 }).await.unwrap_err();
    assert!(err.to_string().contains("Item"), "{err}");
    assert!(engine.run_ids().is_empty());
}

/// The run `Engine::run` drives decides what a run on its own task decides: same records,
/// same execution counts, same events (ids aside).
#[tokio::test]
async fn a_run_driven_by_its_caller_decides_as_a_started_run() {
    let runner = saap::testing::TestRunner::in_memory(fan());
    let driven = runner.run(UserMessageEvent::new("go")).await.unwrap();
    let started = runner.start(UserMessageEvent::new("go")).await.unwrap();
    started.wait_idle(common::WAIT).await.unwrap();
    let (a, b) = (driven.snapshot(), started.snapshot());
    assert_eq!(
        serde_json::to_string(&a.run.records()).unwrap(),
        serde_json::to_string(&b.run.records()).unwrap()
    );
    assert_eq!(a.execution_counts(), b.execution_counts());
    let names = |s: &saap::RunSnapshot| {
        s.events()
            .into_iter()
            .map(|e| (e.name, e.payload.to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&a), names(&b));
    assert!(a.has_stop());
}

/// A run whose steps never wait runs inline on its caller's task, one step after another;
/// it still lets the runtime's other tasks run once the task used its cooperative budget
/// (a chain of 2,000 links does not hold a current-thread runtime to itself).
#[tokio::test(flavor = "current_thread")]
async fn a_long_inline_chain_yields_to_other_tasks_on_a_current_thread_runtime() {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LINKS: u32 = 2_000;
    let ticks = Arc::new(AtomicU32::new(0));
    let counted = ticks.clone();
    let wf = Workflow::builder("LongChain")
        .step(Step::new(
            "start",
            |_: Required<UserMessageEvent>, _: StepCtx| async { Ok::<_, StepError>(Tick { n: 0 }) },
        ))
        .step(
            Step::new("tick", move |t: Required<Tick>, _: StepCtx| {
                let ticks = counted.clone();
                async move {
                    ticks.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, StepError>(if t.n + 1 < LINKS {
                        saap::Either::Left(Tick { n: t.n + 1 })
                    } else {
                        saap::Either::Right(Done { n: t.n })
                    })
                }
            })
            .max_executions_per_run(LINKS),
        )
        .build()
        .unwrap();
    let engine = Engine::in_memory(wf);
    // Runs only when the run's task yields: it notes how far the chain had got.
    let seen = Arc::new(AtomicU32::new(u32::MAX));
    let (t, s) = (ticks.clone(), seen.clone());
    let other = tokio::spawn(async move { s.store(t.load(Ordering::SeqCst), Ordering::SeqCst) });
    let id = engine.run(UserMessageEvent::new("go")).await.unwrap();
    other.await.unwrap();
    let snap = engine.snapshot(&id).unwrap();
    assert_eq!(
        snap.executions_of("tick"),
        LINKS as usize,
        "{}",
        snap.timeline()
    );
    assert_eq!(snap.events_of::<Done>(), vec![Done { n: LINKS - 1 }]);
    let at = seen.load(Ordering::SeqCst);
    assert!(
        at < LINKS,
        "the other task ran only after the chain's {at} links: the chain never yielded"
    );
}

/// A fan-out queued as one span of executions, on the caller's driver (`Engine::run`) and
/// on the engine's (`start_run`): on the caller's, each queued execution is bound by the
/// completion of the one before it (under that completion's lock). Every worker still gets
/// its own input, the workers run in the order they started — also when some of them wait,
/// so that bodies end out of order — and the fan-in gets every result.
#[tokio::test]
async fn a_fan_outs_queued_executions_run_in_start_order_each_with_its_own_input() {
    const N: u32 = 40;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let wf = Workflow::builder("OrderedFan")
        .step(Step::new(
            "start",
            |_: Required<UserMessageEvent>, _: StepCtx| async {
                Ok::<_, StepError>((0..N).map(|n| Item { n }).collect::<Vec<_>>())
            },
        ))
        .step(Step::new("work", move |i: Required<Item>, _: StepCtx| {
            let log = log.clone();
            async move {
                log.lock().unwrap().push(i.n);
                if i.n % 7 == 3 {
                    // Parked among the driver's waiting bodies; the queue goes on.
                    tokio::task::yield_now().await;
                }
                Ok::<_, StepError>(Res { n: i.n })
            }
        }))
        .step(
            Step::new("collect", |r: Vec<Res>, _: StepCtx| async move {
                Ok::<_, StepError>(Done {
                    n: r.iter().map(|r| r.n).sum(),
                })
            })
            .precondition("all", |r: &Vec<Res>| r.len() == N as usize),
        )
        .build()
        .unwrap();
    let engine = Engine::new(
        wf,
        Arc::new(saap::MemoryBackend::new()),
        EngineOptions {
            keep_ended_runs: true,
            ..EngineOptions::default()
        },
    );
    for caller_drives in [true, true, false, false] {
        seen.lock().unwrap().clear();
        let id = if caller_drives {
            engine.run(UserMessageEvent::new("go")).await.unwrap()
        } else {
            let id = engine.start_run(UserMessageEvent::new("go")).await.unwrap();
            engine.wait_for_end(&id).await.unwrap();
            id
        };
        assert_eq!(*seen.lock().unwrap(), (0..N).collect::<Vec<_>>());
        let snap = engine.snapshot(&id).unwrap();
        assert!(snap.is_ended(), "{}", snap.timeline());
        assert_eq!(snap.executions_of("work"), N as usize);
        assert_eq!(snap.executions_of("collect"), 1);
        assert_eq!(snap.events_of::<Done>(), vec![Done { n: (0..N).sum() }]);
    }
}

/// A thread keeps a step's ended body run for the step's next execution; dropping the
/// engine and its workflow still drops what the step's function captured (the kept run
/// holds none of it).
#[tokio::test(flavor = "current_thread")]
async fn what_a_step_captured_is_dropped_with_its_engine_though_its_thread_keeps_the_body_run() {
    use std::sync::atomic::{AtomicBool, Ordering};
    struct Flag(Arc<AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = Flag(dropped.clone());
    let wf = Workflow::builder("Captures")
        .step(Step::new(
            "only",
            move |_: Required<UserMessageEvent>, _: StepCtx| {
                let n = u32::from(!flag.0.load(Ordering::SeqCst));
                async move { Ok::<_, StepError>(Done { n }) }
            },
        ))
        .build()
        .unwrap();
    let engine = Engine::in_memory(wf);
    // Runs on this task: the ended body run stays with this thread.
    let id = engine.run(UserMessageEvent::new("go")).await.unwrap();
    assert_eq!(
        engine.snapshot(&id).unwrap().events_of::<Done>(),
        vec![Done { n: 1 }]
    );
    assert!(!dropped.load(Ordering::SeqCst));
    drop(engine);
    assert!(
        dropped.load(Ordering::SeqCst),
        "the step's captured value outlived its engine and workflow"
    );
}
