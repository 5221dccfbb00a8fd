//! The diagnosis of one symptom, as the debugging guide prescribes it, automated: which
//! `saap check` findings are causes of the symptom (each code mapped to its rule R1–R6 and
//! the guide's constraint), what `explain` says about the step in a simulated run (why it ran
//! again, what it lacked), what `explore` finds over every interleaving (the worst case with
//! its witness, stalls, events after stop), and what a recorded run shows ([`RunFacts`]).
//!
//! A root cause comes from a finding, or — when no finding explains what the simulation or
//! the explorer shows — from the rule those tools name. Nothing is inferred beyond what a tool
//! says. Must not render, read files or run anything but the dispatch core's tools.

use super::model::{Evidence, RootCause, Symptom};
use super::run_evidence::{ClassStreamFacts, RunFacts, RunStepExplanation};
use super::subject::{Found, Subject};
use saap_dispatch::Record;
use saap_dispatch::explain::{CutOff, StepExplanation, explain_run};
use saap_dispatch::explore::{Exploration, ExploreOptions, explore};
use saap_dispatch::record::Origin;
use saap_dispatch::render::EventLabels;
use saap_dispatch::sim::{DEFAULT_MAX_COMPLETIONS, Policy, Simulation, simulate};

/// At most this many lines of a witness trace or a list of firings in the evidence.
const MAX_LINES: usize = 12;
/// States the explorer may visit for a report (its results say when this cut them).
const MAX_STATES: usize = 50_000;

/// What a check code means for the guide: the rule, the constraint or issue, and the
/// symptoms it causes.
pub struct CodeMeaning {
    pub code: &'static str,
    pub rule: &'static str,
    pub constraint: &'static str,
    pub symptoms: &'static [Symptom],
}

use Symptom::*;

/// Every check code that causes a symptom of the guide's triage table.
pub const MEANINGS: &[CodeMeaning] = &[
    m(
        "SAAP001",
        "R1",
        "Step Never Executes: unreachable step (validity: reachability)",
        &[NeverRuns],
    ),
    m(
        "SAAP002",
        "R1",
        "Step Never Executes: missing upstream event",
        &[NeverRuns],
    ),
    m(
        "SAAP003",
        "R4",
        "No Stop Dependencies: a step takes a stop event",
        &[NeverRuns],
    ),
    m(
        "SAAP004",
        "R2",
        "unbounded loop (validity: acyclicity)",
        &[RunsTwice],
    ),
    m(
        "SAAP005",
        "R1",
        "Agent Won't Start: no step takes a start event",
        &[WontStart, NeverRuns],
    ),
    m(
        "SAAP006",
        "",
        "duplicate step names share their execution count",
        &[NeverRuns],
    ),
    m(
        "SAAP007",
        "R5",
        "Precondition Mismatch: reads an event type its step does not take",
        &[Precondition, NeverRuns],
    ),
    m("SAAP008", "R4", "Dangling Stop", &[AfterStop]),
    m(
        "SAAP009",
        "R1",
        "Step Never Executes: FixedList count mismatch",
        &[NeverRuns],
    ),
    m(
        "SAAP010",
        "R1 + R2",
        "Optional Parameter Trap",
        &[RunsTwice],
    ),
    m(
        "SAAP011",
        "R3 + R2",
        "List Parameter Behavior: re-runs per arrival",
        &[RunsTwice],
    ),
    m("SAAP013", "R2", "Double-Dip", &[RunsTwice]),
    m(
        "SAAP014",
        "R1",
        "exact-name candidacy: parameter typed with a parent",
        &[NeverRuns],
    ),
    m(
        "SAAP016",
        "R1",
        "display-only events never drive steps",
        &[NeverRuns],
    ),
    m(
        "SAAP017",
        "R5",
        "Precondition always false",
        &[NeverRuns, Precondition],
    ),
    m(
        "SAAP018",
        "R1",
        "a child run's end taken, no step delegates",
        &[NeverRuns],
    ),
    m(
        "SAAP019",
        "R1",
        "wait on a person with no deadline",
        &[NeverRuns],
    ),
    m(
        "SAAP020",
        "R1",
        "a child's failure taken by no step",
        &[NeverRuns],
    ),
    m(
        "SAAP021",
        "R2",
        "a deadline and its answer both decide",
        &[RunsTwice],
    ),
    m("SAAP102", "R1 + R5", "Config Lie", &[Config]),
    m(
        "SAAP103",
        "",
        "Configuration Errors: form/config type mismatch",
        &[Config, WontStart],
    ),
    m(
        "SAAP104",
        "R5",
        "Precondition Mismatch: a precondition the dispatcher cannot call",
        &[Precondition, NeverRuns],
    ),
    m(
        "SAAP105",
        "R4",
        "Events After Stop: async leak (fire-and-forget task)",
        &[AfterStop],
    ),
    m(
        "SAAP106",
        "",
        "Agent Won't Start: steps on a class that is not an Agent",
        &[WontStart],
    ),
    m(
        "SAAP108",
        "",
        "Agent Won't Start: the agent is not a valid workflow",
        &[WontStart],
    ),
    m(
        "SAAP109",
        "",
        "Precondition Mismatch: non-injectable parameter",
        &[Precondition],
    ),
];

