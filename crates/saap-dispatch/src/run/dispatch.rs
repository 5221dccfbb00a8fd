//! Dispatching a logged event (DESIGN §4): which steps it wakes, their preconditions asked
//! and recorded, executions started with their bound inputs, input sets deduplicated (R5).
//! Must not log events: `append` and `complete` do, then call it.

use super::{
    Bound, ExecState, Execution, FIXED_LIST_RESERVE, NO_SEQ, PreconditionCall,
    PreconditionEvaluator, Run, RunStatus, SMALL_SEQS, bind_one, fill_seq_table, push_record, rare,
};
use crate::compiled::TypeId;
use crate::ids::ExecutionId;
use crate::ids::ParamIdx;
use crate::ids::Seq;
use crate::ids::StepIdx;
use crate::record::Record;
use crate::record::SkipReason;
use crate::spec::ParamKind;
use std::hash::{Hash, Hasher};

impl Run {
    /// Candidacy, readiness, binding and start for one trigger (DESIGN §4.1–§4.5).
    #[inline(always)]
    pub(super) fn dispatch(
        &mut self,
        seq: Seq,
        t: TypeId,
        pre: &mut dyn PreconditionEvaluator,
    ) -> u32 {
        // The common case (a chain link): one consumer, the only parameter of its step.
        // Ready at once (its parameter binds the trigger) and its input set is new, so it
        // starts unless a precondition or a budget has a say (then the general path below).
        if let &[c] = self.spec.consumer_slots(t)
            && c.starts_at_once
        {
            // Only a live run dispatches, and nothing here ends it.
            debug_assert_eq!(self.status, RunStatus::Live);
            self.slots[c.slot as usize] = seq;
            push_record(
                &mut self.records,
                &mut self.rare,
                Record::Candidate {
                    trigger: seq,
                    step: c.step,
                },
            );
            let bind_start = self.bindings.len() as u32;
            if seq as usize >= SMALL_SEQS {
                fill_seq_table(&mut self.rare, seq);
            }
            self.bindings.push(Bound::One(seq));
            self.start(c.step, seq, bind_start);
            return 1;
        }
        if let &[c] = self.spec.consumer_slots(t) {
            return self.dispatch_to_one(c, seq, pre);
        }
        self.dispatch_to_many(seq, t, pre)
    }

    /// [`Run::dispatch`] for a type with several consumers. Out of line, like
    /// [`Run::dispatch_to_one`] and [`Run::evaluate`]: what is inlined into the completion
    /// loop is the chain link's path only, whatever the compiler decides about the rest.
    #[inline(never)]
    pub(super) fn dispatch_to_many(
        &mut self,
        seq: Seq,
        t: TypeId,
        pre: &mut dyn PreconditionEvaluator,
    ) -> u32 {
        // No Arc clone on this path: the spec is borrowed field by field next to the
        // mutable bookkeeping (an atomic increment and decrement per trigger add up).
        for c in self.spec.consumer_slots(t) {
            let slot = c.slot as usize;
            match c.kind {
                ParamKind::Required | ParamKind::Optional => self.slots[slot] = seq,
                ParamKind::List => self.matches[slot].push(seq),
                ParamKind::FixedList => {
                    let m = &mut self.matches[slot];
                    m.push(seq);
                    if m.len() > c.size as usize {
                        push_record(
                            &mut self.records,
                            &mut self.rare,
                            Record::FixedListOverflow {
                                trigger: seq,
                                step: c.step,
                                param: c.param,
                            },
                        );
                    }
                }
            }
        }
        // The consumers are sorted by step: each step is a candidate once, in step order.
        let mut started = 0;
        let mut previous = None;
        for i in 0..self.spec.consumer_slots(t).len() {
            let c = self.spec.consumer_slots(t)[i];
            let step = c.step;
            if previous == Some(step) {
                continue;
            }
            previous = Some(step);
            push_record(
                &mut self.records,
                &mut self.rare,
                Record::Candidate { trigger: seq, step },
            );
            if self.evaluate(step, seq, c.single, pre) {
                started += 1;
            }
        }
        started
    }

