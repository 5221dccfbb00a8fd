//! Delegation (DESIGN §8): the runs a run handed work to. An execution's outputs include a
//! request event (an `AgentInTheLoopRequestEvent`); the engine tells the core which of them
//! are delegations ([`Run::delegate`], in the same journal entry as the completion), starts
//! the child runs, and hands the core the event that reports a child's end
//! ([`Run::child_ended`]: appended as an arrival, after a `ChildEnded` record). Awaited
//! children keep the run waiting (see [`super::progress::Progress`]); when the run ends
//! first they are abandoned (recorded; the engine cancels their runs). Detached children
//! only join the tree, and are abandoned only when the run is cancelled. A reported end
//! that no step takes is an unmet obligation (recorded, and the run's wait says so) rather
//! than a silent stall. An awaited child may have a deadline: a timer of the run
//! ([`super::Timer::for_child`]) that its end drops, and that, firing first, delivers its
//! event in the end's place and gives the child up (`ChildTimedOut`). Must not start, watch or cancel runs: engines do, and read the
//! child table ([`Run::children`]) to know which.

use super::{
    AppendError, Appended, Child, ChildRequest, ChildState, CompleteError, ExecState, NewEvent,
    NewEventType, PreconditionEvaluator, Run, push_record, waits,
};
use crate::ids::ExecutionId;
use crate::record::{Origin, Record};

/// The most children one run may have (awaited and detached together); more are refused (a
/// run that needs more should delegate to an agent that fans out itself).
pub const MAX_CHILDREN: usize = 10_000;

