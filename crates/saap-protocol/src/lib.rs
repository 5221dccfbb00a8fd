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
//!   the wire list `_parent_event_names`, subtyping, and the [`Classification`]
//!   (control / display / start / stop / exception).
//!
//! ## What this crate must not do
//!
//! No async, no I/O, no clock, no randomness: ids and timestamps are arguments. Everything that
//! touches a broker, a disk or the time lives in the runtime crates above it.

pub mod hierarchy;

pub use hierarchy::{Classification, Hierarchy, HierarchyError};
