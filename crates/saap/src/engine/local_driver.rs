//! The local drivers: on a current-thread runtime with the in-memory store, one loop per run
//! (`Engine::run`) or one per engine (`start_run`, `send`) binds each execution when its turn
//! comes and polls its body in place, parking only the bodies that wait. Same decisions and
//! records as tasks (`tasks`); fewer allocations and wake-ups.

use super::apply::{CompletionBuffers, StartedNext};
use super::body::{complete, durable, end_body};
use super::invocation::Invocation;
use super::local_queue::{Dequeued, Queued, front_of, pop_queued, queue_started, skip_queued};
use super::shared::Shared;
use super::slot::RunSlot;
use crate::workflow::StepFuture;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

/// A body that did not end at its first poll, polled among the run's others.
/// It ends with its outputs in the invocation's `outs`.
pub(super) type Running =
    Pin<Box<dyn Future<Output = (Arc<RunSlot>, Invocation, Result<(), String>)> + Send>>;

/// The executions a per-run local driver has queued or waiting besides the one it runs
/// (boxed: a chain, whose driver never needs them, keeps a small task).
#[derive(Default)]
pub(super) struct Fanout {
    pub(super) queue: VecDeque<Queued>,
    pub(super) waiting: Option<FuturesUnordered<Running>>,
    /// The buffers of an execution that finished, for the next one to bind.
    pub(super) spare: Option<Invocation>,
}

/// Hands executions to the engine's local driver, spawning it when none runs: on a
/// current-thread in-memory engine ([`shares_task`]) a run started with `start_run` (or
/// woken by `send`) costs a queue entry, not a task.
pub(super) fn enqueue_local(shared: &Arc<Shared>, items: impl IntoIterator<Item = Queued>) {
    thread_local! {
        // `thread::current()` counts a reference to the thread's handle: read once per thread.
        static HERE: std::thread::ThreadId = std::thread::current().id();
    }
    let here = HERE.with(|id| *id);
    let spawn = {
        let mut q = shared.local.lock().unwrap_or_else(|p| p.into_inner());
        if q.driving && q.thread != Some(here) {
            drop(q);
            // The driver belongs to another thread's runtime, which runs its tasks only
            // while that thread is inside it: this runtime drives its own runs.
            for item in items {
                spawn_own_driver(shared, item);
            }
            return;
        }
        let before = q.items.len();
        q.items.extend(items);
        if q.items.len() == before {
            return;
        }
        q.thread = Some(here);
        let spawn = !std::mem::replace(&mut q.driving, true);
        (spawn, std::mem::take(&mut q.parked))
    };
    match spawn {
        (true, _) => {
            tokio::spawn(engine_driver(shared.clone()));
        }
        // A permit if the driver is not waiting yet: no wake-up is lost.
        (false, true) => shared.local_wake.notify_one(),
        (false, false) => {}
    }
}

/// A task that drives one run's execution (and what it starts) on the current runtime:
/// [`enqueue_local`]'s way when the engine's driver runs on another thread.
pub(super) fn spawn_own_driver(shared: &Arc<Shared>, item: Queued) {
    let shared = shared.clone();
    tokio::spawn(async move {
        let (slot, inv) = match item {
            Queued::Bound(bound) => *bound,
            Queued::Started(slot, x) => {
                let mut inv = Invocation::empty();
                inv.extract = true;
                shared.bind(&slot, x, &mut inv);
                (slot, inv)
            }
            Queued::Span(s) => {
                // Several of a run: driven from a queue of their own.
                let slot = s.slot.clone();
                let fan = Box::new(Fanout {
                    queue: VecDeque::from([Queued::Span(s)]),
                    ..Fanout::default()
                });
                drive_local(&shared, None, Some(fan), None, DrivenRun::Borrowed(&slot)).await;
                shared.release(slot);
                return;
            }
        };
        drive_local(
            &shared,
            Some((slot.clone(), inv)),
            None,
            None,
            DrivenRun::Borrowed(&slot),
        )
        .await;
        shared.release(slot);
    });
}

