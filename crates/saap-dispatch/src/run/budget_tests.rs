//! Run budgets in the core (DESIGN §8): granted by an input, spent by executions or by a
//! clock reading, holding what starts past them without changing a decision, released by a
//! later grant, replayed from the journal.

use super::budget::{BudgetError, BudgetGrant};
use super::input::{Handled, InputError, RunInput};
use super::progress::Progress;
use super::*;
use crate::ids::{counter_event_id, derived_event_id};
use crate::record::BudgetLimit;
use crate::replay::{History, replay};

/// `StartEvent → s0 → A → s1 → B → s2 → C → s3 → Done` (stop): a chain of four steps.
const CHAIN: &str = "name: Chain\nevents: [{name: A}, {name: B}, {name: C}, {name: Done, parents: [StopEvent]}]\nsteps:\n  - {name: s0, params: [{name: s, kind: required, types: [StartEvent]}], outputs: [A]}\n  - {name: s1, params: [{name: a, kind: required, types: [A]}], outputs: [B]}\n  - {name: s2, params: [{name: b, kind: required, types: [B]}], outputs: [C]}\n  - {name: s3, params: [{name: c, kind: required, types: [C]}], outputs: [Done]}\n";

const KEY: u64 = 21;

struct Driven {
    run: Run,
    inputs: Vec<RunInput>,
}

