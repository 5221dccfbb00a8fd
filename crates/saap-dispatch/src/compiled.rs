//! The compiled spec: a [`WorkflowSpec`] with every name resolved to an index, the event
//! hierarchy built, and the candidacy index (event type → the step parameters it can bind)
//! precomputed, so that a dispatch decision does no string work.
//!
//! Compilation reports references that cannot be resolved (with a JSON path and a
//! suggestion). Design *smells* (unreachable steps, traps, …) are not errors here; they are
//! findings of [`crate::check`].

use crate::ids::{ParamIdx, StepIdx};
use crate::load::SpecError;
use crate::spec::{Condition, MAX_OUTPUT_COUNT, OutputMax, ParamKind, ParamSpec, WorkflowSpec};
use saap_protocol::hierarchy::{Classification, Hierarchy};
use std::collections::HashMap;

/// Bounds on spec sizes (anything larger is refused as invalid input).
pub const MAX_STEPS: usize = 10_000;
pub const MAX_EVENT_TYPES: usize = 10_000;
pub const MAX_PARAMS_PER_STEP: usize = 64;
pub const MAX_TYPES_PER_PARAM: usize = 64;
pub const MAX_FIXED_LIST_SIZE: u32 = 1_000_000;
pub const MAX_CONDITION_DEPTH: usize = 32;

/// Index of an event type in [`CompiledSpec::types`].
pub type TypeId = u32;

/// Classification flags of an event type (DESIGN §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EventKind(u8);

impl EventKind {
    pub const CONTROL: u8 = 1;
    pub const DISPLAY: u8 = 2;
    pub const START: u8 = 4;
    pub const STOP: u8 = 8;
    pub const EXCEPTION: u8 = 16;

    pub fn from_classification(c: Classification) -> EventKind {
        let mut k = 0;
        if c.control {
            k |= Self::CONTROL;
        }
        if c.display {
            k |= Self::DISPLAY;
        }
        if c.start {
            k |= Self::START;
        }
        if c.stop {
            k |= Self::STOP;
        }
        if c.exception {
            k |= Self::EXCEPTION;
        }
        EventKind(k)
    }
    pub fn bits(self) -> u8 {
        self.0
    }
    /// The kind whose [`EventKind::bits`] are `bits` (e.g. as stored); unknown bits are
    /// dropped.
    pub fn from_bits(bits: u8) -> EventKind {
        EventKind(
            bits & (Self::CONTROL | Self::DISPLAY | Self::START | Self::STOP | Self::EXCEPTION),
        )
    }
    pub fn is_control(self) -> bool {
        self.0 & Self::CONTROL != 0
    }
    pub fn is_display(self) -> bool {
        self.0 & Self::DISPLAY != 0
    }
    pub fn is_start(self) -> bool {
        self.0 & Self::START != 0
    }
    pub fn is_stop(self) -> bool {
        self.0 & Self::STOP != 0
    }
    pub fn is_exception(self) -> bool {
        self.0 & Self::EXCEPTION != 0
    }
    /// Stop or exception: ends the run when appended as a control event.
    pub fn is_terminal(self) -> bool {
        self.0 & (Self::STOP | Self::EXCEPTION) != 0
    }
    /// A short label: `control`, `display`, `control+display`, or `none`.
    pub fn label(self) -> &'static str {
        match (self.is_control(), self.is_display()) {
            (true, true) => "control+display",
            (true, false) => "control",
            (false, true) => "display",
            (false, false) => "none",
        }
    }
}

/// An event type known to the workflow.
#[derive(Debug, Clone)]
pub struct TypeInfo {
    pub name: String,
    pub kind: EventKind,
    /// Declared by the spec (true) or built into the protocol (false).
    pub declared: bool,
}

/// A compiled event parameter.
#[derive(Debug, Clone)]
pub struct CompiledParam {
    pub name: String,
    pub kind: ParamKind,
    pub types: Vec<TypeId>,
    /// N for fixed lists, else 0.
    pub size: u32,
}

/// A compiled declarative precondition.
#[derive(Debug, Clone, PartialEq)]
pub enum CompiledCondition {
    Always(bool),
    Present(ParamIdx),
    Absent(ParamIdx),
    CountAtLeast(ParamIdx, u32),
    All(Vec<CompiledCondition>),
    Any(Vec<CompiledCondition>),
    Not(Box<CompiledCondition>),
}

/// A compiled precondition.
#[derive(Debug, Clone)]
pub struct CompiledPrecondition {
    pub name: String,
    /// Types the precondition reads (for checks).
    pub reads: Vec<TypeId>,
    pub when: Option<CompiledCondition>,
}

