//! The engine: drives one `saap_dispatch::Run` per run over a [`Backend`]. It makes no
//! dispatch decision itself (DESIGN §2): it feeds inputs to the core in arrival order (one
//! lock per run), persists what the core decided, and only then runs the step bodies the
//! core started — on tokio tasks, or inline when exactly one step became ready. Where
//! tasks add no parallelism (current-thread runtime, in-memory store) a *local driver*
//! runs them instead: one loop per run for `Engine::run` (on the caller's task) and one per
//! engine for `start_run`/`send`, which binds each execution when its turn comes and polls
//! its body in place, parking only the bodies that wait.
//!
//! Flow of one input (an outside event, a completion, a retry after a crash):
//! 1. lock the run; apply the input to the core; collect the new records and started
//!    executions; hand the journal entry to the backend (in journal order); unlock;
//! 2. wait until the entry is durable;
//! 3. run the started executions; their completions come back as step 1.

// Entry points for engines that share runs between processes (the `nats` engine): start a run
// under a given id, adopt a run from its journal, hand a run over.
mod distributed;
pub use distributed::{LocalSlot, StepExecutor, Work};

use crate::backend::{
    Backend, Pending, PersistBatch, RunMeta, StoreError, StoredEvent, StoredInput, StoredRun,
};
use crate::context::{ContextError, NewCtx, StepCtx};
use crate::event::{Event, Payload, PayloadError};
use crate::params::{BoundEvent, EventName, OutEvent};
use crate::snapshot::RunSnapshot;
use crate::workflow::{StepFuture, StepImpl, Workflow};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use parking_lot::{Mutex as RunMutex, MutexGuard};
use saap_dispatch::derived_event_id;
use saap_dispatch::ids::Seq;
use saap_dispatch::ids::run_key;
use saap_dispatch::run::{Bound, CompleteError, EventTy, ExecState};
use saap_dispatch::spec::ParamKind;
use saap_dispatch::{
    Appended, EventId, EventKind, ExecutionId, NewEvent, NewEventType, Origin, Outcome,
    PreconditionCall, PreconditionEvaluator, Run, StepIdx,
};
use saap_protocol::{DecodeError, DecodeLimits, EventEnvelope};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::task::Poll;
use tokio::sync::watch;

/// Engine errors. Each says what was wrong and what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    #[error(
        "SAAP-E001: no run `{run_id}` in this engine; start a run first (Engine::start_run) or check the run id"
    )]
    UnknownRun { run_id: String },
    #[error(
        "SAAP-E002: `{name}` is not a start event, so it cannot begin a run; start with a StartEvent subtype (e.g. UserMessageEvent) and send `{name}` afterwards"
    )]
    NotAStartEvent { name: String },
    #[error(
        "SAAP-E003: event `{name}` is {size} bytes, more than the limit of {max}; send large data by reference (an id or URL), or raise EngineOptions::max_event_bytes"
    )]
    EventTooLarge {
        name: String,
        size: usize,
        max: usize,
    },
    #[error(
        "SAAP-E004: event type `{name}` is not part of workflow `{workflow}`; declare it with `.event::<T>()` or send it to the agent that takes it"
    )]
    UnknownEventType { name: String, workflow: String },
    #[error("SAAP-E005: the event is not valid: {0}")]
    Decode(#[from] DecodeError),
    #[error("SAAP-E006: {0}")]
    Payload(#[from] PayloadError),
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("SAAP-E007: run `{run_id}` cannot be resumed: {detail}")]
    Replay { run_id: String, detail: String },
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
    #[error(
        "SAAP-E008: the dispatch core refused an input for run `{run_id}`: {detail}; this is an engine bug, please report it with the run's timeline"
    )]
    Core { run_id: String, detail: String },
}

impl EngineError {
    pub fn code(&self) -> &'static str {
        match self {
            EngineError::UnknownRun { .. } => "SAAP-E001",
            EngineError::NotAStartEvent { .. } => "SAAP-E002",
            EngineError::EventTooLarge { .. } => "SAAP-E003",
            EngineError::UnknownEventType { .. } => "SAAP-E004",
            EngineError::Decode(_) => "SAAP-E005",
            EngineError::Payload(_) => "SAAP-E006",
            EngineError::Store(e) => e.code(),
            EngineError::Replay { .. } => "SAAP-E007",
            EngineError::Core { .. } => "SAAP-E008",
            EngineError::Config(e) => e.code(),
        }
    }
}

/// Engine settings.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Largest outside event accepted, in bytes of JSON (default 1 MiB).
    pub max_event_bytes: usize,
    /// Run a step on the completing task when it is the only one that became ready, and on
    /// a current-thread runtime with the in-memory store let one driver poll a run's bodies
    /// in place (default true). With `false`, every execution runs on its own task.
    pub inline_single: bool,
    /// Keep ended runs in memory so that they can be inspected (default true). With
    /// `false`, a run leaves the engine's memory once it ended and no execution of it is
    /// running; the embedded store keeps them all. (`Engine::open` loads live runs only
    /// either way; [`Engine::stored_snapshot`] reads an ended one from the store.)
    pub keep_ended_runs: bool,
    /// With `keep_ended_runs: false`: the most bytes of an ended large run's tables (a
    /// fan-out of more than 256 events) the engine keeps for the next large run (default
    /// 16 MiB; 0 keeps none). Freed and made again, a 10,000-item fan-out's ~4 MB of
    /// tables go back to the system and are faulted in again by every such run; kept, an
    /// idle engine holds them.
    pub kept_table_bytes: usize,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            max_event_bytes: 1024 * 1024,
            inline_single: true,
            keep_ended_runs: true,
            kept_table_bytes: 16 << 20,
        }
    }
}

/// What `Engine::open` found in the store.
#[derive(Debug, Default)]
pub struct Recovery {
    /// Live runs rebuilt from their journals. (Ended runs are not loaded: they are read on
    /// demand, [`Engine::stored_snapshot`].)
    pub resumed_runs: usize,
    /// Executions that had started but not completed, now running again.
    pub retried_executions: usize,
    /// Runs that could not be rebuilt (they stay in the store untouched).
    pub failed: Vec<EngineError>,
}

/// The runtime: runs one workflow's runs. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    pub(crate) shared: Arc<Shared>,
}

pub(crate) struct Shared {
    pub workflow: Workflow,
    /// This engine's entry in the registry its steps' contexts find it by.
    ctx_ref: crate::context::EngineRef,
    /// `backend.wants_journal()`, asked once.
    journal: bool,
    /// `CompiledSpec::fingerprint`, computed once.
    fingerprint: u64,
    /// Type names by type id (shared into bound events).
    type_names: Arc<[EventName]>,
    pub backend: Arc<dyn Backend>,
    runs: RwLock<Runs>,
    /// Type ids by name (FNV; the spec's own index uses SipHash).
    type_ids: HashMap<Box<str>, saap_dispatch::TypeId, FnvBuild>,
    /// Per step: the types it declares as outputs, looked up before `type_ids` (a step
    /// returns one of a few types: comparing a short name beats hashing it).
    out_types: Vec<OutTypes>,
    /// The start event types that have a Rust type, by its name: a typed start event's
    /// name is compared by address with these before `type_ids` is looked up.
    start_types: Box<[(&'static str, saap_dispatch::TypeId)]>,
    opts: EngineOptions,
    ids: IdGen,
    /// Where started executions go instead of running here (set by a distributed engine
    /// whose bodies run on any worker, see `distributed.rs`).
    executor: std::sync::OnceLock<Arc<dyn distributed::StepExecutor>>,
    /// How many slots `runs` keeps for new runs, read without its lock (written under it): a run
    /// started while none is kept, or a slot let go while the list is full, takes no lock.
    /// A stale count only costs a lock, or one slot not reused.
    spare_slot_count: AtomicUsize,
    /// Tables of runs evicted while a waiter still held their slot (many runs in flight),
    /// for runs about to execute for the first time (see [`Shared::adopt_spare`]). At most
    /// [`SPARE_TABLES`].
    spare_tables: Mutex<Vec<SpareTables>>,
    /// The tables of the last evicted run too large for those (a large fan-out's), for the
    /// next large fan-out (see [`Shared::adopt_large`]): one set, at most
    /// [`EngineOptions::kept_table_bytes`] (freed and made again, a 10,000-item fan-out's
    /// tables cost ~1,100 page faults per run, measured).
    large_spare: Mutex<Option<SpareTables>>,
    /// Executions for the engine's local driver, and its wake-up (see `enqueue_local`).
    local: Mutex<LocalQueue>,
    local_wake: tokio::sync::Notify,
}

/// The runs an engine holds, by id.
type RunTable = std::collections::HashSet<Held, RunIdBuild>;

/// The runs an engine holds and the slots it keeps for new runs, under one lock: a new run
/// takes a kept slot and is held in one locked section.
#[derive(Default)]
struct Runs {
    held: RunTable,
    /// Slots of evicted runs that nothing referred to any more, reset for new runs (their
    /// core run and buffers keep their allocations). At most [`SPARE_SLOTS`].
    spare: Vec<Arc<RunSlot>>,
}

/// A run table entry: a slot, looked up by its run id (the table holds no second reference
/// to the id: one atomic increment at insertion and one decrement at removal fewer per run).
#[derive(Clone)]
struct Held(Arc<RunSlot>);

impl std::borrow::Borrow<[u8]> for Held {
    fn borrow(&self) -> &[u8] {
        self.0.id.as_bytes()
    }
}

impl PartialEq for Held {
    fn eq(&self, other: &Held) -> bool {
        self.0.id.as_bytes() == other.0.id.as_bytes()
    }
}

impl Eq for Held {}

impl std::hash::Hash for Held {
    // As the id's bytes hash (`Borrow<[u8]>` lookups find it).
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        <[u8]>::hash(self.0.id.as_bytes(), state);
    }
}

/// A step's declared output types: name and type id.
type OutTypes = Box<[(EventName, saap_dispatch::TypeId)]>;

/// How many evicted run slots an engine keeps for reuse.
const SPARE_SLOTS: usize = 64;
/// Largest run (logged events) whose slot is kept for reuse.
const SPARE_SLOT_MAX_EVENTS: usize = 256;
/// How many evicted runs' tables an engine keeps for runs about to execute.
const SPARE_TABLES: usize = 16;

/// What an evicted run held that grows as a run executes — the core's tables, the
/// payload list, the scratch buffers — emptied, with their allocations. A run that starts
/// executing takes them over instead of growing its own from their first-dispatch sizes
/// (one reallocation each) and making its scratch buffers (several allocations).
struct SpareTables {
    core: saap_dispatch::RunTables,
    payloads: Vec<Payload>,
    scratch: Option<Box<Scratch>>,
}

/// One run: the core state behind its lock, and a version counter bumped on each change.
pub(crate) struct RunSlot {
    /// The run's id: an engine-made one as its hex text, inline.
    id: RunIdText,
    /// The run's id as shared text, made on first use ([`RunSlot::run_id`]): a run of the
    /// in-memory store that nothing inspects never needs it.
    run_id: std::sync::OnceLock<Arc<str>>,
    /// The thread's id as text: given, or made from `new_thread` on first use (most runs
    /// of the in-memory store never show it).
    thread_id: std::sync::OnceLock<Arc<str>>,
    /// The id of the thread made for this run (when none was given).
    new_thread: EventId,
    /// Seeds the derived ids of this run's outputs.
    pub run_key: u64,
    state: RunMutex<RunState>,
    /// Bumped on every change while someone watches (test runner, snapshots in a loop);
    /// made by the first watcher (a watch channel is ~350 bytes per run otherwise).
    version: std::sync::OnceLock<watch::Sender<u64>>,
}

pub(crate) struct RunState {
    pub run: Run,
    /// Payload of each logged event, by sequence number.
    pub payloads: Vec<Payload>,
    journal_len: u64,
    records_sent: usize,
    ended_sent: bool,
    /// The input that ended the run is durable.
    end_durable: bool,
    created: bool,
    /// An engine-side failure (storage) that stopped the run.
    pub failure: Option<Box<str>>,
    /// What the run's executions showed (made by the first display event: most runs show
    /// none, and a run in flight holds 8 bytes for it, not 48).
    displays: Option<Box<Displays>>,
    /// Buffers of a run that executes (made by its first completion: a run waiting for
    /// its first step holds none).
    scratch: Option<Box<Scratch>>,
    /// Typed inputs of the last precondition evaluations (live runs only; made by the first
    /// evaluation). Apart from the scratch buffers, which a completion uses while the core
    /// evaluates preconditions.
    pre_cache: Option<Box<PreCache>>,
    /// Tasks waiting until the run is quiet ([`RunSlot::until_quiet`]).
    waiters: Waiters,
}

/// Tasks waiting until a run is quiet, kept under the run's lock: a waiter registers in
/// the same locked section in which it finds the run not quiet, and whoever makes the run
/// quiet takes the waiters in the section in which it sees that (no wake-up is lost, and
/// neither takes a lock of its own). A registration is keyed by the address of its pinned
/// [`UntilQuiet`] future, unique among live ones. The first waiter inline, others boxed: a
/// run has at most one (`wait_for_end`) in most uses, and the state stays 32 bytes.
#[derive(Default)]
struct Waiters {
    first: Option<(usize, std::task::Waker)>,
    #[allow(
        clippy::box_collection,
        reason = "8 bytes in every run's state, not 24: a second waiter is rare"
    )]
    more: Option<Box<Vec<(usize, std::task::Waker)>>>,
}

impl Waiters {
    /// Registers `waker` under `key`, or updates the registration under `key`.
    fn register(&mut self, key: usize, waker: &std::task::Waker) {
        let more = self.more.as_deref_mut().map(Vec::as_mut_slice);
        if let Some((_, w)) = self
            .first
            .iter_mut()
            .chain(more.into_iter().flatten())
            .find(|(k, _)| *k == key)
        {
            if !w.will_wake(waker) {
                w.clone_from(waker);
            }
            return;
        }
        if self.first.is_none() {
            self.first = Some((key, waker.clone()));
        } else {
            self.more
                .get_or_insert_with(Box::default)
                .push((key, waker.clone()));
        }
    }

    /// Drops the registration under `key` (a waiter that stopped waiting), if still there.
    fn remove(&mut self, key: usize) {
        if self.first.as_ref().is_some_and(|(k, _)| *k == key) {
            self.first = None;
        } else if let Some(more) = self.more.as_deref_mut()
            && let Some(i) = more.iter().position(|(k, _)| *k == key)
        {
            more.swap_remove(i);
        }
    }

    /// How many waiters are registered.
    #[cfg(test)]
    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.more.as_ref().map_or(0, |m| m.len())
    }

    /// Takes every registration, to wake once the run's lock is released.
    fn take(&mut self) -> Woken {
        Woken {
            first: self.first.take().map(|(_, w)| w),
            more: self.more.take(),
        }
    }
}

/// Waiters taken from a run, woken (outside its lock) by [`Woken::wake`].
struct Woken {
    first: Option<std::task::Waker>,
    #[allow(clippy::box_collection, reason = "moved out of `Waiters` as is")]
    more: Option<Box<Vec<(usize, std::task::Waker)>>>,
}

impl Woken {
    fn wake(self) {
        if let Some(w) = self.first {
            w.wake();
        }
        // Not a `flat_map` over the option: its drop costs more than this whole call
        // when there is no waiter (most runs).
        if let Some(more) = self.more {
            for (_, w) in *more {
                w.wake();
            }
        }
    }
}

/// The future of [`RunSlot::until_quiet`]: registered with the run (under its own address,
/// stable while pinned) while it waits, and unregistered when dropped before the run is
/// quiet.
struct UntilQuiet<'a> {
    slot: &'a RunSlot,
    registered: std::cell::Cell<bool>,
    _pinned: std::marker::PhantomPinned,
}

impl UntilQuiet<'_> {
    /// The key of this future's registration: its address (pinned from its first poll to
    /// its drop, and distinct from any other live future's).
    fn key(&self) -> usize {
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
struct Displays {
    /// Display events shown by executions: (seq, execution).
    by: Vec<(u32, ExecutionId)>,
    /// Per execution that showed display events: the attempt and how many it showed (a
    /// display event's id derives from that number: an attempt re-run after a crash shows
    /// the same ids, which the core drops as duplicates).
    counts: Vec<(ExecutionId, u32, u32)>,
}

/// Buffers a run reuses from one input to the next.
#[derive(Default)]
struct Scratch {
    /// Reused buffers of `apply` (no allocation per input once warm).
    pending: Vec<(EventId, Payload)>,
    /// Buffers of the run's last finished execution, reused by the next one it starts (an
    /// inline chain allocates no input or output vectors per step). Empty and small.
    spare_inputs: Vec<Vec<BoundEvent>>,
    spare_outs: Vec<OutEvent>,
    /// The core's view of a completion's outputs, handed to `Run::complete_returned` (kept
    /// empty between completions: no vector per completion).
    news: Vec<NewEvent>,
    /// The ids of the run's outputs, made for its run key (see [`Scratch::output_ids`]).
    ids: Option<saap_dispatch::OutputIds>,
}

impl Scratch {
    fn clear(&mut self) {
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
    fn output_ids(&mut self, run_key: u64) -> saap_dispatch::OutputIds {
        match self.ids {
            Some(ids) if ids.run_key() == run_key => ids,
            _ => *self.ids.insert(saap_dispatch::OutputIds::new(run_key)),
        }
    }
}

/// A run's scratch buffers, made on first use.
fn scratch(s: &mut Option<Box<Scratch>>) -> &mut Scratch {
    s.get_or_insert_with(Box::default)
}

impl RunState {
    /// Frees what an ended run that left the engine holds (see [`Run::forget_evidence`]);
    /// it stays ended, and quiet. The growing tables are handed back, emptied, for
    /// another run ([`Shared::stash`]).
    fn forget(&mut self) -> SpareTables {
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
    fn adopt(&mut self, spare: &mut SpareTables) {
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
    fn shown_by(&mut self) -> &mut Vec<(u32, ExecutionId)> {
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
    fn reset(&mut self, run_key: u64) {
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
        // A reused slot had no holder left, so no waiter either (a waiter unregisters
        // when it stops waiting): nothing to drop, usually.
        if waiters.first.is_some() || waiters.more.is_some() {
            *waiters = Waiters::default();
        }
    }

    /// Small enough for its slot to be kept for a new run (a larger run's tables go to
    /// the stash instead, see [`Shared::release`]).
    fn fits_a_spare_slot(&self) -> bool {
        self.run.log().len() <= SPARE_SLOT_MAX_EVENTS
            && self.payloads.capacity() <= SPARE_SLOT_MAX_EVENTS
    }

    /// Ended (and the end is durable) with nothing running, or stopped by a failure.
    fn is_quiet(&self) -> bool {
        self.failure.is_some()
            || (self.end_durable && self.run.is_terminated() && self.run.running().next().is_none())
    }
}

/// A run's id: the engine's own ids (24 hex characters) inline, any other shared.
pub(crate) enum RunIdText {
    Hex(HexId),
    Other(Arc<str>),
}

/// An engine-made run id's 24 hex characters, word-aligned and followed by 8 zero bytes:
/// `str::from_utf8` (the run id returned as a `String`) checks aligned text 16 bytes at a
/// time and the rest a byte at a time, so 32 bytes cost two steps where 24 cost one and
/// eight (~50 instructions fewer per id; unaligned, a byte at a time: ~40 more).
#[derive(Clone, Copy)]
#[repr(align(8))]
pub(crate) struct HexId([u8; 32]);

impl HexId {
    fn new(text: [u8; 24]) -> HexId {
        let mut b = [0; 32];
        b[..24].copy_from_slice(&text);
        HexId(b)
    }
    /// The id's 24 characters.
    pub(crate) fn bytes(&self) -> &[u8; 24] {
        self.0.first_chunk().unwrap_or(&[0; 24])
    }
    /// The id's text (always valid: hex digits, checked with the zeros that follow them).
    fn text(&self) -> &str {
        std::str::from_utf8(&self.0)
            .ok()
            .and_then(|s| s.get(..24))
            .unwrap_or_default()
    }
}

impl RunIdText {
    /// The id's text, as bytes.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            RunIdText::Hex(b) => b.bytes(),
            RunIdText::Other(s) => s.as_bytes(),
        }
    }
}

impl From<&str> for RunIdText {
    fn from(s: &str) -> RunIdText {
        match <[u8; 24]>::try_from(s.as_bytes()) {
            Ok(b) if b.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) => {
                RunIdText::Hex(HexId::new(b))
            }
            _ => RunIdText::Other(s.into()),
        }
    }
}

impl RunSlot {
    fn new(id: RunIdText, thread: Thread, run: Run) -> RunSlot {
        let (thread_id, new_thread) = thread.parts();
        RunSlot {
            id,
            run_id: std::sync::OnceLock::new(),
            thread_id,
            new_thread,
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
            }),
            version: std::sync::OnceLock::new(),
        }
    }
    /// Resets this slot (of an ended run nothing refers to any more) for a new run, whose
    /// ids and key [`RunSlot::rename`] gives it. Its run id and thread are still the ended
    /// run's until then.
    fn recycle(&mut self) {
        self.state.get_mut().reset(0);
        // Made by a watcher only (most runs have none): nothing to drop, usually.
        if self.version.get().is_some() {
            self.version = std::sync::OnceLock::new();
        }
    }
    /// Makes this recycled slot the slot of a new run; returns the ended run's id text (to
    /// drop outside the caller's lock).
    fn rename(
        &mut self,
        id: [u8; 24],
        thread: Thread,
        run_key: u64,
    ) -> (RunIdText, std::sync::OnceLock<Arc<str>>) {
        (self.thread_id, self.new_thread) = thread.parts();
        self.run_key = run_key;
        self.state.get_mut().run.rekey(run_key);
        (
            std::mem::replace(&mut self.id, RunIdText::Hex(HexId::new(id))),
            std::mem::take(&mut self.run_id),
        )
    }
    /// The run's id.
    pub(crate) fn run_id(&self) -> &Arc<str> {
        match &self.id {
            RunIdText::Other(s) => s,
            RunIdText::Hex(b) => self.run_id.get_or_init(|| Arc::from(b.text())),
        }
    }
    /// The run's id, as the text of the run's id (its bytes; ASCII for engine-made ids).
    pub(crate) fn id_text(&self) -> &RunIdText {
        &self.id
    }
    /// The run's id as a new `String`.
    pub(crate) fn run_id_string(&self) -> String {
        match &self.id {
            RunIdText::Other(s) => String::from(&**s),
            RunIdText::Hex(b) => String::from(b.text()),
        }
    }
    /// The id of the run's thread when it was given (not made from `new_thread`).
    pub(crate) fn given_thread(&self) -> Option<&Arc<str>> {
        if self.new_thread == GIVEN_THREAD {
            self.thread_id.get()
        } else {
            None
        }
    }
    /// The id the run's thread text is made from when none was given.
    pub(crate) fn new_thread(&self) -> EventId {
        self.new_thread
    }

    /// The id of the run's thread.
    pub(crate) fn thread_id(&self) -> &Arc<str> {
        self.thread_id.get_or_init(|| hex_id(&self.new_thread))
    }
    pub(crate) fn lock(&self) -> MutexGuard<'_, RunState> {
        // The state is only mutated by the core's transition functions, which do not panic
        // on input: a lock that does not poison needs no check when it is taken or let go.
        self.state.lock()
    }
    /// Inlined: every completion calls it, and most runs were never watched (one look).
    #[inline]
    fn bump(&self) {
        if let Some(tx) = self.version.get() {
            bump_watched(tx);
        }
    }
    /// Waits until the run is quiet ([`RunState::is_quiet`]): one look under the run's
    /// lock, registering the waiter there if it is not (see [`Waiters`]).
    fn until_quiet(&self) -> UntilQuiet<'_> {
        UntilQuiet {
            slot: self,
            registered: std::cell::Cell::new(false),
            _pinned: std::marker::PhantomPinned,
        }
    }

    /// Wakes the run's waiters if it is quiet.
    fn wake_if_quiet(&self) {
        let mut st = self.lock();
        if st.is_quiet() {
            let woken = st.waiters.take();
            drop(st);
            woken.wake();
        }
    }
}

