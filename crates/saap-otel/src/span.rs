//! A finished span as saap exports it ([`Span`], [`SpanStatus`]), and the bound on attribute
//! text ([`bound_text`], [`bound_attributes`]) that keeps one huge prompt or document from
//! making a batch a receiver refuses.
//!
//! Spans here are plain data in OpenTelemetry's terms (ids, parent, times, attributes,
//! status); the wire form lives in `otlp`. This module must not encode, send or log.

use saap_protocol::semantic::{AttributeValue, Attributes};

use crate::ids::{SpanId, TraceId};

/// How a span ended.
#[derive(Clone, Debug, PartialEq)]
pub enum SpanStatus {
    /// Not known (yet): a run still going on.
    Unset,
    /// It succeeded.
    Ok,
    /// It failed, with what went wrong.
    Error(String),
}

/// One span of a run's trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    /// The run's trace.
    pub trace_id: TraceId,
    /// This span.
    pub span_id: SpanId,
    /// The span it is part of (`None` for the run's root span).
    pub parent_span_id: Option<SpanId>,
    /// What it is (agent, step, model or tool name).
    pub name: String,
    /// When it started, in nanoseconds since the Unix epoch.
    pub start_unix_nano: u64,
    /// When it ended, in nanoseconds since the Unix epoch (not before the start).
    pub end_unix_nano: u64,
    /// OpenInference, `gen_ai.*` and `saap.*` attributes.
    pub attributes: Attributes,
    /// How it ended.
    pub status: SpanStatus,
}

/// The longest attribute text, in bytes (64 KiB), marker included.
pub const MAX_ATTRIBUTE_BYTES: usize = 64 * 1024;

/// Room kept for the marker `… [cut: N bytes]` (its longest form is 37 bytes).
const MARKER_ROOM: usize = 40;

/// `text` if it fits in `max` bytes; else its longest prefix that ends at a char boundary and
/// leaves room for the marker `… [cut: N bytes]`, N being the bytes left out.
pub fn bound_text(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut keep = max.saturating_sub(MARKER_ROOM);
    while keep > 0 && !text.is_char_boundary(keep) {
        keep -= 1;
    }
    let cut = text.len() - keep;
    let mut out = text;
    out.truncate(keep);
    out.push_str(&format!("… [cut: {cut} bytes]"));
    out
}

/// Every text value (and every text of a list) of `attributes` bounded to
/// [`MAX_ATTRIBUTE_BYTES`].
pub fn bound_attributes(attributes: Attributes) -> Attributes {
    if attributes.iter().all(|(_, v)| fits(v)) {
        return attributes;
    }
    let mut out = Attributes::new();
    for (key, value) in attributes.iter() {
        let value = match value {
            AttributeValue::String(s) => {
                AttributeValue::String(bound_text(s.clone(), MAX_ATTRIBUTE_BYTES))
            }
            AttributeValue::StringArray(items) => AttributeValue::StringArray(
                items
                    .iter()
                    .map(|s| bound_text(s.clone(), MAX_ATTRIBUTE_BYTES))
                    .collect(),
            ),
            other => other.clone(),
        };
        out.set(key, value);
    }
    out
}

fn fits(value: &AttributeValue) -> bool {
    match value {
        AttributeValue::String(s) => s.len() <= MAX_ATTRIBUTE_BYTES,
        AttributeValue::StringArray(items) => items.iter().all(|s| s.len() <= MAX_ATTRIBUTE_BYTES),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_kept_as_is() {
        assert_eq!(bound_text("hello".into(), 64), "hello");
        let exact = "x".repeat(64);
        assert_eq!(bound_text(exact.clone(), 64), exact);
    }

    #[test]
    fn long_text_is_cut_at_a_char_boundary_with_a_marker() {
        // 3-byte chars: the cut must not split one.
        let text = "€".repeat(50_000);
        let out = bound_text(text.clone(), MAX_ATTRIBUTE_BYTES);
        assert!(out.len() <= MAX_ATTRIBUTE_BYTES, "{} bytes", out.len());
        let (kept, marker) = out.split_once("… [cut: ").expect("a marker");
        assert!(kept.chars().all(|c| c == '€'));
        let cut: usize = marker
            .trim_end_matches(" bytes]")
            .parse()
            .expect("the number of bytes cut");
        assert_eq!(kept.len() + cut, text.len());
    }

    #[test]
    fn attributes_are_bounded_but_numbers_untouched() {
        let mut a = Attributes::new();
        a.set("input.value", "y".repeat(MAX_ATTRIBUTE_BYTES + 1));
        a.set("llm.token_count.total", 13_i64);
        a.set(
            "tags",
            AttributeValue::StringArray(vec!["z".repeat(100_000), "ok".into()]),
        );
        let b = bound_attributes(a);
        let input = b.get_str("input.value").expect("input");
        assert!(input.len() <= MAX_ATTRIBUTE_BYTES);
        assert!(
            input.ends_with("… [cut: 41 bytes]"),
            "{}",
            &input[input.len() - 30..]
        );
        assert_eq!(
            b.get("llm.token_count.total"),
            Some(&AttributeValue::Int(13))
        );
        match b.get("tags") {
            Some(AttributeValue::StringArray(items)) => {
                assert!(items[0].len() <= MAX_ATTRIBUTE_BYTES);
                assert_eq!(items[1], "ok");
            }
            other => panic!("tags: {other:?}"),
        }
    }
}
