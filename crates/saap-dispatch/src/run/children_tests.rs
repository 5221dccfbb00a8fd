//! Delegation in the core (DESIGN §8): children requested by a completed execution, awaited
//! or detached, their ends delivered as arrivals, abandoned when the run ends first,
//! replayed from the journal.

use super::children::ChildError;
use super::input::{Handled, InputError, RunInput};
use super::progress::Progress;
use super::*;
use crate::ids::{counter_event_id, derived_event_id};
use crate::replay::{History, replay};

/// `StartEvent → ask` (returns a request to another agent), `decide(response | exception)
/// → Done` (stop).
const DELEGATING: &str = "name: Boss\nevents: [{name: Done, parents: [StopEvent]}, {name: RunCancelledEvent, parents: [ExceptionEvent]}]\nsteps:\n  - {name: ask, params: [{name: s, kind: required, types: [StartEvent]}], outputs: [AgentInTheLoopRequestEvent]}\n  - {name: decide, params: [{name: a, kind: required, types: [AgentInTheLoopResponseEvent, AgentInTheLoopExceptionEvent]}], outputs: [Done]}\n";

struct Driven {
    run: Run,
    inputs: Vec<RunInput>,
}

impl Driven {
    fn ty(&self, name: &str) -> TypeId {
        self.run.spec().type_id(name).expect("type")
    }
    fn input(&mut self, input: RunInput) -> Result<Handled, InputError> {
        self.inputs.push(input.clone());
        self.run.handle(input, &mut DeclaredConditions)
    }
    /// Starts the run and completes `ask`, which returns one request per entry of
    /// `detached` and delegates each (detached or awaited as given).
    fn asked(detached: &[bool]) -> (Driven, ExecutionId) {
        Driven::asked_by(DELEGATING, detached)
    }
    /// [`Driven::asked`] with workflow `spec`.
    fn asked_by(spec: &str, detached: &[bool]) -> (Driven, ExecutionId) {
        Driven::asked_with(spec, detached, None)
    }
    /// [`Driven::asked_by`], each awaited child with a deadline due at `deadline_ns`.
    fn asked_with(
        spec: &str,
        detached: &[bool],
        deadline_ns: Option<u64>,
    ) -> (Driven, ExecutionId) {
        let spec = crate::compile_spec_text(spec, crate::SpecSyntax::Yaml).expect("spec");
        let mut d = Driven {
            run: Run::new(Arc::new(spec), 7),
            inputs: Vec::new(),
        };
        let start = NewEvent::known(counter_event_id(1), d.ty("StartEvent"));
        d.input(RunInput::Append(start)).expect("start");
        let x = d.run.next_started().expect("ask started");
        let requests: Vec<NewEvent> = (0..detached.len() as u32)
            .map(|i| {
                NewEvent::known(
                    derived_event_id(7, x, i),
                    d.ty("AgentInTheLoopRequestEvent"),
                )
            })
            .collect();
        d.input(RunInput::Complete {
            execution: x,
            attempt: 1,
            outcome: Outcome::Returned(requests.clone()),
        })
        .expect("completed");
        let children = requests
            .iter()
            .zip(detached)
            .enumerate()
            .map(|(i, (r, detached))| ChildRequest {
                request: r.id,
                detached: *detached,
                deadline: deadline_ns.map(|due_ns| TimerRequest {
                    event: NewEvent::known(
                        counter_event_id(900 + i as u64),
                        d.ty("AgentInTheLoopExceptionEvent"),
                    ),
                    due_ns,
                }),
            })
            .collect();
        let added = d.input(RunInput::Delegate {
            execution: x,
            children,
        });
        assert_eq!(
            added,
            Ok(Handled::Delegated {
                children: detached.len() as u32
            })
        );
        (d, x)
    }
    fn ended(&mut self, child: u32, n: u64, ty: &str) -> Result<Handled, InputError> {
        let event = NewEvent::known(counter_event_id(n), self.ty(ty));
        self.input(RunInput::ChildEnded { child, event })
    }
    fn records(&self) -> Vec<Record> {
        self.run.records().to_vec()
    }
    /// The journal replays to the same records.
    fn replays(&self) {
        let recorded = self.records();
        let spec = self.run.spec_arc().clone();
        let again = replay(spec.clone(), 7, None, &self.inputs, &recorded).expect("replays");
        assert_eq!(again.children(), self.run.children());
        // Through a history file (what `explain --history` reads).
        let history = History::new(&self.run, &self.inputs);
        let text = serde_json::to_string(&history).expect("json");
        let back: History = serde_json::from_str(&text).expect("parses");
        assert_eq!(back.journal(&spec).expect("journal"), self.inputs);
    }
}

