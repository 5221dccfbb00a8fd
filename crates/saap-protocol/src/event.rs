//! The event envelope and its JSON codec (notes §1.1–§1.3, DESIGN §6).
//!
//! An event on the wire is one JSON object:
//!
//! ```json
//! {"event_id": "65a0c0ffee0000000000abcd", "created_at": 1700000000000000000,
//!  "_event_name": "UserMessageEvent",
//!  "_parent_event_names": ["UserMessageEvent", "StartEvent", "ControlAndDisplayEvent",
//!                          "ControlEvent", "DisplayEvent"],
//!  "display_name": {"de": null, "en": "User message", "fr": null, "it": null},
//!  "display_description": null,
//!  "message": "hello", "some_extra": 1}
//! ```
//!
//! [`EventEnvelope::decode`] turns bytes into an [`EventEnvelope`], checking sizes and nesting
//! depth first, and reports every malformed input as a [`DecodeError`] carrying the JSON path.
//! [`EventEnvelope::to_json`] / [`EventEnvelope::encode`] write it back. Class fields are not
//! validated here (this crate knows names, not schemas): they are kept, with unknown fields, in
//! received order and re-emitted.
//!
//! This module must not do I/O, read a clock or draw random numbers; it must not panic on any
//! input.
//!
//! ## Decoding rules and the choices made where Python is lax
//!
//! * `event_id`: required, 24 lowercase hex characters. (Python's field is a plain `str` with a
//!   generated default; we need a stable id to deduplicate, so a missing or malformed one is an
//!   error. Uppercase is refused so that an id has one text form.)
//! * `created_at`: required, nanoseconds since the epoch as an `i64`. Accepted as pydantic's lax
//!   mode would: a JSON integer, a float with no fractional part, or a string of decimal digits
//!   (optional leading `-`). Booleans, null and fractions are refused. Re-encoded as an integer.
//! * `_event_name`: required, a non-empty string of at most [`MAX_NAME_LEN`] bytes without
//!   control characters (foreign names are not held to the stricter rules of
//!   [`crate::hierarchy::validate_name`], but see [`EventEnvelope::check_subject_safe`]).
//! * `_parent_event_names`: for a **registered** `_event_name` the received list is ignored and
//!   recomputed from the [`Hierarchy`] (as Python does: it validates with the known class, whose
//!   list is computed). For an unknown name it is required, must be a list of names, and is kept
//!   as received; the [`EventEnvelope::known_type`] is the first registered name in received
//!   order (with the `ControlEvent` + `DisplayEvent` → `ControlAndDisplayEvent` rule), or `None`.
//! * `display_name` / `display_description`: on display events (`DisplayEvent` among the parent
//!   names) each must be absent, null or a LocaleString object `{de,en,fr,it}` whose values are
//!   strings or null (missing keys mean null; other keys are ignored, as pydantic ignores them).
//!   A null is treated like an absent key. On other events these keys are ordinary fields.
//! * Nested events: a top-level field whose value is an object with `_event_name`, or a
//!   non-empty list whose elements all are, is decoded recursively (same rules, same
//!   hierarchy) into [`NestedEvent`]s. Deeper values are left as JSON, as in Python.
//! * Encoding writes the envelope keys first (`event_id`, `created_at`, `_event_name`,
//!   `_parent_event_names`, `display_name`, `display_description`), then the fields in received
//!   order. So `encode(decode(x))` is a fixed point after one pass and
//!   `decode(encode(decode(x))) == decode(x)`. Output is UTF-8 JSON (Python escapes non-ASCII as
//!   `\uXXXX`; both read either).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::event_id::EventId;
use crate::hierarchy::{Classification, Hierarchy, MAX_NAME_LEN, names};

/// JSON key of the event id.
pub const KEY_EVENT_ID: &str = "event_id";
/// JSON key of the creation time (ns since the epoch).
pub const KEY_CREATED_AT: &str = "created_at";
/// JSON key of the event name.
pub const KEY_EVENT_NAME: &str = "_event_name";
/// JSON key of the parent list.
pub const KEY_PARENT_EVENT_NAMES: &str = "_parent_event_names";
/// JSON key of the display name (display events).
pub const KEY_DISPLAY_NAME: &str = "display_name";
/// JSON key of the display description (display events).
pub const KEY_DISPLAY_DESCRIPTION: &str = "display_description";

/// Bounds applied while decoding. The defaults suit NATS messages (JetStream's largest payload
/// is 8 MiB).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Largest accepted input, in bytes.
    pub max_bytes: usize,
    /// Deepest accepted JSON nesting (objects and arrays); the event object itself is depth 1.
    pub max_json_depth: usize,
    /// Deepest accepted chain of nested events; a top-level event is depth 1.
    pub max_event_depth: usize,
    /// Most names accepted in a `_parent_event_names` list.
    pub max_parent_names: usize,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_bytes: 8 * 1024 * 1024,
            max_json_depth: 64,
            max_event_depth: 8,
            max_parent_names: 128,
        }
    }
}

