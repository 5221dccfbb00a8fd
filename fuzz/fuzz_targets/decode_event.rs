//! Fuzz target for the event decoder: decoding arbitrary bytes never panics, and whatever
//! decodes round-trips (decode → encode → decode gives the same envelope, and encoding is a
//! fixed point after one pass).
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use saap_protocol::{DecodeLimits, EventEnvelope, Hierarchy};

static HIERARCHY: LazyLock<Hierarchy> = LazyLock::new(Hierarchy::builtin_with_agent_package);

fuzz_target!(|data: &[u8]| {
    let limits = DecodeLimits::default();
    let Ok(event) = EventEnvelope::decode(data, &HIERARCHY, &limits) else {
        return;
    };
    let encoded = event.encode_bytes();
    let again = match EventEnvelope::decode(&encoded, &HIERARCHY, &limits) {
        Ok(e) => e,
        Err(e) => panic!("an encoded event failed to decode: {e}"),
    };
    assert_eq!(again, event, "decode(encode(e)) != e");
    assert_eq!(again.encode_bytes(), encoded, "encoding is not stable");
});
