//! What an inspection returns: plain, serializable data, the same for a NATS server and a
//! saap store. The `--json` output of `saap inspect` and the results of the MCP tools are these
//! types serialized as they are; the human tables are drawn from them by the CLI.
//!
//! Must not hold connections, formatting for terminals, or anything unbounded: every list here
//! was cut at a limit the caller chose, and says so (`truncated`, `more`, `next_*`).

use serde::Serialize;
use serde_json::Value;

/// Which kind of source answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// A live NATS server with JetStream.
    Nats,
    /// A saap SQLite store, opened read-only.
    Store,
}

/// `server`: what the server (or store file) is.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerReport {
    /// Which source.
    pub source: SourceKind,
    /// NATS: the server name; store: the file path.
    pub name: String,
    /// NATS: the server id; store: `schema <version>`.
    pub id: String,
    /// NATS: the server version; store: the SQLite library version.
    pub version: String,
    /// Further facts as `(name, value)` rows, in a stable order (account limits and usage,
    /// file size, run counts…).
    pub facts: Vec<(String, Value)>,
}

/// One stream in `streams` (for a store: one workflow's journal).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StreamSummary {
    /// Stream name (store: the workflow name).
    pub name: String,
    /// What saap knows the stream as: `agent_class` (agent_{Class}_stream), `journal`
    /// (saap_journal_{Class}), `work_queue` (saap_work_{Class}), `kv` (KV_…), `store_journal`
    /// (a workflow in a SQLite store) or `other`.
    pub role: String,
    /// The agent class or workflow, when the name says it.
    pub agent_class: Option<String>,
    /// Subjects the stream stores (empty for a store).
    pub subjects: Vec<String>,
    /// Stored messages (store: journal entries).
    pub messages: u64,
    /// Stored bytes (0 when unknown).
    pub bytes: u64,
    /// First stored sequence (0 when empty).
    pub first_seq: u64,
    /// Last stored sequence (0 when empty).
    pub last_seq: u64,
    /// Time of the first stored message (RFC 3339), when known.
    pub first_time: Option<String>,
    /// Time of the last stored message (RFC 3339), when known.
    pub last_time: Option<String>,
    /// Consumers on the stream (store: runs of the workflow).
    pub consumers: u64,
}

/// The number of stored messages of one event type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EventCount {
    /// `control_event`, `display_event`, or for a store the journal input kind.
    pub kind: String,
    /// The event name (`_event_name`), or the subject when it is not an agent subject.
    pub event_name: String,
    /// Messages.
    pub count: u64,
}

/// `stream NAME`: configuration, state and what was published.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StreamReport {
    /// The summary (state).
    pub summary: StreamSummary,
    /// The configuration as the server reports it (store: the schema facts).
    pub config: Value,
    /// Deleted messages inside the range (gaps).
    pub deleted: u64,
    /// Distinct subjects stored (as the server counts them; 0 when unknown).
    pub subjects_total: u64,
    /// Messages per event type, most frequent first.
    pub events: Vec<EventCount>,
    /// Subjects (store: journal entries) looked at to count `events`.
    pub subjects_scanned: u64,
    /// True when `events` covers only part of the stream (the scan bound was reached).
    pub truncated: bool,
    /// Consumers by name, with what each still has pending (NATS only, at most 100).
    pub consumer_list: Vec<ConsumerSummary>,
}

/// One consumer of a stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConsumerSummary {
    /// Name.
    pub name: String,
    /// Filter subject(s), comma-separated.
    pub filter: String,
    /// Messages not yet delivered.
    pub pending: u64,
    /// Delivered, not acknowledged.
    pub ack_pending: u64,
    /// Redelivered.
    pub redelivered: u64,
}

/// The parts of an agent event subject, or what a store knows of an entry's run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Default)]
pub struct Address {
    /// Agent class (store: workflow).
    pub agent_class: Option<String>,
    /// Agent id.
    pub agent_id: Option<String>,
    /// Thread id.
    pub thread_id: Option<String>,
    /// Display id.
    pub display_id: Option<String>,
    /// Run id.
    pub run_id: Option<String>,
    /// `control_event` or `display_event`.
    pub kind: Option<String>,
    /// Event name from the subject.
    pub event_name: Option<String>,
}

/// Control / display / start / stop / exception flags of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Default)]
pub struct Flags {
    /// Drives steps.
    pub control: bool,
    /// Shown to people.
    pub display: bool,
    /// Begins a run.
    pub start: bool,
    /// Ends a run.
    pub stop: bool,
    /// Ends a run with an error.
    pub exception: bool,
}

impl Flags {
    /// Stop or exception.
    pub fn is_terminal(&self) -> bool {
        self.stop || self.exception
    }
}

/// A decoded SAAP event.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EventView {
    /// `event_id`.
    pub event_id: String,
    /// `_event_name`.
    pub event_name: String,
    /// The known type it was resolved to, when `_event_name` is not registered here.
    pub known_type: Option<String>,
    /// `created_at`, nanoseconds since the epoch.
    pub created_at: i64,
    /// `created_at` as RFC 3339 (`None` when the event carries none: a saap store keeps
    /// payloads without it).
    pub created: Option<String>,
    /// Classification.
    pub flags: Flags,
    /// The event as JSON on the wire (envelope keys and fields).
    pub json: Value,
}

