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
//! What a crash does today: the journal records a completed execution's outputs, so a step
//! that finished is never run again; a step that crashed mid-call runs again and calls the
//! model again (its chunks shown before the crash are not shown twice). Journaled effects,
//! which would replay a finished call instead, come with durable runs (DESIGN §8).
//!
//! What this module must not do: keep a run's state on the [`Llm`] (it is shared by every run),
//! log or record the API key (the client never hands it out; events carry the sampling
//! parameters only), or decide anything about dispatch.

use crate::context::{ContextError, StepCtx};
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
        let started = Instant::now();
        let mut stream = self.client.stream(request, cancel).await?;
        let completion = loop {
            match stream.next().await? {
                Some(StreamEvent::Text(chunk)) => {
                    if !chunk.is_empty() {
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
        let event = saap_llm::record::llm_event(
            request,
            self.client.config().model.as_deref(),
            &completion,
            started.elapsed(),
            self.provider.as_deref(),
        );
        let cost = match (&event.chat_model_name, &completion.usage) {
            (Some(model), Some(usage)) => self.prices.cost_event(model, usage),
            _ => None,
        };
        if let Some(cost) = &cost {
            ctx.display_owned(cost.clone()).await?;
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
                let execution = toolbox.execute(call, &cancel).await;
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
