//! The agent a report is about, read from INPUT: a spec file (JSON/YAML) or Python agent
//! source (a `.py` file or a package folder, through `saap-python`), with its compiled spec,
//! the findings of `saap check` (located: `file:line:column` in Python source, the step's
//! line in a spec file) and what the template's "Agent" section names.
//!
//! Python source declares no outside arrivals (nor does a spec an agent binary prints), so such
//! a spec gets one arrival of each start event type its steps take (said in the report), so
//! that `explain` and `explore` can run it. Must not diagnose or render.

use super::model::Located;
use crate::input::{InvalidInput, load_spec};
use saap_dispatch::CompiledSpec;
use saap_dispatch::check::{Finding, check};
use saap_dispatch::spec::{ArrivalSpec, SimulationSpec, WorkflowSpec};
use std::path::Path;
use std::sync::Arc;

/// What INPUT is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    Spec,
    Python,
}

/// A check finding and where it points.
#[derive(Clone, Debug)]
pub struct Found {
    pub finding: Finding,
    pub location: Option<String>,
}

/// The agent under diagnosis.
pub struct Subject {
    /// INPUT as given.
    pub input: String,
    pub kind: InputKind,
    pub class: String,
    pub location: String,
    pub config: Option<Located>,
    /// The spec, with a simulation section (synthesized for Python source).
    pub spec: Arc<CompiledSpec>,
    /// Every finding of `saap check` on INPUT (for Python: the agent's and the package's).
    pub findings: Vec<Found>,
    /// The start events given as arrivals to simulate and explore it, when INPUT declares
    /// none (Python source, a spec without `simulation.arrivals`).
    pub synthesized_arrivals: Option<Vec<String>>,
}

impl Subject {
    /// Whether `saap explain`/`simulate`/`explore INPUT` see what the report saw: INPUT is a
    /// spec with its own arrivals (they read no Python, and add no arrivals).
    pub fn tools_rerun(&self) -> bool {
        self.kind == InputKind::Spec && self.synthesized_arrivals.is_none()
    }

    /// Where a step is written: `file:line` (Python: its `def`; a spec file: its `name:`).
    pub fn step_location(&self, step: &str) -> Option<String> {
        let s = self.spec.source.steps.iter().find(|s| s.name == step)?;
        match self.kind {
            InputKind::Python => s.description.clone(),
            InputKind::Spec => {
                spec_step_line(&self.input, step).map(|l| format!("{}:{l}", self.input))
            }
        }
    }
}

/// Reads INPUT. `agent` picks a class when Python source holds several.
pub fn load(input: &Path, agent: Option<&str>) -> anyhow::Result<Subject> {
    let shown = input.display().to_string();
    if shown != "-" && saap_python::is_python_input(input) {
        return load_python(input, agent);
    }
    let spec = load_spec(input)?;
    if let Some(a) = agent
        && a != spec.name
    {
        return Err(InvalidInput(format!(
            "{shown}: the spec's workflow is `{}`, not `{a}`; drop --agent or name `{}`",
            spec.name, spec.name
        ))
        .into());
    }
    // A spec without arrivals (e.g. one an agent binary printed) gets the start events its
    // steps take, as Python source does.
    let no_arrivals = spec
        .source
        .simulation
        .as_ref()
        .is_none_or(|s| s.arrivals.is_empty());
    let (spec, synthesized_arrivals) = if no_arrivals {
        let (with, arrivals) = with_start_arrivals(&spec.source)
            .map_err(|e| InvalidInput(format!("{shown}: {e} [{}]", e.code())))?;
        (with, Some(arrivals))
    } else {
        (spec, None)
    };
    let findings = check(&spec)
        .into_iter()
        .map(|f| {
            let location = f
                .step
                .as_deref()
                .and_then(|s| spec_step_line(&shown, s))
                .map(|l| format!("{shown}:{l}"));
            Found {
                finding: f,
                location,
            }
        })
        .collect();
    Ok(Subject {
        class: spec.name.clone(),
        location: shown.clone(),
        input: shown,
        kind: InputKind::Spec,
        config: None,
        spec: Arc::new(spec),
        findings,
        synthesized_arrivals,
    })
}

