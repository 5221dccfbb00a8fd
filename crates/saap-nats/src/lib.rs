//! # saap-nats: SAAP on NATS JetStream
//!
//! The NATS layer of the distributed engine (DESIGN §6, §7; notes §2), independent of the
//! runtime: connect ([`SaapNats::connect`], [`NatsOptions`]: token, user/password, nkey seed,
//! credentials file, TLS; secrets never logged), create a class's stream exactly as
//! [`saap_protocol::StreamConfig`] says ([`SaapNats::ensure_stream`]), publish control events
//! to JetStream with `Nats-Msg-Id` = event id and the ack's duplicate flag
//! ([`SaapNats::publish_control`]) and display events on core NATS
//! ([`SaapNats::publish_display`]), consume a class's control events through the runners'
//! durable queue consumer `agent_runner_{Class}` with explicit acknowledgement
//! ([`SaapNats::control_consumer`], [`Delivery`]), keep state in KV buckets with
//! compare-and-set ([`TypedKv`]), and speak the config RPC and class discovery
//! ([`SaapNats::fetch_agent_config`], [`SaapNats::serve_agent_config`],
//! [`SaapNats::discover_classes`], [`SaapNats::serve_class_discovery`]), and replay the
//! stored control events of a class or run in stream order ([`SaapNats::replay_control`]).
//!
//! Subjects, names and configurations come from `saap-protocol`; this crate only turns them
//! into `async-nats` calls.
//!
//! ## Example: a worker of one agent class
//!
//! ```no_run
//! use saap_nats::{NatsOptions, SaapNats};
//! use saap_protocol::{DecodeLimits, Hierarchy};
//!
//! # async fn worker() -> Result<(), saap_nats::NatsError> {
//! let nats = SaapNats::connect(&NatsOptions::new("nats://127.0.0.1:4222")).await?;
//! nats.ensure_stream("RagAgent").await?;
//! let mut consumer = nats.control_consumer("RagAgent").await?;
//! let types = Hierarchy::builtin();
//! while let Some(delivery) = consumer.next().await {
//!     let delivery = delivery?;
//!     match delivery.decode(&types, &DecodeLimits::default()) {
//!         Ok(event) => {
//!             let run = delivery.parsed_subject()?.run().clone();
//!             // … append `event` to the run's durable log, dispatch, publish outputs with
//!             // nats.publish_control(&run, &output) (deduplicated by event id) …
//!             let _ = (event, run);
//!             delivery.ack().await?; // only after the work is durable
//!         }
//!         // Never decodable: keep the evidence, then stop redelivery.
//!         Err(_) => delivery.term().await?,
//!     }
//! }
//! # Ok(())
//! # }
//! ```

// Lets `src/testing.rs` name this crate `saap_nats` both as a module of it and when this
// crate's integration tests include the same file (`tests/support/mod.rs`).
extern crate self as saap_nats;

pub mod client;
pub mod consumer;
pub mod error;
pub mod ids;
pub mod kv;
pub mod options;
pub mod replay;
pub mod rpc;
#[cfg(feature = "testing")]
pub mod testing;

pub use client::{EnsuredStream, PublishReceipt, SaapNats, Settings};
pub use consumer::{ControlConsumer, Delivery, DeliveryInfo};
pub use error::{NatsError, Result};
pub use kv::{BucketKind, BucketSpec, TypedKv, Versioned};
pub use options::{Auth, ClientCertificate, NatsOptions, Secret, TlsOptions};
pub use replay::{Replay, ReplayScope, StoredEvent};
pub use rpc::{
    ClassDescription, ConfigScope, DiscoveredClass, FetchAgentConfigRequest,
    FetchAgentConfigResponse, ServiceHandle,
};
