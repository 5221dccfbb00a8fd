//! `GuardEvent`: a guardrail's verdict (span kind `GUARDRAIL`).
//!
//! Python's `GuardEvent` has no fields: the verdict is its subtype (`GuardAcceptEvent`,
//! `GuardRejectionEvent` and theirs), which [`SemanticEvent::from_envelope`] accepts. This
//! module must not do I/O.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::attributes::{Attributes, keys};
use super::event::SemanticEvent;

/// A guardrail check.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct GuardEvent {
    /// Fields of subtypes, kept in order.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl SemanticEvent for GuardEvent {
    const EVENT_NAME: &'static str = "GuardEvent";

    fn openinference_attributes(&self) -> Attributes {
        let mut a = Attributes::new();
        a.set(keys::OPENINFERENCE_SPAN_KIND, "GUARDRAIL");
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_keys() {
        let a = GuardEvent::default().to_semantic_convention();
        assert_eq!(a.keys().collect::<Vec<_>>(), ["openinference.span.kind"]);
        assert_eq!(a.get_str("openinference.span.kind"), Some("GUARDRAIL"));
    }
}
