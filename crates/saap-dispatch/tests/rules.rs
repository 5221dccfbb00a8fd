//! One test per rule of the dispatch semantics (DESIGN §4), named after the rule.
#![allow(clippy::unwrap_used)]

use saap_dispatch::record::{Origin, Record, SkipReason, Termination};
use saap_dispatch::replay::{ReplayError, RunInput, replay};
use saap_dispatch::run::{AppendError, Appended, Bound, CompleteError, ExecState};
use saap_dispatch::{
    CompiledSpec, DeclaredConditions, EventKind, ExecutionId, NewEvent, NewEventType, Outcome, Run,
    RunStatus, SpecSyntax, compile_spec_text,
};
use saap_dispatch::{counter_event_id, derived_event_id};
use std::sync::Arc;

/// A run plus a journal of its inputs, with helpers that speak in type names.
struct H {
    run: Run,
    next_id: u64,
    journal: Vec<RunInput>,
}

impl H {
    fn new(yaml: &str) -> H {
        let spec = compile_spec_text(yaml, SpecSyntax::Yaml).unwrap();
        H {
            run: Run::new(Arc::new(spec), 7),
            next_id: 1,
            journal: Vec::new(),
        }
    }
    fn spec(&self) -> &CompiledSpec {
        self.run.spec()
    }
    fn ev(&mut self, ty: &str) -> NewEvent {
        let t = self
            .spec()
            .type_id(ty)
            .unwrap_or_else(|| panic!("type {ty}"));
        let id = counter_event_id(self.next_id);
        self.next_id += 1;
        NewEvent::known(id, t)
    }
    fn send(&mut self, ty: &str) -> Appended {
        let e = self.ev(ty);
        self.send_event(e).unwrap()
    }
    fn send_event(&mut self, e: NewEvent) -> Result<Appended, AppendError> {
        self.journal.push(RunInput::Append(e.clone()));
        self.run.append(e, &mut DeclaredConditions)
    }
    fn started(&mut self) -> Vec<ExecutionId> {
        self.run.take_started()
    }
    fn complete(&mut self, x: ExecutionId, outputs: &[&str]) {
        let evs: Vec<NewEvent> = outputs
            .iter()
            .enumerate()
            .map(|(i, t)| {
                NewEvent::known(
                    derived_event_id(self.run.run_key(), x, i as u32),
                    self.spec().type_id(t).unwrap(),
                )
            })
            .collect();
        let attempt = self.run.execution(x).unwrap().attempt;
        self.journal.push(RunInput::Complete {
            execution: x,
            attempt,
            outcome: Outcome::Returned(evs.clone()),
        });
        self.run
            .complete(x, attempt, Outcome::Returned(evs), &mut DeclaredConditions)
            .unwrap();
    }
    fn fail(&mut self, x: ExecutionId, msg: &str) {
        self.journal.push(RunInput::Complete {
            execution: x,
            attempt: 1,
            outcome: Outcome::Failed(msg.into()),
        });
        self.run
            .complete(x, 1, Outcome::Failed(msg.into()), &mut DeclaredConditions)
            .unwrap();
    }
    fn step(&self, name: &str) -> u32 {
        self.spec().step_index(name).unwrap()
    }
    fn count(&self, step: &str) -> usize {
        self.run.execution_count(self.step(step))
    }
    fn skips(&self, step: &str) -> Vec<SkipReason> {
        let s = self.step(step);
        self.run
            .records()
            .iter()
            .filter_map(|r| match r {
                Record::Skipped { step, reason, .. } if step == s => Some(reason),
                _ => None,
            })
            .collect()
    }
    fn last_skip(&self, step: &str) -> SkipReason {
        *self.skips(step).last().expect("a skip record")
    }
    fn bound_types(&self, x: ExecutionId) -> Vec<Vec<String>> {
        let step = self.run.execution(x).unwrap().step;
        self.run
            .bindings(x)
            .iter()
            .enumerate()
            .map(|(pi, b)| {
                self.run
                    .bound_seqs(step, pi as u32, *b)
                    .iter()
                    .map(|s| format!("{}@{s}", self.run.type_name(self.run.log()[*s as usize].ty)))
                    .collect()
            })
            .collect()
    }
}

const EVENTS: &str = "
events:
  - {name: A}
  - {name: B}
  - {name: C}
  - {name: SubA, parents: [A]}
  - {name: Shown, parents: [DisplayEvent]}
  - {name: Done, parents: [StopEvent]}
";

fn spec(steps: &str) -> String {
    format!("name: T\n{EVENTS}steps:\n{steps}")
}

// ---- 4.1 candidacy -------------------------------------------------------------------