    /// [`Run::dispatch`] for a type with one consumer that does not simply start (e.g. a
    /// fan-in): bound, then decided once, as the general loops would, without them.
    /// Inlined (a fan-in's arrival pays no call; measured: S2 -26 instructions per arrival,
    /// S1 +3 per completion); its evaluate and the several-consumer path stay out of line.
    #[inline(always)]
    pub(super) fn dispatch_to_one(
        &mut self,
        c: crate::compiled::ConsumerSlot,
        seq: Seq,
        pre: &mut dyn PreconditionEvaluator,
    ) -> u32 {
        let slot = c.slot as usize;
        match c.kind {
            ParamKind::Required | ParamKind::Optional => self.slots[slot] = seq,
            ParamKind::List => {
                let m = &mut self.matches[slot];
                m.push(seq);
                let n = m.len() as u32;
                let count = self.count_slot(c.step);
                if c.sole_list && self.slots[count] == 0 && !self.input_sets_indexed {
                    // The step's only parameter is a list and the step has never run: it
                    // is ready up to its precondition (live run, nothing blocks, budget at
                    // least 1, no earlier input set), bound to the whole list.
                    push_record(
                        &mut self.records,
                        &mut self.rare,
                        Record::Candidate {
                            trigger: seq,
                            step: c.step,
                        },
                    );
                    let bind_start = self.bindings.len();
                    self.bindings.push(Bound::First(n));
                    if self.spec.steps[c.step as usize].precondition.is_some()
                        && !self.precondition_holds(c.step, seq, bind_start, pre)
                    {
                        return 0;
                    }
                    self.start(c.step, seq, bind_start as u32);
                    return 1;
                }
            }
            ParamKind::FixedList => {
                let m = &mut self.matches[slot];
                if m.capacity() == 0 {
                    // It will hold `size` events if it fills: no doubling on the way.
                    m.reserve_exact(c.size.min(FIXED_LIST_RESERVE) as usize);
                }
                m.push(seq);
                let have = m.len() as u32;
                if have > c.size {
                    push_record(
                        &mut self.records,
                        &mut self.rare,
                        Record::FixedListOverflow {
                            trigger: seq,
                            step: c.step,
                            param: c.param,
                        },
                    );
                } else if have < c.size && c.sole_fixed_list {
                    // The step's only parameter is short: the first readiness check that
                    // fails (the run is live, so it is not terminated).
                    push_record(
                        &mut self.records,
                        &mut self.rare,
                        Record::Candidate {
                            trigger: seq,
                            step: c.step,
                        },
                    );
                    push_record(
                        &mut self.records,
                        &mut self.rare,
                        Record::Skipped {
                            trigger: seq,
                            step: c.step,
                            reason: SkipReason::FixedListShort {
                                param: c.param,
                                have,
                                need: c.size,
                            },
                        },
                    );
                    return 0;
                }
            }
        }
        push_record(
            &mut self.records,
            &mut self.rare,
            Record::Candidate {
                trigger: seq,
                step: c.step,
            },
        );
        self.evaluate(c.step, seq, c.single, pre) as u32
    }

