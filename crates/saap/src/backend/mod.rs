//! Backends: where the engine keeps what must survive — each run's journal of inputs (with
//! payloads), its decision records, RunContext and ThreadContext.
//!
//! The engine writes through [`Backend::persist`] in journal order while it holds the run's
//! lock, and starts the executions a batch decided only after the batch is durable
//! (DESIGN §4.9). Two implementations: [`memory::MemoryBackend`] (tests, speed; nothing
//! survives the process) and [`sqlite::SqliteBackend`] (embedded, durable, WAL, group commit).

pub mod children;
pub mod effects;
pub mod memory;
pub mod sqlite;
mod sqlite_effects;

pub use effects::{EffectAt, EffectLimits, EffectOutcome, EffectRecord, EffectTake};

use saap_dispatch::EventId;
use saap_dispatch::replay::RunInput;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tokio::sync::oneshot;

/// Storage failures. Each message says what went wrong and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error(
        "SAAP-S001: `{path}` is not a saap database or is corrupt ({detail}); move it away and start with a new file, or restore a backup"
    )]
    Corrupt { path: String, detail: String },
    #[error(
        "SAAP-S002: `{path}` is locked by another engine ({detail}); only one engine may own a database: stop the other process or use another file"
    )]
    Locked { path: String, detail: String },
    #[error("SAAP-S003: cannot open `{path}`: {detail}; check the path and its permissions")]
    Open { path: String, detail: String },
    #[error("SAAP-S004: the database failed: {detail}; the run was stopped to keep it consistent")]
    Io { detail: String },
    #[error(
        "SAAP-S005: the store was halted (process crash simulation or shutdown); reopen the engine to resume runs"
    )]
    Halted,
    #[error(
        "SAAP-S006: stored data for run `{run_id}` cannot be read ({detail}); the row was written by another version or damaged: the run is skipped and its rows are kept as they are (other runs are unaffected); restore the database from a backup to get it back"
    )]
    BadRow { run_id: String, detail: String },
    #[error(
        "SAAP-S007: the {store} store cannot {what} yet; run the agent on the embedded store (`--engine sqlite`) or in memory for it"
    )]
    Unsupported {
        store: &'static str,
        what: &'static str,
    },
    #[error(
        "SAAP-S008: `{path}` cannot be read as a saap database ({detail}); nothing was changed in it"
    )]
    NotReadable { path: String, detail: String },
}

impl StoreError {
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::Corrupt { .. } => "SAAP-S001",
            StoreError::Locked { .. } => "SAAP-S002",
            StoreError::Open { .. } => "SAAP-S003",
            StoreError::Io { .. } => "SAAP-S004",
            StoreError::Halted => "SAAP-S005",
            StoreError::BadRow { .. } => "SAAP-S006",
            StoreError::Unsupported { .. } => "SAAP-S007",
            StoreError::NotReadable { .. } => "SAAP-S008",
        }
    }
}

/// A result that is either ready now or will be delivered by a store thread.
pub enum Pending<T> {
    Ready(Result<T, StoreError>),
    Wait(oneshot::Receiver<Result<T, StoreError>>),
}

impl<T> Pending<T> {
    pub async fn wait(self) -> Result<T, StoreError> {
        match self {
            Pending::Ready(r) => r,
            Pending::Wait(rx) => rx.await.unwrap_or(Err(StoreError::Halted)),
        }
    }
    pub fn is_ready(&self) -> bool {
        matches!(self, Pending::Ready(_))
    }
}

/// Which context a key lives in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// RunContext: deleted when the run ends.
    Run(Arc<str>),
    /// ThreadContext: outlives runs, expires after the TTL.
    Thread(Arc<str>),
}

/// An event as stored in the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredEvent {
    pub id: EventId,
    #[serde(rename = "n")]
    pub name: String,
    /// Classification bits (see `saap_dispatch::EventKind`).
    #[serde(rename = "k")]
    pub kind: u8,
    #[serde(rename = "p")]
    pub payload: crate::event::Payload,
}

