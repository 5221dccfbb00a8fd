//! `<agent> check`: every static check of the agent's spec (saap-dispatch's checker), as
//! text or `--json`, with `--deny warnings`.

use super::fail::{Fail, internal, io};
use crate::workflow::Workflow;
use saap_dispatch::check::{Finding, Severity, Summary, check, summarize};
use serde_json::json;
use std::io::Write;
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum Deny {
    /// Warnings count as errors for the exit code.
    Warnings,
}

#[derive(clap::Args)]
#[command(
    after_help = "Each finding names a stable code (SAAP001…, see docs/checks.md), the step and parameter, what is
wrong, why it breaks at runtime and the fix. Same output as `saap check` on the spec.

Exit codes: 0 no errors (warnings allowed unless denied), 1 errors found."
)]
pub(super) struct CheckArgs {
    /// Print JSON: {spec, name, findings, summary: {errors, warnings}}.
    #[arg(long)]
    pub(super) json: bool,
    /// Treat warnings as errors for the exit code (`--deny warnings`).
    #[arg(long, value_enum)]
    pub(super) deny: Vec<Deny>,
}

pub(super) fn check_cmd(workflow: &Workflow, a: &CheckArgs) -> Result<u8, Fail> {
    let spec = workflow.compiled();
    let findings = check(spec);

    let summary = summarize(&findings);
    let shown = format!("agent {}", workflow.name());
    let mut out = std::io::stdout().lock();
    if a.json {
        let doc = json!({
            "spec": shown,
            "name": spec.name,
            "findings": findings,
            "summary": summary,
        });
        serde_json::to_writer_pretty(&mut out, &doc)
            .map_err(|e| internal(format!("cannot write JSON: {e}")))?;
        writeln!(out).map_err(io)?;
    } else {
        out.write_all(render_check(&shown, spec.steps.len(), &findings, summary).as_bytes())
            .map_err(io)?;
    }
    let deny = a.deny.contains(&Deny::Warnings);
    let failed = summary.errors > 0 || (deny && summary.warnings > 0);
    if failed && deny && summary.errors == 0 {
        eprintln!("check: warnings are denied (--deny warnings)");
    }
    Ok(u8::from(failed))
}

/// The human report of `check`: errors, then warnings, each finding with indented `rule:`,
/// `why:` and `fix:` lines, and a summary line. `saap check` prints the same.
pub fn render_check(spec: &str, steps: usize, findings: &[Finding], summary: Summary) -> String {
    let mut s = String::new();
    for sev in [Severity::Error, Severity::Warning] {
        for f in findings.iter().filter(|f| f.severity == sev) {
            f.render_into(&mut s);
        }
    }
    let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    if findings.is_empty() {
        s.push_str(&format!(
            "{spec}: ok, no findings ({} checked)\n",
            plural(steps, "step")
        ));
    } else {
        s.push_str(&format!(
            "{spec}: {}, {} ({} checked)\n",
            plural(summary.errors, "error"),
            plural(summary.warnings, "warning"),
            plural(steps, "step")
        ));
    }
    s
}
