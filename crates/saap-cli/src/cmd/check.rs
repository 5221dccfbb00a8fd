//! `saap check SPEC`: the static checks of DESIGN §5 on a workflow spec, as text or JSON.
//! A `.py` file or a folder is Python agent source and goes to [`super::check_python`].
//!
//! Exit codes: 0 no errors (warnings allowed unless `--deny warnings`), 1 findings that
//! count as errors, 2 invalid input (unreadable file, syntax error, unknown event type…).

use crate::input::load_spec;
use saap_dispatch::check::{RULES, check, summarize};
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Which findings to turn into errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Deny {
    /// Warnings count as errors for the exit code.
    Warnings,
}

#[derive(clap::Args)]
#[command(
    after_help = "Each finding names a stable code (SAAP001…SAAP021, see docs/checks.md), the step and
parameter, what is wrong, why it breaks at runtime (rules R1-R6, DESIGN §4) and the fix.

Examples:
  saap check examples/specs/rag.yaml
  saap check examples/python/support_agent/   (a Python agent package; also a .py file)
  saap check examples/specs/optional-trap.yaml --deny warnings
  saap check examples/specs/dangling-stop.yaml --json | jq '.findings[].code'
  saap check --rules                      (list every check)
  cat agent.json | saap check -           (read the spec from stdin)

Exit codes: 0 no errors (warnings allowed unless denied), 1 errors found, 2 invalid input."
)]
pub struct CheckArgs {
    /// The workflow spec (JSON or YAML; `-` for stdin), or Python agent source: a `.py`
    /// file or a package folder.
    #[arg(required_unless_present = "rules")]
    pub spec: Option<PathBuf>,
    /// List every check (code, severity, rule, title) instead of checking a spec; SAAP101…
    /// are the checks only Python agent source shows.
    #[arg(long, conflicts_with = "spec")]
    pub rules: bool,
    /// Print JSON: {spec, name, findings, summary: {errors, warnings}}.
    #[arg(long)]
    pub json: bool,
    /// Treat warnings as errors for the exit code (`--deny warnings`).
    #[arg(long, value_enum)]
    pub deny: Vec<Deny>,
}

pub fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let Some(path) = args.spec.as_ref() else {
        return list_rules(args.json);
    };
    let deny_warnings = args.deny.contains(&Deny::Warnings);
    if path.as_os_str() != "-" && saap_python::is_python_input(path) {
        return super::check_python::run(path, args.json, deny_warnings);
    }
    let spec = load_spec(path)?;
    let findings = check(&spec);
    let summary = summarize(&findings);
    let shown = path.display().to_string();
    let mut out = std::io::stdout().lock();
    if args.json {
        let doc = json!({
            "spec": shown,
            "name": spec.name,
            "findings": findings,
            "summary": summary,
        });
        serde_json::to_writer_pretty(&mut out, &doc)?;
        writeln!(out)?;
    } else {
        // One renderer for `saap check` and every agent's `check` (saap::cli).
        out.write_all(
            saap::cli::render_check(&shown, spec.steps.len(), &findings, summary).as_bytes(),
        )?;
    }
    out.flush()?;
    let failed = summary.errors > 0 || (deny_warnings && summary.warnings > 0);
    if failed && deny_warnings && summary.errors == 0 {
        eprintln!("saap check: warnings are denied (--deny warnings)");
    }
    Ok(ExitCode::from(u8::from(failed)))
}

fn list_rules(json: bool) -> anyhow::Result<ExitCode> {
    // The spec checks, then those only Python source shows (SAAP101…).
    let rules: Vec<_> = RULES.iter().chain(saap_python::rules::RULES).collect();
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &rules)?;
        writeln!(out)?;
    } else {
        for r in rules {
            writeln!(
                out,
                "{}  {:<7}  {:<31}  {}",
                r.code,
                r.severity.as_str(),
                r.rule,
                r.title
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
