//! Tests of `run_spans`: every attribute of the run and execution spans, one child per
//! semantic kind, costs, timing, failures.

use super::*;
use serde_json::json;

const RUN: &str = "65f1a2b3c4d5e6f708192a3b";
const MS: u64 = 1_000_000;

fn event(name: &str, fields: Value) -> EventData {
    EventData {
        name: name.into(),
        id: String::new(),
        fields,
    }
}

fn run(end_event: Option<EventData>, failed: bool) -> RunFacts {
    RunFacts {
        run_id: RUN.into(),
        thread_id: "thread-7".into(),
        agent: "QaAgent".into(),
        start_unix_nano: 1_000 * MS,
        end_unix_nano: 2_000 * MS,
        start_event: Some(event("QaStartEvent", json!({"question": "2+2?"}))),
        end_event,
        failed,
    }
}

fn execution(outputs: Vec<EventData>) -> ExecutionFacts {
    ExecutionFacts {
        run_id: RUN.into(),
        thread_id: "thread-7".into(),
        step: "answer".into(),
        execution: 3,
        attempt: 1,
        start_unix_nano: 1_100 * MS,
        end_unix_nano: 1_500 * MS,
        inputs: vec![event("QaStartEvent", json!({"question": "2+2?"}))],
        outputs,
        shown: Vec::new(),
        error: None,
    }
}

fn llm_fields() -> Value {
    json!({
        "input_messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is 2+2?"}
        ],
        "output_messages": [{"role": "assistant", "content": "4"}],
        "chat_model_name": "gpt-4o-mini",
        "provider": "openai",
        "token_count_prompt": 12,
        "token_count_completion": 1,
        "token_count_total": 13,
        "latency_ms": 250.0
    })
}

fn int(a: &Attributes, key: &str) -> Option<i64> {
    match a.get(key) {
        Some(AttributeValue::Int(n)) => Some(*n),
        _ => None,
    }
}

fn double(a: &Attributes, key: &str) -> Option<f64> {
    match a.get(key) {
        Some(AttributeValue::Double(n)) => Some(*n),
        _ => None,
    }
}

fn json_of(a: &Attributes, key: &str) -> Value {
    serde_json::from_str(a.get_str(key).expect(key)).expect("JSON text")
}

