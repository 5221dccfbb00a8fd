//! Event ids: 12 bytes shown as 24 lowercase hex characters (the layout of a MongoDB ObjectId,
//! which is what the Python implementation uses).
//!
//! This module only formats and parses ids. It never reads a clock or a random source: the
//! caller passes the random bytes, the timestamp or the counter. Two ways to get an id:
//!
//! * [`new_event_id`] from 12 random bytes the caller drew;
//! * [`EventId::object_id`] from seconds, a per-process value and a counter (ObjectId layout).
//!
//! The deterministic ids of step outputs (the same id when a step re-runs after a crash, so
//! JetStream's `Nats-Msg-Id` dedup and the log's `event_id` dedup drop the duplicates) are
//! made by the dispatch core (`saap_dispatch::derived_event_id`), the one place that knows a
//! run's executions.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Number of bytes in an event id.
pub const EVENT_ID_BYTES: usize = 12;
/// Number of hex characters in the text form of an event id.
pub const EVENT_ID_HEX_LEN: usize = 2 * EVENT_ID_BYTES;

/// A 12-byte event id; its text form is 24 lowercase hex characters.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct EventId([u8; EVENT_ID_BYTES]);

impl std::hash::Hash for EventId {
    // Two word writes instead of a length-prefixed byte slice: the dispatch core hashes one
    // id per appended event.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let mut a = [0u8; 8];
        let mut b = [0u8; 4];
        a.copy_from_slice(&self.0[..8]);
        b.copy_from_slice(&self.0[8..]);
        state.write_u64(u64::from_le_bytes(a));
        state.write_u32(u32::from_le_bytes(b));
    }
}

/// Why a string is not an event id.
#[derive(thiserror::Error, Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventIdError {
    /// Wrong length (in bytes of the string).
    #[error("an event id has exactly 24 characters, this one has {0}")]
    Length(usize),
    /// A character that is not `0-9` or `a-f`.
    #[error("an event id is lowercase hex (0-9, a-f); found {found:?} at position {position}")]
    NotLowercaseHex {
        /// The offending character.
        found: char,
        /// Its byte position.
        position: usize,
    },
}

impl EventId {
    /// The id with these bytes.
    pub const fn from_bytes(bytes: [u8; EVENT_ID_BYTES]) -> EventId {
        EventId(bytes)
    }

    /// The raw bytes.
    pub const fn as_bytes(&self) -> &[u8; EVENT_ID_BYTES] {
        &self.0
    }

    /// An id in the MongoDB ObjectId layout: 4 bytes of big-endian Unix seconds, 5 bytes unique
    /// to the process (drawn once by the caller), 3 bytes of big-endian counter (only the low
    /// 24 bits of `counter` are used; it wraps).
    pub fn object_id(unix_seconds: u32, process_unique: [u8; 5], counter: u32) -> EventId {
        let mut b = [0u8; EVENT_ID_BYTES];
        b[..4].copy_from_slice(&unix_seconds.to_be_bytes());
        b[4..9].copy_from_slice(&process_unique);
        b[9..].copy_from_slice(&counter.to_be_bytes()[1..]);
        EventId(b)
    }

    /// The Unix seconds of an ObjectId-layout id (the first 4 bytes). Meaningless for ids
    /// made by [`new_event_id`] or [`EventId::object_id`].
    pub fn object_id_seconds(&self) -> u32 {
        u32::from_be_bytes([self.0[0], self.0[1], self.0[2], self.0[3]])
    }

    /// Parses the 24-lowercase-hex text form. Uppercase is refused so that an id has exactly one
    /// text form (ids are compared and deduplicated as text by other implementations).
    pub fn parse(s: &str) -> Result<EventId, EventIdError> {
        let bytes = s.as_bytes();
        if bytes.len() != EVENT_ID_HEX_LEN {
            return Err(EventIdError::Length(bytes.len()));
        }
        let mut out = [0u8; EVENT_ID_BYTES];
        for (i, pair) in bytes.chunks_exact(2).enumerate() {
            let hi = hex_value(pair[0]).ok_or_else(|| bad_char(s, 2 * i))?;
            let lo = hex_value(pair[1]).ok_or_else(|| bad_char(s, 2 * i + 1))?;
            out[i] = (hi << 4) | lo;
        }
        Ok(EventId(out))
    }
}

