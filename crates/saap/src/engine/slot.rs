//! One run as the engine holds it: a [`RunSlot`] (its names, run key and a lock) and
//! the [`RunState`] behind the lock — the core's `Run`, payloads by sequence, what has been
//! handed to the store, display counts, reusable buffers ([`Scratch`]) and waiters. Also
//! the future that waits until a run is quiet ([`UntilQuiet`]). Must not apply inputs or run
//! bodies: it is the state those work on.

use super::fork_reuse::ForkReuse;
use super::ids::RunIdText;
use super::precondition::PreCache;
use super::run_names::{RunNames, Thread};
use super::waiters::Waiters;
use crate::event::Payload;
use crate::params::{BoundEvent, OutEvent};
use parking_lot::{Mutex as RunMutex, MutexGuard};
use saap_dispatch::run::timers::TimerState;
use saap_dispatch::{EventId, ExecutionId, NewEvent, Run};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use tokio::sync::watch;

/// Largest run (logged events) whose slot is kept for reuse.
pub(super) const SPARE_SLOT_MAX_EVENTS: usize = 256;

/// What an evicted run held that grows as a run executes — the core's tables, the
/// payload list, the scratch buffers — emptied, with their allocations. A run that starts
/// executing takes them over instead of growing its own from their first-dispatch sizes
/// (one reallocation each) and making its scratch buffers (several allocations).
pub(super) struct SpareTables {
    pub(super) core: saap_dispatch::RunTables,
    pub(super) payloads: Vec<Payload>,
    pub(super) scratch: Option<Box<Scratch>>,
}

/// One run: the core state behind its lock, and a version counter bumped on each change.
pub(crate) struct RunSlot {
    /// The run's id and its thread's.
    pub(super) names: RunNames,
    /// Seeds the derived ids of this run's outputs.
    pub run_key: u64,
    pub(super) state: RunMutex<RunState>,
    /// Bumped on every change while someone watches (test runner, snapshots in a loop);
    /// made by the first watcher (a watch channel is ~350 bytes per run otherwise).
    pub(super) version: std::sync::OnceLock<watch::Sender<u64>>,
}

pub(crate) struct RunState {
    pub run: Run,
    /// Payload of each logged event, by sequence number.
    pub payloads: Vec<Payload>,
    pub(super) journal_len: u64,
    pub(super) records_sent: usize,
    pub(super) ended_sent: bool,
    /// The input that ended the run is durable.
    pub(super) end_durable: bool,
    pub(super) created: bool,
    /// An engine-side failure (storage) that stopped the run.
    pub failure: Option<Box<str>>,
    /// What the run's executions showed (made by the first display event: most runs show
    /// none, and a run in flight holds 8 bytes for it, not 48).
    pub(super) displays: Option<Box<Displays>>,
    /// Buffers of a run that executes (made by its first completion: a run waiting for
    /// its first step holds none).
    pub(super) scratch: Option<Box<Scratch>>,
    /// Typed inputs of the last precondition evaluations (live runs only; made by the first
    /// evaluation). Apart from the scratch buffers, which a completion uses while the core
    /// evaluates preconditions.
    pub(super) pre_cache: Option<Box<PreCache>>,
    /// Tasks waiting until the run is quiet ([`RunSlot::until_quiet`]).
    pub(super) waiters: Waiters,
    /// The payloads of the run's pending timers and when it is queued (made by its first
    /// timer: most runs set none).
    pub(super) timers: Option<Box<RunTimers>>,
    /// The signal its running bodies watch for the run's cancellation (made when a body
    /// first asks: `StepCtx::cancellation`).
    pub(super) cancel: Option<tokio_util::sync::CancellationToken>,
    /// Where the run reports its end, when it is an awaited child of another run (set by
    /// the parent's engine, see `delegation`).
    pub(super) parent: Option<Box<ParentLink>>,
    /// The run that delegated it, awaited or detached, as its store's run record keeps it
    /// (set before its first entry is stored; see `delegation`).
    pub(super) delegated_by: Option<Box<crate::backend::RunParent>>,
    /// What running executions' model calls used so far, for the run's token and cost
    /// budget (made by the first report: `StepCtx::report_usage`), taken with each one's
    /// completion. Boxed: 8 bytes in every run instead of a vector's 24, for what most runs
    /// never make.
    #[allow(clippy::box_collection)]
    pub(super) usage: Option<Box<Vec<Used>>>,
    /// A fork's table of the original's outputs its executions may take instead of running
    /// (set by `Engine::fork` before the fork runs anything; `None` for every other run).
    pub(super) fork_reuse: Option<Box<ForkReuse>>,
}

