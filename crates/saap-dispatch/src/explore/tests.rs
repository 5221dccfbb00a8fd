//! The explorer's unit tests.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::compiled::CompiledSpec;
use crate::ids::StepIdx;
use crate::record::{Origin, Record};
use crate::sim;
use crate::spec::ParamKind;
use crate::{SpecSyntax, compile_spec_text};
use std::sync::Arc;

fn spec(yaml: &str) -> Arc<CompiledSpec> {
    Arc::new(compile_spec_text(yaml, SpecSyntax::Yaml).unwrap())
}

fn run(yaml: &str) -> Exploration {
    run_with(yaml, ExploreOptions::default())
}

fn run_with(yaml: &str, opts: ExploreOptions) -> Exploration {
    explore(spec(yaml), &opts, &mut |_| {}).unwrap()
}

fn step<'a>(x: &'a Exploration, name: &str) -> &'a StepExecutions {
    x.steps.iter().find(|s| s.step == name).unwrap()
}

const RACE: &str = r#"
name: race
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
"#;

#[test]
fn race_condition_runs_twice_worst_case_and_once_best_case() {
    let x = run(RACE);
    assert!(x.is_complete());
    let answer = step(&x, "answer");
    assert_eq!(answer.worst, Some(2));
    assert_eq!(answer.best, Some(1));
    // The witness really runs `answer` twice when replayed.
    let starts = answer
        .worst_witness
        .iter()
        .flat_map(|t| &t.started)
        .filter(|e| e.step == "answer")
        .count();
    assert_eq!(starts, 2);
    assert_eq!(
        answer.worst_witness[0].text,
        "arrive UserMessageEvent#q1; starts make_a#x0 (q=UserMessageEvent#q1), make_b#x1 (q=UserMessageEvent#q1)"
    );
    // Once without B, once with it.
    let bindings: Vec<&str> = answer
        .worst_witness
        .iter()
        .flat_map(|t| &t.started)
        .filter(|e| e.step == "answer")
        .map(|e| e.bindings.as_str())
        .collect();
    assert_eq!(bindings.len(), 2);
    assert!(bindings[0].ends_with("b=none"), "{bindings:?}");
    assert!(bindings[1].contains("b=B#"), "{bindings:?}");
    assert_eq!(answer.reruns.len(), 1);
    assert!(
        answer.reruns[0].contains("`b` none → B#"),
        "{:?}",
        answer.reruns
    );
    assert_eq!(step(&x, "make_a").worst, Some(1));
    assert!(x.has_multi_exec());
}

#[test]
fn race_with_precondition_fix_runs_once() {
    let fixed = RACE.replace(
        "    outputs: [Done]\n",
        "    outputs: [Done]\n    precondition: {name: both, reads: [B], when: {present: b}}\n",
    );
    let x = run(&fixed);
    let answer = step(&x, "answer");
    assert_eq!((answer.best, answer.worst), (Some(1), Some(1)));
    assert!(x.stalls.is_empty());
    assert!(!x.has_multi_exec());
}

#[test]
fn execution_budget_caps_the_race() {
    let capped = RACE.replace(
        "    outputs: [Done]\n",
        "    outputs: [Done]\n    max_executions_per_run: 1\n",
    );
    let x = run(&capped);
    let answer = step(&x, "answer");
    assert_eq!((answer.best, answer.worst), (Some(1), Some(1)));
    // B can still arrive after the stop: evidence, not a second execution.
    assert!(x.after_stop.iter().any(|a| a.event == "B"));
}

#[test]
fn failure_without_stop_on_error_stalls_its_consumer() {
    let yaml = RACE.replace(
        "    outputs: [A]\n",
        "    outputs: [A]\n    stop_on_error: false\n",
    ) + "  behaviour:\n    make_a: {fail: \"no topic\"}\n";
    let x = run(&yaml);
    assert!(x.exceptions.is_empty(), "{:?}", x.exceptions);
    assert_eq!(x.stalls.len(), 1);
    assert_eq!(
        x.stalls[0].waiting,
        vec![Waiting {
            step: "answer".into(),
            // B made it a candidate; A never came.
            was_candidate: true,
            reason: WaitReason::RequiredMissing {
                params: vec!["a".into()]
            },
        }]
    );
    let w = &x.stalls[0].witness;
    assert!(
        w.iter()
            .any(|t| t.text.contains("fail make_a#x0 (no topic), run continues")),
        "{w:?}"
    );
}