/// The engine's local driver: [`drive_local`] over the engine's queue, until it is empty.
pub(super) async fn engine_driver(shared: Arc<Shared>) {
    /// Clears `driving` if the task is dropped mid-way (its runtime shut down), so that
    /// a later `enqueue_local` spawns a new driver.
    struct Dropped<'a>(&'a Shared, bool);
    impl Drop for Dropped<'_> {
        fn drop(&mut self) {
            if self.1 {
                self.0
                    .local
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .driving = false;
            }
        }
    }
    let mut guard = Dropped(&shared, true);
    drive_local(&shared, None, None, Some(&mut guard.1), DrivenRun::None).await;
}

/// Drives executions on this task, in the order they started: `next`, then the queue —
/// the queue of `fan` (one run, `run`, driven by its caller) or, with `engine`,
/// the engine's queue (every run started from other tasks; `engine` is the driver's
/// "still driving" flag, cleared when it stops). Each execution is bound when its turn
/// comes (into the buffers of one that finished) and its body polled at once. A body that
/// ends at that poll — any body that does not wait for I/O — is completed right away: no
/// task, no boxed future, no waker. Bodies that wait are polled together (a
/// `FuturesUnordered`), as tasks would be, and completed as they end. Returns whether the
/// run of `own` was quiet when the driving stopped (`false` without one).
pub(super) async fn drive_local(
    shared: &Arc<Shared>,
    mut next: Option<(Arc<RunSlot>, Invocation)>,
    mut fan: Option<Box<Fanout>>,
    mut engine: Option<&mut bool>,
    mut own: DrivenRun<'_>,
) -> bool {
    let mut buffers = CompletionBuffers::default();
    'drive: loop {
        // An execution to complete: one whose body ended at its first poll, or a waiting
        // one that ended.
        let (slot, mut inv, mut result) = 'ran: {
            let (slot, mut inv) = match next.take() {
                Some(cur) => cur,
                None => {
                    let queued = match engine.as_deref_mut() {
                        Some(driving) => {
                            let mut q = shared.local.lock().unwrap_or_else(|p| p.into_inner());
                            let item = pop_queued(&mut q.items);
                            let idle = fan
                                .as_ref()
                                .is_none_or(|f| f.waiting.as_ref().is_none_or(|w| w.is_empty()));
                            if item.is_none() && idle {
                                q.driving = false;
                                *driving = false;
                                break 'drive;
                            }
                            // Nothing queued: the driver waits for its bodies or new items.
                            q.parked = item.is_none();
                            item
                        }
                        None => fan.as_mut().and_then(|f| pop_queued(&mut f.queue)),
                    };
                    match queued {
                        Some(Dequeued::Bound(bound)) => *bound,
                        Some(Dequeued::Started(slot, x)) => {
                            let mut inv = fan
                                .as_mut()
                                .and_then(|f| f.spare.take())
                                .unwrap_or_else(Invocation::empty);
                            // Its body starts here: its inputs are extracted under the lock.
                            inv.extract = true;
                            shared.bind(&slot, x, &mut inv);
                            (slot, inv)
                        }
                        // Nothing to start: wait for a body that waits (or, for the engine's
                        // driver, for new work).
                        None => {
                            let Some(w) = fan.as_mut().and_then(|f| f.waiting.as_mut()) else {
                                break 'drive;
                            };
                            if engine.is_some() {
                                tokio::select! {
                                    ran = w.next() => match ran {
                                        Some(ran) => break 'ran ran,
                                        None => continue 'drive,
                                    },
                                    () = shared.local_wake.notified() => continue 'drive,
                                }
                            }
                            match w.next().await {
                                Some(ran) => break 'ran ran,
                                None => break 'drive,
                            }
                        }
                    }
                }
            };
            match start_and_poll(shared, &slot, &mut inv, false).await {
                Ok(r) => (slot, inv, r),
                Err(body) => {
                    park(shared, &mut fan, slot, inv, body);
                    continue 'drive;
                }
            }
        };
        // Complete it, then run what it started: a chain runs here, in place, for as long
        // as each body ends at its first poll.
        loop {
            // The execution this driver runs next if the completion starts none: the front of
            // a run's own queue, when of the same run, is bound under the completion's lock.
            let queued = match &fan {
                Some(f) if engine.is_none() => front_of(&f.queue, &slot),
                _ => None,
            };
            // The next execution's body starts here: its inputs are extracted under the lock.
            inv.extract = true;
            // A refused completion (the run stopped): the others still complete, refused alike.
            let Some(done) = complete(shared, &slot, &mut inv, result, &mut buffers, queued) else {
                let _quiet = shared.maybe_evict(&slot);
                own.let_go(shared, slot);
                continue 'drive;
            };
            let stored = if done.waits {
                Box::pin(buffers.durable().wait()).await
            } else {
                Ok(())
            };
            if durable(shared, &slot, done.ended, stored).is_none() {
                own.let_go(shared, slot);
                continue 'drive;
            }
            match done.next {
                StartedNext::None => {
                    // The engine's driver lives on: it keeps the buffers for the next
                    // execution it binds (a run's own driver only when it has a fan-out).
                    match fan.as_mut() {
                        Some(f) => f.spare = Some(inv),
                        None if engine.is_some() => {
                            fan.get_or_insert_with(Box::default).spare = Some(inv);
                        }
                        // The run's own driver, nothing else queued or waiting: it stops
                        // here, and looks whether the run is quiet in the same locked section.
                        None if own.is(&slot) => {
                            return match own {
                                DrivenRun::Handed { back, .. } => {
                                    let (quiet, evict) =
                                        shared.keep_buffers_and_see_end(&slot, inv);
                                    // (Any reference kept before is let go: this one is
                                    // the caller's now.)
                                    *back = Some((slot, evict));
                                    quiet
                                }
                                _ => {
                                    let quiet = shared.keep_buffers_and_evict(&slot, inv);
                                    // Not the last reference (the caller holds one):
                                    // nothing to recycle, no `release` call.
                                    drop(slot);
                                    quiet
                                }
                            };
                        }
                        None => shared.keep_buffers(&slot, inv),
                    }
                    // The run may have ended (nothing else of it running); a run's own
                    // driver looks once, when it stops.
                    if engine.is_some() {
                        let _quiet = shared.maybe_evict(&slot);
                    }
                    own.let_go(shared, slot);
                    continue 'drive;
                }
                StartedNext::One => {}
                StartedNext::TookQueued => {
                    // `inv` holds the queue's front now.
                    if let Some(f) = fan.as_mut() {
                        skip_queued(&mut f.queue);
                    }
                }
                StartedNext::Several => match engine {
                    Some(_) => {
                        let mut q = shared.local.lock().unwrap_or_else(|p| p.into_inner());
                        queue_started(&mut q.items, &slot, &mut buffers.others);
                    }
                    None => {
                        let f = fan.get_or_insert_with(Box::default);
                        queue_started(&mut f.queue, &slot, &mut buffers.others);
                    }
                },
            }
            // A long chain whose steps never wait would keep this worker busy: let the
            // scheduler run other tasks once this task used its budget.
            match start_and_poll(shared, &slot, &mut inv, true).await {
                Ok(r) => result = r,
                Err(body) => {
                    park(shared, &mut fan, slot, inv, body);
                    continue 'drive;
                }
            }
        }
    }
    // Whether the run of `own` is quiet (`false` without one).
    match own {
        DrivenRun::None => false,
        DrivenRun::Borrowed(slot) => shared.maybe_evict(slot),
        DrivenRun::Handed { back, .. } => back
            .as_ref()
            .is_some_and(|(slot, _)| shared.maybe_evict(slot)),
    }
}

