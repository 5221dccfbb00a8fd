//! Fixes and verification: for each root cause the fix as its tool states it, the code change
//! where it is known exactly (the optional trap: the step's own text before, and after with a
//! precondition, an execution limit, or the parameter made required), that change applied to
//! the spec in memory and checked again, and the `saap` commands that must come back clean.
//!
//! Never invents code: a change is shown only when it is derived from the text of the input
//! and the finding. Must not diagnose or render.

use super::model::{CodeChange, Command, Fix, RootCause, Symptom, Variant, Verification};
use super::subject::{InputKind, Subject};
use saap_dispatch::CompiledSpec;
use saap_dispatch::check::check;
use saap_dispatch::sim::{DEFAULT_MAX_COMPLETIONS, Policy, simulate};
use saap_dispatch::spec::{Condition, PreconditionSpec};
use std::sync::Arc;

/// The fixes for `causes`: a finding's fix text, else the advice that came with a cause found
/// at runtime (for the step, or `""` for the agent).
pub fn fixes(
    subject: &Subject,
    causes: &[RootCause],
    runtime_advice: &[(String, String)],
    simulated: &[(String, usize)],
) -> Vec<Fix> {
    let mut out = Vec::new();
    for c in causes {
        let (text, change, checked) = match &c.code {
            Some(code) => {
                let finding = subject.findings.iter().find(|f| {
                    f.finding.code == code && f.finding.step == c.step && f.finding.param == c.param
                });
                let Some(f) = finding else { continue };
                let (change, checked) = match (code.as_str(), &c.step, &c.param) {
                    ("SAAP010", Some(step), Some(param)) => (
                        optional_trap_change(subject, step, param),
                        optional_trap_checked(subject, step, param, simulated),
                    ),
                    _ => (None, None),
                };
                (f.finding.fix.clone(), change, checked)
            }
            None => {
                let advice: Vec<&str> = runtime_advice
                    .iter()
                    .filter(|(s, _)| s.as_str() == c.step.as_deref().unwrap_or(""))
                    .map(|(_, a)| a.as_str())
                    .collect();
                if advice.is_empty() {
                    continue;
                }
                (advice.join("; "), None, None)
            }
        };
        if out.iter().any(|f: &Fix| f.text == text && f.step == c.step) {
            continue;
        }
        out.push(Fix {
            code: c.code.clone(),
            step: c.step.clone(),
            text,
            change,
            checked_in_memory: checked,
        });
    }
    out
}

