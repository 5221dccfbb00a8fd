//! Per-session evidence storage.
//!
//! The canonical record of a session is `events.ndjson`: one validated, redacted stored event
//! per line, appended in accepted order. The service keeps a small in-memory index per loaded
//! session (byte offset + hypothesis of each event: 12 bytes per event; once timestamps
//! arrive out of accepted order and `logs` needs time order, also each event's timestamp and
//! a permutation: 12 bytes more), so a page of `logs` in timestamp order is a few positioned
//! reads whatever the session size. Nothing is fsynced per event; a
//! batch is one `write` call. State survives a service restart: the index is rebuilt from the
//! file on first use, and `state.json` remembers the reset epoch and the file-ingest offset.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::clock::Clock;
use crate::error::{DmError, ErrorCode, Result};
use crate::event::{self, Malformed};
use crate::paths::{self, SessionPaths};

/// At most this many malformed-record diagnostics are stored per reset cycle; the rest are
/// counted.
pub const MAX_STORED_DIAGNOSTICS: u64 = 1000;
/// Largest page of `logs`.
pub const MAX_LOGS_LIMIT: usize = 1000;
/// Bytes read from the append path per step.
const DRAIN_CHUNK: usize = 4 * 1024 * 1024;

/// Where a record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Http,
    File,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    schema_version: u32,
    session_id: String,
    created_at: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct State {
    epoch: u64,
    incoming_offset: u64,
    #[serde(default)]
    skipping_long_line: bool,
    #[serde(default)]
    malformed_total: u64,
    /// Events stored with at least one value replaced by the redactor (this reset cycle).
    #[serde(default)]
    redacted_total: u64,
    /// File ingest is inside a record that a raw newline split: the JSON nesting still open
    /// at the end of the last line read (see [`SplitTracker`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    split: Option<SplitTracker>,
}

/// A stored event as written to `events.ndjson` (field order is the storage order).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StoredEvent {
    pub id: String,
    pub sequence: u64,
    pub received_at: u64,
    pub hypothesis_id: String,
    pub location: String,
    pub message: String,
    pub data: Value,
    pub timestamp: u64,
}

/// A stored malformed-record diagnostic.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Diagnostic {
    pub id: String,
    pub source: Source,
    pub received_at: u64,
    pub reason: String,
    pub message: String,
    pub recoverable_fields: Map<String, Value>,
    pub preview: String,
    pub suggested_fix: String,
}

/// Result of ingesting one body or one drain step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IngestOutcome {
    pub accepted: u64,
    pub rejected: u64,
    pub redacted: u64,
}

/// Public description of a session.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub session_id: String,
    pub created_at: u64,
    pub append_path: PathBuf,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    pub session_id: String,
    pub created_at: u64,
    pub event_count: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HypothesisCount {
    pub hypothesis_id: String,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LogsPage {
    pub events: Vec<StoredEvent>,
    /// Events matching the hypothesis filter (within the snapshot).
    pub matched: u64,
    /// Events of the session (within the snapshot).
    pub event_count: u64,
    pub malformed_count: u64,
    #[serde(default)]
    pub redacted_count: u64,
    pub hypotheses: Vec<HypothesisCount>,
    pub epoch: u64,
    /// The snapshot watermark: events up to this sequence are part of the page's view.
    #[serde(default)]
    pub last_sequence: u64,
    /// Set by the service: where probes must send (for the empty-session hint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingest_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append_path: Option<PathBuf>,
}

/// Order of a `logs` page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogsOrder {
    /// By `timestamp`, then `sequence` (the default, as the original implementation).
    #[default]
    Timestamp,
    /// By `sequence` (accepted order).
    Sequence,
}

/// What a `logs` page covers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogsQuery {
    #[serde(default)]
    pub offset: usize,
    #[serde(default)]
    pub limit: usize,
    #[serde(default)]
    pub hypotheses: Vec<String>,
    #[serde(default)]
    pub order: LogsOrder,
    /// Continue a paginated view: only events up to this sequence, and only if the session
    /// was not reset since (`epoch`).
    #[serde(default)]
    pub snapshot: Option<SnapshotRef>,
}

/// The part of a `logs` snapshot the service checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRef {
    pub epoch: u64,
    pub last_sequence: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StatusReport {
    pub event_count: u64,
    pub malformed_count: u64,
    #[serde(default)]
    pub redacted_count: u64,
    pub stored_diagnostics: u64,
    pub hypotheses: Vec<HypothesisCount>,
    pub first_received_at: Option<u64>,
    pub last_received_at: Option<u64>,
    pub diagnostics: Vec<Diagnostic>,
}

/// What the query worker needs: a consistent prefix of the canonical file.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub epoch: u64,
    #[serde(default)]
    pub malformed_count: u64,
    #[serde(default)]
    pub redacted_count: u64,
    pub last_sequence: u64,
    pub events_bytes: u64,
    pub event_count: u64,
}

/// One loaded session.
pub struct Session {
    id: String,
    paths: SessionPaths,
    created_at: u64,
    state: State,
    events: File,
    events_len: u64,
    next_seq: u64,
    offsets: Vec<u64>,
    hyp_of: Vec<u32>,
    /// Probe timestamp of each event, once loaded (`timestamps_loaded`): only needed when
    /// events arrived out of time order.
    timestamps: Vec<u64>,
    timestamps_loaded: bool,
    /// Largest timestamp so far.
    max_timestamp: u64,
    /// True while every event's timestamp is >= the previous ones (timestamp order is
    /// accepted order, so no permutation is needed).
    in_time_order: bool,
    /// Event indices sorted by (timestamp, sequence), for the first `len` events; rebuilt
    /// lazily when events arrive out of time order.
    time_order: Option<Vec<u32>>,
    hyp_names: Vec<String>,
    hyp_lookup: HashMap<String, u32>,
    hyp_counts: Vec<u64>,
    stored_diagnostics: u64,
    first_received_at: Option<u64>,
    last_received_at: Option<u64>,
    deleted: bool,
}

fn io_err(what: &str) -> impl FnOnce(io::Error) -> DmError + '_ {
    move |e| DmError::evidence_io(what, &e)
}

fn corrupt(what: &str) -> DmError {
    DmError::new(
        ErrorCode::EvidenceMalformed,
        format!("the session's {what} is unreadable or corrupt"),
        "run `debug-mode reset --session <id>` to start a clean evidence cycle, or `debug-mode clean --session <id>` to remove the session",
    )
}