/// The run a per-run [`drive_local`] drives for its caller (none for the engine's driver).
pub(super) enum DrivenRun<'a> {
    None,
    /// The caller holds a reference to the run's slot: the driver sees whether the run is
    /// quiet, and evicts it, when it stops.
    Borrowed(&'a Arc<RunSlot>),
    /// The caller ([`Engine::run`]) handed its reference to the run's slot over with the
    /// run's first execution (no reference added and dropped for the driver) and gets one
    /// back in `back`, with whether the driver stopped with the run quiet and left its
    /// eviction to the caller ([`Shared::evict_and_release`]). `run`: the slot's address.
    Handed {
        run: usize,
        back: &'a mut Option<(Arc<RunSlot>, bool)>,
    },
}

impl DrivenRun<'_> {
    /// Whether `slot` is the run's.
    pub(super) fn is(&self, slot: &Arc<RunSlot>) -> bool {
        match self {
            DrivenRun::None => false,
            DrivenRun::Borrowed(r) => Arc::ptr_eq(r, slot),
            DrivenRun::Handed { run, .. } => Arc::as_ptr(slot) as usize == *run,
        }
    }

    /// Lets go of a reference to a slot: kept for the caller when it is the first of a
    /// handed run's that the driver lets go of, else [`Shared::release`]d.
    pub(super) fn let_go(&mut self, shared: &Shared, slot: Arc<RunSlot>) {
        if let DrivenRun::Handed { run, back } = self
            && back.is_none()
            && Arc::as_ptr(&slot) as usize == *run
        {
            **back = Some((slot, false));
            return;
        }
        shared.release(slot);
    }
}

