//! `saap check` on Python agent source, end to end: the human and JSON reports of every
//! example in `examples/python/` (one per failure pattern of the debugging guide, a correct
//! agent, a multi-file package) are pinned by snapshots with their exit codes; bad input
//! (syntax error, no agent, unreadable) exits 2 with a located, coded message.
#![allow(clippy::unwrap_used)]

mod common;

use common::{run, saap, saap_with};

/// One input: human report, JSON report, exit code, and that the two agree.
fn example(path: &str, snapshot: &str, expected_code: i32) {
    let human = run(saap().args(["check", path]));
    assert_eq!(human.code, expected_code, "{path}: {}", human.stderr);
    assert_eq!(human.stderr, "", "{path}: diagnostics on a completed check");
    insta::assert_snapshot!(format!("human__{snapshot}"), human.stdout);

    let json = run(saap().args(["check", path, "--json"]));
    assert_eq!(json.code, expected_code);
    insta::assert_snapshot!(format!("json__{snapshot}"), json.stdout);

    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(doc["input"], path);
    let mut findings: Vec<&serde_json::Value> =
        doc["findings"].as_array().unwrap().iter().collect();
    for a in doc["agents"].as_array().unwrap() {
        findings.extend(a["findings"].as_array().unwrap());
        assert!(a["spec"]["steps"].is_array());
    }
    let count = |sev: &str| findings.iter().filter(|f| f["severity"] == sev).count();
    assert_eq!(doc["summary"]["errors"], count("error"));
    assert_eq!(doc["summary"]["warnings"], count("warning"));
    for f in findings {
        let code = f["code"].as_str().unwrap();
        let loc = &f["location"];
        let at = format!(
            "{}:{}:{}: {}[{code}]",
            loc["file"].as_str().unwrap(),
            loc["line"],
            loc["column"],
            f["severity"].as_str().unwrap()
        );
        assert!(
            human.stdout.contains(&at),
            "{at} missing from the human report"
        );
        for key in ["rule", "message", "why", "fix"] {
            assert!(!f[key].as_str().unwrap().is_empty(), "{code}: empty {key}");
        }
    }
}

#[test]
fn correct_agent() {
    example("examples/python/correct.py", "correct", 0);
}

#[test]
fn runs_twice() {
    example("examples/python/runs_twice.py", "runs_twice", 0);
}

#[test]
fn never_runs() {
    example("examples/python/never_runs.py", "never_runs", 1);
}

#[test]
fn after_stop() {
    example("examples/python/after_stop.py", "after_stop", 1);
}

#[test]
fn precondition() {
    example("examples/python/precondition.py", "precondition", 1);
}

#[test]
fn wont_start() {
    example("examples/python/wont_start.py", "wont_start", 1);
}

#[test]
fn config() {
    example("examples/python/config.py", "config", 1);
}

#[test]
fn context_smuggle() {
    example("examples/python/context_smuggle.py", "context_smuggle", 1);
}

#[test]
fn package_folder() {
    example("examples/python/support_agent", "support_agent", 0);
}

#[test]
fn unresolved_annotations() {
    example(
        "crates/saap-python/tests/fixtures/unresolved.py",
        "unresolved",
        0,
    );
}

#[test]
fn deny_warnings() {
    let out = saap_with(&[
        "check",
        "examples/python/runs_twice.py",
        "--deny",
        "warnings",
    ]);
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr,
        "saap check: warnings are denied (--deny warnings)\n"
    );
}

#[test]
fn syntax_error() {
    let out = saap_with(&["check", "crates/saap-python/tests/fixtures/syntax_error.py"]);
    assert_eq!(out.code, 2);
    assert_eq!(out.stdout, "");
    insta::assert_snapshot!("error__syntax", out.stderr);
}

#[test]
fn not_an_agent() {
    let out = saap_with(&["check", "crates/saap-python/tests/fixtures/not_agent.py"]);
    assert_eq!(out.code, 2);
    insta::assert_snapshot!("error__not_an_agent", out.stderr);
}

#[test]
fn missing_python_file() {
    let out = saap_with(&["check", "examples/python/nope.py"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .starts_with("error: cannot read `examples/python/nope.py`:"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("[SAAP-P001]"), "{}", out.stderr);
}

#[test]
fn spec_files_are_still_specs() {
    // A YAML spec is not read as Python.
    let out = saap_with(&["check", "examples/specs/rag.yaml"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("ok, no findings"));
}

/// The spec in the JSON report is a valid spec file: `saap check` reads it back and finds
/// what it found in the source.
#[test]
fn json_spec_reads_back_as_a_spec_file() {
    let json = saap_with(&["check", "examples/python/runs_twice.py", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("agent.json");
    std::fs::write(&spec, doc["agents"][0]["spec"].to_string()).unwrap();
    let out = saap_with(&["check", spec.to_str().unwrap(), "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let back: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(back["name"], "TranslateAgent");
    let codes: Vec<_> = back["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(codes, ["SAAP010"]);
}
