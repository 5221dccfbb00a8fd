//! No header value (API keys, Basic auth) reaches the logs, even at TRACE level of every
//! crate (reqwest and hyper included), through a retried batch and a refused one; the refusal
//! itself is logged with its status and body excerpt.

use std::io::Write;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use saap_otel::{Exporter, OtlpConfig, RunFacts, export_spans, run_span};

const SECRET: &str = "sk-lf-SECRET-LOGS-91";

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A receiver that answers 503 (retry at once) to every other request and 400 to the rest.
fn start_receiver() -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            tx.send(listener.local_addr().expect("addr")).expect("send");
            let count = Arc::new(AtomicU32::new(0));
            let app = Router::new().fallback(move || {
                let n = count.fetch_add(1, Ordering::SeqCst);
                async move {
                    let response: Response = if n.is_multiple_of(2) {
                        (
                            StatusCode::SERVICE_UNAVAILABLE,
                            [("retry-after", "0")],
                            "busy",
                        )
                            .into_response()
                    } else {
                        (StatusCode::BAD_REQUEST, "bad spans: no trace id").into_response()
                    };
                    response
                }
            });
            axum::serve(listener, app).await.expect("serve");
        });
    });
    let addr = rx.recv_timeout(Duration::from_secs(5)).expect("started");
    format!("http://{addr}")
}

#[test]
fn header_values_are_never_logged() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    // Global: the exporter logs from its own threads.
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");

    let base = start_receiver();
    let span = run_span(&RunFacts {
        run_id: "run-logs".into(),
        thread_id: "t".into(),
        agent: "A".into(),
        start_unix_nano: 1,
        end_unix_nano: 2,
        start_event: None,
        end_event: None,
        failed: false,
    });
    let config = OtlpConfig::langfuse(&base, "pk-lf-1", SECRET)
        .expect("config")
        .header("x-api-key", SECRET)
        .expect("header");
    let e = export_spans(&config, std::slice::from_ref(&span)).expect_err("refused");
    assert_eq!(e.code(), "SAAP-T004");

    let exporter = Exporter::start(OtlpConfig {
        flush_interval: Duration::from_millis(20),
        ..config.clone()
    })
    .expect("started");
    assert!(exporter.submit_spans(vec![span]));
    exporter.shutdown(Duration::from_secs(5)).expect("stopped");
    let _ = format!("{config:?} {exporter:?} {e} {e:?}");

    let logs = String::from_utf8_lossy(&captured.0.lock().expect("lock")).into_owned();
    assert!(
        logs.contains("retrying an OTLP batch"),
        "the retry was logged: {logs}"
    );
    assert!(
        logs.contains("refused a batch") && logs.contains("status=400"),
        "the refusal was logged: {logs}"
    );
    assert!(
        logs.contains("bad spans: no trace id"),
        "with its body: {logs}"
    );
    assert!(!logs.contains(SECRET), "a header value was logged: {logs}");
    // The Basic token is base64 of the secret: it must not appear either.
    let basic = config
        .headers
        .iter()
        .find(|(n, _)| n == "Authorization")
        .map(|(_, v)| v.trim_start_matches("Basic ").to_owned())
        .expect("basic auth");
    assert!(!logs.contains(&basic), "the Basic token was logged");
}
