//! `<agent> show`: one stored run — its timeline, decision records and counts, or its
//! history file (`--history-out`) for `saap explain`.

use super::args::ReadArgs;
use super::fail::{Fail, internal, io};
use super::follow::{counts_json, counts_text};
use super::reader::{NamedRun, read_named_run};
use crate::history::{StoredRunView, utc_time};
use crate::snapshot::timeline_with;
use crate::workflow::Workflow;
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;
#[derive(clap::Args)]
#[command(
    after_help = "RUN is a run id as printed by `run` and `runs` (a unique prefix is enough). Only that run is
read: its journal is replayed through the dispatch core (no step runs) and checked against its
stored decision records.

Examples:
  show RUN                              the timeline of events and decisions
  show RUN --json                       events with fields, records, executions
  show RUN --history-out run.json       a History file for `saap explain SPEC --history run.json`
  show RUN --engine nats://127.0.0.1:4222   a run of the agent class on NATS JetStream

On NATS a run whose journal is still empty is shown as `queued` (its first event waits in the
class stream and no worker has taken it: is a worker of the class serving?) or `claimed` (a
worker owns it and has not journaled its start yet), given by its full id.

Exit codes: 0 shown, 1 a run on NATS that has not begun (queued or claimed), 2 unknown or
ambiguous run id, 3 database or server failure, or a journal that does not replay."
)]
pub(super) struct ShowArgs {
    /// The run id (or a unique prefix of it).
    pub(super) run: String,
    #[command(flatten)]
    pub(super) from: ReadArgs,
    /// Print JSON: {run_id, thread_id, workflow, status, progress, events, records,
    /// executions, result, execution_counts, owner (on NATS, the worker that owns a live
    /// run), children (the runs it delegated to: agent_class, run_id, state,
    /// unmet_obligation?), effects (the outside calls its bodies journaled: seq, execution,
    /// attempt, name, key, input, outcome {ok|failed}, at_ns, took_ns), forked_from (for a
    /// fork: {run_id, at, entries, reused: [executions], live: [executions]}, else null)}.
    #[arg(long)]
    pub(super) json: bool,
    /// Also write the run as a History file (the input of `saap explain --history`).
    #[arg(long, value_name = "FILE")]
    pub(super) history_out: Option<PathBuf>,
}

