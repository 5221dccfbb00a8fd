//! Language helpers and call templates (filled in below).
use crate::error::{DmError, ErrorCode, Result};

pub const EVENT_SCHEMA: [(&str, &str); 5] = [
    ("hypothesisId", "string"),
    ("location", "string"),
    ("message", "string"),
    ("data", "bounded JSON value"),
    ("timestamp", "Unix epoch milliseconds"),
];

pub struct Template {
    pub language: &'static str,
    pub ingest: &'static str,
    pub data_encoding: &'static str,
    pub helper_placement: &'static str,
    pub region_open: &'static str,
    pub region_close: &'static str,
    pub helper: &'static str,
    pub call: &'static str,
    pub placeholders: &'static [(&'static str, &'static str)],
}

pub fn find(language: &str, ingest: &str) -> Result<Template> {
    Err(DmError::new(
        ErrorCode::UnsupportedLanguage,
        format!("{language} {ingest}"),
        "x",
    ))
}
