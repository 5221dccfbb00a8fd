//! The tasks waiting until a run is quiet ([`Waiters`]), registered under the run's lock,
//! and the wake-ups taken from it ([`Woken`]), delivered after the lock is let go. A plain
//! list: it knows nothing of runs or locks itself (the future that registers is
//! `slot::UntilQuiet`).

/// Tasks waiting until a run is quiet, kept under the run's lock: a waiter registers in
/// the same locked section in which it finds the run not quiet, and whoever makes the run
/// quiet takes the waiters in the section in which it sees that (no wake-up is lost, and
/// neither takes a lock of its own). A registration is keyed by the address of its pinned
/// [`UntilQuiet`] future, unique among live ones. The first waiter inline, others boxed: a
/// run has at most one (`wait_for_end`) in most uses, and the state stays 32 bytes.
#[derive(Default)]
pub(super) struct Waiters {
    pub(super) first: Option<(usize, std::task::Waker)>,
    #[allow(
        clippy::box_collection,
        reason = "8 bytes in every run's state, not 24: a second waiter is rare"
    )]
    pub(super) more: Option<Box<Vec<(usize, std::task::Waker)>>>,
}

impl Waiters {
    /// Registers `waker` under `key`, or updates the registration under `key`.
    pub(super) fn register(&mut self, key: usize, waker: &std::task::Waker) {
        let more = self.more.as_deref_mut().map(Vec::as_mut_slice);
        if let Some((_, w)) = self
            .first
            .iter_mut()
            .chain(more.into_iter().flatten())
            .find(|(k, _)| *k == key)
        {
            if !w.will_wake(waker) {
                w.clone_from(waker);
            }
            return;
        }
        if self.first.is_none() {
            self.first = Some((key, waker.clone()));
        } else {
            self.more
                .get_or_insert_with(Box::default)
                .push((key, waker.clone()));
        }
    }

    /// Drops the registration under `key` (a waiter that stopped waiting), if still there.
    pub(super) fn remove(&mut self, key: usize) {
        if self.first.as_ref().is_some_and(|(k, _)| *k == key) {
            self.first = None;
        } else if let Some(more) = self.more.as_deref_mut()
            && let Some(i) = more.iter().position(|(k, _)| *k == key)
        {
            more.swap_remove(i);
        }
    }

    /// How many waiters are registered.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.more.as_ref().map_or(0, |m| m.len())
    }

    /// Takes every registration, to wake once the run's lock is released.
    pub(super) fn take(&mut self) -> Woken {
        Woken {
            first: self.first.take().map(|(_, w)| w),
            more: self.more.take(),
        }
    }
}

/// Waiters taken from a run, woken (outside its lock) by [`Woken::wake`].
pub(super) struct Woken {
    pub(super) first: Option<std::task::Waker>,
    #[allow(clippy::box_collection, reason = "moved out of `Waiters` as is")]
    pub(super) more: Option<Box<Vec<(usize, std::task::Waker)>>>,
}

impl Woken {
    pub(super) fn wake(self) {
        if let Some(w) = self.first {
            w.wake();
        }
        // Not a `flat_map` over the option: its drop costs more than this whole call
        // when there is no waiter (most runs).
        if let Some(more) = self.more {
            for (_, w) in *more {
                w.wake();
            }
        }
    }
}
