//! `saap explore SPEC`: every interleaving of the spec's outside arrivals and step
//! completions through the dispatch core (saap_dispatch::explore), reported as a per-step
//! table of best/worst executions and the bad states that can be reached, each with a
//! witness trace.
//!
//! Exit codes: 0 explored (whatever was found, unless `--fail-on` names it), 1 a state named
//! by `--fail-on` is reachable, 2 invalid input.

use crate::input::load_spec;
use saap_dispatch::explore::{
    DEFAULT_MAX_DEPTH, DEFAULT_MAX_STATES, Exploration, ExploreOptions, Progress, TraceStep,
    explore,
};
use serde_json::{Map, Value};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A kind of reachable state that makes `--fail-on` exit with 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// A final state where the run never ended.
    Stall,
    /// An event appended after the run ended.
    AfterStop,
    /// An ExceptionEvent (a failed step with stop_on_error, or an emitted exception).
    Exception,
    /// Some step can execute more than once.
    MultiExec,
    /// A bound was hit, so the results are partial.
    Bound,
}

#[derive(clap::Args)]
#[command(
    after_help = "The spec's `simulation` section gives the outside arrivals and what each step
execution returns (or that it fails); a step without an entry returns each of its declared
outputs once. Every order in which arrivals come and running executions finish is tried;
equal states are merged and independent completions are not branched on (docs/explore.md).
An output a step returns for later delivery (`{event: T, delayed: true}`, `Delayed<T>` in
Rust) is a timer: it fires at every point after the execution that set it, until the run
ends. --cancel also cancels the run at every point while it is live.

Examples:
  saap explore examples/specs/race-condition.yaml
  saap explore examples/specs/list-reruns.yaml --json | jq '.steps[] | {step, worst}'
  saap explore agent.yaml --permute-arrivals --max-states 1000000
  saap explore approval.yaml --cancel        what a cancellation at any point leaves behind
  saap explore agent.yaml --fail-on stall,after-stop,exception,bound   (for CI)

Exit codes: 0 explored, 1 a state named by --fail-on is reachable, 2 invalid input.
When a bound is hit the report says \"bound hit: results are partial\"."
)]
pub struct ExploreArgs {
    /// The workflow spec (JSON or YAML; `-` for stdin).
    pub spec: PathBuf,
    /// Print JSON: {spec, complete, workflow, options, bounds_hit, stats, steps, stalls,
    /// after_stop, exceptions}.
    #[arg(long)]
    pub json: bool,
    /// Stop after this many distinct states (results are then partial).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_STATES)]
    pub max_states: usize,
    /// Do not follow a path longer than this many actions (results are then partial).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_DEPTH)]
    pub max_depth: usize,
    /// Let outside arrivals come in any order, not only the declared one.
    #[arg(long)]
    pub permute_arrivals: bool,
    /// Also cancel the run (a RunCancelledEvent from outside) at every point while it is live.
    #[arg(long)]
    pub cancel: bool,
    /// Exit with 1 when such a state is reachable, or with `bound` when a bound was hit
    /// (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "KINDS")]
    pub fail_on: Vec<FailOn>,
    /// Explore without state merging and partial-order reduction (slow; for checking the
    /// reductions).
    #[arg(long, hide = true)]
    pub no_reductions: bool,
}

