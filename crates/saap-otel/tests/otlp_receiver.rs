//! The exporter against an in-process OTLP HTTP receiver that decodes every body with the
//! OpenTelemetry project's own generated messages (`opentelemetry-proto`), not ours: ids,
//! parents, names, kinds, times, statuses, OpenInference attributes and headers as a real
//! receiver sees them; batching, a full queue, retries, refusals, an unreachable receiver,
//! flush and shutdown.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, status::StatusCode as OtelCode};
use prost::Message as _;
use saap_otel::{
    EventData, ExecutionFacts, ExportStats, Exporter, OtlpConfig, RunFacts, Span, SpanId, TraceId,
    execution_spans, export_spans, run_span,
};
use serde_json::json;

const RUN: &str = "65f1a2b3c4d5e6f708192a3b";
const MS: u64 = 1_000_000;

/// What the receiver answers next.
#[derive(Clone)]
struct Reply {
    status: u16,
    retry_after: Option<&'static str>,
    body: &'static str,
}

/// One request as received.
#[derive(Clone)]
struct Received {
    path: String,
    headers: HeaderMap,
    request: ExportTraceServiceRequest,
}

#[derive(Default)]
struct ReceiverState {
    received: Mutex<Vec<Received>>,
    script: Mutex<VecDeque<Reply>>,
    delay: Mutex<Duration>,
}

struct Receiver {
    addr: SocketAddr,
    state: Arc<ReceiverState>,
}

impl Receiver {
    /// A receiver on 127.0.0.1:0 on its own runtime thread; answers 200 unless scripted.
    fn start() -> Receiver {
        let state = Arc::new(ReceiverState::default());
        let (tx, rx) = std::sync::mpsc::channel();
        let shared = Arc::clone(&state);
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind");
                tx.send(listener.local_addr().expect("addr"))
                    .expect("send addr");
                let app = Router::new().fallback(receive).with_state(shared);
                axum::serve(listener, app).await.expect("serve");
            });
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("the receiver started");
        Receiver { addr, state }
    }

    fn url(&self) -> String {
        format!("http://{}/v1/traces", self.addr)
    }

    fn script(&self, replies: &[Reply]) {
        self.state
            .script
            .lock()
            .expect("lock")
            .extend(replies.iter().cloned());
    }

    fn set_delay(&self, delay: Duration) {
        *self.state.delay.lock().expect("lock") = delay;
    }

    fn received(&self) -> Vec<Received> {
        self.state.received.lock().expect("lock").clone()
    }

    fn spans(&self) -> Vec<opentelemetry_proto::tonic::trace::v1::Span> {
        self.received()
            .into_iter()
            .flat_map(|r| r.request.resource_spans)
            .flat_map(|rs| rs.scope_spans)
            .flat_map(|ss| ss.spans)
            .collect()
    }
}

async fn receive(
    State(state): State<Arc<ReceiverState>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let delay = *state.delay.lock().expect("lock");
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let request = match ExportTraceServiceRequest::decode(body) {
        Ok(request) => request,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("undecodable: {e}")).into_response(),
    };
    state.received.lock().expect("lock").push(Received {
        path: uri.path().to_owned(),
        headers,
        request,
    });
    let reply = state.script.lock().expect("lock").pop_front();
    match reply {
        None => StatusCode::OK.into_response(),
        Some(reply) => {
            let status = StatusCode::from_u16(reply.status).expect("a status");
            let mut response = (status, reply.body).into_response();
            if let Some(after) = reply.retry_after {
                response
                    .headers_mut()
                    .insert("retry-after", after.parse().expect("a header value"));
            }
            response
        }
    }
}

fn event(name: &str, fields: serde_json::Value) -> EventData {
    EventData {
        name: name.into(),
        id: String::new(),
        fields,
    }
}

