//! Replay (issue 23 §1): what re-running a stored run's step bodies against its record
//! reports — whether the run was reproduced exactly, or the first place where it was not —
//! and the comparisons that find that place: a body's outcome against the recorded
//! completion, the display events it showed against the recorded ones.
//!
//! The driver is [`crate::Engine::replay_stored`] (and [`crate::Engine::replay`]): it feeds the
//! run's journal to the dispatch core again, runs each execution's body where the journal
//! completes it, with every `StepCtx::effect` answered from the run's effect journal (a
//! replay never calls a model or a tool), and evaluates preconditions anew. This module
//! decides nothing about the run and runs nothing.
//!
//! ```
//! use saap::{Engine, EngineOptions, Event, Required, SqliteBackend, Step, StepCtx, StepError};
//! use saap::{StopEvent, UserMessageEvent, Workflow};
//!
//! #[derive(Event, serde::Serialize, serde::Deserialize, Clone, Debug)]
//! #[event(parent = StopEvent)]
//! struct Answered { text: String }
//!
//! /// Asks a model (here: echoes) through a journaled effect; `shout` is a code change.
//! fn agent(shout: bool) -> Workflow {
//!     let answer = move |q: Required<UserMessageEvent>, ctx: StepCtx| async move {
//!         let text: String = ctx
//!             .effect("model", &serde_json::json!({ "q": q.message }), || async {
//!                 Ok::<_, std::io::Error>(q.message.clone())
//!             })
//!             .await?;
//!         let text = if shout { text.to_uppercase() } else { text };
//!         Ok::<_, StepError>(Answered { text })
//!     };
//!     Workflow::builder("Echo").step(Step::new("answer", answer)).build().unwrap()
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let dir = tempfile::tempdir().unwrap();
//! let store = std::sync::Arc::new(SqliteBackend::open(dir.path().join("runs.db")).unwrap());
//! let engine = Engine::new(agent(false), store, EngineOptions::default());
//! let run = engine.run(UserMessageEvent::new("hi")).await.unwrap();
//!
//! // The same code reproduces the run; the model is not asked again.
//! let report = engine.replay(&run).await.unwrap();
//! assert!(report.reproduced());
//! assert_eq!(report.effects_served, 1);
//!
//! // Changed code diverges where its outcome first differs from the record.
//! let stored = engine.backend().read_run("Echo", &run).wait().await.unwrap().unwrap();
//! let effects = engine.effects(&run).await.unwrap();
//! let changed = Engine::replay_stored(&agent(true), &stored, effects).await.unwrap();
//! let d = changed.divergence.unwrap();
//! assert_eq!(d.step.as_deref(), Some("answer"));
//! assert_eq!(d.detail, r#"output 0 (`Answered`) has other fields: text: "hi" → "HI""#);
//! # }
//! ```

use crate::backend::{StoredEvent, StoredTimer};
use crate::params::OutEvent;
use saap_dispatch::diff::field_changes;
use serde::Serialize;
use serde_json::{Value, json};

/// What a replay found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayReport {
    pub run_id: String,
    pub workflow: String,
    /// The workflow's fingerprint when the run was recorded, and now (hex). A change is not
    /// an error: where it changes a decision or an output, the replay diverges there.
    pub recorded_fingerprint: String,
    pub fingerprint: String,
    /// The run's journal entries, and how many of them the replay reproduced.
    pub journal_entries: usize,
    pub entries_reproduced: usize,
    /// The step bodies the replay ran (one per recorded completion it reached).
    pub executions_run: u32,
    /// Recorded effect outcomes the bodies were given instead of calling out.
    pub effects_served: u64,
    /// The decision records the recorded run holds, and how many the replay made the same.
    pub records: usize,
    pub records_reproduced: usize,
    /// The first place the replay did not reproduce the record; `None`: reproduced exactly.
    pub divergence: Option<ReplayDivergence>,
}

impl ReplayReport {
    /// Whether the replay reproduced the recorded run exactly.
    pub fn reproduced(&self) -> bool {
        self.divergence.is_none()
    }

    /// Whether the workflow changed since the run was recorded.
    pub fn workflow_changed(&self) -> bool {
        self.recorded_fingerprint != self.fingerprint
    }
}

