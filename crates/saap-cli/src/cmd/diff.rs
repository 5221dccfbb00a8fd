//! `saap diff SPEC A.json B.json`: where two recorded runs of one workflow part ways — the
//! first decision record that differs — and how they differ in sum (issue 23 §3). The
//! histories (from `simulate --history-out` or an agent's `show --history-out`) name
//! events by type only, so fields are not compared here; an agent's `diff RUN_A RUN_B`
//! compares them too. The comparison is saap-dispatch's `diff`.

use crate::input::{InvalidInput, load_history_run, load_spec};
use saap_dispatch::diff::{Side, diff_runs, diff_text};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(clap::Args)]
#[command(
    after_help = "Both runs are rebuilt through the dispatch core against SPEC, then compared record by record:
runs that took the same path have the same decision records in the same order, so the first
record that differs (or names an event of another type) is where they part: an event from
outside, an output, a decision, a binding, or the end.

Examples:
  saap simulate SPEC --policy fifo --history-out a.json
  saap simulate SPEC --policy lifo --history-out b.json
  saap diff SPEC a.json b.json
  saap diff SPEC a.json b.json --json

Exit codes: 0 the runs are the same, 1 they differ, 2 invalid input (a spec or history that
cannot be read, a history of another workflow), 3 internal failure."
)]
pub struct DiffArgs {
    /// The workflow spec both runs are of (YAML or JSON; `-` for stdin).
    pub spec: PathBuf,
    /// The first run's history file.
    pub a: PathBuf,
    /// The second run's history file.
    pub b: PathBuf,
    /// Print JSON: {same, first: {record, kind, a, b, detail} or null, executions, events,
    /// end_a, end_b, records_a, records_b}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: DiffArgs) -> anyhow::Result<ExitCode> {
    if args.spec.as_os_str() == "-" && (args.a.as_os_str() == "-" || args.b.as_os_str() == "-") {
        return Err(InvalidInput("only one input can come from stdin".to_owned()).into());
    }
    let spec = Arc::new(load_spec(&args.spec)?);
    let a = load_history_run(&args.a, spec.clone(), &args.spec)?;
    let b = load_history_run(&args.b, spec, &args.spec)?;
    let d = diff_runs(&Side::of(&a), &Side::of(&b));
    if args.json {
        let mut doc = serde_json::to_value(&d)?;
        doc["same"] = serde_json::Value::Bool(d.is_same());
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!(
            "{}",
            diff_text(
                &d,
                &args.a.display().to_string(),
                &args.b.display().to_string()
            )
        );
    }
    Ok(ExitCode::from(u8::from(!d.is_same())))
}
