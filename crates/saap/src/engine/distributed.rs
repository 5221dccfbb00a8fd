//! Entry points for engines that share runs between processes (the `nats` engine, see
//! `crate::nats`): a run started under the id its wire subject names, a run adopted from its
//! journal after its owner stopped, and the queries an intake needs to deduplicate by event id
//! before it journals anything. Every decision is still made by the core through
//! `Shared::apply`, exactly as for local runs.

use super::apply::*;
use super::body::*;
use super::error::EngineError;
use super::slot::*;
use super::tasks::*;
use super::*;
use crate::backend::StoredRun;
use crate::context::StepCtx;
use crate::event::Payload;
use crate::params::OutEvent;
use saap_dispatch::ids::run_key;
use saap_dispatch::{EventId, ExecutionId, Run};
use saap_protocol::{DecodeLimits, EventEnvelope};
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

impl Engine {
    /// Starts run `run_id` of thread `thread_id` with a start event in wire JSON (DESIGN §6).
    /// If this engine already holds the run, the event is sent to it instead (a redelivered
    /// start is then dropped by its id; another start is an ordinary input, §4.10). Returns the
    /// event id once the event is durable.
    pub async fn start_run_json(
        &self,
        run_id: &str,
        thread_id: &str,
        bytes: &[u8],
    ) -> Result<EventId, EngineError> {
        if self.shared.slot(run_id).is_ok() {
            return self.send_json(run_id, bytes).await;
        }
        let limits = DecodeLimits {
            max_bytes: self.shared.opts.max_event_bytes,
            ..DecodeLimits::default()
        };
        let env =
            EventEnvelope::decode(bytes, &self.shared.workflow.compiled().hierarchy, &limits)?;
        let payload = Payload::from_json(serde_json::Value::Object(env.fields.clone()));
        let not_a_start = || EngineError::NotAStartEvent {
            name: super::error::shown(&env.event_name),
        };
        let ev =
            match self
                .shared
                .incoming(&env.event_name, payload, bytes.len(), Some(env.event_id))
            {
                Ok(ev) => ev,
                // An event a run takes that its workflow does not declare (a cancellation): not
                // a start, which is what the caller must know (the run may begin elsewhere).
                Err(_) if !env.dispatch_classification().start => return Err(not_a_start()),
                Err(e) => return Err(e),
            };
        if !(ev.kind.is_start() && ev.kind.is_control()) {
            return Err(not_a_start());
        }
        let id = ev.id;
        let run = Run::new(self.shared.workflow.compiled().clone(), run_key(run_id));
        let fresh = Arc::new(RunSlot::new(
            run_id.into(),
            super::Thread::Given(thread_id.into()),
            run,
        ));
        let slot = self.shared.insert_if_absent(fresh.clone());
        // The run's budget comes with its first start only (a start delivered again is a
        // duplicate, granted nothing).
        let input = if Arc::ptr_eq(&slot, &fresh) {
            self.shared.start_input(ev)
        } else {
            Input::Append(ev)
        };
        self.shared.submit(&slot, input).await?;
        Ok(id)
    }

    /// Whether this engine holds run `run_id` (live, or ended and kept).
    pub fn has_run(&self, run_id: &str) -> bool {
        self.shared.slot(run_id).is_ok()
    }

    /// Whether run `run_id` already logged event `id`; `None` when this engine does not hold
    /// the run. Lets an intake acknowledge a redelivery without journaling it again.
    pub fn holds_event(&self, run_id: &str, id: &EventId) -> Option<bool> {
        let slot = self.shared.slot(run_id).ok()?;
        let st = slot.lock();
        Some(st.run.seq_of(id).is_some())
    }

    /// Whether run `run_id` has ended (a stop or exception event is logged, or a storage
    /// failure stopped it); `None` when this engine does not hold the run.
    pub fn run_ended(&self, run_id: &str) -> Option<bool> {
        let slot = self.shared.slot(run_id).ok()?;
        let st = slot.lock();
        Some(st.run.is_terminated() || st.failure.is_some())
    }

