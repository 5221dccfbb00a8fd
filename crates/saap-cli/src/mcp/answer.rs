//! What a tool call returns: its answer as text (JSON, the CLI's `--json` shape), cut to the
//! output bound with a marker that says how to page or narrow, or a [`ToolError`] that the
//! server reports as an MCP tool error (`isError: true`) saying what was wrong and what to do.
//!
//! Must not decide what a tool does; it only shapes what comes back.

use serde::Serialize;
use std::fmt;

/// A call that failed, with a message for the coding agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError(pub String);

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl ToolError {
    /// A tool error from a message.
    pub fn new(msg: impl Into<String>) -> ToolError {
        ToolError(msg.into())
    }
}

/// The result of one tool call.
pub type Answer = Result<String, ToolError>;

/// `value` as pretty JSON.
pub fn json<T: Serialize>(value: &T) -> Answer {
    serde_json::to_string_pretty(value).map_err(|e| {
        ToolError::new(format!(
            "internal: the answer could not be encoded as JSON ({e}); report this as a saap bug"
        ))
    })
}

/// The marker that starts the line appended to a cut answer.
pub const CUT_MARKER: &str = "[saap mcp: output cut at";

/// `text` cut to at most `max` bytes (at a character boundary), with a last line that says
/// how much was left out and `how` to get the rest. `text` itself when it fits.
pub fn cap(text: String, max: usize, how: &str) -> String {
    if text.len() <= max {
        return text;
    }
    let total = text.len();
    let note =
        format!("\n{CUT_MARKER} {max} of {total} bytes; the JSON above is incomplete. {how}]");
    let keep = max.saturating_sub(note.len());
    let mut end = keep.min(total);
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = String::with_capacity(end + note.len());
    out.push_str(&text[..end]);
    out.push_str(&note);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_answers_pass_and_long_ones_are_cut_at_the_bound_with_a_hint() {
        assert_eq!(cap("abc".into(), 10, "x"), "abc");
        let long = "é".repeat(1000);
        let cut = cap(long, 300, "page with from");
        assert!(cut.len() <= 300, "{}", cut.len());
        assert!(cut.contains(CUT_MARKER) && cut.ends_with("page with from]"));
        assert!(cut.contains("of 2000 bytes"));
    }
}
