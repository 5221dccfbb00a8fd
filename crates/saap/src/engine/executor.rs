//! Where a started execution may run instead of on the engine's tasks: the
//! [`StepExecutor`] a distributed engine sets (the `nats` engine hands bodies to a work
//! queue), the [`Work`] it is given, and the [`LocalSlot`] that keeps a body here. Plain
//! types and the conversion of an invocation into work; the engine calls in, never the
//! reverse.

use super::invocation::Invocation;
use super::slot::RunSlot;
use crate::event::Payload;
use crate::params::BoundEvent;
use saap_dispatch::{ExecutionId, StepIdx};
use std::sync::Arc;

/// A started execution handed to a [`StepExecutor`]: everything its body needs, so that it
/// can run on a process that does not hold the run (DESIGN §7; `crate::nats` sends it through
/// a work queue). The completion comes back through [`Engine::complete_work`].
#[derive(Clone)]
pub struct Work {
    pub run_id: Arc<str>,
    pub thread_id: Arc<str>,
    pub execution: ExecutionId,
    pub attempt: u32,
    pub step: StepIdx,
    /// Per parameter, the bound events (ids, type names, payloads).
    pub inputs: Vec<Vec<BoundEvent>>,
    /// The fields of the run's start event (its `_config` included).
    pub start: Payload,
    /// `CompiledSpec::fingerprint` of the workflow that started the execution: a body runs
    /// only on a process with the same workflow.
    pub fingerprint: u64,
}

/// Runs started executions somewhere else than on the task that started them. Set with
/// [`Engine::set_executor`]; without one, bodies run on the engine's tasks.
pub trait StepExecutor: Send + Sync {
    /// Asked first for every started execution: a [`LocalSlot`] runs its body here, on the
    /// engine's task, as without an executor (the slot is dropped when the body ends);
    /// `None` hands it to [`StepExecutor::execute`]. Default: never here.
    fn run_here(&self) -> Option<LocalSlot> {
        None
    }

    /// Takes one started execution. Must not block: hand it off and return.
    fn execute(&self, work: Work);

    /// Run `run_id` was cancelled: the bodies of its executions handed off may still run
    /// elsewhere; tell them (`StepCtx::cancellation`). Must not block. Default: nothing.
    fn run_cancelled(&self, _run_id: &str) {}
}

/// What a body run away from its run used: model tokens, and cost in millionths of the
/// price table's currency.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WorkUsage {
    pub tokens: u64,
    pub cost_micros: u64,
}

/// One of an executor's local slots, held while a body runs on the engine's task (see
/// [`StepExecutor::run_here`]); dropping it frees the slot.
pub struct LocalSlot {
    _guard: Box<dyn Send + Sync>,
}

impl LocalSlot {
    /// A slot that frees itself when `guard` is dropped.
    pub fn new(guard: impl Send + Sync + 'static) -> Self {
        LocalSlot {
            _guard: Box::new(guard),
        }
    }
}

/// The [`Work`] of an invocation of run `slot`.
pub(super) fn work(slot: &RunSlot, inv: Invocation) -> Work {
    let (start, fingerprint) = {
        let st = slot.lock();
        let start = st
            .run
            .start_seq()
            .and_then(|s| st.payloads.get(s as usize).cloned())
            .unwrap_or_else(|| Payload::from_json(serde_json::Value::Null));
        (start, st.run.spec().fingerprint())
    };
    Work {
        run_id: slot.run_id().clone(),
        thread_id: slot.thread_id().clone(),
        execution: inv.execution,
        attempt: inv.attempt,
        step: inv.step,
        inputs: inv.inputs,
        start,
        fingerprint,
    }
}
