//! `#[derive(EventUnion)]`: an enum of event types is a union parameter (one event of any
//! member type binds it) and a union result (one of them is returned).
#![allow(clippy::unwrap_used)]

use saap::testing::TestRunner;
use saap::{Agent, EventUnion, Required, StepError, UserMessageEvent, agent};
use saap_dispatch::spec::ParamKind;
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
