//! [`Worker`]: one process of an agent class on NATS. Any number of workers share a class.
//!
//! **Ownership** (DESIGN §4.9: one owner decides for a run, in arrival order). Each run has
//! an owner recorded in KV bucket `saap_{Class}_steps` under `run.{run_id}`, taken with
//! compare-and-set: created by the worker that receives the run's start event, and taken over
//! (update at the read revision) from an owner whose heartbeat (`saap_{Class}_live`, entries
//! expire after the lease) is gone. The owner's writes to the run's journal are additionally
//! fenced by the journal stream's expected-last-subject-sequence check, so a worker that was
//! only slow (not dead) cannot write after a takeover. Why not subject partitioning: the class
//! subject is fixed by the protocol (no partition token), and rebalancing partitions after a
//! crash needs the same lease machinery anyway.
//!
//! **Intake**: the runners' durable queue consumer `agent_runner_{Class}` delivers each control
//! event to one worker. Events of one run are handled in order on one of the worker's lanes.
//! The worker that owns the run appends it (the engine deduplicates by event id); another
//! worker forwards it to the owner over core NATS (`saap.fwd.{Class}.{worker}`) and
//! acknowledges only when the owner answered that the event is durable. Step outputs published
//! by an owner carry `Saap-Journaled` and are acknowledged at once.
//!
//! **Ended runs**: an owner releases a run (deletes its owner record) once it has ended. A
//! later event for it finds no owner: the receiving worker claims the run, rebuilds it from
//! its journal and appends the event, which the core keeps as after-stop evidence (DESIGN
//! §4.7, §4.10), then releases it again. An event for a run with no journal whose start
//! event waits in the class stream (its worker died before journaling it, and its redelivery
//! waits for the ack wait) begins the run from that start first; an event for a run that
//! never began is refused after a few deliveries.
//!
//! **Recovery**: every worker sweeps each heartbeat for runs whose owner is dead; such a run
//! is taken over, rebuilt from its journal by the core, and its started-but-unfinished
//! executions run again (their outputs have deterministic ids, so duplicates are dropped).
//! The sweep reads what changed: watches on the ownership and heartbeat buckets keep an index
//! of owners and last beats, and a sweep reads only the heartbeat of a worker that shows no
//! recent beat and, if it is gone, that worker's owner records (`super::sweep`); every owner
//! record only while the ownership watch has not caught up.
//!
//! **Step bodies** run on the run's owner by default (`Steps::Local`: ownership spreads runs
//! over the workers). With `WorkerOptions::steps = Steps::Shared` they run on any worker of
//! the class through the work queue `saap_work_{Class}`; the owner still makes every
//! decision (module docs of `saap::nats::steps`).

use super::backend::{NatsBackend, NatsBackendOptions};
use super::inner::{Inner, Owner, Route};
use super::options::{Steps, WorkerError, WorkerOptions};
use super::owners::owner_key;
use super::resume::{RUN_RESUME_REQUEST_EVENT, ResumeRequest};
use super::slots::Slots;
use super::steps::WorkQueue;
use crate::delegation::{
    AgentInTheLoopExceptionEvent, AgentInTheLoopRequestEvent, AgentInTheLoopResponseEvent,
};
use crate::engine::{Engine, EngineError};
use crate::event::Event;
use crate::workflow::Workflow;
use async_nats::jetstream::kv;
use bytes::Bytes;
use futures_util::StreamExt;
use saap_nats::{Delivery, NatsError, NatsOptions, SaapNats};
use saap_protocol::{AgentEventSubject, DecodeLimits, EventEnvelope, RunAddress};
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// One worker process of an agent class (module docs). Cheap to clone.
#[derive(Clone)]
pub struct Worker {
    inner: Arc<Inner>,
}

async fn bucket(
    nats: &SaapNats,
    name: String,
    max_age: Duration,
) -> Result<kv::Store, WorkerError> {
    let js = nats.jetstream();
    if let Ok(s) = js.get_key_value(&name).await {
        return Ok(s);
    }
    let config = kv::Config {
        bucket: name.clone(),
        history: 1,
        max_age,
        storage: async_nats::jetstream::stream::StorageType::File,
        num_replicas: nats.settings().replicas.max(1),
        ..Default::default()
    };
    match js.create_key_value(config).await {
        Ok(s) => Ok(s),
        Err(ce) => js
            .get_key_value(&name)
            .await
            .map_err(|ge| WorkerError::Bucket {
                bucket: name,
                detail: format!("cannot create it ({ce}) nor open it ({ge})"),
            }),
    }
}

/// How one event was handled.
enum Handled {
    /// Durable (or a duplicate): acknowledge.
    Done,
    /// Can never be processed: stop redelivery (the stream keeps it as evidence).
    Refused(String),
    /// A transient failure (server fail-over, timeout, the owner busy): retried in place
    /// (the delivery kept in progress) before the delivery is given back.
    Retry(String),
    /// Not yet possible (the run's start event is not claimed yet): give the delivery back
    /// with a back-off; each try uses one of the consumer's deliveries.
    Later(String),
}

/// In-place retries of a transient failure (with back-off: about 35 s in all).
const IN_PLACE_RETRIES: u32 = 40;
/// Times a worker rebuilds a run of its own that a storage failure stopped.
const READOPTS: u32 = 5;

fn classify(e: EngineError) -> Handled {
    match e {
        EngineError::Store(s) => Handled::Retry(s.to_string()),
        EngineError::Core { .. } | EngineError::Replay { .. } => Handled::Retry(e.to_string()),
        other => Handled::Refused(other.to_string()),
    }
}

