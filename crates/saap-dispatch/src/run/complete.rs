//! An execution ending ([`Run::complete`] and its fast forms, [`Run::retry`]): its outputs
//! logged with derived ids and dispatched, or its error recorded. Must not take outside
//! events: `append` does.

use super::{
    Bound, CompleteError, END_EVENTS, END_RECORDS, EventTy, ExecState, Execution, LoggedEvent,
    MAX_ERROR_MESSAGE, MAX_LOG_EVENTS, MAX_RESERVED_RECORDS, NewEvent, NewEventType, Outcome,
    PreconditionEvaluator, Refused, Run, RunStatus, SMALL_SEQS, fill_seq_table, id_bit,
    push_record, push_records, rare, regrow,
};
use crate::compiled::ChainLink;
use crate::compiled::TypeId;
use crate::ids::EventId;
use crate::ids::ExecutionId;
use crate::ids::Seq;
use crate::ids::StepIdx;
use crate::ids::derived_event_id;
use crate::record::Origin;
use crate::record::Packed;
use crate::record::Record;
use crate::spec::ParamKind;

impl Run {
    /// An execution finished. Its outputs are appended in return order, each dispatched as
    /// it is appended, together with the completion record (DESIGN §4.6, §4.8).
    pub fn complete(
        &mut self,
        execution: ExecutionId,
        attempt: u32,
        outcome: Outcome,
        pre: &mut dyn PreconditionEvaluator,
    ) -> Result<(), CompleteError> {
        let x = self.live_execution(execution, attempt)?;
        let step = x.step;
        match outcome {
            Outcome::Returned(mut outputs) => {
                if outputs.len() > 1 {
                    self.reserve_for(&outputs);
                }
                self.returned(execution, attempt, &mut outputs, pre)?;
            }
            Outcome::Failed(mut message) => {
                if message.len() > MAX_ERROR_MESSAGE {
                    let mut cut = MAX_ERROR_MESSAGE;
                    while !message.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    message.truncate(cut);
                }
                let stop_on_error = self.spec.steps[step as usize].stop_on_error;
                let x = &mut self.executions[execution.0 as usize];
                x.state = ExecState::Failed;
                rare(&mut self.rare)
                    .errors
                    .insert(execution, message.into_boxed_str());
                push_record(
                    &mut self.records,
                    &mut self.rare,
                    Record::ExecutionFailed {
                        execution,
                        attempt,
                        stop_on_error,
                    },
                );
                if stop_on_error {
                    let id = derived_event_id(self.run_key, execution, u32::MAX);
                    let ty = self.spec.exception_type();
                    let mut ty = NewEventType::Known(ty);
                    self.append_from(id, &mut ty, Origin::Execution(execution), pre)?;
                }
            }
        }
        Ok(())
    }

    /// At a run's first completion (it runs, it does not just wait), grows its tables from
    /// the first dispatch's size (see [`Run::new`]) to a whole run's at once: one
    /// new block per table ([`regrow`]) instead of a doubling at a time. A recycled run (`reset`
    /// keeps the capacity) or a grown one skips it after one comparison.
    #[inline(always)]
    pub(super) fn size_for_a_whole_run(&mut self) {
        if self.records.capacity() < 4 * self.spec.steps.len() + 3 {
            self.grow_to_a_whole_run();
        }
    }

    /// The growth of [`Run::size_for_a_whole_run`], once per run: out of line.
    #[cold]
    #[inline(never)]
    pub(super) fn grow_to_a_whole_run(&mut self) {
        let steps = self.spec.steps.len();
        regrow(&mut self.records, 4 * steps + 3);
        regrow(&mut self.log, steps + 2);
        regrow(&mut self.executions, steps);
        regrow(&mut self.bindings, self.count_base as usize);
    }

    /// [`Run::complete`] with `Outcome::Returned`, taking the outputs from the caller's
    /// vector: it is left empty with its allocation, for the caller's next completion (no
    /// vector per completion). Same rules, records and errors; on an error the vector is
    /// left as given when the execution was not live, emptied otherwise.
    pub fn complete_returned(
        &mut self,
        execution: ExecutionId,
        attempt: u32,
        outputs: &mut Vec<NewEvent>,
        pre: &mut dyn PreconditionEvaluator,
    ) -> Result<(), CompleteError> {
        self.live_execution(execution, attempt)?;
        if outputs.len() > 1 {
            self.reserve_for(outputs);
        }
        self.returned(execution, attempt, outputs, pre)
    }

    /// [`Run::complete_returned`] for what most steps return: one event of a known type,
    /// taken by value (no vector). When that event is a chain link the run takes on its
    /// direct path, the execution is completed, the event appended and dispatched, with the
    /// very records of the general path, and its log position is returned (where the
    /// caller's copy of the log puts its payload). `Ok(None)`, having changed nothing, when
    /// it is not (the type is not a chain link, the id may be a duplicate, the run is not
    /// live...): the caller then completes through [`Run::complete_returned`]. Inlined
    /// into the engine's completion (its one caller per step): no frame, and its result
    /// is not written to memory and read back.
    #[inline]
    pub fn complete_linked(
        &mut self,
        execution: ExecutionId,
        attempt: u32,
        id: EventId,
        ty: TypeId,
    ) -> Result<Option<Seq>, CompleteError> {
        self.live_execution(execution, attempt)?;
        let Some(link) = self.spec.chain_link(ty) else {
            return Ok(None);
        };
        self.size_for_a_whole_run();
        let seq = self.log.len() as Seq;
        Ok(self
            .chain_link(execution, attempt, id, ty, link)
            .then_some(seq))
    }

