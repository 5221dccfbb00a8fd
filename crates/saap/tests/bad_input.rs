//! Bad input gets a typed error with a stable code, never a panic.
#![allow(clippy::unwrap_used)]

mod common;

use saap::{
    Engine, EngineOptions, Required, SqliteBackend, Step, StepCtx, StepError, UserMessageEvent,
    Workflow,
};
use std::sync::Arc;

event!(A, "ControlEvent");
event!(Done, "StopEvent");

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Big {
    blob: String,
}
impl saap::Event for Big {
    const NAME: &'static str = "Big";
    const PARENTS: &'static [&'static str] = &["ControlEvent"];
}

fn wf(name: &str) -> Workflow {
    Workflow::builder(name)
        .step(Step::new(
            "start",
            |_: Required<UserMessageEvent>, _: StepCtx| async { Ok::<_, StepError>(()) },
        ))
        .step(Step::new("big", |_: Required<Big>, _: StepCtx| async {
            Ok::<_, StepError>(Done::default())
        }))
        .build()
        .unwrap()
}

#[tokio::test]
async fn oversized_events_are_refused_with_a_typed_error() {
    let opts = EngineOptions {
        max_event_bytes: 1024,
        ..EngineOptions::default()
    };
    let engine = Engine::new(wf("Sizes"), Arc::new(saap::MemoryBackend::new()), opts);
    let run = engine.start_run(UserMessageEvent::new("hi")).await.unwrap();
    let err = engine
        .send(
            &run,
            Big {
                blob: "x".repeat(4096),
            },
        )
        .await
        .err()
        .unwrap();
    assert_eq!(err.code(), "SAAP-E003", "{err}");
    assert!(err.to_string().contains("by reference"), "{err}");
    let wire = format!(
        r#"{{"event_id":"65f0a1b2c3d4e5f601234567","created_at":1,"_event_name":"Big","_parent_event_names":["Big","ControlEvent"],"blob":"{}"}}"#,
        "x".repeat(4096)
    );
    let err = engine.send_json(&run, wire.as_bytes()).await.err().unwrap();
    assert_eq!(err.code(), "SAAP-E005", "{err}");
    let err = engine.send_json(&run, b"{not json").await.err().unwrap();
    assert_eq!(err.code(), "SAAP-E005", "{err}");
    assert_eq!(engine.snapshot(&run).unwrap().executions_of("big"), 0);
}

#[tokio::test]
async fn unknown_run_and_unknown_event_type_are_typed_errors() {
    let engine = Engine::in_memory(wf("Unknowns"));
    let err = engine
        .send("65f0a1b2c3d4e5f601234567", A::default())
        .await
        .err()
        .unwrap();
    assert_eq!(err.code(), "SAAP-E001", "{err}");
    let run = engine.start_run(UserMessageEvent::new("hi")).await.unwrap();
    let err = engine.send(&run, A::default()).await.err().unwrap();
    assert_eq!(err.code(), "SAAP-E004", "{err}");
}

#[test]
fn corrupt_database_file_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("corrupt.db");
    std::fs::write(
        &path,
        b"this is not an SQLite database, just some bytes ".repeat(200),
    )
    .unwrap();
    let err = SqliteBackend::open(&path).err().unwrap();
    assert_eq!(err.code(), "SAAP-S001", "{err}");
    assert!(err.to_string().contains("move it away"), "{err}");
}