/// Where a replay first departed from the record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayDivergence {
    pub kind: DivergenceKind,
    /// The journal entry being replayed (0, 1, …).
    pub entry: usize,
    /// The execution whose body departed, for an `outcome` or `display` divergence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// The decision record, for a `decision` divergence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<usize>,
    /// What the record holds here, and what the replay made instead (JSON).
    pub recorded: Value,
    pub replayed: Value,
    /// One sentence saying what differs.
    pub detail: String,
}

/// What kind of thing departed from the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DivergenceKind {
    /// A body returned other events, or failed where it returned (or the reverse), or
    /// failed with other words: its code changed, or it depends on something the record
    /// does not hold (the clock, randomness, a call not made through `StepCtx::effect`).
    Outcome,
    /// A body showed other display events (chunks, thoughts) than recorded.
    Display,
    /// The dispatch core decided otherwise (the workflow or a precondition changed).
    Decision,
    /// A recorded input no longer applies to the replayed run (a completion of an
    /// execution the workflow no longer starts, say).
    Journal,
    /// A body did not finish within the replay's limit (it waits for something a replay
    /// does not give: an outside signal, a call not made through `StepCtx::effect`).
    Stuck,
}

impl DivergenceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DivergenceKind::Outcome => "outcome",
            DivergenceKind::Display => "display",
            DivergenceKind::Decision => "decision",
            DivergenceKind::Journal => "journal",
            DivergenceKind::Stuck => "stuck",
        }
    }
}

/// Why a stored run cannot be replayed at all. A run that replays differently is not an
/// error: [`ReplayReport::divergence`] says where.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(
        "run `{run_id}` cannot be replayed: its stored rows cannot be read ({detail}); nothing of it can be compared"
    )]
    Damaged { run_id: String, detail: String },
    #[error(
        "no stored run `{run_id}` of `{workflow}` in this engine's store; list them with `runs`"
    )]
    NoRun { run_id: String, workflow: String },
    #[error(transparent)]
    Store(#[from] crate::backend::StoreError),
}

/// A body's outcome as a divergence shows it: `{"returned": [...], "delayed": [...]}` or
/// `{"failed": message}`.
fn outcome_json(returned: &[(String, Value)], delayed: &[(String, Value)]) -> Value {
    let list = |l: &[(String, Value)]| {
        l.iter()
            .map(|(name, fields)| json!({ "type": name, "fields": fields }))
            .collect::<Vec<_>>()
    };
    if delayed.is_empty() {
        json!({ "returned": list(returned) })
    } else {
        json!({ "returned": list(returned), "delayed": list(delayed) })
    }
}

fn names(l: &[(String, Value)]) -> String {
    let n: Vec<String> = l.iter().map(|(name, _)| format!("`{name}`")).collect();
    if n.is_empty() {
        "nothing".into()
    } else {
        n.join(", ")
    }
}

/// The first difference between two lists of events (type, then fields), as a sentence
/// (`what` names the list: "output", "delayed event").
fn list_difference(
    what: &str,
    recorded: &[(String, Value)],
    now: &[(String, Value)],
) -> Option<String> {
    if recorded.len() != now.len() || recorded.iter().zip(now).any(|(a, b)| a.0 != b.0) {
        return Some(format!(
            "{what}s: returns {} where the record has {}",
            names(now),
            names(recorded)
        ));
    }
    recorded
        .iter()
        .zip(now)
        .enumerate()
        .find(|(_, (a, b))| a.1 != b.1)
        .map(|(i, (a, b))| {
            format!(
                "{what} {i} (`{}`) has other fields: {}",
                a.0,
                field_changes(&a.1, &b.1)
            )
        })
}

/// Whether a body returned exactly the recorded events: the same types with the same
/// fields, in order.
fn same_events<'a, 'b>(
    recorded: impl ExactSizeIterator<Item = &'a StoredEvent>,
    now: impl Iterator<Item = &'b OutEvent>,
) -> bool {
    let expected = recorded.len();
    let mut recorded = recorded;
    let mut seen = 0;
    for o in now {
        seen += 1;
        let Some(r) = recorded.next() else {
            return false;
        };
        let same = r.name == *o.name
            && matches!((r.payload.try_json(), o.payload.try_json()), (Ok(a), Ok(b)) if a == b);
        if !same {
            return false;
        }
    }
    seen == expected
}

