//! An event arriving at a run ([`Run::append`]): refused, kept as evidence, or logged and
//! dispatched. Must not complete executions: `complete` does.

use super::{
    AppendError, Appended, EventTy, LoggedEvent, MAX_LOG_EVENTS, NewEvent, NewEventType,
    PreconditionEvaluator, Refused, Run, RunStatus, id_bit, push_record, rare,
};
use crate::compiled::EventKind;
use crate::ids::EventId;
use crate::ids::FastMap;
use crate::ids::Seq;
use crate::record::Origin;
use crate::record::Record;
use crate::record::Termination;

impl Run {
    /// An event arrives from outside the workflow.
    pub fn append(
        &mut self,
        event: NewEvent,
        pre: &mut dyn PreconditionEvaluator,
    ) -> Result<Appended, AppendError> {
        let NewEvent { id, mut ty } = event;
        self.append_from(id, &mut ty, Origin::Outside, pre)
    }

    /// Appends one event; a foreign type's name is taken out of `ty` (left empty).
    pub(super) fn append_from(
        &mut self,
        id: EventId,
        ty: &mut NewEventType,
        origin: Origin,
        pre: &mut dyn PreconditionEvaluator,
    ) -> Result<Appended, AppendError> {
        self.append_event(id, ty, origin, pre)
            .map_err(|r| self.refusal(r))
    }

    /// The error for a refused append (with names: built only when one is refused).
    pub(super) fn refusal(&self, r: Refused) -> AppendError {
        match r {
            Refused::LogFull => AppendError::LogFull,
            Refused::UnknownType(t) => AppendError::UnknownType(t),
            Refused::NotStarted { seq } => AppendError::RunNotStarted {
                seq,
                name: self
                    .log
                    .get(seq as usize)
                    .map(|e| self.type_name(e.ty).to_string())
                    .unwrap_or_default(),
            },
        }
    }

    /// [`Run::append_from`] with a small error, inlined into the completion loop.
    #[inline(always)]
    pub(super) fn append_event(
        &mut self,
        id: EventId,
        ty: &mut NewEventType,
        origin: Origin,
        pre: &mut dyn PreconditionEvaluator,
    ) -> Result<Appended, Refused> {
        // One comparison for two rare cases: the id index is due, or the log is full.
        if self.log.len() >= self.index_ids_at as usize {
            if self.log.len() >= MAX_LOG_EVENTS {
                return Err(Refused::LogFull);
            }
            if !self.ids_indexed {
                self.index_ids(0);
            }
        }
        let kind = match ty {
            NewEventType::Known(t) => match self.spec.types.get(*t as usize) {
                Some(info) => info.kind,
                None => return Err(Refused::UnknownType(*t)),
            },
            NewEventType::Foreign { kind, .. } => *kind,
        };
        let seq = self.log.len() as Seq;
        // While ids are scanned, the id's filter bit (set below for every logged id).
        let (word, bit) = if self.ids_indexed {
            (0, 0)
        } else {
            id_bit(&id)
        };
        // An orphan (a control event before the run began) is refused, so its id is not
        // taken: the publisher may deliver the same event again once the run has begun.
        let orphan =
            matches!(self.status, RunStatus::NotStarted) && kind.is_control() && !kind.is_start();
        if !orphan {
            let first = if self.ids_indexed {
                // One hash for the duplicate check and the insert.
                let log = &self.log;
                rare(&mut self.rare)
                    .by_id
                    .get_or_insert(&id, seq, |s| log[s as usize].id)
            } else if self.id_bits[word] & bit != 0 {
                self.scan_log(&id)
            } else {
                None
            };
            if let Some(first_seq) = first {
                push_record(
                    &mut self.records,
                    &mut self.rare,
                    Record::DuplicateEvent { first_seq, origin },
                );
                return Ok(Appended::Duplicate { first_seq });
            }
        }
        let ty = match ty {
            NewEventType::Known(t) => EventTy::Known(*t),
            NewEventType::Foreign { name, .. } => EventTy::Foreign(self.foreign_name(name)),
        };
        self.id_bits[word] |= bit;
        self.log.push(LoggedEvent {
            id,
            ty,
            kind,
            origin,
        });

        match self.status {
            RunStatus::Terminated { .. } => {
                push_record(
                    &mut self.records,
                    &mut self.rare,
                    Record::EventAfterStop { seq, origin },
                );
                return Ok(Appended::AfterStop { seq });
            }
            RunStatus::NotStarted => {
                if kind.is_control() && kind.is_start() {
                    self.status = RunStatus::Live;
                    self.start_seq = seq;
                    push_record(
                        &mut self.records,
                        &mut self.rare,
                        Record::RunStarted { seq },
                    );
                } else if kind.is_control() {
                    push_record(
                        &mut self.records,
                        &mut self.rare,
                        Record::OrphanEvent { seq },
                    );
                    return Err(Refused::NotStarted { seq });
                }
            }
            RunStatus::Live => {}
        }
        push_record(
            &mut self.records,
            &mut self.rare,
            Record::EventAppended { seq, origin },
        );

        if !kind.is_control() {
            return Ok(Appended::DisplayOnly { seq });
        }
        if kind.is_terminal() {
            self.terminate(seq, kind);
            return Ok(Appended::Terminated { seq });
        }
        let EventTy::Known(t) = ty else {
            return Ok(Appended::Dispatched { seq, started: 0 });
        };
        let started = self.dispatch(seq, t, pre);
        Ok(Appended::Dispatched { seq, started })
    }

    /// The index of a foreign type's name among the run's (taken out of `name` if new).
    /// Out of line: rare, and kept out of the completion loop the append is inlined into.
    #[cold]
    #[inline(never)]
    pub(super) fn foreign_name(&mut self, name: &mut String) -> u32 {
        let names = &mut rare(&mut self.rare).foreign_names;
        let i = match names.iter().position(|n| **n == **name) {
            Some(i) => i,
            None => {
                names.push(std::mem::take(name).into_boxed_str());
                names.len() - 1
            }
        };
        i as u32
    }

    pub(super) fn terminate(&mut self, seq: Seq, kind: EventKind) {
        self.status = RunStatus::Terminated { by: seq };
        let by = if kind.is_exception() {
            Termination::Exception
        } else {
            Termination::Stop
        };
        push_record(
            &mut self.records,
            &mut self.rare,
            Record::RunTerminated { seq, by },
        );
        // Step bookkeeping ends with the run; the log, the executions and the match lists
        // (which let bindings be expanded for reports) are kept as evidence.
        if let Some(r) = &mut self.rare {
            r.input_sets = FastMap::default();
            r.input_set_collisions = Vec::new();
        }
        if let Some(w) = &self.waits {
            let (timers, children) = (!w.timers.is_empty(), !w.children.is_empty());
            if timers {
                self.drop_pending_timers();
            }
            if children {
                self.abandon_children();
            }
        }
        let counts = self.count_base as usize;
        self.slots[counts..].fill(0);
    }
}