#[test]
fn candidacy_exact_name_subtype_does_not_match_parent_param() {
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: a, kind: required, types: [A]}]}",
    ));
    h.send("StartEvent");
    h.send("SubA");
    assert_eq!(h.count("s"), 0, "SubA must not match a parameter typed A");
    assert!(
        !h.run
            .records()
            .iter()
            .any(|r| matches!(r, Record::Candidate { .. })),
        "SubA made nothing a candidate"
    );
    h.send("A");
    assert_eq!(h.count("s"), 1);
}

#[test]
fn candidacy_display_only_event_never_triggers() {
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: x, kind: optional, types: [Shown]}]}",
    ));
    h.send("StartEvent");
    assert!(matches!(h.send("Shown"), Appended::DisplayOnly { .. }));
    assert_eq!(h.count("s"), 0);
}

#[test]
fn candidacy_precondition_only_type_never_triggers() {
    let mut h = H::new(&spec(
        "  - name: s
    params: [{name: a, kind: required, types: [A]}]
    precondition: {name: p, reads: [B]}",
    ));
    h.send("StartEvent");
    h.send("B");
    assert!(
        !h.run
            .records()
            .iter()
            .any(|r| matches!(r, Record::Candidate { .. })),
        "an event type read only by a precondition makes nothing a candidate"
    );
}

#[test]
fn candidacy_each_union_member_triggers() {
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: x, kind: required, types: [A, B]}]}",
    ));
    h.send("StartEvent");
    h.send("A");
    h.send("B");
    assert_eq!(h.count("s"), 2);
}

// ---- 4.2 view -------------------------------------------------------------------------

#[test]
fn view_latest_means_highest_arrival_sequence() {
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: a, kind: required, types: [A]}, {name: b, kind: required, types: [B]}]}",
    ));
    h.send("StartEvent");
    h.send("A"); // seq 1
    h.send("A"); // seq 2
    h.send("B"); // seq 3 triggers: a binds the latest A
    let x = h.started();
    assert_eq!(x.len(), 1);
    assert_eq!(h.bound_types(x[0]), vec![vec!["A@2"], vec!["B@3"]]);
}

// ---- 4.3 readiness (R1, R5) ---------------------------------------------------------------

#[test]
fn readiness_required_missing_is_recorded_with_its_param() {
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: a, kind: required, types: [A]}, {name: b, kind: required, types: [B]}]}",
    ));
    h.send("StartEvent");
    h.send("A");
    assert_eq!(h.last_skip("s"), SkipReason::RequiredMissing { param: 1 });
}

#[test]
fn readiness_fixed_list_short_reports_have_and_need() {
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: xs, kind: fixed_list, size: 3, types: [A]}]}",
    ));
    h.send("StartEvent");
    h.send("A");
    h.send("A");
    assert_eq!(
        h.last_skip("s"),
        SkipReason::FixedListShort {
            param: 0,
            have: 2,
            need: 3
        }
    );
    h.send("A");
    assert_eq!(h.count("s"), 1);
}

#[test]
fn readiness_budget_exhausted_after_max_executions() {
    let mut h = H::new(&spec(
        "  - {name: s, max_executions_per_run: 2, params: [{name: a, kind: required, types: [A]}]}",
    ));
    h.send("StartEvent");
    for _ in 0..4 {
        h.send("A");
    }
    assert_eq!(h.count("s"), 2);
    assert_eq!(h.last_skip("s"), SkipReason::BudgetExhausted { max: 2 });
}

#[test]
fn readiness_precondition_false_is_recorded_and_evaluated_after_availability() {
    let mut h = H::new(&spec(
        "  - name: s
    params: [{name: a, kind: required, types: [A]}, {name: b, kind: optional, types: [B]}]
    precondition: {name: b_arrived, when: {present: b}}",
    ));
    h.send("StartEvent");
    h.send("B"); // a missing: the precondition is not even evaluated
    assert_eq!(h.last_skip("s"), SkipReason::RequiredMissing { param: 0 });
    assert!(
        !h.run
            .records()
            .iter()
            .any(|r| matches!(r, Record::PreconditionEvaluated { .. }))
    );
    let mut h = H::new(&spec(
        "  - name: s
    params: [{name: a, kind: required, types: [A]}, {name: b, kind: optional, types: [B]}]
    precondition: {name: b_arrived, when: {present: b}}",
    ));
    h.send("StartEvent");
    h.send("A");
    assert_eq!(h.last_skip("s"), SkipReason::PreconditionFalse);
    assert!(
        h.run
            .records()
            .iter()
            .any(|r| matches!(r, Record::PreconditionEvaluated { result: false, .. }))
    );
    h.send("B");
    assert_eq!(
        h.count("s"),
        1,
        "the precondition fix makes the step run once, with both"
    );
}

