//! `saap explain SPEC`: why each step fired, fired more than once, or never fired — in a
//! simulated run of the spec, in a recorded run (`--history`, as written by
//! `saap simulate --history-out`), or in a stored or live run by id (`--run`, handed to
//! [`super::explain_run`]). The report is printed by [`super::explain_report`].

pub use super::explain_args::ExplainArgs;
use super::explain_report::{Extra, selected_steps};
use crate::input::{InvalidInput, load_spec};
use saap_dispatch::explain::CutOff;
use saap_dispatch::render::EventLabels;
use saap_dispatch::sim::{Policy, simulate};
use std::process::ExitCode;
use std::sync::Arc;

pub fn run(args: ExplainArgs) -> anyhow::Result<ExitCode> {
    if args.recorded.run.is_some() {
        return super::explain_run::run(args);
    }
    let Some(spec_path) = &args.spec else {
        return Err(
            InvalidInput("give the workflow SPEC to explain (or --run RUN)".to_owned()).into(),
        );
    };
    if spec_path.as_os_str() != "-" && saap_python::is_python_input(spec_path) {
        return Err(InvalidInput(format!(
            "`{}` is Python agent source: explain reads it with --run RUN (a recorded run); to simulate it, use the spec `saap check {} --json` builds",
            spec_path.display(),
            spec_path.display()
        ))
        .into());
    }
    let spec = Arc::new(load_spec(spec_path)?);
    let (run, labels, source, cut_off) = match &args.history {
        Some(path) => {
            let run = crate::input::load_history_run(path, spec.clone(), spec_path)?;
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
    let steps = selected_steps(&spec, &args.steps)?;
    super::explain_report::print(
        &spec,
        &run,
        &labels,
        &steps,
        args.steps.is_empty(),
        &source,
        cut_off,
        args.json,
        Extra::default(),
    )?;
    Ok(ExitCode::SUCCESS)
}
