//! JetStream KV buckets with a small typed wrapper (JSON values) and compare-and-set by
//! revision.
//!
//! The engine keeps RunContext, ThreadContext and step bookkeeping here, and uses
//! [`TypedKv::compare_and_set`] for per-run dispatch ownership: a worker takes a run by
//! creating (or updating at a known revision) its owner key; a concurrent writer gets
//! [`NatsError::RevisionConflict`] / [`NatsError::KeyExists`] and must re-read.

use std::marker::PhantomData;
use std::time::Duration;

use async_nats::jetstream::context::KeyValueErrorKind;
use async_nats::jetstream::kv;
use bytes::Bytes;
use saap_protocol::subject::validate_agent_class;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::{debug, info};

use crate::client::SaapNats;
use crate::error::{NatsError, Result, truncate};

/// What a bucket holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BucketKind {
    /// RunContext values, keyed per run.
    RunContext,
    /// ThreadContext values, keyed per thread.
    ThreadContext,
    /// Step bookkeeping: execution counters, input-set records, run markers, run ownership.
    Steps,
    /// Journaled effects (saap's `StepCtx::effect`), one value per run.
    Effects,
}

impl BucketKind {
    /// The name suffix.
    pub fn as_str(self) -> &'static str {
        match self {
            BucketKind::RunContext => "run_context",
            BucketKind::ThreadContext => "thread_context",
            BucketKind::Steps => "steps",
            BucketKind::Effects => "effects",
        }
    }
}

/// The bucket of `kind` for `agent_class`: `saap_{Class}_{kind}`.
pub fn bucket_name(agent_class: &str, kind: BucketKind) -> Result<String> {
    validate_agent_class(agent_class)?;
    let name = format!("saap_{agent_class}_{}", kind.as_str());
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(NatsError::Bucket {
            bucket: truncate(&name),
            reason: "agent class names used with KV buckets may contain only ASCII letters, digits, '_' and '-'".to_owned(),
        });
    }
    Ok(name)
}

/// Whether `key` is a valid KV key: non-empty parts of `[A-Za-z0-9_=/-]` separated by dots.
pub fn is_valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.split('.').all(|p| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'/' | b'='))
        })
}

/// Builds a key from parts (joined by dots), each checked.
pub fn key(parts: &[&str]) -> Result<String> {
    let k = parts.join(".");
    if parts.is_empty() || !is_valid_key(&k) {
        return Err(NatsError::InvalidKey { key: truncate(&k) });
    }
    Ok(k)
}

/// How to create a bucket.
#[derive(Clone, Debug)]
pub struct BucketSpec {
    /// Bucket name.
    pub name: String,
    /// Revisions kept per key (1 = the latest only).
    pub history: i64,
    /// Maximum age of values (zero = unlimited). The Python Redis keys expire after 30 days.
    pub max_age: Duration,
    /// Description stored with the bucket.
    pub description: String,
}

impl BucketSpec {
    /// The bucket of `kind` for `agent_class`: file storage, latest revision only, no expiry.
    pub fn for_class(agent_class: &str, kind: BucketKind) -> Result<BucketSpec> {
        Ok(BucketSpec {
            name: bucket_name(agent_class, kind)?,
            history: 1,
            max_age: Duration::ZERO,
            description: format!("saap {} of agent class {agent_class}", kind.as_str()),
        })
    }
}

/// A value with the revision it was read at.
#[derive(Clone, Debug, PartialEq)]
pub struct Versioned<T> {
    /// The value.
    pub value: T,
    /// Its revision (pass it to [`TypedKv::update`]).
    pub revision: u64,
}

/// A KV bucket whose values are `T` as JSON.
pub struct TypedKv<T> {
    store: kv::Store,
    bucket: String,
    _value: PhantomData<fn() -> T>,
}

impl<T> Clone for TypedKv<T> {
    fn clone(&self) -> Self {
        TypedKv {
            store: self.store.clone(),
            bucket: self.bucket.clone(),
            _value: PhantomData,
        }
    }
}

impl<T> std::fmt::Debug for TypedKv<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedKv")
            .field("bucket", &self.bucket)
            .finish_non_exhaustive()
    }
}

