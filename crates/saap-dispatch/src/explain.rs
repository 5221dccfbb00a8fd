//! Explanations: *why a step fired, fired more than once, or never fired*, read off a run's
//! decision records (DESIGN §1, the debugger's `explain`). Works on any [`Run`]: a
//! simulated one, or one rebuilt from a recorded [`crate::replay::History`].
//!
//! Reads records only; decides nothing.

use crate::compiled::CompiledSpec;
use crate::ids::{ExecutionId, FastMap, Seq, StepIdx};
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
    // The latest precondition result of this step per trigger, kept as the records go by
    // (one pass over the records: the cost is linear in the run's length).
    let mut evaluated: FastMap<Seq, bool> = FastMap::default();
    for r in run.records().iter() {
        match &r {
            Record::PreconditionEvaluated {
                trigger,
                step: st,
                result,
            } if *st == step => {
                evaluated.insert(*trigger, *result);
            }
            Record::ExecutionStarted {
                execution,
                step: st,
                trigger,
            } if *st == step => {
                let x = *execution;
                let bindings = run.bindings(x);
                let precondition = evaluated.get(trigger).copied();
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

/// A simulation cut short by its completion bound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CutOff {
    /// Completions made (the bound).
    pub completions: usize,
    /// Executions still running when it stopped.
    pub running: usize,
    /// What it means, in a sentence.
    pub message: String,
}

impl CutOff {
    /// The cut-off of a simulation that made `completions` completions and stopped with
    /// `running` executions still running, if it was cut off.
    pub fn of(completions: usize, running: usize) -> Option<CutOff> {
        (running > 0).then(|| CutOff {
            completions,
            running,
            message: format!(
                "the simulation stopped at its bound of {completions} completions (--max-completions) with {running} execution{} still running: the workflow may loop forever, and the run below is cut off there",
                if running == 1 { "" } else { "s" }
            ),
        })
    }
}

/// Steps that kept triggering one another in a run cut off by a bound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CycleReport {
    /// The steps on the loop, in declaration order.
    pub steps: Vec<String>,
    /// Executions on the chain that ends at the last one started, each started by an event
    /// the one before it returned.
    pub chain: usize,
    /// The static check's code when it reports this cycle (`SAAP004`).
    pub code: Option<&'static str>,
    pub message: String,
    pub fix: String,
}

/// The explanation of a whole run: each step's, and when the run was cut off by a bound,
/// the loop that kept it going.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunExplanation {
    pub cut_off: Option<CutOff>,
    pub cycle: Option<CycleReport>,
    pub steps: Vec<StepExplanation>,
}

/// Explains `steps` of a run. With `cut_off` (the simulation hit its bound), also looks for
/// the loop that kept it running and names it with its fix (the static check's SAAP004
/// finding when it has one); the loop's steps then get that fix instead of per-parameter
/// advice. Linear in the run's records per step explained.
pub fn explain_run(
    run: &Run,
    labels: &EventLabels,
    steps: &[StepIdx],
    cut_off: Option<CutOff>,
) -> RunExplanation {
    let cycle = cut_off.as_ref().and_then(|_| cycle_report(run));
    let mut explained: Vec<StepExplanation> = steps
        .iter()
        .map(|s| explain_step(run, labels, *s))
        .collect();
    if let Some(c) = &cycle {
        for e in explained.iter_mut().filter(|e| c.steps.contains(&e.step)) {
            let others: Vec<String> = c
                .steps
                .iter()
                .filter(|s| **s != e.step)
                .map(|s| format!("`{s}`"))
                .collect();
            let with = if others.is_empty() {
                "it triggers itself".to_string()
            } else {
                format!("it is in a loop with {}", others.join(", "))
            };
            e.summary = format!(
                "`{}` ran {} times before the simulation was cut off: {with}",
                e.step, e.executions
            );
            e.advice = vec![c.fix.clone()];
        }
    }
    RunExplanation {
        cut_off,
        cycle,
        steps: explained,
    }
}

/// The steps that repeat on the chain of executions ending at the last one started (each
/// started by an event the previous one returned), if any repeats.
pub fn observed_cycle(run: &Run) -> Option<(Vec<StepIdx>, usize)> {
    let spec = run.spec();
    let mut counts = vec![0usize; spec.steps.len()];
    let mut chain = 0usize;
    let mut next = run
        .executions()
        .len()
        .checked_sub(1)
        .map(|i| ExecutionId(i as u32));
    while let Some(x) = next {
        let Some(e) = run.execution(x) else { break };
        counts[e.step as usize] += 1;
        chain += 1;
        next = match run.log().get(e.trigger as usize).map(|ev| ev.origin) {
            // Executions start after the one whose output triggers them: ids decrease, so
            // the walk ends.
            Some(Origin::Execution(p)) if p.0 < x.0 => Some(p),
            _ => None,
        };
    }
    let steps: Vec<StepIdx> = (0..counts.len())
        .filter(|&s| counts[s] > 1)
        .map(|s| s as StepIdx)
        .collect();
    (!steps.is_empty()).then_some((steps, chain))
}

