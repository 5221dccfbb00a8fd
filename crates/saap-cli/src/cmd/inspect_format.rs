//! The human tables of `saap inspect`: each function draws one answer of `saap-inspect` as
//! text. Long cells are cut (the JSON output has everything).
//!
//! Must not read anything or decide anything: it only lays out what it is given.

use saap_inspect::model::{
    BucketSummary, KeyList, KvValue, Message, Page, RunList, RunTimeline, ServerReport,
    StreamReport, StreamSummary,
};
use serde_json::Value;
use std::fmt::Write;

/// The widest a table cell gets (the last column: [`LAST_CELL`]).
const CELL: usize = 48;
/// The widest the last column (notes) gets.
const LAST_CELL: usize = 160;

fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(3)).collect();
        t.push_str("...");
        t
    }
}

/// A left-aligned table with a header row.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            r.iter()
                .enumerate()
                .map(|(i, c)| cut(c, if i + 1 == r.len() { LAST_CELL } else { CELL }))
                .collect()
        })
        .collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            if let Some(w) = width.get_mut(i) {
                *w = (*w).max(c.chars().count());
            }
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                l.push_str(c);
            } else {
                let _ = write!(l, "{c:<w$}  ", w = width[i]);
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(header.to_vec(), &mut out);
    for r in &rows {
        line(r.iter().map(String::as_str).collect(), &mut out);
    }
    out
}

fn opt(s: &Option<String>) -> String {
    s.clone().unwrap_or_else(|| "-".to_owned())
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".to_owned(),
        other => other.to_string(),
    }
}

pub fn server(r: &ServerReport) -> String {
    let mut out = format!("{}  {}  {}\n", r.name, r.id, r.version);
    let rows: Vec<Vec<String>> = r
        .facts
        .iter()
        .map(|(k, v)| vec![k.clone(), scalar(v)])
        .collect();
    out.push_str(&table(&["FACT", "VALUE"], &rows));
    out
}

pub fn streams(list: &[StreamSummary], truncated: bool) -> String {
    if list.is_empty() {
        return "no streams\n".to_owned();
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|s| {
            vec![
                s.name.clone(),
                s.role.clone(),
                s.messages.to_string(),
                s.bytes.to_string(),
                format!("{}..{}", s.first_seq, s.last_seq),
                opt(&s.last_time),
                s.consumers.to_string(),
            ]
        })
        .collect();
    let mut out = table(
        &[
            "STREAM",
            "ROLE",
            "MESSAGES",
            "BYTES",
            "SEQUENCES",
            "LAST",
            "CONSUMERS",
        ],
        &rows,
    );
    if truncated {
        out.push_str("(more streams exist: raise --limit)\n");
    }
    out
}

