//! # saap-python — `saap check` for agents written with the Python SDK
//!
//! Reads Python agent source (one `.py` file or a package folder) with a real Python parser,
//! finds the agent classes and their `@step` methods, turns each agent into a
//! [`WorkflowSpec`] — parameter kinds from annotations, outputs from return annotations,
//! decorator options, event types from the classes' bases across the package's files — and
//! runs every check of `saap-dispatch` on it, plus the constraints only source shows
//! ([`rules::RULES`]). Every finding points at `file:line:column`.
//!
//! Layout, in the order the analysis runs:
//! - [`files`]: reading the input within bounds (size, file count, depth, symlinks);
//! - [`source`]: parsing one module, locating offsets, the nesting bound;
//! - [`package`]: what each module-level name is bound to, resolution across files;
//! - [`types`]: what a class is (event, agent, config, injectable) through its bases;
//! - [`annotation`]: annotations to parameter kinds and outputs;
//! - [`agent`]: one agent class to a spec, with locations;
//! - [`body`], [`form`]: the source-only constraints (context smuggle, config lie, forms);
//! - [`fixes`]: the spec checks' fixes in Python words;
//! - [`rules`]: the source-only finding codes; [`render`]: the human report.
//!
//! What it must not do: run or import the Python code, depend on the engine (`saap`), or
//! guess what it cannot read — that is a `SAAP107` finding.

pub mod agent;
pub mod annotation;
pub mod body;
pub mod error;
pub mod files;
pub mod fixes;
pub mod form;
pub mod package;
pub mod render;
pub mod rules;
pub mod source;
pub mod types;

pub use agent::LocatedFinding;
pub use error::PythonError;
pub use source::Location;

use crate::package::Package;
use crate::source::SourceFile;
use crate::types::{Classifier, TypeClass};
use saap_dispatch::CompiledSpec;
use saap_dispatch::check::{Severity, Summary, check, summarize};
use saap_dispatch::spec::{EventTypeSpec, SPEC_FORMAT_VERSION, WorkflowSpec};
use serde::Serialize;
use std::path::Path;

/// Whether `saap check` should read `path` as Python: a `.py` file or a folder.
pub fn is_python_input(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "py") || path.is_dir()
}

/// The result of checking Python source.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The path as given.
    pub input: String,
    /// How many Python files were read.
    pub files: usize,
    pub agents: Vec<AgentReport>,
    /// Findings that belong to no agent (config forms, steps on a class that is not an agent).
    pub findings: Vec<LocatedFinding>,
    pub summary: Summary,
    /// The config classes (`AgentConfig` subclasses) found, for reports that name an agent's
    /// config (`saap report`). Not part of `saap check --json`.
    #[serde(skip)]
    pub configs: Vec<ConfigClass>,
}

/// A config class (an `AgentConfig` subclass) and where it is defined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigClass {
    pub name: String,
    pub location: Location,
}

/// One agent class checked.
#[derive(Debug, Serialize)]
pub struct AgentReport {
    pub name: String,
    pub location: Location,
    pub steps: usize,
    pub findings: Vec<LocatedFinding>,
    pub summary: Summary,
    /// The spec built from the source (the input of `saap simulate` and `explore`).
    pub spec: WorkflowSpec,
}

/// Stack of the thread the analysis runs on: the parser and the tree walks recurse once per
/// nesting level, which [`source`] bounds; this leaves a wide margin over those bounds.
const ANALYSIS_STACK_BYTES: usize = 256 * 1024 * 1024;

/// Reads and checks `path` (a `.py` file or a package folder). The work runs on a thread of
/// its own with a large stack (reserved, not committed, memory).
pub fn check_path(path: &Path) -> Result<Report, PythonError> {
    let owned = path.to_path_buf();
    on_large_stack(move || {
        let raw = files::read_input(&owned)?;
        check_files(raw, &owned)
    })
}

/// Checks one module given as text (`name` is how findings name the file), with the same
/// bounds as a file on disk. For tools that hold source in memory, and for the tests.
pub fn check_source(name: &str, text: &str) -> Result<Report, PythonError> {
    if text.len() as u64 > files::MAX_FILE_BYTES {
        return Err(PythonError::FileTooLarge {
            path: name.into(),
            max: files::MAX_FILE_BYTES,
        });
    }
    let raw = files::RawFile {
        shown: name.to_string(),
        module: Path::new(name)
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default(),
        text: text.to_string(),
    };
    let shown = std::path::PathBuf::from(name);
    on_large_stack(move || check_files(vec![raw], &shown))
}

fn on_large_stack(
    work: impl FnOnce() -> Result<Report, PythonError> + Send + 'static,
) -> Result<Report, PythonError> {
    let worker = std::thread::Builder::new()
        .name("saap-python".into())
        .stack_size(ANALYSIS_STACK_BYTES)
        .spawn(work)
        .map_err(|e| PythonError::Internal {
            what: format!("cannot start the analysis thread: {e}"),
        })?;
    worker.join().unwrap_or_else(|_| {
        Err(PythonError::Internal {
            what: "the analysis panicked".into(),
        })
    })
}

