//! `ToolEvent`: one tool call (span kind `TOOL`).
//!
//! Fields as Python's `ToolEvent` writes them (call id, name, description, input schema,
//! parameters) plus saap's `result` and `is_error`, written only when set. This module must not
//! do I/O or run tools.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::attributes::{Attributes, keys};
use super::event::SemanticEvent;

/// A tool call and, when it ran, its result.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolEvent {
    /// The model's id of the call.
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// The tool's name.
    #[serde(default)]
    pub name: Option<String>,
    /// What the tool does.
    #[serde(default)]
    pub description: Option<String>,
    /// The JSON Schema of its arguments.
    #[serde(default)]
    pub json_schema: Option<Map<String, Value>>,
    /// The arguments of this call.
    #[serde(default)]
    pub parameters: Option<Map<String, Value>>,
    /// saap: what the tool answered (or the contract answer when the call was refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// saap: whether the call failed or was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Fields this type does not know, kept in order.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl SemanticEvent for ToolEvent {
    const EVENT_NAME: &'static str = "ToolEvent";

    fn openinference_attributes(&self) -> Attributes {
        let mut a = Attributes::new();
        a.set(keys::OPENINFERENCE_SPAN_KIND, "TOOL");
        a.set_opt(keys::TOOL_NAME, self.name.clone());
        a.set_opt(keys::TOOL_DESCRIPTION, self.description.clone());
        a.set_json(keys::TOOL_JSON_SCHEMA, self.json_schema.as_ref());
        a.set_json(keys::TOOL_PARAMETERS, self.parameters.as_ref());
        a.set_opt(keys::TOOL_CALL_ID, self.tool_call_id.clone());
        if self.parameters.is_some() {
            a.set_json(keys::INPUT_VALUE, self.parameters.as_ref());
            a.set(keys::INPUT_MIME_TYPE, "application/json");
        }
        if let Some(result) = &self.result {
            a.set(keys::OUTPUT_VALUE, result.as_str());
            a.set(keys::OUTPUT_MIME_TYPE, "text/plain");
        }
        a
    }

    fn gen_ai_attributes(&self) -> Attributes {
        let mut a = Attributes::new();
        a.set(keys::GEN_AI_OPERATION_NAME, "execute_tool");
        a.set_opt(keys::GEN_AI_TOOL_NAME, self.name.clone());
        a.set_opt(keys::GEN_AI_TOOL_DESCRIPTION, self.description.clone());
        a.set_opt(keys::GEN_AI_TOOL_CALL_ID, self.tool_call_id.clone());
        a.set(keys::GEN_AI_TOOL_TYPE, "function");
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_keys() {
        let event = ToolEvent {
            tool_call_id: Some("call_1".into()),
            name: Some("add".into()),
            description: Some("Adds two numbers".into()),
            json_schema: json!({"type": "object"}).as_object().cloned(),
            parameters: json!({"a": 1, "b": 2}).as_object().cloned(),
            result: Some("3".into()),
            ..ToolEvent::default()
        };
        let a = event.to_semantic_convention();
        assert_eq!(
            a.keys().collect::<Vec<_>>(),
            [
                "gen_ai.operation.name",
                "gen_ai.tool.call.id",
                "gen_ai.tool.description",
                "gen_ai.tool.name",
                "gen_ai.tool.type",
                "input.mime_type",
                "input.value",
                "openinference.span.kind",
                "output.mime_type",
                "output.value",
                "tool.description",
                "tool.json_schema",
                "tool.name",
                "tool.parameters",
                "tool_call.id",
            ]
        );
        assert_eq!(a.get_str("tool.parameters"), Some(r#"{"a":1,"b":2}"#));
        assert_eq!(a.get_str("openinference.span.kind"), Some("TOOL"));
    }
}
