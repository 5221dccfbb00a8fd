//! The store's unit tests.
#![allow(clippy::unwrap_used)]

use super::lines::DRAIN_CHUNK;
use super::lines::PARALLEL_MIN_LINES;
use super::reports::{IngestOutcome, LogsOrder, LogsQuery, Source};
use super::session::Session;
use super::*;
use crate::clock::ManualClock;
use crate::error::ErrorCode;
use crate::event;
use serde_json::Value;
use std::io::Write;

fn store() -> (tempfile::TempDir, Store, ManualClock) {
    let t = tempfile::tempdir().unwrap();
    let clock = ManualClock::default();
    clock.set(1_000);
    let s = Store::open(t.path().join("state"), Arc::new(clock.clone())).unwrap();
    (t, s, clock)
}

fn logs_query(offset: usize, limit: usize, hypotheses: &[&str]) -> LogsQuery {
    LogsQuery {
        offset,
        limit,
        hypotheses: hypotheses.iter().map(|h| (*h).to_owned()).collect(),
        ..LogsQuery::default()
    }
}

fn line(h: &str, n: u64) -> String {
    format!(
        r#"{{"hypothesisId":"{h}","location":"a.rs:{n}","message":"m","data":{{"n":{n}}},"timestamp":{n}}}"#
    )
}

#[test]
fn http_and_file_ingest_share_sequence_and_survive_reload() {
    let (_t, store, _c) = store();
    let info = store.create().unwrap();
    let s = store.get(&info.session_id).unwrap();
    let body = format!("{}\n{}\n", line("H1", 1), line("H2", 2));
    let out = lock(&s)
        .ingest_body(body.as_bytes(), Source::Http, 5)
        .unwrap();
    assert_eq!(out.accepted, 2);
    // File ingest: the trailing incomplete line stays buffered.
    let mut f = paths::open_append(&info.append_path).unwrap();
    write!(f, "{}\n{}", line("H1", 3), &line("H1", 4)[..10]).unwrap();
    assert_eq!(lock(&s).drain_incoming(6).unwrap().accepted, 1);
    writeln!(f, "{}", &line("H1", 4)[10..]).unwrap();
    assert_eq!(lock(&s).drain_incoming(7).unwrap().accepted, 1);
    let page = lock(&s).logs(&logs_query(0, 10, &[])).unwrap();
    let seqs: Vec<u64> = page.events.iter().map(|e| e.sequence).collect();
    assert_eq!(seqs, vec![1, 2, 3, 4]);
    // A fresh store (service restart) rebuilds the same view.
    let store2 = Store::open(store.root().to_owned(), Arc::new(ManualClock::default())).unwrap();
    let s2 = store2.get(&info.session_id).unwrap();
    let page2 = lock(&s2).logs(&logs_query(0, 10, &["H1"])).unwrap();
    assert_eq!(page2.matched, 3);
    assert_eq!(
        page2.events.iter().map(|e| e.sequence).collect::<Vec<_>>(),
        vec![1, 3, 4]
    );
    assert_eq!(
        lock(&s2).drain_incoming(8).unwrap().accepted,
        0,
        "no re-ingest"
    );
}

