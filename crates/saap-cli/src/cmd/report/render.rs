//! The report as Markdown, in the order of seed 000's "Report Template": Agent, Event DAG,
//! Symptom, Root Cause, Evidence, Fix, Verification, then what was checked.
//!
//! Only formats a [`Report`]; must not gather or decide anything.

use super::model::{Report, Verdict};
use std::fmt::Write as _;

/// The Markdown report.
pub fn markdown(r: &Report) -> String {
    let mut o = String::new();
    let a = &r.agent;
    let _ = writeln!(o, "## Debug Report: {}\n", a.class);

    let _ = writeln!(o, "### Agent");
    let _ = writeln!(o, "- **Class**: `{}` at {}", a.class, a.location);
    match &a.config {
        Some(c) => {
            let _ = writeln!(o, "- **Config**: `{}` at {}", c.name, c.location);
        }
        None if a.input_kind == "spec" => {
            let _ = writeln!(o, "- **Config**: none (a spec file has no config class)");
        }
        None => {
            let _ = writeln!(o, "- **Config**: no config class found in {}", a.input);
        }
    }
    let _ = writeln!(o, "- **Steps**: {} steps, {} events\n", a.steps, a.events);

    let _ = writeln!(o, "### Event DAG");
    for s in &r.dag {
        let opts = if s.options.is_empty() {
            String::new()
        } else {
            format!(" [{}]", s.options.join(", "))
        };
        let outs = if s.outputs.is_empty() {
            "nothing".to_string()
        } else {
            s.outputs.join(" | ")
        };
        let _ = writeln!(o, "- `{}`({}) → {outs}{opts}", s.step, s.inputs.join(", "));
    }
    let _ = writeln!(o);

    let _ = writeln!(o, "### Symptom");
    let s = &r.symptom;
    let _ = write!(
        o,
        "{} (`--symptom {}`)",
        capitalize(&s.description),
        s.symptom.as_str()
    );
    if let Some(step) = &s.step {
        let _ = write!(o, " at step `{step}`");
    }
    if let Some(run) = &s.run {
        let _ = write!(o, ", run `{run}`");
    }
    let _ = writeln!(o, "\n");

    let _ = writeln!(o, "### Root Cause");
    let _ = writeln!(o, "{}\n", r.conclusion);
    for c in &r.root_causes {
        let mut head = Vec::new();
        if !c.rule.is_empty() {
            head.push(format!("**{}**", c.rule));
        }
        head.push(c.constraint.clone());
        if let Some(code) = &c.code {
            head.push(format!("`{code}`"));
        }
        let _ = writeln!(o, "- {}", head.join(" — "));
        if let Some(l) = &c.location {
            let _ = writeln!(o, "  - at `{l}`");
        }
        let _ = writeln!(o, "  - {}", c.message);
        let _ = writeln!(o, "  - why: {}", c.why);
    }
    if !r.root_causes.is_empty() {
        let _ = writeln!(o);
    }

    let _ = writeln!(o, "### Evidence");
    if r.evidence.is_empty() {
        let _ = writeln!(o, "None of the tools shows the symptom.\n");
    }
    for e in &r.evidence {
        let cmd = e
            .command
            .as_deref()
            .map(|c| format!(" (`{c}`)"))
            .unwrap_or_default();
        let _ = writeln!(o, "- **{}**{cmd}: {}", e.tool, e.summary);
        if !e.details.is_empty() {
            let _ = writeln!(o, "  ```text");
            for d in &e.details {
                let _ = writeln!(o, "  {d}");
            }
            let _ = writeln!(o, "  ```");
        }
    }
    if !r.evidence.is_empty() {
        let _ = writeln!(o);
    }

    let _ = writeln!(o, "### Fix");
    if r.fixes.is_empty() {
        let _ = writeln!(
            o,
            "{}\n",
            match r.verdict {
                Verdict::CauseFound => "No fix is known to the tools for this cause.",
                Verdict::NoCauseFound => "Nothing to fix: no cause was found.",
            }
        );
    }
    for f in &r.fixes {
        let tag = match (&f.code, &f.step) {
            (Some(c), Some(s)) => format!("`{c}` on `{s}`: "),
            (Some(c), None) => format!("`{c}`: "),
            (None, Some(s)) => format!("`{s}`: "),
            (None, None) => String::new(),
        };
        let _ = writeln!(o, "- {tag}{}", f.text);
        if let Some(ch) = &f.change {
            let at = ch
                .location
                .as_deref()
                .map(|l| format!(" (`{l}`)"))
                .unwrap_or_default();
            let _ = writeln!(o, "\n  Before{at}:\n");
            code_block(&mut o, &ch.language, &ch.before);
            for v in &ch.after {
                let _ = writeln!(o, "\n  After — {}:\n", v.label);
                code_block(&mut o, &ch.language, &v.code);
            }
        }
        if let Some(c) = &f.checked_in_memory {
            let _ = writeln!(o, "\n  Checked: {c}.");
        }
    }
    if !r.fixes.is_empty() {
        let _ = writeln!(o);
    }

    let _ = writeln!(o, "### Verification");
    if r.verification.commands.is_empty() && r.verification.test_assertion.is_none() {
        let _ = writeln!(o, "Nothing to verify: no cause was found.");
    }
    for c in &r.verification.commands {
        let _ = writeln!(o, "- `{}` — {}", c.command, c.expect);
    }
    if let Some(t) = &r.verification.test_assertion {
        let _ = writeln!(o, "\nThe guide's test-runner assertion:\n");
        code_block(&mut o, "python", t);
    }
    let _ = writeln!(o);

    let _ = writeln!(o, "### What was checked");
    for c in &r.checked {
        let _ = writeln!(o, "- {c}");
    }
    o
}

fn code_block(o: &mut String, lang: &str, code: &str) {
    let _ = writeln!(o, "  ```{lang}");
    for l in code.lines() {
        if l.is_empty() {
            let _ = writeln!(o);
        } else {
            let _ = writeln!(o, "  {l}");
        }
    }
    let _ = writeln!(o, "  ```");
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}
