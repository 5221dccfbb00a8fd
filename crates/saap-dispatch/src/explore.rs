//! The explorer: every interleaving of a spec's outside arrivals and step completions, run
//! through the real dispatch core, with the bad states that can be reached and a witness
//! trace for each (issue 2, item 7; `saap explore`).
//!
//! # What is explored
//!
//! A state is a [`Run`] plus the outside arrivals not yet delivered. From a state, the
//! actions are: deliver the next outside arrival (in declared order, or any remaining one
//! with [`ExploreOptions::permute_arrivals`]), or complete any running execution (each
//! running execution may finish next; what it returns or whether it fails comes from the
//! spec's `simulation.behaviour`, see [`crate::sim::outcome_for`]). A *final* state has no
//! arrival left and no execution running. Every decision is made by [`Run`] itself; the
//! explorer only chooses the order.
//!
//! # Reductions (and why they are sound)
//!
//! 1. **State deduplication.** Two states merge when their canonical keys are equal. The key
//!    names events structurally, never by id or sequence number: an outside arrival by its
//!    arrival index (a re-delivered label by its first index); an output by (producing
//!    execution, output index, type), where an execution is named by (step, the names of the
//!    events bound to each parameter). Names are hash-consed to small integers. The key
//!    holds the run status, the remaining arrivals, for every (step, parameter) what
//!    readiness and binding can still read of the events it matches (a required or optional
//!    parameter: the latest; a fixed list of N: the set of its first N; a list: the set of
//!    all — no later decision depends on anything else of that history), and every
//!    execution (its name with list bindings as sets, since an input set is a set; its
//!    state; and for a running one its per-step execution number, which selects its
//!    behaviour). The executions give the input sets already run and the per-step counts
//!    (budget). Two states with equal keys are therefore related by a renaming of ids
//!    under which the core makes the same decisions, so their futures coincide; execution
//!    counts are part of the key, so per-step counts of final states are preserved too.
//! 2. **Invisible completions** (a persistent set of one). A running execution whose
//!    outcome appends nothing that any step consumes and nothing terminal (it returns no
//!    control event that a parameter takes and no stop/exception event, or it fails with
//!    `stop_on_error: false`) is completed alone, without branching. Completing it changes
//!    no parameter's list, starts nothing and ends nothing, and nothing else changes its
//!    outcome (fixed when it started), so it commutes with every other action and stays
//!    enabled until taken; the state graph is acyclic (every action consumes an arrival or
//!    finishes an execution), so all final states are still reached. The one thing its
//!    position changes is whether its outputs land *after a stop*: whenever a run
//!    terminates, every earlier invisible completion that returned events is reported as an
//!    event after stop, with a witness in which that completion is moved after the stop
//!    (a valid interleaving, because nothing depended on it).
//! 3. **After termination, one order.** Once the run has ended nothing is dispatched again
//!    (§4.7): remaining completions and arrivals only add after-stop evidence, the same set
//!    in any order. They are taken in one fixed order (completions by execution id, then
//!    arrivals).
//! 4. **Identical arrivals.** A re-delivery of an event already in the log is dropped by
//!    the core whatever the order, so it is taken alone. With permuted arrivals, arrivals
//!    that are the same event (a repeated label) or interchangeable (same type, no label)
//!    are delivered lowest index first: the other orders are the same runs up to renaming.
//!
//! # Bounds
//!
//! [`ExploreOptions::max_states`] caps the distinct states kept and
//! [`ExploreOptions::max_depth`] the number of actions on one path (a cycle without a
//! bound grows forever). Hitting either makes the results partial, and the
//! [`Exploration::bounds_hit`] list says so; it is never silent.
//!
//! Pure: no clock, no randomness, no I/O, no threads. Progress is reported through a
//! callback.

use crate::compiled::{CompiledSpec, TypeId};
use crate::ids::{ExecutionId, FastMap, StepIdx, run_key};
use crate::record::{Origin, Record, Termination};
use crate::run::{AppendError, DeclaredConditions, EventTy, ExecState, Outcome, Run, RunStatus};
use crate::sim::{self, Arrival};
use crate::spec::ParamKind;
use serde::Serialize;
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

/// Default cap on distinct states.
pub const DEFAULT_MAX_STATES: usize = 200_000;
/// Default cap on the number of actions (arrivals and completions) along one path: far
/// above what a workflow without an unbounded cycle needs, low enough that a cycle is
/// reported in seconds.
pub const DEFAULT_MAX_DEPTH: usize = 300;
/// At most this many distinct stalls are kept with a witness (the rest are counted).
pub const MAX_REPORTED_STALLS: usize = 20;
/// The progress callback is called about every this many transitions (and once at the end).
pub const PROGRESS_EVERY: usize = 1024;

/// How to explore.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ExploreOptions {
    /// Stop after this many distinct states (results are then partial).
    pub max_states: usize,
    /// Do not extend a path beyond this many actions (results are then partial).
    pub max_depth: usize,
    /// Let outside arrivals come in any order, not only the declared one.
    pub permute_arrivals: bool,
    /// Merge states with equal canonical keys (reduction 1). Off only to test soundness.
    pub dedup: bool,
    /// Apply reductions 2–4. Off only to test soundness.
    pub partial_order: bool,
}

impl Default for ExploreOptions {
    fn default() -> Self {
        ExploreOptions {
            max_states: DEFAULT_MAX_STATES,
            max_depth: DEFAULT_MAX_DEPTH,
            permute_arrivals: false,
            dedup: true,
            partial_order: true,
        }
    }
}

/// Progress so far, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub states: usize,
    pub transitions: usize,
    pub merged: usize,
    pub final_states: usize,
    /// Length of the path being explored.
    pub depth: usize,
    pub max_states: usize,
    /// True on the last call.
    pub done: bool,
}

/// The explorer could not run the spec (the core refused an input it should accept).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExploreError {
    #[error("SAAP-E001: the dispatch core refused an explored action ({action}): {message}")]
    Core { action: String, message: String },
}

/// One action of a witness trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "action")]
pub enum TraceAction {
    /// An outside event arrived.
    Arrive {
        event: String,
        label: String,
        /// Its id was already in the log (a re-delivery): dropped.
        duplicate: bool,
    },
    /// An execution returned these events.
    Complete {
        execution: ExecutionId,
        step: String,
        outputs: Vec<String>,
    },
    /// An execution failed.
    Fail {
        execution: ExecutionId,
        step: String,
        message: String,
        stop_on_error: bool,
    },
}

/// An execution named in a trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExecRef {
    pub execution: ExecutionId,
    pub step: String,
    /// What each parameter is bound to, e.g. `topic=TopicClassified#1, profile=none`.
    pub bindings: String,
    /// The same as (parameter, value) pairs.
    #[serde(skip)]
    pub inputs: Vec<(String, String)>,
}

impl fmt::Display for ExecRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{} ({})", self.step, self.execution, self.bindings)
    }
}

/// One line of a witness trace: an action and what the core did with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TraceStep {
    /// The whole line, e.g. `complete retrieve#x0 → Retrieved; starts answer#x1`.
    pub text: String,
    #[serde(flatten)]
    pub action: TraceAction,
    /// Executions this action started.
    pub started: Vec<ExecRef>,
    /// Terminations and events after stop caused by this action.
    pub notes: Vec<String>,
}

impl fmt::Display for TraceStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Executions of one step over all complete interleavings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepExecutions {
    pub step: String,
    /// Fewest executions in a final state (None when no final state was reached).
    pub best: Option<usize>,
    /// Most executions in a final state.
    pub worst: Option<usize>,
    /// An interleaving reaching `worst`.
    pub worst_witness: Vec<TraceStep>,
    /// For each execution after the first in the witness, what differed from the one
    /// before it (why it was not skipped as the same input set), e.g.
    /// ``answer#x3: `profile` none → ProfileLoaded#2``.
    pub reruns: Vec<String>,
}

/// Why a step with no execution waits forever in a stalled state.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum WaitReason {
    /// Required parameters with no event.
    RequiredMissing { params: Vec<String> },
    /// A fixed list has fewer events than its size.
    FixedListShort {
        param: String,
        have: usize,
        need: u32,
    },
    /// Every parameter could bind, but the precondition is false.
    PreconditionFalse { precondition: String },
    /// No event of any of its parameter types was ever dispatched (and it needs none).
    NeverCandidate,
}

impl fmt::Display for WaitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitReason::RequiredMissing { params } => {
                let list: Vec<String> = params.iter().map(|p| format!("`{p}`")).collect();
                write!(
                    f,
                    "required parameter{} {} never got an event",
                    if params.len() == 1 { "" } else { "s" },
                    list.join(", ")
                )
            }
            WaitReason::FixedListShort { param, have, need } => {
                write!(f, "fixed list `{param}` has {have} of {need} events")
            }
            WaitReason::PreconditionFalse { precondition } => {
                write!(f, "precondition `{precondition}` is false")
            }
            WaitReason::NeverCandidate => {
                f.write_str("never a candidate: no event of its parameter types arrived")
            }
        }
    }
}

/// A step that never ran in a stalled state, and why.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Waiting {
    pub step: String,
    /// Whether it was ever evaluated as a candidate.
    pub was_candidate: bool,
    #[serde(flatten)]
    pub reason: WaitReason,
}

/// A reachable final state in which the run never ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stall {
    /// True when no start event ever began the run.
    pub never_started: bool,
    /// Steps that never ran, with what they wait for (may be empty: every step ran but
    /// none returned a stop event).
    pub waiting: Vec<Waiting>,
    pub witness: Vec<TraceStep>,
}

