//! The embedded backend: one SQLite file (bundled SQLite, WAL, `synchronous=FULL`, exclusive
//! locking so that one engine owns a database).
//!
//! All access goes through one store thread. It takes every command waiting in its queue,
//! applies them in one transaction and commits once (group commit: one fsync for many
//! batches, from many runs), then answers each command. A batch is acknowledged only after
//! its commit returned, so "durable before dispatch" holds.

use super::sqlite_effects as effects;
use super::{
    Backend, EffectAt, EffectRecord, EffectTake, JournalEntry, Pending, PersistBatch,
    RecordsSummary, RunMeta, RunPage, RunParent, RunQuery, RunSummary, Scope, StatusFilter,
    StoreError, StoredRun, Termination,
};
use rusqlite::{Connection, OptionalExtension, params};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::oneshot;

/// Version 2 added `runs.outcome` (how an ended run ended) and the indexes that list a
/// workflow's runs newest first, by status; version-1 files are migrated when opened.
const SCHEMA_VERSION: i64 = 2;
/// The most commands applied in one transaction.
const MAX_GROUP: usize = 1024;

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

enum Cmd {
    Persist(Box<PersistBatch>, Reply<()>),
    LoadRuns(String, bool, Reply<Vec<StoredRun>>),
    ListRuns(String, RunQuery, Reply<RunPage>),
    ReadRun(String, String, Reply<Option<StoredRun>>),
    CtxGet(Scope, String, Reply<Option<serde_json::Value>>),
    CtxSet(Scope, String, serde_json::Value, Reply<()>),
    CtxDelete(Scope, String, Reply<()>),
    EffectTake(EffectAt, String, Reply<EffectTake>),
    EffectRecord(String, Box<EffectRecord>, Reply<()>),
    Effects(String, Reply<Vec<EffectRecord>>),
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

/// `path` as an SQLite URI with `query` (the characters a URI gives meaning to escaped).
fn read_only_uri(path: &Path, query: &str) -> String {
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
        SqliteBackend::serve(conn, path, &opts)
    }

    /// Opens an existing database to read only, for a tool that shows runs without owning
    /// them (the generic `saap studio --db`): nothing is created, migrated or written (a
    /// write answers an error). A database closed cleanly (no write-ahead log beside it) is
    /// opened as immutable: no lock, not even a shared-memory file, so its agent can open
    /// it meanwhile (reads may then miss what it writes, or fail on it: reopen to see new
    /// runs). One with a log (its agent was
    /// killed) is read with the log, and its agent cannot take it until this reader closes.
    /// One an agent holds is refused (`SAAP-S002`); one of an older schema too (open it
    /// once with the agent to update it).
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<SqliteBackend, StoreError> {
        let path = path.as_ref().to_path_buf();
        if !path.is_file() {
            return Err(StoreError::Open {
                path: path.display().to_string(),
                detail: "no such file".into(),
            });
        }
        let wal = PathBuf::from(format!("{}-wal", path.display()));
        let clean = std::fs::metadata(&wal).map_or(true, |m| m.len() == 0);
        let query = if clean {
            "mode=ro&immutable=1"
        } else {
            "mode=ro"
        };
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
            | rusqlite::OpenFlags::SQLITE_OPEN_URI
            | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(read_only_uri(&path, query), flags)
            .map_err(|e| classify(&path, &e))?;
        let check = || -> Result<Option<String>, rusqlite::Error> {
            conn.busy_timeout(Duration::from_millis(200))?;
            conn.pragma_update(None, "query_only", true)?;
            let tables: i64 = conn.query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'
                 AND name IN ('saap_meta', 'runs', 'journal', 'effects')",
                [],
                |r| r.get(0),
            )?;
            if tables < 4 {
                return Ok(Some("it lacks saap's tables".into()));
            }
            let v: Option<i64> = conn
                .query_row("SELECT value FROM saap_meta WHERE key='schema'", [], |r| {
                    r.get(0)
                })
                .optional()?;
            let parents: i64 = conn.query_row(
                "SELECT count(*) FROM pragma_table_info('runs')
                 WHERE name IN ('parent_run_id', 'parent_class')",
                [],
                |r| r.get(0),
            )?;
            Ok(match v {
                Some(SCHEMA_VERSION) if parents == 2 => None,
                Some(SCHEMA_VERSION) | Some(1) => Some(
                    "an earlier saap wrote it; open it once with the agent (`<agent> runs --db PATH`) to update it"
                        .into(),
                ),
                v => Some(format!("schema version {v:?}, this saap reads {SCHEMA_VERSION}")),
            })
        };
        match check().map_err(|e| classify(&path, &e))? {
            None => SqliteBackend::serve(conn, path, &SqliteOptions::default()),
            Some(detail) => Err(StoreError::NotReadable {
                path: path.display().to_string(),
                detail,
            }),
        }
    }

    /// The store thread over an opened connection.
    fn serve(
        conn: Connection,
        path: PathBuf,
        opts: &SqliteOptions,
    ) -> Result<SqliteBackend, StoreError> {
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
            created_ns INTEGER NOT NULL, outcome TEXT);
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
         INSERT OR IGNORE INTO saap_meta(key, value) VALUES ('schema', 2);
         COMMIT;",
    )?;
    conn.execute_batch(effects::SCHEMA)?;
    add_parent_columns(conn)?;
    let mut v: i64 = conn.query_row("SELECT value FROM saap_meta WHERE key='schema'", [], |r| {
        r.get(0)
    })?;
    if v == 1 {
        migrate_v1(conn)?;
        v = 2;
    }
    // Listing: a workflow's runs newest first, all, by status (also what `load_runs`
    // filters on) or by thread.
    conn.execute_batch(
        "CREATE INDEX IF NOT EXISTS runs_recent ON runs(workflow, created_ns);
         CREATE INDEX IF NOT EXISTS runs_status ON runs(workflow, ended, created_ns);
         CREATE INDEX IF NOT EXISTS runs_thread ON runs(workflow, thread_id, created_ns);",
    )?;
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

