//! Rendering a run for people and machines: decision records with step, parameter and event
//! names instead of indexes, as text lines or JSON values. Used by `simulate`, `explore`,
//! `explain` and the runtime's `show`.
//!
//! Formatting only: no decisions are made here.

use crate::compiled::CompiledSpec;
use crate::ids::{ExecutionId, Seq, StepIdx};
use crate::record::{Origin, Record, SkipReason, Termination};
use crate::run::{ExecState, Run};
use crate::sim::Arrival;
use serde_json::{Value, json};

/// A display label per logged event: the arrival's label when the spec gave one, else
/// `Type#seq`.
#[derive(Debug, Clone)]
pub struct EventLabels(Vec<String>);

impl EventLabels {
    pub fn for_run(run: &Run, arrivals: &[Arrival]) -> EventLabels {
        // Looked up by id (the first arrival with an id gives its label): linear in the log.
        let mut labelled: crate::ids::FastMap<crate::ids::EventId, &str> = Default::default();
        for a in arrivals.iter().filter(|a| a.labelled) {
            labelled.entry(a.event.id).or_insert(a.label.as_str());
        }
        let labels = run
            .log()
            .iter()
            .enumerate()
            .map(|(seq, ev)| match labelled.get(&ev.id) {
                Some(l) => (*l).to_string(),
                None => format!("{}#{seq}", run.type_name(ev.ty)),
            })
            .collect();
        EventLabels(labels)
    }
    pub fn get(&self, seq: Seq) -> &str {
        self.0.get(seq as usize).map(String::as_str).unwrap_or("?")
    }
}

fn step_name(spec: &CompiledSpec, step: StepIdx) -> &str {
    &spec.steps[step as usize].name
}

fn param_name(spec: &CompiledSpec, step: StepIdx, param: u32) -> &str {
    &spec.steps[step as usize].params[param as usize].name
}

/// The human sentence for a skip reason.
pub fn skip_text(spec: &CompiledSpec, step: StepIdx, reason: &SkipReason) -> String {
    match reason {
        SkipReason::RunTerminated => "the run has ended".to_string(),
        SkipReason::RequiredMissing { param } => format!(
            "required parameter `{}` has no event yet",
            param_name(spec, step, *param)
        ),
        SkipReason::FixedListShort { param, have, need } => format!(
            "fixed list `{}` has {have} of {need} events",
            param_name(spec, step, *param)
        ),
        SkipReason::BudgetExhausted { max } => {
            format!("max_executions_per_run = {max} already used")
        }
        SkipReason::InputSetAlreadyRan { by } => {
            format!("the same input set already ran in {by}")
        }
        SkipReason::PreconditionFalse => "precondition returned false".to_string(),
    }
}

fn origin_text(run: &Run, origin: Origin) -> String {
    match origin {
        Origin::Outside => "from outside".to_string(),
        Origin::Execution(x) => match run.execution(x) {
            Some(e) => format!("from {} {x}", step_name(run.spec(), e.step)),
            None => format!("from {x}"),
        },
    }
}

