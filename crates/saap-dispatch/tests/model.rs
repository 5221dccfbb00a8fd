//! Model-based property tests: random workflows and random operation sequences (arrivals,
//! completions, failures, duplicate deliveries, stale and repeated completions, retries)
//! run through the real core and through a deliberately naive reference interpreter that
//! recomputes every decision by scanning the whole log. They must agree, and the
//! invariants of DESIGN §4 must hold. Replay from every prefix must reproduce the run.
//!
//! Reproduce a failure with the seed proptest prints (`PROPTEST_CASES`, and the
//! `proptest-regressions/` file that it writes).
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use saap_dispatch::record::Record;
use saap_dispatch::replay::{RunInput, replay};
use saap_dispatch::spec::{
    Condition, EventTypeSpec, ParamKind, ParamSpec, PreconditionSpec, StepSpec, WorkflowSpec,
};
use saap_dispatch::{
    CompiledSpec, DeclaredConditions, EventId, ExecutionId, NewEvent, Outcome, Run,
};
use saap_dispatch::{counter_event_id, derived_event_id};
use std::collections::BTreeMap;
use std::sync::Arc;

const USER_TYPES: [&str; 4] = ["A", "B", "C", "Done"];
/// Types a parameter or an arrival may name (Done is a stop event).
const INPUT_TYPES: [&str; 4] = ["StartEvent", "A", "B", "C"];

fn arb_param(i: usize) -> impl Strategy<Value = ParamSpec> {
    (
        prop_oneof![
            Just(ParamKind::Required),
            Just(ParamKind::Optional),
            Just(ParamKind::List),
            Just(ParamKind::FixedList)
        ],
        proptest::sample::subsequence(INPUT_TYPES.to_vec(), 1..=2),
        1u32..=3,
    )
        .prop_map(move |(kind, types, n)| ParamSpec {
            name: format!("p{i}"),
            kind,
            types: types.into_iter().map(String::from).collect(),
            size: (kind == ParamKind::FixedList).then_some(n),
        })
}

fn arb_condition(params: usize) -> impl Strategy<Value = Condition> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Condition::Always),
        (0..params).prop_map(|p| Condition::Present(format!("p{p}"))),
        (0..params).prop_map(|p| Condition::Absent(format!("p{p}"))),
        (0..params, 1u32..=3).prop_map(|(p, n)| Condition::CountAtLeast {
            param: format!("p{p}"),
            n
        }),
    ];
    leaf.prop_recursive(2, 6, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 1..3).prop_map(Condition::All),
            proptest::collection::vec(inner.clone(), 1..3).prop_map(Condition::Any),
            inner.prop_map(|c| Condition::Not(Box::new(c))),
        ]
    })
}

fn arb_step(i: usize) -> impl Strategy<Value = StepSpec> {
    (1usize..=3)
        .prop_flat_map(move |np| {
            (
                (0..np).map(arb_param).collect::<Vec<_>>(),
                proptest::option::of(arb_condition(np)),
                proptest::option::of(1u32..=2),
                any::<bool>(),
                proptest::collection::vec(proptest::sample::select(USER_TYPES.to_vec()), 0..=2),
            )
        })
        .prop_map(
            move |(params, cond, max, stop_on_error, outputs)| StepSpec {
                name: format!("s{i}"),
                params,
                outputs: outputs.into_iter().map(String::from).collect(),
                output_max: Default::default(),
                delayed: Vec::new(),
                returns_together: vec![],
                max_executions_per_run: max,
                stop_on_error,
                precondition: cond.map(|c| PreconditionSpec {
                    name: format!("pre{i}"),
                    reads: vec![],
                    when: Some(c),
                }),
                description: None,
                delegates_to: Vec::new(),
            },
        )
}

fn arb_workflow() -> impl Strategy<Value = WorkflowSpec> {
    (1usize..=4)
        .prop_flat_map(|n| (0..n).map(arb_step).collect::<Vec<_>>())
        .prop_map(|steps| WorkflowSpec {
            format: 1,
            name: "Model".into(),
            description: None,
            events: vec![
                ev("A", &[]),
                ev("B", &[]),
                ev("C", &[]),
                ev("Done", &["StopEvent"]),
            ],
            steps,
            agents: Vec::new(),
            simulation: None,
        })
}

