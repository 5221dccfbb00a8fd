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
//!
//! Where each part lives: `reports` (what the store reports, plain data), `session` (one
//! session loaded, its index), `ingest` (evidence entering it), `query` (reading it back),
//! `lines` (splitting an ingest body into records), `files` (the file operations); this
//! file: the [`Store`] of all sessions.

mod files;
mod ingest;
mod lines;
mod query;
mod reports;
mod session;
#[cfg(test)]
mod tests;

use files::DirMode;
use files::io_err;
pub use files::{count_lines, memchr};
pub use lines::SplitTracker;
pub use reports::{
    Diagnostic, HypothesisCount, IngestOutcome, LogsOrder, LogsPage, LogsQuery, MAX_LOGS_LIMIT,
    MAX_STORED_DIAGNOSTICS, SessionInfo, SessionSummary, Snapshot, SnapshotRef, Source,
    StatusReport, StoredEvent,
};
pub use session::Session;
use session::{Meta, State};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::clock::Clock;
use crate::error::{DmError, Result};
use crate::paths::{self, SessionPaths};

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
