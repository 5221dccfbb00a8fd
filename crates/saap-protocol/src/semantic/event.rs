//! What every semantic event is ([`SemanticEvent`]): a wire name, its span attributes, and
//! conversion to and from an [`EventEnvelope`]; and why a conversion failed
//! ([`SemanticError`]). Must not know any one event type.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::attributes::Attributes;

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
