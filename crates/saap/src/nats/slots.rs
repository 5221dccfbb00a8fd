//! A worker's slots for step bodies ([`Slots`], adaptive placement): how many bodies run
//! here at once. Must not decide where a body runs: the work queue asks it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Notify;

/// A worker's slots for step bodies (adaptive placement, `WorkerOptions::local_slots`):
/// bodies its engine runs itself and work items it took from the queue each hold one while
/// they run. The owner runs a body itself only when a slot is free; the work-queue puller
/// asks for as many items as slots are free. A pull that was asked while slots were free
/// may deliver after local bodies took them: those items run anyway (the bound is soft, at
/// most `local_slots` over).
pub(super) struct Slots {
    limit: usize,
    busy: AtomicUsize,
    freed: Notify,
}

/// One held slot; dropping it frees the slot.
pub(super) struct Busy(Arc<Slots>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
        self.0.freed.notify_one();
    }
}

impl Slots {
    pub(super) fn new(limit: usize) -> Arc<Slots> {
        Arc::new(Slots {
            limit,
            busy: AtomicUsize::new(0),
            freed: Notify::new(),
        })
    }

    /// A free slot, or `None` when all are held.
    pub(super) fn try_take(self: &Arc<Self>) -> Option<Busy> {
        self.busy
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| {
                (b < self.limit).then_some(b + 1)
            })
            .ok()
            .map(|_| Busy(self.clone()))
    }

    /// A slot even when all are held (a work item already delivered).
    pub(super) fn take(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        Busy(self.clone())
    }

    /// How many slots are free now.
    pub(super) fn free(&self) -> usize {
        self.limit.saturating_sub(self.busy.load(Ordering::Acquire))
    }

    /// Waits until at least one slot is free; returns how many are.
    pub(super) async fn wait_free(&self) -> usize {
        loop {
            let freed = self.freed.notified();
            let n = self.free();
            if n > 0 {
                return n;
            }
            freed.await;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn local_slots_bound_local_bodies_and_free_on_drop() {
        let slots = Slots::new(2);
        let a = slots.try_take().unwrap();
        let _b = slots.try_take().unwrap();
        assert!(
            slots.try_take().is_none(),
            "a third local body over 2 slots"
        );
        // A delivered work item holds a slot even over the bound (soft bound).
        let over = slots.take();
        assert_eq!(slots.free(), 0);
        drop(over);
        drop(a);
        assert_eq!(slots.wait_free().await, 1);
        assert!(slots.try_take().is_some());
        assert!(
            Slots::new(0).try_take().is_none(),
            "0 slots: every body is published"
        );
    }
}
