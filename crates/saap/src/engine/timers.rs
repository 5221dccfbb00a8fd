//! When the engine's runs have timers due (DESIGN §8): the run's earliest due time goes to
//! the engine's [`TimerQueue`], whose one task sleeps until an entry is due and then hands
//! each due run a clock reading ([`Input::Clock`]), which the core turns into the timers'
//! events. The core decides which timers fire; this only says when to ask it, and keeps the
//! payloads of timer events until they are logged. Must not decide anything or touch a run's
//! state beyond its timers' payloads and submitting the clock reading.

use super::apply::Input;
use super::ids::unix_nanos;
use super::shared::Shared;
use super::slot::{RunSlot, RunState};
use super::timer_queue::{Next, TimerQueue};
use std::sync::{Arc, Weak};

impl Shared {
    /// After an input that may have changed a run's timers (set some, fired some, or ended
    /// the run): drops the payloads of timers that died with the run, and queues the run
    /// again when its earliest pending timer is a new one. Called under the run's lock.
    pub(super) fn note_timers(&self, slot: &RunSlot, st: &mut RunState) {
        let next = st.run.next_due();
        let timers = st.timers.get_or_insert_with(Default::default);
        if st.run.is_terminated() {
            timers.payloads = Default::default();
        }
        if next != timers.queued_due {
            timers.queued_due = next;
            if let Some(due) = next {
                self.queue_timer(due, slot.run_id().clone());
            }
        }
    }

    /// Queues the pending timers of a run just rebuilt from its journal and held by the
    /// engine (one due while no engine had the run fires at once).
    pub(super) fn arm_timers(&self, slot: &RunSlot) {
        let mut st = slot.lock();
        if st.timers.is_some() {
            self.note_timers(slot, &mut st);
        }
    }

    /// Queues run `run_id` for `due_ns`, starting the queue's task with the first entry.
    fn queue_timer(&self, due_ns: u64, run_id: Arc<str>) {
        if !self.timers.push(due_ns, run_id) {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn(serve(self.timers.clone(), self.this.clone()));
            }
            Err(_) => {
                self.timers.task_not_started();
                tracing::error!(
                    "a timer was set outside a tokio runtime; it fires once the engine is used inside one"
                );
            }
        }
    }

    /// Hands run `run_id` the clock if its earliest timer is due; queues it again if not
    /// yet.
    async fn fire_due(self: &Arc<Self>, run_id: Arc<str>) {
        // A run that ended and left memory has no timers left to fire.
        let Ok(slot) = self.slot(&run_id) else {
            return;
        };
        let now = unix_nanos();
        {
            let mut st = slot.lock();
            match st.run.next_due() {
                Some(due) if due <= now => {}
                Some(due) => {
                    // Queued for an earlier timer that is gone: queued again for this one.
                    if let Some(t) = st.timers.as_mut() {
                        t.queued_due = Some(due);
                    }
                    drop(st);
                    self.queue_timer(due, run_id);
                    return;
                }
                None => return,
            }
        }
        if let Err(e) = self.submit(&slot, Input::Clock(now)).await {
            tracing::error!(run_id = %slot.run_id(), error = %e, "a due timer could not be delivered");
        }
    }
}

/// The queue's task: sleeps until the earliest entry is due (or an earlier one is queued),
/// then hands every due run the clock, each on a task of its own (a run's store may make it
/// wait). Ends when the engine is dropped.
async fn serve(queue: TimerQueue, engine: Weak<Shared>) {
    loop {
        match queue.next(unix_nanos()) {
            Next::Closed => return,
            Next::Idle => queue.wait(None).await,
            Next::Sleep(d) => queue.wait(Some(d)).await,
            Next::Fire(runs) => {
                let Some(shared) = engine.upgrade() else {
                    return;
                };
                for run in runs {
                    let shared = shared.clone();
                    tokio::spawn(async move { shared.fire_due(run).await });
                }
            }
        }
    }
}
