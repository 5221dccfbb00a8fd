//! Putting a stream's chunks together into one [`Completion`], and the deltas handed out.
//!
//! [`Accumulator::apply`] takes one decoded chunk, appends its text and tool call fragments to
//! the answer so far and pushes what is new as [`StreamEvent`]s. Tool call arguments split
//! across chunks are joined by the call's `index` (or, for servers that send no index, by a new
//! `id` starting a new call). The number of calls is bounded before anything is allocated for
//! them. This module must not do I/O or know about SSE framing.

use std::collections::VecDeque;

use crate::chunk::{WireChunk, error_message};
use crate::error::LlmError;
use crate::message::{FunctionCall, Message, Role, ToolCall, function_kind};
use crate::response::{Completion, FinishReason, Usage};

/// What a stream hands out as it arrives.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    /// A piece of the answer's text.
    Text(String),
    /// A piece of a tool call: the first piece of a call carries its id and name, the next ones
    /// more of its arguments.
    ToolCall {
        /// Position of the call in the answer.
        index: usize,
        /// The call's id, when this piece carries it.
        id: Option<String>,
        /// The tool's name, when this piece carries it.
        name: Option<String>,
        /// More of the arguments' JSON text (may be empty).
        arguments: String,
    },
    /// The stream ended well: the whole answer.
    Finished(Box<Completion>),
}

/// The answer so far.
#[derive(Default)]
pub(crate) struct Accumulator {
    id: Option<String>,
    model: Option<String>,
    role: Option<Role>,
    content: String,
    has_content: bool,
    tool_calls: Vec<ToolCall>,
    finish_reason: Option<FinishReason>,
    usage: Option<Usage>,
    max_tool_calls: usize,
    max_error_excerpt: usize,
}

impl Accumulator {
    pub(crate) fn new(max_tool_calls: usize, max_error_excerpt: usize) -> Accumulator {
        Accumulator {
            max_tool_calls,
            max_error_excerpt,
            ..Accumulator::default()
        }
    }

