//! `saap report`: the Markdown report of every symptom on the example specs and the Python
//! examples (one per failure pattern of the debugging guide), snapshotted; the `--json` shape;
//! the exit codes (0 a cause, 1 none, 2 bad input).
#![allow(clippy::unwrap_used)]

mod common;

use common::saap_with;
use serde_json::Value;

/// (snapshot name, arguments after `report`, expected exit code).
const CASES: &[(&str, &[&str], i32)] = &[
    // Example specs.
    (
        "spec_runs_twice_optional_trap",
        &[
            "--symptom",
            "runs-twice",
            "--step",
            "translate",
            "examples/specs/optional-trap.yaml",
        ],
        0,
    ),
    (
        "spec_runs_twice_race_condition",
        &[
            "--symptom",
            "runs-twice",
            "--step",
            "answer",
            "examples/specs/race-condition.yaml",
        ],
        0,
    ),
    (
        "spec_runs_twice_list_reruns",
        &[
            "--symptom",
            "runs-twice",
            "--step",
            "summarize",
            "examples/specs/list-reruns.yaml",
        ],
        0,
    ),
    (
        "spec_runs_twice_double_dip",
        &[
            "--symptom",
            "runs-twice",
            "--step",
            "final",
            "examples/specs/double-dip.yaml",
        ],
        0,
    ),
    (
        "spec_runs_twice_fixed",
        &[
            "--symptom",
            "runs-twice",
            "--step",
            "translate",
            "examples/specs/optional-trap-fixed.yaml",
        ],
        1,
    ),
    (
        "spec_never_runs_missing_upstream",
        &[
            "--symptom",
            "never-runs",
            "--step",
            "answer",
            "examples/specs/missing-upstream.yaml",
        ],
        0,
    ),
    (
        "spec_never_runs_fixedlist",
        &[
            "--symptom",
            "never-runs",
            "--step",
            "summarize",
            "examples/specs/fixedlist-count-mismatch.yaml",
        ],
        0,
    ),
    (
        "spec_after_stop_dangling",
        &[
            "--symptom",
            "after-stop",
            "examples/specs/dangling-stop.yaml",
        ],
        0,
    ),
    (
        "spec_precondition_never_true",
        &[
            "--symptom",
            "precondition",
            "--step",
            "publish",
            "examples/specs/precondition-never-true.yaml",
        ],
        0,
    ),
    (
        "spec_wont_start_rag",
        &["--symptom", "wont-start", "examples/specs/rag.yaml"],
        1,
    ),
    (
        "spec_config_rag",
        &["--symptom", "config", "examples/specs/rag.yaml"],
        1,
    ),
    // Python examples, one per failure pattern.
    (
        "py_runs_twice",
        &[
            "--symptom",
            "runs-twice",
            "--step",
            "my_step",
            "examples/python/runs_twice.py",
        ],
        0,
    ),
    (
        "py_never_runs",
        &["--symptom", "never-runs", "examples/python/never_runs.py"],
        0,
    ),
    (
        "py_after_stop",
        &["--symptom", "after-stop", "examples/python/after_stop.py"],
        0,
    ),
    (
        "py_precondition",
        &[
            "--symptom",
            "precondition",
            "examples/python/precondition.py",
        ],
        0,
    ),
    (
        "py_wont_start",
        &["--symptom", "wont-start", "examples/python/wont_start.py"],
        0,
    ),
    (
        "py_config",
        &["--symptom", "config", "examples/python/config.py"],
        0,
    ),
    (
        "py_correct_runs_twice",
        &[
            "--symptom",
            "runs-twice",
            "--step",
            "answer",
            "examples/python/correct.py",
        ],
        1,
    ),
    (
        "py_package_never_runs",
        &["--symptom", "never-runs", "examples/python/support_agent"],
        0,
    ),
];