fn check_files(raw: Vec<files::RawFile>, path: &Path) -> Result<Report, PythonError> {
    let mut parsed = Vec::with_capacity(raw.len());
    for r in raw {
        parsed.push(SourceFile::parse(r)?);
    }
    check_package(Package::new(parsed), path)
}

fn check_package(pkg: Package, path: &Path) -> Result<Report, PythonError> {
    let mut cx = Classifier::new(&pkg);
    let classes = pkg.classes();
    // Package event types with the file that defines each.
    let mut events: Vec<(usize, EventTypeSpec)> = Vec::new();
    let mut agents = Vec::new();
    let mut configs = Vec::new();
    let mut outside = Vec::new();
    let mut unsure: std::collections::HashMap<(usize, usize), String> =
        std::collections::HashMap::new();
    for &(f, i) in &classes {
        match cx.class(f, i, 0) {
            TypeClass::Event(name) => {
                if !cx.is_builtin_event(&name) {
                    let parents = cx.event_parents(f, i);
                    events.push((
                        f,
                        EventTypeSpec {
                            name,
                            parents,
                            description: pkg.class(f, i).map(|c| {
                                format!("{}:{}", pkg.files[f].shown, pkg.files[f].at(&c.name).line)
                            }),
                        },
                    ));
                }
            }
            TypeClass::Agent => agents.push((f, i)),
            TypeClass::Config => configs.push((f, i)),
            other => {
                let has_steps = pkg.class(f, i).is_some_and(|c| {
                    c.body
                        .iter()
                        .any(|s| s.as_function_def_stmt().is_some_and(agent::is_step))
                });
                match other {
                    // Steps on a class whose base cannot be followed (a single file of a
                    // package, a base from elsewhere): checked as an agent, with the doubt
                    // reported.
                    TypeClass::Unknown(why) if has_steps => {
                        agents.push((f, i));
                        unsure.insert((f, i), why);
                    }
                    _ if has_steps => outside.push((f, i)),
                    _ => {}
                }
            }
        }
    }
    // A package base class of another agent is a building block, not an agent of its own.
    let bases: Vec<(usize, usize)> = agents
        .iter()
        .flat_map(|&(f, i)| {
            pkg.class(f, i)
                .and_then(|c| c.arguments.as_ref())
                .map(|a| {
                    a.args
                        .iter()
                        .map(|b| pkg.resolve(f, types::strip_subscript(b)))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        })
        .filter_map(|s| match s {
            package::Sym::Class(f, i) => Some((f, i)),
            _ => None,
        })
        .collect();
    agents.retain(|a| !bases.contains(a));
    // A mixin whose steps an agent inherits is not "steps outside an agent".
    outside.retain(|c| !bases.contains(c));

    let mut package_findings = Vec::new();
    for &(f, i) in &outside {
        let Some(c) = pkg.class(f, i) else { continue };
        package_findings.push(LocatedFinding {
            finding: rules::finding(
                &rules::STEPS_OUTSIDE_AGENT,
                None,
                None,
                format!(
                    "class `{}` has `@step` methods but does not derive from `Agent`",
                    c.name
                ),
                "only an `Agent` subclass is a blueprint the runner dispatches; these steps never run, and saap does not check them",
                format!("derive `{}` from `Agent` (or from the package's agent base class)", c.name),
            ),
            location: pkg.files[f].at(&c.name),
        });
    }
    for &(f, i) in &configs {
        if let Some(c) = pkg.class(f, i) {
            package_findings.extend(form::check_form(c, &pkg.files[f]));
        }
    }
    if agents.is_empty() {
        let hint = if package_findings
            .iter()
            .any(|p| p.finding.code == rules::STEPS_OUTSIDE_AGENT.code)
        {
            let names: Vec<String> = package_findings
                .iter()
                .filter(|p| p.finding.code == rules::STEPS_OUTSIDE_AGENT.code)
                .map(|p| p.location.to_string())
                .collect();
            format!(
                "; the class at {} has `@step` methods but does not derive from `Agent`",
                names.join(", ")
            )
        } else {
            "; point `saap check` at the file or package folder that defines the agent".to_string()
        };
        return Err(PythonError::NoAgent {
            path: path.to_path_buf(),
            hint,
        });
    }

    let mut reports = Vec::new();
    for (f, i) in agents {
        let Some(agent) = agent::read_agent(&mut cx, f, i) else {
            continue;
        };
        let steps: Vec<_> = agent.steps.iter().map(|(s, _)| s.clone()).collect();
        let spec = WorkflowSpec {
            format: SPEC_FORMAT_VERSION,
            name: agent.name.clone(),
            description: Some(format!("from {}", agent.location)),
            events: used_events(&steps, &events, &pkg.reachable_files(f)),
            steps,
            agents: Vec::new(),
            simulation: None,
        };
        let mut findings = agent.findings.clone();
        if let Some(why) = unsure.get(&(f, i)) {
            findings.push(LocatedFinding {
                finding: rules::finding(
                    &rules::UNRESOLVED,
                    None,
                    None,
                    format!(
                        "cannot tell whether `{}` is an agent, checked as one because it has `@step` methods: {why}",
                        agent.name
                    ),
                    "steps inherited from a base class saap cannot read are missing from the checks, and the class may not be an agent at all",
                    "check the package folder so the base class can be followed".into(),
                ),
                location: agent.location.clone(),
            });
        }
        match CompiledSpec::compile(&spec) {
            Ok(compiled) => {
                for mut finding in check(&compiled) {
                    fixes::in_python_words(&mut finding, &spec);
                    findings.push(agent::locate(&agent, finding));
                }
            }
            Err(e) => findings.push(LocatedFinding {
                finding: rules::finding(
                    &rules::SPEC_INVALID,
                    None,
                    None,
                    format!("the agent does not form a valid workflow: {e}"),
                    "saap builds the agent's workflow from its classes; two event classes with one name, or a name the protocol refuses, make the dispatch ambiguous (the Python registry refuses duplicate event names too)",
                    "give every event class a unique name (a Python identifier)".into(),
                ),
                location: agent.location.clone(),
            }),
        }
        // What could not be read may be the cause of a spec error (a producer whose return
        // annotation was unreadable, a dropped parameter): such errors are not proven.
        if findings
            .iter()
            .any(|l| l.finding.code == rules::UNRESOLVED.code)
        {
            for l in findings.iter_mut() {
                if l.finding.severity == Severity::Error && l.finding.code.starts_with("SAAP0") {
                    l.finding.severity = Severity::Warning;
                    l.finding.message.push_str(
                        " (not certain: part of this agent could not be read, see SAAP107)",
                    );
                }
            }
        }
        findings.extend(body::check_bodies(&agent, &pkg.files[agent.file]));
        sort(&mut findings);
        let plain: Vec<_> = findings.iter().map(|l| l.finding.clone()).collect();
        reports.push(AgentReport {
            name: agent.name.clone(),
            location: agent.location.clone(),
            steps: spec.steps.len(),
            summary: summarize(&plain),
            findings,
            spec,
        });
    }
    sort(&mut package_findings);
    let all: Vec<_> = package_findings
        .iter()
        .chain(reports.iter().flat_map(|r| r.findings.iter()))
        .map(|l| l.finding.clone())
        .collect();
    let configs = configs
        .iter()
        .filter_map(|&(f, i)| {
            pkg.class(f, i).map(|c| ConfigClass {
                name: c.name.to_string(),
                location: pkg.files[f].at(&c.name),
            })
        })
        .collect();
    Ok(Report {
        configs,
        input: path.display().to_string(),
        files: pkg.files.len(),
        agents: reports,
        summary: summarize(&all),
        findings: package_findings,
    })
}

/// The package's event types an agent's steps name (parameters, outputs, precondition
/// reads), with their ancestors: one folder may hold several agents whose private event
/// classes share names, and only the agent's own must be unambiguous.
/// A name defined in a file the agent's module imports wins over the same name elsewhere.
fn used_events(
    steps: &[saap_dispatch::spec::StepSpec],
    events: &[(usize, EventTypeSpec)],
    reachable: &std::collections::BTreeSet<usize>,
) -> Vec<EventTypeSpec> {
    let chosen: Vec<&EventTypeSpec> = events
        .iter()
        .filter(|(f, e)| {
            reachable.contains(f)
                || !events
                    .iter()
                    .any(|(g, o)| o.name == e.name && reachable.contains(g))
        })
        .map(|(_, e)| e)
        .collect();
    let mut wanted: Vec<String> = Vec::new();
    for s in steps {
        wanted.extend(s.params.iter().flat_map(|p| p.types.iter().cloned()));
        wanted.extend(s.outputs.iter().cloned());
        if let Some(pc) = &s.precondition {
            wanted.extend(pc.reads.iter().cloned());
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    while let Some(name) = wanted.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        for e in chosen.iter().filter(|e| e.name == name) {
            wanted.extend(e.parents.iter().cloned());
        }
    }
    chosen
        .into_iter()
        .filter(|e| seen.contains(&e.name))
        .cloned()
        .collect()
}

/// Errors first, then by place, then by code.
fn sort(findings: &mut [LocatedFinding]) {
    findings.sort_by(|a, b| {
        let sev = |s: Severity| u8::from(s != Severity::Error);
        (sev(a.finding.severity), &a.location, a.finding.code).cmp(&(
            sev(b.finding.severity),
            &b.location,
            b.finding.code,
        ))
    });
}
