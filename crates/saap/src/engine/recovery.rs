//! Rebuilding a stored run: its journal replayed through the core (recorded precondition
//! results reused), the rebuilt records checked against the stored ones, and the run put
//! back in the table. Used by `Engine::open` and by reads of ended runs; its entry-by-entry
//! application ([`Shared::apply_stored`]) is also what a replay (`replay`) drives.

use super::ids::RunIdText;
use super::payloads::fill_payloads;

use super::precondition::Pre;
use super::run_names::Thread;
use super::shared::Shared;
use super::slot::{RunSlot, RunState, keep_timer_payloads, take_due_payloads};
use crate::backend::{JournalEntry, StoredEvent, StoredInput, StoredRun};
use saap_dispatch::ids::run_key;
use saap_dispatch::{EventKind, ExecutionId, NewEvent, NewEventType, Run};
use std::sync::Arc;

impl Shared {
    /// Rebuilds a stored run through the core. Returns the slot and whether the run ended.
    pub(super) fn rebuild(&self, s: StoredRun) -> Result<(Arc<RunSlot>, bool), String> {
        if let Some(damage) = s.damage() {
            return Err(damage.to_string());
        }
        let spec = self.workflow.compiled();
        let current = self.fingerprint;
        if s.meta.fingerprint != current {
            return Err(format!(
                "SAAP-R001: the workflow changed since this run was recorded (fingerprint {:016x}, now {current:016x}); resume it with the workflow version that produced it",
                s.meta.fingerprint
            ));
        }
        let key = run_key(&s.meta.run_id);
        let slot = Arc::new(RunSlot::new(
            RunIdText::from(&*s.meta.run_id),
            Thread::Given(s.meta.thread_id.clone()),
            Run::new(spec.clone(), key),
        ));
        {
            let mut guard = slot.lock();
            let st = &mut *guard;
            for (i, entry) in s.journal.iter().enumerate() {
                self.apply_stored(st, i, entry, Preconditions::Recorded)?;
            }
            // Compared record by record as each serializes (no copy of either side).
            let now = st.run.records();
            let both = now.len().min(s.records.len());
            let differs = (0..both)
                .find(|&i| {
                    now.get(i)
                        .is_none_or(|r| !saap_dispatch::json_eq::serializes_to(&r, &s.records[i]))
                })
                .or((now.len() != s.records.len()).then_some(both));
            if let Some(index) = differs {
                return Err(format!(
                    "SAAP-R002: replay diverged at record {index}: the log says {}, the workflow now decides {}",
                    s.records
                        .get(index)
                        .map(|v| v.to_string())
                        .unwrap_or_else(|| "nothing more".into()),
                    now.get(index)
                        .and_then(|r| serde_json::to_string(&r).ok())
                        .unwrap_or_else(|| "nothing more".into()),
                ));
            }
            st.run.take_started();
            st.journal_len = s.journal.len() as u64;
            st.records_sent = st.run.records().len();
            st.ended_sent = s.ended;
            st.end_durable = s.ended;
            st.created = true;
        }
        Ok((slot, s.ended))
    }
}

/// How a stored entry's preconditions are answered when it is applied again.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Preconditions {
    /// With the results the entry recorded (recovery: the run goes on as it went).
    Recorded,
    /// By the user's functions, anew (replay: a changed precondition shows as a changed
    /// decision record).
    Live,
}

impl Shared {
    /// Applies stored journal entry `i` to the run in `st` through the core: its inputs (a
    /// completion's timers and children with it), the payloads of the events it logs and of
    /// the timers it sets, the execution that showed a display event. The error says which
    /// entry could not be applied, and why.
    pub(super) fn apply_stored(
        &self,
        st: &mut RunState,
        i: usize,
        entry: &JournalEntry,
        preconditions: Preconditions,
    ) -> Result<(), String> {
        let spec = self.workflow.compiled();
        let to_new = |e: &StoredEvent| {
            let ty = match spec.type_id(&e.name) {
                Some(t) => NewEventType::Known(t),
                None => NewEventType::Foreign {
                    name: e.name.clone(),
                    kind: EventKind::from_bits(e.kind),
                },
            };
            NewEvent { id: e.id, ty }
        };
        let payload = |e: &StoredEvent| (e.id, e.payload.clone());
        let mut pending = Vec::new();
        let mut shown_by = None;
        let mut timers = Vec::new();
        // The payloads of the events this entry logs (and of the timers it sets).
        match &entry.input {
            StoredInput::Append { event, by, .. } => {
                shown_by = by.map(|x| (event.id, ExecutionId(x)));
                pending.push(payload(event));
            }
            StoredInput::Complete {
                outputs,
                timers: t,
                children,
                ..
            } => {
                pending.extend(outputs.iter().flatten().map(payload));
                timers.extend(t.iter().map(|t| t.event.payload.clone()));
                // Children's deadlines: timers the core sets after those (awaited
                // children only, as the engine gives no detached child one).
                timers.extend(
                    children
                        .iter()
                        .filter_map(|c| c.deadline.as_ref())
                        .map(|t| t.event.payload.clone()),
                );
            }
            StoredInput::Clock { now_ns } => {
                take_due_payloads(&st.run, &mut st.timers, *now_ns, &mut pending)
            }
            StoredInput::ChildEnded { event, .. } => pending.push(payload(event)),
            StoredInput::Retry { .. } | StoredInput::Budget(_) => {}
        }
        let crate::backend::CoreInputs {
            before,
            input,
            schedule,
            delegate,
        } = entry.input.core_inputs(to_new);
        let recorded = (preconditions == Preconditions::Recorded)
            .then(|| entry.preconditions.clone().into_iter());
        let mut pre = Pre {
            replay: recorded,
            ..self.pre(&st.payloads, &pending, &mut st.pre_cache)
        };
        let bad = |e: saap_dispatch::run::input::InputError| {
            format!("SAAP-R003: journal entry {i} cannot be applied: {e}")
        };
        if let Some(before) = before {
            st.run.apply(before, &mut pre).map_err(bad)?;
        }
        st.run.apply(input, &mut pre).map_err(bad)?;
        let first_timer = st.run.timers().len();
        if let Some(schedule) = schedule {
            st.run.apply(schedule, &mut pre).map_err(bad)?;
        }
        if let Some(delegate) = delegate {
            st.run.apply(delegate, &mut pre).map_err(bad)?;
        }
        if pre.exhausted {
            return Err(format!(
                "SAAP-R002: replay diverged at journal entry {i}: the workflow now evaluates more preconditions than were recorded"
            ));
        }
        fill_payloads(st, &mut pending);
        if !timers.is_empty() {
            keep_timer_payloads(st, first_timer, timers);
        }
        if let Some((id, x)) = shown_by
            && let Some(seq) = st.run.seq_of(&id)
        {
            st.shown_by().push((seq, x));
        }
        Ok(())
    }
}
