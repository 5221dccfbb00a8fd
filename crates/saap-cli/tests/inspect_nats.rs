//! `saap inspect --server` against a real nats-server (started per test on a free loopback
//! port with a temporary store): a stream written by a plain Python NATS client with
//! Python-format events (nats-py from PyPI, installed into the private test environment by
//! `scripts/nats-py-install`; the test skips with the reason if it cannot be installed), a
//! stream written by a saap worker running the example RagAgent, and bad input. Every
//! invocation is bounded by a process timeout, so nothing can hang the suite.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Output, nats_py, run, saap, start_rag_worker, workspace_root};
use saap_nats::testing::{NatsServer, ServerOptions, free_port};
use serde_json::Value;
use std::time::{Duration, Instant};

const RUN_A: &str = "6650000000000000000000a1";
const RUN_B: &str = "6650000000000000000000a2";
const PY_STREAM: &str = "agent_QaAgent_stream";

fn inspect(url: &str, args: &[&str]) -> Output {
    let mut all = vec!["inspect", "--server", url];
    all.extend_from_slice(args);
    run(saap().args(&all).timeout(Duration::from_secs(60)))
}

fn inspect_json(url: &str, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = inspect(url, &all);
    assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

/// Stored times differ per run; they have a fixed width, so tables keep their layout.
fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.add_filter(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", "[TIME]");
    s.add_filter(r"nats://127\.0\.0\.1:\d+", "nats://127.0.0.1:[PORT]");
    s
}

fn publish_python_events(url: &str) -> bool {
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
        .arg(workspace_root().join("crates/saap-inspect/tests/python/publish_python_events.py"))
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
fn python_events_are_listed_viewed_decoded_and_grouped_into_runs() {
    let server = NatsServer::start();
    let url = server.url();
    if !publish_python_events(&url) {
        return;
    }
    let s = settings();

    let streams = inspect_json(&url, &["streams"]);
    let py = streams["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == PY_STREAM)
        .unwrap();
    assert_eq!(py["messages"], 9);
    assert_eq!(py["role"], "agent_class");
    assert_eq!(py["agent_class"], "QaAgent");

    // Every message in order; the two that do not decode are shown raw with the reason, the
    // rest of the page still comes.
    let view = inspect(&url, &["view", PY_STREAM]);
    assert_eq!(view.code, 0, "{}", view.stderr);
    s.bind(|| insta::assert_snapshot!("python_view", view.stdout));
    let page = inspect_json(&url, &["view", PY_STREAM]);
    let msgs = page["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 9);
    assert_eq!(page["undecodable"], 2);
    assert_eq!(page["more"], false);
    assert_eq!(msgs[0]["event"]["event_name"], "UserMessageEvent");
    assert_eq!(msgs[0]["event"]["flags"]["start"], true);
    assert_eq!(msgs[0]["event"]["json"]["message"], "what is saap?");
    assert_eq!(msgs[0]["headers"][0][0], "Nats-Msg-Id");
    assert_eq!(msgs[2]["event"]["known_type"], "ControlEvent");
    assert_eq!(msgs[2]["event"]["json"]["docs"][1], "b.md");
    assert_eq!(msgs[3]["event"]["flags"]["stop"], true);
    assert_eq!(msgs[6]["event"]["flags"]["exception"], true);
    assert_eq!(msgs[7]["undecodable"]["kind"], "invalid_event_id");
    assert_eq!(msgs[8]["undecodable"]["kind"], "not_json");
    assert!(
        msgs[8]["undecodable"]["raw"]
            .as_str()
            .unwrap()
            .contains("this is not JSON")
    );

    // Filters are subject tokens, applied by the server.
    let filtered = inspect_json(
        &url,
        &[
            "view",
            PY_STREAM,
            "--run",
            RUN_A,
            "--event",
            "RetrievedContext",
        ],
    );
    let seqs: Vec<u64> = filtered["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [3, 5]);
    let display = inspect_json(&url, &["view", PY_STREAM, "--kind", "display"]);
    assert_eq!(display["messages"].as_array().unwrap().len(), 1);
    let thread = inspect_json(
        &url,
        &[
            "view",
            PY_STREAM,
            "--thread",
            "665000000000000000000100",
            "--run",
            RUN_B,
        ],
    );
    assert_eq!(thread["messages"].as_array().unwrap().len(), 4);
    let none = inspect_json(
        &url,
        &["view", PY_STREAM, "--since", "2999-01-01T00:00:00Z"],
    );
    assert!(none["messages"].as_array().unwrap().is_empty());

    // Paging: a page, then the next from its cursor; the last N.
    let p1 = inspect_json(&url, &["view", PY_STREAM, "--limit", "3"]);
    assert_eq!(p1["more"], true);
    assert_eq!(p1["next_seq"], 4);
    let p2 = inspect_json(&url, &["view", PY_STREAM, "--limit", "3", "--from", "4"]);
    let seqs: Vec<u64> = p2["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [4, 5, 6]);
    let last = inspect_json(&url, &["view", PY_STREAM, "--last", "2"]);
    let seqs: Vec<u64> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [8, 9]);

    // One message by sequence, raw when it does not decode.
    let get = inspect(&url, &["get", PY_STREAM, "8"]);
    assert_eq!(get.code, 0, "{}", get.stderr);
    s.bind(|| insta::assert_snapshot!("python_get_undecodable", get.stdout));
    let got = inspect_json(&url, &["get", PY_STREAM, "4"]);
    assert_eq!(got["event"]["json"]["answer"], "an agent runtime");

    // The stream: state and what was published, by event type.
    let stream = inspect(&url, &["stream", PY_STREAM]);
    assert_eq!(stream.code, 0, "{}", stream.stderr);
    s.bind(|| insta::assert_snapshot!("python_stream", stream.stdout));

    // Runs: most recent first, with status; the event after the stop is counted.
    let runs = inspect(&url, &["runs", PY_STREAM]);
    assert_eq!(runs.code, 0, "{}", runs.stderr);
    s.bind(|| insta::assert_snapshot!("python_runs", runs.stdout));
    let runs = inspect_json(&url, &["runs", PY_STREAM]);
    let list = runs["runs"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["run_id"], RUN_B);
    assert_eq!(list[0]["status"], "failed");
    assert_eq!(list[1]["status"], "stopped");
    assert_eq!(list[1]["ended_by"], "AnswerStopEvent");
    assert_eq!(list[1]["after_stop"], 1);
    let failed = inspect_json(&url, &["runs", PY_STREAM, "--status", "failed"]);
    assert_eq!(failed["runs"].as_array().unwrap().len(), 1);

    // One run's timeline, found without naming its stream.
    let timeline = inspect(&url, &["run", RUN_A]);
    assert_eq!(timeline.code, 0, "{}", timeline.stderr);
    s.bind(|| insta::assert_snapshot!("python_run_timeline", timeline.stdout));
    let t = inspect_json(&url, &["run", RUN_A]);
    let msgs = t["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 5);
    assert_eq!(msgs[4]["after_stop"], true);
    assert_eq!(t["stream"], PY_STREAM);

    // The server, and no KV bucket (the Python implementation keeps its state in Redis).
    let server_info = inspect_json(&url, &["server"]);
    assert!(server_info["version"].as_str().unwrap().starts_with("2."));
    let kv = inspect_json(&url, &["kv"]);
    assert!(kv["buckets"].as_array().unwrap().is_empty());

    // Read-only: nothing was added, no consumer is left behind.
    let after = inspect_json(&url, &["stream", PY_STREAM]);
    assert_eq!(after["summary"]["messages"], 9);
    assert_eq!(after["summary"]["consumers"], 0, "{after}");
    assert!(after["consumer_list"].as_array().unwrap().is_empty());
}

#[test]
fn a_saap_workers_stream_journal_and_buckets_are_read() {
    let server = NatsServer::start();
    let url = server.url();
    start_rag_worker(&url);
    let bound = Instant::now() + Duration::from_secs(120);
    let run = loop {
        let out = inspect(&url, &["runs", "agent_RagAgent_stream", "--json"]);
        if out.code == 0 {
            let doc: Value = serde_json::from_str(&out.stdout).unwrap();
            if let Some(r) = doc["runs"].as_array().unwrap().first()
                && r["status"] == "stopped"
            {
                break r.clone();
            }
        }
        assert!(
            Instant::now() < bound,
            "no stopped run listed: {}",
            out.stderr
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let run_id = run["run_id"].as_str().unwrap();
    assert_eq!(run["partial"], false);

    let t = inspect_json(&url, &["run", run_id, "--stream", "agent_RagAgent_stream"]);
    let msgs = t["messages"].as_array().unwrap();
    assert!(msgs.len() >= 3, "{t}");
    assert!(msgs.iter().all(|m| m["undecodable"].is_null()), "{t}");
    assert_eq!(msgs[0]["event"]["event_name"], "UserMessageEvent");
    assert!(t["run"]["ended_by"].is_string(), "{t}");
    let human = inspect(&url, &["run", run_id]);
    assert_eq!(human.code, 0, "{}", human.stderr);
    assert!(human.stdout.contains("stopped by"), "{}", human.stdout);

    // The worker's journal stream, decoded as journal entries with their decision records.
    let j = inspect_json(&url, &["view", "saap_journal_RagAgent", "--run", run_id]);
    let entries = j["messages"].as_array().unwrap();
    assert!(!entries.is_empty(), "{j}");
    assert!(entries.iter().all(|m| m["undecodable"].is_null()), "{j}");
    assert_eq!(entries[0]["journal"][0]["input"], "append");
    assert!(
        !entries[0]["journal"][0]["records"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // KV: the worker's buckets, their keys, a value.
    let kv = inspect_json(&url, &["kv"]);
    let buckets: Vec<&str> = kv["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["bucket"].as_str().unwrap())
        .collect();
    assert!(!buckets.is_empty(), "{kv}");
    for b in &buckets {
        let keys = inspect_json(&url, &["kv", b]);
        if let Some(k) = keys["keys"].as_array().unwrap().first() {
            let v = inspect_json(&url, &["kv", b, k.as_str().unwrap()]);
            assert!(v["revision"].as_u64().unwrap() >= 1, "{v}");
            break;
        }
    }
    let streams = inspect(&url, &["streams"]);
    assert!(
        streams.stdout.contains("agent_RagAgent_stream") && streams.stdout.contains("journal"),
        "{}",
        streams.stdout
    );
}

#[test]
fn bad_input_is_refused_with_a_code_and_what_to_do() {
    // Nothing listens on this port: a bounded failure, exit 3.
    let dead = format!("nats://127.0.0.1:{}", free_port());
    let out = inspect(&dead, &["--timeout", "2", "streams"]);
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stderr.contains("SAAP-I001"), "{}", out.stderr);

    let server = NatsServer::start();
    let url = server.url();
    let s = settings();
    let cases: &[(&str, &[&str])] = &[
        ("no_stream", &["view", "agent_Nope_stream"]),
        ("no_stream_info", &["stream", "agent_Nope_stream"]),
        ("bad_token", &["view", "agent_Nope_stream", "--run", "a.b"]),
        (
            "bad_time",
            &["view", "agent_Nope_stream", "--since", "yesterday"],
        ),
        ("no_bucket", &["kv", "nope"]),
        ("no_run", &["run", "6650000000000000000000ff"]),
        ("runs_without_stream", &["runs"]),
    ];
    for (name, args) in cases {
        let out = inspect(&url, args);
        assert_eq!(out.code, 2, "{name}: {out:?}");
        assert!(out.stdout.is_empty(), "{name}: {}", out.stdout);
        s.bind(|| insta::assert_snapshot!(format!("bad_{name}"), out.stderr));
    }
    // A message that is not there.
    if publish_python_events(&url) {
        let out = inspect(&url, &["get", PY_STREAM, "99"]);
        assert_eq!(out.code, 2, "{out:?}");
        s.bind(|| insta::assert_snapshot!("bad_no_message", out.stderr));
    }
    // No source at all.
    let out = run(saap()
        .args(["inspect", "streams"])
        .timeout(Duration::from_secs(60)));
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.contains("--server") && out.stderr.contains("--db"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_token_from_the_environment_opens_a_protected_server() {
    let server = NatsServer::start_with(ServerOptions {
        token: Some("s3cr3t-inspect".into()),
        ..Default::default()
    });
    let url = server.url();
    let out = run(saap()
        .args([
            "inspect",
            "--server",
            &url,
            "--nats-token-env",
            "INSPECT_TOKEN",
            "server",
            "--json",
        ])
        .env("INSPECT_TOKEN", "s3cr3t-inspect")
        .timeout(Duration::from_secs(60)));
    assert_eq!(out.code, 0, "{}", out.stderr);
    // Without it the server refuses: a server-side failure (exit 3) that never shows a secret.
    let out = inspect(&url, &["--timeout", "2", "server"]);
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stderr.contains("SAAP-I001"), "{}", out.stderr);
    // A variable that is not set is a usage error.
    let out = inspect(
        &url,
        &["--nats-token-env", "INSPECT_TOKEN_UNSET_X", "server"],
    );
    assert_eq!(out.code, 2, "{out:?}");
    assert!(!out.stderr.contains("s3cr3t"), "{}", out.stderr);
}
