//! # saap-dispatch — the dispatch core
//!
//! Every dispatch decision saap makes is made here, as a pure function of a run's log
//! (DESIGN §2). The engines (embedded, NATS), the simulator, the explorer and `explain` all
//! drive this one core; two engines that disagree is a bug in an engine.
//!
//! Layout:
//! - [`spec`]: the workflow spec file model (event types, steps, simulation section);
//! - [`load`]: parsing spec text (JSON/YAML) with located errors and size bounds;
//! - [`compiled`]: a spec with names resolved and the candidacy index built;
//! - [`run`]: the run state machine — `append`, `complete`, `retry` in; records and started
//!   executions out;
//! - [`record`]: the decision records (DESIGN §4.11);
//! - [`replay`]: rebuilding a run from its inputs and checking it reproduces its records;
//! - [`sim`]: driving a run from a spec's simulation section under a completion policy;
//! - [`explain`]: why a step fired, fired more than once, or never fired, from the records;
//! - [`render`]: records and executions as text and JSON, with names;
//! - [`ids`]: event ids, sequence numbers, execution ids, deterministic id derivation.
//!
//! Not here: clocks, randomness, threads, async, files, sockets. Time and ids are
//! arguments; user code (preconditions) is reached through a trait.

pub mod check;
pub mod compiled;
pub mod diff;
pub mod explain;
pub mod explore;
mod id_index;
pub mod ids;
pub mod json_eq;
pub mod lineage;
pub mod load;
pub mod record;
pub mod render;
pub mod replay;
pub mod run;
pub mod sim;
pub mod spec;

pub use compiled::{CompiledSpec, EventKind, TypeId};
pub use ids::{
    EventId, ExecutionId, OutputIds, ParamIdx, Seq, StepIdx, counter_event_id, derived_event_id,
    run_key,
};
pub use load::{SpecError, SpecSyntax, parse_spec};
pub use record::{BudgetLimit, Origin, Record, RecordIter, Records, SkipReason, Termination};
pub use run::{
    Appended, Bound, DeclaredConditions, NewEvent, NewEventType, Outcome, PreconditionCall,
    PreconditionEvaluator, Run, RunStatus, RunTables,
};
pub use spec::WorkflowSpec;

/// Parses and compiles spec text in one call.
pub fn compile_spec_text(text: &str, syntax: SpecSyntax) -> Result<CompiledSpec, SpecError> {
    CompiledSpec::compile(&parse_spec(text, syntax)?)
}