#[test]
fn per_execution_behaviour_is_followed() {
    // The second execution of `answer` (the one with B) returns nothing: no second stop.
    let yaml = format!("{RACE}  behaviour:\n    answer: {{executions: {{2: {{emit: []}}}}}}\n");
    let x = run(&yaml);
    assert_eq!(step(&x, "answer").worst, Some(2));
    assert!(!x.after_stop.iter().any(|a| a.event == "Done"));
    let w = &step(&x, "answer").worst_witness;
    assert!(w.iter().any(|t| t.text.contains("→ (nothing)")), "{w:?}");
}

const FAN_IN: &str = r#"
name: fanin
events:
  - {name: Part}
  - {name: Merged}
  - {name: Done, parents: [StopEvent]}
steps:
  - name: w1
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Part]
  - name: w2
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Part]
  - name: w3
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Part]
  - name: merge
    params: [PARAM]
    outputs: [Merged]
  - name: finish
    params: [{name: m, kind: required, types: [Merged]}]
    outputs: [Done]
simulation:
  arrivals: [{event: UserMessageEvent, label: q1}]
"#;

#[test]
fn list_parameter_reruns_on_every_arrival() {
    let x = run(&FAN_IN.replace("PARAM", "{name: parts, kind: list, types: [Part]}"));
    assert!(x.is_complete());
    let merge = step(&x, "merge");
    assert_eq!(merge.worst, Some(3));
    // A Merged can stop the run before the last Parts arrive.
    assert_eq!(merge.best, Some(1));
    assert!(x.after_stop.iter().any(|a| a.event == "Part"));
}

#[test]
fn fixed_list_runs_once() {
    let x = run(&FAN_IN.replace(
        "PARAM",
        "{name: parts, kind: fixed_list, types: [Part], size: 3}",
    ));
    let merge = step(&x, "merge");
    assert_eq!((merge.best, merge.worst), (Some(1), Some(1)));
    assert!(x.stalls.is_empty());
    assert!(x.after_stop.is_empty());
    // The 3! orders in which the parts arrive bind the same set: one final state.
    assert_eq!(x.stats.final_states, 1);
}

#[test]
fn fixed_list_larger_than_producers_stalls_with_have_and_need() {
    let x = run(&FAN_IN.replace(
        "PARAM",
        "{name: parts, kind: fixed_list, types: [Part], size: 4}",
    ));
    assert_eq!(x.stalls.len(), 1);
    let stall = &x.stalls[0];
    let merge = stall.waiting.iter().find(|w| w.step == "merge").unwrap();
    assert_eq!(
        merge.reason,
        WaitReason::FixedListShort {
            param: "parts".into(),
            have: 3,
            need: 4
        }
    );
    let finish = stall.waiting.iter().find(|w| w.step == "finish").unwrap();
    assert_eq!(
        finish.reason,
        WaitReason::RequiredMissing {
            params: vec!["m".into()]
        }
    );
    assert!(!finish.was_candidate);
    assert_eq!(step(&x, "merge").worst, Some(0));
}

#[test]
fn missing_upstream_and_false_precondition_stall() {
    let x = run(r#"
name: stall
events:
  - {name: Hint}
  - {name: Ready}
  - {name: Done, parents: [StopEvent]}
steps:
  - name: prepare
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Ready]
  - name: use_hint
    params:
      - {name: r, kind: required, types: [Ready]}
      - {name: h, kind: required, types: [Hint]}
    outputs: [Done]
  - name: gated
    params: [{name: r, kind: required, types: [Ready]}]
    precondition: {name: never, when: {always: false}}
    outputs: [Done]
simulation:
  arrivals: [{event: UserMessageEvent}]
"#);
    assert_eq!(x.stalls.len(), 1);
    let w = &x.stalls[0].waiting;
    assert_eq!(
        w[0],
        Waiting {
            step: "use_hint".into(),
            was_candidate: true,
            reason: WaitReason::RequiredMissing {
                params: vec!["h".into()]
            }
        }
    );
    assert_eq!(
        w[1].reason,
        WaitReason::PreconditionFalse {
            precondition: "never".into()
        }
    );
    assert_eq!(x.stalls[0].witness.len(), 2);
}

