//! # saap — the runtime
//!
//! Write an agent as typed async steps, run it on an engine (in memory, or embedded and
//! durable in one SQLite file), test it, and read why it behaved as it did. Every dispatch
//! decision is made by `saap-dispatch` (DESIGN §2); this crate moves events, runs step
//! bodies and keeps the journal.
//!
//! Layout:
//! - [`event`]: the [`Event`] trait, built-in protocol events, the payload adapter;
//! - [`params`]: parameter kinds ([`Required`], `Option`, `Vec`, [`FixedList`]) and results;
//! - [`workflow`]: [`Workflow`] and [`Step`] — the authoring API, which also emits the spec;
//! - [`context`]: [`StepCtx`] with RunContext, ThreadContext and the event displayer;
//! - [`effect`]: journaled effects — an outside call made once per execution
//!   ([`StepCtx::effect`]), its result returned again when the execution re-runs;
//! - `llm` (feature `llm`): model calls inside steps — `Llm`, a resource that streams the
//!   answer as ChunkEvents and records the call as LLMEvent / LLMCostEvent;
//! - [`semantic`]: the protocol's semantic events (`LLMEvent`, `ToolEvent`, …, `LLMCostEvent`)
//!   as events steps return or show;
//! - [`resource`]: long-lived values (a model client, a database handle) a workflow holds
//!   once and steps take by type ([`Res`]);
//! - [`engine`]: [`Engine`] — one core `Run` per run, durable before dispatch, recovery; a
//!   module tree with one concept per file (its doc lists them, `docs/architecture.md` draws
//!   the path of one event through them);
//! - [`backend`]: the [`Backend`](backend::Backend) trait, in-memory and SQLite stores;
//! - `nats` (feature `nats`, default): the distributed engine on NATS JetStream — the
//!   JetStream store and the worker process with per-run ownership;
//! - [`snapshot`]: run snapshots, timelines, "waiting for" explanations, Mermaid graphs;
//! - [`testing`]: the test runner;
//! - [`history`]: stored runs read back (no resume) and exported as History files;
//! - [`cli`]: the per-agent command line ([`main`]), one file per command: `spec`, `check`,
//!   `run`, `send`, `runs`, `show`.

/// Lets the derive macros name `::saap` inside this crate too.
extern crate self as saap;

pub mod backend;
pub mod cli;
pub mod config;
pub mod context;
pub mod delayed;
pub mod delegation;
pub mod effect;
pub mod engine;
pub mod event;
pub mod fork;
pub mod history;
#[cfg(feature = "llm")]
pub mod llm;
#[cfg(feature = "nats")]
pub mod nats;
pub mod params;
pub mod process;
pub mod replay;
/// OpenTelemetry export of runs (the `saap-otel` crate): configure an
/// [`Exporter`](otel::Exporter) and give it to [`EngineOptions::telemetry`].
#[cfg(feature = "otel")]
pub use saap_otel as otel;
pub mod resource;
pub mod semantic;
pub mod snapshot;
pub mod testing;
#[cfg(feature = "otel")]
pub mod trace;
pub mod union;
pub mod workflow;

/// The guide to durable runs (`docs/durable-runs.md`): deadlines, delegation, cancellation,
/// with examples that run as this crate's doc tests.
#[doc = include_str!("../../../docs/durable-runs.md")]
pub mod guide_durable_runs {}

pub use backend::EffectLimits;
pub use backend::memory::MemoryBackend;
pub use backend::sqlite::{SqliteBackend, SqliteOptions};
/// The per-agent command line: `fn main() -> ExitCode { saap::main(workflow()) }`.
pub use cli::{agent_main, main, main_with};
pub use config::{AgentConfig, Config, StepConfig};
pub use context::{ContextError, RunContext, StepCtx, ThreadContext};
pub use delayed::Delayed;
pub use delegation::{
    AgentInTheLoopExceptionEvent, AgentInTheLoopRequestEvent, AgentInTheLoopResponseEvent,
};
pub use effect::EffectError;
pub use engine::{
    ChildView, Engine, EngineError, EngineOptions, Raise, Recovery, Resumed, RunBudget,
};
pub use event::{
    ChunkEvent, CostEvent, Event, ExceptionEvent, HumanInTheLoopRequestEvent,
    HumanInTheLoopResponseEvent, Payload, RunCancelledEvent, StartEvent, StopEvent, ThoughtEvent,
    UserMessageEvent,
};
pub use params::{Either, FixedList, ParamEvent, Required};
pub use resource::{Res, ResourceError};
/// `#[derive(Event)]` with `#[event(name = "...", parent = X, parents = [X, Y])]`.
pub use saap_macros::Event;
/// `#[derive(EventUnion)]` on an enum of event types: a union parameter or result.
pub use saap_macros::EventUnion;
/// `#[agent]` on an `impl` block: its `#[step]` functions become the agent's workflow.
pub use saap_macros::agent;
/// `#[step(...)]` on an `async fn`: generates `fn <name>_step() -> Step<..>`.
pub use saap_macros::step;
pub use snapshot::{RunSnapshot, mermaid};
pub use workflow::{Agent, BuildError, Step, StepError, Workflow, WorkflowBuilder};
