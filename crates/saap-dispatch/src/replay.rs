//! Replay: rebuild a run from the inputs that drove it and check that it makes the same
//! decisions (TESTING.md §1). Preconditions are user code, so on replay their recorded
//! results are used instead of calling them again.
//!
//! A run is fully determined by its [`RunInput`] journal; engines persist that journal
//! (and the records) and call [`replay`] after a restart.

use crate::compiled::CompiledSpec;
use crate::ids::ExecutionId;
use crate::record::Record;
use crate::run::input::InputError;
pub use crate::run::input::RunInput;
use crate::run::timers::TimerRequest;
use crate::run::{AppendError, NewEvent, Outcome, PreconditionCall, PreconditionEvaluator, Run};
use std::collections::VecDeque;
use std::sync::Arc;

impl Run {
    /// Applies one journal input ([`Run::handle`]). Refusals that the journal itself
    /// recorded (an event before the run started, kept as evidence) are part of normal
    /// history and return `Ok`.
    pub fn apply(
        &mut self,
        input: RunInput,
        pre: &mut dyn PreconditionEvaluator,
    ) -> Result<(), InputError> {
        match self.handle(input, pre) {
            Ok(_) | Err(InputError::Append(AppendError::RunNotStarted { .. })) => Ok(()),
            Err(e) => Err(e),
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
    BadJournal { index: usize, error: InputError },
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
    // Records up to here equal the recorded ones: each input's are compared once (comparing
    // from the start after every input made a long run's rebuild quadratic).
    let mut checked = 0;
    for (index, input) in inputs.iter().enumerate() {
        run.apply(input.clone(), &mut pre)
            .map_err(|error| ReplayError::BadJournal { index, error })?;
        let now = run.records();
        let rest = recorded.get(checked..).unwrap_or_default();
        if let Some(at) = first_difference(now.slice(checked..), rest) {
            return Err(diverged(&run, recorded, checked + at));
        }
        checked = now.len();
    }
    if run.records().len() != recorded.len() || pre.exhausted {
        let index = run.records().len().min(recorded.len());
        return Err(diverged(&run, recorded, index));
    }
    run.take_started();
    Ok(run)
}

fn first_difference(now: crate::record::Records<'_>, recorded: &[Record]) -> Option<usize> {
    now.iter()
        .zip(recorded)
        .position(|(a, b)| a != *b)
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
        found: show(run.records().get(index).as_ref()),
    }
}

/// The current version of the [`History`] file format.
pub const HISTORY_FORMAT: u32 = 1;

/// An event in a history file: its id and its type by name.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HistoryEvent {
    pub event_id: crate::ids::EventId,
    #[serde(rename = "type")]
    pub event_type: String,
}

/// One journal input in a history file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "input")]
pub enum HistoryInput {
    Append {
        event: HistoryEvent,
    },
    Complete {
        execution: ExecutionId,
        attempt: u32,
        returned: Vec<HistoryEvent>,
    },
    Fail {
        execution: ExecutionId,
        attempt: u32,
        error: String,
    },
    Retry {
        execution: ExecutionId,
    },
    /// Events the execution returned for later delivery.
    Schedule {
        execution: ExecutionId,
        timers: Vec<HistoryTimer>,
    },
    /// The engine's clock reading (nanoseconds since the Unix epoch) that fired timers.
    Clock {
        now_ns: u64,
    },
    /// Requests among the execution's outputs that started child runs.
    Delegate {
        execution: ExecutionId,
        children: Vec<HistoryChild>,
    },
    /// A child run ended; `event` reports it.
    ChildEnded {
        child: u32,
        event: HistoryEvent,
    },
    /// A budget was granted: this many more executions, this much more wall time
    /// (nanoseconds), at the clock reading `now_ns`.
    Budget {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        executions: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wall_ns: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_micros: Option<u64>,
        now_ns: u64,
    },
    /// What an execution's model calls used (tokens, cost in millionths), before its
    /// completion.
    Usage {
        tokens: u64,
        cost_micros: u64,
    },
}

