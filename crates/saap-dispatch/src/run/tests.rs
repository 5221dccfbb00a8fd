//! The run state machine's unit tests.

use super::input::{Handled, InputError, RunInput};
use super::*;
use crate::ids::{counter_event_id, derived_event_id, run_key};
use crate::record::SkipReason;

fn run_of(yaml: &str) -> Run {
    let spec = crate::compile_spec_text(yaml, crate::SpecSyntax::Yaml).expect("spec");
    Run::new(Arc::new(spec), 3)
}

fn send(run: &mut Run, n: u64, ty: &str) -> Appended {
    let t = run.spec().type_id(ty).expect("type");
    run.append(
        NewEvent::known(counter_event_id(n), t),
        &mut DeclaredConditions,
    )
    .expect("appended")
}

/// A fan-out's `n` outputs of type `ty`, completed through the outputs path.
fn fan_out(run: &mut Run, x: ExecutionId, ty: &str, n: u32) {
    let t = run.spec().type_id(ty).expect("type");
    let outs = (0..n)
        .map(|i| NewEvent::known(derived_event_id(run.run_key(), x, i), t))
        .collect();
    run.complete(x, 1, Outcome::Returned(outs), &mut DeclaredConditions)
        .expect("completed");
}

/// Drives a looping chain (`StartEvent → A → B → A …`) for `completions` completions
/// and returns everything a run exposes. Every 7th output repeats an id already logged
/// (a duplicate: the chain stops and an outside `A` goes on), every 5th execution is
/// retried and completed as attempt 2, and the last output is the stop event.
fn drive_loop(budget: &str, ids: usize, sets: usize, completions: u32) -> String {
    let spec = crate::compile_spec_text(
        &format!(
            "name: W\nevents: [{{name: A}}, {{name: B}}, {{name: Done, parents: [StopEvent]}}]\nsteps:\n  - {{name: s0, params: [{{name: x, kind: required, types: [StartEvent]}}], outputs: [A]{budget}}}\n  - {{name: s1, params: [{{name: x, kind: required, types: [A]}}], outputs: [B]{budget}}}\n  - {{name: s2, params: [{{name: x, kind: optional, types: [B]}}], outputs: [A]{budget}}}\n"
        ),
        crate::SpecSyntax::Yaml,
    )
    .expect("spec");
    let mut run = Run::new(Arc::new(spec), 7).with_index_thresholds(ids, sets);
    let t = |run: &Run, name: &str| run.spec().type_id(name).expect("type");
    send(&mut run, 1, "StartEvent");
    let mut outside = 1_000;
    let mut outs = Vec::new();
    for n in 1..=completions {
        let x = match run.next_started() {
            Some(x) => x,
            None => {
                outside += 1;
                send(&mut run, outside, "A");
                run.next_started().expect("an outside A starts s1")
            }
        };
        let step = run.execution(x).expect("exec").step;
        let ty = if n == completions {
            t(&run, "Done")
        } else {
            run.spec().steps[step as usize].outputs[0]
        };
        let id = if n % 7 == 0 {
            run.log()[(n as usize * 3) % run.log().len()].id
        } else {
            derived_event_id(run.run_key(), x, 0)
        };
        let mut attempt = 1;
        if n % 5 == 0 {
            attempt = run.retry(x).expect("retry");
        }
        outs.push(NewEvent::known(id, ty));
        run.complete_returned(x, attempt, &mut outs, &mut DeclaredConditions)
            .expect("complete");
    }
    let bound: Vec<_> = (0..run.executions().len() as u32)
        .map(|x| run.bound_event_ids(ExecutionId(x)))
        .collect();
    format!(
        "{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{bound:?}",
        run.status(),
        run.records(),
        run.log(),
        run.executions(),
        (0..run.executions().len() as u32)
            .map(|x| run.bindings(ExecutionId(x)).to_vec())
            .collect::<Vec<_>>(),
    )
}

