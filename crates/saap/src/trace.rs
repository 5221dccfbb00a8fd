//! A stored run as an OpenTelemetry trace, after the fact (`<agent> export RUN`): the run
//! rebuilt from its journal ([`StoredRunView`]), then the same spans the engine exports live
//! (`EngineOptions::telemetry`): the run's span, a span per finished execution attempt with
//! its bound events and outputs, and child spans for the semantic events it returned. The
//! span ids are the live ones (derived from the run id, execution and attempt), so a trace
//! exported twice, or live and then again, names the same spans.
//!
//! Times come from the journal: each entry records when the engine applied its input. An
//! execution starts with the entry that started it and ends with its completion's; an attempt
//! that a crash interrupted ends where its retry begins, as an error. Entries written before
//! saap recorded times fall back to the run id's creation second.
//!
//! Must not run a step or write to the store.

use crate::backend::StoredRun;
use crate::event::Event as _;
use crate::history::{HistoryExportError, StoredRunView};
use crate::semantic::LLMCostEvent;
use crate::workflow::Workflow;
use saap_dispatch::record::Record;
use saap_dispatch::replay::RunInput;
use saap_dispatch::run::{Bound, RunStatus};
use saap_dispatch::{EventId, ExecutionId, Outcome};
use saap_otel::{EventData, ExecutionFacts, RunFacts, Span};
use std::collections::HashMap;

/// The spans of a stored run: the run's own first, then each finished execution attempt's
/// (with its semantic children), in the order they ended.
pub fn stored_run_spans(
    workflow: &Workflow,
    stored: &StoredRun,
) -> Result<Vec<Span>, HistoryExportError> {
    let view = StoredRunView::rebuild(workflow, stored)?;
    let times = stored.entry_times();
    // For each decision record, the journal entry whose input made it (as the store kept them).
    let entry_of_record: Vec<usize> = stored
        .entry_records
        .iter()
        .enumerate()
        .flat_map(|(e, &n)| std::iter::repeat_n(e, n as usize))
        .collect();
    let shown = shown_costs(&view);
    let run = &view.run;
    let time_of_record = |r: usize| {
        entry_of_record
            .get(r)
            .and_then(|&e| times.get(e).copied())
            .unwrap_or_else(|| times.last().copied().unwrap_or(0))
    };
    let event = |seq: u32| -> Option<EventData> {
        let e = run.log().get(seq as usize)?;
        Some(event_data(&view, e.id, run.type_name(e.ty)))
    };

    let mut spans = Vec::new();
    // Executions by id: when their current attempt started.
    let mut started: HashMap<ExecutionId, (u32, u64)> = HashMap::new();
    let mut start_event = None;
    let mut end_at = None;
    for (r, record) in run.records().iter().enumerate() {
        let at = time_of_record(r);
        match record {
            Record::RunStarted { seq } => start_event = Some(seq),
            Record::RunTerminated { .. } => end_at = Some(at),
            Record::ExecutionStarted { execution, .. } => {
                started.insert(execution, (1, at));
            }
            Record::ExecutionRetried { execution, attempt } => {
                // The attempt before was cut short by the process stopping.
                if let Some((prev, since)) = started.insert(execution, (attempt, at)) {
                    spans.extend(execution_spans(
                        &view,
                        execution,
                        prev,
                        (since, at),
                        Vec::new(),
                        &shown,
                        Some(format!(
                            "attempt {prev} did not finish: the process stopped; run again as attempt {attempt}"
                        )),
                    ));
                }
            }
            Record::ExecutionCompleted {
                execution, attempt, ..
            }
            | Record::ExecutionFailed {
                execution, attempt, ..
            } => {
                let since = started.remove(&execution).map_or(at, |(_, t)| t);
                let error = matches!(record, Record::ExecutionFailed { .. }).then(|| {
                    run.execution_error(execution)
                        .unwrap_or("the step failed")
                        .to_string()
                });
                // The completion's own entry holds what it returned.
                let outputs = entry_of_record
                    .get(r)
                    .and_then(|&e| view.inputs.get(e))
                    .map(|input| returned_outputs(&view, input))
                    .unwrap_or_default();
                spans.extend(execution_spans(
                    &view,
                    execution,
                    attempt,
                    (since, at),
                    outputs,
                    &shown,
                    error,
                ));
            }
            _ => {}
        }
    }
    let (end_event, failed) = match run.status() {
        RunStatus::Terminated { by } => (
            event(by),
            run.log()
                .get(by as usize)
                .is_some_and(|e| e.kind.is_exception()),
        ),
        _ => (None, false),
    };
    let start = times.first().copied().unwrap_or(0);
    let end = end_at.unwrap_or_else(|| times.last().copied().unwrap_or(start));
    spans.insert(
        0,
        saap_otel::run_span(&RunFacts {
            run_id: view.run_id.clone(),
            thread_id: view.thread_id.clone(),
            agent: view.workflow.clone(),
            start_unix_nano: start,
            end_unix_nano: end.max(start),
            start_event: start_event.and_then(event),
            end_event,
            failed,
        }),
    );
    Ok(spans)
}

