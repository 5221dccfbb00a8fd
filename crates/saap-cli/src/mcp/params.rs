//! The arguments of every tool, as Rust types: their JSON Schemas (what `tools/list` shows
//! the coding agent) are generated from these with `schemars`, and a call's arguments are
//! read into them with `serde` (unknown fields refused, so a misspelt argument is an error
//! that names the known ones, not silently ignored).
//!
//! Must not hold behaviour beyond reading and checking one argument at a time.

pub use crate::cmd::report::model::Symptom;
use schemars::JsonSchema;
use serde::Deserialize;

/// Where a spec comes from: a file under the server's root, or the text itself (every spec
/// tool's `path` and `spec` arguments).
#[derive(Debug, Default)]
pub struct SpecSource {
    /// A file relative to the server's root folder.
    pub path: Option<String>,
    /// The spec's text.
    pub spec: Option<String>,
}

/// `check`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckParams {
    /// A workflow spec (JSON/YAML) or Python agent source (`.py` file or package folder),
    /// relative to the server's root folder.
    #[serde(default)]
    pub path: Option<String>,
    /// A workflow spec's text (JSON or YAML), instead of `path`.
    #[serde(default)]
    pub spec: Option<String>,
}

/// A completion policy of a simulated run.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// After each arrival, complete running executions oldest first (default).
    Fifo,
    /// After each arrival, complete the newest running execution first.
    Lifo,
    /// Deliver every arrival, then complete oldest first.
    ArrivalsFirst,
}

impl Policy {
    /// The CLI's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Fifo => "fifo",
            Policy::Lifo => "lifo",
            Policy::ArrivalsFirst => "arrivals-first",
        }
    }
}

/// `simulate`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SimulateParams {
    /// A workflow spec file relative to the server's root folder.
    #[serde(default)]
    pub path: Option<String>,
    /// A workflow spec's text (JSON or YAML), instead of `path`.
    #[serde(default)]
    pub spec: Option<String>,
    /// Completion policy (default fifo).
    #[serde(default)]
    pub policy: Option<Policy>,
    /// Stop after this many completions (guards against loops; default 10,000, at most
    /// 1,000,000).
    #[serde(default)]
    pub max_completions: Option<u64>,
}

/// `explore`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExploreParams {
    /// A workflow spec file relative to the server's root folder.
    #[serde(default)]
    pub path: Option<String>,
    /// A workflow spec's text (JSON or YAML), instead of `path`.
    #[serde(default)]
    pub spec: Option<String>,
    /// Stop after this many distinct states (results are then partial; at most 5,000,000).
    #[serde(default)]
    pub max_states: Option<u64>,
    /// Do not follow a path longer than this many actions (at most 100,000).
    #[serde(default)]
    pub max_depth: Option<u64>,
    /// Let outside arrivals come in any order, not only the declared one.
    #[serde(default)]
    pub permute_arrivals: bool,
}

/// `explain`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExplainParams {
    /// A workflow spec file relative to the server's root folder.
    #[serde(default)]
    pub path: Option<String>,
    /// A workflow spec's text (JSON or YAML), instead of `path`.
    #[serde(default)]
    pub spec: Option<String>,
    /// Explain only these steps (default: every step).
    #[serde(default)]
    pub steps: Vec<String>,
    /// A recorded run (History JSON, from `saap simulate --history-out` or an agent's
    /// `show RUN --history-out`) relative to the root, explained instead of a simulation.
    #[serde(default)]
    pub history: Option<String>,
    /// Completion policy of the simulation (default fifo).
    #[serde(default)]
    pub policy: Option<Policy>,
    /// Stop the simulation after this many completions (default 10,000, at most 1,000,000).
    #[serde(default)]
    pub max_completions: Option<u64>,
    /// A run id: explain this stored or live run (read from the server's `--db` store or
    /// NATS server) instead of a simulation. On NATS the spec may be left out: a saap
    /// worker's class discovery answer gives it; a store needs `path` (a spec or the agent's
    /// Python source).
    #[serde(default)]
    pub run: Option<String>,
    /// With `run`: `nats` or `store` (only needed when both are configured; default nats).
    #[serde(default)]
    pub source: Option<SourceChoice>,
    /// With `run` and Python source holding several agents: the agent class.
    #[serde(default)]
    pub agent: Option<String>,
}

/// `report`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportParams {
    /// What the user sees.
    pub symptom: Symptom,
    /// The step the symptom is about (needed for runs-twice, never-runs, precondition).
    #[serde(default)]
    pub step: Option<String>,
    /// A workflow spec (JSON/YAML) or Python agent source (`.py` file or package folder),
    /// relative to the server's root folder.
    #[serde(default)]
    pub path: Option<String>,
    /// A workflow spec's text (JSON or YAML), instead of `path`.
    #[serde(default)]
    pub spec: Option<String>,
    /// Python source holding several agents: the agent class.
    #[serde(default)]
    pub agent: Option<String>,
    /// A run that shows the symptom, read from the server's store or NATS server as evidence.
    #[serde(default)]
    pub run: Option<String>,
    /// With `run`: `nats` or `store` (only needed when both are configured; default nats).
    #[serde(default)]
    pub source: Option<SourceChoice>,
}

/// Which live system an inspect tool reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SourceChoice {
    /// The NATS server given with `saap mcp --server`.
    Nats,
    /// The saap store given with `saap mcp --db`.
    Store,
}

