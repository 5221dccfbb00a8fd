//! `LLMCostEvent`: what one model call cost, in tokens and money (a display event).
//!
//! Fields as Python's `LLMCostEvent` (a `CostEvent` with `LLMCosts`) writes them. It is not a
//! span of its own: its attributes (`llm.token_count.*`, `llm.cost.*`, `gen_ai.usage.*`) go on
//! the LLM span of the call it prices. This module must not do I/O or know a price table.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::attributes::{Attributes, keys};
use super::event::SemanticEvent;

/// The cost of a model call.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct LLMCostEvent {
    /// The model (`openai/gpt-4o-mini`).
    pub llm_name: String,
    /// The invoking user, if any.
    #[serde(default)]
    pub user_id: Option<String>,
    /// The acting tenant, if any.
    #[serde(default)]
    pub tenant_id: Option<String>,
    /// Prompt tokens.
    pub prompt_token_count: i64,
    /// Completion tokens.
    pub completion_token_count: i64,
    /// Embedding tokens.
    pub embedding_token_count: i64,
    /// Cost of the prompt tokens.
    pub prompt_tokens_costs: f64,
    /// Cost of the completion tokens.
    pub completion_tokens_costs: f64,
    /// Cost of the embedding tokens.
    pub embedding_tokens_costs: f64,
    /// Fields this type does not know, kept in order.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl LLMCostEvent {
    /// Prompt, completion and embedding costs together.
    pub fn total_costs(&self) -> f64 {
        self.prompt_tokens_costs + self.completion_tokens_costs + self.embedding_tokens_costs
    }
}

impl SemanticEvent for LLMCostEvent {
    const EVENT_NAME: &'static str = "LLMCostEvent";

    fn openinference_attributes(&self) -> Attributes {
        let mut a = Attributes::new();
        a.set(keys::LLM_MODEL_NAME, self.llm_name.as_str());
        a.set(keys::LLM_TOKEN_COUNT_PROMPT, self.prompt_token_count);
        a.set(
            keys::LLM_TOKEN_COUNT_COMPLETION,
            self.completion_token_count,
        );
        a.set(
            keys::LLM_TOKEN_COUNT_TOTAL,
            self.prompt_token_count
                .saturating_add(self.completion_token_count),
        );
        a.set(keys::LLM_COST_PROMPT, self.prompt_tokens_costs);
        a.set(keys::LLM_COST_COMPLETION, self.completion_tokens_costs);
        a.set(keys::LLM_COST_TOTAL, self.total_costs());
        a
    }

    fn gen_ai_attributes(&self) -> Attributes {
        let mut a = Attributes::new();
        a.set(keys::GEN_AI_REQUEST_MODEL, self.llm_name.as_str());
        a.set(keys::GEN_AI_USAGE_INPUT_TOKENS, self.prompt_token_count);
        a.set(
            keys::GEN_AI_USAGE_OUTPUT_TOKENS,
            self.completion_token_count,
        );
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::semantic::AttributeValue;

    #[test]
    fn cost_attribute_keys() {
        let cost = LLMCostEvent {
            llm_name: "openai/gpt-4o-mini".into(),
            prompt_token_count: 1000,
            completion_token_count: 500,
            prompt_tokens_costs: 0.002,
            completion_tokens_costs: 0.001,
            ..LLMCostEvent::default()
        };
        let a = cost.to_semantic_convention();
        assert_eq!(
            a.keys().collect::<Vec<_>>(),
            [
                "gen_ai.request.model",
                "gen_ai.usage.input_tokens",
                "gen_ai.usage.output_tokens",
                "llm.cost.completion",
                "llm.cost.prompt",
                "llm.cost.total",
                "llm.model_name",
                "llm.token_count.completion",
                "llm.token_count.prompt",
                "llm.token_count.total",
            ]
        );
        assert_eq!(
            a.get("llm.token_count.total"),
            Some(&AttributeValue::Int(1500))
        );
        assert_eq!(
            a.get("llm.cost.total"),
            Some(&AttributeValue::Double(0.003))
        );
    }
}
