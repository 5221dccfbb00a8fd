//! Options shared by several commands: where runs are kept (`--db`, `--engine`), NATS
//! connection and worker settings, and how a stored run is looked up.

#[cfg(feature = "nats")]
use super::fail::{Fail, invalid};
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum EngineKind {
    /// Embedded and durable: the run is kept in the SQLite database (--db).
    Sqlite,
    /// In memory: nothing is kept (`runs`/`show` will not see the run).
    Memory,
}

/// The value of `run --engine`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum EngineArg {
    Local(EngineKind),
    /// A NATS server URL (list), for the distributed engine.
    Nats(String),
}

pub(super) fn parse_engine_arg(value: &str) -> Result<EngineArg, String> {
    match value {
        "sqlite" | "embedded" => Ok(EngineArg::Local(EngineKind::Sqlite)),
        "memory" => Ok(EngineArg::Local(EngineKind::Memory)),
        v if v.starts_with("nats://") || v.starts_with("tls://") => {
            if cfg!(feature = "nats") {
                Ok(EngineArg::Nats(v.to_string()))
            } else {
                Err("this agent was built without the `nats` feature of saap".into())
            }
        }
        v => Err(format!(
            "`{}` is not an engine: use sqlite, memory or nats://HOST:PORT",
            v.chars().take(64).collect::<String>()
        )),
    }
}

/// Credentials and TLS of `run --engine nats://…`. Secrets are read from environment
/// variables or files named here, never given on the command line, never printed.
#[cfg(feature = "nats")]
#[derive(clap::Args)]
pub(super) struct NatsArgs {
    /// Environment variable holding the NATS token.
    #[arg(long, value_name = "VAR")]
    pub(super) nats_token_env: Option<String>,
    /// NATS user name (the password comes from --nats-password-env).
    #[arg(long, value_name = "USER")]
    pub(super) nats_user: Option<String>,
    /// Environment variable holding the NATS password.
    #[arg(long, value_name = "VAR")]
    pub(super) nats_password_env: Option<String>,
    /// File holding an nkey seed.
    #[arg(long, value_name = "FILE")]
    pub(super) nats_nkey_seed_file: Option<PathBuf>,
    /// A NATS .creds file.
    #[arg(long, value_name = "FILE")]
    pub(super) nats_creds: Option<PathBuf>,
    /// Extra CA certificate (PEM) to trust; repeatable.
    #[arg(long, value_name = "FILE")]
    pub(super) nats_tls_ca: Vec<PathBuf>,
    /// Client certificate (PEM) for mutual TLS.
    #[arg(long, value_name = "FILE")]
    pub(super) nats_tls_cert: Option<PathBuf>,
    /// Client key (PEM) for mutual TLS.
    #[arg(long, value_name = "FILE")]
    pub(super) nats_tls_key: Option<PathBuf>,
    /// Require TLS.
    #[arg(long)]
    pub(super) nats_tls_required: bool,
}

/// Where the step bodies of `run --engine nats://…` run (run only).
#[cfg(feature = "nats")]
#[derive(clap::Args)]
pub(super) struct StepsArgs {
    /// With --engine nats://…: where step bodies run: local (on the run's owner, default) or shared (on any worker
    /// of the class through its work queue; every worker of a class must use the same).
    #[arg(long, value_name = "MODE", default_value = "local", value_parser = parse_steps)]
    pub(super) steps: crate::nats::Steps,
    /// With --steps shared: bodies this worker runs at once before it hands started ones to
    /// the work queue (default: 64, a bound on bodies waiting on I/O, not on CPUs; 0: every body through the queue).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=4096))]
    pub(super) local_slots: Option<u32>,
}
#[cfg(feature = "nats")]
pub(super) fn parse_steps(value: &str) -> Result<crate::nats::Steps, String> {
    match value {
        "local" => Ok(crate::nats::Steps::Local),
        "shared" => Ok(crate::nats::Steps::Shared),
        v => Err(format!(
            "`{}` is not a step mode: use local or shared",
            v.chars().take(64).collect::<String>()
        )),
    }
}

/// The worker options of `run --engine nats://…` from its arguments.
#[cfg(feature = "nats")]
pub(super) fn worker_options(
    n: &StepsArgs,
    engine: crate::engine::EngineOptions,
) -> Result<crate::nats::WorkerOptions, Fail> {
    let mut opts = crate::nats::WorkerOptions {
        steps: n.steps,
        engine,
        ..Default::default()
    };
    if let Some(slots) = n.local_slots {
        if n.steps != crate::nats::Steps::Shared {
            return Err(invalid(
                "--local-slots applies to shared step bodies: add --steps shared or drop it",
            ));
        }
        opts.local_slots = slots as usize;
    }
    Ok(opts)
}

#[derive(clap::Args)]
pub(super) struct StoreArgs {
    /// The database of runs (default: <state dir>/<agent>.db, see --help of the agent).
    #[arg(long, value_name = "PATH")]
    pub(super) db: Option<PathBuf>,
}

