//! What a found state looks like to a user: the steps still waiting and why, event labels,
//! bound inputs and the witness trace that reaches it. Must not search.

use super::findings::{ExecRef, ExploreError, TraceAction, TraceStep, WaitReason, Waiting};
use super::model::{Act, Model, Node, ROOT};
use crate::compiled::TypeId;
use crate::ids::ExecutionId;
use crate::record::{Origin, Record, Termination};
use crate::run::{Outcome, Run};
use crate::sim::{self, Arrival};
use crate::spec::ParamKind;

impl Model {
    /// Why each step without an execution waits, in a final state.
    pub(super) fn waiting(&self, run: &Run) -> Vec<Waiting> {
        let slots = self.slots(run);
        let mut out = Vec::new();
        for (si, s) in self.spec.steps.iter().enumerate() {
            if run.executions().iter().any(|x| x.step as usize == si) {
                continue;
            }
            let base = self.slot_offset[si];
            let have = |pi: usize| slots[base + pi].len();
            let was_candidate = run
                .records()
                .iter()
                .any(|r| matches!(r, Record::Candidate { step, .. } if step as usize == si));
            let missing: Vec<String> = s
                .params
                .iter()
                .enumerate()
                .filter(|(pi, p)| p.kind == ParamKind::Required && have(*pi) == 0)
                .map(|(_, p)| p.name.clone())
                .collect();
            let short = s
                .params
                .iter()
                .enumerate()
                .find(|(pi, p)| p.kind == ParamKind::FixedList && have(*pi) < p.size as usize);
            let reason = if !missing.is_empty() {
                WaitReason::RequiredMissing { params: missing }
            } else if let Some((pi, p)) = short {
                WaitReason::FixedListShort {
                    param: p.name.clone(),
                    have: have(pi),
                    need: p.size,
                }
            } else if !was_candidate {
                WaitReason::NeverCandidate
            } else if let Some(pc) = &s.precondition {
                WaitReason::PreconditionFalse {
                    precondition: pc.name.clone(),
                }
            } else {
                // Unreachable by §4.3 (a candidate with all inputs and no precondition
                // starts); reported as never a candidate rather than hidden.
                WaitReason::NeverCandidate
            };
            out.push(Waiting {
                step: s.name.clone(),
                was_candidate,
                reason,
            });
        }
        out
    }

    /// A display label for a logged event: `Type#label` for a labelled arrival, the
    /// simulator's `Type#n` for another arrival, `Type#seq` for anything else.
    pub(super) fn event_label(&self, run: &Run, seq: u32) -> String {
        let Some(e) = run.log().get(seq as usize) else {
            return format!("?#{seq}");
        };
        let ty = run.type_name(e.ty);
        if e.origin == Origin::Outside
            && let Some(a) = self.arrivals.iter().find(|a| a.event.id == e.id)
        {
            return arrival_label(ty, a);
        }
        format!("{ty}#{seq}")
    }

    /// (parameter, bound value) for an execution.
    pub(super) fn bindings(&self, run: &Run, x: ExecutionId) -> Vec<(String, String)> {
        let Some(e) = run.execution(x) else {
            return Vec::new();
        };
        let step = &self.spec.steps[e.step as usize];
        run.bindings(x)
            .iter()
            .enumerate()
            .map(|(pi, b)| {
                let labels: Vec<String> = run
                    .bound_seqs(e.step, pi as u32, *b)
                    .iter()
                    .map(|s| self.event_label(run, *s))
                    .collect();
                let value = match step.params[pi].kind {
                    ParamKind::Required | ParamKind::Optional => labels
                        .first()
                        .cloned()
                        .unwrap_or_else(|| "none".to_string()),
                    ParamKind::List | ParamKind::FixedList => format!("[{}]", labels.join(", ")),
                };
                (step.params[pi].name.clone(), value)
            })
            .collect()
    }

