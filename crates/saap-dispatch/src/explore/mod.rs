//! The explorer: every interleaving of a spec's outside arrivals and step completions, run
//! through the real dispatch core, with the bad states that can be reached and a witness
//! trace for each (issue 2, item 7; `saap explore`).
//!
//! # What is explored
//!
//! A state is a [`Run`] plus the outside arrivals not yet delivered. From a state, the
//! actions are: deliver the next outside arrival (in declared order, or any remaining one
//! with [`ExploreOptions::permute_arrivals`]), complete any running execution (each
//! running execution may finish next; what it returns or whether it fails comes from the
//! spec's `simulation.behaviour`, see [`crate::sim::outcome_for`]), fire the earliest
//! pending timer (a step's `delayed` outputs, set when its execution completes: a clock
//! reading), and, with [`ExploreOptions::cancel`], cancel the run. A *final* state has no
//! arrival left, no execution running and no timer pending (a cancellation may still come:
//! it is explored, and the state is reported as final). Every decision is made by [`Run`]
//! itself; the explorer only chooses the order.
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
//!    enabled until taken (a completion that sets a timer is never invisible, and a
//!    cancellation is tried before an invisible one too); the state graph is acyclic
//!    (every action consumes an arrival, finishes an execution, fires a timer or ends the
//!    run), so all final states are still reached. The one thing its
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
//!
//! Where each part lives: `findings` (what is asked and reported, plain data), `model` (the
//! states and actions, applied through the run), `naming` (canonical keys, reduction 1),
//! `witness` (waiting steps, labels and traces as a user reads them), `search` (the
//! depth-first search and what it observes).

mod findings;
mod model;
mod naming;
mod search;
#[cfg(test)]
mod tests;
mod witness;

pub use findings::{
    AfterStop, BoundHit, BoundKind, DEFAULT_MAX_DEPTH, DEFAULT_MAX_STATES, ExceptionFinding,
    ExecRef, Exploration, ExploreError, ExploreOptions, MAX_REPORTED_STALLS, PROGRESS_EVERY,
    Progress, Stall, Stats, StepExecutions, TraceAction, TraceStep, WaitReason, Waiting,
};
pub use search::explore;
