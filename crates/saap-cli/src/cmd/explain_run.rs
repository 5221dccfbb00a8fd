//! `saap explain --run RUN (--db PATH | --server URL) [SPEC]`: a stored or live run by id,
//! explained through the core without the `show --history-out` round trip.
//!
//! Glue only: `saap-inspect`'s [`recorded`](saap_inspect::recorded) reads the run and turns it
//! into the core's run (a saap journal replayed and checked record by record; a
//! Python-recorded run rebuilt from its events with the differences of the Python
//! dispatcher); this file finds the spec (a file, Python source, or a saap worker's class
//! discovery answer) and prints through [`super::explain_report`]. Must not write anything.

use super::explain_args::ExplainArgs;
use super::explain_report::{Extra, selected_steps};
use super::inspect::fail;
use crate::input::{InvalidInput, load_spec};
use anyhow::Context;
use saap_dispatch::render::EventLabels;
use saap_dispatch::spec::WorkflowSpec;
use saap_dispatch::{CompiledSpec, Run};
use saap_inspect::recorded::{Recorded, RecordedRun, journal, python};
use saap_inspect::{InspectError, NatsInspector, StoreInspector};
use serde_json::json;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

pub fn run(args: ExplainArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the I/O runtime")?;
    rt.block_on(run_async(args))
}