#[test]
fn a_database_owned_by_another_engine_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("owned.db");
    let _first = SqliteBackend::open(&path).unwrap();
    let err = SqliteBackend::open(&path).err().unwrap();
    assert_eq!(err.code(), "SAAP-S002", "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_workflow_does_not_resume_old_runs_silently() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("changed.db");
    {
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let (engine, _) = Engine::open(wf("Changing"), backend, EngineOptions::default())
            .await
            .unwrap();
        engine.start_run(UserMessageEvent::new("hi")).await.unwrap();
        engine.halt();
    }
    let changed = Workflow::builder("Changing")
        .step(
            Step::new("start", |_: Required<UserMessageEvent>, _: StepCtx| async {
                Ok::<_, StepError>(())
            })
            .max_executions_per_run(1),
        )
        .build()
        .unwrap();
    let backend = Arc::new(SqliteBackend::open(&path).unwrap());
    let (_engine, rec) = Engine::open(changed, backend, EngineOptions::default())
        .await
        .unwrap();
    assert_eq!(rec.resumed_runs, 0);
    assert_eq!(rec.failed.len(), 1);
    assert_eq!(rec.failed[0].code(), "SAAP-E007");
    assert!(
        rec.failed[0].to_string().contains("SAAP-R001"),
        "{}",
        rec.failed[0]
    );
}

#[tokio::test]
async fn step_input_that_does_not_match_its_type_becomes_an_exception_event() {
    let wf = Workflow::builder("Mismatch")
        .step(Step::new(
            "start",
            |_: Required<UserMessageEvent>, _: StepCtx| async { Ok::<_, StepError>(()) },
        ))
        .step(Step::new("typed", |_: Required<Big>, _: StepCtx| async {
            Ok::<_, StepError>(Done::default())
        }))
        .build()
        .unwrap();
    let engine = Engine::in_memory(wf);
    let run = engine.start_run(UserMessageEvent::new("hi")).await.unwrap();
    // `blob` is missing: the wire event decodes, the typed input does not.
    let wire = br#"{"event_id":"65f0a1b2c3d4e5f601234567","created_at":1,"_event_name":"Big","_parent_event_names":["Big","ControlEvent"]}"#;
    engine.send_json(&run, wire).await.unwrap();
    let r = saap::testing::TestRunner::new(engine.clone())
        .attach(&run)
        .unwrap();
    let ex = r
        .wait_for_event::<saap::ExceptionEvent>(common::WAIT)
        .await
        .unwrap();
    assert!(
        ex.message.contains("cannot read its inputs"),
        "{}",
        ex.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_that_no_longer_reproduces_its_records_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tampered.db");
    let run_id = {
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let (engine, _) = Engine::open(wf("Tampered"), backend, EngineOptions::default())
            .await
            .unwrap();
        let id = engine.start_run(UserMessageEvent::new("hi")).await.unwrap();
        engine.halt();
        id
    };
    // Someone edits the stored decision records of the first journal entry.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("UPDATE journal SET records = '[]' WHERE idx = 0", [])
        .unwrap();
    drop(conn);
    let backend = Arc::new(SqliteBackend::open(&path).unwrap());
    let (engine, rec) = Engine::open(wf("Tampered"), backend, EngineOptions::default())
        .await
        .unwrap();
    assert_eq!(rec.failed.len(), 1, "{rec:?}");
    assert!(
        rec.failed[0].to_string().contains("SAAP-R002"),
        "{}",
        rec.failed[0]
    );
    assert!(
        engine.snapshot(&run_id).is_none(),
        "a run that does not replay is not resumed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_record_changed_in_place_is_named_where_it_differs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("edited.db");
    {
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let (engine, _) = Engine::open(wf("Edited"), backend, EngineOptions::default())
            .await
            .unwrap();
        engine.start_run(UserMessageEvent::new("hi")).await.unwrap();
        engine.halt();
    }
    // The same number of records, one field of one of them changed.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let changed = conn
        .execute(
            "UPDATE journal SET records = replace(records, '\"seq\":0', '\"seq\":7') WHERE idx = 0",
            [],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(conn);
    let backend = Arc::new(SqliteBackend::open(&path).unwrap());
    let (_, rec) = Engine::open(wf("Edited"), backend, EngineOptions::default())
        .await
        .unwrap();
    assert_eq!(rec.failed.len(), 1, "{rec:?}");
    let text = rec.failed[0].to_string();
    assert!(
        text.contains("SAAP-R002: replay diverged at record 0") && text.contains("\"seq\":7"),
        "{text}"
    );
}

/// An event whose JSON cannot be written (a map with non-string keys).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Unwritable {
    m: std::collections::HashMap<(u8, u8), u8>,
}
impl saap::Event for Unwritable {
    const NAME: &'static str = "Unwritable";
    const PARENTS: &'static [&'static str] = &["ControlEvent"];
}

#[tokio::test]
async fn an_output_that_cannot_be_serialized_fails_its_step_on_the_durable_store() {
    let wf = Workflow::builder("Unwritable")
        .step(Step::new(
            "make",
            |_: Required<UserMessageEvent>, _: StepCtx| async {
                let mut m = std::collections::HashMap::new();
                m.insert((1, 2), 3);
                Ok::<_, StepError>(Unwritable { m })
            },
        ))
        .step(Step::new(
            "take",
            |_: Required<Unwritable>, _: StepCtx| async { Ok::<_, StepError>(Done::default()) },
        ))
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(SqliteBackend::open(dir.path().join("u.db")).unwrap());
    let engine = Engine::new(wf, backend, EngineOptions::default());
    let run = engine.start_run(UserMessageEvent::new("go")).await.unwrap();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        engine.wait_for_end(&run),
    )
    .await
    .unwrap()
    .unwrap();
    let snap = engine.snapshot(&run).unwrap();
    let exceptions = snap.events_of::<saap::ExceptionEvent>();
    assert_eq!(exceptions.len(), 1, "{:?}", snap.events());
    assert!(
        exceptions[0].message.contains("could not be serialized"),
        "{}",
        exceptions[0].message
    );
    assert_eq!(snap.executions_of("take"), 0);
    assert!(snap.events_of::<Done>().is_empty());
}

