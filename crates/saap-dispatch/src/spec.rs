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
#[serde(
    deny_unknown_fields,
    expecting = "a workflow spec: a map with `name`, `steps` and optionally `saap_spec`, `description`, `events`, `agents`, `simulation`"
)]
pub struct WorkflowSpec {
    /// Format version; must be [`SPEC_FORMAT_VERSION`] when present.
    #[serde(
        default = "default_format",
        rename = "saap_spec",
        deserialize_with = "numbers::whole"
    )]
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
    /// The other agents (their workflow names) this workflow's steps may delegate to, in
    /// this process or on other workers: with the workflow itself, the agents `check`
    /// knows (see [`StepSpec::delegates_to`]). An agent program fills it from
    /// `Workflow::with_delegate` and `Workflow::knows_agents`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<String>,
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
#[serde(
    deny_unknown_fields,
    expecting = "an event type: a map with `name` and optionally `parents` or `kind`, `description`"
)]
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
#[serde(
    rename_all = "snake_case",
    expecting = "one of `control`, `display`, `both`, `start`, `stop`, `exception`"
)]
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
#[serde(
    rename_all = "snake_case",
    expecting = "one of `required`, `optional`, `list`, `fixed_list`"
)]
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
#[serde(
    deny_unknown_fields,
    expecting = "a parameter: a map with `name`, `kind`, `types` and, for a fixed list, `size`"
)]
pub struct ParamSpec {
    pub name: String,
    pub kind: ParamKind,
    /// The event types this parameter accepts (a union when more than one). Matching is by
    /// exact name: a subtype does not match a parent-typed parameter.
    pub types: Vec<String>,
    /// N for a fixed list.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "numbers::optional_whole"
    )]
    pub size: Option<u32>,
}

/// One step.
///
/// In a spec file an entry of `outputs` is a type name (at most one event of it per
/// execution) or `{event: Name, max: N}` / `{event: Name, max: unbounded}` for a step that
/// returns several (a `Vec` result is `unbounded`), and `{event: Name, delayed: true}` for
/// one it returns to be delivered later (a timer: `Delayed<Name>`). The model keeps the
/// names in [`StepSpec::outputs`], the larger bounds in [`StepSpec::output_max`] and the
/// delayed types in [`StepSpec::delayed`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "StepDecl", into = "StepDecl")]
pub struct StepSpec {
    pub name: String,
    pub params: Vec<ParamSpec>,
    /// Event types the step may return, as declared by its signature (alternatives, not
    /// one result). A name listed k times is up to k events of it.
    pub outputs: Vec<String>,
    /// Output types one execution may return more than once, with how many: `Vec` results
    /// are [`OutputMax::Unbounded`]. A type of `outputs` that is not here is at most one
    /// event per execution (or as many as a `returns_together` group lists it).
    pub output_max: BTreeMap<String, OutputMax>,
    /// Output types the step returns for later delivery (`Delayed<T>`: timers). They are
    /// outputs like the others for the checks; `simulate` and `explore` deliver them as a
    /// clock reading would, after the completion (`explore`: at any later point).
    pub delayed: Vec<String>,
    /// Output groups that the step returns *together* in one result (e.g. `[[Done, Note]]`).
    /// Only needed for the dangling-stop check when a step returns several events at once.
    pub returns_together: Vec<Vec<String>>,
    pub max_executions_per_run: Option<u32>,
    pub stop_on_error: bool,
    pub precondition: Option<PreconditionSpec>,
    pub description: Option<String>,
    /// The agents (workflow names) the step's delegation requests name
    /// (`AgentInTheLoopRequestEvent`, `AgentWorkRequestEvent`): `check` warns of one the
    /// workflow does not know (SAAP022), and the engine fails a request that names an agent
    /// the step did not declare. Empty: not declared (nothing is checked).
    pub delegates_to: Vec<String>,
}

