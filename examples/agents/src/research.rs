//! Two agents, one delegating to the other (DESIGN §8): an editor asks a researcher about
//! two topics at once and writes a brief from both answers.
//!
//! ```text
//! EditorAgent:
//!   UserMessageEvent "a, b" → assign → two AgentInTheLoopRequestEvents (child runs of
//!                                      ResearcherAgent; the editor waits for both)
//!   FixedList<AgentInTheLoopResponseEvent | AgentInTheLoopExceptionEvent, 2> → write → Brief (stop)
//! ResearcherAgent:
//!   UserMessageEvent topic → look_up → Finding (stop), or NeedsSource (asks a human)
//!                                      + SourceMissing (a timer: the human's deadline)
//!   NeedsSource + (SourceGiven | SourceMissing, whichever comes first) → cite → Finding (stop)
//! ```
//!
//! A topic the researcher knows is answered at once; another one waits for a human to give
//! a source (`SourceGiven`, sent to the child run), so the editor waits too — until the
//! human's deadline ([`SOURCE_DEADLINE`]), after which the finding says no source came
//! (`saap check` warns of a wait on a person with no deadline, SAAP019). The editor gives
//! each researcher [`RESEARCH_TIMEOUT`] too, and is owed a `Finding` (`expecting`): a child
//! that ends any other way reaches it as an exception. Cancelling the editor cancels its
//! waiting children; a child that fails reaches the editor as an exception, and the brief
//! says so. Both agents run in one process: the editor's workflow
//! declares the researcher (`with_delegate`, [`editor_with_researcher`]), so an engine made
//! for it makes the researcher's too (see [`agents`]); `research-agent` is the program.

use crate::event;
use saap::{
    AgentInTheLoopExceptionEvent, AgentInTheLoopRequestEvent, AgentInTheLoopResponseEvent, Delayed,
    Either, Engine, EngineOptions, FixedList, Required, Step, StepCtx, StepError, UserMessageEvent,
    Workflow, backend::Backend,
};
use std::sync::Arc;
use std::time::Duration;

/// How long the researcher waits for a human's source.
pub const SOURCE_DEADLINE: Duration = Duration::from_secs(3600);

/// How long the editor waits for each researcher (`timeout_seconds`): longer than the
/// researcher's own deadline, so a researcher that keeps it always answers in time; one
/// that does not is cancelled and the brief says so.
pub const RESEARCH_TIMEOUT: Duration = Duration::from_secs(2 * 3600);

/// What the researcher knows without help.
const FACTS: &[(&str, &str)] = &[
    ("ants", "ants farm aphids for honeydew"),
    ("bees", "bees navigate by polarized light"),
    ("owls", "owls cannot move their eyes in their sockets"),
];

event!(
    /// The researcher's answer; ends its run.
    Finding, "StopEvent" { topic: String, text: String }
);
event!(
    /// The researcher does not know the topic: it waits for a human to give a source.
    NeedsSource, "HumanInTheLoopRequestEvent" { topic: String }
);
event!(
    /// A human's source for a topic the researcher did not know.
    SourceGiven, "HumanInTheLoopResponseEvent" { source: String }
);
event!(
    /// Nobody gave a source in time (delivered by the engine at the deadline).
    SourceMissing, "ControlEvent" { topic: String }
);
event!(
    /// The editor's brief from all answers; ends its run.
    Brief, "StopEvent" { text: String }
);

/// The researcher: answers a topic it knows, else asks a human for a source (until
/// [`SOURCE_DEADLINE`]); a topic starting with `!` fails (to show a child's failure reaching
/// its parent).
pub fn researcher() -> Workflow {
    researcher_with_deadline(SOURCE_DEADLINE)
}

