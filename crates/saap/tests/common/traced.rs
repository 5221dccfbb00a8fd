//! The traced agent of the trace-export tests (`otel_export.rs`, `otel_phoenix.rs`): a
//! retrieval step, then an answering step that returns a model call (`LLMEvent`), a tool call
//! (`ToolEvent`) and the answer; the message "fail" fails the first step.

use saap::semantic::{LLMCostEvent, LLMEvent, Message, ToolEvent};
use saap::{Required, StepCtx, StepError, UserMessageEvent, agent};

#[derive(saap::Event, serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
pub struct Found {
    pub documents: Vec<String>,
}

#[derive(saap::Event, serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
#[event(parent = saap::StopEvent)]
pub struct Answered {
    pub text: String,
}

/// What the answering step returns: its model call, its tool call, the answer.
#[derive(saap::EventUnion, Debug)]
pub enum Recorded {
    Call(LLMEvent),
    Tool(ToolEvent),
    Answer(Answered),
}

pub struct Traced;

#[agent]
impl Traced {
    #[step]
    async fn retrieve(q: Required<UserMessageEvent>) -> Result<Found, StepError> {
        if q.message == "fail" {
            return Err(StepError::new("the index is offline"));
        }
        Ok(Found {
            documents: vec![format!("about {}", q.message)],
        })
    }

    #[step]
    async fn answer(f: Required<Found>, ctx: StepCtx) -> Result<Vec<Recorded>, StepError> {
        // The call's price, shown as it would be by `Llm::chat` (a display event).
        ctx.display(&LLMCostEvent {
            llm_name: "smol-test".into(),
            prompt_token_count: 7,
            completion_token_count: 2,
            prompt_tokens_costs: 0.0007,
            completion_tokens_costs: 0.0004,
            ..LLMCostEvent::default()
        })
        .await
        .map_err(|e| StepError::new(e.to_string()))?;
        let call = LLMEvent {
            chat_model_name: Some("smol-test".into()),
            system: Some("openai".into()),
            input_messages: Some(vec![Message::text("user", f.documents.join("; "))]),
            output_messages: Some(vec![Message::text("assistant", "Bern.")]),
            token_count_prompt: Some(7),
            token_count_completion: Some(2),
            token_count_total: Some(9),
            finish_reason: Some("stop".into()),
            latency_ms: Some(1.5),
            ..LLMEvent::default()
        };
        let tool = ToolEvent {
            name: Some("weather".into()),
            parameters: serde_json::from_str(r#"{"city":"Bern"}"#).ok(),
            result: Some("sunny".into()),
            ..ToolEvent::default()
        };
        Ok(vec![
            Recorded::Call(call),
            Recorded::Tool(tool),
            Recorded::Answer(Answered {
                text: "Bern.".into(),
            }),
        ])
    }
}