/// A database whose file is fine but one run's stored entry is garbage (a torn or edited
/// row): that run is reported and left in the store untouched; the others resume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_journal_row_fails_only_its_run_and_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("row.db");
    let (bad, good) = {
        let backend = Arc::new(SqliteBackend::open(&path).unwrap());
        let (engine, _) = Engine::open(wf("Rows"), backend, EngineOptions::default())
            .await
            .unwrap();
        let bad = engine.start_run(UserMessageEvent::new("a")).await.unwrap();
        let good = engine.start_run(UserMessageEvent::new("b")).await.unwrap();
        engine.halt();
        (bad, good)
    };
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "UPDATE journal SET input = '{\"truncat' WHERE run_id = ?1 AND idx = 0",
        [&bad],
    )
    .unwrap();
    drop(conn);

    let backend = Arc::new(SqliteBackend::open(&path).unwrap());
    let (engine, rec) = Engine::open(wf("Rows"), backend, EngineOptions::default())
        .await
        .unwrap();
    assert_eq!(rec.resumed_runs, 1, "{rec:?}");
    assert_eq!(rec.failed.len(), 1, "{rec:?}");
    let err = rec.failed[0].to_string();
    assert!(err.contains(&bad), "the error names the run: {err}");
    assert!(err.contains("SAAP-S006"), "{err}");
    assert!(err.contains("restore the database from a backup"), "{err}");
    assert!(engine.snapshot(&bad).is_none());
    // The healthy run goes on.
    let big = engine.send(&good, Big { blob: "ok".into() }).await;
    assert!(big.is_ok(), "{big:?}");
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        engine.wait_for_end(&good),
    )
    .await
    .unwrap()
    .unwrap();
    engine.halt();
    drop(engine);
    // Nothing is lost: the broken row is still there, as it was.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let input: String = conn
        .query_row(
            "SELECT input FROM journal WHERE run_id = ?1 AND idx = 0",
            [&bad],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(input, "{\"truncat");
}