/// A finished run with one execution that called a model and a tool, and a failed one.
fn run_spans() -> Vec<Span> {
    let mut spans = vec![run_span(&RunFacts {
        run_id: RUN.into(),
        thread_id: "thread-7".into(),
        agent: "QaAgent".into(),
        start_unix_nano: 1_000 * MS,
        end_unix_nano: 2_000 * MS,
        start_event: Some(event("QaStartEvent", json!({"question": "2+2?"}))),
        end_event: Some(event("QaStopEvent", json!({"answer": "4"}))),
        failed: false,
    })];
    spans.extend(execution_spans(&ExecutionFacts {
        run_id: RUN.into(),
        thread_id: "thread-7".into(),
        step: "answer".into(),
        execution: 1,
        attempt: 0,
        start_unix_nano: 1_100 * MS,
        end_unix_nano: 1_500 * MS,
        inputs: vec![event("QaStartEvent", json!({"question": "2+2?"}))],
        outputs: vec![
            event(
                "LLMEvent",
                json!({
                    "input_messages": [{"role": "user", "content": "What is 2+2?"}],
                    "output_messages": [{"role": "assistant", "content": "4"}],
                    "chat_model_name": "gpt-4o-mini",
                    "token_count_prompt": 12, "token_count_completion": 1, "token_count_total": 13,
                    "latency_ms": 250.0
                }),
            ),
            event(
                "ToolEvent",
                json!({"name": "add", "parameters": {"a": 2, "b": 2}, "result": "4"}),
            ),
        ],
        shown: Vec::new(),
        error: None,
    }));
    spans.extend(execution_spans(&ExecutionFacts {
        run_id: RUN.into(),
        thread_id: "thread-7".into(),
        step: "check".into(),
        execution: 2,
        attempt: 0,
        start_unix_nano: 1_500 * MS,
        end_unix_nano: 1_600 * MS,
        inputs: vec![],
        outputs: vec![],
        shown: Vec::new(),
        error: Some("ValueError: no answer".into()),
    }));
    spans
}

fn attribute<'a>(
    attributes: &'a [opentelemetry_proto::tonic::common::v1::KeyValue],
    key: &str,
) -> Option<&'a any_value::Value> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v: &AnyValue| v.value.as_ref())
}

fn text<'a>(
    attributes: &'a [opentelemetry_proto::tonic::common::v1::KeyValue],
    key: &str,
) -> Option<&'a str> {
    match attribute(attributes, key) {
        Some(any_value::Value::StringValue(s)) => Some(s),
        _ => None,
    }
}

fn quick(config: OtlpConfig) -> OtlpConfig {
    OtlpConfig {
        flush_interval: Duration::from_millis(50),
        timeout: Duration::from_secs(5),
        ..config
    }
}

fn one_span(i: u64) -> Span {
    let mut span = run_span(&RunFacts {
        run_id: format!("run-{i}"),
        thread_id: "t".into(),
        agent: "A".into(),
        start_unix_nano: i,
        end_unix_nano: i + 1,
        start_event: None,
        end_event: None,
        failed: false,
    });
    span.name = format!("span-{i}");
    span
}