/// One journal input (the stored form of `saap_dispatch::replay::RunInput`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "in", rename_all = "snake_case")]
pub enum StoredInput {
    Append {
        event: StoredEvent,
        /// The execution that showed this display event, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u32>,
        /// The budget a run's start event starts it with (granted before the event).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        budget: Option<StoredGrant>,
    },
    Complete {
        execution: u32,
        attempt: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outputs: Option<Vec<StoredEvent>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Events the execution returned for later delivery (its timers), set in the same
        /// entry as its completion.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        timers: Vec<StoredTimer>,
        /// Requests among the outputs that started child runs, in the same entry.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        children: Vec<StoredChild>,
        /// What the execution's model calls used (for a run with a token or cost budget):
        /// counted just before the completion.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<StoredUsage>,
        /// In a fork: the execution of the original whose recorded outputs these are (its
        /// inputs were the same; the body did not run).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reused: Option<u32>,
    },
    Retry {
        execution: u32,
    },
    /// The engine's clock read `now_ns`: the run's timers due by then fired.
    Clock {
        now_ns: u64,
    },
    /// Child `child`'s run ended; `event` reports it.
    ChildEnded {
        child: u32,
        event: StoredEvent,
    },
    /// More budget was granted to the run (a resume).
    Budget(StoredGrant),
}

/// A budget grant as stored: this many more executions, this much more wall time
/// (nanoseconds), at the clock reading `now_ns` (see `saap_dispatch::run::budget`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredGrant {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executions: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_micros: Option<u64>,
    pub now_ns: u64,
}

/// What an execution's model calls used, as stored with its completion: tokens, and cost in
/// millionths of the price table's currency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StoredUsage {
    pub tokens: u64,
    pub cost_micros: u64,
}

impl StoredGrant {
    /// The core's grant.
    pub fn grant(self) -> saap_dispatch::run::budget::BudgetGrant {
        saap_dispatch::run::budget::BudgetGrant {
            executions: self.executions,
            wall_ns: self.wall_ns,
            tokens: self.tokens,
            cost_micros: self.cost_micros,
            now_ns: self.now_ns,
        }
    }

    /// The stored form of a core grant.
    pub fn of(g: saap_dispatch::run::budget::BudgetGrant) -> StoredGrant {
        StoredGrant {
            executions: g.executions,
            wall_ns: g.wall_ns,
            tokens: g.tokens,
            cost_micros: g.cost_micros,
            now_ns: g.now_ns,
        }
    }
}

/// A child run as stored in the journal: the output that requested it, whether it runs
/// detached, and its deadline (the event delivered in its end's place if that has not come
/// by then: the request's `timeout_seconds`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredChild {
    pub request: EventId,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub detached: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<StoredTimer>,
}

/// The core's inputs one journal entry stands for ([`StoredInput::core_inputs`]): first, for
/// a start event with a budget, the grant, and for a completion that reports what its model
/// calls used, that usage; the input; then, for a completion, the timers and the children it
/// set.
pub struct CoreInputs {
    pub before: Option<RunInput>,
    pub input: RunInput,
    pub schedule: Option<RunInput>,
    pub delegate: Option<RunInput>,
}

/// A timer as stored in the journal: its event and when it is due (nanoseconds since the
/// Unix epoch).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredTimer {
    pub event: StoredEvent,
    pub due_ns: u64,
}

impl StoredInput {
    /// The core's inputs this entry stands for: one, or for a completion that set timers or
    /// started children, those too (the completion, its timers, its children). `event`
    /// makes a stored event the core's.
    pub fn core_inputs(
        &self,
        mut event: impl FnMut(&StoredEvent) -> saap_dispatch::NewEvent,
    ) -> CoreInputs {
        use saap_dispatch::{ExecutionId, Outcome};
        let one = |input| CoreInputs {
            before: None,
            input,
            schedule: None,
            delegate: None,
        };
        match self {
            StoredInput::Append {
                event: e, budget, ..
            } => CoreInputs {
                before: budget.map(|g| RunInput::Budget(g.grant())),
                ..one(RunInput::Append(event(e)))
            },
            StoredInput::Budget(g) => one(RunInput::Budget(g.grant())),
            StoredInput::Complete {
                execution,
                attempt,
                outputs,
                error,
                timers,
                children,
                usage,
                reused: _,
            } => {
                let execution = ExecutionId(*execution);
                let outcome = match (outputs, error) {
                    (_, Some(msg)) => Outcome::Failed(msg.clone()),
                    (Some(outs), None) => Outcome::Returned(outs.iter().map(&mut event).collect()),
                    (None, None) => Outcome::Returned(Vec::new()),
                };
                let schedule = (!timers.is_empty()).then(|| RunInput::Schedule {
                    execution,
                    timers: timers
                        .iter()
                        .map(|t| saap_dispatch::run::timers::TimerRequest {
                            event: event(&t.event),
                            due_ns: t.due_ns,
                        })
                        .collect(),
                });
                let delegate = (!children.is_empty()).then(|| RunInput::Delegate {
                    execution,
                    children: children
                        .iter()
                        .map(|c| saap_dispatch::run::ChildRequest {
                            request: c.request,
                            detached: c.detached,
                            deadline: c.deadline.as_ref().map(|t| {
                                saap_dispatch::run::timers::TimerRequest {
                                    event: event(&t.event),
                                    due_ns: t.due_ns,
                                }
                            }),
                        })
                        .collect(),
                });
                CoreInputs {
                    before: usage.map(|u| RunInput::Usage {
                        tokens: u.tokens,
                        cost_micros: u.cost_micros,
                    }),
                    input: RunInput::Complete {
                        execution,
                        attempt: *attempt,
                        outcome,
                    },
                    schedule,
                    delegate,
                }
            }
            StoredInput::Retry { execution } => one(RunInput::Retry {
                execution: ExecutionId(*execution),
            }),
            StoredInput::Clock { now_ns } => one(RunInput::Clock { now_ns: *now_ns }),
            StoredInput::ChildEnded { child, event: e } => one(RunInput::ChildEnded {
                child: *child,
                event: event(e),
            }),
        }
    }
}

