//! The one validator of the probe event contract (seed §3), shared by HTTP and file ingest.
//!
//! A probe event has exactly five fields: `hypothesisId`, `location`, `message`, `data`,
//! `timestamp`. Strings, arrays, objects and nesting are bounded. A line that fails becomes a
//! [`Malformed`] diagnostic carrying the recoverable fields and a redacted, truncated preview.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::redact;

/// Largest accepted event line (bytes, excluding the newline).
pub const MAX_LINE_BYTES: usize = 64 * 1024;
pub const MAX_HYPOTHESIS_ID_CHARS: usize = 64;
pub const MAX_LOCATION_CHARS: usize = 512;
pub const MAX_MESSAGE_CHARS: usize = 1024;
pub const MAX_DATA_DEPTH: usize = 16;
pub const MAX_DATA_STRING_CHARS: usize = 16 * 1024;
pub const MAX_DATA_ITEMS: usize = 1000;
/// Preview length of a malformed record.
pub const PREVIEW_CHARS: usize = 160;

const FIELDS: [&str; 5] = ["hypothesisId", "location", "message", "data", "timestamp"];

/// A validated (not yet redacted) probe event.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeEvent {
    pub hypothesis_id: String,
    pub location: String,
    pub message: String,
    pub data: Value,
    pub timestamp: u64,
}

/// Why a record was rejected. Stable strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    InvalidJson,
    NotAnObject,
    MissingField,
    UnknownField,
    InvalidField,
    TooLarge,
    TooDeep,
    /// The rest of a record that a raw newline cut in two (file ingest).
    SplitRecord,
}

impl Reason {
    pub fn suggested_fix(self) -> &'static str {
        match self {
            Self::InvalidJson => {
                "serialize the event with the language's JSON library (the generated helper does this); never build JSON by string concatenation, and end every record with a newline"
            }
            Self::NotAnObject => "send one JSON object per line with the five event fields",
            Self::MissingField => {
                "send all five fields: hypothesisId, location, message, data, timestamp (use null for empty data)"
            }
            Self::UnknownField => {
                "send only the five event fields; put extra values inside `data` (no sessionId, run id or schemaVersion in the body)"
            }
            Self::InvalidField => {
                "hypothesisId, location and message must be non-empty bounded strings; timestamp must be Unix epoch milliseconds"
            }
            Self::TooLarge => {
                "record the smallest value that tests the hypothesis: bound strings, arrays and object sizes in `data`"
            }
            Self::TooDeep => "flatten `data`: nest at most 16 levels",
            Self::SplitRecord => {
                "a raw newline inside the record cut it in two: serialize `data` with a JSON library or the helper's json_string (the generated helpers drop such an event instead of writing it)"
            }
        }
    }
}

/// A rejected record, ready to be stored as a diagnostic (already redacted).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Malformed {
    pub reason: Reason,
    pub message: String,
    pub recoverable_fields: Map<String, Value>,
    pub preview: String,
    pub suggested_fix: String,
}

fn truncate_chars(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    if s.chars().nth(n).is_some() {
        out.push('…');
    }
    out
}

/// Redacted, bounded preview of raw input bytes.
pub fn preview(raw: &[u8]) -> String {
    // Redact a bounded prefix (so a huge line costs little), then truncate.
    let head = &raw[..raw.len().min(PREVIEW_CHARS * 8)];
    let text = String::from_utf8_lossy(head);
    let red = redact::redact_str(&text);
    let mut p = truncate_chars(&red, PREVIEW_CHARS);
    if raw.len() > head.len() && !p.ends_with('…') {
        p.push('…');
    }
    p
}

fn malformed(
    reason: Reason,
    message: String,
    recoverable: Map<String, Value>,
    raw: &[u8],
) -> Malformed {
    Malformed {
        reason,
        message,
        recoverable_fields: recoverable,
        preview: preview(raw),
        suggested_fix: reason.suggested_fix().to_owned(),
    }
}

