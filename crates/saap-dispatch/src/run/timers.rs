//! Durable timers (DESIGN §8): events an execution returned to be delivered at a due time.
//! A timer is set by [`Run::schedule`] (after its execution's completion, in the same journal
//! entry), fires when the engine passes a clock reading that reaches its due time
//! ([`Run::fire_due`]: its event is appended as the setting execution's output, after a
//! `TimerFired` record), and is dropped, never to fire, when the run ends first. The core keeps
//! no clock: time enters only as the `now` of a [`super::input::RunInput::Clock`], which the
//! journal records, so replay fires the same timers at the same places. Must not read a clock
//! or wait: engines do, and ask [`Run::next_due`] when to come back.

use super::{
    AppendError, CompleteError, ExecState, NewEventType, PreconditionEvaluator, Run, push_record,
    waits,
};
pub use super::{Timer, TimerRequest, TimerState};
use crate::ids::ExecutionId;
use crate::record::{Origin, Record};

/// The most timers one run may have pending at once; more are refused (a run that needs
/// more should batch its deadlines into one event).
pub const MAX_PENDING_TIMERS: usize = 10_000;

/// Why [`Run::schedule`] refused timers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimerError {
    #[error(
        "execution {execution} set timers but has not completed: timers are set by a completed execution's outputs"
    )]
    NotCompleted { execution: ExecutionId },
    #[error(
        "the run already has {MAX_PENDING_TIMERS} pending timers; deliver several deadlines in one event, or end timers by ending the run"
    )]
    TooManyTimers,
    #[error(transparent)]
    Complete(#[from] CompleteError),
}

impl Run {
    /// Sets the timers an execution returned (it completed in the same journal entry). On a
    /// run that has ended they are recorded and dropped at once. Returns how many were set.
    pub fn schedule(
        &mut self,
        execution: ExecutionId,
        timers: Vec<TimerRequest>,
    ) -> Result<u32, TimerError> {
        let state = match self.execution(execution) {
            Some(e) => e.state,
            None => return Err(CompleteError::UnknownExecution(execution).into()),
        };
        if state != ExecState::Completed {
            return Err(TimerError::NotCompleted { execution });
        }
        let pending = self.pending_timer_count();
        if pending + timers.len() > MAX_PENDING_TIMERS {
            return Err(TimerError::TooManyTimers);
        }
        let ended = self.is_terminated();
        let n = timers.len() as u32;
        for t in timers {
            let table = &mut waits(&mut self.waits).timers;
            let timer = table.len() as u32;
            table.push(Timer {
                event_id: t.event.id,
                ty: t.event.ty,
                due_ns: t.due_ns,
                set_by: execution,
                state: if ended {
                    TimerState::Dropped
                } else {
                    TimerState::Pending
                },
                for_child: None,
            });
            push_record(
                &mut self.records,
                &mut self.rare,
                Record::TimerSet { timer, execution },
            );
            if ended {
                push_record(
                    &mut self.records,
                    &mut self.rare,
                    Record::TimerDropped { timer },
                );
            }
        }
        Ok(n)
    }

    /// Fires every pending timer due at `now_ns` (in order of due time, then of setting):
    /// each one's event is appended as its execution's output and dispatched. Returns how
    /// many fired. A fired event that ends the run drops the timers still pending. A wall-time
    /// budget that ended by `now_ns` is spent first (see `budget`): what the timers start
    /// waits for a grant.
    pub fn fire_due(
        &mut self,
        now_ns: u64,
        pre: &mut dyn PreconditionEvaluator,
    ) -> Result<u32, AppendError> {
        self.spend_wall_time(now_ns);
        let mut fired = 0;
        while let Some(timer) = self.next_due_timer(now_ns) {
            let t = &mut waits(&mut self.waits).timers[timer as usize];
            t.state = TimerState::Fired { seq: None };
            // A child's deadline is pending only while the run waits for the child: the
            // child's end drops it, and so does the run's end.
            let for_child = t.for_child;
            let (id, mut ty, origin) = (t.event_id, t.ty.clone(), Origin::Execution(t.set_by));
            push_record(
                &mut self.records,
                &mut self.rare,
                Record::TimerFired { timer },
            );
            if let Some(child) = for_child {
                self.deadline_reached(child);
            }
            let seq = match self.append_from(id, &mut ty, origin, pre)? {
                super::Appended::Duplicate { .. } => None,
                super::Appended::Dispatched { seq, .. }
                | super::Appended::Terminated { seq }
                | super::Appended::DisplayOnly { seq }
                | super::Appended::AfterStop { seq } => Some(seq),
            };
            waits(&mut self.waits).timers[timer as usize].state = TimerState::Fired { seq };
            if let Some(child) = for_child {
                waits(&mut self.waits).children[child as usize].state =
                    super::ChildState::TimedOut { seq };
            }
            fired += 1;
        }
        Ok(fired)
    }

    /// The earliest due time of a pending timer, or the end of the run's wall-time budget
    /// when that comes first: when the engine should pass the run a clock reading next.
    pub fn next_due(&self) -> Option<u64> {
        match (self.next_timer_due(), self.wall_due()) {
            (Some(t), Some(w)) => Some(t.min(w)),
            (t, w) => t.or(w),
        }
    }

    /// The earliest due time of a pending timer (not the budget's end).
    pub fn next_timer_due(&self) -> Option<u64> {
        self.timers()
            .iter()
            .filter(|t| t.state == TimerState::Pending)
            .map(|t| t.due_ns)
            .min()
    }

    /// The run's timers, in the order they were set (a timer's number is its index).
    pub fn timers(&self) -> &[Timer] {
        match &self.waits {
            Some(r) => &r.timers,
            None => &[],
        }
    }

    /// How many timers wait to fire.
    pub fn pending_timer_count(&self) -> usize {
        self.timers()
            .iter()
            .filter(|t| t.state == TimerState::Pending)
            .count()
    }

    /// The name of a timer's event type.
    pub fn timer_type_name(&self, timer: u32) -> &str {
        match self.timers().get(timer as usize).map(|t| &t.ty) {
            Some(NewEventType::Known(t)) => self
                .spec
                .types
                .get(*t as usize)
                .map(|i| i.name.as_str())
                .unwrap_or("?"),
            Some(NewEventType::Foreign { name, .. }) => name,
            None => "?",
        }
    }

    /// The pending timer that comes due first at `now_ns`, if any.
    fn next_due_timer(&self, now_ns: u64) -> Option<u32> {
        self.timers()
            .iter()
            .enumerate()
            .filter(|(_, t)| t.state == TimerState::Pending && t.due_ns <= now_ns)
            .min_by_key(|(i, t)| (t.due_ns, *i))
            .map(|(i, _)| i as u32)
    }

    /// Drops the pending timers of a run that just ended (from `terminate`).
    #[cold]
    #[inline(never)]
    pub(super) fn drop_pending_timers(&mut self) {
        let Some(r) = &mut self.waits else { return };
        let mut dropped = Vec::new();
        for (i, t) in r.timers.iter_mut().enumerate() {
            if t.state == TimerState::Pending {
                t.state = TimerState::Dropped;
                dropped.push(i as u32);
            }
        }
        for timer in dropped {
            push_record(
                &mut self.records,
                &mut self.rare,
                Record::TimerDropped { timer },
            );
        }
    }
}
