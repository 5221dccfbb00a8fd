//! Processes (seed 002's `@process_step`s, issue 21 §3): a workflow whose steps take work
//! events and hand the next piece of work to a person (`HumanWorkRequestEvent`, answered
//! by a `HumanWorkEvent` sent to the run), a program (`ProgramWorkRequestEvent` /
//! `ProgramWorkEvent`) or an agent (`AgentWorkRequestEvent`: a child run, whose end comes
//! back as one `AgentWorkEvent`). Its run begins with a `ProcessStartEvent` subtype and
//! ends with a `ProcessStopEvent` or `ProcessExceptionEvent`. On the in-memory store and
//! on SQLite, and across a restart while the process waits for a person.
#![allow(clippy::unwrap_used)]

mod common;

use common::WAIT;
use saap::backend::Backend;
use saap::process::{
    AgentWorkEvent, AgentWorkRequestEvent, HumanWorkEvent, HumanWorkRequestEvent,
    ProcessExceptionEvent, ProcessStopEvent, ProgramWorkEvent, ProgramWorkRequestEvent,
};
use saap::{
    Either, Engine, EngineOptions, MemoryBackend, Required, SqliteBackend, Step, StepCtx,
    StepError, UserMessageEvent, Workflow,
};
use saap_dispatch::run::progress::Progress;
use std::sync::Arc;
use std::time::Duration;

crate::event!(Drafting, "ControlEvent");

/// The process's input: who is joining.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
struct NewHire {
    name: String,
}
impl saap::Event for NewHire {
    const NAME: &'static str = "NewHire";
    const PARENTS: &'static [&'static str] = &["ProcessStartEvent"];
}

/// The writer's welcome note: ends its run.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
struct Note {
    text: String,
}
impl saap::Event for Note {
    const NAME: &'static str = "Note";
    const PARENTS: &'static [&'static str] = &["StopEvent"];
}

/// An agent that writes a welcome note; for "fail" it fails, for "slow" it never ends.
fn writer() -> Workflow {
    Workflow::builder("Writer")
        .step(Step::new(
            "write",
            |q: Required<UserMessageEvent>, _: StepCtx| async move {
                match q.message.as_str() {
                    "fail" => Err(StepError::new("no words today")),
                    "slow" => Ok(Either::Right(Drafting { n: 1 })),
                    name => Ok(Either::Left(Note {
                        text: format!("Welcome, {name}!"),
                    })),
                }
            },
        ))
        .build()
        .unwrap()
}

/// Onboarding: HR fills in the hire's team, the accounts program makes a login, the
/// writer agent (given 300 ms) writes a welcome note; the process ends with all three.
fn onboarding() -> Workflow {
    Workflow::builder("Onboarding")
        .step(Step::new(
            "ask_hr",
            |h: Required<NewHire>, _: StepCtx| async move {
                Ok::<_, StepError>(
                    HumanWorkRequestEvent::new("hr", format!("Which team does {} join?", h.name))
                        .form(serde_json::json!({"fields": ["team"]})),
                )
            },
        ))
        .step(Step::new(
            "create_account",
            |(h, hr): (Required<NewHire>, Required<HumanWorkEvent>), _: StepCtx| async move {
                let input = serde_json::json!({"name": h.name, "team": hr.form["team"]});
                Ok::<_, StepError>(ProgramWorkRequestEvent::new("accounts", &input)?)
            },
        ))
        .step(Step::new(
            "welcome",
            |(h, _): (Required<NewHire>, Required<ProgramWorkEvent>), _: StepCtx| async move {
                let ask = AgentWorkRequestEvent::new("Writer", &UserMessageEvent::new(&h.name))?;
                Ok::<_, StepError>(ask.timeout(Duration::from_millis(300)))
            },
        ))
        .step(Step::new(
            "finish",
            |(acct, note): (Required<ProgramWorkEvent>, Required<AgentWorkEvent>),
             _: StepCtx| async move {
                if !note.stopped() {
                    return Ok::<_, StepError>(Either::Right(ProcessExceptionEvent::new(
                        format!("the welcome note was not written: {}", note.message()),
                    )));
                }
                let note = note.stop_event::<Note>()?;
                Ok(Either::Left(ProcessStopEvent {
                    result: serde_json::json!({"login": acct.output["login"], "note": note.text}),
                }))
            },
        ))
        .build()
        .unwrap()
}

