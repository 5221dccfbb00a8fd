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

Examples:
  runs --status waiting                       find paused runs (status waiting_budget)
  resume RUN                                  the same budget again
  resume RUN --raise executions=20 --raise time=1h --json

Exit codes: 0 the run stopped, 1 it failed, paused again or still waits after --timeout,
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
        EngineArg::Nats(_) => {
            return Err(invalid(
                "run budgets are not yet supported on the NATS engine, so no run there is paused on one",
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
    let mut granted = Vec::new();
    if let Some(n) = resumed.grant.executions {
        granted.push(format!("{n} more execution(s)"));
    }
    if let Some(ns) = resumed.grant.wall_ns {
        let d = Duration::from_nanos(ns);
        granted.push(format!("{} more", humantime::format_duration(d)));
    }
    if let Some(n) = resumed.grant.tokens {
        granted.push(format!("{n} more token(s)"));
    }
    if let Some(c) = resumed.grant.cost_micros {
        granted.push(format!("{} more cost", saap_dispatch::render::cost_text(c)));
    }
    eprintln!(
        "resumed run {run_id}: {}; {} held execution(s) now run",
        granted.join(", "),
        resumed.released
    );
    let code = follow(&engine, &run_id, from, None, a.timeout, a.json).await;
    flush_telemetry(&opened);
    code
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