/// The thread of a new run: given by its id, or a new one (its id made when first shown).
pub(crate) enum Thread {
    Given(Arc<str>),
    New(EventId),
}

/// The `new_thread` of a run whose thread was given: it has no id to make its text from.
const GIVEN_THREAD: EventId = EventId::from_bytes([0; 12]);

impl Thread {
    #[inline]
    fn parts(self) -> (std::sync::OnceLock<Arc<str>>, EventId) {
        match self {
            Thread::Given(id) => (std::sync::OnceLock::from(id), GIVEN_THREAD),
            Thread::New(id) => (std::sync::OnceLock::new(), id),
        }
    }
}

/// FNV-1a for the type table (short names): a keyed hash (SipHash) buys nothing there and
/// costs ~200 instructions per lookup.
#[derive(Default, Clone, Copy)]
pub(crate) struct FnvHasher(u64);

impl std::hash::Hasher for FnvHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.0 = h;
    }
}

pub(crate) type FnvBuild = std::hash::BuildHasherDefault<FnvHasher>;

/// The run table's hash: run ids are made by the engine (or the store), so a keyed hash
/// buys nothing; a run id (24 characters) is taken eight bytes at a time (FNV takes one
/// at a time: ~100 instructions per lookup, three lookups per run), then mixed whole
/// (murmur3's finalizer), because engine-made ids differ only in their last characters
/// and the table indexes by the hash's low bits.
#[derive(Default, Clone, Copy)]
pub(crate) struct RunIdHasher(u64);

impl std::hash::Hasher for RunIdHasher {
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut h = self.0;
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            h = (h.rotate_left(23) ^ u64::from_le_bytes(b)).wrapping_mul(K);
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            h = (h.rotate_left(23) ^ u64::from_le_bytes(b) ^ rest.len() as u64).wrapping_mul(K);
        }
        self.0 = h;
    }
}

pub(crate) type RunIdBuild = std::hash::BuildHasherDefault<RunIdHasher>;

/// An id as its 24 lowercase hex characters (the protocol's text form), without going
/// through `fmt` one byte at a time.
pub(crate) fn hex_id(id: &EventId) -> Arc<str> {
    let mut out = [0u8; 24];
    hex_into(id.as_bytes(), &mut out);
    // Only ASCII hex digits were written.
    Arc::from(std::str::from_utf8(&out).unwrap_or_default())
}

/// Process-unique ObjectId-style ids (protocol layout: seconds, 5 process bytes, counter).
struct IdGen {
    process: [u8; 5],
    counter: AtomicU32,
}

impl IdGen {
    fn new() -> IdGen {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        h.write_u32(std::process::id());
        let r = h.finish().to_be_bytes();
        IdGen {
            process: [r[0], r[1], r[2], r[3], r[4]],
            counter: AtomicU32::new(u32::from_be_bytes([r[5], r[6], r[7], 0])),
        }
    }
    fn next(&self) -> EventId {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        saap_protocol::EventId::object_id(unix_seconds(), self.process, n)
    }
    /// The ids a new run needs (its own, its new thread's, its start event's) for one
    /// clock reading and one atomic add.
    fn next_run(&self) -> RunIds {
        let secs = unix_seconds();
        let n = self.counter.fetch_add(3, Ordering::Relaxed);
        let id = |i: u32| saap_protocol::EventId::object_id(secs, self.process, n.wrapping_add(i));
        RunIds {
            run: id(0),
            thread: id(1),
            start: id(2),
        }
    }
}

/// The ids of a new run, drawn together ([`IdGen::next_run`]).
#[derive(Clone, Copy)]
struct RunIds {
    run: EventId,
    /// The id of the thread made for the run when none is given.
    thread: EventId,
    start: EventId,
}

/// How many leading bytes of an engine-made id are the same for every id the process makes
/// in one second (4 of seconds, 5 of the process).
const ID_HEAD: usize = 9;

/// A run id's first [`ID_HEAD`] bytes, their text and their share of the run key: the same
/// for all ids a thread makes in one second, so computed once for them.
#[derive(Clone, Copy)]
struct IdHead {
    /// The first bytes as two words (compared as such: a 9-byte array comparison costs
    /// ~35 instructions per run, two word comparisons a few).
    bytes: (u64, u8),
    text: [u8; 2 * ID_HEAD],
    key: saap_dispatch::ids::RunKeyPrefix,
}

thread_local! {
    static ID_HEAD_CACHE: std::cell::Cell<Option<IdHead>> = const { std::cell::Cell::new(None) };
}

/// Writes the hex text of `bytes` into `out` (twice as long).
fn hex_into(bytes: &[u8], out: &mut [u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (b, o) in bytes.iter().zip(out.chunks_exact_mut(2)) {
        o[0] = HEX[(b >> 4) as usize];
        o[1] = HEX[(b & 15) as usize];
    }
}

/// An engine-made run id as text ([`hex_id`]) and its run key ([`run_key`]), the share of
/// both that the id's first bytes make taken from the thread's last id when they are the
/// same (ids made in the same second).
fn run_id_text(id: &EventId) -> ([u8; 24], u64) {
    let all = id.as_bytes();
    let (head, tail) = all.split_at(ID_HEAD);
    let [b0, b1, b2, b3, b4, b5, b6, b7, b8, ..] = *all;
    let words = (u64::from_ne_bytes([b0, b1, b2, b3, b4, b5, b6, b7]), b8);
    let head = ID_HEAD_CACHE.with(|cache| match cache.get() {
        Some(h) if h.bytes == words => h,
        _ => {
            let mut h = IdHead {
                bytes: words,
                text: [0; 2 * ID_HEAD],
                key: saap_dispatch::ids::RunKeyPrefix::new(&[]),
            };
            hex_into(head, &mut h.text);
            h.key = saap_dispatch::ids::RunKeyPrefix::new(&h.text);
            cache.set(Some(h));
            h
        }
    });
    let mut out = [0u8; 24];
    let (text_head, text_tail) = out.split_at_mut(2 * ID_HEAD);
    text_head.copy_from_slice(&head.text);
    hex_into(tail, text_tail);
    let key = head.key.finish(text_tail);
    (out, key)
}

fn unix_seconds() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(0)
}

/// An event entering a run.
struct Incoming {
    id: EventId,
    ty: NewEventType,
    kind: EventKind,
    name: std::borrow::Cow<'static, str>,
    payload: Payload,
    /// The execution that showed this display event, if any.
    by: Option<ExecutionId>,
}

enum Input {
    Append(Incoming),
    Complete {
        execution: ExecutionId,
        attempt: u32,
        /// What the step returned (turned into events with derived ids under the lock).
        outcome: Result<Vec<OutEvent>, String>,
    },
    Retry(ExecutionId),
}

/// How [`Shared::apply_with`] binds the executions an input started.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bind {
    /// Not now: the engine's local driver binds them when their turn comes.
    Later,
    /// Their events, into each invocation's `inputs`.
    Events,
    /// The only one started, by extracting its typed inputs into `prepared` (its body
    /// starts on this thread: [`Engine::run`] on a task that drives all of the run's
    /// executions); when there are several, as `Events`.
    Extract,
}

/// A started execution, ready to run.
pub(crate) struct Invocation {
    execution: ExecutionId,
    attempt: u32,
    step: StepIdx,
    inputs: Vec<Vec<BoundEvent>>,
    /// An empty vector for the step's outputs (recycled from an earlier execution).
    outs: Vec<OutEvent>,
    /// Its inputs are bound (else only `execution` is set: see `Shared::apply_to_launch`).
    bound: bool,
    /// Bind by extracting the typed inputs under the run's lock into `prepared` (the local
    /// driver, which starts the body on this thread), not into `inputs`.
    extract: bool,
    /// With `extract`: the body run holding the typed inputs, or why they could not be
    /// extracted (the step's failure).
    prepared: Option<Result<StepFuture, String>>,
}

impl Invocation {
    /// An invocation to bind an execution into (no buffers yet).
    fn empty() -> Invocation {
        Invocation {
            execution: ExecutionId(0),
            attempt: 1,
            step: 0,
            inputs: Vec::new(),
            outs: Vec::new(),
            bound: false,
            extract: false,
            prepared: None,
        }
    }

    /// How a local driver takes it: as is, or to be bound when its turn comes.
    fn queued(self, slot: &Arc<RunSlot>) -> Queued {
        if self.bound {
            Queued::Bound(Box::new((slot.clone(), self)))
        } else {
            Queued::Started(slot.clone(), self.execution)
        }
    }
}

/// The executions an input started: usually none or one, so no vector for those.
#[derive(Default)]
pub(crate) enum Started {
    #[default]
    None,
    One(Invocation),
    Many(Vec<Invocation>),
}

impl Started {
    fn push(&mut self, inv: Invocation) {
        *self = match std::mem::take(self) {
            Started::None => Started::One(inv),
            Started::One(first) => Started::Many(vec![first, inv]),
            Started::Many(mut v) => {
                v.push(inv);
                Started::Many(v)
            }
        };
    }
    fn len(&self) -> usize {
        match self {
            Started::None => 0,
            Started::One(_) => 1,
            Started::Many(v) => v.len(),
        }
    }
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl IntoIterator for Started {
    type Item = Invocation;
    type IntoIter =
        std::iter::Chain<std::option::IntoIter<Invocation>, std::vec::IntoIter<Invocation>>;
    fn into_iter(self) -> Self::IntoIter {
        match self {
            Started::None => None.into_iter().chain(Vec::new()),
            Started::One(inv) => Some(inv).into_iter().chain(Vec::new()),
            Started::Many(v) => None.into_iter().chain(v),
        }
    }
}

/// What [`Shared::apply_locked`] did: the journal entry's durability, the append's result,
/// whether the run ended (and its end waits for the entry to be durable, see
/// [`Shared::seal`]), and the execution a retry restarted.
struct Entry {
    durable: Pending<()>,
    appended: Option<Appended>,
    ended: bool,
    retried: Option<(ExecutionId, u32)>,
}

/// What [`Shared::complete_in_place`] did. A few bytes, returned in a register: most
/// completions are durable at once, and a journal entry's durability goes to
/// [`Spill::durable`] instead of being moved through every frame.
#[derive(Clone, Copy)]
struct Completed {
    /// The entry's durability is in [`Spill::durable`] (else it was durable at once).
    waits: bool,
    /// This completion ended the run, and its end is durable once the entry is (an entry
    /// durable at once marked the end durable already: then `false`).
    ended: bool,
    next: Next,
}

/// What a completion hands its caller beside [`Completed`], in buffers the caller keeps
/// from one completion to the next.
#[derive(Default)]
struct Spill {
    /// Executions a completion started beside the first (see [`Next::Also`]).
    others: Vec<ExecutionId>,
    /// The durability of a completion's entry, when not durable at once (see
    /// [`Completed::waits`]); taken by the caller.
    durable: Option<Pending<()>>,
}

impl Spill {
    /// The durability of the entry of a completion that `waits` (taken).
    fn durable(&mut self) -> Pending<()> {
        self.durable.take().unwrap_or(Pending::Ready(Ok(())))
    }
}

/// The executions a completion started, for the task that ran the completed one.
#[derive(Clone, Copy)]
enum Next {
    /// None.
    None,
    /// One: the invocation now holds it.
    Here,
    /// Several: the invocation holds the first, the others were added to the caller's list.
    Also,
    /// None; the invocation now holds the caller's queued execution (bound under the
    /// completion's lock: a fan-out's executions take the run's lock once each, not twice).
    Queued,
}

/// An execution waiting for its turn on a local driver.
enum Queued {
    /// Bound already (rare: a retry, or a store's run); boxed, so that a queue of runs
    /// waiting for their first step (S3: one entry per run in flight) holds 16 bytes each.
    Bound(Box<(Arc<RunSlot>, Invocation)>),
    /// Started by a completion, bound when its turn comes.
    Started(Arc<RunSlot>, ExecutionId),
    /// Several executions of one run started by one completion (a fan-out), bound one at a
    /// time when their turn comes: one entry and one reference to the slot, not one each.
    /// Taken apart by [`pop_queued`].
    Span(Box<Span>),
}

/// Executions `next..end` of a run.
struct Span {
    slot: Arc<RunSlot>,
    next: u32,
    end: u32,
}

/// One execution taken from a queue.
enum Turn {
    Bound(Box<(Arc<RunSlot>, Invocation)>),
    Started(Arc<RunSlot>, ExecutionId),
}

/// Takes a queue's first execution: its front, or a span's first (the rest stay in front).
fn pop_queued(q: &mut VecDeque<Queued>) -> Option<Turn> {
    if let Some(Queued::Span(s)) = q.front_mut()
        && s.end - s.next > 1
    {
        s.next += 1;
        return Some(Turn::Started(s.slot.clone(), ExecutionId(s.next - 1)));
    }
    Some(match q.pop_front()? {
        Queued::Bound(b) => Turn::Bound(b),
        Queued::Started(slot, x) => Turn::Started(slot, x),
        Queued::Span(s) => {
            let Span { slot, next, .. } = *s;
            Turn::Started(slot, ExecutionId(next))
        }
    })
}

/// Drops the first execution of a queue's front (bound already by the caller).
fn skip_queued(q: &mut VecDeque<Queued>) {
    match q.front_mut() {
        Some(Queued::Span(s)) if s.end - s.next > 1 => s.next += 1,
        _ => {
            q.pop_front();
        }
    }
}

/// The execution at a queue's front when it is one of `slot`'s, not bound yet.
fn front_of(q: &VecDeque<Queued>, slot: &Arc<RunSlot>) -> Option<ExecutionId> {
    match q.front()? {
        Queued::Started(s, x) if Arc::ptr_eq(s, slot) => Some(*x),
        Queued::Span(s) if Arc::ptr_eq(&s.slot, slot) => Some(ExecutionId(s.next)),
        _ => None,
    }
}

/// Queues executions a completion started (consecutive ids, as the core starts them: one
/// span).
fn queue_started(q: &mut VecDeque<Queued>, slot: &Arc<RunSlot>, xs: &mut Vec<ExecutionId>) {
    match (xs.first(), xs.last()) {
        (Some(first), Some(last)) if xs.len() > 1 && last.0 - first.0 + 1 == xs.len() as u32 => {
            q.push_back(Queued::Span(Box::new(Span {
                slot: slot.clone(),
                next: first.0,
                end: last.0 + 1,
            })));
            xs.clear();
        }
        _ => q.extend(xs.drain(..).map(|x| Queued::Started(slot.clone(), x))),
    }
}

/// What [`Shared::launch_now`] did: launched an input that was durable already, or not
/// (it waits for the store).
enum Launch {
    Done(Result<Option<Appended>, EngineError>),
    Wait(Applied),
}

struct Applied {
    durable: Pending<()>,
    started: Started,
    appended: Option<Appended>,
    /// This input ended the run and its durability makes the end durable (`false` when
    /// the entry was durable at once: the end is marked durable already).
    ended: bool,
}

/// Answers precondition calls with the user's functions (live) or recorded results (replay).
struct Pre<'a> {
    steps: &'a [StepImpl],
    names: &'a [EventName],
    payloads: &'a [Payload],
    pending: &'a [(EventId, Payload)],
    /// The results, for a journal entry (`None` without a journal: a list fan-in evaluated
    /// on every arrival allocates no vector per arrival).
    results: Option<Vec<bool>>,
    replay: Option<std::vec::IntoIter<bool>>,
    exhausted: bool,
    /// The run's precondition cache (made on first use).
    cache: &'a mut Option<Box<PreCache>>,
}

