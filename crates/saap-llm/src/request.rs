//! What the caller asks for: [`ChatRequest`], and the JSON body sent for it.
//!
//! The request is our own small type: the conversation, the tools, the usual sampling knobs and
//! an `extra` map passed through as is (for a server's own parameters). [`ChatRequest::body`]
//! adds `model`, `stream` and, when streaming, `stream_options: {include_usage: true}` so the
//! final chunk carries token counts. This module must not do I/O.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::message::{Message, ToolDefinition};

/// A chat completion request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatRequest {
    /// The model; `None` uses the client's configured model.
    pub model: Option<String>,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    pub tools: Vec<ToolDefinition>,
    /// `auto`, `none`, `required` or a specific function, as the API writes it.
    pub tool_choice: Option<Value>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Most tokens to generate.
    pub max_tokens: Option<u32>,
    /// Further top-level fields, sent as given (a field named here overrides none of the above).
    pub extra: Map<String, Value>,
}

impl ChatRequest {
    /// A request with these messages and nothing else set.
    pub fn new(messages: Vec<Message>) -> ChatRequest {
        ChatRequest {
            messages,
            ..ChatRequest::default()
        }
    }

    /// Sets the model.
    pub fn model(mut self, model: impl Into<String>) -> ChatRequest {
        self.model = Some(model.into());
        self
    }

    /// Sets the tools.
    pub fn tools(mut self, tools: Vec<ToolDefinition>) -> ChatRequest {
        self.tools = tools;
        self
    }

    /// The request as the model is asked it (the body of a call to `model` that is not
    /// streamed): what names one call, e.g. the content key of a journaled call.
    pub fn wire_json(&self, model: &str) -> Result<Value, serde_json::Error> {
        serde_json::from_slice(&self.body(model, false)?)
    }

    /// The JSON body for `model`, streamed or not.
    pub(crate) fn body(&self, model: &str, stream: bool) -> Result<Vec<u8>, serde_json::Error> {
        let body = WireRequest {
            model,
            messages: &self.messages,
            tools: &self.tools,
            tool_choice: self.tool_choice.as_ref(),
            temperature: self.temperature,
            max_tokens: self.max_tokens,
            stream,
            stream_options: stream.then_some(StreamOptions {
                include_usage: true,
            }),
            extra: &self.extra,
        };
        serde_json::to_vec(&body)
    }
}

#[derive(Serialize)]
struct WireRequest<'a> {
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
    model: &'a str,
    messages: &'a [Message],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tools: &'a [ToolDefinition],
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn streamed_body_asks_for_usage() {
        let req = ChatRequest::new(vec![Message::user("hi")]);
        let body: Value =
            serde_json::from_slice(&req.body("m", true).expect("encodes")).expect("json");
        assert_eq!(
            body,
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                   "stream": true, "stream_options": {"include_usage": true}})
        );
        let body: Value =
            serde_json::from_slice(&req.body("m", false).expect("encodes")).expect("json");
        assert_eq!(body["stream"], json!(false));
        assert!(body.get("stream_options").is_none());
    }

    #[test]
    fn extra_fields_are_passed_through() {
        let mut req = ChatRequest::new(vec![]);
        req.extra.insert("top_k".to_owned(), json!(5));
        let body: Value =
            serde_json::from_slice(&req.body("m", false).expect("encodes")).expect("json");
        assert_eq!(body["top_k"], json!(5));
    }
}
