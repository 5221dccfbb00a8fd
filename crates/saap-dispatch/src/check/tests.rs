//! The checker's tests: each finding on the smallest spec that shows it, and its absence
//! where the spec is fine.

#![allow(clippy::unwrap_used)]
use super::*;
use crate::load::SpecSyntax;

fn spec(yaml: &str) -> CompiledSpec {
    crate::compile_spec_text(yaml, SpecSyntax::Yaml).unwrap()
}

fn codes(yaml: &str) -> Vec<(&'static str, Option<String>, Option<String>)> {
    check(&spec(yaml))
        .into_iter()
        .map(|f| (f.code, f.step, f.param))
        .collect()
}

fn has(yaml: &str, rule: &Rule, step: &str, param: Option<&str>) -> bool {
    check(&spec(yaml)).iter().any(|f| {
        f.code == rule.code && f.step.as_deref() == Some(step) && f.param.as_deref() == param
    })
}

fn count(yaml: &str, rule: &Rule) -> usize {
    check(&spec(yaml))
        .iter()
        .filter(|f| f.code == rule.code)
        .count()
}

/// start → a → stop, nothing else: the base every test varies.
const CLEAN: &str = "
name: clean
events: [{name: A}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A]}
  - {name: last, params: [{name: a, kind: required, types: [A]}], outputs: [StopEvent]}
";

#[test]
fn clean_spec_has_no_findings() {
    assert_eq!(codes(CLEAN), vec![]);
}

#[test]
fn rules_table_is_complete_and_ordered() {
    let mut seen = BTreeSet::new();
    for (i, r) in RULES.iter().enumerate() {
        assert_eq!(r.code, format!("SAAP{:03}", i + 1));
        assert!(seen.insert(r.rule), "duplicate slug {}", r.rule);
    }
}

#[test]
fn findings_are_sorted_errors_first_and_deterministic() {
    let y = "
name: w
events: [{name: A}, {name: B}, {name: Z}]
steps:
  - {name: s, params: [{name: q, kind: required, types: [UserMessageEvent]}, {name: b, kind: optional, types: [B]}], outputs: [A]}
  - {name: t, params: [{name: z, kind: required, types: [Z]}], outputs: [StopEvent]}
  - {name: u, params: [{name: a, kind: required, types: [A]}], outputs: [B, StopEvent]}
";
    let a = check(&spec(y));
    let b = check(&spec(y));
    assert_eq!(a, b);
    let sev: Vec<Severity> = a.iter().map(|f| f.severity).collect();
    let mut sorted = sev.clone();
    sorted.sort();
    assert_eq!(sev, sorted);
    assert_eq!(a[0].code, "SAAP002");
}

// SAAP001
#[test]
fn unreachable_step_is_an_error() {
    // `orphan` waits for B, produced only by `loop_b`, which waits for C, produced only
    // by `orphan`: both have producers, neither is reachable from the start.
    let y = "
name: w
events: [{name: A}, {name: B}, {name: C}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [StopEvent]}
  - {name: orphan, params: [{name: b, kind: required, types: [B]}], outputs: [C], max_executions_per_run: 1}
  - {name: loop_b, params: [{name: c, kind: required, types: [C]}], outputs: [B]}
";
    assert!(has(y, &UNREACHABLE_STEP, "orphan", Some("b")));
    assert!(has(y, &UNREACHABLE_STEP, "loop_b", Some("c")));
    assert_eq!(count(y, &MISSING_PRODUCER), 0);
}

#[test]
fn step_without_event_params_is_unreachable() {
    let y = format!("{CLEAN}  - {{name: idle, outputs: [A]}}\n");
    assert!(has(&y, &UNREACHABLE_STEP, "idle", None));
}

#[test]
fn reachable_steps_are_not_unreachable() {
    assert_eq!(count(CLEAN, &UNREACHABLE_STEP), 0);
}

#[test]
fn in_the_loop_responses_arrive_from_outside() {
    let y = "
name: w
steps:
  - {name: ask, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [HumanInTheLoopInputRequestEvent]}
  - {name: answer, params: [{name: r, kind: required, types: [HumanInTheLoopInputResponseEvent]}], outputs: [StopEvent]}
";
    // Not unreachable, not missing a producer: only the open wait on the human is said.
    assert_eq!(
        codes(y),
        vec![("SAAP019", Some("answer".to_string()), Some("r".to_string()))]
    );
}

// SAAP018
#[test]
fn a_response_no_step_asks_for_is_a_warning_naming_the_request() {
    let y = "
name: w
events: [{name: Finding, parents: [StopEvent]}]
steps:
  - {name: plan, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Finding]}
  - {name: report, params: [{name: r, kind: required, types: [AgentInTheLoopResponseEvent, AgentInTheLoopExceptionEvent]}], outputs: [StopEvent]}
";
    let found = check(&spec(y));
    let f = found
        .iter()
        .find(|f| f.code == RESPONSE_WITHOUT_REQUEST.code)
        .unwrap();
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(
        (f.step.as_deref(), f.param.as_deref()),
        (Some("report"), Some("r"))
    );
    assert!(f.message.contains("no step delegates"), "{}", f.message);
    assert!(
        f.fix.contains("AgentInTheLoopRequestEvent::new"),
        "{}",
        f.fix
    );
    // A step that delegates makes it clean.
    let asked = y.replace(
        "outputs: [Finding]}",
        "outputs: [Finding, AgentInTheLoopRequestEvent]}",
    );
    assert_eq!(count(&asked, &RESPONSE_WITHOUT_REQUEST), 0);
}

// SAAP019
#[test]
fn a_wait_on_a_person_without_a_deadline_is_a_warning_and_a_deadline_clears_it() {
    let open = "
name: w
events:
  - {name: Asked, parents: [HumanInTheLoopRequestEvent]}
  - {name: Answered, parents: [HumanInTheLoopResponseEvent]}
  - {name: TimedOut}
steps:
  - {name: ask, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Asked, TimedOut]}
  - {name: decide, params: [{name: a, kind: required, types: [Answered]}], outputs: [StopEvent]}
";
    assert!(has(open, &WAIT_WITHOUT_DEADLINE, "decide", Some("a")));
    let deadline = open.replace("types: [Answered]}", "types: [Answered, TimedOut]}");
    assert_eq!(count(&deadline, &WAIT_WITHOUT_DEADLINE), 0);
    // An optional answer never holds the step up.
    let optional = open.replace(
        "{name: a, kind: required, types: [Answered]}",
        "{name: q2, kind: required, types: [TimedOut]}, {name: a, kind: optional, types: [Answered]}",
    );
    assert_eq!(count(&optional, &WAIT_WITHOUT_DEADLINE), 0);
}

