//! Reading a run: a consistent copy of its core state ([`RunSnapshot`]), its timeline (the
//! decision records with names), what it is waiting for, and a workflow's graph as Mermaid.

use crate::event::{Event, Payload, from_payload};
use saap_dispatch::run::{EventTy, ExecState};
use saap_dispatch::spec::{ParamKind, WorkflowSpec};
use saap_dispatch::{Origin, Record, Run, RunStatus, SkipReason, Termination};
use std::fmt::Write;

/// A copy of a run's state at one moment.
#[derive(Debug, Clone)]
pub struct RunSnapshot {
    pub run_id: String,
    pub thread_id: String,
    pub run: Run,
    pub payloads: Vec<Payload>,
    /// An engine-side failure (storage) that stopped the run.
    pub failure: Option<String>,
    /// Display events shown by executions: (seq, execution).
    pub display_by: Vec<(u32, saap_dispatch::ExecutionId)>,
}

/// One logged event.
#[derive(Debug, Clone)]
pub struct LoggedEventView {
    pub seq: u32,
    pub id: String,
    pub name: String,
    pub kind: &'static str,
    pub origin: Origin,
    pub payload: Payload,
}

impl RunSnapshot {
    /// The runs this one delegated to (see [`crate::Engine::children`]).
    pub fn children(&self) -> Vec<crate::engine::ChildView> {
        crate::engine::child_views(&self.run, |seq, _| self.payloads.get(seq as usize))
    }

    /// Every logged event in arrival order (duplicates were dropped by the core).
    pub fn events(&self) -> Vec<LoggedEventView> {
        self.run
            .log()
            .iter()
            .enumerate()
            .map(|(seq, e)| LoggedEventView {
                seq: seq as u32,
                id: e.id.to_string(),
                name: self.run.type_name(e.ty).to_string(),
                kind: e.kind.label(),
                origin: e.origin,
                payload: self.payloads[seq].clone(),
            })
            .collect()
    }

    /// The events of exactly type `T` (by name; subtypes are not included), in log order.
    pub fn events_of<T: Event>(&self) -> Vec<T> {
        self.run
            .log()
            .iter()
            .enumerate()
            .filter(|(_, e)| self.run.type_name(e.ty) == T::NAME)
            .filter_map(|(seq, _)| from_payload(&self.payloads[seq]).ok())
            .collect()
    }

    /// How many executions of the named step started.
    pub fn executions_of(&self, step: &str) -> usize {
        match self.run.spec().step_index(step) {
            Some(i) => self.run.execution_count(i),
            None => 0,
        }
    }

    /// Execution counts for every step, in declaration order.
    pub fn execution_counts(&self) -> Vec<(String, usize)> {
        self.run
            .spec()
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.clone(), self.run.execution_count(i as u32)))
            .collect()
    }

    pub fn has_stop(&self) -> bool {
        self.run
            .log()
            .iter()
            .any(|e| e.kind.is_control() && e.kind.is_stop())
    }

    pub fn has_exception(&self) -> bool {
        self.failure.is_some()
            || self
                .run
                .log()
                .iter()
                .any(|e| e.kind.is_control() && e.kind.is_exception())
    }

    pub fn is_ended(&self) -> bool {
        self.run.is_terminated()
    }

    /// Executions that started and have not finished.
    pub fn running(&self) -> usize {
        self.run.running().count()
    }

    /// The decision records as text, one line each, with step and event names.
    pub fn timeline(&self) -> String {
        timeline_with(&self.run, &self.display_by)
    }

    /// What the run is waiting for: running steps, and for each step that has not run, the
    /// inputs it lacks (from the core's state and its last skip record).
    pub fn waiting_for(&self) -> String {
        let mut out = waiting_for(&self.run, self.failure.as_deref());
        if !self.run.is_terminated() {
            out.push_str(&crate::process::open_work_requests_text(
                &self.open_work_requests(),
            ));
        }
        out
    }

    /// The run's work requests to a person or a program that no answer took yet (a
    /// process's; see [`crate::process`]).
    pub fn open_work_requests(&self) -> Vec<crate::process::OpenWorkRequest> {
        crate::process::open_work_requests(&self.run, |seq| {
            self.payloads.get(seq as usize)?.try_json().ok().cloned()
        })
    }
}

fn step_name(run: &Run, step: u32) -> &str {
    run.spec()
        .steps
        .get(step as usize)
        .map(|s| s.name.as_str())
        .unwrap_or("?")
}

