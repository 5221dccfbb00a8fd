//! Evidence entering a session ([`Session::ingest_body`], [`Session::drain_incoming`]): over
//! HTTP or from the session's append file, validated, redacted and appended in one write per
//! batch. Must not answer queries.

use super::files::io_err;
use super::files::{scrub_consumed, write_diagnostic};
use super::lines::{
    PreparedChunk, Record, RunEnd, SplitTracker, Step, prepare_all, produce_steps, push_u64,
    split_lines, split_tail,
};
use super::reports::{IngestOutcome, MAX_STORED_DIAGNOSTICS, Source, StoredEvent};
use super::session::Session;
use std::borrow::Cow;
use std::fs::File;
use std::io::{self, Write};

use serde_json::{Map, Value};

use crate::error::{DmError, Result};
use crate::event::{self, Malformed};
use crate::paths::{self};

impl Session {
    /// Ingests a body of newline-delimited records (HTTP). A final record without a newline
    /// is complete: the request body has ended.
    pub fn ingest_body(&mut self, body: &[u8], source: Source, now: u64) -> Result<IngestOutcome> {
        let lines: Vec<&[u8]> = split_lines(body);
        let prepared = prepare_all(&lines);
        self.ingest_prepared(lines.iter().copied(), &prepared, source, now)
    }

    /// Appends lines whose fast-path results `prepared` were computed by `prepare_all`.
    pub(super) fn ingest_prepared<'a>(
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
    pub(super) fn ingest_records<'a>(
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

    pub(super) fn save_state(&self) -> Result<()> {
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
    pub(super) fn drain_run(
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

    pub(super) fn record_oversized(&mut self, head: &[u8], now: u64) -> Result<()> {
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
}
