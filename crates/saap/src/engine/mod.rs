//! The engine: drives one `saap_dispatch::Run` per run over a [`Backend`]. It makes no
//! dispatch decision itself (DESIGN §2): it feeds inputs to the core in arrival order (one
//! lock per run), persists what the core decided, and only then runs the step bodies the
//! core started — on tokio tasks, or inline when exactly one step became ready. Where
//! tasks add no parallelism (current-thread runtime, in-memory store) a *local driver*
//! runs them instead: one loop per run for `Engine::run` (on the caller's task) and one per
//! engine for `start_run`/`send`, which binds each execution when its turn comes and polls
//! its body in place, parking only the bodies that wait.
//!
//! Flow of one input (an outside event, a completion, a retry after a crash):
//! 1. lock the run; apply the input to the core; collect the new records and started
//!    executions; hand the journal entry to the backend (in journal order); unlock;
//! 2. wait until the entry is durable;
//! 3. run the started executions; their completions come back as step 1.
//!
//! Where each part lives (bottom to top; a file uses only the ones above it, plus `shared`
//! for the `Shared` it extends):
//! - `options`: settings, errors, what recovery found;
//! - `ids`, `names`, `waiters`, `timer_queue`: run ids and hashers, type names, waiting
//!   tasks, which runs have timers due when;
//! - `precondition`: the core's precondition calls answered; `fork_reuse`: the outputs a
//!   fork may take from its original;
//! - `slot`: one run's slot and the state behind its lock;
//! - `invocation`, `payloads`, `local_queue`: a started execution's inputs, payloads by
//!   sequence, the local drivers' queue;
//! - `bind`: a started execution bound under its run's lock (events or typed inputs);
//! - `run_table`, `shared`: the runs held, the engine's shared state;
//! - `incoming`: events entering a run; `lifecycle`: slots held, evicted, recycled;
//! - `apply`: one input applied to the core under the run's lock;
//! - `body`: a step body started, polled and completed;
//! - `tasks`, `local_driver`: where started executions run; `timers`: when runs' timers are
//!   due;
//! - `recovery`: stored runs rebuilt; `distributed`: entry points for the NATS engine;
//! - `cancel`: a run ended by its caller;
//! - this file: [`Engine`], the public API.

mod answers;
mod apply;
mod asked;
mod bind;
mod body;
mod budget;
mod cancel;
mod ctx_host;
mod delegation;
pub(crate) mod error;
mod executor;
mod fork;
mod fork_reuse;
pub(crate) mod ids;
mod incoming;
mod invocation;
mod lifecycle;
mod local_driver;
mod local_queue;
mod names;
mod options;
mod payloads;
mod precondition;
mod recovery;
mod remote;
mod remote_agents;
mod replay;
pub(crate) mod run_names;
mod run_table;
mod shared;
mod slot;
mod tasks;
#[cfg(feature = "otel")]
mod telemetry;
mod timer_queue;
mod timers;
mod waiters;
// Entry points for engines that share runs between processes (the `nats` engine): start a run
// under a given id, adopt a run from its journal, hand a run over.
mod distributed;
#[cfg(test)]
mod tests;

pub use budget::{Raise, Resumed};
pub use delegation::ChildView;
pub(crate) use delegation::child_views;
pub use error::EngineError;
pub use executor::{LocalSlot, StepExecutor, Work, WorkUsage};
pub use options::{EngineOptions, Recovery, RunBudget};
pub use remote_agents::{RemoteAgents, RemoteChild};
pub(crate) use shared::Shared;
pub(crate) use slot::RunSlot;

use crate::backend::{Backend, Pending};
use crate::event::{Event, Payload, PayloadError};
use crate::params::EventName;
use crate::snapshot::RunSnapshot;
use crate::workflow::Workflow;

use apply::{Applied, Bind, Input};
use ids::{IdGen, RunIds};
use incoming::Incoming;
use invocation::Started;
use local_driver::{DrivenRun, drive_local};
use local_queue::LocalQueue;
use run_names::Thread;
use run_table::Runs;
use saap_dispatch::run::ExecState;
use saap_dispatch::{EventId, EventKind, ExecutionId, NewEventType};
use saap_protocol::{DecodeLimits, EventEnvelope};
use shared::shares_task;
use std::future::Future;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, RwLock};
use tasks::{LaunchOutcome, drive_started, spawn_drive};
use tokio::sync::watch;