pub fn run(args: ExploreArgs) -> anyhow::Result<ExitCode> {
    let spec = Arc::new(load_spec(&args.spec)?);
    let options = ExploreOptions {
        max_states: args.max_states.max(1),
        max_depth: args.max_depth.max(1),
        permute_arrivals: args.permute_arrivals,
        dedup: !args.no_reductions,
        partial_order: !args.no_reductions,
        cancel: args.cancel,
    };
    let mut bar = ProgressLine::new(std::io::stderr().is_terminal());
    let result = explore(spec.clone(), &options, &mut |p| bar.update(p));
    bar.clear();
    let x = result?;
    let shown = args.spec.display().to_string();
    let arrivals = spec
        .source
        .simulation
        .as_ref()
        .map_or(0, |s| s.arrivals.len());

    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &to_json(&shown, &x)?)?;
        writeln!(out)?;
    } else {
        out.write_all(render_text(&shown, arrivals, &x).as_bytes())?;
    }
    out.flush()?;
    for b in &x.bounds_hit {
        eprintln!("saap explore: {}", b.message);
    }

    let hit: Vec<&str> = args
        .fail_on
        .iter()
        .filter(|k| match k {
            FailOn::Stall => x.stalls_found > 0,
            FailOn::AfterStop => !x.after_stop.is_empty(),
            FailOn::Exception => !x.exceptions.is_empty(),
            FailOn::MultiExec => x.has_multi_exec(),
            FailOn::Bound => !x.is_complete(),
        })
        .map(|k| match k {
            FailOn::Stall => "stall",
            FailOn::AfterStop => "after-stop",
            FailOn::Exception => "exception",
            FailOn::MultiExec => "multi-exec",
            FailOn::Bound => "bound",
        })
        .collect();
    if hit.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("saap explore: reachable (--fail-on): {}", hit.join(", "));
        Ok(ExitCode::from(1))
    }
}

fn to_json(shown: &str, x: &Exploration) -> anyhow::Result<Value> {
    let mut doc = Map::new();
    doc.insert("spec".into(), Value::from(shown));
    doc.insert("complete".into(), Value::from(x.is_complete()));
    if let Value::Object(rest) = serde_json::to_value(x)? {
        doc.extend(rest);
    }
    Ok(Value::Object(doc))
}

