//! Inspecting a saap SQLite store (what an agent binary writes with `--db PATH`), read-only,
//! through plain SQL on its documented schema (version 2: `runs`, `journal`, `run_context`,
//! `thread_context`, `saap_meta`; see `crates/saap/src/backend/sqlite.rs`). Each workflow's
//! journal plays the part of a stream: its entries in arrival order (the journal's row id is
//! the sequence), `run_context` and `thread_context` play the part of KV buckets.
//!
//! Never writes: the file is opened with `SQLITE_OPEN_READ_ONLY` and `query_only`; a store that
//! was closed cleanly (no `-wal` file) is opened `immutable`, so not even a lock or a shared
//! memory file is made. A store that a running agent owns (it locks it exclusively) is
//! refused with `SAAP-I012` rather than waited for. Every list is bounded.

mod read;

use crate::error::{InspectError, Result, clip};
use crate::model::{EventCount, ServerReport, SourceKind, StreamReport, StreamSummary};
use crate::query::MAX_SUBJECTS;
use crate::timefmt::format_ns;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The schema version this reader understands.
pub const SCHEMA_VERSION: i64 = 2;

/// A read-only view of one store file.
pub struct StoreInspector {
    conn: Connection,
    path: PathBuf,
    /// False for journals made before the journal became a rowid table (no arrival order).
    rowid_journal: bool,
}

impl std::fmt::Debug for StoreInspector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreInspector")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// `path` as an SQLite URI with `query`.
fn uri(path: &Path, query: &str) -> String {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut s = String::from("file:");
    for c in abs.to_string_lossy().chars() {
        match c {
            '%' => s.push_str("%25"),
            '?' => s.push_str("%3f"),
            '#' => s.push_str("%23"),
            c => s.push(c),
        }
    }
    s.push('?');
    s.push_str(query);
    s
}

