//! A human-approval agent: request → wait → response.
//!
//! ```text
//! UserMessageEvent → propose → ApprovalRequested (to a human; the run waits)
//! ApprovalGiven (from the human) + ApprovalRequested → decide → Executed | Declined (stop)
//! ```

use crate::event;
use saap::{Either, Required, Step, StepCtx, StepError, UserMessageEvent, Workflow};

event!(
    /// Asks a human to approve an action.
    ApprovalRequested, "HumanInTheLoopRequestEvent" { question: String, action: String }
);
event!(
    /// The human's answer.
    ApprovalGiven, "HumanInTheLoopResponseEvent" { approved: bool, by: String }
);
event!(
    /// The action was carried out; ends the run.
    Executed, "StopEvent" { action: String, approved_by: String }
);
event!(
    /// The human declined; ends the run.
    Declined, "StopEvent" { action: String }
);

pub fn workflow() -> Workflow {
    let built = Workflow::builder("ApprovalAgent")
        .description("Proposes an action and waits for a human to approve it")
        .step(
            Step::new(
                "propose",
                |q: Required<UserMessageEvent>, _ctx: StepCtx| async move {
                    Ok::<_, StepError>(ApprovalRequested {
                        question: format!("May I do this: {}?", q.message),
                        action: q.message.clone(),
                    })
                },
            )
            .max_executions_per_run(1),
        )
        .step(
            Step::new(
                "decide",
                |(req, resp): (Required<ApprovalRequested>, Required<ApprovalGiven>),
                 _ctx: StepCtx| async move {
                    Ok::<_, StepError>(if resp.approved {
                        Either::Left(Executed {
                            action: req.action.clone(),
                            approved_by: resp.by.clone(),
                        })
                    } else {
                        Either::Right(Declined {
                            action: req.action.clone(),
                        })
                    })
                },
            )
            .max_executions_per_run(1),
        )
        .build();
    match built {
        Ok(w) => w,
        Err(e) => panic!("ApprovalAgent is invalid: {e}"),
    }
}
