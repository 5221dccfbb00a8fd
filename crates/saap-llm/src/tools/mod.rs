//! Tools for the model: typed Rust functions with generated JSON Schemas, a toolbox that
//! answers every call (well or with the contract), and a bounded tool loop.
//!
//! * [`tool`] — [`ToolSpec`] and [`typed_tool`]: a function becomes a tool.
//! * [`toolbox`] — [`Toolbox`]: the registered tools, one call run and answered.
//! * [`tool_loop`] — [`run_tool_loop`] and [`run_tool_loop_streamed`]: model → tools → model,
//!   at most N rounds.
//!
//! This module must not know about runs, steps, events or the journal.

pub mod tool;
pub mod tool_loop;
pub mod toolbox;

pub use tool::{CallResult, Tool, ToolSpec, schema_of, typed_tool};
pub use tool_loop::{DEFAULT_MAX_ROUNDS, ToolLoopOutcome, run_tool_loop, run_tool_loop_streamed};
pub use toolbox::{DEFAULT_MAX_RESULT_BYTES, ExecutionStatus, ToolExecution, Toolbox};