fn param_name(run: &Run, step: u32, param: u32) -> String {
    run.spec()
        .steps
        .get(step as usize)
        .and_then(|s| s.params.get(param as usize))
        .map(|p| {
            let types: Vec<&str> = p
                .types
                .iter()
                .map(|t| run.spec().types[*t as usize].name.as_str())
                .collect();
            format!("`{}` ({})", p.name, types.join(" | "))
        })
        .unwrap_or_else(|| format!("#{param}"))
}

fn event_label(run: &Run, seq: u32) -> String {
    match run.log().get(seq as usize) {
        Some(e) => format!("#{seq} {}", run.type_name(e.ty)),
        None => format!("#{seq}"),
    }
}

fn origin_label(run: &Run, origin: Origin) -> String {
    match origin {
        Origin::Outside => "outside".to_string(),
        Origin::Execution(x) => match run.execution(x) {
            Some(e) => format!("{x} {}", step_name(run, e.step)),
            None => x.to_string(),
        },
    }
}

fn skip_text(run: &Run, step: u32, reason: &SkipReason) -> String {
    match reason {
        SkipReason::RunTerminated => "the run had ended".into(),
        SkipReason::RequiredMissing { param } => {
            format!(
                "required parameter {} has no event",
                param_name(run, step, *param)
            )
        }
        SkipReason::FixedListShort { param, have, need } => format!(
            "fixed list {} has {have} of {need} events",
            param_name(run, step, *param)
        ),
        SkipReason::BudgetExhausted { max } => {
            format!("max_executions_per_run = {max} reached")
        }
        SkipReason::InputSetAlreadyRan { by } => format!("the same inputs already ran in {by}"),
        SkipReason::PreconditionFalse => "its precondition returned false".into(),
    }
}

/// Renders the decision records with names.
pub fn timeline(run: &Run) -> String {
    timeline_with(run, &[])
}

