//! Replaying a stored run (issue 23 §1): its journal fed to the dispatch core again, entry
//! by entry, and at each recorded completion the execution's body run anew on the inputs
//! the core binds, its `StepCtx::effect` calls answered from the run's effect journal, its
//! outcome and display events compared with the record ([`crate::replay`]). Preconditions
//! are evaluated anew, and every decision record compared with the stored one. The first
//! difference ends the replay and is reported; nothing is written anywhere.
//!
//! The bodies run on a scratch in-memory engine of the same workflow (RunContext writes go
//! there; the workflow's resources are the real ones). Must not call out: an effect the
//! record does not hold fails the body (`SAAP-E023`) instead of being made.

use super::Engine;
use super::invocation::{Invocation, bind_events};
use super::recovery::Preconditions;
use super::run_names::Thread;
use super::shared::Shared;
use super::slot::{RunSlot, RunState};
use crate::backend::effects::{RecordedEffects, Replayed};
use crate::backend::{
    Backend, EffectAt, EffectLimits, EffectRecord, StoredInput, StoredRun, memory::MemoryBackend,
};
use crate::context::{ContextError, CtxRun, DisplaySink, RemoteRun, RunHost, StepCtx};
use crate::event::Payload;
use crate::params::BoundEvent;
use crate::replay::{
    DivergenceKind, RecordedOutcome, ReplayDivergence, ReplayError, ReplayReport,
    display_difference, outcome_difference,
};
use crate::workflow::Workflow;
use saap_dispatch::diff::record_name;
use saap_dispatch::ids::{OutputIds, run_key};
use saap_dispatch::{ExecutionId, NewEventType, Run, StepIdx};
use serde_json::Value;
use std::any::{Any, TypeId};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long one body may take in a replay before it is reported stuck: a body whose outside
/// calls are all answered from the record has nothing to wait for.
const BODY_LIMIT: Duration = Duration::from_secs(60);

impl Engine {
    /// Replays stored run `run_id` of this engine's store with this engine's workflow (see
    /// [`Engine::replay_stored`]): the regression check after a code change. Reads the
    /// store; writes nothing.
    pub async fn replay(&self, run_id: &str) -> Result<ReplayReport, ReplayError> {
        let workflow = &self.shared.workflow;
        let backend = &self.shared.backend;
        let stored = backend
            .read_run(workflow.name(), run_id)
            .wait()
            .await?
            .ok_or_else(|| ReplayError::NoRun {
                run_id: run_id.to_string(),
                workflow: workflow.name().to_string(),
            })?;
        let effects = backend.effects(run_id).wait().await?;
        Engine::replay_stored(workflow, &stored, effects).await
    }

    /// Re-runs a stored run's step bodies against its record, through the dispatch core:
    /// each recorded completion's execution runs again on the inputs the core binds, its
    /// effects (`StepCtx::effect`, every `saap::llm` model and tool call) answered from
    /// `effects` — nothing is called out — and its outcome, its display events and every
    /// decision record are compared with the record. Reports the run reproduced, or the
    /// first place it was not ([`ReplayReport::divergence`]): a changed body, a changed
    /// workflow (a changed fingerprint is reported, not refused), a body that depends on
    /// what the record does not hold (the clock, randomness, a call not made through
    /// `StepCtx::effect`). ThreadContext starts empty; RunContext holds what the replayed
    /// bodies write.
    pub async fn replay_stored(
        workflow: &Workflow,
        stored: &StoredRun,
        effects: Vec<EffectRecord>,
    ) -> Result<ReplayReport, ReplayError> {
        if let Some(detail) = &stored.damaged {
            return Err(ReplayError::Damaged {
                run_id: stored.meta.run_id.to_string(),
                detail: detail.clone(),
            });
        }
        let scratch = Engine::one(
            workflow.clone(),
            Arc::new(MemoryBackend::new()),
            super::EngineOptions::default(),
        );
        let replayer = Replayer {
            shown: Arc::new(Shown {
                shared: scratch.shared.clone(),
                events: Mutex::default(),
            }),
            shared: scratch.shared.clone(),
            host: Arc::new(ReplayHost {
                shared: scratch.shared.clone(),
                effects: Mutex::new(RecordedEffects::new(effects)),
            }),
        };
        Ok(replayer.replay(stored).await)
    }
}