/// One journal entry: the input and the precondition results it produced (user code is
/// not called again on replay).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    #[serde(rename = "i")]
    pub input: StoredInput,
    #[serde(rename = "pre", default, skip_serializing_if = "Vec::is_empty")]
    pub preconditions: Vec<bool>,
    /// When the engine applied the input (nanoseconds since the Unix epoch): the times an
    /// exported trace gives a stored run's executions (`<agent> export RUN`). Absent in
    /// entries written before saap recorded it.
    #[serde(rename = "t", default, skip_serializing_if = "Option::is_none")]
    pub at: Option<u64>,
    /// On a forked run's first entry: the run it was forked from (`Engine::fork`).
    #[serde(rename = "fork", default, skip_serializing_if = "Option::is_none")]
    pub fork: Option<ForkOrigin>,
}

/// Where a forked run comes from: the run, the event it was forked at, and how many of that
/// run's journal entries it took over (their executions' outputs reused, not run again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkOrigin {
    #[serde(rename = "r")]
    pub run_id: String,
    /// The event (its position in the original's log) the fork replaced, added before, or
    /// sent again.
    pub at: u32,
    /// The original's journal entries the fork begins with.
    #[serde(rename = "n")]
    pub entries: u32,
    /// Every execution after the fork point runs live (`ForkOptions::reuse` off): none
    /// takes the original's recorded outputs, after a restart too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub live: bool,
}

/// Appends an id as its 24 hex characters in quotes (what `EventId`'s `Serialize` writes,
/// without formatting one byte at a time).
fn write_id(id: &EventId, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    for b in id.as_bytes() {
        out.push(HEX[(b >> 4) as usize]);
        out.push(HEX[(b & 15) as usize]);
    }
    out.push(b'"');
}

fn write_str(s: &str, out: &mut Vec<u8>) {
    // A string always serializes.
    let _ = serde_json::to_writer(&mut *out, s);
}

fn write_u32(n: u32, out: &mut Vec<u8>) {
    use std::io::Write;
    let _ = write!(out, "{n}");
}

fn write_u64(n: u64, out: &mut Vec<u8>) {
    use std::io::Write;
    let _ = write!(out, "{n}");
}

fn write_event(e: &StoredEvent, out: &mut Vec<u8>) -> Result<(), crate::event::PayloadError> {
    out.extend_from_slice(b"{\"id\":");
    write_id(&e.id, out);
    out.extend_from_slice(b",\"n\":");
    write_str(&e.name, out);
    out.extend_from_slice(b",\"k\":");
    write_u32(u32::from(e.kind), out);
    out.extend_from_slice(b",\"p\":");
    e.payload.write_json(out)?;
    out.push(b'}');
    Ok(())
}

/// Appends a grant as `{"executions":…,"wall_ns":…,…,"now_ns":…}` (absent parts left out).
fn write_grant(g: &StoredGrant, out: &mut Vec<u8>) {
    // Rare (a start with a budget, a resume): serde's text, no hand-written encoding.
    // A grant of plain numbers always serializes.
    let _ = serde_json::to_writer(&mut *out, g);
}

