//! `saap explain --run RUN` against real parts: a store written by the example agents' own
//! command line (the explanation equals the one of `show --history-out` + `explain
//! --history`), a run of a saap NATS worker (spec from its class discovery answer), a run
//! published in the Python platform's format by a plain nats-py client (with the places where
//! the Python dispatcher would have differed), and bad input. Every invocation is bounded by a
//! process timeout; the store and the streams must not change.
#![allow(clippy::unwrap_used)]

mod common;

use common::{
    Output, agent, nats_py, run, saap, snapshot_dir, spec_file, start_rag_worker, workspace_root,
};
use saap_nats::testing::{NatsServer, free_port};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

const PY_RUN: &str = "6650000000000000000000b1";
const PY_ORPHAN_RUN: &str = "6650000000000000000000b2";
const PY_BAD_RUN: &str = "6650000000000000000000b3";

/// The example RagAgent's steps and how often each runs (the planner asks three searches).
const RAG_EXECUTIONS: &[(&str, u64)] = &[("plan", 1), ("search", 3), ("rank", 1), ("answer", 1)];

/// `(step, executions)` of an explain report.
fn executions(doc: &Value) -> Vec<(&str, u64)> {
    doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["step"].as_str().unwrap(),
                s["executions"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn saap_out(args: &[&str]) -> Output {
    run(saap().args(args).timeout(Duration::from_secs(120)))
}

fn json_of(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = saap_out(&all);
    assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

fn settings(dir: &Path) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.add_filter(&regex_escape(dir.to_str().unwrap()), "[DIR]");
    s.add_filter(r"[0-9a-f]{24}", "[ID]");
    s.add_filter(r"nats://127\.0\.0\.1:\d+", "nats://127.0.0.1:[PORT]");
    s
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '/' || c == '_' || c == '-' {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}

#[test]
fn a_stored_run_is_explained_as_its_history_file_is() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agents.db");
    let db_s = db.to_str().unwrap();
    let rag = saap_examples::rag::workflow();
    agent(
        saap_examples::rag::workflow(),
        &[
            "rag-agent",
            "run",
            "--db",
            db_s,
            "--message",
            "what is saap?",
        ],
    );
    agent(
        saap_examples::approval::workflow(),
        &[
            "approval-agent",
            "run",
            "--db",
            db_s,
            "--message",
            "restart the database",
            "--timeout",
            "1",
        ],
    );
    let specs = tempfile::tempdir().unwrap();
    let rag_spec = spec_file(specs.path(), "rag.json", &rag);
    let approval_spec = spec_file(
        specs.path(),
        "approval.json",
        &saap_examples::approval::workflow(),
    );
    let runs = json_of(&["inspect", "--db", db_s, "runs"]);
    let id_of = |class: &str| {
        runs["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["agent_class"] == class)
            .unwrap()["run_id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (rag_run, approval_run) = (id_of("RagAgent"), id_of("ApprovalAgent"));
    let before = snapshot_dir(dir.path());

    // The same explanation as the round trip through a History file.
    let history = specs.path().join("run.json");
    agent(
        saap_examples::rag::workflow(),
        &[
            "rag-agent",
            "show",
            &rag_run,
            "--db",
            db_s,
            "--history-out",
            history.to_str().unwrap(),
        ],
    );
    let via_file = json_of(&["explain", &rag_spec, "--history", history.to_str().unwrap()]);
    let direct = json_of(&["explain", &rag_spec, "--run", &rag_run, "--db", db_s]);
    for key in ["spec", "steps", "cycle", "cut_off"] {
        assert_eq!(direct[key], via_file[key], "{key}");
    }
    assert_eq!(direct["run"], rag_run.as_str());
    assert_eq!(direct["recorded_by"], "saap");
    assert!(direct.get("python_differences").is_none(), "{direct}");
    assert!(
        direct["events_from"]
            .as_str()
            .unwrap()
            .contains("agents.db"),
        "{direct}"
    );
    assert_eq!(executions(&direct), RAG_EXECUTIONS, "{direct}");

    // The text report.
    let text = saap_out(&["explain", &rag_spec, "--run", &rag_run, "--db", db_s]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    let s = settings(dir.path());
    let s2 = {
        let mut s2 = s.clone();
        s2.add_filter(&regex_escape(specs.path().to_str().unwrap()), "[SPECS]");
        s2
    };
    s2.bind(|| insta::assert_snapshot!("store_run_text", text.stdout));

    // A live run waiting for a human, and one step.
    let live = json_of(&[
        "explain",
        &approval_spec,
        "--run",
        &approval_run,
        "--db",
        db_s,
    ]);
    assert_eq!(live["recorded_by"], "saap");
    let one = json_of(&[
        "explain", &rag_spec, "--run", &rag_run, "--db", db_s, "--step", "answer",
    ]);
    assert_eq!(one["steps"].as_array().unwrap().len(), 1);

    // Bad input: an unknown run, a spec that does not replay the run, no spec, an unknown step.
    let unknown = saap_out(&[
        "explain",
        &rag_spec,
        "--run",
        "6650000000000000000000ff",
        "--db",
        db_s,
    ]);
    assert_eq!(unknown.code, 2, "{unknown:?}");
    assert!(unknown.stderr.contains("SAAP-I007"), "{}", unknown.stderr);
    let other = saap_out(&["explain", &approval_spec, "--run", &rag_run, "--db", db_s]);
    assert_eq!(other.code, 2, "{other:?}");
    assert!(other.stderr.contains("SAAP-I016"), "{}", other.stderr);
    assert!(
        other.stderr.contains("first disagreement at journal entry"),
        "{}",
        other.stderr
    );
    assert!(other.stdout.is_empty());
    let no_spec = saap_out(&["explain", "--run", &rag_run, "--db", db_s]);
    assert_eq!(no_spec.code, 2, "{no_spec:?}");
    assert!(no_spec.stderr.contains("SAAP-I017"), "{}", no_spec.stderr);
    let no_step = saap_out(&[
        "explain", &rag_spec, "--run", &rag_run, "--db", db_s, "--step", "nope",
    ]);
    assert_eq!(no_step.code, 2, "{no_step:?}");
    let nowhere = saap_out(&["explain", &rag_spec, "--run", &rag_run]);
    assert_eq!(nowhere.code, 2, "{nowhere:?}");
    assert!(nowhere.stderr.contains("--db"), "{}", nowhere.stderr);
    let not_a_store = saap_out(&["explain", &rag_spec, "--run", &rag_run, "--db", &rag_spec]);
    assert_eq!(not_a_store.code, 2, "{not_a_store:?}");
    assert!(
        not_a_store.stderr.contains("SAAP-I011"),
        "{}",
        not_a_store.stderr
    );

    // Read-only: not a byte changed.
    assert_eq!(snapshot_dir(dir.path()), before);
}

#[test]
fn a_saap_workers_run_is_explained_with_the_spec_it_announces() {
    let server = NatsServer::start();
    let url = server.url();
    start_rag_worker(&url);
    let bound = Instant::now() + Duration::from_secs(120);
    let run_id = loop {
        let out = saap_out(&[
            "inspect",
            "--server",
            &url,
            "runs",
            "agent_RagAgent_stream",
            "--json",
        ]);
        if out.code == 0 {
            let doc: Value = serde_json::from_str(&out.stdout).unwrap();
            if let Some(r) = doc["runs"].as_array().unwrap().first()
                && r["status"] == "stopped"
            {
                break r["run_id"].as_str().unwrap().to_owned();
            }
        }
        assert!(Instant::now() < bound, "no stopped run: {}", out.stderr);
        std::thread::sleep(Duration::from_millis(200));
    };
    let journal_before = json_of(&[
        "inspect",
        "--server",
        &url,
        "stream",
        "saap_journal_RagAgent",
    ]);

    let found = json_of(&["explain", "--run", &run_id, "--server", &url]);
    assert_eq!(found["recorded_by"], "saap");
    assert!(
        found["spec_from"].as_str().unwrap().contains("discovery"),
        "{found}"
    );
    assert!(
        found["events_from"]
            .as_str()
            .unwrap()
            .contains("saap_journal_RagAgent"),
        "{found}"
    );
    assert_eq!(executions(&found), RAG_EXECUTIONS, "{found}");

    // The same with the spec file, and with the stream named.
    let specs = tempfile::tempdir().unwrap();
    let rag_spec = spec_file(specs.path(), "rag.json", &saap_examples::rag::workflow());
    let given = json_of(&[
        "explain",
        &rag_spec,
        "--run",
        &run_id,
        "--server",
        &url,
        "--stream",
        "saap_journal_RagAgent",
    ]);
    assert_eq!(given["steps"], found["steps"]);

    // Read-only: the journal holds what it held, and no consumer is left.
    let journal_after = json_of(&[
        "inspect",
        "--server",
        &url,
        "stream",
        "saap_journal_RagAgent",
    ]);
    assert_eq!(
        journal_after["summary"]["messages"],
        journal_before["summary"]["messages"]
    );
    assert_eq!(journal_after["summary"]["consumers"], 0, "{journal_after}");
}

fn publish_python_run(url: &str) -> bool {
    let py = match nats_py() {
        Ok(p) => p,
        Err(reason) => {
            eprintln!(
                "SKIPPED: nats-py (PyPI) could not be installed, so no Python client can publish: {reason}"
            );
            return false;
        }
    };
    let out = std::process::Command::new(py)
        .arg(workspace_root().join("crates/saap-cli/tests/python/publish_python_run.py"))
        .arg(url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the Python publisher failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    true
}

#[test]
fn a_python_recorded_run_is_explained_with_the_python_differences() {
    let server = NatsServer::start();
    let url = server.url();
    if !publish_python_run(&url) {
        return;
    }
    let agent_py = "crates/saap-cli/tests/python/qa_agent.py";
    let doc = json_of(&["explain", agent_py, "--run", PY_RUN, "--server", &url]);
    assert_eq!(doc["recorded_by"], "python");
    assert_eq!(doc["spec"], "QaAgent");
    let by_step = |name: &str| {
        doc["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["step"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(by_step("search")["executions"], 1, "{doc}");
    assert_eq!(by_step("revise")["executions"], 1, "{doc}");
    let diffs = doc["python_differences"].as_array().unwrap();
    let rules: Vec<&str> = diffs.iter().map(|d| d["rule"].as_str().unwrap()).collect();
    assert!(rules.contains(&"list_needs_one"), "{rules:?}");
    assert!(rules.contains(&"latest_by_created_at"), "{rules:?}");
    assert!(rules.contains(&"event_after_stop"), "{rules:?}");
    let latest = diffs
        .iter()
        .find(|d| d["rule"] == "latest_by_created_at")
        .unwrap();
    assert!(
        latest["at"].as_str().unwrap().contains("`revise`"),
        "{latest}"
    );
    assert!(
        latest["python"].as_str().unwrap().contains("stream seq 3"),
        "{latest}"
    );
    assert!(
        latest["saap"].as_str().unwrap().contains("stream seq 4"),
        "{latest}"
    );
    assert!(
        latest["reference"]
            .as_str()
            .unwrap()
            .contains("saap-python-notes.md"),
        "{latest}"
    );
    assert!(!doc["notes"].as_array().unwrap().is_empty());

    let text = saap_out(&["explain", agent_py, "--run", PY_RUN, "--server", &url]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    let s = settings(Path::new("/nonexistent"));
    s.bind(|| insta::assert_snapshot!("python_run_text", text.stdout));

    // A run whose first event is not a start event.
    let orphan = json_of(&[
        "explain",
        agent_py,
        "--run",
        PY_ORPHAN_RUN,
        "--server",
        &url,
    ]);
    let rules: Vec<&str> = orphan["python_differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["rule"].as_str().unwrap())
        .collect();
    assert_eq!(rules, ["orphan_event"]);

    // Bad input: an undecodable message, no spec (a Python agent answers no discovery), an
    // unknown run, a stream that is not an agent stream, an unreachable server.
    let bad = saap_out(&["explain", agent_py, "--run", PY_BAD_RUN, "--server", &url]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(bad.stderr.contains("SAAP-I015"), "{}", bad.stderr);
    assert!(bad.stderr.contains("message 12"), "{}", bad.stderr);
    let no_spec = saap_out(&[
        "explain",
        "--run",
        PY_RUN,
        "--server",
        &url,
        "--timeout",
        "1",
    ]);
    assert_eq!(no_spec.code, 2, "{no_spec:?}");
    assert!(no_spec.stderr.contains("SAAP-I017"), "{}", no_spec.stderr);
    let unknown = saap_out(&[
        "explain",
        agent_py,
        "--run",
        "6650000000000000000000ff",
        "--server",
        &url,
    ]);
    assert_eq!(unknown.code, 2, "{unknown:?}");
    assert!(unknown.stderr.contains("SAAP-I007"), "{}", unknown.stderr);
    let wrong_agent = saap_out(&[
        "explain", agent_py, "--run", PY_RUN, "--server", &url, "--agent", "Nope",
    ]);
    assert_eq!(wrong_agent.code, 2, "{wrong_agent:?}");
    assert!(
        wrong_agent.stderr.contains("--agent"),
        "{}",
        wrong_agent.stderr
    );
    let dead = format!("nats://127.0.0.1:{}", free_port());
    let out = saap_out(&[
        "explain",
        agent_py,
        "--run",
        PY_RUN,
        "--server",
        &dead,
        "--timeout",
        "2",
    ]);
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stderr.contains("SAAP-I001"), "{}", out.stderr);

    // Read-only: nothing was added, no consumer is left behind.
    let after = json_of(&[
        "inspect",
        "--server",
        &url,
        "stream",
        "agent_QaAgent_stream",
    ]);
    assert_eq!(after["summary"]["messages"], 12);
    assert_eq!(after["summary"]["consumers"], 0, "{after}");
}
