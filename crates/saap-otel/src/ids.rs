//! Trace and span ids derived from what a run is (its id, an execution's number and attempt),
//! so that spans made by different processes for the same run (NATS workers, a CLI exporting
//! after the fact) join into one trace without talking to each other; and the W3C
//! `traceparent` header that carries them across processes.
//!
//! The hash here is written out by hand and pinned by tests with literal values: ids must
//! never change between versions, or a run exported twice would make two traces. This module
//! must not draw random numbers, read a clock or do I/O.

use std::fmt::Write as _;

/// A 16-byte OpenTelemetry trace id (never all zeros).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TraceId(pub [u8; 16]);

/// An 8-byte OpenTelemetry span id (never all zeros).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SpanId(pub [u8; 8]);

/// Seeds of the independent 64-bit hashes (arbitrary odd constants; never change them).
const SEED_TRACE_A: u64 = 0x5341_4150_5452_4331; // "SAAPTRC1"
const SEED_TRACE_B: u64 = 0x5341_4150_5452_4332; // "SAAPTRC2"
const SEED_RUN_SPAN: u64 = 0x5341_4150_5255_4e31; // "SAAPRUN1"
const SEED_EXECUTION: u64 = 0x5341_4150_4558_4531; // "SAAPEXE1"
const SEED_CHILD: u64 = 0x5341_4150_4348_4c31; // "SAAPCHL1"