/// An event appended after the run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AfterStop {
    /// The event type.
    pub event: String,
    /// The step whose execution returned it, or None for an outside arrival.
    pub step: Option<String>,
    pub witness: Vec<TraceStep>,
}

/// An ExceptionEvent appended to the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExceptionFinding {
    /// The exception's type (ExceptionEvent or a subtype).
    pub event: String,
    /// The step whose execution produced it, or None for an outside arrival.
    pub step: Option<String>,
    /// The failure message when a failed execution produced it.
    pub message: Option<String>,
    /// It arrived after the run had already ended (kept as evidence only).
    pub after_stop: bool,
    pub witness: Vec<TraceStep>,
}

/// Which bound stopped the exploration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BoundKind {
    MaxStates,
    MaxDepth,
}

/// A bound was hit: the results are partial.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BoundHit {
    pub bound: BoundKind,
    pub limit: usize,
    pub message: String,
}

/// Counters of the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Stats {
    /// Distinct states kept.
    pub states: usize,
    /// Actions applied.
    pub transitions: usize,
    /// Transitions that reached an already known state (deduplicated).
    pub merged: usize,
    /// Distinct final states (no arrival left, nothing running).
    pub final_states: usize,
    /// States where a reduction took one action instead of branching.
    pub reduced: usize,
    /// States left unexpanded because of `max_depth`.
    pub cut_at_depth: usize,
    /// The longest path explored.
    pub longest_path: usize,
}

/// The result of an exploration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Exploration {
    pub workflow: String,
    pub options: ExploreOptions,
    /// Empty when the exploration is complete; otherwise the results are partial.
    pub bounds_hit: Vec<BoundHit>,
    pub stats: Stats,
    /// One entry per step, in declaration order.
    pub steps: Vec<StepExecutions>,
    /// Distinct stalls (by waiting steps and reasons), in discovery order.
    pub stalls: Vec<Stall>,
    /// How many distinct stalls were found (more than `stalls.len()` when capped).
    pub stalls_found: usize,
    /// Distinct events after stop (by type and producing step).
    pub after_stop: Vec<AfterStop>,
    /// Distinct exceptions (by producing step, message and whether after stop).
    pub exceptions: Vec<ExceptionFinding>,
    /// When `max_depth` cut a path: the steps that kept triggering one another on the first
    /// path cut (a loop), with the static check's finding and fix when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cycle: Option<crate::explain::CycleReport>,
}

impl Exploration {
    /// True when no bound was hit.
    pub fn is_complete(&self) -> bool {
        self.bounds_hit.is_empty()
    }
    /// True when some step can run more than once.
    pub fn has_multi_exec(&self) -> bool {
        self.steps.iter().any(|s| s.worst.unwrap_or(0) > 1)
    }
}

/// An explored action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Act {
    Arrive(u32),
    Complete(ExecutionId),
}

/// A kept state: the action that first reached it.
#[derive(Debug, Clone, Copy)]
struct Node {
    parent: u32,
    act: Act,
    depth: u32,
}

const ROOT: u32 = u32::MAX;

#[derive(Clone)]
struct State {
    run: Run,
    /// Arrival indexes not delivered yet, ascending.
    remaining: Vec<u32>,
}

struct Frame {
    node: u32,
    state: State,
    naming: Naming,
    acts: Vec<Act>,
    next: usize,
}

/// The spec, its resolved arrivals and precomputed tables.
struct Model {
    spec: Arc<CompiledSpec>,
    arrivals: Vec<Arrival>,
    /// Per arrival: the index of the first arrival with the same event id.
    first_of_id: Vec<u32>,
    /// Per arrival: its symmetry class for permuted delivery (same id, or same type
    /// without a label).
    class: Vec<u32>,
    /// Per step: offset of its first parameter in the flattened slot list.
    slot_offset: Vec<usize>,
    slots: usize,
    /// [`Model::invisible`] by (step, execution number of that step).
    invisible_cache: RefCell<FastMap<(StepIdx, u32), Option<bool>>>,
}

impl Model {
    fn new(spec: Arc<CompiledSpec>) -> Model {
        let arrivals = sim::arrivals(&spec);
        let mut first_of_id = Vec::with_capacity(arrivals.len());
        let mut class = Vec::with_capacity(arrivals.len());
        for (i, a) in arrivals.iter().enumerate() {
            let first = arrivals[..i]
                .iter()
                .position(|b| b.event.id == a.event.id)
                .unwrap_or(i) as u32;
            first_of_id.push(first);
            let c = if a.labelled {
                first
            } else {
                arrivals[..i]
                    .iter()
                    .position(|b| !b.labelled && b.event.ty == a.event.ty)
                    .unwrap_or(i) as u32
            };
            class.push(c);
        }
        let mut slot_offset = Vec::with_capacity(spec.steps.len());
        let mut slots = 0;
        for s in &spec.steps {
            slot_offset.push(slots);
            slots += s.params.len();
        }
        Model {
            spec,
            arrivals,
            first_of_id,
            class,
            slot_offset,
            slots,
            invisible_cache: RefCell::default(),
        }
    }

    fn initial(&self) -> State {
        State {
            run: Run::new(self.spec.clone(), run_key(sim::SIM_RUN_ID)),
            remaining: (0..self.arrivals.len() as u32).collect(),
        }
    }

    fn step_name(&self, step: StepIdx) -> &str {
        &self.spec.steps[step as usize].name
    }

    fn type_name(&self, t: TypeId) -> &str {
        &self.spec.types[t as usize].name
    }

    /// Applies an action through the core.
    fn apply(&self, st: &mut State, act: Act) -> Result<(), ExploreError> {
        let mut pre = DeclaredConditions;
        match act {
            Act::Arrive(i) => {
                st.remaining.retain(|&r| r != i);
                let a = &self.arrivals[i as usize];
                match st.run.append(a.event.clone(), &mut pre) {
                    Ok(_) | Err(AppendError::RunNotStarted { .. }) => {}
                    Err(e) => {
                        return Err(ExploreError::Core {
                            action: format!("arrive {}", a.label),
                            message: e.to_string(),
                        });
                    }
                }
            }
            Act::Complete(x) => {
                let attempt = st.run.execution(x).map(|e| e.attempt).unwrap_or(1);
                let outcome = sim::outcome_for(&st.run, x);
                st.run
                    .complete(x, attempt, outcome, &mut pre)
                    .map_err(|e| ExploreError::Core {
                        action: format!("complete {x}"),
                        message: e.to_string(),
                    })?;
            }
        }
        st.run.take_started();
        Ok(())
    }

    /// Whether completing `x` appends nothing a step consumes and nothing terminal
    /// (reduction 2). Also returns whether it appends anything at all.
    fn invisible(&self, run: &Run, x: ExecutionId) -> Option<bool> {
        let step = run.execution(x)?.step;
        // The outcome depends only on the step and which of its executions this is.
        let nth = run.executions()[..=x.0 as usize]
            .iter()
            .filter(|e| e.step == step)
            .count() as u32;
        if let Some(v) = self.invisible_cache.borrow().get(&(step, nth)) {
            return *v;
        }
        let v = self.invisible_uncached(run, x, step);
        self.invisible_cache.borrow_mut().insert((step, nth), v);
        v
    }

    fn invisible_uncached(&self, run: &Run, x: ExecutionId, step: StepIdx) -> Option<bool> {
        match sim::outcome_for(run, x) {
            Outcome::Failed(_) => (!self.spec.steps[step as usize].stop_on_error).then_some(false),
            Outcome::Returned(events) => {
                let quiet = events.iter().all(|e| match &e.ty {
                    crate::run::NewEventType::Known(t) => {
                        let kind = self.spec.types[*t as usize].kind;
                        !kind.is_terminal()
                            && (!kind.is_control() || self.spec.consumers(*t).is_empty())
                    }
                    crate::run::NewEventType::Foreign { kind, .. } => !kind.is_terminal(),
                });
                quiet.then_some(!events.is_empty())
            }
        }
    }

    /// The actions to explore from a state, and whether a reduction chose them.
    fn enabled(&self, st: &State, opts: &ExploreOptions) -> (Vec<Act>, bool) {
        let running: Vec<ExecutionId> = st.run.running().collect();
        if opts.partial_order {
            if st.run.is_terminated() {
                // Reduction 3: after the end, one fixed order.
                let one = running
                    .first()
                    .map(|x| Act::Complete(*x))
                    .or_else(|| st.remaining.first().map(|i| Act::Arrive(*i)));
                let total = running.len() + usize::from(!st.remaining.is_empty());
                return (one.into_iter().collect(), total > 1);
            }
            if let Some(x) = running
                .iter()
                .find(|x| self.invisible(&st.run, **x).is_some())
            {
                return (
                    vec![Act::Complete(*x)],
                    running.len() > 1 || !st.remaining.is_empty(),
                );
            }
            // Reduction 4: a re-delivery of an event already in the log is a no-op.
            let candidates: &[u32] = if opts.permute_arrivals {
                &st.remaining
            } else {
                &st.remaining[..st.remaining.len().min(1)]
            };
            if let Some(i) = candidates.iter().find(|i| {
                st.run
                    .seq_of(&self.arrivals[**i as usize].event.id)
                    .is_some()
            }) {
                return (vec![Act::Arrive(*i)], true);
            }
        }
        let mut acts = Vec::new();
        if opts.permute_arrivals {
            for (k, &i) in st.remaining.iter().enumerate() {
                let c = self.class[i as usize];
                let earlier_same = opts.partial_order
                    && st.remaining[..k]
                        .iter()
                        .any(|&j| self.class[j as usize] == c);
                if !earlier_same {
                    acts.push(Act::Arrive(i));
                }
            }
        } else if let Some(&i) = st.remaining.first() {
            acts.push(Act::Arrive(i));
        }
        acts.extend(running.into_iter().map(Act::Complete));
        (acts, false)
    }

