//! Step bodies of one run on any worker (issue 4; `WorkerOptions::steps = Steps::Shared`).
//!
//! The run's owner still makes every decision, in arrival order; only bodies move:
//! 1. the owner's engine hands each started execution to [`WorkQueue`] (an
//!    [`StepExecutor`]), which publishes it to the work-queue stream `saap_work_{Class}` on
//!    subject `saap.work.{Class}.{run}.{execution}.{attempt}` with `Nats-Msg-Id`
//!    `{run}.{execution}.{attempt}` (a re-publication is stored once): step index, bound
//!    inputs (ids, names, payloads), thread id, start event fields, workflow fingerprint;
//! 2. any worker of the class takes it from the shared pull consumer `saap_steps_{Class}`
//!    and runs the body, telling the server the delivery is in progress while it runs;
//!    display events go to the run's owner (`saap.show.{Class}.{owner}`, request/reply),
//!    which derives their ids from execution and counter as for a local body;
//! 3. the completion (outputs as JSON, or the error) goes to the run's current owner
//!    (`saap.done.{Class}.{owner}`, request/reply; found through the owner record, the
//!    owner itself when the body ran there), which applies it to the core and answers once
//!    it is journaled; only then is the work item acknowledged. A completion that is stale
//!    (the execution was retried after its owner changed) or a second one is dropped by the
//!    core and answered `ok`;
//! 4. a worker lost in the middle of a body: the work item is not acknowledged, the server
//!    delivers it again after the ack wait, and the body runs again with the same attempt
//!    (its outputs get the same derived ids). An owner lost: a worker that finds it dead
//!    (the sweep, or a completion looking for it) takes the run over; the core retries the
//!    execution as a new attempt (a new work item), and the old attempt's completion is
//!    refused as stale.

use super::inner::{Inner, Route};
use super::options::WorkerError;
use super::slots::Slots;
use crate::context::{ContextError, DisplaySink};
use crate::engine::EngineError;
use crate::engine::{LocalSlot, StepExecutor, Work, WorkUsage};
use crate::event::Payload;
use crate::params::{BoundEvent, OutEvent};
use async_nats::jetstream;
use bytes::Bytes;
use futures_util::StreamExt;
use saap_dispatch::{EventId, ExecutionId};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// The work-queue stream of an agent class.
pub fn work_stream(class: &str) -> String {
    format!("saap_work_{class}")
}

/// The shared pull consumer that hands work items to the workers of a class.
pub fn work_consumer(class: &str) -> String {
    format!("saap_steps_{class}")
}

/// One bound input event on the wire.
#[derive(serde::Serialize, serde::Deserialize)]
struct WireBound {
    id: EventId,
    name: String,
    payload: serde_json::Value,
}

/// A work item: one started execution.
#[derive(serde::Serialize, serde::Deserialize)]
struct WireWork {
    run: String,
    thread: String,
    x: u32,
    attempt: u32,
    step: u32,
    fingerprint: u64,
    inputs: Vec<Vec<WireBound>>,
    start: serde_json::Value,
}

/// A completion sent to the run's owner.
#[derive(serde::Serialize, serde::Deserialize)]
struct WireDone {
    run: String,
    x: u32,
    attempt: u32,
    /// Outputs (type name, fields) or the error.
    outcome: Result<Vec<(String, serde_json::Value)>, String>,
    /// The outputs delivered later ([`crate::Delayed`]): (index among the outputs, due time
    /// in nanoseconds since the Unix epoch). Absent from older workers' completions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    due: Vec<(u32, u64)>,
    /// What the body's model calls used, for the run's budget. Absent when nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    usage: Option<WorkUsage>,
}

/// A display event sent to the run's owner.
#[derive(serde::Serialize, serde::Deserialize)]
struct WireShow {
    run: String,
    x: u32,
    n: u32,
    name: String,
    payload: serde_json::Value,
}

/// Upper bound of a work item or completion (bound inputs travel inline).
const MAX_WORK_BYTES: usize = 8 * 1024 * 1024;
/// How long a pull for work items waits on an idle queue before it is asked again.
const PULL_EXPIRES: Duration = Duration::from_secs(1);
/// Tries to publish a work item before the execution is failed (about 30 s).
const PUBLISH_TRIES: u32 = 30;
/// Tries to hand a completion or display event to the run's owner (about 60 s).
const HANDOFF_TRIES: u32 = 60;

