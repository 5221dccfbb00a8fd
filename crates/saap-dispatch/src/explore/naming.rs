//! Canonical keys of states (reduction 1 of the module docs): events and executions named
//! structurally, hash-consed, fingerprinted. Must not apply actions.

use super::model::{Model, State};
use crate::ids::{ExecutionId, FastMap};
use crate::record::Origin;
use crate::run::{EventTy, ExecState, Run, RunStatus};
use crate::spec::ParamKind;

/// The structural names of a state's events (by sequence number) and executions (by
/// id), extended as the run grows (see [`Model::extend_naming`]).
#[derive(Clone, Default)]
pub(super) struct Naming {
    pub(super) ev: Vec<u32>,
    pub(super) xn: Vec<u32>,
    /// Events appended so far by each execution.
    pub(super) outs: Vec<u32>,
}

/// Buffers reused by [`Model::key`] (one allocation per table per exploration).
#[derive(Default)]
pub(super) struct KeyBuf {
    pub(super) slots: Vec<Vec<u32>>,
    pub(super) sorted: Vec<u32>,
    pub(super) xs: Vec<[u32; 3]>,
    pub(super) per_step: Vec<u32>,
    pub(super) key: Vec<u32>,
}

/// A 128-bit fingerprint of a canonical key: two SipHash passes with different, fixed
/// prefixes (deterministic; which states merge never depends on the hash values, barring
/// a collision). Keeping fingerprints instead
/// of whole keys makes the state table 16 bytes per state however long the runs grow; two
/// different states merge only if both 64-bit halves collide, which for 10^6 states has a
/// probability below 10^-26.
pub(super) fn fingerprint(key: &[u32]) -> u128 {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let half = |prefix: u64| {
        let mut h = DefaultHasher::new();
        prefix.hash(&mut h);
        key.hash(&mut h);
        h.finish()
    };
    (u128::from(half(0x5341_4150_6b65_7931)) << 64) | u128::from(half(0x5341_4150_6b65_7932))
}

/// Hash-consing of structural names.
#[derive(Default)]
pub(super) struct Interner {
    pub(super) map: FastMap<Box<[u32]>, u32>,
}

impl Interner {
    pub(super) fn intern(&mut self, parts: &[u32]) -> u32 {
        if let Some(&id) = self.map.get(parts) {
            return id;
        }
        let id = self.map.len() as u32;
        self.map.insert(parts.into(), id);
        id
    }
}

pub(super) const NAME_ARRIVAL: u32 = 0;
pub(super) const NAME_OUTPUT: u32 = 1;
pub(super) const NAME_EXECUTION: u32 = 2;

impl Model {
    /// The canonical key of a state (reduction 1).
    /// Names the events and executions that `run` gained since `naming` was last
    /// extended (the log and the execution table only grow).
    pub(super) fn extend_naming(
        &self,
        run: &Run,
        naming: &mut Naming,
        names: &mut Interner,
        scratch: &mut Vec<u32>,
    ) {
        let log = run.log();
        for e in &log[naming.ev.len().min(log.len())..] {
            let ty = match e.ty {
                EventTy::Known(t) => t,
                EventTy::Foreign(i) => u32::MAX - i,
            };
            let n = match e.origin {
                Origin::Outside => {
                    let i = self
                        .arrivals
                        .iter()
                        .position(|a| a.event.id == e.id)
                        .map(|i| self.first_of_id[i])
                        .unwrap_or(u32::MAX);
                    names.intern(&[NAME_ARRIVAL, i, ty])
                }
                // Events come from executions that started in an earlier action, so their
                // producer is already named.
                Origin::Execution(x) => {
                    let xi = x.0 as usize;
                    let xn = naming.xn.get(xi).copied().unwrap_or(u32::MAX);
                    let k = naming.outs.get(xi).copied().unwrap_or(0);
                    if let Some(o) = naming.outs.get_mut(xi) {
                        *o += 1;
                    }
                    names.intern(&[NAME_OUTPUT, xn, k, ty])
                }
            };
            naming.ev.push(n);
        }
        // New executions bind events that are all named now.
        for xi in naming.xn.len()..run.executions().len() {
            let n = self.exec_name(run, ExecutionId(xi as u32), &naming.ev, names, scratch);
            naming.xn.push(n);
            naming.outs.push(0);
        }
    }

