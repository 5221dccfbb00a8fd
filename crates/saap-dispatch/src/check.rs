//! Static checks of a compiled spec (`saap check`, DESIGN §5).
//!
//! [`check`] looks at a [`CompiledSpec`] without running it and reports [`Finding`]s: each
//! names a stable code, a severity, the step and parameter, what is wrong, which runtime rule
//! makes it break (R1–R6 of the debugging guide, DESIGN §4), and what to write instead. The
//! result is deterministic: the same spec always gives the same findings in the same order
//! (errors first, then by code, step declaration order, parameter order).
//!
//! The analysis is over *types*, not runs, and deliberately conservative where it claims a
//! step cannot run: a step "can run" when, starting from the types that arrive from outside
//! (subtypes of `StartEvent` and of the human/agent/bot-in-the-loop response types), some
//! chain of steps whose blocking inputs are all available produces one of its parameter types
//! and all of its required and fixed-list parameters. Only a declarative precondition that is
//! provably never true (see [`condition_constant`]) is taken into account; user preconditions
//! are assumed to hold sometimes.
//!
//! "Statically known" event counts (SAAP009, fixed-list count mismatch): the number of
//! events of a type a run can ever hold is known only when the type does not arrive from
//! outside and every step that may return it has `max_executions_per_run` and a bounded
//! count per execution: at most one event of each type in `outputs`, or its `max`, or the
//! largest number of times a `returns_together` group (or `outputs`) lists it. A step that
//! returns any number of it (`max: unbounded`, a `Vec` result) can fill any list. Otherwise
//! the check says nothing: a count it cannot prove is never an error.
//!
//! The codes, their meaning and a minimal example of each are in `docs/checks.md`; the table
//! [`RULES`] is the machine-readable list.

use crate::compiled::{CompiledCondition, CompiledSpec, CompiledStep, TypeId};
use crate::spec::ParamKind;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// How bad a finding is. Errors make `saap check` exit 1; warnings only with
/// `--deny warnings`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One problem found in a spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Stable code, e.g. `SAAP010`.
    pub code: &'static str,
    pub severity: Severity,
    /// Short slug of the rule, e.g. `optional-trap`.
    pub rule: &'static str,
    /// The step concerned, if any.
    pub step: Option<String>,
    /// The parameter concerned, if any.
    pub param: Option<String>,
    /// What is wrong.
    pub message: String,
    /// Which runtime rule makes it break (R1–R6, DESIGN §4.x).
    pub why: String,
    /// What to write instead.
    pub fix: String,
}

/// A check's identity: code, severity, slug and a one-line title.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rule {
    pub code: &'static str,
    pub severity: Severity,
    pub rule: &'static str,
    pub title: &'static str,
}

const fn rule(
    code: &'static str,
    severity: Severity,
    slug: &'static str,
    title: &'static str,
) -> Rule {
    Rule {
        code,
        severity,
        rule: slug,
        title,
    }
}

pub const UNREACHABLE_STEP: Rule = rule(
    "SAAP001",
    Severity::Error,
    "unreachable-step",
    "no path from an outside arrival to the step",
);
pub const MISSING_PRODUCER: Rule = rule(
    "SAAP002",
    Severity::Error,
    "missing-producer",
    "required input that nothing produces and that does not arrive from outside",
);
pub const TERMINAL_INPUT: Rule = rule(
    "SAAP003",
    Severity::Error,
    "terminal-input",
    "step takes a stop or exception event",
);
pub const UNBOUNDED_CYCLE: Rule = rule(
    "SAAP004",
    Severity::Error,
    "unbounded-cycle",
    "cycle of steps without a precondition or execution limit",
);
pub const NO_START_CONSUMER: Rule = rule(
    "SAAP005",
    Severity::Error,
    "no-start-consumer",
    "no step consumes a start event",
);
pub const DUPLICATE_STEP: Rule = rule(
    "SAAP006",
    Severity::Error,
    "duplicate-step-name",
    "two steps share a name",
);
pub const PRECONDITION_FOREIGN_READ: Rule = rule(
    "SAAP007",
    Severity::Error,
    "precondition-reads-foreign-type",
    "precondition reads an event type its step does not take",
);
pub const DANGLING_STOP: Rule = rule(
    "SAAP008",
    Severity::Error,
    "dangling-stop",
    "stop event returned together with other control events",
);
pub const FIXED_LIST_OVERCOUNT: Rule = rule(
    "SAAP009",
    Severity::Error,
    "fixed-list-count-mismatch",
    "fixed list larger than its producers can ever emit",
);
pub const OPTIONAL_TRAP: Rule = rule(
    "SAAP010",
    Severity::Warning,
    "optional-trap",
    "optional parameter without precondition or execution limit",
);
pub const LIST_RERUNS: Rule = rule(
    "SAAP011",
    Severity::Warning,
    "list-reruns",
    "list parameter without precondition (re-runs per arrival)",
);
pub const SAME_TYPE_TWO_PARAMS: Rule = rule(
    "SAAP012",
    Severity::Warning,
    "same-type-two-params",
    "one event type in two parameters of a step",
);
pub const DOUBLE_DIP: Rule = rule(
    "SAAP013",
    Severity::Warning,
    "double-dip",
    "one event type used for several stages",
);
pub const PARENT_TYPED_PARAM: Rule = rule(
    "SAAP014",
    Severity::Warning,
    "parent-typed-param",
    "parameter typed with a parent whose subtypes are produced",
);
pub const NO_PATH_TO_STOP: Rule = rule(
    "SAAP015",
    Severity::Warning,
    "no-path-to-stop",
    "no path from the step to a stop event",
);
pub const DISPLAY_ONLY_INPUT: Rule = rule(
    "SAAP016",
    Severity::Warning,
    "display-only-input",
    "parameter typed with an event that is never dispatched",
);
pub const PRECONDITION_NEVER_TRUE: Rule = rule(
    "SAAP017",
    Severity::Warning,
    "precondition-never-true",
    "declarative precondition that can never be true",
);

/// Every check, in code order.
pub const RULES: &[Rule] = &[
    UNREACHABLE_STEP,
    MISSING_PRODUCER,
    TERMINAL_INPUT,
    UNBOUNDED_CYCLE,
    NO_START_CONSUMER,
    DUPLICATE_STEP,
    PRECONDITION_FOREIGN_READ,
    DANGLING_STOP,
    FIXED_LIST_OVERCOUNT,
    OPTIONAL_TRAP,
    LIST_RERUNS,
    SAME_TYPE_TWO_PARAMS,
    DOUBLE_DIP,
    PARENT_TYPED_PARAM,
    NO_PATH_TO_STOP,
    DISPLAY_ONLY_INPUT,
    PRECONDITION_NEVER_TRUE,
];

/// The built-in types whose subtypes arrive from outside the workflow (DESIGN §5).
pub const OUTSIDE_ROOTS: &[&str] = &[
    "StartEvent",
    "HumanInTheLoopResponseEvent",
    "AgentInTheLoopResponseEvent",
    "AgentInTheLoopExceptionEvent",
    "BotInTheLoopResponseEvent",
];

/// The built-in request types whose answers arrive from outside as the response types of
/// [`OUTSIDE_ROOTS`].
pub const REQUEST_ROOTS: &[&str] = &[
    "HumanInTheLoopRequestEvent",
    "AgentInTheLoopRequestEvent",
    "BotInTheLoopRequestEvent",
];

/// Counts of findings by severity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub errors: usize,
    pub warnings: usize,
}

/// Counts findings by severity.
pub fn summarize(findings: &[Finding]) -> Summary {
    let mut s = Summary::default();
    for f in findings {
        match f.severity {
            Severity::Error => s.errors += 1,
            Severity::Warning => s.warnings += 1,
        }
    }
    s
}

/// Runs every check of DESIGN §5 on a compiled spec.
pub fn check(spec: &CompiledSpec) -> Vec<Finding> {
    let mut cx = Analysis::new(spec);
    let mut out = Out::default();
    cx.duplicate_steps(&mut out);
    cx.no_start_consumer(&mut out);
    cx.terminal_inputs(&mut out);
    cx.missing_producers(&mut out);
    cx.never_true_preconditions(&mut out);
    cx.unreachable_steps(&mut out);
    cx.unbounded_cycles(&mut out);
    cx.foreign_precondition_reads(&mut out);
    cx.dangling_stops(&mut out);
    cx.fixed_list_overcounts(&mut out);
    cx.optional_traps(&mut out);
    cx.list_reruns(&mut out);
    cx.same_type_two_params(&mut out);
    cx.double_dips(&mut out);
    cx.parent_typed_params(&mut out);
    cx.no_path_to_stop(&mut out);
    cx.display_only_inputs(&mut out);
    out.finish()
}

/// The constant value of a declarative condition given only the parameter kinds, if it has
/// one. A required parameter always binds exactly one event, an optional one 0 or 1, a fixed
/// list exactly N (it is only evaluated once ready), a list any number.
pub fn condition_constant(step: &CompiledStep, c: &CompiledCondition) -> Option<bool> {
    // (lowest, highest) number of events the parameter is bound to when evaluated.
    let range = |p: u32| -> (u64, Option<u64>) {
        match step.params.get(p as usize) {
            Some(param) => match param.kind {
                ParamKind::Required => (1, Some(1)),
                ParamKind::Optional => (0, Some(1)),
                ParamKind::List => (0, None),
                ParamKind::FixedList => (u64::from(param.size), Some(u64::from(param.size))),
            },
            None => (0, None),
        }
    };
    let at_least = |p: u32, n: u64| -> Option<bool> {
        let (lo, hi) = range(p);
        if lo >= n {
            Some(true)
        } else if hi.is_some_and(|h| h < n) {
            Some(false)
        } else {
            None
        }
    };
    match c {
        CompiledCondition::Always(b) => Some(*b),
        CompiledCondition::Present(p) => at_least(*p, 1),
        CompiledCondition::Absent(p) => at_least(*p, 1).map(|v| !v),
        CompiledCondition::CountAtLeast(p, n) => at_least(*p, u64::from(*n)),
        CompiledCondition::Not(c) => condition_constant(step, c).map(|v| !v),
        CompiledCondition::All(cs) => {
            let mut all_true = true;
            for c in cs {
                match condition_constant(step, c) {
                    Some(false) => return Some(false),
                    Some(true) => {}
                    None => all_true = false,
                }
            }
            all_true.then_some(true)
        }
        CompiledCondition::Any(cs) => {
            let mut all_false = true;
            for c in cs {
                match condition_constant(step, c) {
                    Some(true) => return Some(true),
                    Some(false) => {}
                    None => all_false = false,
                }
            }
            all_false.then_some(false)
        }
    }
}

/// Sort key of a finding: severity, code, step index + 1 (0 = none), param index + 1, message.
type SortKey = (Severity, &'static str, usize, usize, String);

/// Collected findings with their sort keys.
#[derive(Default)]
struct Out {
    items: Vec<(SortKey, Finding)>,
}

impl Out {
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        rule: &Rule,
        cx: &Analysis<'_>,
        step: Option<usize>,
        param: Option<usize>,
        message: String,
        why: &str,
        fix: String,
    ) {
        let step_name = step.map(|s| cx.spec.steps[s].name.clone());
        let param_name = step
            .zip(param)
            .map(|(s, p)| cx.spec.steps[s].params[p].name.clone());
        let key = (
            rule.severity,
            rule.code,
            step.map_or(0, |s| s + 1),
            param.map_or(0, |p| p + 1),
            message.clone(),
        );
        self.items.push((
            key,
            Finding {
                code: rule.code,
                severity: rule.severity,
                rule: rule.rule,
                step: step_name,
                param: param_name,
                message,
                why: why.to_string(),
                fix,
            },
        ));
    }

    fn finish(mut self) -> Vec<Finding> {
        self.items.sort_by(|a, b| a.0.cmp(&b.0));
        self.items.dedup_by(|a, b| a.0 == b.0);
        self.items.into_iter().map(|(_, f)| f).collect()
    }
}

