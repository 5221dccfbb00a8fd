//! `saap explain` end to end: every example spec's explanation pinned by snapshots, a
//! recorded history explained after `simulate --history-out`, and invalid input.
#![allow(clippy::unwrap_used)]

mod common;

use common::{example_stems, saap_with};

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
        for step in doc.as_array().unwrap() {
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
        v.as_array()
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