/// A compiled step.
#[derive(Debug, Clone)]
pub struct CompiledStep {
    pub name: String,
    pub params: Vec<CompiledParam>,
    pub outputs: Vec<TypeId>,
    /// Output types one execution may return more than once (`outputs` entries with a
    /// `max`), with their bound.
    pub output_max: Vec<(TypeId, OutputMax)>,
    /// Output types returned for later delivery (timers; see [`crate::spec::StepSpec::delayed`]).
    /// Not part of the fingerprint: when an event arrives is the engine's input, not a
    /// dispatch decision.
    pub delayed: Vec<TypeId>,
    pub returns_together: Vec<Vec<TypeId>>,
    pub max_executions_per_run: Option<u32>,
    pub stop_on_error: bool,
    pub precondition: Option<CompiledPrecondition>,
    /// Two parameters share an event type: input sets must then be compared as multisets of
    /// event ids rather than per parameter.
    pub overlapping_params: bool,
}

impl CompiledStep {
    /// The most events of type `t` one execution declares it may return: `None` when
    /// unbounded, else the largest of its `max`, the number of times `outputs` lists it and
    /// the number of times a `returns_together` group lists it (0 when it is not returned).
    pub fn max_per_execution(&self, t: TypeId) -> Option<u64> {
        let listed = self.outputs.iter().filter(|o| **o == t).count() as u64;
        let grouped = self
            .returns_together
            .iter()
            .map(|g| g.iter().filter(|o| **o == t).count() as u64)
            .max()
            .unwrap_or(0);
        match self
            .output_max
            .iter()
            .find(|(o, _)| *o == t)
            .map(|(_, m)| *m)
        {
            Some(OutputMax::Unbounded) => None,
            Some(OutputMax::AtMost(n)) => Some(u64::from(n).max(listed).max(grouped)),
            None => Some(listed.max(grouped)),
        }
    }

    /// Whether some output type has no bound per execution (a `Vec` result).
    pub fn has_unbounded_output(&self) -> bool {
        self.output_max
            .iter()
            .any(|(_, m)| *m == OutputMax::Unbounded)
    }
}

/// A parameter that an event type binds, as the dispatcher reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConsumerSlot {
    pub step: StepIdx,
    pub param: ParamIdx,
    /// Index of the parameter in a run's flattened per-parameter tables.
    pub slot: u32,
    pub kind: ParamKind,
    pub size: u32,
    /// The step has this one parameter, required or optional: it binds exactly its trigger,
    /// so each of its input sets is new (a seq is dispatched once) and none is recorded.
    pub single: bool,
    /// `single`, and the step has no precondition and no execution budget: it starts on
    /// every arrival of the type (decided at compile time; a compiled spec is not changed).
    pub starts_at_once: bool,
    /// The step has this one parameter and it is a fixed list: readiness fails exactly when
    /// the list is short (a fan-in's arrivals before the last are decided without the
    /// general readiness check).
    pub sole_fixed_list: bool,
    /// The step has this one parameter and it is a list: nothing can block it, and until
    /// the step first runs no input set can repeat (a gated fan-in's arrivals go straight
    /// to its precondition).
    pub sole_list: bool,
}

/// A chain link as a type's arrival from an execution sees it: the type is a plain control
/// event (not a start, stop or exception) with one consumer, the only parameter
/// (required or optional) of a step without precondition or budget. Such an arrival in a
/// live run always records the same four decisions and starts that step, so a completion
/// returning it alone is decided from this entry without the general loops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChainLink {
    pub step: StepIdx,
    /// The parameter's index in a run's flattened per-parameter tables.
    pub slot: u32,
    pub kind: EventKind,
}

/// A spec ready for dispatch.
#[derive(Debug, Clone)]
pub struct CompiledSpec {
    pub name: String,
    pub types: Vec<TypeInfo>,
    pub steps: Vec<CompiledStep>,
    pub hierarchy: Hierarchy,
    type_index: HashMap<String, TypeId>,
    /// For each type: the (step, param) pairs whose types include it, sorted by step.
    by_type: Vec<Vec<(StepIdx, ParamIdx)>>,
    /// The same pairs with what the dispatcher needs of each, so that binding an arrival
    /// reads one table instead of three.
    consumer_slots: Vec<Vec<ConsumerSlot>>,
    /// Per type, its [`ChainLink`] if it is one.
    chain_links: Vec<Option<ChainLink>>,
    /// Per type: how many records one arrival of it usually makes (appended, and per
    /// consuming step a candidate, a precondition result if it has one, and a start or a
    /// skip), so that a fan-out's outputs reserve their records once.
    arrival_records: Vec<u32>,
    /// Per step: whether a parameter can block readiness (a required parameter or a fixed
    /// list); a step without one (lists, optionals) skips that part of the check.
    can_block: Vec<bool>,
    /// Per step, the index of its first parameter in a run's flattened per-parameter
    /// tables; one more entry holds the total.
    param_offsets: Vec<u32>,
    exception_type: TypeId,
    /// The source spec, kept for reports and re-export.
    pub source: WorkflowSpec,
}

