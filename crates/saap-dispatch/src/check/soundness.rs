//! Soundness against the simulator: whatever `check` says can never run must not run in a
//! simulation of the same spec (random small specs, outside arrivals only).

#![allow(clippy::unwrap_used, clippy::needless_range_loop)]
use super::*;
use crate::spec::{
    ArrivalSpec, Condition, EventTypeSpec, ParamSpec, PreconditionSpec, SimulationSpec, StepSpec,
    WorkflowSpec,
};
use proptest::prelude::*;
use std::sync::Arc;

const INPUT_TYPES: &[&str] = &[
    "UserMessageEvent",
    "T0",
    "T1",
    "T2",
    "T3",
    "Shown",
    "StopEvent",
    "HumanInTheLoopInputResponseEvent",
];
const OUTPUT_TYPES: &[&str] = &["T0", "T1", "T2", "T3", "Shown", "StopEvent"];

fn kind(k: u8) -> ParamKind {
    match k % 4 {
        0 => ParamKind::Required,
        1 => ParamKind::Optional,
        2 => ParamKind::List,
        _ => ParamKind::FixedList,
    }
}

type ParamGen = (u8, Vec<usize>, u32);
type StepGen = (Vec<ParamGen>, Vec<usize>, Option<u32>, Option<(u8, u32)>);

fn build(steps: Vec<StepGen>, arrivals: Vec<bool>) -> WorkflowSpec {
    let mut out = Vec::new();
    for (si, (params, outputs, max, pre)) in steps.into_iter().enumerate() {
        let params: Vec<ParamSpec> = params
            .into_iter()
            .enumerate()
            .map(|(pi, (k, types, size))| {
                let kind = kind(k);
                let mut names: Vec<String> = Vec::new();
                for t in types {
                    let n = INPUT_TYPES[t % INPUT_TYPES.len()].to_string();
                    if !names.contains(&n) {
                        names.push(n);
                    }
                }
                ParamSpec {
                    name: format!("p{pi}"),
                    kind,
                    types: names,
                    size: (kind == ParamKind::FixedList).then_some(size),
                }
            })
            .collect();
        let mut outs: Vec<String> = Vec::new();
        for o in outputs {
            let n = OUTPUT_TYPES[o % OUTPUT_TYPES.len()].to_string();
            if !outs.contains(&n) {
                outs.push(n);
            }
        }
        let precondition = pre.filter(|_| !params.is_empty()).map(|(c, n)| {
            let p = format!("p{}", (c as usize / 3) % params.len());
            PreconditionSpec {
                name: format!("pre{si}"),
                reads: vec![],
                when: Some(match c % 3 {
                    0 => Condition::Always(false),
                    1 => Condition::Present(p),
                    _ => Condition::CountAtLeast { param: p, n },
                }),
            }
        });
        out.push(StepSpec {
            name: format!("s{si}"),
            params,
            outputs: outs,
            output_max: Default::default(),
            delayed: Vec::new(),
            returns_together: vec![],
            max_executions_per_run: max,
            stop_on_error: true,
            precondition,
            description: None,
            delegates_to: Vec::new(),
        });
    }
    let control = |n: &str| EventTypeSpec {
        name: n.to_string(),
        parents: vec![],
        description: None,
    };
    WorkflowSpec {
        format: crate::spec::SPEC_FORMAT_VERSION,
        name: "random".into(),
        description: None,
        events: vec![
            control("T0"),
            control("T1"),
            control("T2"),
            EventTypeSpec {
                name: "T3".into(),
                parents: vec!["T0".into()],
                description: None,
            },
            EventTypeSpec {
                name: "Shown".into(),
                parents: vec!["DisplayEvent".into()],
                description: None,
            },
        ],
        steps: out,
        agents: Vec::new(),
        simulation: Some(SimulationSpec {
            arrivals: std::iter::once("UserMessageEvent")
                .chain(arrivals.iter().map(|h| {
                    if *h {
                        "HumanInTheLoopInputResponseEvent"
                    } else {
                        "UserMessageEvent"
                    }
                }))
                .map(|e| ArrivalSpec {
                    event: e.into(),
                    label: None,
                })
                .collect(),
            behaviour: Default::default(),
        }),
    }
}

/// The plain fixpoint the worklist in [`Analysis::reachability`] must agree with.
fn naive_runs(cx: &Analysis<'_>, respect: bool) -> Vec<bool> {
    let mut avail: Vec<bool> = (0..cx.spec.types.len())
        .map(|t| cx.outside[t] && cx.dispatchable(t as TypeId))
        .collect();
    let mut runs = vec![false; cx.spec.steps.len()];
    loop {
        let mut changed = false;
        for (si, s) in cx.spec.steps.iter().enumerate() {
            if runs[si] || (respect && cx.never_true[si]) {
                continue;
            }
            let has = |ts: &[TypeId]| ts.iter().any(|t| avail[*t as usize]);
            if s.params.iter().any(|p| has(&p.types))
                && s.params
                    .iter()
                    .filter(|p| Analysis::blocking(p.kind))
                    .all(|p| has(&p.types))
            {
                runs[si] = true;
                changed = true;
                for &o in &cx.outs[si] {
                    if cx.dispatchable(o) {
                        avail[o as usize] = true;
                    }
                }
            }
        }
        if !changed {
            return runs;
        }
    }
}

