//! The errors that stop `saap check` on Python source before any agent is analysed: the
//! input cannot be read, is too large, is not Python, does not parse, or holds no agent.
//!
//! Each variant has a stable code ([`PythonError::code`]) and a message that says what was
//! wrong and what to do. Problems *inside* an agent (an annotation that cannot be followed, a
//! constraint broken) are findings, not errors: they are in [`crate::rules`].

use std::path::PathBuf;

/// Why Python source could not be analysed.
#[derive(Debug, thiserror::Error)]
pub enum PythonError {
    #[error("cannot read `{path}`: {source}; check the path")]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "`{path}` is not a Python file or package folder; give a `.py` file or a folder of them"
    )]
    NotPython { path: PathBuf },
    #[error("`{path}` is larger than {max} bytes, the limit per file; check a smaller module")]
    FileTooLarge { path: PathBuf, max: u64 },
    #[error(
        "`{path}` holds more than {max} Python files; point `saap check` at the agent's own package"
    )]
    TooManyFiles { path: PathBuf, max: usize },
    #[error("`{path}`: not UTF-8 text; save the file as UTF-8")]
    NotUtf8 { path: PathBuf },
    #[error(
        "{file}:{line}:{column}: syntax error: {message}{more}; fix the syntax (the file must run under Python 3)"
    )]
    Syntax {
        file: String,
        line: u32,
        column: u32,
        message: String,
        /// ` (and N more)` when the parser found several errors.
        more: String,
    },
    #[error(
        "{file}: brackets or blocks nest deeper than {max} levels; saap does not analyse such code"
    )]
    TooDeep { file: String, max: usize },
    #[error(
        "{file}: a statement has more than {max} tokens; saap does not analyse such code (split the expression)"
    )]
    TooComplex { file: String, max: usize },
    #[error(
        "the analysis stopped unexpectedly ({what}); this is a bug in saap, please report it with the input"
    )]
    Internal { what: String },
    #[error(
        "no agent class in `{path}`: an agent class derives from `Agent` and has `@step` methods{hint}"
    )]
    NoAgent { path: PathBuf, hint: String },
}

impl PythonError {
    /// A stable code for the error family.
    pub fn code(&self) -> &'static str {
        match self {
            PythonError::Unreadable { .. } => "SAAP-P001",
            PythonError::NotPython { .. } => "SAAP-P002",
            PythonError::FileTooLarge { .. } => "SAAP-P003",
            PythonError::TooManyFiles { .. } => "SAAP-P004",
            PythonError::NotUtf8 { .. } => "SAAP-P005",
            PythonError::Syntax { .. } => "SAAP-P006",
            PythonError::TooDeep { .. } => "SAAP-P007",
            PythonError::NoAgent { .. } => "SAAP-P008",
            PythonError::TooComplex { .. } => "SAAP-P009",
            PythonError::Internal { .. } => "SAAP-P010",
        }
    }
}
