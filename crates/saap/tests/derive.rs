//! `#[derive(Event)]`.
#![allow(clippy::unwrap_used)]

use saap::testing::TestRunner;
use saap::{Event, Required, Step, StepCtx, StepError, UserMessageEvent, Workflow};

#[derive(Event, serde::Serialize, serde::Deserialize, Debug, PartialEq)]
struct Asked {
    q: String,
}

#[derive(Event, serde::Serialize, serde::Deserialize, Debug, PartialEq)]
#[event(parent = StopEvent)]
struct Answered {
    a: String,
}

#[derive(Event, serde::Serialize, serde::Deserialize)]
#[event(name = "ShownChunk", parents = [DisplayEvent])]
struct Shown {}

#[test]
fn derive_sets_name_and_parents() {
    assert_eq!(Asked::NAME, "Asked");
    assert_eq!(Asked::PARENTS, &["ControlEvent"]);
    assert_eq!(Answered::PARENTS, &["StopEvent"]);
    assert_eq!(Shown::NAME, "ShownChunk");
    assert_eq!(Shown::PARENTS, &["DisplayEvent"]);
}

#[tokio::test]
async fn derived_events_run() {
    let wf = Workflow::builder("Derived")
        .event::<Shown>()
        .step(Step::new(
            "ask",
            |q: Required<UserMessageEvent>, _: StepCtx| async move {
                Ok::<_, StepError>(Asked {
                    q: q.message.clone(),
                })
            },
        ))
        .step(Step::new(
            "answer",
            |q: Required<Asked>, ctx: StepCtx| async move {
                ctx.display(&Shown {})
                    .await
                    .map_err(|e| StepError::new(e.to_string()))?;
                Ok::<_, StepError>(Answered {
                    a: q.q.to_uppercase(),
                })
            },
        ))
        .build()
        .unwrap();
    let run = TestRunner::in_memory(wf)
        .start(UserMessageEvent::new("hi"))
        .await
        .unwrap();
    let a = run
        .wait_for_event::<Answered>(std::time::Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(a, Answered { a: "HI".into() });
    assert_eq!(
        run.snapshot()
            .events()
            .iter()
            .filter(|e| e.name == "ShownChunk")
            .count(),
        1
    );
}