/// Why bytes are not a valid event. Every variant that concerns a value carries the JSON path
/// of that value (`$` is the event object, `$.request_event` a nested event, `$.events[2]` an
/// element of a nested list).
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Input larger than [`DecodeLimits::max_bytes`].
    #[error(
        "event is {size} bytes, more than the limit of {max}; send large data by reference, not inline"
    )]
    TooLarge {
        /// Input size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// JSON nested deeper than [`DecodeLimits::max_json_depth`].
    #[error("event JSON is nested deeper than {max} levels; flatten the payload")]
    TooDeep {
        /// The limit.
        max: usize,
    },
    /// Events nested in events deeper than [`DecodeLimits::max_event_depth`].
    #[error("at {path}: events are nested in events more than {max} deep")]
    EventsTooDeep {
        /// Where the limit was crossed.
        path: String,
        /// The limit.
        max: usize,
    },
    /// Not UTF-8 JSON.
    #[error("event is not valid JSON (line {line}, column {column}): {message}")]
    NotJson {
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What the JSON parser expected.
        message: String,
    },
    /// Valid JSON, but not an object.
    #[error("at {path}: an event must be a JSON object, found {found}")]
    NotAnObject {
        /// Where.
        path: String,
        /// The JSON type found.
        found: &'static str,
    },
    /// A required envelope key is absent.
    #[error("at {path}: required key `{key}` is missing")]
    MissingField {
        /// The event's path.
        path: String,
        /// The missing key.
        key: &'static str,
    },
    /// `event_id` is not 24 lowercase hex characters.
    #[error("at {path}.event_id: {reason}")]
    InvalidEventId {
        /// The event's path.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// `created_at` is not an integer number of nanoseconds.
    #[error(
        "at {path}.created_at: {reason}; expected an integer number of nanoseconds since the Unix epoch"
    )]
    InvalidCreatedAt {
        /// The event's path.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// `_event_name` is not an acceptable name.
    #[error("at {path}._event_name: {reason}")]
    InvalidEventName {
        /// The event's path.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// `_parent_event_names` is not a list of names (for an unregistered `_event_name`).
    #[error("at {path}._parent_event_names: {reason}")]
    InvalidParentEventNames {
        /// The event's path.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// `display_name` / `display_description` of a display event is not a LocaleString.
    #[error(
        "at {path}.{key}: {reason}; expected null or an object {{\"de\",\"en\",\"fr\",\"it\"}} of strings or nulls"
    )]
    InvalidDisplayText {
        /// The event's path.
        path: String,
        /// `display_name` or `display_description`.
        key: &'static str,
        /// What is wrong.
        reason: String,
    },
}

impl DecodeError {
    /// A stable, machine-readable name of the error kind (for `--json` output and tests).
    pub fn kind(&self) -> &'static str {
        match self {
            DecodeError::TooLarge { .. } => "too_large",
            DecodeError::TooDeep { .. } => "too_deep",
            DecodeError::EventsTooDeep { .. } => "events_too_deep",
            DecodeError::NotJson { .. } => "not_json",
            DecodeError::NotAnObject { .. } => "not_an_object",
            DecodeError::MissingField { .. } => "missing_field",
            DecodeError::InvalidEventId { .. } => "invalid_event_id",
            DecodeError::InvalidCreatedAt { .. } => "invalid_created_at",
            DecodeError::InvalidEventName { .. } => "invalid_event_name",
            DecodeError::InvalidParentEventNames { .. } => "invalid_parent_event_names",
            DecodeError::InvalidDisplayText { .. } => "invalid_display_text",
        }
    }
}

/// A text in the four Swiss national languages; each may be absent.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LocaleString {
    /// German.
    pub de: Option<String>,
    /// English.
    pub en: Option<String>,
    /// French.
    pub fr: Option<String>,
    /// Italian.
    pub it: Option<String>,
}

impl LocaleString {
    /// The same text in every language.
    pub fn all(text: &str) -> LocaleString {
        LocaleString {
            de: Some(text.to_owned()),
            en: Some(text.to_owned()),
            fr: Some(text.to_owned()),
            it: Some(text.to_owned()),
        }
    }

    fn to_json(&self) -> Value {
        let v = |s: &Option<String>| s.clone().map_or(Value::Null, Value::String);
        let mut m = Map::new();
        m.insert("de".into(), v(&self.de));
        m.insert("en".into(), v(&self.en));
        m.insert("fr".into(), v(&self.fr));
        m.insert("it".into(), v(&self.it));
        Value::Object(m)
    }
}

/// An event (or a list of events) held in a field of another event.
#[derive(Clone, Debug, PartialEq)]
pub enum NestedEvent {
    /// The field holds one event object.
    One(Box<EventEnvelope>),
    /// The field holds a non-empty list of event objects.
    List(Vec<EventEnvelope>),
}