/// Encodes a journal entry as the JSON that `JournalEntry`'s `Deserialize` reads (the same
/// text serde would write, built directly: payloads go from their typed value to text).
pub fn encode_entry(
    input: &StoredInput,
    preconditions: &[bool],
    at: Option<u64>,
    out: &mut Vec<u8>,
) -> Result<(), crate::event::PayloadError> {
    out.extend_from_slice(b"{\"i\":{\"in\":");
    match input {
        StoredInput::Append { event, by, budget } => {
            out.extend_from_slice(b"\"append\",\"event\":");
            write_event(event, out)?;
            if let Some(x) = by {
                out.extend_from_slice(b",\"by\":");
                write_u32(*x, out);
            }
            if let Some(g) = budget {
                out.extend_from_slice(b",\"budget\":");
                write_grant(g, out);
            }
        }
        StoredInput::Budget(g) => {
            // The grant's fields beside the tag (how serde writes a newtype variant of an
            // internally tagged enum).
            out.extend_from_slice(b"\"budget\"");
            let mut fields = Vec::new();
            write_grant(g, &mut fields);
            // `{...}` without its braces, after a comma.
            out.push(b',');
            out.extend_from_slice(&fields[1..fields.len() - 1]);
        }
        StoredInput::Complete {
            execution,
            attempt,
            outputs,
            error,
            timers,
            children,
            usage,
            reused,
        } => {
            out.extend_from_slice(b"\"complete\",\"execution\":");
            write_u32(*execution, out);
            out.extend_from_slice(b",\"attempt\":");
            write_u32(*attempt, out);
            if let Some(outs) = outputs {
                out.extend_from_slice(b",\"outputs\":[");
                for (i, e) in outs.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_event(e, out)?;
                }
                out.push(b']');
            }
            if let Some(msg) = error {
                out.extend_from_slice(b",\"error\":");
                write_str(msg, out);
            }
            if !timers.is_empty() {
                out.extend_from_slice(b",\"timers\":[");
                for (i, t) in timers.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(b"{\"event\":");
                    write_event(&t.event, out)?;
                    out.extend_from_slice(b",\"due_ns\":");
                    write_u64(t.due_ns, out);
                    out.push(b'}');
                }
                out.push(b']');
            }
            if !children.is_empty() {
                out.extend_from_slice(b",\"children\":[");
                for (i, c) in children.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(b"{\"request\":");
                    write_id(&c.request, out);
                    if c.detached {
                        out.extend_from_slice(b",\"detached\":true");
                    }
                    if let Some(t) = &c.deadline {
                        out.extend_from_slice(b",\"deadline\":{\"event\":");
                        write_event(&t.event, out)?;
                        out.extend_from_slice(b",\"due_ns\":");
                        write_u64(t.due_ns, out);
                        out.push(b'}');
                    }
                    out.push(b'}');
                }
                out.push(b']');
            }
            if let Some(u) = usage {
                out.extend_from_slice(b",\"usage\":{\"tokens\":");
                write_u64(u.tokens, out);
                out.extend_from_slice(b",\"cost_micros\":");
                write_u64(u.cost_micros, out);
                out.push(b'}');
            }
            if let Some(x) = reused {
                out.extend_from_slice(b",\"reused\":");
                write_u32(*x, out);
            }
        }
        StoredInput::Retry { execution } => {
            out.extend_from_slice(b"\"retry\",\"execution\":");
            write_u32(*execution, out);
        }
        StoredInput::Clock { now_ns } => {
            out.extend_from_slice(b"\"clock\",\"now_ns\":");
            write_u64(*now_ns, out);
        }
        StoredInput::ChildEnded { child, event } => {
            out.extend_from_slice(b"\"child_ended\",\"child\":");
            write_u32(*child, out);
            out.extend_from_slice(b",\"event\":");
            write_event(event, out)?;
        }
    }
    out.push(b'}');
    if !preconditions.is_empty() {
        out.extend_from_slice(b",\"pre\":[");
        for (i, r) in preconditions.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(if *r { b"true" } else { b"false" });
        }
        out.push(b']');
    }
    if let Some(t) = at {
        use std::io::Write;
        let _ = write!(out, ",\"t\":{t}");
    }
    out.push(b'}');
    Ok(())
}

/// A run's identity as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunMeta {
    pub run_id: Arc<str>,
    pub thread_id: Arc<str>,
    pub workflow: String,
    pub fingerprint: u64,
    /// The run that delegated it, for a child run (kept so that a child whose parent ended
    /// while its process was down can be told at the next open).
    pub parent: Option<RunParent>,
}

/// The run that delegated a run: its id and agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunParent {
    #[serde(rename = "r")]
    pub run_id: String,
    #[serde(rename = "a")]
    pub agent_class: String,
}

/// What one engine step hands to the store, atomically.
pub struct PersistBatch {
    pub run_id: Arc<str>,
    /// Set on a run's first batch.
    pub new_run: Option<RunMeta>,
    /// The entry's position in the run's journal (0-based).
    pub index: u64,
    /// The [`JournalEntry`] as JSON (empty for a backend that keeps no journal).
    pub entry_json: String,
    /// The decision records this entry produced, as a JSON array.
    pub records_json: String,
    /// The run ended with this entry: delete its RunContext and mark it ended.
    pub ended: bool,
}