    /// Replays a path and renders it.
    pub(super) fn trace(&self, path: &[Act]) -> Result<Vec<TraceStep>, ExploreError> {
        let mut st = self.initial();
        let mut out = Vec::with_capacity(path.len());
        for &act in path {
            let records_before = st.run.records().len();
            let log_before = st.run.log().len();
            let action = match act {
                Act::Arrive(i) => {
                    let a = &self.arrivals[i as usize];
                    let event = self.type_name(event_type(&a.event)).to_string();
                    TraceAction::Arrive {
                        duplicate: st.run.seq_of(&a.event.id).is_some(),
                        label: arrival_label(&event, a),
                        event,
                    }
                }
                Act::Fire => {
                    let timer = st.run.timers().iter().find(|t| {
                        t.state == crate::run::TimerState::Pending
                            && Some(t.due_ns) == st.run.next_timer_due()
                    });
                    let execution = timer.map_or(ExecutionId(0), |t| t.set_by);
                    let event = match timer.map(|t| &t.ty) {
                        Some(crate::run::NewEventType::Known(t)) => self.type_name(*t).to_string(),
                        Some(crate::run::NewEventType::Foreign { name, .. }) => name.clone(),
                        None => String::new(),
                    };
                    let step = st
                        .run
                        .execution(execution)
                        .map(|e| self.step_name(e.step).to_string())
                        .unwrap_or_default();
                    TraceAction::Fire {
                        event,
                        execution,
                        step,
                    }
                }
                Act::Cancel => TraceAction::Cancel,
                Act::Complete(x) => {
                    let step = st
                        .run
                        .execution(x)
                        .map(|e| self.step_name(e.step).to_string())
                        .unwrap_or_default();
                    match sim::outcome_for(&st.run, x) {
                        Outcome::Returned(events) => TraceAction::Complete {
                            execution: x,
                            step,
                            // Filled in after the core appended them (with their labels).
                            outputs: Vec::with_capacity(events.len()),
                        },
                        Outcome::Failed(message) => {
                            let stop_on_error = st
                                .run
                                .execution(x)
                                .map(|e| self.spec.steps[e.step as usize].stop_on_error)
                                .unwrap_or(true);
                            TraceAction::Fail {
                                execution: x,
                                step,
                                message,
                                stop_on_error,
                            }
                        }
                    }
                }
            };
            let execs_before = st.run.executions().len();
            self.apply(&mut st, act)?;
            let run = &st.run;
            let started: Vec<ExecRef> = run.executions()[execs_before..]
                .iter()
                .enumerate()
                .map(|(k, e)| {
                    let x = ExecutionId((execs_before + k) as u32);
                    let inputs = self.bindings(run, x);
                    ExecRef {
                        execution: x,
                        step: self.step_name(e.step).to_string(),
                        bindings: inputs
                            .iter()
                            .map(|(p, v)| format!("{p}={v}"))
                            .collect::<Vec<_>>()
                            .join(", "),
                        inputs,
                    }
                })
                .collect();
            let produced: Vec<String> = run.log()[log_before..]
                .iter()
                .enumerate()
                .filter(|(_, e)| matches!((e.origin, act), (Origin::Execution(o), Act::Complete(x)) if o == x))
                .map(|(k, _)| self.event_label(run, (log_before + k) as u32))
                .collect();
            let mut action = action;
            if let TraceAction::Complete { outputs, .. } = &mut action {
                *outputs = produced.clone();
            }
            let mut notes = Vec::new();
            for r in run.records().slice(records_before..) {
                match &r {
                    Record::RunTerminated { seq, by } => {
                        let name = self.event_label(run, *seq);
                        notes.push(match by {
                            Termination::Stop => format!("run stopped by {name}"),
                            Termination::Exception => format!("run ended by {name}"),
                        });
                    }
                    Record::EventAfterStop { seq, .. } => {
                        let name = self.event_label(run, *seq);
                        notes.push(format!("{name} after stop (kept as evidence)"));
                    }
                    Record::OrphanEvent { seq } => {
                        let name = self.event_label(run, *seq);
                        notes.push(format!("{name} refused: the run has not started"));
                    }
                    _ => {}
                }
            }
            let mut text = match &action {
                TraceAction::Arrive {
                    label, duplicate, ..
                } => {
                    if *duplicate {
                        format!("arrive {label} (re-delivery: duplicate dropped)")
                    } else {
                        format!("arrive {label}")
                    }
                }
                TraceAction::Complete {
                    execution,
                    step,
                    outputs,
                } => {
                    let outs = if outputs.is_empty() {
                        "(nothing)".to_string()
                    } else {
                        outputs.join(", ")
                    };
                    format!("complete {step}#{execution} → {outs}")
                }
                TraceAction::Fire {
                    event,
                    execution,
                    step,
                } => {
                    let label = run
                        .log()
                        .get(log_before)
                        .map(|_| self.event_label(run, log_before as u32))
                        .unwrap_or_else(|| event.clone());
                    format!("timer of {step}#{execution} fires → {label}")
                }
                TraceAction::Cancel => "cancel the run → RunCancelledEvent".to_string(),
                TraceAction::Fail {
                    execution,
                    step,
                    message,
                    stop_on_error,
                } => {
                    if *stop_on_error {
                        let exception = produced
                            .first()
                            .cloned()
                            .unwrap_or_else(|| "ExceptionEvent".to_string());
                        format!("fail {step}#{execution} ({message}) → {exception}")
                    } else {
                        format!("fail {step}#{execution} ({message}), run continues")
                    }
                }
            };
            if !started.is_empty() {
                let list: Vec<String> = started.iter().map(ToString::to_string).collect();
                text.push_str(&format!("; starts {}", list.join(", ")));
            }
            for n in &notes {
                text.push_str("; ");
                text.push_str(n);
            }
            out.push(TraceStep {
                text,
                action,
                started,
                notes,
            });
        }
        Ok(out)
    }
}

/// How a trace names an outside arrival: `Type#label` for a labelled one, unless the label
/// already names the type (an arrival labelled `Go` of type `Go` is `Go`, not `Go#Go`); the
/// simulator's `Type#n` for one without a label.
pub(super) fn arrival_label(ty: &str, a: &Arrival) -> String {
    let names_type = a.label == ty
        || a.label
            .strip_prefix(ty)
            .is_some_and(|rest| rest.starts_with('#'));
    if !a.labelled || names_type {
        a.label.clone()
    } else {
        format!("{ty}#{}", a.label)
    }
}

pub(super) fn event_type(e: &crate::run::NewEvent) -> TypeId {
    match e.ty {
        crate::run::NewEventType::Known(t) => t,
        crate::run::NewEventType::Foreign { .. } => 0,
    }
}

/// The actions from the root (node 0) to node `id`.
pub(super) fn path_to(nodes: &[Node], mut id: u32) -> Vec<Act> {
    let mut out = Vec::new();
    while id != 0 && id != ROOT {
        let n = nodes[id as usize];
        out.push(n.act);
        id = n.parent;
    }
    out.reverse();
    out
}
