//! Everything that can go wrong in a call, as error kinds with stable codes.
//!
//! Each [`LlmError`] variant has a code ([`LlmError::code`]) that does not change between
//! releases, and a message that says what was wrong and what to do, naming no Rust type.
//! Excerpts of what the server sent are cut to a bounded length ([`excerpt`]). This module must
//! not hold or print the API key: no variant carries a header or the request.

use std::time::Duration;

/// Why a chat completion call failed.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LlmError {
    /// The configuration cannot be used (bad base URL, no model).
    #[error("the model client is misconfigured: {what}")]
    InvalidConfig {
        /// What is wrong and how to fix it.
        what: String,
    },
    /// No connection could be made (server down, wrong host or port, TLS failure).
    #[error(
        "could not reach the model server at {url}: {reason}; check that it runs and that OPENAI_BASE_URL points at it"
    )]
    Connect {
        /// The endpoint (no credentials).
        url: String,
        /// What the network layer said.
        reason: String,
    },
    /// The server did not answer (or finish a non-streamed answer) in time.
    #[error(
        "the model server did not answer within {}s; raise the request timeout or check the server's load",
        .after.as_secs_f64()
    )]
    Timeout {
        /// The timeout that expired.
        after: Duration,
    },
    /// A stream went silent for longer than the idle timeout.
    #[error(
        "the model stream sent nothing for {}s; the server may be stuck or overloaded (raise the idle timeout if it is slow)",
        .after.as_secs_f64()
    )]
    IdleTimeout {
        /// The idle timeout that expired.
        after: Duration,
    },
    /// A stream took longer in total than the stream timeout.
    #[error(
        "the model stream was still running after {}s; ask for a shorter answer or raise the stream timeout",
        .after.as_secs_f64()
    )]
    StreamTimeout {
        /// The stream timeout that expired.
        after: Duration,
    },
    /// The caller cancelled the call (run ended or cancelled).
    #[error("the model call was cancelled before it finished")]
    Cancelled,
    /// The server answered with an error status that is not retried, or retries ran out.
    #[error("the model server answered HTTP {status} after {attempts} attempt(s): {body}")]
    Status {
        /// The HTTP status code.
        status: u16,
        /// How many attempts were made.
        attempts: u32,
        /// The start of the body (the server's message), cut.
        body: String,
    },
    /// The server asked to wait longer than the client is configured to.
    #[error(
        "the model server is rate limiting and asked to wait {}s, more than the {}s allowed; try later or raise the longest honoured Retry-After",
        .retry_after.as_secs_f64(), .max.as_secs_f64()
    )]
    RetryAfterTooLong {
        /// What the server asked for.
        retry_after: Duration,
        /// The configured ceiling.
        max: Duration,
    },
    /// What arrived is not an OpenAI-compatible chat completion (HTML, non-JSON, wrong shape).
    #[error(
        "the model server sent something that is not an OpenAI-compatible chat completion ({what}); it began with: {excerpt}; check that the base URL points at a /v1 API"
    )]
    Malformed {
        /// What was expected or wrong.
        what: String,
        /// The start of what arrived, cut.
        excerpt: String,
    },
    /// The response is larger than the configured limit.
    #[error(
        "the model server sent more than {limit} bytes; ask for a shorter answer or raise the response size limit"
    )]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// A stream line is longer than the configured limit.
    #[error(
        "the model stream sent a line longer than {limit} bytes without ending it; the server is not sending server-sent events, or raise the line limit"
    )]
    LineTooLong {
        /// The limit in bytes.
        limit: usize,
    },
    /// More tool calls than the configured limit.
    #[error(
        "the model asked for more than {limit} tool calls in one answer; raise the tool call limit or constrain the model"
    )]
    TooManyToolCalls {
        /// The limit.
        limit: usize,
    },
    /// The server reported an error inside the stream.
    #[error("the model server reported an error mid-stream: {message}")]
    ServerError {
        /// The server's message, cut.
        message: String,
    },
    /// The stream ended before the answer was complete.
    #[error(
        "the model stream ended before the answer was complete (no finish reason and no [DONE]) after {received_bytes} bytes, the last event being {last_event}; the connection was cut or the server crashed"
    )]
    Truncated {
        /// How many bytes had arrived.
        received_bytes: usize,
        /// The last event's data, cut (or `(none)`).
        last_event: String,
    },
    /// The model still called tools when the loop's rounds ran out.
    #[error(
        "the model still called tools after {rounds} rounds; raise the round limit or give the model clearer tools"
    )]
    ToolRoundsExhausted {
        /// The round limit.
        rounds: u32,
    },
    /// The connection failed while the body was being read.
    #[error("the connection to the model server failed while reading the answer: {reason}")]
    Transport {
        /// What the network layer said.
        reason: String,
    },
}