    /// True once a choice said why it finished.
    pub(crate) fn has_finished(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// Adds one chunk, pushing the new pieces onto `out`.
    pub(crate) fn apply(
        &mut self,
        chunk: WireChunk,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<(), LlmError> {
        if let Some(error) = chunk.error {
            let mut message = error_message(&error);
            truncate_chars(&mut message, self.max_error_excerpt);
            return Err(LlmError::ServerError { message });
        }
        if self.id.is_none() {
            self.id = chunk.id;
        }
        if self.model.is_none() {
            self.model = chunk.model;
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.normalized());
        }
        for choice in chunk.choices {
            if choice.index != 0 {
                continue; // one answer is asked for; others are ignored
            }
            let delta = choice.delta;
            if self.role.is_none() {
                self.role = delta.role;
            }
            if let Some(text) = delta.content {
                self.has_content = true;
                if !text.is_empty() {
                    self.content.push_str(&text);
                    out.push_back(StreamEvent::Text(text));
                }
            }
            for fragment in delta.tool_calls {
                self.apply_tool_call(fragment, out)?;
            }
            if choice.finish_reason.is_some() {
                self.finish_reason = choice.finish_reason;
            }
        }
        Ok(())
    }

    fn apply_tool_call(
        &mut self,
        fragment: crate::chunk::WireToolCallDelta,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<(), LlmError> {
        let index = match fragment.index {
            Some(index) => usize::try_from(index).unwrap_or(usize::MAX),
            // No index: a new id starts a new call, otherwise it continues the last one.
            None => match (&fragment.id, self.tool_calls.last()) {
                (Some(id), Some(last)) if !id.is_empty() && *id != last.id => self.tool_calls.len(),
                (_, Some(_)) => self.tool_calls.len() - 1,
                (_, None) => 0,
            },
        };
        if index >= self.max_tool_calls {
            return Err(LlmError::TooManyToolCalls {
                limit: self.max_tool_calls,
            });
        }
        while self.tool_calls.len() <= index {
            self.tool_calls.push(ToolCall {
                id: String::new(),
                kind: function_kind(),
                function: FunctionCall {
                    name: String::new(),
                    arguments: String::new(),
                },
            });
        }
        let call = &mut self.tool_calls[index];
        let id = fragment.id.filter(|id| !id.is_empty());
        if let Some(id) = &id {
            call.id.clone_from(id);
        }
        let (name, arguments) = match fragment.function {
            Some(function) => (function.name.filter(|n| !n.is_empty()), function.arguments),
            None => (None, String::new()),
        };
        if let Some(name) = &name {
            call.function.name.push_str(name);
        }
        call.function.arguments.push_str(&arguments);
        out.push_back(StreamEvent::ToolCall {
            index,
            id,
            name,
            arguments,
        });
        Ok(())
    }

    /// The whole answer.
    pub(crate) fn finish(self) -> Completion {
        Completion {
            id: self.id,
            model: self.model,
            message: Message {
                role: self.role.unwrap_or(Role::Assistant),
                content: (self.has_content || self.tool_calls.is_empty()).then_some(self.content),
                tool_calls: self.tool_calls,
                tool_call_id: None,
                name: None,
            },
            finish_reason: self.finish_reason,
            usage: self.usage,
        }
    }
}

/// Cuts `text` to at most `max` bytes on a character boundary, marking the cut.
pub(crate) fn truncate_chars(text: &mut String, max: usize) {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str(" (cut)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(json: &str) -> WireChunk {
        serde_json::from_str(json).expect("test chunk decodes")
    }

    #[test]
    fn split_tool_call_arguments_are_joined() {
        let mut acc = Accumulator::new(8, 100);
        let mut out = VecDeque::new();
        for c in [
            r#"{"choices":[{"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"add","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\": 1,"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":" \"b\": 2}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}"#,
        ] {
            acc.apply(chunk(c), &mut out).expect("applies");
        }
        let done = acc.finish();
        assert_eq!(done.message.tool_calls.len(), 1);
        assert_eq!(done.message.tool_calls[0].id, "c1");
        assert_eq!(done.message.tool_calls[0].function.name, "add");
        assert_eq!(
            done.message.tool_calls[0].function.arguments,
            r#"{"a": 1, "b": 2}"#
        );
        assert_eq!(done.message.content, None);
        assert_eq!(done.finish_reason, Some(FinishReason::ToolCalls));
        assert_eq!(done.usage.map(|u| u.total_tokens), Some(12));
        assert_eq!(out.len(), 3);
    }

    #[test]
    fn calls_without_index_are_told_apart_by_id() {
        let mut acc = Accumulator::new(8, 100);
        let mut out = VecDeque::new();
        for c in [
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"g","arguments":"{"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"}"}}]}}]}"#,
        ] {
            acc.apply(chunk(c), &mut out).expect("applies");
        }
        let calls = acc.finish().message.tool_calls;
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1].function.arguments, "{}");
    }

    #[test]
    fn tool_call_index_is_bounded_before_allocation() {
        let mut acc = Accumulator::new(4, 100);
        let err = acc
            .apply(
                chunk(r#"{"choices":[{"delta":{"tool_calls":[{"index":4000000000}]}}]}"#),
                &mut VecDeque::new(),
            )
            .expect_err("index past the limit");
        assert_eq!(err.code(), "LLM_TOO_MANY_TOOL_CALLS");
    }

    #[test]
    fn error_object_becomes_server_error() {
        let mut acc = Accumulator::new(4, 10);
        let err = acc
            .apply(
                chunk(r#"{"error":{"message":"model overloaded, try again later","type":"server_error"}}"#),
                &mut VecDeque::new(),
            )
            .expect_err("error chunk");
        assert_eq!(
            err,
            LlmError::ServerError {
                message: "model over (cut)".to_owned()
            }
        );
    }
}
