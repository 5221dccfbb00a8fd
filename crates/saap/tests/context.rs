//! ThreadContext expiry (TTL) on both backends.
#![allow(clippy::unwrap_used)]

use saap::backend::{Backend, Scope};
use saap::{MemoryBackend, SqliteBackend, SqliteOptions};
use std::time::Duration;

async fn ttl_applies(b: &dyn Backend) {
    let t = Scope::Thread("t1".into());
    b.ctx_set(t.clone(), "k", serde_json::json!(1))
        .wait()
        .await
        .unwrap();
    assert_eq!(
        b.ctx_get(t, "k").wait().await.unwrap(),
        None,
        "expired at once with a zero TTL"
    );
    let r = Scope::Run("r1".into());
    b.ctx_set(r.clone(), "k", serde_json::json!(2))
        .wait()
        .await
        .unwrap();
    assert_eq!(
        b.ctx_get(r.clone(), "k").wait().await.unwrap(),
        Some(serde_json::json!(2)),
        "RunContext has no TTL"
    );
    b.ctx_delete(r.clone(), "k").wait().await.unwrap();
    assert_eq!(b.ctx_get(r, "k").wait().await.unwrap(), None);
}

#[tokio::test]
async fn thread_context_expires_after_its_ttl_in_memory() {
    ttl_applies(&MemoryBackend::new().with_thread_ttl(Duration::ZERO)).await;
}

#[tokio::test]
async fn thread_context_expires_after_its_ttl_in_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let opts = SqliteOptions {
        thread_ttl: Duration::ZERO,
        ..SqliteOptions::default()
    };
    ttl_applies(&SqliteBackend::open_with(dir.path().join("ttl.db"), opts).unwrap()).await;
}

#[tokio::test]
async fn thread_context_is_kept_within_its_ttl() {
    let dir = tempfile::tempdir().unwrap();
    let b = SqliteBackend::open(dir.path().join("keep.db")).unwrap();
    let t = Scope::Thread("t".into());
    b.ctx_set(t.clone(), "k", serde_json::json!("v"))
        .wait()
        .await
        .unwrap();
    assert_eq!(
        b.ctx_get(t, "k").wait().await.unwrap(),
        Some(serde_json::json!("v"))
    );
}
