//! `saap report --db STORE --run RUN`: run evidence from a store written by an example agent's
//! own command line (`saap::cli::main_with`, what the agent binary runs). The broken review
//! agent (the optional trap) publishes once without the review notes and again when a human
//! sends them: the report reads the run's records and says the step ran twice, next to the
//! static cause. The store is not changed; a run of another agent is refused.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Output, agent, run, saap, snapshot_dir};
use serde_json::Value;
use std::time::Duration;

fn saap_out(args: &[&str]) -> Output {
    run(saap().args(args).timeout(Duration::from_secs(120)))
}

#[test]
fn a_stored_run_shows_the_step_ran_twice_beside_its_cause() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("review.db");
    let db_s = db.to_str().unwrap();
    let workflow = saap_examples::broken::optional_trap();
    let spec = dir.path().join("agent.json");
    std::fs::write(&spec, workflow.spec_json()).unwrap();
    agent(
        workflow,
        &[
            "optional-trap-agent",
            "run",
            "--db",
            db_s,
            "--message",
            "release notes",
            "--timeout",
            "1",
        ],
    );
    let runs = saap_out(&["inspect", "--db", db_s, "runs", "--json"]);
    assert_eq!(runs.code, 0, "{}", runs.stderr);
    let runs: Value = serde_json::from_str(&runs.stdout).unwrap();
    let run_id = runs["runs"][0]["run_id"].as_str().unwrap().to_owned();
    agent(
        saap_examples::broken::optional_trap(),
        &[
            "optional-trap-agent",
            "send",
            &run_id,
            "--db",
            db_s,
            "--event",
            r#"{"_event_name": "ReviewNotes", "notes": "fine"}"#,
            "--timeout",
            "1",
        ],
    );
    let before = snapshot_dir(dir.path());
    let spec_s = spec.to_str().unwrap();

    let out = saap_out(&[
        "report",
        "--symptom",
        "runs-twice",
        "--step",
        "publish",
        spec_s,
        "--db",
        db_s,
        "--run",
        &run_id,
        "--json",
    ]);
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    let r: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(r["symptom"]["run"], run_id.as_str());
    assert_eq!(r["root_causes"][0]["code"], "SAAP010");
    let ev = r["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["tool"] == "run")
        .unwrap();
    assert_eq!(
        ev["summary"],
        format!("run {run_id}: `publish` ran 2 times").as_str()
    );
    let details: Vec<&str> = ev["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    assert!(details[0].starts_with("status live;"), "{details:?}");
    assert!(
        details.contains(&"`publish` ran 2 time(s) (the dispatcher's records)"),
        "{details:?}"
    );
    assert!(
        r["checked"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c.as_str().unwrap() == format!("run {run_id} read from store {db_s}")),
        "{}",
        r["checked"]
    );
    // The step explained on the recorded run through the core, as `saap explain --run` does:
    // each execution with what made its input set new.
    let explained = r["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["tool"] == "explain --run")
        .unwrap_or_else(|| panic!("no explain --run evidence: {}", r["evidence"]));
    assert_eq!(
        explained["command"],
        format!("saap explain {spec_s} --run {run_id} --db {db_s} --step publish").as_str()
    );
    let lines: Vec<&str> = explained["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    assert!(
        lines.iter().filter(|l| l.starts_with("x")).count() >= 2
            && lines.iter().any(|l| l.contains("new input set because")),
        "{lines:?}"
    );
    // The same explanation as the command it names prints.
    let by_hand = saap_out(&[
        "explain", spec_s, "--run", &run_id, "--db", db_s, "--step", "publish", "--json",
    ]);
    assert_eq!(by_hand.code, 0, "{}", by_hand.stderr);
    let by_hand: Value = serde_json::from_str(&by_hand.stdout).unwrap();
    assert_eq!(
        by_hand["steps"][0]["summary"], explained["summary"],
        "report and explain --run agree"
    );

    // The Markdown names the run in the symptom and shows its evidence.
    let md = saap_out(&[
        "report",
        "--symptom",
        "runs-twice",
        "--step",
        "publish",
        spec_s,
        "--db",
        db_s,
        "--run",
        &run_id,
    ]);
    assert_eq!(md.code, 0, "{}", md.stderr);
    assert!(
        md.stdout
            .contains(&format!("at step `publish`, run `{run_id}`")),
        "{}",
        md.stdout
    );
    assert!(
        md.stdout
            .contains(&format!("- **run**: run {run_id}: `publish` ran 2 times")),
        "{}",
        md.stdout
    );

    // Never-runs for the same step: the run contradicts it, and the report says the step ran.
    let out = saap_out(&[
        "report",
        "--symptom",
        "never-runs",
        "--step",
        "publish",
        spec_s,
        "--db",
        db_s,
        "--run",
        &run_id,
        "--json",
    ]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    let r: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(r["verdict"], "no_cause_found");

    // A run of another agent, or an unknown run, is refused.
    let other = dir.path().join("other.json");
    std::fs::write(&other, saap_examples::rag::workflow().spec_json()).unwrap();
    let out = saap_out(&[
        "report",
        "--symptom",
        "runs-twice",
        other.to_str().unwrap(),
        "--db",
        db_s,
        "--run",
        &run_id,
    ]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.contains("belongs to `ReviewAgentBroken`"),
        "{}",
        out.stderr
    );
    let out = saap_out(&[
        "report",
        "--symptom",
        "runs-twice",
        spec_s,
        "--db",
        db_s,
        "--run",
        "6650000000000000000000ff",
    ]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("SAAP-I007"), "{}", out.stderr);
    // Not a store: exit 2; read-only throughout.
    let out = saap_out(&[
        "report",
        "--symptom",
        "runs-twice",
        spec_s,
        "--db",
        spec_s,
        "--run",
        &run_id,
    ]);
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(snapshot_dir(dir.path()).len(), before.len() + 1);
    let now: Vec<(String, Vec<u8>)> = snapshot_dir(dir.path())
        .into_iter()
        .filter(|(n, _)| n != "other.json")
        .collect();
    assert_eq!(now, before, "the store changed");

    // A store an engine holds is refused at once: exit 3.
    let owned = dir.path().join("owned.db");
    let backend = saap::SqliteBackend::open(&owned).unwrap();
    let out = saap_out(&[
        "report",
        "--symptom",
        "runs-twice",
        spec_s,
        "--db",
        owned.to_str().unwrap(),
        "--run",
        &run_id,
    ]);
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stderr.contains("SAAP-I012"), "{}", out.stderr);
    drop(backend);
}