/// Facts derived once from the spec and shared by the checks.
struct Analysis<'a> {
    spec: &'a CompiledSpec,
    /// Per step: what one execution may return (outputs ∪ returns_together), deduplicated.
    outs: Vec<Vec<TypeId>>,
    /// Per type: the steps that may return it, in step order.
    producers: Vec<Vec<usize>>,
    /// Per type: it arrives from outside (a control subtype of an [`OUTSIDE_ROOTS`] type).
    outside: Vec<bool>,
    /// Per step: its declarative precondition is provably never true.
    never_true: Vec<bool>,
    /// Per step: it can run in some run (see the module docs).
    runs: Vec<bool>,
    /// Per step: it could run if every declarative precondition held sometimes (the
    /// structure alone; used for termination so that a never-true precondition is reported
    /// once, by SAAP017).
    could_run: Vec<bool>,
    /// Per type: some event of it can be dispatched in some run.
    available: Vec<bool>,
    /// Types the simulation section delivers from outside.
    simulated_arrivals: BTreeSet<TypeId>,
    /// Per (step, param): the SAAP002 check fired.
    missing: BTreeSet<(usize, usize)>,
}

impl<'a> Analysis<'a> {
    fn new(spec: &'a CompiledSpec) -> Analysis<'a> {
        let nt = spec.types.len();
        let outs: Vec<Vec<TypeId>> = spec
            .steps
            .iter()
            .map(|s| {
                let mut v: Vec<TypeId> = Vec::new();
                for t in s.outputs.iter().chain(s.returns_together.iter().flatten()) {
                    if !v.contains(t) {
                        v.push(*t);
                    }
                }
                v
            })
            .collect();
        let mut producers = vec![Vec::new(); nt];
        for (si, o) in outs.iter().enumerate() {
            for t in o {
                producers[*t as usize].push(si);
            }
        }
        let outside = spec
            .types
            .iter()
            .map(|t| {
                t.kind.is_control()
                    && OUTSIDE_ROOTS
                        .iter()
                        .any(|r| spec.hierarchy.is_subtype_of(&t.name, r))
            })
            .collect();
        let never_true = spec
            .steps
            .iter()
            .map(|s| {
                s.precondition
                    .as_ref()
                    .and_then(|p| p.when.as_ref())
                    .and_then(|c| condition_constant(s, c))
                    == Some(false)
            })
            .collect();
        let mut cx = Analysis {
            spec,
            outs,
            producers,
            outside,
            never_true,
            runs: Vec::new(),
            could_run: Vec::new(),
            available: Vec::new(),
            missing: BTreeSet::new(),
            simulated_arrivals: spec
                .source
                .simulation
                .iter()
                .flat_map(|sim| sim.arrivals.iter())
                .filter_map(|a| spec.type_id(&a.event))
                .collect(),
        };
        (cx.runs, cx.available) = cx.reachability(true);
        cx.could_run = cx.reachability(false).0;
        cx
    }

    /// A type whose events are dispatched when appended: control, and not terminal (a stop
    /// or exception event ends the run, so nothing is evaluated for it).
    fn dispatchable(&self, t: TypeId) -> bool {
        let k = self.spec.type_info(t).kind;
        k.is_control() && !k.is_terminal()
    }

    fn name(&self, t: TypeId) -> &str {
        &self.spec.type_info(t).name
    }

    fn names(&self, ts: &[TypeId]) -> String {
        capped_list(ts.iter().map(|t| self.name(*t)), ts.len())
    }

    fn step_names(&self, ss: &[usize]) -> String {
        capped_list(
            ss.iter().map(|s| self.spec.steps[*s].name.as_str()),
            ss.len(),
        )
    }

    fn blocking(kind: ParamKind) -> bool {
        matches!(kind, ParamKind::Required | ParamKind::FixedList)
    }

    /// Least fixpoint: the types that can be dispatched and the steps that can run.
    /// Least fixpoint: the steps that can run and the types that can be dispatched. With
    /// `respect_preconditions`, steps whose precondition is never true do not run.
    ///
    /// A worklist over types: each type is made available once and visits its consumers
    /// once, so the cost is linear in the size of the spec.
    fn reachability(&self, respect_preconditions: bool) -> (Vec<bool>, Vec<bool>) {
        let steps = &self.spec.steps;
        let mut runs = vec![false; steps.len()];
        let mut available = vec![false; self.spec.types.len()];
        let mut triggered = vec![false; steps.len()];
        let mut unmet: Vec<usize> = steps
            .iter()
            .map(|s| s.params.iter().filter(|p| Self::blocking(p.kind)).count())
            .collect();
        let mut satisfied: Vec<Vec<bool>> =
            steps.iter().map(|s| vec![false; s.params.len()]).collect();
        let mut queue: Vec<TypeId> = Vec::new();
        for (t, slot) in available.iter_mut().enumerate() {
            if self.outside[t] && self.dispatchable(t as TypeId) {
                *slot = true;
                queue.push(t as TypeId);
            }
        }
        while let Some(t) = queue.pop() {
            for &(c, p) in self.spec.consumers(t) {
                let (c, p) = (c as usize, p as usize);
                triggered[c] = true;
                if !satisfied[c][p] {
                    satisfied[c][p] = true;
                    if Self::blocking(steps[c].params[p].kind) {
                        unmet[c] -= 1;
                    }
                }
                if runs[c] || unmet[c] > 0 || (respect_preconditions && self.never_true[c]) {
                    continue;
                }
                runs[c] = true;
                for &o in &self.outs[c] {
                    if self.dispatchable(o) && !available[o as usize] {
                        available[o as usize] = true;
                        queue.push(o);
                    }
                }
            }
        }
        (runs, available)
    }

    /// Per step: some chain from it leads to a stop or exception event (through steps that
    /// could run). Backwards from the steps that return one; linear in the spec's size.
    fn leads_to_end(&self) -> Vec<bool> {
        let steps = &self.spec.steps;
        let mut ends = vec![false; steps.len()];
        let mut type_done = vec![false; self.spec.types.len()];
        let mut stack: Vec<usize> = Vec::new();
        // A request to a human, agent or bot is answered from outside: it leads on to the
        // steps that take the responses.
        let asks: Vec<bool> = self
            .outs
            .iter()
            .map(|o| {
                o.iter().any(|&t| {
                    REQUEST_ROOTS
                        .iter()
                        .any(|r| self.spec.hierarchy.is_subtype_of(self.name(t), r))
                })
            })
            .collect();
        let answers = |c: usize| {
            steps[c]
                .params
                .iter()
                .flat_map(|p| p.types.iter())
                .any(|&t| self.outside[t as usize] && !self.spec.type_info(t).kind.is_start())
        };
        for (si, outs) in self.outs.iter().enumerate() {
            let terminal = outs.iter().any(|&t| {
                let k = self.spec.type_info(t).kind;
                k.is_control() && k.is_terminal()
            });
            if self.could_run[si] && terminal {
                ends[si] = true;
                stack.push(si);
            }
        }
        let mut answered = false;
        while let Some(c) = stack.pop() {
            for p in &steps[c].params {
                for &t in &p.types {
                    if !self.dispatchable(t) || type_done[t as usize] {
                        continue;
                    }
                    type_done[t as usize] = true;
                    for &s in &self.producers[t as usize] {
                        if self.could_run[s] && !ends[s] {
                            ends[s] = true;
                            stack.push(s);
                        }
                    }
                }
            }
            if !answered && answers(c) {
                answered = true;
                for s in 0..steps.len() {
                    if asks[s] && self.could_run[s] && !ends[s] {
                        ends[s] = true;
                        stack.push(s);
                    }
                }
            }
        }
        ends
    }

    // ---- errors ----------------------------------------------------------------------

    fn duplicate_steps(&self, out: &mut Out) {
        let mut first: BTreeMap<&str, usize> = BTreeMap::new();
        for (si, s) in self.spec.steps.iter().enumerate() {
            match first.get(s.name.as_str()) {
                None => {
                    first.insert(&s.name, si);
                }
                Some(&f) => out.push(
                    &DUPLICATE_STEP,
                    self,
                    Some(si),
                    None,
                    format!(
                        "steps[{si}] is named `{}` like steps[{f}]",
                        s.name
                    ),
                    "execution counts (max_executions_per_run) and input-set idempotency are kept per step name (DESIGN §4.3, §4.5): two steps with one name share them and suppress each other's executions",
                    format!("rename one of the two steps (e.g. `{}_2`)", s.name),
                ),
            }
        }
    }

    fn no_start_consumer(&self, out: &mut Out) {
        let any = self.spec.steps.iter().any(|s| {
            s.params.iter().any(|p| {
                p.types
                    .iter()
                    .any(|t| self.spec.type_info(*t).kind.is_start())
            })
        });
        if !any {
            out.push(
                &NO_START_CONSUMER,
                self,
                None,
                None,
                format!(
                    "no step of `{}` takes a start event (StartEvent or a subtype such as UserMessageEvent)",
                    self.spec.name
                ),
                "a run begins with its first start event (DESIGN §4.10) and only steps whose parameter types include that exact name become candidates (§4.1): with no start consumer nothing ever runs",
                "give the first step a parameter typed with the start event your callers send, e.g. `types: [UserMessageEvent]`".to_string(),
            );
        }
    }

    fn terminal_inputs(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            for (pi, p) in s.params.iter().enumerate() {
                let terminal: Vec<TypeId> = p
                    .types
                    .iter()
                    .copied()
                    .filter(|t| self.spec.type_info(*t).kind.is_terminal())
                    .collect();
                if terminal.is_empty() {
                    continue;
                }
                out.push(
                    &TERMINAL_INPUT,
                    self,
                    Some(si),
                    Some(pi),
                    format!(
                        "the parameter takes {}, which ends the run",
                        self.names(&terminal)
                    ),
                    "R4 / DESIGN §4.7: when a stop or exception event is appended the run is terminated and no step is evaluated afterwards, so this parameter never binds anything",
                    "consume a dedicated control event emitted before the stop (e.g. `AnswerReady`), and return the stop event from the step that finishes the work".to_string(),
                );
            }
        }
    }

    fn missing_producers(&mut self, out: &mut Out) {
        let mut missing = BTreeSet::new();
        for (si, s) in self.spec.steps.iter().enumerate() {
            for (pi, p) in s.params.iter().enumerate() {
                if !Self::blocking(p.kind) {
                    continue;
                }
                let candidates: Vec<TypeId> = p
                    .types
                    .iter()
                    .copied()
                    .filter(|t| !self.spec.type_info(*t).kind.is_terminal())
                    .collect();
                if candidates.is_empty() {
                    continue; // SAAP003 explains it
                }
                let delivered = candidates.iter().any(|t| {
                    self.dispatchable(*t)
                        && (self.outside[*t as usize] || !self.producers[*t as usize].is_empty())
                });
                if delivered {
                    continue;
                }
                missing.insert((si, pi));
                let not_control: Vec<TypeId> = candidates
                    .iter()
                    .copied()
                    .filter(|t| !self.spec.type_info(*t).kind.is_control())
                    .collect();
                let detail = if not_control.is_empty() {
                    "no step returns it and it does not arrive from outside".to_string()
                } else {
                    format!(
                        "no step returns a control event of it and it does not arrive from outside ({} {} display-only: never dispatched)",
                        self.names(&not_control),
                        if not_control.len() == 1 { "is" } else { "are" }
                    )
                };
                let simulated: Vec<TypeId> = candidates
                    .iter()
                    .copied()
                    .filter(|t| self.simulated_arrivals.contains(t))
                    .collect();
                let detail = if simulated.is_empty() {
                    detail
                } else {
                    format!(
                        "{detail} (the simulation section delivers {}, but at runtime only start events and in-the-loop responses arrive from outside)",
                        self.names(&simulated)
                    )
                };
                let what = if p.kind == ParamKind::FixedList {
                    format!("{} events of", p.size)
                } else {
                    "an event of".to_string()
                };
                out.push(
                    &MISSING_PRODUCER,
                    self,
                    Some(si),
                    Some(pi),
                    format!(
                        "`{}` waits for {what} {}, but {detail}; the step can never run",
                        s.name,
                        self.names(&candidates)
                    ),
                    "R1 / DESIGN §4.3: a step is ready only when every required parameter has a matching event and every fixed list has N; with no producer the run stalls here",
                    format!(
                        "add the producing step (a step with {}), declare the event as arriving from outside by deriving it from StartEvent or a *InTheLoopResponseEvent, or make the parameter `optional` if the step can do without it",
                        // A union parameter is fed by any one of its member types.
                        match candidates.as_slice() {
                            [one] => format!("`outputs: [{}]`", self.name(*one)),
                            many => format!("one of {} among its `outputs`", self.names(many)),
                        }
                    ),
                );
            }
        }
        self.missing = missing;
    }