// SAAP020
#[test]
fn a_delegation_whose_failure_no_step_takes_is_a_warning_and_taking_it_clears_it() {
    let y = "
name: w
events: [{name: Done, parents: [StopEvent]}]
steps:
  - {name: ask, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [AgentInTheLoopRequestEvent]}
  - {name: use, params: [{name: r, kind: required, types: [AgentInTheLoopResponseEvent]}], outputs: [Done]}
";
    assert!(has(y, &CHILD_FAILURE_UNTAKEN, "use", Some("r")));
    let found = check(&spec(y));
    let f = found
        .iter()
        .find(|f| f.code == CHILD_FAILURE_UNTAKEN.code)
        .unwrap();
    assert_eq!(f.severity, Severity::Warning);
    assert!(
        f.fix
            .contains("Either<AgentInTheLoopResponseEvent, AgentInTheLoopExceptionEvent>"),
        "{}",
        f.fix
    );
    // Both ends in the same parameter, or the failure in a step of its own: clean.
    let both = y.replace(
        "types: [AgentInTheLoopResponseEvent]}",
        "types: [AgentInTheLoopResponseEvent, AgentInTheLoopExceptionEvent]}",
    );
    assert_eq!(count(&both, &CHILD_FAILURE_UNTAKEN), 0);
    let own_step = format!(
        "{y}  - {{name: failed, params: [{{name: e, kind: required, types: [AgentInTheLoopExceptionEvent]}}], outputs: [Done]}}\n"
    );
    assert_eq!(count(&own_step, &CHILD_FAILURE_UNTAKEN), 0);
    // A workflow that never delegates is SAAP018's case, not this one's.
    let no_request = y.replace("outputs: [AgentInTheLoopRequestEvent]", "outputs: [Done]");
    assert_eq!(count(&no_request, &CHILD_FAILURE_UNTAKEN), 0);
}

// SAAP021
#[test]
fn a_step_that_takes_a_deadline_and_its_answer_without_a_limit_is_a_warning() {
    let y = "
name: w
events: [{name: Asked}, {name: Answer}, {name: TimedOut}, {name: Done, parents: [StopEvent]}]
steps:
  - {name: ask, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Asked, {event: TimedOut, delayed: true}]}
  - {name: decide, params: [{name: a, kind: required, types: [Answer, TimedOut]}], outputs: [Done]}
";
    assert!(has(y, &DEADLINE_DECIDES_TWICE, "decide", Some("a")));
    let found = check(&spec(y));
    let f = found
        .iter()
        .find(|f| f.code == DEADLINE_DECIDES_TWICE.code)
        .unwrap();
    assert_eq!(f.severity, Severity::Warning);
    assert!(f.message.contains("a timer `ask` sets"), "{}", f.message);
    assert!(f.fix.contains("max_executions_per_run: 1"), "{}", f.fix);
    // One decision at most, or a precondition to refuse the second: clean.
    let once = y.replace(
        "outputs: [Done]}",
        "outputs: [Done], max_executions_per_run: 1}",
    );
    assert_eq!(count(&once, &DEADLINE_DECIDES_TWICE), 0);
    let guarded = y.replace(
        "outputs: [Done]}",
        "outputs: [Done], precondition: {name: first_only}}",
    );
    assert_eq!(count(&guarded, &DEADLINE_DECIDES_TWICE), 0);
    // The same event not delivered later is no deadline (a plain output): clean.
    let now = y.replace("{event: TimedOut, delayed: true}", "TimedOut");
    assert_eq!(count(&now, &DEADLINE_DECIDES_TWICE), 0);
    // A step that takes only the deadline decides once per deadline: clean.
    let alone = y.replace("types: [Answer, TimedOut]", "types: [TimedOut]");
    assert_eq!(count(&alone, &DEADLINE_DECIDES_TWICE), 0);
}

// SAAP002
#[test]
fn missing_producer_is_an_error() {
    let y = "
name: w
events: [{name: Hints}]
steps:
  - {name: answer, params: [{name: q, kind: required, types: [UserMessageEvent]}, {name: h, kind: required, types: [Hints]}], outputs: [StopEvent]}
";
    assert!(has(y, &MISSING_PRODUCER, "answer", Some("h")));
    // Not also reported as unreachable: SAAP002 explains it.
    assert_eq!(count(y, &UNREACHABLE_STEP), 0);
}

#[test]
fn missing_producer_of_a_union_fix_names_every_member_and_optional_trap_reads_them_all() {
    let y = "
name: w
events: [{name: Yes}, {name: No}]
steps:
  - {name: decide, params: [{name: q, kind: required, types: [UserMessageEvent]}, {name: v, kind: required, types: [Yes, No]}], outputs: [StopEvent]}
  - {name: hint, params: [{name: q, kind: required, types: [UserMessageEvent]}, {name: o, kind: optional, types: [Yes, No]}], outputs: [StopEvent]}
";
    let findings = check(&spec(y));
    let missing = findings
        .iter()
        .find(|f| f.code == MISSING_PRODUCER.code)
        .expect("SAAP002 for the union parameter");
    assert!(
        missing
            .fix
            .contains("one of `Yes`, `No` among its `outputs`"),
        "{}",
        missing.fix
    );
    let trap = findings
        .iter()
        .find(|f| f.code == OPTIONAL_TRAP.code)
        .expect("the optional trap of the union parameter");
    assert!(trap.fix.contains("reads: [Yes, No]"), "{}", trap.fix);
}

#[test]
fn missing_producer_notes_a_simulated_outside_arrival() {
    let y = "
name: w
events: [{name: Webhook}]
steps:
  - {name: on_hook, params: [{name: h, kind: required, types: [Webhook]}, {name: q, kind: required, types: [UserMessageEvent]}], outputs: [StopEvent]}
simulation:
  arrivals: [{event: UserMessageEvent}, {event: Webhook}]
";
    let f = check(&spec(y));
    let m = f.iter().find(|f| f.code == "SAAP002").unwrap();
    assert!(
        m.message
            .contains("the simulation section delivers `Webhook`"),
        "{}",
        m.message
    );
}