fn ev(name: &str, parents: &[&str]) -> EventTypeSpec {
    EventTypeSpec {
        name: name.into(),
        parents: parents.iter().map(|p| p.to_string()).collect(),
        description: None,
    }
}

/// One operation of a generated history.
#[derive(Debug, Clone)]
enum Op {
    /// An outside event of `INPUT_TYPES[t]` (or the stop type for 4).
    Arrive(usize),
    /// Re-deliver the k-th event sent so far (same id).
    Redeliver(usize),
    /// Complete the k-th running execution with outputs from its step's declared list.
    Complete(usize),
    /// Fail the k-th running execution.
    Fail(usize),
    /// Retry the k-th running execution (a crash), then later completions use the new attempt.
    Retry(usize),
    /// Deliver the k-th finished execution's completion again.
    RepeatCompletion(usize),
}

fn arb_ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        4 => (0usize..5).prop_map(Op::Arrive),
        1 => any::<usize>().prop_map(Op::Redeliver),
        6 => any::<usize>().prop_map(Op::Complete),
        1 => any::<usize>().prop_map(Op::Fail),
        1 => any::<usize>().prop_map(Op::Retry),
        1 => any::<usize>().prop_map(Op::RepeatCompletion),
    ];
    // Most histories begin with a start event so that something happens.
    (any::<bool>(), proptest::collection::vec(op, 0..24)).prop_map(|(start, mut ops)| {
        if start {
            ops.insert(0, Op::Arrive(0));
        }
        ops
    })
}

// ---- the reference interpreter -------------------------------------------------------------

/// A naive interpreter of DESIGN §4: every decision rescans the whole log.
struct Model<'a> {
    spec: &'a CompiledSpec,
    /// (id, type name, dispatched): orphans and after-stop events are not dispatched.
    log: Vec<(EventId, String, bool)>,
    started: bool,
    terminated: bool,
    /// (step, input multiset as sorted ids)
    execs: Vec<(usize, Vec<EventId>)>,
    /// Executions per step since the run began (cleared at termination; irrelevant after).
    counts: BTreeMap<usize, u32>,
    /// Ids of accepted events (every appended event but orphans).
    taken: Vec<EventId>,
}

impl<'a> Model<'a> {
    fn new(spec: &'a CompiledSpec) -> Self {
        Model {
            spec,
            log: vec![],
            started: false,
            terminated: false,
            execs: vec![],
            counts: BTreeMap::new(),
            taken: vec![],
        }
    }

    fn kind(&self, name: &str) -> saap_protocol::hierarchy::Classification {
        self.spec.hierarchy.classify(name).unwrap()
    }

    fn append(&mut self, id: EventId, name: &str) {
        let k = self.kind(name);
        let orphan = !self.started && k.control && !k.start;
        // Orphans are refused, so they do not take their id.
        if !orphan && self.taken.contains(&id) {
            return;
        }
        if !orphan {
            self.taken.push(id);
        }
        if self.terminated {
            self.log.push((id, name.into(), false));
            return;
        }
        if !self.started {
            if k.start {
                self.started = true;
            } else {
                self.log.push((id, name.into(), false));
                return;
            }
        }
        self.log.push((id, name.into(), true));
        if k.stop || k.exception {
            self.terminated = true;
            self.counts.clear();
            return;
        }
        for (si, s) in self.spec.steps.iter().enumerate() {
            let takes = s.params.iter().any(|p| {
                p.types
                    .iter()
                    .any(|t| self.spec.types[*t as usize].name == name)
            });
            if takes {
                self.evaluate(si);
            }
        }
    }

