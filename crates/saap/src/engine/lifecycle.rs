//! A run slot's life in the engine: held in the run table, looked up (or read back from the
//! store when it ended), evicted when it ended and nothing runs, and recycled — its slot and
//! its tables kept for the next run. Must not apply inputs: it moves slots, not events.

use super::error::EngineError;
use super::ids::{HexId, RunIdText, RunIds, run_id_text};
use super::incoming::Incoming;
use super::run_names::Thread;
use super::run_table::{HeldRun, SPARE_SLOTS, SPARE_TABLES};
use super::shared::Shared;
use super::slot::{RunSlot, RunState, SPARE_SLOT_MAX_EVENTS, SpareTables};
use crate::event::Payload;
use parking_lot::MutexGuard;
use saap_dispatch::Run;
use std::sync::Arc;
use std::sync::atomic::Ordering;

impl Shared {
    /// Checks a start event and makes (or reuses) the slot of a new run, registered with the
    /// engine; the start event is not applied yet. The run's id is the slot's.
    #[inline]
    pub(super) fn new_run(
        &self,
        thread_id: Option<&str>,
        ev: &Incoming,
        ids: RunIds,
    ) -> Result<Arc<RunSlot>, EngineError> {
        if !(ev.kind.is_start() && ev.kind.is_control()) {
            return Err(EngineError::NotAStartEvent {
                name: ev.name.to_string(),
            });
        }
        if let Some(e) = &self.missing_resource {
            return Err(e.clone().into());
        }
        self.workflow.validate_start(&ev.payload)?;
        let (run_id, key) = run_id_text(&ids.run);
        let thread = match thread_id {
            Some(t) => Thread::Given(t.into()),
            None => Thread::New(ids.thread),
        };
        let shared = self;
        if !shared.opts.keep_ended_runs && shared.spare_slot_count.load(Ordering::Relaxed) > 0 {
            // A kept slot (reset when it was let go) is renamed and held in one locked
            // section.
            let mut runs = shared.runs.write().unwrap_or_else(|p| p.into_inner());
            if let Some(mut slot) = runs.spare.pop() {
                shared
                    .spare_slot_count
                    .store(runs.spare.len(), Ordering::Relaxed);
                // The list held the only reference.
                if let Some(spare) = Arc::get_mut(&mut slot) {
                    let ended_id = spare.rename(run_id, thread, key);
                    // A slot whose tables went to the stash when its run was evicted takes
                    // kept ones now: its first dispatch grows none. (The stash's lock
                    // is never held while the run table's is taken.)
                    shared.adopt_spare(spare.state.get_mut());
                    runs.held.replace(HeldRun(slot.clone()));
                    drop(runs);
                    drop(ended_id);
                    return Ok(slot);
                }
            }
        }
        let run = Run::new(shared.workflow.compiled().clone(), key);
        let slot = Arc::new(RunSlot::new(
            RunIdText::Hex(HexId::new(run_id)),
            thread,
            run,
        ));
        shared.insert(slot.clone());
        Ok(slot)
    }

    /// Holds `slot` under its run id (in place of a slot held under that id).
    pub(super) fn insert(&self, slot: Arc<RunSlot>) {
        self.runs
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .held
            .replace(HeldRun(slot));
    }

    /// The slot held under `slot`'s run id, else `slot`, then held.
    pub(super) fn insert_if_absent(&self, slot: Arc<RunSlot>) -> Arc<RunSlot> {
        let mut runs = self.runs.write().unwrap_or_else(|p| p.into_inner());
        if let Some(held) = runs.held.get(slot.id_text().as_bytes()) {
            return held.0.clone();
        }
        runs.held.insert(HeldRun(slot.clone()));
        slot
    }

    /// Reads a run of this workflow from the store and rebuilds it (not inserted).
    pub(super) async fn read_stored(
        &self,
        run_id: &str,
    ) -> Result<Option<Arc<RunSlot>>, EngineError> {
        let Some(stored) = self
            .backend
            .read_run(self.workflow.name(), run_id)
            .wait()
            .await?
        else {
            return Ok(None);
        };
        match self.rebuild(stored) {
            Ok((slot, _)) => Ok(Some(slot)),
            Err(detail) => Err(EngineError::Replay {
                run_id: super::error::shown(run_id),
                detail,
            }),
        }
    }