/// The optional trap's change: the step as written, then with each of the guide's fixes.
fn optional_trap_change(subject: &Subject, step: &str, param: &str) -> Option<CodeChange> {
    let s = subject.spec.source.steps.iter().find(|s| s.name == step)?;
    let p = s.params.iter().find(|p| p.name == param)?;
    let types = p.types.join(" | ");
    let pre = format!("wait_for_{param}");
    let location = subject.step_location(step)?;
    let (file, line) = location.rsplit_once(':')?;
    let line: usize = line.parse().ok()?;
    let text = std::fs::read_to_string(file).ok()?;
    let lines: Vec<&str> = text.lines().collect();
    match subject.kind {
        InputKind::Python => {
            // The decorators above the `def` line, and the signature up to its `:`.
            let def = line.checked_sub(1)?;
            let mut start = def;
            while start > 0 && lines.get(start - 1)?.trim_start().starts_with('@') {
                start -= 1;
            }
            let mut end = def;
            while !lines.get(end)?.trim_end().ends_with(':') {
                end += 1;
                if end > def + 20 {
                    return None;
                }
            }
            let decorators = &lines[start..def];
            let signature = lines[def..=end].join("\n");
            let before = lines[start..=end].join("\n");
            let indent: String = lines[def]
                .chars()
                .take_while(|c| c.is_whitespace())
                .collect();
            let with = |arg: &str| -> Option<String> {
                let mut v: Vec<String> = Vec::new();
                let mut done = false;
                for d in decorators {
                    let t = d.trim();
                    let new = if t == "@step" || t == "@step()" {
                        Some(format!("{indent}@step({arg})"))
                    } else {
                        t.strip_prefix("@step(")
                            .and_then(|r| r.strip_suffix(')'))
                            .map(|inner| format!("{indent}@step({inner}, {arg})"))
                    };
                    match new {
                        Some(n) if !done => {
                            v.push(n);
                            done = true;
                        }
                        _ => v.push(d.to_string()),
                    }
                }
                done.then(|| format!("{}\n{signature}", v.join("\n")))
            };
            let mut after = Vec::new();
            if let Some(decorated) = with(&format!("precondition={pre}")) {
                after.push(Variant {
                    label: "wait for it with a precondition (the guide's fix 1)".into(),
                    code: format!(
                        "# at module level (from swiss_ai_hub.agent.workflow.decorators.precondition import precondition):\n@precondition()\nasync def {pre}({param}: {types} | None) -> bool:\n    return {param} is not None\n\n# in {}:\n{decorated}",
                        subject.class
                    ),
                });
            }
            if let Some(required) = strip_optional(&signature, param) {
                after.push(Variant {
                    label: "make it required, if it always arrives (fix 2)".into(),
                    code: format!("{}\n{required}", decorators.join("\n")),
                });
            }
            if let Some(limited) = with("max_executions_per_run=1") {
                after.push(Variant {
                    label: "limit it to one execution, if one is enough (fix 3)".into(),
                    code: limited,
                });
            }
            (!after.is_empty()).then(|| CodeChange {
                language: "python".into(),
                location: Some(location.clone()),
                before,
                after,
            })
        }
        InputKind::Spec => {
            let first = line.checked_sub(1)?;
            let head = lines.get(first)?;
            let indent = head.len() - head.trim_start().len();
            if head.trim_end().ends_with('}') {
                // One flow-style line: `- {name: s, params: [...], outputs: [...]}`.
                let body = head.trim_end().strip_suffix('}')?;
                let before = head.to_string();
                return Some(CodeChange {
                    language: "yaml".into(),
                    location: Some(location.clone()),
                    before,
                    after: vec![
                        Variant {
                            label: "wait for it with a precondition".into(),
                            code: format!(
                                "{body}, precondition: {{name: {pre}, reads: [{}], when: {{present: {param}}}}}}}",
                                p.types.join(", ")
                            ),
                        },
                        Variant {
                            label: "limit it to one execution, if one is enough".into(),
                            code: format!("{body}, max_executions_per_run: 1}}"),
                        },
                    ],
                });
            }
            let mut end = first + 1;
            while let Some(l) = lines.get(end) {
                let t = l.trim_start();
                let i = l.len() - t.len();
                if !t.is_empty() && !t.starts_with('#') && i <= indent {
                    break;
                }
                end += 1;
            }
            while end > first + 1 && lines[end - 1].trim().is_empty() {
                end -= 1;
            }
            let before = lines[first..end].join("\n");
            let pad = " ".repeat(indent + 2);
            Some(CodeChange {
                language: "yaml".into(),
                location: Some(location.clone()),
                before: before.clone(),
                after: vec![
                    Variant {
                        label: "wait for it with a precondition".into(),
                        code: format!(
                            "{before}\n{pad}precondition:\n{pad}  name: {pre}\n{pad}  reads: [{}]\n{pad}  when: {{present: {param}}}",
                            p.types.join(", ")
                        ),
                    },
                    Variant {
                        label: "limit it to one execution, if one is enough".into(),
                        code: format!("{before}\n{pad}max_executions_per_run: 1"),
                    },
                ],
            })
        }
    }
}