/// A completion that returns one chain link is decided from the compiled entry
/// (`Run::chain_link`); a budget on every step sends the same completions through the
/// general append and dispatch. Both must leave the same records, log, executions and
/// bindings: ids scanned and indexed (and the switch), duplicates, retried attempts,
/// events past the static seq table, the stop.
#[test]
fn a_chain_link_completion_decides_like_the_general_path() {
    let budget = ", max_executions_per_run: 100000";
    for (ids, sets) in [(32, 32), (0, 0), (5, 3)] {
        for completions in [1, 9, 40, 300] {
            let fast = drive_loop("", ids, sets, completions);
            let general = drive_loop(budget, ids, sets, completions);
            assert_eq!(
                fast, general,
                "ids index at {ids}, input sets at {sets}, {completions} completions"
            );
            assert!(fast.contains("Terminated"), "the run ends");
        }
    }
    // The shortcut is taken where it applies, and only there.
    let spec = |budget: &str| {
        crate::compile_spec_text(
            &format!("name: W\nevents: [{{name: A}}]\nsteps:\n  - {{name: s, params: [{{name: x, kind: required, types: [A]}}]{budget}}}\n"),
            crate::SpecSyntax::Yaml,
        )
        .expect("spec")
    };
    let plain = spec("");
    let a = plain.type_id("A").expect("A");
    assert!(plain.chain_link(a).is_some());
    assert!(spec(budget).chain_link(a).is_none());
    assert!(
        plain
            .chain_link(plain.type_id("StopEvent").expect("stop"))
            .is_none()
    );
}

/// A fixed list that is its step's only parameter is decided without the general
/// readiness check; a step with the same fixed list and an optional parameter that never
/// blocks goes through it. Both must record the same decisions for every arrival
/// (short, full, overflow).
#[test]
fn a_sole_fixed_list_decides_arrivals_like_the_general_readiness_check() {
    let records = |extra: &str| {
        let mut run = run_of(&format!(
            "name: W\nevents: [{{name: A}}, {{name: O}}]\nsteps:\n  - {{name: fan, params: [{{name: s, kind: required, types: [StartEvent]}}], outputs: [A]}}\n  - {{name: join, params: [{{name: xs, kind: fixed_list, size: 3, types: [A]}}{extra}]}}\n"
        ));
        send(&mut run, 1, "StartEvent");
        let x = run.take_started();
        fan_out(&mut run, x[0], "A", 5);
        assert_eq!(run.take_started().len(), 1, "the fan-in starts once");
        run.records().to_vec()
    };
    let sole = records("");
    assert!(sole.iter().any(|r| matches!(
        r,
        Record::Skipped {
            reason: SkipReason::FixedListShort {
                have: 2,
                need: 3,
                ..
            },
            ..
        }
    )));
    assert!(
        sole.iter()
            .any(|r| matches!(r, Record::FixedListOverflow { .. }))
    );
    assert_eq!(sole, records(", {name: o, kind: optional, types: [O]}"));
}

/// A fan-out to workers sizes, once, the tables its workers' results and their fan-in
/// will fill: no table is reallocated (and copied) from the fan-out to the run's end,
/// for a fixed-list fan-in, a list fan-in and a fan-out larger than a fixed list's
/// first reservation; and the run decides as before (one fan-in, the stop).
#[test]
fn a_fan_out_sizes_the_tables_of_its_workers_and_their_fan_in_once() {
    let gate = ", precondition: {name: all, when: {count_at_least: {param: xs, n: 300}}}";
    for (n, fan_in, gate) in [
        (
            300,
            "{name: xs, kind: fixed_list, size: 300, types: [R]}",
            "",
        ),
        (
            6000,
            "{name: xs, kind: fixed_list, size: 6000, types: [R]}",
            "",
        ),
        (300, "{name: xs, kind: list, types: [R]}", gate),
    ] {
        let mut run = run_of(&format!(
            "name: W\nevents: [{{name: A}}, {{name: R}}, {{name: Done, parents: [StopEvent]}}]\nsteps:\n  - {{name: fan, params: [{{name: s, kind: required, types: [StartEvent]}}], outputs: [A]}}\n  - {{name: work, params: [{{name: a, kind: required, types: [A]}}], outputs: [R]}}\n  - {{name: join, params: [{fan_in}], outputs: [Done]{gate}}}\n"
        ));
        send(&mut run, 1, "StartEvent");
        let x = run.take_started();
        fan_out(&mut run, x[0], "A", n);
        let slot = run.param_slot(2, 0);
        let tables = |run: &Run| {
            (
                run.log.as_ptr(),
                run.records.as_ptr(),
                run.executions.as_ptr(),
                run.bindings.as_ptr(),
                run.matches[slot].as_ptr(),
                run.rare.as_ref().map(|r| r.by_id.capacity()),
            )
        };
        let sized = tables(&run);
        let r = run.spec().type_id("R").expect("R");
        let done = run.spec().type_id("Done").expect("Done");
        let mut outs = Vec::new();
        for w in run.take_started() {
            outs.push(NewEvent::known(derived_event_id(run.run_key(), w, 0), r));
            run.complete_returned(w, 1, &mut outs, &mut DeclaredConditions)
                .expect("a worker completes");
        }
        let join = run.take_started();
        assert_eq!(join.len(), 1, "{fan_in}: the fan-in runs once");
        outs.push(NewEvent::known(
            derived_event_id(run.run_key(), join[0], 0),
            done,
        ));
        run.complete_returned(join[0], 1, &mut outs, &mut DeclaredConditions)
            .expect("the fan-in completes");
        assert!(run.is_terminated());
        assert_eq!(run.log().len(), 2 * n as usize + 2);
        assert_eq!(tables(&run), sized, "{fan_in}, {n} items: a table grew");
    }
}

