//! A model call inside a step (issue 20 §2), against an in-process OpenAI-compatible server on
//! loopback: the `Llm` resource is registered once and taken as `Res<Llm>`; the streamed
//! answer is shown as one `ChunkEvent` per text delta of the execution, the call's cost as an
//! `LLMCostEvent`, and the step returns the call's `LLMEvent` (or ends the run with
//! `LLMStopEvent`) with the model, messages, token counts and finish reason; a server error
//! fails the step with the client's code; the API key reaches the server and nothing else.
//! The tool loop inside a step (`chat_with_tools`, a `Toolbox` resource of typed tools): a call
//! with a wrong argument (split across chunks) is answered with the tool's contract and made
//! again, every model call and tool call is returned as `LLMEvent` / `ToolEvent`, the last
//! answer streams as chunks; a loop out of rounds fails the step and says so.
#![allow(clippy::unwrap_used)]

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Response, StatusCode};
use axum::routing::post;
use saap::llm::{
    ChatRequest, Llm, LlmClient, LlmConfig, Message, Price, PriceTable, Toolbox, typed_tool,
};
use saap::semantic::{LLMCostEvent, LLMEvent, LLMStopEvent, ToolEvent};
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
    seen.lock()
        .unwrap()
        .push((scenario.clone(), auth, request.clone()));
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
        "tools" => {
            // Round 1: a call with a wrong argument; round 2: the call made right; round 3:
            // the answer. Which round it is: how many tool answers the request carries.
            let answered = request["messages"]
                .as_array()
                .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
            let delta = |d: serde_json::Value, finish: serde_json::Value| {
                serde_json::json!({"id": "t", "model": "tiny-model",
                    "choices": [{"index": 0, "delta": d, "finish_reason": finish}]})
            };
            let call = |args: [&str; 2]| {
                vec![
                    delta(
                        serde_json::json!({"tool_calls": [{"index": 0, "id": format!("call_{answered}"), "type": "function",
                            "function": {"name": "weather", "arguments": args[0]}}]}),
                        serde_json::Value::Null,
                    ),
                    // The arguments arrive split across chunks.
                    delta(
                        serde_json::json!({"tool_calls": [{"index": 0, "function": {"arguments": args[1]}}]}),
                        serde_json::Value::Null,
                    ),
                    delta(serde_json::json!({}), serde_json::json!("tool_calls")),
                ]
            };
            let events = match answered {
                0 => call(["{\"town\": ", "\"Bern\"}"]),
                1 => call(["{\"city\": ", "\"Bern\"}"]),
                _ => vec![
                    delta(
                        serde_json::json!({"content": "Sunny "}),
                        serde_json::Value::Null,
                    ),
                    delta(
                        serde_json::json!({"content": "in Bern."}),
                        serde_json::json!("stop"),
                    ),
                ],
            };
            let text: String = events
                .iter()
                .map(|e| format!("data: {e}\n\n"))
                .chain(std::iter::once("data: [DONE]\n\n".to_string()))
                .collect();
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

/// The arguments of the `weather` tool (its JSON Schema is generated from this type).
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct WeatherArgs {
    /// The city to look up.
    city: String,
}

/// Runs `workflow` (given the model of scenario `tools` and the toolbox) on one question, to
/// its end.
async fn ask_weather(workflow: saap::Workflow, port: u16) -> saap::RunSnapshot {
    let workflow = workflow
        .with_resource(llm(port, "tools"))
        .with_resource(toolbox());
    let run = TestRunner::in_memory(workflow)
        .run(UserMessageEvent {
            message: "Weather in Bern?".into(),
        })
        .await
        .unwrap();
    run.wait_for_end(WAIT).await.unwrap()
}

fn toolbox() -> Toolbox {
    Toolbox::new().with(typed_tool(
        "weather",
        "Today's weather in a city",
        |a: WeatherArgs| async move { Ok::<_, String>(format!("sunny in {}", a.city)) },
    ))
}

/// Asks with the `weather` tool, at most 3 model calls; returns every call and tool call,
/// then the answer.
struct ToolUser;

#[agent]
impl ToolUser {
    #[step]
    async fn answer(
        q: Required<UserMessageEvent>,
        llm: Res<Llm>,
        tools: Res<Toolbox>,
        ctx: StepCtx,
    ) -> Result<Vec<Recorded>, StepError> {
        ask_with_tools(&q, &llm, &tools, &ctx, 3).await
    }
}

/// The tool loop with at most `rounds` model calls; every model call, every tool call, then
/// the answer.
async fn ask_with_tools(
    q: &UserMessageEvent,
    llm: &Llm,
    tools: &Toolbox,
    ctx: &StepCtx,
    rounds: u32,
) -> Result<Vec<Recorded>, StepError> {
    let request = ChatRequest::new(vec![Message::user(q.message.clone())]);
    let done = llm.chat_with_tools(ctx, &request, tools, rounds).await?;
    let text = done.text().to_string();
    let mut out: Vec<Recorded> = done.calls.into_iter().map(Recorded::Call).collect();
    out.extend(done.tools.into_iter().map(Recorded::Tool));
    out.push(Recorded::Answer(Answered { text }));
    Ok(out)
}

/// What the tool-using step returns: every model call, every tool call, the answer.
#[derive(saap::EventUnion, Debug)]
enum Recorded {
    Call(LLMEvent),
    Tool(ToolEvent),
    Answer(Answered),
}

/// The answer; ends the run (returned last, with the calls that led to it).
#[derive(saap::Event, serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
#[event(parent = StopEvent)]
struct Answered {
    text: String,
}

#[tokio::test]
async fn a_tool_loop_inside_a_step_answers_a_bad_call_with_the_contract_and_records_every_call() {
    let (port, seen) = server().await;
    let snap = ask_weather(ToolUser::workflow().unwrap(), port).await;
    assert!(!snap.has_exception(), "{}", snap.timeline());
    assert_eq!(
        snap.events_of::<Answered>(),
        [Answered {
            text: "Sunny in Bern.".into()
        }]
    );
    // Three model calls, each recorded; the last one's input is the whole conversation.
    let calls = snap.events_of::<LLMEvent>();
    assert_eq!(calls.len(), 3, "{}", snap.timeline());
    assert_eq!(calls[2].input_messages.as_ref().unwrap().len(), 5);
    assert_eq!(calls[0].finish_reason.as_deref(), Some("tool_calls"));
    // Two tool calls: the bad one answered with the tool's contract, then the good one.
    let tools = snap.events_of::<ToolEvent>();
    assert_eq!(tools.len(), 2, "{}", snap.timeline());
    assert_eq!(tools[0].is_error, Some(true));
    let contract = tools[0].result.clone().unwrap_or_default();
    assert!(
        contract.contains("weather") && contract.contains("city"),
        "the bad call is answered with the tool's contract: {contract}"
    );
    assert_eq!(tools[1].is_error, Some(false));
    assert_eq!(tools[1].result.as_deref(), Some("sunny in Bern"));
    assert_eq!(
        tools[1].parameters.as_ref().unwrap()["city"],
        serde_json::json!("Bern")
    );
    // Only the last round had text: it streamed as chunks.
    let chunks: Vec<String> = snap
        .events_of::<ChunkEvent>()
        .into_iter()
        .map(|c| c.chunk)
        .collect();
    assert_eq!(chunks, ["Sunny ", "in Bern."]);
    // The model saw the tool's answers: the third request carries both.
    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].2["tools"][0]["function"]["name"], "weather");
}

