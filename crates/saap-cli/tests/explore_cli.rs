//! `saap explore` end to end: the human and JSON reports of every example spec and of small
//! inline specs are pinned by snapshots (tests/snapshots/), with their exit codes;
//! `--fail-on`, `--permute-arrivals`, bounds, invalid input.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `saap` run from the workspace root, so that paths in the output are stable.
fn saap() -> Command {
    let mut cmd = Command::cargo_bin("saap").unwrap();
    cmd.current_dir(workspace_root());
    cmd
}

struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// Runs `saap explore` on spec text given on stdin.
fn explore_text(yaml: &str, extra: &[&str]) -> Output {
    let mut cmd = saap();
    cmd.args(["explore", "-"]).args(extra).write_stdin(yaml);
    run(&mut cmd)
}

/// One example: human and JSON reports pinned, exit 0, no diagnostics on stderr (stderr is
/// not a terminal here, so no progress line either), and the JSON agrees with the text.
fn example(stem: &str) {
    let path = format!("examples/specs/{stem}.yaml");
    let human = run(saap().args(["explore", &path]));
    assert_eq!(human.code, 0, "{path}: {}", human.stderr);
    assert_eq!(human.stderr, "", "{path}");
    insta::assert_snapshot!(format!("human__{stem}"), human.stdout);

    let json = run(saap().args(["explore", &path, "--json"]));
    assert_eq!(json.code, 0);
    insta::assert_snapshot!(format!("json__{stem}"), json.stdout);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(doc["spec"], path.as_str());
    assert_eq!(doc["complete"], true);
    for s in doc["steps"].as_array().unwrap() {
        let step = s["step"].as_str().unwrap();
        assert!(human.stdout.contains(&format!("  {step} ")), "{step}");
        if s["worst"].as_u64().unwrap() > 1 {
            assert!(human.stdout.contains(&format!("Worst case of `{step}`")));
        }
    }
    // --fail-on agrees with what the report found.
    let fails = |kind: &str| run(saap().args(["explore", &path, "--fail-on", kind])).code;
    let found = |key: &str| !doc[key].as_array().unwrap().is_empty();
    assert_eq!(fails("stall"), i32::from(found("stalls")));
    assert_eq!(fails("after-stop"), i32::from(found("after_stop")));
    assert_eq!(fails("exception"), i32::from(found("exceptions")));
    let multi = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["worst"].as_u64().unwrap() > 1);
    assert_eq!(fails("multi-exec"), i32::from(multi));
}

macro_rules! examples {
    ($($name:ident => $stem:literal),* $(,)?) => {
        $(#[test] fn $name() { example($stem); })*
    };
}

examples! {
    example_dangling_stop => "dangling-stop",
    example_double_dip => "double-dip",
    example_fixedlist_count_mismatch => "fixedlist-count-mismatch",
    example_fixedlist_fix => "fixedlist-fix",
    example_list_reruns => "list-reruns",
    example_missing_upstream => "missing-upstream",
    example_optional_trap => "optional-trap",
    example_optional_trap_fixed => "optional-trap-fixed",
    example_precondition_never_true => "precondition-never-true",
    example_race_condition => "race-condition",
    example_rag => "rag",
    example_same_type_two_params => "same-type-two-params",
    example_step_never_reached => "step-never-reached",
    example_deadline_race => "deadline-race",
}

const RACE: &str = r#"
name: Race
events:
  - {name: A}
  - {name: B}
  - {name: Done, parents: [StopEvent]}
steps:
  - name: make_a
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [A]
  - name: make_b
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [B]
  - name: answer
    params:
      - {name: a, kind: required, types: [A]}
      - {name: b, kind: optional, types: [B]}
    outputs: [Done]
simulation:
  arrivals: [{event: UserMessageEvent, label: q1}]
  behaviour:
    make_b: {executions: {1: {fail: "profile service down"}}}
"#;

#[test]
fn inline_race_with_failure_human_and_json() {
    let human = explore_text(RACE, &[]);
    assert_eq!(human.code, 0, "{}", human.stderr);
    insta::assert_snapshot!("inline__race_human", human.stdout);
    let json = explore_text(RACE, &["--json"]);
    assert_eq!(json.code, 0);
    insta::assert_snapshot!("inline__race_json", json.stdout);
}

#[test]
fn fail_on_takes_a_list_and_names_what_was_reached() {
    let out = explore_text(RACE, &["--fail-on", "stall,exception"]);
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr,
        "saap explore: reachable (--fail-on): exception\n"
    );
    let out = explore_text(RACE, &["--fail-on", "stall"]);
    assert_eq!(out.code, 0);
}

