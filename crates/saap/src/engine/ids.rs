//! Ids the engine makes, and the hashers of its tables. Everything here exists for speed,
//! measured (crates/saap/BENCHMARKS.md): a run id is kept as its 24 hex characters inline
//! ([`RunIdText`], [`HexId`], word-aligned so `str::from_utf8` checks it in two steps), made
//! without `fmt` ([`hex_id`], [`run_id_text`], which reuses the text of the first bytes that
//! all ids of one second share), and looked up with hashers that skip SipHash (~200
//! instructions per lookup saved: foldhash's fixed-seed hasher for type names ([`TypeNameBuild`]),
//! [`RunIdHasher`] for run ids).
//! Must not know runs, slots or the core: ids and hashing only.

use saap_dispatch::EventId;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// A run's id: the engine's own ids (24 hex characters) inline, any other shared.
pub(crate) enum RunIdText {
    Hex(HexId),
    Other(Arc<str>),
}

/// An engine-made run id's 24 hex characters, word-aligned and followed by 8 zero bytes:
/// `str::from_utf8` (the run id returned as a `String`) checks aligned text 16 bytes at a
/// time and the rest a byte at a time, so 32 bytes cost two steps where 24 cost one and
/// eight (~50 instructions fewer per id; unaligned, a byte at a time: ~40 more).
#[derive(Clone, Copy)]
#[repr(align(8))]
pub(crate) struct HexId(pub(super) [u8; 32]);

impl HexId {
    pub(super) fn new(text: [u8; 24]) -> HexId {
        let mut b = [0; 32];
        b[..24].copy_from_slice(&text);
        HexId(b)
    }
    /// The id's 24 characters.
    pub(crate) fn bytes(&self) -> &[u8; 24] {
        self.0.first_chunk().unwrap_or(&[0; 24])
    }
    /// The id's text (always valid: hex digits, checked with the zeros that follow them).
    pub(super) fn text(&self) -> &str {
        std::str::from_utf8(&self.0)
            .ok()
            .and_then(|s| s.get(..24))
            .unwrap_or_default()
    }
}

impl RunIdText {
    /// The id's text, as bytes.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            RunIdText::Hex(b) => b.bytes(),
            RunIdText::Other(s) => s.as_bytes(),
        }
    }
}

impl From<&str> for RunIdText {
    fn from(s: &str) -> RunIdText {
        match <[u8; 24]>::try_from(s.as_bytes()) {
            Ok(b) if b.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) => {
                RunIdText::Hex(HexId::new(b))
            }
            _ => RunIdText::Other(s.into()),
        }
    }
}

/// The type table's hasher (short names): a keyed hash (SipHash) buys nothing there and
/// costs ~200 instructions per lookup; foldhash's fixed-seed hasher, not a hand-written one.
pub(crate) type TypeNameBuild = foldhash::fast::FixedState;

/// The run table's hash: run ids are made by the engine (or the store), so a keyed hash
/// buys nothing; a run id (24 characters) is taken eight bytes at a time (FNV takes one
/// at a time: ~100 instructions per lookup, three lookups per run), then mixed whole
/// (murmur3's finalizer), because engine-made ids differ only in their last characters
/// and the table indexes by the hash's low bits.
#[derive(Default, Clone, Copy)]
pub(crate) struct RunIdHasher(pub(super) u64);

impl std::hash::Hasher for RunIdHasher {
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut h = self.0;
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            h = (h.rotate_left(23) ^ u64::from_le_bytes(b)).wrapping_mul(K);
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            h = (h.rotate_left(23) ^ u64::from_le_bytes(b) ^ rest.len() as u64).wrapping_mul(K);
        }
        self.0 = h;
    }
}

pub(crate) type RunIdBuild = std::hash::BuildHasherDefault<RunIdHasher>;

/// An id as its 24 lowercase hex characters (the protocol's text form), without going
/// through `fmt` one byte at a time.
pub(crate) fn hex_id(id: &EventId) -> Arc<str> {
    let mut out = [0u8; 24];
    hex_into(id.as_bytes(), &mut out);
    // Only ASCII hex digits were written.
    Arc::from(std::str::from_utf8(&out).unwrap_or_default())
}

