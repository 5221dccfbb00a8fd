//! # saap-protocol: events on the wire
//!
//! The SAAP wire protocol as pure data: what an event looks like as JSON, which event types
//! exist and how they relate, and which NATS subjects and streams carry them. It is compatible
//! with the Python implementation of the protocol (see `shared/reference/saap-python-notes.md`
//! §1–§2 and `DESIGN.md` §6).
//!
//! ## Layout
//!
//! * [`hierarchy`] — the registry of event type names and their parents: the built-in classes,
//!   the wire list `_parent_event_names`, subtyping, foreign-name resolution, and the
//!   [`Classification`] (control / display / start / stop / exception).
//! * [`event_id`] — the 12-byte [`EventId`] (24 lowercase hex), ObjectId-style construction from
//!   caller-supplied time/counter/random bytes (deterministic ids of step outputs are made by
//!   the dispatch core).
//! * [`event`] — the [`EventEnvelope`] and its JSON codec: bounded, typed-error decoding
//!   ([`DecodeError`], [`DecodeLimits`]), unknown fields kept in order, nested events, encoding.
//! * [`semantic`] — typed views of the semantic events (`LLMEvent`, `RetrieverEvent`,
//!   `ToolEvent`, …) and `LLMCostEvent`, wire-compatible with Python, with their OpenInference
//!   and OpenTelemetry GenAI span attributes.
//! * [`subject`] — NATS subjects (agent events, config RPC, discovery): build, parse, validate
//!   tokens, wildcard filters per scope; stream and consumer names and configurations; the
//!   `Nats-Msg-Id` header value.
//!
//! ## Example
//!
//! ```
//! use saap_protocol::{DecodeLimits, EventEnvelope, Hierarchy, RunAddress};
//! use saap_protocol::subject::publish_subjects;
//!
//! let mut types = Hierarchy::builtin();
//! types.register("Answered", &["StopEvent"]).expect("a new name with a known parent");
//!
//! let wire = br#"{"event_id": "65a0c0ffee0000000000abcd", "created_at": 1700000000000000000,
//!   "_event_name": "Answered", "_parent_event_names": ["Answered", "StopEvent"], "text": "42"}"#;
//! let event = EventEnvelope::decode(wire, &types, &DecodeLimits::default())?;
//! assert!(event.classification().stop);
//! assert_eq!(event.parent_event_names[..2], ["Answered", "StopEvent"]);
//!
//! let run = RunAddress::new("RagAgent", "a1", "t1", "d1", "r1")?;
//! let subjects = publish_subjects(&run, &event)?;
//! assert_eq!(
//!     subjects[0].to_string(),
//!     "agent.RagAgent.a1.t1.d1.r1.control_event.Answered.65a0c0ffee0000000000abcd"
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## What this crate must not do
//!
//! No async, no I/O, no clock, no randomness: ids and timestamps are arguments. Nothing here
//! panics on untrusted input. Everything that touches a broker, a disk or the time lives in the
//! runtime crates above it.

pub mod event;
pub mod event_id;
pub mod hierarchy;
pub mod semantic;
pub mod subject;

pub use event::{DecodeError, DecodeLimits, EventEnvelope, LocaleString, NestedEvent};
pub use event_id::{EventId, EventIdError, EventIdHex, new_event_id};
pub use hierarchy::{Classification, Hierarchy, HierarchyError};
pub use subject::{
    AgentEventFilter, AgentEventSubject, ConfigRpcSubject, DiscoverySubject, EventKind, RunAddress,
    StreamConfig, SubjectError,
};