/// One decoded event: the envelope keys, the fields, nested events, and the local type it
/// resolved to.
#[derive(Clone, Debug, PartialEq)]
pub struct EventEnvelope {
    /// `event_id`.
    pub event_id: EventId,
    /// `created_at`, nanoseconds since the Unix epoch.
    pub created_at: i64,
    /// `_event_name`: the concrete (possibly foreign) name.
    pub event_name: String,
    /// `_parent_event_names`: own name first, then ancestors (for a registered name: as computed
    /// by the hierarchy; for a foreign one: as received).
    pub parent_event_names: Vec<String>,
    /// `display_name` of a display event; `None` when absent or null.
    pub display_name: Option<LocaleString>,
    /// `display_description` of a display event; `None` when absent or null.
    pub display_description: Option<LocaleString>,
    /// Every other key, class fields and unknown fields alike, in received order. Fields that
    /// hold nested events hold their normalised JSON here and the decoded events in
    /// [`EventEnvelope::nested`].
    pub fields: Map<String, Value>,
    /// Decoded nested events by field name.
    pub nested: BTreeMap<String, NestedEvent>,
    /// The registered type this event is handled as: `event_name` itself if registered, else
    /// the first registered name of the received parent list (see
    /// [`Hierarchy::resolve_known_type`]); `None` if no name is known. Not serialised.
    pub known_type: Option<String>,
}

impl EventEnvelope {
    /// A new event of the registered type `event_name`, with its parent list from `hierarchy`.
    /// Returns `None` if `event_name` is not registered.
    pub fn new(
        hierarchy: &Hierarchy,
        event_name: &str,
        event_id: EventId,
        created_at: i64,
    ) -> Option<EventEnvelope> {
        let parent_event_names = hierarchy.parent_event_names(event_name)?;
        Some(EventEnvelope {
            event_id,
            created_at,
            event_name: event_name.to_owned(),
            parent_event_names,
            display_name: None,
            display_description: None,
            fields: Map::new(),
            nested: BTreeMap::new(),
            known_type: Some(event_name.to_owned()),
        })
    }

    /// Sets a plain field (builder style). A nested event under the same key is dropped.
    pub fn with_field(mut self, key: &str, value: Value) -> EventEnvelope {
        self.nested.remove(key);
        self.fields.insert(key.to_owned(), value);
        self
    }

    /// Sets a field holding a nested event (builder style).
    pub fn with_nested(mut self, key: &str, nested: NestedEvent) -> EventEnvelope {
        let json = match &nested {
            NestedEvent::One(e) => e.to_json(),
            NestedEvent::List(list) => {
                Value::Array(list.iter().map(EventEnvelope::to_json).collect())
            }
        };
        self.fields.insert(key.to_owned(), json);
        self.nested.insert(key.to_owned(), nested);
        self
    }

    /// Control / display / start / stop / exception, by membership of literal names in
    /// `parent_event_names` (for foreign events: the sender's list).
    pub fn classification(&self) -> Classification {
        Classification::from_parent_event_names(&self.parent_event_names)
    }

    /// How a saap engine dispatches it: [`EventEnvelope::classification`] with the process
    /// family's roles ([`Classification::with_process_roles`]), so that a process's work
    /// events travel and drive steps as control events.
    pub fn dispatch_classification(&self) -> Classification {
        self.classification()
            .with_process_roles(&self.parent_event_names)
    }

    /// Whether every name this event would put in a NATS subject is a valid token (no dots,
    /// whitespace or wildcards). Foreign names are accepted more leniently by the decoder.
    pub fn check_subject_safe(&self) -> Result<(), crate::hierarchy::NameError> {
        crate::hierarchy::validate_name(&self.event_name)
    }