#[test]
fn the_run_span_of_a_live_run() {
    let span = run_span(&run(None, false));
    assert_eq!(span.trace_id, TraceId::of_run(RUN));
    assert_eq!(span.span_id, SpanId::of_run(RUN));
    assert_eq!(span.parent_span_id, None);
    assert_eq!(span.name, "QaAgent");
    assert_eq!(
        (span.start_unix_nano, span.end_unix_nano),
        (1_000 * MS, 2_000 * MS)
    );
    assert_eq!(span.status, SpanStatus::Unset);
    let a = &span.attributes;
    assert_eq!(a.get_str("openinference.span.kind"), Some("AGENT"));
    assert_eq!(a.get_str("session.id"), Some("thread-7"));
    assert_eq!(a.get_str("saap.run_id"), Some(RUN));
    assert_eq!(a.get_str("saap.thread_id"), Some("thread-7"));
    assert_eq!(a.get_str("saap.agent"), Some("QaAgent"));
    assert_eq!(
        json_of(a, "input.value"),
        json!({"_event_name": "QaStartEvent", "question": "2+2?"})
    );
    // `_event_name` comes first, as in the wire form.
    assert!(
        a.get_str("input.value")
            .expect("input")
            .starts_with(r#"{"_event_name""#)
    );
    assert_eq!(a.get_str("input.mime_type"), Some("application/json"));
    assert_eq!(a.get("output.value"), None);
}

#[test]
fn the_run_span_of_a_finished_run() {
    let stop = event("QaStopEvent", json!({"answer": "4"}));
    let span = run_span(&run(Some(stop), false));
    assert_eq!(span.status, SpanStatus::Ok);
    assert_eq!(
        json_of(&span.attributes, "output.value"),
        json!({"_event_name": "QaStopEvent", "answer": "4"})
    );
    assert_eq!(
        span.attributes.get_str("output.mime_type"),
        Some("application/json")
    );
}

#[test]
fn the_run_span_of_a_failed_run_says_why() {
    let failure = event(
        "ExceptionEvent",
        json!({"message": "model timed out", "trace": "…"}),
    );
    let span = run_span(&run(Some(failure), true));
    assert_eq!(span.status, SpanStatus::Error("model timed out".into()));

    let failure = event("StepFailedEvent", json!({"error": {"code": 7}}));
    let span = run_span(&run(Some(failure), true));
    assert_eq!(span.status, SpanStatus::Error(r#"{"code":7}"#.into()));

    let failure = event("OddEvent", json!({"detail": "x"}));
    let span = run_span(&run(Some(failure), true));
    assert_eq!(
        span.status,
        SpanStatus::Error(r#"{"_event_name":"OddEvent","detail":"x"}"#.into())
    );

    let span = run_span(&run(None, true));
    assert!(matches!(span.status, SpanStatus::Error(_)));
}

#[test]
fn the_execution_span() {
    let spans = execution_spans(&execution(vec![event("AnswerEvent", json!({"text": "4"}))]));
    assert_eq!(spans.len(), 1, "a plain output makes no child");
    let span = &spans[0];
    assert_eq!(span.trace_id, TraceId::of_run(RUN));
    assert_eq!(span.span_id, SpanId::of_execution(RUN, 3, 1));
    assert_eq!(span.parent_span_id, Some(SpanId::of_run(RUN)));
    assert_eq!(span.name, "answer");
    assert_eq!(
        (span.start_unix_nano, span.end_unix_nano),
        (1_100 * MS, 1_500 * MS)
    );
    assert_eq!(span.status, SpanStatus::Ok);
    let a = &span.attributes;
    assert_eq!(a.get_str("openinference.span.kind"), Some("CHAIN"));
    assert_eq!(a.get_str("session.id"), Some("thread-7"));
    assert_eq!(a.get_str("saap.run_id"), Some(RUN));
    assert_eq!(a.get_str("saap.step"), Some("answer"));
    assert_eq!(int(a, "saap.execution"), Some(3));
    assert_eq!(int(a, "saap.attempt"), Some(1));
    assert_eq!(
        json_of(a, "input.value"),
        json!([{"_event_name": "QaStartEvent", "question": "2+2?"}])
    );
    assert_eq!(
        json_of(a, "output.value"),
        json!([{"_event_name": "AnswerEvent", "text": "4"}])
    );
    assert_eq!(a.get_str("input.mime_type"), Some("application/json"));
    assert_eq!(a.get_str("output.mime_type"), Some("application/json"));
}

#[test]
fn a_failed_execution_has_error_status() {
    let mut x = execution(vec![]);
    x.error = Some("step raised ValueError: bad input".into());
    let spans = execution_spans(&x);
    assert_eq!(
        spans[0].status,
        SpanStatus::Error("step raised ValueError: bad input".into())
    );
    assert_eq!(json_of(&spans[0].attributes, "output.value"), json!([]));
}

#[test]
fn an_llm_output_makes_an_llm_child_span() {
    let mut llm = event("LLMEvent", llm_fields());
    llm.id = "65f1a2b3c4d5e6f708192a3c".into();
    let spans = execution_spans(&execution(vec![event("Note", json!({})), llm]));
    assert_eq!(spans.len(), 2);
    let exec = &spans[0];
    let child = &spans[1];
    assert_eq!(child.trace_id, exec.trace_id);
    assert_eq!(child.parent_span_id, Some(exec.span_id));
    assert_eq!(
        child.span_id,
        SpanId::child(exec.span_id, 1),
        "id by output index"
    );
    assert_eq!(child.name, "gpt-4o-mini");
    assert_eq!(child.status, SpanStatus::Ok);
    // 250 ms from the execution's start.
    assert_eq!(child.start_unix_nano, 1_100 * MS);
    assert_eq!(child.end_unix_nano, 1_350 * MS);
    let a = &child.attributes;
    assert_eq!(a.get_str("openinference.span.kind"), Some("LLM"));
    assert_eq!(a.get_str("session.id"), Some("thread-7"));
    assert_eq!(a.get_str("llm.model_name"), Some("gpt-4o-mini"));
    assert_eq!(int(a, "llm.token_count.prompt"), Some(12));
    assert_eq!(int(a, "llm.token_count.completion"), Some(1));
    assert_eq!(int(a, "llm.token_count.total"), Some(13));
    assert_eq!(
        a.get_str("llm.input_messages.0.message.role"),
        Some("system")
    );
    assert_eq!(
        a.get_str("llm.input_messages.1.message.content"),
        Some("What is 2+2?")
    );
    assert_eq!(
        a.get_str("llm.output_messages.0.message.role"),
        Some("assistant")
    );
    assert_eq!(a.get_str("output.value"), Some("4"));
    assert_eq!(a.get_str("gen_ai.operation.name"), Some("chat"));
    assert_eq!(a.get_str("saap.event_name"), Some("LLMEvent"));
    assert_eq!(a.get_str("saap.event_id"), Some("65f1a2b3c4d5e6f708192a3c"));
}

#[test]
fn children_are_laid_out_one_after_another_and_clamped() {
    let mut second = llm_fields();
    second["latency_ms"] = json!(10_000.0);
    let spans = execution_spans(&execution(vec![
        event("LLMEvent", llm_fields()),
        event("ToolEvent", json!({"name": "add"})),
        event("LLMEvent", second),
        event("GuardEvent", json!({})),
    ]));
    let times: Vec<(u64, u64)> = spans[1..]
        .iter()
        .map(|s| (s.start_unix_nano / MS, s.end_unix_nano / MS))
        .collect();
    assert_eq!(
        times,
        [
            (1_100, 1_350),
            (1_350, 1_350),
            (1_350, 1_500),
            (1_500, 1_500)
        ]
    );
}

#[test]
fn a_tool_output_makes_a_tool_child_span_and_a_failed_call_is_an_error() {
    let spans = execution_spans(&execution(vec![
        event(
            "ToolEvent",
            json!({"tool_call_id": "call_1", "name": "add", "parameters": {"a": 1, "b": 2}, "result": "3"}),
        ),
        event(
            "ToolEvent",
            json!({"name": "divide", "parameters": {"a": 1, "b": 0}, "result": "division by zero", "is_error": true}),
        ),
    ]));
    assert_eq!(spans.len(), 3);
    let ok = &spans[1];
    assert_eq!(ok.name, "add");
    assert_eq!(ok.status, SpanStatus::Ok);
    assert_eq!(
        ok.attributes.get_str("openinference.span.kind"),
        Some("TOOL")
    );
    assert_eq!(ok.attributes.get_str("tool.name"), Some("add"));
    assert_eq!(
        json_of(&ok.attributes, "tool.parameters"),
        json!({"a": 1, "b": 2})
    );
    assert_eq!(ok.attributes.get_str("output.value"), Some("3"));
    let failed = &spans[2];
    assert_eq!(failed.name, "divide");
    assert_eq!(failed.status, SpanStatus::Error("division by zero".into()));
    assert_eq!(failed.span_id, SpanId::child(spans[0].span_id, 1));
}

#[test]
fn a_retriever_output_has_its_documents() {
    let spans = execution_spans(&execution(vec![event(
        "RetrieverEvent",
        json!({
            "query": "capital of Switzerland",
            "nodes": [
                {"id": "n1", "content": "Bern is the capital.", "score": 0.93, "document_id": "d1"},
                {"id": "n2", "content": "Zürich is larger.", "score": null}
            ]
        }),
    )]));
    let child = &spans[1];
    assert_eq!(child.name, "RETRIEVER");
    let a = &child.attributes;
    assert_eq!(a.get_str("openinference.span.kind"), Some("RETRIEVER"));
    assert_eq!(a.get_str("retrieval.documents.0.document.id"), Some("n1"));
    assert_eq!(
        a.get_str("retrieval.documents.0.document.content"),
        Some("Bern is the capital.")
    );
    assert_eq!(
        double(a, "retrieval.documents.0.document.score"),
        Some(0.93)
    );
    assert_eq!(a.get_str("retrieval.documents.1.document.id"), Some("n2"));
    assert_eq!(a.get_str("input.value"), Some("capital of Switzerland"));
}

#[test]
fn every_other_semantic_kind_gets_its_own_kind_and_name() {
    let spans = execution_spans(&execution(vec![
        event(
            "RerankerEvent",
            json!({"query": "q", "rerank_model_name": "bge"}),
        ),
        event(
            "EmbeddingEvent",
            json!({"embedding_model_name": "bge-m3", "embeddings": [{"text": "hi", "vector": [0.5, -0.25]}]}),
        ),
        event("GuardEvent", json!({})),
        event("ChainEvent", json!({"metadata": {"k": "v"}})),
        event("AgentEvent", json!({})),
        event("LLMStopEvent", llm_fields()),
        // Built-in subtypes count as their semantic type.
        event("GuardRejectionEvent", json!({"reason": "off-topic"})),
        // Not semantic: no span.
        event("StopEvent", json!({})),
    ]));
    let kinds: Vec<(&str, &str)> = spans[1..]
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.attributes
                    .get_str("openinference.span.kind")
                    .unwrap_or("?"),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("RERANKER", "RERANKER"),
            ("EMBEDDING", "EMBEDDING"),
            ("GUARDRAIL", "GUARDRAIL"),
            ("CHAIN", "CHAIN"),
            ("AGENT", "AGENT"),
            ("gpt-4o-mini", "LLM"),
            ("GUARDRAIL", "GUARDRAIL"),
        ]
    );
    assert_eq!(
        spans[2]
            .attributes
            .get("embedding.embeddings.0.embedding.vector"),
        Some(&AttributeValue::DoubleArray(vec![0.5, -0.25]))
    );
    assert_eq!(
        spans[7].attributes.get_str("saap.event_name"),
        Some("GuardRejectionEvent")
    );
}

#[test]
fn a_cost_event_prices_the_llm_span_before_it() {
    let cost = json!({
        "llm_name": "openai/gpt-4o-mini",
        "prompt_token_count": 12, "completion_token_count": 1, "embedding_token_count": 0,
        "prompt_tokens_costs": 0.002, "completion_tokens_costs": 0.001, "embedding_tokens_costs": 0.0
    });
    let spans = execution_spans(&execution(vec![
        event("LLMEvent", llm_fields()),
        event("LLMCostEvent", cost.clone()),
    ]));
    assert_eq!(spans.len(), 2, "a cost is not a span of its own");
    let a = &spans[1].attributes;
    assert_eq!(double(a, "llm.cost.prompt"), Some(0.002));
    assert_eq!(double(a, "llm.cost.completion"), Some(0.001));
    assert_eq!(double(a, "llm.cost.total"), Some(0.003));
    // The call's own model name and counts stay.
    assert_eq!(a.get_str("llm.model_name"), Some("gpt-4o-mini"));
    assert_eq!(int(a, "llm.token_count.total"), Some(13));

    // With no LLM span before it, the execution span carries the cost.
    let spans = execution_spans(&execution(vec![event("LLMCostEvent", cost)]));
    assert_eq!(spans.len(), 1);
    assert_eq!(double(&spans[0].attributes, "llm.cost.total"), Some(0.003));
    assert_eq!(spans[0].attributes.get("llm.model_name"), None);
}

#[test]
fn costs_shown_during_the_step_price_its_model_calls_in_order() {
    let cost = |usd: f64| {
        json!({
            "llm_name": "gpt-4o-mini",
            "prompt_token_count": 12, "completion_token_count": 1, "embedding_token_count": 0,
            "prompt_tokens_costs": usd, "completion_tokens_costs": 0.0, "embedding_tokens_costs": 0.0
        })
    };
    // Two model calls returned; their costs were shown (display events) as they were made,
    // with a chunk among them that a span does not read.
    let mut x = execution(vec![
        event("LLMEvent", llm_fields()),
        event("LLMEvent", llm_fields()),
    ]);
    x.shown = vec![
        event("LLMCostEvent", cost(0.1)),
        event("ChunkEvent", json!({"chunk": "4"})),
        event("LLMCostEvent", cost(0.2)),
        event("LLMCostEvent", cost(0.4)),
    ];
    let spans = execution_spans(&x);
    assert_eq!(spans.len(), 3);
    assert_eq!(double(&spans[1].attributes, "llm.cost.total"), Some(0.1));
    assert_eq!(double(&spans[2].attributes, "llm.cost.total"), Some(0.2));
    // A cost with no call left to price goes on the execution.
    assert_eq!(double(&spans[0].attributes, "llm.cost.total"), Some(0.4));
    let output = spans[0]
        .attributes
        .get_str("output.value")
        .unwrap_or_default();
    assert!(
        !output.contains("LLMCostEvent"),
        "shown events are not outputs: {output}"
    );
}

#[test]
fn fields_that_do_not_parse_still_make_a_span() {
    let spans = execution_spans(&execution(vec![event(
        "LLMEvent",
        json!({"token_count_prompt": "twelve"}),
    )]));
    assert_eq!(spans.len(), 2);
    let child = &spans[1];
    assert_eq!(child.name, "LLM");
    let a = &child.attributes;
    assert_eq!(a.get_str("openinference.span.kind"), Some("LLM"));
    assert!(
        a.get_str("saap.parse_error")
            .is_some_and(|e| e.contains("invalid type")),
        "{a:?}"
    );
    assert_eq!(
        json_of(a, "output.value"),
        json!({"_event_name": "LLMEvent", "token_count_prompt": "twelve"})
    );
    assert_eq!(a.get_str("session.id"), Some("thread-7"));
}

#[test]
fn huge_inputs_are_bounded() {
    let mut x = execution(vec![]);
    x.inputs = vec![event("Big", json!({"text": "x".repeat(200_000)}))];
    let spans = execution_spans(&x);
    let input = spans[0].attributes.get_str("input.value").expect("input");
    assert!(input.len() <= crate::span::MAX_ATTRIBUTE_BYTES);
    assert!(input.contains("… [cut: "));
}