    fn never_true_preconditions(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            if !self.never_true[si] {
                continue;
            }
            let name = s.precondition.as_ref().map_or("", |p| p.name.as_str());
            out.push(
                &PRECONDITION_NEVER_TRUE,
                self,
                Some(si),
                None,
                format!(
                    "precondition `{name}` can never be true given the step's parameter kinds; the step never runs"
                ),
                "R5 / DESIGN §4.3: the precondition is the last readiness check and is re-evaluated only when an input of the step arrives; if it is always false the step is skipped every time and everything downstream stalls",
                "make the condition satisfiable: a required parameter binds exactly one event and an optional one at most one, so use `present:`/`count_at_least:` on a list or fixed list, or remove the precondition".to_string(),
            );
        }
    }

    fn unreachable_steps(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            if self.runs[si] || self.never_true[si] {
                continue;
            }
            let explained_missing = (0..s.params.len()).any(|pi| self.missing.contains(&(si, pi)));
            let blocked_by_terminal = s.params.iter().any(|p| {
                Self::blocking(p.kind)
                    && p.types
                        .iter()
                        .all(|t| self.spec.type_info(*t).kind.is_terminal())
            });
            if explained_missing || blocked_by_terminal {
                continue;
            }
            let has = |ts: &[TypeId]| ts.iter().any(|t| self.available[*t as usize]);
            let (param, message) = if s.params.is_empty() {
                (
                    None,
                    format!(
                        "`{}` has no event parameters, so no event ever makes it a candidate",
                        s.name
                    ),
                )
            } else if let Some((pi, p)) = s
                .params
                .iter()
                .enumerate()
                .find(|(_, p)| Self::blocking(p.kind) && !has(&p.types))
            {
                let mut prods: Vec<usize> = p
                    .types
                    .iter()
                    .flat_map(|t| self.producers[*t as usize].iter().copied())
                    .collect();
                prods.sort_unstable();
                prods.dedup();
                (
                    Some(pi),
                    format!(
                        "no path from a start event reaches `{}`: parameter `{}` waits for {}, whose producers ({}) never run themselves",
                        s.name,
                        p.name,
                        self.names(&p.types),
                        self.step_names(&prods)
                    ),
                )
            } else {
                let all: Vec<TypeId> = s
                    .params
                    .iter()
                    .flat_map(|p| p.types.iter().copied())
                    .collect();
                (
                    None,
                    format!(
                        "no path from a start event reaches `{}`: none of its parameter types ({}) is ever dispatched",
                        s.name,
                        self.names(&all)
                    ),
                )
            };
            out.push(
                &UNREACHABLE_STEP,
                self,
                Some(si),
                param,
                message,
                "DESIGN §4.1, R1: a step becomes a candidate only when an event of one of its parameter types is appended and runs only with all required inputs present; no chain of steps starting from an outside arrival (start events, in-the-loop responses) produces them",
                "connect the step: have a reachable step return one of its parameter types, or give it a parameter typed with the start event; otherwise delete it".to_string(),
            );
        }
    }

    fn unbounded_cycles(&self, out: &mut Out) {
        let ns = self.spec.steps.len();
        // Nodes 0..ns are steps, ns.. are types: step -> type it returns, type -> step that
        // takes it. Linear in the spec (a type with P producers and C consumers is P + C
        // edges, not P x C). Fixed lists are left out: they bind the first N events and
        // later arrivals bind nothing new (§4.4), so they cannot sustain a loop.
        let mut edges: Vec<Vec<usize>> = vec![Vec::new(); ns + self.spec.types.len()];
        for (si, o) in self.outs.iter().enumerate() {
            for &t in o {
                if self.dispatchable(t) {
                    edges[si].push(ns + t as usize);
                }
            }
        }
        for (si, st) in self.spec.steps.iter().enumerate() {
            for p in st.params.iter().filter(|p| p.kind != ParamKind::FixedList) {
                for &t in &p.types {
                    if self.dispatchable(t) {
                        edges[ns + t as usize].push(si);
                    }
                }
            }
        }
        for e in &mut edges {
            e.sort_unstable();
            e.dedup();
        }
        for nodes in strongly_connected(&edges) {
            // A cycle always passes through a type, so a one-node component is acyclic.
            if nodes.len() < 2 {
                continue;
            }
            let comp: Vec<usize> = nodes.iter().copied().filter(|&x| x < ns).collect();
            let via: Vec<TypeId> = nodes
                .iter()
                .filter(|&&x| x >= ns)
                .map(|&x| (x - ns) as TypeId)
                .collect();
            let bounded = comp.iter().any(|&s| {
                let st = &self.spec.steps[s];
                st.max_executions_per_run.is_some() || st.precondition.is_some()
            });
            if bounded {
                continue;
            }
            let what = if comp.len() == 1 {
                format!("`{}` triggers itself", self.spec.steps[comp[0]].name)
            } else {
                format!("steps {} trigger each other", self.step_names(&comp))
            };
            out.push(
                &UNBOUNDED_CYCLE,
                self,
                Some(comp[0]),
                None,
                format!(
                    "{what} through {}, and none of them has a precondition or max_executions_per_run",
                    self.names(&via)
                ),
                "R2 / DESIGN §4.3, §4.5: every returned event is new (a fresh id), so it forms a new input set and re-triggers its consumers; without a bound the loop runs forever",
                format!(
                    "bound the loop: set `max_executions_per_run` on `{}` or give it a precondition that ends the loop (e.g. an iteration count)",
                    self.spec.steps[comp[0]].name
                ),
            );
        }
    }

    fn foreign_precondition_reads(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            let Some(pc) = &s.precondition else { continue };
            let taken: BTreeSet<TypeId> = s
                .params
                .iter()
                .flat_map(|p| p.types.iter().copied())
                .collect();
            let mut foreign: Vec<TypeId> = pc
                .reads
                .iter()
                .copied()
                .filter(|t| !taken.contains(t))
                .collect();
            foreign.dedup();
            if foreign.is_empty() {
                continue;
            }
            out.push(
                &PRECONDITION_FOREIGN_READ,
                self,
                Some(si),
                None,
                format!(
                    "precondition `{}` reads {}, which `{}` does not take",
                    pc.name,
                    self.names(&foreign),
                    s.name
                ),
                "DESIGN §3, R5: a precondition sees only the step's own bound inputs; an event type read only by a precondition never causes candidacy (§4.1), so the precondition cannot see it and the step may never become ready",
                format!(
                    "add a parameter to `{}` for {} (optional if the step can run without it), or stop reading it in the precondition",
                    s.name,
                    self.names(&foreign)
                ),
            );
        }
    }

    fn dangling_stops(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            let mut groups: Vec<(Vec<TypeId>, &'static str)> = s
                .returns_together
                .iter()
                .map(|g| (g.clone(), "returns_together"))
                .collect();
            if let Some(b) = self
                .spec
                .source
                .simulation
                .as_ref()
                .and_then(|sim| sim.behaviour.get(&s.name))
                .filter(|_| self.spec.step_index(&s.name) == Some(si as u32))
            {
                let resolve = |names: &[String]| -> Vec<TypeId> {
                    names.iter().filter_map(|n| self.spec.type_id(n)).collect()
                };
                if let Some(e) = &b.emit {
                    groups.push((resolve(e), "simulation.behaviour.emit"));
                }
                for x in b.executions.values() {
                    if let crate::spec::ExecutionBehaviour::Emit(e) = x {
                        groups.push((resolve(e), "simulation.behaviour.executions"));
                    }
                }
            }
            let mut seen: BTreeSet<Vec<TypeId>> = BTreeSet::new();
            for (g, origin) in groups {
                let terminal: Vec<TypeId> = g
                    .iter()
                    .copied()
                    .filter(|t| self.spec.type_info(*t).kind.is_terminal())
                    .collect();
                let control = g
                    .iter()
                    .filter(|t| self.spec.type_info(**t).kind.is_control())
                    .count();
                if terminal.is_empty() || control < 2 {
                    continue;
                }
                let mut key = g.clone();
                key.sort_unstable();
                if !seen.insert(key) {
                    continue;
                }
                out.push(
                    &DANGLING_STOP,
                    self,
                    Some(si),
                    None,
                    format!(
                        "`{}` returns [{}] in one result ({origin}): the stop event {} comes with other control events",
                        s.name,
                        self.names(&g),
                        self.names(&terminal)
                    ),
                    "R4 / DESIGN §4.7: the stop event terminates the run; control events returned with it are either dispatched to steps whose results arrive after the stop, or appended after it and kept only as after-stop evidence",
                    "return the stop event alone: emit the other events from an earlier step (and let the stop-returning step consume them), or make them display events".to_string(),
                );
            }
        }
    }

    fn fixed_list_overcounts(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            for (pi, p) in s.params.iter().enumerate() {
                if p.kind != ParamKind::FixedList || self.missing.contains(&(si, pi)) {
                    continue;
                }
                let mut capacity: u64 = 0;
                let mut known = true;
                let mut parts: Vec<String> = Vec::new();
                for &t in &p.types {
                    if !self.dispatchable(t) {
                        continue;
                    }
                    if self.outside[t as usize] {
                        known = false;
                        break;
                    }
                    for &prod in &self.producers[t as usize] {
                        let ps = &self.spec.steps[prod];
                        // A step that returns a list of the type (`max: unbounded`, a `Vec`
                        // result) can fill any fixed list: no count to prove.
                        let Some(mult) = ps.max_per_execution(t) else {
                            known = false;
                            break;
                        };
                        let Some(max) = ps.max_executions_per_run else {
                            known = false;
                            break;
                        };
                        let mult = mult.max(1);
                        capacity += u64::from(max) * mult;
                        parts.push(format!(
                            "`{}` ({max} execution{} × {mult} `{}`)",
                            ps.name,
                            if max == 1 { "" } else { "s" },
                            self.name(t)
                        ));
                    }
                    if !known {
                        break;
                    }
                }
                if !known || capacity == 0 || u64::from(p.size) <= capacity {
                    continue;
                }
                out.push(
                    &FIXED_LIST_OVERCOUNT,
                    self,
                    Some(si),
                    Some(pi),
                    format!(
                        "the fixed list waits for {} events, but its producers can emit at most {capacity} in a run: {}",
                        p.size,
                        capped_join(parts.iter().cloned(), parts.len())
                    ),
                    "R1 / DESIGN §4.3: a fixed list is ready only with N matching events; the producers' max_executions_per_run caps how many can ever exist, so the step never runs",
                    format!(
                        "set `size: {capacity}` to match the producers, add the missing producers, or, if a producer returns several per execution, say so in its `outputs` (`{{event: {}, max: N}}`, or `max: unbounded` for a list)",
                        p.types.first().map_or("", |t| self.name(*t))
                    ),
                );
            }
        }
    }

    // ---- warnings --------------------------------------------------------------------

    fn optional_traps(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            if s.precondition.is_some() || s.max_executions_per_run.is_some() {
                continue;
            }
            let required: Vec<&str> = s
                .params
                .iter()
                .filter(|p| p.kind != ParamKind::Optional)
                .map(|p| p.name.as_str())
                .collect();
            for (pi, p) in s.params.iter().enumerate() {
                if p.kind != ParamKind::Optional {
                    continue;
                }
                let first = match required.len() {
                    0 => "any of its inputs arrives".to_string(),
                    1 => format!("`{}` is present", required[0]),
                    _ => format!(
                        "{} are present",
                        required
                            .iter()
                            .map(|r| format!("`{r}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                };
                out.push(
                    &OPTIONAL_TRAP,
                    self,
                    Some(si),
                    Some(pi),
                    format!(
                        "`{}` runs as soon as {first}, with `{}` = none, and again when {} arrives",
                        s.name,
                        p.name,
                        self.names(&p.types)
                    ),
                    "R1 + R2 / DESIGN §4.3, §4.4: optional parameters never block, so the step fires on minimum viable input; a later event for the optional parameter forms a new input set and re-runs the step",
                    format!(
                        "add a precondition that waits for it (`precondition: {{name: wait_for_{0}, reads: [{1}], when: {{present: {0}}}}}`), set `max_executions_per_run: 1` if one run is enough, or make `{0}` required if it always arrives",
                        p.name,
                        // The precondition reads whichever member of a union arrives.
                        p.types
                            .iter()
                            .map(|t| self.name(*t))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
            }
        }
    }

    fn list_reruns(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            if s.precondition.is_some() {
                continue;
            }
            for (pi, p) in s.params.iter().enumerate() {
                if p.kind != ParamKind::List {
                    continue;
                }
                out.push(
                    &LIST_RERUNS,
                    self,
                    Some(si),
                    Some(pi),
                    format!(
                        "`{}` runs again on every arrival of {}, each time with the list so far",
                        s.name,
                        self.names(&p.types)
                    ),
                    "R3 + R2 / DESIGN §4.3, §4.4: a list never blocks and binds all matching events at trigger time; each new event changes the input set and re-runs the step",
                    format!(
                        "if the count is known, make it `kind: fixed_list` with `size: N`; otherwise add a precondition such as `when: {{count_at_least: {{param: {}, n: N}}}}`",
                        p.name
                    ),
                );
            }
        }
    }

    fn same_type_two_params(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            for (j, q) in s.params.iter().enumerate() {
                for p in &s.params[..j] {
                    let shared: Vec<TypeId> = q
                        .types
                        .iter()
                        .copied()
                        .filter(|t| p.types.contains(t))
                        .collect();
                    if shared.is_empty() {
                        continue;
                    }
                    out.push(
                        &SAME_TYPE_TWO_PARAMS,
                        self,
                        Some(si),
                        Some(j),
                        format!(
                            "parameters `{}` and `{}` both take {}",
                            p.name,
                            q.name,
                            self.names(&shared)
                        ),
                        "DESIGN §4.4: each single parameter binds the trigger or the latest matching event, so both parameters can bind the same event; which one gets which is decided by arrival, not by meaning",
                        "take the events once: one `list` or `fixed_list` parameter (`size: 2`), or give each stage its own event type".to_string(),
                    );
                }
            }
        }
    }

    fn double_dips(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            // A type shared by several parameters is reported once per step (SAAP012 covers
            // the sharing itself).
            let mut reported: BTreeSet<TypeId> = BTreeSet::new();
            for (pi, p) in s.params.iter().enumerate() {
                let own: Vec<TypeId> = p
                    .types
                    .iter()
                    .copied()
                    .filter(|t| self.dispatchable(*t) && self.outs[si].contains(t))
                    .collect();
                if !own.is_empty() {
                    out.push(
                        &DOUBLE_DIP,
                        self,
                        Some(si),
                        Some(pi),
                        format!(
                            "`{}` takes {} and also returns it: its own output re-triggers it and competes with the upstream event",
                            s.name,
                            self.names(&own)
                        ),
                        "R2 / DESIGN §4.1, §4.4: the returned event is a new event of a type the step takes, so it makes the step (and every other consumer) a candidate again and becomes the latest binding",
                        "give each logical stage its own event type (e.g. `Stage1Result`, `Stage2Result`)".to_string(),
                    );
                }
                if !matches!(p.kind, ParamKind::Required | ParamKind::Optional) {
                    continue;
                }
                let mut shared: Vec<TypeId> = Vec::new();
                let mut sources: Vec<String> = Vec::new();
                for &t in &p.types {
                    if !self.dispatchable(t) || !reported.insert(t) {
                        continue;
                    }
                    // The step's own output is the self-consumption finding above.
                    let prods = &self.producers[t as usize];
                    let others = prods.len() - usize::from(prods.binary_search(&si).is_ok());
                    let count = others + usize::from(self.outside[t as usize]);
                    if count < 2 {
                        continue;
                    }
                    shared.push(t);
                    let mut src = capped_list(
                        prods
                            .iter()
                            .filter(|&&x| x != si)
                            .map(|&x| self.spec.steps[x].name.as_str()),
                        others,
                    );
                    if self.outside[t as usize] {
                        if !src.is_empty() {
                            src.push_str(", ");
                        }
                        src.push_str("outside arrivals");
                    }
                    sources.push(src);
                }
                if shared.is_empty() {
                    continue;
                }
                let sources = if shared.len() == 1 {
                    sources.join("")
                } else {
                    shared
                        .iter()
                        .zip(&sources)
                        .map(|(t, src)| format!("`{}`: {src}", self.name(*t)))
                        .collect::<Vec<_>>()
                        .join("; ")
                };
                out.push(
                    &DOUBLE_DIP,
                    self,
                    Some(si),
                    Some(pi),
                    format!(
                        "{} is produced by several stages ({}); `{}` runs once per event and binds whichever arrived last",
                        self.names(&shared),
                        sources,
                        s.name
                    ),
                    "R2 / DESIGN §4.1, §4.4: every event of the type makes the step a candidate and a single parameter binds the trigger or the latest event, so the step fires for each stage and cannot tell them apart",
                    "give each stage its own event type; if the events are parts to join, take them with a `fixed_list` (or a `list` with a precondition)".to_string(),
                );
            }
        }
    }

    fn parent_typed_params(&self, out: &mut Out) {
        let mut emitted: BTreeSet<TypeId> = self.outs.iter().flatten().copied().collect();
        if let Some(sim) = &self.spec.source.simulation {
            emitted.extend(
                sim.arrivals
                    .iter()
                    .filter_map(|a| self.spec.type_id(&a.event)),
            );
        }
        // Ancestor -> its emitted, dispatchable proper subtypes (in type order).
        let mut subs_of: BTreeMap<TypeId, Vec<TypeId>> = BTreeMap::new();
        for &e in emitted.iter().filter(|&&e| self.dispatchable(e)) {
            for a in self
                .spec
                .hierarchy
                .lineage(self.name(e))
                .unwrap_or_default()
            {
                match self.spec.type_id(a) {
                    Some(a) if a != e => subs_of.entry(a).or_default().push(e),
                    _ => {}
                }
            }
        }
        for (si, s) in self.spec.steps.iter().enumerate() {
            for (pi, p) in s.params.iter().enumerate() {
                for &parent in &p.types {
                    if self.spec.type_info(parent).kind.is_terminal() {
                        continue;
                    }
                    let pname = self.name(parent);
                    let subs: Vec<TypeId> = subs_of
                        .get(&parent)
                        .map(|v| v.iter().copied().filter(|t| !p.types.contains(t)).collect())
                        .unwrap_or_default();
                    if subs.is_empty() {
                        continue;
                    }
                    out.push(
                        &PARENT_TYPED_PARAM,
                        self,
                        Some(si),
                        Some(pi),
                        format!(
                            "the parameter takes `{pname}`, but what is produced or arrives is its subtype {}, which will not match",
                            self.names(&subs)
                        ),
                        "DESIGN §4.1: candidacy and binding match the exact event name; a subtype does not match a parameter typed with its parent",
                        format!(
                            "list every concrete type the parameter accepts: `types: [{}]`",
                            p.types
                                .iter()
                                .chain(subs.iter())
                                .map(|t| self.name(*t))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    );
                }
            }
        }
    }

    fn no_path_to_stop(&self, out: &mut Out) {
        let ends = self.leads_to_end();
        for (si, s) in self.spec.steps.iter().enumerate() {
            if !self.could_run[si] || ends[si] {
                continue;
            }
            let message = if self.outs[si].is_empty() {
                format!(
                    "`{}` returns no events, so no stop event can follow from it",
                    s.name
                )
            } else {
                format!(
                    "nothing `{}` returns ({}) leads to a stop event",
                    s.name,
                    self.names(&self.outs[si])
                )
            };
            out.push(
                &NO_PATH_TO_STOP,
                self,
                Some(si),
                None,
                message,
                "DESIGN §4.7 (termination): a run ends only when a stop or exception event is appended; a branch that never leads to one leaves the run open, holding its RunContext and bookkeeping until something else stops it",
                "make the branch end: have this step (or a step downstream of it) return a stop event, or feed its result into a step that does".to_string(),
            );
        }
    }

    fn display_only_inputs(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            for (pi, p) in s.params.iter().enumerate() {
                if self.missing.contains(&(si, pi)) {
                    continue;
                }
                let never: Vec<TypeId> = p
                    .types
                    .iter()
                    .copied()
                    .filter(|t| !self.spec.type_info(*t).kind.is_control())
                    .collect();
                if never.is_empty() {
                    continue;
                }
                out.push(
                    &DISPLAY_ONLY_INPUT,
                    self,
                    Some(si),
                    Some(pi),
                    format!(
                        "{} {} not a control event: it never triggers `{}` and never binds",
                        self.names(&never),
                        if never.len() == 1 { "is" } else { "are" },
                        s.name
                    ),
                    "DESIGN §4.1: display-only events are published for the UI and never cause candidacy or enter the run's view",
                    "declare the event with `parents: [ControlAndDisplayEvent]` if it should both show and drive steps, or remove it from the parameter".to_string(),
                );
            }
        }
    }
}

/// At most this many names are listed in one message.
const MAX_LISTED: usize = 8;

/// "`a`, `b`, `c`", or "`a`, …, `h` and 5 more" past [`MAX_LISTED`].
fn capped_list<'n>(names: impl Iterator<Item = &'n str>, len: usize) -> String {
    capped_join(names.map(|n| format!("`{n}`")), len)
}