#[test]
fn readiness_optional_and_list_parameters_never_block() {
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: a, kind: required, types: [A]}, {name: b, kind: optional, types: [B]}, {name: cs, kind: list, types: [C]}]}",
    ));
    h.send("StartEvent");
    h.send("A");
    let x = h.started();
    assert_eq!(x.len(), 1);
    assert_eq!(h.run.bindings(x[0])[1], Bound::Nothing);
    assert_eq!(h.run.bindings(x[0])[2], Bound::Nothing);
}

#[test]
fn readiness_checks_run_in_the_documented_order() {
    // Budget exhausted AND input set repeated: the budget is reported (it comes first).
    let mut h = H::new(&spec(
        "  - {name: s, max_executions_per_run: 1, params: [{name: xs, kind: fixed_list, size: 1, types: [A]}]}",
    ));
    h.send("StartEvent");
    h.send("A");
    h.send("A");
    assert_eq!(h.last_skip("s"), SkipReason::BudgetExhausted { max: 1 });
}

// ---- 4.4 binding (R2, R3) --------------------------------------------------------------

#[test]
fn binding_single_takes_the_trigger_when_it_matches() {
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: x, kind: required, types: [A, B]}]}",
    ));
    h.send("StartEvent");
    h.send("A");
    h.send("B");
    let x = h.started();
    assert_eq!(h.bound_types(x[1]), vec![vec!["B@2"]]);
}

#[test]
fn binding_single_in_a_long_log_names_the_latest_event() {
    // Past the first 256 events, single bindings are served from a per-run table.
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: a, kind: required, types: [A]}, {name: b, kind: optional, types: [B]}]}",
    ));
    h.send("StartEvent");
    for _ in 0..300 {
        h.send("C");
    }
    h.send("A"); // seq 301
    h.send("B"); // seq 302
    let x = h.started();
    assert_eq!(x.len(), 2);
    assert_eq!(h.bound_types(x[0]), vec![vec!["A@301".to_string()], vec![]]);
    assert_eq!(h.bound_types(x[1]), vec![vec!["A@301"], vec!["B@302"]]);
}

#[test]
fn binding_optional_is_none_when_absent_and_rebinds_when_it_arrives() {
    // The race condition of seed 000: required A + optional B runs twice.
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: a, kind: required, types: [A]}, {name: b, kind: optional, types: [B]}]}",
    ));
    h.send("StartEvent");
    h.send("A");
    h.send("B");
    let x = h.started();
    assert_eq!(x.len(), 2, "optional trap: once without B, once with B");
    assert_eq!(h.bound_types(x[0]), vec![vec!["A@1".to_string()], vec![]]);
    assert_eq!(h.bound_types(x[1]), vec![vec!["A@1"], vec!["B@2"]]);
}

#[test]
fn binding_list_takes_all_matching_events_in_arrival_order_and_reruns_per_arrival() {
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: xs, kind: list, types: [A, B]}]}",
    ));
    h.send("StartEvent");
    h.send("A");
    h.send("B");
    h.send("A");
    let x = h.started();
    assert_eq!(
        x.len(),
        3,
        "list parameter theorem: one execution per arrival"
    );
    assert_eq!(h.bound_types(x[2]), vec![vec!["A@1", "B@2", "A@3"]]);
}

#[test]
fn binding_fixed_list_takes_the_first_n_and_records_overflow() {
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: xs, kind: fixed_list, size: 2, types: [A]}]}",
    ));
    h.send("StartEvent");
    h.send("A");
    h.send("A");
    h.send("A");
    let x = h.started();
    assert_eq!(x.len(), 1, "a fixed list fires once");
    assert_eq!(h.bound_types(x[0]), vec![vec!["A@1", "A@2"]]);
    assert!(
        h.run
            .records()
            .iter()
            .any(|r| matches!(r, Record::FixedListOverflow { trigger: 3, .. }))
    );
    assert_eq!(
        h.last_skip("s"),
        SkipReason::InputSetAlreadyRan { by: ExecutionId(0) }
    );
}

// ---- 4.5 idempotency -------------------------------------------------------------------

#[test]
fn idempotency_duplicate_event_id_is_dropped() {
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: a, kind: required, types: [A]}]}",
    ));
    h.send("StartEvent");
    let a = h.ev("A");
    h.send_event(a.clone()).unwrap();
    assert_eq!(
        h.send_event(a).unwrap(),
        Appended::Duplicate { first_seq: 1 }
    );
    assert_eq!(h.count("s"), 1);
}

