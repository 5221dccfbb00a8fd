//! `#[derive(EventUnion)]`: an enum of event types is a union parameter (one event of any
//! member type binds it) and a union result (one of them is returned).
#![allow(clippy::unwrap_used)]

use saap::testing::TestRunner;
use saap::{
    Agent, EventUnion, FixedList, Required, Step, StepCtx, StepError, UserMessageEvent, Workflow,
    agent,
};
use saap_dispatch::spec::ParamKind;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

#[derive(saap::Event, serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
struct Approved {
    by: String,
}
#[derive(saap::Event, serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
struct Rejected {
    reason: String,
}
#[derive(saap::Event, serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
struct Deferred {
    until: String,
}
#[derive(saap::Event, serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
#[event(parent = StopEvent)]
struct Done {
    outcome: String,
}
#[derive(saap::Event, serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
#[event(parent = StopEvent)]
struct Escalated {
    to: String,
}

#[derive(EventUnion, Debug)]
enum Decision {
    Approved(Approved),
    Rejected(Rejected),
    Deferred(Deferred),
}

#[derive(EventUnion)]
enum Ending {
    Done(Done),
    Escalated(Escalated),
}

struct Decider;

#[agent(events = [Approved, Rejected, Deferred])]
impl Decider {
    #[step]
    async fn wait(_q: Required<UserMessageEvent>) -> Result<(), StepError> {
        Ok(())
    }

    #[step(max_executions_per_run = 1)]
    async fn act(decision: Decision) -> Result<Ending, StepError> {
        Ok(match decision {
            Decision::Approved(a) => Ending::Done(Done {
                outcome: format!("approved by {}", a.by),
            }),
            Decision::Rejected(r) => Ending::Done(Done {
                outcome: format!("rejected: {}", r.reason),
            }),
            Decision::Deferred(d) => Ending::Escalated(Escalated {
                to: format!("manager, until {}", d.until),
            }),
        })
    }
}

#[test]
fn a_union_enum_is_one_required_parameter_over_its_member_types_and_a_union_result() {
    let wf = Decider::workflow().unwrap();
    let act = &wf.spec().steps[1];
    assert_eq!(act.params.len(), 1);
    assert_eq!(act.params[0].name, "decision");
    assert_eq!(act.params[0].kind, ParamKind::Required);
    assert_eq!(act.params[0].types, ["Approved", "Rejected", "Deferred"]);
    assert_eq!(act.outputs, ["Done", "Escalated"]);
    assert!(
        act.returns_together.is_empty(),
        "a union returns one of its members, not all"
    );
}

#[tokio::test]
async fn each_member_type_binds_the_union_and_picks_its_variant() {
    let runner = TestRunner::in_memory(Decider::workflow().unwrap());
    let approved = runner.start(UserMessageEvent::new("go?")).await.unwrap();
    approved.send(Approved { by: "ann".into() }).await.unwrap();
    let done = approved.wait_for_event::<Done>(WAIT).await.unwrap();
    assert_eq!(done.outcome, "approved by ann");

    let deferred = runner.start(UserMessageEvent::new("go?")).await.unwrap();
    deferred
        .send(Deferred {
            until: "monday".into(),
        })
        .await
        .unwrap();
    let e = deferred.wait_for_event::<Escalated>(WAIT).await.unwrap();
    assert_eq!(e.to, "manager, until monday");
    assert_eq!(deferred.executions_of("act"), 1);
}

// ---- Every parameter kind of a union (issue 3): `Option<U>`, `Vec<U>`, `FixedList<U, N>`.
// Votes come from people (human-in-the-loop responses), so `check` knows they arrive from
// outside.

#[derive(saap::Event, serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
#[event(parent = HumanInTheLoopResponseEvent)]
struct Yes {
    who: String,
}
#[derive(saap::Event, serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
#[event(parent = HumanInTheLoopResponseEvent)]
struct No {
    who: String,
}
#[derive(saap::Event, serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
#[event(parent = HumanInTheLoopResponseEvent)]
struct Close {}
#[derive(saap::Event, serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
#[event(parent = HumanInTheLoopResponseEvent)]
struct Ask {}
#[derive(saap::Event, serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
#[event(parent = StopEvent)]
struct Tallied {
    votes: Vec<String>,
}
#[derive(saap::Event, serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
struct Answered {
    vote: Option<String>,
}

