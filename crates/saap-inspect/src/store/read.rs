//! Reads of a store's rows: journal pages in arrival order (`view`), one entry (`get`), runs
//! newest first (`runs`), one run's journal (`run`) and the two context tables as KV buckets.
//!
//! Must not write, and must not read more rows than a page plus one (except the bounded
//! counts of `stream`): every query is keyed by row id, run id or the runs listing index and
//! ends with a `LIMIT`.

use super::StoreInspector;
use crate::decode::{journal_entry, undecodable};
use crate::error::{InspectError, Result, clip, invalid};
use crate::model::{
    Address, BucketSummary, KeyList, KvValue, Message, Page, RunList, RunStatus, RunSummary,
    RunTimeline,
};
use crate::nats::kv::value_json;
use crate::query::{MAX_KEYS, RunsQuery, ViewQuery, check_token};
use crate::timefmt::format_ns;
use rusqlite::types::Value as Sql;
use rusqlite::{OptionalExtension, params, params_from_iter};
use serde_json::Value;

/// One journal row as read.
struct Row {
    seq: i64,
    run_id: String,
    idx: i64,
    input: String,
    records: String,
    thread_id: String,
    workflow: String,
}

impl Row {
    fn message(&self) -> Message {
        let address = Address {
            agent_class: Some(self.workflow.clone()),
            thread_id: Some(self.thread_id.clone()),
            run_id: Some(self.run_id.clone()),
            ..Default::default()
        };
        let mut m = Message {
            seq: self.seq.max(0) as u64,
            time: None,
            subject: None,
            address,
            headers: Vec::new(),
            event: None,
            journal: Vec::new(),
            undecodable: None,
            after_stop: false,
        };
        let entry = serde_json::from_str::<Value>(&self.input);
        let records = serde_json::from_str::<Vec<Value>>(&self.records);
        match (entry, records) {
            (Ok(entry), Ok(records)) => {
                let (view, event) = journal_entry(self.idx.max(0) as u64, &entry, records);
                if let Some(e) = &event {
                    m.time = e.created.clone();
                    m.address.event_name = Some(e.event_name.clone());
                    m.address.kind = Some(
                        if e.flags.control {
                            "control_event"
                        } else {
                            "display_event"
                        }
                        .to_owned(),
                    );
                }
                m.event = event;
                m.journal.push(view);
            }
            (Err(e), _) | (_, Err(e)) => {
                let text = format!("{}\n{}", self.input, self.records);
                m.undecodable = Some(undecodable(
                    "bad_journal_row",
                    format!("journal entry {} of run {}: {e}", self.idx, self.run_id),
                    text.as_bytes(),
                ));
            }
        }
        m
    }
}

/// `CROSS JOIN` keeps the journal the outer loop (SQLite does not reorder it), so a page walks
/// the journal in row-id order from its start and stops at the limit; with a plain join the
/// planner may start from the workflow's runs and sort every entry of theirs first.
const ROW_COLUMNS: &str = "j.rowid, j.run_id, j.idx, j.input, j.records, r.thread_id, r.workflow FROM journal j CROSS JOIN runs r ON r.run_id = j.run_id";

fn map_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok(Row {
        seq: r.get(0)?,
        run_id: r.get(1)?,
        idx: r.get(2)?,
        input: r.get(3)?,
        records: r.get(4)?,
        thread_id: r.get(5)?,
        workflow: r.get(6)?,
    })
}

impl StoreInspector {
    fn need_order(&self) -> Result<()> {
        if self.rowid_journal {
            Ok(())
        } else {
            Err(invalid(
                "this store's journal was made by an earlier saap and keeps no arrival order across runs; read it per run with `saap inspect run RUN --db …`",
            ))
        }
    }

