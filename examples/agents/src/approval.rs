//! A human-approval agent with a deadline: request → wait → response, or the deadline.
//!
//! ```text
//! UserMessageEvent → propose → ApprovalRequested (to a human; the run waits)
//!                            + ApprovalTimedOut (a durable timer, delivered at the deadline)
//! ApprovalRequested + (ApprovalGiven | ApprovalTimedOut, whichever comes first)
//!   → decide → Executed | Declined | Expired (stop)
//! ```
//!
//! The deadline is plain saap: `propose` returns the timeout event as `Delayed`, and `decide`
//! takes `Either<ApprovalGiven, ApprovalTimedOut>`. An answer first ends the run and drops
//! the timer; the deadline first ends it as `Expired`, and a late answer is kept as evidence.
//!
//! Carrying the approved action out is the agent's one outside call, so `decide` makes it as a
//! journaled effect (`ctx.effect("carry_out", …)`): when `decide` runs again after a crash, the
//! recorded ticket comes back and the action is not carried out twice. (Here the outside
//! system is stood for by a ticket stamped with the time; `show RUN` lists the effect.)

use crate::event;
use saap::{Delayed, Either, Required, Step, StepCtx, StepError, UserMessageEvent, Workflow};
use std::time::Duration;

/// How long a human has to answer, unless told otherwise.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(24 * 3600);

event!(
    /// Asks a human to approve an action.
    ApprovalRequested, "HumanInTheLoopRequestEvent" { question: String, action: String }
);
event!(
    /// The human's answer.
    ApprovalGiven, "HumanInTheLoopResponseEvent" { approved: bool, by: String }
);
event!(
    /// The deadline passed (delivered by the engine when it is due).
    ApprovalTimedOut, "ControlEvent" { action: String, after_secs: u64 }
);
event!(
    /// The action was carried out (`ticket`: what the outside system answered); ends the run.
    Executed, "StopEvent" { action: String, approved_by: String, ticket: String }
);
event!(
    /// The human declined; ends the run.
    Declined, "StopEvent" { action: String }
);
event!(
    /// Nobody answered in time; ends the run.
    Expired, "StopEvent" { action: String }
);

/// Carries an approved action out: stands for a call to the system that does it (a change
/// desk, a deploy API) and returns its ticket.
fn carry_out(action: &str) -> Result<String, std::convert::Infallible> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Ok(format!(
        "`{action}` done at {} UTC",
        saap::history::utc_time(now.min(u32::MAX as u64) as u32)
    ))
}

/// The agent with the default deadline of 24 hours.
pub fn workflow() -> Workflow {
    workflow_with_deadline(DEFAULT_DEADLINE)
}

/// The agent with a deadline of `deadline` from the request.
pub fn workflow_with_deadline(deadline: Duration) -> Workflow {
    let built = Workflow::builder("ApprovalAgent")
        .description("Proposes an action and waits for a human to approve it, until a deadline")
        .step(
            Step::new(
                "propose",
                move |q: Required<UserMessageEvent>, _ctx: StepCtx| async move {
                    let timeout = ApprovalTimedOut {
                        action: q.message.clone(),
                        after_secs: deadline.as_secs(),
                    };
                    Ok::<_, StepError>((
                        ApprovalRequested {
                            question: format!("May I do this: {}?", q.message),
                            action: q.message.clone(),
                        },
                        Delayed::after(deadline, timeout),
                    ))
                },
            )
            .max_executions_per_run(1),
        )
        .step(
            Step::new(
                "decide",
                |(req, resp): (
                    Required<ApprovalRequested>,
                    Required<Either<ApprovalGiven, ApprovalTimedOut>>,
                ),
                 ctx: StepCtx| async move {
                    let action = req.action.clone();
                    Ok::<_, StepError>(match resp.into_inner() {
                        Either::Left(given) if given.approved => Either::Left(Executed {
                            ticket: ctx
                                .effect("carry_out", &action, || async { carry_out(&action) })
                                .await?,
                            action,
                            approved_by: given.by,
                        }),
                        Either::Left(_) => Either::Right(Either::Left(Declined { action })),
                        Either::Right(_) => Either::Right(Either::Right(Expired { action })),
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