#[test]
fn a_run_arrives_as_one_trace_that_an_independent_decoder_reads() {
    let receiver = Receiver::start();
    let config = OtlpConfig::new(receiver.url())
        .expect("config")
        .header("x-team", "ml-ops")
        .expect("header")
        .service_name("qa-service");
    let spans = run_spans();
    let sent = export_spans(&config, &spans).expect("exported");
    assert_eq!(sent, spans.len());
    assert_eq!(sent, 5, "run + (execution, LLM, tool) + failed execution");

    let received = receiver.received();
    assert_eq!(received.len(), 1);
    let r = &received[0];
    assert_eq!(r.path, "/v1/traces");
    assert_eq!(
        r.headers.get("x-team").map(|v| v.as_bytes()),
        Some(&b"ml-ops"[..])
    );
    assert_eq!(
        r.headers.get("content-type").map(|v| v.as_bytes()),
        Some(&b"application/x-protobuf"[..])
    );
    let resource_spans = &r.request.resource_spans[0];
    let resource = resource_spans.resource.as_ref().expect("a resource");
    assert_eq!(
        text(&resource.attributes, "service.name"),
        Some("qa-service")
    );
    assert_eq!(
        text(&resource.attributes, "telemetry.sdk.name"),
        Some("saap")
    );
    assert_eq!(
        text(&resource.attributes, "telemetry.sdk.language"),
        Some("rust")
    );
    let scope = &resource_spans.scope_spans[0];
    assert_eq!(scope.scope.as_ref().map(|s| s.name.as_str()), Some("saap"));

    let wire = &scope.spans;
    assert_eq!(wire.len(), 5);
    let trace = TraceId::of_run(RUN).0.to_vec();
    let root = SpanId::of_run(RUN);
    let exec = SpanId::of_execution(RUN, 1, 0);
    for (ours, theirs) in spans.iter().zip(wire) {
        assert_eq!(theirs.trace_id, trace);
        assert_eq!(theirs.span_id, ours.span_id.0.to_vec());
        assert_eq!(
            theirs.parent_span_id,
            ours.parent_span_id
                .map(|p| p.0.to_vec())
                .unwrap_or_default()
        );
        assert_eq!(theirs.name, ours.name);
        assert_eq!(theirs.kind, SpanKind::Internal as i32);
        assert_eq!(theirs.start_time_unix_nano, ours.start_unix_nano);
        assert_eq!(theirs.end_time_unix_nano, ours.end_unix_nano);
        assert_eq!(theirs.attributes.len(), ours.attributes.len());
    }
    let names: Vec<&str> = wire.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["QaAgent", "answer", "gpt-4o-mini", "add", "check"]);
    assert!(wire[0].parent_span_id.is_empty());
    assert_eq!(wire[1].parent_span_id, root.0.to_vec());
    assert_eq!(wire[2].parent_span_id, exec.0.to_vec());
    assert_eq!(wire[3].parent_span_id, exec.0.to_vec());
    assert_eq!(wire[4].parent_span_id, root.0.to_vec());

    let code = |i: usize| {
        wire[i]
            .status
            .as_ref()
            .map(|s| (s.code, s.message.as_str()))
    };
    assert_eq!(code(0), Some((OtelCode::Ok as i32, "")));
    assert_eq!(code(2), Some((OtelCode::Ok as i32, "")));
    assert_eq!(
        code(4),
        Some((OtelCode::Error as i32, "ValueError: no answer"))
    );

    // The LLM child as Phoenix reads it.
    let llm = &wire[2].attributes;
    assert_eq!(text(llm, "openinference.span.kind"), Some("LLM"));
    assert_eq!(text(llm, "llm.model_name"), Some("gpt-4o-mini"));
    assert_eq!(text(llm, "session.id"), Some("thread-7"));
    assert_eq!(text(llm, "llm.input_messages.0.message.role"), Some("user"));
    assert_eq!(
        text(llm, "llm.input_messages.0.message.content"),
        Some("What is 2+2?")
    );
    assert_eq!(
        text(llm, "llm.output_messages.0.message.content"),
        Some("4")
    );
    assert_eq!(
        attribute(llm, "llm.token_count.total"),
        Some(&any_value::Value::IntValue(13))
    );
    assert_eq!(
        attribute(llm, "gen_ai.response.model"),
        Some(&any_value::Value::StringValue("gpt-4o-mini".into()))
    );
    assert_eq!(
        wire[2].end_time_unix_nano - wire[2].start_time_unix_nano,
        250 * MS
    );
    // The tool child.
    assert_eq!(
        text(&wire[3].attributes, "openinference.span.kind"),
        Some("TOOL")
    );
    assert_eq!(
        text(&wire[3].attributes, "tool.parameters"),
        Some(r#"{"a":2,"b":2}"#)
    );
    // The execution span's inputs.
    assert_eq!(
        text(&wire[1].attributes, "input.value"),
        Some(r#"[{"_event_name":"QaStartEvent","question":"2+2?"}]"#)
    );
    assert_eq!(
        attribute(&wire[1].attributes, "saap.execution"),
        Some(&any_value::Value::IntValue(1))
    );
}

#[test]
fn langfuse_gets_its_path_and_basic_auth() {
    let receiver = Receiver::start();
    let config = OtlpConfig::langfuse(&format!("http://{}", receiver.addr), "pk-lf-1", "sk-lf-2")
        .expect("config");
    export_spans(&config, &[one_span(1)]).expect("exported");
    let received = receiver.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].path, "/api/public/otel/v1/traces");
    let header = |name: &str| {
        received[0]
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    assert_eq!(
        header("authorization").as_deref(),
        Some("Basic cGstbGYtMTpzay1sZi0y")
    );
    assert_eq!(header("x-langfuse-ingestion-version").as_deref(), Some("4"));
}