/// Joins the first [`MAX_LISTED`] items with ", ", adding "and N more" for the rest.
fn capped_join(items: impl Iterator<Item = String>, len: usize) -> String {
    let mut s: Vec<String> = items.take(MAX_LISTED).collect();
    if len > MAX_LISTED {
        s.push(format!("and {} more", len - MAX_LISTED));
    }
    s.join(", ")
}

/// Strongly connected components of a graph given as adjacency lists, each component's
/// members sorted, components ordered by their smallest member. Iterative Tarjan.
fn strongly_connected(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = edges.len();
    const UNSEEN: usize = usize::MAX;
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut comps: Vec<Vec<usize>> = Vec::new();
    let mut next = 0usize;
    for root in 0..n {
        if index[root] != UNSEEN {
            continue;
        }
        // (node, next edge position)
        let mut call: Vec<(usize, usize)> = vec![(root, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut ei)) = call.last_mut() {
            if let Some(&w) = edges[v].get(*ei) {
                *ei += 1;
                if index[w] == UNSEEN {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    call.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                call.pop();
                if let Some(&(parent, _)) = call.last() {
                    low[parent] = low[parent].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut comp = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        comp.push(w);
                        if w == v {
                            break;
                        }
                    }
                    comp.sort_unstable();
                    comps.push(comp);
                }
            }
        }
    }
    comps.sort_by_key(|c| c[0]);
    comps
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::load::SpecSyntax;

    fn spec(yaml: &str) -> CompiledSpec {
        crate::compile_spec_text(yaml, SpecSyntax::Yaml).unwrap()
    }

    fn codes(yaml: &str) -> Vec<(&'static str, Option<String>, Option<String>)> {
        check(&spec(yaml))
            .into_iter()
            .map(|f| (f.code, f.step, f.param))
            .collect()
    }

    fn has(yaml: &str, rule: &Rule, step: &str, param: Option<&str>) -> bool {
        check(&spec(yaml)).iter().any(|f| {
            f.code == rule.code && f.step.as_deref() == Some(step) && f.param.as_deref() == param
        })
    }

    fn count(yaml: &str, rule: &Rule) -> usize {
        check(&spec(yaml))
            .iter()
            .filter(|f| f.code == rule.code)
            .count()
    }

    /// start → a → stop, nothing else: the base every test varies.
    const CLEAN: &str = "
name: clean
events: [{name: A}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A]}
  - {name: last, params: [{name: a, kind: required, types: [A]}], outputs: [StopEvent]}