/// A run loaded from the store.
#[derive(Debug, Clone)]
pub struct StoredRun {
    pub meta: RunMeta,
    pub ended: bool,
    pub journal: Vec<JournalEntry>,
    /// Every record, in order (the concatenation of each entry's records).
    pub records: Vec<serde_json::Value>,
    /// How many of `records` each journal entry made, in journal order (which input made
    /// which decision: an exported trace dates each execution by it).
    pub entry_records: Vec<u32>,
    /// Why this run's stored rows cannot be read (a torn or edited row), when they cannot:
    /// `journal` and `records` are then empty. One damaged run never hides the others: the
    /// engine reports it in `Recovery::failed` and leaves its rows as they are.
    pub damaged: Option<String>,
}

impl StoredRun {
    /// When each journal entry was applied (ns since the epoch). An entry without a time
    /// (written before saap recorded them) takes the one before it, or the run id's creation
    /// second. An exported trace and the studio date executions by these.
    pub fn entry_times(&self) -> Vec<u64> {
        let mut last = self
            .meta
            .run_id
            .parse::<EventId>()
            .ok()
            .map_or(0, |id| u64::from(id.object_id_seconds()) * 1_000_000_000);
        self.journal
            .iter()
            .map(|e| {
                if let Some(t) = e.at {
                    last = t;
                }
                last
            })
            .collect()
    }

    /// The error of a damaged run ([`StoredRun::damaged`]), if it is damaged.
    pub fn damage(&self) -> Option<StoreError> {
        self.damaged.as_ref().map(|detail| StoreError::BadRow {
            run_id: self.meta.run_id.to_string(),
            detail: detail.clone(),
        })
    }
}

/// Which runs [`Backend::list_runs`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusFilter {
    /// Not ended: waiting for events or running steps.
    Live,
    /// Ended, by a stop or an exception event.
    Ended,
    /// Ended by a stop event.
    Stopped,
    /// Ended by an exception event other than a cancellation.
    Failed,
    /// Ended by its cancellation (`RunCancelledEvent`).
    Cancelled,
}

impl StatusFilter {
    /// Whether a run with this summary passes the filter.
    pub fn admits(self, s: &RunSummary) -> bool {
        match self {
            StatusFilter::Live => !s.ended,
            StatusFilter::Ended => s.ended,
            StatusFilter::Stopped => s.termination == Some(Termination::Stop),
            StatusFilter::Failed => s.termination == Some(Termination::Exception) && !s.cancelled,
            StatusFilter::Cancelled => s.cancelled,
        }
    }
}

/// The most runs one [`Backend::list_runs`] call returns.
pub const MAX_PAGE: usize = 10_000;
/// The longest id prefix a query accepts (run ids are 24 characters).
pub const MAX_ID_PREFIX: usize = 128;

/// A page of runs to list: newest first, after `offset` matching runs, at most `limit`
/// (capped at [`MAX_PAGE`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunQuery {
    pub status: Option<StatusFilter>,
    /// Only runs whose id starts with this (for resolving a prefix the user typed).
    pub id_prefix: Option<String>,
    /// A cursor: only runs listed after this run (older ones), as the last run of the
    /// previous page. Unlike `offset`, its cost does not grow with the pages skipped. An
    /// id the store does not know lists nothing.
    pub after: Option<String>,
    /// Only the runs of this thread (conversation).
    pub thread: Option<String>,
    /// Only runs started at or after this time, and before that one (ns since the epoch;
    /// when the store first saw the run).
    pub started_from_ns: Option<i64>,
    pub started_before_ns: Option<i64>,
    pub offset: usize,
    pub limit: usize,
}

impl Default for RunQuery {
    fn default() -> Self {
        RunQuery {
            status: None,
            id_prefix: None,
            after: None,
            thread: None,
            started_from_ns: None,
            started_before_ns: None,
            offset: 0,
            limit: 50,
        }
    }
}