const fn m(
    code: &'static str,
    rule: &'static str,
    constraint: &'static str,
    symptoms: &'static [Symptom],
) -> CodeMeaning {
    CodeMeaning {
        code,
        rule,
        constraint,
        symptoms,
    }
}

/// The meaning of a code, if it causes some symptom.
pub fn meaning(code: &str) -> Option<&'static CodeMeaning> {
    MEANINGS.iter().find(|c| c.code == code)
}

/// The diagnosis: causes, evidence, and what was looked at.
pub struct Diagnosis {
    pub root_causes: Vec<RootCause>,
    pub evidence: Vec<Evidence>,
    pub checked: Vec<String>,
    /// Advice of `explain` for causes found at runtime only (no finding), by step.
    pub runtime_advice: Vec<(String, String)>,
    /// Executions per step in the simulated run (for the fix's before/after comparison).
    pub simulated_executions: Vec<(String, usize)>,
}

/// Diagnoses `symptom` (at `step`, if given) on `subject`, with the run's facts if any.
pub fn diagnose(
    subject: &Subject,
    symptom: Symptom,
    step: Option<&str>,
    run: Option<&RunFacts>,
    live: Option<&ClassStreamFacts>,
) -> anyhow::Result<Diagnosis> {
    let mut d = Diagnosis {
        root_causes: Vec::new(),
        evidence: Vec::new(),
        checked: Vec::new(),
        runtime_advice: Vec::new(),
        simulated_executions: Vec::new(),
    };
    let input = &subject.input;
    let scope = match (symptom.is_per_step(), step) {
        (true, Some(s)) => format!("on step `{s}`"),
        (true, None) => "on every step".to_string(),
        (false, _) => "on the agent".to_string(),
    };

    // 1. The static checks.
    let codes: Vec<&str> = MEANINGS
        .iter()
        .filter(|c| c.symptoms.contains(&symptom))
        .map(|c| c.code)
        .collect();
    d.checked.push(format!(
        "`saap check {input}`: findings {} {scope}",
        codes.join(", ")
    ));
    let relevant: Vec<&Found> = subject
        .findings
        .iter()
        .filter(|f| codes.contains(&f.finding.code))
        .filter(|f| {
            !symptom.is_per_step()
                || step.is_none()
                || f.finding.step.is_none()
                || f.finding.step.as_deref() == step
        })
        .collect();
    for f in &relevant {
        let Some(mn) = meaning(f.finding.code) else {
            continue;
        };
        d.root_causes.push(RootCause {
            rule: mn.rule.to_string(),
            constraint: mn.constraint.to_string(),
            code: Some(f.finding.code.to_string()),
            step: f.finding.step.clone(),
            param: f.finding.param.clone(),
            location: f.location.clone(),
            message: f.finding.message.clone(),
            why: f.finding.why.clone(),
        });
        let mut e = Evidence {
            tool: "check".into(),
            command: Some(format!("saap check {input}")),
            summary: format!(
                "{}[{}] {}{}",
                f.finding.severity.as_str(),
                f.finding.code,
                f.location
                    .as_deref()
                    .map(|l| format!("{l}: "))
                    .unwrap_or_default(),
                f.finding.message
            ),
            details: vec![format!("why: {}", f.finding.why)],
        };
        if f.finding.rule == "unresolved-annotation" {
            e.details.clear();
        }
        d.evidence.push(e);
    }
    if symptom == Config && subject.kind == super::subject::InputKind::Spec {
        d.checked.push(
            "a spec file carries no config class or step bodies: the config checks (SAAP102, SAAP103) need the agent's Python source".into(),
        );
    }
    let unresolved = subject
        .findings
        .iter()
        .filter(|f| f.finding.code == "SAAP107")
        .count();
    if unresolved > 0 {
        d.checked.push(format!(
            "{unresolved} annotation(s) could not be followed (SAAP107): what they hide is not in the spec the other tools read"
        ));
    }

    // 2. A simulated run, explained.
    let spec = subject.spec.clone();
    let sim = simulate(spec.clone(), Policy::Fifo, DEFAULT_MAX_COMPLETIONS)?;
    let labels = EventLabels::for_run(&sim.run, &sim.arrivals);
    let all: Vec<u32> = (0..spec.steps.len() as u32).collect();
    let explained = explain_run(
        &sim.run,
        &labels,
        &all,
        CutOff::of(sim.completions, sim.unfinished.len()),
    );
    if let Some(c) = &explained.cut_off {
        d.checked
            .push(format!("the simulated run was cut off: {}", c.message));
    }
    if let Some(c) = explained.cycle.as_ref().filter(|_| symptom == RunsTwice) {
        d.evidence.push(Evidence {
            tool: "explain".into(),
            command: None,
            summary: c.message.clone(),
            details: vec![
                format!(
                    "the last execution ends a chain of {} executions, each started by what the one before it returned",
                    c.chain
                ),
                format!("fix: {}", c.fix),
            ],
        });
    }
    d.simulated_executions = explained
        .steps
        .iter()
        .map(|e| (e.step.clone(), e.executions))
        .collect();
    let arrivals = match &subject.synthesized_arrivals {
        Some(a) if a.is_empty() => {
            "no arrivals: no step takes a start event, so nothing was sent".to_string()
        }
        Some(a) => format!(
            "one {} (the start events the steps take; the input declares no arrivals)",
            a.join(", one ")
        ),
        None => "the spec's `simulation.arrivals`".to_string(),
    };
    let rerun = subject.tools_rerun();
    let explain_cmd = |s: Option<&str>| match (rerun, s) {
        (true, Some(s)) => Some(format!("saap explain {input} --step {s}")),
        (true, None) => Some(format!("saap explain {input}")),
        _ => None,
    };
    let explore_cmd = rerun.then(|| format!("saap explore {input}"));
    let simulate_cmd = rerun.then(|| format!("saap simulate {input}"));
    let in_scope = |name: &str| step.is_none_or(|s| s == name);
    match symptom {
        RunsTwice => {
            d.checked.push(format!(
                "`explain` on a simulated run (policy fifo, arrivals: {arrivals}): executions per step and why each repeat was a new input set"
            ));
            for e in explained.steps.iter().filter(|e| in_scope(&e.step)) {
                if e.executions > 1 {
                    d.evidence.push(firings(e, explain_cmd(Some(&e.step))));
                    runtime_cause(&mut d, e, "R2", "Re-execution on New Data");
                }
            }
        }
        NeverRuns | Precondition => {
            d.checked.push(format!(
                "`explain` on a simulated run (policy fifo, arrivals: {arrivals}): each skip of the step and what it still lacked at the end"
            ));
            if symptom == Precondition {
                d.checked.push("preconditions without a declarative `when` (all of Python source's) are taken to hold in the simulation and the exploration: only their signatures are checked".into());
            }
            for e in explained.steps.iter().filter(|e| in_scope(&e.step)) {
                if e.executions > 0 {
                    continue;
                }
                let pre_false = e
                    .skipped
                    .iter()
                    .any(|s| s.reason == "precondition returned false");
                if symptom == Precondition && !pre_false {
                    continue;
                }
                let mut details: Vec<String> = e
                    .skipped
                    .iter()
                    .take(MAX_LINES)
                    .map(|s| format!("candidate on {}: skipped — {}", s.trigger, s.reason))
                    .collect();
                details.extend(e.still_missing.iter().map(|m| format!("at the end: {m}")));
                d.evidence.push(Evidence {
                    tool: "explain".into(),
                    command: explain_cmd(Some(&e.step)),
                    summary: e.summary.clone(),
                    details,
                });
                let run_ended_first =
                    e.still_missing.len() == 1 && e.still_missing[0].starts_with("the run ended");
                let (rule, constraint) = if pre_false {
                    ("R5", "Precondition always false")
                } else if run_ended_first {
                    (
                        "R4",
                        "Step Never Executes: the run ended before its inputs arrived",
                    )
                } else {
                    ("R1", "Step Never Executes")
                };
                runtime_cause(&mut d, e, rule, constraint);
            }
        }
        AfterStop => {
            d.checked.push(format!(
                "the simulated run (policy fifo, arrivals: {arrivals}): events appended after its stop"
            ));
            let after = after_stop_in(&sim);
            let shown: Vec<&(String, Option<String>)> = after
                .iter()
                .filter(|(_, by)| step.is_none() || by.as_deref() == step)
                .collect();
            if !shown.is_empty() {
                d.evidence.push(Evidence {
                    tool: "simulate".into(),
                    command: simulate_cmd.clone(),
                    summary: format!(
                        "the simulated run has {} control event(s) after its stop",
                        shown.len()
                    ),
                    details: shown
                        .iter()
                        .map(|(ev, by)| match by {
                            Some(s) => format!("{ev} returned by `{s}` after the stop"),
                            None => format!("{ev} arrived from outside after the stop"),
                        })
                        .collect(),
                });
            }
        }
        WontStart => {
            d.checked.push(format!(
                "the simulated run (arrivals: {arrivals}): whether any step runs"
            ));
            let ran: usize = explained.steps.iter().map(|e| e.executions).sum();
            if ran == 0 {
                d.evidence.push(Evidence {
                    tool: "simulate".into(),
                    command: simulate_cmd.clone(),
                    summary: "no step runs in the simulated run".into(),
                    details: Vec::new(),
                });
            }
        }
        Config => {}
    }

    // 3. Every interleaving.
    if matches!(symptom, RunsTwice | NeverRuns | AfterStop) {
        let options = ExploreOptions {
            max_states: MAX_STATES,
            ..ExploreOptions::default()
        };
        let x = explore(spec.clone(), &options, &mut |_| {})?;
        d.checked.push(format!(
            "`explore`: every interleaving of arrivals and completions ({} states{})",
            x.stats.states,
            if x.is_complete() {
                String::new()
            } else {
                format!(
                    "; partial: {}",
                    x.bounds_hit
                        .iter()
                        .map(|b| b.message.as_str())
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            }
        ));
        explored(&mut d, &x, symptom, step, explore_cmd);
    }

    // 4. The run, and the live class stream.
    if let Some(r) = run {
        run_evidence(&mut d, r, symptom);
    }
    if let Some(l) = live.filter(|_| symptom == WontStart) {
        class_stream_evidence(&mut d, l);
    }
    Ok(d)
}

/// The guide's issue 5 checks on a live server: the class stream exists and has consumers.
fn class_stream_evidence(d: &mut Diagnosis, l: &ClassStreamFacts) {
    d.checked.push(format!(
        "{}: the class stream `{}` exists and a dispatcher is subscribed to it (a consumer)",
        l.source, l.stream
    ));
    let (summary, cause) = if !l.exists {
        (
            format!("`{}` does not exist on the server", l.stream),
            Some((
                "Agent Won't Start: stream not created",
                format!(
                    "the class stream `{}` does not exist: the agent has not connected to this server",
                    l.stream
                ),
                "start the agent's runner against this server (check its entry point and NATS settings) and look at its logs; the stream is created when it connects",
            )),
        )
    } else if l.consumers == 0 {
        (
            format!(
                "`{}` holds {} message(s) and has no consumer",
                l.stream, l.messages
            ),
            Some((
                "Agent Won't Start: no dispatcher subscribed",
                format!(
                    "`{}` has zero consumers: no dispatcher is subscribed, so the {} stored event(s) are never dispatched",
                    l.stream, l.messages
                ),
                "start a dispatcher for the class (the agent's runner, or `agent run --engine nats://…`) and check its logs",
            )),
        )
    } else {
        (
            format!(
                "`{}` has {} consumer(s): a dispatcher is subscribed",
                l.stream, l.consumers
            ),
            None,
        )
    };
    d.evidence.push(Evidence {
        tool: "server".into(),
        command: Some(format!("saap inspect --{} stream {}", l.source, l.stream)),
        summary,
        details: Vec::new(),
    });
    if let Some((constraint, message, advice)) = cause {
        d.root_causes.push(RootCause {
            rule: String::new(),
            constraint: constraint.into(),
            code: None,
            step: None,
            param: None,
            location: None,
            message,
            why: "the guide's issue 5: a dispatcher subscribes to the agent class stream; without it nothing is dispatched, with no logs and no errors".into(),
        });
        d.runtime_advice.push((String::new(), advice.into()));
    }
}

/// A root cause from a tool's runtime evidence, when no finding already names the step.
fn runtime_cause(d: &mut Diagnosis, e: &StepExplanation, rule: &str, constraint: &str) {
    runtime_cause_seen(
        d,
        e,
        rule,
        constraint,
        "shown by the dispatch core on a simulated run; no static check names it",
    );
}

/// [`runtime_cause`], saying where the core showed it.
fn runtime_cause_seen(
    d: &mut Diagnosis,
    e: &StepExplanation,
    rule: &str,
    constraint: &str,
    seen: &str,
) {
    if d.root_causes
        .iter()
        .any(|c| c.step.as_deref() == Some(e.step.as_str()))
    {
        return;
    }
    let reasons: Vec<String> = e
        .fired
        .iter()
        .flat_map(|f| f.new_because.iter().cloned())
        .chain(e.still_missing.iter().cloned())
        .collect();
    // The rule the tool names, e.g. "(R3)", else the symptom's.
    let named: Vec<String> = ["R1", "R2", "R3", "R4", "R5", "R6"]
        .iter()
        .filter(|r| reasons.iter().any(|t| t.contains(&format!("({r})"))))
        .map(|r| r.to_string())
        .collect();
    d.root_causes.push(RootCause {
        rule: if named.is_empty() {
            rule.to_string()
        } else {
            named.join(" + ")
        },
        constraint: constraint.to_string(),
        code: None,
        step: Some(e.step.clone()),
        param: None,
        location: None,
        message: match reasons.first() {
            Some(r) => format!("{}: {r}", e.summary),
            None => e.summary.clone(),
        },
        why: seen.into(),
    });
    for a in &e.advice {
        d.runtime_advice.push((e.step.clone(), a.clone()));
    }
}

fn firings(e: &StepExplanation, command: Option<String>) -> Evidence {
    let mut details = Vec::new();
    for f in e.fired.iter().take(MAX_LINES) {
        details.push(format!(
            "{} on {} (from {}): {}",
            f.execution,
            f.trigger,
            f.trigger_from,
            f.bindings.join(", ")
        ));
        for why in &f.new_because {
            details.push(format!("    new input set because {why}"));
        }
    }
    Evidence {
        tool: "explain".into(),
        command,
        summary: e.summary.clone(),
        details,
    }
}

/// Control events appended after the simulated run's stop, with the step that returned each.
fn after_stop_in(sim: &Simulation) -> Vec<(String, Option<String>)> {
    let run = &sim.run;
    run.records()
        .iter()
        .filter_map(|r| match r {
            Record::EventAfterStop { seq, origin } => {
                let ev = run.log().get(seq as usize)?;
                let by = match origin {
                    Origin::Outside => None,
                    Origin::Execution(x) => run
                        .execution(x)
                        .map(|e| run.spec().steps[e.step as usize].name.clone()),
                };
                Some((run.type_name(ev.ty).to_string(), by))
            }
            _ => None,
        })
        .collect()
}

fn explored(
    d: &mut Diagnosis,
    x: &Exploration,
    symptom: Symptom,
    step: Option<&str>,
    command: Option<String>,
) {
    let in_scope = |name: &str| step.is_none_or(|s| s == name);
    let trace = |w: &[saap_dispatch::explore::TraceStep]| -> Vec<String> {
        let mut v: Vec<String> = w
            .iter()
            .take(MAX_LINES)
            .map(|t| format!("  {}", t.text))
            .collect();
        if w.len() > MAX_LINES {
            v.push(format!("  … {} more actions", w.len() - MAX_LINES));
        }
        v
    };
    match symptom {
        RunsTwice => {
            for s in x.steps.iter().filter(|s| in_scope(&s.step)) {
                let Some(worst) = s.worst.filter(|w| *w > 1) else {
                    continue;
                };
                let mut details: Vec<String> =
                    s.reruns.iter().map(|r| format!("re-run {r}")).collect();
                details.push("witness:".into());
                details.extend(trace(&s.worst_witness));
                d.evidence.push(Evidence {
                    tool: "explore".into(),
                    command: command.clone(),
                    summary: format!(
                        "`{}` runs {}–{worst} times over every interleaving",
                        s.step,
                        s.best.unwrap_or(0)
                    ),
                    details,
                });
            }
        }
        NeverRuns => {
            for s in x.steps.iter().filter(|s| in_scope(&s.step)) {
                if s.best != Some(0) {
                    continue;
                }
                let stall = x.stalls.iter().find_map(|st| {
                    st.waiting
                        .iter()
                        .find(|w| w.step == s.step)
                        .map(|w| (st, w))
                });
                let mut details = Vec::new();
                if let Some((st, w)) = stall {
                    details.push(format!(
                        "the run stalls with `{}` waiting: {}",
                        w.step, w.reason
                    ));
                    details.push("witness:".into());
                    details.extend(trace(&st.witness));
                }
                d.evidence.push(Evidence {
                    tool: "explore".into(),
                    command: command.clone(),
                    summary: match s.worst {
                        Some(0) => format!("`{}` runs in no interleaving", s.step),
                        _ => format!("`{}` does not run in some interleavings", s.step),
                    },
                    details,
                });
            }
        }
        AfterStop => {
            for a in &x.after_stop {
                if step.is_some() && a.step.as_deref() != step {
                    continue;
                }
                let mut details = vec!["witness:".to_string()];
                details.extend(trace(&a.witness));
                d.evidence.push(Evidence {
                    tool: "explore".into(),
                    command: command.clone(),
                    summary: match &a.step {
                        Some(s) => {
                            format!("`{}` returned by `{s}` can arrive after the stop", a.event)
                        }
                        None => format!("`{}` from outside can arrive after the stop", a.event),
                    },
                    details,
                });
                if let Some(s) = &a.step
                    && !d.root_causes.iter().any(|c| c.rule.contains("R4"))
                {
                    d.root_causes.push(RootCause {
                        rule: "R4".into(),
                        constraint: "Events After Stop: parallel step timing".into(),
                        code: None,
                        step: Some(s.clone()),
                        param: None,
                        location: None,
                        message: format!(
                            "an execution of `{s}` can still be running when another step returns the stop event; what it returns (`{}`) arrives after the stop",
                            a.event
                        ),
                        why: "R4 / DESIGN §4.7: a stop event ends the run; events appended later are kept as evidence and never dispatched".into(),
                    });
                }
            }
        }
        _ => {}
    }
}

fn run_evidence(d: &mut Diagnosis, r: &RunFacts, symptom: Symptom) {
    let mut details = vec![format!(
        "status {}{}; {} control event(s){}",
        r.status,
        r.ended_by
            .as_deref()
            .map(|e| format!(", ended by {e}"))
            .unwrap_or_default(),
        r.events,
        if r.truncated {
            " (only the first part of the run was read)"
        } else {
            ""
        }
    )];
    let mut summary = format!("run {} ({})", r.run_id, r.source);
    if let Some(s) = &r.step {
        match s.executions {
            Some(n) => {
                details.push(format!("`{}` ran {n} time(s) (the dispatcher's records)", s.step));
                if symptom == RunsTwice && n > 1 {
                    summary = format!("run {}: `{}` ran {n} times", r.run_id, s.step);
                }
                if matches!(symptom, NeverRuns | Precondition) && n == 0 {
                    summary = format!("run {}: `{}` never ran", r.run_id, s.step);
                }
            }
            None => details.push(format!(
                "{} event(s) of `{}`'s output types were published (no dispatcher records on this source: other steps may produce them too)",
                s.output_events, s.step
            )),
        }
        for k in s.skips.iter().take(MAX_LINES) {
            details.push(format!("`{}` skipped: {k}", s.step));
        }
    }
    if !r.after_stop.is_empty() {
        if symptom == AfterStop {
            summary = format!(
                "run {}: {} control event(s) after its stop",
                r.run_id,
                r.after_stop.len()
            );
        }
        details.extend(
            r.after_stop
                .iter()
                .take(MAX_LINES)
                .map(|e| format!("after the stop: {e}")),
        );
    }
    d.checked
        .push(format!("run {} read from {}", r.run_id, r.source));
    d.evidence.push(Evidence {
        tool: "run".into(),
        command: None,
        summary,
        details,
    });
    if let Some(x) = &r.explained {
        recorded_explanation(d, r, x, symptom);
    }
}

/// The step explained on the recorded run (as `saap explain --run`): its firings as evidence,
/// and, when the run shows the symptom and no finding names the step, the cause the core
/// names.
fn recorded_explanation(d: &mut Diagnosis, r: &RunFacts, x: &RunStepExplanation, symptom: Symptom) {
    let Some(e) = &x.step else {
        if let Some(why) = &x.not_explained {
            d.checked.push(format!(
                "`saap explain --run {}`: not explained with this input's spec: {why}",
                r.run_id
            ));
        }
        return;
    };
    d.checked.push(format!(
        "`saap explain --run {}`: why `{}` ran or not in the recorded run{}",
        r.run_id,
        e.step,
        if x.rebuilt_from_events {
            " (rebuilt from the Python platform's events)"
        } else {
            ""
        }
    ));
    let mut evidence = firings(e, Some(x.command.clone()));
    evidence.tool = "explain --run".into();
    if e.executions == 0 {
        evidence.details.extend(
            e.skipped
                .iter()
                .take(MAX_LINES)
                .map(|s| format!("candidate on {}: skipped — {}", s.trigger, s.reason)),
        );
        evidence
            .details
            .extend(e.still_missing.iter().map(|m| format!("at the end: {m}")));
    }
    d.evidence.push(evidence);
    let seen = format!(
        "shown by the dispatch core on the recorded run {}",
        r.run_id
    );
    match symptom {
        RunsTwice if e.executions > 1 => {
            runtime_cause_seen(d, e, "R2", "Re-execution on New Data", &seen);
        }
        NeverRuns if e.executions == 0 => {
            runtime_cause_seen(d, e, "R1", "Step Never Executes", &seen);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mapped_code_is_a_check_and_every_symptom_has_one() {
        let known: Vec<&str> = saap_dispatch::check::RULES
            .iter()
            .chain(saap_python::rules::RULES)
            .map(|r| r.code)
            .collect();
        for m in MEANINGS {
            assert!(known.contains(&m.code), "{} is not a check code", m.code);
            assert!(!m.symptoms.is_empty(), "{} causes no symptom", m.code);
            assert!(
                m.rule.is_empty()
                    || m.rule
                        .split(" + ")
                        .all(|r| r.len() == 2 && r.starts_with('R')),
                "{}: {}",
                m.code,
                m.rule
            );
        }
        for s in [
            RunsTwice,
            NeverRuns,
            AfterStop,
            Precondition,
            WontStart,
            Config,
        ] {
            assert!(
                MEANINGS.iter().any(|m| m.symptoms.contains(&s)),
                "{} has no check",
                s.as_str()
            );
        }
    }
}
