//! What can go wrong configuring or exporting, with stable codes (`SAAP-T001`…) and messages
//! that say what was wrong and what to do. Messages must never contain a header value (they
//! carry API keys): only header names.

use std::time::Duration;

/// A configuration that cannot be used.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The endpoint is not an http(s) URL with a host.
    #[error(
        "SAAP-T001: the OTLP endpoint `{endpoint}` cannot be used: {reason}; give an http:// or \
         https:// URL with a host, e.g. http://127.0.0.1:6006/v1/traces (Phoenix) or \
         http://127.0.0.1:4318 (a collector; /v1/traces is added)"
    )]
    Endpoint {
        /// What was given.
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A header name or value is not valid HTTP.
    #[error(
        "SAAP-T002: the header `{name}` cannot be sent: {reason}; header names are letters, \
         digits and `-`, values printable ASCII (percent-encode others in \
         OTEL_EXPORTER_OTLP_HEADERS)"
    )]
    Header {
        /// The header's name (never its value).
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// The OTLP protocol asked for is not HTTP/protobuf.
    #[error(
        "SAAP-T003: OTLP protocol `{protocol}` is not supported: saap exports over HTTP with \
         protobuf only (not grpc, not http/json); set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf \
         or unset it, and point the endpoint at the receiver's HTTP port (4318 for a collector)"
    )]
    Protocol {
        /// What was asked for.
        protocol: String,
    },
}

/// An export that did not happen.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum ExportError {
    /// The receiver answered with an error status.
    #[error(
        "SAAP-T004: the OTLP receiver at {url} refused the spans with HTTP {status}: {body}; \
         check the endpoint's path (…/v1/traces) and the auth headers"
    )]
    Refused {
        /// The endpoint.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The first 200 bytes of its answer.
        body: String,
    },
    /// The receiver could not be reached (after retries).
    #[error(
        "SAAP-T005: cannot reach the OTLP receiver at {url}: {reason}; is the collector \
         running at {url}?"
    )]
    Unreachable {
        /// The endpoint.
        url: String,
        /// What failed (connection refused, timeout, server busy…).
        reason: String,
    },
    /// A flush or shutdown did not finish in time.
    #[error(
        "SAAP-T006: the exporter's {what} did not finish within {waited:?}; the receiver is slow \
         or down: spans still queued are sent later (or dropped at shutdown); wait longer or \
         check the receiver"
    )]
    Timeout {
        /// `flush` or `shutdown`.
        what: &'static str,
        /// How long it waited.
        waited: Duration,
    },
    /// The exporter is stopped.
    #[error(
        "SAAP-T007: the exporter is stopped (shut down, or its thread ended); start a new \
         Exporter to export again"
    )]
    Stopped,
    /// The exporter could not be started.
    #[error(
        "SAAP-T008: the exporter could not start: {reason}; check the TLS setup and that the \
         process may start threads"
    )]
    Start {
        /// What failed.
        reason: String,
    },
}

impl ConfigError {
    /// The stable code (`SAAP-T001`…).
    pub fn code(&self) -> &'static str {
        match self {
            ConfigError::Endpoint { .. } => "SAAP-T001",
            ConfigError::Header { .. } => "SAAP-T002",
            ConfigError::Protocol { .. } => "SAAP-T003",
        }
    }
}

impl ExportError {
    /// The stable code (`SAAP-T004`…).
    pub fn code(&self) -> &'static str {
        match self {
            ExportError::Refused { .. } => "SAAP-T004",
            ExportError::Unreachable { .. } => "SAAP-T005",
            ExportError::Timeout { .. } => "SAAP-T006",
            ExportError::Stopped => "SAAP-T007",
            ExportError::Start { .. } => "SAAP-T008",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_start_with_their_code() {
        let errors: Vec<(String, &str)> = vec![
            (
                ConfigError::Endpoint {
                    endpoint: "x".into(),
                    reason: "r".into(),
                }
                .to_string(),
                "SAAP-T001",
            ),
            (
                ConfigError::Protocol {
                    protocol: "grpc".into(),
                }
                .to_string(),
                "SAAP-T003",
            ),
            (
                ExportError::Stopped.to_string(),
                ExportError::Stopped.code(),
            ),
            (
                ExportError::Unreachable {
                    url: "http://h/v1/traces".into(),
                    reason: "refused".into(),
                }
                .to_string(),
                "SAAP-T005",
            ),
        ];
        for (message, code) in errors {
            assert!(message.starts_with(code), "{message}");
        }
        assert!(
            ExportError::Unreachable {
                url: "http://h/v1/traces".into(),
                reason: "refused".into()
            }
            .to_string()
            .contains("is the collector running at http://h/v1/traces?")
        );
    }
}
