//! The run state machine: one run's log and the dispatch decisions over it (DESIGN §4).
//!
//! Input comes in through [`Run::append`] (an event arrives), [`Run::complete`] (an
//! execution finished) and [`Run::retry`] (an execution is run again after a crash); output
//! leaves as [`Record`]s and as started executions taken with [`Run::take_started`]. No
//! clock, no randomness, no I/O, no async: the same inputs always give the same records,
//! which is what lets engines, the simulator, the explorer and `explain` share it.
//!
//! Preconditions are user code, so they are asked of a [`PreconditionEvaluator`] passed in
//! by the caller, and their results are recorded.

use crate::compiled::{ChainLink, CompiledCondition, CompiledSpec, EventKind, TypeId};
use crate::id_index::IdIndex;
use crate::ids::derived_event_id;
use crate::ids::{EventId, ExecutionId, FastMap, ParamIdx, Seq, StepIdx};
use crate::record::{Origin, Packed, Record, Records, SkipReason, Termination};
use crate::spec::ParamKind;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

const NO_SEQ: Seq = Seq::MAX;

/// Sequence numbers below this are served from [`IDENTITY`] (no per-run table).
const SMALL_SEQS: usize = 256;
/// `IDENTITY[i] == i`: one-element slices for single bindings of short runs.
static IDENTITY: [Seq; SMALL_SEQS] = {
    let mut t = [0; SMALL_SEQS];
    let mut i = 0;
    while i < SMALL_SEQS {
        t[i] = i as Seq;
        i += 1;
    }
    t
};

/// Logs up to this many events find ids by scanning (cheaper than hashing for short runs,
/// and no table to allocate); past it an id index is built.
const LINEAR_IDS: usize = 32;
/// Runs with fewer executions than this find earlier input sets by scanning the executions
/// of the step; past it (and always for steps whose parameters overlap) they are hashed.
const LINEAR_INPUT_SETS: usize = 32;

/// A fixed list's match list is reserved at its size, up to this many events, on its first
/// arrival.
const FIXED_LIST_RESERVE: u32 = 4096;
/// Records reserved past a fan-out's arrivals (completion, end of the run).
const END_RECORDS: usize = 4;
/// Events reserved past a fan-out's outputs (the fan-in's output, the end).
const END_EVENTS: usize = 2;
/// The most records reserved at once for a fan-out's arrivals.
const MAX_RESERVED_RECORDS: usize = 1 << 24;

/// The most events one run's log may hold.
pub const MAX_LOG_EVENTS: usize = 50_000_000;
/// The longest error message kept for a failed execution (longer ones are cut).
pub const MAX_ERROR_MESSAGE: usize = 16 * 1024;

/// The type of an incoming event.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NewEventType {
    /// A type the workflow knows.
    Known(TypeId),
    /// A type the workflow does not know (e.g. from another agent); it never causes
    /// candidacy, but its classification still decides termination.
    Foreign { name: String, kind: EventKind },
}

/// An event offered to the run.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NewEvent {
    pub id: EventId,
    pub ty: NewEventType,
}

impl NewEvent {
    pub fn known(id: EventId, ty: TypeId) -> NewEvent {
        NewEvent {
            id,
            ty: NewEventType::Known(ty),
        }
    }
}

/// The type of a logged event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventTy {
    Known(TypeId),
    /// Index of the name among the run's foreign type names, in order of first arrival.
    Foreign(u32),
}

/// An event in the run's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoggedEvent {
    pub id: EventId,
    pub ty: EventTy,
    pub kind: EventKind,
    pub origin: Origin,
}

/// What an execution's parameter is bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bound {
    /// An optional parameter with no matching event, or an empty list.
    Nothing,
    /// One event (required or optional parameter).
    One(Seq),
    /// The first `n` matching events in arrival order (list or fixed list).
    First(u32),
}

/// The state of an execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecState {
    Running,
    Completed,
    Failed,
}

/// One execution of a step.
#[derive(Debug, Clone)]
pub struct Execution {
    pub step: StepIdx,
    pub trigger: Seq,
    pub state: ExecState,
    /// 1 for the first attempt; incremented by [`Run::retry`].
    pub attempt: u32,
    bind_start: u32,
}

/// The run's lifecycle (DESIGN §4.10, §4.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// No start event yet: control events are refused as orphans.
    NotStarted,
    Live,
    /// Ended by the event at `by`.
    Terminated {
        by: Seq,
    },
}

/// What happened to an appended event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// Appended and dispatched; `started` executions began.
    Dispatched { seq: Seq, started: u32 },
    /// A stop or exception event: the run is now terminated.
    Terminated { seq: Seq },
    /// A display-only event: logged, never dispatched.
    DisplayOnly { seq: Seq },
    /// The run had already ended: kept as evidence only.
    AfterStop { seq: Seq },
    /// The id was already in the log: dropped.
    Duplicate { first_seq: Seq },
}

/// The result of an execution.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The step returned these events (in return order; possibly none).
    Returned(Vec<NewEvent>),
    /// The step failed (error or panic) with this message.
    Failed(String),
}

/// Errors of [`Run::append`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AppendError {
    #[error(
        "run has not begun: a control event of type `{name}` arrived before any start event (kept as orphan evidence at seq {seq}); publish a start event first"
    )]
    RunNotStarted { seq: Seq, name: String },
    #[error("event type id {0} does not belong to this workflow")]
    UnknownType(TypeId),
    #[error("the run's log is full ({MAX_LOG_EVENTS} events); end the run or split the work")]
    LogFull,
}

/// [`AppendError`] without its strings, as the append path returns it (small enough for
/// registers; the error with names is made only when an append is refused).
#[derive(Debug, Clone, Copy)]
enum Refused {
    NotStarted { seq: Seq },
    UnknownType(TypeId),
    LogFull,
}

/// Errors of [`Run::complete`] and [`Run::retry`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompleteError {
    #[error("execution {0} does not exist in this run")]
    UnknownExecution(ExecutionId),
    #[error("execution {0} already finished; a completion was delivered twice")]
    AlreadyFinished(ExecutionId),
    #[error(
        "stale completion for execution {execution}: attempt {given} finished, but attempt {current} is the live one"
    )]
    StaleAttempt {
        execution: ExecutionId,
        given: u32,
        current: u32,
    },
    #[error(transparent)]
    Append(#[from] AppendError),
}

/// A precondition call: the step, its trigger and the bindings it would run with.
pub struct PreconditionCall<'a> {
    pub run: &'a Run,
    pub step: StepIdx,
    pub trigger: Seq,
    pub bindings: &'a [Bound],
}

impl PreconditionCall<'_> {
    /// The events bound to a parameter, in arrival order.
    pub fn bound(&self, param: ParamIdx) -> &[Seq] {
        self.run
            .bound_seqs(self.step, param, self.bindings[param as usize])
    }
}

