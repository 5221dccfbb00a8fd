//! A saap journal ([`JournalRun`]) as the dispatch core's inputs and as its
//! [`History`] file, and its replay against a spec with the first disagreement named.
//!
//! The conversion follows the documented journal schema (`crates/saap/src/backend/mod.rs`:
//! `{"i": {"in": "append"|"complete"|"retry", …}, "pre": [bool…]}`, events as
//! `{"id", "n", "k", "p"}`) exactly as the runtime's stored-run reader does, so the History
//! made here equals the one `<agent> show RUN --history-out` writes for the same run. An event
//! type the spec does not declare stays a foreign event with its stored classification (the
//! runtime does the same); the History file names it like any other.
//!
//! Must not read anything (the rows are given) nor decide anything (the core does).

use super::JournalRun;
use crate::error::{InspectError, Result, clip};
use saap_dispatch::record::Record;
use saap_dispatch::replay::{
    HISTORY_FORMAT, History, HistoryChild, HistoryEvent, HistoryInput, HistoryTimer,
    RecordedPreconditions, RunInput,
};
use saap_dispatch::run::timers::TimerRequest;
use saap_dispatch::run::{ChildRequest, NewEventType};
use saap_dispatch::{
    CompiledSpec, EventId, EventKind, ExecutionId, NewEvent, Outcome, Run, SkipReason, run_key,
};
use serde::Deserialize;
use std::sync::Arc;

/// An event as the journal stores it.
#[derive(Deserialize)]
struct StoredEvent {
    id: EventId,
    n: String,
    #[serde(default)]
    k: u8,
}

/// One journal input, as stored.
#[derive(Deserialize)]
#[serde(tag = "in", rename_all = "snake_case")]
enum StoredInput {
    Append {
        event: StoredEvent,
        /// A start event's budget, granted before it.
        #[serde(default)]
        budget: Option<StoredGrant>,
    },
    Complete {
        execution: u32,
        attempt: u32,
        #[serde(default)]
        outputs: Option<Vec<StoredEvent>>,
        #[serde(default)]
        error: Option<String>,
        /// Events returned for later delivery, set with the completion.
        #[serde(default)]
        timers: Vec<StoredTimer>,
        /// Requests among the outputs that started child runs.
        #[serde(default)]
        children: Vec<StoredChild>,
        /// What the execution's model calls used (a run with a token or cost budget).
        #[serde(default)]
        usage: Option<StoredUsage>,
    },
    Retry {
        execution: u32,
    },
    Clock {
        now_ns: u64,
    },
    ChildEnded {
        child: u32,
        event: StoredEvent,
    },
    /// More budget for the run (a resume).
    Budget(StoredGrant),
}

/// A budget grant as stored.
#[derive(Deserialize, Clone, Copy)]
struct StoredGrant {
    #[serde(default)]
    executions: Option<u32>,
    #[serde(default)]
    wall_ns: Option<u64>,
    #[serde(default)]
    tokens: Option<u64>,
    #[serde(default)]
    cost_micros: Option<u64>,
    now_ns: u64,
}

impl StoredGrant {
    fn input(self) -> RunInput {
        RunInput::Budget(saap_dispatch::run::budget::BudgetGrant {
            executions: self.executions,
            wall_ns: self.wall_ns,
            tokens: self.tokens,
            cost_micros: self.cost_micros,
            now_ns: self.now_ns,
        })
    }
    fn history(self) -> HistoryInput {
        HistoryInput::Budget {
            executions: self.executions,
            wall_ns: self.wall_ns,
            tokens: self.tokens,
            cost_micros: self.cost_micros,
            now_ns: self.now_ns,
        }
    }
}

/// What an execution's model calls used, as stored with its completion.
#[derive(Deserialize, Clone, Copy)]
struct StoredUsage {
    #[serde(default)]
    tokens: u64,
    #[serde(default)]
    cost_micros: u64,
}

/// A child run as stored with its completion.
#[derive(Deserialize)]
struct StoredChild {
    request: EventId,
    #[serde(default)]
    detached: bool,
    /// The event delivered in the child's end's place if that has not come by then.
    #[serde(default)]
    deadline: Option<StoredTimer>,
}