/// A recycled run builds its id index in the table the run before it left, once per
/// fan-out.
#[test]
fn a_recycled_run_builds_its_id_index_in_the_table_it_kept() {
    let mut run = run_of(
        "name: W\nevents: [{name: A}]\nsteps:\n  - {name: fan, params: [{name: s, kind: required, types: [StartEvent]}], outputs: [A]}\n  - {name: join, params: [{name: xs, kind: fixed_list, size: 100, types: [A]}]}\n",
    );
    let mut slots = None;
    for key in 1..4 {
        run.reset(key);
        send(&mut run, 1, "StartEvent");
        let x = run.take_started();
        fan_out(&mut run, x[0], "A", 100);
        let index = &run.rare.as_ref().expect("indexed").by_id;
        assert_eq!(index.len(), 101);
        let now = index.slots_ptr();
        assert_eq!(*slots.get_or_insert(now), now, "run {key}: a new table");
        assert_eq!(run.seq_of(&run.log()[57].id), Some(57));
    }
}

/// A run that grows into an ended run's tables (`take_tables`, `grow_into`) builds its
/// id index in that run's table, emptied, not in a new one; and decides as a run that
/// built its own.
#[test]
fn a_run_grown_into_an_ended_runs_tables_builds_its_id_index_in_their_table() {
    let yaml = "name: W\nevents: [{name: A}]\nsteps:\n  - {name: fan, params: [{name: s, kind: required, types: [StartEvent]}], outputs: [A]}\n  - {name: join, params: [{name: xs, kind: fixed_list, size: 100, types: [A]}]}\n";
    let fanned = |run: &mut Run| {
        send(run, 1, "StartEvent");
        let x = run.take_started();
        fan_out(run, x[0], "A", 100);
    };
    let mut ended = run_of(yaml);
    fanned(&mut ended);
    let table = ended.rare.as_ref().expect("indexed").by_id.slots_ptr();
    let mut tables = ended.take_tables();
    assert!(ended.rare.is_none());
    let mut grown = ended.sibling(5);
    grown.grow_into(&mut tables);
    fanned(&mut grown);
    let index = &grown.rare.as_ref().expect("indexed").by_id;
    assert_eq!(index.len(), 101);
    assert_eq!(index.slots_ptr(), table, "a new table");
    let mut own = ended.sibling(5);
    fanned(&mut own);
    assert_eq!(grown.records(), own.records());
    for (seq, e) in own.log().iter().enumerate() {
        assert_eq!(grown.seq_of(&e.id), Some(seq as Seq));
    }
}