    /// The dispatched events each (step, parameter) can bind, in arrival order — what the
    /// core's readiness and binding read.
    fn slots(&self, run: &Run) -> Vec<Vec<u32>> {
        let mut slots = Vec::new();
        self.fill_slots(run, &mut slots);
        slots
    }

    /// [`Model::slots`] into reused buffers.
    fn fill_slots(&self, run: &Run, slots: &mut Vec<Vec<u32>>) {
        slots.resize_with(self.slots, Vec::new);
        slots.iter_mut().for_each(Vec::clear);
        let end = match run.status() {
            RunStatus::NotStarted => return,
            RunStatus::Live => u32::MAX,
            RunStatus::Terminated { by } => by,
        };
        let mut started = false;
        for (seq, e) in run.log().iter().enumerate() {
            let seq = seq as u32;
            if seq >= end {
                break;
            }
            if !e.kind.is_control() {
                continue;
            }
            if !started {
                // Control events before the first start event were refused as orphans.
                if !e.kind.is_start() {
                    continue;
                }
                started = true;
            }
            if e.kind.is_terminal() {
                continue;
            }
            if let EventTy::Known(t) = e.ty {
                for &(step, param) in self.spec.consumers(t) {
                    slots[self.slot_offset[step as usize] + param as usize].push(seq);
                }
            }
        }
    }
}

/// The structural names of a state's events (by sequence number) and executions (by
/// id), extended as the run grows (see [`Model::extend_naming`]).
#[derive(Clone, Default)]
struct Naming {
    ev: Vec<u32>,
    xn: Vec<u32>,
    /// Events appended so far by each execution.
    outs: Vec<u32>,
}

/// Buffers reused by [`Model::key`] (one allocation per table per exploration).
#[derive(Default)]
struct KeyBuf {
    slots: Vec<Vec<u32>>,
    sorted: Vec<u32>,
    xs: Vec<[u32; 3]>,
    per_step: Vec<u32>,
    key: Vec<u32>,
}

/// A 128-bit fingerprint of a canonical key: two SipHash passes with different, fixed
/// prefixes (deterministic; which states merge never depends on the hash values, barring
/// a collision). Keeping fingerprints instead
/// of whole keys makes the state table 16 bytes per state however long the runs grow; two
/// different states merge only if both 64-bit halves collide, which for 10^6 states has a
/// probability below 10^-26.
fn fingerprint(key: &[u32]) -> u128 {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let half = |prefix: u64| {
        let mut h = DefaultHasher::new();
        prefix.hash(&mut h);
        key.hash(&mut h);
        h.finish()
    };
    (u128::from(half(0x5341_4150_6b65_7931)) << 64) | u128::from(half(0x5341_4150_6b65_7932))
}

/// Hash-consing of structural names.
#[derive(Default)]
struct Interner {
    map: FastMap<Box<[u32]>, u32>,
}

impl Interner {
    fn intern(&mut self, parts: &[u32]) -> u32 {
        if let Some(&id) = self.map.get(parts) {
            return id;
        }
        let id = self.map.len() as u32;
        self.map.insert(parts.into(), id);
        id
    }
}

const NAME_ARRIVAL: u32 = 0;
const NAME_OUTPUT: u32 = 1;
const NAME_EXECUTION: u32 = 2;

impl Model {
    /// The canonical key of a state (reduction 1).
    /// Names the events and executions that `run` gained since `naming` was last
    /// extended (the log and the execution table only grow).
    fn extend_naming(
        &self,
        run: &Run,
        naming: &mut Naming,
        names: &mut Interner,
        scratch: &mut Vec<u32>,
    ) {
        let log = run.log();
        for e in &log[naming.ev.len().min(log.len())..] {
            let ty = match e.ty {
                EventTy::Known(t) => t,
                EventTy::Foreign(i) => u32::MAX - i,
            };
            let n = match e.origin {
                Origin::Outside => {
                    let i = self
                        .arrivals
                        .iter()
                        .position(|a| a.event.id == e.id)
                        .map(|i| self.first_of_id[i])
                        .unwrap_or(u32::MAX);
                    names.intern(&[NAME_ARRIVAL, i, ty])
                }
                // Events come from executions that started in an earlier action, so their
                // producer is already named.
                Origin::Execution(x) => {
                    let xi = x.0 as usize;
                    let xn = naming.xn.get(xi).copied().unwrap_or(u32::MAX);
                    let k = naming.outs.get(xi).copied().unwrap_or(0);
                    if let Some(o) = naming.outs.get_mut(xi) {
                        *o += 1;
                    }
                    names.intern(&[NAME_OUTPUT, xn, k, ty])
                }
            };
            naming.ev.push(n);
        }
        // New executions bind events that are all named now.
        for xi in naming.xn.len()..run.executions().len() {
            let n = self.exec_name(run, ExecutionId(xi as u32), &naming.ev, names, scratch);
            naming.xn.push(n);
            naming.outs.push(0);
        }
    }