/// One replay: the scratch engine whose workflow runs the bodies, and the host their
/// contexts see.
struct Replayer {
    shared: Arc<Shared>,
    host: Arc<ReplayHost>,
    /// Where the body being replayed shows its display events (emptied after each body).
    shown: Arc<Shown>,
}

impl Replayer {
    async fn replay(&self, stored: &StoredRun) -> ReplayReport {
        let meta = &stored.meta;
        let run_id: Arc<str> = meta.run_id.clone();
        let spec = self.shared.workflow.compiled();
        let mut report = ReplayReport {
            run_id: run_id.to_string(),
            workflow: meta.workflow.clone(),
            recorded_fingerprint: format!("{:016x}", meta.fingerprint),
            fingerprint: format!("{:016x}", spec.fingerprint()),
            journal_entries: stored.journal.len(),
            entries_reproduced: 0,
            executions_run: 0,
            effects_served: 0,
            records: stored.records.len(),
            records_reproduced: 0,
            divergence: None,
        };
        let key = run_key(&run_id);
        let slot = RunSlot::new(
            run_id.as_ref().into(),
            Thread::Given(meta.thread_id.clone()),
            Run::new(spec.clone(), key),
        );
        for (i, entry) in stored.journal.iter().enumerate() {
            if let StoredInput::Complete {
                execution,
                attempt,
                outputs,
                error,
                timers,
                ..
            } = &entry.input
            {
                let x = ExecutionId(*execution);
                let recorded = RecordedOutcome {
                    error: error.as_deref(),
                    outputs: outputs.as_deref().unwrap_or_default(),
                    timers,
                };
                report.executions_run += 1;
                if let Some(d) = self.run_body(&slot, i, x, *attempt, &recorded).await {
                    report.divergence = Some(d);
                    break;
                }
            }
            let mut st = slot.lock();
            if let Err(detail) = self
                .shared
                .apply_stored(&mut st, i, entry, Preconditions::Live)
            {
                report.divergence = Some(ReplayDivergence {
                    kind: DivergenceKind::Journal,
                    entry: i,
                    execution: None,
                    step: None,
                    attempt: None,
                    record: None,
                    recorded: serde_json::to_value(&entry.input).unwrap_or_default(),
                    replayed: Value::Null,
                    detail: format!(
                        "the recorded input no longer applies to the replayed run: {detail}"
                    ),
                });
                break;
            }
            if let Some(d) = compare_records(&st, stored, i, &mut report.records_reproduced) {
                report.divergence = Some(d);
                break;
            }
            report.entries_reproduced = i + 1;
        }
        if report.divergence.is_none() && report.records_reproduced < stored.records.len() {
            let index = report.records_reproduced;
            report.divergence = Some(ReplayDivergence {
                kind: DivergenceKind::Decision,
                entry: stored.journal.len(),
                execution: None,
                step: None,
                attempt: None,
                record: Some(index),
                recorded: stored.records[index].clone(),
                replayed: Value::Null,
                detail: "the record goes on where the replayed run has decided everything".into(),
            });
        }
        report.effects_served = self
            .host
            .effects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .served();
        report
    }