/// The same on the NATS journal: a damaged message of one run fails that run only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_run_in_the_nats_journal_fails_only_its_run() {
    let server = saap_nats::testing::NatsServer::start();
    let (bad, good) = {
        let engine = common::nats_engine_on(&server, wf("NatsRows"));
        let bad = engine.start_run(UserMessageEvent::new("a")).await.unwrap();
        let good = engine.start_run(UserMessageEvent::new("b")).await.unwrap();
        engine.halt();
        (bad, good)
    };
    let nats = saap_nats::testing::connect_ready(vec![server.url()], Default::default()).await;
    nats.jetstream()
        .publish(
            saap::nats::journal_subject("NatsRows", &bad),
            "{\"torn".into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();

    let engine = common::nats_engine_on(&server, wf("NatsRows"));
    // `nats_engine_on` opens with `Engine::new`; recovery is `Engine::open`'s.
    let backend = engine.backend().clone();
    let (reopened, rec) = Engine::open(wf("NatsRows"), backend, EngineOptions::default())
        .await
        .unwrap();
    assert_eq!(rec.resumed_runs, 1, "{rec:?}");
    assert_eq!(rec.failed.len(), 1, "{rec:?}");
    let err = rec.failed[0].to_string();
    assert!(err.contains(&bad) && err.contains("SAAP-S006"), "{err}");
    assert!(reopened.snapshot(&good).is_some());
    assert!(reopened.snapshot(&bad).is_none());
}

/// An event whose copy for a step panics (its `try_clone_event`): the step's inputs are
/// extracted under the run's lock on a current-thread in-memory engine.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct PanicsWhenCopied {
    v: u32,
}
impl saap::Event for PanicsWhenCopied {
    const NAME: &'static str = "PanicsWhenCopied";
    const PARENTS: &'static [&'static str] = &["ControlEvent"];
    fn try_clone_event(&self) -> Option<Self> {
        panic!("copy of {} refused", self.v)
    }
}

/// Same name as `Big`, other fields: a step returns one, the next reads it as the other.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct NotBig {
    size: u32,
}
impl saap::Event for NotBig {
    const NAME: &'static str = "Big";
    const PARENTS: &'static [&'static str] = &["ControlEvent"];
}

#[tokio::test(flavor = "current_thread")]
async fn a_step_output_the_next_step_cannot_read_as_its_type_fails_that_step() {
    let wf = Workflow::builder("Unreadable")
        .step(Step::new(
            "start",
            |_: Required<UserMessageEvent>, _: StepCtx| async {
                Ok::<_, StepError>(NotBig { size: 3 })
            },
        ))
        .step(Step::new("typed", |_: Required<Big>, _: StepCtx| async {
            Ok::<_, StepError>(Done::default())
        }))
        .build()
        .unwrap();
    let engine = Engine::in_memory(wf);
    let ex = exception_of(&engine, "hi").await;
    assert!(
        ex.message.contains("step `typed` cannot read its inputs") && ex.message.contains("blob"),
        "{}",
        ex.message
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_panic_while_a_steps_inputs_are_extracted_is_that_steps_failure_and_the_engine_goes_on() {
    let wf = Workflow::builder("PanicInExtraction")
        .step(Step::new(
            "start",
            |q: Required<UserMessageEvent>, _: StepCtx| async move {
                Ok::<_, StepError>(PanicsWhenCopied {
                    v: q.message.len() as u32,
                })
            },
        ))
        .step(Step::new(
            "reads",
            |_: Required<PanicsWhenCopied>, _: StepCtx| async {
                Ok::<_, StepError>(Done::default())
            },
        ))
        .build()
        .unwrap();
    let engine = Engine::in_memory(wf);
    for _ in 0..2 {
        // Twice: the run's lock is not poisoned, the next run fails the same way.
        let ex = exception_of(&engine, "hi").await;
        assert!(
            ex.message.contains("step `reads` panicked")
                && ex.message.contains("copy of 2 refused"),
            "{}",
            ex.message
        );
    }
}

/// The ExceptionEvent a run started with `message` ends with.
async fn exception_of(engine: &Engine, message: &str) -> saap::ExceptionEvent {
    let run = engine
        .start_run(UserMessageEvent::new(message))
        .await
        .unwrap();
    let r = saap::testing::TestRunner::new(engine.clone())
        .attach(&run)
        .unwrap();
    r.wait_for_event::<saap::ExceptionEvent>(common::WAIT)
        .await
        .unwrap()
}
