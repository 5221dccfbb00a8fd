//! The OTLP/protobuf wire form of spans: the `opentelemetry-proto` v1 messages saap sends,
//! declared by hand with prost's derive (no protoc, no build.rs, no tonic), and
//! [`encode_request`], which makes the body of one `POST /v1/traces`.
//!
//! Field numbers follow `opentelemetry/proto/{collector/trace,trace,common,resource}/v1/*.proto`
//! exactly; fields saap never sets (events, links, dropped counts, entity refs) are left out,
//! which protobuf allows. The integration tests decode what this writes with the OpenTelemetry
//! project's own generated types. This module must not do I/O.

use saap_protocol::semantic::AttributeValue;

use crate::span::{Span as SaapSpan, SpanStatus};

/// `collector/trace/v1`: the body of an export.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportTraceServiceRequest {
    /// Spans grouped by the resource that made them.
    #[prost(message, repeated, tag = "1")]
    pub resource_spans: Vec<ResourceSpans>,
}

/// `trace/v1`: the spans of one resource.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResourceSpans {
    /// The process / service.
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    /// Spans grouped by instrumentation scope.
    #[prost(message, repeated, tag = "2")]
    pub scope_spans: Vec<ScopeSpans>,
    /// Schema of the resource's attributes.
    #[prost(string, tag = "3")]
    pub schema_url: String,
}

/// `resource/v1`: what made the spans.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Resource {
    /// `service.name` and the like.
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
}

/// `trace/v1`: the spans of one instrumentation scope.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ScopeSpans {
    /// The instrumentation library.
    #[prost(message, optional, tag = "1")]
    pub scope: Option<InstrumentationScope>,
    /// The spans.
    #[prost(message, repeated, tag = "2")]
    pub spans: Vec<Span>,
    /// Schema of the spans' attributes.
    #[prost(string, tag = "3")]
    pub schema_url: String,
}

/// `common/v1`: the instrumentation library.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InstrumentationScope {
    /// Its name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Its version.
    #[prost(string, tag = "2")]
    pub version: String,
}

/// `trace/v1`: one span.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Span {
    /// 16 bytes.
    #[prost(bytes = "vec", tag = "1")]
    pub trace_id: Vec<u8>,
    /// 8 bytes.
    #[prost(bytes = "vec", tag = "2")]
    pub span_id: Vec<u8>,
    /// W3C tracestate.
    #[prost(string, tag = "3")]
    pub trace_state: String,
    /// 8 bytes, or empty for a root span.
    #[prost(bytes = "vec", tag = "4")]
    pub parent_span_id: Vec<u8>,
    /// W3C trace flags and the parent-is-remote bits.
    #[prost(fixed32, tag = "16")]
    pub flags: u32,
    /// The span's name.
    #[prost(string, tag = "5")]
    pub name: String,
    /// `SpanKind` (saap writes [`SPAN_KIND_INTERNAL`]).
    #[prost(int32, tag = "6")]
    pub kind: i32,
    /// Start, ns since the Unix epoch.
    #[prost(fixed64, tag = "7")]
    pub start_time_unix_nano: u64,
    /// End, ns since the Unix epoch.
    #[prost(fixed64, tag = "8")]
    pub end_time_unix_nano: u64,
    /// Attributes.
    #[prost(message, repeated, tag = "9")]
    pub attributes: Vec<KeyValue>,
    /// How it ended.
    #[prost(message, optional, tag = "15")]
    pub status: Option<Status>,
}

/// `SpanKind.SPAN_KIND_INTERNAL`.
pub const SPAN_KIND_INTERNAL: i32 = 1;
/// `Status.StatusCode.STATUS_CODE_UNSET`.
pub const STATUS_CODE_UNSET: i32 = 0;
/// `Status.StatusCode.STATUS_CODE_OK`.
pub const STATUS_CODE_OK: i32 = 1;
/// `Status.StatusCode.STATUS_CODE_ERROR`.
pub const STATUS_CODE_ERROR: i32 = 2;
/// `SpanFlags`: the W3C sampled flag.
pub const SPAN_FLAGS_SAMPLED: u32 = 0x01;

/// `trace/v1`: a span's status.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Status {
    /// The error message.
    #[prost(string, tag = "2")]
    pub message: String,
    /// `StatusCode`.
    #[prost(int32, tag = "3")]
    pub code: i32,
}

/// `common/v1`: one attribute.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    /// The key.
    #[prost(string, tag = "1")]
    pub key: String,
    /// The value.
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

/// `common/v1`: an attribute value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AnyValue {
    /// One of the kinds of values.
    #[prost(oneof = "any_value::Value", tags = "1, 2, 3, 4, 5")]
    pub value: Option<any_value::Value>,
}

/// The `oneof` of [`AnyValue`].
pub mod any_value {
    /// A value of one kind.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        /// Text.
        #[prost(string, tag = "1")]
        StringValue(String),
        /// A boolean.
        #[prost(bool, tag = "2")]
        BoolValue(bool),
        /// An integer.
        #[prost(int64, tag = "3")]
        IntValue(i64),
        /// A float.
        #[prost(double, tag = "4")]
        DoubleValue(f64),
        /// A list.
        #[prost(message, tag = "5")]
        ArrayValue(super::ArrayValue),
    }
}

/// `common/v1`: a list of values.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ArrayValue {
    /// The values.
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<AnyValue>,
}

fn string_value(s: impl Into<String>) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::StringValue(s.into())),
    }
}

fn key_value(key: &str, value: AnyValue) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(value),
    }
}