/// Answers precondition calls. Engines implement it with the user's functions; the
/// simulator uses [`DeclaredConditions`]; replay uses recorded results.
pub trait PreconditionEvaluator {
    fn evaluate(&mut self, call: &PreconditionCall<'_>) -> bool;
}

/// Evaluates the declarative `when` conditions of a spec; a precondition without one is
/// treated as true.
#[derive(Debug, Default, Clone, Copy)]
pub struct DeclaredConditions;

impl PreconditionEvaluator for DeclaredConditions {
    fn evaluate(&mut self, call: &PreconditionCall<'_>) -> bool {
        let step = &call.run.spec.steps[call.step as usize];
        match step.precondition.as_ref().and_then(|p| p.when.as_ref()) {
            None => true,
            Some(c) => eval_condition(c, call),
        }
    }
}

/// Where an id's fingerprint bit lives in [`Run`]'s `id_bits`: 7 bits of a multiplicative
/// hash of all 12 bytes (counter ids differ in their last bytes, derived ids everywhere).
fn id_bit(id: &EventId) -> (usize, u64) {
    let b = id.as_bytes();
    let lo = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
    let hi = u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as u64;
    let f = ((lo ^ (hi << 32) ^ hi).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 57) as u32;
    ((f >> 6) as usize, 1u64 << (f & 63))
}

fn eval_condition(c: &CompiledCondition, call: &PreconditionCall<'_>) -> bool {
    match c {
        CompiledCondition::Always(b) => *b,
        CompiledCondition::Present(p) => !call.bound(*p).is_empty(),
        CompiledCondition::Absent(p) => call.bound(*p).is_empty(),
        CompiledCondition::CountAtLeast(p, n) => call.bound(*p).len() as u64 >= *n as u64,
        CompiledCondition::All(cs) => cs.iter().all(|c| eval_condition(c, call)),
        CompiledCondition::Any(cs) => cs.iter().any(|c| eval_condition(c, call)),
        CompiledCondition::Not(c) => !eval_condition(c, call),
    }
}

/// Tables that a short run of a workflow without foreign events or input-set checks never
/// uses: kept out of line (allocated on first use, kept by [`Run::reset`]) so that such a
/// run's `Run` stays small.
#[derive(Debug, Clone, Default)]
struct Rare {
    /// Event id → seq; empty (and unused) until the log passes [`LINEAR_IDS`] events.
    by_id: IdIndex,
    foreign_names: Vec<Box<str>>,
    /// `seq_table[i] == SMALL_SEQS + i`: lets a single binding past the static table be
    /// returned as a one-element slice (short runs never allocate it).
    seq_table: Vec<Seq>,
    /// Input-set hash → the execution that ran it. Holds the steps whose parameters overlap
    /// from the start, and every step once the run has [`LINEAR_INPUT_SETS`] executions.
    input_sets: FastMap<(StepIdx, u64), ExecutionId>,
    input_set_collisions: Vec<(StepIdx, u64, ExecutionId)>,
    /// Records whose values do not fit [`Packed`], kept whole (the packed record holds
    /// the index).
    extra_records: Vec<Record>,
    /// The error message of each failed execution (out of the execution table, which
    /// every execution's entry fills: 20 bytes each instead of 40).
    errors: FastMap<ExecutionId, Box<str>>,
}

impl Rare {
    /// Indexes the input set of `execution` of `step` under its hash. Same hash, different
    /// set (`find_input_set` compares them): both are kept.
    fn note_input_set(&mut self, step: StepIdx, key: u64, execution: ExecutionId) {
        match self.input_sets.entry((step, key)) {
            std::collections::hash_map::Entry::Occupied(_) => {
                self.input_set_collisions.push((step, key, execution));
            }
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(execution);
            }
        }
    }
}

/// A single binding of `seq`. Past the static table, the run's `seq_table` is filled up to it
/// first, so that [`Run::bound_seqs`] can return it as a one-element slice: only runs that
/// bind a single parameter to an event past the first [`SMALL_SEQS`] fill it, not every
/// append past them.
#[inline(always)]
fn bind_one(r: &mut Option<Box<Rare>>, seq: Seq) -> Bound {
    if seq as usize >= SMALL_SEQS {
        fill_seq_table(r, seq);
    }
    Bound::One(seq)
}

#[cold]
#[inline(never)]
fn fill_seq_table(r: &mut Option<Box<Rare>>, seq: Seq) {
    let table = &mut rare(r).seq_table;
    let from = (SMALL_SEQS + table.len()) as Seq;
    if from <= seq {
        table.extend(from..=seq);
    }
}

/// Gives `v` room for `capacity` elements (exactly) in a new allocation, moving its
/// contents, instead of `realloc`: glibc's `realloc` of a small block that cannot grow in
/// place allocates past its per-thread cache and frees the old block (~410 instructions,
/// measured), where a fresh allocation and a free of the old one usually hit that cache
/// (the blocks of runs that ended have these very sizes).
fn regrow<T>(v: &mut Vec<T>, capacity: usize) {
    if v.capacity() < capacity {
        let mut grown = Vec::with_capacity(capacity);
        grown.append(v);
        *v = grown;
    }
}

/// Appends a decision record in its packed form (whole in the side table if it does not
/// fit). Inlined: records made of constants and fields pack without a branch on their kind.
#[inline(always)]
fn push_record(records: &mut Vec<Packed>, r: &mut Option<Box<Rare>>, record: Record) {
    match Packed::pack(&record) {
        Some(p) => records.push(p),
        None => push_extra(records, r, record),
    }
}

/// [`push_record`] of several records, out of line (for records that may not fit).
#[cold]
#[inline(never)]
fn push_records<const N: usize>(
    records: &mut Vec<Packed>,
    r: &mut Option<Box<Rare>>,
    list: [Record; N],
) {
    for record in list {
        push_record(records, r, record);
    }
}

#[cold]
#[inline(never)]
fn push_extra(records: &mut Vec<Packed>, r: &mut Option<Box<Rare>>, record: Record) {
    let extra = &mut rare(r).extra_records;
    records.push(Packed::extra(extra.len() as u32));
    extra.push(record);
}

/// The run's [`Rare`] tables, allocated on first use.
fn rare(r: &mut Option<Box<Rare>>) -> &mut Rare {
    r.get_or_insert_with(Default::default)
}

/// One run of a workflow.
#[derive(Debug, Clone)]
pub struct Run {
    spec: Arc<CompiledSpec>,
    run_key: u64,
    status: RunStatus,
    log: Vec<LoggedEvent>,
    /// The tables a short run of a plain workflow never needs (see [`Rare`]).
    rare: Option<Box<Rare>>,
    ids_indexed: bool,
    /// While ids are scanned: one bit per logged id's fingerprint ([`id_bit`]). A clear bit
    /// proves an id absent without a scan; a set bit may be another id's (then scan).
    id_bits: [u64; 2],
    /// [`LINEAR_IDS`] and [`LINEAR_INPUT_SETS`], or lower in tests of the index switch.
    linear_ids: u32,
    linear_input_sets: u32,
    /// The log length at which the id index is built ([`MAX_LOG_EVENTS`] once built: then
    /// the log is full) and the execution count at which input sets are hashed (`u32::MAX`
    /// once they are): one comparison on the hot path instead of a flag and a threshold.
    index_ids_at: u32,
    index_sets_at: u32,
    /// The seq of the start event that began the run (`NO_SEQ` before): control events
    /// logged before it are orphans, whose ids are not taken.
    start_seq: Seq,
    /// Per list/fixed-list (step, param), flattened with the spec's parameter offsets: the matching
    /// dispatched events in arrival order.
    matches: Vec<Vec<Seq>>,
    /// One allocation for two small tables: first, per required/optional (step, param),
    /// the latest matching event or `NO_SEQ` (a single parameter only ever binds the latest,
    /// so no list is kept); then, per step, how many executions started (`count_slot`).
    slots: Vec<u32>,
    /// Index in `slots` of the first execution count (= the number of parameter slots).
    count_base: u32,
    input_sets_indexed: bool,
    executions: Vec<Execution>,
    bindings: Vec<Bound>,
    records: Vec<Packed>,
    /// Executions from this index on have not been taken by [`Run::take_started`] (the
    /// started executions are always the tail of `executions`).
    untaken: u32,
}

