//! Answers to a process's work requests (DESIGN §8, seed 002's processes): a
//! `HumanWorkEvent` or `ProgramWorkEvent` sent to a run must name, in `request_event_id`,
//! a request of the matching kind in that run's log that no earlier answer took. A form
//! submitted twice, or an answer sent to the wrong run, is refused with what the run does
//! ask for instead of reaching a step that would take it for the real one.
//!
//! Checked under the run's lock and applied under it, so two answers to one request sent
//! at once cannot both be taken. Must not decide dispatch: a checked answer is appended
//! like any event, and the core decides what it starts.

use super::apply::Input;
use super::error::{EngineError, shown};
use super::incoming::Incoming;
use super::shared::Shared;
use super::slot::{RunSlot, RunState};
use crate::event::Event;
use crate::process::{
    HumanWorkEvent, HumanWorkRequestEvent, ProgramWorkEvent, ProgramWorkRequestEvent,
};
use saap_dispatch::Appended;
use std::sync::Arc;

/// Each kind of answer and the kind of request it answers.
const ANSWERS: [(&str, &str); 2] = [
    (HumanWorkEvent::NAME, HumanWorkRequestEvent::NAME),
    (ProgramWorkEvent::NAME, ProgramWorkRequestEvent::NAME),
];

impl Shared {
    /// Appends `ev`, sent from outside to run `slot`; an answer to a work request is
    /// checked first (see the module doc).
    pub(super) async fn submit_sent(
        self: &Arc<Self>,
        slot: &Arc<RunSlot>,
        ev: Incoming,
    ) -> Result<Option<Appended>, EngineError> {
        let Some((answer, request)) = self.answer_kind(&ev.name) else {
            return self.submit(slot, Input::Append(ev)).await;
        };
        let applied = {
            let mut st = slot.lock();
            self.check_answer(slot, &st, &ev, answer, request)?;
            let bind = self.launch_bind();
            self.apply_in(slot, &mut st, Input::Append(ev), Vec::new(), bind)?
        };
        self.launch(slot, applied).await
    }

    /// The answer kind of type `name` and the request kind it answers, if it is one.
    fn answer_kind(&self, name: &str) -> Option<(&'static str, &'static str)> {
        let h = &self.workflow.compiled().hierarchy;
        ANSWERS
            .into_iter()
            .find(|(answer, _)| h.is_subtype_of(name, answer))
    }

    fn check_answer(
        &self,
        slot: &RunSlot,
        st: &RunState,
        ev: &Incoming,
        answer: &str,
        request: &str,
    ) -> Result<(), EngineError> {
        let h = &self.workflow.compiled().hierarchy;
        let named = |seq: usize| -> Option<String> {
            let p = st.payloads.get(seq)?;
            let id = p.try_json().ok()?.get("request_event_id")?.as_str()?;
            Some(id.to_string())
        };
        let bad = |why: String| EngineError::BadAnswer {
            run_id: slot.run_id().to_string(),
            detail: why,
        };
        let wanted = ev
            .payload
            .try_json()
            .ok()
            .and_then(|j| j.get("request_event_id")?.as_str().map(String::from))
            .unwrap_or_default();
        let log = st.run.log();
        let is = |seq: usize, kind: &str| h.is_subtype_of(st.run.type_name(log[seq].ty), kind);
        let answered: std::collections::HashSet<String> = (0..log.len())
            .filter(|&seq| is(seq, answer))
            .filter_map(named)
            .collect();
        let open: Vec<String> = (0..log.len())
            .filter(|&seq| is(seq, request))
            .map(|seq| log[seq].id.to_string())
            .filter(|id| !answered.contains(id))
            .collect();
        let open_said = if open.is_empty() {
            format!("it has no {request} waiting for an answer")
        } else {
            format!("its open {request}s: {}", open.join(", "))
        };
        if wanted.is_empty() {
            return Err(bad(format!(
                "`{}` names no request in `request_event_id`; set it to the id of the {request} it answers ({open_said})",
                ev.name
            )));
        }
        let asked = (0..log.len()).any(|seq| is(seq, request) && log[seq].id.to_string() == wanted);
        if !asked {
            return Err(bad(format!(
                "`{}` answers request {}, which is not a {request} of this run ({open_said})",
                ev.name,
                shown(&wanted)
            )));
        }
        if !open.contains(&wanted) {
            return Err(bad(format!(
                "request {} was answered already; a second `{}` is not taken ({open_said})",
                shown(&wanted),
                ev.name
            )));
        }
        Ok(())
    }
}
