//! Replay (issue 23 §1, `Engine::replay`): a stored run's bodies run again against its
//! record, through the core. A run replays to its record with nothing called out (effects
//! answered from the journal, a recorded failure failing again); a body that changed its
//! outputs, its display events or its outside calls, a changed precondition and a changed
//! workflow each diverge where they first make a difference, named; a replay writes nothing.
//! (The property over generated workflows is in `differential.rs`.)
#![allow(clippy::unwrap_used)]

mod common;

use common::WAIT;
use saap::replay::{DivergenceKind, ReplayError};
use saap::testing::TestRunner;
use saap::{
    Engine, EngineOptions, Required, SqliteBackend, Step, StepCtx, StepError, UserMessageEvent,
    Workflow,
};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

event!(Asked, "ControlEvent");
event!(Note, "DisplayEvent");
event!(Done, "StopEvent");

/// How a version of the agent's code behaves.
#[derive(Clone, Copy, Default)]
struct Version {
    /// The outside call's input (`"q"` as recorded).
    call_with: &'static str,
    /// What the answer step adds to the call's result (0 as recorded).
    add: u32,
    /// The display event's `n` (1 as recorded).
    note: u32,
    /// Whether the answer step's precondition holds (true as recorded).
    precondition: bool,
    /// An extra step taking the start event (not as recorded: another workflow).
    extra_step: bool,
    /// The outside call fails.
    call_fails: bool,
    /// The workflow does not know `Note` (so showing it fails the step).
    note_unknown: bool,
}

const RECORDED: Version = Version {
    call_with: "q",
    add: 0,
    note: 1,
    precondition: true,
    extra_step: false,
    call_fails: false,
    note_unknown: false,
};

/// `ask` turns the question into `Asked`; `answer` calls out once (counted in `calls`),
/// shows a note and stops with the call's result.
fn agent(v: Version, calls: Arc<AtomicU32>) -> Workflow {
    let answer = Step::new("answer", move |a: Required<Asked>, ctx: StepCtx| {
        let calls = calls.clone();
        async move {
            let got: u32 = ctx
                .effect(
                    "model",
                    &json!({ "q": v.call_with, "n": a.n }),
                    || async move {
                        let n = calls.fetch_add(1, Ordering::SeqCst) + 40;
                        if v.call_fails {
                            Err(std::io::Error::other("the model is down"))
                        } else {
                            Ok(n)
                        }
                    },
                )
                .await?;
            ctx.display(&Note { n: v.note }).await?;
            Ok::<_, StepError>(Done { n: got + v.add })
        }
    })
    .precondition("allowed", move |_: &Required<Asked>| v.precondition);
    let answer = if v.note_unknown {
        answer
    } else {
        answer.emits::<Note>()
    };
    let mut wf = Workflow::builder("Replayed")
        .step(Step::new(
            "ask",
            |q: Required<UserMessageEvent>, _: StepCtx| async move {
                Ok::<_, StepError>(Asked {
                    n: q.message.len() as u32,
                })
            },
        ))
        .step(answer);
    if v.extra_step {
        wf = wf.step(Step::new(
            "audit",
            |_: Required<UserMessageEvent>, _: StepCtx| async { Ok::<_, StepError>(()) },
        ));
    }
    wf.build().unwrap()
}

/// A run of the recorded version on SQLite, ended: the engine, its run id, the calls made.
async fn recorded(v: Version) -> (Engine, String, Arc<AtomicU32>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let backend = Arc::new(SqliteBackend::open(dir.path().join("saap.db")).unwrap());
    let engine = Engine::new(agent(v, calls.clone()), backend, EngineOptions::default());
    let run = TestRunner::new(engine.clone())
        .start(UserMessageEvent::new("why?"))
        .await
        .unwrap();
    run.wait_for_end(WAIT).await.unwrap();
    let id = run.run_id().to_string();
    (engine, id, calls, dir)
}

