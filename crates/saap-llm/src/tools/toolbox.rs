//! The registered tools, and one call of the model answered: run, refused with the contract,
//! or cut to size.
//!
//! [`Toolbox::execute`] never fails: an unknown tool, arguments that do not match the schema
//! and a failing tool are all answered to the model as text that says what was wrong and,
//! for the first two, the contract to follow (name, description, schema), so the model can
//! call again correctly. Results over the limit (256 KiB by default) are cut with a marker.
//! This module must not call the model.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::tool::{CallFuture, CallResult, Tool, ToolSpec};
use crate::message::{ToolCall, ToolDefinition};

/// Default largest tool result answered to the model.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 256 * 1024;

/// How one tool call went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionStatus {
    /// The tool ran and answered.
    Ok,
    /// No tool has that name.
    UnknownTool,
    /// The arguments did not match the contract.
    InvalidArguments,
    /// The tool ran and failed.
    Failed,
    /// The tool took longer than its timeout.
    TimedOut,
    /// The loop was cancelled while the tool ran.
    Cancelled,
}

/// One tool call and the answer given to the model (serializable: a journaled call records
/// it).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolExecution {
    /// The model's id of the call.
    pub call_id: String,
    /// The tool's name as the model wrote it.
    pub name: String,
    /// The arguments as the model wrote them.
    pub arguments: String,
    /// How it went.
    pub status: ExecutionStatus,
    /// What was answered to the model (cut to the limit).
    pub answer: String,
    /// Whether the answer was cut.
    pub cut: bool,
}

impl ToolExecution {
    /// True unless the tool ran and answered.
    pub fn is_error(&self) -> bool {
        self.status != ExecutionStatus::Ok
    }
}

/// The tools offered to the model, by name.
#[derive(Clone, Default)]
pub struct Toolbox {
    tools: BTreeMap<String, Arc<dyn Tool>>,
    max_result_bytes: Option<usize>,
    timeout: Option<Duration>,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toolbox")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Toolbox {
    /// No tools, results cut at [`DEFAULT_MAX_RESULT_BYTES`], no per-call timeout.
    pub fn new() -> Toolbox {
        Toolbox::default()
    }

    /// Adds a tool (a later tool of the same name replaces an earlier one).
    pub fn with(mut self, tool: Arc<dyn Tool>) -> Toolbox {
        self.tools.insert(tool.spec().name.clone(), tool);
        self
    }

    /// Sets the largest result answered to the model.
    pub fn max_result_bytes(mut self, max: usize) -> Toolbox {
        self.max_result_bytes = Some(max);
        self
    }

    /// Sets a timeout per tool call.
    pub fn timeout(mut self, timeout: Duration) -> Toolbox {
        self.timeout = Some(timeout);
        self
    }

    /// The definitions sent to the model.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.tools.values().map(|t| t.spec().definition()).collect()
    }

    /// The contract of a tool, if registered.
    pub fn spec(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.get(name).map(|t| t.spec())
    }

    /// Runs one call of the model and says what to answer.
    pub async fn execute(&self, call: &ToolCall, cancel: &CancellationToken) -> ToolExecution {
        let name = &call.function.name;
        let arguments = &call.function.arguments;
        let (status, answer) = match self.tools.get(name) {
            None => (ExecutionStatus::UnknownTool, self.unknown_tool_answer(name)),
            Some(tool) => {
                let running = CatchPanic(tool.call(arguments));
                let outcome = tokio::select! {
                    biased;
                    _ = cancel.cancelled() => None,
                    result = async {
                        match self.timeout {
                            Some(limit) => tokio::time::timeout(limit, running).await.ok(),
                            None => Some(running.await),
                        }
                    } => Some(result),
                };
                match outcome {
                    None => (
                        ExecutionStatus::Cancelled,
                        "Error: the tool call was cancelled.".to_owned(),
                    ),
                    Some(None) => (
                        ExecutionStatus::TimedOut,
                        format!(
                            "Error: the tool `{name}` did not finish within {}s.",
                            self.timeout.map_or(0.0, |t| t.as_secs_f64())
                        ),
                    ),
                    Some(Some(CallResult::Ok(text))) => (ExecutionStatus::Ok, text),
                    Some(Some(CallResult::Failed(message))) => (
                        ExecutionStatus::Failed,
                        format!("Error: the tool `{name}` failed: {message}"),
                    ),
                    Some(Some(CallResult::InvalidArguments(what))) => (
                        ExecutionStatus::InvalidArguments,
                        invalid_arguments_answer(tool.spec(), &what),
                    ),
                }
            }
        };
        let max = self.max_result_bytes.unwrap_or(DEFAULT_MAX_RESULT_BYTES);
        let (answer, cut) = cut_to(answer, max);
        tracing::debug!(tool = %name, status = ?status, cut, "tool call");
        ToolExecution {
            call_id: call.id.clone(),
            name: name.clone(),
            arguments: arguments.clone(),
            status,
            answer,
            cut,
        }
    }

    fn unknown_tool_answer(&self, name: &str) -> String {
        let mut text = format!(
            "Error: there is no tool named `{name}`. Call one of these tools, with arguments that match its parameters schema:"
        );
        if self.tools.is_empty() {
            text.push_str(" (none: answer without tools)");
        }
        for tool in self.tools.values() {
            text.push('\n');
            text.push_str(&contract(tool.spec()));
        }
        text
    }
}

fn invalid_arguments_answer(spec: &ToolSpec, what: &str) -> String {
    format!(
        "Error: the arguments for tool `{}` do not match its contract: {what}. Call it again with arguments that match.\n{}",
        spec.name,
        contract(spec)
    )
}

fn contract(spec: &ToolSpec) -> String {
    format!(
        "- tool `{}`: {}\n  parameters (JSON Schema): {}",
        spec.name, spec.description, spec.schema
    )
}

/// Cuts `text` to at most `max` bytes (on a character boundary) and appends a marker.
fn cut_to(mut text: String, max: usize) -> (String, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let total = text.len();
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&format!(
        "\n[saap: tool result cut: the first {end} of {total} bytes are shown]"
    ));
    (text, true)
}

/// A tool call's future with its panics caught: a panicking tool is answered to the model as
/// a failed call instead of unwinding through the tool loop and the step that runs it. The
/// future is not polled again after it panicked (it is ready with the failure).
struct CatchPanic<'a>(CallFuture<'a>);

impl std::future::Future for CatchPanic<'_> {
    type Output = CallResult;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<CallResult> {
        let running = &mut self.0;
        // The tool's state may be left half-changed by the panic; its caller only learns that
        // the call failed, as for any failure.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| running.as_mut().poll(cx))) {
            Ok(poll) => poll,
            Err(payload) => {
                let why = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".to_owned());
                std::task::Poll::Ready(CallResult::Failed(format!("it panicked: {why}")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_marks_and_respects_characters() {
        let (text, cut) = cut_to("ééé".to_owned(), 3);
        assert!(cut);
        assert!(text.starts_with("é\n[saap: tool result cut: the first 2 of 6 bytes"));
        assert_eq!(cut_to("abc".to_owned(), 3), ("abc".to_owned(), false));
    }
}