fn backoff(try_no: u32) -> Duration {
    Duration::from_millis(50u64 << try_no.min(5)).min(Duration::from_secs(1))
}

fn to_wire(work: &Work) -> Result<Vec<u8>, String> {
    let mut inputs = Vec::with_capacity(work.inputs.len());
    for param in &work.inputs {
        let mut bound = Vec::with_capacity(param.len());
        for b in param {
            bound.push(WireBound {
                id: b.id,
                name: b.name.to_string(),
                payload: b.payload.try_json().map_err(|e| e.to_string())?.clone(),
            });
        }
        inputs.push(bound);
    }
    let wire = WireWork {
        run: work.run_id.to_string(),
        thread: work.thread_id.to_string(),
        x: work.execution.0,
        attempt: work.attempt,
        step: work.step,
        fingerprint: work.fingerprint,
        inputs,
        start: work.start.try_json().map_err(|e| e.to_string())?.clone(),
    };
    serde_json::to_vec(&wire).map_err(|e| e.to_string())
}

fn from_wire(bytes: &[u8]) -> Result<Work, String> {
    if bytes.len() > MAX_WORK_BYTES {
        return Err(format!(
            "work item of {} bytes (limit {MAX_WORK_BYTES})",
            bytes.len()
        ));
    }
    let w: WireWork = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    Ok(Work {
        run_id: w.run.into(),
        thread_id: w.thread.into(),
        execution: ExecutionId(w.x),
        attempt: w.attempt,
        step: w.step,
        inputs: w
            .inputs
            .into_iter()
            .map(|p| {
                p.into_iter()
                    .map(|b| BoundEvent {
                        id: b.id,
                        name: b.name.into(),
                        payload: Payload::from_json(b.payload),
                    })
                    .collect()
            })
            .collect(),
        start: Payload::from_json(w.start),
        fingerprint: w.fingerprint,
    })
}

/// The owner's side: runs a started execution itself when one of its local slots is free,
/// else publishes it to the work queue.
pub(super) struct WorkQueue {
    pub inner: Weak<Inner>,
    pub slots: Arc<Slots>,
}

impl StepExecutor for WorkQueue {
    fn run_here(&self) -> Option<LocalSlot> {
        self.slots.try_take().map(LocalSlot::new)
    }

    fn execute(&self, work: Work) {
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        tokio::spawn(async move { inner.publish_work(work).await });
    }

    fn run_cancelled(&self, run_id: &str) {
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        let Some(subject) = super::body_cancels::cancel_subject(&inner.class, run_id) else {
            return;
        };
        // Core NATS, fire and forget: workers running its bodies now hear it.
        let client = inner.nats.client().clone();
        tokio::spawn(async move {
            if let Err(e) = client.publish(subject, Bytes::new()).await {
                tracing::warn!(error = %e, "a run's cancellation could not be announced to its bodies");
            }
        });
    }
}

/// The display sink of a body run from the work queue: display events go to the owner.
struct ToOwner {
    inner: Arc<Inner>,
    run_id: Arc<str>,
}

impl DisplaySink for ToOwner {
    fn show(
        &self,
        execution: ExecutionId,
        n: u32,
        name: &'static str,
        payload: Payload,
    ) -> Pin<Box<dyn Future<Output = Result<(), ContextError>> + Send + 'static>> {
        let inner = self.inner.clone();
        let run_id = self.run_id.clone();
        Box::pin(async move {
            let payload = payload.try_json().map_err(|e| ContextError::Type {
                key: name.to_string(),
                message: e.to_string(),
            })?;
            let wire = WireShow {
                run: run_id.to_string(),
                x: execution.0,
                n,
                name: name.to_string(),
                payload: payload.clone(),
            };
            let bytes = serde_json::to_vec(&wire).map_err(|e| ContextError::Type {
                key: name.to_string(),
                message: e.to_string(),
            })?;
            match inner.hand_to_owner(&run_id, "show", bytes).await {
                Ok(()) => Ok(()),
                Err(why) => Err(ContextError::Store(crate::backend::StoreError::Io {
                    detail: format!("cannot show `{name}` on the run's owner: {why}"),
                })),
            }
        })
    }
}

