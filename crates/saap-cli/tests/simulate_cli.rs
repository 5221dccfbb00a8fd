//! `saap simulate` end to end: timeline and JSON of every example spec pinned by snapshots,
//! the JSON checked for internal consistency, policies, and invalid input.
#![allow(clippy::unwrap_used)]

mod common;

use common::{example_stems, saap_with};

fn run(args: &[&str]) -> (i32, String, String) {
    let o = saap_with(args);
    (o.code, o.stdout, o.stderr)
}

#[test]
fn every_example_simulates_with_a_pinned_timeline_and_consistent_json() {
    let stems = example_stems();
    assert!(stems.len() >= 12, "the example specs are missing");
    for stem in stems {
        let path = format!("examples/specs/{stem}.yaml");
        let (code, human, err) = run(&["simulate", &path]);
        assert_eq!(code, 0, "{path}: {err}");
        assert_eq!(
            err, "",
            "{path}: nothing on stderr for a spec with arrivals"
        );
        insta::assert_snapshot!(format!("human__{stem}"), human);

        let (code, json, _) = run(&["simulate", &path, "--json"]);
        assert_eq!(code, 0);
        insta::assert_snapshot!(format!("json__{stem}"), json);
        let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
        let executions = doc["executions"].as_array().unwrap();
        let per_step = doc["executions_per_step"].as_object().unwrap();
        let total: u64 = per_step.values().map(|v| v.as_u64().unwrap()).sum();
        assert_eq!(total as usize, executions.len(), "{path}");
        for x in executions {
            let step = x["step"].as_str().unwrap();
            // The human timeline names every execution with its step.
            let id = x["execution"].as_str().unwrap();
            assert!(
                human.contains(&format!("{step}: started {id} with")),
                "{path}: {id}"
            );
        }
        let started = doc["records"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["record"] == "execution_started")
            .count();
        assert_eq!(started, executions.len());
    }
}

#[test]
fn the_race_condition_runs_the_step_twice_and_its_fix_once() {
    let per_step = |stem: &str, step: &str| {
        let (_, json, _) = run(&["simulate", &format!("examples/specs/{stem}.yaml"), "--json"]);
        let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
        doc["executions_per_step"][step].as_u64().unwrap()
    };
    assert_eq!(per_step("optional-trap", "translate"), 2);
    assert_eq!(per_step("optional-trap-fixed", "translate"), 1);
}

#[test]
fn policies_change_the_interleaving_deterministically() {
    let path = "examples/specs/race-condition.yaml";
    for policy in ["fifo", "lifo", "arrivals-first"] {
        let a = run(&["simulate", path, "--policy", policy]);
        let b = run(&["simulate", path, "--policy", policy]);
        assert_eq!(a, b, "{policy} is deterministic");
        assert_eq!(a.0, 0);
        assert!(a.1.starts_with(&format!("simulate SupportAgent (policy {policy})")));
    }
}

#[test]
fn invalid_input_exits_2_with_a_message_that_says_what_to_do() {
    let (code, out, err) = run(&["simulate", "examples/specs/rag.yaml", "--policy", "random"]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(
        err.contains("unknown policy `random`; use fifo, lifo or arrivals-first"),
        "{err}"
    );

    let (code, out, err) = run(&["simulate", "no/such/spec.yaml"]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(
        err.contains("cannot open spec file `no/such/spec.yaml`"),
        "{err}"
    );
}

#[test]
fn a_spec_without_arrivals_says_so_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("quiet.yaml");
    std::fs::write(
        &spec,
        "name: Quiet\nsteps:\n  - {name: s, params: [{name: q, kind: required, types: [StartEvent]}]}\n",
    )
    .unwrap();
    let (code, out, err) = run(&["simulate", spec.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(err.contains("no `simulation.arrivals`"), "{err}");
    assert!(out.contains("run: never started"), "{out}");
}

/// Issue 19's papercuts end to end: the short arrival form, what a step returns said once
/// (`returns_together` without a behaviour), and errors in plain words.
#[test]
fn papercuts_short_arrivals_declared_results_and_plain_errors() {
    let spec = "name: Parts
events: [{name: Go, kind: start}, {name: W}]
steps:
  - {name: split, params: [{name: g, kind: required, types: [Go]}], returns_together: [[W, W, W]]}
  - {name: join, params: [{name: w, kind: fixed_list, size: 3, types: [W]}], outputs: [StopEvent]}
simulation:
  arrivals: [Go]
";
    let out = common::run(common::saap().args(["simulate", "-"]).write_stdin(spec));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("split  1"), "{}", out.stdout);
    assert!(out.stdout.contains("join   1"), "{}", out.stdout);
    assert!(out.stdout.contains("run: terminated by"), "{}", out.stdout);
    let check = common::run(common::saap().args(["check", "-"]).write_stdin(spec));
    assert_eq!(check.code, 0, "{}", check.stdout);

    let bad = spec.replace("arrivals: [Go]", "arrivals: [7]");
    let out = common::run(common::saap().args(["simulate", "-"]).write_stdin(bad));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains(
            "expected an arrival: an event type name, or a map `{event: Name, label: name}`"
        ),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("ArrivalSpec"), "{}", out.stderr);

    let by_type = "name: W
events: [{name: B}]
steps:
  - name: s
    params: [{name: q, kind: required, types: [UserMessageEvent]}, {name: b, kind: optional, types: [B]}]
    precondition: {name: p, when: {present: B}}
";
    let out = common::run(common::saap().args(["check", "-"]).write_stdin(by_type));
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("write `b` (takes B)"), "{}", out.stderr);
}