";

    #[test]
    fn clean_spec_has_no_findings() {
        assert_eq!(codes(CLEAN), vec![]);
    }

    #[test]
    fn rules_table_is_complete_and_ordered() {
        let mut seen = BTreeSet::new();
        for (i, r) in RULES.iter().enumerate() {
            assert_eq!(r.code, format!("SAAP{:03}", i + 1));
            assert!(seen.insert(r.rule), "duplicate slug {}", r.rule);
        }
    }

    #[test]
    fn findings_are_sorted_errors_first_and_deterministic() {
        let y = "
name: w
events: [{name: A}, {name: B}, {name: Z}]
steps:
  - {name: s, params: [{name: q, kind: required, types: [UserMessageEvent]}, {name: b, kind: optional, types: [B]}], outputs: [A]}
  - {name: t, params: [{name: z, kind: required, types: [Z]}], outputs: [StopEvent]}
  - {name: u, params: [{name: a, kind: required, types: [A]}], outputs: [B, StopEvent]}
";
        let a = check(&spec(y));
        let b = check(&spec(y));
        assert_eq!(a, b);
        let sev: Vec<Severity> = a.iter().map(|f| f.severity).collect();
        let mut sorted = sev.clone();
        sorted.sort();
        assert_eq!(sev, sorted);
        assert_eq!(a[0].code, "SAAP002");
    }

    // SAAP001
    #[test]
    fn unreachable_step_is_an_error() {
        // `orphan` waits for B, produced only by `loop_b`, which waits for C, produced only
        // by `orphan`: both have producers, neither is reachable from the start.
        let y = "
name: w
events: [{name: A}, {name: B}, {name: C}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [StopEvent]}
  - {name: orphan, params: [{name: b, kind: required, types: [B]}], outputs: [C], max_executions_per_run: 1}
  - {name: loop_b, params: [{name: c, kind: required, types: [C]}], outputs: [B]}
";
        assert!(has(y, &UNREACHABLE_STEP, "orphan", Some("b")));
        assert!(has(y, &UNREACHABLE_STEP, "loop_b", Some("c")));
        assert_eq!(count(y, &MISSING_PRODUCER), 0);
    }

    #[test]
    fn step_without_event_params_is_unreachable() {
        let y = format!("{CLEAN}  - {{name: idle, outputs: [A]}}\n");
        assert!(has(&y, &UNREACHABLE_STEP, "idle", None));
    }

    #[test]
    fn reachable_steps_are_not_unreachable() {
        assert_eq!(count(CLEAN, &UNREACHABLE_STEP), 0);
    }

    #[test]
    fn in_the_loop_responses_arrive_from_outside() {
        let y = "
name: w
steps:
  - {name: ask, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [HumanInTheLoopInputRequestEvent]}
  - {name: answer, params: [{name: r, kind: required, types: [HumanInTheLoopInputResponseEvent]}], outputs: [StopEvent]}
";
        assert_eq!(codes(y), vec![]);
    }

    // SAAP002
    #[test]
    fn missing_producer_is_an_error() {
        let y = "
name: w
events: [{name: Hints}]
steps:
  - {name: answer, params: [{name: q, kind: required, types: [UserMessageEvent]}, {name: h, kind: required, types: [Hints]}], outputs: [StopEvent]}
";
        assert!(has(y, &MISSING_PRODUCER, "answer", Some("h")));
        // Not also reported as unreachable: SAAP002 explains it.
        assert_eq!(count(y, &UNREACHABLE_STEP), 0);
    }

    #[test]
    fn missing_producer_of_a_union_fix_names_every_member_and_optional_trap_reads_them_all() {
        let y = "
name: w
events: [{name: Yes}, {name: No}]
steps:
  - {name: decide, params: [{name: q, kind: required, types: [UserMessageEvent]}, {name: v, kind: required, types: [Yes, No]}], outputs: [StopEvent]}
  - {name: hint, params: [{name: q, kind: required, types: [UserMessageEvent]}, {name: o, kind: optional, types: [Yes, No]}], outputs: [StopEvent]}
";
        let findings = check(&spec(y));
        let missing = findings
            .iter()
            .find(|f| f.code == MISSING_PRODUCER.code)
            .expect("SAAP002 for the union parameter");
        assert!(
            missing
                .fix
                .contains("one of `Yes`, `No` among its `outputs`"),
            "{}",
            missing.fix
        );
        let trap = findings
            .iter()
            .find(|f| f.code == OPTIONAL_TRAP.code)
            .expect("the optional trap of the union parameter");
        assert!(trap.fix.contains("reads: [Yes, No]"), "{}", trap.fix);
    }

    #[test]
    fn missing_producer_notes_a_simulated_outside_arrival() {
        let y = "
name: w
events: [{name: Webhook}]
steps:
  - {name: on_hook, params: [{name: h, kind: required, types: [Webhook]}, {name: q, kind: required, types: [UserMessageEvent]}], outputs: [StopEvent]}
simulation:
  arrivals: [{event: UserMessageEvent}, {event: Webhook}]
";
        let f = check(&spec(y));
        let m = f.iter().find(|f| f.code == "SAAP002").unwrap();
        assert!(
            m.message
                .contains("the simulation section delivers `Webhook`"),
            "{}",
            m.message
        );
    }

    #[test]
    fn missing_producer_applies_to_fixed_lists_not_to_optionals_or_lists() {
        let y = "
name: w
events: [{name: P}]
steps:
  - name: s
    params:
      - {name: q, kind: required, types: [UserMessageEvent]}
      - {name: o, kind: optional, types: [P]}
      - {name: l, kind: list, types: [P]}
      - {name: f, kind: fixed_list, types: [P], size: 2}
    outputs: [StopEvent]
    max_executions_per_run: 1
    precondition: {name: p}
";
        let c = codes(y);
        let missing: Vec<_> = c.iter().filter(|x| x.0 == "SAAP002").collect();
        assert_eq!(missing.len(), 1, "{c:?}");
        assert_eq!(missing[0].2.as_deref(), Some("f"));
    }

    #[test]
    fn produced_required_input_is_not_missing() {
        assert_eq!(count(CLEAN, &MISSING_PRODUCER), 0);
    }

    #[test]
    fn display_only_producer_does_not_count() {
        let y = "
name: w
events: [{name: Shown, parents: [DisplayEvent]}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Shown, StopEvent]}
  - {name: never, params: [{name: s, kind: required, types: [Shown]}], outputs: [StopEvent]}
";
        assert!(has(y, &MISSING_PRODUCER, "never", Some("s")));
        assert_eq!(count(y, &DISPLAY_ONLY_INPUT), 0);
    }

    // SAAP003
    #[test]
    fn step_taking_a_stop_event_is_an_error() {
        let y = format!(
            "{CLEAN}  - {{name: after, params: [{{name: s, kind: required, types: [StopEvent]}}], outputs: [A]}}\n"
        );
        assert!(has(&y, &TERMINAL_INPUT, "after", Some("s")));
        assert_eq!(count(&y, &UNREACHABLE_STEP), 0);
    }

    #[test]
    fn step_taking_an_exception_event_is_an_error() {
        let y = format!(
            "{CLEAN}  - {{name: on_error, params: [{{name: e, kind: optional, types: [ExceptionEvent]}}, {{name: q, kind: required, types: [UserMessageEvent]}}], outputs: [StopEvent], max_executions_per_run: 1}}\n"
        );
        assert!(has(&y, &TERMINAL_INPUT, "on_error", Some("e")));
    }

    #[test]
    fn no_terminal_inputs_in_clean_spec() {
        assert_eq!(count(CLEAN, &TERMINAL_INPUT), 0);
    }

    // SAAP004
    #[test]
    fn unbounded_cycle_is_an_error() {
        let y = "
name: w
events: [{name: Ping}, {name: Pong}]
steps:
  - {name: start, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Ping]}
  - {name: ping, params: [{name: p, kind: required, types: [Ping]}], outputs: [Pong]}
  - {name: pong, params: [{name: p, kind: required, types: [Pong]}], outputs: [Ping, StopEvent]}
";
        assert!(has(y, &UNBOUNDED_CYCLE, "ping", None));
        assert_eq!(count(y, &UNBOUNDED_CYCLE), 1);
    }

    #[test]
    fn cycle_with_a_bound_is_clean() {
        let y = "
name: w
events: [{name: Ping}, {name: Pong}]
steps:
  - {name: start, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Ping]}
  - {name: ping, params: [{name: p, kind: required, types: [Ping]}], outputs: [Pong], max_executions_per_run: 5}
  - {name: pong, params: [{name: p, kind: required, types: [Pong]}], outputs: [Ping, StopEvent]}
";
        assert_eq!(count(y, &UNBOUNDED_CYCLE), 0);
    }

    #[test]
    fn self_loop_is_a_cycle_but_not_through_a_fixed_list() {
        let y = "
name: w
events: [{name: A}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A]}
  - {name: again, params: [{name: a, kind: required, types: [A]}], outputs: [A, StopEvent]}
";
        assert!(has(y, &UNBOUNDED_CYCLE, "again", None));
        let fixed = y.replace(
            "kind: required, types: [A]",
            "kind: fixed_list, size: 2, types: [A]",
        );
        assert_eq!(count(&fixed, &UNBOUNDED_CYCLE), 0);
    }

    // SAAP005
    #[test]
    fn no_start_consumer_is_an_error() {
        let y = "
name: w
events: [{name: A}]
steps:
  - {name: only, params: [{name: a, kind: required, types: [A]}], outputs: [StopEvent]}
";
        let f = check(&spec(y));
        assert!(f.iter().any(|f| f.code == "SAAP005" && f.step.is_none()));
    }

    #[test]
    fn start_consumer_present_is_clean() {
        assert_eq!(count(CLEAN, &NO_START_CONSUMER), 0);
    }

    // SAAP006
    #[test]
    fn duplicate_step_names_are_an_error() {
        let y = format!(
            "{CLEAN}  - {{name: last, params: [{{name: a, kind: required, types: [A]}}], outputs: [StopEvent]}}\n"
        );
        let f: Vec<Finding> = check(&spec(&y))
            .into_iter()
            .filter(|f| f.code == "SAAP006")
            .collect();
        assert_eq!(f.len(), 1);
        assert!(f[0].message.contains("steps[2]"), "{}", f[0].message);
    }

    #[test]
    fn distinct_step_names_are_clean() {
        assert_eq!(count(CLEAN, &DUPLICATE_STEP), 0);
    }

    // SAAP007
    #[test]
    fn precondition_reading_a_foreign_type_is_an_error() {
        let y = "
name: w
events: [{name: A}, {name: B}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A, B]}
  - name: last
    params: [{name: a, kind: required, types: [A]}]
    outputs: [StopEvent]
    precondition: {name: b_seen, reads: [B]}
";
        assert!(has(y, &PRECONDITION_FOREIGN_READ, "last", None));
        let ok = y.replace("reads: [B]", "reads: [A]");
        assert_eq!(count(&ok, &PRECONDITION_FOREIGN_READ), 0);
    }

    // SAAP008
    #[test]
    fn dangling_stop_is_an_error() {
        let y = "
name: w
events: [{name: Note}, {name: Shown, parents: [DisplayEvent]}]
steps:
  - name: first
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Note, StopEvent]
    returns_together: [[Note, StopEvent]]
  - {name: log, params: [{name: n, kind: required, types: [Note]}], outputs: [StopEvent]}
";
        assert!(has(y, &DANGLING_STOP, "first", None));
    }

    #[test]
    fn stop_returned_alone_or_with_display_events_is_clean() {
        let y = "
name: w
events: [{name: Shown, parents: [DisplayEvent]}]
steps:
  - name: first
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Shown, StopEvent]
    returns_together: [[Shown, StopEvent]]
";
        assert_eq!(count(y, &DANGLING_STOP), 0);
        // `outputs` lists alternatives, not one result: no finding either.
        assert_eq!(count(CLEAN, &DANGLING_STOP), 0);
    }

    #[test]
    fn dangling_stop_in_simulation_behaviour_is_an_error() {
        let y = format!(
            "{CLEAN}simulation:\n  arrivals: [{{event: UserMessageEvent}}]\n  behaviour:\n    last: {{emit: [A, StopEvent]}}\n"
        );
        assert!(has(&y, &DANGLING_STOP, "last", None));
    }

    // SAAP009
    #[test]
    fn fixed_list_count_mismatch_is_an_error() {
        let y = "
name: w
events: [{name: Part}]
steps:
  - {name: a, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Part], max_executions_per_run: 1}
  - {name: b, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Part], max_executions_per_run: 1}
  - {name: join, params: [{name: parts, kind: fixed_list, size: 3, types: [Part]}], outputs: [StopEvent]}
";
        assert!(has(y, &FIXED_LIST_OVERCOUNT, "join", Some("parts")));
        let ok = y.replace("size: 3", "size: 2");
        assert_eq!(count(&ok, &FIXED_LIST_OVERCOUNT), 0);
    }

    #[test]
    fn fixed_list_count_unknown_without_execution_limits_is_clean() {
        let y = "
name: w
events: [{name: Part}]
steps:
  - {name: a, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Part]}
  - {name: join, params: [{name: parts, kind: fixed_list, size: 3, types: [Part]}], outputs: [StopEvent]}