/// Where `send`, `runs` and `show` find the runs.
#[derive(clap::Args)]
pub(super) struct ReadArgs {
    /// Where the runs are: sqlite (default: the database --db) or nats://HOST:PORT (tls://…):
    /// the agent class's journal on NATS JetStream (the same credential and TLS flags as
    /// `run --engine nats://…`).
    #[arg(long, default_value = "sqlite", value_name = "ENGINE", value_parser = parse_engine_arg)]
    pub(super) engine: EngineArg,
    #[command(flatten)]
    pub(super) store: StoreArgs,
    #[cfg(feature = "nats")]
    #[command(flatten)]
    pub(super) nats: NatsArgs,
}

/// The budget a run starts with (`run --max-executions N --max-time DURATION`): spent, the
/// run parks as `waiting_budget` until `resume` grants more.
#[derive(clap::Args, Debug, Clone, Default)]
pub(super) struct BudgetArgs {
    /// The most executions the run may run before it waits for `resume`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) max_executions: Option<u32>,
    /// The longest the run may run (wall-clock, from its start: 90s, 30m, 1h 30m) before
    /// what it runs next waits for `resume`.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(super) max_time: Option<std::time::Duration>,
    /// The most model tokens the run's steps may use (`saap::llm` counts every call)
    /// before what the run runs next waits for `resume`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) max_tokens: Option<u64>,
    /// The most the run's model calls may cost, in the price table's currency (2.50), before
    /// what the run runs next waits for `resume`.
    #[arg(long, value_name = "AMOUNT", value_parser = parse_cost)]
    pub(super) max_cost: Option<f64>,
}

impl BudgetArgs {
    pub(super) fn budget(&self) -> crate::engine::RunBudget {
        crate::engine::RunBudget {
            max_executions: self.max_executions,
            max_wall_time: self.max_time,
            max_tokens: self.max_tokens,
            max_cost: self.max_cost,
        }
    }
}

/// A cost in the price table's currency (`2.50`): a number above zero.
pub(super) fn parse_cost(value: &str) -> Result<f64, String> {
    match value.trim().parse::<f64>() {
        Ok(c) if c.is_finite() && c > 0.0 => Ok(c),
        _ => Err(format!(
            "`{}` is not a cost: write an amount above zero in the price table's currency, like 2.50",
            value.chars().take(64).collect::<String>()
        )),
    }
}

/// A duration as people write it: `90s`, `30m`, `1h 30m`, `2days`; more than zero.
pub(super) fn parse_duration(value: &str) -> Result<std::time::Duration, String> {
    match humantime::parse_duration(value.trim()) {
        Ok(d) if d.is_zero() => Err("the duration must be more than zero".into()),
        Ok(d) => Ok(d),
        Err(_) => Err(format!(
            "`{}` is not a duration: write it like 90s, 30m or 1h 30m",
            value.chars().take(64).collect::<String>()
        )),
    }
}

/// A time on the command line (`runs --since`, the studio's filters), as nanoseconds since
/// the epoch: a UTC time (`2026-12-04 15:00`, `2026-12-04T15:00:00Z`, a date alone) or a time
/// ago (`2h`, `30m`, `1d 12h`).
pub(super) fn parse_when(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let shown: String = t.chars().take(64).collect();
    let bad = || {
        format!(
            "`{shown}` is not a time: write a UTC time (`2026-12-04 15:00`, `2026-12-04T15:00:00Z`, `2026-12-04`) or a time ago (`2h`, `30m`, `1d`)"
        )
    };
    let at = if t.len() > 64 || t.is_empty() {
        return Err(bad());
    } else if t.as_bytes()[0].is_ascii_digit() && t.contains('-') {
        // A date, with a time (minutes enough) or not.
        let full = match t.len() {
            10 => format!("{t} 00:00:00"),
            16 => format!("{t}:00"),
            _ => t.to_string(),
        };
        humantime::parse_rfc3339_weak(&full).map_err(|_| bad())?
    } else {
        let ago = humantime::parse_duration(t).map_err(|_| bad())?;
        std::time::SystemTime::now()
            .checked_sub(ago)
            .ok_or_else(bad)?
    };
    let ns = at
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| bad())?
        .as_nanos();
    i64::try_from(ns).map_err(|_| bad())
}

/// [`parse_when`]'s time as it takes it back: RFC 3339, UTC, to the second.
pub(super) fn when_text(ns: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns.max(0) as u64);
    humantime::format_rfc3339_seconds(at).to_string()
}

#[cfg(test)]
mod when_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn times_are_utc_dates_with_or_without_a_time_or_a_time_ago() {
        let day = parse_when("2026-12-04").unwrap();
        assert_eq!(when_text(day), "2026-12-04T00:00:00Z");
        assert_eq!(
            when_text(parse_when("2026-12-04 15:30").unwrap()),
            "2026-12-04T15:30:00Z"
        );
        assert_eq!(
            when_text(parse_when("2026-12-04T15:30:07Z").unwrap()),
            "2026-12-04T15:30:07Z"
        );
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as i64;
        let ago = parse_when("2h").unwrap();
        assert!((now - ago - 7_200_000_000_000).abs() < 60_000_000_000);
        for bad in ["", "yesterday", "2026-13-45", "12", "-5m"] {
            let e = parse_when(bad).unwrap_err();
            assert!(e.contains("is not a time"), "{bad}: {e}");
        }
    }
}
