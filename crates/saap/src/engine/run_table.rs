//! The runs an engine holds, by id ([`Runs`], [`HeldRun`]), with the slots kept for new runs
//! and the limits of what is kept. Data only: how a slot enters, leaves and is reused is in
//! `lifecycle`.

use super::ids::RunIdBuild;
use super::slot::RunSlot;
use std::sync::Arc;

/// The runs an engine holds, by id.
pub(super) type RunTable = std::collections::HashSet<HeldRun, RunIdBuild>;

/// The runs an engine holds and the slots it keeps for new runs, under one lock: a new run
/// takes a kept slot and is held in one locked section.
#[derive(Default)]
pub(super) struct Runs {
    pub(super) held: RunTable,
    /// Slots of evicted runs that nothing referred to any more, reset for new runs (their
    /// core run and buffers keep their allocations). At most [`SPARE_SLOTS`].
    pub(super) spare: Vec<Arc<RunSlot>>,
}

/// A run table entry: a slot, looked up by its run id (the table holds no second reference
/// to the id: one atomic increment at insertion and one decrement at removal fewer per run).
#[derive(Clone)]
pub(super) struct HeldRun(pub(super) Arc<RunSlot>);

impl std::borrow::Borrow<[u8]> for HeldRun {
    fn borrow(&self) -> &[u8] {
        self.0.id_text().as_bytes()
    }
}

impl PartialEq for HeldRun {
    fn eq(&self, other: &HeldRun) -> bool {
        self.0.id_text().as_bytes() == other.0.id_text().as_bytes()
    }
}

impl Eq for HeldRun {}

impl std::hash::Hash for HeldRun {
    // As the id's bytes hash (`Borrow<[u8]>` lookups find it).
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        <[u8]>::hash(self.0.id_text().as_bytes(), state);
    }
}

/// How many evicted run slots an engine keeps for reuse.
pub(super) const SPARE_SLOTS: usize = 64;

/// How many evicted runs' tables an engine keeps for runs about to execute.
pub(super) const SPARE_TABLES: usize = 16;
