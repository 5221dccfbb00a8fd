//! The report of `saap explain`, as text or JSON, for a simulated, a history-file or a
//! recorded run alike (`explain` and `explain --run` print through here, so their outputs
//! have one shape).
//!
//! Must not decide or read anything: the explanation is `saap-dispatch`'s.

use crate::input::InvalidInput;
use saap_dispatch::explain::{CutOff, explain_run};
use saap_dispatch::render::EventLabels;
use saap_dispatch::{CompiledSpec, Run};
use serde_json::{Map, Value};
use std::io::Write;

/// At most this many executions of one step are listed in the text report.
const MAX_LISTED: usize = 10;

/// The steps named by `--step` (all when none is named), or which name is unknown.
pub fn selected_steps(spec: &CompiledSpec, names: &[String]) -> Result<Vec<u32>, InvalidInput> {
    if names.is_empty() {
        return Ok((0..spec.steps.len() as u32).collect());
    }
    names
        .iter()
        .map(|name| {
            spec.step_index(name).ok_or_else(|| {
                let known: Vec<&str> = spec.steps.iter().map(|s| s.name.as_str()).collect();
                InvalidInput(format!(
                    "no step is named `{name}`; the steps are: {}",
                    known.join(", ")
                ))
            })
        })
        .collect()
}

/// What a report says besides the explanation: extra JSON fields (after the standard ones) and
/// extra text sections (after the steps).
#[derive(Default)]
pub struct Extra {
    pub json: Map<String, Value>,
    pub text: String,
}

/// Explains `run` and prints the report.
#[allow(clippy::too_many_arguments)]
pub fn print(
    spec: &CompiledSpec,
    run: &Run,
    labels: &EventLabels,
    steps: &[u32],
    brief: bool,
    source: &str,
    cut_off: Option<CutOff>,
    json: bool,
    extra: Extra,
) -> anyhow::Result<()> {
    let explained = explain_run(run, labels, steps, cut_off);
    if let Some(c) = &explained.cut_off {
        eprintln!("warning: {}", c.message);
    }
    let mut out = std::io::stdout().lock();
    if json {
        let mut doc = serde_json::json!({
            "spec": spec.name,
            "source": source,
            "cut_off": explained.cut_off,
            "cycle": explained.cycle,
            "steps": explained.steps,
        });
        if let Value::Object(m) = &mut doc {
            m.extend(extra.json);
        }
        serde_json::to_writer_pretty(&mut out, &doc)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(out, "explain {} ({source})", spec.name)?;
    if let Some(c) = &explained.cut_off {
        writeln!(out, "warning: {}", c.message)?;
    }
    if let Some(c) = &explained.cycle {
        let code = c.code.map_or(String::new(), |code| format!(" [{code}]"));
        writeln!(out)?;
        writeln!(out, "loop{code}: {}", c.message)?;
        writeln!(
            out,
            "  the last execution ends a chain of {} executions, each started by what the one before it returned",
            c.chain
        )?;
        writeln!(out, "  fix: {}", c.fix)?;
    }
    for e in &explained.steps {
        writeln!(out)?;
        writeln!(out, "{}", e.summary)?;
        if brief && e.executions == 1 {
            continue;
        }
        for f in e.fired.iter().take(MAX_LISTED) {
            let pre = match f.precondition {
                Some(true) => " (precondition held)",
                _ => "",
            };
            writeln!(
                out,
                "  {} on {} (from {}){pre}: {}",
                f.execution,
                f.trigger,
                f.trigger_from,
                f.bindings.join(", ")
            )?;
            for why in &f.new_because {
                writeln!(out, "      new input set: {why}")?;
            }
        }
        if e.fired.len() > MAX_LISTED {
            writeln!(
                out,
                "  … {} more executions (see --json)",
                e.fired.len() - MAX_LISTED
            )?;
        }
        if e.executions == 0 {
            for s in e.skipped.iter().take(10) {
                writeln!(out, "  candidate on {}: skipped — {}", s.trigger, s.reason)?;
            }
            if e.skipped.len() > 10 {
                writeln!(out, "  … {} more skips (see --json)", e.skipped.len() - 10)?;
            }
            for m in &e.still_missing {
                writeln!(out, "  at the end: {m}")?;
            }
        }
        for a in &e.advice {
            writeln!(out, "  fix: {a}")?;
        }
    }
    out.write_all(extra.text.as_bytes())?;
    Ok(())
}
