//! # saap-llm: a client for OpenAI-compatible chat completions
//!
//! OpenAI, vLLM, llama.cpp's server, Ollama and LiteLLM all speak the chat completions API;
//! this crate is a small, bounded client for it, built on our own request/response types over
//! reqwest (rustls, no OpenSSL) and a bounded server-sent events decoder.
//!
//! ## Layout
//!
//! * [`config`] — [`LlmConfig`] (base URL, key, model, timeouts, [`RetryPolicy`], [`Limits`]),
//!   from code or from `OPENAI_BASE_URL` / `OPENAI_API_KEY` / `OPENAI_MODEL`.
//! * [`secret`] — [`ApiKey`], which never prints.
//! * [`message`], [`request`], [`response`] — the conversation, the request, the answer.
//! * [`client`] — [`LlmClient`]: send with retries, timeouts and cancellation.
//! * [`stream`] — [`ChatStream`]: a streamed answer, delta by delta.
//! * [`error`] — [`LlmError`], every failure with a stable code.
//! * [`record`] — a call as the protocol records it: `LLMEvent`, `ToolEvent`, and
//!   `LLMCostEvent` from a [`record::PriceTable`].
//! * [`tools`] — typed Rust functions as tools ([`typed_tool`]), a [`Toolbox`] that answers
//!   every call, and the bounded [`run_tool_loop`].
//! * internal: `sse` (bounded SSE framing), `chunk` (a stream chunk as sent), `accumulate`
//!   (chunks into one answer), `retry` (what to retry and how long to wait).
//!
//! ## What this crate must not do
//!
//! It knows nothing of runs, steps or the journal: the runtime wraps it (it builds the
//! protocol's events for a call, the runtime decides where they go). It never logs,
//! prints or returns the API key, never panics on what a server sends, and never waits or
//! allocates without a bound.
#![doc = include_str!("../README.md")]

pub mod client;
pub mod config;
pub mod error;
pub mod message;
pub mod record;
pub mod request;
pub mod response;
#[cfg(feature = "scripted")]
pub mod scripted;
pub mod secret;
pub mod stream;
pub mod tools;

mod accumulate;
mod chunk;
mod retry;
mod sse;

pub use accumulate::StreamEvent;
pub use client::LlmClient;
pub use config::{DEFAULT_BASE_URL, Limits, LlmConfig, RetryPolicy};
pub use error::LlmError;
pub use message::{FunctionCall, FunctionDefinition, Message, Role, ToolCall, ToolDefinition};
pub use request::ChatRequest;
pub use response::{Completion, FinishReason, Usage};
pub use schemars;
pub use secret::ApiKey;
pub use stream::ChatStream;
pub use tokio_util::sync::CancellationToken;
pub use tools::{ToolExecution, Toolbox, run_tool_loop, typed_tool};
