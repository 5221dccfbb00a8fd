//! Stored-run reads that scale: paged listing (newest first, status filters, id prefix), one
//! run by id, `Engine::open` resuming live runs only with ended ones read on demand, and
//! the migration of a schema-1 SQLite file.
#![allow(clippy::unwrap_used)]

mod common;

use common::WAIT;
use saap::backend::{Backend, RunQuery, StatusFilter, Termination};
use saap::{
    Engine, EngineOptions, Required, SqliteBackend, Step, StepCtx, StepError, UserMessageEvent,
    Workflow,
};
use std::sync::Arc;

event!(Done, "StopEvent");
event!(Answer, "ControlEvent");

/// "wait" leaves the run live until an `Answer` arrives; "fail" fails the step (the run ends
/// with an exception); anything else stops at once.
fn wf() -> Workflow {
    Workflow::builder("Reads")
        .step(Step::new(
            "first",
            |q: Required<UserMessageEvent>, _: StepCtx| async move {
                match q.message.as_str() {
                    "wait" => Ok(None),
                    "fail" => Err(StepError::new("asked to fail")),
                    _ => Ok(Some(Done { n: 1 })),
                }
            },
        ))
        .step(Step::new(
            "answered",
            |a: Required<Answer>, _: StepCtx| async move { Ok::<_, StepError>(Done { n: a.n }) },
        ))
        .build()
        .unwrap()
}

async fn open(path: &std::path::Path) -> (Engine, Arc<SqliteBackend>) {
    let backend = Arc::new(SqliteBackend::open(path).unwrap());
    let (engine, rec) = Engine::open(wf(), backend.clone(), EngineOptions::default())
        .await
        .unwrap();
    assert!(rec.failed.is_empty(), "{:?}", rec.failed);
    (engine, backend)
}

/// Starts runs with these messages, one after the other, and waits until each is quiet
/// (ended, or live and idle). Returns their ids in start order.
async fn start(engine: &Engine, messages: &[&str]) -> Vec<String> {
    let runner = saap::testing::TestRunner::new(engine.clone());
    let mut ids = Vec::new();
    for m in messages {
        let run = runner.start(UserMessageEvent::new(*m)).await.unwrap();
        if *m == "wait" {
            run.wait_idle(WAIT).await.unwrap();
        } else {
            engine.wait_for_end(run.run_id()).await.unwrap();
        }
        ids.push(run.run_id().to_string());
    }
    ids
}

