//! What every tool call may use: the bounds, the root folder of files, the saap executable
//! the spec tools run as a child, and the live system's sources. Fixed when the server starts.
//!
//! Must not hold per-call state or secrets in a form that could be printed (the NATS options
//! live inside [`Sources`], whose `Debug` shows no credential).

use super::limits::Limits;
use super::paths::Root;
use super::sources::Sources;
use std::path::PathBuf;

/// The server's fixed configuration, shared by every call.
pub struct Context {
    /// Time and output bounds of one call.
    pub limits: Limits,
    /// The folder tool paths are resolved under.
    pub root: Root,
    /// This executable, run as `saap check|simulate|explore|explain … --json`.
    pub exe: PathBuf,
    /// The live system (NATS and/or a store), if configured.
    pub sources: Sources,
    /// Child processes running at once (check, simulate, explore, explain): a client that
    /// fires many explorations at once queues instead of loading every core.
    pub children: tokio::sync::Semaphore,
}