#[test]
fn an_awaited_child_keeps_the_run_waiting_until_its_end_is_delivered() {
    let (mut d, ask) = Driven::asked(&[false]);
    assert!(d.records().contains(&Record::ChildRequested {
        child: 0,
        execution: ask
    }));
    assert_eq!(
        d.run.progress(),
        Progress::Waiting {
            timer: None,
            children: 1,
            unmet: 0,
            budget: false
        }
    );
    assert_eq!(d.run.progress().as_str(), "waiting_children");
    let handled = d.ended(0, 50, "AgentInTheLoopResponseEvent");
    assert!(matches!(
        handled,
        Ok(Handled::Appended(Appended::Dispatched { started: 1, .. }))
    ));
    assert!(d.records().contains(&Record::ChildEnded { child: 0 }));
    assert!(matches!(
        d.run.children()[0].state,
        ChildState::Ended { seq: Some(_) }
    ));
    assert_eq!(d.run.progress(), Progress::Running { executions: 1 });
    d.replays();
}

#[test]
fn a_child_end_no_step_takes_is_an_unmet_obligation_not_a_silent_stall() {
    // `decide` takes only the child's answer: its failure reaches no step.
    let answer_only = DELEGATING.replace(
        "types: [AgentInTheLoopResponseEvent, AgentInTheLoopExceptionEvent]",
        "types: [AgentInTheLoopResponseEvent]",
    );
    let (mut d, _) = Driven::asked_by(&answer_only, &[false]);
    let handled = d.ended(0, 50, "AgentInTheLoopExceptionEvent");
    assert!(matches!(
        handled,
        Ok(Handled::Appended(Appended::Dispatched { started: 0, .. }))
    ));
    assert!(d.records().contains(&Record::ObligationUnmet { child: 0 }));
    assert!(matches!(
        d.run.children()[0].state,
        ChildState::Unmet { .. }
    ));
    assert_eq!(
        d.run.progress(),
        Progress::Waiting {
            timer: None,
            children: 0,
            unmet: 1,
            budget: false
        }
    );
    assert_eq!(d.run.progress().as_str(), "waiting_unmet");
    // A second end of the same child is refused as before.
    assert!(matches!(
        d.ended(0, 51, "AgentInTheLoopResponseEvent"),
        Err(InputError::Child(ChildError::AlreadyEnded { child: 0 }))
    ));
    // A refused input is not the journal's.
    d.inputs.pop();
    d.replays();

    // The answer it takes is no obligation left unmet, even when it starts nothing yet.
    let (mut d, _) = Driven::asked_by(&answer_only, &[false]);
    d.ended(0, 50, "AgentInTheLoopResponseEvent")
        .expect("ended");
    assert!(!d.records().contains(&Record::ObligationUnmet { child: 0 }));
    assert_eq!(d.run.unmet_obligation_count(), 0);
}

#[test]
fn a_child_deadline_is_dropped_by_its_end_and_takes_its_place_when_first() {
    // The end first: the deadline is dropped, nothing is left pending.
    let (mut d, _) = Driven::asked_with(DELEGATING, &[false], Some(1_000));
    assert_eq!(d.run.next_due(), Some(1_000));
    assert_eq!(d.run.progress().as_str(), "waiting_children");
    d.ended(0, 50, "AgentInTheLoopResponseEvent")
        .expect("ended");
    assert!(d.records().contains(&Record::TimerDropped { timer: 0 }));
    assert_eq!(d.run.next_due(), None);
    d.input(RunInput::Clock { now_ns: 2_000 }).expect("clock");
    assert!(!d.records().contains(&Record::ChildTimedOut { child: 0 }));
    d.replays();

    // The deadline first: its event takes the end's place and the child is given up.
    let (mut d, _) = Driven::asked_with(DELEGATING, &[false], Some(1_000));
    d.input(RunInput::Clock { now_ns: 999 }).expect("clock");
    assert_eq!(d.run.progress().as_str(), "waiting_children");
    let fired = d.input(RunInput::Clock { now_ns: 1_000 });
    assert_eq!(fired, Ok(Handled::Fired { timers: 1 }));
    assert!(d.records().contains(&Record::ChildTimedOut { child: 0 }));
    assert!(matches!(
        d.run.children()[0].state,
        ChildState::TimedOut { seq: Some(_) }
    ));
    let timed_out = d
        .run
        .children()
        .iter()
        .filter(|c| matches!(c.state, ChildState::TimedOut { .. }));
    assert_eq!(timed_out.count(), 1);
    // `decide` took the deadline's event.
    assert_eq!(d.run.progress(), Progress::Running { executions: 1 });
    // The child's late end is refused: the run has what took its place.
    assert_eq!(
        d.ended(0, 51, "AgentInTheLoopResponseEvent"),
        Err(InputError::Child(ChildError::TimedOut { child: 0 }))
    );
    d.inputs.pop();
    d.replays();

    // A detached child has no deadline to keep.
    let (d, _) = Driven::asked_with(DELEGATING, &[true], Some(1_000));
    assert_eq!(d.run.next_due(), None);
}

