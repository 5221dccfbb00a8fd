//! [`NatsBackend`]: the engine's store on JetStream.
//!
//! - **Journal**: stream `saap_journal_{Class}`, one subject per run
//!   (`saap.journal.{Class}.{run_id}`). Each message carries one or more journal entries of
//!   the run (entries queued while the previous write was in flight are sent together: group
//!   commit) with their decision records. Every write carries
//!   `Nats-Expected-Last-Subject-Sequence` = the last sequence this process wrote or read for
//!   the run, so a write from a process that lost the run's ownership is refused by the server
//!   (fencing), and `Nats-Msg-Id` = `{run}.{first index}` so a retried write is stored once.
//! - **Contexts**: KV bucket `saap_{Class}_run_context` (one JSON object per run, key
//!   `r.{run_id}`, deleted when the run ends) and `saap_{Class}_thread_context` (one object
//!   per thread). Updates are compare-and-set loops, so concurrent steps on several workers do
//!   not lose each other's keys.
//! - **Effects**: KV bucket `saap_{Class}_effects`, one value per run (see `effects`).
//! - **Outputs**: once an entry is durable, the control events a step returned are published
//!   on the class stream (`Nats-Msg-Id` = event id, header `Saap-Journaled`), and display
//!   events on core NATS, so other clients see the run as the protocol says (DESIGN §6).
//!   Publication follows the journal write; an owner stopped in between leaves outputs in the
//!   journal only, which the next owner publishes ([`NatsBackend::republish_outputs`]).

use super::effects::{self, EffectsKv};
use crate::backend::{
    Backend, EffectAt, EffectRecord, EffectTake, JournalEntry, Pending, PersistBatch,
    RecordsSummary, RunMeta, RunPage, RunQuery, RunSummary, Scope, StoreError, StoredEvent,
    StoredInput, StoredRun,
};
use async_nats::HeaderMap;
use async_nats::jetstream::{self, consumer::pull};
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use saap_nats::{BucketKind, BucketSpec, NatsError, SaapNats, TypedKv};
use saap_protocol::{EventEnvelope, EventKind as WireKind, Hierarchy, RunAddress};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Header set on control events that the owner of their run already journaled: an intake
/// acknowledges them without dispatching them again.
pub use saap_nats::consumer::JOURNALED_HEADER;

/// Most batches the writer takes from its queue at once.
const MAX_ROUND: usize = 4096;
/// Most journal messages awaiting their acknowledgement at once (each holds one of the
/// JetStream context's 5,000 publish permits; step outputs take others). Deep enough that the
/// server always has journal writes queued; bounded so that the last of them is acknowledged
/// well within the request timeout even when every write waits for its own fsync.
const MAX_IN_FLIGHT: usize = 1024;
/// Retries of a journal write that failed transiently (about 25 s with back-off).
const WRITE_ATTEMPTS: u32 = 30;
/// Run summaries a listing reads at once from the journal stream.
const LIST_CONCURRENCY: usize = 64;
/// Attempts of one compare-and-set context update before giving up.
const CAS_ATTEMPTS: usize = 64;

type ContextMap = Map<String, Value>;

/// The journal stream of an agent class.
pub fn journal_stream(class: &str) -> String {
    format!("saap_journal_{class}")
}

/// The journal subject of a run.
pub fn journal_subject(class: &str, run_id: &str) -> String {
    format!("saap.journal.{class}.{run_id}")
}

/// Settings of a [`NatsBackend`].
#[derive(Debug, Clone)]
pub struct NatsBackendOptions {
    /// The agent id used in the subjects of published outputs (default `saap`).
    pub agent_id: String,
    /// Publish step outputs on the class stream and display events on core NATS (default
    /// true). Off only for measurements of the journal alone.
    pub publish_outputs: bool,
    /// ThreadContext time to live (default 30 days, as the Python implementation's Redis keys).
    pub thread_ttl: Duration,
}

impl Default for NatsBackendOptions {
    fn default() -> Self {
        NatsBackendOptions {
            agent_id: "saap".into(),
            publish_outputs: true,
            thread_ttl: Duration::from_secs(30 * 24 * 3600),
        }
    }
}

struct Job {
    batch: PersistBatch,
    done: oneshot::Sender<Result<(), StoreError>>,
}

struct Inner {
    nats: SaapNats,
    class: String,
    opts: NatsBackendOptions,
    hierarchy: Hierarchy,
    run_ctx: TypedKv<ContextMap>,
    thread_ctx: TypedKv<ContextMap>,
    effects: EffectsKv,
    rt: tokio::runtime::Handle,
    halted: AtomicBool,
    /// Last journal sequence per run, written or read by this process (the fencing token).
    last_seq: Mutex<HashMap<Arc<str>, u64>>,
    /// Where each run's outputs are published (from the subject that started it).
    addresses: Mutex<HashMap<Arc<str>, RunAddress>>,
}

/// The engine's store on NATS JetStream (module docs). Cheap to clone.
#[derive(Clone)]
pub struct NatsBackend {
    inner: Arc<Inner>,
    tx: mpsc::UnboundedSender<Job>,
}

fn io(detail: impl std::fmt::Display) -> StoreError {
    StoreError::Io {
        detail: detail.to_string(),
    }
}

fn nats_err(e: NatsError) -> StoreError {
    io(e)
}

