//! Applying one input to a run's core — an outside event, a completion, a retry — under the
//! run's lock: the core decides (DESIGN §2), this hands the journal entry to the backend in
//! journal order and reports what to start ([`Applied`], [`Completed`]). The general path is
//! `apply_locked`; `append_unjournaled` and `complete_in_place`/`complete_unjournaled` are
//! the same decisions without a journal, kept apart for speed. Must not run a step body or
//! wait for the store: callers do that once the lock is let go.

use super::bind::{invocation_into, invocation_linked};
use super::error::EngineError;
use super::incoming::{Incoming, stored};
use super::invocation::{Invocation, SPARE_MAX, Started, invocation, reusable_inputs};
use super::payloads::{
    add_payloads, fill_one_payload, fill_payloads, give_back_pending, put_payload, take_pending,
};
use super::precondition::{Pre, PreCache};
use super::shared::{Shared, shares_task};
use super::slot::{
    RunSlot, RunState, SPARE_SLOT_MAX_EVENTS, Scratch, keep_timer_payloads, scratch,
    take_due_payloads,
};
use crate::backend::{
    Pending, PersistBatch, RunMeta, StoreError, StoredChild, StoredGrant, StoredInput, StoredTimer,
};
use crate::context::ContextError;
use crate::event::Payload;
use crate::params::{BoundEvent, OutEvent};
use saap_dispatch::run::input::{Handled, InputError, RunInput};
use saap_dispatch::run::progress::Progress;

use saap_dispatch::run::budget::BudgetGrant;
use saap_dispatch::run::children::ChildError;
use saap_dispatch::run::timers::TimerRequest;
use saap_dispatch::run::{AppendError, CompleteError};
use saap_dispatch::{Appended, EventId, EventKind, ExecutionId, NewEvent, NewEventType, Outcome};
use std::sync::Arc;

pub(super) enum Input {
    Append(Incoming),
    /// A run's start event with the budget the run starts with (granted first, in the
    /// same journal entry).
    Start {
        ev: Incoming,
        budget: BudgetGrant,
    },
    /// More budget for the run (a resume).
    Budget(BudgetGrant),
    Complete {
        execution: ExecutionId,
        attempt: u32,
        /// What the step returned (turned into events with derived ids under the lock).
        outcome: Result<Vec<OutEvent>, String>,
    },
    Retry(ExecutionId),
    /// The engine's clock (nanoseconds since the Unix epoch): the run's due timers fire.
    Clock(u64),
    /// Child `child`'s run ended: `ev` reports it (see `delegation`).
    ChildEnded {
        child: u32,
        ev: Incoming,
    },
}

/// How [`Shared::apply_with`] binds the executions an input started.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Bind {
    /// Not now: the engine's local driver binds them when their turn comes.
    Later,
    /// Their events, into each invocation's `inputs`.
    Events,
    /// The only one started, by extracting its typed inputs into `prepared` (its body
    /// starts on this thread: [`Engine::run`] on a task that drives all of the run's
    /// executions); when there are several, as `Events`.
    Extract,
}

/// The core's input for an outside event; its payload goes to `pending` (offered with it).
fn appended_input(ev: Incoming, pending: &mut Vec<(EventId, Payload)>) -> RunInput {
    // Exact: the scratch lives as long as the run.
    pending.reserve_exact(1);
    pending.push((ev.id, ev.payload));
    RunInput::Append(NewEvent {
        id: ev.id,
        ty: ev.ty,
    })
}

/// What [`Shared::apply_locked`] did: the journal entry's durability, the append's result,
/// whether the run ended (and its end waits for the entry to be durable, see
/// [`Shared::seal`]), and the execution a retry restarted.
pub(super) struct Entry {
    pub(super) durable: Pending<()>,
    pub(super) appended: Option<Appended>,
    pub(super) ended: bool,
    pub(super) retried: Option<(ExecutionId, u32)>,
}

/// What [`Shared::complete_in_place`] did. A few bytes, returned in a register: most
/// completions are durable at once, and a journal entry's durability goes to
/// [`CompletionBuffers::durable`] instead of being moved through every frame.
#[derive(Clone, Copy)]
pub(super) struct Completed {
    /// The entry's durability is in [`CompletionBuffers::durable`] (else it was durable at once).
    pub(super) waits: bool,
    /// This completion ended the run, and its end is durable once the entry is (an entry
    /// durable at once marked the end durable already: then `false`).
    pub(super) ended: bool,
    pub(super) next: StartedNext,
}

/// What a completion hands its caller beside [`Completed`], in buffers the caller keeps
/// from one completion to the next.
#[derive(Default)]
pub(super) struct CompletionBuffers {
    /// Executions a completion started beside the first (see [`StartedNext::Several`]).
    pub(super) others: Vec<ExecutionId>,
    /// The durability of a completion's entry, when not durable at once (see
    /// [`Completed::waits`]); taken by the caller.
    pub(super) durable: Option<Pending<()>>,
}

impl CompletionBuffers {
    /// The durability of the entry of a completion that `waits` (taken).
    pub(super) fn durable(&mut self) -> Pending<()> {
        self.durable.take().unwrap_or(Pending::Ready(Ok(())))
    }
}

/// The executions a completion started, for the task that ran the completed one.
#[derive(Clone, Copy)]
pub(super) enum StartedNext {
    /// None.
    None,
    /// One: the invocation now holds it.
    One,
    /// Several: the invocation holds the first, the others were added to the caller's list.
    Several,
    /// None; the invocation now holds the caller's queued execution (bound under the
    /// completion's lock: a fan-out's executions take the run's lock once each, not twice).
    TookQueued,
}

