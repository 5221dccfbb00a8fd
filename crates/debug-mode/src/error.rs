//! Stable error codes. Every error a user sees has a code, a message saying what was wrong,
//! and a hint saying what to do. The code determines the process exit code.

use serde::{Deserialize, Serialize};

/// Stable, documented error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    InvalidArguments,
    UnsupportedLanguage,
    InvalidSessionId,
    InvalidCursor,
    QueryInvalid,
    QueryFailed,
    QueryLimitExceeded,
    VersionIncompatible,
    ServiceUnavailable,
    SessionNotFound,
    EvidenceMalformed,
    StateUnsafe,
}

impl ErrorCode {
    /// Every code (the reference documents each one).
    pub const ALL: [Self; 12] = [
        Self::InvalidArguments,
        Self::UnsupportedLanguage,
        Self::InvalidSessionId,
        Self::InvalidCursor,
        Self::QueryInvalid,
        Self::QueryFailed,
        Self::QueryLimitExceeded,
        Self::VersionIncompatible,
        Self::ServiceUnavailable,
        Self::SessionNotFound,
        Self::EvidenceMalformed,
        Self::StateUnsafe,
    ];

    /// Process exit code for this error (seed §2.3 "Exit codes").
    pub fn exit_code(self) -> i32 {
        match self {
            Self::InvalidArguments
            | Self::UnsupportedLanguage
            | Self::InvalidSessionId
            | Self::InvalidCursor
            | Self::QueryInvalid
            | Self::QueryFailed
            | Self::QueryLimitExceeded => 2,
            Self::VersionIncompatible => 3,
            Self::ServiceUnavailable => 4,
            Self::SessionNotFound => 5,
            Self::EvidenceMalformed | Self::StateUnsafe => 6,
        }
    }

    /// The code as it appears in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidArguments => "INVALID_ARGUMENTS",
            Self::UnsupportedLanguage => "UNSUPPORTED_LANGUAGE",
            Self::InvalidSessionId => "INVALID_SESSION_ID",
            Self::InvalidCursor => "INVALID_CURSOR",
            Self::QueryInvalid => "QUERY_INVALID",
            Self::QueryFailed => "QUERY_FAILED",
            Self::QueryLimitExceeded => "QUERY_LIMIT_EXCEEDED",
            Self::VersionIncompatible => "VERSION_INCOMPATIBLE",
            Self::ServiceUnavailable => "SERVICE_UNAVAILABLE",
            Self::SessionNotFound => "SESSION_NOT_FOUND",
            Self::EvidenceMalformed => "EVIDENCE_MALFORMED",
            Self::StateUnsafe => "STATE_UNSAFE",
        }
    }
}

/// A user-facing error: code + what went wrong + what to do.
#[derive(Debug, Clone, thiserror::Error, Serialize, Deserialize, PartialEq, Eq)]
#[error("{message}")]
pub struct DmError {
    pub code: ErrorCode,
    pub message: String,
    pub hint: String,
}

impl DmError {
    pub fn new(code: ErrorCode, message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            hint: hint.into(),
        }
    }

    pub fn session_not_found(id: &str) -> Self {
        Self::new(
            ErrorCode::SessionNotFound,
            format!("session {id} does not exist (it was never created or has been cleaned)"),
            "run `debug-mode sessions --all` to list sessions, or `debug-mode create` to start a new one",
        )
    }

    pub fn evidence_io(what: &str, err: &std::io::Error) -> Self {
        Self::new(
            ErrorCode::EvidenceMalformed,
            format!("could not {what}: {err}"),
            "check free disk space and permissions of the debug-mode state directory, then retry",
        )
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(
            ErrorCode::ServiceUnavailable,
            message,
            "retry the command; if it keeps failing run `debug-mode stop` and retry",
        )
    }
}

pub type Result<T, E = DmError> = std::result::Result<T, E>;