impl CompiledSpec {
    /// Resolves and indexes a spec. Errors name the JSON path of the offending value.
    pub fn compile(spec: &WorkflowSpec) -> Result<CompiledSpec, SpecError> {
        if spec.steps.len() > MAX_STEPS {
            return Err(SpecError::invalid(
                "steps",
                format!(
                    "{} steps; at most {MAX_STEPS} are supported",
                    spec.steps.len()
                ),
            ));
        }
        if spec.events.len() > MAX_EVENT_TYPES {
            return Err(SpecError::invalid(
                "events",
                format!(
                    "{} event types; at most {MAX_EVENT_TYPES} are supported",
                    spec.events.len()
                ),
            ));
        }
        check_name("name", &spec.name)?;
        for (i, a) in spec.agents.iter().enumerate() {
            check_name(&format!("agents[{i}]"), a)?;
        }
        for (i, st) in spec.steps.iter().enumerate() {
            for (j, a) in st.delegates_to.iter().enumerate() {
                check_name(&format!("steps[{i}].delegates_to[{j}]"), a)?;
            }
        }
        let hierarchy = build_hierarchy(spec)?;
        let mut types = Vec::new();
        let mut type_index = HashMap::new();
        let mut names: Vec<&str> = hierarchy.names().collect();
        names.sort_unstable();
        let process = is_process(spec, &hierarchy);
        let declared: std::collections::HashSet<&str> =
            spec.events.iter().map(|e| e.name.as_str()).collect();
        for name in names {
            let mut class = hierarchy.classify(name).unwrap_or_default();
            if process {
                class = class.with_process_roles(hierarchy.lineage(name).unwrap_or_default());
            }
            type_index.insert(name.to_string(), types.len() as TypeId);
            types.push(TypeInfo {
                name: name.to_string(),
                kind: EventKind::from_classification(class),
                declared: declared.contains(name),
            });
        }
        // The path is built only when the lookup fails (specs may have thousands of steps).
        let lookup = |path: &dyn Fn() -> String, name: &str| -> Result<TypeId, SpecError> {
            type_index.get(name).copied().ok_or_else(|| {
                SpecError::invalid(path(), unknown_type_message(name, type_index.keys()))
            })
        };

        let mut steps = Vec::with_capacity(spec.steps.len());
        for (si, s) in spec.steps.iter().enumerate() {
            let sp = format!("steps[{si}]");
            check_name(&format!("{sp}.name"), &s.name)?;
            if s.params.len() > MAX_PARAMS_PER_STEP {
                return Err(SpecError::invalid(
                    format!("{sp}.params"),
                    format!("at most {MAX_PARAMS_PER_STEP} parameters per step"),
                ));
            }
            let mut params = Vec::with_capacity(s.params.len());
            for (pi, p) in s.params.iter().enumerate() {
                let pp = format!("{sp}.params[{pi}]");
                check_name(&format!("{pp}.name"), &p.name)?;
                if s.params[..pi].iter().any(|q| q.name == p.name) {
                    return Err(SpecError::invalid(
                        format!("{pp}.name"),
                        format!(
                            "parameter `{}` is declared twice in step `{}`; give each parameter its own name",
                            p.name, s.name
                        ),
                    ));
                }
                if p.types.is_empty() {
                    return Err(SpecError::invalid(
                        format!("{pp}.types"),
                        "a parameter needs at least one event type",
                    ));
                }
                if p.types.len() > MAX_TYPES_PER_PARAM {
                    return Err(SpecError::invalid(
                        format!("{pp}.types"),
                        format!("at most {MAX_TYPES_PER_PARAM} types per parameter"),
                    ));
                }
                let mut tys = Vec::with_capacity(p.types.len());
                for (ti, t) in p.types.iter().enumerate() {
                    let id = lookup(&|| format!("{pp}.types[{ti}]"), t)?;
                    if !tys.contains(&id) {
                        tys.push(id);
                    }
                }
                let size = match (p.kind, p.size) {
                    (ParamKind::FixedList, Some(n)) if (1..=MAX_FIXED_LIST_SIZE).contains(&n) => n,
                    (ParamKind::FixedList, Some(n)) => {
                        return Err(SpecError::invalid(
                            format!("{pp}.size"),
                            format!(
                                "fixed list size {n} is out of range 1..={MAX_FIXED_LIST_SIZE}"
                            ),
                        ));
                    }
                    (ParamKind::FixedList, None) => {
                        return Err(SpecError::invalid(
                            format!("{pp}.size"),
                            "a fixed_list parameter needs `size: N`",
                        ));
                    }
                    (_, Some(_)) => {
                        return Err(SpecError::invalid(
                            format!("{pp}.size"),
                            format!(
                                "`size` is only for fixed_list parameters; this one is {}",
                                p.kind.as_str()
                            ),
                        ));
                    }
                    (_, None) => 0,
                };
                params.push(CompiledParam {
                    name: p.name.clone(),
                    kind: p.kind,
                    types: tys,
                    size,
                });
            }
            let outputs = s
                .outputs
                .iter()
                .enumerate()
                .map(|(i, o)| lookup(&|| format!("{sp}.outputs[{i}]"), o))
                .collect::<Result<Vec<_>, _>>()?;
            let mut output_max = Vec::with_capacity(s.output_max.len());
            for (name, max) in &s.output_max {
                let Some(i) = s.outputs.iter().position(|o| o == name) else {
                    return Err(SpecError::invalid(
                        format!("{sp}.outputs"),
                        format!("`{name}` has a `max` but is not one of the step's outputs"),
                    ));
                };
                if let OutputMax::AtMost(n) = max
                    && !(1..=MAX_OUTPUT_COUNT).contains(n)
                {
                    return Err(SpecError::invalid(
                        format!("{sp}.outputs[{i}].max"),
                        format!(
                            "max {n} is out of range 1..={MAX_OUTPUT_COUNT}; write `max: unbounded` for any number"
                        ),
                    ));
                }
                output_max.push((outputs[i], *max));
            }
            let delayed = s
                .delayed
                .iter()
                .enumerate()
                .map(|(i, o)| {
                    if !s.outputs.contains(o) {
                        return Err(SpecError::invalid(
                            format!("{sp}.delayed[{i}]"),
                            format!("`{o}` is delayed but is not one of the step's outputs"),
                        ));
                    }
                    lookup(&|| format!("{sp}.delayed[{i}]"), o)
                })
                .collect::<Result<Vec<_>, _>>()?;
            let returns_together = s
                .returns_together
                .iter()
                .enumerate()
                .map(|(gi, g)| {
                    g.iter()
                        .enumerate()
                        .map(|(i, o)| lookup(&|| format!("{sp}.returns_together[{gi}][{i}]"), o))
                        .collect::<Result<Vec<_>, _>>()
                })
                .collect::<Result<Vec<_>, _>>()?;
            if s.max_executions_per_run == Some(0) {
                return Err(SpecError::invalid(
                    format!("{sp}.max_executions_per_run"),
                    "0 would mean the step never runs; remove the step or use at least 1",
                ));
            }
            let precondition = match &s.precondition {
                None => None,
                Some(pc) => {
                    let pcp = format!("{sp}.precondition");
                    check_name(&format!("{pcp}.name"), &pc.name)?;
                    let reads = pc
                        .reads
                        .iter()
                        .enumerate()
                        .map(|(i, t)| lookup(&|| format!("{pcp}.reads[{i}]"), t))
                        .collect::<Result<Vec<_>, _>>()?;
                    let when = match &pc.when {
                        None => None,
                        Some(c) => {
                            Some(compile_condition(c, &s.params, &format!("{pcp}.when"), 0)?)
                        }
                    };
                    Some(CompiledPrecondition {
                        name: pc.name.clone(),
                        reads,
                        when,
                    })
                }
            };
            let overlapping_params = params.iter().enumerate().any(|(i, p)| {
                params[i + 1..]
                    .iter()
                    .any(|q| q.types.iter().any(|t| p.types.contains(t)))
            });
            steps.push(CompiledStep {
                name: s.name.clone(),
                params,
                outputs,
                output_max,
                delayed,
                returns_together,
                max_executions_per_run: s.max_executions_per_run,
                stop_on_error: s.stop_on_error,
                precondition,
                overlapping_params,
            });
        }

        let mut by_type = vec![Vec::new(); types.len()];
        for (si, s) in steps.iter().enumerate() {
            for (pi, p) in s.params.iter().enumerate() {
                for t in &p.types {
                    by_type[*t as usize].push((si as StepIdx, pi as ParamIdx));
                }
            }
        }
        let mut param_offsets = Vec::with_capacity(steps.len() + 1);
        let mut total = 0u32;
        for s in &steps {
            param_offsets.push(total);
            total += s.params.len() as u32;
        }
        param_offsets.push(total);
        let consumer_slots = by_type
            .iter()
            .map(|pairs| {
                pairs
                    .iter()
                    .map(|&(step, param)| {
                        let st = &steps[step as usize];
                        let params = &st.params;
                        let p = &params[param as usize];
                        let single = params.len() == 1
                            && matches!(p.kind, ParamKind::Required | ParamKind::Optional);
                        ConsumerSlot {
                            step,
                            param,
                            slot: param_offsets[step as usize] + param,
                            kind: p.kind,
                            size: p.size,
                            single,
                            starts_at_once: single
                                && st.precondition.is_none()
                                && st.max_executions_per_run.is_none(),
                            sole_fixed_list: params.len() == 1 && p.kind == ParamKind::FixedList,
                            sole_list: params.len() == 1 && p.kind == ParamKind::List,
                        }
                    })
                    .collect()
            })
            .collect();
        let arrival_records = types
            .iter()
            .zip(&by_type)
            .map(|(info, pairs)| {
                if !info.kind.is_control() {
                    return 1;
                }
                if info.kind.is_terminal() {
                    return 2;
                }
                let mut n = 1;
                let mut previous = None;
                for &(step, _) in pairs {
                    if previous != Some(step) {
                        previous = Some(step);
                        n += 2 + steps[step as usize].precondition.is_some() as u32;
                    }
                }
                n
            })
            .collect();
        let exception_type = *type_index.get("ExceptionEvent").ok_or_else(|| {
            SpecError::invalid("events", "the protocol's ExceptionEvent type is missing")
        })?;

        if let Some(sim) = &spec.simulation {
            for (i, a) in sim.arrivals.iter().enumerate() {
                lookup(&|| format!("simulation.arrivals[{i}].event"), &a.event)?;
            }
            for (step, b) in &sim.behaviour {
                let bp = format!("simulation.behaviour.{step}");
                if !spec.steps.iter().any(|s| &s.name == step) {
                    return Err(SpecError::invalid(bp, format!("no step is named `{step}`")));
                }
                for (i, e) in b.emit.iter().flatten().enumerate() {
                    lookup(&|| format!("{bp}.emit[{i}]"), e)?;
                }
                for (n, x) in &b.executions {
                    if *n == 0 {
                        return Err(SpecError::invalid(
                            format!("{bp}.executions.0"),
                            "executions are numbered from 1",
                        ));
                    }
                    if let crate::spec::ExecutionBehaviour::Emit(list) = x {
                        for (i, e) in list.iter().enumerate() {
                            lookup(&|| format!("{bp}.executions.{n}.emit[{i}]"), e)?;
                        }
                    }
                }
            }
        }

        let chain_links = types
            .iter()
            .zip(&consumer_slots)
            .map(|(info, slots): (&TypeInfo, &Vec<ConsumerSlot>)| {
                let k = info.kind;
                match slots.as_slice() {
                    [c] if c.starts_at_once
                        && k.is_control()
                        && !k.is_start()
                        && !k.is_terminal() =>
                    {
                        Some(ChainLink {
                            step: c.step,
                            slot: c.slot,
                            kind: k,
                        })
                    }
                    _ => None,
                }
            })
            .collect();
        let can_block = steps
            .iter()
            .map(|s| {
                s.params
                    .iter()
                    .any(|p| matches!(p.kind, ParamKind::Required | ParamKind::FixedList))
            })
            .collect();
        Ok(CompiledSpec {
            name: spec.name.clone(),
            types,
            steps,
            hierarchy,
            type_index,
            by_type,
            consumer_slots,
            chain_links,
            arrival_records,
            can_block,
            param_offsets,
            exception_type,
            source: spec.clone(),
        })
    }

