//! Sending spans: the live [`Exporter`] (one background thread, a bounded queue, batches,
//! retries) that the engine feeds off the step path, and [`export_spans`], the blocking
//! one-shot export of a stored run.
//!
//! The HTTP client is reqwest's blocking client, always used on a thread of our own (never on
//! the caller's, which may be inside an async runtime). Submitting never blocks: a full queue
//! drops the job and counts it. Nor does it wake the thread, but once a batch's worth of jobs
//! waits: the thread sleeps until then or until its flush interval ends, so a step pays an
//! uncontended lock and a push, not a wake-up (a system call) per job. This module must never log header values, and must never
//! block or panic the caller because the receiver is slow, down or refusing.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant, SystemTime};

use reqwest::StatusCode;
use reqwest::blocking::Client;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};

use crate::config::OtlpConfig;
use crate::error::ExportError;
use crate::otlp::encode_request;
use crate::span::Span;

/// Work for the exporter's thread: builds spans there (JSON and attributes are made off the
/// caller's path).
pub type SpanJob = Box<dyn FnOnce() -> Vec<Span> + Send>;

/// What the exporter did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ExportStats {
    /// Spans the receiver accepted.
    pub exported_spans: u64,
    /// Jobs refused because the queue was full or the exporter stopped.
    pub dropped_jobs: u64,
    /// Spans lost: refused by the receiver, unreachable after retries, or a job that panicked
    /// (counted as one).
    pub failed_spans: u64,
    /// Requests sent that the receiver accepted.
    pub batches: u64,
}

/// Retries after the first attempt.
const MAX_RETRIES: u32 = 4;
/// First backoff; doubled each retry.
const INITIAL_BACKOFF: Duration = Duration::from_millis(100);
/// Longest backoff when the receiver does not say.
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// Longest time one batch may take with its retries.
const RETRY_BUDGET: Duration = Duration::from_secs(30);
/// How much of a refusal's body is logged / kept.
const BODY_EXCERPT: usize = 200;
/// How long dropping the last handle waits for the thread.
const DROP_WAIT: Duration = Duration::from_secs(1);

/// Sends batches to one endpoint with the retry rules.
struct Sender {
    client: Client,
    url: String,
    headers: HeaderMap,
    service_name: String,
}

fn build_sender(config: &OtlpConfig) -> Result<Sender, ExportError> {
    let mut headers = HeaderMap::new();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/x-protobuf"),
    );
    for (name, value) in &config.headers {
        // Checked when the config was made; a config edited by hand is checked again here.
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| ExportError::Start {
            reason: format!("the header name `{name}` is not valid HTTP"),
        })?;
        let mut value = HeaderValue::from_str(value).map_err(|_| ExportError::Start {
            reason: format!("the value of header `{name}` is not valid HTTP"),
        })?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    let client = Client::builder()
        .timeout(config.timeout)
        .build()
        .map_err(|e| ExportError::Start {
            reason: format!("cannot build the HTTP client: {e}"),
        })?;
    Ok(Sender {
        client,
        url: config.endpoint.clone(),
        headers,
        service_name: config.service_name.clone(),
    })
}

/// What `Retry-After` asks for (seconds or an HTTP date).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let when = httpdate::parse_http_date(text).ok()?;
    Some(when.duration_since(SystemTime::now()).unwrap_or_default())
}

fn excerpt(body: &str) -> String {
    let mut end = body.len().min(BODY_EXCERPT);
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    body[..end].to_owned()
}

