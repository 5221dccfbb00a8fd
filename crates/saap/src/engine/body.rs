//! Running a step body: its context and typed inputs made, the handler called (panics
//! caught), its first poll in place, and its result handed back to the core as a completion
//! ([`complete`]). Every way of running a body (a task, the local driver, the NATS work
//! queue) goes through these functions. Must not decide what runs next: the completion's
//! result says.

use super::apply::{Completed, CompletionBuffers};
use super::bind::invocation_into;
use super::invocation::Invocation;
use super::payloads::keep_buffers_locked;
use super::shared::Shared;
use super::slot::RunSlot;
use crate::backend::StoreError;
use crate::context::{NewCtx, StepCtx};
use crate::event::Payload;
use crate::params::{BoundEvent, OutEvent};
use crate::workflow::{StepFuture, StepImpl};
use saap_dispatch::run::Bound;
use saap_dispatch::{ExecutionId, Run, StepIdx};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::Poll;

impl Shared {
    /// Runs one execution's body to its end, catching panics; its outputs go to
    /// `inv.outs`.
    pub(super) async fn execute(
        self: &Arc<Self>,
        slot: &Arc<RunSlot>,
        inv: &mut Invocation,
    ) -> Result<(), String> {
        let step = inv.step;
        let result = match self.start_body(slot, inv) {
            Ok(fut) => {
                let mut body = Some(fut);
                std::future::poll_fn(|cx| self.poll_body(step, &mut body, cx)).await
            }
            Err(e) => Err(e),
        };
        end_body(inv);
        result.map(|outs| inv.outs = outs)
    }

    /// In a fork: whether `inv` (bound) takes the recorded outputs of an execution of the
    /// original with its step and inputs instead of running its body (see `fork_reuse`);
    /// if so its outputs are in `inv.outs` and its bound events released.
    pub(super) fn reuse_recorded(&self, slot: &RunSlot, inv: &mut Invocation) -> bool {
        let outs = {
            let mut st = slot.lock();
            let Some(table) = st.fork_reuse.as_deref_mut() else {
                return false;
            };
            table.take(inv.execution, inv.step, &inv.inputs)
        };
        let Some(outs) = outs else {
            return false;
        };
        tracing::debug!(run_id = %slot.run_id(), execution = %inv.execution, "outputs reused from the original run");
        self.note_start(inv);
        inv.outs.clear();
        inv.outs.extend(outs);
        end_body(inv);
        true
    }

    /// Makes the future of an execution's body: its context, inputs and output vector.
    pub(super) fn start_body(
        self: &Arc<Self>,
        slot: &Arc<RunSlot>,
        inv: &mut Invocation,
    ) -> Result<StepFuture, String> {
        self.note_start(inv);
        let ctx = NewCtx::Local {
            engine: self.ctx_ref,
            names: &slot.names,
            execution: inv.execution,
            attempt: inv.attempt,
        };
        let outs = std::mem::take(&mut inv.outs);
        self.make_body(inv.step, &inv.inputs, ctx, outs)
    }

