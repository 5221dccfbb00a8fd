//! Explanations: *why a step fired, fired more than once, or never fired*, read off a run's
//! decision records (DESIGN §1, the debugger's `explain`). Works on any [`Run`]: a
//! simulated one, or one rebuilt from a recorded [`crate::replay::History`].
//!
//! Reads records only; decides nothing.

use crate::compiled::CompiledSpec;
use crate::ids::{ExecutionId, StepIdx};
use crate::record::{Origin, Record};
use crate::render::{EventLabels, skip_text};
use crate::run::{Bound, Run, RunStatus};
use crate::spec::ParamKind;
use serde::Serialize;

/// What happened to one step in a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepExplanation {
    pub step: String,
    /// How many times it ran.
    pub executions: usize,
    /// One entry per execution, in start order.
    pub fired: Vec<Firing>,
    /// Each time it was a candidate and did not run.
    pub skipped: Vec<Skip>,
    /// When it never ran: what it still lacked when the run ended (or at the end of the log).
    pub still_missing: Vec<String>,
    /// A one-sentence verdict.
    pub summary: String,
    /// What to change, when the behaviour matches a known trap.
    pub advice: Vec<String>,
}

/// One execution and why it happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Firing {
    pub execution: String,
    pub trigger: String,
    pub trigger_from: String,
    /// `param=value` for every parameter.
    pub bindings: Vec<String>,
    /// `Some(true)` when a precondition was evaluated and held.
    pub precondition: Option<bool>,
    /// Why this execution was a new input set compared with the previous one of the step.
    pub new_because: Vec<String>,
}

/// A candidacy that did not lead to an execution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skip {
    pub trigger: String,
    pub reason: String,
}

fn origin_text(run: &Run, origin: Origin) -> String {
    match origin {
        Origin::Outside => "outside".to_string(),
        Origin::Execution(x) => match run.execution(x) {
            Some(e) => format!("{} {x}", run.spec().steps[e.step as usize].name),
            None => x.to_string(),
        },
    }
}

fn bound_text(run: &Run, labels: &EventLabels, step: StepIdx, param: usize, b: Bound) -> String {
    let spec = run.spec();
    let p = &spec.steps[step as usize].params[param];
    let seqs = run.bound_seqs(step, param as u32, b);
    let names: Vec<&str> = seqs.iter().map(|s| labels.get(*s)).collect();
    match p.kind {
        ParamKind::Required | ParamKind::Optional => {
            names.first().copied().unwrap_or("none").to_string()
        }
        _ => format!("[{}]", names.join(", ")),
    }
}