    /// Whether run `run_id` was stopped by a storage failure (its journal write failed, e.g.
    /// fenced or the server unreachable for too long); `None` when this engine does not hold
    /// it. Such a run is rebuilt from the journal by adopting it again.
    pub fn run_failed(&self, run_id: &str) -> Option<bool> {
        let slot = self.shared.slot(run_id).ok()?;
        let st = slot.lock();
        Some(st.failure.is_some())
    }

    /// Adopts a run from its stored journal (its previous owner stopped): the core rebuilds it
    /// (recorded precondition results reused, records compared with the stored ones), then
    /// every execution that had started but not completed runs again (DESIGN §4.9). Returns
    /// how many executions were started again.
    pub async fn adopt(&self, stored: StoredRun) -> Result<usize, EngineError> {
        // A live fork goes on taking its original's outputs where its inputs match.
        let reuse = match stored.ended {
            false => self.shared.fork_reuse(&stored.journal).await,
            true => None,
        };
        self.adopt_with(stored, reuse).await
    }

    /// [`Engine::adopt`], for a fork with the outputs it may take from its original (set
    /// before any execution runs again).
    pub(super) async fn adopt_with(
        &self,
        stored: StoredRun,
        reuse: Option<Box<super::fork_reuse::ForkReuse>>,
    ) -> Result<usize, EngineError> {
        let run_id = stored.meta.run_id.to_string();
        let parent = stored.meta.parent.clone();
        let (slot, ended) = self
            .shared
            .rebuild(stored)
            .map_err(|detail| EngineError::Replay {
                run_id: run_id.clone(),
                detail,
            })?;
        slot.lock().fork_reuse = reuse;
        self.shared.insert(slot.clone());
        // Delegation across processes: linked to its parent again, asking again for what
        // a parent waits for (see `remote`).
        self.shared.relink_remote(&slot, parent).await;
        if ended {
            slot.wake_if_quiet();
            return Ok(0);
        }
        self.shared.arm_timers(&slot);
        let running: Vec<ExecutionId> = slot.lock().run.running().collect();
        let mut started = 0;
        for x in running {
            let applied = self.shared.apply(&slot, Input::Retry(x))?;
            if let Err(e) = applied.durable.wait().await {
                self.shared.storage_failed(&slot, &e);
                return Err(e.into());
            }
            slot.bump();
            started += applied.started.len();
            for inv in applied.started {
                spawn_drive(self.shared.clone(), slot.clone(), inv);
            }
        }
        Ok(started)
    }

    /// Drops run `run_id` from this engine's memory (its ownership moved to another process).
    /// Executions still running finish, but their completions are refused by the store.
    pub fn forget(&self, run_id: &str) {
        self.shared
            .runs
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .held
            .remove(run_id.as_bytes());
    }
}

impl Engine {
    /// Sends every execution this engine starts from now on to `executor` instead of running
    /// it here (decisions stay here, in arrival order; only bodies move). Returns false if an
    /// executor was already set (it stays).
    pub fn set_executor(&self, executor: Arc<dyn StepExecutor>) -> bool {
        self.shared.executor.set(executor).is_ok()
    }

    /// The workflow's fingerprint (what [`Work::fingerprint`] must equal to run here).
    pub fn fingerprint(&self) -> u64 {
        self.shared.fingerprint
    }

    /// Runs the body of `work` here, although this engine may not hold its run: RunContext
    /// and ThreadContext go through this engine's backend (shared stores only), display
    /// events to `display`. A panic or an input that does not fit is an `Err`, as locally.
    pub async fn execute_work(
        &self,
        work: &Work,
        display: Arc<dyn crate::context::DisplaySink>,
    ) -> Result<Vec<OutEvent>, String> {
        let cancel = tokio_util::sync::CancellationToken::new();
        self.execute_work_metered(work, display, cancel).await.0
    }