pub(super) async fn show_cmd(workflow: &Workflow, a: ShowArgs) -> Result<u8, Fail> {
    let named = match read_named_run(workflow, &a.from, &a.run).await {
        Ok(named) => named,
        // On NATS, a run with no journal yet may be queued or claimed.
        #[cfg(feature = "nats")]
        Err(f) if f.code == 2 => return show_unbegun(workflow, &a, f).await,
        Err(f) => return Err(f),
    };
    // The reader and the id name a live run's owner on NATS only.
    #[cfg_attr(not(feature = "nats"), allow(unused_variables))]
    let NamedRun {
        reader,
        agent,
        run_id,
        stored,
        effects,
    } = named;
    // A child run is read with its own agent's workflow.
    let workflow = &agent;
    let view = &StoredRunView::rebuild(workflow, &stored).map_err(|e| internal(e.to_string()))?;
    // On NATS, the worker that owns a live run (its owner record).
    #[allow(unused_mut)]
    let mut owner: Option<String> = None;
    #[cfg(feature = "nats")]
    if let Some(nats) = &reader.nats
        && !view.run.is_terminated()
    {
        owner = crate::nats::run_owner(nats, workflow.name(), &run_id)
            .await
            .map_err(|e| internal(e.to_string()))?
            .map(|o| o.worker);
    }
    if let Some(file) = &a.history_out {
        let text = serde_json::to_string_pretty(&view.history())
            .map_err(|e| internal(format!("cannot encode the history: {e}")))?;
        std::fs::write(file, text + "\n").map_err(|e| {
            internal(format!(
                "cannot write the history to `{}`: {e}",
                file.display()
            ))
        })?;
        eprintln!(
            "history of run {} written to {}; explain it with `saap explain SPEC --history {}` (SPEC from `spec`)",
            view.run_id,
            file.display(),
            file.display()
        );
    }
    let mut out = std::io::stdout().lock();
    let run = &view.run;
    if a.json {
        let doc = run_json(view, &stored, &effects, owner.as_deref());
        serde_json::to_writer_pretty(&mut out, &doc)
            .map_err(|e| internal(format!("cannot write JSON: {e}")))?;
        writeln!(out).map_err(io)?;
        return Ok(0);
    }
    writeln!(
        out,
        "run {} of {} ({}), thread {}{}",
        view.run_id,
        view.workflow,
        view.outcome().as_str(),
        view.thread_id,
        view.started_unix()
            .map(|s| format!(", started {} UTC", utc_time(s)))
            .unwrap_or_default()
    )
    .map_err(io)?;
    if let Some(origin) = super::fork::lineage(&stored) {
        writeln!(out, "{}", origin.text()).map_err(io)?;
    }
    writeln!(out).map_err(io)?;
    out.write_all(timeline_with(run, &view.display_by).as_bytes())
        .map_err(io)?;
    writeln!(out).map_err(io)?;
    writeln!(out, "executions: {}", counts_text(run)).map_err(io)?;
    if let Some(b) = crate::snapshot::budget_text(run) {
        writeln!(out, "{b}").map_err(io)?;
    }
    for c in view.children() {
        writeln!(
            out,
            "child {}: {} run {} ({}, requested by {}){}",
            c.child,
            c.agent_class,
            c.run_id,
            c.state,
            c.requested_by,
            match c.unmet_obligation {
                Some(kind) => format!(" — unmet obligation: {kind}"),
                None => String::new(),
            }
        )
        .map_err(io)?;
    }
    if !effects.is_empty() {
        writeln!(out, "effects ({}):", effects.len()).map_err(io)?;
        for e in &effects {
            writeln!(out, "  {}", effect_line(e)).map_err(io)?;
        }
    }
    if let Some(w) = &owner {
        writeln!(out, "owned by worker {w}").map_err(io)?;
    }
    match view.result() {
        Some((n, f)) => writeln!(out, "result: {n} {f}").map_err(io)?,
        None => writeln!(
            out,
            "still live:\n{}{}",
            crate::snapshot::waiting_for(run, None),
            crate::process::open_work_requests_text(&crate::process::open_work_requests(
                run,
                |seq| Some(view.fields(seq))
            ))
        )
        .map_err(io)?,
    }
    Ok(0)
}

/// The run as `show --json` prints it (the studio's `/api/runs/RUN` too): its events with
/// fields, records, executions, children, effects and lineage.
pub(super) fn run_json(
    view: &StoredRunView,
    stored: &crate::backend::StoredRun,
    effects: &[crate::backend::EffectRecord],
    owner: Option<&str>,
) -> Value {
    let run = &view.run;
    let events: Vec<Value> = run
        .log()
        .iter()
        .enumerate()
        .map(|(seq, e)| {
            json!({
                "seq": seq,
                "event_id": e.id.to_string(),
                "event": run.type_name(e.ty),
                "kind": e.kind.label(),
                "origin": match e.origin {
                    saap_dispatch::Origin::Outside => Value::Null,
                    saap_dispatch::Origin::Execution(x) => Value::from(x.to_string()),
                },
                "fields": view.fields(seq as u32),
            })
        })
        .collect();
    let executions: Vec<Value> = run
        .executions()
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let id = saap_dispatch::ExecutionId(i as u32);
            // Started on record, not run: held for the budget.
            let state = match x.state {
                saap_dispatch::run::ExecState::Running if run.is_held(id) => "Held".to_string(),
                s => format!("{s:?}"),
            };
            json!({
                "execution": id.to_string(),
                "step": run.spec().steps[x.step as usize].name,
                "trigger": x.trigger,
                "state": state,
                "attempt": x.attempt,
                "error": run.execution_error(saap_dispatch::ExecutionId(i as u32)),
            })
        })
        .collect();
    json!({
        "run_id": view.run_id,
        "thread_id": view.thread_id,
        "workflow": view.workflow,
        "status": view.outcome().as_str(),
        "progress": progress_json(run.progress()),
        "open_work_requests": crate::process::open_work_requests(run, |seq| Some(view.fields(seq))),
        "budget": crate::snapshot::budget_json(run),
        "result": view.result().map(|(n, f)| json!({"event": n, "fields": f})),
        "events": events,
        "records": run.records(),
        "executions": executions,
        "execution_counts": counts_json(run),
        "owner": owner,
        "children": view.children(),
        "effects": effects,
        "forked_from": super::fork::lineage(stored),
    })
}