/// `param: T | None` (or `Optional[T]`) in a signature, made `param: T`.
fn strip_optional(signature: &str, param: &str) -> Option<String> {
    let key = format!("{param}:");
    let mut at = None;
    for (i, _) in signature.match_indices(&key) {
        let before = signature[..i].chars().last();
        if before.is_none_or(|c| !(c.is_alphanumeric() || c == '_')) {
            at = Some(i);
            break;
        }
    }
    let start = at? + key.len();
    // The annotation ends at the first `,`, `=` or `)` outside brackets.
    let mut depth = 0i32;
    let mut end = signature.len();
    for (i, c) in signature[start..].char_indices() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' if depth > 0 => depth -= 1,
            ',' | '=' | ')' if depth == 0 => {
                end = start + i;
                break;
            }
            _ => {}
        }
    }
    let annotation = signature[start..end].trim();
    let plain = if let Some(t) = annotation.strip_suffix("| None") {
        t.trim_end().to_string()
    } else if let Some(t) = annotation
        .strip_prefix("Optional[")
        .and_then(|t| t.strip_suffix(']'))
    {
        t.to_string()
    } else {
        return None;
    };
    // A default of `None` goes with the optional annotation.
    let rest = &signature[end..];
    let rest = rest
        .strip_prefix('=')
        .map(str::trim_start)
        .and_then(|r| r.strip_prefix("None"))
        .unwrap_or(rest);
    Some(format!("{}{} {plain}{rest}", &signature[..at?], key))
}

/// The precondition fix applied to the spec in memory: does the finding go, and how many
/// times does the step run in the simulated run now?
fn optional_trap_checked(
    subject: &Subject,
    step: &str,
    param: &str,
    simulated: &[(String, usize)],
) -> Option<String> {
    let mut spec = subject.spec.source.clone();
    let s = spec.steps.iter_mut().find(|s| s.name == step)?;
    let types = s.params.iter().find(|p| p.name == param)?.types.clone();
    s.precondition = Some(PreconditionSpec {
        name: format!("wait_for_{param}"),
        reads: types,
        when: Some(Condition::Present(param.to_string())),
    });
    let compiled = Arc::new(CompiledSpec::compile(&spec).ok()?);
    let still = check(&compiled)
        .iter()
        .any(|f| f.code == "SAAP010" && f.step.as_deref() == Some(step));
    let sim = simulate(compiled.clone(), Policy::Fifo, DEFAULT_MAX_COMPLETIONS).ok()?;
    let idx = compiled.step_index(step)?;
    let now = sim.run.execution_count(idx);
    let was = simulated.iter().find(|(s, _)| s == step).map(|(_, n)| *n)?;
    let check = format!(
        "with the precondition applied to the spec in memory, `saap check` {} SAAP010 on `{step}`",
        if still {
            "still reports"
        } else {
            "no longer reports"
        }
    );
    // The simulated count says something only when the simulation showed the re-run.
    Some(if was > 1 {
        format!("{check}, and the simulated run runs `{step}` {now} time(s) (was {was})")
    } else {
        check
    })
}

