//! Shared helpers: event declarations and running one test body on both backends.
#![allow(dead_code, clippy::unwrap_used)]

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
}

pub struct Harness {
    pub runner: TestRunner,
    pub dir: Option<tempfile::TempDir>,
}

pub fn harness(kind: Kind, wf: Workflow) -> Harness {
    match kind {
        Kind::Memory => Harness {
            runner: TestRunner::in_memory(wf),
            dir: None,
        },
        Kind::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let backend = SqliteBackend::open(dir.path().join("saap.db")).unwrap();
            let engine = Engine::new(wf, Arc::new(backend), EngineOptions::default());
            Harness {
                runner: TestRunner::new(engine),
                dir: Some(dir),
            }
        }
    }
}

/// Defines `name` as two tests, `memory::name` and `sqlite::name`, running the same body.
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
    };
}