    /// The type id for a name, if the workflow knows it.
    pub fn type_id(&self, name: &str) -> Option<TypeId> {
        self.type_index.get(name).copied()
    }

    /// The type's info. Panics only on an id that did not come from this spec.
    pub fn type_info(&self, id: TypeId) -> &TypeInfo {
        &self.types[id as usize]
    }

    /// The (step, param) pairs that a type can bind, in step order.
    pub fn consumers(&self, id: TypeId) -> &[(StepIdx, ParamIdx)] {
        &self.by_type[id as usize]
    }

    /// [`CompiledSpec::consumers`] with each parameter's kind, size and table slot.
    pub(crate) fn consumer_slots(&self, id: TypeId) -> &[ConsumerSlot] {
        &self.consumer_slots[id as usize]
    }

    /// The type's [`ChainLink`], if its arrival from an execution is one.
    #[inline(always)]
    pub(crate) fn chain_link(&self, id: TypeId) -> Option<ChainLink> {
        self.chain_links.get(id as usize).copied().flatten()
    }

    /// How many records one arrival of a type usually makes (see `arrival_records`).
    pub(crate) fn arrival_records(&self, id: TypeId) -> u32 {
        self.arrival_records.get(id as usize).copied().unwrap_or(1)
    }

    /// Whether a parameter of the step can block readiness (required, fixed list).
    pub(crate) fn can_block(&self, step: StepIdx) -> bool {
        self.can_block.get(step as usize).copied().unwrap_or(true)
    }