/// A timer as stored with its completion.
#[derive(Deserialize)]
struct StoredTimer {
    event: StoredEvent,
    due_ns: u64,
}

#[derive(Deserialize)]
struct StoredEntry {
    i: StoredInput,
}

/// The journal's inputs and records, decoded (names not yet resolved).
struct Decoded {
    inputs: Vec<StoredInput>,
    records: Vec<Record>,
}

fn decode(run_id: &str, j: &JournalRun) -> Result<Decoded> {
    let bad = |index: u64, what: &str, e: serde_json::Error| InspectError::UndecodableRun {
        run: clip(run_id),
        at: format!("{what} of journal entry {index}"),
        reason: e.to_string(),
    };
    let mut inputs = Vec::with_capacity(j.entries.len());
    let mut records = Vec::new();
    for (pos, row) in j.entries.iter().enumerate() {
        if row.index != pos as u64 {
            return Err(InspectError::UndecodableRun {
                run: clip(run_id),
                at: format!("journal entry {pos}"),
                reason: format!("entry {} found where entry {pos} was expected", row.index),
            });
        }
        let entry: StoredEntry = serde_json::from_value(row.entry.clone())
            .map_err(|e| bad(row.index, "the input", e))?;
        inputs.push(entry.i);
        for r in &row.records {
            records.push(
                serde_json::from_value(r.clone())
                    .map_err(|e| bad(row.index, "the decision records", e))?,
            );
        }
    }
    Ok(Decoded { inputs, records })
}

fn new_event(spec: &CompiledSpec, e: &StoredEvent) -> NewEvent {
    let ty = match spec.type_id(&e.n) {
        Some(t) => NewEventType::Known(t),
        None => NewEventType::Foreign {
            name: e.n.clone(),
            kind: EventKind::from_bits(e.k),
        },
    };
    NewEvent { id: e.id, ty }
}

/// The journal as the core's inputs (types resolved against `spec`) and its records.
pub fn inputs(
    run_id: &str,
    j: &JournalRun,
    spec: &CompiledSpec,
) -> Result<(Vec<RunInput>, Vec<Record>)> {
    let d = decode(run_id, j)?;
    let mut inputs = Vec::with_capacity(d.inputs.len());
    for i in &d.inputs {
        match i {
            StoredInput::Append { event, budget } => {
                inputs.extend(budget.map(StoredGrant::input));
                inputs.push(RunInput::Append(new_event(spec, event)));
            }
            StoredInput::Budget(g) => inputs.push(g.input()),
            StoredInput::Complete {
                execution,
                attempt,
                outputs,
                error,
                timers,
                children,
                usage,
            } => {
                // What its model calls used counts before its completion.
                if let Some(u) = usage {
                    inputs.push(RunInput::Usage {
                        tokens: u.tokens,
                        cost_micros: u.cost_micros,
                    });
                }
                inputs.push(RunInput::Complete {
                    execution: ExecutionId(*execution),
                    attempt: *attempt,
                    outcome: match (outputs, error) {
                        (_, Some(msg)) => Outcome::Failed(msg.clone()),
                        (Some(outs), None) => {
                            Outcome::Returned(outs.iter().map(|e| new_event(spec, e)).collect())
                        }
                        (None, None) => Outcome::Returned(Vec::new()),
                    },
                });
                if !timers.is_empty() {
                    inputs.push(RunInput::Schedule {
                        execution: ExecutionId(*execution),
                        timers: timers
                            .iter()
                            .map(|t| TimerRequest {
                                event: new_event(spec, &t.event),
                                due_ns: t.due_ns,
                            })
                            .collect(),
                    });
                }
                if !children.is_empty() {
                    inputs.push(RunInput::Delegate {
                        execution: ExecutionId(*execution),
                        children: children
                            .iter()
                            .map(|c| ChildRequest {
                                request: c.request,
                                detached: c.detached,
                                deadline: c.deadline.as_ref().map(|t| TimerRequest {
                                    event: new_event(spec, &t.event),
                                    due_ns: t.due_ns,
                                }),
                            })
                            .collect(),
                    });
                }
            }
            StoredInput::Retry { execution } => inputs.push(RunInput::Retry {
                execution: ExecutionId(*execution),
            }),
            StoredInput::Clock { now_ns } => inputs.push(RunInput::Clock { now_ns: *now_ns }),
            StoredInput::ChildEnded { child, event } => inputs.push(RunInput::ChildEnded {
                child: *child,
                event: new_event(spec, event),
            }),
        }
    }
    Ok((inputs, d.records))
}