impl RunQuery {
    /// Whether a run started at `started_ns` (when the store first saw it) is within the
    /// query's time range; a run whose start is unknown is not, when a range is given.
    pub fn admits_start(&self, started_ns: Option<i64>) -> bool {
        if self.started_from_ns.is_none() && self.started_before_ns.is_none() {
            return true;
        }
        started_ns.is_some_and(|t| {
            self.started_from_ns.is_none_or(|from| t >= from)
                && self.started_before_ns.is_none_or(|before| t < before)
        })
    }
    /// The thread asked for, bounded (a longer one cannot be a thread id anyway).
    pub fn thread(&self) -> Option<&str> {
        self.thread.as_deref().filter(|t| !t.is_empty()).map(|t| {
            &t[..t
                .char_indices()
                .nth(MAX_ID_PREFIX)
                .map_or(t.len(), |(i, _)| i)]
        })
    }
    /// The limit actually applied.
    pub fn page_size(&self) -> usize {
        self.limit.min(MAX_PAGE)
    }
    /// The prefix, bounded (a longer one cannot match a run id anyway).
    pub fn prefix(&self) -> Option<&str> {
        self.id_prefix
            .as_deref()
            .filter(|p| !p.is_empty())
            .map(|p| {
                let end = p
                    .char_indices()
                    .nth(MAX_ID_PREFIX)
                    .map_or(p.len(), |(i, _)| i);
                &p[..end]
            })
    }
}

pub use saap_dispatch::record::Termination;

/// What a listing says about one run without rebuilding it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunSummary {
    pub run_id: String,
    pub thread_id: String,
    pub ended: bool,
    /// How it ended (`None` while live, or when the store cannot tell cheaply).
    pub termination: Option<Termination>,
    /// It ended by its cancellation (an exception: `termination` says so too).
    pub cancelled: bool,
    /// When the store first saw the run (ns since the epoch), if it records that.
    pub started_ns: Option<i64>,
    /// Events in the run's log (after-stop evidence included).
    pub events: u64,
    /// Entries in the run's journal.
    pub journal_entries: u64,
}

impl RunSummary {
    /// The status `runs` lists: live, stopped, failed, cancelled, or ended (how it ended
    /// unknown).
    pub fn status(&self) -> &'static str {
        match (self.ended, self.termination) {
            (false, _) => "live",
            (true, Some(Termination::Exception)) if self.cancelled => "cancelled",
            (true, Some(Termination::Stop)) => "stopped",
            (true, Some(Termination::Exception)) => "failed",
            (true, None) => "ended",
        }
    }
}

/// One page of [`Backend::list_runs`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunPage {
    pub runs: Vec<RunSummary>,
    /// More runs match after this page (ask again with `offset + runs.len()`).
    pub more: bool,
}

/// What the decision records of some journal entries say about the run's log, read
/// without rebuilding it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordsSummary {
    /// The highest log position the records name (`seq` of an appended, started,
    /// terminating or after-stop record).
    pub max_seq: Option<u64>,
    /// The run ended in these records, and how.
    pub termination: Option<Termination>,
    /// An event arrived after the run had ended.
    pub after_stop: bool,
    /// The run ended by its cancellation (known from the entry that ended it:
    /// [`RecordsSummary::add_entry`]).
    pub cancelled: bool,
}

impl RecordsSummary {
    /// Reads a JSON array of decision records (as stored per journal entry).
    pub fn of_json(records: &str) -> Result<RecordsSummary, serde_json::Error> {
        let values: Vec<serde_json::Value> = serde_json::from_str(records)?;
        let mut s = RecordsSummary::default();
        s.add(&values);
        Ok(s)
    }

    /// Adds a journal entry (as JSON) and its records: an entry that ends the run by an
    /// exception and appends the cancellation event is a cancellation.
    pub fn add_entry(&mut self, entry: &serde_json::Value, records: &[serde_json::Value]) {
        let before = self.termination;
        self.add(records);
        if before.is_none()
            && self.termination == Some(Termination::Exception)
            && appends_cancellation(entry)
        {
            self.cancelled = true;
        }
    }

    /// Adds records (already parsed) to the summary.
    pub fn add(&mut self, records: &[serde_json::Value]) {
        for r in records {
            if let Some(seq) = r.get("seq").and_then(serde_json::Value::as_u64) {
                self.max_seq = Some(self.max_seq.map_or(seq, |m| m.max(seq)));
            }
            match r.get("record").and_then(serde_json::Value::as_str) {
                Some("run_terminated") => {
                    self.termination = match r.get("by").and_then(serde_json::Value::as_str) {
                        Some("exception") => Some(Termination::Exception),
                        _ => Some(Termination::Stop),
                    }
                }
                Some("event_after_stop") => self.after_stop = true,
                _ => {}
            }
        }
    }
}

/// Whether a journal entry (as JSON) appends the cancellation event (`RunCancelledEvent`).
pub fn appends_cancellation(entry: &serde_json::Value) -> bool {
    use crate::event::Event;
    entry.pointer("/i/in").and_then(serde_json::Value::as_str) == Some("append")
        && entry
            .pointer("/i/event/n")
            .and_then(serde_json::Value::as_str)
            == Some(crate::event::RunCancelledEvent::NAME)
}

