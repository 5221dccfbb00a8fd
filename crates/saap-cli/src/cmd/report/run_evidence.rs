//! Run evidence: what one stored or live run shows about the symptom — its status, how many
//! times the step ran (from the dispatcher's records, in a saap store) or how many of its
//! output events were published (on NATS, the guide's "count the step's output events"), why
//! it was skipped, and the control events after the run's stop.
//!
//! [`RunFacts`] is the one input the diagnosis takes from a run, whatever the source: a store
//! or a NATS server through `saap-inspect` today; another source (e.g. a run explained by
//! `saap explain --run`) only has to fill it. The step asked for is also explained on the
//! recorded run through the core, as `saap explain --run` does (`saap_inspect::recorded`):
//! why each execution fired, why it was skipped. Read-only; must not diagnose.

use super::subject::Subject;
use crate::cmd::inspect::{Source, fail};
use crate::input::InvalidInput;
use saap_dispatch::explain::{StepExplanation, explain_run};
use saap_dispatch::render::{EventLabels, skip_text};
use saap_dispatch::{Record, StepIdx};
use saap_inspect::model::{EventView, RunTimeline};
use saap_inspect::recorded::{Recorded, journal, python};
use serde::Serialize;

/// Messages read per page, and at most this many pages (a bound on a run's size).
const PAGE: usize = 10_000;
const MAX_PAGES: usize = 20;

/// What a run shows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunFacts {
    /// Where it was read: `store PATH` or `server URL`.
    pub source: String,
    pub run_id: String,
    pub agent_class: Option<String>,
    /// `live`, `stopped` or `failed`.
    pub status: String,
    /// The event that ended it.
    pub ended_by: Option<String>,
    /// Control events read.
    pub events: usize,
    /// Control events stored after the run's stop or exception event, as `Name` or
    /// `Name (returned by STEP)`.
    pub after_stop: Vec<String>,
    /// True when the decision records were read (a saap store).
    pub has_records: bool,
    /// True when the run was longer than what was read.
    pub truncated: bool,
    /// About the step asked for, when one was.
    pub step: Option<StepFacts>,
    /// The step asked for, explained on this run by the core (as `saap explain --run`).
    pub explained: Option<RunStepExplanation>,
}

/// The step asked for, explained on the recorded run, or why it could not be.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunStepExplanation {
    /// The command that prints the same explanation.
    pub command: String,
    /// The explanation; `None` when the run could not be explained with this input's spec.
    pub step: Option<StepExplanation>,
    /// Why not (a spec that does not replay the run, a run too large…).
    pub not_explained: Option<String>,
    /// True for a run the Python platform recorded (its outputs attributed by the rebuild).
    pub rebuilt_from_events: bool,
}

/// What a run shows about one step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StepFacts {
    pub step: String,
    /// Executions started (from the records; `None` without them).
    pub executions: Option<usize>,
    /// Events of the step's output types in the run (other steps may produce them too).
    pub output_events: usize,
    /// Why it was skipped, each time (from the records).
    pub skips: Vec<String>,
}

