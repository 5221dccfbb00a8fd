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
    /// The execution returned an event to be delivered later: timer `timer` of the run
    /// (its due time and event are in the run's timer table, [`crate::run::Run::timers`]).
    TimerSet { timer: u32, execution: ExecutionId },
    /// Timer `timer` came due: its event is appended next (origin: the execution that set
    /// it).
    TimerFired { timer: u32 },
    /// Timer `timer` will never fire: the run ended first.
    TimerDropped { timer: u32 },
    /// The execution delegated work to another agent: child `child` of the run (its request
    /// event and whether it is awaited are in the run's child table,
    /// [`crate::run::Run::children`]).
    ChildRequested { child: u32, execution: ExecutionId },
    /// Child `child`'s run ended: the event reporting its end is appended next (origin:
    /// outside).
    ChildEnded { child: u32 },
    /// Child `child` is given up: the run ended while it was awaited, or the run was
    /// cancelled (the engine cancels the child's run).
    ChildAbandoned { child: u32 },
    /// The event reporting child `child`'s end (just appended) is taken by no step: what the
    /// run waited for will never come this way, an unmet obligation kept on record instead
    /// of a silent stall.
    ObligationUnmet { child: u32 },
    /// Child `child`'s deadline came before its end: the deadline's event is appended next
    /// (origin: the execution that delegated), and the child is given up (the engine
    /// cancels its run).
    ChildTimedOut { child: u32 },
    /// A budget was granted (at the start, or by a resume): the limits now in force. Held
    /// executions it covers run now.
    BudgetGranted {
        /// How many executions may run in all; `None`: no limit.
        max_executions: Option<u32>,
        /// When the wall time ends (nanoseconds since the Unix epoch); `None`: no limit.
        until_ns: Option<u64>,
        /// How many model tokens the run may use in all; `None`: no limit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_tokens: Option<u64>,
        /// How much its model calls may cost in all (millionths); `None`: no limit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_cost_micros: Option<u64>,
    },
    /// The budget is spent: executions from `held_from` on are started as decided but held
    /// (not run) until a grant releases them; the run waits for a person to resume it.
    BudgetSpent {
        limit: BudgetLimit,
        held_from: ExecutionId,
    },
}

/// Which part of a run's budget was spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "limit")]
pub enum BudgetLimit {
    /// `max` executions ran.
    Executions { max: u32 },
    /// The wall time ended at `until_ns` (nanoseconds since the Unix epoch).
    WallTime { until_ns: u64 },
    /// The run's model calls used `max` tokens.
    Tokens { max: u64 },
    /// The run's model calls cost `max_micros` millionths.
    Cost { max_micros: u64 },
}

/// A record as a run stores it: 12 bytes where a [`Record`] takes 24, so that a large run's
/// records (its largest table: about 7 per fan-out item) take half the memory and cache.
/// The common records fit: a kind byte, a byte and a 16-bit field (a parameter, a step, an
/// attempt: small in practice) and two 32-bit fields (sequence numbers, executions,
/// counts). A record whose values do not fit is kept whole in the run's side table, and
/// the packed one points at it ([`Packed::EXTRA`]); reading gives the same [`Record`]
/// either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Packed {
    kind: u8,
    x: u8,
    a: u16,
    b: u32,
    c: u32,
}

// The kinds of packed records (`Packed::kind`).
const RUN_STARTED: u8 = 0;
const APPENDED_OUTSIDE: u8 = 1;
const APPENDED_BY: u8 = 2;
const DUPLICATE_OUTSIDE: u8 = 3;
const DUPLICATE_BY: u8 = 4;
const ORPHAN: u8 = 5;
const CANDIDATE: u8 = 6;
const SKIP_TERMINATED: u8 = 7;
const SKIP_REQUIRED: u8 = 8;
const SKIP_SHORT: u8 = 9;
const SKIP_BUDGET: u8 = 10;
const SKIP_RAN: u8 = 11;
const SKIP_PRECONDITION: u8 = 12;
const PRECONDITION: u8 = 13;
const OVERFLOW: u8 = 14;
const STARTED: u8 = 15;
const RETRIED: u8 = 16;
const COMPLETED: u8 = 17;
const FAILED: u8 = 18;
const TERMINATED: u8 = 19;
const AFTER_STOP_OUTSIDE: u8 = 20;
const AFTER_STOP_BY: u8 = 21;
const TIMER_SET: u8 = 22;
const TIMER_FIRED: u8 = 23;
const TIMER_DROPPED: u8 = 24;
const CHILD_REQUESTED: u8 = 25;
const CHILD_ENDED: u8 = 26;
const CHILD_ABANDONED: u8 = 27;
const OBLIGATION_UNMET: u8 = 28;
const CHILD_TIMED_OUT: u8 = 29;

