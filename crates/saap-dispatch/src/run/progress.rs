//! Where a run stands ([`Progress`], DESIGN §8), derived from its log every time it is
//! asked, never stored as a second truth: not begun, running, waiting (for an event, for a
//! timer when one is pending, for awaited children, stuck on an unmet obligation, or for a
//! person to resume it when its budget is spent), or
//! ended — stopped, failed or cancelled, by the event that ended it. Engines add what only they know (queued, claimed by an owner). Must not
//! change the run.

use super::{EventTy, Run, RunStatus};
use saap_protocol::hierarchy::names::RUN_CANCELLED_EVENT;

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// No start event yet.
    NotStarted,
    /// Executions are in flight.
    Running { executions: u32 },
    /// Nothing runs: the run waits for an event from outside, for its earliest pending
    /// timer when it has one (`timer`: due time, nanoseconds since the Unix epoch), and for
    /// the ends of its awaited children (`children`: how many). `unmet`: how many children
    /// ended with a report no step takes — with nothing else pending, only an event sent
    /// from outside (or a cancel) can move such a run. `budget`: its budget is spent (see
    /// `budget`): what it runs next waits for a grant (a person resuming it).
    Waiting {
        timer: Option<u64>,
        children: u32,
        unmet: u32,
        budget: bool,
    },
    /// Ended by a stop event.
    Stopped,
    /// Ended by an exception event (a failed step, an engine failure, or one sent).
    Failed,
    /// Ended by a cancellation (`RunCancelledEvent`).
    Cancelled,
}

impl Progress {
    /// The status as the command line and JSON name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Progress::NotStarted => "not_started",
            Progress::Running { .. } => "running",
            Progress::Waiting { budget: true, .. } => "waiting_budget",
            Progress::Waiting { children: 1.., .. } => "waiting_children",
            Progress::Waiting { timer: Some(_), .. } => "waiting_timer",
            Progress::Waiting { unmet: 1.., .. } => "waiting_unmet",
            Progress::Waiting { .. } => "waiting_event",
            Progress::Stopped => "stopped",
            Progress::Failed => "failed",
            Progress::Cancelled => "cancelled",
        }
    }

    /// Whether the run has ended.
    pub fn is_ended(self) -> bool {
        matches!(
            self,
            Progress::Stopped | Progress::Failed | Progress::Cancelled
        )
    }
}

impl Run {
    /// Where the run stands now.
    pub fn progress(&self) -> Progress {
        match self.status() {
            RunStatus::NotStarted => Progress::NotStarted,
            RunStatus::Terminated { by } => {
                let e = &self.log()[by as usize];
                if !e.kind.is_exception() {
                    Progress::Stopped
                } else if self.is_cancellation(e.ty) {
                    Progress::Cancelled
                } else {
                    Progress::Failed
                }
            }
            RunStatus::Live => match self.running().count() {
                0 => Progress::Waiting {
                    timer: self.next_timer_due(),
                    children: self.awaited_child_count() as u32,
                    unmet: self.unmet_obligation_count() as u32,
                    budget: self.budget_spent(),
                },
                n => Progress::Running {
                    executions: n as u32,
                },
            },
        }
    }

    /// Whether events of type `ty` cancel runs: the cancellation event or a type the
    /// workflow declares under it.
    fn is_cancellation(&self, ty: EventTy) -> bool {
        let name = self.type_name(ty);
        name == RUN_CANCELLED_EVENT
            || self
                .spec
                .hierarchy
                .lineage(name)
                .is_some_and(|l| l.iter().any(|n| n == RUN_CANCELLED_EVENT))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiled::EventKind;
    use crate::ids::{counter_event_id, derived_event_id};
    use crate::run::timers::TimerRequest;
    use crate::run::{DeclaredConditions, NewEvent, NewEventType, Outcome};
    use saap_protocol::Classification;
    use std::sync::Arc;

    const SPEC: &str = "name: W\nevents: [{name: Asked}, {name: Late}, {name: Done, parents: [StopEvent]}]\nsteps:\n  - {name: ask, params: [{name: s, kind: required, types: [StartEvent]}], outputs: [Asked, Late]}\n";

    fn started() -> (Run, crate::ids::ExecutionId) {
        let spec = crate::compile_spec_text(SPEC, crate::SpecSyntax::Yaml).expect("spec");
        let mut run = Run::new(Arc::new(spec), 5);
        assert_eq!(run.progress(), Progress::NotStarted);
        let start = run.spec().type_id("StartEvent").expect("type");
        run.append(
            NewEvent::known(counter_event_id(1), start),
            &mut DeclaredConditions,
        )
        .expect("start");
        let x = run.next_started().expect("ask");
        (run, x)
    }

    fn send(run: &mut Run, n: u64, ty: NewEventType) {
        run.append(
            NewEvent {
                id: counter_event_id(n),
                ty,
            },
            &mut DeclaredConditions,
        )
        .expect("appended");
    }

    #[test]
    fn a_run_runs_then_waits_for_an_event_then_for_its_timer() {
        let (mut run, x) = started();
        assert_eq!(run.progress(), Progress::Running { executions: 1 });
        assert_eq!(run.progress().as_str(), "running");
        let asked = run.spec().type_id("Asked").expect("type");
        run.complete(
            x,
            1,
            Outcome::Returned(vec![NewEvent::known(derived_event_id(5, x, 0), asked)]),
            &mut DeclaredConditions,
        )
        .expect("completed");
        assert_eq!(
            run.progress(),
            Progress::Waiting {
                timer: None,
                children: 0,
                unmet: 0,
                budget: false
            }
        );
        assert_eq!(run.progress().as_str(), "waiting_event");
        let late = run.spec().type_id("Late").expect("type");
        run.schedule(
            x,
            vec![TimerRequest {
                event: NewEvent::known(derived_event_id(5, x, 1), late),
                due_ns: 77,
            }],
        )
        .expect("scheduled");
        assert_eq!(
            run.progress(),
            Progress::Waiting {
                timer: Some(77),
                children: 0,
                unmet: 0,
                budget: false
            }
        );
        assert_eq!(run.progress().as_str(), "waiting_timer");
    }

    #[test]
    fn how_a_run_ended_is_read_from_the_event_that_ended_it() {
        let (mut stopped, _) = started();
        let done = stopped.spec().type_id("Done").expect("type");
        send(&mut stopped, 2, NewEventType::Known(done));
        assert_eq!(stopped.progress(), Progress::Stopped);

        let (mut failed, _) = started();
        let exception = failed.spec().type_id("ExceptionEvent").expect("type");
        send(&mut failed, 2, NewEventType::Known(exception));
        assert_eq!(failed.progress(), Progress::Failed);

        // The cancellation arrives as a type the workflow need not declare.
        let (mut cancelled, _) = started();
        let kind = EventKind::from_classification(Classification::from_parent_event_names(
            saap_protocol::hierarchy::names::RUN_CANCELLED_LINEAGE,
        ));
        send(
            &mut cancelled,
            2,
            NewEventType::Foreign {
                name: RUN_CANCELLED_EVENT.to_string(),
                kind,
            },
        );
        assert_eq!(cancelled.progress(), Progress::Cancelled);
        assert!(cancelled.progress().is_ended());
        assert_eq!(cancelled.progress().as_str(), "cancelled");
    }
}
