//! How long one page takes on a stream and a store of 1,000,000 stored messages (issue 22: ≤ 50
//! ms). Not a test: it prints medians and 95th percentiles, nothing is asserted.
//!
//! `cargo bench -p saap-inspect --bench page` (release; needs a nats-server, found like the
//! tests find it: `bash scripts/nats-server-install`). `PAGE_BENCH_MESSAGES` changes the size
//! (default 1,000,000); `PAGE_BENCH_REPS` the repetitions per case (default 20);
//! `PAGE_BENCH_ONLY=store` or `nats` runs one half.
//!
//! NATS: a real nats-server on loopback (default syncing), one agent class stream holding
//! Python-format events of 10,000 runs × 100 events, published pipelined. Store: a SQLite file
//! with the store's schema 2 and as many journal rows (100 per run), written directly.
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use saap_inspect::{NatsInspector, RunsQuery, StoreInspector, ViewQuery};
use saap_nats::NatsOptions;
use saap_nats::testing::{NatsServer, ServerOptions, connect};
use std::time::{Duration, Instant};

const PER_RUN: u64 = 100;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn run_id(r: u64) -> String {
    format!("6650{r:020x}")
}

fn event_json(i: u64) -> String {
    let r = i / PER_RUN;
    let k = i % PER_RUN;
    let (name, parents) = match k {
        0 => (
            "UserMessageEvent",
            r#"["UserMessageEvent", "StartEvent", "ControlAndDisplayEvent", "ControlEvent", "DisplayEvent"]"#,
        ),
        99 => (
            "AnswerStopEvent",
            r#"["AnswerStopEvent", "StopEvent", "ControlAndDisplayEvent", "ControlEvent", "DisplayEvent"]"#,
        ),
        _ => (
            "RetrievedContext",
            r#"["RetrievedContext", "ControlEvent"]"#,
        ),
    };
    format!(
        r#"{{"event_id": "{:024x}", "created_at": {}, "docs": ["doc-{k}.md", "notes.md"], "text": "retrieved passage number {k} of run {r}", "_event_name": "{name}", "_parent_event_names": {parents}}}"#,
        i + 1,
        1_767_261_600_000_000_000u64 + i * 1000
    )
}

fn name_of(i: u64) -> &'static str {
    match i % PER_RUN {
        0 => "UserMessageEvent",
        99 => "AnswerStopEvent",
        _ => "RetrievedContext",
    }
}

fn stats(label: &str, mut t: Vec<Duration>) {
    t.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let p95 = t[((t.len() * 95).div_ceil(100))
        .saturating_sub(1)
        .min(t.len() - 1)];
    println!(
        "| {label} | {:.2} | {:.2} | {:.2} |",
        ms(t[t.len() / 2]),
        ms(p95),
        ms(t[t.len() - 1])
    );
}

async fn time_async<F, Fut, T>(reps: u64, mut f: F) -> Vec<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let mut out = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        std::hint::black_box(f().await);
        out.push(t.elapsed());
    }
    out
}

fn time_sync<T>(reps: u64, mut f: impl FnMut() -> T) -> Vec<Duration> {
    let mut out = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        std::hint::black_box(f());
        out.push(t.elapsed());
    }
    out
}