impl Packed {
    /// The kind of a record kept whole in the side table; `b` is its index there.
    const EXTRA: u8 = u8::MAX;

    /// The packed form of `r`, or `None` when one of its values does not fit (then it is
    /// kept whole). Inlined: a record made from constants packs without a branch on its
    /// kind.
    #[inline(always)]
    pub(crate) fn pack(r: &Record) -> Option<Packed> {
        #[inline(always)]
        fn p(kind: u8, x: u8, a: u16, b: u32, c: u32) -> Option<Packed> {
            Some(Packed { kind, x, a, b, c })
        }
        #[inline(always)]
        fn origin(outside: u8, by: u8, o: Origin) -> (u8, u32) {
            match o {
                Origin::Outside => (outside, 0),
                Origin::Execution(x) => (by, x.0),
            }
        }
        let small = |v: u32| u16::try_from(v).ok();
        match *r {
            Record::RunStarted { seq } => p(RUN_STARTED, 0, 0, seq, 0),
            Record::EventAppended { seq, origin: o } => {
                let (kind, c) = origin(APPENDED_OUTSIDE, APPENDED_BY, o);
                p(kind, 0, 0, seq, c)
            }
            Record::DuplicateEvent {
                first_seq,
                origin: o,
            } => {
                let (kind, c) = origin(DUPLICATE_OUTSIDE, DUPLICATE_BY, o);
                p(kind, 0, 0, first_seq, c)
            }
            Record::OrphanEvent { seq } => p(ORPHAN, 0, 0, seq, 0),
            Record::Candidate { trigger, step } => p(CANDIDATE, 0, small(step)?, trigger, 0),
            Record::Skipped {
                trigger,
                step,
                reason,
            } => {
                let step = small(step)?;
                match reason {
                    SkipReason::RunTerminated => p(SKIP_TERMINATED, 0, step, trigger, 0),
                    SkipReason::RequiredMissing { param } => {
                        p(SKIP_REQUIRED, u8::try_from(param).ok()?, step, trigger, 0)
                    }
                    SkipReason::FixedListShort { param, have, need } => p(
                        SKIP_SHORT,
                        u8::try_from(param).ok()?,
                        step,
                        trigger,
                        small(have)? as u32 | (small(need)? as u32) << 16,
                    ),
                    SkipReason::BudgetExhausted { max } => p(SKIP_BUDGET, 0, step, trigger, max),
                    SkipReason::InputSetAlreadyRan { by } => p(SKIP_RAN, 0, step, trigger, by.0),
                    SkipReason::PreconditionFalse => p(SKIP_PRECONDITION, 0, step, trigger, 0),
                }
            }
            Record::PreconditionEvaluated {
                trigger,
                step,
                result,
            } => p(PRECONDITION, result as u8, small(step)?, trigger, 0),
            Record::FixedListOverflow {
                trigger,
                step,
                param,
            } => p(
                OVERFLOW,
                u8::try_from(param).ok()?,
                small(step)?,
                trigger,
                0,
            ),
            Record::ExecutionStarted {
                execution,
                step,
                trigger,
            } => p(STARTED, 0, small(step)?, execution.0, trigger),
            Record::ExecutionRetried { execution, attempt } => {
                p(RETRIED, 0, 0, execution.0, attempt)
            }
            Record::ExecutionCompleted {
                execution,
                attempt,
                outputs,
            } => p(COMPLETED, 0, small(attempt)?, execution.0, outputs),
            Record::ExecutionFailed {
                execution,
                attempt,
                stop_on_error,
            } => p(FAILED, stop_on_error as u8, 0, execution.0, attempt),
            Record::RunTerminated { seq, by } => p(TERMINATED, by as u8, 0, seq, 0),
            Record::EventAfterStop { seq, origin: o } => {
                let (kind, c) = origin(AFTER_STOP_OUTSIDE, AFTER_STOP_BY, o);
                p(kind, 0, 0, seq, c)
            }
            Record::TimerSet { timer, execution } => p(TIMER_SET, 0, 0, timer, execution.0),
            Record::TimerFired { timer } => p(TIMER_FIRED, 0, 0, timer, 0),
            Record::TimerDropped { timer } => p(TIMER_DROPPED, 0, 0, timer, 0),
            Record::ChildRequested { child, execution } => {
                p(CHILD_REQUESTED, 0, 0, child, execution.0)
            }
            Record::ChildEnded { child } => p(CHILD_ENDED, 0, 0, child, 0),
            Record::ChildAbandoned { child } => p(CHILD_ABANDONED, 0, 0, child, 0),
            Record::ObligationUnmet { child } => p(OBLIGATION_UNMET, 0, 0, child, 0),
            Record::ChildTimedOut { child } => p(CHILD_TIMED_OUT, 0, 0, child, 0),
            // Rare: kept whole.
            Record::BudgetGranted { .. } | Record::BudgetSpent { .. } => None,
        }
    }