impl Shared {
    /// The preconditions of a transition of a run whose payloads are `payloads` (in the
    /// order of its log), with `pending` the payloads of the events the transition adds;
    /// no results kept, none replayed.
    #[inline(always)]
    fn pre<'a>(
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

/// Per run: the typed inputs each step's precondition was last evaluated on, so that a list
/// fan-in re-evaluated on every arrival costs one extraction per event (DESIGN §4.4: a list
/// binding is a prefix of its match list). Dropped when the run ends.
#[derive(Default)]
pub(crate) struct PreCache {
    entries: Vec<(StepIdx, PreEntry)>,
}

#[derive(Default)]
struct PreEntry {
    /// The step's `I: Inputs`, or nothing after a failed evaluation.
    value: crate::workflow::PreCacheSlot,
    /// Per parameter: how many bound events `value` holds and the last one's sequence.
    seen: Vec<(usize, Seq)>,
    /// Buffers of the evaluation's arguments, kept empty between evaluations (a list
    /// fan-in re-evaluated on every arrival allocates none per arrival).
    skipped: Vec<usize>,
    bound: Vec<Vec<BoundEvent>>,
}

impl PreCache {
    fn entry(&mut self, step: StepIdx) -> &mut PreEntry {
        let i = match self.entries.iter().position(|(s, _)| *s == step) {
            Some(i) => i,
            None => {
                self.entries.push((step, PreEntry::default()));
                self.entries.len() - 1
            }
        };
        &mut self.entries[i].1
    }
}

impl PreconditionEvaluator for Pre<'_> {
    fn evaluate(&mut self, call: &PreconditionCall<'_>) -> bool {
        if let Some(it) = &mut self.replay {
            return it.next().unwrap_or_else(|| {
                self.exhausted = true;
                false
            });
        }
        let Some(f) = self
            .steps
            .get(call.step as usize)
            .and_then(|s| s.precondition.as_ref())
        else {
            self.record(true);
            return true;
        };
        let n = call.bindings.len();
        let log = call.run.log();
        let params = &call.run.spec().steps[call.step as usize].params;
        let entry = self.cache.get_or_insert_with(Box::default).entry(call.step);
        // A list parameter whose binding still starts with the events the cached inputs
        // hold is extended with the events after them only (each event is extracted once
        // over a fan-in, not on every arrival); any other parameter is extracted whole.
        let cached = entry.value.is_some() && entry.seen.len() == n;
        let mut skipped = std::mem::take(&mut entry.skipped);
        let mut bound = std::mem::take(&mut entry.bound);
        skipped.clear();
        if bound.len() != n {
            bound.truncate(n);
            bound.resize_with(n, Vec::new);
        }
        // What the cached inputs will hold, per parameter, updated as each is read.
        entry.seen.resize(n, (0, 0));
        for (pi, events) in bound.iter_mut().enumerate() {
            let seqs = call.bound(pi as u32);
            let keep = match entry.seen[pi] {
                (len, last)
                    if cached
                        && params.get(pi).map(|p| p.kind) == Some(ParamKind::List)
                        && len > 0
                        && seqs.get(len - 1) == Some(&last) =>
                {
                    len
                }
                _ => 0,
            };
            entry.seen[pi] = (seqs.len(), seqs.last().copied().unwrap_or(0));
            skipped.push(keep);
            events.clear();
            events.extend(seqs[keep..].iter().map(|&seq| {
                let id = log[seq as usize].id;
                let payload = self
                    .payloads
                    .get(seq as usize)
                    .cloned()
                    .or_else(|| {
                        self.pending
                            .iter()
                            .find(|(i, _)| *i == id)
                            .map(|(_, p)| p.clone())
                    })
                    .unwrap_or_else(|| Payload::from_json(serde_json::Value::Null));
                BoundEvent {
                    id,
                    name: type_name(self.names, log[seq as usize].ty),
                    payload,
                }
            }));
        }
        // A precondition that reads the run's config asks for the start event's fields.
        let start = || crate::config::start_payload(call.run, self.payloads, self.pending);
        let value = &mut entry.value;
        let result = match std::panic::catch_unwind(AssertUnwindSafe(|| {
            f(&bound, &skipped, value, &start)
        })) {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "precondition could not read its inputs; treated as false");
                false
            }
            Err(_) => {
                tracing::error!("precondition panicked; treated as false");
                false
            }
        };
        // The buffers go back to the entry, emptied (the bound events are released).
        for events in &mut bound {
            events.clear();
        }
        entry.skipped = skipped;
        entry.bound = bound;
        self.record(result);
        result
    }
}

impl Pre<'_> {
    /// Keeps a result for the journal entry, when there is one.
    fn record(&mut self, result: bool) {
        if let Some(r) = &mut self.results {
            r.push(result);
        }
    }
}

fn stored(ev: &Incoming) -> StoredEvent {
    StoredEvent {
        id: ev.id,
        name: ev.name.to_string(),
        kind: ev.kind.bits(),
        payload: ev.payload.clone(),
    }
}

impl Engine {
    /// An engine over the in-memory backend (nothing survives the process).
    pub fn in_memory(workflow: Workflow) -> Engine {
        Engine::new(
            workflow,
            Arc::new(crate::backend::memory::MemoryBackend::new()),
            EngineOptions::default(),
        )
    }

    /// An engine over a backend, without looking for runs to resume (use [`Engine::open`]
    /// for a store that may hold runs).
    pub fn new(workflow: Workflow, backend: Arc<dyn Backend>, opts: EngineOptions) -> Engine {
        let fingerprint = workflow.compiled().fingerprint();
        let type_names: Arc<[EventName]> = workflow
            .compiled()
            .types
            .iter()
            .map(
                |t| match workflow.inner.rust_names.iter().find(|n| **n == t.name) {
                    Some(n) => EventName::Static(n),
                    None => EventName::Shared(t.name.as_str().into()),
                },
            )
            .collect();
        let type_ids = workflow
            .compiled()
            .types
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.as_str().into(), i as saap_dispatch::TypeId))
            .collect();
        let out_types = workflow
            .spec()
            .steps
            .iter()
            .map(|s| {
                s.outputs
                    .iter()
                    .filter_map(|n| {
                        let name = match workflow.inner.rust_names.iter().find(|r| **r == n) {
                            Some(r) => EventName::Static(r),
                            None => EventName::from(n.as_str()),
                        };
                        Some((name, workflow.compiled().type_id(n)?))
                    })
                    .collect()
            })
            .collect();
        let start_types = type_names
            .iter()
            .enumerate()
            .filter_map(|(i, n)| match n {
                EventName::Static(n) => {
                    let t = i as saap_dispatch::TypeId;
                    let kind = workflow.compiled().type_info(t).kind;
                    (kind.is_start() && kind.is_control()).then_some((*n, t))
                }
                EventName::Shared(_) => None,
            })
            .collect();
        Engine {
            shared: Arc::new_cyclic(|this| Shared {
                ctx_ref: crate::context::EngineRef::register(this.clone()),
                journal: backend.wants_journal(),
                fingerprint,
                type_names,
                workflow,
                backend,
                runs: RwLock::new(Runs::default()),
                type_ids,
                out_types,
                start_types,
                opts,
                ids: IdGen::new(),
                executor: std::sync::OnceLock::new(),
                spare_slot_count: AtomicUsize::new(0),
                spare_tables: Mutex::new(Vec::new()),
                large_spare: Mutex::new(None),
                local: Mutex::new(LocalQueue::default()),
                local_wake: tokio::sync::Notify::new(),
            }),
        }
    }

    /// Opens an engine over a store: every live run of this workflow is rebuilt from its
    /// journal by the dispatch core (recorded precondition results are reused, and the
    /// rebuilt records must equal the stored ones), then re-runs the executions that had
    /// started but not completed. Ended runs stay in the store, so opening costs what the
    /// live runs cost: [`Engine::stored_snapshot`] reads one, and an event sent to one is
    /// kept as after-stop evidence as before. Must be called inside a tokio runtime.
    pub async fn open(
        workflow: Workflow,
        backend: Arc<dyn Backend>,
        opts: EngineOptions,
    ) -> Result<(Engine, Recovery), EngineError> {
        let engine = Engine::new(workflow, backend, opts);
        let shared = &engine.shared;
        let stored = shared
            .backend
            .load_runs(shared.workflow.name(), true)
            .wait()
            .await?;
        let mut recovery = Recovery::default();
        let mut to_retry = Vec::new();
        for s in stored {
            let run_id = s.meta.run_id.to_string();
            match shared.rebuild(s) {
                Ok((slot, ended)) => {
                    if !ended {
                        recovery.resumed_runs += 1;
                        let running: Vec<ExecutionId> = slot.lock().run.running().collect();
                        for x in running {
                            to_retry.push((slot.clone(), x));
                        }
                    }
                    shared.insert(slot);
                }
                Err(detail) => {
                    tracing::error!(run_id, %detail, "run cannot be resumed");
                    recovery.failed.push(EngineError::Replay { run_id, detail });
                }
            }
        }
        // Journal every retry first (one group commit for all of them), then run them.
        let mut applied = Vec::with_capacity(to_retry.len());
        for (slot, x) in to_retry {
            match shared.apply(&slot, Input::Retry(x)) {
                Ok(a) => applied.push((slot, a)),
                Err(e) => {
                    tracing::error!(run_id = %slot.run_id(), error = %e, "cannot retry an execution")
                }
            }
        }
        for (slot, a) in applied {
            if let Err(e) = a.durable.wait().await {
                shared.storage_failed(&slot, &e);
                recovery.failed.push(e.into());
                continue;
            }
            recovery.retried_executions += a.started.len();
            slot.bump();
            for inv in a.started {
                spawn_drive(shared.clone(), slot.clone(), inv);
            }
        }
        Ok((engine, recovery))
    }

    pub fn workflow(&self) -> &Workflow {
        &self.shared.workflow
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.shared.backend
    }

    /// Starts a run in a new thread with a start event; returns the run id once the start
    /// event is durable. (The future of [`Engine::start_run_in`] itself, not one wrapping
    /// it: one per run in flight, kept small.)
    pub fn start_run<T: Event>(
        &self,
        start: T,
    ) -> impl Future<Output = Result<String, EngineError>> + Send + '_ {
        self.start_run_in(None, start)
    }

    /// Starts a run in an existing thread (ThreadContext is shared by the thread's runs).
    pub async fn start_run_in<T: Event>(
        &self,
        thread_id: Option<&str>,
        start: T,
    ) -> Result<String, EngineError> {
        // In a block: the ids are not kept in the future (one per run in flight).
        let (slot, applied) = {
            let ids = self.shared.ids.next_run();
            let ev = json_size(&start)
                .map_err(EngineError::from)
                .and_then(|size| {
                    self.shared.incoming_named(
                        T::NAME.into(),
                        Payload::typed(start),
                        size,
                        Some(ids.start),
                    )
                });
            self.begin_run(thread_id, ev, ids)?
        };
        // Launched before the first await on the in-memory path (see `Shared::launch_now`);
        // the match ends before the await, so the future holds no `Launch`.
        let waiting = match self.shared.launch_now(&slot, applied) {
            Launch::Done(launched) => {
                let run_id = slot.run_id_string();
                self.shared.release(slot);
                launched?;
                return Ok(run_id);
            }
            Launch::Wait(waiting) => Box::pin(self.shared.launch(&slot, waiting)),
        };
        let launched = waiting.await;
        let run_id = slot.run_id_string();
        self.shared.release(slot);
        launched?;
        Ok(run_id)
    }

    /// Starts a run with a start event given by type name and fields (JSON), e.g. from a
    /// command line. The type must be a start event declared by the workflow.
    pub async fn start_run_named(
        &self,
        thread_id: Option<&str>,
        name: &str,
        payload: Payload,
    ) -> Result<String, EngineError> {
        let (slot, applied) = {
            let ids = self.shared.ids.next_run();
            let ev = payload
                .check_json()
                .map_err(EngineError::from)
                .and_then(|size| self.shared.incoming(name, payload, size, Some(ids.start)));
            self.begin_run(thread_id, ev, ids)?
        };
        // Launched before the first await on the in-memory path (see `Shared::launch_now`);
        // the match ends before the await, so the future holds no `Launch`.
        let waiting = match self.shared.launch_now(&slot, applied) {
            Launch::Done(launched) => {
                let run_id = slot.run_id_string();
                self.shared.release(slot);
                launched?;
                return Ok(run_id);
            }
            Launch::Wait(waiting) => Box::pin(self.shared.launch(&slot, waiting)),
        };
        let launched = waiting.await;
        let run_id = slot.run_id_string();
        self.shared.release(slot);
        launched?;
        Ok(run_id)
    }

    /// Runs a workflow to its end with one awaited call: starts a run in a new thread with
    /// `start` and drives its executions on the caller's task (inline when one is ready,
    /// polled together when several are), returning once the run has ended as
    /// [`Engine::wait_for_end`] sees it. No task is spawned for the run and nothing is
    /// watched, so a short run costs less than `start_run` + `wait_for_end`.
    ///
    /// Same semantics as [`Engine::start_run`]: the start event and every completion are
    /// durable before the executions they start run. Events sent to the run from other tasks
    /// meanwhile ([`Engine::send`], by the id from [`Engine::run_ids`] or a store listing) are
    /// accepted as for any run: the executions they start run elsewhere (on their own tasks,
    /// or the engine's driver), and this call returns only when those have finished too. A
    /// run that waits for an outside event keeps this call waiting (no timeout). Dropping
    /// the call's future (e.g. a `tokio::time::timeout`) drops the executions it was
    /// driving: the run stays live with them marked running, resumed only by an engine
    /// opened on a durable store — for runs that wait for outside input, use `start_run` +
    /// `send`. Returns the run id.
    pub async fn run<T: Event>(&self, start: T) -> Result<String, EngineError> {
        let size = json_size(&start)?;
        let ids = self.shared.ids.next_run();
        let ev = self.shared.incoming_named(
            T::NAME.into(),
            Payload::typed(start),
            size,
            Some(ids.start),
        )?;
        let slot = self.new_run(None, &ev, ids)?;
        // Where this task drives all of the run's executions, the first one's inputs are
        // extracted in the start event's locked section (its body starts on this task).
        let shares = shares_task(&self.shared);
        let bind = if shares { Bind::Extract } else { Bind::Events };
        let applied = self
            .shared
            .apply_with(&slot, Input::Append(ev), Vec::new(), bind)?;
        let stored = match applied.durable {
            Pending::Ready(r) => r,
            waiting => waiting.wait().await,
        };
        if let Err(e) = stored {
            self.shared.storage_failed(&slot, &e);
            return Err(e.into());
        }
        if applied.ended {
            slot.lock().end_durable = true;
        }
        slot.bump();
        // Executions started by events sent from other tasks run elsewhere (their own tasks
        // or the engine's driver): when the driving stops before the run is quiet, wait.
        let (quiet, slot, evict) = match applied.started {
            // Most start events start one execution, which this task drives: straight to
            // the local driver (as `drive_started` would), the invocation moved once, with
            // this call's reference to the slot (it gets one back). Where the driver stops
            // with the run quiet, it may leave the run's eviction to the release below.
            Started::One(first) if shares => {
                let run = Arc::as_ptr(&slot) as usize;
                let mut back = None;
                let quiet = drive_local(
                    &self.shared,
                    Some((slot, first)),
                    None,
                    None,
                    Own::Handed {
                        run,
                        back: &mut back,
                    },
                )
                .await;
                match back {
                    Some((slot, evict)) => (quiet, slot, evict),
                    // The driver lets go of the run's last reference only through `back`.
                    None => {
                        return Err(EngineError::Core {
                            run_id: String::new(),
                            detail: "the run's driver kept no reference to its slot".into(),
                        });
                    }
                }
            }
            started => (
                drive_started(&self.shared, &slot, started, shares).await,
                slot,
                false,
            ),
        };
        if !quiet {
            slot.until_quiet().await;
        }
        let run_id = slot.run_id_string();
        if evict {
            self.shared.evict_and_release(slot);
        } else {
            self.shared.release(slot);
        }
        Ok(run_id)
    }

    /// Checks a start event and makes (or reuses) the slot of a new run, registered with the
    /// engine; the start event is not applied yet. The run's id is the slot's.
    fn new_run(
        &self,
        thread_id: Option<&str>,
        ev: &Incoming,
        ids: RunIds,
    ) -> Result<Arc<RunSlot>, EngineError> {
        if !(ev.kind.is_start() && ev.kind.is_control()) {
            return Err(EngineError::NotAStartEvent {
                name: ev.name.to_string(),
            });
        }
        self.shared.workflow.validate_start(&ev.payload)?;
        let (run_id, key) = run_id_text(&ids.run);
        let thread = match thread_id {
            Some(t) => Thread::Given(t.into()),
            None => Thread::New(ids.thread),
        };
        let shared = &*self.shared;
        if !shared.opts.keep_ended_runs && shared.spare_slot_count.load(Ordering::Relaxed) > 0 {
            // A kept slot (reset when it was let go) is renamed and held in one locked
            // section.
            let mut runs = shared.runs.write().unwrap_or_else(|p| p.into_inner());
            if let Some(mut slot) = runs.spare.pop() {
                shared
                    .spare_slot_count
                    .store(runs.spare.len(), Ordering::Relaxed);
                // The list held the only reference.
                if let Some(spare) = Arc::get_mut(&mut slot) {
                    let ended_id = spare.rename(run_id, thread, key);
                    // A slot whose tables went to the stash when its run was evicted takes
                    // kept ones now: its first dispatch grows none. (The stash's lock
                    // is never held while the run table's is taken.)
                    shared.adopt_spare(spare.state.get_mut());
                    runs.held.replace(Held(slot.clone()));
                    drop(runs);
                    drop(ended_id);
                    return Ok(slot);
                }
            }
        }
        let run = Run::new(shared.workflow.compiled().clone(), key);
        let slot = Arc::new(RunSlot::new(
            RunIdText::Hex(HexId::new(run_id)),
            thread,
            run,
        ));
        shared.insert(slot.clone());
        Ok(slot)
    }

    /// The synchronous part of starting a run: makes its slot and applies its start event
    /// (not yet durable). Kept out of the `start_run*` futures, which stay small.
    fn begin_run(
        &self,
        thread_id: Option<&str>,
        ev: Result<Incoming, EngineError>,
        ids: RunIds,
    ) -> Result<(Arc<RunSlot>, Applied), EngineError> {
        let ev = ev?;
        let slot = self.new_run(thread_id, &ev, ids)?;
        let applied = self.shared.apply_to_launch(&slot, Input::Append(ev))?;
        Ok((slot, applied))
    }

    /// Sends an event to a live run; returns its id once it is durable. An event for a run
    /// that has ended is kept as after-stop evidence and never dispatched.
    pub async fn send<T: Event>(&self, run_id: &str, event: T) -> Result<EventId, EngineError> {
        let slot = self.shared.slot_or_ended(run_id).await?;
        let size = json_size(&event)?;
        let ev = self
            .shared
            .incoming_named(T::NAME.into(), Payload::typed(event), size, None)?;
        let id = ev.id;
        self.shared.submit(&slot, Input::Append(ev)).await?;
        Ok(id)
    }

    /// Sends an event given by type name and fields (JSON), e.g. from a command line.
    pub async fn send_named(
        &self,
        run_id: &str,
        name: &str,
        payload: Payload,
    ) -> Result<EventId, EngineError> {
        let slot = self.shared.slot_or_ended(run_id).await?;
        let size = payload.check_json()?;
        let ev = self.shared.incoming(name, payload, size, None)?;
        let id = ev.id;
        self.shared.submit(&slot, Input::Append(ev)).await?;
        Ok(id)
    }

    /// Sends an event in its wire JSON form (DESIGN §6). Decoding is bounded (size, depth)
    /// and every failure is a typed error.
    pub async fn send_json(&self, run_id: &str, bytes: &[u8]) -> Result<EventId, EngineError> {
        let slot = self.shared.slot(run_id)?;
        let limits = DecodeLimits {
            max_bytes: self.shared.opts.max_event_bytes,
            ..DecodeLimits::default()
        };
        let env =
            EventEnvelope::decode(bytes, &self.shared.workflow.compiled().hierarchy, &limits)?;
        let id = env.event_id;
        let payload = Payload::from_json(serde_json::Value::Object(env.fields.clone()));
        let ev = match self
            .shared
            .incoming(&env.event_name, payload.clone(), bytes.len(), Some(id))
        {
            Ok(ev) => ev,
            Err(EngineError::UnknownEventType { .. }) => {
                // A foreign event: kept and classified by the sender's parent list.
                let c = env.classification();
                Incoming {
                    id,
                    ty: NewEventType::Foreign {
                        name: env.event_name.clone(),
                        kind: EventKind::from_classification(c),
                    },
                    kind: EventKind::from_classification(c),
                    name: env.event_name.clone().into(),
                    payload,
                    by: None,
                }
            }
            Err(e) => return Err(e),
        };
        self.shared.submit(&slot, Input::Append(ev)).await?;
        Ok(id)
    }

    /// A consistent copy of a run's state, for inspection.
    pub fn snapshot(&self, run_id: &str) -> Option<RunSnapshot> {
        let slot = self.shared.slot(run_id).ok()?;
        Some(slot_snapshot(&slot))
    }

    /// Ids of every run this engine knows (live and ended).
    /// The run as [`Engine::snapshot`] sees it, or, when this engine does not hold it (an
    /// ended run after [`Engine::open`], or one dropped with `keep_ended_runs: false`), the
    /// store's copy rebuilt by the core without resuming it. `Ok(None)`: the store has no
    /// such run of this workflow.
    pub async fn stored_snapshot(&self, run_id: &str) -> Result<Option<RunSnapshot>, EngineError> {
        if let Some(s) = self.snapshot(run_id) {
            return Ok(Some(s));
        }
        let Some(slot) = self.shared.read_stored(run_id).await? else {
            return Ok(None);
        };
        Ok(Some(slot_snapshot(&slot)))
    }

    /// The ids of the runs this engine holds in memory (live runs, and ended ones it ran
    /// while `keep_ended_runs` is on); [`Backend::list_runs`] lists what the store holds.
    pub fn run_ids(&self) -> Vec<String> {
        let runs = self.shared.runs.read().unwrap_or_else(|p| p.into_inner());
        let mut ids: Vec<String> = runs.held.iter().map(|h| h.0.run_id().to_string()).collect();
        ids.sort();
        ids
    }

    /// A receiver that changes whenever the run changes (for waiting without polling).
    pub fn watch(&self, run_id: &str) -> Result<watch::Receiver<u64>, EngineError> {
        Ok(self
            .shared
            .slot(run_id)?
            .version
            .get_or_init(|| watch::channel(0).0)
            .subscribe())
    }

    /// Waits until the run has ended, the event that ended it is durable, and none of its
    /// executions is still running (or the engine stopped the run after a storage failure).
    /// No timeout: wrap it in `tokio::time::timeout` when needed.
    pub async fn wait_for_end(&self, run_id: &str) -> Result<(), EngineError> {
        let slot = self.shared.slot(run_id)?;
        slot.until_quiet().await;
        self.shared.release(slot);
        Ok(())
    }

    /// Simulates a crash: the store stops accepting writes at once (what is not yet durable
    /// is lost) and is released, so another engine can open it. For tests and the chaos demo.
    pub fn halt(&self) {
        self.shared.backend.halt();
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.ctx_ref.unregister();
    }
}

