//! The queue of executions waiting for a local driver ([`Queued`], [`LocalQueue`]): bound
//! ones, started ones bound when their turn comes, and a fan-out's consecutive executions as
//! one span. A data structure only: the drivers that take from it are in `local_driver`.

use super::invocation::Invocation;
use super::slot::RunSlot;
use saap_dispatch::ExecutionId;
use std::collections::VecDeque;
use std::sync::Arc;

/// An execution waiting for its turn on a local driver.
pub(super) enum Queued {
    /// Bound already (rare: a retry, or a store's run); boxed, so that a queue of runs
    /// waiting for their first step (S3: one entry per run in flight) holds 16 bytes each.
    Bound(Box<(Arc<RunSlot>, Invocation)>),
    /// Started by a completion, bound when its turn comes.
    Started(Arc<RunSlot>, ExecutionId),
    /// Several executions of one run started by one completion (a fan-out), bound one at a
    /// time when their turn comes: one entry and one reference to the slot, not one each.
    /// Taken apart by [`pop_queued`].
    Span(Box<Span>),
}

/// Executions `next..end` of a run.
pub(super) struct Span {
    pub(super) slot: Arc<RunSlot>,
    pub(super) next: u32,
    pub(super) end: u32,
}

/// One execution taken from a queue.
pub(super) enum Dequeued {
    Bound(Box<(Arc<RunSlot>, Invocation)>),
    Started(Arc<RunSlot>, ExecutionId),
}

/// Takes a queue's first execution: its front, or a span's first (the rest stay in front).
pub(super) fn pop_queued(q: &mut VecDeque<Queued>) -> Option<Dequeued> {
    if let Some(Queued::Span(s)) = q.front_mut()
        && s.end - s.next > 1
    {
        s.next += 1;
        return Some(Dequeued::Started(s.slot.clone(), ExecutionId(s.next - 1)));
    }
    Some(match q.pop_front()? {
        Queued::Bound(b) => Dequeued::Bound(b),
        Queued::Started(slot, x) => Dequeued::Started(slot, x),
        Queued::Span(s) => {
            let Span { slot, next, .. } = *s;
            Dequeued::Started(slot, ExecutionId(next))
        }
    })
}

/// Drops the first execution of a queue's front (bound already by the caller).
pub(super) fn skip_queued(q: &mut VecDeque<Queued>) {
    match q.front_mut() {
        Some(Queued::Span(s)) if s.end - s.next > 1 => s.next += 1,
        _ => {
            q.pop_front();
        }
    }
}

/// The execution at a queue's front when it is one of `slot`'s, not bound yet.
pub(super) fn front_of(q: &VecDeque<Queued>, slot: &Arc<RunSlot>) -> Option<ExecutionId> {
    match q.front()? {
        Queued::Started(s, x) if Arc::ptr_eq(s, slot) => Some(*x),
        Queued::Span(s) if Arc::ptr_eq(&s.slot, slot) => Some(ExecutionId(s.next)),
        _ => None,
    }
}

/// Queues executions a completion started (consecutive ids, as the core starts them: one
/// span).
pub(super) fn queue_started(
    q: &mut VecDeque<Queued>,
    slot: &Arc<RunSlot>,
    xs: &mut Vec<ExecutionId>,
) {
    match (xs.first(), xs.last()) {
        (Some(first), Some(last)) if xs.len() > 1 && last.0 - first.0 + 1 == xs.len() as u32 => {
            q.push_back(Queued::Span(Box::new(Span {
                slot: slot.clone(),
                next: first.0,
                end: last.0 + 1,
            })));
            xs.clear();
        }
        _ => q.extend(xs.drain(..).map(|x| Queued::Started(slot.clone(), x))),
    }
}

/// Executions started by inputs from other tasks, waiting for the engine's driver (see
/// [`enqueue_local`]).
#[derive(Default)]
pub(crate) struct LocalQueue {
    pub(super) items: VecDeque<Queued>,
    /// A driver task exists (it empties the queue, then clears this under the lock).
    pub(super) driving: bool,
    /// The thread whose current-thread runtime the driver was spawned on.
    pub(super) thread: Option<std::thread::ThreadId>,
    /// The driver found the queue empty and waits for `local_wake` (with bodies that wait):
    /// only then does a new item wake it (else it takes the item on its next look).
    pub(super) parked: bool,
}

impl Invocation {
    /// How a local driver takes it: as is, or to be bound when its turn comes.
    pub(super) fn queued(self, slot: &Arc<RunSlot>) -> Queued {
        if self.bound {
            Queued::Bound(Box::new((slot.clone(), self)))
        } else {
            Queued::Started(slot.clone(), self.execution)
        }
    }
}
