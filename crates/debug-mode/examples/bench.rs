//! Throughput and latency figures for BENCHMARKS.md.
//!
//! Usage: `scripts/debug-mode-bench` (builds release, then runs
//! `bench <path-to-debug-mode> [events]`). Uses a temporary state directory and stops its
//! service at the end. Prints a Markdown table.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

struct Bench {
    bin: PathBuf,
    home: PathBuf,
}

impl Bench {
    fn cmd(&self, args: &[&str]) -> Value {
        let o = Command::new(&self.bin)
            .arg("--json")
            .args(args)
            .env("AGENT_DEBUG_MODE_HOME_OVERRIDE", &self.home)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        serde_json::from_slice(&o.stdout).unwrap()
    }

    fn timed(&self, args: &[&str], runs: usize) -> Duration {
        let mut v: Vec<Duration> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                self.cmd(args);
                t.elapsed()
            })
            .collect();
        v.sort();
        v[runs / 2]
    }

    fn create(&self) -> (String, u16, PathBuf) {
        let v = self.cmd(&["create"]);
        let id = v["data"]["sessionId"].as_str().unwrap().to_owned();
        let port = v["data"]["ingestUrl"]
            .as_str()
            .unwrap()
            .split(':')
            .nth(2)
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        (
            id,
            port,
            PathBuf::from(v["data"]["appendPath"].as_str().unwrap()),
        )
    }

    fn count(&self, id: &str) -> u64 {
        self.cmd(&["logs", "--session", id, "--limit", "1"])["statistics"]["eventCount"]
            .as_u64()
            .unwrap()
    }
}

fn line(n: u64) -> String {
    format!(
        "{{\"hypothesisId\":\"H{}\",\"location\":\"src/app.ts:{}\",\"message\":\"Cache lookup completed\",\"data\":{{\"n\":{n},\"cacheKey\":\"cart:{}\",\"hit\":{}}},\"timestamp\":{}}}\n",
        n % 3 + 1,
        n % 500,
        n % 1000,
        n.is_multiple_of(2),
        1_784_313_728_000u64 + n
    )
}