async fn nats_bench(n: u64, reps: u64) {
    let server = NatsServer::start_with(ServerOptions {
        default_sync: true,
        ..Default::default()
    });
    let nats = connect(&server).await;
    nats.ensure_stream("Bench").await.unwrap();
    let js = nats.jetstream().clone();
    let t = Instant::now();
    let mut acks = Vec::with_capacity(4096);
    for i in 0..n {
        let subject = format!(
            "agent.Bench.a1.665000000000000000000100.665000000000000000000200.{}.control_event.{}.{:024x}",
            run_id(i / PER_RUN),
            name_of(i),
            i + 1
        );
        acks.push(
            js.publish(subject, Bytes::from(event_json(i)))
                .await
                .unwrap(),
        );
        if acks.len() == 4096 {
            for a in acks.drain(..) {
                a.await.unwrap();
            }
        }
    }
    for a in acks.drain(..) {
        a.await.unwrap();
    }
    eprintln!(
        "published {n} messages in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let mut opts = NatsOptions::new(server.url());
    opts.request_timeout = Duration::from_secs(30);
    let ins = NatsInspector::connect(&opts).await.unwrap();
    let stream = "agent_Bench_stream";
    let mid = n / 2;
    let mid_run = run_id((n / PER_RUN) / 2);
    println!("\nNATS, {n} messages in `{stream}` (page = 50 messages, decoded):\n");
    println!("| case | median ms | p95 ms | max ms |\n|---|---|---|---|");
    let q = |f: fn(&mut ViewQuery)| {
        let mut v = ViewQuery {
            limit: 50,
            ..Default::default()
        };
        f(&mut v);
        v
    };
    let first = q(|_| {});
    stats(
        "view, first page",
        time_async(reps, || ins.view(stream, &first)).await,
    );
    let middle = ViewQuery {
        from_seq: Some(mid),
        limit: 50,
        ..Default::default()
    };
    stats(
        "view --from N/2",
        time_async(reps, || ins.view(stream, &middle)).await,
    );
    let last = ViewQuery {
        last: Some(50),
        limit: 50,
        ..Default::default()
    };
    stats(
        "view --last 50",
        time_async(reps, || ins.view(stream, &last)).await,
    );
    let by_run = ViewQuery {
        run: Some(mid_run.clone()),
        limit: 50,
        ..Default::default()
    };
    let p = ins.view(stream, &by_run).await.unwrap();
    assert_eq!(p.messages.len(), 50);
    stats(
        "view --run (a run in the middle)",
        time_async(reps, || ins.view(stream, &by_run)).await,
    );
    let by_event = ViewQuery {
        event_name: Some("UserMessageEvent".into()),
        from_seq: Some(mid),
        limit: 50,
        ..Default::default()
    };
    stats(
        "view --event (1 in 100) --from N/2",
        time_async(reps, || ins.view(stream, &by_event)).await,
    );
    stats("get SEQ", time_async(reps, || ins.get(stream, mid)).await);
    let runs = RunsQuery::default();
    stats(
        "runs (scan of the last 10,000)",
        time_async(reps.min(5), || ins.runs(stream, &runs)).await,
    );
    stats(
        "run RUN (100 events, page of 50)",
        time_async(reps, || ins.run(&mid_run, Some(stream), None, 50)).await,
    );
}

fn store_bench(n: u64, reps: u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.db");
    {
        let conn = rusqlite_conn(&path);
        let t = Instant::now();
        write_store(&conn, n);
        eprintln!(
            "wrote {n} journal rows in {:.1} s",
            t.elapsed().as_secs_f64()
        );
    }
    let ins = StoreInspector::open(&path).unwrap();
    let mid = n / 2;
    let mid_run = run_id((n / PER_RUN) / 2);
    println!("\nStore, {n} journal rows of workflow `Bench` (page = 50 entries, decoded):\n");
    println!("| case | median ms | p95 ms | max ms |\n|---|---|---|---|");
    let first = ViewQuery {
        limit: 50,
        ..Default::default()
    };
    stats(
        "view, first page",
        time_sync(reps, || ins.view("Bench", &first).unwrap()),
    );
    let middle = ViewQuery {
        from_seq: Some(mid),
        limit: 50,
        ..Default::default()
    };
    stats(
        "view --from N/2",
        time_sync(reps, || ins.view("Bench", &middle).unwrap()),
    );
    let last = ViewQuery {
        last: Some(50),
        limit: 50,
        ..Default::default()
    };
    stats(
        "view --last 50",
        time_sync(reps, || ins.view("Bench", &last).unwrap()),
    );
    let by_run = ViewQuery {
        run: Some(mid_run.clone()),
        limit: 50,
        ..Default::default()
    };
    stats(
        "view --run (a run in the middle)",
        time_sync(reps, || ins.view("Bench", &by_run).unwrap()),
    );
    let by_event = ViewQuery {
        event_name: Some("UserMessageEvent".into()),
        from_seq: Some(mid),
        limit: 50,
        ..Default::default()
    };
    stats(
        "view --event (1 in 100) --from N/2",
        time_sync(reps, || ins.view("Bench", &by_event).unwrap()),
    );
    stats(
        "get SEQ",
        time_sync(reps, || ins.get("Bench", mid).unwrap()),
    );
    let runs = RunsQuery::default();
    stats(
        "runs (newest 20)",
        time_sync(reps, || ins.runs(Some("Bench"), &runs).unwrap()),
    );
    stats(
        "run RUN (100 entries, page of 50)",
        time_sync(reps, || ins.run(&mid_run, None, 50).unwrap()),
    );
}

fn rusqlite_conn(path: &std::path::Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).unwrap();
    // The schema of crates/saap/src/backend/sqlite.rs, version 2.
    conn.execute_batch(
        "PRAGMA journal_mode=WAL;
         CREATE TABLE saap_meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);
         CREATE TABLE runs(run_id TEXT PRIMARY KEY, workflow TEXT NOT NULL, thread_id TEXT NOT NULL,
            fingerprint INTEGER NOT NULL, ended INTEGER NOT NULL DEFAULT 0, created_ns INTEGER NOT NULL, outcome TEXT);
         CREATE TABLE journal(run_id TEXT NOT NULL, idx INTEGER NOT NULL, input TEXT NOT NULL, records TEXT NOT NULL);
         CREATE UNIQUE INDEX journal_run ON journal(run_id, idx);
         CREATE TABLE run_context(run_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY(run_id, key)) WITHOUT ROWID;
         CREATE TABLE thread_context(thread_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, expires_ns INTEGER NOT NULL, PRIMARY KEY(thread_id, key)) WITHOUT ROWID;
         CREATE INDEX runs_recent ON runs(workflow, created_ns);
         CREATE INDEX runs_status ON runs(workflow, ended, created_ns);
         INSERT INTO saap_meta VALUES ('schema', 2);",
    )
    .unwrap();
    conn
}

