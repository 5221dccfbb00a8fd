//! Launching what an input started once its entry is durable: each execution on a tokio
//! task of its own, or — where tasks add no parallelism — handed to a local driver
//! (`local_driver`). Also `submit`, the path of `send`: apply, wait until durable, launch.

use super::apply::{Applied, CompletionBuffers, Input, StartedNext};
use super::body::{complete, durable};
use super::error::EngineError;
use super::invocation::{Invocation, Started};
use super::local_driver::{DrivenRun, drive_local, enqueue_local, queued};
use super::shared::{Shared, shares_task};
use super::slot::RunSlot;
use crate::backend::{Pending, StoreError};
use saap_dispatch::{Appended, ExecutionId};
use std::sync::Arc;

/// What [`Shared::launch_now`] did: launched an input that was durable already, or not
/// (it waits for the store).
pub(super) enum LaunchOutcome {
    Done(Result<Option<Appended>, EngineError>),
    WaitsForStore(Applied),
}

impl Shared {
    /// Applies an input, waits until it is durable, then launches what it started.
    pub(super) async fn submit(
        self: &Arc<Self>,
        slot: &Arc<RunSlot>,
        input: Input,
    ) -> Result<Option<Appended>, EngineError> {
        let applied = self.apply_to_launch(slot, input)?;
        self.launch(slot, applied).await
    }

    /// Waits until an applied input is durable, then launches what it started. The wait
    /// of a store that is not ready at once is boxed: a caller's future (one per run
    /// started with `start_run`) stays small on the in-memory path.
    pub(super) async fn launch(
        self: &Arc<Self>,
        slot: &Arc<RunSlot>,
        applied: Applied,
    ) -> Result<Option<Appended>, EngineError> {
        let Applied {
            durable,
            started,
            appended,
            ended,
        } = applied;
        let stored = match durable {
            Pending::Ready(r) => r,
            waiting => Box::pin(waiting.wait()).await,
        };
        self.launched(slot, stored, started, appended, ended)
    }

    /// [`Shared::launch`] of an input that is durable already (the in-memory store), without
    /// a future; else the input back, for `launch`. `start_run` launches this way before
    /// its first await: its future (one per run in flight) holds neither the applied input
    /// nor `launch`'s state, only a boxed `launch` when a store makes it wait.
    pub(super) fn launch_now(
        self: &Arc<Self>,
        slot: &Arc<RunSlot>,
        applied: Applied,
    ) -> LaunchOutcome {
        match applied {
            Applied {
                durable: Pending::Ready(stored),
                started,
                appended,
                ended,
            } => LaunchOutcome::Done(self.launched(slot, stored, started, appended, ended)),
            waiting => LaunchOutcome::WaitsForStore(waiting),
        }
    }

    /// What [`Shared::launch`] does once the input's entry is stored (or failed).
    pub(super) fn launched(
        self: &Arc<Self>,
        slot: &Arc<RunSlot>,
        stored: Result<(), StoreError>,
        started: Started,
        appended: Option<Appended>,
        ended: bool,
    ) -> Result<Option<Appended>, EngineError> {
        if let Err(e) = stored {
            self.storage_failed(slot, &e);
            return Err(e.into());
        }
        if ended {
            slot.lock().end_durable = true;
        }
        slot.bump();
        let none_started = started.is_empty();
        spawn_all(self, slot, started);
        if none_started {
            let _quiet = self.maybe_evict(slot);
        }
        Ok(appended)
    }
}

pub(super) fn spawn_drive(shared: Arc<Shared>, slot: Arc<RunSlot>, inv: Invocation) {
    if shares_task(&shared) {
        enqueue_local(&shared, [inv.queued(&slot)]);
    } else {
        tokio::spawn(drive(shared, slot, inv));
    }
}

/// [`spawn_drive`] for an execution not bound yet.
pub(super) fn spawn_started(shared: Arc<Shared>, slot: Arc<RunSlot>, x: ExecutionId) {
    tokio::spawn(async move {
        let mut inv = Invocation::empty();
        shared.bind(&slot, x, &mut inv);
        drive(shared, slot, inv).await;
    });
}

/// Launches the executions an outside input started on tasks of their own: one task for
/// all of them where tasks add no parallelism ([`shares_task`]), else one each.
pub(super) fn spawn_all(shared: &Arc<Shared>, slot: &Arc<RunSlot>, started: Started) {
    match started {
        Started::None => {}
        // Not bound: applied for the engine's local driver (`Shared::apply_to_launch` saw
        // `shares_task`), which binds it when its turn comes.
        Started::One(inv) if !inv.bound => enqueue_local(shared, [inv.queued(slot)]),
        Started::One(inv) => spawn_drive(shared.clone(), slot.clone(), inv),
        Started::Many(all) if shares_task(shared) => {
            enqueue_local(shared, all.into_iter().map(|inv| inv.queued(slot)))
        }
        Started::Many(all) => {
            for inv in all {
                spawn_drive(shared.clone(), slot.clone(), inv);
            }
        }
    }
}

