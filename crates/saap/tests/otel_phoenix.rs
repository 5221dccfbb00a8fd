//! Runs exported to a real trace viewer (issue 20 §5): Arize Phoenix from PyPI, started on a
//! free loopback port by `scripts/phoenix-serve`, and the spans read back through Phoenix's own
//! REST API by `scripts/phoenix_spans.py`. One run exported live by the engine, one from the
//! store by `<agent> export RUN`; both read back with their tree, kinds and OpenInference
//! attributes in the project named after the agent.
//!
//! `scripts/test` (and `scripts/phoenix-test`, this test alone) installs Phoenix into
//! `target/phoenix-venv` (~70 s the first time) and runs this with `SAAP_PHOENIX_PYTHON` set;
//! without it (a plain `cargo test`, or no Python 3.11 to install Phoenix with) the test says
//! it skipped.
#![allow(clippy::unwrap_used)]

mod common;

use common::WAIT;
use common::traced::Traced;
use saap::otel::{Exporter, OtlpConfig, TraceId};
use saap::testing::TestRunner;
use saap::{Agent, Engine, EngineOptions, SqliteBackend, UserMessageEvent};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python() -> String {
    std::env::var("SAAP_PHOENIX_PYTHON").unwrap_or_default()
}

/// A Phoenix server, stopped (and its working dir removed) when dropped.
struct Phoenix {
    child: Child,
    url: String,
}

impl Phoenix {
    fn start() -> Phoenix {
        let mut child = Command::new(python())
            .arg(repo().join("scripts/phoenix-serve"))
            .arg("--exit-on-stdin-eof")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let ready: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("phoenix-serve did not start ({e}): {line:?}"));
        Phoenix {
            child,
            url: ready["url"].as_str().unwrap().to_string(),
        }
    }

    fn traces_url(&self) -> String {
        format!("{}/v1/traces", self.url)
    }

    /// The spans of `trace`, read back through Phoenix's API (waits for at least `n`).
    fn spans(&self, project: &str, trace: &str, n: usize) -> Vec<Value> {
        let out = Command::new(python())
            .arg(repo().join("scripts/phoenix_spans.py"))
            .args([
                "--url",
                &self.url,
                "--project",
                project,
                "--trace-id",
                trace,
            ])
            .args(["--min-spans", &n.to_string(), "--wait", "60"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "phoenix_spans.py: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap()
    }
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        // Its stdin closed: phoenix-serve stops Phoenix and removes its working dir.
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

fn exporter(url: &str) -> Exporter {
    Exporter::start(OtlpConfig::new(url).unwrap().service_name("Traced")).unwrap()
}

/// The run's tree as Phoenix gives it back: checked against what saap exported.
fn check_tree(spans: &[Value], run_id: &str, thread_id: &str) {
    let by_name = |name: &str| {
        spans
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no span `{name}` in {spans:#?}"))
    };
    let root = by_name("Traced");
    assert_eq!(root["parent_id"], Value::Null);
    assert_eq!(root["span_kind"], "AGENT");
    assert_eq!(root["status_code"], "OK");
    assert_eq!(root["attributes"]["saap.run_id"], run_id);
    assert_eq!(root["attributes"]["session.id"], thread_id);
    let root_id = &root["span_id"];
    for step in ["retrieve", "answer"] {
        let x = by_name(step);
        assert_eq!(&x["parent_id"], root_id, "{step} under the run");
        assert_eq!(x["span_kind"], "CHAIN");
    }
    let answer_id = &by_name("answer")["span_id"];
    let llm = spans.iter().find(|s| s["span_kind"] == "LLM").unwrap();
    assert_eq!(&llm["parent_id"], answer_id);
    let a = &llm["attributes"];
    assert_eq!(a["llm.model_name"], "smol-test");
    assert_eq!(a["llm.token_count.prompt"], 7);
    assert_eq!(a["llm.token_count.completion"], 2);
    assert_eq!(a["llm.input_messages.0.message.role"], "user");
    assert_eq!(a["llm.output_messages.0.message.content"], "Bern.");
    let tool = spans.iter().find(|s| s["span_kind"] == "TOOL").unwrap();
    assert_eq!(&tool["parent_id"], answer_id);
    assert_eq!(tool["attributes"]["tool.name"], "weather");
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_exported_live_and_from_the_store_read_back_from_phoenix() {
    if python().is_empty() {
        eprintln!(
            "skipped: SAAP_PHOENIX_PYTHON is not set (no Arize Phoenix); run `bash scripts/phoenix-test`"
        );
        return;
    }
    let phoenix = Phoenix::start();

    // Live, from the engine.
    let engine = Engine::new(
        Traced::workflow().unwrap(),
        Arc::new(saap::MemoryBackend::new()),
        EngineOptions {
            telemetry: Some(exporter(&phoenix.traces_url())),
            ..EngineOptions::default()
        },
    );
    let run = TestRunner::new(engine.clone())
        .run(UserMessageEvent {
            message: "Bern".into(),
        })
        .await
        .unwrap();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    let telemetry = engine.telemetry().unwrap().clone();
    tokio::task::spawn_blocking(move || telemetry.flush(Duration::from_secs(20)))
        .await
        .unwrap()
        .unwrap();
    let trace = TraceId::of_run(run.run_id()).to_hex();
    let spans = phoenix.spans("Traced", &trace, 5);
    assert_eq!(spans.len(), 5, "{spans:#?}");
    assert!(spans.iter().all(|s| s["trace_id"] == trace.as_str()));
    check_tree(&spans, run.run_id(), &snap.thread_id);

    // After the fact, from the store, by the agent's command line.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("traced.db");
    let workflow = Traced::workflow().unwrap();
    let (engine, _) = Engine::open(
        workflow.clone(),
        Arc::new(SqliteBackend::open(&db).unwrap()),
        EngineOptions::default(),
    )
    .await
    .unwrap();
    let run = TestRunner::new(engine.clone())
        .run(UserMessageEvent {
            message: "Zurich".into(),
        })
        .await
        .unwrap();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    let run_id = run.run_id().to_string();
    // The store's engine lets go of it (one engine owns a database at a time).
    drop(run);
    engine.backend().halt();
    drop(engine);
    let args = [
        "traced".to_string(),
        "export".into(),
        run_id.clone(),
        "--db".into(),
        db.display().to_string(),
        "--endpoint".into(),
        phoenix.url.clone(),
    ];
    let code = tokio::task::spawn_blocking(move || saap::cli::main_with(workflow, args))
        .await
        .unwrap();
    assert_eq!(code, std::process::ExitCode::SUCCESS);
    let trace = TraceId::of_run(&run_id).to_hex();
    let spans = phoenix.spans("Traced", &trace, 5);
    assert_eq!(spans.len(), 5, "{spans:#?}");
    check_tree(&spans, &run_id, &snap.thread_id);
}
