//! Reading one recorded run, bounded: from a store (its journal rows, a page at a time) or a
//! NATS server (the run's subject of the class's `saap_journal_{Class}` stream when a saap
//! worker wrote it, else its subjects of the agent class stream), and the agent's spec from a
//! saap worker's class discovery answer.
//!
//! Must not read more than the run's own rows or subjects, nor more than
//! [`MAX_RUN_ENTRIES`] of them (`SAAP-I014`); a message or row that does not decode fails the
//! read with where it is (`SAAP-I015`). Writes nothing; the discovery request
//! ([`NatsInspector::discover_spec`]) is the one message it publishes, on core NATS, where no
//! SAAP stream stores it.

use super::{EventRun, JournalRow, JournalRun, MAX_RUN_ENTRIES, RecordedRun, WireEvent};
use crate::error::{InspectError, Result, clip, invalid};
use crate::nats::view::{Flow, Start, to_message};
use crate::nats::{NatsInspector, role_of, server_err};
use crate::query::check_token;
use crate::store::StoreInspector;
use rusqlite::{OptionalExtension, params};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashSet;

/// Rows or messages read per page.
const PAGE: usize = 1000;

fn too_large(run_id: &str, what: &str) -> InspectError {
    InspectError::RunTooLarge {
        run: clip(run_id),
        max: MAX_RUN_ENTRIES,
        what: what.to_owned(),
    }
}

impl StoreInspector {
    /// The run's journal with its decision records, read a page at a time; more than
    /// [`MAX_RUN_ENTRIES`] entries are refused (`SAAP-I014`).
    pub fn recorded_run(&self, run_id: &str) -> Result<RecordedRun> {
        self.recorded_run_within(run_id, MAX_RUN_ENTRIES)
    }