/// What the owner answered.
enum Answer {
    Ok,
    Refused(String),
    Retry(String),
}

impl Answer {
    fn bytes(self) -> Bytes {
        match self {
            Answer::Ok => Bytes::from_static(b"ok"),
            Answer::Refused(w) => Bytes::from(format!("refused:{w}")),
            Answer::Retry(w) => Bytes::from(format!("retry:{w}")),
        }
    }
}

impl Inner {
    /// Creates the work-queue stream and binds the shared pull consumer.
    pub(super) async fn work_consumer(
        &self,
    ) -> Result<jetstream::consumer::PullConsumer, WorkerError> {
        let js = self.nats.jetstream();
        let name = work_stream(&self.class);
        let err = |detail: String| {
            WorkerError::Nats(saap_nats::NatsError::Consumer {
                consumer: work_consumer(&self.class),
                stream: name.clone(),
                reason: detail,
            })
        };
        let stream = js
            .get_or_create_stream(jetstream::stream::Config {
                name: name.clone(),
                subjects: vec![format!("saap.work.{}.>", self.class)],
                storage: jetstream::stream::StorageType::File,
                retention: jetstream::stream::RetentionPolicy::WorkQueue,
                duplicate_window: Duration::from_secs(120),
                num_replicas: self.nats.settings().replicas.max(1),
                max_message_size: MAX_WORK_BYTES as i32,
                ..Default::default()
            })
            .await
            .map_err(|e| {
                err(format!(
                    "cannot create the work stream: {e}; is JetStream enabled?"
                ))
            })?;
        stream
            .get_or_create_consumer(
                &work_consumer(&self.class),
                jetstream::consumer::pull::Config {
                    durable_name: Some(work_consumer(&self.class)),
                    ack_policy: jetstream::consumer::AckPolicy::Explicit,
                    ack_wait: self.opts.work_ack_wait,
                    max_ack_pending: 10_000,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| err(format!("cannot create or bind it: {e}")))
    }

    /// The error of a pull from the work queue.
    fn pull_error(&self, detail: String) -> WorkerError {
        WorkerError::Nats(saap_nats::NatsError::Consumer {
            consumer: work_consumer(&self.class),
            stream: work_stream(&self.class),
            reason: format!("cannot pull from it: {detail}"),
        })
    }

    /// Every body through the queue (`local_slots: 0`): a continuous pull of
    /// `work_batch` items at a time, each run as it arrives.
    pub(super) async fn work_messages(
        &self,
        consumer: &jetstream::consumer::PullConsumer,
    ) -> Result<jetstream::consumer::pull::Stream, WorkerError> {
        consumer
            .stream()
            .max_messages_per_batch(self.opts.work_batch.max(1))
            .messages()
            .await
            .map_err(|e| self.pull_error(e.to_string()))
    }

    /// Adaptive placement: pulls work items only while local slots are free, as many as
    /// are free (at most `work_batch`), each holding a slot while it runs; until `stop`.
    pub(super) async fn pull_when_free(
        self: Arc<Self>,
        consumer: jetstream::consumer::PullConsumer,
        slots: Arc<Slots>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        loop {
            let free = tokio::select! {
                _ = stop.changed() => return,
                n = slots.wait_free() => n,
            };
            let asked = consumer
                .batch()
                .max_messages(free.min(self.opts.work_batch.max(1)))
                .expires(PULL_EXPIRES)
                .messages()
                .await;
            let mut batch = match asked {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(error = %self.pull_error(e.to_string()), "work queue pull failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            loop {
                tokio::select! {
                    _ = stop.changed() => return,
                    m = batch.next() => match m {
                        None => break,
                        Some(Err(e)) => {
                            tracing::warn!(error = %e, "work queue receive failed");
                            break;
                        }
                        Some(Ok(m)) => {
                            let busy = slots.take();
                            let me = self.clone();
                            tokio::spawn(async move {
                                me.run_work(m).await;
                                drop(busy);
                            });
                        }
                    }
                }
            }
        }
    }

    /// Publishes a started execution to the work queue (retried; after `PUBLISH_TRIES` the
    /// execution fails, which the run's `stop_on_error` turns into an ExceptionEvent).
    async fn publish_work(self: Arc<Self>, work: Work) {
        let subject = format!(
            "saap.work.{}.{}.{}.{}",
            self.class, work.run_id, work.execution.0, work.attempt
        );
        let msg_id = format!("{}.{}.{}", work.run_id, work.execution.0, work.attempt);
        let why = match to_wire(&work) {
            Err(e) => format!("its inputs cannot be encoded: {e}"),
            Ok(bytes) => {
                let bytes = Bytes::from(bytes);
                let mut last = String::new();
                let mut done = false;
                for t in 0..PUBLISH_TRIES {
                    let mut headers = async_nats::HeaderMap::new();
                    headers.insert("Nats-Msg-Id", msg_id.as_str());
                    let sent = self
                        .nats
                        .jetstream()
                        .publish_with_headers(subject.clone(), headers, bytes.clone())
                        .await;
                    let acked = match sent {
                        Ok(ack) => ack.await.map(|_| ()).map_err(|e| e.to_string()),
                        Err(e) => Err(e.to_string()),
                    };
                    match acked {
                        Ok(()) => {
                            done = true;
                            break;
                        }
                        Err(e) => {
                            tracing::debug!(%subject, error = %e, "publishing a work item failed; retrying");
                            last = e;
                            tokio::time::sleep(backoff(t)).await;
                        }
                    }
                }
                if done {
                    return;
                }
                format!("the work queue did not take it: {last}")
            }
        };
        tracing::error!(run_id = %work.run_id, execution = %work.execution, %why, "cannot hand an execution to the work queue; it fails");
        let r = self
            .engine
            .complete_work(
                &work.run_id,
                work.execution,
                work.attempt,
                Err(format!(
                    "execution {} could not be handed to the work queue `{}`: {why}",
                    work.execution,
                    work_stream(&self.class)
                )),
            )
            .await;
        if let Err(e) = r {
            tracing::error!(run_id = %work.run_id, error = %e, "cannot fail the execution");
        }
    }

    /// Runs one work item taken from the queue, hands its completion to the run's owner and
    /// acknowledges the item once the owner has journaled it.
    pub(super) async fn run_work(self: Arc<Self>, m: jetstream::Message) {
        let work = match from_wire(&m.payload) {
            Ok(w) => w,
            Err(e) => {
                tracing::error!(subject = %m.subject, error = %e, "work item refused; kept in the stream");
                let _ = m.ack_with(jetstream::AckKind::Term).await;
                return;
            }
        };
        if work.fingerprint != self.engine.fingerprint() {
            // Another version of the workflow started it: leave it to a worker that has it.
            tracing::warn!(run_id = %work.run_id, "work item of another workflow version; given back");
            let _ = m
                .ack_with(jetstream::AckKind::Nak(Some(Duration::from_secs(1))))
                .await;
            return;
        }
        let sink = Arc::new(ToOwner {
            inner: self.clone(),
            run_id: work.run_id.clone(),
        });
        let keep = self.opts.work_ack_wait / 3;
        let outcome = {
            let cancel = self.body_cancels.enter(&work.run_id);
            let body = self
                .engine
                .execute_work_metered(&work, sink, cancel.token());
            tokio::pin!(body);
            // First tick one period from now (a tick due now would cost a timer turn, ~1 ms).
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + keep, keep);
            loop {
                tokio::select! {
                    r = &mut body => break r,
                    _ = tick.tick() => {
                        // Keeps the server from delivering it to another worker meanwhile.
                        let _ = m.ack_with(jetstream::AckKind::Progress).await;
                    }
                }
            }
        };
        let (outcome, used) = outcome;
        let due: Vec<(u32, u64)> = match &outcome {
            Ok(outs) => outs
                .iter()
                .enumerate()
                .filter_map(|(i, o)| o.due_ns.map(|d| (i as u32, d.get())))
                .collect(),
            Err(_) => Vec::new(),
        };
        let outcome = outcome.and_then(|outs| {
            outs.into_iter()
                .map(|o| {
                    o.payload
                        .try_json()
                        .map(|v| (o.name.to_string(), v.clone()))
                        .map_err(|e| e.to_string())
                })
                .collect::<Result<Vec<_>, String>>()
        });
        let done = WireDone {
            run: work.run_id.to_string(),
            x: work.execution.0,
            attempt: work.attempt,
            outcome,
            due,
            usage: (used != WorkUsage::default()).then_some(used),
        };
        let bytes = match serde_json::to_vec(&done) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(error = %e, "cannot encode a completion");
                return;
            }
        };
        // Keep the item in progress while the owner is looked for.
        let handed = {
            let hand = self.hand_to_owner(&work.run_id, "done", bytes);
            tokio::pin!(hand);
            // First tick one period from now (a tick due now would cost a timer turn, ~1 ms).
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + keep, keep);
            loop {
                tokio::select! {
                    r = &mut hand => break r,
                    _ = tick.tick() => {
                        let _ = m.ack_with(jetstream::AckKind::Progress).await;
                    }
                }
            }
        };
        match handed {
            Ok(()) => {
                // A plain ack (no confirmation round trip): if it is lost, the item is
                // delivered again and its second completion is dropped by the core.
                if let Err(e) = m.ack().await {
                    tracing::warn!(error = %e, "acknowledging a work item failed; it may run again");
                }
            }
            Err(why) => {
                tracing::warn!(run_id = %work.run_id, %why, "completion not taken; the work item will run again");
                let _ = m
                    .ack_with(jetstream::AckKind::Nak(Some(Duration::from_secs(1))))
                    .await;
            }
        }
    }

    /// Sends a completion (`kind` "done") or display event ("show") to the run's current
    /// owner — applied here when this worker owns it — and returns once the owner has made it
    /// durable (or dropped it as stale). A run nobody owns has ended and was released: the
    /// message is not needed any more.
    async fn hand_to_owner(
        self: &Arc<Self>,
        run_id: &str,
        kind: &str,
        bytes: Vec<u8>,
    ) -> Result<(), String> {
        let bytes = Bytes::from(bytes);
        let mut last = String::new();
        for t in 0..HANDOFF_TRIES {
            // A run this worker holds as its owner needs no look-up (if it lost the run
            // meanwhile, the journal write is fenced and the answer says to retry).
            if self.engine.has_run(run_id) && self.owns(run_id) {
                match self.answer(kind, &bytes).await {
                    Answer::Ok => return Ok(()),
                    Answer::Refused(w) => return Err(w),
                    Answer::Retry(w) => {
                        // Looked up below (the run may have moved).
                        tracing::debug!(run_id, kind, why = %w, "local hand-over retried");
                    }
                }
            }
            let answer = match self.route(run_id).await {
                Err(e) => Answer::Retry(format!("cannot read the run's owner: {e}")),
                Ok(Route::Nobody) => {
                    tracing::debug!(run_id, kind, "the run was released; nothing to hand over");
                    return Ok(());
                }
                Ok(Route::Mine) => self.answer(kind, &bytes).await,
                Ok(Route::Other { owner, revision }) => {
                    // Ask the owner first; its liveness is read only when it does not answer.
                    let subject = format!("saap.{kind}.{}.{}", self.class, owner.w);
                    let req = async_nats::Request::new()
                        .payload(bytes.clone())
                        .timeout(Some(self.opts.forward_timeout));
                    match self.nats.client().send_request(subject, req).await {
                        Ok(reply) => match &reply.payload[..] {
                            b"ok" => Answer::Ok,
                            r if r.starts_with(b"refused:") => {
                                Answer::Refused(String::from_utf8_lossy(&r[8..]).into_owned())
                            }
                            r => Answer::Retry(String::from_utf8_lossy(r).into_owned()),
                        },
                        Err(e) if self.alive(&owner.w).await => {
                            Answer::Retry(format!("owner {} did not answer: {e}", owner.w))
                        }
                        Err(_) => {
                            self.take_over(run_id, revision, &owner).await;
                            Answer::Retry("the owner was dead; run taken over".into())
                        }
                    }
                }
            };
            match answer {
                Answer::Ok => return Ok(()),
                Answer::Refused(w) => return Err(w),
                Answer::Retry(w) => {
                    tracing::debug!(run_id, kind, why = %w, "hand-over to the owner retried");
                    last = w;
                    tokio::time::sleep(backoff(t)).await;
                }
            }
        }
        Err(last)
    }

    /// The owner's side of a completion or display event of one of its runs.
    async fn answer(self: &Arc<Self>, kind: &str, bytes: &[u8]) -> Answer {
        if bytes.len() > MAX_WORK_BYTES {
            return Answer::Refused(format!("message of {} bytes", bytes.len()));
        }
        let (run, result) = match kind {
            "done" => {
                let d: WireDone = match serde_json::from_slice(bytes) {
                    Ok(d) => d,
                    Err(e) => return Answer::Refused(format!("not a completion: {e}")),
                };
                let outcome = d.outcome.map(|outs| {
                    outs.into_iter()
                        .enumerate()
                        .map(|(i, (name, v))| OutEvent {
                            name: name.into(),
                            payload: Payload::from_json(v),
                            due_ns: d
                                .due
                                .iter()
                                .find(|(at, _)| *at as usize == i)
                                .and_then(|(_, due)| std::num::NonZeroU64::new(*due)),
                        })
                        .collect()
                });
                if let Some(used) = d.usage {
                    self.engine
                        .report_work_usage(&d.run, ExecutionId(d.x), d.attempt, used);
                }
                let r = self
                    .engine
                    .complete_work(&d.run, ExecutionId(d.x), d.attempt, outcome)
                    .await;
                (d.run, r.map_err(|e| Box::new(e) as Box<EngineError>))
            }
            _ => {
                let s: WireShow = match serde_json::from_slice(bytes) {
                    Ok(s) => s,
                    Err(e) => return Answer::Refused(format!("not a display event: {e}")),
                };
                let r = self
                    .engine
                    .display_work(
                        &s.run,
                        ExecutionId(s.x),
                        s.n,
                        s.name,
                        Payload::from_json(s.payload),
                    )
                    .await;
                match r {
                    Ok(()) => (s.run, Ok(())),
                    Err(ContextError::Engine(e)) => (s.run, Err(e)),
                    Err(e) => return Answer::Refused(e.to_string()),
                }
            }
        };
        match result {
            Ok(()) => Answer::Ok,
            // Owned but not loaded yet (a takeover is rebuilding it).
            Err(e) if matches!(*e, EngineError::UnknownRun { .. }) => {
                Answer::Retry(format!("run `{run}` is not held here yet"))
            }
            Err(e) => Answer::Retry(e.to_string()),
        }
    }

    /// Answers a completion or display event sent to this worker as a run's owner.
    pub(super) async fn answer_handoff(
        self: Arc<Self>,
        kind: &'static str,
        m: async_nats::Message,
    ) {
        let Some(reply) = m.reply.clone() else {
            return;
        };
        let answer = self.answer(kind, &m.payload).await;
        if let Err(e) = self.nats.client().publish(reply, answer.bytes()).await {
            tracing::warn!(error = %e, "cannot answer a hand-over");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_work_item_round_trips_through_its_wire_form() {
        let work = Work {
            run_id: "r1".into(),
            thread_id: "t1".into(),
            execution: ExecutionId(7),
            attempt: 2,
            step: 1,
            inputs: vec![vec![BoundEvent {
                id: saap_nats::ids::fresh_event_id(),
                name: "A".into(),
                payload: Payload::from_json(serde_json::json!({"n": 3})),
            }]],
            start: Payload::from_json(serde_json::json!({"message": "go"})),
            fingerprint: u64::MAX - 1,
        };
        let back = from_wire(&to_wire(&work).unwrap()).unwrap();
        assert_eq!(&*back.run_id, "r1");
        assert_eq!(&*back.thread_id, "t1");
        assert_eq!(
            (back.execution, back.attempt, back.step),
            (ExecutionId(7), 2, 1)
        );
        assert_eq!(back.fingerprint, u64::MAX - 1);
        assert_eq!(back.inputs[0][0].id, work.inputs[0][0].id);
        assert_eq!(&*back.inputs[0][0].name, "A");
        assert_eq!(
            back.inputs[0][0].payload.json(),
            &serde_json::json!({"n": 3})
        );
        assert_eq!(back.start.json(), &serde_json::json!({"message": "go"}));
    }

    #[test]
    fn an_oversized_or_malformed_work_item_is_refused() {
        assert!(from_wire(b"{").is_err());
        assert!(from_wire(&vec![b' '; MAX_WORK_BYTES + 1]).is_err());
    }

    #[test]
    fn hand_over_back_off_is_bounded() {
        assert_eq!(backoff(0), Duration::from_millis(50));
        assert_eq!(backoff(1), Duration::from_millis(100));
        assert_eq!(backoff(30), Duration::from_secs(1));
    }
}