pub fn stream(r: &StreamReport) -> String {
    let s = &r.summary;
    let mut out = format!(
        "stream {}  ({}{})\n",
        s.name,
        s.role,
        s.agent_class
            .as_ref()
            .map(|c| format!(", class {c}"))
            .unwrap_or_default()
    );
    if !s.subjects.is_empty() {
        let _ = writeln!(out, "subjects   {}", s.subjects.join(", "));
    }
    let _ = writeln!(
        out,
        "messages   {} ({} bytes), sequences {}..{}, {} deleted",
        s.messages, s.bytes, s.first_seq, s.last_seq, r.deleted
    );
    let _ = writeln!(
        out,
        "first      {}\nlast       {}",
        opt(&s.first_time),
        opt(&s.last_time)
    );
    if let Value::Object(c) = &r.config {
        for key in [
            "storage",
            "retention",
            "max_msgs",
            "max_age",
            "duplicate_window",
            "discard",
            "num_replicas",
            "runs",
            "live_runs",
            "stopped_runs",
            "failed_runs",
        ] {
            match (c.get(key), key) {
                // Durations are nanoseconds in the server's configuration.
                (Some(Value::Number(n)), "max_age" | "duplicate_window") => {
                    let secs = n.as_u64().unwrap_or(0) / 1_000_000_000;
                    let _ = writeln!(out, "{key:<10} {secs} s");
                }
                (Some(v), _) => {
                    let _ = writeln!(out, "{key:<10} {}", scalar(v));
                }
                (None, _) => {}
            }
        }
    }
    let _ = writeln!(out, "consumers  {}", s.consumers);
    if !r.consumer_list.is_empty() {
        let rows: Vec<Vec<String>> = r
            .consumer_list
            .iter()
            .map(|c| {
                vec![
                    c.name.clone(),
                    c.filter.clone(),
                    c.pending.to_string(),
                    c.ack_pending.to_string(),
                    c.redelivered.to_string(),
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "CONSUMER",
                "FILTER",
                "PENDING",
                "ACK_PENDING",
                "REDELIVERED",
            ],
            &rows,
        ));
    }
    out.push('\n');
    if r.events.is_empty() {
        out.push_str("no messages\n");
    } else {
        let rows: Vec<Vec<String>> = r
            .events
            .iter()
            .map(|e| vec![e.event_name.clone(), e.kind.clone(), e.count.to_string()])
            .collect();
        out.push_str(&table(&["EVENT", "KIND", "COUNT"], &rows));
    }
    if r.truncated {
        let _ = writeln!(
            out,
            "(counted over the first {} subjects only: raise --max-subjects)",
            r.subjects_scanned
        );
    }
    out
}

/// One row of a page: what the message is, in a few words.
fn row(m: &Message) -> Vec<String> {
    let run = opt(&m.address.run_id);
    let kind = m
        .address
        .kind
        .as_deref()
        .map(|k| k.trim_end_matches("_event").to_owned())
        .unwrap_or_else(|| "-".to_owned());
    let (name, id, note) = match (&m.event, &m.undecodable) {
        (Some(e), _) => {
            let mut notes = Vec::new();
            if e.flags.start {
                notes.push("start".to_owned());
            }
            if e.flags.stop {
                notes.push("stop".to_owned());
            }
            if e.flags.exception {
                let msg = e.json.get("message").map(scalar).unwrap_or_default();
                notes.push(format!("exception: {}", cut(&msg, 60)));
            }
            if m.after_stop {
                notes.push("AFTER STOP".to_owned());
            }
            if let Some(k) = &e.known_type {
                notes.push(format!("read as {k}"));
            }
            (e.event_name.clone(), e.event_id.clone(), notes.join(", "))
        }
        (None, Some(u)) => (
            opt(&m.address.event_name),
            "-".to_owned(),
            format!("UNDECODABLE ({}): {}", u.kind, cut(&u.reason, 80)),
        ),
        (None, None) => {
            // A journal entry that appends no outside event: a completion (its outputs) or
            // a retry.
            let mut names = Vec::new();
            let mut notes = Vec::new();
            for j in &m.journal {
                names.extend(j.outputs.iter().map(|o| o.event_name.clone()));
                let mut what = format!("{} #{}", j.input, j.index);
                if let Some(x) = j.execution {
                    let _ = write!(what, " execution {x}");
                }
                if let Some(e) = &j.error {
                    let _ = write!(what, " error: {}", cut(e, 60));
                }
                if j.outputs.iter().any(|o| o.flags.stop) {
                    what.push_str(", stop");
                }
                if j.outputs.iter().any(|o| o.flags.exception) {
                    what.push_str(", exception");
                }
                notes.push(what);
                let recs = records_brief(&j.records);
                if !recs.is_empty() {
                    notes.push(recs);
                }
            }
            if m.after_stop {
                notes.push("AFTER STOP".to_owned());
            }
            let name = if names.is_empty() {
                "-".to_owned()
            } else {
                format!("-> {}", names.join(", "))
            };
            (name, "-".to_owned(), notes.join("; "))
        }
    };
    let note = if m.event.is_some() && !m.journal.is_empty() {
        let j = &m.journal[0];
        let recs = records_brief(&j.records);
        if note.is_empty() {
            recs
        } else {
            format!("{note}; {recs}")
        }
    } else {
        note
    };
    vec![m.seq.to_string(), opt(&m.time), run, kind, name, id, note]
}