    /// The canonical key of a state (reduction 1); `naming` must be extended to `st`.
    fn key<'k>(&self, st: &State, naming: &Naming, buf: &'k mut KeyBuf) -> &'k [u32] {
        let run = &st.run;
        let execs = run.executions();
        let ev = &naming.ev;
        let KeyBuf {
            slots,
            sorted,
            xs,
            per_step,
            key,
        } = buf;
        key.clear();
        key.push(match run.status() {
            RunStatus::NotStarted => 0,
            RunStatus::Live => 1,
            RunStatus::Terminated { .. } => 2,
        });
        key.push(st.remaining.len() as u32);
        key.extend_from_slice(&st.remaining);
        self.fill_slots(run, slots);
        // Only what readiness and binding can still read (§4.3, §4.4): a single parameter
        // binds the latest event, a fixed list the set of its first N, a list the set of
        // all; the rest of a parameter's history cannot influence any later decision.
        for (si, s) in self.spec.steps.iter().enumerate() {
            for (pi, p) in s.params.iter().enumerate() {
                let slot = &slots[self.slot_offset[si] + pi];
                sorted.clear();
                match p.kind {
                    ParamKind::Required | ParamKind::Optional => {
                        sorted.extend(slot.last().map(|s| ev[*s as usize]));
                    }
                    ParamKind::FixedList => {
                        let n = slot.len().min(p.size as usize);
                        sorted.extend(slot[..n].iter().map(|s| ev[*s as usize]));
                        sorted.sort_unstable();
                    }
                    ParamKind::List => {
                        sorted.extend(slot.iter().map(|s| ev[*s as usize]));
                        sorted.sort_unstable();
                    }
                }
                key.push(sorted.len() as u32);
                key.extend_from_slice(sorted);
            }
        }
        per_step.clear();
        per_step.resize(self.spec.steps.len(), 0);
        xs.clear();
        for (i, x) in execs.iter().enumerate() {
            per_step[x.step as usize] += 1;
            let n = naming.xn.get(i).copied().unwrap_or(u32::MAX);
            let (state, nth) = match x.state {
                ExecState::Running => (0, per_step[x.step as usize]),
                ExecState::Completed => (1, 0),
                ExecState::Failed => (2, 0),
            };
            xs.push([n, state, nth]);
        }
        xs.sort_unstable();
        key.push(xs.len() as u32);
        key.extend(xs.iter().flatten());
        key
    }

    fn exec_name(
        &self,
        run: &Run,
        x: ExecutionId,
        ev: &[u32],
        names: &mut Interner,
        scratch: &mut Vec<u32>,
    ) -> u32 {
        let Some(e) = run.execution(x) else {
            return u32::MAX;
        };
        scratch.clear();
        scratch.push(NAME_EXECUTION);
        scratch.push(e.step);
        for (pi, b) in run.bindings(x).iter().enumerate() {
            let seqs = run.bound_seqs(e.step, pi as u32, *b);
            scratch.push(seqs.len() as u32);
            let start = scratch.len();
            scratch.extend(
                seqs.iter()
                    .map(|s| ev.get(*s as usize).copied().unwrap_or(u32::MAX)),
            );
            // An input set is a set of events (§4.5): the order within a list is incidental.
            scratch[start..].sort_unstable();
        }
        names.intern(scratch)
    }

    /// Why each step without an execution waits, in a final state.
    fn waiting(&self, run: &Run) -> Vec<Waiting> {
        let slots = self.slots(run);
        let mut out = Vec::new();
        for (si, s) in self.spec.steps.iter().enumerate() {
            if run.executions().iter().any(|x| x.step as usize == si) {
                continue;
            }
            let base = self.slot_offset[si];
            let have = |pi: usize| slots[base + pi].len();
            let was_candidate = run
                .records()
                .iter()
                .any(|r| matches!(r, Record::Candidate { step, .. } if step as usize == si));
            let missing: Vec<String> = s
                .params
                .iter()
                .enumerate()
                .filter(|(pi, p)| p.kind == ParamKind::Required && have(*pi) == 0)
                .map(|(_, p)| p.name.clone())
                .collect();
            let short = s
                .params
                .iter()
                .enumerate()
                .find(|(pi, p)| p.kind == ParamKind::FixedList && have(*pi) < p.size as usize);
            let reason = if !missing.is_empty() {
                WaitReason::RequiredMissing { params: missing }
            } else if let Some((pi, p)) = short {
                WaitReason::FixedListShort {
                    param: p.name.clone(),
                    have: have(pi),
                    need: p.size,
                }
            } else if !was_candidate {
                WaitReason::NeverCandidate
            } else if let Some(pc) = &s.precondition {
                WaitReason::PreconditionFalse {
                    precondition: pc.name.clone(),
                }
            } else {
                // Unreachable by §4.3 (a candidate with all inputs and no precondition
                // starts); reported as never a candidate rather than hidden.
                WaitReason::NeverCandidate
            };
            out.push(Waiting {
                step: s.name.clone(),
                was_candidate,
                reason,
            });
        }
        out
    }

    /// A display label for a logged event: `Type#label` for a labelled arrival, the
    /// simulator's `Type#n` for another arrival, `Type#seq` for anything else.
    fn event_label(&self, run: &Run, seq: u32) -> String {
        let Some(e) = run.log().get(seq as usize) else {
            return format!("?#{seq}");
        };
        let ty = run.type_name(e.ty);
        if e.origin == Origin::Outside
            && let Some(a) = self.arrivals.iter().find(|a| a.event.id == e.id)
        {
            return arrival_label(ty, a);
        }
        format!("{ty}#{seq}")
    }

    /// (parameter, bound value) for an execution.
    fn bindings(&self, run: &Run, x: ExecutionId) -> Vec<(String, String)> {
        let Some(e) = run.execution(x) else {
            return Vec::new();
        };
        let step = &self.spec.steps[e.step as usize];
        run.bindings(x)
            .iter()
            .enumerate()
            .map(|(pi, b)| {
                let labels: Vec<String> = run
                    .bound_seqs(e.step, pi as u32, *b)
                    .iter()
                    .map(|s| self.event_label(run, *s))
                    .collect();
                let value = match step.params[pi].kind {
                    ParamKind::Required | ParamKind::Optional => labels
                        .first()
                        .cloned()
                        .unwrap_or_else(|| "none".to_string()),
                    ParamKind::List | ParamKind::FixedList => format!("[{}]", labels.join(", ")),
                };
                (step.params[pi].name.clone(), value)
            })
            .collect()
    }

    /// Replays a path and renders it.
    fn trace(&self, path: &[Act]) -> Result<Vec<TraceStep>, ExploreError> {
        let mut st = self.initial();
        let mut out = Vec::with_capacity(path.len());
        for &act in path {
            let records_before = st.run.records().len();
            let log_before = st.run.log().len();
            let action = match act {
                Act::Arrive(i) => {
                    let a = &self.arrivals[i as usize];
                    let event = self.type_name(event_type(&a.event)).to_string();
                    TraceAction::Arrive {
                        duplicate: st.run.seq_of(&a.event.id).is_some(),
                        label: arrival_label(&event, a),
                        event,
                    }
                }
                Act::Complete(x) => {
                    let step = st
                        .run
                        .execution(x)
                        .map(|e| self.step_name(e.step).to_string())
                        .unwrap_or_default();
                    match sim::outcome_for(&st.run, x) {
                        Outcome::Returned(events) => TraceAction::Complete {
                            execution: x,
                            step,
                            // Filled in after the core appended them (with their labels).
                            outputs: Vec::with_capacity(events.len()),
                        },
                        Outcome::Failed(message) => {
                            let stop_on_error = st
                                .run
                                .execution(x)
                                .map(|e| self.spec.steps[e.step as usize].stop_on_error)
                                .unwrap_or(true);
                            TraceAction::Fail {
                                execution: x,
                                step,
                                message,
                                stop_on_error,
                            }
                        }
                    }
                }
            };
            let execs_before = st.run.executions().len();
            self.apply(&mut st, act)?;
            let run = &st.run;
            let started: Vec<ExecRef> = run.executions()[execs_before..]
                .iter()
                .enumerate()
                .map(|(k, e)| {
                    let x = ExecutionId((execs_before + k) as u32);
                    let inputs = self.bindings(run, x);
                    ExecRef {
                        execution: x,
                        step: self.step_name(e.step).to_string(),
                        bindings: inputs
                            .iter()
                            .map(|(p, v)| format!("{p}={v}"))
                            .collect::<Vec<_>>()
                            .join(", "),
                        inputs,
                    }
                })
                .collect();
            let produced: Vec<String> = run.log()[log_before..]
                .iter()
                .enumerate()
                .filter(|(_, e)| matches!((e.origin, act), (Origin::Execution(o), Act::Complete(x)) if o == x))
                .map(|(k, _)| self.event_label(run, (log_before + k) as u32))
                .collect();
            let mut action = action;
            if let TraceAction::Complete { outputs, .. } = &mut action {
                *outputs = produced.clone();
            }
            let mut notes = Vec::new();
            for r in run.records().slice(records_before..) {
                match &r {
                    Record::RunTerminated { seq, by } => {
                        let name = self.event_label(run, *seq);
                        notes.push(match by {
                            Termination::Stop => format!("run stopped by {name}"),
                            Termination::Exception => format!("run ended by {name}"),
                        });
                    }
                    Record::EventAfterStop { seq, .. } => {
                        let name = self.event_label(run, *seq);
                        notes.push(format!("{name} after stop (kept as evidence)"));
                    }
                    Record::OrphanEvent { seq } => {
                        let name = self.event_label(run, *seq);
                        notes.push(format!("{name} refused: the run has not started"));
                    }
                    _ => {}
                }
            }
            let mut text = match &action {
                TraceAction::Arrive {
                    label, duplicate, ..
                } => {
                    if *duplicate {
                        format!("arrive {label} (re-delivery: duplicate dropped)")
                    } else {
                        format!("arrive {label}")
                    }
                }
                TraceAction::Complete {
                    execution,
                    step,
                    outputs,
                } => {
                    let outs = if outputs.is_empty() {
                        "(nothing)".to_string()
                    } else {
                        outputs.join(", ")
                    };
                    format!("complete {step}#{execution} → {outs}")
                }
                TraceAction::Fail {
                    execution,
                    step,
                    message,
                    stop_on_error,
                } => {
                    if *stop_on_error {
                        let exception = produced
                            .first()
                            .cloned()
                            .unwrap_or_else(|| "ExceptionEvent".to_string());
                        format!("fail {step}#{execution} ({message}) → {exception}")
                    } else {
                        format!("fail {step}#{execution} ({message}), run continues")
                    }
                }
            };
            if !started.is_empty() {
                let list: Vec<String> = started.iter().map(ToString::to_string).collect();
                text.push_str(&format!("; starts {}", list.join(", ")));
            }
            for n in &notes {
                text.push_str("; ");
                text.push_str(n);
            }
            out.push(TraceStep {
                text,
                action,
                started,
                notes,
            });
        }
        Ok(out)
    }
}

/// How a trace names an outside arrival: `Type#label` for a labelled one, unless the label
/// already names the type (an arrival labelled `Go` of type `Go` is `Go`, not `Go#Go`); the
/// simulator's `Type#n` for one without a label.
fn arrival_label(ty: &str, a: &Arrival) -> String {
    let names_type = a.label == ty
        || a.label
            .strip_prefix(ty)
            .is_some_and(|rest| rest.starts_with('#'));
    if !a.labelled || names_type {
        a.label.clone()
    } else {
        format!("{ty}#{}", a.label)
    }
}

fn event_type(e: &crate::run::NewEvent) -> TypeId {
    match e.ty {
        crate::run::NewEventType::Known(t) => t,
        crate::run::NewEventType::Foreign { .. } => 0,
    }
}

/// The actions from the root (node 0) to node `id`.
fn path_to(nodes: &[Node], mut id: u32) -> Vec<Act> {
    let mut out = Vec::new();
    while id != 0 && id != ROOT {
        let n = nodes[id as usize];
        out.push(n.act);
        id = n.parent;
    }
    out.reverse();
    out
}

/// An exception's identity: (type, producing step, message, after stop).
type ExceptionKey = (String, Option<String>, Option<String>, bool);

/// Findings with their witness paths, before rendering.
#[derive(Default)]
struct Found {
    best: Vec<Option<usize>>,
    worst: Vec<Option<(usize, u32)>>,
    stall_keys: HashSet<(bool, Vec<Waiting>)>,
    stalls: Vec<(bool, Vec<Waiting>, u32)>,
    after_stop_keys: HashSet<(String, Option<String>)>,
    after_stop: Vec<(String, Option<String>, Vec<Act>)>,
    exception_keys: HashSet<ExceptionKey>,
    exceptions: Vec<(ExceptionKey, Vec<Act>)>,
}