/// [`observed_cycle`] named, with the static check's SAAP004 finding (message and fix) when it
/// reports that loop.
pub fn cycle_report(run: &Run) -> Option<CycleReport> {
    let spec = run.spec();
    let (steps, chain) = observed_cycle(run)?;
    let names: Vec<String> = steps
        .iter()
        .map(|s| spec.steps[*s as usize].name.clone())
        .collect();
    let finding = crate::check::check(spec).into_iter().find(|f| {
        f.code == crate::check::UNBOUNDED_CYCLE.code
            && f.step.as_ref().is_some_and(|s| names.contains(s))
    });
    let listed = names
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ");
    Some(match finding {
        Some(f) => CycleReport {
            steps: names,
            chain,
            code: Some(f.code),
            message: f.message,
            fix: f.fix,
        },
        None => CycleReport {
            message: format!(
                "steps {listed} kept triggering each other: the last execution is at the end of a chain of {chain} executions, each started by an event the one before it returned"
            ),
            fix: format!(
                "bound the loop: set `max_executions_per_run` on `{}` or give it a precondition that ends the loop (e.g. an iteration count)",
                names[0]
            ),
            steps: names,
            chain,
            code: None,
        },
    })
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

    const PING_PONG: &str = "name: Loop
events: [{name: Ping}, {name: Pong}]
steps:
  - {name: start, params: [{name: m, kind: required, types: [UserMessageEvent]}], outputs: [Ping]}
  - {name: ping, params: [{name: p, kind: required, types: [Ping]}], outputs: [Pong]}
  - {name: pong, params: [{name: p, kind: required, types: [Pong]}], outputs: [Ping]}
simulation: {arrivals: [UserMessageEvent]}
";

    #[test]
    fn a_loop_cut_by_the_completion_bound_is_named_with_its_fix() {
        let spec = Arc::new(compile_spec_text(PING_PONG, SpecSyntax::Yaml).unwrap());
        let sim = simulate(spec.clone(), Policy::Fifo, 50).unwrap();
        assert_eq!(sim.completions, 50);
        assert!(sim.cut_off());
        let labels = EventLabels::for_run(&sim.run, &sim.arrivals);
        let cut = CutOff::of(sim.completions, sim.unfinished.len());
        assert!(cut.as_ref().unwrap().message.contains("50 completions"));
        let steps: Vec<StepIdx> = (0..spec.steps.len() as StepIdx).collect();
        let e = explain_run(&sim.run, &labels, &steps, cut);
        let c = e.cycle.as_ref().expect("the loop is named");
        assert_eq!(c.steps, ["ping", "pong"]);
        assert_eq!(c.code, Some("SAAP004"));
        assert!(
            c.message.contains("`ping`, `pong` trigger each other"),
            "{}",
            c.message
        );
        // start, then 50 completions' worth of ping/pong: one chain through all of them.
        assert_eq!(c.chain, 51);
        let ping = &e.steps[1];
        assert_eq!(ping.executions, 25);
        assert_eq!(
            ping.advice,
            std::slice::from_ref(&c.fix),
            "the cycle's fix, not double-dip advice"
        );
        assert_eq!(
            ping.summary,
            "`ping` ran 25 times before the simulation was cut off: it is in a loop with `pong`"
        );
        assert!(!ping.advice[0].contains("double-dip"));
        let start = &e.steps[0];
        assert!(start.advice.is_empty());
        assert_eq!(start.summary, "`start` ran once");
    }

    #[test]
    fn a_run_that_was_not_cut_off_names_no_loop() {
        let bounded = PING_PONG.replace(
            "outputs: [Pong]}",
            "outputs: [Pong], max_executions_per_run: 3}",
        );
        let spec = Arc::new(compile_spec_text(&bounded, SpecSyntax::Yaml).unwrap());
        let sim = simulate(spec.clone(), Policy::Fifo, DEFAULT_MAX_COMPLETIONS).unwrap();
        assert!(!sim.cut_off());
        let labels = EventLabels::for_run(&sim.run, &sim.arrivals);
        let e = explain_run(&sim.run, &labels, &[1], CutOff::of(sim.completions, 0));
        assert!(e.cut_off.is_none() && e.cycle.is_none());
        // A bounded loop that ran out is still a loop on its chain of executions.
        assert_eq!(observed_cycle(&sim.run).map(|(s, _)| s), Some(vec![1, 2]));
    }

    #[test]
    fn the_precondition_result_is_the_one_for_the_execution_trigger() {
        let e = explain(
            "name: T
events: [{name: A}]
steps:
  - {name: a, params: [{name: q, kind: required, types: [StartEvent]}], outputs: [A, A, A]}
  - name: s
    params: [{name: x, kind: list, types: [A]}]
    precondition: {name: three, when: {count_at_least: {param: x, n: 3}}}
simulation: {arrivals: [StartEvent]}
",
            "s",
        );
        assert_eq!(e.executions, 1);
        assert_eq!(e.fired[0].precondition, Some(true));
        assert_eq!(e.skipped.len(), 2);
    }

    #[test]
    fn a_step_that_ran_once_has_no_advice() {
        let e = explain(TRAP, "a");
        assert_eq!(e.executions, 1);
        assert!(e.advice.is_empty());
        assert_eq!(e.summary, "`a` ran once");
    }
}
