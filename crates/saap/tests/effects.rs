//! Journaled effects (issue 21 §6, `StepCtx::effect`): a call is made once per execution;
//! an execution that runs again after a crash gets the recorded results back (FIFO per
//! content key) and does not call out; a failed call is evidence, called anew; the journal's
//! caps end a run with a clear error; a recorded result of another type is a clear error.
#![allow(clippy::unwrap_used)]

mod common;

use common::WAIT;
use saap::backend::{Backend, EffectOutcome};
use saap::testing::TestRunner;
use saap::{
    EffectLimits, Engine, EngineOptions, Required, SqliteBackend, Step, StepCtx, StepError,
    UserMessageEvent, Workflow,
};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use tokio::sync::Semaphore;

event!(Done, "StopEvent");

/// How many times the outside world was called.
type Calls = Arc<AtomicU32>;

/// `post` is called three times: twice with one input (FIFO per key), once with another;
/// each answer is the call's number, so a repeated call would answer differently. With a
/// gate, the body then waits on it (never opened: the crash comes first).
fn workflow(calls: Calls, gate: Option<(Arc<Semaphore>, Arc<Semaphore>)>) -> Workflow {
    Workflow::builder("Effects")
        .step(Step::new(
            "call",
            move |q: Required<UserMessageEvent>, ctx: StepCtx| {
                let (calls, gate) = (calls.clone(), gate.clone());
                async move {
                    let mut got = Vec::new();
                    for input in [
                        json!({"to": &q.message}),
                        json!({"to": &q.message}),
                        json!({"to": "other"}),
                    ] {
                        let calls = calls.clone();
                        let n: u32 = ctx
                            .effect("post", &input, || async move {
                                Ok::<_, std::io::Error>(calls.fetch_add(1, Ordering::SeqCst) + 1)
                            })
                            .await?;
                        got.push(n);
                    }
                    if let Some((entered, g)) = gate {
                        entered.add_permits(1);
                        let _p = g.acquire().await;
                    }
                    Ok::<_, StepError>(Done {
                        n: got[0] * 100 + got[1] * 10 + got[2],
                    })
                }
            },
        ))
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

#[tokio::test]
async fn an_effect_is_called_once_per_call_and_its_journal_reads_back() {
    let calls: Calls = Arc::default();
    let engine = Engine::in_memory(workflow(calls.clone(), None));
    let runner = TestRunner::new(engine.clone());
    let run = runner.start(UserMessageEvent::new("x")).await.unwrap();
    let id = run.run_id().to_string();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    assert_eq!(snap.events_of::<Done>(), vec![Done { n: 123 }]);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    // In memory the journal goes with the run.
    assert!(engine.effects(&id).await.unwrap().is_empty());
}

#[test]
fn a_re_run_after_a_crash_gets_the_recorded_results_and_calls_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("effects.db");
    let calls: Calls = Arc::default();

    let rt1 = rt();
    let run_id = rt1.block_on(async {
        let (gate, entered) = (Arc::new(Semaphore::new(0)), Arc::new(Semaphore::new(0)));
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let (engine, _) = Engine::open(
            workflow(calls.clone(), Some((entered.clone(), gate))),
            backend,
            EngineOptions::default(),
        )
        .await
        .unwrap();
        let run = TestRunner::new(engine.clone())
            .start(UserMessageEvent::new("x"))
            .await
            .unwrap();
        // Every effect is durable before `effect` returns: the body is past all three.
        let _in = entered.acquire().await.unwrap();
        engine.halt();
        run.run_id().to_string()
    });
    drop(rt1);
    assert_eq!(calls.load(Ordering::SeqCst), 3);

    let rt2 = rt();
    rt2.block_on(async {
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let (engine, rec) = Engine::open(
            workflow(calls.clone(), None),
            backend,
            EngineOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(rec.retried_executions, 1, "{rec:?}");
        let snap = TestRunner::new(engine.clone())
            .attach(&run_id)
            .unwrap()
            .wait_for_end(WAIT)
            .await
            .unwrap();
        assert_eq!(
            snap.events_of::<Done>(),
            vec![Done { n: 123 }],
            "the re-run got the recorded answers, in order"
        );
        let effects = engine.effects(&run_id).await.unwrap();
        assert_eq!(effects.len(), 3, "nothing recorded twice: {effects:?}");
        assert!(effects.iter().all(|e| e.attempt == 1 && e.name == "post"));
        assert_eq!(effects[0].key, effects[1].key);
        assert_ne!(effects[0].key, effects[2].key);
        assert_eq!(effects[2].input, json!({"to": "other"}));
        assert_eq!(effects[1].outcome, EffectOutcome::Ok(json!(2)));
    });
    assert_eq!(calls.load(Ordering::SeqCst), 3, "no call made again");
}

#[test]
fn a_failed_effect_is_kept_as_evidence_and_called_anew_by_the_re_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("failed.db");
    let calls: Calls = Arc::default();
    // The first call fails, the second (the re-run's) answers.
    let wf = |calls: Calls, entered: Option<Arc<Semaphore>>| {
        Workflow::builder("Flaky")
            .step(Step::new(
                "call",
                move |_: Required<UserMessageEvent>, ctx: StepCtx| {
                    let (calls, entered) = (calls.clone(), entered.clone());
                    async move {
                        let r = ctx
                            .effect("flaky", "same input", || async {
                                match calls.fetch_add(1, Ordering::SeqCst) {
                                    0 => Err("the service said 503"),
                                    n => Ok(n),
                                }
                            })
                            .await;
                        if let Some(entered) = entered {
                            assert!(r.is_err());
                            entered.add_permits(1);
                            std::future::pending::<()>().await;
                        }
                        Ok::<_, StepError>(Done { n: r? })
                    }
                },
            ))
            .build()
            .unwrap()
    };
    let rt1 = rt();
    let run_id = rt1.block_on(async {
        let entered = Arc::new(Semaphore::new(0));
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let (engine, _) = Engine::open(
            wf(calls.clone(), Some(entered.clone())),
            backend,
            EngineOptions::default(),
        )
        .await
        .unwrap();
        let run = TestRunner::new(engine.clone())
            .start(UserMessageEvent::new("x"))
            .await
            .unwrap();
        let _in = entered.acquire().await.unwrap();
        engine.halt();
        run.run_id().to_string()
    });
    drop(rt1);
    let rt2 = rt();
    rt2.block_on(async {
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let (engine, _) = Engine::open(wf(calls.clone(), None), backend, EngineOptions::default())
            .await
            .unwrap();
        let snap = TestRunner::new(engine.clone())
            .attach(&run_id)
            .unwrap()
            .wait_for_end(WAIT)
            .await
            .unwrap();
        assert_eq!(snap.events_of::<Done>(), vec![Done { n: 1 }]);
        let effects = engine.effects(&run_id).await.unwrap();
        assert_eq!(effects.len(), 2, "{effects:?}");
        assert_eq!(
            effects[0].outcome,
            EffectOutcome::Failed("the service said 503".into())
        );
        assert_eq!((effects[0].attempt, effects[1].attempt), (1, 2));
        assert_eq!(effects[1].outcome, EffectOutcome::Ok(json!(1)));
    });
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_full_effect_journal_ends_the_run_with_a_clear_error() {
    let wf = Workflow::builder("Greedy")
        .step(Step::new(
            "loop",
            |_: Required<UserMessageEvent>, ctx: StepCtx| async move {
                for i in 0..10u32 {
                    ctx.effect("fetch", &i, || async { Ok::<_, std::io::Error>(i) })
                        .await?;
                }
                Ok::<_, StepError>(Done::default())
            },
        ))
        .build()
        .unwrap();
    let engine = Engine::new(
        wf,
        Arc::new(saap::MemoryBackend::new()),
        EngineOptions {
            effect_limits: EffectLimits {
                max_entries: 3,
                max_bytes: 1 << 20,
            },
            ..Default::default()
        },
    );
    let run = engine.run(UserMessageEvent::new("x")).await.unwrap();
    let snap = TestRunner::new(engine.clone())
        .attach(&run)
        .unwrap()
        .wait_for_end(WAIT)
        .await
        .unwrap();
    assert!(snap.has_exception());
    let text = snap.timeline();
    assert!(text.contains("SAAP-E016"), "{text}");
    assert!(text.contains("recorded 3 effects"), "{text}");
    assert!(text.contains("split the job"), "{text}");
}

#[test]
fn a_recorded_result_of_another_type_is_a_clear_error_not_a_new_call() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("changed.db");
    let calls: Calls = Arc::default();
    // Phase 1 records a number and crashes; phase 2's body, changed meanwhile, asks for a
    // string under the same key.
    let wf = |calls: Calls, entered: Option<Arc<Semaphore>>| {
        Workflow::builder("Changed")
            .step(Step::new(
                "call",
                move |_: Required<UserMessageEvent>, ctx: StepCtx| {
                    let (calls, entered) = (calls.clone(), entered.clone());
                    async move {
                        let bump = || async {
                            Ok::<_, std::io::Error>(calls.fetch_add(1, Ordering::SeqCst))
                        };
                        if let Some(entered) = entered {
                            let _: u32 = ctx.effect("count", &(), bump).await?;
                            entered.add_permits(1);
                            std::future::pending::<()>().await;
                        }
                        let _: String = ctx
                            .effect("count", &(), || async {
                                Ok::<_, std::io::Error>("new".to_string())
                            })
                            .await?;
                        Ok::<_, StepError>(Done::default())
                    }
                },
            ))
            .build()
            .unwrap()
    };
    let rt1 = rt();
    let run_id = rt1.block_on(async {
        let entered = Arc::new(Semaphore::new(0));
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let (engine, _) = Engine::open(
            wf(calls.clone(), Some(entered.clone())),
            backend,
            EngineOptions::default(),
        )
        .await
        .unwrap();
        let run = TestRunner::new(engine.clone())
            .start(UserMessageEvent::new("x"))
            .await
            .unwrap();
        let _in = entered.acquire().await.unwrap();
        engine.halt();
        run.run_id().to_string()
    });
    drop(rt1);
    let rt2 = rt();
    rt2.block_on(async {
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let (engine, _) = Engine::open(wf(calls.clone(), None), backend, EngineOptions::default())
            .await
            .unwrap();
        let snap = TestRunner::new(engine.clone())
            .attach(&run_id)
            .unwrap()
            .wait_for_end(WAIT)
            .await
            .unwrap();
        assert!(snap.has_exception());
        let text = snap.timeline();
        assert!(text.contains("SAAP-E017"), "{text}");
        assert!(text.contains("effect `count`"), "{text}");
        assert_eq!(
            engine.effects(&run_id).await.unwrap().len(),
            1,
            "no new call recorded"
        );
    });
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// The child of `an_effect_made_before_a_kill_is_not_made_again`: on the store at
/// `SAAP_CHAOS_DB`, starts one run if there is none, or resumes it. Its step appends a line
/// to `<db>.calls` inside an effect, then, on the first attempt, aborts the process (a crash
/// with no unwinding and no flush, as kill -9); the re-run returns the recorded count.
#[test]
#[ignore = "child process of an_effect_made_before_a_kill_is_not_made_again"]
fn effect_kill_child() {
    use std::io::Write;
    let Ok(db) = std::env::var("SAAP_CHAOS_DB") else {
        return;
    };
    let calls = format!("{db}.calls");
    let wf = Workflow::builder("Killed")
        .step(Step::new(
            "post",
            move |_: Required<UserMessageEvent>, ctx: StepCtx| {
                let calls = calls.clone();
                async move {
                    let n: usize = ctx
                        .effect("post", "the order", || async {
                            let mut f = std::fs::OpenOptions::new()
                                .create(true)
                                .append(true)
                                .open(&calls)?;
                            writeln!(f, "posted")?;
                            f.sync_all()?;
                            Ok::<_, std::io::Error>(
                                std::fs::read_to_string(&calls)?.lines().count(),
                            )
                        })
                        .await?;
                    if ctx.attempt() == 1 {
                        std::process::abort();
                    }
                    Ok::<_, StepError>(Done { n: n as u32 })
                }
            },
        ))
        .build()
        .unwrap();
    rt().block_on(async {
        let backend = Arc::new(SqliteBackend::open(&db).unwrap());
        let (engine, rec) = Engine::open(wf, backend, EngineOptions::default())
            .await
            .unwrap();
        let run = if rec.resumed_runs == 0 {
            TestRunner::new(engine.clone())
                .start(UserMessageEvent::new("x"))
                .await
                .unwrap()
                .run_id()
                .to_string()
        } else {
            engine.run_ids().pop().unwrap()
        };
        engine.wait_for_end(&run).await.unwrap();
    });
}

#[test]
fn an_effect_made_before_a_kill_is_not_made_again() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("killed.db");
    let first = common::kill::child("effect_kill_child", &db)
        .status()
        .unwrap();
    assert!(!first.success(), "the first attempt crashes: {first:?}");
    let second = common::kill::child("effect_kill_child", &db)
        .status()
        .unwrap();
    assert!(second.success(), "the re-run ends the run: {second:?}");
    let calls = std::fs::read_to_string(db.with_extension("db.calls")).unwrap();
    assert_eq!(calls.lines().count(), 1, "the outside call was made once");
    rt().block_on(async {
        let backend = Arc::new(SqliteBackend::open(&db).unwrap());
        let runs = backend
            .list_runs("Killed", &saap::backend::RunQuery::default())
            .wait()
            .await
            .unwrap();
        assert_eq!(runs.runs.len(), 1);
        let run_id = runs.runs[0].run_id.clone();
        let (engine, _) = Engine::open(
            Workflow::builder("Killed")
                .step(Step::new(
                    "post",
                    |_: Required<UserMessageEvent>, _: StepCtx| async {
                        Ok::<_, StepError>(Done::default())
                    },
                ))
                .build()
                .unwrap(),
            backend,
            EngineOptions::default(),
        )
        .await
        .unwrap();
        let snap = engine.stored_snapshot(&run_id).await.unwrap().unwrap();
        assert_eq!(snap.events_of::<Done>(), vec![Done { n: 1 }]);
        let effects = engine.effects(&run_id).await.unwrap();
        assert_eq!(effects.len(), 1, "{effects:?}");
        assert_eq!(effects[0].attempt, 1);
    });
}