impl Driven {
    fn new() -> Driven {
        let spec = crate::compile_spec_text(CHAIN, crate::SpecSyntax::Yaml).expect("spec");
        Driven {
            run: Run::new(Arc::new(spec), KEY),
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
    fn grant(&mut self, executions: Option<u32>, wall_ns: Option<u64>, now_ns: u64) -> u32 {
        match self.input(RunInput::Budget(BudgetGrant {
            executions,
            wall_ns,
            now_ns,
            ..BudgetGrant::default()
        })) {
            Ok(Handled::Granted { released }) => released,
            other => panic!("not granted: {other:?}"),
        }
    }
    fn start(&mut self) {
        let e = NewEvent::known(counter_event_id(1), self.ty("StartEvent"));
        self.input(RunInput::Append(e)).expect("started");
    }
    /// Completes execution `x` with the one event its step returns.
    fn complete(&mut self, x: ExecutionId) {
        let step = self.run.execution(x).expect("execution").step;
        let out = ["A", "B", "C", "Done"][step as usize];
        let e = NewEvent::known(derived_event_id(KEY, x, 0), self.ty(out));
        self.input(RunInput::Complete {
            execution: x,
            attempt: 1,
            outcome: Outcome::Returned(vec![e]),
        })
        .expect("completed");
    }
    /// Completes whatever the engine is handed, until nothing is: the executions that ran.
    fn run_released(&mut self) -> Vec<ExecutionId> {
        let mut ran = Vec::new();
        while let Some(x) = self.run.next_started() {
            self.complete(x);
            ran.push(x);
        }
        ran
    }
    fn spent(&self) -> Vec<Record> {
        self.run
            .records()
            .iter()
            .filter(|r| matches!(r, Record::BudgetSpent { .. }))
            .collect()
    }
}

#[test]
fn an_executions_budget_holds_what_starts_past_it_until_a_grant_releases_it() {
    let mut d = Driven::new();
    assert_eq!(d.grant(Some(2), None, 0), 0);
    d.start();
    assert_eq!(d.run_released(), vec![ExecutionId(0), ExecutionId(1)]);
    // s2 was decided and started, and is held: not handed out, not running.
    assert_eq!(d.run.executions().len(), 3);
    assert_eq!(d.run.held().collect::<Vec<_>>(), vec![ExecutionId(2)]);
    assert!(d.run.is_held(ExecutionId(2)));
    assert_eq!(d.run.running().count(), 0);
    assert_eq!(
        d.spent(),
        vec![Record::BudgetSpent {
            limit: BudgetLimit::Executions { max: 2 },
            held_from: ExecutionId(2),
        }]
    );
    let p = d.run.progress();
    assert!(matches!(p, Progress::Waiting { budget: true, .. }), "{p:?}");
    assert_eq!(p.as_str(), "waiting_budget");

    // One more: s2 runs, s3 is held in turn.
    assert_eq!(d.grant(Some(1), None, 5), 1);
    assert_eq!(
        d.run
            .records()
            .iter()
            .rev()
            .find(|r| matches!(r, Record::BudgetGranted { .. })),
        Some(Record::BudgetGranted {
            max_executions: Some(3),
            until_ns: None,
            max_tokens: None,
            max_cost_micros: None,
        })
    );
    assert_eq!(d.run_released(), vec![ExecutionId(2)]);
    assert_eq!(d.run.held().collect::<Vec<_>>(), vec![ExecutionId(3)]);
    assert_eq!(d.spent().len(), 2);

    // Enough for the rest: the run stops.
    assert_eq!(d.grant(Some(10), None, 9), 1);
    assert_eq!(d.run_released(), vec![ExecutionId(3)]);
    assert_eq!(d.run.progress(), Progress::Stopped);
}

#[test]
fn holding_an_execution_changes_no_decision() {
    // The same run with and without a budget of one execution at a time: once the budget
    // records are left out, the records are the same.
    let mut free = Driven::new();
    free.start();
    free.run_released();
    let mut held = Driven::new();
    held.grant(Some(1), None, 0);
    held.start();
    for t in 1..=4 {
        held.run_released();
        if !held.run.is_terminated() {
            held.grant(Some(1), None, t);
        }
    }
    assert!(held.run.is_terminated());
    let decisions = |d: &Driven| -> Vec<Record> {
        d.run
            .records()
            .iter()
            .filter(|r| !matches!(r, Record::BudgetGranted { .. } | Record::BudgetSpent { .. }))
            .collect()
    };
    assert_eq!(decisions(&held), decisions(&free));
    assert_eq!(held.spent().len(), 3);
}

#[test]
fn a_wall_time_budget_ends_at_a_clock_reading_and_holds_what_starts_after() {
    let mut d = Driven::new();
    d.grant(None, Some(100), 1_000);
    d.start();
    // The engine is asked to come back when the time ends.
    assert_eq!(d.run.next_due(), Some(1_100));
    let x0 = d.run.next_started().expect("s0");
    d.input(RunInput::Clock { now_ns: 1_099 }).expect("clock");
    assert!(d.spent().is_empty());
    d.input(RunInput::Clock { now_ns: 1_100 }).expect("clock");
    assert_eq!(
        d.spent(),
        vec![Record::BudgetSpent {
            limit: BudgetLimit::WallTime { until_ns: 1_100 },
            held_from: ExecutionId(1),
        }]
    );
    assert_eq!(d.run.next_due(), None, "a spent time is not due again");
    // s0 was running when the time ended: it completes; what it starts is held.
    assert_eq!(d.run.progress(), Progress::Running { executions: 1 });
    d.complete(x0);
    assert_eq!(d.run.next_started(), None);
    assert_eq!(d.run.held().collect::<Vec<_>>(), vec![ExecutionId(1)]);
    assert_eq!(d.run.progress().as_str(), "waiting_budget");

    // More time from the resume's clock reading: released, due again at its new end.
    assert_eq!(d.grant(None, Some(50), 2_000), 1);
    assert_eq!(d.run.next_due(), Some(2_050));
    assert_eq!(
        d.run_released(),
        vec![ExecutionId(1), ExecutionId(2), ExecutionId(3)]
    );
    assert_eq!(d.run.progress(), Progress::Stopped);
    assert_eq!(d.run.next_due(), None, "an ended run is not due");
}

#[test]
fn a_spent_wall_time_with_nothing_held_still_waits_for_a_resume() {
    let mut d = Driven::new();
    d.grant(None, Some(10), 0);
    d.start();
    let x0 = d.run.next_started().expect("s0");
    d.complete(x0);
    let x1 = d.run.next_started().expect("s1");
    d.input(RunInput::Clock { now_ns: 10 }).expect("clock");
    d.complete(x1);
    assert_eq!(d.run.progress().as_str(), "waiting_budget");
    assert!(d.run.budget_spent());
}

#[test]
fn a_held_execution_neither_completes_nor_retries() {
    let mut d = Driven::new();
    d.grant(Some(1), None, 0);
    d.start();
    d.run_released();
    let held = ExecutionId(1);
    assert!(d.run.is_held(held));
    let e = NewEvent::known(derived_event_id(KEY, held, 0), d.ty("B"));
    assert_eq!(
        d.run
            .complete(held, 1, Outcome::Returned(vec![e]), &mut DeclaredConditions),
        Err(CompleteError::Held(held))
    );
    assert_eq!(d.run.retry(held), Err(CompleteError::Held(held)));
}

#[test]
fn a_run_that_ends_while_executions_are_held_runs_none_of_them() {
    let mut d = Driven::new();
    d.grant(Some(1), None, 0);
    d.start();
    d.run_released();
    let done = NewEvent::known(counter_event_id(2), d.ty("Done"));
    d.input(RunInput::Append(done)).expect("stop sent");
    assert_eq!(d.run.progress(), Progress::Stopped);
    assert_eq!(d.run.next_started(), None);
    assert_eq!(d.run.running().count(), 0);
    assert_eq!(
        d.input(RunInput::Budget(BudgetGrant {
            executions: Some(1),
            now_ns: 1,
            ..BudgetGrant::default()
        })),
        Err(InputError::Budget(BudgetError::RunEnded))
    );
}

#[test]
fn a_grant_that_gives_nothing_is_refused() {
    let mut d = Driven::new();
    assert_eq!(
        d.input(RunInput::Budget(BudgetGrant::default())),
        Err(InputError::Budget(BudgetError::Empty))
    );
}

#[test]
fn a_budgeted_run_replays_from_its_journal_and_its_history() {
    let mut d = Driven::new();
    d.grant(Some(1), Some(1_000), 0);
    d.start();
    d.run_released();
    d.input(RunInput::Clock { now_ns: 1_000 }).expect("clock");
    d.grant(Some(1), Some(1_000), 2_000);
    d.run_released();
    let recorded = d.run.records().to_vec();
    let spec = d.run.spec_arc().clone();
    let again = replay(spec.clone(), KEY, None, &d.inputs, &recorded).expect("replays");
    assert_eq!(
        again.held().collect::<Vec<_>>(),
        d.run.held().collect::<Vec<_>>()
    );
    assert_eq!(again.budget(), d.run.budget());
    let history = History::new(&d.run, &d.inputs);
    let text = serde_json::to_string(&history).expect("history");
    assert!(text.contains("\"input\":\"budget\""), "{text}");
    let back: History = serde_json::from_str(&text).expect("reads back");
    assert_eq!(back, history);
    back.replay(spec).expect("replays from the history");
}

#[test]
fn a_recycled_run_forgets_its_budget() {
    let mut d = Driven::new();
    d.grant(Some(1), None, 0);
    d.start();
    d.run_released();
    d.run.reset(KEY + 1);
    assert_eq!(d.run.budget(), None);
    let e = NewEvent::known(counter_event_id(1), d.ty("StartEvent"));
    d.run.append(e, &mut DeclaredConditions).expect("started");
    d.run_released();
    assert_eq!(d.run.progress(), Progress::Stopped);
}

#[test]
fn a_token_budget_is_spent_by_what_a_completion_used_and_holds_what_it_starts() {
    let mut d = Driven::new();
    d.input(RunInput::Budget(BudgetGrant {
        tokens: Some(100),
        ..BudgetGrant::default()
    }))
    .expect("granted");
    d.start();
    // s0 used 60 tokens: under the budget, s1 runs.
    let x0 = d.run.next_started().expect("s0");
    d.input(RunInput::Usage {
        tokens: 60,
        cost_micros: 0,
    })
    .expect("used");
    d.complete(x0);
    let x1 = d.run.next_started().expect("s1 runs");
    // s1 used 50 more (110 of 100): what its completion starts is held.
    d.input(RunInput::Usage {
        tokens: 50,
        cost_micros: 0,
    })
    .expect("used");
    d.complete(x1);
    assert_eq!(d.run.next_started(), None);
    assert_eq!(d.run.held().collect::<Vec<_>>(), vec![ExecutionId(2)]);
    assert_eq!(
        d.spent(),
        vec![Record::BudgetSpent {
            limit: BudgetLimit::Tokens { max: 100 },
            held_from: ExecutionId(2),
        }]
    );
    assert_eq!(d.run.progress().as_str(), "waiting_budget");
    assert_eq!(d.run.budget().map(|b| b.tokens.used), Some(110));
    // 100 more tokens (a limit of 200, 110 used): released.
    let released = d.input(RunInput::Budget(BudgetGrant {
        tokens: Some(100),
        now_ns: 5,
        ..BudgetGrant::default()
    }));
    assert_eq!(released, Ok(Handled::Granted { released: 1 }));
    assert_eq!(d.run_released(), vec![ExecutionId(2), ExecutionId(3)]);
    assert_eq!(d.run.progress(), Progress::Stopped);
}

#[test]
fn a_cost_budget_is_spent_like_tokens_and_a_run_without_one_counts_nothing() {
    let mut d = Driven::new();
    d.input(RunInput::Budget(BudgetGrant {
        cost_micros: Some(250_000),
        ..BudgetGrant::default()
    }))
    .expect("granted");
    d.start();
    let x0 = d.run.next_started().expect("s0");
    d.input(RunInput::Usage {
        tokens: 10,
        cost_micros: 300_000,
    })
    .expect("used");
    d.complete(x0);
    assert_eq!(
        d.spent(),
        vec![Record::BudgetSpent {
            limit: BudgetLimit::Cost {
                max_micros: 250_000
            },
            held_from: ExecutionId(1),
        }]
    );
    assert_eq!(crate::render::cost_text(250_000), "0.25");
    assert_eq!(crate::render::cost_text(3_000_000), "3");
    // Without a budget: usage is taken and counted nowhere; nothing is held.
    let mut free = Driven::new();
    free.start();
    free.input(RunInput::Usage {
        tokens: 1_000_000,
        cost_micros: 1_000_000,
    })
    .expect("used");
    free.run_released();
    assert_eq!(free.run.progress(), Progress::Stopped);
    assert_eq!(free.run.budget(), None);
}

#[test]
fn a_resume_grants_each_spent_part_again_or_says_which_needs_an_amount() {
    use super::budget::{BudgetPart, ResumeRefused};
    let mut d = Driven::new();
    assert_eq!(
        d.run.resume_grant(BudgetGrant::default(), None),
        Err(ResumeRefused::NotSpent)
    );
    d.grant(Some(1), None, 0);
    d.start();
    d.run_released();
    // Executions spent: the first grant's 1 again; the time, never granted, stays as is.
    let g = d.run.resume_grant(
        BudgetGrant {
            now_ns: 7,
            ..BudgetGrant::default()
        },
        None,
    );
    assert_eq!(
        g,
        Ok(BudgetGrant {
            executions: Some(1),
            now_ns: 7,
            ..BudgetGrant::default()
        })
    );
    // Tokens granted by a resume, then used up: the first grant had none to give again.
    d.input(RunInput::Budget(BudgetGrant {
        executions: Some(5),
        tokens: Some(10),
        ..BudgetGrant::default()
    }))
    .expect("granted");
    let x = d.run.next_started().expect("s1");
    d.input(RunInput::Usage {
        tokens: 10,
        cost_micros: 0,
    })
    .expect("used");
    d.complete(x);
    assert_eq!(
        d.run.resume_grant(BudgetGrant::default(), None),
        Err(ResumeRefused::NoAmount(BudgetPart::Tokens))
    );
    assert!(
        d.run
            .resume_grant(
                BudgetGrant {
                    tokens: Some(5),
                    ..BudgetGrant::default()
                },
                None
            )
            .is_ok()
    );
}

#[test]
fn a_resume_asked_of_a_pause_someone_resumed_already_grants_nothing() {
    use super::budget::ResumeRefused;
    let mut d = Driven::new();
    d.grant(Some(1), None, 0);
    d.start();
    d.run_released();
    // Two people saw the run paused after its first grant and both resume it.
    let seen = d.run.budget().map(|b| b.grants);
    assert_eq!(seen, Some(1));
    let first = d
        .run
        .resume_grant(BudgetGrant::default(), seen)
        .expect("the first resume grants");
    d.input(RunInput::Budget(first)).expect("granted");
    assert_eq!(d.run.budget().map(|b| b.grants), Some(2));
    // The second (or the first delivered again) finds the run resumed since.
    assert_eq!(
        d.run.resume_grant(BudgetGrant::default(), seen),
        Err(ResumeRefused::Superseded { seen: 1, grants: 2 })
    );
    // Paused again, it is resumed only by a resume that saw this pause.
    d.run_released();
    assert!(d.run.budget_spent());
    assert!(d.run.resume_grant(BudgetGrant::default(), seen).is_err());
    assert!(d.run.resume_grant(BudgetGrant::default(), Some(2)).is_ok());
}
