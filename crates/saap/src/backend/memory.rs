//! The in-memory backend: contexts in a map, no journal (runs live in the engine and end
//! with the process). For tests and maximum speed.

use super::{Backend, Pending, PersistBatch, RunPage, RunQuery, Scope, StoreError, StoredRun};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

type ContextMap = HashMap<Scope, HashMap<String, (serde_json::Value, Option<Instant>)>>;

/// Keeps RunContext and ThreadContext in memory.
pub struct MemoryBackend {
    contexts: Mutex<ContextMap>,
    thread_ttl: Duration,
    halted: AtomicBool,
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
            thread_ttl: Duration::from_secs(30 * 24 * 3600),
            halted: AtomicBool::new(false),
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
        if batch.ended {
            // Most runs never write a RunContext: skip hashing the id into an empty map.
            let mut contexts = self.lock();
            if !contexts.is_empty() {
                contexts.remove(&Scope::Run(batch.run_id));
            }
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
        self.lock()
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
    fn halt(&self) {
        self.halted.store(true, Ordering::Relaxed);
    }
}
