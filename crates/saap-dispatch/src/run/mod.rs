//! The run state machine: one run's log and the dispatch decisions over it (DESIGN §4).
//!
//! Input comes in as an [`input::RunInput`] through [`Run::handle`] (or the specific entry points it
//! picks: [`Run::append`] when an event arrives, [`Run::complete`] when an execution
//! finished, [`Run::retry`] when an execution is run again after a crash); output
//! leaves as [`Record`]s and as started executions taken with [`Run::take_started`]. No
//! clock, no randomness, no I/O, no async: the same inputs always give the same records,
//! which is what lets engines, the simulator, the explorer and `explain` share it.
//!
//! Preconditions are user code, so they are asked of a [`PreconditionEvaluator`] passed in
//! by the caller, and their results are recorded.
//!
//! Where each part lives: `input` (the one way in), `append` (an event arrives), `dispatch` (which steps a logged
//! event starts, R1–R6), `complete` (an execution ends, its outputs logged), `timers`
//! (events delivered at a due time), `children` (runs delegated to), `budget` (how much a run may
//! run before it waits for a person), `progress` (where a run stands, derived), `memory`
//! (tables reused between runs, sizes); this file: the types, the run's state and what can
//! be read of it. Each file is an `impl Run` of its own.

mod append;
pub mod budget;
#[cfg(test)]
mod budget_tests;
pub mod children;
#[cfg(test)]
mod children_tests;
mod complete;
mod dispatch;
pub mod input;
mod memory;
pub mod progress;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod timer_tests;
pub mod timers;

use crate::compiled::{CompiledCondition, CompiledSpec, EventKind, TypeId};
use crate::id_index::IdIndex;
use crate::ids::{EventId, ExecutionId, FastMap, ParamIdx, Seq, StepIdx};
use crate::record::{Origin, Packed, Record, Records};
use std::hash::Hash;
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

/// An event to deliver at a time (nanoseconds since the Unix epoch), as an execution
/// returned it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TimerRequest {
    pub event: NewEvent,
    pub due_ns: u64,
}

/// Where a timer stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerState {
    /// Not due yet (or due, and no clock reading has reached the run since).
    Pending,
    /// Delivered: its event is the log's `seq`, or was dropped there as a duplicate
    /// (`seq` is `None` then).
    Fired { seq: Option<Seq> },
    /// The run ended before it came due.
    Dropped,
}

/// One timer of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timer {
    pub event_id: EventId,
    pub ty: NewEventType,
    pub due_ns: u64,
    /// The execution that returned it (the origin its event is appended with).
    pub set_by: ExecutionId,
    pub state: TimerState,
    /// The child whose deadline it is ([`ChildRequest::deadline`]): dropped when the
    /// child's end comes first; when it fires first, the child is given up.
    pub for_child: Option<u32>,
}

/// A delegation as an execution returned it: its request event (one of the same
/// completion's outputs, so already in the log) and whether the run waits for the child's
/// end (awaited, the default) or lets it run on its own (detached). An awaited child may
/// have a deadline: an event (reporting the timeout) delivered at a due time in place of the
/// child's end, if that has not come by then.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChildRequest {
    pub request: EventId,
    pub detached: bool,
    pub deadline: Option<TimerRequest>,
}

/// What a grant adds to a run's budget (see `budget`). `None` leaves that part as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BudgetGrant {
    /// This many more executions (counted from the run's limit, or, on a run with none yet,
    /// from the executions released so far).
    pub executions: Option<u32>,
    /// This much more wall time, in nanoseconds, from `now_ns`.
    pub wall_ns: Option<u64>,
    /// This many more model tokens (counted like executions: from the limit, or from what
    /// was used).
    pub tokens: Option<u64>,
    /// This much more model cost, in millionths of the price table's currency.
    pub cost_micros: Option<u64>,
    /// The clock reading the grant was made at (nanoseconds since the Unix epoch).
    pub now_ns: u64,
}

/// A budget counted in what the run's executions used (model tokens, model cost): the most
/// they may use, what they used, and where it holds executions once spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Meter {
    /// The most; `None`: no limit.
    pub max: Option<u64>,
    /// Used so far (the executions that completed reported it).
    pub used: u64,
    /// Spent (`used` reached `max`) and no grant since gave more: the first execution held.
    pub held_from: Option<u32>,
}