#[test]
fn run_that_never_starts_is_a_stall() {
    let x = run(r#"
name: nostart
events: [{name: Hint}]
steps:
  - name: s
    params: [{name: h, kind: optional, types: [Hint]}]
    outputs: []
simulation:
  arrivals: [{event: Hint}]
"#);
    assert_eq!(x.stalls.len(), 1);
    assert!(x.stalls[0].never_started);
    assert_eq!(x.stalls[0].waiting[0].reason, WaitReason::NeverCandidate);
    assert!(x.stalls[0].witness[0].text.contains("refused"));
}

const AFTER_STOP: &str = r#"
name: afterstop
events:
  - {name: Note}
  - {name: Done, parents: [StopEvent]}
steps:
  - name: stopper
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Done]
  - name: logger
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Note]
simulation:
  arrivals: [{event: UserMessageEvent, label: q1}]
"#;

#[test]
fn step_racing_a_stop_emits_after_stop() {
    let x = run(AFTER_STOP);
    assert_eq!(x.after_stop.len(), 1);
    let a = &x.after_stop[0];
    assert_eq!(a.event, "Note");
    assert_eq!(a.step.as_deref(), Some("logger"));
    // The witness is replayed through the core: its last step is the late completion.
    let last = a.witness.last().unwrap();
    assert!(last.text.starts_with("complete logger#"), "{}", last.text);
    assert!(
        last.notes
            .iter()
            .any(|n| n.starts_with("Note#") && n.contains("after stop")),
        "{:?}",
        last.notes
    );
    // logger's completion is invisible (nobody takes Note): it was not branched on.
    assert!(x.stats.reduced > 0);
}

#[test]
fn failing_step_is_a_reachable_exception() {
    let x = run(&format!(
        "{AFTER_STOP}  behaviour:\n    logger: {{fail: \"model timed out\"}}\n"
    ));
    assert!(
        x.exceptions
            .iter()
            .any(|e| e.step.as_deref() == Some("logger")
                && e.message.as_deref() == Some("model timed out")
                && !e.after_stop)
    );
    // Failing after the stop is also reachable, as evidence only.
    assert!(x.exceptions.iter().any(|e| e.after_stop));
    let e = x.exceptions.iter().find(|e| !e.after_stop).unwrap();
    assert!(e.witness.last().unwrap().text.contains("→ ExceptionEvent"));
}

const DIAMOND: &str = r#"
name: diamond
events:
  - {name: X}
  - {name: Y}
  - {name: Z}
  - {name: Done, parents: [StopEvent]}
steps:
  - name: a
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [X]
  - name: b
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Y]
  - name: c
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Z]
  - name: join
    params:
      - {name: x, kind: required, types: [X]}
      - {name: y, kind: required, types: [Y]}
      - {name: z, kind: required, types: [Z]}
    outputs: [Done]
simulation:
  arrivals: [{event: UserMessageEvent}]
"#;

#[test]
fn dedup_merges_interleavings_of_a_diamond() {
    let naive = run_with(
        DIAMOND,
        ExploreOptions {
            dedup: false,
            partial_order: false,
            ..ExploreOptions::default()
        },
    );
    let x = run(DIAMOND);
    // 3! orders of a, b, c: the tree has 1 + 1 + 3 + 6 + 6 + 6 nodes, the graph
    // 1 + 1 + 3 + 3 + 1 + 1 states.
    assert_eq!(naive.stats.states, 23);
    assert_eq!(x.stats.states, 10);
    assert!(x.stats.merged > 0);
    assert_eq!(naive.stats.final_states, 6);
    assert_eq!(x.stats.final_states, 1);
    assert_eq!(step(&x, "join").worst, Some(1));
}

const CYCLE: &str = r#"
name: cycle
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
fn depth_bound_is_reported() {
    let x = run_with(
        CYCLE,
        ExploreOptions {
            max_depth: 20,
            ..ExploreOptions::default()
        },
    );
    assert!(!x.is_complete());
    assert_eq!(x.bounds_hit[0].bound, BoundKind::MaxDepth);
    assert!(x.bounds_hit[0].message.contains("results are partial"));
}

#[test]
fn the_depth_bound_names_the_steps_that_loop() {
    let x = run_with(
        CYCLE,
        ExploreOptions {
            max_depth: 20,
            ..ExploreOptions::default()
        },
    );
    let c = x.cycle.as_ref().expect("a loop is named");
    assert_eq!(c.steps, ["again"]);
    assert_eq!(c.code, Some("SAAP004"));
    assert!(c.fix.contains("max_executions_per_run"), "{}", c.fix);
    // One arrival and 19 completions: begin and 19 `again`s, each started by the Tick of
    // the one before; the chain holds every execution.
    assert_eq!(c.chain, 20);
    assert!(
        x.bounds_hit[0]
            .message
            .contains("`again` keeps triggering itself"),
        "{}",
        x.bounds_hit[0].message
    );
    // A bounded exploration names no loop.
    let done = run(CYCLE_BOUNDED);
    assert!(done.is_complete());
    assert!(done.cycle.is_none());
}