/// The record tags of a journal entry, e.g. `event_appended, execution_started`.
fn records_brief(records: &[Value]) -> String {
    let tags: Vec<String> = records
        .iter()
        .filter_map(|r| r.get("record").and_then(Value::as_str).map(str::to_owned))
        .collect();
    if tags.is_empty() {
        String::new()
    } else {
        format!("records: {}", cut(&tags.join(", "), 120))
    }
}

fn raw_lines(messages: &[Message], out: &mut String) {
    for m in messages {
        if let Some(u) = &m.undecodable {
            let _ = writeln!(
                out,
                "  seq {}: {} ({} bytes) raw: {}",
                m.seq,
                u.reason,
                u.raw_bytes,
                cut(&u.raw.replace('\n', " "), 200)
            );
        }
    }
}

const MSG_HEADER: [&str; 7] = ["SEQ", "TIME", "RUN", "KIND", "EVENT", "ID", "NOTE"];

pub fn page(p: &Page) -> String {
    let mut out = format!(
        "stream {}{}  ({} messages, last sequence {})\n",
        p.stream,
        p.filter
            .as_ref()
            .map(|f| format!("  filter {f}"))
            .unwrap_or_default(),
        p.messages.len(),
        p.last_seq
    );
    if p.messages.is_empty() {
        out.push_str("no messages match\n");
        return out;
    }
    let rows: Vec<Vec<String>> = p.messages.iter().map(row).collect();
    out.push_str(&table(&MSG_HEADER, &rows));
    if p.undecodable > 0 {
        let _ = writeln!(out, "{} message(s) do not decode:", p.undecodable);
        raw_lines(&p.messages, &mut out);
    }
    if let Some(n) = p.next_seq {
        let _ = writeln!(out, "more: next page with --from {n}");
    }
    out
}

pub fn message(m: &Message) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "sequence  {}", m.seq);
    let _ = writeln!(out, "time      {}", opt(&m.time));
    if let Some(s) = &m.subject {
        let _ = writeln!(out, "subject   {s}");
    }
    let a = &m.address;
    for (k, v) in [
        ("class", &a.agent_class),
        ("agent", &a.agent_id),
        ("thread", &a.thread_id),
        ("display", &a.display_id),
        ("run", &a.run_id),
        ("kind", &a.kind),
    ] {
        if let Some(v) = v {
            let _ = writeln!(out, "{k:<9} {v}");
        }
    }
    for (k, v) in &m.headers {
        let _ = writeln!(out, "header    {k}: {v}");
    }
    if let Some(e) = &m.event {
        let _ = writeln!(
            out,
            "event     {} {} (created {})",
            e.event_name,
            e.event_id,
            opt(&e.created)
        );
        let f = &e.flags;
        let flags: Vec<&str> = [
            (f.control, "control"),
            (f.display, "display"),
            (f.start, "start"),
            (f.stop, "stop"),
            (f.exception, "exception"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, n)| *n)
        .collect();
        let _ = writeln!(out, "flags     {}", flags.join(", "));
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&e.json).unwrap_or_default()
        );
    }
    for j in &m.journal {
        let _ = writeln!(
            out,
            "journal   entry {} {}{}{}",
            j.index,
            j.input,
            j.execution
                .map(|x| format!(" execution {x}"))
                .unwrap_or_default(),
            j.error
                .as_ref()
                .map(|e| format!(" error: {e}"))
                .unwrap_or_default()
        );
        for o in &j.outputs {
            let _ = writeln!(out, "  output  {} {} {}", o.event_name, o.event_id, o.json);
        }
        for r in &j.records {
            let _ = writeln!(out, "  record  {r}");
        }
    }
    if let Some(u) = &m.undecodable {
        let _ = writeln!(out, "UNDECODABLE ({}): {}", u.kind, u.reason);
        let _ = writeln!(out, "raw ({} bytes):\n{}", u.raw_bytes, u.raw);
    }
    out
}