    /// Per step, the index of its first parameter in flattened per-parameter tables (one
    /// more entry at the end: the number of parameters of all steps).
    pub(crate) fn param_offsets(&self) -> &[u32] {
        &self.param_offsets
    }

    /// The step index for a name (the first, if names repeat).
    pub fn step_index(&self, name: &str) -> Option<StepIdx> {
        self.steps
            .iter()
            .position(|s| s.name == name)
            .map(|i| i as StepIdx)
    }

    /// Whether any step has a list or fixed-list parameter.
    pub fn has_list_params(&self) -> bool {
        self.steps.iter().any(|s| {
            s.params
                .iter()
                .any(|p| matches!(p.kind, ParamKind::List | ParamKind::FixedList))
        })
    }

    /// The built-in `ExceptionEvent` type.
    pub fn exception_type(&self) -> TypeId {
        self.exception_type
    }

    /// A stable fingerprint of what decides dispatch (types, steps, params, options), used
    /// to refuse replaying a log against a changed workflow.
    pub fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = crate::ids::FastHasher::default();
        for t in &self.types {
            t.name.hash(&mut h);
            t.kind.bits().hash(&mut h);
        }
        for s in &self.steps {
            s.name.hash(&mut h);
            for p in &s.params {
                p.name.hash(&mut h);
                p.kind.hash(&mut h);
                p.types.hash(&mut h);
                p.size.hash(&mut h);
            }
            s.max_executions_per_run.hash(&mut h);
            s.stop_on_error.hash(&mut h);
            s.precondition.as_ref().map(|p| p.name.clone()).hash(&mut h);
        }
        h.finish()
    }
}

