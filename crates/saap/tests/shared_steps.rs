//! The engine seam for step bodies that run away from their run (issue 4, `saap::nats` with
//! `Steps::Shared`): with an executor set, a started execution is handed over as a `Work`
//! instead of running; `Engine::execute_work` runs its body anywhere; `Engine::complete_work`
//! feeds the completion back. The core decides as before: a second or stale completion is
//! dropped, so a body run twice (a redelivered work item) logs its outputs once. An executor
//! with a free local slot (`StepExecutor::run_here`) keeps the body on the engine.
#![allow(clippy::unwrap_used)]

mod common;

use saap::context::DisplaySink;
use saap::engine::{StepExecutor, Work};
use saap::event::Payload;
use saap::{ContextError, Engine, Required, Step, StepCtx, StepError, UserMessageEvent, Workflow};
use saap_dispatch::ExecutionId;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

event!(A, "ControlEvent");
event!(Done, "StopEvent");

#[derive(Default)]
struct Capture(Mutex<Vec<Work>>);

impl StepExecutor for Capture {
    fn execute(&self, work: Work) {
        self.0.lock().unwrap().push(work);
    }
}

impl Capture {
    fn take(&self) -> Vec<Work> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

struct NoDisplay;

impl DisplaySink for NoDisplay {
    fn show(
        &self,
        _: ExecutionId,
        _: u32,
        name: &'static str,
        _: Payload,
    ) -> Pin<Box<dyn Future<Output = Result<(), ContextError>> + Send + 'static>> {
        Box::pin(async move {
            Err(ContextError::NotDisplay {
                name: name.to_string(),
            })
        })
    }
}

/// `begin(UserMessage) -> A` (reads the run id and config from its context), `finish(A) -> Done`.
fn relay() -> Workflow {
    Workflow::builder("Seam")
        .step(Step::new(
            "begin",
            |q: Required<UserMessageEvent>, ctx: StepCtx| async move {
                assert!(!ctx.run_id().is_empty());
                let start = ctx.start_fields();
                Ok::<_, StepError>(A {
                    n: (q.message.len() + start.json()["message"].as_str().unwrap().len()) as u32,
                })
            },
        ))
        .step(Step::new(
            "finish",
            |a: Required<A>, _: StepCtx| async move { Ok::<_, StepError>(Done { n: a.n + 1 }) },
        ))
        .build()
        .unwrap()
}

/// Runs `work`'s body as another worker would and feeds its completion to `run`.
async fn run_elsewhere(engine: &Engine, run: &str, work: &Work) {
    let outs = engine
        .execute_work(work, Arc::new(NoDisplay))
        .await
        .unwrap();
    engine
        .complete_work(run, work.execution, work.attempt, Ok(outs))
        .await
        .unwrap();
}