impl NatsBackend {
    /// Opens the store of `class` (creating the journal stream and the context buckets if
    /// needed). `hierarchy` names the event types whose outputs are published (the
    /// workflow's, `workflow.compiled().hierarchy`). Must be called inside a tokio runtime.
    pub async fn open(
        nats: SaapNats,
        class: &str,
        hierarchy: Hierarchy,
        opts: NatsBackendOptions,
    ) -> Result<NatsBackend, StoreError> {
        saap_protocol::subject::validate_agent_class(class).map_err(|e| StoreError::Open {
            path: class.chars().take(128).collect(),
            detail: format!("not a valid agent class name: {e}"),
        })?;
        let stream = journal_stream(class);
        nats.jetstream()
            .get_or_create_stream(jetstream::stream::Config {
                name: stream.clone(),
                subjects: vec![format!("saap.journal.{class}.*")],
                storage: jetstream::stream::StorageType::File,
                retention: jetstream::stream::RetentionPolicy::Limits,
                duplicate_window: Duration::from_secs(120),
                num_replicas: nats.settings().replicas.max(1),
                ..Default::default()
            })
            .await
            .map_err(|e| StoreError::Open {
                path: stream.clone(),
                detail: format!("cannot create the journal stream: {e}; is JetStream enabled?"),
            })?;
        let run_ctx = nats
            .kv(&BucketSpec::for_class(class, BucketKind::RunContext).map_err(nats_err)?)
            .await
            .map_err(nats_err)?;
        let mut thread_spec =
            BucketSpec::for_class(class, BucketKind::ThreadContext).map_err(nats_err)?;
        thread_spec.max_age = opts.thread_ttl;
        let thread_ctx = nats.kv(&thread_spec).await.map_err(nats_err)?;
        let effects = nats
            .kv(&BucketSpec::for_class(class, BucketKind::Effects).map_err(nats_err)?)
            .await
            .map_err(nats_err)?;
        let inner = Arc::new(Inner {
            nats,
            class: class.to_string(),
            opts,
            hierarchy,
            run_ctx,
            thread_ctx,
            effects,
            rt: tokio::runtime::Handle::current(),
            halted: AtomicBool::new(false),
            last_seq: Mutex::new(HashMap::new()),
            addresses: Mutex::new(HashMap::new()),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        inner.rt.spawn(writer(inner.clone(), rx));
        Ok(NatsBackend { inner, tx })
    }

    /// The connection.
    pub fn nats(&self) -> &SaapNats {
        &self.inner.nats
    }

    /// Sets where run `run_id`'s outputs are published (the address of its start event).
    pub fn set_address(&self, run_id: &str, address: RunAddress) {
        lock(&self.inner.addresses).insert(run_id.into(), address);
    }

    /// Forgets what this process knows of run `run_id` (its fencing sequence and address):
    /// for a worker that released the run. A later write to it fails until it is loaded again.
    pub fn forget_run(&self, run_id: &str) {
        lock(&self.inner.last_seq).remove(run_id);
        lock(&self.inner.addresses).remove(run_id);
    }

    /// Loads one run's journal (`None` if it has none). Later writes of this process to the
    /// run are fenced on the last sequence read here.
    pub async fn load_run(&self, run_id: &str) -> Result<Option<StoredRun>, StoreError> {
        let subject = journal_subject(&self.inner.class, run_id);
        let mut runs = self.inner.read_journal(&subject, true).await?;
        match runs.pop() {
            Some(run) => match run.damage() {
                Some(e) => Err(e),
                None => Ok(Some(run)),
            },
            None => Ok(None),
        }
    }

    /// The stream sequence of run `run_id`'s last journal message (`None`: no journal), one
    /// direct read: for a reader that follows a run and re-reads it only when it changed.
    pub async fn last_journal_seq(&self, run_id: &str) -> Result<Option<u64>, StoreError> {
        let (_, stream) = self.inner.journal().await?;
        match stream
            .get_last_raw_message_by_subject(&journal_subject(&self.inner.class, run_id))
            .await
        {
            Ok(m) => Ok(Some(m.sequence)),
            Err(e) if e.kind() == jetstream::stream::LastRawMessageErrorKind::NoMessageFound => {
                Ok(None)
            }
            Err(e) => Err(io(format!(
                "cannot read the journal of run `{run_id}`: {e}"
            ))),
        }
    }

    /// Publishes on the class stream every control output in `stored`'s journal that the
    /// stream does not hold: for a worker that took the run over, since its previous owner
    /// may have made an output durable in the journal and stopped before publishing it.
    /// Needs the run's address ([`NatsBackend::set_address`]); returns how many it published.
    pub async fn republish_outputs(&self, stored: &StoredRun) -> usize {
        if !self.inner.opts.publish_outputs {
            return 0;
        }
        let run_id = &stored.meta.run_id;
        let Some(address) = self.inner.address(run_id, Some(&stored.meta.thread_id)) else {
            return 0;
        };
        let mut n = 0;
        for entry in &stored.journal {
            if let StoredInput::Complete {
                outputs: Some(outs),
                execution,
                attempt,
                ..
            } = &entry.input
            {
                let trace = traceparent(run_id, *execution, *attempt);
                for ev in outs
                    .iter()
                    .filter(|e| e.kind & saap_dispatch::EventKind::CONTROL != 0)
                {
                    if self
                        .inner
                        .publish_output(&address, ev, trace.as_deref(), true)
                        .await
                    {
                        n += 1;
                    }
                }
            }
        }
        if n > 0 {
            tracing::info!(run_id = %run_id, republished = n, "re-published step outputs missing from the class stream");
        }
        n
    }

    fn halted(&self) -> bool {
        self.inner.halted.load(Ordering::Relaxed)
    }

    fn spawn<T: Send + 'static>(
        &self,
        f: impl std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> Pending<T> {
        if self.halted() {
            return Pending::Ready(Err(StoreError::Halted));
        }
        let (tx, rx) = oneshot::channel();
        self.inner.rt.spawn(async move {
            let _ = tx.send(f.await);
        });
        Pending::Wait(rx)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain maps: a panic elsewhere leaves them consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A KV key for an id: `{prefix}.{id}`, or `{prefix}x.{hex of id}` when the id is not a
/// valid KV token (the two forms cannot collide).
pub(crate) fn ctx_key(prefix: &str, id: &str) -> String {
    let k = format!("{prefix}.{id}");
    if !id.contains('.') && saap_nats::kv::is_valid_key(&k) {
        k
    } else {
        let hex: String = id.bytes().map(|b| format!("{b:02x}")).collect();
        format!("{prefix}x.{hex}")
    }
}

impl Inner {
    fn ctx_bucket(&self, scope: &Scope) -> (&TypedKv<ContextMap>, String) {
        match scope {
            Scope::Run(r) => (&self.run_ctx, ctx_key("r", r)),
            Scope::Thread(t) => (&self.thread_ctx, ctx_key("t", t)),
        }
    }

    /// Applies `f` to a context object with compare-and-set, retrying on conflicts.
    async fn ctx_update(
        &self,
        scope: Scope,
        f: impl Fn(&mut ContextMap),
    ) -> Result<(), StoreError> {
        let (kv, key) = self.ctx_bucket(&scope);
        for _ in 0..CAS_ATTEMPTS {
            let current = kv.get(&key).await.map_err(nats_err)?;
            let (mut map, rev) = match current {
                Some(v) => (v.value, Some(v.revision)),
                None => (Map::new(), None),
            };
            f(&mut map);
            match kv.compare_and_set(&key, &map, rev).await {
                Ok(_) => return Ok(()),
                Err(NatsError::RevisionConflict { .. } | NatsError::KeyExists { .. }) => continue,
                Err(e) => return Err(nats_err(e)),
            }
        }
        Err(io(format!(
            "context `{key}` changed {CAS_ATTEMPTS} times while this update retried; too many concurrent writers to one key"
        )))
    }

    /// The class's journal stream, and its name (for messages).
    async fn journal(&self) -> Result<(String, jetstream::stream::Stream), StoreError> {
        self.journal_of(&self.class).await
    }

    /// The journal stream of agent class `class` (another class's, for reading).
    async fn journal_of(
        &self,
        class: &str,
    ) -> Result<(String, jetstream::stream::Stream), StoreError> {
        let stream_name = journal_stream(class);
        let stream = self
            .nats
            .jetstream()
            .get_stream(&stream_name)
            .await
            .map_err(|e| io(format!("cannot read the journal stream {stream_name}: {e}")))?;
        Ok((stream_name, stream))
    }

    /// Reads journal messages of `filter` (one run's subject, or all) in stream order and
    /// groups them into runs. With `fence`, later writes of this process to those runs are
    /// fenced on the last sequence read (a read-only look passes `false`).
    async fn read_journal(&self, filter: &str, fence: bool) -> Result<Vec<StoredRun>, StoreError> {
        let (_, stream) = self.journal().await?;
        self.read_stream(stream, filter, fence).await
    }

    /// [`Inner::read_journal`] of stream `stream`.
    async fn read_stream(
        &self,
        stream: jetstream::stream::Stream,
        filter: &str,
        fence: bool,
    ) -> Result<Vec<StoredRun>, StoreError> {
        let mut consumer: jetstream::consumer::Consumer<pull::OrderedConfig> = stream
            .create_consumer(pull::OrderedConfig {
                filter_subject: filter.to_string(),
                ..Default::default()
            })
            .await
            .map_err(|e| io(format!("cannot read the journal: {e}")))?;
        let pending = consumer
            .info()
            .await
            .map_err(|e| io(format!("cannot read the journal: {e}")))?
            .num_pending;
        let mut order: Vec<Arc<str>> = Vec::new();
        let mut runs: HashMap<Arc<str>, RunBuilder> = HashMap::new();
        if pending > 0 {
            let mut messages = consumer
                .messages()
                .await
                .map_err(|e| io(format!("cannot read the journal: {e}")))?;
            while let Some(m) = messages.next().await {
                let m = m.map_err(|e| io(format!("journal read failed: {e}")))?;
                let info = m
                    .info()
                    .map_err(|e| io(format!("journal message without metadata: {e}")))?;
                let (seq, left) = (info.stream_sequence, info.pending);
                let run_id: Arc<str> = m.subject.rsplit('.').next().unwrap_or_default().into();
                let b = runs.entry(run_id.clone()).or_insert_with(|| {
                    order.push(run_id.clone());
                    RunBuilder::new(run_id.clone())
                });
                // A damaged message fails its run only (reported by `finish`), never the
                // other runs of the class.
                if b.damaged.is_some() {
                    b.last_seq = seq;
                } else if let Err(e) = b.add(&m.payload, seq) {
                    tracing::error!(error = %e, "a stored run cannot be read");
                    b.damaged = Some(match e {
                        StoreError::BadRow { detail, .. } => detail,
                        other => other.to_string(),
                    });
                }
                if left == 0 {
                    break;
                }
            }
        }
        let mut out = Vec::with_capacity(order.len());
        let mut last = lock(&self.last_seq);
        for id in order {
            if let Some(b) = runs.remove(&id) {
                if fence {
                    last.insert(id.clone(), b.last_seq);
                }
                if let Some(run) = b.finish()? {
                    out.push(run);
                }
            }
        }
        Ok(out)
    }

    /// A page of the class's runs, newest first. Run ids come from the stream's subject list
    /// (names only, no message is read); the runs skipped by the offset cost nothing unless a
    /// status filter must look at them; each listed run costs two direct reads (its first
    /// and last journal message), or a read of its journal when those do not tell how it
    /// ended (events after the stop). Runs are read 64 at a time.
    async fn list_runs(&self, workflow: &str, q: &RunQuery) -> Result<RunPage, StoreError> {
        let (stream_name, stream) = self.journal().await?;
        let prefix = format!("saap.journal.{}.", self.class);
        let mut subjects = stream
            .info_with_subjects(format!("{prefix}*"))
            .await
            .map_err(|e| io(format!("cannot list the runs of {stream_name}: {e}")))?;
        let mut ids: Vec<String> = Vec::new();
        let wanted = q.prefix().unwrap_or("");
        while let Some(item) = subjects.next().await {
            let (subject, _count) =
                item.map_err(|e| io(format!("cannot list the runs of {stream_name}: {e}")))?;
            if let Some(id) = subject.strip_prefix(&prefix)
                && id.starts_with(wanted)
            {
                ids.push(id.to_string());
            }
        }
        // Run ids begin with their start time (ObjectId layout): newest first, and a time
        // range is applied to the ids before any run is read.
        ids.sort_unstable_by(|a, b| b.cmp(a));
        if q.started_from_ns.is_some() || q.started_before_ns.is_some() {
            ids.retain(|id| q.admits_start(id_started_ns(id)));
        }
        if let Some(after) = &q.after {
            // The cursor: only ids after it in this order (an unknown id lists nothing).
            match ids.iter().position(|id| id == after) {
                Some(i) => drop(ids.drain(..=i)),
                None => ids.clear(),
            }
        }
        let limit = q.page_size();
        let mut page = RunPage::default();
        // Without a status or thread filter every run of the class matches (the class is the
        // workflow's name), so the offset skips ids without reading them.
        let read_to_filter = q.status.is_some() || q.thread().is_some();
        let mut skipped = 0usize;
        let ids: Vec<String> = if !read_to_filter {
            skipped = q.offset.min(ids.len());
            ids.into_iter().skip(q.offset).collect()
        } else {
            ids
        };
        // Summaries are read LIST_CONCURRENCY at a time (each is one or two round trips),
        // then taken in order.
        'chunks: for chunk in ids.chunks(LIST_CONCURRENCY) {
            let want = if !read_to_filter {
                // Only as many as the page still needs (+1 to know there are more).
                (limit + 1 - page.runs.len()).min(chunk.len())
            } else {
                chunk.len()
            };
            let summaries = futures_util::future::join_all(
                chunk[..want]
                    .iter()
                    .map(|id| self.summarize_run(&stream, workflow, id)),
            )
            .await;
            for summary in summaries {
                let Some(summary) = summary? else {
                    continue;
                };
                if q.status.is_some_and(|f| !f.admits(&summary))
                    || q.thread().is_some_and(|t| t != summary.thread_id)
                {
                    continue;
                }
                if skipped < q.offset {
                    skipped += 1;
                    continue;
                }
                if page.runs.len() == limit {
                    page.more = true;
                    break 'chunks;
                }
                page.runs.push(summary);
            }
        }
        Ok(page)
    }

    /// One run's summary from its first and last journal messages (`None`: not a run of
    /// `workflow`, or no journal).
    async fn summarize_run(
        &self,
        stream: &jetstream::stream::Stream,
        workflow: &str,
        run_id: &str,
    ) -> Result<Option<RunSummary>, StoreError> {
        let subject = journal_subject(&self.class, run_id);
        let read = |e: &dyn std::fmt::Display| {
            io(format!("cannot read the journal of run `{run_id}`: {e}"))
        };
        let first = match stream.get_first_raw_message_by_subject(&subject, 1).await {
            Ok(m) => m,
            Err(e) if e.kind() == jetstream::stream::RawMessageErrorKind::NoMessageFound => {
                return Ok(None);
            }
            Err(e) => return Err(read(&e)),
        };
        let bad = |e: serde_json::Error| StoreError::BadRow {
            run_id: run_id.to_string(),
            detail: e.to_string(),
        };
        let head: WireBatch = serde_json::from_slice(&first.payload).map_err(bad)?;
        let Some(meta) = head.m else {
            return Err(StoreError::BadRow {
                run_id: run_id.to_string(),
                detail: "the journal has no first entry (run metadata missing)".into(),
            });
        };
        if meta.w != workflow {
            return Ok(None);
        }
        let last = stream
            .get_last_raw_message_by_subject(&subject)
            .await
            .map_err(|e| read(&e))?;
        let tail: WireBatch = serde_json::from_slice(&last.payload).map_err(bad)?;
        let mut s = RecordsSummary::default();
        let mut ended = false;
        for e in &tail.b {
            if let Value::Array(rs) = &e.r {
                s.add_entry(&e.e, rs);
            }
            ended |= e.end;
        }
        let entries = tail.b.last().map_or(0, |e| e.x + 1);
        let started_ns = id_started_ns(run_id);
        let ended = ended || s.after_stop || s.termination.is_some();
        if s.max_seq.is_some() && (!ended || s.termination.is_some()) {
            return Ok(Some(RunSummary {
                run_id: run_id.to_string(),
                thread_id: meta.t,
                ended,
                termination: s.termination,
                cancelled: s.cancelled,
                started_ns,
                events: s.max_seq.map_or(0, |m| m + 1),
                journal_entries: entries,
            }));
        }
        // The last message does not tell: read the whole journal of this run.
        let mut runs = self.read_journal(&subject, false).await?;
        Ok(runs
            .pop()
            .map(|r| crate::backend::summarize(&r, started_ns)))
    }

    /// Retries a journal write that failed transiently (a node fail-over, a timeout, a
    /// reconnect), with the same headers. Before each attempt it checks whether an earlier
    /// attempt was stored after all (its acknowledgement lost): then the run's last journal
    /// message carries this write's `Nats-Msg-Id`. Returns the stored sequence.
    async fn retry_write(
        &self,
        subject: &str,
        headers: HeaderMap,
        payload: Bytes,
        mut last: String,
    ) -> Result<u64, String> {
        let msg_id = headers
            .get(saap_protocol::subject::NATS_MSG_ID_HEADER)
            .map(|v| v.as_str().to_string())
            .unwrap_or_default();
        let mut delay = Duration::from_millis(50);
        for attempt in 1..=WRITE_ATTEMPTS {
            tracing::warn!(subject, attempt, error = %last, "journal write failed; retrying");
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(1));
            if let Some(seq) = self.stored_as(subject, &msg_id).await {
                return Ok(seq);
            }
            let sent = self
                .nats
                .jetstream()
                .publish_with_headers(subject.to_string(), headers.clone(), payload.clone())
                .await;
            match sent {
                Ok(ack) => match ack.await {
                    Ok(a) => return Ok(a.sequence),
                    Err(e) => last = e.to_string(),
                },
                Err(e) => last = e.to_string(),
            }
            if fenced(&last) {
                // Ours (stored by an earlier attempt), or another worker's: look.
                return self.stored_as(subject, &msg_id).await.ok_or(last);
            }
        }
        Err(format!("{last} (after {WRITE_ATTEMPTS} retries)"))
    }

    /// The sequence of the run's last journal message if it is the write `msg_id`.
    async fn stored_as(&self, subject: &str, msg_id: &str) -> Option<u64> {
        let stream = self
            .nats
            .jetstream()
            .get_stream(journal_stream(&self.class))
            .await
            .ok()?;
        let m = stream.get_last_raw_message_by_subject(subject).await.ok()?;
        let id = m.headers.get(saap_protocol::subject::NATS_MSG_ID_HEADER)?;
        (id.as_str() == msg_id).then_some(m.sequence)
    }

    fn address(&self, run_id: &Arc<str>, thread_id: Option<&Arc<str>>) -> Option<RunAddress> {
        let mut map = lock(&self.addresses);
        if let Some(a) = map.get(run_id) {
            return Some(a.clone());
        }
        let thread = thread_id?;
        let a = RunAddress::new(&self.class, &self.opts.agent_id, thread, run_id, run_id).ok()?;
        map.insert(run_id.clone(), a.clone());
        Some(a)
    }

    fn envelope(&self, ev: &StoredEvent) -> Option<EventEnvelope> {
        let mut env =
            EventEnvelope::new(&self.hierarchy, &ev.name, ev.id, saap_nats::ids::now_ns())?;
        if let Value::Object(fields) = &*ev.payload {
            for (k, v) in fields {
                env = env.with_field(k, v.clone());
            }
        }
        Some(env)
    }

    /// After an entry is durable: publishes what it made visible to other clients.
    async fn publish_after(&self, address: &RunAddress, entry: &str) {
        if !self.opts.publish_outputs || entry.is_empty() {
            return;
        }
        let Ok(entry) = serde_json::from_str::<JournalEntry>(entry) else {
            return;
        };
        let trace = match &entry.input {
            StoredInput::Complete {
                execution, attempt, ..
            } => traceparent(address.run_id(), *execution, *attempt),
            _ => None,
        };
        let (controls, displays): (Vec<&StoredEvent>, Vec<&StoredEvent>) = match &entry.input {
            StoredInput::Complete {
                outputs: Some(outs),
                ..
            } => (
                outs.iter()
                    .filter(|e| e.kind & saap_dispatch::EventKind::CONTROL != 0)
                    .collect(),
                outs.iter()
                    .filter(|e| e.kind & saap_dispatch::EventKind::DISPLAY != 0)
                    .collect(),
            ),
            StoredInput::Append {
                event, by: Some(_), ..
            } => (Vec::new(), vec![event]),
            _ => return,
        };
        for ev in controls {
            self.publish_output(address, ev, trace.as_deref(), false)
                .await;
        }
        for ev in displays {
            if let Some(env) = self.envelope(ev)
                && let Err(e) = self.nats.publish_display(address, &env).await
            {
                tracing::warn!(error = %e, "publishing a display event failed");
            }
        }
    }

    /// Publishes one journaled control output on the class stream (`Nats-Msg-Id` = event id,
    /// so the stream stores it once within its duplicate window). With `if_missing`, first
    /// looks up the output's subject (unique per event id) and publishes only when the stream
    /// does not hold it, so a re-publication after the window adds no copy either. Returns
    /// whether it was (re)published.
    async fn publish_output(
        &self,
        address: &RunAddress,
        ev: &StoredEvent,
        traceparent: Option<&str>,
        if_missing: bool,
    ) -> bool {
        let Some(env) = self.envelope(ev) else {
            return false;
        };
        let Ok(subject) =
            address.event_subject(WireKind::Control, &env.event_name, &ev.id.to_string())
        else {
            return false;
        };
        let subject = subject.to_string();
        if if_missing {
            let Ok(stream_name) = saap_protocol::subject::stream_name(&self.class) else {
                return false;
            };
            match self.nats.jetstream().get_stream(stream_name).await {
                Ok(stream) => {
                    if stream
                        .get_last_raw_message_by_subject(&subject)
                        .await
                        .is_ok()
                    {
                        return false;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the class stream to re-publish outputs");
                    return false;
                }
            }
        }
        let mut headers = HeaderMap::new();
        headers.insert(
            saap_protocol::subject::NATS_MSG_ID_HEADER,
            ev.id.to_string().as_str(),
        );
        headers.insert(JOURNALED_HEADER, "1");
        if let Some(t) = traceparent {
            headers.insert(saap_protocol::subject::TRACEPARENT_HEADER, t);
        }
        let sent = self
            .nats
            .jetstream()
            .publish_with_headers(subject, headers, Bytes::from(env.encode_bytes()))
            .await;
        match sent {
            Ok(ack) if if_missing => match ack.await {
                Ok(_) => true,
                Err(e) => {
                    tracing::warn!(error = %e, "re-publishing a step output failed");
                    false
                }
            },
            Ok(ack) => {
                // The output is already durable in the journal: its publication is
                // observability, so the ack is awaited off this path.
                tokio::spawn(async move {
                    if let Err(e) = ack.await {
                        tracing::warn!(error = %e, "publishing a step output failed");
                    }
                });
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "publishing a step output failed");
                false
            }
        }
    }
}

/// The W3C `traceparent` of the outputs of an execution's attempt: its span in the run's
/// trace (the ids `EngineOptions::telemetry` exports), so that a consumer of the class
/// stream can join its own spans to the run's.
#[cfg(feature = "otel")]
fn traceparent(run_id: &str, execution: u32, attempt: u32) -> Option<String> {
    Some(saap_otel::traceparent(
        saap_otel::TraceId::of_run(run_id),
        saap_otel::SpanId::of_execution(run_id, execution, attempt),
    ))
}

#[cfg(not(feature = "otel"))]
fn traceparent(_run_id: &str, _execution: u32, _attempt: u32) -> Option<String> {
    None
}

/// Collects a run's journal messages.
struct RunBuilder {
    run_id: Arc<str>,
    meta: Option<RunMeta>,
    ended: bool,
    journal: Vec<JournalEntry>,
    records: Vec<Value>,
    /// How many records each journal entry made.
    entry_records: Vec<u32>,
    last_seq: u64,
    /// Why this run's journal cannot be read; later messages of the run are skipped.
    damaged: Option<String>,
}

impl RunBuilder {
    fn new(run_id: Arc<str>) -> RunBuilder {
        RunBuilder {
            run_id,
            meta: None,
            ended: false,
            journal: Vec::new(),
            records: Vec::new(),
            entry_records: Vec::new(),
            last_seq: 0,
            damaged: None,
        }
    }

    fn bad(&self, detail: impl std::fmt::Display) -> StoreError {
        StoreError::BadRow {
            run_id: self.run_id.to_string(),
            detail: detail.to_string(),
        }
    }

    fn add(&mut self, payload: &[u8], seq: u64) -> Result<(), StoreError> {
        self.last_seq = seq;
        let msg: WireBatch = serde_json::from_slice(payload).map_err(|e| self.bad(e))?;
        if let Some(m) = msg.m
            && self.meta.is_none()
        {
            self.meta = Some(RunMeta {
                run_id: self.run_id.clone(),
                thread_id: m.t.into(),
                workflow: m.w,
                fingerprint: m.f,
                parent: m.p,
            });
        }
        for e in msg.b {
            if e.x != self.journal.len() as u64 {
                // A write retried after its ack was lost is stored once (Msg-Id), so a gap or
                // repeat means the journal was damaged.
                return Err(self.bad(format!(
                    "journal entry {} found where entry {} was expected",
                    e.x,
                    self.journal.len()
                )));
            }
            let entry: JournalEntry = serde_json::from_value(e.e).map_err(|err| self.bad(err))?;
            self.journal.push(entry);
            match e.r {
                Value::Array(rs) => {
                    self.entry_records
                        .push(u32::try_from(rs.len()).unwrap_or(u32::MAX));
                    self.records.extend(rs);
                }
                Value::Null => self.entry_records.push(0),
                other => return Err(self.bad(format!("records are not an array: {other}"))),
            }
            self.ended |= e.end;
        }
        Ok(())
    }

    /// The run read, or a damaged run ([`StoredRun::damaged`]; its metadata may be empty
    /// when the first message was the damaged one).
    fn finish(self) -> Result<Option<StoredRun>, StoreError> {
        let damaged = match (&self.damaged, &self.meta) {
            (Some(d), _) => Some(d.clone()),
            (None, None) => Some("the journal has no first entry (run metadata missing)".into()),
            (None, Some(_)) => None,
        };
        if let Some(detail) = damaged {
            let meta = self.meta.unwrap_or_else(|| RunMeta {
                run_id: self.run_id.clone(),
                thread_id: "".into(),
                workflow: String::new(),
                fingerprint: 0,
                parent: None,
            });
            return Ok(Some(StoredRun {
                meta,
                ended: self.ended,
                journal: Vec::new(),
                records: Vec::new(),
                entry_records: Vec::new(),
                damaged: Some(detail),
            }));
        }
        Ok(self.meta.map(|meta| StoredRun {
            meta,
            ended: self.ended,
            journal: self.journal,
            records: self.records,
            entry_records: self.entry_records,
            damaged: None,
        }))
    }
}

#[derive(serde::Deserialize)]
struct WireMeta {
    t: String,
    w: String,
    f: u64,
    /// The parent of a child run.
    #[serde(default)]
    p: Option<crate::backend::RunParent>,
}

#[derive(serde::Deserialize)]
struct WireEntry {
    x: u64,
    e: Value,
    #[serde(default)]
    r: Value,
    #[serde(default)]
    end: bool,
}

#[derive(serde::Deserialize)]
struct WireBatch {
    #[serde(default)]
    m: Option<WireMeta>,
    b: Vec<WireEntry>,
}

/// Encodes one run's batches as one journal message (entries and records are JSON already).
fn encode(batches: &[PersistBatch]) -> String {
    let mut s = String::with_capacity(
        64 + batches
            .iter()
            .map(|b| b.entry_json.len() + b.records_json.len() + 48)
            .sum::<usize>(),
    );
    s.push('{');
    if let Some(m) = batches.iter().find_map(|b| b.new_run.as_ref()) {
        s.push_str("\"m\":");
        s.push_str(
            &match &m.parent {
                None => serde_json::json!({"t": &*m.thread_id, "w": m.workflow, "f": m.fingerprint}),
                Some(p) => serde_json::json!({"t": &*m.thread_id, "w": m.workflow, "f": m.fingerprint, "p": p}),
            }
            .to_string(),
        );
        s.push(',');
    }
    s.push_str("\"b\":[");
    for (i, b) in batches.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str("{\"x\":");
        s.push_str(&b.index.to_string());
        s.push_str(",\"e\":");
        s.push_str(if b.entry_json.is_empty() {
            "null"
        } else {
            &b.entry_json
        });
        s.push_str(",\"r\":");
        s.push_str(if b.records_json.is_empty() {
            "[]"
        } else {
            &b.records_json
        });
        if b.ended {
            s.push_str(",\"end\":true");
        }
        s.push('}');
    }
    s.push_str("]}");
    s
}

/// One journal message on its way: the run's batches it carries, whom to tell, and what the
/// server answered (the stored sequence, or why not).
struct Flight {
    run_id: Arc<str>,
    batches: Vec<PersistBatch>,
    senders: Vec<oneshot::Sender<Result<(), StoreError>>>,
    result: Result<u64, String>,
}

type FlightFuture = Pin<Box<dyn Future<Output = Flight> + Send>>;

/// Whether a journal write was refused by its fencing (another process wrote to the run).
fn fenced(error: &str) -> bool {
    error.contains("wrong last sequence")
}

/// The store's writer, a pipeline. Each run has at most one journal message awaiting its
/// acknowledgement, since the next one is fenced on the sequence that acknowledgement returns:
/// batches of the run queued meanwhile wait and go together in its next message (group
/// commit). Messages of different runs are all in flight at once (up to [`MAX_IN_FLIGHT`]), so
/// the server always has journal writes queued, and no run waits for another's: a batch
/// resolves as soon as its own message is acknowledged (durable before its executions start,
/// DESIGN §4.9).
async fn writer(inner: Arc<Inner>, mut rx: mpsc::UnboundedReceiver<Job>) {
    // Runs with a message in flight, and the jobs queued behind it.
    let mut busy: HashMap<Arc<str>, Vec<Job>> = HashMap::new();
    let mut flights: FuturesUnordered<FlightFuture> = FuturesUnordered::new();
    let mut jobs: Vec<Job> = Vec::new();
    let mut open = true;
    while open || !flights.is_empty() {
        tokio::select! {
            biased;
            Some(flight) = flights.next(), if !flights.is_empty() => {
                let run_id = flight.run_id.clone();
                let failed = inner.land(flight);
                let Some(waiting) = busy.remove(&run_id) else { continue };
                if waiting.is_empty() {
                    continue;
                }
                let refusal = if inner.halted.load(Ordering::Relaxed) {
                    Some(StoreError::Halted)
                } else {
                    // A batch written after one that failed would leave a gap: fail it too
                    // (the engine stops the run on the first failure anyway).
                    failed.map(|detail| {
                        io(format!("an earlier journal write of run `{run_id}` failed: {detail}"))
                    })
                };
                match refusal {
                    Some(e) => {
                        for j in waiting {
                            let _ = j.done.send(Err(e.clone()));
                        }
                    }
                    None => {
                        let flight = inner.send(run_id.clone(), waiting).await;
                        flights.push(flight);
                        busy.insert(run_id, Vec::new());
                    }
                }
            }
            job = rx.recv(), if open && flights.len() < MAX_IN_FLIGHT => {
                let Some(first) = job else {
                    open = false;
                    continue;
                };
                jobs.push(first);
                while jobs.len() < MAX_ROUND {
                    match rx.try_recv() {
                        Ok(j) => jobs.push(j),
                        Err(_) => break,
                    }
                }
                if inner.halted.load(Ordering::Relaxed) {
                    for j in jobs.drain(..) {
                        let _ = j.done.send(Err(StoreError::Halted));
                    }
                    continue;
                }
                // Group by run, keeping each run's journal order.
                let mut groups: Vec<(Arc<str>, Vec<Job>)> = Vec::new();
                let mut index: HashMap<Arc<str>, usize> = HashMap::new();
                for j in jobs.drain(..) {
                    if let Some(waiting) = busy.get_mut(&j.batch.run_id) {
                        waiting.push(j);
                        continue;
                    }
                    let i = *index.entry(j.batch.run_id.clone()).or_insert_with(|| {
                        groups.push((j.batch.run_id.clone(), Vec::new()));
                        groups.len() - 1
                    });
                    groups[i].1.push(j);
                }
                for (run_id, group) in groups {
                    let flight = inner.send(run_id.clone(), group).await;
                    flights.push(flight);
                    busy.insert(run_id, Vec::new());
                }
            }
        }
    }
}

impl Inner {
    /// Publishes one message with a run's queued batches (fenced on the run's last known
    /// sequence) and returns the future of its acknowledgement, retried on transient
    /// failures.
    async fn send(self: &Arc<Self>, run_id: Arc<str>, group: Vec<Job>) -> FlightFuture {
        let (batches, senders): (Vec<PersistBatch>, Vec<_>) =
            group.into_iter().map(|j| (j.batch, j.done)).unzip();
        let expected = lock(&self.last_seq).get(&run_id).copied().unwrap_or(0);
        let mut headers = HeaderMap::new();
        headers.insert(
            "Nats-Expected-Last-Subject-Sequence",
            expected.to_string().as_str(),
        );
        headers.insert(
            saap_protocol::subject::NATS_MSG_ID_HEADER,
            format!("{run_id}.{}", batches.first().map_or(0, |b| b.index)).as_str(),
        );
        let payload = Bytes::from(encode(&batches));
        let subject = journal_subject(&self.class, &run_id);
        // Waits only for the message to be handed to the connection (and for a free
        // in-flight permit of the JetStream context), not for its acknowledgement.
        let sent = self
            .nats
            .jetstream()
            .publish_with_headers(subject.clone(), headers.clone(), payload.clone())
            .await;
        let inner = self.clone();
        Box::pin(async move {
            let first = match sent {
                Ok(ack) => ack.await.map(|a| a.sequence).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            let result = match first {
                Ok(seq) => Ok(seq),
                // Fenced on the first attempt: another worker wrote to the run.
                Err(e) if fenced(&e) => Err(e),
                // Transient (fail-over, timeout, reconnect): retry the same message.
                Err(e) => inner.retry_write(&subject, headers, payload, e).await,
            };
            Flight {
                run_id,
                batches,
                senders,
                result,
            }
        })
    }

    /// Resolves the batches of an acknowledged (or failed) journal message; on success,
    /// publishes what they made visible. Returns why it failed, if it did.
    fn land(self: &Arc<Self>, flight: Flight) -> Option<String> {
        let Flight {
            run_id,
            batches,
            senders,
            result,
        } = flight;
        match result {
            Ok(sequence) => {
                lock(&self.last_seq).insert(run_id.clone(), sequence);
                let thread = batches
                    .iter()
                    .find_map(|b| b.new_run.as_ref().map(|m| m.thread_id.clone()));
                // Read before the batches resolve: once they do, the run may end and be
                // released (`forget_run`), which drops its address.
                let address = self.address(&run_id, thread.as_ref());
                for s in senders {
                    let _ = s.send(Ok(()));
                }
                let ended = batches.iter().any(|b| b.ended);
                let inner = self.clone();
                let entries: Vec<String> = batches.into_iter().map(|b| b.entry_json).collect();
                tokio::spawn(async move {
                    if let Some(address) = &address {
                        for e in &entries {
                            inner.publish_after(address, e).await;
                        }
                    }
                    if ended {
                        inner.drop_run_context(&run_id).await;
                    }
                });
                None
            }
            Err(e) => {
                tracing::error!(run_id = %run_id, error = %e, "journal write refused");
                let detail = if fenced(&e) {
                    format!(
                        "run `{run_id}` was written by another worker (journal fencing: {e}); this worker no longer owns it"
                    )
                } else {
                    format!("journal write for run `{run_id}` failed: {e}")
                };
                for s in senders {
                    let _ = s.send(Err(io(&detail)));
                }
                Some(detail)
            }
        }
    }

    /// Deletes an ended run's RunContext, if it has one: a delete of an absent key would
    /// still store a delete marker, one more fsync per run with `sync_interval: always`, where
    /// the read costs none.
    async fn drop_run_context(&self, run_id: &Arc<str>) {
        let (kv, key) = self.ctx_bucket(&Scope::Run(run_id.clone()));
        if let Ok(None) = kv.get(&key).await {
            return;
        }
        if let Err(e) = kv.delete(&key).await {
            tracing::warn!(run_id = %run_id, error = %e, "cannot delete the RunContext of an ended run");
        }
    }
}

impl Backend for NatsBackend {
    fn name(&self) -> &'static str {
        "nats"
    }
    fn wants_journal(&self) -> bool {
        true
    }
    fn persist(&self, batch: PersistBatch) -> Pending<()> {
        if self.halted() {
            return Pending::Ready(Err(StoreError::Halted));
        }
        let (done, rx) = oneshot::channel();
        if self.tx.send(Job { batch, done }).is_err() {
            return Pending::Ready(Err(StoreError::Halted));
        }
        Pending::Wait(rx)
    }
    fn load_runs(&self, workflow: &str, live_only: bool) -> Pending<Vec<StoredRun>> {
        let inner = self.inner.clone();
        let workflow = workflow.to_string();
        self.spawn(async move {
            let filter = format!("saap.journal.{}.*", inner.class);
            let runs = inner.read_journal(&filter, true).await?;
            Ok(runs
                .into_iter()
                // A damaged run whose metadata could not be read is reported too (the
                // journal stream holds this class's runs only).
                .filter(|r| {
                    (r.meta.workflow == workflow
                        || r.damaged.is_some() && r.meta.workflow.is_empty())
                        && !(live_only && r.ended)
                })
                .collect())
        })
    }
    fn list_runs(&self, workflow: &str, query: &RunQuery) -> Pending<RunPage> {
        let inner = self.inner.clone();
        let (workflow, query) = (workflow.to_string(), query.clone());
        self.spawn(async move { inner.list_runs(&workflow, &query).await })
    }
    fn read_run(&self, workflow: &str, run_id: &str) -> Pending<Option<StoredRun>> {
        let inner = self.inner.clone();
        let (workflow, run_id) = (workflow.to_string(), run_id.to_string());
        self.spawn(async move {
            // An id that is not one subject token cannot name a run (and must not widen the
            // filter).
            if run_id.is_empty()
                || run_id.len() > 128
                || run_id
                    .chars()
                    .any(|c| matches!(c, '.' | '*' | '>') || c.is_whitespace())
            {
                return Ok(None);
            }
            // A run of another agent class (a child delegated to it) is in that class's
            // journal, when a worker of it has served here.
            if workflow != inner.class
                && saap_protocol::subject::validate_agent_class(&workflow).is_ok()
                && let Ok((_, stream)) = inner.journal_of(&workflow).await
            {
                let subject = journal_subject(&workflow, &run_id);
                let mut runs = inner.read_stream(stream, &subject, false).await?;
                if let Some(run) = runs.pop().filter(|r| r.meta.workflow == workflow) {
                    return Ok(Some(run));
                }
            }
            // Else in this class's journal (an agent run by an engine of this class's process).
            let subject = journal_subject(&inner.class, &run_id);
            let mut runs = inner.read_journal(&subject, false).await?;
            Ok(runs.pop().filter(|r| r.meta.workflow == workflow))
        })
    }
    fn ctx_get(&self, scope: Scope, key: &str) -> Pending<Option<Value>> {
        let inner = self.inner.clone();
        let key = key.to_string();
        self.spawn(async move {
            let (kv, k) = inner.ctx_bucket(&scope);
            Ok(kv
                .get(&k)
                .await
                .map_err(nats_err)?
                .and_then(|mut v| v.value.remove(&key)))
        })
    }
    fn ctx_set(&self, scope: Scope, key: &str, value: Value) -> Pending<()> {
        let inner = self.inner.clone();
        let key = key.to_string();
        self.spawn(async move {
            inner
                .ctx_update(scope, |m| {
                    m.insert(key.clone(), value.clone());
                })
                .await
        })
    }
    fn ctx_delete(&self, scope: Scope, key: &str) -> Pending<()> {
        let inner = self.inner.clone();
        let key = key.to_string();
        self.spawn(async move {
            inner
                .ctx_update(scope, |m| {
                    m.remove(&key);
                })
                .await
        })
    }
    fn effect_take(&self, at: &EffectAt, key: &str) -> Pending<EffectTake> {
        let (inner, at, key) = (self.inner.clone(), at.clone(), key.to_string());
        self.spawn(async move {
            effects::take(&inner.effects, &ctx_key("e", &at.run_id), &at, &key).await
        })
    }
    fn effect_record(&self, run_id: &str, record: EffectRecord) -> Pending<()> {
        let (inner, run_key) = (self.inner.clone(), ctx_key("e", run_id));
        self.spawn(async move { effects::record(&inner.effects, &run_key, record).await })
    }
    fn effects(&self, run_id: &str) -> Pending<Vec<EffectRecord>> {
        let (inner, run_key) = (self.inner.clone(), ctx_key("e", run_id));
        self.spawn(async move { effects::read(&inner.effects, &run_key).await })
    }
    fn halt(&self) {
        self.inner.halted.store(true, Ordering::Relaxed);
    }
}

/// When a run began, from its id (ObjectId layout: its first four bytes are the second).
fn id_started_ns(run_id: &str) -> Option<i64> {
    saap_protocol::EventId::parse(run_id)
        .ok()
        .map(|id| i64::from(id.object_id_seconds()) * 1_000_000_000)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn context_keys_are_valid_kv_keys_for_any_id() {
        for id in ["abc", "a.b", "with space", "ünïcode", "x/y=z"] {
            let k = ctx_key("t", id);
            assert!(saap_nats::kv::is_valid_key(&k), "{id} -> {k}");
        }
        assert_eq!(ctx_key("r", "0123abcd"), "r.0123abcd");
    }

    #[test]
    fn a_group_of_batches_encodes_to_one_decodable_message() {
        let b = |index: u64, new_run: bool| PersistBatch {
            run_id: "r1".into(),
            new_run: new_run.then(|| RunMeta {
                run_id: "r1".into(),
                thread_id: "t1".into(),
                workflow: "Wf".into(),
                fingerprint: u64::MAX,
                parent: Some(crate::backend::RunParent {
                    run_id: "p1".into(),
                    agent_class: "Boss".into(),
                }),
            }),
            index,
            entry_json: r#"{"i":{"in":"retry","execution":3}}"#.into(),
            records_json: "[1,2]".into(),
            ended: index == 1,
        };
        let text = encode(&[b(0, true), b(1, false)]);
        let mut rb = RunBuilder::new("r1".into());
        rb.add(text.as_bytes(), 7).unwrap();
        let run = rb.finish().unwrap().unwrap();
        assert_eq!(run.meta.fingerprint, u64::MAX);
        assert_eq!(&*run.meta.thread_id, "t1");
        assert_eq!(
            run.meta.parent.as_ref().map(|p| p.run_id.as_str()),
            Some("p1")
        );
        assert_eq!(run.journal.len(), 2);
        assert_eq!(run.records.len(), 4);
        assert!(run.ended);
    }

    #[test]
    fn a_gap_in_the_journal_is_reported_not_replayed() {
        let text =
            r#"{"m":{"t":"t","w":"W","f":1},"b":[{"x":1,"e":{"i":{"in":"retry","execution":0}}}]}"#;
        let mut rb = RunBuilder::new("r".into());
        let err = rb.add(text.as_bytes(), 1).unwrap_err();
        assert_eq!(err.code(), "SAAP-S006");
    }
}
