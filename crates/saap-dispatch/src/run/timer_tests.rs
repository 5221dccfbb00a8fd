//! Durable timers in the core (DESIGN §8): set by a completed execution, fired by a clock
//! reading, dropped with the run, replayed from the journal.

use super::input::{Handled, InputError, RunInput};
use super::timers::{TimerError, TimerRequest, TimerState};
use super::*;
use crate::ids::{counter_event_id, derived_event_id};
use crate::replay::{History, replay};

/// `StartEvent → ask` (returns `Asked` now and `TimedOut` later), `decide(Answer | TimedOut)
/// → Done` (stop): an approval with a deadline.
const APPROVAL: &str = "name: Approval\nevents: [{name: Asked}, {name: Answer}, {name: TimedOut}, {name: Done, parents: [StopEvent]}]\nsteps:\n  - {name: ask, params: [{name: s, kind: required, types: [StartEvent]}], outputs: [Asked, TimedOut]}\n  - {name: decide, params: [{name: a, kind: required, types: [Answer, TimedOut]}], outputs: [Done]}\n";

struct Driven {
    run: Run,
    inputs: Vec<RunInput>,
}

impl Driven {
    fn new() -> Driven {
        let spec = crate::compile_spec_text(APPROVAL, crate::SpecSyntax::Yaml).expect("spec");
        Driven {
            run: Run::new(Arc::new(spec), 11),
            inputs: Vec::new(),
        }
    }
    fn ty(&self, name: &str) -> TypeId {
        self.run.spec().type_id(name).expect("type")
    }
    fn input(&mut self, input: RunInput) -> Result<Handled, InputError> {
        self.inputs.push(input.clone());
        self.run.handle(input, &mut DeclaredConditions)
    }
    fn send(&mut self, n: u64, ty: &str) {
        let e = NewEvent::known(counter_event_id(n), self.ty(ty));
        self.input(RunInput::Append(e)).expect("appended");
    }
    /// Starts the run and completes `ask`, which returns `Asked` and sets one `TimedOut`
    /// timer per due time.
    fn asked(due: &[u64]) -> (Driven, ExecutionId) {
        let mut d = Driven::new();
        d.send(1, "StartEvent");
        let x = d.run.next_started().expect("ask started");
        let asked = NewEvent::known(derived_event_id(11, x, 0), d.ty("Asked"));
        d.input(RunInput::Complete {
            execution: x,
            attempt: 1,
            outcome: Outcome::Returned(vec![asked]),
        })
        .expect("completed");
        let timers = due
            .iter()
            .enumerate()
            .map(|(i, due_ns)| TimerRequest {
                event: NewEvent::known(derived_event_id(11, x, 1 + i as u32), d.ty("TimedOut")),
                due_ns: *due_ns,
            })
            .collect();
        let set = d.input(RunInput::Schedule {
            execution: x,
            timers,
        });
        assert_eq!(
            set,
            Ok(Handled::Scheduled {
                timers: due.len() as u32
            })
        );
        (d, x)
    }
    fn records(&self) -> Vec<Record> {
        self.run.records().to_vec()
    }
}

#[test]
fn a_timer_fires_when_the_clock_reaches_its_due_time() {
    let (mut d, ask) = Driven::asked(&[1_000]);
    assert_eq!(d.run.next_due(), Some(1_000));
    assert!(d.records().contains(&Record::TimerSet {
        timer: 0,
        execution: ask
    }));
    // Before its due time a clock reading fires nothing and records nothing.
    let before = d.records().len();
    assert_eq!(
        d.input(RunInput::Clock { now_ns: 999 }),
        Ok(Handled::Fired { timers: 0 })
    );
    assert_eq!(d.records().len(), before);
    assert_eq!(
        d.input(RunInput::Clock { now_ns: 1_000 }),
        Ok(Handled::Fired { timers: 1 })
    );
    let fired = &d.records()[before..];
    assert_eq!(fired[0], Record::TimerFired { timer: 0 });
    // The event is the setting execution's output, appended and dispatched like one.
    let seq = d.run.log().len() as Seq - 1;
    assert_eq!(
        fired[1],
        Record::EventAppended {
            seq,
            origin: Origin::Execution(ask)
        }
    );
    assert_eq!(d.run.log()[seq as usize].id, derived_event_id(11, ask, 1));
    let decide = d.run.next_started().expect("decide started by the timeout");
    assert_eq!(d.run.execution(decide).expect("exec").trigger, seq);
    assert_eq!(
        d.run.timers()[0].state,
        TimerState::Fired { seq: Some(seq) }
    );
    assert_eq!(d.run.next_due(), None);
}

#[test]
fn timers_die_with_the_run() {
    let (mut d, _) = Driven::asked(&[5_000]);
    // The answer comes first; `decide` stops the run.
    d.send(2, "Answer");
    let decide = d.run.next_started().expect("decide");
    let done = NewEvent::known(derived_event_id(11, decide, 0), d.ty("Done"));
    d.input(RunInput::Complete {
        execution: decide,
        attempt: 1,
        outcome: Outcome::Returned(vec![done]),
    })
    .expect("completed");
    assert!(d.run.is_terminated());
    assert_eq!(d.records().last(), Some(&Record::TimerDropped { timer: 0 }));
    assert_eq!(d.run.timers()[0].state, TimerState::Dropped);
    assert_eq!(d.run.next_due(), None);
    let before = d.records().len();
    assert_eq!(
        d.input(RunInput::Clock { now_ns: 9_000 }),
        Ok(Handled::Fired { timers: 0 })
    );
    assert_eq!(d.records().len(), before, "a dropped timer never fires");
}