#[test]
fn missing_producer_applies_to_fixed_lists_not_to_optionals_or_lists() {
    let y = "
name: w
events: [{name: P}]
steps:
  - name: s
    params:
      - {name: q, kind: required, types: [UserMessageEvent]}
      - {name: o, kind: optional, types: [P]}
      - {name: l, kind: list, types: [P]}
      - {name: f, kind: fixed_list, types: [P], size: 2}
    outputs: [StopEvent]
    max_executions_per_run: 1
    precondition: {name: p}
";
    let c = codes(y);
    let missing: Vec<_> = c.iter().filter(|x| x.0 == "SAAP002").collect();
    assert_eq!(missing.len(), 1, "{c:?}");
    assert_eq!(missing[0].2.as_deref(), Some("f"));
}

#[test]
fn produced_required_input_is_not_missing() {
    assert_eq!(count(CLEAN, &MISSING_PRODUCER), 0);
}

#[test]
fn display_only_producer_does_not_count() {
    let y = "
name: w
events: [{name: Shown, parents: [DisplayEvent]}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Shown, StopEvent]}
  - {name: never, params: [{name: s, kind: required, types: [Shown]}], outputs: [StopEvent]}
";
    assert!(has(y, &MISSING_PRODUCER, "never", Some("s")));
    assert_eq!(count(y, &DISPLAY_ONLY_INPUT), 0);
}

// SAAP003
#[test]
fn step_taking_a_stop_event_is_an_error() {
    let y = format!(
        "{CLEAN}  - {{name: after, params: [{{name: s, kind: required, types: [StopEvent]}}], outputs: [A]}}\n"
    );
    assert!(has(&y, &TERMINAL_INPUT, "after", Some("s")));
    assert_eq!(count(&y, &UNREACHABLE_STEP), 0);
}

#[test]
fn step_taking_an_exception_event_is_an_error() {
    let y = format!(
        "{CLEAN}  - {{name: on_error, params: [{{name: e, kind: optional, types: [ExceptionEvent]}}, {{name: q, kind: required, types: [UserMessageEvent]}}], outputs: [StopEvent], max_executions_per_run: 1}}\n"
    );
    assert!(has(&y, &TERMINAL_INPUT, "on_error", Some("e")));
}

#[test]
fn no_terminal_inputs_in_clean_spec() {
    assert_eq!(count(CLEAN, &TERMINAL_INPUT), 0);
}

// SAAP004
#[test]
fn unbounded_cycle_is_an_error() {
    let y = "
name: w
events: [{name: Ping}, {name: Pong}]
steps:
  - {name: start, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Ping]}
  - {name: ping, params: [{name: p, kind: required, types: [Ping]}], outputs: [Pong]}
  - {name: pong, params: [{name: p, kind: required, types: [Pong]}], outputs: [Ping, StopEvent]}
";
    assert!(has(y, &UNBOUNDED_CYCLE, "ping", None));
    assert_eq!(count(y, &UNBOUNDED_CYCLE), 1);
}

#[test]
fn cycle_with_a_bound_is_clean() {
    let y = "
name: w
events: [{name: Ping}, {name: Pong}]
steps:
  - {name: start, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Ping]}
  - {name: ping, params: [{name: p, kind: required, types: [Ping]}], outputs: [Pong], max_executions_per_run: 5}
  - {name: pong, params: [{name: p, kind: required, types: [Pong]}], outputs: [Ping, StopEvent]}
";
    assert_eq!(count(y, &UNBOUNDED_CYCLE), 0);
}

#[test]
fn self_loop_is_a_cycle_but_not_through_a_fixed_list() {
    let y = "
name: w
events: [{name: A}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A]}
  - {name: again, params: [{name: a, kind: required, types: [A]}], outputs: [A, StopEvent]}
";
    assert!(has(y, &UNBOUNDED_CYCLE, "again", None));
    let fixed = y.replace(
        "kind: required, types: [A]",
        "kind: fixed_list, size: 2, types: [A]",
    );
    assert_eq!(count(&fixed, &UNBOUNDED_CYCLE), 0);
}

// SAAP005
#[test]
fn no_start_consumer_is_an_error() {
    let y = "
name: w
events: [{name: A}]
steps:
  - {name: only, params: [{name: a, kind: required, types: [A]}], outputs: [StopEvent]}
";
    let f = check(&spec(y));
    assert!(f.iter().any(|f| f.code == "SAAP005" && f.step.is_none()));
}

#[test]
fn start_consumer_present_is_clean() {
    assert_eq!(count(CLEAN, &NO_START_CONSUMER), 0);
}

// SAAP006
#[test]
fn duplicate_step_names_are_an_error() {
    let y = format!(
        "{CLEAN}  - {{name: last, params: [{{name: a, kind: required, types: [A]}}], outputs: [StopEvent]}}\n"
    );
    let f: Vec<Finding> = check(&spec(&y))
        .into_iter()
        .filter(|f| f.code == "SAAP006")
        .collect();
    assert_eq!(f.len(), 1);
    assert!(f[0].message.contains("steps[2]"), "{}", f[0].message);
}

#[test]
fn distinct_step_names_are_clean() {
    assert_eq!(count(CLEAN, &DUPLICATE_STEP), 0);
}

// SAAP007
#[test]
fn precondition_reading_a_foreign_type_is_an_error() {
    let y = "
name: w
events: [{name: A}, {name: B}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A, B]}
  - name: last
    params: [{name: a, kind: required, types: [A]}]
    outputs: [StopEvent]
    precondition: {name: b_seen, reads: [B]}
";
    assert!(has(y, &PRECONDITION_FOREIGN_READ, "last", None));
    let ok = y.replace("reads: [B]", "reads: [A]");
    assert_eq!(count(&ok, &PRECONDITION_FOREIGN_READ), 0);
}

// SAAP008
#[test]
fn dangling_stop_is_an_error() {
    let y = "
name: w
events: [{name: Note}, {name: Shown, parents: [DisplayEvent]}]
steps:
  - name: first
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Note, StopEvent]
    returns_together: [[Note, StopEvent]]
  - {name: log, params: [{name: n, kind: required, types: [Note]}], outputs: [StopEvent]}
";
    assert!(has(y, &DANGLING_STOP, "first", None));
}

#[test]
fn stop_returned_alone_or_with_display_events_is_clean() {
    let y = "
name: w
events: [{name: Shown, parents: [DisplayEvent]}]
steps:
  - name: first
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [Shown, StopEvent]
    returns_together: [[Shown, StopEvent]]
";
    assert_eq!(count(y, &DANGLING_STOP), 0);
    // `outputs` lists alternatives, not one result: no finding either.
    assert_eq!(count(CLEAN, &DANGLING_STOP), 0);
}