/// A list that is its step's only parameter goes straight to the precondition until the
/// step first runs; a step with the same list and an optional parameter goes through the
/// general readiness check. Both must record the same decisions (candidate,
/// precondition results, skips, the start, and the input-set skips after it).
#[test]
fn a_sole_list_decides_arrivals_like_the_general_readiness_check() {
    let records = |extra: &str| {
        let mut run = run_of(&format!(
            "name: W\nevents: [{{name: A}}, {{name: O}}]\nsteps:\n  - {{name: fan, params: [{{name: s, kind: required, types: [StartEvent]}}], outputs: [A]}}\n  - {{name: join, params: [{{name: xs, kind: list, types: [A]}}{extra}], precondition: {{name: enough, when: {{count_at_least: {{param: xs, n: 3}}}}}}}}\n"
        ));
        send(&mut run, 1, "StartEvent");
        let x = run.take_started();
        fan_out(&mut run, x[0], "A", 5);
        assert_eq!(
            run.take_started().len(),
            3,
            "the fan-in runs at 3, 4 and 5 items"
        );
        run.records().to_vec()
    };
    let sole = records("");
    assert!(sole.iter().any(|r| matches!(
        r,
        Record::Skipped {
            reason: SkipReason::PreconditionFalse,
            ..
        }
    )));
    assert_eq!(sole, records(", {name: o, kind: optional, types: [O]}"));
}

/// Single bindings of events past the static table (seq ≥ 256) still expand to their
/// event: through the chain link's path, the general path and a precondition's view.
#[test]
fn single_bindings_past_the_static_table_expand_to_their_event() {
    let mut run = run_of(
        "name: W\nevents: [{name: A}, {name: B}, {name: C}]\nsteps:\n  - {name: link, params: [{name: c, kind: required, types: [C]}]}\n  - {name: both, params: [{name: a, kind: required, types: [A]}, {name: b, kind: optional, types: [B]}], precondition: {name: has_b, when: {present: b}}}\n",
    );
    send(&mut run, 1, "StartEvent");
    for n in 2..300 {
        send(&mut run, n, "B");
    }
    send(&mut run, 300, "A");
    send(&mut run, 301, "C");
    let started = run.take_started();
    assert_eq!(started.len(), 2);
    let id = |n| counter_event_id(n);
    assert_eq!(
        run.bound_event_ids(started[0]),
        vec![vec![id(300)], vec![id(299)]]
    );
    assert_eq!(run.bound_event_ids(started[1]), vec![vec![id(301)]]);
}

/// A fan-out's outputs reserve the records they will make: one arrival makes
/// `arrival_records` records (appended, and per consuming step a candidate, a
/// precondition result when it has one, and a start or a skip).
#[test]
fn arrival_records_count_the_records_one_arrival_makes() {
    let mut run = run_of(
        "name: W\nevents: [{name: A}, {name: B}, {name: N}, {name: D, parents: [DisplayEvent]}, {name: Done, parents: [StopEvent]}]\nsteps:\n  - {name: link, params: [{name: a, kind: required, types: [A]}]}\n  - {name: fan_in, params: [{name: xs, kind: fixed_list, size: 9, types: [A]}]}\n  - {name: gated, params: [{name: bs, kind: list, types: [B]}], precondition: {name: many, when: {count_at_least: {param: bs, n: 5}}}}\n",
    );
    send(&mut run, 1, "StartEvent");
    for (n, ty) in [
        (2, "A"),
        (3, "B"),
        (4, "N"),
        (5, "D"),
        (6, "A"),
        (7, "Done"),
    ] {
        let before = run.records().len();
        send(&mut run, n, ty);
        let t = run.spec().type_id(ty).expect("type");
        assert_eq!(
            run.records().len() - before,
            run.spec().arrival_records(t) as usize,
            "{ty}"
        );
    }
}

/// Only required parameters and fixed lists can fail readiness (DESIGN §4.3: optional
/// and list parameters never block), so only steps with one run that check.
#[test]
fn only_required_and_fixed_list_parameters_can_block_a_step() {
    let run = run_of(
        "name: W\nevents: [{name: A}]\nsteps:\n  - {name: req, params: [{name: a, kind: required, types: [A]}]}\n  - {name: fixed, params: [{name: a, kind: fixed_list, size: 2, types: [A]}]}\n  - {name: lists, params: [{name: a, kind: list, types: [A]}, {name: b, kind: optional, types: [A]}]}\n  - {name: mixed, params: [{name: a, kind: list, types: [A]}, {name: b, kind: required, types: [A]}]}\n",
    );
    let blocks: Vec<bool> = (0..4).map(|s| run.spec().can_block(s)).collect();
    assert_eq!(blocks, [true, true, false, true]);
}

