//! The human report of `saap check` on Python source: the spec check's layout (severity,
//! code, step, parameter, message, then rule, why and fix), each finding prefixed with
//! `file:line:column`, one summary line per agent and one for the input.
//!
//! Pure formatting: it returns a string and writes nothing.

use crate::{LocatedFinding, Report};
use saap_dispatch::check::Severity;

fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

fn finding(s: &mut String, l: &LocatedFinding) {
    let f = &l.finding;
    s.push_str(&format!("{}: ", l.location));
    f.render_into(s);
}

/// The whole report as text.
pub fn render(r: &Report) -> String {
    let mut s = String::new();
    for sev in [Severity::Error, Severity::Warning] {
        for l in r.findings.iter().filter(|l| l.finding.severity == sev) {
            finding(&mut s, l);
        }
    }
    for a in &r.agents {
        for l in &a.findings {
            finding(&mut s, l);
        }
        if a.findings.is_empty() {
            s.push_str(&format!(
                "{}: agent `{}`: ok, no findings ({} checked)\n",
                a.location,
                a.name,
                plural(a.steps, "step")
            ));
        } else {
            s.push_str(&format!(
                "{}: agent `{}`: {}, {} ({} checked)\n",
                a.location,
                a.name,
                plural(a.summary.errors, "error"),
                plural(a.summary.warnings, "warning"),
                plural(a.steps, "step")
            ));
        }
    }
    s.push_str(&format!(
        "{}: {}, {}: {}, {}\n",
        r.input,
        plural(r.files, "file"),
        plural(r.agents.len(), "agent"),
        plural(r.summary.errors, "error"),
        plural(r.summary.warnings, "warning"),
    ));
    s
}
