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
use super::tasks::LaunchOutcome;
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
        // A run that now only waits (for its timer, perhaps for hours) holds no buffers:
        // the next completion makes them again.
        if next.is_some() && st.run.running().next().is_none() {
            st.scratch = None;
        }
    }

    /// Queues the pending timers of a run just rebuilt from its journal and held by the
    /// engine (one due while no engine had the run fires at once), and the end of its
    /// wall-time budget.
    pub(super) fn arm_timers(&self, slot: &RunSlot) {
        let mut st = slot.lock();
        if st.timers.is_some() || st.run.next_due().is_some() {
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

    /// Hands every due run of `runs` one clock reading: all applied first (their journal
    /// entries go to the store together, one group commit), then their executions launched.
    /// A run whose earliest timer is not due yet is queued again for it.
    fn fire_due(self: &Arc<Self>, runs: Vec<Arc<str>>) {
        let now = unix_nanos();
        let mut waiting = Vec::new();
        for run_id in runs {
            let Some(slot) = self.due_run(run_id, now) else {
                continue;
            };
            let applied = match self.apply_to_launch(&slot, Input::Clock(now)) {
                Ok(a) => a,
                Err(e) => {
                    tracing::error!(run_id = %slot.run_id(), error = %e, "a due timer could not be delivered");
                    continue;
                }
            };
            match self.launch_now(&slot, applied) {
                LaunchOutcome::Done(Ok(_)) => {}
                LaunchOutcome::Done(Err(e)) => {
                    tracing::error!(run_id = %slot.run_id(), error = %e, "a due timer could not be delivered");
                }
                LaunchOutcome::WaitsForStore(applied) => waiting.push((slot, applied)),
            }
        }
        if !waiting.is_empty() {
            let shared = self.clone();
            tokio::spawn(async move {
                for (slot, applied) in waiting {
                    if let Err(e) = shared.launch(&slot, applied).await {
                        tracing::error!(run_id = %slot.run_id(), error = %e, "a due timer could not be delivered");
                    }
                }
            });
        }
    }

    /// The slot of run `run_id` if its earliest timer is due at `now`; else none (a run
    /// that ended and left memory has no timers left), queued again when it is due later.
    fn due_run(&self, run_id: Arc<str>, now: u64) -> Option<Arc<RunSlot>> {
        let slot = self.slot(&run_id).ok()?;
        let mut st = slot.lock();
        match st.run.next_due() {
            Some(due) if due <= now => {
                drop(st);
                Some(slot)
            }
            Some(due) => {
                // Queued for an earlier timer that is gone: queued again for this one.
                if let Some(t) = st.timers.as_mut() {
                    t.queued_due = Some(due);
                }
                drop(st);
                self.queue_timer(due, run_id);
                None
            }
            None => None,
        }
    }
}

/// How many due runs one task hands the clock at a time.
const FIRE_BATCH: usize = 256;

/// The queue's task: sleeps until the earliest entry is due (or an earlier one is queued),
/// then hands every due run the clock. Ends when the engine is dropped.
async fn serve(queue: TimerQueue, engine: Weak<Shared>) {
    loop {
        match queue.next(unix_nanos()) {
            Next::Closed => return,
            Next::Idle => queue.wait(None).await,
            Next::Sleep(d) => queue.wait(Some(d)).await,
            Next::Fire(mut runs) => {
                let Some(shared) = engine.upgrade() else {
                    return;
                };
                // Many runs due together are handed the clock in batches, each on a task of
                // its own, so that every worker thread takes some (and their bodies start
                // while later batches are applied).
                while runs.len() > FIRE_BATCH {
                    let batch = runs.split_off(runs.len() - FIRE_BATCH);
                    let shared = shared.clone();
                    tokio::spawn(async move { shared.fire_due(batch) });
                }
                shared.fire_due(runs);
            }
        }
    }
}