/// A run's budget as grants left it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Budget {
    /// How many executions may run in all (those numbered below it); `None`: no limit.
    pub max_executions: Option<u32>,
    /// When the wall time ends (nanoseconds since the Unix epoch); `None`: no limit.
    pub until_ns: Option<u64>,
    /// The wall time ended (a clock reading reached `until_ns`) and no grant since gave
    /// more: executions from [`Budget::wall_held_from`] on are held.
    pub wall_spent: bool,
    /// The first execution the spent wall time holds.
    pub wall_held_from: u32,
    /// Model tokens.
    pub tokens: Meter,
    /// Model cost, in millionths of the price table's currency.
    pub cost_micros: Meter,
    /// The run's first grant: what a resume without amounts grants again.
    pub first: BudgetGrant,
    /// How many grants the run has had (the first one included).
    pub grants: u32,
}

/// Where a child run stands, as its parent knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildState {
    /// The parent waits for the event reporting its end.
    Awaited,
    /// It runs on its own: its end is never delivered to the parent.
    Detached,
    /// Its end was delivered: the reporting event is the log's `seq` (`None`: it was
    /// dropped there as a duplicate).
    Ended { seq: Option<Seq> },
    /// Its end was delivered (the log's `seq`) and no step takes the reporting event: the
    /// run will not get what it delegated for this way (an unmet obligation, recorded, and
    /// shown as the run's wait until something else moves it).
    Unmet { seq: Seq },
    /// Its deadline came first: the deadline's event is the log's `seq` (`None`: dropped
    /// there as a duplicate); the engine cancels its run, and its end, if it comes, is not
    /// delivered.
    TimedOut { seq: Option<Seq> },
    /// The parent ended while it was awaited, or was cancelled (awaited or detached): the
    /// engine cancels it, and an end that arrives later is kept as after-stop evidence.
    Abandoned,
}

/// One child run of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Child {
    /// The request event (engines derive the child run's id from it).
    pub request: EventId,
    /// Where the request is in the log.
    pub request_seq: Seq,
    /// The execution that returned the request.
    pub requested_by: ExecutionId,
    pub state: ChildState,
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
        "execution {0} is held for the run's budget and has not run; a completion cannot come before a grant releases it"
    )]
    Held(ExecutionId),
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

/// What a run waits on besides events — its timers, the runs it delegated to, its budget —
/// kept out of line apart from [`Rare`]: a run that only waits for a timer allocates this
/// (56 bytes), not the larger tables it never uses.
#[derive(Debug, Clone, Default)]
struct Waits {
    /// The run's timers, in the order they were set (see `timers`).
    timers: Vec<Timer>,
    /// The runs it delegated to, in the order they were requested (see `children`).
    children: Vec<Child>,
    /// The run's budget, once one was granted (see `budget`).
    budget: Option<Box<Budget>>,
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

fn waits(w: &mut Option<Box<Waits>>) -> &mut Waits {
    w.get_or_insert_with(Default::default)
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
    /// Timers, children and budget (see [`Waits`]).
    waits: Option<Box<Waits>>,
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
    /// Executions from this index on are held for the budget (see `budget`): not handed
    /// out until a grant releases them. `u32::MAX` when nothing is held.
    held_from: u32,
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
            waits: None,
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
            held_from: u32::MAX,
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
    /// Executions that started and have not finished (to run again after a restart); not
    /// those held for the budget ([`Run::held`]).
    pub fn running(&self) -> impl Iterator<Item = ExecutionId> + '_ {
        self.executions[..self.released_len() as usize]
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
        if self.untaken < self.released_len() {
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
        if self.untaken as usize + 1 != n || n as u32 > self.held_from {
            return None;
        }
        self.untaken = n as u32;
        Some((ExecutionId(n as u32 - 1), last.step))
    }

    /// Like [`Run::take_started`], as an iterator over the ids (no buffer).
    pub fn drain_started(&mut self) -> impl Iterator<Item = ExecutionId> + use<> {
        let end = self.released_len();
        let from = std::mem::replace(&mut self.untaken, end);
        (from..end).map(ExecutionId)
    }
    /// Like [`Run::take_started`], into a caller's buffer (no allocation).
    pub fn drain_started_into(&mut self, out: &mut Vec<ExecutionId>) {
        let end = self.released_len();
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
}