    fn evaluate(&mut self, si: usize) {
        let s = &self.spec.steps[si];
        let matching = |p: &saap_dispatch::compiled::CompiledParam| -> Vec<EventId> {
            self.log
                .iter()
                .filter(|(_, n, d)| {
                    *d && p
                        .types
                        .iter()
                        .any(|t| &self.spec.types[*t as usize].name == n)
                })
                .map(|(i, _, _)| *i)
                .collect()
        };
        let mut bound = Vec::new();
        for p in &s.params {
            let m = matching(p);
            match p.kind {
                ParamKind::Required if m.is_empty() => return,
                ParamKind::FixedList if m.len() < p.size as usize => return,
                _ => {}
            }
            bound.push(match p.kind {
                ParamKind::Required | ParamKind::Optional => {
                    m.last().copied().into_iter().collect()
                }
                ParamKind::List => m,
                ParamKind::FixedList => m[..p.size as usize].to_vec(),
            });
        }
        if let Some(max) = s.max_executions_per_run
            && self.counts.get(&si).copied().unwrap_or(0) >= max
        {
            return;
        }
        let mut set: Vec<EventId> = bound.iter().flatten().copied().collect();
        set.sort();
        if self.execs.iter().any(|(st, s2)| *st == si && *s2 == set) {
            return;
        }
        if let Some(pc) = &s.precondition
            && let Some(c) = &pc.when
            && !eval(c, &bound)
        {
            return;
        }
        *self.counts.entry(si).or_insert(0) += 1;
        self.execs.push((si, set));
    }
}

fn eval(c: &saap_dispatch::compiled::CompiledCondition, bound: &[Vec<EventId>]) -> bool {
    use saap_dispatch::compiled::CompiledCondition as C;
    match c {
        C::Always(b) => *b,
        C::Present(p) => !bound[*p as usize].is_empty(),
        C::Absent(p) => bound[*p as usize].is_empty(),
        C::CountAtLeast(p, n) => bound[*p as usize].len() >= *n as usize,
        C::All(cs) => cs.iter().all(|c| eval(c, bound)),
        C::Any(cs) => cs.iter().any(|c| eval(c, bound)),
        C::Not(c) => !eval(c, bound),
    }
}

// ---- driving both --------------------------------------------------------------------------

struct Outcomes {
    run: Run,
    journal: Vec<RunInput>,
    /// What the model saw, in the same order as the core's log.
    model_execs: Vec<(usize, Vec<EventId>)>,
}

fn drive(spec: Arc<CompiledSpec>, ops: &[Op]) -> Outcomes {
    let mut run = Run::new(spec.clone(), 42);
    let mut model = Model::new(&spec);
    let mut pre = DeclaredConditions;
    let mut journal = Vec::new();
    let mut sent: Vec<(EventId, String)> = Vec::new();
    let mut next = 1u64;
    let mirror = |model: &mut Model, run: &Run, from: usize| {
        // Feed the model every log entry the core appended since `from`, in order.
        for e in &run.log()[from..] {
            model.append(e.id, run.type_name(e.ty));
        }
    };
    for op in ops {
        let before = run.log().len();
        match op {
            Op::Arrive(t) => {
                let name = if *t < INPUT_TYPES.len() {
                    INPUT_TYPES[*t]
                } else {
                    "Done"
                };
                let e = NewEvent::known(counter_event_id(next), spec.type_id(name).unwrap());
                next += 1;
                sent.push((e.id, name.into()));
                journal.push(RunInput::Append(e.clone()));
                let _ = run.append(e, &mut pre);
            }
            Op::Redeliver(k) if !sent.is_empty() => {
                let (id, name) = sent[k % sent.len()].clone();
                let e = NewEvent::known(id, spec.type_id(&name).unwrap());
                journal.push(RunInput::Append(e.clone()));
                let _ = run.append(e, &mut pre);
            }
            Op::Complete(k) | Op::Fail(k) | Op::Retry(k) => {
                let running: Vec<ExecutionId> = run.running().collect();
                if running.is_empty() {
                    continue;
                }
                let x = running[k % running.len()];
                let attempt = run.execution(x).unwrap().attempt;
                let input = match op {
                    Op::Retry(_) => RunInput::Retry { execution: x },
                    Op::Fail(_) => RunInput::Complete {
                        execution: x,
                        attempt,
                        outcome: Outcome::Failed("generated failure".into()),
                    },
                    _ => {
                        let step = &spec.steps[run.execution(x).unwrap().step as usize];
                        let outs = step
                            .outputs
                            .iter()
                            .enumerate()
                            .map(|(i, t)| NewEvent::known(derived_event_id(42, x, i as u32), *t))
                            .collect();
                        RunInput::Complete {
                            execution: x,
                            attempt,
                            outcome: Outcome::Returned(outs),
                        }
                    }
                };
                journal.push(input.clone());
                run.apply(input, &mut pre).unwrap();
            }
            Op::RepeatCompletion(k) => {
                // A duplicate or stale completion must be refused and change nothing.
                let n = run.executions().len();
                if n == 0 {
                    continue;
                }
                let x = ExecutionId((k % n) as u32);
                let records = run.records().len();
                let err = run.complete(x, 0, Outcome::Returned(vec![]), &mut pre);
                assert!(
                    err.is_err(),
                    "a completion for attempt 0 is always stale or late"
                );
                assert_eq!(run.records().len(), records);
            }
            Op::Redeliver(_) => {}
        }
        mirror(&mut model, &run, before);
    }
    let model_execs = model
        .execs
        .iter()
        .map(|(s, set)| (*s, set.clone()))
        .collect();
    Outcomes {
        run,
        journal,
        model_execs,
    }
}