impl StepSpec {
    /// A step named `name` with nothing else declared (no parameters, no outputs, the
    /// default options).
    pub fn named(name: impl Into<String>) -> StepSpec {
        StepSpec {
            name: name.into(),
            params: Vec::new(),
            outputs: Vec::new(),
            output_max: BTreeMap::new(),
            delayed: Vec::new(),
            returns_together: Vec::new(),
            max_executions_per_run: None,
            stop_on_error: true,
            precondition: None,
            description: None,
            delegates_to: Vec::new(),
        }
    }

    /// The most events of the output type `name` one execution declares it may return:
    /// `None` when unbounded, else the largest of its `max`, the number of times `outputs`
    /// lists it and the number of times a `returns_together` group lists it (0 when it is
    /// not an output).
    pub fn max_per_execution(&self, name: &str) -> Option<u64> {
        let listed = self.outputs.iter().filter(|o| *o == name).count() as u64;
        let grouped = self
            .returns_together
            .iter()
            .map(|g| g.iter().filter(|o| *o == name).count() as u64)
            .max()
            .unwrap_or(0);
        match self.output_max.get(name) {
            Some(OutputMax::Unbounded) => None,
            Some(OutputMax::AtMost(n)) => Some(u64::from(*n).max(listed).max(grouped)),
            None => Some(listed.max(grouped)),
        }
    }
}

/// How many events of one output type one execution may return.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputMax {
    /// At most this many (1 to [`MAX_OUTPUT_COUNT`]).
    AtMost(u32),
    /// Any number: the step returns a list of them (`Vec<T>` in Rust).
    Unbounded,
}

/// The largest `max` an output entry may give; more is written `unbounded`.
pub const MAX_OUTPUT_COUNT: u32 = 1_000_000;

impl Serialize for OutputMax {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            OutputMax::AtMost(n) => s.serialize_u32(*n),
            OutputMax::Unbounded => s.serialize_str("unbounded"),
        }
    }
}

impl<'de> Deserialize<'de> for OutputMax {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = OutputMax;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(
                    f,
                    "a number of events from 1 to {MAX_OUTPUT_COUNT}, or `unbounded`"
                )
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<OutputMax, E> {
                match u32::try_from(n) {
                    Ok(n) if (1..=MAX_OUTPUT_COUNT).contains(&n) => Ok(OutputMax::AtMost(n)),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Unsigned(n), &self)),
                }
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<OutputMax, E> {
                match u64::try_from(n) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => Err(E::invalid_value(serde::de::Unexpected::Signed(n), &self)),
                }
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<OutputMax, E> {
                match v {
                    "unbounded" => Ok(OutputMax::Unbounded),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// One entry of `outputs` as written: a name, or `{event, max, delayed}`.
#[derive(Debug, Clone, PartialEq)]
struct OutputEntry {
    event: String,
    max: OutputMax,
    delayed: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an output: an event type name, or a map `{event: Name, max: N, delayed: true}` (`max: unbounded` for any number; `delayed` for an event delivered later)"
)]
struct OutputEntryMap {
    event: String,
    #[serde(default = "one", skip_serializing_if = "is_one")]
    max: OutputMax,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    delayed: bool,
}

fn is_one(m: &OutputMax) -> bool {
    *m == one()
}

fn one() -> OutputMax {
    OutputMax::AtMost(1)
}

impl Serialize for OutputEntry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.max == OutputMax::AtMost(1) && !self.delayed {
            s.serialize_str(&self.event)
        } else {
            OutputEntryMap {
                event: self.event.clone(),
                max: self.max,
                delayed: self.delayed,
            }
            .serialize(s)
        }
    }
}