/// Summarizes a run from its loaded journal.
pub fn summarize(run: &StoredRun, started_ns: Option<i64>) -> RunSummary {
    use crate::event::Event;
    let mut s = RecordsSummary::default();
    s.add(&run.records);
    // A cancel of an ended run is refused: a cancellation in a failed run's journal is what
    // ended it.
    let cancelled = s.termination == Some(Termination::Exception)
        && run.journal.iter().any(|e| {
            matches!(&e.input, StoredInput::Append { event, .. }
                if event.name == crate::event::RunCancelledEvent::NAME)
        });
    RunSummary {
        run_id: run.meta.run_id.to_string(),
        thread_id: run.meta.thread_id.to_string(),
        ended: run.ended || s.termination.is_some(),
        termination: s.termination,
        cancelled,
        started_ns,
        events: s.max_seq.map_or(0, |m| m + 1),
        journal_entries: run.journal.len() as u64,
    }
}

/// A run's id whose text is made when first asked for (an engine keeps its own ids inline
/// and makes the shared text only when something needs it).
pub trait LazyRunId: Sync {
    /// The run's id.
    fn run_id(&self) -> &Arc<str>;
}

/// A run's id as [`Backend::persist_end`] gets it: its text is made by the first
/// [`RunIdRef::get`] (a store that does not need it makes none).
#[derive(Clone, Copy)]
pub struct RunIdRef<'a>(&'a dyn LazyRunId);

impl<'a> RunIdRef<'a> {
    /// The id of `run`, made when first asked for.
    pub fn new(run: &'a dyn LazyRunId) -> Self {
        RunIdRef(run)
    }
    /// The run's id.
    pub fn get(&self) -> &Arc<str> {
        self.0.run_id()
    }
}

impl std::fmt::Debug for RunIdRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RunIdRef").field(self.get()).finish()
    }
}

