//! `check`, `simulate`, `explore` and `explain` on a spec (a file under the root or inline
//! text) or Python agent source: each call becomes `saap <command> … --json` run as a child
//! ([`super::child`]), so the answer is the CLI's JSON, a panic stays in the child and the
//! time bound kills it.
//!
//! Must not give the child a flag that writes (`--history-out`), or a path the root did not
//! resolve.

use super::answer::{Answer, ToolError};
use super::child;
use super::context::Context;
use super::limits::{
    MAX_COMPLETIONS, MAX_EXPLORE_DEPTH, MAX_EXPLORE_STATES, MAX_INLINE_SPEC, MAX_STEPS,
};
use super::params::{
    CheckParams, ExplainParams, ExploreParams, Policy, ReportParams, SimulateParams, SourceChoice,
    SpecSource, Symptom,
};

/// The spec argument for the child (a resolved path, or `-` with the text on stdin).
fn spec_arg(ctx: &Context, src: &SpecSource) -> Result<(String, Option<String>), ToolError> {
    match (&src.path, &src.spec) {
        (Some(_), Some(_)) => Err(ToolError::new(
            "give either `path` (a file under the server's root) or `spec` (the spec's text), not both",
        )),
        (None, None) => Err(ToolError::new(
            "give `path` (a spec file or Python agent source relative to the server's root) or `spec` (a spec's JSON or YAML text)",
        )),
        (Some(p), None) => {
            let rel = ctx.root.resolve(p).map_err(ToolError::new)?;
            let s = rel.to_string_lossy().into_owned();
            // A path that starts with `-` would read as a flag.
            Ok((
                if s.starts_with('-') {
                    format!("./{s}")
                } else {
                    s
                },
                None,
            ))
        }
        (None, Some(text)) => {
            if text.len() > MAX_INLINE_SPEC {
                return Err(ToolError::new(format!(
                    "`spec` is {} bytes, more than {MAX_INLINE_SPEC}; split the workflow or pass a file with `path`",
                    text.len()
                )));
            }
            Ok(("-".to_owned(), Some(text.clone())))
        }
    }
}

fn bounded(name: &str, v: Option<u64>, max: u64) -> Result<Option<String>, ToolError> {
    match v {
        Some(0) => Err(ToolError::new(format!("`{name}` must be at least 1"))),
        Some(n) if n > max => Err(ToolError::new(format!(
            "`{name}` is at most {max} (asked for {n})"
        ))),
        Some(n) => Ok(Some(n.to_string())),
        None => Ok(None),
    }
}

fn policy_args(args: &mut Vec<String>, policy: Option<Policy>) {
    if let Some(p) = policy {
        args.push("--policy".into());
        args.push(p.as_str().into());
    }
}

/// Runs `saap ARGS --json` and turns its exit into an answer: 0 and 1 (findings) are
/// answers, 2 (invalid input) and 3 (failure) tool errors with the child's message.
async fn run_cli(
    ctx: &Context,
    tool: &str,
    mut args: Vec<String>,
    stdin: Option<String>,
) -> Answer {
    args.push("--json".into());
    // Waiting for a slot counts against the call's time bound (the server's timeout).
    let _slot = ctx.children.acquire().await.map_err(|_| {
        ToolError::new("internal: the server is shutting down; call again after it restarts")
    })?;
    let out = child::run(
        &ctx.exe,
        ctx.root.dir(),
        &args,
        stdin,
        ctx.limits.call,
        tool,
    )
    .await?;
    match out.code {
        Some(0 | 1) if !out.stdout.trim().is_empty() => Ok(out.stdout),
        Some(2) => Err(ToolError::new(format!(
            "invalid input: {}",
            message(&out.stderr)
        ))),
        Some(code) => Err(ToolError::new(format!(
            "`{tool}` failed (exit {code}): {}",
            message(&out.stderr)
        ))),
        None => Err(ToolError::new(format!(
            "`{tool}` crashed (killed by a signal; out of memory?): {}; narrow the input (smaller bounds) and report it as a saap bug if it persists",
            message(&out.stderr)
        ))),
    }
}

/// The child's diagnostic without the `error: ` prefix, or a placeholder.
fn message(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .filter(|l| !l.trim().is_empty())
        .collect();
    if lines.is_empty() {
        "no message".to_owned()
    } else {
        lines.join("\n")
    }
}

/// `check`.
pub async fn check(ctx: &Context, p: CheckParams) -> Answer {
    let (spec, stdin) = spec_arg(ctx, &SpecSource::of(&p.path, &p.spec))?;
    run_cli(ctx, "check", vec!["check".into(), spec], stdin).await
}

/// `simulate`.
pub async fn simulate(ctx: &Context, p: SimulateParams) -> Answer {
    let (spec, stdin) = spec_arg(ctx, &SpecSource::of(&p.path, &p.spec))?;
    let mut args = vec!["simulate".into(), spec];
    policy_args(&mut args, p.policy);
    if let Some(n) = bounded("max_completions", p.max_completions, MAX_COMPLETIONS)? {
        args.extend(["--max-completions".into(), n]);
    }
    run_cli(ctx, "simulate", args, stdin).await
}

