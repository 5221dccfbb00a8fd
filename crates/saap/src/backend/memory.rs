//! The in-memory backend: contexts and live runs' effects in maps, no journal (runs live in
//! the engine and end with the process). For tests and maximum speed.

use super::effects::{KeptEffect, take_kept};
use super::{
    Backend, EffectAt, EffectRecord, EffectTake, Pending, PersistBatch, RunIdRef, RunPage,
    RunQuery, Scope, StoreError, StoredRun,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

type ContextMap = HashMap<Scope, HashMap<String, (serde_json::Value, Option<Instant>)>>;

/// Keeps RunContext and ThreadContext in memory.
pub struct MemoryBackend {
    contexts: Mutex<ContextMap>,
    /// A RunContext was written (set under `contexts`' lock, never cleared): until then a
    /// run's end has no context to drop and takes no lock.
    run_contexts: AtomicBool,
    thread_ttl: Duration,
    halted: AtomicBool,
    /// Each live run's effects, with the attempt that last consumed each (dropped when the
    /// run ends: nothing here outlives the process anyway).
    effects: Mutex<HashMap<Arc<str>, Vec<KeptEffect>>>,
    /// An effect was recorded (never cleared): until then a run's end takes no lock for them.
    any_effects: AtomicBool,
}

impl Default for MemoryBackend {
    fn default() -> Self {
        MemoryBackend::new()
    }
}

impl MemoryBackend {
    pub fn new() -> MemoryBackend {
        MemoryBackend {
            contexts: Mutex::new(HashMap::new()),
            run_contexts: AtomicBool::new(false),
            thread_ttl: Duration::from_secs(30 * 24 * 3600),
            halted: AtomicBool::new(false),
            effects: Mutex::new(HashMap::new()),
            any_effects: AtomicBool::new(false),
        }
    }
    /// Sets the ThreadContext time to live (default 30 days).
    pub fn with_thread_ttl(mut self, ttl: Duration) -> MemoryBackend {
        self.thread_ttl = ttl;
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ContextMap> {
        // A poisoned lock only means another thread panicked mid-update of a plain map.
        self.contexts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drops the RunContext of an ended run, if any was ever written.
    fn drop_run_context(&self, run_id: Arc<str>) {
        if self.any_effects.load(Ordering::Relaxed) {
            self.effect_map().remove(&run_id);
        }
        if self.run_contexts.load(Ordering::Relaxed) {
            let mut contexts = self.lock();
            if !contexts.is_empty() {
                contexts.remove(&Scope::Run(run_id));
            }
        }
    }

    fn effect_map(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Vec<KeptEffect>>> {
        // A poisoned lock only means another thread panicked mid-update of a plain map.
        self.effects.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn check(&self) -> Result<(), StoreError> {
        if self.halted.load(Ordering::Relaxed) {
            Err(StoreError::Halted)
        } else {
            Ok(())
        }
    }
}

impl Backend for MemoryBackend {
    fn name(&self) -> &'static str {
        "memory"
    }
    fn wants_journal(&self) -> bool {
        false
    }
    fn persist(&self, batch: PersistBatch) -> Pending<()> {
        if let Err(e) = self.check() {
            return Pending::Ready(Err(e));
        }
        // Most runs never write a RunContext: no lock, and no hashing of the id into an empty
        // map. (A step's write happens before its run's end is persisted: the flag is seen.)
        if batch.ended {
            self.drop_run_context(batch.run_id);
        }
        Pending::Ready(Ok(()))
    }
    fn persist_end(&self, run_id: RunIdRef<'_>, _index: u64) -> Pending<()> {
        if let Err(e) = self.check() {
            return Pending::Ready(Err(e));
        }
        // The id is copied (a reference count) only when a RunContext or effects may be there.
        if self.run_contexts.load(Ordering::Relaxed) || self.any_effects.load(Ordering::Relaxed) {
            self.drop_run_context(run_id.get().clone());
        }
        Pending::Ready(Ok(()))
    }
    fn load_runs(&self, _workflow: &str, _live_only: bool) -> Pending<Vec<StoredRun>> {
        Pending::Ready(self.check().map(|_| Vec::new()))
    }
    fn list_runs(&self, _workflow: &str, _query: &RunQuery) -> Pending<RunPage> {
        // Runs live in the engine only: the store has none to list.
        Pending::Ready(self.check().map(|_| RunPage::default()))
    }
    fn read_run(&self, _workflow: &str, _run_id: &str) -> Pending<Option<StoredRun>> {
        Pending::Ready(self.check().map(|_| None))
    }
    fn ctx_get(&self, scope: Scope, key: &str) -> Pending<Option<serde_json::Value>> {
        if let Err(e) = self.check() {
            return Pending::Ready(Err(e));
        }
        let now = Instant::now();
        let map = self.lock();
        let v = map
            .get(&scope)
            .and_then(|m| m.get(key))
            .filter(|(_, exp)| exp.is_none_or(|e| e > now))
            .map(|(v, _)| v.clone());
        Pending::Ready(Ok(v))
    }
    fn ctx_set(&self, scope: Scope, key: &str, value: serde_json::Value) -> Pending<()> {
        if let Err(e) = self.check() {
            return Pending::Ready(Err(e));
        }
        let exp = match scope {
            Scope::Thread(_) => Instant::now().checked_add(self.thread_ttl),
            Scope::Run(_) => None,
        };
        let run = matches!(scope, Scope::Run(_));
        let mut contexts = self.lock();
        if run {
            self.run_contexts.store(true, Ordering::Relaxed);
        }
        contexts
            .entry(scope)
            .or_default()
            .insert(key.to_string(), (value, exp));
        Pending::Ready(Ok(()))
    }
    fn ctx_delete(&self, scope: Scope, key: &str) -> Pending<()> {
        if let Err(e) = self.check() {
            return Pending::Ready(Err(e));
        }
        if let Some(m) = self.lock().get_mut(&scope) {
            m.remove(key);
        }
        Pending::Ready(Ok(()))
    }
    fn effect_take(&self, at: &EffectAt, key: &str) -> Pending<EffectTake> {
        if let Err(e) = self.check() {
            return Pending::Ready(Err(e));
        }
        let mut map = self.effect_map();
        let Some(records) = map.get_mut(&at.run_id) else {
            return Pending::Ready(Ok(EffectTake::Fresh {
                entries: 0,
                bytes: 0,
            }));
        };
        Pending::Ready(Ok(take_kept(records, at, key)))
    }
    fn effect_record(&self, run_id: &str, mut record: EffectRecord) -> Pending<()> {
        if let Err(e) = self.check() {
            return Pending::Ready(Err(e));
        }
        self.any_effects.store(true, Ordering::Relaxed);
        let mut map = self.effect_map();
        let records = map.entry(Arc::from(run_id)).or_default();
        record.seq = records.len() as u64;
        records.push(KeptEffect::new(record));
        Pending::Ready(Ok(()))
    }
    fn effects(&self, run_id: &str) -> Pending<Vec<EffectRecord>> {
        if let Err(e) = self.check() {
            return Pending::Ready(Err(e));
        }
        let map = self.effect_map();
        let records = map
            .get(run_id)
            .map(|rs| rs.iter().map(|k| k.record.clone()).collect())
            .unwrap_or_default();
        Pending::Ready(Ok(records))
    }
    fn halt(&self) {
        self.halted.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn ended(run_id: &str) -> PersistBatch {
        PersistBatch {
            run_id: Arc::from(run_id),
            new_run: None,
            index: 0,
            entry_json: String::new(),
            records_json: String::new(),
            ended: true,
        }
    }

    async fn get(b: &MemoryBackend, scope: Scope) -> Option<serde_json::Value> {
        b.ctx_get(scope, "k").wait().await.expect("in memory")
    }

    #[tokio::test]
    async fn a_runs_end_drops_its_run_context_whenever_one_was_written() {
        let b = MemoryBackend::new();
        // Before any RunContext exists, an end has nothing to drop.
        b.persist(ended("r0")).wait().await.expect("in memory");
        let (r1, r2, t) = (
            Scope::Run("r1".into()),
            Scope::Run("r2".into()),
            Scope::Thread("t".into()),
        );
        for s in [&r1, &r2, &t] {
            b.ctx_set(s.clone(), "k", serde_json::json!(1))
                .wait()
                .await
                .expect("in memory");
        }
        b.persist(ended("r1")).wait().await.expect("in memory");
        assert_eq!(
            get(&b, r1).await,
            None,
            "the ended run's context is dropped"
        );
        assert_eq!(get(&b, r2.clone()).await, Some(serde_json::json!(1)));
        assert_eq!(
            get(&b, t).await,
            Some(serde_json::json!(1)),
            "threads outlive runs"
        );
        b.persist(ended("r2")).wait().await.expect("in memory");
        assert_eq!(get(&b, r2).await, None);
    }
}