/// The four tables a run grows as it executes — log, executions, bindings, records — and
/// its id index, emptied, with their allocations: taken from a run that left an engine
/// ([`Run::take_tables`]) for another run to grow into ([`Run::grow_into`]), so that a
/// fresh run about to execute takes over tables of a whole run's size instead of
/// reallocating its first-dispatch ones (and a large run's id index is not allocated,
/// page-faulted and zeroed by the kernel anew each run). Holds no evidence of the run it
/// came from.
#[derive(Debug, Default)]
pub struct RunTables {
    log: Vec<LoggedEvent>,
    executions: Vec<Execution>,
    bindings: Vec<Bound>,
    records: Vec<Packed>,
    ids: IdIndex,
}

impl RunTables {
    /// How many events the log has room for.
    pub fn event_capacity(&self) -> usize {
        self.log.capacity()
    }

    /// Heap bytes the tables hold.
    pub fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        self.log.capacity() * size_of::<LoggedEvent>()
            + self.executions.capacity() * size_of::<Execution>()
            + self.bindings.capacity() * size_of::<Bound>()
            + self.records.capacity() * size_of::<Packed>()
            + self.ids.capacity() * size_of::<u32>()
    }
}

/// First capacities of a new run's tables (see [`Run::new`]).
const FIRST_EVENTS: usize = 2;
const FIRST_EXECUTIONS: usize = 1;
const FIRST_BINDINGS: usize = 4;
const FIRST_RECORDS: usize = 4;

impl Run {
    /// A new, not yet started run. `run_key` (see [`crate::ids::run_key`]) seeds the
    /// deterministic ids of events the core creates (ExceptionEvents of failed steps).
    pub fn new(spec: Arc<CompiledSpec>, run_key: u64) -> Run {
        let total = spec.param_offsets().last().copied().unwrap_or(0) as usize;
        let steps = spec.steps.len();
        // Sized for a run's first dispatch, not its whole life: many runs in flight at once
        // mostly wait at their first events, so a full-size table each would hold ~2 KB per
        // run for nothing. The first completion grows them to a whole run's size at once
        // (`size_for_a_whole_run`), and an engine that recycles ended runs (`Run::reset`,
        // which keeps the capacity) pays that once per recycled run, not once per run.
        let events = (steps + 2).min(FIRST_EVENTS);
        let lists = spec.has_list_params();
        Run {
            spec,
            run_key,
            status: RunStatus::NotStarted,
            log: Vec::with_capacity(events),
            rare: None,
            ids_indexed: false,
            id_bits: [0; 2],
            linear_ids: LINEAR_IDS as u32,
            linear_input_sets: LINEAR_INPUT_SETS as u32,
            index_ids_at: LINEAR_IDS as u32,
            index_sets_at: LINEAR_INPUT_SETS as u32,
            start_seq: NO_SEQ,
            // Only list and fixed-list parameters keep match lists; a workflow without any
            // (a plain chain) allocates none.
            matches: if lists {
                vec![Vec::new(); total]
            } else {
                Vec::new()
            },
            count_base: total as u32,
            slots: {
                let mut v = vec![NO_SEQ; total + steps];
                v[total..].fill(0);
                v
            },
            input_sets_indexed: false,
            executions: Vec::with_capacity(steps.min(FIRST_EXECUTIONS)),
            bindings: Vec::with_capacity(total.min(FIRST_BINDINGS)),
            // A run in which each step runs once records 4 per step (candidate, start,
            // completion, the output's append) plus the start and the end; the first
            // dispatch of a chain records 4 (start, append, candidate, execution start).
            records: Vec::with_capacity((4 * steps + 3).min(FIRST_RECORDS)),
            untaken: 0,
        }
    }

    /// Switches from scanning to hashing earlier than usual: once the log holds `ids` events
    /// and once the run has `input_sets` executions (0: hash from the start). Decisions do
    /// not depend on it; tests use it to cover both paths and the switch between them.
    #[doc(hidden)]
    pub fn with_index_thresholds(mut self, ids: usize, input_sets: usize) -> Run {
        assert!(
            self.log.is_empty(),
            "thresholds are set on a new run, before its first event"
        );
        self.linear_ids = ids.min(LINEAR_IDS) as u32;
        self.linear_input_sets = input_sets.min(LINEAR_INPUT_SETS) as u32;
        self.index_ids_at = self.linear_ids;
        self.index_sets_at = self.linear_input_sets;
        if input_sets == 0 {
            self.input_sets_indexed = true;
            self.index_sets_at = u32::MAX;
        }
        self
    }

    /// Turns this run into a fresh, not yet started run of the same workflow with another
    /// key, keeping its allocations: an engine that recycles ended runs this way pays for
    /// its tables once, not once per run. Decides exactly like [`Run::sibling`].
    pub fn reset(&mut self, run_key: u64) {
        let ended = self.is_terminated();
        self.run_key = run_key;
        self.status = RunStatus::NotStarted;
        self.log.clear();
        if let Some(r) = &mut self.rare {
            r.by_id.clear();
            r.foreign_names.clear();
            r.seq_table.clear();
            r.input_sets.clear();
            r.input_set_collisions.clear();
            r.extra_records.clear();
            r.errors.clear();
        }
        self.ids_indexed = false;
        self.id_bits = [0; 2];
        self.start_seq = NO_SEQ;
        for m in &mut self.matches {
            m.clear();
        }
        let counts = self.count_base as usize;
        self.slots[..counts].fill(NO_SEQ);
        // A terminated run's execution counts were zeroed when it ended (`terminate`),
        // and nothing starts after that.
        if !ended {
            self.slots[counts..].fill(0);
        }
        self.input_sets_indexed = self.linear_input_sets == 0;
        self.index_ids_at = self.linear_ids;
        self.index_sets_at = if self.input_sets_indexed {
            u32::MAX
        } else {
            self.linear_input_sets
        };
        self.executions.clear();
        self.bindings.clear();
        self.records.clear();
        self.untaken = 0;
    }

    /// Gives a run that has not begun — new, or just [`Run::reset`] — another key: the
    /// same as [`Run::reset`] with it, without emptying tables that are empty. A run that
    /// logged any event is reset.
    pub fn rekey(&mut self, run_key: u64) {
        if self.log.is_empty() && matches!(self.status, RunStatus::NotStarted) {
            self.run_key = run_key;
        } else {
            self.reset(run_key);
        }
    }

    /// Gives back the spare capacity of the run's tables (they grow by doubling from a small
    /// first size): for an engine that keeps ended runs, so that each holds what it logged
    /// and recorded, not up to twice that. Decisions are unchanged; a run that goes on after
    /// this grows its tables again.
    pub fn shrink_to_fit(&mut self) {
        self.log.shrink_to_fit();
        self.records.shrink_to_fit();
        self.executions.shrink_to_fit();
        self.bindings.shrink_to_fit();
        for m in &mut self.matches {
            m.shrink_to_fit();
        }
        if let Some(r) = &mut self.rare {
            let log = &self.log;
            r.by_id.shrink_to_fit(|s| log[s as usize].id);
            r.seq_table.shrink_to_fit();
            r.input_sets.shrink_to_fit();
            r.input_set_collisions.shrink_to_fit();
            r.extra_records.shrink_to_fit();
            r.errors.shrink_to_fit();
        }
    }