    /// Runs the body of execution `x` (attempt `attempt`), completed by journal entry
    /// `entry`, on the inputs the replayed core bound, and compares what it did with the
    /// record. `None`: the same.
    async fn run_body(
        &self,
        slot: &RunSlot,
        entry: usize,
        x: ExecutionId,
        attempt: u32,
        recorded: &RecordedOutcome<'_>,
    ) -> Option<ReplayDivergence> {
        let bound = {
            let mut st = slot.lock();
            bind(&mut st, &self.shared, x, attempt)
        };
        let Some((step, inputs, start)) = bound else {
            return Some(ReplayDivergence {
                kind: DivergenceKind::Journal,
                entry,
                execution: Some(x.0),
                step: None,
                attempt: Some(attempt),
                record: None,
                recorded: Value::Null,
                replayed: Value::Null,
                detail: format!(
                    "the record completes execution x{} here, which the replayed run never started",
                    x.0
                ),
            });
        };
        let shown = &self.shown;
        let ctx = StepCtx {
            run: std::mem::ManuallyDrop::new(CtxRun::Remote(Arc::new(RemoteRun {
                host: self.host.clone(),
                run_id: slot.run_id().clone(),
                thread_id: slot.thread_id().clone(),
                start,
                display: shown.clone(),
                displayed: AtomicU32::new(0),
                usage: Default::default(),
                cancel: tokio_util::sync::CancellationToken::new(),
            }))),
            execution: x,
            attempt,
        };
        let diverged = |kind, recorded, replayed, detail| ReplayDivergence {
            kind,
            entry,
            execution: Some(x.0),
            step: Some(self.shared.step_name(step).to_string()),
            attempt: Some(attempt),
            record: None,
            recorded,
            replayed,
            detail,
        };
        // Most bodies finish at their first poll: only one that does not is given a timer
        // (registering one per body cost more than the body).
        let body = self.shared.run_body(step, &inputs, ctx, Vec::new());
        let mut body = std::pin::pin!(body);
        let ran = match futures_util::future::poll_immediate(&mut body).await {
            Some(ran) => Ok(ran),
            None => tokio::time::timeout(BODY_LIMIT, body).await,
        };
        let ran = match ran {
            Ok(ran) => ran,
            Err(_) => {
                return Some(diverged(
                    DivergenceKind::Stuck,
                    Value::Null,
                    Value::Null,
                    format!(
                        "did not finish within {}s (it waits for something a replay does not give: an outside signal, a call not made through `StepCtx::effect`)",
                        BODY_LIMIT.as_secs()
                    ),
                ));
            }
        };
        if let Some((rec, now, detail)) = self.displays_differ(slot, x, shown) {
            return Some(diverged(DivergenceKind::Display, rec, now, detail));
        }
        outcome_difference(recorded, &ran)
            .map(|(rec, now, detail)| diverged(DivergenceKind::Outcome, rec, now, detail))
    }

    /// The first display event execution `x`'s replayed body showed that differs from the
    /// one the record holds under the same id.
    fn displays_differ(
        &self,
        slot: &RunSlot,
        x: ExecutionId,
        shown: &Shown,
    ) -> Option<(Value, Value, String)> {
        let shown = std::mem::take(&mut *shown.events.lock().unwrap_or_else(|p| p.into_inner()));
        let st = slot.lock();
        let ids = OutputIds::new(slot.run_key);
        shown.iter().find_map(|(n, name, payload)| {
            let recorded = st.run.seq_of(&ids.id(x, 0x4000_0000 | n)).map(|seq| {
                let ty = st.run.log()[seq as usize].ty;
                let fields = st.payloads.get(seq as usize).map(|p| (**p).clone());
                (st.run.type_name(ty).to_string(), fields.unwrap_or_default())
            });
            display_difference(*n, &(name.clone(), payload.clone()), recorded)
        })
    }
}

/// Execution `x`'s step, its inputs as the replayed core bound them, and the run's start
/// event's fields; `None` when the replayed run has no such execution.
fn bind(
    st: &mut RunState,
    shared: &Shared,
    x: ExecutionId,
    attempt: u32,
) -> Option<(StepIdx, Vec<Vec<BoundEvent>>, Payload)> {
    st.run.execution(x)?;
    let mut inv = Invocation::empty();
    bind_events(st, &shared.type_names, x, attempt, &mut inv);
    let start = crate::config::start_payload(&st.run, &st.payloads, &[]);
    Some((inv.step, inv.inputs, start))
}