/// An attribute value in its wire form (lists become an `ArrayValue`).
pub fn any_value(value: &AttributeValue) -> AnyValue {
    use any_value::Value;
    let value = match value {
        AttributeValue::String(s) => Value::StringValue(s.clone()),
        AttributeValue::Bool(b) => Value::BoolValue(*b),
        AttributeValue::Int(n) => Value::IntValue(*n),
        AttributeValue::Double(n) => Value::DoubleValue(*n),
        AttributeValue::DoubleArray(items) => Value::ArrayValue(ArrayValue {
            values: items
                .iter()
                .map(|n| AnyValue {
                    value: Some(Value::DoubleValue(*n)),
                })
                .collect(),
        }),
        AttributeValue::StringArray(items) => Value::ArrayValue(ArrayValue {
            values: items.iter().map(|s| string_value(s.as_str())).collect(),
        }),
    };
    AnyValue { value: Some(value) }
}

/// A span in its wire form (kind INTERNAL, sampled).
pub fn wire_span(span: &SaapSpan) -> Span {
    let (code, message) = match &span.status {
        SpanStatus::Unset => (STATUS_CODE_UNSET, String::new()),
        SpanStatus::Ok => (STATUS_CODE_OK, String::new()),
        SpanStatus::Error(message) => (STATUS_CODE_ERROR, message.clone()),
    };
    Span {
        trace_id: span.trace_id.0.to_vec(),
        span_id: span.span_id.0.to_vec(),
        trace_state: String::new(),
        parent_span_id: span
            .parent_span_id
            .map(|p| p.0.to_vec())
            .unwrap_or_default(),
        flags: SPAN_FLAGS_SAMPLED,
        name: span.name.clone(),
        kind: SPAN_KIND_INTERNAL,
        start_time_unix_nano: span.start_unix_nano,
        end_time_unix_nano: span.end_unix_nano.max(span.start_unix_nano),
        attributes: span
            .attributes
            .iter()
            .map(|(k, v)| key_value(k, any_value(v)))
            .collect(),
        status: Some(Status { message, code }),
    }
}

/// The request for `spans`, as made by service `service_name`.
pub fn request(service_name: &str, spans: &[SaapSpan]) -> ExportTraceServiceRequest {
    let resource = Resource {
        attributes: vec![
            key_value("service.name", string_value(service_name)),
            // Phoenix files a trace under this project (else "default"): one per agent.
            key_value("openinference.project.name", string_value(service_name)),
            key_value("telemetry.sdk.name", string_value("saap")),
            key_value("telemetry.sdk.language", string_value("rust")),
            key_value(
                "telemetry.sdk.version",
                string_value(env!("CARGO_PKG_VERSION")),
            ),
        ],
    };
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "saap".to_owned(),
                    version: env!("CARGO_PKG_VERSION").to_owned(),
                }),
                spans: spans.iter().map(wire_span).collect(),
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

/// The protobuf body of `POST /v1/traces` for `spans`.
pub fn encode_request(service_name: &str, spans: &[SaapSpan]) -> Vec<u8> {
    prost::Message::encode_to_vec(&request(service_name, spans))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{SpanId, TraceId};
    use prost::Message as _;
    use saap_protocol::semantic::Attributes;

    fn span() -> SaapSpan {
        let mut attributes = Attributes::new();
        attributes.set("a.string", "x");
        attributes.set("a.bool", true);
        attributes.set("a.int", 7_i64);
        attributes.set("a.double", 0.5);
        attributes.set("a.doubles", AttributeValue::DoubleArray(vec![1.0, 2.0]));
        attributes.set("a.strings", AttributeValue::StringArray(vec!["p".into()]));
        SaapSpan {
            trace_id: TraceId([1; 16]),
            span_id: SpanId([2; 8]),
            parent_span_id: None,
            name: "root".into(),
            start_unix_nano: 10,
            end_unix_nano: 20,
            attributes,
            status: SpanStatus::Error("boom".into()),
        }
    }

    #[test]
    fn a_request_round_trips_through_our_own_messages() {
        let body = encode_request("svc", &[span()]);
        let decoded = ExportTraceServiceRequest::decode(body.as_slice()).expect("decodes");
        assert_eq!(decoded, request("svc", &[span()]));
        let wire = &decoded.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(wire.trace_id, vec![1; 16]);
        assert!(wire.parent_span_id.is_empty());
        assert_eq!(wire.kind, SPAN_KIND_INTERNAL);
        assert_eq!(
            wire.status,
            Some(Status {
                message: "boom".into(),
                code: STATUS_CODE_ERROR
            })
        );
        let kinds: Vec<(&str, &any_value::Value)> = wire
            .attributes
            .iter()
            .filter_map(|kv| Some((kv.key.as_str(), kv.value.as_ref()?.value.as_ref()?)))
            .collect();
        assert_eq!(kinds.len(), 6);
        assert!(kinds.contains(&("a.int", &any_value::Value::IntValue(7))));
        assert!(kinds.iter().any(|(k, v)| *k == "a.doubles"
            && matches!(v, any_value::Value::ArrayValue(a) if a.values.len() == 2)));
    }

    #[test]
    fn times_are_fixed64_on_the_wire() {
        // Field 7, wire type 1 (64-bit): tag byte 0x39, then 8 little-endian bytes.
        let body = wire_span(&span()).encode_to_vec();
        let at = body.iter().position(|b| *b == 0x39).expect("field 7");
        assert_eq!(&body[at + 1..at + 9], &10u64.to_le_bytes());
    }
}