fn core_execs(run: &Run) -> Vec<(usize, Vec<EventId>)> {
    (0..run.executions().len())
        .map(|i| {
            let x = ExecutionId(i as u32);
            let mut set: Vec<EventId> = run.bound_event_ids(x).into_iter().flatten().collect();
            set.sort();
            (run.execution(x).unwrap().step as usize, set)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256),
        ..ProptestConfig::default()
    })]

    #[test]
    fn core_agrees_with_the_naive_reference_interpreter(wf in arb_workflow(), ops in arb_ops()) {
        let spec = Arc::new(CompiledSpec::compile(&wf).unwrap());
        let out = drive(spec, &ops);
        prop_assert_eq!(core_execs(&out.run), out.model_execs);
    }

    #[test]
    fn invariants_hold_on_every_generated_history(wf in arb_workflow(), ops in arb_ops()) {
        let spec = Arc::new(CompiledSpec::compile(&wf).unwrap());
        let out = drive(spec.clone(), &ops);
        let run = &out.run;
        // No step runs without its required inputs; fixed lists bind exactly N.
        for (i, x) in run.executions().iter().enumerate() {
            let ids = run.bound_event_ids(ExecutionId(i as u32));
            for (p, bound) in spec.steps[x.step as usize].params.iter().zip(&ids) {
                match p.kind {
                    ParamKind::Required => prop_assert_eq!(bound.len(), 1),
                    ParamKind::Optional => prop_assert!(bound.len() <= 1),
                    ParamKind::FixedList => prop_assert_eq!(bound.len(), p.size as usize),
                    ParamKind::List => {}
                }
            }
        }
        // No input set runs twice.
        let execs = core_execs(run);
        for (i, a) in execs.iter().enumerate() {
            prop_assert!(!execs[..i].contains(a), "input set ran twice: {:?}", a);
        }
        // Nothing is dispatched after termination.
        if let Some(t) = run.records().iter().position(|r| matches!(r, Record::RunTerminated { .. })) {
            let after = run.records().slice(t..)
                .iter()
                .any(|r| matches!(r, Record::ExecutionStarted { .. } | Record::Candidate { .. }));
            prop_assert!(!after, "a step was evaluated after the run ended");
        }
        // Budgets hold.
        for (si, s) in spec.steps.iter().enumerate() {
            if let Some(max) = s.max_executions_per_run {
                prop_assert!(run.execution_count(si as u32) <= max as usize);
            }
        }
    }

    #[test]
    fn replay_from_every_prefix_reproduces_the_run(wf in arb_workflow(), ops in arb_ops()) {
        let spec = Arc::new(CompiledSpec::compile(&wf).unwrap());
        let out = drive(spec.clone(), &ops);
        let full = replay(spec.clone(), 42, Some(spec.fingerprint()), &out.journal, &out.run.records().to_vec());
        prop_assert!(full.is_ok(), "{:?}", full.err());
        for k in 0..=out.journal.len() {
            let mut prefix = Run::new(spec.clone(), 42);
            for input in &out.journal[..k] {
                prefix.apply(input.clone(), &mut DeclaredConditions).unwrap();
            }
            let mut live = replay(spec.clone(), 42, None, &out.journal[..k], &prefix.records().to_vec()).unwrap();
            for input in &out.journal[k..] {
                live.apply(input.clone(), &mut DeclaredConditions).unwrap();
            }
            prop_assert_eq!(live.records(), out.run.records());
        }
    }

    #[test]
    fn decisions_depend_only_on_the_log_prefix(wf in arb_workflow(), ops in arb_ops()) {
        // Running the same journal twice, in fresh runs, gives identical records: nothing
        // outside the inputs (time, hash order, allocation) leaks into decisions.
        let spec = Arc::new(CompiledSpec::compile(&wf).unwrap());
        let out = drive(spec.clone(), &ops);
        let mut again = Run::new(spec, 42);
        for input in &out.journal {
            again.apply(input.clone(), &mut DeclaredConditions).unwrap();
        }
        prop_assert_eq!(again.records(), out.run.records());
        prop_assert_eq!(again.log(), out.run.log());
    }

    #[test]
    fn decisions_do_not_depend_on_when_the_id_and_input_set_indexes_are_built(
        wf in arb_workflow(),
        ops in arb_ops(),
        ids_from in 0usize..6,
        sets_from in 0usize..4,
    ) {
        // Short runs scan for ids and input sets, long ones hash them; a run switched to
        // hashing early (from the start, or in the middle) decides exactly the same.
        let spec = Arc::new(CompiledSpec::compile(&wf).unwrap());
        let out = drive(spec.clone(), &ops);
        let mut indexed = Run::new(spec.clone(), 42).with_index_thresholds(ids_from, sets_from);
        for input in &out.journal {
            indexed.apply(input.clone(), &mut DeclaredConditions).unwrap();
        }
        prop_assert_eq!(indexed.records(), out.run.records());
        prop_assert_eq!(indexed.log(), out.run.log());
        for (i, e) in out.run.log().iter().enumerate() {
            prop_assert_eq!(indexed.seq_of(&e.id), out.run.seq_of(&e.id), "seq_of for log entry {}", i);
        }
    }

    #[test]
    fn a_reset_run_decides_like_a_fresh_one(wf in arb_workflow(), ops in arb_ops(), other in arb_ops()) {
        // Engines recycle ended runs with `Run::reset`; nothing of the earlier run may leak.
        let spec = Arc::new(CompiledSpec::compile(&wf).unwrap());
        let out = drive(spec.clone(), &ops);
        let mut recycled = drive(spec.clone(), &other).run;
        recycled.reset(42);
        for input in &out.journal {
            recycled.apply(input.clone(), &mut DeclaredConditions).unwrap();
        }
        prop_assert_eq!(recycled.records(), out.run.records());
        prop_assert_eq!(recycled.log(), out.run.log());
        prop_assert_eq!(recycled.executions().len(), out.run.executions().len());
        for i in 0..out.run.executions().len() {
            let x = ExecutionId(i as u32);
            prop_assert_eq!(recycled.bound_event_ids(x), out.run.bound_event_ids(x));
        }
        prop_assert_eq!(recycled.take_started(), out.run.clone().take_started());
    }

    #[test]
    fn a_rekeyed_run_decides_like_a_fresh_one_with_that_key(wf in arb_workflow(), ops in arb_ops(), other in arb_ops()) {
        // Engines reset a let-go run's slot before its next run's key is known and give it
        // that key when a new run takes it; `rekey` of a run that went on resets it.
        let spec = Arc::new(CompiledSpec::compile(&wf).unwrap());
        let out = drive(spec.clone(), &ops);
        let mut early = drive(spec.clone(), &other).run;
        early.reset(7);
        early.rekey(42);
        let mut late = drive(spec.clone(), &other).run;
        late.rekey(42);
        for run in [&mut early, &mut late] {
            prop_assert_eq!(run.run_key(), 42);
            for input in &out.journal {
                run.apply(input.clone(), &mut DeclaredConditions).unwrap();
            }
            prop_assert_eq!(run.records(), out.run.records());
            prop_assert_eq!(run.log(), out.run.log());
            prop_assert_eq!(run.take_started(), out.run.clone().take_started());
        }
    }

    #[test]
    fn a_shrunk_run_keeps_its_evidence_and_decides_on_like_the_original(
        wf in arb_workflow(), ops in arb_ops(), more in arb_ops()
    ) {
        // Engines that keep ended runs shrink their tables; a run may still get inputs after
        // (events after the stop, late completions): it must go on deciding the same.
        let spec = Arc::new(CompiledSpec::compile(&wf).unwrap());
        let out = drive(spec.clone(), &ops);
        let mut shrunk = out.run.clone();
        shrunk.shrink_to_fit();
        prop_assert!(shrunk.memory_bytes() <= out.run.memory_bytes());
        prop_assert_eq!(shrunk.records(), out.run.records());
        prop_assert_eq!(shrunk.log(), out.run.log());
        let mut original = out.run.clone();
        for input in &drive(spec.clone(), &more).journal {
            let a = original.apply(input.clone(), &mut DeclaredConditions);
            let b = shrunk.apply(input.clone(), &mut DeclaredConditions);
            prop_assert_eq!(a.is_ok(), b.is_ok());
        }
        prop_assert_eq!(shrunk.records(), original.records());
        prop_assert_eq!(shrunk.log(), original.log());
    }

    #[test]
    fn a_run_that_forgot_its_evidence_keeps_its_status_and_resets_like_a_fresh_one(
        wf in arb_workflow(), ops in arb_ops(), other in arb_ops()
    ) {
        // Engines free an ended run's tables while a waiter still holds it: its status must
        // stay (an ended run stays ended), nothing may look running, and a reset after it
        // must decide like a fresh run.
        let spec = Arc::new(CompiledSpec::compile(&wf).unwrap());
        let out = drive(spec.clone(), &ops);
        let mut forgetful = drive(spec.clone(), &other).run;
        let status = forgetful.status();
        forgetful.forget_evidence();
        prop_assert_eq!(forgetful.status(), status);
        prop_assert_eq!(forgetful.running().count(), 0);
        prop_assert!(forgetful.log().is_empty() && forgetful.records().is_empty());
        forgetful.reset(42);
        for input in &out.journal {
            forgetful.apply(input.clone(), &mut DeclaredConditions).unwrap();
        }
        prop_assert_eq!(forgetful.records(), out.run.records());
        prop_assert_eq!(forgetful.log(), out.run.log());
        for i in 0..out.run.executions().len() {
            let x = ExecutionId(i as u32);
            prop_assert_eq!(forgetful.bound_event_ids(x), out.run.bound_event_ids(x));
        }
    }
    #[test]
    fn a_run_grown_into_an_ended_runs_tables_decides_like_one_that_grew_its_own(
        wf in arb_workflow(), ops in arb_ops(), other in arb_ops(), at in 0usize..8
    ) {
        // Engines hand the tables of an ended run (`take_tables`) to a run about to execute
        // (`grow_into`): at whatever point it happens, nothing of the ended run may leak
        // into the decisions, and the ended run keeps its status as with `forget_evidence`.
        let spec = Arc::new(CompiledSpec::compile(&wf).unwrap());
        let out = drive(spec.clone(), &ops);
        let mut ended = drive(spec.clone(), &other).run;
        let status = ended.status();
        let mut tables = ended.take_tables();
        prop_assert_eq!(ended.status(), status);
        prop_assert_eq!(ended.running().count(), 0);
        prop_assert!(ended.log().is_empty() && ended.records().is_empty());
        let mut grown = Run::new(spec.clone(), 42);
        for (i, input) in out.journal.iter().enumerate() {
            if i == at {
                grown.grow_into(&mut tables);
            }
            grown.apply(input.clone(), &mut DeclaredConditions).unwrap();
        }
        prop_assert_eq!(grown.records(), out.run.records());
        prop_assert_eq!(grown.log(), out.run.log());
        prop_assert_eq!(grown.executions().len(), out.run.executions().len());
        for i in 0..out.run.executions().len() {
            let x = ExecutionId(i as u32);
            prop_assert_eq!(grown.bound_event_ids(x), out.run.bound_event_ids(x));
        }
        prop_assert_eq!(grown.take_started(), out.run.clone().take_started());
    }
}
