//! JetStream KV buckets: the list (from the `KV_*` streams' state), a bucket's keys (bounded)
//! and one value with its revision.
//!
//! Must not put, delete or create a bucket: only `get_key_value` (which reads the bucket's
//! stream info), the key listing and an entry read.

use super::{MAX_STREAMS, NatsInspector, server_err};
use crate::error::{InspectError, Result, clip, invalid};
use crate::model::{BucketSummary, KeyList, KvValue};
use crate::query::MAX_KEYS;
use crate::timefmt::format_time;
use async_nats::jetstream::kv::Operation;
use futures_util::StreamExt;

/// Bytes of a value shown.
pub const MAX_VALUE: usize = 64 * 1024;

impl NatsInspector {
    /// `kv`: every bucket, by name.
    pub async fn buckets(&self) -> Result<Vec<BucketSummary>> {
        let (streams, _) = self.streams(MAX_STREAMS).await?;
        let mut out = Vec::new();
        for s in streams.iter().filter(|s| s.name.starts_with("KV_")) {
            let info = self.stream(&s.name).await?.cached_info().clone();
            out.push(BucketSummary {
                bucket: s.name.trim_start_matches("KV_").to_owned(),
                values: info.state.messages,
                bytes: info.state.bytes,
                history: info.config.max_messages_per_subject,
                ttl_seconds: info.config.max_age.as_secs(),
            });
        }
        Ok(out)
    }

    async fn bucket(&self, bucket: &str) -> Result<async_nats::jetstream::kv::Store> {
        check_key("bucket", bucket)?;
        // Reads the bucket's stream info; NoStream means no bucket.
        match self.stream(&format!("KV_{bucket}")).await {
            Ok(_) => {}
            Err(InspectError::NoStream { .. }) => {
                return Err(InspectError::NoBucket {
                    bucket: clip(bucket),
                });
            }
            Err(e) => return Err(e),
        }
        self.js()
            .get_key_value(bucket)
            .await
            .map_err(|e| server_err(&format!("opening bucket `{}`", clip(bucket)), e))
    }

    /// `kv BUCKET`: its keys, sorted (at most `limit`, at most [`MAX_KEYS`]).
    pub async fn keys(&self, bucket: &str, limit: usize) -> Result<KeyList> {
        let limit = limit.clamp(1, MAX_KEYS);
        let store = self.bucket(bucket).await?;
        let mut keys = Vec::new();
        let mut truncated = false;
        let mut list = store
            .keys()
            .await
            .map_err(|e| server_err("listing keys", e))?;
        let wait = self.wait();
        while let Some(k) = tokio::time::timeout(wait, list.next())
            .await
            .map_err(|_| server_err("listing keys", format!("no answer within {wait:?}")))?
        {
            let k = k.map_err(|e| server_err("listing keys", e))?;
            if keys.len() == limit {
                truncated = true;
                break;
            }
            keys.push(k);
        }
        keys.sort();
        Ok(KeyList {
            bucket: bucket.to_owned(),
            keys,
            truncated,
        })
    }

    /// `kv BUCKET KEY`: the current value.
    pub async fn value(&self, bucket: &str, key: &str) -> Result<KvValue> {
        check_key("key", key)?;
        let store = self.bucket(bucket).await?;
        let entry = store
            .entry(key)
            .await
            .map_err(|e| server_err(&format!("reading key `{}`", clip(key)), e))?;
        match entry {
            Some(e) if e.operation == Operation::Put => Ok(KvValue {
                bucket: bucket.to_owned(),
                key: key.to_owned(),
                revision: e.revision,
                created: Some(format_time(e.created)),
                value: value_json(&e.value),
                bytes: e.value.len(),
            }),
            _ => Err(InspectError::NoKey {
                bucket: clip(bucket),
                key: clip(key),
            }),
        }
    }
}

/// A bucket name or key as given: no spaces or wildcards, at most 1,024 bytes.
fn check_key(what: &str, v: &str) -> Result<()> {
    if v.is_empty() || v.len() > 1024 || v.contains(['*', '>', ' ', '\t', '\r', '\n']) {
        return Err(invalid(format!(
            "the {what} `{}` is not valid: KV names have no spaces or wildcards",
            clip(v)
        )));
    }
    Ok(())
}

/// A stored value as JSON when it parses, else as (lossy, cut) text.
pub fn value_json(bytes: &[u8]) -> serde_json::Value {
    if bytes.len() <= MAX_VALUE
        && let Ok(v) = serde_json::from_slice::<serde_json::Value>(bytes)
    {
        return v;
    }
    let cut = bytes.len().min(MAX_VALUE);
    serde_json::Value::String(String::from_utf8_lossy(&bytes[..cut]).into_owned())
}
