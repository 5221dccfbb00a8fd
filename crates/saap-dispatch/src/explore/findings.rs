//! What an exploration reports ([`Exploration`]) and how it is asked for
//! ([`ExploreOptions`]): bounds, stalls, after-stop emissions, exceptions, witness traces.
//! Plain data: must not explore.

use crate::ids::ExecutionId;
use serde::Serialize;
use std::fmt;

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
    /// Also cancel the run, at every point while it is live (a cancellation is an outside
    /// arrival that may come at any time).
    pub cancel: bool,
}

impl Default for ExploreOptions {
    fn default() -> Self {
        ExploreOptions {
            max_states: DEFAULT_MAX_STATES,
            max_depth: DEFAULT_MAX_DEPTH,
            permute_arrivals: false,
            dedup: true,
            partial_order: true,
            cancel: false,
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
    /// A timer came due: the event an execution returned for later delivery arrived.
    Fire {
        event: String,
        execution: ExecutionId,
        step: String,
    },
    /// The run was cancelled (a `RunCancelledEvent` arrived).
    Cancel,
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