/// Whether `spec` is a process (seed 002's `@process_step`s): it takes, returns or declares
/// an event of the process family. A process's types get that family's roles (work events
/// drive its steps, `ProcessStartEvent`/`ProcessStopEvent`/`ProcessExceptionEvent` begin and
/// end its runs); an agent's keep the Python classification, so that its fingerprint (and
/// with it every run it has stored) does not change with the process family's roles.
fn is_process(spec: &WorkflowSpec, hierarchy: &Hierarchy) -> bool {
    let family =
        |name: &str| hierarchy.is_subtype_of(name, saap_protocol::hierarchy::names::PROCESS_EVENT);
    spec.events.iter().any(|e| family(&e.name))
        || spec.steps.iter().any(|s| {
            s.outputs.iter().any(|o| family(o))
                || s.params.iter().any(|p| p.types.iter().any(|t| family(t)))
        })
}

fn build_hierarchy(spec: &WorkflowSpec) -> Result<Hierarchy, SpecError> {
    let mut h = Hierarchy::builtin();
    // Declarations may come in any order: register in rounds until no progress.
    let mut pending: Vec<usize> = (0..spec.events.len()).collect();
    let mut seen = std::collections::HashSet::new();
    for (i, e) in spec.events.iter().enumerate() {
        check_name(&format!("events[{i}].name"), &e.name)?;
        if h.contains(&e.name) {
            return Err(SpecError::invalid(
                format!("events[{i}].name"),
                format!(
                    "event type `{}` is already defined (built in, or declared twice); rename it",
                    e.name
                ),
            ));
        }
        if !seen.insert(e.name.as_str()) {
            return Err(SpecError::invalid(
                format!("events[{i}].name"),
                format!("event type `{}` is declared twice", e.name),
            ));
        }
    }
    while !pending.is_empty() {
        let before = pending.len();
        pending.retain(|&i| {
            let e = &spec.events[i];
            let parents: Vec<&str> = if e.parents.is_empty() {
                vec!["ControlEvent"]
            } else {
                e.parents.iter().map(String::as_str).collect()
            };
            if parents.iter().all(|p| h.contains(p)) {
                // Errors here are reported in the final pass below.
                h.register(&e.name, &parents).is_err()
            } else {
                true
            }
        });
        if pending.len() == before {
            break;
        }
    }
    if let Some(&i) = pending.first() {
        let e = &spec.events[i];
        for (pi, p) in e.parents.iter().enumerate() {
            if !h.contains(p) {
                let declared = spec.events.iter().any(|d| &d.name == p);
                let message = if declared {
                    format!(
                        "parent `{p}` of `{}` is part of an inheritance cycle",
                        e.name
                    )
                } else {
                    unknown_type_message(p, h.names())
                };
                return Err(SpecError::invalid(
                    format!("events[{i}].parents[{pi}]"),
                    message,
                ));
            }
        }
        let parents: Vec<&str> = e.parents.iter().map(String::as_str).collect();
        if let Err(err) = h.register(&e.name, &parents) {
            return Err(SpecError::invalid(format!("events[{i}]"), err.to_string()));
        }
    }
    Ok(h)
}

