//! What a user of the engine configures and gets back: [`EngineOptions`], the errors of
//! every engine call ([`EngineError`], each with a stable `SAAP-E…` code), and what opening
//! a store recovered ([`Recovery`]). Plain data: nothing here runs a run.

use crate::backend::StoreError;
use crate::event::PayloadError;
use saap_protocol::DecodeError;

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