/// Explains one step of a run.
pub fn explain_step(run: &Run, labels: &EventLabels, step: StepIdx) -> StepExplanation {
    let spec = run.spec();
    let s = &spec.steps[step as usize];
    let mut fired = Vec::new();
    let mut skipped = Vec::new();
    let mut previous: Option<ExecutionId> = None;
    let mut advice = Vec::new();
    for (i, r) in run.records().iter().enumerate() {
        match &r {
            Record::ExecutionStarted {
                execution,
                step: st,
                trigger,
            } if *st == step => {
                let x = *execution;
                let bindings = run.bindings(x);
                let precondition = run.records().slice(..i).iter().rev().find_map(|r| match r {
                    Record::PreconditionEvaluated {
                        trigger: t,
                        step: st2,
                        result,
                    } if t == *trigger && st2 == step => Some(result),
                    _ => None,
                });
                let mut new_because = Vec::new();
                if let Some(prev) = previous {
                    let before = run.bindings(prev);
                    for (pi, p) in s.params.iter().enumerate() {
                        if before[pi] == bindings[pi] {
                            continue;
                        }
                        let (a, b) = (
                            bound_text(run, labels, step, pi, before[pi]),
                            bound_text(run, labels, step, pi, bindings[pi]),
                        );
                        let why = match p.kind {
                            ParamKind::Optional => {
                                "an optional parameter does not block (R1) but re-triggers its step when its event arrives (R2)"
                            }
                            ParamKind::List => {
                                "a list parameter re-runs its step on every arrival (R3)"
                            }
                            ParamKind::Required => {
                                "a new event for a required parameter re-triggers the step with it (R2)"
                            }
                            ParamKind::FixedList => "the fixed list changed",
                        };
                        new_because.push(format!("`{}` changed {a} → {b}: {why}", p.name));
                        let tip = match p.kind {
                            ParamKind::Optional => Some(format!(
                                "to run once with `{}`, add a precondition that waits for it (`when: {{present: {}}}`), make it required, or set max_executions_per_run: 1",
                                p.name, p.name
                            )),
                            ParamKind::List => Some(format!(
                                "to run once with all of `{}`, use a fixed_list of the expected size or a precondition counting them",
                                p.name
                            )),
                            ParamKind::Required => Some(format!(
                                "if `{}` has several producers or stages, give each stage its own event type (double-dip), or set max_executions_per_run",
                                p.name
                            )),
                            ParamKind::FixedList => None,
                        };
                        if let Some(tip) = tip
                            && !advice.contains(&tip)
                        {
                            advice.push(tip);
                        }
                    }
                }
                let trigger_ev = &run.log()[*trigger as usize];
                fired.push(Firing {
                    execution: x.to_string(),
                    trigger: labels.get(*trigger).to_string(),
                    trigger_from: origin_text(run, trigger_ev.origin),
                    bindings: s
                        .params
                        .iter()
                        .enumerate()
                        .map(|(pi, p)| {
                            format!(
                                "{}={}",
                                p.name,
                                bound_text(run, labels, step, pi, bindings[pi])
                            )
                        })
                        .collect(),
                    precondition,
                    new_because,
                });
                previous = Some(x);
            }
            Record::Skipped {
                trigger,
                step: st,
                reason,
            } if *st == step => skipped.push(Skip {
                trigger: labels.get(*trigger).to_string(),
                reason: skip_text(spec, step, reason),
            }),
            _ => {}
        }
    }
    let still_missing = if fired.is_empty() {
        missing_at_end(run, step)
    } else {
        Vec::new()
    };
    let n = fired.len();
    let summary = match n {
        0 if skipped.is_empty() => format!(
            "`{}` never ran and was never a candidate: no event of a type it takes arrived",
            s.name
        ),
        0 => format!(
            "`{}` never ran: it was a candidate {} time(s) and each time a readiness check failed",
            s.name,
            skipped.len()
        ),
        1 => format!("`{}` ran once", s.name),
        n => format!("`{}` ran {n} times, each with a new input set", s.name),
    };
    StepExplanation {
        step: s.name.clone(),
        executions: n,
        fired,
        skipped,
        still_missing,
        summary,
        advice,
    }
}

/// What a step that never ran still lacked when the log ends.
fn missing_at_end(run: &Run, step: StepIdx) -> Vec<String> {
    let spec = run.spec();
    let s = &spec.steps[step as usize];
    let mut out = Vec::new();
    if let RunStatus::Terminated { by } = run.status() {
        out.push(format!(
            "the run ended at [{by}] ({}), and nothing is dispatched after that",
            run.type_name(run.log()[by as usize].ty)
        ));
    }
    for p in &s.params {
        let have = run
            .log()
            .iter()
            .filter(|e| matches!(e.ty, crate::run::EventTy::Known(t) if p.types.contains(&t)))
            .count();
        let types = type_names(spec, &p.types);
        let producers = producers(spec, &p.types);
        let source = if producers.is_empty() {
            "no step produces it".to_string()
        } else {
            let ran: Vec<String> = producers
                .iter()
                .map(|(name, idx)| {
                    format!(
                        "{name} ({})",
                        match run.execution_count(*idx) {
                            0 => "never ran".to_string(),
                            n => format!("ran {n}x"),
                        }
                    )
                })
                .collect();
            format!("produced by {}", ran.join(", "))
        };
        match p.kind {
            ParamKind::Required if have == 0 => out.push(format!(
                "required `{}` ({types}) never got an event; {source}",
                p.name
            )),
            ParamKind::FixedList if have < p.size as usize => out.push(format!(
                "fixed list `{}` ({types}) got {have} of {} events; {source}",
                p.name, p.size
            )),
            _ => {}
        }
    }
    if out.is_empty() || (out.len() == 1 && run.is_terminated()) {
        let pre_false = run.records().iter().any(|r| {
            matches!(r, Record::PreconditionEvaluated { step: st, result: false, .. } if st == step)
        });
        if pre_false {
            out.push(format!(
                "its precondition `{}` returned false every time it was asked, and it is asked again only when one of the step's own input events arrives (R5)",
                s.precondition.as_ref().map(|p| p.name.as_str()).unwrap_or("?")
            ));
        }
    }
    out
}