    /// Calls a step's handler, catching a panic. `outs` is an empty vector for the outputs
    /// (recycled by the caller, or new).
    pub(super) fn make_body(
        &self,
        step_idx: StepIdx,
        inputs: &[Vec<BoundEvent>],
        ctx: NewCtx<'_>,
        outs: Vec<OutEvent>,
    ) -> Result<StepFuture, String> {
        let Some(step) = self.workflow.inner.steps.get(step_idx as usize) else {
            return Err(no_step(step_idx));
        };
        let started = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let mut body = crate::workflow::body_run(step);
            match body.as_mut().start(&step.body_fn, inputs, ctx, outs, None) {
                Ok(_) => Ok(body),
                Err(e) => {
                    crate::workflow::recycle_body(step.key, body);
                    Err(e)
                }
            }
        }));
        match started {
            Ok(Ok(f)) => Ok(f),
            Ok(Err(e)) => Err(format!(
                "step `{}` cannot read its inputs: {e}",
                self.step_name(step_idx)
            )),
            Err(p) => Err(format!(
                "step `{}` panicked: {}",
                self.step_name(step_idx),
                panic_text(&p)
            )),
        }
    }

    /// Notes when `inv`'s body starts, for its span, when this engine exports traces.
    #[inline(always)]
    fn note_start(&self, inv: &mut Invocation) {
        #[cfg(feature = "otel")]
        if self.telemetry.is_some() {
            inv.started_ns = super::ids::unix_nanos();
        }
        #[cfg(not(feature = "otel"))]
        let _ = inv;
    }

    pub(super) fn step_name(&self, step_idx: StepIdx) -> &str {
        self.workflow
            .spec()
            .steps
            .get(step_idx as usize)
            .map_or("?", |s| s.name.as_str())
    }

    /// Polls a started body once, catching a panic. A body that ended normally is kept by
    /// this thread for its step's next execution; one that panicked is dropped.
    pub(super) fn poll_body(
        &self,
        step_idx: StepIdx,
        body: &mut Option<StepFuture>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Result<Vec<OutEvent>, String>> {
        let Some(fut) = body.as_mut() else {
            return Poll::Ready(Err(format!(
                "step `{}` was polled after it ended",
                self.step_name(step_idx)
            )));
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(r)) => {
                if let (Some(f), Some(step)) = (
                    body.take(),
                    self.workflow.inner.steps.get(step_idx as usize),
                ) {
                    crate::workflow::recycle_body(step.key, f);
                }
                Poll::Ready(r)
            }
            Err(p) => {
                *body = None;
                Poll::Ready(Err(format!(
                    "step `{}` panicked: {}",
                    self.step_name(step_idx),
                    panic_text(&p)
                )))
            }
        }
    }

    /// Starts the body of `inv` (bound, see [`invocation_into`]) and polls it once, catching
    /// a panic: whether it returned (its outputs in `inv.outs`) or failed, or the body, which
    /// waits. A body that ended is kept by this thread for its step's next execution, and
    /// the bound events are released.
    pub(super) fn first_poll(
        &self,
        slot: &RunSlot,
        inv: &mut Invocation,
        cx: &mut std::task::Context<'_>,
    ) -> Result<Result<(), String>, StepFuture> {
        let step_idx = inv.step;
        let Some(step) = self.workflow.inner.steps.get(step_idx as usize) else {
            return Ok(Err(no_step(step_idx)));
        };
        self.note_start(inv);
        let ctx = NewCtx::Local {
            engine: self.ctx_ref,
            names: &slot.names,
            execution: inv.execution,
            attempt: inv.attempt,
        };
        match inv.prepared.take() {
            // Its inputs were extracted under the run's lock (no bound events to release).
            Some(Ok(body)) => self.start_prepared(step_idx, step, body, ctx, &mut inv.outs, cx),
            Some(Err(failed)) => Ok(Err(failed)),
            None => {
                let outs = std::mem::take(&mut inv.outs);
                let polled = self.start_bound(step_idx, step, &inv.inputs, ctx, outs, cx);
                if polled.is_ok() {
                    end_body(inv);
                }
                polled.map(|r| r.map(|outs| inv.outs = outs))
            }
        }
    }

    /// [`Shared::first_poll`] of a body run bound to events (`inputs`): one dynamic call
    /// extracts the inputs, makes the body and polls it, under one unwinding guard.
    pub(super) fn start_bound(
        &self,
        step_idx: StepIdx,
        step: &StepImpl,
        inputs: &[Vec<BoundEvent>],
        ctx: NewCtx<'_>,
        outs: Vec<OutEvent>,
        cx: &mut std::task::Context<'_>,
    ) -> Result<Result<Vec<OutEvent>, String>, StepFuture> {
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let mut body = crate::workflow::body_run(step);
            match body
                .as_mut()
                .start(&step.body_fn, inputs, ctx, outs, Some(cx))
            {
                Ok(Poll::Ready(r)) => {
                    crate::workflow::recycle_body(step.key, body);
                    Ok(Ok(r))
                }
                Ok(Poll::Pending) => Ok(Err(body)),
                Err(e) => {
                    crate::workflow::recycle_body(step.key, body);
                    Err(e)
                }
            }
        }));
        match polled {
            Ok(Ok(polled)) => polled,
            Ok(Err(e)) => Ok(Err(format!(
                "step `{}` cannot read its inputs: {e}",
                self.step_name(step_idx)
            ))),
            Err(p) => Ok(Err(format!(
                "step `{}` panicked: {}",
                self.step_name(step_idx),
                panic_text(&p)
            ))),
        }
    }

    /// Extracts the typed inputs bound by `bindings` (an execution of step `step_idx`) from
    /// the run's tables (under its lock) into a body run of the step, catching a panic: the
    /// body run, or the step's failure (the same messages as [`Shared::first_poll`]'s).
    /// Inlined into its two callers (one per step): the failures are made out of line.
    #[inline(always)]
    pub(super) fn extract_inputs(
        &self,
        run: &Run,
        step_idx: StepIdx,
        bindings: &[Bound],
        payloads: &[Payload],
    ) -> Result<StepFuture, String> {
        let Some(step) = self.workflow.inner.steps.get(step_idx as usize) else {
            return Err(no_step(step_idx));
        };
        let bound =
            crate::params::BoundInputs::new(run, step_idx, bindings, payloads, &self.type_names);
        let mut body = crate::workflow::body_run(step);
        match std::panic::catch_unwind(AssertUnwindSafe(|| body.as_mut().extract(&bound))) {
            Ok(Ok(())) => Ok(body),
            Ok(Err(e)) => Err(self.extract_failed(step_idx, step, body, &e)),
            Err(p) => Err(self.extract_panicked(step_idx, &p)),
        }
    }

    /// The failure of a step whose inputs could not be extracted (its body run is kept).
    #[cold]
    #[inline(never)]
    pub(super) fn extract_failed(
        &self,
        step_idx: StepIdx,
        step: &StepImpl,
        body: StepFuture,
        e: &crate::params::InputError,
    ) -> String {
        crate::workflow::recycle_body(step.key, body);
        format!(
            "step `{}` cannot read its inputs: {e}",
            self.step_name(step_idx)
        )
    }

    /// The failure of a step whose inputs' extraction panicked.
    #[cold]
    #[inline(never)]
    pub(super) fn extract_panicked(
        &self,
        step_idx: StepIdx,
        p: &Box<dyn std::any::Any + Send>,
    ) -> String {
        format!(
            "step `{}` panicked: {}",
            self.step_name(step_idx),
            panic_text(p)
        )
    }

    /// [`Shared::first_poll`] of a body run whose inputs were extracted
    /// ([`Shared::extract_inputs`]).
    pub(super) fn start_prepared(
        &self,
        step_idx: StepIdx,
        step: &StepImpl,
        mut body: StepFuture,
        ctx: NewCtx<'_>,
        outs: &mut Vec<OutEvent>,
        cx: &mut std::task::Context<'_>,
    ) -> Result<Result<(), String>, StepFuture> {
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| {
            body.as_mut().start_extracted(&step.body_fn, ctx, outs, cx)
        }));
        match polled {
            Ok(Poll::Ready(r)) => {
                crate::workflow::recycle_body(step.key, body);
                Ok(r)
            }
            Ok(Poll::Pending) => Err(body),
            Err(p) => Ok(Err(format!(
                "step `{}` panicked: {}",
                self.step_name(step_idx),
                panic_text(&p)
            ))),
        }
    }

    /// Runs a step body with its inputs and context, catching panics (a body of a run
    /// owned elsewhere, see `distributed.rs`).
    pub(super) async fn run_body(
        &self,
        step_idx: StepIdx,
        inputs: &[Vec<BoundEvent>],
        ctx: StepCtx,
        outs: Vec<OutEvent>,
    ) -> Result<Vec<OutEvent>, String> {
        let ctx = NewCtx::Made(Box::new(ctx));
        let mut body = Some(self.make_body(step_idx, inputs, ctx, outs)?);
        std::future::poll_fn(|cx| self.poll_body(step_idx, &mut body, cx)).await
    }

    /// Gives the buffers of an execution that started nothing to its run, for the run's
    /// next execution — or the next run of its slot: an engine that recycles ended runs
    /// allocates no input vectors per run.
    pub(super) fn keep_buffers(&self, slot: &RunSlot, inv: Invocation) {
        keep_buffers_locked(&mut slot.lock(), inv);
    }

    /// [`Shared::keep_buffers`], then [`Shared::maybe_evict`], under one look at the run's
    /// lock: the last execution of a run that its own driver ran. Returns whether the run
    /// is quiet.
    pub(super) fn keep_buffers_and_evict(&self, slot: &RunSlot, inv: Invocation) -> bool {
        let mut st = slot.lock();
        keep_buffers_locked(&mut st, inv);
        self.maybe_evict_locked(slot, st)
    }

    /// [`Shared::keep_buffers_and_evict`] for a caller that lets go of the run right after
    /// ([`Engine::run`]): a quiet run's eviction, and the wake-up of its waiters (left
    /// registered), are left to [`Shared::evict_and_release`], which takes the run table's
    /// lock once for the eviction and for keeping the slot. Returns whether the run is
    /// quiet, and whether its eviction was left to the caller.
    pub(super) fn keep_buffers_and_see_end(&self, slot: &RunSlot, inv: Invocation) -> (bool, bool) {
        let mut st = slot.lock();
        keep_buffers_locked(&mut st, inv);
        if self.opts.keep_ended_runs || !st.is_quiet() {
            return (self.maybe_evict_locked(slot, st), false);
        }
        (true, true)
    }

    /// Binds execution `x` (first attempt) into `inv`, keeping its buffers.
    pub(super) fn bind(&self, slot: &RunSlot, x: ExecutionId, inv: &mut Invocation) {
        let mut st = slot.lock();
        self.adopt_spare(&mut st);
        invocation_into(&mut st, self, x, 1, inv);
    }
}

