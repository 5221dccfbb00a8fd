//! A process (seed 002's process steps, DESIGN §8): onboarding a new hire hands work to a
//! person, a program and an agent in turn.
//!
//! ```text
//! Onboarding (a process: its steps take work events):
//!   NewHire (a ProcessStartEvent) → ask_hr → HumanWorkRequestEvent to "hr" (which team?)
//!                                            + HrMissing (a timer: HR's deadline)
//!   NewHire + (HumanWorkEvent | HrMissing) → create_account → ProgramWorkRequestEvent to
//!                                            "accounts" (or ProcessExceptionEvent: no answer)
//!   NewHire + ProgramWorkEvent → welcome → AgentWorkRequestEvent: a child run of WelcomeWriter
//!   ProgramWorkEvent + AgentWorkEvent → finish → ProcessStopEvent {login, note}, or
//!                                            ProcessExceptionEvent when the writer failed
//! WelcomeWriter (an agent):
//!   UserMessageEvent name → write → Note (stop)
//! ```
//!
//! The person and the program answer from outside: each sends its work event to the run
//! naming the request it answers (`request_event_id`, the request's event id as `show`
//! lists it); an answer that names no open request of the run is refused (`SAAP-E022`).
//! The agent's work is a child run (`runs --tree` shows it), given [`WRITER_TIMEOUT`].
//! `onboarding-process` is the program; both workflows run in it on one store.

use crate::event;
use saap::process::{
    AgentWorkEvent, AgentWorkRequestEvent, HumanWorkEvent, HumanWorkRequestEvent,
    ProcessExceptionEvent, ProcessStopEvent, ProgramWorkEvent, ProgramWorkRequestEvent,
};
use saap::{Delayed, Either, Required, Step, StepCtx, StepError, UserMessageEvent, Workflow};
use std::time::Duration;

/// How long HR has to say which team the hire joins.
pub const HR_DEADLINE: Duration = Duration::from_secs(3 * 24 * 3600);

/// How long the process waits for the welcome note.
pub const WRITER_TIMEOUT: Duration = Duration::from_secs(60);

event!(
    /// Starts an onboarding: who joins.
    NewHire, "ProcessStartEvent" { name: String }
);
event!(
    /// HR did not answer in time (delivered by the engine at the deadline).
    HrMissing, "ControlEvent" { name: String }
);
event!(
    /// The writer's welcome note; ends its run.
    Note, "StopEvent" { text: String }
);

/// The agent that writes welcome notes: a name starting with `!` makes it fail (to show a
/// failed agent's work reaching the process).
pub fn welcome_writer() -> Workflow {
    let built = Workflow::builder("WelcomeWriter")
        .step(Step::new(
            "write",
            |q: Required<UserMessageEvent>, _: StepCtx| async move {
                if q.message.starts_with('!') {
                    return Err(StepError::new(format!(
                        "cannot write a note for `{}`",
                        q.message
                    )));
                }
                Ok(Note {
                    text: format!("Welcome aboard, {}!", q.message),
                })
            },
        ))
        .build();
    match built {
        Ok(w) => w,
        Err(e) => panic!("the writer example is well formed: {e}"),
    }
}

/// The onboarding process, with the writer declared (`with_delegate`): an engine made for
/// it runs both.
pub fn onboarding() -> Workflow {
    onboarding_with_deadline(HR_DEADLINE)
}

/// The onboarding process, giving HR `deadline` to answer.
pub fn onboarding_with_deadline(deadline: Duration) -> Workflow {
    let built = Workflow::builder("Onboarding")
        .step(Step::new(
            "ask_hr",
            move |h: Required<NewHire>, _: StepCtx| async move {
                let ask =
                    HumanWorkRequestEvent::new("hr", format!("Which team does {} join?", h.name))
                        .instructions("Answer with the team's name.")
                        .form(serde_json::json!({"fields": {"team": "string"}}));
                let missing = Delayed::after(
                    deadline,
                    HrMissing {
                        name: h.name.clone(),
                    },
                );
                Ok::<_, StepError>((ask, missing))
            },
        ))
        .step(
            Step::new(
                "create_account",
                |(h, hr): (
                    Required<NewHire>,
                    Required<Either<HumanWorkEvent, HrMissing>>,
                ),
                 _: StepCtx| async move {
                    let Either::Left(hr) = &*hr else {
                        return Ok::<_, StepError>(Either::Right(ProcessExceptionEvent::new(
                            format!("HR did not say which team {} joins in time", h.name),
                        )));
                    };
                    let team = hr.form["team"].as_str().unwrap_or("unassigned");
                    let input = serde_json::json!({"name": h.name, "team": team});
                    Ok(Either::Left(ProgramWorkRequestEvent::new(
                        "accounts", &input,
                    )?))
                },
            )
            // The answer or the deadline, whichever comes first, decides.
            .max_executions_per_run(1),
        )
        .step(
            Step::new(
                "welcome",
                |(h, _): (Required<NewHire>, Required<ProgramWorkEvent>), _: StepCtx| async move {
                    let ask = AgentWorkRequestEvent::new(
                        "WelcomeWriter",
                        &UserMessageEvent::new(&h.name),
                    )?
                    .timeout(WRITER_TIMEOUT)
                    .expecting::<Note>();
                    Ok::<_, StepError>(ask)
                },
            )
            .delegates_to(["WelcomeWriter"]),
        )
        .step(Step::new(
            "finish",
            |(account, note): (Required<ProgramWorkEvent>, Required<AgentWorkEvent>),
             _: StepCtx| async move {
                if !note.stopped() {
                    return Ok::<_, StepError>(Either::Right(ProcessExceptionEvent::new(format!(
                        "the welcome note was not written: {}",
                        note.message()
                    ))));
                }
                let note = note.stop_event::<Note>()?;
                Ok(Either::Left(ProcessStopEvent {
                    result: serde_json::json!({
                        "login": account.output["login"],
                        "note": note.text,
                    }),
                }))
            },
        ))
        .build();
    match built {
        Ok(w) => w.with_delegate(welcome_writer()),
        Err(e) => panic!("the onboarding example is well formed: {e}"),
    }
}
