//! CLI contract tests (seed §9): help and parse errors, every command pretty and `--json`,
//! lifecycle and isolation, concurrency, idle shutdown, shared validation and redaction,
//! cursors across reset, service replacement, and bad input.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;

use common::{Env, event, poll, post};
use serde_json::Value;

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The `--json` error envelope of a failed command: on stderr, nothing on stdout.
fn err_json(o: &std::process::Output) -> Value {
    assert!(
        o.stdout.is_empty(),
        "a failing --json command printed on stdout: {}",
        stdout(o)
    );
    assert_ne!(o.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&o.stderr)
        .unwrap_or_else(|e| panic!("stderr is not one JSON envelope ({e}): {}", stderr(o)));
    assert_eq!(v["ok"], false);
    assert_eq!(v["schemaVersion"], 1);
    v
}

/// The commands a hint list offers, in order.
fn hint_commands(v: &Value) -> Vec<String> {
    v["hints"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h["command"].as_str().map(str::to_owned))
        .collect()
}

// ---------------------------------------------------------------- help and parse errors

#[test]
fn help_teaches_with_examples() {
    let env = Env::new();
    insta::assert_snapshot!("help", env.ok(&["--help"]));
    insta::assert_snapshot!("help_logs", env.ok(&["logs", "--help"]));
    insta::assert_snapshot!("help_query", env.ok(&["query", "--help"]));
    assert!(
        !env.root().exists(),
        "help must not touch the state directory"
    );
}

#[test]
fn version_prints_the_bare_package_version() {
    let env = Env::new();
    for args in [
        &["--version"][..],
        &["--json", "--version"],
        &["logs", "--version"],
    ] {
        assert_eq!(
            env.ok(args),
            format!("{}\n", env!("CARGO_PKG_VERSION")),
            "{args:?}"
        );
    }
}

