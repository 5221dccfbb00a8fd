//! The embedded backend: one SQLite file (bundled SQLite, WAL, `synchronous=FULL`, exclusive
//! locking so that one engine owns a database).
//!
//! All access goes through one store thread. It takes every command waiting in its queue,
//! applies them in one transaction and commits once (group commit: one fsync for many
//! batches, from many runs), then answers each command. A batch is acknowledged only after
//! its commit returned, so "durable before dispatch" holds.

use super::{Backend, JournalEntry, Pending, PersistBatch, RunMeta, Scope, StoreError, StoredRun};
use rusqlite::{Connection, OptionalExtension, params};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::oneshot;

const SCHEMA_VERSION: i64 = 1;
/// The most commands applied in one transaction.
const MAX_GROUP: usize = 1024;

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

enum Cmd {
    Persist(Box<PersistBatch>, Reply<()>),
    LoadRuns(String, bool, Reply<Vec<StoredRun>>),
    CtxGet(Scope, String, Reply<Option<serde_json::Value>>),
    CtxSet(Scope, String, serde_json::Value, Reply<()>),
    CtxDelete(Scope, String, Reply<()>),
    Halt,
}

/// The embedded SQLite store.
pub struct SqliteBackend {
    tx: Mutex<Option<mpsc::Sender<Cmd>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    halted: Arc<AtomicBool>,
    path: PathBuf,
}

/// Options of [`SqliteBackend::open_with`].
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// ThreadContext time to live (default 30 days).
    pub thread_ttl: Duration,
    /// fsync at every commit (`synchronous=FULL`, default). `false` uses `NORMAL`: still
    /// consistent after a crash, but the last commits may be lost on power failure.
    pub full_sync: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            thread_ttl: Duration::from_secs(30 * 24 * 3600),
            full_sync: true,
        }
    }
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

fn classify(path: &Path, e: &rusqlite::Error) -> StoreError {
    let path = path.display().to_string();
    let detail = e.to_string();
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::NotADatabase) | Some(rusqlite::ErrorCode::DatabaseCorrupt) => {
            StoreError::Corrupt { path, detail }
        }
        Some(rusqlite::ErrorCode::DatabaseBusy) | Some(rusqlite::ErrorCode::DatabaseLocked) => {
            StoreError::Locked { path, detail }
        }
        Some(rusqlite::ErrorCode::CannotOpen) | Some(rusqlite::ErrorCode::PermissionDenied) => {
            StoreError::Open { path, detail }
        }
        _ => StoreError::Io { detail },
    }
}

fn io(e: rusqlite::Error) -> StoreError {
    StoreError::Io {
        detail: e.to_string(),
    }
}

