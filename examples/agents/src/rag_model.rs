//! The retrieval agent answering with a language model (issue 20 §6): the same plan, search
//! and rank steps as [`crate::rag`], then an `answer` step that calls the model through
//! [`saap::llm::Llm`] — a resource registered once, shared by every run. The answer streams
//! out as `ChunkEvent`s, the call's price is shown as an `LLMCostEvent`, and the step returns
//! the call's `LLMEvent` with the answer (so the run's trace has an LLM span).
//!
//! ```text
//! UserMessageEvent → plan → SearchRequested ×3 → search ×3 → Retrieved ×3
//!   → rank → ContextReady → answer (model call) → LLMEvent + Answered (stop)
//! ```
//!
//! Which model: the endpoint of `OPENAI_BASE_URL` (with `OPENAI_API_KEY`, `OPENAI_MODEL`)
//! when set — any OpenAI-compatible server: OpenAI, vLLM, llama.cpp's server, Ollama,
//! LiteLLM — else a scripted model behind a real OpenAI-compatible endpoint on loopback
//! ([`saap::llm::scripted`]) that answers from the retrieved context, the same every time.

use crate::rag::{Answered, ContextReady, SOURCES, retrieval};
use saap::llm::scripted::{ScriptedReply, ScriptedRequest, ScriptedServer};
use saap::llm::{ChatRequest, Llm, LlmClient, Message, Price, PriceTable};
use saap::semantic::{LLMCostEvent, LLMEvent};
use saap::{Required, Step, StepCtx, StepError, UserMessageEvent, Workflow};
use std::sync::OnceLock;

/// The scripted model's name.
pub const SCRIPTED_MODEL: &str = "scripted-rag";

/// What the answer step returns: the model call, then the answer.
// Two values once per run: boxing the large one would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(saap::EventUnion, Debug)]
pub enum Answer {
    Call(LLMEvent),
    Done(Answered),
}

/// The model the answer step calls, registered on the workflow: `Err` says why there is none
/// (the step fails with it).
pub struct RagModel(pub Result<Llm, String>);

/// What the scripted model answers: the question, then what the context says.
fn scripted_answer(request: &ScriptedRequest) -> ScriptedReply {
    let prompt = request.last("user").unwrap_or_default();
    let question = prompt
        .lines()
        .find_map(|l| l.strip_prefix("Question: "))
        .unwrap_or("your question");
    let facts: Vec<&str> = prompt
        .lines()
        .filter_map(|l| l.strip_prefix("- "))
        .take(3)
        .collect();
    ScriptedReply::Text(if facts.is_empty() {
        format!("I found nothing about \"{question}\" in the handbook, the FAQ or the tickets.")
    } else {
        format!("About \"{question}\": {}", facts.join(" "))
    })
}

/// The model of `OPENAI_BASE_URL` when set, else the scripted model (started once per
/// process, on loopback), priced so that the demo shows a cost (illustrative prices).
pub fn model_from_env() -> RagModel {
    if std::env::var_os("OPENAI_BASE_URL").is_some_and(|v| !v.is_empty()) {
        return RagModel(Llm::from_env().map_err(|e| e.to_string()));
    }
    static SCRIPTED: OnceLock<Result<ScriptedServer, String>> = OnceLock::new();
    let server = SCRIPTED.get_or_init(|| {
        ScriptedServer::start(SCRIPTED_MODEL, scripted_answer)
            .map_err(|e| format!("the scripted model cannot start on loopback: {e}"))
    });
    RagModel(match server {
        Ok(server) => LlmClient::new(server.config())
            .map(|client| {
                let prices = PriceTable(
                    [(
                        SCRIPTED_MODEL.to_string(),
                        Price {
                            prompt_per_million: 0.15,
                            completion_per_million: 0.60,
                        },
                    )]
                    .into(),
                );
                Llm::new(client)
                    .with_prices(prices)
                    .with_provider("scripted")
            })
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.clone()),
    })
}

/// The prompt: the question and the retrieved context, one fact a line.
fn prompt(question: &str, docs: &[String]) -> String {
    let mut p = format!("Question: {question}\nContext:\n");
    for d in docs {
        p.push_str("- ");
        p.push_str(d);
        p.push('\n');
    }
    p
}

/// The retrieval agent answering with `model`.
pub fn workflow_with(model: RagModel) -> Workflow {
    let built = retrieval(
        Workflow::builder("RagModelAgent")
            .description("Retrieval agent: fan-out to three sources, fan-in, answer from a language model"),
    )
    .event::<LLMCostEvent>()
    .resource(model)
    .step(
        Step::new(
            "answer",
            |(c, q): (Required<ContextReady>, Required<UserMessageEvent>), ctx: StepCtx| async move {
                let model = ctx
                    .resource::<RagModel>()
                    .map_err(|e| StepError::new(e.to_string()))?;
                let llm = model.0.as_ref().map_err(|e| StepError::new(e.clone()))?;
                let request = ChatRequest::new(vec![
                    Message::system("Answer the question from the context only, in one or two sentences."),
                    Message::user(prompt(&q.message, &c.docs)),
                ]);
                let answer = llm
                    .chat(&ctx, &request)
                    .await
                    .map_err(|e| StepError::new(e.to_string()))?;
                let text = answer.text().to_string();
                Ok::<_, StepError>(vec![
                    Answer::Call(answer.event),
                    Answer::Done(Answered {
                        text,
                        sources: SOURCES.iter().map(|s| s.to_string()).collect(),
                    }),
                ])
            },
        )
        .uses_resource::<RagModel>(),
    )
    .build();
    match built {
        Ok(w) => w,
        // The declarations above are static: a failure is a bug in this example.
        Err(e) => panic!("RagModelAgent is invalid: {e}"),
    }
}

/// The retrieval agent answering with the model of the environment ([`model_from_env`]).
pub fn workflow() -> Workflow {
    workflow_with(model_from_env())
}