impl<'de> Deserialize<'de> for OutputEntry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = OutputEntry;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an output: an event type name, or a map `{event: Name, max: N, delayed: true}` (`max: unbounded` for any number; `delayed` for an event delivered later)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<OutputEntry, E> {
                Ok(OutputEntry {
                    event: v.to_string(),
                    max: one(),
                    delayed: false,
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<OutputEntry, A::Error> {
                let m =
                    OutputEntryMap::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(OutputEntry {
                    event: m.event,
                    max: m.max,
                    delayed: m.delayed,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// A step as written in a spec file (see [`StepSpec`]).
#[derive(Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a step: a map with `name`, `params`, `outputs` and optionally `returns_together`, `max_executions_per_run`, `stop_on_error`, `precondition`, `description`, `delegates_to`"
)]
struct StepDecl {
    name: String,
    #[serde(default)]
    params: Vec<ParamSpec>,
    #[serde(default)]
    outputs: Vec<OutputEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    returns_together: Vec<Vec<String>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "numbers::optional_whole"
    )]
    max_executions_per_run: Option<u32>,
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    stop_on_error: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    precondition: Option<PreconditionSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    delegates_to: Vec<String>,
}

impl TryFrom<StepDecl> for StepSpec {
    type Error = String;
    fn try_from(d: StepDecl) -> Result<Self, String> {
        let mut outputs = Vec::with_capacity(d.outputs.len());
        let mut output_max = BTreeMap::new();
        let mut delayed: Vec<String> = Vec::new();
        for o in &d.outputs {
            if o.delayed && !delayed.contains(&o.event) {
                delayed.push(o.event.clone());
            }
            if o.max != one() {
                if d.outputs.iter().filter(|p| p.event == o.event).count() > 1 {
                    return Err(format!(
                        "step `{}` lists output `{}` more than once and gives it a `max`; list it once with the largest number it returns",
                        d.name, o.event
                    ));
                }
                output_max.insert(o.event.clone(), o.max);
            }
            outputs.push(o.event.clone());
        }
        Ok(StepSpec {
            name: d.name,
            params: d.params,
            outputs,
            output_max,
            delayed,
            returns_together: d.returns_together,
            max_executions_per_run: d.max_executions_per_run,
            stop_on_error: d.stop_on_error,
            precondition: d.precondition,
            description: d.description,
            delegates_to: d.delegates_to,
        })
    }
}

impl From<StepSpec> for StepDecl {
    fn from(s: StepSpec) -> StepDecl {
        let mut outputs: Vec<OutputEntry> = s
            .outputs
            .iter()
            .map(|o| OutputEntry {
                event: o.clone(),
                max: s.output_max.get(o).copied().unwrap_or_else(one),
                delayed: s.delayed.contains(o),
            })
            .collect();
        // A bound for a type `outputs` does not list still says the type is an output.
        for (name, max) in &s.output_max {
            if !s.outputs.contains(name) {
                outputs.push(OutputEntry {
                    event: name.clone(),
                    max: *max,
                    delayed: s.delayed.contains(name),
                });
            }
        }
        // So does a delayed type.
        for name in &s.delayed {
            if !outputs.iter().any(|o| &o.event == name) {
                outputs.push(OutputEntry {
                    event: name.clone(),
                    max: one(),
                    delayed: true,
                });
            }
        }
        StepDecl {
            name: s.name,
            params: s.params,
            outputs,
            returns_together: s.returns_together,
            max_executions_per_run: s.max_executions_per_run,
            stop_on_error: s.stop_on_error,
            precondition: s.precondition,
            description: s.description,
            delegates_to: s.delegates_to,
        }
    }
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
#[serde(
    deny_unknown_fields,
    expecting = "a precondition: a map with `name` and optionally `reads`, `when`"
)]
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
#[serde(
    rename_all = "snake_case",
    deny_unknown_fields,
    expecting = "a condition: a one-key map such as `{present: param}`, `{all: [...]}` (keys: always, present, absent, count_at_least, all, any, not)"
)]
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
        #[serde(deserialize_with = "numbers::whole")]
        n: u32,
    },
    All(Vec<Condition>),
    Any(Vec<Condition>),
    Not(Box<Condition>),
}

/// The simulation section: what arrives from outside, and what each execution does.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a simulation section: a map with `arrivals` and `behaviour`"
)]
pub struct SimulationSpec {
    /// Events that arrive from outside the workflow, in this order.
    #[serde(default)]
    pub arrivals: Vec<ArrivalSpec>,
    /// Per-step behaviour; a step without an entry emits each of its declared outputs once.
    #[serde(default)]
    pub behaviour: BTreeMap<String, BehaviourSpec>,
}

