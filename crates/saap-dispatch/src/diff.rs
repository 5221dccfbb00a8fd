//! Where two runs of one workflow part ways (issue 23 §3): the first decision record at
//! which they differ — an event (its type, or its fields when both sides have them), a
//! decision (what the dispatcher did with the same events), a binding (the same step
//! started on other events), an output, or the end — and a summary of how they differ
//! (executions per step, events per type, how each ended).
//!
//! Runs are compared by position, not by id: two runs never share event ids, but two runs
//! that took the same path have the same records in the same order, naming the same
//! sequence numbers, executions and steps. Fields are compared without the keys that name
//! ids (`*_id`), which differ between any two runs (a child's run id, a request's id).
//!
//! Pure: reads two rebuilt runs and, optionally, their events' fields; decides nothing.

use crate::ids::Seq;
use crate::record::{Origin, Record};
use crate::render::{EventLabels, bindings_text, executions_per_step, record_text};
use crate::run::{EventTy, Run};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// One side of a comparison: a run rebuilt by the core, and its events' fields by
/// sequence number when known (a stored run has them; a history file does not).
pub struct Side<'a> {
    pub run: &'a Run,
    pub fields: Option<&'a dyn Fn(Seq) -> Option<Value>>,
}

impl<'a> Side<'a> {
    /// A side without fields (a history file).
    pub fn of(run: &'a Run) -> Side<'a> {
        Side { run, fields: None }
    }
}

/// What differs first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DivergenceKind {
    /// An event from outside differs (its type or fields), or arrived on one side only.
    Event,
    /// An event a step returned differs.
    Output,
    /// The dispatcher decided otherwise on the same events (ran, skipped, failed, retried).
    Decision,
    /// The same step started, bound to other events.
    Binding,
    /// The runs ended differently, or one ended and the other went on.
    End,
}

/// The first record at which the runs differ.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Divergence {
    /// The index in both runs' decision records.
    pub record: usize,
    pub kind: DivergenceKind,
    /// Run A's record there, as `show` prints it (`None`: A has no more records).
    pub a: Option<String>,
    /// Run B's.
    pub b: Option<String>,
    /// What differs, in a sentence.
    pub detail: String,
}

/// A count on each side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Counted {
    pub name: String,
    pub a: usize,
    pub b: usize,
}

/// How two runs differ.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunDiff {
    /// `None`: the runs are the same, record for record.
    pub first: Option<Divergence>,
    /// Executions per step, for the steps whose counts differ.
    pub executions: Vec<Counted>,
    /// Logged events per type, for the types whose counts differ.
    pub events: Vec<Counted>,
    /// Where each run stands (`stopped`, `failed`, `waiting_event`, …).
    pub end_a: String,
    pub end_b: String,
    /// Records on each side.
    pub records_a: usize,
    pub records_b: usize,
}

impl RunDiff {
    /// Whether the runs are the same, record for record.
    pub fn is_same(&self) -> bool {
        self.first.is_none()
    }
}

/// Compares run `a` with run `b` (runs of one workflow: the caller checks that their
/// fingerprints agree).
pub fn diff_runs(a: &Side<'_>, b: &Side<'_>) -> RunDiff {
    let (ra, rb) = (a.run.records(), b.run.records());
    let labels_a = EventLabels::for_run(a.run, &[]);
    let labels_b = EventLabels::for_run(b.run, &[]);
    let shown = |side: &Side<'_>, labels: &EventLabels, r: &Record| {
        record_text(side.run, labels, r)
            .map(|t| t.trim().to_string())
            .unwrap_or_else(|| format!("{r:?}"))
    };
    let mut first = None;
    for i in 0..ra.len().max(rb.len()) {
        let found = match (ra.get(i), rb.get(i)) {
            (Some(x), Some(y)) => differs(a, b, &labels_a, &labels_b, &x, &y),
            (Some(x), None) => Some((end_or(&x, DivergenceKind::Event), only("A", &x))),
            (None, Some(y)) => Some((end_or(&y, DivergenceKind::Event), only("B", &y))),
            (None, None) => None,
        };
        if let Some((kind, detail)) = found {
            first = Some(Divergence {
                record: i,
                kind,
                a: ra.get(i).map(|r| shown(a, &labels_a, &r)),
                b: rb.get(i).map(|r| shown(b, &labels_b, &r)),
                detail,
            });
            break;
        }
    }
    RunDiff {
        first,
        executions: counted(executions_per_step(a.run), executions_per_step(b.run)),
        events: counted(events_per_type(a.run), events_per_type(b.run)),
        end_a: a.run.progress().as_str().to_string(),
        end_b: b.run.progress().as_str().to_string(),
        records_a: ra.len(),
        records_b: rb.len(),
    }
}

