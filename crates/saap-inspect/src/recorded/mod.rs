//! A recorded run read back for the dispatch core: what `saap explain --run` (and later
//! `saap report` and `saap mcp`) explain.
//!
//! Two kinds of record, found by [`read`] in a store or on a NATS server:
//!
//! - a saap **journal** ([`JournalRun`]: a store's `journal` rows, or the messages of a
//!   `saap_journal_{Class}` stream): every input of the run with the decision records it
//!   produced. [`journal::history`] turns it into the core's
//!   [`History`](saap_dispatch::replay::History) — the very file `<agent> show RUN
//!   --history-out` writes — which the core replays and checks record by record;
//! - the **events** of an agent class stream ([`EventRun`]), as the Python platform (or any
//!   publisher of the protocol) leaves them: no records, no word on which step published what.
//!   [`python::rebuild`] drives the core over them under saap's semantics, attributing
//!   outputs to the executions that declare them, and lists where the Python dispatcher
//!   would have decided otherwise ([`python::Difference`]).
//!
//! Bounded: a run with more than [`MAX_RUN_ENTRIES`] journal entries or events is refused
//! (`SAAP-I014`), and it is read a page at a time, only the run's own rows or subjects.
//! Must not write, run user code (precondition results come from the record, or are
//! inferred and said so), or depend on the runtime crate.

pub mod journal;
pub mod lineage;
pub mod python;
pub mod read;

use crate::model::Flags;
use serde_json::Value;

/// The most journal entries (saap) or events (an agent class stream) of one run that are
/// read to explain it.
pub const MAX_RUN_ENTRIES: usize = 100_000;

/// A run as recorded, with where it was found.
#[derive(Clone, Debug)]
pub struct RecordedRun {
    /// The run id.
    pub run_id: String,
    /// Where the record was read, for people (`the store agents.db`, `stream …`).
    pub place: String,
    /// What was recorded.
    pub body: Recorded,
}

/// The two kinds of record.
#[derive(Clone, Debug)]
pub enum Recorded {
    /// saap's journal with its decision records.
    Journal(JournalRun),
    /// The events of an agent class stream, without records.
    Events(EventRun),
}

impl RecordedRun {
    /// The agent class (workflow name) that recorded the run.
    pub fn agent_class(&self) -> &str {
        match &self.body {
            Recorded::Journal(j) => &j.workflow,
            Recorded::Events(e) => &e.agent_class,
        }
    }

    /// `saap` for a journal, `python` for events only (the Python platform's record).
    pub fn recorded_by(&self) -> &'static str {
        match &self.body {
            Recorded::Journal(_) => "saap",
            Recorded::Events(_) => "python",
        }
    }
}

/// A saap journal: the run's metadata and its entries in order.
#[derive(Clone, Debug, PartialEq)]
pub struct JournalRun {
    /// The workflow (agent class) that wrote it.
    pub workflow: String,
    /// The run's thread.
    pub thread_id: String,
    /// The fingerprint of the workflow that wrote it (`CompiledSpec::fingerprint`).
    pub fingerprint: u64,
    /// Entries in journal order.
    pub entries: Vec<JournalRow>,
}

/// One journal entry as stored: `{"i": {"in": …}, "pre": [...]}` and its records.
#[derive(Clone, Debug, PartialEq)]
pub struct JournalRow {
    /// The entry's index in the run's journal.
    pub index: u64,
    /// The entry.
    pub entry: Value,
    /// The decision records it produced.
    pub records: Vec<Value>,
}

/// The events of one run in an agent class stream, in stream order.
#[derive(Clone, Debug, PartialEq)]
pub struct EventRun {
    /// The agent class of the stream.
    pub agent_class: String,
    /// The stream.
    pub stream: String,
    /// The events (control copies; display-only events once).
    pub events: Vec<WireEvent>,
}

/// One event of an agent class stream.
#[derive(Clone, Debug, PartialEq)]
pub struct WireEvent {
    /// Stream sequence.
    pub seq: u64,
    /// `event_id` of the payload.
    pub event_id: String,
    /// `_event_name`.
    pub name: String,
    /// Its classification.
    pub flags: Flags,
    /// `created_at` (ns; the producer's clock, which the Python dispatcher's "latest" uses).
    pub created_at: i64,
    /// The payload.
    pub json: Value,
}

impl WireEvent {
    /// `Name (stream seq N)`.
    pub fn label(&self) -> String {
        format!("{} (stream seq {})", self.name, self.seq)
    }
}
