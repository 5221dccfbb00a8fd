//! The test runner (the seeds' AgentTestRunner, in Rust): start a run, send events, wait for
//! an event type, inspect events and execution counts. A wait that times out says what the
//! run is waiting for (running steps, steps and their missing inputs).
//!
//! ```no_run
//! # async fn demo(wf: saap::Workflow) -> Result<(), Box<dyn std::error::Error>> {
//! use saap::{StopEvent, UserMessageEvent, testing::TestRunner};
//! use std::time::Duration;
//! let runner = TestRunner::in_memory(wf);
//! let run = runner.start(UserMessageEvent::new("hi")).await?;
//! run.wait_for_event::<StopEvent>(Duration::from_secs(5)).await?;
//! assert_eq!(run.executions_of("answer"), 1);
//! # Ok(()) }
//! ```

use crate::engine::{Engine, EngineError};
use crate::event::Event;
use crate::snapshot::RunSnapshot;
use crate::workflow::Workflow;
use saap_dispatch::EventId;
use std::time::Duration;

/// Why a wait failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WaitError {
    #[error(
        "no `{name}` event within {timeout:?} in run {run_id}.\nThe run is waiting for:\n{waiting}\nTimeline:\n{timeline}"
    )]
    Timeout {
        name: &'static str,
        timeout: Duration,
        run_id: String,
        waiting: String,
        timeline: String,
    },
    #[error("run {run_id} ended without a `{name}` event.\nTimeline:\n{timeline}")]
    EndedWithout {
        name: &'static str,
        run_id: String,
        timeline: String,
    },
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// Runs a workflow for tests.
#[derive(Clone)]
pub struct TestRunner {
    engine: Engine,
}

impl TestRunner {
    pub fn new(engine: Engine) -> TestRunner {
        TestRunner { engine }
    }
    pub fn in_memory(workflow: Workflow) -> TestRunner {
        TestRunner::new(Engine::in_memory(workflow))
    }
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
    /// Starts a run with a start event.
    pub async fn start<T: Event>(&self, start: T) -> Result<TestRun, EngineError> {
        let run_id = self.engine.start_run(start).await?;
        Ok(TestRun {
            engine: self.engine.clone(),
            run_id,
        })
    }
    /// Runs a workflow to its end on this task ([`Engine::run`]) and returns the ended run
    /// for inspection. For runs that wait for sent events, use [`TestRunner::start`].
    pub async fn run<T: Event>(&self, start: T) -> Result<TestRun, EngineError> {
        let run_id = self.engine.run(start).await?;
        Ok(TestRun {
            engine: self.engine.clone(),
            run_id,
        })
    }
    /// A handle on an existing run (e.g. one resumed after a restart).
    pub fn attach(&self, run_id: &str) -> Result<TestRun, EngineError> {
        self.engine.watch(run_id)?;
        Ok(TestRun {
            engine: self.engine.clone(),
            run_id: run_id.to_string(),
        })
    }
}

/// One run under test.
#[derive(Clone)]
pub struct TestRun {
    engine: Engine,
    run_id: String,
}

impl TestRun {
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    pub async fn send<T: Event>(&self, event: T) -> Result<EventId, EngineError> {
        self.engine.send(&self.run_id, event).await
    }

    /// Resumes the run when its budget is spent (see [`Engine::resume`]).
    pub async fn resume(&self, raise: crate::Raise) -> Result<crate::Resumed, EngineError> {
        self.engine.resume(&self.run_id, raise).await
    }

    /// Where the run stands (`running`, `waiting_budget`, `stopped`…), as the core derives
    /// it from the log.
    pub fn status(&self) -> &'static str {
        self.snapshot().run.progress().as_str()
    }

    /// A copy of the run's current state.
    pub fn snapshot(&self) -> RunSnapshot {
        // The run exists: TestRun is only made for runs the engine knows (an engine that
        // evicts ended runs makes an empty snapshot that says so).
        self.engine
            .snapshot(&self.run_id)
            .unwrap_or_else(|| RunSnapshot {
                run_id: self.run_id.clone(),
                thread_id: String::new(),
                run: saap_dispatch::Run::new(self.engine.workflow().compiled().clone(), 0),
                payloads: Vec::new(),
                failure: Some("run not found".into()),
                display_by: Vec::new(),
            })
    }

    /// Waits until an event of exactly type `T` is in the run's log and returns the first.
    /// Fails at once if the run ends without one.
    pub async fn wait_for_event<T: Event>(&self, timeout: Duration) -> Result<T, WaitError> {
        let mut rx = self.engine.watch(&self.run_id)?;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            rx.borrow_and_update();
            let snap = self.snapshot();
            if let Some(e) = snap.events_of::<T>().into_iter().next() {
                return Ok(e);
            }
            if snap.is_ended() && snap.running() == 0 {
                return Err(WaitError::EndedWithout {
                    name: T::NAME,
                    run_id: self.run_id.clone(),
                    timeline: snap.timeline(),
                });
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => continue,
                Ok(Err(_)) | Err(_) => {
                    let snap = self.snapshot();
                    if let Some(e) = snap.events_of::<T>().into_iter().next() {
                        return Ok(e);
                    }
                    return Err(WaitError::Timeout {
                        name: T::NAME,
                        timeout,
                        run_id: self.run_id.clone(),
                        waiting: snap.waiting_for(),
                        timeline: snap.timeline(),
                    });
                }
            }
        }
    }

    /// Waits until the run has ended and no execution is running (in-flight executions of
    /// an ended run still finish; their outputs are after-stop evidence).
    pub async fn wait_for_end(&self, timeout: Duration) -> Result<RunSnapshot, WaitError> {
        let mut rx = self.engine.watch(&self.run_id)?;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            rx.borrow_and_update();
            let snap = self.snapshot();
            if snap.is_ended() && snap.running() == 0 {
                return Ok(snap);
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => continue,
                Ok(Err(_)) | Err(_) => {
                    return Err(WaitError::Timeout {
                        name: "end of run",
                        timeout,
                        run_id: self.run_id.clone(),
                        waiting: snap.waiting_for(),
                        timeline: snap.timeline(),
                    });
                }
            }
        }
    }

    /// Waits until no execution is running (the run may still be live, e.g. waiting for a
    /// human's response).
    pub async fn wait_idle(&self, timeout: Duration) -> Result<RunSnapshot, WaitError> {
        let mut rx = self.engine.watch(&self.run_id)?;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            rx.borrow_and_update();
            let snap = self.snapshot();
            if snap.running() == 0 {
                return Ok(snap);
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => continue,
                Ok(Err(_)) | Err(_) => {
                    return Err(WaitError::Timeout {
                        name: "idle run",
                        timeout,
                        run_id: self.run_id.clone(),
                        waiting: snap.waiting_for(),
                        timeline: snap.timeline(),
                    });
                }
            }
        }
    }

    pub fn events_of<T: Event>(&self) -> Vec<T> {
        self.snapshot().events_of::<T>()
    }
    pub fn executions_of(&self, step: &str) -> usize {
        self.snapshot().executions_of(step)
    }
    pub fn has_stop(&self) -> bool {
        self.snapshot().has_stop()
    }
    pub fn has_exception(&self) -> bool {
        self.snapshot().has_exception()
    }
    pub fn timeline(&self) -> String {
        self.snapshot().timeline()
    }
}
