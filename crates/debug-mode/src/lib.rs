//! `debug-mode`: the evidence-first probe CLI and its background service.
//!
//! Layout (one concept per file):
//! - [`error`]: stable user-facing error codes and exit codes.
//! - [`paths`]: the state directory, session-id validation and symlink-safe file access.
//! - [`event`]: the one validator of the five-field probe event contract.
//! - [`redact`]: the one redactor applied before anything is persisted.
//! - [`store`]: per-session evidence storage (append-only NDJSON plus an in-memory index).
//! - [`service`]: the loopback HTTP service (ingest + private control API), idle shutdown.
//! - [`client`]: the CLI side: finding, starting, replacing and stopping the service.
//! - [`query`]: the embedded jaq engine, run in a resource-limited worker process.
//! - [`output`]: the shared result envelope and its pretty/JSON renderers.
//! - [`templates`]: language helpers and call templates.
//! - [`clock`]: injectable time source.

pub mod client;
pub mod clock;
pub mod error;
pub mod event;
pub mod output;
pub mod paths;
pub mod query;
pub mod redact;
pub mod service;
pub mod store;
pub mod templates;
pub mod timefmt;

/// Version of this binary; the CLI and the service must agree on it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// Version of the private CLI <-> service protocol.
pub const PROTOCOL: u32 = 1;
/// Version of the `--json` envelope and of stored session metadata.
pub const SCHEMA_VERSION: u32 = 1;