async fn next_work(capture: &Capture) -> Work {
    for _ in 0..2000 {
        if let Some(w) = capture.take().pop() {
            return w;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    panic!("no execution was handed to the executor");
}

#[tokio::test]
async fn a_body_run_elsewhere_completes_its_run_and_a_second_completion_is_dropped() {
    let engine = Engine::in_memory(relay());
    let capture = Arc::new(Capture::default());
    assert!(engine.set_executor(capture.clone()));
    let run = engine.start_run(UserMessageEvent::new("go")).await.unwrap();

    let begin = next_work(&capture).await;
    assert_eq!(&*begin.run_id, run.as_str());
    assert_eq!(begin.attempt, 1);
    // Nothing ran here: the execution waits for its completion.
    assert!(
        engine
            .snapshot(&run)
            .unwrap()
            .run
            .running()
            .next()
            .is_some()
    );

    let outs = engine
        .execute_work(&begin, Arc::new(NoDisplay))
        .await
        .unwrap();
    // The body ran twice (a redelivered work item): both completions are sent.
    let again = engine
        .execute_work(&begin, Arc::new(NoDisplay))
        .await
        .unwrap();
    engine
        .complete_work(&run, begin.execution, begin.attempt, Ok(outs))
        .await
        .unwrap();
    engine
        .complete_work(&run, begin.execution, begin.attempt, Ok(again))
        .await
        .unwrap();

    let finish = next_work(&capture).await;
    run_elsewhere(&engine, &run, &finish).await;
    tokio::time::timeout(common::WAIT, engine.wait_for_end(&run))
        .await
        .unwrap()
        .unwrap();
    let snap = engine.snapshot(&run).unwrap();
    let names = snap.timeline();
    // One A (the second completion added nothing), one finish execution, one Done.
    let a_count = snap
        .run
        .log()
        .iter()
        .filter(|e| e.origin == saap_dispatch::Origin::Execution(begin.execution))
        .count();
    assert_eq!(a_count, 1, "{names}");
    assert_eq!(snap.executions_of("begin"), 1, "{names}");
    assert_eq!(snap.executions_of("finish"), 1, "{names}");
    assert!(capture.take().is_empty(), "nothing else started");
}

#[tokio::test]
async fn an_output_larger_than_the_event_limit_from_elsewhere_fails_its_execution() {
    let engine = Engine::new(
        relay(),
        Arc::new(saap::MemoryBackend::new()),
        saap::EngineOptions {
            max_event_bytes: 1024,
            ..saap::EngineOptions::default()
        },
    );
    let capture = Arc::new(Capture::default());
    assert!(engine.set_executor(capture.clone()));
    let run = engine.start_run(UserMessageEvent::new("go")).await.unwrap();
    let begin = next_work(&capture).await;
    // What a worker sends back for a body that returned 4 KiB of text.
    let big = saap::params::OutEvent {
        name: "A".into(),
        payload: Payload::from_json(serde_json::json!({ "n": 1, "text": "x".repeat(4096) })),
        due_ns: None,
    };
    engine
        .complete_work(&run, begin.execution, begin.attempt, Ok(vec![big]))
        .await
        .unwrap();
    tokio::time::timeout(common::WAIT, engine.wait_for_end(&run))
        .await
        .unwrap()
        .unwrap();
    let snap = engine.snapshot(&run).unwrap();
    let names = snap.timeline();
    let failure = snap
        .run
        .execution_error(begin.execution)
        .unwrap_or_default()
        .to_string();
    assert!(
        failure.contains("more than the event size limit of 1024"),
        "{failure}\n{names}"
    );
    assert!(snap.events_of::<A>().is_empty(), "no A was logged: {names}");
    assert_eq!(snap.executions_of("finish"), 0, "{names}");
    assert!(snap.is_ended(), "the failure ended the run: {names}");
}

#[tokio::test]
async fn a_completion_of_a_stale_attempt_is_refused_by_the_core() {
    let engine = Engine::in_memory(relay());
    let capture = Arc::new(Capture::default());
    engine.set_executor(capture.clone());
    let run = engine.start_run(UserMessageEvent::new("go")).await.unwrap();
    let begin = next_work(&capture).await;
    let outs = engine
        .execute_work(&begin, Arc::new(NoDisplay))
        .await
        .unwrap();
    // Attempt 7 was never started: refused, the execution is still running.
    engine
        .complete_work(&run, begin.execution, 7, Ok(outs.clone()))
        .await
        .unwrap();
    assert!(
        engine
            .snapshot(&run)
            .unwrap()
            .run
            .running()
            .next()
            .is_some()
    );
    assert!(capture.take().is_empty());
    engine
        .complete_work(&run, begin.execution, 1, Ok(outs))
        .await
        .unwrap();
    let finish = next_work(&capture).await;
    assert_eq!(finish.attempt, 1);
}

#[tokio::test]
async fn a_work_item_of_another_workflow_version_does_not_run() {
    let engine = Engine::in_memory(relay());
    let capture = Arc::new(Capture::default());
    engine.set_executor(capture.clone());
    engine.start_run(UserMessageEvent::new("go")).await.unwrap();
    let mut begin = next_work(&capture).await;
    begin.fingerprint ^= 1;
    let err = engine
        .execute_work(&begin, Arc::new(NoDisplay))
        .await
        .unwrap_err();
    assert!(err.contains("another version"), "{err}");
}

/// Executions that become ready together are all handed over too (on a current-thread
/// runtime with the in-memory store they would otherwise be polled on the completing task).
#[tokio::test]
async fn a_fan_out_hands_every_execution_to_the_executor() {
    let wf = Workflow::builder("FanSeam")
        .step(Step::new(
            "split",
            |_: Required<UserMessageEvent>, _: StepCtx| async move {
                Ok::<_, StepError>((0..3).map(|n| A { n }).collect::<Vec<_>>())
            },
        ))
        .step(Step::new("each", |a: Required<A>, _: StepCtx| async move {
            Ok::<_, StepError>(Done { n: a.n })
        }))
        .build()
        .unwrap();
    let engine = Engine::in_memory(wf);
    let capture = Arc::new(Capture::default());
    engine.set_executor(capture.clone());
    let run = engine.start_run(UserMessageEvent::new("go")).await.unwrap();
    let split = next_work(&capture).await;
    run_elsewhere(&engine, &run, &split).await;
    let mut handed = Vec::new();
    for _ in 0..2000 {
        handed.extend(capture.take());
        if handed.len() >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let mut ns: Vec<u32> = handed
        .iter()
        .map(|w| w.inputs[0][0].payload.json()["n"].as_u64().unwrap() as u32)
        .collect();
    ns.sort();
    assert_eq!(
        ns,
        vec![0, 1, 2],
        "each of the three executions handed over once"
    );
    assert_eq!(engine.snapshot(&run).unwrap().executions_of("each"), 3);
}

/// Hands over only what it has no local slot for: one slot, held by a body while it runs.
struct OneSlot {
    slot: Arc<tokio::sync::Semaphore>,
    capture: Capture,
}

impl StepExecutor for OneSlot {
    fn run_here(&self) -> Option<saap::engine::LocalSlot> {
        self.slot
            .clone()
            .try_acquire_owned()
            .ok()
            .map(saap::engine::LocalSlot::new)
    }

    fn execute(&self, work: Work) {
        self.capture.execute(work);
    }
}

/// Adaptive placement at the seam: while the executor has a free local slot the engine runs
/// the body itself (nothing handed over, the run ends on its own); with its slot held, the
/// next started execution is handed over, and its completion ends the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_runs_on_the_engine_while_its_executor_has_a_free_local_slot() {
    let engine = Engine::in_memory(relay());
    let exec = Arc::new(OneSlot {
        slot: Arc::new(tokio::sync::Semaphore::new(1)),
        capture: Capture::default(),
    });
    assert!(engine.set_executor(exec.clone()));
    let run = engine.start_run(UserMessageEvent::new("go")).await.unwrap();
    tokio::time::timeout(common::WAIT, engine.wait_for_end(&run))
        .await
        .expect("the run ended without an executor round trip")
        .unwrap();
    assert_eq!(engine.snapshot(&run).unwrap().executions_of("finish"), 1);
    assert!(exec.capture.take().is_empty(), "a body was handed over");
    assert_eq!(exec.slot.available_permits(), 1, "the slot was not freed");

    // The slot held elsewhere: the start's execution is handed over.
    let held = exec.slot.clone().try_acquire_owned().unwrap();
    let run = engine.start_run(UserMessageEvent::new("go")).await.unwrap();
    let begin = next_work(&exec.capture).await;
    drop(held);
    run_elsewhere(&engine, &run, &begin).await;
    // `finish` found the slot free again and ran here.
    tokio::time::timeout(common::WAIT, engine.wait_for_end(&run))
        .await
        .expect("the run ended")
        .unwrap();
    assert_eq!(engine.snapshot(&run).unwrap().executions_of("finish"), 1);
    assert!(exec.capture.take().is_empty(), "`finish` was handed over");
}