const CYCLE_BOUNDED: &str = r#"
name: cycle
events: [{name: Tick}]
steps:
  - name: begin
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Tick]
  - name: again
    params: [{name: t, kind: required, types: [Tick]}]
    outputs: [Tick]
    max_executions_per_run: 3
simulation:
  arrivals: [{event: UserMessageEvent}]
"#;

#[test]
fn an_arrival_labelled_with_its_type_name_is_printed_once() {
    let x = run(r#"
name: go
events: [{name: Go, kind: start}, {name: Done, kind: stop}]
steps:
  - {name: s, params: [{name: g, kind: required, types: [Go]}], outputs: [Done]}
simulation:
  arrivals: [{event: Go, label: Go}, {event: Go, label: again}, Go]
"#);
    let s = step(&x, "s");
    let texts: Vec<&str> = s.worst_witness.iter().map(|t| t.text.as_str()).collect();
    assert!(
        texts[0].starts_with("arrive Go; starts s#x0 (g=Go)"),
        "{texts:?}"
    );
    assert!(!texts.concat().contains("Go#Go"), "{texts:?}");
    // Other labels keep the type in front; an unlabelled arrival is `Type#n`.
    assert!(texts[1].starts_with("arrive Go#again"), "{texts:?}");
    assert!(
        texts.iter().any(|t| t.starts_with("arrive Go#3")),
        "{texts:?}"
    );
}

#[test]
fn state_bound_is_reported_and_progress_is_called() {
    let mut calls = Vec::new();
    let x = explore(
        spec(CYCLE),
        &ExploreOptions {
            max_states: 5,
            ..ExploreOptions::default()
        },
        &mut |p| calls.push(p),
    )
    .unwrap();
    assert_eq!(x.bounds_hit[0].bound, BoundKind::MaxStates);
    assert_eq!(x.stats.states, 5);
    assert!(calls.last().unwrap().done);
}

#[test]
fn permuted_arrivals_find_the_late_hint() {
    let yaml = r#"
name: hints
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
  arrivals: [{event: Hint}, {event: UserMessageEvent}]
"#;
    let declared = run(yaml);
    // In declared order the hint arrives first: refused as an orphan, answer runs once.
    assert_eq!(step(&declared, "answer").worst, Some(1));
    let permuted = run_with(
        yaml,
        ExploreOptions {
            permute_arrivals: true,
            ..ExploreOptions::default()
        },
    );
    let answer = step(&permuted, "answer");
    assert_eq!(answer.worst, Some(2));
    assert_eq!(answer.best, Some(1));
}

#[test]
fn redelivered_label_is_dropped_and_taken_without_branching() {
    let yaml = r#"
name: redeliver
events: [{name: Done, parents: [StopEvent]}]
steps:
  - name: answer
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Done]
simulation:
  arrivals:
    - {event: UserMessageEvent, label: q1}
    - {event: UserMessageEvent, label: q1}
"#;
    let x = run(yaml);
    assert_eq!(step(&x, "answer").worst, Some(1));
    assert!(x.after_stop.is_empty());
    let w = &step(&x, "answer").worst_witness;
    assert!(w.iter().any(|t| t.text.contains("duplicate dropped")));
}

/// Everything the report says, as comparable signatures.
fn signature(x: &Exploration) -> String {
    let mut stalls: Vec<String> = x
        .stalls
        .iter()
        .map(|s| format!("{}:{:?}", s.never_started, s.waiting))
        .collect();
    stalls.sort();
    let mut after: Vec<String> = x
        .after_stop
        .iter()
        .map(|a| format!("{}<{:?}", a.event, a.step))
        .collect();
    after.sort();
    let mut exc: Vec<String> = x
        .exceptions
        .iter()
        .map(|e| format!("{}<{:?}:{:?}:{}", e.event, e.step, e.message, e.after_stop))
        .collect();
    exc.sort();
    let steps: Vec<String> = x
        .steps
        .iter()
        .map(|s| format!("{}={:?}..{:?}", s.step, s.best, s.worst))
        .collect();
    format!("{steps:?}\n{stalls:?}\n{after:?}\n{exc:?}")
}

