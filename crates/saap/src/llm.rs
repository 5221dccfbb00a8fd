//! Model calls inside a step (feature `llm`, issue 20 §2): [`Llm`] is a resource — the
//! OpenAI-compatible client of `saap-llm` with its connection pool and a price table —
//! registered once on the workflow and taken by steps as `Res<Llm>`. [`Llm::chat`] streams the
//! answer, showing each piece of text as a `ChunkEvent` (ids derived from the execution and
//! a counter, so a re-run after a crash does not show a chunk twice), shows the call's
//! `LLMCostEvent` when the model has a price, and returns the message with the call's
//! `LLMEvent` (model, messages, token counts, finish reason, latency) for the step to return
//! — or [`LlmAnswer::into_stop`] when the answer ends the run. `LLMEvent` is a control event
//! in the protocol (seed 002: steps downstream may take it), so the step returns it rather
//! than the call publishing it behind the dispatcher's back.
//!
//! [`Llm::chat_with_tools`] runs the tool loop inside the step: typed Rust functions
//! ([`typed_tool`]) in a [`Toolbox`] (a resource too, when the tools hold handles), each call
//! recorded as a `ToolEvent`, every round streamed and priced like `chat`.
//!
//! What a crash does: the journal records a completed execution's outputs, so a step that
//! finished is never run again. Inside a step, every model call and every tool call is a
//! journaled effect (`StepCtx::effect`, names `llm` and `tool`, keyed by the request as the
//! model is asked it and by the tool call): a step that crashed after a call runs again and
//! gets the recorded answer back — its chunks shown again with the same ids (so logged once),
//! the model not called again. A call cut by the crash itself is made again.
//!
//! What this module must not do: keep a run's state on the [`Llm`] (it is shared by every run),
//! log or record the API key (the client never hands it out; events carry the sampling
//! parameters only), or decide anything about dispatch.

use crate::context::{ContextError, StepCtx};
use crate::effect::EffectError;
use crate::event::ChunkEvent;
use crate::semantic::ToolEvent;
use crate::semantic::{LLMCostEvent, LLMEvent, LLMStopEvent};
pub use saap_llm::record::{Price, PriceTable};
/// A scripted model behind a real OpenAI-compatible endpoint on loopback (demos, examples,
/// offline tests): the same client path as a hosted model, answers a function writes.
pub use saap_llm::scripted;
pub use saap_llm::tools::DEFAULT_MAX_ROUNDS;
pub use saap_llm::{
    CancellationToken, ChatRequest, Completion, FinishReason, LlmClient, LlmConfig, LlmError,
    Message, Role, StreamEvent, ToolExecution, Toolbox, Usage, typed_tool,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// A model client shared by every run of a workflow: register it once
/// (`.resource(Llm::new(client))`) and take it as `Res<Llm>`.
#[derive(Clone)]
pub struct Llm {
    client: LlmClient,
    prices: PriceTable,
    provider: Option<String>,
}

impl std::fmt::Debug for Llm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The client's config holds the key: only what is safe to show.
        f.debug_struct("Llm")
            .field("base_url", &self.client.config().base_url)
            .field("model", &self.client.config().model)
            .field("priced_models", &self.prices.0.len())
            .finish()
    }
}