impl LlmError {
    /// A stable code for the kind of error, for logs, metrics and tests.
    pub fn code(&self) -> &'static str {
        match self {
            LlmError::InvalidConfig { .. } => "LLM_CONFIG",
            LlmError::Connect { .. } => "LLM_CONNECT",
            LlmError::Timeout { .. } => "LLM_TIMEOUT",
            LlmError::IdleTimeout { .. } => "LLM_IDLE_TIMEOUT",
            LlmError::StreamTimeout { .. } => "LLM_STREAM_TIMEOUT",
            LlmError::Cancelled => "LLM_CANCELLED",
            LlmError::Status { .. } => "LLM_STATUS",
            LlmError::RetryAfterTooLong { .. } => "LLM_RETRY_AFTER_TOO_LONG",
            LlmError::Malformed { .. } => "LLM_MALFORMED",
            LlmError::TooLarge { .. } => "LLM_TOO_LARGE",
            LlmError::LineTooLong { .. } => "LLM_LINE_TOO_LONG",
            LlmError::TooManyToolCalls { .. } => "LLM_TOO_MANY_TOOL_CALLS",
            LlmError::ServerError { .. } => "LLM_SERVER_ERROR",
            LlmError::Truncated { .. } => "LLM_TRUNCATED",
            LlmError::ToolRoundsExhausted { .. } => "LLM_TOOL_ROUNDS_EXHAUSTED",
            LlmError::Transport { .. } => "LLM_TRANSPORT",
        }
    }

    pub(crate) fn malformed(what: impl Into<String>, arrived: &[u8], max: usize) -> LlmError {
        LlmError::Malformed {
            what: what.into(),
            excerpt: excerpt(arrived, max),
        }
    }
}

/// The start of `bytes` as a quoted, escaped string of at most about `max` bytes, with a
/// marker when cut. Safe to put in a message: control characters are escaped.
pub fn excerpt(bytes: &[u8], max: usize) -> String {
    let cut = bytes.len() > max;
    let head = &bytes[..bytes.len().min(max)];
    let text = String::from_utf8_lossy(head);
    let mut quoted = format!("{:?}", text.trim_end_matches('\u{fffd}'));
    if cut {
        quoted.push_str(&format!(" (cut, {} bytes in all)", bytes.len()));
    }
    quoted
}

/// An error and its causes, joined (`error sending request: connection refused`).
pub(crate) fn chain(error: reqwest::Error) -> String {
    use std::error::Error as _;
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpt_cuts_and_escapes() {
        assert_eq!(excerpt(b"<html>\n", 100), "\"<html>\\n\"");
        let long = vec![b'a'; 50];
        assert_eq!(excerpt(&long, 4), "\"aaaa\" (cut, 50 bytes in all)");
        // A multi-byte character cut in half is dropped, not shown as garbage.
        assert_eq!(excerpt("é".as_bytes(), 1), "\"\" (cut, 2 bytes in all)");
    }

    #[test]
    fn codes_are_stable() {
        assert_eq!(LlmError::Cancelled.code(), "LLM_CANCELLED");
        assert_eq!(
            LlmError::Truncated {
                received_bytes: 1,
                last_event: "(none)".to_owned()
            }
            .code(),
            "LLM_TRUNCATED"
        );
    }
}