#[derive(EventUnion, Debug, Clone, PartialEq)]
enum Vote {
    Yes(Yes),
    No(No),
}

impl Vote {
    fn label(&self) -> String {
        match self {
            Vote::Yes(y) => format!("yes:{}", y.who),
            Vote::No(n) => format!("no:{}", n.who),
        }
    }
}

fn yes(who: &str) -> Yes {
    Yes { who: who.into() }
}
fn no(who: &str) -> No {
    No { who: who.into() }
}

/// `Vec<Vote>`: every vote so far, of both member types, in arrival order.
struct ListPanel;

#[agent(events = [Yes, No, Close])]
impl ListPanel {
    #[step]
    async fn open(_q: Required<UserMessageEvent>) -> Result<(), StepError> {
        Ok(())
    }

    #[step]
    async fn tally(votes: Vec<Vote>, _close: Required<Close>) -> Result<Tallied, StepError> {
        Ok(Tallied {
            votes: votes.iter().map(Vote::label).collect(),
        })
    }
}

/// `Option<Vote>`: never blocks; binds the latest vote of either type when there is one.
struct OptionalPanel;

#[agent(events = [Yes, No, Ask])]
impl OptionalPanel {
    #[step]
    async fn open(_q: Required<UserMessageEvent>) -> Result<(), StepError> {
        Ok(())
    }

    #[step]
    async fn answer(_ask: Required<Ask>, vote: Option<Vote>) -> Result<Answered, StepError> {
        Ok(Answered {
            vote: vote.as_ref().map(Vote::label),
        })
    }
}

/// `FixedList<Vote, 3>`: waits for three votes of any member types, binds the first three.
struct FixedPanel;

#[agent(events = [Yes, No])]
impl FixedPanel {
    #[step]
    async fn open(_q: Required<UserMessageEvent>) -> Result<(), StepError> {
        Ok(())
    }

    #[step]
    async fn decide(votes: FixedList<Vote, 3>) -> Result<Tallied, StepError> {
        Ok(Tallied {
            votes: votes.iter().map(Vote::label).collect(),
        })
    }
}

