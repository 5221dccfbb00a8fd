//! Runs as OpenTelemetry traces (issue 20 §5): exported live by the engine
//! (`EngineOptions::telemetry`) and after the fact from the store (`saap::trace`,
//! `<agent> export RUN`), received by an OTLP HTTP/protobuf receiver in the test that decodes
//! with the `opentelemetry-proto` crate (not saap's own encoder) and checks the spans: one
//! trace per run whose id starts with the run id, the run's AGENT span, a CHAIN span per
//! execution under it with its bound events and outputs, LLM and TOOL child spans with their
//! OpenInference attributes, a failed step as an error status; live and stored export name
//! the same spans.
#![allow(clippy::unwrap_used)]

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message as _;
use saap::otel::{Exporter, OtlpConfig, SpanId, TraceId};
mod common;

use common::traced::Traced;
use saap::testing::{TestRun, TestRunner};
use saap::{Agent, Engine, EngineOptions, RunSnapshot, SqliteBackend, UserMessageEvent};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::WAIT;

/// A span as the receiver decoded it.
#[derive(Debug, Clone)]
struct Got {
    trace_id: String,
    span_id: String,
    parent: String,
    name: String,
    start: u64,
    end: u64,
    /// 0 unset, 1 ok, 2 error.
    status: i32,
    message: String,
    attrs: BTreeMap<String, String>,
    service: String,
}

#[derive(Clone, Default)]
struct Received {
    spans: Arc<Mutex<Vec<Got>>>,
    headers: Arc<Mutex<Vec<HeaderMap>>>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn text(v: &opentelemetry_proto::tonic::common::v1::AnyValue) -> String {
    match &v.value {
        Some(AnyValue::StringValue(s)) => s.clone(),
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::DoubleValue(d)) => d.to_string(),
        Some(AnyValue::BoolValue(b)) => b.to_string(),
        other => format!("{other:?}"),
    }
}

async fn receive(
    State(r): State<Received>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, &'static str) {
    assert_eq!(
        headers.get("content-type").unwrap(),
        "application/x-protobuf"
    );
    let req = ExportTraceServiceRequest::decode(body).unwrap();
    let mut out = r.spans.lock().unwrap();
    for rs in req.resource_spans {
        let service = rs
            .resource
            .iter()
            .flat_map(|res| res.attributes.iter())
            .find(|kv| kv.key == "service.name")
            .and_then(|kv| kv.value.as_ref().map(text))
            .unwrap_or_default();
        for ss in rs.scope_spans {
            for s in ss.spans {
                let status = s.status.clone().unwrap_or_default();
                out.push(Got {
                    trace_id: hex(&s.trace_id),
                    span_id: hex(&s.span_id),
                    parent: hex(&s.parent_span_id),
                    name: s.name.clone(),
                    start: s.start_time_unix_nano,
                    end: s.end_time_unix_nano,
                    status: status.code,
                    message: status.message,
                    attrs: s
                        .attributes
                        .iter()
                        .map(|kv| {
                            (
                                kv.key.clone(),
                                kv.value.as_ref().map(text).unwrap_or_default(),
                            )
                        })
                        .collect(),
                    service: service.clone(),
                });
            }
        }
    }
    r.headers.lock().unwrap().push(headers);
    (StatusCode::OK, "")
}

