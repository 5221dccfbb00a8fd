//! A JSON argument of the command line: inline, or `@FILE` / `-` read with a size bound.

use super::fail::{Fail, invalid};
use serde_json::Value;
use std::io::Read;

/// Largest start event accepted on the command line or from a file, in bytes.
pub const MAX_START_EVENT_BYTES: u64 = 1024 * 1024;

/// Reads a JSON argument: literal text, `@FILE` or `-` (stdin), bounded.
pub(super) fn json_arg(flag: &str, src: &str) -> Result<(String, Value), Fail> {
    let (what, text) = if src == "-" {
        let mut buf = String::new();
        std::io::stdin()
            .take(MAX_START_EVENT_BYTES + 1)
            .read_to_string(&mut buf)
            .map_err(|e| invalid(format!("cannot read {flag} from stdin: {e}")))?;

        ("stdin".to_string(), buf)
    } else if let Some(file) = src.strip_prefix('@') {
        let mut buf = String::new();
        std::fs::File::open(file)
            .map_err(|e| invalid(format!("cannot open {flag} file `{file}`: {e}")))?
            .take(MAX_START_EVENT_BYTES + 1)
            .read_to_string(&mut buf)
            .map_err(|e| invalid(format!("cannot read {flag} file `{file}`: {e}")))?;
        (file.to_string(), buf)
    } else {
        (flag.to_string(), src.to_string())
    };
    if text.len() as u64 > MAX_START_EVENT_BYTES {
        return Err(invalid(format!(
            "{what}: larger than {MAX_START_EVENT_BYTES} bytes; pass large data by reference"
        )));
    }
    let value: Value = serde_json::from_str(&text).map_err(|e| {
        invalid(format!(
            "{what}:{}:{}: not valid JSON: {e}",
            e.line(),
            e.column()
        ))
    })?;
    Ok((what, value))
}