/// What one attempt of an execution's model calls used so far.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Used {
    pub execution: ExecutionId,
    pub attempt: u32,
    pub tokens: u64,
    pub cost_micros: u64,
}

impl RunState {
    /// Counts what a model call of `execution` (attempt `attempt`) used.
    pub(super) fn add_usage(
        &mut self,
        execution: ExecutionId,
        attempt: u32,
        tokens: u64,
        cost_micros: u64,
    ) {
        let list = self.usage.get_or_insert_with(Default::default);
        match list
            .iter_mut()
            .find(|u| u.execution == execution && u.attempt == attempt)
        {
            Some(u) => {
                u.tokens = u.tokens.saturating_add(tokens);
                u.cost_micros = u.cost_micros.saturating_add(cost_micros);
            }
            None => list.push(Used {
                execution,
                attempt,
                tokens,
                cost_micros,
            }),
        }
    }

    /// Takes what `execution` used in the attempt that completes (an older attempt's count,
    /// from before a retry, is dropped with it).
    pub(super) fn take_usage(&mut self, execution: ExecutionId, attempt: u32) -> Option<Used> {
        let list = self.usage.as_mut()?;
        let mut found = None;
        list.retain(|u| {
            if u.execution != execution {
                return true;
            }
            if u.attempt == attempt {
                found = Some(*u);
            }
            false
        });
        if list.is_empty() {
            self.usage = None;
        }
        found
    }
}

/// Where a child run reports its end: its parent's engine and run (see `delegation`).
pub(crate) struct ParentLink {
    /// The parent's engine.
    pub(super) engine: ParentEngine,
    pub(super) run_id: Arc<str>,
    /// How many runs are above it (1: a child of a root run).
    pub(super) depth: u32,
    /// The stop event type its request is owed (`expecting`): an end without it is
    /// reported as an unmet obligation.
    pub(super) expects: Option<Box<str>>,
}

/// The engine of a child run's parent.
#[derive(Clone)]
pub(crate) enum ParentEngine {
    /// One of this process (its `Shared`, held as `Any`: the run's state does not know the
    /// engine's shared state, which knows it).
    /// `child`: its number among the parent's children.
    Local {
        engine: std::sync::Weak<dyn std::any::Any + Send + Sync>,
        child: u32,
    },
    /// The workers of agent class `class`, reached through the engine's remote agents (see
    /// `remote`; the parent finds the child by its run id, the request's).
    Remote { class: Arc<str> },
}

/// A run's timers as the engine holds them (the core holds when they are due).
#[derive(Default)]
pub(crate) struct RunTimers {
    /// The payload of each timer's event by timer number (the core's), until it fires.
    pub(super) payloads: Vec<Option<Payload>>,
    /// The due time the engine's timer queue last had for this run.
    pub(super) queued_due: Option<u64>,
}

/// Moves the payloads of the run's timers due at `now_ns` to `pending` (the events a clock
/// reading is about to log).
pub(super) fn take_due_payloads(
    run: &Run,
    timers: &mut Option<Box<RunTimers>>,
    now_ns: u64,
    pending: &mut Vec<(EventId, Payload)>,
) {
    let Some(t) = timers.as_mut() else { return };
    for (i, timer) in run.timers().iter().enumerate() {
        if timer.state == TimerState::Pending
            && timer.due_ns <= now_ns
            && let Some(p) = t.payloads.get_mut(i).and_then(Option::take)
        {
            pending.push((timer.event_id, p));
        }
    }
}

