//! `<agent> resume RUN`: grants more budget to a stored run paused on its own (status
//! `waiting_budget`, DESIGN §8) through `Engine::resume`, then follows the run as `run`
//! does. Must not change a run that is not paused: the engine refuses (`SAAP-E020`).

use super::args::{EngineArg, EngineKind, ReadArgs, parse_cost, parse_duration};
use super::fail::{Fail, engine_fail, invalid};
use super::follow::follow;
use super::reader::engine_of_run;
use super::store::{flush_telemetry, memory_keeps_nothing};
use crate::engine::Raise;
use crate::workflow::Workflow;
use std::time::Duration;

#[derive(clap::Args)]
#[command(
    after_help = "A run started with a budget (`run --max-executions N --max-time DURATION`, or the engine
option `run_budget`) that spent it waits as `waiting_budget`: what it would run next is held,
nothing is lost. `resume` grants more and runs what was held, then follows the run until it
ends, pauses again or --timeout passes.

Without --raise, each spent part of the budget is granted again as the run first had it (ten
more executions for a run started with --max-executions 10). --raise names an amount instead;
repeat it to raise both:
  --raise executions=N      N more executions
  --raise time=DURATION     this much more time from now (90s, 30m, 1h 30m)
  --raise tokens=N          N more model tokens
  --raise cost=AMOUNT       this much more model cost (the price table's currency: 2.50)

With --engine nats://HOST:PORT the resume is a message on the agent class's stream for the
run: the worker that owns the run grants it (a message delivered twice, or two people resuming
one pause, grant once), and this command waits for the grant in the run's journal, then
follows the run.

Examples:
  runs --status waiting                       find paused runs (status waiting_budget)
  resume RUN                                  the same budget again
  resume RUN --raise executions=20 --raise time=1h --json
  resume RUN --engine nats://127.0.0.1:4222   a run of the class's workers on NATS

Exit codes: 0 the run stopped, 1 it failed, paused again or still waits after --timeout (NATS:
no worker granted the resume within --timeout),
2 unknown run, a run that is not paused (SAAP-E020) or a bad --raise (SAAP-E021), 3 database
failure."
)]
pub(super) struct ResumeArgs {
    /// The run id (or a unique prefix of it), as printed by `run` and `runs`.
    pub(super) run: String,
    /// More budget: `executions=N`, `time=DURATION`, `tokens=N` or `cost=AMOUNT` (repeatable).
    #[arg(long, value_name = "PART=AMOUNT", value_parser = parse_raise)]
    pub(super) raise: Vec<RaisePart>,
    #[command(flatten)]
    pub(super) from: ReadArgs,
    /// Seconds to wait for the run to end.
    #[arg(long, default_value_t = 60.0, value_name = "SECS")]
    pub(super) timeout: f64,
    /// Print JSON lines (display events, then the result).
    #[arg(long)]
    pub(super) json: bool,
}

/// One `--raise`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum RaisePart {
    Executions(u32),
    Time(Duration),
    Tokens(u64),
    Cost(f64),
}

fn parse_raise(value: &str) -> Result<RaisePart, String> {
    let shown = || value.chars().take(64).collect::<String>();
    let Some((part, amount)) = value.split_once('=') else {
        return Err(format!(
            "`{}` is not a raise: write executions=N or time=DURATION",
            shown()
        ));
    };
    match part.trim() {
        "executions" => match amount.trim().parse::<u32>() {
            Ok(0) => Err("executions=0 adds nothing: give at least 1".into()),
            Ok(n) => Ok(RaisePart::Executions(n)),
            Err(_) => Err(format!(
                "`{}`: executions takes a whole number, like executions=20",
                shown()
            )),
        },
        "time" => parse_duration(amount).map(RaisePart::Time),
        "tokens" => match amount.trim().parse::<u64>() {
            Ok(0) => Err("tokens=0 adds nothing: give at least 1".into()),
            Ok(n) => Ok(RaisePart::Tokens(n)),
            Err(_) => Err(format!(
                "`{}`: tokens takes a whole number, like tokens=50000",
                shown()
            )),
        },
        "cost" => parse_cost(amount).map(RaisePart::Cost),
        other => Err(format!(
            "`{}` is not a part of a budget: raise `executions`, `time`, `tokens` or `cost`",
            other.chars().take(64).collect::<String>()
        )),
    }
}

/// The `--raise` flags as one raise; a part given twice is refused.
fn raise_of(parts: &[RaisePart]) -> Result<Raise, Fail> {
    let mut raise = Raise::default();
    for p in parts {
        match *p {
            RaisePart::Executions(n) if raise.executions.is_none() => raise.executions = Some(n),
            RaisePart::Time(d) if raise.time.is_none() => raise.time = Some(d),
            RaisePart::Tokens(n) if raise.tokens.is_none() => raise.tokens = Some(n),
            RaisePart::Cost(c) if raise.cost.is_none() => raise.cost = Some(c),
            _ => {
                return Err(invalid(
                    "--raise names the same part twice: give each of executions, time, tokens and cost at most once",
                ));
            }
        }
    }
    Ok(raise)
}

