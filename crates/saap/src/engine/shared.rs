//! The state every part of the engine shares ([`Shared`]): the workflow and its tables by
//! type, the backend, the run table, id generation, options, and the local driver's queue.
//! Its behaviour lives beside the part it belongs to (`incoming`, `lifecycle`, `apply`,
//! `body`, `tasks`, `recovery`), each an `impl Shared` of its own.

use super::ids::{IdGen, TypeNameBuild};
use super::local_queue::LocalQueue;
use super::options::EngineOptions;
use super::run_table::Runs;
use super::slot::SpareTables;
use crate::backend::Backend;
use crate::params::EventName;
use crate::workflow::Workflow;
use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, RwLock};

pub(crate) struct Shared {
    pub workflow: Workflow,
    /// A resource a step takes that the workflow does not hold: every run is refused.
    pub(super) missing_resource: Option<crate::resource::ResourceError>,
    /// This engine's entry in the registry its steps' contexts find it by.
    pub(super) ctx_ref: crate::context::EngineRef,
    /// `backend.wants_journal()`, asked once.
    pub(super) journal: bool,
    /// `CompiledSpec::fingerprint`, computed once.
    pub(super) fingerprint: u64,
    /// Type names by type id (shared into bound events).
    pub(super) type_names: Arc<[EventName]>,
    pub backend: Arc<dyn Backend>,
    pub(super) runs: RwLock<Runs>,
    /// Type ids by name (FNV; the spec's own index uses SipHash).
    pub(super) type_ids: HashMap<Box<str>, saap_dispatch::TypeId, TypeNameBuild>,
    /// Per step: the types it declares as outputs, looked up before `type_ids` (a step
    /// returns one of a few types: comparing a short name beats hashing it).
    pub(super) out_types: Vec<OutTypes>,
    /// The start event types that have a Rust type, by its name: a typed start event's
    /// name is compared by address with these before `type_ids` is looked up.
    pub(super) start_types: Box<[(&'static str, saap_dispatch::TypeId)]>,
    pub(super) opts: EngineOptions,
    pub(super) ids: IdGen,
    /// Where started executions go instead of running here (set by a distributed engine
    /// whose bodies run on any worker, see `distributed.rs`).
    pub(super) executor: std::sync::OnceLock<Arc<dyn super::executor::StepExecutor>>,
    /// How many slots `runs` keeps for new runs, read without its lock (written under it): a run
    /// started while none is kept, or a slot let go while the list is full, takes no lock.
    /// A stale count only costs a lock, or one slot not reused.
    pub(super) spare_slot_count: AtomicUsize,
    /// Tables of runs evicted while a waiter still held their slot (many runs in flight),
    /// for runs about to execute for the first time (see [`Shared::adopt_spare`]). At most
    /// [`SPARE_TABLES`].
    pub(super) spare_tables: Mutex<Vec<SpareTables>>,
    /// The tables of the last evicted run too large for those (a large fan-out's), for the
    /// next large fan-out (see [`Shared::adopt_large`]): one set, at most
    /// [`EngineOptions::kept_table_bytes`] (freed and made again, a 10,000-item fan-out's
    /// tables cost ~1,100 page faults per run, measured).
    pub(super) large_spare: Mutex<Option<SpareTables>>,
    /// Executions for the engine's local driver, and its wake-up (see `enqueue_local`).
    pub(super) local: Mutex<LocalQueue>,
    pub(super) local_wake: tokio::sync::Notify,
    /// Where this engine's runs are exported as traces, if anywhere
    /// (`EngineOptions::telemetry`).
    #[cfg(feature = "otel")]
    pub(super) telemetry: Option<super::telemetry::LiveTelemetry>,
    /// When runs have timers due (see `timers`).
    pub(super) timers: super::timer_queue::TimerQueue,
    /// Per type id: whether its events are delegation requests (see `delegation`).
    pub(super) delegating: Box<[Option<super::asked::Asked>]>,
    /// Whether any type is: completions then take the general path, which starts children.
    pub(super) may_delegate: bool,
    /// The engines this one's runs delegate to, by agent class (`Engine::delegate_to`).
    pub(super) delegates: RwLock<Vec<(Arc<str>, std::sync::Weak<Shared>)>>,
    /// The engines of the agents this one's workflow delegates to, made with it
    /// (`Engine::new`/`open` of a workflow `with_delegate`): held here so that they live as
    /// long as it.
    pub(super) agents: std::sync::OnceLock<Box<[Arc<Shared>]>>,
    /// How runs reach agent classes no engine of this process runs (see `remote`).
    pub(super) remote: std::sync::OnceLock<Arc<dyn super::remote_agents::RemoteAgents>>,
    /// Held while a child run is found or made (see `delegation`).
    pub(super) child_starts: tokio::sync::Mutex<()>,
    /// This engine (for the tasks it starts that must not keep it alive).
    pub(super) this: std::sync::Weak<Shared>,
}

/// A step's declared output types: name and type id.
pub(super) type OutTypes = Box<[(EventName, saap_dispatch::TypeId)]>;

impl Drop for Shared {
    fn drop(&mut self) {
        self.ctx_ref.unregister();
        self.timers.close();
    }
}

/// Whether all executions of a run should share the task that drives it: on a
/// current-thread runtime tasks add no parallelism, and with the in-memory backend the
/// task never waits for a store while others are pending on it.
pub(super) fn shares_task(shared: &Shared) -> bool {
    !shared.journal
        && shared.opts.inline_single
        && shared.executor.get().is_none()
        && tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread)
}
