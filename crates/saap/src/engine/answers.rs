//! Answers to a process's work requests (DESIGN §8, seed 002's processes): a
//! `HumanWorkEvent` or `ProgramWorkEvent` sent to a run must name, in `request_event_id`,
//! a request of the matching kind in that run's log that no earlier answer took
//! ([`crate::process::check_answer`]). A form submitted twice, or an answer sent to the
//! wrong run, is refused with what the run does ask for instead of reaching a step that
//! would take it for the real one.
//!
//! Checked under the run's lock and applied under it, so two answers to one request sent
//! at once cannot both be taken. Must not decide dispatch: a checked answer is appended
//! like any event, and the core decides what it starts.

use super::apply::Input;
use super::error::EngineError;
use super::incoming::Incoming;
use super::shared::Shared;
use super::slot::RunSlot;
use crate::process::{ANSWERS, check_answer};
use saap_dispatch::Appended;
use std::sync::Arc;

impl Shared {
    /// Appends `ev`, sent from outside to run `slot`; an answer to a work request is
    /// checked first (see the module doc).
    pub(super) async fn submit_sent(
        self: &Arc<Self>,
        slot: &Arc<RunSlot>,
        ev: Incoming,
    ) -> Result<Option<Appended>, EngineError> {
        if !self.may_answer(&ev.name) {
            return self.submit(slot, Input::Append(ev)).await;
        }
        let applied = {
            let mut st = slot.lock();
            let fields = ev.payload.try_json()?;
            let logged = |seq: u32| st.payloads.get(seq as usize)?.try_json().ok().cloned();
            check_answer(&st.run, logged, &ev.name, fields).map_err(|detail| {
                EngineError::BadAnswer {
                    run_id: slot.run_id().to_string(),
                    detail,
                }
            })?;
            let bind = self.launch_bind();
            self.apply_in(slot, &mut st, Input::Append(ev), Vec::new(), bind)?
        };
        self.launch(slot, applied).await
    }

    /// Whether events of type `name` answer work requests (most events do not: they are
    /// appended without a look at the run).
    fn may_answer(&self, name: &str) -> bool {
        let h = &self.workflow.compiled().hierarchy;
        ANSWERS
            .iter()
            .any(|(answer, _)| h.is_subtype_of(name, answer))
    }
}