#[test]
fn dangling_stop_in_simulation_behaviour_is_an_error() {
    let y = format!(
        "{CLEAN}simulation:\n  arrivals: [{{event: UserMessageEvent}}]\n  behaviour:\n    last: {{emit: [A, StopEvent]}}\n"
    );
    assert!(has(&y, &DANGLING_STOP, "last", None));
}

// SAAP009
#[test]
fn fixed_list_count_mismatch_is_an_error() {
    let y = "
name: w
events: [{name: Part}]
steps:
  - {name: a, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Part], max_executions_per_run: 1}
  - {name: b, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Part], max_executions_per_run: 1}
  - {name: join, params: [{name: parts, kind: fixed_list, size: 3, types: [Part]}], outputs: [StopEvent]}
";
    assert!(has(y, &FIXED_LIST_OVERCOUNT, "join", Some("parts")));
    let ok = y.replace("size: 3", "size: 2");
    assert_eq!(count(&ok, &FIXED_LIST_OVERCOUNT), 0);
}

#[test]
fn fixed_list_count_unknown_without_execution_limits_is_clean() {
    let y = "
name: w
events: [{name: Part}]
steps:
  - {name: a, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Part]}
  - {name: join, params: [{name: parts, kind: fixed_list, size: 3, types: [Part]}], outputs: [StopEvent]}
";
    assert_eq!(count(y, &FIXED_LIST_OVERCOUNT), 0);
}

#[test]
fn fixed_list_capacity_counts_returns_together_multiplicity() {
    let y = "
name: w
events: [{name: Part}]
steps:
  - {name: a, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Part], returns_together: [[Part, Part, Part]], max_executions_per_run: 1}
  - {name: join, params: [{name: parts, kind: fixed_list, size: 3, types: [Part]}], outputs: [StopEvent]}
";
    assert_eq!(count(y, &FIXED_LIST_OVERCOUNT), 0);
    assert_eq!(
        count(&y.replace("size: 3", "size: 4"), &FIXED_LIST_OVERCOUNT),
        1
    );
}

/// Issue 19's triage agent as its macros write it: `intake` returns a `Vec` of a union
/// (a Ticket and three Opinions), `decide` joins three Opinions with an optional
/// Priority behind a precondition.
const TRIAGE: &str = "
name: Triage
events: [{name: Ticket}, {name: Opinion}, {name: Priority}, {name: Triaged, kind: stop}]
steps:
  - name: intake
    params: [{name: q, kind: required, types: [UserMessageEvent]}]
    outputs: [{event: Ticket, max: unbounded}, {event: Opinion, max: unbounded}]
    max_executions_per_run: 1
  - name: prioritize
    params: [{name: ticket, kind: required, types: [Ticket]}]
    outputs: [Priority]
    max_executions_per_run: 1
  - name: decide
    params:
      - {name: ops, kind: fixed_list, size: 3, types: [Opinion]}
      - {name: prio, kind: optional, types: [Priority]}
    outputs: [Triaged]
    max_executions_per_run: 1
    precondition: {name: has_priority, reads: [Opinion, Priority]}
";

#[test]
fn an_unbounded_producer_can_fill_a_fixed_list() {
    let f = check(&spec(TRIAGE));
    assert_eq!(summarize(&f).errors, 0, "{f:#?}");
    assert!(f.iter().all(|f| f.code != "SAAP009"), "{f:#?}");
    // The same agent described as if `intake` returned one event of each type is what
    // the issue saw: an error.
    let one_each = TRIAGE.replace(
        "[{event: Ticket, max: unbounded}, {event: Opinion, max: unbounded}]",
        "[Ticket, Opinion]",
    );
    assert!(has(&one_each, &FIXED_LIST_OVERCOUNT, "decide", Some("ops")));
}

#[test]
fn an_output_max_counts_per_execution() {
    let at_most = |n: u32| {
        TRIAGE.replace(
            "{event: Opinion, max: unbounded}",
            &format!("{{event: Opinion, max: {n}}}"),
        )
    };
    assert_eq!(count(&at_most(3), &FIXED_LIST_OVERCOUNT), 0);
    let short = check(&spec(&at_most(2)));
    let f = short
        .iter()
        .find(|f| f.code == "SAAP009")
        .expect("2 per execution, 1 execution, 3 needed");
    assert!(
        f.message
            .contains("at most 2 in a run: `intake` (1 execution × 2 `Opinion`)"),
        "{}",
        f.message
    );
    assert!(f.fix.contains("max: unbounded"), "{}", f.fix);
}

#[test]
fn output_entries_read_and_write_in_both_forms() {
    let s = spec(TRIAGE);
    let intake = &s.source.steps[0];
    assert_eq!(intake.outputs, ["Ticket", "Opinion"]);
    assert_eq!(
        intake.output_max.get("Opinion"),
        Some(&crate::spec::OutputMax::Unbounded)
    );
    assert_eq!(
        s.steps[0].max_per_execution(s.type_id("Opinion").unwrap()),
        None
    );
    assert_eq!(
        s.steps[1].max_per_execution(s.type_id("Priority").unwrap()),
        Some(1)
    );
    let json = serde_json::to_value(&s.source.steps[0]).unwrap();
    assert_eq!(
        json["outputs"],
        serde_json::json!([
            {"event": "Ticket", "max": "unbounded"},
            {"event": "Opinion", "max": "unbounded"}
        ])
    );
    // A plain name is written plain; `{event: X}` without `max` is a plain name.
    let plain = crate::parse_spec(
        "name: a\nsteps: [{name: s, outputs: [A, {event: B}, {event: C, max: 2}]}]\n",
        SpecSyntax::Yaml,
    )
    .unwrap();
    assert_eq!(
        serde_json::to_value(&plain.steps[0].outputs).unwrap(),
        serde_json::json!(["A", "B", "C"])
    );
    assert_eq!(
        serde_json::to_value(&plain.steps[0]).unwrap()["outputs"],
        serde_json::json!(["A", "B", {"event": "C", "max": 2}])
    );
    for bad in ["max: 0", "max: many", "max: -1", "max: 1000001"] {
        let err = crate::parse_spec(
            &format!("name: a\nsteps: [{{name: s, outputs: [{{event: C, {bad}}}]}}]\n"),
            SpecSyntax::Yaml,
        )
        .expect_err(bad);
        assert!(
            err.to_string()
                .contains("expected a number of events from 1 to 1000000, or `unbounded`"),
            "{bad}: {err}"
        );
    }
    let twice = crate::parse_spec(
        "name: a\nsteps: [{name: s, outputs: [C, {event: C, max: 2}]}]\n",
        SpecSyntax::Yaml,
    )
    .expect_err("listed twice with a max");
    assert!(twice.to_string().contains("list it once"), "{twice}");
}