/// An OTLP HTTP receiver on a free loopback port: its traces URL and what it received.
async fn receiver() -> (String, Received) {
    let got = Received::default();
    let app = Router::new()
        .route("/v1/traces", post(receive))
        .with_state(got.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://127.0.0.1:{port}/v1/traces"), got)
}

fn exporter(url: &str) -> Exporter {
    let config = OtlpConfig::new(url)
        .unwrap()
        .header("x-test", "yes")
        .unwrap()
        .service_name("traced-agent");
    Exporter::start(config).unwrap()
}

/// Waits until the receiver holds `n` spans of `trace`.
async fn spans_of(got: &Received, trace: &str, n: usize) -> Vec<Got> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let spans: Vec<Got> = got
            .spans
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.trace_id == trace)
            .cloned()
            .collect();
        if spans.len() >= n || tokio::time::Instant::now() > deadline {
            return spans;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sends what the engine's exporter holds (a blocking call: off the runtime's threads, which
/// serve the receiver).
async fn flush(engine: &Engine) {
    let exporter = engine.telemetry().unwrap().clone();
    tokio::task::spawn_blocking(move || exporter.flush(Duration::from_secs(10)))
        .await
        .unwrap()
        .unwrap();
}

/// One run of the traced agent on the in-memory engine, exported live to `url`: the
/// engine, the run and its end.
async fn run_in_memory(url: &str, message: &str) -> (Engine, TestRun, RunSnapshot) {
    let engine = Engine::new(
        Traced::workflow().unwrap(),
        Arc::new(saap::MemoryBackend::new()),
        EngineOptions {
            telemetry: Some(exporter(url)),
            ..EngineOptions::default()
        },
    );
    let run = TestRunner::new(engine.clone())
        .run(UserMessageEvent::new(message))
        .await
        .unwrap();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    (engine, run, snap)
}

fn named<'a>(spans: &'a [Got], name: &str) -> &'a Got {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no span `{name}` in {spans:#?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_exported_live_is_one_trace_of_agent_chain_llm_and_tool_spans() {
    let (url, got) = receiver().await;
    let (engine, run, snap) = run_in_memory(&url, "Bern").await;
    assert!(!snap.has_exception(), "{}", snap.timeline());
    flush(&engine).await;

    let run_id = run.run_id().to_string();
    let trace = TraceId::of_run(&run_id).to_hex();
    assert!(trace.starts_with(&run_id), "{trace} names run {run_id}");
    let spans = spans_of(&got, &trace, 5).await;
    assert_eq!(spans.len(), 5, "{spans:#?}");

    let root = named(&spans, "Traced");
    assert_eq!(root.span_id, SpanId::of_run(&run_id).to_hex());
    assert_eq!(root.parent, "");
    assert_eq!(root.attrs["openinference.span.kind"], "AGENT");
    assert_eq!(root.attrs["saap.run_id"], run_id);
    assert_eq!(root.attrs["session.id"], snap.thread_id);
    assert!(root.attrs["input.value"].contains("UserMessageEvent"));
    assert!(root.attrs["output.value"].contains("Bern."));
    assert_eq!(root.status, 1, "the run stopped normally: status ok");
    assert_eq!(root.service, "traced-agent");

    let retrieve = named(&spans, "retrieve");
    let answer = named(&spans, "answer");
    for (x, step) in [(retrieve, "retrieve"), (answer, "answer")] {
        assert_eq!(x.parent, root.span_id, "{step} is a child of the run");
        assert_eq!(x.attrs["openinference.span.kind"], "CHAIN");
        assert_eq!(x.attrs["saap.step"], step);
        assert_eq!(x.status, 1);
        assert!(x.start <= x.end && root.start <= x.start && x.end <= root.end);
    }
    assert!(retrieve.attrs["input.value"].contains("\"message\":\"Bern\""));
    assert!(retrieve.attrs["output.value"].contains("about Bern"));
    assert!(answer.attrs["input.value"].contains("about Bern"));
    assert!(retrieve.end <= answer.start, "answer ran after retrieve");

    let llm = spans
        .iter()
        .find(|s| s.attrs.get("openinference.span.kind").map(String::as_str) == Some("LLM"))
        .unwrap();
    assert_eq!(llm.parent, answer.span_id);
    assert_eq!(llm.attrs["llm.model_name"], "smol-test");
    assert_eq!(llm.attrs["llm.token_count.prompt"], "7");
    assert_eq!(llm.attrs["llm.token_count.completion"], "2");
    assert_eq!(llm.attrs["llm.token_count.total"], "9");
    assert_eq!(llm.attrs["llm.input_messages.0.message.role"], "user");
    assert_eq!(llm.attrs["llm.output_messages.0.message.content"], "Bern.");
    assert_eq!(llm.attrs["session.id"], snap.thread_id);
    // The cost the step showed prices its model call.
    assert_eq!(llm.attrs["llm.cost.total"].parse::<f64>().unwrap(), 0.0011);

    let tool = spans
        .iter()
        .find(|s| s.attrs.get("openinference.span.kind").map(String::as_str) == Some("TOOL"))
        .unwrap();
    assert_eq!(tool.parent, answer.span_id);
    assert_eq!(tool.attrs["tool.name"], "weather");
    assert!(tool.attrs["tool.parameters"].contains("Bern"));

    let headers = got.headers.lock().unwrap();
    assert!(headers.iter().all(|h| h.get("x-test").unwrap() == "yes"));
    let stats = engine.telemetry().unwrap().stats();
    assert_eq!(stats.exported_spans, 5);
    assert_eq!(stats.dropped_jobs, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_step_is_an_error_span_and_fails_the_runs_span() {
    let (url, got) = receiver().await;
    let (engine, run, snap) = run_in_memory(&url, "fail").await;
    assert!(snap.has_exception());
    flush(&engine).await;
    let trace = TraceId::of_run(run.run_id()).to_hex();
    let spans = spans_of(&got, &trace, 2).await;
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let retrieve = named(&spans, "retrieve");
    assert_eq!(retrieve.status, 2);
    assert!(
        retrieve.message.contains("the index is offline"),
        "{retrieve:?}"
    );
    let root = named(&spans, "Traced");
    assert_eq!(root.status, 2, "{root:?}");
    assert!(root.attrs["output.value"].contains("ExceptionEvent"));
}

/// The same run on the embedded store, exported live and again from the store: the same
/// spans (ids, parents, names, kinds), times from the journal.
#[tokio::test(flavor = "multi_thread")]
async fn a_stored_run_exports_the_spans_live_export_gave() {
    let (url, got) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("traced.db");
    let workflow = Traced::workflow().unwrap();
    let backend = Arc::new(SqliteBackend::open(&db).unwrap());
    let (engine, _) = Engine::open(
        workflow.clone(),
        backend.clone(),
        EngineOptions {
            telemetry: Some(exporter(&url)),
            ..EngineOptions::default()
        },
    )
    .await
    .unwrap();
    let runner = TestRunner::new(engine.clone());
    let run = runner
        .run(UserMessageEvent {
            message: "Bern".into(),
        })
        .await
        .unwrap();
    run.wait_for_end(WAIT).await.unwrap();
    flush(&engine).await;
    let run_id = run.run_id().to_string();
    let trace = TraceId::of_run(&run_id).to_hex();
    let live = spans_of(&got, &trace, 5).await;
    drop(runner);
    drop(engine);

    use saap::backend::Backend as _;
    let stored = backend
        .read_run(workflow.name(), &run_id)
        .wait()
        .await
        .unwrap()
        .unwrap();
    assert!(
        stored.journal.iter().all(|e| e.at.is_some()),
        "every entry has its time"
    );
    let spans = saap::trace::stored_run_spans(&workflow, &stored).unwrap();
    let shape = |mut v: Vec<(String, String, String, String)>| {
        v.sort();
        v
    };
    let from_store = shape(
        spans
            .iter()
            .map(|s| {
                (
                    s.span_id.to_hex(),
                    s.parent_span_id.map(|p| p.to_hex()).unwrap_or_default(),
                    s.name.clone(),
                    s.attributes
                        .get_str("openinference.span.kind")
                        .unwrap_or_default()
                        .to_string(),
                )
            })
            .collect(),
    );
    let from_live = shape(
        live.iter()
            .map(|s| {
                (
                    s.span_id.clone(),
                    s.parent.clone(),
                    s.name.clone(),
                    s.attrs["openinference.span.kind"].clone(),
                )
            })
            .collect(),
    );
    assert_eq!(from_store, from_live);
    let llm = spans
        .iter()
        .find(|s| s.attributes.get_str("openinference.span.kind") == Some("LLM"))
        .unwrap();
    assert_eq!(
        llm.attributes.get("llm.cost.total"),
        Some(&saap_protocol::semantic::AttributeValue::Double(0.0011)),
        "the stored run's span is priced too"
    );
    for s in &spans {
        assert_eq!(s.trace_id.to_hex(), trace);
        assert!(
            s.start_unix_nano > 0 && s.start_unix_nano <= s.end_unix_nano,
            "{s:?}"
        );
    }
    let root = &spans[0];
    assert!(spans[1..].iter().all(
        |s| root.start_unix_nano <= s.start_unix_nano && s.end_unix_nano <= root.end_unix_nano
    ));
}