    /// Frees the memory of the run's evidence — log, records, executions, bindings, match
    /// lists, indexes — keeping its status (an ended run stays ended, with nothing
    /// running). For an engine that keeps no ended runs: one still referenced for a while
    /// (by whoever waits for its end) need not hold its tables. [`Run::reset`] makes it a
    /// fresh run as usual.
    pub fn forget_evidence(&mut self) {
        self.log = Vec::new();
        self.rare = None;
        self.ids_indexed = false;
        self.index_ids_at = self.linear_ids;
        self.id_bits = [0; 2];
        for m in &mut self.matches {
            *m = Vec::new();
        }
        self.executions = Vec::new();
        self.bindings = Vec::new();
        self.records = Vec::new();
        self.untaken = 0;
    }

    /// [`Run::forget_evidence`], handing back the four growing tables emptied with their
    /// allocations (for [`Run::grow_into`] of another run) instead of freeing them.
    pub fn take_tables(&mut self) -> RunTables {
        let mut t = RunTables {
            log: std::mem::take(&mut self.log),
            executions: std::mem::take(&mut self.executions),
            bindings: std::mem::take(&mut self.bindings),
            records: std::mem::take(&mut self.records),
            ids: self
                .rare
                .as_mut()
                .map(|r| std::mem::take(&mut r.by_id))
                .unwrap_or_default(),
        };
        t.log.clear();
        t.executions.clear();
        t.bindings.clear();
        t.records.clear();
        t.ids.clear();
        self.forget_evidence();
        t
    }

    /// Moves each of the run's growing tables into `spare`'s allocation of the same table
    /// where that one is larger (the contents are moved, so decisions are unchanged), and
    /// leaves `spare` with the run's former tables, emptied: a run about to execute takes
    /// over an ended run's tables instead of growing its own (see
    /// `size_for_a_whole_run`).
    pub fn grow_into(&mut self, spare: &mut RunTables) {
        fn adopt<T>(mine: &mut Vec<T>, spare: &mut Vec<T>) {
            if spare.capacity() > mine.capacity() {
                spare.clear();
                spare.append(mine);
                std::mem::swap(mine, spare);
            }
        }
        adopt(&mut self.log, &mut spare.log);
        adopt(&mut self.executions, &mut spare.executions);
        adopt(&mut self.bindings, &mut spare.bindings);
        adopt(&mut self.records, &mut spare.records);
        // The id index only before the run builds its own (it is empty until then).
        let mine = self.rare.as_ref().map_or(0, |r| r.by_id.capacity());
        if !self.ids_indexed && spare.ids.capacity() > mine {
            std::mem::swap(&mut rare(&mut self.rare).by_id, &mut spare.ids);
        }
    }

    /// A fresh run of the same workflow sharing this run's precomputed tables.
    pub fn sibling(&self, run_key: u64) -> Run {
        Run::new(self.spec.clone(), run_key)
    }

