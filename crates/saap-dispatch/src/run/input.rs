//! One way into a run: a [`RunInput`] (an outside event arrives, an execution finished, an
//! execution is run again, an execution set timers, the clock reached a due time, an
//! execution delegated, a child run ended, a budget was granted), applied
//! by [`Run::handle`]. Engines on their general (journaled)
//! path, replay and the tools hand the core their inputs this way, and a run's journal is a
//! list of them. The specific entry points (`append`, `complete`, `complete_returned`,
//! `complete_linked`, `retry`) stay public for the in-memory engine's fast lanes, which the
//! engine's differential test (`crates/saap/tests/differential.rs`) holds to the same
//! decisions. Must not decide anything itself: it only picks the entry point.

use super::ChildRequest;
use super::budget::{BudgetError, BudgetGrant};
use super::children::ChildError;
use super::timers::{TimerError, TimerRequest};
use super::{AppendError, Appended, CompleteError, NewEvent, Outcome, PreconditionEvaluator, Run};
use crate::ids::ExecutionId;

/// One input that drives a run.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RunInput {
    /// An event arrived from outside.
    Append(NewEvent),
    /// An execution finished.
    Complete {
        execution: ExecutionId,
        attempt: u32,
        outcome: Outcome,
    },
    /// An unfinished execution was run again.
    Retry { execution: ExecutionId },
    /// A completed execution returned events to deliver later (journaled with its
    /// completion, applied right after it).
    Schedule {
        execution: ExecutionId,
        timers: Vec<TimerRequest>,
    },
    /// The engine's clock read `now_ns` (nanoseconds since the Unix epoch): the timers due
    /// by then fire.
    Clock { now_ns: u64 },
    /// A completed execution's outputs include requests to other agents: these children
    /// are the run's (journaled with its completion, applied right after it).
    Delegate {
        execution: ExecutionId,
        children: Vec<ChildRequest>,
    },
    /// Child `child`'s run ended: `event` reports it (a response or an exception event).
    ChildEnded { child: u32, event: NewEvent },
    /// A budget was granted (before the start event, or by a resume).
    Budget(BudgetGrant),
    /// What an execution's model calls used (tokens, cost in millionths), journaled with
    /// its completion and applied just before it (see [`Run::use_budget`]).
    Usage { tokens: u64, cost_micros: u64 },
}

/// What [`Run::handle`] did with an input.
#[derive(Debug, PartialEq, Eq)]
pub enum Handled {
    /// The event was logged (and dispatched), or kept as evidence (see [`Appended`]).
    Appended(Appended),
    /// The execution's completion was applied. `spare` is the vector its outputs came in,
    /// emptied with its allocation, for the caller's next completion (empty when it failed).
    Completed { spare: Vec<NewEvent> },
    /// The execution runs again as attempt `attempt`.
    Retried { attempt: u32 },
    /// This many timers were set.
    Scheduled { timers: u32 },
    /// This many timers fired.
    Fired { timers: u32 },
    /// This many children were added.
    Delegated { children: u32 },
    /// The budget was granted; this many held executions were released.
    Granted { released: u32 },
    /// Usage was counted against the budget.
    Used,
}

/// Why [`Run::handle`] refused an input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    #[error(transparent)]
    Append(#[from] AppendError),
    #[error(transparent)]
    Complete(#[from] CompleteError),
    #[error(transparent)]
    Timer(#[from] TimerError),
    #[error(transparent)]
    Child(#[from] ChildError),
    #[error(transparent)]
    Budget(#[from] BudgetError),
}

impl Run {
    /// Applies one input: the one entry point that covers every kind of input. Records and
    /// started executions are read afterwards as for the specific entry points
    /// ([`Run::records`], [`Run::next_started`]).
    pub fn handle(
        &mut self,
        input: RunInput,
        pre: &mut dyn PreconditionEvaluator,
    ) -> Result<Handled, InputError> {
        match input {
            RunInput::Append(event) => Ok(Handled::Appended(self.append(event, pre)?)),
            RunInput::Complete {
                execution,
                attempt,
                outcome: Outcome::Returned(mut outputs),
            } => {
                self.complete_returned(execution, attempt, &mut outputs, pre)?;
                Ok(Handled::Completed { spare: outputs })
            }
            RunInput::Complete {
                execution,
                attempt,
                outcome,
            } => {
                self.complete(execution, attempt, outcome, pre)?;
                Ok(Handled::Completed { spare: Vec::new() })
            }
            RunInput::Retry { execution } => Ok(Handled::Retried {
                attempt: self.retry(execution)?,
            }),
            RunInput::Schedule { execution, timers } => Ok(Handled::Scheduled {
                timers: self.schedule(execution, timers)?,
            }),
            RunInput::Clock { now_ns } => Ok(Handled::Fired {
                timers: self.fire_due(now_ns, pre)?,
            }),
            RunInput::Delegate {
                execution,
                children,
            } => Ok(Handled::Delegated {
                children: self.delegate(execution, children)?,
            }),
            RunInput::ChildEnded { child, event } => {
                Ok(Handled::Appended(self.child_ended(child, event, pre)?))
            }
            RunInput::Budget(grant) => Ok(Handled::Granted {
                released: self.grant(grant)?,
            }),
            RunInput::Usage {
                tokens,
                cost_micros,
            } => {
                self.use_budget(tokens, cost_micros);
                Ok(Handled::Used)
            }
        }
    }
}