impl Sender {
    /// Posts one batch: retries 429/502/503/504 and connection errors with backoff (honouring
    /// `Retry-After`) within [`RETRY_BUDGET`]; any other error status is final.
    fn send(&self, spans: &[Span]) -> Result<(), ExportError> {
        let body = encode_request(&self.service_name, spans);
        let started = Instant::now();
        let mut backoff = INITIAL_BACKOFF;
        let mut attempt = 0;
        loop {
            let (wait, error) = match self
                .client
                .post(&self.url)
                .headers(self.headers.clone())
                .body(body.clone())
                .send()
            {
                Ok(response) => {
                    let status = response.status();
                    if status.is_success() {
                        return Ok(());
                    }
                    let asked = retry_after(response.headers());
                    let text = excerpt(&response.text().unwrap_or_default());
                    let retryable = matches!(
                        status,
                        StatusCode::TOO_MANY_REQUESTS
                            | StatusCode::BAD_GATEWAY
                            | StatusCode::SERVICE_UNAVAILABLE
                            | StatusCode::GATEWAY_TIMEOUT
                    );
                    if !retryable {
                        tracing::warn!(
                            status = status.as_u16(),
                            body = %text,
                            url = %self.url,
                            spans = spans.len(),
                            "the OTLP receiver refused a batch; it is dropped"
                        );
                        return Err(ExportError::Refused {
                            url: self.url.clone(),
                            status: status.as_u16(),
                            body: text,
                        });
                    }
                    (
                        asked.unwrap_or(backoff),
                        ExportError::Unreachable {
                            url: self.url.clone(),
                            reason: format!("it stayed busy (HTTP {}): {text}", status.as_u16()),
                        },
                    )
                }
                Err(e) => (
                    backoff,
                    ExportError::Unreachable {
                        url: self.url.clone(),
                        reason: error_chain(&e),
                    },
                ),
            };
            attempt += 1;
            let elapsed = started.elapsed();
            if attempt > MAX_RETRIES || elapsed + wait > RETRY_BUDGET {
                tracing::warn!(url = %self.url, spans = spans.len(), error = %error, "an OTLP batch is dropped after retries");
                return Err(error);
            }
            tracing::debug!(url = %self.url, attempt, wait_ms = wait.as_millis() as u64, error = %error, "retrying an OTLP batch");
            std::thread::sleep(wait);
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}

/// The error and its causes (reqwest's top message alone is often just "error sending
/// request").
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Exports `spans` now, in batches of `config.max_batch`, with the live exporter's retry
/// rules; blocks until done. Returns how many spans were sent; stops at the first batch that
/// fails. Safe to call from inside an async runtime (the HTTP client runs on its own thread).
pub fn export_spans(config: &OtlpConfig, spans: &[Span]) -> Result<usize, ExportError> {
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("saap-otlp-export".to_owned())
            .spawn_scoped(scope, || {
                let sender = build_sender(config)?;
                let mut sent = 0;
                for batch in spans.chunks(config.max_batch.max(1)) {
                    sender.send(batch)?;
                    sent += batch.len();
                }
                Ok(sent)
            })
            .map_err(|e| ExportError::Start {
                reason: format!("cannot start a thread: {e}"),
            })?;
        worker.join().unwrap_or_else(|_| {
            Err(ExportError::Start {
                reason: "the export thread panicked".to_owned(),
            })
        })
    })
}

/// State shared by the handles and the thread.
struct Shared {
    /// Jobs waiting for the thread (at most `capacity`).
    jobs: Mutex<Vec<SpanJob>>,
    capacity: usize,
    /// How many waiting jobs wake the thread before its flush interval ends.
    wake_at: usize,
    /// The thread, to wake it.
    thread: OnceLock<Thread>,
    exported_spans: AtomicU64,
    dropped_jobs: AtomicU64,
    failed_spans: AtomicU64,
    batches: AtomicU64,
    /// Jobs accepted into the queue.
    accepted: AtomicU64,
    /// Jobs whose spans were sent or failed.
    done: Mutex<u64>,
    done_changed: Condvar,
    flush_requested: AtomicBool,
    stopped: AtomicBool,
    /// Set by the thread as it exits.
    exited: Mutex<bool>,
    exited_changed: Condvar,
}