/// Explores every interleaving of `spec`'s simulation section (see the module docs).
pub fn explore(
    spec: Arc<CompiledSpec>,
    options: &ExploreOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<Exploration, ExploreError> {
    let model = Model::new(spec);
    let opts = *options;
    let steps = model.spec.steps.len();
    let mut found = Found {
        best: vec![None; steps],
        worst: vec![None; steps],
        ..Found::default()
    };
    let mut stats = Stats::default();
    let mut bounds_hit = Vec::new();
    let mut names = Interner::default();
    // Keys are kept as 128-bit fingerprints (see `fingerprint`).
    let mut seen: FastMap<u128, u32> = FastMap::default();
    let mut keybuf = KeyBuf::default();
    let mut scratch = Vec::new();
    let mut nodes: Vec<Node> = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();

    let root = model.initial();
    // The root is node 0; its own action is never read (`path_to` stops there).
    nodes.push(Node {
        parent: ROOT,
        act: Act::Arrive(0),
        depth: 0,
    });
    let mut root_naming = Naming::default();
    if opts.dedup {
        model.extend_naming(&root.run, &mut root_naming, &mut names, &mut scratch);
        seen.insert(fingerprint(model.key(&root, &root_naming, &mut keybuf)), 0);
    }
    stats.states = 1;
    let (acts, reduced) = model.enabled(&root, &opts);
    stats.reduced += usize::from(reduced);
    if acts.is_empty() {
        on_final(&model, &root, 0, &mut found, &mut stats);
    } else {
        stack.push(Frame {
            node: 0,
            state: root,
            naming: root_naming,
            acts,
            next: 0,
        });
    }
    let mut states_bound = false;
    let mut cycle = None;
    while let Some(frame) = stack.last_mut() {
        if frame.next == frame.acts.len() {
            stack.pop();
            continue;
        }
        let act = frame.acts[frame.next];
        frame.next += 1;
        let parent = frame.node;
        let mut child = frame.state.clone();
        model.apply(&mut child, act)?;
        stats.transitions += 1;
        let depth = nodes[parent as usize].depth + 1;
        if stats.transitions % PROGRESS_EVERY == 0 {
            progress(Progress {
                states: stats.states,
                transitions: stats.transitions,
                merged: stats.merged,
                final_states: stats.final_states,
                depth: depth as usize,
                max_states: opts.max_states,
                done: false,
            });
        }
        stats.longest_path = stats.longest_path.max(depth as usize);
        observe(
            &model,
            &frame.state,
            &child,
            act,
            parent,
            &nodes,
            &opts,
            &mut found,
        );
        let mut naming = Naming::default();
        if opts.dedup {
            naming.clone_from(&frame.naming);
            model.extend_naming(&child.run, &mut naming, &mut names, &mut scratch);
            let key = fingerprint(model.key(&child, &naming, &mut keybuf));
            if seen.contains_key(&key) {
                stats.merged += 1;
                continue;
            }
            if nodes.len() >= opts.max_states {
                states_bound = true;
                break;
            }
            seen.insert(key, nodes.len() as u32);
        } else if nodes.len() >= opts.max_states {
            states_bound = true;
            break;
        }
        let id = nodes.len() as u32;
        nodes.push(Node { parent, act, depth });
        stats.states += 1;
        let (acts, reduced) = model.enabled(&child, &opts);
        if acts.is_empty() {
            on_final(&model, &child, id, &mut found, &mut stats);
            continue;
        }
        if depth as usize >= opts.max_depth {
            if stats.cut_at_depth == 0 {
                cycle = crate::explain::cycle_report(&child.run);
            }
            stats.cut_at_depth += 1;
            continue;
        }
        stats.reduced += usize::from(reduced);
        stack.push(Frame {
            node: id,
            state: child,
            naming,
            acts,
            next: 0,
        });
    }
    drop(stack);
    if states_bound {
        bounds_hit.push(BoundHit {
            bound: BoundKind::MaxStates,
            limit: opts.max_states,
            message: format!(
                "bound hit: results are partial — stopped after {} states (max_states); raise --max-states to explore further",
                opts.max_states
            ),
        });
    }
    if stats.cut_at_depth > 0 {
        let cause = match cycle.as_ref().map(|c| c.steps.as_slice()) {
            Some([one]) => format!("`{one}` keeps triggering itself"),
            Some(many @ [_, _, ..]) => format!(
                "steps {} keep triggering each other",
                many.iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => "a cycle without a bound".to_string(),
        };
        bounds_hit.push(BoundHit {
            bound: BoundKind::MaxDepth,
            limit: opts.max_depth,
            message: format!(
                "bound hit: results are partial — {} at depth {} {} not expanded (max_depth); {cause}, or raise --max-depth",
                if stats.cut_at_depth == 1 {
                    "1 state".to_string()
                } else {
                    format!("{} states", stats.cut_at_depth)
                },
                opts.max_depth,
                if stats.cut_at_depth == 1 { "was" } else { "were" }
            ),
        });
    }
    progress(Progress {
        states: stats.states,
        transitions: stats.transitions,
        merged: stats.merged,
        final_states: stats.final_states,
        depth: 0,
        max_states: opts.max_states,
        done: true,
    });

    let path = |id: u32| path_to(&nodes, id);
    let mut step_results = Vec::with_capacity(steps);
    for si in 0..steps {
        let worst_witness = match found.worst[si] {
            Some((_, id)) => model.trace(&path(id))?,
            None => Vec::new(),
        };
        let name = model.step_name(si as StepIdx).to_string();
        step_results.push(StepExecutions {
            reruns: reruns(&name, &worst_witness),
            step: name,
            best: found.best[si],
            worst: found.worst[si].map(|(n, _)| n),
            worst_witness,
        });
    }
    let mut stalls = Vec::new();
    for (never_started, waiting, id) in &found.stalls {
        stalls.push(Stall {
            never_started: *never_started,
            waiting: waiting.clone(),
            witness: model.trace(&path(*id))?,
        });
    }
    let mut after_stop = Vec::new();
    for (event, step, p) in &found.after_stop {
        after_stop.push(AfterStop {
            event: event.clone(),
            step: step.clone(),
            witness: model.trace(p)?,
        });
    }
    let mut exceptions = Vec::new();
    for ((event, step, message, after), p) in &found.exceptions {
        exceptions.push(ExceptionFinding {
            event: event.clone(),
            step: step.clone(),
            message: message.clone(),
            after_stop: *after,
            witness: model.trace(p)?,
        });
    }
    Ok(Exploration {
        workflow: model.spec.name.clone(),
        options: opts,
        bounds_hit,
        stats,
        steps: step_results,
        stalls,
        stalls_found: found.stall_keys.len(),
        after_stop,
        exceptions,
        cycle,
    })
}

/// What changed between consecutive executions of `step` in a witness.
fn reruns(step: &str, witness: &[TraceStep]) -> Vec<String> {
    let runs: Vec<&ExecRef> = witness
        .iter()
        .flat_map(|t| &t.started)
        .filter(|e| e.step == step)
        .collect();
    runs.windows(2)
        .map(|w| {
            let changes: Vec<String> = w[0]
                .inputs
                .iter()
                .zip(&w[1].inputs)
                .filter(|(a, b)| a.1 != b.1)
                .map(|(a, b)| format!("`{}` {} → {}", a.0, a.1, b.1))
                .collect();
            let what = if changes.is_empty() {
                "the same events, bound differently".to_string()
            } else {
                changes.join(", ")
            };
            format!("{}#{}: {what}", w[1].step, w[1].execution)
        })
        .collect()
}

/// Records a final state.
fn on_final(model: &Model, st: &State, id: u32, found: &mut Found, stats: &mut Stats) {
    stats.final_states += 1;
    for si in 0..model.spec.steps.len() {
        let n = st.run.execution_count(si as StepIdx);
        if found.best[si].is_none_or(|b| n < b) {
            found.best[si] = Some(n);
        }
        if found.worst[si].is_none_or(|(w, _)| n > w) {
            found.worst[si] = Some((n, id));
        }
    }
    if !st.run.is_terminated() {
        let never_started = st.run.status() == RunStatus::NotStarted;
        let waiting = model.waiting(&st.run);
        let key = (never_started, waiting);
        if !found.stall_keys.contains(&key) {
            found.stall_keys.insert(key.clone());
            if found.stalls.len() < MAX_REPORTED_STALLS {
                found.stalls.push((key.0, key.1, id));
            }
        }
    }
}

/// Looks at what one transition appended: exceptions, events after stop, and (with
/// reduction 2) the events after stop of earlier invisible completions.
#[allow(clippy::too_many_arguments)]
fn observe(
    model: &Model,
    parent: &State,
    child: &State,
    act: Act,
    parent_id: u32,
    nodes: &[Node],
    opts: &ExploreOptions,
    found: &mut Found,
) {
    let run = &child.run;
    let witness = |extra: Option<ExecutionId>| -> Vec<Act> {
        let mut p = path_to(nodes, parent_id);
        p.push(act);
        if let Some(x) = extra {
            p.retain(|a| *a != Act::Complete(x));
            p.push(Act::Complete(x));
        }
        p
    };
    let origin_step = |o: &Origin| -> Option<String> {
        match o {
            Origin::Outside => None,
            Origin::Execution(x) => run
                .execution(*x)
                .map(|e| model.step_name(e.step).to_string()),
        }
    };
    let log_before = parent.run.log().len();
    let records = run.records().slice(parent.run.records().len()..);
    let after_stop_seqs: Vec<u32> = records
        .iter()
        .filter_map(|r| match r {
            Record::EventAfterStop { seq, .. } => Some(seq),
            _ => None,
        })
        .collect();
    for (k, e) in run.log()[log_before..].iter().enumerate() {
        let seq = (log_before + k) as u32;
        let event = run.type_name(e.ty).to_string();
        let step = origin_step(&e.origin);
        let after = after_stop_seqs.contains(&seq);
        if after {
            let key = (event.clone(), step.clone());
            if found.after_stop_keys.insert(key) {
                found
                    .after_stop
                    .push((event.clone(), step.clone(), witness(None)));
            }
        }
        if e.kind.is_exception() {
            let message = match e.origin {
                Origin::Execution(x) => run.execution_error(x).map(str::to_string),
                Origin::Outside => None,
            };
            let key = (event.clone(), step.clone(), message.clone(), after);
            if found.exception_keys.insert(key) {
                found
                    .exceptions
                    .push(((event, step, message, after), witness(None)));
            }
        }
    }
    // Reduction 2's deferred completions: had they waited, their events would follow the stop.
    if opts.partial_order && !parent.run.is_terminated() && run.is_terminated() {
        for (i, x) in run.executions().iter().enumerate() {
            let id = ExecutionId(i as u32);
            if x.state != ExecState::Completed || model.invisible(run, id) != Some(true) {
                continue;
            }
            let Outcome::Returned(events) = sim::outcome_for(run, id) else {
                continue;
            };
            let step = Some(model.step_name(x.step).to_string());
            for e in events {
                let event = model.type_name(event_type(&e)).to_string();
                let key = (event.clone(), step.clone());
                if found.after_stop_keys.insert(key) {
                    found
                        .after_stop
                        .push((event, step.clone(), witness(Some(id))));
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{SpecSyntax, compile_spec_text};

    fn spec(yaml: &str) -> Arc<CompiledSpec> {
        Arc::new(compile_spec_text(yaml, SpecSyntax::Yaml).unwrap())
    }

    fn run(yaml: &str) -> Exploration {
        run_with(yaml, ExploreOptions::default())
    }

    fn run_with(yaml: &str, opts: ExploreOptions) -> Exploration {
        explore(spec(yaml), &opts, &mut |_| {}).unwrap()
    }

    fn step<'a>(x: &'a Exploration, name: &str) -> &'a StepExecutions {
        x.steps.iter().find(|s| s.step == name).unwrap()
    }

    const RACE: &str = r#"
name: race
events:
  - {name: A}
  - {name: B}
  - {name: Done, parents: [StopEvent]}
steps:
  - name: make_a
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [A]
  - name: make_b
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [B]
  - name: answer
    params:
      - {name: a, kind: required, types: [A]}
      - {name: b, kind: optional, types: [B]}
    outputs: [Done]
simulation:
  arrivals: [{event: UserMessageEvent, label: q1}]
"#;

    #[test]
    fn race_condition_runs_twice_worst_case_and_once_best_case() {
        let x = run(RACE);
        assert!(x.is_complete());
        let answer = step(&x, "answer");
        assert_eq!(answer.worst, Some(2));
        assert_eq!(answer.best, Some(1));
        // The witness really runs `answer` twice when replayed.
        let starts = answer
            .worst_witness
            .iter()
            .flat_map(|t| &t.started)
            .filter(|e| e.step == "answer")
            .count();
        assert_eq!(starts, 2);
        assert_eq!(
            answer.worst_witness[0].text,
            "arrive UserMessageEvent#q1; starts make_a#x0 (q=UserMessageEvent#q1), make_b#x1 (q=UserMessageEvent#q1)"
        );
        // Once without B, once with it.
        let bindings: Vec<&str> = answer
            .worst_witness
            .iter()
            .flat_map(|t| &t.started)
            .filter(|e| e.step == "answer")
            .map(|e| e.bindings.as_str())
            .collect();
        assert_eq!(bindings.len(), 2);
        assert!(bindings[0].ends_with("b=none"), "{bindings:?}");
        assert!(bindings[1].contains("b=B#"), "{bindings:?}");
        assert_eq!(answer.reruns.len(), 1);
        assert!(
            answer.reruns[0].contains("`b` none → B#"),
            "{:?}",
            answer.reruns
        );
        assert_eq!(step(&x, "make_a").worst, Some(1));
        assert!(x.has_multi_exec());
    }

    #[test]
    fn race_with_precondition_fix_runs_once() {
        let fixed = RACE.replace(
            "    outputs: [Done]\n",
            "    outputs: [Done]\n    precondition: {name: both, reads: [B], when: {present: b}}\n",
        );
        let x = run(&fixed);
        let answer = step(&x, "answer");
        assert_eq!((answer.best, answer.worst), (Some(1), Some(1)));
        assert!(x.stalls.is_empty());
        assert!(!x.has_multi_exec());
    }

    #[test]
    fn execution_budget_caps_the_race() {
        let capped = RACE.replace(
            "    outputs: [Done]\n",
            "    outputs: [Done]\n    max_executions_per_run: 1\n",
        );
        let x = run(&capped);
        let answer = step(&x, "answer");
        assert_eq!((answer.best, answer.worst), (Some(1), Some(1)));
        // B can still arrive after the stop: evidence, not a second execution.
        assert!(x.after_stop.iter().any(|a| a.event == "B"));
    }

    #[test]
    fn failure_without_stop_on_error_stalls_its_consumer() {
        let yaml = RACE.replace(
            "    outputs: [A]\n",
            "    outputs: [A]\n    stop_on_error: false\n",
        ) + "  behaviour:\n    make_a: {fail: \"no topic\"}\n";
        let x = run(&yaml);
        assert!(x.exceptions.is_empty(), "{:?}", x.exceptions);
        assert_eq!(x.stalls.len(), 1);
        assert_eq!(
            x.stalls[0].waiting,
            vec![Waiting {
                step: "answer".into(),
                // B made it a candidate; A never came.
                was_candidate: true,
                reason: WaitReason::RequiredMissing {
                    params: vec!["a".into()]
                },
            }]
        );
        let w = &x.stalls[0].witness;
        assert!(
            w.iter()
                .any(|t| t.text.contains("fail make_a#x0 (no topic), run continues")),
            "{w:?}"
        );
    }

    #[test]
    fn per_execution_behaviour_is_followed() {
        // The second execution of `answer` (the one with B) returns nothing: no second stop.
        let yaml = format!("{RACE}  behaviour:\n    answer: {{executions: {{2: {{emit: []}}}}}}\n");
        let x = run(&yaml);
        assert_eq!(step(&x, "answer").worst, Some(2));
        assert!(!x.after_stop.iter().any(|a| a.event == "Done"));
        let w = &step(&x, "answer").worst_witness;
        assert!(w.iter().any(|t| t.text.contains("→ (nothing)")), "{w:?}");
    }

    const FAN_IN: &str = r#"
name: fanin
events:
  - {name: Part}
  - {name: Merged}
  - {name: Done, parents: [StopEvent]}
steps:
  - name: w1
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Part]
  - name: w2
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Part]
  - name: w3
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Part]
  - name: merge
    params: [PARAM]
    outputs: [Merged]
  - name: finish
    params: [{name: m, kind: required, types: [Merged]}]
    outputs: [Done]
simulation:
  arrivals: [{event: UserMessageEvent, label: q1}]
"#;

    #[test]
    fn list_parameter_reruns_on_every_arrival() {
        let x = run(&FAN_IN.replace("PARAM", "{name: parts, kind: list, types: [Part]}"));
        assert!(x.is_complete());
        let merge = step(&x, "merge");
        assert_eq!(merge.worst, Some(3));
        // A Merged can stop the run before the last Parts arrive.
        assert_eq!(merge.best, Some(1));
        assert!(x.after_stop.iter().any(|a| a.event == "Part"));
    }

    #[test]
    fn fixed_list_runs_once() {
        let x = run(&FAN_IN.replace(
            "PARAM",
            "{name: parts, kind: fixed_list, types: [Part], size: 3}",
        ));
        let merge = step(&x, "merge");
        assert_eq!((merge.best, merge.worst), (Some(1), Some(1)));
        assert!(x.stalls.is_empty());
        assert!(x.after_stop.is_empty());
        // The 3! orders in which the parts arrive bind the same set: one final state.
        assert_eq!(x.stats.final_states, 1);
    }

    #[test]
    fn fixed_list_larger_than_producers_stalls_with_have_and_need() {
        let x = run(&FAN_IN.replace(
            "PARAM",
            "{name: parts, kind: fixed_list, types: [Part], size: 4}",
        ));
        assert_eq!(x.stalls.len(), 1);
        let stall = &x.stalls[0];
        let merge = stall.waiting.iter().find(|w| w.step == "merge").unwrap();
        assert_eq!(
            merge.reason,
            WaitReason::FixedListShort {
                param: "parts".into(),
                have: 3,
                need: 4
            }
        );
        let finish = stall.waiting.iter().find(|w| w.step == "finish").unwrap();
        assert_eq!(
            finish.reason,
            WaitReason::RequiredMissing {
                params: vec!["m".into()]
            }
        );
        assert!(!finish.was_candidate);
        assert_eq!(step(&x, "merge").worst, Some(0));
    }

    #[test]
    fn missing_upstream_and_false_precondition_stall() {
        let x = run(r#"
name: stall
events:
  - {name: Hint}
  - {name: Ready}
  - {name: Done, parents: [StopEvent]}
steps:
  - name: prepare
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Ready]
  - name: use_hint
    params:
      - {name: r, kind: required, types: [Ready]}
      - {name: h, kind: required, types: [Hint]}
    outputs: [Done]
  - name: gated
    params: [{name: r, kind: required, types: [Ready]}]
    precondition: {name: never, when: {always: false}}
    outputs: [Done]
simulation:
  arrivals: [{event: UserMessageEvent}]
"#);
        assert_eq!(x.stalls.len(), 1);
        let w = &x.stalls[0].waiting;
        assert_eq!(
            w[0],
            Waiting {
                step: "use_hint".into(),
                was_candidate: true,
                reason: WaitReason::RequiredMissing {
                    params: vec!["h".into()]
                }
            }
        );
        assert_eq!(
            w[1].reason,
            WaitReason::PreconditionFalse {
                precondition: "never".into()
            }
        );
        assert_eq!(x.stalls[0].witness.len(), 2);
    }

    #[test]
    fn run_that_never_starts_is_a_stall() {
        let x = run(r#"
name: nostart
events: [{name: Hint}]
steps:
  - name: s
    params: [{name: h, kind: optional, types: [Hint]}]
    outputs: []
simulation:
  arrivals: [{event: Hint}]
"#);
        assert_eq!(x.stalls.len(), 1);
        assert!(x.stalls[0].never_started);
        assert_eq!(x.stalls[0].waiting[0].reason, WaitReason::NeverCandidate);
        assert!(x.stalls[0].witness[0].text.contains("refused"));
    }

    const AFTER_STOP: &str = r#"
name: afterstop
events:
  - {name: Note}
  - {name: Done, parents: [StopEvent]}
steps:
  - name: stopper
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Done]
  - name: logger
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Note]
simulation:
  arrivals: [{event: UserMessageEvent, label: q1}]
"#;

    #[test]
    fn step_racing_a_stop_emits_after_stop() {
        let x = run(AFTER_STOP);
        assert_eq!(x.after_stop.len(), 1);
        let a = &x.after_stop[0];
        assert_eq!(a.event, "Note");
        assert_eq!(a.step.as_deref(), Some("logger"));
        // The witness is replayed through the core: its last step is the late completion.
        let last = a.witness.last().unwrap();
        assert!(last.text.starts_with("complete logger#"), "{}", last.text);
        assert!(
            last.notes
                .iter()
                .any(|n| n.starts_with("Note#") && n.contains("after stop")),
            "{:?}",
            last.notes
        );
        // logger's completion is invisible (nobody takes Note): it was not branched on.
        assert!(x.stats.reduced > 0);
    }

    #[test]
    fn failing_step_is_a_reachable_exception() {
        let x = run(&format!(
            "{AFTER_STOP}  behaviour:\n    logger: {{fail: \"model timed out\"}}\n"
        ));
        assert!(
            x.exceptions
                .iter()
                .any(|e| e.step.as_deref() == Some("logger")
                    && e.message.as_deref() == Some("model timed out")
                    && !e.after_stop)
        );
        // Failing after the stop is also reachable, as evidence only.
        assert!(x.exceptions.iter().any(|e| e.after_stop));
        let e = x.exceptions.iter().find(|e| !e.after_stop).unwrap();
        assert!(e.witness.last().unwrap().text.contains("→ ExceptionEvent"));
    }

    const DIAMOND: &str = r#"
name: diamond
events:
  - {name: X}
  - {name: Y}
  - {name: Z}
  - {name: Done, parents: [StopEvent]}
steps:
  - name: a
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [X]
  - name: b
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Y]
  - name: c
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Z]
  - name: join
    params:
      - {name: x, kind: required, types: [X]}
      - {name: y, kind: required, types: [Y]}
      - {name: z, kind: required, types: [Z]}
    outputs: [Done]
