//! `saap check agent.py` / `saap check package/`: the checks on Python agent source
//! (`saap-python`), printed like the spec check's report with `file:line:column` on every
//! finding, or as JSON. Same exit codes: 0 no errors, 1 errors (or denied warnings), 2 input
//! that cannot be read or parsed, or holds no agent.
//!
//! Only the output lives here; reading and analysing the source is `saap-python`'s.

use crate::input::InvalidInput;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

pub fn run(path: &Path, json: bool, deny_warnings: bool) -> anyhow::Result<ExitCode> {
    let report =
        saap_python::check_path(path).map_err(|e| InvalidInput(format!("{e} [{}]", e.code())))?;
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        out.write_all(saap_python::render::render(&report).as_bytes())?;
    }
    out.flush()?;
    let s = report.summary;
    let failed = s.errors > 0 || (deny_warnings && s.warnings > 0);
    if failed && deny_warnings && s.errors == 0 {
        eprintln!("saap check: warnings are denied (--deny warnings)");
    }
    Ok(ExitCode::from(u8::from(failed)))
}