// SAAP010
#[test]
fn optional_trap_is_a_warning() {
    let y = "
name: w
events: [{name: A}, {name: B}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A, B]}
  - {name: last, params: [{name: a, kind: required, types: [A]}, {name: b, kind: optional, types: [B]}], outputs: [StopEvent]}
";
    let f = check(&spec(y));
    let trap = f.iter().find(|f| f.code == "SAAP010").unwrap();
    assert_eq!(trap.severity, Severity::Warning);
    assert_eq!(trap.step.as_deref(), Some("last"));
    assert_eq!(trap.param.as_deref(), Some("b"));
}

#[test]
fn optional_trap_with_precondition_is_clean() {
    let y = "
name: w
events: [{name: A}, {name: B}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A, B]}
  - name: last
    params: [{name: a, kind: required, types: [A]}, {name: b, kind: optional, types: [B]}]
    outputs: [StopEvent]
    precondition: {name: wait_b, reads: [B], when: {present: b}}
";
    assert_eq!(codes(y), vec![]);
    let limited = y.replace(
        "precondition: {name: wait_b, reads: [B], when: {present: b}}",
        "max_executions_per_run: 1",
    );
    assert_eq!(count(&limited, &OPTIONAL_TRAP), 0);
}

// SAAP011
#[test]
fn list_reruns_is_a_warning() {
    let y = "
name: w
events: [{name: R}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [R]}
  - {name: last, params: [{name: rs, kind: list, types: [R]}], outputs: [StopEvent]}
";
    assert!(has(y, &LIST_RERUNS, "last", Some("rs")));
}

#[test]
fn list_reruns_with_precondition_is_clean() {
    let y = "
name: w
events: [{name: R}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [R]}
  - name: last
    params: [{name: rs, kind: list, types: [R]}]
    outputs: [StopEvent]
    precondition: {name: enough, reads: [R], when: {count_at_least: {param: rs, n: 3}}}
";
    assert_eq!(count(y, &LIST_RERUNS), 0);
}

// SAAP012
#[test]
fn same_type_two_params_is_a_warning() {
    let y = "
name: w
events: [{name: A}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A]}
  - {name: last, params: [{name: x, kind: required, types: [A]}, {name: y, kind: required, types: [A]}], outputs: [StopEvent]}
";
    assert!(has(y, &SAME_TYPE_TWO_PARAMS, "last", Some("y")));
    assert_eq!(count(CLEAN, &SAME_TYPE_TWO_PARAMS), 0);
}

// SAAP013
#[test]
fn double_dip_by_several_stages_is_a_warning() {
    let y = "
name: w
events: [{name: Result}]
steps:
  - {name: stage_1, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Result]}
  - {name: stage_2, params: [{name: r, kind: required, types: [Result]}], outputs: [Result], max_executions_per_run: 1}
  - {name: final, params: [{name: r, kind: required, types: [Result]}], outputs: [StopEvent]}
";
    assert!(has(y, &DOUBLE_DIP, "final", Some("r")));
    assert!(has(y, &DOUBLE_DIP, "stage_2", Some("r")));
}

#[test]
fn fan_in_by_fixed_list_is_not_a_double_dip() {
    let y = "
name: w
events: [{name: Part}]
steps:
  - {name: a, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Part], max_executions_per_run: 1}
  - {name: b, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Part], max_executions_per_run: 1}
  - {name: join, params: [{name: parts, kind: fixed_list, size: 2, types: [Part]}], outputs: [StopEvent]}
";
    assert_eq!(codes(y), vec![]);
}

// SAAP014
#[test]
fn parent_typed_param_is_a_warning() {
    let y = "
name: w
events: [{name: Result}, {name: GoodResult, parents: [Result]}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [GoodResult]}
  - {name: last, params: [{name: r, kind: optional, types: [Result]}, {name: q, kind: required, types: [UserMessageEvent]}], outputs: [StopEvent], max_executions_per_run: 1}
";
    assert!(has(y, &PARENT_TYPED_PARAM, "last", Some("r")));
    let ok = y.replace("types: [Result]}", "types: [Result, GoodResult]}");
    assert_eq!(count(&ok, &PARENT_TYPED_PARAM), 0);
}

#[test]
fn start_event_param_with_user_message_arrival_is_parent_typed() {
    let y = "
name: w
steps:
  - {name: first, params: [{name: q, kind: required, types: [StartEvent]}], outputs: [StopEvent]}
simulation:
  arrivals: [{event: UserMessageEvent}]
";
    assert!(has(y, &PARENT_TYPED_PARAM, "first", Some("q")));
}

// SAAP015
#[test]
fn no_path_to_stop_is_a_warning() {
    let y = "
name: w
events: [{name: A}, {name: Log}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A, Log]}
  - {name: last, params: [{name: a, kind: required, types: [A]}], outputs: [StopEvent]}
  - {name: audit, params: [{name: l, kind: required, types: [Log]}]}
";
    assert!(has(y, &NO_PATH_TO_STOP, "audit", None));
    assert!(!has(y, &NO_PATH_TO_STOP, "first", None));
    assert_eq!(count(CLEAN, &NO_PATH_TO_STOP), 0);
}

// SAAP016
#[test]
fn display_only_input_is_a_warning() {
    let y = "
name: w
events: [{name: Shown, parents: [DisplayEvent]}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}, {name: s, kind: optional, types: [Shown]}], outputs: [StopEvent], max_executions_per_run: 1}
";
    assert!(has(y, &DISPLAY_ONLY_INPUT, "first", Some("s")));
    let both = y.replace(
        "parents: [DisplayEvent]",
        "parents: [ControlAndDisplayEvent]",
    );
    assert_eq!(count(&both, &DISPLAY_ONLY_INPUT), 0);
}

#[test]
fn precondition_reading_a_taken_type_is_clean() {
    let y = "
name: w
events: [{name: A}, {name: B}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A, B]}
  - name: last
    params: [{name: a, kind: required, types: [A]}, {name: b, kind: optional, types: [B]}]
    outputs: [StopEvent]
    precondition: {name: b_seen, reads: [A, B], when: {present: b}}
";
    assert_eq!(codes(y), vec![]);
}

