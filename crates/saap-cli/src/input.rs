//! Reading spec files for the commands: size-bounded, symlink-aware, with errors that name
//! the file and the location (`file:line:column` or `file: json.path`).

use saap_dispatch::{CompiledSpec, SpecError, SpecSyntax, compile_spec_text, load::MAX_SPEC_BYTES};
use std::fmt;
use std::io::Read;
use std::path::Path;

/// Invalid input: exit code 2.
#[derive(Debug)]
pub struct InvalidInput(pub String);

impl fmt::Display for InvalidInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for InvalidInput {}

/// Maps an error to the documented exit code.
pub fn exit_code_for(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<InvalidInput>().is_some() {
        2
    } else {
        3
    }
}

/// Reads and compiles a spec file (`-` reads stdin).
/// Largest history file accepted.
const MAX_HISTORY_BYTES: u64 = 256 * 1024 * 1024;

/// The run a history file records (as `simulate --history-out` or an agent's
/// `show --history-out` write it), rebuilt through the core against `spec` (read from
/// `spec_path`, named in errors).
pub fn load_history_run(
    path: &Path,
    spec: std::sync::Arc<CompiledSpec>,
    spec_path: &Path,
) -> anyhow::Result<saap_dispatch::Run> {
    let mut text = String::new();
    std::fs::File::open(path)
        .map_err(|e| InvalidInput(format!("cannot open history `{}`: {e}", path.display())))?
        .take(MAX_HISTORY_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| InvalidInput(format!("cannot read history `{}`: {e}", path.display())))?;
    let history: saap_dispatch::replay::History = serde_json::from_str(&text).map_err(|e| {
        InvalidInput(format!(
            "{}:{}:{}: not a history file: {e}",
            path.display(),
            e.line(),
            e.column()
        ))
    })?;
    Ok(history.replay(spec).map_err(|e| {
        InvalidInput(format!(
            "{}: cannot replay this history against `{}`: {e}",
            path.display(),
            spec_path.display()
        ))
    })?)
}

pub fn load_spec(path: &Path) -> anyhow::Result<CompiledSpec> {
    let (name, text) = read_text(path)?;
    let syntax = SpecSyntax::detect(Some(&name), &text);
    compile_spec_text(&text, syntax).map_err(|e| located(&name, &e).into())
}

fn located(name: &str, e: &SpecError) -> InvalidInput {
    let msg = match e {
        SpecError::Syntax {
            line,
            column,
            message,
        } => format!("{name}:{line}:{column}: {message} [{}]", e.code()),
        SpecError::Invalid { path, message } => {
            format!("{name}: at `{path}`: {message} [{}]", e.code())
        }
        SpecError::TooLarge { .. } => format!("{name}: {e} [{}]", e.code()),
    };
    InvalidInput(msg)
}

fn read_text(path: &Path) -> anyhow::Result<(String, String)> {
    let name = path.display().to_string();
    let mut buf = Vec::new();
    if name == "-" {
        std::io::stdin()
            .take(MAX_SPEC_BYTES as u64 + 1)
            .read_to_end(&mut buf)
            .map_err(|e| InvalidInput(format!("cannot read the spec from stdin: {e}")))?;
    } else {
        let file = std::fs::File::open(path).map_err(|e| {
            InvalidInput(format!(
                "cannot open spec file `{name}`: {e}; check the path (use - for stdin)"
            ))
        })?;
        file.take(MAX_SPEC_BYTES as u64 + 1)
            .read_to_end(&mut buf)
            .map_err(|e| InvalidInput(format!("cannot read spec file `{name}`: {e}")))?;
    }
    if buf.len() > MAX_SPEC_BYTES {
        return Err(InvalidInput(format!(
            "{name}: the spec is larger than {MAX_SPEC_BYTES} bytes; split the workflow"
        ))
        .into());
    }
    let text = String::from_utf8(buf)
        .map_err(|e| InvalidInput(format!("{name}: not UTF-8 text ({e})")))?;
    Ok((name, text))
}
