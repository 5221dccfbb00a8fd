//! `saap mcp` driven by a real MCP client: PyPI's `mcp` package (the official Python SDK),
//! installed into the private test environment by `scripts/mcp-py-install` (the tests skip
//! with the reason if it cannot be installed), runs `tests/mcp/mcp_client.py`, which starts
//! `saap mcp …` over stdio, lists the tools and makes the calls a plan names, and prints what
//! came back as JSON. These tests assert on it: the tool names and schemas, real contents of
//! answers against a real nats-server with a saap worker's streams and a store written by the
//! example agents, error cases flagged `isError`, the output cut marker, the time bound, and
//! that nothing was written and no secret shown.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Output, install, nats_py, run, saap, snapshot_dir, workspace_root};
use saap_nats::testing::{NatsServer, free_port};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A Python with `mcp`, or the reason there is none (installed once per test process).
fn python() -> Result<String, String> {
    static PYTHON: std::sync::OnceLock<Result<String, String>> = std::sync::OnceLock::new();
    PYTHON.get_or_init(|| install("mcp-py-install")).clone()
}

/// What the client saw: the tools, and each call's answer.
struct Session {
    doc: Value,
    stderr: String,
}

impl Session {
    fn tools(&self) -> &Vec<Value> {
        self.doc["tools"].as_array().unwrap()
    }

    /// The answer to the call `i` of the plan: (is_error, text).
    fn call(&self, i: usize) -> (bool, String) {
        let c = &self.doc["calls"][i];
        assert!(
            c.get("protocol_error").is_none(),
            "call {i} ({}) was a protocol error: {c}",
            c["name"]
        );
        (
            c["is_error"].as_bool().unwrap(),
            c["text"].as_str().unwrap().to_owned(),
        )
    }

    /// The answer to call `i`, which must be a success, as JSON.
    fn ok(&self, i: usize) -> Value {
        let (err, text) = self.call(i);
        assert!(!err, "call {i} ({}) failed: {text}", self.doc["calls"][i]);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("call {i}: not JSON ({e}): {text}"))
    }

    /// The message of call `i`, which must be a tool error.
    fn err(&self, i: usize) -> String {
        let (err, text) = self.call(i);
        assert!(
            err,
            "call {i} ({}) did not fail: {text}",
            self.doc["calls"][i]
        );
        text
    }
}

/// Runs the Python client on `saap mcp ARGS` with the calls, or None when `mcp` cannot be
/// installed (the test then skips and says why).
fn session(args: &[String], env: &[(&str, &str)], calls: &[Value]) -> Option<Session> {
    let py = match python() {
        Ok(p) => p,
        Err(reason) => {
            eprintln!("SKIPPED: PyPI's mcp (the MCP client) could not be installed: {reason}");
            return None;
        }
    };
    let mut all = vec!["mcp".to_owned()];
    all.extend_from_slice(args);
    let plan = json!({
        "command": env!("CARGO_BIN_EXE_saap"),
        "args": all,
        "cwd": workspace_root(),
        "env": env.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        "calls": calls,
        "timeout": 60,
    });
    let dir = tempfile::tempdir().unwrap();
    let plan_file = dir.path().join("plan.json");
    std::fs::write(&plan_file, plan.to_string()).unwrap();
    let out = std::process::Command::new(py)
        .arg(workspace_root().join("crates/saap-cli/tests/mcp/mcp_client.py"))
        .arg(&plan_file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "the MCP client failed: {stderr}");
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the client printed no JSON ({e}): {}\n{stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    Some(Session { doc, stderr })
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"name": name, "arguments": arguments})
}

