//! Reading a session's evidence back: hypotheses, pages of logs in time or accepted order,
//! status and snapshots. Must not write.

use super::files::{corrupt, io_err};
use super::reports::{
    Diagnostic, HypothesisCount, LogsOrder, LogsPage, LogsQuery, MAX_LOGS_LIMIT, Snapshot,
    StatusReport, StoredEvent,
};
use super::session::Session;
use std::borrow::Cow;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;

use serde::Deserialize;

use crate::error::{DmError, ErrorCode, Result};
use crate::paths::{self};

impl Session {
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

    pub(super) fn read_event(&self, i: usize) -> Result<StoredEvent> {
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
    pub(super) fn load_timestamps(&mut self) -> Result<()> {
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
    pub(super) fn ensure_time_order(&mut self) -> Result<()> {
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
    pub(super) fn time_ordered(&self, n: usize) -> Cow<'_, [u32]> {
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
    pub(super) fn hypotheses_within(&self, n: usize) -> Vec<HypothesisCount> {
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
}