/// A child of a [`HistoryInput::Delegate`]: its request event's id and whether it runs
/// detached.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HistoryChild {
    pub request: crate::ids::EventId,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub detached: bool,
    /// The event delivered in the child's end's place if that has not come by its due
    /// time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<HistoryTimer>,
}

/// A timer of a [`HistoryInput::Schedule`]: the event and when it is due.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HistoryTimer {
    pub event: HistoryEvent,
    pub due_ns: u64,
}

/// A recorded run, self-contained and readable: the journal that drove it (event types by
/// name) and the decision records it produced. Fixtures in `tests/histories/` use it, and
/// `explain` reads it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct History {
    pub format: u32,
    pub workflow: String,
    /// [`CompiledSpec::fingerprint`] as 16 hex digits.
    pub fingerprint: String,
    pub run_key: u64,
    pub inputs: Vec<HistoryInput>,
    pub records: Vec<Record>,
}

/// Why a history file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HistoryError {
    #[error("history format {0} is not supported; this saap reads format {HISTORY_FORMAT}")]
    Format(u32),
    #[error("history input {index} names event type `{name}`, which the workflow does not declare")]
    UnknownType { index: usize, name: String },
    #[error("history fingerprint `{0}` is not 16 hex digits")]
    Fingerprint(String),
    #[error(transparent)]
    Replay(#[from] ReplayError),
}

impl History {
    /// Records a run and the journal that drove it.
    pub fn new(run: &Run, inputs: &[RunInput]) -> History {
        let name = |e: &crate::run::NewEvent| match &e.ty {
            crate::run::NewEventType::Known(t) => run.spec().type_info(*t).name.clone(),
            crate::run::NewEventType::Foreign { name, .. } => name.clone(),
        };
        let ev = |e: &crate::run::NewEvent| HistoryEvent {
            event_id: e.id,
            event_type: name(e),
        };
        History {
            format: HISTORY_FORMAT,
            workflow: run.spec().name.clone(),
            fingerprint: format!("{:016x}", run.spec().fingerprint()),
            run_key: run.run_key(),
            inputs: inputs
                .iter()
                .map(|i| match i {
                    RunInput::Append(e) => HistoryInput::Append { event: ev(e) },
                    RunInput::Complete {
                        execution,
                        attempt,
                        outcome: Outcome::Returned(out),
                    } => HistoryInput::Complete {
                        execution: *execution,
                        attempt: *attempt,
                        returned: out.iter().map(ev).collect(),
                    },
                    RunInput::Complete {
                        execution,
                        attempt,
                        outcome: Outcome::Failed(error),
                    } => HistoryInput::Fail {
                        execution: *execution,
                        attempt: *attempt,
                        error: error.clone(),
                    },
                    RunInput::Retry { execution } => HistoryInput::Retry {
                        execution: *execution,
                    },
                    RunInput::Schedule { execution, timers } => HistoryInput::Schedule {
                        execution: *execution,
                        timers: timers
                            .iter()
                            .map(|t| HistoryTimer {
                                event: ev(&t.event),
                                due_ns: t.due_ns,
                            })
                            .collect(),
                    },
                    RunInput::Clock { now_ns } => HistoryInput::Clock { now_ns: *now_ns },
                    RunInput::Delegate {
                        execution,
                        children,
                    } => HistoryInput::Delegate {
                        execution: *execution,
                        children: children
                            .iter()
                            .map(|c| HistoryChild {
                                request: c.request,
                                detached: c.detached,
                                deadline: c.deadline.as_ref().map(|t| HistoryTimer {
                                    event: ev(&t.event),
                                    due_ns: t.due_ns,
                                }),
                            })
                            .collect(),
                    },
                    RunInput::ChildEnded { child, event } => HistoryInput::ChildEnded {
                        child: *child,
                        event: ev(event),
                    },
                    RunInput::Budget(g) => HistoryInput::Budget {
                        executions: g.executions,
                        wall_ns: g.wall_ns,
                        tokens: g.tokens,
                        cost_micros: g.cost_micros,
                        now_ns: g.now_ns,
                    },
                    RunInput::Usage {
                        tokens,
                        cost_micros,
                    } => HistoryInput::Usage {
                        tokens: *tokens,
                        cost_micros: *cost_micros,
                    },
                })
                .collect(),
            records: run.records().to_vec(),
        }
    }