impl Session {
    fn load(paths: SessionPaths, id: &str) -> Result<Self> {
        paths.check()?;
        let meta_bytes = std::fs::read(paths.meta()).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                DmError::session_not_found(id)
            } else {
                DmError::evidence_io("read session metadata", &e)
            }
        })?;
        let meta: Meta = serde_json::from_slice(&meta_bytes).map_err(|_| corrupt("metadata"))?;
        let state: State = match std::fs::read(paths.state()) {
            Ok(b) => serde_json::from_slice(&b).map_err(|_| corrupt("state"))?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => State::default(),
            Err(e) => return Err(DmError::evidence_io("read session state", &e)),
        };
        let events = open_events(&paths.events())?;
        let mut s = Self {
            id: id.to_owned(),
            created_at: meta.created_at,
            state,
            events,
            events_len: 0,
            next_seq: 1,
            offsets: Vec::new(),
            hyp_of: Vec::new(),
            timestamps: Vec::new(),
            timestamps_loaded: false,
            max_timestamp: 0,
            in_time_order: true,
            time_order: None,
            hyp_names: Vec::new(),
            hyp_lookup: HashMap::new(),
            hyp_counts: Vec::new(),
            stored_diagnostics: 0,
            first_received_at: None,
            last_received_at: None,
            deleted: false,
            paths,
        };
        s.rebuild_index()?;
        s.stored_diagnostics = count_lines(&s.paths.diagnostics())?;
        Ok(s)
    }

    /// Rebuilds the in-memory index by one sequential scan of the canonical file. A torn
    /// trailing line (a crash mid-write) is cut off.
    fn rebuild_index(&mut self) -> Result<()> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Key {
            sequence: u64,
            received_at: u64,
            hypothesis_id: String,
            timestamp: u64,
        }
        let mut f = paths::open_read(&self.paths.events()).map_err(io_err("read evidence"))?;
        let mut buf = Vec::new();
        let mut pos: u64 = 0;
        let mut chunk = vec![0u8; DRAIN_CHUNK];
        loop {
            let n = f.read(&mut chunk).map_err(io_err("read evidence"))?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
            let mut start = 0;
            while let Some(nl) = memchr(b'\n', &buf[start..]) {
                let line = &buf[start..start + nl];
                let k: Key =
                    serde_json::from_slice(line).map_err(|_| corrupt("evidence record"))?;
                self.index_event(pos, &k.hypothesis_id, k.received_at, k.timestamp);
                self.next_seq = k.sequence + 1;
                pos += (nl + 1) as u64;
                start += nl + 1;
            }
            buf.drain(..start);
        }
        if !buf.is_empty() {
            tracing::warn!(session = %self.id, "cutting a torn trailing evidence line");
            self.events
                .set_len(pos)
                .map_err(io_err("repair evidence"))?;
        }
        self.events_len = pos;
        Ok(())
    }

    fn index_event(&mut self, offset: u64, hypothesis: &str, received_at: u64, timestamp: u64) {
        // Sessions usually test a handful of hypotheses: a short scan beats hashing.
        let known = if self.hyp_names.len() <= 8 {
            self.hyp_names
                .iter()
                .position(|n| n == hypothesis)
                .and_then(|i| u32::try_from(i).ok())
        } else {
            self.hyp_lookup.get(hypothesis).copied()
        };
        let h = match known {
            Some(h) => h,
            None => {
                let h = u32::try_from(self.hyp_names.len()).unwrap_or(u32::MAX);
                self.hyp_names.push(hypothesis.to_owned());
                self.hyp_lookup.insert(hypothesis.to_owned(), h);
                self.hyp_counts.push(0);
                h
            }
        };
        if let Some(c) = self.hyp_counts.get_mut(h as usize) {
            *c += 1;
        }
        self.offsets.push(offset);
        self.hyp_of.push(h);
        if timestamp < self.max_timestamp {
            self.in_time_order = false;
        }
        self.max_timestamp = self.max_timestamp.max(timestamp);
        if self.timestamps_loaded {
            self.timestamps.push(timestamp);
        }
        self.first_received_at.get_or_insert(received_at);
        self.last_received_at = Some(received_at);
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn info(&self) -> SessionInfo {
        SessionInfo {
            session_id: self.id.clone(),
            created_at: self.created_at,
            append_path: self.paths.incoming(),
        }
    }

    pub fn event_count(&self) -> u64 {
        self.offsets.len() as u64
    }

    fn ensure_live(&self) -> Result<()> {
        if self.deleted || !self.paths.dir.is_dir() {
            return Err(DmError::session_not_found(&self.id));
        }
        Ok(())
    }

    /// Ingests a body of newline-delimited records (HTTP). A final record without a newline
    /// is complete: the request body has ended.
    pub fn ingest_body(&mut self, body: &[u8], source: Source, now: u64) -> Result<IngestOutcome> {
        let lines: Vec<&[u8]> = split_lines(body);
        let prepared = prepare_all(&lines);
        self.ingest_prepared(lines.iter().copied(), &prepared, source, now)
    }

    /// Appends lines whose fast-path results `prepared` were computed by `prepare_all`.
    fn ingest_prepared<'a>(
        &mut self,
        lines: impl Iterator<Item = &'a [u8]>,
        prepared: &'a [PreparedChunk],
        source: Source,
        now: u64,
    ) -> Result<IngestOutcome> {
        self.ensure_live()?;
        let records = prepared
            .iter()
            .flat_map(PreparedChunk::records)
            .zip(lines)
            .map(|(p, l)| (p.unwrap_or(Record::Raw), l));
        self.ingest_records(records, source, now)
    }

    /// Ingests already parsed JSON records (an `application/json` body).
    pub fn ingest_values(&mut self, values: Vec<Value>, now: u64) -> Result<IngestOutcome> {
        self.ensure_live()?;
        self.ingest_records(
            values.into_iter().map(|v| (Record::Parsed(v), &b""[..])),
            Source::Http,
            now,
        )
    }

    /// Ingests records with their raw lines (empty for already parsed records). File
    /// ingest carries the split-record state across calls; an HTTP body starts fresh.
    fn ingest_records<'a>(
        &mut self,
        records: impl Iterator<Item = (Record<'a>, &'a [u8])>,
        source: Source,
        now: u64,
    ) -> Result<IngestOutcome> {
        let mut out = IngestOutcome::default();
        let mut buf: Vec<u8> = Vec::new();
        let mut diags: Vec<u8> = Vec::new();
        let mut new_index: Vec<(u64, Cow<'a, str>, u64)> = Vec::new();
        // `,"receivedAt":N,` is the same for the whole batch.
        let received = format!(",\"receivedAt\":{now},");
        let mut seq = self.next_seq;
        let mut stored = self.stored_diagnostics;
        let mut malformed_total = self.state.malformed_total;
        let mut split = match source {
            Source::File => self.state.split,
            Source::Http => None,
        };
        let mut reject = |m: Malformed, out: &mut IngestOutcome| -> Result<()> {
            out.rejected += 1;
            malformed_total += 1;
            if stored < MAX_STORED_DIAGNOSTICS {
                stored += 1;
                write_diagnostic(&mut diags, stored, source, now, m)?;
            }
            Ok(())
        };
        for (rec, raw) in records {
            // The rest of a record that a raw newline split is never a record of its own.
            if let Some(t) = split {
                split = t.feed(raw);
                reject(split_tail(raw), &mut out)?;
                continue;
            }
            if let Record::Fast {
                head,
                hypothesis_id,
                tail,
                timestamp,
            } = rec
            {
                // Same bytes as the full path below would write (see event::fast_scan).
                let offset = self.events_len + buf.len() as u64;
                buf.extend_from_slice(head);
                push_u64(&mut buf, seq);
                buf.extend_from_slice(received.as_bytes());
                buf.extend_from_slice(tail);
                new_index.push((offset, Cow::Borrowed(hypothesis_id), timestamp));
                seq += 1;
                out.accepted += 1;
                continue;
            }
            let result = match rec {
                Record::Fast { .. } => continue,
                Record::Raw => event::validate_line(raw),
                Record::Parsed(v) => {
                    let raw = serde_json::to_vec(&v).unwrap_or_default();
                    event::validate_value(v, &raw)
                }
            };
            match result {
                Ok(mut ev) => {
                    if ev.redact() {
                        out.redacted += 1;
                    }
                    let timestamp = ev.timestamp;
                    let stored_ev = StoredEvent {
                        id: uuid::Uuid::new_v4().to_string(),
                        sequence: seq,
                        received_at: now,
                        hypothesis_id: ev.hypothesis_id,
                        location: ev.location,
                        message: ev.message,
                        data: ev.data,
                        timestamp: ev.timestamp,
                    };
                    let offset = self.events_len + buf.len() as u64;
                    serde_json::to_writer(&mut buf, &stored_ev)
                        .map_err(|e| DmError::evidence_io("serialize an event", &e.into()))?;
                    buf.push(b'\n');
                    new_index.push((offset, Cow::Owned(stored_ev.hypothesis_id), timestamp));
                    seq += 1;
                    out.accepted += 1;
                }
                Err(m) => {
                    if m.reason == event::Reason::InvalidJson {
                        split = SplitTracker::start(raw);
                    }
                    reject(m, &mut out)?;
                }
            }
        }
        if !buf.is_empty() {
            if let Err(e) = self.events.write_all(&buf) {
                // Undo a partial write so the canonical file stays line-aligned.
                let _ = self.events.set_len(self.events_len);
                return Err(DmError::evidence_io("append events", &e));
            }
            for (offset, h, ts) in new_index {
                self.index_event(offset, &h, now, ts);
            }
            self.events_len += buf.len() as u64;
            self.next_seq = seq;
        }
        if !diags.is_empty() {
            let mut f = paths::open_append(&self.paths.diagnostics())
                .map_err(io_err("open diagnostics"))?;
            f.write_all(&diags).map_err(io_err("append diagnostics"))?;
            self.stored_diagnostics = stored;
        }
        let split_changed = source == Source::File && split != self.state.split;
        if source == Source::File {
            self.state.split = split;
        }
        if malformed_total != self.state.malformed_total || out.redacted > 0 || split_changed {
            self.state.malformed_total = malformed_total;
            self.state.redacted_total += out.redacted;
            self.save_state()?;
        }
        Ok(out)
    }

    fn save_state(&self) -> Result<()> {
        let bytes = serde_json::to_vec(&self.state)
            .map_err(|e| DmError::evidence_io("serialize state", &e.into()))?;
        paths::write_atomic(&self.paths.state(), &bytes).map_err(io_err("write session state"))
    }

    /// Ingests every complete line appended to the append path since the last drain.
    /// An incomplete trailing line stays in the file until its newline arrives.
    pub fn drain_incoming(&mut self, now: u64) -> Result<IngestOutcome> {
        self.ensure_live()?;
        let path = self.paths.incoming();
        paths::reject_symlink(&path)?;
        let f = match paths::open_rw_existing(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(IngestOutcome::default()),
            Err(e) => return Err(DmError::evidence_io("read the append path", &e)),
        };
        let len = f
            .metadata()
            .map_err(io_err("inspect the append path"))?
            .len();
        if len < self.state.incoming_offset {
            tracing::warn!(session = %self.id, "append path shrank; reading it from the start");
            self.state.incoming_offset = 0;
            self.state.skipping_long_line = false;
        }
        let mut total = IngestOutcome::default();
        let start_offset = self.state.incoming_offset;
        while self.state.incoming_offset < len {
            match self.drain_run(&f, len, now, &mut total)? {
                RunEnd::Done => break,
                RunEnd::Oversized(head, n) => {
                    // A line longer than any valid record: report once, skip to its end.
                    if !self.state.skipping_long_line {
                        self.record_oversized(&head, now)?;
                        total.rejected += 1;
                    }
                    self.state.skipping_long_line = true;
                    self.state.incoming_offset += n;
                    self.save_state()?;
                }
            }
        }
        if self.state.incoming_offset > start_offset {
            scrub_consumed(&f, start_offset, self.state.incoming_offset);
        }
        Ok(total)
    }

    /// Drains steps of complete lines from the current offset as a two-stage pipeline: a
    /// reader thread reads step k+1 and runs the fast path over it (on all cores) while this
    /// thread appends step k. Steps are appended, and the offset persisted, in file order,
    /// exactly as a one-step-at-a-time loop would. Ends at the end of the file, at an
    /// incomplete trailing line, or at a step without any newline that is too long to be a
    /// record (returned to the caller, which reports it and skips it).
    fn drain_run(
        &mut self,
        f: &File,
        len: u64,
        now: u64,
        total: &mut IngestOutcome,
    ) -> Result<RunEnd> {
        let start = self.state.incoming_offset;
        let skipping = self.state.skipping_long_line;
        std::thread::scope(|s| {
            // Rendezvous channel: at most one prepared step waits while one is appended, so
            // two step buffers are in use at a time.
            let (tx, rx) = std::sync::mpsc::sync_channel::<Step>(0);
            let (back_tx, back_rx) = std::sync::mpsc::channel::<Vec<u8>>();
            s.spawn(move || produce_steps(f, start, len, skipping, &tx, &back_rx));
            for step in rx.iter() {
                match step {
                    Step::Lines {
                        buf,
                        spans,
                        consumed,
                        prepared,
                    } => {
                        let lines = spans.iter().map(|r| buf.get(r.clone()).unwrap_or_default());
                        let out = self.ingest_prepared(lines, &prepared, Source::File, now)?;
                        total.accepted += out.accepted;
                        total.rejected += out.rejected;
                        total.redacted += out.redacted;
                        self.state.skipping_long_line = false;
                        // Persist the offset only after the events are appended: a crash in
                        // between can re-ingest a step, never lose one.
                        self.state.incoming_offset += consumed;
                        self.save_state()?;
                        drop(prepared);
                        let _ = back_tx.send(buf);
                    }
                    Step::End(end) => return Ok(end),
                    Step::Failed(e) => {
                        return Err(DmError::evidence_io("read the append path", &e));
                    }
                }
            }
            // The reader stopped without a final message (it panicked): stop here; the
            // remaining lines are drained on the next tail interval.
            Ok(RunEnd::Done)
        })
    }

    fn record_oversized(&mut self, head: &[u8], now: u64) -> Result<()> {
        self.state.malformed_total += 1;
        if self.stored_diagnostics >= MAX_STORED_DIAGNOSTICS {
            return Ok(());
        }
        let m = Malformed {
            reason: event::Reason::TooLarge,
            message: format!(
                "record is longer than the {} byte limit",
                event::MAX_LINE_BYTES
            ),
            recoverable_fields: Map::new(),
            preview: event::preview(head),
            suggested_fix: event::Reason::TooLarge.suggested_fix().to_owned(),
        };
        let mut buf = Vec::new();
        self.stored_diagnostics += 1;
        write_diagnostic(&mut buf, self.stored_diagnostics, Source::File, now, m)?;
        let mut f =
            paths::open_append(&self.paths.diagnostics()).map_err(io_err("open diagnostics"))?;
        f.write_all(&buf).map_err(io_err("append diagnostics"))
    }

    /// Clears events, diagnostics and sequence state; keeps id, append path and metadata.
    /// Increments the reset epoch so old cursors are rejected.
    pub fn reset(&mut self) -> Result<()> {
        self.ensure_live()?;
        self.events.set_len(0).map_err(io_err("clear evidence"))?;
        for p in [self.paths.diagnostics(), self.paths.incoming()] {
            match paths::open_rw(&p) {
                Ok(f) => f.set_len(0).map_err(io_err("clear session files"))?,
                Err(e) => return Err(DmError::evidence_io("clear session files", &e)),
            }
        }
        self.events_len = 0;
        self.next_seq = 1;
        self.offsets = Vec::new();
        self.hyp_of = Vec::new();
        self.timestamps = Vec::new();
        self.timestamps_loaded = false;
        self.max_timestamp = 0;
        self.in_time_order = true;
        self.time_order = None;
        self.hyp_names.clear();
        self.hyp_lookup.clear();
        self.hyp_counts.clear();
        self.stored_diagnostics = 0;
        self.first_received_at = None;
        self.last_received_at = None;
        self.state = State {
            epoch: self.state.epoch + 1,
            ..State::default()
        };
        self.save_state()
    }

    pub fn hypotheses(&self) -> Vec<HypothesisCount> {
        self.hyp_names
            .iter()
            .zip(&self.hyp_counts)
            .map(|(h, c)| HypothesisCount {
                hypothesis_id: h.clone(),
                count: *c,
            })
            .collect()
    }

    fn read_event(&self, i: usize) -> Result<StoredEvent> {
        let start = self.offsets[i];
        let end = self.offsets.get(i + 1).copied().unwrap_or(self.events_len);
        let len = usize::try_from(end - start).map_err(|_| corrupt("evidence record"))?;
        let mut buf = vec![0u8; len];
        self.events
            .read_exact_at(&mut buf, start)
            .map_err(io_err("read evidence"))?;
        serde_json::from_slice(&buf).map_err(|_| corrupt("evidence record"))
    }

    /// Reads every event's timestamp once (one sequential scan); later events add theirs.
    fn load_timestamps(&mut self) -> Result<()> {
        #[derive(Deserialize)]
        struct Ts {
            timestamp: u64,
        }
        let f = paths::open_read(&self.paths.events()).map_err(io_err("read evidence"))?;
        let mut r = io::BufReader::with_capacity(1 << 20, f.take(self.events_len));
        let mut timestamps = Vec::with_capacity(self.offsets.len());
        let mut line = Vec::new();
        while timestamps.len() < self.offsets.len() {
            line.clear();
            if io::BufRead::read_until(&mut r, b'\n', &mut line).map_err(io_err("read evidence"))?
                == 0
            {
                return Err(corrupt("evidence record"));
            }
            let t: Ts = serde_json::from_slice(&line).map_err(|_| corrupt("evidence record"))?;
            timestamps.push(t.timestamp);
        }
        self.timestamps = timestamps;
        self.timestamps_loaded = true;
        Ok(())
    }

    /// Builds (or keeps) the permutation of all events in (timestamp, sequence) order.
    fn ensure_time_order(&mut self) -> Result<()> {
        if !self.timestamps_loaded {
            self.load_timestamps()?;
        }
        let len = self.offsets.len();
        if self.time_order.as_ref().is_none_or(|o| o.len() != len) {
            let mut order: Vec<u32> = (0..u32::try_from(len).unwrap_or(u32::MAX)).collect();
            // Stable: equal timestamps keep accepted (sequence) order.
            order.sort_by_key(|&i| self.timestamps[i as usize]);
            self.time_order = Some(order);
        }
        Ok(())
    }

    /// Event indices of the first `n` events in (timestamp, sequence) order (after
    /// [`Self::ensure_time_order`]).
    fn time_ordered(&self, n: usize) -> Cow<'_, [u32]> {
        let order = self.time_order.as_deref().unwrap_or_default();
        if n >= order.len() {
            Cow::Borrowed(order)
        } else {
            Cow::Owned(
                order
                    .iter()
                    .copied()
                    .filter(|&i| (i as usize) < n)
                    .collect(),
            )
        }
    }

    /// One page of events, in timestamp order (then sequence) or accepted order, optionally
    /// filtered by hypothesis labels and limited to a snapshot taken by an earlier page.
    pub fn logs(&mut self, q: &LogsQuery) -> Result<LogsPage> {
        self.ensure_live()?;
        let (offset, limit) = (q.offset, q.limit.min(MAX_LOGS_LIMIT));
        let last_sequence = match q.snapshot {
            Some(snap) if snap.epoch != self.state.epoch => {
                return Err(DmError::new(
                    ErrorCode::InvalidSnapshot,
                    "the snapshot is stale: the session was reset after this page was printed",
                    format!(
                        "start again from the first page: debug-mode logs --session {}",
                        self.id
                    ),
                )
                .with_reason(crate::error::reason::STALE_SNAPSHOT));
            }
            Some(snap) => snap.last_sequence.min(self.next_seq - 1),
            None => self.next_seq - 1,
        };
        let n = usize::try_from(last_sequence)
            .unwrap_or(usize::MAX)
            .min(self.offsets.len());
        let wanted: Option<Vec<u32>> = (!q.hypotheses.is_empty()).then(|| {
            q.hypotheses
                .iter()
                .filter_map(|h| self.hyp_lookup.get(h).copied())
                .collect()
        });
        let by_time = q.order == LogsOrder::Timestamp && !self.in_time_order;
        if by_time {
            self.ensure_time_order()?;
        }
        let order: Cow<'_, [u32]> = if by_time {
            self.time_ordered(n)
        } else {
            Cow::Borrowed(&[])
        };
        let index_at = |k: usize| if by_time { order[k] as usize } else { k };
        let mut picked = Vec::new();
        let mut matched = 0u64;
        match &wanted {
            None => {
                matched = n as u64;
                picked.extend((offset.min(n)..offset.saturating_add(limit).min(n)).map(index_at));
            }
            Some(w) => {
                for k in 0..n {
                    let i = index_at(k);
                    if w.contains(&self.hyp_of[i]) {
                        if matched >= offset as u64 && picked.len() < limit {
                            picked.push(i);
                        }
                        matched += 1;
                    }
                }
            }
        }
        drop(order);
        let events = picked
            .into_iter()
            .map(|i| self.read_event(i))
            .collect::<Result<Vec<_>>>()?;
        let hypotheses = if n == self.offsets.len() {
            self.hypotheses()
        } else {
            self.hypotheses_within(n)
        };
        Ok(LogsPage {
            events,
            matched,
            event_count: n as u64,
            malformed_count: self.state.malformed_total,
            redacted_count: self.state.redacted_total,
            hypotheses,
            epoch: self.state.epoch,
            last_sequence,
            ingest_url: None,
            append_path: None,
        })
    }

    /// Hypothesis counts over the first `n` events (a snapshot of an earlier page).
    fn hypotheses_within(&self, n: usize) -> Vec<HypothesisCount> {
        let mut counts = vec![0u64; self.hyp_names.len()];
        for &h in &self.hyp_of[..n] {
            if let Some(c) = counts.get_mut(h as usize) {
                *c += 1;
            }
        }
        self.hyp_names
            .iter()
            .zip(counts)
            .filter(|(_, c)| *c > 0)
            .map(|(h, count)| HypothesisCount {
                hypothesis_id: h.clone(),
                count,
            })
            .collect()
    }

    pub fn status(&self) -> Result<StatusReport> {
        self.ensure_live()?;
        let mut diagnostics = Vec::new();
        match paths::open_read(&self.paths.diagnostics()) {
            Ok(f) => {
                let mut r = io::BufReader::new(f.take(64 * 1024 * 1024));
                let mut line = Vec::new();
                loop {
                    line.clear();
                    let n = io::BufRead::read_until(&mut r, b'\n', &mut line)
                        .map_err(io_err("read diagnostics"))?;
                    if n == 0 {
                        break;
                    }
                    if line.ends_with(b"\n") {
                        let d: Diagnostic = serde_json::from_slice(&line)
                            .map_err(|_| corrupt("diagnostics file"))?;
                        diagnostics.push(d);
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(DmError::evidence_io("read diagnostics", &e)),
        }
        Ok(StatusReport {
            event_count: self.event_count(),
            malformed_count: self.state.malformed_total,
            redacted_count: self.state.redacted_total,
            stored_diagnostics: self.stored_diagnostics,
            hypotheses: self.hypotheses(),
            first_received_at: self.first_received_at,
            last_received_at: self.last_received_at,
            diagnostics,
        })
    }

    pub fn snapshot(&self) -> Result<Snapshot> {
        self.ensure_live()?;
        Ok(Snapshot {
            epoch: self.state.epoch,
            malformed_count: self.state.malformed_total,
            redacted_count: self.state.redacted_total,
            last_sequence: self.next_seq - 1,
            events_bytes: self.events_len,
            event_count: self.event_count(),
        })
    }

    pub fn epoch(&self) -> u64 {
        self.state.epoch
    }
}

enum Record<'a> {
    /// Accepted by the fast path and rendered except for its position-dependent prefix
    /// (id, sequence and receipt time).
    Fast {
        /// `{"id":"<random uuid>","sequence":`
        head: &'a [u8],
        hypothesis_id: &'a str,
        /// Everything after `"receivedAt":N,` up to and including the newline.
        tail: &'a [u8],
        timestamp: u64,
    },
    /// Takes the full validator (the raw line travels alongside).
    Raw,
    Parsed(Value),
}

/// Tracks the JSON nesting of a record that a raw newline split, across the lines that
/// follow it, so the rest of that record is never accepted as a record of its own (a raw
/// newline inside serialized `data` must not forge an event). Only started by a line that
/// is a valid JSON prefix (it failed to parse because it ended early), and given up after
/// [`event::MAX_LINE_BYTES`]: a longer record could not have been valid anyway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SplitTracker {
    depth: u32,
    in_string: bool,
    escaped: bool,
    bytes: u64,
}