fn check_string(obj: &Map<String, Value>, key: &str, max: usize) -> Result<String, String> {
    match obj.get(key) {
        Some(Value::String(s)) if s.trim().is_empty() => Err(format!("`{key}` is empty")),
        Some(Value::String(s)) if s.chars().count() > max => {
            Err(format!("`{key}` is longer than {max} characters"))
        }
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(format!(
            "`{key}` must be a string, got {}",
            type_name(other)
        )),
        None => Err(format!("`{key}` is missing")),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn check_timestamp(v: Option<&Value>) -> Result<u64, String> {
    match v {
        Some(Value::Number(n)) => {
            if let Some(u) = n.as_u64() {
                return Ok(u);
            }
            match n.as_f64() {
                Some(f) if (0.0..1e16).contains(&f) => {
                    // Fractional milliseconds are truncated to whole milliseconds.
                    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                    Ok(f.trunc() as u64)
                }
                _ => Err("`timestamp` must be non-negative Unix epoch milliseconds".into()),
            }
        }
        Some(other) => Err(format!(
            "`timestamp` must be Unix epoch milliseconds (a number), got {}",
            type_name(other)
        )),
        None => Err("`timestamp` is missing".into()),
    }
}

/// Checks bounds of the `data` value. Returns the reason and message on failure.
fn check_data(v: &Value, depth: usize) -> Result<(), (Reason, String)> {
    if depth > MAX_DATA_DEPTH {
        return Err((
            Reason::TooDeep,
            format!("`data` is nested deeper than {MAX_DATA_DEPTH} levels"),
        ));
    }
    match v {
        Value::String(s)
            if s.len() > MAX_DATA_STRING_CHARS * 4 || s.chars().count() > MAX_DATA_STRING_CHARS =>
        {
            Err((
                Reason::TooLarge,
                format!("a string in `data` is longer than {MAX_DATA_STRING_CHARS} characters"),
            ))
        }
        Value::Array(a) => {
            if a.len() > MAX_DATA_ITEMS {
                return Err((
                    Reason::TooLarge,
                    format!("an array in `data` has more than {MAX_DATA_ITEMS} items"),
                ));
            }
            a.iter().try_for_each(|i| check_data(i, depth + 1))
        }
        Value::Object(o) => {
            if o.len() > MAX_DATA_ITEMS {
                return Err((
                    Reason::TooLarge,
                    format!("an object in `data` has more than {MAX_DATA_ITEMS} keys"),
                ));
            }
            o.values().try_for_each(|i| check_data(i, depth + 1))
        }
        _ => Ok(()),
    }
}

/// Collects the fields that are individually valid, redacted, for diagnostics.
fn recoverable(obj: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, max) in [
        ("hypothesisId", MAX_HYPOTHESIS_ID_CHARS),
        ("location", MAX_LOCATION_CHARS),
        ("message", MAX_MESSAGE_CHARS),
    ] {
        if let Ok(s) = check_string(obj, key, max) {
            out.insert(
                key.into(),
                Value::String(redact::redact_str(&s).into_owned()),
            );
        }
    }
    if let Ok(t) = check_timestamp(obj.get("timestamp")) {
        out.insert("timestamp".into(), Value::from(t));
    }
    out
}

/// Validates one record (one NDJSON line without its newline).
#[allow(clippy::result_large_err)] // rejected records are the common case on bad input; no hot path boxes
pub fn validate_line(raw: &[u8]) -> Result<ProbeEvent, Malformed> {
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    if raw.len() > MAX_LINE_BYTES {
        return Err(malformed(
            Reason::TooLarge,
            format!(
                "record is {} bytes; the limit is {MAX_LINE_BYTES} bytes",
                raw.len()
            ),
            Map::new(),
            raw,
        ));
    }
    let value: Value = match serde_json::from_slice(raw) {
        Ok(v) => v,
        Err(e) => {
            return Err(malformed(
                Reason::InvalidJson,
                format!("record is not valid JSON ({e})"),
                Map::new(),
                raw,
            ));
        }
    };
    validate_value(value, raw)
}

/// Validates an already parsed record; `raw` is only used for the preview.
#[allow(clippy::result_large_err)]
pub fn validate_value(value: Value, raw: &[u8]) -> Result<ProbeEvent, Malformed> {
    let Value::Object(mut obj) = value else {
        return Err(malformed(
            Reason::NotAnObject,
            format!("record must be a JSON object, got {}", type_name(&value)),
            Map::new(),
            raw,
        ));
    };
    let missing: Vec<&str> = FIELDS
        .iter()
        .copied()
        .filter(|f| !obj.contains_key(*f))
        .collect();
    if !missing.is_empty() {
        return Err(malformed(
            Reason::MissingField,
            format!("missing field(s): {}", missing.join(", ")),
            recoverable(&obj),
            raw,
        ));
    }
    let unknown: Vec<String> = obj
        .keys()
        .filter(|k| !FIELDS.contains(&k.as_str()))
        .take(5)
        .map(|k| truncate_chars(&redact::redact_str(k), 40))
        .collect();
    if !unknown.is_empty() {
        return Err(malformed(
            Reason::UnknownField,
            format!("unexpected field(s): {}", unknown.join(", ")),
            recoverable(&obj),
            raw,
        ));
    }
    let fields = (
        check_string(&obj, "hypothesisId", MAX_HYPOTHESIS_ID_CHARS),
        check_string(&obj, "location", MAX_LOCATION_CHARS),
        check_string(&obj, "message", MAX_MESSAGE_CHARS),
        check_timestamp(obj.get("timestamp")),
    );
    let (hypothesis_id, location, message, timestamp) = match fields {
        (Ok(h), Ok(l), Ok(m), Ok(t)) => (h, l, m, t),
        (h, l, m, t) => {
            let errs: Vec<String> = [h.err(), l.err(), m.err(), t.err()]
                .into_iter()
                .flatten()
                .collect();
            return Err(malformed(
                Reason::InvalidField,
                errs.join("; "),
                recoverable(&obj),
                raw,
            ));
        }
    };
    let data = obj.remove("data").unwrap_or(Value::Null);
    if let Err((reason, msg)) = check_data(&data, 1) {
        return Err(malformed(reason, msg, recoverable(&obj), raw));
    }
    Ok(ProbeEvent {
        hypothesis_id,
        location,
        message,
        data,
        timestamp,
    })
}

/// A record accepted by the fast path: borrowed fields and the compacted `data` text.
#[derive(Debug, Clone, PartialEq)]
pub struct FastEvent<'a> {
    pub hypothesis_id: &'a str,
    pub location: &'a str,
    pub message: &'a str,
    pub data: String,
    pub timestamp: u64,
}