fn trace_lines(s: &mut String, indent: usize, trace: &[TraceStep]) {
    if trace.is_empty() {
        s.push_str(&format!(
            "{:indent$}(the initial state: nothing happened)\n",
            ""
        ));
    }
    let width = trace.len().to_string().len();
    for (i, t) in trace.iter().enumerate() {
        s.push_str(&format!("{:indent$}{:>width$}. {}\n", "", i + 1, t.text));
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The human report.
fn render_text(spec: &str, arrivals: usize, x: &Exploration) -> String {
    let mut s = String::new();
    let order = match (x.options.permute_arrivals, x.options.cancel) {
        (true, false) => "in every order",
        (false, false) => "in declared order",
        (true, true) => "in every order, and a cancellation at every point",
        (false, true) => "in declared order, and a cancellation at every point",
    };
    s.push_str(&format!(
        "explore `{}` ({spec}): {} {order}\n",
        x.workflow,
        plural(arrivals, "outside arrival", "outside arrivals")
    ));
    if arrivals == 0 {
        s.push_str(
            "  note: the spec has no `simulation.arrivals`, so nothing starts the run; list the events that come from outside (e.g. a UserMessageEvent)\n",
        );
    }
    let st = &x.stats;
    s.push_str(&format!(
        "  {} explored ({} merged by deduplication, {} reduced), {}, longest path {}\n",
        plural(st.states, "state", "states"),
        st.merged,
        st.reduced,
        plural(st.final_states, "final state", "final states"),
        st.longest_path
    ));
    if x.is_complete() {
        s.push_str("  complete: every interleaving was explored\n");
    } else {
        for b in &x.bounds_hit {
            s.push_str(&format!("  {}\n", b.message));
        }
    }

    s.push_str("\nExecutions per step (best and worst over all complete interleavings):\n");
    let w = x
        .steps
        .iter()
        .map(|p| p.step.len())
        .max()
        .unwrap_or(4)
        .max(4);
    s.push_str(&format!(
        "  {:<w$}  {:>4}  {:>5}\n",
        "step", "best", "worst"
    ));
    let show = |n: Option<usize>| n.map_or("-".to_string(), |n| n.to_string());
    for p in &x.steps {
        let mark = match p.worst {
            Some(n) if n > 1 => "  <- can run more than once",
            Some(0) => "  <- never runs",
            _ => "",
        };
        s.push_str(&format!(
            "  {:<w$}  {:>4}  {:>5}{mark}\n",
            p.step,
            show(p.best),
            show(p.worst)
        ));
    }
    if x.stats.final_states == 0 {
        s.push_str("  (no complete interleaving was reached within the bounds)\n");
    }
    for p in x.steps.iter().filter(|p| p.worst.unwrap_or(0) > 1) {
        s.push_str(&format!(
            "\nWorst case of `{}` ({} executions):\n",
            p.step,
            p.worst.unwrap_or(0)
        ));
        trace_lines(&mut s, 4, &p.worst_witness);
        for r in &p.reruns {
            s.push_str(&format!("  ran again: {r}\n"));
        }
    }

    if x.stalls.is_empty() && x.is_complete() {
        s.push_str("\nStalls: none reachable\n");
    } else if x.stalls.is_empty() {
        s.push_str("\nStalls: none reached within the bounds\n");
    } else {
        s.push_str(&format!(
            "\nStalls: {} reachable (the run never ends)\n",
            x.stalls_found
        ));
        for (i, stall) in x.stalls.iter().enumerate() {
            s.push_str(&format!("  stall {}:\n", i + 1));
            if stall.never_started {
                s.push_str("    the run never started: no start event arrived\n");
            }
            if stall.waiting.is_empty() {
                s.push_str("    every step ran, but none returned a stop event\n");
            }
            for wt in &stall.waiting {
                s.push_str(&format!("    `{}` waits forever: {}\n", wt.step, wt.reason));
            }
            s.push_str("    witness:\n");
            trace_lines(&mut s, 6, &stall.witness);
        }
        if x.stalls_found > x.stalls.len() {
            s.push_str(&format!(
                "  ({} more distinct stalls not shown)\n",
                x.stalls_found - x.stalls.len()
            ));
        }
    }

    if let Some(c) = &x.cycle {
        let code = c.code.map_or(String::new(), |code| format!(" [{code}]"));
        let who = match c.steps.as_slice() {
            [one] => format!("`{one}` keeps triggering itself"),
            many => format!(
                "steps {} keep triggering each other",
                many.iter()
                    .map(|st| format!("`{st}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        s.push_str(&format!(
            "\nLoop{code}: {who}: a path cut at depth {} ends with a chain of {} executions, each started by what the one before it returned\n",
            x.options.max_depth, c.chain
        ));
        s.push_str(&format!("  {}\n", c.message));
        s.push_str(&format!("  fix: {}\n", c.fix));
    }

    if x.after_stop.is_empty() {
        s.push_str("\nEvents after stop: none reachable\n");
    } else {
        s.push_str(&format!(
            "\nEvents after stop: {} reachable (stored as evidence, never dispatched)\n",
            x.after_stop.len()
        ));
        for a in &x.after_stop {
            match &a.step {
                Some(step) => s.push_str(&format!("  {} from `{step}`:\n", a.event)),
                None => s.push_str(&format!("  {} from outside:\n", a.event)),
            }
            trace_lines(&mut s, 4, &a.witness);
        }
    }

    if x.exceptions.is_empty() {
        s.push_str("\nExceptions: none reachable\n");
    } else {
        s.push_str(&format!("\nExceptions: {} reachable\n", x.exceptions.len()));
        for e in &x.exceptions {
            let from = e
                .step
                .as_ref()
                .map_or("outside".to_string(), |st| format!("`{st}`"));
            let msg = e
                .message
                .as_ref()
                .map_or(String::new(), |m| format!(" ({m})"));
            let when = if e.after_stop { ", after the stop" } else { "" };
            s.push_str(&format!("  {} from {from}{msg}{when}:\n", e.event));
            trace_lines(&mut s, 4, &e.witness);
        }
    }
    s
}

/// A progress line on stderr, redrawn at most every 100 ms, only on a terminal.
struct ProgressLine {
    enabled: bool,
    last: Option<Instant>,
    drawn: bool,
}

impl ProgressLine {
    fn new(enabled: bool) -> ProgressLine {
        ProgressLine {
            enabled,
            last: None,
            drawn: false,
        }
    }

    fn update(&mut self, p: Progress) {
        if !self.enabled || p.done {
            return;
        }
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < Duration::from_millis(100))
        {
            return;
        }
        self.last = Some(now);
        let pct = p.states.saturating_mul(100) / p.max_states.max(1);
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[2Kexploring: {} states ({pct}% of --max-states), {} merged, {} final, depth {}",
            p.states, p.merged, p.final_states, p.depth
        );
        let _ = err.flush();
        self.drawn = true;
    }

    fn clear(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}