impl SplitTracker {
    /// The state after `line` if it is an object cut short by the end of the line.
    fn start(line: &[u8]) -> Option<Self> {
        let trimmed = line.trim_ascii_start();
        if !trimmed.starts_with(b"{") {
            return None;
        }
        match serde_json::from_slice::<serde::de::IgnoredAny>(trimmed) {
            Err(e) if e.classify() == serde_json::error::Category::Eof => Self {
                depth: 0,
                in_string: false,
                escaped: false,
                bytes: 0,
            }
            .feed(trimmed),
            _ => None,
        }
    }

    /// Feeds the next line (the newline that ended the previous one sits inside the split
    /// record); `None` once the split record is closed or too long to be a record.
    fn feed(mut self, line: &[u8]) -> Option<Self> {
        // The newline between the lines: inside a string it was a raw control character.
        self.escaped = false;
        for &b in line {
            if self.in_string {
                match b {
                    _ if self.escaped => self.escaped = false,
                    b'\\' => self.escaped = true,
                    b'"' => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
        }
        self.bytes += line.len() as u64 + 1;
        let open = self.depth > 0 || self.in_string;
        (open && self.bytes <= event::MAX_LINE_BYTES as u64).then_some(self)
    }
}

/// The diagnostic of a line that continues a record split by a raw newline.
fn split_tail(raw: &[u8]) -> Malformed {
    let reason = event::Reason::SplitRecord;
    Malformed {
        reason,
        message: "this line continues the previous record, which a raw newline cut in two; it is not accepted as a record of its own".into(),
        recoverable_fields: Map::new(),
        preview: event::preview(raw),
        suggested_fix: reason.suggested_fix().to_owned(),
    }
}

/// Splits a body into lines, dropping blank ones.
fn split_lines(body: &[u8]) -> Vec<&[u8]> {
    let mut lines = Vec::with_capacity(body.len() / 128 + 1);
    let mut start = 0;
    for nl in memchr::memchr_iter(b'\n', body).chain(std::iter::once(body.len())) {
        let l = &body[start..nl];
        start = nl + 1;
        if !l.iter().all(u8::is_ascii_whitespace) {
            lines.push(l);
        }
    }
    lines
}

/// Appends the decimal digits of `v`.
fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// Length of `{"id":"<uuid>","sequence":`.
const HEAD_LEN: usize = "{\"id\":\"".len() + 36 + "\",\"sequence\":".len();

/// The fast-path results of a run of consecutive lines: for each accepted line its head
/// (with a fresh random id) and its tail, concatenated.
struct PreparedChunk {
    tails: Vec<u8>,
    /// Per line: `None` (take the full path) or the byte length of its hypothesis id, the
    /// end of its tail and its timestamp. The id is read back from the tail, so a chunk owns
    /// its data and can be handed from the reader thread to the appending one.
    items: Vec<Option<(usize, usize, u64)>>,
}

/// Offset of the hypothesis id within one rendered fast-path record.
const HYP_AT: usize = HEAD_LEN + "\"hypothesisId\":\"".len();

impl PreparedChunk {
    fn new(lines: &[&[u8]]) -> Self {
        let mut tails = Vec::with_capacity(lines.iter().map(|l| l.len() + HEAD_LEN + 2).sum());
        let mut items = Vec::with_capacity(lines.len());
        let mut data = Vec::new();
        let mut scratch = event::FastScratch::default();
        for line in lines {
            items.push(event::fast_scan(line, &mut data, &mut scratch).map(|e| {
                tails.extend_from_slice(b"{\"id\":\"");
                tails.extend_from_slice(
                    uuid::Uuid::new_v4()
                        .hyphenated()
                        .encode_lower(&mut uuid::Uuid::encode_buffer())
                        .as_bytes(),
                );
                tails.extend_from_slice(b"\",\"sequence\":");
                tails.extend_from_slice(b"\"hypothesisId\":\"");
                tails.extend_from_slice(e.hypothesis_id.as_bytes());
                tails.extend_from_slice(b"\",\"location\":\"");
                tails.extend_from_slice(e.location);
                tails.extend_from_slice(b"\",\"message\":\"");
                tails.extend_from_slice(e.message);
                tails.extend_from_slice(b"\",\"data\":");
                tails.extend_from_slice(&data);
                tails.extend_from_slice(b",\"timestamp\":");
                tails.extend_from_slice(e.timestamp_text);
                tails.extend_from_slice(b"}\n");
                (e.hypothesis_id.len(), tails.len(), e.timestamp)
            }));
        }
        Self { tails, items }
    }

    /// One entry per line, in order.
    fn records(&self) -> impl Iterator<Item = Option<Record<'_>>> + '_ {
        let mut start = 0;
        self.items.iter().map(move |it| {
            it.map(|(hyp_len, end, timestamp)| {
                let head = &self.tails[start..start + HEAD_LEN];
                // Copied from a `&str` in `new`, so always valid UTF-8.
                let hypothesis_id =
                    std::str::from_utf8(&self.tails[start + HYP_AT..start + HYP_AT + hyp_len])
                        .unwrap_or_default();
                let tail = &self.tails[start + HEAD_LEN..end];
                start = end;
                Record::Fast {
                    head,
                    hypothesis_id,
                    tail,
                    timestamp,
                }
            })
        })
    }
}

/// Lines per batch below which validation stays on the calling thread.
const PARALLEL_MIN_LINES: usize = 4096;

/// Runs the fast path over all lines, on several threads for large batches (a file drain
/// step holds ~20k lines). Chunks are returned in line order.
fn prepare_all(lines: &[&[u8]]) -> Vec<PreparedChunk> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    if threads <= 1 || lines.len() < PARALLEL_MIN_LINES {
        return vec![PreparedChunk::new(lines)];
    }
    let chunk = lines.len().div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = lines
            .chunks(chunk)
            .map(|c| (c.len(), s.spawn(move || PreparedChunk::new(c))))
            .collect();
        handles
            .into_iter()
            .map(|(len, h)| {
                // A worker that panicked sends its lines down the full path instead.
                h.join().unwrap_or_else(|_| PreparedChunk {
                    tails: Vec::new(),
                    items: vec![None; len],
                })
            })
            .collect()
    })
}