/// Keeps the payloads of the timers just set, numbered from `first`, until they fire (none
/// on a run that ended: its timers were dropped at once).
pub(super) fn keep_timer_payloads(
    st: &mut RunState,
    first: usize,
    payloads: impl IntoIterator<Item = Payload>,
) {
    if !st.run.is_terminated() {
        let kept = &mut st.timers.get_or_insert_with(Default::default).payloads;
        kept.resize_with(first, || None);
        kept.extend(payloads.into_iter().map(Some));
    }
}

/// The future of [`RunSlot::until_quiet`]: registered with the run (under its own address,
/// stable while pinned) while it waits, and unregistered when dropped before the run is
/// quiet.
pub(super) struct UntilQuiet<'a> {
    pub(super) slot: &'a RunSlot,
    pub(super) registered: std::cell::Cell<bool>,
    pub(super) _pinned: std::marker::PhantomPinned,
}

impl UntilQuiet<'_> {
    /// The key of this future's registration: its address (pinned from its first poll to
    /// its drop, and distinct from any other live future's).
    pub(super) fn key(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }
}

impl Future for UntilQuiet<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<()> {
        let this = self.into_ref().get_ref();
        let mut st = this.slot.lock();
        if st.is_quiet() {
            if this.registered.replace(false) {
                st.waiters.remove(this.key());
            }
            return Poll::Ready(());
        }
        st.waiters.register(this.key(), cx.waker());
        this.registered.set(true);
        Poll::Pending
    }
}

impl Drop for UntilQuiet<'_> {
    fn drop(&mut self) {
        if self.registered.get() {
            self.slot.lock().waiters.remove(self.key());
        }
    }
}

/// The display events a run's executions showed.
#[derive(Default)]
pub(super) struct Displays {
    /// Display events shown by executions: (seq, execution).
    pub(super) by: Vec<(u32, ExecutionId)>,
    /// Per execution that showed display events: the attempt and how many it showed (a
    /// display event's id derives from that number: an attempt re-run after a crash shows
    /// the same ids, which the core drops as duplicates).
    pub(super) counts: Vec<(ExecutionId, u32, u32)>,
}

/// Buffers a run reuses from one input to the next.
#[derive(Default)]
pub(super) struct Scratch {
    /// Reused buffers of `apply` (no allocation per input once warm).
    pub(super) pending: Vec<(EventId, Payload)>,
    /// Buffers of the run's last finished execution, reused by the next one it starts (an
    /// inline chain allocates no input or output vectors per step). Empty and small.
    pub(super) spare_inputs: Vec<Vec<BoundEvent>>,
    pub(super) spare_outs: Vec<OutEvent>,
    /// The core's view of a completion's outputs, handed to `Run::complete_returned` (kept
    /// empty between completions: no vector per completion).
    pub(super) news: Vec<NewEvent>,
    /// The ids of the run's outputs, made for its run key (see [`Scratch::output_ids`]).
    pub(super) ids: Option<saap_dispatch::OutputIds>,
}

impl Scratch {
    pub(super) fn clear(&mut self) {
        let Scratch {
            pending,
            spare_inputs,
            spare_outs,
            news,
            ids: _,
        } = self;
        pending.clear();
        // Emptied by the executions that used them; emptied again in case one did not
        // finish. The vectors stay, for the run that reuses the slot.
        spare_inputs.iter_mut().for_each(Vec::clear);
        spare_outs.clear();
        news.clear();
    }
}

impl Scratch {
    /// The ids of the outputs of the run keyed `run_key` (made once per run: the slot and
    /// its scratch may serve another run since).
    #[inline]
    pub(super) fn output_ids(&mut self, run_key: u64) -> saap_dispatch::OutputIds {
        match self.ids {
            Some(ids) if ids.run_key() == run_key => ids,
            _ => *self.ids.insert(saap_dispatch::OutputIds::new(run_key)),
        }
    }
}

/// A run's scratch buffers, made on first use.
pub(super) fn scratch(s: &mut Option<Box<Scratch>>) -> &mut Scratch {
    s.get_or_insert_with(Box::default)
}