";
        assert_eq!(count(y, &FIXED_LIST_OVERCOUNT), 0);
    }

    #[test]
    fn fixed_list_capacity_counts_returns_together_multiplicity() {
        let y = "
name: w
events: [{name: Part}]
steps:
  - {name: a, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Part], returns_together: [[Part, Part, Part]], max_executions_per_run: 1}
  - {name: join, params: [{name: parts, kind: fixed_list, size: 3, types: [Part]}], outputs: [StopEvent]}
";
        assert_eq!(count(y, &FIXED_LIST_OVERCOUNT), 0);
        assert_eq!(
            count(&y.replace("size: 3", "size: 4"), &FIXED_LIST_OVERCOUNT),
            1
        );
    }

    /// Issue 19's triage agent as its macros write it: `intake` returns a `Vec` of a union
    /// (a Ticket and three Opinions), `decide` joins three Opinions with an optional
    /// Priority behind a precondition.
    const TRIAGE: &str = "
name: Triage
events: [{name: Ticket}, {name: Opinion}, {name: Priority}, {name: Triaged, kind: stop}]
steps:
  - name: intake
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [{event: Ticket, max: unbounded}, {event: Opinion, max: unbounded}]
    max_executions_per_run: 1
  - name: prioritize
    params: [{name: ticket, kind: required, types: [Ticket]}]
    outputs: [Priority]
    max_executions_per_run: 1
  - name: decide
    params:
      - {name: ops, kind: fixed_list, size: 3, types: [Opinion]}
      - {name: prio, kind: optional, types: [Priority]}
    outputs: [Triaged]
    max_executions_per_run: 1
    precondition: {name: has_priority, reads: [Opinion, Priority]}
";

    #[test]
    fn an_unbounded_producer_can_fill_a_fixed_list() {
        let f = check(&spec(TRIAGE));
        assert_eq!(summarize(&f).errors, 0, "{f:#?}");
        assert!(f.iter().all(|f| f.code != "SAAP009"), "{f:#?}");
        // The same agent described as if `intake` returned one event of each type is what
        // the issue saw: an error.
        let one_each = TRIAGE.replace(
            "[{event: Ticket, max: unbounded}, {event: Opinion, max: unbounded}]",
            "[Ticket, Opinion]",
        );
        assert!(has(&one_each, &FIXED_LIST_OVERCOUNT, "decide", Some("ops")));
    }

    #[test]
    fn an_output_max_counts_per_execution() {
        let at_most = |n: u32| {
            TRIAGE.replace(
                "{event: Opinion, max: unbounded}",
                &format!("{{event: Opinion, max: {n}}}"),
            )
        };
        assert_eq!(count(&at_most(3), &FIXED_LIST_OVERCOUNT), 0);
        let short = check(&spec(&at_most(2)));
        let f = short
            .iter()
            .find(|f| f.code == "SAAP009")
            .expect("2 per execution, 1 execution, 3 needed");
        assert!(
            f.message
                .contains("at most 2 in a run: `intake` (1 execution × 2 `Opinion`)"),
            "{}",
            f.message
        );
        assert!(f.fix.contains("max: unbounded"), "{}", f.fix);
    }

    #[test]
    fn output_entries_read_and_write_in_both_forms() {
        let s = spec(TRIAGE);
        let intake = &s.source.steps[0];
        assert_eq!(intake.outputs, ["Ticket", "Opinion"]);
        assert_eq!(
            intake.output_max.get("Opinion"),
            Some(&crate::spec::OutputMax::Unbounded)
        );
        assert_eq!(
            s.steps[0].max_per_execution(s.type_id("Opinion").unwrap()),
            None
        );
        assert_eq!(
            s.steps[1].max_per_execution(s.type_id("Priority").unwrap()),
            Some(1)
        );
        let json = serde_json::to_value(&s.source.steps[0]).unwrap();
        assert_eq!(
            json["outputs"],
            serde_json::json!([
                {"event": "Ticket", "max": "unbounded"},
                {"event": "Opinion", "max": "unbounded"}
            ])
        );
        // A plain name is written plain; `{event: X}` without `max` is a plain name.
        let plain = crate::parse_spec(
            "name: a\nsteps: [{name: s, outputs: [A, {event: B}, {event: C, max: 2}]}]\n",
            SpecSyntax::Yaml,
        )
        .unwrap();
        assert_eq!(
            serde_json::to_value(&plain.steps[0].outputs).unwrap(),
            serde_json::json!(["A", "B", "C"])
        );
        assert_eq!(
            serde_json::to_value(&plain.steps[0]).unwrap()["outputs"],
            serde_json::json!(["A", "B", {"event": "C", "max": 2}])
        );
        for bad in ["max: 0", "max: many", "max: -1", "max: 1000001"] {
            let err = crate::parse_spec(
                &format!("name: a\nsteps: [{{name: s, outputs: [{{event: C, {bad}}}]}}]\n"),
                SpecSyntax::Yaml,
            )
            .expect_err(bad);
            assert!(
                err.to_string()
                    .contains("expected a number of events from 1 to 1000000, or `unbounded`"),
                "{bad}: {err}"
            );
        }
        let twice = crate::parse_spec(
            "name: a\nsteps: [{name: s, outputs: [C, {event: C, max: 2}]}]\n",
            SpecSyntax::Yaml,
        )
        .expect_err("listed twice with a max");
        assert!(twice.to_string().contains("list it once"), "{twice}");
    }

    // SAAP010
    #[test]
    fn optional_trap_is_a_warning() {
        let y = "
name: w
events: [{name: A}, {name: B}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A, B]}
  - {name: last, params: [{name: a, kind: required, types: [A]}, {name: b, kind: optional, types: [B]}], outputs: [StopEvent]}
";
        let f = check(&spec(y));
        let trap = f.iter().find(|f| f.code == "SAAP010").unwrap();
        assert_eq!(trap.severity, Severity::Warning);
        assert_eq!(trap.step.as_deref(), Some("last"));
        assert_eq!(trap.param.as_deref(), Some("b"));
    }

    #[test]
    fn optional_trap_with_precondition_is_clean() {
        let y = "
name: w
events: [{name: A}, {name: B}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A, B]}
  - name: last
    params: [{name: a, kind: required, types: [A]}, {name: b, kind: optional, types: [B]}]
    outputs: [StopEvent]
    precondition: {name: wait_b, reads: [B], when: {present: b}}
";
        assert_eq!(codes(y), vec![]);
        let limited = y.replace(
            "precondition: {name: wait_b, reads: [B], when: {present: b}}",
            "max_executions_per_run: 1",
        );
        assert_eq!(count(&limited, &OPTIONAL_TRAP), 0);
    }

    // SAAP011
    #[test]
    fn list_reruns_is_a_warning() {
        let y = "
name: w
events: [{name: R}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [R]}
  - {name: last, params: [{name: rs, kind: list, types: [R]}], outputs: [StopEvent]}
";
        assert!(has(y, &LIST_RERUNS, "last", Some("rs")));
    }

    #[test]
    fn list_reruns_with_precondition_is_clean() {
        let y = "
name: w
events: [{name: R}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [R]}
  - name: last
    params: [{name: rs, kind: list, types: [R]}]
    outputs: [StopEvent]
    precondition: {name: enough, reads: [R], when: {count_at_least: {param: rs, n: 3}}}
";
        assert_eq!(count(y, &LIST_RERUNS), 0);
    }

    // SAAP012
    #[test]
    fn same_type_two_params_is_a_warning() {
        let y = "
name: w
events: [{name: A}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A]}
  - {name: last, params: [{name: x, kind: required, types: [A]}, {name: y, kind: required, types: [A]}], outputs: [StopEvent]}
";
        assert!(has(y, &SAME_TYPE_TWO_PARAMS, "last", Some("y")));
        assert_eq!(count(CLEAN, &SAME_TYPE_TWO_PARAMS), 0);
    }

    // SAAP013
    #[test]
    fn double_dip_by_several_stages_is_a_warning() {
        let y = "
name: w
events: [{name: Result}]
steps:
  - {name: stage_1, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Result]}
  - {name: stage_2, params: [{name: r, kind: required, types: [Result]}], outputs: [Result], max_executions_per_run: 1}
  - {name: final, params: [{name: r, kind: required, types: [Result]}], outputs: [StopEvent]}
";
        assert!(has(y, &DOUBLE_DIP, "final", Some("r")));
        assert!(has(y, &DOUBLE_DIP, "stage_2", Some("r")));
    }

    #[test]
    fn fan_in_by_fixed_list_is_not_a_double_dip() {
        let y = "
name: w
events: [{name: Part}]
steps:
  - {name: a, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Part], max_executions_per_run: 1}
  - {name: b, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Part], max_executions_per_run: 1}
  - {name: join, params: [{name: parts, kind: fixed_list, size: 2, types: [Part]}], outputs: [StopEvent]}
";
        assert_eq!(codes(y), vec![]);
    }

    // SAAP014
    #[test]
    fn parent_typed_param_is_a_warning() {
        let y = "
name: w
events: [{name: Result}, {name: GoodResult, parents: [Result]}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [GoodResult]}
  - {name: last, params: [{name: r, kind: optional, types: [Result]}, {name: q, kind: required, types: [UserMessageEvent]}], outputs: [StopEvent], max_executions_per_run: 1}
";
        assert!(has(y, &PARENT_TYPED_PARAM, "last", Some("r")));
        let ok = y.replace("types: [Result]}", "types: [Result, GoodResult]}");
        assert_eq!(count(&ok, &PARENT_TYPED_PARAM), 0);
    }

    #[test]
    fn start_event_param_with_user_message_arrival_is_parent_typed() {
        let y = "
name: w
steps:
  - {name: first, params: [{name: q, kind: required, types: [StartEvent]}], outputs: [StopEvent]}
simulation:
  arrivals: [{event: UserMessageEvent}]
";
        assert!(has(y, &PARENT_TYPED_PARAM, "first", Some("q")));
    }

    // SAAP015
    #[test]
    fn no_path_to_stop_is_a_warning() {
        let y = "
name: w
events: [{name: A}, {name: Log}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A, Log]}
  - {name: last, params: [{name: a, kind: required, types: [A]}], outputs: [StopEvent]}
  - {name: audit, params: [{name: l, kind: required, types: [Log]}]}
";
        assert!(has(y, &NO_PATH_TO_STOP, "audit", None));
        assert!(!has(y, &NO_PATH_TO_STOP, "first", None));
        assert_eq!(count(CLEAN, &NO_PATH_TO_STOP), 0);
    }

    // SAAP016
    #[test]
    fn display_only_input_is_a_warning() {
        let y = "
name: w
events: [{name: Shown, parents: [DisplayEvent]}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}, {name: s, kind: optional, types: [Shown]}], outputs: [StopEvent], max_executions_per_run: 1}
";
        assert!(has(y, &DISPLAY_ONLY_INPUT, "first", Some("s")));
        let both = y.replace(
            "parents: [DisplayEvent]",
            "parents: [ControlAndDisplayEvent]",
        );
        assert_eq!(count(&both, &DISPLAY_ONLY_INPUT), 0);
    }

    #[test]
    fn precondition_reading_a_taken_type_is_clean() {
        let y = "
name: w
events: [{name: A}, {name: B}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A, B]}
  - name: last
    params: [{name: a, kind: required, types: [A]}, {name: b, kind: optional, types: [B]}]
    outputs: [StopEvent]
    precondition: {name: b_seen, reads: [A, B], when: {present: b}}
";
        assert_eq!(codes(y), vec![]);
    }

    #[test]
    fn parent_typed_param_listing_the_subtype_is_clean() {
        let y = "
name: w
events: [{name: Result}, {name: GoodResult, parents: [Result]}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [GoodResult, Result]}
  - {name: last, params: [{name: r, kind: list, types: [Result, GoodResult]}], outputs: [StopEvent], precondition: {name: two, when: {count_at_least: {param: r, n: 2}}}}
";
        assert_eq!(codes(y), vec![]);
    }

    #[test]
    fn control_and_display_input_is_clean() {
        let y = "
name: w
events: [{name: Shown, parents: [ControlAndDisplayEvent]}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Shown]}
  - {name: last, params: [{name: s, kind: required, types: [Shown]}], outputs: [StopEvent]}
";
        assert_eq!(codes(y), vec![]);
    }

    #[test]
    fn same_type_two_params_with_distinct_types_is_clean() {
        let y = "
name: w
events: [{name: A}, {name: B}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A, B]}
  - {name: last, params: [{name: x, kind: required, types: [A]}, {name: y, kind: required, types: [B]}], outputs: [StopEvent]}
