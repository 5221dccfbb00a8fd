//! What a user of a NATS worker configures and gets back: [`WorkerOptions`] (with where step
//! bodies run, [`Steps`]) and the worker's errors ([`WorkerError`], each with a stable
//! `SAAP-W…` code). Plain data: nothing here talks to NATS.

use crate::engine::EngineOptions;
use saap_nats::NatsError;
use std::collections::BTreeMap;
use std::time::Duration;

/// Where a run's step bodies execute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Steps {
    /// On the run's owner (no extra hop per step; runs are spread over workers, one run's
    /// executions are not). The default: see the crate README for the figures.
    #[default]
    Local,
    /// On any worker of the class, through the work queue `saap_work_{Class}` (module docs).
    Shared,
}

/// Worker failures. Each says what was wrong and what to do.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("SAAP-W001: {0}")]
    Nats(#[from] NatsError),
    #[error("{0}")]
    Store(#[from] crate::backend::StoreError),
    #[error(
        "SAAP-W002: cannot open KV bucket `{bucket}`: {detail}; check that JetStream is enabled and the account may create buckets"
    )]
    Bucket { bucket: String, detail: String },
    #[error(
        "SAAP-W003: the workflow name `{name}` is not a valid agent class for NATS subjects and buckets (ASCII letters, digits, '_' or '-'); rename the workflow"
    )]
    BadClass { name: String },
    /// A worker may run any execution of its class (its own runs', or any worker's through
    /// the work queue), so it holds every resource its steps take before it joins.
    #[error("{0}")]
    Resource(#[from] crate::resource::ResourceError),
}

/// Worker settings.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// The agent id in the subjects of published outputs (default `saap`).
    pub agent_id: String,
    /// A worker whose heartbeat is older than this is dead and its runs are taken over
    /// (default 3 s).
    pub lease: Duration,
    /// Sequential intake lanes (events of one run always use the same lane; default 32).
    pub lanes: usize,
    /// How long a forwarded event waits for its owner's answer (default 5 s).
    pub forward_timeout: Duration,
    /// Engine settings (ended runs are always dropped from memory: the journal keeps them).
    pub engine: EngineOptions,
    /// Publish step outputs and display events (default true).
    pub publish_outputs: bool,
    /// Answer the protocol services of the class (default true): config RPC on
    /// `aihub.rpc.config.agent.{class}.*` and class discovery requests addressed to the class
    /// or to every class.
    pub serve_protocol: bool,
    /// Where step bodies run (default [`Steps::Local`]: on the run's owner). With
    /// [`Steps::Shared`] every execution goes through the class's work queue and runs on any
    /// worker (module docs of `saap::nats::steps`); all workers of a class must use the same
    /// mode (a `Local` worker takes no work items).
    pub steps: Steps,
    /// With `Steps::Shared`: how long a work item taken by a worker that stopped answering
    /// stays with it before the server delivers it to another (default 10 s; the body's
    /// worker renews it every third of this while the body runs).
    pub work_ack_wait: Duration,
    /// With `Steps::Shared`: how many step bodies this worker runs at once before it spills
    /// to the work queue (adaptive placement; default [`DEFAULT_LOCAL_SLOTS`]). The owner of a
    /// run runs a started execution itself while fewer than this many bodies (its own and
    /// work items it took) are running, and publishes it to the work queue otherwise; every
    /// worker pulls work items only while it has free slots. An idle cluster then costs what
    /// `Steps::Local` costs, and a saturated owner spreads bodies to other workers. `0`
    /// sends every body through the queue (pulled `work_batch` at a time, unbounded).
    pub local_slots: usize,
    /// With `Steps::Shared`: how many work items one pull asks for at most (default 16). Bodies of
    /// the items a worker holds run concurrently; a smaller batch spreads a burst more
    /// evenly over the workers, a larger one costs fewer pull requests.
    pub work_batch: usize,
    /// What config RPC answers, by agent id: the configuration (`found: true`); any other id
    /// of the class is answered `found: false` with an empty config. Default: none.
    pub agent_configs: BTreeMap<String, serde_json::Map<String, serde_json::Value>>,
    /// Fields of the class's discovery response besides `agent_class`. When empty, the worker
    /// answers `description` (if the workflow has one) and `workflow_spec` (the workflow's
    /// spec, `agent spec`). The Python field set is not in the reference.
    pub discovery_fields: serde_json::Map<String, serde_json::Value>,
}

/// The default of [`WorkerOptions::local_slots`]: bodies, not CPUs. An agent's step bodies
/// mostly wait on I/O (a model or tool call), and a slot is held for the whole wait; with one
/// slot per CPU, 8-wide fan-outs of 10 ms waits ran at 165–320 bodies/s against 6k–9k with
/// `Steps::Local` (`BENCHMARKS.md`, `spill`). Lower it for CPU-bound bodies.
pub const DEFAULT_LOCAL_SLOTS: usize = 64;

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            agent_id: "saap".into(),
            lease: Duration::from_secs(3),
            lanes: 32,
            forward_timeout: Duration::from_secs(5),
            engine: EngineOptions::default(),
            publish_outputs: true,
            serve_protocol: true,
            steps: Steps::Local,
            work_ack_wait: Duration::from_secs(10),
            work_batch: 16,
            local_slots: DEFAULT_LOCAL_SLOTS,
            agent_configs: BTreeMap::new(),
            discovery_fields: serde_json::Map::new(),
        }
    }
}