#[test]
fn parent_typed_param_listing_the_subtype_is_clean() {
    let y = "
name: w
events: [{name: Result}, {name: GoodResult, parents: [Result]}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [GoodResult, Result]}
  - {name: last, params: [{name: r, kind: list, types: [Result, GoodResult]}], outputs: [StopEvent], precondition: {name: two, when: {count_at_least: {param: r, n: 2}}}}
";
    assert_eq!(codes(y), vec![]);
}

#[test]
fn control_and_display_input_is_clean() {
    let y = "
name: w
events: [{name: Shown, parents: [ControlAndDisplayEvent]}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Shown]}
  - {name: last, params: [{name: s, kind: required, types: [Shown]}], outputs: [StopEvent]}
";
    assert_eq!(codes(y), vec![]);
}

#[test]
fn same_type_two_params_with_distinct_types_is_clean() {
    let y = "
name: w
events: [{name: A}, {name: B}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A, B]}
  - {name: last, params: [{name: x, kind: required, types: [A]}, {name: y, kind: required, types: [B]}], outputs: [StopEvent]}
";
    assert_eq!(codes(y), vec![]);
}

#[test]
fn double_dip_by_self_consumption_is_a_warning() {
    let y = "
name: w
events: [{name: Draft}]
steps:
  - {name: write, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Draft]}
  - {name: refine, params: [{name: d, kind: required, types: [Draft]}], outputs: [Draft, StopEvent], max_executions_per_run: 3}
";
    let f = check(&spec(y));
    let dip: Vec<&Finding> = f.iter().filter(|f| f.code == "SAAP013").collect();
    assert_eq!(dip.len(), 1, "{f:?}");
    assert_eq!(dip[0].step.as_deref(), Some("refine"));
    assert!(
        dip[0].message.contains("also returns it"),
        "{}",
        dip[0].message
    );
}

#[test]
fn distinct_stage_types_are_not_a_double_dip() {
    let y = "
name: w
events: [{name: Stage1Result}, {name: Stage2Result}]
steps:
  - {name: stage_1, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [Stage1Result]}
  - {name: stage_2, params: [{name: r, kind: required, types: [Stage1Result]}], outputs: [Stage2Result]}
  - {name: final, params: [{name: r, kind: required, types: [Stage2Result]}], outputs: [StopEvent]}
";
    assert_eq!(codes(y), vec![]);
}

#[test]
fn no_path_to_stop_through_an_in_the_loop_request_is_clean() {
    let y = "
name: w
steps:
  - {name: ask, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [ToolApprovalRequestEvent]}
  - {name: act, params: [{name: r, kind: required, types: [ToolApprovalResponseEvent]}], outputs: [StopEvent]}
";
    assert_eq!(count(y, &NO_PATH_TO_STOP), 0);
    // Without a step taking the response, the request leads nowhere.
    let dead = y.replace("outputs: [StopEvent]", "outputs: []");
    assert!(has(&dead, &NO_PATH_TO_STOP, "ask", None));
}

// SAAP017
#[test]
fn precondition_never_true_is_a_warning() {
    let y = "
name: w
events: [{name: A}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A]}
  - name: last
    params: [{name: a, kind: required, types: [A]}]
    outputs: [StopEvent]
    precondition: {name: two_answers, reads: [A], when: {count_at_least: {param: a, n: 2}}}
";
    assert!(has(y, &PRECONDITION_NEVER_TRUE, "last", None));
    assert_eq!(count(y, &UNREACHABLE_STEP), 0);
    let always = y.replace("{count_at_least: {param: a, n: 2}}", "{always: false}");
    assert!(has(&always, &PRECONDITION_NEVER_TRUE, "last", None));
}

#[test]
fn satisfiable_precondition_is_clean() {
    let y = "
name: w
events: [{name: A}]
steps:
  - {name: first, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [A]}
  - name: last
    params: [{name: a, kind: list, types: [A]}]
    outputs: [StopEvent]
    precondition: {name: two, reads: [A], when: {count_at_least: {param: a, n: 2}}}
";
    assert_eq!(count(y, &PRECONDITION_NEVER_TRUE), 0);
}

#[test]
fn condition_constants_follow_param_kinds() {
    let s = spec(
        "
name: w
steps:
  - name: s
    params:
      - {name: r, kind: required, types: [UserMessageEvent]}
      - {name: o, kind: optional, types: [UserMessageEvent]}
      - {name: l, kind: list, types: [UserMessageEvent]}
      - {name: f, kind: fixed_list, size: 3, types: [UserMessageEvent]}
",
    );
    let st = &s.steps[0];
    use CompiledCondition as C;
    assert_eq!(condition_constant(st, &C::Present(0)), Some(true));
    assert_eq!(condition_constant(st, &C::Absent(0)), Some(false));
    assert_eq!(condition_constant(st, &C::Present(1)), None);
    assert_eq!(condition_constant(st, &C::CountAtLeast(1, 2)), Some(false));
    assert_eq!(condition_constant(st, &C::CountAtLeast(2, 100)), None);
    assert_eq!(condition_constant(st, &C::CountAtLeast(3, 3)), Some(true));
    assert_eq!(condition_constant(st, &C::CountAtLeast(3, 4)), Some(false));
    assert_eq!(condition_constant(st, &C::Any(vec![])), Some(false));
    assert_eq!(condition_constant(st, &C::All(vec![])), Some(true));
    assert_eq!(
        condition_constant(
            st,
            &C::Not(Box::new(C::Any(vec![C::Present(1), C::Present(0)])))
        ),
        Some(false)
    );
}

#[test]
fn every_finding_has_why_and_fix() {
    let y = "
name: w
events: [{name: A}, {name: B}]
steps:
  - {name: s, params: [{name: a, kind: required, types: [A]}, {name: b, kind: optional, types: [B]}, {name: l, kind: list, types: [StopEvent]}], outputs: [A]}
  - {name: s, params: [], outputs: []}
";
    let f = check(&spec(y));
    assert!(f.len() >= 5, "{f:?}");
    for x in &f {
        assert!(!x.why.is_empty() && !x.fix.is_empty() && !x.message.is_empty());
    }
}