/// The runtime: runs one workflow's runs. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    pub(crate) shared: Arc<Shared>,
}

impl Engine {
    /// An engine over the in-memory backend (nothing survives the process).
    pub fn in_memory(workflow: Workflow) -> Engine {
        Engine::new(
            workflow,
            Arc::new(crate::backend::memory::MemoryBackend::new()),
            EngineOptions::default(),
        )
    }

    /// An engine over a backend, without looking for runs to resume (use [`Engine::open`]
    /// for a store that may hold runs). The agents the workflow declares it delegates to
    /// ([`Workflow::with_delegate`]) get engines of their own on the same store, held by this
    /// one ([`Engine::agent`]).
    pub fn new(workflow: Workflow, backend: Arc<dyn Backend>, opts: EngineOptions) -> Engine {
        if workflow.delegates().is_empty() {
            return Engine::one(workflow, backend, opts);
        }
        Engine::agents(workflow, backend, opts).0
    }

    /// The engines of `workflow`'s agent set ([`Workflow::agent_set`]), this one's first:
    /// each registered with the engines of the agents it declares, the others held by the
    /// first.
    fn agents(
        workflow: Workflow,
        backend: Arc<dyn Backend>,
        opts: EngineOptions,
    ) -> (Engine, Vec<Engine>) {
        let engines: Vec<Engine> = workflow
            .agent_set()
            .into_iter()
            .map(|w| Engine::one(w, backend.clone(), opts.clone()))
            .collect();
        for e in &engines {
            for d in e.workflow().delegates() {
                if let Some(other) = engines.iter().find(|o| o.workflow().name() == d.name()) {
                    e.shared.register_delegate(&other.shared);
                }
            }
        }
        let root = engines[0].clone();
        let others: Vec<Engine> = engines[1..].to_vec();
        let held: Box<[Arc<Shared>]> = others.iter().map(|e| e.shared.clone()).collect();
        let _ = root.shared.agents.set(held);
        (root, others)
    }

    /// The engine of agent `name`: this one's, or one made for an agent its workflow
    /// delegates to (to send to or read a child run of that agent).
    pub fn agent(&self, name: &str) -> Option<Engine> {
        if self.workflow().name() == name {
            return Some(self.clone());
        }
        self.shared
            .agents
            .get()?
            .iter()
            .find(|a| a.workflow.name() == name)
            .map(|shared| Engine {
                shared: shared.clone(),
            })
    }