    pub fn spec(&self) -> &CompiledSpec {
        &self.spec
    }
    pub fn spec_arc(&self) -> &Arc<CompiledSpec> {
        &self.spec
    }
    pub fn run_key(&self) -> u64 {
        self.run_key
    }
    pub fn status(&self) -> RunStatus {
        self.status
    }
    /// The seq of the start event that began the run (`None` before it began).
    pub fn start_seq(&self) -> Option<Seq> {
        (self.start_seq != NO_SEQ).then_some(self.start_seq)
    }
    pub fn is_terminated(&self) -> bool {
        matches!(self.status, RunStatus::Terminated { .. })
    }
    pub fn log(&self) -> &[LoggedEvent] {
        &self.log
    }
    /// How many events the log has room for without growing (a fan-out reserves room for
    /// the events its workers usually return): for an engine's tables that mirror the log.
    pub fn log_capacity(&self) -> usize {
        self.log.capacity()
    }
    /// The decision records, in order (stored packed: each is made when read).
    pub fn records(&self) -> Records<'_> {
        Records::new(
            &self.records,
            self.rare.as_ref().map_or(&[][..], |r| &r.extra_records),
        )
    }
    pub fn executions(&self) -> &[Execution] {
        &self.executions
    }
    pub fn execution(&self, id: ExecutionId) -> Option<&Execution> {
        self.executions.get(id.0 as usize)
    }
    /// The error message of a failed execution (cut to [`MAX_ERROR_MESSAGE`] bytes);
    /// `None` for one that did not fail or does not exist.
    pub fn execution_error(&self, id: ExecutionId) -> Option<&str> {
        self.rare.as_ref()?.errors.get(&id).map(|e| &**e)
    }
    /// The bindings of an execution, one per parameter of its step.
    pub fn bindings(&self, id: ExecutionId) -> &[Bound] {
        match self.executions.get(id.0 as usize) {
            Some(x) => {
                let n = self.spec.steps[x.step as usize].params.len();
                &self.bindings[x.bind_start as usize..x.bind_start as usize + n]
            }
            None => &[],
        }
    }
    /// The sequence numbers a binding stands for, in arrival order.
    pub fn bound_seqs(&self, step: StepIdx, param: ParamIdx, bound: Bound) -> &[Seq] {
        match bound {
            Bound::Nothing => &[],
            Bound::One(seq) => match (seq as usize).checked_sub(SMALL_SEQS) {
                None => &IDENTITY[seq as usize..=seq as usize],
                Some(i) => self
                    .rare
                    .as_ref()
                    .and_then(|r| r.seq_table.get(i..=i))
                    .unwrap_or(&[]),
            },
            Bound::First(n) => &self.matches[self.param_slot(step, param)][..n as usize],
        }
    }
    /// Name of a logged event's type.
    pub fn type_name(&self, ty: EventTy) -> &str {
        match ty {
            EventTy::Known(t) => &self.spec.types[t as usize].name,
            EventTy::Foreign(i) => self
                .rare
                .as_ref()
                .and_then(|r| r.foreign_names.get(i as usize))
                .map_or("", |n| n),
        }
    }
    /// The seq of an event id, if it is in the log.
    pub fn seq_of(&self, id: &EventId) -> Option<Seq> {
        if self.ids_indexed {
            let log = &self.log;
            self.rare
                .as_ref()
                .and_then(|r| r.by_id.get(id, |s| log[s as usize].id))
        } else {
            self.scan_id(id)
        }
    }

    /// An orphan's id was never taken, so it is not found by id.
    fn is_orphan(&self, seq: Seq, e: &LoggedEvent) -> bool {
        seq < self.start_seq && e.kind.is_control()
    }

    fn scan_id(&self, id: &EventId) -> Option<Seq> {
        let (word, bit) = id_bit(id);
        if self.id_bits[word] & bit == 0 {
            return None;
        }
        self.scan_log(id)
    }

    /// The first non-orphan event with this id, by scanning the whole log.
    fn scan_log(&self, id: &EventId) -> Option<Seq> {
        self.log
            .iter()
            .enumerate()
            .find(|(i, e)| e.id == *id && !self.is_orphan(*i as Seq, e))
            .map(|(i, _)| i as Seq)
    }

    /// Builds the id index from the log (first non-orphan occurrence of each id), with room
    /// for `more` ids without growing (a fan-out's outputs: one table, not two). A recycled
    /// run's table (emptied by [`Run::reset`]) is reused when it is large enough.
    fn index_ids(&mut self, more: usize) {
        let mut by_id = std::mem::take(&mut rare(&mut self.rare).by_id);
        debug_assert_eq!(by_id.len(), 0, "ids are indexed once per run");
        let log = &self.log;
        by_id.reserve(log.len().saturating_add(more).max(log.len() * 2), |s| {
            log[s as usize].id
        });
        for (i, e) in log.iter().enumerate() {
            if !self.is_orphan(i as Seq, e) {
                by_id.get_or_insert(&e.id, i as Seq, |s| log[s as usize].id);
            }
        }
        rare(&mut self.rare).by_id = by_id;
        self.ids_indexed = true;
        self.index_ids_at = MAX_LOG_EVENTS as u32;
    }
    /// How many executions of a step have started.
    pub fn execution_count(&self, step: StepIdx) -> usize {
        self.executions.iter().filter(|x| x.step == step).count()
    }
    /// Executions that started and have not finished (to run again after a restart).
    pub fn running(&self) -> impl Iterator<Item = ExecutionId> + '_ {
        self.executions
            .iter()
            .enumerate()
            .filter(|(_, x)| x.state == ExecState::Running)
            .map(|(i, _)| ExecutionId(i as u32))
    }

    /// Takes the executions started since the last call, in start order.
    pub fn take_started(&mut self) -> Vec<ExecutionId> {
        let mut out = Vec::new();
        self.drain_started_into(&mut out);
        out
    }
    /// Takes the earliest started execution not taken yet (one at a time what
    /// [`Run::drain_started_into`] takes at once).
    pub fn next_started(&mut self) -> Option<ExecutionId> {
        if (self.untaken as usize) < self.executions.len() {
            self.untaken += 1;
            Some(ExecutionId(self.untaken - 1))
        } else {
            None
        }
    }

    /// [`Run::next_started`] when one started execution is not taken yet, the last one:
    /// takes it and gives its step; `None`, having changed nothing, otherwise. After
    /// [`Run::complete_linked`] returned the log position of its event, that is the
    /// execution the link started, whose one binding is that event (a chain link's step
    /// has that one parameter): its caller binds it without looking it up.
    #[inline]
    pub fn take_sole_started(&mut self) -> Option<(ExecutionId, StepIdx)> {
        let n = self.executions.len();
        let last = self.executions.last()?;
        if self.untaken as usize + 1 != n {
            return None;
        }
        self.untaken = n as u32;
        Some((ExecutionId(n as u32 - 1), last.step))
    }

    /// Like [`Run::take_started`], as an iterator over the ids (no buffer).
    pub fn drain_started(&mut self) -> impl Iterator<Item = ExecutionId> + use<> {
        let end = self.executions.len() as u32;
        let from = std::mem::replace(&mut self.untaken, end);
        (from..end).map(ExecutionId)
    }
    /// Like [`Run::take_started`], into a caller's buffer (no allocation).
    pub fn drain_started_into(&mut self, out: &mut Vec<ExecutionId>) {
        let end = self.executions.len() as u32;
        out.extend((self.untaken..end).map(ExecutionId));
        self.untaken = end;
    }

    /// Where a step's execution count lives in `last` (after every parameter slot).
    fn count_slot(&self, step: StepIdx) -> usize {
        (self.count_base + step) as usize
    }

    fn param_slot(&self, step: StepIdx, param: ParamIdx) -> usize {
        (self.spec.param_offsets()[step as usize] + param) as usize
    }

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
    fn append_from(
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
    fn refusal(&self, r: Refused) -> AppendError {
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
    fn append_event(
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
    fn foreign_name(&mut self, name: &mut String) -> u32 {
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

    fn terminate(&mut self, seq: Seq, kind: EventKind) {
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
        let counts = self.count_base as usize;
        self.slots[counts..].fill(0);
    }

    /// Candidacy, readiness, binding and start for one trigger (DESIGN §4.1–§4.5).
    #[inline(always)]
    fn dispatch(&mut self, seq: Seq, t: TypeId, pre: &mut dyn PreconditionEvaluator) -> u32 {
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
    fn dispatch_to_many(
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
    fn dispatch_to_one(
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
    fn evaluate(
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
    fn precondition_holds(
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
    fn push_execution(&mut self, step: StepIdx, trigger: Seq, bind_start: u32) -> ExecutionId {
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
    fn start(&mut self, step: StepIdx, trigger: Seq, bind_start: u32) {
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
        if self.executions.len() >= self.index_sets_at as usize {
            self.index_input_sets();
        }
    }

    /// The execution of `step` that already ran the input set bound at `bind_start` (the
    /// candidate's bindings, at the end of the arena), found by scanning; only for steps
    /// whose parameters do not overlap, whose input sets are equal iff their bindings are.
    fn scan_input_sets(&self, step: StepIdx, bind_start: usize) -> Option<ExecutionId> {
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
    fn index_input_sets(&mut self) {
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

    fn input_set_hash(&self, step: StepIdx, bound: &[Bound]) -> u64 {
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

    fn expand_sorted(&self, step: StepIdx, bound: &[Bound]) -> Vec<Seq> {
        let mut all = Vec::new();
        for (pi, b) in bound.iter().enumerate() {
            all.extend_from_slice(self.bound_seqs(step, pi as ParamIdx, *b));
        }
        all.sort_unstable();
        all
    }

    fn same_input_set(&self, step: StepIdx, a: &[Bound], b: &[Bound]) -> bool {
        if self.spec.steps[step as usize].overlapping_params {
            self.expand_sorted(step, a) == self.expand_sorted(step, b)
        } else {
            a == b
        }
    }

    /// The execution that already ran this input set, given the first execution stored
    /// under its hash (`first`); later ones with the same hash are in the collision list.
    fn find_input_set(
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
    fn size_for_a_whole_run(&mut self) {
        if self.records.capacity() < 4 * self.spec.steps.len() + 3 {
            self.grow_to_a_whole_run();
        }
    }

    /// The growth of [`Run::size_for_a_whole_run`], once per run: out of line.
    #[cold]
    #[inline(never)]
    fn grow_to_a_whole_run(&mut self) {
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
    fn returned(
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
    fn returned_in_general(
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
    fn chain_link(
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
    fn reserve_for(&mut self, outputs: &[NewEvent]) {
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
        x.attempt += 1;
        let attempt = x.attempt;
        push_record(
            &mut self.records,
            &mut self.rare,
            Record::ExecutionRetried { execution, attempt },
        );
        Ok(attempt)
    }

    fn live_execution(
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
        if x.attempt != attempt {
            return Err(CompleteError::StaleAttempt {
                execution,
                given: attempt,
                current: x.attempt,
            });
        }
        Ok(x)
    }

    /// The ids of the events bound to each parameter of an execution.
    pub fn bound_event_ids(&self, execution: ExecutionId) -> Vec<Vec<EventId>> {
        let Some(x) = self.execution(execution) else {
            return Vec::new();
        };
        self.bindings(execution)
            .iter()
            .enumerate()
            .map(|(pi, b)| {
                self.bound_seqs(x.step, pi as ParamIdx, *b)
                    .iter()
                    .map(|s| self.log[*s as usize].id)
                    .collect()
            })
            .collect()
    }

    /// Approximate bytes held by the whole run: the `Run` itself, its bookkeeping
    /// ([`Run::state_bytes`]), its log and records, foreign type names and error messages
    /// (allocator overhead not included).
    pub fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        size_of::<Run>()
            + self.state_bytes()
            + self.log.capacity() * size_of::<LoggedEvent>()
            + self.records.capacity() * size_of::<Packed>()
            + self.rare.as_ref().map_or(0, |r| {
                r.foreign_names.capacity() * size_of::<Box<str>>()
                    + r.foreign_names.iter().map(|n| n.len()).sum::<usize>()
                    + r.input_set_collisions.capacity() * size_of::<(StepIdx, u64, ExecutionId)>()
                    + r.extra_records.capacity() * size_of::<Record>()
            })
            + self.rare.as_ref().map_or(0, |r| {
                r.errors.capacity() * (size_of::<(ExecutionId, Box<str>)>() + 1)
                    + r.errors.values().map(|e| e.len()).sum::<usize>()
            })
    }

    /// Approximate heap bytes held by this run's bookkeeping (not counting the log and
    /// records, which grow with the events).
    pub fn state_bytes(&self) -> usize {
        use std::mem::size_of;
        self.matches.capacity() * size_of::<Vec<Seq>>()
            + self.matches.iter().map(|m| m.capacity() * 4).sum::<usize>()
            + self.slots.capacity() * 4
            + self.rare.as_ref().map_or(0, |r| {
                size_of::<Rare>()
                    + r.seq_table.capacity() * 4
                    + r.input_sets.capacity()
                        * (size_of::<(StepIdx, u64)>() + size_of::<ExecutionId>() + 1)
                    + r.by_id.capacity() * size_of::<u32>()
            })
            + self.executions.capacity() * size_of::<Execution>()
            + self.bindings.capacity() * size_of::<Bound>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{counter_event_id, derived_event_id, run_key};

    fn run_of(yaml: &str) -> Run {
        let spec = crate::compile_spec_text(yaml, crate::SpecSyntax::Yaml).expect("spec");
        Run::new(Arc::new(spec), 3)
    }

    fn send(run: &mut Run, n: u64, ty: &str) -> Appended {
        let t = run.spec().type_id(ty).expect("type");
        run.append(
            NewEvent::known(counter_event_id(n), t),
            &mut DeclaredConditions,
        )
        .expect("appended")
    }

    /// A fan-out's `n` outputs of type `ty`, completed through the outputs path.
    fn fan_out(run: &mut Run, x: ExecutionId, ty: &str, n: u32) {
        let t = run.spec().type_id(ty).expect("type");
        let outs = (0..n)
            .map(|i| NewEvent::known(derived_event_id(run.run_key(), x, i), t))
            .collect();
        run.complete(x, 1, Outcome::Returned(outs), &mut DeclaredConditions)
            .expect("completed");
    }

    /// Drives a looping chain (`StartEvent → A → B → A …`) for `completions` completions
    /// and returns everything a run exposes. Every 7th output repeats an id already logged
    /// (a duplicate: the chain stops and an outside `A` goes on), every 5th execution is
    /// retried and completed as attempt 2, and the last output is the stop event.
    fn drive_loop(budget: &str, ids: usize, sets: usize, completions: u32) -> String {
        let spec = crate::compile_spec_text(
            &format!(
                "name: W\nevents: [{{name: A}}, {{name: B}}, {{name: Done, parents: [StopEvent]}}]\nsteps:\n  - {{name: s0, params: [{{name: x, kind: required, types: [StartEvent]}}], outputs: [A]{budget}}}\n  - {{name: s1, params: [{{name: x, kind: required, types: [A]}}], outputs: [B]{budget}}}\n  - {{name: s2, params: [{{name: x, kind: optional, types: [B]}}], outputs: [A]{budget}}}\n"
            ),
            crate::SpecSyntax::Yaml,
        )
        .expect("spec");
        let mut run = Run::new(Arc::new(spec), 7).with_index_thresholds(ids, sets);
        let t = |run: &Run, name: &str| run.spec().type_id(name).expect("type");
        send(&mut run, 1, "StartEvent");
        let mut outside = 1_000;
        let mut outs = Vec::new();
        for n in 1..=completions {
            let x = match run.next_started() {
                Some(x) => x,
                None => {
                    outside += 1;
                    send(&mut run, outside, "A");
                    run.next_started().expect("an outside A starts s1")
                }
            };
            let step = run.execution(x).expect("exec").step;
            let ty = if n == completions {
                t(&run, "Done")
            } else {
                run.spec().steps[step as usize].outputs[0]
            };
            let id = if n % 7 == 0 {
                run.log()[(n as usize * 3) % run.log().len()].id
            } else {
                derived_event_id(run.run_key(), x, 0)
            };
            let mut attempt = 1;
            if n % 5 == 0 {
                attempt = run.retry(x).expect("retry");
            }
            outs.push(NewEvent::known(id, ty));
            run.complete_returned(x, attempt, &mut outs, &mut DeclaredConditions)
                .expect("complete");
        }
        let bound: Vec<_> = (0..run.executions().len() as u32)
            .map(|x| run.bound_event_ids(ExecutionId(x)))
            .collect();
        format!(
            "{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{bound:?}",
            run.status(),
            run.records(),
            run.log(),
            run.executions(),
            (0..run.executions().len() as u32)
                .map(|x| run.bindings(ExecutionId(x)).to_vec())
                .collect::<Vec<_>>(),
        )
    }

    /// A completion that returns one chain link is decided from the compiled entry
    /// (`Run::chain_link`); a budget on every step sends the same completions through the
    /// general append and dispatch. Both must leave the same records, log, executions and
    /// bindings: ids scanned and indexed (and the switch), duplicates, retried attempts,
    /// events past the static seq table, the stop.
    #[test]
    fn a_chain_link_completion_decides_like_the_general_path() {
        let budget = ", max_executions_per_run: 100000";
        for (ids, sets) in [(32, 32), (0, 0), (5, 3)] {
            for completions in [1, 9, 40, 300] {
                let fast = drive_loop("", ids, sets, completions);
                let general = drive_loop(budget, ids, sets, completions);
                assert_eq!(
                    fast, general,
                    "ids index at {ids}, input sets at {sets}, {completions} completions"
                );
                assert!(fast.contains("Terminated"), "the run ends");
            }
        }
        // The shortcut is taken where it applies, and only there.
        let spec = |budget: &str| {
            crate::compile_spec_text(
                &format!("name: W\nevents: [{{name: A}}]\nsteps:\n  - {{name: s, params: [{{name: x, kind: required, types: [A]}}]{budget}}}\n"),
                crate::SpecSyntax::Yaml,
            )
            .expect("spec")
        };
        let plain = spec("");
        let a = plain.type_id("A").expect("A");
        assert!(plain.chain_link(a).is_some());
        assert!(spec(budget).chain_link(a).is_none());
        assert!(
            plain
                .chain_link(plain.type_id("StopEvent").expect("stop"))
                .is_none()
        );
    }

    /// A fixed list that is its step's only parameter is decided without the general
    /// readiness check; a step with the same fixed list and an optional parameter that never
    /// blocks goes through it. Both must record the same decisions for every arrival
    /// (short, full, overflow).
    #[test]
    fn a_sole_fixed_list_decides_arrivals_like_the_general_readiness_check() {
        let records = |extra: &str| {
            let mut run = run_of(&format!(
                "name: W\nevents: [{{name: A}}, {{name: O}}]\nsteps:\n  - {{name: fan, params: [{{name: s, kind: required, types: [StartEvent]}}], outputs: [A]}}\n  - {{name: join, params: [{{name: xs, kind: fixed_list, size: 3, types: [A]}}{extra}]}}\n"
            ));
            send(&mut run, 1, "StartEvent");
            let x = run.take_started();
            fan_out(&mut run, x[0], "A", 5);
            assert_eq!(run.take_started().len(), 1, "the fan-in starts once");
            run.records().to_vec()
        };
        let sole = records("");
        assert!(sole.iter().any(|r| matches!(
            r,
            Record::Skipped {
                reason: SkipReason::FixedListShort {
                    have: 2,
                    need: 3,
                    ..
                },
                ..
            }
        )));
        assert!(
            sole.iter()
                .any(|r| matches!(r, Record::FixedListOverflow { .. }))
        );
        assert_eq!(sole, records(", {name: o, kind: optional, types: [O]}"));
    }

    /// A fan-out to workers sizes, once, the tables its workers' results and their fan-in
    /// will fill: no table is reallocated (and copied) from the fan-out to the run's end,
    /// for a fixed-list fan-in, a list fan-in and a fan-out larger than a fixed list's
    /// first reservation; and the run decides as before (one fan-in, the stop).
    #[test]
    fn a_fan_out_sizes_the_tables_of_its_workers_and_their_fan_in_once() {
        let gate = ", precondition: {name: all, when: {count_at_least: {param: xs, n: 300}}}";
        for (n, fan_in, gate) in [
            (
                300,
                "{name: xs, kind: fixed_list, size: 300, types: [R]}",
                "",
            ),
            (
                6000,
                "{name: xs, kind: fixed_list, size: 6000, types: [R]}",
                "",
            ),
            (300, "{name: xs, kind: list, types: [R]}", gate),
        ] {
            let mut run = run_of(&format!(
                "name: W\nevents: [{{name: A}}, {{name: R}}, {{name: Done, parents: [StopEvent]}}]\nsteps:\n  - {{name: fan, params: [{{name: s, kind: required, types: [StartEvent]}}], outputs: [A]}}\n  - {{name: work, params: [{{name: a, kind: required, types: [A]}}], outputs: [R]}}\n  - {{name: join, params: [{fan_in}], outputs: [Done]{gate}}}\n"
            ));
            send(&mut run, 1, "StartEvent");
            let x = run.take_started();
            fan_out(&mut run, x[0], "A", n);
            let slot = run.param_slot(2, 0);
            let tables = |run: &Run| {
                (
                    run.log.as_ptr(),
                    run.records.as_ptr(),
                    run.executions.as_ptr(),
                    run.bindings.as_ptr(),
                    run.matches[slot].as_ptr(),
                    run.rare.as_ref().map(|r| r.by_id.capacity()),
                )
            };
            let sized = tables(&run);
            let r = run.spec().type_id("R").expect("R");
            let done = run.spec().type_id("Done").expect("Done");
            let mut outs = Vec::new();
            for w in run.take_started() {
                outs.push(NewEvent::known(derived_event_id(run.run_key(), w, 0), r));
                run.complete_returned(w, 1, &mut outs, &mut DeclaredConditions)
                    .expect("a worker completes");
            }
            let join = run.take_started();
            assert_eq!(join.len(), 1, "{fan_in}: the fan-in runs once");
            outs.push(NewEvent::known(
                derived_event_id(run.run_key(), join[0], 0),
                done,
            ));
            run.complete_returned(join[0], 1, &mut outs, &mut DeclaredConditions)
                .expect("the fan-in completes");
            assert!(run.is_terminated());
            assert_eq!(run.log().len(), 2 * n as usize + 2);
            assert_eq!(tables(&run), sized, "{fan_in}, {n} items: a table grew");
        }
    }

    /// A recycled run builds its id index in the table the run before it left, once per
    /// fan-out.
    #[test]
    fn a_recycled_run_builds_its_id_index_in_the_table_it_kept() {
        let mut run = run_of(
            "name: W\nevents: [{name: A}]\nsteps:\n  - {name: fan, params: [{name: s, kind: required, types: [StartEvent]}], outputs: [A]}\n  - {name: join, params: [{name: xs, kind: fixed_list, size: 100, types: [A]}]}\n",
        );
        let mut slots = None;
        for key in 1..4 {
            run.reset(key);
            send(&mut run, 1, "StartEvent");
            let x = run.take_started();
            fan_out(&mut run, x[0], "A", 100);
            let index = &run.rare.as_ref().expect("indexed").by_id;
            assert_eq!(index.len(), 101);
            let now = index.slots_ptr();
            assert_eq!(*slots.get_or_insert(now), now, "run {key}: a new table");
            assert_eq!(run.seq_of(&run.log()[57].id), Some(57));
        }
    }

    /// A run that grows into an ended run's tables (`take_tables`, `grow_into`) builds its
    /// id index in that run's table, emptied, not in a new one; and decides as a run that
    /// built its own.
    #[test]
    fn a_run_grown_into_an_ended_runs_tables_builds_its_id_index_in_their_table() {
        let yaml = "name: W\nevents: [{name: A}]\nsteps:\n  - {name: fan, params: [{name: s, kind: required, types: [StartEvent]}], outputs: [A]}\n  - {name: join, params: [{name: xs, kind: fixed_list, size: 100, types: [A]}]}\n";
        let fanned = |run: &mut Run| {
            send(run, 1, "StartEvent");
            let x = run.take_started();
            fan_out(run, x[0], "A", 100);
        };
        let mut ended = run_of(yaml);
        fanned(&mut ended);
        let table = ended.rare.as_ref().expect("indexed").by_id.slots_ptr();
        let mut tables = ended.take_tables();
        assert!(ended.rare.is_none());
        let mut grown = ended.sibling(5);
        grown.grow_into(&mut tables);
        fanned(&mut grown);
        let index = &grown.rare.as_ref().expect("indexed").by_id;
        assert_eq!(index.len(), 101);
        assert_eq!(index.slots_ptr(), table, "a new table");
        let mut own = ended.sibling(5);
        fanned(&mut own);
        assert_eq!(grown.records(), own.records());
        for (seq, e) in own.log().iter().enumerate() {
            assert_eq!(grown.seq_of(&e.id), Some(seq as Seq));
        }
    }

    /// A list that is its step's only parameter goes straight to the precondition until the
    /// step first runs; a step with the same list and an optional parameter goes through the
    /// general readiness check. Both must record the same decisions (candidate,
    /// precondition results, skips, the start, and the input-set skips after it).
    #[test]
    fn a_sole_list_decides_arrivals_like_the_general_readiness_check() {
        let records = |extra: &str| {
            let mut run = run_of(&format!(
                "name: W\nevents: [{{name: A}}, {{name: O}}]\nsteps:\n  - {{name: fan, params: [{{name: s, kind: required, types: [StartEvent]}}], outputs: [A]}}\n  - {{name: join, params: [{{name: xs, kind: list, types: [A]}}{extra}], precondition: {{name: enough, when: {{count_at_least: {{param: xs, n: 3}}}}}}}}\n"
            ));
            send(&mut run, 1, "StartEvent");
            let x = run.take_started();
            fan_out(&mut run, x[0], "A", 5);
            assert_eq!(
                run.take_started().len(),
                3,
                "the fan-in runs at 3, 4 and 5 items"
            );
            run.records().to_vec()
        };
        let sole = records("");
        assert!(sole.iter().any(|r| matches!(
            r,
            Record::Skipped {
                reason: SkipReason::PreconditionFalse,
                ..
            }
        )));
        assert_eq!(sole, records(", {name: o, kind: optional, types: [O]}"));
    }

    /// Single bindings of events past the static table (seq ≥ 256) still expand to their
    /// event: through the chain link's path, the general path and a precondition's view.
    #[test]
    fn single_bindings_past_the_static_table_expand_to_their_event() {
        let mut run = run_of(
            "name: W\nevents: [{name: A}, {name: B}, {name: C}]\nsteps:\n  - {name: link, params: [{name: c, kind: required, types: [C]}]}\n  - {name: both, params: [{name: a, kind: required, types: [A]}, {name: b, kind: optional, types: [B]}], precondition: {name: has_b, when: {present: b}}}\n",
        );
        send(&mut run, 1, "StartEvent");
        for n in 2..300 {
            send(&mut run, n, "B");
        }
        send(&mut run, 300, "A");
        send(&mut run, 301, "C");
        let started = run.take_started();
        assert_eq!(started.len(), 2);
        let id = |n| counter_event_id(n);
        assert_eq!(
            run.bound_event_ids(started[0]),
            vec![vec![id(300)], vec![id(299)]]
        );
        assert_eq!(run.bound_event_ids(started[1]), vec![vec![id(301)]]);
    }

    /// A fan-out's outputs reserve the records they will make: one arrival makes
    /// `arrival_records` records (appended, and per consuming step a candidate, a
    /// precondition result when it has one, and a start or a skip).
    #[test]
    fn arrival_records_count_the_records_one_arrival_makes() {
        let mut run = run_of(
            "name: W\nevents: [{name: A}, {name: B}, {name: N}, {name: D, parents: [DisplayEvent]}, {name: Done, parents: [StopEvent]}]\nsteps:\n  - {name: link, params: [{name: a, kind: required, types: [A]}]}\n  - {name: fan_in, params: [{name: xs, kind: fixed_list, size: 9, types: [A]}]}\n  - {name: gated, params: [{name: bs, kind: list, types: [B]}], precondition: {name: many, when: {count_at_least: {param: bs, n: 5}}}}\n",
        );
        send(&mut run, 1, "StartEvent");
        for (n, ty) in [
            (2, "A"),
            (3, "B"),
            (4, "N"),
            (5, "D"),
            (6, "A"),
            (7, "Done"),
        ] {
            let before = run.records().len();
            send(&mut run, n, ty);
            let t = run.spec().type_id(ty).expect("type");
            assert_eq!(
                run.records().len() - before,
                run.spec().arrival_records(t) as usize,
                "{ty}"
            );
        }
    }

    /// Only required parameters and fixed lists can fail readiness (DESIGN §4.3: optional
    /// and list parameters never block), so only steps with one run that check.
    #[test]
    fn only_required_and_fixed_list_parameters_can_block_a_step() {
        let run = run_of(
            "name: W\nevents: [{name: A}]\nsteps:\n  - {name: req, params: [{name: a, kind: required, types: [A]}]}\n  - {name: fixed, params: [{name: a, kind: fixed_list, size: 2, types: [A]}]}\n  - {name: lists, params: [{name: a, kind: list, types: [A]}, {name: b, kind: optional, types: [A]}]}\n  - {name: mixed, params: [{name: a, kind: list, types: [A]}, {name: b, kind: required, types: [A]}]}\n",
        );
        let blocks: Vec<bool> = (0..4).map(|s| run.spec().can_block(s)).collect();
        assert_eq!(blocks, [true, true, false, true]);
    }

    /// The scan filter only pays if ids of one run land on different bits: counter ids
    /// (differing in their last bytes) and derived ids (differing everywhere) both spread.
    #[test]
    fn id_fingerprints_spread_counter_and_derived_ids_over_the_bits() {
        let distinct = |ids: Vec<EventId>| {
            let mut seen = std::collections::HashSet::new();
            for id in &ids {
                seen.insert(id_bit(id));
            }
            seen.len()
        };
        let counters = distinct((1..=32).map(counter_event_id).collect());
        let key = run_key("run-1");
        let derived = distinct(
            (0..32)
                .map(|x| derived_event_id(key, ExecutionId(x), 0))
                .collect(),
        );
        // 32 ids over 128 bits: a uniform spread leaves about 28 distinct.
        assert!(counters >= 24, "counter ids on {counters} bits");
        assert!(derived >= 24, "derived ids on {derived} bits");
    }

    #[test]
    fn started_executions_are_taken_one_at_a_time_in_start_order() {
        let spec = crate::compile_spec_text(
            "name: W\nevents: [{name: A}]\nsteps:\n  - {name: one, params: [{name: s, kind: required, types: [StartEvent]}]}\n  - {name: two, params: [{name: s, kind: required, types: [StartEvent]}]}\n  - {name: three, params: [{name: a, kind: required, types: [A]}]}\n",
            crate::SpecSyntax::Yaml,
        )
        .expect("spec");
        let start = spec.type_id("StartEvent").expect("StartEvent");
        let a = spec.type_id("A").expect("A");
        let mut run = Run::new(Arc::new(spec), 1);
        run.append(
            NewEvent::known(counter_event_id(1), start),
            &mut DeclaredConditions,
        )
        .expect("start");
        assert_eq!(run.next_started(), Some(ExecutionId(0)));
        // The rest at once, as before: the same order.
        run.append(
            NewEvent::known(counter_event_id(2), a),
            &mut DeclaredConditions,
        )
        .expect("A");
        assert_eq!(run.take_started(), vec![ExecutionId(1), ExecutionId(2)]);
        assert_eq!(run.next_started(), None, "each is taken once");
    }

    /// `memory_bytes` counts what grows with the events (log, records), which
    /// `state_bytes` leaves out.
    /// A failed execution's message is kept (cut at `MAX_ERROR_MESSAGE` on a character
    /// boundary) beside the execution table, read by id; others have none, and a reset
    /// run forgets it. The execution table's entry stays 20 bytes.
    #[test]
    fn a_failed_executions_error_is_read_by_id_cut_and_forgotten_on_reset() {
        assert!(std::mem::size_of::<Execution>() <= 20);
        let mut run = run_of(
            "name: W\nevents: [{name: A}]\nsteps:\n  - {name: s, stop_on_error: false, params: [{name: x, kind: required, types: [StartEvent]}], outputs: [A]}\n  - {name: t, stop_on_error: false, params: [{name: x, kind: required, types: [StartEvent]}], outputs: [A]}\n",
        );
        send(&mut run, 1, "StartEvent");
        let started = run.take_started();
        assert_eq!(started.len(), 2);
        let long = format!("{}é", "x".repeat(MAX_ERROR_MESSAGE - 1));
        run.complete(
            started[0],
            1,
            Outcome::Failed(long.clone()),
            &mut DeclaredConditions,
        )
        .expect("failed");
        run.complete(
            started[1],
            1,
            Outcome::Returned(Vec::new()),
            &mut DeclaredConditions,
        )
        .expect("completed");
        assert_eq!(
            run.execution_error(started[0]),
            Some(&long[..MAX_ERROR_MESSAGE - 1])
        );
        assert_eq!(run.execution_error(started[1]), None);
        assert_eq!(run.execution_error(ExecutionId(9)), None);
        assert!(run.memory_bytes() > MAX_ERROR_MESSAGE);
        run.reset(4);
        assert_eq!(run.execution_error(started[0]), None);
    }

    #[test]
    fn memory_bytes_counts_the_log_and_the_records() {
        let spec = crate::compile_spec_text(
            "name: W\nevents: [{name: Note, parents: [DisplayEvent]}]\nsteps: []\n",
            crate::SpecSyntax::Yaml,
        )
        .expect("spec");
        let note = spec.type_id("Note").expect("Note");
        let mut run = Run::new(Arc::new(spec), 1);
        for n in 0..100 {
            run.append(
                NewEvent::known(counter_event_id(n), note),
                &mut DeclaredConditions,
            )
            .expect("display events are logged");
        }
        let at_least = std::mem::size_of::<Run>()
            + run.state_bytes()
            + std::mem::size_of_val(run.log())
            + run.records().len() * std::mem::size_of::<Packed>();
        assert!(run.log().len() == 100 && run.records().len() == 100);
        assert!(
            run.memory_bytes() >= at_least,
            "{} < {at_least}",
            run.memory_bytes()
        );
    }
}
