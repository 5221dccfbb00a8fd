//! `saap report --symptom S [--step NAME] INPUT`: seed 000's debug report for one symptom,
//! filled from the tools — `check` (findings with rule and location), `explain` (a simulated
//! run: why the step ran again, what it lacked), `explore` (every interleaving: worst case with
//! its witness, stalls, events after stop) and, with `--run RUN` and `--db`/`--server`, a
//! stored or live run read through `saap-inspect`.
//!
//! Layout: [`subject`] reads INPUT, [`run_evidence`] reads a run, [`symptom`] diagnoses,
//! [`fix`] derives fixes and verification, [`model`] is the report (`--json` prints it),
//! [`render`] writes the Markdown. This file parses the command line, puts the parts together
//! and picks the exit code: 0 a root cause was found, 1 none was found, 2 invalid input or
//! usage, 3 an I/O failure (a store or server that cannot be read).

pub mod fix;
pub mod model;
pub mod render;
pub mod run_evidence;
pub mod subject;
pub mod symptom;

use crate::cmd::inspect::{SourceArgs, open};
use crate::input::InvalidInput;
use anyhow::Context;
use model::{Agent, DagStep, Report, Symptom, SymptomReport, Verdict};
use saap_dispatch::CompiledSpec;
use saap_dispatch::spec::ParamKind;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Version of the `--json` shape.
pub const REPORT_FORMAT: u32 = 1;

#[derive(clap::Args)]
#[command(after_help = "Symptoms (the debugging guide's triage table):
  runs-twice     a step executes more than once          (issue 1; optional trap, list re-runs)
  never-runs     a step never executes                   (issue 2; missing upstream, FixedList)
  after-stop     events are emitted after a stop event   (issue 3; dangling stop, async leak)
  precondition   precondition params don't match         (issue 4)
  wont-start     the agent doesn't start at all          (issue 5)
  config         config validation errors, config lie    (issue 6)

Examples:
  saap report --symptom runs-twice --step translate examples/specs/optional-trap.yaml
  saap report --symptom runs-twice --step my_step examples/python/runs_twice.py
  saap report --symptom never-runs examples/python/never_runs.py --json
  saap report --symptom after-stop examples/specs/dangling-stop.yaml
  saap report --symptom runs-twice --step publish agent.json --db agent.db --run RUN

Exit codes: 0 a root cause was found, 1 no cause found (the report says what was checked),
2 invalid input or usage (unknown symptom or step, unreadable file), 3 a store or server
that cannot be read.")]
pub struct ReportArgs {
    /// The agent: a workflow spec (JSON or YAML; `-` for stdin) or Python agent source (a
    /// `.py` file or a package folder).
    pub input: PathBuf,
    /// What the user sees.
    #[arg(long, value_enum)]
    pub symptom: Symptom,
    /// The step the symptom is about (runs-twice, never-runs, precondition: only its causes;
    /// the other symptoms are about the whole agent, and the step narrows the evidence).
    #[arg(long, value_name = "NAME")]
    pub step: Option<String>,
    /// The agent class, when the Python source holds several.
    #[arg(long, value_name = "CLASS")]
    pub agent: Option<String>,
    /// A run whose evidence to add, read from --db PATH (a saap store) or --server URL (NATS).
    #[arg(long, value_name = "RUN")]
    pub run: Option<String>,
    /// `--db`/`--server` (and NATS credentials) as for `saap inspect`; `--json` prints the
    /// report as JSON.
    #[command(flatten)]
    pub source: SourceArgs,
}

pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let subject = subject::load(&args.input, args.agent.as_deref())?;
    let spec = subject.spec.clone();
    if let Some(s) = &args.step
        && spec.step_index(s).is_none()
    {
        let known: Vec<&str> = spec.steps.iter().map(|s| s.name.as_str()).collect();
        return Err(InvalidInput(format!(
            "no step of `{}` is named `{s}`; the steps are: {}",
            subject.class,
            known.join(", ")
        ))
        .into());
    }
    let has_source = args.source.db.is_some() || args.source.server.is_some();
    // `wont-start` asks the server about the class stream and needs no run.
    let live_check = args.symptom == Symptom::WontStart && args.source.server.is_some();
    match (&args.run, has_source) {
        (Some(_), false) => {
            return Err(InvalidInput(
                "--run needs where the run is: --db PATH (a saap store) or --server nats://HOST:PORT"
                    .into(),
            )
            .into());
        }
        (None, true) if !live_check => {
            return Err(InvalidInput(
                "--db/--server give a run's evidence: add --run RUN (list runs with `saap inspect --db PATH runs`); only --symptom wont-start reads a server without a run"
                    .into(),
            )
            .into());
        }
        _ => {}
    }
    let (facts, live) = if has_source {
        let shown = match (&args.source.db, &args.source.server) {
            (Some(db), _) => format!("store {}", db.display()),
            (None, Some(url)) => format!("server {url}"),
            _ => String::new(),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the I/O runtime")?;
        rt.block_on(async {
            let source = open(&args.source).await?;
            let facts = match &args.run {
                Some(run_id) => Some(
                    run_evidence::read(
                        &source,
                        shown.clone(),
                        run_id,
                        &subject,
                        args.step.as_deref(),
                    )
                    .await?,
                ),
                None => None,
            };
            let live = if live_check {
                run_evidence::class_stream(&source, shown, &subject.class).await?
            } else {
                None
            };
            anyhow::Ok((facts, live))
        })?
    } else {
        (None, None)
    };
    let step = args.step.as_deref();
    let d = symptom::diagnose(&subject, args.symptom, step, facts.as_ref(), live.as_ref())?;
    let fixes = fix::fixes(
        &subject,
        &d.root_causes,
        &d.runtime_advice,
        &d.simulated_executions,
    );
    let verdict = if d.root_causes.is_empty() {
        Verdict::NoCauseFound
    } else {
        Verdict::CauseFound
    };
    let verification = match verdict {
        Verdict::CauseFound => fix::verification(&subject, args.symptom, step, &d.root_causes),
        Verdict::NoCauseFound => model::Verification {
            commands: Vec::new(),
            test_assertion: None,
        },
    };
    let at = step.map(|s| format!(" at step `{s}`")).unwrap_or_default();
    let conclusion = match verdict {
        Verdict::NoCauseFound => format!(
            "No cause found for {}{at}; what was checked: {}.",
            args.symptom.as_str(),
            d.checked.join("; ")
        ),
        Verdict::CauseFound => {
            let list: Vec<String> = d
                .root_causes
                .iter()
                .map(|c| {
                    let mut tags: Vec<&str> = Vec::new();
                    if !c.rule.is_empty() {
                        tags.push(&c.rule);
                    }
                    if let Some(code) = &c.code {
                        tags.push(code);
                    }
                    let on = c
                        .step
                        .as_deref()
                        .map(|s| format!(" on `{s}`"))
                        .unwrap_or_default();
                    format!("{}{on} ({})", c.constraint, tags.join(", "))
                })
                .collect();
            format!(
                "{} cause{} of {}{at}: {}.",
                list.len(),
                if list.len() == 1 { "" } else { "s" },
                args.symptom.as_str(),
                list.join("; ")
            )
        }
    };
    let report = Report {
        report_format: REPORT_FORMAT,
        agent: Agent {
            class: subject.class.clone(),
            location: subject.location.clone(),
            input_kind: match subject.kind {
                subject::InputKind::Spec => "spec",
                subject::InputKind::Python => "python",
            }
            .into(),
            input: subject.input.clone(),
            config: subject.config.clone(),
            steps: spec.steps.len(),
            events: named_types(&spec),
        },
        dag: dag(&spec),
        symptom: SymptomReport {
            symptom: args.symptom,
            description: args.symptom.description().into(),
            step: args.step.clone(),
            run: args.run.clone(),
        },
        verdict,
        conclusion,
        root_causes: d.root_causes,
        evidence: d.evidence,
        fixes,
        verification,
        checked: d.checked,
    };
    let mut out = std::io::stdout().lock();
    if args.source.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        out.write_all(render::markdown(&report).as_bytes())?;
    }
    out.flush()?;
    Ok(ExitCode::from(match report.verdict {
        Verdict::CauseFound => 0,
        Verdict::NoCauseFound => 1,
    }))
}

/// How many distinct event types the steps name.
fn named_types(spec: &CompiledSpec) -> usize {
    let mut seen = std::collections::BTreeSet::new();
    for s in &spec.steps {
        seen.extend(s.params.iter().flat_map(|p| p.types.iter().copied()));
        seen.extend(s.outputs.iter().copied());
    }
    seen.len()
}

fn dag(spec: &CompiledSpec) -> Vec<DagStep> {
    let name = |t: &u32| spec.type_info(*t).name.clone();
    spec.steps
        .iter()
        .map(|s| {
            let inputs = s
                .params
                .iter()
                .map(|p| {
                    let types: Vec<String> = p.types.iter().map(name).collect();
                    let kind = match p.kind {
                        ParamKind::FixedList => format!("fixed_list of {}", p.size),
                        k => k.as_str().to_string(),
                    };
                    format!("{}: {} ({kind})", p.name, types.join(" | "))
                })
                .collect();
            let mut options = Vec::new();
            if let Some(p) = &s.precondition {
                options.push(format!("precondition={}", p.name));
            }
            if let Some(m) = s.max_executions_per_run {
                options.push(format!("max_executions_per_run={m}"));
            }
            if !s.stop_on_error {
                options.push("stop_on_error=false".into());
            }
            DagStep {
                step: s.name.clone(),
                inputs,
                outputs: s.outputs.iter().map(name).collect(),
                options,
            }
        })
        .collect()
}