#[test]
fn a_full_disk_refuses_batches_with_a_clear_error_and_loses_no_line() {
    let (_t, store, _c) = store();
    let info = store.create().unwrap();
    let s = store.get(&info.session_id).unwrap();
    // /dev/full fails every write with ENOSPC, as a full file system does.
    let full = std::fs::OpenOptions::new()
        .append(true)
        .open("/dev/full")
        .expect("/dev/full exists on Linux");
    let real = std::mem::replace(&mut lock(&s).events, full);
    // HTTP: the whole batch is refused (the client gets an error), nothing is counted.
    let body = format!("{}\n", line("H1", 1));
    let err = lock(&s)
        .ingest_body(body.as_bytes(), Source::Http, 5)
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::EvidenceMalformed);
    assert!(err.hint.contains("disk space"), "{}", err.hint);
    // File: the lines stay unconsumed in the append path.
    let mut f = paths::open_append(&info.append_path).unwrap();
    write!(f, "{}\n{}\n", line("H1", 2), line("H2", 3)).unwrap();
    assert!(lock(&s).drain_incoming(6).is_err());
    assert_eq!(lock(&s).event_count(), 0);
    // Space is back: every line arrives once, in order, with sequences from 1.
    lock(&s).events = real;
    assert_eq!(lock(&s).drain_incoming(7).unwrap().accepted, 2);
    let store2 = Store::open(store.root().to_owned(), Arc::new(ManualClock::default())).unwrap();
    let page = lock(&store2.get(&info.session_id).unwrap())
        .logs(&logs_query(0, 10, &[]))
        .unwrap();
    let got: Vec<(u64, String)> = page
        .events
        .iter()
        .map(|e| (e.sequence, e.hypothesis_id.clone()))
        .collect();
    assert_eq!(got, vec![(1, "H1".to_owned()), (2, "H2".to_owned())]);
}

#[test]
fn consumed_append_path_bytes_are_scrubbed() {
    let (_t, store, _c) = store();
    let info = store.create().unwrap();
    let s = store.get(&info.session_id).unwrap();
    let mut f = paths::open_append(&info.append_path).unwrap();
    let secret = line("H1", 1).replace("\"m\"", "\"password=hunter2\"");
    write!(f, "{secret}\n{}", &line("H1", 2)[..8]).unwrap();
    assert_eq!(lock(&s).drain_incoming(1).unwrap().accepted, 1);
    let raw = std::fs::read(&info.append_path).unwrap();
    assert!(!String::from_utf8_lossy(&raw).contains("hunter2"));
    assert!(
        raw.ends_with(&line("H1", 2).as_bytes()[..8]),
        "unconsumed bytes kept"
    );
    writeln!(f, "{}", &line("H1", 2)[8..]).unwrap();
    assert_eq!(lock(&s).drain_incoming(2).unwrap().accepted, 1);
}

#[test]
fn idle_drain_does_not_load_sessions_with_nothing_new() {
    let (_t, store, _c) = store();
    let info = store.create().unwrap();
    let mut f = paths::open_append(&info.append_path).unwrap();
    writeln!(f, "{}", line("H1", 1)).unwrap();
    assert_eq!(store.drain_all().accepted, 1);
    let restarted = Store::open(store.root().to_owned(), Arc::new(ManualClock::default())).unwrap();
    assert_eq!(restarted.drain_all().accepted, 0);
    assert_eq!(
        restarted.loaded_count(),
        0,
        "nothing pending: nothing loaded"
    );
    writeln!(f, "{}", line("H1", 2)).unwrap();
    assert_eq!(restarted.drain_all().accepted, 1);
    assert_eq!(restarted.loaded_count(), 1);
}

#[test]
fn fast_and_full_ingest_paths_store_identical_bytes() {
    let (_t, store, _c) = store();
    let a = store.create().unwrap();
    let b = store.create().unwrap();
    let lines = [
            line("H1", 1),
            r#"{ "hypothesisId": "H2", "location": "b.go:9", "message": "m", "data": {"a": [1, -2, "x y", true, null, {}]}, "timestamp": 5 }"#.to_owned(),
            r#"{"hypothesisId":"H3","location":"c:1","message":"m","data":"plain","timestamp":7}"#.to_owned(),
        ];
    assert!(
        lines
            .iter()
            .all(|l| event::fast_validate(l.as_bytes()).is_some())
    );
    let sa = store.get(&a.session_id).unwrap();
    lock(&sa)
        .ingest_body(lines.join("\n").as_bytes(), Source::Http, 9)
        .unwrap();
    let sb = store.get(&b.session_id).unwrap();
    let values = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    lock(&sb).ingest_values(values, 9).unwrap();
    let strip = |id: &str| -> Vec<String> {
        std::fs::read_to_string(SessionPaths::new(store.root(), id).events())
            .unwrap()
            .lines()
            .map(|l| l[l.find(",\"sequence\"").unwrap()..].to_owned())
            .collect()
    };
    assert_eq!(strip(&a.session_id), strip(&b.session_id));
    assert_eq!(strip(&a.session_id).len(), 3);
}