fn query(status: Option<StatusFilter>, offset: usize, limit: usize) -> RunQuery {
    RunQuery {
        status,
        offset,
        limit,
        ..RunQuery::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_listing_is_newest_first_paged_filtered_and_counts_events() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _backend) = open(&dir.path().join("reads.db")).await;
    listing(engine).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_listing_is_newest_first_paged_filtered_and_counts_events() {
    let (engine, _server) = common::nats_engine(wf());
    listing(engine.clone()).await;
    // One run by id from the journal stream; an id that is not a subject token reads nothing.
    let backend = engine.backend();
    let page = backend
        .list_runs("Reads", &query(None, 0, 1))
        .wait()
        .await
        .unwrap();
    let id = &page.runs[0].run_id;
    let run = backend.read_run("Reads", id).wait().await.unwrap().unwrap();
    assert_eq!(&*run.meta.run_id, id.as_str());
    for bad in ["*", ">", "a.b", "", "ffffffffffffffffffffffff"] {
        assert!(
            backend
                .read_run("Reads", bad)
                .wait()
                .await
                .unwrap()
                .is_none(),
            "{bad}"
        );
    }
    assert!(
        backend
            .read_run("Other", id)
            .wait()
            .await
            .unwrap()
            .is_none()
    );
}

async fn listing(engine: Engine) {
    let backend = engine.backend().clone();
    let ids = start(&engine, &["a", "wait", "fail", "b", "wait"]).await;

    let all = backend
        .list_runs("Reads", &query(None, 0, 50))
        .wait()
        .await
        .unwrap();
    let listed: Vec<&str> = all.runs.iter().map(|r| r.run_id.as_str()).collect();
    let newest_first: Vec<&str> = ids.iter().rev().map(String::as_str).collect();
    assert_eq!(listed, newest_first);
    assert!(!all.more);
    // Each summary agrees with the run rebuilt in memory.
    for r in &all.runs {
        let snap = engine.snapshot(&r.run_id).unwrap();
        assert_eq!(r.events, snap.run.log().len() as u64, "{}", r.run_id);
        assert_eq!(r.ended, snap.is_ended(), "{}", r.run_id);
        assert_eq!(r.termination.is_some(), snap.is_ended());
        assert!(r.started_ns.is_some());
        assert!(r.journal_entries >= 1);
    }

    // By thread: each of these runs has its own; the filter keeps one, with a status too.
    let one = &all.runs[2];
    let by_thread = |status, thread: &str| RunQuery {
        thread: Some(thread.to_string()),
        ..query(status, 0, 50)
    };
    let p = backend
        .list_runs("Reads", &by_thread(None, &one.thread_id))
        .wait()
        .await
        .unwrap();
    assert_eq!(p.runs, vec![one.clone()]);
    let p = backend
        .list_runs(
            "Reads",
            &by_thread(Some(StatusFilter::Live), &one.thread_id),
        )
        .wait()
        .await
        .unwrap();
    assert_eq!(p.runs.len(), usize::from(!one.ended));
    let p = backend
        .list_runs("Reads", &by_thread(None, "no-such-thread"))
        .wait()
        .await
        .unwrap();
    assert!(p.runs.is_empty() && !p.more);
    // By start time (a store may know it to the second only: the bounds keep 10 s away).
    let earliest = all.runs.iter().filter_map(|r| r.started_ns).min().unwrap();
    let latest = all.runs.iter().filter_map(|r| r.started_ns).max().unwrap();
    let ten_s = 10_000_000_000;
    let window = |from: Option<i64>, before: Option<i64>| RunQuery {
        started_from_ns: from,
        started_before_ns: before,
        ..query(None, 0, 50)
    };
    for (from, before, n) in [
        (Some(earliest - ten_s), None, 5),
        (None, Some(latest + ten_s), 5),
        (Some(earliest - ten_s), Some(latest + ten_s), 5),
        (None, Some(earliest - ten_s), 0),
        (Some(latest + ten_s), None, 0),
    ] {
        let p = backend
            .list_runs("Reads", &window(from, before))
            .wait()
            .await
            .unwrap();
        assert_eq!(p.runs.len(), n, "from {from:?} before {before:?}");
    }

    let first = backend
        .list_runs("Reads", &query(None, 0, 2))
        .wait()
        .await
        .unwrap();
    let second = backend
        .list_runs("Reads", &query(None, 2, 2))
        .wait()
        .await
        .unwrap();
    let last = backend
        .list_runs("Reads", &query(None, 4, 2))
        .wait()
        .await
        .unwrap();
    assert!(first.more && second.more && !last.more);
    let paged: Vec<&str> = [&first, &second, &last]
        .iter()
        .flat_map(|p| p.runs.iter().map(|r| r.run_id.as_str()))
        .collect();
    assert_eq!(paged, newest_first);
    // The same pages by cursor: each starts after the last run of the previous one.
    let mut by_cursor: Vec<String> = Vec::new();
    let mut after = None;
    loop {
        let q = RunQuery {
            after: after.clone(),
            ..query(None, 0, 2)
        };
        let p = backend.list_runs("Reads", &q).wait().await.unwrap();
        by_cursor.extend(p.runs.iter().map(|r| r.run_id.clone()));
        if !p.more {
            break;
        }
        after = p.runs.last().map(|r| r.run_id.clone());
    }
    assert_eq!(by_cursor, newest_first);
    let live_after = RunQuery {
        after: Some(ids[4].clone()),
        ..query(Some(StatusFilter::Live), 0, 50)
    };
    let p = backend
        .list_runs("Reads", &live_after)
        .wait()
        .await
        .unwrap();
    assert_eq!(p.runs.len(), 1);
    assert_eq!(p.runs[0].run_id, ids[1]);
    let unknown = RunQuery {
        after: Some("ffffffffffffffffffffffff".into()),
        ..query(None, 0, 50)
    };
    assert!(
        backend
            .list_runs("Reads", &unknown)
            .wait()
            .await
            .unwrap()
            .runs
            .is_empty()
    );

    let ids_of = |status| {
        let b: Arc<dyn Backend> = backend.clone();
        async move {
            b.list_runs("Reads", &query(Some(status), 0, 50))
                .wait()
                .await
                .unwrap()
                .runs
                .into_iter()
                .map(|r| r.run_id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        ids_of(StatusFilter::Live).await,
        vec![ids[4].clone(), ids[1].clone()]
    );
    assert_eq!(
        ids_of(StatusFilter::Ended).await,
        vec![ids[3].clone(), ids[2].clone(), ids[0].clone()]
    );
    assert_eq!(ids_of(StatusFilter::Failed).await, vec![ids[2].clone()]);
    assert_eq!(
        ids_of(StatusFilter::Stopped).await,
        vec![ids[3].clone(), ids[0].clone()]
    );
    let failed = all.runs.iter().find(|r| r.run_id == ids[2]).unwrap();
    assert_eq!(failed.termination, Some(Termination::Exception));

    // Another workflow's runs are not listed; an id prefix narrows the list.
    let other = backend
        .list_runs("Other", &query(None, 0, 50))
        .wait()
        .await
        .unwrap();
    assert!(other.runs.is_empty());
    let by_prefix = RunQuery {
        id_prefix: Some(ids[3].clone()),
        ..query(None, 0, 50)
    };
    let found = backend.list_runs("Reads", &by_prefix).wait().await.unwrap();
    assert_eq!(found.runs.len(), 1);
    assert_eq!(found.runs[0].run_id, ids[3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_run_is_read_by_id_and_an_unknown_id_reads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, backend) = open(&dir.path().join("one.db")).await;
    let ids = start(&engine, &["a", "wait"]).await;
    let run = backend
        .read_run("Reads", &ids[0])
        .wait()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&*run.meta.run_id, ids[0]);
    assert!(run.ended);
    let live = backend
        .read_run("Reads", &ids[1])
        .wait()
        .await
        .unwrap()
        .unwrap();
    assert!(!live.ended);
    assert!(
        backend
            .read_run("Reads", "ffffffffffffffffffffffff")
            .wait()
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        backend
            .read_run("Other", &ids[0])
            .wait()
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_resumes_live_runs_only_and_reads_ended_ones_on_demand() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reopen.db");
    let ids = {
        let (engine, _) = open(&path).await;
        let ids = start(&engine, &["a", "wait", "fail"]).await;
        engine.halt();
        ids
    };
    let (engine, _) = open(&path).await;
    assert_eq!(
        engine.run_ids(),
        vec![ids[1].clone()],
        "only the live run is loaded"
    );
    let stopped = engine.stored_snapshot(&ids[0]).await.unwrap().unwrap();
    assert!(stopped.has_stop());
    let failed = engine.stored_snapshot(&ids[2]).await.unwrap().unwrap();
    assert!(failed.has_exception());
    assert!(
        engine
            .stored_snapshot("ffffffffffffffffffffffff")
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        engine.run_ids(),
        vec![ids[1].clone()],
        "reading does not load"
    );

    // The live run continues.
    engine.send(&ids[1], Answer { n: 7 }).await.unwrap();
    engine.wait_for_end(&ids[1]).await.unwrap();
    assert_eq!(
        engine.snapshot(&ids[1]).unwrap().events_of::<Done>(),
        vec![Done { n: 7 }]
    );

    // An event for an ended run that was not loaded is kept as after-stop evidence.
    let before = stopped.run.log().len();
    engine.send(&ids[0], Answer { n: 1 }).await.unwrap();
    let after = engine.stored_snapshot(&ids[0]).await.unwrap().unwrap();
    assert_eq!(after.run.log().len(), before + 1);
    assert!(
        after
            .run
            .records()
            .iter()
            .any(|r| matches!(r, saap_dispatch::Record::EventAfterStop { .. })),
        "{}",
        after.timeline()
    );
}

/// The schema-1 tables, as the first release created them.
const SCHEMA_1: &str = "
    CREATE TABLE saap_meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);
    CREATE TABLE runs(
       run_id TEXT PRIMARY KEY, workflow TEXT NOT NULL, thread_id TEXT NOT NULL,
       fingerprint INTEGER NOT NULL, ended INTEGER NOT NULL DEFAULT 0,
       created_ns INTEGER NOT NULL);
    CREATE INDEX runs_live ON runs(workflow, ended);
    CREATE TABLE journal(
       run_id TEXT NOT NULL, idx INTEGER NOT NULL, input TEXT NOT NULL,
       records TEXT NOT NULL);
    CREATE UNIQUE INDEX journal_run ON journal(run_id, idx);
    CREATE TABLE run_context(
       run_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
       PRIMARY KEY(run_id, key)) WITHOUT ROWID;
    CREATE TABLE thread_context(
       thread_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
       expires_ns INTEGER NOT NULL, PRIMARY KEY(thread_id, key)) WITHOUT ROWID;
    INSERT INTO saap_meta(key, value) VALUES ('schema', 1);";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_1_database_is_migrated_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let made = dir.path().join("made.db");
    let old = dir.path().join("old.db");
    // Real runs, written by this version...
    let ids = {
        let (engine, _) = open(&made).await;
        let ids = start(&engine, &["a", "fail", "wait"]).await;
        engine.halt();
        ids
    };
    // ...copied into a file with the schema-1 tables (no `outcome` column, version 1).
    {
        let conn = rusqlite::Connection::open(&old).unwrap();
        conn.execute_batch(SCHEMA_1).unwrap();
        conn.execute("ATTACH DATABASE ?1 AS made", [made.to_str().unwrap()])
            .unwrap();
        conn.execute_batch(
            "INSERT INTO runs SELECT run_id, workflow, thread_id, fingerprint, ended, created_ns FROM made.runs;
             INSERT INTO journal SELECT run_id, idx, input, records FROM made.journal;
             DETACH DATABASE made;",
        )
        .unwrap();
    }
    let (engine, backend) = open(&old).await;
    let page = backend
        .list_runs("Reads", &query(None, 0, 10))
        .wait()
        .await
        .unwrap();
    let got: Vec<(String, bool, Option<Termination>)> = page
        .runs
        .iter()
        .map(|r| (r.run_id.clone(), r.ended, r.termination))
        .collect();
    assert_eq!(
        got,
        vec![
            (ids[2].clone(), false, None),
            (ids[1].clone(), true, Some(Termination::Exception)),
            (ids[0].clone(), true, Some(Termination::Stop)),
        ],
        "outcomes of runs ended before the migration are filled in"
    );
    assert_eq!(engine.run_ids(), vec![ids[2].clone()]);
    engine.send(&ids[2], Answer { n: 2 }).await.unwrap();
    engine.wait_for_end(&ids[2]).await.unwrap();
    engine.halt();
    drop(engine);
    drop(backend);
    let conn = rusqlite::Connection::open(&old).unwrap();
    let version: i64 = conn
        .query_row(
            "SELECT value FROM saap_meta WHERE key = 'schema'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(version, 2);
    let outcome: Option<String> = conn
        .query_row(
            "SELECT outcome FROM runs WHERE run_id = ?1",
            [&ids[2]],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        outcome.as_deref(),
        Some("stop"),
        "a run ended after the migration"
    );
}

/// A build before this one added the parent columns one statement at a time: a process
/// killed between the two left a database with only `parent_run_id`, which every later open
/// refused ("no such column: parent_class", found by `tests/timer_chaos.rs`). Opening it now
/// adds the missing column, and its runs read and resume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_left_with_half_its_parent_columns_is_repaired_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("half.db");
    let ids = {
        let (engine, _) = open(&path).await;
        let ids = start(&engine, &["a", "wait"]).await;
        engine.halt();
        ids
    };
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("ALTER TABLE runs DROP COLUMN parent_class;")
            .unwrap();
    }
    let (engine, backend) = open(&path).await;
    let page = backend
        .list_runs("Reads", &query(None, 0, 10))
        .wait()
        .await
        .unwrap();
    assert_eq!(page.runs.len(), 2);
    assert_eq!(engine.run_ids(), vec![ids[1].clone()]);
    engine.send(&ids[1], Answer { n: 2 }).await.unwrap();
    engine.wait_for_end(&ids[1]).await.unwrap();
    engine.halt();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_opened_read_only_reads_writes_nothing_and_is_not_locked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ro.db");
    let ids = {
        let (engine, backend) = open(&path).await;
        let ids = start(&engine, &["a", "wait"]).await;
        engine.halt();
        drop(backend);
        ids
    };
    let files = |d: &std::path::Path| {
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                (p.display().to_string(), std::fs::read(&p).unwrap())
            })
            .collect();
        v.sort();
        v
    };
    let before = files(dir.path());
    let ro = SqliteBackend::open_read_only(&path).unwrap();
    let page = ro
        .list_runs("Reads", &query(None, 0, 10))
        .wait()
        .await
        .unwrap();
    assert_eq!(page.runs.len(), 2);
    let run = ro.read_run("Reads", &ids[1]).wait().await.unwrap().unwrap();
    assert!(!run.ended);
    let write = ro
        .ctx_set(
            saap::backend::Scope::Thread("t".into()),
            "k",
            serde_json::json!(1),
        )
        .wait()
        .await;
    assert!(write.is_err(), "a read-only store refuses writes");
    assert_eq!(
        files(dir.path()),
        before,
        "nothing written, not even a lock file"
    );
    // An engine takes the file (exclusively) while the reader is open.
    let (engine, _) = open(&path).await;
    engine.halt();
    drop(ro);

    let fresh = tempfile::tempdir().unwrap();
    let missing = SqliteBackend::open_read_only(fresh.path().join("none.db"))
        .err()
        .unwrap();
    assert_eq!(missing.code(), "SAAP-S003", "{missing}");
    assert!(
        std::fs::read_dir(fresh.path()).unwrap().next().is_none(),
        "nothing created"
    );
    let other = fresh.path().join("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t(x);")
        .unwrap();
    let refused = SqliteBackend::open_read_only(&other).err().unwrap();
    assert_eq!(refused.code(), "SAAP-S008", "{refused}");
}
