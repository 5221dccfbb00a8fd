//! Restart recovery on the embedded store: a crash (the store halted and the runtime
//! dropped mid-run) and a reopen of the same file. Unfinished executions run again,
//! finished ones never, and no output appears twice.
#![allow(clippy::unwrap_used)]

mod common;

use common::WAIT;
use saap::testing::TestRunner;
use saap::{
    Engine, EngineOptions, Required, SqliteBackend, Step, StepCtx, StepError, UserMessageEvent,
    Workflow,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;

event!(A, "ControlEvent");
event!(B, "ControlEvent");
event!(Done, "StopEvent");

/// Counts step bodies entered, per step name (the "side effects" of the test).
type Effects = Arc<Mutex<HashMap<&'static str, u32>>>;

fn bump(e: &Effects, step: &'static str) {
    *e.lock().unwrap().entry(step).or_default() += 1;
}

fn count(e: &Effects, step: &str) -> u32 {
    e.lock().unwrap().get(step).copied().unwrap_or(0)
}

/// start → A → slow → B → fin → Done. `slow` adds a permit to `entered` when its body starts
/// and then waits on `gate` (never opened) when given.
fn workflow(effects: Effects, gate: Option<(Arc<Semaphore>, Arc<Semaphore>)>) -> Workflow {
    let (e1, e2, e3) = (effects.clone(), effects.clone(), effects);
    Workflow::builder("Recovering")
        .step(Step::new(
            "start",
            move |q: Required<UserMessageEvent>, _: StepCtx| {
                let e = e1.clone();
                async move {
                    bump(&e, "start");
                    Ok::<_, StepError>(A {
                        n: q.message.len() as u32,
                    })
                }
            },
        ))
        .step(Step::new("slow", move |a: Required<A>, _: StepCtx| {
            let (e, gate) = (e2.clone(), gate.clone());
            async move {
                bump(&e, "slow");
                if let Some((entered, g)) = gate {
                    entered.add_permits(1);
                    let _permit = g.acquire().await;
                }
                Ok::<_, StepError>(B { n: a.n })
            }
        }))
        .step(Step::new("fin", move |b: Required<B>, _: StepCtx| {
            let e = e3.clone();
            async move {
                bump(&e, "fin");
                Ok::<_, StepError>(Done { n: b.n })
            }
        }))
        .build()
        .unwrap()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn crash_mid_run_then_reopen_reruns_unfinished_executions_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let effects: Effects = Arc::default();

    // Phase 1: three runs, each stuck in `slow`; then the process "crashes".
    let rt1 = rt();
    let run_ids: Vec<String> = rt1.block_on(async {
        let gate = Arc::new(Semaphore::new(0));
        let entered = Arc::new(Semaphore::new(0));
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let (engine, rec) = Engine::open(
            workflow(effects.clone(), Some((entered.clone(), gate))),
            backend,
            EngineOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(rec.resumed_runs, 0);
        let runner = TestRunner::new(engine.clone());
        let mut ids = Vec::new();
        for msg in ["a", "bb", "ccc"] {
            let run = runner.start(UserMessageEvent::new(msg)).await.unwrap();
            ids.push(run.run_id().to_string());
        }
        // A body runs only after the entry that started it is durable: once the three
        // `slow` bodies are in, every `start` completion is in the store.
        let _all = entered.acquire_many(3).await.unwrap();
        engine.halt();
        ids
    });
    drop(rt1);
    assert_eq!(count(&effects, "start"), 3);
    let slow_before = count(&effects, "slow");
    assert_eq!(slow_before, 3);
    assert_eq!(count(&effects, "fin"), 0);

    // Phase 2: reopen the same file; the three `slow` executions run again.
    let rt2 = rt();
    rt2.block_on(async {
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let (engine, rec) = Engine::open(
            workflow(effects.clone(), None),
            backend,
            EngineOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(rec.resumed_runs, 3, "{rec:?}");
        assert_eq!(rec.retried_executions, 3, "{rec:?}");
        assert!(rec.failed.is_empty(), "{rec:?}");
        let runner = TestRunner::new(engine.clone());
        for (id, n) in run_ids.iter().zip([1, 2, 3]) {
            let run = runner.attach(id).unwrap();
            let snap = run.wait_for_end(WAIT).await.unwrap();
            assert_eq!(snap.events_of::<Done>(), vec![Done { n }]);
            assert_eq!(snap.events_of::<A>().len(), 1);
            assert_eq!(snap.events_of::<B>().len(), 1, "no duplicate output");
            assert_eq!(
                snap.executions_of("slow"),
                1,
                "a retry is the same execution"
            );
            assert!(
                snap.timeline().contains("retry x1 (attempt 2)"),
                "{}",
                snap.timeline()
            );
        }
    });
    drop(rt2);
    assert_eq!(
        count(&effects, "start"),
        3,
        "finished executions never run again"
    );
    assert_eq!(
        count(&effects, "slow"),
        6,
        "unfinished executions run again (at-least-once)"
    );
    assert_eq!(count(&effects, "fin"), 3);

    // Phase 3: a third open finds only ended runs and runs nothing.
    let rt3 = rt();
    rt3.block_on(async {
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let (engine, rec) = Engine::open(
            workflow(effects.clone(), None),
            backend,
            EngineOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!((rec.resumed_runs, rec.retried_executions), (0, 0));
        assert!(engine.run_ids().is_empty(), "ended runs are not loaded");
        for id in &run_ids {
            let snap = engine.stored_snapshot(id).await.unwrap().unwrap();
            assert!(snap.has_stop());
        }
    });
    assert_eq!(count(&effects, "slow"), slow_before + 3);
    assert_eq!(count(&effects, "fin"), 3);
}

#[test]
fn run_context_survives_restart_and_is_deleted_when_the_run_ends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ctx.db");
    let wf = || {
        Workflow::builder("Ctx")
            .step(Step::new(
                "remember",
                |_: Required<UserMessageEvent>, ctx: StepCtx| async move {
                    ctx.run_context()
                        .set("k", &7u32)
                        .await
                        .map_err(|e| StepError::new(e.to_string()))?;
                    ctx.thread_context()
                        .set("t", &"kept")
                        .await
                        .map_err(|e| StepError::new(e.to_string()))?;
                    Ok::<_, StepError>(A::default())
                },
            ))
            .step(Step::new(
                "finish",
                |_: Required<B>, ctx: StepCtx| async move {
                    let k: Option<u32> = ctx
                        .run_context()
                        .get("k")
                        .await
                        .map_err(|e| StepError::new(e.to_string()))?;
                    Ok::<_, StepError>(Done { n: k.unwrap_or(0) })
                },
            ))
            .build()
            .unwrap()
    };
    let (run_id, thread_id) = rt().block_on(async {
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let (engine, _) = Engine::open(wf(), backend, EngineOptions::default())
            .await
            .unwrap();
        let run = TestRunner::new(engine.clone())
            .start(UserMessageEvent::new("x"))
            .await
            .unwrap();
        run.wait_idle(WAIT).await.unwrap();
        let thread = run.snapshot().thread_id;
        (run.run_id().to_string(), thread)
    });
    rt().block_on(async {
        let backend: Arc<SqliteBackend> = Arc::new(SqliteBackend::open(&path).unwrap());
        let (engine, rec) = Engine::open(wf(), backend.clone(), EngineOptions::default())
            .await
            .unwrap();
        assert_eq!(rec.resumed_runs, 1);
        let run = TestRunner::new(engine.clone()).attach(&run_id).unwrap();
        run.send(B::default()).await.unwrap();
        let snap = run.wait_for_end(WAIT).await.unwrap();
        assert_eq!(
            snap.events_of::<Done>(),
            vec![Done { n: 7 }],
            "RunContext survived the restart"
        );
        use saap::backend::{Backend, Scope};
        let gone = backend
            .ctx_get(Scope::Run(run_id.as_str().into()), "k")
            .wait()
            .await
            .unwrap();
        assert_eq!(gone, None, "RunContext is deleted when the run ends");
        let kept = backend
            .ctx_get(Scope::Thread(thread_id.as_str().into()), "t")
            .wait()
            .await
            .unwrap();
        assert_eq!(
            kept,
            Some(serde_json::json!("kept")),
            "ThreadContext outlives the run"
        );
    });
}