/// How a pipelined drain run ended.
enum RunEnd {
    /// End of the file, or an incomplete trailing line that waits for its newline.
    Done,
    /// A step of `n` bytes without any newline that is too long to be a record (or continues
    /// one): its first bytes, for the diagnostic.
    Oversized(Vec<u8>, u64),
}

/// One message from the drain reader thread to the appending thread.
enum Step {
    /// `buf[spans[i]]` are complete lines whose fast-path results are `prepared`; `consumed`
    /// bytes of the append path (including a skipped remainder of an oversized line) are
    /// done once they are appended.
    Lines {
        buf: Vec<u8>,
        spans: Vec<std::ops::Range<usize>>,
        consumed: u64,
        prepared: Vec<PreparedChunk>,
    },
    End(RunEnd),
    Failed(io::Error),
}

/// The reader stage of `Session::drain_run`: reads the append path from `pos` up to `len`
/// in steps of at most `DRAIN_CHUNK` bytes, each cut after its last newline, and runs the
/// fast path over each step's lines. Stops when the receiver is gone.
fn produce_steps(
    f: &File,
    mut pos: u64,
    len: u64,
    mut skipping: bool,
    tx: &std::sync::mpsc::SyncSender<Step>,
    back: &std::sync::mpsc::Receiver<Vec<u8>>,
) {
    let end = loop {
        if pos >= len {
            break RunEnd::Done;
        }
        let mut buf = back.try_recv().unwrap_or_else(|_| vec![0; DRAIN_CHUNK]);
        buf.resize(DRAIN_CHUNK, 0);
        let want = usize::try_from(len - pos)
            .unwrap_or(usize::MAX)
            .min(DRAIN_CHUNK);
        let n = match read_full_at(f, &mut buf[..want], pos) {
            Ok(0) => break RunEnd::Done,
            Ok(n) => n,
            Err(e) => {
                let _ = tx.send(Step::Failed(e));
                return;
            }
        };
        let Some(last_nl) = memrchr(b'\n', &buf[..n]) else {
            if n >= event::MAX_LINE_BYTES + 2 || skipping {
                buf.truncate(n);
                break RunEnd::Oversized(buf, n as u64);
            }
            break RunEnd::Done; // incomplete trailing line: wait for its newline
        };
        let mut body = 0..last_nl + 1;
        if skipping {
            // The first line is the rest of an oversized one.
            body.start = memchr(b'\n', &buf[body.clone()]).map_or(body.end, |i| i + 1);
            skipping = false;
        }
        let lines = split_lines(&buf[body]);
        let prepared = prepare_all(&lines);
        let base = buf.as_ptr() as usize;
        let spans = lines
            .iter()
            .map(|l| {
                let start = l.as_ptr() as usize - base;
                start..start + l.len()
            })
            .collect();
        drop(lines);
        let step = Step::Lines {
            buf,
            spans,
            consumed: last_nl as u64 + 1,
            prepared,
        };
        if tx.send(step).is_err() {
            return;
        }
        pos += last_nl as u64 + 1;
    };
    let _ = tx.send(Step::End(end));
}