/// The journal as a [`History`] file (what `<agent> show RUN --history-out` writes).
pub fn history(run_id: &str, j: &JournalRun) -> Result<History> {
    let d = decode(run_id, j)?;
    let ev = |e: &StoredEvent| HistoryEvent {
        event_id: e.id,
        event_type: e.n.clone(),
    };
    let mut inputs = Vec::with_capacity(d.inputs.len());
    for i in &d.inputs {
        if let StoredInput::Complete { usage: Some(u), .. } = i {
            inputs.push(HistoryInput::Usage {
                tokens: u.tokens,
                cost_micros: u.cost_micros,
            });
        }
        match i {
            StoredInput::Append { event, budget } => {
                inputs.extend(budget.map(StoredGrant::history));
                inputs.push(HistoryInput::Append { event: ev(event) });
            }
            StoredInput::Budget(g) => inputs.push(g.history()),
            StoredInput::Complete {
                execution,
                attempt,
                error: Some(error),
                ..
            } => inputs.push(HistoryInput::Fail {
                execution: ExecutionId(*execution),
                attempt: *attempt,
                error: error.clone(),
            }),
            StoredInput::Complete {
                execution,
                attempt,
                outputs,
                error: None,
                timers,
                children,
                ..
            } => {
                inputs.push(HistoryInput::Complete {
                    execution: ExecutionId(*execution),
                    attempt: *attempt,
                    returned: outputs.iter().flatten().map(ev).collect(),
                });
                if !timers.is_empty() {
                    inputs.push(HistoryInput::Schedule {
                        execution: ExecutionId(*execution),
                        timers: timers
                            .iter()
                            .map(|t| HistoryTimer {
                                event: ev(&t.event),
                                due_ns: t.due_ns,
                            })
                            .collect(),
                    });
                }
                if !children.is_empty() {
                    inputs.push(HistoryInput::Delegate {
                        execution: ExecutionId(*execution),
                        children: children
                            .iter()
                            .map(|c| HistoryChild {
                                request: c.request,
                                detached: c.detached,
                                deadline: c.deadline.as_ref().map(|t| HistoryTimer {
                                    event: ev(&t.event),
                                    due_ns: t.due_ns,
                                }),
                            })
                            .collect(),
                    });
                }
            }
            StoredInput::Retry { execution } => inputs.push(HistoryInput::Retry {
                execution: ExecutionId(*execution),
            }),
            StoredInput::Clock { now_ns } => inputs.push(HistoryInput::Clock { now_ns: *now_ns }),
            StoredInput::ChildEnded { child, event } => inputs.push(HistoryInput::ChildEnded {
                child: *child,
                event: ev(event),
            }),
        }
    }
    Ok(History {
        format: HISTORY_FORMAT,
        workflow: j.workflow.clone(),
        fingerprint: format!("{:016x}", j.fingerprint),
        run_key: run_key(run_id),
        inputs,
        records: d.records,
    })
}