impl StoreInspector {
    /// Opens `path` read-only and checks that it is a saap store of schema 2.
    pub fn open(path: impl AsRef<Path>) -> Result<StoreInspector> {
        let path = path.as_ref().to_path_buf();
        let shown = path.display().to_string();
        if !path.is_file() {
            return Err(InspectError::NoStore { path: shown });
        }
        let wal = PathBuf::from(format!("{}-wal", path.display()));
        let clean = std::fs::metadata(&wal).map_or(true, |m| m.len() == 0);
        let query = if clean {
            "mode=ro&immutable=1"
        } else {
            "mode=ro"
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(uri(&path, query), flags)
            .map_err(|e| classify(&shown, &e))?;
        let setup = || -> rusqlite::Result<()> {
            conn.busy_timeout(Duration::from_millis(200))?;
            conn.pragma_update(None, "query_only", true)?;
            Ok(())
        };
        setup().map_err(|e| classify(&shown, &e))?;
        let version: Option<i64> = conn
            .query_row("SELECT value FROM saap_meta WHERE key = 'schema'", [], |r| r.get(0))
            .optional()
            .map_err(|e| match classify(&shown, &e) {
                InspectError::StoreRead { .. } if e.to_string().contains("no such table") => {
                    InspectError::NotAStore {
                        path: shown.clone(),
                        reason: "it has no saap_meta table: it was not written by a saap agent; give the --db an agent writes".to_owned(),
                    }
                }
                other => other,
            })?;
        match version {
            Some(SCHEMA_VERSION) => {}
            Some(1) => {
                return Err(InspectError::NotAStore {
                    path: shown,
                    reason: "schema version 1 (an earlier saap); open it once with the agent (`<agent> runs --db PATH`) to migrate it, on a copy if it must stay as it is".to_owned(),
                });
            }
            v => {
                return Err(InspectError::NotAStore {
                    path: shown,
                    reason: format!(
                        "schema version {v:?}, this saap reads {SCHEMA_VERSION}; inspect it with the saap that wrote it"
                    ),
                });
            }
        }
        let sql: Option<String> = conn
            .query_row(
                "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'journal'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| classify(&shown, &e))?;
        let rowid_journal = !sql
            .unwrap_or_default()
            .to_ascii_uppercase()
            .contains("WITHOUT ROWID");
        Ok(StoreInspector {
            conn,
            path,
            rowid_journal,
        })
    }

    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    pub(crate) fn shown(&self) -> String {
        self.path.display().to_string()
    }

    pub(crate) fn err(&self, e: rusqlite::Error) -> InspectError {
        classify(&self.shown(), &e)
    }

    /// Whether the journal has an arrival order (row ids); stores made before it became a rowid
    /// table have none, and `view`/`get` refuse them.
    pub fn has_arrival_order(&self) -> bool {
        self.rowid_journal
    }

    /// `server`: the file, its schema and what it holds.
    pub fn server(&self) -> Result<ServerReport> {
        let size = std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0);
        let (runs, live, workflows): (i64, i64, i64) = self
            .conn
            .query_row(
                "SELECT count(*), coalesce(sum(ended = 0), 0), count(DISTINCT workflow) FROM runs",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .map_err(|e| self.err(e))?;
        let last_row: Option<i64> = if self.rowid_journal {
            self.conn
                .query_row("SELECT max(rowid) FROM journal", [], |r| r.get(0))
                .map_err(|e| self.err(e))?
        } else {
            None
        };
        Ok(ServerReport {
            source: SourceKind::Store,
            name: self.shown(),
            id: format!("schema {SCHEMA_VERSION}"),
            version: format!("SQLite {}", rusqlite::version()),
            facts: vec![
                ("file_bytes".to_owned(), json!(size)),
                ("workflows".to_owned(), json!(workflows)),
                ("runs".to_owned(), json!(runs)),
                ("live_runs".to_owned(), json!(live)),
                ("last_journal_row".to_owned(), json!(last_row)),
                (
                    "journal_layout".to_owned(),
                    json!(if self.rowid_journal {
                        "rowid (arrival order)"
                    } else {
                        "without rowid (per run only)"
                    }),
                ),
            ],
        })
    }

    /// `streams`: one entry per workflow (its journal), by name.
    pub fn streams(&self) -> Result<Vec<StreamSummary>> {
        let mut stmt = self
            .conn
            .prepare("SELECT workflow FROM runs GROUP BY workflow ORDER BY workflow LIMIT 10000")
            .map_err(|e| self.err(e))?;
        let names: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .and_then(|rows| rows.collect())
            .map_err(|e| self.err(e))?;
        names.iter().map(|w| self.summary(w)).collect()
    }

    fn summary(&self, workflow: &str) -> Result<StreamSummary> {
        let (runs, first_ns, last_ns): (i64, Option<i64>, Option<i64>) = self
            .conn
            .query_row(
                "SELECT count(*), min(created_ns), max(created_ns) FROM runs WHERE workflow = ?1",
                params![workflow],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .map_err(|e| self.err(e))?;
        if runs == 0 {
            return Err(InspectError::NoStream {
                stream: clip(workflow),
            });
        }
        let seq = if self.rowid_journal { "j.rowid" } else { "0" };
        let (entries, first, last): (i64, Option<i64>, Option<i64>) = self
            .conn
            .query_row(
                &format!(
                    "SELECT count(*), min({seq}), max({seq}) FROM journal j JOIN runs r ON r.run_id = j.run_id WHERE r.workflow = ?1"
                ),
                params![workflow],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .map_err(|e| self.err(e))?;
        Ok(StreamSummary {
            name: workflow.to_owned(),
            role: "store_journal".to_owned(),
            agent_class: Some(workflow.to_owned()),
            subjects: Vec::new(),
            messages: entries.max(0) as u64,
            bytes: 0,
            first_seq: first.unwrap_or(0).max(0) as u64,
            last_seq: last.unwrap_or(0).max(0) as u64,
            first_time: first_ns.map(format_ns),
            last_time: last_ns.map(format_ns),
            consumers: runs.max(0) as u64,
        })
    }

    /// `stream WORKFLOW`: its journal's state, run counts, and entries per event type (counted
    /// over at most `max_entries` entries).
    pub fn stream_report(&self, workflow: &str, max_entries: u64) -> Result<StreamReport> {
        let max_entries = max_entries.clamp(1, MAX_SUBJECTS);
        let summary = self.summary(workflow)?;
        let (live, stopped, failed): (i64, i64, i64) = self
            .conn
            .query_row(
                "SELECT coalesce(sum(ended = 0), 0), coalesce(sum(outcome = 'stop'), 0), coalesce(sum(outcome = 'exception'), 0) FROM runs WHERE workflow = ?1",
                params![workflow],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .map_err(|e| self.err(e))?;
        // Events appended from outside (`append`) and returned by executions (`output`), over
        // at most `max_entries` entries in row order.
        let mut stmt = self
            .conn
            .prepare(
                "WITH e AS (SELECT j.input AS input FROM journal j CROSS JOIN runs r ON r.run_id = j.run_id
                            WHERE r.workflow = ?1 LIMIT ?2)
                 SELECT k, n, count(*) FROM (
                     SELECT 'append' AS k, json_extract(input, '$.i.event.n') AS n FROM e
                         WHERE json_extract(input, '$.i.in') = 'append'
                     UNION ALL
                     SELECT 'output', json_extract(o.value, '$.n') FROM e, json_each(e.input, '$.i.outputs') AS o)
                 GROUP BY k, n ORDER BY count(*) DESC, n, k",
            )
            .map_err(|e| self.err(e))?;
        let events: Vec<EventCount> = stmt
            .query_map(params![workflow, max_entries as i64], |r| {
                Ok(EventCount {
                    kind: r.get::<_, Option<String>>(0)?.unwrap_or_default(),
                    event_name: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                    count: r.get::<_, i64>(2)?.max(0) as u64,
                })
            })
            .and_then(|rows| rows.collect())
            .map_err(|e| self.err(e))?;
        let scanned = summary.messages.min(max_entries);
        Ok(StreamReport {
            truncated: summary.messages > scanned,
            config: json!({
                "schema": SCHEMA_VERSION,
                "runs": summary.consumers,
                "live_runs": live,
                "stopped_runs": stopped,
                "failed_runs": failed,
                "arrival_order": self.rowid_journal,
            }),
            summary,
            deleted: 0,
            subjects_total: 0,
            events,
            subjects_scanned: scanned,
            consumer_list: Vec::new(),
        })
    }
}

/// A rusqlite failure as an inspection error.
pub(crate) fn classify(path: &str, e: &rusqlite::Error) -> InspectError {
    use rusqlite::ErrorCode as C;
    let reason = e.to_string();
    match e.sqlite_error_code() {
        Some(C::DatabaseBusy) | Some(C::DatabaseLocked) => InspectError::StoreBusy {
            path: path.to_owned(),
            reason,
        },
        Some(C::NotADatabase) => InspectError::NotAStore {
            path: path.to_owned(),
            reason: format!("{reason}; give the --db an agent writes"),
        },
        Some(C::CannotOpen) | Some(C::PermissionDenied) => InspectError::StoreRead {
            path: path.to_owned(),
            reason: format!("{reason} (check the file's permissions)"),
        },
        Some(C::ReadOnly) => InspectError::StoreBusy {
            path: path.to_owned(),
            reason: format!(
                "{reason}: its -wal file needs recovery, which a read-only reader cannot do (the agent did not stop cleanly, or still runs)"
            ),
        },
        _ => InspectError::StoreRead {
            path: path.to_owned(),
            reason,
        },
    }
}