/// Redelivery delay after `delivered` deliveries: 100 ms, doubling, at most 2 s (an event
/// that overtook its run's start event on another worker waits ~1.5 s over 4 deliveries).
fn retry_delay(delivered: u64) -> Duration {
    let exp = delivered.saturating_sub(1).min(5) as u32;
    Duration::from_millis(100 * 2u64.pow(exp)).min(Duration::from_secs(2))
}

fn lane_of(run_id: &str, lanes: usize) -> usize {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    run_id.hash(&mut h);
    (h.finish() % lanes.max(1) as u64) as usize
}

impl Worker {
    /// Connects to NATS (credentials and TLS from `nats_opts`; secrets are never logged) and
    /// prepares a worker for `workflow`, whose name is the agent class.
    pub async fn connect(
        nats_opts: &NatsOptions,
        workflow: Workflow,
        opts: WorkerOptions,
    ) -> Result<Worker, WorkerError> {
        let nats = SaapNats::connect(nats_opts).await?;
        Worker::with_connection(nats, workflow, opts).await
    }

    /// A worker on an existing connection.
    pub async fn with_connection(
        nats: SaapNats,
        workflow: Workflow,
        mut opts: WorkerOptions,
    ) -> Result<Worker, WorkerError> {
        let class = workflow.name().to_string();
        workflow.check_resources()?;
        if saap_nats::kv::bucket_name(&class, saap_nats::BucketKind::Steps).is_err() {
            return Err(WorkerError::BadClass { name: class });
        }
        nats.ensure_stream(&class).await?;
        let backend = NatsBackend::open(
            nats.clone(),
            &class,
            workflow.compiled().hierarchy.clone(),
            NatsBackendOptions {
                agent_id: opts.agent_id.clone(),
                publish_outputs: opts.publish_outputs,
                ..NatsBackendOptions::default()
            },
        )
        .await?;
        let owners = bucket(&nats, format!("saap_{class}_steps"), Duration::ZERO).await?;
        let live = bucket(&nats, format!("saap_{class}_live"), opts.lease).await?;
        opts.engine.keep_ended_runs = false;
        let limits = DecodeLimits {
            max_bytes: opts.engine.max_event_bytes,
            ..DecodeLimits::default()
        };
        let agents =
            super::delegation::NatsAgents::new(nats.clone(), &workflow.compiled().hierarchy);
        let engine = Engine::new(workflow, Arc::new(backend.clone()), opts.engine.clone());
        // Children of other classes run on their workers.
        engine.set_remote_agents(Arc::new(agents));
        let slots = (opts.local_slots > 0).then(|| Slots::new(opts.local_slots));
        // The agents run in this process beside the class's own (`with_delegate`), looked up
        // once: every event is checked against them.
        let agents = engine
            .workflow()
            .agent_set()
            .iter()
            .skip(1)
            .filter_map(|w| engine.agent(w.name()))
            .collect();
        let worker = Worker {
            inner: Arc::new(Inner {
                engine,
                backend,
                nats,
                class,
                id: saap_nats::ids::fresh_event_id().to_string(),
                opts,
                owners,
                live,
                owned: Mutex::new(HashSet::new()),
                index: Mutex::new(super::sweep::OwnerIndex::new()),
                sweep_reads: AtomicU64::new(0),
                limits,
                stop: tokio::sync::watch::channel(false).0,
                slots,
                body_cancels: Default::default(),
                agents,
            }),
        };
        if worker.inner.opts.steps == Steps::Shared {
            worker.inner.engine.set_executor(Arc::new(WorkQueue {
                inner: Arc::downgrade(&worker.inner),
                // No local slot: every body goes through the queue.
                slots: worker.inner.slots.clone().unwrap_or_else(|| Slots::new(0)),
            }));
        }
        Ok(worker)
    }

    /// This worker's id (unique per process start).
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The engine that runs this worker's runs (for inspection).
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Owner records this worker's sweeps have read so far (each one a KV request): while
    /// every owner is alive, none after the owner watch caught up.
    pub fn sweep_reads(&self) -> u64 {
        self.inner.sweep_reads.load(Ordering::Relaxed)
    }

    /// The runs this worker owns now.
    pub fn owned_runs(&self) -> Vec<String> {
        let mut v: Vec<String> = lock(&self.inner.owned)
            .iter()
            .map(|r| r.to_string())
            .collect();
        v.sort();
        v
    }

    /// Asks [`Worker::serve`] to return (runs in flight stay in the journal; another worker or
    /// a restart resumes them).
    pub fn shutdown(&self) {
        let _ = self.inner.stop.send(true);
    }

