//! Replay: rebuild a run from the inputs that drove it and check that it makes the same
//! decisions (TESTING.md §1). Preconditions are user code, so on replay their recorded
//! results are used instead of calling them again.
//!
//! A run is fully determined by its [`RunInput`] journal; engines persist that journal
//! (and the records) and call [`replay`] after a restart.

use crate::compiled::CompiledSpec;
use crate::ids::ExecutionId;
use crate::record::Record;
use crate::run::{
    AppendError, CompleteError, NewEvent, Outcome, PreconditionCall, PreconditionEvaluator, Run,
};
use std::collections::VecDeque;
use std::sync::Arc;

/// One input that drove a run.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RunInput {
    /// An event arrived from outside.
    Append(NewEvent),
    /// An execution finished.
    Complete {
        execution: ExecutionId,
        attempt: u32,
        outcome: Outcome,
    },
    /// An unfinished execution was run again.
    Retry { execution: ExecutionId },
}

impl Run {
    /// Applies one journal input. Refusals that the journal itself recorded (an orphan event,
    /// a duplicate completion) are part of normal history and return `Ok`.
    pub fn apply(
        &mut self,
        input: RunInput,
        pre: &mut dyn PreconditionEvaluator,
    ) -> Result<(), CompleteError> {
        match input {
            RunInput::Append(ev) => match self.append(ev, pre) {
                Ok(_) | Err(AppendError::RunNotStarted { .. }) => Ok(()),
                Err(e) => Err(e.into()),
            },
            RunInput::Complete {
                execution,
                attempt,
                outcome,
            } => self.complete(execution, attempt, outcome, pre),
            RunInput::Retry { execution } => self.retry(execution).map(|_| ()),
        }
    }
}

/// Why a replay did not reproduce the recorded run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    #[error(
        "SAAP-R001: the workflow changed since this run was recorded (fingerprint {recorded:016x}, now {current:016x}); replay it with the workflow version that produced it"
    )]
    SpecChanged { recorded: u64, current: u64 },
    #[error(
        "SAAP-R002: replay diverged at record {index}: the log says {expected}, the workflow now decides {found}; the workflow definition or a precondition changed"
    )]
    Diverged {
        index: usize,
        expected: String,
        found: String,
    },
    #[error("SAAP-R003: the journal cannot be applied at input {index}: {error}")]
    BadJournal { index: usize, error: CompleteError },
}

impl ReplayError {
    pub fn code(&self) -> &'static str {
        match self {
            ReplayError::SpecChanged { .. } => "SAAP-R001",
            ReplayError::Diverged { .. } => "SAAP-R002",
            ReplayError::BadJournal { .. } => "SAAP-R003",
        }
    }
}

/// Answers preconditions from recorded results, in order.
#[derive(Debug, Default)]
pub struct RecordedPreconditions {
    results: VecDeque<bool>,
    /// Set when the replay asked for more results than were recorded.
    pub exhausted: bool,
}

impl RecordedPreconditions {
    pub fn from_records(records: &[Record]) -> RecordedPreconditions {
        RecordedPreconditions {
            results: records
                .iter()
                .filter_map(|r| match r {
                    Record::PreconditionEvaluated { result, .. } => Some(*result),
                    _ => None,
                })
                .collect(),
            exhausted: false,
        }
    }
}

impl PreconditionEvaluator for RecordedPreconditions {
    fn evaluate(&mut self, _call: &PreconditionCall<'_>) -> bool {
        match self.results.pop_front() {
            Some(r) => r,
            None => {
                self.exhausted = true;
                false
            }
        }
    }
}

/// Rebuilds a run from its journal, using recorded precondition results, and checks that
/// the rebuilt records equal the recorded ones. `recorded_fingerprint` is the
/// [`CompiledSpec::fingerprint`] stored with the run, if any.
pub fn replay(
    spec: Arc<CompiledSpec>,
    run_key: u64,
    recorded_fingerprint: Option<u64>,
    inputs: &[RunInput],
    recorded: &[Record],
) -> Result<Run, ReplayError> {
    if let Some(fp) = recorded_fingerprint {
        let current = spec.fingerprint();
        if fp != current {
            return Err(ReplayError::SpecChanged {
                recorded: fp,
                current,
            });
        }
    }
    let mut pre = RecordedPreconditions::from_records(recorded);
    let mut run = Run::new(spec, run_key);
    for (index, input) in inputs.iter().enumerate() {
        run.apply(input.clone(), &mut pre)
            .map_err(|error| ReplayError::BadJournal { index, error })?;
        if let Some(index) = first_difference(run.records(), recorded) {
            return Err(diverged(&run, recorded, index));
        }
    }
    if run.records().len() != recorded.len() || pre.exhausted {
        let index = run.records().len().min(recorded.len());
        return Err(diverged(&run, recorded, index));
    }
    run.take_started();
    Ok(run)
}

fn first_difference(now: &[Record], recorded: &[Record]) -> Option<usize> {
    now.iter()
        .zip(recorded)
        .position(|(a, b)| a != b)
        .or_else(|| (now.len() > recorded.len()).then_some(recorded.len()))
}

fn diverged(run: &Run, recorded: &[Record], index: usize) -> ReplayError {
    let show = |r: Option<&Record>| match r {
        Some(r) => format!("{r:?}"),
        None => "nothing more".to_string(),
    };
    ReplayError::Diverged {
        index,
        expected: show(recorded.get(index)),
        found: show(run.records().get(index)),
    }
}