/// Why a model call inside a step failed.
#[derive(Debug, thiserror::Error)]
pub enum LlmStepError {
    /// The call itself: the server, the stream, a timeout (each with its `LLM_…` code).
    #[error(transparent)]
    Call(#[from] LlmError),
    /// Showing a chunk or the cost: the run has ended, or the store failed.
    #[error("the model's answer could not be shown: {0}")]
    Show(#[from] ContextError),
    /// The call could not be journaled, or its recorded answer read (the effect journal's
    /// message, with its code).
    #[error("{0}")]
    Journal(String),
}

/// A model call as its effect records it: the answer, how long it took, and the byte lengths
/// of the pieces of text shown while it streamed (the answer's text is exactly their
/// concatenation; a replay shows them again, with the same ids). Lengths, not the pieces: a
/// long answer is not recorded twice.
#[derive(serde::Serialize, serde::Deserialize)]
struct RecordedCall {
    completion: Completion,
    latency_ns: u64,
    chunk_lens: Vec<u32>,
}

impl RecordedCall {
    /// The pieces of text the call showed, cut from the answer by their lengths (the whole
    /// text as one piece should the lengths not fit it).
    fn chunks(&self) -> Vec<String> {
        let text = self.completion.message.content.as_deref().unwrap_or("");
        let mut out = Vec::with_capacity(self.chunk_lens.len());
        let mut at = 0usize;
        for &len in &self.chunk_lens {
            let end = at.saturating_add(len as usize);
            match text.get(at..end) {
                Some(piece) => out.push(piece.to_string()),
                None => return vec![text.to_string()],
            }
            at = end;
        }
        if at != text.len() {
            return vec![text.to_string()];
        }
        out
    }
}

/// The call's own error out of its effect's, the journal's as [`LlmStepError::Journal`].
fn unjournaled(e: EffectError<LlmStepError>) -> LlmStepError {
    match e {
        EffectError::Failed { error, .. } => error,
        // A replay: the call's own error as it read when recorded.
        EffectError::FailedWhenRecorded { message, .. } => LlmStepError::Journal(message),
        other => LlmStepError::Journal(other.to_string()),
    }
}

/// A finished call: the answer, and the events that record it.
#[derive(Debug, Clone)]
pub struct LlmAnswer {
    /// The whole answer as the client assembled it.
    pub completion: Completion,
    /// The call as the protocol records it; return it from the step (or
    /// [`LlmAnswer::into_stop`]).
    pub event: LLMEvent,
    /// What the call cost, when the model has a price (already shown as a display event).
    pub cost: Option<LLMCostEvent>,
}

/// A finished tool loop ([`Llm::chat_with_tools`]): the last answer, the conversation, and
/// the events that record every model call and every tool call.
#[derive(Debug, Clone)]
pub struct LlmToolAnswer {
    /// The model's last answer (it called no tool).
    pub completion: Completion,
    /// The whole conversation: the request's messages, each assistant message and tool
    /// answer, then the last answer.
    pub messages: Vec<Message>,
    /// One `LLMEvent` per model call, in order; return them from the step.
    pub calls: Vec<LLMEvent>,
    /// One `ToolEvent` per tool call, in order (bad calls included, answered with the
    /// tool's contract); return them from the step.
    pub tools: Vec<ToolEvent>,
}

impl LlmToolAnswer {
    /// The last answer's text.
    pub fn text(&self) -> &str {
        self.completion.message.content.as_deref().unwrap_or("")
    }
}

impl LlmAnswer {
    /// The answer's text (empty when the model only called tools).
    pub fn text(&self) -> &str {
        self.completion.message.content.as_deref().unwrap_or("")
    }

    /// The call's event as the run's end (`LLMStopEvent`: an `LLMEvent` and a `StopEvent`).
    pub fn into_stop(self) -> LLMStopEvent {
        LLMStopEvent(self.event)
    }
}

impl Llm {
    /// A model resource over `client`, with no prices (no cost events).
    pub fn new(client: LlmClient) -> Llm {
        Llm {
            client,
            prices: PriceTable::default(),
            provider: None,
        }
    }

    /// A model resource configured from `OPENAI_BASE_URL`, `OPENAI_API_KEY` and
    /// `OPENAI_MODEL`.
    pub fn from_env() -> Result<Llm, LlmError> {
        Ok(Llm::new(LlmClient::new(LlmConfig::from_env())?))
    }

    /// Prices per model: each call of a priced model shows an `LLMCostEvent`.
    pub fn with_prices(mut self, prices: PriceTable) -> Llm {
        self.prices = prices;
        self
    }

    /// Who serves the model (`openai`, `vllm`, `ollama`…), recorded as the `LLMEvent`'s
    /// provider and system.
    pub fn with_provider(mut self, provider: impl Into<String>) -> Llm {
        self.provider = Some(provider.into());
        self
    }

    /// The client, for calls this type does not wrap (tool loops, whole answers).
    pub fn client(&self) -> &LlmClient {
        &self.client
    }

    /// Sends `request` with a streamed answer: every piece of text is shown as a
    /// `ChunkEvent` of this execution as it arrives, the cost (if priced) as an
    /// `LLMCostEvent`; returns the answer with its `LLMEvent`. The call stops (with
    /// `LLM_CANCELLED`) when the run is cancelled ([`StepCtx::cancellation`]).
    pub async fn chat(
        &self,
        ctx: &StepCtx,
        request: &ChatRequest,
    ) -> Result<LlmAnswer, LlmStepError> {
        self.chat_until(ctx, request, ctx.cancellation()).await
    }

    /// As [`Llm::chat`], ended early (with `LLM_CANCELLED`) when `cancel` is cancelled.
    pub async fn chat_until(
        &self,
        ctx: &StepCtx,
        request: &ChatRequest,
        cancel: CancellationToken,
    ) -> Result<LlmAnswer, LlmStepError> {
        let model = request
            .model
            .as_deref()
            .or(self.client.config().model.as_deref())
            .unwrap_or_default();
        let asked = request.wire_json(model).map_err(|e| {
            LlmStepError::Journal(format!("the request cannot be written as JSON: {e}"))
        })?;
        let called = AtomicBool::new(false);
        let call = ctx
            .effect("llm", &asked, || async {
                called.store(true, Ordering::Relaxed);
                let started = Instant::now();
                let mut stream = self.client.stream(request, cancel).await?;
                let mut chunk_lens = Vec::new();
                let completion = loop {
                    match stream.next().await? {
                        Some(StreamEvent::Text(chunk)) => {
                            if !chunk.is_empty() {
                                chunk_lens.push(chunk.len().min(u32::MAX as usize) as u32);
                                ctx.display_owned(ChunkEvent { chunk }).await?;
                            }
                        }
                        Some(StreamEvent::ToolCall { .. }) => {}
                        Some(StreamEvent::Finished(done)) => break *done,
                        None => {
                            // The stream hands out `Finished` before its end; this is a guard.
                            return Err(LlmError::Truncated {
                                received_bytes: 0,
                                last_event: "(the stream ended without an answer)".to_owned(),
                            }
                            .into());
                        }
                    }
                };
                Ok::<_, LlmStepError>(RecordedCall {
                    completion,
                    latency_ns: started.elapsed().as_nanos().min(u64::MAX as u128) as u64,
                    chunk_lens,
                })
            })
            .await
            .map_err(unjournaled)?;
        if !called.load(Ordering::Relaxed) {
            // Replayed: the chunks are shown again in order, with the ids they had (a chunk
            // the crash kept from the log is logged now, the others once).
            for chunk in call.chunks() {
                ctx.display_owned(ChunkEvent { chunk }).await?;
            }
        }
        let completion = call.completion;
        let event = saap_llm::record::llm_event(
            request,
            self.client.config().model.as_deref(),
            &completion,
            std::time::Duration::from_nanos(call.latency_ns),
            self.provider.as_deref(),
        );
        let cost = match (&event.chat_model_name, &completion.usage) {
            (Some(model), Some(usage)) => self.prices.cost_event(model, usage),
            _ => None,
        };
        if let Some(cost) = &cost {
            ctx.display_owned(cost.clone()).await?;
        }
        // Counted against the run's token and cost budget with the execution's completion.
        if let Some(u) = &completion.usage {
            let tokens = u.total_tokens.max(u.prompt_tokens + u.completion_tokens);
            let spent = cost.as_ref().map_or(0.0, |c| {
                c.prompt_tokens_costs + c.completion_tokens_costs + c.embedding_tokens_costs
            });
            ctx.report_usage(tokens, spent);
        }
        Ok(LlmAnswer {
            completion,
            event,
            cost,
        })
    }

    /// The tool loop inside a step: asks the model with `toolbox`'s tools, runs the tools it
    /// calls (a call with bad arguments or of an unknown tool is answered with the tool's
    /// contract, not failed; results over the toolbox's bound are cut with a marker), answers
    /// them and asks again, at most `max_rounds` model calls ([`DEFAULT_MAX_ROUNDS`] is a
    /// sensible bound). Every round is a [`Llm::chat`]: its text streams out as
    /// `ChunkEvent`s and its cost is shown. Fails with `LLM_TOOL_ROUNDS_EXHAUSTED` when the
    /// model still calls tools after the last round.
    pub async fn chat_with_tools(
        &self,
        ctx: &StepCtx,
        request: &ChatRequest,
        toolbox: &Toolbox,
        max_rounds: u32,
    ) -> Result<LlmToolAnswer, LlmStepError> {
        let cancel = ctx.cancellation();
        let mut request = request.clone();
        request.tools = toolbox.definitions();
        let mut calls = Vec::new();
        let mut tools = Vec::new();
        for _ in 0..max_rounds {
            let answer = self.chat_until(ctx, &request, cancel.clone()).await?;
            calls.push(answer.event);
            let message = answer.completion.message.clone();
            request.messages.push(message.clone());
            if message.tool_calls.is_empty() {
                return Ok(LlmToolAnswer {
                    completion: answer.completion,
                    messages: request.messages,
                    calls,
                    tools,
                });
            }
            for call in &message.tool_calls {
                let execution = ctx
                    .effect("tool", call, || async {
                        Ok::<_, LlmStepError>(toolbox.execute(call, &cancel).await)
                    })
                    .await
                    .map_err(unjournaled)?;
                tools.push(saap_llm::record::tool_event(
                    toolbox.spec(&call.function.name),
                    &execution,
                ));
                request
                    .messages
                    .push(Message::tool_result(&call.id, execution.answer));
            }
        }
        Err(LlmError::ToolRoundsExhausted { rounds: max_rounds }.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(text: &str, chunk_lens: Vec<u32>) -> RecordedCall {
        RecordedCall {
            completion: Completion {
                id: None,
                model: None,
                message: Message::assistant(text),
                finish_reason: Some(FinishReason::Stop),
                usage: None,
            },
            latency_ns: 1,
            chunk_lens,
        }
    }

    #[test]
    fn a_replayed_call_shows_the_pieces_it_streamed_cut_from_its_answer() {
        assert_eq!(
            recorded("Grüezi mitenand", vec![4, 4, 8]).chunks(),
            ["Grü", "ezi ", "mitenand"]
        );
        // Lengths that do not fit the text (a char boundary, a total): the whole text.
        assert_eq!(recorded("Grüezi", vec![3]).chunks(), ["Grüezi"]);
        assert_eq!(recorded("Grüezi", vec![2]).chunks(), ["Grüezi"]);
        assert!(recorded("", vec![]).chunks().is_empty());
    }

    #[test]
    fn a_recorded_call_reads_back_as_written() {
        let call = recorded("hi", vec![2]);
        let json = serde_json::to_value(&call).unwrap_or_default();
        let back: RecordedCall = serde_json::from_value(json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back.completion, call.completion);
        assert_eq!(back.chunk_lens, [2]);
    }
}
