//! Typed events: the [`Event`] trait that user event types implement, the built-in protocol
//! events the runtime needs, and the payload adapter between typed values and the stored
//! representation.
//!
//! The stored payload is a `serde_json::Value` holding the event's class fields (the wire
//! envelope keys — `event_id`, `created_at`, `_event_name`, `_parent_event_names` — are
//! added by [`crate::wire`] when an event leaves the runtime). Every conversion between a
//! typed event and a payload goes through [`to_payload`] / [`from_payload`], so switching
//! the payload type later touches this module only.

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::sync::Arc;

/// The stored form of an event's fields.
pub type Payload = Arc<serde_json::Value>;

/// A typed event. `NAME` is the wire name (`_event_name`); `PARENTS` are its direct parents
/// (`ControlEvent` for a plain control event, `StopEvent` for an event that ends the run,
/// `DisplayEvent` for display-only, `ControlAndDisplayEvent` for both).
///
/// ```
/// use saap::Event;
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Retrieved { docs: Vec<String> }
/// impl Event for Retrieved {
///     const NAME: &'static str = "Retrieved";
///     const PARENTS: &'static [&'static str] = &["ControlEvent"];
/// }
/// ```
///
/// Or with the derive (`parent` defaults to `ControlEvent`):
///
/// ```
/// #[derive(saap::Event, serde::Serialize, serde::Deserialize)]
/// #[event(parent = StopEvent)]
/// struct Answered { text: String }
/// assert_eq!(<Answered as saap::Event>::PARENTS, &["StopEvent"]);
/// ```
///
/// An event type cannot be generic (its wire name is one fixed string):
///
/// ```compile_fail
/// #[derive(saap::Event, serde::Serialize, serde::Deserialize)]
/// struct Wrapped<T> { inner: T }
/// ```
///
/// Unknown attributes are compile errors that say what to write:
///
/// ```compile_fail
/// #[derive(saap::Event, serde::Serialize, serde::Deserialize)]
/// #[event(parent_type = StopEvent)]
/// struct Answered { text: String }
/// ```
pub trait Event: Serialize + DeserializeOwned + Send + Sync + 'static {
    const NAME: &'static str;
    const PARENTS: &'static [&'static str];
}

/// Why a payload could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error(
        "event `{name}` could not be serialized: {message}; make its fields plain data (no maps with non-string keys)"
    )]
    Serialize { name: String, message: String },
    #[error(
        "event `{name}` does not have the fields its Rust type expects: {message}; check that the producer and the step agree on the event's fields"
    )]
    Deserialize { name: String, message: String },
}

/// Typed event → payload.
pub fn to_payload<T: Event>(event: &T) -> Result<Payload, PayloadError> {
    serde_json::to_value(event)
        .map(Arc::new)
        .map_err(|e| PayloadError::Serialize {
            name: T::NAME.to_string(),
            message: e.to_string(),
        })
}

/// Payload → typed event.
pub fn from_payload<T: Event>(payload: &serde_json::Value) -> Result<T, PayloadError> {
    T::deserialize(payload).map_err(|e| PayloadError::Deserialize {
        name: T::NAME.to_string(),
        message: e.to_string(),
    })
}

macro_rules! builtin_event {
    ($(#[$m:meta])* $name:ident, $parent:literal { $($(#[$fm:meta])* pub $f:ident : $t:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Default, Serialize, serde::Deserialize)]
        pub struct $name { $($(#[$fm])* pub $f: $t),* }
        impl Event for $name {
            const NAME: &'static str = stringify!($name);
            const PARENTS: &'static [&'static str] = &[$parent];
        }
    };
}

builtin_event!(
    /// The generic start event (begins a run).
    StartEvent, "ControlAndDisplayEvent" {}
);
builtin_event!(
    /// A user's message: the usual start event of a conversational agent.
    UserMessageEvent, "StartEvent" {
        #[serde(default)]
        pub message: String,
    }
);
builtin_event!(
    /// Ends a run successfully.
    StopEvent, "ControlAndDisplayEvent" {}
);
builtin_event!(
    /// Ends a run with an error (a failed step with `stop_on_error`, or an engine failure).
    ExceptionEvent, "SemanticEvent" {
        pub message: String,
        #[serde(default = "default_status")]
        pub http_status_code: u16,
    }
);
builtin_event!(
    /// A chunk of streamed text (display only).
    ChunkEvent, "DisplayEvent" {
        #[serde(default)]
        pub chunk: String,
    }
);
builtin_event!(
    /// A model's thought shown to the user (display only).
    ThoughtEvent, "DisplayEvent" {
        #[serde(default)]
        pub thought: String,
    }
);
builtin_event!(
    /// A cost report (display only).
    CostEvent, "DisplayEvent" {
        #[serde(default)]
        pub cost: f64,
    }
);
builtin_event!(
    /// A question to a human; the run waits for the response event.
    HumanInTheLoopRequestEvent, "ControlAndDisplayEvent" {
        #[serde(default)]
        pub question: String,
    }
);
builtin_event!(
    /// A human's answer to a [`HumanInTheLoopRequestEvent`].
    HumanInTheLoopResponseEvent, "ControlAndDisplayEvent" {
        #[serde(default)]
        pub response: serde_json::Value,
    }
);

fn default_status() -> u16 {
    500
}

impl ExceptionEvent {
    /// An exception event with status 500.
    pub fn new(message: impl Into<String>) -> ExceptionEvent {
        ExceptionEvent {
            message: message.into(),
            http_status_code: 500,
        }
    }
}

impl UserMessageEvent {
    pub fn new(message: impl Into<String>) -> UserMessageEvent {
        UserMessageEvent {
            message: message.into(),
        }
    }
}

/// Whether a name is built into the protocol hierarchy (and so needs no declaration).
pub(crate) fn is_builtin(name: &str) -> bool {
    saap_protocol::Hierarchy::builtin().contains(name)
}
