//! # saap-inspect: look at a live SAAP system without touching it
//!
//! The reading half of saap's debugger on live systems (DESIGN §10): what `saap inspect` prints
//! and what `saap mcp` will serve to coding agents as the debugging guide's tools
//! (`server_info`, `stream_list`, `stream_info`, `stream_subjects`, `stream_view`,
//! `stream_get`, `kv_ls`, `kv_get`), over two sources:
//!
//! - a NATS server with JetStream ([`NatsInspector`]): streams, messages in order decoded into
//!   SAAP envelopes (saap's and the Python implementation's alike: one wire format), one message
//!   by sequence, KV buckets, and the runs found in an agent class stream with their timeline;
//! - a saap SQLite store ([`StoreInspector`]), read-only, where each workflow's journal is the
//!   stream and the context tables are the buckets.
//!
//! [`recorded`] reads one run whole (bounded) for the dispatch core: a saap journal becomes the
//! core's History, a Python-recorded run's events are rebuilt under saap's semantics with the
//! places where the Python dispatcher would have differed (`saap explain --run`).
//!
//! Both answer with the plain data of [`model`] (serializable; the CLI's `--json` is exactly
//! that). Layout: [`query`] checks what is asked, [`decode`] turns bytes into messages (never
//! failing: an undecodable message comes back raw with its reason), [`nats`] and [`store`] read,
//! [`error`] says what went wrong with a stable code.
//!
//! What this crate must not do: write anything (no publish — except the one class discovery
//! request of `NatsInspector::discover_spec`, on core NATS, which no SAAP stream stores — no
//! ack, no durable consumer, no SQL write; only ephemeral page consumers that it deletes), load a stream or a table whole
//! (every answer is a bounded page; `recorded` reads one run's rows or subjects a page at a
//! time, up to a documented bound), format for terminals (that is the CLI's job), or depend
//! on the runtime (`saap`): it reads the documented wire and store formats.

pub mod decode;
pub mod error;
pub mod model;
pub mod nats;
pub mod query;
pub mod recorded;
pub mod store;
pub mod timefmt;

pub use error::{InspectError, Result};
pub use nats::NatsInspector;
pub use query::{RunsQuery, ViewQuery};
pub use store::StoreInspector;