/// Why [`Run::delegate`] or [`Run::child_ended`] refused an input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChildError {
    #[error(
        "execution {execution} delegated but has not completed: delegations are a completed execution's outputs"
    )]
    NotCompleted { execution: ExecutionId },
    #[error(
        "execution {execution} delegated with request event {request}, which is not in the run's log"
    )]
    UnknownRequest {
        execution: ExecutionId,
        request: crate::ids::EventId,
    },
    #[error("the run already has {MAX_CHILDREN} children; delegate to an agent that fans out")]
    TooManyChildren,
    #[error(
        "the children's deadlines would pass the run's limit of {} pending timers; give fewer children deadlines",
        super::timers::MAX_PENDING_TIMERS
    )]
    TooManyDeadlines,
    #[error("the run has no child {child}")]
    UnknownChild { child: u32 },
    #[error("child {child} runs detached: its end is not delivered to its parent")]
    Detached { child: u32 },
    #[error("the end of child {child} was delivered already")]
    AlreadyEnded { child: u32 },
    #[error("child {child} timed out: its deadline's event took its end's place")]
    TimedOut { child: u32 },
    #[error(transparent)]
    Complete(#[from] CompleteError),
    #[error(transparent)]
    Append(#[from] AppendError),
}

impl Run {
    /// Records the delegations an execution returned (it completed in the same journal
    /// entry, and each request is one of its outputs). On a run that has ended, awaited
    /// ones are abandoned at once. Returns how many children were added.
    pub fn delegate(
        &mut self,
        execution: ExecutionId,
        requests: Vec<ChildRequest>,
    ) -> Result<u32, ChildError> {
        let state = match self.execution(execution) {
            Some(e) => e.state,
            None => return Err(CompleteError::UnknownExecution(execution).into()),
        };
        if state != ExecState::Completed {
            return Err(ChildError::NotCompleted { execution });
        }
        if self.children().len() + requests.len() > MAX_CHILDREN {
            return Err(ChildError::TooManyChildren);
        }
        let mut seqs = Vec::with_capacity(requests.len());
        for r in &requests {
            match self.seq_of(&r.request) {
                Some(seq) => seqs.push(seq),
                None => {
                    return Err(ChildError::UnknownRequest {
                        execution,
                        request: r.request,
                    });
                }
            }
        }
        let ended = self.is_terminated();
        let n = requests.len() as u32;
        let deadlines = requests.iter().filter(|r| r.deadline.is_some()).count();
        if deadlines > 0
            && self.pending_timer_count() + deadlines > super::timers::MAX_PENDING_TIMERS
        {
            return Err(ChildError::TooManyDeadlines);
        }
        for (r, request_seq) in requests.into_iter().zip(seqs) {
            let table = &mut waits(&mut self.waits).children;
            let child = table.len() as u32;
            let state = match (r.detached, ended) {
                (true, _) => ChildState::Detached,
                (false, false) => ChildState::Awaited,
                (false, true) => ChildState::Abandoned,
            };
            table.push(Child {
                request: r.request,
                request_seq,
                requested_by: execution,
                state,
            });
            push_record(
                &mut self.records,
                &mut self.rare,
                Record::ChildRequested { child, execution },
            );
            if state == ChildState::Abandoned {
                push_record(
                    &mut self.records,
                    &mut self.rare,
                    Record::ChildAbandoned { child },
                );
            }
            if let (Some(deadline), ChildState::Awaited) = (r.deadline, state) {
                let timers = &mut waits(&mut self.waits).timers;
                let timer = timers.len() as u32;
                timers.push(super::Timer {
                    event_id: deadline.event.id,
                    ty: deadline.event.ty,
                    due_ns: deadline.due_ns,
                    set_by: execution,
                    state: super::TimerState::Pending,
                    for_child: Some(child),
                });
                push_record(
                    &mut self.records,
                    &mut self.rare,
                    Record::TimerSet { timer, execution },
                );
            }
        }
        Ok(n)
    }

    /// Delivers the event that reports child `child`'s end (a response or an exception
    /// event): appended as an arrival from outside and dispatched. For an abandoned child it
    /// is kept as after-stop evidence. A detached child's end, or a second end, is refused.
    pub fn child_ended(
        &mut self,
        child: u32,
        event: NewEvent,
        pre: &mut dyn PreconditionEvaluator,
    ) -> Result<Appended, ChildError> {
        match self.children().get(child as usize).map(|c| c.state) {
            None => return Err(ChildError::UnknownChild { child }),
            Some(ChildState::Detached) => return Err(ChildError::Detached { child }),
            Some(ChildState::Ended { .. } | ChildState::Unmet { .. }) => {
                return Err(ChildError::AlreadyEnded { child });
            }
            Some(ChildState::TimedOut { .. }) => return Err(ChildError::TimedOut { child }),
            Some(ChildState::Awaited | ChildState::Abandoned) => {}
        }
        self.drop_deadline(child);
        push_record(
            &mut self.records,
            &mut self.rare,
            Record::ChildEnded { child },
        );
        let NewEvent { id, mut ty } = event;
        let untaken = match &ty {
            NewEventType::Known(t) => self.spec.consumers(*t).is_empty(),
            NewEventType::Foreign { .. } => true,
        };
        let appended = self.append_from(id, &mut ty, Origin::Outside, pre)?;
        let state = match appended {
            Appended::Duplicate { .. } => ChildState::Ended { seq: None },
            // Dispatched to nobody: the run waits for something that came and that it
            // cannot take.
            Appended::Dispatched { seq, .. } if untaken => {
                push_record(
                    &mut self.records,
                    &mut self.rare,
                    Record::ObligationUnmet { child },
                );
                ChildState::Unmet { seq }
            }
            Appended::Dispatched { seq, .. }
            | Appended::Terminated { seq }
            | Appended::DisplayOnly { seq }
            | Appended::AfterStop { seq } => ChildState::Ended { seq: Some(seq) },
        };
        waits(&mut self.waits).children[child as usize].state = state;
        Ok(appended)
    }

    /// The run's children, in the order they were requested (a child's number is its
    /// index).
    pub fn children(&self) -> &[Child] {
        match &self.waits {
            Some(r) => &r.children,
            None => &[],
        }
    }

    /// Drops child `child`'s pending deadline, if it has one (its end came first).
    fn drop_deadline(&mut self, child: u32) {
        let Some(r) = &mut self.waits else { return };
        let Some(timer) = r
            .timers
            .iter()
            .position(|t| t.for_child == Some(child) && t.state == super::TimerState::Pending)
        else {
            return;
        };
        r.timers[timer].state = super::TimerState::Dropped;
        push_record(
            &mut self.records,
            &mut self.rare,
            Record::TimerDropped {
                timer: timer as u32,
            },
        );
    }

    /// Child `child`'s deadline fired (from `fire_due`, after its `TimerFired`): the child
    /// is given up; its deadline's event is appended next.
    pub(super) fn deadline_reached(&mut self, child: u32) {
        push_record(
            &mut self.records,
            &mut self.rare,
            Record::ChildTimedOut { child },
        );
        waits(&mut self.waits).children[child as usize].state = ChildState::TimedOut { seq: None };
    }

    /// How many children ended with a report no step takes (unmet obligations).
    pub fn unmet_obligation_count(&self) -> usize {
        self.children()
            .iter()
            .filter(|c| matches!(c.state, ChildState::Unmet { .. }))
            .count()
    }

    /// How many children the run waits for.
    pub fn awaited_child_count(&self) -> usize {
        self.children()
            .iter()
            .filter(|c| c.state == ChildState::Awaited)
            .count()
    }

    /// Abandons the children of a run that just ended (from `terminate`): the awaited ones,
    /// and, when it was cancelled, the detached ones too (a cancel covers the whole tree;
    /// a run that stopped lets its detached children run on). The engine cancels the runs of
    /// abandoned children.
    #[cold]
    #[inline(never)]
    pub(super) fn abandon_children(&mut self) {
        let cancelled = self.progress() == super::progress::Progress::Cancelled;
        let Some(r) = &mut self.waits else { return };
        let mut abandoned = Vec::new();
        for (i, c) in r.children.iter_mut().enumerate() {
            if c.state == ChildState::Awaited || (cancelled && c.state == ChildState::Detached) {
                c.state = ChildState::Abandoned;
                abandoned.push(i as u32);
            }
        }
        for child in abandoned {
            push_record(
                &mut self.records,
                &mut self.rare,
                Record::ChildAbandoned { child },
            );
        }
    }
}