#[test]
fn reductions_do_not_change_any_result() {
    let specs = [
        RACE.to_string(),
        FAN_IN.replace("PARAM", "{name: parts, kind: list, types: [Part]}"),
        FAN_IN.replace(
            "PARAM",
            "{name: parts, kind: fixed_list, types: [Part], size: 4}",
        ),
        AFTER_STOP.to_string(),
        format!("{AFTER_STOP}  behaviour:\n    logger: {{fail: boom}}\n"),
        format!(
            "{AFTER_STOP}  behaviour:\n    stopper: {{emit: []}}\n    logger: {{executions: {{1: {{emit: [Note, Note]}}}}}}\n"
        ),
        DIAMOND.to_string(),
    ];
    for yaml in &specs {
        for permute_arrivals in [false, true] {
            let full = run_with(
                yaml,
                ExploreOptions {
                    dedup: false,
                    partial_order: false,
                    permute_arrivals,
                    ..ExploreOptions::default()
                },
            );
            for (dedup, partial_order) in [(true, false), (false, true), (true, true)] {
                let reduced = run_with(
                    yaml,
                    ExploreOptions {
                        dedup,
                        partial_order,
                        permute_arrivals,
                        ..ExploreOptions::default()
                    },
                );
                assert_eq!(
                    signature(&full),
                    signature(&reduced),
                    "dedup={dedup} por={partial_order} permute={permute_arrivals}\n{yaml}"
                );
                assert!(reduced.stats.states <= full.stats.states);
            }
        }
    }
}

mod random_specs {
    use super::*;
    use crate::spec::{
        ArrivalSpec, BehaviourSpec, Condition, EventTypeSpec, ExecutionBehaviour, ParamSpec,
        PreconditionSpec, SimulationSpec, StepSpec, WorkflowSpec,
    };
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    const INPUTS: [&str; 4] = ["UserMessageEvent", "A", "B", "C"];
    const OUTPUTS: [&str; 6] = ["A", "B", "C", "Done", "Note", "Seen"];

    fn arb_param(i: usize) -> impl Strategy<Value = ParamSpec> {
        (
            prop_oneof![
                Just(ParamKind::Required),
                Just(ParamKind::Optional),
                Just(ParamKind::List),
                Just(ParamKind::FixedList)
            ],
            proptest::sample::subsequence(INPUTS.to_vec(), 1..=2),
            1u32..=2,
        )
            .prop_map(move |(kind, types, n)| ParamSpec {
                name: format!("p{i}"),
                kind,
                types: types.into_iter().map(String::from).collect(),
                size: (kind == ParamKind::FixedList).then_some(n),
            })
    }

    fn arb_step(i: usize) -> impl Strategy<Value = (StepSpec, Option<BehaviourSpec>)> {
        (
                (1usize..=2).prop_flat_map(|n| {
                    (0..n).map(arb_param).collect::<Vec<_>>()
                }),
                (
                    proptest::sample::subsequence(OUTPUTS.to_vec(), 0..=2),
                    // Its first output returned for later delivery (a timer).
                    prop_oneof![3 => Just(false), 1 => Just(true)],
                ),
                prop_oneof![Just(None), (1u32..=2).prop_map(Some)],
                any::<bool>(),
                prop_oneof![
                    3 => Just(None),
                    1 => Just(Some(Condition::Present("p0".into()))),
                    1 => Just(Some(Condition::CountAtLeast { param: "p0".into(), n: 2 })),
                    1 => Just(Some(Condition::Always(false))),
                ],
                prop_oneof![
                    4 => Just(None),
                    1 => Just(Some(BehaviourSpec { fail: Some("boom".into()), ..BehaviourSpec::default() })),
                    1 => Just(Some(BehaviourSpec {
                        executions: [(2, ExecutionBehaviour::Emit(vec!["Done".into()]))].into(),
                        ..BehaviourSpec::default()
                    })),
                    1 => Just(Some(BehaviourSpec {
                        executions: [(1, ExecutionBehaviour::Fail("first fails".into()))].into(),
                        ..BehaviourSpec::default()
                    })),
                ],
            )
                .prop_map(move |(params, (outputs, later), max, stop_on_error, when, behaviour)| {
                    (
                        StepSpec {
                            name: format!("s{i}"),
                            params,
                            delayed: outputs
                                .first()
                                .filter(|_| later)
                                .map(|o| o.to_string())
                                .into_iter()
                                .collect(),
                            outputs: outputs.into_iter().map(String::from).collect(),
                            output_max: Default::default(),
                            returns_together: Vec::new(),
                            max_executions_per_run: max,
                            stop_on_error,
                            precondition: when.map(|w| PreconditionSpec {
                                name: "pre".into(),
                                reads: Vec::new(),
                                when: Some(w),
                            }),
                            description: None,
                            delegates_to: Vec::new(),
                        },
                        behaviour,
                    )
                })
    }

