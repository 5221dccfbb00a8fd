//! `saap check` end to end: the human and JSON reports of every example spec are pinned by
//! snapshots (tests/snapshots/), with their exit codes; `--deny warnings`; invalid input.
#![allow(clippy::unwrap_used)]

mod common;

use common::{run, saap, workspace_root};

/// Checks one example: human report, JSON report, exit code, and that the JSON agrees with
/// itself (summary = counts of findings) and with the human report.
fn example(stem: &str, expected_code: i32) {
    let path = format!("examples/specs/{stem}.yaml");
    let human = run(saap().args(["check", &path]));
    assert_eq!(human.code, expected_code, "{path}: {}", human.stderr);
    assert_eq!(
        human.stderr, "",
        "{path}: diagnostics on a successful check"
    );
    insta::assert_snapshot!(format!("human__{stem}"), human.stdout);

    let json = run(saap().args(["check", &path, "--json"]));
    assert_eq!(json.code, expected_code);
    insta::assert_snapshot!(format!("json__{stem}"), json.stdout);

    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(doc["spec"], path.as_str());
    let findings = doc["findings"].as_array().unwrap();
    let count = |sev: &str| findings.iter().filter(|f| f["severity"] == sev).count();
    assert_eq!(doc["summary"]["errors"], count("error"));
    assert_eq!(doc["summary"]["warnings"], count("warning"));
    assert_eq!(expected_code, i32::from(count("error") > 0));
    for f in findings {
        let code = f["code"].as_str().unwrap();
        assert!(
            human.stdout.contains(&format!("[{code}]")),
            "{code} missing from the human report"
        );
        for key in ["rule", "message", "why", "fix"] {
            assert!(!f[key].as_str().unwrap().is_empty(), "{code}: empty {key}");
        }
    }
}

#[test]
fn race_condition() {
    example("race-condition", 0);
}

#[test]
fn list_reruns() {
    example("list-reruns", 0);
}

#[test]
fn fixedlist_fix() {
    example("fixedlist-fix", 0);
}

#[test]
fn optional_trap() {
    example("optional-trap", 0);
}

#[test]
fn optional_trap_fixed() {
    example("optional-trap-fixed", 0);
}

#[test]
fn dangling_stop() {
    example("dangling-stop", 1);
}

#[test]
fn double_dip() {
    example("double-dip", 0);
}

#[test]
fn same_type_two_params() {
    example("same-type-two-params", 0);
}

#[test]
fn missing_upstream() {
    example("missing-upstream", 1);
}

#[test]
fn fixedlist_count_mismatch() {
    example("fixedlist-count-mismatch", 1);
}

#[test]
fn precondition_never_true() {
    example("precondition-never-true", 0);
}

#[test]
fn step_never_reached() {
    example("step-never-reached", 1);
}

#[test]
fn rag() {
    example("rag", 0);
}

#[test]
fn deadline_race() {
    example("deadline-race", 0);
}

#[test]
fn every_example_has_a_snapshot_test() {
    let src = include_str!("check_cli.rs");
    for entry in std::fs::read_dir(workspace_root().join("examples/specs")).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
        assert!(
            src.contains(&format!("example(\"{stem}\"")),
            "examples/specs/{stem} has no snapshot test in check_cli.rs"
        );
    }
}

#[test]
fn deny_warnings_turns_warnings_into_exit_1() {
    let out = run(saap().args([
        "check",
        "examples/specs/optional-trap.yaml",
        "--deny",
        "warnings",
    ]));
    assert_eq!(out.code, 1);
    assert!(out.stdout.contains("warning[SAAP010]"));
    assert!(out.stderr.contains("--deny warnings"), "{}", out.stderr);
}

#[test]
fn deny_warnings_on_a_clean_spec_is_exit_0() {
    let out = run(saap().args(["check", "examples/specs/rag.yaml", "--deny", "warnings"]));
    assert_eq!(out.code, 0);
    assert!(out.stdout.contains("ok, no findings"));
}

#[test]
fn spec_from_stdin() {
    let text =
        std::fs::read_to_string(workspace_root().join("examples/specs/list-reruns.yaml")).unwrap();
    let out = run(saap().args(["check", "-"]).write_stdin(text));
    assert_eq!(out.code, 0);
    assert!(out.stdout.contains("warning[SAAP011]"));
    assert!(out.stdout.contains("-: 0 errors, 1 warning"));
}

#[test]
fn missing_file_is_invalid_input() {
    let out = run(saap().args(["check", "examples/specs/does-not-exist.yaml"]));
    assert_eq!(out.code, 2);
    assert_eq!(out.stdout, "");
    insta::assert_snapshot!("error__missing_file", out.stderr);
}

#[test]
fn yaml_syntax_error_names_line_and_column() {
    let text = "name: broken\nsteps:\n  - name: a\n    params: [{name: q, kind: required, types: [UserMessageEvent]\n";
    let out = run(saap().args(["check", "-"]).write_stdin(text));
    assert_eq!(out.code, 2);
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr.starts_with("error: -:"),
        "location first: {}",
        out.stderr
    );
    insta::assert_snapshot!("error__yaml_syntax", out.stderr);
}

#[test]
fn unknown_field_is_invalid_input() {
    let text = "name: w\nsteps:\n  - name: a\n    parms: []\n";
    let out = run(saap().args(["check", "-"]).write_stdin(text));
    assert_eq!(out.code, 2);
    insta::assert_snapshot!("error__unknown_field", out.stderr);
}

#[test]
fn unknown_event_type_gets_a_suggestion() {
    let text = "name: w\nsteps:\n  - name: a\n    params: [{name: q, kind: required, types: [UserMesageEvent]}]\n    outputs: [StopEvent]\n";
    let out = run(saap().args(["check", "-"]).write_stdin(text));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("did you mean `UserMessageEvent`"),
        "{}",
        out.stderr
    );
    insta::assert_snapshot!("error__unknown_event_type", out.stderr);
}

#[test]
fn json_spec_is_read_too() {
    let text = r#"{"name": "w", "steps": [
        {"name": "a", "params": [{"name": "q", "kind": "required", "types": ["UserMessageEvent"]}],
         "outputs": ["StopEvent"]}]}"#;
    let out = run(saap().args(["check", "-", "--json"]).write_stdin(text));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(doc["findings"], serde_json::json!([]));
    assert_eq!(
        doc["summary"],
        serde_json::json!({"errors": 0, "warnings": 0})
    );
}

#[test]
fn bad_deny_value_is_a_usage_error() {
    let out = run(saap().args(["check", "examples/specs/rag.yaml", "--deny", "everything"]));
    assert_eq!(out.code, 2);
}

#[test]
fn rules_lists_every_code() {
    let out = run(saap().args(["check", "--rules"]));
    assert_eq!(out.code, 0);
    insta::assert_snapshot!("rules", out.stdout);
    let json = run(saap().args(["check", "--rules", "--json"]));
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    // 22 spec checks, then 9 that only Python source shows.
    assert_eq!(doc.as_array().unwrap().len(), 31);
    assert_eq!(doc[0]["code"], "SAAP001");
    assert_eq!(doc[22]["code"], "SAAP101");
}

#[test]
fn spec_is_required_without_rules() {
    let out = run(saap().args(["check"]));
    assert_eq!(out.code, 2);
}

#[test]
fn help_has_examples() {
    let out = run(saap().args(["check", "--help"]));
    assert_eq!(out.code, 0);
    assert!(out.stdout.contains("Examples:"));
    assert!(out.stdout.contains("--deny"));
}