pub(super) struct Applied {
    pub(super) durable: Pending<()>,
    pub(super) started: Started,
    pub(super) appended: Option<Appended>,
    /// This input ended the run and its durability makes the end durable (`false` when
    /// the entry was durable at once: the end is marked durable already).
    pub(super) ended: bool,
}

impl Shared {
    /// The preconditions of a transition of a run whose payloads are `payloads` (in the
    /// order of its log), with `pending` the payloads of the events the transition adds;
    /// no results kept, none replayed.
    #[inline(always)]
    pub(super) fn pre<'a>(
        &'a self,
        payloads: &'a [Payload],
        pending: &'a [(EventId, Payload)],
        cache: &'a mut Option<Box<PreCache>>,
    ) -> Pre<'a> {
        Pre {
            steps: &self.workflow.inner.steps,
            names: &self.type_names,
            payloads,
            pending,
            results: None,
            replay: None,
            exhausted: false,
            cache,
        }
    }
}

impl Shared {
    /// Applies one input under the run's lock and hands the journal entry to the backend.
    pub(super) fn apply(&self, slot: &RunSlot, input: Input) -> Result<Applied, EngineError> {
        self.apply_with(slot, input, Vec::new(), Bind::Events)
    }

    /// [`Shared::apply`] for an input whose executions [`Shared::launch`] hands out: for the
    /// engine's local driver they are bound when their turn comes, not now (a run waiting
    /// in its queue holds no input vectors).
    pub(super) fn apply_to_launch(
        &self,
        slot: &RunSlot,
        input: Input,
    ) -> Result<Applied, EngineError> {
        self.apply_with(slot, input, Vec::new(), self.launch_bind())
    }

    /// How [`Shared::launch`] wants the executions an input started bound.
    pub(super) fn launch_bind(&self) -> Bind {
        if shares_task(self) {
            Bind::Later
        } else {
            Bind::Events
        }
    }

    /// [`Shared::apply`] with the emptied input buffers of the execution that completed
    /// (kept for the run's next execution).
    pub(super) fn apply_with(
        &self,
        slot: &RunSlot,
        input: Input,
        spare: Vec<Vec<BoundEvent>>,
        bind: Bind,
    ) -> Result<Applied, EngineError> {
        let mut guard = slot.lock();
        self.apply_in(slot, &mut guard, input, spare, bind)
    }

    /// [`Shared::apply_with`] under the run's lock, held by the caller (who decided the
    /// input under it: a resume's grant).
    #[inline(always)]
    pub(super) fn apply_in(
        &self,
        slot: &RunSlot,
        st: &mut RunState,
        input: Input,
        spare: Vec<Vec<BoundEvent>>,
        bind: Bind,
    ) -> Result<Applied, EngineError> {
        if reusable_inputs(&spare) && spare.capacity() > 0 {
            let sc = scratch(&mut st.scratch);
            if sc.spare_inputs.capacity() == 0 {
                sc.spare_inputs = spare;
            }
        }
        let entry = match input {
            Input::Append(ev) if !self.journal && ev.by.is_none() && st.failure.is_none() => {
                self.append_unjournaled(slot, st, ev)?
            }
            input => self.apply_locked(slot, st, input)?,
        };
        let mut started = match st.run.next_started() {
            None => Started::None,
            Some(x) => {
                if bind != Bind::Later {
                    // The run is about to execute (perhaps for the first time).
                    self.adopt_spare(st);
                }
                match st.run.next_started() {
                    // The only execution the input started (most inputs start one): made
                    // as is, no `Started::push`.
                    None => Started::One(self.started_invocation(st, x, bind, true)),
                    Some(y) => {
                        let mut all = vec![
                            self.started_invocation(st, x, bind, false),
                            self.started_invocation(st, y, bind, false),
                        ];
                        while let Some(z) = st.run.next_started() {
                            all.push(self.started_invocation(st, z, bind, false));
                        }
                        Started::Many(all)
                    }
                }
            }
        };
        if let Some((x, attempt)) = entry.retried {
            started.push(invocation(st, &self.type_names, x, attempt));
        }
        Ok(Applied {
            durable: entry.durable,
            started,
            appended: entry.appended,
            ended: entry.ended,
        })
    }

    /// The invocation of execution `x`, which an input just started, bound as `bind` says;
    /// `only`: the only execution the input started.
    #[inline]
    pub(super) fn started_invocation(
        &self,
        st: &mut RunState,
        x: ExecutionId,
        bind: Bind,
        only: bool,
    ) -> Invocation {
        match bind {
            Bind::Later => Invocation {
                execution: x,
                ..Invocation::empty()
            },
            // The only execution the input started: its body starts on this thread, its
            // inputs extracted now, under this lock.
            Bind::Extract if only => {
                let mut inv = Invocation {
                    extract: true,
                    ..Invocation::empty()
                };
                invocation_into(st, self, x, 1, &mut inv);
                inv
            }
            Bind::Events | Bind::Extract => invocation(st, &self.type_names, x, 1),
        }
    }

