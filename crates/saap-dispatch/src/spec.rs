//! The workflow spec: the static description of an agent's event types and steps, plus an
//! optional simulation section. This is the file format read by `saap check`, `simulate`
//! and `explore` (see `docs/spec-format.md`) and what the authoring macros emit.
//!
//! This module is plain data with serde derives. It does not validate references or build
//! indexes; [`crate::compiled`] does that. It must not grow behaviour beyond small helpers.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The version of the spec format this crate reads and writes.
pub const SPEC_FORMAT_VERSION: u32 = 1;

/// A whole workflow (one agent class).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowSpec {
    /// Format version; must be [`SPEC_FORMAT_VERSION`] when present.
    #[serde(default = "default_format", rename = "saap_spec")]
    pub format: u32,
    /// The agent class name (used in stream and subject names).
    pub name: String,
    /// Free text shown in reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Event types declared by this workflow. Built-in protocol types (StartEvent,
    /// UserMessageEvent, StopEvent, ExceptionEvent, …) need no declaration.
    #[serde(default)]
    pub events: Vec<EventTypeSpec>,
    /// The steps, in declaration order (the order of candidate evaluation).
    pub steps: Vec<StepSpec>,
    /// Inputs for `simulate` and `explore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulation: Option<SimulationSpec>,
}

fn default_format() -> u32 {
    SPEC_FORMAT_VERSION
}

/// A user-declared event type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, try_from = "EventTypeDecl")]
pub struct EventTypeSpec {
    pub name: String,
    /// Direct parents; defaults to `[ControlEvent]` (a control event). Use `StopEvent` for a
    /// stop event, `DisplayEvent` for display-only, `ControlAndDisplayEvent` for both.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parents: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// What a declaration may say: `parents`, or the `kind` shorthand for one built-in parent
/// (`kind: stop` is `parents: [StopEvent]`), not both. Read into [`EventTypeSpec`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EventTypeDecl {
    name: String,
    #[serde(default)]
    parents: Vec<String>,
    #[serde(default)]
    kind: Option<EventTypeKind>,
    #[serde(default)]
    description: Option<String>,
}

impl TryFrom<EventTypeDecl> for EventTypeSpec {
    type Error = String;
    fn try_from(d: EventTypeDecl) -> Result<Self, String> {
        let parents = match (d.kind, d.parents.is_empty()) {
            (Some(_), false) => {
                return Err(format!(
                    "event type `{}` has both `kind` and `parents`; give one (`kind: stop` is `parents: [StopEvent]`)",
                    d.name
                ));
            }
            (Some(k), true) => vec![k.parent().to_string()],
            (None, _) => d.parents,
        };
        Ok(EventTypeSpec {
            name: d.name,
            parents,
            description: d.description,
        })
    }
}

/// The `kind` shorthand of an event type declaration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventTypeKind {
    /// Drives steps (`ControlEvent`).
    Control,
    /// UI only, never dispatched (`DisplayEvent`).
    Display,
    /// Both (`ControlAndDisplayEvent`).
    Both,
    /// Begins a run (`StartEvent`).
    Start,
    /// Ends a run (`StopEvent`).
    Stop,
    /// Ends a run as a failure (`ExceptionEvent`).
    Exception,
}

impl EventTypeKind {
    /// The built-in parent the shorthand stands for.
    pub fn parent(self) -> &'static str {
        match self {
            EventTypeKind::Control => "ControlEvent",
            EventTypeKind::Display => "DisplayEvent",
            EventTypeKind::Both => "ControlAndDisplayEvent",
            EventTypeKind::Start => "StartEvent",
            EventTypeKind::Stop => "StopEvent",
            EventTypeKind::Exception => "ExceptionEvent",
        }
    }
}

/// How an event parameter binds (DESIGN §3, §4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamKind {
    /// `T`: needs one event; binds the trigger or the latest.
    Required,
    /// `Option<T>`: never blocks; binds like required or nothing.
    Optional,
    /// `Vec<T>`: never blocks; binds all matching events in arrival order.
    List,
    /// `FixedList<T, N>`: needs N; binds the first N in arrival order.
    FixedList,
}

impl ParamKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ParamKind::Required => "required",
            ParamKind::Optional => "optional",
            ParamKind::List => "list",
            ParamKind::FixedList => "fixed_list",
        }
    }
}

/// One event parameter of a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParamSpec {
    pub name: String,
    pub kind: ParamKind,
    /// The event types this parameter accepts (a union when more than one). Matching is by
    /// exact name: a subtype does not match a parent-typed parameter.
    pub types: Vec<String>,
    /// N for a fixed list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u32>,
}

/// One step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepSpec {
    pub name: String,
    #[serde(default)]
    pub params: Vec<ParamSpec>,
    /// Event types the step may return, as declared by its signature.
    #[serde(default)]
    pub outputs: Vec<String>,
    /// Output groups that the step returns *together* in one result (e.g. `[[Done, Note]]`).
    /// Only needed for the dangling-stop check when a step returns several events at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub returns_together: Vec<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_executions_per_run: Option<u32>,
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub stop_on_error: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precondition: Option<PreconditionSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

fn default_true() -> bool {
    true
}
fn is_true(b: &bool) -> bool {
    *b
}

/// A step's precondition. In Rust agents it is a function of the step's own bound inputs;
/// in a spec it is named, lists the event types it reads (for `check`), and may carry a
/// declarative condition used by `simulate`/`explore`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreconditionSpec {
    pub name: String,
    /// Event types the precondition reads. Each must be a type the step itself takes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reads: Vec<String>,
    /// The condition evaluated by the simulator. Absent means "unknown to the simulator":
    /// treated as true.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "serde_yaml_ng::with::singleton_map_recursive"
    )]
    pub when: Option<Condition>,
}

/// A declarative precondition over the step's bound parameters. Written as a one-key map
/// (`{present: b}`, `{all: [...]}`) in both JSON and YAML.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Condition {
    /// Constant result (e.g. `always: false` to model a precondition that never holds).
    Always(bool),
    /// The named parameter is bound to at least one event.
    Present(String),
    /// The named parameter is bound to nothing.
    Absent(String),
    /// The named parameter is bound to at least `n` events.
    CountAtLeast {
        param: String,
        n: u32,
    },
    All(Vec<Condition>),
    Any(Vec<Condition>),
    Not(Box<Condition>),
}

/// The simulation section: what arrives from outside, and what each execution does.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimulationSpec {
    /// Events that arrive from outside the workflow, in this order.
    #[serde(default)]
    pub arrivals: Vec<ArrivalSpec>,
    /// Per-step behaviour; a step without an entry emits each of its declared outputs once.
    #[serde(default)]
    pub behaviour: BTreeMap<String, BehaviourSpec>,
}

/// One outside arrival. A repeated `label` means a re-delivery of the same event (same id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArrivalSpec {
    pub event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// What a step's executions do in simulation.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BehaviourSpec {
    /// The default result of every execution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emit: Option<Vec<String>>,
    /// Make every execution fail with this message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail: Option<String>,
    /// Overrides by execution number of this step (1-based).
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        with = "serde_yaml_ng::with::singleton_map_recursive"
    )]
    pub executions: BTreeMap<u32, ExecutionBehaviour>,
}

/// The result of one particular execution in simulation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ExecutionBehaviour {
    Emit(Vec<String>),
    Fail(String),
}
