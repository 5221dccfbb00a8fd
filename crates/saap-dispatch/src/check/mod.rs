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
//! [`RULES`] (this file) is the machine-readable list, the one place every code is defined.
//!
//! Where the checks are, one file per family, each an `impl Analysis` of its own: `graph`
//! (what they build on: reachability, paths to a stop), `structure` (the workflow's shape),
//! `termination` (how a run ends), `preconditions`, `parameters` (a step's event
//! parameters), `in_the_loop` (waits on people, agents and bots); [`check`] below runs them
//! in order.

use crate::compiled::{CompiledCondition, CompiledSpec, CompiledStep, TypeId};
use crate::spec::ParamKind;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

mod graph;
mod in_the_loop;
mod parameters;
mod preconditions;
#[cfg(test)]
mod soundness;
mod structure;
mod termination;
#[cfg(test)]
mod tests;

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

impl Finding {
    /// The finding as the human reports show it: `error[SAAP001] step `s`: message` and its
    /// indented `rule:`, `why:` and `fix:` lines, then a blank line.
    pub fn render_into(&self, out: &mut String) {
        use std::fmt::Write as _;
        let _ = write!(out, "{}[{}]", self.severity.as_str(), self.code);
        if let Some(step) = &self.step {
            let _ = write!(out, " step `{step}`");
        }
        if let Some(param) = &self.param {
            let _ = write!(out, " param `{param}`");
        }
        let _ = write!(
            out,
            ": {}\n  rule: {}\n  why: {}\n  fix: {}\n\n",
            self.message, self.rule, self.why, self.fix
        );
    }
}

/// A check's identity: code, severity, slug and a one-line title.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rule {
    pub code: &'static str,
    pub severity: Severity,
    pub rule: &'static str,
    pub title: &'static str,
}

/// A rule from its parts: for this crate's checks and for checkers outside it (Python
/// source, `saap-python`), so that every code is made the same way.
pub const fn rule(
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

pub const RESPONSE_WITHOUT_REQUEST: Rule = rule(
    "SAAP018",
    Severity::Warning,
    "response-without-request",
    "step takes a child run's end, and no step delegates",
);
pub const WAIT_WITHOUT_DEADLINE: Rule = rule(
    "SAAP019",
    Severity::Warning,
    "wait-without-deadline",
    "step waits for the person it asked, with nothing to take the answer's place",
);
pub const CHILD_FAILURE_UNTAKEN: Rule = rule(
    "SAAP020",
    Severity::Warning,
    "child-failure-untaken",
    "workflow takes a child run's answer but not its failure",
);
pub const DEADLINE_DECIDES_TWICE: Rule = rule(
    "SAAP021",
    Severity::Warning,
    "deadline-decides-twice",
    "step takes a deadline and what it stands in for, and can run for both",
);
pub const DELEGATION_TO_UNKNOWN_AGENT: Rule = rule(
    "SAAP022",
    Severity::Warning,
    "delegation-to-unknown-agent",
    "step delegates to an agent the workflow does not know",
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
    RESPONSE_WITHOUT_REQUEST,
    WAIT_WITHOUT_DEADLINE,
    CHILD_FAILURE_UNTAKEN,
    DEADLINE_DECIDES_TWICE,
    DELEGATION_TO_UNKNOWN_AGENT,
];

/// The built-in types whose subtypes arrive from outside the workflow (DESIGN §5).
pub const OUTSIDE_ROOTS: &[&str] = &[
    "StartEvent",
    "HumanInTheLoopResponseEvent",
    "AgentInTheLoopResponseEvent",
    "AgentInTheLoopExceptionEvent",
    "BotInTheLoopResponseEvent",
    // A process's: its start, and the work a person, a program or an agent hands back.
    "ProcessStartEvent",
    "HumanWorkEvent",
    "ProgramWorkEvent",
    "AgentWorkEvent",
];

/// The built-in request types whose answers arrive from outside as the response types of
/// [`OUTSIDE_ROOTS`].
pub const REQUEST_ROOTS: &[&str] = &[
    "HumanInTheLoopRequestEvent",
    "AgentInTheLoopRequestEvent",
    "BotInTheLoopRequestEvent",
    "HumanWorkRequestEvent",
    "ProgramWorkRequestEvent",
    "AgentWorkRequestEvent",
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
    cx.responses_without_requests(&mut out);
    cx.waits_without_deadline(&mut out);
    cx.child_failures_untaken(&mut out);
    cx.deadlines_deciding_twice(&mut out);
    cx.delegations_to_unknown_agents(&mut out);
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
pub(super) type SortKey = (Severity, &'static str, usize, usize, String);

/// Collected findings with their sort keys.
#[derive(Default)]
pub(super) struct Out {
    pub(super) items: Vec<(SortKey, Finding)>,
}

impl Out {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn push(
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

    pub(super) fn finish(mut self) -> Vec<Finding> {
        self.items.sort_by(|a, b| a.0.cmp(&b.0));
        self.items.dedup_by(|a, b| a.0 == b.0);
        self.items.into_iter().map(|(_, f)| f).collect()
    }
}

/// Facts derived once from the spec and shared by the checks.
pub(super) struct Analysis<'a> {
    pub(super) spec: &'a CompiledSpec,
    /// Per step: what one execution may return (outputs ∪ returns_together), deduplicated.
    pub(super) outs: Vec<Vec<TypeId>>,
    /// Per type: the steps that may return it, in step order.
    pub(super) producers: Vec<Vec<usize>>,
    /// Per type: it arrives from outside (a control subtype of an [`OUTSIDE_ROOTS`] type).
    pub(super) outside: Vec<bool>,
    /// Per step: its declarative precondition is provably never true.
    pub(super) never_true: Vec<bool>,
    /// Per step: it can run in some run (see the module docs).
    pub(super) runs: Vec<bool>,
    /// Per step: it could run if every declarative precondition held sometimes (the
    /// structure alone; used for termination so that a never-true precondition is reported
    /// once, by SAAP017).
    pub(super) could_run: Vec<bool>,
    /// Per type: some event of it can be dispatched in some run.
    pub(super) available: Vec<bool>,
    /// Types the simulation section delivers from outside.
    pub(super) simulated_arrivals: BTreeSet<TypeId>,
    /// Per (step, param): the SAAP002 check fired.
    pub(super) missing: BTreeSet<(usize, usize)>,
}

impl<'a> Analysis<'a> {
    pub(super) fn new(spec: &'a CompiledSpec) -> Analysis<'a> {
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
    pub(super) fn dispatchable(&self, t: TypeId) -> bool {
        let k = self.spec.type_info(t).kind;
        k.is_control() && !k.is_terminal()
    }

    pub(super) fn name(&self, t: TypeId) -> &str {
        &self.spec.type_info(t).name
    }

    pub(super) fn names(&self, ts: &[TypeId]) -> String {
        capped_list(ts.iter().map(|t| self.name(*t)), ts.len())
    }

    pub(super) fn step_names(&self, ss: &[usize]) -> String {
        capped_list(
            ss.iter().map(|s| self.spec.steps[*s].name.as_str()),
            ss.len(),
        )
    }

    pub(super) fn blocking(kind: ParamKind) -> bool {
        matches!(kind, ParamKind::Required | ParamKind::FixedList)
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