#[test]
fn parallel_fast_path_matches_the_full_path_in_order() {
    let (_t, store, _c) = store();
    let a = store.create().unwrap();
    let b = store.create().unwrap();
    let n = PARALLEL_MIN_LINES as u64 * 2 + 7;
    let mut lines: Vec<String> = (1..=n).map(|i| line(&format!("H{}", i % 5), i)).collect();
    // Some lines take the full path (redaction, floats, invalid) in the middle of the batch.
    lines[10] = r#"{"hypothesisId":"H1","location":"a:1","message":"m","data":{"password":"x"},"timestamp":1}"#.into();
    lines[5000] =
        r#"{"hypothesisId":"H1","location":"a:1","message":"m","data":1.5,"timestamp":1}"#.into();
    lines[7000] = "not json".into();
    let body = lines.join("\n");
    let sa = store.get(&a.session_id).unwrap();
    let out = lock(&sa)
        .ingest_body(body.as_bytes(), Source::Http, 9)
        .unwrap();
    assert_eq!((out.accepted, out.rejected), (n - 1, 1));
    let sb = store.get(&b.session_id).unwrap();
    for l in &lines {
        // One line per call: below the parallel threshold, and for valid JSON lines the
        // full path via ingest_values.
        match serde_json::from_str::<Value>(l) {
            Ok(v) => lock(&sb).ingest_values(vec![v], 9).unwrap(),
            Err(_) => lock(&sb)
                .ingest_body(l.as_bytes(), Source::Http, 9)
                .unwrap(),
        };
    }
    let strip = |id: &str| -> Vec<String> {
        std::fs::read_to_string(SessionPaths::new(store.root(), id).events())
            .unwrap()
            .lines()
            .map(|l| l[l.find(",\"sequence\"").unwrap()..].to_owned())
            .collect()
    };
    let (sa_lines, sb_lines) = (strip(&a.session_id), strip(&b.session_id));
    assert_eq!(sa_lines.len() as u64, n - 1);
    assert_eq!(sa_lines, sb_lines);
    let ids: std::collections::HashSet<String> =
        std::fs::read_to_string(SessionPaths::new(store.root(), &a.session_id).events())
            .unwrap()
            .lines()
            .map(|l| l[..l.find(",\"sequence\"").unwrap()].to_owned())
            .collect();
    assert_eq!(ids.len() as u64, n - 1, "event ids are unique");
}