/// The scan filter only pays if ids of one run land on different bits: counter ids
/// (differing in their last bytes) and derived ids (differing everywhere) both spread.
#[test]
fn id_fingerprints_spread_counter_and_derived_ids_over_the_bits() {
    let distinct = |ids: Vec<EventId>| {
        let mut seen = std::collections::HashSet::new();
        for id in &ids {
            seen.insert(id_bit(id));
        }
        seen.len()
    };
    let counters = distinct((1..=32).map(counter_event_id).collect());
    let key = run_key("run-1");
    let derived = distinct(
        (0..32)
            .map(|x| derived_event_id(key, ExecutionId(x), 0))
            .collect(),
    );
    // 32 ids over 128 bits: a uniform spread leaves about 28 distinct.
    assert!(counters >= 24, "counter ids on {counters} bits");
    assert!(derived >= 24, "derived ids on {derived} bits");
}

#[test]
fn started_executions_are_taken_one_at_a_time_in_start_order() {
    let spec = crate::compile_spec_text(
        "name: W\nevents: [{name: A}]\nsteps:\n  - {name: one, params: [{name: s, kind: required, types: [StartEvent]}]}\n  - {name: two, params: [{name: s, kind: required, types: [StartEvent]}]}\n  - {name: three, params: [{name: a, kind: required, types: [A]}]}\n",
        crate::SpecSyntax::Yaml,
    )
    .expect("spec");
    let start = spec.type_id("StartEvent").expect("StartEvent");
    let a = spec.type_id("A").expect("A");
    let mut run = Run::new(Arc::new(spec), 1);
    run.append(
        NewEvent::known(counter_event_id(1), start),
        &mut DeclaredConditions,
    )
    .expect("start");
    assert_eq!(run.next_started(), Some(ExecutionId(0)));
    // The rest at once, as before: the same order.
    run.append(
        NewEvent::known(counter_event_id(2), a),
        &mut DeclaredConditions,
    )
    .expect("A");
    assert_eq!(run.take_started(), vec![ExecutionId(1), ExecutionId(2)]);
    assert_eq!(run.next_started(), None, "each is taken once");
}

/// `memory_bytes` counts what grows with the events (log, records), which
/// `state_bytes` leaves out.
/// A failed execution's message is kept (cut at `MAX_ERROR_MESSAGE` on a character
/// boundary) beside the execution table, read by id; others have none, and a reset
/// run forgets it. The execution table's entry stays 20 bytes.
#[test]
fn a_failed_executions_error_is_read_by_id_cut_and_forgotten_on_reset() {
    assert!(std::mem::size_of::<Execution>() <= 20);
    let mut run = run_of(
        "name: W\nevents: [{name: A}]\nsteps:\n  - {name: s, stop_on_error: false, params: [{name: x, kind: required, types: [StartEvent]}], outputs: [A]}\n  - {name: t, stop_on_error: false, params: [{name: x, kind: required, types: [StartEvent]}], outputs: [A]}\n",
    );
    send(&mut run, 1, "StartEvent");
    let started = run.take_started();
    assert_eq!(started.len(), 2);
    let long = format!("{}é", "x".repeat(MAX_ERROR_MESSAGE - 1));
    run.complete(
        started[0],
        1,
        Outcome::Failed(long.clone()),
        &mut DeclaredConditions,
    )
    .expect("failed");
    run.complete(
        started[1],
        1,
        Outcome::Returned(Vec::new()),
        &mut DeclaredConditions,
    )
    .expect("completed");
    assert_eq!(
        run.execution_error(started[0]),
        Some(&long[..MAX_ERROR_MESSAGE - 1])
    );
    assert_eq!(run.execution_error(started[1]), None);
    assert_eq!(run.execution_error(ExecutionId(9)), None);
    assert!(run.memory_bytes() > MAX_ERROR_MESSAGE);
    run.reset(4);
    assert_eq!(run.execution_error(started[0]), None);
}

#[test]
fn memory_bytes_counts_the_log_and_the_records() {
    let spec = crate::compile_spec_text(
        "name: W\nevents: [{name: Note, parents: [DisplayEvent]}]\nsteps: []\n",
        crate::SpecSyntax::Yaml,
    )
    .expect("spec");
    let note = spec.type_id("Note").expect("Note");
    let mut run = Run::new(Arc::new(spec), 1);
    for n in 0..100 {
        run.append(
            NewEvent::known(counter_event_id(n), note),
            &mut DeclaredConditions,
        )
        .expect("display events are logged");
    }
    let at_least = std::mem::size_of::<Run>()
        + run.state_bytes()
        + std::mem::size_of_val(run.log())
        + run.records().len() * std::mem::size_of::<Packed>();
    assert!(run.log().len() == 100 && run.records().len() == 100);
    assert!(
        run.memory_bytes() >= at_least,
        "{} < {at_least}",
        run.memory_bytes()
    );
}

