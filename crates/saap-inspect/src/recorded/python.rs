//! A run recorded only as events (the Python platform's agent class stream) rebuilt by the
//! dispatch core under saap's semantics, and the places in it where the Python dispatcher
//! would have decided otherwise.
//!
//! The stream says what was published, in order, but not who published it. Each event is
//! therefore *attributed*: to the oldest running execution whose step declares its type as
//! an output (that execution completes with it, and with the events right after it that the
//! same step declares, within the step's declared count, while no other running execution
//! could have published them); an event no running execution declares arrives from outside.
//! Preconditions are user code and the stream holds no results of them: one is taken as
//! true when an event its step declares follows later in the stream, false otherwise. Both
//! inferences are reported as notes.
//!
//! The differences ([`Difference`]) come from the reference notes on the Python
//! implementation (`saap-python-notes.md`, cited by section); each names the event or
//! execution of this run where it applies. A rule that no event of the run touches is not
//! listed.
//!
//! Must not read anything (the events are given) nor run user code.

use super::{EventRun, WireEvent};
use crate::error::{InspectError, Result, clip};
use saap_dispatch::record::Record;
use saap_dispatch::replay::RunInput;
use saap_dispatch::run::{EventTy, NewEventType};
use saap_dispatch::spec::ParamKind;
use saap_dispatch::{
    CompiledSpec, EventId, EventKind, ExecutionId, NewEvent, Origin, Outcome, PreconditionCall,
    PreconditionEvaluator, Run, Seq, SkipReason, StepIdx, TypeId, run_key,
};
use serde::Serialize;
use std::sync::Arc;

/// Where the reference notes come from.
const NOTES: &str = "saap-python-notes.md";

/// One place in the run where the Python dispatcher would have behaved differently.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Difference {
    /// Stable name of the rule: `list_needs_one`, `latest_by_created_at`,
    /// `fixed_list_overflow`, `duplicate_spends_budget`, `event_after_stop`, `orphan_event`,
    /// `acked_before_processing`.
    pub rule: &'static str,
    /// The event or execution of this run.
    pub at: String,
    /// What saap did (or decides).
    pub saap: String,
    /// What the Python dispatcher would have done, and why.
    pub python: String,
    /// The section of the reference notes.
    pub reference: String,
}

/// The run rebuilt from its events.
#[derive(Debug)]
pub struct Rebuilt {
    /// The run as saap's core decides it.
    pub run: Run,
    /// Where the Python dispatcher would have behaved differently.
    pub differences: Vec<Difference>,
    /// What was inferred to rebuild it (attribution, preconditions).
    pub notes: Vec<String>,
}

/// Answers preconditions from what the stream shows later.
struct Lookahead<'a> {
    types: &'a [Option<TypeId>],
    /// The index of the last event applied so far.
    pos: usize,
    answers: Vec<(StepIdx, Seq, bool)>,
}

impl PreconditionEvaluator for Lookahead<'_> {
    fn evaluate(&mut self, call: &PreconditionCall<'_>) -> bool {
        let outputs = &call.run.spec().steps[call.step as usize].outputs;
        let later = self.types.iter().skip(self.pos + 1);
        let held = outputs.is_empty() || later.flatten().any(|t| outputs.contains(t));
        self.answers.push((call.step, call.trigger, held));
        held
    }
}

fn kind_of(e: &WireEvent) -> EventKind {
    let f = &e.flags;
    EventKind::from_bits(
        u8::from(f.control)
            | (u8::from(f.display) << 1)
            | (u8::from(f.start) << 2)
            | (u8::from(f.stop) << 3)
            | (u8::from(f.exception) << 4),
    )
}