    fn arb_spec() -> impl Strategy<Value = WorkflowSpec> {
        (
            (2usize..=4).prop_flat_map(|n| (0..n).map(arb_step).collect::<Vec<_>>()),
            proptest::collection::vec(
                prop_oneof![
                    Just(("UserMessageEvent", Some("q1"))),
                    Just(("UserMessageEvent", None)),
                    Just(("A", None)),
                    Just(("B", Some("b1"))),
                ],
                1..=3,
            ),
        )
            .prop_map(|(steps, arrivals)| {
                let mut behaviour = BTreeMap::new();
                for (s, b) in &steps {
                    if let Some(b) = b {
                        behaviour.insert(s.name.clone(), b.clone());
                    }
                }
                let ev = |name: &str, parent: Option<&str>| EventTypeSpec {
                    name: name.into(),
                    parents: parent.into_iter().map(String::from).collect(),
                    description: None,
                };
                WorkflowSpec {
                    format: 1,
                    name: "random".into(),
                    description: None,
                    events: vec![
                        ev("A", None),
                        ev("B", None),
                        ev("C", None),
                        ev("Seen", None),
                        ev("Done", Some("StopEvent")),
                        ev("Note", Some("DisplayEvent")),
                    ],
                    steps: steps.into_iter().map(|(s, _)| s).collect(),
                    agents: Vec::new(),
                    simulation: Some(SimulationSpec {
                        arrivals: arrivals
                            .into_iter()
                            .map(|(e, l)| ArrivalSpec {
                                event: e.into(),
                                label: l.map(String::from),
                            })
                            .collect(),
                        behaviour,
                    }),
                }
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

        /// Every reduction, alone and together, gives the results of the plain
        /// enumeration of the interleaving tree (when that finishes within its bounds).
        #[test]
        fn reductions_are_sound_on_random_specs(
            ws in arb_spec(),
            permute in any::<bool>(),
            cancel in any::<bool>(),
        ) {
            let spec = Arc::new(CompiledSpec::compile(&ws).unwrap());
            let bounded = |dedup, partial_order| ExploreOptions {
                max_states: 20_000,
                max_depth: 40,
                permute_arrivals: permute,
                dedup,
                partial_order,
                cancel,
            };
            let full = explore(spec.clone(), &bounded(false, false), &mut |_| {}).unwrap();
            prop_assume!(full.is_complete());
            for (dedup, partial_order) in [(true, false), (false, true), (true, true)] {
                let reduced =
                    explore(spec.clone(), &bounded(dedup, partial_order), &mut |_| {}).unwrap();
                prop_assert!(reduced.is_complete());
                prop_assert_eq!(
                    signature(&full),
                    signature(&reduced),
                    "dedup={} por={}",
                    dedup,
                    partial_order
                );
                // Every witness replays to what it claims.
                for s in &reduced.steps {
                    let n = s.worst_witness.iter().flat_map(|t| &t.started)
                        .filter(|e| e.step == s.step).count();
                    prop_assert_eq!(Some(n), s.worst);
                }
                for a in &reduced.after_stop {
                    let last = a.witness.last().unwrap();
                    prop_assert!(last.notes.iter().any(|n| n.contains("after stop")),
                        "{:?}", a.witness);
                }
            }
        }

        /// Each simulator policy is one interleaving: what it does must be within what
        /// the explorer says can happen.
        #[test]
        fn every_simulated_run_is_within_the_explored_bounds(ws in arb_spec()) {
            let spec = Arc::new(CompiledSpec::compile(&ws).unwrap());
            let opts = ExploreOptions { max_states: 20_000, max_depth: 40, ..ExploreOptions::default() };
            let x = explore(spec.clone(), &opts, &mut |_| {}).unwrap();
            prop_assume!(x.is_complete());
            for policy in [sim::Policy::Fifo, sim::Policy::Lifo, sim::Policy::ArrivalsFirst] {
                let sim = sim::simulate(spec.clone(), policy, 1_000).unwrap();
                prop_assume!(sim.unfinished.is_empty());
                let run = &sim.run;
                for (si, s) in x.steps.iter().enumerate() {
                    let n = run.execution_count(si as StepIdx);
                    prop_assert!(s.best.unwrap() <= n && n <= s.worst.unwrap(),
                        "{:?}: step {} ran {} times, explored {:?}..{:?}", policy, s.step, n, s.best, s.worst);
                }
                if !run.is_terminated() {
                    prop_assert!(x.stalls_found > 0, "{:?}: the simulation stalls", policy);
                }
                let after_stop: Vec<(String, Option<String>)> = run.records().iter().filter_map(|r| match &r {
                    Record::EventAfterStop { seq, origin } => Some((
                        run.type_name(run.log()[*seq as usize].ty).to_string(),
                        match origin {
                            Origin::Outside => None,
                            Origin::Execution(e) => Some(run.spec().steps[run.execution(*e).unwrap().step as usize].name.clone()),
                        },
                    )),
                    _ => None,
                }).collect();
                for (event, step) in after_stop {
                    prop_assert!(x.after_stop.iter().any(|a| a.event == event && a.step == step),
                        "{:?}: {} after stop from {:?} not reported", policy, event, step);
                }
                if run.log().iter().any(|e| e.kind.is_exception()) {
                    prop_assert!(!x.exceptions.is_empty(), "{:?}: exception not reported", policy);
                }
            }
        }
    }
}

#[test]
fn exploration_is_deterministic() {
    let a = run(RACE);
    let b = run(RACE);
    assert_eq!(a, b);
}

/// An approval with a deadline whose decision does not end the run: `ask` returns `Asked`
/// now and `TimedOut` later; `decide` takes whichever of `Answer` and `TimedOut` comes, and
/// `close` ends the run on `Decided`. When both come, `decide` runs twice.
const DEADLINE: &str = r#"
name: deadline
events:
  - {name: Asked}
  - {name: Answer}
  - {name: TimedOut}
  - {name: Decided}
  - {name: Done, parents: [StopEvent]}
steps:
  - name: ask
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Asked, {event: TimedOut, delayed: true}]
  - name: decide
    params: [{name: a, kind: required, types: [Answer, TimedOut]}]
    outputs: [Decided]
  - name: close
    params: [{name: d, kind: list, types: [Decided]}]
    outputs: [Done]
    precondition: {name: after_two, when: {count_at_least: {param: d, n: 2}}}
simulation:
  arrivals: [{event: UserMessageEvent, label: q}, {event: Answer, label: yes}]
"#;

#[test]
fn a_timer_fires_at_every_point_after_it_was_set() {
    let x = run(DEADLINE);
    assert!(x.is_complete(), "{:?}", x.bounds_hit);
    // The answer and the deadline both reach `decide`: twice at worst, never fewer than twice
    // (the timer always fires in the end, the answer always arrives).
    let decide = step(&x, "decide");
    assert_eq!(decide.worst, Some(2));
    let fired: Vec<&str> = decide
        .worst_witness
        .iter()
        .map(|t| t.text.as_str())
        .filter(|t| t.starts_with("timer of ask#x0 fires"))
        .collect();
    assert_eq!(fired.len(), 1, "{:#?}", decide.worst_witness);
    assert!(fired[0].contains("TimedOut"), "{fired:?}");
    assert!(
        decide
            .worst_witness
            .iter()
            .any(|t| matches!(&t.action, TraceAction::Fire { event, step, .. } if event == "TimedOut" && step == "ask")),
        "{:#?}",
        decide.worst_witness
    );
}

#[test]
fn a_timer_dies_with_the_run_and_never_fires_after_the_end() {
    // `decide` ends the run: whichever comes first wins, the other is after-stop evidence
    // (the answer) or never delivered (the timer, dropped with the run).
    let yaml = DEADLINE
        .replace("    outputs: [Decided]\n", "    outputs: [Done]\n")
        .replace(
            "  - name: close\n    params: [{name: d, kind: list, types: [Decided]}]\n    outputs: [Done]\n    precondition: {name: after_two, when: {count_at_least: {param: d, n: 2}}}\n",
            "",
        );
    let x = run(&yaml);
    assert!(x.is_complete());
    // Twice at worst: the deadline fired while the answer's decision ran (a race the
    // explorer finds), once at best.
    let decide = step(&x, "decide");
    assert_eq!((decide.best, decide.worst), (Some(1), Some(2)));
    assert!(
        decide
            .worst_witness
            .iter()
            .any(|t| t.text.starts_with("timer of ask#x0 fires")),
        "{:#?}",
        decide.worst_witness
    );
    assert!(x.stalls.is_empty(), "{:?}", x.stalls);
    // The answer after the timeout's decision is kept as evidence.
    assert!(
        x.after_stop.iter().any(|a| a.event == "Answer"),
        "{:?}",
        x.after_stop
    );
    for w in x.steps.iter().flat_map(|s| &s.worst_witness) {
        assert!(
            !(w.text.contains("fires") && w.notes.iter().any(|n| n.contains("after stop"))),
            "a timer never fires after the end: {}",
            w.text
        );
    }
}

#[test]
fn a_cancellation_is_explored_at_every_point_while_the_run_is_live() {
    let opts = ExploreOptions {
        cancel: true,
        ..ExploreOptions::default()
    };
    let x = run_with(RACE, opts);
    assert!(x.is_complete());
    // Cancelled before `answer` ran: it ran 0 times at best.
    assert_eq!(step(&x, "answer").best, Some(0));
    assert_eq!(
        run(RACE)
            .steps
            .iter()
            .find(|s| s.step == "answer")
            .unwrap()
            .best,
        Some(1)
    );
    // The cancellation is an exception event from outside, and its witness cancels.
    let cancelled = x
        .exceptions
        .iter()
        .find(|e| e.event == "RunCancelledEvent" && e.step.is_none())
        .expect("the cancellation");
    let last = cancelled.witness.last().unwrap();
    assert_eq!(last.action, TraceAction::Cancel);
    assert!(
        last.text
            .starts_with("cancel the run → RunCancelledEvent; run ended by"),
        "{}",
        last.text
    );
    // A run with nothing left to do is a stall, not cancelled.
    let stalled = run_with(
        "name: w\nevents: [{name: A}, {name: Never}, {name: Done, parents: [StopEvent]}]\nsteps:\n  - {name: a, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A]}\n  - {name: b, params: [{name: a, kind: required, types: [A]}, {name: n, kind: required, types: [Never]}], outputs: [Done]}\nsimulation:\n  arrivals: [UserMessageEvent]\n",
        opts,
    );
    assert_eq!(stalled.stalls.len(), 1, "{:?}", stalled.stalls);
}

#[test]
fn the_simulator_fires_timers_when_the_run_has_nothing_else_to_do() {
    let s = sim::simulate(spec(DEADLINE), sim::Policy::Fifo, 1_000).unwrap();
    // The answer came first (in time), then the deadline: `decide` ran for both.
    let decide = s.run.spec().step_index("decide").unwrap();
    assert_eq!(s.run.execution_count(decide), 2);
    assert!(s.run.is_terminated());
    let timeline: Vec<Record> = s.run.records().to_vec();
    assert!(
        timeline
            .iter()
            .any(|r| matches!(r, Record::TimerSet { .. }))
    );
    assert!(
        timeline
            .iter()
            .any(|r| matches!(r, Record::TimerFired { .. }))
    );
    // The journal replays.
    crate::replay::replay(
        s.run.spec_arc().clone(),
        s.run.run_key(),
        None,
        &s.journal,
        &timeline,
    )
    .unwrap();
}

#[test]
fn a_delayed_output_must_be_an_output_and_reads_back_as_written() {
    let ws: crate::WorkflowSpec = crate::parse_spec(DEADLINE, SpecSyntax::Yaml).unwrap();
    assert_eq!(ws.steps[0].delayed, vec!["TimedOut".to_string()]);
    let json = serde_json::to_value(&ws).unwrap();
    assert_eq!(
        json["steps"][0]["outputs"],
        serde_json::json!(["Asked", {"event": "TimedOut", "delayed": true}])
    );
    let back: crate::WorkflowSpec = serde_json::from_value(json).unwrap();
    assert_eq!(back, ws);
    let mut bad = ws.clone();
    bad.steps[0].delayed.push("Nope".into());
    let e = CompiledSpec::compile(&bad).unwrap_err();
    assert!(e.to_string().contains("delayed"), "{e}");
}
