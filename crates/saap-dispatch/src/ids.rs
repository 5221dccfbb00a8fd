//! Identifiers used by the core: event ids (the protocol's 12-byte, 24-hex ids), arrival
//! sequence numbers, execution ids, and the deterministic derivation of output ids.
//!
//! Pure functions only: nothing here reads a clock or a random source.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The arrival sequence number of an event within its run's log (0-based).
pub type Seq = u32;
/// Index of a step in its compiled spec (declaration order).
pub type StepIdx = u32;
/// Index of a parameter within its step.
pub type ParamIdx = u32;

/// An execution of a step within one run, numbered from 0 in start order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ExecutionId(pub u32);

impl fmt::Display for ExecutionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "x{}", self.0)
    }
}

/// The protocol's event id (12 bytes, 24 lowercase hex characters on the wire); the core
/// uses the very same type as the codec and the engines.
pub use saap_protocol::{EventId, EventIdError};

/// A deterministic id for the `index`-th event produced by execution `exec` of the run
/// keyed by `run_key`. Re-running the same execution yields the same ids, so duplicates
/// are dropped by the log's id dedup (DESIGN §4.9).
pub fn derived_event_id(run_key: u64, exec: ExecutionId, index: u32) -> EventId {
    OutputIds::new(run_key).id(exec, index)
}

/// [`derived_event_id`] for one run, the run key's share computed once (a third of the
/// work per id): the same ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputIds {
    run_key: u64,
    seed: u64,
}

impl OutputIds {
    pub fn new(run_key: u64) -> OutputIds {
        OutputIds {
            run_key,
            seed: mix64(run_key ^ 0x5341_4150_0000_0001),
        }
    }

    /// The run key these ids are made for.
    pub fn run_key(&self) -> u64 {
        self.run_key
    }

    /// The id of the `index`-th event produced by execution `exec`.
    #[inline]
    pub fn id(&self, exec: ExecutionId, index: u32) -> EventId {
        let a = self.seed;
        let b = mix64(a ^ ((exec.0 as u64) << 32 | index as u64));
        let c = mix64(b ^ a.rotate_left(17));
        let mut out = [0u8; 12];
        out[..8].copy_from_slice(&b.to_be_bytes());
        out[8..].copy_from_slice(&c.to_be_bytes()[..4]);
        EventId::from_bytes(out)
    }
}

/// An id made from a counter, for simulations and tests (`000…0001`, …).
pub fn counter_event_id(n: u64) -> EventId {
    let mut out = [0u8; 12];
    out[4..].copy_from_slice(&n.to_be_bytes());
    EventId::from_bytes(out)
}

/// A stable 64-bit key for a run id string, used to derive output ids.
pub fn run_key(run_id: &str) -> u64 {
    // FNV-1a, then a finaliser: stable across platforms and releases.
    RunKeyPrefix::new(run_id.as_bytes()).finish(&[])
}

/// [`run_key`] in two parts: the state after the first bytes of a run id, resumed with the
/// rest. Ids made one after another in one process share their first bytes (seconds and
/// process), whose share of the key is computed once for many ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunKeyPrefix(u64);

impl RunKeyPrefix {
    /// The state after `prefix` (the first bytes of a run id's text).
    pub fn new(prefix: &[u8]) -> RunKeyPrefix {
        RunKeyPrefix(fnv1a(0xcbf2_9ce4_8422_2325, prefix))
    }

    /// The key of the run id made of the prefix, then `rest`.
    pub fn finish(self, rest: &[u8]) -> u64 {
        mix64(fnv1a(self.0, rest))
    }
}

fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[inline]
fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A small, fast, deterministic hasher for the core's integer-keyed maps (the std SipHash
/// costs more than the rest of a dispatch decision).
#[derive(Default, Clone, Copy)]
pub(crate) struct FastHasher(u64);

impl std::hash::Hasher for FastHasher {
    fn finish(&self) -> u64 {
        mix64(self.0)
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut buf = [0u8; 8];
            buf[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(buf));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

pub(crate) type FastMap<K, V> =
    std::collections::HashMap<K, V, std::hash::BuildHasherDefault<FastHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_id_round_trips_through_hex() {
        let id = EventId::parse("65f0a1b2c3d4e5f601234567").expect("valid");
        assert_eq!(id.to_string(), "65f0a1b2c3d4e5f601234567");
    }

    #[test]
    fn event_id_rejects_uppercase_short_and_non_hex() {
        for bad in [
            "65F0A1B2C3D4E5F601234567",
            "abc",
            "zz0a1b2c3d4e5f6012345678",
            "",
        ] {
            assert!(EventId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn derived_ids_are_deterministic_and_distinct() {
        let k = run_key("run-1");
        let a = derived_event_id(k, ExecutionId(3), 0);
        assert_eq!(a, derived_event_id(k, ExecutionId(3), 0));
        assert_ne!(a, derived_event_id(k, ExecutionId(3), 1));
        assert_ne!(a, derived_event_id(k, ExecutionId(4), 0));
        assert_ne!(a, derived_event_id(run_key("run-2"), ExecutionId(3), 0));
        // Pinned: ids derived by earlier releases must stay the same (they are in logs).
        assert_eq!(
            derived_event_id(run_key("simulated-run"), ExecutionId(0), 0).to_string(),
            "ed999d8b7d7257ae58f10834"
        );
    }

    #[test]
    fn a_run_key_resumed_after_any_prefix_is_the_run_key() {
        let id = "6553f1000102030405abcdef";
        for cut in 0..=id.len() {
            let (head, tail) = id.as_bytes().split_at(cut);
            assert_eq!(
                RunKeyPrefix::new(head).finish(tail),
                run_key(id),
                "cut at {cut}"
            );
        }
        assert_eq!(RunKeyPrefix::new(b"").finish(b""), run_key(""));
    }
}