/// Reads into `buf` from `offset` until it is full or the file ends.
fn read_full_at(f: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], offset + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn write_diagnostic(
    out: &mut Vec<u8>,
    n: u64,
    source: Source,
    now: u64,
    m: Malformed,
) -> Result<()> {
    let d = Diagnostic {
        id: format!("MR-{n}"),
        source,
        received_at: now,
        reason: serde_json::to_value(m.reason)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
        message: m.message,
        recoverable_fields: m.recoverable_fields,
        preview: m.preview,
        suggested_fix: m.suggested_fix,
    };
    serde_json::to_writer(&mut *out, &d)
        .map_err(|e| DmError::evidence_io("serialize a diagnostic", &e.into()))?;
    out.push(b'\n');
    Ok(())
}

fn open_events(path: &Path) -> Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .custom_flags_nofollow()
        .open(path)
        .map_err(io_err("open evidence"))
}

trait NoFollow {
    fn custom_flags_nofollow(&mut self) -> &mut Self;
}

impl NoFollow for std::fs::OpenOptions {
    fn custom_flags_nofollow(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.mode(0o600)
            .custom_flags(i32::try_from(rustix::fs::OFlags::NOFOLLOW.bits()).unwrap_or(0))
    }
}

/// Deallocates (punches a hole over) the consumed prefix of the append path, so the raw,
/// unredacted lines a probe wrote do not stay on disk after ingestion. The file size is
/// kept, so concurrent `O_APPEND` writers are unaffected; unconsumed bytes are untouched.
fn scrub_consumed(f: &File, from: u64, to: u64) {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::FallocateFlags;
        if let Err(e) = rustix::fs::fallocate(
            f,
            FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
            from,
            to - from,
        ) {
            tracing::debug!(error = %e, "cannot punch a hole in the append path");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (f, from, to);
}

pub fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    memchr::memchr(needle, hay)
}

fn memrchr(needle: u8, hay: &[u8]) -> Option<usize> {
    memchr::memrchr(needle, hay)
}

/// Counts complete lines of a file (0 when missing).
pub fn count_lines(path: &Path) -> Result<u64> {
    let mut f = match paths::open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(DmError::evidence_io("read session files", &e)),
    };
    let mut buf = vec![0u8; 1024 * 1024];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf).map_err(io_err("read session files"))?;
        if k == 0 {
            return Ok(n);
        }
        n += buf[..k].iter().filter(|b| **b == b'\n').count() as u64;
    }
}

/// All sessions of one state root.
pub struct Store {
    root: PathBuf,
    clock: Arc<dyn Clock>,
    sessions: Mutex<HashMap<String, Arc<Mutex<Session>>>>,
}

