//! saap-otel: a saap run as one OpenTelemetry trace over OTLP HTTP/protobuf, the format Arize
//! Phoenix, Langfuse and any OpenTelemetry collector accept.
//!
//! * [`ids`]: trace and span ids derived from the run, so processes that never talk make one
//!   trace; the W3C `traceparent` header.
//! * [`run_spans`]: what a run did → spans (an `AGENT` root, a `CHAIN` span per execution, a
//!   child per semantic event with the protocol's OpenInference and `gen_ai.*` attributes).
//!   Pure.
//! * [`otlp`]: the protobuf wire form.
//! * [`config`]: where to send (code, Langfuse keys, `OTEL_EXPORTER_OTLP_*`).
//! * [`exporter`]: the live exporter (a background thread, never blocking its caller) and the
//!   one-shot [`export_spans`].
//!
//! This crate must not depend on the engine (`saap`, `saap-dispatch`) or run an async
//! runtime of its own on the caller's thread; it must never log header values.

pub mod config;
pub mod error;
pub mod exporter;
pub mod ids;
pub mod otlp;
pub mod run_spans;
pub mod span;

pub use config::OtlpConfig;
pub use error::{ConfigError, ExportError};
pub use exporter::{ExportStats, Exporter, SpanJob, export_spans};
pub use ids::{SpanId, TraceId, parse_traceparent, traceparent};
pub use otlp::encode_request;
pub use run_spans::{EventData, ExecutionFacts, RunFacts, event_json, execution_spans, run_span};
pub use span::{MAX_ATTRIBUTE_BYTES, Span, SpanStatus, bound_attributes, bound_text};