#[test]
fn the_exporter_batches_jobs_and_every_span_arrives() {
    let receiver = Receiver::start();
    let config = OtlpConfig {
        max_batch: 3,
        ..quick(OtlpConfig::new(receiver.url()).expect("config"))
    };
    let exporter = Exporter::start(config).expect("started");
    for i in 0..10 {
        assert!(exporter.submit(Box::new(move || vec![one_span(i)])));
    }
    exporter.flush(Duration::from_secs(10)).expect("flushed");
    let stats = exporter.stats();
    assert_eq!(stats.exported_spans, 10);
    assert_eq!(stats.dropped_jobs, 0);
    assert_eq!(stats.failed_spans, 0);
    assert!(stats.batches >= 4, "{stats:?}");
    let mut names: Vec<String> = receiver.spans().into_iter().map(|s| s.name).collect();
    names.sort();
    let mut expected: Vec<String> = (0..10).map(|i| format!("span-{i}")).collect();
    expected.sort();
    assert_eq!(names, expected);
    assert!(
        receiver
            .received()
            .iter()
            .all(|r| { r.request.resource_spans[0].scope_spans[0].spans.len() <= 3 })
    );
    let stats = exporter.shutdown(Duration::from_secs(5)).expect("stopped");
    assert_eq!(stats.exported_spans, 10);
}

#[test]
fn a_full_queue_drops_and_counts_without_blocking() {
    let receiver = Receiver::start();
    receiver.set_delay(Duration::from_millis(300));
    let config = OtlpConfig {
        queue_capacity: 2,
        max_batch: 1,
        ..quick(OtlpConfig::new(receiver.url()).expect("config"))
    };
    let exporter = Exporter::start(config).expect("started");
    // The receiver takes 300 ms a request: a submit that waited for room would have been
    // accepted in the end. That most were refused (and counted) shows none waited.
    let accepted = (0..20)
        .filter(|i| exporter.submit_spans(vec![one_span(*i)]))
        .count() as u64;
    let stats = exporter.stats();
    // The queue's 2, and at most the 2 the thread took at once before the slow send.
    assert!(accepted <= 4, "{accepted} accepted with a queue of 2");
    assert_eq!(stats.dropped_jobs, 20 - accepted);
    let stats = exporter.shutdown(Duration::from_secs(10)).expect("stopped");
    assert_eq!(stats.exported_spans, accepted);
    assert_eq!(receiver.spans().len() as u64, accepted);
}

#[test]
fn a_busy_receiver_is_retried_after_what_it_asks() {
    let receiver = Receiver::start();
    receiver.script(&[Reply {
        status: 503,
        retry_after: Some("1"),
        body: "busy",
    }]);
    let config = OtlpConfig::new(receiver.url()).expect("config");
    let started = Instant::now();
    assert_eq!(export_spans(&config, &[one_span(1)]).expect("exported"), 1);
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "Retry-After: 1 honoured"
    );
    assert_eq!(receiver.received().len(), 2, "one refusal, one success");

    // 429 and 502 without Retry-After: the backoff.
    receiver.script(&[
        Reply {
            status: 429,
            retry_after: None,
            body: "",
        },
        Reply {
            status: 502,
            retry_after: None,
            body: "",
        },
    ]);
    let exporter = Exporter::start(quick(config)).expect("started");
    assert!(exporter.submit_spans(vec![one_span(2), one_span(3)]));
    exporter.flush(Duration::from_secs(10)).expect("flushed");
    assert_eq!(
        exporter.stats(),
        ExportStats {
            exported_spans: 2,
            dropped_jobs: 0,
            failed_spans: 0,
            batches: 1
        }
    );
    assert_eq!(receiver.received().len(), 5);
}

#[test]
fn a_refusal_is_counted_and_not_retried() {
    let receiver = Receiver::start();
    receiver.script(&[Reply {
        status: 400,
        retry_after: None,
        body: "bad spans: missing trace id",
    }]);
    let config = quick(
        OtlpConfig::new(receiver.url())
            .expect("config")
            .header("authorization", "Bearer SECRET-TOKEN")
            .expect("header"),
    );
    let exporter = Exporter::start(config.clone()).expect("started");
    assert!(exporter.submit_spans(vec![one_span(1), one_span(2), one_span(3)]));
    exporter
        .flush(Duration::from_secs(5))
        .expect("a refusal still completes the flush");
    let stats = exporter.stats();
    assert_eq!(stats.failed_spans, 3);
    assert_eq!(stats.exported_spans, 0);
    assert_eq!(stats.batches, 0);
    assert_eq!(receiver.received().len(), 1, "no retry");

    receiver.script(&[Reply {
        status: 401,
        retry_after: None,
        body: "unauthorized",
    }]);
    let e = export_spans(&config, &[one_span(4)]).expect_err("refused");
    assert_eq!(e.code(), "SAAP-T004");
    let message = e.to_string();
    assert!(
        message.contains("401") && message.contains("unauthorized"),
        "{message}"
    );
    assert!(!message.contains("SECRET"), "{message}");
    assert_eq!(receiver.received().len(), 2);
}