    /// The run's slot; a run this engine does not hold that the store has as ended is
    /// loaded (once, whoever asks first), so an event sent to it becomes after-stop evidence.
    pub(super) async fn slot_or_ended(&self, run_id: &str) -> Result<Arc<RunSlot>, EngineError> {
        if let Ok(slot) = self.slot(run_id) {
            return Ok(slot);
        }
        let unknown = || EngineError::unknown_run(run_id);
        if !self.journal {
            return Err(unknown());
        }
        let Some(slot) = self.read_stored(run_id).await? else {
            return Err(unknown());
        };
        if !slot.lock().run.is_terminated() {
            // A live run this engine does not hold belongs to another engine (a worker).
            return Err(unknown());
        }
        Ok(self.insert_if_absent(slot))
    }

    pub(crate) fn slot(&self, run_id: &str) -> Result<Arc<RunSlot>, EngineError> {
        self.held(run_id)
            .ok_or_else(|| EngineError::unknown_run(run_id))
    }

    /// The run's slot if this engine holds it (for a lookup that may miss: no error made).
    #[inline]
    pub(crate) fn held(&self, run_id: &str) -> Option<Arc<RunSlot>> {
        self.runs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .held
            .get(run_id.as_bytes())
            .map(|held| held.0.clone())
    }

    /// After an input with nothing started: when the run is quiet, drops it from memory
    /// (if the engine does not keep ended runs) and wakes `wait_for_end` waiters — one
    /// look under the run's lock for all three. Returns whether the run is quiet (a quiet
    /// run stays quiet: it has ended, or stopped, and starts nothing more).
    pub(super) fn maybe_evict(&self, slot: &RunSlot) -> bool {
        self.maybe_evict_locked(slot, slot.lock())
    }

    /// [`Shared::maybe_evict`] with the run's lock taken (`st`, released here).
    pub(super) fn maybe_evict_locked(
        &self,
        slot: &RunSlot,
        mut st: MutexGuard<'_, RunState>,
    ) -> bool {
        if !st.is_quiet() {
            return false;
        }
        let woken = st.waiters.take();
        if !self.opts.keep_ended_runs {
            // The run table's lock under the run's: nothing takes a run's lock while holding
            // the table's.
            let in_flight = {
                let mut runs = self.runs.write().unwrap_or_else(|p| p.into_inner());
                runs.held.remove(slot.id_text().as_bytes());
                runs.held.len()
            };
            // Other runs in flight: whoever waits for this one's end may hold it for a while
            // (a waiter runs after the tasks before it), and another run may be about to
            // execute for the first time: its tables go now, not when the last waiter lets
            // go.
            if in_flight > 0 {
                let spare = st.forget();
                drop(st);
                self.stash(spare);
                woken.wake();
                return true;
            }
        }
        drop(st);
        woken.wake();
        true
    }

    /// Drops a reference to a run's slot. When it was the last one (the run was evicted and
    /// nothing else holds it), the slot is kept for a new run instead of freed.
    pub(super) fn release(&self, mut slot: Arc<RunSlot>) {
        // Looked at without an atomic write first: most calls let go of a slot that the run
        // table or a waiter still holds, or find the list full.
        if self.opts.keep_ended_runs
            || Arc::strong_count(&slot) > 1
            || self.spare_slot_count.load(Ordering::Relaxed) >= SPARE_SLOTS
        {
            return;
        }
        let Some(s) = Arc::get_mut(&mut slot) else {
            return;
        };
        let st = s.state.get_mut();
        if !st.fits_a_spare_slot() {
            // Too large to keep: its tables serve the next large fan-out, and its payloads'
            // allocations the next run's events (`forget` recycles them).
            let spare = st.forget();
            self.stash(spare);
            return;
        }
        // Reset here, outside the run table's lock, which a new run takes it under.
        s.recycle();
        let mut runs = self.runs.write().unwrap_or_else(|p| p.into_inner());
        if runs.spare.len() < SPARE_SLOTS {
            runs.spare.push(slot);
            self.spare_slot_count
                .store(runs.spare.len(), Ordering::Relaxed);
        }
    }