/// What `handle_decides_as_the_specific_entry_points` has each execution return: `s0` fans
/// out two `A`s, every other `s1` fails, the rest return their next event.
fn outcome_for(run: &Run, x: ExecutionId, n: u32) -> Outcome {
    let step = run.execution(x).expect("exec").step;
    let t = |ty: &str| run.spec().type_id(ty).expect("type");
    let id = |i| derived_event_id(run.run_key(), x, i);
    match run.spec().steps[step as usize].name.as_str() {
        "s0" => Outcome::Returned(vec![
            NewEvent::known(id(0), t("A")),
            NewEvent::known(id(1), t("A")),
        ]),
        "s1" if n.is_multiple_of(2) => Outcome::Failed("boom".into()),
        "s1" => Outcome::Returned(vec![NewEvent::known(id(0), t("B"))]),
        _ => Outcome::Returned(vec![NewEvent::known(id(0), t("Done"))]),
    }
}

#[test]
fn handle_decides_as_the_specific_entry_points() {
    let yaml = "name: W\nevents: [{name: A}, {name: B}, {name: Done, parents: [StopEvent]}]\nsteps:\n  - {name: s0, params: [{name: x, kind: required, types: [StartEvent]}], outputs: [A]}\n  - {name: s1, params: [{name: x, kind: required, types: [A]}], outputs: [B], stop_on_error: false}\n  - {name: s2, params: [{name: x, kind: required, types: [B]}], outputs: [Done]}\n";
    // `direct` goes through append/complete/retry, `handled` through `handle`.
    let (mut direct, mut handled) = (run_of(yaml), run_of(yaml));
    let pre = &mut DeclaredConditions;
    let a = handled.spec().type_id("A").expect("type");
    let early = NewEvent::known(counter_event_id(9), a);
    assert!(matches!(
        run_of(yaml).handle(RunInput::Append(early), pre),
        Err(InputError::Append(AppendError::RunNotStarted { .. }))
    ));
    let start = NewEvent::known(
        counter_event_id(1),
        direct.spec().type_id("StartEvent").expect("type"),
    );
    direct.append(start.clone(), pre).expect("appended");
    assert!(matches!(
        handled.handle(RunInput::Append(start), pre),
        Ok(Handled::Appended(Appended::Dispatched { started: 1, .. }))
    ));
    let mut n: u32 = 0;
    while let Some(x) = direct.next_started() {
        assert_eq!(handled.next_started(), Some(x));
        n += 1;
        let mut attempt = 1;
        if n.is_multiple_of(3) {
            attempt = direct.retry(x).expect("retried");
            assert_eq!(
                handled.handle(RunInput::Retry { execution: x }, pre),
                Ok(Handled::Retried { attempt })
            );
        }
        let outcome = outcome_for(&direct, x, n);
        direct
            .complete(x, attempt, outcome.clone(), pre)
            .expect("completed");
        let input = RunInput::Complete {
            execution: x,
            attempt,
            outcome,
        };
        match handled.handle(input, pre) {
            Ok(Handled::Completed { spare }) => assert!(spare.is_empty()),
            other => panic!("completion {n}: {other:?}"),
        }
    }
    assert!(n >= 4 && direct.is_terminated(), "{n} executions");
    assert_eq!(handled.next_started(), None);
    let records = |r: &Run| format!("{:?}", r.records().iter().collect::<Vec<_>>());
    assert_eq!(records(&direct), records(&handled));
    assert_eq!(direct.log(), handled.log());
    assert_eq!(
        format!("{:?}", direct.executions()),
        format!("{:?}", handled.executions())
    );
    // A completion of a finished execution is refused as by `complete`.
    let again = RunInput::Complete {
        execution: ExecutionId(0),
        attempt: 1,
        outcome: Outcome::Returned(Vec::new()),
    };
    assert_eq!(
        handled.handle(again, pre),
        Err(InputError::Complete(CompleteError::AlreadyFinished(
            ExecutionId(0)
        )))
    );
}