    /// The four records of a chain link — `ExecutionCompleted { execution, attempt,
    /// outputs: 1 }`, `EventAppended { seq, origin: Execution(execution) }`, `Candidate {
    /// trigger: seq, step }`, `ExecutionStarted { execution: next, step, trigger: seq }` —
    /// packed with one check of the values that must fit (the completion loop's hot path).
    #[inline(always)]
    pub(crate) fn chain_link(
        execution: ExecutionId,
        attempt: u32,
        seq: Seq,
        step: StepIdx,
        next: ExecutionId,
    ) -> Option<[Packed; 4]> {
        if (attempt | step) > u16::MAX as u32 {
            return None;
        }
        let p = |kind, a, b, c| Packed {
            kind,
            x: 0,
            a,
            b,
            c,
        };
        Some([
            p(COMPLETED, attempt as u16, execution.0, 1),
            p(APPENDED_BY, 0, seq, execution.0),
            p(CANDIDATE, step as u16, seq, 0),
            p(STARTED, step as u16, next.0, seq),
        ])
    }

    /// A record kept whole at `index` of the side table.
    pub(crate) fn extra(index: u32) -> Packed {
        Packed {
            kind: Self::EXTRA,
            x: 0,
            a: 0,
            b: index,
            c: 0,
        }
    }

