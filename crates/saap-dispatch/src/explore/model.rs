//! The explored model ([`Model`]): the spec with its arrivals, a state (a run and the
//! arrivals not yet delivered), the actions enabled in a state and how one is applied —
//! always through the real dispatch core. Must not search: `search` does.

use super::findings::{ExploreError, ExploreOptions};
use crate::compiled::{CompiledSpec, TypeId};
use crate::ids::{ExecutionId, FastMap, StepIdx, run_key};
use crate::run::{AppendError, DeclaredConditions, EventTy, Outcome, Run, RunStatus};
use crate::sim::{self, Arrival};
use std::cell::RefCell;
use std::sync::Arc;

/// An explored action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Act {
    Arrive(u32),
    Complete(ExecutionId),
    /// The earliest pending timer fires (timers fire in the order they were set).
    Fire,
    /// A cancellation arrives ([`ExploreOptions::cancel`]).
    Cancel,
}

/// A kept state: the action that first reached it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Node {
    pub(super) parent: u32,
    pub(super) act: Act,
    pub(super) depth: u32,
}

pub(super) const ROOT: u32 = u32::MAX;

#[derive(Clone)]
pub(super) struct State {
    pub(super) run: Run,
    /// Arrival indexes not delivered yet, ascending.
    pub(super) remaining: Vec<u32>,
}

/// The cancellation an explored run receives: `RunCancelledEvent`, an exception whether or
/// not the workflow declares it (as the engine sends it).
fn cancellation() -> crate::run::NewEvent {
    use saap_protocol::hierarchy::names::{RUN_CANCELLED_EVENT, RUN_CANCELLED_LINEAGE};
    let kind = crate::compiled::EventKind::from_classification(
        saap_protocol::Classification::from_parent_event_names(RUN_CANCELLED_LINEAGE),
    );
    crate::run::NewEvent {
        id: crate::ids::counter_event_id(u64::MAX),
        ty: crate::run::NewEventType::Foreign {
            name: RUN_CANCELLED_EVENT.to_string(),
            kind,
        },
    }
}

/// The spec, its resolved arrivals and precomputed tables.
pub(super) struct Model {
    pub(super) spec: Arc<CompiledSpec>,
    pub(super) arrivals: Vec<Arrival>,
    /// Per arrival: the index of the first arrival with the same event id.
    pub(super) first_of_id: Vec<u32>,
    /// Per arrival: its symmetry class for permuted delivery (same id, or same type
    /// without a label).
    pub(super) class: Vec<u32>,
    /// Per step: offset of its first parameter in the flattened slot list.
    pub(super) slot_offset: Vec<usize>,
    pub(super) slots: usize,
    /// [`Model::invisible`] by (step, execution number of that step).
    pub(super) invisible_cache: RefCell<FastMap<(StepIdx, u32), Option<bool>>>,
}

impl Model {
    pub(super) fn new(spec: Arc<CompiledSpec>) -> Model {
        let arrivals = sim::arrivals(&spec);
        let mut first_of_id = Vec::with_capacity(arrivals.len());
        let mut class = Vec::with_capacity(arrivals.len());
        for (i, a) in arrivals.iter().enumerate() {
            let first = arrivals[..i]
                .iter()
                .position(|b| b.event.id == a.event.id)
                .unwrap_or(i) as u32;
            first_of_id.push(first);
            let c = if a.labelled {
                first
            } else {
                arrivals[..i]
                    .iter()
                    .position(|b| !b.labelled && b.event.ty == a.event.ty)
                    .unwrap_or(i) as u32
            };
            class.push(c);
        }
        let mut slot_offset = Vec::with_capacity(spec.steps.len());
        let mut slots = 0;
        for s in &spec.steps {
            slot_offset.push(slots);
            slots += s.params.len();
        }
        Model {
            spec,
            arrivals,
            first_of_id,
            class,
            slot_offset,
            slots,
            invisible_cache: RefCell::default(),
        }
    }