    /// A live execution returned `outputs` (appended in return order, each dispatched).
    pub(super) fn returned(
        &mut self,
        execution: ExecutionId,
        attempt: u32,
        outputs: &mut Vec<NewEvent>,
        pre: &mut dyn PreconditionEvaluator,
    ) -> Result<(), CompleteError> {
        if let [ev] = outputs.as_slice()
            && let NewEventType::Known(t) = ev.ty
            && let Some(link) = self.spec.chain_link(t)
        {
            self.size_for_a_whole_run();
            if self.chain_link(execution, attempt, ev.id, t, link) {
                outputs.clear();
                return Ok(());
            }
        }
        self.returned_in_general(execution, attempt, outputs, pre)
    }

    /// [`Run::returned`] for any outputs: each appended and dispatched in turn. Out of line,
    /// so that the chain link's path inlined beside it does not change how this loop is
    /// compiled (a fan-out's arrivals: measured +14 instructions each while inlined).
    #[inline(never)]
    pub(super) fn returned_in_general(
        &mut self,
        execution: ExecutionId,
        attempt: u32,
        outputs: &mut Vec<NewEvent>,
        pre: &mut dyn PreconditionEvaluator,
    ) -> Result<(), CompleteError> {
        self.size_for_a_whole_run();
        self.executions[execution.0 as usize].state = ExecState::Completed;
        push_record(
            &mut self.records,
            &mut self.rare,
            Record::ExecutionCompleted {
                execution,
                attempt,
                outputs: outputs.len() as u32,
            },
        );
        // Appended in place (no move of each event); the vector keeps its allocation.
        for ev in outputs.iter_mut() {
            match self.append_event(ev.id, &mut ev.ty, Origin::Execution(execution), pre) {
                Ok(_) => {}
                // Outputs of a live execution always belong to a started run.
                Err(Refused::NotStarted { .. }) => {}
                Err(r) => {
                    outputs.clear();
                    return Err(self.refusal(r).into());
                }
            }
        }
        outputs.clear();
        Ok(())
    }

    /// A live execution returned one event that is a [`ChainLink`]: completed, appended and
    /// dispatched to the step it starts, with the very records of the general path
    /// (completion, append, candidate, start), decided from the compiled entry without the
    /// append's checks and the dispatch loops. Returns false, having changed nothing, where
    /// the general path has more to decide: the run is not live, the id index is due or
    /// the log full, or the id may be a duplicate.
    #[inline(always)]
    pub(super) fn chain_link(
        &mut self,
        execution: ExecutionId,
        attempt: u32,
        id: EventId,
        t: TypeId,
        link: ChainLink,
    ) -> bool {
        let seq = self.log.len() as Seq;
        if !matches!(self.status, RunStatus::Live) || seq >= self.index_ids_at {
            return false;
        }
        if self.ids_indexed {
            // A duplicate is not inserted: the general path finds it again.
            let log = &self.log;
            if rare(&mut self.rare)
                .by_id
                .get_or_insert(&id, seq, |s| log[s as usize].id)
                .is_some()
            {
                return false;
            }
        } else {
            let (word, bit) = id_bit(&id);
            if self.id_bits[word] & bit != 0 && self.scan_log(&id).is_some() {
                return false;
            }
            self.id_bits[word] |= bit;
        }
        let origin = Origin::Execution(execution);
        let step = link.step;
        let next = ExecutionId(self.executions.len() as u32);
        self.executions[execution.0 as usize].state = ExecState::Completed;
        self.log.push(LoggedEvent {
            id,
            ty: EventTy::Known(t),
            kind: link.kind,
            origin,
        });
        if let Some(packed) = Packed::chain_link(execution, attempt, seq, step, next) {
            // One reservation for the four records.
            self.records.extend_from_slice(&packed);
        } else {
            push_records(
                &mut self.records,
                &mut self.rare,
                [
                    Record::ExecutionCompleted {
                        execution,
                        attempt,
                        outputs: 1,
                    },
                    Record::EventAppended { seq, origin },
                    Record::Candidate { trigger: seq, step },
                    Record::ExecutionStarted {
                        execution: next,
                        step,
                        trigger: seq,
                    },
                ],
            );
        }
        self.slots[link.slot as usize] = seq;
        let bind_start = self.bindings.len() as u32;
        if seq as usize >= SMALL_SEQS {
            fill_seq_table(&mut self.rare, seq);
        }
        self.bindings.push(Bound::One(seq));
        self.push_execution(step, seq, bind_start);
        self.note_held(next);
        if self.executions.len() >= self.index_sets_at as usize {
            self.index_input_sets();
        }
        true
    }

