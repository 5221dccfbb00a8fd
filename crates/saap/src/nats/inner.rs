//! The state one worker's parts share ([`Inner`]): its engine and store, its NATS
//! connection, the ownership and heartbeat buckets, the runs it owns, its step slots; and
//! what an owner record says ([`Owner`], [`Route`]). Its behaviour lives beside the part it
//! belongs to (`worker`: intake, ownership, sweeps; `steps`: the work queue), each an
//! `impl Inner` of its own. Must not hold behaviour itself.

use super::backend::NatsBackend;
use super::options::WorkerOptions;
use super::slots::Slots;
use crate::engine::Engine;
use async_nats::jetstream::kv;
use saap_nats::SaapNats;
use saap_protocol::DecodeLimits;
use std::collections::HashSet;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

/// An owner record: the worker and the run's subject tokens (to publish its outputs after a
/// takeover).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
pub(super) struct Owner {
    pub(super) w: String,
    /// agent id, thread id, display id.
    pub(super) a: (String, String, String),
}

/// The state a worker's parts share (module docs).
pub(super) struct Inner {
    pub(super) engine: Engine,
    pub(super) backend: NatsBackend,
    pub(super) nats: SaapNats,
    pub(super) class: String,
    pub(super) id: String,
    pub(super) opts: WorkerOptions,
    pub(super) owners: kv::Store,
    pub(super) live: kv::Store,
    /// Runs this worker owns (and watches for their end).
    pub(super) owned: Mutex<HashSet<Arc<str>>>,
    /// Owners and heartbeats as watched, so that a sweep reads only what concerns workers
    /// that look dead (`super::sweep`).
    pub(super) index: Mutex<super::sweep::OwnerIndex>,
    /// Owner records read by sweeps (each is a KV request).
    pub(super) sweep_reads: AtomicU64,
    pub(super) limits: DecodeLimits,
    pub(super) stop: tokio::sync::watch::Sender<bool>,
    /// With `Steps::Shared` and `local_slots > 0`: the slots of adaptive placement.
    pub(super) slots: Option<Arc<Slots>>,
    /// The cancellation tokens of the bodies running here for runs owned anywhere.
    pub(super) body_cancels: super::body_cancels::BodyCancels,
    /// The engines of the agents this process runs beside the class's own
    /// (`Workflow::with_delegate`): their runs' events go to them.
    pub(super) agents: Vec<Engine>,
}

/// Where a run's inputs go, as its owner record says.
pub(super) enum Route {
    Mine,
    Other { owner: Owner, revision: u64 },
    Nobody,
}