    /// [`Engine::execute_work`], with what the body's model calls used
    /// ([`StepCtx::report_usage`]) for the run's owner to count against its budget
    /// ([`Engine::report_work_usage`]); the body sees `cancel` as its
    /// [`StepCtx::cancellation`] (cancel it when the run is cancelled).
    pub async fn execute_work_metered(
        &self,
        work: &Work,
        display: Arc<dyn crate::context::DisplaySink>,
        cancel: tokio_util::sync::CancellationToken,
    ) -> (Result<Vec<OutEvent>, String>, WorkUsage) {
        if work.fingerprint != self.shared.fingerprint {
            let e = format!(
                "the execution was started by another version of workflow `{}` (fingerprint {:016x}, here {:016x})",
                self.shared.workflow.name(),
                work.fingerprint,
                self.shared.fingerprint
            );
            return (Err(e), WorkUsage::default());
        }
        let remote = Arc::new(crate::context::RemoteRun {
            host: self.shared.clone(),
            run_id: work.run_id.clone(),
            thread_id: work.thread_id.clone(),
            start: work.start.clone(),
            display,
            displayed: AtomicU32::new(0),
            usage: Default::default(),
            cancel,
        });
        let ctx = StepCtx {
            run: std::mem::ManuallyDrop::new(crate::context::CtxRun::Remote(remote.clone())),
            execution: work.execution,
            attempt: work.attempt,
        };
        // Read only when this engine exports traces.
        #[cfg(feature = "otel")]
        let started_ns = if self.shared.telemetry.is_some() {
            super::ids::unix_nanos()
        } else {
            0
        };
        let ran = self
            .shared
            .run_body(work.step, &work.inputs, ctx, Vec::new())
            .await;
        #[cfg(feature = "otel")]
        if let Some(t) = &self.shared.telemetry {
            t.remote_execution_ended(
                &work.run_id,
                &work.thread_id,
                work.step,
                work.execution,
                work.attempt,
                started_ns,
                &work.inputs,
                ran.as_deref().map_err(String::as_str),
            );
        }
        let (tokens, cost_micros) = remote.used();
        (
            ran,
            WorkUsage {
                tokens,
                cost_micros,
            },
        )
    }

    /// What the body of execution `execution` (attempt `attempt`) of run `run_id`, run
    /// elsewhere, used ([`Engine::execute_work_metered`]): counted against the run's budget
    /// with its completion ([`Engine::complete_work`], next), as a body run here is.
    pub fn report_work_usage(
        &self,
        run_id: &str,
        execution: ExecutionId,
        attempt: u32,
        usage: WorkUsage,
    ) {
        if usage == WorkUsage::default() {
            return;
        }
        if let Some(slot) = self.shared.held(run_id) {
            slot.lock()
                .add_usage(execution, attempt, usage.tokens, usage.cost_micros);
        }
    }

    /// Feeds the completion of an execution whose body ran elsewhere to run `run_id`;
    /// returns once it is durable (and the executions it started are handed on). A stale or
    /// second completion of the same execution is dropped by the core (returns `Ok`).
    /// Outputs are held to the size limit of events sent to a run
    /// (`EngineOptions::max_event_bytes`): one larger, or one whose JSON form cannot be made,
    /// fails the execution, as it does for a body run here on a durable store.
    pub async fn complete_work(
        &self,
        run_id: &str,
        execution: ExecutionId,
        attempt: u32,
        outcome: Result<Vec<OutEvent>, String>,
    ) -> Result<(), EngineError> {
        let slot = self.shared.slot(run_id)?;
        // From another process: bounded whatever the backend (the in-memory one too).
        let outcome = outcome.and_then(|outs| {
            match outs
                .iter()
                .find_map(|o| stored_output_error(o, self.shared.opts.max_event_bytes))
            {
                Some(e) => Err(e),
                None => Ok(outs),
            }
        });
        self.shared
            .submit(
                &slot,
                Input::Complete {
                    execution,
                    attempt,
                    outcome,
                },
            )
            .await
            .map(|_| ())
    }

    /// A display event shown by execution `execution` of run `run_id` whose body runs
    /// elsewhere: its id is derived from execution and counter `n` as for a local body, so
    /// one shown twice (a re-run) is logged once. Returns once it is durable.
    pub async fn display_work(
        &self,
        run_id: &str,
        execution: ExecutionId,
        n: u32,
        name: String,
        payload: Payload,
    ) -> Result<(), crate::context::ContextError> {
        let slot = self
            .shared
            .slot(run_id)
            .map_err(|e| crate::context::ContextError::Engine(Box::new(e)))?;
        self.shared
            .display(&slot, execution, n, name.into(), payload)
            .await
    }
}
