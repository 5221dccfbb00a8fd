//! A real run, stored by the embedded engine, exported by the agent's CLI
//! (`show RUN --history-out FILE`) and explained by `saap explain SPEC --history FILE`:
//! the recorded run replays against the spec the agent prints, and the explanation names
//! the optional trap's second execution and its cause.
#![allow(clippy::unwrap_used)]

mod common;

use common::{run, saap};
use saap::testing::TestRunner;
use saap::{Engine, EngineOptions, SqliteBackend, UserMessageEvent};
use saap_examples::broken::{self, ReviewClosed, ReviewNotes};
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

/// Runs the optional-trap agent on a SQLite file: the draft, the notes later, then the stop.
fn stored_review_run(db: &std::path::Path) -> String {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let backend = Arc::new(SqliteBackend::open(db).unwrap());
        let (engine, _) = Engine::open(broken::optional_trap(), backend, EngineOptions::default())
            .await
            .unwrap();
        let runner = TestRunner::new(engine.clone());
        let run = runner
            .start(UserMessageEvent::new("release notes"))
            .await
            .unwrap();
        run.wait_idle(WAIT).await.unwrap();
        run.send(ReviewNotes {
            notes: "fix the typo".into(),
        })
        .await
        .unwrap();
        run.wait_idle(WAIT).await.unwrap();
        run.send(ReviewClosed {}).await.unwrap();
        run.wait_for_end(WAIT).await.unwrap();
        engine.wait_for_end(run.run_id()).await.unwrap();
        run.run_id().to_string()
    })
}

#[test]
fn a_stored_run_exported_by_the_agent_cli_is_explained_by_saap_explain() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("review.db");
    let run_id = stored_review_run(&db);

    let spec = dir.path().join("spec.json");
    std::fs::write(&spec, broken::optional_trap().spec_json()).unwrap();
    let history = dir.path().join("run.json");
    let code = saap::cli::main_with(
        broken::optional_trap(),
        [
            "optional-trap-agent",
            "show",
            run_id.as_str(),
            "--db",
            db.to_str().unwrap(),
            "--history-out",
            history.to_str().unwrap(),
        ],
    );
    assert_eq!(code, std::process::ExitCode::SUCCESS);

    // The file is the dispatch core's History format, for this run and workflow.
    let h: saap_dispatch::replay::History =
        serde_json::from_str(&std::fs::read_to_string(&history).unwrap()).unwrap();
    assert_eq!(h.workflow, "ReviewAgentBroken");
    assert_eq!(h.run_key, saap_dispatch::ids::run_key(&run_id));

    let out = run(saap().args([
        "explain",
        spec.to_str().unwrap(),
        "--history",
        history.to_str().unwrap(),
        "--step",
        "publish",
    ]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("recorded run"), "{}", out.stdout);
    assert!(
        out.stdout.contains("publish") && out.stdout.contains("2 time"),
        "the explanation counts both executions: {}",
        out.stdout
    );
    assert!(
        out.stdout.contains("review_notes"),
        "the second execution is new because of the notes: {}",
        out.stdout
    );

    // JSON: the same run, step by step.
    let json = run(saap().args([
        "explain",
        spec.to_str().unwrap(),
        "--history",
        history.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(json.code, 0, "{}", json.stderr);
    let steps: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let publish = steps["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "publish")
        .unwrap();
    assert_eq!(publish["executions"], 2);
}

#[test]
fn a_history_replayed_against_another_agent_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("review.db");
    let run_id = stored_review_run(&db);
    let history = dir.path().join("run.json");
    let code = saap::cli::main_with(
        broken::optional_trap(),
        [
            "optional-trap-agent",
            "show",
            run_id.as_str(),
            "--db",
            db.to_str().unwrap(),
            "--history-out",
            history.to_str().unwrap(),
        ],
    );
    assert_eq!(code, std::process::ExitCode::SUCCESS);
    // The fixed twin has a precondition: another fingerprint.
    let spec = dir.path().join("fixed.json");
    std::fs::write(&spec, broken::optional_trap_fixed().spec_json()).unwrap();
    let out = run(saap().args([
        "explain",
        spec.to_str().unwrap(),
        "--history",
        history.to_str().unwrap(),
    ]));
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert!(out.stderr.contains("SAAP-R001"), "{}", out.stderr);
}
