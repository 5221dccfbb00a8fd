//! `saap explain SPEC`: why each step fired, fired more than once, or never fired — in a
//! simulated run of the spec, or in a recorded run (`--history`, as written by
//! `saap simulate --history-out`).

use crate::input::{InvalidInput, load_spec};
use saap_dispatch::explain::{CutOff, explain_run};
use saap_dispatch::render::EventLabels;
use saap_dispatch::replay::History;
use saap_dispatch::sim::{DEFAULT_MAX_COMPLETIONS, Policy, simulate};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// Largest history file accepted.
const MAX_HISTORY_BYTES: u64 = 256 * 1024 * 1024;

#[derive(clap::Args)]
#[command(after_help = "Examples:
  saap explain examples/specs/optional-trap.yaml --step translate
  saap explain examples/specs/missing-upstream.yaml
  saap simulate examples/specs/rag.yaml --history-out run.json && saap explain examples/specs/rag.yaml --history run.json")]
pub struct ExplainArgs {
    /// The workflow spec (JSON or YAML; `-` for stdin).
    pub spec: PathBuf,
    /// Explain only this step (repeatable). Without it, every step: one line for steps that
    /// ran once, details for steps that ran more than once or never.
    #[arg(long = "step", value_name = "NAME")]
    pub steps: Vec<String>,
    /// A recorded run (History JSON) to explain instead of simulating the spec.
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
    /// Completion policy of the simulation: fifo, lifo or arrivals-first.
    #[arg(long, default_value = "fifo")]
    pub policy: String,
    /// Stop the simulation after this many completions (as `simulate`: guards against
    /// workflows that loop forever; the report says when it was hit and names the loop).
    #[arg(long, default_value_t = DEFAULT_MAX_COMPLETIONS)]
    pub max_completions: usize,
    /// Print JSON: `{spec, source, cut_off, cycle, steps}`, `steps` a list of step
    /// explanations.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ExplainArgs) -> anyhow::Result<ExitCode> {
    let spec = Arc::new(load_spec(&args.spec)?);
    let (run, labels, source, cut_off) = match &args.history {
        Some(path) => {
            let mut text = String::new();
            std::fs::File::open(path)
                .map_err(|e| {
                    InvalidInput(format!("cannot open history `{}`: {e}", path.display()))
                })?
                .take(MAX_HISTORY_BYTES)
                .read_to_string(&mut text)
                .map_err(|e| {
                    InvalidInput(format!("cannot read history `{}`: {e}", path.display()))
                })?;
            let history: History = serde_json::from_str(&text).map_err(|e| {
                InvalidInput(format!(
                    "{}:{}:{}: not a history file: {e}",
                    path.display(),
                    e.line(),
                    e.column()
                ))
            })?;
            let run = history.replay(spec.clone()).map_err(|e| {
                InvalidInput(format!(
                    "{}: cannot replay this history against `{}`: {e}",
                    path.display(),
                    args.spec.display()
                ))
            })?;
            let labels = EventLabels::for_run(&run, &[]);
            (
                run,
                labels,
                format!("recorded run {}", path.display()),
                None,
            )
        }
        None => {
            let policy = Policy::parse(&args.policy).ok_or_else(|| {
                InvalidInput(format!(
                    "unknown policy `{}`; use fifo, lifo or arrivals-first",
                    args.policy
                ))
            })?;
            let sim = simulate(spec.clone(), policy, args.max_completions)?;
            let labels = EventLabels::for_run(&sim.run, &sim.arrivals);
            let cut_off = CutOff::of(sim.completions, sim.unfinished.len());
            (
                sim.run,
                labels,
                format!("simulated run, policy {}", policy.as_str()),
                cut_off,
            )
        }
    };
    let steps: Vec<u32> = if args.steps.is_empty() {
        (0..spec.steps.len() as u32).collect()
    } else {
        args.steps
            .iter()
            .map(|name| {
                spec.step_index(name).ok_or_else(|| {
                    let known: Vec<&str> = spec.steps.iter().map(|s| s.name.as_str()).collect();
                    InvalidInput(format!(
                        "no step is named `{name}`; the steps are: {}",
                        known.join(", ")
                    ))
                })
            })
            .collect::<Result<_, _>>()?
    };
    let explained = explain_run(&run, &labels, &steps, cut_off);
    if let Some(c) = &explained.cut_off {
        eprintln!("warning: {}", c.message);
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        let doc = serde_json::json!({
            "spec": spec.name,
            "source": source,
            "cut_off": explained.cut_off,
            "cycle": explained.cycle,
            "steps": explained.steps,
        });
        serde_json::to_writer_pretty(&mut out, &doc)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(out, "explain {} ({source})", spec.name)?;
    if let Some(c) = &explained.cut_off {
        writeln!(out, "warning: {}", c.message)?;
    }
    if let Some(c) = &explained.cycle {
        let code = c.code.map_or(String::new(), |code| format!(" [{code}]"));
        writeln!(out)?;
        writeln!(out, "loop{code}: {}", c.message)?;
        writeln!(
            out,
            "  the last execution ends a chain of {} executions, each started by what the one before it returned",
            c.chain
        )?;
        writeln!(out, "  fix: {}", c.fix)?;
    }
    let brief = args.steps.is_empty();
    for e in &explained.steps {
        writeln!(out)?;
        writeln!(out, "{}", e.summary)?;
        if brief && e.executions == 1 {
            continue;
        }
        for f in e.fired.iter().take(MAX_LISTED) {
            let pre = match f.precondition {
                Some(true) => " (precondition held)",
                _ => "",
            };
            writeln!(
                out,
                "  {} on {} (from {}){pre}: {}",
                f.execution,
                f.trigger,
                f.trigger_from,
                f.bindings.join(", ")
            )?;
            for why in &f.new_because {
                writeln!(out, "      new input set: {why}")?;
            }
        }
        if e.fired.len() > MAX_LISTED {
            writeln!(
                out,
                "  … {} more executions (see --json)",
                e.fired.len() - MAX_LISTED
            )?;
        }
        if e.executions == 0 {
            for s in e.skipped.iter().take(10) {
                writeln!(out, "  candidate on {}: skipped — {}", s.trigger, s.reason)?;
            }
            if e.skipped.len() > 10 {
                writeln!(out, "  … {} more skips (see --json)", e.skipped.len() - 10)?;
            }
            for m in &e.still_missing {
                writeln!(out, "  at the end: {m}")?;
            }
        }
        for a in &e.advice {
            writeln!(out, "  fix: {a}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// At most this many executions of one step are listed in the text report.
const MAX_LISTED: usize = 10;