#[test]
fn idempotency_duplicates_among_the_outputs_of_one_completion_are_dropped() {
    // 10 outputs stay within the log length up to which ids are scanned; 40 cross it (the
    // index is then built before they are appended). Either way the duplicates among them
    // (of an earlier output, of the start event) are dropped exactly as in a run that
    // indexes ids from its first event.
    let yaml = spec(
        "  - {name: fan, params: [{name: q, kind: required, types: [StartEvent]}], outputs: [A]}
  - {name: s, params: [{name: a, kind: required, types: [A]}]}",
    );
    let spec = Arc::new(compile_spec_text(&yaml, SpecSyntax::Yaml).unwrap());
    for n in [10u64, 40] {
        let records = |mut run: Run| {
            let start = run.spec().type_id("StartEvent").unwrap();
            let a = run.spec().type_id("A").unwrap();
            run.append(
                NewEvent::known(counter_event_id(1), start),
                &mut DeclaredConditions,
            )
            .unwrap();
            let x = run.take_started()[0];
            let mut outputs: Vec<NewEvent> = (100..100 + n)
                .map(|i| NewEvent::known(counter_event_id(i), a))
                .collect();
            outputs[n as usize - 5].id = counter_event_id(100);
            outputs[n as usize - 2].id = counter_event_id(1);
            run.complete_returned(x, 1, &mut outputs, &mut DeclaredConditions)
                .unwrap();
            assert!(outputs.is_empty(), "the caller's buffer is emptied");
            (run.records().to_vec(), run.executions().len())
        };
        let (scanned, executions) = records(Run::new(spec.clone(), 7));
        let (indexed, _) = records(Run::new(spec.clone(), 7).with_index_thresholds(0, 0));
        assert_eq!(scanned, indexed, "{n} outputs");
        let duplicates: Vec<_> = scanned
            .iter()
            .filter_map(|r| match r {
                Record::DuplicateEvent { first_seq, .. } => Some(*first_seq),
                _ => None,
            })
            .collect();
        assert_eq!(
            duplicates,
            vec![1, 0],
            "{n} outputs: seq 1 repeated, then the start"
        );
        assert_eq!(
            executions,
            1 + n as usize - 2,
            "fan, then s per distinct output"
        );
    }
}

#[test]
fn idempotency_repeated_input_set_is_skipped_and_consumes_no_budget() {
    let mut h = H::new(&spec(
        "  - {name: s, max_executions_per_run: 2, params: [{name: xs, kind: fixed_list, size: 1, types: [A]}, {name: b, kind: optional, types: [B]}]}",
    ));
    h.send("StartEvent");
    h.send("A"); // runs with (A1, none)
    h.send("A"); // overflow: same input set → skipped, budget untouched
    assert_eq!(
        h.last_skip("s"),
        SkipReason::InputSetAlreadyRan { by: ExecutionId(0) }
    );
    h.send("B"); // a new input set still fits in the budget
    assert_eq!(h.count("s"), 2);
}

#[test]
fn idempotency_overlapping_parameters_compare_input_sets_as_multisets() {
    // x: A|B and y: B|A bind the same latest event; the multiset {e, e} after the second
    // trigger of the same pair is recognised even though parameters overlap.
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: x, kind: required, types: [A, B]}, {name: y, kind: required, types: [B, A]}]}",
    ));
    h.send("StartEvent");
    h.send("A");
    assert_eq!(h.count("s"), 1);
    assert!(h.spec().steps[0].overlapping_params);
    // Same type in two parameters binds the same event to both.
    let x = h.started();
    assert_eq!(h.bound_types(x[0]), vec![vec!["A@1"], vec!["A@1"]]);
}

// ---- 4.6 execution ---------------------------------------------------------------------

#[test]
fn execution_outputs_are_appended_in_return_order_with_the_completion() {
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: q, kind: required, types: [StartEvent]}], outputs: [A, B]}
  - {name: t, params: [{name: a, kind: required, types: [A]}, {name: b, kind: optional, types: [B]}]}",
    ));
    h.send("StartEvent");
    let x = h.started();
    h.complete(x[0], &["B", "A"]);
    let names: Vec<&str> = h.run.log().iter().map(|e| h.run.type_name(e.ty)).collect();
    assert_eq!(names, ["StartEvent", "B", "A"]);
    assert!(
        h.run.log()[1..]
            .iter()
            .all(|e| e.origin == Origin::Execution(x[0]))
    );
    // t saw B already when A arrived (B came first): one execution with both.
    assert_eq!(h.count("t"), 1);
    let completed = h
        .run
        .records()
        .iter()
        .position(|r| matches!(r, Record::ExecutionCompleted { .. }))
        .unwrap();
    let first_output = h
        .run
        .records()
        .iter()
        .position(|r| matches!(r, Record::EventAppended { seq: 1, .. }))
        .unwrap();
    assert!(completed < first_output);
}

// ---- 4.7 termination (R4) ---------------------------------------------------------------

#[test]
fn termination_stop_event_ends_the_run_and_later_events_are_after_stop_evidence() {
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: a, kind: required, types: [A]}]}",
    ));
    h.send("StartEvent");
    assert!(matches!(h.send("Done"), Appended::Terminated { seq: 1 }));
    assert!(matches!(h.send("A"), Appended::AfterStop { seq: 2 }));
    assert_eq!(h.count("s"), 0, "nothing is dispatched after termination");
    assert_eq!(h.run.status(), RunStatus::Terminated { by: 1 });
    assert!(h.run.records().iter().any(|r| matches!(
        r,
        Record::RunTerminated {
            seq: 1,
            by: Termination::Stop
        }
    )));
    assert_eq!(h.run.log().len(), 3, "the log is kept");
}

