//! `saap explain` end to end: every example spec's explanation pinned by snapshots, a
//! recorded history explained after `simulate --history-out`, and invalid input.
#![allow(clippy::unwrap_used)]

mod common;

use common::{example_stems, run as run_cmd, saap, saap_with};

fn run(args: &[&str]) -> (i32, String, String) {
    let o = saap_with(args);
    (o.code, o.stdout, o.stderr)
}

#[test]
fn every_example_is_explained() {
    let stems = example_stems();
    for stem in stems {
        let path = format!("examples/specs/{stem}.yaml");
        let (code, out, err) = run(&["explain", &path]);
        assert_eq!((code, err.as_str()), (0, ""), "{path}");
        insta::assert_snapshot!(format!("human__{stem}"), out);
        let (code, json, _) = run(&["explain", &path, "--json"]);
        assert_eq!(code, 0);
        let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(doc["cut_off"], serde_json::Value::Null, "{path}");
        assert_eq!(doc["cycle"], serde_json::Value::Null, "{path}");
        for step in doc["steps"].as_array().unwrap() {
            let n = step["executions"].as_u64().unwrap() as usize;
            assert_eq!(step["fired"].as_array().unwrap().len(), n, "{path}");
            // The human report says the same thing.
            assert!(out.contains(step["summary"].as_str().unwrap()), "{path}");
        }
    }
}

#[test]
fn the_optional_trap_is_explained_by_the_optional_parameter() {
    let (code, out, _) = run(&[
        "explain",
        "examples/specs/optional-trap.yaml",
        "--step",
        "translate",
    ]);
    assert_eq!(code, 0);
    assert!(out.contains("`translate` ran 2 times"), "{out}");
    assert!(
        out.contains("`language` changed none → LanguageEvent#2"),
        "{out}"
    );
    assert!(out.contains("fix: to run once with `language`"), "{out}");
    let (_, out, _) = run(&[
        "explain",
        "examples/specs/optional-trap-fixed.yaml",
        "--step",
        "translate",
    ]);
    assert!(out.contains("`translate` ran once"), "{out}");
}

#[test]
fn a_recorded_history_is_replayed_and_explained() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("run.json");
    let h = history.to_str().unwrap();
    let (code, _, err) = run(&[
        "simulate",
        "examples/specs/list-reruns.yaml",
        "--history-out",
        h,
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, from_history, err) = run(&[
        "explain",
        "examples/specs/list-reruns.yaml",
        "--history",
        h,
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let (_, simulated, _) = run(&["explain", "examples/specs/list-reruns.yaml", "--json"]);
    // Same run, same explanation (labels of outside arrivals aside, which a history does
    // not carry): compare the execution counts and summaries.
    let a: serde_json::Value = serde_json::from_str(&from_history).unwrap();
    let b: serde_json::Value = serde_json::from_str(&simulated).unwrap();
    let brief = |v: &serde_json::Value| -> Vec<(u64, String)> {
        v["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["executions"].as_u64().unwrap(),
                    s["summary"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    assert_eq!(brief(&a), brief(&b));

    // Against another workflow: refused with the stable code.
    let (code, out, err) = run(&["explain", "examples/specs/rag.yaml", "--history", h]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(err.contains("SAAP-R001"), "{err}");
}

#[test]
fn invalid_input_exits_2() {
    let (code, _, err) = run(&["explain", "examples/specs/rag.yaml", "--step", "nope"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no step is named `nope`; the steps are: "),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"format\": 1}").unwrap();
    let (code, _, err) = run(&[
        "explain",
        "examples/specs/rag.yaml",
        "--history",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("not a history file"), "{err}");
}

/// Two steps that trigger each other through Ping and Pong, with no bound (issue 19).
const PING_PONG: &str = "name: Loop
events: [{name: Ping}, {name: Pong}]
steps:
  - {name: start, params: [{name: m, kind: required, types: [UserMessageEvent]}], outputs: [Ping]}
  - {name: ping, params: [{name: p, kind: required, types: [Ping]}], outputs: [Pong]}
  - {name: pong, params: [{name: p, kind: required, types: [Pong]}], outputs: [Ping]}
simulation:
  arrivals: [UserMessageEvent]
";

fn explain_stdin(yaml: &str, extra: &[&str]) -> common::Output {
    let mut cmd = saap();
    cmd.args(["explain", "-"]).args(extra).write_stdin(yaml);
    run_cmd(&mut cmd)
}

#[test]
fn an_unbounded_loop_is_cut_at_max_completions_and_named_with_its_fix() {
    let out = explain_stdin(PING_PONG, &["--max-completions", "200"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("stopped at its bound of 200 completions (--max-completions)"),
        "{}",
        out.stderr
    );
    insta::assert_snapshot!("inline__ping_pong", out.stdout);
    // The cycle's fix, not the double-dip advice for a re-triggered required parameter.
    assert!(!out.stdout.contains("double-dip"), "{}", out.stdout);

    let json = explain_stdin(PING_PONG, &["--max-completions", "200", "--json"]);
    assert_eq!(json.code, 0);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(doc["cut_off"]["completions"], 200);
    assert_eq!(doc["cut_off"]["running"], 1);
    assert_eq!(doc["cycle"]["code"], "SAAP004");
    assert_eq!(doc["cycle"]["steps"], serde_json::json!(["ping", "pong"]));
    let ping = &doc["steps"][1];
    assert_eq!(ping["executions"], 100);
    assert_eq!(ping["fired"].as_array().unwrap().len(), 100);
    assert_eq!(ping["advice"], serde_json::json!([doc["cycle"]["fix"]]));
}

#[test]
fn the_default_bound_is_simulates() {
    // Same default and meaning as `simulate --max-completions`: 100,000 completions (one
    // step explained, to keep the report small).
    let out = explain_stdin(PING_PONG, &["--step", "start", "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(doc["cut_off"]["completions"], 100_000);
    assert_eq!(doc["steps"].as_array().unwrap().len(), 1);
    // Help text is wrapped to the terminal: compare with whitespace collapsed.
    let flat = |s: String| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let help = flat(saap_with(&["explain", "--help"]).stdout);
    assert!(help.contains("[default: 100000]"), "{help}");
    let sim_help = flat(saap_with(&["simulate", "--help"]).stdout);
    assert!(sim_help.contains("[default: 100000]"), "{sim_help}");
}