async fn run_async(args: ExplainArgs) -> anyhow::Result<ExitCode> {
    let r = &args.recorded;
    let run_id = r.run.clone().unwrap_or_default();
    let (recorded, nats) = match (&r.db, &r.server) {
        (Some(db), None) => {
            let store = StoreInspector::open(db).map_err(fail)?;
            (store.recorded_run(&run_id).map_err(fail)?, None)
        }
        (None, Some(url)) => {
            let options = r
                .nats
                .options(url, "saap-explain", Duration::from_secs(r.timeout))?;
            let n = NatsInspector::connect(&options).await.map_err(fail)?;
            let rec = n
                .recorded_run(&run_id, r.stream.as_deref())
                .await
                .map_err(fail)?;
            (rec, Some(n))
        }
        _ => {
            return Err(InvalidInput(
                "SAAP-I008: say where the run is recorded: --db PATH (a saap store) or --server nats://HOST:PORT"
                    .to_owned(),
            )
            .into());
        }
    };
    let (spec, spec_from) = find_spec(&args, &recorded, nats.as_ref()).await?;
    let spec = Arc::new(spec);
    let mut extra = Extra::default();
    let (run, recorded_by): (Run, &str) = match &recorded.body {
        Recorded::Journal(j) => (
            journal::replay(&run_id, j, spec.clone()).map_err(fail)?,
            "saap",
        ),
        Recorded::Events(e) => {
            let rebuilt = python::rebuild(&run_id, e, spec.clone()).map_err(fail)?;
            extra.text = python_text(&rebuilt);
            extra.json.insert("notes".into(), json!(rebuilt.notes));
            extra.json.insert(
                "python_differences".into(),
                serde_json::to_value(&rebuilt.differences)?,
            );
            (rebuilt.run, "python")
        }
    };
    // A fork says where it came from and which executions it reused (issue 23 §2).
    if let Recorded::Journal(j) = &recorded.body
        && let Some(origin) = saap_inspect::recorded::lineage::lineage(j)
    {
        extra.text.push_str(&format!("\n{}\n", origin.text()));
        extra
            .json
            .insert("forked_from".into(), serde_json::to_value(&origin)?);
    }
    let events_from = match recorded.body {
        Recorded::Journal(_) => format!("the journal in {}", recorded.place),
        Recorded::Events(_) => format!(
            "the events in {} (recorded by the Python platform: no decision records)",
            recorded.place
        ),
    };
    let mut json_extra = serde_json::Map::new();
    json_extra.insert("run".into(), json!(run_id));
    json_extra.insert("recorded_by".into(), json!(recorded_by));
    json_extra.insert("events_from".into(), json!(events_from));
    json_extra.insert("spec_from".into(), json!(spec_from));
    json_extra.extend(std::mem::take(&mut extra.json));
    extra.json = json_extra;
    let source = format!("run {run_id} from {events_from}; spec from {spec_from}");
    let labels = EventLabels::for_run(&run, &[]);
    let steps = selected_steps(&spec, &args.steps)?;
    super::explain_report::print(
        &spec,
        &run,
        &labels,
        &steps,
        args.steps.is_empty(),
        &source,
        None,
        args.json,
        extra,
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The spec to explain the run with, and where it came from.
async fn find_spec(
    args: &ExplainArgs,
    recorded: &RecordedRun,
    nats: Option<&NatsInspector>,
) -> anyhow::Result<(CompiledSpec, String)> {
    let class = recorded.agent_class();
    if let Some(path) = &args.spec {
        if path.as_os_str() != "-" && saap_python::is_python_input(path) {
            return python_spec(path, args.recorded.agent.as_deref(), class);
        }
        return Ok((load_spec(path)?, format!("`{}`", path.display())));
    }
    let Some(n) = nats else {
        return Err(fail(InspectError::NoSpec {
            class: class.to_owned(),
            reason: "a store keeps no spec; give SPEC: the agent's spec file (`<agent> spec > agent.json`) or its Python source".to_owned(),
        }));
    };
    let found = n.discover_spec(class).await.map_err(fail)?;
    let Some(value) = found else {
        return Err(fail(InspectError::NoSpec {
            class: class.to_owned(),
            reason: format!(
                "no worker of the class answered class discovery with a workflow spec within {}s (a Python agent's answer carries none); give SPEC: the agent's spec file (`<agent> spec > agent.json`) or its Python source",
                args.recorded.timeout
            ),
        }));
    };
    let spec: WorkflowSpec = serde_json::from_value(value).map_err(|e| {
        InvalidInput(format!(
            "SAAP-I017: the workflow spec in the class discovery answer of `{class}` does not read: {e}; give SPEC instead"
        ))
    })?;
    let compiled = CompiledSpec::compile(&spec).map_err(|e| {
        InvalidInput(format!(
            "SAAP-I017: the workflow spec in the class discovery answer of `{class}` does not compile: {e}; give SPEC instead"
        ))
    })?;
    Ok((
        compiled,
        format!("the class discovery answer of a `{class}` worker"),
    ))
}

/// The spec of one agent class of Python source: `--agent`, else the one named like the
/// run's class, else the only one.
fn python_spec(
    path: &Path,
    agent: Option<&str>,
    class: &str,
) -> anyhow::Result<(CompiledSpec, String)> {
    let report =
        saap_python::check_path(path).map_err(|e| InvalidInput(format!("{e} [{}]", e.code())))?;
    let names: Vec<&str> = report.agents.iter().map(|a| a.name.as_str()).collect();
    let pick = match agent {
        Some(a) => report.agents.iter().find(|x| x.name == a),
        None => report
            .agents
            .iter()
            .find(|x| x.name == class)
            .or_else(|| (report.agents.len() == 1).then(|| &report.agents[0])),
    };
    let Some(found) = pick else {
        return Err(InvalidInput(format!(
            "{}: {} agent class{} here ({}), none {}; pick one with --agent CLASS",
            path.display(),
            names.len(),
            if names.len() == 1 { " is" } else { "es are" },
            names.join(", "),
            match agent {
                Some(a) => format!("named `{a}`"),
                None => format!("named like the run's agent class `{class}`"),
            }
        ))
        .into());
    };
    let compiled = CompiledSpec::compile(&found.spec).map_err(|e| {
        InvalidInput(format!(
            "{}: the spec built from class `{}` does not compile: {e}",
            path.display(),
            found.name
        ))
    })?;
    Ok((
        compiled,
        format!("`{}` (Python source, class {})", path.display(), found.name),
    ))
}

/// The text sections of a Python-recorded run: the differences, then what was inferred.
fn python_text(r: &python::Rebuilt) -> String {
    let mut s = String::new();
    s.push('\n');
    if r.differences.is_empty() {
        s.push_str("the Python dispatcher would have decided this run's events the same way\n");
    } else {
        let _ = writeln!(
            s,
            "where the Python dispatcher would have behaved differently ({}):",
            r.differences.len()
        );
        for d in &r.differences {
            let _ = writeln!(s, "  {} [{}]", d.at, d.rule);
            let _ = writeln!(s, "    saap: {}", d.saap);
            let _ = writeln!(s, "    Python: {}", d.python);
            let _ = writeln!(s, "    see: {}", d.reference);
        }
    }
    s.push_str("\ninferred (the Python platform records events only):\n");
    for n in &r.notes {
        let _ = writeln!(s, "  {n}");
    }
    s
}