/// The columns that name a child run's parent (added beside the others: a database made
/// before gains them empty, and an older saap ignores them). Each is added if missing, all
/// in one immediate transaction: a process killed halfway leaves both or neither (an
/// earlier build added them one statement at a time, so a database it left with only the
/// first gains the second here), and two processes opening one database at once do not
/// both add them.
fn add_parent_columns(conn: &Connection) -> Result<(), rusqlite::Error> {
    let has = |name: &str| -> Result<bool, rusqlite::Error> {
        conn.query_row(
            "SELECT count(*) FROM pragma_table_info('runs') WHERE name = ?1",
            [name],
            |r| r.get::<_, i64>(0).map(|n| n > 0),
        )
    };
    if has("parent_run_id")? && has("parent_class")? {
        return Ok(());
    }
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)?;
    for column in ["parent_run_id", "parent_class"] {
        if !has(column)? {
            tx.execute_batch(&format!("ALTER TABLE runs ADD COLUMN {column} TEXT;"))?;
        }
    }
    tx.commit()
}

/// Version 1 → 2, in one transaction: the `outcome` column, filled in for runs that had
/// already ended from their last journal entries; the index on (workflow, ended) gives way
/// to the listing indexes made by `setup`.
fn migrate_v1(conn: &Connection) -> Result<(), rusqlite::Error> {
    let tx = conn.unchecked_transaction()?;
    tx.execute_batch(
        "ALTER TABLE runs ADD COLUMN outcome TEXT;
         DROP INDEX IF EXISTS runs_live;",
    )?;
    let ended: Vec<String> = tx
        .prepare("SELECT run_id FROM runs WHERE ended = 1")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let mut n = 0usize;
    for run_id in ended {
        let tail = journal_tail(&tx, &run_id, true)?;
        if let Some(t) = tail.termination {
            tx.execute(
                "UPDATE runs SET outcome = ?2 WHERE run_id = ?1",
                params![run_id, outcome_text(t)],
            )?;
            n += 1;
        }
    }
    tx.execute("UPDATE saap_meta SET value = 2 WHERE key = 'schema'", [])?;
    tx.commit()?;
    tracing::info!(
        ended_runs = n,
        "migrated the database from schema 1 to 2 (run outcomes, listing indexes)"
    );
    Ok(())
}