#[test]
fn permuted_arrivals_reach_orders_the_declared_one_does_not() {
    let yaml = r#"
name: Hints
events:
  - {name: Hint}
  - {name: Done, parents: [StopEvent]}
steps:
  - name: answer
    params:
      - {name: q, kind: required, types: [UserMessageEvent]}
      - {name: h, kind: optional, types: [Hint]}
    outputs: [Done]
simulation:
  arrivals: [{event: Hint, label: h1}, {event: UserMessageEvent, label: q1}]
"#;
    let declared = explore_text(yaml, &["--fail-on", "multi-exec"]);
    assert_eq!(declared.code, 0, "{}", declared.stdout);
    let permuted = explore_text(yaml, &["--permute-arrivals", "--fail-on", "multi-exec"]);
    assert_eq!(permuted.code, 1);
    insta::assert_snapshot!("inline__hints_permuted", permuted.stdout);
}

const CYCLE: &str = r#"
name: Cycle
events: [{name: Tick}]
steps:
  - name: begin
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Tick]
  - name: again
    params: [{name: t, kind: required, types: [Tick]}]
    outputs: [Tick]
simulation:
  arrivals: [{event: UserMessageEvent}]
"#;

#[test]
fn depth_bound_says_results_are_partial() {
    let out = explore_text(CYCLE, &["--max-depth", "6"]);
    assert_eq!(out.code, 0);
    assert!(
        out.stderr.contains("bound hit: results are partial"),
        "{}",
        out.stderr
    );
    insta::assert_snapshot!("inline__cycle_depth_bound", out.stdout);
    let json = explore_text(CYCLE, &["--max-depth", "6", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(doc["complete"], false);
    assert_eq!(doc["bounds_hit"][0]["bound"], "max_depth");
}

#[test]
fn state_bound_says_results_are_partial() {
    let out = explore_text(CYCLE, &["--max-states", "3"]);
    assert_eq!(out.code, 0);
    let strict = explore_text(CYCLE, &["--max-states", "3", "--fail-on", "bound"]);
    assert_eq!(strict.code, 1);
    assert!(
        strict.stderr.contains("reachable (--fail-on): bound"),
        "{}",
        strict.stderr
    );
    assert!(out.stdout.contains("bound hit: results are partial"));
    assert!(out.stdout.contains("(max_states)"));
    assert!(out.stderr.contains("bound hit"));
}

#[test]
fn invalid_input_exits_2() {
    let out = run(saap().args(["explore", "does/not/exist.yaml"]));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("cannot open spec file"),
        "{}",
        out.stderr
    );
    let out = explore_text("name: x\nsteps: [\n", &[]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("-:"), "{}", out.stderr);
    let out = explore_text(
        "name: x\nsteps: []\nsimulation: {arrivals: [{event: Nope}]}\n",
        &[],
    );
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("Nope"), "{}", out.stderr);
    let out = explore_text(RACE, &["--fail-on", "everything"]);
    assert_eq!(out.code, 2);
}

#[test]
fn help_has_examples() {
    let out = run(saap().args(["explore", "--help"]));
    assert_eq!(out.code, 0);
    assert!(out.stdout.contains("Examples:"));
    assert!(out.stdout.contains("--fail-on"));
}

#[test]
fn spec_without_arrivals_never_starts() {
    let yaml = "name: X\nevents: [{name: A}]\nsteps:\n  - name: s\n    params: [{name: q, kind: required, types: [UserMessageEvent]}]\n    outputs: [A]\n";
    let out = explore_text(yaml, &["--fail-on", "stall"]);
    assert_eq!(out.code, 1);
    insta::assert_snapshot!("inline__no_arrivals", out.stdout);
}

/// Every spec in examples/specs (also ones added after the snapshots above were written)
/// explores completely within the default bounds, with nothing on stderr.
#[test]
fn every_example_spec_explores_completely() {
    let dir = workspace_root().join("examples/specs");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !matches!(ext, "yaml" | "yml" | "json") {
            continue;
        }
        seen += 1;
        let out = run(saap().args(["explore", "--json"]).arg(&path));
        assert_eq!(out.code, 0, "{}: {}", path.display(), out.stderr);
        assert_eq!(out.stderr, "", "{}", path.display());
        let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(doc["complete"], true, "{}", path.display());
    }
    assert!(seen >= 13, "only {seen} example specs found");
}
