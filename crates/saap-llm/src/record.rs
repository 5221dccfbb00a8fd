//! What a call is recorded as: the protocol's `LLMEvent`, `ToolEvent` and `LLMCostEvent`.
//!
//! The runtime journals and exports these; building them here keeps the mapping from the
//! client's types in one place and lets it be tested without an engine. [`PriceTable`] prices
//! token usage per model. This module must not do I/O, and must never put the API key (or any
//! header) into an event: invocation parameters are the sampling knobs only.

use std::collections::BTreeMap;
use std::time::Duration;

use saap_protocol::semantic::{self, LLMCostEvent, LLMEvent, ToolEvent};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::message::Message;
use crate::request::ChatRequest;
use crate::response::{Completion, Usage};
use crate::tools::{ToolExecution, ToolSpec};

/// A message as the protocol records it (text as one text block).
pub fn protocol_message(message: &Message) -> semantic::Message {
    semantic::Message {
        role: message.role.as_str().to_owned(),
        name: message.name.clone(),
        tool_calls: (!message.tool_calls.is_empty()).then(|| {
            message
                .tool_calls
                .iter()
                .filter_map(|call| serde_json::to_value(call).ok())
                .collect()
        }),
        tool_call_id: message.tool_call_id.clone(),
        contents: message
            .content
            .as_ref()
            .map(|text| vec![semantic::ContentBlock::Text { text: text.clone() }]),
        ..semantic::Message::default()
    }
}

/// The `LLMEvent` of one call: `request` as sent (its model, or `default_model` when it named
/// none), the `completion` received, how long it took, and who serves the model
/// (`provider`, e.g. `openai`, `vllm`, `ollama`).
pub fn llm_event(
    request: &ChatRequest,
    default_model: Option<&str>,
    completion: &Completion,
    latency: Duration,
    provider: Option<&str>,
) -> LLMEvent {
    let mut parameters = Map::new();
    if let Some(t) = request.temperature {
        parameters.insert("temperature".into(), Value::from(t));
    }
    if let Some(m) = request.max_tokens {
        parameters.insert("max_tokens".into(), Value::from(m));
    }
    if let Some(choice) = &request.tool_choice {
        parameters.insert("tool_choice".into(), choice.clone());
    }
    let model = completion
        .model
        .clone()
        .or_else(|| request.model.clone())
        .or_else(|| default_model.map(str::to_owned));
    let usage = completion.usage.unwrap_or_default();
    let counted = completion.usage.is_some();
    let count = |n: u64| counted.then(|| i64::try_from(n).unwrap_or(i64::MAX));
    LLMEvent {
        input_messages: Some(request.messages.iter().map(protocol_message).collect()),
        output_messages: Some(vec![protocol_message(&completion.message)]),
        invocation_parameters: (!parameters.is_empty()).then_some(parameters),
        chat_model_name: model,
        provider: provider.map(str::to_owned),
        system: provider.map(str::to_owned),
        token_count_prompt: count(usage.prompt_tokens),
        token_count_completion: count(usage.completion_tokens),
        token_count_total: count(usage.total_tokens),
        tools: (!request.tools.is_empty()).then(|| {
            request
                .tools
                .iter()
                .filter_map(|tool| serde_json::to_value(tool).ok())
                .collect()
        }),
        finish_reason: completion
            .finish_reason
            .as_ref()
            .map(|r| r.as_str().to_owned()),
        latency_ms: Some(latency.as_secs_f64() * 1000.0),
        ..LLMEvent::default()
    }
}

/// The `ToolEvent` of one executed call (`spec`: the tool's contract, `None` for an unknown
/// tool). Arguments that are not a JSON object are kept under `raw_arguments`.
pub fn tool_event(spec: Option<&ToolSpec>, execution: &ToolExecution) -> ToolEvent {
    let parsed: Option<Map<String, Value>> = serde_json::from_str(&execution.arguments).ok();
    let mut extra = Map::new();
    if parsed.is_none() {
        extra.insert(
            "raw_arguments".into(),
            Value::String(execution.arguments.clone()),
        );
    }
    ToolEvent {
        tool_call_id: Some(execution.call_id.clone()),
        name: Some(execution.name.clone()),
        description: spec.map(|s| s.description.clone()),
        json_schema: spec.and_then(|s| s.schema.as_object().cloned()),
        parameters: parsed,
        result: Some(execution.answer.clone()),
        is_error: Some(execution.is_error()),
        extra,
    }
}