    /// The record this stands for; `extra` is the run's side table.
    pub(crate) fn unpack(self, extra: &[Record]) -> Record {
        let Packed { kind, x, a, b, c } = self;
        let step = a as StepIdx;
        let by = |outside: u8| {
            if kind == outside {
                Origin::Outside
            } else {
                Origin::Execution(ExecutionId(c))
            }
        };
        let skipped = |reason| Record::Skipped {
            trigger: b,
            step,
            reason,
        };
        match kind {
            RUN_STARTED => Record::RunStarted { seq: b },
            APPENDED_OUTSIDE | APPENDED_BY => Record::EventAppended {
                seq: b,
                origin: by(APPENDED_OUTSIDE),
            },
            DUPLICATE_OUTSIDE | DUPLICATE_BY => Record::DuplicateEvent {
                first_seq: b,
                origin: by(DUPLICATE_OUTSIDE),
            },
            ORPHAN => Record::OrphanEvent { seq: b },
            CANDIDATE => Record::Candidate { trigger: b, step },
            SKIP_TERMINATED => skipped(SkipReason::RunTerminated),
            SKIP_REQUIRED => skipped(SkipReason::RequiredMissing {
                param: x as ParamIdx,
            }),
            SKIP_SHORT => skipped(SkipReason::FixedListShort {
                param: x as ParamIdx,
                have: c & 0xffff,
                need: c >> 16,
            }),
            SKIP_BUDGET => skipped(SkipReason::BudgetExhausted { max: c }),
            SKIP_RAN => skipped(SkipReason::InputSetAlreadyRan { by: ExecutionId(c) }),
            SKIP_PRECONDITION => skipped(SkipReason::PreconditionFalse),
            PRECONDITION => Record::PreconditionEvaluated {
                trigger: b,
                step,
                result: x != 0,
            },
            OVERFLOW => Record::FixedListOverflow {
                trigger: b,
                step,
                param: x as ParamIdx,
            },
            STARTED => Record::ExecutionStarted {
                execution: ExecutionId(b),
                step,
                trigger: c,
            },
            RETRIED => Record::ExecutionRetried {
                execution: ExecutionId(b),
                attempt: c,
            },
            COMPLETED => Record::ExecutionCompleted {
                execution: ExecutionId(b),
                attempt: a as u32,
                outputs: c,
            },
            FAILED => Record::ExecutionFailed {
                execution: ExecutionId(b),
                attempt: c,
                stop_on_error: x != 0,
            },
            TERMINATED => Record::RunTerminated {
                seq: b,
                by: if x == Termination::Exception as u8 {
                    Termination::Exception
                } else {
                    Termination::Stop
                },
            },
            AFTER_STOP_OUTSIDE | AFTER_STOP_BY => Record::EventAfterStop {
                seq: b,
                origin: by(AFTER_STOP_OUTSIDE),
            },
            TIMER_SET => Record::TimerSet {
                timer: b,
                execution: ExecutionId(c),
            },
            TIMER_FIRED => Record::TimerFired { timer: b },
            TIMER_DROPPED => Record::TimerDropped { timer: b },
            CHILD_REQUESTED => Record::ChildRequested {
                child: b,
                execution: ExecutionId(c),
            },
            CHILD_ENDED => Record::ChildEnded { child: b },
            CHILD_ABANDONED => Record::ChildAbandoned { child: b },
            OBLIGATION_UNMET => Record::ObligationUnmet { child: b },
            CHILD_TIMED_OUT => Record::ChildTimedOut { child: b },
            // `Packed::EXTRA`: only `Packed::extra` makes it, with an index into the table.
            _ => extra[b as usize].clone(),
        }
    }
}

/// A run's decision records, in order (see [`crate::run::Run::records`]): read as
/// [`Record`]s, made from the run's compact form on the way.
#[derive(Clone, Copy)]
pub struct Records<'a> {
    packed: &'a [Packed],
    extra: &'a [Record],
}

impl<'a> Records<'a> {
    pub(crate) fn new(packed: &'a [Packed], extra: &'a [Record]) -> Records<'a> {
        Records { packed, extra }
    }

    /// How many records there are.
    pub fn len(&self) -> usize {
        self.packed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.packed.is_empty()
    }

    /// The record at `index`, if there is one.
    pub fn get(&self, index: usize) -> Option<Record> {
        self.packed.get(index).map(|p| p.unpack(self.extra))
    }

    /// The last record, if any.
    pub fn last(&self) -> Option<Record> {
        self.packed.last().map(|p| p.unpack(self.extra))
    }

    /// The records in `range` (panics where slicing `&[Record]` would).
    pub fn slice(&self, range: impl std::ops::RangeBounds<usize>) -> Records<'a> {
        use std::ops::Bound;
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.saturating_add(1),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => self.packed.len(),
        };
        Records {
            packed: &self.packed[start..end],
            extra: self.extra,
        }
    }

    /// The records in order.
    pub fn iter(&self) -> RecordIter<'a> {
        RecordIter {
            packed: self.packed.iter(),
            extra: self.extra,
        }
    }

    pub fn to_vec(&self) -> Vec<Record> {
        self.iter().collect()
    }
}

impl<'a> IntoIterator for Records<'a> {
    type Item = Record;
    type IntoIter = RecordIter<'a>;
    fn into_iter(self) -> RecordIter<'a> {
        self.iter()
    }
}

impl PartialEq for Records<'_> {
    fn eq(&self, other: &Records<'_>) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl PartialEq<[Record]> for Records<'_> {
    fn eq(&self, other: &[Record]) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a == *b)
    }
}

impl PartialEq<Vec<Record>> for Records<'_> {
    fn eq(&self, other: &Vec<Record>) -> bool {
        *self == other[..]
    }
}

impl std::fmt::Debug for Records<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A JSON array of the records, as a `&[Record]` serializes.
impl Serialize for Records<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// The records of a [`Records`], in order.
#[derive(Clone)]
pub struct RecordIter<'a> {
    packed: std::slice::Iter<'a, Packed>,
    extra: &'a [Record],
}