#[test]
fn termination_outputs_of_in_flight_executions_are_kept_not_dispatched() {
    let mut h = H::new(&spec(
        "  - {name: slow, params: [{name: q, kind: required, types: [StartEvent]}], outputs: [A]}
  - {name: fast, params: [{name: q, kind: required, types: [StartEvent]}], outputs: [Done]}
  - {name: after, params: [{name: a, kind: required, types: [A]}]}",
    ));
    h.send("StartEvent");
    let x = h.started();
    h.complete(x[1], &["Done"]);
    h.complete(x[0], &["A"]);
    assert_eq!(h.count("after"), 0);
    assert!(h.run.records().iter().any(|r| matches!(
        r,
        Record::EventAfterStop { origin: Origin::Execution(e), .. } if e == x[0]
    )));
}

#[test]
fn termination_exception_event_terminates_the_run() {
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: a, kind: required, types: [A]}]}",
    ));
    h.send("StartEvent");
    h.send("ExceptionEvent");
    assert!(h.run.records().iter().any(|r| matches!(
        r,
        Record::RunTerminated {
            by: Termination::Exception,
            ..
        }
    )));
}

// ---- 4.8 errors --------------------------------------------------------------------------

#[test]
fn error_with_stop_on_error_produces_an_exception_event_that_terminates() {
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: q, kind: required, types: [StartEvent]}]}",
    ));
    h.send("StartEvent");
    let x = h.started();
    h.fail(x[0], "model timed out");
    let last = h.run.log().last().unwrap();
    assert_eq!(h.run.type_name(last.ty), "ExceptionEvent");
    assert_eq!(last.origin, Origin::Execution(x[0]));
    assert!(h.run.is_terminated());
    assert_eq!(h.run.execution(x[0]).unwrap().state, ExecState::Failed);
}

#[test]
fn error_without_stop_on_error_is_recorded_and_the_run_continues() {
    let mut h = H::new(&spec(
        "  - {name: s, stop_on_error: false, params: [{name: q, kind: required, types: [StartEvent]}]}
  - {name: t, params: [{name: a, kind: required, types: [A]}]}",
    ));
    h.send("StartEvent");
    let x = h.started();
    h.fail(x[0], "flaky");
    assert!(!h.run.is_terminated());
    assert!(h.run.records().iter().any(|r| matches!(
        r,
        Record::ExecutionFailed {
            stop_on_error: false,
            ..
        }
    )));
    h.send("A");
    assert_eq!(h.count("t"), 1);
}

// ---- 4.9 durability and delivery -----------------------------------------------------------

#[test]
fn delivery_duplicate_completion_is_rejected_with_a_typed_error() {
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: q, kind: required, types: [StartEvent]}], outputs: [A]}",
    ));
    h.send("StartEvent");
    let x = h.started();
    h.complete(x[0], &["A"]);
    let err = h
        .run
        .complete(x[0], 1, Outcome::Returned(vec![]), &mut DeclaredConditions)
        .unwrap_err();
    assert_eq!(err, CompleteError::AlreadyFinished(x[0]));
}

#[test]
fn delivery_stale_attempt_completion_is_rejected_after_a_retry() {
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: q, kind: required, types: [StartEvent]}], outputs: [A]}",
    ));
    h.send("StartEvent");
    let x = h.started()[0];
    assert_eq!(h.run.retry(x).unwrap(), 2);
    let err = h
        .run
        .complete(x, 1, Outcome::Returned(vec![]), &mut DeclaredConditions)
        .unwrap_err();
    assert_eq!(
        err,
        CompleteError::StaleAttempt {
            execution: x,
            given: 1,
            current: 2
        }
    );
    h.complete(x, &["A"]);
}

#[test]
fn delivery_rerun_outputs_with_derived_ids_are_deduplicated() {
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: q, kind: required, types: [StartEvent]}], outputs: [A]}
  - {name: t, params: [{name: a, kind: required, types: [A]}]}",
    ));
    h.send("StartEvent");
    let x = h.started()[0];
    // The first attempt's output reached the log before the crash...
    let out = NewEvent::known(
        derived_event_id(h.run.run_key(), x, 0),
        h.spec().type_id("A").unwrap(),
    );
    h.run.append(out, &mut DeclaredConditions).unwrap();
    // ...then the re-run completes with the same derived id: dropped, t runs once.
    h.run.retry(x).unwrap();
    h.complete(x, &["A"]);
    assert_eq!(h.count("t"), 1);
    assert!(
        h.run
            .records()
            .iter()
            .any(|r| matches!(r, Record::DuplicateEvent { .. }))
    );
}