/// A stable 64-bit hash: FNV-1a over the bytes, started from `seed`, then the SplitMix64
/// finaliser over the result and the length (so short inputs still spread over all bits).
fn hash64(seed: u64, bytes: &[u8]) -> u64 {
    const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = FNV_OFFSET ^ seed;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    mix64(h ^ (bytes.len() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// SplitMix64's finaliser.
fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The 12 bytes of a 24-hex-digit ObjectId, if `text` is one.
fn object_id_bytes(text: &str) -> Option<[u8; 12]> {
    if text.len() != 24 {
        return None;
    }
    let mut out = [0u8; 12];
    for (i, pair) in text.as_bytes().chunks(2).enumerate() {
        let hi = hex_value(pair[0])?;
        let lo = hex_value(pair[1])?;
        out[i] = hi << 4 | lo;
    }
    Some(out)
}

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

fn lower_hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

fn to_hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Decodes exactly `N` bytes of lowercase hex.
fn from_lower_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != N * 2 {
        return None;
    }
    let mut out = [0u8; N];
    for (i, pair) in text.as_bytes().chunks(2).enumerate() {
        out[i] = lower_hex_value(pair[0])? << 4 | lower_hex_value(pair[1])?;
    }
    Some(out)
}

impl TraceId {
    /// The trace of run `run_id`. A 24-hex run id (the protocol's ObjectId form) gives its 12
    /// bytes followed by 4 bytes of a hash of the text, so the trace id starts with the run id;
    /// any other text gives 16 bytes of a stable 128-bit hash.
    pub fn of_run(run_id: &str) -> TraceId {
        let mut out = [0u8; 16];
        if let Some(object_id) = object_id_bytes(run_id) {
            out[..12].copy_from_slice(&object_id);
            out[12..].copy_from_slice(&hash64(SEED_TRACE_A, run_id.as_bytes()).to_be_bytes()[..4]);
        } else {
            out[..8].copy_from_slice(&hash64(SEED_TRACE_A, run_id.as_bytes()).to_be_bytes());
            out[8..].copy_from_slice(&hash64(SEED_TRACE_B, run_id.as_bytes()).to_be_bytes());
        }
        if out == [0u8; 16] {
            out[15] = 1;
        }
        TraceId(out)
    }

    /// 32 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        to_hex(&self.0)
    }
}

fn span_id(h: u64) -> SpanId {
    // A zero hash is as unlikely as any other value, but W3C calls a zero id invalid.
    SpanId(if h == 0 { 1 } else { h }.to_be_bytes())
}

impl SpanId {
    /// The root span of run `run_id`.
    pub fn of_run(run_id: &str) -> SpanId {
        span_id(hash64(SEED_RUN_SPAN, run_id.as_bytes()))
    }

    /// The span of one execution (`execution`, `attempt`) of a step in run `run_id`.
    pub fn of_execution(run_id: &str, execution: u32, attempt: u32) -> SpanId {
        let mut bytes = Vec::with_capacity(run_id.len() + 9);
        bytes.extend_from_slice(run_id.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(&execution.to_be_bytes());
        bytes.extend_from_slice(&attempt.to_be_bytes());
        span_id(hash64(SEED_EXECUTION, &bytes))
    }

    /// The `index`th child of span `parent` (a semantic event's span under its execution).
    pub fn child(parent: SpanId, index: u32) -> SpanId {
        let mut bytes = [0u8; 12];
        bytes[..8].copy_from_slice(&parent.0);
        bytes[8..].copy_from_slice(&index.to_be_bytes());
        span_id(hash64(SEED_CHILD, &bytes))
    }

    /// 16 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        to_hex(&self.0)
    }
}

/// The W3C `traceparent` header of a span: `00-<trace id>-<span id>-01` (sampled).
pub fn traceparent(trace: TraceId, span: SpanId) -> String {
    format!("00-{}-{}-01", trace.to_hex(), span.to_hex())
}

/// Reads a W3C `traceparent` header strictly: lowercase hex, ids not all zero, version `ff`
/// refused. Version `00` must be exactly 55 characters; a later version may carry more fields
/// after a `-` (the specification's forward-compatibility rule). `None` when it is not valid.
pub fn parse_traceparent(header: &str) -> Option<(TraceId, SpanId)> {
    let header = header.trim_matches(|c| c == ' ' || c == '\t');
    if !header.is_ascii() || header.len() < 55 {
        return None;
    }
    let version = from_lower_hex::<1>(&header[..2])?[0];
    if version == 0xff {
        return None;
    }
    if version == 0 && header.len() != 55 {
        return None;
    }
    if header.len() > 55 && header.as_bytes()[55] != b'-' {
        return None;
    }
    let bytes = header.as_bytes();
    if bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
        return None;
    }
    let trace = from_lower_hex::<16>(&header[3..35])?;
    let span = from_lower_hex::<8>(&header[36..52])?;
    from_lower_hex::<1>(&header[53..55])?;
    if trace == [0u8; 16] || span == [0u8; 8] {
        return None;
    }
    Some((TraceId(trace), SpanId(span)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "65f1a2b3c4d5e6f708192a3b";

    #[test]
    fn ids_are_pinned_forever() {
        // These literals must never change: a run exported by two versions must be one trace.
        assert_eq!(
            TraceId::of_run(RUN).to_hex(),
            "65f1a2b3c4d5e6f708192a3b01a04c4e"
        );
        assert_eq!(
            TraceId::of_run("run-1").to_hex(),
            "d05030f631a1702c1248904af8aca244"
        );
        assert_eq!(SpanId::of_run(RUN).to_hex(), "83fd6c5dae762c99");
        assert_eq!(SpanId::of_execution(RUN, 3, 1).to_hex(), "f17f8fb86889cc41");
        assert_eq!(
            SpanId::child(SpanId::of_execution(RUN, 3, 1), 0).to_hex(),
            "d526182db14010c6"
        );
    }

    #[test]
    fn an_object_id_run_gives_a_trace_id_that_starts_with_it() {
        assert!(TraceId::of_run(RUN).to_hex().starts_with(RUN));
        // Upper-case hex is the same ObjectId but different text: same prefix.
        assert!(
            TraceId::of_run(&RUN.to_uppercase())
                .to_hex()
                .starts_with(RUN)
        );
        assert!(!TraceId::of_run("run-1").to_hex().starts_with("run"));
    }

    #[test]
    fn ids_differ_by_every_input() {
        let a = SpanId::of_execution(RUN, 1, 0);
        assert_ne!(a, SpanId::of_execution(RUN, 1, 1));
        assert_ne!(a, SpanId::of_execution(RUN, 2, 0));
        assert_ne!(a, SpanId::of_execution("65f1a2b3c4d5e6f708192a3c", 1, 0));
        assert_ne!(a, SpanId::of_run(RUN));
        assert_ne!(SpanId::child(a, 0), SpanId::child(a, 1));
        assert_ne!(TraceId::of_run("a"), TraceId::of_run("b"));
        assert_ne!(TraceId::of_run(""), TraceId([0; 16]));
        assert_ne!(SpanId::of_run(""), SpanId([0; 8]));
    }

    #[test]
    fn an_all_zero_object_id_still_gives_a_valid_trace_id() {
        let t = TraceId::of_run("000000000000000000000000");
        assert_ne!(t, TraceId([0; 16]));
        assert!(t.to_hex().starts_with("000000000000000000000000"));
    }

    #[test]
    fn traceparent_round_trips() {
        let t = TraceId::of_run(RUN);
        let s = SpanId::of_execution(RUN, 2, 0);
        let header = traceparent(t, s);
        assert_eq!(header, format!("00-{}-{}-01", t.to_hex(), s.to_hex()));
        assert_eq!(header.len(), 55);
        assert_eq!(parse_traceparent(&header), Some((t, s)));
    }

    #[test]
    fn the_w3c_example_parses_and_later_versions_are_accepted() {
        let (t, s) = parse_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
            .expect("the W3C example");
        assert_eq!(t.to_hex(), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(s.to_hex(), "b7ad6b7169203331");
        assert!(
            parse_traceparent("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00-extra")
                .is_some()
        );
        assert!(
            parse_traceparent("cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00").is_some()
        );
    }

    #[test]
    fn bad_traceparents_are_refused() {
        for bad in [
            "",
            "00",
            // upper-case hex
            "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01",
            // all-zero trace id / span id
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            // version ff
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            // version 00 with extra fields
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x",
            // later version, extra text without a dash
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x",
            // wrong separators, short ids, non-hex
            "00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333g-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0z",
            "0g-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-é1",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad:?} must be refused");
        }
    }
}
