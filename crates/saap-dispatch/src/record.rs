//! Decision records: everything the dispatcher decides, as data (DESIGN §4.11). A run's
//! records, replayed through the core, reproduce and explain every decision.
//!
//! Records are compact (indexes, not strings); [`crate::run::Run::describe`] renders them
//! with names and event ids for people and JSON.

use crate::ids::{ExecutionId, ParamIdx, Seq, StepIdx};
use serde::{Deserialize, Serialize};

/// Where an appended event came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "from", content = "execution")]
pub enum Origin {
    /// Published by something outside the workflow (a user, an API, another agent).
    Outside,
    /// Returned by an execution of a step (or produced for it, e.g. its ExceptionEvent).
    Execution(ExecutionId),
}

/// Why a candidate step did not run for a trigger, in the order of DESIGN §4.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum SkipReason {
    /// The run ended before the step was evaluated.
    RunTerminated,
    /// A required parameter has no matching event yet.
    RequiredMissing { param: ParamIdx },
    /// A fixed list has fewer matching events than its size.
    FixedListShort {
        param: ParamIdx,
        have: u32,
        need: u32,
    },
    /// `max_executions_per_run` executions already started.
    BudgetExhausted { max: u32 },
    /// The same input set already ran, in the named execution.
    InputSetAlreadyRan { by: ExecutionId },
    /// The precondition returned false.
    PreconditionFalse,
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Termination {
    Stop,
    Exception,
}

/// One decision of the dispatcher.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "record")]
pub enum Record {
    /// The first start event began the run.
    RunStarted { seq: Seq },
    /// A control or display event was appended to the log.
    EventAppended { seq: Seq, origin: Origin },
    /// An event whose id is already in the log was dropped.
    DuplicateEvent { first_seq: Seq, origin: Origin },
    /// A control event for a run that has not begun: refused, kept as evidence.
    OrphanEvent { seq: Seq },
    /// The step takes the trigger's type and is evaluated.
    Candidate { trigger: Seq, step: StepIdx },
    /// The candidate did not run.
    Skipped {
        trigger: Seq,
        step: StepIdx,
        #[serde(flatten)]
        reason: SkipReason,
    },
    /// The precondition was evaluated (user code: the result is recorded for replay).
    PreconditionEvaluated {
        trigger: Seq,
        step: StepIdx,
        result: bool,
    },
    /// A fixed list already had its N events; this arrival binds nothing new.
    FixedListOverflow {
        trigger: Seq,
        step: StepIdx,
        param: ParamIdx,
    },
    /// An execution started (its bindings are in the execution table).
    ExecutionStarted {
        execution: ExecutionId,
        step: StepIdx,
        trigger: Seq,
    },
    /// An execution that had started before a crash is run again.
    ExecutionRetried {
        execution: ExecutionId,
        attempt: u32,
    },
    /// The execution returned; its outputs follow as `EventAppended` records.
    ExecutionCompleted {
        execution: ExecutionId,
        attempt: u32,
        outputs: u32,
    },
    /// The execution failed.
    ExecutionFailed {
        execution: ExecutionId,
        attempt: u32,
        stop_on_error: bool,
    },
    /// A stop or exception event ended the run.
    RunTerminated { seq: Seq, by: Termination },
    /// An event appended after the run ended: stored as evidence, never dispatched.
    EventAfterStop { seq: Seq, origin: Origin },
}
