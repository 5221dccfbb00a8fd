//! Two agents for the delegation tests: a researcher that answers (or fails, or waits for
//! `Go`) and a boss that delegates a question to it and reports what came back.

use saap::{
    AgentInTheLoopExceptionEvent, AgentInTheLoopRequestEvent, AgentInTheLoopResponseEvent, Either,
    Required, Step, StepCtx, StepError, UserMessageEvent, Workflow,
};

crate::event!(Asked, "ControlEvent");
crate::event!(Go, "ControlEvent");

/// The researcher's answer: ends its run.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Answer {
    pub text: String,
}
impl saap::Event for Answer {
    const NAME: &'static str = "Answer";
    const PARENTS: &'static [&'static str] = &["StopEvent"];
}

/// The boss's report: ends its run with what the researcher said (or why it did not).
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Report {
    pub text: String,
}
impl saap::Event for Report {
    const NAME: &'static str = "Report";
    const PARENTS: &'static [&'static str] = &["StopEvent"];
}

/// Answers a question at once; "fail" fails the step (the run ends with an exception);
/// "wait" waits for `Go` first.
pub fn researcher() -> Workflow {
    Workflow::builder("Researcher")
        .step(Step::new(
            "answer",
            |q: Required<UserMessageEvent>, _: StepCtx| async move {
                match q.message.as_str() {
                    "fail" => Err(StepError::new("no sources found")),
                    "wait" => Ok(Either::Right(Asked { n: 1 })),
                    m => Ok(Either::Left(Answer {
                        text: format!("about {m}: 42"),
                    })),
                }
            },
        ))
        .step(Step::new(
            "resume",
            |_: (Required<Asked>, Required<Go>), _: StepCtx| async move {
                Ok::<_, StepError>(Answer {
                    text: "after waiting".into(),
                })
            },
        ))
        .build()
        .unwrap()
}

/// Asks agent `class` the question it was given (detached when the question starts with
/// "detached "), then reports the answer or the failure. A detached request is followed
/// by `Asked`: the boss then waits for an event that never comes.
pub fn boss(class: &'static str) -> Workflow {
    Workflow::builder("Boss")
        .step(Step::new(
            "ask",
            move |q: Required<UserMessageEvent>, _: StepCtx| async move {
                let (detached, question) = match q.message.strip_prefix("detached ") {
                    Some(rest) => (true, rest.to_string()),
                    None => (false, q.message.clone()),
                };
                let req = AgentInTheLoopRequestEvent::new(class, &UserMessageEvent::new(question))?;
                Ok::<_, StepError>(if detached {
                    Either::Left((req.detached(), Asked { n: 2 }))
                } else {
                    Either::Right(req)
                })
            },
        ))
        .step(decide())
        .build()
        .unwrap()
}

/// The child's answer (or `failed: ` and why there is none) as the boss's report.
pub type Answered = Required<Either<AgentInTheLoopResponseEvent, AgentInTheLoopExceptionEvent>>;

/// The boss's last step: reports the researcher's answer, or why there is none.
pub fn decide() -> Step<Answered> {
    Step::new("decide", |r: Answered, _: StepCtx| async move {
        let text = match &*r {
            Either::Left(ok) => ok.stop_event::<Answer>()?.text,
            Either::Right(failed) => format!("failed: {}", failed.message()),
        };
        Ok::<_, StepError>(Report { text })
    })
}
