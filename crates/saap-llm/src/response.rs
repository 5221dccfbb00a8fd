//! What a call returns: the model's [`Completion`], its [`Usage`] and [`FinishReason`].
//!
//! Both a non-streamed response and an accumulated stream end up as a [`Completion`] of the
//! first choice. Decoding is lenient: unknown fields are ignored, optional ones may be missing,
//! `finish_reason: ""` counts as no reason, an unknown reason is kept as text, and missing token
//! counts are zero (a missing total is the sum). This module must not do I/O.

use serde::{Deserialize, Deserializer, Serialize};

use crate::message::{Message, null_as_default};

/// Why the model stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
pub enum FinishReason {
    /// A natural end or a stop sequence.
    Stop,
    /// The token limit was reached: the answer is cut.
    Length,
    /// The model asks for tool calls.
    ToolCalls,
    /// The content was filtered.
    ContentFilter,
    /// Legacy single function call.
    FunctionCall,
    /// A reason this client does not know, kept as sent.
    Other(String),
}

impl FinishReason {
    /// The reason as the API writes it.
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::FunctionCall => "function_call",
            FinishReason::Other(other) => other,
        }
    }

    /// Parses a wire value; empty text is no reason.
    pub fn parse(text: &str) -> Option<FinishReason> {
        Some(match text {
            "" => return None,
            "stop" | "eos" => FinishReason::Stop,
            "length" => FinishReason::Length,
            "tool_calls" => FinishReason::ToolCalls,
            "content_filter" => FinishReason::ContentFilter,
            "function_call" => FinishReason::FunctionCall,
            other => FinishReason::Other(other.to_owned()),
        })
    }
}

impl From<String> for FinishReason {
    /// A reason as written by [`FinishReason::as_str`] (empty text is kept as `Other`).
    fn from(text: String) -> FinishReason {
        FinishReason::parse(&text).unwrap_or(FinishReason::Other(text))
    }
}

impl From<FinishReason> for String {
    fn from(reason: FinishReason) -> String {
        reason.as_str().to_owned()
    }
}

/// `finish_reason` as `null`, missing, `""` (no reason) or text.
pub(crate) fn finish_reason_lenient<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<FinishReason>, D::Error> {
    Ok(Option::<String>::deserialize(deserializer)?
        .as_deref()
        .and_then(FinishReason::parse))
}

/// Token counts of one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the prompt.
    #[serde(default, deserialize_with = "null_as_default")]
    pub prompt_tokens: u64,
    /// Tokens generated.
    #[serde(default, deserialize_with = "null_as_default")]
    pub completion_tokens: u64,
    /// Both together.
    #[serde(default, deserialize_with = "null_as_default")]
    pub total_tokens: u64,
}

impl Usage {
    /// Fills a missing total with the sum of the parts.
    pub(crate) fn normalized(mut self) -> Usage {
        if self.total_tokens == 0 {
            self.total_tokens = self.prompt_tokens.saturating_add(self.completion_tokens);
        }
        self
    }
}

/// The model's answer (serializable: a journaled call records it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// The server's id of the completion, if it gave one.
    pub id: Option<String>,
    /// The model that answered, as the server names it.
    pub model: Option<String>,
    /// The assistant message: text and/or tool calls.
    pub message: Message,
    /// Why it stopped; `None` when the server did not say.
    pub finish_reason: Option<FinishReason>,
    /// Token counts; `None` when the server did not send them.
    pub usage: Option<Usage>,
}

/// A non-streamed response body, as sent.
#[derive(Deserialize)]
pub(crate) struct WireCompletion {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub choices: Vec<WireChoice>,
    #[serde(default)]
    pub usage: Option<Usage>,
}

#[derive(Deserialize)]
pub(crate) struct WireChoice {
    #[serde(default)]
    pub index: u32,
    pub message: Message,
    #[serde(default, deserialize_with = "finish_reason_lenient")]
    pub finish_reason: Option<FinishReason>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finish_reason_empty_is_none_and_unknown_is_kept() {
        assert_eq!(FinishReason::parse(""), None);
        assert_eq!(
            FinishReason::parse("tool_calls"),
            Some(FinishReason::ToolCalls)
        );
        assert_eq!(
            FinishReason::parse("abort"),
            Some(FinishReason::Other("abort".to_owned()))
        );
    }

    #[test]
    fn wire_completion_lenient() {
        let c: WireCompletion = serde_json::from_value(json!({
            "choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": ""}],
            "usage": {"prompt_tokens": 3, "completion_tokens": null},
            "system_fingerprint": "x"
        }))
        .expect("decodes");
        assert_eq!(c.choices[0].finish_reason, None);
        let usage = c.usage.expect("usage").normalized();
        assert_eq!(usage.total_tokens, 3);
    }
}