    pub(super) fn initial(&self) -> State {
        State {
            run: Run::new(self.spec.clone(), run_key(sim::SIM_RUN_ID)),
            remaining: (0..self.arrivals.len() as u32).collect(),
        }
    }

    pub(super) fn step_name(&self, step: StepIdx) -> &str {
        &self.spec.steps[step as usize].name
    }

    pub(super) fn type_name(&self, t: TypeId) -> &str {
        &self.spec.types[t as usize].name
    }

    /// Applies an action through the core.
    pub(super) fn apply(&self, st: &mut State, act: Act) -> Result<(), ExploreError> {
        let mut pre = DeclaredConditions;
        match act {
            Act::Arrive(i) => {
                st.remaining.retain(|&r| r != i);
                let a = &self.arrivals[i as usize];
                match st.run.append(a.event.clone(), &mut pre) {
                    Ok(_) | Err(AppendError::RunNotStarted { .. }) => {}
                    Err(e) => {
                        return Err(ExploreError::Core {
                            action: format!("arrive {}", a.label),
                            message: e.to_string(),
                        });
                    }
                }
            }
            Act::Complete(x) => {
                let attempt = st.run.execution(x).map(|e| e.attempt).unwrap_or(1);
                let outcome = sim::outcome_for(&st.run, x);
                st.run
                    .complete(x, attempt, outcome, &mut pre)
                    .map_err(|e| ExploreError::Core {
                        action: format!("complete {x}"),
                        message: e.to_string(),
                    })?;
                let timers = sim::timers_for(&st.run, x);
                if !timers.is_empty() {
                    st.run.schedule(x, timers).map_err(|e| ExploreError::Core {
                        action: format!("complete {x} (its timers)"),
                        message: e.to_string(),
                    })?;
                }
            }
            Act::Fire => {
                sim::fire_next_timer(&mut st.run, &mut pre);
            }
            Act::Cancel => {
                st.run
                    .append(cancellation(), &mut pre)
                    .map_err(|e| ExploreError::Core {
                        action: "cancel".to_string(),
                        message: e.to_string(),
                    })?;
            }
        }
        st.run.take_started();
        Ok(())
    }

    /// Whether completing `x` appends nothing a step consumes and nothing terminal
    /// (reduction 2). Also returns whether it appends anything at all. One that sets timers
    /// is not invisible: their firing is an action it enables, so it cannot be moved later.
    pub(super) fn invisible(&self, run: &Run, x: ExecutionId) -> Option<bool> {
        let step = run.execution(x)?.step;
        // The outcome depends only on the step and which of its executions this is.
        let nth = run.executions()[..=x.0 as usize]
            .iter()
            .filter(|e| e.step == step)
            .count() as u32;
        if let Some(v) = self.invisible_cache.borrow().get(&(step, nth)) {
            return *v;
        }
        let v = self.invisible_uncached(run, x, step);
        self.invisible_cache.borrow_mut().insert((step, nth), v);
        v
    }

    pub(super) fn invisible_uncached(
        &self,
        run: &Run,
        x: ExecutionId,
        step: StepIdx,
    ) -> Option<bool> {
        if !sim::timers_for(run, x).is_empty() {
            return None;
        }
        match sim::outcome_for(run, x) {
            Outcome::Failed(_) => (!self.spec.steps[step as usize].stop_on_error).then_some(false),
            Outcome::Returned(events) => {
                let quiet = events.iter().all(|e| match &e.ty {
                    crate::run::NewEventType::Known(t) => {
                        let kind = self.spec.types[*t as usize].kind;
                        !kind.is_terminal()
                            && (!kind.is_control() || self.spec.consumers(*t).is_empty())
                    }
                    crate::run::NewEventType::Foreign { kind, .. } => !kind.is_terminal(),
                });
                quiet.then_some(!events.is_empty())
            }
        }
    }