    /// [`Shared::apply_locked`] for what most outside events are (a run's start event, an
    /// event sent to a run) in an engine without a journal: nothing to encode, no display
    /// event's execution to note, no precondition results to keep. The event's payload is
    /// offered to the core from the stack (no pending vector taken from the run's scratch
    /// and put back) and moved to the payload table once logged.
    pub(super) fn append_unjournaled(
        &self,
        slot: &RunSlot,
        st: &mut RunState,
        ev: Incoming,
    ) -> Result<Entry, EngineError> {
        let Incoming {
            id, ty, payload, ..
        } = ev;
        let offered = [(id, payload)];
        let mut pre = self.pre(&st.payloads, &offered, &mut st.pre_cache);
        let appended = st.run.append(NewEvent { id, ty }, &mut pre);
        drop(pre);
        let [(_, payload)] = offered;
        let appended = match appended {
            Ok(a) => a,
            Err(saap_dispatch::run::AppendError::RunNotStarted { name, .. }) => {
                return Err(EngineError::NotAStartEvent { name });
            }
            Err(e) => {
                return Err(EngineError::Core {
                    run_id: slot.run_id().to_string(),
                    detail: e.to_string(),
                });
            }
        };
        let log_len = st.run.log().len();
        if log_len == st.payloads.len() + 1
            && log_len <= st.payloads.capacity()
            && st.run.log()[log_len - 1].id == id
        {
            // Logged, and the table has room (a recycled slot's has): moved over.
            st.payloads.push(payload);
        } else if log_len > st.payloads.len() {
            // Logged, and the table needs room: sized as for any other input.
            fill_one_payload(st, id, payload);
        }
        // Else a duplicate, not logged: its payload is dropped.
        let (durable, ended) = if st.run.is_terminated() {
            self.seal(slot, st, None, &[])
        } else {
            // Nothing to hand to the store: it only hears of a run's end.
            st.records_sent = st.run.records().len();
            (Pending::Ready(Ok(())), false)
        };
        Ok(Entry {
            durable,
            appended: Some(appended),
            ended,
            retried: None,
        })
    }

    /// Completes the execution `inv` ran with `outcome` and, when that started executions,
    /// turns `inv` into the first of them in place (its input and output buffers reused: an
    /// inline chain moves no invocation and allocates none); the others go to `others`.
    /// When it started none, `inv` becomes `queued` (an execution of this run that the
    /// caller runs next), if given.
    #[inline]
    pub(super) fn complete_in_place(
        &self,
        slot: &RunSlot,
        inv: &mut Invocation,
        outcome: Result<(), String>,
        buffers: &mut CompletionBuffers,
        queued: Option<ExecutionId>,
    ) -> Result<Completed, EngineError> {
        let mut guard = slot.lock();
        let st = &mut *guard;
        let (waits, ended) = match outcome {
            // A workflow that delegates completes on the general path, which starts children;
            // so does an execution that reported what its model calls used.
            Ok(())
                if !self.journal
                    && !self.may_delegate
                    && st.failure.is_none()
                    && st.usage.is_none() =>
            {
                match self.complete_unjournaled(slot, st, inv, &mut buffers.durable)? {
                    Some(done) => done,
                    // A chain link: `inv` holds the execution it started, the run goes on.
                    None => {
                        return Ok(Completed {
                            waits: false,
                            ended: false,
                            next: StartedNext::One,
                        });
                    }
                }
            }
            outcome => self.complete_in_general(slot, st, inv, outcome, &mut buffers.durable)?,
        };
        let next = match st.run.next_started() {
            None => match queued {
                Some(x) => {
                    invocation_into(st, self, x, 1, inv);
                    StartedNext::TookQueued
                }
                None => StartedNext::None,
            },
            Some(first) => {
                invocation_into(st, self, first, 1, inv);
                // Bound when their turn comes (bindings never change once made).
                let others = &mut buffers.others;
                let before = others.len();
                others.extend(std::iter::from_fn(|| st.run.next_started()));
                if others.len() == before {
                    StartedNext::One
                } else {
                    StartedNext::Several
                }
            }
        };
        Ok(Completed { waits, ended, next })
    }

    /// A completion through the general path ([`Shared::apply_locked`]): it takes the
    /// outputs (their vector goes to the run's spare buffers); a failed step's are dropped
    /// (it may have made some). Whether its durability went to `durable`, and whether the
    /// run ended (see [`Completed`]). Out of line: the journal's path, or a rare case of the
    /// in-memory one (a timer, a failure), kept out of the fast lane it is called from.
    #[inline(never)]
    pub(super) fn complete_in_general(
        &self,
        slot: &RunSlot,
        st: &mut RunState,
        inv: &mut Invocation,
        outcome: Result<(), String>,
        durable: &mut Option<Pending<()>>,
    ) -> Result<(bool, bool), EngineError> {
        let outcome = match outcome {
            Ok(()) => Ok(std::mem::take(&mut inv.outs)),
            Err(e) => {
                inv.outs.clear();
                Err(e)
            }
        };
        let entry = self.apply_locked(
            slot,
            st,
            Input::Complete {
                execution: inv.execution,
                attempt: inv.attempt,
                outcome,
            },
        )?;
        Ok((keep_unless_durable(entry.durable, durable), entry.ended))
    }