/// Where runs, journals and contexts are kept.
pub trait Backend: Send + Sync + 'static {
    /// A short name for reports (`memory`, `sqlite`).
    fn name(&self) -> &'static str;
    /// Whether the engine must build journal entries (a backend that keeps nothing across
    /// restarts says no, and the engine skips that work).
    fn wants_journal(&self) -> bool;
    /// Stores a batch. Batches of one run arrive in journal order; the returned value
    /// resolves once the batch is durable.
    fn persist(&self, batch: PersistBatch) -> Pending<()>;
    /// What a backend that keeps no journal ([`Backend::wants_journal`] says no) hears of
    /// a run: its end, as the batch at `index` — the same as [`Backend::persist`] of a
    /// batch with nothing else in it, which it is unless the backend has a cheaper way.
    fn persist_end(&self, run_id: RunIdRef<'_>, index: u64) -> Pending<()> {
        self.persist(PersistBatch {
            run_id: run_id.get().clone(),
            new_run: None,
            index,
            entry_json: String::new(),
            records_json: String::new(),
            ended: true,
        })
    }
    /// Runs of a workflow (live ones only, or all).
    fn load_runs(&self, workflow: &str, live_only: bool) -> Pending<Vec<StoredRun>>;
    /// A page of a workflow's runs, newest first, summarized without rebuilding them.
    fn list_runs(&self, workflow: &str, query: &RunQuery) -> Pending<RunPage>;
    /// One run of a workflow with its journal and records (`None`: the store has no such
    /// run of this workflow).
    fn read_run(&self, workflow: &str, run_id: &str) -> Pending<Option<StoredRun>>;
    fn ctx_get(&self, scope: Scope, key: &str) -> Pending<Option<serde_json::Value>>;
    fn ctx_set(&self, scope: Scope, key: &str, value: serde_json::Value) -> Pending<()>;
    fn ctx_delete(&self, scope: Scope, key: &str) -> Pending<()>;
    /// Consumes, for attempt `at.attempt`, the oldest successful effect recorded under `key`
    /// in execution `at.execution` that this attempt has not consumed yet (FIFO per key), or
    /// says that none is left and how full the run's effect journal is.
    fn effect_take(&self, at: &EffectAt, key: &str) -> Pending<EffectTake> {
        let _ = (at, key);
        Pending::Ready(Err(self.no_effects()))
    }
    /// Records an effect call of run `run_id` made by attempt `record.attempt` (consumed by
    /// it), after the others (`record.seq` is set by the store); resolves once durable.
    fn effect_record(&self, run_id: &str, record: EffectRecord) -> Pending<()> {
        let _ = (run_id, record);
        Pending::Ready(Err(self.no_effects()))
    }
    /// Every effect recorded for run `run_id`, in the order recorded.
    fn effects(&self, run_id: &str) -> Pending<Vec<EffectRecord>> {
        let _ = run_id;
        Pending::Ready(Ok(Vec::new()))
    }
    /// The error of a store that does not journal effects.
    fn no_effects(&self) -> StoreError {
        StoreError::Unsupported {
            store: self.name(),
            what: "journal effects (`ctx.effect`)",
        }
    }
    /// Stops accepting writes at once, dropping what is not yet durable (a crash, for
    /// tests), and releases the store.
    fn halt(&self);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::event::{Payload, UserMessageEvent};

    fn ev(n: u64, payload: Payload) -> StoredEvent {
        StoredEvent {
            id: saap_dispatch::counter_event_id(n),
            name: "Odd \"name\"".to_string(),
            kind: 5,
            payload,
        }
    }

    #[test]
    fn the_direct_entry_encoding_reads_back_like_serde_and_says_the_same() {
        let typed = Payload::typed(UserMessageEvent::new("hi \"there\"\n"));
        let json = Payload::from_json(serde_json::json!({ "a": [1, 2], "b": null }));
        let entries = [
            JournalEntry {
                input: StoredInput::Append {
                    event: ev(1, typed.clone()),
                    by: Some(3),
                    budget: None,
                },
                preconditions: vec![true, false],
                at: Some(1_764_000_000_123_456_789),
                fork: None,
            },
            JournalEntry {
                input: StoredInput::Append {
                    event: ev(2, json.clone()),
                    by: None,
                    budget: Some(StoredGrant {
                        executions: Some(3),
                        wall_ns: Some(5_000),
                        tokens: Some(10_000),
                        cost_micros: None,
                        now_ns: 1_764_000_000_000_000_000,
                    }),
                },
                preconditions: vec![],
                at: None,
                fork: None,
            },
            JournalEntry {
                input: StoredInput::Budget(StoredGrant {
                    executions: None,
                    wall_ns: Some(60_000_000_000),
                    tokens: None,
                    cost_micros: Some(2_500_000),
                    now_ns: 1_764_000_003_000_000_000,
                }),
                preconditions: vec![],
                at: Some(1_764_000_003_000_000_001),
                fork: None,
            },
            JournalEntry {
                input: StoredInput::Budget(StoredGrant {
                    executions: Some(1),
                    wall_ns: None,
                    tokens: None,
                    cost_micros: None,
                    now_ns: 0,
                }),
                preconditions: vec![],
                at: None,
                fork: None,
            },
            JournalEntry {
                input: StoredInput::Complete {
                    execution: 4,
                    attempt: 2,
                    outputs: Some(vec![ev(5, typed.clone())]),
                    error: None,
                    timers: vec![StoredTimer {
                        event: ev(6, json.clone()),
                        due_ns: 1_764_000_001_000_000_000,
                    }],
                    children: vec![
                        StoredChild {
                            request: EventId::from_bytes([5; 12]),
                            detached: false,
                            deadline: Some(StoredTimer {
                                event: ev(9, json.clone()),
                                due_ns: 1_764_000_002_000_000_000,
                            }),
                        },
                        StoredChild {
                            request: EventId::from_bytes([8; 12]),
                            detached: true,
                            deadline: None,
                        },
                    ],
                    usage: Some(StoredUsage {
                        tokens: 1234,
                        cost_micros: 5,
                    }),
                    reused: Some(3),
                },
                preconditions: vec![false],
                at: None,
                fork: None,
            },
            JournalEntry {
                input: StoredInput::Clock {
                    now_ns: 1_764_000_001_000_000_007,
                },
                preconditions: vec![true],
                at: Some(1_764_000_001_000_000_009),
                fork: None,
            },
            JournalEntry {
                input: StoredInput::Complete {
                    execution: 7,
                    attempt: 1,
                    outputs: None,
                    error: Some("step `x` failed: \"quoted\"".into()),
                    timers: Vec::new(),
                    children: Vec::new(),
                    usage: None,
                    reused: None,
                },
                preconditions: vec![],
                at: None,
                fork: None,
            },
            JournalEntry {
                input: StoredInput::ChildEnded {
                    child: 1,
                    event: ev(10, json),
                },
                preconditions: vec![true],
                at: None,
                fork: None,
            },
            JournalEntry {
                input: StoredInput::Retry { execution: 9 },
                preconditions: vec![],
                at: None,
                fork: None,
            },
        ];
        for e in &entries {
            let mut out = Vec::new();
            encode_entry(&e.input, &e.preconditions, e.at, &mut out).unwrap();
            let back: JournalEntry = serde_json::from_slice(&out).unwrap();
            assert_eq!(&back, e);
            let ours: serde_json::Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(ours, serde_json::to_value(e).unwrap());
        }
    }
}
