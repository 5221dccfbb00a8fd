//! Span attributes: the flat key → value map that OpenInference and OpenTelemetry spans carry.
//!
//! [`Attributes`] is ordered by key (so output is deterministic) and holds only the value types
//! an OpenTelemetry attribute can take ([`AttributeValue`]): nested data is written as a JSON
//! string, as OpenInference prescribes for `*.metadata`, `tool.parameters` and the like. The
//! [`keys`] module names every key this crate writes. This module must not know about events.

use std::collections::BTreeMap;

use serde::Serialize;

/// A value an OpenTelemetry span attribute can hold.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AttributeValue {
    /// Text (also JSON written as text).
    String(String),
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Double(f64),
    /// A list of numbers (an embedding vector).
    DoubleArray(Vec<f64>),
    /// A list of texts.
    StringArray(Vec<String>),
}

impl AttributeValue {
    /// The text, if this is a string value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            AttributeValue::String(s) => Some(s),
            _ => None,
        }
    }
}

impl From<&str> for AttributeValue {
    fn from(s: &str) -> AttributeValue {
        AttributeValue::String(s.to_owned())
    }
}

impl From<String> for AttributeValue {
    fn from(s: String) -> AttributeValue {
        AttributeValue::String(s)
    }
}

impl From<i64> for AttributeValue {
    fn from(n: i64) -> AttributeValue {
        AttributeValue::Int(n)
    }
}

impl From<f64> for AttributeValue {
    fn from(n: f64) -> AttributeValue {
        AttributeValue::Double(n)
    }
}

impl From<bool> for AttributeValue {
    fn from(b: bool) -> AttributeValue {
        AttributeValue::Bool(b)
    }
}

/// Span attributes, ordered by key.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Attributes(BTreeMap<String, AttributeValue>);

impl Attributes {
    /// No attributes.
    pub fn new() -> Attributes {
        Attributes::default()
    }

    /// Sets `key` to `value`.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<AttributeValue>) {
        self.0.insert(key.into(), value.into());
    }

    /// Sets `key` when `value` is present.
    pub fn set_opt<V: Into<AttributeValue>>(&mut self, key: impl Into<String>, value: Option<V>) {
        if let Some(value) = value {
            self.set(key, value);
        }
    }

    /// Sets `key` to `value` written as JSON text, when present.
    pub fn set_json<T: Serialize>(&mut self, key: impl Into<String>, value: Option<&T>) {
        if let Some(value) = value {
            let text = serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned());
            self.set(key, text);
        }
    }

    /// Adds every attribute of `other` (its values win on equal keys).
    pub fn extend(&mut self, other: Attributes) {
        self.0.extend(other.0);
    }

    /// Adds `session.id` (the run's thread: the conversation the span belongs to).
    pub fn with_session_id(mut self, session_id: &str) -> Attributes {
        self.set(keys::SESSION_ID, session_id);
        self
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&AttributeValue> {
        self.0.get(key)
    }

    /// The text value of `key`.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(AttributeValue::as_str)
    }

    /// Every key, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// Every attribute, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &AttributeValue)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// How many attributes there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The attribute keys this crate writes: OpenInference first, then the OpenTelemetry GenAI
/// (`gen_ai.*`) equivalents.
pub mod keys {
    /// The kind of span: `LLM`, `RETRIEVER`, `RERANKER`, `EMBEDDING`, `TOOL`, `GUARDRAIL`,
    /// `CHAIN`, `AGENT`.
    pub const OPENINFERENCE_SPAN_KIND: &str = "openinference.span.kind";
    /// The input of the operation.
    pub const INPUT_VALUE: &str = "input.value";
    /// Its MIME type (`text/plain` or `application/json`).
    pub const INPUT_MIME_TYPE: &str = "input.mime_type";
    /// The output of the operation.
    pub const OUTPUT_VALUE: &str = "output.value";
    /// Its MIME type.
    pub const OUTPUT_MIME_TYPE: &str = "output.mime_type";
    /// The conversation (saap: the run's thread id).
    pub const SESSION_ID: &str = "session.id";
    /// Free-form metadata as JSON text.
    pub const METADATA: &str = "metadata";

    /// Model name.
    pub const LLM_MODEL_NAME: &str = "llm.model_name";
    /// The AI product (`openai`, …).
    pub const LLM_SYSTEM: &str = "llm.system";
    /// The hosting provider.
    pub const LLM_PROVIDER: &str = "llm.provider";
    /// Invocation parameters as JSON text.
    pub const LLM_INVOCATION_PARAMETERS: &str = "llm.invocation_parameters";
    /// Prefix of the input messages: `llm.input_messages.N.message.*`.
    pub const LLM_INPUT_MESSAGES: &str = "llm.input_messages";
    /// Prefix of the output messages.
    pub const LLM_OUTPUT_MESSAGES: &str = "llm.output_messages";
    /// Prompt tokens.
    pub const LLM_TOKEN_COUNT_PROMPT: &str = "llm.token_count.prompt";
    /// Completion tokens.
    pub const LLM_TOKEN_COUNT_COMPLETION: &str = "llm.token_count.completion";
    /// All tokens.
    pub const LLM_TOKEN_COUNT_TOTAL: &str = "llm.token_count.total";
    /// Prompt template.
    pub const LLM_PROMPT_TEMPLATE: &str = "llm.prompt_template.template";
    /// Its variables as JSON text.
    pub const LLM_PROMPT_TEMPLATE_VARIABLES: &str = "llm.prompt_template.variables";
    /// Its version.
    pub const LLM_PROMPT_TEMPLATE_VERSION: &str = "llm.prompt_template.version";
    /// Prefix of the advertised tools: `llm.tools.N.tool.json_schema`.
    pub const LLM_TOOLS: &str = "llm.tools";
    /// Cost of the prompt tokens.
    pub const LLM_COST_PROMPT: &str = "llm.cost.prompt";
    /// Cost of the completion tokens.
    pub const LLM_COST_COMPLETION: &str = "llm.cost.completion";
    /// Total cost.
    pub const LLM_COST_TOTAL: &str = "llm.cost.total";