    /// Serves the class until [`Worker::shutdown`] or the connection ends: heartbeat,
    /// forwarded events, the intake consumer and the sweep for runs of dead workers.
    pub async fn serve(&self) -> Result<(), WorkerError> {
        let inner = &self.inner;
        let mut stop = inner.stop.subscribe();
        inner.beat().await?;
        let mut forwarded = inner
            .nats
            .client()
            .subscribe(format!("saap.fwd.{}.{}", inner.class, inner.id))
            .await
            .map_err(|e| {
                WorkerError::Nats(NatsError::Request {
                    subject: format!("saap.fwd.{}.{}", inner.class, inner.id),
                    reason: e.to_string(),
                })
            })?;
        inner.nats.sync().await?;
        // Dropping the handles (when `serve` returns) stops answering.
        let _services = if inner.opts.serve_protocol {
            Some(inner.serve_protocol().await?)
        } else {
            None
        };
        if inner.opts.steps == Steps::Shared {
            self.serve_steps().await?;
        }
        let mut consumer = inner.nats.control_consumer(&inner.class).await?;
        let lanes: Vec<mpsc::UnboundedSender<Delivery>> = (0..inner.opts.lanes.max(1))
            .map(|_| {
                let (tx, mut rx) = mpsc::unbounded_channel::<Delivery>();
                let me = self.inner.clone();
                tokio::spawn(async move {
                    while let Some(d) = rx.recv().await {
                        me.intake(d).await;
                    }
                });
                tx
            })
            .collect();
        tokio::spawn(self.inner.clone().watch_owners());
        tokio::spawn(self.inner.clone().watch_beats());
        let mut tick = tokio::time::interval(inner.opts.lease / 3);
        tracing::info!(class = %inner.class, worker = %inner.id, "worker serving");
        loop {
            tokio::select! {
                _ = stop.changed() => break,
                _ = tick.tick() => {
                    if let Err(e) = inner.beat().await {
                        tracing::warn!(error = %e, "heartbeat failed");
                    }
                    let me = self.inner.clone();
                    tokio::spawn(async move { me.sweep().await });
                }
                m = forwarded.next() => {
                    let Some(m) = m else { break };
                    let me = self.inner.clone();
                    tokio::spawn(async move { me.answer_forward(m).await });
                }
                d = consumer.next() => {
                    match d {
                        None => break,
                        Some(Err(e)) => tracing::warn!(error = %e, "intake receive failed"),
                        Some(Ok(d)) => {
                            let lane = match d.parsed_subject() {
                                Ok(s) => lane_of(s.run().run_id(), lanes.len()),
                                Err(_) => 0,
                            };
                            let _ = lanes[lane].send(d);
                        }
                    }
                }
            }
        }
        tracing::info!(worker = %inner.id, "worker stopped");
        Ok(())
    }
}

impl Worker {
    /// With `Steps::Shared`: answers completions and display events of this worker's runs
    /// (`saap.done.{Class}.{worker}`, `saap.show.{Class}.{worker}`) and runs work items from
    /// the queue, until [`Worker::shutdown`].
    async fn serve_steps(&self) -> Result<(), WorkerError> {
        let inner = &self.inner;
        for kind in ["done", "show"] {
            let subject = format!("saap.{kind}.{}.{}", inner.class, inner.id);
            listen(inner, subject, move |me, m| {
                tokio::spawn(me.answer_handoff(kind, m));
            })
            .await?;
        }
        // Cancelled runs, announced by their owners: bodies running here are told.
        let filter = super::body_cancels::cancel_filter(&inner.class);
        listen(inner, filter, |me, m| {
            let run_id = m.subject.rsplit('.').next().unwrap_or_default();
            me.body_cancels.cancel(run_id);
        })
        .await?;
        inner.nats.sync().await?;
        let consumer = inner.work_consumer().await?;
        if let Some(slots) = &inner.slots {
            let pull =
                inner
                    .clone()
                    .pull_when_free(consumer, slots.clone(), inner.stop.subscribe());
            tokio::spawn(pull);
            return Ok(());
        }
        let mut work = inner.work_messages(&consumer).await?;
        let me = inner.clone();
        let mut stop = inner.stop.subscribe();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.changed() => break,
                    m = work.next() => match m {
                        None => break,
                        Some(Err(e)) => {
                            tracing::warn!(error = %e, "work queue receive failed");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        Some(Ok(m)) => {
                            tokio::spawn(me.clone().run_work(m));
                        }
                    }
                }
            }
        });
        Ok(())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What [`Inner::reopen`] did.
enum Reopened {
    /// The run was claimed and the event handled.
    Handled(Handled),
    /// Another worker claimed the run first: route the event again.
    Raced,
    /// The run has no journal: it has not begun.
    NoJournal,
}

impl Inner {
    /// Starts the config RPC and class discovery responders (module docs of `saap_nats::rpc`).
    async fn serve_protocol(
        &self,
    ) -> Result<(saap_nats::rpc::ServiceHandle, saap_nats::rpc::ServiceHandle), WorkerError> {
        let configs = Arc::new(self.opts.agent_configs.clone());
        let class = self.class.clone();
        let config = self
            .nats
            .serve_agent_config(
                saap_nats::ConfigScope::Class(self.class.clone()),
                move |req: saap_nats::rpc::FetchAgentConfigRequest| {
                    let configs = configs.clone();
                    let class = class.clone();
                    async move {
                        if req.agent_class != class {
                            return Err(format!(
                                "this worker serves class `{class}`, not `{}`",
                                req.agent_class
                            ));
                        }
                        let found = configs.get(&req.agent_id);
                        Ok(saap_nats::rpc::FetchAgentConfigResponse {
                            agent_class: req.agent_class,
                            agent_id: req.agent_id,
                            config: found.cloned().unwrap_or_default(),
                            found: found.is_some(),
                            error: None,
                        })
                    }
                },
            )
            .await?;
        let mut fields = self.opts.discovery_fields.clone();
        if fields.is_empty() {
            let workflow = self.engine.workflow();
            if let Some(d) = &workflow.spec().description {
                fields.insert("description".into(), d.clone().into());
            }
            if let Ok(spec) = serde_json::to_value(workflow.spec()) {
                fields.insert("workflow_spec".into(), spec);
            }
        }
        let discovery = self
            .nats
            .serve_class_discovery(&self.class, saap_nats::rpc::ClassDescription { fields })
            .await?;
        Ok((config, discovery))
    }

    async fn beat(&self) -> Result<(), WorkerError> {
        self.live
            .put(format!("w.{}", self.id), Bytes::from_static(b"1"))
            .await
            .map_err(|e| WorkerError::Bucket {
                bucket: format!("saap_{}_live", self.class),
                detail: e.to_string(),
            })?;
        Ok(())
    }

    /// Whether this worker believes it owns run `run_id` (the owner record is the truth; a
    /// stale belief is caught by the journal's fencing).
    pub(super) fn owns(&self, run_id: &str) -> bool {
        lock(&self.owned).contains(run_id)
    }