/// Rebuilds the run through the core with its recorded precondition results and checks every
/// decision against the records. A spec that does not reproduce the run is refused
/// (`SAAP-I016`) with the first journal entry and decision that disagree.
pub fn replay(run_id: &str, j: &JournalRun, spec: Arc<CompiledSpec>) -> Result<Run> {
    let (inputs, records) = inputs(run_id, j, &spec)?;
    let mismatch = |detail: String| InspectError::SpecMismatch {
        run: clip(run_id),
        detail,
    };
    let changed = j.fingerprint != spec.fingerprint();
    let fix = format!(
        "give the spec of the agent that recorded it (`<agent> spec`, workflow `{}`)",
        clip(&j.workflow)
    );
    let mut pre = RecordedPreconditions::from_records(&records);
    let mut run = Run::new(spec.clone(), run_key(run_id));
    let mut first_diff = None;
    for (index, input) in inputs.iter().enumerate() {
        if let Err(e) = run.apply(input.clone(), &mut pre) {
            first_diff = Some(format!(
                "journal entry {index} ({}) cannot be applied: {e}",
                input_text(&run, input)
            ));
            break;
        }
        let now = run.records();
        let at = now
            .iter()
            .zip(&records)
            .position(|(a, b)| a != *b)
            .or_else(|| (now.len() > records.len()).then_some(records.len()));
        if let Some(at) = at {
            first_diff = Some(format!(
                "at journal entry {index} ({}), decision {at}: the run recorded {}, this spec decides {}",
                input_text(&run, input),
                records
                    .get(at)
                    .map_or("nothing more".to_owned(), |r| record_text(&run, r)),
                now.get(at)
                    .map_or("nothing more".to_owned(), |r| record_text(&run, &r)),
            ));
            break;
        }
    }
    if first_diff.is_none() && (run.records().len() != records.len() || pre.exhausted) {
        let at = run.records().len().min(records.len());
        first_diff = Some(format!(
            "after the last journal entry, decision {at}: the run recorded {}, this spec decides {}",
            records
                .get(at)
                .map_or("nothing more".to_owned(), |r| record_text(&run, r)),
            if pre.exhausted {
                "to evaluate a precondition the run never evaluated".to_owned()
            } else {
                "nothing more".to_owned()
            }
        ));
    }
    match (changed, first_diff) {
        (false, None) => {
            run.take_started();
            Ok(run)
        }
        (true, diff) => Err(mismatch(format!(
            "it was recorded by workflow `{}` with fingerprint {:016x}, the spec given (`{}`) has fingerprint {:016x}; {}; {fix}",
            clip(&j.workflow),
            j.fingerprint,
            clip(&spec.name),
            spec.fingerprint(),
            diff.map_or_else(
                || "every recorded decision replays the same, so the difference is in a part this run did not use".to_owned(),
                |d| format!("first disagreement {d}")
            )
        ))),
        (false, Some(d)) => Err(mismatch(format!(
            "{d}; the spec has the recorded fingerprint, so a precondition or the core changed; {fix}"
        ))),
    }
}

fn step_text(spec: &CompiledSpec, step: u32) -> String {
    spec.steps
        .get(step as usize)
        .map_or_else(|| format!("step #{step}"), |s| format!("step `{}`", s.name))
}

fn event_text(run: &Run, seq: u32) -> String {
    match run.log().get(seq as usize) {
        Some(e) => format!("event #{seq} {}", run.type_name(e.ty)),
        None => format!("event #{seq}"),
    }
}

fn input_text(run: &Run, input: &RunInput) -> String {
    let name = |e: &NewEvent| match &e.ty {
        NewEventType::Known(t) => run.spec().type_info(*t).name.clone(),
        NewEventType::Foreign { name, .. } => name.clone(),
    };
    match input {
        RunInput::Append(e) => format!("{} {} arrives", name(e), e.id),
        RunInput::Complete {
            execution,
            outcome: Outcome::Returned(out),
            ..
        } => {
            let names: Vec<String> = out.iter().map(name).collect();
            format!("execution {execution} returns [{}]", names.join(", "))
        }
        RunInput::Complete {
            execution,
            outcome: Outcome::Failed(_),
            ..
        } => format!("execution {execution} fails"),
        RunInput::Retry { execution } => format!("execution {execution} runs again"),
        RunInput::Schedule { execution, timers } => {
            let names: Vec<String> = timers.iter().map(|t| name(&t.event)).collect();
            format!(
                "execution {execution} sets timers for [{}]",
                names.join(", ")
            )
        }
        RunInput::Clock { now_ns } => format!(
            "the clock reads {}",
            saap_dispatch::render::utc_text(*now_ns)
        ),
        RunInput::Delegate {
            execution,
            children,
        } => format!(
            "execution {execution} delegates to {} child run(s)",
            children.len()
        ),
        RunInput::ChildEnded { child, event } => {
            format!("child {child} ends: {} {} arrives", name(event), event.id)
        }
        RunInput::Usage {
            tokens,
            cost_micros,
        } => format!(
            "an execution's model calls used {tokens} tokens, cost {}",
            saap_dispatch::render::cost_text(*cost_micros)
        ),
        RunInput::Budget(g) => format!(
            "a budget is granted: {} more execution(s), {} more",
            g.executions
                .map_or_else(|| "no".to_string(), |n| n.to_string()),
            g.wall_ns.map_or_else(
                || "no time".to_string(),
                |ns| format!("{:.1} s", ns as f64 / 1e9)
            )
        ),
    }
}