impl<T: Serialize + DeserializeOwned> TypedKv<T> {
    /// The bucket name.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    fn check_key(&self, key: &str) -> Result<()> {
        if is_valid_key(key) {
            Ok(())
        } else {
            Err(NatsError::InvalidKey { key: truncate(key) })
        }
    }

    fn encode(&self, key: &str, value: &T) -> Result<Bytes> {
        serde_json::to_vec(value)
            .map(Bytes::from)
            .map_err(|e| NatsError::Decode {
                what: format!("value for {key} in {}", self.bucket),
                reason: e.to_string(),
            })
    }

    fn kv_err(&self, key: &str, operation: &'static str, reason: String) -> NatsError {
        NatsError::Kv {
            bucket: self.bucket.clone(),
            key: truncate(key),
            operation,
            reason,
        }
    }

    /// The current value and its revision; `None` if absent or deleted.
    pub async fn get(&self, key: &str) -> Result<Option<Versioned<T>>> {
        self.check_key(key)?;
        let entry = self
            .store
            .entry(key)
            .await
            .map_err(|e| self.kv_err(key, "get", e.to_string()))?;
        let Some(entry) = entry else {
            return Ok(None);
        };
        if entry.operation != kv::Operation::Put {
            return Ok(None);
        }
        let value = serde_json::from_slice(&entry.value).map_err(|e| NatsError::Decode {
            what: format!("value of {key} in {}", self.bucket),
            reason: e.to_string(),
        })?;
        Ok(Some(Versioned {
            value,
            revision: entry.revision,
        }))
    }

    /// Writes unconditionally; returns the new revision.
    pub async fn put(&self, key: &str, value: &T) -> Result<u64> {
        self.check_key(key)?;
        let bytes = self.encode(key, value)?;
        self.store
            .put(key, bytes)
            .await
            .map_err(|e| self.kv_err(key, "put", e.to_string()))
    }

    /// Writes only if the key is absent (or deleted); [`NatsError::KeyExists`] otherwise.
    pub async fn create(&self, key: &str, value: &T) -> Result<u64> {
        self.check_key(key)?;
        let bytes = self.encode(key, value)?;
        match self.store.create(key, bytes).await {
            Ok(rev) => Ok(rev),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => Err(NatsError::KeyExists {
                bucket: self.bucket.clone(),
                key: truncate(key),
            }),
            Err(e) => Err(self.kv_err(key, "create", e.to_string())),
        }
    }

    /// Writes only if the key's revision is still `revision` (compare-and-set);
    /// [`NatsError::RevisionConflict`] otherwise.
    pub async fn update(&self, key: &str, value: &T, revision: u64) -> Result<u64> {
        self.check_key(key)?;
        let bytes = self.encode(key, value)?;
        match self.store.update(key, bytes, revision).await {
            Ok(rev) => {
                debug!(bucket = %self.bucket, key, revision = rev, "compare-and-set succeeded");
                Ok(rev)
            }
            Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                Err(NatsError::RevisionConflict {
                    bucket: self.bucket.clone(),
                    key: truncate(key),
                    expected: revision,
                })
            }
            Err(e) => Err(self.kv_err(key, "update", e.to_string())),
        }
    }

    /// Compare-and-set: create if `expected` is `None`, else update at that revision.
    pub async fn compare_and_set(
        &self,
        key: &str,
        value: &T,
        expected: Option<u64>,
    ) -> Result<u64> {
        match expected {
            None => self.create(key, value).await,
            Some(rev) => self.update(key, value, rev).await,
        }
    }

    /// Deletes the key (a delete marker; `get` then returns `None`).
    pub async fn delete(&self, key: &str) -> Result<()> {
        self.check_key(key)?;
        self.store
            .delete(key)
            .await
            .map_err(|e| self.kv_err(key, "delete", e.to_string()))
    }
}

impl SaapNats {
    /// Opens the bucket described by `spec`, creating it if it does not exist (file storage,
    /// [`crate::Settings::replicas`] replicas).
    pub async fn kv<T: Serialize + DeserializeOwned>(
        &self,
        spec: &BucketSpec,
    ) -> Result<TypedKv<T>> {
        let err = |reason: String| NatsError::Bucket {
            bucket: spec.name.clone(),
            reason,
        };
        let store =
            match self.js.get_key_value(&spec.name).await {
                Ok(s) => s,
                Err(e) if matches!(e.kind(), KeyValueErrorKind::GetBucket) => {
                    let config = kv::Config {
                        bucket: spec.name.clone(),
                        description: spec.description.clone(),
                        history: spec.history,
                        max_age: spec.max_age,
                        storage: async_nats::jetstream::stream::StorageType::File,
                        num_replicas: self.settings.replicas.max(1),
                        ..Default::default()
                    };
                    match self.js.create_key_value(config).await {
                        Ok(s) => {
                            info!(bucket = %spec.name, "created KV bucket");
                            s
                        }
                        // Created concurrently by another worker: open it.
                        Err(ce) => self.js.get_key_value(&spec.name).await.map_err(|ge| {
                            err(format!("cannot create it ({ce}) nor open it ({ge})"))
                        })?,
                    }
                }
                Err(e) => return Err(err(format!("cannot open it: {e}; is JetStream enabled?"))),
            };
        Ok(TypedKv {
            store,
            bucket: spec.name.clone(),
            _value: PhantomData,
        })
    }

    /// Opens (creating if needed) the bucket of `kind` for `agent_class`.
    pub async fn class_kv<T: Serialize + DeserializeOwned>(
        &self,
        agent_class: &str,
        kind: BucketKind,
    ) -> Result<TypedKv<T>> {
        self.kv(&BucketSpec::for_class(agent_class, kind)?).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_bucket_names() {
        assert!(is_valid_key("run.65a0c0ffee0000000000abcd.owner"));
        assert!(is_valid_key("a/b=c_d-e"));
        assert!(!is_valid_key(""));
        assert!(!is_valid_key("a..b"));
        assert!(!is_valid_key(".a"));
        assert!(!is_valid_key("a b"));
        assert!(!is_valid_key("a*"));
        assert!(key(&["run", "r1", "owner"]).is_ok());
        assert!(key(&["run", "r.1"]).is_ok()); // dots are separators
        assert!(key(&["run", ""]).is_err());
        assert_eq!(
            bucket_name("RagAgent", BucketKind::Steps).ok().as_deref(),
            Some("saap_RagAgent_steps")
        );
        assert!(bucket_name("Rag+Agent", BucketKind::Steps).is_err());
    }
}