#[test]
fn each_parameter_kind_of_a_union_lists_all_member_types_in_the_spec() {
    let list = ListPanel::workflow().unwrap();
    let p = &list.spec().steps[1].params[0];
    assert_eq!((p.name.as_str(), p.kind), ("votes", ParamKind::List));
    assert_eq!(p.types, ["Yes", "No"]);

    let optional = OptionalPanel::workflow().unwrap();
    let p = &optional.spec().steps[1].params[1];
    assert_eq!((p.name.as_str(), p.kind), ("vote", ParamKind::Optional));
    assert_eq!(p.types, ["Yes", "No"]);

    let fixed = FixedPanel::workflow().unwrap();
    let p = &fixed.spec().steps[1].params[0];
    assert_eq!((p.kind, p.size), (ParamKind::FixedList, Some(3)));
    assert_eq!(p.types, ["Yes", "No"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_of_a_union_collects_events_of_both_member_types_in_arrival_order() {
    let runner = TestRunner::in_memory(ListPanel::workflow().unwrap());
    let run = runner.start(UserMessageEvent::new("vote")).await.unwrap();
    run.send(yes("ann")).await.unwrap();
    run.send(no("bob")).await.unwrap();
    run.send(yes("cid")).await.unwrap();
    run.send(no("dan")).await.unwrap();
    run.send(Close {}).await.unwrap();
    let t = run.wait_for_event::<Tallied>(WAIT).await.unwrap();
    assert_eq!(t.votes, ["yes:ann", "no:bob", "yes:cid", "no:dan"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_list_of_a_union_does_not_block() {
    let runner = TestRunner::in_memory(ListPanel::workflow().unwrap());
    let run = runner.start(UserMessageEvent::new("vote")).await.unwrap();
    run.send(Close {}).await.unwrap();
    let t = run.wait_for_event::<Tallied>(WAIT).await.unwrap();
    assert!(t.votes.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_optional_union_fires_without_a_member_and_again_with_one() {
    let runner = TestRunner::in_memory(OptionalPanel::workflow().unwrap());
    let run = runner.start(UserMessageEvent::new("vote?")).await.unwrap();
    run.send(Ask {}).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    assert_eq!(run.events_of::<Answered>(), [Answered { vote: None }]);
    // The optional trap (DESIGN §5) holds for a union as for one type: a member arriving
    // later re-runs the step, whichever member it is.
    run.send(no("bob")).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    run.send(yes("ann")).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    assert_eq!(
        run.events_of::<Answered>(),
        [
            Answered { vote: None },
            Answered {
                vote: Some("no:bob".into())
            },
            Answered {
                vote: Some("yes:ann".into())
            },
        ]
    );
    assert_eq!(run.executions_of("answer"), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_optional_union_binds_the_latest_member_that_arrived_before_the_trigger() {
    let runner = TestRunner::in_memory(OptionalPanel::workflow().unwrap());
    let run = runner.start(UserMessageEvent::new("vote?")).await.unwrap();
    run.send(yes("ann")).await.unwrap();
    run.send(no("bob")).await.unwrap();
    run.send(Ask {}).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    assert_eq!(
        run.events_of::<Answered>(),
        [Answered {
            vote: Some("no:bob".into())
        }]
    );
    assert_eq!(run.executions_of("answer"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_list_of_a_union_waits_for_n_of_any_member_types() {
    let runner = TestRunner::in_memory(FixedPanel::workflow().unwrap());
    let run = runner.start(UserMessageEvent::new("vote")).await.unwrap();
    run.send(no("bob")).await.unwrap();
    run.send(yes("ann")).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    assert_eq!(run.executions_of("decide"), 0, "two of three votes");
    assert!(!run.has_stop());
    run.send(no("cid")).await.unwrap();
    let t = run.wait_for_event::<Tallied>(WAIT).await.unwrap();
    assert_eq!(t.votes, ["no:bob", "yes:ann", "no:cid"]);
    assert_eq!(run.executions_of("decide"), 1);
}

// ---- A list of a union with a precondition: the precondition cache (issue 3's linear
// fan-in) extends a `Vec<U>` with the new events only, whatever their member types.

/// Copies of `Pro`/`Con` made to extract a bound event (the runtime clones a typed payload
/// instead of deserializing it when the event is `Clone`).
static EXTRACTED: AtomicUsize = AtomicUsize::new(0);

#[derive(saap::Event, serde::Serialize, serde::Deserialize, Debug, PartialEq)]
struct Pro {
    n: u32,
}
#[derive(saap::Event, serde::Serialize, serde::Deserialize, Debug, PartialEq)]
struct Con {
    n: u32,
}
impl Clone for Pro {
    fn clone(&self) -> Self {
        EXTRACTED.fetch_add(1, Ordering::SeqCst);
        Pro { n: self.n }
    }
}
impl Clone for Con {
    fn clone(&self) -> Self {
        EXTRACTED.fetch_add(1, Ordering::SeqCst);
        Con { n: self.n }
    }
}

#[derive(EventUnion)]
enum Ballot {
    Pro(Pro),
    Con(Con),
}

impl Ballot {
    fn signed(&self) -> i64 {
        match self {
            Ballot::Pro(p) => i64::from(p.n),
            Ballot::Con(c) => -i64::from(c.n),
        }
    }
}

#[derive(saap::Event, serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
#[event(parent = StopEvent)]
struct Counted {
    signed: Vec<i64>,
}

const BALLOTS: u32 = 40;

/// What the precondition saw on each evaluation (the signed ballots, in order).
static SEEN: Mutex<Vec<Vec<i64>>> = Mutex::new(Vec::new());

struct Count;

#[agent(events = [Pro, Con])]
impl Count {
    #[step]
    async fn open(_q: Required<UserMessageEvent>) -> Result<(), StepError> {
        Ok(())
    }

    #[step(precondition = Self::all_in)]
    async fn count(ballots: Vec<Ballot>) -> Result<Counted, StepError> {
        Ok(Counted {
            signed: ballots.iter().map(Ballot::signed).collect(),
        })
    }

    fn all_in(ballots: &[Ballot]) -> bool {
        SEEN.lock()
            .unwrap()
            .push(ballots.iter().map(Ballot::signed).collect());
        ballots.len() as u32 == BALLOTS
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_of_a_union_with_a_precondition_extracts_each_event_once_in_arrival_order() {
    let runner = TestRunner::in_memory(Count::workflow().unwrap());
    let run = runner.start(UserMessageEvent::new("count")).await.unwrap();
    let expected: Vec<i64> = (1..=BALLOTS)
        .map(|n| {
            if n % 3 == 0 {
                -i64::from(n)
            } else {
                i64::from(n)
            }
        })
        .collect();
    for n in 1..=BALLOTS {
        if n % 3 == 0 {
            run.send(Con { n }).await.unwrap();
        } else {
            run.send(Pro { n }).await.unwrap();
        }
    }
    let counted = run.wait_for_event::<Counted>(WAIT).await.unwrap();
    assert_eq!(counted.signed, expected);
    assert_eq!(run.executions_of("count"), 1);

    // Evaluated on every arrival, each time on all ballots so far, both types, in order.
    let seen = SEEN.lock().unwrap().clone();
    assert_eq!(seen.len(), BALLOTS as usize);
    for (k, s) in seen.iter().enumerate() {
        assert_eq!(s[..], expected[..=k]);
    }
    // One extraction per ballot for the precondition plus one for the body: linear (without
    // the cache the precondition alone would make 1 + 2 + … + 40 = 820).
    let extracted = EXTRACTED.load(Ordering::SeqCst);
    assert!(
        (BALLOTS as usize..=2 * BALLOTS as usize).contains(&extracted),
        "{extracted} extractions for {BALLOTS} ballots"
    );
}

// ---- What `spec` and `check` show for union parameters of every kind.

#[test]
fn spec_and_check_show_every_member_type_of_a_union_parameter() {
    let mut shown = String::new();
    for wf in [
        ListPanel::workflow().unwrap(),
        OptionalPanel::workflow().unwrap(),
        FixedPanel::workflow().unwrap(),
    ] {
        let spec = wf.compiled();
        let findings = saap_dispatch::check::check(spec);
        let summary = saap_dispatch::check::summarize(&findings);
        let steps: Vec<&saap_dispatch::spec::StepSpec> = wf.spec().steps.iter().collect();
        shown.push_str(&format!(
            "== {} steps (spec) ==\n{}\n== check ==\n{}\n",
            wf.name(),
            serde_json::to_string_pretty(&steps).unwrap(),
            saap::cli::render_check(
                &format!("agent {}", wf.name()),
                spec.steps.len(),
                &findings,
                summary
            )
        ));
    }
    insta::assert_snapshot!("union_params_spec_and_check", shown);
}

// ---- A union as a result of every shape: `Vec<U>` (several members at once), `Option<U>`.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_returns_a_vec_or_option_of_a_union_and_the_spec_lists_every_member() {
    let wf = Workflow::builder("Poll")
        .step(Step::new(
            "poll",
            |_: Required<UserMessageEvent>, _: StepCtx| async {
                Ok::<_, StepError>(vec![
                    Vote::Yes(yes("ann")),
                    Vote::No(no("bob")),
                    Vote::Yes(yes("cid")),
                ])
            },
        ))
        .step(Step::new(
            "decide",
            |votes: FixedList<Vote, 3>, _: StepCtx| async move {
                let yes = votes.iter().filter(|v| matches!(v, Vote::Yes(_))).count();
                Ok::<_, StepError>((yes >= 2).then(|| Tallied {
                    votes: votes.iter().map(Vote::label).collect(),
                }))
            },
        ))
        .build()
        .unwrap();
    assert_eq!(wf.spec().steps[0].outputs, ["Yes", "No"]);
    assert_eq!(wf.spec().steps[1].outputs, ["Tallied"]);
    let runner = TestRunner::in_memory(wf);
    let run = runner.start(UserMessageEvent::new("poll")).await.unwrap();
    let t = run.wait_for_event::<Tallied>(WAIT).await.unwrap();
    assert_eq!(t.votes, ["yes:ann", "no:bob", "yes:cid"]);
    assert_eq!(run.events_of::<Yes>(), [yes("ann"), yes("cid")]);
}

// ---- A union inside a union: its members join the outer union's.

#[derive(EventUnion)]
enum Input {
    Vote(Vote),
    Ask(Ask),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_union_of_a_union_binds_the_inner_members_through_the_outer_variant() {
    let wf = Workflow::builder("Nested")
        .step(Step::new(
            "open",
            |_: Required<UserMessageEvent>, _: StepCtx| async { Ok::<_, StepError>(()) },
        ))
        .step(Step::new(
            "collect",
            |inputs: FixedList<Input, 3>, _: StepCtx| async move {
                Ok::<_, StepError>(Tallied {
                    votes: inputs
                        .iter()
                        .map(|i| match i {
                            Input::Vote(v) => v.label(),
                            Input::Ask(_) => "ask".into(),
                        })
                        .collect(),
                })
            },
        ))
        .build()
        .unwrap();
    assert_eq!(wf.spec().steps[1].params[0].types, ["Yes", "No", "Ask"]);
    let runner = TestRunner::in_memory(wf);
    let run = runner.start(UserMessageEvent::new("go")).await.unwrap();
    run.send(Ask {}).await.unwrap();
    run.send(no("bob")).await.unwrap();
    run.send(yes("ann")).await.unwrap();
    let t = run.wait_for_event::<Tallied>(WAIT).await.unwrap();
    assert_eq!(t.votes, ["ask", "no:bob", "yes:ann"]);
}

// ---- After a restart the bound events come back from the store as JSON: each still binds
// its own member (the variant is chosen by the stored event name).

async fn open_list_panel(path: &std::path::Path) -> saap::Engine {
    let backend = Arc::new(saap::SqliteBackend::open(path).unwrap());
    let (engine, _) = saap::Engine::open(
        ListPanel::workflow().unwrap(),
        backend,
        saap::EngineOptions::default(),
    )
    .await
    .unwrap();
    engine
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_list_of_a_union_binds_events_read_back_from_the_store_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let rt1 = runtime();
    let run_id = rt1.block_on(async {
        let engine = open_list_panel(&path).await;
        let runner = TestRunner::new(engine.clone());
        let run = runner.start(UserMessageEvent::new("vote")).await.unwrap();
        run.send(no("bob")).await.unwrap();
        run.send(yes("ann")).await.unwrap();
        run.send(no("cid")).await.unwrap();
        run.wait_idle(WAIT).await.unwrap();
        engine.halt();
        run.run_id().to_string()
    });
    drop(rt1);
    let rt2 = runtime();
    rt2.block_on(async {
        let engine = open_list_panel(&path).await;
        let runner = TestRunner::new(engine);
        let run = runner.attach(&run_id).unwrap();
        run.send(Close {}).await.unwrap();
        let t = run.wait_for_event::<Tallied>(WAIT).await.unwrap();
        assert_eq!(t.votes, ["no:bob", "yes:ann", "no:cid"]);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_of_a_union_is_the_bare_union_with_the_bound_event_id() {
    let wf = Workflow::builder("RequiredVote")
        .step(Step::new(
            "open",
            |_: Required<UserMessageEvent>, _: StepCtx| async { Ok::<_, StepError>(()) },
        ))
        .step(Step::new(
            "take",
            |vote: Required<Vote>, _: StepCtx| async move {
                Ok::<_, StepError>(Tallied {
                    votes: vec![vote.label(), vote.id.to_string()],
                })
            },
        ))
        .build()
        .unwrap();
    let p = &wf.spec().steps[1].params[0];
    assert_eq!(
        (p.kind, p.types.clone()),
        (
            ParamKind::Required,
            vec!["Yes".to_string(), "No".to_string()]
        )
    );
    let runner = TestRunner::in_memory(wf);
    let run = runner.start(UserMessageEvent::new("vote")).await.unwrap();
    let id = run.send(no("bob")).await.unwrap();
    let t = run.wait_for_event::<Tallied>(WAIT).await.unwrap();
    assert_eq!(t.votes, ["no:bob".to_string(), id.to_string()]);
}