fn type_names(spec: &CompiledSpec, types: &[u32]) -> String {
    types
        .iter()
        .map(|t| spec.types[*t as usize].name.as_str())
        .collect::<Vec<_>>()
        .join(" | ")
}

fn producers(spec: &CompiledSpec, types: &[u32]) -> Vec<(String, StepIdx)> {
    spec.steps
        .iter()
        .enumerate()
        .filter(|(_, s)| s.outputs.iter().any(|o| types.contains(o)))
        .map(|(i, s)| (s.name.clone(), i as StepIdx))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::sim::{DEFAULT_MAX_COMPLETIONS, Policy, simulate};
    use crate::{SpecSyntax, compile_spec_text};
    use std::sync::Arc;

    fn explain(yaml: &str, step: &str) -> StepExplanation {
        let spec = Arc::new(compile_spec_text(yaml, SpecSyntax::Yaml).unwrap());
        let sim = simulate(spec.clone(), Policy::Fifo, DEFAULT_MAX_COMPLETIONS).unwrap();
        let labels = EventLabels::for_run(&sim.run, &sim.arrivals);
        explain_step(&sim.run, &labels, spec.step_index(step).unwrap())
    }

    const TRAP: &str = "name: T
events: [{name: A}, {name: B}]
steps:
  - {name: a, params: [{name: q, kind: required, types: [StartEvent]}], outputs: [A]}
  - {name: b, params: [{name: q, kind: required, types: [StartEvent]}], outputs: [B]}
  - {name: s, params: [{name: x, kind: required, types: [A]}, {name: y, kind: optional, types: [B]}]}
simulation: {arrivals: [{event: StartEvent, label: go}]}
";

    #[test]
    fn a_step_that_ran_twice_is_explained_by_the_parameter_that_changed() {
        let e = explain(TRAP, "s");
        assert_eq!(e.executions, 2);
        assert_eq!(e.fired[0].new_because, Vec::<String>::new());
        assert_eq!(e.fired[1].new_because.len(), 1);
        assert!(
            e.fired[1].new_because[0].starts_with("`y` changed none → B#2"),
            "{:?}",
            e.fired[1]
        );
        assert!(e.fired[1].new_because[0].contains("(R2)"));
        assert!(e.advice[0].contains("precondition"), "{:?}", e.advice);
    }

    #[test]
    fn a_step_that_never_ran_names_what_it_lacked_and_who_should_have_produced_it() {
        let e = explain(
            "name: T
events: [{name: A}, {name: B}]
steps:
  - {name: s, params: [{name: q, kind: required, types: [StartEvent]}, {name: b, kind: required, types: [B]}]}
simulation: {arrivals: [{event: StartEvent}]}
",
            "s",
        );
        assert_eq!(e.executions, 0);
        assert_eq!(e.skipped.len(), 1);
        assert_eq!(
            e.skipped[0].reason,
            "required parameter `b` has no event yet"
        );
        assert_eq!(
            e.still_missing,
            ["required `b` (B) never got an event; no step produces it"]
        );
    }

    #[test]
    fn a_precondition_that_never_held_is_named() {
        let e = explain(
            "name: T
steps:
  - name: s
    params: [{name: q, kind: required, types: [StartEvent]}]
    precondition: {name: ready, when: {always: false}}
simulation: {arrivals: [{event: StartEvent}]}
",
            "s",
        );
        assert_eq!(e.executions, 0);
        assert!(
            e.still_missing[0].contains("precondition `ready` returned false"),
            "{:?}",
            e.still_missing
        );
    }

    #[test]
    fn a_step_that_ran_once_has_no_advice() {
        let e = explain(TRAP, "a");
        assert_eq!(e.executions, 1);
        assert!(e.advice.is_empty());
        assert_eq!(e.summary, "`a` ran once");
    }
}