/// Where the run stands as the core derives it (DESIGN §8): `{state, timer_due?,
/// children?, unmet?, held?, executions?}`, `state` one of not_started, running,
/// waiting_event, waiting_timer, waiting_children, waiting_unmet, waiting_budget, stopped,
/// failed, cancelled.
fn progress_json(p: saap_dispatch::run::progress::Progress) -> serde_json::Value {
    use saap_dispatch::run::progress::Progress;
    let mut v = json!({ "state": p.as_str() });
    match p {
        Progress::Waiting {
            timer,
            children,
            unmet,
            budget: _,
        } => {
            if let Some(due) = timer {
                v["timer_due"] = json!(saap_dispatch::render::utc_text(due));
            }
            if children > 0 {
                v["children"] = json!(children);
            }
            if unmet > 0 {
                v["unmet"] = json!(unmet);
            }
        }
        Progress::Running { executions } => v["executions"] = json!(executions),
        _ => {}
    }
    v
}

/// One journaled effect as a line: `#seq name (execution, attempt) ok|failed in T: result`,
/// the result cut to a line's width.
fn effect_line(e: &crate::backend::EffectRecord) -> String {
    use crate::backend::EffectOutcome;
    let (status, text) = match &e.outcome {
        EffectOutcome::Ok(v) => ("ok", v.to_string()),
        EffectOutcome::Failed(m) => ("failed", m.clone()),
    };
    let text = if text.chars().count() > 60 {
        text.chars().take(60).chain(['…']).collect()
    } else {
        text
    };
    format!(
        "#{} {} ({}, attempt {}) {status} in {:.1} ms: {text}",
        e.seq,
        e.name,
        saap_dispatch::ExecutionId(e.execution),
        e.attempt,
        e.took_ns as f64 / 1e6
    )
}

/// `show RUN --engine nats://…` of a run with no journal: where it stands if it is queued
/// or claimed (exit 1), else `not_found` (the run is unknown).
#[cfg(feature = "nats")]
async fn show_unbegun(workflow: &Workflow, a: &ShowArgs, not_found: Fail) -> Result<u8, Fail> {
    use crate::nats::Unbegun;
    let super::args::EngineArg::Nats(url) = &a.from.engine else {
        return Err(not_found);
    };
    // A prefix is looked up in the journal: only a whole id can name a run that has none.
    if a.run.len() < 24 || a.run.len() > 128 || !a.run.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(not_found);
    }
    let (reader, opts) = super::reader::open_nats_reader(workflow, url, &a.from).await?;
    let found = crate::nats::unbegun_run(reader.nats.nats(), workflow.name(), &a.run)
        .await
        .map_err(|e| internal(opts.sanitize(&e)))?;
    let Some(state) = found else {
        return Err(not_found);
    };
    let mut out = std::io::stdout().lock();
    if a.json {
        let line = match &state {
            Unbegun::Claimed { worker } => {
                json!({"run_id": a.run, "status": state.as_str(), "owner": worker})
            }
            Unbegun::Queued {
                event_name,
                sequence,
            } => json!({
                "run_id": a.run,
                "status": state.as_str(),
                "first_event": event_name,
                "stream_sequence": sequence,
            }),
        };
        writeln!(out, "{line}").map_err(io)?;
    } else {
        let text = match &state {
            Unbegun::Claimed { worker } => format!(
                "run {} is claimed: worker {worker} owns it and has not journaled its start yet (it begins when that worker gets to it; a worker that died is replaced when its lease ends)",
                a.run
            ),
            Unbegun::Queued {
                event_name,
                sequence,
            } => format!(
                "run {} is queued: its first event {event_name} (class stream sequence {sequence}) waits, and no worker has taken it; is a worker of agent class `{}` serving (`run --engine {url}`)?",
                a.run,
                workflow.name()
            ),
        };
        writeln!(out, "{text}").map_err(io)?;
    }
    Ok(1)
}