    /// Keeps an evicted run's tables for a run about to execute (small ones only, and a
    /// few), else frees them.
    pub(super) fn stash(&self, spare: SpareTables) {
        if spare.core.event_capacity() > SPARE_SLOT_MAX_EVENTS
            || spare.payloads.capacity() > SPARE_SLOT_MAX_EVENTS
        {
            let bytes = spare.core.memory_bytes()
                + spare.payloads.capacity() * std::mem::size_of::<Payload>();
            if bytes <= self.opts.kept_table_bytes {
                *self.large_spare.lock().unwrap_or_else(|p| p.into_inner()) = Some(spare);
            }
            return;
        }
        let mut kept = self.spare_tables.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() < SPARE_TABLES {
            kept.push(spare);
        }
    }

    /// Before a run's first execution is bound: a run that has not executed yet (no
    /// scratch buffers) takes over the tables of an evicted run, if the engine keeps any.
    /// Inlined: most callers hold a run that executed already (a recycled slot's), and
    /// the look costs less than a call.
    #[inline]
    pub(super) fn adopt_spare(&self, st: &mut RunState) {
        if self.opts.keep_ended_runs || st.scratch.is_some() {
            return;
        }
        self.adopt_spare_tables(st);
    }

    /// [`Shared::adopt_spare`] for a run that has not executed yet.
    #[inline(never)]
    pub(super) fn adopt_spare_tables(&self, st: &mut RunState) {
        let spare = self
            .spare_tables
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop();
        if let Some(mut spare) = spare {
            st.adopt(&mut spare);
            // `spare` now holds the run's first-dispatch tables, freed here.
        }
    }

    /// Before a large fan-out is applied: the run takes over the tables of the last large
    /// run the engine kept (see `large_spare`) where they are larger than its own.
    #[cold]
    #[inline(never)]
    pub(super) fn adopt_large(&self, st: &mut RunState) {
        if self.opts.keep_ended_runs {
            return;
        }
        let spare = self
            .large_spare
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(mut spare) = spare {
            st.adopt(&mut spare);
            // `spare` now holds the run's former tables, freed here.
        }
    }

    /// How many slots [`Shared::release`] kept for new runs.
    #[cfg(test)]
    pub(super) fn spare_slots(&self) -> usize {
        self.runs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .spare
            .len()
    }

    /// The end of a quiet run whose own driver left its eviction to the caller
    /// ([`Shared::keep_buffers_and_see_end`]), with the caller's reference to its slot:
    /// drops it from the run table and, when nothing else refers to it and no other run is
    /// held, resets it and keeps it for a new run in the same locked section; else evicts
    /// it as [`Shared::maybe_evict_locked`] does, wakes its waiters and lets it go
    /// ([`Shared::release`]).
    pub(super) fn evict_and_release(&self, mut slot: Arc<RunSlot>) {
        let mut runs = self.runs.write().unwrap_or_else(|p| p.into_inner());
        runs.held.remove(slot.id_text().as_bytes());
        let in_flight = runs.held.len();
        // Nothing else refers to the run (so nothing waits for it: a waiter holds a
        // reference), no other run is held, the slot is small: reset under the table's
        // lock, which only a new run's lookup can wait for now.
        if in_flight == 0
            && runs.spare.len() < SPARE_SLOTS
            && let Some(s) = Arc::get_mut(&mut slot)
            && s.state.get_mut().fits_a_spare_slot()
        {
            s.recycle();
            runs.spare.push(slot);
            self.spare_slot_count
                .store(runs.spare.len(), Ordering::Relaxed);
            return;
        }
        drop(runs);
        // Else as `maybe_evict_locked` after the run left the table: with other runs in
        // flight, its tables go to the stash now (another run may be about to execute for
        // the first time).
        let mut st = slot.lock();
        let spare = (in_flight > 0).then(|| st.forget());
        let woken = st.waiters.take();
        drop(st);
        if let Some(spare) = spare {
            self.stash(spare);
        }
        woken.wake();
        self.release(slot);
    }
}
