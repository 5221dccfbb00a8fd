//! Semantic events: typed views of the `SemanticEvent` family and `LLMCostEvent`, with their
//! OpenInference and OpenTelemetry GenAI span attributes.
//!
//! Seed 002 makes these events the protocol's tracing vocabulary: an `LLMEvent` becomes an
//! `LLM` span, a `RetrieverEvent` a `RETRIEVER` span, and so on. Each type here
//!
//! * is wire-compatible with the Python implementation's JSON (`swiss_ai_hub.core.events.agent
//!   .semantic.*`): the same field names, every Python field written (null when absent, as
//!   pydantic writes it), unknown fields kept in `extra` and written back;
//! * converts to and from an [`EventEnvelope`] ([`SemanticEvent::to_envelope`],
//!   [`SemanticEvent::from_envelope`]), so the codec, subjects and dispatch stay generic;
//! * returns its span attributes ([`SemanticEvent::to_semantic_convention`]): the
//!   OpenInference keys ([`SemanticEvent::openinference_attributes`]) and the `gen_ai.*`
//!   equivalents ([`SemanticEvent::gen_ai_attributes`]). `session.id` is not a field of any
//!   event: the caller adds it ([`Attributes::with_session_id`], the run's thread).
//!
//! Where Python's `to_semantic_convention()` writes values an OpenTelemetry attribute cannot
//! hold (a dict for prompt-template variables, a list of dicts for tools, a tool-call list as
//! one JSON string) or writes `"null"` for an absent JSON field, we follow the OpenInference
//! specification instead: JSON text for maps, flattened `message.tool_calls.N.tool_call.*`
//! and `llm.tools.N.tool.json_schema`, and absent values left out. Fields that saap adds
//! (`finish_reason`, `latency_ms`, `result`, `query`…) are written only when set; Python keeps
//! them as extra fields.
//!
//! This module must not do I/O, read a clock or draw ids: ids and times are arguments.

pub mod attributes;
mod chain;
mod cost;
mod embedding;
mod event;
mod guard;
mod llm;
mod message;
mod retrieval;
mod tool;

pub use attributes::{AttributeValue, Attributes, keys};
pub use chain::{AgentEvent, ChainEvent};
pub use cost::LLMCostEvent;
pub use embedding::{Embedding, EmbeddingEvent};
pub use event::{SemanticError, SemanticEvent};
pub use guard::GuardEvent;
pub use llm::{LLMEvent, LLMStopEvent};
pub use message::{ContentBlock, Message};
pub use retrieval::{Node, RerankerEvent, RetrieverEvent};
pub use tool::ToolEvent;