/// Tools that take only a source.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceParams {
    /// `nats` or `store`; needed only when the server was started with both --server and
    /// --db (then the default is nats).
    #[serde(default)]
    pub source: Option<SourceChoice>,
}

/// `stream_list`, `stream_report`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StreamsParams {
    /// `nats` or `store` (only needed when both are configured; default nats).
    #[serde(default)]
    pub source: Option<SourceChoice>,
    /// List at most this many streams (default 1,000, at most 10,000).
    #[serde(default)]
    pub limit: Option<u64>,
}

/// `stream_info`, `stream_state`, `stream_subjects`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StreamParams {
    /// `nats` or `store` (only needed when both are configured; default nats).
    #[serde(default)]
    pub source: Option<SourceChoice>,
    /// The stream (agent_{Class}_stream for an agent class; a store: the workflow name).
    pub stream_name: String,
    /// Count at most this many distinct subjects (store: journal entries) for the
    /// messages per event type (default 100,000, at most 1,000,000).
    #[serde(default)]
    pub max_subjects: Option<u64>,
}

/// `stream_view`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ViewParams {
    /// `nats` or `store` (only needed when both are configured; default nats).
    #[serde(default)]
    pub source: Option<SourceChoice>,
    /// The stream (a store: the workflow name).
    pub stream_name: String,
    /// The last N messages of the stream (no filters, no `from`).
    #[serde(default)]
    pub count: Option<u64>,
    /// Start at this sequence: the `next_seq` of the previous page.
    #[serde(default)]
    pub from: Option<u64>,
    /// Messages per page (default 50, at most 10,000).
    #[serde(default)]
    pub limit: Option<u64>,
    /// Only this run id.
    #[serde(default)]
    pub run: Option<String>,
    /// Only this thread id.
    #[serde(default)]
    pub thread: Option<String>,
    /// Only events of this type (`_event_name`).
    #[serde(default)]
    pub event: Option<String>,
    /// Only `control` or `display` events.
    #[serde(default)]
    pub kind: Option<EventKind>,
    /// Only messages stored at or after this time (RFC 3339, or ns since the epoch).
    #[serde(default)]
    pub since: Option<String>,
    /// Only messages stored at or before this time.
    #[serde(default)]
    pub until: Option<String>,
    /// A raw NATS subject filter, instead of run/thread/event/kind.
    #[serde(default)]
    pub subject: Option<String>,
}

/// Control or display events.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// Events that drive steps.
    Control,
    /// Events shown to people.
    Display,
}

/// `stream_get`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetParams {
    /// `nats` or `store` (only needed when both are configured; default nats).
    #[serde(default)]
    pub source: Option<SourceChoice>,
    /// The stream (a store: the workflow name).
    pub stream_name: String,
    /// The message's stream sequence (a store: journal row), as `stream_view` shows it.
    pub sequence: u64,
}

/// `kv_ls`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KvLsParams {
    /// `nats` or `store` (only needed when both are configured; default nats).
    #[serde(default)]
    pub source: Option<SourceChoice>,
    /// A bucket: list its keys. Without it, list the buckets.
    #[serde(default)]
    pub bucket: Option<String>,
    /// List at most this many keys (default 1,000, at most 100,000).
    #[serde(default)]
    pub limit: Option<u64>,
}

/// `kv_get`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KvGetParams {
    /// `nats` or `store` (only needed when both are configured; default nats).
    #[serde(default)]
    pub source: Option<SourceChoice>,
    /// The bucket (a store: run_context or thread_context).
    pub bucket: String,
    /// The key (a store: RUN_OR_THREAD/KEY).
    pub key: String,
}

/// A run status.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Not ended yet (running or waiting).
    Live,
    /// Ended by a stop event.
    Stopped,
    /// Ended by an exception event.
    Failed,
}

/// `runs`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunsParams {
    /// `nats` or `store` (only needed when both are configured; default nats).
    #[serde(default)]
    pub source: Option<SourceChoice>,
    /// NATS: the agent class stream (required); a store: only this workflow.
    #[serde(default)]
    pub stream_name: Option<String>,
    /// List at most this many runs (default 20, at most 10,000).
    #[serde(default)]
    pub limit: Option<u64>,
    /// Only runs with this status.
    #[serde(default)]
    pub status: Option<Status>,
    /// NATS: look at the control events among the last N stored messages (default 10,000,
    /// at most 1,000,000).
    #[serde(default)]
    pub scan: Option<u64>,
    /// NATS: scan before this sequence (the `next` of the previous page).
    #[serde(default)]
    pub before: Option<u64>,
    /// A store: runs older than this run (the `next` of the previous page).
    #[serde(default)]
    pub after: Option<String>,
}

/// `run_timeline`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunParams {
    /// `nats` or `store` (only needed when both are configured; default nats).
    #[serde(default)]
    pub source: Option<SourceChoice>,
    /// The run id.
    pub run: String,
    /// NATS: the stream to read (found from the run's subjects when not given).
    #[serde(default)]
    pub stream_name: Option<String>,
    /// Start at this sequence: the `next_seq` of the previous page.
    #[serde(default)]
    pub from: Option<u64>,
    /// Messages per page (default 50, at most 10,000).
    #[serde(default)]
    pub limit: Option<u64>,
}

impl SpecSource {
    /// From a tool's `path`/`spec` pair.
    pub fn of(path: &Option<String>, spec: &Option<String>) -> SpecSource {
        SpecSource {
            path: path.clone(),
            spec: spec.clone(),
        }
    }
}
