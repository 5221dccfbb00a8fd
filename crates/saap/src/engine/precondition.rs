//! Preconditions during a transition: the core asks ([`PreconditionEvaluator`]), and
//! [`Pre`] answers with the user's function on the step's typed inputs (live) or with the
//! recorded result (replay, recovery). [`PreCache`] keeps each step's last typed inputs per
//! run so that a list fan-in re-evaluated on every arrival extracts each event once.
//! Must not decide readiness: the core calls in, and records what it was told.

use super::names::type_name;
use crate::event::Payload;
use crate::params::{BoundEvent, EventName};
use crate::workflow::StepImpl;
use saap_dispatch::ids::Seq;
use saap_dispatch::spec::ParamKind;
use saap_dispatch::{EventId, PreconditionCall, PreconditionEvaluator, StepIdx};
use std::panic::AssertUnwindSafe;

/// Answers precondition calls with the user's functions (live) or recorded results (replay).
pub(super) struct Pre<'a> {
    pub(super) steps: &'a [StepImpl],
    pub(super) names: &'a [EventName],
    pub(super) payloads: &'a [Payload],
    pub(super) pending: &'a [(EventId, Payload)],
    /// The results, for a journal entry (`None` without a journal: a list fan-in evaluated
    /// on every arrival allocates no vector per arrival).
    pub(super) results: Option<Vec<bool>>,
    pub(super) replay: Option<std::vec::IntoIter<bool>>,
    pub(super) exhausted: bool,
    /// The run's precondition cache (made on first use).
    pub(super) cache: &'a mut Option<Box<PreCache>>,
}

/// Per run: the typed inputs each step's precondition was last evaluated on, so that a list
/// fan-in re-evaluated on every arrival costs one extraction per event (DESIGN §4.4: a list
/// binding is a prefix of its match list). Dropped when the run ends.
#[derive(Default)]
pub(crate) struct PreCache {
    pub(super) entries: Vec<(StepIdx, PreEntry)>,
}

#[derive(Default)]
pub(super) struct PreEntry {
    /// The step's `I: Inputs`, or nothing after a failed evaluation.
    pub(super) value: crate::workflow::PreCacheSlot,
    /// Per parameter: how many bound events `value` holds and the last one's sequence.
    pub(super) seen: Vec<(usize, Seq)>,
    /// Buffers of the evaluation's arguments, kept empty between evaluations (a list
    /// fan-in re-evaluated on every arrival allocates none per arrival).
    pub(super) skipped: Vec<usize>,
    pub(super) bound: Vec<Vec<BoundEvent>>,
}

impl PreCache {
    pub(super) fn entry(&mut self, step: StepIdx) -> &mut PreEntry {
        let i = match self.entries.iter().position(|(s, _)| *s == step) {
            Some(i) => i,
            None => {
                self.entries.push((step, PreEntry::default()));
                self.entries.len() - 1
            }
        };
        &mut self.entries[i].1
    }
}

impl PreconditionEvaluator for Pre<'_> {
    fn evaluate(&mut self, call: &PreconditionCall<'_>) -> bool {
        if let Some(it) = &mut self.replay {
            return it.next().unwrap_or_else(|| {
                self.exhausted = true;
                false
            });
        }
        let Some(f) = self
            .steps
            .get(call.step as usize)
            .and_then(|s| s.precondition.as_ref())
        else {
            self.record(true);
            return true;
        };
        let n = call.bindings.len();
        let log = call.run.log();
        let params = &call.run.spec().steps[call.step as usize].params;
        let entry = self.cache.get_or_insert_with(Box::default).entry(call.step);
        // A list parameter whose binding still starts with the events the cached inputs
        // hold is extended with the events after them only (each event is extracted once
        // over a fan-in, not on every arrival); any other parameter is extracted whole.
        let cached = entry.value.is_some() && entry.seen.len() == n;
        let mut skipped = std::mem::take(&mut entry.skipped);
        let mut bound = std::mem::take(&mut entry.bound);
        skipped.clear();
        if bound.len() != n {
            bound.truncate(n);
            bound.resize_with(n, Vec::new);
        }
        // What the cached inputs will hold, per parameter, updated as each is read.
        entry.seen.resize(n, (0, 0));
        for (pi, events) in bound.iter_mut().enumerate() {
            let seqs = call.bound(pi as u32);
            let keep = match entry.seen[pi] {
                (len, last)
                    if cached
                        && params.get(pi).map(|p| p.kind) == Some(ParamKind::List)
                        && len > 0
                        && seqs.get(len - 1) == Some(&last) =>
                {
                    len
                }
                _ => 0,
            };
            entry.seen[pi] = (seqs.len(), seqs.last().copied().unwrap_or(0));
            skipped.push(keep);
            events.clear();
            events.extend(seqs[keep..].iter().map(|&seq| {
                let id = log[seq as usize].id;
                let payload = self
                    .payloads
                    .get(seq as usize)
                    .cloned()
                    .or_else(|| {
                        self.pending
                            .iter()
                            .find(|(i, _)| *i == id)
                            .map(|(_, p)| p.clone())
                    })
                    .unwrap_or_else(|| Payload::from_json(serde_json::Value::Null));
                BoundEvent {
                    id,
                    name: type_name(self.names, log[seq as usize].ty),
                    payload,
                }
            }));
        }
        // A precondition that reads the run's config asks for the start event's fields.
        let start = || crate::config::start_payload(call.run, self.payloads, self.pending);
        let value = &mut entry.value;
        let result = match std::panic::catch_unwind(AssertUnwindSafe(|| {
            f(&bound, &skipped, value, &start)
        })) {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "precondition could not read its inputs; treated as false");
                false
            }
            Err(_) => {
                tracing::error!("precondition panicked; treated as false");
                false
            }
        };
        // The buffers go back to the entry, emptied (the bound events are released).
        for events in &mut bound {
            events.clear();
        }
        entry.skipped = skipped;
        entry.bound = bound;
        self.record(result);
        result
    }
}

impl Pre<'_> {
    /// Keeps a result for the journal entry, when there is one.
    pub(super) fn record(&mut self, result: bool) {
        if let Some(r) = &mut self.results {
            r.push(result);
        }
    }
}