/// Fast path of [`validate_line`] for the common case. Returns `Some` only for records the
/// full validator accepts *and* the redactor would leave unchanged, with `data` compacted
/// to the exact text the full path would store; anything unusual (escapes, duplicate keys,
/// deep or large data, non-integer or long numbers, secret-looking content) returns `None`
/// and must take the full path. So both paths store identical bytes.
pub fn fast_validate(raw: &[u8]) -> Option<FastEvent<'_>> {
    let mut data = Vec::new();
    let mut scratch = FastScratch::default();
    let f = fast_scan(raw, &mut data, &mut scratch)?;
    Some(FastEvent {
        hypothesis_id: f.hypothesis_id,
        location: std::str::from_utf8(f.location).ok()?,
        message: std::str::from_utf8(f.message).ok()?,
        data: String::from_utf8(data).ok()?,
        timestamp: f.timestamp,
    })
}

/// The fields of a fast-path record; `data` was compacted into the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastFields<'a> {
    pub hypothesis_id: &'a str,
    /// UTF-8 (checked as part of the whole line).
    pub location: &'a [u8],
    /// UTF-8 (checked as part of the whole line).
    pub message: &'a [u8],
    pub timestamp: u64,
    /// The timestamp's digits as they appear in the line (canonical: equal to the rendering
    /// of `timestamp`).
    pub timestamp_text: &'a [u8],
}

/// The allocation-free core of [`fast_validate`]: one hand-written pass over the line that
/// checks the JSON grammar, the five-field contract, the bounds and the key names, and
/// compacts `data` into `data_out` (cleared first). `scratch` is reused across calls. Then
/// one secret scan of the whole line (see [`redact::line_is_clean`]).
pub fn fast_scan<'a>(
    raw: &'a [u8],
    data_out: &mut Vec<u8>,
    scratch: &mut FastScratch,
) -> Option<FastFields<'a>> {
    data_out.clear();
    if raw.len() > MAX_LINE_BYTES {
        return None;
    }
    scratch.keys.clear();
    let mut p = Scan {
        b: raw,
        i: 0,
        scratch,
    };
    let (hypothesis_id, location, message, (timestamp, timestamp_text)) =
        scan_record(&mut p, data_out)?;
    // Non-ASCII lines are checked to be valid UTF-8 as a whole by `line_is_clean`.
    if !redact::line_is_clean(raw, &mut scratch.lower) {
        return None;
    }
    Some(FastFields {
        hypothesis_id,
        location,
        message,
        timestamp,
        timestamp_text,
    })
}

/// Buffers reused by [`fast_scan`] across lines.
#[derive(Debug, Default)]
pub struct FastScratch {
    keys: Vec<(usize, usize)>,
    lower: Vec<u8>,
    /// Key names already found not to be secret (probes repeat their keys line after line).
    clean_keys: Vec<Box<[u8]>>,
}

/// Most remembered non-secret key names per [`FastScratch`].
const CLEAN_KEY_CACHE: usize = 32;

impl FastScratch {
    /// [`redact::is_secret_key_bytes`], remembering up to [`CLEAN_KEY_CACHE`] clean names.
    fn is_secret_key(&mut self, key: &[u8]) -> bool {
        if self.clean_keys.iter().any(|k| **k == *key) {
            return false;
        }
        let secret = redact::is_secret_key_bytes(key);
        if !secret && self.clean_keys.len() < CLEAN_KEY_CACHE && key.len() <= 64 {
            self.clean_keys.push(key.into());
        }
        secret
    }
}