    /// The canonical key of a state (reduction 1); `naming` must be extended to `st`.
    pub(super) fn key<'k>(&self, st: &State, naming: &Naming, buf: &'k mut KeyBuf) -> &'k [u32] {
        let run = &st.run;
        let execs = run.executions();
        let ev = &naming.ev;
        let KeyBuf {
            slots,
            sorted,
            xs,
            per_step,
            key,
        } = buf;
        key.clear();
        key.push(match run.status() {
            RunStatus::NotStarted => 0,
            RunStatus::Live => 1,
            // A cancelled run apart from one that ended by itself.
            RunStatus::Terminated { .. }
                if run.progress() == crate::run::progress::Progress::Cancelled =>
            {
                3
            }
            RunStatus::Terminated { .. } => 2,
        });
        key.push(st.remaining.len() as u32);
        key.extend_from_slice(&st.remaining);
        // The pending timers, in the order they fire: by the execution that set them and
        // the type of their event.
        let pending = run
            .timers()
            .iter()
            .filter(|t| t.state == crate::run::TimerState::Pending);
        key.push(pending.clone().count() as u32);
        for t in pending {
            key.push(
                naming
                    .xn
                    .get(t.set_by.0 as usize)
                    .copied()
                    .unwrap_or(u32::MAX),
            );
            key.push(match &t.ty {
                crate::run::NewEventType::Known(ty) => *ty,
                crate::run::NewEventType::Foreign { .. } => u32::MAX,
            });
        }
        self.fill_slots(run, slots);
        // Only what readiness and binding can still read (§4.3, §4.4): a single parameter
        // binds the latest event, a fixed list the set of its first N, a list the set of
        // all; the rest of a parameter's history cannot influence any later decision.
        for (si, s) in self.spec.steps.iter().enumerate() {
            for (pi, p) in s.params.iter().enumerate() {
                let slot = &slots[self.slot_offset[si] + pi];
                sorted.clear();
                match p.kind {
                    ParamKind::Required | ParamKind::Optional => {
                        sorted.extend(slot.last().map(|s| ev[*s as usize]));
                    }
                    ParamKind::FixedList => {
                        let n = slot.len().min(p.size as usize);
                        sorted.extend(slot[..n].iter().map(|s| ev[*s as usize]));
                        sorted.sort_unstable();
                    }
                    ParamKind::List => {
                        sorted.extend(slot.iter().map(|s| ev[*s as usize]));
                        sorted.sort_unstable();
                    }
                }
                key.push(sorted.len() as u32);
                key.extend_from_slice(sorted);
            }
        }
        per_step.clear();
        per_step.resize(self.spec.steps.len(), 0);
        xs.clear();
        for (i, x) in execs.iter().enumerate() {
            per_step[x.step as usize] += 1;
            let n = naming.xn.get(i).copied().unwrap_or(u32::MAX);
            let (state, nth) = match x.state {
                ExecState::Running => (0, per_step[x.step as usize]),
                ExecState::Completed => (1, 0),
                ExecState::Failed => (2, 0),
            };
            xs.push([n, state, nth]);
        }
        xs.sort_unstable();
        key.push(xs.len() as u32);
        key.extend(xs.iter().flatten());
        key
    }

    pub(super) fn exec_name(
        &self,
        run: &Run,
        x: ExecutionId,
        ev: &[u32],
        names: &mut Interner,
        scratch: &mut Vec<u32>,
    ) -> u32 {
        let Some(e) = run.execution(x) else {
            return u32::MAX;
        };
        scratch.clear();
        scratch.push(NAME_EXECUTION);
        scratch.push(e.step);
        for (pi, b) in run.bindings(x).iter().enumerate() {
            let seqs = run.bound_seqs(e.step, pi as u32, *b);
            scratch.push(seqs.len() as u32);
            let start = scratch.len();
            scratch.extend(
                seqs.iter()
                    .map(|s| ev.get(*s as usize).copied().unwrap_or(u32::MAX)),
            );
            // An input set is a set of events (§4.5): the order within a list is incidental.
            scratch[start..].sort_unstable();
        }
        names.intern(scratch)
    }
}