/// Locks a mutex, recovering from poisoning (a panic in another request must not take the
/// service down).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Store {
    pub fn open(root: PathBuf, clock: Arc<dyn Clock>) -> Result<Self> {
        paths::ensure_dir(&root)?;
        paths::ensure_dir(&root.join("sessions"))?;
        Ok(Self {
            root,
            clock,
            sessions: Mutex::new(HashMap::new()),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    pub fn create(&self) -> Result<SessionInfo> {
        let id = uuid::Uuid::new_v4().to_string();
        let paths = SessionPaths::new(&self.root, &id);
        paths::ensure_dir(&self.root.join("sessions"))?;
        std::fs::DirBuilder::new()
            .mode_0700()
            .create(&paths.dir)
            .map_err(io_err("create the session directory"))?;
        let meta = Meta {
            schema_version: crate::SCHEMA_VERSION,
            session_id: id.clone(),
            created_at: self.now(),
        };
        let bytes = serde_json::to_vec_pretty(&meta)
            .map_err(|e| DmError::evidence_io("serialize metadata", &e.into()))?;
        paths::write_atomic(&paths.meta(), &bytes).map_err(io_err("write session metadata"))?;
        paths::open_append(&paths.incoming()).map_err(io_err("create the append path"))?;
        let s = Session::load(paths, &id)?;
        s.save_state()?;
        let info = s.info();
        lock(&self.sessions).insert(id, Arc::new(Mutex::new(s)));
        Ok(info)
    }

    /// Returns a loaded session, loading it from disk on first use.
    pub fn get(&self, id: &str) -> Result<Arc<Mutex<Session>>> {
        paths::validate_session_id(id)?;
        let paths = SessionPaths::new(&self.root, id);
        paths::reject_symlink(&paths.dir)?;
        let mut map = lock(&self.sessions);
        if !paths.dir.is_dir() {
            map.remove(id);
            return Err(DmError::session_not_found(id));
        }
        if let Some(s) = map.get(id) {
            return Ok(Arc::clone(s));
        }
        let s = Arc::new(Mutex::new(Session::load(paths, id)?));
        map.insert(id.to_owned(), Arc::clone(&s));
        Ok(s)
    }

    /// Permanently removes a session directory.
    pub fn clean(&self, id: &str) -> Result<()> {
        paths::validate_session_id(id)?;
        let paths = SessionPaths::new(&self.root, id);
        paths::reject_symlink(&paths.dir)?;
        let existing = lock(&self.sessions).remove(id);
        let guard = existing.as_ref().map(|s| lock(s));
        if !paths.dir.is_dir() {
            return Err(DmError::session_not_found(id));
        }
        std::fs::remove_dir_all(&paths.dir).map_err(io_err("remove the session directory"))?;
        if let Some(mut g) = guard {
            g.deleted = true;
        }
        Ok(())
    }

    /// Ids of sessions on disk (not necessarily loaded).
    pub fn session_ids(&self) -> Vec<String> {
        let Ok(rd) = std::fs::read_dir(self.root.join("sessions")) else {
            return Vec::new();
        };
        rd.filter_map(|e| e.ok())
            .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| paths::validate_session_id(n).is_ok())
            .collect()
    }

    /// Sessions, newest first. Without `all`, only sessions created today (UTC), at most 20.
    pub fn list(&self, all: bool) -> Result<(Vec<SessionSummary>, u64)> {
        let today = crate::timefmt::day_number(self.now());
        let mut metas: Vec<Meta> = self
            .session_ids()
            .into_iter()
            .filter_map(|id| {
                let p = SessionPaths::new(&self.root, &id);
                p.check().ok()?;
                let b = std::fs::read(p.meta()).ok()?;
                serde_json::from_slice::<Meta>(&b).ok()
            })
            .filter(|m| all || crate::timefmt::day_number(m.created_at) == today)
            .collect();
        metas.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then(b.session_id.cmp(&a.session_id))
        });
        let total = metas.len() as u64;
        if !all {
            metas.truncate(20);
        }
        let loaded = lock(&self.sessions).clone();
        let mut out = Vec::with_capacity(metas.len());
        for m in metas {
            let event_count = match loaded.get(&m.session_id) {
                Some(s) => lock(s).event_count(),
                None => count_lines(&SessionPaths::new(&self.root, &m.session_id).events())?,
            };
            out.push(SessionSummary {
                session_id: m.session_id,
                created_at: m.created_at,
                event_count,
            });
        }
        Ok((out, total))
    }

    /// Number of sessions currently loaded in memory.
    pub fn loaded_count(&self) -> usize {
        lock(&self.sessions).len()
    }

    /// Drains the append path of every session that has unread bytes. Cheap when idle: one
    /// `stat` per known session.
    pub fn drain_all(&self) -> IngestOutcome {
        let mut total = IngestOutcome::default();
        for id in self.session_ids() {
            let p = SessionPaths::new(&self.root, &id);
            let Ok(meta) = std::fs::symlink_metadata(p.incoming()) else {
                continue;
            };
            if meta.file_type().is_symlink() {
                continue;
            }
            let loaded = lock(&self.sessions).get(&id).cloned();
            let pending = match &loaded {
                Some(s) => meta.len() != lock(s).state.incoming_offset,
                // Not loaded: compare with the persisted offset (a small file), so idle
                // sessions are never re-indexed just to find nothing new.
                None => {
                    let offset = std::fs::read(p.state())
                        .ok()
                        .and_then(|b| serde_json::from_slice::<State>(&b).ok())
                        .map_or(0, |st| st.incoming_offset);
                    meta.len() != offset
                }
            };
            if !pending {
                continue;
            }
            let session = match loaded {
                Some(s) => s,
                None => match self.get(&id) {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(session = %id, error = %e, "cannot load session for file ingest");
                        continue;
                    }
                },
            };
            let now = self.now();
            match lock(&session).drain_incoming(now) {
                Ok(o) => {
                    total.accepted += o.accepted;
                    total.rejected += o.rejected;
                }
                Err(e) => {
                    tracing::warn!(session = %id, error = %e, "file ingest failed; will retry")
                }
            }
        }
        total
    }
}

trait DirMode {
    fn mode_0700(&mut self) -> &mut Self;
}

impl DirMode for std::fs::DirBuilder {
    fn mode_0700(&mut self) -> &mut Self {
        use std::os::unix::fs::DirBuilderExt;
        self.mode(0o700)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::clock::ManualClock;

    fn store() -> (tempfile::TempDir, Store, ManualClock) {
        let t = tempfile::tempdir().unwrap();
        let clock = ManualClock::default();
        clock.set(1_000);
        let s = Store::open(t.path().join("state"), Arc::new(clock.clone())).unwrap();
        (t, s, clock)
    }

    fn logs_query(offset: usize, limit: usize, hypotheses: &[&str]) -> LogsQuery {
        LogsQuery {
            offset,
            limit,
            hypotheses: hypotheses.iter().map(|h| (*h).to_owned()).collect(),
            ..LogsQuery::default()
        }
    }

    fn line(h: &str, n: u64) -> String {
        format!(
            r#"{{"hypothesisId":"{h}","location":"a.rs:{n}","message":"m","data":{{"n":{n}}},"timestamp":{n}}}"#
        )
    }

    #[test]
    fn http_and_file_ingest_share_sequence_and_survive_reload() {
        let (_t, store, _c) = store();
        let info = store.create().unwrap();
        let s = store.get(&info.session_id).unwrap();
        let body = format!("{}\n{}\n", line("H1", 1), line("H2", 2));
        let out = lock(&s)
            .ingest_body(body.as_bytes(), Source::Http, 5)
            .unwrap();
        assert_eq!(out.accepted, 2);
        // File ingest: the trailing incomplete line stays buffered.
        let mut f = paths::open_append(&info.append_path).unwrap();
        write!(f, "{}\n{}", line("H1", 3), &line("H1", 4)[..10]).unwrap();
        assert_eq!(lock(&s).drain_incoming(6).unwrap().accepted, 1);
        writeln!(f, "{}", &line("H1", 4)[10..]).unwrap();
        assert_eq!(lock(&s).drain_incoming(7).unwrap().accepted, 1);
        let page = lock(&s).logs(&logs_query(0, 10, &[])).unwrap();
        let seqs: Vec<u64> = page.events.iter().map(|e| e.sequence).collect();
        assert_eq!(seqs, vec![1, 2, 3, 4]);
        // A fresh store (service restart) rebuilds the same view.
        let store2 =
            Store::open(store.root().to_owned(), Arc::new(ManualClock::default())).unwrap();
        let s2 = store2.get(&info.session_id).unwrap();
        let page2 = lock(&s2).logs(&logs_query(0, 10, &["H1"])).unwrap();
        assert_eq!(page2.matched, 3);
        assert_eq!(
            page2.events.iter().map(|e| e.sequence).collect::<Vec<_>>(),
            vec![1, 3, 4]
        );
        assert_eq!(
            lock(&s2).drain_incoming(8).unwrap().accepted,
            0,
            "no re-ingest"
        );
    }

    #[test]
    fn a_full_disk_refuses_batches_with_a_clear_error_and_loses_no_line() {
        let (_t, store, _c) = store();
        let info = store.create().unwrap();
        let s = store.get(&info.session_id).unwrap();
        // /dev/full fails every write with ENOSPC, as a full file system does.
        let full = std::fs::OpenOptions::new()
            .append(true)
            .open("/dev/full")
            .expect("/dev/full exists on Linux");
        let real = std::mem::replace(&mut lock(&s).events, full);
        // HTTP: the whole batch is refused (the client gets an error), nothing is counted.
        let body = format!("{}\n", line("H1", 1));
        let err = lock(&s)
            .ingest_body(body.as_bytes(), Source::Http, 5)
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::EvidenceMalformed);
        assert!(err.hint.contains("disk space"), "{}", err.hint);
        // File: the lines stay unconsumed in the append path.
        let mut f = paths::open_append(&info.append_path).unwrap();
        write!(f, "{}\n{}\n", line("H1", 2), line("H2", 3)).unwrap();
        assert!(lock(&s).drain_incoming(6).is_err());
        assert_eq!(lock(&s).event_count(), 0);
        // Space is back: every line arrives once, in order, with sequences from 1.
        lock(&s).events = real;
        assert_eq!(lock(&s).drain_incoming(7).unwrap().accepted, 2);
        let store2 =
            Store::open(store.root().to_owned(), Arc::new(ManualClock::default())).unwrap();
        let page = lock(&store2.get(&info.session_id).unwrap())
            .logs(&logs_query(0, 10, &[]))
            .unwrap();
        let got: Vec<(u64, String)> = page
            .events
            .iter()
            .map(|e| (e.sequence, e.hypothesis_id.clone()))
            .collect();
        assert_eq!(got, vec![(1, "H1".to_owned()), (2, "H2".to_owned())]);
    }