/// A decision record in words, naming steps and events where they exist (a recorded record
/// may name a step or event this spec does not have).
pub fn record_text(run: &Run, r: &Record) -> String {
    let spec = run.spec();
    let param = |step: u32, p: u32| {
        spec.steps
            .get(step as usize)
            .and_then(|s| s.params.get(p as usize))
            .map_or_else(|| format!("#{p}"), |p| format!("`{}`", p.name))
    };
    match r {
        Record::RunStarted { seq } => format!("the run starts with {}", event_text(run, *seq)),
        Record::EventAppended { seq, .. } => format!("{} is appended", event_text(run, *seq)),
        Record::Candidate { trigger, step } => format!(
            "{} is a candidate on {}",
            step_text(spec, *step),
            event_text(run, *trigger)
        ),
        Record::Skipped {
            trigger,
            step,
            reason,
        } => {
            let why = match reason {
                SkipReason::RequiredMissing { param: p } => {
                    format!("required parameter {} has no event", param(*step, *p))
                }
                SkipReason::FixedListShort {
                    param: p,
                    have,
                    need,
                } => format!("fixed list {} has {have} of {need}", param(*step, *p)),
                SkipReason::BudgetExhausted { max } => format!("budget of {max} spent"),
                SkipReason::InputSetAlreadyRan { by } => format!("input set already ran in {by}"),
                SkipReason::PreconditionFalse => "precondition false".to_owned(),
                SkipReason::RunTerminated => "run terminated".to_owned(),
            };
            format!(
                "{} is skipped on {} ({why})",
                step_text(spec, *step),
                event_text(run, *trigger)
            )
        }
        Record::ExecutionStarted {
            execution,
            step,
            trigger,
        } => format!(
            "{} starts as {execution} on {}",
            step_text(spec, *step),
            event_text(run, *trigger)
        ),
        Record::RunTerminated { seq, .. } => format!("{} ends the run", event_text(run, *seq)),
        other => serde_json::to_string(other).unwrap_or_else(|_| format!("{other:?}")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::recorded::JournalRun;
    use saap_dispatch::replay::RunInput;
    use saap_dispatch::{PreconditionCall, PreconditionEvaluator, SpecSyntax, compile_spec_text};
    use serde_json::Value;

    const SPEC: &str = r#"
saap_spec: 1
name: Qa
events:
  - { name: Question, parents: [StartEvent] }
  - { name: Answer, parents: [StopEvent] }
steps:
  - name: answer
    params: [{ name: q, kind: required, types: [Question] }]
    outputs: [Answer]
"#;

    struct No;
    impl PreconditionEvaluator for No {
        fn evaluate(&mut self, _c: &PreconditionCall<'_>) -> bool {
            false
        }
    }

    fn spec(text: &str) -> Arc<CompiledSpec> {
        Arc::new(compile_spec_text(text, SpecSyntax::Yaml).unwrap())
    }

    /// A journal written the way the runtime writes one: each input with the records the
    /// core made for it.
    fn journal(spec: &Arc<CompiledSpec>, run_id: &str) -> (JournalRun, Run, Vec<RunInput>) {
        let q = EventId::parse("665000000000000000000001").unwrap();
        let a = EventId::parse("665000000000000000000002").unwrap();
        let inputs = vec![
            RunInput::Append(NewEvent::known(q, spec.type_id("Question").unwrap())),
            RunInput::Complete {
                execution: ExecutionId(0),
                attempt: 1,
                outcome: Outcome::Returned(vec![NewEvent::known(
                    a,
                    spec.type_id("Answer").unwrap(),
                )]),
            },
        ];
        let texts = [
            r#"{"i":{"in":"append","event":{"id":"665000000000000000000001","n":"Question","k":5,"p":{"text":"hi"}}}}"#,
            r#"{"i":{"in":"complete","execution":0,"attempt":1,"outputs":[{"id":"665000000000000000000002","n":"Answer","k":9,"p":{}}]}}"#,
        ];
        let mut run = Run::new(spec.clone(), run_key(run_id));
        let mut rows = Vec::new();
        for (i, input) in inputs.iter().enumerate() {
            let before = run.records().len();
            run.apply(input.clone(), &mut No).unwrap();
            let recs: Vec<Value> = run
                .records()
                .iter()
                .skip(before)
                .map(|r| serde_json::to_value(r).unwrap())
                .collect();
            rows.push(super::super::JournalRow {
                index: i as u64,
                entry: serde_json::from_str(texts[i]).unwrap(),
                records: recs,
            });
        }
        (
            JournalRun {
                workflow: "Qa".into(),
                thread_id: "t".into(),
                fingerprint: spec.fingerprint(),
                entries: rows,
            },
            run,
            inputs,
        )
    }

    #[test]
    fn the_history_is_the_one_the_runtime_writes_and_it_replays() {
        let spec = spec(SPEC);
        let run_id = "665000000000000000000abc";
        let (j, run, inputs) = journal(&spec, run_id);
        let h = history(run_id, &j).unwrap();
        assert_eq!(h, History::new(&run, &inputs));
        let (ins, recs) = super::inputs(run_id, &j, &spec).unwrap();
        assert_eq!(ins, inputs);
        assert_eq!(recs.len(), run.records().len());
        let replayed = replay(run_id, &j, spec.clone()).unwrap();
        assert_eq!(replayed.records().to_vec(), run.records().to_vec());
        assert!(replayed.is_terminated());
    }

    #[test]
    fn another_spec_is_refused_with_the_first_disagreement() {
        let spec = spec(SPEC);
        let run_id = "665000000000000000000abc";
        let (j, _, _) = journal(&spec, run_id);
        // The step now needs a second event that never came: it does not start.
        let other = spec_with_extra_param();
        let e = replay(run_id, &j, other).unwrap_err();
        assert_eq!(e.code(), "SAAP-I016");
        let text = e.to_string();
        assert!(text.contains("fingerprint"), "{text}");
        assert!(text.contains("journal entry 0"), "{text}");
        assert!(text.contains("step `answer`"), "{text}");
    }

    fn spec_with_extra_param() -> Arc<CompiledSpec> {
        spec(&SPEC.replace(
            "params: [{ name: q, kind: required, types: [Question] }]",
            "params: [{ name: q, kind: required, types: [Question] }, { name: c, kind: required, types: [Ctx] }]",
        ).replace(
            "  - { name: Answer, parents: [StopEvent] }",
            "  - { name: Answer, parents: [StopEvent] }\n  - { name: Ctx }",
        ))
    }

    #[test]
    fn damaged_entries_are_named() {
        let spec = spec(SPEC);
        let run_id = "665000000000000000000abc";
        let (mut j, _, _) = journal(&spec, run_id);
        j.entries[1].entry = serde_json::json!({"i": {"in": "teleport"}});
        let e = replay(run_id, &j, spec.clone()).unwrap_err();
        assert_eq!(e.code(), "SAAP-I015");
        assert!(e.to_string().contains("journal entry 1"), "{e}");
        let (mut j, _, _) = journal(&spec, run_id);
        j.entries.remove(0);
        let e = history(run_id, &j).unwrap_err();
        assert!(e.to_string().contains("expected"), "{e}");
    }
}