type Fields<'a> = (&'a str, &'a [u8], &'a [u8], (u64, &'a [u8]));

fn scan_record<'a>(p: &mut Scan<'a, '_>, data_out: &mut Vec<u8>) -> Option<Fields<'a>> {
    let raw = p.b;
    p.ws();
    p.eat(b'{')?;
    let (mut h, mut l, mut m, mut t) = (None, None, None, None);
    let mut have_data = false;
    loop {
        p.ws();
        let key = p.string()?;
        p.ws();
        p.eat(b':')?;
        p.ws();
        match key {
            b"hypothesisId" if h.is_none() => h = Some(p.string()?),
            b"location" if l.is_none() => l = Some(p.string()?),
            b"message" if m.is_none() => m = Some(p.string()?),
            b"timestamp" if t.is_none() => t = Some(p.timestamp()?),
            b"data" if !have_data => {
                have_data = true;
                p.value(data_out, 0)?;
            }
            _ => return None, // unknown or duplicate field
        }
        p.ws();
        match p.next()? {
            b',' => {}
            b'}' => break,
            _ => return None,
        }
    }
    p.ws();
    if p.i != raw.len() || !have_data {
        return None;
    }
    let (hypothesis_id, location, message) = (std::str::from_utf8(h?).ok()?, l?, m?);
    // A first byte that is visible ASCII proves the trimmed string non-empty. (The whole
    // line's UTF-8 validity is checked by the caller.)
    let ok_str = |s: &[u8], max: usize| {
        s.len() <= max
            && (s.first().is_some_and(u8::is_ascii_graphic)
                || std::str::from_utf8(s).is_ok_and(|t| !t.trim().is_empty()))
    };
    if !ok_str(hypothesis_id.as_bytes(), MAX_HYPOTHESIS_ID_CHARS)
        || !ok_str(location, MAX_LOCATION_CHARS)
        || !ok_str(message, MAX_MESSAGE_CHARS)
    {
        return None;
    }
    Some((hypothesis_id, location, message, t?))
}

/// Largest nesting level of `data` the fast path handles (the full path allows 16).
const FAST_MAX_DEPTH: usize = MAX_DATA_DEPTH - 3;
/// Most items per array/object the fast path handles (the full path allows 1000).
const FAST_MAX_ITEMS: usize = MAX_DATA_ITEMS - 100;
/// Most keys per object the fast path handles (duplicate detection is quadratic).
const FAST_MAX_KEYS: usize = 64;
/// Longest string (bytes) the fast path handles (the full path allows 16k characters).
const FAST_MAX_STRING: usize = MAX_DATA_STRING_CHARS / 2;

/// A strict recursive-descent JSON scanner over a line without backslashes. Every `None`
/// means "not certain: take the full path".
struct Scan<'a, 'k> {
    b: &'a [u8],
    i: usize,
    /// `keys`: byte ranges of the keys of the objects being scanned (a stack).
    scratch: &'k mut FastScratch,
}

/// Whether any of the 8 bytes packed in `v` is a quote, a backslash or a control character
/// (the classic "has zero byte" and "has byte less than" bit tricks: no false negatives).
fn may_stop_string(v: u64) -> bool {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(LO) & !x & HI;
    let quote = has_zero(v ^ (LO * u64::from(b'"')));
    let backslash = has_zero(v ^ (LO * u64::from(b'\\')));
    let control = v.wrapping_sub(LO * 0x20) & !v & HI;
    quote | backslash | control != 0
}

/// Bytes that end the fast scan of a string's content: the quote, a backslash (escapes take
/// the full path) and control characters (invalid inside JSON strings).
static STRING_STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = true;
        c += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

impl<'a> Scan<'a, '_> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn next(&mut self) -> Option<u8> {
        let c = *self.b.get(self.i)?;
        self.i += 1;
        Some(c)
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }

    /// A string without escapes or control characters; returns its content.
    fn string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.i;
        let rest = self.b.get(start..)?;
        let mut len = 0;
        // Skip 8 bytes at a time while none of them can stop the string, then find the
        // exact stop byte one at a time.
        while let Some(word) = rest.get(len..len + 8) {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            if may_stop_string(u64::from_le_bytes(w)) {
                break;
            }
            len += 8;
        }
        while len < rest.len() && !STRING_STOP[usize::from(rest[len])] {
            len += 1;
        }
        if len > FAST_MAX_STRING || rest.get(len) != Some(&b'"') {
            return None;
        }
        self.i = start + len + 1;
        Some(&rest[..len])
    }

    /// A non-negative integer (no fraction or exponent: those take the full path), and its
    /// digits.
    fn timestamp(&mut self) -> Option<(u64, &'a [u8])> {
        let start = self.i;
        let mut v: u64 = 0;
        while let Some(c @ b'0'..=b'9') = self.b.get(self.i) {
            v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
            self.i += 1;
        }
        let digits = self.i - start;
        if digits == 0 || (digits > 1 && self.b[start] == b'0') || self.number_continues() {
            return None;
        }
        Some((v, &self.b[start..self.i]))
    }

    fn number_continues(&self) -> bool {
        matches!(self.b.get(self.i), Some(b'.' | b'e' | b'E' | b'0'..=b'9'))
    }

    /// One `data` value, compacted into `out` exactly as `serde_json` re-serializes it.
    fn value(&mut self, out: &mut Vec<u8>, depth: usize) -> Option<()> {
        match *self.b.get(self.i)? {
            b'"' => {
                let s = self.string()?;
                out.push(b'"');
                out.extend_from_slice(s);
                out.push(b'"');
            }
            b'{' => {
                if depth + 1 > FAST_MAX_DEPTH {
                    return None;
                }
                self.i += 1;
                out.push(b'{');
                self.ws();
                if self.b.get(self.i) == Some(&b'}') {
                    self.i += 1;
                } else {
                    let base = self.scratch.keys.len();
                    loop {
                        self.ws();
                        let k = self.string()?;
                        // A key naming a secret means the full path would redact its value;
                        // a duplicate key means it would keep only the last value.
                        if self.scratch.is_secret_key(k)
                            || self.scratch.keys.len() - base >= FAST_MAX_KEYS
                            || self.scratch.keys[base..]
                                .iter()
                                .any(|&(s, e)| self.b.get(s..e) == Some(k))
                        {
                            return None;
                        }
                        self.scratch.keys.push((self.i - 1 - k.len(), self.i - 1));
                        out.push(b'"');
                        out.extend_from_slice(k);
                        out.extend_from_slice(b"\":");
                        self.ws();
                        self.eat(b':')?;
                        self.ws();
                        self.value(out, depth + 1)?;
                        self.ws();
                        match self.next()? {
                            b',' => out.push(b','),
                            b'}' => break,
                            _ => return None,
                        }
                    }
                    self.scratch.keys.truncate(base);
                }
                out.push(b'}');
            }
            b'[' => {
                if depth + 1 > FAST_MAX_DEPTH {
                    return None;
                }
                self.i += 1;
                out.push(b'[');
                self.ws();
                if self.b.get(self.i) == Some(&b']') {
                    self.i += 1;
                } else {
                    let mut items = 0usize;
                    loop {
                        items += 1;
                        if items >= FAST_MAX_ITEMS {
                            return None;
                        }
                        self.ws();
                        self.value(out, depth + 1)?;
                        self.ws();
                        match self.next()? {
                            b',' => out.push(b','),
                            b']' => break,
                            _ => return None,
                        }
                    }
                }
                out.push(b']');
            }
            b'-' | b'0'..=b'9' => {
                let start = self.i;
                if self.b[self.i] == b'-' {
                    self.i += 1;
                }
                let digits_start = self.i;
                while let Some(b'0'..=b'9') = self.b.get(self.i) {
                    self.i += 1;
                }
                let digits = &self.b[digits_start..self.i];
                // Canonical integers only: no `-0`, no leading zeros (invalid JSON), at most
                // 15 digits (so `serde_json` keeps them as integers).
                if digits.is_empty()
                    || digits.len() > 15
                    || (digits[0] == b'0' && (digits.len() > 1 || digits_start > start))
                    || self.number_continues()
                {
                    return None;
                }
                out.extend_from_slice(&self.b[start..self.i]);
            }
            b't' => self.literal(out, b"true")?,
            b'f' => self.literal(out, b"false")?,
            b'n' => self.literal(out, b"null")?,
            _ => return None,
        }
        Some(())
    }

    fn literal(&mut self, out: &mut Vec<u8>, word: &[u8]) -> Option<()> {
        let end = self.i + word.len();
        if self.b.get(self.i..end)? != word {
            return None;
        }
        self.i = end;
        out.extend_from_slice(word);
        Some(())
    }
}