fn rss_kib(home: &std::path::Path) -> u64 {
    let sf: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join("service.json")).unwrap()).unwrap();
    let pid = sf["pid"].as_u64().unwrap();
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bin = PathBuf::from(
        args.get(1)
            .expect("usage: bench <debug-mode binary> [events]"),
    );
    let total: u64 = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let tmp = tempfile::tempdir().unwrap();
    let b = Bench {
        bin: bin.clone(),
        home: tmp.path().join("state"),
    };
    let mut rows: Vec<(String, String)> = Vec::new();

    // HTTP ingest: batches of 1000 events, 4 concurrent clients.
    let (id, port, _) = b.create();
    let batch = 1000u64;
    let batches = total / batch;
    let bodies: Vec<Vec<u8>> = (0..4u64)
        .map(|k| {
            (0..batch)
                .map(|i| line(k * batch + i))
                .collect::<String>()
                .into_bytes()
        })
        .collect();
    let t = Instant::now();
    std::thread::scope(|s| {
        for w in 0..4u64 {
            let body = &bodies[w as usize];
            let id = &id;
            s.spawn(move || {
                for _ in 0..batches / 4 {
                    let (st, _) = debug_mode::client::http(
                        port,
                        "POST",
                        &format!("/ingest/{id}"),
                        &[("Content-Type", "application/x-ndjson")],
                        body,
                        Duration::from_secs(60),
                    )
                    .unwrap();
                    assert_eq!(st, 200);
                }
            });
        }
    });
    let http_secs = t.elapsed().as_secs_f64();
    let n = b.count(&id);
    rows.push((
        "HTTP ingest (batches of 1000, 4 clients)".into(),
        format!(
            "{:.0} events/s ({n} events in {http_secs:.2} s)",
            n as f64 / http_secs
        ),
    ));

    // Reads on the large session.
    rows.push((
        "first `logs` page, large session (CLI round trip)".into(),
        format!(
            "{:.1} ms (median of 7, {n} events)",
            b.timed(&["logs", "--session", &id], 7).as_secs_f64() * 1e3
        ),
    ));
    let last = (n - 50).to_string();
    rows.push((
        "last `logs` page (`--offset` near the end)".into(),
        format!(
            "{:.1} ms",
            b.timed(&["logs", "--session", &id, "--offset", &last], 7)
                .as_secs_f64()
                * 1e3
        ),
    ));
    rows.push((
        "`logs --hypothesis H2`, first page".into(),
        format!(
            "{:.1} ms",
            b.timed(&["logs", "--session", &id, "--hypothesis", "H2"], 7)
                .as_secs_f64()
                * 1e3
        ),
    ));
    rows.push((
        "service RSS with the large session loaded".into(),
        format!("{:.1} MiB", rss_kib(&b.home) as f64 / 1024.0),
    ));

    let prog = "select(.data.n == -1) | .sequence";
    let t = Instant::now();
    let q = b.cmd(&["query", "--session", &id, "--timeout-ms", "600000", prog]);
    let q_secs = t.elapsed().as_secs_f64();
    let events = tmp
        .path()
        .join("state/sessions")
        .join(&id)
        .join("events.ndjson");
    let jq = Command::new("sh")
        .args([
            "-c",
            &format!(
                "command -v jq >/dev/null && jq -c '{prog}' {} >/dev/null",
                events.display()
            ),
        ])
        .output();
    let t = Instant::now();
    let jq_ok = Command::new("sh")
        .args([
            "-c",
            &format!("jq -c '{prog}' {} >/dev/null", events.display()),
        ])
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
        && jq.is_ok();
    let jq_secs = t.elapsed().as_secs_f64();
    rows.push((
        format!("`query '{prog}'` over {n} events"),
        format!("{q_secs:.2} s ({} results)", q["statistics"]["resultCount"]),
    ));
    if jq_ok {
        rows.push((
            "`jq` on the same NDJSON, same program".into(),
            format!("{jq_secs:.2} s (debug-mode/jq = {:.2})", q_secs / jq_secs),
        ));
    }

    // CLI round trip on a small session.
    let (small, _, _) = b.create();
    rows.push((
        "CLI round trip (`logs --limit 1`, small session, running service)".into(),
        format!(
            "{:.2} ms (median of 21)",
            b.timed(&["logs", "--session", &small, "--limit", "1"], 21)
                .as_secs_f64()
                * 1e3
        ),
    ));

    // File ingest: append `total` lines in 4 MiB writes; measure until all are ingested.
    // Done twice on the same session to show the rate stays flat as the session grows.
    let (fid, _, append) = b.create();
    let chunk: String = (0..10_000u64).map(line).collect();
    for round in 1..=2u64 {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&append)
            .unwrap();
        let t = Instant::now();
        for _ in 0..total / 10_000 {
            f.write_all(chunk.as_bytes()).unwrap();
        }
        drop(f);
        while b.count(&fid) < round * total {
            std::thread::sleep(Duration::from_millis(20));
        }
        let secs = t.elapsed().as_secs_f64();
        rows.push((
            format!(
                "file ingest, round {round} (session already holds {} lines)",
                (round - 1) * total
            ),
            format!(
                "{:.0} lines/s ({total} lines in {secs:.2} s, write + ingest)",
                total as f64 / secs
            ),
        ));
    }
    rows.push((
        "service RSS after all of the above".into(),
        format!("{:.1} MiB", rss_kib(&b.home) as f64 / 1024.0),
    ));
    rows.push((
        "release binary size".into(),
        format!(
            "{:.1} MiB",
            std::fs::metadata(&bin).unwrap().len() as f64 / 1048576.0
        ),
    ));
    b.cmd(&["stop"]);

    println!("| measurement | result |\n| --- | --- |");
    for (k, v) in rows {
        println!("| {k} | {v} |");
    }
}
