//! Example agents for saap, written with the builder API and with `#[agent]`.
//!
//! - [`rag`]: a retrieval agent — plan (fan-out into three searches), search (runs three
//!   times in parallel), rank (fan-in with a fixed list of 3), answer with a scripted model
//!   that streams chunks as display events. No network.
//! - [`rag_model`]: the same retrieval, answered by a language model through `saap::llm::Llm`
//!   (`OPENAI_BASE_URL`, else a scripted model behind a real endpoint on loopback): streamed
//!   chunks, the call's `LLMEvent` and its `LLMCostEvent`.
//! - [`weather`]: a tool-using agent (`#[agent]`): the model calls a typed `weather` tool
//!   inside one step (`Llm::chat_with_tools`); every model and tool call is returned as an
//!   `LLMEvent` / `ToolEvent`.
//! - [`approval`]: a human-approval agent — it proposes an action, the run waits for a
//!   human's response event, then executes or declines.
//! - [`research`]: two agents, one delegating to the other — an editor asks a researcher
//!   about two topics (two child runs, awaited together) and writes a brief; a topic the
//!   researcher does not know waits for a human's source, so the editor waits too.
//! - [`onboarding`]: a process (seed 002's process steps) — onboarding a new hire asks HR
//!   (a person, with a deadline), the accounts program and a welcome-writer agent (a child
//!   run) in turn; the person and the program answer by sending work events to the run.
//! - [`broken`]: agents with a known failure pattern (DESIGN §5) and their fixed twins.
//! - [`support`]: written with `#[agent]`: typed agent and step configs, preconditions.
//!
//! Binaries (each gets `spec`, `check`, `run`, `runs`, `show` from `saap::main`):
//! `rag-agent`, `rag-model-agent`, `weather-agent`, `support-agent`, `approval-agent`, `optional-trap-agent`,
//! `short-panel-agent`, `research-agent`, `onboarding-process`.

pub mod approval;
pub mod broken;
pub mod onboarding;
pub mod rag;
pub mod rag_model;
pub mod research;
pub mod support;
pub mod weather;

/// Declares an event type: `event!(Name, "Parent", { field: Type, ... })`.
#[macro_export]
macro_rules! event {
    ($(#[$m:meta])* $name:ident, $parent:literal { $($f:ident : $t:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
        pub struct $name { $(#[serde(default)] pub $f: $t),* }
        impl saap::Event for $name {
            const NAME: &'static str = stringify!($name);
            const PARENTS: &'static [&'static str] = &[$parent];
        }
    };
}
