//! A chat message inside an `LLMEvent`, as the Python implementation writes it.
//!
//! Python's `Message` keeps its text as `contents`, a list of blocks (`text`, `image`,
//! `audio`), and also writes a computed `content` (the text blocks joined). `tool_calls` are
//! kept as the API's JSON objects. Reading is lenient: a message with `content` but no
//! `contents` (written by another client) gets one text block. This module must not do I/O.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::attributes::{Attributes, keys};

/// One block of a message's contents.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ContentBlock {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, by URL or data URL.
    Image {
        /// Where the image is.
        #[serde(default)]
        url: Option<String>,
    },
    /// Audio, by URL or data URL.
    Audio {
        /// Where the audio is.
        #[serde(default)]
        url: Option<String>,
        /// Its MIME type (`audio/wav`).
        #[serde(default)]
        mime_type: Option<String>,
    },
}

/// A message sent to or received from a model.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Message {
    /// `system`, `user`, `assistant`, `tool`, …
    pub role: String,
    /// Author name.
    pub name: Option<String>,
    /// Tool calls, as the API writes them (`{id, type, function: {name, arguments}}`).
    pub tool_calls: Option<Vec<Value>>,
    /// Legacy function call name.
    pub function_call_name: Option<String>,
    /// Legacy function call arguments.
    pub function_call_arguments_json: Option<Map<String, Value>>,
    /// The tool call a tool message answers.
    pub tool_call_id: Option<String>,
    /// The contents.
    pub contents: Option<Vec<ContentBlock>>,
}

impl Message {
    /// A message with one text block.
    pub fn text(role: impl Into<String>, text: impl Into<String>) -> Message {
        Message {
            role: role.into(),
            contents: Some(vec![ContentBlock::Text { text: text.into() }]),
            ..Message::default()
        }
    }

    /// The text blocks joined (Python's computed `content`).
    pub fn content(&self) -> String {
        self.contents
            .iter()
            .flatten()
            .filter_map(|block| match block {
                ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// OpenInference attributes of this message under `prefix.index.`.
    pub(crate) fn attributes(&self, prefix: &str, index: usize, out: &mut Attributes) {
        let base = format!("{prefix}.{index}");
        out.set(format!("{base}.{}", keys::MESSAGE_ROLE), self.role.as_str());
        out.set(format!("{base}.{}", keys::MESSAGE_CONTENT), self.content());
        out.set_opt(format!("{base}.{}", keys::MESSAGE_NAME), self.name.clone());
        if let Some(calls) = &self.tool_calls {
            for (j, call) in calls.iter().enumerate() {
                let call_base = format!("{base}.{}.{j}", keys::MESSAGE_TOOL_CALLS);
                out.set_opt(
                    format!("{call_base}.{}", keys::TOOL_CALL_ID),
                    call.get("id").and_then(Value::as_str),
                );
                let function = call.get("function");
                out.set_opt(
                    format!("{call_base}.{}", keys::TOOL_CALL_FUNCTION_NAME),
                    function.and_then(|f| f.get("name")).and_then(Value::as_str),
                );
                out.set_opt(
                    format!("{call_base}.{}", keys::TOOL_CALL_FUNCTION_ARGUMENTS),
                    function.and_then(|f| f.get("arguments")).map(|a| match a {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    }),
                );
            }
        }
        out.set_opt(
            format!("{base}.{}", keys::MESSAGE_FUNCTION_CALL_NAME),
            self.function_call_name.clone(),
        );
        out.set_json(
            format!("{base}.{}", keys::MESSAGE_FUNCTION_CALL_ARGUMENTS_JSON),
            self.function_call_arguments_json.as_ref(),
        );
        out.set_opt(
            format!("{base}.{}", keys::MESSAGE_TOOL_CALL_ID),
            self.tool_call_id.clone(),
        );
        for (j, block) in self.contents.iter().flatten().enumerate() {
            let block_base = format!("{base}.{}.{j}.message_content", keys::MESSAGE_CONTENTS);
            match block {
                ContentBlock::Text { text } => {
                    out.set(format!("{block_base}.type"), "text");
                    out.set(format!("{block_base}.text"), text.as_str());
                }
                ContentBlock::Image { url } => {
                    out.set(format!("{block_base}.type"), "image");
                    out.set_opt(format!("{block_base}.image.image.url"), url.clone());
                }
                ContentBlock::Audio { url, mime_type } => {
                    out.set(format!("{block_base}.type"), "audio");
                    out.set_opt(format!("{block_base}.audio.url"), url.clone());
                    out.set_opt(format!("{block_base}.audio.mime_type"), mime_type.clone());
                }
            }
        }
    }
}

/// The wire form: every field written (null when absent, as pydantic does), then `content`.
#[derive(Serialize, Deserialize)]
struct WireMessage {
    role: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<Value>>,
    #[serde(default)]
    function_call_name: Option<String>,
    #[serde(default)]
    function_call_arguments_json: Option<Map<String, Value>>,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    contents: Option<Vec<ContentBlock>>,
    #[serde(default)]
    content: Option<String>,
}

impl Serialize for Message {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        WireMessage {
            role: self.role.clone(),
            name: self.name.clone(),
            tool_calls: self.tool_calls.clone(),
            function_call_name: self.function_call_name.clone(),
            function_call_arguments_json: self.function_call_arguments_json.clone(),
            tool_call_id: self.tool_call_id.clone(),
            contents: self.contents.clone(),
            content: Some(self.content()),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Message, D::Error> {
        let wire = WireMessage::deserialize(deserializer)?;
        let contents = match (wire.contents, wire.content) {
            (Some(contents), _) => Some(contents),
            (None, Some(text)) if !text.is_empty() => Some(vec![ContentBlock::Text { text }]),
            (None, _) => None,
        };
        Ok(Message {
            role: wire.role,
            name: wire.name,
            tool_calls: wire.tool_calls,
            function_call_name: wire.function_call_name,
            function_call_arguments_json: wire.function_call_arguments_json,
            tool_call_id: wire.tool_call_id,
            contents,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wire_form_has_every_field_and_the_computed_content() {
        let m = Message::text("user", "hi");
        assert_eq!(
            serde_json::to_value(&m).expect("serializes"),
            json!({"role": "user", "name": null, "tool_calls": null, "function_call_name": null,
                   "function_call_arguments_json": null, "tool_call_id": null,
                   "contents": [{"type": "text", "text": "hi"}], "content": "hi"})
        );
    }

    #[test]
    fn content_without_contents_becomes_a_text_block() {
        let m: Message =
            serde_json::from_value(json!({"role": "assistant", "content": "ok"})).expect("decodes");
        assert_eq!(m.content(), "ok");
    }

    #[test]
    fn message_attributes() {
        let m = Message {
            role: "assistant".into(),
            tool_calls: Some(vec![json!({"id": "c1", "type": "function",
                "function": {"name": "add", "arguments": "{\"a\":1}"}})]),
            ..Message::default()
        };
        let mut a = Attributes::new();
        m.attributes("llm.output_messages", 0, &mut a);
        assert_eq!(
            a.get_str("llm.output_messages.0.message.role"),
            Some("assistant")
        );
        assert_eq!(a.get_str("llm.output_messages.0.message.content"), Some(""));
        assert_eq!(
            a.get_str("llm.output_messages.0.message.tool_calls.0.tool_call.function.name"),
            Some("add")
        );
        assert_eq!(
            a.get_str("llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments"),
            Some("{\"a\":1}")
        );
        assert_eq!(
            a.get_str("llm.output_messages.0.message.tool_calls.0.tool_call.id"),
            Some("c1")
        );
    }
}
