//! What a worker's dead-worker sweep knows without reading the buckets: the owner of every
//! run (from a watch on `saap_{Class}_steps`) and when each worker last beat (from a watch on
//! `saap_{Class}_live`). A sweep then reads only what concerns workers that look dead — it
//! confirms each with a read of its heartbeat entry, and each of its runs' owner record
//! before the compare-and-set takeover — instead of every owner record each lease/3.
//!
//! The index only chooses whom to check: a takeover still needs the heartbeat entry gone and
//! the owner record unchanged (compare-and-set on its revision), as before. Until the owner
//! watch has caught up (or after it failed) the sweep reads every owner record, as before.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// Owner records and heartbeats as the watches delivered them.
#[derive(Debug)]
pub(crate) struct OwnerIndex {
    /// Owner record key → (worker, revision).
    runs: HashMap<String, (String, u64)>,
    /// Worker → its owner record keys.
    by_worker: HashMap<String, HashSet<String>>,
    /// Worker → when a heartbeat of it was last seen.
    seen: HashMap<String, Instant>,
    /// The owner watch has delivered every record that existed when it started.
    ready: bool,
    /// When the heartbeat watch started (a worker never seen since is judged from then).
    since: Instant,
}

impl OwnerIndex {
    pub(crate) fn new() -> OwnerIndex {
        OwnerIndex {
            runs: HashMap::new(),
            by_worker: HashMap::new(),
            seen: HashMap::new(),
            ready: false,
            since: Instant::now(),
        }
    }

    pub(crate) fn ready(&self) -> bool {
        self.ready
    }

    /// The owner watch caught up (or restarted: `false` until it catches up again, with the
    /// records forgotten so that the history it delivers again rebuilds them).
    pub(crate) fn set_ready(&mut self, ready: bool) {
        if !ready {
            self.runs.clear();
            self.by_worker.clear();
        }
        self.ready = ready;
    }

    /// Marks the index complete without forgetting what it holds.
    pub(crate) fn set_ready_keep(&mut self, ready: bool) {
        self.ready = ready;
    }

    /// An owner record was put (`Some(worker)`) or deleted (`None`).
    pub(crate) fn owner(&mut self, key: &str, worker: Option<&str>, revision: u64) {
        if let Some((old, _)) = self.runs.remove(key)
            && let Some(keys) = self.by_worker.get_mut(&old)
        {
            keys.remove(key);
            if keys.is_empty() {
                self.by_worker.remove(&old);
            }
        }
        if let Some(w) = worker {
            self.runs.insert(key.to_string(), (w.to_string(), revision));
            self.by_worker
                .entry(w.to_string())
                .or_default()
                .insert(key.to_string());
        }
    }

    /// A heartbeat of `worker` was seen (`alive`) or its entry was deleted.
    pub(crate) fn beat(&mut self, worker: &str, alive: bool, now: Instant) {
        if alive {
            self.seen.insert(worker.to_string(), now);
        } else {
            self.seen.remove(worker);
        }
    }

    /// The heartbeat watch (re)started: workers are judged from now on.
    pub(crate) fn restart_beats(&mut self, now: Instant) {
        self.since = now;
    }

    /// Workers other than `me` that own runs and whose last heartbeat (or the start of the
    /// heartbeat watch, if none was seen) is older than `lease`, with their records.
    pub(crate) fn suspects(
        &self,
        me: &str,
        lease: Duration,
        now: Instant,
    ) -> Vec<(String, Vec<String>)> {
        self.by_worker
            .iter()
            .filter(|(w, _)| w.as_str() != me)
            .filter(|(w, _)| {
                let last = self.seen.get(w.as_str()).copied().unwrap_or(self.since);
                now.saturating_duration_since(last) >= lease
            })
            .map(|(w, keys)| (w.clone(), keys.iter().cloned().collect()))
            .collect()
    }

    /// How many owner records the index holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.runs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(3);

    #[test]
    fn only_workers_without_a_recent_heartbeat_are_suspects() {
        let t0 = Instant::now();
        let mut ix = OwnerIndex::new();
        ix.restart_beats(t0);
        ix.owner("run.a", Some("w1"), 1);
        ix.owner("run.b", Some("w2"), 2);
        ix.owner("run.c", Some("me"), 3);
        ix.beat("w1", true, t0 + Duration::from_secs(2));
        let later = t0 + Duration::from_secs(4);
        // w2 was never seen since the watch started 4 s ago; w1 beat 2 s ago; me is skipped.
        let s = ix.suspects("me", LEASE, later);
        assert_eq!(s, vec![("w2".to_string(), vec!["run.b".to_string()])]);
        // A deleted heartbeat makes w1 a suspect at once.
        ix.beat("w1", false, later);
        let mut s = ix.suspects("me", LEASE, later);
        s.sort();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].0, "w1");
    }

    #[test]
    fn a_record_moves_with_its_owner_and_leaves_when_deleted() {
        let t0 = Instant::now();
        let mut ix = OwnerIndex::new();
        ix.restart_beats(t0);
        ix.owner("run.a", Some("w1"), 1);
        ix.owner("run.a", Some("w2"), 5);
        let later = t0 + LEASE;
        assert_eq!(
            ix.suspects("me", LEASE, later),
            vec![("w2".to_string(), vec!["run.a".to_string()])]
        );
        ix.owner("run.a", None, 6);
        assert!(ix.suspects("me", LEASE, later).is_empty());
        assert_eq!(ix.len(), 0);
        ix.owner("run.x", Some("w3"), 7);
        ix.set_ready(false);
        assert_eq!(
            ix.len(),
            0,
            "a restarted watch rebuilds the index from its history"
        );
    }
}