#[test]
fn due_timers_fire_in_order_of_due_time_then_of_setting() {
    let (mut d, _) = Driven::asked(&[300, 100, 100]);
    assert_eq!(d.run.next_due(), Some(100));
    d.input(RunInput::Clock { now_ns: 250 }).expect("clock");
    let fired: Vec<u32> = d
        .records()
        .iter()
        .filter_map(|r| match r {
            Record::TimerFired { timer } => Some(*timer),
            _ => None,
        })
        .collect();
    assert_eq!(fired, [1, 2], "both due at 100, in the order they were set");
    assert_eq!(d.run.next_due(), Some(300));
}

#[test]
fn a_timer_set_on_an_ended_run_is_dropped_at_once() {
    let mut d = Driven::new();
    d.send(1, "StartEvent");
    let ask = d.run.next_started().expect("ask");
    // The run ends from outside while `ask` runs.
    d.send(2, "Done");
    d.input(RunInput::Complete {
        execution: ask,
        attempt: 1,
        outcome: Outcome::Returned(Vec::new()),
    })
    .expect("late completion kept");
    let timeout = NewEvent::known(derived_event_id(11, ask, 0), d.ty("TimedOut"));
    d.input(RunInput::Schedule {
        execution: ask,
        timers: vec![TimerRequest {
            event: timeout,
            due_ns: 10,
        }],
    })
    .expect("scheduled");
    let n = d.records().len();
    assert_eq!(
        d.records()[n - 2..],
        [
            Record::TimerSet {
                timer: 0,
                execution: ask
            },
            Record::TimerDropped { timer: 0 }
        ]
    );
    assert_eq!(d.run.next_due(), None);
}

#[test]
fn only_a_completed_execution_sets_timers() {
    let mut d = Driven::new();
    d.send(1, "StartEvent");
    let ask = d.run.next_started().expect("ask");
    let timeout = NewEvent::known(derived_event_id(11, ask, 0), d.ty("TimedOut"));
    let request = |event: NewEvent| RunInput::Schedule {
        execution: ask,
        timers: vec![TimerRequest { event, due_ns: 10 }],
    };
    assert_eq!(
        d.input(request(timeout.clone())),
        Err(InputError::Timer(TimerError::NotCompleted {
            execution: ask
        }))
    );
    assert!(matches!(
        d.run.handle(
            RunInput::Schedule {
                execution: ExecutionId(99),
                timers: Vec::new()
            },
            &mut DeclaredConditions
        ),
        Err(InputError::Timer(TimerError::Complete(
            CompleteError::UnknownExecution(_)
        )))
    ));
    assert!(d.run.timers().is_empty());
}

#[test]
fn a_timer_whose_event_is_already_logged_fires_as_a_duplicate() {
    let (mut d, ask) = Driven::asked(&[10]);
    // The same id arrives from outside first (e.g. a re-published event).
    let id = derived_event_id(11, ask, 1);
    d.input(RunInput::Append(NewEvent::known(id, d.ty("TimedOut"))))
        .expect("appended");
    d.input(RunInput::Clock { now_ns: 10 }).expect("clock");
    assert!(matches!(
        d.records().last(),
        Some(Record::DuplicateEvent { .. })
    ));
    assert_eq!(d.run.timers()[0].state, TimerState::Fired { seq: None });
}

#[test]
fn a_run_with_timers_replays_from_its_journal_and_its_history() {
    let (mut d, _) = Driven::asked(&[100, 200]);
    d.input(RunInput::Clock { now_ns: 150 }).expect("clock");
    let decide = d.run.next_started().expect("decide");
    let done = NewEvent::known(derived_event_id(11, decide, 0), d.ty("Done"));
    d.input(RunInput::Complete {
        execution: decide,
        attempt: 1,
        outcome: Outcome::Returned(vec![done]),
    })
    .expect("completed");
    let recorded = d.records();
    let spec = d.run.spec_arc().clone();
    let again = replay(spec.clone(), 11, None, &d.inputs, &recorded).expect("replays");
    assert_eq!(again.timers(), d.run.timers());
    // Through a history file (what `explain --history` reads).
    let history = History::new(&d.run, &d.inputs);
    let text = serde_json::to_string(&history).expect("json");
    let back: History = serde_json::from_str(&text).expect("parses");
    let inputs = back.journal(&spec).expect("journal");
    assert_eq!(inputs, d.inputs);
    replay(spec, 11, None, &inputs, &back.records).expect("replays from the history");
}

#[test]
fn a_run_that_only_waits_for_a_timer_allocates_no_rare_tables() {
    let (d, _) = Driven::asked(&[1_000]);
    assert_eq!(d.run.timers().len(), 1);
    assert!(d.run.waits.is_some());
    // Its timer lives with what it waits on, not in the larger rare tables.
    assert!(d.run.rare.is_none(), "{:?}", d.run.rare);
    assert!(std::mem::size_of::<Waits>() < std::mem::size_of::<Rare>() / 3);
}
