//! The embedded store's effect journal (`effects` table): take, record and read a run's
//! journaled effects inside the store thread's transaction. SQL only; the rules are in
//! `effects.rs`, the transaction and its commit in `sqlite.rs`.

use super::StoreError;
use super::effects::{EffectAt, EffectOutcome, EffectRecord, EffectTake};
use rusqlite::{OptionalExtension, Transaction, params};

/// The table, made when a database is opened (added beside the other tables: a database
/// made before it only gains an empty table, and an older saap ignores it). `taken` is the
/// attempt that last consumed a row; `size` what the journal cap counts.
pub(super) const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS effects(
        run_id TEXT NOT NULL, seq INTEGER NOT NULL, execution INTEGER NOT NULL,
        attempt INTEGER NOT NULL, key TEXT NOT NULL, name TEXT NOT NULL, input TEXT NOT NULL,
        ok INTEGER NOT NULL, outcome TEXT NOT NULL, taken INTEGER NOT NULL,
        size INTEGER NOT NULL, at_ns INTEGER NOT NULL, took_ns INTEGER NOT NULL,
        PRIMARY KEY(run_id, seq)) WITHOUT ROWID;
     CREATE INDEX IF NOT EXISTS effects_key ON effects(run_id, execution, key, seq);";

pub(super) fn take(
    tx: &Transaction<'_>,
    at: &EffectAt,
    key: &str,
) -> Result<Result<EffectTake, StoreError>, rusqlite::Error> {
    let next: Option<(i64, String)> = tx
        .prepare_cached(
            "SELECT seq, outcome FROM effects
             WHERE run_id = ?1 AND execution = ?2 AND key = ?3 AND ok = 1 AND taken < ?4
             ORDER BY seq LIMIT 1",
        )?
        .query_row(params![&*at.run_id, at.execution, key, at.attempt], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?;
    if let Some((seq, outcome)) = next {
        tx.prepare_cached("UPDATE effects SET taken = ?3 WHERE run_id = ?1 AND seq = ?2")?
            .execute(params![&*at.run_id, seq, at.attempt])?;
        return Ok(serde_json::from_str(&outcome)
            .map(EffectTake::Recorded)
            .map_err(|e| bad_row(&at.run_id, seq, &e)));
    }
    let (entries, bytes): (i64, i64) = tx
        .prepare_cached("SELECT count(*), coalesce(sum(size), 0) FROM effects WHERE run_id = ?1")?
        .query_row(params![&*at.run_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(Ok(EffectTake::Fresh {
        entries: entries.max(0) as u64,
        bytes: bytes.max(0) as u64,
    }))
}

pub(super) fn record(
    tx: &Transaction<'_>,
    run_id: &str,
    r: &EffectRecord,
) -> Result<(), rusqlite::Error> {
    let (ok, outcome) = match &r.outcome {
        EffectOutcome::Ok(v) => (true, v.to_string()),
        EffectOutcome::Failed(m) => (false, m.clone()),
    };
    let input = r.input.to_string();
    let size = (input.len() + outcome.len()) as i64;
    tx.prepare_cached(
        "INSERT INTO effects(run_id, seq, execution, attempt, key, name, input, ok, outcome,
                             taken, size, at_ns, took_ns)
         VALUES (?1, (SELECT coalesce(max(seq) + 1, 0) FROM effects WHERE run_id = ?1),
                 ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?3, ?9, ?10, ?11)",
    )?
    .execute(params![
        run_id,
        r.execution,
        r.attempt,
        r.key,
        r.name,
        input,
        ok,
        outcome,
        size,
        r.at_ns as i64,
        r.took_ns as i64,
    ])?;
    Ok(())
}

pub(super) fn read(
    tx: &Transaction<'_>,
    run_id: &str,
) -> Result<Result<Vec<EffectRecord>, StoreError>, rusqlite::Error> {
    type Row = (
        i64,
        u32,
        u32,
        String,
        String,
        String,
        bool,
        String,
        i64,
        i64,
    );
    let rows: Vec<Row> = tx
        .prepare_cached(
            "SELECT seq, execution, attempt, key, name, input, ok, outcome, at_ns, took_ns
             FROM effects WHERE run_id = ?1 ORDER BY seq",
        )?
        .query_map(params![run_id], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
                r.get(9)?,
            ))
        })?
        .collect::<Result<_, _>>()?;
    let mut out = Vec::with_capacity(rows.len());
    for (seq, execution, attempt, key, name, input, ok, outcome, at_ns, took_ns) in rows {
        let input = match serde_json::from_str(&input) {
            Ok(v) => v,
            Err(e) => return Ok(Err(bad_row(run_id, seq, &e))),
        };
        let outcome = if ok {
            match serde_json::from_str(&outcome) {
                Ok(v) => EffectOutcome::Ok(v),
                Err(e) => return Ok(Err(bad_row(run_id, seq, &e))),
            }
        } else {
            EffectOutcome::Failed(outcome)
        };
        out.push(EffectRecord {
            seq: seq.max(0) as u64,
            execution,
            attempt,
            name,
            key,
            input,
            outcome,
            at_ns: at_ns.max(0) as u64,
            took_ns: took_ns.max(0) as u64,
        });
    }
    Ok(Ok(out))
}

fn bad_row(run_id: &str, seq: i64, e: &serde_json::Error) -> StoreError {
    StoreError::BadRow {
        run_id: run_id.to_string(),
        detail: format!("effect {seq} does not decode: {e}"),
    }
}
