//! The distributed engine on NATS JetStream (DESIGN §7; feature `nats`, on by default).
//!
//! - [`NatsBackend`]: the engine's store on JetStream — each run's journal (inputs, recorded
//!   precondition results, decision records) in stream `saap_journal_{Class}`, RunContext and
//!   ThreadContext in KV, step outputs re-published on the class stream and display events on
//!   core NATS. An [`Engine`](crate::Engine) over it has the embedded engine's semantics
//!   (the same core makes every decision; the conformance suite runs on it).
//! - [`Worker`]: a process of an agent class. Any number of workers share the class's
//!   durable queue consumer; per-run ownership (KV compare-and-set with heartbeats, journal
//!   writes fenced by sequence) makes one worker decide for a run at a time; a dead worker's
//!   runs are taken over and their unfinished executions run again.
//! - [`steps`]: with `WorkerOptions::steps = Steps::Shared`, the step bodies of one run run on
//!   any worker of the class through the work queue `saap_work_{Class}`, while the run's
//!   owner keeps making every decision.
//! - delegation across agent classes: a worker starts a child of another class by publishing
//!   its request on that class's stream, and children report their end on their parent's.
//! - [`resume`]: the message that resumes a run paused on its budget, applied by its owner.
//!
//! ```no_run
//! # async fn serve(workflow: saap::Workflow) -> Result<(), saap::nats::WorkerError> {
//! use saap::nats::{Worker, WorkerOptions};
//! use saap_nats::NatsOptions;
//! let worker = Worker::connect(
//!     &NatsOptions::new("nats://127.0.0.1:4222"),
//!     workflow,
//!     WorkerOptions::default(),
//! )
//! .await?;
//! worker.serve().await
//! # }
//! ```

pub mod backend;
mod body_cancels;
pub mod connect;
mod delegation;
mod effects;
mod inner;
mod options;
mod owners;
pub mod resume;
mod slots;
pub mod steps;
mod sweep;
pub mod unbegun;
pub mod worker;

pub use backend::{NatsBackend, NatsBackendOptions, journal_stream, journal_subject};
pub use connect::{EngineChoice, EngineConnect, parse_engine};
pub(crate) use delegation::envelope;
pub use options::{DEFAULT_LOCAL_SLOTS, Steps, WorkerError, WorkerOptions};
pub(crate) use owners::run_address;
pub use owners::{RunOwner, run_owner};
pub use resume::{RUN_RESUME_REQUEST_EVENT, ResumeRequest};
pub use saap_nats::{Auth, NatsOptions, Secret, TlsOptions};
pub use steps::{work_consumer, work_stream};
pub use unbegun::{Unbegun, unbegun_run};
pub use worker::Worker;