/// After a body ended: releases the bound events (the buffers stay).
pub(super) fn end_body(inv: &mut Invocation) {
    for events in &mut inv.inputs {
        events.clear();
    }
}

/// Feeds a finished execution back to the core (not yet durable); `inv` becomes the first
/// execution it started, if any. `None` when the completion was refused.
pub(super) fn complete(
    shared: &Shared,
    slot: &RunSlot,
    inv: &mut Invocation,
    mut result: Result<(), String>,
    buffers: &mut CompletionBuffers,
    queued: Option<ExecutionId>,
) -> Option<Completed> {
    if shared.journal
        && result.is_ok()
        && let Some(e) = inv
            .outs
            .iter()
            .find_map(|o| stored_output_error(o, shared.opts.max_event_bytes))
    {
        // A store needs the JSON form: an output that cannot be serialized, or is larger
        // than an event may be, fails the step here (the in-memory backend never
        // serializes, see `Payload`).
        result = Err(e);
    }
    #[cfg(feature = "otel")]
    if let Some(t) = &shared.telemetry {
        t.execution_ended(
            slot,
            inv.step,
            inv.execution,
            inv.attempt,
            inv.started_ns,
            &shared.type_names,
            if result.is_ok() { &inv.outs } else { &[] },
            result.as_ref().err().map(String::as_str),
        );
    }
    match shared.complete_in_place(slot, inv, result, buffers, queued) {
        Ok(done) => Some(done),
        Err(e) => {
            tracing::error!(run_id = %slot.run_id(), error = %e, "completion refused");
            None
        }
    }
}