/// Whether a journal entry (JSON text) appends the cancellation event: parsed only for a run
/// that ended by an exception, once.
fn cancels(entry_json: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(entry_json)
        .is_ok_and(|e| super::appends_cancellation(&e))
}

fn outcome_text(t: Termination) -> &'static str {
    match t {
        Termination::Stop => "stop",
        Termination::Exception => "exception",
    }
}

/// What the end of a run's journal says: walks its entries from the last one back until it
/// knows the log length (the highest `seq`) and, with `want_end`, how the run ended. Most
/// runs answer from their last entry or two.
struct Tail {
    entries: u64,
    max_seq: Option<u64>,
    termination: Option<Termination>,
}

fn journal_tail(conn: &Connection, run_id: &str, want_end: bool) -> Result<Tail, rusqlite::Error> {
    let mut stmt = conn
        .prepare_cached("SELECT idx, records FROM journal WHERE run_id = ?1 ORDER BY idx DESC")?;
    let mut rows = stmt.query(params![run_id])?;
    let mut tail = Tail {
        entries: 0,
        max_seq: None,
        termination: None,
    };
    while let Some(row) = rows.next()? {
        let idx: i64 = row.get(0)?;
        if tail.entries == 0 {
            tail.entries = idx.max(0) as u64 + 1;
        }
        let text: String = row.get(1)?;
        // A row that does not parse says nothing here; `show` reports it when rebuilding.
        let s = RecordsSummary::of_json(&text).unwrap_or_default();
        if tail.max_seq.is_none() {
            tail.max_seq = s.max_seq;
        }
        if s.termination.is_some() {
            tail.termination = s.termination;
        }
        if tail.max_seq.is_some() && (!want_end || tail.termination.is_some()) {
            break;
        }
    }
    Ok(tail)
}

struct Worker {
    conn: Connection,
    ttl_ns: i64,
}

/// A reply to send once the transaction committed.
enum Done {
    Unit(Reply<()>, Result<(), StoreError>),
    Runs(Reply<Vec<StoredRun>>, Result<Vec<StoredRun>, StoreError>),
    Page(Reply<RunPage>, Result<RunPage, StoreError>),
    One(
        Reply<Option<StoredRun>>,
        Result<Option<StoredRun>, StoreError>,
    ),
    Value(
        Reply<Option<serde_json::Value>>,
        Result<Option<serde_json::Value>, StoreError>,
    ),
    Take(Reply<EffectTake>, Result<EffectTake, StoreError>),
    Effects(
        Reply<Vec<EffectRecord>>,
        Result<Vec<EffectRecord>, StoreError>,
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
                Cmd::ListRuns(w, q, r) => done.push(Done::Page(r, list_runs(&tx, &w, &q))),
                Cmd::ReadRun(w, id, r) => done.push(Done::One(r, read_run(&tx, &w, &id))),
                Cmd::CtxGet(s, k, r) => done.push(Done::Value(r, ctx_get(&tx, &s, &k))),
                Cmd::CtxSet(s, k, v, r) => {
                    done.push(Done::Unit(r, ctx_set(&tx, &s, &k, &v, self.ttl_ns)))
                }
                Cmd::CtxDelete(s, k, r) => done.push(Done::Unit(r, ctx_delete(&tx, &s, &k))),
                Cmd::EffectTake(at, key, r) => {
                    let v = effects::take(&tx, &at, &key).map_err(io).and_then(|v| v);
                    done.push(Done::Take(r, v))
                }
                Cmd::EffectRecord(run_id, rec, r) => done.push(Done::Unit(
                    r,
                    effects::record(&tx, &run_id, &rec).map_err(io),
                )),
                Cmd::Effects(run_id, r) => {
                    let v = effects::read(&tx, &run_id).map_err(io).and_then(|v| v);
                    done.push(Done::Effects(r, v))
                }
                Cmd::Halt => {}
            }
        }
        if let Err(e) = tx.commit() {
            let err = io(e);
            for d in done {
                match d {
                    Done::Unit(r, _) => drop(r.send(Err(err.clone()))),
                    Done::Runs(r, _) => drop(r.send(Err(err.clone()))),
                    Done::Page(r, _) => drop(r.send(Err(err.clone()))),
                    Done::One(r, _) => drop(r.send(Err(err.clone()))),
                    Done::Value(r, _) => drop(r.send(Err(err.clone()))),
                    Done::Take(r, _) => drop(r.send(Err(err.clone()))),
                    Done::Effects(r, _) => drop(r.send(Err(err.clone()))),
                }
            }
            return;
        }
        for d in done {
            // A receiver that went away (its task was cancelled) is not an error.
            match d {
                Done::Unit(r, v) => drop(r.send(v)),
                Done::Runs(r, v) => drop(r.send(v)),
                Done::Page(r, v) => drop(r.send(v)),
                Done::One(r, v) => drop(r.send(v)),
                Done::Value(r, v) => drop(r.send(v)),
                Done::Take(r, v) => drop(r.send(v)),
                Done::Effects(r, v) => drop(r.send(v)),
            }
        }
    }
}