simulation:
  arrivals: [{event: UserMessageEvent}]
"#;

    #[test]
    fn dedup_merges_interleavings_of_a_diamond() {
        let naive = run_with(
            DIAMOND,
            ExploreOptions {
                dedup: false,
                partial_order: false,
                ..ExploreOptions::default()
            },
        );
        let x = run(DIAMOND);
        // 3! orders of a, b, c: the tree has 1 + 1 + 3 + 6 + 6 + 6 nodes, the graph
        // 1 + 1 + 3 + 3 + 1 + 1 states.
        assert_eq!(naive.stats.states, 23);
        assert_eq!(x.stats.states, 10);
        assert!(x.stats.merged > 0);
        assert_eq!(naive.stats.final_states, 6);
        assert_eq!(x.stats.final_states, 1);
        assert_eq!(step(&x, "join").worst, Some(1));
    }

    const CYCLE: &str = r#"
name: cycle
events: [{name: Tick}]
steps:
  - name: begin
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Tick]
  - name: again
    params: [{name: t, kind: required, types: [Tick]}]
    outputs: [Tick]
simulation:
  arrivals: [{event: UserMessageEvent}]
"#;

    #[test]
    fn depth_bound_is_reported() {
        let x = run_with(
            CYCLE,
            ExploreOptions {
                max_depth: 20,
                ..ExploreOptions::default()
            },
        );
        assert!(!x.is_complete());
        assert_eq!(x.bounds_hit[0].bound, BoundKind::MaxDepth);
        assert!(x.bounds_hit[0].message.contains("results are partial"));
    }

    #[test]
    fn the_depth_bound_names_the_steps_that_loop() {
        let x = run_with(
            CYCLE,
            ExploreOptions {
                max_depth: 20,
                ..ExploreOptions::default()
            },
        );
        let c = x.cycle.as_ref().expect("a loop is named");
        assert_eq!(c.steps, ["again"]);
        assert_eq!(c.code, Some("SAAP004"));
        assert!(c.fix.contains("max_executions_per_run"), "{}", c.fix);
        // One arrival and 19 completions: begin and 19 `again`s, each started by the Tick of
        // the one before; the chain holds every execution.
        assert_eq!(c.chain, 20);
        assert!(
            x.bounds_hit[0]
                .message
                .contains("`again` keeps triggering itself"),
            "{}",
            x.bounds_hit[0].message
        );
        // A bounded exploration names no loop.
        let done = run(CYCLE_BOUNDED);
        assert!(done.is_complete());
        assert!(done.cycle.is_none());
    }

    const CYCLE_BOUNDED: &str = r#"
