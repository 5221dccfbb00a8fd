//! The spec checks' fixes in the words of a Python agent: `saap-dispatch` phrases a fix for
//! a spec file (`outputs: [T]`, `size: 3`, `types: [...]`); for source, the same advice is
//! written as the decorator, annotation or return type to change.
//!
//! Only the fix text changes; code, message and why stay the checker's.

use saap_dispatch::check::Finding;
use saap_dispatch::spec::WorkflowSpec;

/// The package event types that derive (directly or not) from `parent`.
fn subtypes(spec: &WorkflowSpec, parent: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut frontier = vec![parent.to_string()];
    while let Some(p) = frontier.pop() {
        for e in &spec.events {
            if e.parents.contains(&p) && !out.contains(&e.name) && e.name != parent {
                out.push(e.name.clone());
                frontier.push(e.name.clone());
            }
        }
    }
    out
}

/// Rewrites `f.fix` for the codes whose advice names spec-file syntax.
pub fn in_python_words(f: &mut Finding, spec: &WorkflowSpec) {
    let steps = &spec.steps;
    let step = f
        .step
        .as_deref()
        .and_then(|s| steps.iter().find(|x| x.name == s));
    let param = step.and_then(|s| {
        f.param
            .as_deref()
            .and_then(|p| s.params.iter().find(|x| x.name == p))
    });
    let types = param.map(|p| p.types.join(" | ")).unwrap_or_default();
    let pname = f.param.clone().unwrap_or_default();
    let sname = f.step.clone().unwrap_or_default();
    let fix = match f.code {
        "SAAP002" => format!(
            "add a step that returns `{types}` (`-> {types}`), derive `{types}` from `StartEvent` or a `*InTheLoopResponseEvent` class if it arrives from outside, or make the parameter optional (`{pname}: {types} | None`) if `{sname}` can do without it"
        ),
        "SAAP004" => format!(
            "bound the loop: give `{sname}` (or another step of the cycle) `@step(max_executions_per_run=N)` or a `@precondition()` that returns False once the loop is done"
        ),
        "SAAP005" => "give the first step a parameter typed with the start event your callers send, e.g. `message: UserMessageEvent`".to_string(),
        "SAAP009" => match param.and_then(|p| p.size) {
            Some(_) => format!(
                "make `FixedList({types}, N)` match what the producers emit, add the missing producers, or let a producer return several (`-> list[{types}]`)"
            ),
            None => return,
        },
        "SAAP010" => format!(
            "wait for it with a precondition (`@precondition()` `async def ready({pname}: {types} | None) -> bool: return {pname} is not None`, then `@step(precondition=ready)`), set `@step(max_executions_per_run=1)` if one execution is enough, or make `{pname}: {types}` required if it always arrives"
        ),
        "SAAP012" => format!(
            "take the events once: one `list[...]` or `FixedList(..., 2)` parameter instead of two parameters of one type in `{sname}`, or give each stage its own event class"
        ),
        "SAAP014" => {
            let mut all: Vec<String> = param.map(|p| p.types.clone()).unwrap_or_default();
            for t in all.clone() {
                for sub in subtypes(spec, &t) {
                    if !all.contains(&sub) {
                        all.push(sub);
                    }
                }
            }
            format!(
                "annotate every concrete class the parameter accepts (dispatch matches the exact class): `{pname}: {}`",
                all.join(" | ")
            )
        }
        "SAAP011" => format!(
            "wait for the number you need with a `@precondition()` (`return len({pname}) >= expected`), or write `FixedList({types}, N)` when N is known"
        ),
        _ => return,
    };
    f.fix = fix;
}