impl SqliteBackend {
    /// Opens (or creates) a database file with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteBackend, StoreError> {
        SqliteBackend::open_with(path, SqliteOptions::default())
    }

    pub fn open_with(
        path: impl AsRef<Path>,
        opts: SqliteOptions,
    ) -> Result<SqliteBackend, StoreError> {
        let path = path.as_ref().to_path_buf();
        let conn = Connection::open(&path).map_err(|e| classify(&path, &e))?;
        setup(&conn, &opts).map_err(|e| classify(&path, &e))?;
        let halted = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let worker = Worker {
            conn,
            ttl_ns: opts.thread_ttl.as_nanos().min(i64::MAX as u128) as i64,
        };
        let thread = std::thread::Builder::new()
            .name("saap-sqlite".into())
            .spawn(move || worker.run(rx))
            .map_err(|e| StoreError::Open {
                path: path.display().to_string(),
                detail: format!("cannot start the store thread: {e}"),
            })?;
        Ok(SqliteBackend {
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            halted,
            path,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn send<T>(&self, make: impl FnOnce(Reply<T>) -> Cmd) -> Pending<T> {
        if self.halted.load(Ordering::Acquire) {
            return Pending::Ready(Err(StoreError::Halted));
        }
        let (reply, rx) = oneshot::channel();
        let guard = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(tx) if tx.send(make(reply)).is_ok() => Pending::Wait(rx),
            _ => Pending::Ready(Err(StoreError::Halted)),
        }
    }

    fn stop(&self, cmd: Option<Cmd>) {
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let (Some(tx), Some(cmd)) = (&tx, cmd) {
            let _ = tx.send(cmd);
        }
        drop(tx);
        let handle = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = handle
            && h.join().is_err()
        {
            tracing::error!("the SQLite store thread panicked");
        }
    }
}

impl Drop for SqliteBackend {
    fn drop(&mut self) {
        // Orderly shutdown: what is queued is committed, then the connection closes.
        self.stop(None);
    }
}

fn setup(conn: &Connection, opts: &SqliteOptions) -> Result<(), rusqlite::Error> {
    conn.busy_timeout(Duration::from_millis(0))?;
    conn.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
    let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(mode, "SQLite did not switch to WAL mode");
    }
    conn.pragma_update(
        None,
        "synchronous",
        if opts.full_sync { "FULL" } else { "NORMAL" },
    )?;
    // Journal rows live in a rowid table: rows from many interleaved runs append at the end
    // of its b-tree instead of splitting pages of full rows keyed by run id (databases made
    // before kept their WITHOUT ROWID table; both read and write the same columns). The
    // unique index keeps (run_id, idx) unique and ordered.
    conn.execute_batch(
        "BEGIN;
         CREATE TABLE IF NOT EXISTS saap_meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);
         CREATE TABLE IF NOT EXISTS runs(
            run_id TEXT PRIMARY KEY, workflow TEXT NOT NULL, thread_id TEXT NOT NULL,
            fingerprint INTEGER NOT NULL, ended INTEGER NOT NULL DEFAULT 0,
            created_ns INTEGER NOT NULL);
         CREATE INDEX IF NOT EXISTS runs_live ON runs(workflow, ended);
         CREATE TABLE IF NOT EXISTS journal(
            run_id TEXT NOT NULL, idx INTEGER NOT NULL, input TEXT NOT NULL,
            records TEXT NOT NULL);
         CREATE UNIQUE INDEX IF NOT EXISTS journal_run ON journal(run_id, idx);
         CREATE TABLE IF NOT EXISTS run_context(
            run_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
            PRIMARY KEY(run_id, key)) WITHOUT ROWID;
         CREATE TABLE IF NOT EXISTS thread_context(
            thread_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
            expires_ns INTEGER NOT NULL, PRIMARY KEY(thread_id, key)) WITHOUT ROWID;
         INSERT OR IGNORE INTO saap_meta(key, value) VALUES ('schema', 1);
         COMMIT;",
    )?;
    let v: i64 = conn.query_row("SELECT value FROM saap_meta WHERE key='schema'", [], |r| {
        r.get(0)
    })?;
    if v != SCHEMA_VERSION {
        return Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
            Some(format!(
                "schema version {v}, this build reads {SCHEMA_VERSION}"
            )),
        ));
    }
    conn.execute(
        "DELETE FROM thread_context WHERE expires_ns < ?1",
        params![now_ns()],
    )?;
    Ok(())
}

struct Worker {
    conn: Connection,
    ttl_ns: i64,
}

/// A reply to send once the transaction committed.
enum Done {
    Unit(Reply<()>, Result<(), StoreError>),
    Runs(Reply<Vec<StoredRun>>, Result<Vec<StoredRun>, StoreError>),
    Value(
        Reply<Option<serde_json::Value>>,
        Result<Option<serde_json::Value>, StoreError>,
    ),
}

impl Worker {
    fn run(mut self, rx: mpsc::Receiver<Cmd>) {
        let mut group = Vec::with_capacity(64);
        while let Ok(first) = rx.recv() {
            group.push(first);
            while group.len() < MAX_GROUP {
                match rx.try_recv() {
                    Ok(c) => group.push(c),
                    Err(_) => break,
                }
            }
            if group.iter().any(|c| matches!(c, Cmd::Halt)) {
                // Crash: nothing queued becomes durable; repliers see `Halted`.
                group.clear();
                return;
            }
            self.apply_group(&mut group);
        }
    }