/// Every store keeps the same rules: a run's effects in order, FIFO per key for a later
/// attempt, failed ones never handed back, an attempt never taking a record twice.
async fn the_store_rules(kind: common::Kind) {
    let calls: Calls = Arc::default();
    let h = common::harness(kind, workflow(calls.clone(), None));
    let engine = h.runner.engine().clone();
    let run = h.runner.start(UserMessageEvent::new("x")).await.unwrap();
    let id = run.run_id().to_string();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    assert_eq!(snap.events_of::<Done>(), vec![Done { n: 123 }]);
    let backend = engine.backend().clone();
    let mut effects = backend.effects(&id).wait().await.unwrap();
    if matches!(kind, common::Kind::Memory) {
        // In memory a run's effects go with its end: the same three, recorded by hand.
        assert!(effects.is_empty());
        for (n, to) in [(1, "x"), (2, "x"), (3, "other")] {
            let mut input = json!({"to": to});
            input.sort_all_objects();
            let record = saap::backend::EffectRecord {
                seq: 0,
                execution: 0,
                attempt: 1,
                name: "post".into(),
                key: format!("post|{to}"),
                input,
                outcome: EffectOutcome::Ok(json!(n)),
                at_ns: 1,
                took_ns: 1,
            };
            backend.effect_record(&id, record).wait().await.unwrap();
        }
        effects = backend.effects(&id).wait().await.unwrap();
    }
    assert_eq!(effects.len(), 3, "{effects:?}");
    assert_eq!(
        effects.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    let at = |attempt| saap::backend::EffectAt {
        run_id: id.as_str().into(),
        execution: effects[0].execution,
        attempt,
    };
    let take = |attempt| {
        let (backend, at, key) = (backend.clone(), at(attempt), effects[0].key.clone());
        async move { backend.effect_take(&at, &key).wait().await.unwrap() }
    };
    use saap::backend::EffectTake::{Fresh, Recorded};
    // Attempt 1 consumed both records of the key when it made them.
    assert!(matches!(take(1).await, Fresh { entries: 3, .. }));
    assert_eq!(take(2).await, Recorded(json!(1)));
    assert_eq!(take(2).await, Recorded(json!(2)));
    assert!(matches!(take(2).await, Fresh { entries: 3, bytes } if bytes > 0));
    assert_eq!(
        take(3).await,
        Recorded(json!(1)),
        "a later attempt takes them again"
    );
    let failed = saap::backend::EffectRecord {
        seq: 0,
        execution: effects[0].execution,
        attempt: 3,
        name: "post".into(),
        key: effects[0].key.clone(),
        input: json!({"to": "x"}),
        outcome: EffectOutcome::Failed("503".into()),
        at_ns: 1,
        took_ns: 1,
    };
    backend.effect_record(&id, failed).wait().await.unwrap();
    assert_eq!(take(4).await, Recorded(json!(1)));
    assert_eq!(take(4).await, Recorded(json!(2)));
    assert!(
        matches!(take(4).await, Fresh { entries: 4, .. }),
        "a failed call is never handed back"
    );
    assert_eq!(backend.effects(&id).wait().await.unwrap()[3].seq, 3);
}

on_both_backends! {
    the_store_keeps_effects_by_the_same_rules => the_store_rules;
}