// ---- 4.10 lifecycle ---------------------------------------------------------------------

#[test]
fn lifecycle_control_event_before_start_is_refused_and_kept_as_orphan() {
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: a, kind: required, types: [A]}]}",
    ));
    let a = h.ev("A");
    let err = h.send_event(a).unwrap_err();
    assert!(matches!(err, AppendError::RunNotStarted { seq: 0, .. }));
    assert_eq!(h.run.status(), RunStatus::NotStarted);
    assert!(matches!(
        h.run.records().get(0).unwrap(),
        Record::OrphanEvent { seq: 0 }
    ));
    h.send("StartEvent");
    assert_eq!(h.count("s"), 0, "an orphan never becomes an input");
}

#[test]
fn lifecycle_an_orphan_delivered_again_after_the_start_is_accepted() {
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: a, kind: required, types: [A]}]}",
    ));
    let a = h.ev("A");
    assert!(h.send_event(a.clone()).is_err(), "refused before the start");
    h.send("StartEvent");
    assert!(matches!(
        h.send_event(a).unwrap(),
        Appended::Dispatched { started: 1, .. }
    ));
    assert_eq!(h.count("s"), 1, "the publisher's retry is not lost");
}

#[test]
fn lifecycle_second_start_event_is_an_ordinary_input_and_retriggers() {
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: q, kind: required, types: [UserMessageEvent]}]}",
    ));
    h.send("UserMessageEvent");
    h.send("UserMessageEvent");
    assert_eq!(h.count("s"), 2);
    assert_eq!(
        h.run
            .records()
            .iter()
            .filter(|r| matches!(r, Record::RunStarted { .. }))
            .count(),
        1
    );
}

#[test]
fn lifecycle_foreign_event_types_never_trigger_but_foreign_stops_terminate() {
    let mut h = H::new(&spec(
        "  - {name: s, params: [{name: a, kind: required, types: [A]}]}",
    ));
    h.send("StartEvent");
    let foreign = NewEvent {
        id: counter_event_id(99),
        ty: NewEventType::Foreign {
            name: "PythonOnlyEvent".into(),
            kind: EventKind::from_classification(saap_protocol::hierarchy::Classification {
                control: true,
                ..Default::default()
            }),
        },
    };
    assert!(matches!(
        h.send_event(foreign).unwrap(),
        Appended::Dispatched { started: 0, .. }
    ));
    let foreign_stop = NewEvent {
        id: counter_event_id(100),
        ty: NewEventType::Foreign {
            name: "PythonStop".into(),
            kind: EventKind::from_classification(saap_protocol::hierarchy::Classification {
                control: true,
                display: true,
                stop: true,
                ..Default::default()
            }),
        },
    };
    assert!(matches!(
        h.send_event(foreign_stop).unwrap(),
        Appended::Terminated { .. }
    ));
}

// ---- 4.11 decision records and replay ---------------------------------------------------

fn scenario() -> H {
    let mut h = H::new(&spec(
        "  - {name: fan, params: [{name: q, kind: required, types: [StartEvent]}], outputs: [A, A, B]}
  - name: join
    params: [{name: xs, kind: list, types: [A]}, {name: b, kind: optional, types: [B]}]
    precondition: {name: has_b, when: {present: b}}
    outputs: [Done]",
    ));
    h.send("StartEvent");
    let x = h.started()[0];
    h.complete(x, &["A", "A", "B"]);
    let j = h.started()[0];
    h.complete(j, &["Done"]);
    h
}

#[test]
fn records_replaying_the_journal_reproduces_every_decision() {
    let h = scenario();
    let again = replay(
        h.run.spec_arc().clone(),
        7,
        Some(h.spec().fingerprint()),
        &h.journal,
        &h.run.records().to_vec(),
    )
    .unwrap();
    assert_eq!(again.records(), h.run.records());
    assert_eq!(again.log(), h.run.log());
}

#[test]
fn records_replay_uses_recorded_precondition_results() {
    let h = scenario();
    // Replay with a journal but without calling the declared condition: the recorded
    // `false` then `true` results must be what the replay sees.
    let evaluated: Vec<bool> = h
        .run
        .records()
        .iter()
        .filter_map(|r| match r {
            Record::PreconditionEvaluated { result, .. } => Some(result),
            _ => None,
        })
        .collect();
    assert_eq!(evaluated, [false, false, true]);
    assert!(
        replay(
            h.run.spec_arc().clone(),
            7,
            None,
            &h.journal,
            &h.run.records().to_vec()
        )
        .is_ok()
    );
}