/// What a completion entry says its execution returned.
fn returned_outputs(view: &StoredRunView, input: &RunInput) -> Vec<EventData> {
    let RunInput::Complete {
        outcome: Outcome::Returned(news),
        ..
    } = input
    else {
        return Vec::new();
    };
    news.iter()
        .map(|n| {
            let name = match &n.ty {
                saap_dispatch::NewEventType::Known(t) => {
                    view.run.spec().types[*t as usize].name.clone()
                }
                saap_dispatch::NewEventType::Foreign { name, .. } => name.clone(),
            };
            event_data(view, n.id, &name)
        })
        .collect()
}

/// The model-call costs (`LLMCostEvent`s) each execution showed, in order, read once.
fn shown_costs(view: &StoredRunView) -> HashMap<ExecutionId, Vec<EventData>> {
    let run = &view.run;
    let mut by: HashMap<ExecutionId, Vec<EventData>> = HashMap::new();
    for &(seq, x) in &view.display_by {
        if let Some(e) = run.log().get(seq as usize)
            && run.type_name(e.ty) == LLMCostEvent::NAME
        {
            by.entry(x)
                .or_default()
                .push(event_data(view, e.id, LLMCostEvent::NAME));
        }
    }
    by
}

fn execution_spans(
    view: &StoredRunView,
    x: ExecutionId,
    attempt: u32,
    (start, end): (u64, u64),
    outputs: Vec<EventData>,
    shown: &HashMap<ExecutionId, Vec<EventData>>,
    error: Option<String>,
) -> Vec<Span> {
    let run = &view.run;
    let step = run.execution(x).map_or(0, |e| e.step);
    let step_name = run
        .spec()
        .steps
        .get(step as usize)
        .map_or_else(|| "?".to_string(), |s| s.name.clone());
    let mut inputs = Vec::new();
    for (pi, b) in run.bindings(x).iter().enumerate() {
        let seqs = match *b {
            Bound::Nothing => &[][..],
            _ => run.bound_seqs(step, pi as u32, *b),
        };
        for &seq in seqs {
            if let Some(e) = run.log().get(seq as usize) {
                inputs.push(event_data(view, e.id, run.type_name(e.ty)));
            }
        }
    }
    saap_otel::execution_spans(&ExecutionFacts {
        run_id: view.run_id.clone(),
        thread_id: view.thread_id.clone(),
        step: step_name,
        execution: x.0,
        attempt,
        start_unix_nano: start,
        end_unix_nano: end.max(start),
        inputs,
        outputs,
        shown: shown.get(&x).cloned().unwrap_or_default(),
        error,
    })
}

fn event_data(view: &StoredRunView, id: EventId, name: &str) -> EventData {
    EventData {
        name: name.to_string(),
        id: id.to_string(),
        fields: view
            .payloads
            .get(&id)
            .and_then(|p| p.try_json().ok().cloned())
            .unwrap_or(serde_json::Value::Null),
    }
}