    fn apply_group(&mut self, group: &mut Vec<Cmd>) {
        let mut done = Vec::with_capacity(group.len());
        let tx = match self.conn.transaction() {
            Ok(tx) => tx,
            Err(e) => {
                let err = io(e);
                for c in group.drain(..) {
                    fail(c, err.clone());
                }
                return;
            }
        };
        for c in group.drain(..) {
            match c {
                Cmd::Persist(b, r) => done.push(Done::Unit(r, persist(&tx, &b))),
                Cmd::LoadRuns(w, live, r) => done.push(Done::Runs(r, load_runs(&tx, &w, live))),
                Cmd::CtxGet(s, k, r) => done.push(Done::Value(r, ctx_get(&tx, &s, &k))),
                Cmd::CtxSet(s, k, v, r) => {
                    done.push(Done::Unit(r, ctx_set(&tx, &s, &k, &v, self.ttl_ns)))
                }
                Cmd::CtxDelete(s, k, r) => done.push(Done::Unit(r, ctx_delete(&tx, &s, &k))),
                Cmd::Halt => {}
            }
        }
        if let Err(e) = tx.commit() {
            let err = io(e);
            for d in done {
                match d {
                    Done::Unit(r, _) => drop(r.send(Err(err.clone()))),
                    Done::Runs(r, _) => drop(r.send(Err(err.clone()))),
                    Done::Value(r, _) => drop(r.send(Err(err.clone()))),
                }
            }
            return;
        }
        for d in done {
            // A receiver that went away (its task was cancelled) is not an error.
            match d {
                Done::Unit(r, v) => drop(r.send(v)),
                Done::Runs(r, v) => drop(r.send(v)),
                Done::Value(r, v) => drop(r.send(v)),
            }
        }
    }
}

fn fail(c: Cmd, err: StoreError) {
    match c {
        Cmd::Persist(_, r) | Cmd::CtxSet(_, _, _, r) | Cmd::CtxDelete(_, _, r) => {
            drop(r.send(Err(err)))
        }
        Cmd::LoadRuns(_, _, r) => drop(r.send(Err(err))),
        Cmd::CtxGet(_, _, r) => drop(r.send(Err(err))),
        Cmd::Halt => {}
    }
}

fn persist(tx: &rusqlite::Transaction<'_>, b: &PersistBatch) -> Result<(), StoreError> {
    if let Some(m) = &b.new_run {
        tx.prepare_cached(
            "INSERT INTO runs(run_id, workflow, thread_id, fingerprint, ended, created_ns)
             VALUES (?1, ?2, ?3, ?4, 0, ?5)",
        )
        .and_then(|mut s| {
            s.execute(params![
                &*m.run_id,
                m.workflow,
                &*m.thread_id,
                m.fingerprint as i64,
                now_ns()
            ])
        })
        .map_err(io)?;
    }
    if b.entry_json.is_empty() {
        return Err(StoreError::Io {
            detail: format!(
                "journal entry {} of run `{}` could not be encoded",
                b.index, b.run_id
            ),
        });
    }
    tx.prepare_cached("INSERT INTO journal(run_id, idx, input, records) VALUES (?1, ?2, ?3, ?4)")
        .and_then(|mut s| {
            s.execute(params![
                &*b.run_id,
                b.index as i64,
                b.entry_json,
                b.records_json
            ])
        })
        .map_err(io)?;
    if b.ended {
        tx.prepare_cached("UPDATE runs SET ended = 1 WHERE run_id = ?1")
            .and_then(|mut s| s.execute(params![&*b.run_id]))
            .map_err(io)?;
        tx.prepare_cached("DELETE FROM run_context WHERE run_id = ?1")
            .and_then(|mut s| s.execute(params![&*b.run_id]))
            .map_err(io)?;
    }
    Ok(())
}

fn load_runs(
    tx: &rusqlite::Transaction<'_>,
    workflow: &str,
    live_only: bool,
) -> Result<Vec<StoredRun>, StoreError> {
    let mut stmt = tx
        .prepare(
            "SELECT run_id, thread_id, fingerprint, ended FROM runs
             WHERE workflow = ?1 AND (?2 = 0 OR ended = 0) ORDER BY created_ns, run_id",
        )
        .map_err(io)?;
    let metas = stmt
        .query_map(params![workflow, live_only as i64], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
            ))
        })
        .map_err(io)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(io)?;
    let mut jstmt = tx
        .prepare("SELECT input, records FROM journal WHERE run_id = ?1 ORDER BY idx")
        .map_err(io)?;
    let mut out = Vec::with_capacity(metas.len());
    for (run_id, thread_id, fp, ended) in metas {
        let rows = jstmt
            .query_map(params![&run_id], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(io)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(io)?;
        let mut journal = Vec::with_capacity(rows.len());
        let mut records = Vec::new();
        let mut damaged = None;
        for (i, (input, recs)) in rows.iter().enumerate() {
            let parsed = serde_json::from_str::<JournalEntry>(input).and_then(|entry| {
                serde_json::from_str::<Vec<serde_json::Value>>(recs).map(|r| (entry, r))
            });
            match parsed {
                Ok((entry, recs)) => {
                    journal.push(entry);
                    records.extend(recs);
                }
                Err(e) => {
                    let detail = format!("journal entry {i}: {e}");
                    tracing::error!(run_id, %detail, "a stored run cannot be read");
                    damaged = Some(detail);
                    journal.clear();
                    records.clear();
                    break;
                }
            }
        }
        out.push(StoredRun {
            meta: RunMeta {
                run_id: run_id.as_str().into(),
                thread_id: thread_id.into(),
                workflow: workflow.to_string(),
                fingerprint: fp as u64,
            },
            ended: ended != 0,
            journal,
            records,
            damaged,
        });
    }
    Ok(out)
}