    /// Decodes one event from bytes, resolving names against `hierarchy`.
    pub fn decode(
        bytes: &[u8],
        hierarchy: &Hierarchy,
        limits: &DecodeLimits,
    ) -> Result<EventEnvelope, DecodeError> {
        if bytes.len() > limits.max_bytes {
            return Err(DecodeError::TooLarge {
                size: bytes.len(),
                max: limits.max_bytes,
            });
        }
        if json_depth_exceeds(bytes, limits.max_json_depth) {
            return Err(DecodeError::TooDeep {
                max: limits.max_json_depth,
            });
        }
        let value: Value = serde_json::from_slice(bytes).map_err(|e| DecodeError::NotJson {
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?;
        Self::from_json_value(value, hierarchy, limits)
    }

    /// [`EventEnvelope::decode`] for text.
    pub fn decode_str(
        text: &str,
        hierarchy: &Hierarchy,
        limits: &DecodeLimits,
    ) -> Result<EventEnvelope, DecodeError> {
        Self::decode(text.as_bytes(), hierarchy, limits)
    }

    /// Decodes an already parsed JSON value. The JSON depth limit is checked on the value.
    pub fn from_json_value(
        value: Value,
        hierarchy: &Hierarchy,
        limits: &DecodeLimits,
    ) -> Result<EventEnvelope, DecodeError> {
        if value_depth_exceeds(&value, limits.max_json_depth) {
            return Err(DecodeError::TooDeep {
                max: limits.max_json_depth,
            });
        }
        decode_value(value, hierarchy, limits, "$".to_owned(), 1)
    }

    /// The wire JSON object (envelope keys first, then fields in order).
    pub fn to_json(&self) -> Value {
        let mut m = Map::with_capacity(self.fields.len() + 6);
        m.insert(
            KEY_EVENT_ID.into(),
            Value::String(self.event_id.to_string()),
        );
        m.insert(KEY_CREATED_AT.into(), Value::from(self.created_at));
        m.insert(
            KEY_EVENT_NAME.into(),
            Value::String(self.event_name.clone()),
        );
        m.insert(
            KEY_PARENT_EVENT_NAMES.into(),
            Value::Array(
                self.parent_event_names
                    .iter()
                    .map(|n| Value::String(n.clone()))
                    .collect(),
            ),
        );
        if let Some(d) = &self.display_name {
            m.insert(KEY_DISPLAY_NAME.into(), d.to_json());
        }
        if let Some(d) = &self.display_description {
            m.insert(KEY_DISPLAY_DESCRIPTION.into(), d.to_json());
        }
        // On a non-display event `display_name`/`display_description` are ordinary fields (the
        // decoder leaves them there); on a display event they belong to the envelope. Any other
        // envelope key in `fields` can only have been put there by hand: the envelope wins.
        let display = self.classification().display;
        for (k, v) in &self.fields {
            let owned_by_envelope = match k.as_str() {
                KEY_DISPLAY_NAME | KEY_DISPLAY_DESCRIPTION => display,
                other => is_envelope_key(other),
            };
            if !owned_by_envelope {
                m.insert(k.clone(), v.clone());
            }
        }
        Value::Object(m)
    }

    /// The wire JSON as a string.
    pub fn encode(&self) -> String {
        self.to_json().to_string()
    }

    /// The wire JSON as bytes.
    pub fn encode_bytes(&self) -> Vec<u8> {
        self.encode().into_bytes()
    }
}

/// Serialises as the wire JSON object ([`EventEnvelope::to_json`]).
impl Serialize for EventEnvelope {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

fn is_envelope_key(k: &str) -> bool {
    matches!(
        k,
        KEY_EVENT_ID
            | KEY_CREATED_AT
            | KEY_EVENT_NAME
            | KEY_PARENT_EVENT_NAMES
            | KEY_DISPLAY_NAME
            | KEY_DISPLAY_DESCRIPTION
    )
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Scans raw bytes for `[`/`{` nesting outside strings, without parsing. Malformed input may be
/// mis-scanned; the parser rejects it afterwards anyway. Guarantees the parser never recurses
/// deeper than `max`.
fn json_depth_exceeds(bytes: &[u8], max: usize) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// Depth check on a parsed value, iterative (no recursion on untrusted depth).
fn value_depth_exceeds(v: &Value, max: usize) -> bool {
    let mut stack: Vec<(&Value, usize)> = vec![(v, 1)];
    while let Some((v, d)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(a) => Box::new(a.iter()),
            Value::Object(o) => Box::new(o.values()),
            _ => continue,
        };
        if d > max {
            return true;
        }
        stack.extend(children.map(|c| (c, d + 1)));
    }
    false
}

fn is_event_object(v: &Value) -> bool {
    matches!(v, Value::Object(o) if o.contains_key(KEY_EVENT_NAME))
}

fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the name is empty".into());
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!("the name is longer than {MAX_NAME_LEN} bytes"));
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return Err(format!("the name contains the control character {c:?}"));
    }
    Ok(())
}

/// A short, safe excerpt of a value for error messages.
fn excerpt(v: &Value) -> String {
    let s = v.to_string();
    if s.len() <= 40 {
        return s;
    }
    let mut end = 40;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

fn decode_created_at(v: &Value) -> Result<i64, String> {
    match v {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Ok(i)
            } else if n.is_u64() {
                Err(format!("{n} does not fit in a signed 64-bit integer"))
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                // i64::MAX is not exactly representable; 2^63 as f64 is the first value out.
                const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
                if f.fract() != 0.0 || !f.is_finite() {
                    Err(format!("{n} is not a whole number"))
                } else if !(-TWO_POW_63..TWO_POW_63).contains(&f) {
                    Err(format!("{n} does not fit in a signed 64-bit integer"))
                } else {
                    #[allow(clippy::cast_possible_truncation)]
                    Ok(f as i64)
                }
            }
        }
        Value::String(s) => {
            let digits = s.strip_prefix('-').unwrap_or(s);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!(
                    "the string {} is not a decimal integer",
                    excerpt(v)
                ));
            }
            s.parse::<i64>()
                .map_err(|_| format!("{s} does not fit in a signed 64-bit integer"))
        }
        other => Err(format!("found {}", json_type(other))),
    }
}

fn decode_locale(
    v: Value,
    path: &str,
    key: &'static str,
) -> Result<Option<LocaleString>, DecodeError> {
    let err = |reason: String| DecodeError::InvalidDisplayText {
        path: path.to_owned(),
        key,
        reason,
    };
    match v {
        Value::Null => Ok(None),
        Value::Object(mut m) => {
            let mut take = |lang: &str| -> Result<Option<String>, DecodeError> {
                match m.remove(lang) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(s)) => Ok(Some(s)),
                    Some(other) => Err(err(format!("`{lang}` is {}", json_type(&other)))),
                }
            };
            Ok(Some(LocaleString {
                de: take("de")?,
                en: take("en")?,
                fr: take("fr")?,
                it: take("it")?,
            }))
        }
        other => Err(err(format!("found {}", json_type(&other)))),
    }
}