fn inspect_json(args: &[&str]) -> Value {
    let mut all = vec!["inspect"];
    all.extend_from_slice(args);
    all.push("--json");
    let out: Output = run(saap().args(&all).timeout(Duration::from_secs(60)));
    assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

/// Runs the example RagAgent's own command line as a NATS worker that starts one run, and
/// waits until that run stopped; returns its id.
fn rag_worker_run(url: &str) -> String {
    let args: Vec<String> = [
        "rag-agent",
        "run",
        "--engine",
        url,
        "--message",
        "what is saap?",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    std::thread::spawn(move || {
        let _ = saap::cli::main_with(saap_examples::rag::workflow(), args);
    });
    let bound = Instant::now() + Duration::from_secs(120);
    loop {
        let out = run(saap()
            .args([
                "inspect",
                "--server",
                url,
                "runs",
                "agent_RagAgent_stream",
                "--json",
            ])
            .timeout(Duration::from_secs(60)));
        if out.code == 0 {
            let doc: Value = serde_json::from_str(&out.stdout).unwrap();
            if let Some(r) = doc["runs"].as_array().unwrap().first()
                && r["status"] == "stopped"
            {
                return r["run_id"].as_str().unwrap().to_owned();
            }
        }
        assert!(Instant::now() < bound, "no stopped run: {}", out.stderr);
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A store written by the example agents' command line: a finished RagAgent run and an
/// ApprovalAgent run left waiting.
fn agent_store(dir: &Path) -> PathBuf {
    let db = dir.join("agents.db");
    let db_s = db.to_str().unwrap().to_owned();
    for (workflow, args) in [
        (
            saap_examples::rag::workflow(),
            vec![
                "rag-agent",
                "run",
                "--db",
                &db_s,
                "--message",
                "what is saap?",
            ],
        ),
        (
            saap_examples::approval::workflow(),
            vec![
                "approval-agent",
                "run",
                "--db",
                &db_s,
                "--message",
                "restart the database",
                "--timeout",
                "1",
            ],
        ),
    ] {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let _ = saap::cli::main_with(workflow, args);
    }
    db
}

/// A root folder with a spec, a Python agent, and a symlink that leads outside it.
fn spec_root(outer: &Path) -> PathBuf {
    let root = outer.join("root");
    std::fs::create_dir_all(root.join("specs")).unwrap();
    std::fs::create_dir_all(root.join("python")).unwrap();
    let ws = workspace_root();
    for f in ["optional-trap.yaml", "race-condition.yaml", "rag.yaml"] {
        std::fs::copy(
            ws.join("examples/specs").join(f),
            root.join("specs").join(f),
        )
        .unwrap();
    }
    std::fs::copy(
        ws.join("examples/python/runs_twice.py"),
        root.join("python/runs_twice.py"),
    )
    .unwrap();
    std::fs::write(
        outer.join("outside.yaml"),
        "saap_spec: 1\nname: Secret\nsteps: []\n",
    )
    .unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(outer.join("outside.yaml"), root.join("specs/link.yaml")).unwrap();
    root
}

const EXPECTED_TOOLS: &[&str] = &[
    "check",
    "simulate",
    "explore",
    "explain",
    "report",
    "server_info",
    "stream_list",
    "stream_report",
    "stream_info",
    "stream_state",
    "stream_subjects",
    "stream_view",
    "stream_get",
    "kv_ls",
    "kv_get",
    "runs",
    "run_timeline",
];

#[test]
fn a_real_mcp_client_lists_every_tool_and_calls_each_against_nats_a_store_and_specs() {
    if python().is_err() {
        let _ = session(&[], &[], &[]);
        return;
    }
    let server = NatsServer::start();
    let url = server.url();
    let run_id = rag_worker_run(&url);
    let outer = tempfile::tempdir().unwrap();
    let root = spec_root(outer.path());
    let store_dir = tempfile::tempdir().unwrap();
    let db = agent_store(store_dir.path());
    let store_before = snapshot_dir(store_dir.path());

    // Facts the answers must agree with, read with the CLI.
    let kv = inspect_json(&["--server", &url, "kv"]);
    let bucket = kv["buckets"][0]["bucket"].as_str().unwrap().to_owned();
    let keys = inspect_json(&["--server", &url, "kv", &bucket]);
    let key = keys["keys"][0].as_str().map(str::to_owned);
    let rag_before = inspect_json(&["--server", &url, "stream", "agent_RagAgent_stream"]);
    let store_runs = inspect_json(&["--db", db.to_str().unwrap(), "runs"]);
    let store_run = store_runs["runs"][0]["run_id"].as_str().unwrap().to_owned();
    // The spec of the store run's agent, under the root (a store keeps no spec).
    let store_class = store_runs["runs"][0]["agent_class"]
        .as_str()
        .unwrap()
        .to_owned();
    let store_spec = match store_class.as_str() {
        "RagAgent" => saap_examples::rag::workflow(),
        _ => saap_examples::approval::workflow(),
    };
    assert_eq!(store_spec.name(), store_class);
    std::fs::write(root.join("specs/stored.json"), store_spec.spec_json()).unwrap();

    let stream = "agent_RagAgent_stream";
    let inline = std::fs::read_to_string(root.join("specs/optional-trap.yaml")).unwrap();
    let mut calls = vec![
        /* 0 */ call("check", json!({"path": "specs/optional-trap.yaml"})),
        /* 1 */ call("check", json!({"path": "python/runs_twice.py"})),
        /* 2 */ call("check", json!({"spec": inline})),
        /* 3 */ call("check", json!({"path": "../outside.yaml"})),
        /* 4 */ call("check", json!({"path": "specs/link.yaml"})),
        /* 5 */ call("check", json!({"path": "specs/nope.yaml"})),
        /* 6 */ call("check", json!({})),
        /* 7 */ call("check", json!({"paht": "specs/optional-trap.yaml"})),
        /* 8 */ call("simulate", json!({"path": "specs/optional-trap.yaml"})),
        /* 9 */ call("explore", json!({"path": "specs/race-condition.yaml"})),
        /* 10 */
        call(
            "explain",
            json!({"path": "specs/optional-trap.yaml", "steps": ["translate"]}),
        ),
        /* 11 */
        call(
            "explain",
            json!({"path": "specs/optional-trap.yaml", "steps": ["nope"]}),
        ),
        /* 12 */ call("server_info", json!({})),
        /* 13 */ call("stream_list", json!({})),
        /* 14 */ call("stream_report", json!({})),
        /* 15 */ call("stream_info", json!({"stream_name": stream})),
        /* 16 */ call("stream_state", json!({"stream_name": stream})),
        /* 17 */ call("stream_subjects", json!({"stream_name": stream})),
        /* 18 */ call("stream_view", json!({"stream_name": stream, "limit": 2})),
        /* 19 */ call("stream_view", json!({"stream_name": stream, "count": 1})),
        /* 20 */ call("stream_get", json!({"stream_name": stream, "sequence": 1})),
        /* 21 */
        call(
            "stream_get",
            json!({"stream_name": stream, "sequence": 99999}),
        ),
        /* 22 */ call("stream_view", json!({"stream_name": "agent_Nope_stream"})),
        /* 23 */
        call(
            "stream_view",
            json!({"stream_name": stream, "limit": 1000000}),
        ),
        /* 24 */ call("kv_ls", json!({})),
        /* 25 */ call("kv_ls", json!({"bucket": bucket})),
        /* 26 */ call("kv_get", json!({"bucket": bucket, "key": "no-such-key"})),
        /* 27 */ call("runs", json!({"stream_name": stream})),
        /* 28 */ call("runs", json!({})),
        /* 29 */ call("run_timeline", json!({"run": run_id})),
        /* 30 */ call("server_info", json!({"source": "store"})),
        /* 31 */ call("runs", json!({"source": "store"})),
        /* 32 */ call("run_timeline", json!({"source": "store", "run": store_run})),
        /* 33 */
        call(
            "stream_view",
            json!({"source": "store", "stream_name": "RagAgent"}),
        ),
        /* 34 */ call("kv_ls", json!({"source": "store"})),
        /* 35 */ call("nope", json!({})),
        /* 36 */ call("stream_view", json!({"stream_name": stream, "run": "a.b"})),
    ];
    if let Some(k) = &key {
        /* 37 */
        calls.push(call("kv_get", json!({"bucket": bucket, "key": k})));
    }
    // explain on a run by id and report: children given the server's sources as flags.
    let first_run_call = calls.len();
    calls.extend([
        /* +0 */ call("explain", json!({"run": run_id})),
        /* +1 */
        call(
            "explain",
            json!({"source": "store", "run": store_run, "path": "specs/stored.json"}),
        ),
        /* +2 */ call("explain", json!({"source": "store", "run": store_run})),
        /* +3 */ call("explain", json!({"run": "--db=/etc/passwd"})),
        /* +4 */
        call(
            "report",
            json!({"symptom": "runs-twice", "step": "translate", "path": "specs/optional-trap.yaml"}),
        ),
        /* +5 */
        call(
            "report",
            json!({"symptom": "after-stop", "path": "specs/stored.json", "source": "store", "run": store_run}),
        ),
        /* +6 */ call("report", json!({"symptom": "runs-thrice", "path": "specs/optional-trap.yaml"})),
    ]);
    let args: Vec<String> = [
        "--server",
        &url,
        "--db",
        db.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let Some(s) = session(&args, &[], &calls) else {
        return;
    };

    // The tools: every name of the guide and saap's own, each with a description, an object
    // schema generated from its argument type, and the read-only hint.
    let names: Vec<&str> = s
        .tools()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, EXPECTED_TOOLS);
    for t in s.tools() {
        assert!(t["description"].as_str().unwrap().len() > 80, "{t}");
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert_eq!(t["annotations"]["readOnlyHint"], true, "{t}");
    }
    let view = s
        .tools()
        .iter()
        .find(|t| t["name"] == "stream_view")
        .unwrap();
    assert_eq!(view["inputSchema"]["required"], json!(["stream_name"]));
    assert!(
        view["inputSchema"]["properties"]["count"].is_object(),
        "{view}"
    );
    let check = s.tools().iter().find(|t| t["name"] == "check").unwrap();
    assert!(check["inputSchema"]["properties"]["path"].is_object());
    assert!(
        s.doc["server"]["instructions"]
            .as_str()
            .unwrap()
            .contains("check")
    );

    // check: a spec file, Python source, inline text.
    let c = s.ok(0);
    assert!(
        c["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"] == "SAAP010"),
        "{c}"
    );
    let py = s.ok(1);
    assert!(py.to_string().contains("runs_twice.py"), "{py}");
    assert!(
        py["summary"]["warnings"].as_u64().unwrap() + py["summary"]["errors"].as_u64().unwrap() > 0
    );
    let inl = s.ok(2);
    assert_eq!(inl["findings"], c["findings"]);
    // Paths stay under the root; bad arguments are tool errors that say what to do.
    assert!(s.err(3).contains("outside"), "{}", s.err(3));
    assert!(s.err(4).contains("outside"), "{}", s.err(4));
    assert!(s.err(5).contains("cannot be opened"), "{}", s.err(5));
    assert!(s.err(6).contains("give `path`"), "{}", s.err(6));
    assert!(s.err(7).contains("unknown field `paht`"), "{}", s.err(7));

    // simulate, explore, explain: the CLI's JSON.
    let sim = s.ok(8);
    assert_eq!(sim["executions_per_step"]["translate"], 2, "{sim}");
    let x = s.ok(9);
    assert_eq!(x["complete"], true, "{x}");
    assert!(!x["steps"].as_array().unwrap().is_empty());
    let e = s.ok(10);
    assert_eq!(e["steps"][0]["step"], "translate", "{e}");
    assert_eq!(e["steps"][0]["executions"], 2, "{e}");
    assert!(
        s.err(11).contains("no step is named `nope`"),
        "{}",
        s.err(11)
    );

    // The inspect family on NATS (the default when both sources are configured).
    assert!(s.ok(12)["version"].as_str().unwrap().starts_with("2."));
    let list = s.ok(13);
    assert!(
        list["streams"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["name"] == stream && x["role"] == "agent_class"),
        "{list}"
    );
    let rep = s.ok(14);
    assert!(
        rep["streams"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["name"] == stream && x["subjects"].is_array())
    );
    let info = s.ok(15);
    assert_eq!(
        info["summary"]["messages"],
        rag_before["summary"]["messages"]
    );
    assert!(info["config"].is_object());
    let state = s.ok(16);
    assert_eq!(
        state["state"]["last_seq"],
        rag_before["summary"]["last_seq"]
    );
    let subj = s.ok(17);
    assert!(
        subj["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["event_name"] == "UserMessageEvent"),
        "{subj}"
    );
    let page = s.ok(18);
    assert_eq!(page["messages"].as_array().unwrap().len(), 2);
    assert_eq!(page["more"], true);
    assert_eq!(
        page["messages"][0]["event"]["event_name"],
        "UserMessageEvent"
    );
    let last = s.ok(19);
    assert_eq!(last["messages"].as_array().unwrap().len(), 1);
    assert_eq!(
        last["messages"][0]["seq"],
        rag_before["summary"]["last_seq"]
    );
    let got = s.ok(20);
    assert_eq!(got["event"]["json"]["message"], "what is saap?", "{got}");
    assert!(s.err(21).contains("SAAP-I004"), "{}", s.err(21));
    let no_stream = s.err(22);
    assert!(
        no_stream.contains("SAAP-I003") && no_stream.contains("stream_list"),
        "{no_stream}"
    );
    assert!(s.err(23).contains("at most"), "{}", s.err(23));
    let buckets = s.ok(24);
    assert!(
        buckets["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["bucket"] == bucket)
    );
    assert_eq!(s.ok(25)["keys"], keys["keys"]);
    assert!(s.err(26).contains("SAAP-I006"), "{}", s.err(26));
    let runs = s.ok(27);
    assert_eq!(runs["runs"][0]["run_id"], run_id.as_str());
    assert_eq!(runs["runs"][0]["status"], "stopped");
    assert!(s.err(28).contains("stream_name"), "{}", s.err(28));
    let t = s.ok(29);
    assert_eq!(t["run"]["run_id"], run_id.as_str());
    assert!(t["messages"].as_array().unwrap().len() >= 3, "{t}");

    // The same tools on the store.
    assert_eq!(s.ok(30)["source"], "store");
    let sr = s.ok(31);
    assert_eq!(sr["runs"], store_runs["runs"]);
    let st = s.ok(32);
    assert_eq!(st["run"]["run_id"], store_run.as_str());
    assert!(!st["messages"].as_array().unwrap().is_empty());
    let sv = s.ok(33);
    assert!(!sv["messages"].as_array().unwrap().is_empty(), "{sv}");
    assert!(
        s.ok(34)["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["bucket"] == "run_context")
    );

    // An unknown tool is the one protocol error; a bad token is a tool error.
    assert!(
        s.doc["calls"][35]["protocol_error"]
            .as_str()
            .unwrap()
            .contains("no tool is named"),
        "{}",
        s.doc["calls"][35]
    );
    assert!(s.err(36).contains("SAAP-I008"), "{}", s.err(36));
    if key.is_some() {
        let v = s.ok(37);
        assert!(v["revision"].as_u64().unwrap() >= 1, "{v}");
    }

    // explain on a run by id: the saap worker's run with the spec from its discovery answer,
    // the stored run with the spec under the root; a store without a spec is a tool error.
    let r0 = first_run_call;
    let nats_run = s.ok(r0);
    assert_eq!(nats_run["run"], run_id.as_str(), "{nats_run}");
    assert_eq!(nats_run["recorded_by"], "saap");
    assert!(!nats_run["steps"].as_array().unwrap().is_empty());
    let stored = s.ok(r0 + 1);
    assert_eq!(stored["run"], store_run.as_str(), "{stored}");
    assert_eq!(stored["spec"], store_class.as_str());
    assert!(s.err(r0 + 2).contains("SAAP-I017"), "{}", s.err(r0 + 2));
    assert!(
        s.err(r0 + 3).contains("does not start with `-`"),
        "{}",
        s.err(r0 + 3)
    );
    // report: the optional trap's root cause, a stored run as evidence, a bad symptom.
    let rep = s.ok(r0 + 4);
    assert_eq!(rep["root_causes"][0]["code"], "SAAP010", "{rep}");
    let with_run = s.ok(r0 + 5);
    assert_eq!(with_run["symptom"]["run"], store_run.as_str(), "{with_run}");
    assert!(
        with_run["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["tool"] == "run"),
        "{with_run}"
    );
    assert!(s.err(r0 + 6).contains("runs-thrice"), "{}", s.err(r0 + 6));

    // Read-only: the store is byte for byte the same, the stream has the same messages and
    // no consumer was left behind.
    assert_eq!(snapshot_dir(store_dir.path()), store_before);
    let rag_after = inspect_json(&["--server", &url, "stream", stream]);
    assert_eq!(
        rag_after["summary"]["messages"],
        rag_before["summary"]["messages"]
    );
    assert_eq!(
        rag_after["summary"]["consumers"], rag_before["summary"]["consumers"],
        "a page consumer was left behind: {rag_after}"
    );
    assert!(
        s.stderr.contains("answered"),
        "the server logs on stderr: {}",
        s.stderr
    );
}

/// A spec whose every-order exploration takes far longer than a second: 18 outside events
/// that may arrive in any order, each consumed by its own step.
fn slow_spec() -> String {
    let n = 18;
    let mut s = String::from("saap_spec: 1\nname: Wide\nevents:\n");
    for i in 0..n {
        s.push_str(&format!("  - name: In{i}\n  - name: Out{i}\n"));
    }
    s.push_str("steps:\n  - name: start\n    params:\n      - {name: m, kind: required, types: [UserMessageEvent]}\n    outputs: []\n");
    for i in 0..n {
        s.push_str(&format!(
            "  - name: s{i}\n    params:\n      - {{name: x, kind: required, types: [In{i}]}}\n      - {{name: o, kind: list, types: [Out{}]}}\n    outputs: [Out{i}]\n",
            (i + 1) % n
        ));
    }
    s.push_str("simulation:\n  arrivals:\n    - {event: UserMessageEvent}\n");
    for i in 0..n {
        s.push_str(&format!("    - {{event: In{i}}}\n"));
    }
    s
}

#[test]
fn without_a_source_bounds_hold_answers_are_cut_and_secrets_never_show() {
    let outer = tempfile::tempdir().unwrap();
    let root = spec_root(outer.path());
    std::fs::write(root.join("specs/wide.yaml"), slow_spec()).unwrap();
    let args: Vec<String> = [
        "--root",
        root.to_str().unwrap(),
        "--max-output",
        "4096",
        "--tool-timeout",
        "2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let calls = [
        /* 0 */ call("server_info", json!({})),
        /* 1 */ call("stream_view", json!({"stream_name": "x"})),
        /* 2 */ call("simulate", json!({"path": "specs/rag.yaml"})),
        /* 3 */
        call(
            "explore",
            json!({"path": "specs/wide.yaml", "permute_arrivals": true, "max_states": 5000000}),
        ),
        /* 4 */ call("check", json!({"path": "specs/optional-trap.yaml"})),
    ];
    let started = Instant::now();
    let Some(s) = session(&args, &[], &calls) else {
        return;
    };
    let none = s.err(0);
    assert!(none.contains("--server") && none.contains("--db"), "{none}");
    assert!(s.err(1).contains("--server"), "{}", s.err(1));
    let (err, cut) = s.call(2);
    assert!(!err);
    assert!(cut.len() <= 4096, "{}", cut.len());
    assert!(cut.contains("[saap mcp: output cut at 4096 of"), "{cut}");
    assert!(
        cut.contains("max_completions"),
        "the marker says how to narrow: {cut}"
    );
    let slow = s.err(3);
    assert!(
        slow.contains("did not finish within 2s") && slow.contains("max_states"),
        "{slow}"
    );
    // The server still answers after a stopped call.
    assert!(!s.call(4).0);
    assert!(started.elapsed() < Duration::from_secs(60));

    // An unreachable server with a token: a bounded tool error that names the address, never
    // the token; the next call tries again.
    let dead = format!("nats://127.0.0.1:{}", free_port());
    let args: Vec<String> = [
        "--server",
        &dead,
        "--nats-token-env",
        "MCP_TEST_TOKEN",
        "--nats-timeout",
        "1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let calls = [
        call("server_info", json!({})),
        call("stream_list", json!({})),
    ];
    let Some(s) = session(&args, &[("MCP_TEST_TOKEN", "s3cr3t-mcp-token")], &calls) else {
        return;
    };
    for i in 0..2 {
        let e = s.err(i);
        assert!(e.contains("SAAP-I001") && e.contains("127.0.0.1"), "{e}");
    }
    assert!(!s.doc.to_string().contains("s3cr3t"), "{}", s.doc);
    assert!(!s.stderr.contains("s3cr3t"), "{}", s.stderr);
}

/// A Python with nats-py (the Python implementation's NATS client) as well, or the reason
/// there is none.
fn nats_python() -> Result<String, String> {
    python()?;
    nats_py()
}

#[test]
fn python_format_events_and_undecodable_messages_come_through_the_tools() {
    let py = match nats_python() {
        Ok(p) => p,
        Err(reason) => {
            eprintln!("SKIPPED: PyPI's mcp or nats-py could not be installed: {reason}");
            return;
        }
    };
    let server = NatsServer::start();
    let url = server.url();
    let out = std::process::Command::new(py)
        .arg(workspace_root().join("crates/saap-inspect/tests/python/publish_python_events.py"))
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the Python publisher failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stream = "agent_QaAgent_stream";
    let calls = [
        /* 0 */ call("stream_view", json!({"stream_name": stream})),
        /* 1 */ call("stream_get", json!({"stream_name": stream, "sequence": 9})),
        /* 2 */ call("runs", json!({"stream_name": stream})),
        /* 3 */ call("stream_subjects", json!({"stream_name": stream})),
        /* 4 */
        call("run_timeline", json!({"run": "6650000000000000000000a1"})),
    ];
    let Some(s) = session(&["--server".to_owned(), url], &[], &calls) else {
        return;
    };
    // The whole page comes; the two messages that are not SAAP events come raw with the
    // reason.
    let page = s.ok(0);
    let msgs = page["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 9, "{page}");
    assert_eq!(page["undecodable"], 2);
    assert_eq!(msgs[0]["event"]["json"]["message"], "what is saap?");
    assert_eq!(msgs[7]["undecodable"]["kind"], "invalid_event_id");
    let raw = s.ok(1);
    assert_eq!(raw["undecodable"]["kind"], "not_json", "{raw}");
    assert!(
        raw["undecodable"]["raw"]
            .as_str()
            .unwrap()
            .contains("this is not JSON")
    );
    let runs = s.ok(2);
    let statuses: Vec<&str> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["failed", "stopped"], "{runs}");
    assert_eq!(runs["runs"][1]["after_stop"], 1);
    let subjects = s.ok(3);
    assert!(
        subjects["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["event_name"] == "RetrievedContext"),
        "{subjects}"
    );
    let t = s.ok(4);
    assert_eq!(t["messages"].as_array().unwrap().len(), 5, "{t}");
    assert_eq!(t["messages"][4]["after_stop"], true, "{t}");
}