#[test]
fn an_unreachable_receiver_is_t005() {
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let url = format!("http://127.0.0.1:{port}/v1/traces");
    let config = OtlpConfig::new(url.clone()).expect("config");
    let started = Instant::now();
    let e = export_spans(&config, &[one_span(1)]).expect_err("unreachable");
    assert_eq!(e.code(), "SAAP-T005");
    assert!(
        e.to_string()
            .contains(&format!("is the collector running at {url}?")),
        "{e}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "retries are bounded"
    );
}

#[test]
fn flush_times_out_and_shutdown_stops_every_handle() {
    let receiver = Receiver::start();
    let exporter =
        Exporter::start(quick(OtlpConfig::new(receiver.url()).expect("config"))).expect("started");
    // Nothing submitted: a flush returns at once.
    exporter
        .flush(Duration::from_millis(10))
        .expect("nothing to flush");

    receiver.set_delay(Duration::from_millis(800));
    assert!(exporter.submit_spans(vec![one_span(1)]));
    let e = exporter
        .flush(Duration::from_millis(100))
        .expect_err("the receiver is slow");
    assert_eq!(e.code(), "SAAP-T006");

    let other = exporter.clone();
    let stats = other.shutdown(Duration::from_secs(10)).expect("stopped");
    assert_eq!(stats.exported_spans, 1);
    assert!(
        !exporter.submit_spans(vec![one_span(2)]),
        "stopped for every handle"
    );
    assert!(!exporter.submit(Box::new(|| vec![one_span(3)])));
    assert_eq!(exporter.stats().dropped_jobs, 2);
    // Shutting down twice is harmless.
    exporter
        .shutdown(Duration::from_secs(1))
        .expect("already stopped");
    assert_eq!(receiver.spans().len(), 1);
}

#[test]
fn dropping_the_last_handle_sends_what_is_queued() {
    let receiver = Receiver::start();
    let exporter = Exporter::start(OtlpConfig {
        flush_interval: Duration::from_secs(60),
        ..OtlpConfig::new(receiver.url()).expect("config")
    })
    .expect("started");
    let clone = exporter.clone();
    drop(clone);
    assert!(
        exporter.submit_spans(vec![one_span(1)]),
        "a dropped clone stops nothing"
    );
    drop(exporter);
    assert_eq!(receiver.spans().len(), 1, "sent on drop");
}

#[test]
fn a_panicking_job_is_counted_and_the_exporter_goes_on() {
    let receiver = Receiver::start();
    let exporter =
        Exporter::start(quick(OtlpConfig::new(receiver.url()).expect("config"))).expect("started");
    assert!(exporter.submit(Box::new(|| panic!("a bug in a span job"))));
    assert!(exporter.submit_spans(vec![one_span(1)]));
    exporter.flush(Duration::from_secs(5)).expect("flushed");
    let stats = exporter.stats();
    assert_eq!(stats.failed_spans, 1);
    assert_eq!(stats.exported_spans, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exporter_lives_inside_an_async_runtime() {
    // The engine starts, feeds, flushes and drops it from async code: no blocking-client
    // panic, and export_spans works there too.
    let receiver = tokio::task::spawn_blocking(Receiver::start)
        .await
        .expect("receiver");
    let config = quick(OtlpConfig::new(receiver.url()).expect("config"));
    let exporter = Exporter::start(config.clone()).expect("started");
    assert!(exporter.submit_spans(vec![one_span(1)]));
    exporter.flush(Duration::from_secs(5)).expect("flushed");
    drop(exporter);
    assert_eq!(export_spans(&config, &[one_span(2)]).expect("exported"), 1);
    assert_eq!(receiver.spans().len(), 2);
}

#[test]
fn a_config_edited_into_a_bad_header_fails_to_start_with_t008() {
    let mut config = OtlpConfig::new("http://127.0.0.1:9/v1/traces").expect("config");
    config.headers.push(("bad name".into(), "v".into()));
    let e = Exporter::start(config).expect_err("bad header");
    assert_eq!(e.code(), "SAAP-T008");
}
