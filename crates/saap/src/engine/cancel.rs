//! Cancelling a run (DESIGN §8, issue 21 §4): the run ends with a `RunCancelledEvent` (an
//! `ExceptionEvent` subtype) appended like any outside event, so the core decides — the run
//! terminates, its pending timers are dropped, later completions of its running executions
//! are kept as after-stop evidence — and its running bodies see their
//! [`crate::StepCtx::cancellation`] token cancelled. Must not end a run any other way.

use super::apply::Input;
use super::error::EngineError;
use super::incoming::Incoming;
use super::shared::Shared;
use super::slot::RunSlot;
use crate::event::{Event, Payload, RunCancelledEvent};
use saap_dispatch::run::progress::Progress;
use saap_dispatch::{EventId, EventKind, NewEventType};
use saap_protocol::Classification;
use saap_protocol::hierarchy::names::RUN_CANCELLED_LINEAGE;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The longest reason kept, in bytes (a longer one is cut).
pub(super) const MAX_REASON_BYTES: usize = 4096;

impl Shared {
    /// [`crate::Engine::cancel`].
    pub(super) async fn cancel_run(
        self: &Arc<Self>,
        run_id: &str,
        reason: &str,
    ) -> Result<EventId, EngineError> {
        let slot = self.slot_or_ended(run_id).await?;
        if slot.lock().run.is_terminated() {
            return Err(already_ended(&slot));
        }
        let ev = self.cancellation_event(reason);
        let id = ev.id;
        match self.submit(&slot, Input::Append(ev)).await? {
            // It ended meanwhile: the cancellation is only evidence.
            Some(saap_dispatch::Appended::AfterStop { .. }) => Err(already_ended(&slot)),
            _ => Ok(id),
        }
    }

    /// The cancellation event for a run: of the workflow's own type when it declares
    /// `RunCancelledEvent`, else as a type it does not know, classified by its lineage (an
    /// exception: it ends the run either way).
    pub(super) fn cancellation_event(&self, reason: &str) -> Incoming {
        let mut end = reason.len().min(MAX_REASON_BYTES);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        let payload = Payload::typed(RunCancelledEvent::new(&reason[..end]));
        let kind = EventKind::from_classification(Classification::from_parent_event_names(
            RUN_CANCELLED_LINEAGE,
        ));
        let ty = match self.type_ids.get(RunCancelledEvent::NAME) {
            Some(t) => NewEventType::Known(*t),
            None => NewEventType::Foreign {
                name: RunCancelledEvent::NAME.to_string(),
                kind,
            },
        };
        Incoming {
            id: self.ids.next(),
            ty,
            kind,
            name: RunCancelledEvent::NAME.into(),
            payload,
            by: None,
        }
    }

    /// The run's cancellation signal: cancelled already when the run was cancelled, else
    /// cancelled when it is.
    pub(super) fn cancellation_token(&self, slot: &RunSlot) -> CancellationToken {
        let mut st = slot.lock();
        if st.run.progress() == Progress::Cancelled {
            let token = CancellationToken::new();
            token.cancel();
            return token;
        }
        st.cancel.get_or_insert_with(CancellationToken::new).clone()
    }
}

/// The error for cancelling a run that has already ended.
pub(super) fn already_ended(slot: &RunSlot) -> EngineError {
    EngineError::RunEnded {
        run_id: slot.run_id().to_string(),
        outcome: slot.lock().run.progress().as_str().to_string(),
    }
}