/// What a recorded completion holds: its error, or its outputs and timers.
pub(crate) struct RecordedOutcome<'a> {
    pub error: Option<&'a str>,
    pub outputs: &'a [StoredEvent],
    pub timers: &'a [StoredTimer],
}

/// Compares a replayed body's outcome with the recorded one: `None` when they are the
/// same, else (recorded, replayed, sentence). Events compare by type and fields (ids are
/// the same in a replay: they derive from the run, the execution and the position).
pub(crate) fn outcome_difference(
    recorded: &RecordedOutcome<'_>,
    replayed: &Result<Vec<OutEvent>, String>,
) -> Option<(Value, Value, String)> {
    // The common case first, copying nothing: the same events with the same fields.
    if recorded.error.is_none()
        && let Ok(outs) = replayed
        && same_events(
            recorded.outputs.iter(),
            outs.iter().filter(|o| o.due_ns.is_none()),
        )
        && same_events(
            recorded.timers.iter().map(|t| &t.event),
            outs.iter().filter(|o| o.due_ns.is_some()),
        )
    {
        return None;
    }
    let stored = |e: &StoredEvent| (e.name.clone(), (*e.payload).clone());
    let rec_out: Vec<(String, Value)> = recorded.outputs.iter().map(stored).collect();
    let rec_delayed: Vec<(String, Value)> =
        recorded.timers.iter().map(|t| stored(&t.event)).collect();
    let recorded_json = match recorded.error {
        Some(m) => json!({ "failed": m }),
        None => outcome_json(&rec_out, &rec_delayed),
    };
    let outs = match replayed {
        Err(m) => {
            let detail = match recorded.error {
                Some(r) if r == m => return None,
                Some(_) => "fails with other words than recorded".to_string(),
                None => format!("fails where the record returns {}: {m}", names(&rec_out)),
            };
            return Some((recorded_json, json!({ "failed": m }), detail));
        }
        Ok(outs) => outs,
    };
    let mut now_out = Vec::new();
    let mut now_delayed = Vec::new();
    for o in outs {
        let fields = match o.payload.try_json() {
            Ok(v) => v.clone(),
            Err(e) => json!({ "unwritable": e.to_string() }),
        };
        let entry = (o.name.to_string(), fields);
        if o.due_ns.is_some() {
            now_delayed.push(entry);
        } else {
            now_out.push(entry);
        }
    }
    let replayed_json = outcome_json(&now_out, &now_delayed);
    let detail = match recorded.error {
        Some(m) => Some(format!(
            "returns {} where the record fails: {m}",
            names(&now_out)
        )),
        None => list_difference("output", &rec_out, &now_out)
            .or_else(|| list_difference("delayed event", &rec_delayed, &now_delayed)),
    }?;
    Some((recorded_json, replayed_json, detail))
}

/// A display event a replayed body showed, next to the recorded one with its id (`None`:
/// the record has none). `None` when they are the same.
pub(crate) fn display_difference(
    n: u32,
    shown: &(String, Value),
    recorded: Option<(String, Value)>,
) -> Option<(Value, Value, String)> {
    let now = json!({ "type": shown.0, "fields": shown.1 });
    match recorded {
        Some(r) if r == *shown => None,
        Some(r) => {
            let detail = if r.0 != shown.0 {
                format!(
                    "display event {n} is `{}` where the record shows `{}`",
                    shown.0, r.0
                )
            } else {
                format!(
                    "display event {n} (`{}`) has other fields: {}",
                    r.0,
                    field_changes(&r.1, &shown.1)
                )
            };
            Some((json!({ "type": r.0, "fields": r.1 }), now, detail))
        }
        None => Some((
            Value::Null,
            now,
            format!(
                "shows display event {n} (`{}`), which the record does not hold",
                shown.0
            ),
        )),
    }
}

