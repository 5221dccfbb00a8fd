//! A fork's reuse of the original's outputs after its fork point (issue 23 §2): an
//! execution the fork starts whose step and bound inputs (type names and fields, per
//! parameter) equal those of an execution the original completed after the fork's copied
//! entries takes that execution's recorded outputs instead of running its body; the rest run
//! live. [`ForkReuse`] is made by `Engine::fork` from the original's journal (and again from
//! the fork's own journal when a live fork is rebuilt: at open, or taken over on NATS) and
//! held by the fork's run state; the engine asks it before running a body and notes on the
//! completion's journal entry which execution of the original it came from.
//!
//! Must not decide what runs (the core does, from the events either way) and must not read
//! or write a store. An execution that set timers or started child runs is not reused (its
//! effects on the run's tree are not its outputs alone), nor one that failed.

use crate::backend::{StoredInput, StoredRun};
use crate::event::Payload;
use crate::params::{BoundEvent, OutEvent};
use saap_dispatch::{EventId, ExecutionId, ParamIdx, Run, StepIdx};
use std::borrow::Cow;
use std::collections::HashMap;

/// The original's completed executions a fork may take outputs from, and which of the
/// fork's executions took them.
#[derive(Debug)]
pub(crate) struct ForkReuse {
    recorded: Vec<Recorded>,
    /// The fork's executions that took recorded outputs: (execution, the original's).
    served: Vec<(ExecutionId, u32)>,
}

/// One execution of the original, completed after the fork's copied entries.
#[derive(Debug)]
struct Recorded {
    /// Its id in the original run.
    original: u32,
    step: StepIdx,
    /// Per parameter, the bound events: type name and fields.
    inputs: Vec<Vec<(String, Payload)>>,
    /// What it returned: type name and fields, in order.
    outputs: Vec<(String, Payload)>,
    /// Taken by an execution of the fork (each is reused at most once).
    taken: bool,
}

impl ForkReuse {
    /// The executions of `stored` (rebuilt through the core as `run`, its events' fields in
    /// `payloads`) completed in its journal entries from `first_entry` on that returned
    /// events and nothing else; `None` if there are none.
    pub(crate) fn new(
        stored: &StoredRun,
        run: &Run,
        payloads: &HashMap<EventId, Payload>,
        first_entry: usize,
    ) -> Option<ForkReuse> {
        let recorded: Vec<Recorded> = stored
            .journal
            .iter()
            .skip(first_entry)
            .filter_map(|entry| match &entry.input {
                StoredInput::Complete {
                    execution,
                    outputs: Some(outputs),
                    error: None,
                    timers,
                    children,
                    ..
                } if timers.is_empty() && children.is_empty() => {
                    recorded(run, payloads, *execution, outputs)
                }
                _ => None,
            })
            .collect();
        (!recorded.is_empty()).then(|| ForkReuse {
            recorded,
            served: Vec::new(),
        })
    }

    /// The outputs of the first execution of the original not taken yet whose step is
    /// `step` and whose bound inputs equal `inputs`, noted as taken by the fork's
    /// `execution`; `None` when there is none (the body runs).
    pub(crate) fn take(
        &mut self,
        execution: ExecutionId,
        step: StepIdx,
        inputs: &[Vec<BoundEvent>],
    ) -> Option<Vec<OutEvent>> {
        let r = self
            .recorded
            .iter_mut()
            .find(|r| !r.taken && r.step == step && same_inputs(&r.inputs, inputs))?;
        r.taken = true;
        self.served.push((execution, r.original));
        Some(
            r.outputs
                .iter()
                .map(|(name, payload)| OutEvent {
                    name: Cow::Owned(name.clone()),
                    payload: payload.clone(),
                    due_ns: None,
                })
                .collect(),
        )
    }

    /// Notes the original's execution `original` as taken (a fork's journal says so: its
    /// outputs were reused before a restart).
    pub(crate) fn taken(&mut self, original: u32) {
        if let Some(r) = self.recorded.iter_mut().find(|r| r.original == original) {
            r.taken = true;
        }
    }

    /// The execution of the original whose outputs the fork's `execution` took, if any.
    pub(crate) fn served(&self, execution: ExecutionId) -> Option<u32> {
        self.served
            .iter()
            .rev()
            .find(|(x, _)| *x == execution)
            .map(|&(_, original)| original)
    }
}