fn bad_char(s: &str, position: usize) -> EventIdError {
    // `position` may fall inside a multi-byte character; report the character that covers it.
    let found = s
        .char_indices()
        .take_while(|(i, _)| *i <= position)
        .last()
        .map_or('?', |(_, c)| c);
    EventIdError::NotLowercaseHex { found, position }
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    }
}

impl EventId {
    /// The 24-character text form in a stack buffer (no allocation, no formatter
    /// machinery: ids are written for every stored and published event).
    pub fn hex(&self) -> EventIdHex {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; EVENT_ID_HEX_LEN];
        for (i, b) in self.0.iter().enumerate() {
            out[2 * i] = DIGITS[(b >> 4) as usize];
            out[2 * i + 1] = DIGITS[(b & 0x0f) as usize];
        }
        EventIdHex(out)
    }
}

/// The text form of an [`EventId`], made by [`EventId::hex`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct EventIdHex([u8; EVENT_ID_HEX_LEN]);

impl EventIdHex {
    pub fn as_str(&self) -> &str {
        // Only ASCII hex digits are ever written into the buffer.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl std::ops::Deref for EventIdHex {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.hex().as_str())
    }
}

impl fmt::Debug for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EventId({self})")
    }
}

impl FromStr for EventId {
    type Err = EventIdError;
    fn from_str(s: &str) -> Result<EventId, EventIdError> {
        EventId::parse(s)
    }
}

impl Serialize for EventId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.hex().as_str())
    }
}

impl<'de> Deserialize<'de> for EventId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<EventId, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        EventId::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A fresh event id from 12 random bytes the caller drew (e.g. from `getrandom`).
pub fn new_event_id(random_bytes: [u8; EVENT_ID_BYTES]) -> EventId {
    EventId::from_bytes(random_bytes)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn event_id_text_form_is_24_lowercase_hex_and_round_trips() {
        let id = EventId::from_bytes([0xab, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0x0a, 0xff]);
        let s = id.to_string();
        assert_eq!(s, "ab0102030405060708090aff");
        assert_eq!(EventId::parse(&s).unwrap(), id);
        assert_eq!(s.parse::<EventId>().unwrap(), id);
        assert_eq!(format!("{id:?}"), "EventId(ab0102030405060708090aff)");
    }

    #[test]
    fn event_id_hex_matches_the_formatted_bytes() {
        let id = EventId::from_bytes([
            0, 1, 0x0f, 0x10, 0x7f, 0x80, 0xa5, 0xff, 0x3c, 0xc3, 0x99, 0x66,
        ]);
        let by_format: String = id.as_bytes().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(id.hex().as_str(), by_format);
        assert_eq!(id.to_string(), by_format);
        assert_eq!(
            serde_json::to_string(&id).unwrap(),
            format!("\"{by_format}\"")
        );
    }

    #[test]
    fn event_id_rejects_wrong_length_uppercase_and_non_hex() {
        assert_eq!(EventId::parse(""), Err(EventIdError::Length(0)));
        assert_eq!(
            EventId::parse("ab0102030405060708090af"),
            Err(EventIdError::Length(23))
        );
        assert_eq!(
            EventId::parse("AB0102030405060708090aff"),
            Err(EventIdError::NotLowercaseHex {
                found: 'A',
                position: 0
            })
        );
        assert_eq!(
            EventId::parse("ab010203040506070809zaff"),
            Err(EventIdError::NotLowercaseHex {
                found: 'z',
                position: 20
            })
        );
        // 24 bytes but multi-byte characters: rejected without panicking.
        assert!(matches!(
            EventId::parse(&"\u{e9}".repeat(12)),
            Err(EventIdError::NotLowercaseHex { position: 0, .. })
        ));
    }

    #[test]
    fn event_id_serde_is_the_text_form() {
        let id = EventId::from_bytes([7; 12]);
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, "\"070707070707070707070707\"");
        let back: EventId = serde_json::from_str(&json).unwrap();
        assert_eq!(back, id);
        assert!(serde_json::from_str::<EventId>("\"xyz\"").is_err());
    }

    #[test]
    fn object_id_layout_is_seconds_process_counter_big_endian() {
        let id = EventId::object_id(0x6553_f100, [1, 2, 3, 4, 5], 0x01_abcdef);
        assert_eq!(id.to_string(), "6553f1000102030405abcdef");
        assert_eq!(id.object_id_seconds(), 0x6553_f100);
    }

    #[test]
    fn new_event_id_uses_the_given_bytes() {
        assert_eq!(new_event_id([0; 12]).to_string(), "0".repeat(24));
    }
}
