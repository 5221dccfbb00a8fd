//! The errors of every engine call ([`EngineError`]), each with a stable `SAAP-E…` code and
//! a message that says what was wrong and what to do. Plain data: below the authoring API
//! (a step's context reports them), so it must not name any other engine type.

use crate::backend::StoreError;
use crate::event::PayloadError;
use saap_dispatch::run::budget::{BudgetPart, ResumeRefused};
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
    #[error("{0}")]
    Resource(#[from] crate::resource::ResourceError),
    #[error(
        "SAAP-E008: the dispatch core refused an input for run `{run_id}`: {detail}; this is an engine bug, please report it with the run's timeline"
    )]
    Core { run_id: String, detail: String },
    #[error(
        "SAAP-E012: run `{run_id}` has already ended ({outcome}); there is nothing to cancel (an event sent to it now is only kept as evidence)"
    )]
    RunEnded { run_id: String, outcome: String },
    #[error("SAAP-E020: run `{run_id}` is not paused on its budget ({state}); {hint}")]
    NotPaused {
        run_id: String,
        state: String,
        hint: String,
    },
    #[error("SAAP-E021: {0}")]
    BadRaise(String),
    /// An answer to a process's work request (`HumanWorkEvent`, `ProgramWorkEvent`) that
    /// names no open request of its run.
    #[error("SAAP-E022: run {run_id}: {detail}")]
    BadAnswer { run_id: String, detail: String },
    /// A delegation request or a child's report, as it came from another process, that
    /// cannot be read.
    #[error("SAAP-E015: {0}")]
    BadDelegation(String),
    /// A fork point a run cannot be forked at (`Engine::fork`): past its log, not an
    /// event from outside, after the run ended, while it waits for a child run.
    #[error("SAAP-E024: run `{run_id}` cannot be forked there: {detail}")]
    BadForkPoint { run_id: String, detail: String },
}

/// At most the first 128 characters of `text` (an id or a name a user gave, in an error).
pub(crate) fn shown(text: &str) -> String {
    match text.char_indices().nth(128) {
        Some((end, _)) => text[..end].to_string(),
        None => text.to_string(),
    }
}

impl EngineError {
    /// [`EngineError::UnknownRun`] of `run_id` (shortened).
    pub(crate) fn unknown_run(run_id: &str) -> EngineError {
        EngineError::UnknownRun {
            run_id: shown(run_id),
        }
    }

    /// Why run `run_id` (whose status is `state`) cannot be resumed, said for a person.
    pub(crate) fn resume_refused(run_id: &str, state: &str, refused: ResumeRefused) -> EngineError {
        let not_paused = |hint: String| EngineError::NotPaused {
            run_id: run_id.to_string(),
            state: state.to_string(),
            hint,
        };
        match refused {
            ResumeRefused::Ended => not_paused(
                "it has ended, so nothing of it can run again: start a new run".into(),
            ),
            ResumeRefused::NotSpent => not_paused(
                "nothing is held for its budget, so there is nothing to resume (a run that waits for an event goes on when it gets one: `send`)".into(),
            ),
            ResumeRefused::Superseded { seen, grants } => not_paused(format!(
                "it was resumed since this resume looked at it (grant {grants}, it saw {seen}), so this one grants nothing; read the run again (`show`) and resume it if it is paused again"
            )),
            ResumeRefused::NoAmount(part) => {
                let (name, flag) = match part {
                    BudgetPart::Executions => ("executions", "executions=N"),
                    BudgetPart::WallTime => ("wall time", "time=30m"),
                    BudgetPart::Tokens => ("tokens", "tokens=N"),
                    BudgetPart::Cost => ("cost", "cost=2.50"),
                };
                EngineError::BadRaise(format!(
                    "the run used up its {name} and started with no such budget to grant again: say how much more (`--raise {flag}`)"
                ))
            }
        }
    }

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
            EngineError::RunEnded { .. } => "SAAP-E012",
            EngineError::NotPaused { .. } => "SAAP-E020",
            EngineError::BadRaise(_) => "SAAP-E021",
            EngineError::BadDelegation(_) => "SAAP-E015",
            EngineError::BadAnswer { .. } => "SAAP-E022",
            EngineError::BadForkPoint { .. } => "SAAP-E024",
            EngineError::Config(e) => e.code(),
            EngineError::Resource(e) => e.code(),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_shown_text_is_cut_at_128_characters_on_a_character_boundary() {
        assert_eq!(super::shown("abc"), "abc");
        let long = "é".repeat(200);
        assert_eq!(super::shown(&long).chars().count(), 128);
        assert_eq!(super::shown(&"x".repeat(128)).len(), 128);
    }
}
