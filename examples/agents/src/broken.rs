//! Broken agents, one per failure pattern, each with its fixed twin. The tests in
//! `tests/broken.rs` show the symptom and that the fix removes it; `saap check` names the
//! cause statically.
//!
//! | pattern | broken | symptom | fix |
//! |---|---|---|---|
//! | optional-parameter trap (R1+R2) | [`optional_trap`] | `publish` runs twice: once before the review notes arrive, once after | [`optional_trap_fixed`]: a precondition waits for the notes |
//! | list re-runs (R3) | [`list_reruns`] | `combine` runs once per expert answer (3×), the answer uses one expert | [`list_reruns_fixed`]: `FixedList<ExpertAnswer, 3>` |
//! | fixed list larger than the fan-out | [`fixed_list_short`] | `combine` never runs; the run hangs | [`fixed_list_short_fixed`]: the size matches the three experts |

use crate::event;
use saap::{FixedList, Required, Step, StepCtx, StepError, UserMessageEvent, Workflow};

event!(
    /// A draft written from the user's request.
    Draft, "ControlEvent" { text: String }
);
event!(
    /// Review notes from a human reviewer (arrive from outside, later).
    ReviewNotes, "ControlEvent" { notes: String }
);
event!(
    /// The published text (control and display).
    Published, "ControlAndDisplayEvent" { text: String }
);
event!(
    /// The reviewer closes the review; ends the run.
    ReviewClosed, "StopEvent" {}
);
event!(
    /// One expert's answer (fan-out).
    ExpertAnswer, "ControlEvent" { expert: String, text: String }
);
event!(
    /// The combined answer; ends the run.
    Combined, "StopEvent" { experts: Vec<String> }
);

fn build(b: saap::WorkflowBuilder) -> Workflow {
    match b.build() {
        Ok(w) => w,
        Err(e) => panic!("example workflow is invalid: {e}"),
    }
}

type Publish = (Required<Draft>, Option<ReviewNotes>);

async fn publish_body((d, notes): Publish, _ctx: StepCtx) -> Result<Published, StepError> {
    let text = match notes {
        Some(n) => format!("{} [reviewed: {}]", d.text, n.notes),
        None => format!("{} [not reviewed]", d.text),
    };
    Ok(Published { text })
}

fn review_agent(name: &str, fixed: bool) -> Workflow {
    let publish = Step::new("publish", publish_body);
    let publish = if fixed {
        publish.precondition("notes_arrived", |(_, notes): &Publish| notes.is_some())
    } else {
        publish
    };
    build(
        Workflow::builder(name)
            .event::<ReviewClosed>()
            .step(Step::new(
                "draft",
                |q: Required<UserMessageEvent>, _ctx: StepCtx| async move {
                    Ok::<_, StepError>(Draft {
                        text: format!("Draft for: {}", q.message),
                    })
                },
            ))
            .step(publish),
    )
}

/// Broken: `publish(draft: Draft, notes: Option<ReviewNotes>)` with no precondition fires as
/// soon as the draft exists (R1) and again when the notes arrive (R2).
pub fn optional_trap() -> Workflow {
    review_agent("ReviewAgentBroken", false)
}

/// Fixed: a precondition over the step's own inputs waits for the notes.
pub fn optional_trap_fixed() -> Workflow {
    review_agent("ReviewAgent", true)
}

fn experts() -> Step<Required<UserMessageEvent>> {
    Step::new(
        "ask_experts",
        |q: Required<UserMessageEvent>, _ctx: StepCtx| async move {
            Ok::<_, StepError>(
                ["legal", "finance", "security"]
                    .iter()
                    .map(|e| ExpertAnswer {
                        expert: e.to_string(),
                        text: format!("{e} on {}", q.message),
                    })
                    .collect::<Vec<_>>(),
            )
        },
    )
}

/// Broken: `combine(answers: Vec<ExpertAnswer>)` re-runs on every arrival (R3).
pub fn list_reruns() -> Workflow {
    build(
        Workflow::builder("ExpertPanelBroken")
            .step(experts())
            .step(Step::new(
                "combine",
                |answers: Vec<ExpertAnswer>, _ctx: StepCtx| async move {
                    Ok::<_, StepError>(Combined {
                        experts: answers.into_iter().map(|a| a.expert).collect(),
                    })
                },
            )),
    )
}

/// Fixed: `FixedList<ExpertAnswer, 3>` waits for all three and runs once.
pub fn list_reruns_fixed() -> Workflow {
    build(
        Workflow::builder("ExpertPanel")
            .step(experts())
            .step(Step::new(
                "combine",
                |answers: FixedList<ExpertAnswer, 3>, _ctx: StepCtx| async move {
                    Ok::<_, StepError>(Combined {
                        experts: answers.into_vec().into_iter().map(|a| a.expert).collect(),
                    })
                },
            )),
    )
}

/// Broken: waits for four answers but only three experts exist: `combine` never runs.
pub fn fixed_list_short() -> Workflow {
    build(
        Workflow::builder("ExpertPanelShort")
            .step(experts())
            .step(Step::new(
                "combine",
                |answers: FixedList<ExpertAnswer, 4>, _ctx: StepCtx| async move {
                    Ok::<_, StepError>(Combined {
                        experts: answers.into_vec().into_iter().map(|a| a.expert).collect(),
                    })
                },
            )),
    )
}

/// Fixed: the size matches the fan-out.
pub fn fixed_list_short_fixed() -> Workflow {
    list_reruns_fixed()
}
