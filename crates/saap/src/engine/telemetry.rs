//! Live export of runs as OpenTelemetry traces (DESIGN §9), when the engine was given an
//! exporter (`EngineOptions::telemetry`): each execution whose body ran here hands its facts
//! (step, attempt, when it started and ended, its bound events and outputs, its error) to
//! the exporter, and a run's end hands over the run's own span. The payloads go by
//! reference: spans, and the JSON and text in them, are made on the exporter's thread, and a
//! full queue drops the job (the exporter counts it) rather than hold up a step. What a step
//! pays is kept to a clock read at each end of its body and two allocations (the job and its
//! events); names are shared, never formatted here.
//!
//! Span ids derive from the run id, the execution and the attempt (`saap_otel::SpanId`), so
//! the spans that NATS workers export for one run join up in one trace without coordination.
//! Must not decide anything, wait, or touch the store.

use super::ids::unix_nanos;
use super::names::type_name;
use super::slot::{RunSlot, RunState};
use crate::event::Payload;
use crate::params::{BoundEvent, EventName, OutEvent};
use saap_dispatch::record::Record;
use saap_dispatch::run::{Bound, EventTy, RunStatus};
use saap_dispatch::{EventId, ExecutionId, Run, StepIdx};
use saap_otel::{EventData, ExecutionFacts, Exporter, RunFacts};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The engine's exporter and what it remembers between a run's executions and its end.
pub(crate) struct LiveTelemetry {
    exporter: Exporter,
    /// The workflow's name (the run span's name).
    agent: Arc<str>,
    /// Step names by index, shared into jobs.
    steps: Box<[Arc<str>]>,
    /// When each run in flight was first seen here (its span's start), by run id: its first
    /// journal entry, or without a journal the start of its first execution. Removed at the
    /// run's end.
    run_starts: Mutex<HashMap<Arc<str>, u64>>,
}

/// An event whose JSON and id text are made later, on the exporter's thread.
struct Pending {
    name: Cow<'static, str>,
    id: Option<EventId>,
    payload: Payload,
}

impl Pending {
    fn data(self) -> EventData {
        EventData {
            name: self.name.into_owned(),
            id: self.id.map(|id| id.to_string()).unwrap_or_default(),
            fields: match self.payload.try_json() {
                Ok(v) => v.clone(),
                Err(e) => serde_json::json!({ "saap.unserializable": e.to_string() }),
            },
        }
    }
}

/// One execution attempt, as handed to the exporter: its events in one vector (the bound
/// ones first, `inputs` of them).
struct ExecutionJob {
    run_id: Arc<str>,
    thread_id: Arc<str>,
    step: Arc<str>,
    execution: ExecutionId,
    attempt: u32,
    start: u64,
    end: u64,
    events: Vec<Pending>,
    inputs: usize,
    /// The display events it showed that a span reads (its model calls' costs).
    shown: Vec<Pending>,
    error: Option<String>,
}

impl ExecutionJob {
    fn submit(self, exporter: &Exporter) {
        exporter.submit(Box::new(move || {
            let ExecutionJob {
                run_id,
                thread_id,
                step,
                execution,
                attempt,
                start,
                end,
                mut events,
                inputs,
                shown,
                error,
            } = self;
            let outputs = events.split_off(inputs.min(events.len()));
            saap_otel::execution_spans(&ExecutionFacts {
                run_id: run_id.to_string(),
                thread_id: thread_id.to_string(),
                step: step.to_string(),
                execution: execution.0,
                attempt,
                start_unix_nano: start,
                end_unix_nano: end.max(start),
                inputs: events.into_iter().map(Pending::data).collect(),
                outputs: outputs.into_iter().map(Pending::data).collect(),
                shown: shown.into_iter().map(Pending::data).collect(),
                error,
            })
        }));
    }
}