    fn journal_bounds(&self) -> Result<(u64, u64)> {
        let (a, b): (Option<i64>, Option<i64>) = self
            .conn()
            // Two subqueries: SQLite answers a lone min() or max() from the b-tree's ends, but
            // both in one SELECT scan the whole table.
            .query_row(
                "SELECT (SELECT min(rowid) FROM journal), (SELECT max(rowid) FROM journal)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(|e| self.err(e))?;
        Ok((a.unwrap_or(0).max(0) as u64, b.unwrap_or(0).max(0) as u64))
    }

    fn check_workflow(&self, workflow: &str) -> Result<()> {
        let found: Option<i64> = self
            .conn()
            .query_row(
                "SELECT 1 FROM runs WHERE workflow = ?1 LIMIT 1",
                params![workflow],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        match found {
            Some(_) => Ok(()),
            None => Err(InspectError::NoStream {
                stream: clip(workflow),
            }),
        }
    }

    /// `view WORKFLOW`: a page of its journal in arrival order. `--event` and `--kind` select
    /// the entries that append such an event (from outside, or among an execution's outputs).
    /// A store keeps no time per entry, so `--since`/`--until` are refused, as is `--subject`.
    pub fn view(&self, workflow: &str, q: &ViewQuery) -> Result<Page> {
        q.check()?;
        self.need_order()?;
        if q.subject.is_some() {
            return Err(invalid(
                "--subject selects NATS subjects; a store is filtered with --run/--thread/--event/--kind",
            ));
        }
        if q.since_ns.is_some() || q.until_ns.is_some() {
            return Err(invalid(
                "a saap store keeps no time per journal entry, so --since/--until cannot select in it; select with --run or page with --from",
            ));
        }
        let limit = q.page_size()?;
        self.check_workflow(workflow)?;
        let mut sql = format!("SELECT {ROW_COLUMNS} WHERE r.workflow = ?");
        let mut args: Vec<Sql> = vec![Sql::Text(workflow.to_owned())];
        let start = match q.last {
            Some(n) => {
                if q.has_agent_filter() {
                    return Err(invalid(
                        "--last counts back over the whole journal; with a filter, use --since or --from",
                    ));
                }
                let s: Option<i64> = self
                    .conn()
                    .query_row(
                        "SELECT j.rowid FROM journal j CROSS JOIN runs r ON r.run_id = j.run_id WHERE r.workflow = ?1 ORDER BY j.rowid DESC LIMIT 1 OFFSET ?2",
                        params![workflow, (n.max(1) - 1).min(i64::MAX as u64) as i64],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(|e| self.err(e))?;
                s.unwrap_or(0)
            }
            None => q.from_seq.unwrap_or(0).min(i64::MAX as u64) as i64,
        };
        sql.push_str(" AND j.rowid >= ?");
        args.push(Sql::Integer(start));
        if let Some(run) = &q.run {
            sql.push_str(" AND j.run_id = ?");
            args.push(Sql::Text(run.clone()));
        }
        if let Some(t) = &q.thread {
            sql.push_str(" AND r.thread_id = ?");
            args.push(Sql::Text(t.clone()));
        }
        // An entry's events: the appended one, or an execution's outputs.
        const EVENTS: &str = "(SELECT json_extract(j.input, '$.i.event') AS e UNION ALL \
             SELECT value FROM json_each(j.input, '$.i.outputs'))";
        if let Some(n) = &q.event_name {
            sql.push_str(&format!(
                " AND EXISTS (SELECT 1 FROM {EVENTS} WHERE json_extract(e, '$.n') = ?)"
            ));
            args.push(Sql::Text(n.clone()));
        }
        match q.kind.as_deref() {
            Some("control_event") => sql.push_str(&format!(
                " AND EXISTS (SELECT 1 FROM {EVENTS} WHERE (json_extract(e, '$.k') & 1) != 0)"
            )),
            Some("display_event") => sql.push_str(&format!(
                " AND EXISTS (SELECT 1 FROM {EVENTS} WHERE (json_extract(e, '$.k') & 3) = 2)"
            )),
            _ => {}
        }
        sql.push_str(" ORDER BY j.rowid LIMIT ?");
        args.push(Sql::Integer(limit as i64 + 1));
        let mut stmt = self.conn().prepare(&sql).map_err(|e| self.err(e))?;
        let rows: Vec<Row> = stmt
            .query_map(params_from_iter(args), map_row)
            .and_then(|rows| rows.collect())
            .map_err(|e| self.err(e))?;
        let more = rows.len() > limit;
        let next_seq = rows.get(limit).map(|r| r.seq.max(0) as u64);
        let messages: Vec<Message> = rows.iter().take(limit).map(Row::message).collect();
        let undecodable = messages.iter().filter(|m| m.undecodable.is_some()).count() as u64;
        Ok(Page {
            stream: workflow.to_owned(),
            filter: None,
            messages,
            undecodable,
            more,
            next_seq,
            last_seq: self.journal_bounds()?.1,
        })
    }

    /// `get WORKFLOW SEQ`: one journal entry by its row id.
    pub fn get(&self, workflow: &str, seq: u64) -> Result<Message> {
        self.need_order()?;
        self.check_workflow(workflow)?;
        let row = self
            .conn()
            .query_row(
                &format!("SELECT {ROW_COLUMNS} WHERE j.rowid = ?1 AND r.workflow = ?2"),
                params![seq.min(i64::MAX as u64) as i64, workflow],
                map_row,
            )
            .optional()
            .map_err(|e| self.err(e))?;
        match row {
            Some(r) => Ok(r.message()),
            None => {
                let (first, last) = self.journal_bounds()?;
                Err(InspectError::NoMessage {
                    stream: workflow.to_owned(),
                    seq,
                    first,
                    last,
                })
            }
        }
    }

    /// `runs`: runs newest first (of one workflow, or all), by status, paged with `after`.
    pub fn runs(&self, workflow: Option<&str>, q: &RunsQuery) -> Result<RunList> {
        let limit = q.page_size()?;
        let status = q.status_filter()?;
        if let Some(w) = workflow {
            self.check_workflow(w)?;
        }
        let mut sql = String::from(
            "SELECT run_id, thread_id, ended, outcome, created_ns, workflow FROM runs WHERE 1 = 1",
        );
        let mut args: Vec<Sql> = Vec::new();
        if let Some(w) = workflow {
            sql.push_str(" AND workflow = ?");
            args.push(Sql::Text(w.to_owned()));
        }
        sql.push_str(match status {
            None => "",
            Some(RunStatus::Live) => " AND ended = 0",
            Some(RunStatus::Stopped) => " AND ended = 1 AND outcome = 'stop'",
            Some(RunStatus::Failed) => " AND ended = 1 AND outcome = 'exception'",
        });
        if let Some(a) = &q.after {
            check_token("--after", a)?;
            sql.push_str(
                " AND (created_ns, run_id) < (SELECT created_ns, run_id FROM runs WHERE run_id = ?)",
            );
            args.push(Sql::Text(a.clone()));
        }
        sql.push_str(" ORDER BY created_ns DESC, run_id DESC LIMIT ?");
        args.push(Sql::Integer(limit as i64 + 1));
        let mut stmt = self.conn().prepare(&sql).map_err(|e| self.err(e))?;
        type RunRow = (String, String, i64, Option<String>, i64, String);
        let rows: Vec<RunRow> = stmt
            .query_map(params_from_iter(args), |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ))
            })
            .and_then(|rows| rows.collect())
            .map_err(|e| self.err(e))?;
        let more = rows.len() > limit;
        let mut runs = Vec::with_capacity(rows.len().min(limit));
        for (run_id, thread_id, ended, outcome, created_ns, wf) in rows.into_iter().take(limit) {
            runs.push(self.run_summary(run_id, thread_id, ended != 0, outcome, created_ns, wf)?);
        }
        Ok(RunList {
            stream: workflow.unwrap_or("*").to_owned(),
            next: if more {
                runs.last().map(|r: &RunSummary| r.run_id.clone())
            } else {
                None
            },
            more,
            scanned: None,
            runs,
        })
    }

