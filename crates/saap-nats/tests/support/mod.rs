//! The nats-server test harness. Its source is `src/testing.rs`, also built into the library
//! as `saap_nats::testing` with the `testing` feature for the engine's tests; included here so
//! that this crate's tests need no feature.
#![allow(dead_code)]

#[path = "../../src/testing.rs"]
mod harness;

pub use harness::*;