impl RunState {
    /// Frees what an ended run that left the engine holds (see [`Run::forget_evidence`]);
    /// it stays ended, and quiet. The growing tables are handed back, emptied, for
    /// another run ([`Shared::stash`]).
    pub(super) fn forget(&mut self) -> SpareTables {
        let core = self.run.take_tables();
        let mut payloads = std::mem::take(&mut self.payloads);
        Payload::recycle_all(&mut payloads);
        self.displays = None;
        self.pre_cache = None;
        let mut scratch = self.scratch.take();
        if let Some(s) = scratch.as_mut() {
            s.clear();
        }
        SpareTables {
            core,
            payloads,
            scratch,
        }
    }

    /// Takes over `spare`'s tables where they are larger than this run's (a run about to
    /// execute for the first time: it holds its first-dispatch tables and no scratch).
    pub(super) fn adopt(&mut self, spare: &mut SpareTables) {
        self.run.grow_into(&mut spare.core);
        if spare.payloads.capacity() > self.payloads.capacity() {
            spare.payloads.append(&mut self.payloads);
            std::mem::swap(&mut self.payloads, &mut spare.payloads);
        }
        if self.scratch.is_none() {
            self.scratch = spare.scratch.take();
        }
    }

    /// The display events shown by executions, (seq, execution), to add to.
    pub(super) fn shown_by(&mut self) -> &mut Vec<(u32, ExecutionId)> {
        &mut self.displays.get_or_insert_with(Box::default).by
    }

    /// The number of the next display event of `execution`'s `attempt` (0, 1, ...).
    pub(crate) fn next_display(&mut self, execution: ExecutionId, attempt: u32) -> u32 {
        let counts = &mut self.displays.get_or_insert_with(Box::default).counts;
        match counts.iter_mut().find(|(x, _, _)| *x == execution) {
            Some((_, a, n)) if *a == attempt => {
                *n += 1;
                *n - 1
            }
            Some(entry) => {
                *entry = (execution, attempt, 1);
                0
            }
            None => {
                counts.push((execution, attempt, 1));
                0
            }
        }
    }

    /// The state of a new run, keeping the buffers' allocations (`Run::reset` for the core).
    /// Lists every field, so that a new one cannot be forgotten here.
    pub(super) fn reset(&mut self, run_key: u64) {
        let RunState {
            run,
            payloads,
            journal_len,
            records_sent,
            ended_sent,
            end_durable,
            created,
            failure,
            displays,
            scratch,
            pre_cache,
            waiters,
            timers,
            cancel,
            parent,
            delegated_by,
            usage,
            fork_reuse,
        } = self;
        run.reset(run_key);
        Payload::recycle_all(payloads);
        *journal_len = 0;
        *records_sent = 0;
        *ended_sent = false;
        *end_durable = false;
        *created = false;
        *failure = None;
        if let Some(d) = displays {
            d.by.clear();
            d.counts.clear();
        }
        if let Some(s) = scratch {
            s.clear();
        }
        *pre_cache = None;
        *timers = None;
        *cancel = None;
        *parent = None;
        *delegated_by = None;
        *usage = None;
        *fork_reuse = None;
        // A reused slot had no holder left, so no waiter either (a waiter unregisters
        // when it stops waiting): nothing to drop, usually.
        if waiters.first.is_some() || waiters.more.is_some() {
            *waiters = Waiters::default();
        }
    }

    /// Small enough for its slot to be kept for a new run (a larger run's tables go to
    /// the stash instead, see [`Shared::release`]).
    pub(super) fn fits_a_spare_slot(&self) -> bool {
        self.run.log().len() <= SPARE_SLOT_MAX_EVENTS
            && self.payloads.capacity() <= SPARE_SLOT_MAX_EVENTS
    }

    /// How many runs are above this one (0: it is no run's awaited child).
    pub(super) fn delegation_depth(&self) -> u32 {
        self.parent.as_ref().map_or(0, |p| p.depth)
    }

