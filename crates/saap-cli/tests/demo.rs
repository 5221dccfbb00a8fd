//! `saap demo` runs with no setup and shows the symptom of the broken agent and its fix.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;

#[test]
fn demo_runs_the_examples_and_shows_the_optional_trap() {
    let out = Command::cargo_bin("saap")
        .unwrap()
        .arg("demo")
        .assert()
        .success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        text.contains("executions: plan ×1, search ×3, rank ×1, answer ×1"),
        "{text}"
    );
    assert!(text.contains("flowchart LR"), "{text}");
    assert!(
        text.contains("step `decide` waits for: required `approval_given`"),
        "{text}"
    );
    assert!(text.contains("resumed 1 live run(s)"), "{text}");
    assert!(text.contains("[optional-trap] step `publish`"), "{text}");
    assert!(
        text.contains("publish executed 2 time(s)  ← the symptom"),
        "{text}"
    );
    assert!(text.contains("publish executed 1 time(s)\n"), "{text}");
}

#[test]
fn demo_json_is_one_object() {
    let out = Command::cargo_bin("saap")
        .unwrap()
        .args(["demo", "--json"])
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["optional_trap"][0]["variant"], "broken");
    assert!(
        v["rag"]["mermaid"]
            .as_str()
            .unwrap()
            .starts_with("flowchart LR")
    );
}
