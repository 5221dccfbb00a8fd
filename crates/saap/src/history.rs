//! Stored runs, read back without running anything: a run kept by the embedded store is
//! rebuilt by the dispatch core from its journal (recorded precondition results, no user
//! code), checked against its stored decision records, and can be exported as the
//! `saap-dispatch` [`History`] file that `saap explain --history FILE` reads.
//!
//! This is what the per-agent CLI's `runs` and `show` use; it never resumes a run (use
//! [`Engine::open`](crate::Engine::open) for that).

use crate::backend::{Backend, StoredEvent, StoredInput, StoredRun};
use crate::event::Payload;
use crate::workflow::Workflow;
use saap_dispatch::ids::run_key;
use saap_dispatch::record::Record;
use saap_dispatch::replay::{History, ReplayError, RunInput, replay};
use saap_dispatch::run::progress::Progress;
use saap_dispatch::run::{EventTy, NewEventType, RunStatus};
use saap_dispatch::{EventId, EventKind, ExecutionId, NewEvent, Origin, Run};
use std::collections::HashMap;
use std::sync::Arc;

/// Why a stored run cannot be read back.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HistoryExportError {
    #[error(
        "SAAP-H001: the decision records of run `{run_id}` cannot be read ({detail}); the store was written by another saap version or damaged"
    )]
    BadRecords { run_id: String, detail: String },
    /// The run's stored rows cannot be read (the store's error says why and what to do).
    #[error("SAAP-H003: run `{run_id}` cannot be shown: {detail}")]
    Damaged { run_id: String, detail: String },
    #[error("SAAP-H002: run `{run_id}` does not replay against this agent: {source}")]
    Replay {
        run_id: String,
        #[source]
        source: ReplayError,
    },
}

impl HistoryExportError {
    pub fn code(&self) -> &'static str {
        match self {
            HistoryExportError::BadRecords { .. } => "SAAP-H001",
            HistoryExportError::Replay { .. } => "SAAP-H002",
            HistoryExportError::Damaged { .. } => "SAAP-H003",
        }
    }
}

/// How a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// Still live: waiting for events or running steps.
    Live,
    /// Ended by a stop event.
    Stopped,
    /// Ended by an exception event.
    Failed,
    /// Ended by a cancellation (`Engine::cancel`, `<agent> cancel`).
    Cancelled,
}

impl RunOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Live => "live",
            RunOutcome::Stopped => "stopped",
            RunOutcome::Failed => "failed",
            RunOutcome::Cancelled => "cancelled",
        }
    }

    /// The outcome of a run's current state (from the core's [`Run::progress`]).
    pub fn of(run: &Run) -> RunOutcome {
        match run.progress() {
            Progress::Stopped => RunOutcome::Stopped,
            Progress::Failed => RunOutcome::Failed,
            Progress::Cancelled => RunOutcome::Cancelled,
            Progress::NotStarted | Progress::Running { .. } | Progress::Waiting { .. } => {
                RunOutcome::Live
            }
        }
    }
}

/// A stored run rebuilt by the core: its state, the journal that drove it, and payloads.
#[derive(Debug, Clone)]
pub struct StoredRunView {
    pub run_id: String,
    pub thread_id: String,
    pub workflow: String,
    pub run: Run,
    /// The journal, as the core's inputs.
    pub inputs: Vec<RunInput>,
    /// Fields of every stored event, by id.
    pub payloads: HashMap<EventId, Payload>,
    /// Display events shown by executions: (seq, execution).
    pub display_by: Vec<(u32, ExecutionId)>,
}

