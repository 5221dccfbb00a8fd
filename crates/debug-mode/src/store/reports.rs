//! What the store reports and is asked: stored events, diagnostics, ingest outcomes, session
//! summaries, log pages and their queries, status and snapshots. Plain data: must not read
//! or write files.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// At most this many malformed-record diagnostics are stored per reset cycle; the rest are
/// counted.
pub const MAX_STORED_DIAGNOSTICS: u64 = 1000;

/// Largest page of `logs`.
pub const MAX_LOGS_LIMIT: usize = 1000;

/// Where a record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Http,
    File,
}

/// A stored event as written to `events.ndjson` (field order is the storage order).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StoredEvent {
    pub id: String,
    pub sequence: u64,
    pub received_at: u64,
    pub hypothesis_id: String,
    pub location: String,
    pub message: String,
    pub data: Value,
    pub timestamp: u64,
}

/// A stored malformed-record diagnostic.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Diagnostic {
    pub id: String,
    pub source: Source,
    pub received_at: u64,
    pub reason: String,
    pub message: String,
    pub recoverable_fields: Map<String, Value>,
    pub preview: String,
    pub suggested_fix: String,
}

/// Result of ingesting one body or one drain step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IngestOutcome {
    pub accepted: u64,
    pub rejected: u64,
    pub redacted: u64,
}

/// Public description of a session.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub session_id: String,
    pub created_at: u64,
    pub append_path: PathBuf,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    pub session_id: String,
    pub created_at: u64,
    pub event_count: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HypothesisCount {
    pub hypothesis_id: String,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LogsPage {
    pub events: Vec<StoredEvent>,
    /// Events matching the hypothesis filter (within the snapshot).
    pub matched: u64,
    /// Events of the session (within the snapshot).
    pub event_count: u64,
    pub malformed_count: u64,
    #[serde(default)]
    pub redacted_count: u64,
    pub hypotheses: Vec<HypothesisCount>,
    pub epoch: u64,
    /// The snapshot watermark: events up to this sequence are part of the page's view.
    #[serde(default)]
    pub last_sequence: u64,
    /// Set by the service: where probes must send (for the empty-session hint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingest_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append_path: Option<PathBuf>,
}

/// Order of a `logs` page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogsOrder {
    /// By `timestamp`, then `sequence` (the default, as the original implementation).
    #[default]
    Timestamp,
    /// By `sequence` (accepted order).
    Sequence,
}

/// What a `logs` page covers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogsQuery {
    #[serde(default)]
    pub offset: usize,
    #[serde(default)]
    pub limit: usize,
    #[serde(default)]
    pub hypotheses: Vec<String>,
    #[serde(default)]
    pub order: LogsOrder,
    /// Continue a paginated view: only events up to this sequence, and only if the session
    /// was not reset since (`epoch`).
    #[serde(default)]
    pub snapshot: Option<SnapshotRef>,
}

/// The part of a `logs` snapshot the service checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRef {
    pub epoch: u64,
    pub last_sequence: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StatusReport {
    pub event_count: u64,
    pub malformed_count: u64,
    #[serde(default)]
    pub redacted_count: u64,
    pub stored_diagnostics: u64,
    pub hypotheses: Vec<HypothesisCount>,
    pub first_received_at: Option<u64>,
    pub last_received_at: Option<u64>,
    pub diagnostics: Vec<Diagnostic>,
}

/// What the query worker needs: a consistent prefix of the canonical file.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub epoch: u64,
    #[serde(default)]
    pub malformed_count: u64,
    #[serde(default)]
    pub redacted_count: u64,
    pub last_sequence: u64,
    pub events_bytes: u64,
    pub event_count: u64,
}