/// As `ToolUser`, with at most 2 model calls: one too few for the scripted conversation.
struct ShortToolUser;

#[agent]
impl ShortToolUser {
    #[step]
    async fn answer(
        q: Required<UserMessageEvent>,
        llm: Res<Llm>,
        tools: Res<Toolbox>,
        ctx: StepCtx,
    ) -> Result<Vec<Recorded>, StepError> {
        ask_with_tools(&q, &llm, &tools, &ctx, 2).await
    }
}

#[tokio::test]
async fn a_tool_loop_out_of_rounds_fails_the_step_and_says_so() {
    let (port, _seen) = server().await;
    let snap = ask_weather(ShortToolUser::workflow().unwrap(), port).await;
    let failed = snap.events_of::<ExceptionEvent>();
    assert_eq!(failed.len(), 1, "{}", snap.timeline());
    assert!(
        failed[0]
            .message
            .contains("the model still called tools after 2 rounds"),
        "{}",
        failed[0].message
    );
}

#[test]
fn the_llm_resource_does_not_show_its_key() {
    let shown = format!("{:?}", llm(1, "stream"));
    assert!(
        !shown.contains(KEY) && shown.contains("tiny-model"),
        "{shown}"
    );
}

/// The tool loop of `ToolUser` as a builder step that, on its first attempt, signals
/// `entered` once the loop is done and then never returns (the crash comes first).
fn journaled_tool_user(entered: Option<Arc<tokio::sync::Semaphore>>) -> saap::Workflow {
    saap::Workflow::builder("JournaledToolUser")
        .step(
            saap::Step::new(
                "answer",
                move |q: Required<UserMessageEvent>, ctx: StepCtx| {
                    let entered = entered.clone();
                    async move {
                        let llm = ctx.resource::<Llm>()?;
                        let tools = ctx.resource::<Toolbox>()?;
                        let out = ask_with_tools(&q, &llm, &tools, &ctx, 3).await?;
                        if let Some(entered) = entered {
                            entered.add_permits(1);
                            std::future::pending::<()>().await;
                        }
                        Ok::<_, StepError>(out)
                    }
                },
            )
            .uses_resource::<Llm>()
            .uses_resource::<Toolbox>(),
        )
        .build()
        .unwrap()
}