";
        assert_eq!(codes(y), vec![]);
    }

    #[test]
    fn double_dip_by_self_consumption_is_a_warning() {
        let y = "
name: w
events: [{name: Draft}]
steps:
  - {name: write, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Draft]}
  - {name: refine, params: [{name: d, kind: required, types: [Draft]}], outputs: [Draft, StopEvent], max_executions_per_run: 3}
";
        let f = check(&spec(y));
        let dip: Vec<&Finding> = f.iter().filter(|f| f.code == "SAAP013").collect();
        assert_eq!(dip.len(), 1, "{f:?}");
        assert_eq!(dip[0].step.as_deref(), Some("refine"));
        assert!(
            dip[0].message.contains("also returns it"),
            "{}",
            dip[0].message
        );
    }

    #[test]
    fn distinct_stage_types_are_not_a_double_dip() {
        let y = "
name: w
events: [{name: Stage1Result}, {name: Stage2Result}]
steps:
  - {name: stage_1, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Stage1Result]}
  - {name: stage_2, params: [{name: r, kind: required, types: [Stage1Result]}], outputs: [Stage2Result]}
  - {name: final, params: [{name: r, kind: required, types: [Stage2Result]}], outputs: [StopEvent]}
";
        assert_eq!(codes(y), vec![]);
    }

    #[test]
    fn no_path_to_stop_through_an_in_the_loop_request_is_clean() {
        let y = "
name: w
steps:
  - {name: ask, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [ToolApprovalRequestEvent]}
  - {name: act, params: [{name: r, kind: required, types: [ToolApprovalResponseEvent]}], outputs: [StopEvent]}
";
        assert_eq!(count(y, &NO_PATH_TO_STOP), 0);
        // Without a step taking the response, the request leads nowhere.
        let dead = y.replace("outputs: [StopEvent]", "outputs: []");
        assert!(has(&dead, &NO_PATH_TO_STOP, "ask", None));
    }

    // SAAP017
    #[test]
    fn precondition_never_true_is_a_warning() {
        let y = "
name: w
events: [{name: A}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A]}
  - name: last
    params: [{name: a, kind: required, types: [A]}]
    outputs: [StopEvent]
    precondition: {name: two_answers, reads: [A], when: {count_at_least: {param: a, n: 2}}}
";
        assert!(has(y, &PRECONDITION_NEVER_TRUE, "last", None));
        assert_eq!(count(y, &UNREACHABLE_STEP), 0);
        let always = y.replace("{count_at_least: {param: a, n: 2}}", "{always: false}");
        assert!(has(&always, &PRECONDITION_NEVER_TRUE, "last", None));
    }

    #[test]
    fn satisfiable_precondition_is_clean() {
        let y = "
name: w
events: [{name: A}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A]}
  - name: last
    params: [{name: a, kind: list, types: [A]}]
    outputs: [StopEvent]
    precondition: {name: two, reads: [A], when: {count_at_least: {param: a, n: 2}}}