/// One outside arrival. A repeated `label` means a re-delivery of the same event (same id).
/// Written `{event: Name, label: l}`, or just `Name` (no label).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArrivalSpec {
    pub event: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an arrival: an event type name, or a map `{event: Name, label: name}`"
)]
struct ArrivalMap {
    event: String,
    #[serde(default)]
    label: Option<String>,
}

impl<'de> Deserialize<'de> for ArrivalSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = ArrivalSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an arrival: an event type name, or a map `{event: Name, label: name}`")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ArrivalSpec, E> {
                Ok(ArrivalSpec {
                    event: v.to_string(),
                    label: None,
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<ArrivalSpec, A::Error> {
                let m = ArrivalMap::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(ArrivalSpec {
                    event: m.event,
                    label: m.label,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// What a step's executions do in simulation.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a behaviour: a map with `emit`, `fail` or `executions`"
)]
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
        serialize_with = "serde_yaml_ng::with::singleton_map_recursive::serialize",
        deserialize_with = "numbers::executions"
    )]
    pub executions: BTreeMap<u32, ExecutionBehaviour>,
}

/// The result of one particular execution in simulation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    rename_all = "snake_case",
    deny_unknown_fields,
    expecting = "an execution's result: `{emit: [...]}` or `{fail: message}`"
)]
pub enum ExecutionBehaviour {
    Emit(Vec<String>),
    Fail(String),
}

/// Numbers read with messages in plain words (serde's own name the Rust type, e.g.
/// "expected u32").
mod numbers {
    use super::ExecutionBehaviour;
    use serde::Deserialize;
    use serde::de::{self, Deserializer, Unexpected, Visitor};
    use std::collections::BTreeMap;
    use std::fmt;

    struct Whole(&'static str);

    impl Visitor<'_> for Whole {
        type Value = u32;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str(self.0)
        }
        fn visit_u64<E: de::Error>(self, n: u64) -> Result<u32, E> {
            u32::try_from(n).map_err(|_| E::invalid_value(Unexpected::Unsigned(n), &self))
        }
        fn visit_i64<E: de::Error>(self, n: i64) -> Result<u32, E> {
            u32::try_from(n).map_err(|_| E::invalid_value(Unexpected::Signed(n), &self))
        }
        // JSON object keys are strings: `"executions": {"2": ...}`.
        fn visit_str<E: de::Error>(self, v: &str) -> Result<u32, E> {
            v.parse()
                .map_err(|_| E::invalid_value(Unexpected::Str(v), &self))
        }
    }

    const WHOLE: &str = "a whole number from 0 to 4294967295";

    /// A `u32`.
    pub(super) fn whole<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        d.deserialize_u32(Whole(WHOLE))
    }

    /// An optional `u32` (absent or `null`: none).
    pub(super) fn optional_whole<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
        struct Opt;
        impl<'de> Visitor<'de> for Opt {
            type Value = Option<u32>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(WHOLE)
            }
            fn visit_none<E: de::Error>(self) -> Result<Option<u32>, E> {
                Ok(None)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Option<u32>, E> {
                Ok(None)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<u32>, D::Error> {
                whole(d).map(Some)
            }
        }
        d.deserialize_option(Opt)
    }

    /// An execution number as a map key.
    #[derive(PartialEq, Eq, PartialOrd, Ord)]
    struct ExecutionNumber(u32);

    impl<'de> Deserialize<'de> for ExecutionNumber {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_u32(Whole("an execution number (1, 2, ...)"))
                .map(ExecutionNumber)
        }
    }

    /// `executions:` of a behaviour: execution number → one-key map.
    pub(super) fn executions<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<u32, ExecutionBehaviour>, D::Error> {
        let m: BTreeMap<ExecutionNumber, ExecutionBehaviour> =
            serde_yaml_ng::with::singleton_map_recursive::deserialize(d)?;
        Ok(m.into_iter().map(|(k, v)| (k.0, v)).collect())
    }
}