impl Shared {
    /// Holds `slot` under its run id (in place of a slot held under that id).
    fn insert(&self, slot: Arc<RunSlot>) {
        self.runs
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .held
            .replace(Held(slot));
    }

    /// The slot held under `slot`'s run id, else `slot`, then held.
    fn insert_if_absent(&self, slot: Arc<RunSlot>) -> Arc<RunSlot> {
        let mut runs = self.runs.write().unwrap_or_else(|p| p.into_inner());
        if let Some(held) = runs.held.get(slot.id.as_bytes()) {
            return held.0.clone();
        }
        runs.held.insert(Held(slot.clone()));
        slot
    }

    /// Reads a run of this workflow from the store and rebuilds it (not inserted).
    async fn read_stored(&self, run_id: &str) -> Result<Option<Arc<RunSlot>>, EngineError> {
        let Some(stored) = self
            .backend
            .read_run(self.workflow.name(), run_id)
            .wait()
            .await?
        else {
            return Ok(None);
        };
        match self.rebuild(stored) {
            Ok((slot, _)) => Ok(Some(slot)),
            Err(detail) => Err(EngineError::Replay {
                run_id: run_id.chars().take(128).collect(),
                detail,
            }),
        }
    }

    /// The run's slot; a run this engine does not hold that the store has as ended is
    /// loaded (once, whoever asks first), so an event sent to it becomes after-stop evidence.
    async fn slot_or_ended(&self, run_id: &str) -> Result<Arc<RunSlot>, EngineError> {
        if let Ok(slot) = self.slot(run_id) {
            return Ok(slot);
        }
        let unknown = || EngineError::UnknownRun {
            run_id: run_id.chars().take(128).collect(),
        };
        if !self.journal {
            return Err(unknown());
        }
        let Some(slot) = self.read_stored(run_id).await? else {
            return Err(unknown());
        };
        if !slot.lock().run.is_terminated() {
            // A live run this engine does not hold belongs to another engine (a worker).
            return Err(unknown());
        }
        Ok(self.insert_if_absent(slot))
    }

    pub(crate) fn slot(&self, run_id: &str) -> Result<Arc<RunSlot>, EngineError> {
        self.runs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .held
            .get(run_id.as_bytes())
            .map(|held| held.0.clone())
            .ok_or_else(|| EngineError::UnknownRun {
                run_id: run_id.chars().take(128).collect(),
            })
    }

    /// An outside event of `size` bytes of JSON.
    fn incoming(
        &self,
        name: &str,
        payload: Payload,
        size: usize,
        id: Option<EventId>,
    ) -> Result<Incoming, EngineError> {
        self.incoming_named(name.to_string().into(), payload, size, id)
    }

    /// [`Shared::incoming`] with the name as it is kept (a typed event's name is static: no
    /// copy), looked up in the engine's FNV type table. Inlined: a typed event's lookup is
    /// a few comparisons, and the 96-byte `Incoming` is then made in the caller's frame
    /// (`always`: with a plain `#[inline]`, `Engine::run`'s instances, in the caller's
    /// crate, still called it: ~90 instructions per run more).
    #[inline(always)]
    fn incoming_named(
        &self,
        name: std::borrow::Cow<'static, str>,
        payload: Payload,
        size: usize,
        id: Option<EventId>,
    ) -> Result<Incoming, EngineError> {
        let spec = self.workflow.compiled();
        let t = match &name {
            // A typed start event: one address comparison per start type, no hashing.
            std::borrow::Cow::Borrowed(n) => self
                .start_types
                .iter()
                .find(|(s, _)| std::ptr::eq(*s, *n))
                .map(|&(_, t)| t),
            std::borrow::Cow::Owned(_) => None,
        };
        let Some(t) = t.or_else(|| self.type_ids.get(&*name).copied()) else {
            return Err(EngineError::UnknownEventType {
                name: name.to_string(),
                workflow: self.workflow.name().to_string(),
            });
        };
        if size > self.opts.max_event_bytes {
            return Err(EngineError::EventTooLarge {
                name: name.to_string(),
                size,
                max: self.opts.max_event_bytes,
            });
        }
        Ok(Incoming {
            id: id.unwrap_or_else(|| self.ids.next()),
            ty: NewEventType::Known(t),
            kind: spec.type_info(t).kind,
            name,
            payload,
            by: None,
        })
    }

    /// An output of execution `x` (of `step`, when known: its declared types are tried
    /// first).
    fn output(
        &self,
        step: Option<StepIdx>,
        run_key: u64,
        x: ExecutionId,
        index: u32,
        out: OutEvent,
    ) -> Incoming {
        let ty = self.out_type(step, &out.name);
        let kind = match &ty {
            NewEventType::Known(t) => self.workflow.compiled().type_info(*t).kind,
            NewEventType::Foreign { kind, .. } => *kind,
        };
        Incoming {
            id: derived_event_id(run_key, x, index),
            ty,
            kind,
            name: out.name,
            payload: out.payload,
            by: None,
        }
    }

    /// The type of an output named `name` of `step`: one the step declares (a Rust type's
    /// name is compared by address first), another type of the workflow, or a foreign one.
    #[inline]
    fn out_type(&self, step: Option<StepIdx>, name: &str) -> NewEventType {
        // Most steps return the type they declare first: one address comparison.
        if let Some(ts) = step.and_then(|s| self.out_types.get(s as usize))
            && let Some((EventName::Static(d), t)) = ts.first()
            && std::ptr::eq(*d, name)
        {
            return NewEventType::Known(*t);
        }
        self.out_type_searched(step, name)
    }

    /// The type of an output named `name` of `step` when it is the type the step declares
    /// first, by address (a Rust type's name): most steps' one output.
    #[inline(always)]
    fn out_type_declared_first(&self, step: StepIdx, name: &str) -> Option<saap_dispatch::TypeId> {
        match self.out_types.get(step as usize)?.first() {
            Some((EventName::Static(d), t)) if std::ptr::eq(*d, name) => Some(*t),
            _ => None,
        }
    }

    /// [`Shared::out_type`] by searching the step's declared types, then the workflow's.
    #[inline(never)]
    fn out_type_searched(&self, step: Option<StepIdx>, name: &str) -> NewEventType {
        let declared = step.and_then(|s| self.out_types.get(s as usize));
        let same = |declared: &EventName| match declared {
            EventName::Static(d) => *d == name,
            EventName::Shared(d) => **d == *name,
        };
        let declared = declared
            .and_then(|ts| ts.iter().find(|(n, _)| same(n)))
            .map(|(_, t)| *t);
        match declared.or_else(|| self.type_ids.get(name).copied()) {
            Some(t) => NewEventType::Known(t),
            None => NewEventType::Foreign {
                name: name.to_string(),
                kind: EventKind::from_bits(EventKind::CONTROL),
            },
        }
    }

    /// Applies one input under the run's lock and hands the journal entry to the backend.
    fn apply(&self, slot: &RunSlot, input: Input) -> Result<Applied, EngineError> {
        self.apply_with(slot, input, Vec::new(), Bind::Events)
    }

    /// [`Shared::apply`] for an input whose executions [`Shared::launch`] hands out: for the
    /// engine's local driver they are bound when their turn comes, not now (a run waiting
    /// in its queue holds no input vectors).
    fn apply_to_launch(&self, slot: &RunSlot, input: Input) -> Result<Applied, EngineError> {
        let bind = if shares_task(self) {
            Bind::Later
        } else {
            Bind::Events
        };
        self.apply_with(slot, input, Vec::new(), bind)
    }