";
        assert_eq!(count(y, &PRECONDITION_NEVER_TRUE), 0);
    }

    #[test]
    fn condition_constants_follow_param_kinds() {
        let s = spec(
            "
name: w
steps:
  - name: s
    params:
      - {name: r, kind: required, types: [UserMessageEvent]}
      - {name: o, kind: optional, types: [UserMessageEvent]}
      - {name: l, kind: list, types: [UserMessageEvent]}
      - {name: f, kind: fixed_list, size: 3, types: [UserMessageEvent]}
",
        );
        let st = &s.steps[0];
        use CompiledCondition as C;
        assert_eq!(condition_constant(st, &C::Present(0)), Some(true));
        assert_eq!(condition_constant(st, &C::Absent(0)), Some(false));
        assert_eq!(condition_constant(st, &C::Present(1)), None);
        assert_eq!(condition_constant(st, &C::CountAtLeast(1, 2)), Some(false));
        assert_eq!(condition_constant(st, &C::CountAtLeast(2, 100)), None);
        assert_eq!(condition_constant(st, &C::CountAtLeast(3, 3)), Some(true));
        assert_eq!(condition_constant(st, &C::CountAtLeast(3, 4)), Some(false));
        assert_eq!(condition_constant(st, &C::Any(vec![])), Some(false));
        assert_eq!(condition_constant(st, &C::All(vec![])), Some(true));
        assert_eq!(
            condition_constant(
                st,
                &C::Not(Box::new(C::Any(vec![C::Present(1), C::Present(0)])))
            ),
            Some(false)
        );
    }

    #[test]
    fn every_finding_has_why_and_fix() {
        let y = "
name: w
events: [{name: A}, {name: B}]
steps:
  - {name: s, params: [{name: a, kind: required, types: [A]}, {name: b, kind: optional, types: [B]}, {name: l, kind: list, types: [StopEvent]}], outputs: [A]}
  - {name: s, params: [], outputs: []}
";
        let f = check(&spec(y));
        assert!(f.len() >= 5, "{f:?}");
        for x in &f {
            assert!(!x.why.is_empty() && !x.fix.is_empty() && !x.message.is_empty());
        }
    }

    /// Large specs at the compiler's bounds go through every check (linear passes; no
    /// timing is asserted): a 10,000-step chain declared backwards, and a type with 3,000
    /// producers and 3,000 single-parameter consumers.
    #[test]
    fn large_specs_are_checked() {
        use crate::spec::{EventTypeSpec, ParamSpec, StepSpec, WorkflowSpec};
        let step = |name: String, input: String, kind: ParamKind, output: String| StepSpec {
            name,
            params: vec![ParamSpec {
                name: "e".into(),
                kind,
                types: vec![input],
                size: None,
            }],
            outputs: vec![output],
            output_max: Default::default(),
            returns_together: vec![],
            max_executions_per_run: None,
            stop_on_error: true,
            precondition: None,
            description: None,
        };
        let n = 10_000;
        let mut chain = WorkflowSpec {
            format: 1,
            name: "chain".into(),
            description: None,
            events: (0..n)
                .map(|i| EventTypeSpec {
                    name: format!("E{i}"),
                    parents: vec![],
                    description: None,
                })
                .collect(),
            steps: Vec::new(),
            simulation: None,
        };
        for i in (0..n).rev() {
            let input = if i == 0 {
                "UserMessageEvent".to_string()
            } else {
                format!("E{}", i - 1)
            };
            let output = if i == n - 1 {
                "StopEvent".to_string()
            } else {
                format!("E{i}")
            };
            chain
                .steps
                .push(step(format!("s{i}"), input, ParamKind::Required, output));
        }
        let compiled = CompiledSpec::compile(&chain).unwrap();
        assert_eq!(check(&compiled), vec![]);

        let m = 3_000;
        let mut wide = chain.clone();
        wide.events = vec![EventTypeSpec {
            name: "Part".into(),
            parents: vec![],
            description: None,
        }];
        wide.steps = (0..m)
            .map(|i| {
                step(
                    format!("p{i}"),
                    "UserMessageEvent".into(),
                    ParamKind::Required,
                    "Part".into(),
                )
            })
            .chain((0..m).map(|i| {
                step(
                    format!("c{i}"),
                    "Part".into(),
                    ParamKind::Required,
                    "StopEvent".into(),
                )
            }))
            .collect();
        let f = check(&CompiledSpec::compile(&wide).unwrap());
        assert_eq!(f.len(), m, "one double-dip per consumer");
        assert!(f.iter().all(|f| f.code == DOUBLE_DIP.code));
        assert!(f[0].message.contains("and 2992 more"), "{}", f[0].message);
    }

    fn workspace_file(rel: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(rel)
    }

    #[test]
    fn every_example_spec_compiles_and_checks() {
        let dir = workspace_file("examples/specs");
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                matches!(
                    p.extension().and_then(|x| x.to_str()),
                    Some("yaml" | "yml" | "json")
                )
            })
            .collect();
        names.sort();
        assert!(names.len() >= 13, "expected the example specs in {dir:?}");
        for path in names {
            let text = std::fs::read_to_string(&path).unwrap();
            let syntax = SpecSyntax::detect(path.to_str(), &text);
            let compiled = crate::compile_spec_text(&text, syntax)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(
                compiled.source.simulation.is_some(),
                "{}: examples need a simulation section",
                path.display()
            );
            // The clean examples stay clean.
            let file = path.file_name().unwrap().to_str().unwrap();
            if matches!(
                file,
                "rag.yaml" | "fixedlist-fix.yaml" | "optional-trap-fixed.yaml"
            ) {
                assert_eq!(check(&compiled), vec![], "{file}");
            }
        }
    }

    /// The first fenced block of `lang` after `from` in `text`.
    fn fenced<'t>(text: &'t str, from: usize, lang: &str) -> Option<&'t str> {
        let open = format!("```{lang}\n");
        let start = text[from..].find(&open)? + from + open.len();
        let end = text[start..].find("```")? + start;
        Some(&text[start..end])
    }

    #[test]
    fn checks_doc_has_a_section_with_a_triggering_example_per_code() {
        let doc = std::fs::read_to_string(workspace_file("docs/checks.md")).unwrap();
        for r in RULES {
            let heading = format!("\n## {} {}\n", r.code, r.rule);
            let at = doc
                .find(&heading)
                .unwrap_or_else(|| panic!("docs/checks.md lacks `{}`", heading.trim()));
            let next = doc[at + heading.len()..]
                .find("\n## ")
                .map_or(doc.len(), |n| n + at + heading.len());
            let example = fenced(&doc[..next], at, "yaml")
                .unwrap_or_else(|| panic!("{}: no yaml example", r.code));
            let found = check(&spec(example));
            assert!(
                found
                    .iter()
                    .any(|f| f.code == r.code && f.severity == r.severity),
                "{}: the example does not trigger it: {found:?}",
                r.code
            );
        }
    }

    #[test]
    fn spec_format_example_is_the_same_in_yaml_and_json_and_is_clean() {
        let doc = std::fs::read_to_string(workspace_file("docs/spec-format.md")).unwrap();
        let at = doc.find("## A complete example").unwrap();
        let yaml =
            crate::compile_spec_text(fenced(&doc, at, "yaml").unwrap(), SpecSyntax::Yaml).unwrap();
        let json =
            crate::compile_spec_text(fenced(&doc, at, "json").unwrap(), SpecSyntax::Json).unwrap();
        assert_eq!(yaml.source, json.source);
        assert_eq!(check(&yaml), vec![]);
    }

    /// Walks a JSON value along the hand-written schema and reports keys the schema does
    /// not describe (a structural drift between `spec.rs` and `docs/spec.schema.json`).
    fn schema_drift(
        root: &serde_json::Value,
        node: &serde_json::Value,
        value: &serde_json::Value,
        path: &str,
        out: &mut Vec<String>,
    ) {
        use serde_json::Value;
        if let Some(r) = node.get("$ref").and_then(Value::as_str) {
            let target = root.pointer(r.trim_start_matches('#')).unwrap();
            return schema_drift(root, target, value, path, out);
        }
        if let Some(alts) = node.get("oneOf").and_then(Value::as_array) {
            // An object takes the alternative whose required keys it has; anything else the
            // first alternative without required keys (e.g. a type name).
            let resolve = |a: &'_ Value| -> Value {
                match a.get("$ref").and_then(Value::as_str) {
                    Some(r) => root
                        .pointer(r.trim_start_matches('#'))
                        .cloned()
                        .unwrap_or(Value::Null),
                    None => a.clone(),
                }
            };
            let chosen = alts.iter().map(resolve).find(|a| match a.get("required") {
                Some(req) => {
                    value.is_object()
                        && req.as_array().is_some_and(|req| {
                            req.iter()
                                .all(|k| k.as_str().is_some_and(|k| value.get(k).is_some()))
                        })
                }
                None => !value.is_object(),
            });
            match chosen {
                Some(a) => return schema_drift(root, &a, value, path, out),
                None => {
                    out.push(format!("{path}: matches no alternative"));
                    return;
                }
            }
        }
        match value {
            Value::Object(map) => {
                let props = node.get("properties").and_then(Value::as_object);
                let extra = node.get("additionalProperties").filter(|a| a.is_object());
                for (k, v) in map {
                    let p = format!("{path}.{k}");
                    match (props.and_then(|ps| ps.get(k)), extra) {
                        (Some(sub), _) | (None, Some(sub)) => schema_drift(root, sub, v, &p, out),
                        (None, None) => out.push(format!("{p}: not in the schema")),
                    }
                }
            }
            Value::Array(items) => {
                if let Some(sub) = node.get("items") {
                    for (i, v) in items.iter().enumerate() {
                        schema_drift(root, sub, v, &format!("{path}[{i}]"), out);
                    }
                }
            }
            _ => {}
        }
    }

    #[test]
    fn schema_describes_every_field_the_model_writes() {
        let schema: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(workspace_file("docs/spec.schema.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        let doc = std::fs::read_to_string(workspace_file("docs/spec-format.md")).unwrap();
        let at = doc.find("## A complete example").unwrap();
        let mut full = spec(fenced(&doc, at, "yaml").unwrap()).source;
        // Set what the example leaves at its default, so that every field is written.
        full.steps[0].precondition = Some(crate::spec::PreconditionSpec {
            name: "p".into(),
            reads: vec!["UserMessageEvent".into()],
            when: Some(crate::spec::Condition::All(vec![
                crate::spec::Condition::Always(true),
                crate::spec::Condition::Any(vec![crate::spec::Condition::Present(
                    "question".into(),
                )]),
                crate::spec::Condition::Not(Box::new(crate::spec::Condition::Absent(
                    "question".into(),
                ))),
                crate::spec::Condition::CountAtLeast {
                    param: "question".into(),
                    n: 1,
                },
            ])),
        });
        if let Some(sim) = full.simulation.as_mut() {
            let b = sim.behaviour.entry("draft".into()).or_default();
            b.fail = Some("boom".into());
            b.executions
                .insert(2, crate::spec::ExecutionBehaviour::Fail("again".into()));
        }
        let value = serde_json::to_value(&full).unwrap();
        let mut drift = Vec::new();
        schema_drift(&schema, &schema, &value, "$", &mut drift);
        assert_eq!(drift, Vec::<String>::new());
        // And the reverse for the top level: every schema property is a model field.
        for k in schema["properties"].as_object().unwrap().keys() {
            assert!(
                value.get(k).is_some(),
                "schema property `{k}` is not written by the model"
            );
        }
    }
}

/// Soundness against the simulator: whatever `check` says can never run must not run in a
/// simulation of the same spec (random small specs, outside arrivals only).
#[cfg(test)]
mod soundness {
    #![allow(clippy::unwrap_used, clippy::needless_range_loop)]
    use super::*;
    use crate::spec::{
        ArrivalSpec, Condition, EventTypeSpec, ParamSpec, PreconditionSpec, SimulationSpec,
        StepSpec, WorkflowSpec,
    };
    use proptest::prelude::*;
    use std::sync::Arc;

    const INPUT_TYPES: &[&str] = &[
        "UserMessageEvent",
        "T0",
        "T1",
        "T2",
        "T3",
        "Shown",
        "StopEvent",
        "HumanInTheLoopInputResponseEvent",
    ];
    const OUTPUT_TYPES: &[&str] = &["T0", "T1", "T2", "T3", "Shown", "StopEvent"];

    fn kind(k: u8) -> ParamKind {
        match k % 4 {
            0 => ParamKind::Required,
            1 => ParamKind::Optional,
            2 => ParamKind::List,
            _ => ParamKind::FixedList,
        }
    }

    type ParamGen = (u8, Vec<usize>, u32);
    type StepGen = (Vec<ParamGen>, Vec<usize>, Option<u32>, Option<(u8, u32)>);

    fn build(steps: Vec<StepGen>, arrivals: Vec<bool>) -> WorkflowSpec {
        let mut out = Vec::new();
        for (si, (params, outputs, max, pre)) in steps.into_iter().enumerate() {
            let params: Vec<ParamSpec> = params
                .into_iter()
                .enumerate()
                .map(|(pi, (k, types, size))| {
                    let kind = kind(k);
                    let mut names: Vec<String> = Vec::new();
                    for t in types {
                        let n = INPUT_TYPES[t % INPUT_TYPES.len()].to_string();
                        if !names.contains(&n) {
                            names.push(n);
                        }
                    }
                    ParamSpec {
                        name: format!("p{pi}"),
                        kind,
                        types: names,
                        size: (kind == ParamKind::FixedList).then_some(size),
                    }
                })
                .collect();
            let mut outs: Vec<String> = Vec::new();
            for o in outputs {
                let n = OUTPUT_TYPES[o % OUTPUT_TYPES.len()].to_string();
                if !outs.contains(&n) {
                    outs.push(n);
                }
            }
            let precondition = pre.filter(|_| !params.is_empty()).map(|(c, n)| {
                let p = format!("p{}", (c as usize / 3) % params.len());
                PreconditionSpec {
                    name: format!("pre{si}"),
                    reads: vec![],
                    when: Some(match c % 3 {
                        0 => Condition::Always(false),
                        1 => Condition::Present(p),
                        _ => Condition::CountAtLeast { param: p, n },
                    }),
                }
            });
            out.push(StepSpec {
                name: format!("s{si}"),
                params,
                outputs: outs,
                output_max: Default::default(),
                returns_together: vec![],
                max_executions_per_run: max,
                stop_on_error: true,
                precondition,
                description: None,
            });
        }
        let control = |n: &str| EventTypeSpec {
            name: n.to_string(),
            parents: vec![],
            description: None,
        };
        WorkflowSpec {
            format: crate::spec::SPEC_FORMAT_VERSION,
            name: "random".into(),
            description: None,
            events: vec![
                control("T0"),
                control("T1"),
                control("T2"),
                EventTypeSpec {
                    name: "T3".into(),
                    parents: vec!["T0".into()],
                    description: None,
                },
                EventTypeSpec {
                    name: "Shown".into(),
                    parents: vec!["DisplayEvent".into()],
                    description: None,
                },
            ],
            steps: out,
            simulation: Some(SimulationSpec {
                arrivals: std::iter::once("UserMessageEvent")
                    .chain(arrivals.iter().map(|h| {
                        if *h {
                            "HumanInTheLoopInputResponseEvent"
                        } else {
                            "UserMessageEvent"
                        }
                    }))
                    .map(|e| ArrivalSpec {
                        event: e.into(),
                        label: None,
                    })
                    .collect(),
                behaviour: Default::default(),
            }),
        }
    }

    /// The plain fixpoint the worklist in [`Analysis::reachability`] must agree with.
    fn naive_runs(cx: &Analysis<'_>, respect: bool) -> Vec<bool> {
        let mut avail: Vec<bool> = (0..cx.spec.types.len())
            .map(|t| cx.outside[t] && cx.dispatchable(t as TypeId))
            .collect();
        let mut runs = vec![false; cx.spec.steps.len()];
        loop {
            let mut changed = false;
            for (si, s) in cx.spec.steps.iter().enumerate() {
                if runs[si] || (respect && cx.never_true[si]) {
                    continue;
                }
                let has = |ts: &[TypeId]| ts.iter().any(|t| avail[*t as usize]);
                if s.params.iter().any(|p| has(&p.types))
                    && s.params
                        .iter()
                        .filter(|p| Analysis::blocking(p.kind))
                        .all(|p| has(&p.types))
                {
                    runs[si] = true;
                    changed = true;
                    for &o in &cx.outs[si] {
                        if cx.dispatchable(o) {
                            avail[o as usize] = true;
                        }
                    }
                }
            }
            if !changed {
                return runs;
            }
        }
    }

    /// The plain fixpoint [`Analysis::leads_to_end`] must agree with.
    fn naive_ends(cx: &Analysis<'_>) -> Vec<bool> {
        let n = cx.spec.steps.len();
        let mut ends = vec![false; n];
        loop {
            let mut changed = false;
            for si in 0..n {
                if ends[si] || !cx.could_run[si] {
                    continue;
                }
                let reaches = cx.outs[si].iter().any(|&t| {
                    let k = cx.spec.type_info(t).kind;
                    (k.is_control() && k.is_terminal())
                        || (cx.dispatchable(t)
                            && cx.spec.consumers(t).iter().any(|&(c, _)| ends[c as usize]))
                });
                let asks = cx.outs[si].iter().any(|&t| {
                    REQUEST_ROOTS
                        .iter()
                        .any(|r| cx.spec.hierarchy.is_subtype_of(cx.name(t), r))
                });
                let answered = asks
                    && cx.spec.steps.iter().enumerate().any(|(ci, c)| {
                        ends[ci]
                            && c.params.iter().flat_map(|p| p.types.iter()).any(|&t| {
                                cx.outside[t as usize] && !cx.spec.type_info(t).kind.is_start()
                            })
                    });
                if reaches || answered {
                    ends[si] = true;
                    changed = true;
                }
            }
            if !changed {
                return ends;
            }
        }
    }

    /// `reach[a][b]`: a path of one or more steps from `a` to `b` (not through fixed lists).
    fn naive_reach(cx: &Analysis<'_>) -> Vec<Vec<bool>> {
        let n = cx.spec.steps.len();
        let mut reach = vec![vec![false; n]; n];
        for a in 0..n {
            for &t in &cx.outs[a] {
                if !cx.dispatchable(t) {
                    continue;
                }
                for &(c, p) in cx.spec.consumers(t) {
                    if cx.spec.steps[c as usize].params[p as usize].kind != ParamKind::FixedList {
                        reach[a][c as usize] = true;
                    }
                }
            }
        }
        for k in 0..n {
            for a in 0..n {
                for b in 0..n {
                    if reach[a][k] && reach[k][b] {
                        reach[a][b] = true;
                    }
                }
            }
        }
        reach
    }

    fn step_gen() -> impl Strategy<Value = StepGen> {
        (
            prop::collection::vec(
                (any::<u8>(), prop::collection::vec(0usize..8, 1..3), 1u32..4),
                0..4,
            ),
            prop::collection::vec(0usize..6, 0..3),
            prop::option::of(1u32..4),
            prop::option::weighted(0.3, (any::<u8>(), 0u32..3)),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn steps_check_says_cannot_run_never_run_in_simulation(
            steps in prop::collection::vec(step_gen(), 1..7),
            arrivals in prop::collection::vec(any::<bool>(), 0..3),
        ) {
            let spec = build(steps, arrivals);
            let compiled = Arc::new(CompiledSpec::compile(&spec).unwrap());
            let findings = check(&compiled);
            // Deterministic.
            prop_assert_eq!(&findings, &check(&compiled));
            // The linear-time analyses agree with the plain fixpoints.
            let cx = Analysis::new(&compiled);
            prop_assert_eq!(&cx.runs, &naive_runs(&cx, true));
            prop_assert_eq!(&cx.could_run, &naive_runs(&cx, false));
            prop_assert_eq!(cx.leads_to_end(), naive_ends(&cx));
            // Unbounded cycles: reported exactly once per strongly connected set of steps
            // none of which is bounded, on its first step.
            let reach = naive_reach(&cx);
            let n = compiled.steps.len();
            let bounded = |s: usize| {
                compiled.steps[s].max_executions_per_run.is_some()
                    || compiled.steps[s].precondition.is_some()
            };
            let mut expected: Vec<String> = Vec::new();
            for s in 0..n {
                if !reach[s][s] {
                    continue;
                }
                let comp: Vec<usize> = (0..n).filter(|&t| reach[s][t] && reach[t][s]).collect();
                if comp[0] == s && !comp.iter().any(|&t| bounded(t)) {
                    expected.push(compiled.steps[s].name.clone());
                }
            }
            let reported: Vec<String> = findings
                .iter()
                .filter(|f| f.code == "SAAP004")
                .filter_map(|f| f.step.clone())
                .collect();
            prop_assert_eq!(reported, expected);
            let never: BTreeSet<String> = findings
                .iter()
                .filter(|f| {
                    matches!(
                        f.code,
                        "SAAP001" | "SAAP002" | "SAAP009" | "SAAP017"
                    )
                })
                .filter_map(|f| f.step.clone())
                .collect();
            for policy in [
                crate::sim::Policy::Fifo,
                crate::sim::Policy::Lifo,
                crate::sim::Policy::ArrivalsFirst,
            ] {
                let sim = crate::sim::simulate(compiled.clone(), policy, 300).unwrap();
                for x in sim.run.executions() {
                    let name = &compiled.steps[x.step as usize].name;
                    prop_assert!(
                        !never.contains(name),
                        "`{}` ran under {:?} although check says it cannot: {:?}",
                        name,
                        policy,
                        findings
                    );
                }
            }
        }
    }
}