impl StoredRunView {
    /// Rebuilds a stored run: the journal goes through the core with the recorded
    /// precondition results, and the rebuilt records must equal the stored ones.
    pub fn rebuild(workflow: &Workflow, stored: &StoredRun) -> Result<Self, HistoryExportError> {
        let run_id = stored.meta.run_id.to_string();
        if let Some(damage) = stored.damage() {
            return Err(HistoryExportError::Damaged {
                run_id,
                detail: damage.to_string(),
            });
        }
        let spec = workflow.compiled();
        let records: Vec<Record> = stored
            .records
            .iter()
            .map(|r| serde_json::from_value(r.clone()))
            .collect::<Result<_, _>>()
            .map_err(|e| HistoryExportError::BadRecords {
                run_id: run_id.clone(),
                detail: e.to_string(),
            })?;
        let mut payloads = HashMap::new();
        let mut shown_by = Vec::new();
        let mut to_new = |e: &StoredEvent| {
            payloads.insert(e.id, e.payload.clone());
            let ty = match spec.type_id(&e.name) {
                Some(t) => NewEventType::Known(t),
                None => NewEventType::Foreign {
                    name: e.name.clone(),
                    kind: EventKind::from_bits(e.kind),
                },
            };
            NewEvent { id: e.id, ty }
        };
        let mut inputs: Vec<RunInput> = Vec::with_capacity(stored.journal.len());
        for entry in &stored.journal {
            if let StoredInput::Append {
                event, by: Some(x), ..
            } = &entry.input
            {
                shown_by.push((event.id, ExecutionId(*x)));
            }
            let core = entry.input.core_inputs(&mut to_new);
            inputs.extend(core.before);
            inputs.push(core.input);
            inputs.extend(core.schedule);
            inputs.extend(core.delegate);
        }
        let run = replay(
            spec.clone(),
            run_key(&run_id),
            Some(stored.meta.fingerprint),
            &inputs,
            &records,
        )
        .map_err(|source| HistoryExportError::Replay {
            run_id: run_id.clone(),
            source,
        })?;
        let display_by = shown_by
            .into_iter()
            .filter_map(|(id, x)| run.seq_of(&id).map(|seq| (seq, x)))
            .collect();
        Ok(StoredRunView {
            run_id,
            thread_id: stored.meta.thread_id.to_string(),
            workflow: stored.meta.workflow.clone(),
            run,
            inputs,
            payloads,
            display_by,
        })
    }

    /// The run as a `saap-dispatch` History file (what `saap explain --history` reads).
    pub fn history(&self) -> History {
        History::new(&self.run, &self.inputs)
    }

    pub fn outcome(&self) -> RunOutcome {
        RunOutcome::of(&self.run)
    }

    /// The runs this one delegated to.
    pub fn children(&self) -> Vec<crate::engine::ChildView> {
        crate::engine::child_views(&self.run, |_, id| self.payloads.get(&id))
    }

    /// The fields of the event at `seq` (the ExceptionEvent the core made for a failed
    /// step carries the step's error).
    pub fn fields(&self, seq: u32) -> serde_json::Value {
        let Some(e) = self.run.log().get(seq as usize) else {
            return serde_json::Value::Null;
        };
        if let Some(p) = self.payloads.get(&e.id) {
            return (**p).clone();
        }
        match (e.ty, e.origin) {
            (EventTy::Known(t), Origin::Execution(x)) if t == self.run.spec().exception_type() => {
                let msg = self.run.execution_error(x).unwrap_or("step failed");
                serde_json::json!({ "message": msg, "http_status_code": 500 })
            }
            _ => serde_json::Value::Null,
        }
    }

    /// The event that ended the run and its fields, if it ended.
    pub fn result(&self) -> Option<(String, serde_json::Value)> {
        match self.run.status() {
            RunStatus::Terminated { by } => {
                let ty = self.run.log()[by as usize].ty;
                Some((self.run.type_name(ty).to_string(), self.fields(by)))
            }
            _ => None,
        }
    }

    /// When the run was started (seconds since the epoch, from its ObjectId-style id).
    pub fn started_unix(&self) -> Option<u32> {
        saap_protocol::EventId::parse(&self.run_id)
            .ok()
            .map(|id| id.object_id_seconds())
    }
}

/// Every stored run of `workflow` in a backend (ended ones included), oldest first.
pub async fn load(
    backend: &Arc<dyn Backend>,
    workflow: &Workflow,
) -> Result<Vec<StoredRun>, crate::backend::StoreError> {
    backend.load_runs(workflow.name(), false).wait().await
}

/// `YYYY-MM-DD HH:MM:SS` (UTC) for seconds since the epoch.
pub fn utc_time(secs: u32) -> String {
    let days = i64::from(secs / 86_400);
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_time_formats_known_instants() {
        assert_eq!(utc_time(0), "1970-01-01 00:00:00");
        assert_eq!(utc_time(951_782_400), "2000-02-29 00:00:00");
        assert_eq!(utc_time(1_798_761_599), "2026-12-31 23:59:59");
    }
}