    pub(super) async fn alive(&self, worker: &str) -> bool {
        match self.live.entry(format!("w.{worker}")).await {
            Ok(Some(e)) => e.operation == kv::Operation::Put,
            Ok(None) => false,
            // Unknown: do not take over on a read failure.
            Err(_) => true,
        }
    }

    pub(super) async fn route(&self, run_id: &str) -> Result<Route, String> {
        let entry = self
            .owners
            .entry(owner_key(run_id))
            .await
            .map_err(|e| e.to_string())?;
        let Some(entry) = entry.filter(|e| e.operation == kv::Operation::Put) else {
            return Ok(Route::Nobody);
        };
        let owner: Owner = serde_json::from_slice(&entry.value).map_err(|e| e.to_string())?;
        if owner.w == self.id {
            Ok(Route::Mine)
        } else {
            Ok(Route::Other {
                owner,
                revision: entry.revision,
            })
        }
    }

    fn owner_record(&self, a: &RunAddress) -> Bytes {
        let o = Owner {
            w: self.id.clone(),
            a: (
                a.agent_id().to_string(),
                a.thread_id().to_string(),
                a.display_id().to_string(),
            ),
        };
        Bytes::from(serde_json::to_vec(&o).unwrap_or_default())
    }

    /// Handles one delivery from the class consumer and acknowledges it accordingly.
    async fn intake(self: &Arc<Self>, d: Delivery) {
        let subject = d.parsed_subject();
        let mut handled = match (&subject, d.journaled) {
            (_, true) => Handled::Done,
            (Ok(s), false) => self.handle(s, &d.payload, d.info.delivered).await,
            (Err(e), false) => Handled::Refused(format!("not an agent event subject: {e}")),
        };
        let mut tries = 0;
        let mut delay = Duration::from_millis(50);
        while let (Handled::Retry(why), Ok(s)) = (&handled, &subject) {
            if tries >= IN_PLACE_RETRIES {
                break;
            }
            tries += 1;
            tracing::debug!(subject = %d.subject, %why, tries, "transient failure; retrying");
            // Keeps the server from redelivering it elsewhere meanwhile.
            let _ = d.in_progress().await;
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(1));
            handled = self.handle(s, &d.payload, d.info.delivered).await;
        }
        let result = match handled {
            Handled::Done => d.ack().await,
            Handled::Refused(why) => {
                tracing::warn!(subject = %d.subject, %why, "event refused; kept in the stream as evidence");
                d.term().await
            }
            Handled::Retry(why) | Handled::Later(why) => {
                if d.info.last_attempt {
                    // JetStream will not deliver it again: say so loudly (nothing fails
                    // silently); the event stays in the class stream.
                    tracing::error!(subject = %d.subject, %why, "event given up after its last delivery");
                } else {
                    tracing::debug!(subject = %d.subject, %why, "event will be redelivered");
                }
                let delay = retry_delay(d.info.delivered);
                d.nak(Some(delay)).await
            }
        };
        if let Err(e) = result {
            tracing::warn!(error = %e, "acknowledging an event failed; it will be redelivered");
        }
    }

    /// Routes one event of a run to its owner (this worker or another).
    async fn handle(
        self: &Arc<Self>,
        s: &AgentEventSubject,
        bytes: &[u8],
        delivered: u64,
    ) -> Handled {
        let run_id = s.run().run_id();
        // A run of an agent this worker's process runs beside its own (`with_delegate`): it
        // lives in that agent's engine here, which takes its events.
        if let Some(agent) = self.in_process_agent(run_id) {
            if let Some(id) = s.event_id()
                && agent.holds_event(run_id, &id) == Some(true)
            {
                return Handled::Done;
            }
            return match agent.send_json(run_id, bytes).await {
                Ok(_) => Handled::Done,
                Err(e) => classify(e),
            };
        }
        let mut begun_here = false;
        for _ in 0..4 {
            let route = match self.route(run_id).await {
                Ok(r) => r,
                Err(e) => return Handled::Retry(format!("cannot read the run's owner: {e}")),
            };
            match route {
                Route::Mine => return self.deliver_local(s.run(), s, bytes).await,
                Route::Other { owner, revision } => {
                    if self.alive(&owner.w).await {
                        return self.forward(&owner.w, s, bytes).await;
                    }
                    self.take_over(run_id, revision, &owner).await;
                }
                Route::Nobody => {
                    // A resume is not an event of the workflow's types: never a start.
                    let resume = s.event_name() == RUN_RESUME_REQUEST_EVENT;
                    let start = if resume {
                        Ok(false)
                    } else if starts_child(s) {
                        Ok(true)
                    } else {
                        EventEnvelope::decode(
                            bytes,
                            &self.engine.workflow().compiled().hierarchy,
                            &self.limits,
                        )
                        .map(|env| env.dispatch_classification().start)
                    };
                    match start {
                        Err(e) => return Handled::Refused(format!("not a valid event: {e}")),
                        Ok(false) => {
                            // A run that ended and was released: reopen it from its journal
                            // so the event is kept as after-stop evidence (§4.7).
                            match self.reopen(s, bytes).await {
                                Reopened::Handled(h) => return h,
                                Reopened::Raced => continue,
                                Reopened::NoJournal => {}
                            }
                            // Its start event may wait in the class stream for a redelivery
                            // (the worker it went to died before journaling it, and the ack
                            // wait is long): begin the run from it here, then route this
                            // event again. The start's own redelivery is a duplicate then.
                            let waiting = match self.waiting_start(s).await {
                                Ok(w) => w.filter(|_| !begun_here),
                                Err(e) => return Handled::Retry(e),
                            };
                            if let Some((start, start_bytes)) = waiting {
                                begun_here = true;
                                match Box::pin(self.handle(&start, &start_bytes, 1)).await {
                                    Handled::Done => continue,
                                    Handled::Refused(why) => {
                                        tracing::warn!(run_id, %why, "the run's start event is refused");
                                    }
                                    other => return other,
                                }
                            }
                            // A run that has not begun (4.10) — or whose start event is still
                            // on its way through another worker: retry a few times first.
                            if delivered >= 4 {
                                return Handled::Refused(format!(
                                    "run `{run_id}` has not begun; send a start event first"
                                ));
                            }
                            return Handled::Later("run not begun yet".into());
                        }
                        Ok(true) => {
                            let created = self
                                .owners
                                .create(owner_key(run_id), self.owner_record(s.run()))
                                .await;
                            match created {
                                Ok(_) => {
                                    lock(&self.owned).insert(run_id.into());
                                    return self.deliver_local(s.run(), s, bytes).await;
                                }
                                Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {}
                                Err(e) => {
                                    return Handled::Retry(format!("cannot claim the run: {e}"));
                                }
                            }
                        }
                    }
                }
            }
        }
        Handled::Retry("the run's ownership kept changing".into())
    }

    /// The first control event of `s`'s run in the class stream when it is a start event
    /// (the run has no journal: that start was never journaled), with its bytes. An error:
    /// the stream could not be read (try again).
    async fn waiting_start(
        &self,
        s: &AgentEventSubject,
    ) -> Result<Option<(AgentEventSubject, Bytes)>, String> {
        let stream = saap_protocol::subject::stream_name(&self.class).map_err(|e| e.to_string())?;
        let filter = format!(
            "agent.{}.*.*.*.{}.control_event.*.*",
            self.class,
            s.run().run_id()
        );
        let read = |e: &dyn std::fmt::Display| format!("cannot read the class stream: {e}");
        let stream = self
            .nats
            .jetstream()
            .get_stream(stream)
            .await
            .map_err(|e| read(&e))?;
        let first = match stream.get_first_raw_message_by_subject(&filter, 1).await {
            Ok(m) => m,
            Err(e)
                if e.kind()
                    == async_nats::jetstream::stream::RawMessageErrorKind::NoMessageFound =>
            {
                return Ok(None);
            }
            Err(e) => return Err(read(&e)),
        };
        let Ok(subject) = AgentEventSubject::parse(&first.subject) else {
            return Ok(None);
        };
        let start = starts_child(&subject)
            || EventEnvelope::decode(
                &first.payload,
                &self.engine.workflow().compiled().hierarchy,
                &self.limits,
            )
            .is_ok_and(|env| env.dispatch_classification().start);
        Ok((start && subject.event_id() != s.event_id()).then_some((subject, first.payload)))
    }

    /// The engine of an agent run in this process beside the worker's own
    /// (`Workflow::with_delegate`) that holds run `run_id`.
    fn in_process_agent(&self, run_id: &str) -> Option<Engine> {
        self.agents.iter().find(|e| e.has_run(run_id)).cloned()
    }

    /// An event for a run nobody owns that is not a start event: if the run has a journal
    /// (it ended and its owner released it), claim the run, rebuild it from the journal and
    /// append the event — the core keeps an event for an ended run as after-stop evidence,
    /// never dispatched (DESIGN §4.7, §4.10) — then release it again.
    async fn reopen(self: &Arc<Self>, s: &AgentEventSubject, bytes: &[u8]) -> Reopened {
        let run_id = s.run().run_id();
        let key = owner_key(run_id);
        // Claim first, then read the journal: later writes are fenced on what was read.
        let revision = match self.owners.create(&key, self.owner_record(s.run())).await {
            Ok(r) => r,
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => return Reopened::Raced,
            Err(e) => {
                return Reopened::Handled(Handled::Retry(format!("cannot claim the run: {e}")));
            }
        };
        let stored = match self.backend.load_run(run_id).await {
            Ok(Some(stored)) => stored,
            other => {
                // No journal (the run never began) or unreadable: hand the claim back.
                if let Err(e) = self
                    .owners
                    .delete_expect_revision(&key, Some(revision))
                    .await
                {
                    tracing::warn!(run_id, error = %e, "cannot release a claim");
                }
                return match other {
                    Err(e) => Reopened::Handled(Handled::Retry(format!(
                        "cannot read the run's journal: {e}"
                    ))),
                    _ => Reopened::NoJournal,
                };
            }
        };
        lock(&self.owned).insert(run_id.into());
        self.backend.set_address(run_id, s.run().clone());
        let ended = stored.ended;
        let handled = match self.engine.adopt(stored.clone()).await {
            Ok(_) => {
                // The owner that released the run may have stopped before publishing its
                // last outputs (publication follows the journal write).
                self.backend.republish_outputs(&stored).await;
                self.deliver_local(s.run(), s, bytes).await
            }
            Err(e) => classify(e),
        };
        tracing::debug!(run_id, ended, "reopened a released run for an event");
        // Releases the run once it has ended (at once for an ended run).
        self.watch_end(run_id);
        Reopened::Handled(handled)
    }

    /// Appends an event to a run this worker owns; returns once it is durable.
    async fn deliver_local(
        self: &Arc<Self>,
        a: &RunAddress,
        s: &AgentEventSubject,
        bytes: &[u8],
    ) -> Handled {
        let run_id = a.run_id();
        if s.event_name() == RUN_RESUME_REQUEST_EVENT {
            return self.resume_local(run_id, bytes).await;
        }
        if starts_child(s) {
            let held = self.engine.has_run(run_id);
            self.backend.set_address(run_id, a.clone());
            return match self
                .engine
                .start_delegated_json(run_id, a.thread_id(), bytes)
                .await
            {
                Ok(()) => {
                    if !held {
                        self.watch_end(run_id);
                    }
                    Handled::Done
                }
                Err(e) => classify(e),
            };
        }
        if is_report(s) && self.engine.has_run(run_id) {
            match self
                .engine
                .child_report_json(run_id, s.event_name(), bytes)
                .await
            {
                Ok(true) => return Handled::Done,
                // Not a child's report: an ordinary event of the run.
                Ok(false) => {}
                Err(e) => return classify(e),
            }
        }
        if self.engine.has_run(run_id) {
            if let Some(id) = s.event_id()
                && self.engine.holds_event(run_id, &id) == Some(true)
            {
                return Handled::Done;
            }
            return match self.engine.send_json(run_id, bytes).await {
                Ok(_) => Handled::Done,
                // The run's start event is being made durable on another task right now.
                Err(EngineError::NotAStartEvent { .. }) => {
                    Handled::Retry("run not begun yet".into())
                }
                Err(e) => classify(e),
            };
        }
        if !lock(&self.owned).contains(run_id) {
            // Owned per the bucket but not held here (a takeover is loading it, or the run
            // ended and was released): let the owner record settle.
            return Handled::Later("run not held by this worker yet".into());
        }
        self.backend.set_address(run_id, a.clone());
        match self
            .engine
            .start_run_json(run_id, a.thread_id(), bytes)
            .await
        {
            Ok(_) => {
                self.watch_end(run_id);
                Handled::Done
            }
            Err(EngineError::NotAStartEvent { .. }) => self.begin_owned(a, s, bytes).await,
            Err(e) => classify(e),
        }
    }

    /// An event that is not a start for a run this worker owns but does not hold. With no
    /// journal, a run it took over from a dead worker that had claimed it but never
    /// journaled its start: the start waits in the class stream for its redelivery after the
    /// ack wait, which would outlast this event's deliveries, so the run begins here from it
    /// and then takes this event. With a journal (a takeover still loading the run), or
    /// without a start in the stream, tried again in place (a delivery given back would be
    /// used up within seconds).
    async fn begin_owned(
        self: &Arc<Self>,
        a: &RunAddress,
        s: &AgentEventSubject,
        bytes: &[u8],
    ) -> Handled {
        match self.backend.last_journal_seq(a.run_id()).await {
            Ok(None) => {}
            Ok(Some(_)) => return Handled::Retry("run being taken over here".into()),
            Err(e) => return Handled::Retry(format!("cannot read the run's journal: {e}")),
        }
        match self.waiting_start(s).await {
            Ok(Some((start, start_bytes))) => {
                match Box::pin(self.deliver_local(a, &start, &start_bytes)).await {
                    Handled::Done if self.engine.has_run(a.run_id()) => {
                        Box::pin(self.deliver_local(a, s, bytes)).await
                    }
                    Handled::Done => Handled::Retry("run not begun yet".into()),
                    other => other,
                }
            }
            Ok(None) => Handled::Retry("run not begun yet".into()),
            Err(e) => Handled::Retry(e),
        }
    }

    /// Applies a resume message to a run this worker owns ([`super::resume`]): a grant the
    /// core decides, refused (and kept in the stream) when the run is not paused on the
    /// pause its sender saw.
    async fn resume_local(&self, run_id: &str, bytes: &[u8]) -> Handled {
        if !self.engine.has_run(run_id) {
            return Handled::Later("run not held by this worker yet".into());
        }
        let req = match ResumeRequest::from_message(bytes) {
            Ok(r) => r,
            Err(why) => return Handled::Refused(why),
        };
        match self
            .engine
            .resume_seen(run_id, req.raise(), req.seen_grants)
            .await
        {
            Ok(r) => {
                tracing::info!(run_id, released = r.released, "run resumed");
                Handled::Done
            }
            Err(e) => classify(e),
        }
    }

    /// Releases a run once it has ended (the owner record is deleted only if it is still
    /// ours). A run stopped by a storage failure while this worker still owns it is rebuilt
    /// from its journal (at most `READOPTS` times); one another worker took over is dropped.
    fn watch_end(self: &Arc<Self>, run_id: &str) {
        self.watch_end_n(run_id.into(), 0);
    }

    fn watch_end_n(self: &Arc<Self>, run_id: Arc<str>, readopts: u32) {
        let me = self.clone();
        tokio::spawn(async move {
            // UnknownRun: it ended and was already dropped from memory.
            let _ = me.engine.wait_for_end(&run_id).await;
            let key = owner_key(&run_id);
            let record = me.read_owner(&key).await;
            let mine = record.as_ref().is_some_and(|(o, _)| o.w == me.id);
            if me.engine.run_failed(&run_id) == Some(true) {
                me.engine.forget(&run_id);
                me.backend.forget_run(&run_id);
                if mine && readopts < READOPTS {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    tracing::warn!(run_id = %run_id, "rebuilding a run stopped by a storage failure");
                    if let Ok(Some(stored)) = me.backend.load_run(&run_id).await
                        && me.engine.adopt(stored).await.is_ok()
                    {
                        me.watch_end_n(run_id, readopts + 1);
                        return;
                    }
                    // Not rebuilt now: release it so that the sweep of any worker (this one
                    // included) takes it over.
                    if let Some((_, rev)) = &record {
                        let _ = me
                            .owners
                            .update(
                                &key,
                                me.orphan_record(&run_id, record.as_ref().map(|(o, _)| o)),
                                *rev,
                            )
                            .await;
                    }
                    lock(&me.owned).remove(&run_id);
                    return;
                }
                if !mine {
                    lock(&me.owned).remove(&run_id);
                    return;
                }
            }
            if let Some((_, rev)) = record
                && mine
                && let Err(err) = me.owners.delete_expect_revision(&key, Some(rev)).await
            {
                tracing::warn!(run_id = %run_id, error = %err, "cannot release an ended run");
            }
            lock(&me.owned).remove(&run_id);
            me.engine.forget(&run_id);
            me.backend.forget_run(&run_id);
        });
    }

    /// An owner record naming no live worker (a run handed to the sweep).
    fn orphan_record(&self, _run_id: &str, from: Option<&Owner>) -> Bytes {
        let a = from.map(|o| o.a.clone()).unwrap_or_default();
        Bytes::from(
            serde_json::to_vec(&Owner {
                w: "released".into(),
                a,
            })
            .unwrap_or_default(),
        )
    }

    /// Takes run `run_id` over from a dead owner (compare-and-set on the owner record read at
    /// `revision`), rebuilds it from its journal and re-runs its unfinished executions.
    pub(super) async fn take_over(self: &Arc<Self>, run_id: &str, revision: u64, from: &Owner) {
        let address = RunAddress::new(&self.class, &from.a.0, &from.a.1, &from.a.2, run_id);
        let Ok(address) = address else {
            return;
        };
        let claimed = self
            .owners
            .update(owner_key(run_id), self.owner_record(&address), revision)
            .await;
        if claimed.is_err() {
            return; // another worker was faster
        }
        tracing::info!(run_id, dead = %from.w, worker = %self.id, "taking over a run");
        lock(&self.owned).insert(run_id.into());
        self.backend.set_address(run_id, address);
        match self.backend.load_run(run_id).await {
            // No journal: the dead owner never made the start durable, so the start event
            // was not acknowledged and will be redelivered to a worker.
            Ok(None) => {}
            Ok(Some(stored)) => match self.engine.adopt(stored.clone()).await {
                Ok(n) => {
                    tracing::info!(run_id, retried = n, "run adopted");
                    // The dead owner may have journaled outputs it never published.
                    self.backend.republish_outputs(&stored).await;
                    self.watch_end(run_id);
                }
                Err(e) => tracing::error!(run_id, error = %e, "cannot adopt the run"),
            },
            Err(e) => tracing::error!(run_id, error = %e, "cannot load the run's journal"),
        }
    }

    /// Keeps the index of owner records current from a watch on the owners bucket (its
    /// history first: the last record of every key), restarting the watch when it ends.
    async fn watch_owners(self: Arc<Self>) {
        let mut stop = self.stop.subscribe();
        let stream = format!("KV_saap_{}_steps", self.class);
        loop {
            lock(&self.index).set_ready(false);
            // An empty bucket delivers no history: then the index is complete at once.
            let empty = match self.nats.jetstream().get_stream(&stream).await {
                Ok(mut s) => s
                    .info()
                    .await
                    .map(|i| i.state.messages == 0)
                    .unwrap_or(false),
                Err(_) => false,
            };
            match self.owners.watch_with_history(">").await {
                Ok(mut watch) => {
                    if empty {
                        lock(&self.index).set_ready(true);
                    }
                    loop {
                        let e = tokio::select! {
                            _ = stop.changed() => return,
                            e = watch.next() => e,
                        };
                        let Some(Ok(e)) = e else { break };
                        let owner = (e.operation == kv::Operation::Put)
                            .then(|| serde_json::from_slice::<Owner>(&e.value).ok())
                            .flatten();
                        let mut ix = lock(&self.index);
                        ix.owner(&e.key, owner.as_ref().map(|o| o.w.as_str()), e.revision);
                        if e.seen_current && !ix.ready() {
                            ix.set_ready_keep(true);
                        }
                    }
                    tracing::warn!(
                        "the owner watch ended; sweeps read every owner record until it is back"
                    );
                }
                Err(e) => tracing::warn!(error = %e, "cannot watch the owner records"),
            }
            lock(&self.index).set_ready(false);
            tokio::select! {
                _ = stop.changed() => return,
                _ = tokio::time::sleep(self.opts.lease / 3) => {}
            }
        }
    }

    /// Records every heartbeat (and deleted heartbeat entry) in the index.
    async fn watch_beats(self: Arc<Self>) {
        let mut stop = self.stop.subscribe();
        loop {
            match self.live.watch_with_history(">").await {
                Ok(mut watch) => {
                    lock(&self.index).restart_beats(std::time::Instant::now());
                    loop {
                        let e = tokio::select! {
                            _ = stop.changed() => return,
                            e = watch.next() => e,
                        };
                        let Some(Ok(e)) = e else { break };
                        if let Some(w) = e.key.strip_prefix("w.") {
                            let alive = e.operation == kv::Operation::Put;
                            lock(&self.index).beat(w, alive, std::time::Instant::now());
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot watch the heartbeats"),
            }
            tokio::select! {
                _ = stop.changed() => return,
                _ = tokio::time::sleep(self.opts.lease / 3) => {}
            }
        }
    }

    /// Takes over every run whose owner is dead. Reads only the heartbeat of each worker
    /// that the watches show without a recent beat, and the owner records of those that are
    /// dead; every owner record while the owner watch is not caught up.
    async fn sweep(self: &Arc<Self>) {
        let suspects = {
            let ix = lock(&self.index);
            ix.ready()
                .then(|| ix.suspects(&self.id, self.opts.lease, std::time::Instant::now()))
        };
        let Some(suspects) = suspects else {
            return self.sweep_all().await;
        };
        for (worker, keys) in suspects {
            if self.alive(&worker).await {
                // Its beats are late in the watch, not missing from the bucket.
                continue;
            }
            for key in keys {
                self.sweep_reads.fetch_add(1, Ordering::Relaxed);
                let Some((o, revision)) = self.read_owner(&key).await else {
                    continue;
                };
                // Re-owned since the index saw it: not this dead worker's any more.
                if o.w != worker {
                    continue;
                }
                let Some(run_id) = run_of_key(&key) else {
                    continue;
                };
                self.take_over(&run_id, revision, &o).await;
            }
        }
    }

    /// Takes over every run whose owner is dead, reading every owner record.
    async fn sweep_all(self: &Arc<Self>) {
        let Ok(mut keys) = self.owners.keys().await else {
            return;
        };
        let mut dead: HashSet<String> = HashSet::new();
        let mut alive: HashSet<String> = HashSet::new();
        while let Some(Ok(key)) = keys.next().await {
            self.sweep_reads.fetch_add(1, Ordering::Relaxed);
            let Some((o, revision)) = self.read_owner(&key).await else {
                continue;
            };
            if o.w == self.id || alive.contains(&o.w) {
                continue;
            }
            if !dead.contains(&o.w) {
                if self.alive(&o.w).await {
                    alive.insert(o.w.clone());
                    continue;
                }
                dead.insert(o.w.clone());
            }
            let Some(run_id) = run_of_key(&key) else {
                continue;
            };
            self.take_over(&run_id, revision, &o).await;
        }
    }

    /// A run's owner record and its revision; `None` when there is none (deleted, or
    /// unreadable: not a record this worker can act on).
    async fn read_owner(&self, key: &str) -> Option<(Owner, u64)> {
        let e = self.owners.entry(key.to_string()).await.ok()??;
        if e.operation != kv::Operation::Put {
            return None;
        }
        let o = serde_json::from_slice::<Owner>(&e.value).ok()?;
        Some((o, e.revision))
    }

    async fn forward(&self, owner: &str, s: &AgentEventSubject, bytes: &[u8]) -> Handled {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Saap-Subject", s.to_string().as_str());
        let request = async_nats::Request::new()
            .headers(headers)
            .payload(Bytes::copy_from_slice(bytes))
            .timeout(Some(self.opts.forward_timeout));
        let subject = format!("saap.fwd.{}.{owner}", self.class);
        match self.nats.client().send_request(subject, request).await {
            Ok(reply) => match &reply.payload[..] {
                b"ok" => Handled::Done,
                r if r.starts_with(b"refused:") => {
                    Handled::Refused(String::from_utf8_lossy(&r[8..]).into_owned())
                }
                r => Handled::Retry(String::from_utf8_lossy(r).into_owned()),
            },
            Err(e) => Handled::Retry(format!("owner {owner} did not answer: {e}")),
        }
    }

    async fn answer_forward(self: Arc<Self>, m: async_nats::Message) {
        let Some(reply) = m.reply.clone() else {
            return;
        };
        let subject = m
            .headers
            .as_ref()
            .and_then(|h| h.get("Saap-Subject"))
            .map(|v| v.as_str().to_string())
            .unwrap_or_default();
        let answer: Vec<u8> = match AgentEventSubject::parse(&subject) {
            Err(e) => format!("refused:bad forwarded subject: {e}").into_bytes(),
            Ok(s) => {
                if !lock(&self.owned).contains(s.run().run_id()) {
                    b"retry:not the owner".to_vec()
                } else {
                    match self.deliver_local(s.run(), &s, &m.payload).await {
                        Handled::Done => b"ok".to_vec(),
                        Handled::Refused(w) => format!("refused:{w}").into_bytes(),
                        Handled::Retry(w) | Handled::Later(w) => format!("retry:{w}").into_bytes(),
                    }
                }
            }
        };
        if let Err(e) = self.nats.client().publish(reply, Bytes::from(answer)).await {
            tracing::warn!(error = %e, "cannot answer a forwarded event");
        }
    }
}

/// Subscribes to `subject` on core NATS and hands each message to `on` until the worker
/// stops.
async fn listen(
    inner: &Arc<Inner>,
    subject: String,
    on: impl Fn(Arc<Inner>, async_nats::Message) + Send + 'static,
) -> Result<(), WorkerError> {
    let mut sub = inner
        .nats
        .client()
        .subscribe(subject.clone())
        .await
        .map_err(|e| {
            WorkerError::Nats(NatsError::Request {
                subject,
                reason: e.to_string(),
            })
        })?;
    let me = inner.clone();
    let mut stop = inner.stop.subscribe();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.changed() => break,
                m = sub.next() => {
                    let Some(m) = m else { break };
                    on(me.clone(), m);
                }
            }
        }
    });
    Ok(())
}