fn decode_value(
    value: Value,
    hierarchy: &Hierarchy,
    limits: &DecodeLimits,
    path: String,
    event_depth: usize,
) -> Result<EventEnvelope, DecodeError> {
    if event_depth > limits.max_event_depth {
        return Err(DecodeError::EventsTooDeep {
            path,
            max: limits.max_event_depth,
        });
    }
    let mut obj = match value {
        Value::Object(o) => o,
        other => {
            return Err(DecodeError::NotAnObject {
                path,
                found: json_type(&other),
            });
        }
    };
    let missing = |key: &'static str| DecodeError::MissingField {
        path: path.clone(),
        key,
    };

    // _event_name
    let event_name = match obj.shift_remove(KEY_EVENT_NAME) {
        None => return Err(missing(KEY_EVENT_NAME)),
        Some(Value::String(s)) => s,
        Some(other) => {
            return Err(DecodeError::InvalidEventName {
                path,
                reason: format!("expected a string, found {}", json_type(&other)),
            });
        }
    };
    check_name(&event_name).map_err(|reason| DecodeError::InvalidEventName {
        path: path.clone(),
        reason,
    })?;

    // _parent_event_names
    let received_parents = obj.shift_remove(KEY_PARENT_EVENT_NAMES);
    let (parent_event_names, known_type) = if let Some(lineage) = hierarchy.lineage(&event_name) {
        (lineage.to_vec(), Some(event_name.clone()))
    } else {
        let bad = |reason: String| DecodeError::InvalidParentEventNames {
            path: path.clone(),
            reason,
        };
        let list = match received_parents {
            None => return Err(missing(KEY_PARENT_EVENT_NAMES)),
            Some(Value::Array(a)) => a,
            Some(other) => {
                return Err(bad(format!(
                    "`{event_name}` is not a registered event type, so its parent list is needed; expected an array of names, found {}",
                    json_type(&other)
                )));
            }
        };
        if list.len() > limits.max_parent_names {
            return Err(bad(format!(
                "{} names, more than the limit of {}",
                list.len(),
                limits.max_parent_names
            )));
        }
        let mut names = Vec::with_capacity(list.len());
        for (i, item) in list.into_iter().enumerate() {
            match item {
                Value::String(s) => {
                    check_name(&s).map_err(|r| bad(format!("item {i}: {r}")))?;
                    names.push(s);
                }
                other => {
                    return Err(bad(format!(
                        "item {i} is {}, expected a string",
                        json_type(&other)
                    )));
                }
            }
        }
        let known = hierarchy
            .resolve_known_type(&event_name, &names)
            .map(str::to_owned);
        (names, known)
    };

    // event_id
    let event_id = match obj.shift_remove(KEY_EVENT_ID) {
        None => return Err(missing(KEY_EVENT_ID)),
        Some(Value::String(s)) => EventId::parse(&s).map_err(|e| DecodeError::InvalidEventId {
            path: path.clone(),
            reason: e.to_string(),
        })?,
        Some(other) => {
            return Err(DecodeError::InvalidEventId {
                path,
                reason: format!(
                    "expected a string of 24 lowercase hex characters, found {}",
                    json_type(&other)
                ),
            });
        }
    };

    // created_at
    let created_at = match obj.shift_remove(KEY_CREATED_AT) {
        None => return Err(missing(KEY_CREATED_AT)),
        Some(v) => decode_created_at(&v).map_err(|reason| DecodeError::InvalidCreatedAt {
            path: path.clone(),
            reason,
        })?,
    };

    // display texts (display events only)
    let display = parent_event_names.iter().any(|n| n == names::DISPLAY_EVENT);
    let (display_name, display_description) = if display {
        let dn = match obj.shift_remove(KEY_DISPLAY_NAME) {
            Some(v) => decode_locale(v, &path, KEY_DISPLAY_NAME)?,
            None => None,
        };
        let dd = match obj.shift_remove(KEY_DISPLAY_DESCRIPTION) {
            Some(v) => decode_locale(v, &path, KEY_DISPLAY_DESCRIPTION)?,
            None => None,
        };
        (dn, dd)
    } else {
        (None, None)
    };

    // fields, with nested events decoded
    let mut fields = Map::with_capacity(obj.len());
    let mut nested = BTreeMap::new();
    for (key, v) in obj {
        let field_path = format!("{path}.{key}");
        match v {
            v @ Value::Object(_) if is_event_object(&v) => {
                let e = decode_value(v, hierarchy, limits, field_path, event_depth + 1)?;
                fields.insert(key.clone(), e.to_json());
                nested.insert(key, NestedEvent::One(Box::new(e)));
            }
            Value::Array(items) if !items.is_empty() && items.iter().all(is_event_object) => {
                let mut list = Vec::with_capacity(items.len());
                for (i, item) in items.into_iter().enumerate() {
                    list.push(decode_value(
                        item,
                        hierarchy,
                        limits,
                        format!("{field_path}[{i}]"),
                        event_depth + 1,
                    )?);
                }
                fields.insert(
                    key.clone(),
                    Value::Array(list.iter().map(EventEnvelope::to_json).collect()),
                );
                nested.insert(key, NestedEvent::List(list));
            }
            v => {
                fields.insert(key, v);
            }
        }
    }

    Ok(EventEnvelope {
        event_id,
        created_at,
        event_name,
        parent_event_names,
        display_name,
        display_description,
        fields,
        nested,
        known_type,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    const ID: &str = "65a0c0ffee0000000000abcd";

    fn h() -> Hierarchy {
        Hierarchy::builtin()
    }

    fn dec(v: Value) -> Result<EventEnvelope, DecodeError> {
        EventEnvelope::decode(v.to_string().as_bytes(), &h(), &DecodeLimits::default())
    }

    fn base(name: &str) -> Value {
        json!({"event_id": ID, "created_at": 1_700_000_000_000_000_000i64, "_event_name": name,
               "_parent_event_names": [name, "ControlEvent"]})
    }

    fn with(mut v: Value, k: &str, x: Value) -> Value {
        v.as_object_mut().unwrap().insert(k.into(), x);
        v
    }

    fn without(mut v: Value, k: &str) -> Value {
        v.as_object_mut().unwrap().remove(k);
        v
    }

    #[test]
    fn decode_known_event_recomputes_parent_names_from_hierarchy() {
        let e = dec(with(
            base("UserMessageEvent"),
            "_parent_event_names",
            json!("corrupted"),
        ))
        .unwrap();
        assert_eq!(
            e.parent_event_names,
            h().parent_event_names("UserMessageEvent").unwrap()
        );
        assert_eq!(e.known_type.as_deref(), Some("UserMessageEvent"));
        assert!(e.classification().start);
    }

    #[test]
    fn decode_unknown_event_keeps_foreign_name_and_received_parents() {
        let v = with(
            base("MyDoneEvent"),
            "_parent_event_names",
            json!([
                "MyDoneEvent",
                "StopEvent",
                "ControlAndDisplayEvent",
                "ControlEvent",
                "DisplayEvent"
            ]),
        );
        let e = dec(v).unwrap();
        assert_eq!(e.event_name, "MyDoneEvent");
        assert_eq!(e.known_type.as_deref(), Some("StopEvent"));
        assert_eq!(e.parent_event_names[1], "StopEvent");
        assert!(e.classification().stop);
    }

    #[test]
    fn decode_unknown_event_with_only_roots_resolves_to_control_and_display() {
        let v = with(
            base("Foreign"),
            "_parent_event_names",
            json!(["Foreign", "DisplayEvent", "ControlEvent"]),
        );
        assert_eq!(
            dec(v).unwrap().known_type.as_deref(),
            Some("ControlAndDisplayEvent")
        );
    }

    #[test]
    fn decode_unknown_event_without_known_parents_has_no_known_type() {
        let v = with(
            base("Foreign"),
            "_parent_event_names",
            json!(["Foreign", "Other"]),
        );
        let e = dec(v).unwrap();
        assert_eq!(e.known_type, None);
        assert_eq!(e.classification(), Classification::default());
    }

    #[test]
    fn decode_unknown_event_requires_a_list_of_string_parents() {
        let e = dec(without(base("Foreign"), "_parent_event_names")).unwrap_err();
        assert!(matches!(
            e,
            DecodeError::MissingField {
                key: "_parent_event_names",
                ..
            }
        ));
        let e = dec(with(base("Foreign"), "_parent_event_names", json!("x"))).unwrap_err();
        assert!(matches!(e, DecodeError::InvalidParentEventNames { .. }));
        let e = dec(with(
            base("Foreign"),
            "_parent_event_names",
            json!(["a", 1]),
        ))
        .unwrap_err();
        assert!(e.to_string().contains("item 1"), "{e}");
        let e = dec(with(
            base("Foreign"),
            "_parent_event_names",
            json!(["a", ""]),
        ))
        .unwrap_err();
        assert!(matches!(e, DecodeError::InvalidParentEventNames { .. }));
        let many: Vec<String> = (0..200).map(|i| format!("N{i}")).collect();
        let e = dec(with(base("Foreign"), "_parent_event_names", json!(many))).unwrap_err();
        assert!(e.to_string().contains("limit"), "{e}");
    }

    #[test]
    fn decode_rejects_input_that_is_not_json_or_not_an_object() {
        let lim = DecodeLimits::default();
        let e = EventEnvelope::decode(b"{nope", &h(), &lim).unwrap_err();
        assert!(matches!(e, DecodeError::NotJson { line: 1, .. }), "{e}");
        let e = EventEnvelope::decode(b"\xff\xfe", &h(), &lim).unwrap_err();
        assert!(matches!(e, DecodeError::NotJson { .. }));
        let e = EventEnvelope::decode(b"[1,2]", &h(), &lim).unwrap_err();
        assert_eq!(
            e,
            DecodeError::NotAnObject {
                path: "$".into(),
                found: "an array"
            }
        );
        let e = EventEnvelope::decode(b"", &h(), &lim).unwrap_err();
        assert!(matches!(e, DecodeError::NotJson { .. }));
    }

    #[test]
    fn decode_error_kinds_are_stable_names() {
        let e = dec(without(base("StopEvent"), "event_id")).unwrap_err();
        assert_eq!(e.kind(), "missing_field");
        let e = EventEnvelope::decode(b"1", &h(), &DecodeLimits::default()).unwrap_err();
        assert_eq!(e.kind(), "not_an_object");
    }

    #[test]
    fn decode_rejects_input_larger_than_max_bytes() {
        let lim = DecodeLimits {
            max_bytes: 10,
            ..DecodeLimits::default()
        };
        let e = EventEnvelope::decode(&[b' '; 11], &h(), &lim).unwrap_err();
        assert_eq!(e, DecodeError::TooLarge { size: 11, max: 10 });
    }

    #[test]
    fn decode_rejects_json_nested_deeper_than_max_json_depth_before_parsing() {
        let lim = DecodeLimits::default();
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let e = EventEnvelope::decode(deep.as_bytes(), &h(), &lim).unwrap_err();
        assert_eq!(e, DecodeError::TooDeep { max: 64 });
        // Brackets inside strings do not count.
        let v = with(
            base("Foreign"),
            "s",
            json!(
                "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\\"[[[["
            ),
        );
        assert!(dec(v).is_ok());
        // The event object is depth 1, so 64 levels in total are fine and 65 are not.
        let mut inner = json!(1);
        for _ in 0..64 {
            inner = json!([inner]);
        }
        assert!(dec(with(base("Foreign"), "x", inner.clone())).is_err());
        let mut ok = json!(1);
        for _ in 0..63 {
            ok = json!([ok]);
        }
        assert!(dec(with(base("Foreign"), "x", ok)).is_ok());
        let e = EventEnvelope::from_json_value(with(base("Foreign"), "x", inner), &h(), &lim)
            .unwrap_err();
        assert_eq!(e, DecodeError::TooDeep { max: 64 });
    }

    #[test]
    fn decode_requires_event_id_as_24_lowercase_hex() {
        let e = dec(without(base("StopEvent"), "event_id")).unwrap_err();
        assert!(matches!(
            e,
            DecodeError::MissingField {
                key: "event_id",
                ..
            }
        ));
        for bad in [
            json!("ABCDEF000000000000000000"),
            json!("abc"),
            json!(12),
            json!(null),
        ] {
            let e = dec(with(base("StopEvent"), "event_id", bad)).unwrap_err();
            assert!(matches!(e, DecodeError::InvalidEventId { .. }), "{e}");
        }
    }

    #[test]
    fn decode_requires_created_at_as_integer_nanoseconds() {
        let e = dec(without(base("StopEvent"), "created_at")).unwrap_err();
        assert!(matches!(
            e,
            DecodeError::MissingField {
                key: "created_at",
                ..
            }
        ));
        for bad in [
            json!(true),
            json!(null),
            json!(1.5),
            json!("12a"),
            json!(""),
            json!("-"),
            json!(u64::MAX),
            json!(1e30),
            json!("99999999999999999999"),
            json!({}),
        ] {
            let e = dec(with(base("StopEvent"), "created_at", bad.clone())).unwrap_err();
            assert!(
                matches!(e, DecodeError::InvalidCreatedAt { .. }),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn decode_accepts_created_at_as_pydantic_lax_mode_would() {
        for (input, want) in [
            (
                json!(1_700_000_000_000_000_000i64),
                1_700_000_000_000_000_000i64,
            ),
            (json!(-5), -5),
            (json!(1.0e18), 1_000_000_000_000_000_000),
            (json!("1700000000000000000"), 1_700_000_000_000_000_000),
            (json!("-12"), -12),
        ] {
            let e = dec(with(base("StopEvent"), "created_at", input)).unwrap();
            assert_eq!(e.created_at, want);
            assert!(e.to_json()["created_at"].is_i64());
        }
    }

    #[test]
    fn decode_requires_a_string_event_name() {
        let e = dec(without(base("StopEvent"), "_event_name")).unwrap_err();
        assert!(matches!(
            e,
            DecodeError::MissingField {
                key: "_event_name",
                ..
            }
        ));
        for bad in [
            json!(1),
            json!(""),
            json!("a\u{0}b"),
            json!("x".repeat(300)),
        ] {
            let e = dec(with(base("StopEvent"), "_event_name", bad)).unwrap_err();
            assert!(matches!(e, DecodeError::InvalidEventName { .. }), "{e}");
        }
    }

    #[test]
    fn decode_reads_locale_strings_on_display_events_only() {
        let v = with(
            base("UserMessageEvent"),
            "display_name",
            json!({"en": "Hi", "de": null, "xx": 1}),
        );
        let v = with(v, "display_description", json!(null));
        let e = dec(v).unwrap();
        assert_eq!(
            e.display_name,
            Some(LocaleString {
                en: Some("Hi".into()),
                ..LocaleString::default()
            })
        );
        assert_eq!(e.display_description, None);
        assert!(!e.fields.contains_key("display_name"));
        let out = e.to_json();
        assert_eq!(
            out["display_name"],
            json!({"de": null, "en": "Hi", "fr": null, "it": null})
        );
        // On a control-only event the key is an ordinary field.
        let e = dec(with(
            base("BotInTheLoopRequestEvent"),
            "display_name",
            json!(5),
        ))
        .unwrap();
        assert_eq!(e.fields["display_name"], json!(5));
        assert_eq!(e.display_name, None);
        assert_eq!(
            e.to_json()["display_name"],
            json!(5),
            "re-emitted as a field"
        );
    }

    #[test]
    fn decode_rejects_malformed_locale_strings_on_display_events() {
        for bad in [json!("text"), json!({"en": 1}), json!([1])] {
            let e = dec(with(base("StopEvent"), "display_name", bad)).unwrap_err();
            assert!(
                matches!(
                    e,
                    DecodeError::InvalidDisplayText {
                        key: "display_name",
                        ..
                    }
                ),
                "{e}"
            );
        }
    }

    #[test]
    fn unknown_fields_are_kept_in_received_order_and_re_emitted() {
        let text = format!(
            r#"{{"zeta":1,"event_id":"{ID}","alpha":{{"b":1,"a":2}},"created_at":5,"_event_name":"StopEvent","mid":[1,"x"],"_parent_event_names":[]}}"#
        );
        let e = EventEnvelope::decode_str(&text, &h(), &DecodeLimits::default()).unwrap();
        assert_eq!(
            e.fields.keys().collect::<Vec<_>>(),
            ["zeta", "alpha", "mid"]
        );
        let out = e.encode();
        assert_eq!(
            out,
            format!(
                r#"{{"event_id":"{ID}","created_at":5,"_event_name":"StopEvent","_parent_event_names":["StopEvent","ControlAndDisplayEvent","ControlEvent","DisplayEvent"],"zeta":1,"alpha":{{"b":1,"a":2}},"mid":[1,"x"]}}"#
            )
        );
    }

    #[test]
    fn nested_events_are_decoded_recursively() {
        let inner = base("UserMessageEvent");
        let v = with(base("Foreign"), "request_event", inner.clone());
        let v = with(v, "history", json!([inner.clone(), inner]));
        let v = with(v, "mixed", json!([base("StopEvent"), 1]));
        let e = dec(v).unwrap();
        let Some(NestedEvent::One(one)) = e.nested.get("request_event") else {
            panic!("request_event not nested: {:?}", e.nested)
        };
        assert_eq!(one.known_type.as_deref(), Some("UserMessageEvent"));
        assert_eq!(e.fields["request_event"], one.to_json());
        let Some(NestedEvent::List(list)) = e.nested.get("history") else {
            panic!("history not nested")
        };
        assert_eq!(list.len(), 2);
        assert!(!e.nested.contains_key("mixed"), "mixed lists stay JSON");
    }

    #[test]
    fn nested_event_errors_carry_the_json_path() {
        let bad_inner = without(base("StopEvent"), "event_id");
        let v = with(
            base("Foreign"),
            "history",
            json!([base("StopEvent"), bad_inner]),
        );
        let e = dec(v).unwrap_err();
        assert_eq!(
            e,
            DecodeError::MissingField {
                path: "$.history[1]".into(),
                key: "event_id"
            }
        );
    }

    #[test]
    fn nested_events_deeper_than_max_event_depth_are_rejected() {
        let mut v = base("StopEvent");
        for _ in 0..8 {
            v = with(base("StopEvent"), "inner", v);
        }
        let e = dec(v).unwrap_err();
        assert!(
            matches!(e, DecodeError::EventsTooDeep { max: 8, .. }),
            "{e}"
        );
    }

    #[test]
    fn new_fills_parent_names_and_builders_keep_nested_json_in_sync() {
        let id = EventId::from_bytes([3; 12]);
        let inner = EventEnvelope::new(&h(), "UserMessageEvent", id, 1).unwrap();
        let e = EventEnvelope::new(&h(), "ExceptionEvent", id, 2)
            .unwrap()
            .with_field("message", json!("boom"))
            .with_field("http_status_code", json!(500))
            .with_nested("cause", NestedEvent::One(Box::new(inner.clone())));
        assert!(e.classification().exception);
        assert_eq!(e.fields["cause"], inner.to_json());
        let back =
            EventEnvelope::decode(&e.encode_bytes(), &h(), &DecodeLimits::default()).unwrap();
        assert_eq!(back, e);
        assert!(EventEnvelope::new(&h(), "Nope", id, 0).is_none());
    }

    #[test]
    fn check_subject_safe_rejects_foreign_names_with_dots() {
        let v = with(
            base("a.b"),
            "_parent_event_names",
            json!(["a.b", "ControlEvent"]),
        );
        let e = dec(v).unwrap();
        assert!(e.check_subject_safe().is_err());
        assert!(dec(base("Fine")).unwrap().check_subject_safe().is_ok());
    }
}