/// Why an output cannot be stored: its JSON form cannot be made, or is larger than `max`
/// bytes (the limit `send` enforces on incoming events).
pub(super) fn stored_output_error(out: &OutEvent, max: usize) -> Option<String> {
    match out.payload.check_json() {
        Err(e) => Some(e.to_string()),
        Ok(size) if size > max => Some(format!(
            "step output `{}` is {size} bytes, more than the event size limit of {max} \
             (EngineOptions::max_event_bytes); return large data by reference (an id, path \
             or URL of where it is stored) instead of in the event",
            out.name
        )),
        Ok(_) => None,
    }
}

/// After a completion's entry is durable (or the store failed: `None`).
#[inline]
pub(super) fn durable(
    shared: &Shared,
    slot: &RunSlot,
    ended: bool,
    stored: Result<(), StoreError>,
) -> Option<()> {
    if let Err(e) = stored {
        shared.storage_failed(slot, &e);
        return None;
    }
    if ended {
        slot.lock().end_durable = true;
    }
    slot.bump();
    Some(())
}

/// The failure of an execution of a step the workflow does not have.
#[cold]
#[inline(never)]
pub(super) fn no_step(step_idx: StepIdx) -> String {
    format!("the workflow has no step {step_idx}")
}

pub(super) fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-text panic payload".to_string()
    }
}
