//! A run's memory: reset and reuse of its tables between runs ([`super::RunTables`]), evidence
//! dropped, what it holds measured. Must not decide anything.

use super::{Bound, Execution, LoggedEvent, NO_SEQ, Rare, Run, RunStatus, RunTables, Waits, rare};
use crate::ids::ExecutionId;
use crate::ids::Seq;
use crate::ids::StepIdx;
use crate::record::Packed;
use crate::record::Record;

impl Run {
    /// Turns this run into a fresh, not yet started run of the same workflow with another
    /// key, keeping its allocations: an engine that recycles ended runs this way pays for
    /// its tables once, not once per run. Decides exactly like [`Run::sibling`].
    pub fn reset(&mut self, run_key: u64) {
        let ended = self.is_terminated();
        self.run_key = run_key;
        self.status = RunStatus::NotStarted;
        self.log.clear();
        if let Some(r) = &mut self.rare {
            r.by_id.clear();
            r.foreign_names.clear();
            r.seq_table.clear();
            r.input_sets.clear();
            r.input_set_collisions.clear();
            r.extra_records.clear();
            r.errors.clear();
        }
        if let Some(w) = &mut self.waits {
            w.timers.clear();
            w.children.clear();
            w.budget = None;
        }
        self.ids_indexed = false;
        self.id_bits = [0; 2];
        self.start_seq = NO_SEQ;
        for m in &mut self.matches {
            m.clear();
        }
        let counts = self.count_base as usize;
        self.slots[..counts].fill(NO_SEQ);
        // A terminated run's execution counts were zeroed when it ended (`terminate`),
        // and nothing starts after that.
        if !ended {
            self.slots[counts..].fill(0);
        }
        self.input_sets_indexed = self.linear_input_sets == 0;
        self.index_ids_at = self.linear_ids;
        self.index_sets_at = if self.input_sets_indexed {
            u32::MAX
        } else {
            self.linear_input_sets
        };
        self.executions.clear();
        self.bindings.clear();
        self.records.clear();
        self.untaken = 0;
        self.held_from = u32::MAX;
    }

    /// Gives a run that has not begun — new, or just [`Run::reset`] — another key: the
    /// same as [`Run::reset`] with it, without emptying tables that are empty. A run that
    /// logged any event is reset.
    pub fn rekey(&mut self, run_key: u64) {
        if self.log.is_empty() && matches!(self.status, RunStatus::NotStarted) {
            self.run_key = run_key;
        } else {
            self.reset(run_key);
        }
    }

    /// Gives back the spare capacity of the run's tables (they grow by doubling from a small
    /// first size): for an engine that keeps ended runs, so that each holds what it logged
    /// and recorded, not up to twice that. Decisions are unchanged; a run that goes on after
    /// this grows its tables again.
    pub fn shrink_to_fit(&mut self) {
        self.log.shrink_to_fit();
        self.records.shrink_to_fit();
        self.executions.shrink_to_fit();
        self.bindings.shrink_to_fit();
        for m in &mut self.matches {
            m.shrink_to_fit();
        }
        if let Some(r) = &mut self.rare {
            let log = &self.log;
            r.by_id.shrink_to_fit(|s| log[s as usize].id);
            r.seq_table.shrink_to_fit();
            r.input_sets.shrink_to_fit();
            r.input_set_collisions.shrink_to_fit();
            r.extra_records.shrink_to_fit();
            r.errors.shrink_to_fit();
        }
    }

    /// Frees the memory of the run's evidence — log, records, executions, bindings, match
    /// lists, indexes — keeping its status (an ended run stays ended, with nothing
    /// running). For an engine that keeps no ended runs: one still referenced for a while
    /// (by whoever waits for its end) need not hold its tables. [`Run::reset`] makes it a
    /// fresh run as usual.
    pub fn forget_evidence(&mut self) {
        self.log = Vec::new();
        self.rare = None;
        self.waits = None;
        self.ids_indexed = false;
        self.index_ids_at = self.linear_ids;
        self.id_bits = [0; 2];
        for m in &mut self.matches {
            *m = Vec::new();
        }
        self.executions = Vec::new();
        self.bindings = Vec::new();
        self.records = Vec::new();
        self.untaken = 0;
    }