pub fn buckets(b: &[BucketSummary]) -> String {
    if b.is_empty() {
        return "no KV buckets\n".to_owned();
    }
    let rows: Vec<Vec<String>> = b
        .iter()
        .map(|b| {
            vec![
                b.bucket.clone(),
                b.values.to_string(),
                b.bytes.to_string(),
                b.history.to_string(),
                b.ttl_seconds.to_string(),
            ]
        })
        .collect();
    table(&["BUCKET", "VALUES", "BYTES", "HISTORY", "TTL_S"], &rows)
}

pub fn keys(k: &KeyList) -> String {
    let mut out = format!("bucket {}  ({} keys)\n", k.bucket, k.keys.len());
    for key in &k.keys {
        let _ = writeln!(out, "{key}");
    }
    if k.truncated {
        out.push_str("(more keys exist: raise --limit)\n");
    }
    out
}

pub fn value(v: &KvValue) -> String {
    format!(
        "bucket {}  key {}  revision {}  created {}  ({} bytes)\n{}\n",
        v.bucket,
        v.key,
        v.revision,
        opt(&v.created),
        v.bytes,
        serde_json::to_string_pretty(&v.value).unwrap_or_default()
    )
}

pub fn runs(l: &RunList) -> String {
    let mut out = format!("runs in {}", l.stream);
    if let Some((a, b)) = l.scanned {
        let _ = write!(out, "  (control events {a}..{b} scanned)");
    }
    out.push('\n');
    if l.runs.is_empty() {
        out.push_str("no runs found\n");
    } else {
        let rows: Vec<Vec<String>> = l
            .runs
            .iter()
            .map(|r| {
                let mut status = r.status.as_str().to_owned();
                if let Some(by) = &r.ended_by {
                    let _ = write!(status, " ({by})");
                }
                if r.after_stop > 0 {
                    let _ = write!(status, ", {} after stop", r.after_stop);
                }
                if r.partial {
                    status.push_str(", started before the window");
                }
                vec![
                    r.run_id.clone(),
                    status,
                    opt(&r.started),
                    r.events.to_string(),
                    opt(&r.last_event),
                    opt(&r.thread_id),
                ]
            })
            .collect();
        out.push_str(&table(
            &["RUN", "STATUS", "STARTED", "EVENTS", "LAST_EVENT", "THREAD"],
            &rows,
        ));
    }
    if let Some(n) = &l.next {
        let flag = if l.scanned.is_some() {
            "--before"
        } else {
            "--after"
        };
        let _ = writeln!(out, "more: older runs with {flag} {n}");
    }
    out
}

pub fn timeline(t: &RunTimeline) -> String {
    let r = &t.run;
    let mut out = format!(
        "run {}  {}{}  in {}\n",
        r.run_id,
        r.status.as_str(),
        r.ended_by
            .as_ref()
            .map(|b| format!(" by {b}"))
            .unwrap_or_default(),
        t.stream
    );
    if let Some(th) = &r.thread_id {
        let _ = writeln!(out, "thread {th}");
    }
    if r.after_stop > 0 {
        let _ = writeln!(
            out,
            "{} control event(s) after the run ended (R4: nothing may follow a stop event)",
            r.after_stop
        );
    }
    let rows: Vec<Vec<String>> = t.messages.iter().map(row).collect();
    out.push_str(&table(&MSG_HEADER, &rows));
    raw_lines(&t.messages, &mut out);
    if let Some(n) = t.next_seq {
        let _ = writeln!(out, "more: next page with --from {n}");
    }
    out
}
