//! `saap inspect --db` on a store written by the example agents' own command line (the code an
//! agent binary's `main` runs: `saap::cli::main_with`): a finished RagAgent run and an
//! ApprovalAgent run left waiting for a human. The store must not change by a byte, and bad
//! input is refused with its code.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Output, agent, run, saap, snapshot_dir};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

fn inspect(db: &Path, args: &[&str]) -> Output {
    let mut all = vec!["inspect", "--db", db.to_str().unwrap()];
    all.extend_from_slice(args);
    run(saap().args(&all).timeout(Duration::from_secs(60)))
}

fn inspect_json(db: &Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = inspect(db, &all);
    assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

#[test]
fn a_store_written_by_agents_is_read_without_changing_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agents.db");
    let db_s = db.to_str().unwrap();
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
    let before = snapshot_dir(dir.path());

    let server = inspect_json(&db, &["server"]);
    assert_eq!(server["source"], "store");
    let facts: serde_json::Map<String, Value> = server["facts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f[0].as_str().unwrap().to_owned(), f[1].clone()))
        .collect();
    assert_eq!(facts["runs"], 2);
    assert_eq!(facts["live_runs"], 1);

    let streams = inspect_json(&db, &["streams"]);
    let names: Vec<&str> = streams["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ApprovalAgent", "RagAgent"]);

    let runs = inspect_json(&db, &["runs"]);
    let list = runs["runs"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    let rag = list
        .iter()
        .find(|r| r["agent_class"] == "RagAgent")
        .unwrap();
    let approval = list
        .iter()
        .find(|r| r["agent_class"] == "ApprovalAgent")
        .unwrap();
    assert_eq!(rag["status"], "stopped");
    assert_eq!(approval["status"], "live");
    let live = inspect_json(&db, &["runs", "--status", "live"]);
    assert_eq!(live["runs"].as_array().unwrap().len(), 1);
    let page = inspect_json(&db, &["runs", "--limit", "1"]);
    assert_eq!(page["more"], true);
    let next = page["next"].as_str().unwrap();
    let page2 = inspect_json(&db, &["runs", "--limit", "1", "--after", next]);
    assert_eq!(page2["runs"].as_array().unwrap().len(), 1);
    assert_ne!(page2["runs"][0]["run_id"], page["runs"][0]["run_id"]);

    // One run: its journal entries with the dispatcher's records.
    let rag_id = rag["run_id"].as_str().unwrap();
    let t = inspect_json(&db, &["run", rag_id]);
    let msgs = t["messages"].as_array().unwrap();
    assert!(msgs.len() >= 3, "{t}");
    assert_eq!(msgs[0]["event"]["event_name"], "UserMessageEvent");
    assert_eq!(msgs[0]["event"]["flags"]["start"], true);
    assert!(
        !msgs[0]["journal"][0]["records"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(msgs.iter().all(|m| m["undecodable"].is_null()));
    assert!(t["run"]["ended_by"].is_string(), "{t}");
    let human = inspect(&db, &["run", rag_id]);
    assert_eq!(human.code, 0, "{}", human.stderr);
    assert!(
        human.stdout.contains("records: run_started"),
        "{}",
        human.stdout
    );

    // The workflow's journal as a stream: pages in arrival order, filters.
    let p1 = inspect_json(&db, &["view", "RagAgent", "--limit", "2"]);
    assert_eq!(p1["messages"].as_array().unwrap().len(), 2);
    assert_eq!(p1["more"], true);
    let from = p1["next_seq"].as_u64().unwrap().to_string();
    let p2 = inspect_json(&db, &["view", "RagAgent", "--limit", "2", "--from", &from]);
    assert_eq!(p2["messages"][0]["seq"].as_u64().unwrap().to_string(), from);
    let starts = inspect_json(&db, &["view", "RagAgent", "--event", "UserMessageEvent"]);
    assert_eq!(starts["messages"].as_array().unwrap().len(), 1);
    let by_run = inspect_json(
        &db,
        &["view", "RagAgent", "--run", rag_id, "--kind", "control"],
    );
    assert!(!by_run["messages"].as_array().unwrap().is_empty());
    let seq = p1["messages"][0]["seq"].as_u64().unwrap().to_string();
    let one = inspect_json(&db, &["get", "RagAgent", &seq]);
    assert_eq!(one["seq"].as_u64().unwrap().to_string(), seq);
    let stream = inspect_json(&db, &["stream", "RagAgent"]);
    assert!(
        stream["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["event_name"] == "UserMessageEvent")
    );

    // Contexts as buckets.
    let kv = inspect_json(&db, &["kv"]);
    let buckets: Vec<&str> = kv["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["bucket"].as_str().unwrap())
        .collect();
    assert_eq!(buckets, ["run_context", "thread_context"]);
    inspect_json(&db, &["kv", "thread_context"]);

    // Bad input: a missing entry, run, workflow, key.
    for (args, code) in [
        (&["get", "RagAgent", "999999"][..], "SAAP-I004"),
        (&["run", "6650000000000000000000ff"][..], "SAAP-I007"),
        (&["view", "NoSuchAgent"][..], "SAAP-I003"),
        (&["kv", "run_context", "nokey"][..], "SAAP-I008"),
        (&["kv", "elsewhere"][..], "SAAP-I005"),
        (&["view", "RagAgent", "--subject", "a.b"][..], "SAAP-I008"),
    ] {
        let out = inspect(&db, args);
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert!(out.stderr.contains(code), "{args:?}: {}", out.stderr);
    }

    // Read-only: not a byte changed, no file added (no -wal, no -shm, no journal).
    assert_eq!(snapshot_dir(dir.path()), before);
}

#[test]
fn a_store_owned_by_a_running_agent_or_not_a_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.db");
    let out = inspect(&missing, &["runs"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("SAAP-I010"), "{}", out.stderr);

    let text = dir.path().join("notes.txt");
    std::fs::write(
        &text,
        "not a database at all, just some text that is long enough",
    )
    .unwrap();
    let out = inspect(&text, &["runs"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("SAAP-I011"), "{}", out.stderr);

    // An engine holds the store (exclusive lock, WAL): refused at once, exit 3.
    let db = dir.path().join("owned.db");
    let backend = saap::SqliteBackend::open(&db).unwrap();
    let out = inspect(&db, &["runs"]);
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stderr.contains("SAAP-I012"), "{}", out.stderr);
    drop(backend);
}