impl Shared {
    /// Wakes the thread (a flush, a stop, or a batch's worth of jobs waits).
    fn wake(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// Swaps the waiting jobs with `into` (empty, keeping its capacity): submitters keep
    /// pushing into a vector that already has room, and allocate nothing once warm.
    fn take_jobs(&self, into: &mut Vec<SpanJob>) {
        debug_assert!(into.is_empty());
        std::mem::swap(
            &mut *self.jobs.lock().unwrap_or_else(PoisonError::into_inner),
            into,
        );
    }

    fn stats(&self) -> ExportStats {
        ExportStats {
            exported_spans: self.exported_spans.load(Ordering::SeqCst),
            dropped_jobs: self.dropped_jobs.load(Ordering::SeqCst),
            failed_spans: self.failed_spans.load(Ordering::SeqCst),
            batches: self.batches.load(Ordering::SeqCst),
        }
    }

    fn add_done(&self, jobs: u64) {
        let mut done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        *done += jobs;
        self.done_changed.notify_all();
    }

    fn mark_exited(&self) {
        *self.exited.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.exited_changed.notify_all();
        // Wake flushes too (they check the exit flag).
        let _done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        self.done_changed.notify_all();
    }

    fn has_exited(&self) -> bool {
        *self.exited.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until `done >= target`, the thread exited, or `deadline`. True when reached.
    fn wait_done(&self, target: u64, deadline: Instant) -> bool {
        let mut done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if *done >= target {
                return true;
            }
            if self.has_exited() {
                return false;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            // Short waits: the exit flag is behind another lock.
            let wait = (deadline - now).min(Duration::from_millis(50));
            done = self
                .done_changed
                .wait_timeout(done, wait)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Waits until the thread exited or `deadline`. True when it did.
    fn wait_exited(&self, deadline: Instant) -> bool {
        let mut exited = self.exited.lock().unwrap_or_else(PoisonError::into_inner);
        while !*exited {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            exited = self
                .exited_changed
                .wait_timeout(exited, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }
}

struct Inner {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The last handle: stop the thread, flushing what it has for at most DROP_WAIT.
        self.shared.stopped.store(true, Ordering::SeqCst);
        self.shared.wake();
        let deadline = Instant::now() + DROP_WAIT;
        let handle = self
            .thread
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if self.shared.wait_exited(deadline)
            && let Some(handle) = handle
        {
            let _ = handle.join();
        }
        // Otherwise the thread is left to finish its retries on its own.
    }
}

/// The live exporter: a cloneable handle to one background thread (`saap-otlp`).
#[derive(Clone)]
pub struct Exporter {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter")
            .field("stats", &self.stats())
            .field("stopped", &self.inner.shared.stopped.load(Ordering::SeqCst))
            .finish()
    }
}

impl Exporter {
    /// Starts the exporter's thread for `config`. The HTTP client is built (and later
    /// dropped) on that thread, so this may be called from inside an async runtime.
    pub fn start(config: OtlpConfig) -> Result<Exporter, ExportError> {
        let shared = Arc::new(Shared {
            jobs: Mutex::new(Vec::new()),
            capacity: config.queue_capacity.max(1),
            wake_at: config.max_batch.clamp(1, config.queue_capacity.max(1)),
            thread: OnceLock::new(),
            exported_spans: AtomicU64::new(0),
            dropped_jobs: AtomicU64::new(0),
            failed_spans: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            done: Mutex::new(0),
            done_changed: Condvar::new(),
            flush_requested: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            exited: Mutex::new(false),
            exited_changed: Condvar::new(),
        });
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), ExportError>>();
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("saap-otlp".to_owned())
            .spawn(move || {
                let _ = thread_shared.thread.set(std::thread::current());
                let sender = match build_sender(&config) {
                    Ok(sender) => {
                        let _ = ready_tx.send(Ok(()));
                        sender
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        thread_shared.mark_exited();
                        return;
                    }
                };
                Worker {
                    sender,
                    shared: thread_shared,
                    max_batch: config.max_batch.max(1),
                    flush_interval: config.flush_interval,
                    batch: Vec::new(),
                    batch_jobs: 0,
                }
                .run();
            })
            .map_err(|e| ExportError::Start {
                reason: format!("cannot start the exporter thread: {e}"),
            })?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(e);
            }
            Err(_) => {
                let _ = thread.join();
                return Err(ExportError::Start {
                    reason: "the exporter thread ended while starting".to_owned(),
                });
            }
        }
        Ok(Exporter {
            inner: Arc::new(Inner {
                shared,
                thread: Mutex::new(Some(thread)),
            }),
        })
    }

    /// Queues `job`; never blocks. False (and `dropped_jobs` + 1) when the queue is full or
    /// the exporter stopped.
    pub fn submit(&self, job: SpanJob) -> bool {
        let shared = &self.inner.shared;
        if shared.stopped.load(Ordering::SeqCst) {
            shared.dropped_jobs.fetch_add(1, Ordering::SeqCst);
            return false;
        }
        let waiting = {
            let mut jobs = shared.jobs.lock().unwrap_or_else(PoisonError::into_inner);
            if jobs.len() >= shared.capacity {
                drop(jobs);
                shared.dropped_jobs.fetch_add(1, Ordering::SeqCst);
                return false;
            }
            jobs.push(job);
            // Counted under the lock: the thread cannot have taken the job before.
            shared.accepted.fetch_add(1, Ordering::SeqCst);
            jobs.len()
        };
        if waiting == shared.wake_at {
            shared.wake();
        }
        true
    }

    /// Queues spans already made.
    pub fn submit_spans(&self, spans: Vec<Span>) -> bool {
        self.submit(Box::new(move || spans))
    }

    /// Waits until every job submitted before this call was sent (or failed), at most
    /// `timeout`.
    pub fn flush(&self, timeout: Duration) -> Result<(), ExportError> {
        let shared = &self.inner.shared;
        let target = shared.accepted.load(Ordering::SeqCst);
        let deadline = Instant::now() + timeout;
        shared.flush_requested.store(true, Ordering::SeqCst);
        shared.wake();
        if shared.wait_done(target, deadline) {
            return Ok(());
        }
        if shared.has_exited() {
            return Err(ExportError::Stopped);
        }
        Err(ExportError::Timeout {
            what: "flush",
            waited: timeout,
        })
    }

    /// What the exporter did so far.
    pub fn stats(&self) -> ExportStats {
        self.inner.shared.stats()
    }

    /// Flushes, then stops the thread (waiting for it at most what is left of `timeout`);
    /// later submits return false. Every handle sees the stop.
    pub fn shutdown(&self, timeout: Duration) -> Result<ExportStats, ExportError> {
        let deadline = Instant::now() + timeout;
        let flushed = match self.flush(timeout) {
            Err(ExportError::Stopped) => Ok(()),
            other => other,
        };
        let shared = &self.inner.shared;
        shared.stopped.store(true, Ordering::SeqCst);
        shared.wake();
        if !shared.wait_exited(deadline) {
            return Err(ExportError::Timeout {
                what: "shutdown",
                waited: timeout,
            });
        }
        let handle = self
            .inner
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
        flushed.map(|()| self.stats())
    }
}

/// The exporter's thread.
struct Worker {
    sender: Sender,
    shared: Arc<Shared>,
    max_batch: usize,
    flush_interval: Duration,
    batch: Vec<Span>,
    /// Jobs whose spans are in `batch`.
    batch_jobs: u64,
}

impl Worker {
    fn run(mut self) {
        tracing::debug!(url = %self.sender.url, "the OTLP exporter started");
        let mut deadline = Instant::now() + self.flush_interval;
        let mut jobs = Vec::new();
        loop {
            // Read before the jobs are taken: a stop or flush asked for now covers every job
            // submitted before it.
            let stopping = self.shared.stopped.load(Ordering::SeqCst);
            let flushing = self.shared.flush_requested.swap(false, Ordering::SeqCst);
            self.shared.take_jobs(&mut jobs);
            let took = !jobs.is_empty();
            for job in jobs.drain(..) {
                self.run_job(job);
                if self.batch.len() >= self.max_batch {
                    self.send_batch();
                }
            }
            let now = Instant::now();
            if stopping || flushing || now >= deadline {
                self.send_batch();
                deadline = now + self.flush_interval;
            }
            if stopping {
                break;
            }
            if !took {
                // Until a batch's worth of jobs waits, a flush or stop is asked for, or the
                // interval ends (a spurious wake-up only loops once more).
                std::thread::park_timeout(deadline.saturating_duration_since(now));
            }
        }
        // Jobs that raced the stop past the last take are dropped and counted, not lost
        // silently (submits after the stop fail as dropped anyway).
        self.shared.take_jobs(&mut jobs);
        let leftovers = jobs.len() as u64;
        if leftovers > 0 {
            self.shared
                .dropped_jobs
                .fetch_add(leftovers, Ordering::SeqCst);
            self.shared.add_done(leftovers);
        }
        tracing::debug!(url = %self.sender.url, "the OTLP exporter stopped");
        self.shared.mark_exited();
    }