/// Reads run `run_id` from `source` and extracts the facts about `step`.
pub async fn read(
    source: &Source,
    shown: String,
    run_id: &str,
    subject: &Subject,
    step: Option<&str>,
) -> anyhow::Result<RunFacts> {
    let mut pages: Vec<RunTimeline> = Vec::new();
    let mut from = None;
    let mut truncated = false;
    for i in 0..MAX_PAGES {
        let page = match source {
            Source::Nats(n) => n.run(run_id, None, from, PAGE).await,
            Source::Store(s) => s.run(run_id, from, PAGE),
        }
        .map_err(fail)?;
        let more = page.more;
        from = page.next_seq;
        pages.push(page);
        if !more || from.is_none() {
            break;
        }
        truncated = i + 1 == MAX_PAGES;
    }
    let Some(first) = pages.first() else {
        return Err(anyhow::anyhow!("no answer for run {run_id}"));
    };
    let summary = first.run.clone();
    if let Some(class) = &summary.agent_class
        && *class != subject.class
    {
        return Err(InvalidInput(format!(
            "run {run_id} belongs to `{class}`, not to `{}` read from {}; give the input of `{class}` or another run",
            subject.class, subject.input
        ))
        .into());
    }
    let spec = &subject.spec;
    let step_idx = step.and_then(|s| spec.step_index(s));
    let outputs: Vec<&str> = step_idx
        .map(|i| {
            spec.steps[i as usize]
                .outputs
                .iter()
                .map(|t| spec.type_info(*t).name.as_str())
                .collect()
        })
        .unwrap_or_default();
    let mut facts = RunFacts {
        source: shown,
        run_id: run_id.to_owned(),
        agent_class: summary.agent_class.clone(),
        status: summary.status.as_str().to_owned(),
        ended_by: None,
        events: 0,
        after_stop: Vec::new(),
        has_records: false,
        truncated,
        step: None,
        explained: None,
    };
    let mut executions = 0usize;
    let mut output_events = 0usize;
    let mut skips = Vec::new();
    // Which step each execution belongs to (from the records), to name after-stop producers.
    let mut exec_step: std::collections::BTreeMap<u64, String> = Default::default();
    for m in pages.iter().flat_map(|p| p.messages.iter()) {
        let mut events: Vec<(&EventView, Option<u64>)> =
            m.event.iter().map(|e| (e, None)).collect();
        for j in &m.journal {
            events.extend(j.outputs.iter().map(|e| (e, j.execution)));
            for r in &j.records {
                facts.has_records = true;
                let Ok(record) = serde_json::from_value::<Record>(r.clone()) else {
                    continue;
                };
                match record {
                    Record::ExecutionStarted {
                        execution, step: s, ..
                    } => {
                        if let Some(st) = spec.steps.get(s as usize) {
                            exec_step.insert(u64::from(execution.0), st.name.clone());
                        }
                        if Some(s) == step_idx {
                            executions += 1;
                        }
                    }
                    Record::Skipped {
                        step: s, reason, ..
                    } if Some(s) == step_idx && (s as usize) < spec.steps.len() => {
                        skips.push(skip_text(spec, s, &reason));
                    }
                    _ => {}
                }
            }
        }
        for (e, by) in events {
            if !e.flags.control {
                continue;
            }
            facts.events += 1;
            if outputs.contains(&e.event_name.as_str()) {
                output_events += 1;
            }
            if facts.ended_by.is_some() {
                let from = by
                    .and_then(|x| exec_step.get(&x))
                    .map(|s| format!(" (returned by `{s}`)"))
                    .unwrap_or_default();
                facts.after_stop.push(format!("{}{from}", e.event_name));
            } else if e.flags.is_terminal() {
                facts.ended_by = Some(e.event_name.clone());
            }
        }
    }
    if facts.ended_by.is_none() {
        facts.ended_by = summary.ended_by.clone();
    }
    facts.step = step.map(|s| StepFacts {
        step: s.to_owned(),
        executions: facts.has_records.then_some(executions),
        output_events,
        skips,
    });
    if let (Some(idx), Some(name)) = (step_idx, step) {
        facts.explained =
            Some(explain_step(source, &facts.source, run_id, subject, idx, name).await);
    }
    Ok(facts)
}

/// Step `idx` explained on the recorded run through the core: a saap journal replayed and
/// checked, a Python-recorded run rebuilt from its events.
async fn explain_step(
    source: &Source,
    shown: &str,
    run_id: &str,
    subject: &Subject,
    idx: StepIdx,
    name: &str,
) -> RunStepExplanation {
    let flag = match source {
        Source::Store(_) => shown.replacen("store ", "--db ", 1),
        Source::Nats(_) => shown.replacen("server ", "--server ", 1),
    };
    let mut out = RunStepExplanation {
        command: format!(
            "saap explain {} --run {run_id} {flag} --step {name}",
            subject.input
        ),
        step: None,
        not_explained: None,
        rebuilt_from_events: false,
    };
    let recorded = match source {
        Source::Nats(n) => n.recorded_run(run_id, None).await,
        Source::Store(s) => s.recorded_run(run_id),
    };
    let run = recorded.and_then(|r| match &r.body {
        Recorded::Journal(j) => journal::replay(run_id, j, subject.spec.clone()),
        Recorded::Events(e) => {
            out.rebuilt_from_events = true;
            python::rebuild(run_id, e, subject.spec.clone()).map(|rebuilt| rebuilt.run)
        }
    });
    match run {
        Ok(run) => {
            let labels = EventLabels::for_run(&run, &[]);
            out.step = explain_run(&run, &labels, &[idx], None)
                .steps
                .into_iter()
                .next();
        }
        Err(e) => out.not_explained = Some(e.to_string()),
    }
    out
}

/// What a NATS server shows about the agent class's stream `agent_{Class}_stream` (the
/// guide's issue 5 checks: does the stream exist, is a dispatcher subscribed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClassStreamFacts {
    /// `server URL`.
    pub source: String,
    pub stream: String,
    pub exists: bool,
    /// Stored messages (0 when it does not exist).
    pub messages: u64,
    /// Consumers on it: a dispatcher subscribes with one (0 when it does not exist).
    pub consumers: u64,
}

/// Reads the class stream's state; `None` for a source that is not a NATS server.
pub async fn class_stream(
    source: &Source,
    shown: String,
    class: &str,
) -> anyhow::Result<Option<ClassStreamFacts>> {
    let Source::Nats(n) = source else {
        return Ok(None);
    };
    let stream = format!("agent_{class}_stream");
    match n.stream_report(&stream, 1).await {
        Ok(r) => Ok(Some(ClassStreamFacts {
            source: shown,
            stream,
            exists: true,
            messages: r.summary.messages,
            consumers: r.summary.consumers,
        })),
        Err(saap_inspect::InspectError::NoStream { .. }) => Ok(Some(ClassStreamFacts {
            source: shown,
            stream,
            exists: false,
            messages: 0,
            consumers: 0,
        })),
        Err(e) => Err(fail(e)),
    }
}