fn write_store(conn: &rusqlite::Connection, n: u64) {
    conn.execute_batch("BEGIN").unwrap();
    {
        let mut run = conn
            .prepare("INSERT INTO runs VALUES (?1, 'Bench', 't1', 1, 1, ?2, 'stop')")
            .unwrap();
        let mut row = conn
            .prepare("INSERT INTO journal(run_id, idx, input, records) VALUES (?1, ?2, ?3, ?4)")
            .unwrap();
        for i in 0..n {
            let r = i / PER_RUN;
            let k = i % PER_RUN;
            if k == 0 {
                run.execute(rusqlite::params![run_id(r), i as i64]).unwrap();
            }
            let kind = match k {
                0 => 7,
                99 => 11,
                _ => 1,
            };
            let input = format!(
                r#"{{"i":{{"in":"append","event":{{"id":"{:024x}","n":"{}","k":{kind},"p":{{"created_at":{},"docs":["doc-{k}.md"],"text":"retrieved passage number {k}"}}}}}}}}"#,
                i + 1,
                name_of(i),
                1_767_261_600_000_000_000u64 + i * 1000
            );
            let records = format!(
                r#"[{{"record":"event_appended","seq":{k},"origin":{{"from":"outside"}}}}]"#
            );
            row.execute(rusqlite::params![run_id(r), k as i64, input, records])
                .unwrap();
        }
    }
    conn.execute_batch("COMMIT").unwrap();
}

fn main() {
    let n = env("PAGE_BENCH_MESSAGES", 1_000_000);
    let reps = env("PAGE_BENCH_REPS", 20);
    let only = std::env::var("PAGE_BENCH_ONLY").unwrap_or_default();
    if only != "nats" {
        store_bench(n, reps);
    }
    if only == "store" {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(nats_bench(n, reps));
}
