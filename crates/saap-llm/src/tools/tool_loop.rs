//! The tool loop: ask the model, run the tools it calls, answer them, ask again — at most a
//! configured number of rounds.
//!
//! Each round is one chat completion with the toolbox's definitions. An answer without tool
//! calls ends the loop; otherwise every call is run in order ([`Toolbox::execute`]) and
//! answered with a `tool` message. Bad calls are answered, not failed. When the rounds run out
//! while the model still calls tools, the loop fails with [`LlmError::ToolRoundsExhausted`].
//! This module must not know about runs, steps or events: it returns the transcript and every
//! execution, and the runtime records them.

use tokio_util::sync::CancellationToken;

use super::toolbox::{ToolExecution, Toolbox};
use crate::client::LlmClient;
use crate::error::LlmError;
use crate::message::Message;
use crate::request::ChatRequest;
use crate::response::Completion;

/// Default most rounds (model calls) of a loop.
pub const DEFAULT_MAX_ROUNDS: u32 = 8;

/// What a finished loop produced.
#[derive(Clone, Debug)]
pub struct ToolLoopOutcome {
    /// The model's last answer (no tool calls).
    pub completion: Completion,
    /// The whole conversation: the request's messages, then each assistant message and tool
    /// answer, then the last answer.
    pub messages: Vec<Message>,
    /// Every tool call, in order.
    pub executions: Vec<ToolExecution>,
    /// Model calls made.
    pub rounds: u32,
}

/// Runs the loop for `request` with `toolbox`, at most `max_rounds` model calls, each answer
/// asked for whole.
pub async fn run_tool_loop(
    client: &LlmClient,
    request: &ChatRequest,
    toolbox: &Toolbox,
    max_rounds: u32,
    cancel: &CancellationToken,
) -> Result<ToolLoopOutcome, LlmError> {
    run(client, request, toolbox, max_rounds, cancel, None).await
}

/// As [`run_tool_loop`], each answer streamed: `on_text` gets every piece of text as it
/// arrives, in every round.
pub async fn run_tool_loop_streamed(
    client: &LlmClient,
    request: &ChatRequest,
    toolbox: &Toolbox,
    max_rounds: u32,
    cancel: &CancellationToken,
    mut on_text: impl FnMut(&str) + Send,
) -> Result<ToolLoopOutcome, LlmError> {
    run(
        client,
        request,
        toolbox,
        max_rounds,
        cancel,
        Some(&mut on_text),
    )
    .await
}

async fn run(
    client: &LlmClient,
    request: &ChatRequest,
    toolbox: &Toolbox,
    max_rounds: u32,
    cancel: &CancellationToken,
    mut on_text: Option<&mut (dyn FnMut(&str) + Send)>,
) -> Result<ToolLoopOutcome, LlmError> {
    let mut request = request.clone();
    request.tools = toolbox.definitions();
    let mut executions = Vec::new();
    for round in 1..=max_rounds {
        let completion = match on_text.as_mut() {
            None => client.complete(&request, cancel).await?,
            Some(on_text) => {
                let stream = client.stream(&request, cancel.clone()).await?;
                stream.collect(|text| on_text(text)).await?
            }
        };
        request.messages.push(completion.message.clone());
        if completion.message.tool_calls.is_empty() {
            return Ok(ToolLoopOutcome {
                completion,
                messages: request.messages,
                executions,
                rounds: round,
            });
        }
        for call in &completion.message.tool_calls {
            if cancel.is_cancelled() {
                return Err(LlmError::Cancelled);
            }
            let execution = toolbox.execute(call, cancel).await;
            request
                .messages
                .push(Message::tool_result(&call.id, execution.answer.clone()));
            executions.push(execution);
        }
        tracing::debug!(
            round,
            calls = completion.message.tool_calls.len(),
            "tool round"
        );
    }
    Err(LlmError::ToolRoundsExhausted { rounds: max_rounds })
}