fn load_python(input: &Path, agent: Option<&str>) -> anyhow::Result<Subject> {
    let report =
        saap_python::check_path(input).map_err(|e| InvalidInput(format!("{e} [{}]", e.code())))?;
    let names: Vec<&str> = report.agents.iter().map(|a| a.name.as_str()).collect();
    let chosen = match agent {
        Some(a) => report.agents.iter().find(|r| r.name == a).ok_or_else(|| {
            InvalidInput(format!(
                "{}: no agent class is named `{a}`; the agents are: {}",
                report.input,
                names.join(", ")
            ))
        })?,
        None => match report.agents.as_slice() {
            [one] => one,
            _ => {
                return Err(InvalidInput(format!(
                    "{}: holds {} agents ({}); say which with --agent CLASS",
                    report.input,
                    names.len(),
                    names.join(", ")
                ))
                .into());
            }
        },
    };
    let (spec, arrivals) = with_start_arrivals(&chosen.spec).map_err(|e| {
        InvalidInput(format!(
            "{}: agent `{}` does not form a valid workflow: {e}; run `saap check {}` for the details",
            report.input, chosen.name, report.input
        ))
    })?;
    let findings = chosen
        .findings
        .iter()
        .chain(report.findings.iter())
        .map(|l| Found {
            finding: l.finding.clone(),
            location: Some(l.location.to_string()),
        })
        .collect();
    // The config class: the only one, or the one in the agent's file.
    let config = match report.configs.as_slice() {
        [one] => Some(one),
        many => many
            .iter()
            .find(|c| c.location.file == chosen.location.file),
    }
    .map(|c| Located {
        name: c.name.clone(),
        location: c.location.to_string(),
    });
    Ok(Subject {
        input: report.input.clone(),
        kind: InputKind::Python,
        class: chosen.name.clone(),
        location: chosen.location.to_string(),
        config,
        spec: Arc::new(spec),
        findings,
        synthesized_arrivals: Some(arrivals),
    })
}

/// The spec with one arrival of each start event type its steps take, in step order.
fn with_start_arrivals(
    spec: &WorkflowSpec,
) -> Result<(CompiledSpec, Vec<String>), saap_dispatch::SpecError> {
    let compiled = CompiledSpec::compile(spec)?;
    let mut starts: Vec<String> = Vec::new();
    for s in &compiled.steps {
        for p in &s.params {
            for t in &p.types {
                let info = compiled.type_info(*t);
                if info.kind.is_start() && !starts.contains(&info.name) {
                    starts.push(info.name.clone());
                }
            }
        }
    }
    let mut with = spec.clone();
    with.simulation = Some(SimulationSpec {
        arrivals: starts
            .iter()
            .map(|e| ArrivalSpec {
                event: e.clone(),
                label: None,
            })
            .collect(),
        behaviour: Default::default(),
    });
    Ok((CompiledSpec::compile(&with)?, starts))
}

/// The 1-based line of `name: STEP` among a spec file's steps (a text search: good enough to
/// point a reader at the step; `None` when the file cannot be read again or the name is not
/// found).
fn spec_step_line(path: &str, step: &str) -> Option<usize> {
    if path == "-" {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    let mut in_steps = false;
    // The indentation of the steps' list items (parameters are list items too, deeper).
    let mut item_indent: Option<usize> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let indent = line.len() - t.len();
        if t.starts_with("steps:") {
            in_steps = true;
            continue;
        }
        if !in_steps || !t.starts_with("- ") {
            continue;
        }
        if *item_indent.get_or_insert(indent) != indent {
            continue;
        }
        let item = t
            .trim_start_matches("- ")
            .trim_start_matches('{')
            .trim_start();
        if let Some(rest) = item.strip_prefix("name:") {
            let name = rest
                .trim_start()
                .trim_start_matches(['"', '\''])
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
                .next()
                .unwrap_or("");
            if name == step {
                return Some(i + 1);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_step_is_found_by_its_name_line_not_by_a_longer_name() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.yaml");
        std::fs::write(
            &p,
            "name: w\nsteps:\n  - name: ab\n    params:\n      - {name: a, kind: list, types: [A]}\n  - {name: a, params: []}\n",
        )
        .unwrap();
        let p = p.to_str().unwrap();
        assert_eq!(spec_step_line(p, "a"), Some(6));
        assert_eq!(spec_step_line(p, "ab"), Some(3));
        assert_eq!(spec_step_line(p, "zz"), None);
    }
}