    fn run_job(&mut self, job: SpanJob) {
        match catch_unwind(AssertUnwindSafe(job)) {
            Ok(spans) => self.batch.extend(spans),
            Err(_) => {
                tracing::warn!("a span job panicked; its spans are lost");
                self.shared.failed_spans.fetch_add(1, Ordering::SeqCst);
            }
        }
        self.batch_jobs += 1;
    }

    /// Sends what is batched (in requests of at most `max_batch` spans) and marks its jobs done.
    fn send_batch(&mut self) {
        let spans = std::mem::take(&mut self.batch);
        for chunk in spans.chunks(self.max_batch) {
            match self.sender.send(chunk) {
                Ok(()) => {
                    self.shared
                        .exported_spans
                        .fetch_add(chunk.len() as u64, Ordering::SeqCst);
                    self.shared.batches.fetch_add(1, Ordering::SeqCst);
                }
                Err(_) => {
                    self.shared
                        .failed_spans
                        .fetch_add(chunk.len() as u64, Ordering::SeqCst);
                }
            }
        }
        let jobs = std::mem::take(&mut self.batch_jobs);
        if jobs > 0 {
            self.shared.add_done(jobs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_in_seconds_and_as_a_date() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert(RETRY_AFTER, HeaderValue::from_static("3"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(60));
        h.insert(RETRY_AFTER, HeaderValue::from_str(&later).expect("a date"));
        let wait = retry_after(&h).expect("a wait");
        assert!(
            wait > Duration::from_secs(55) && wait <= Duration::from_secs(60),
            "{wait:?}"
        );
        h.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h), None);
    }

    #[test]
    fn excerpts_stop_at_a_char_boundary() {
        let body = "é".repeat(150);
        let e = excerpt(&body);
        assert!(e.len() <= BODY_EXCERPT && e.len() >= BODY_EXCERPT - 1);
        assert_eq!(excerpt("short"), "short");
    }

    #[test]
    fn an_exporter_is_send_sync_and_clone() {
        fn check<T: Send + Sync + Clone>() {}
        check::<Exporter>();
    }
}