#[test]
fn every_symptom_reports_on_the_examples() {
    for (name, args, code) in CASES {
        let mut all = vec!["report"];
        all.extend_from_slice(args);
        let out = saap_with(&all);
        assert_eq!(out.code, *code, "{name}: {}\n{}", out.stderr, out.stdout);
        assert!(out.stderr.is_empty(), "{name}: {}", out.stderr);
        assert!(out.stdout.starts_with("## Debug Report: "), "{name}");
        for section in [
            "### Agent",
            "### Event DAG",
            "### Symptom",
            "### Root Cause",
            "### Evidence",
            "### Fix",
            "### Verification",
            "### What was checked",
        ] {
            assert!(out.stdout.contains(section), "{name}: no {section}");
        }
        if *code == 1 {
            assert!(out.stdout.contains("No cause found for "), "{name}");
        }
        insta::assert_snapshot!(*name, out.stdout);
    }
}

fn report_json(args: &[&str]) -> (i32, Value) {
    let mut all = vec!["report", "--json"];
    all.extend_from_slice(args);
    let out = saap_with(&all);
    (out.code, serde_json::from_str(&out.stdout).unwrap())
}

#[test]
fn the_json_is_the_report_model() {
    let (code, r) = report_json(&[
        "--symptom",
        "runs-twice",
        "--step",
        "my_step",
        "examples/python/runs_twice.py",
    ]);
    assert_eq!(code, 0);
    let keys: Vec<&str> = r.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "report_format",
            "agent",
            "dag",
            "symptom",
            "verdict",
            "conclusion",
            "root_causes",
            "evidence",
            "fixes",
            "verification",
            "checked"
        ]
    );
    assert_eq!(r["report_format"], 1);
    assert_eq!(r["verdict"], "cause_found");
    assert_eq!(r["agent"]["class"], "TranslateAgent");
    assert_eq!(r["agent"]["input_kind"], "python");
    assert_eq!(r["agent"]["location"], "examples/python/runs_twice.py:20:7");
    assert_eq!(r["agent"]["steps"], 3);
    assert_eq!(r["symptom"]["symptom"], "runs-twice");
    assert_eq!(r["symptom"]["step"], "my_step");
    assert!(r["symptom"]["run"].is_null());
    let dag = r["dag"].as_array().unwrap();
    assert_eq!(dag.len(), 3);
    assert_eq!(dag[1]["step"], "my_step");
    assert_eq!(
        dag[1]["inputs"],
        serde_json::json!(["required: A (required)", "optional: B (optional)"])
    );
    let cause = &r["root_causes"][0];
    assert_eq!(cause["code"], "SAAP010");
    assert_eq!(cause["rule"], "R1 + R2");
    assert_eq!(cause["constraint"], "Optional Parameter Trap");
    assert_eq!(cause["param"], "optional");
    assert_eq!(cause["location"], "examples/python/runs_twice.py:31:42");
    let tools: Vec<&str> = r["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["tool"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["check", "explain", "explore"]);
    let fix = &r["fixes"][0];
    assert_eq!(fix["code"], "SAAP010");
    let change = &fix["change"];
    assert_eq!(change["language"], "python");
    assert_eq!(
        change["before"],
        "    @step()\n    async def my_step(self, required: A, optional: B | None) -> Summary:"
    );
    let after = change["after"].as_array().unwrap();
    assert_eq!(after.len(), 3);
    assert!(
        after[1]["code"]
            .as_str()
            .unwrap()
            .ends_with("async def my_step(self, required: A, optional: B) -> Summary:")
    );
    assert!(
        fix["checked_in_memory"]
            .as_str()
            .unwrap()
            .contains("runs `my_step` 1 time(s) (was 2)")
    );
    let commands: Vec<&str> = r["verification"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["command"].as_str().unwrap())
        .collect();
    assert_eq!(
        commands,
        [
            "saap check examples/python/runs_twice.py",
            "saap report --symptom runs-twice --step my_step examples/python/runs_twice.py"
        ]
    );
    assert!(
        r["verification"]["test_assertion"]
            .as_str()
            .unwrap()
            .contains("assert len(runner.get_events_of_class(Summary)) == 1")
    );

    // No cause: said plainly, with what was checked, and nothing to fix or verify.
    let (code, r) = report_json(&[
        "--symptom",
        "runs-twice",
        "--step",
        "translate",
        "examples/specs/optional-trap-fixed.yaml",
    ]);
    assert_eq!(code, 1);
    assert_eq!(r["verdict"], "no_cause_found");
    assert!(r["root_causes"].as_array().unwrap().is_empty());
    assert!(r["fixes"].as_array().unwrap().is_empty());
    assert!(
        r["conclusion"]
            .as_str()
            .unwrap()
            .starts_with("No cause found for runs-twice at step `translate`; what was checked: ")
    );
    assert_eq!(r["checked"].as_array().unwrap().len(), 3);
}