    #[test]
    fn consumed_append_path_bytes_are_scrubbed() {
        let (_t, store, _c) = store();
        let info = store.create().unwrap();
        let s = store.get(&info.session_id).unwrap();
        let mut f = paths::open_append(&info.append_path).unwrap();
        let secret = line("H1", 1).replace("\"m\"", "\"password=hunter2\"");
        write!(f, "{secret}\n{}", &line("H1", 2)[..8]).unwrap();
        assert_eq!(lock(&s).drain_incoming(1).unwrap().accepted, 1);
        let raw = std::fs::read(&info.append_path).unwrap();
        assert!(!String::from_utf8_lossy(&raw).contains("hunter2"));
        assert!(
            raw.ends_with(&line("H1", 2).as_bytes()[..8]),
            "unconsumed bytes kept"
        );
        writeln!(f, "{}", &line("H1", 2)[8..]).unwrap();
        assert_eq!(lock(&s).drain_incoming(2).unwrap().accepted, 1);
    }

    #[test]
    fn idle_drain_does_not_load_sessions_with_nothing_new() {
        let (_t, store, _c) = store();
        let info = store.create().unwrap();
        let mut f = paths::open_append(&info.append_path).unwrap();
        writeln!(f, "{}", line("H1", 1)).unwrap();
        assert_eq!(store.drain_all().accepted, 1);
        let restarted =
            Store::open(store.root().to_owned(), Arc::new(ManualClock::default())).unwrap();
        assert_eq!(restarted.drain_all().accepted, 0);
        assert_eq!(
            restarted.loaded_count(),
            0,
            "nothing pending: nothing loaded"
        );
        writeln!(f, "{}", line("H1", 2)).unwrap();
        assert_eq!(restarted.drain_all().accepted, 1);
        assert_eq!(restarted.loaded_count(), 1);
    }

    #[test]
    fn fast_and_full_ingest_paths_store_identical_bytes() {
        let (_t, store, _c) = store();
        let a = store.create().unwrap();
        let b = store.create().unwrap();
        let lines = [
            line("H1", 1),
            r#"{ "hypothesisId": "H2", "location": "b.go:9", "message": "m", "data": {"a": [1, -2, "x y", true, null, {}]}, "timestamp": 5 }"#.to_owned(),
            r#"{"hypothesisId":"H3","location":"c:1","message":"m","data":"plain","timestamp":7}"#.to_owned(),
        ];
        assert!(
            lines
                .iter()
                .all(|l| event::fast_validate(l.as_bytes()).is_some())
        );
        let sa = store.get(&a.session_id).unwrap();
        lock(&sa)
            .ingest_body(lines.join("\n").as_bytes(), Source::Http, 9)
            .unwrap();
        let sb = store.get(&b.session_id).unwrap();
        let values = lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        lock(&sb).ingest_values(values, 9).unwrap();
        let strip = |id: &str| -> Vec<String> {
            std::fs::read_to_string(SessionPaths::new(store.root(), id).events())
                .unwrap()
                .lines()
                .map(|l| l[l.find(",\"sequence\"").unwrap()..].to_owned())
                .collect()
        };
        assert_eq!(strip(&a.session_id), strip(&b.session_id));
        assert_eq!(strip(&a.session_id).len(), 3);
    }

    #[test]
    fn parallel_fast_path_matches_the_full_path_in_order() {
        let (_t, store, _c) = store();
        let a = store.create().unwrap();
        let b = store.create().unwrap();
        let n = PARALLEL_MIN_LINES as u64 * 2 + 7;
        let mut lines: Vec<String> = (1..=n).map(|i| line(&format!("H{}", i % 5), i)).collect();
        // Some lines take the full path (redaction, floats, invalid) in the middle of the batch.
        lines[10] = r#"{"hypothesisId":"H1","location":"a:1","message":"m","data":{"password":"x"},"timestamp":1}"#.into();
        lines[5000] =
            r#"{"hypothesisId":"H1","location":"a:1","message":"m","data":1.5,"timestamp":1}"#
                .into();
        lines[7000] = "not json".into();
        let body = lines.join("\n");
        let sa = store.get(&a.session_id).unwrap();
        let out = lock(&sa)
            .ingest_body(body.as_bytes(), Source::Http, 9)
            .unwrap();
        assert_eq!((out.accepted, out.rejected), (n - 1, 1));
        let sb = store.get(&b.session_id).unwrap();
        for l in &lines {
            // One line per call: below the parallel threshold, and for valid JSON lines the
            // full path via ingest_values.
            match serde_json::from_str::<Value>(l) {
                Ok(v) => lock(&sb).ingest_values(vec![v], 9).unwrap(),
                Err(_) => lock(&sb)
                    .ingest_body(l.as_bytes(), Source::Http, 9)
                    .unwrap(),
            };
        }
        let strip = |id: &str| -> Vec<String> {
            std::fs::read_to_string(SessionPaths::new(store.root(), id).events())
                .unwrap()
                .lines()
                .map(|l| l[l.find(",\"sequence\"").unwrap()..].to_owned())
                .collect()
        };
        let (sa_lines, sb_lines) = (strip(&a.session_id), strip(&b.session_id));
        assert_eq!(sa_lines.len() as u64, n - 1);
        assert_eq!(sa_lines, sb_lines);
        let ids: std::collections::HashSet<String> =
            std::fs::read_to_string(SessionPaths::new(store.root(), &a.session_id).events())
                .unwrap()
                .lines()
                .map(|l| l[..l.find(",\"sequence\"").unwrap()].to_owned())
                .collect();
        assert_eq!(ids.len() as u64, n - 1, "event ids are unique");
    }