/// Issue 21 §6 on the model path: every model call and tool call of a step is journaled, so
/// the step re-run after a crash gets them back — the model is not asked again, the tool not
/// run again, the chunks not shown twice — and returns the same events.
#[test]
fn a_tool_loop_re_run_after_a_crash_calls_neither_the_model_nor_the_tool_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("llm.db");
    let tool_runs = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counted = {
        let tool_runs = tool_runs.clone();
        move || {
            let tool_runs = tool_runs.clone();
            Toolbox::new().with(typed_tool(
                "weather",
                "Today's weather in a city",
                move |a: WeatherArgs| {
                    tool_runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    async move { Ok::<_, String>(format!("sunny in {}", a.city)) }
                },
            ))
        }
    };
    let rt = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    };
    let server_rt = rt();
    let (port, seen) = server_rt.block_on(server());
    let open = |entered| {
        let wf = journaled_tool_user(entered)
            .with_resource(llm(port, "tools"))
            .with_resource(counted());
        let path = path.clone();
        async move {
            let backend = Arc::new(saap::SqliteBackend::open(&path).unwrap());
            saap::Engine::open(wf, backend, saap::EngineOptions::default())
                .await
                .unwrap()
        }
    };
    let first = rt();
    let run_id = first.block_on(async {
        let entered = Arc::new(tokio::sync::Semaphore::new(0));
        let (engine, _) = open(Some(entered.clone())).await;
        let run = TestRunner::new(engine.clone())
            .start(UserMessageEvent::new("Weather in Bern?"))
            .await
            .unwrap();
        let _in = entered.acquire().await.unwrap();
        engine.halt();
        run.run_id().to_string()
    });
    drop(first);
    assert_eq!(seen.lock().unwrap().len(), 3);
    let tools_before = tool_runs.load(std::sync::atomic::Ordering::SeqCst);
    assert!(tools_before >= 1, "the good call ran the tool");

    let second = rt();
    second.block_on(async {
        let (engine, rec) = open(None).await;
        assert_eq!(rec.retried_executions, 1, "{rec:?}");
        let snap = TestRunner::new(engine.clone())
            .attach(&run_id)
            .unwrap()
            .wait_for_end(WAIT)
            .await
            .unwrap();
        assert!(!snap.has_exception(), "{}", snap.timeline());
        assert_eq!(snap.events_of::<LLMEvent>().len(), 3);
        assert_eq!(snap.events_of::<ToolEvent>().len(), 2);
        let chunks: Vec<String> = snap
            .events_of::<ChunkEvent>()
            .into_iter()
            .map(|c| c.chunk)
            .collect();
        assert_eq!(chunks, ["Sunny ", "in Bern."], "shown once each");
        let effects = engine.effects(&run_id).await.unwrap();
        let names: Vec<&str> = effects.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["llm", "tool", "llm", "tool", "llm"], "{effects:?}");
        assert!(effects.iter().all(|e| e.attempt == 1));
    });
    assert_eq!(
        seen.lock().unwrap().len(),
        3,
        "the model was not asked again"
    );
    assert_eq!(
        tool_runs.load(std::sync::atomic::Ordering::SeqCst),
        tools_before,
        "the tool did not run again"
    );
}

struct Metered;

#[agent]
impl Metered {
    #[step]
    async fn ask(
        q: Required<UserMessageEvent>,
        llm: Res<Llm>,
        ctx: StepCtx,
    ) -> Result<LLMEvent, StepError> {
        let request = ChatRequest::new(vec![Message::user(q.message.clone())]);
        Ok(llm.chat(&ctx, &request).await?.event)
    }

    #[step]
    async fn done(_call: Required<LLMEvent>) -> Result<saap::StopEvent, StepError> {
        Ok(saap::StopEvent {})
    }
}

/// A model call counts against the run's token and cost budget: once the call's 16 tokens
/// pass a budget of 10, what its step's completion starts waits for a resume.
#[tokio::test]
async fn a_model_call_spends_the_runs_token_budget() {
    let (port, _) = server().await;
    let workflow = Metered::workflow()
        .unwrap()
        .with_resource(llm(port, "stream"));
    let opts = saap::EngineOptions {
        run_budget: saap::RunBudget {
            max_tokens: Some(10),
            max_cost: Some(1.0),
            ..saap::RunBudget::default()
        },
        ..saap::EngineOptions::default()
    };
    let engine = saap::Engine::new(workflow, Arc::new(saap::MemoryBackend::new()), opts);
    let run = TestRunner::new(engine)
        .start(UserMessageEvent::new("What is the capital of Switzerland?"))
        .await
        .unwrap();
    let snap = run.wait_idle(WAIT).await.unwrap();
    assert_eq!(run.status(), "waiting_budget", "{}", snap.timeline());
    let b = snap.run.budget().unwrap();
    // 12 prompt + 4 completion tokens, priced 12e-6 + 8e-6.
    assert_eq!(b.tokens.used, 16);
    assert_eq!(b.cost_micros.used, 20);
    assert_eq!(run.executions_of("done"), 1, "started on record");
    run.resume(saap::Raise {
        tokens: Some(100),
        ..saap::Raise::default()
    })
    .await
    .unwrap();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    assert!(snap.has_stop(), "{}", snap.timeline());
}