/// A message that is not a SAAP event (or not a valid one), shown raw.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Undecodable {
    /// Stable reason kind (`not_json`, `missing_field`, `too_large`, …).
    pub kind: String,
    /// Why it does not decode.
    pub reason: String,
    /// The payload as text (lossy UTF-8), cut to 2,048 bytes.
    pub raw: String,
    /// The payload's full size.
    pub raw_bytes: usize,
}

/// One journal entry of a saap run (from a store, or from a `saap_journal_*` stream).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JournalView {
    /// Index in the run's journal.
    pub index: u64,
    /// `append`, `complete` or `retry`.
    pub input: String,
    /// `complete`/`retry`: the execution.
    pub execution: Option<u64>,
    /// `complete`: the events the execution returned, appended in this order.
    pub outputs: Vec<EventView>,
    /// `complete`: the step's error.
    pub error: Option<String>,
    /// Recorded precondition results.
    pub preconditions: Vec<bool>,
    /// The dispatcher's decision records of this entry, as stored.
    pub records: Vec<Value>,
}

/// One stored message, decoded.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Message {
    /// Stream sequence (store: the journal row id, in arrival order).
    pub seq: u64,
    /// Stored time (RFC 3339): NATS: when the server stored it; store: the event's
    /// `created_at`.
    pub time: Option<String>,
    /// The subject (NATS only).
    pub subject: Option<String>,
    /// Subject parts or the store's run.
    pub address: Address,
    /// Headers (NATS only; at most 32, values cut to 256 bytes).
    pub headers: Vec<(String, String)>,
    /// The event, when the message is one.
    pub event: Option<EventView>,
    /// Journal entries the message carries (saap journals).
    pub journal: Vec<JournalView>,
    /// Set when the message does not decode.
    pub undecodable: Option<Undecodable>,
    /// In a run's timeline: a control event stored after the run's stop or exception event.
    pub after_stop: bool,
}

/// A page of messages in stream order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Page {
    /// Stream (store: workflow).
    pub stream: String,
    /// The filter subject the page was read with, if any.
    pub filter: Option<String>,
    /// The messages.
    pub messages: Vec<Message>,
    /// Messages in the page that did not decode.
    pub undecodable: u64,
    /// True when more messages match after this page.
    pub more: bool,
    /// Give this as `--from` to read the next page.
    pub next_seq: Option<u64>,
    /// The stream's last sequence when the page was read.
    pub last_seq: u64,
}

/// One KV bucket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BucketSummary {
    /// Bucket name.
    pub bucket: String,
    /// Values stored (with history).
    pub values: u64,
    /// Bytes stored.
    pub bytes: u64,
    /// History kept per key.
    pub history: i64,
    /// Time to live of values, seconds (0: none).
    pub ttl_seconds: u64,
}

/// The keys of one bucket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KeyList {
    /// Bucket.
    pub bucket: String,
    /// Keys, sorted.
    pub keys: Vec<String>,
    /// True when the key limit was reached.
    pub truncated: bool,
}

/// One KV value.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KvValue {
    /// Bucket.
    pub bucket: String,
    /// Key.
    pub key: String,
    /// Revision (store: 0).
    pub revision: u64,
    /// When it was written (RFC 3339), when known.
    pub created: Option<String>,
    /// The value as JSON when it is JSON, else as a string (lossy UTF-8, cut to 64 KiB).
    pub value: Value,
    /// The value's size.
    pub bytes: usize,
}

/// How a run stands, as far as the inspected messages tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// No stop or exception event yet (running or waiting).
    Live,
    /// Ended by a stop event.
    Stopped,
    /// Ended by an exception event.
    Failed,
}

impl RunStatus {
    /// `live`, `stopped`, `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Live => "live",
            RunStatus::Stopped => "stopped",
            RunStatus::Failed => "failed",
        }
    }
}

/// One run in `runs`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunSummary {
    /// Run id.
    pub run_id: String,
    /// Thread id.
    pub thread_id: Option<String>,
    /// Agent class (store: workflow).
    pub agent_class: Option<String>,
    /// Status.
    pub status: RunStatus,
    /// The terminal event's name, if the run ended.
    pub ended_by: Option<String>,
    /// First event seen (RFC 3339).
    pub started: Option<String>,
    /// Last event seen (RFC 3339).
    pub last: Option<String>,
    /// Events seen (NATS: control events in the scanned window; store: the run's log length).
    pub events: u64,
    /// Control events stored after the run ended (NATS only).
    pub after_stop: u64,
    /// The last event's name.
    pub last_event: Option<String>,
    /// True when the scanned window did not reach the run's first event (NATS only).
    pub partial: bool,
}

/// `runs`: a page of runs, most recent first.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunList {
    /// Stream (store: workflow, or `*` for all).
    pub stream: String,
    /// The runs.
    pub runs: Vec<RunSummary>,
    /// NATS: the stream sequences scanned, inclusive (`[from, to]`).
    pub scanned: Option<(u64, u64)>,
    /// True when there are older runs.
    pub more: bool,
    /// NATS: give this as `--before` for older runs; store: as `--after`.
    pub next: Option<String>,
}

/// `run RUN`: one run's events (and, from a store, journal entries) in order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunTimeline {
    /// The run as `runs` lists it.
    pub run: RunSummary,
    /// Where it was read: the stream, or the store's workflow.
    pub stream: String,
    /// Its messages in order, paged.
    pub messages: Vec<Message>,
    /// True when more follow.
    pub more: bool,
    /// Give this as `--from` for the next page.
    pub next_seq: Option<u64>,
}