    /// Readiness in the order of DESIGN §4.3; starts the execution when ready. `single`:
    /// the step's one parameter (required or optional) binds exactly the trigger.
    #[inline(never)]
    pub(super) fn evaluate(
        &mut self,
        step: StepIdx,
        trigger: Seq,
        single: bool,
        pre: &mut dyn PreconditionEvaluator,
    ) -> bool {
        let s = &self.spec.steps[step as usize];
        macro_rules! skip {
            ($reason:expr $(,)?) => {{
                push_record(
                    &mut self.records,
                    &mut self.rare,
                    Record::Skipped {
                        trigger,
                        step,
                        reason: $reason,
                    },
                );
                return false;
            }};
        }
        if self.is_terminated() {
            skip!(SkipReason::RunTerminated);
        }
        let base = self.spec.param_offsets()[step as usize] as usize;
        // Lists and optionals never block (e.g. a gated fan-in): nothing to check.
        if self.spec.can_block(step) {
            for (pi, p) in s.params.iter().enumerate() {
                match p.kind {
                    ParamKind::Required if self.slots[base + pi] == NO_SEQ => {
                        skip!(SkipReason::RequiredMissing {
                            param: pi as ParamIdx,
                        },);
                    }
                    ParamKind::FixedList if self.matches[base + pi].len() < p.size as usize => {
                        let have = self.matches[base + pi].len();
                        skip!(SkipReason::FixedListShort {
                            param: pi as ParamIdx,
                            have: have as u32,
                            need: p.size,
                        },);
                    }
                    _ => {}
                }
            }
        }
        if let Some(max) = s.max_executions_per_run
            && self.slots[self.count_slot(step)] >= max
        {
            skip!(SkipReason::BudgetExhausted { max });
        }
        // Binding (§4.4): evaluation happens at append time, so the view is the whole log
        // and "the trigger if it matches, else the latest" is the last match.
        // Bound straight into the bindings arena; a skip truncates it back.
        let bind_start = self.bindings.len();
        for (pi, p) in s.params.iter().enumerate() {
            self.bindings.push(match p.kind {
                ParamKind::Required | ParamKind::Optional => match self.slots[base + pi] {
                    NO_SEQ => Bound::Nothing,
                    last => bind_one(&mut self.rare, last),
                },
                ParamKind::List => match self.matches[base + pi].len() {
                    0 => Bound::Nothing,
                    n => Bound::First(n as u32),
                },
                ParamKind::FixedList => Bound::First(p.size),
            });
        }
        let execution = ExecutionId(self.executions.len() as u32);
        // A single binding is the trigger: its input set is new and never looked up again.
        let hashed = !single && (self.input_sets_indexed || s.overlapping_params);
        let mut key = 0;
        let mut recorded = false;
        if hashed {
            key = self.input_set_hash(step, &self.bindings[bind_start..]);
            // One probe of the input-set table: a free slot is taken at once when no
            // precondition stands between this check and the start (the common case).
            let first = match rare(&mut self.rare).input_sets.entry((step, key)) {
                std::collections::hash_map::Entry::Occupied(e) => Some(*e.get()),
                std::collections::hash_map::Entry::Vacant(v) => {
                    if s.precondition.is_none() {
                        v.insert(execution);
                        recorded = true;
                    }
                    None
                }
            };
            if let Some(first) = first
                && let Some(by) =
                    self.find_input_set(step, key, first, &self.bindings[bind_start..])
            {
                self.bindings.truncate(bind_start);
                skip!(SkipReason::InputSetAlreadyRan { by });
            }
        } else if !single
            && self.slots[self.count_slot(step)] > 0
            && let Some(by) = self.scan_input_sets(step, bind_start)
        {
            self.bindings.truncate(bind_start);
            skip!(SkipReason::InputSetAlreadyRan { by });
        }
        if s.precondition.is_some() && !self.precondition_holds(step, trigger, bind_start, pre) {
            return false;
        }
        // Start: count, input set and start record form one decision.
        if hashed && !recorded {
            rare(&mut self.rare).note_input_set(step, key, execution);
        }
        self.start(step, trigger, bind_start as u32);
        true
    }

    /// Asks the step's precondition about the bindings at `bind_start` (the end of the
    /// arena) and records the result; when false, also the skip, and the bindings are
    /// dropped.
    #[inline(never)]
    pub(super) fn precondition_holds(
        &mut self,
        step: StepIdx,
        trigger: Seq,
        bind_start: usize,
        pre: &mut dyn PreconditionEvaluator,
    ) -> bool {
        let result = pre.evaluate(&PreconditionCall {
            run: self,
            step,
            trigger,
            bindings: &self.bindings[bind_start..],
        });
        push_record(
            &mut self.records,
            &mut self.rare,
            Record::PreconditionEvaluated {
                trigger,
                step,
                result,
            },
        );
        if !result {
            self.bindings.truncate(bind_start);
            push_record(
                &mut self.records,
                &mut self.rare,
                Record::Skipped {
                    trigger,
                    step,
                    reason: SkipReason::PreconditionFalse,
                },
            );
        }
        result
    }