/// The run replayed with another version of the code.
async fn replayed_as(engine: &Engine, run_id: &str, v: Version) -> saap::replay::ReplayReport {
    let stored = engine
        .backend()
        .read_run("Replayed", run_id)
        .wait()
        .await
        .unwrap()
        .unwrap();
    let effects = engine.effects(run_id).await.unwrap();
    Engine::replay_stored(&agent(v, Arc::default()), &stored, effects)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_replays_to_its_record_without_calling_out() {
    let (engine, id, calls, _dir) = recorded(RECORDED).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let before = engine
        .backend()
        .read_run("Replayed", &id)
        .wait()
        .await
        .unwrap();
    let report = engine.replay(&id).await.unwrap();
    assert!(report.reproduced(), "{report:#?}");
    assert!(!report.workflow_changed());
    assert_eq!(report.executions_run, 2);
    assert_eq!(report.effects_served, 1);
    assert_eq!(report.records_reproduced, report.records);
    assert_eq!(report.entries_reproduced, report.journal_entries);
    // Nothing called out, nothing written.
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let after = engine
        .backend()
        .read_run("Replayed", &id)
        .wait()
        .await
        .unwrap();
    let records = |r: Option<saap::backend::StoredRun>| {
        let r = r.unwrap();
        (r.journal.len(), r.records, r.ended)
    };
    assert_eq!(records(before), records(after));
    let text = saap::replay::report_text(&report);
    assert!(text.contains("reproduced"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_failure_of_an_outside_call_fails_again_in_the_replay() {
    let failing = Version {
        call_fails: true,
        ..RECORDED
    };
    let (engine, id, calls, _dir) = recorded(failing).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let report = engine.replay(&id).await.unwrap();
    assert!(report.reproduced(), "{report:#?}");
    assert_eq!(report.effects_served, 1);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// Showing an event the workflow does not know as a display event fails the step, in a
/// replay as when recorded (the replay's display sink once accepted it: a false divergence).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_display_the_engine_refused_is_refused_in_the_replay_too() {
    let unknown = Version {
        note_unknown: true,
        ..RECORDED
    };
    let (engine, id, _, _dir) = recorded(unknown).await;
    let ended = engine.snapshot(&id).unwrap();
    assert!(ended.events().iter().any(|e| e.name == "ExceptionEvent"));
    let report = replayed_as(&engine, &id, unknown).await;
    assert!(report.reproduced(), "{report:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_returns_other_fields_diverges_at_its_completion() {
    let (engine, id, _, _dir) = recorded(RECORDED).await;
    let report = replayed_as(&engine, &id, Version { add: 1, ..RECORDED }).await;
    let d = report.divergence.clone().expect("diverges");
    assert_eq!(d.kind, DivergenceKind::Outcome);
    assert_eq!(d.step.as_deref(), Some("answer"));
    assert_eq!(d.detail, "output 0 (`Done`) has other fields: n: 40 → 41");
    assert_eq!(d.recorded["returned"][0]["fields"]["n"], 40);
    assert_eq!(d.replayed["returned"][0]["fields"]["n"], 41);
    assert!(
        !report.workflow_changed(),
        "a body is not the workflow's shape"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_calls_out_with_other_input_diverges_without_calling() {
    let (engine, id, _, _dir) = recorded(RECORDED).await;
    let calls = Arc::new(AtomicU32::new(0));
    let stored = engine
        .backend()
        .read_run("Replayed", &id)
        .wait()
        .await
        .unwrap()
        .unwrap();
    let effects = engine.effects(&id).await.unwrap();
    let other = Version {
        call_with: "other",
        ..RECORDED
    };
    let report = Engine::replay_stored(&agent(other, calls.clone()), &stored, effects)
        .await
        .unwrap();
    let d = report.divergence.expect("diverges");
    assert_eq!(d.kind, DivergenceKind::Outcome);
    let failed = d.replayed["failed"].as_str().unwrap();
    assert!(failed.contains("SAAP-E023"), "{failed}");
    assert_eq!(calls.load(Ordering::SeqCst), 0, "a replay never calls out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_shows_other_display_events_diverges() {
    let (engine, id, _, _dir) = recorded(RECORDED).await;
    let report = replayed_as(
        &engine,
        &id,
        Version {
            note: 2,
            ..RECORDED
        },
    )
    .await;
    let d = report.divergence.expect("diverges");
    assert_eq!(d.kind, DivergenceKind::Display);
    assert_eq!(
        d.detail,
        "display event 0 (`Note`) has other fields: n: 1 → 2"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_precondition_diverges_at_the_decision_it_changes() {
    let (engine, id, _, _dir) = recorded(RECORDED).await;
    let closed = Version {
        precondition: false,
        ..RECORDED
    };
    let report = replayed_as(&engine, &id, closed).await;
    let d = report.divergence.expect("diverges");
    assert_eq!(d.kind, DivergenceKind::Decision);
    assert!(d.record.is_some());
    assert_eq!(d.recorded["result"], true, "{d:#?}");
    assert_eq!(d.replayed["result"], false, "{d:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_workflow_is_reported_and_diverges_where_it_decides_otherwise() {
    let (engine, id, _, _dir) = recorded(RECORDED).await;
    let more = Version {
        extra_step: true,
        ..RECORDED
    };
    let report = replayed_as(&engine, &id, more).await;
    assert!(report.workflow_changed());
    let d = report.divergence.clone().expect("diverges");
    assert_eq!(d.kind, DivergenceKind::Decision, "{d:#?}");
    let text = saap::replay::report_text(&report);
    assert!(
        text.contains("changed since this run was recorded"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_or_damaged_run_is_a_clear_error() {
    let (engine, id, _, _dir) = recorded(RECORDED).await;
    match engine.replay("nope").await {
        Err(ReplayError::NoRun { run_id, .. }) => assert_eq!(run_id, "nope"),
        other => panic!("{other:?}"),
    }
    let mut stored = engine
        .backend()
        .read_run("Replayed", &id)
        .wait()
        .await
        .unwrap()
        .unwrap();
    stored.damaged = Some("torn row".into());
    let err = Engine::replay_stored(&agent(RECORDED, Arc::default()), &stored, Vec::new())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("torn row"), "{err}");
}
