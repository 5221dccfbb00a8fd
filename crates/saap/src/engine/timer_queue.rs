//! The engine's timer queue (DESIGN §8): which run has a timer due when, earliest first, and
//! the wake-up of the task that waits for it (`timers.rs`). A waiting run costs one entry
//! here: no task, no polling. Entries are hints — a run that ended or whose timer already
//! fired is skipped when its entry comes up. Plain data and a wake-up: must not look at
//! runs or decide anything.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// (due time in nanoseconds since the Unix epoch, run id) entries, earliest first. Cheap to
/// clone (a handle).
#[derive(Clone, Default)]
pub(super) struct TimerQueue {
    state: Arc<QueueState>,
}

#[derive(Default)]
struct QueueState {
    queue: Mutex<Queue>,
    wake: tokio::sync::Notify,
}

#[derive(Default)]
struct Queue {
    due: BinaryHeap<Reverse<(u64, Arc<str>)>>,
    task_started: bool,
    /// The engine is gone: its task ends.
    closed: bool,
}

/// What the queue's task does next.
pub(super) enum Next {
    /// Nothing queued: wait for an entry.
    Idle,
    /// The earliest entry is due in this long.
    Sleep(Duration),
    /// These runs have a timer due (each once).
    Fire(Vec<Arc<str>>),
    /// The engine is gone.
    Closed,
}

impl TimerQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.state.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues run `run_id` for `due_ns`. Returns true the first time: the caller starts the
    /// queue's task then.
    pub(super) fn push(&self, due_ns: u64, run_id: Arc<str>) -> bool {
        let mut q = self.lock();
        let earliest = q.due.peek().is_none_or(|Reverse((d, _))| due_ns < *d);
        q.due.push(Reverse((due_ns, run_id)));
        let start = !q.task_started;
        q.task_started = true;
        drop(q);
        if earliest {
            self.state.wake.notify_one();
        }
        start
    }

    /// The task could not be started (no runtime): the next push tries again.
    pub(super) fn task_not_started(&self) {
        self.lock().task_started = false;
    }

    /// What is due at `now_ns`: the runs whose entries are due (taken off the queue), or how
    /// long until the earliest is.
    pub(super) fn next(&self, now_ns: u64) -> Next {
        let mut q = self.lock();
        if q.closed {
            return Next::Closed;
        }
        match q.due.peek() {
            None => Next::Idle,
            Some(Reverse((d, _))) if *d > now_ns => Next::Sleep(Duration::from_nanos(d - now_ns)),
            Some(_) => {
                let mut runs = Vec::new();
                while let Some(Reverse((d, _))) = q.due.peek() {
                    if *d > now_ns {
                        break;
                    }
                    if let Some(Reverse((_, run))) = q.due.pop() {
                        runs.push(run);
                    }
                }
                // A run queued twice (an earlier timer set meanwhile) gets one reading.
                runs.sort_unstable();
                runs.dedup();
                Next::Fire(runs)
            }
        }
    }

    /// Waits until an earlier entry is queued or the queue is closed (at most `limit`).
    pub(super) async fn wait(&self, limit: Option<Duration>) {
        match limit {
            None => self.state.wake.notified().await,
            Some(d) => {
                let _ = tokio::time::timeout(d, self.state.wake.notified()).await;
            }
        }
    }

    /// The engine is being dropped: its task ends.
    pub(super) fn close(&self) {
        self.lock().closed = true;
        self.state.wake.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(next: Next) -> Vec<String> {
        match next {
            Next::Fire(r) => r.iter().map(|r| r.to_string()).collect(),
            _ => Vec::new(),
        }
    }

    #[test]
    fn due_entries_come_out_earliest_first_each_run_once() {
        let q = TimerQueue::default();
        assert!(q.push(300, "b".into()), "the first push starts the task");
        assert!(!q.push(100, "a".into()));
        assert!(!q.push(200, "a".into()));
        assert!(matches!(q.next(50), Next::Sleep(d) if d == Duration::from_nanos(50)));
        assert_eq!(runs(q.next(250)), ["a"]);
        assert_eq!(runs(q.next(300)), ["b"]);
        assert!(matches!(q.next(1_000), Next::Idle));
        q.close();
        assert!(matches!(q.next(1_000), Next::Closed));
    }
}
