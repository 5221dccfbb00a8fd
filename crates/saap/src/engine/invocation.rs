//! A started execution on its way to its body ([`Invocation`], [`Started`]): binding its
//! inputs from what the core decided (the bound events, or the step's typed inputs
//! extracted under the run's lock), with buffers reused from the run's last execution.
//! Must not decide what runs: the core started it; this only gathers its inputs.

use super::names::type_name;
use super::slot::{RunState, SPARE_SLOT_MAX_EVENTS, Scratch};
use crate::params::{BoundEvent, EventName, OutEvent};
use crate::workflow::StepFuture;
use saap_dispatch::ids::Seq;
use saap_dispatch::run::Bound;
use saap_dispatch::{ExecutionId, StepIdx};

/// A started execution, ready to run.
pub(crate) struct Invocation {
    pub(super) execution: ExecutionId,
    pub(super) attempt: u32,
    pub(super) step: StepIdx,
    pub(super) inputs: Vec<Vec<BoundEvent>>,
    /// An empty vector for the step's outputs (recycled from an earlier execution).
    pub(super) outs: Vec<OutEvent>,
    /// Its inputs are bound (else only `execution` is set: see `Shared::apply_to_launch`).
    pub(super) bound: bool,
    /// Bind by extracting the typed inputs under the run's lock into `prepared` (the local
    /// driver, which starts the body on this thread), not into `inputs`.
    pub(super) extract: bool,
    /// With `extract`: the body run holding the typed inputs, or why they could not be
    /// extracted (the step's failure).
    pub(super) prepared: Option<Result<StepFuture, String>>,
    /// When its body started (nanoseconds since the Unix epoch), read only when the engine
    /// exports its runs' traces (`EngineOptions::telemetry`); 0 otherwise.
    #[cfg_attr(not(feature = "otel"), allow(dead_code))]
    pub(super) started_ns: u64,
}

impl Invocation {
    /// An invocation to bind an execution into (no buffers yet).
    pub(super) fn empty() -> Invocation {
        Invocation {
            execution: ExecutionId(0),
            attempt: 1,
            step: 0,
            inputs: Vec::new(),
            outs: Vec::new(),
            bound: false,
            extract: false,
            prepared: None,
            started_ns: 0,
        }
    }
}

/// The executions an input started: usually none or one, so no vector for those.
#[derive(Default)]
pub(crate) enum Started {
    #[default]
    None,
    One(Invocation),
    Many(Vec<Invocation>),
}

impl Started {
    pub(super) fn push(&mut self, inv: Invocation) {
        *self = match std::mem::take(self) {
            Started::None => Started::One(inv),
            Started::One(first) => Started::Many(vec![first, inv]),
            Started::Many(mut v) => {
                v.push(inv);
                Started::Many(v)
            }
        };
    }
    pub(super) fn len(&self) -> usize {
        match self {
            Started::None => 0,
            Started::One(_) => 1,
            Started::Many(v) => v.len(),
        }
    }
    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl IntoIterator for Started {
    type Item = Invocation;
    type IntoIter =
        std::iter::Chain<std::option::IntoIter<Invocation>, std::vec::IntoIter<Invocation>>;
    fn into_iter(self) -> Self::IntoIter {
        match self {
            Started::None => None.into_iter().chain(Vec::new()),
            Started::One(inv) => Some(inv).into_iter().chain(Vec::new()),
            Started::Many(v) => None.into_iter().chain(v),
        }
    }
}

/// Largest buffer (elements) kept for reuse by the run's next execution: a fan-out of up
/// to this many outputs reuses its vectors from one run to the next (a recycled slot keeps
/// them), at most a few KiB each.
pub(super) const SPARE_MAX: usize = SPARE_SLOT_MAX_EVENTS;

pub(super) fn reusable_inputs(spare: &[Vec<BoundEvent>]) -> bool {
    spare.len() <= 16
        && spare
            .iter()
            .all(|v| v.is_empty() && v.capacity() <= SPARE_MAX)
}

pub(super) fn invocation(
    st: &mut RunState,
    names: &[EventName],
    x: ExecutionId,
    attempt: u32,
) -> Invocation {
    let mut inv = Invocation {
        execution: x,
        attempt,
        step: 0,
        // The buffers of the run's last finished execution, when there are (no allocation).
        inputs: st
            .scratch
            .as_mut()
            .map(|s| std::mem::take(&mut s.spare_inputs))
            .unwrap_or_default(),
        outs: Vec::new(),
        bound: false,
        extract: false,
        prepared: None,
        started_ns: 0,
    };
    bind_events(st, names, x, attempt, &mut inv);
    inv
}

/// The rest of an invocation whose inputs were extracted into `inv.prepared`.
#[inline(always)]
pub(super) fn extracted(
    inv: &mut Invocation,
    x: ExecutionId,
    attempt: u32,
    step: StepIdx,
    scratch: &mut Option<Box<Scratch>>,
) {
    inv.execution = x;
    inv.attempt = attempt;
    inv.step = step;
    inv.bound = true;
    if inv.outs.capacity() == 0
        && let Some(s) = scratch
    {
        // A swap, not a take: `inv.outs` holds nothing to drop, and the spare gets the
        // empty vector `take` would have made.
        std::mem::swap(&mut inv.outs, &mut s.spare_outs);
    }
}

/// Binds execution `x`'s events into `inv.inputs` (see [`invocation_into`]). Exact sizes
/// for new buffers: a vector grown by pushing starts at room for four.
pub(super) fn bind_events(
    st: &mut RunState,
    names: &[EventName],
    x: ExecutionId,
    attempt: u32,
    inv: &mut Invocation,
) {
    let RunState {
        run,
        payloads,
        scratch,
        ..
    } = st;
    let step = run.execution(x).map(|e| e.step).unwrap_or(0);
    let log = run.log();
    let bindings = run.bindings(x);
    let inputs = &mut inv.inputs;
    if inputs.len() != bindings.len() {
        inputs.truncate(bindings.len());
        inputs.reserve_exact(bindings.len() - inputs.len());
        inputs.resize_with(bindings.len(), Vec::new);
    }
    let bound = |seq: Seq| BoundEvent {
        id: log[seq as usize].id,
        name: type_name(names, log[seq as usize].ty),
        payload: payloads[seq as usize].clone(),
    };
    for (pi, (b, events)) in bindings.iter().zip(inputs.iter_mut()).enumerate() {
        events.clear();
        match *b {
            Bound::Nothing => {}
            // A required or optional parameter (most of them): no slice to go through.
            Bound::One(seq) => {
                events.reserve_exact(1);
                events.push(bound(seq));
            }
            Bound::First(_) => {
                let seqs = run.bound_seqs(step, pi as u32, *b);
                events.reserve_exact(seqs.len());
                events.extend(seqs.iter().map(|&seq| bound(seq)));
            }
        }
    }
    inv.execution = x;
    inv.attempt = attempt;
    inv.step = step;
    inv.bound = true;
    if inv.outs.capacity() == 0
        && let Some(s) = scratch
    {
        inv.outs = std::mem::take(&mut s.spare_outs);
    }
}