    /// [`Shared::apply`] with the emptied input buffers of the execution that completed
    /// (kept for the run's next execution).
    fn apply_with(
        &self,
        slot: &RunSlot,
        input: Input,
        spare: Vec<Vec<BoundEvent>>,
        bind: Bind,
    ) -> Result<Applied, EngineError> {
        let mut guard = slot.lock();
        let st = &mut *guard;
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
    fn started_invocation(
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
    fn append_unjournaled(
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
    fn complete_in_place(
        &self,
        slot: &RunSlot,
        inv: &mut Invocation,
        outcome: Result<(), String>,
        spill: &mut Spill,
        queued: Option<ExecutionId>,
    ) -> Result<Completed, EngineError> {
        let mut guard = slot.lock();
        let st = &mut *guard;
        let (waits, ended) = match outcome {
            Ok(()) if !self.journal && st.failure.is_none() => {
                match self.complete_unjournaled(slot, st, inv, &mut spill.durable)? {
                    Some(done) => done,
                    // A chain link: `inv` holds the execution it started, the run goes on.
                    None => {
                        return Ok(Completed {
                            waits: false,
                            ended: false,
                            next: Next::Here,
                        });
                    }
                }
            }
            outcome => {
                // The general path takes the outputs (their vector goes to the run's spare
                // buffers); a failed step's are dropped (it may have made some).
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
                (
                    spill_durable(entry.durable, &mut spill.durable),
                    entry.ended,
                )
            }
        };
        let next = match st.run.next_started() {
            None => match queued {
                Some(x) => {
                    invocation_into(st, self, x, 1, inv);
                    Next::Queued
                }
                None => Next::None,
            },
            Some(first) => {
                invocation_into(st, self, first, 1, inv);
                // Bound when their turn comes (bindings never change once made).
                let others = &mut spill.others;
                let before = others.len();
                others.extend(std::iter::from_fn(|| st.run.next_started()));
                if others.len() == before {
                    Next::Here
                } else {
                    Next::Also
                }
            }
        };
        Ok(Completed { waits, ended, next })
    }

    /// [`Shared::apply_locked`] for what most completions are: a step that returned (its
    /// outputs in `inv.outs`, taken: the vector stays, empty, for the next execution), in an
    /// engine without a journal (nothing to encode, no precondition results to keep).
    /// Whether its durability went to `durable` (not durable at once), and whether the run
    /// ended (see [`Completed`]); `None` when the step returned a chain link and `inv`
    /// (with `inv.extract`) now holds the one execution the link started (the run goes on:
    /// nothing to wait for).
    fn complete_unjournaled(
        &self,
        slot: &RunSlot,
        st: &mut RunState,
        inv: &mut Invocation,
        durable: &mut Option<Pending<()>>,
    ) -> Result<Option<(bool, bool)>, EngineError> {
        let (execution, attempt, step) = (inv.execution, inv.attempt, inv.step);
        let outs = &mut inv.outs;
        if let [o] = &outs[..]
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
    fn after_completion(
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
        (spill_durable(sealed, durable), ended)
    }

    /// A completion the core refused: a stale one is dropped (its attempt was retried, or
    /// the execution finished already), any other is an error.
    #[cold]
    fn completion_refused(
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
    fn apply_locked(
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
        let mut pending = take_pending(st);
        pending.clear();
        let mut display_by: Vec<(u32, ExecutionId)> = Vec::new();
        let mut retried: Option<(ExecutionId, u32)> = None;
        let mut appended = None;
        let mut pre = Pre {
            results: journal.then(Vec::new),
            ..self.pre(&st.payloads, &[], &mut st.pre_cache)
        };
        let stored_input;
        match input {
            Input::Append(ev) => {
                stored_input = journal.then(|| StoredInput::Append {
                    event: stored(&ev),
                    by: ev.by.map(|x| x.0),
                });
                // Exact: the scratch lives as long as the run.
                pending.reserve_exact(1);
                pending.push((ev.id, ev.payload));
                pre.pending = &pending;
                let new = NewEvent {
                    id: ev.id,
                    ty: ev.ty,
                };
                match st.run.append(new, &mut pre) {
                    Ok(a) => {
                        if let (
                            Some(x),
                            Appended::DisplayOnly { seq } | Appended::AfterStop { seq },
                        ) = (ev.by, a)
                        {
                            display_by.push((seq, x));
                        }
                        appended = Some(a)
                    }
                    Err(saap_dispatch::run::AppendError::RunNotStarted { name, .. }) => {
                        return Err(EngineError::NotAStartEvent { name });
                    }
                    Err(e) => return Err(core_err(&e)),
                }
            }
            Input::Complete {
                execution,
                attempt,
                outcome,
            } => {
                let mut news = std::mem::take(&mut scratch(&mut st.scratch).news);
                let failed = match outcome {
                    Ok(mut outs) => {
                        let mut stored_outs = Vec::new();
                        news.clear();
                        news.reserve(outs.len());
                        pending.reserve_exact(outs.len());
                        let step = st.run.execution(execution).map(|e| e.step);
                        for (i, o) in outs.drain(..).enumerate() {
                            let ev = self.output(step, slot.run_key, execution, i as u32, o);
                            if journal {
                                stored_outs.push(stored(&ev));
                            }
                            news.push(NewEvent {
                                id: ev.id,
                                ty: ev.ty,
                            });
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
                        });
                        None
                    }
                    Err(msg) => {
                        stored_input = journal.then(|| StoredInput::Complete {
                            execution: execution.0,
                            attempt,
                            outputs: None,
                            error: Some(msg.clone()),
                        });
                        Some(Outcome::Failed(msg))
                    }
                };
                pre.pending = &pending;
                let completed = match failed {
                    None => st
                        .run
                        .complete_returned(execution, attempt, &mut news, &mut pre),
                    Some(outcome) => st.run.complete(execution, attempt, outcome, &mut pre),
                };
                if news.capacity() <= SPARE_MAX {
                    news.clear();
                    scratch(&mut st.scratch).news = news;
                }
                match completed {
                    Ok(()) => {}
                    // A completion of a stale attempt (the execution was retried) is dropped.
                    Err(CompleteError::StaleAttempt { .. } | CompleteError::AlreadyFinished(_)) => {
                        tracing::warn!(run_id = %slot.run_id(), %execution, "stale completion dropped");
                        return Ok(Entry {
                            durable: Pending::Ready(Ok(())),
                            appended: None,
                            ended: false,
                            retried: None,
                        });
                    }
                    Err(e) => return Err(core_err(&e)),
                }
            }
            Input::Retry(x) => {
                stored_input = journal.then(|| StoredInput::Retry { execution: x.0 });
                let attempt = st.run.retry(x).map_err(|e| core_err(&e))?;
                retried = Some((x, attempt));
            }
        }
        let results = pre.results.take().unwrap_or_default();
        drop(pre);
        fill_payloads(st, &mut pending);
        pending.clear();
        give_back_pending(st, pending);
        if !display_by.is_empty() {
            st.shown_by().extend(display_by);
        }

        let (durable, ended) = self.seal(slot, st, stored_input, &results);
        Ok(Entry {
            durable,
            appended,
            ended,
            retried,
        })
    }

    /// After an input was applied: notes whether it ended the run and hands its journal
    /// entry (or, without a journal, the run's end) to the store while the caller still
    /// holds the run's lock (journal order). Returns the entry's durability and whether
    /// this input ended the run with its end not durable yet: an entry durable at once (the
    /// in-memory store) marks the end durable here, so that the caller need not lock the
    /// run again for it.
    fn seal(
        &self,
        slot: &RunSlot,
        st: &mut RunState,
        stored_input: Option<StoredInput>,
        results: &[bool],
    ) -> (Pending<()>, bool) {
        let journal = self.journal;
        let mut ended = st.run.is_terminated() && !st.ended_sent;
        st.ended_sent |= ended;
        if ended {
            st.pre_cache = None;
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
                .persist_end(crate::backend::RunIdRef(slot), index)
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
                        match crate::backend::encode_entry(&input, results, &mut out) {
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
        if ended && matches!(durable, Pending::Ready(Ok(()))) {
            st.end_durable = true;
            ended = false;
        }
        (durable, ended)
    }

    /// Applies an input, waits until it is durable, then launches what it started.
    async fn submit(
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
    async fn launch(
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
    fn launch_now(self: &Arc<Self>, slot: &Arc<RunSlot>, applied: Applied) -> Launch {
        match applied {
            Applied {
                durable: Pending::Ready(stored),
                started,
                appended,
                ended,
            } => Launch::Done(self.launched(slot, stored, started, appended, ended)),
            waiting => Launch::Wait(waiting),
        }
    }

    /// What [`Shared::launch`] does once the input's entry is stored (or failed).
    fn launched(
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
            OutEvent { name, payload },
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
        self.submit(slot, Input::Append(ev))
            .await
            .map(|_| ())
            .map_err(|e| ContextError::Engine(Box::new(e)))
    }

    /// After an input with nothing started: when the run is quiet, drops it from memory
    /// (if the engine does not keep ended runs) and wakes `wait_for_end` waiters — one
    /// look under the run's lock for all three. Returns whether the run is quiet (a quiet
    /// run stays quiet: it has ended, or stopped, and starts nothing more).
    fn maybe_evict(&self, slot: &RunSlot) -> bool {
        self.maybe_evict_locked(slot, slot.lock())
    }

    /// [`Shared::maybe_evict`] with the run's lock taken (`st`, released here).
    fn maybe_evict_locked(&self, slot: &RunSlot, mut st: MutexGuard<'_, RunState>) -> bool {
        if !st.is_quiet() {
            return false;
        }
        let woken = st.waiters.take();
        if !self.opts.keep_ended_runs {
            // The run table's lock under the run's: nothing takes a run's lock while holding
            // the table's.
            let in_flight = {
                let mut runs = self.runs.write().unwrap_or_else(|p| p.into_inner());
                runs.held.remove(slot.id.as_bytes());
                runs.held.len()
            };
            // Other runs in flight: whoever waits for this one's end may hold it for a while
            // (a waiter runs after the tasks before it), and another run may be about to
            // execute for the first time: its tables go now, not when the last waiter lets
            // go.
            if in_flight > 0 {
                let spare = st.forget();
                drop(st);
                self.stash(spare);
                woken.wake();
                return true;
            }
        }
        drop(st);
        woken.wake();
        true
    }

    /// Drops a reference to a run's slot. When it was the last one (the run was evicted and
    /// nothing else holds it), the slot is kept for a new run instead of freed.
    fn release(&self, mut slot: Arc<RunSlot>) {
        // Looked at without an atomic write first: most calls let go of a slot that the run
        // table or a waiter still holds, or find the list full.
        if self.opts.keep_ended_runs
            || Arc::strong_count(&slot) > 1
            || self.spare_slot_count.load(Ordering::Relaxed) >= SPARE_SLOTS
        {
            return;
        }
        let Some(s) = Arc::get_mut(&mut slot) else {
            return;
        };
        let st = s.state.get_mut();
        if !st.fits_a_spare_slot() {
            // Too large to keep: its tables serve the next large fan-out, and its payloads'
            // allocations the next run's events (`forget` recycles them).
            let spare = st.forget();
            self.stash(spare);
            return;
        }
        // Reset here, outside the run table's lock, which a new run takes it under.
        s.recycle();
        let mut runs = self.runs.write().unwrap_or_else(|p| p.into_inner());
        if runs.spare.len() < SPARE_SLOTS {
            runs.spare.push(slot);
            self.spare_slot_count
                .store(runs.spare.len(), Ordering::Relaxed);
        }
    }

    /// Keeps an evicted run's tables for a run about to execute (small ones only, and a
    /// few), else frees them.
    fn stash(&self, spare: SpareTables) {
        if spare.core.event_capacity() > SPARE_SLOT_MAX_EVENTS
            || spare.payloads.capacity() > SPARE_SLOT_MAX_EVENTS
        {
            let bytes = spare.core.memory_bytes()
                + spare.payloads.capacity() * std::mem::size_of::<Payload>();
            if bytes <= self.opts.kept_table_bytes {
                *self.large_spare.lock().unwrap_or_else(|p| p.into_inner()) = Some(spare);
            }
            return;
        }
        let mut kept = self.spare_tables.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() < SPARE_TABLES {
            kept.push(spare);
        }
    }

    /// Before a run's first execution is bound: a run that has not executed yet (no
    /// scratch buffers) takes over the tables of an evicted run, if the engine keeps any.
    /// Inlined: most callers hold a run that executed already (a recycled slot's), and
    /// the look costs less than a call.
    #[inline]
    fn adopt_spare(&self, st: &mut RunState) {
        if self.opts.keep_ended_runs || st.scratch.is_some() {
            return;
        }
        self.adopt_spare_tables(st);
    }

    /// [`Shared::adopt_spare`] for a run that has not executed yet.
    #[inline(never)]
    fn adopt_spare_tables(&self, st: &mut RunState) {
        let spare = self
            .spare_tables
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop();
        if let Some(mut spare) = spare {
            st.adopt(&mut spare);
            // `spare` now holds the run's first-dispatch tables, freed here.
        }
    }

    /// Before a large fan-out is applied: the run takes over the tables of the last large
    /// run the engine kept (see `large_spare`) where they are larger than its own.
    #[cold]
    #[inline(never)]
    fn adopt_large(&self, st: &mut RunState) {
        if self.opts.keep_ended_runs {
            return;
        }
        let spare = self
            .large_spare
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(mut spare) = spare {
            st.adopt(&mut spare);
            // `spare` now holds the run's former tables, freed here.
        }
    }

    /// How many slots [`Shared::release`] kept for new runs.
    #[cfg(test)]
    fn spare_slots(&self) -> usize {
        self.runs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .spare
            .len()
    }

    /// The store failed for this run: it cannot continue consistently. The failure is kept
    /// on the run (shown by snapshots and the test runner) and logged.
    #[cold]
    fn storage_failed(&self, slot: &RunSlot, e: &StoreError) {
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

    /// Runs one execution's body to its end, catching panics; its outputs go to
    /// `inv.outs`.
    async fn execute(
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

    /// Makes the future of an execution's body: its context, inputs and output vector.
    fn start_body(
        self: &Arc<Self>,
        slot: &Arc<RunSlot>,
        inv: &mut Invocation,
    ) -> Result<StepFuture, String> {
        let ctx = NewCtx::Local {
            engine: self.ctx_ref,
            slot,
            execution: inv.execution,
            attempt: inv.attempt,
        };
        let outs = std::mem::take(&mut inv.outs);
        self.make_body(inv.step, &inv.inputs, ctx, outs)
    }

    /// Calls a step's handler, catching a panic. `outs` is an empty vector for the outputs
    /// (recycled by the caller, or new).
    fn make_body(
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

    fn step_name(&self, step_idx: StepIdx) -> &str {
        self.workflow
            .spec()
            .steps
            .get(step_idx as usize)
            .map_or("?", |s| s.name.as_str())
    }

    /// Polls a started body once, catching a panic. A body that ended normally is kept by
    /// this thread for its step's next execution; one that panicked is dropped.
    fn poll_body(
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
    fn first_poll(
        &self,
        slot: &RunSlot,
        inv: &mut Invocation,
        cx: &mut std::task::Context<'_>,
    ) -> Result<Result<(), String>, StepFuture> {
        let step_idx = inv.step;
        let Some(step) = self.workflow.inner.steps.get(step_idx as usize) else {
            return Ok(Err(no_step(step_idx)));
        };
        let ctx = NewCtx::Local {
            engine: self.ctx_ref,
            slot,
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
    fn start_bound(
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
    fn extract_inputs(
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
    fn extract_failed(
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
    fn extract_panicked(&self, step_idx: StepIdx, p: &Box<dyn std::any::Any + Send>) -> String {
        format!(
            "step `{}` panicked: {}",
            self.step_name(step_idx),
            panic_text(p)
        )
    }

    /// [`Shared::first_poll`] of a body run whose inputs were extracted
    /// ([`Shared::extract_inputs`]).
    fn start_prepared(
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
    async fn run_body(
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
    fn keep_buffers(&self, slot: &RunSlot, inv: Invocation) {
        keep_buffers_locked(&mut slot.lock(), inv);
    }

    /// [`Shared::keep_buffers`], then [`Shared::maybe_evict`], under one look at the run's
    /// lock: the last execution of a run that its own driver ran. Returns whether the run
    /// is quiet.
    fn keep_buffers_and_evict(&self, slot: &RunSlot, inv: Invocation) -> bool {
        let mut st = slot.lock();
        keep_buffers_locked(&mut st, inv);
        self.maybe_evict_locked(slot, st)
    }

    /// [`Shared::keep_buffers_and_evict`] for a caller that lets go of the run right after
    /// ([`Engine::run`]): a quiet run's eviction, and the wake-up of its waiters (left
    /// registered), are left to [`Shared::evict_and_release`], which takes the run table's
    /// lock once for the eviction and for keeping the slot. Returns whether the run is
    /// quiet, and whether its eviction was left to the caller.
    fn keep_buffers_and_see_end(&self, slot: &RunSlot, inv: Invocation) -> (bool, bool) {
        let mut st = slot.lock();
        keep_buffers_locked(&mut st, inv);
        if self.opts.keep_ended_runs || !st.is_quiet() {
            return (self.maybe_evict_locked(slot, st), false);
        }
        (true, true)
    }

    /// The end of a quiet run whose own driver left its eviction to the caller
    /// ([`Shared::keep_buffers_and_see_end`]), with the caller's reference to its slot:
    /// drops it from the run table and, when nothing else refers to it and no other run is
    /// held, resets it and keeps it for a new run in the same locked section; else evicts
    /// it as [`Shared::maybe_evict_locked`] does, wakes its waiters and lets it go
    /// ([`Shared::release`]).
    fn evict_and_release(&self, mut slot: Arc<RunSlot>) {
        let mut runs = self.runs.write().unwrap_or_else(|p| p.into_inner());
        runs.held.remove(slot.id.as_bytes());
        let in_flight = runs.held.len();
        // Nothing else refers to the run (so nothing waits for it: a waiter holds a
        // reference), no other run is held, the slot is small: reset under the table's
        // lock, which only a new run's lookup can wait for now.
        if in_flight == 0
            && runs.spare.len() < SPARE_SLOTS
            && let Some(s) = Arc::get_mut(&mut slot)
            && s.state.get_mut().fits_a_spare_slot()
        {
            s.recycle();
            runs.spare.push(slot);
            self.spare_slot_count
                .store(runs.spare.len(), Ordering::Relaxed);
            return;
        }
        drop(runs);
        // Else as `maybe_evict_locked` after the run left the table: with other runs in
        // flight, its tables go to the stash now (another run may be about to execute for
        // the first time).
        let mut st = slot.lock();
        let spare = (in_flight > 0).then(|| st.forget());
        let woken = st.waiters.take();
        drop(st);
        if let Some(spare) = spare {
            self.stash(spare);
        }
        woken.wake();
        self.release(slot);
    }

    /// Binds execution `x` (first attempt) into `inv`, keeping its buffers.
    fn bind(&self, slot: &RunSlot, x: ExecutionId, inv: &mut Invocation) {
        let mut st = slot.lock();
        self.adopt_spare(&mut st);
        invocation_into(&mut st, self, x, 1, inv);
    }

    /// Rebuilds a stored run through the core. Returns the slot and whether the run ended.
    fn rebuild(&self, s: StoredRun) -> Result<(Arc<RunSlot>, bool), String> {
        if let Some(damage) = s.damage() {
            return Err(damage.to_string());
        }
        let spec = self.workflow.compiled();
        let current = self.fingerprint;
        if s.meta.fingerprint != current {
            return Err(format!(
                "SAAP-R001: the workflow changed since this run was recorded (fingerprint {:016x}, now {current:016x}); resume it with the workflow version that produced it",
                s.meta.fingerprint
            ));
        }
        let key = run_key(&s.meta.run_id);
        let slot = Arc::new(RunSlot::new(
            RunIdText::from(&*s.meta.run_id),
            Thread::Given(s.meta.thread_id.clone()),
            Run::new(spec.clone(), key),
        ));
        {
            let mut guard = slot.lock();
            let st = &mut *guard;
            let to_incoming = |e: &StoredEvent| {
                let ty = match spec.type_id(&e.name) {
                    Some(t) => NewEventType::Known(t),
                    None => NewEventType::Foreign {
                        name: e.name.clone(),
                        kind: EventKind::from_bits(e.kind),
                    },
                };
                (NewEvent { id: e.id, ty }, (e.id, e.payload.clone()))
            };
            for (i, entry) in s.journal.iter().enumerate() {
                let mut pending = Vec::new();
                let mut shown_by = None;
                let input = match &entry.input {
                    StoredInput::Append { event, by } => {
                        shown_by = by.map(|x| (event.id, ExecutionId(x)));
                        let (ne, p) = to_incoming(event);
                        pending.push(p);
                        saap_dispatch::replay::RunInput::Append(ne)
                    }
                    StoredInput::Complete {
                        execution,
                        attempt,
                        outputs,
                        error,
                    } => {
                        let outcome = match (outputs, error) {
                            (_, Some(msg)) => Outcome::Failed(msg.clone()),
                            (Some(outs), None) => Outcome::Returned(
                                outs.iter()
                                    .map(|e| {
                                        let (ne, p) = to_incoming(e);
                                        pending.push(p);
                                        ne
                                    })
                                    .collect(),
                            ),
                            (None, None) => Outcome::Returned(Vec::new()),
                        };
                        saap_dispatch::replay::RunInput::Complete {
                            execution: ExecutionId(*execution),
                            attempt: *attempt,
                            outcome,
                        }
                    }
                    StoredInput::Retry { execution } => saap_dispatch::replay::RunInput::Retry {
                        execution: ExecutionId(*execution),
                    },
                };
                let mut pre = Pre {
                    replay: Some(entry.preconditions.clone().into_iter()),
                    ..self.pre(&st.payloads, &pending, &mut st.pre_cache)
                };
                st.run
                    .apply(input, &mut pre)
                    .map_err(|e| format!("SAAP-R003: journal entry {i} cannot be applied: {e}"))?;
                if pre.exhausted {
                    return Err(format!(
                        "SAAP-R002: replay diverged at journal entry {i}: the workflow now evaluates more preconditions than were recorded"
                    ));
                }
                fill_payloads(st, &mut pending);
                if let Some((id, x)) = shown_by
                    && let Some(seq) = st.run.seq_of(&id)
                {
                    st.shown_by().push((seq, x));
                }
            }
            let now = serde_json::to_value(st.run.records())
                .map_err(|e| format!("cannot encode records: {e}"))?;
            let recorded = serde_json::Value::Array(s.records.clone());
            if now != recorded {
                let (a, b) = (now.as_array(), recorded.as_array());
                let index = match (a, b) {
                    (Some(a), Some(b)) => a
                        .iter()
                        .zip(b)
                        .position(|(x, y)| x != y)
                        .unwrap_or(a.len().min(b.len())),
                    _ => 0,
                };
                return Err(format!(
                    "SAAP-R002: replay diverged at record {index}: the log says {}, the workflow now decides {}",
                    b.and_then(|b| b.get(index))
                        .map(|v| v.to_string())
                        .unwrap_or_else(|| "nothing more".into()),
                    a.and_then(|a| a.get(index))
                        .map(|v| v.to_string())
                        .unwrap_or_else(|| "nothing more".into()),
                ));
            }
            st.run.take_started();
            st.journal_len = s.journal.len() as u64;
            st.records_sent = st.run.records().len();
            st.ended_sent = s.ended;
            st.end_durable = s.ended;
            st.created = true;
        }
        Ok((slot, s.ended))
    }
}

/// The size of an event's JSON form, in bytes (an unserializable event is an error here,
/// before it enters a run).
fn slot_snapshot(slot: &RunSlot) -> RunSnapshot {
    let st = slot.lock();
    RunSnapshot {
        run_id: slot.run_id().to_string(),
        thread_id: slot.thread_id().to_string(),
        run: st.run.clone(),
        payloads: st.payloads.clone(),
        failure: st.failure.as_deref().map(String::from),
        display_by: st.displays.as_ref().map_or_else(Vec::new, |d| d.by.clone()),
    }
}

fn json_size<T: Event>(event: &T) -> Result<usize, PayloadError> {
    let mut n = crate::event::ByteCount(0);
    serde_json::to_writer(&mut n, event).map_err(|e| PayloadError::Serialize {
        name: T::NAME.to_string(),
        message: e.to_string(),
    })?;
    Ok(n.0)
}

/// [`Shared::keep_buffers`] with the run's lock taken.
#[inline]
fn keep_buffers_locked(st: &mut RunState, inv: Invocation) {
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
fn fill_payloads(st: &mut RunState, pending: &mut Vec<(EventId, Payload)>) {
    add_payloads(&st.run, &mut st.payloads, st.scratch.is_some(), pending);
}

/// [`fill_payloads`] of one event `id` (an outside event's, not a completion's: the run
/// may not execute yet), through the pending buffer [`Shared::apply_locked`] uses.
#[cold]
#[inline(never)]
fn fill_one_payload(st: &mut RunState, id: EventId, payload: Payload) {
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
fn take_pending(st: &mut RunState) -> Vec<(EventId, Payload)> {
    match st.scratch.as_mut() {
        Some(s) => std::mem::take(&mut s.pending),
        None => UNSCRATCHED_PENDING.take(),
    }
}

/// Returns the buffer [`take_pending`] took (emptied by the caller): kept by the run once
/// it executes (a run's start event alone leaves no buffers behind), else by this thread.
#[inline]
fn give_back_pending(st: &mut RunState, pending: Vec<(EventId, Payload)>) {
    match st.scratch.as_mut() {
        Some(s) => s.pending = pending,
        None if pending.capacity() <= SPARE_MAX => UNSCRATCHED_PENDING.set(pending),
        None => {}
    }
}

/// Puts the payload of the event the core just logged at `seq` (the one event `id` of a
/// completion) in the run's payload table, which mirrors the log.
#[inline]
fn put_payload(st: &mut RunState, seq: Seq, id: EventId, payload: Payload) {
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
fn add_payloads(
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
fn add_payloads_in_order(
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

fn type_name(names: &[EventName], ty: EventTy) -> EventName {
    match ty {
        EventTy::Known(t) => names
            .get(t as usize)
            .cloned()
            .unwrap_or(EventName::Static("")),
        EventTy::Foreign(_) => EventName::Static(""),
    }
}

thread_local! {
    /// The `pending` buffer of inputs to runs without scratch buffers (a start event, an
    /// event sent to a run waiting for its first step): one per thread, not one allocated
    /// and freed per such input. Empty between uses.
    static UNSCRATCHED_PENDING: std::cell::Cell<Vec<(EventId, Payload)>> =
        const { std::cell::Cell::new(Vec::new()) };
}

/// Largest buffer (elements) kept for reuse by the run's next execution: a fan-out of up
/// to this many outputs reuses its vectors from one run to the next (a recycled slot keeps
/// them), at most a few KiB each.
const SPARE_MAX: usize = SPARE_SLOT_MAX_EVENTS;

fn reusable_inputs(spare: &[Vec<BoundEvent>]) -> bool {
    spare.len() <= 16
        && spare
            .iter()
            .all(|v| v.is_empty() && v.capacity() <= SPARE_MAX)
}

fn invocation(st: &mut RunState, names: &[EventName], x: ExecutionId, attempt: u32) -> Invocation {
    let mut inv = Invocation {
        execution: x,
        attempt,
        step: 0,
        // The buffers of the run's last finished execution, when there are (no allocation).
        inputs: st
            .scratch
            .as_mut()
            .map(|s| std::mem::take(&mut s.spare_inputs))
            .unwrap_or_default(),
        outs: Vec::new(),
        bound: false,
        extract: false,
        prepared: None,
    };
    bind_events(st, names, x, attempt, &mut inv);
    inv
}

/// Turns `inv` (an execution that finished, or a new one) into the invocation of execution
/// `x`, keeping its buffers: its bound events in `inputs`, or, with `inv.extract`, its typed
/// inputs extracted now (under the run's lock, from the run's tables) into `prepared`.
fn invocation_into(
    st: &mut RunState,
    shared: &Shared,
    x: ExecutionId,
    attempt: u32,
    inv: &mut Invocation,
) {
    if !inv.extract {
        bind_events(st, &shared.type_names, x, attempt, inv);
        return;
    }
    let RunState {
        run,
        payloads,
        scratch,
        ..
    } = st;
    let step = run.execution(x).map(|e| e.step).unwrap_or(0);
    inv.prepared = Some(shared.extract_inputs(run, step, run.bindings(x), payloads));
    extracted(inv, x, attempt, step, scratch);
}

/// [`invocation_into`] (with `inv.extract`) of the execution `x` of `step` a chain link
/// just started ([`Run::take_sole_started`]): its step's one parameter is bound to the
/// link's event at `seq`.
#[inline]
fn invocation_linked(
    st: &mut RunState,
    shared: &Shared,
    x: ExecutionId,
    step: StepIdx,
    seq: Seq,
    inv: &mut Invocation,
) {
    let RunState {
        run,
        payloads,
        scratch,
        ..
    } = st;
    inv.prepared = Some(shared.extract_inputs(run, step, &[Bound::One(seq)], payloads));
    extracted(inv, x, 1, step, scratch);
}

/// The rest of an invocation whose inputs were extracted into `inv.prepared`.
#[inline(always)]
fn extracted(
    inv: &mut Invocation,
    x: ExecutionId,
    attempt: u32,
    step: StepIdx,
    scratch: &mut Option<Box<Scratch>>,
) {
    inv.execution = x;
    inv.attempt = attempt;
    inv.step = step;
    inv.bound = true;
    if inv.outs.capacity() == 0
        && let Some(s) = scratch
    {
        // A swap, not a take: `inv.outs` holds nothing to drop, and the spare gets the
        // empty vector `take` would have made.
        std::mem::swap(&mut inv.outs, &mut s.spare_outs);
    }
}

/// Binds execution `x`'s events into `inv.inputs` (see [`invocation_into`]). Exact sizes
/// for new buffers: a vector grown by pushing starts at room for four.
fn bind_events(
    st: &mut RunState,
    names: &[EventName],
    x: ExecutionId,
    attempt: u32,
    inv: &mut Invocation,
) {
    let RunState {
        run,
        payloads,
        scratch,
        ..
    } = st;
    let step = run.execution(x).map(|e| e.step).unwrap_or(0);
    let log = run.log();
    let bindings = run.bindings(x);
    let inputs = &mut inv.inputs;
    if inputs.len() != bindings.len() {
        inputs.truncate(bindings.len());
        inputs.reserve_exact(bindings.len() - inputs.len());
        inputs.resize_with(bindings.len(), Vec::new);
    }
    let bound = |seq: Seq| BoundEvent {
        id: log[seq as usize].id,
        name: type_name(names, log[seq as usize].ty),
        payload: payloads[seq as usize].clone(),
    };
    for (pi, (b, events)) in bindings.iter().zip(inputs.iter_mut()).enumerate() {
        events.clear();
        match *b {
            Bound::Nothing => {}
            // A required or optional parameter (most of them): no slice to go through.
            Bound::One(seq) => {
                events.reserve_exact(1);
                events.push(bound(seq));
            }
            Bound::First(_) => {
                let seqs = run.bound_seqs(step, pi as u32, *b);
                events.reserve_exact(seqs.len());
                events.extend(seqs.iter().map(|&seq| bound(seq)));
            }
        }
    }
    inv.execution = x;
    inv.attempt = attempt;
    inv.step = step;
    inv.bound = true;
    if inv.outs.capacity() == 0 {
        if let Some(s) = scratch {
            inv.outs = std::mem::take(&mut s.spare_outs);
        }
    }
}

fn spawn_drive(shared: Arc<Shared>, slot: Arc<RunSlot>, inv: Invocation) {
    if shares_task(&shared) {
        enqueue_local(&shared, [inv.queued(&slot)]);
    } else {
        tokio::spawn(drive(shared, slot, inv));
    }
}

/// [`spawn_drive`] for an execution not bound yet.
fn spawn_started(shared: Arc<Shared>, slot: Arc<RunSlot>, x: ExecutionId) {
    tokio::spawn(async move {
        let mut inv = Invocation::empty();
        shared.bind(&slot, x, &mut inv);
        drive(shared, slot, inv).await;
    });
}

/// Launches the executions an outside input started on tasks of their own: one task for
/// all of them where tasks add no parallelism ([`shares_task`]), else one each.
fn spawn_all(shared: &Arc<Shared>, slot: &Arc<RunSlot>, started: Started) {
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
async fn drive(shared: Arc<Shared>, slot: Arc<RunSlot>, inv: Invocation) {
    drive_spawning(&shared, &slot, inv).await;
    shared.release(slot);
}

/// Drives the executions an input started on this task: none — the run may have ended;
/// one — inline; several — together on this task or, where tasks add parallelism, the
/// others on their own tasks.
/// `shares`: [`shares_task`], as the caller saw it.
async fn drive_started(
    shared: &Arc<Shared>,
    slot: &Arc<RunSlot>,
    started: Started,
    shares: bool,
) -> bool {
    match started {
        Started::None => shared.maybe_evict(slot),
        Started::One(first) => drive_steps(shared, slot, first, shares).await,
        Started::Many(all) if shares => {
            drive_local(shared, None, Some(queued(slot, all)), None, Own::Held(slot)).await
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
async fn drive_steps(
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
            Own::Held(slot),
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
async fn drive_spawning(shared: &Arc<Shared>, slot: &Arc<RunSlot>, mut inv: Invocation) {
    let mut spill = Spill::default();
    loop {
        let mut here = None;
        if let Some(executor) = shared.executor.get() {
            match executor.run_here() {
                // A free local slot: the body runs on this task, held until it ends.
                Some(local) => here = Some(local),
                None => {
                    // The body runs elsewhere; its completion comes back as an input of the
                    // run.
                    executor.execute(distributed::work(slot, inv));
                    return;
                }
            }
        }
        let result = shared.execute(slot, &mut inv).await;
        drop(here);
        let Some(done) = complete(shared, slot, &mut inv, result, &mut spill, None) else {
            return;
        };
        let stored = if done.waits {
            spill.durable().wait().await
        } else {
            Ok(())
        };
        if durable(shared, slot, done.ended, stored).is_none() {
            return;
        }
        match done.next {
            Next::None => {
                shared.keep_buffers(slot, inv);
                let _quiet = shared.maybe_evict(slot);
                return;
            }
            Next::Here | Next::Queued => {}
            Next::Also => {
                for x in spill.others.drain(..) {
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

/// Whether all executions of a run should share the task that drives it: on a
/// current-thread runtime tasks add no parallelism, and with the in-memory backend the
/// task never waits for a store while others are pending on it.
fn shares_task(shared: &Shared) -> bool {
    !shared.journal
        && shared.opts.inline_single
        && shared.executor.get().is_none()
        && tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread)
}

/// A body that did not end at its first poll, polled among the run's others.
/// It ends with its outputs in the invocation's `outs`.
type Running = Pin<Box<dyn Future<Output = (Arc<RunSlot>, Invocation, Result<(), String>)> + Send>>;

/// The executions a per-run local driver has queued or waiting besides the one it runs
/// (boxed: a chain, whose driver never needs them, keeps a small task).
#[derive(Default)]
struct Fanout {
    queue: VecDeque<Queued>,
    waiting: Option<FuturesUnordered<Running>>,
    /// The buffers of an execution that finished, for the next one to bind.
    spare: Option<Invocation>,
}

/// Executions started by inputs from other tasks, waiting for the engine's driver (see
/// [`enqueue_local`]).
#[derive(Default)]
pub(crate) struct LocalQueue {
    items: VecDeque<Queued>,
    /// A driver task exists (it empties the queue, then clears this under the lock).
    driving: bool,
    /// The thread whose current-thread runtime the driver was spawned on.
    thread: Option<std::thread::ThreadId>,
    /// The driver found the queue empty and waits for `local_wake` (with bodies that wait):
    /// only then does a new item wake it (else it takes the item on its next look).
    parked: bool,
}

/// Hands executions to the engine's local driver, spawning it when none runs: on a
/// current-thread in-memory engine ([`shares_task`]) a run started with `start_run` (or
/// woken by `send`) costs a queue entry, not a task.
fn enqueue_local(shared: &Arc<Shared>, items: impl IntoIterator<Item = Queued>) {
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
fn spawn_own_driver(shared: &Arc<Shared>, item: Queued) {
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
                drive_local(&shared, None, Some(fan), None, Own::Held(&slot)).await;
                shared.release(slot);
                return;
            }
        };
        drive_local(
            &shared,
            Some((slot.clone(), inv)),
            None,
            None,
            Own::Held(&slot),
        )
        .await;
        shared.release(slot);
    });
}

/// The engine's local driver: [`drive_local`] over the engine's queue, until it is empty.
async fn engine_driver(shared: Arc<Shared>) {
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
    drive_local(&shared, None, None, Some(&mut guard.1), Own::None).await;
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
async fn drive_local(
    shared: &Arc<Shared>,
    mut next: Option<(Arc<RunSlot>, Invocation)>,
    mut fan: Option<Box<Fanout>>,
    mut engine: Option<&mut bool>,
    mut own: Own<'_>,
) -> bool {
    let mut spill = Spill::default();
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
                        Some(Turn::Bound(bound)) => *bound,
                        Some(Turn::Started(slot, x)) => {
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
            let Some(done) = complete(shared, &slot, &mut inv, result, &mut spill, queued) else {
                let _quiet = shared.maybe_evict(&slot);
                own.let_go(shared, slot);
                continue 'drive;
            };
            let stored = if done.waits {
                Box::pin(spill.durable().wait()).await
            } else {
                Ok(())
            };
            if durable(shared, &slot, done.ended, stored).is_none() {
                own.let_go(shared, slot);
                continue 'drive;
            }
            match done.next {
                Next::None => {
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
                                Own::Handed { back, .. } => {
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
                Next::Here => {}
                Next::Queued => {
                    // `inv` holds the queue's front now.
                    if let Some(f) = fan.as_mut() {
                        skip_queued(&mut f.queue);
                    }
                }
                Next::Also => match engine {
                    Some(_) => {
                        let mut q = shared.local.lock().unwrap_or_else(|p| p.into_inner());
                        queue_started(&mut q.items, &slot, &mut spill.others);
                    }
                    None => {
                        let f = fan.get_or_insert_with(Box::default);
                        queue_started(&mut f.queue, &slot, &mut spill.others);
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
        Own::None => false,
        Own::Held(slot) => shared.maybe_evict(slot),
        Own::Handed { back, .. } => back
            .as_ref()
            .is_some_and(|(slot, _)| shared.maybe_evict(slot)),
    }
}

/// The run a per-run [`drive_local`] drives for its caller (none for the engine's driver).
enum Own<'a> {
    None,
    /// The caller holds a reference to the run's slot: the driver sees whether the run is
    /// quiet, and evicts it, when it stops.
    Held(&'a Arc<RunSlot>),
    /// The caller ([`Engine::run`]) handed its reference to the run's slot over with the
    /// run's first execution (no reference added and dropped for the driver) and gets one
    /// back in `back`, with whether the driver stopped with the run quiet and left its
    /// eviction to the caller ([`Shared::evict_and_release`]). `run`: the slot's address.
    Handed {
        run: usize,
        back: &'a mut Option<(Arc<RunSlot>, bool)>,
    },
}

impl Own<'_> {
    /// Whether `slot` is the run's.
    fn is(&self, slot: &Arc<RunSlot>) -> bool {
        match self {
            Own::None => false,
            Own::Held(r) => Arc::ptr_eq(r, slot),
            Own::Handed { run, .. } => Arc::as_ptr(slot) as usize == *run,
        }
    }

    /// Lets go of a reference to a slot: kept for the caller when it is the first of a
    /// handed run's that the driver lets go of, else [`Shared::release`]d.
    fn let_go(&mut self, shared: &Shared, slot: Arc<RunSlot>) {
        if let Own::Handed { run, back } = self
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
fn start_and_poll<'a>(
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
fn park(
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
fn queued(slot: &Arc<RunSlot>, all: Vec<Invocation>) -> Box<Fanout> {
    Box::new(Fanout {
        queue: all.into_iter().map(|inv| inv.queued(slot)).collect(),
        ..Fanout::default()
    })
}

/// After a body ended: releases the bound events (the buffers stay).
fn end_body(inv: &mut Invocation) {
    for events in &mut inv.inputs {
        events.clear();
    }
}

/// [`RunSlot::bump`] of a run that was watched once.
#[cold]
#[inline(never)]
fn bump_watched(tx: &watch::Sender<u64>) {
    // A watcher checks the state after subscribing, so skipping the notification when
    // nobody watches loses no change.
    if tx.receiver_count() > 0 {
        tx.send_modify(|v| *v += 1);
    }
}

/// Keeps an entry's durability in `spill` unless it was durable at once: whether it did.
#[inline]
fn spill_durable(durable: Pending<()>, spill: &mut Option<Pending<()>>) -> bool {
    if matches!(durable, Pending::Ready(Ok(()))) {
        return false;
    }
    *spill = Some(durable);
    true
}

/// Feeds a finished execution back to the core (not yet durable); `inv` becomes the first
/// execution it started, if any. `None` when the completion was refused.
fn complete(
    shared: &Shared,
    slot: &RunSlot,
    inv: &mut Invocation,
    mut result: Result<(), String>,
    spill: &mut Spill,
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
    match shared.complete_in_place(slot, inv, result, spill, queued) {
        Ok(done) => Some(done),
        Err(e) => {
            tracing::error!(run_id = %slot.run_id(), error = %e, "completion refused");
            None
        }
    }
}

/// Why an output cannot be stored: its JSON form cannot be made, or is larger than `max`
/// bytes (the limit `send` enforces on incoming events).
fn stored_output_error(out: &OutEvent, max: usize) -> Option<String> {
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
fn durable(
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
fn no_step(step_idx: StepIdx) -> String {
    format!("the workflow has no step {step_idx}")
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-text panic payload".to_string()
    }
}

/// Whether an execution is still running (re-exported for reports).
pub fn is_running(state: ExecState) -> bool {
    state == ExecState::Running
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// A fan-out's payloads take the room the core reserved in the log for the fan-out and
    /// the events its workers return: the workers' payloads are added without the table
    /// growing (and copying every payload) on the way.
    #[test]
    fn a_fan_outs_payloads_take_the_room_the_core_reserved_for_its_workers() {
        use saap_dispatch::{DeclaredConditions, NewEvent, SpecSyntax, compile_spec_text};
        let spec = compile_spec_text(
            "name: W\nevents: [{name: A}, {name: R}]\nsteps:\n  - {name: fan, params: [{name: s, kind: required, types: [StartEvent]}], outputs: [A]}\n  - {name: work, params: [{name: a, kind: required, types: [A]}], outputs: [R]}\n  - {name: join, params: [{name: xs, kind: fixed_list, size: 500, types: [R]}]}\n",
            SpecSyntax::Yaml,
        )
        .unwrap();
        let (start, a, r) = (
            spec.type_id("StartEvent").unwrap(),
            spec.type_id("A").unwrap(),
            spec.type_id("R").unwrap(),
        );
        let mut run = Run::new(Arc::new(spec), 9);
        let mut payloads = Vec::new();
        let null = || Payload::from_json(serde_json::Value::Null);
        let mut offer = |run: &mut Run, x: Option<ExecutionId>, news: Vec<NewEvent>| {
            let mut pending: Vec<_> = news.iter().map(|e| (e.id, null())).collect();
            match x {
                None => {
                    for e in news {
                        run.append(e, &mut DeclaredConditions).unwrap();
                    }
                }
                Some(x) => run
                    .complete(x, 1, Outcome::Returned(news), &mut DeclaredConditions)
                    .unwrap(),
            }
            add_payloads(run, &mut payloads, true, &mut pending);
            assert_eq!(payloads.len(), run.log().len());
            payloads.as_ptr()
        };
        offer(
            &mut run,
            None,
            vec![NewEvent::known(EventId::from_bytes([1; 12]), start)],
        );
        let fan = run.next_started().unwrap();
        let items = (0..500)
            .map(|i| NewEvent::known(derived_event_id(9, fan, i), a))
            .collect();
        let sized = offer(&mut run, Some(fan), items);
        for w in run.drain_started().collect::<Vec<_>>() {
            let out = vec![NewEvent::known(derived_event_id(9, w, 0), r)];
            assert_eq!(offer(&mut run, Some(w), out), sized, "the payloads grew");
        }
        assert_eq!(run.log().len(), 1 + 2 * 500);
    }

    /// A step's context drops only what it owns, out of line (`StepCtx`'s `Drop`): the
    /// run's slot it looked up and a thread id too long to hold inline are given back, so
    /// a context that skips its drop glue leaks nothing.
    #[tokio::test(flavor = "current_thread")]
    async fn a_dropped_context_gives_back_the_slot_it_looked_up_and_its_long_thread_id() {
        use crate::event::UserMessageEvent;
        let engine = Engine::in_memory(slow_or_fast());
        let long = "t".repeat(40);
        let run = engine
            .start_run_in(Some(&long), UserMessageEvent::new("slow"))
            .await
            .unwrap();
        let slot = engine.shared.slot(&run).unwrap();
        let thread = slot.given_thread().unwrap().clone();
        let (slots, threads) = (Arc::strong_count(&slot), Arc::strong_count(&thread));
        for look_up in [false, true] {
            let ctx = StepCtx::local(engine.shared.ctx_ref, &slot, ExecutionId(0), 0);
            assert_eq!(
                (ctx.run_id(), ctx.thread_id()),
                (run.as_str(), long.as_str())
            );
            assert_eq!(
                Arc::strong_count(&thread),
                threads + 1,
                "the long id is shared"
            );
            if look_up {
                // Reading the start event's fields looks the run's slot up and keeps it.
                assert!(!ctx.start_fields().is_null());
                assert_eq!(Arc::strong_count(&slot), slots + 1, "the slot is kept");
            }
            drop(ctx);
            assert_eq!(Arc::strong_count(&slot), slots, "the slot was given back");
            assert_eq!(Arc::strong_count(&thread), threads, "the id was given back");
        }
        // A context of the same run with ids held inline owns nothing: it drops in place.
        let short = engine
            .start_run_in(Some("short"), UserMessageEvent::new("slow"))
            .await
            .unwrap();
        let short_slot = engine.shared.slot(&short).unwrap();
        let n = Arc::strong_count(&short_slot);
        let ctx = StepCtx::local(engine.shared.ctx_ref, &short_slot, ExecutionId(0), 0);
        assert_eq!(ctx.thread_id(), "short");
        drop(ctx);
        assert_eq!(Arc::strong_count(&short_slot), n);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_ended_body_run_is_kept_by_its_thread_and_its_step_starts_in_it_again() {
        use crate::event::{StopEvent, UserMessageEvent};
        use crate::workflow::{StepRun, body_run, kept_bodies, recycle_body};
        let engine = Engine::in_memory(slow_or_fast());
        // A run whose body waits: its slot gives the bodies below a context.
        let run = engine
            .start_run(UserMessageEvent::new("slow"))
            .await
            .unwrap();
        let slot = engine.shared.slot(&run).unwrap();
        let ctx = || {
            NewCtx::Made(Box::new(StepCtx::local(
                engine.shared.ctx_ref,
                &slot,
                ExecutionId(0),
                0,
            )))
        };
        let bound = |m: &str| {
            vec![vec![BoundEvent {
                id: EventId::from_bytes([7; 12]),
                name: crate::params::EventName::Static("UserMessageEvent"),
                payload: Payload::typed(UserMessageEvent::new(m)),
            }]]
        };
        let step = &engine.shared.workflow.inner.steps[0];
        let address = |f: &StepFuture| &**f as *const dyn StepRun as *const u8;
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let kept_before = kept_bodies();

        let mut first = body_run(step);
        let at = address(&first);
        let Ok(Poll::Ready(Ok(out))) = first.as_mut().start(
            &step.body_fn,
            &bound("fast"),
            ctx(),
            Vec::new(),
            Some(&mut cx),
        ) else {
            panic!("a ready body ends at its first poll");
        };
        assert!(out[0].payload.get::<StopEvent>().is_some());
        recycle_body(step.key, first);
        assert_eq!(kept_bodies(), kept_before + 1, "the ended run is kept");

        let mut again = body_run(step);
        assert_eq!(address(&again), at, "the allocation is reused");
        assert_eq!(kept_bodies(), kept_before);
        let Ok(Poll::Pending) =
            again
                .as_mut()
                .start(&step.body_fn, &bound("fast"), ctx(), Vec::new(), None)
        else {
            panic!("a body started without a context is not polled yet");
        };
        let Poll::Ready(Ok(out)) = again.as_mut().poll(&mut cx) else {
            panic!("the restarted body runs its new future");
        };
        assert_eq!(out.len(), 1);
        assert!(
            matches!(again.as_mut().poll(&mut cx), Poll::Ready(Err(_))),
            "an ended run polled again is an error, not a panic"
        );
        assert!(
            again
                .as_mut()
                .start(&step.body_fn, &[], ctx(), Vec::new(), None)
                .is_err(),
            "inputs that do not fit the step are an error, not a panic"
        );
        let mut waits = body_run(step);
        assert_ne!(address(&waits), at, "a body in use is not handed out twice");
        assert!(matches!(
            waits.as_mut().start(
                &step.body_fn,
                &bound("slow"),
                ctx(),
                Vec::new(),
                Some(&mut cx)
            ),
            Ok(Poll::Pending)
        ));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_new_runs_thread_id_is_a_fresh_object_id_made_once_and_a_given_one_is_kept() {
        use crate::event::UserMessageEvent;
        let engine = Engine::in_memory(slow_or_fast());
        let a = engine
            .start_run(UserMessageEvent::new("fast"))
            .await
            .unwrap();
        let b = engine
            .start_run(UserMessageEvent::new("fast"))
            .await
            .unwrap();
        let ta = engine.snapshot(&a).unwrap().thread_id;
        let tb = engine.snapshot(&b).unwrap().thread_id;
        assert!(
            ta.len() == 24 && ta.bytes().all(|c| c.is_ascii_hexdigit()),
            "{ta}"
        );
        assert!(ta != a && ta != b && ta != tb, "every id is its own");
        assert_eq!(engine.snapshot(&a).unwrap().thread_id, ta, "made once");
        let c = engine
            .start_run_in(Some(&ta), UserMessageEvent::new("fast"))
            .await
            .unwrap();
        assert_eq!(engine.snapshot(&c).unwrap().thread_id, ta);
    }

    #[test]
    fn a_new_runs_ids_are_unique_and_well_formed() {
        let g = IdGen::new();
        let mut ids = std::collections::HashSet::new();
        for _ in 0..5_000 {
            let r = g.next_run();
            ids.insert(r.run.to_string());
            ids.insert(r.thread.to_string());
            ids.insert(r.start.to_string());
            ids.insert(g.next().to_string());
        }
        assert_eq!(ids.len(), 20_000);
        assert!(
            ids.iter()
                .all(|i| i.len() == 24 && i.bytes().all(|b| b.is_ascii_hexdigit()))
        );
    }

    #[test]
    fn a_run_ids_text_and_key_are_its_hex_and_run_key_whatever_id_came_before() {
        // Ids of two processes and two seconds, interleaved: the thread's cached head is
        // replaced each time it differs.
        let ids = [
            EventId::object_id(0x6553_f100, [1, 2, 3, 4, 5], 7),
            EventId::object_id(0x6553_f100, [1, 2, 3, 4, 5], 8),
            EventId::object_id(0x6553_f101, [1, 2, 3, 4, 5], 9),
            EventId::object_id(0x6553_f101, [9, 2, 3, 4, 5], 9),
            EventId::object_id(0x6553_f100, [1, 2, 3, 4, 5], 0xff_ffff),
        ];
        for id in ids.iter().chain(ids.iter().rev()) {
            let (text, key) = run_id_text(id);
            let text = std::str::from_utf8(&text).expect("hex is ASCII");
            assert_eq!(text, id.to_string());
            assert_eq!(text, &*hex_id(id));
            assert_eq!(key, run_key(text));
        }
    }

    #[test]
    fn the_run_table_hash_spreads_engine_made_ids_over_its_low_bits() {
        // Engine-made run ids differ in their last characters only; the table picks a
        // bucket by the hash's low bits and a group by its top 7.
        use std::hash::BuildHasher;
        let g = IdGen::new();
        let n = 1 << 16;
        let (mut low, mut top) = (vec![0u32; 1024], vec![0u32; 128]);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..n {
            let id = hex_id(&g.next());
            let h = RunIdBuild::default().hash_one(&*id);
            seen.insert(h);
            low[(h & 1023) as usize] += 1;
            top[(h >> 57) as usize] += 1;
        }
        assert_eq!(seen.len(), n, "no two ids hash alike");
        // 64 per bucket on average; a uniform spread stays well within 2x.
        assert!(low.iter().all(|&c| (32..=128).contains(&c)), "{low:?}");
        assert!(top.iter().all(|&c| (256..=768).contains(&c)), "{top:?}");
    }

    #[test]
    fn ids_are_unique_and_well_formed() {
        let g = IdGen::new();
        let ids: std::collections::HashSet<String> =
            (0..10_000).map(|_| g.next().to_string()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(
            ids.iter()
                .all(|i| i.len() == 24 && i.bytes().all(|b| b.is_ascii_hexdigit()))
        );
    }

    #[test]
    fn kind_bits_round_trip() {
        for bits in 0..32u8 {
            assert_eq!(EventKind::from_bits(bits).bits(), bits);
        }
    }

    /// A chain that waits for an outside answer, showing a display event on the way.
    fn asking() -> Workflow {
        use crate::event::{
            ChunkEvent, HumanInTheLoopRequestEvent, HumanInTheLoopResponseEvent, StopEvent,
            UserMessageEvent,
        };
        use crate::params::Required;
        use crate::workflow::{Step, StepError};
        Workflow::builder("Asking")
            .step(Step::new(
                "ask",
                |_: Required<UserMessageEvent>, ctx: StepCtx| async move {
                    ctx.display(&ChunkEvent::default())
                        .await
                        .map_err(|e| StepError::new(e.to_string()))?;
                    Ok::<_, StepError>(HumanInTheLoopRequestEvent::default())
                },
            ))
            .step(Step::new(
                "answer",
                |_: Required<HumanInTheLoopResponseEvent>, _: StepCtx| async {
                    Ok::<_, StepError>(StopEvent::default())
                },
            ))
            .build()
            .expect("valid workflow")
    }

    #[test]
    fn the_names_of_rust_event_types_are_bound_without_a_reference_count() {
        let engine = Engine::in_memory(asking());
        let names = &engine.shared.type_names;
        let spec = engine.shared.workflow.compiled();
        let name_of = |n: &str| {
            spec.types
                .iter()
                .position(|t| t.name == n)
                .map(|i| names[i].clone())
                .expect("a declared type")
        };
        for rust_type in [
            "UserMessageEvent",
            "HumanInTheLoopRequestEvent",
            "StopEvent",
        ] {
            let name = name_of(rust_type);
            assert!(
                matches!(name, EventName::Static(_)),
                "{rust_type}: {name:?}"
            );
            assert_eq!(name, rust_type);
        }
        // Every type has its own name, in the spec's order.
        for (t, name) in spec.types.iter().zip(names.iter()) {
            assert_eq!(*name, *t.name);
        }
    }

    #[tokio::test]
    async fn a_step_context_kept_beyond_its_engine_says_the_engine_is_gone() {
        use crate::event::{StopEvent, UserMessageEvent};
        use crate::params::Required;
        use crate::workflow::{Step, StepError};
        let kept: Arc<Mutex<Option<StepCtx>>> = Arc::default();
        let keep = kept.clone();
        let wf = Workflow::builder("Keeper")
            .step(Step::new(
                "keep",
                move |_: Required<UserMessageEvent>, ctx: StepCtx| {
                    let keep = keep.clone();
                    async move {
                        ctx.run_context()
                            .set("seen", &1u32)
                            .await
                            .map_err(|e| StepError::new(e.to_string()))?;
                        *keep.lock().unwrap_or_else(|p| p.into_inner()) = Some(ctx);
                        Ok::<_, StepError>(StopEvent::default())
                    }
                },
            ))
            .build()
            .expect("valid workflow");
        let engine = Engine::in_memory(wf);
        engine.run(UserMessageEvent::new("go")).await.expect("run");
        let ctx = kept
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .expect("kept");
        // While the engine exists, the kept context still reaches it.
        assert!(ctx.thread_context().get::<u32>("x").await.is_ok());
        drop(engine);
        assert_eq!(
            ctx.run_context().get::<u32>("seen").await,
            Err(ContextError::EngineGone),
            "a context does not keep its engine alive"
        );
        assert_eq!(
            ctx.display(&crate::event::ChunkEvent::default()).await,
            Err(ContextError::EngineGone)
        );
    }

    /// A task waiting for the run's end.
    fn spawn_waiter(engine: &Engine, id: &str) -> tokio::task::JoinHandle<Result<(), EngineError>> {
        let (engine, id) = (engine.clone(), id.to_string());
        tokio::spawn(async move { engine.wait_for_end(&id).await })
    }

    /// Answers the run's question, then expects `waiter` to be woken (`why` if not).
    async fn answer_and_expect_woken(
        engine: &Engine,
        id: &str,
        waiter: tokio::task::JoinHandle<Result<(), EngineError>>,
        why: &str,
    ) {
        engine
            .send(id, crate::event::HumanInTheLoopResponseEvent::default())
            .await
            .unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(10), waiter)
            .await
            .expect(why)
            .unwrap()
            .unwrap();
    }

    /// Answers every run of `asking()` in `ids` while a task per run waits for its end (so
    /// that the runs are evicted while something still holds them), and waits for those
    /// tasks.
    async fn answer_all_while_waited_for(engine: &Engine, ids: &[String]) {
        use crate::event::HumanInTheLoopResponseEvent;
        let waiters: Vec<_> = ids.iter().map(|id| spawn_waiter(engine, id)).collect();
        tokio::task::yield_now().await;
        for id in ids {
            engine
                .send(id, HumanInTheLoopResponseEvent::default())
                .await
                .unwrap();
        }
        for w in waiters {
            w.await.unwrap().unwrap();
        }
    }

    /// Waits until the run logged `n` events (start, display, request: it waits).
    async fn logged(engine: &Engine, run: &str, n: usize) -> RunSnapshot {
        let mut rx = engine.watch(run).expect("live run");
        loop {
            let snap = engine.snapshot(run).expect("live run");
            if snap.run.log().len() >= n {
                return snap;
            }
            tokio::time::timeout(std::time::Duration::from_secs(10), rx.changed())
                .await
                .expect("the run makes progress")
                .expect("the run is live");
        }
    }

    /// An in-memory engine of `asking` that keeps no ended runs.
    fn forgetful_engine() -> Engine {
        Engine::new(
            asking(),
            Arc::new(crate::backend::memory::MemoryBackend::new()),
            EngineOptions {
                keep_ended_runs: false,
                ..EngineOptions::default()
            },
        )
    }

    #[derive(Debug, Clone, saap::Event, serde::Serialize, serde::Deserialize)]
    struct FanItem {
        v: u32,
    }
    #[derive(Debug, Clone, saap::Event, serde::Serialize, serde::Deserialize)]
    struct FanResult {
        v: u32,
    }

    /// An engine keeping no ended runs, of a fan-out of 300 items to workers and a fixed-list
    /// fan-in: 603 events a run, more than a kept slot may hold (`SPARE_SLOT_MAX_EVENTS`).
    fn large_fan_out_engine() -> Engine {
        large_fan_out_engine_with(EngineOptions {
            keep_ended_runs: false,
            ..EngineOptions::default()
        })
    }

    fn large_fan_out_engine_with(opts: EngineOptions) -> Engine {
        use crate::event::{StopEvent, UserMessageEvent};
        use crate::params::{FixedList, Required};
        use crate::workflow::{Step, StepError};
        let workflow = Workflow::builder("Fan")
            .step(Step::new(
                "fan",
                |_: Required<UserMessageEvent>, _: StepCtx| async {
                    Ok::<_, StepError>((0..300).map(|v| FanItem { v }).collect::<Vec<_>>())
                },
            ))
            .step(Step::new(
                "work",
                |i: Required<FanItem>, _: StepCtx| async move {
                    Ok::<_, StepError>(FanResult { v: i.v })
                },
            ))
            .step(Step::new(
                "join",
                |_: FixedList<FanResult, 300>, _: StepCtx| async {
                    Ok::<_, StepError>(StopEvent::default())
                },
            ))
            .build()
            .expect("valid workflow");
        Engine::new(
            workflow,
            Arc::new(crate::backend::memory::MemoryBackend::new()),
            opts,
        )
    }

    /// An engine told to keep no large tables (`kept_table_bytes: 0`) holds none once a
    /// large run ended, and still runs the next one alike.
    #[tokio::test(flavor = "current_thread")]
    async fn an_engine_keeps_no_large_tables_past_its_kept_table_bytes() {
        use crate::event::UserMessageEvent;
        let engine = large_fan_out_engine_with(EngineOptions {
            keep_ended_runs: false,
            kept_table_bytes: 0,
            ..EngineOptions::default()
        });
        for _ in 0..2 {
            engine.run(UserMessageEvent::new("one")).await.unwrap();
            assert!(
                engine.shared.large_spare.lock().unwrap().is_none(),
                "nothing kept past the limit"
            );
        }
    }

    /// A run too large for its slot to be kept still hands its payloads' allocations to the
    /// thread for the next run's events: a second fan-out of 300 reuses the first one's
    /// instead of allocating 600 more.
    #[tokio::test(flavor = "current_thread")]
    async fn a_large_runs_payloads_serve_the_next_runs_events() {
        use crate::event::{UserMessageEvent, pooled_payloads};
        let engine = large_fan_out_engine();
        assert_eq!(pooled_payloads::<FanItem>().0, 0);
        for _ in 0..2 {
            engine.run(UserMessageEvent::new("go")).await.unwrap();
            assert_eq!(pooled_payloads::<FanItem>().0, 300);
            assert_eq!(pooled_payloads::<FanResult>().0, 300);
        }
    }

    /// A run too large for its slot to be kept leaves its tables to the engine, and the next
    /// large fan-out takes them over (the same allocations, not new ones faulted in again);
    /// its result is the same.
    #[tokio::test(flavor = "current_thread")]
    async fn a_large_fan_out_takes_over_the_tables_of_the_last_large_run() {
        use crate::event::UserMessageEvent;
        let engine = large_fan_out_engine();
        let kept = |e: &Engine| {
            let large = e.shared.large_spare.lock().unwrap();
            large
                .as_ref()
                .map(|t| (t.core.event_capacity(), t.payloads.as_ptr()))
        };
        assert_eq!(kept(&engine), None);
        engine.run(UserMessageEvent::new("one")).await.unwrap();
        let (events, first) = kept(&engine).expect("the large run's tables are kept");
        assert!(events >= 603, "room for {events} events");
        for n in 0..3 {
            let id = engine.run(UserMessageEvent::new("again")).await.unwrap();
            assert!(engine.snapshot(&id).is_none(), "ended runs are not kept");
            assert_eq!(
                kept(&engine),
                Some((events, first)),
                "run {n}: the same tables went round"
            );
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_slots_id_text_is_the_returned_run_id_and_unique_per_run_in_reused_slots() {
        use crate::event::{HumanInTheLoopResponseEvent, UserMessageEvent};
        let engine = forgetful_engine();
        let mut seen = std::collections::HashSet::new();
        for n in 0..4 {
            let id = engine.start_run(UserMessageEvent::new("a")).await.unwrap();
            assert!(
                id.len() == 24 && id.bytes().all(|c| c.is_ascii_hexdigit()),
                "run {n}: {id}"
            );
            assert!(seen.insert(id.clone()), "run {n}: {id} was given before");
            let slot = engine
                .shared
                .slot(&id)
                .expect("a live run is found by its id");
            // A slot reused from an ended run (n > 0) shows the new run's id, however the
            // id is read: inline bytes, shared text made on first use, owned text.
            assert_eq!(slot.id_text().as_bytes(), id.as_bytes(), "run {n}");
            assert_eq!(&**slot.run_id(), id, "run {n}");
            assert_eq!(slot.run_id_string(), id, "run {n}");
            assert_eq!(engine.snapshot(&id).map(|s| s.run_id), Some(id.clone()));
            drop(slot);
            engine
                .send(&id, HumanInTheLoopResponseEvent::default())
                .await
                .unwrap();
            engine.wait_for_end(&id).await.unwrap();
            assert!(engine.snapshot(&id).is_none(), "run {n}: evicted");
            assert_eq!(engine.shared.spare_slots(), 1, "run {n}: its slot is kept");
        }
    }

    #[test]
    fn a_run_id_that_is_not_engine_made_is_kept_as_given() {
        for id in ["r", "0123456789abcdef0123456X", "0123456789ABCDEF01234567"] {
            let text = RunIdText::from(id);
            assert!(matches!(text, RunIdText::Other(_)), "{id}");
            assert_eq!(text.as_bytes(), id.as_bytes());
        }
        let hex = "0123456789abcdef01234567";
        assert!(matches!(RunIdText::from(hex), RunIdText::Hex(_)));
        let engine = Engine::in_memory(asking());
        for id in ["r", hex] {
            let slot = RunSlot::new(
                id.into(),
                Thread::Given("t".into()),
                Run::new(engine.workflow().compiled().clone(), 1),
            );
            assert_eq!(
                (&**slot.run_id(), slot.run_id_string()),
                (id, id.to_string())
            );
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_evicted_run_slot_is_reused_with_a_fresh_state() {
        use crate::event::{HumanInTheLoopResponseEvent, UserMessageEvent};
        let engine = forgetful_engine();
        let spare = |e: &Engine| e.shared.spare_slots();
        let a = engine.start_run(UserMessageEvent::new("a")).await.unwrap();
        let first = logged(&engine, &a, 3).await;
        engine
            .send(&a, HumanInTheLoopResponseEvent::default())
            .await
            .unwrap();
        engine.wait_for_end(&a).await.unwrap();
        assert!(engine.snapshot(&a).is_none(), "an ended run is evicted");
        assert_eq!(spare(&engine), 1, "the evicted run's slot is kept");

        let b = engine.start_run(UserMessageEvent::new("b")).await.unwrap();
        assert_eq!(spare(&engine), 0, "the new run took the kept slot");
        let snap = logged(&engine, &b, 3).await;
        assert_eq!(snap.run_id, b);
        assert_ne!(snap.thread_id, first.thread_id);
        assert_eq!(snap.run.log().len(), 3, "only the new run's events");
        assert_eq!(snap.payloads.len(), 3);
        assert_eq!(
            snap.payloads[0]
                .get::<UserMessageEvent>()
                .map(|m| m.message.as_str()),
            Some("b")
        );
        assert_eq!(snap.run.records().len(), first.run.records().len());
        assert_eq!(snap.failure, None);
        // Display numbering starts again at 0 for the new run's execution.
        assert_eq!(snap.display_by.len(), 1);
        let (seq, x) = snap.display_by[0];
        assert_eq!(
            snap.run.log()[seq as usize].id,
            derived_event_id(run_key(&b), x, 0x4000_0000)
        );
        engine
            .send(&b, HumanInTheLoopResponseEvent::default())
            .await
            .unwrap();
        engine.wait_for_end(&b).await.unwrap();
        assert_eq!(spare(&engine), 1);
    }

    /// An in-memory engine of one step that stops the run, keeping no ended runs (their
    /// slots go to the spare list, buffers included).
    fn one_stop_step_engine(name: &str) -> Engine {
        use crate::event::{StopEvent, UserMessageEvent};
        use crate::params::Required;
        use crate::workflow::{Step, StepError};
        let wf = Workflow::builder(name)
            .step(Step::new(
                "stop",
                |_: Required<UserMessageEvent>, _: StepCtx| async {
                    Ok::<_, StepError>(StopEvent::default())
                },
            ))
            .build()
            .expect("valid workflow");
        Engine::new(
            wf,
            Arc::new(crate::backend::memory::MemoryBackend::new()),
            EngineOptions {
                keep_ended_runs: false,
                ..EngineOptions::default()
            },
        )
    }

    /// What `f` reads of the buffers of the first spare slot (an ended run's, recycled).
    fn spare_scratch<R>(e: &Engine, f: impl FnOnce(&Scratch) -> R) -> R {
        let runs = e.shared.runs.read().unwrap_or_else(|p| p.into_inner());
        let slot = runs.spare.first().expect("the ended run's slot is kept");
        let st = slot.lock();
        f(st.scratch
            .as_ref()
            .expect("a recycled slot keeps its buffers"))
    }

    /// On a multi-thread runtime `Engine::run` binds its first step's events into input
    /// vectors (on a current-thread one it extracts them: see the next test).
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_recycled_slot_keeps_the_input_and_output_buffers_of_its_last_execution() {
        use crate::event::UserMessageEvent;
        let engine = one_stop_step_engine("One");
        let buffers = |e: &Engine| {
            spare_scratch(e, |sc| {
                (
                    sc.spare_inputs.len(),
                    sc.spare_inputs.iter().map(Vec::capacity).sum::<usize>(),
                    sc.spare_outs.capacity(),
                    sc.spare_inputs.as_ptr() as usize,
                )
            })
        };
        engine.run(UserMessageEvent::new("a")).await.unwrap();
        let (params, room, outs, at) = buffers(&engine);
        assert_eq!((params, room), (1, 1), "one parameter, room for its event");
        assert!(outs >= 1, "room for the step's output");
        engine.run(UserMessageEvent::new("b")).await.unwrap();
        assert_eq!(buffers(&engine).3, at, "the next run used the same vectors");
    }

    /// A typed start event's type is found by comparing its name's address with the
    /// workflow's start types (the same type id as the name table gives); other types are
    /// not in that list, and a name made at run time is still looked up by its text.
    #[test]
    fn a_typed_start_event_finds_its_type_without_the_name_table() {
        use crate::event::{Event, StopEvent, UserMessageEvent};
        use crate::params::Required;
        use crate::workflow::{Step, StepError};
        let wf = Workflow::builder("StartTypes")
            .step(Step::new(
                "stop",
                |_: Required<UserMessageEvent>, _: StepCtx| async {
                    Ok::<_, StepError>(StopEvent::default())
                },
            ))
            .build()
            .expect("valid workflow");
        let engine = Engine::in_memory(wf);
        let shared = &engine.shared;
        let by_text = shared.type_ids.get(UserMessageEvent::NAME).copied();
        assert!(by_text.is_some());
        assert!(
            shared
                .start_types
                .iter()
                .any(|&(n, t)| n == UserMessageEvent::NAME && Some(t) == by_text),
            "the start type is listed with its id"
        );
        assert!(
            shared
                .start_types
                .iter()
                .all(|&(n, _)| n != StopEvent::NAME),
            "only start events are listed"
        );
        let typed = shared
            .incoming_named(
                UserMessageEvent::NAME.into(),
                Payload::typed(UserMessageEvent::new("a")),
                1,
                None,
            )
            .expect("a declared start event");
        let named = shared
            .incoming(
                &String::from(UserMessageEvent::NAME),
                Payload::typed(UserMessageEvent::new("a")),
                1,
                None,
            )
            .expect("the same type by its text");
        assert!(
            matches!((typed.ty, named.ty), (NewEventType::Known(a), NewEventType::Known(b)) if Some(a) == by_text && a == b)
        );
    }

    /// Where `Engine::run` drives all of a run's executions on its task (a current-thread
    /// runtime, the in-memory store), the first step's typed inputs are extracted in the
    /// start event's locked section, as the later steps' are: no input vectors are made, and
    /// the output vector goes round from run to run.
    #[tokio::test(flavor = "current_thread")]
    async fn engine_run_extracts_its_first_steps_inputs_with_the_start_event_applied() {
        use crate::event::UserMessageEvent;
        let engine = one_stop_step_engine("OneExtracted");
        let buffers = |e: &Engine| {
            spare_scratch(e, |sc| {
                (
                    sc.spare_inputs.len(),
                    sc.spare_outs.capacity(),
                    sc.spare_outs.as_ptr() as usize,
                )
            })
        };
        engine.run(UserMessageEvent::new("a")).await.unwrap();
        let (params, outs, at) = buffers(&engine);
        assert_eq!(params, 0, "no input vectors: the inputs were extracted");
        assert!(outs >= 1, "room for the step's output");
        engine.run(UserMessageEvent::new("b")).await.unwrap();
        assert_eq!(
            buffers(&engine).2,
            at,
            "the next run used the same output vector"
        );
    }

    /// The display counter is recycled along an inline chain: each execution still numbers
    /// its display events from 0 (their derived ids are what prevents showing them twice
    /// after a crash).
    #[tokio::test(flavor = "current_thread")]
    async fn every_execution_of_an_inline_chain_numbers_its_display_events_from_zero() {
        use crate::event::{
            ChunkEvent, HumanInTheLoopRequestEvent, HumanInTheLoopResponseEvent, StopEvent,
            UserMessageEvent,
        };
        use crate::params::Required;
        use crate::workflow::{Step, StepError};
        async fn show_two(ctx: &StepCtx) -> Result<(), StepError> {
            for _ in 0..2 {
                ctx.display(&ChunkEvent::default())
                    .await
                    .map_err(|e| StepError::new(e.to_string()))?;
            }
            Ok(())
        }
        let wf = Workflow::builder("Shows")
            .step(Step::new(
                "a",
                |_: Required<UserMessageEvent>, ctx: StepCtx| async move {
                    show_two(&ctx).await?;
                    Ok::<_, StepError>(HumanInTheLoopRequestEvent::default())
                },
            ))
            .step(Step::new(
                "b",
                |_: Required<HumanInTheLoopRequestEvent>, ctx: StepCtx| async move {
                    show_two(&ctx).await?;
                    Ok::<_, StepError>(HumanInTheLoopResponseEvent::default())
                },
            ))
            .step(Step::new(
                "c",
                |_: Required<HumanInTheLoopResponseEvent>, ctx: StepCtx| async move {
                    show_two(&ctx).await?;
                    Ok::<_, StepError>(StopEvent::default())
                },
            ))
            .build()
            .expect("valid workflow");
        let engine = Engine::in_memory(wf);
        let run = engine.run(UserMessageEvent::new("go")).await.unwrap();
        let snap = engine.snapshot(&run).unwrap();
        assert!(snap.has_stop(), "{}", snap.timeline());
        let mut by_execution: Vec<(ExecutionId, Vec<EventId>)> = Vec::new();
        for &(seq, x) in &snap.display_by {
            let id = snap.run.log()[seq as usize].id;
            match by_execution.iter_mut().find(|(e, _)| *e == x) {
                Some((_, ids)) => ids.push(id),
                None => by_execution.push((x, vec![id])),
            }
        }
        assert_eq!(by_execution.len(), 3);
        for (x, ids) in by_execution {
            let expected: Vec<EventId> = (0..2)
                .map(|n| derived_event_id(run_key(&run), x, 0x4000_0000 | n))
                .collect();
            assert_eq!(ids, expected, "execution {x:?}");
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_start_event_is_applied_through_the_threads_pending_buffer_left_empty_for_the_next() {
        use crate::event::UserMessageEvent;
        let engine = forgetful_engine();
        UNSCRATCHED_PENDING.set(Vec::new());
        let id = engine.start_run(UserMessageEvent::new("q")).await.unwrap();
        let kept = UNSCRATCHED_PENDING.take();
        assert!(kept.is_empty(), "no payload is left behind");
        assert!(
            kept.capacity() >= 1,
            "the buffer is kept for the next start"
        );
        UNSCRATCHED_PENDING.set(kept);
        let snap = logged(&engine, &id, 3).await;
        assert_eq!(
            snap.payloads[0]
                .get::<UserMessageEvent>()
                .map(|m| m.message.as_str()),
            Some("q"),
            "the start event's payload went to the run"
        );
    }

    /// The in-memory store, except that it fails to store a run's end.
    struct FailsAtTheEnd(crate::backend::memory::MemoryBackend);

    impl Backend for FailsAtTheEnd {
        fn name(&self) -> &'static str {
            "fails-at-the-end"
        }
        fn wants_journal(&self) -> bool {
            false
        }
        fn persist(&self, batch: PersistBatch) -> Pending<()> {
            if batch.ended {
                return Pending::Ready(Err(StoreError::Io {
                    detail: "disk full".into(),
                }));
            }
            self.0.persist(batch)
        }
        fn load_runs(&self, workflow: &str, live_only: bool) -> Pending<Vec<StoredRun>> {
            self.0.load_runs(workflow, live_only)
        }
        fn list_runs(
            &self,
            workflow: &str,
            query: &crate::backend::RunQuery,
        ) -> Pending<crate::backend::RunPage> {
            self.0.list_runs(workflow, query)
        }
        fn read_run(&self, workflow: &str, run_id: &str) -> Pending<Option<StoredRun>> {
            self.0.read_run(workflow, run_id)
        }
        fn ctx_get(
            &self,
            scope: crate::backend::Scope,
            key: &str,
        ) -> Pending<Option<serde_json::Value>> {
            self.0.ctx_get(scope, key)
        }
        fn ctx_set(
            &self,
            scope: crate::backend::Scope,
            key: &str,
            value: serde_json::Value,
        ) -> Pending<()> {
            self.0.ctx_set(scope, key, value)
        }
        fn ctx_delete(&self, scope: crate::backend::Scope, key: &str) -> Pending<()> {
            self.0.ctx_delete(scope, key)
        }
        fn halt(&self) {
            self.0.halt()
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_storage_failure_at_the_end_wakes_the_runs_waiters_and_shows_on_the_run() {
        use crate::event::UserMessageEvent;
        let engine = Engine::new(
            asking(),
            Arc::new(FailsAtTheEnd(crate::backend::memory::MemoryBackend::new())),
            EngineOptions::default(),
        );
        let id = engine.start_run(UserMessageEvent::new("q")).await.unwrap();
        logged(&engine, &id, 3).await;
        let waiter = spawn_waiter(&engine, &id);
        tokio::task::yield_now().await;
        assert_eq!(waiting(&engine, &id), 1);
        answer_and_expect_woken(&engine, &id, waiter, "the failure wakes the waiter").await;
        let snap = engine.snapshot(&id).expect("kept");
        assert!(snap.run.is_terminated(), "the core ended the run");
        let st = engine.shared.slot(&id).unwrap();
        let st = st.lock();
        assert!(!st.end_durable, "an end the store refused is not durable");
        assert!(
            st.failure
                .as_deref()
                .is_some_and(|f| f.contains("disk full"))
        );
    }

    /// How many tasks wait for run `id`'s end.
    fn waiting(engine: &Engine, id: &str) -> usize {
        engine.shared.slot(id).unwrap().lock().waiters.len()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn every_task_waiting_for_a_runs_end_is_woken_by_it() {
        use crate::event::{HumanInTheLoopResponseEvent, UserMessageEvent};
        let engine = Engine::in_memory(asking());
        let id = engine.start_run(UserMessageEvent::new("q")).await.unwrap();
        logged(&engine, &id, 3).await;
        let waiters: Vec<_> = (0..3).map(|_| spawn_waiter(&engine, &id)).collect();
        tokio::task::yield_now().await;
        assert_eq!(waiting(&engine, &id), 3, "each waiter registered once");
        // Polled again before the end (woken by something else): still one registration each.
        for _ in 0..2 {
            tokio::task::yield_now().await;
        }
        assert_eq!(waiting(&engine, &id), 3);
        // A fourth gives up while the others wait: only its registration goes.
        let gave_up = tokio::time::timeout(
            std::time::Duration::from_millis(1),
            engine.wait_for_end(&id),
        )
        .await;
        assert!(gave_up.is_err());
        assert_eq!(waiting(&engine, &id), 3, "the others stay registered");
        engine
            .send(&id, HumanInTheLoopResponseEvent::default())
            .await
            .unwrap();
        for w in waiters {
            tokio::time::timeout(std::time::Duration::from_secs(10), w)
                .await
                .expect("every waiter is woken by the end")
                .unwrap()
                .unwrap();
        }
        assert_eq!(waiting(&engine, &id), 0, "the end took every registration");
        // A waiter that comes after the end returns at once.
        engine.wait_for_end(&id).await.unwrap();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_wait_for_end_given_up_leaves_no_registration_behind() {
        use crate::event::UserMessageEvent;
        let engine = Engine::in_memory(asking());
        let id = engine.start_run(UserMessageEvent::new("q")).await.unwrap();
        logged(&engine, &id, 3).await;
        for _ in 0..50 {
            let gave_up = tokio::time::timeout(
                std::time::Duration::from_millis(1),
                engine.wait_for_end(&id),
            )
            .await;
            assert!(gave_up.is_err(), "the run waits for an answer");
        }
        assert_eq!(
            waiting(&engine, &id),
            0,
            "each waiter unregistered when dropped"
        );
        let waiter = spawn_waiter(&engine, &id);
        tokio::task::yield_now().await;
        answer_and_expect_woken(
            &engine,
            &id,
            waiter,
            "a waiter after others gave up is still woken",
        )
        .await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn runs_evicted_while_many_are_in_flight_still_end_for_their_waiters() {
        use crate::event::UserMessageEvent;
        let engine = forgetful_engine();
        // More runs in flight than ended slots are kept: the first ones to end have their
        // tables freed at once, while their waiters still hold them.
        let mut ids = Vec::new();
        for _ in 0..SPARE_SLOTS + 16 {
            ids.push(engine.start_run(UserMessageEvent::new("q")).await.unwrap());
        }
        for id in &ids {
            logged(&engine, id, 3).await;
        }
        answer_all_while_waited_for(&engine, &ids).await;
        assert!(
            engine.run_ids().is_empty(),
            "every ended run left the engine"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_fresh_run_about_to_execute_takes_over_the_tables_of_a_run_evicted_in_flight() {
        use crate::event::{HumanInTheLoopResponseEvent, UserMessageEvent};
        let engine = forgetful_engine();
        let kept = |e: &Engine| e.shared.spare_tables.lock().map(|v| v.len()).unwrap_or(0);
        // Runs evicted while more than SPARE_SLOTS are in flight, their waiters holding
        // them: their tables are kept for other runs.
        let mut ids = Vec::new();
        for _ in 0..SPARE_SLOTS + 2 {
            ids.push(engine.start_run(UserMessageEvent::new("q")).await.unwrap());
        }
        let mut first = None;
        for id in &ids {
            first = Some(logged(&engine, id, 3).await);
        }
        let first = first.unwrap();
        answer_all_while_waited_for(&engine, &ids).await;
        let before = kept(&engine);
        assert!(before > 0, "the tables of runs evicted in flight are kept");
        // A fresh slot (no ended one to reuse): its run takes over kept tables when its
        // first execution is bound, and runs exactly like a run that grew its own.
        engine.shared.runs.write().unwrap().spare.clear();
        let b = engine.start_run(UserMessageEvent::new("b")).await.unwrap();
        let snap = logged(&engine, &b, 3).await;
        assert_eq!(
            kept(&engine),
            before - 1,
            "the new run took one set of tables"
        );
        assert_eq!(snap.run.log().len(), 3, "only the new run's events");
        assert_eq!(snap.payloads.len(), 3);
        assert_eq!(
            snap.payloads[0]
                .get::<UserMessageEvent>()
                .map(|m| m.message.as_str()),
            Some("b")
        );
        assert_eq!(snap.run.records(), first.run.records());
        assert_eq!(snap.run.executions().len(), first.run.executions().len());
        assert_eq!(snap.display_by.len(), 1);
        engine
            .send(&b, HumanInTheLoopResponseEvent::default())
            .await
            .unwrap();
        engine.wait_for_end(&b).await.unwrap();
        assert!(engine.snapshot(&b).is_none(), "an ended run is evicted");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_reused_slot_whose_tables_were_kept_for_others_takes_kept_tables_when_its_run_starts()
    {
        use crate::event::UserMessageEvent;
        let engine = forgetful_engine();
        let kept = |e: &Engine| e.shared.spare_tables.lock().map(|v| v.len()).unwrap_or(0);
        let spare_slots = |e: &Engine| e.shared.spare_slots();
        let a = engine.start_run(UserMessageEvent::new("a")).await.unwrap();
        let b = engine.start_run(UserMessageEvent::new("b")).await.unwrap();
        let first = logged(&engine, &a, 3).await;
        logged(&engine, &b, 3).await;
        // `a` ends while `b` is in flight: its tables are kept for other runs, and its slot,
        // let go by its waiter, for a new run.
        answer_all_while_waited_for(&engine, std::slice::from_ref(&a)).await;
        assert_eq!(
            kept(&engine),
            1,
            "the tables of a run evicted in flight are kept"
        );
        assert_eq!(spare_slots(&engine), 1, "its slot is kept for a new run");
        let c = engine.start_run(UserMessageEvent::new("c")).await.unwrap();
        // Its first execution is not bound yet (the engine's driver has not run): the
        // tables were taken when the run was made.
        assert_eq!(spare_slots(&engine), 0, "the new run reused the slot");
        assert_eq!(kept(&engine), 0, "and took the kept tables at once");
        let snap = logged(&engine, &c, 3).await;
        assert_eq!(snap.run.log().len(), 3, "only the new run's events");
        assert_eq!(snap.run.records(), first.run.records());
        assert_eq!(
            snap.payloads[0]
                .get::<UserMessageEvent>()
                .map(|m| m.message.as_str()),
            Some("c")
        );
        answer_all_while_waited_for(&engine, &[b, c]).await;
        assert!(
            engine.run_ids().is_empty(),
            "every ended run left the engine"
        );
    }

    /// Answers at once, or after a long wait when the message says "slow".
    fn slow_or_fast() -> Workflow {
        use crate::event::{StopEvent, UserMessageEvent};
        use crate::params::Required;
        use crate::workflow::{Step, StepError};
        Workflow::builder("SlowOrFast")
            .step(Step::new(
                "answer",
                |q: Required<UserMessageEvent>, _: StepCtx| async move {
                    if q.message == "slow" {
                        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
                    }
                    Ok::<_, StepError>(StopEvent::default())
                },
            ))
            .build()
            .expect("valid workflow")
    }

    /// Starts a run with `message` and waits (at most 10 s) until it ended.
    async fn started_and_ended(engine: &Engine, message: &str, what: &str) {
        let run = engine
            .start_run(crate::event::UserMessageEvent::new(message))
            .await
            .unwrap();
        tokio::time::timeout(
            std::time::Duration::from_secs(10),
            engine.wait_for_end(&run),
        )
        .await
        .unwrap_or_else(|_| panic!("{what}"))
        .unwrap();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_waiting_body_on_the_engine_driver_does_not_hold_up_other_runs() {
        use crate::event::UserMessageEvent;
        let engine = Engine::in_memory(slow_or_fast());
        let slow = engine
            .start_run(UserMessageEvent::new("slow"))
            .await
            .unwrap();
        started_and_ended(
            &engine,
            "fast",
            "the fast run ends while the slow one waits",
        )
        .await;
        let snap = engine.snapshot(&slow).unwrap();
        assert_eq!(snap.running(), 1, "the slow run's body still waits");
        started_and_ended(&engine, "fast", "a run started later ends too").await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_kept_ended_run_holds_tables_no_larger_than_their_contents() {
        // A run's tables start small and grow by doubling; an engine that keeps ended runs
        // (the default) gives the spare capacity back when a run ends.
        let engine = Engine::in_memory(slow_or_fast());
        let run = engine
            .start_run(crate::event::UserMessageEvent::new("fast"))
            .await
            .unwrap();
        engine.wait_for_end(&run).await.unwrap();
        let slot = engine.shared.slot(&run).unwrap();
        let st = slot.lock();
        assert!(
            st.run.records().len() > 4,
            "the records outgrew their first size"
        );
        // A clone's tables are exact.
        assert_eq!(st.run.memory_bytes(), st.run.clone().memory_bytes());
        assert_eq!(st.payloads.capacity(), st.payloads.len());
    }

    fn current_thread_runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// A runtime on this thread whose task (the engine's driver) started a slow run's body,
    /// which waits; the thread has left the runtime when this returns.
    fn runtime_with_a_waiting_body(engine: &Engine) -> tokio::runtime::Runtime {
        let runtime = current_thread_runtime();
        runtime.block_on(async {
            engine
                .start_run(crate::event::UserMessageEvent::new("slow"))
                .await
                .unwrap();
            tokio::task::yield_now().await;
        });
        runtime
    }

    #[test]
    fn runs_started_on_another_runtime_are_driven_there() {
        // Current-thread runtimes on two threads share an engine; the first one's thread
        // has left its runtime (its driver task is not polled until it comes back): runs
        // started on the second must not wait for it.
        let engine = Engine::in_memory(slow_or_fast());
        let first = runtime_with_a_waiting_body(&engine);
        let other = engine.clone();
        std::thread::spawn(move || {
            current_thread_runtime().block_on(started_and_ended(
                &other,
                "fast",
                "a run started on the second runtime ends there",
            ))
        })
        .join()
        .unwrap();
        drop(first);
    }

    #[test]
    fn the_engine_driver_is_replaced_when_its_runtime_goes_away() {
        let engine = Engine::in_memory(slow_or_fast());
        // The driver task is dropped with its runtime, in the middle of its work.
        drop(runtime_with_a_waiting_body(&engine));
        current_thread_runtime().block_on(started_and_ended(
            &engine,
            "fast",
            "a new driver runs the new run",
        ));
    }

    #[test]
    fn engines_keeping_ended_runs_reuse_no_slot() {
        let engine = Engine::in_memory(asking());
        let slot = Arc::new(RunSlot::new(
            "r".into(),
            Thread::Given("t".into()),
            Run::new(engine.workflow().compiled().clone(), 1),
        ));
        engine.shared.release(slot);
        assert_eq!(engine.shared.spare_slots(), 0);
    }

    #[test]
    fn error_codes_are_stable() {
        let e = EngineError::UnknownRun { run_id: "x".into() };
        assert_eq!(e.code(), "SAAP-E001");
        assert!(e.to_string().starts_with("SAAP-E001"));
        assert_eq!(EngineError::Store(StoreError::Halted).code(), "SAAP-S005");
    }
}