fn ctx_get(
    tx: &rusqlite::Transaction<'_>,
    scope: &Scope,
    key: &str,
) -> Result<Option<serde_json::Value>, StoreError> {
    let text: Option<String> = match scope {
        Scope::Run(run) => tx
            .prepare_cached("SELECT value FROM run_context WHERE run_id = ?1 AND key = ?2")
            .and_then(|mut s| s.query_row(params![&**run, key], |r| r.get(0)).optional()),
        Scope::Thread(t) => tx
            .prepare_cached(
                "SELECT value FROM thread_context WHERE thread_id = ?1 AND key = ?2 AND expires_ns > ?3",
            )
            .and_then(|mut s| s.query_row(params![&**t, key, now_ns()], |r| r.get(0)).optional()),
    }
    .map_err(io)?;
    match text {
        None => Ok(None),
        Some(t) => serde_json::from_str(&t)
            .map(Some)
            .map_err(|e| StoreError::BadRow {
                run_id: format!("{scope:?}"),
                detail: e.to_string(),
            }),
    }
}

fn ctx_set(
    tx: &rusqlite::Transaction<'_>,
    scope: &Scope,
    key: &str,
    value: &serde_json::Value,
    ttl_ns: i64,
) -> Result<(), StoreError> {
    let text = value.to_string();
    match scope {
        Scope::Run(run) => tx
            .prepare_cached("INSERT OR REPLACE INTO run_context(run_id, key, value) VALUES (?1, ?2, ?3)")
            .and_then(|mut s| s.execute(params![&**run, key, text])),
        Scope::Thread(t) => tx
            .prepare_cached(
                "INSERT OR REPLACE INTO thread_context(thread_id, key, value, expires_ns) VALUES (?1, ?2, ?3, ?4)",
            )
            .and_then(|mut s| s.execute(params![&**t, key, text, now_ns().saturating_add(ttl_ns)])),
    }
    .map(|_| ())
    .map_err(io)
}

fn ctx_delete(tx: &rusqlite::Transaction<'_>, scope: &Scope, key: &str) -> Result<(), StoreError> {
    match scope {
        Scope::Run(run) => tx
            .prepare_cached("DELETE FROM run_context WHERE run_id = ?1 AND key = ?2")
            .and_then(|mut s| s.execute(params![&**run, key])),
        Scope::Thread(t) => tx
            .prepare_cached("DELETE FROM thread_context WHERE thread_id = ?1 AND key = ?2")
            .and_then(|mut s| s.execute(params![&**t, key])),
    }
    .map(|_| ())
    .map_err(io)
}

impl Backend for SqliteBackend {
    fn name(&self) -> &'static str {
        "sqlite"
    }
    fn wants_journal(&self) -> bool {
        true
    }
    fn persist(&self, batch: PersistBatch) -> Pending<()> {
        self.send(|r| Cmd::Persist(Box::new(batch), r))
    }
    fn load_runs(&self, workflow: &str, live_only: bool) -> Pending<Vec<StoredRun>> {
        let w = workflow.to_string();
        self.send(|r| Cmd::LoadRuns(w, live_only, r))
    }
    fn ctx_get(&self, scope: Scope, key: &str) -> Pending<Option<serde_json::Value>> {
        let k = key.to_string();
        self.send(|r| Cmd::CtxGet(scope, k, r))
    }
    fn ctx_set(&self, scope: Scope, key: &str, value: serde_json::Value) -> Pending<()> {
        let k = key.to_string();
        self.send(|r| Cmd::CtxSet(scope, k, value, r))
    }
    fn ctx_delete(&self, scope: Scope, key: &str) -> Pending<()> {
        let k = key.to_string();
        self.send(|r| Cmd::CtxDelete(scope, k, r))
    }
    fn halt(&self) {
        self.halted.store(true, Ordering::Release);
        self.stop(Some(Cmd::Halt));
    }
}