#[test]
fn the_fix_shown_for_a_spec_is_the_one_that_removes_the_finding() {
    // Apply the report's "after" text to a copy of the spec: the finding is gone.
    let (_, r) = report_json(&[
        "--symptom",
        "runs-twice",
        "--step",
        "translate",
        "examples/specs/optional-trap.yaml",
    ]);
    let change = &r["fixes"][0]["change"];
    let before = change["before"].as_str().unwrap();
    let root = common::workspace_root();
    let text = std::fs::read_to_string(root.join("examples/specs/optional-trap.yaml")).unwrap();
    assert!(text.contains(before));
    let dir = tempfile::tempdir().unwrap();
    for variant in change["after"].as_array().unwrap() {
        let fixed = text.replace(before, variant["code"].as_str().unwrap());
        let path = dir.path().join("fixed.yaml");
        std::fs::write(&path, fixed).unwrap();
        let out = saap_with(&["check", path.to_str().unwrap(), "--deny", "warnings"]);
        assert_eq!(out.code, 0, "{}: {}", variant["label"], out.stdout);
        let out = saap_with(&[
            "report",
            "--symptom",
            "runs-twice",
            "--step",
            "translate",
            path.to_str().unwrap(),
        ]);
        assert_eq!(out.code, 1, "{}: {}", variant["label"], out.stdout);
    }
}

#[test]
fn bad_input_exits_2_with_what_to_do() {
    for (args, needle) in [
        (
            &["--symptom", "slow", "examples/specs/rag.yaml"][..],
            "invalid value 'slow'",
        ),
        (
            &[
                "--symptom",
                "runs-twice",
                "--step",
                "nope",
                "examples/specs/rag.yaml",
            ][..],
            "no step of `RagAgent` is named `nope`; the steps are: ",
        ),
        (
            &[
                "--symptom",
                "runs-twice",
                "examples/specs/no-such-file.yaml",
            ][..],
            "cannot open spec file `examples/specs/no-such-file.yaml`",
        ),
        (
            &["--symptom", "runs-twice", "examples/python/no_such.py"][..],
            "SAAP-P001",
        ),
        (
            &["--symptom", "runs-twice", "examples/python"][..],
            "say which with --agent CLASS",
        ),
        (
            &[
                "--symptom",
                "runs-twice",
                "--agent",
                "Nobody",
                "examples/python/runs_twice.py",
            ][..],
            "no agent class is named `Nobody`",
        ),
        (
            &[
                "--symptom",
                "runs-twice",
                "--run",
                "abc",
                "examples/specs/rag.yaml",
            ][..],
            "--run needs where the run is",
        ),
        (
            &[
                "--symptom",
                "runs-twice",
                "--db",
                "x.db",
                "examples/specs/rag.yaml",
            ][..],
            "add --run RUN",
        ),
    ] {
        let mut all = vec!["report"];
        all.extend_from_slice(args);
        let out = saap_with(&all);
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert!(out.stdout.is_empty(), "{args:?}: {}", out.stdout);
        assert!(out.stderr.contains(needle), "{args:?}: {}", out.stderr);
    }
    // With --agent, a folder of several agents is fine.
    let out = saap_with(&[
        "report",
        "--symptom",
        "runs-twice",
        "--agent",
        "TranslateAgent",
        "--step",
        "my_step",
        "examples/python",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
}
