//! Stable error codes. Every error a user sees has a code, a message saying what was wrong,
//! and a hint saying what to do. The code determines the process exit code.

use serde::{Deserialize, Serialize};

/// Stable, documented error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    InvalidArguments,
    UnsupportedLanguage,
    InvalidCursor,
    InvalidSnapshot,
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
        Self::InvalidCursor,
        Self::InvalidSnapshot,
        Self::QueryInvalid,
        Self::QueryFailed,
        Self::QueryLimitExceeded,
        Self::VersionIncompatible,
        Self::ServiceUnavailable,
        Self::SessionNotFound,
        Self::EvidenceMalformed,
        Self::StateUnsafe,
    ];

    /// Process exit code for this error (seed §2.3 "Exit codes", plus exit 1 for a stale or
    /// invalid continuation token, as the original implementation does).
    pub fn exit_code(self) -> i32 {
        match self {
            Self::InvalidCursor | Self::InvalidSnapshot => 1,
            Self::InvalidArguments
            | Self::UnsupportedLanguage
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
            Self::InvalidCursor => "INVALID_CURSOR",
            Self::InvalidSnapshot => "INVALID_SNAPSHOT",
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

/// Finer reasons carried in `error.reason` (the code is what a consumer switches on).
pub mod reason {
    /// A session id that is not a canonical lowercase UUID (`INVALID_ARGUMENTS`).
    pub const INVALID_SESSION_ID: &str = "INVALID_SESSION_ID";
    /// A cursor or snapshot issued before the session was reset.
    pub const STALE_CURSOR: &str = "STALE_CURSOR";
    pub const STALE_SNAPSHOT: &str = "STALE_SNAPSHOT";
    /// A cursor or snapshot that does not decode (not copied exactly as printed).
    pub const MALFORMED_TOKEN: &str = "MALFORMED_TOKEN";
    /// A cursor or snapshot printed for another session.
    pub const OTHER_SESSION: &str = "OTHER_SESSION";
    /// A cursor used with a different program, `--slurp` or `--hypothesis` selection.
    pub const QUERY_MISMATCH: &str = "QUERY_MISMATCH";
    /// Every reason, for the reference documentation.
    pub const ALL: [&str; 6] = [
        INVALID_SESSION_ID,
        STALE_CURSOR,
        STALE_SNAPSHOT,
        MALFORMED_TOKEN,
        OTHER_SESSION,
        QUERY_MISMATCH,
    ];
}

/// A user-facing error: code + what went wrong + what to do, and optionally a finer reason.
#[derive(Debug, Clone, thiserror::Error, Serialize, Deserialize, PartialEq, Eq)]
#[error("{message}")]
pub struct DmError {
    pub code: ErrorCode,
    pub message: String,
    pub hint: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl DmError {
    pub fn new(code: ErrorCode, message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            hint: hint.into(),
            reason: None,
        }
    }

    /// The same error with a finer reason (`error.reason` in the JSON envelope).
    #[must_use]
    pub fn with_reason(mut self, reason: &str) -> Self {
        self.reason = Some(reason.to_owned());
        self
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