/// [`timeline`], naming the executions that showed display events.
pub fn timeline_with(run: &Run, display_by: &[(u32, saap_dispatch::ExecutionId)]) -> String {
    let mut out = String::new();
    for r in run.records() {
        let line = match &r {
            Record::RunStarted { seq } => format!("run started by {}", event_label(run, *seq)),
            Record::EventAppended { seq, origin } => {
                let e = run.log()[*seq as usize];
                let origin = match display_by.iter().find(|(s, _)| s == seq) {
                    Some((_, x)) => &Origin::Execution(*x),
                    None => origin,
                };
                format!(
                    "{}  [{}] id {} from {}",
                    event_label(run, *seq),
                    e.kind.label(),
                    e.id,
                    origin_label(run, *origin)
                )
            }
            Record::DuplicateEvent { first_seq, origin } => format!(
                "  duplicate of {} from {} dropped",
                event_label(run, *first_seq),
                origin_label(run, *origin)
            ),
            Record::OrphanEvent { seq } => {
                format!(
                    "  {} refused: the run has not begun",
                    event_label(run, *seq)
                )
            }
            Record::Candidate { trigger, step } => format!(
                "  candidate `{}` for {}",
                step_name(run, *step),
                event_label(run, *trigger)
            ),
            Record::Skipped {
                trigger: _,
                step,
                reason,
            } => format!(
                "    skip `{}`: {}",
                step_name(run, *step),
                skip_text(run, *step, reason)
            ),
            Record::PreconditionEvaluated {
                trigger: _,
                step,
                result,
            } => format!("    precondition of `{}` = {result}", step_name(run, *step)),
            Record::FixedListOverflow {
                trigger,
                step,
                param,
            } => format!(
                "    fixed list {} of `{}` is full: {} binds nothing",
                param_name(run, *step, *param),
                step_name(run, *step),
                event_label(run, *trigger)
            ),
            Record::ExecutionStarted {
                execution,
                step,
                trigger,
            } => {
                let inputs: Vec<String> = run
                    .bindings(*execution)
                    .iter()
                    .enumerate()
                    .map(|(pi, b)| {
                        let seqs: Vec<String> = run
                            .bound_seqs(*step, pi as u32, *b)
                            .iter()
                            .map(|s| format!("#{s}"))
                            .collect();
                        let name = run.spec().steps[*step as usize].params[pi].name.as_str();
                        format!("{name}=[{}]", seqs.join(","))
                    })
                    .collect();
                format!(
                    "    start {execution} `{}` on {} with {}",
                    step_name(run, *step),
                    event_label(run, *trigger),
                    inputs.join(" ")
                )
            }
            Record::ExecutionRetried { execution, attempt } => {
                format!("  retry {execution} (attempt {attempt}) after a restart")
            }
            Record::ExecutionCompleted {
                execution,
                attempt: _,
                outputs,
            } => format!(
                "  {} completed with {outputs} event(s)",
                origin_label(run, Origin::Execution(*execution))
            ),
            Record::ExecutionFailed {
                execution,
                attempt: _,
                stop_on_error,
            } => {
                let err = run.execution_error(*execution).unwrap_or("");
                format!(
                    "  {} failed: {err} (stop_on_error = {stop_on_error})",
                    origin_label(run, Origin::Execution(*execution))
                )
            }
            Record::RunTerminated { seq, by } => format!(
                "run ended by {} ({})",
                event_label(run, *seq),
                match by {
                    Termination::Stop => "stop",
                    Termination::Exception => "exception",
                }
            ),
            Record::EventAfterStop { seq, origin } => format!(
                "{} after the stop, from {}: kept as evidence, not dispatched",
                event_label(run, *seq),
                origin_label(run, *origin)
            ),
            Record::TimerSet { timer, execution } => format!(
                "  {} set timer {timer}: {} due {}",
                origin_label(run, Origin::Execution(*execution)),
                run.timer_type_name(*timer),
                saap_dispatch::render::due_text(run, *timer)
            ),
            Record::TimerFired { timer } => format!(
                "timer {timer} fired: {} due {}",
                run.timer_type_name(*timer),
                saap_dispatch::render::due_text(run, *timer)
            ),
            Record::TimerDropped { timer } => format!(
                "  timer {timer} dropped ({} due {}): the run ended first",
                run.timer_type_name(*timer),
                saap_dispatch::render::due_text(run, *timer)
            ),
            Record::ChildRequested { child, execution } => format!(
                "  {} delegated: child {child}{}",
                origin_label(run, Origin::Execution(*execution)),
                child_label(run, *child)
            ),
            Record::ChildEnded { child } => {
                format!("child {child} ended{}", child_label(run, *child))
            }
            Record::ChildAbandoned { child } => format!(
                "  child {child} abandoned{}: the run ended or was cancelled first (its run is cancelled)",
                child_label(run, *child)
            ),
            Record::ObligationUnmet { child } => format!(
                "  unmet obligation: no step takes the end of child {child}{}",
                child_label(run, *child)
            ),
            Record::ChildTimedOut { child } => format!(
                "child {child} timed out{}: its deadline came first (its run is cancelled)",
                child_label(run, *child)
            ),
            Record::BudgetGranted { .. } => {
                saap_dispatch::render::budget_text(&r).unwrap_or_default()
            }
            Record::BudgetSpent { .. } => format!(
                "  {}",
                saap_dispatch::render::budget_text(&r).unwrap_or_default()
            ),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// A run's budget in one line (`None`: it has none): its limits, what it used, what is held.
pub fn budget_text(run: &Run) -> Option<String> {
    let b = run.budget()?;
    let started = run.executions().len();
    let held = run.held().count();
    let executions = match b.max_executions {
        Some(max) => format!(
            "{max} executions in all ({} ran, {held} held)",
            started - held
        ),
        None => "executions unlimited".to_string(),
    };
    let time = match b.until_ns {
        Some(t) if b.wall_spent => format!("time ended {}", saap_dispatch::render::utc_text(t)),
        Some(t) => format!("time until {}", saap_dispatch::render::utc_text(t)),
        None => "time unlimited".to_string(),
    };
    let mut meters = String::new();
    if let Some(max) = b.tokens.max {
        meters.push_str(&format!(", {} of {max} tokens", b.tokens.used));
    }
    if let Some(max) = b.cost_micros.max {
        meters.push_str(&format!(
            ", cost {} of {}",
            saap_dispatch::render::cost_text(b.cost_micros.used),
            saap_dispatch::render::cost_text(max)
        ));
    }
    let state = if run.budget_spent() && !run.is_terminated() {
        "; spent: `resume RUN` grants more"
    } else {
        ""
    };
    Some(format!("budget: {executions}, {time}{meters}{state}"))
}

/// A run's budget as JSON (`None`: it has none): `{max_executions, executions, held, until,
/// spent}`.
pub fn budget_json(run: &Run) -> Option<serde_json::Value> {
    let b = run.budget()?;
    Some(serde_json::json!({
        "max_executions": b.max_executions,
        "executions": run.executions().len(),
        "held": run.held().map(|x| x.to_string()).collect::<Vec<_>>(),
        "until": b.until_ns.map(saap_dispatch::render::utc_text),
        "max_tokens": b.tokens.max,
        "tokens": b.tokens.used,
        "max_cost": b.cost_micros.max.map(saap_dispatch::render::cost_text),
        "cost": saap_dispatch::render::cost_text(b.cost_micros.used),
        "spent": run.budget_spent(),
    }))
}

/// Why a run whose budget is spent waits, what it holds and how to go on.
pub fn budget_spent_text(run: &Run) -> String {
    let held: Vec<String> = run
        .held()
        .filter_map(|x| {
            run.execution(x)
                .map(|e| format!("`{}` ({x})", step_name(run, e.step)))
        })
        .collect();
    let why = match run.budget() {
        Some(b) if b.wall_spent => "its wall time ended".to_string(),
        Some(b) if b.tokens.held_from.is_some() => {
            format!("its steps used {} tokens", b.tokens.used)
        }
        Some(b) if b.cost_micros.held_from.is_some() => format!(
            "its model calls cost {}",
            saap_dispatch::render::cost_text(b.cost_micros.used)
        ),
        Some(b) => format!(
            "it ran the {} executions it was granted",
            b.max_executions.unwrap_or_default()
        ),
        None => "its budget is spent".to_string(),
    };
    let held = if held.is_empty() {
        "nothing is held yet: what it runs next will wait".to_string()
    } else {
        format!("held, not run: {}", held.join(", "))
    };
    format!(
        "budget spent: {why}; {held}. Resume it with `resume RUN` (the first budget again) or `resume RUN --raise executions=N` (or time=DURATION, tokens=N, cost=AMOUNT)"
    )
}

/// A child's run id (its request's event id), as ` (run ID)`.
fn child_label(run: &Run, child: u32) -> String {
    match run.children().get(child as usize) {
        Some(c) => format!(" (run {})", c.request),
        None => String::new(),
    }
}

/// What a run is waiting for, in words.
pub fn waiting_for(run: &Run, failure: Option<&str>) -> String {
    let mut out = String::new();
    if let Some(f) = failure {
        let _ = writeln!(out, "the engine stopped the run: {f}");
    }
    match run.status() {
        RunStatus::Terminated { by } => {
            let _ = writeln!(out, "the run has ended (by {})", event_label(run, by));
            return out;
        }
        RunStatus::NotStarted => {
            let _ = writeln!(out, "the run has not begun: no start event yet");
            return out;
        }
        RunStatus::Live => {}
    }
    if run.budget_spent() {
        let _ = writeln!(out, "{}", budget_spent_text(run));
    }
    if let Some(due) = run.next_timer_due() {
        let _ = writeln!(
            out,
            "{} timer(s) pending, the next due {}",
            run.pending_timer_count(),
            saap_dispatch::render::utc_text(due)
        );
    }
    for (i, c) in run.children().iter().enumerate() {
        if let saap_dispatch::run::ChildState::Unmet { seq } = c.state {
            let _ = writeln!(
                out,
                "unmet obligation: child {i} (run {}) ended with {}, which no step takes; \
                 the run cannot get what it delegated for (take both ends of a child: \
                 Either<AgentInTheLoopResponseEvent, AgentInTheLoopExceptionEvent>)",
                c.request,
                event_label(run, seq)
            );
        }
    }
    for x in run.running() {
        if let Some(e) = run.execution(x) {
            let _ = writeln!(
                out,
                "step `{}` is running ({x}, attempt {})",
                step_name(run, e.step),
                e.attempt
            );
        }
    }
    let spec = run.spec();
    for (si, s) in spec.steps.iter().enumerate() {
        let si = si as u32;
        let ran = run.execution_count(si) > 0;
        let last_skip = run.records().iter().rev().find_map(|r| match r {
            Record::Skipped { step, reason, .. } if step == si => Some(reason),
            _ => None,
        });
        if ran && !matches!(last_skip, Some(SkipReason::PreconditionFalse)) {
            continue;
        }
        let mut missing = Vec::new();
        for (pi, p) in s.params.iter().enumerate() {
            let have = run
                .log()
                .iter()
                .filter(|e| matches!(e.ty, EventTy::Known(t) if p.types.contains(&t)))
                .count();
            match p.kind {
                ParamKind::Required if have == 0 => {
                    missing.push(format!("required {}", param_name(run, si, pi as u32)))
                }
                ParamKind::FixedList if have < p.size as usize => missing.push(format!(
                    "fixed list {} has {have} of {}",
                    param_name(run, si, pi as u32),
                    p.size
                )),
                _ => {}
            }
        }
        if !missing.is_empty() {
            let _ = writeln!(out, "step `{}` waits for: {}", s.name, missing.join("; "));
        } else if let Some(reason) = last_skip {
            let _ = writeln!(
                out,
                "step `{}` last skipped: {}",
                s.name,
                skip_text(run, si, &reason)
            );
        } else if !ran {
            let _ = writeln!(out, "step `{}` has not been triggered", s.name);
        }
    }
    if out.is_empty() {
        out.push_str("nothing is running and no step lacks inputs: the run is idle without a stop event (does a step return a StopEvent?)\n");
    }
    out
}

fn node_id(prefix: &str, name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("{prefix}_{clean}")
}

/// The workflow's graph as a Mermaid flowchart: events are rounded nodes, steps are boxes;
/// edges into a step are labelled with the parameter kind when it is not required.
pub fn mermaid(spec: &WorkflowSpec) -> String {
    let mut out = String::from("flowchart LR\n");
    let mut events: Vec<&str> = Vec::new();
    for s in &spec.steps {
        for p in &s.params {
            events.extend(p.types.iter().map(String::as_str));
        }
        events.extend(s.outputs.iter().map(String::as_str));
    }
    events.sort_unstable();
    events.dedup();
    for e in &events {
        let _ = writeln!(out, "  {}([{e}])", node_id("e", e));
    }
    for s in &spec.steps {
        let mut label = s.name.clone();
        if let Some(m) = s.max_executions_per_run {
            let _ = write!(label, " ≤{m}");
        }
        if let Some(p) = &s.precondition {
            let _ = write!(label, " ?{}", p.name);
        }
        let _ = writeln!(out, "  {}[\"{label}\"]", node_id("s", &s.name));
        for p in &s.params {
            for t in &p.types {
                let edge = match p.kind {
                    ParamKind::Required => " --> ".to_string(),
                    ParamKind::Optional => " -. optional .-> ".to_string(),
                    ParamKind::List => " -- list --> ".to_string(),
                    ParamKind::FixedList => format!(" -- \"fixed {}\" --> ", p.size.unwrap_or(0)),
                };
                let _ = writeln!(out, "  {}{edge}{}", node_id("e", t), node_id("s", &s.name));
            }
        }
        for o in &s.outputs {
            let _ = writeln!(out, "  {} --> {}", node_id("s", &s.name), node_id("e", o));
        }
    }
    out
}

/// Whether an execution state is final.
pub fn is_finished(state: ExecState) -> bool {
    state != ExecState::Running
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use saap_dispatch::spec::{ParamSpec, StepSpec};

    #[test]
    fn mermaid_draws_events_steps_and_param_kinds() {
        let spec = WorkflowSpec {
            format: 1,
            name: "W".into(),
            description: None,
            events: vec![],
            steps: vec![StepSpec {
                name: "join".into(),
                params: vec![
                    ParamSpec {
                        name: "parts".into(),
                        kind: ParamKind::FixedList,
                        types: vec!["Part".into()],
                        size: Some(3),
                    },
                    ParamSpec {
                        name: "hint".into(),
                        kind: ParamKind::Optional,
                        types: vec!["Hint".into()],
                        size: None,
                    },
                ],
                outputs: vec!["StopEvent".into()],
                output_max: Default::default(),
                delayed: Vec::new(),
                returns_together: vec![],
                max_executions_per_run: Some(1),
                stop_on_error: true,
                precondition: None,
                description: None,
                delegates_to: Vec::new(),
            }],
            agents: Vec::new(),
            simulation: None,
        };
        let m = mermaid(&spec);
        assert!(m.starts_with("flowchart LR\n"));
        assert!(m.contains("e_Part -- \"fixed 3\" --> s_join"), "{m}");
        assert!(m.contains("e_Hint -. optional .-> s_join"), "{m}");
        assert!(m.contains("s_join[\"join ≤1\"]"), "{m}");
        assert!(m.contains("s_join --> e_StopEvent"), "{m}");
    }
}