    /// A new running execution of `step` (first attempt), counted against the step's
    /// budget; its record is the caller's.
    #[inline(always)]
    pub(super) fn push_execution(
        &mut self,
        step: StepIdx,
        trigger: Seq,
        bind_start: u32,
    ) -> ExecutionId {
        let execution = ExecutionId(self.executions.len() as u32);
        self.executions.push(Execution {
            step,
            trigger,
            state: ExecState::Running,
            attempt: 1,
            bind_start,
        });
        let c = self.count_slot(step);
        self.slots[c] += 1;
        execution
    }

    /// Starts an execution of `step` whose bindings are at `bind_start` (its input set is
    /// already recorded where it has to be).
    #[inline(always)]
    pub(super) fn start(&mut self, step: StepIdx, trigger: Seq, bind_start: u32) {
        let execution = self.push_execution(step, trigger, bind_start);
        push_record(
            &mut self.records,
            &mut self.rare,
            Record::ExecutionStarted {
                execution,
                step,
                trigger,
            },
        );
        self.note_held(execution);
        if self.executions.len() >= self.index_sets_at as usize {
            self.index_input_sets();
        }
    }

    /// The execution of `step` that already ran the input set bound at `bind_start` (the
    /// candidate's bindings, at the end of the arena), found by scanning; only for steps
    /// whose parameters do not overlap, whose input sets are equal iff their bindings are.
    pub(super) fn scan_input_sets(&self, step: StepIdx, bind_start: usize) -> Option<ExecutionId> {
        let candidate = &self.bindings[bind_start..];
        let n = candidate.len();
        self.executions
            .iter()
            .position(|x| {
                x.step == step
                    && self.bindings[x.bind_start as usize..x.bind_start as usize + n] == *candidate
            })
            .map(|i| ExecutionId(i as u32))
    }

    /// Moves the scanned input sets into the hash table once the run has many executions.
    pub(super) fn index_input_sets(&mut self) {
        for i in 0..self.executions.len() {
            let step = self.executions[i].step;
            let st = &self.spec.steps[step as usize];
            if st.overlapping_params {
                continue; // already hashed when it started
            }
            if st.params.len() == 1
                && matches!(st.params[0].kind, ParamKind::Required | ParamKind::Optional)
            {
                continue; // a single binding: its input sets are never looked up
            }
            let execution = ExecutionId(i as u32);
            let key = self.input_set_hash(step, self.bindings(execution));
            rare(&mut self.rare).note_input_set(step, key, execution);
        }
        self.input_sets_indexed = true;
        self.index_sets_at = u32::MAX;
    }

    pub(super) fn input_set_hash(&self, step: StepIdx, bound: &[Bound]) -> u64 {
        let mut h = crate::ids::FastHasher::default();
        if self.spec.steps[step as usize].overlapping_params {
            let mut all = self.expand_sorted(step, bound);
            all.sort_unstable();
            all.hash(&mut h);
        } else {
            bound.hash(&mut h);
        }
        h.finish()
    }

    pub(super) fn expand_sorted(&self, step: StepIdx, bound: &[Bound]) -> Vec<Seq> {
        let mut all = Vec::new();
        for (pi, b) in bound.iter().enumerate() {
            all.extend_from_slice(self.bound_seqs(step, pi as ParamIdx, *b));
        }
        all.sort_unstable();
        all
    }

    pub(super) fn same_input_set(&self, step: StepIdx, a: &[Bound], b: &[Bound]) -> bool {
        if self.spec.steps[step as usize].overlapping_params {
            self.expand_sorted(step, a) == self.expand_sorted(step, b)
        } else {
            a == b
        }
    }

    /// The execution that already ran this input set, given the first execution stored
    /// under its hash (`first`); later ones with the same hash are in the collision list.
    pub(super) fn find_input_set(
        &self,
        step: StepIdx,
        key: u64,
        first: ExecutionId,
        bound: &[Bound],
    ) -> Option<ExecutionId> {
        let hit = first;
        if self.same_input_set(step, self.bindings(hit), bound) {
            return Some(hit);
        }
        self.rare
            .as_ref()
            .map_or(&[][..], |r| &r.input_set_collisions)
            .iter()
            .filter(|(s, k, _)| *s == step && *k == key)
            .map(|(_, _, x)| *x)
            .find(|x| self.same_input_set(step, self.bindings(*x), bound))
    }
}