/// A record one run has and the other does not: which kind it is.
fn end_or(r: &Record, otherwise: DivergenceKind) -> DivergenceKind {
    match r {
        Record::RunTerminated { .. } => DivergenceKind::End,
        Record::EventAppended {
            origin: Origin::Execution(_),
            ..
        } => DivergenceKind::Output,
        Record::EventAppended { .. } => DivergenceKind::Event,
        Record::Candidate { .. } | Record::EventAfterStop { .. } => otherwise,
        _ => DivergenceKind::Decision,
    }
}

fn only(side: &str, r: &Record) -> String {
    let other = if side == "A" { "B" } else { "A" };
    format!(
        "run {side} goes on (`{}`) where run {other} has no more records",
        record_name(r)
    )
}

/// The record's name as `show --json` and `explain` print it (`execution_completed`).
pub fn record_name(r: &Record) -> String {
    let debug = format!("{r:?}");
    let camel = debug.split([' ', '{', '(']).next().unwrap_or_default();
    let mut snake = String::new();
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                snake.push('_');
            }
            snake.push(c.to_ascii_lowercase());
        } else {
            snake.push(c);
        }
    }
    snake
}

/// Whether records `x` (of `a`) and `y` (of `b`) at one index differ, and how.
fn differs(
    a: &Side<'_>,
    b: &Side<'_>,
    la: &EventLabels,
    lb: &EventLabels,
    x: &Record,
    y: &Record,
) -> Option<(DivergenceKind, String)> {
    if x != y {
        let kind = match (x, y) {
            (Record::EventAppended { origin: o, .. }, Record::EventAppended { .. }) => match o {
                Origin::Execution(_) => DivergenceKind::Output,
                Origin::Outside => DivergenceKind::Event,
            },
            (Record::RunTerminated { .. }, _) | (_, Record::RunTerminated { .. }) => {
                DivergenceKind::End
            }
            (Record::EventAppended { .. }, _) | (_, Record::EventAppended { .. }) => {
                end_or(x, DivergenceKind::Event)
            }
            _ => DivergenceKind::Decision,
        };
        let (nx, ny) = (record_name(x), record_name(y));
        let detail = if nx == ny {
            format!("both runs record `{nx}` here, of other events, executions or steps")
        } else {
            format!("run A records `{nx}` where run B records `{ny}`")
        };
        return Some((kind, detail));
    }
    // The same record: the events and bindings it names must be the same too.
    match x {
        Record::EventAppended { seq, origin } | Record::EventAfterStop { seq, origin } => {
            let kind = match origin {
                Origin::Execution(_) => DivergenceKind::Output,
                Origin::Outside => DivergenceKind::Event,
            };
            event_differs(a, b, *seq).map(|d| (kind, d))
        }
        Record::RunStarted { seq } | Record::OrphanEvent { seq } => {
            event_differs(a, b, *seq).map(|d| (DivergenceKind::Event, d))
        }
        Record::ExecutionStarted { execution, .. } => {
            let (ba, bb) = (
                bindings_text(a.run, la, *execution),
                bindings_text(b.run, lb, *execution),
            );
            (ba != bb).then(|| {
                (
                    DivergenceKind::Binding,
                    format!("{execution} is bound to {ba} in run A, to {bb} in run B"),
                )
            })
        }
        _ => None,
    }
}

/// Whether event `seq` differs between the runs: its type, or its fields (ids aside).
fn event_differs(a: &Side<'_>, b: &Side<'_>, seq: Seq) -> Option<String> {
    let (ea, eb) = (
        a.run.log().get(seq as usize)?,
        b.run.log().get(seq as usize)?,
    );
    let (ta, tb) = (a.run.type_name(ea.ty), b.run.type_name(eb.ty));
    if ta != tb || matches!(ea.ty, EventTy::Foreign(_)) != matches!(eb.ty, EventTy::Foreign(_)) {
        return Some(format!("event [{seq}] is a {ta} in run A, a {tb} in run B"));
    }
    let (Some(fa), Some(fb)) = (a.fields, b.fields) else {
        return None;
    };
    let (va, vb) = (without_ids(fa(seq)?), without_ids(fb(seq)?));
    if va == vb {
        return None;
    }
    Some(format!(
        "event [{seq}] ({ta}) has other fields: {}",
        field_changes(&va, &vb)
    ))
}