/// The plain fixpoint [`Analysis::leads_to_end`] must agree with.
fn naive_ends(cx: &Analysis<'_>) -> Vec<bool> {
    let n = cx.spec.steps.len();
    let mut ends = vec![false; n];
    loop {
        let mut changed = false;
        for si in 0..n {
            if ends[si] || !cx.could_run[si] {
                continue;
            }
            let reaches = cx.outs[si].iter().any(|&t| {
                let k = cx.spec.type_info(t).kind;
                (k.is_control() && k.is_terminal())
                    || (cx.dispatchable(t)
                        && cx.spec.consumers(t).iter().any(|&(c, _)| ends[c as usize]))
            });
            let asks = cx.outs[si].iter().any(|&t| {
                REQUEST_ROOTS
                    .iter()
                    .any(|r| cx.spec.hierarchy.is_subtype_of(cx.name(t), r))
            });
            let answered = asks
                && cx.spec.steps.iter().enumerate().any(|(ci, c)| {
                    ends[ci]
                        && c.params.iter().flat_map(|p| p.types.iter()).any(|&t| {
                            cx.outside[t as usize] && !cx.spec.type_info(t).kind.is_start()
                        })
                });
            if reaches || answered {
                ends[si] = true;
                changed = true;
            }
        }
        if !changed {
            return ends;
        }
    }
}

/// `reach[a][b]`: a path of one or more steps from `a` to `b` (not through fixed lists).
fn naive_reach(cx: &Analysis<'_>) -> Vec<Vec<bool>> {
    let n = cx.spec.steps.len();
    let mut reach = vec![vec![false; n]; n];
    for a in 0..n {
        for &t in &cx.outs[a] {
            if !cx.dispatchable(t) {
                continue;
            }
            for &(c, p) in cx.spec.consumers(t) {
                if cx.spec.steps[c as usize].params[p as usize].kind != ParamKind::FixedList {
                    reach[a][c as usize] = true;
                }
            }
        }
    }
    for k in 0..n {
        for a in 0..n {
            for b in 0..n {
                if reach[a][k] && reach[k][b] {
                    reach[a][b] = true;
                }
            }
        }
    }
    reach
}

fn step_gen() -> impl Strategy<Value = StepGen> {
    (
        prop::collection::vec(
            (any::<u8>(), prop::collection::vec(0usize..8, 1..3), 1u32..4),
            0..4,
        ),
        prop::collection::vec(0usize..6, 0..3),
        prop::option::of(1u32..4),
        prop::option::weighted(0.3, (any::<u8>(), 0u32..3)),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn steps_check_says_cannot_run_never_run_in_simulation(
        steps in prop::collection::vec(step_gen(), 1..7),
        arrivals in prop::collection::vec(any::<bool>(), 0..3),
    ) {
        let spec = build(steps, arrivals);
        let compiled = Arc::new(CompiledSpec::compile(&spec).unwrap());
        let findings = check(&compiled);
        // Deterministic.
        prop_assert_eq!(&findings, &check(&compiled));
        // The linear-time analyses agree with the plain fixpoints.
        let cx = Analysis::new(&compiled);
        prop_assert_eq!(&cx.runs, &naive_runs(&cx, true));
        prop_assert_eq!(&cx.could_run, &naive_runs(&cx, false));
        prop_assert_eq!(cx.leads_to_end(), naive_ends(&cx));
        // Unbounded cycles: reported exactly once per strongly connected set of steps
        // none of which is bounded, on its first step.
        let reach = naive_reach(&cx);
        let n = compiled.steps.len();
        let bounded = |s: usize| {
            compiled.steps[s].max_executions_per_run.is_some()
                || compiled.steps[s].precondition.is_some()
        };
        let mut expected: Vec<String> = Vec::new();
        for s in 0..n {
            if !reach[s][s] {
                continue;
            }
            let comp: Vec<usize> = (0..n).filter(|&t| reach[s][t] && reach[t][s]).collect();
            if comp[0] == s && !comp.iter().any(|&t| bounded(t)) {
                expected.push(compiled.steps[s].name.clone());
            }
        }
        let reported: Vec<String> = findings
            .iter()
            .filter(|f| f.code == "SAAP004")
            .filter_map(|f| f.step.clone())
            .collect();
        prop_assert_eq!(reported, expected);
        let never: BTreeSet<String> = findings
            .iter()
            .filter(|f| {
                matches!(
                    f.code,
                    "SAAP001" | "SAAP002" | "SAAP009" | "SAAP017"
                )
            })
            .filter_map(|f| f.step.clone())
            .collect();
        for policy in [
            crate::sim::Policy::Fifo,
            crate::sim::Policy::Lifo,
            crate::sim::Policy::ArrivalsFirst,
        ] {
            let sim = crate::sim::simulate(compiled.clone(), policy, 300).unwrap();
            for x in sim.run.executions() {
                let name = &compiled.steps[x.step as usize].name;
                prop_assert!(
                    !never.contains(name),
                    "`{}` ran under {:?} although check says it cannot: {:?}",
                    name,
                    policy,
                    findings
                );
            }
        }
    }
}