/// Bindings of an execution as `param=[labels]` text.
pub fn bindings_text(run: &Run, labels: &EventLabels, x: ExecutionId) -> String {
    let Some(e) = run.execution(x) else {
        return String::new();
    };
    let step = &run.spec().steps[e.step as usize];
    run.bindings(x)
        .iter()
        .enumerate()
        .map(|(pi, b)| {
            let seqs = run.bound_seqs(e.step, pi as u32, *b);
            let names: Vec<&str> = seqs.iter().map(|s| labels.get(*s)).collect();
            let value = match step.params[pi].kind {
                crate::spec::ParamKind::Required | crate::spec::ParamKind::Optional => {
                    names.first().copied().unwrap_or("none").to_string()
                }
                _ => format!("[{}]", names.join(", ")),
            };
            format!("{}={value}", step.params[pi].name)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One record as an indented text line (None for records that the timeline shows
/// elsewhere, such as `Candidate`, which is implied by what follows it).
pub fn record_text(run: &Run, labels: &EventLabels, r: &Record) -> Option<String> {
    let spec = run.spec();
    let ev = |seq: Seq| {
        let e = &run.log()[seq as usize];
        format!("[{seq}] {} ({})", labels.get(seq), run.type_name(e.ty))
    };
    Some(match r {
        Record::RunStarted { .. } => "run started".to_string(),
        Record::EventAppended { seq, origin } => {
            format!("{} {}", ev(*seq), origin_text(run, *origin))
        }
        Record::DuplicateEvent { first_seq, origin } => format!(
            "duplicate of {} {} dropped",
            ev(*first_seq),
            origin_text(run, *origin)
        ),
        Record::OrphanEvent { seq } => format!(
            "{} refused: the run has not begun (orphan evidence)",
            ev(*seq)
        ),
        Record::Candidate { .. } => return None,
        Record::Skipped { step, reason, .. } => format!(
            "    {}: skipped — {}",
            step_name(spec, *step),
            skip_text(spec, *step, reason)
        ),
        Record::PreconditionEvaluated { step, result, .. } => format!(
            "    {}: precondition `{}` → {result}",
            step_name(spec, *step),
            spec.steps[*step as usize]
                .precondition
                .as_ref()
                .map(|p| p.name.as_str())
                .unwrap_or("?")
        ),
        Record::FixedListOverflow { step, param, .. } => format!(
            "    {}: fixed list `{}` is already full; this event binds nothing new",
            step_name(spec, *step),
            param_name(spec, *step, *param)
        ),
        Record::ExecutionStarted {
            execution, step, ..
        } => format!(
            "    {}: started {execution} with {}",
            step_name(spec, *step),
            bindings_text(run, labels, *execution)
        ),
        Record::ExecutionRetried { execution, attempt } => {
            format!("{execution} runs again (attempt {attempt})")
        }
        Record::ExecutionCompleted {
            execution, outputs, ..
        } => format!(
            "{} {execution} completed, returning {outputs} event(s)",
            exec_step(run, *execution)
        ),
        Record::ExecutionFailed {
            execution,
            stop_on_error,
            ..
        } => format!(
            "{} {execution} failed: {}{}",
            exec_step(run, *execution),
            run.execution_error(*execution).unwrap_or(""),
            if *stop_on_error {
                " (stop_on_error: the run gets an ExceptionEvent)"
            } else {
                " (stop_on_error = false: the run continues)"
            }
        ),
        Record::RunTerminated { seq, by } => format!(
            "run terminated by {} ({})",
            ev(*seq),
            match by {
                Termination::Stop => "stop",
                Termination::Exception => "exception",
            }
        ),
        Record::EventAfterStop { seq, origin } => format!(
            "{} {} arrived AFTER STOP: kept as evidence, not dispatched",
            ev(*seq),
            origin_text(run, *origin)
        ),
        Record::TimerSet { timer, execution } => format!(
            "{} {execution} set timer {timer}: {} due at {}",
            exec_step(run, *execution),
            run.timer_type_name(*timer),
            due_text(run, *timer)
        ),
        Record::TimerFired { timer } => format!(
            "timer {timer} fired ({} due at {})",
            run.timer_type_name(*timer),
            due_text(run, *timer)
        ),
        Record::TimerDropped { timer } => format!(
            "timer {timer} dropped: the run ended before it came due ({} due at {})",
            run.timer_type_name(*timer),
            due_text(run, *timer)
        ),
        Record::ChildRequested { child, execution } => format!(
            "{} {execution} delegated: child {child}, {} by request {}",
            exec_step(run, *execution),
            child_mode(run, *child),
            child_request(run, *child)
        ),
        Record::ChildEnded { child } => format!(
            "child {child} ended (request {}): the event reporting it follows",
            child_request(run, *child)
        ),
        Record::ChildAbandoned { child } => format!(
            "child {child} abandoned: the run ended or was cancelled first (request {})",
            child_request(run, *child)
        ),
        Record::ObligationUnmet { child } => format!(
            "child {child} (request {}): no step takes the event reporting its end, an unmet obligation",
            child_request(run, *child)
        ),
        Record::ChildTimedOut { child } => format!(
            "child {child} timed out (request {}): its deadline's event follows, its run is cancelled",
            child_request(run, *child)
        ),
        Record::BudgetGranted { .. } | Record::BudgetSpent { .. } => budget_text(r)?,
    })
}

/// A budget record in words (`None` for any other record): what `show`, `explain` and
/// `simulate` print for it.
pub fn budget_text(r: &Record) -> Option<String> {
    Some(match r {
        Record::BudgetGranted {
            max_executions,
            until_ns,
            max_tokens,
            max_cost_micros,
        } => {
            let mut text = format!(
                "budget granted: {}, {}",
                max_executions.map_or_else(
                    || "executions unlimited".to_string(),
                    |n| format!("{n} executions in all")
                ),
                until_ns.map_or_else(
                    || "time unlimited".to_string(),
                    |t| format!("until {}", utc_text(t))
                )
            );
            if let Some(n) = max_tokens {
                text.push_str(&format!(", {n} tokens"));
            }
            if let Some(c) = max_cost_micros {
                text.push_str(&format!(", cost {}", cost_text(*c)));
            }
            text
        }
        Record::BudgetSpent { limit, held_from } => format!(
            "budget spent ({}): {held_from} and later executions wait until the run is resumed",
            match limit {
                crate::record::BudgetLimit::Executions { max } => format!("{max} executions ran"),
                crate::record::BudgetLimit::WallTime { until_ns } =>
                    format!("time ended {}", utc_text(*until_ns)),
                crate::record::BudgetLimit::Tokens { max } => format!("{max} tokens used"),
                crate::record::BudgetLimit::Cost { max_micros } =>
                    format!("cost {} reached", cost_text(*max_micros)),
            }
        ),
        _ => return None,
    })
}

/// A cost in millionths of the price table's currency, as a number (`0.25`).
pub fn cost_text(micros: u64) -> String {
    let whole = micros / 1_000_000;
    let frac = micros % 1_000_000;
    if frac == 0 {
        return whole.to_string();
    }
    let digits = format!("{frac:06}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// A timer's due time as RFC 3339 text (UTC).
pub fn due_text(run: &Run, timer: u32) -> String {
    match run.timers().get(timer as usize) {
        Some(t) => utc_text(t.due_ns),
        None => "?".to_string(),
    }
}

/// Nanoseconds since the Unix epoch as RFC 3339 text (UTC, to the millisecond).
pub fn utc_text(ns: u64) -> String {
    match jiff::Timestamp::from_nanosecond(ns as i128) {
        Ok(t) => format!("{t:.3}"),
        Err(_) => format!("{ns} ns after the epoch"),
    }
}

fn exec_step(run: &Run, x: ExecutionId) -> String {
    run.execution(x)
        .map(|e| step_name(run.spec(), e.step).to_string())
        .unwrap_or_default()
}

/// One record as JSON, with names and event ids.
pub fn record_json(run: &Run, labels: &EventLabels, r: &Record) -> Value {
    let spec = run.spec();
    let ev = |seq: Seq| {
        let e = &run.log()[seq as usize];
        json!({
            "seq": seq,
            "label": labels.get(seq),
            "type": run.type_name(e.ty),
            "event_id": e.id.to_string(),
        })
    };
    let origin = |o: Origin| match o {
        Origin::Outside => json!("outside"),
        Origin::Execution(x) => json!({ "execution": x.to_string(), "step": exec_step(run, x) }),
    };
    match r {
        Record::RunStarted { seq } => json!({"record": "run_started", "event": ev(*seq)}),
        Record::EventAppended { seq, origin: o } => {
            let e = &run.log()[*seq as usize];
            json!({"record": "event_appended", "event": ev(*seq), "kind": e.kind.label(), "origin": origin(*o)})
        }
        Record::DuplicateEvent {
            first_seq,
            origin: o,
        } => {
            json!({"record": "duplicate_event", "first": ev(*first_seq), "origin": origin(*o)})
        }
        Record::OrphanEvent { seq } => json!({"record": "orphan_event", "event": ev(*seq)}),
        Record::Candidate { trigger, step } => {
            json!({"record": "candidate", "trigger": trigger, "step": step_name(spec, *step)})
        }
        Record::Skipped {
            trigger,
            step,
            reason,
        } => {
            let mut v = json!({
                "record": "skipped",
                "trigger": trigger,
                "step": step_name(spec, *step),
                "reason": serde_json::to_value(reason).unwrap_or(Value::Null),
                "why": skip_text(spec, *step, reason),
            });
            if let SkipReason::RequiredMissing { param }
            | SkipReason::FixedListShort { param, .. } = reason
            {
                v["param"] = json!(param_name(spec, *step, *param));
            }
            v
        }
        Record::PreconditionEvaluated {
            trigger,
            step,
            result,
        } => {
            json!({"record": "precondition_evaluated", "trigger": trigger, "step": step_name(spec, *step), "result": result})
        }
        Record::FixedListOverflow {
            trigger,
            step,
            param,
        } => {
            json!({"record": "fixed_list_overflow", "trigger": trigger, "step": step_name(spec, *step), "param": param_name(spec, *step, *param)})
        }
        Record::ExecutionStarted {
            execution,
            step,
            trigger,
        } => {
            json!({"record": "execution_started", "execution": execution.to_string(), "step": step_name(spec, *step), "trigger": trigger, "bindings": bindings_json(run, labels, *execution)})
        }
        Record::ExecutionRetried { execution, attempt } => {
            json!({"record": "execution_retried", "execution": execution.to_string(), "attempt": attempt})
        }
        Record::ExecutionCompleted {
            execution,
            attempt,
            outputs,
        } => {
            json!({"record": "execution_completed", "execution": execution.to_string(), "attempt": attempt, "outputs": outputs})
        }
        Record::ExecutionFailed {
            execution,
            attempt,
            stop_on_error,
        } => {
            json!({"record": "execution_failed", "execution": execution.to_string(), "attempt": attempt, "stop_on_error": stop_on_error,
            "error": run.execution_error(*execution)})
        }
        Record::RunTerminated { seq, by } => {
            json!({"record": "run_terminated", "event": ev(*seq), "by": by})
        }
        Record::EventAfterStop { seq, origin: o } => {
            json!({"record": "event_after_stop", "event": ev(*seq), "origin": origin(*o)})
        }
        Record::TimerSet { timer, execution } => {
            json!({"record": "timer_set", "timer": timer, "execution": execution.to_string(), "step": exec_step(run, *execution),
            "event": timer_json(run, *timer)})
        }
        Record::TimerFired { timer } => {
            json!({"record": "timer_fired", "timer": timer, "event": timer_json(run, *timer)})
        }
        Record::TimerDropped { timer } => {
            json!({"record": "timer_dropped", "timer": timer, "event": timer_json(run, *timer)})
        }
        Record::ChildRequested { child, execution } => {
            json!({"record": "child_requested", "child": child, "execution": execution.to_string(),
            "step": exec_step(run, *execution), "request": child_request(run, *child),
            "detached": child_mode(run, *child) == "detached"})
        }
        Record::ChildEnded { child } => {
            json!({"record": "child_ended", "child": child, "request": child_request(run, *child)})
        }
        Record::ChildAbandoned { child } => {
            json!({"record": "child_abandoned", "child": child, "request": child_request(run, *child)})
        }
        Record::ObligationUnmet { child } => {
            json!({"record": "obligation_unmet", "child": child, "request": child_request(run, *child)})
        }
        Record::ChildTimedOut { child } => {
            json!({"record": "child_timed_out", "child": child, "request": child_request(run, *child)})
        }
        Record::BudgetGranted {
            max_executions,
            until_ns,
            max_tokens,
            max_cost_micros,
        } => {
            json!({"record": "budget_granted", "max_executions": max_executions,
            "until": until_ns.map(utc_text), "until_ns": until_ns, "max_tokens": max_tokens,
            "max_cost_micros": max_cost_micros})
        }
        Record::BudgetSpent { limit, held_from } => {
            use crate::record::BudgetLimit;
            let (kind, max) = match limit {
                BudgetLimit::Executions { max } => ("executions", json!({"max_executions": max})),
                BudgetLimit::WallTime { until_ns } => ("wall_time", json!({"until_ns": until_ns})),
                BudgetLimit::Tokens { max } => ("tokens", json!({"max_tokens": max})),
                BudgetLimit::Cost { max_micros } => {
                    ("cost", json!({"max_cost_micros": max_micros}))
                }
            };
            let mut v = json!({"record": "budget_spent", "limit": kind,
            "held_from": held_from.to_string()});
            if let (Some(v), Some(m)) = (v.as_object_mut(), max.as_object()) {
                v.extend(m.clone());
            }
            v
        }
    }
}

/// A child's request event id (hex), or `?` for a child the run does not have.
fn child_request(run: &Run, child: u32) -> String {
    run.children()
        .get(child as usize)
        .map_or_else(|| "?".to_string(), |c| c.request.to_string())
}

/// Whether a child was requested awaited or detached.
fn child_mode(run: &Run, child: u32) -> &'static str {
    match run.children().get(child as usize).map(|c| c.state) {
        Some(crate::run::ChildState::Detached) => "detached",
        _ => "awaited",
    }
}

/// A timer's event and due time as JSON.
fn timer_json(run: &Run, timer: u32) -> Value {
    match run.timers().get(timer as usize) {
        Some(t) => json!({
            "type": run.timer_type_name(timer),
            "event_id": t.event_id.to_string(),
            "due_ns": t.due_ns,
            "due": utc_text(t.due_ns),
        }),
        None => Value::Null,
    }
}

/// The bindings of an execution as `{param: [labels]}`.
pub fn bindings_json(run: &Run, labels: &EventLabels, x: ExecutionId) -> Value {
    let Some(e) = run.execution(x) else {
        return Value::Null;
    };
    let step = &run.spec().steps[e.step as usize];
    let mut map = serde_json::Map::new();
    for (pi, b) in run.bindings(x).iter().enumerate() {
        let seqs = run.bound_seqs(e.step, pi as u32, *b);
        map.insert(
            step.params[pi].name.clone(),
            Value::Array(seqs.iter().map(|s| json!(labels.get(*s))).collect()),
        );
    }
    Value::Object(map)
}

/// Every execution as JSON: step, trigger, state, bindings, outputs.
pub fn executions_json(run: &Run, labels: &EventLabels) -> Value {
    Value::Array(
        run.executions()
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let x = ExecutionId(i as u32);
                let outputs: Vec<&str> = run
                    .log()
                    .iter()
                    .enumerate()
                    .filter(|(_, ev)| ev.origin == Origin::Execution(x))
                    .map(|(s, _)| labels.get(s as Seq))
                    .collect();
                json!({
                    "execution": x.to_string(),
                    "step": step_name(run.spec(), e.step),
                    "trigger": labels.get(e.trigger),
                    "attempt": e.attempt,
                    "state": match e.state { ExecState::Running => "running", ExecState::Completed => "completed", ExecState::Failed => "failed" },
                    "error": run.execution_error(x),
                    "bindings": bindings_json(run, labels, x),
                    "outputs": outputs,
                })
            })
            .collect(),
    )
}

/// Executions started per step, in step order.
pub fn executions_per_step(run: &Run) -> Vec<(String, usize)> {
    let mut counts = vec![0usize; run.spec().steps.len()];
    for e in run.executions() {
        counts[e.step as usize] += 1;
    }
    run.spec()
        .steps
        .iter()
        .zip(counts)
        .map(|(s, c)| (s.name.clone(), c))
        .collect()
}