fn fail(c: Cmd, err: StoreError) {
    match c {
        Cmd::Persist(_, r)
        | Cmd::CtxSet(_, _, _, r)
        | Cmd::CtxDelete(_, _, r)
        | Cmd::EffectRecord(_, _, r) => drop(r.send(Err(err))),
        Cmd::EffectTake(_, _, r) => drop(r.send(Err(err))),
        Cmd::Effects(_, r) => drop(r.send(Err(err))),
        Cmd::LoadRuns(_, _, r) => drop(r.send(Err(err))),
        Cmd::ListRuns(_, _, r) => drop(r.send(Err(err))),
        Cmd::ReadRun(_, _, r) => drop(r.send(Err(err))),
        Cmd::CtxGet(_, _, r) => drop(r.send(Err(err))),
        Cmd::Halt => {}
    }
}

fn persist(tx: &rusqlite::Transaction<'_>, b: &PersistBatch) -> Result<(), StoreError> {
    if let Some(m) = &b.new_run {
        tx.prepare_cached(
            "INSERT INTO runs(run_id, workflow, thread_id, fingerprint, ended, created_ns,
                              parent_run_id, parent_class)
             VALUES (?1, ?2, ?3, ?4, 0, ?5, ?6, ?7)",
        )
        .and_then(|mut s| {
            s.execute(params![
                &*m.run_id,
                m.workflow,
                &*m.thread_id,
                m.fingerprint as i64,
                now_ns(),
                m.parent.as_ref().map(|p| p.run_id.as_str()),
                m.parent.as_ref().map(|p| p.agent_class.as_str()),
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
        // How it ended, from this entry's records (read once per run, at its end); a run
        // ended by an exception is `cancelled` when this entry appends its cancellation
        // (stores written before kept such runs as `exception`: they list as failed).
        let outcome = RecordsSummary::of_json(&b.records_json)
            .ok()
            .and_then(|s| s.termination)
            .map(|t| match t {
                Termination::Exception if cancels(&b.entry_json) => "cancelled",
                t => outcome_text(t),
            });
        tx.prepare_cached("UPDATE runs SET ended = 1, outcome = ?2 WHERE run_id = ?1")
            .and_then(|mut s| s.execute(params![&*b.run_id, outcome]))
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
    // Two statements rather than `(?2 = 0 OR ended = 0)`, which SQLite cannot serve from
    // the (workflow, ended, created_ns) index: opening an engine reads the live runs only.
    let mut stmt = tx
        .prepare_cached(if live_only {
            "SELECT run_id, thread_id, fingerprint, ended, parent_run_id, parent_class FROM runs
             WHERE workflow = ?1 AND ended = 0 ORDER BY created_ns, run_id"
        } else {
            "SELECT run_id, thread_id, fingerprint, ended, parent_run_id, parent_class FROM runs
             WHERE workflow = ?1 ORDER BY created_ns, run_id"
        })
        .map_err(io)?;
    let metas = stmt
        .query_map(params![workflow], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
                parent(r, 4)?,
            ))
        })
        .map_err(io)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(io)?;
    let mut out = Vec::with_capacity(metas.len());
    for (run_id, thread_id, fp, ended, parent) in metas {
        out.push(load_journal(
            tx,
            workflow,
            run_id,
            thread_id,
            fp,
            ended != 0,
            parent,
        )?);
    }
    Ok(out)
}

/// The parent named by columns `at` (run id) and `at + 1` (agent) of a `runs` row.
fn parent(r: &rusqlite::Row<'_>, at: usize) -> Result<Option<RunParent>, rusqlite::Error> {
    Ok(
        match (
            r.get::<_, Option<String>>(at)?,
            r.get::<_, Option<String>>(at + 1)?,
        ) {
            (Some(run_id), Some(agent_class)) => Some(RunParent {
                run_id,
                agent_class,
            }),
            _ => None,
        },
    )
}

/// A run's journal and records, in order.
fn load_journal(
    tx: &rusqlite::Transaction<'_>,
    workflow: &str,
    run_id: String,
    thread_id: String,
    fingerprint: i64,
    ended: bool,
    parent: Option<RunParent>,
) -> Result<StoredRun, StoreError> {
    let mut jstmt = tx
        .prepare_cached("SELECT input, records FROM journal WHERE run_id = ?1 ORDER BY idx")
        .map_err(io)?;
    let rows = jstmt
        .query_map(params![&run_id], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })
        .map_err(io)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(io)?;
    let mut journal = Vec::with_capacity(rows.len());
    let mut records = Vec::new();
    let mut entry_records = Vec::with_capacity(rows.len());
    let mut damaged = None;
    for (i, (input, recs)) in rows.iter().enumerate() {
        let parsed = serde_json::from_str::<JournalEntry>(input).and_then(|entry| {
            serde_json::from_str::<Vec<serde_json::Value>>(recs).map(|r| (entry, r))
        });
        match parsed {
            Ok((entry, recs)) => {
                journal.push(entry);
                entry_records.push(u32::try_from(recs.len()).unwrap_or(u32::MAX));
                records.extend(recs);
            }
            Err(e) => {
                let detail = format!("journal entry {i}: {e}");
                tracing::error!(run_id, %detail, "a stored run cannot be read");
                damaged = Some(detail);
                journal.clear();
                records.clear();
                entry_records.clear();
                break;
            }
        }
    }
    Ok(StoredRun {
        meta: RunMeta {
            run_id: run_id.as_str().into(),
            thread_id: thread_id.into(),
            workflow: workflow.to_string(),
            fingerprint: fingerprint as u64,
            parent,
        },
        ended,
        journal,
        records,
        entry_records,
        damaged,
    })
}

