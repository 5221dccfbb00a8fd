//! `saap mcp` through rmcp's own client over stdio, for fast protocol checks that need no
//! Python, server or store: the handshake, the tool list with its schemas, a spec tool's real
//! answer, bad arguments as tool errors (`isError`), an unknown tool as the one protocol
//! error, and several calls in flight at once. (`mcp_client.rs` drives the same server with
//! PyPI's `mcp` against a live system.)
#![allow(clippy::unwrap_used)]

mod common;

use common::workspace_root;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

fn params(name: &'static str, args: Value) -> CallToolRequestParams {
    let Value::Object(map) = args else {
        panic!("arguments must be an object")
    };
    CallToolRequestParams::new(name).with_arguments(map)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_protocol_works_through_rmcps_client() {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_saap"));
    cmd.args(["mcp", "--root", "examples"])
        .current_dir(workspace_root());
    let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();

    let info = client.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "saap");
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(
        tools.len(),
        17,
        "the tool table: check … explain, report, the inspect family"
    );
    for t in &tools {
        assert_eq!(t.input_schema.get("type").unwrap(), "object", "{}", t.name);
        assert_eq!(
            t.annotations.as_ref().unwrap().read_only_hint,
            Some(true),
            "{}",
            t.name
        );
    }

    // A real answer: the optional trap found in the example spec (paths under --root).
    let r = client
        .call_tool(params("check", json!({"path": "specs/optional-trap.yaml"})))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    let doc: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(doc["findings"][0]["code"], "SAAP010");

    // Arguments of the wrong type, a value out of range, a missing required argument: tool
    // errors with what is wrong, not protocol errors.
    for (name, args, says) in [
        ("check", json!({"path": 5}), "invalid type"),
        (
            "explore",
            json!({"path": "specs/rag.yaml", "max_states": 0}),
            "at least 1",
        ),
        (
            "stream_get",
            json!({"sequence": 1}),
            "missing field `stream_name`",
        ),
        (
            "simulate",
            json!({"path": "specs/rag.yaml", "policy": "random"}),
            "unknown variant",
        ),
    ] {
        let r = client.call_tool(params(name, args)).await.unwrap();
        assert_eq!(r.is_error, Some(true), "{name}: {}", text(&r));
        assert!(text(&r).contains(says), "{name}: {}", text(&r));
    }

    // An unknown tool is the one protocol error.
    let e = client
        .call_tool(params("stream_delete", json!({})))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no tool is named"), "{e}");

    // Calls in flight at once (more than the server runs children at once) each get their
    // own answer.
    let sim = |s: &'static str| client.call_tool(params("simulate", json!({"path": s})));
    let (a, b, c) = tokio::join!(
        sim("specs/rag.yaml"),
        sim("specs/race-condition.yaml"),
        sim("specs/list-reruns.yaml")
    );
    let mut names = Vec::new();
    for (spec, r) in [("rag", a), ("race-condition", b), ("list-reruns", c)] {
        let r = r.unwrap();
        assert_eq!(r.is_error, Some(false), "{spec}: {}", text(&r));
        let doc: Value = serde_json::from_str(&text(&r)).unwrap();
        assert!(doc["executions_per_step"].is_object(), "{spec}: {doc}");
        names.push(doc["spec"].as_str().unwrap().to_owned());
    }
    names.sort();
    names.dedup();
    assert_eq!(
        names.len(),
        3,
        "each call got its own spec's answer: {names:?}"
    );
    client.cancel().await.unwrap();
}

/// The children of process `pid` whose command line contains `word` (Linux `/proc`).
#[cfg(target_os = "linux")]
fn children_with(pid: u32, word: &str) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(|e| e.ok())
        .filter(|e| {
            let p = e.path();
            let stat = std::fs::read_to_string(p.join("stat")).unwrap_or_default();
            // pid (comm) state ppid …: the fields after the last ')'.
            let ppid = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            let cmdline = std::fs::read(p.join("cmdline")).unwrap_or_default();
            ppid == Some(pid) && String::from_utf8_lossy(&cmdline).contains(word)
        })
        .count()
}

/// A client's cancellation of a running exploration stops its child process at once.
#[cfg(target_os = "linux")]
#[test]
fn a_cancelled_exploration_is_killed() {
    use std::io::Write;
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let n = 18;
    let mut spec = String::from("saap_spec: 1\nname: Wide\nevents:\n");
    for i in 0..n {
        spec.push_str(&format!("  - name: In{i}\n  - name: Out{i}\n"));
    }
    spec.push_str("steps:\n  - name: start\n    params:\n      - {name: m, kind: required, types: [UserMessageEvent]}\n    outputs: []\n");
    for i in 0..n {
        spec.push_str(&format!(
            "  - name: s{i}\n    params:\n      - {{name: x, kind: required, types: [In{i}]}}\n      - {{name: o, kind: list, types: [Out{}]}}\n    outputs: [Out{i}]\n",
            (i + 1) % n
        ));
    }
    spec.push_str("simulation:\n  arrivals:\n    - {event: UserMessageEvent}\n");
    for i in 0..n {
        spec.push_str(&format!("    - {{event: In{i}}}\n"));
    }
    std::fs::write(dir.path().join("wide.yaml"), spec).unwrap();
    let mut server = std::process::Command::new(env!("CARGO_BIN_EXE_saap"))
        .args(["mcp", "--root", ".", "--tool-timeout", "120"])
        .current_dir(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = server.id();
    let mut input = server.stdin.take().unwrap();
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"explore","arguments":{"path":"wide.yaml","permute_arrivals":true,"max_states":5000000}}}"#,
    ] {
        writeln!(input, "{line}").unwrap();
    }
    let wait_for = |want: usize| {
        let bound = Instant::now() + Duration::from_secs(30);
        while children_with(pid, "explore") != want {
            assert!(Instant::now() < bound, "expected {want} explore children");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_for(1);
    writeln!(
        input,
        r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":2,"reason":"test"}}}}"#
    )
    .unwrap();
    wait_for(0);
    drop(input);
    let _ = server.wait();
}