/// Rebuilds the run from its events under saap's semantics and lists the differences.
pub fn rebuild(run_id: &str, ev: &EventRun, spec: Arc<CompiledSpec>) -> Result<Rebuilt> {
    let events = &ev.events;
    let mut ids = Vec::with_capacity(events.len());
    for e in events {
        ids.push(
            EventId::parse(&e.event_id).map_err(|err| InspectError::UndecodableRun {
                run: clip(run_id),
                at: format!("message {} of {}", e.seq, ev.stream),
                reason: format!("event id `{}`: {err}", clip(&e.event_id)),
            })?,
        );
    }
    let types: Vec<Option<TypeId>> = events.iter().map(|e| spec.type_id(&e.name)).collect();
    let new_event = |i: usize| NewEvent {
        id: ids[i],
        ty: match types[i] {
            Some(t) => NewEventType::Known(t),
            None => NewEventType::Foreign {
                name: events[i].name.clone(),
                kind: kind_of(&events[i]),
            },
        },
    };
    let mut pre = Lookahead {
        types: &types,
        pos: 0,
        answers: Vec::new(),
    };
    let mut run = Run::new(spec.clone(), run_key(run_id));
    let mut attributed = 0usize;
    let mut i = 0;
    while i < events.len() {
        let producer = types[i].and_then(|t| producer_of(&run, t, None));
        let input = match producer {
            Some(x) => {
                let step = &spec.steps[run.executions()[x.0 as usize].step as usize];
                let mut group = vec![i];
                let mut j = i + 1;
                while let Some(Some(t)) = types.get(j) {
                    let taken = group.iter().filter(|k| types[**k] == Some(*t)).count() as u64;
                    let fits = step.outputs.contains(t)
                        && step.max_per_execution(*t).is_none_or(|m| taken < m);
                    if !fits || producer_of(&run, *t, Some(x)).is_some() {
                        break;
                    }
                    group.push(j);
                    j += 1;
                }
                attributed += group.len();
                i = j;
                RunInput::Complete {
                    execution: x,
                    attempt: run.executions()[x.0 as usize].attempt,
                    outcome: Outcome::Returned(group.iter().map(|k| new_event(*k)).collect()),
                }
            }
            None => {
                i += 1;
                RunInput::Append(new_event(i - 1))
            }
        };
        pre.pos = i - 1;
        run.apply(input, &mut pre)
            .map_err(|e| InspectError::SpecMismatch {
                run: clip(run_id),
                detail: format!(
                    "{} cannot be applied under this spec: {e}",
                    events[i - 1].label()
                ),
            })?;
        run.take_started();
    }
    let mut notes = vec![format!(
        "the stream does not say who published an event: {attributed} of {} were attributed to the oldest running execution whose step declares their type, the others arrive from outside",
        events.len()
    )];
    let labels = saap_dispatch::render::EventLabels::for_run(&run, &[]);
    for (step, trigger, held) in &pre.answers {
        notes.push(format!(
            "the precondition of `{}` on {} was taken as {held}: {} (the Python platform records no precondition results)",
            spec.steps[*step as usize].name,
            labels.get(*trigger),
            if *held {
                "an event the step declares follows in the stream"
            } else {
                "no event the step declares follows in the stream"
            }
        ));
    }
    let differences = differences(&run, ev, &ids);
    Ok(Rebuilt {
        run,
        differences,
        notes,
    })
}

/// The oldest running execution (other than `not`) whose step declares `t` as an output.
fn producer_of(run: &Run, t: TypeId, not: Option<ExecutionId>) -> Option<ExecutionId> {
    run.running().find(|x| {
        Some(*x) != not && {
            let step = run.executions()[x.0 as usize].step;
            run.spec().steps[step as usize].outputs.contains(&t)
        }
    })
}

fn reference(section: &str) -> String {
    format!("{NOTES} {section}")
}

