//! Forks (issue 23 §2): what a user asks of `Engine::fork` — where to fork a stored run and
//! what to change there — and what the fork did. A fork is a new run that begins with the
//! original's journal up to an event from outside (those executions' outputs are reused,
//! not run again), then takes the changed or added event; from there an execution with the
//! inputs of one the original completed takes its outputs, the rest run live; the
//! original's later events from outside are sent to it again as it settles, unless asked
//! not to. Plain data: the engine (`engine/fork.rs`) does the work.

use crate::event::Payload;
use serde::Serialize;
use std::time::Duration;

/// What a fork does at its fork point (event `at` of the original's log).
#[derive(Debug, Clone)]
pub enum ForkChange {
    /// Event `at` again, as it was (a fork that reproduces the original, given the same code).
    Same,
    /// This event instead of event `at` (type name, fields).
    Replace { name: String, payload: Payload },
    /// This event first, then event `at` and the ones after it.
    Add { name: String, payload: Payload },
}

/// Where and how to fork.
#[derive(Debug, Clone)]
pub struct ForkOptions {
    /// The event of the original's log the fork departs at: an event from outside (not the
    /// start event), or the log's length to fork after everything (with [`ForkChange::Add`]).
    pub at: u32,
    pub change: ForkChange,
    /// Send the original's later events from outside to the fork again, in order, each once
    /// the fork has no step running (as Temporal's reset re-applies signals); one that comes
    /// after the fork ended is kept as evidence, as the original kept those after its end.
    /// Default true.
    pub reapply: bool,
    /// The fork's thread; `None`: a thread of its own (its ThreadContext starts empty, so
    /// the original's conversation is left alone).
    pub thread_id: Option<String>,
    /// How long to wait for the fork to settle before each event sent again.
    pub settle: Duration,
    /// After the fork point, an execution whose step and bound inputs (type names and
    /// fields) equal those of an execution the original completed after that point takes
    /// its recorded outputs instead of running its body (not one that failed, set timers or
    /// started child runs); `false`: every execution after the fork point runs live, with
    /// this binary's code. Default true. Recorded in the fork's first journal entry: after a
    /// restart (or a takeover on NATS) the fork goes on as it began.
    pub reuse: bool,
}

impl ForkOptions {
    /// Forks at event `at` with `change`, sending the later events again, in a thread of
    /// its own, waiting up to 60 s for each settling.
    pub fn new(at: u32, change: ForkChange) -> ForkOptions {
        ForkOptions {
            at,
            change,
            reapply: true,
            thread_id: None,
            settle: Duration::from_secs(60),
            reuse: true,
        }
    }
}

/// What a fork did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Forked {
    /// The new run.
    pub run_id: String,
    pub thread_id: String,
    /// The run it was forked from, and the event it departs at.
    pub forked_from: String,
    pub at: u32,
    /// The original's journal entries the fork begins with, and the executions completed in
    /// them (their outputs reused, not run again).
    pub entries_reused: u32,
    pub executions_reused: u32,
    /// The original's later events from outside sent to the fork again (their positions in
    /// the original's log), and those not sent, with why.
    pub reapplied: Vec<u32>,
    pub not_reapplied: Vec<NotReapplied>,
}

/// An event of the original that was not sent to the fork again.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NotReapplied {
    pub seq: u32,
    #[serde(rename = "type")]
    pub name: String,
    pub reason: String,
}