    /// The journal with type names resolved against `spec`.
    pub fn journal(&self, spec: &CompiledSpec) -> Result<Vec<RunInput>, HistoryError> {
        if self.format != HISTORY_FORMAT {
            return Err(HistoryError::Format(self.format));
        }
        let ev = |index: usize, e: &HistoryEvent| -> Result<NewEvent, HistoryError> {
            let t = spec
                .type_id(&e.event_type)
                .ok_or_else(|| HistoryError::UnknownType {
                    index,
                    name: e.event_type.clone(),
                })?;
            Ok(NewEvent::known(e.event_id, t))
        };
        self.inputs
            .iter()
            .enumerate()
            .map(|(index, i)| {
                Ok(match i {
                    HistoryInput::Append { event } => RunInput::Append(ev(index, event)?),
                    HistoryInput::Complete {
                        execution,
                        attempt,
                        returned,
                    } => RunInput::Complete {
                        execution: *execution,
                        attempt: *attempt,
                        outcome: Outcome::Returned(
                            returned
                                .iter()
                                .map(|e| ev(index, e))
                                .collect::<Result<_, _>>()?,
                        ),
                    },
                    HistoryInput::Fail {
                        execution,
                        attempt,
                        error,
                    } => RunInput::Complete {
                        execution: *execution,
                        attempt: *attempt,
                        outcome: Outcome::Failed(error.clone()),
                    },
                    HistoryInput::Retry { execution } => RunInput::Retry {
                        execution: *execution,
                    },
                    HistoryInput::Schedule { execution, timers } => RunInput::Schedule {
                        execution: *execution,
                        timers: timers
                            .iter()
                            .map(|t| {
                                Ok(TimerRequest {
                                    event: ev(index, &t.event)?,
                                    due_ns: t.due_ns,
                                })
                            })
                            .collect::<Result<_, HistoryError>>()?,
                    },
                    HistoryInput::Clock { now_ns } => RunInput::Clock { now_ns: *now_ns },
                    HistoryInput::Delegate {
                        execution,
                        children,
                    } => RunInput::Delegate {
                        execution: *execution,
                        children: children
                            .iter()
                            .map(|c| {
                                Ok(crate::run::ChildRequest {
                                    request: c.request,
                                    detached: c.detached,
                                    deadline: match &c.deadline {
                                        Some(t) => Some(TimerRequest {
                                            event: ev(index, &t.event)?,
                                            due_ns: t.due_ns,
                                        }),
                                        None => None,
                                    },
                                })
                            })
                            .collect::<Result<_, HistoryError>>()?,
                    },
                    HistoryInput::ChildEnded { child, event } => RunInput::ChildEnded {
                        child: *child,
                        event: ev(index, event)?,
                    },
                    HistoryInput::Budget {
                        executions,
                        wall_ns,
                        tokens,
                        cost_micros,
                        now_ns,
                    } => RunInput::Budget(crate::run::budget::BudgetGrant {
                        executions: *executions,
                        wall_ns: *wall_ns,
                        tokens: *tokens,
                        cost_micros: *cost_micros,
                        now_ns: *now_ns,
                    }),
                    HistoryInput::Usage {
                        tokens,
                        cost_micros,
                    } => RunInput::Usage {
                        tokens: *tokens,
                        cost_micros: *cost_micros,
                    },
                })
            })
            .collect()
    }

    /// Replays the history against `spec`, checking the fingerprint and every record.
    pub fn replay(&self, spec: Arc<CompiledSpec>) -> Result<Run, HistoryError> {
        let fp = u64::from_str_radix(&self.fingerprint, 16)
            .map_err(|_| HistoryError::Fingerprint(self.fingerprint.clone()))?;
        // The fingerprint first: a different workflow is named as such, not as a missing type.
        let current = spec.fingerprint();
        if fp != current {
            return Err(ReplayError::SpecChanged {
                recorded: fp,
                current,
            }
            .into());
        }
        let journal = self.journal(&spec)?;
        Ok(replay(
            spec,
            self.run_key,
            Some(fp),
            &journal,
            &self.records,
        )?)
    }
}