/// The researcher, giving a human `deadline` to answer.
pub fn researcher_with_deadline(deadline: Duration) -> Workflow {
    let built = Workflow::builder("ResearcherAgent")
        .description("Answers a research question, asking a human for a source when it must")
        .step(Step::new(
            "look_up",
            move |q: Required<UserMessageEvent>, _: StepCtx| async move {
                let topic = q.message.trim().to_lowercase();
                if let Some(bad) = topic.strip_prefix('!') {
                    return Err(StepError::new(format!(
                        "the archive on `{bad}` is unreadable"
                    )));
                }
                Ok(match FACTS.iter().find(|(t, _)| *t == topic) {
                    Some((_, text)) => Either::Left(Finding {
                        topic,
                        text: (*text).to_string(),
                    }),
                    None => Either::Right((
                        NeedsSource {
                            topic: topic.clone(),
                        },
                        Delayed::after(deadline, SourceMissing { topic }),
                    )),
                })
            },
        ))
        .step(Step::new(
            "cite",
            |(need, source): (
                Required<NeedsSource>,
                Required<Either<SourceGiven, SourceMissing>>,
            ),
             _: StepCtx| async move {
                let text = match source.into_inner() {
                    Either::Left(given) => format!("{} (per {})", need.topic, given.source),
                    Either::Right(_) => format!("{}: no source came in time", need.topic),
                };
                Ok::<_, StepError>(Finding {
                    topic: need.topic.clone(),
                    text,
                })
            },
        ))
        .build();
    match built {
        Ok(w) => w,
        Err(e) => panic!("the researcher example is well formed: {e}"),
    }
}

/// The editor: asks the researcher about the first two comma-separated topics of its
/// message, waits for both answers, writes the brief.
pub fn editor() -> Workflow {
    let built = Workflow::builder("EditorAgent")
        .description("Delegates two research questions and writes a brief from the answers")
        .step(
            Step::new(
                "assign",
                |q: Required<UserMessageEvent>, _: StepCtx| async move {
                    let mut topics = q.message.split(',').map(str::trim);
                    let (a, b) = match (topics.next(), topics.next()) {
                        (Some(a), Some(b)) if !a.is_empty() && !b.is_empty() => (a, b),
                        _ => {
                            return Err(StepError::new(
                                "give two topics, separated by a comma (e.g. \"ants, bees\")",
                            ));
                        }
                    };
                    let ask = |topic: &str| {
                        AgentInTheLoopRequestEvent::new(
                            "ResearcherAgent",
                            &UserMessageEvent::new(topic),
                        )
                        .map(|r| r.expecting::<Finding>().timeout(RESEARCH_TIMEOUT))
                    };
                    Ok::<_, StepError>((ask(a)?, ask(b)?))
                },
            )
            .max_executions_per_run(1)
            .delegates_to(["ResearcherAgent"]),
        )
        .step(Step::new(
            "write",
            |answers: FixedList<
                Either<AgentInTheLoopResponseEvent, AgentInTheLoopExceptionEvent>,
                2,
            >,
             _: StepCtx| async move {
                let mut lines = Vec::new();
                for a in answers.iter() {
                    lines.push(match a {
                        Either::Left(ok) => ok.stop_event::<Finding>()?.text,
                        Either::Right(failed) => format!("(no answer: {})", failed.message()),
                    });
                }
                Ok::<_, StepError>(Brief {
                    text: lines.join("; "),
                })
            },
        ))
        .build();
    match built {
        Ok(w) => w,
        Err(e) => panic!("the editor example is well formed: {e}"),
    }
}

/// The editor, declaring the researcher it delegates to.
pub fn editor_with_researcher() -> Workflow {
    editor().with_delegate(researcher())
}

/// Both agents on one store, the editor delegating to the researcher: `(editor,
/// researcher)`. The researcher's engine is made with the editor's and held by it.
pub async fn agents(backend: Arc<dyn Backend>, opts: EngineOptions) -> (Engine, Engine) {
    let editor = Engine::new(editor_with_researcher(), backend, opts);
    match editor.agent("ResearcherAgent") {
        Some(researcher) => (editor, researcher),
        None => panic!("the editor's engine makes the researcher's"),
    }
}
