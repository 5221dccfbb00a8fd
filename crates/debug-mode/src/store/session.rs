//! One session's evidence as loaded ([`Session`]): its files, its in-memory index (byte
//! offset and hypothesis of each event) and its state (`state.json`); loading, rebuilding the
//! index, resetting. Ingest and queries extend it in `ingest.rs` and `query.rs`.

use super::files::{corrupt, count_lines, io_err, memchr, open_events};
use super::lines::DRAIN_CHUNK;
use super::lines::SplitTracker;
use super::reports::SessionInfo;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};

use serde::{Deserialize, Serialize};

use crate::error::{DmError, Result};
use crate::paths::{self, SessionPaths};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Meta {
    pub(super) schema_version: u32,
    pub(super) session_id: String,
    pub(super) created_at: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct State {
    pub(super) epoch: u64,
    pub(super) incoming_offset: u64,
    #[serde(default)]
    pub(super) skipping_long_line: bool,
    #[serde(default)]
    pub(super) malformed_total: u64,
    /// Events stored with at least one value replaced by the redactor (this reset cycle).
    #[serde(default)]
    pub(super) redacted_total: u64,
    /// File ingest is inside a record that a raw newline split: the JSON nesting still open
    /// at the end of the last line read (see [`SplitTracker`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) split: Option<SplitTracker>,
}

/// One loaded session.
pub struct Session {
    pub(super) id: String,
    pub(super) paths: SessionPaths,
    pub(super) created_at: u64,
    pub(super) state: State,
    pub(super) events: File,
    pub(super) events_len: u64,
    pub(super) next_seq: u64,
    pub(super) offsets: Vec<u64>,
    pub(super) hyp_of: Vec<u32>,
    /// Probe timestamp of each event, once loaded (`timestamps_loaded`): only needed when
    /// events arrived out of time order.
    pub(super) timestamps: Vec<u64>,
    pub(super) timestamps_loaded: bool,
    /// Largest timestamp so far.
    pub(super) max_timestamp: u64,
    /// True while every event's timestamp is >= the previous ones (timestamp order is
    /// accepted order, so no permutation is needed).
    pub(super) in_time_order: bool,
    /// Event indices sorted by (timestamp, sequence), for the first `len` events; rebuilt
    /// lazily when events arrive out of time order.
    pub(super) time_order: Option<Vec<u32>>,
    pub(super) hyp_names: Vec<String>,
    pub(super) hyp_lookup: HashMap<String, u32>,
    pub(super) hyp_counts: Vec<u64>,
    pub(super) stored_diagnostics: u64,
    pub(super) first_received_at: Option<u64>,
    pub(super) last_received_at: Option<u64>,
    pub(super) deleted: bool,
}

impl Session {
    pub(super) fn load(paths: SessionPaths, id: &str) -> Result<Self> {
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
    pub(super) fn rebuild_index(&mut self) -> Result<()> {
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

    pub(super) fn index_event(
        &mut self,
        offset: u64,
        hypothesis: &str,
        received_at: u64,
        timestamp: u64,
    ) {
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

    pub(super) fn ensure_live(&self) -> Result<()> {
        if self.deleted || !self.paths.dir.is_dir() {
            return Err(DmError::session_not_found(&self.id));
        }
        Ok(())
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

    pub fn epoch(&self) -> u64 {
        self.state.epoch
    }
}