impl Iterator for RecordIter<'_> {
    type Item = Record;
    fn next(&mut self) -> Option<Record> {
        self.packed.next().map(|p| p.unpack(self.extra))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.packed.size_hint()
    }
    fn nth(&mut self, n: usize) -> Option<Record> {
        self.packed.nth(n).map(|p| p.unpack(self.extra))
    }
}

impl DoubleEndedIterator for RecordIter<'_> {
    fn next_back(&mut self) -> Option<Record> {
        self.packed.next_back().map(|p| p.unpack(self.extra))
    }
}

impl ExactSizeIterator for RecordIter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn origin() -> impl Strategy<Value = Origin> {
        prop_oneof![
            Just(Origin::Outside),
            any::<u32>().prop_map(|x| Origin::Execution(ExecutionId(x))),
        ]
    }

    /// Values around the packed form's limits (u8, u16) and the full range.
    fn value() -> impl Strategy<Value = u32> {
        prop_oneof![0u32..300, 65_530u32..65_540, any::<u32>(),]
    }

    fn reason() -> impl Strategy<Value = SkipReason> {
        prop_oneof![
            Just(SkipReason::RunTerminated),
            value().prop_map(|param| SkipReason::RequiredMissing { param }),
            (value(), value(), value())
                .prop_map(|(param, have, need)| SkipReason::FixedListShort { param, have, need }),
            value().prop_map(|max| SkipReason::BudgetExhausted { max }),
            value().prop_map(|x| SkipReason::InputSetAlreadyRan { by: ExecutionId(x) }),
            Just(SkipReason::PreconditionFalse),
        ]
    }

    fn record() -> impl Strategy<Value = Record> {
        let x = || value().prop_map(ExecutionId);
        prop_oneof![
            value().prop_map(|seq| Record::RunStarted { seq }),
            (value(), origin()).prop_map(|(seq, origin)| Record::EventAppended { seq, origin }),
            (value(), origin())
                .prop_map(|(first_seq, origin)| Record::DuplicateEvent { first_seq, origin }),
            value().prop_map(|seq| Record::OrphanEvent { seq }),
            (value(), value()).prop_map(|(trigger, step)| Record::Candidate { trigger, step }),
            (value(), value(), reason()).prop_map(|(trigger, step, reason)| Record::Skipped {
                trigger,
                step,
                reason
            }),
            (value(), value(), any::<bool>()).prop_map(|(trigger, step, result)| {
                Record::PreconditionEvaluated {
                    trigger,
                    step,
                    result,
                }
            }),
            (value(), value(), value()).prop_map(|(trigger, step, param)| {
                Record::FixedListOverflow {
                    trigger,
                    step,
                    param,
                }
            }),
            (x(), value(), value()).prop_map(|(execution, step, trigger)| {
                Record::ExecutionStarted {
                    execution,
                    step,
                    trigger,
                }
            }),
            (x(), value())
                .prop_map(|(execution, attempt)| Record::ExecutionRetried { execution, attempt }),
            (x(), value(), value()).prop_map(|(execution, attempt, outputs)| {
                Record::ExecutionCompleted {
                    execution,
                    attempt,
                    outputs,
                }
            }),
            (x(), value(), any::<bool>()).prop_map(|(execution, attempt, stop_on_error)| {
                Record::ExecutionFailed {
                    execution,
                    attempt,
                    stop_on_error,
                }
            }),
            (
                value(),
                prop_oneof![Just(Termination::Stop), Just(Termination::Exception)]
            )
                .prop_map(|(seq, by)| Record::RunTerminated { seq, by }),
            (value(), origin()).prop_map(|(seq, origin)| Record::EventAfterStop { seq, origin }),
            (value(), x()).prop_map(|(timer, execution)| Record::TimerSet { timer, execution }),
            value().prop_map(|timer| Record::TimerFired { timer }),
            value().prop_map(|timer| Record::TimerDropped { timer }),
            (value(), x())
                .prop_map(|(child, execution)| Record::ChildRequested { child, execution }),
            value().prop_map(|child| Record::ChildEnded { child }),
            value().prop_map(|child| Record::ChildAbandoned { child }),
            value().prop_map(|child| Record::ObligationUnmet { child }),
            value().prop_map(|child| Record::ChildTimedOut { child }),
            (
                proptest::option::of(value()),
                proptest::option::of(any::<u64>()),
                proptest::option::of(any::<u64>()),
                proptest::option::of(any::<u64>())
            )
                .prop_map(|(max_executions, until_ns, max_tokens, max_cost_micros)| {
                    Record::BudgetGranted {
                        max_executions,
                        until_ns,
                        max_tokens,
                        max_cost_micros,
                    }
                }),
            (x(), value(), any::<u64>(), 0u8..4).prop_map(|(held_from, max, n, kind)| {
                Record::BudgetSpent {
                    limit: match kind {
                        0 => BudgetLimit::Executions { max },
                        1 => BudgetLimit::WallTime { until_ns: n },
                        2 => BudgetLimit::Tokens { max: n },
                        _ => BudgetLimit::Cost { max_micros: n },
                    },
                    held_from,
                }
            }),
        ]
    }

    /// What a run stores reads back as the record it was given: packed when its values fit,
    /// whole in the side table when they do not.
    fn store(records: &[Record]) -> (Vec<Packed>, Vec<Record>) {
        let mut packed = Vec::new();
        let mut extra = Vec::new();
        for r in records {
            match Packed::pack(r) {
                Some(p) => packed.push(p),
                None => {
                    packed.push(Packed::extra(extra.len() as u32));
                    extra.push(r.clone());
                }
            }
        }
        (packed, extra)
    }

    proptest! {
        #[test]
        fn every_record_reads_back_as_it_was_recorded(records in proptest::collection::vec(record(), 0..40)) {
            let (packed, extra) = store(&records);
            let view = Records::new(&packed, &extra);
            prop_assert_eq!(view.len(), records.len());
            prop_assert_eq!(view.to_vec(), records.clone());
            prop_assert!(view == records);
            let back: Vec<Record> = view.iter().rev().collect();
            prop_assert!(back.iter().eq(records.iter().rev()));
            for (i, r) in records.iter().enumerate() {
                prop_assert_eq!(view.get(i), Some(r.clone()));
                prop_assert_eq!(view.slice(i..).to_vec(), records[i..].to_vec());
            }
            prop_assert_eq!(
                serde_json::to_string(&view).expect("records serialize"),
                serde_json::to_string(&records).expect("records serialize")
            );
        }
    }

    proptest! {
        /// The chain link's four records, packed at once, are what packing each gives.
        #[test]
        fn a_chain_links_records_pack_as_each_record_does(
            execution in value(), attempt in value(), seq in value(), step in value(), next in value()
        ) {
            let (execution, next) = (ExecutionId(execution), ExecutionId(next));
            let each = [
                Record::ExecutionCompleted { execution, attempt, outputs: 1 },
                Record::EventAppended { seq, origin: Origin::Execution(execution) },
                Record::Candidate { trigger: seq, step },
                Record::ExecutionStarted { execution: next, step, trigger: seq },
            ]
            .map(|r| Packed::pack(&r));
            let at_once = Packed::chain_link(execution, attempt, seq, step, next);
            match at_once {
                Some(p) => prop_assert_eq!(each, p.map(Some)),
                None => prop_assert!(each.iter().any(Option::is_none)),
            }
        }
    }

    /// The packed form is half a record's size, and the values of a fan-out of up to 65,535
    /// items fit it (nothing goes to the side table).
    #[test]
    fn a_packed_record_is_twelve_bytes_and_a_large_fan_in_skip_fits_it() {
        assert_eq!(std::mem::size_of::<Packed>(), 12);
        assert!(std::mem::size_of::<Record>() >= 24);
        let short = Record::Skipped {
            trigger: 20_001,
            step: 2,
            reason: SkipReason::FixedListShort {
                param: 0,
                have: 9_999,
                need: 10_000,
            },
        };
        assert!(Packed::pack(&short).is_some());
        let too_long = Record::Skipped {
            trigger: 1,
            step: 2,
            reason: SkipReason::FixedListShort {
                param: 0,
                have: 1,
                need: 70_000,
            },
        };
        assert!(Packed::pack(&too_long).is_none());
    }
}
