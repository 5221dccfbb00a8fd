//! The studio's speed (issue 23): the run list's first page on a store of 100,000 runs
//! (target ≤ 100 ms) and the page of a run of 10,000 events (target ≤ 200 ms), each timed as
//! a browser gets it — one HTTP request to a real `studio` command (`saap::main_with`, in
//! this process) over loopback, the whole response read.
//!
//! `cargo bench -p saap --bench studio`; `SAAP_BENCH_STUDIO_RUNS=N` sets the store's size
//! (default 100,000), `SAAP_BENCH_STUDIO_EVENTS=N` the long run's events (default 10,000).
//! The store is filled first (its time is printed). Prints one JSON line per page: median and
//! p95 of 15 requests in milliseconds, and the response's size.
#![allow(clippy::unwrap_used)]

use saap::{Engine, EngineOptions, SqliteBackend, UserMessageEvent, Workflow};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[macro_use]
mod common;

/// A message "N" starts a loop of N ticks before the stop; any other message stops at once.
fn workflow() -> Workflow {
    common::tick_loop("StudioBench")
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One GET over loopback, the whole response read: (status, bytes).
fn get(addr: &str, path: &str) -> (u16, usize) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let status = std::str::from_utf8(&raw[9..12]).unwrap().parse().unwrap();
    (status, raw.len())
}

fn timed(addr: &str, name: &str, path: &str, target_ms: Option<f64>) {
    // One request first: the page's code paths and the store's pages warm.
    let (status, _) = get(addr, path);
    assert_eq!(status, 200, "{path}");
    let mut ms: Vec<f64> = Vec::new();
    let mut bytes = 0;
    for _ in 0..15 {
        let t = Instant::now();
        let (status, n) = get(addr, path);
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(status, 200);
        bytes = n;
    }
    ms.sort_by(|a, b| a.total_cmp(b));
    println!(
        "{}",
        serde_json::json!({
            "page": name,
            "path": path,
            "median_ms": (ms[7] * 100.0).round() / 100.0,
            "p95_ms": (ms[14] * 100.0).round() / 100.0,
            "bytes": bytes,
            "target_ms": target_ms,
        })
    );
}

fn main() {
    let runs = env("SAAP_BENCH_STUDIO_RUNS", 100_000);
    let events = env("SAAP_BENCH_STUDIO_EVENTS", 10_000);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("studio.db");
    let wf = workflow();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let fill = Instant::now();
    let long_run = rt.block_on(async {
        let backend = Arc::new(SqliteBackend::open(&db).unwrap());
        let engine = Engine::new(
            wf.clone(),
            backend,
            EngineOptions {
                keep_ended_runs: false,
                ..Default::default()
            },
        );
        // The long run first: the list's first page shows the newest, short runs.
        // (A stop event and the start make 2 events; each tick one more.)
        let ticks = events.saturating_sub(2).max(1);
        let long = engine
            .start_run(UserMessageEvent::new(ticks.to_string()))
            .await
            .unwrap();
        let _ = engine.wait_for_end(&long).await;
        for chunk in (0..runs.saturating_sub(1)).collect::<Vec<_>>().chunks(500) {
            let mut ids = Vec::with_capacity(chunk.len());
            for _ in chunk {
                ids.push(engine.start_run(UserMessageEvent::new("go")).await.unwrap());
            }
            for id in &ids {
                let _ = engine.wait_for_end(id).await;
            }
        }
        engine.backend().halt();
        long
    });
    drop(rt);
    eprintln!(
        "filled {} with {runs} runs (one of {events} events) in {:.1} s",
        db.display(),
        fill.elapsed().as_secs_f64()
    );
    // A free port for the studio, which serves until the process ends.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let args: Vec<String> = [
        "studio-bench",
        "studio",
        "--db",
        db.to_str().unwrap(),
        "--listen",
        &addr,
    ]
    .map(String::from)
    .to_vec();
    let studio_wf = wf.clone();
    std::thread::spawn(move || saap::main_with(studio_wf, args));
    let up = Instant::now();
    while TcpStream::connect(&addr).is_err() {
        assert!(
            up.elapsed() < Duration::from_secs(60),
            "the studio did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    timed(&addr, "run list, first page", "/", Some(100.0));
    timed(
        &addr,
        "run list, stopped runs",
        "/?status=stopped",
        Some(100.0),
    );
    timed(&addr, "run list as JSON", "/api/runs", None);
    timed(
        &addr,
        "a run of 10,000 events",
        &format!("/runs/{long_run}"),
        Some(200.0),
    );
}
