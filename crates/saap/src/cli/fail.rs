//! How a command of the agent's command line fails ([`Fail`]): a message and its exit code
//! (2: the input was wrong, 3: something inside failed; docs/cli.md). Must not print: the
//! entry point does.

use crate::engine::EngineError;

/// A failure with its exit code.
pub(super) struct Fail {
    pub(super) code: u8,
    pub(super) message: String,
}

pub(super) fn invalid(message: impl Into<String>) -> Fail {
    Fail {
        code: 2,
        message: message.into(),
    }
}

pub(super) fn internal(message: impl Into<String>) -> Fail {
    Fail {
        code: 3,
        message: message.into(),
    }
}

pub(super) fn io(e: std::io::Error) -> Fail {
    internal(format!("cannot write the output: {e}"))
}

pub(super) fn engine_fail(e: EngineError) -> Fail {
    match e {
        EngineError::Store(_) | EngineError::Core { .. } | EngineError::Replay { .. } => {
            internal(e.to_string())
        }
        _ => invalid(e.to_string()),
    }
}