/// `explore`.
pub async fn explore(ctx: &Context, p: ExploreParams) -> Answer {
    let (spec, stdin) = spec_arg(ctx, &SpecSource::of(&p.path, &p.spec))?;
    let mut args = vec!["explore".into(), spec];
    if let Some(n) = bounded("max_states", p.max_states, MAX_EXPLORE_STATES)? {
        args.extend(["--max-states".into(), n]);
    }
    if let Some(n) = bounded("max_depth", p.max_depth, MAX_EXPLORE_DEPTH)? {
        args.extend(["--max-depth".into(), n]);
    }
    if p.permute_arrivals {
        args.push("--permute-arrivals".into());
    }
    run_cli(ctx, "explore", args, stdin).await
}

/// A run id, step or class name as one child argument: bounded, printable, no flag.
fn id_arg<'a>(name: &str, v: &'a str) -> Result<&'a str, ToolError> {
    if v.is_empty() || v.len() > 256 || v.starts_with('-') || v.chars().any(char::is_control) {
        return Err(ToolError::new(format!(
            "`{name}` is 1 to 256 printable characters and does not start with `-`"
        )));
    }
    Ok(v)
}

/// `report`: seed 000's debug report for a symptom, with a run as evidence when `run` is
/// given (and, for wont-start on a NATS server, the live class stream).
pub async fn report(ctx: &Context, p: ReportParams) -> Answer {
    let (input, stdin) = spec_arg(ctx, &SpecSource::of(&p.path, &p.spec))?;
    let mut args = vec![
        "report".to_owned(),
        "--symptom".to_owned(),
        p.symptom.as_str().to_owned(),
        input,
    ];
    if let Some(s) = &p.step {
        args.push(format!("--step={}", id_arg("step", s)?));
    }
    if let Some(a) = &p.agent {
        args.push(format!("--agent={}", id_arg("agent", a)?));
    }
    match &p.run {
        Some(run) => {
            args.push(format!("--run={}", id_arg("run", run)?));
            args.extend(ctx.sources.cli_args(p.source)?);
        }
        // The guide's issue 5 checks read the class stream of a live server.
        None if matches!(p.symptom, Symptom::WontStart) && ctx.sources.has_nats() => {
            args.extend(ctx.sources.cli_args(Some(SourceChoice::Nats))?);
        }
        None if p.source.is_some() => {
            return Err(ToolError::new(
                "`source` goes with `run` (a run as evidence)",
            ));
        }
        None => {}
    }
    run_cli(ctx, "report", args, stdin).await
}

/// `explain` on a spec (a simulated run, or a recorded history file under the root), or on a
/// stored or live run by id (`run`).
pub async fn explain(ctx: &Context, p: ExplainParams) -> Answer {
    let mut args = vec!["explain".to_owned()];
    let stdin = match &p.run {
        // On NATS a saap worker's discovery answer gives the spec.
        Some(_) if p.path.is_none() && p.spec.is_none() => None,
        _ => {
            let (spec, stdin) = spec_arg(ctx, &SpecSource::of(&p.path, &p.spec))?;
            args.push(spec);
            stdin
        }
    };
    if let Some(run) = &p.run {
        if p.history.is_some() {
            return Err(ToolError::new(
                "give `run` (a stored or live run) or `history` (a History file), not both",
            ));
        }
        args.push(format!("--run={}", id_arg("run", run)?));
        args.extend(ctx.sources.cli_args(p.source)?);
        if let Some(a) = &p.agent {
            args.push(format!("--agent={}", id_arg("agent", a)?));
        }
    } else if p.source.is_some() || p.agent.is_some() {
        return Err(ToolError::new(
            "`source` and `agent` go with `run` (explain a stored or live run)",
        ));
    }
    if p.steps.len() > MAX_STEPS {
        return Err(ToolError::new(format!(
            "`steps` names at most {MAX_STEPS} steps (got {})",
            p.steps.len()
        )));
    }
    for s in &p.steps {
        if s.is_empty() || s.len() > 256 {
            return Err(ToolError::new(
                "every name in `steps` is a step name of 1 to 256 bytes",
            ));
        }
        args.push(format!("--step={s}"));
    }
    if let Some(h) = &p.history {
        let rel = ctx.root.resolve(h).map_err(ToolError::new)?;
        let s = rel.to_string_lossy().into_owned();
        args.extend([
            "--history".into(),
            if s.starts_with('-') {
                format!("./{s}")
            } else {
                s
            },
        ]);
    }
    policy_args(&mut args, p.policy);
    if let Some(n) = bounded("max_completions", p.max_completions, MAX_COMPLETIONS)? {
        args.extend(["--max-completions".into(), n]);
    }
    run_cli(ctx, "explain", args, stdin).await
}
