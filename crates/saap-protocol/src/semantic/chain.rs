//! `ChainEvent` and `AgentEvent`: a chain step and an agent invocation (span kinds `CHAIN`,
//! `AGENT`).
//!
//! Fields as Python writes them: a chain carries optional `metadata`, an agent nothing. This
//! module must not do I/O.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::attributes::{Attributes, keys};
use super::event::SemanticEvent;

/// A chain step.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct ChainEvent {
    /// User-defined attributes of the chain.
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
    /// Fields this type does not know, kept in order.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl SemanticEvent for ChainEvent {
    const EVENT_NAME: &'static str = "ChainEvent";

    fn openinference_attributes(&self) -> Attributes {
        let mut a = Attributes::new();
        a.set(keys::OPENINFERENCE_SPAN_KIND, "CHAIN");
        a.set_json(keys::METADATA, self.metadata.as_ref());
        a
    }
}

/// An agent invocation.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct AgentEvent {
    /// Fields of subtypes, kept in order.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl SemanticEvent for AgentEvent {
    const EVENT_NAME: &'static str = "AgentEvent";

    fn openinference_attributes(&self) -> Attributes {
        let mut a = Attributes::new();
        a.set(keys::OPENINFERENCE_SPAN_KIND, "AGENT");
        a
    }

    fn gen_ai_attributes(&self) -> Attributes {
        let mut a = Attributes::new();
        a.set(keys::GEN_AI_OPERATION_NAME, "invoke_agent");
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn chain_keys() {
        let event = ChainEvent {
            metadata: json!({"step": "retrieve"}).as_object().cloned(),
            ..ChainEvent::default()
        };
        let a = event.to_semantic_convention();
        assert_eq!(
            a.keys().collect::<Vec<_>>(),
            ["metadata", "openinference.span.kind"]
        );
        assert_eq!(a.get_str("metadata"), Some(r#"{"step":"retrieve"}"#));
        assert_eq!(a.get_str("openinference.span.kind"), Some("CHAIN"));
    }

    #[test]
    fn agent_keys() {
        let a = AgentEvent::default().to_semantic_convention();
        assert_eq!(
            a.keys().collect::<Vec<_>>(),
            ["gen_ai.operation.name", "openinference.span.kind"]
        );
        assert_eq!(a.get_str("openinference.span.kind"), Some("AGENT"));
    }
}
