//! Binding a started execution of a run under the run's lock: its bound events, or — where
//! its body starts on this thread — its typed inputs extracted now from the run's tables
//! (`Shared::extract_inputs`). Reuses the buffers of the run's last execution.

use super::invocation::{Invocation, bind_events, extracted};
use super::shared::Shared;
use super::slot::RunState;
use saap_dispatch::ids::Seq;
use saap_dispatch::run::Bound;
use saap_dispatch::{ExecutionId, StepIdx};

/// Turns `inv` (an execution that finished, or a new one) into the invocation of execution
/// `x`, keeping its buffers: its bound events in `inputs`, or, with `inv.extract`, its typed
/// inputs extracted now (under the run's lock, from the run's tables) into `prepared`.
pub(super) fn invocation_into(
    st: &mut RunState,
    shared: &Shared,
    x: ExecutionId,
    attempt: u32,
    inv: &mut Invocation,
) {
    if !inv.extract {
        bind_events(st, &shared.type_names, x, attempt, inv);
        return;
    }
    let RunState {
        run,
        payloads,
        scratch,
        ..
    } = st;
    let step = run.execution(x).map(|e| e.step).unwrap_or(0);
    inv.prepared = Some(shared.extract_inputs(run, step, run.bindings(x), payloads));
    extracted(inv, x, attempt, step, scratch);
}

/// [`invocation_into`] (with `inv.extract`) of the execution `x` of `step` a chain link
/// just started ([`Run::take_sole_started`]): its step's one parameter is bound to the
/// link's event at `seq`.
#[inline]
pub(super) fn invocation_linked(
    st: &mut RunState,
    shared: &Shared,
    x: ExecutionId,
    step: StepIdx,
    seq: Seq,
    inv: &mut Invocation,
) {
    let RunState {
        run,
        payloads,
        scratch,
        ..
    } = st;
    inv.prepared = Some(shared.extract_inputs(run, step, &[Bound::One(seq)], payloads));
    extracted(inv, x, 1, step, scratch);
}
