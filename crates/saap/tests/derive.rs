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

mod with_step_macro {
    use saap::testing::TestRunner;
    use saap::{Event, FixedList, Required, StepCtx, StepError, UserMessageEvent, Workflow, step};

    #[derive(Event, serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    pub struct Part {
        n: u32,
    }
    #[derive(Event, serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    pub struct Hint {}
    #[derive(Event, serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    #[event(parent = StopEvent)]
    pub struct Total {
        n: u32,
    }

    #[step(delegates_to = ["Counter", "Checker"])]
    async fn split(
        question: Required<UserMessageEvent>,
        _ctx: StepCtx,
    ) -> Result<Vec<Part>, StepError> {
        Ok((1..=question.message.len() as u32)
            .map(|n| Part { n })
            .collect())
    }

    #[step(max_executions_per_run = 1, precondition = hint_arrived)]
    async fn sum(parts: FixedList<Part, 3>, hint: Option<Hint>) -> Result<Total, StepError> {
        let _ = hint;
        Ok(Total {
            n: parts.iter().map(|p| p.n).sum(),
        })
    }

    fn hint_arrived((_, hint): &(FixedList<Part, 3>, Option<Hint>)) -> bool {
        hint.is_some()
    }

    #[test]
    fn step_macro_takes_names_and_options_from_the_signature() {
        let wf = Workflow::builder("Macro")
            .step(split_step())
            .step(sum_step())
            .build()
            .unwrap();
        let spec = wf.spec();
        assert_eq!(spec.steps[0].params[0].name, "question");
        assert_eq!(spec.steps[1].params[0].name, "parts");
        assert_eq!(spec.steps[1].params[0].size, Some(3));
        assert_eq!(spec.steps[1].params[1].name, "hint");
        assert_eq!(spec.steps[1].max_executions_per_run, Some(1));
        assert_eq!(
            spec.steps[1].precondition.as_ref().unwrap().name,
            "hint_arrived"
        );
        assert_eq!(spec.steps[1].outputs, vec!["Total".to_string()]);
        assert_eq!(spec.steps[0].delegates_to, ["Counter", "Checker"]);
        assert!(spec.steps[1].delegates_to.is_empty());
    }

    #[tokio::test]
    async fn step_macro_steps_run() {
        let wf = Workflow::builder("Macro")
            .step(split_step())
            .step(sum_step())
            .build()
            .unwrap();
        let run = TestRunner::in_memory(wf)
            .start(UserMessageEvent::new("abc"))
            .await
            .unwrap();
        run.wait_idle(std::time::Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(run.executions_of("sum"), 0, "waits for the hint");
        run.send(Hint {}).await.unwrap();
        let t = run
            .wait_for_event::<Total>(std::time::Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(t, Total { n: 6 });
    }
}