#[test]
fn a_torn_trailing_evidence_line_is_cut_on_reload() {
    let (_t, store, _c) = store();
    let info = store.create().unwrap();
    let s = store.get(&info.session_id).unwrap();
    lock(&s)
        .ingest_body(
            format!("{}\n{}", line("H1", 1), line("H2", 2)).as_bytes(),
            Source::Http,
            3,
        )
        .unwrap();
    let events = SessionPaths::new(store.root(), &info.session_id).events();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&events)
        .unwrap();
    f.write_all(br#"{"id":"torn","seq"#).unwrap();
    let store2 = Store::open(store.root().to_owned(), Arc::new(ManualClock::default())).unwrap();
    let s2 = store2.get(&info.session_id).unwrap();
    assert_eq!(lock(&s2).event_count(), 2);
    lock(&s2)
        .ingest_body(line("H1", 3).as_bytes(), Source::Http, 4)
        .unwrap();
    let page = lock(&s2).logs(&logs_query(0, 10, &[])).unwrap();
    assert_eq!(
        page.events.iter().map(|e| e.sequence).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
}

#[test]
fn logs_are_in_time_order_also_after_a_reload_and_further_ingest() {
    let (_t, store, _c) = store();
    let info = store.create().unwrap();
    let s = store.get(&info.session_id).unwrap();
    let body = format!(
        "{}\n{}\n{}\n",
        line("H1", 30),
        line("H1", 10),
        line("H1", 20)
    );
    lock(&s)
        .ingest_body(body.as_bytes(), Source::Http, 5)
        .unwrap();
    let order = |s: &Arc<Mutex<Session>>| -> Vec<u64> {
        lock(s)
            .logs(&logs_query(0, 10, &[]))
            .unwrap()
            .events
            .iter()
            .map(|e| e.timestamp)
            .collect()
    };
    assert_eq!(order(&s), [10, 20, 30]);
    // A fresh service loads the session from disk; later events join the order.
    drop(s);
    let reopened =
        Store::open(store.root().to_path_buf(), Arc::new(ManualClock::default())).unwrap();
    let s2 = reopened.get(&info.session_id).unwrap();
    assert_eq!(order(&s2), [10, 20, 30]);
    lock(&s2)
        .ingest_body(format!("{}\n", line("H1", 15)).as_bytes(), Source::Http, 6)
        .unwrap();
    assert_eq!(order(&s2), [10, 15, 20, 30]);
    let q = LogsQuery {
        order: LogsOrder::Sequence,
        ..logs_query(0, 10, &[])
    };
    let seq: Vec<u64> = lock(&s2)
        .logs(&q)
        .unwrap()
        .events
        .iter()
        .map(|e| e.timestamp)
        .collect();
    assert_eq!(seq, [30, 10, 20, 15]);
}

#[test]
fn reset_restarts_sequence_and_bumps_epoch() {
    let (_t, store, _c) = store();
    let info = store.create().unwrap();
    let s = store.get(&info.session_id).unwrap();
    lock(&s)
        .ingest_body(line("H1", 1).as_bytes(), Source::Http, 1)
        .unwrap();
    lock(&s).ingest_body(b"garbage", Source::Http, 1).unwrap();
    let e0 = lock(&s).epoch();
    lock(&s).reset().unwrap();
    assert_eq!(lock(&s).epoch(), e0 + 1);
    let st = lock(&s).status().unwrap();
    assert_eq!(
        (st.event_count, st.malformed_count, st.diagnostics.len()),
        (0, 0, 0)
    );
    lock(&s)
        .ingest_body(line("H1", 1).as_bytes(), Source::Http, 1)
        .unwrap();
    assert_eq!(
        lock(&s).logs(&logs_query(0, 10, &[])).unwrap().events[0].sequence,
        1
    );
}

#[test]
fn malformed_records_become_redacted_diagnostics_on_both_paths() {
    let (_t, store, _c) = store();
    let info = store.create().unwrap();
    let s = store.get(&info.session_id).unwrap();
    lock(&s)
        .ingest_body(br#"{"password":"hunter2","oops":1"#, Source::Http, 1)
        .unwrap();
    let mut f = paths::open_append(&info.append_path).unwrap();
    writeln!(f, r#"{{"hypothesisId":"H1","location":"a:1","message":"token=abcdef123","data":{{"apiKey":"k"}},"timestamp":1}}"#).unwrap();
    writeln!(f, "not json Bearer abcdefghijklmnop").unwrap();
    lock(&s).drain_incoming(2).unwrap();
    let st = lock(&s).status().unwrap();
    assert_eq!(st.malformed_count, 2);
    assert_eq!(st.diagnostics[0].id, "MR-1");
    assert_eq!(st.diagnostics[1].source, Source::File);
    let on_disk = std::fs::read_to_string(
        SessionPaths::new(store.root(), &info.session_id)
            .dir
            .join("diagnostics.ndjson"),
    )
    .unwrap()
        + &std::fs::read_to_string(SessionPaths::new(store.root(), &info.session_id).events())
            .unwrap();
    assert!(
        !on_disk.contains("hunter2")
            && !on_disk.contains("abcdef123")
            && !on_disk.contains("abcdefghijklmnop"),
        "{on_disk}"
    );
    assert!(on_disk.contains("[REDACTED]"));
}

#[test]
fn clean_removes_the_directory_and_unknown_ids_are_not_found() {
    let (_t, store, _c) = store();
    let info = store.create().unwrap();
    store.clean(&info.session_id).unwrap();
    assert!(
        !SessionPaths::new(store.root(), &info.session_id)
            .dir
            .exists()
    );
    assert_eq!(
        store.get(&info.session_id).err().unwrap().code,
        ErrorCode::SessionNotFound
    );
    let e = store.get("../../etc").err().unwrap();
    assert_eq!(e.code, ErrorCode::InvalidArguments);
    assert_eq!(
        e.reason.as_deref(),
        Some(crate::error::reason::INVALID_SESSION_ID)
    );
}

#[test]
fn a_pipelined_multi_step_drain_appends_in_file_order_and_skips_an_oversized_line() {
    let (_t, store, _c) = store();
    let info = store.create().unwrap();
    let s = store.get(&info.session_id).unwrap();
    let mut body = String::new();
    let mut expected_n = Vec::new();
    let mut push = |body: &mut String, n: u64| {
        match n {
            100 => body.push_str("not json A"),
            90_000 => body.push_str("not json B"),
            _ => {
                body.push_str(&line(&format!("H{}", n % 4), n));
                expected_n.push(n);
            }
        }
        body.push('\n');
    };
    // ~4.8 MiB of lines (two drain steps), a line longer than a whole step (reported
    // once, then skipped up to its newline), ~4.8 MiB more: one drain, five steps.
    for n in 1..=60_000 {
        push(&mut body, n);
    }
    body.push_str(&"x".repeat(DRAIN_CHUNK + 1000));
    body.push('\n');
    for n in 60_001..=120_000 {
        push(&mut body, n);
    }
    assert!(body.len() > 2 * DRAIN_CHUNK + DRAIN_CHUNK);
    let mut f = paths::open_append(&info.append_path).unwrap();
    f.write_all(body.as_bytes()).unwrap();
    let out = lock(&s).drain_incoming(5).unwrap();
    assert_eq!(out.accepted, expected_n.len() as u64);
    assert_eq!(out.rejected, 3);
    let paths = SessionPaths::new(store.root(), &info.session_id);
    let stored: Vec<Value> = std::fs::read_to_string(paths.events())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ns: Vec<u64> = stored
        .iter()
        .map(|e| e["data"]["n"].as_u64().unwrap())
        .collect();
    assert_eq!(ns, expected_n, "events are stored in file order");
    let seqs: Vec<u64> = stored
        .iter()
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=expected_n.len() as u64).collect::<Vec<_>>());
    let diags: Vec<Value> = std::fs::read_to_string(paths.diagnostics())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let previews: Vec<String> = diags
        .iter()
        .map(|d| d["preview"].as_str().unwrap().chars().take(10).collect())
        .collect();
    assert_eq!(previews, ["not json A", "xxxxxxxxxx", "not json B"]);
    assert_eq!(lock(&s).state.incoming_offset, body.len() as u64);
    assert!(!lock(&s).state.skipping_long_line);
    // Nothing is left to drain, and a later line is ingested after the earlier ones.
    assert_eq!(
        lock(&s).drain_incoming(6).unwrap(),
        IngestOutcome::default()
    );
    writeln!(f, "{}", line("H1", 120_001)).unwrap();
    assert_eq!(lock(&s).drain_incoming(7).unwrap().accepted, 1);
    assert_eq!(lock(&s).event_count(), expected_n.len() as u64 + 1);
}

#[test]
fn oversized_unterminated_line_is_skipped_not_buffered_forever() {
    let (_t, store, _c) = store();
    let info = store.create().unwrap();
    let s = store.get(&info.session_id).unwrap();
    let mut f = paths::open_append(&info.append_path).unwrap();
    f.write_all(&vec![b'x'; event::MAX_LINE_BYTES + 10])
        .unwrap();
    lock(&s).drain_incoming(1).unwrap();
    writeln!(f, "yyy").unwrap();
    writeln!(f, "{}", line("H1", 1)).unwrap();
    let out = lock(&s).drain_incoming(2).unwrap();
    assert_eq!(out.accepted, 1);
    assert_eq!(lock(&s).status().unwrap().malformed_count, 1);
}