#[test]
fn records_replay_against_a_changed_workflow_fails_with_a_stable_code() {
    let h = scenario();
    let changed = compile_spec_text(
        &spec(
            "  - {name: fan, params: [{name: q, kind: required, types: [StartEvent]}], outputs: [A, A, B]}
  - {name: join, max_executions_per_run: 1, params: [{name: xs, kind: list, types: [A]}, {name: b, kind: optional, types: [B]}], outputs: [Done]}",
        ),
        SpecSyntax::Yaml,
    )
    .unwrap();
    let err = replay(
        Arc::new(changed.clone()),
        7,
        Some(h.spec().fingerprint()),
        &h.journal,
        &h.run.records().to_vec(),
    )
    .unwrap_err();
    assert_eq!(err.code(), "SAAP-R001");
    // Without a stored fingerprint, the divergence itself is detected.
    let err = replay(
        Arc::new(changed),
        7,
        None,
        &h.journal,
        &h.run.records().to_vec(),
    )
    .unwrap_err();
    assert!(matches!(err, ReplayError::Diverged { .. }), "{err}");
    assert_eq!(err.code(), "SAAP-R002");
}

/// Replay names the first record that differs, wherever it is: each journal entry's records
/// are compared once, as they are made (they were compared from the first after every entry,
/// which made a long run's rebuild quadratic).
#[test]
fn records_replay_names_the_first_differing_record_at_every_position() {
    let h = scenario();
    let recorded = h.run.records().to_vec();
    for i in 0..recorded.len() {
        if matches!(recorded[i], Record::PreconditionEvaluated { .. }) {
            continue; // a recorded precondition result is an input of the replay, not only a check
        }
        let mut changed = recorded.clone();
        changed[i] = Record::TimerFired { timer: 999 };
        let err = replay(
            Arc::new(h.spec().clone()),
            7,
            Some(h.spec().fingerprint()),
            &h.journal,
            &changed,
        )
        .unwrap_err();
        match err {
            ReplayError::Diverged { index, .. } => assert_eq!(index, i, "record {i}"),
            other => panic!("record {i}: {other}"),
        }
    }
    // One record more than the run makes, or one fewer: named where the lists part.
    let mut longer = recorded.clone();
    longer.push(Record::TimerFired { timer: 999 });
    let shorter = &recorded[..recorded.len() - 1];
    for (list, at) in [(&longer[..], recorded.len()), (shorter, recorded.len() - 1)] {
        match replay(Arc::new(h.spec().clone()), 7, None, &h.journal, list) {
            Err(ReplayError::Diverged { index, .. }) => assert_eq!(index, at),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn records_replay_from_every_prefix_then_continuing_live_matches_the_uninterrupted_run() {
    let h = scenario();
    for k in 0..=h.journal.len() {
        let mut run = Run::new(h.run.spec_arc().clone(), 7);
        let mut pre = DeclaredConditions;
        for input in &h.journal[..k] {
            run.apply(input.clone(), &mut pre).unwrap();
        }
        // "crash" here: rebuild from the prefix's records, then continue live.
        let rebuilt = replay(
            run.spec_arc().clone(),
            7,
            None,
            &h.journal[..k],
            &run.records().to_vec(),
        )
        .unwrap();
        let mut live = rebuilt;
        for input in &h.journal[k..] {
            live.apply(input.clone(), &mut pre).unwrap();
        }
        assert_eq!(live.records(), h.run.records(), "prefix {k}");
    }
}

// ---- completion into a caller's buffer --------------------------------------------------

/// `complete_returned` decides exactly as `complete` with `Outcome::Returned` (same
/// records, log and started executions), empties the caller's vector and keeps its
/// allocation; a stale completion leaves the vector untouched.
#[test]
fn complete_returned_decides_as_complete_and_keeps_the_callers_buffer() {
    let yaml = spec(
        "  - {name: s, params: [{name: x, kind: required, types: [StartEvent]}]}
  - {name: t, params: [{name: a, kind: required, types: [A]}, {name: b, kind: optional, types: [B]}]}",
    );
    let mut by_value = H::new(&yaml);
    let mut by_buffer = H::new(&yaml);
    let mut buf: Vec<NewEvent> = Vec::with_capacity(8);
    for h in [&mut by_value, &mut by_buffer] {
        h.send("StartEvent");
    }
    let x = by_value.started()[0];
    assert_eq!(by_buffer.started(), vec![x]);
    by_value.complete(x, &["A", "B"]);
    let outs = |h: &H| -> Vec<NewEvent> {
        ["A", "B"]
            .iter()
            .enumerate()
            .map(|(i, t)| {
                NewEvent::known(
                    derived_event_id(h.run.run_key(), x, i as u32),
                    h.spec().type_id(t).unwrap(),
                )
            })
            .collect()
    };
    buf.extend(outs(&by_buffer));
    let cap = buf.capacity();
    by_buffer
        .run
        .complete_returned(x, 1, &mut buf, &mut DeclaredConditions)
        .unwrap();
    assert!(buf.is_empty());
    assert_eq!(buf.capacity(), cap);
    assert_eq!(by_value.run.records(), by_buffer.run.records());
    assert_eq!(by_value.run.log(), by_buffer.run.log());
    assert_eq!(by_value.started(), by_buffer.started());

    buf.extend(outs(&by_buffer));
    let err = by_buffer
        .run
        .complete_returned(x, 1, &mut buf, &mut DeclaredConditions)
        .unwrap_err();
    assert!(matches!(err, CompleteError::AlreadyFinished(_)), "{err:?}");
    assert_eq!(buf.len(), 2);
}

/// `complete_linked` (one output of a chain link's type, by value) decides exactly as
/// `complete` with that one output (same records, log and started executions) and says
/// where the event was logged; it declines, changing nothing, an output that is not a chain
/// link or whose id is already in the log (the general path decides those), and refuses a
/// completion that is not live as `complete` does.
#[test]
fn complete_linked_decides_as_complete_and_declines_what_is_not_a_direct_link() {
    let yaml = spec(
        "  - {name: s, params: [{name: x, kind: required, types: [StartEvent]}], outputs: [A]}
  - {name: t, params: [{name: a, kind: required, types: [A]}], outputs: [B]}
  - {name: u, params: [{name: b, kind: required, types: [B]}, {name: c, kind: required, types: [C]}], outputs: [Done]}",
    );
    let mut general = H::new(&yaml);
    let mut linked = H::new(&yaml);
    general.send("StartEvent");
    linked.send("StartEvent");
    let x = general.started()[0];
    assert_eq!(linked.started(), vec![x]);
    let (a, b) = (
        linked.spec().type_id("A").unwrap(),
        linked.spec().type_id("B").unwrap(),
    );
    general.complete(x, &["A"]);
    let id = derived_event_id(linked.run.run_key(), x, 0);
    assert_eq!(linked.run.complete_linked(x, 1, id, a), Ok(Some(1)));
    assert_eq!(linked.run.log()[1].id, id);
    assert_eq!(general.run.records(), linked.run.records());
    assert_eq!(general.run.log(), linked.run.log());
    let y = general.started()[0];
    assert_eq!(linked.started(), vec![y]);

    // A completion that is not live is refused, as by `complete`.
    assert!(matches!(
        linked.run.complete_linked(x, 1, id, a),
        Err(CompleteError::AlreadyFinished(_))
    ));
    assert!(matches!(
        linked.run.complete_linked(y, 2, id, b),
        Err(CompleteError::StaleAttempt { .. })
    ));

    // B is not a chain link (its step waits for C too): declined, nothing changed.
    let records = linked.run.records().len();
    let id_b = derived_event_id(linked.run.run_key(), y, 0);
    assert_eq!(linked.run.complete_linked(y, 1, id_b, b), Ok(None));
    // An id already in the log may be a duplicate: declined too.
    assert_eq!(linked.run.complete_linked(y, 1, id, a), Ok(None));
    assert_eq!(linked.run.records().len(), records);
    assert_eq!(linked.run.log().len(), 2);
    assert_eq!(linked.run.execution(y).unwrap().state, ExecState::Running);
    general.complete(y, &["B"]);
    linked.complete(y, &["B"]);
    assert_eq!(general.run.records(), linked.run.records());
}

/// `take_sole_started` takes what `next_started` would when one started execution is left,
/// the last one (after `complete_linked`: the execution the link started, bound to the
/// link's event), and changes nothing otherwise.
#[test]
fn take_sole_started_takes_the_one_execution_a_chain_link_started() {
    let yaml = spec(
        "  - {name: s, params: [{name: x, kind: required, types: [StartEvent]}], outputs: [A]}
  - {name: t, params: [{name: a, kind: required, types: [A]}], outputs: [Done]}",
    );
    let mut h = H::new(&yaml);
    assert_eq!(h.run.take_sole_started(), None, "nothing started yet");
    h.send("StartEvent");
    let x = h.run.executions().len() as u32 - 1;
    let (x, s) = (
        ExecutionId(x),
        h.run.execution(ExecutionId(x)).unwrap().step,
    );
    assert_eq!(h.run.take_sole_started(), Some((x, s)));
    assert_eq!(h.run.take_sole_started(), None, "taken already");
    assert_eq!(h.run.next_started(), None);
    let a = h.spec().type_id("A").unwrap();
    let id = derived_event_id(h.run.run_key(), x, 0);
    let seq = h.run.complete_linked(x, 1, id, a).unwrap().unwrap();
    let (y, t) = h.run.take_sole_started().unwrap();
    assert_eq!(t, h.spec().step_index("t").unwrap());
    assert_eq!(h.run.execution(y).unwrap().step, t);
    assert_eq!(h.run.bindings(y), &[Bound::One(seq)]);
    assert_eq!(h.run.next_started(), None);
}
