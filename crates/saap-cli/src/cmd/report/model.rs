//! The debug report as data: seed 000's "Report Template" (agent, event DAG, symptom, root
//! cause, evidence, fix, verification) plus what was checked. `saap report --json` prints
//! exactly a [`Report`]; the Markdown is rendered from it (`render.rs`).
//!
//! Plain data: must not gather evidence, run tools or format text.

use serde::Serialize;

/// The symptoms of the guide's triage table that the report diagnoses (also the `symptom`
/// argument of `saap mcp`'s `report` tool, whose schema is generated from it).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Symptom {
    /// A step executes more than once (guide, issue 1).
    RunsTwice,
    /// A step never executes (issue 2).
    NeverRuns,
    /// Events are emitted after a stop event (issue 3).
    AfterStop,
    /// A precondition's parameters do not match (issue 4).
    Precondition,
    /// The agent does not start at all (issue 5).
    WontStart,
    /// Config validation errors, a config checked in a step (issue 6, config lie).
    Config,
}

impl Symptom {
    /// The `--symptom` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Symptom::RunsTwice => "runs-twice",
            Symptom::NeverRuns => "never-runs",
            Symptom::AfterStop => "after-stop",
            Symptom::Precondition => "precondition",
            Symptom::WontStart => "wont-start",
            Symptom::Config => "config",
        }
    }

    /// The symptom in the guide's words.
    pub fn description(self) -> &'static str {
        match self {
            Symptom::RunsTwice => "step executes multiple times",
            Symptom::NeverRuns => "step never executes",
            Symptom::AfterStop => "events emitted after stop",
            Symptom::Precondition => "precondition params don't match",
            Symptom::WontStart => "agent won't start at all",
            Symptom::Config => "config validation errors",
        }
    }

    /// Whether the symptom is about one step (`--step` narrows the search) rather than the
    /// whole agent.
    pub fn is_per_step(self) -> bool {
        matches!(
            self,
            Symptom::RunsTwice | Symptom::NeverRuns | Symptom::Precondition
        )
    }
}

/// The whole report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// Format version of this JSON.
    pub report_format: u32,
    pub agent: Agent,
    /// The event DAG: every step with its inputs, outputs and options.
    pub dag: Vec<DagStep>,
    pub symptom: SymptomReport,
    /// `cause_found` or `no_cause_found`.
    pub verdict: Verdict,
    /// One sentence: the diagnosis, or "no cause found … what was checked".
    pub conclusion: String,
    pub root_causes: Vec<RootCause>,
    pub evidence: Vec<Evidence>,
    pub fixes: Vec<Fix>,
    pub verification: Verification,
    /// Every check made for the symptom, whether it found something or not.
    pub checked: Vec<String>,
}

/// Whether a root cause was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    CauseFound,
    NoCauseFound,
}

/// The agent: the template's "Agent" section.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Agent {
    /// The agent class (a spec: the workflow's name).
    pub class: String,
    /// Where it is defined: `file:line:column` for Python source, the spec file otherwise.
    pub location: String,
    /// `spec` or `python`.
    pub input_kind: String,
    /// The INPUT argument as given.
    pub input: String,
    /// The config class and where it is, when the source has one.
    pub config: Option<Located>,
    pub steps: usize,
    /// Event types the steps name (declared and built-in).
    pub events: usize,
}

/// A name and where it is defined.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Located {
    pub name: String,
    pub location: String,
}

/// One step of the event DAG.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DagStep {
    pub step: String,
    /// `name: Type (kind)` per event parameter.
    pub inputs: Vec<String>,
    /// The event types it may return.
    pub outputs: Vec<String>,
    /// `precondition=…`, `max_executions_per_run=…`, `stop_on_error=false`.
    pub options: Vec<String>,
}

/// The symptom as asked for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SymptomReport {
    pub symptom: Symptom,
    /// The guide's words for it.
    pub description: String,
    /// The step asked about (`--step`), if any.
    pub step: Option<String>,
    /// The run whose evidence was read (`--run`), if any.
    pub run: Option<String>,
}

/// A root cause: the rule broken or the constraint violated, and where.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RootCause {
    /// The execution rules involved, e.g. `R1 + R2` (empty when it is a constraint only).
    pub rule: String,
    /// The guide's constraint or issue, e.g. `Optional Parameter Trap`.
    pub constraint: String,
    /// The check code when a finding names it (`SAAP010`), else `None` (found at runtime).
    pub code: Option<String>,
    pub step: Option<String>,
    pub param: Option<String>,
    /// `file:line:column` (Python source) or `file:line` (the step in a spec file).
    pub location: Option<String>,
    /// What is wrong.
    pub message: String,
    /// Why it breaks at runtime.
    pub why: String,
}

/// One piece of evidence from a tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Evidence {
    /// `check`, `explain`, `simulate`, `explore`, `run` (a recorded run) or `server` (the live
    /// class stream).
    pub tool: String,
    /// The command that shows it again (a `saap` command line), when there is one.
    pub command: Option<String>,
    /// What the tool says, in a sentence.
    pub summary: String,
    /// The tool's lines backing it (bindings, reasons, witness trace).
    pub details: Vec<String>,
}

/// A fix for one root cause.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Fix {
    /// The root cause's code, when it has one.
    pub code: Option<String>,
    pub step: Option<String>,
    /// The fix as the tool states it.
    pub text: String,
    /// The code change, when the tool knows it exactly.
    pub change: Option<CodeChange>,
    /// The fix applied to the spec in memory and the tools run again, when that is possible.
    pub checked_in_memory: Option<String>,
}

/// A change to the source: what is written now, and what to write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CodeChange {
    /// `yaml` or `python`.
    pub language: String,
    /// Where the `before` text is.
    pub location: Option<String>,
    pub before: String,
    /// One or more ways to write it, each with a label.
    pub after: Vec<Variant>,
}

/// One way to write the fix.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Variant {
    pub label: String,
    pub code: String,
}

/// How to confirm the fix.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verification {
    /// `saap` command lines and what each must show after the fix.
    pub commands: Vec<Command>,
    /// The guide's test-runner assertions for the symptom (Python agents), if any.
    pub test_assertion: Option<String>,
}

/// A command and what it must show.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Command {
    pub command: String,
    pub expect: String,
}