#[test]
fn a_detached_child_neither_keeps_the_run_waiting_nor_reports_to_it() {
    let (mut d, _) = Driven::asked(&[true]);
    assert_eq!(d.run.children()[0].state, ChildState::Detached);
    assert_eq!(d.run.progress().as_str(), "waiting_event");
    assert_eq!(
        d.ended(0, 50, "AgentInTheLoopResponseEvent"),
        Err(InputError::Child(ChildError::Detached { child: 0 }))
    );
}

#[test]
fn a_second_end_of_a_child_is_refused() {
    let (mut d, _) = Driven::asked(&[false]);
    d.ended(0, 50, "AgentInTheLoopExceptionEvent")
        .expect("first end");
    assert_eq!(
        d.ended(0, 51, "AgentInTheLoopResponseEvent"),
        Err(InputError::Child(ChildError::AlreadyEnded { child: 0 }))
    );
    assert_eq!(
        d.ended(3, 52, "AgentInTheLoopResponseEvent"),
        Err(InputError::Child(ChildError::UnknownChild { child: 3 }))
    );
}

#[test]
fn awaited_children_are_abandoned_when_the_run_ends_first_and_a_late_end_is_evidence() {
    let (mut d, _) = Driven::asked(&[false, true]);
    // The run is cancelled (an exception from outside ends it).
    let cancel = NewEvent::known(counter_event_id(60), d.ty("ExceptionEvent"));
    d.input(RunInput::Append(cancel)).expect("ended");
    assert!(d.records().contains(&Record::ChildAbandoned { child: 0 }));
    assert!(!d.records().contains(&Record::ChildAbandoned { child: 1 }));
    assert_eq!(d.run.children()[0].state, ChildState::Abandoned);
    assert_eq!(d.run.children()[1].state, ChildState::Detached);
    assert!(matches!(
        d.ended(0, 61, "AgentInTheLoopResponseEvent"),
        Ok(Handled::Appended(Appended::AfterStop { .. }))
    ));
    d.replays();
}

#[test]
fn a_cancelled_run_abandons_its_detached_children_too() {
    let (mut d, _) = Driven::asked(&[false, true]);
    let cancel = NewEvent::known(counter_event_id(60), d.ty("RunCancelledEvent"));
    d.input(RunInput::Append(cancel)).expect("cancelled");
    assert_eq!(d.run.progress(), Progress::Cancelled);
    assert!(d.records().contains(&Record::ChildAbandoned { child: 0 }));
    assert!(d.records().contains(&Record::ChildAbandoned { child: 1 }));
    assert_eq!(d.run.children()[1].state, ChildState::Abandoned);
    d.replays();
}

#[test]
fn a_delegation_names_a_request_in_the_log_of_a_completed_execution() {
    let (mut d, ask) = Driven::asked(&[]);
    let stray = counter_event_id(99);
    assert_eq!(
        d.input(RunInput::Delegate {
            execution: ask,
            children: vec![ChildRequest {
                request: stray,
                detached: false,
                deadline: None,
            }],
        }),
        Err(InputError::Child(ChildError::UnknownRequest {
            execution: ask,
            request: stray
        }))
    );
    assert!(matches!(
        d.input(RunInput::Delegate {
            execution: ExecutionId(40),
            children: Vec::new(),
        }),
        Err(InputError::Child(ChildError::Complete(
            CompleteError::UnknownExecution(_)
        )))
    ));
}