/// The commands that must come back clean after the fix, and the guide's test assertion.
pub fn verification(
    subject: &Subject,
    symptom: Symptom,
    step: Option<&str>,
    causes: &[RootCause],
) -> Verification {
    let input = &subject.input;
    let mut commands = Vec::new();
    let codes: Vec<&str> = causes.iter().filter_map(|c| c.code.as_deref()).collect();
    commands.push(Command {
        command: format!("saap check {input}"),
        expect: if codes.is_empty() {
            "no new finding".into()
        } else {
            format!("no {} finding any more", codes.join(", "))
        },
    });
    if subject.tools_rerun() {
        match (symptom, step) {
            (Symptom::RunsTwice, Some(s)) => {
                commands.push(Command {
                    command: format!("saap explain {input} --step {s}"),
                    expect: format!("`{s}` ran once"),
                });
                commands.push(Command {
                    command: format!("saap explore {input}"),
                    expect: format!("`{s}` runs at most once in every interleaving"),
                });
            }
            (Symptom::RunsTwice, None) => commands.push(Command {
                command: format!("saap explore {input} --fail-on multi-exec"),
                expect: "exit 0: no step runs more than once".into(),
            }),
            (Symptom::NeverRuns | Symptom::Precondition, Some(s)) => {
                commands.push(Command {
                    command: format!("saap explain {input} --step {s}"),
                    expect: format!("`{s}` ran (no \"never ran\")"),
                });
                commands.push(Command {
                    command: format!("saap explore {input} --fail-on stall"),
                    expect: "exit 0: no interleaving stalls".into(),
                });
            }
            (Symptom::NeverRuns | Symptom::Precondition, None) => commands.push(Command {
                command: format!("saap explore {input} --fail-on stall"),
                expect: "exit 0: no interleaving stalls".into(),
            }),
            (Symptom::AfterStop, _) => commands.push(Command {
                command: format!("saap explore {input} --fail-on after-stop"),
                expect: "exit 0: no event after stop in any interleaving".into(),
            }),
            (Symptom::WontStart, _) => commands.push(Command {
                command: format!("saap simulate {input}"),
                expect: "a step runs on the start event".into(),
            }),
            (Symptom::Config, _) => {}
        }
    }
    let step_arg = step.map(|s| format!(" --step {s}")).unwrap_or_default();
    commands.push(Command {
        command: format!(
            "saap report --symptom {}{step_arg} {input}",
            symptom.as_str()
        ),
        expect: "exit 1: no cause found".into(),
    });
    Verification {
        commands,
        test_assertion: test_assertion(subject, symptom, step),
    }
}

/// The guide's `AgentTestRunner` pattern for the symptom (Python agents only).
fn test_assertion(subject: &Subject, symptom: Symptom, step: Option<&str>) -> Option<String> {
    if subject.kind != InputKind::Python {
        return None;
    }
    let start = subject
        .synthesized_arrivals
        .as_ref()
        .and_then(|a| a.first().cloned())
        .unwrap_or_else(|| "UserMessageEvent".into());
    let send = if start == "UserMessageEvent" {
        "UserMessageEvent(message=\"test\")".to_string()
    } else {
        format!("{start}(...)  # its fields")
    };
    let config = subject
        .config
        .as_ref()
        .map(|c| format!(", agent_config={}.as_form()", c.name))
        .unwrap_or_default();
    let output = step.and_then(|s| {
        let spec = &subject.spec;
        let i = spec.step_index(s)?;
        spec.steps[i as usize]
            .outputs
            .first()
            .map(|t| (s, spec.type_info(*t).name.clone()))
    });
    let specific = match (symptom, output) {
        (Symptom::RunsTwice, Some((s, out))) => format!(
            "\n    # `{s}` ran once: one {out}\n    assert len(runner.get_events_of_class({out})) == 1"
        ),
        (Symptom::NeverRuns | Symptom::Precondition, Some((s, out))) => {
            format!("\n    # `{s}` ran\n    assert len(runner.get_events_of_class({out})) >= 1")
        }
        _ => String::new(),
    };
    Some(format!(
        "async with AgentTestRunner(agent_type={}{config}).test_run() as runner:\n    await runner.send_event_from_topic({send})\n    stop = await runner.wait_for_event(StopEvent, timeout=30)\n    assert stop is not None{specific}\n    assert runner.has_stop_event\n    assert not runner.has_exception_event",
        subject.class
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_optional_annotation_is_made_required() {
        assert_eq!(
            strip_optional("async def s(self, a: A, b: B | None) -> C:", "b").unwrap(),
            "async def s(self, a: A, b: B) -> C:"
        );
        assert_eq!(
            strip_optional("def s(self, b: Optional[B] = None, c: C):", "b").unwrap(),
            "def s(self, b: B, c: C):"
        );
        assert_eq!(
            strip_optional("def s(self, ab: A | None, b: dict[str, B] | None):", "b").unwrap(),
            "def s(self, ab: A | None, b: dict[str, B]):"
        );
        assert!(strip_optional("def s(self, b: B):", "b").is_none());
    }
}