    /// [`Run::forget_evidence`], handing back the four growing tables emptied with their
    /// allocations (for [`Run::grow_into`] of another run) instead of freeing them.
    pub fn take_tables(&mut self) -> RunTables {
        let mut t = RunTables {
            log: std::mem::take(&mut self.log),
            executions: std::mem::take(&mut self.executions),
            bindings: std::mem::take(&mut self.bindings),
            records: std::mem::take(&mut self.records),
            ids: self
                .rare
                .as_mut()
                .map(|r| std::mem::take(&mut r.by_id))
                .unwrap_or_default(),
        };
        t.log.clear();
        t.executions.clear();
        t.bindings.clear();
        t.records.clear();
        t.ids.clear();
        self.forget_evidence();
        t
    }

    /// Moves each of the run's growing tables into `spare`'s allocation of the same table
    /// where that one is larger (the contents are moved, so decisions are unchanged), and
    /// leaves `spare` with the run's former tables, emptied: a run about to execute takes
    /// over an ended run's tables instead of growing its own (see
    /// `size_for_a_whole_run`).
    pub fn grow_into(&mut self, spare: &mut RunTables) {
        fn adopt<T>(mine: &mut Vec<T>, spare: &mut Vec<T>) {
            if spare.capacity() > mine.capacity() {
                spare.clear();
                spare.append(mine);
                std::mem::swap(mine, spare);
            }
        }
        adopt(&mut self.log, &mut spare.log);
        adopt(&mut self.executions, &mut spare.executions);
        adopt(&mut self.bindings, &mut spare.bindings);
        adopt(&mut self.records, &mut spare.records);
        // The id index only before the run builds its own (it is empty until then).
        let mine = self.rare.as_ref().map_or(0, |r| r.by_id.capacity());
        if !self.ids_indexed && spare.ids.capacity() > mine {
            std::mem::swap(&mut rare(&mut self.rare).by_id, &mut spare.ids);
        }
    }

    /// Approximate bytes held by the whole run: the `Run` itself, its bookkeeping
    /// ([`Run::state_bytes`]), its log and records, foreign type names and error messages
    /// (allocator overhead not included).
    pub fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        size_of::<Run>()
            + self.state_bytes()
            + self.log.capacity() * size_of::<LoggedEvent>()
            + self.records.capacity() * size_of::<Packed>()
            + self.rare.as_ref().map_or(0, |r| {
                r.foreign_names.capacity() * size_of::<Box<str>>()
                    + r.foreign_names.iter().map(|n| n.len()).sum::<usize>()
                    + r.input_set_collisions.capacity() * size_of::<(StepIdx, u64, ExecutionId)>()
                    + r.extra_records.capacity() * size_of::<Record>()
            })
            + self.rare.as_ref().map_or(0, |r| {
                r.errors.capacity() * (size_of::<(ExecutionId, Box<str>)>() + 1)
                    + r.errors.values().map(|e| e.len()).sum::<usize>()
            })
    }

    /// Approximate heap bytes held by this run's bookkeeping (not counting the log and
    /// records, which grow with the events).
    pub fn state_bytes(&self) -> usize {
        use std::mem::size_of;
        self.matches.capacity() * size_of::<Vec<Seq>>()
            + self.matches.iter().map(|m| m.capacity() * 4).sum::<usize>()
            + self.slots.capacity() * 4
            + self.waits.as_ref().map_or(0, |w| {
                size_of::<Waits>()
                    + w.timers.capacity() * size_of::<super::Timer>()
                    + w.children.capacity() * size_of::<super::Child>()
                    + w.budget.as_ref().map_or(0, |_| size_of::<super::Budget>())
            })
            + self.rare.as_ref().map_or(0, |r| {
                size_of::<Rare>()
                    + r.seq_table.capacity() * 4
                    + r.input_sets.capacity()
                        * (size_of::<(StepIdx, u64)>() + size_of::<ExecutionId>() + 1)
                    + r.by_id.capacity() * size_of::<u32>()
            })
            + self.executions.capacity() * size_of::<Execution>()
            + self.bindings.capacity() * size_of::<Bound>()
    }
}
