//! The agent CLI against a real nats-server (started for the test on a free loopback port
//! with a temporary store): a run started by one process (`run --engine nats://…`, which
//! serves the class as a worker) is listed and shown by other invocations, and `send` from
//! another invocation reaches the waiting run, which the worker then finishes.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use saap_nats::testing::NatsServer;
use std::time::{Duration, Instant};

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn approval(args: &[&str]) -> Out {
    agent("approval-agent", args)
}

fn rag(args: &[&str]) -> Out {
    agent("rag-agent", args)
}

fn agent(bin: &str, args: &[&str]) -> Out {
    let out = Command::cargo_bin(bin)
        .unwrap()
        .args(args)
        .env("NO_COLOR", "1")
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// Kills the worker process when the test ends, however it ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn runs_json(url: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["runs", "--json", "--engine", url];
    args.extend_from_slice(extra);
    let out = approval(&args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

#[test]
fn a_run_on_nats_is_listed_shown_and_continued_by_send_from_other_invocations() {
    let server = NatsServer::start();
    let url = server.url();
    let bin = assert_cmd::cargo::cargo_bin("approval-agent");
    let _worker = Child(
        std::process::Command::new(bin)
            .args(["run", "--engine", &url, "--message", "restart the database"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );

    // Another invocation lists the run once the worker asked the human (bounded wait:
    // the worker process starts, takes the start event and runs `propose`).
    let bound = Instant::now() + Duration::from_secs(90);
    let run = loop {
        let doc = runs_json(&url, &["--status", "live"]);
        if let Some(r) = doc["runs"].as_array().unwrap().first()
            && r["events"].as_u64().unwrap() >= 2
        {
            break r.clone();
        }
        assert!(Instant::now() < bound, "no live run listed: {doc}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let run_id = run["run_id"].as_str().unwrap().to_string();
    assert_eq!(run["status"], "live");

    let show = approval(&["show", &run_id[..10], "--engine", &url]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(show.stdout.contains("ApprovalRequested"), "{}", show.stdout);
    assert!(show.stdout.contains("still live"), "{}", show.stdout);
    assert!(show.stdout.contains("owned by worker "), "{}", show.stdout);

    let answer = r#"{"_event_name": "ApprovalGiven", "approved": true, "by": "ann"}"#;
    let sent = approval(&[
        "send",
        &run_id,
        "--event",
        answer,
        "--engine",
        &url,
        "--timeout",
        "60",
        "--json",
    ]);
    assert_eq!(sent.code, 0, "{}\n{}", sent.stdout, sent.stderr);
    assert!(
        sent.stderr.contains("on the class stream"),
        "{}",
        sent.stderr
    );
    let last: serde_json::Value =
        serde_json::from_str(sent.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["status"], "stopped");
    assert_eq!(last["result"]["event"], "Executed", "{last}");

    let stopped = runs_json(&url, &["--status", "stopped"]);
    assert_eq!(stopped["runs"][0]["run_id"], run_id.as_str());
    assert!(
        runs_json(&url, &["--status", "live"])["runs"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let json = approval(&["show", &run_id, "--engine", &url, "--json"]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(doc["status"], "stopped");
    assert_eq!(doc["execution_counts"]["decide"], 1);
    assert_eq!(
        doc["owner"],
        serde_json::Value::Null,
        "only a live run has an owner"
    );

    // An ended run takes no more events; an unknown id says how to list runs.
    let again = approval(&["send", &run_id, "--event", answer, "--engine", &url]);
    assert_eq!(again.code, 2, "{}", again.stderr);
    assert!(
        again.stderr.contains("has ended (stopped)"),
        "{}",
        again.stderr
    );
    let unknown = approval(&["show", "ffff", "--engine", &url]);
    assert_eq!(unknown.code, 2);
    assert!(
        unknown.stderr.contains("list the runs with `runs`"),
        "{}",
        unknown.stderr
    );
}

/// `cancel --engine nats://…` (issue 21 §4): the cancellation goes on the class stream, the
/// worker that owns the run applies it, and the run reads as cancelled.
#[test]
fn a_run_on_nats_is_cancelled_from_another_invocation() {
    let server = NatsServer::start();
    let url = server.url();
    let bin = assert_cmd::cargo::cargo_bin("approval-agent");
    let _worker = Child(
        std::process::Command::new(bin)
            .args(["run", "--engine", &url, "--message", "drop the table"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let bound = Instant::now() + Duration::from_secs(90);
    let run_id = loop {
        let doc = runs_json(&url, &["--status", "live"]);
        if let Some(r) = doc["runs"].as_array().unwrap().first()
            && r["events"].as_u64().unwrap() >= 2
        {
            break r["run_id"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < bound, "no live run listed: {doc}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let cancelled = approval(&[
        "cancel",
        &run_id,
        "--reason",
        "wrong table",
        "--engine",
        &url,
        "--timeout",
        "60",
    ]);
    assert_eq!(
        cancelled.code, 0,
        "{}\n{}",
        cancelled.stdout, cancelled.stderr
    );
    assert!(
        cancelled.stderr.contains("RunCancelledEvent"),
        "{}",
        cancelled.stderr
    );
    let json = approval(&["show", &run_id, "--engine", &url, "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(doc["status"], "cancelled", "{doc}");
    assert_eq!(doc["progress"]["state"], "cancelled");
    let again = approval(&["cancel", &run_id, "--engine", &url]);
    assert_eq!(again.code, 2, "{}", again.stderr);
    assert!(
        again.stderr.contains("has ended (cancelled)"),
        "{}",
        again.stderr
    );
}

/// Budgets on NATS (issue 21 §5): a worker started with `--max-executions` gives each run it
/// starts that budget; the run pauses as `waiting_budget`, and `resume --engine nats://…` from
/// another invocation is granted by the run's owner, once, after which the run finishes.
#[test]
fn a_run_on_nats_paused_on_its_budget_is_resumed_from_another_invocation() {
    let server = NatsServer::start();
    let url = server.url();
    let bin = assert_cmd::cargo::cargo_bin("rag-agent");
    // plan fans out to three searches: a budget of 3 runs plan and two of them.
    let _worker = Child(
        std::process::Command::new(bin)
            .args([
                "run",
                "--engine",
                &url,
                "--max-executions",
                "3",
                "--message",
                "reset my password",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let bound = Instant::now() + Duration::from_secs(90);
    let run_id = loop {
        let out = rag(&["runs", "--json", "--status", "waiting", "--engine", &url]);
        let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_default();
        if let Some(r) = doc["runs"].as_array().and_then(|r| r.first())
            && r["status"] == "waiting_budget"
        {
            break r["run_id"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < bound, "no paused run listed: {doc}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let shown: serde_json::Value =
        serde_json::from_str(&rag(&["show", &run_id, "--engine", &url, "--json"]).stdout).unwrap();
    assert_eq!(shown["budget"]["max_executions"], 3, "{shown}");
    assert_eq!(shown["budget"]["spent"], true, "{shown}");

    // No amounts: the first budget (3 executions) is granted again.
    let resumed = rag(&[
        "resume",
        &run_id[..12],
        "--engine",
        &url,
        "--timeout",
        "60",
        "--json",
    ]);
    assert_eq!(resumed.code, 0, "{}\n{}", resumed.stdout, resumed.stderr);
    assert!(
        resumed.stderr.contains("RunResumeRequestEvent")
            && resumed.stderr.contains("resumed run")
            && resumed.stderr.contains("6 executions in all"),
        "{}",
        resumed.stderr
    );
    let last: serde_json::Value =
        serde_json::from_str(resumed.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["status"], "stopped", "{last}");
    assert_eq!(last["result"]["event"], "Answered");

    // Ended: nothing to resume, said before anything is sent.
    let again = rag(&["resume", &run_id, "--engine", &url]);
    assert_eq!(again.code, 2, "{}", again.stderr);
    assert!(again.stderr.contains("SAAP-E020"), "{}", again.stderr);
    assert!(again.stderr.contains("(stopped)"), "{}", again.stderr);
}

/// A run whose start event no worker has taken yet (issue 21 §1): `show` says it is queued
/// and asks whether a worker serves the class, instead of "no such run".
#[test]
fn show_says_a_run_no_worker_took_is_queued() {
    let server = NatsServer::start();
    let url = server.url();
    // A worker started and stopped: the class stream exists, nobody serves it now.
    let mut first = std::process::Command::new(assert_cmd::cargo::cargo_bin("approval-agent"))
        .args(["run", "--engine", &url])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let bound = Instant::now() + Duration::from_secs(60);
    while approval(&["runs", "--engine", &url]).code != 0 {
        assert!(Instant::now() < bound, "the worker never served");
        std::thread::sleep(Duration::from_millis(100));
    }
    first.kill().unwrap();
    first.wait().unwrap();
    // The start event, published as `run --message` does, with no worker to take it.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let run_id = "00112233445566778899aabb";
    rt.block_on(async {
        let nats = saap_nats::SaapNats::connect(&saap_nats::NatsOptions::new(&url))
            .await
            .unwrap();
        let hierarchy = saap_protocol::Hierarchy::builtin();
        let env = saap_protocol::EventEnvelope::new(
            &hierarchy,
            "UserMessageEvent",
            saap_nats::ids::fresh_event_id(),
            saap_nats::ids::now_ns(),
        )
        .unwrap()
        .with_field("message", serde_json::json!("deploy"));
        let address =
            saap_protocol::RunAddress::new("ApprovalAgent", "cli", "t1", run_id, run_id).unwrap();
        nats.publish_control(&address, &env).await.unwrap();
    });
    let shown = approval(&["show", run_id, "--engine", &url]);
    assert_eq!(shown.code, 1, "{}\n{}", shown.stdout, shown.stderr);
    assert!(
        shown.stdout.contains("is queued") && shown.stdout.contains("UserMessageEvent"),
        "{}",
        shown.stdout
    );
    let json = approval(&["show", run_id, "--engine", &url, "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(doc["status"], "queued", "{doc}");
    // An unknown id is still unknown.
    let unknown = approval(&["show", "ffffffffffffffffffffffff", "--engine", &url]);
    assert_eq!(unknown.code, 2, "{}", unknown.stderr);
}

fn research(args: &[&str]) -> Out {
    agent("research-agent", args)
}

/// The research agent on NATS runs its researcher in process beside the editor
/// (`with_delegate`): `runs --tree` shows the children from the editor's journal, and a
/// human's answer sent to a waiting child with `send --engine nats://…` reaches it through the
/// editor's class stream, after which the editor's run ends.
#[test]
fn a_child_run_in_process_is_answered_through_its_parents_class_on_nats() {
    let server = NatsServer::start();
    let url = server.url();
    let _worker = Child(
        std::process::Command::new(assert_cmd::cargo::cargo_bin("research-agent"))
            .args(["run", "--engine", &url, "--message", "owls, moths"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let bound = Instant::now() + Duration::from_secs(90);
    let (root, waiting) = loop {
        let listed = research(&["runs", "--json", "--engine", &url]);
        let doc: serde_json::Value = serde_json::from_str(&listed.stdout).unwrap_or_default();
        if let Some(root) = doc["runs"].as_array().and_then(|r| r.first()) {
            let root = root["run_id"].as_str().unwrap().to_string();
            let tree = research(&["runs", "--tree", &root, "--json", "--engine", &url]);
            let tree: serde_json::Value = serde_json::from_str(&tree.stdout).unwrap_or_default();
            let live: Vec<String> = tree["children"]
                .as_array()
                .map(|c| {
                    c.iter()
                        .filter(|c| c["status"] == "live")
                        .map(|c| c["run_id"].as_str().unwrap().to_string())
                        .collect()
                })
                .unwrap_or_default();
            let done = tree["children"]
                .as_array()
                .is_some_and(|c| c.len() == 2 && c.iter().any(|c| c["status"] == "stopped"));
            if done && live.len() == 1 {
                break (root, live[0].clone());
            }
        }
        assert!(Instant::now() < bound, "no tree with a waiting child");
        std::thread::sleep(Duration::from_millis(200));
    };
    let answer = r#"{"_event_name": "SourceGiven", "source": "the field guide"}"#;
    let sent = research(&[
        "send",
        &waiting,
        "--event",
        answer,
        "--engine",
        &url,
        "--timeout",
        "30",
    ]);
    assert_eq!(sent.code, 0, "{}\n{}", sent.stdout, sent.stderr);
    assert!(sent.stdout.contains("Finding"), "{}", sent.stdout);
    let bound = Instant::now() + Duration::from_secs(60);
    loop {
        let shown = research(&["show", &root, "--json", "--engine", &url]);
        let doc: serde_json::Value = serde_json::from_str(&shown.stdout).unwrap_or_default();
        if doc["status"] == "stopped" {
            break;
        }
        assert!(
            Instant::now() < bound,
            "the editor's run did not end: {doc}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn onboarding(args: &[&str]) -> Out {
    agent("onboarding-process", args)
}

/// The open work request of `run`, once it has one of type `answer`'s request: its id.
fn open_request(url: &str, run: &str, answer: &str) -> String {
    let bound = Instant::now() + Duration::from_secs(60);
    loop {
        let shown = onboarding(&["show", run, "--json", "--engine", url]);
        let doc: serde_json::Value = serde_json::from_str(&shown.stdout).unwrap_or_default();
        let open = doc["open_work_requests"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if let Some(r) = open.iter().find(|r| r["answer"] == answer) {
            return r["request_event_id"].as_str().unwrap().to_string();
        }
        assert!(
            Instant::now() < bound,
            "no open request for a {answer}: {doc}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A process served by a worker on NATS (seed 002's processes, issue 21 §3): its work
/// events travel as control events of its class; a person's and a program's answers sent
/// from other invocations reach it (one naming no open request is refused before it is
/// published, `SAAP-E022`), and the agent's work is a child run in the tree.
#[test]
fn a_process_on_nats_takes_answers_from_other_invocations() {
    let server = NatsServer::start();
    let url = server.url();
    let _worker = Child(
        std::process::Command::new(assert_cmd::cargo::cargo_bin("onboarding-process"))
            .args([
                "run",
                "--engine",
                &url,
                "--event",
                r#"{"_event_name": "NewHire", "name": "Ada"}"#,
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let bound = Instant::now() + Duration::from_secs(90);
    let run = loop {
        let listed = onboarding(&["runs", "--json", "--engine", &url]);
        let doc: serde_json::Value = serde_json::from_str(&listed.stdout).unwrap_or_default();
        if let Some(r) = doc["runs"].as_array().and_then(|r| r.first()) {
            break r["run_id"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < bound, "no run listed");
        std::thread::sleep(Duration::from_millis(200));
    };
    let request = open_request(&url, &run, "HumanWorkEvent");
    let wrong =
        r#"{"_event_name": "HumanWorkEvent", "request_event_id": "0123456789abcdef01234567"}"#;
    let refused = onboarding(&["send", &run, "--event", wrong, "--engine", &url]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("SAAP-E022") && refused.stderr.contains(&request),
        "{}",
        refused.stderr
    );
    let hr = format!(
        r#"{{"_event_name": "HumanWorkEvent", "request_event_id": "{request}", "form": {{"team": "core"}}}}"#
    );
    let sent = onboarding(&[
        "send",
        &run,
        "--event",
        &hr,
        "--engine",
        &url,
        "--timeout",
        "1",
    ]);
    assert!(
        sent.stderr.contains("on the class stream"),
        "{}",
        sent.stderr
    );
    let request = open_request(&url, &run, "ProgramWorkEvent");
    let account = format!(
        r#"{{"_event_name": "ProgramWorkEvent", "request_event_id": "{request}", "output": {{"login": "ada"}}}}"#
    );
    let done = onboarding(&[
        "send",
        &run,
        "--event",
        &account,
        "--engine",
        &url,
        "--timeout",
        "60",
    ]);
    assert_eq!(done.code, 0, "{}\n{}", done.stdout, done.stderr);
    assert!(
        done.stdout.contains("Welcome aboard, Ada!"),
        "{}",
        done.stdout
    );
    let tree = onboarding(&["runs", "--tree", &run, "--engine", &url]);
    assert!(
        tree.stdout
            .starts_with(&format!("Onboarding {run} stopped\n└── WelcomeWriter ")),
        "{}",
        tree.stdout
    );
}
