//! Recorded runs (`tests/histories/*.json`) replayed against the example specs, from every
//! prefix (TESTING.md §1): rebuilding the core from the first k inputs and continuing live
//! must give exactly the recorded decisions. The fixtures were recorded from
//! `saap simulate` of `examples/specs/`; a change in the semantics makes them diverge.
//!
//! Re-record deliberately with `SAAP_BLESS_HISTORIES=1 cargo test -p saap-dispatch --test histories`.
#![allow(clippy::unwrap_used)]

use saap_dispatch::replay::{History, HistoryError, ReplayError, replay};
use saap_dispatch::sim::{DEFAULT_MAX_COMPLETIONS, Policy, simulate};
use saap_dispatch::{CompiledSpec, DeclaredConditions, Run, SpecSyntax, compile_spec_text};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example_specs() -> Vec<(String, Arc<CompiledSpec>)> {
    let mut out = Vec::new();
    let dir = root().join("examples/specs");
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            let spec = compile_spec_text(&text, SpecSyntax::Yaml)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            out.push((stem, Arc::new(spec)));
        }
    }
    out
}

const POLICIES: [Policy; 3] = [Policy::Fifo, Policy::Lifo, Policy::ArrivalsFirst];

#[test]
fn histories_of_the_example_specs_replay_from_every_prefix() {
    let bless = std::env::var_os("SAAP_BLESS_HISTORIES").is_some();
    let dir = root().join("crates/saap-dispatch/tests/histories");
    let mut checked = 0;
    for (name, spec) in example_specs() {
        for policy in POLICIES {
            let file = dir.join(format!("{name}.{}.json", policy.as_str()));
            let sim = simulate(spec.clone(), policy, DEFAULT_MAX_COMPLETIONS).unwrap();
            let now = History::new(&sim.run, &sim.journal);
            if bless {
                std::fs::write(&file, serde_json::to_string_pretty(&now).unwrap() + "\n").unwrap();
            }
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| {
                panic!(
                    "{}: {e}; record it with SAAP_BLESS_HISTORIES=1",
                    file.display()
                )
            });
            let recorded: History = serde_json::from_str(&text).unwrap();
            assert_eq!(
                recorded,
                now,
                "{}: today's simulation differs from the recording",
                file.display()
            );

            // The whole history replays, fingerprint included.
            recorded.replay(spec.clone()).unwrap();
            // Every prefix: rebuild, then continue live.
            let journal = recorded.journal(&spec).unwrap();
            for k in 0..=journal.len() {
                let mut prefix = Run::new(spec.clone(), recorded.run_key);
                for input in &journal[..k] {
                    prefix
                        .apply(input.clone(), &mut DeclaredConditions)
                        .unwrap();
                }
                let mut live = replay(
                    spec.clone(),
                    recorded.run_key,
                    None,
                    &journal[..k],
                    &prefix.records().to_vec(),
                )
                .unwrap();
                for input in &journal[k..] {
                    live.apply(input.clone(), &mut DeclaredConditions).unwrap();
                }
                assert_eq!(
                    live.records(),
                    recorded.records,
                    "{} prefix {k}",
                    file.display()
                );
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 30,
        "expected the example specs' histories, checked {checked}"
    );
}

#[test]
fn a_history_replayed_against_another_workflow_is_refused_with_a_stable_code() {
    let specs = example_specs();
    let (name, spec) = &specs[0];
    let other = specs
        .iter()
        .find(|(_, s)| s.fingerprint() != spec.fingerprint())
        .unwrap();
    let text = std::fs::read_to_string(root().join(format!(
        "crates/saap-dispatch/tests/histories/{name}.fifo.json"
    )))
    .unwrap();
    let h: History = serde_json::from_str(&text).unwrap();
    let err = h.replay(other.1.clone()).unwrap_err();
    assert!(
        matches!(err, HistoryError::Replay(ReplayError::SpecChanged { .. })),
        "{err}"
    );
    assert!(err.to_string().starts_with("SAAP-R001"), "{err}");
}
