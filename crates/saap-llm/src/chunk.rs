//! One `data:` payload of a chat completion stream, as sent.
//!
//! The shapes are the chat completions chunk (`choices[].delta` with `content` and
//! `tool_calls[]` fragments, `finish_reason`, a final `usage`) plus the `error` object some
//! servers send mid-stream. Every field is optional and unknown ones are ignored. This module
//! only decodes; putting fragments together is [`crate::accumulate`]'s job.

use serde::Deserialize;
use serde_json::Value;

use crate::message::{Role, arguments_lenient, null_as_default};
use crate::response::{FinishReason, Usage, finish_reason_lenient};

/// A decoded chunk.
#[derive(Deserialize, Default)]
pub(crate) struct WireChunk {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub choices: Vec<WireChunkChoice>,
    #[serde(default)]
    pub usage: Option<Usage>,
    /// An error reported inside the stream (OpenAI, vLLM, LiteLLM).
    #[serde(default)]
    pub error: Option<Value>,
}

#[derive(Deserialize)]
pub(crate) struct WireChunkChoice {
    #[serde(default)]
    pub index: u32,
    #[serde(default, deserialize_with = "null_as_default")]
    pub delta: WireDelta,
    #[serde(default, deserialize_with = "finish_reason_lenient")]
    pub finish_reason: Option<FinishReason>,
}

#[derive(Deserialize, Default)]
pub(crate) struct WireDelta {
    #[serde(default)]
    pub role: Option<Role>,
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub tool_calls: Vec<WireToolCallDelta>,
}

#[derive(Deserialize)]
pub(crate) struct WireToolCallDelta {
    /// Which call this fragment belongs to; some servers omit it.
    #[serde(default)]
    pub index: Option<u64>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub function: Option<WireFunctionDelta>,
}

#[derive(Deserialize)]
pub(crate) struct WireFunctionDelta {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "arguments_lenient")]
    pub arguments: String,
}

/// The human-readable message of an `error` value: `error.message`, or the value itself.
pub(crate) fn error_message(error: &Value) -> String {
    match error {
        Value::String(text) => text.clone(),
        Value::Object(map) => match map.get("message").and_then(Value::as_str) {
            Some(message) => message.to_owned(),
            None => error.to_string(),
        },
        other => other.to_string(),
    }
}
