//! `LLMEvent` and `LLMStopEvent`: one model call (span kind `LLM`).
//!
//! Fields as Python's `LLMEvent` writes them (messages, invocation parameters, model, provider,
//! system, prompt template, token counts, tools) plus saap's `finish_reason` and `latency_ms`,
//! written only when set. `LLMStopEvent` has the same fields and ends the run. This module must
//! not do I/O.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::attributes::index_key;
use super::attributes::{AttributeValue, Attributes, keys};
use super::event::SemanticEvent;
use super::message::Message;

/// A model call: what was sent, what came back, what it cost in tokens.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct LLMEvent {
    /// Messages sent.
    #[serde(default)]
    pub input_messages: Option<Vec<Message>>,
    /// Messages received.
    #[serde(default)]
    pub output_messages: Option<Vec<Message>>,
    /// Parameters of the call (temperature, max tokens…); never the API key.
    #[serde(default)]
    pub invocation_parameters: Option<Map<String, Value>>,
    /// The model's name.
    #[serde(default)]
    pub chat_model_name: Option<String>,
    /// Who hosts the model (`openai`, `azure`, …).
    #[serde(default)]
    pub provider: Option<String>,
    /// The AI product (`openai`, `anthropic`, …).
    #[serde(default)]
    pub system: Option<String>,
    /// The prompt template.
    #[serde(default)]
    pub prompt_template: Option<String>,
    /// Its variables.
    #[serde(default)]
    pub prompt_template_variables: Option<Map<String, Value>>,
    /// Its version.
    #[serde(default)]
    pub prompt_template_version: Option<String>,
    /// Prompt tokens.
    #[serde(default)]
    pub token_count_prompt: Option<i64>,
    /// Completion tokens.
    #[serde(default)]
    pub token_count_completion: Option<i64>,
    /// All tokens.
    #[serde(default)]
    pub token_count_total: Option<i64>,
    /// Tools offered to the model (the API's tool definitions).
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    /// saap: why the model stopped (`stop`, `length`, `tool_calls`…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// saap: how long the call took, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<f64>,
    /// Fields this type does not know, kept in order.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A model call whose answer ends the run.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LLMStopEvent(pub LLMEvent);

impl SemanticEvent for LLMEvent {
    const EVENT_NAME: &'static str = "LLMEvent";

    fn openinference_attributes(&self) -> Attributes {
        let mut a = Attributes::new();
        a.set(keys::OPENINFERENCE_SPAN_KIND, "LLM");
        a.set_json(
            keys::LLM_INVOCATION_PARAMETERS,
            self.invocation_parameters.as_ref(),
        );
        a.set_opt(keys::LLM_MODEL_NAME, self.chat_model_name.clone());
        a.set_opt(keys::LLM_PROVIDER, self.provider.clone());
        a.set_opt(keys::LLM_SYSTEM, self.system.clone());
        a.set_opt(keys::LLM_PROMPT_TEMPLATE, self.prompt_template.clone());
        a.set_json(
            keys::LLM_PROMPT_TEMPLATE_VARIABLES,
            self.prompt_template_variables.as_ref(),
        );
        a.set_opt(
            keys::LLM_PROMPT_TEMPLATE_VERSION,
            self.prompt_template_version.clone(),
        );
        a.set_opt(keys::LLM_TOKEN_COUNT_PROMPT, self.token_count_prompt);
        a.set_opt(
            keys::LLM_TOKEN_COUNT_COMPLETION,
            self.token_count_completion,
        );
        a.set_opt(keys::LLM_TOKEN_COUNT_TOTAL, self.token_count_total);
        for (i, tool) in self.tools.iter().flatten().enumerate() {
            a.set(
                index_key(keys::LLM_TOOLS, i, "tool.json_schema"),
                tool.to_string(),
            );
        }
        let inputs = self.input_messages.as_deref().unwrap_or_default();
        for (i, message) in inputs.iter().enumerate() {
            message.attributes(keys::LLM_INPUT_MESSAGES, i, &mut a);
        }
        if !inputs.is_empty() {
            let brief: Vec<Value> = inputs
                .iter()
                .map(|m| serde_json::json!({"role": m.role, "content": m.content()}))
                .collect();
            a.set(keys::INPUT_VALUE, Value::Array(brief).to_string());
            a.set(keys::INPUT_MIME_TYPE, "application/json");
        }
        let outputs = self.output_messages.as_deref().unwrap_or_default();
        for (i, message) in outputs.iter().enumerate() {
            message.attributes(keys::LLM_OUTPUT_MESSAGES, i, &mut a);
        }
        if let Some(first) = outputs.first() {
            a.set(keys::OUTPUT_VALUE, first.content());
            a.set(keys::OUTPUT_MIME_TYPE, "text/plain");
        }
        a
    }

