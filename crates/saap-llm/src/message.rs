//! Chat messages and tool calls, as the chat completions API writes them.
//!
//! These types are both sent (the conversation) and received (the model's answer), so their
//! decoding is lenient: a missing optional field, `null` where a list is expected, content given
//! as a list of text parts, or tool call arguments given as a JSON object instead of a string
//! all decode. This module must not know about HTTP or streaming.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// Who wrote a message.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Instructions for the model.
    System,
    /// Newer name for system instructions (OpenAI's reasoning models).
    Developer,
    /// The user.
    User,
    /// The model.
    Assistant,
    /// A tool's result, answering a tool call.
    Tool,
    /// A role this client does not know, kept as sent.
    Other(String),
}

impl Role {
    /// The role as the API writes it.
    pub fn as_str(&self) -> &str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Other(other) => other,
        }
    }

    fn from_wire(text: String) -> Role {
        match text.as_str() {
            "system" => Role::System,
            "developer" => Role::Developer,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            _ => Role::Other(text),
        }
    }
}

impl Serialize for Role {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Role, D::Error> {
        String::deserialize(deserializer).map(Role::from_wire)
    }
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// The text; `None` for an assistant message that only calls tools.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "content_lenient"
    )]
    pub content: Option<String>,
    /// Tool calls the model asks for (assistant messages only).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub tool_calls: Vec<ToolCall>,
    /// The tool call this message answers (tool messages only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// An optional participant name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Message {
    fn with(role: Role, content: impl Into<String>) -> Message {
        Message {
            role,
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Message {
        Message::with(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Message {
        Message::with(Role::User, content)
    }

    /// An assistant message with text only.
    pub fn assistant(content: impl Into<String>) -> Message {
        Message::with(Role::Assistant, content)
    }

    /// A tool's result answering the call `tool_call_id`.
    pub fn tool_result(tool_call_id: impl Into<String>, content: impl Into<String>) -> Message {
        Message {
            tool_call_id: Some(tool_call_id.into()),
            ..Message::with(Role::Tool, content)
        }
    }
}

/// A call of a tool the model asks for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id, echoed in the tool's answer.
    #[serde(default)]
    pub id: String,
    /// Always `function` today.
    #[serde(rename = "type", default = "function_kind")]
    pub kind: String,
    /// Which function, with which arguments.
    pub function: FunctionCall,
}

/// The function part of a [`ToolCall`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The tool's name.
    pub name: String,
    /// The arguments as a JSON text (not parsed: the model may have written invalid JSON).
    #[serde(default, deserialize_with = "arguments_lenient")]
    pub arguments: String,
}

/// A tool offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// Always `function` today.
    #[serde(rename = "type", default = "function_kind")]
    pub kind: String,
    /// The function's name, description and parameter schema.
    pub function: FunctionDefinition,
}

/// The function part of a [`ToolDefinition`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionDefinition {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of its arguments object.
    pub parameters: Value,
}

impl ToolDefinition {
    /// A function tool.
    pub fn function(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
    ) -> ToolDefinition {
        ToolDefinition {
            kind: function_kind(),
            function: FunctionDefinition {
                name: name.into(),
                description: Some(description.into()),
                parameters,
            },
        }
    }
}

pub(crate) fn function_kind() -> String {
    "function".to_owned()
}

/// `null` decodes as the default value (some servers write `"tool_calls": null`).
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Content as a string, `null`, or a list of parts whose `text` fields are joined.
fn content_lenient<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::Null => None,
        Value::String(text) => Some(text),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|part| match part {
                    Value::String(text) => Some(text.as_str()),
                    Value::Object(map) => map.get("text").and_then(Value::as_str),
                    _ => None,
                })
                .collect(),
        ),
        other => Some(other.to_string()),
    })
}

/// Arguments as a JSON text; an object (Ollama's older form) is written back as text.
pub(crate) fn arguments_lenient<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<String, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::Null => String::new(),
        Value::String(text) => text,
        other => other.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_serialize_without_empty_fields() {
        let text = serde_json::to_string(&Message::user("hi")).expect("serializes");
        assert_eq!(text, r#"{"role":"user","content":"hi"}"#);
        let tool = serde_json::to_value(Message::tool_result("c1", "42")).expect("serializes");
        assert_eq!(
            tool,
            json!({"role": "tool", "content": "42", "tool_call_id": "c1"})
        );
    }

    #[test]
    fn lenient_decoding() {
        let m: Message = serde_json::from_value(json!({
            "role": "assistant",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            "tool_calls": null,
            "refusal": null,
            "unknown": {"x": 1}
        }))
        .expect("decodes");
        assert_eq!(m.content.as_deref(), Some("ab"));
        assert!(m.tool_calls.is_empty());

        let m: Message = serde_json::from_value(json!({
            "role": "critic",
            "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]
        }))
        .expect("decodes");
        assert_eq!(m.role, Role::Other("critic".to_owned()));
        assert_eq!(m.tool_calls[0].function.arguments, r#"{"x":1}"#);
        assert_eq!(m.tool_calls[0].kind, "function");
    }
}