/// A report as text: the verdict, the divergence with both sides, the counts.
pub fn report_text(r: &ReplayReport) -> String {
    let mut out = String::new();
    let short = |s: &str| s.chars().take(12).collect::<String>();
    if r.workflow_changed() {
        out.push_str(&format!(
            "note: workflow `{}` changed since this run was recorded (fingerprint {}, now {})\n",
            r.workflow, r.recorded_fingerprint, r.fingerprint
        ));
    }
    match &r.divergence {
        None => out.push_str(&format!(
            "run {}: reproduced — {} journal entries, {} decision records the same\n",
            r.run_id, r.journal_entries, r.records
        )),
        Some(d) => {
            out.push_str(&format!(
                "run {}: diverged at journal entry {} of {} ({})\n",
                r.run_id,
                d.entry,
                r.journal_entries,
                d.kind.as_str()
            ));
            let who = match (&d.step, d.execution, d.attempt, d.record) {
                (Some(step), Some(x), Some(a), _) => {
                    format!("  execution x{x} of step `{step}` (attempt {a}) ")
                }
                (_, _, _, Some(rec)) => format!("  record {rec}: "),
                _ => "  ".to_string(),
            };
            out.push_str(&format!("{who}{}\n", d.detail));
            let cut = |v: &Value| {
                let s = v.to_string();
                match s.char_indices().nth(400) {
                    Some((i, _)) => format!("{}…", &s[..i]),
                    None => s,
                }
            };
            out.push_str(&format!("  recorded: {}\n", cut(&d.recorded)));
            out.push_str(&format!("  replayed: {}\n", cut(&d.replayed)));
        }
    }
    out.push_str(&format!(
        "{} step bodies run, {} recorded effect outcomes given to them (no model or tool called), {} of {} decision records reproduced (run {})\n",
        r.executions_run,
        r.effects_served,
        r.records_reproduced,
        r.records,
        short(&r.run_id)
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Payload;

    fn stored(name: &str, fields: Value) -> StoredEvent {
        StoredEvent {
            id: saap_dispatch::EventId::from_bytes([1; 12]),
            name: name.into(),
            kind: 0,
            payload: Payload::from_json(fields),
        }
    }

    fn out(name: &'static str, fields: Value) -> OutEvent {
        OutEvent {
            name: name.into(),
            payload: Payload::from_json(fields),
            due_ns: None,
        }
    }

    #[test]
    fn a_body_that_returns_what_was_recorded_does_not_diverge() {
        let rec = [stored("Answered", json!({"text": "HI"}))];
        let recorded = RecordedOutcome {
            error: None,
            outputs: &rec,
            timers: &[],
        };
        let same = Ok(vec![out("Answered", json!({"text": "HI"}))]);
        assert!(outcome_difference(&recorded, &same).is_none());
    }

    #[test]
    fn other_fields_other_types_and_failures_are_named() {
        let rec = [stored("Answered", json!({"text": "HI"}))];
        let recorded = RecordedOutcome {
            error: None,
            outputs: &rec,
            timers: &[],
        };
        let (_, now, detail) =
            outcome_difference(&recorded, &Ok(vec![out("Answered", json!({"text": "hi"}))]))
                .expect("differs");
        assert_eq!(
            detail,
            r#"output 0 (`Answered`) has other fields: text: "HI" → "hi""#
        );
        assert_eq!(now["returned"][0]["fields"]["text"], "hi");
        let (_, _, detail) =
            outcome_difference(&recorded, &Ok(vec![out("Refused", json!({}))])).expect("differs");
        assert_eq!(
            detail,
            "outputs: returns `Refused` where the record has `Answered`"
        );
        let (_, now, detail) = outcome_difference(&recorded, &Err("boom".into())).expect("differs");
        assert_eq!(detail, "fails where the record returns `Answered`: boom");
        assert_eq!(now, json!({"failed": "boom"}));
        let failed = RecordedOutcome {
            error: Some("boom"),
            outputs: &[],
            timers: &[],
        };
        assert!(outcome_difference(&failed, &Err("boom".into())).is_none());
        assert!(outcome_difference(&failed, &Err("bang".into())).is_some());
    }

    #[test]
    fn a_display_event_the_record_lacks_or_holds_otherwise_is_named() {
        let shown = ("ChunkEvent".to_string(), json!({"text": "a"}));
        assert!(display_difference(0, &shown, Some(shown.clone())).is_none());
        let (_, _, d) = display_difference(1, &shown, None).expect("differs");
        assert_eq!(
            d,
            "shows display event 1 (`ChunkEvent`), which the record does not hold"
        );
        let other = ("ChunkEvent".to_string(), json!({"text": "b"}));
        let (_, _, d) = display_difference(0, &shown, Some(other)).expect("differs");
        assert_eq!(
            d,
            r#"display event 0 (`ChunkEvent`) has other fields: text: "b" → "a""#
        );
    }
}