    fn gen_ai_attributes(&self) -> Attributes {
        let mut a = Attributes::new();
        a.set(keys::GEN_AI_OPERATION_NAME, "chat");
        a.set_opt(
            keys::GEN_AI_SYSTEM,
            self.system.clone().or_else(|| self.provider.clone()),
        );
        a.set_opt(keys::GEN_AI_REQUEST_MODEL, self.chat_model_name.clone());
        a.set_opt(keys::GEN_AI_RESPONSE_MODEL, self.chat_model_name.clone());
        a.set_opt(keys::GEN_AI_USAGE_INPUT_TOKENS, self.token_count_prompt);
        a.set_opt(
            keys::GEN_AI_USAGE_OUTPUT_TOKENS,
            self.token_count_completion,
        );
        if let Some(reason) = &self.finish_reason {
            a.set(
                keys::GEN_AI_RESPONSE_FINISH_REASONS,
                AttributeValue::StringArray(vec![reason.clone()]),
            );
        }
        a
    }
}

impl SemanticEvent for LLMStopEvent {
    const EVENT_NAME: &'static str = "LLMStopEvent";

    fn openinference_attributes(&self) -> Attributes {
        self.0.openinference_attributes()
    }

    fn gen_ai_attributes(&self) -> Attributes {
        self.0.gen_ai_attributes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> LLMEvent {
        LLMEvent {
            input_messages: Some(vec![
                Message::text("system", "Be brief."),
                Message::text("user", "What is 2+2?"),
            ]),
            output_messages: Some(vec![Message::text("assistant", "4")]),
            invocation_parameters: Some(
                json!({"temperature": 0.0})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ),
            chat_model_name: Some("gpt-4o-mini".into()),
            provider: Some("openai".into()),
            system: Some("openai".into()),
            token_count_prompt: Some(12),
            token_count_completion: Some(1),
            token_count_total: Some(13),
            tools: Some(vec![
                json!({"type": "function", "function": {"name": "add"}}),
            ]),
            finish_reason: Some("stop".into()),
            latency_ms: Some(250.0),
            ..LLMEvent::default()
        }
    }

    #[test]
    fn openinference_keys() {
        let a = sample().openinference_attributes();
        let keys: Vec<&str> = a.keys().collect();
        assert_eq!(
            keys,
            [
                "input.mime_type",
                "input.value",
                "llm.input_messages.0.message.content",
                "llm.input_messages.0.message.contents.0.message_content.text",
                "llm.input_messages.0.message.contents.0.message_content.type",
                "llm.input_messages.0.message.role",
                "llm.input_messages.1.message.content",
                "llm.input_messages.1.message.contents.0.message_content.text",
                "llm.input_messages.1.message.contents.0.message_content.type",
                "llm.input_messages.1.message.role",
                "llm.invocation_parameters",
                "llm.model_name",
                "llm.output_messages.0.message.content",
                "llm.output_messages.0.message.contents.0.message_content.text",
                "llm.output_messages.0.message.contents.0.message_content.type",
                "llm.output_messages.0.message.role",
                "llm.provider",
                "llm.system",
                "llm.token_count.completion",
                "llm.token_count.prompt",
                "llm.token_count.total",
                "llm.tools.0.tool.json_schema",
                "openinference.span.kind",
                "output.mime_type",
                "output.value",
            ]
        );
        assert_eq!(a.get_str("openinference.span.kind"), Some("LLM"));
        assert_eq!(a.get_str("llm.input_messages.1.message.role"), Some("user"));
        assert_eq!(
            a.get_str("llm.input_messages.1.message.content"),
            Some("What is 2+2?")
        );
        assert_eq!(
            a.get_str("llm.output_messages.0.message.content"),
            Some("4")
        );
        assert_eq!(
            a.get("llm.token_count.total"),
            Some(&AttributeValue::Int(13))
        );
        assert_eq!(
            a.get_str("llm.invocation_parameters"),
            Some(r#"{"temperature":0.0}"#)
        );
        assert_eq!(a.get_str("output.value"), Some("4"));
    }

    #[test]
    fn gen_ai_keys() {
        let a = sample().gen_ai_attributes();
        let keys: Vec<&str> = a.keys().collect();
        assert_eq!(
            keys,
            [
                "gen_ai.operation.name",
                "gen_ai.request.model",
                "gen_ai.response.finish_reasons",
                "gen_ai.response.model",
                "gen_ai.system",
                "gen_ai.usage.input_tokens",
                "gen_ai.usage.output_tokens",
            ]
        );
        assert_eq!(
            a.get("gen_ai.usage.input_tokens"),
            Some(&AttributeValue::Int(12))
        );
        assert_eq!(
            a.get("gen_ai.response.finish_reasons"),
            Some(&AttributeValue::StringArray(vec!["stop".into()]))
        );
    }

    #[test]
    fn stop_event_has_the_same_attributes_and_session_id_is_added_by_the_caller() {
        let stop = LLMStopEvent(sample());
        let a = stop.to_semantic_convention().with_session_id("t1");
        assert_eq!(a.get_str("session.id"), Some("t1"));
        assert_eq!(a.get_str("openinference.span.kind"), Some("LLM"));
        assert_eq!(a.get_str("gen_ai.operation.name"), Some("chat"));
    }

    #[test]
    fn an_empty_event_has_only_its_kind() {
        let a = LLMEvent::default().openinference_attributes();
        assert_eq!(a.keys().collect::<Vec<_>>(), ["openinference.span.kind"]);
    }
}