/// Large specs at the compiler's bounds go through every check (linear passes; no
/// timing is asserted): a 10,000-step chain declared backwards, and a type with 3,000
/// producers and 3,000 single-parameter consumers.
#[test]
fn large_specs_are_checked() {
    use crate::spec::{EventTypeSpec, ParamSpec, StepSpec, WorkflowSpec};
    let step = |name: String, input: String, kind: ParamKind, output: String| StepSpec {
        name,
        params: vec![ParamSpec {
            name: "e".into(),
            kind,
            types: vec![input],
            size: None,
        }],
        outputs: vec![output],
        output_max: Default::default(),
        delayed: Vec::new(),
        returns_together: vec![],
        max_executions_per_run: None,
        stop_on_error: true,
        precondition: None,
        description: None,
        delegates_to: Vec::new(),
    };
    let n = 10_000;
    let mut chain = WorkflowSpec {
        format: 1,
        name: "chain".into(),
        description: None,
        events: (0..n)
            .map(|i| EventTypeSpec {
                name: format!("E{i}"),
                parents: vec![],
                description: None,
            })
            .collect(),
        steps: Vec::new(),
        agents: Vec::new(),
        simulation: None,
    };
    for i in (0..n).rev() {
        let input = if i == 0 {
            "UserMessageEvent".to_string()
        } else {
            format!("E{}", i - 1)
        };
        let output = if i == n - 1 {
            "StopEvent".to_string()
        } else {
            format!("E{i}")
        };
        chain
            .steps
            .push(step(format!("s{i}"), input, ParamKind::Required, output));
    }
    let compiled = CompiledSpec::compile(&chain).unwrap();
    assert_eq!(check(&compiled), vec![]);

    let m = 3_000;
    let mut wide = chain.clone();
    wide.events = vec![EventTypeSpec {
        name: "Part".into(),
        parents: vec![],
        description: None,
    }];
    wide.steps = (0..m)
        .map(|i| {
            step(
                format!("p{i}"),
                "UserMessageEvent".into(),
                ParamKind::Required,
                "Part".into(),
            )
        })
        .chain((0..m).map(|i| {
            step(
                format!("c{i}"),
                "Part".into(),
                ParamKind::Required,
                "StopEvent".into(),
            )
        }))
        .collect();
    let f = check(&CompiledSpec::compile(&wide).unwrap());
    assert_eq!(f.len(), m, "one double-dip per consumer");
    assert!(f.iter().all(|f| f.code == DOUBLE_DIP.code));
    assert!(f[0].message.contains("and 2992 more"), "{}", f[0].message);
}

fn workspace_file(rel: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

#[test]
fn every_example_spec_compiles_and_checks() {
    let dir = workspace_file("examples/specs");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|x| x.to_str()),
                Some("yaml" | "yml" | "json")
            )
        })
        .collect();
    names.sort();
    assert!(names.len() >= 13, "expected the example specs in {dir:?}");
    for path in names {
        let text = std::fs::read_to_string(&path).unwrap();
        let syntax = SpecSyntax::detect(path.to_str(), &text);
        let compiled = crate::compile_spec_text(&text, syntax)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            compiled.source.simulation.is_some(),
            "{}: examples need a simulation section",
            path.display()
        );
        // The clean examples stay clean.
        let file = path.file_name().unwrap().to_str().unwrap();
        if matches!(
            file,
            "rag.yaml" | "fixedlist-fix.yaml" | "optional-trap-fixed.yaml"
        ) {
            assert_eq!(check(&compiled), vec![], "{file}");
        }
    }
}

/// The first fenced block of `lang` after `from` in `text`.
fn fenced<'t>(text: &'t str, from: usize, lang: &str) -> Option<&'t str> {
    let open = format!("```{lang}\n");
    let start = text[from..].find(&open)? + from + open.len();
    let end = text[start..].find("```")? + start;
    Some(&text[start..end])
}

#[test]
fn checks_doc_has_a_section_with_a_triggering_example_per_code() {
    let doc = std::fs::read_to_string(workspace_file("docs/checks.md")).unwrap();
    for r in RULES {
        let heading = format!("\n## {} {}\n", r.code, r.rule);
        let at = doc
            .find(&heading)
            .unwrap_or_else(|| panic!("docs/checks.md lacks `{}`", heading.trim()));
        let next = doc[at + heading.len()..]
            .find("\n## ")
            .map_or(doc.len(), |n| n + at + heading.len());
        let example = fenced(&doc[..next], at, "yaml")
            .unwrap_or_else(|| panic!("{}: no yaml example", r.code));
        let found = check(&spec(example));
        assert!(
            found
                .iter()
                .any(|f| f.code == r.code && f.severity == r.severity),
            "{}: the example does not trigger it: {found:?}",
            r.code
        );
    }
}

#[test]
fn spec_format_example_is_the_same_in_yaml_and_json_and_is_clean() {
    let doc = std::fs::read_to_string(workspace_file("docs/spec-format.md")).unwrap();
    let at = doc.find("## A complete example").unwrap();
    let yaml =
        crate::compile_spec_text(fenced(&doc, at, "yaml").unwrap(), SpecSyntax::Yaml).unwrap();
    let json =
        crate::compile_spec_text(fenced(&doc, at, "json").unwrap(), SpecSyntax::Json).unwrap();
    assert_eq!(yaml.source, json.source);
    assert_eq!(check(&yaml), vec![]);
}