/// Compares the decision records entry `entry` added with the stored ones, from
/// `*reproduced` on; advances it past those that are the same.
fn compare_records(
    st: &RunState,
    stored: &StoredRun,
    entry: usize,
    reproduced: &mut usize,
) -> Option<ReplayDivergence> {
    let records = st.run.records();
    while *reproduced < records.len() {
        let index = *reproduced;
        let Some(now) = records.get(index) else {
            break;
        };
        let recorded = stored.records.get(index);
        // Compared as it serializes: neither side is copied or read back.
        if recorded.is_some_and(|r| saap_dispatch::json_eq::serializes_to(&now, r)) {
            *reproduced += 1;
            continue;
        }
        let now_json = serde_json::to_value(&now).unwrap_or_default();
        let detail = match recorded {
            Some(r) => {
                let name = serde_json::from_value::<saap_dispatch::Record>(r.clone())
                    .map_or_else(|_| "?".to_string(), |r| record_name(&r));
                format!(
                    "the record decides `{name}` here, the replayed run `{}`",
                    record_name(&now)
                )
            }
            None => format!(
                "the replayed run goes on (`{}`) where the record has no more decisions",
                record_name(&now)
            ),
        };
        return Some(ReplayDivergence {
            kind: DivergenceKind::Decision,
            entry,
            execution: None,
            step: None,
            attempt: None,
            record: Some(index),
            recorded: recorded.cloned().unwrap_or(Value::Null),
            replayed: now_json,
            detail,
        });
    }
    None
}

/// The display events a replayed body showed: (counter, type name, fields). Refuses an
/// event that is not a display event of the workflow, as the engine does.
struct Shown {
    shared: Arc<Shared>,
    events: Mutex<Vec<(u32, String, Value)>>,
}

impl DisplaySink for Shown {
    fn show(
        &self,
        _execution: ExecutionId,
        n: u32,
        name: &'static str,
        payload: Payload,
    ) -> Pin<Box<dyn Future<Output = Result<(), ContextError>> + Send + 'static>> {
        let kind = match self.shared.out_type(None, name) {
            NewEventType::Known(t) => self.shared.workflow.compiled().type_info(t).kind,
            NewEventType::Foreign { kind, .. } => kind,
        };
        if !kind.is_display() || kind.is_control() {
            let name = name.to_string();
            return Box::pin(std::future::ready(Err(ContextError::NotDisplay { name })));
        }
        let fields = payload.try_json().cloned().unwrap_or_default();
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((n, name.to_string(), fields));
        Box::pin(std::future::ready(Ok(())))
    }
}

/// The engine as a replayed body's context sees it: the scratch engine's store and the
/// workflow's resources, with every effect answered from the record.
struct ReplayHost {
    shared: Arc<Shared>,
    effects: Mutex<RecordedEffects>,
}

impl RunHost for ReplayHost {
    fn backend(&self) -> &Arc<dyn Backend> {
        &self.shared.backend
    }

    fn show_display(
        self: Arc<Self>,
        run_id: &str,
        _execution: ExecutionId,
        _attempt: u32,
        _name: &'static str,
        _payload: Payload,
    ) -> Pin<Box<dyn Future<Output = Result<(), ContextError>> + Send + 'static>> {
        // A replayed body's context is a remote one: its displays go to its sink.
        let run_id = run_id.to_string();
        Box::pin(async move { Err(ContextError::RunGone { run_id }) })
    }

    fn start_fields(&self, run_id: &str) -> Result<Payload, ContextError> {
        Err(ContextError::RunGone {
            run_id: run_id.to_string(),
        })
    }

    fn resource(&self, id: TypeId) -> Option<Arc<dyn Any + Send + Sync>> {
        self.shared.workflow.inner.resources.get_any(id)
    }

    fn cancellation(&self, _run_id: &str) -> Option<tokio_util::sync::CancellationToken> {
        None
    }

    fn effect_limits(&self) -> EffectLimits {
        EffectLimits::default()
    }

    fn report_usage(&self, _: &str, _: ExecutionId, _: u32, _: u64, _: u64) {}

    fn replayed_effect(&self, at: &EffectAt, key: &str) -> Option<Replayed> {
        Some(
            self.effects
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(at, key),
        )
    }
}