/// Starts the body of `inv` (bound) and polls it once: whether it returned (its outputs in
/// `inv.outs`) or failed, or the body, which waits. With `budget`, first takes a unit of
/// the task's cooperative budget (a long chain whose steps never wait would otherwise keep
/// its worker busy): once the task used its budget, it yields before starting the body. A
/// plain future, not an `async fn`: a step costs no state machine of its own. Awaited, it
/// starts the body once (it is ready after the poll that starts it).
pub(super) fn start_and_poll<'a>(
    shared: &'a Arc<Shared>,
    slot: &'a Arc<RunSlot>,
    inv: &'a mut Invocation,
    budget: bool,
) -> impl Future<Output = Result<Result<(), String>, StepFuture>> + 'a {
    std::future::poll_fn(move |cx| {
        if budget {
            // Nothing is started before the budget allows it: a yield loses no work.
            std::task::ready!(tokio::task::coop::poll_proceed(cx)).made_progress();
        }
        Poll::Ready(shared.first_poll(slot, inv, cx))
    })
}

/// Parks a body that waits among the driver's others, polled with them until it ends.
pub(super) fn park(
    shared: &Arc<Shared>,
    fan: &mut Option<Box<Fanout>>,
    slot: Arc<RunSlot>,
    mut inv: Invocation,
    body: StepFuture,
) {
    let s = shared.clone();
    let step = inv.step;
    let mut body = Some(body);
    let parked: Running = Box::pin(async move {
        let r = std::future::poll_fn(|cx| s.poll_body(step, &mut body, cx)).await;
        end_body(&mut inv);
        let r = r.map(|outs| inv.outs = outs);
        (slot, inv, r)
    });
    fan.get_or_insert_with(Box::default)
        .waiting
        .get_or_insert_with(FuturesUnordered::new)
        .push(parked);
}

/// Invocations made by an input, queued for a per-run local driver.
pub(super) fn queued(slot: &Arc<RunSlot>, all: Vec<Invocation>) -> Box<Fanout> {
    Box::new(Fanout {
        queue: all.into_iter().map(|inv| inv.queued(slot)).collect(),
        ..Fanout::default()
    })
}