/// Runs an execution and feeds its completion back; continues with the next execution on
/// this task (see [`drive_steps`] and [`drive_local`]).
pub(super) async fn drive(shared: Arc<Shared>, slot: Arc<RunSlot>, inv: Invocation) {
    drive_spawning(&shared, &slot, inv).await;
    shared.release(slot);
}

/// Drives the executions an input started on this task: none — the run may have ended;
/// one — inline; several — together on this task or, where tasks add parallelism, the
/// others on their own tasks.
/// `shares`: [`shares_task`], as the caller saw it.
pub(super) async fn drive_started(
    shared: &Arc<Shared>,
    slot: &Arc<RunSlot>,
    started: Started,
    shares: bool,
) -> bool {
    match started {
        Started::None => shared.maybe_evict(slot),
        Started::One(first) => drive_steps(shared, slot, first, shares).await,
        Started::Many(all) if shares => {
            drive_local(
                shared,
                None,
                Some(queued(slot, all)),
                None,
                DrivenRun::Borrowed(slot),
            )
            .await
        }
        Started::Many(all) => {
            let mut all = all.into_iter();
            let Some(first) = all.next() else {
                return shared.maybe_evict(slot);
            };
            for other in all {
                spawn_drive(shared.clone(), slot.clone(), other);
            }
            drive_steps(shared, slot, first, shares).await
        }
    }
}

/// Runs `inv` and what its completions start on this task: inline while exactly one
/// execution became ready; where tasks add no parallelism ([`shares_task`]) all of them,
/// through [`drive_local`]; elsewhere the others on their own tasks.
/// Returns whether the run was seen quiet when the driving stopped (`false`: not known).
/// `shares`: [`shares_task`], as the caller saw it.
pub(super) async fn drive_steps(
    shared: &Arc<Shared>,
    slot: &Arc<RunSlot>,
    inv: Invocation,
    shares: bool,
) -> bool {
    if shares {
        drive_local(
            shared,
            Some((slot.clone(), inv)),
            None,
            None,
            DrivenRun::Borrowed(slot),
        )
        .await
    } else {
        // Boxed: the in-memory path keeps the smaller future.
        Box::pin(drive_spawning(shared, slot, inv)).await;
        false
    }
}

/// [`drive_steps`] where tasks add parallelism: runs `inv`, then inline the one execution
/// its completion started, if only one; the others on their own tasks.
pub(super) async fn drive_spawning(shared: &Arc<Shared>, slot: &Arc<RunSlot>, mut inv: Invocation) {
    let mut buffers = CompletionBuffers::default();
    loop {
        // A fork's execution whose inputs the original saw takes its recorded outputs
        // (only a journaled run can be forked).
        let reused = shared.journal && shared.reuse_recorded(slot, &mut inv);
        let mut here = None;
        if !reused && let Some(executor) = shared.executor.get() {
            match executor.run_here() {
                // A free local slot: the body runs on this task, held until it ends.
                Some(local) => here = Some(local),
                None => {
                    // The body runs elsewhere; its completion comes back as an input of the
                    // run.
                    executor.execute(super::executor::work(slot, inv));
                    return;
                }
            }
        }
        let result = if reused {
            Ok(())
        } else {
            shared.execute(slot, &mut inv).await
        };
        drop(here);
        let Some(done) = complete(shared, slot, &mut inv, result, &mut buffers, None) else {
            return;
        };
        let stored = if done.waits {
            buffers.durable().wait().await
        } else {
            Ok(())
        };
        if durable(shared, slot, done.ended, stored).is_none() {
            return;
        }
        match done.next {
            StartedNext::None => {
                shared.keep_buffers(slot, inv);
                let _quiet = shared.maybe_evict(slot);
                return;
            }
            StartedNext::One | StartedNext::TookQueued => {}
            StartedNext::Several => {
                for x in buffers.others.drain(..) {
                    spawn_started(shared.clone(), slot.clone(), x);
                }
            }
        }
        if !shared.opts.inline_single {
            spawn_drive(shared.clone(), slot.clone(), inv);
            return;
        }
        // A long inline chain whose steps never wait would keep this worker busy: let the
        // scheduler run other tasks once this task used its budget.
        tokio::task::consume_budget().await;
    }
}
