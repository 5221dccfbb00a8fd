//! Fresh event ids and timestamps for the few events this crate creates itself (discovery).
//! ObjectId-style: seconds, a per-process random value, a counter.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use saap_protocol::EventId;

fn process_unique() -> [u8; 5] {
    static UNIQUE: OnceLock<[u8; 5]> = OnceLock::new();
    *UNIQUE.get_or_init(|| {
        let mut h = RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        let v = h.finish().to_le_bytes();
        [v[0], v[1], v[2], v[3], v[4]]
    })
}

/// A new, process-unique event id.
pub fn fresh_event_id() -> EventId {
    static COUNTER: OnceLock<AtomicU32> = OnceLock::new();
    let counter = COUNTER.get_or_init(|| {
        let mut h = RandomState::new().build_hasher();
        h.write_u8(1);
        AtomicU32::new(h.finish() as u32)
    });
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    EventId::object_id(
        u32::try_from(secs).unwrap_or(u32::MAX),
        process_unique(),
        counter.fetch_add(1, Ordering::Relaxed),
    )
}

/// Nanoseconds since the Unix epoch (the wire `created_at`).
pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_differ() {
        let a = fresh_event_id();
        let b = fresh_event_id();
        assert_ne!(a, b);
        assert!(now_ns() > 1_600_000_000_000_000_000);
    }
}