#[test]
fn help_lists_exactly_the_public_commands_and_exits_0() {
    let env = Env::new();
    let help = env.ok(&["--help"]);
    assert_eq!(
        env.ok(&["--json", "--help"]),
        help,
        "--help succeeds with --json too"
    );
    let block: Vec<&str> = help
        .split("Commands:\n")
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        block,
        [
            "create", "template", "reset", "logs", "query", "status", "sessions", "clean", "stop"
        ]
    );
    let template = env.ok(&["template", "--help"]);
    assert!(template.contains("--language <language>"), "{template}");
    assert!(template.contains("--ingest <http|file>"), "{template}");
    // `help` is not a command: an unknown command, exit 2, in both renderers.
    let o = env.run(&["help"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).is_empty());
    let v = err_json(&env.run(&["--json", "help"]));
    assert_eq!(v["error"]["code"], "INVALID_ARGUMENTS");
    // Missing required options exit 2.
    for args in [
        &["reset"][..],
        &["template", "--language", "c"],
        &["query", "--session", "x"],
    ] {
        assert_eq!(env.run(args).status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn parse_errors_exit_2_in_both_renderers() {
    let env = Env::new();
    let o = env.run(&["logs"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--session"), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());

    let o = env.run(&["--json", "logs"]);
    assert_eq!(o.status.code(), Some(2));
    let v: Value = err_json(&o);
    insta::assert_json_snapshot!("parse_error_json", v);
    for args in [
        &["--json", "frobnicate"][..],
        &["--json", "logs", "--session", "x", "--limit", "0"],
    ] {
        let o = env.run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert_eq!(err_json(&o)["error"]["code"], "INVALID_ARGUMENTS");
    }

    for args in [
        &["frobnicate"][..],
        &["logs", "--session", "x", "--limit", "0"],
        &["logs", "--session", "x", "--limit", "abc"],
        &[],
    ] {
        assert_eq!(env.run(args).status.code(), Some(2), "{args:?}");
    }
    assert!(!env.service_running());
}

#[test]
fn malformed_session_ids_are_rejected_before_touching_files() {
    let env = Env::new();
    for id in [
        "../../etc",
        "not-a-uuid",
        "0B6F1F3E-8D7A-4C56-9A51-2F0E8A1C9D42",
        "0b6f1f3e-8d7a-4c56-9a51-2f0e8a1c9d42/x",
    ] {
        let o = env.run(&["--json", "logs", "--session", id]);
        assert_eq!(o.status.code(), Some(2), "{id}");
        let v: Value = err_json(&o);
        assert_eq!(v["error"]["code"], "INVALID_ARGUMENTS", "{id}");
        assert_eq!(v["error"]["reason"], "INVALID_SESSION_ID", "{id}");
    }
    insta::assert_json_snapshot!(
        "invalid_session_json",
        err_json(&env.run(&["--json", "status", "--session", "../x"]))
    );
    let o = env.run(&["status", "--session", "../x"]);
    insta::assert_snapshot!("invalid_session_pretty", stderr(&o));
}

// ---------------------------------------------------------------- commands, both renderers

#[test]
fn create_pretty_and_json() {
    let env = Env::new();
    let pretty = env.ok(&["create"]);
    insta::assert_snapshot!("create_pretty", env.filter(&pretty));
    let v = env.json(&["create"]);
    insta::assert_snapshot!(
        "create_json",
        env.filter(&serde_json::to_string_pretty(&v).unwrap())
    );
    assert_eq!(v["schemaVersion"], 1);
    assert_eq!(v["ok"], true);
    assert_eq!(v["command"], "create");
}

#[test]
fn template_pretty_json_and_unsupported() {
    let env = Env::new();
    insta::assert_snapshot!(
        "template_python_pretty",
        env.ok(&["template", "--language", "python", "--ingest", "file"])
    );
    let v = env.json(&["template", "--language", "rust", "--ingest", "file"]);
    assert_eq!(v["data"]["dataEncoding"], "serialized-json");
    assert_eq!(v["data"]["placement"]["helper"], "top-level");
    assert!(v["data"]["placeholders"]["__DATA_JSON_EXPRESSION__"].is_string());
    let v = env.json(&["template", "--language", "c", "--ingest", "file"]);
    assert_eq!(v["data"]["placement"]["helper"], "file-start");
    let v = env.json(&["template", "--language", "c", "--ingest", "file"]);
    assert_eq!(v["data"]["languageStandard"], "c99");
    assert!(
        v["data"]["callTemplate"]
            .as_str()
            .unwrap()
            .contains("agent_debug_emit(")
    );
    let mut v = env.json(&["template", "--language", "typescript", "--ingest", "http"]);
    assert!(
        v["data"]["helperTemplate"]
            .as_str()
            .unwrap()
            .contains("agentDebugLog")
    );
    assert!(v["data"].get("helper").is_none() && v["data"].get("call").is_none());
    v["data"]["helperTemplate"] = Value::from("[HELPER]");
    insta::assert_json_snapshot!("template_ts_json", v);
    let o = env.run(&["template", "--language", "cobol", "--ingest", "file"]);
    assert_eq!(o.status.code(), Some(2));
    insta::assert_snapshot!("template_unsupported", stderr(&o));
    let o = env.run(&[
        "--json",
        "template",
        "--language",
        "python",
        "--ingest",
        "http",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let v: Value = err_json(&o);
    assert_eq!(v["error"]["code"], "UNSUPPORTED_LANGUAGE");
    assert!(!env.service_running(), "template is session-independent");
}

#[test]
fn logs_status_query_sessions_pretty_and_json() {
    let env = Env::new();
    let (id, port, append) = env.create();
    let body = format!(
        "{}\n{}\n{}\n",
        event("H1", 1),
        event("H2", 2),
        event("H1", 3)
    );
    assert_eq!(
        post(port, &id, "application/x-ndjson", body.as_bytes()).0,
        200
    );
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&append)
        .unwrap();
    writeln!(f, "{}", event("H3", 4)).unwrap();
    writeln!(
        f,
        "{{\"hypothesisId\":\"H3\",\"location\":\"a.py:1\",\"message\":\"m\",\"timestamp\":1}}"
    )
    .unwrap();
    drop(f);

    let logs = env.ok(&["logs", "--session", &id]);
    insta::assert_snapshot!("logs_pretty", env.filter(&logs));
    let v = env.json(&[
        "logs",
        "--session",
        &id,
        "--hypothesis",
        "H1",
        "--limit",
        "1",
    ]);
    insta::assert_snapshot!(
        "logs_json_filtered",
        env.filter(&serde_json::to_string_pretty(&v).unwrap())
    );
    assert_eq!(v["scope"]["hypothesisFilter"], serde_json::json!(["H1"]));
    assert_eq!(v["statistics"]["matchedCount"], 2);
    assert_eq!(v["hints"][0]["action"], "next-page");
    assert!(
        v["hints"][0]["command"]
            .as_str()
            .unwrap()
            .contains("--offset 1 --limit 1")
    );
    assert_eq!(v["data"]["pagination"]["hasMore"], true);
    assert_eq!(v["data"]["pagination"]["nextOffset"], 1);
    assert!(v["data"].get("events").is_none());

    insta::assert_snapshot!(
        "status_pretty",
        env.filter(&env.ok(&["status", "--session", &id]))
    );
    let v = env.json(&["status", "--session", &id]);
    insta::assert_snapshot!(
        "status_json",
        env.filter(&serde_json::to_string_pretty(&v).unwrap())
    );

    insta::assert_snapshot!(
        "query_table_pretty",
        env.filter(&env.ok(&[
            "query",
            "--session",
            &id,
            "{h: .hypothesisId, n: .sequence}"
        ]))
    );
    insta::assert_snapshot!(
        "query_scalar_pretty",
        env.filter(&env.ok(&[
            "query",
            "--session",
            &id,
            "--slurp",
            "map(.data.cacheKey) | .[]"
        ]))
    );
    let v = env.json(&[
        "query",
        "--session",
        &id,
        "--slurp",
        "group_by(.hypothesisId) | map({h: .[0].hypothesisId, n: length})",
    ]);
    insta::assert_snapshot!(
        "query_json",
        env.filter(&serde_json::to_string_pretty(&v).unwrap())
    );

    insta::assert_snapshot!("sessions_pretty", env.filter(&env.ok(&["sessions"])));
    let v = env.json(&["sessions", "--all"]);
    assert_eq!(v["data"]["sessions"][0]["sessionId"], id.as_str());
    assert_eq!(v["data"]["sessions"][0]["eventCount"], 4);
}

#[test]
fn logs_pagination_hints_are_complete_commands() {
    let env = Env::new();
    let (id, port, _) = env.create();
    let body: String = (1..=7).map(|n| event("H1", n) + "\n").collect();
    post(port, &id, "application/x-ndjson", body.as_bytes());
    let mut offset = 0;
    let mut seen = Vec::new();
    let mut args: Vec<String> = vec![
        "logs".into(),
        "--session".into(),
        id.clone(),
        "--limit".into(),
        "3".into(),
    ];
    loop {
        let a: Vec<&str> = std::iter::once("--json")
            .chain(args.iter().map(String::as_str))
            .collect();
        let v: Value = serde_json::from_str(&env.ok(&a)).unwrap();
        for e in v["data"]["records"].as_array().unwrap() {
            seen.push(e["sequence"].as_u64().unwrap());
        }
        let next = v["hints"].as_array().unwrap().iter().find_map(|h| {
            (h["action"] == "next-page").then(|| h["command"].as_str().unwrap().to_owned())
        });
        let Some(next) = next else { break };
        args = next.split_whitespace().skip(1).map(str::to_owned).collect();
        offset += 1;
        assert!(offset < 10);
    }
    assert_eq!(seen, (1..=7).collect::<Vec<_>>());
}

// ---------------------------------------------------------------- lifecycle and isolation

#[test]
fn reset_clean_and_isolation() {
    let env = Env::new();
    let (a, port, append_a) = env.create();
    let (b, _, _) = env.create();
    post(port, &a, "application/x-ndjson", event("H1", 1).as_bytes());
    post(
        port,
        &b,
        "application/x-ndjson",
        format!("{}\n{}", event("H9", 1), event("H9", 2)).as_bytes(),
    );
    assert_eq!(
        env.json(&["logs", "--session", &a])["statistics"]["eventCount"],
        1
    );
    assert_eq!(
        env.json(&["logs", "--session", &b])["statistics"]["eventCount"],
        2
    );

    let v = env.json(&["reset", "--session", &a]);
    insta::assert_snapshot!(
        "reset_json",
        env.filter(&serde_json::to_string_pretty(&v).unwrap())
    );
    assert_eq!(
        v["data"]["appendPath"].as_str().unwrap(),
        append_a.to_str().unwrap()
    );
    assert_eq!(
        env.json(&["logs", "--session", &a])["statistics"]["eventCount"],
        0
    );
    assert_eq!(
        env.json(&["logs", "--session", &b])["statistics"]["eventCount"],
        2,
        "reset is per session"
    );
    post(port, &a, "application/x-ndjson", event("H1", 5).as_bytes());
    let v = env.json(&["logs", "--session", &a]);
    assert_eq!(
        v["data"]["records"][0]["sequence"], 1,
        "sequence restarts at 1"
    );

    insta::assert_snapshot!(
        "clean_pretty",
        env.filter(&env.ok(&["clean", "--session", &a]))
    );
    assert!(!env.root().join("sessions").join(&a).exists());
    let o = env.run(&["logs", "--session", &a]);
    assert_eq!(o.status.code(), Some(5));
    insta::assert_snapshot!("session_not_found", env.filter(&stderr(&o)));
    let o = env.run(&["--json", "clean", "--session", &a]);
    assert_eq!(o.status.code(), Some(5));
    assert_eq!(
        env.json(&["logs", "--session", &b])["statistics"]["eventCount"],
        2
    );
    // HTTP ingest to a removed session is a 404, not a crash.
    assert_eq!(
        post(port, &a, "application/x-ndjson", event("H1", 1).as_bytes()).0,
        404
    );
}

#[test]
fn deleted_session_directory_is_session_not_found() {
    let env = Env::new();
    let (id, _, _) = env.create();
    std::fs::remove_dir_all(env.root().join("sessions").join(&id)).unwrap();
    assert_eq!(
        env.run(&["status", "--session", &id]).status.code(),
        Some(5)
    );
}

#[test]
fn symlinked_session_directory_is_rejected() {
    let env = Env::new();
    let (id, _, _) = env.create();
    let dir = env.root().join("sessions").join(&id);
    let moved = env.dir.path().join("elsewhere");
    std::fs::rename(&dir, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &dir).unwrap();
    let o = env.run(&["--json", "logs", "--session", &id]);
    assert_eq!(o.status.code(), Some(6));
    let v: Value = err_json(&o);
    assert_eq!(v["error"]["code"], "STATE_UNSAFE");
    assert_eq!(env.run(&["clean", "--session", &id]).status.code(), Some(6));
    assert!(
        moved.join("meta.json").exists(),
        "nothing outside the state dir is touched"
    );
}

#[test]
fn reset_invalidates_cursors_and_cursors_page_with_a_watermark() {
    let env = Env::new();
    let (id, port, _) = env.create();
    let body: String = (1..=5).map(|n| event("H1", n) + "\n").collect();
    post(port, &id, "application/x-ndjson", body.as_bytes());
    let v = env.json(&[
        "query",
        "--session",
        &id,
        "--limit",
        "2",
        "--timeout-ms",
        "5000",
        ".sequence",
    ]);
    assert_eq!(v["data"]["rows"], serde_json::json!([1, 2]));
    assert!(v["data"].get("results").is_none());
    let cursor = v["data"]["nextCursor"].as_str().unwrap().to_owned();
    // The continuation does not repeat the program and keeps the limits.
    assert_eq!(v["hints"][0]["action"], "next-page");
    let next = v["hints"][0]["command"].as_str().unwrap();
    assert_eq!(
        next,
        format!("debug-mode query --session {id} --cursor {cursor} --limit 2 --timeout-ms 5000")
    );
    // Events after the first page are outside the cursor's watermark.
    post(port, &id, "application/x-ndjson", event("H1", 6).as_bytes());
    let mut args: Vec<&str> = vec!["--json"];
    args.extend(next.split(' ').skip(1));
    let args: Vec<&str> = args
        .into_iter()
        .map(|a| if a == "2" { "10" } else { a })
        .collect();
    let v: Value = serde_json::from_str(&env.ok(&args)).unwrap();
    assert_eq!(v["data"]["rows"], serde_json::json!([3, 4, 5]));
    assert!(v["data"]["nextCursor"].is_null());
    // Repeating the same program is fine; a cursor for another program is refused.
    let v = env.json(&["query", "--session", &id, "--cursor", &cursor, ".sequence"]);
    assert_eq!(v["data"]["rows"], serde_json::json!([3, 4, 5]));
    let o = env.run(&[
        "--json",
        "query",
        "--session",
        &id,
        "--cursor",
        &cursor,
        ".data",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(err_json(&o)["error"]["reason"], "QUERY_MISMATCH");
    env.ok(&["reset", "--session", &id]);
    let o = env.run(&[
        "--json",
        "query",
        "--session",
        &id,
        "--cursor",
        &cursor,
        "--timeout-ms",
        "5000",
    ]);
    assert_eq!(o.status.code(), Some(1), "a stale cursor is exit 1");
    let v = err_json(&o);
    assert_eq!(v["error"]["code"], "INVALID_CURSOR");
    assert_eq!(v["error"]["reason"], "STALE_CURSOR");
    assert!(v["error"]["message"].as_str().unwrap().contains("reset"));
    let hint = v["error"]["hint"].as_str().unwrap();
    assert!(
        hint.ends_with(&format!(
            "debug-mode query --session {id} --limit 50 --timeout-ms 5000 .sequence"
        )),
        "{hint}"
    );
    let o = env.run(&["query", "--session", &id, "--cursor", "dmq1.garbage!", "."]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn logs_sort_by_timestamp_then_sequence_within_a_snapshot_that_reset_makes_stale() {
    let env = Env::new();
    let (id, port, _) = env.create();
    // Accepted order 1..5; timestamps out of order, with a tie (sequences 2 and 4).
    let body: String = [(1, 50), (2, 20), (3, 40), (4, 20), (5, 10)]
        .iter()
        .map(|(n, ts)| {
            format!(
                "{{\"hypothesisId\":\"H{}\",\"location\":\"a.ts:{n}\",\"message\":\"m\",\"data\":{n},\"timestamp\":{}}}\n",
                n % 2,
                1_784_313_728_000u64 + ts
            )
        })
        .collect();
    post(port, &id, "application/x-ndjson", body.as_bytes());
    let seqs = |v: &Value| -> Vec<u64> {
        v["data"]["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["sequence"].as_u64().unwrap())
            .collect()
    };
    let v = env.json(&["logs", "--session", &id]);
    assert_eq!(seqs(&v), [5, 2, 4, 3, 1]);
    assert_eq!(v["data"]["pagination"]["order"], "timestamp");
    let v = env.json(&["logs", "--session", &id, "--order", "sequence"]);
    assert_eq!(seqs(&v), [1, 2, 3, 4, 5]);
    let v = env.json(&["logs", "--session", &id, "--hypothesis", "H0"]);
    assert_eq!(seqs(&v), [2, 4]);
    // Paging through a snapshot: later events (even earlier in time) stay out of the view.
    let v = env.json(&["logs", "--session", &id, "--limit", "2"]);
    assert_eq!(seqs(&v), [5, 2]);
    let snapshot = v["data"]["pagination"]["snapshot"]
        .as_str()
        .unwrap()
        .to_owned();
    let next = hint_commands(&v)[0].clone();
    assert!(
        next.contains(&format!("--snapshot {snapshot} --offset 2 --limit 2")),
        "{next}"
    );
    post(
        port,
        &id,
        "application/x-ndjson",
        format!(
            "{{\"hypothesisId\":\"H1\",\"location\":\"a.ts:6\",\"message\":\"m\",\"data\":6,\"timestamp\":{}}}\n",
            1_784_313_728_000u64
        )
        .as_bytes(),
    );
    let mut args: Vec<&str> = vec!["--json"];
    args.extend(next.split(' ').skip(1));
    let v: Value = serde_json::from_str(&env.ok(&args)).unwrap();
    assert_eq!(seqs(&v), [4, 3]);
    assert_eq!(v["data"]["pagination"]["total"], 5);
    assert_eq!(v["data"]["pagination"]["snapshot"], snapshot.as_str());
    // A fresh view sees the new event first.
    assert_eq!(
        seqs(&env.json(&["logs", "--session", &id, "--limit", "1"])),
        [6]
    );
    // After a reset the snapshot is stale: exit 1 with a restart command.
    env.ok(&["reset", "--session", &id]);
    let o = env.run(&args);
    assert_eq!(o.status.code(), Some(1));
    let v = err_json(&o);
    assert_eq!(v["error"]["code"], "INVALID_SNAPSHOT");
    assert_eq!(v["error"]["reason"], "STALE_SNAPSHOT");
    assert!(
        v["error"]["hint"].as_str().unwrap().ends_with(&format!(
            "debug-mode logs --session {id} --offset 0 --limit 2"
        )),
        "{v}"
    );
    let o = env.run(&["logs", "--session", &id, "--snapshot", "dms1.x!"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("INVALID_SNAPSHOT"));
}

#[test]
fn hints_are_objects_and_an_empty_session_points_at_its_current_ingest_url() {
    let env = Env::new();
    let (id, port, append) = env.create();
    let v = env.json(&["logs", "--session", &id]);
    let hint = &v["hints"][0];
    assert_eq!(
        hint.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["action", "command", "message"]
    );
    assert_eq!(hint["action"], "verify-ingest");
    assert_eq!(
        hint["command"],
        format!("debug-mode reset --session {id}").as_str()
    );
    let message = hint["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("http://127.0.0.1:{port}/ingest/{id}")),
        "{message}"
    );
    assert!(message.contains(append.to_str().unwrap()), "{message}");
    let pretty = env.ok(&["logs", "--session", &id]);
    assert!(
        pretty.contains(&format!("Ingest URL http://127.0.0.1:{port}/ingest/{id}")),
        "{pretty}"
    );
    for v in [
        env.json(&["create"]),
        env.json(&["template", "--language", "python", "--ingest", "file"]),
        env.json(&["reset", "--session", &id]),
        env.json(&["status", "--session", &id]),
        env.json(&["sessions"]),
    ] {
        for h in v["hints"].as_array().unwrap() {
            assert!(h["action"].is_string(), "{v}");
            assert!(h["message"].is_string(), "{v}");
            assert!(h["command"].is_string() || h["command"].is_null(), "{v}");
        }
    }
}

#[test]
fn query_safety_env_halt_and_limits() {
    let env = Env::new();
    let (id, port, _) = env.create();
    post(port, &id, "application/x-ndjson", event("H1", 1).as_bytes());
    for prog in ["env", "$ENV.HOME", "input"] {
        let o = env.run(&["--json", "query", "--session", &id, prog]);
        assert_eq!(o.status.code(), Some(2), "{prog}");
    }
    let o = env.run(&[
        "--json",
        "query",
        "--session",
        &id,
        "\"stop here\" | halt_error",
    ]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "halt_error must not leak as exit 5"
    );
    let v: Value = err_json(&o);
    assert_eq!(v["error"]["code"], "QUERY_FAILED");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("stop here")
    );
    let v = env.json(&["query", "--session", &id, ".sequence, halt"]);
    assert_eq!(v["data"]["rows"], serde_json::json!([1]));
    assert_eq!(v["warnings"][0]["code"], "HALTED");
    let o = env.run(&[
        "--json",
        "query",
        "--session",
        &id,
        "--timeout-ms",
        "500",
        "last(range(1e12))",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let v: Value = err_json(&o);
    assert_eq!(v["error"]["code"], "QUERY_LIMIT_EXCEEDED");
    let o = env.run(&[
        "--json",
        "query",
        "--session",
        &id,
        "--max-memory-mb",
        "128",
        "[range(1e9)] | length",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let v: Value = err_json(&o);
    assert_eq!(v["error"]["code"], "QUERY_LIMIT_EXCEEDED");
    let o = env.run(&["query", "--session", &id, ".["]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("QUERY_INVALID"));
}

// ---------------------------------------------------------------- ingestion, validation, redaction

const SECRETS: [&str; 5] = [
    "hunter2",
    "abcDEF123456789token",
    "AKIAIOSFODNN7EXAMPLE",
    "MIIEowIBAAKCAQEA",
    "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB",
];

fn secret_lines() -> Vec<String> {
    vec![
        r#"{"hypothesisId":"H1","location":"a.ts:1","message":"login","data":{"user":"ann","password":"hunter2"},"timestamp":1}"#.into(),
        r#"{"hypothesisId":"H1","location":"a.ts:2","message":"Authorization: Bearer abcDEF123456789token","data":null,"timestamp":2}"#.into(),
        r#"{"hypothesisId":"H1","location":"a.ts:3","message":"m","data":{"note":"key AKIAIOSFODNN7EXAMPLE","pem":"-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"},"timestamp":3}"#.into(),
        r#"{"hypothesisId":"H1","location":"a.ts:4","message":"m","data":["ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"],"timestamp":4}"#.into(),
        r#"{"hypothesisId":"H1","location":"a.ts:5","message":"m","data":{"password":"hunter2"},"timestamp":5,"sessionId":"x"}"#.into(),
        r#"{"password":"hunter2", broken"#.into(),
    ]
}

fn assert_redacted(env: &Env, id: &str) {
    env.ok(&["logs", "--session", id]); // drain the append path first
    let dir = env.root().join("sessions").join(id);
    let text = common::all_files_text(&dir);
    let stored: String = text
        .lines()
        .filter(|l| l.contains("\"sequence\"") || l.contains("\"suggestedFix\""))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!stored.is_empty());
    for s in SECRETS {
        assert!(!stored.contains(s), "secret {s} persisted:\n{stored}");
    }
    for s in SECRETS {
        assert!(
            !text.contains(s),
            "secret {s} left on disk (append path not scrubbed?)"
        );
    }
    let out = env.ok(&["logs", "--session", id]) + &env.ok(&["status", "--session", id]);
    for s in SECRETS {
        assert!(!out.contains(s), "secret {s} shown");
    }
    let v = env.json(&["status", "--session", id]);
    assert_eq!(v["data"]["eventCount"], 4);
    assert_eq!(v["data"]["malformedCount"], 2);
    let reasons: Vec<&str> = v["data"]["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, ["unknown_field", "invalid_json"]);
}

#[test]
fn http_and_file_ingest_share_validation_and_redaction() {
    let env = Env::new();
    let (http_id, port, _) = env.create();
    let (file_id, _, append) = env.create();
    let body = secret_lines().join("\n") + "\n";
    let (status, resp) = post(port, &http_id, "application/x-ndjson", body.as_bytes());
    assert_eq!(
        (status, resp.as_str()),
        (200, r#"{"accepted":4,"rejected":2}"#)
    );
    std::fs::OpenOptions::new()
        .append(true)
        .open(&append)
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    assert_redacted(&env, &http_id);
    assert_redacted(&env, &file_id);
    // The same records produce the same stored events on both paths (ids/times aside).
    let strip = |id: &str| -> Vec<Value> {
        env.json(&["logs", "--session", id])["data"]["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let mut e = e.clone();
                e.as_object_mut()
                    .unwrap()
                    .retain(|k, _| k != "id" && k != "receivedAt");
                e
            })
            .collect()
    };
    assert_eq!(strip(&http_id), strip(&file_id));
}

#[test]
fn http_ingest_content_types_cors_and_bad_input() {
    let env = Env::new();
    let (id, port, _) = env.create();
    // application/json: a single object or an array.
    assert_eq!(
        post(port, &id, "application/json", event("H1", 1).as_bytes()).1,
        r#"{"accepted":1,"rejected":0}"#
    );
    let arr = format!("[{},{}]", event("H1", 2), event("H2", 3));
    assert_eq!(
        post(port, &id, "application/json; charset=utf-8", arr.as_bytes()).1,
        r#"{"accepted":2,"rejected":0}"#
    );
    assert_eq!(
        post(port, &id, "text/plain", event("H1", 4).as_bytes()).0,
        200
    );
    assert_eq!(post(port, &id, "multipart/form-data", b"x").0, 415);
    // CORS preflight for browser probes.
    let (status, body) = debug_mode::client::http(
        port,
        "OPTIONS",
        &format!("/ingest/{id}"),
        &[
            ("Origin", "http://localhost:3000"),
            ("Access-Control-Request-Method", "POST"),
            ("Access-Control-Request-Headers", "content-type"),
        ],
        b"",
        std::time::Duration::from_secs(5),
    )
    .unwrap();
    assert_eq!(status, 204, "{}", String::from_utf8_lossy(&body));
    // A page from another site must not post evidence: its preflight and its POST get 403;
    // loopback pages and clients without an Origin (Node, curl) are accepted.
    for (origin, method, want) in [
        ("http://evil.example", "OPTIONS", 403),
        ("http://evil.example", "POST", 403),
        ("null", "POST", 403),
        ("http://localhost.evil.example", "POST", 403),
        ("http://localhost:5173", "POST", 200),
        ("http://127.0.0.1:8080", "POST", 200),
    ] {
        let (status, body) = debug_mode::client::http(
            port,
            method,
            &format!("/ingest/{id}"),
            &[("Origin", origin), ("Content-Type", "application/x-ndjson")],
            event("H9", 9).as_bytes(),
            std::time::Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(
            status,
            want,
            "{origin} {method}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    // Unknown and malformed sessions.
    assert_eq!(
        post(
            port,
            "0b6f1f3e-8d7a-4c56-9a51-2f0e8a1c9d42",
            "application/x-ndjson",
            b"{}"
        )
        .0,
        404
    );
    assert_eq!(
        post(port, "..%2F..%2Fetc", "application/x-ndjson", b"{}").0,
        400
    );
    // Deeply nested and oversized data are diagnosed, not stored, and the service survives.
    let deep = format!(
        r#"{{"hypothesisId":"H1","location":"a:1","message":"m","data":{}1{},"timestamp":1}}"#,
        "[".repeat(100),
        "]".repeat(100)
    );
    assert_eq!(
        post(port, &id, "application/x-ndjson", deep.as_bytes()).1,
        r#"{"accepted":0,"rejected":1}"#
    );
    let big = format!(
        r#"{{"hypothesisId":"H1","location":"a:1","message":"m","data":"{}","timestamp":1}}"#,
        "x".repeat(100_000)
    );
    assert_eq!(
        post(port, &id, "application/x-ndjson", big.as_bytes()).1,
        r#"{"accepted":0,"rejected":1}"#
    );
    // The control API is not reachable without the token.
    let (status, _) = debug_mode::client::http(
        port,
        "POST",
        "/v1/shutdown",
        &[],
        b"",
        std::time::Duration::from_secs(5),
    )
    .unwrap();
    assert_eq!(status, 401);
    let v = env.json(&["status", "--session", &id]);
    assert_eq!(
        v["data"]["eventCount"], 6,
        "two loopback-origin posts accepted"
    );
    assert_eq!(v["data"]["malformedCount"], 2);
}

#[test]
fn redaction_keeps_descriptive_keys_and_warns_when_it_redacts() {
    let env = Env::new();
    let (id, port, _) = env.create();
    let line = r#"{"hypothesisId":"H1","location":"a.ts:1","message":"Authorization: Bearer abc.def","data":{"passwordPolicy":"visible-password-policy","secretSauceName":"ketchup","tokenCount":7,"password":"hunter2","api_key":"k1","x-api-key":"k2","accessToken":"t"},"timestamp":1}"#;
    post(
        port,
        &id,
        "application/x-ndjson",
        format!("{line}\n").as_bytes(),
    );
    let v = env.json(&["logs", "--session", &id]);
    let e = &v["data"]["records"][0];
    assert_eq!(
        e["data"],
        serde_json::json!({"passwordPolicy": "visible-password-policy", "secretSauceName": "ketchup",
            "tokenCount": 7, "password": "[REDACTED]", "api_key": "[REDACTED]",
            "x-api-key": "[REDACTED]", "accessToken": "[REDACTED]"})
    );
    assert!(!e["message"].as_str().unwrap().contains("abc.def"), "{e}");
    assert_eq!(v["warnings"][0]["code"], "SECRET_REDACTED");
    assert_eq!(v["statistics"]["redactedCount"], 1);
    assert_eq!(
        env.json(&["status", "--session", &id])["warnings"][0]["code"],
        "SECRET_REDACTED"
    );
    assert_eq!(
        env.json(&["query", "--session", &id, "."])["warnings"][0]["code"],
        "SECRET_REDACTED"
    );
    assert!(
        env.ok(&["logs", "--session", &id])
            .starts_with("WARNING  1 event(s)")
    );
    env.ok(&["reset", "--session", &id]);
    let v = env.json(&["logs", "--session", &id]);
    assert_eq!(v["warnings"], serde_json::json!([]));
}

#[test]
fn file_ingest_never_accepts_the_tail_of_a_record_split_by_a_raw_newline() {
    let env = Env::new();
    let (id, _, append) = env.create();
    let forged =
        r#"{"hypothesisId":"FORGED","location":"x:1","message":"m","data":1,"timestamp":1}"#;
    // What a helper without validation writes for data `1\n<forged>\n"x"`, and for a raw
    // newline inside a string; then an intact record.
    let text = format!(
        "{{\"hypothesisId\":\"H1\",\"location\":\"a.rs:1\",\"message\":\"m\",\"data\":1\n{forged}\n\"x\",\"timestamp\":2}}\n\
         {{\"hypothesisId\":\"H1\",\"location\":\"a.rs:2\",\"message\":\"m\",\"data\":\"a\n{forged}\n\",\"timestamp\":3}}\n\
         {}\n",
        event("H2", 4)
    );
    std::fs::OpenOptions::new()
        .append(true)
        .open(&append)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let v = env.json(&["logs", "--session", &id]);
    let records = v["data"]["records"].as_array().unwrap();
    assert_eq!(records.len(), 1, "{v:#}");
    assert_eq!(records[0]["hypothesisId"], "H2");
    let v = env.json(&["status", "--session", &id]);
    let reasons: Vec<&str> = v["data"]["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["reason"].as_str().unwrap())
        .collect();
    assert_eq!(
        reasons,
        [
            "invalid_json",
            "split_record",
            "split_record",
            "invalid_json",
            "split_record",
            "split_record"
        ]
    );
}

#[test]
fn file_ingest_buffers_incomplete_lines() {
    let env = Env::new();
    let (id, _, append) = env.create();
    let line = event("H1", 1);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&append)
        .unwrap();
    f.write_all(&line.as_bytes()[..20]).unwrap();
    f.flush().unwrap();
    assert_eq!(
        env.json(&["logs", "--session", &id])["statistics"]["eventCount"],
        0
    );
    assert_eq!(
        env.json(&["status", "--session", &id])["data"]["malformedCount"],
        0
    );
    writeln!(f, "{}", &line[20..]).unwrap();
    assert_eq!(
        env.json(&["logs", "--session", &id])["statistics"]["eventCount"],
        1
    );
}

// ---------------------------------------------------------------- service lifecycle

#[test]
fn concurrent_cli_processes_converge_on_one_service() {
    let env = Env::new();
    assert!(!env.service_running());
    // Eight processes race to start the service.
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let mut c = env.cmd();
            c.args(["--json", "create"])
                .stdout(std::process::Stdio::piped());
            c.spawn().unwrap()
        })
        .collect();
    let mut ports = std::collections::BTreeSet::new();
    for h in handles {
        let o = h.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        ports.insert(
            v["data"]["ingestUrl"]
                .as_str()
                .unwrap()
                .split('/')
                .nth(2)
                .unwrap()
                .to_owned(),
        );
    }
    assert_eq!(ports.len(), 1, "all sessions share one service: {ports:?}");
    assert!(env.service_running());
    assert_eq!(env.json(&["sessions"])["statistics"]["total"], 8);
    let log = std::fs::read_to_string(env.root().join("service.log")).unwrap_or_default();
    assert_eq!(
        log.matches("debug-mode service started").count(),
        1,
        "{log}"
    );
}

#[test]
fn stop_is_immediate_and_the_next_command_restarts_on_the_same_port() {
    let env = Env::new();
    let (id, port, _) = env.create();
    let pid = env.service_pid().unwrap();
    insta::assert_snapshot!("stop_pretty", env.ok(&["stop"]));
    assert!(!env.service_running());
    insta::assert_snapshot!(
        "stop_not_running_json",
        env.filter(&serde_json::to_string_pretty(&env.json(&["stop"])).unwrap())
    );
    // Sessions survive; the next data command restarts the service transparently.
    post_fails(port, &id);
    env.ok(&["logs", "--session", &id]);
    assert_ne!(env.service_pid().unwrap(), pid);
    assert_eq!(
        std::fs::read_to_string(env.root().join("service.port")).unwrap(),
        port.to_string()
    );
    assert_eq!(
        post(port, &id, "application/x-ndjson", event("H1", 1).as_bytes()).0,
        200,
        "probe URL still valid"
    );
}

fn post_fails(port: u16, id: &str) {
    assert!(
        debug_mode::client::http(
            port,
            "POST",
            &format!("/ingest/{id}"),
            &[],
            b"",
            std::time::Duration::from_secs(2)
        )
        .is_err()
    );
}

#[test]
fn stop_kills_a_hung_service() {
    let mut env = Env::new();
    env.extra
        .push(("AGENT_DEBUG_MODE_TEST_IGNORE_SHUTDOWN".into(), "1".into()));
    env.create();
    assert!(env.service_running());
    env.extra.clear();
    env.ok(&["stop"]);
    assert!(!env.service_running());
}

#[test]
fn idle_shutdown_uses_the_injected_clock_and_restart_is_transparent() {
    let env = Env::new();
    let (id, port, _) = env.create();
    post(port, &id, "application/x-ndjson", event("H1", 1).as_bytes());
    std::fs::write(env.clock_file(), (29 * 60 * 1000).to_string()).unwrap();
    // Still alive before 30 minutes of inactivity (observed over several service ticks).
    assert!(!poll(10, || !env.service_running()));
    std::fs::write(env.clock_file(), (31 * 60 * 1000).to_string()).unwrap();
    assert!(
        poll(200, || !env.service_running()),
        "service should stop after 30 idle minutes"
    );
    let v = env.json(&["logs", "--session", &id]);
    assert_eq!(
        v["statistics"]["eventCount"], 1,
        "state survives the restart"
    );
}

/// Runs a service directly (as another installation would) reporting `version`.
fn start_service_reporting(env: &Env, version: &str) -> std::process::Child {
    let mut c = env.cmd();
    c.arg("__service")
        .env("AGENT_DEBUG_MODE_TEST_SERVICE_VERSION", version);
    let child = c.spawn().unwrap();
    assert!(
        poll(200, || env.service_pid() == Some(child.id())),
        "service did not start"
    );
    child
}

#[test]
fn version_mismatch_is_exit_3_for_newer_and_replaced_for_older() {
    let env = Env::new();
    let mut newer = start_service_reporting(&env, "99.0.0");
    let o = env.run(&["--json", "sessions"]);
    assert_eq!(o.status.code(), Some(3));
    let v: Value = err_json(&o);
    insta::assert_json_snapshot!("version_incompatible_json", v);
    env.ok(&["stop"]);
    newer.wait().unwrap();

    let mut older = start_service_reporting(&env, "0.0.1");
    let old = older.id();
    env.ok(&["sessions"]);
    assert_ne!(
        env.service_pid().unwrap(),
        old,
        "older service replaced transparently"
    );
    older.wait().unwrap();
}

#[test]
fn large_sessions_stay_memory_bounded() {
    let env = Env::new();
    let (id, port, _) = env.create();
    let batch: String = (1..=10_000)
        .map(|n| event(if n % 3 == 0 { "H2" } else { "H1" }, n) + "\n")
        .collect();
    for _ in 0..20 {
        assert_eq!(
            post(port, &id, "application/x-ndjson", batch.as_bytes()).0,
            200
        );
    }
    let v = env.json(&["logs", "--session", &id, "--offset", "199990"]);
    assert_eq!(v["statistics"]["eventCount"], 200_000);
    assert_eq!(v["data"]["records"].as_array().unwrap().len(), 10);
    let v = env.json(&[
        "query",
        "--session",
        &id,
        "--max-memory-mb",
        "256",
        // Generous: a debug build on a loaded machine; this test is about memory, not time.
        "--timeout-ms",
        "300000",
        "select(.sequence % 50000 == 0) | .sequence",
    ]);
    assert_eq!(
        v["data"]["rows"],
        serde_json::json!([50000, 100000, 150000, 200000])
    );
    // --slurp is capped: one more batch puts the session over 200,000 events.
    assert_eq!(
        post(port, &id, "application/x-ndjson", batch.as_bytes()).0,
        200
    );
    let o = env.run(&["--json", "query", "--session", &id, "--slurp", "length"]);
    assert_eq!(o.status.code(), Some(2));
    let v: Value = err_json(&o);
    assert_eq!(v["error"]["code"], "QUERY_LIMIT_EXCEEDED");
    let pid = env.service_pid().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    if let Some(kb) = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse::<u64>().ok())
    {
        assert!(kb < 64 * 1024, "service RSS {kb} KiB with 210k events");
    }
}

#[test]
fn service_that_cannot_start_is_exit_4() {
    let env = Env::new();
    // A directory where the service's lock file must be: the service cannot start.
    std::fs::create_dir_all(env.root().join("service.lock")).unwrap();
    let o = env.run(&["--json", "create"]);
    assert_eq!(o.status.code(), Some(4));
    let v: Value = err_json(&o);
    assert_eq!(v["error"]["code"], "SERVICE_UNAVAILABLE");
}

#[test]
fn state_lives_in_home_agent_debug_mode_without_the_override() {
    let env = Env::new();
    let home = env.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let run = |args: &[&str]| {
        let mut c = env.cmd();
        c.env_remove("AGENT_DEBUG_MODE_HOME_OVERRIDE")
            .env("HOME", &home)
            .args(args)
            .output()
            .unwrap()
    };
    let o = run(&["--json", "create"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let id = v["data"]["sessionId"].as_str().unwrap();
    let session_dir = home.join(".agent-debug-mode").join("sessions").join(id);
    assert!(session_dir.is_dir(), "{}", session_dir.display());
    assert_eq!(
        v["data"]["appendPath"].as_str().unwrap(),
        session_dir.join("incoming.ndjson").display().to_string()
    );
    assert!(!env.root().exists(), "the override directory was not used");
    assert_eq!(run(&["stop"]).status.code(), Some(0));
}