/// `v` without the keys that name ids (`*_id`, at any depth): they differ between runs.
fn without_ids(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(k, _)| !k.ends_with("_id") && k != "created_at")
                .map(|(k, v)| (k, without_ids(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(without_ids).collect()),
        v => v,
    }
}

/// The top-level fields that differ, as `key: A → B` (at most five, each cut short).
pub fn field_changes(a: &Value, b: &Value) -> String {
    let cut = |v: Option<&Value>| {
        let s = v.map_or("(none)".to_string(), Value::to_string);
        match s.char_indices().nth(80) {
            Some((i, _)) => format!("{}…", &s[..i]),
            None => s,
        }
    };
    let (Some(ma), Some(mb)) = (a.as_object(), b.as_object()) else {
        return format!("{} → {}", cut(Some(a)), cut(Some(b)));
    };
    let keys: std::collections::BTreeSet<&String> = ma.keys().chain(mb.keys()).collect();
    let changed: Vec<String> = keys
        .into_iter()
        .filter(|k| ma.get(*k) != mb.get(*k))
        .map(|k| format!("{k}: {} → {}", cut(ma.get(k)), cut(mb.get(k))))
        .collect();
    let more = changed.len().saturating_sub(5);
    let mut text = changed.into_iter().take(5).collect::<Vec<_>>().join("; ");
    if more > 0 {
        text.push_str(&format!("; and {more} more"));
    }
    text
}

fn events_per_type(run: &Run) -> Vec<(String, usize)> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for e in run.log() {
        *counts.entry(run.type_name(e.ty).to_string()).or_default() += 1;
    }
    counts.into_iter().collect()
}

/// The names counted differently on the two sides (a name missing on one side counts 0),
/// in `a`'s order, then `b`'s new names.
fn counted(a: Vec<(String, usize)>, b: Vec<(String, usize)>) -> Vec<Counted> {
    let mut out: Vec<Counted> = Vec::new();
    for (name, n) in &a {
        let m = b.iter().find(|(o, _)| o == name).map_or(0, |(_, m)| *m);
        out.push(Counted {
            name: name.clone(),
            a: *n,
            b: m,
        });
    }
    for (name, m) in b {
        if !a.iter().any(|(o, _)| *o == name) {
            out.push(Counted { name, a: 0, b: m });
        }
    }
    out.retain(|c| c.a != c.b);
    out
}

/// The diff as text: the first divergence with both records, then the counts that differ
/// and how each run ended.
pub fn diff_text(d: &RunDiff, name_a: &str, name_b: &str) -> String {
    let mut s = String::new();
    match &d.first {
        None => s.push_str(&format!(
            "the runs are the same: {} records each, both {}\n",
            d.records_a, d.end_a
        )),
        Some(f) => {
            s.push_str(&format!(
                "the runs diverge at record {} ({}): {}\n",
                f.record,
                serde_json::to_value(f.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
                f.detail
            ));
            let none = "(no more records)".to_string();
            s.push_str(&format!(
                "  A {name_a}: {}\n",
                f.a.as_ref().unwrap_or(&none)
            ));
            s.push_str(&format!(
                "  B {name_b}: {}\n",
                f.b.as_ref().unwrap_or(&none)
            ));
        }
    }
    if !d.executions.is_empty() {
        s.push_str("executions per step (A, B):\n");
        for c in &d.executions {
            s.push_str(&format!("  {}  {} {}\n", c.name, c.a, c.b));
        }
    }
    if !d.events.is_empty() {
        s.push_str("events per type (A, B):\n");
        for c in &d.events {
            s.push_str(&format!("  {}  {} {}\n", c.name, c.a, c.b));
        }
    }
    if d.first.is_some() {
        s.push_str(&format!(
            "end: A {} ({} records), B {} ({} records)\n",
            d.end_a, d.records_a, d.end_b, d.records_b
        ));
    }
    s
}
