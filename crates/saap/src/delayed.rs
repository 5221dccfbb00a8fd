//! [`Delayed`]: an event a step returns to be delivered later — a durable timer (DESIGN §8).
//! The engine journals it with the step's completion, appends it to the run when it comes
//! due (after a restart too: a timer due while the engine was down fires when it opens), and
//! drops it when the run ends first. A deadline is then plain saap: a step that takes
//! `Either<Answer, TimedOut>` runs with whichever comes first. Must not keep time itself:
//! it only says when; the engine's clock decides when that is reached.

use crate::event::{Event, PayloadError};
use crate::params::{OutEvent, OutputDecl, Outputs, TupleOutput};
use std::num::NonZeroU64;
use std::time::{Duration, SystemTime};

/// An event to deliver at a time instead of with the step's completion.
///
/// ```
/// use saap::{Delayed, Event};
/// use std::time::Duration;
///
/// #[derive(Event, Debug, Clone, serde::Serialize, serde::Deserialize)]
/// struct ApprovalTimedOut { request: String }
///
/// // Returned by a step: delivered to the run 30 minutes after the step returned.
/// let deadline = Delayed::after(Duration::from_secs(1800), ApprovalTimedOut { request: "r1".into() });
/// assert_eq!(deadline.event().request, "r1");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Delayed<E> {
    event: E,
    when: When,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum When {
    /// After this long, counted from when the step returns.
    After(Duration),
    At(SystemTime),
}

impl<E: Event> Delayed<E> {
    /// Delivered `delay` after the step returns (zero: at once, as a timer).
    pub fn after(delay: Duration, event: E) -> Delayed<E> {
        Delayed {
            event,
            when: When::After(delay),
        }
    }

    /// Delivered at `time` (a time in the past: at once).
    pub fn at(time: SystemTime, event: E) -> Delayed<E> {
        Delayed {
            event,
            when: When::At(time),
        }
    }

    /// The event to deliver.
    pub fn event(&self) -> &E {
        &self.event
    }

    /// When it is due, in nanoseconds since the Unix epoch, for a step that returns now
    /// (at least 1: 0 stands for "not delayed").
    fn due_ns(&self) -> NonZeroU64 {
        let at = match self.when {
            When::After(d) => SystemTime::now().checked_add(d),
            When::At(t) => Some(t),
        };
        let ns = match at.map(|t| t.duration_since(SystemTime::UNIX_EPOCH)) {
            Some(Ok(d)) => u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
            // Before the epoch: due long ago, so at once.
            Some(Err(_)) => 1,
            // Past what the clock can hold: never in practice; the engine refuses it as
            // beyond its horizon.
            None => u64::MAX,
        };
        NonZeroU64::new(ns).unwrap_or(NonZeroU64::MIN)
    }
}

/// The event is declared as an output of the step like a plain `E` (it does arrive in the
/// run, later), so `saap check` sees a producer for the step that waits for it, and marked
/// `delayed` in the spec, so `simulate` and `explore` deliver it as a timer.
impl<E: Event> Outputs for Delayed<E> {
    fn declare(decl: &mut OutputDecl) {
        decl.add_delayed::<E>();
    }
    fn collect(self, out: &mut Vec<OutEvent>) -> Result<(), PayloadError> {
        let due_ns = Some(self.due_ns());
        let mut o = OutEvent::new(self.event);
        o.due_ns = due_ns;
        out.push(o);
        Ok(())
    }
}

/// A tuple member: `(Asked, Delayed<TimedOut>)` returns `Asked` now and `TimedOut` later.
impl<E: Event> TupleOutput for Delayed<E> {
    const NAME: &'static str = E::NAME;
    fn declare(decl: &mut OutputDecl) {
        decl.add_delayed::<E>();
    }
    fn push(self, out: &mut Vec<OutEvent>) -> Result<(), PayloadError> {
        self.collect(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{StopEvent, UserMessageEvent};

    #[test]
    fn a_delayed_output_is_declared_as_an_output_and_as_delayed() {
        let mut d = OutputDecl::default();
        <(UserMessageEvent, Delayed<StopEvent>)>::declare(&mut d);
        assert_eq!(d.types.len(), 2);
        assert_eq!(d.delayed, ["StopEvent"]);
        let mut d = OutputDecl::default();
        <Delayed<UserMessageEvent> as Outputs>::declare(&mut d);
        assert_eq!(d.delayed, ["UserMessageEvent"]);
        assert_eq!(d.types[0].0, "UserMessageEvent");
    }

    #[test]
    fn the_exported_spec_marks_a_delayed_output() {
        use crate::{Required, Step, StepCtx, StepError, Workflow};
        let wf = Workflow::builder("Later")
            .step(Step::new(
                "ask",
                |_: Required<UserMessageEvent>, _: StepCtx| async move {
                    Ok::<_, StepError>(Delayed::after(Duration::from_secs(60), StopEvent {}))
                },
            ))
            .build()
            .expect("workflow");
        let spec = serde_json::to_value(wf.spec()).expect("spec");
        assert_eq!(
            spec["steps"][0]["outputs"],
            serde_json::json!([{"event": "StopEvent", "delayed": true}])
        );
    }
}