struct Both {
    process: Engine,
    writer: Engine,
    _dir: Option<tempfile::TempDir>,
}

async fn both(sqlite: bool) -> Both {
    let (backend, dir): (Arc<dyn Backend>, _) = if sqlite {
        let dir = tempfile::tempdir().unwrap();
        let b = SqliteBackend::open(dir.path().join("process.db")).unwrap();
        (Arc::new(b), Some(dir))
    } else {
        (Arc::new(MemoryBackend::new()), None)
    };
    let process = Engine::new(onboarding(), backend.clone(), EngineOptions::default());
    let writer = Engine::new(writer(), backend, EngineOptions::default());
    process.delegate_to(&writer).await;
    Both {
        process,
        writer,
        _dir: dir,
    }
}

/// The id of the run's event of type `name`, once it has one.
async fn event_id(engine: &Engine, run: &str, name: &str) -> String {
    tokio::time::timeout(WAIT, async {
        loop {
            let found = engine
                .snapshot(run)
                .and_then(|s| s.events().into_iter().find(|e| e.name == name));
            if let Some(e) = found {
                return e.id;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("run {run} never logged a {name}"))
}

async fn answer_hr(engine: &Engine, run: &str) {
    let request_event_id = event_id(engine, run, "HumanWorkRequestEvent").await;
    let asked = engine.snapshot(run).unwrap();
    assert_eq!(
        asked.run.progress().as_str(),
        "waiting_event",
        "{}",
        asked.timeline()
    );
    assert!(
        asked.waiting_for().contains("HumanWorkEvent"),
        "{}",
        asked.waiting_for()
    );
    let request = &asked.events_of::<HumanWorkRequestEvent>()[0];
    assert_eq!(request.assignee, "hr");
    let hr = HumanWorkEvent {
        request_event_id,
        submitted_by: "pat@hr".into(),
        form: serde_json::json!({"team": "core"}),
    };
    engine.send(run, hr).await.unwrap();
}

async fn answer_accounts(engine: &Engine, run: &str) {
    let request_event_id = event_id(engine, run, "ProgramWorkRequestEvent").await;
    let snap = engine.snapshot(run).unwrap();
    let request = &snap.events_of::<ProgramWorkRequestEvent>()[0];
    assert_eq!(request.program, "accounts");
    assert_eq!(request.input["team"], "core");
    let login = format!("{}@core", request.input["name"].as_str().unwrap_or("?"));
    let done = ProgramWorkEvent {
        request_event_id,
        program: "accounts".into(),
        output: serde_json::json!({ "login": login }),
    };
    engine.send(run, done).await.unwrap();
}

async fn ended(engine: &Engine, run: &str) -> saap::snapshot::RunSnapshot {
    tokio::time::timeout(WAIT, engine.wait_for_end(run))
        .await
        .unwrap()
        .unwrap();
    engine.snapshot(run).unwrap()
}

async fn a_process_hands_work_to_a_person_a_program_and_an_agent(sqlite: bool) {
    let b = both(sqlite).await;
    let run = b
        .process
        .start_run(NewHire { name: "Ada".into() })
        .await
        .unwrap();
    answer_hr(&b.process, &run).await;
    answer_accounts(&b.process, &run).await;
    let snap = ended(&b.process, &run).await;
    assert_eq!(
        snap.run.progress(),
        Progress::Stopped,
        "{}",
        snap.timeline()
    );
    let stop = &snap.events_of::<ProcessStopEvent>()[0];
    assert_eq!(
        stop.result,
        serde_json::json!({"login": "Ada@core", "note": "Welcome, Ada!"})
    );
    // The agent's work was a child run of the process, its end one AgentWorkEvent.
    let children = snap.children();
    assert_eq!(children.len(), 1);
    assert_eq!(
        (children[0].agent_class.as_str(), children[0].state),
        ("Writer", "ended")
    );
    let work = &snap.events_of::<AgentWorkEvent>()[0];
    assert_eq!(work.child_run_id, children[0].run_id);
    assert_eq!(work.request_event_id, children[0].run_id);
    assert!(
        snap.events_of::<saap::AgentInTheLoopResponseEvent>()
            .is_empty()
    );
    let child = b
        .writer
        .stored_snapshot(&work.child_run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(child.run.progress(), Progress::Stopped);
    assert_eq!(child.thread_id, snap.thread_id);
}

async fn an_agent_that_fails_its_work_is_a_failed_work_event(sqlite: bool) {
    let b = both(sqlite).await;
    let run = b
        .process
        .start_run(NewHire {
            name: "fail".into(),
        })
        .await
        .unwrap();
    answer_hr(&b.process, &run).await;
    answer_accounts(&b.process, &run).await;
    let snap = ended(&b.process, &run).await;
    // The process's own exception event ends its run as failed.
    assert_eq!(snap.run.progress(), Progress::Failed, "{}", snap.timeline());
    let failure = &snap.events_of::<ProcessExceptionEvent>()[0];
    assert!(
        failure.message.contains("no words today"),
        "{}",
        failure.message
    );
    let work = &snap.events_of::<AgentWorkEvent>()[0];
    assert!(!work.stopped());
    assert_eq!(work.agent_class, "Writer");
}

async fn an_agent_past_its_timeout_is_cancelled_and_the_process_told(sqlite: bool) {
    let b = both(sqlite).await;
    let run = b
        .process
        .start_run(NewHire {
            name: "slow".into(),
        })
        .await
        .unwrap();
    answer_hr(&b.process, &run).await;
    answer_accounts(&b.process, &run).await;
    let snap = ended(&b.process, &run).await;
    let work = &snap.events_of::<AgentWorkEvent>()[0];
    assert_eq!(work.exception_event["http_status_code"], 504, "{work:?}");
    assert!(work.message().contains("did not end within its timeout"));
    let failure = &snap.events_of::<ProcessExceptionEvent>()[0];
    assert!(failure.message.contains("timeout"), "{}", failure.message);
    tokio::time::timeout(WAIT, b.writer.wait_for_end(&work.child_run_id))
        .await
        .unwrap()
        .unwrap();
    let child = b.writer.snapshot(&work.child_run_id).unwrap();
    assert_eq!(child.run.progress(), Progress::Cancelled);
}

async fn cancelling_a_process_cancels_its_agents_work(sqlite: bool) {
    let b = both(sqlite).await;
    let run = b
        .process
        .start_run(NewHire {
            name: "slow".into(),
        })
        .await
        .unwrap();
    answer_hr(&b.process, &run).await;
    answer_accounts(&b.process, &run).await;
    let child = event_id(&b.process, &run, "AgentWorkRequestEvent").await;
    b.process.cancel(&run, "the hire withdrew").await.unwrap();
    // The child may not be started yet: the parent's engine starts it once the entry that
    // asked for it is durable (on SQLite, after an fsync), and cancels it then if its parent
    // gave it up meanwhile. Waited for until it is known, then until it ends.
    tokio::time::timeout(WAIT, async {
        loop {
            match b.writer.wait_for_end(&child).await {
                Err(saap::EngineError::UnknownRun { .. }) => {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                ended => return ended,
            }
        }
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(
        b.writer.snapshot(&child).unwrap().run.progress(),
        Progress::Cancelled
    );
    assert_eq!(
        b.process.snapshot(&run).unwrap().run.progress(),
        Progress::Cancelled
    );
}

/// An answer must name an open request of its run: none, another run's, or a second
/// answer to one request is refused (`SAAP-E022`) with the requests the run does have
/// open, and the run goes on with the right one.
async fn an_answer_to_no_open_request_is_refused(sqlite: bool) {
    let b = both(sqlite).await;
    let run = b
        .process
        .start_run(NewHire { name: "Bo".into() })
        .await
        .unwrap();
    let request = event_id(&b.process, &run, "HumanWorkRequestEvent").await;
    let refused = |e: saap::EngineError| {
        assert_eq!(e.code(), "SAAP-E022", "{e}");
        e.to_string()
    };
    let unnamed = b.process.send(&run, HumanWorkEvent::default()).await;
    let msg = refused(unnamed.unwrap_err());
    assert!(msg.contains("names no request"), "{msg}");
    assert!(
        msg.contains(&format!("open HumanWorkRequestEvents: {request}")),
        "{msg}"
    );
    let elsewhere = HumanWorkEvent {
        request_event_id: "0123456789abcdef01234567".into(),
        ..HumanWorkEvent::default()
    };
    let msg = refused(b.process.send(&run, elsewhere).await.unwrap_err());
    assert!(
        msg.contains("is not a HumanWorkRequestEvent of this run"),
        "{msg}"
    );
    // A program's answer to the person's request is of the wrong kind.
    let wrong_kind = ProgramWorkEvent {
        request_event_id: request.clone(),
        ..ProgramWorkEvent::default()
    };
    let msg = refused(b.process.send(&run, wrong_kind).await.unwrap_err());
    assert!(msg.contains("no ProgramWorkRequestEvent waiting"), "{msg}");
    answer_hr(&b.process, &run).await;
    let twice = HumanWorkEvent {
        request_event_id: request,
        form: serde_json::json!({"team": "other"}),
        ..HumanWorkEvent::default()
    };
    let msg = refused(b.process.send(&run, twice).await.unwrap_err());
    assert!(msg.contains("was answered already"), "{msg}");
    // By name and fields, as a command line sends it: the same check.
    let fields = saap::Payload::from_json(serde_json::json!({"request_event_id": "nope"}));
    let by_name = b.process.send_named(&run, "HumanWorkEvent", fields).await;
    let msg = refused(by_name.unwrap_err());
    assert!(msg.contains("request nope, which is not"), "{msg}");
    answer_accounts(&b.process, &run).await;
    let snap = ended(&b.process, &run).await;
    assert_eq!(snap.events_of::<HumanWorkEvent>().len(), 1);
    assert_eq!(
        snap.run.progress(),
        Progress::Stopped,
        "{}",
        snap.timeline()
    );
}

macro_rules! on_memory_and_sqlite {
    ($($name:ident;)*) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(false).await
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(true).await
                }
            )*
        }
    };
}

on_memory_and_sqlite! {
    a_process_hands_work_to_a_person_a_program_and_an_agent;
    an_agent_that_fails_its_work_is_a_failed_work_event;
    an_agent_past_its_timeout_is_cancelled_and_the_process_told;
    cancelling_a_process_cancels_its_agents_work;
    an_answer_to_no_open_request_is_refused;
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn reopen(path: &std::path::Path) -> (Engine, Engine) {
    let backend: Arc<dyn Backend> = Arc::new(SqliteBackend::open(path).unwrap());
    let (writer, rw) = Engine::open(writer(), backend.clone(), EngineOptions::default())
        .await
        .unwrap();
    assert!(rw.failed.is_empty(), "{:?}", rw.failed);
    let (process, rp) =
        Engine::open_with_delegates(onboarding(), backend, EngineOptions::default(), &[&writer])
            .await
            .unwrap();
    assert!(rp.failed.is_empty(), "{:?}", rp.failed);
    (process, writer)
}

/// A process that waits for a program survives its process: opened again, the program's
/// answer moves it on, and the agent's work is done once.
#[test]
fn a_waiting_process_goes_on_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("process.db");
    let run = runtime().block_on(async {
        let (process, _writer) = reopen(&path).await;
        let run = process
            .start_run(NewHire { name: "Lin".into() })
            .await
            .unwrap();
        answer_hr(&process, &run).await;
        event_id(&process, &run, "ProgramWorkRequestEvent").await;
        run
    });
    runtime().block_on(async {
        let (process, writer) = reopen(&path).await;
        let snap = process.stored_snapshot(&run).await.unwrap().unwrap();
        assert_eq!(
            snap.run.progress().as_str(),
            "waiting_event",
            "{}",
            snap.timeline()
        );
        answer_accounts(&process, &run).await;
        let snap = ended(&process, &run).await;
        assert_eq!(
            snap.run.progress(),
            Progress::Stopped,
            "{}",
            snap.timeline()
        );
        assert_eq!(snap.events_of::<AgentWorkEvent>().len(), 1);
        let child = &snap.children()[0].run_id;
        assert_eq!(
            writer
                .stored_snapshot(child)
                .await
                .unwrap()
                .unwrap()
                .executions_of("write"),
            1
        );
    });
}
