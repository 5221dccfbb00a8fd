//! `diff` of two runs (issue 23 §3) over the example specs' simulated runs: a run diffed
//! with itself is the same; two runs of one spec under different scheduling policies
//! agree up to the divergence it names and differ there; a run cut short is named as
//! such; fields differ only in what is not an id.
#![allow(clippy::unwrap_used)]

use saap_dispatch::diff::{DivergenceKind, Side, diff_runs, diff_text};
use saap_dispatch::sim::{DEFAULT_MAX_COMPLETIONS, Policy, simulate};
use saap_dispatch::{CompiledSpec, DeclaredConditions, Run, SpecSyntax, compile_spec_text};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;

fn example_specs() -> Vec<(String, Arc<CompiledSpec>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/specs");
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    entries.sort();
    entries
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let spec = compile_spec_text(&text, SpecSyntax::Yaml).unwrap();
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            (stem, Arc::new(spec))
        })
        .collect()
}

#[test]
fn a_run_diffed_with_itself_is_the_same() {
    for (name, spec) in example_specs() {
        let sim = simulate(spec, Policy::Fifo, DEFAULT_MAX_COMPLETIONS).unwrap();
        let d = diff_runs(&Side::of(&sim.run), &Side::of(&sim.run));
        assert!(d.is_same(), "{name}: {d:?}");
        assert!(d.executions.is_empty() && d.events.is_empty(), "{name}");
        assert!(
            diff_text(&d, "a", "b").starts_with("the runs are the same"),
            "{name}"
        );
    }
}

#[test]
fn runs_under_two_policies_agree_up_to_the_divergence_and_differ_there() {
    let mut diverged = 0;
    for (name, spec) in example_specs() {
        let a = simulate(spec.clone(), Policy::Fifo, DEFAULT_MAX_COMPLETIONS).unwrap();
        let b = simulate(spec, Policy::Lifo, DEFAULT_MAX_COMPLETIONS).unwrap();
        let d = diff_runs(&Side::of(&a.run), &Side::of(&b.run));
        let (ra, rb) = (a.run.records(), b.run.records());
        match &d.first {
            None => assert!(ra.iter().eq(rb.iter()), "{name}"),
            Some(f) => {
                diverged += 1;
                let before = |r: &saap_dispatch::record::Records<'_>| {
                    r.slice(..f.record).iter().collect::<Vec<_>>()
                };
                assert_eq!(before(&ra), before(&rb), "{name}: agree before");
                assert!(f.a.is_some() || f.b.is_some(), "{name}");
                let text = diff_text(&d, "fifo", "lifo");
                assert!(
                    text.starts_with(&format!("the runs diverge at record {}", f.record)),
                    "{name}: {text}"
                );
            }
        }
    }
    assert!(diverged > 0, "some example's order matters");
}

#[test]
fn a_run_cut_short_is_named_where_it_stops() {
    let (_, spec) = example_specs()
        .into_iter()
        .find(|(n, _)| n == "optional-trap")
        .unwrap();
    let full = simulate(spec.clone(), Policy::Fifo, DEFAULT_MAX_COMPLETIONS).unwrap();
    let half = full.journal.len() / 2;
    let mut cut = Run::new(spec, full.run.run_key());
    for input in &full.journal[..half] {
        cut.apply(input.clone(), &mut DeclaredConditions).unwrap();
    }
    let d = diff_runs(&Side::of(&full.run), &Side::of(&cut));
    let f = d.first.as_ref().unwrap();
    assert_eq!(f.record, cut.records().len(), "{d:?}");
    assert!(f.b.is_none() && f.a.is_some(), "{d:?}");
    assert!(f.detail.contains("run A goes on"), "{}", f.detail);
    assert_ne!(d.end_a, d.end_b);
    assert!(!d.executions.is_empty(), "{d:?}");
}

fn side<'a>(run: &'a saap_dispatch::Run, f: &'a dyn Fn(u32) -> Option<Value>) -> Side<'a> {
    Side {
        run,
        fields: Some(f),
    }
}

#[test]
fn fields_differ_in_what_is_not_an_id() {
    let (_, spec) = example_specs()
        .into_iter()
        .find(|(n, _)| n == "optional-trap")
        .unwrap();
    let sim = simulate(spec, Policy::Fifo, DEFAULT_MAX_COMPLETIONS).unwrap();
    let run = &sim.run;
    let fields = |text: &'static str, id: &'static str| {
        move |seq: u32| -> Option<Value> {
            let text = if seq == 0 { text } else { "same" };
            Some(json!({"message": text, "request_event_id": id, "nested": {"child_run_id": id}}))
        }
    };
    let (plain, other_id, other_text) = (fields("hi", "a"), fields("hi", "b"), fields("bye", "a"));
    assert!(diff_runs(&side(run, &plain), &side(run, &other_id)).is_same());
    let d = diff_runs(&side(run, &plain), &side(run, &other_text));
    let f = d.first.unwrap();
    assert_eq!(f.kind, DivergenceKind::Event);
    assert_eq!(
        f.record, 0,
        "the record that starts the run names the start event: {f:?}"
    );
    assert!(
        f.detail
            .contains(r#"has other fields: message: "hi" → "bye""#),
        "{}",
        f.detail
    );
}