    /// One engine for one workflow.
    fn one(workflow: Workflow, backend: Arc<dyn Backend>, opts: EngineOptions) -> Engine {
        debug_assert!(
            workflow.has_code(),
            "a workflow without step code was handed to an engine"
        );
        let fingerprint = workflow.compiled().fingerprint();
        let type_names: Arc<[EventName]> = workflow
            .compiled()
            .types
            .iter()
            .map(
                |t| match workflow.inner.rust_names.iter().find(|n| **n == t.name) {
                    Some(n) => EventName::Static(n),
                    None => EventName::Shared(t.name.as_str().into()),
                },
            )
            .collect();
        let type_ids = workflow
            .compiled()
            .types
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.as_str().into(), i as saap_dispatch::TypeId))
            .collect();
        let out_types: Vec<shared::OutTypes> = workflow
            .spec()
            .steps
            .iter()
            .map(|s| {
                s.outputs
                    .iter()
                    .filter_map(|n| {
                        let name = match workflow.inner.rust_names.iter().find(|r| **r == n) {
                            Some(r) => EventName::Static(r),
                            None => EventName::from(n.as_str()),
                        };
                        Some((name, workflow.compiled().type_id(n)?))
                    })
                    .collect()
            })
            .collect();
        let start_types = type_names
            .iter()
            .enumerate()
            .filter_map(|(i, n)| match n {
                EventName::Static(n) => {
                    let t = i as saap_dispatch::TypeId;
                    let kind = workflow.compiled().type_info(t).kind;
                    (kind.is_start() && kind.is_control()).then_some((*n, t))
                }
                EventName::Shared(_) => None,
            })
            .collect();
        // Which types start child runs (delegation requests, by the protocol's lineage).
        let delegating: Box<[Option<asked::Asked>]> = workflow
            .compiled()
            .types
            .iter()
            .map(|t| {
                let lineage = workflow.compiled().hierarchy.lineage(&t.name);
                asked::Asked::by(&t.name, lineage.unwrap_or_default())
            })
            .collect();
        // Only a workflow with a step that returns one completes on the general path (the
        // compiled types hold the whole protocol hierarchy, requests included).
        let may_delegate = out_types
            .iter()
            .any(|outs| outs.iter().any(|(_, t)| delegating[*t as usize].is_some()));
        // A workflow cannot change once it is the engine's: what it lacks is known now.
        let missing_resource = workflow.check_resources().err();
        #[cfg(feature = "otel")]
        let telemetry = opts.telemetry.clone().map(|exporter| {
            let steps: Vec<String> = workflow
                .spec()
                .steps
                .iter()
                .map(|s| s.name.clone())
                .collect();
            telemetry::LiveTelemetry::new(exporter, workflow.name(), &steps)
        });
        Engine {
            shared: Arc::new_cyclic(|this| Shared {
                missing_resource,
                ctx_ref: crate::context::EngineRef::register(this.clone() as _),
                journal: backend.wants_journal(),
                fingerprint,
                type_names,
                workflow,
                backend,
                runs: RwLock::new(Runs::default()),
                type_ids,
                out_types,
                start_types,
                opts,
                ids: IdGen::new(),
                executor: std::sync::OnceLock::new(),
                spare_slot_count: AtomicUsize::new(0),
                spare_tables: Mutex::new(Vec::new()),
                large_spare: Mutex::new(None),
                local: Mutex::new(LocalQueue::default()),
                local_wake: tokio::sync::Notify::new(),
                #[cfg(feature = "otel")]
                telemetry,
                timers: timer_queue::TimerQueue::default(),
                delegating,
                may_delegate,
                delegates: RwLock::new(Vec::new()),
                remote: std::sync::OnceLock::new(),
                agents: std::sync::OnceLock::new(),
                child_starts: tokio::sync::Mutex::new(()),
                this: this.clone(),
            }),
        }
    }

    /// Opens an engine over a store: every live run of this workflow is rebuilt from its
    /// journal by the dispatch core (recorded precondition results are reused, and the
    /// rebuilt records must equal the stored ones), then re-runs the executions that had
    /// started but not completed. Ended runs stay in the store, so opening costs what the
    /// live runs cost: [`Engine::stored_snapshot`] reads one, and an event sent to one is
    /// kept as after-stop evidence as before. Must be called inside a tokio runtime.
    pub async fn open(
        workflow: Workflow,
        backend: Arc<dyn Backend>,
        opts: EngineOptions,
    ) -> Result<(Engine, Recovery), EngineError> {
        Engine::open_with_delegates(workflow, backend, opts, &[]).await
    }

    /// [`Engine::open`] for an agent that delegates to engines made apart: `delegates`
    /// (opened first) are registered before any interrupted execution runs again — a step
    /// re-run at open that delegates finds its agent — and afterwards every child the live
    /// runs wait for is made sure of, as [`Engine::delegate_to`] does. The agents the
    /// workflow declares ([`Workflow::with_delegate`]) are opened with it the same way: all
    /// of them registered before any of them recovers, so agents that delegate to each
    /// other in a cycle open too. The recovery is the sum over the agents opened.
    pub async fn open_with_delegates(
        workflow: Workflow,
        backend: Arc<dyn Backend>,
        opts: EngineOptions,
        delegates: &[&Engine],
    ) -> Result<(Engine, Recovery), EngineError> {
        let (engine, declared) = if workflow.delegates().is_empty() {
            (Engine::one(workflow, backend, opts), Vec::new())
        } else {
            Engine::agents(workflow, backend, opts)
        };
        for d in delegates {
            engine.shared.register_delegate(&d.shared);
        }
        let mut recovery = engine.recover().await?;
        for e in &declared {
            let r = e.recover().await?;
            recovery.resumed_runs += r.resumed_runs;
            recovery.retried_executions += r.retried_executions;
            recovery.orphans_cancelled += r.orphans_cancelled;
            recovery.failed.extend(r.failed);
        }
        for d in delegates {
            engine.delegate_to(d).await;
        }
        for e in std::iter::once(&engine).chain(&declared) {
            for d in e.workflow().delegates() {
                if let Some(other) = engine.agent(d.name()) {
                    e.delegate_to(&other).await;
                }
            }
        }
        Ok((engine, recovery))
    }

    /// The recovery of [`Engine::open`].
    async fn recover(&self) -> Result<Recovery, EngineError> {
        let shared = &self.shared;
        let stored = shared
            .backend
            .load_runs(shared.workflow.name(), true)
            .wait()
            .await?;
        let mut recovery = Recovery::default();
        let mut to_retry = Vec::new();
        // Live child runs and who delegated them: reconciled once the retries run.
        let mut children = Vec::new();
        for s in stored {
            let run_id = s.meta.run_id.to_string();
            if let Some(by) = &s.meta.parent {
                children.push((run_id.clone(), by.clone()));
            }
            // A live fork goes on taking its original's outputs where its inputs match.
            let reuse = match s.ended {
                false => shared.fork_reuse(&s.journal).await,
                true => None,
            };
            match shared.rebuild(s) {
                Ok((slot, ended)) => {
                    if !ended {
                        slot.lock().fork_reuse = reuse;
                        recovery.resumed_runs += 1;
                        let running: Vec<ExecutionId> = slot.lock().run.running().collect();
                        for x in running {
                            to_retry.push((slot.clone(), x));
                        }
                    }
                    shared.insert(slot.clone());
                    if !ended {
                        shared.arm_timers(&slot);
                    }
                }
                Err(detail) => {
                    tracing::error!(run_id, %detail, "run cannot be resumed");
                    recovery.failed.push(EngineError::Replay { run_id, detail });
                }
            }
        }
        // Journal every retry first (one group commit for all of them), then run them.
        let mut applied = Vec::with_capacity(to_retry.len());
        for (slot, x) in to_retry {
            match shared.apply(&slot, Input::Retry(x)) {
                Ok(a) => applied.push((slot, a)),
                Err(e) => {
                    tracing::error!(run_id = %slot.run_id(), error = %e, "cannot retry an execution")
                }
            }
        }
        for (slot, a) in applied {
            if let Err(e) = a.durable.wait().await {
                shared.storage_failed(&slot, &e);
                recovery.failed.push(e.into());
                continue;
            }
            recovery.retried_executions += a.started.len();
            slot.bump();
            for inv in a.started {
                spawn_drive(shared.clone(), slot.clone(), inv);
            }
        }
        for (run_id, by) in children {
            match shared.reconcile_child(&run_id, &by).await {
                Ok(true) => recovery.orphans_cancelled += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::error!(run_id, error = %e, "cannot reconcile a child run with its parent");
                    recovery.failed.push(e);
                }
            }
        }
        Ok(recovery)
    }

    pub fn workflow(&self) -> &Workflow {
        &self.shared.workflow
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.shared.backend
    }

    /// Starts a run in a new thread with a start event; returns the run id once the start
    /// event is durable. (The future of [`Engine::start_run_in`] itself, not one wrapping
    /// it: one per run in flight, kept small.)
    pub fn start_run<T: Event>(
        &self,
        start: T,
    ) -> impl Future<Output = Result<String, EngineError>> + Send + '_ {
        self.start_run_in(None, start)
    }

    /// Starts a run in an existing thread (ThreadContext is shared by the thread's runs).
    pub async fn start_run_in<T: Event>(
        &self,
        thread_id: Option<&str>,
        start: T,
    ) -> Result<String, EngineError> {
        // In a block: the ids are not kept in the future (one per run in flight).
        let (slot, applied) = {
            let ids = self.shared.ids.next_run();
            let ev = json_size(&start)
                .map_err(EngineError::from)
                .and_then(|size| {
                    self.shared.incoming_named(
                        T::NAME.into(),
                        Payload::typed(start),
                        size,
                        Some(ids.start),
                    )
                });
            self.begin_run(thread_id, ev, ids)?
        };
        // Launched before the first await on the in-memory path (see `Shared::launch_now`);
        // the match ends before the await, so the future holds no `LaunchOutcome`.
        let waiting = match self.shared.launch_now(&slot, applied) {
            LaunchOutcome::Done(launched) => {
                let run_id = slot.run_id_string();
                self.shared.release(slot);
                launched?;
                return Ok(run_id);
            }
            LaunchOutcome::WaitsForStore(waiting) => Box::pin(self.shared.launch(&slot, waiting)),
        };
        let launched = waiting.await;
        let run_id = slot.run_id_string();
        self.shared.release(slot);
        launched?;
        Ok(run_id)
    }

    /// Starts a run whose start event carries `config` (in `_config`); the config is checked
    /// against every config type the workflow's steps inject before the run exists.
    pub async fn start_run_with_config<T: Event, C: serde::Serialize>(
        &self,
        thread_id: Option<&str>,
        start: T,
        config: &C,
    ) -> Result<String, EngineError> {
        let mut fields = (*crate::event::to_payload(&start)?).clone();
        let config = serde_json::to_value(config).map_err(|e| {
            EngineError::Config(crate::config::ConfigError::Agent {
                config: crate::config::short_type::<C>(),
                message: format!("it cannot be encoded: {e}"),
            })
        })?;
        match &mut fields {
            serde_json::Value::Object(m) => {
                m.insert(crate::config::CONFIG_FIELD.to_string(), config);
            }
            other => {
                *other = serde_json::json!({ crate::config::CONFIG_FIELD: config });
            }
        }
        self.start_run_named(thread_id, T::NAME, Payload::from_json(fields))
            .await
    }

    /// Starts a run with a start event given by type name and fields (JSON), e.g. from a
    /// command line. The type must be a start event declared by the workflow.
    pub async fn start_run_named(
        &self,
        thread_id: Option<&str>,
        name: &str,
        payload: Payload,
    ) -> Result<String, EngineError> {
        let (slot, applied) = {
            let ids = self.shared.ids.next_run();
            let ev = payload
                .check_json()
                .map_err(EngineError::from)
                .and_then(|size| self.shared.incoming(name, payload, size, Some(ids.start)));
            self.begin_run(thread_id, ev, ids)?
        };
        // Launched before the first await on the in-memory path (see `Shared::launch_now`);
        // the match ends before the await, so the future holds no `LaunchOutcome`.
        let waiting = match self.shared.launch_now(&slot, applied) {
            LaunchOutcome::Done(launched) => {
                let run_id = slot.run_id_string();
                self.shared.release(slot);
                launched?;
                return Ok(run_id);
            }
            LaunchOutcome::WaitsForStore(waiting) => Box::pin(self.shared.launch(&slot, waiting)),
        };
        let launched = waiting.await;
        let run_id = slot.run_id_string();
        self.shared.release(slot);
        launched?;
        Ok(run_id)
    }

    /// Runs a workflow to its end with one awaited call: starts a run in a new thread with
    /// `start` and drives its executions on the caller's task (inline when one is ready,
    /// polled together when several are), returning once the run has ended as
    /// [`Engine::wait_for_end`] sees it. No task is spawned for the run and nothing is
    /// watched, so a short run costs less than `start_run` + `wait_for_end`.
    ///
    /// Same semantics as [`Engine::start_run`]: the start event and every completion are
    /// durable before the executions they start run. Events sent to the run from other tasks
    /// meanwhile ([`Engine::send`], by the id from [`Engine::run_ids`] or a store listing) are
    /// accepted as for any run: the executions they start run elsewhere (on their own tasks,
    /// or the engine's driver), and this call returns only when those have finished too. A
    /// run that waits for an outside event keeps this call waiting (no timeout). Dropping
    /// the call's future (e.g. a `tokio::time::timeout`) drops the executions it was
    /// driving: the run stays live with them marked running, resumed only by an engine
    /// opened on a durable store — for runs that wait for outside input, use `start_run` +
    /// `send`. Returns the run id.
    pub async fn run<T: Event>(&self, start: T) -> Result<String, EngineError> {
        let size = json_size(&start)?;
        let ids = self.shared.ids.next_run();
        let ev = self.shared.incoming_named(
            T::NAME.into(),
            Payload::typed(start),
            size,
            Some(ids.start),
        )?;
        let slot = self.shared.new_run(None, &ev, ids)?;
        // Where this task drives all of the run's executions, the first one's inputs are
        // extracted in the start event's locked section (its body starts on this task).
        let shares = shares_task(&self.shared);
        let bind = if shares { Bind::Extract } else { Bind::Events };
        let input = self.shared.start_input(ev);
        let applied = self.shared.apply_with(&slot, input, Vec::new(), bind)?;
        let stored = match applied.durable {
            Pending::Ready(r) => r,
            waiting => waiting.wait().await,
        };
        if let Err(e) = stored {
            self.shared.storage_failed(&slot, &e);
            return Err(e.into());
        }
        if applied.ended {
            slot.lock().end_durable = true;
        }
        slot.bump();
        // Executions started by events sent from other tasks run elsewhere (their own tasks
        // or the engine's driver): when the driving stops before the run is quiet, wait.
        let (quiet, slot, evict) = match applied.started {
            // Most start events start one execution, which this task drives: straight to
            // the local driver (as `drive_started` would), the invocation moved once, with
            // this call's reference to the slot (it gets one back). Where the driver stops
            // with the run quiet, it may leave the run's eviction to the release below.
            Started::One(first) if shares => {
                let run = Arc::as_ptr(&slot) as usize;
                let mut back = None;
                let quiet = drive_local(
                    &self.shared,
                    Some((slot, first)),
                    None,
                    None,
                    DrivenRun::Handed {
                        run,
                        back: &mut back,
                    },
                )
                .await;
                match back {
                    Some((slot, evict)) => (quiet, slot, evict),
                    // The driver lets go of the run's last reference only through `back`.
                    None => {
                        return Err(EngineError::Core {
                            run_id: String::new(),
                            detail: "the run's driver kept no reference to its slot".into(),
                        });
                    }
                }
            }
            started => (
                drive_started(&self.shared, &slot, started, shares).await,
                slot,
                false,
            ),
        };
        if !quiet {
            slot.until_quiet().await;
        }
        let run_id = slot.run_id_string();
        if evict {
            self.shared.evict_and_release(slot);
        } else {
            self.shared.release(slot);
        }
        Ok(run_id)
    }

    /// The synchronous part of starting a run: makes its slot and applies its start event
    /// (not yet durable). Kept out of the `start_run*` futures, which stay small.
    fn begin_run(
        &self,
        thread_id: Option<&str>,
        ev: Result<Incoming, EngineError>,
        ids: RunIds,
    ) -> Result<(Arc<RunSlot>, Applied), EngineError> {
        let ev = ev?;
        let slot = self.shared.new_run(thread_id, &ev, ids)?;
        let applied = self
            .shared
            .apply_to_launch(&slot, self.shared.start_input(ev))?;
        Ok((slot, applied))
    }

    /// Lets this engine's runs delegate to `other`'s agent (its workflow's name is the
    /// `agent_class` an [`crate::AgentInTheLoopRequestEvent`] names): a request starts a run
    /// there (the child), whose end comes back as an [`crate::AgentInTheLoopResponseEvent`]
    /// or [`crate::AgentInTheLoopExceptionEvent`]. Registering makes sure of every child of
    /// that agent the runs held here still wait for — started, or its end delivered — so
    /// that after a restart (open both engines, then register) nothing between the two
    /// journals is lost. The engines may share a store or not; `other` is held weakly (keep
    /// it alive as long as runs delegate to it). An engine may delegate to itself.
    pub async fn delegate_to(&self, other: &Engine) {
        self.shared.add_delegate(&other.shared).await;
    }

    /// The children of a run this engine holds: each one's number, agent, run id, whether
    /// it is awaited, detached, ended or abandoned (see [`ChildView`]).
    pub fn children(&self, run_id: &str) -> Result<Vec<ChildView>, EngineError> {
        let slot = self.shared.slot(run_id)?;
        let st = slot.lock();
        Ok(child_views(&st.run, |seq, _| st.payloads.get(seq as usize)))
    }

    /// The effects a run's bodies journaled (`StepCtx::effect`), in the order recorded: each
    /// call's execution, attempt, name, content key, input, result or failure and timing.
    /// In memory, a run's effects are dropped when it ends; the embedded store keeps them.
    pub async fn effects(
        &self,
        run_id: &str,
    ) -> Result<Vec<crate::backend::EffectRecord>, EngineError> {
        Ok(self.shared.backend.effects(run_id).wait().await?)
    }

    /// Sends an event to a live run; returns its id once it is durable. An event for a run
    /// that has ended is kept as after-stop evidence and never dispatched.
    pub async fn send<T: Event>(&self, run_id: &str, event: T) -> Result<EventId, EngineError> {
        let slot = self.shared.slot_or_ended(run_id).await?;
        let size = json_size(&event)?;
        let ev = self
            .shared
            .incoming_named(T::NAME.into(), Payload::typed(event), size, None)?;
        let id = ev.id;
        self.shared.submit_sent(&slot, ev).await?;
        Ok(id)
    }

    /// Sends an event given by type name and fields (JSON), e.g. from a command line.
    pub async fn send_named(
        &self,
        run_id: &str,
        name: &str,
        payload: Payload,
    ) -> Result<EventId, EngineError> {
        let slot = self.shared.slot_or_ended(run_id).await?;
        let size = payload.check_json()?;
        let ev = self.shared.incoming(name, payload, size, None)?;
        let id = ev.id;
        self.shared.submit_sent(&slot, ev).await?;
        Ok(id)
    }

    /// Sends an event in its wire JSON form (DESIGN §6). Decoding is bounded (size, depth)
    /// and every failure is a typed error.
    pub async fn send_json(&self, run_id: &str, bytes: &[u8]) -> Result<EventId, EngineError> {
        let slot = self.shared.slot(run_id)?;
        let limits = DecodeLimits {
            max_bytes: self.shared.opts.max_event_bytes,
            ..DecodeLimits::default()
        };
        let env =
            EventEnvelope::decode(bytes, &self.shared.workflow.compiled().hierarchy, &limits)?;
        let id = env.event_id;
        let payload = Payload::from_json(serde_json::Value::Object(env.fields.clone()));
        let ev = match self
            .shared
            .incoming(&env.event_name, payload.clone(), bytes.len(), Some(id))
        {
            Ok(ev) => ev,
            Err(EngineError::UnknownEventType { .. }) => {
                // A foreign event: kept and classified by the sender's parent list.
                let c = env.classification();
                Incoming {
                    id,
                    ty: NewEventType::Foreign {
                        name: env.event_name.clone(),
                        kind: EventKind::from_classification(c),
                    },
                    kind: EventKind::from_classification(c),
                    name: env.event_name.clone().into(),
                    payload,
                    by: None,
                }
            }
            Err(e) => return Err(e),
        };
        self.shared.submit_sent(&slot, ev).await?;
        Ok(id)
    }

    /// Cancels a live run (DESIGN §8): it ends with a [`crate::RunCancelledEvent`] carrying
    /// `reason` (an exception: the run reports `cancelled`), its pending timers are dropped,
    /// its running bodies see [`crate::StepCtx::cancellation`] cancelled, and what they
    /// return afterwards is kept as after-stop evidence. Returns the cancellation event's id
    /// once it is durable. A run that has ended already is refused (`SAAP-E012`), an unknown
    /// one too (`SAAP-E001`).
    pub async fn cancel(&self, run_id: &str, reason: &str) -> Result<EventId, EngineError> {
        self.shared.cancel_run(run_id, reason).await
    }

    /// Resumes a run whose budget is spent ([`EngineOptions::run_budget`]; its status is
    /// `waiting_budget`): grants `raise` — each spent part it leaves `None` is granted again
    /// as the run first had it — journaled like any input, and runs the executions it
    /// releases. A run that is not paused on its budget is refused (`SAAP-E020`, ended runs
    /// included), a raise of nothing (`executions: Some(0)`) too (`SAAP-E021`).
    pub async fn resume(&self, run_id: &str, raise: Raise) -> Result<Resumed, EngineError> {
        self.shared.resume_run(run_id, raise, None).await
    }

    /// [`Engine::resume`] of the pause someone saw: only if the run has had `grants`
    /// grants ([`saap_dispatch::run::Budget::grants`], what they read), refused
    /// (`SAAP-E020`) once another resume came first. A resume that reaches a run through
    /// a message (`<agent> resume --engine nats://…`) says what its sender saw, so a
    /// message delivered twice, or two people resuming one pause, grants once.
    pub async fn resume_seen(
        &self,
        run_id: &str,
        raise: Raise,
        grants: u32,
    ) -> Result<Resumed, EngineError> {
        self.shared.resume_run(run_id, raise, Some(grants)).await
    }

    /// A consistent copy of a run's state, for inspection.
    pub fn snapshot(&self, run_id: &str) -> Option<RunSnapshot> {
        let slot = self.shared.slot(run_id).ok()?;
        Some(slot_snapshot(&slot))
    }

    /// Ids of every run this engine knows (live and ended).
    /// The run as [`Engine::snapshot`] sees it, or, when this engine does not hold it (an
    /// ended run after [`Engine::open`], or one dropped with `keep_ended_runs: false`), the
    /// store's copy rebuilt by the core without resuming it. `Ok(None)`: the store has no
    /// such run of this workflow.
    pub async fn stored_snapshot(&self, run_id: &str) -> Result<Option<RunSnapshot>, EngineError> {
        if let Some(s) = self.snapshot(run_id) {
            return Ok(Some(s));
        }
        let Some(slot) = self.shared.read_stored(run_id).await? else {
            return Ok(None);
        };
        Ok(Some(slot_snapshot(&slot)))
    }

    /// Where this engine exports its runs as traces (`EngineOptions::telemetry`), if
    /// anywhere: flush it before the process exits, or the last spans may not be sent.
    #[cfg(feature = "otel")]
    pub fn telemetry(&self) -> Option<&saap_otel::Exporter> {
        self.shared.telemetry.as_ref().map(|t| t.exporter())
    }

    /// The ids of the runs this engine holds in memory (live runs, and ended ones it ran
    /// while `keep_ended_runs` is on); [`Backend::list_runs`] lists what the store holds.
    pub fn run_ids(&self) -> Vec<String> {
        let held: Vec<Arc<RunSlot>> = {
            let runs = self.shared.runs.read().unwrap_or_else(|p| p.into_inner());
            runs.held.iter().map(|h| h.0.clone()).collect()
        };
        // A run is listed once its start event is logged, so that an id seen here can be
        // sent events: a run being made (held, its start not yet applied) would refuse them
        // as "not a start event". Slots are locked after the table's lock is let go.
        let mut ids: Vec<String> = held
            .iter()
            .filter(|slot| slot.lock().run.start_seq().is_some())
            .map(|slot| slot.run_id().to_string())
            .collect();
        ids.sort();
        ids
    }

    /// A receiver that changes whenever the run changes (for waiting without polling).
    pub fn watch(&self, run_id: &str) -> Result<watch::Receiver<u64>, EngineError> {
        Ok(self
            .shared
            .slot(run_id)?
            .version
            .get_or_init(|| watch::channel(0).0)
            .subscribe())
    }

    /// Waits until the run has ended, the event that ended it is durable, and none of its
    /// executions is still running (or the engine stopped the run after a storage failure).
    /// No timeout: wrap it in `tokio::time::timeout` when needed.
    pub async fn wait_for_end(&self, run_id: &str) -> Result<(), EngineError> {
        let slot = self.shared.slot(run_id)?;
        slot.until_quiet().await;
        self.shared.release(slot);
        Ok(())
    }

    /// Simulates a crash: the store stops accepting writes at once (what is not yet durable
    /// is lost) and is released, so another engine can open it. For tests and the chaos demo.
    pub fn halt(&self) {
        self.shared.backend.halt();
    }
}

/// The size of an event's JSON form, in bytes (an unserializable event is an error here,
/// before it enters a run).
fn slot_snapshot(slot: &RunSlot) -> RunSnapshot {
    let st = slot.lock();
    RunSnapshot {
        run_id: slot.run_id().to_string(),
        thread_id: slot.thread_id().to_string(),
        run: st.run.clone(),
        payloads: st.payloads.clone(),
        failure: st.failure.as_deref().map(String::from),
        display_by: st.displays.as_ref().map_or_else(Vec::new, |d| d.by.clone()),
    }
}

fn json_size<T: Event>(event: &T) -> Result<usize, PayloadError> {
    let mut n = crate::event::ByteCount(0);
    serde_json::to_writer(&mut n, event).map_err(|e| PayloadError::Serialize {
        name: T::NAME.to_string(),
        message: e.to_string(),
    })?;
    Ok(n.0)
}

/// Whether an execution is still running (re-exported for reports).
pub fn is_running(state: ExecState) -> bool {
    state == ExecState::Running
}