    /// Message role (after a message prefix and index).
    pub const MESSAGE_ROLE: &str = "message.role";
    /// Message text.
    pub const MESSAGE_CONTENT: &str = "message.content";
    /// Message author name.
    pub const MESSAGE_NAME: &str = "message.name";
    /// Tool calls of a message (prefix: `message.tool_calls.N.tool_call.*`).
    pub const MESSAGE_TOOL_CALLS: &str = "message.tool_calls";
    /// The tool call a tool message answers.
    pub const MESSAGE_TOOL_CALL_ID: &str = "message.tool_call_id";
    /// Legacy function call name.
    pub const MESSAGE_FUNCTION_CALL_NAME: &str = "message.function_call_name";
    /// Legacy function call arguments.
    pub const MESSAGE_FUNCTION_CALL_ARGUMENTS_JSON: &str = "message.function_call_arguments_json";
    /// Content blocks (prefix: `message.contents.N.message_content.*`).
    pub const MESSAGE_CONTENTS: &str = "message.contents";
    /// Tool call id (after `message.tool_calls.N.`).
    pub const TOOL_CALL_ID: &str = "tool_call.id";
    /// Tool call function name.
    pub const TOOL_CALL_FUNCTION_NAME: &str = "tool_call.function.name";
    /// Tool call arguments as JSON text.
    pub const TOOL_CALL_FUNCTION_ARGUMENTS: &str = "tool_call.function.arguments";

    /// Prefix of retrieved documents: `retrieval.documents.N.document.*`.
    pub const RETRIEVAL_DOCUMENTS: &str = "retrieval.documents";
    /// Document id (after a document prefix and index).
    pub const DOCUMENT_ID: &str = "document.id";
    /// Document text.
    pub const DOCUMENT_CONTENT: &str = "document.content";
    /// Document relevance score.
    pub const DOCUMENT_SCORE: &str = "document.score";
    /// Document metadata as JSON text.
    pub const DOCUMENT_METADATA: &str = "document.metadata";
    /// Reranker query.
    pub const RERANKER_QUERY: &str = "reranker.query";
    /// Reranker model.
    pub const RERANKER_MODEL_NAME: &str = "reranker.model_name";
    /// Reranker top k.
    pub const RERANKER_TOP_K: &str = "reranker.top_k";
    /// Prefix of reranker input documents.
    pub const RERANKER_INPUT_DOCUMENTS: &str = "reranker.input_documents";
    /// Prefix of reranker output documents.
    pub const RERANKER_OUTPUT_DOCUMENTS: &str = "reranker.output_documents";
    /// Embedding model.
    pub const EMBEDDING_MODEL_NAME: &str = "embedding.model_name";
    /// Prefix of embeddings: `embedding.embeddings.N.embedding.text|vector`.
    pub const EMBEDDING_EMBEDDINGS: &str = "embedding.embeddings";
    /// Embedded text (after the prefix and index).
    pub const EMBEDDING_TEXT: &str = "embedding.text";
    /// Embedding vector.
    pub const EMBEDDING_VECTOR: &str = "embedding.vector";
    /// Tool name.
    pub const TOOL_NAME: &str = "tool.name";
    /// Tool description.
    pub const TOOL_DESCRIPTION: &str = "tool.description";
    /// Tool call arguments as JSON text.
    pub const TOOL_PARAMETERS: &str = "tool.parameters";
    /// Tool input schema as JSON text.
    pub const TOOL_JSON_SCHEMA: &str = "tool.json_schema";

    /// GenAI: the operation (`chat`, `embeddings`, `execute_tool`, `invoke_agent`).
    pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
    /// GenAI: the provider (`openai`, …).
    pub const GEN_AI_SYSTEM: &str = "gen_ai.system";
    /// GenAI: the model asked for.
    pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
    /// GenAI: the model that answered.
    pub const GEN_AI_RESPONSE_MODEL: &str = "gen_ai.response.model";
    /// GenAI: prompt tokens.
    pub const GEN_AI_USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
    /// GenAI: completion tokens.
    pub const GEN_AI_USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
    /// GenAI: why the model stopped, one per choice.
    pub const GEN_AI_RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
    /// GenAI: tool name.
    pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
    /// GenAI: tool description.
    pub const GEN_AI_TOOL_DESCRIPTION: &str = "gen_ai.tool.description";
    /// GenAI: tool call id.
    pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
    /// GenAI: tool type (`function`).
    pub const GEN_AI_TOOL_TYPE: &str = "gen_ai.tool.type";
}

/// `prefix.index.document.*` attributes of one document.
pub(crate) fn index_key(prefix: &str, index: usize, key: &str) -> String {
    format!("{prefix}.{index}.{key}")
}