    /// Ended (and the end is durable) with nothing running, or stopped by a failure.
    pub(super) fn is_quiet(&self) -> bool {
        self.failure.is_some()
            || (self.end_durable && self.run.is_terminated() && self.run.running().next().is_none())
    }
}

impl RunSlot {
    pub(super) fn new(id: RunIdText, thread: Thread, run: Run) -> RunSlot {
        RunSlot {
            names: RunNames::new(id, thread),
            run_key: run.run_key(),
            state: RunMutex::new(RunState {
                run,
                payloads: Vec::new(),
                journal_len: 0,
                records_sent: 0,
                ended_sent: false,
                end_durable: false,
                created: false,
                failure: None,
                displays: None,
                scratch: None,
                pre_cache: None,
                waiters: Waiters::default(),
                timers: None,
                cancel: None,
                parent: None,
                delegated_by: None,
                usage: None,
                fork_reuse: None,
            }),
            version: std::sync::OnceLock::new(),
        }
    }
    /// Resets this slot (of an ended run nothing refers to any more) for a new run, whose
    /// ids and key [`RunSlot::rename`] gives it. Its run id and thread are still the ended
    /// run's until then.
    pub(super) fn recycle(&mut self) {
        self.state.get_mut().reset(0);
        // Made by a watcher only (most runs have none): nothing to drop, usually.
        if self.version.get().is_some() {
            self.version = std::sync::OnceLock::new();
        }
    }
    /// Makes this recycled slot the slot of a new run; returns the ended run's id text (to
    /// drop outside the caller's lock).
    pub(super) fn rename(
        &mut self,
        id: [u8; 24],
        thread: Thread,
        run_key: u64,
    ) -> (RunIdText, std::sync::OnceLock<Arc<str>>) {
        self.run_key = run_key;
        self.state.get_mut().run.rekey(run_key);
        self.names.rename(id, thread)
    }
    /// The run's id.
    #[inline]
    pub(crate) fn run_id(&self) -> &Arc<str> {
        self.names.run_id()
    }
    /// The run's id, as the text of the run's id (its bytes; ASCII for engine-made ids).
    #[inline]
    pub(crate) fn id_text(&self) -> &RunIdText {
        self.names.id_text()
    }
    /// The run's id as a new `String`.
    pub(crate) fn run_id_string(&self) -> String {
        self.names.run_id_string()
    }
    /// The id of the run's thread.
    #[inline]
    pub(crate) fn thread_id(&self) -> &Arc<str> {
        self.names.thread_id()
    }
    pub(crate) fn lock(&self) -> MutexGuard<'_, RunState> {
        // The state is only mutated by the core's transition functions, which do not panic
        // on input: a lock that does not poison needs no check when it is taken or let go.
        self.state.lock()
    }
    /// Inlined: every completion calls it, and most runs were never watched (one look).
    #[inline]
    pub(super) fn bump(&self) {
        if let Some(tx) = self.version.get() {
            bump_watched(tx);
        }
    }
    /// Waits until the run is quiet ([`RunState::is_quiet`]): one look under the run's
    /// lock, registering the waiter there if it is not (see [`Waiters`]).
    pub(super) fn until_quiet(&self) -> UntilQuiet<'_> {
        UntilQuiet {
            slot: self,
            registered: std::cell::Cell::new(false),
            _pinned: std::marker::PhantomPinned,
        }
    }

    /// Wakes the run's waiters if it is quiet.
    pub(super) fn wake_if_quiet(&self) {
        let mut st = self.lock();
        if st.is_quiet() {
            let woken = st.waiters.take();
            drop(st);
            woken.wake();
        }
    }
}

/// [`RunSlot::bump`] of a run that was watched once.
#[cold]
#[inline(never)]
pub(super) fn bump_watched(tx: &watch::Sender<u64>) {
    // A watcher checks the state after subscribing, so skipping the notification when
    // nobody watches loses no change.
    if tx.receiver_count() > 0 {
        tx.send_modify(|v| *v += 1);
    }
}

impl crate::backend::LazyRunId for RunSlot {
    fn run_id(&self) -> &Arc<str> {
        RunSlot::run_id(self)
    }
}
