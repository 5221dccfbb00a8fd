//! `saap simulate SPEC`: run the spec's dispatch over its declared arrival order with a
//! deterministic completion policy, and print the timeline (event → decisions) and the
//! executions per step.

use crate::input::{InvalidInput, load_spec};
use saap_dispatch::render::{
    EventLabels, executions_json, executions_per_step, record_json, record_text,
};
use saap_dispatch::sim::{DEFAULT_MAX_COMPLETIONS, Policy, simulate};
use saap_dispatch::{Record, RunStatus};
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(clap::Args)]
#[command(after_help = "Completion policies:
  fifo            after each arrival, complete running executions oldest first until none runs (default)
  lifo            after each arrival, complete the newest running execution first
  arrivals-first  deliver every arrival, then complete oldest first

Examples:
  saap simulate examples/specs/race-condition.yaml
  saap simulate examples/specs/race-condition.yaml --policy arrivals-first
  saap simulate examples/specs/list-reruns.yaml --json | jq '.executions_per_step'")]
pub struct SimulateArgs {
    /// The workflow spec (JSON or YAML; `-` for stdin). Its `simulation:` section gives the
    /// arrivals and what each execution emits.
    pub spec: PathBuf,
    /// Completion policy: fifo, lifo or arrivals-first.
    #[arg(long, default_value = "fifo")]
    pub policy: String,
    /// Stop after this many completions (guards against workflows that loop forever).
    #[arg(long, default_value_t = DEFAULT_MAX_COMPLETIONS)]
    pub max_completions: usize,
    /// Print JSON: every event, every decision, every execution with its bindings.
    #[arg(long)]
    pub json: bool,
    /// Also write the run as a history file (its inputs and decision records), which
    /// `saap explain --history` reads and replays.
    #[arg(long, value_name = "FILE")]
    pub history_out: Option<PathBuf>,
}

pub fn run(args: SimulateArgs) -> anyhow::Result<ExitCode> {
    let policy = Policy::parse(&args.policy).ok_or_else(|| {
        InvalidInput(format!(
            "unknown policy `{}`; use fifo, lifo or arrivals-first",
            args.policy
        ))
    })?;
    let spec = Arc::new(load_spec(&args.spec)?);
    if spec
        .source
        .simulation
        .as_ref()
        .is_none_or(|s| s.arrivals.is_empty())
    {
        eprintln!(
            "note: the spec has no `simulation.arrivals`; nothing arrives, so nothing runs. Add e.g.\n  simulation:\n    arrivals:\n      - event: UserMessageEvent"
        );
    }
    let sim = simulate(spec.clone(), policy, args.max_completions)?;
    let run = &sim.run;
    if let Some(path) = &args.history_out {
        let history = saap_dispatch::replay::History::new(run, &sim.journal);
        let text = serde_json::to_string_pretty(&history)?;
        std::fs::write(path, text + "\n").map_err(|e| {
            anyhow::anyhow!("cannot write the history to `{}`: {e}", path.display())
        })?;
    }
    let labels = EventLabels::for_run(run, &sim.arrivals);
    let counts = executions_per_step(run);
    let status = match run.status() {
        RunStatus::NotStarted => json!({"state": "not_started"}),
        RunStatus::Live => json!({"state": "live"}),
        RunStatus::Terminated { by } => {
            json!({"state": "terminated", "by": labels.get(by), "type": run.type_name(run.log()[by as usize].ty)})
        }
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        let value = json!({
            "spec": spec.name,
            "policy": policy.as_str(),
            "events": run.log().iter().enumerate().map(|(seq, e)| json!({
                "seq": seq,
                "label": labels.get(seq as u32),
                "type": run.type_name(e.ty),
                "event_id": e.id.to_string(),
                "kind": e.kind.label(),
            })).collect::<Vec<_>>(),
            "records": run.records().iter().map(|r| record_json(run, &labels, &r)).collect::<Vec<_>>(),
            "executions": executions_json(run, &labels),
            "executions_per_step": counts.iter().map(|(s, c)| (s.clone(), json!(c))).collect::<serde_json::Map<_, _>>(),
            "status": status,
            "unfinished": sim.unfinished.iter().map(|x| x.to_string()).collect::<Vec<_>>(),
        });
        serde_json::to_writer_pretty(&mut out, &value)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(out, "simulate {} (policy {})", spec.name, policy.as_str())?;
    writeln!(out)?;
    writeln!(out, "timeline:")?;
    for r in run.records() {
        let r = &r;
        if let Some(line) = record_text(run, &labels, r) {
            let indent = if matches!(
                r,
                Record::Skipped { .. }
                    | Record::PreconditionEvaluated { .. }
                    | Record::ExecutionStarted { .. }
                    | Record::FixedListOverflow { .. }
            ) {
                ""
            } else {
                "  "
            };
            writeln!(out, "{indent}{line}")?;
        }
    }
    writeln!(out)?;
    writeln!(out, "executions per step:")?;
    let width = counts.iter().map(|(s, _)| s.len()).max().unwrap_or(0);
    for (step, n) in &counts {
        let note = match n {
            0 => "  never ran",
            1 => "",
            _ => "  ran more than once",
        };
        writeln!(out, "  {step:<width$}  {n}{note}")?;
    }
    writeln!(out)?;
    match run.status() {
        RunStatus::Terminated { by } => writeln!(
            out,
            "run: terminated by {} ({})",
            labels.get(by),
            run.type_name(run.log()[by as usize].ty)
        )?,
        RunStatus::Live => writeln!(
            out,
            "run: still live after the last arrival (no stop event): it would wait forever"
        )?,
        RunStatus::NotStarted => writeln!(out, "run: never started (no start event arrived)")?,
    }
    if !sim.unfinished.is_empty() {
        writeln!(
            out,
            "warning: stopped after {} completions with {} executions still running; the workflow may loop",
            args.max_completions,
            sim.unfinished.len()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