    fn recorded_run_within(&self, run_id: &str, max: usize) -> Result<RecordedRun> {
        check_token("RUN", run_id)?;
        let meta: Option<(String, String, i64)> = self
            .conn()
            .query_row(
                "SELECT workflow, thread_id, fingerprint FROM runs WHERE run_id = ?1",
                params![run_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let Some((workflow, thread_id, fingerprint)) = meta else {
            return Err(InspectError::NoRun {
                run: clip(run_id),
                place: format!("the store {}", self.shown()),
            });
        };
        let mut entries: Vec<JournalRow> = Vec::new();
        let mut stmt = self
            .conn()
            .prepare(
                "SELECT idx, input, records FROM journal WHERE run_id = ?1 AND idx >= ?2 ORDER BY idx LIMIT ?3",
            )
            .map_err(|e| self.err(e))?;
        loop {
            let from = entries.last().map_or(0, |r| r.index as i64 + 1);
            let rows: Vec<(i64, String, String)> = stmt
                .query_map(params![run_id, from, PAGE as i64], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .and_then(|rows| rows.collect())
                .map_err(|e| self.err(e))?;
            let n = rows.len();
            for (idx, input, records) in rows {
                if entries.len() >= max {
                    return Err(InspectError::RunTooLarge {
                        run: clip(run_id),
                        max,
                        what: "journal entries".to_owned(),
                    });
                }
                let bad = |what: &str, e: serde_json::Error| InspectError::UndecodableRun {
                    run: clip(run_id),
                    at: format!("{what} of journal entry {idx}"),
                    reason: e.to_string(),
                };
                entries.push(JournalRow {
                    index: idx.max(0) as u64,
                    entry: serde_json::from_str(&input).map_err(|e| bad("the input", e))?,
                    records: serde_json::from_str(&records)
                        .map_err(|e| bad("the decision records", e))?,
                });
            }
            if n < PAGE {
                break;
            }
        }
        Ok(RecordedRun {
            run_id: run_id.to_owned(),
            place: format!("the store {}", self.shown()),
            body: super::Recorded::Journal(JournalRun {
                workflow,
                thread_id,
                fingerprint: fingerprint as u64,
                entries,
            }),
        })
    }
}

#[derive(Deserialize)]
struct WireMeta {
    t: String,
    w: String,
    f: u64,
}

#[derive(Deserialize)]
struct WireEntry {
    x: u64,
    e: Value,
    #[serde(default)]
    r: Value,
}

/// One message of a `saap_journal_{Class}` stream (the runtime's NATS journal).
#[derive(Deserialize)]
struct WireBatch {
    #[serde(default)]
    m: Option<WireMeta>,
    b: Vec<WireEntry>,
}

impl NatsInspector {
    /// The run: its saap journal when a saap worker recorded it (`saap_journal_{Class}`),
    /// else its events in the agent class stream. `stream` names either stream; without it
    /// they are found from the run's subjects.
    pub async fn recorded_run(&self, run_id: &str, stream: Option<&str>) -> Result<RecordedRun> {
        check_token("RUN", run_id)?;
        let classes: Vec<String> = match stream {
            Some(s) => match role_of(s) {
                (role, Some(class)) if role == "agent_class" || role == "journal" => vec![class],
                _ => {
                    return Err(invalid(format!(
                        "`{}` is neither an agent class stream (agent_{{Class}}_stream) nor a saap journal stream (saap_journal_{{Class}})",
                        clip(s)
                    )));
                }
            },
            None => {
                let mut found = Vec::new();
                for name in self
                    .streams_for_subject(&format!("agent.*.*.*.*.{run_id}.*.*.*"))
                    .await?
                    .into_iter()
                    .chain(
                        self.streams_for_subject(&format!("saap.journal.*.{run_id}"))
                            .await?,
                    )
                {
                    if let (_, Some(class)) = role_of(&name)
                        && !found.contains(&class)
                    {
                        found.push(class);
                    }
                }
                found
            }
        };
        for class in classes.iter().take(64) {
            if let Some(j) = self.journal_of(run_id, class).await? {
                return Ok(j);
            }
        }
        for class in classes.iter().take(64) {
            if let Some(e) = self.events_of(run_id, class).await? {
                return Ok(e);
            }
        }
        Err(InspectError::NoRun {
            run: clip(run_id),
            place: match stream {
                Some(s) => format!("stream `{}`", clip(s)),
                None => format!("any agent class or journal stream of {}", self.url()),
            },
        })
    }

    async fn journal_of(&self, run_id: &str, class: &str) -> Result<Option<RecordedRun>> {
        let name = format!("saap_journal_{class}");
        let stream = match self.stream(&name).await {
            Ok(s) => s,
            Err(InspectError::NoStream { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        if stream.cached_info().state.messages == 0 {
            return Ok(None);
        }
        let mut meta: Option<WireMeta> = None;
        let mut entries: Vec<JournalRow> = Vec::new();
        let mut failure: Option<InspectError> = None;
        self.read(
            &stream,
            Some(&format!("saap.journal.{class}.{run_id}")),
            Start::All,
            |m| {
                let seq = m.info().map(|i| i.stream_sequence).unwrap_or(0);
                let batch: WireBatch = match serde_json::from_slice(&m.payload) {
                    Ok(b) => b,
                    Err(e) => {
                        failure = Some(InspectError::UndecodableRun {
                            run: clip(run_id),
                            at: format!("message {seq} of {name}"),
                            reason: e.to_string(),
                        });
                        return Flow::Stop;
                    }
                };
                if meta.is_none() {
                    meta = batch.m;
                }
                for w in batch.b {
                    if entries.len() == MAX_RUN_ENTRIES {
                        failure = Some(too_large(run_id, "journal entries"));
                        return Flow::Stop;
                    }
                    let records = match w.r {
                        Value::Array(rs) => rs,
                        Value::Null => Vec::new(),
                        other => {
                            failure = Some(InspectError::UndecodableRun {
                                run: clip(run_id),
                                at: format!("journal entry {} in message {seq} of {name}", w.x),
                                reason: format!(
                                    "the records are not a list: {}",
                                    clip(&other.to_string())
                                ),
                            });
                            return Flow::Stop;
                        }
                    };
                    entries.push(JournalRow {
                        index: w.x,
                        entry: w.e,
                        records,
                    });
                }
                Flow::Continue
            },
            PAGE,
        )
        .await?;
        if let Some(e) = failure {
            return Err(e);
        }
        if entries.is_empty() {
            return Ok(None);
        }
        let Some(meta) = meta else {
            return Err(InspectError::UndecodableRun {
                run: clip(run_id),
                at: format!("the first message of the run in {name}"),
                reason: "it carries no run metadata (thread, workflow, fingerprint)".to_owned(),
            });
        };
        Ok(Some(RecordedRun {
            run_id: run_id.to_owned(),
            place: format!("the journal stream {name} on {}", self.url()),
            body: super::Recorded::Journal(JournalRun {
                workflow: meta.w,
                thread_id: meta.t,
                fingerprint: meta.f,
                entries,
            }),
        }))
    }

    async fn events_of(&self, run_id: &str, class: &str) -> Result<Option<RecordedRun>> {
        let name = format!("agent_{class}_stream");
        let stream = match self.stream(&name).await {
            Ok(s) => s,
            Err(InspectError::NoStream { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut events: Vec<WireEvent> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        let mut failure: Option<InspectError> = None;
        self.read(
            &stream,
            Some(&format!("agent.{class}.*.*.*.{run_id}.*.*.*")),
            Start::All,
            |m| {
                let msg = to_message(m);
                if let Some(u) = &msg.undecodable {
                    failure = Some(InspectError::UndecodableRun {
                        run: clip(run_id),
                        at: format!("message {} of {name}", msg.seq),
                        reason: format!("{}: {}", u.kind, u.reason),
                    });
                    return Flow::Stop;
                }
                let Some(e) = msg.event else {
                    return Flow::Continue;
                };
                // The display copy of a control event is the same event again.
                let display_copy = msg.address.kind.as_deref() == Some("display_event");
                if (display_copy && e.flags.control) || !seen.insert(e.event_id.clone()) {
                    return Flow::Continue;
                }
                if events.len() == MAX_RUN_ENTRIES {
                    failure = Some(too_large(run_id, "events"));
                    return Flow::Stop;
                }
                events.push(WireEvent {
                    seq: msg.seq,
                    event_id: e.event_id,
                    name: e.event_name,
                    flags: e.flags,
                    created_at: e.created_at,
                    json: e.json,
                });
                Flow::Continue
            },
            PAGE,
        )
        .await?;
        if let Some(e) = failure {
            return Err(e);
        }
        if events.is_empty() {
            return Ok(None);
        }
        Ok(Some(RecordedRun {
            run_id: run_id.to_owned(),
            place: format!("the agent class stream {name} on {}", self.url()),
            body: super::Recorded::Events(EventRun {
                agent_class: class.to_owned(),
                stream: name,
                events,
            }),
        }))
    }

    /// The workflow spec a saap worker of `agent_class` answers to class discovery
    /// (`workflow_spec` of its `AgentClassDiscoveryResponseEvent`), waiting at most the request
    /// timeout. `None` when no worker answers or the answer carries no spec (a Python agent's
    /// does not).
    pub async fn discover_spec(&self, agent_class: &str) -> Result<Option<Value>> {
        let call_id = saap_nats::ids::fresh_event_id().to_string();
        let found = self
            .nats()
            .discover_classes(Some(agent_class), &call_id, Some(1), self.wait())
            .await
            .map_err(|e| server_err("the class discovery request", e))?;
        Ok(found
            .into_iter()
            .find(|d| d.agent_class == agent_class)
            .and_then(|d| d.event.to_json().get("workflow_spec").cloned()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::recorded::Recorded;

    /// A store with the documented schema and one run of `n` journal entries (the second
    /// entry's records are damaged when `damaged`).
    fn store(n: usize, damaged: bool) -> (tempfile::TempDir, StoreInspector) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "CREATE TABLE saap_meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);
             CREATE TABLE runs(run_id TEXT PRIMARY KEY, workflow TEXT NOT NULL, thread_id TEXT NOT NULL,
                fingerprint INTEGER NOT NULL, ended INTEGER NOT NULL DEFAULT 0,
                created_ns INTEGER NOT NULL, outcome TEXT);
             CREATE TABLE journal(run_id TEXT NOT NULL, idx INTEGER NOT NULL, input TEXT NOT NULL,
                records TEXT NOT NULL);
             INSERT INTO saap_meta VALUES ('schema', 2);
             INSERT INTO runs VALUES ('r1', 'W', 't1', -5, 0, 1, NULL);",
        )
        .unwrap();
        for i in 0..n {
            let records = if damaged && i == 1 { "[oops" } else { "[]" };
            c.execute(
                "INSERT INTO journal VALUES ('r1', ?1, '{\"i\":{\"in\":\"retry\",\"execution\":0}}', ?2)",
                params![i as i64, records],
            )
            .unwrap();
        }
        drop(c);
        let s = StoreInspector::open(&path).unwrap();
        (dir, s)
    }

    #[test]
    fn a_run_is_read_whole_across_pages_up_to_the_bound() {
        let (_d, s) = store(PAGE + 5, false);
        let r = s.recorded_run("r1").unwrap();
        let Recorded::Journal(j) = &r.body else {
            panic!("not a journal")
        };
        assert_eq!(j.entries.len(), PAGE + 5);
        assert_eq!(j.entries.last().unwrap().index, (PAGE + 4) as u64);
        assert_eq!(j.fingerprint, (-5i64) as u64);
        let e = s.recorded_run_within("r1", PAGE).unwrap_err();
        assert_eq!(e.code(), "SAAP-I014");
        assert!(
            e.to_string()
                .contains(&format!("more than {PAGE} journal entries")),
            "{e}"
        );
        assert_eq!(s.recorded_run("r2").unwrap_err().code(), "SAAP-I007");
        assert_eq!(s.recorded_run("a.b").unwrap_err().code(), "SAAP-I008");
    }

    #[test]
    fn a_damaged_row_is_named() {
        let (_d, s) = store(3, true);
        let e = s.recorded_run("r1").unwrap_err();
        assert_eq!(e.code(), "SAAP-I015");
        assert!(e.to_string().contains("journal entry 1"), "{e}");
    }
}
