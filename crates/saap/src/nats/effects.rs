//! The NATS store's effect journal (`StepCtx::effect`): KV bucket `saap_{Class}_effects`,
//! one JSON value per run (key `e.{run_id}`) holding its records and which attempt last
//! consumed each. Every change is a compare-and-set loop, so bodies of one run on several
//! workers neither lose a record nor take one twice. One value per run bounds a run's
//! journal by the server's largest message (1 MiB by default): a record that does not fit
//! fails its effect with the server's error.
//!
//! Plain storage: the rules (FIFO per key, caps) are `backend::effects`'s.

use crate::backend::effects::{KeptEffect, take_kept};
use crate::backend::{EffectAt, EffectRecord, EffectTake, StoreError};
use saap_nats::{NatsError, TypedKv};
use serde::{Deserialize, Serialize};

/// How often a compare-and-set is retried when another writer changed the value first.
const CAS_ATTEMPTS: usize = 64;

/// One run's effects.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct EffectLog {
    records: Vec<KeptEffect>,
}

pub(crate) type EffectsKv = TypedKv<EffectLog>;

fn nats_err(e: NatsError) -> StoreError {
    StoreError::Io {
        detail: e.to_string(),
    }
}

/// Applies `change` to run `key`'s log with compare-and-set; `change` returns what the
/// caller gets and whether the log changed.
async fn update<T>(
    kv: &EffectsKv,
    key: &str,
    change: impl Fn(&mut EffectLog) -> (T, bool),
) -> Result<T, StoreError> {
    for _ in 0..CAS_ATTEMPTS {
        let current = kv.get(key).await.map_err(nats_err)?;
        let (mut log, rev) = match current {
            Some(v) => (v.value, Some(v.revision)),
            None => (EffectLog::default(), None),
        };
        let (out, changed) = change(&mut log);
        if !changed {
            return Ok(out);
        }
        match kv.compare_and_set(key, &log, rev).await {
            Ok(_) => return Ok(out),
            Err(NatsError::RevisionConflict { .. } | NatsError::KeyExists { .. }) => continue,
            Err(e) => return Err(nats_err(e)),
        }
    }
    Err(StoreError::Io {
        detail: format!(
            "the effect journal `{key}` changed {CAS_ATTEMPTS} times while this update retried; too many concurrent effects in one run"
        ),
    })
}

pub(crate) async fn take(
    kv: &EffectsKv,
    key: &str,
    at: &EffectAt,
    content: &str,
) -> Result<EffectTake, StoreError> {
    update(kv, key, |log| {
        let took = take_kept(&mut log.records, at, content);
        let changed = matches!(took, EffectTake::Recorded(_));
        (took, changed)
    })
    .await
}

pub(crate) async fn record(
    kv: &EffectsKv,
    key: &str,
    record: EffectRecord,
) -> Result<(), StoreError> {
    update(kv, key, |log| {
        let mut record = record.clone();
        record.seq = log.records.len() as u64;
        log.records.push(KeptEffect::new(record));
        ((), true)
    })
    .await
}

pub(crate) async fn read(kv: &EffectsKv, key: &str) -> Result<Vec<EffectRecord>, StoreError> {
    Ok(kv
        .get(key)
        .await
        .map_err(nats_err)?
        .map(|v| v.value.records.into_iter().map(|k| k.record).collect())
        .unwrap_or_default())
}