pub(super) async fn resume_cmd(workflow: &Workflow, a: ResumeArgs) -> Result<u8, Fail> {
    let raise = raise_of(&a.raise)?;
    let kind = match &a.from.engine {
        EngineArg::Local(EngineKind::Memory) => return Err(memory_keeps_nothing("resume")),
        EngineArg::Local(kind) => *kind,
        #[cfg(feature = "nats")]
        EngineArg::Nats(url) => return resume_nats(workflow, url, &a, raise).await,
        #[cfg(not(feature = "nats"))]
        EngineArg::Nats(_) => {
            return Err(invalid(
                "this agent was built without the `nats` feature of saap",
            ));
        }
    };
    let (engine, opened, run_id) = engine_of_run(
        workflow,
        kind,
        &a.from.store,
        &a.run,
        "there is no run to resume",
    )
    .await?;
    let from = engine.snapshot(&run_id).map_or(0, |s| s.run.log().len());
    let resumed = engine.resume(&run_id, raise).await.map_err(engine_fail)?;
    eprintln!(
        "resumed run {run_id}: {}; {} held execution(s) now run",
        grant_text(&resumed.grant),
        resumed.released
    );
    let code = follow(&engine, &run_id, from, None, a.timeout, a.json).await;
    flush_telemetry(&opened);
    code
}

/// What a grant gave, for a person: `2 more execution(s), 30m more`.
fn grant_text(grant: &saap_dispatch::run::BudgetGrant) -> String {
    let mut granted = Vec::new();
    if let Some(n) = grant.executions {
        granted.push(format!("{n} more execution(s)"));
    }
    if let Some(ns) = grant.wall_ns {
        let d = Duration::from_nanos(ns);
        granted.push(format!("{} more", humantime::format_duration(d)));
    }
    if let Some(n) = grant.tokens {
        granted.push(format!("{n} more token(s)"));
    }
    if let Some(c) = grant.cost_micros {
        granted.push(format!("{} more cost", saap_dispatch::render::cost_text(c)));
    }
    granted.join(", ")
}

/// `resume --engine nats://…`: publishes a resume message on the class stream for the run
/// (its owner grants it: [`crate::nats::resume`]), waits until the grant is in the run's
/// journal, then follows the run as `send` does.
#[cfg(feature = "nats")]
async fn resume_nats(
    workflow: &Workflow,
    url: &str,
    a: &ResumeArgs,
    raise: Raise,
) -> Result<u8, Fail> {
    use super::follow::follow_stored;
    use super::reader::{open_nats_reader, read_view, resolve_run};
    use crate::nats::{RUN_RESUME_REQUEST_EVENT, ResumeRequest};
    use saap_protocol::hierarchy::names::CONTROL_EVENT;

    let (reader, opts) = open_nats_reader(workflow, url, &a.from).await?;
    let run_id = resolve_run(workflow, &reader.backend, &reader.place, &a.run).await?;
    let view = read_view(workflow, &reader, &run_id).await?;
    // Refused here as the owner would refuse it (SAAP-E020, SAAP-E021), before anything is sent.
    let seen = view.run.budget().map_or(0, |b| b.grants);
    view.run
        .resume_grant(raise.grant(0), None)
        .map_err(|refused| {
            engine_fail(crate::EngineError::resume_refused(
                &run_id,
                view.run.progress().as_str(),
                refused,
            ))
        })?;
    let from = view.run.log().len();
    let (id, env) = super::send::saap_envelope(
        workflow,
        RUN_RESUME_REQUEST_EVENT,
        CONTROL_EVENT,
        &ResumeRequest::new(raise, seen),
    )?;
    super::send::publish_to_run(workflow, &reader, &opts, &view.thread_id, &run_id, &env).await?;
    eprintln!("sent {RUN_RESUME_REQUEST_EVENT} {id} to run {run_id} on the class stream");
    // The grant is the owner's to make: wait until the journal has it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(a.timeout.max(0.0));
    loop {
        let view = read_view(workflow, &reader, &run_id).await?;
        if let Some(b) = view.run.budget().filter(|b| b.grants > seen) {
            eprintln!(
                "resumed run {run_id}: {}",
                crate::snapshot::budget_text(&view.run)
                    .unwrap_or_else(|| format!("grant {}", b.grants))
            );
            break;
        }
        if view.run.is_terminated() || tokio::time::Instant::now() >= deadline {
            return Err(super::fail::Fail {
                code: 1,
                message: format!(
                    "run {run_id} was not resumed within {}s: no worker of agent class `{}` applied the resume (is one serving: `run --engine {url}`?), or the run changed meanwhile (`show {run_id} --engine {url}`). The request stays in the class stream: a worker that starts later applies it if the run is still paused as it was.",
                    a.timeout,
                    workflow.name()
                ),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    follow_stored(workflow, &reader, &run_id, from, id, a.timeout, a.json).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raises_are_read_as_people_write_them() {
        assert_eq!(parse_raise("executions=20"), Ok(RaisePart::Executions(20)));
        assert_eq!(
            parse_raise("time=1h 30m"),
            Ok(RaisePart::Time(Duration::from_secs(5400)))
        );
        for bad in [
            "executions=0",
            "executions=-1",
            "executions",
            "time=soon",
            "time=0s",
            "steps=5",
        ] {
            let e = parse_raise(bad).expect_err(bad);
            assert!(!e.contains("ParseIntError"), "{e}");
        }
        assert!(raise_of(&[RaisePart::Executions(1), RaisePart::Executions(2)]).is_err());
        assert_eq!(
            raise_of(&[
                RaisePart::Time(Duration::from_secs(1)),
                RaisePart::Executions(2)
            ])
            .ok(),
            Some(Raise {
                executions: Some(2),
                time: Some(Duration::from_secs(1)),
                ..Raise::default()
            })
        );
        assert_eq!(parse_raise("tokens=500"), Ok(RaisePart::Tokens(500)));
        assert_eq!(parse_raise("cost=2.5"), Ok(RaisePart::Cost(2.5)));
        for bad in ["tokens=0", "cost=0", "cost=-1", "cost=NaN", "cost=lots"] {
            assert!(parse_raise(bad).is_err(), "{bad}");
        }
    }
}