/// Whether `s` is a delegation request addressed to the child run it starts (its event
/// id is the run's id: see `delegation`).
fn starts_child(s: &AgentEventSubject) -> bool {
    s.event_name() == AgentInTheLoopRequestEvent::NAME && s.event_id_token() == s.run().run_id()
}

/// Whether `s` may be a child's report to its parent.
fn is_report(s: &AgentEventSubject) -> bool {
    s.event_name() == AgentInTheLoopResponseEvent::NAME
        || s.event_name() == AgentInTheLoopExceptionEvent::NAME
}

/// The run id of an owner key (`run.{id}` or `runx.{hex}`).
fn run_of_key(key: &str) -> Option<String> {
    if let Some(id) = key.strip_prefix("run.") {
        return Some(id.to_string());
    }
    let hex = key.strip_prefix("runx.")?;
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn owner_keys_round_trip_to_run_ids() {
        for id in ["6601a2b3c4d5e6f708091a2b", "odd id", "x.y"] {
            assert_eq!(run_of_key(&owner_key(id)).unwrap(), id);
        }
    }

    #[test]
    fn redelivery_backs_off_and_is_bounded() {
        assert_eq!(retry_delay(1), Duration::from_millis(100));
        assert_eq!(retry_delay(2), Duration::from_millis(200));
        assert_eq!(retry_delay(4), Duration::from_millis(800));
        assert_eq!(retry_delay(40), Duration::from_secs(2));
    }

    #[test]
    fn events_of_one_run_share_a_lane() {
        assert_eq!(lane_of("r1", 32), lane_of("r1", 32));
        assert!(lane_of("r1", 32) < 32);
        assert_eq!(lane_of("anything", 0), 0);
    }
}