/// Process-unique ObjectId-style ids (protocol layout: seconds, 5 process bytes, counter).
pub(super) struct IdGen {
    pub(super) process: [u8; 5],
    pub(super) counter: AtomicU32,
}

impl IdGen {
    pub(super) fn new() -> IdGen {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        h.write_u32(std::process::id());
        let r = h.finish().to_be_bytes();
        IdGen {
            process: [r[0], r[1], r[2], r[3], r[4]],
            counter: AtomicU32::new(u32::from_be_bytes([r[5], r[6], r[7], 0])),
        }
    }
    pub(super) fn next(&self) -> EventId {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        saap_protocol::EventId::object_id(unix_seconds(), self.process, n)
    }
    /// The ids a new run needs (its own, its new thread's, its start event's) for one
    /// clock reading and one atomic add.
    pub(super) fn next_run(&self) -> RunIds {
        let secs = unix_seconds();
        let n = self.counter.fetch_add(3, Ordering::Relaxed);
        let id = |i: u32| saap_protocol::EventId::object_id(secs, self.process, n.wrapping_add(i));
        RunIds {
            run: id(0),
            thread: id(1),
            start: id(2),
        }
    }
}

/// The ids of a new run, drawn together ([`IdGen::next_run`]).
#[derive(Clone, Copy)]
pub(super) struct RunIds {
    pub(super) run: EventId,
    /// The id of the thread made for the run when none is given.
    pub(super) thread: EventId,
    pub(super) start: EventId,
}

/// How many leading bytes of an engine-made id are the same for every id the process makes
/// in one second (4 of seconds, 5 of the process).
pub(super) const ID_HEAD: usize = 9;

/// A run id's first [`ID_HEAD`] bytes, their text and their share of the run key: the same
/// for all ids a thread makes in one second, so computed once for them.
#[derive(Clone, Copy)]
pub(super) struct IdHead {
    /// The first bytes as two words (compared as such: a 9-byte array comparison costs
    /// ~35 instructions per run, two word comparisons a few).
    pub(super) bytes: (u64, u8),
    pub(super) text: [u8; 2 * ID_HEAD],
    pub(super) key: saap_dispatch::ids::RunKeyPrefix,
}

thread_local! {
    static ID_HEAD_CACHE: std::cell::Cell<Option<IdHead>> = const { std::cell::Cell::new(None) };
}

/// Writes the hex text of `bytes` into `out` (twice as long).
pub(super) fn hex_into(bytes: &[u8], out: &mut [u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (b, o) in bytes.iter().zip(out.chunks_exact_mut(2)) {
        o[0] = HEX[(b >> 4) as usize];
        o[1] = HEX[(b & 15) as usize];
    }
}

/// An engine-made run id as text ([`hex_id`]) and its run key ([`run_key`]), the share of
/// both that the id's first bytes make taken from the thread's last id when they are the
/// same (ids made in the same second).
pub(super) fn run_id_text(id: &EventId) -> ([u8; 24], u64) {
    let all = id.as_bytes();
    let (head, tail) = all.split_at(ID_HEAD);
    let [b0, b1, b2, b3, b4, b5, b6, b7, b8, ..] = *all;
    let words = (u64::from_ne_bytes([b0, b1, b2, b3, b4, b5, b6, b7]), b8);
    let head = ID_HEAD_CACHE.with(|cache| match cache.get() {
        Some(h) if h.bytes == words => h,
        _ => {
            let mut h = IdHead {
                bytes: words,
                text: [0; 2 * ID_HEAD],
                key: saap_dispatch::ids::RunKeyPrefix::new(&[]),
            };
            hex_into(head, &mut h.text);
            h.key = saap_dispatch::ids::RunKeyPrefix::new(&h.text);
            cache.set(Some(h));
            h
        }
    });
    let mut out = [0u8; 24];
    let (text_head, text_tail) = out.split_at_mut(2 * ID_HEAD);
    text_head.copy_from_slice(&head.text);
    hex_into(tail, text_tail);
    let key = head.key.finish(text_tail);
    (out, key)
}

pub(super) fn unix_seconds() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(0)
}

/// Now, in nanoseconds since the Unix epoch (0 before it): when an input was applied, as
/// journal entries and exported spans record it.
pub(crate) fn unix_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