impl LiveTelemetry {
    pub(crate) fn new(exporter: Exporter, agent: &str, steps: &[String]) -> LiveTelemetry {
        LiveTelemetry {
            exporter,
            agent: Arc::from(agent),
            steps: steps.iter().map(|s| Arc::from(s.as_str())).collect(),
            run_starts: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn exporter(&self) -> &Exporter {
        &self.exporter
    }

    fn starts(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, u64>> {
        self.run_starts.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn step(&self, step: StepIdx) -> Arc<str> {
        self.steps
            .get(step as usize)
            .cloned()
            .unwrap_or_else(|| Arc::from("?"))
    }

    /// A run's first journal entry: its span starts now.
    pub(super) fn run_seen(&self, run_id: &Arc<str>) {
        self.starts()
            .entry(run_id.clone())
            .or_insert_with(unix_nanos);
    }

    /// An execution of `slot`'s run ended here: its span (and its semantic outputs' spans)
    /// go to the exporter. Its bound events are read from the run's tables.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn execution_ended(
        &self,
        slot: &RunSlot,
        step: StepIdx,
        execution: ExecutionId,
        attempt: u32,
        started_ns: u64,
        type_names: &[EventName],
        outs: &[OutEvent],
        error: Option<&str>,
    ) {
        let end = unix_nanos();
        let start = if started_ns == 0 { end } else { started_ns };
        let mut events = Vec::new();
        let shown = {
            let st = slot.lock();
            bound_events(&st, type_names, execution, outs.len(), &mut events);
            shown_costs(&st, type_names, execution)
        };
        let inputs = events.len();
        events.extend(outs.iter().map(output));
        let run_id = slot.run_id().clone();
        if execution.0 == 0 {
            // A run's first execution: without a journal, its span starts with it.
            self.starts().entry(run_id.clone()).or_insert(start);
        }
        ExecutionJob {
            run_id,
            thread_id: slot.thread_id().clone(),
            step: self.step(step),
            execution,
            attempt,
            start,
            end,
            events,
            inputs,
            shown,
            error: error.map(str::to_string),
        }
        .submit(&self.exporter);
    }

    /// An execution of a run held elsewhere ran here (a NATS work item): its spans join the
    /// run's trace by their derived ids.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn remote_execution_ended(
        &self,
        run_id: &Arc<str>,
        thread_id: &Arc<str>,
        step: StepIdx,
        execution: ExecutionId,
        attempt: u32,
        started_ns: u64,
        inputs: &[Vec<BoundEvent>],
        outcome: Result<&[OutEvent], &str>,
    ) {
        let mut events: Vec<Pending> = inputs
            .iter()
            .flatten()
            .map(|b| Pending {
                name: cow(&b.name),
                id: Some(b.id),
                payload: b.payload.clone(),
            })
            .collect();
        let bound = events.len();
        let (outs, error) = match outcome {
            Ok(outs) => (outs, None),
            Err(e) => (&[][..], Some(e.to_string())),
        };
        events.extend(outs.iter().map(output));
        ExecutionJob {
            run_id: run_id.clone(),
            thread_id: thread_id.clone(),
            step: self.step(step),
            execution,
            attempt,
            start: started_ns,
            end: unix_nanos(),
            events,
            inputs: bound,
            // Shown through the run's owner: its costs are not known here.
            shown: Vec::new(),
            error,
        }
        .submit(&self.exporter);
    }

    /// `slot`'s run ended (the input that ended it was just applied): the run's span goes
    /// to the exporter.
    pub(super) fn run_ended(&self, slot: &RunSlot, st: &RunState, type_names: &[EventName]) {
        let end = unix_nanos();
        let run_id = slot.run_id().clone();
        let start = self.starts().remove(&run_id).unwrap_or(end);
        let run = &st.run;
        let event_at = |seq: u32| {
            let e = run.log().get(seq as usize)?;
            Some(Pending {
                name: name_of(run, type_names, e.ty),
                id: Some(e.id),
                payload: st.payloads.get(seq as usize)?.clone(),
            })
        };
        let start_event = run
            .records()
            .iter()
            .find_map(|r| match r {
                Record::RunStarted { seq } => Some(seq),
                _ => None,
            })
            .and_then(event_at);
        let (end_event, failed) = match run.status() {
            RunStatus::Terminated { by } => (
                event_at(by),
                run.log()
                    .get(by as usize)
                    .is_some_and(|e| e.kind.is_exception()),
            ),
            _ => (None, false),
        };
        let thread_id = slot.thread_id().clone();
        let agent = self.agent.clone();
        self.exporter.submit(Box::new(move || {
            vec![saap_otel::run_span(&RunFacts {
                run_id: run_id.to_string(),
                thread_id: thread_id.to_string(),
                agent: agent.to_string(),
                start_unix_nano: start,
                end_unix_nano: end.max(start),
                start_event: start_event.map(Pending::data),
                end_event: end_event.map(Pending::data),
                failed,
            })]
        }));
    }
}

fn output(o: &OutEvent) -> Pending {
    Pending {
        name: o.name.clone(),
        id: None,
        payload: o.payload.clone(),
    }
}

/// Adds the events bound to execution `x` (in parameter order) to `out`, payloads by
/// reference, with room for `more` after them.
fn bound_events(
    st: &RunState,
    type_names: &[EventName],
    x: ExecutionId,
    more: usize,
    out: &mut Vec<Pending>,
) {
    let run: &Run = &st.run;
    let step: StepIdx = run.execution(x).map_or(0, |e| e.step);
    let log = run.log();
    let at = |seq: u32| {
        let e = log.get(seq as usize)?;
        Some(Pending {
            name: name_of(run, type_names, e.ty),
            id: Some(e.id),
            payload: st.payloads.get(seq as usize)?.clone(),
        })
    };
    let bindings = run.bindings(x);
    out.reserve_exact(bindings.len() + more);
    for (pi, b) in bindings.iter().enumerate() {
        match *b {
            Bound::Nothing => {}
            Bound::One(seq) => out.extend(at(seq)),
            Bound::First(_) => {
                out.extend(
                    run.bound_seqs(step, pi as u32, *b)
                        .iter()
                        .filter_map(|&s| at(s)),
                );
            }
        }
    }
}

/// The model-call costs (`LLMCostEvent`s) execution `x` showed, in order: display events
/// after its trigger, found from the newest back (most runs show none).
fn shown_costs(st: &RunState, type_names: &[EventName], x: ExecutionId) -> Vec<Pending> {
    let Some(displays) = st.displays.as_deref() else {
        return Vec::new();
    };
    let run = &st.run;
    let trigger = run.execution(x).map_or(0, |e| e.trigger);
    let mut out: Vec<Pending> = displays
        .by
        .iter()
        .rev()
        .take_while(|(seq, _)| *seq > trigger)
        .filter(|(_, by)| *by == x)
        .filter_map(|&(seq, _)| {
            let e = run.log().get(seq as usize)?;
            let name = name_of(run, type_names, e.ty);
            if name != <crate::semantic::LLMCostEvent as crate::event::Event>::NAME {
                return None;
            }
            Some(Pending {
                name,
                id: Some(e.id),
                payload: st.payloads.get(seq as usize)?.clone(),
            })
        })
        .collect();
    out.reverse();
    out
}

/// An event type's name: a Rust type's without a copy, another's (a type known only at run
/// time, a foreign event) as the core names it.
fn name_of(run: &Run, type_names: &[EventName], ty: EventTy) -> Cow<'static, str> {
    match (ty, type_name(type_names, ty)) {
        (EventTy::Known(_), n @ EventName::Static(_)) => cow(&n),
        _ => Cow::Owned(run.type_name(ty).to_string()),
    }
}

fn cow(name: &EventName) -> Cow<'static, str> {
    match name {
        EventName::Static(s) => Cow::Borrowed(s),
        EventName::Shared(s) => Cow::Owned(s.to_string()),
    }
}