name: cycle
events: [{name: Tick}]
steps:
  - name: begin
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Tick]
  - name: again
    params: [{name: t, kind: required, types: [Tick]}]
    outputs: [Tick]
    max_executions_per_run: 3
simulation:
  arrivals: [{event: UserMessageEvent}]
"#;

    #[test]
    fn an_arrival_labelled_with_its_type_name_is_printed_once() {
        let x = run(r#"
name: go
events: [{name: Go, kind: start}, {name: Done, kind: stop}]
steps:
  - {name: s, params: [{name: g, kind: required, types: [Go]}], outputs: [Done]}
simulation:
  arrivals: [{event: Go, label: Go}, {event: Go, label: again}, Go]
"#);
        let s = step(&x, "s");
        let texts: Vec<&str> = s.worst_witness.iter().map(|t| t.text.as_str()).collect();
        assert!(
            texts[0].starts_with("arrive Go; starts s#x0 (g=Go)"),
            "{texts:?}"
        );
        assert!(!texts.concat().contains("Go#Go"), "{texts:?}");
        // Other labels keep the type in front; an unlabelled arrival is `Type#n`.
        assert!(texts[1].starts_with("arrive Go#again"), "{texts:?}");
        assert!(
            texts.iter().any(|t| t.starts_with("arrive Go#3")),
            "{texts:?}"
        );
    }

    #[test]
    fn state_bound_is_reported_and_progress_is_called() {
        let mut calls = Vec::new();
        let x = explore(
            spec(CYCLE),
            &ExploreOptions {
                max_states: 5,
                ..ExploreOptions::default()
            },
            &mut |p| calls.push(p),
        )
        .unwrap();
        assert_eq!(x.bounds_hit[0].bound, BoundKind::MaxStates);
        assert_eq!(x.stats.states, 5);
        assert!(calls.last().unwrap().done);
    }

    #[test]
    fn permuted_arrivals_find_the_late_hint() {
        let yaml = r#"
name: hints
events:
  - {name: Hint}
  - {name: Done, parents: [StopEvent]}
steps:
  - name: answer
    params:
      - {name: q, kind: required, types: [UserMessageEvent]}
      - {name: h, kind: optional, types: [Hint]}
    outputs: [Done]
simulation:
  arrivals: [{event: Hint}, {event: UserMessageEvent}]
"#;
        let declared = run(yaml);
        // In declared order the hint arrives first: refused as an orphan, answer runs once.
        assert_eq!(step(&declared, "answer").worst, Some(1));
        let permuted = run_with(
            yaml,
            ExploreOptions {
                permute_arrivals: true,
                ..ExploreOptions::default()
            },
        );
        let answer = step(&permuted, "answer");
        assert_eq!(answer.worst, Some(2));
        assert_eq!(answer.best, Some(1));
    }

    #[test]
    fn redelivered_label_is_dropped_and_taken_without_branching() {
        let yaml = r#"
name: redeliver
events: [{name: Done, parents: [StopEvent]}]
steps:
  - name: answer
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Done]
simulation:
  arrivals:
    - {event: UserMessageEvent, label: q1}
    - {event: UserMessageEvent, label: q1}
"#;
        let x = run(yaml);
        assert_eq!(step(&x, "answer").worst, Some(1));
        assert!(x.after_stop.is_empty());
        let w = &step(&x, "answer").worst_witness;
        assert!(w.iter().any(|t| t.text.contains("duplicate dropped")));
    }

    /// Everything the report says, as comparable signatures.
    fn signature(x: &Exploration) -> String {
        let mut stalls: Vec<String> = x
            .stalls
            .iter()
            .map(|s| format!("{}:{:?}", s.never_started, s.waiting))
            .collect();
        stalls.sort();
        let mut after: Vec<String> = x
            .after_stop
            .iter()
            .map(|a| format!("{}<{:?}", a.event, a.step))
            .collect();
        after.sort();
        let mut exc: Vec<String> = x
            .exceptions
            .iter()
            .map(|e| format!("{}<{:?}:{:?}:{}", e.event, e.step, e.message, e.after_stop))
            .collect();
        exc.sort();
        let steps: Vec<String> = x
            .steps
            .iter()
            .map(|s| format!("{}={:?}..{:?}", s.step, s.best, s.worst))
            .collect();
        format!("{steps:?}\n{stalls:?}\n{after:?}\n{exc:?}")
    }

    #[test]
    fn reductions_do_not_change_any_result() {
        let specs = [
            RACE.to_string(),
            FAN_IN.replace("PARAM", "{name: parts, kind: list, types: [Part]}"),
            FAN_IN.replace(
                "PARAM",
                "{name: parts, kind: fixed_list, types: [Part], size: 4}",
            ),
            AFTER_STOP.to_string(),
            format!("{AFTER_STOP}  behaviour:\n    logger: {{fail: boom}}\n"),
            format!(
                "{AFTER_STOP}  behaviour:\n    stopper: {{emit: []}}\n    logger: {{executions: {{1: {{emit: [Note, Note]}}}}}}\n"
            ),
            DIAMOND.to_string(),
        ];
        for yaml in &specs {
            for permute_arrivals in [false, true] {
                let full = run_with(
                    yaml,
                    ExploreOptions {
                        dedup: false,
                        partial_order: false,
                        permute_arrivals,
                        ..ExploreOptions::default()
                    },
                );
                for (dedup, partial_order) in [(true, false), (false, true), (true, true)] {
                    let reduced = run_with(
                        yaml,
                        ExploreOptions {
                            dedup,
                            partial_order,
                            permute_arrivals,
                            ..ExploreOptions::default()
                        },
                    );
                    assert_eq!(
                        signature(&full),
                        signature(&reduced),
                        "dedup={dedup} por={partial_order} permute={permute_arrivals}\n{yaml}"
                    );
                    assert!(reduced.stats.states <= full.stats.states);
                }
            }
        }
    }

    mod random_specs {
        use super::*;
        use crate::spec::{
            ArrivalSpec, BehaviourSpec, Condition, EventTypeSpec, ExecutionBehaviour, ParamSpec,
            PreconditionSpec, SimulationSpec, StepSpec, WorkflowSpec,
        };
        use proptest::prelude::*;
        use std::collections::BTreeMap;

        const INPUTS: [&str; 4] = ["UserMessageEvent", "A", "B", "C"];
        const OUTPUTS: [&str; 6] = ["A", "B", "C", "Done", "Note", "Seen"];

        fn arb_param(i: usize) -> impl Strategy<Value = ParamSpec> {
            (
                prop_oneof![
                    Just(ParamKind::Required),
                    Just(ParamKind::Optional),
                    Just(ParamKind::List),
                    Just(ParamKind::FixedList)
                ],
                proptest::sample::subsequence(INPUTS.to_vec(), 1..=2),
                1u32..=2,
            )
                .prop_map(move |(kind, types, n)| ParamSpec {
                    name: format!("p{i}"),
                    kind,
                    types: types.into_iter().map(String::from).collect(),
                    size: (kind == ParamKind::FixedList).then_some(n),
                })
        }

        fn arb_step(i: usize) -> impl Strategy<Value = (StepSpec, Option<BehaviourSpec>)> {
            (
                (1usize..=2).prop_flat_map(|n| {
                    (0..n).map(arb_param).collect::<Vec<_>>()
                }),
                proptest::sample::subsequence(OUTPUTS.to_vec(), 0..=2),
                prop_oneof![Just(None), (1u32..=2).prop_map(Some)],
                any::<bool>(),
                prop_oneof![
                    3 => Just(None),
                    1 => Just(Some(Condition::Present("p0".into()))),
                    1 => Just(Some(Condition::CountAtLeast { param: "p0".into(), n: 2 })),
                    1 => Just(Some(Condition::Always(false))),
                ],
                prop_oneof![
                    4 => Just(None),
                    1 => Just(Some(BehaviourSpec { fail: Some("boom".into()), ..BehaviourSpec::default() })),
                    1 => Just(Some(BehaviourSpec {
                        executions: [(2, ExecutionBehaviour::Emit(vec!["Done".into()]))].into(),
                        ..BehaviourSpec::default()
                    })),
                    1 => Just(Some(BehaviourSpec {
                        executions: [(1, ExecutionBehaviour::Fail("first fails".into()))].into(),
                        ..BehaviourSpec::default()
                    })),
                ],
            )
                .prop_map(move |(params, outputs, max, stop_on_error, when, behaviour)| {
                    (
                        StepSpec {
                            name: format!("s{i}"),
                            params,
                            outputs: outputs.into_iter().map(String::from).collect(),
                            output_max: Default::default(),
                            returns_together: Vec::new(),
                            max_executions_per_run: max,
                            stop_on_error,
                            precondition: when.map(|w| PreconditionSpec {
                                name: "pre".into(),
                                reads: Vec::new(),
                                when: Some(w),
                            }),
                            description: None,
                        },
                        behaviour,
                    )
                })
        }

        fn arb_spec() -> impl Strategy<Value = WorkflowSpec> {
            (
                (2usize..=4).prop_flat_map(|n| (0..n).map(arb_step).collect::<Vec<_>>()),
                proptest::collection::vec(
                    prop_oneof![
                        Just(("UserMessageEvent", Some("q1"))),
                        Just(("UserMessageEvent", None)),
                        Just(("A", None)),
                        Just(("B", Some("b1"))),
                    ],
                    1..=3,
                ),
            )
                .prop_map(|(steps, arrivals)| {
                    let mut behaviour = BTreeMap::new();
                    for (s, b) in &steps {
                        if let Some(b) = b {
                            behaviour.insert(s.name.clone(), b.clone());
                        }
                    }
                    let ev = |name: &str, parent: Option<&str>| EventTypeSpec {
                        name: name.into(),
                        parents: parent.into_iter().map(String::from).collect(),
                        description: None,
                    };
                    WorkflowSpec {
                        format: 1,
                        name: "random".into(),
                        description: None,
                        events: vec![
                            ev("A", None),
                            ev("B", None),
                            ev("C", None),
                            ev("Seen", None),
                            ev("Done", Some("StopEvent")),
                            ev("Note", Some("DisplayEvent")),
                        ],
                        steps: steps.into_iter().map(|(s, _)| s).collect(),
                        simulation: Some(SimulationSpec {
                            arrivals: arrivals
                                .into_iter()
                                .map(|(e, l)| ArrivalSpec {
                                    event: e.into(),
                                    label: l.map(String::from),
                                })
                                .collect(),
                            behaviour,
                        }),
                    }
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

            /// Every reduction, alone and together, gives the results of the plain
            /// enumeration of the interleaving tree (when that finishes within its bounds).
            #[test]
            fn reductions_are_sound_on_random_specs(ws in arb_spec(), permute in any::<bool>()) {
                let spec = Arc::new(CompiledSpec::compile(&ws).unwrap());
                let bounded = |dedup, partial_order| ExploreOptions {
                    max_states: 20_000,
                    max_depth: 40,
                    permute_arrivals: permute,
                    dedup,
                    partial_order,
                };
                let full = explore(spec.clone(), &bounded(false, false), &mut |_| {}).unwrap();
                prop_assume!(full.is_complete());
                for (dedup, partial_order) in [(true, false), (false, true), (true, true)] {
                    let reduced =
                        explore(spec.clone(), &bounded(dedup, partial_order), &mut |_| {}).unwrap();
                    prop_assert!(reduced.is_complete());
                    prop_assert_eq!(
                        signature(&full),
                        signature(&reduced),
                        "dedup={} por={}",
                        dedup,
                        partial_order
                    );
                    // Every witness replays to what it claims.
                    for s in &reduced.steps {
                        let n = s.worst_witness.iter().flat_map(|t| &t.started)
                            .filter(|e| e.step == s.step).count();
                        prop_assert_eq!(Some(n), s.worst);
                    }
                    for a in &reduced.after_stop {
                        let last = a.witness.last().unwrap();
                        prop_assert!(last.notes.iter().any(|n| n.contains("after stop")),
                            "{:?}", a.witness);
                    }
                }
            }

            /// Each simulator policy is one interleaving: what it does must be within what
            /// the explorer says can happen.
            #[test]
            fn every_simulated_run_is_within_the_explored_bounds(ws in arb_spec()) {
                let spec = Arc::new(CompiledSpec::compile(&ws).unwrap());
                let opts = ExploreOptions { max_states: 20_000, max_depth: 40, ..ExploreOptions::default() };
                let x = explore(spec.clone(), &opts, &mut |_| {}).unwrap();
                prop_assume!(x.is_complete());
                for policy in [sim::Policy::Fifo, sim::Policy::Lifo, sim::Policy::ArrivalsFirst] {
                    let sim = sim::simulate(spec.clone(), policy, 1_000).unwrap();
                    prop_assume!(sim.unfinished.is_empty());
                    let run = &sim.run;
                    for (si, s) in x.steps.iter().enumerate() {
                        let n = run.execution_count(si as StepIdx);
                        prop_assert!(s.best.unwrap() <= n && n <= s.worst.unwrap(),
                            "{:?}: step {} ran {} times, explored {:?}..{:?}", policy, s.step, n, s.best, s.worst);
                    }
                    if !run.is_terminated() {
                        prop_assert!(x.stalls_found > 0, "{:?}: the simulation stalls", policy);
                    }
                    let after_stop: Vec<(String, Option<String>)> = run.records().iter().filter_map(|r| match &r {
                        Record::EventAfterStop { seq, origin } => Some((
                            run.type_name(run.log()[*seq as usize].ty).to_string(),
                            match origin {
                                Origin::Outside => None,
                                Origin::Execution(e) => Some(run.spec().steps[run.execution(*e).unwrap().step as usize].name.clone()),
                            },
                        )),
                        _ => None,
                    }).collect();
                    for (event, step) in after_stop {
                        prop_assert!(x.after_stop.iter().any(|a| a.event == event && a.step == step),
                            "{:?}: {} after stop from {:?} not reported", policy, event, step);
                    }
                    if run.log().iter().any(|e| e.kind.is_exception()) {
                        prop_assert!(!x.exceptions.is_empty(), "{:?}: exception not reported", policy);
                    }
                }
            }
        }
    }

    #[test]
    fn exploration_is_deterministic() {
        let a = run(RACE);
        let b = run(RACE);
        assert_eq!(a, b);
    }
}