    /// Room for `n` more events arriving together (a fan-out's outputs) and for what they
    /// usually lead to: the log, the records, the executions and bindings, the match lists
    /// of a fan-in and the id index (built now if they would cross the threshold; decisions
    /// do not depend on when it is built) each grow once to their size instead of doubling
    /// on the way, copying the whole table each time (at N = 10,000 those copies and the
    /// cache misses they cause made a fan-out's cost per item grow with N).
    #[cold]
    #[inline(never)]
    pub(super) fn reserve_for(&mut self, outputs: &[NewEvent]) {
        let n = outputs.len().min(MAX_LOG_EVENTS);
        // Outputs that each start an execution of the step they link to (a fan-out to
        // workers), and the records the arrivals usually make.
        let mut starts = 0usize;
        let mut records = END_RECORDS;
        // The step the links start, while all start the same one (the usual fan-out).
        let mut worker: Option<StepIdx> = None;
        let mut one_worker = true;
        for e in &outputs[..n] {
            let t = match e.ty {
                NewEventType::Known(t) => t,
                NewEventType::Foreign { .. } => {
                    records = records.saturating_add(1);
                    continue;
                }
            };
            records = records.saturating_add(self.spec.arrival_records(t) as usize);
            if let Some(link) = self.spec.chain_link(t) {
                starts += 1;
                match worker {
                    None => worker = Some(link.step),
                    Some(w) if w != link.step => one_worker = false,
                    Some(_) => {}
                }
            }
        }
        let returned = if starts > 1 { starts } else { 0 };
        // What each worker usually returns: one event of the step's one declared output
        // type. Its arrivals make records (the completion's and the arrival's), fill the
        // match lists of the lists and fixed lists that take it (a fan-in) and start the
        // steps those belong to once (one execution each, with their bindings).
        let mut fan_in_executions = 0;
        let mut fan_in_bindings = 0;
        if returned > 0
            && one_worker
            && let Some(w) = worker
            && let [o] = self.spec.steps[w as usize].outputs[..]
        {
            let per_worker = 1 + self.spec.arrival_records(o) as usize;
            records = records.saturating_add(returned.saturating_mul(per_worker));
            let mut previous = None;
            for c in self.spec.consumer_slots(o) {
                if previous != Some(c.step) {
                    previous = Some(c.step);
                    fan_in_executions += 1;
                    fan_in_bindings += self.spec.steps[c.step as usize].params.len();
                }
                let want = match c.kind {
                    ParamKind::List => returned,
                    ParamKind::FixedList => returned.min(c.size as usize),
                    ParamKind::Required | ParamKind::Optional => continue,
                };
                let m = &mut self.matches[c.slot as usize];
                let want = (m.len() + want).min(MAX_LOG_EVENTS);
                if m.capacity() < want {
                    m.reserve_exact(want - m.len());
                }
            }
        }
        // And room for the event that usually follows (a fan-in's output): the log does not
        // double, copying all these events, for the one after them.
        self.log
            .reserve((n + returned).min(MAX_LOG_EVENTS) + END_EVENTS);
        // A few records for the completion and end that often follow (a fan-in's).
        self.records.reserve(records.min(MAX_RESERVED_RECORDS));
        if returned > 0 {
            self.executions.reserve(returned + fan_in_executions);
            self.bindings.reserve(returned + fan_in_bindings);
        }
        let ids = (n + returned).min(MAX_LOG_EVENTS);
        if !self.ids_indexed && self.log.len() + n > self.index_ids_at as usize {
            self.index_ids(ids);
        } else if self.ids_indexed {
            let log = &self.log;
            rare(&mut self.rare)
                .by_id
                .reserve(ids, |s| log[s as usize].id);
        }
    }

    /// Runs a started-but-unfinished execution again (after a crash or a lost worker).
    /// Returns the new attempt number; completions of older attempts are then refused.
    pub fn retry(&mut self, execution: ExecutionId) -> Result<u32, CompleteError> {
        let x = self
            .executions
            .get_mut(execution.0 as usize)
            .ok_or(CompleteError::UnknownExecution(execution))?;
        if x.state != ExecState::Running {
            return Err(CompleteError::AlreadyFinished(execution));
        }
        if execution.0 >= self.held_from {
            return Err(CompleteError::Held(execution));
        }
        x.attempt += 1;
        let attempt = x.attempt;
        push_record(
            &mut self.records,
            &mut self.rare,
            Record::ExecutionRetried { execution, attempt },
        );
        Ok(attempt)
    }

    pub(super) fn live_execution(
        &self,
        execution: ExecutionId,
        attempt: u32,
    ) -> Result<&Execution, CompleteError> {
        let x = self
            .executions
            .get(execution.0 as usize)
            .ok_or(CompleteError::UnknownExecution(execution))?;
        if x.state != ExecState::Running {
            return Err(CompleteError::AlreadyFinished(execution));
        }
        if execution.0 >= self.held_from {
            return Err(CompleteError::Held(execution));
        }
        if x.attempt != attempt {
            return Err(CompleteError::StaleAttempt {
                execution,
                given: attempt,
                current: x.attempt,
            });
        }
        Ok(x)
    }
}
