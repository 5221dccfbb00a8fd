//! The example agents: the happy paths, on the in-memory engine and the embedded one.
#![allow(clippy::unwrap_used)]

use saap::testing::TestRunner;
use saap::{ChunkEvent, Engine, EngineOptions, SqliteBackend, UserMessageEvent};
use saap_examples::approval::{
    self, ApprovalGiven, ApprovalRequested, ApprovalTimedOut, Declined, Executed, Expired,
};
use saap_examples::rag::{self, Answered, Retrieved};
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rag_agent_fans_out_fans_in_and_answers_once() {
    let runner = TestRunner::in_memory(rag::workflow());
    let run = runner
        .start(UserMessageEvent::new("How do I reset my password?"))
        .await
        .unwrap();
    let answer = run.wait_for_event::<Answered>(WAIT).await.unwrap();
    assert!(
        answer.text.contains("Settings > Security"),
        "{}",
        answer.text
    );
    let snap = run.wait_for_end(WAIT).await.unwrap();
    assert_eq!(snap.executions_of("search"), 3);
    assert_eq!(snap.executions_of("rank"), 1);
    assert_eq!(snap.executions_of("answer"), 1);
    assert_eq!(snap.events_of::<Retrieved>().len(), 3);
    assert!(
        snap.events_of::<ChunkEvent>().len() >= 2,
        "the answer is streamed as chunks"
    );
    assert!(!snap.has_exception());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rag_agent_on_the_embedded_engine() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(SqliteBackend::open(dir.path().join("rag.db")).unwrap());
    let (engine, _) = Engine::open(rag::workflow(), backend, EngineOptions::default())
        .await
        .unwrap();
    let run = TestRunner::new(engine.clone())
        .start(UserMessageEvent::new("reset password"))
        .await
        .unwrap();
    run.wait_for_event::<Answered>(WAIT).await.unwrap();
    // Engine::wait_for_end returns once the end is durable; then a crash loses nothing.
    engine.wait_for_end(run.run_id()).await.unwrap();
    let before = run.timeline();
    assert!(
        before.contains("[display]") && before.contains("from x5 answer"),
        "{before}"
    );
    engine.halt();
    let backend = Arc::new(SqliteBackend::open(dir.path().join("rag.db")).unwrap());
    let (engine, rec) = Engine::open(rag::workflow(), backend, EngineOptions::default())
        .await
        .unwrap();
    assert_eq!(rec.resumed_runs, 0);
    let after = engine
        .stored_snapshot(run.run_id())
        .await
        .unwrap()
        .unwrap()
        .timeline();
    assert_eq!(
        before, after,
        "the timeline is rebuilt from the store exactly"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_agent_waits_for_the_human_then_executes() {
    let runner = TestRunner::in_memory(approval::workflow());
    let run = runner
        .start(UserMessageEvent::new("refund order 17"))
        .await
        .unwrap();
    let req = run.wait_for_event::<ApprovalRequested>(WAIT).await.unwrap();
    assert_eq!(req.action, "refund order 17");
    let idle = run.wait_idle(WAIT).await.unwrap();
    assert!(!idle.is_ended());
    assert!(
        idle.waiting_for()
            .contains("step `decide` waits for: required `approval_given`"),
        "{}",
        idle.waiting_for()
    );
    run.send(ApprovalGiven {
        approved: true,
        by: "ana".into(),
    })
    .await
    .unwrap();
    let done = run.wait_for_event::<Executed>(WAIT).await.unwrap();
    assert_eq!(done.approved_by, "ana");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_agent_declines_when_the_human_says_no() {
    let runner = TestRunner::in_memory(approval::workflow());
    let run = runner
        .start(UserMessageEvent::new("delete the database"))
        .await
        .unwrap();
    run.wait_for_event::<ApprovalRequested>(WAIT).await.unwrap();
    run.send(ApprovalGiven {
        approved: false,
        by: "bo".into(),
    })
    .await
    .unwrap();
    run.wait_for_event::<Declined>(WAIT).await.unwrap();
    assert!(run.events_of::<Executed>().is_empty());
}

/// The deadline (issue 21 §9): nobody answers, the engine delivers the timeout the request
/// set, and the run ends as `Expired`; an answer that comes afterwards is kept as evidence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_agent_expires_when_nobody_answers_by_the_deadline() {
    let runner = TestRunner::in_memory(approval::workflow_with_deadline(
        std::time::Duration::from_millis(50),
    ));
    let run = runner
        .start(UserMessageEvent::new("rotate the keys"))
        .await
        .unwrap();
    let expired = run.wait_for_event::<Expired>(WAIT).await.unwrap();
    assert_eq!(expired.action, "rotate the keys");
    assert_eq!(run.events_of::<ApprovalTimedOut>().len(), 1);
    run.send(ApprovalGiven {
        approved: true,
        by: "late".into(),
    })
    .await
    .unwrap();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    assert!(run.events_of::<Executed>().is_empty());
    assert!(
        snap.timeline().contains("after the stop"),
        "{}",
        snap.timeline()
    );
}

/// The retrieval agent answering with a model (issue 20 §6): the scripted model behind a
/// real OpenAI-compatible endpoint on loopback, through `saap::llm::Llm`: the answer comes
/// from the retrieved context, streamed as chunks; the call is recorded as an `LLMEvent` with
/// its token counts and priced as an `LLMCostEvent`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rag_model_agent_streams_the_models_answer_and_records_its_tokens_and_cost() {
    use saap::semantic::{LLMCostEvent, LLMEvent};
    use saap_examples::rag_model;
    let runner = TestRunner::in_memory(rag_model::workflow_with(rag_model::model_from_env()));
    let run = runner
        .start(UserMessageEvent::new("How do I reset my password?"))
        .await
        .unwrap();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    assert!(!snap.has_exception(), "{}", snap.timeline());
    let answer = &snap.events_of::<Answered>()[0];
    assert!(
        answer
            .text
            .starts_with("About \"How do I reset my password?\":"),
        "{}",
        answer.text
    );
    assert!(
        answer.text.contains("Settings > Security"),
        "{}",
        answer.text
    );
    let chunks: Vec<String> = snap
        .events_of::<ChunkEvent>()
        .into_iter()
        .map(|c| c.chunk)
        .collect();
    assert!(chunks.len() > 5, "{chunks:?}");
    assert_eq!(chunks.concat(), answer.text, "the chunks are the answer");

    let calls = snap.events_of::<LLMEvent>();
    assert_eq!(calls.len(), 1);
    let call = &calls[0];
    assert_eq!(
        call.chat_model_name.as_deref(),
        Some(rag_model::SCRIPTED_MODEL)
    );
    let completion = answer.text.split_whitespace().count() as i64;
    assert_eq!(call.token_count_completion, Some(completion));
    let prompt = call.token_count_prompt.unwrap();
    assert!(prompt > 10, "{prompt}");
    assert_eq!(call.token_count_total, Some(prompt + completion));
    assert_eq!(call.finish_reason.as_deref(), Some("stop"));

    let cost = &snap.events_of::<LLMCostEvent>()[0];
    assert_eq!(cost.completion_token_count, completion);
    let expected = prompt as f64 * 0.15e-6 + completion as f64 * 0.60e-6;
    let got = cost.prompt_tokens_costs + cost.completion_tokens_costs;
    assert!((got - expected).abs() < 1e-12, "{got} vs {expected}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rag_model_agent_without_a_model_fails_its_answer_step_and_says_why() {
    use saap_examples::rag_model::{self, RagModel};
    let runner = TestRunner::in_memory(rag_model::workflow_with(RagModel(Err(
        "no model: set OPENAI_BASE_URL".into(),
    ))));
    let run = runner.start(UserMessageEvent::new("reset")).await.unwrap();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    let failed = snap.events_of::<saap::ExceptionEvent>();
    assert_eq!(failed.len(), 1, "{}", snap.timeline());
    assert!(
        failed[0].message.contains("no model: set OPENAI_BASE_URL"),
        "{}",
        failed[0].message
    );
}

/// The tool-using agent (issue 20 §6) on the scripted model: the model calls `weather` for
/// the city in the question, the tool runs inside the step, the model answers from its
/// result; both model calls and the tool call are returned as events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weather_agent_calls_its_tool_inside_the_step_and_records_every_call() {
    use saap::semantic::{LLMEvent, ToolEvent};
    use saap_examples::weather::{self, Forecast};
    let runner = TestRunner::in_memory(weather::workflow().unwrap());
    let run = runner
        .start(UserMessageEvent::new(
            "What is the weather in Zurich today?",
        ))
        .await
        .unwrap();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    assert!(!snap.has_exception(), "{}", snap.timeline());
    let tools = snap.events_of::<ToolEvent>();
    assert_eq!(tools.len(), 1, "{}", snap.timeline());
    assert_eq!(tools[0].name.as_deref(), Some("weather"));
    assert_eq!(
        tools[0].parameters.as_ref().and_then(|p| p.get("city")),
        Some(&serde_json::json!("Zurich"))
    );
    assert!(
        tools[0].json_schema.is_some(),
        "the tool's schema is recorded"
    );
    assert_eq!(
        snap.events_of::<LLMEvent>().len(),
        2,
        "a call with the tool, then the answer"
    );
    assert_eq!(
        snap.events_of::<Forecast>()[0].text,
        "Today's forecast: Zurich: light rain, 17 °C."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weather_agent_answers_a_city_the_tool_does_not_know_from_the_tools_error() {
    use saap::semantic::ToolEvent;
    use saap_examples::weather::{self, Forecast};
    let runner = TestRunner::in_memory(weather::workflow().unwrap());
    let run = runner
        .start(UserMessageEvent::new("weather in Paris?"))
        .await
        .unwrap();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    assert!(!snap.has_exception(), "{}", snap.timeline());
    let tool = &snap.events_of::<ToolEvent>()[0];
    assert_eq!(tool.is_error, Some(true));
    let answer = &snap.events_of::<Forecast>()[0].text;
    assert!(answer.contains("no forecast for `paris`"), "{answer}");
}
