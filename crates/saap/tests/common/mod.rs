//! Shared helpers: event declarations and running one test body on both backends.
#![allow(dead_code, clippy::unwrap_used)]

pub mod agents;
pub mod kill;
#[cfg(feature = "nats")]
pub mod nats;
pub mod traced;

use saap::testing::TestRunner;
use saap::{Engine, EngineOptions, SqliteBackend, Workflow};
use std::sync::Arc;
use std::time::Duration;

/// Generous: only guards against a hung test, never asserts a duration.
pub const WAIT: Duration = Duration::from_secs(20);

#[macro_export]
macro_rules! event {
    ($name:ident, $parent:literal) => {
        #[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
        pub struct $name {
            #[serde(default)]
            pub n: u32,
        }
        impl saap::Event for $name {
            const NAME: &'static str = stringify!($name);
            const PARENTS: &'static [&'static str] = &[$parent];
        }
    };
}

/// Which backend a test body runs on.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Memory,
    Sqlite,
    /// JetStream store on a nats-server started for the test (`saap::nats::NatsBackend`).
    Nats,
}

pub struct Harness {
    pub runner: TestRunner,
    pub dir: Option<tempfile::TempDir>,
    /// The test's nats-server (killed on drop), for `Kind::Nats`.
    pub server: Option<saap_nats::testing::NatsServer>,
}

/// An engine over the JetStream store of a fresh nats-server (must run on a multi-thread
/// runtime: the harness is synchronous).
pub fn nats_engine(wf: Workflow) -> (Engine, saap_nats::testing::NatsServer) {
    let server = saap_nats::testing::NatsServer::start();
    let engine = nats_engine_on(&server, wf);
    (engine, server)
}

/// An engine over the JetStream store of an already running nats-server (several tests or
/// cases share one server; give each workflow its own name so each has its own streams).
pub fn nats_engine_on(server: &saap_nats::testing::NatsServer, wf: Workflow) -> Engine {
    let url = server.url();
    tokio::task::block_in_place(|| {
        tokio::runtime::Handle::current().block_on(async {
            let nats = saap_nats::testing::connect_ready(vec![url], Default::default()).await;
            let backend = saap::nats::NatsBackend::open(
                nats,
                wf.name(),
                wf.compiled().hierarchy.clone(),
                Default::default(),
            )
            .await
            .unwrap();
            Engine::new(wf, Arc::new(backend), EngineOptions::default())
        })
    })
}

pub fn harness(kind: Kind, wf: Workflow) -> Harness {
    match kind {
        Kind::Memory => Harness {
            runner: TestRunner::in_memory(wf),
            dir: None,
            server: None,
        },
        Kind::Nats => {
            let (engine, server) = nats_engine(wf);
            Harness {
                runner: TestRunner::new(engine),
                dir: None,
                server: Some(server),
            }
        }
        Kind::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let backend = SqliteBackend::open(dir.path().join("saap.db")).unwrap();
            let engine = Engine::new(wf, Arc::new(backend), EngineOptions::default());
            Harness {
                runner: TestRunner::new(engine),
                dir: Some(dir),
                server: None,
            }
        }
    }
}

/// Defines `name` as three tests, `memory::name`, `sqlite::name` and `nats::name`, running
/// the same body (the last on a nats-server started for the test).
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident => $body:ident;)*) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$body(super::common::Kind::Memory).await
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$body(super::common::Kind::Sqlite).await
                }
            )*
        }
        mod nats {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$body(super::common::Kind::Nats).await
                }
            )*
        }
    };
}