fn read_run(
    tx: &rusqlite::Transaction<'_>,
    workflow: &str,
    run_id: &str,
) -> Result<Option<StoredRun>, StoreError> {
    let meta = tx
        .prepare_cached(
            "SELECT thread_id, fingerprint, ended, parent_run_id, parent_class FROM runs
             WHERE run_id = ?1 AND workflow = ?2",
        )
        .and_then(|mut s| {
            s.query_row(params![run_id, workflow], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    parent(r, 3)?,
                ))
            })
            .optional()
        })
        .map_err(io)?;
    match meta {
        None => Ok(None),
        Some((thread_id, fp, ended, parent)) => load_journal(
            tx,
            workflow,
            run_id.to_string(),
            thread_id,
            fp,
            ended != 0,
            parent,
        )
        .map(Some),
    }
}

/// A page of runs, newest first. The status filter and the order are served by the
/// `runs_status` / `runs_recent` indexes; each listed run's log length comes from the end of
/// its journal.
fn list_runs(
    tx: &rusqlite::Transaction<'_>,
    workflow: &str,
    q: &RunQuery,
) -> Result<RunPage, StoreError> {
    use rusqlite::types::Value;
    let limit = q.page_size();
    let mut sql = String::from(
        "SELECT run_id, thread_id, ended, outcome, created_ns FROM runs WHERE workflow = ?",
    );
    let mut args: Vec<Value> = vec![Value::Text(workflow.to_string())];
    sql.push_str(match q.status {
        None => "",
        Some(StatusFilter::Live) => " AND ended = 0",
        Some(StatusFilter::Ended) => " AND ended = 1",
        Some(StatusFilter::Stopped) => " AND ended = 1 AND outcome = 'stop'",
        Some(StatusFilter::Failed) => " AND ended = 1 AND outcome = 'exception'",
        Some(StatusFilter::Cancelled) => " AND ended = 1 AND outcome = 'cancelled'",
    });
    // Prefix match as a range on the primary key: ids from `p` up to `p` followed by the
    // largest code point.
    if let Some(prefix) = q.prefix() {
        args.push(Value::Text(prefix.to_string()));
        let n = args.len();
        sql.push_str(&format!(
            " AND run_id >= ?{n} AND run_id < ?{n} || char(1114111)"
        ));
    }
    if let Some(thread) = q.thread() {
        args.push(Value::Text(thread.to_string()));
        sql.push_str(&format!(" AND thread_id = ?{}", args.len()));
    }
    if let Some(from) = q.started_from_ns {
        args.push(Value::Integer(from));
        sql.push_str(&format!(" AND created_ns >= ?{}", args.len()));
    }
    if let Some(before) = q.started_before_ns {
        args.push(Value::Integer(before));
        sql.push_str(&format!(" AND created_ns < ?{}", args.len()));
    }
    // The cursor: rows after the given run in listing order (an unknown id matches none).
    if let Some(after) = &q.after {
        args.push(Value::Text(after.chars().take(128).collect()));
        sql.push_str(&format!(
            " AND (created_ns, run_id) < (SELECT created_ns, run_id FROM runs WHERE run_id = ?{})",
            args.len()
        ));
    }
    let fetch = (limit as i64).saturating_add(1);
    let offset = q.offset.min(i64::MAX as usize) as i64;
    args.push(Value::Integer(fetch));
    args.push(Value::Integer(offset));
    sql.push_str(&format!(
        " ORDER BY created_ns DESC, run_id DESC LIMIT ?{} OFFSET ?{}",
        args.len() - 1,
        args.len()
    ));
    let mut stmt = tx.prepare_cached(&sql).map_err(io)?;
    let rows = stmt
        .query_map(rusqlite::params_from_iter(args), |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, Option<String>>(3)?,
                r.get::<_, i64>(4)?,
            ))
        })
        .map_err(io)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(io)?;
    let more = rows.len() > limit;
    let mut runs = Vec::with_capacity(rows.len().min(limit));
    for (run_id, thread_id, ended, outcome, created_ns) in rows.into_iter().take(limit) {
        let tail = journal_tail(tx, &run_id, false).map_err(io)?;
        let termination = match outcome.as_deref() {
            Some("stop") => Some(Termination::Stop),
            Some("exception" | "cancelled") => Some(Termination::Exception),
            _ => None,
        };
        runs.push(RunSummary {
            run_id,
            thread_id,
            ended: ended != 0,
            termination,
            cancelled: outcome.as_deref() == Some("cancelled"),
            started_ns: Some(created_ns),
            events: tail.max_seq.map_or(0, |m| m + 1),
            journal_entries: tail.entries,
        });
    }
    Ok(RunPage { runs, more })
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
    fn list_runs(&self, workflow: &str, query: &RunQuery) -> Pending<RunPage> {
        let (w, q) = (workflow.to_string(), query.clone());
        self.send(|r| Cmd::ListRuns(w, q, r))
    }
    fn read_run(&self, workflow: &str, run_id: &str) -> Pending<Option<StoredRun>> {
        let (w, id) = (workflow.to_string(), run_id.to_string());
        self.send(|r| Cmd::ReadRun(w, id, r))
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
    fn effect_take(&self, at: &EffectAt, key: &str) -> Pending<EffectTake> {
        let (at, key) = (at.clone(), key.to_string());
        self.send(|r| Cmd::EffectTake(at, key, r))
    }
    fn effect_record(&self, run_id: &str, record: EffectRecord) -> Pending<()> {
        let run_id = run_id.to_string();
        self.send(|r| Cmd::EffectRecord(run_id, Box::new(record), r))
    }
    fn effects(&self, run_id: &str) -> Pending<Vec<EffectRecord>> {
        let run_id = run_id.to_string();
        self.send(|r| Cmd::Effects(run_id, r))
    }
    fn halt(&self) {
        self.halted.store(true, Ordering::Release);
        self.stop(Some(Cmd::Halt));
    }
}
