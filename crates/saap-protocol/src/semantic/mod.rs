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
mod guard;
mod llm;
mod message;
mod retrieval;
mod tool;

pub use attributes::{AttributeValue, Attributes, keys};
pub use chain::{AgentEvent, ChainEvent};
pub use cost::LLMCostEvent;
pub use embedding::{Embedding, EmbeddingEvent};
pub use guard::GuardEvent;
pub use llm::{LLMEvent, LLMStopEvent};
pub use message::{ContentBlock, Message};
pub use retrieval::{Node, RerankerEvent, RetrieverEvent};
pub use tool::ToolEvent;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::event::EventEnvelope;
use crate::event_id::EventId;
use crate::hierarchy::Hierarchy;

/// Why an envelope could not be read as, or built from, a semantic event.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum SemanticError {
    /// The envelope is not of this type (nor a subtype of it).
    #[error("event `{found}` is not a `{expected}` (nor a subtype of it)")]
    WrongType {
        /// The type asked for.
        expected: &'static str,
        /// The envelope's event name.
        found: String,
    },
    /// A field has the wrong shape.
    #[error("event `{event}` has a field of the wrong shape: {message}")]
    InvalidFields {
        /// The event type.
        event: &'static str,
        /// What the decoder said (field and expected type).
        message: String,
    },
    /// The type is not registered in the hierarchy given.
    #[error("event type `{name}` is not registered in this hierarchy; use `Hierarchy::builtin()`")]
    Unregistered {
        /// The type.
        name: &'static str,
    },
}

impl SemanticError {
    /// A stable, machine-readable name of the error kind.
    pub fn kind(&self) -> &'static str {
        match self {
            SemanticError::WrongType { .. } => "wrong_type",
            SemanticError::InvalidFields { .. } => "invalid_fields",
            SemanticError::Unregistered { .. } => "unregistered",
        }
    }
}

/// A typed event of the semantic family (or `LLMCostEvent`) and its span attributes.
pub trait SemanticEvent: Serialize + DeserializeOwned {
    /// The class name on the wire (`_event_name`).
    const EVENT_NAME: &'static str;

    /// OpenInference attributes (`openinference.span.kind`, `llm.*`, `retrieval.*`, …).
    fn openinference_attributes(&self) -> Attributes;

    /// OpenTelemetry GenAI attributes (`gen_ai.*`); none for kinds GenAI does not name.
    fn gen_ai_attributes(&self) -> Attributes {
        Attributes::new()
    }

    /// Both sets of attributes: what a span for this event carries.
    fn to_semantic_convention(&self) -> Attributes {
        let mut attributes = self.openinference_attributes();
        attributes.extend(self.gen_ai_attributes());
        attributes
    }

    /// An envelope of this type with these fields.
    fn to_envelope(
        &self,
        hierarchy: &Hierarchy,
        event_id: EventId,
        created_at: i64,
    ) -> Result<EventEnvelope, SemanticError> {
        let mut envelope = EventEnvelope::new(hierarchy, Self::EVENT_NAME, event_id, created_at)
            .ok_or(SemanticError::Unregistered {
                name: Self::EVENT_NAME,
            })?;
        match serde_json::to_value(self) {
            Ok(Value::Object(fields)) => envelope.fields = fields,
            Ok(_) | Err(_) => {
                return Err(SemanticError::InvalidFields {
                    event: Self::EVENT_NAME,
                    message: "the fields do not serialize to a JSON object".to_owned(),
                });
            }
        }
        Ok(envelope)
    }

    /// Reads an envelope of this type or a subtype (by its `_parent_event_names`). Fields of
    /// the subtype that this type does not know are kept in `extra`.
    fn from_envelope(envelope: &EventEnvelope) -> Result<Self, SemanticError> {
        if !envelope
            .parent_event_names
            .iter()
            .any(|name| name == Self::EVENT_NAME)
        {
            return Err(SemanticError::WrongType {
                expected: Self::EVENT_NAME,
                found: envelope.event_name.clone(),
            });
        }
        serde_json::from_value(Value::Object(envelope.fields.clone())).map_err(|e| {
            SemanticError::InvalidFields {
                event: Self::EVENT_NAME,
                message: e.to_string(),
            }
        })
    }
}

/// `prefix.index.document.*` attributes of one document.
pub(crate) fn index_key(prefix: &str, index: usize, key: &str) -> String {
    format!("{prefix}.{index}.{key}")
}