    fn run_summary(
        &self,
        run_id: String,
        thread_id: String,
        ended: bool,
        outcome: Option<String>,
        created_ns: i64,
        workflow: String,
    ) -> Result<RunSummary> {
        // The end of the run's journal: its length and last entry (one index seek).
        let last: Option<(i64, String)> = self
            .conn()
            .query_row(
                "SELECT idx, input FROM journal WHERE run_id = ?1 ORDER BY idx DESC LIMIT 1",
                params![&run_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let (entries, last_event, last_time) = match &last {
            Some((idx, input)) => {
                let v: Value = serde_json::from_str(input).unwrap_or(Value::Null);
                let (j, ev) = journal_entry(*idx as u64, &v, Vec::new());
                let ev = ev.or_else(|| j.outputs.last().cloned());
                (
                    (*idx + 1).max(0) as u64,
                    ev.as_ref().map(|e| e.event_name.clone()),
                    ev.and_then(|e| e.created),
                )
            }
            None => (0, None, None),
        };
        let status = match (ended, outcome.as_deref()) {
            (false, _) => RunStatus::Live,
            (true, Some("exception")) => RunStatus::Failed,
            (true, _) => RunStatus::Stopped,
        };
        Ok(RunSummary {
            run_id,
            thread_id: Some(thread_id),
            agent_class: Some(workflow),
            status,
            ended_by: None,
            started: Some(format_ns(created_ns)),
            last: last_time,
            events: entries,
            after_stop: 0,
            last_event,
            partial: false,
        })
    }

    /// `run RUN`: its journal entries in order from row `from_seq`, a page of `limit`.
    pub fn run(&self, run_id: &str, from_seq: Option<u64>, limit: usize) -> Result<RunTimeline> {
        check_token("RUN", run_id)?;
        let q = ViewQuery {
            limit,
            ..Default::default()
        };
        let limit = q.page_size()?;
        let meta: Option<(String, i64, Option<String>, i64, String)> = self
            .conn()
            .query_row(
                "SELECT thread_id, ended, outcome, created_ns, workflow FROM runs WHERE run_id = ?1",
                params![run_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let Some((thread_id, ended, outcome, created_ns, workflow)) = meta else {
            return Err(InspectError::NoRun {
                run: clip(run_id),
                place: format!("the store {}", self.shown()),
            });
        };
        let seq = if self.rowid_journal {
            "j.rowid"
        } else {
            "j.idx"
        };
        let sql = format!(
            "SELECT {} WHERE j.run_id = ?1 AND {seq} >= ?2 ORDER BY j.idx LIMIT ?3",
            ROW_COLUMNS.replacen("j.rowid", seq, 1)
        );
        let mut stmt = self.conn().prepare(&sql).map_err(|e| self.err(e))?;
        let rows: Vec<Row> = stmt
            .query_map(
                params![
                    run_id,
                    from_seq.unwrap_or(0).min(i64::MAX as u64) as i64,
                    limit as i64 + 1
                ],
                map_row,
            )
            .and_then(|rows| rows.collect())
            .map_err(|e| self.err(e))?;
        let more = rows.len() > limit;
        let next_seq = rows.get(limit).map(|r| r.seq.max(0) as u64);
        let mut messages: Vec<Message> = rows.iter().take(limit).map(Row::message).collect();
        let mut ended_by = None;
        let mut after = 0;
        for m in &mut messages {
            let outputs = m.journal.iter().flat_map(|j| j.outputs.iter());
            for e in m.event.iter().chain(outputs) {
                if !e.flags.control {
                    continue;
                }
                if ended_by.is_some() {
                    m.after_stop = true;
                    after += 1;
                } else if e.flags.is_terminal() {
                    ended_by = Some(e.event_name.clone());
                }
            }
        }
        let mut run = self.run_summary(
            run_id.to_owned(),
            thread_id,
            ended != 0,
            outcome,
            created_ns,
            workflow.clone(),
        )?;
        run.ended_by = ended_by;
        run.after_stop = after;
        Ok(RunTimeline {
            run,
            stream: workflow,
            messages,
            more,
            next_seq,
        })
    }

    /// `kv`: the two context tables as buckets.
    pub fn buckets(&self) -> Result<Vec<BucketSummary>> {
        let mut out = Vec::new();
        for (bucket, table) in [
            ("run_context", "run_context"),
            ("thread_context", "thread_context"),
        ] {
            let (n, bytes): (i64, i64) = self
                .conn()
                .query_row(
                    &format!("SELECT count(*), coalesce(sum(length(value)), 0) FROM {table}"),
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(|e| self.err(e))?;
            out.push(BucketSummary {
                bucket: bucket.to_owned(),
                values: n.max(0) as u64,
                bytes: bytes.max(0) as u64,
                history: 1,
                ttl_seconds: 0,
            });
        }
        Ok(out)
    }

    fn table(&self, bucket: &str) -> Result<(&'static str, &'static str)> {
        match bucket {
            "run_context" => Ok(("run_context", "run_id")),
            "thread_context" => Ok(("thread_context", "thread_id")),
            other => Err(InspectError::NoBucket {
                bucket: clip(other),
            }),
        }
    }

    /// `kv BUCKET`: keys as `{run or thread id}/{key}`, sorted, at most `limit`.
    pub fn keys(&self, bucket: &str, limit: usize) -> Result<KeyList> {
        let limit = limit.clamp(1, MAX_KEYS);
        let (table, scope) = self.table(bucket)?;
        let mut stmt = self
            .conn()
            .prepare(&format!(
                "SELECT {scope} || '/' || key FROM {table} ORDER BY {scope}, key LIMIT ?1"
            ))
            .map_err(|e| self.err(e))?;
        let mut keys: Vec<String> = stmt
            .query_map(params![limit as i64 + 1], |r| r.get(0))
            .and_then(|rows| rows.collect())
            .map_err(|e| self.err(e))?;
        let truncated = keys.len() > limit;
        keys.truncate(limit);
        Ok(KeyList {
            bucket: bucket.to_owned(),
            keys,
            truncated,
        })
    }

    /// `kv BUCKET KEY`: one value (`KEY` is `{run or thread id}/{key}`).
    pub fn value(&self, bucket: &str, key: &str) -> Result<KvValue> {
        let (table, scope) = self.table(bucket)?;
        let Some((id, k)) = key.split_once('/') else {
            return Err(invalid(format!(
                "a store's context key is `{{{scope}}}/{{key}}` (as `saap inspect kv {bucket} --db …` lists them), not `{}`",
                clip(key)
            )));
        };
        let text: Option<String> = self
            .conn()
            .query_row(
                &format!("SELECT value FROM {table} WHERE {scope} = ?1 AND key = ?2"),
                params![id, k],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        match text {
            Some(t) => Ok(KvValue {
                bucket: bucket.to_owned(),
                key: key.to_owned(),
                revision: 0,
                created: None,
                value: value_json(t.as_bytes()),
                bytes: t.len(),
            }),
            None => Err(InspectError::NoKey {
                bucket: clip(bucket),
                key: clip(key),
            }),
        }
    }
}