/// Execution `x` of the original as a [`Recorded`]: its step and bound events from the
/// rebuilt run, its outputs from its completion's entry.
fn recorded(
    run: &Run,
    payloads: &HashMap<EventId, Payload>,
    x: u32,
    outputs: &[crate::backend::StoredEvent],
) -> Option<Recorded> {
    let step = run.execution(ExecutionId(x))?.step;
    let mut inputs = Vec::new();
    for (p, bound) in run.bindings(ExecutionId(x)).iter().enumerate() {
        let mut events = Vec::new();
        for &seq in run.bound_seqs(step, p as ParamIdx, *bound) {
            let ev = run.log().get(seq as usize)?;
            let payload = payloads.get(&ev.id)?;
            events.push((run.type_name(ev.ty).to_string(), payload.clone()));
        }
        inputs.push(events);
    }
    Some(Recorded {
        original: x,
        step,
        inputs,
        outputs: outputs
            .iter()
            .map(|e| (e.name.clone(), e.payload.clone()))
            .collect(),
        taken: false,
    })
}

/// Whether the fork's bound events have the recorded type names and fields, parameter by
/// parameter and in order. Fields are compared as JSON: a payload that cannot be written
/// as JSON matches nothing.
fn same_inputs(recorded: &[Vec<(String, Payload)>], bound: &[Vec<BoundEvent>]) -> bool {
    recorded.len() == bound.len()
        && recorded.iter().zip(bound).all(|(r, b)| {
            r.len() == b.len()
                && r.iter().zip(b).all(|((name, fields), ev)| {
                    *name == *ev.name
                        && matches!(
                            (fields.try_json(), ev.payload.try_json()),
                            (Ok(a), Ok(b)) if a == b
                        )
                })
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::params::EventName;
    use serde_json::json;

    fn bound(name: &'static str, fields: serde_json::Value) -> BoundEvent {
        BoundEvent {
            id: saap_dispatch::EventId::from_bytes([0; 12]),
            name: EventName::Static(name),
            payload: Payload::from_json(fields),
        }
    }

    fn table() -> ForkReuse {
        let rec = |original, n| Recorded {
            original,
            step: 1,
            inputs: vec![vec![("Hint".into(), Payload::from_json(json!({ "n": n })))]],
            outputs: vec![("Noted".into(), Payload::from_json(json!({ "n": n * 10 })))],
            taken: false,
        };
        ForkReuse {
            recorded: vec![rec(3, 1), rec(5, 1)],
            served: Vec::new(),
        }
    }

    #[test]
    fn an_execution_with_the_recorded_step_and_inputs_takes_the_first_untaken_outputs() {
        let mut t = table();
        let inputs = [vec![bound("Hint", json!({ "n": 1 }))]];
        let outs = t.take(ExecutionId(2), 1, &inputs).unwrap();
        assert_eq!(
            (outs[0].name.as_ref(), outs[0].payload.json()),
            ("Noted", &json!({ "n": 10 }))
        );
        assert_eq!(t.served(ExecutionId(2)), Some(3));
        // The second identical execution takes the second recording, a third none.
        assert!(t.take(ExecutionId(4), 1, &inputs).is_some());
        assert_eq!(t.served(ExecutionId(4)), Some(5));
        assert!(t.take(ExecutionId(6), 1, &inputs).is_none());
        assert_eq!(t.served(ExecutionId(6)), None);
    }

    #[test]
    fn other_fields_another_type_or_another_step_run_live() {
        let mut t = table();
        assert!(
            t.take(ExecutionId(2), 1, &[vec![bound("Hint", json!({ "n": 2 }))]])
                .is_none()
        );
        assert!(
            t.take(
                ExecutionId(2),
                1,
                &[vec![bound("Other", json!({ "n": 1 }))]]
            )
            .is_none()
        );
        assert!(
            t.take(ExecutionId(2), 0, &[vec![bound("Hint", json!({ "n": 1 }))]])
                .is_none()
        );
        assert!(t.take(ExecutionId(2), 1, &[vec![]]).is_none());
        assert!(t.take(ExecutionId(2), 1, &[]).is_none());
        assert_eq!(t.served(ExecutionId(2)), None);
    }
}
