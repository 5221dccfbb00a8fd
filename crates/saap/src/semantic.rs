//! The protocol's semantic events (seed 002's `SemanticEvent` family and `LLMCostEvent`) as
//! events a step can return or show: `LLMEvent`, `LLMStopEvent`, `RetrieverEvent`,
//! `RerankerEvent`, `EmbeddingEvent`, `ToolEvent`, `GuardEvent`, `ChainEvent`, `AgentEvent`
//! (control and display: a step returns them, steps downstream may take them, and the trace
//! exporter makes them spans) and `LLMCostEvent` (display only: shown with
//! [`crate::StepCtx::display`]). The types and their OpenInference attributes live in
//! `saap_protocol::semantic`; this module only names their place in the hierarchy, which must
//! stay the one `saap_protocol::Hierarchy::builtin` declares (a test checks it).

use crate::event::Event;
pub use saap_protocol::semantic::{
    AgentEvent, ChainEvent, ContentBlock, Embedding, EmbeddingEvent, GuardEvent, LLMCostEvent,
    LLMEvent, LLMStopEvent, Message, Node, RerankerEvent, RetrieverEvent, SemanticEvent, ToolEvent,
};

macro_rules! protocol_event {
    ($($ty:ident: [$($parent:literal),+]),* $(,)?) => {
        $(
            impl Event for $ty {
                const NAME: &'static str = stringify!($ty);
                const PARENTS: &'static [&'static str] = &[$($parent),+];
                fn try_clone_event(&self) -> Option<Self> {
                    Some(self.clone())
                }
            }
        )*
        /// (name, parents) of every type above, for the test against the protocol.
        #[cfg(test)]
        const DECLARED: &[(&str, &[&str])] = &[$((stringify!($ty), &[$($parent),+])),*];
    };
}

protocol_event! {
    LLMEvent: ["SemanticEvent"],
    LLMStopEvent: ["LLMEvent", "StopEvent"],
    RetrieverEvent: ["SemanticEvent"],
    RerankerEvent: ["SemanticEvent"],
    EmbeddingEvent: ["SemanticEvent"],
    ToolEvent: ["SemanticEvent"],
    GuardEvent: ["SemanticEvent"],
    ChainEvent: ["SemanticEvent"],
    AgentEvent: ["SemanticEvent"],
    LLMCostEvent: ["CostEvent"],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_semantic_event_has_the_parents_the_protocol_declares() {
        let h = saap_protocol::Hierarchy::builtin();
        for (name, parents) in DECLARED {
            let declared: Vec<&str> = h
                .direct_parents(name)
                .unwrap_or_default()
                .iter()
                .map(String::as_str)
                .collect();
            assert_eq!(declared, *parents, "{name}");
        }
        assert!(h.is_subtype_of("LLMStopEvent", "StopEvent"));
        assert!(!h.is_subtype_of("LLMCostEvent", "ControlEvent"));
    }
}