/// What a model's tokens cost, per million.
#[derive(Clone, Copy, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct Price {
    /// Per million prompt tokens.
    pub prompt_per_million: f64,
    /// Per million completion tokens.
    pub completion_per_million: f64,
}

/// Prices by model name (as the server reports it, or as requested).
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PriceTable(pub BTreeMap<String, Price>);

impl PriceTable {
    /// The `LLMCostEvent` of `usage` on `model`; `None` when the model has no price (a local
    /// model costs nothing that we know of).
    pub fn cost_event(&self, model: &str, usage: &Usage) -> Option<LLMCostEvent> {
        let price = self.0.get(model)?;
        let per = |tokens: u64, per_million: f64| tokens as f64 * per_million / 1_000_000.0;
        Some(LLMCostEvent {
            llm_name: model.to_owned(),
            prompt_token_count: i64::try_from(usage.prompt_tokens).unwrap_or(i64::MAX),
            completion_token_count: i64::try_from(usage.completion_tokens).unwrap_or(i64::MAX),
            embedding_token_count: 0,
            prompt_tokens_costs: per(usage.prompt_tokens, price.prompt_per_million),
            completion_tokens_costs: per(usage.completion_tokens, price.completion_per_million),
            embedding_tokens_costs: 0.0,
            ..LLMCostEvent::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{FunctionCall, Role, ToolCall};
    use crate::response::FinishReason;
    use crate::tools::ExecutionStatus;
    use saap_protocol::semantic::SemanticEvent;

    fn completion() -> Completion {
        Completion {
            id: Some("c".into()),
            model: Some("gpt-4o-mini".into()),
            message: Message {
                role: Role::Assistant,
                content: None,
                tool_calls: vec![ToolCall {
                    id: "call_1".into(),
                    kind: "function".into(),
                    function: FunctionCall {
                        name: "add".into(),
                        arguments: r#"{"a":1}"#.into(),
                    },
                }],
                tool_call_id: None,
                name: None,
            },
            finish_reason: Some(FinishReason::ToolCalls),
            usage: Some(Usage {
                prompt_tokens: 1000,
                completion_tokens: 500,
                total_tokens: 1500,
            }),
        }
    }

    #[test]
    fn llm_event_of_a_call() {
        let mut request = ChatRequest::new(vec![Message::user("1+2?")]);
        request.temperature = Some(0.5);
        let event = llm_event(
            &request,
            Some("default"),
            &completion(),
            Duration::from_millis(120),
            Some("openai"),
        );
        let a = event.to_semantic_convention();
        assert_eq!(a.get_str("llm.model_name"), Some("gpt-4o-mini"));
        assert_eq!(
            a.get_str("llm.input_messages.0.message.content"),
            Some("1+2?")
        );
        assert_eq!(
            a.get_str("llm.output_messages.0.message.tool_calls.0.tool_call.function.name"),
            Some("add")
        );
        assert_eq!(
            a.get_str("llm.invocation_parameters"),
            Some(r#"{"temperature":0.5}"#)
        );
        assert_eq!(event.token_count_total, Some(1500));
        assert_eq!(event.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(event.latency_ms, Some(120.0));
    }

    #[test]
    fn tool_event_of_an_execution() {
        let execution = ToolExecution {
            call_id: "c1".into(),
            name: "add".into(),
            arguments: "{not json".into(),
            status: ExecutionStatus::InvalidArguments,
            answer: "Error: …".into(),
            cut: false,
        };
        let event = tool_event(None, &execution);
        assert_eq!(event.is_error, Some(true));
        assert_eq!(event.parameters, None);
        assert_eq!(event.extra["raw_arguments"], "{not json");
        assert_eq!(
            event.to_semantic_convention().get_str("tool.name"),
            Some("add")
        );
    }

    #[test]
    fn prices() {
        let table: PriceTable = serde_json::from_str(
            r#"{"gpt-4o-mini": {"prompt_per_million": 0.15, "completion_per_million": 0.6}}"#,
        )
        .expect("price table");
        let usage = completion().usage.expect("usage");
        let cost = table.cost_event("gpt-4o-mini", &usage).expect("priced");
        assert!((cost.prompt_tokens_costs - 0.00015).abs() < 1e-12);
        assert!((cost.completion_tokens_costs - 0.0003).abs() < 1e-12);
        assert!(table.cost_event("local-model", &usage).is_none());
    }
}