fn compile_condition(
    c: &Condition,
    params: &[ParamSpec],
    path: &str,
    depth: usize,
) -> Result<CompiledCondition, SpecError> {
    if depth > MAX_CONDITION_DEPTH {
        return Err(SpecError::invalid(
            path,
            format!("condition nested deeper than {MAX_CONDITION_DEPTH}"),
        ));
    }
    let param = |name: &str| -> Result<ParamIdx, SpecError> {
        params
            .iter()
            .position(|p| p.name == name)
            .map(|i| i as ParamIdx)
            .ok_or_else(|| SpecError::invalid(path, unknown_param_message(name, params)))
    };
    Ok(match c {
        Condition::Always(b) => CompiledCondition::Always(*b),
        Condition::Present(p) => CompiledCondition::Present(param(p)?),
        Condition::Absent(p) => CompiledCondition::Absent(param(p)?),
        Condition::CountAtLeast { param: p, n } => CompiledCondition::CountAtLeast(param(p)?, *n),
        Condition::All(cs) => CompiledCondition::All(
            cs.iter()
                .enumerate()
                .map(|(i, c)| compile_condition(c, params, &format!("{path}.all[{i}]"), depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Condition::Any(cs) => CompiledCondition::Any(
            cs.iter()
                .enumerate()
                .map(|(i, c)| compile_condition(c, params, &format!("{path}.any[{i}]"), depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Condition::Not(c) => CompiledCondition::Not(Box::new(compile_condition(
            c,
            params,
            &format!("{path}.not"),
            depth + 1,
        )?)),
    })
}

/// Why a condition's parameter name is refused: the step's parameters with the types each
/// takes, and, when the name is one of those types, which parameter to write instead.
fn unknown_param_message(name: &str, params: &[ParamSpec]) -> String {
    let takes = |p: &ParamSpec| format!("`{}` (takes {})", p.name, p.types.join(", "));
    let by_type: Vec<String> = params
        .iter()
        .filter(|p| p.types.iter().any(|t| t == name))
        .map(takes)
        .collect();
    if !by_type.is_empty() {
        return format!(
            "the condition names `{name}`, which is an event type, not a parameter; conditions name the step's parameters: write {}",
            match by_type.as_slice() {
                [one] => one.clone(),
                many => format!("one of {}", many.join(", ")),
            }
        );
    }
    let known: Vec<String> = params.iter().map(takes).collect();
    format!(
        "the condition reads parameter `{name}`, which the step does not have (it has: {})",
        if known.is_empty() {
            "none".to_string()
        } else {
            known.join(", ")
        }
    )
}

fn check_name(path: &str, name: &str) -> Result<(), SpecError> {
    if name.is_empty() || name.len() > 256 {
        return Err(SpecError::invalid(
            path,
            "names must be 1 to 256 characters long",
        ));
    }
    if name
        .chars()
        .any(|c| c.is_whitespace() || c == '.' || c == '*' || c == '>' || c.is_control())
    {
        return Err(SpecError::invalid(
            path,
            format!(
                "`{name}` contains whitespace, `.`, `*` or `>`, which cannot appear in NATS subjects"
            ),
        ));
    }
    Ok(())
}

fn unknown_type_message<'a>(
    name: &str,
    known: impl Iterator<Item = impl AsRef<str> + 'a>,
) -> String {
    let mut best: Option<(usize, String)> = None;
    for k in known {
        let k = k.as_ref();
        let d = edit_distance(name, k);
        if d <= 2.max(name.len() / 4) && best.as_ref().is_none_or(|(bd, _)| d < *bd) {
            best = Some((d, k.to_string()));
        }
    }
    match best {
        Some((_, s)) => format!(
            "unknown event type `{name}`; did you mean `{s}`? Declare it under `events:` if it is new"
        ),
        None => format!("unknown event type `{name}`; declare it under `events:`"),
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use crate::{SpecSyntax, compile_spec_text};

    fn error(yaml: &str) -> String {
        compile_spec_text(yaml, SpecSyntax::Yaml)
            .expect_err("refused")
            .to_string()
    }

    #[test]
    fn a_process_gives_its_family_roles_and_an_agent_keeps_the_python_kinds() {
        let process = compile_spec_text(
            "name: Onboarding
steps:
  - {name: ask, params: [{name: s, kind: required, types: [ProcessStartEvent]}], outputs: [HumanWorkRequestEvent]}
  - {name: done, params: [{name: w, kind: required, types: [HumanWorkEvent]}], outputs: [ProcessStopEvent]}
",
            SpecSyntax::Yaml,
        )
        .unwrap();
        let kind = |s: &crate::CompiledSpec, n: &str| s.type_info(s.type_id(n).unwrap()).kind;
        assert!(kind(&process, "ProcessStartEvent").is_start());
        assert!(kind(&process, "ProcessStartEvent").is_control());
        assert!(kind(&process, "ProcessStopEvent").is_stop());
        assert!(kind(&process, "ProcessExceptionEvent").is_exception());
        assert!(kind(&process, "HumanWorkEvent").is_control());
        assert!(!kind(&process, "HumanWorkEvent").is_terminal());
        assert!(kind(&process, "HumanWorkRequestEvent").is_control());
        let agent = compile_spec_text(
            "name: Chat\nsteps: [{name: s, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [StopEvent]}]\n",
            SpecSyntax::Yaml,
        )
        .unwrap();
        assert_eq!(kind(&agent, "ProcessStartEvent").bits(), 0);
        assert!(!kind(&agent, "HumanWorkEvent").is_control());
    }

    #[test]
    fn a_condition_naming_a_type_says_which_parameter_takes_it() {
        let msg = error(
            "name: a
events: [{name: B}]
steps:
  - name: s
    params: [{name: q, kind: required, types: [UserMessageEvent]}, {name: b, kind: optional, types: [B]}]
    precondition: {name: p, when: {present: B}}
",
        );
        assert!(
            msg.contains("`B`, which is an event type, not a parameter")
                && msg.contains("write `b` (takes B)"),
            "{msg}"
        );
        assert!(msg.starts_with("steps[0].precondition.when: "), "{msg}");
    }

    #[test]
    fn an_unknown_condition_parameter_lists_the_parameters_with_their_types() {
        let msg = error(
            "name: a
steps:
  - name: s
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    precondition: {name: p, when: {any: [{absent: nope}]}}
",
        );
        assert!(
            msg.contains(
                "the condition reads parameter `nope`, which the step does not have (it has: `q` (takes UserMessageEvent))"
            ),
            "{msg}"
        );
        assert!(
            msg.starts_with("steps[0].precondition.when.any[0]: "),
            "{msg}"
        );
    }

    #[test]
    fn an_output_bound_out_of_range_or_of_no_output_is_refused() {
        let mut spec = crate::parse_spec(
            "name: a\nsteps: [{name: s, outputs: [A]}]\nevents: [{name: A}]\n",
            SpecSyntax::Yaml,
        )
        .unwrap();
        spec.steps[0]
            .output_max
            .insert("B".into(), crate::spec::OutputMax::Unbounded);
        let err = crate::CompiledSpec::compile(&spec)
            .expect_err("not an output")
            .to_string();
        assert!(
            err.contains("`B` has a `max` but is not one of the step's outputs"),
            "{err}"
        );
        spec.steps[0].output_max.clear();
        spec.steps[0]
            .output_max
            .insert("A".into(), crate::spec::OutputMax::AtMost(0));
        let err = crate::CompiledSpec::compile(&spec)
            .expect_err("0")
            .to_string();
        assert!(err.contains("steps[0].outputs[0].max"), "{err}");
    }
}
