//! A model call inside a step (issue 20 §2), against an in-process OpenAI-compatible server on
//! loopback: the `Llm` resource is registered once and taken as `Res<Llm>`; the streamed
//! answer is shown as one `ChunkEvent` per text delta of the execution, the call's cost as an
//! `LLMCostEvent`, and the step returns the call's `LLMEvent` (or ends the run with
//! `LLMStopEvent`) with the model, messages, token counts and finish reason; a server error
//! fails the step with the client's code; the API key reaches the server and nothing else.
#![allow(clippy::unwrap_used)]

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Response, StatusCode};
use axum::routing::post;
use saap::llm::{ChatRequest, Llm, LlmClient, LlmConfig, Message, Price, PriceTable};
use saap::semantic::{LLMCostEvent, LLMEvent, LLMStopEvent};
use saap::testing::TestRunner;
use saap::{
    Agent, ChunkEvent, ExceptionEvent, Required, Res, StepCtx, StepError, UserMessageEvent, agent,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);
const KEY: &str = "sk-test-do-not-leak-1234";

/// What the server saw: (scenario, Authorization header, request body) per request.
type Seen = Arc<Mutex<Vec<(String, String, serde_json::Value)>>>;

async fn handle(
    Path(scenario): Path<String>,
    State(seen): State<Seen>,
    headers: HeaderMap,
    body: String,
) -> Response<Body> {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let request: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    seen.lock().unwrap().push((scenario.clone(), auth, request));
    match scenario.as_str() {
        "stream" => {
            let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
                serde_json::json!({"id": "c1", "model": "tiny-model",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            };
            let events = [
                chunk(
                    serde_json::json!({"role": "assistant", "content": ""}),
                    serde_json::Value::Null,
                ),
                chunk(
                    serde_json::json!({"content": "Bern "}),
                    serde_json::Value::Null,
                ),
                chunk(
                    serde_json::json!({"content": "is the "}),
                    serde_json::Value::Null,
                ),
                chunk(
                    serde_json::json!({"content": "capital."}),
                    serde_json::Value::Null,
                ),
                // Servers such as vLLM send an empty finish reason before the real one.
                chunk(serde_json::json!({}), serde_json::json!("")),
                chunk(serde_json::json!({}), serde_json::json!("stop")),
                serde_json::json!({"id": "c1", "model": "tiny-model", "choices": [],
                    "usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}}),
            ];
            let mut text: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
            text.push_str("data: [DONE]\n\n");
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from(text))
                .unwrap()
        }
        _ => Response::builder()
            .status(StatusCode::BAD_REQUEST)
            .header("content-type", "application/json")
            .body(Body::from(
                serde_json::json!({"error": {"message": "model `nope` does not exist"}})
                    .to_string(),
            ))
            .unwrap(),
    }
}

async fn server() -> (u16, Seen) {
    let seen = Seen::default();
    let app = Router::new()
        .route("/{scenario}/v1/chat/completions", post(handle))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (port, seen)
}

fn llm(port: u16, scenario: &str) -> Llm {
    let config = LlmConfig::new(format!("http://127.0.0.1:{port}/{scenario}/v1"))
        .with_api_key(KEY)
        .with_model("tiny-model");
    let mut prices = PriceTable::default();
    prices.0.insert(
        "tiny-model".into(),
        Price {
            prompt_per_million: 1.0,
            completion_per_million: 2.0,
        },
    );
    Llm::new(LlmClient::new(config).unwrap())
        .with_prices(prices)
        .with_provider("vllm")
}

struct Assistant;

#[agent]
impl Assistant {
    #[step]
    async fn answer(
        q: Required<UserMessageEvent>,
        llm: Res<Llm>,
        ctx: StepCtx,
    ) -> Result<LLMStopEvent, StepError> {
        let request = ChatRequest::new(vec![Message::user(q.message.clone())]);
        let answer = llm.chat(&ctx, &request).await?;
        assert_eq!(answer.text(), "Bern is the capital.");
        Ok(answer.into_stop())
    }
}

#[tokio::test]
async fn a_streamed_answer_is_shown_chunk_by_chunk_and_recorded_as_llm_events() {
    let (port, seen) = server().await;
    let workflow = Assistant::workflow()
        .unwrap()
        .with_resource(llm(port, "stream"));
    let run = TestRunner::in_memory(workflow)
        .run(UserMessageEvent {
            message: "What is the capital of Switzerland?".into(),
        })
        .await
        .unwrap();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    assert!(!snap.has_exception(), "{}", snap.timeline());

    let chunks: Vec<String> = snap
        .events_of::<ChunkEvent>()
        .into_iter()
        .map(|c| c.chunk)
        .collect();
    assert_eq!(chunks, ["Bern ", "is the ", "capital."]);

    let stop = snap.events_of::<LLMStopEvent>();
    assert_eq!(stop.len(), 1, "{}", snap.timeline());
    let call: &LLMEvent = &stop[0].0;
    assert_eq!(call.chat_model_name.as_deref(), Some("tiny-model"));
    assert_eq!(call.provider.as_deref(), Some("vllm"));
    assert_eq!(
        (
            call.token_count_prompt,
            call.token_count_completion,
            call.token_count_total
        ),
        (Some(12), Some(4), Some(16))
    );
    assert_eq!(call.finish_reason.as_deref(), Some("stop"));
    assert!(call.latency_ms.is_some_and(|ms| ms >= 0.0));
    let input = call.input_messages.as_ref().unwrap();
    assert_eq!(input.len(), 1);
    assert_eq!(input[0].role, "user");
    let output = call.output_messages.as_ref().unwrap();
    assert_eq!(output[0].role, "assistant");

    let cost: Vec<LLMCostEvent> = snap.events_of::<LLMCostEvent>();
    assert_eq!(cost.len(), 1);
    assert_eq!(cost[0].llm_name, "tiny-model");
    assert_eq!(
        (cost[0].prompt_token_count, cost[0].completion_token_count),
        (12, 4)
    );
    assert!((cost[0].prompt_tokens_costs - 12.0e-6).abs() < 1e-12);
    assert!((cost[0].completion_tokens_costs - 8.0e-6).abs() < 1e-12);

    // The key went to the server, and into nothing the run recorded.
    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 1, "one call, no retry");
    assert_eq!(requests[0].1, format!("Bearer {KEY}"));
    assert_eq!(requests[0].2["stream"], serde_json::json!(true));
    let recorded = format!("{}{:?}", snap.timeline(), snap.events());
    assert!(!recorded.contains(KEY), "the key leaked into the run");
}

struct Failing;

#[agent]
impl Failing {
    #[step]
    async fn answer(
        q: Required<UserMessageEvent>,
        llm: Res<Llm>,
        ctx: StepCtx,
    ) -> Result<LLMEvent, StepError> {
        let request = ChatRequest::new(vec![Message::user(q.message.clone())]);
        Ok(llm.chat(&ctx, &request).await?.event)
    }
}

#[tokio::test]
async fn a_refused_call_fails_the_step_with_the_servers_reason() {
    let (port, _seen) = server().await;
    let workflow = Failing::workflow()
        .unwrap()
        .with_resource(llm(port, "refuse"));
    let run = TestRunner::in_memory(workflow)
        .run(UserMessageEvent {
            message: "hi".into(),
        })
        .await
        .unwrap();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    let failed = snap.events_of::<ExceptionEvent>();
    assert_eq!(failed.len(), 1, "{}", snap.timeline());
    assert!(
        failed[0].message.contains("does not exist") && !failed[0].message.contains(KEY),
        "{}",
        failed[0].message
    );
    assert!(snap.events_of::<ChunkEvent>().is_empty());
}

#[test]
fn the_llm_resource_does_not_show_its_key() {
    let shown = format!("{:?}", llm(1, "stream"));
    assert!(
        !shown.contains(KEY) && shown.contains("tiny-model"),
        "{shown}"
    );
}