    /// [`Shared::apply_locked`] for what most completions are: a step that returned (its
    /// outputs in `inv.outs`, taken: the vector stays, empty, for the next execution), in an
    /// engine without a journal (nothing to encode, no precondition results to keep).
    /// Whether its durability went to `durable` (not durable at once), and whether the run
    /// ended (see [`Completed`]); `None` when the step returned a chain link and `inv`
    /// (with `inv.extract`) now holds the one execution the link started (the run goes on:
    /// nothing to wait for).
    pub(super) fn complete_unjournaled(
        &self,
        slot: &RunSlot,
        st: &mut RunState,
        inv: &mut Invocation,
        durable: &mut Option<Pending<()>>,
    ) -> Result<Option<(bool, bool)>, EngineError> {
        let (execution, attempt, step) = (inv.execution, inv.attempt, inv.step);
        let outs = &mut inv.outs;
        if let [o] = &outs[..]
            && o.due_ns.is_none()
            && let Some(t) = self.out_type_declared_first(step, &o.name)
        {
            // Most steps return one event of the type they declare, which starts the next
            // step: the core takes it by value and its payload goes straight to the log
            // position the core gives it (no output vectors, no precondition evaluator).
            let id = scratch(&mut st.scratch)
                .output_ids(slot.run_key)
                .id(execution, 0);
            match st.run.complete_linked(execution, attempt, id, t) {
                Ok(Some(seq)) => {
                    if let Some(o) = outs.pop() {
                        put_payload(st, seq, id, o.payload);
                    }
                    // The execution the link started is bound here, from what the core
                    // just decided: its step, and its one parameter bound to `seq` (no
                    // look-up of the execution, its bindings or the started list).
                    if inv.extract
                        && !st.run.is_terminated()
                        && let Some((next, step)) = st.run.take_sole_started()
                    {
                        // Nothing to hand to the store: it only hears of a run's end.
                        st.records_sent = st.run.records().len();
                        invocation_linked(st, self, next, step, seq, inv);
                        return Ok(None);
                    }
                    return Ok(Some(self.after_completion(slot, st, durable)));
                }
                // Not a link the core takes directly: the general path below.
                Ok(None) => {}
                Err(e) => {
                    outs.clear();
                    return self.completion_refused(slot, e).map(Some);
                }
            }
        }
        if sets_timers(outs) {
            // Timers are set on the general path (rare: no fast lane for them).
            return self
                .complete_in_general(slot, st, inv, Ok(()), durable)
                .map(Some);
        }
        if outs.len() > SPARE_SLOT_MAX_EVENTS {
            self.adopt_large(st);
        }
        // The run's tables, buffers and precondition cache, each borrowed on its own.
        let RunState {
            run,
            payloads,
            scratch: buffers,
            pre_cache,
            ..
        } = st;
        let step = Some(step);
        // The run key's share of each id is made once per run (a fan-out's thousands of
        // outputs: two `mix64` each instead of three).
        let ids = scratch(buffers).output_ids(slot.run_key);
        let Scratch { news, pending, .. } = scratch(buffers);
        news.clear();
        pending.clear();
        news.reserve(outs.len());
        pending.reserve_exact(outs.len());
        if outs.len() == 1
            && let Some(o) = outs.pop()
        {
            // Most steps return one event: no drain.
            let id = ids.id(execution, 0);
            news.push(NewEvent {
                id,
                ty: self.out_type(step, &o.name),
            });
            pending.push((id, o.payload));
        } else {
            // A fan-out returns many events of one Rust type: its name (a `&'static str`)
            // is looked up once.
            let mut last: Option<(&'static str, saap_dispatch::TypeId)> = None;
            for (i, o) in outs.drain(..).enumerate() {
                let id = ids.id(execution, i as u32);
                let ty = match (&o.name, last) {
                    (std::borrow::Cow::Borrowed(n), Some((prev, t))) if std::ptr::eq(*n, prev) => {
                        NewEventType::Known(t)
                    }
                    (name, _) => {
                        let ty = self.out_type(step, name);
                        last = match (name, &ty) {
                            (std::borrow::Cow::Borrowed(n), NewEventType::Known(t)) => {
                                Some((*n, *t))
                            }
                            _ => None,
                        };
                        ty
                    }
                };
                news.push(NewEvent { id, ty });
                pending.push((id, o.payload));
            }
        }
        if outs.capacity() > SPARE_MAX {
            // A large fan-out's: not kept for the next execution.
            *outs = Vec::new();
        }
        let mut pre = self.pre(payloads, pending, pre_cache);
        let completed = run.complete_returned(execution, attempt, news, &mut pre);
        drop(pre);
        if news.capacity() > SPARE_MAX {
            *news = Vec::new();
        } else {
            news.clear();
        }
        if let Err(e) = completed {
            pending.clear();
            return self.completion_refused(slot, e).map(Some);
        }
        add_payloads(run, payloads, true, pending);
        pending.clear();
        Ok(Some(self.after_completion(slot, st, durable)))
    }

    /// What [`Shared::complete_unjournaled`] hands back once the core took the completion:
    /// whether the entry's durability went to `durable`, and whether the run ended (both
    /// `false` when the run goes on).
    #[inline]
    pub(super) fn after_completion(
        &self,
        slot: &RunSlot,
        st: &mut RunState,
        durable: &mut Option<Pending<()>>,
    ) -> (bool, bool) {
        if !st.run.is_terminated() {
            // Nothing to hand to the store: it only hears of a run's end.
            st.records_sent = st.run.records().len();
            return (false, false);
        }
        let (sealed, ended) = self.seal(slot, st, None, &[]);
        (keep_unless_durable(sealed, durable), ended)
    }

    /// A completion the core refused: a stale one is dropped (its attempt was retried, or
    /// the execution finished already), any other is an error.
    #[cold]
    pub(super) fn completion_refused(
        &self,
        slot: &RunSlot,
        e: CompleteError,
    ) -> Result<(bool, bool), EngineError> {
        match e {
            CompleteError::StaleAttempt { execution, .. }
            | CompleteError::AlreadyFinished(execution) => {
                tracing::warn!(run_id = %slot.run_id(), %execution, "stale completion dropped");
                Ok((false, false))
            }
            e => Err(EngineError::Core {
                run_id: slot.run_id().to_string(),
                detail: e.to_string(),
            }),
        }
    }

    /// Applies one input to the core under the run's lock (held by the caller) and hands
    /// the journal entry to the backend; the executions it started are left in the core.
    pub(super) fn apply_locked(
        &self,
        slot: &RunSlot,
        st: &mut RunState,
        input: Input,
    ) -> Result<Entry, EngineError> {
        if let Some(f) = &st.failure {
            // The store missed an entry of this run: accepting more would leave a gap in
            // its journal. The run stays stopped until the engine is reopened.
            return Err(EngineError::Store(StoreError::Io {
                detail: format!(
                    "run `{}` was stopped by an earlier storage failure: {f}",
                    slot.run_id()
                ),
            }));
        }
        let journal = self.journal;
        let core_err = |e: &dyn std::fmt::Display| EngineError::Core {
            run_id: slot.run_id().to_string(),
            detail: e.to_string(),
        };
        // What a completing execution's model calls used, counted just before its
        // completion when the run has a budget to count it against.
        let used = match &input {
            Input::Complete {
                execution, attempt, ..
            } if st.usage.is_some() => {
                // Only for a completion the core takes (a stale one is dropped unjournaled:
                // counting its usage would make the live run differ from its replay).
                let live = st.run.execution(*execution).is_some_and(|x| {
                    x.state == saap_dispatch::run::ExecState::Running && x.attempt == *attempt
                });
                st.take_usage(*execution, *attempt)
                    .filter(|_| live && st.run.budget().is_some())
            }
            _ => None,
        };
        let stored_usage = used.map(|u| crate::backend::StoredUsage {
            tokens: u.tokens,
            cost_micros: u.cost_micros,
        });
        // In a fork: the original's execution whose outputs a completion brings.
        let reused = match (&input, st.fork_reuse.as_deref()) {
            (Input::Complete { execution, .. }, Some(table)) if journal => table.served(*execution),
            _ => None,
        };
        let mut pending = take_pending(st);
        pending.clear();
        let mut display_by: Vec<(u32, ExecutionId)> = Vec::new();
        let mut retried: Option<(ExecutionId, u32)> = None;
        let mut appended = None;
        let depth = st.delegation_depth();
        let mut pre = Pre {
            results: journal.then(Vec::new),
            ..self.pre(&st.payloads, &[], &mut st.pre_cache)
        };
        let stored_input;
        // Events a completion returned for later delivery, with their payloads.
        let mut timers: Vec<(TimerRequest, Payload)> = Vec::new();
        // Requests among a completion's outputs that start child runs.
        let mut children = Vec::new();
        let clock = matches!(input, Input::Clock(_));
        let granted = matches!(input, Input::Start { .. } | Input::Budget(_));
        // The engine's input as the core's (one way in, `Run::handle`), with what the
        // journal keeps of it and the payloads of the events it brings.
        let (core_input, by) = match input {
            Input::Budget(grant) => {
                stored_input = journal.then(|| StoredInput::Budget(StoredGrant::of(grant)));
                (RunInput::Budget(grant), None)
            }
            Input::Start { ev, budget } => {
                // Granted before the start event (the run has not begun, so only an empty
                // grant is refused), kept in the start event's journal entry.
                st.run.grant(budget).map_err(|e| core_err(&e))?;
                stored_input = journal.then(|| StoredInput::Append {
                    event: stored(&ev),
                    by: None,
                    budget: Some(StoredGrant::of(budget)),
                });
                (appended_input(ev, &mut pending), None)
            }
            Input::Append(ev) => {
                stored_input = journal.then(|| StoredInput::Append {
                    event: stored(&ev),
                    by: ev.by.map(|x| x.0),
                    budget: None,
                });
                let by = ev.by;
                (appended_input(ev, &mut pending), by)
            }
            Input::Complete {
                execution,
                attempt,
                outcome,
            } => {
                let horizon = self.opts.max_timer_horizon;
                let outcome = outcome.and_then(|outs| match timer_horizon_error(&outs, horizon) {
                    Some(e) => Err(e),
                    None => Ok(outs),
                });
                let mut delegations = Vec::new();
                let outcome = match outcome {
                    Ok(outs) if self.may_delegate => {
                        let step = st.run.execution(execution).map(|e| e.step);
                        match self.delegations(depth, step, &outs) {
                            Ok(d) => {
                                delegations = d;
                                Ok(outs)
                            }
                            Err(e) => Err(e),
                        }
                    }
                    outcome => outcome,
                };
                let outcome = match outcome {
                    Ok(mut outs) => {
                        let mut news = std::mem::take(&mut scratch(&mut st.scratch).news);
                        let mut stored_outs = Vec::new();
                        let mut stored_timers = Vec::new();
                        let mut stored_children = Vec::new();
                        let mut delegations = delegations.into_iter().peekable();
                        news.clear();
                        news.reserve(outs.len());
                        pending.reserve_exact(outs.len());
                        let step = st.run.execution(execution).map(|e| e.step);
                        for (i, o) in outs.drain(..).enumerate() {
                            let due = o.due_ns;
                            let ev = self.output(step, slot.run_key, execution, i as u32, o);
                            let new = NewEvent {
                                id: ev.id,
                                ty: ev.ty.clone(),
                            };
                            if let Some(due) = due {
                                // Delivered later: a timer, set once the completion is in.
                                if journal {
                                    stored_timers.push(StoredTimer {
                                        event: stored(&ev),
                                        due_ns: due.get(),
                                    });
                                }
                                timers.push((
                                    TimerRequest {
                                        event: new,
                                        due_ns: due.get(),
                                    },
                                    ev.payload,
                                ));
                                continue;
                            }
                            if delegations.peek().is_some_and(|d| d.output == i)
                                && let Some(d) = delegations.next()
                            {
                                // A request that starts a child: logged as any output, and
                                // its child (with its deadline) set with the completion.
                                let deadline = d.deadline.map(|due_ns| {
                                    let at = i as u32;
                                    let ev = self.deadline_event(
                                        slot.run_key,
                                        execution,
                                        at,
                                        ev.id,
                                        &d.req,
                                        d.asked,
                                    );
                                    (ev, due_ns)
                                });
                                if journal {
                                    stored_children.push(StoredChild {
                                        request: ev.id,
                                        detached: d.req.detached,
                                        deadline: deadline.as_ref().map(|(ev, due_ns)| {
                                            StoredTimer {
                                                event: stored(ev),
                                                due_ns: *due_ns,
                                            }
                                        }),
                                    });
                                }
                                children.push((ev.id, d.req, deadline));
                            }
                            if journal {
                                stored_outs.push(stored(&ev));
                            }
                            news.push(new);
                            pending.push((ev.id, ev.payload));
                        }
                        let sc = scratch(&mut st.scratch);
                        if sc.spare_outs.capacity() == 0 && outs.capacity() <= SPARE_MAX {
                            sc.spare_outs = outs;
                        }
                        stored_input = journal.then(|| StoredInput::Complete {
                            execution: execution.0,
                            attempt,
                            outputs: Some(stored_outs),
                            error: None,
                            timers: stored_timers,
                            children: stored_children,
                            usage: stored_usage,
                            reused,
                        });
                        Outcome::Returned(news)
                    }
                    Err(msg) => {
                        stored_input = journal.then(|| StoredInput::Complete {
                            execution: execution.0,
                            attempt,
                            outputs: None,
                            error: Some(msg.clone()),
                            timers: Vec::new(),
                            children: Vec::new(),
                            usage: stored_usage,
                            reused: None,
                        });
                        Outcome::Failed(msg)
                    }
                };
                let input = RunInput::Complete {
                    execution,
                    attempt,
                    outcome,
                };
                (input, None)
            }
            Input::Retry(x) => {
                stored_input = journal.then(|| StoredInput::Retry { execution: x.0 });
                (RunInput::Retry { execution: x }, None)
            }
            Input::Clock(now_ns) => {
                stored_input = journal.then_some(StoredInput::Clock { now_ns });
                // The events of the timers due now are offered with their payloads.
                take_due_payloads(&st.run, &mut st.timers, now_ns, &mut pending);
                (RunInput::Clock { now_ns }, None)
            }
            Input::ChildEnded { child, ev } => {
                stored_input = journal.then(|| StoredInput::ChildEnded {
                    child,
                    event: stored(&ev),
                });
                pending.reserve_exact(1);
                pending.push((ev.id, ev.payload));
                let event = NewEvent {
                    id: ev.id,
                    ty: ev.ty,
                };
                (RunInput::ChildEnded { child, event }, None)
            }
        };
        pre.pending = &pending;
        let (completing, retrying) = match &core_input {
            RunInput::Complete { execution, .. } => (Some(*execution), None),
            RunInput::Retry { execution } => (None, Some(*execution)),
            RunInput::Append(_)
            | RunInput::Schedule { .. }
            | RunInput::Clock { .. }
            | RunInput::Delegate { .. }
            | RunInput::ChildEnded { .. }
            | RunInput::Budget(_)
            | RunInput::Usage { .. } => (None, None),
        };
        let records_before = if clock { st.run.records().len() } else { 0 };
        if let Some(u) = used {
            st.run.use_budget(u.tokens, u.cost_micros);
        }
        match (st.run.handle(core_input, &mut pre), completing) {
            (Ok(Handled::Appended(a)), _) => {
                if let (Some(x), Appended::DisplayOnly { seq } | Appended::AfterStop { seq }) =
                    (by, a)
                {
                    display_by.push((seq, x));
                }
                appended = Some(a);
            }
            (Ok(Handled::Completed { mut spare }), _) => {
                if spare.capacity() <= SPARE_MAX {
                    spare.clear();
                    scratch(&mut st.scratch).news = spare;
                }
            }
            (Ok(Handled::Retried { attempt }), _) => retried = retrying.map(|x| (x, attempt)),
            (
                Ok(
                    Handled::Scheduled { .. }
                    | Handled::Fired { .. }
                    | Handled::Delegated { .. }
                    | Handled::Granted { .. }
                    | Handled::Used,
                ),
                _,
            ) => {}
            // A child's end delivered again (making sure of children after a restart): the
            // first one counts. A child whose deadline came first: its end is not the
            // run's any more.
            (
                Err(InputError::Child(
                    ChildError::AlreadyEnded { .. } | ChildError::TimedOut { .. },
                )),
                _,
            ) => {
                return Ok(Entry {
                    durable: Pending::Ready(Ok(())),
                    appended: None,
                    ended: false,
                    retried: None,
                });
            }
            (Err(InputError::Append(AppendError::RunNotStarted { name, .. })), _) => {
                return Err(EngineError::NotAStartEvent { name });
            }
            // A completion of a stale attempt (the execution was retried) is dropped.
            (
                Err(InputError::Complete(
                    CompleteError::StaleAttempt { .. } | CompleteError::AlreadyFinished(_),
                )),
                Some(execution),
            ) => {
                tracing::warn!(run_id = %slot.run_id(), %execution, "stale completion dropped");
                return Ok(Entry {
                    durable: Pending::Ready(Ok(())),
                    appended: None,
                    ended: false,
                    retried: None,
                });
            }
            (Err(e), _) => return Err(core_err(&e)),
        }
        let results = pre.results.take().unwrap_or_default();
        drop(pre);
        if let (false, Some(execution)) = (timers.is_empty(), completing) {
            self.set_timers(slot, st, execution, timers)?;
        }
        let starts = match (children.is_empty(), completing) {
            (false, Some(execution)) => self.set_children(slot, st, execution, children)?,
            _ => Vec::new(),
        };
        fill_payloads(st, &mut pending);
        pending.clear();
        give_back_pending(st, pending);
        if !display_by.is_empty() {
            st.shown_by().extend(display_by);
        }

        // A grant of time makes its end due (the run is woken then to spend it).
        if clock || granted || st.timers.is_some() {
            self.note_timers(slot, st);
        }
        // Children whose deadline this clock reading passed: cancelled once it is durable.
        let timed_out: Vec<u32> = if clock {
            st.run
                .records()
                .slice(records_before..)
                .iter()
                .filter_map(|r| match r {
                    saap_dispatch::Record::ChildTimedOut { child } => Some(child),
                    _ => None,
                })
                .collect()
        } else {
            Vec::new()
        };
        let (mut durable, ended) = self.seal(slot, st, stored_input, &results);
        if !starts.is_empty()
            && let Some(me) = self.this.upgrade()
        {
            durable = me.start_children_after(slot, st, starts, durable);
        }
        if !timed_out.is_empty() {
            durable = self.cancel_timed_out_after(slot, st, &timed_out, durable);
        }
        Ok(Entry {
            durable,
            appended,
            ended,
            retried,
        })
    }

    /// Sets the timers a completion returned, right after it (same lock, same journal
    /// entry), and keeps their payloads until they fire.
    fn set_timers(
        &self,
        slot: &RunSlot,
        st: &mut RunState,
        execution: ExecutionId,
        timers: Vec<(TimerRequest, Payload)>,
    ) -> Result<(), EngineError> {
        let (requests, payloads): (Vec<_>, Vec<_>) = timers.into_iter().unzip();
        let first = st.run.timers().len();
        let mut pre = self.pre(&st.payloads, &[], &mut st.pre_cache);
        st.run
            .handle(
                RunInput::Schedule {
                    execution,
                    timers: requests,
                },
                &mut pre,
            )
            .map_err(|e| EngineError::Core {
                run_id: slot.run_id().to_string(),
                detail: e.to_string(),
            })?;
        keep_timer_payloads(st, first, payloads);
        Ok(())
    }

    /// After an input was applied: notes whether it ended the run and hands its journal
    /// entry (or, without a journal, the run's end) to the store while the caller still
    /// holds the run's lock (journal order). Returns the entry's durability and whether
    /// this input ended the run with its end not durable yet: an entry durable at once (the
    /// in-memory store) marks the end durable here, so that the caller need not lock the
    /// run again for it.
    pub(super) fn seal(
        &self,
        slot: &RunSlot,
        st: &mut RunState,
        stored_input: Option<StoredInput>,
        results: &[bool],
    ) -> (Pending<()>, bool) {
        let journal = self.journal;
        let mut ended = st.run.is_terminated() && !st.ended_sent;
        st.ended_sent |= ended;
        #[cfg(feature = "otel")]
        if let Some(t) = &self.telemetry {
            if journal && !st.created {
                t.run_seen(slot.run_id());
            }
            if ended {
                t.run_ended(slot, st, &self.type_names);
            }
        }
        // What the end asks of the run's tree (its parent, its children), once durable.
        let tree = if ended && (st.parent.is_some() || !st.run.children().is_empty()) {
            self.end_effects(slot, st)
        } else {
            None
        };
        if ended {
            st.pre_cache = None;
            // A cancelled run's running bodies are told (`StepCtx::cancellation`), those
            // handed off to an executor too.
            if st.run.progress() == Progress::Cancelled {
                if let Some(token) = &st.cancel {
                    token.cancel();
                }
                if let Some(executor) = self.executor.get() {
                    executor.run_cancelled(slot.run_id());
                }
            }
            if self.opts.keep_ended_runs {
                // An ended run kept for inspection holds no buffers (an evicted one may be
                // reused by a new run, buffers included), and its tables only what they hold
                // (they grew by doubling).
                st.scratch = None;
                st.run.shrink_to_fit();
                st.payloads.shrink_to_fit();
                if let Some(d) = st.displays.as_mut() {
                    d.by.shrink_to_fit();
                }
            }
        }
        let durable = if !journal && ended {
            // A store without a journal only hears of the run's end.
            st.records_sent = st.run.records().len();
            st.created = true;
            let index = st.journal_len;
            st.journal_len += 1;
            self.backend
                .persist_end(crate::backend::RunIdRef::new(slot), index)
        } else if journal {
            let records = st.run.records().slice(st.records_sent..);
            let records_json = if journal {
                serde_json::to_string(&records).unwrap_or_else(|_| "[]".into())
            } else {
                String::new()
            };
            st.records_sent = st.run.records().len();
            // Only a journal keeps run metadata (the in-memory store only hears of the end).
            let new_run = (journal && !st.created).then(|| RunMeta {
                run_id: slot.run_id().clone(),
                thread_id: slot.thread_id().clone(),
                workflow: self.workflow.name().to_string(),
                fingerprint: self.fingerprint,
                parent: st.delegated_by.as_deref().cloned(),
            });
            st.created = true;
            let index = st.journal_len;
            st.journal_len += 1;
            self.backend.persist(PersistBatch {
                run_id: slot.run_id().clone(),
                new_run,
                index,
                // Encoded here, on the engine's thread, so the store thread only writes.
                // An entry that cannot be encoded is left empty: the store refuses it and
                // the run stops with a storage error.
                entry_json: match stored_input {
                    Some(input) => {
                        let mut out = Vec::with_capacity(256);
                        match crate::backend::encode_entry(
                            &input,
                            results,
                            Some(super::ids::unix_nanos()),
                            &mut out,
                        ) {
                            Ok(()) => String::from_utf8(out).unwrap_or_default(),
                            Err(e) => {
                                tracing::error!(run_id = %slot.run_id(), error = %e, "journal entry cannot be encoded");
                                String::new()
                            }
                        }
                    }
                    None => String::new(),
                },
                records_json,
                ended,
            })
        } else {
            st.records_sent = st.run.records().len();
            Pending::Ready(Ok(()))
        };
        let durable = match tree {
            Some(effects) => self.end_effects_after(effects, durable),
            None => durable,
        };
        if ended && matches!(durable, Pending::Ready(Ok(()))) {
            st.end_durable = true;
            ended = false;
        }
        (durable, ended)
    }

    /// A display event from a running step.
    pub(crate) async fn display(
        self: &Arc<Self>,
        slot: &Arc<RunSlot>,
        x: ExecutionId,
        n: u32,
        name: std::borrow::Cow<'static, str>,
        payload: Payload,
    ) -> Result<(), ContextError> {
        let run_key = slot.run_key;
        let mut ev = self.output(
            None,
            run_key,
            x,
            0x4000_0000 | n,
            OutEvent {
                name,
                payload,
                due_ns: None,
            },
        );
        if !ev.kind.is_display() || ev.kind.is_control() {
            return Err(ContextError::NotDisplay {
                name: ev.name.to_string(),
            });
        }
        if let NewEventType::Foreign { .. } = ev.ty {
            ev.kind = EventKind::from_bits(EventKind::DISPLAY);
        }
        ev.by = Some(x);
        let engine_error = |e: EngineError| ContextError::Engine(Box::new(e));
        let Applied {
            durable,
            started,
            appended,
            ended,
        } = self
            .apply_to_launch(slot, Input::Append(ev))
            .map_err(engine_error)?;
        match durable {
            Pending::Ready(stored) => self
                .launched(slot, stored, started, appended, ended)
                .map(|_| ())
                .map_err(engine_error),
            waiting => {
                // A display event starts nothing and decides nothing, so the step goes on
                // while its entry is written (a streamed answer would otherwise wait for a
                // commit per chunk). A run's entries are stored in order: the execution's
                // completion, written later, is durable only once this entry is; a crash
                // before that loses only shown events whose execution runs again and shows
                // them again under the same ids. A store failure stops the run as usual.
                let (shared, slot) = (Arc::clone(self), Arc::clone(slot));
                tokio::spawn(async move {
                    let stored = waiting.wait().await;
                    let _failed_run_stopped =
                        shared.launched(&slot, stored, started, appended, ended);
                });
                Ok(())
            }
        }
    }

    /// The store failed for this run: it cannot continue consistently. The failure is kept
    /// on the run (shown by snapshots and the test runner) and logged.
    #[cold]
    pub(super) fn storage_failed(&self, slot: &RunSlot, e: &StoreError) {
        if matches!(e, StoreError::Halted) {
            return;
        }
        tracing::error!(run_id = %slot.run_id(), error = %e, "storage failed; the run is stopped");
        let mut st = slot.lock();
        if st.failure.is_none() {
            st.failure = Some(e.to_string().into());
        }
        let woken = st.waiters.take();
        drop(st);
        slot.bump();
        woken.wake();
    }
}

/// Why a step's timers cannot be set: one is due further away than `horizon` (a deadline
/// years ahead is almost always a unit mistake, and would keep the run forever).
fn timer_horizon_error(outs: &[OutEvent], horizon: std::time::Duration) -> Option<String> {
    let latest = outs.iter().filter_map(|o| o.due_ns).max()?.get();
    let limit = super::ids::unix_nanos()
        .saturating_add(u64::try_from(horizon.as_nanos()).unwrap_or(u64::MAX));
    if latest <= limit {
        return None;
    }
    let late = outs
        .iter()
        .find(|o| o.due_ns.is_some_and(|d| d.get() == latest))?;
    Some(format!(
        "SAAP-E011: step output `{}` is delayed until {}, further away than the engine's timer \
         horizon of {} days (EngineOptions::max_timer_horizon); check the delay's unit, or \
         raise the horizon",
        late.name,
        saap_dispatch::render::utc_text(latest),
        horizon.as_secs() / 86_400
    ))
}

/// Whether a step's outputs include one delivered later ([`crate::Delayed`]).
#[inline]
fn sets_timers(outs: &[OutEvent]) -> bool {
    outs.iter().any(|o| o.due_ns.is_some())
}

/// Keeps an entry's durability in `kept` unless it was durable at once: whether it kept it.
#[inline]
pub(super) fn keep_unless_durable(durable: Pending<()>, kept: &mut Option<Pending<()>>) -> bool {
    if matches!(durable, Pending::Ready(Ok(()))) {
        return false;
    }
    *kept = Some(durable);
    true
}