    #[test]
    fn a_torn_trailing_evidence_line_is_cut_on_reload() {
        let (_t, store, _c) = store();
        let info = store.create().unwrap();
        let s = store.get(&info.session_id).unwrap();
        lock(&s)
            .ingest_body(
                format!("{}\n{}", line("H1", 1), line("H2", 2)).as_bytes(),
                Source::Http,
                3,
            )
            .unwrap();
        let events = SessionPaths::new(store.root(), &info.session_id).events();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&events)
            .unwrap();
        f.write_all(br#"{"id":"torn","seq"#).unwrap();
        let store2 =
            Store::open(store.root().to_owned(), Arc::new(ManualClock::default())).unwrap();
        let s2 = store2.get(&info.session_id).unwrap();
        assert_eq!(lock(&s2).event_count(), 2);
        lock(&s2)
            .ingest_body(line("H1", 3).as_bytes(), Source::Http, 4)
            .unwrap();
        let page = lock(&s2).logs(&logs_query(0, 10, &[])).unwrap();
        assert_eq!(
            page.events.iter().map(|e| e.sequence).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
    }

    #[test]
    fn logs_are_in_time_order_also_after_a_reload_and_further_ingest() {
        let (_t, store, _c) = store();
        let info = store.create().unwrap();
        let s = store.get(&info.session_id).unwrap();
        let body = format!(
            "{}\n{}\n{}\n",
            line("H1", 30),
            line("H1", 10),
            line("H1", 20)
        );
        lock(&s)
            .ingest_body(body.as_bytes(), Source::Http, 5)
            .unwrap();
        let order = |s: &Arc<Mutex<Session>>| -> Vec<u64> {
            lock(s)
                .logs(&logs_query(0, 10, &[]))
                .unwrap()
                .events
                .iter()
                .map(|e| e.timestamp)
                .collect()
        };
        assert_eq!(order(&s), [10, 20, 30]);
        // A fresh service loads the session from disk; later events join the order.
        drop(s);
        let reopened =
            Store::open(store.root().to_path_buf(), Arc::new(ManualClock::default())).unwrap();
        let s2 = reopened.get(&info.session_id).unwrap();
        assert_eq!(order(&s2), [10, 20, 30]);
        lock(&s2)
            .ingest_body(format!("{}\n", line("H1", 15)).as_bytes(), Source::Http, 6)
            .unwrap();
        assert_eq!(order(&s2), [10, 15, 20, 30]);
        let q = LogsQuery {
            order: LogsOrder::Sequence,
            ..logs_query(0, 10, &[])
        };
        let seq: Vec<u64> = lock(&s2)
            .logs(&q)
            .unwrap()
            .events
            .iter()
            .map(|e| e.timestamp)
            .collect();
        assert_eq!(seq, [30, 10, 20, 15]);
    }

    #[test]
    fn reset_restarts_sequence_and_bumps_epoch() {
        let (_t, store, _c) = store();
        let info = store.create().unwrap();
        let s = store.get(&info.session_id).unwrap();
        lock(&s)
            .ingest_body(line("H1", 1).as_bytes(), Source::Http, 1)
            .unwrap();
        lock(&s).ingest_body(b"garbage", Source::Http, 1).unwrap();
        let e0 = lock(&s).epoch();
        lock(&s).reset().unwrap();
        assert_eq!(lock(&s).epoch(), e0 + 1);
        let st = lock(&s).status().unwrap();
        assert_eq!(
            (st.event_count, st.malformed_count, st.diagnostics.len()),
            (0, 0, 0)
        );
        lock(&s)
            .ingest_body(line("H1", 1).as_bytes(), Source::Http, 1)
            .unwrap();
        assert_eq!(
            lock(&s).logs(&logs_query(0, 10, &[])).unwrap().events[0].sequence,
            1
        );
    }

    #[test]
    fn malformed_records_become_redacted_diagnostics_on_both_paths() {
        let (_t, store, _c) = store();
        let info = store.create().unwrap();
        let s = store.get(&info.session_id).unwrap();
        lock(&s)
            .ingest_body(br#"{"password":"hunter2","oops":1"#, Source::Http, 1)
            .unwrap();
        let mut f = paths::open_append(&info.append_path).unwrap();
        writeln!(f, r#"{{"hypothesisId":"H1","location":"a:1","message":"token=abcdef123","data":{{"apiKey":"k"}},"timestamp":1}}"#).unwrap();
        writeln!(f, "not json Bearer abcdefghijklmnop").unwrap();
        lock(&s).drain_incoming(2).unwrap();
        let st = lock(&s).status().unwrap();
        assert_eq!(st.malformed_count, 2);
        assert_eq!(st.diagnostics[0].id, "MR-1");
        assert_eq!(st.diagnostics[1].source, Source::File);
        let on_disk = std::fs::read_to_string(
            SessionPaths::new(store.root(), &info.session_id)
                .dir
                .join("diagnostics.ndjson"),
        )
        .unwrap()
            + &std::fs::read_to_string(SessionPaths::new(store.root(), &info.session_id).events())
                .unwrap();
        assert!(
            !on_disk.contains("hunter2")
                && !on_disk.contains("abcdef123")
                && !on_disk.contains("abcdefghijklmnop"),
            "{on_disk}"
        );
        assert!(on_disk.contains("[REDACTED]"));
    }

    #[test]
    fn clean_removes_the_directory_and_unknown_ids_are_not_found() {
        let (_t, store, _c) = store();
        let info = store.create().unwrap();
        store.clean(&info.session_id).unwrap();
        assert!(
            !SessionPaths::new(store.root(), &info.session_id)
                .dir
                .exists()
        );
        assert_eq!(
            store.get(&info.session_id).err().unwrap().code,
            ErrorCode::SessionNotFound
        );
        let e = store.get("../../etc").err().unwrap();
        assert_eq!(e.code, ErrorCode::InvalidArguments);
        assert_eq!(
            e.reason.as_deref(),
            Some(crate::error::reason::INVALID_SESSION_ID)
        );
    }

    #[test]
    fn a_pipelined_multi_step_drain_appends_in_file_order_and_skips_an_oversized_line() {
        let (_t, store, _c) = store();
        let info = store.create().unwrap();
        let s = store.get(&info.session_id).unwrap();
        let mut body = String::new();
        let mut expected_n = Vec::new();
        let mut push = |body: &mut String, n: u64| {
            match n {
                100 => body.push_str("not json A"),
                90_000 => body.push_str("not json B"),
                _ => {
                    body.push_str(&line(&format!("H{}", n % 4), n));
                    expected_n.push(n);
                }
            }
            body.push('\n');
        };
        // ~4.8 MiB of lines (two drain steps), a line longer than a whole step (reported
        // once, then skipped up to its newline), ~4.8 MiB more: one drain, five steps.
        for n in 1..=60_000 {
            push(&mut body, n);
        }
        body.push_str(&"x".repeat(DRAIN_CHUNK + 1000));
        body.push('\n');
        for n in 60_001..=120_000 {
            push(&mut body, n);
        }
        assert!(body.len() > 2 * DRAIN_CHUNK + DRAIN_CHUNK);
        let mut f = paths::open_append(&info.append_path).unwrap();
        f.write_all(body.as_bytes()).unwrap();
        let out = lock(&s).drain_incoming(5).unwrap();
        assert_eq!(out.accepted, expected_n.len() as u64);
        assert_eq!(out.rejected, 3);
        let paths = SessionPaths::new(store.root(), &info.session_id);
        let stored: Vec<Value> = std::fs::read_to_string(paths.events())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let ns: Vec<u64> = stored
            .iter()
            .map(|e| e["data"]["n"].as_u64().unwrap())
            .collect();
        assert_eq!(ns, expected_n, "events are stored in file order");
        let seqs: Vec<u64> = stored
            .iter()
            .map(|e| e["sequence"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, (1..=expected_n.len() as u64).collect::<Vec<_>>());
        let diags: Vec<Value> = std::fs::read_to_string(paths.diagnostics())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let previews: Vec<String> = diags
            .iter()
            .map(|d| d["preview"].as_str().unwrap().chars().take(10).collect())
            .collect();
        assert_eq!(previews, ["not json A", "xxxxxxxxxx", "not json B"]);
        assert_eq!(lock(&s).state.incoming_offset, body.len() as u64);
        assert!(!lock(&s).state.skipping_long_line);
        // Nothing is left to drain, and a later line is ingested after the earlier ones.
        assert_eq!(
            lock(&s).drain_incoming(6).unwrap(),
            IngestOutcome::default()
        );
        writeln!(f, "{}", line("H1", 120_001)).unwrap();
        assert_eq!(lock(&s).drain_incoming(7).unwrap().accepted, 1);
        assert_eq!(lock(&s).event_count(), expected_n.len() as u64 + 1);
    }

    #[test]
    fn oversized_unterminated_line_is_skipped_not_buffered_forever() {
        let (_t, store, _c) = store();
        let info = store.create().unwrap();
        let s = store.get(&info.session_id).unwrap();
        let mut f = paths::open_append(&info.append_path).unwrap();
        f.write_all(&vec![b'x'; event::MAX_LINE_BYTES + 10])
            .unwrap();
        lock(&s).drain_incoming(1).unwrap();
        writeln!(f, "yyy").unwrap();
        writeln!(f, "{}", line("H1", 1)).unwrap();
        let out = lock(&s).drain_incoming(2).unwrap();
        assert_eq!(out.accepted, 1);
        assert_eq!(lock(&s).status().unwrap().malformed_count, 1);
    }
}
