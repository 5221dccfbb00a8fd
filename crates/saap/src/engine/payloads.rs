//! A run's payloads by log sequence: the events an input adds are put where the core logged
//! them, the buffers a transition needs are taken and given back (a thread's buffer serves
//! runs that have none yet), and an execution's buffers are kept for the next. Bookkeeping
//! beside the core's log, never a second truth about it.

use super::invocation::{Invocation, SPARE_MAX, reusable_inputs};
use super::slot::{RunState, scratch};
use crate::event::Payload;
use saap_dispatch::ids::Seq;
use saap_dispatch::run::EventTy;
use saap_dispatch::{EventId, Origin, Run};

/// [`Shared::keep_buffers`] with the run's lock taken.
#[inline]
pub(super) fn keep_buffers_locked(st: &mut RunState, inv: Invocation) {
    if let Some(sc) = st.scratch.as_mut() {
        if sc.spare_inputs.capacity() == 0 && reusable_inputs(&inv.inputs) {
            sc.spare_inputs = inv.inputs;
        }
        if sc.spare_outs.capacity() == 0 && inv.outs.capacity() <= SPARE_MAX {
            sc.spare_outs = inv.outs;
        }
    }
}

/// Adds the payloads of the events the core just logged, taken from `pending` (the events
/// offered to it, with their payloads); `pending` is left for the caller to clear (its
/// payloads may have been moved out already).
pub(super) fn fill_payloads(st: &mut RunState, pending: &mut Vec<(EventId, Payload)>) {
    add_payloads(&st.run, &mut st.payloads, st.scratch.is_some(), pending);
}

/// [`fill_payloads`] of one event `id` (an outside event's, not a completion's: the run
/// may not execute yet), through the pending buffer [`Shared::apply_locked`] uses.
#[cold]
#[inline(never)]
pub(super) fn fill_one_payload(st: &mut RunState, id: EventId, payload: Payload) {
    let mut pending = take_pending(st);
    pending.clear();
    pending.push((id, payload));
    fill_payloads(st, &mut pending);
    pending.clear();
    give_back_pending(st, pending);
}

/// The run's `pending` buffer (its scratch's, or this thread's for a run that has not
/// executed yet), taken for one input; hand it back with [`give_back_pending`].
#[inline]
pub(super) fn take_pending(st: &mut RunState) -> Vec<(EventId, Payload)> {
    match st.scratch.as_mut() {
        Some(s) => std::mem::take(&mut s.pending),
        None => UNSCRATCHED_PENDING.take(),
    }
}

/// Returns the buffer [`take_pending`] took (emptied by the caller): kept by the run once
/// it executes (a run's start event alone leaves no buffers behind), else by this thread.
#[inline]
pub(super) fn give_back_pending(st: &mut RunState, pending: Vec<(EventId, Payload)>) {
    match st.scratch.as_mut() {
        Some(s) => s.pending = pending,
        None if pending.capacity() <= SPARE_MAX => UNSCRATCHED_PENDING.set(pending),
        None => {}
    }
}

/// Puts the payload of the event the core just logged at `seq` (the one event `id` of a
/// completion) in the run's payload table, which mirrors the log.
#[inline]
pub(super) fn put_payload(st: &mut RunState, seq: Seq, id: EventId, payload: Payload) {
    let payloads = &mut st.payloads;
    if seq as usize == payloads.len() && payloads.len() < payloads.capacity() {
        payloads.push(payload);
        return;
    }
    // The table needs room (a run's first completion): as for any other event.
    let pending = &mut scratch(&mut st.scratch).pending;
    pending.clear();
    pending.push((id, payload));
    add_payloads_in_order(&st.run, payloads, true, pending);
    pending.clear();
}

/// [`fill_payloads`] over the parts of a run's state: its core `run`, its `payloads`, and
/// whether it `executes` (has scratch buffers).
#[inline]
pub(super) fn add_payloads(
    run: &Run,
    payloads: &mut Vec<Payload>,
    executes: bool,
    pending: &mut Vec<(EventId, Payload)>,
) {
    let log_len = run.log().len();
    // Most completions log their one output: no cursor, no search.
    if let [(id, _)] = pending[..]
        && log_len == payloads.len() + 1
        && log_len <= payloads.capacity()
        && run.log()[log_len - 1].id == id
        && let Some((_, payload)) = pending.pop()
    {
        payloads.push(payload);
        return;
    }
    add_payloads_in_order(run, payloads, executes, pending);
}

/// [`add_payloads`] for several events, or for payloads that need room.
#[inline(never)]
pub(super) fn add_payloads_in_order(
    run: &Run,
    payloads: &mut Vec<Payload>,
    executes: bool,
    pending: &mut Vec<(EventId, Payload)>,
) {
    let log_len = run.log().len();
    // The payloads mirror the log: once the run executes (it has scratch buffers), grown at
    // once to a whole run's size (one event per step and two more), as the core grows the
    // log, instead of doubling; a run waiting for its first step keeps a small vector.
    if log_len > payloads.capacity() {
        let planned = run.spec().steps.len() + 2;
        let len = payloads.len();
        if executes && log_len <= planned {
            payloads.reserve_exact(planned - len);
        } else if len == 0 {
            // A new run's first events (its start event): room for those only, not four
            // (many runs in flight wait at their start event).
            payloads.reserve_exact(log_len);
        } else {
            // Room for what the core reserved the log for (a fan-out: its workers' events
            // too), so that the payloads do not double, copying them all, on the way.
            payloads.reserve_exact(run.log_capacity().max(log_len) - len);
        }
    }
    // Usually every event offered was logged, in the order offered (a fan-out's outputs):
    // the payloads move over, no reference count taken and dropped per event.
    let new = &run.log()[payloads.len()..];
    if new.len() == pending.len()
        && new
            .iter()
            .zip(pending.iter())
            .all(|(e, (id, _))| e.id == *id)
    {
        payloads.extend(pending.drain(..).map(|(_, p)| p));
        return;
    }
    // New events are logged in the order they were offered (minus dropped duplicates), so
    // a cursor finds each payload in O(1); the search is only a fallback.
    let mut cursor = 0;
    while payloads.len() < log_len {
        let seq = payloads.len();
        let ev = run.log()[seq];
        let hit = match pending.get(cursor) {
            Some((id, p)) if *id == ev.id => {
                cursor += 1;
                Some(p.clone())
            }
            _ => pending.iter().position(|(id, _)| *id == ev.id).map(|i| {
                cursor = i + 1;
                pending[i].1.clone()
            }),
        };
        let p = hit.unwrap_or_else(|| {
            // Events the core made itself: the ExceptionEvent of a failed step.
            let spec = run.spec();
            match (ev.ty, ev.origin) {
                (EventTy::Known(t), Origin::Execution(x)) if t == spec.exception_type() => {
                    let msg = run.execution_error(x).unwrap_or("step failed").to_string();
                    Payload::typed(crate::event::ExceptionEvent::new(msg))
                }
                _ => Payload::from_json(serde_json::Value::Null),
            }
        });
        payloads.push(p);
    }
}

thread_local! {
    /// The `pending` buffer of inputs to runs without scratch buffers (a start event, an
    /// event sent to a run waiting for its first step): one per thread, not one allocated
    /// and freed per such input. Empty between uses.
    pub(super) static UNSCRATCHED_PENDING: std::cell::Cell<Vec<(EventId, Payload)>> =
        const { std::cell::Cell::new(Vec::new()) };
}