    /// The actions to explore from a state, and whether a reduction chose them.
    pub(super) fn enabled(&self, st: &State, opts: &ExploreOptions) -> (Vec<Act>, bool) {
        let running: Vec<ExecutionId> = st.run.running().collect();
        // Time and cancellation come from outside, at any point while the run is live.
        let live = st.run.status() == RunStatus::Live;
        let outside: Vec<Act> = [
            (live && st.run.next_timer_due().is_some()).then_some(Act::Fire),
            (live && opts.cancel).then_some(Act::Cancel),
        ]
        .into_iter()
        .flatten()
        .collect();
        if opts.partial_order {
            if st.run.is_terminated() {
                // Reduction 3: after the end, one fixed order.
                let one = running
                    .first()
                    .map(|x| Act::Complete(*x))
                    .or_else(|| st.remaining.first().map(|i| Act::Arrive(*i)));
                let total = running.len() + usize::from(!st.remaining.is_empty());
                return (one.into_iter().collect(), total > 1);
            }
            if let Some(x) = running
                .iter()
                .find(|x| self.invisible(&st.run, **x).is_some())
            {
                // A cancellation does not commute with it (it ends the run, so the
                // completion's outputs come after the stop, and it can leave nothing to
                // cancel): both orders are explored.
                let mut acts = vec![Act::Complete(*x)];
                if outside.contains(&Act::Cancel) {
                    acts.push(Act::Cancel);
                }
                return (
                    acts,
                    running.len() > 1 || !st.remaining.is_empty() || !outside.is_empty(),
                );
            }
            // Reduction 4: a re-delivery of an event already in the log is a no-op.
            let candidates: &[u32] = if opts.permute_arrivals {
                &st.remaining
            } else {
                &st.remaining[..st.remaining.len().min(1)]
            };
            if let Some(i) = candidates.iter().find(|i| {
                st.run
                    .seq_of(&self.arrivals[**i as usize].event.id)
                    .is_some()
            }) {
                return (vec![Act::Arrive(*i)], true);
            }
        }
        let mut acts = Vec::new();
        if opts.permute_arrivals {
            for (k, &i) in st.remaining.iter().enumerate() {
                let c = self.class[i as usize];
                let earlier_same = opts.partial_order
                    && st.remaining[..k]
                        .iter()
                        .any(|&j| self.class[j as usize] == c);
                if !earlier_same {
                    acts.push(Act::Arrive(i));
                }
            }
        } else if let Some(&i) = st.remaining.first() {
            acts.push(Act::Arrive(i));
        }
        acts.extend(running.into_iter().map(Act::Complete));
        let timer = outside.contains(&Act::Fire);
        if timer {
            acts.push(Act::Fire);
        }
        // A cancellation may come at any point while the run is live, also when nothing
        // else can move it (that state is still final: a stall, see `search`).
        if outside.contains(&Act::Cancel) {
            acts.push(Act::Cancel);
        }
        (acts, false)
    }

    /// The dispatched events each (step, parameter) can bind, in arrival order — what the
    /// core's readiness and binding read.
    pub(super) fn slots(&self, run: &Run) -> Vec<Vec<u32>> {
        let mut slots = Vec::new();
        self.fill_slots(run, &mut slots);
        slots
    }

    /// [`Model::slots`] into reused buffers.
    pub(super) fn fill_slots(&self, run: &Run, slots: &mut Vec<Vec<u32>>) {
        slots.resize_with(self.slots, Vec::new);
        slots.iter_mut().for_each(Vec::clear);
        let end = match run.status() {
            RunStatus::NotStarted => return,
            RunStatus::Live => u32::MAX,
            RunStatus::Terminated { by } => by,
        };
        let mut started = false;
        for (seq, e) in run.log().iter().enumerate() {
            let seq = seq as u32;
            if seq >= end {
                break;
            }
            if !e.kind.is_control() {
                continue;
            }
            if !started {
                // Control events before the first start event were refused as orphans.
                if !e.kind.is_start() {
                    continue;
                }
                started = true;
            }
            if e.kind.is_terminal() {
                continue;
            }
            if let EventTy::Known(t) = e.ty {
                for &(step, param) in self.spec.consumers(t) {
                    slots[self.slot_offset[step as usize] + param as usize].push(seq);
                }
            }
        }
    }
}
