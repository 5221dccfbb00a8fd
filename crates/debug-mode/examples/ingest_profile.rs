//! Load-independent file-ingest profile: feeds N bench-shaped lines through the ingest path.
//!
//! `ingest_profile pipeline N` runs only the per-line pipeline (validate + redact + render)
//! via `Session::ingest_body` on one in-memory body; `ingest_profile drain N [rounds]` writes
//! N lines to a temporary session's append path and drains it (tail, split, validate, redact,
//! assign id/sequence/receivedAt, append), `rounds` times into the same session;
//! `ingest_profile setup N` only builds the lines (its count is subtracted). Run it under
//! `valgrind --tool=callgrind` (instructions per line) or plainly (lines per second).
#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use debug_mode::clock::SystemClock;
use debug_mode::store::{Source, Store};

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

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map_or("drain", String::as_str).to_owned();
    let n: u64 = args.get(2).map_or(200_000, |s| s.parse().unwrap());
    let rounds: u64 = args.get(3).map_or(1, |s| s.parse().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().to_path_buf(), Arc::new(SystemClock)).unwrap();
    let info = store.create().unwrap();
    let session = store.get(&info.session_id).unwrap();
    let mut body = Vec::new();
    for i in 0..n {
        body.extend_from_slice(line(i).as_bytes());
    }
    if mode == "setup" {
        // Only the setup above: subtract its instruction count from the other modes'.
        return;
    }
    for r in 0..rounds {
        let t = Instant::now();
        let out = if mode == "pipeline" {
            let mut s = session.lock().unwrap();
            s.ingest_body(&body, Source::File, 1_784_313_728_000)
                .unwrap()
        } else {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&info.append_path)
                .unwrap();
            f.write_all(&body).unwrap();
            drop(f);
            let mut s = session.lock().unwrap();
            s.drain_incoming(1_784_313_728_000).unwrap()
        };
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(out.accepted, n);
        println!(
            "{mode} round {}: {n} lines in {secs:.3} s = {:.0} lines/s",
            r + 1,
            n as f64 / secs
        );
    }
}