impl ProbeEvent {
    /// Applies the redactor to every string of the event. Returns true if anything changed.
    pub fn redact(&mut self) -> bool {
        let mut changed = false;
        for s in [
            &mut self.hypothesis_id,
            &mut self.location,
            &mut self.message,
        ] {
            if let std::borrow::Cow::Owned(o) = redact::redact_str(s) {
                *s = o;
                changed = true;
            }
        }
        changed | redact::redact_value(&mut self.data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok_line() -> &'static str {
        r#"{"hypothesisId":"H1","location":"src/cache.ts:84","message":"Cache lookup completed","data":{"cacheKey":"cart:42","hit":false},"timestamp":1784313728231}"#
    }

    #[test]
    fn accepts_the_seed_example() {
        let e = validate_line(ok_line().as_bytes()).expect("valid");
        assert_eq!(e.hypothesis_id, "H1");
        assert_eq!(e.timestamp, 1_784_313_728_231);
    }

    #[test]
    fn rejects_with_stable_reasons_and_recoverable_fields() {
        let cases: &[(&str, Reason)] = &[
            ("not json", Reason::InvalidJson),
            ("[1]", Reason::NotAnObject),
            (
                r#"{"hypothesisId":"H1","location":"a:1","message":"m","timestamp":1}"#,
                Reason::MissingField,
            ),
            (
                r#"{"hypothesisId":"H1","location":"a:1","message":"m","data":1,"timestamp":1,"sessionId":"x"}"#,
                Reason::UnknownField,
            ),
            (
                r#"{"hypothesisId":"","location":"a:1","message":"m","data":1,"timestamp":1}"#,
                Reason::InvalidField,
            ),
            (
                r#"{"hypothesisId":"H1","location":"a:1","message":"m","data":1,"timestamp":"yesterday"}"#,
                Reason::InvalidField,
            ),
        ];
        for (line, reason) in cases {
            let m = validate_line(line.as_bytes()).expect_err(line);
            assert_eq!(m.reason, *reason, "{line}");
        }
        let m =
            validate_line(br#"{"hypothesisId":"H2","location":"a:1","message":"m","timestamp":1}"#)
                .expect_err("missing data");
        assert_eq!(
            m.recoverable_fields.get("hypothesisId"),
            Some(&Value::from("H2"))
        );
    }

    #[test]
    fn bounds_data_depth_and_size() {
        let deep = format!(
            r#"{{"hypothesisId":"H1","location":"a:1","message":"m","data":{}1{},"timestamp":1}}"#,
            "[".repeat(40),
            "]".repeat(40)
        );
        assert_eq!(
            validate_line(deep.as_bytes()).expect_err("deep").reason,
            Reason::TooDeep
        );
        let big = format!(
            r#"{{"hypothesisId":"H1","location":"a:1","message":"m","data":"{}","timestamp":1}}"#,
            "x".repeat(MAX_LINE_BYTES)
        );
        assert_eq!(
            validate_line(big.as_bytes()).expect_err("big").reason,
            Reason::TooLarge
        );
    }

    #[test]
    fn fast_path_accepts_only_what_the_full_path_stores_unchanged() {
        let lines = [
            ok_line().to_owned(),
            r#"{ "hypothesisId" : "H2", "location":"b.go:9", "message":"m", "data": { "a" : [1, -2, "x y", true, null, {}], "b": {"c": [ ]} }, "timestamp": 5 }"#.to_owned(),
            r#"{"hypothesisId":"H1","location":"a:1","message":"m","data":"plain","timestamp":1}"#.to_owned(),
            r#"{"hypothesisId":"H1","location":"a:1","message":"m","data":39.98,"timestamp":1}"#.to_owned(),
            r#"{"hypothesisId":"H1","location":"a:1","message":"m","data":12345678901234567890,"timestamp":1}"#.to_owned(),
            r#"{"hypothesisId":"H1","location":"a:1","message":"m","data":{"password":"x"},"timestamp":1}"#.to_owned(),
            r#"{"hypothesisId":"H1","location":"a:1","message":"Bearer abcdefghijkl","data":null,"timestamp":1}"#.to_owned(),
            r#"{"hypothesisId":"H1","location":"a:1","message":"m","data":{"auth":"x"},"timestamp":1}"#.to_owned(),
            r#"{"hypothesisId":"H1","location":"a:1","message":"m","data":"tab\there","timestamp":1}"#.to_owned(),
            r#"{"hypothesisId":"H1","location":"a:1","message":"m","data":1,"timestamp":1.5}"#.to_owned(),
            r#"{"hypothesisId":"H1","location":"a:1","message":"m","data":1,"timestamp":1,"x":1}"#.to_owned(),
            r#"{"hypothesisId":"","location":"a:1","message":"m","data":1,"timestamp":1}"#.to_owned(),
            r#"{"hypothesisId":"H1","location":"a:1","message":"m","data":-0,"timestamp":1}"#.to_owned(),
            format!(r#"{{"hypothesisId":"H1","location":"a:1","message":"m","data":{}1{},"timestamp":1}}"#, "[".repeat(14), "]".repeat(14)),
            format!(r#"{{"hypothesisId":"H1","location":"a:1","message":"m","data":[{}0],"timestamp":1}}"#, "0,".repeat(950)),
        ];
        let mut fast_count = 0;
        for line in &lines {
            let full = validate_line(line.as_bytes()).map(|mut e| {
                let changed = e.redact();
                (e, changed)
            });
            if let Some(fast) = fast_validate(line.as_bytes()) {
                fast_count += 1;
                let (full, changed) = full.expect("fast path accepted what the full path rejects");
                assert!(!changed, "fast path skipped a redaction: {line}");
                assert_eq!(fast.hypothesis_id, full.hypothesis_id);
                assert_eq!(fast.location, full.location);
                assert_eq!(fast.message, full.message);
                assert_eq!(fast.timestamp, full.timestamp);
                assert_eq!(
                    fast.data,
                    serde_json::to_string(&full.data).expect("json"),
                    "{line}"
                );
            }
        }
        assert_eq!(fast_count, 3, "the common shapes take the fast path");
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "[ -~]{0,12}".prop_map(Value::from),
            prop_oneof![
                Just("password"),
                Just("tok en"),
                Just("Bearer abcdefghijk"),
                Just("AKIAIOSFODNN7EXAMPLE"),
                Just("x\"y"),
                Just("é\n"),
            ]
            .prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 24, 5, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::from),
                proptest::collection::vec(
                    (
                        prop_oneof![
                            "[a-z]{1,6}",
                            Just("apiKey".to_owned()),
                            Just("auth".to_owned()),
                            // Secret only by a part the redaction prefilter lacks, by an
                            // exact name in capitals, or through a separator.
                            Just("userCredential".to_owned()),
                            Just("Signature2".to_owned()),
                            Just("PIN".to_owned()),
                            Just("private_key".to_owned()),
                            Just("sig".to_owned())
                        ],
                        inner
                    ),
                    0..5
                )
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// Whatever the fast path accepts, the full validator + redactor stores identically.
        #[test]
        fn fast_path_is_equivalent_to_the_full_path(
            data in json_value(),
            h in "[ -~]{0,8}",
            pretty in proptest::bool::ANY,
            ts in 0u64..2_000_000_000_000,
        ) {
            let ev = serde_json::json!({
                "hypothesisId": h, "location": "a.rs:1", "message": "m", "data": data, "timestamp": ts
            });
            let line = if pretty {
                serde_json::to_string_pretty(&ev).expect("json").replace('\n', " ")
            } else {
                serde_json::to_string(&ev).expect("json")
            };
            if let Some(fast) = fast_validate(line.as_bytes()) {
                let mut full = validate_line(line.as_bytes()).expect("full path accepts");
                proptest::prop_assert!(!full.redact(), "fast path skipped a redaction: {}", line);
                proptest::prop_assert_eq!(fast.hypothesis_id, full.hypothesis_id.as_str());
                proptest::prop_assert_eq!(fast.timestamp, full.timestamp);
                proptest::prop_assert_eq!(fast.data, serde_json::to_string(&full.data).expect("json"));
            }
        }
    }

    /// Whatever the fast path accepts, the full path accepts, does not redact, and stores
    /// with identical fields and `data` text.
    fn assert_fast_matches_full(line: &str) -> bool {
        let Some(fast) = fast_validate(line.as_bytes()) else {
            return false;
        };
        let mut full = validate_line(line.as_bytes()).unwrap_or_else(|m| {
            panic!("fast path accepted what the full path rejects ({m:?}): {line}")
        });
        assert!(!full.redact(), "fast path skipped a redaction: {line}");
        assert_eq!(fast.hypothesis_id, full.hypothesis_id, "{line}");
        assert_eq!(fast.location, full.location, "{line}");
        assert_eq!(fast.message, full.message, "{line}");
        assert_eq!(fast.timestamp, full.timestamp, "{line}");
        assert_eq!(
            fast.data,
            serde_json::to_string(&full.data).expect("json"),
            "{line}"
        );
        true
    }

    #[test]
    fn hand_written_scanner_refuses_what_it_cannot_store_identically() {
        let wrap = |data: &str| {
            format!(
                r#"{{"hypothesisId":"H1","location":"a:1","message":"m","data":{data},"timestamp":1}}"#
            )
        };
        // Accepted, and identical to the full path (unicode, nesting, whitespace, empties).
        for data in [
            r#"{"ключ":"значение ✓","e":"😀","n":[0,-1,123456789012345],"o":{"p":{}}}"#,
            "[ ]",
            " { } ",
            "null",
            "true",
            "false",
            "0",
            r#""""#,
            "[[[[[[[[[[[[1]]]]]]]]]]]]",
        ] {
            assert!(assert_fast_matches_full(&wrap(data)), "{data}");
        }
        // Refused: duplicates (the full path keeps the last), invalid JSON, non-canonical
        // numbers, control characters, secrets, non-ASCII secrets, trailing garbage.
        for data in [
            r#"{"a":1,"a":2}"#,
            r#"{"a":1,}"#,
            "[1,]",
            "[1 2]",
            "01",
            "-0",
            "-",
            "1.0",
            "1e5",
            "1234567890123456",
            "tru",
            "nul",
            "\"a\tb\"",
            "\"a\u{1}b\"",
            r#"{"apiKey":1}"#,
            r#""Bearer abcdefghijkl""#,
            r#""toKen abcdefghijkl""#,
            r#""baſic abcdefghijkl""#,
            r#""ghp_0123456789abcdefghijklmnopqrstuvwxyzAB""#,
            "{\"a\" 1}",
            "[[[[[[[[[[[[[[1]]]]]]]]]]]]]]",
        ] {
            let line = wrap(data);
            assert!(fast_validate(line.as_bytes()).is_none(), "{line}");
        }
        for line in [
            r#"{"hypothesisId":"H1","hypothesisId":"H2","location":"a:1","message":"m","data":1,"timestamp":1}"#,
            r#"{"hypothesisId":"H1","location":"a:1","message":"m","data":1,"timestamp":1} x"#,
            r#"{"hypothesisId":"H1","location":"a:1","message":"m","data":1,"timestamp":01}"#,
            r#"{"hypothesisId":"H1","location":"a:1","message":"m","data":1,"timestamp":-1}"#,
            r#"{"hypothesisId":"H1","location":"a:1","message":"m","data":1,"timestamp":18446744073709551616}"#,
            r#"{"hypothesisId":"H1","location":"a:1","message":"m","timestamp":1}"#,
            r#"{"hypothesisId":"H1","location":"a:1","message":"m","data":1,"timestamp":1"#,
            r#"["hypothesisId"]"#,
            "",
        ] {
            assert!(fast_validate(line.as_bytes()).is_none(), "{line}");
        }
        // Accepted in any field order and with whitespace, timestamp up to u64::MAX.
        assert!(assert_fast_matches_full(
            "\t{ \"timestamp\" : 18446744073709551615 , \"data\":{\"x\":[1, 2]},\"message\":\"m é\",\"location\":\"a:1\",\"hypothesisId\":\"H9\" }\r"
        ));
    }

    #[test]
    fn word_at_a_time_string_scan_never_misses_a_stop_byte() {
        for b in 0..=255u8 {
            for pos in 0..8 {
                let mut w = [b'a'; 8];
                w[pos] = b;
                let stops = STRING_STOP[usize::from(b)];
                if stops {
                    assert!(may_stop_string(u64::from_le_bytes(w)), "{b} at {pos}");
                }
                let mut clean = [b; 8];
                clean[pos] = b'a';
                assert_eq!(may_stop_string(u64::from_le_bytes(clean)), stops, "{b}");
            }
        }
    }

    #[test]
    fn remembered_clean_key_names_never_hide_a_secret_one() {
        let mut scratch = FastScratch::default();
        let mut data = Vec::new();
        let keys = (0..40)
            .map(|i| format!("k{i}"))
            .chain(["token", "k1", "apiKey", "k39", "pwd"].map(String::from));
        for key in keys {
            let line = format!(
                r#"{{"hypothesisId":"H1","location":"a:1","message":"m","data":{{"{key}":1}},"timestamp":1}}"#
            );
            let fast = fast_scan(line.as_bytes(), &mut data, &mut scratch).is_some();
            assert_eq!(fast, !redact::is_secret_key(&key), "{key}");
        }
        assert_eq!(scratch.clean_keys.len(), CLEAN_KEY_CACHE);
    }

    #[test]
    fn fast_path_refuses_every_kind_of_secret_key_name() {
        for key in [
            "userCredential",
            "SIGNATURE",
            "privateKey",
            "private-key",
            "PWD",
            "Auth",
            "x_token",
            "sessionId",
            "p_a_s_s_w_o_r_d",
        ] {
            let line = format!(
                r#"{{"hypothesisId":"H1","location":"a:1","message":"m","data":{{"ok":1,"{key}":"v"}},"timestamp":1}}"#
            );
            assert!(fast_validate(line.as_bytes()).is_none(), "{line}");
            assert!(!assert_fast_matches_full(&line));
        }
        // Look-alikes that are not secret stay on the fast path.
        for key in [
            "sig",
            "pins",
            "author",
            "tokenize_x",
            "x_token_y",
            "passwordPolicy",
        ] {
            let line = format!(
                r#"{{"hypothesisId":"H1","location":"a:1","message":"m","data":{{"{key}":"v"}},"timestamp":1}}"#
            );
            let secret = redact::is_secret_key(key);
            assert_eq!(fast_validate(line.as_bytes()).is_none(), secret, "{line}");
        }
    }

    fn json_fragment() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            Just("{".to_owned()),
            Just("}".to_owned()),
            Just("[".to_owned()),
            Just("]".to_owned()),
            Just(",".to_owned()),
            Just(":".to_owned()),
            Just(" ".to_owned()),
            Just("\"".to_owned()),
            Just("\"k\"".to_owned()),
            Just("\"k\":".to_owned()),
            Just("\"é ✓\"".to_owned()),
            Just("\"token\"".to_owned()),
            Just("\"sk-abcdefghijklmnopqrstuvwxyz\"".to_owned()),
            Just("-0".to_owned()),
            Just("00".to_owned()),
            Just("7".to_owned()),
            Just("-12".to_owned()),
            Just("1.5".to_owned()),
            Just("true".to_owned()),
            Just("null".to_owned()),
            Just("\t".to_owned()),
            "[ -~]{0,4}",
        ]
    }

    proptest::proptest! {
        /// Raw (often invalid) `data` text assembled from JSON fragments: whatever the fast
        /// path accepts, the full path stores identically.
        #[test]
        fn fast_path_is_equivalent_on_arbitrary_data_text(
            frags in proptest::collection::vec(json_fragment(), 0..12),
            field_order in proptest::bool::ANY,
        ) {
            let data = frags.concat();
            let line = if field_order {
                format!(r#"{{"hypothesisId":"H1","location":"a:1","message":"m","data":{data},"timestamp":1}}"#)
            } else {
                format!(r#"{{"data":{data},"timestamp":1,"message":"m","location":"a:1","hypothesisId":"H1"}}"#)
            };
            assert_fast_matches_full(&line);
        }
    }

    #[test]
    fn previews_are_redacted_and_bounded() {
        let line = format!(r#"{{"password": "hunter2", "pad": "{}"#, "y".repeat(1000));
        let m = validate_line(line.as_bytes()).expect_err("invalid json");
        assert!(!m.preview.contains("hunter2"), "{}", m.preview);
        assert!(m.preview.chars().count() <= PREVIEW_CHARS + 1);
    }
}