/// The differences that apply to this run's events and executions.
fn differences(run: &Run, ev: &EventRun, ids: &[EventId]) -> Vec<Difference> {
    let spec = run.spec();
    // The stream event of each log position.
    let wire: Vec<Option<&WireEvent>> = run
        .log()
        .iter()
        .map(|l| ids.iter().position(|id| *id == l.id).map(|k| &ev.events[k]))
        .collect();
    let label = |seq: Seq| -> String {
        let name = run.type_name(run.log()[seq as usize].ty);
        match wire.get(seq as usize).copied().flatten() {
            Some(w) => format!("{name}#{seq} (stream seq {})", w.seq),
            None => format!("{name}#{seq}"),
        }
    };
    let step_name = |s: StepIdx| spec.steps[s as usize].name.as_str();
    let mut out = Vec::new();
    for (xi, x) in run.executions().iter().enumerate() {
        let id = ExecutionId(xi as u32);
        let step = &spec.steps[x.step as usize];
        let at = format!("execution {id} of `{}` on {}", step.name, label(x.trigger));
        for (p, param) in step.params.iter().enumerate() {
            let bound = run.bound_seqs(x.step, p as u32, run.bindings(id)[p]);
            match param.kind {
                ParamKind::List if bound.is_empty() => out.push(Difference {
                    rule: "list_needs_one",
                    at: at.clone(),
                    saap: format!(
                        "runs it with an empty list for `{}` (a list parameter never blocks)",
                        param.name
                    ),
                    python: format!(
                        "would not run `{}` on this event: a plain `list[T]` parameter needs at least one event (`list[T] | None` runs with none, but gets None)",
                        step.name
                    ),
                    reference: reference("§4.1, §8 #1"),
                }),
                ParamKind::Required | ParamKind::Optional
                    if bound.len() == 1 && bound[0] != x.trigger =>
                {
                    // Python's "latest": the largest producer-side created_at among the
                    // matching events up to the trigger.
                    let latest = (0..=x.trigger)
                        .filter(|s| match run.log()[*s as usize].ty {
                            EventTy::Known(t) => param.types.contains(&t),
                            EventTy::Foreign(_) => false,
                        })
                        .filter_map(|s| wire[s as usize].map(|w| (w.created_at, s)))
                        .max();
                    if let Some((_, s)) = latest
                        && s != bound[0]
                    {
                        out.push(Difference {
                            rule: "latest_by_created_at",
                            at: at.clone(),
                            saap: format!(
                                "binds `{}` to {}, the latest by arrival order",
                                param.name,
                                label(bound[0])
                            ),
                            python: format!(
                                "would bind {}: the Python dispatcher takes the largest `created_at` (the producer's clock), not the last arrival",
                                label(s)
                            ),
                            reference: reference("§3.4"),
                        });
                    }
                }
                _ => {}
            }
        }
    }
    for r in run.records().iter() {
        match r {
            Record::FixedListOverflow {
                trigger,
                step,
                param,
            } => {
                let s = &spec.steps[step as usize];
                let p = &s.params[param as usize];
                out.push(Difference {
                    rule: "fixed_list_overflow",
                    at: format!("`{}` on {}", s.name, label(trigger)),
                    saap: format!(
                        "keeps the first {} events bound to `{}` and records the overflow; nothing fails",
                        p.size, p.name
                    ),
                    python: format!(
                        "binds a fixed list only at exactly {} events: with more, `{}` is left out of the call, which raises TypeError, and (stop_on_error by default) an ExceptionEvent ends the run",
                        p.size, p.name
                    ),
                    reference: reference("§4.5, §8 #2"),
                });
            }
            Record::Skipped {
                trigger,
                step,
                reason: SkipReason::InputSetAlreadyRan { by },
            } => {
                if let Some(max) = spec.steps[step as usize].max_executions_per_run {
                    out.push(Difference {
                        rule: "duplicate_spends_budget",
                        at: format!("`{}` on {}", step_name(step), label(trigger)),
                        saap: format!(
                            "skips the repeat of the input set that ran in {by}; the budget of {max} is not spent"
                        ),
                        python: "increments the step's counter before its duplicate check, so the skipped repeat spends one execution of the budget".to_owned(),
                        reference: reference("§3.8, §3.9"),
                    });
                }
            }
            Record::EventAfterStop {
                seq,
                origin: Origin::Outside,
            } => out.push(Difference {
                rule: "event_after_stop",
                at: label(seq),
                saap: "keeps it as evidence of the ended run and never dispatches it".to_owned(),
                python: "ignores it once the run's teardown marker is written, but an event handled concurrently with the stop can still read the run's config and trigger steps (no per-run lock)".to_owned(),
                reference: reference("§3.16"),
            }),
            Record::OrphanEvent { seq } => out.push(Difference {
                rule: "orphan_event",
                at: label(seq),
                saap: "refuses it (the run has not begun) and keeps it as evidence".to_owned(),
                python: "finds no agent config for the run and publishes an ExceptionEvent (\"No agent config found …\"), which crashes the run".to_owned(),
                reference: reference("§3.16"),
            }),
            _ => {}
        }
    }
    for x in run.running() {
        let e = &run.executions()[x.0 as usize];
        // A step that returns nothing leaves no trace either way; one Python would not have
        // started is listed above.
        let never_started = out
            .iter()
            .any(|d| d.rule == "list_needs_one" && d.at.starts_with(&format!("execution {x} ")));
        if spec.steps[e.step as usize].outputs.is_empty() || never_started {
            continue;
        }
        out.push(Difference {
            rule: "acked_before_processing",
            at: format!(
                "execution {x} of `{}` on {}",
                step_name(e.step),
                label(e.trigger)
            ),
            saap: "journals the trigger before dispatching it and runs an unfinished execution again after a crash (at-least-once)".to_owned(),
            python: "acknowledges the trigger before handling it and only rebuilds its event cache on restart: if the worker died while this ran, the trigger is lost and nothing runs it again. No output of it is in the stream: it returned nothing, still runs, or was lost so".to_owned(),
            reference: reference("§3.15, §8 #4-5"),
        });
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::Flags;
    use saap_dispatch::{SpecSyntax, compile_spec_text};

    const SPEC: &str = r#"
saap_spec: 1
name: QaAgent
events:
  - { name: Question, parents: [StartEvent] }
  - { name: Doc }
  - { name: Note }
  - { name: Answer, parents: [StopEvent] }
steps:
  - name: search
    params: [{ name: q, kind: required, types: [Question] }]
    outputs: [{ event: Doc, max: unbounded }]
  - name: summarize
    params:
      - { name: q, kind: required, types: [Question] }
      - { name: notes, kind: list, types: [Note] }
    outputs: []
  - name: answer
    params:
      - { name: d, kind: required, types: [Doc] }
      - { name: q, kind: required, types: [Question] }
    outputs: [Answer]
"#;

    fn wire(n: u64, name: &str, created: i64, flags: Flags) -> WireEvent {
        WireEvent {
            seq: n,
            event_id: format!("6650000000000000000000{n:02x}"),
            name: name.into(),
            flags,
            created_at: created,
            json: serde_json::json!({}),
        }
    }

    fn control() -> Flags {
        Flags {
            control: true,
            ..Default::default()
        }
    }

    #[test]
    fn outputs_are_attributed_and_the_python_differences_named() {
        let spec = Arc::new(compile_spec_text(SPEC, SpecSyntax::Yaml).unwrap());
        let start = Flags {
            control: true,
            display: true,
            start: true,
            ..Default::default()
        };
        let stop = Flags {
            control: true,
            display: true,
            stop: true,
            ..Default::default()
        };
        let ev = EventRun {
            agent_class: "QaAgent".into(),
            stream: "agent_QaAgent_stream".into(),
            events: vec![
                wire(1, "Question", 100, start),
                // Two docs of one search; the second was made first (producer clock).
                wire(2, "Doc", 300, control()),
                wire(3, "Doc", 200, control()),
                wire(4, "Answer", 400, stop),
                wire(5, "Note", 500, control()),
            ],
        };
        let r = rebuild("665000000000000000000abc", &ev, spec.clone()).unwrap();
        // search returned both docs; answer ran on each doc and returned the answer once.
        let names: Vec<&str> = r
            .run
            .executions()
            .iter()
            .map(|x| spec.steps[x.step as usize].name.as_str())
            .collect();
        assert_eq!(names, ["search", "summarize", "answer", "answer"]);
        assert!(r.run.is_terminated());
        let rules: Vec<&str> = r.differences.iter().map(|d| d.rule).collect();
        assert!(rules.contains(&"list_needs_one"), "{rules:?}");
        assert!(rules.contains(&"event_after_stop"), "{rules:?}");
        // answer's second execution published nothing; summarize declares no output.
        let acked: Vec<&Difference> = r
            .differences
            .iter()
            .filter(|d| d.rule == "acked_before_processing")
            .collect();
        assert_eq!(acked.len(), 1, "{acked:?}");
        assert!(acked[0].at.contains("`answer`"), "{acked:?}");
        let list = r
            .differences
            .iter()
            .find(|d| d.rule == "list_needs_one")
            .unwrap();
        assert!(list.at.contains("`summarize`"), "{list:?}");
        assert!(list.reference.contains("§4.1"));
        assert!(r.notes[0].contains("3 of 5"), "{:?}", r.notes);
    }

    #[test]
    fn latest_by_producer_clock_is_named_where_it_differs() {
        let spec = Arc::new(
            compile_spec_text(
                &SPEC.replace(
                    "    params:\n      - { name: d, kind: required, types: [Doc] }\n      - { name: q, kind: required, types: [Question] }",
                    "    params:\n      - { name: q, kind: required, types: [Question] }\n      - { name: d, kind: required, types: [Doc] }",
                ),
                SpecSyntax::Yaml,
            )
            .unwrap(),
        );
        let start = Flags {
            control: true,
            start: true,
            ..Default::default()
        };
        // A second question re-triggers answer, whose doc parameter takes the latest doc.
        let ev = EventRun {
            agent_class: "QaAgent".into(),
            stream: "s".into(),
            events: vec![
                wire(1, "Question", 100, start),
                wire(2, "Doc", 300, control()),
                wire(3, "Doc", 200, control()),
                wire(4, "Question", 400, start),
            ],
        };
        let r = rebuild("665000000000000000000abc", &ev, spec).unwrap();
        let d = r
            .differences
            .iter()
            .find(|d| d.rule == "latest_by_created_at")
            .unwrap();
        assert!(d.saap.contains("Doc#2"), "{d:?}");
        assert!(d.python.contains("Doc#1"), "{d:?}");
    }

    #[test]
    fn a_fixed_list_overflow_is_where_python_would_crash() {
        let spec = Arc::new(
            compile_spec_text(
                r#"
saap_spec: 1
name: Pairs
events:
  - { name: Question, parents: [StartEvent] }
  - { name: Doc }
steps:
  - name: pair
    params: [{ name: docs, kind: fixed_list, types: [Doc], size: 2 }]
    outputs: []
"#,
                SpecSyntax::Yaml,
            )
            .unwrap(),
        );
        let start = Flags {
            control: true,
            start: true,
            ..Default::default()
        };
        let ev = EventRun {
            agent_class: "Pairs".into(),
            stream: "s".into(),
            events: vec![
                wire(1, "Question", 1, start),
                wire(2, "Doc", 2, control()),
                wire(3, "Doc", 3, control()),
                wire(4, "Doc", 4, control()),
            ],
        };
        let r = rebuild("665000000000000000000abc", &ev, spec).unwrap();
        assert_eq!(r.run.executions().len(), 1);
        let d: Vec<&Difference> = r.differences.iter().collect();
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].rule, "fixed_list_overflow");
        assert!(d[0].at.contains("Doc#3 (stream seq 4)"), "{d:?}");
        assert!(d[0].python.contains("TypeError"), "{d:?}");
    }

    #[test]
    fn a_bad_event_id_is_named() {
        let spec = Arc::new(compile_spec_text(SPEC, SpecSyntax::Yaml).unwrap());
        let mut e = wire(1, "Question", 1, control());
        e.event_id = "nope".into();
        let ev = EventRun {
            agent_class: "QaAgent".into(),
            stream: "s".into(),
            events: vec![e],
        };
        let err = rebuild("r", &ev, spec).unwrap_err();
        assert_eq!(err.code(), "SAAP-I015");
        assert!(err.to_string().contains("message 1 of s"), "{err}");
    }
}
