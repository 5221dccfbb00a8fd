//! `saap diff SPEC A B` end to end (issue 23 §3): two recorded runs of one spec under
//! different scheduling policies diverge where the report says (text pinned by a
//! snapshot); a run compared with itself is the same; histories of another workflow and
//! unreadable files are invalid input.
#![allow(clippy::unwrap_used)]

mod common;

use common::saap_with;

const SPEC: &str = "examples/specs/race-condition.yaml";

fn recorded(dir: &std::path::Path, policy: &str) -> String {
    let path = dir.join(format!("{policy}.json"));
    let p = path.to_str().unwrap().to_string();
    let o = saap_with(&["simulate", SPEC, "--policy", policy, "--history-out", &p]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    p
}

#[test]
fn two_policies_diverge_where_the_report_says() {
    let dir = tempfile::tempdir().unwrap();
    let (fifo, lifo) = (recorded(dir.path(), "fifo"), recorded(dir.path(), "lifo"));
    let o = saap_with(&["diff", SPEC, &fifo, &lifo]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    let text = o
        .stdout
        .replace(&fifo, "fifo.json")
        .replace(&lifo, "lifo.json");
    insta::assert_snapshot!("race_condition_fifo_lifo", text);

    let j = saap_with(&["diff", SPEC, &fifo, &lifo, "--json"]);
    assert_eq!(j.code, 1, "{}", j.stderr);
    let doc: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
    assert_eq!(doc["same"], false);
    assert!(doc["first"]["record"].as_u64().is_some(), "{doc}");
    assert!(doc["first"]["kind"].as_str().is_some(), "{doc}");

    let same = saap_with(&["diff", SPEC, &fifo, &fifo]);
    assert_eq!(same.code, 0, "{}", same.stderr);
    assert!(
        same.stdout.starts_with("the runs are the same: "),
        "{}",
        same.stdout
    );
}

#[test]
fn histories_of_another_workflow_or_unreadable_files_are_invalid_input() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = recorded(dir.path(), "fifo");
    let other = saap_with(&["diff", "examples/specs/rag.yaml", &fifo, &fifo]);
    assert_eq!((other.code, other.stdout.as_str()), (2, ""));
    assert!(other.stderr.contains("SAAP-R001"), "{}", other.stderr);
    let missing = saap_with(&["diff", SPEC, &fifo, "no-such.json"]);
    assert_eq!(missing.code, 2);
    assert!(
        missing
            .stderr
            .contains("cannot open history `no-such.json`"),
        "{}",
        missing.stderr
    );
}