/// Walks a JSON value along the hand-written schema and reports keys the schema does
/// not describe (a structural drift between `spec.rs` and `docs/spec.schema.json`).
fn schema_drift(
    root: &serde_json::Value,
    node: &serde_json::Value,
    value: &serde_json::Value,
    path: &str,
    out: &mut Vec<String>,
) {
    use serde_json::Value;
    if let Some(r) = node.get("$ref").and_then(Value::as_str) {
        let target = root.pointer(r.trim_start_matches('#')).unwrap();
        return schema_drift(root, target, value, path, out);
    }
    if let Some(alts) = node.get("oneOf").and_then(Value::as_array) {
        // An object takes the alternative whose required keys it has; anything else the
        // first alternative without required keys (e.g. a type name).
        let resolve = |a: &'_ Value| -> Value {
            match a.get("$ref").and_then(Value::as_str) {
                Some(r) => root
                    .pointer(r.trim_start_matches('#'))
                    .cloned()
                    .unwrap_or(Value::Null),
                None => a.clone(),
            }
        };
        let chosen = alts.iter().map(resolve).find(|a| match a.get("required") {
            Some(req) => {
                value.is_object()
                    && req.as_array().is_some_and(|req| {
                        req.iter()
                            .all(|k| k.as_str().is_some_and(|k| value.get(k).is_some()))
                    })
            }
            None => !value.is_object(),
        });
        match chosen {
            Some(a) => return schema_drift(root, &a, value, path, out),
            None => {
                out.push(format!("{path}: matches no alternative"));
                return;
            }
        }
    }
    match value {
        Value::Object(map) => {
            let props = node.get("properties").and_then(Value::as_object);
            let extra = node.get("additionalProperties").filter(|a| a.is_object());
            for (k, v) in map {
                let p = format!("{path}.{k}");
                match (props.and_then(|ps| ps.get(k)), extra) {
                    (Some(sub), _) | (None, Some(sub)) => schema_drift(root, sub, v, &p, out),
                    (None, None) => out.push(format!("{p}: not in the schema")),
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = node.get("items") {
                for (i, v) in items.iter().enumerate() {
                    schema_drift(root, sub, v, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

#[test]
fn schema_describes_every_field_the_model_writes() {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(workspace_file("docs/spec.schema.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    let doc = std::fs::read_to_string(workspace_file("docs/spec-format.md")).unwrap();
    let at = doc.find("## A complete example").unwrap();
    let mut full = spec(fenced(&doc, at, "yaml").unwrap()).source;
    // Set what the example leaves at its default, so that every field is written.
    full.steps[0].precondition = Some(crate::spec::PreconditionSpec {
        name: "p".into(),
        reads: vec!["UserMessageEvent".into()],
        when: Some(crate::spec::Condition::All(vec![
            crate::spec::Condition::Always(true),
            crate::spec::Condition::Any(vec![crate::spec::Condition::Present("question".into())]),
            crate::spec::Condition::Not(Box::new(crate::spec::Condition::Absent(
                "question".into(),
            ))),
            crate::spec::Condition::CountAtLeast {
                param: "question".into(),
                n: 1,
            },
        ])),
    });
    if let Some(sim) = full.simulation.as_mut() {
        let b = sim.behaviour.entry("draft".into()).or_default();
        b.fail = Some("boom".into());
        b.executions
            .insert(2, crate::spec::ExecutionBehaviour::Fail("again".into()));
    }
    let value = serde_json::to_value(&full).unwrap();
    let mut drift = Vec::new();
    schema_drift(&schema, &schema, &value, "$", &mut drift);
    assert_eq!(drift, Vec::<String>::new());
    // And the reverse for the top level: every schema property is a model field.
    for k in schema["properties"].as_object().unwrap().keys() {
        assert!(
            value.get(k).is_some(),
            "schema property `{k}` is not written by the model"
        );
    }
}

// SAAP018 and SAAP019 on a process (seed 002's process steps)
#[test]
fn a_process_taking_agent_work_it_never_requests_and_a_person_without_a_deadline_are_warnings() {
    let y = "
name: Onboarding
events: [{name: NewHire, parents: [ProcessStartEvent]}]
steps:
  - {name: ask, params: [{name: h, kind: required, types: [NewHire]}], outputs: [HumanWorkRequestEvent]}
  - {name: welcome, params: [{name: w, kind: required, types: [HumanWorkEvent]}], outputs: [ProgramWorkRequestEvent]}
  - {name: finish, params: [{name: n, kind: required, types: [AgentWorkEvent]}], outputs: [ProcessStopEvent]}
";
    assert!(has(y, &RESPONSE_WITHOUT_REQUEST, "finish", Some("n")));
    let found = check(&spec(y));
    // The start and the work handed back arrive from outside: no step lacks a producer.
    let errors: Vec<_> = found
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    let f = found
        .iter()
        .find(|f| f.code == RESPONSE_WITHOUT_REQUEST.code)
        .unwrap();
    assert!(
        f.message.contains("returns an `AgentWorkRequestEvent`"),
        "{}",
        f.message
    );
    assert!(f.fix.contains("AgentWorkRequestEvent::new"), "{}", f.fix);
    assert!(has(y, &WAIT_WITHOUT_DEADLINE, "welcome", Some("w")));
    // Asking the agent clears SAAP018; an agent-in-the-loop request would not.
    let asked = y.replace(
        "outputs: [ProgramWorkRequestEvent]}",
        "outputs: [AgentWorkRequestEvent]}",
    );
    assert_eq!(count(&asked, &RESPONSE_WITHOUT_REQUEST), 0);
    let other = y.replace(
        "outputs: [ProgramWorkRequestEvent]}",
        "outputs: [AgentInTheLoopRequestEvent]}",
    );
    assert!(has(&other, &RESPONSE_WITHOUT_REQUEST, "finish", Some("n")));
}

// SAAP022
#[test]
fn a_delegation_to_an_agent_the_workflow_does_not_know_is_a_warning() {
    let y = "
name: Editor
agents: [Researcher]
events: [{name: Brief, parents: [StopEvent]}]
steps:
  - {name: assign, params: [{name: q, kind: required, types: [UserMessageEvent]}], outputs: [AgentInTheLoopRequestEvent], delegates_to: [Reseacher]}
  - {name: write, params: [{name: r, kind: required, types: [AgentInTheLoopResponseEvent, AgentInTheLoopExceptionEvent]}], outputs: [Brief]}
";
    assert!(has(y, &DELEGATION_TO_UNKNOWN_AGENT, "assign", None));
    let found = check(&spec(y));
    let f = found
        .iter()
        .find(|f| f.code == DELEGATION_TO_UNKNOWN_AGENT.code)
        .unwrap();
    assert_eq!(f.severity, Severity::Warning);
    assert!(
        f.message
            .contains("delegates to `Reseacher`, which the workflow does not know (it knows `Editor`, `Researcher`)"),
        "{}",
        f.message
    );
    assert!(f.fix.contains("knows_agents([\"Reseacher\"])"), "{}", f.fix);
    // The right name, the workflow itself, or no declaration at all: clean.
    assert_eq!(
        count(
            &y.replace("[Reseacher]", "[Researcher]"),
            &DELEGATION_TO_UNKNOWN_AGENT
        ),
        0
    );
    assert_eq!(
        count(
            &y.replace("[Reseacher]", "[Editor]"),
            &DELEGATION_TO_UNKNOWN_AGENT
        ),
        0
    );
    assert_eq!(
        count(
            &y.replace(", delegates_to: [Reseacher]", ""),
            &DELEGATION_TO_UNKNOWN_AGENT
        ),
        0
    );
    // A name that cannot be a class (it would be a NATS subject token) is refused.
    let bad = y.replace("[Reseacher]", "[\"Re search\"]");
    let err = crate::compile_spec_text(&bad, crate::SpecSyntax::Yaml)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.starts_with("steps[0].delegates_to[0]"), "{err}");
}
