//! The per-agent command line: one call gives every agent binary `spec`, `check`, `run`,
//! `runs` and `show`.
//!
//! ```no_run
//! # fn workflow() -> saap::Workflow { unimplemented!() }
//! fn main() -> std::process::ExitCode {
//!     saap::main(workflow())
//! }
//! ```
//!
//! Conventions (DESIGN §8, `docs/cli.md`): data on stdout, diagnostics on stderr, `--json`
//! on every command, and exit codes 0 success, 1 the command found problems (check errors,
//! a run that ended with an exception or is still waiting), 2 invalid input or usage,
//! 3 internal or I/O failure.
//!
//! Runs are kept in an embedded SQLite database: `--db PATH`, or by default
//! `<state dir>/<agent>.db` where the state dir is `$SAAP_STATE_DIR`, else
//! `$XDG_STATE_HOME/saap`, else `$HOME/.local/state/saap`, else `./.saap`.

use crate::backend::Backend;
use crate::backend::sqlite::SqliteBackend;
use crate::engine::{Engine, EngineError, EngineOptions};
use crate::history::{RunOutcome, StoredRunView, utc_time};
use crate::snapshot::{RunSnapshot, timeline_with};
use crate::workflow::Workflow;
use clap::{Parser, Subcommand};
use saap_dispatch::check::{Finding, Severity, Summary, check, summarize};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Largest start event accepted on the command line or from a file, in bytes.
pub const MAX_START_EVENT_BYTES: u64 = 1024 * 1024;

/// Runs the agent's command line with the process arguments; returns the exit code.
pub fn main(workflow: Workflow) -> ExitCode {
    main_with(workflow, std::env::args_os())
}

/// [`main`] with explicit arguments (the first is the program name).
pub fn main_with<I, T>(workflow: Workflow, args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let name = program_name(&workflow);
    let cmd = <Cli as clap::CommandFactory>::command()
        .name(name.clone())
        .bin_name(name.clone())
        .about(format!(
            "{name}: the `{}` agent (saap). Inspect its spec, check it, run it, read its stored runs.",
            workflow.name()
        ))
        .after_help(after_help(&name));
    let matches = match cmd.try_get_matches_from(args) {
        Ok(m) => m,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(2);
        }
    };
    match dispatch(&workflow, cli.command) {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("error: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

fn program_name(workflow: &Workflow) -> String {
    std::env::args_os()
        .next()
        .and_then(|a| {
            Path::new(&a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| workflow.name().to_string())
}

fn after_help(bin: &str) -> String {
    format!(
        "Examples:
  {bin} spec > agent.json                   the WorkflowSpec (what `saap check`/`explore` read)
  {bin} check                               the static checks of `saap check`
  {bin} run --message \"reset my password\"   start a run, stream its display events, print the result
  {bin} run --event '{{\"_event_name\": \"UserMessageEvent\", \"message\": \"hi\"}}'
  {bin} send RUN --event JSON               continue a waiting run (e.g. a human's answer)
  {bin} runs                                the newest stored runs, 20 a page (--offset N)
  {bin} runs --status live                  the runs that wait for an event
  {bin} show RUN                            the run's timeline: events and decisions
  {bin} show RUN --history-out run.json     then: saap explain agent.json --history run.json
  {bin} run --engine nats://HOST:PORT       serve the agent class as a NATS worker
  {bin} runs --engine nats://HOST:PORT      the class's runs on NATS (send, show too)

Runs are stored in --db PATH (default: $SAAP_STATE_DIR, $XDG_STATE_HOME/saap or
~/.local/state/saap, file <agent>.db), or on NATS JetStream with --engine nats://HOST:PORT.

Exit codes: 0 ok, 1 problems found (check errors; a run that failed or still waits),
2 invalid input or usage, 3 internal or I/O failure."
    )
}

#[derive(Parser)]
#[command(version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size of `run`'s flags does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Print the agent's WorkflowSpec as JSON (the input of `saap check`, `simulate`, `explore`).
    Spec(SpecArgs),
    /// Run the static checks of `saap check` on this agent's spec.
    Check(CheckArgs),
    /// Start a run, stream its display events, and print how it ended.
    Run(RunArgs),
    /// Send an event to a stored live run (e.g. a human's answer) and follow it.
    Send(SendArgs),
    /// List stored runs, newest first, a page at a time, with their status.
    Runs(RunsArgs),
    /// Show one stored run: its events and the dispatcher's decisions.
    Show(ShowArgs),
}

#[derive(clap::Args)]
struct SpecArgs {
    /// Accepted for uniformity: the spec is always JSON.
    #[arg(long)]
    json: bool,
    /// Print the workflow graph as Mermaid instead of the JSON spec.
    #[arg(long, conflicts_with = "json")]
    mermaid: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Deny {
    /// Warnings count as errors for the exit code.
    Warnings,
}

#[derive(clap::Args)]
#[command(
    after_help = "Each finding names a stable code (SAAP001…, see docs/checks.md), the step and parameter, what is
wrong, why it breaks at runtime and the fix. Same output as `saap check` on the spec.

Exit codes: 0 no errors (warnings allowed unless denied), 1 errors found."
)]
struct CheckArgs {
    /// Print JSON: {spec, name, findings, summary: {errors, warnings}}.
    #[arg(long)]
    json: bool,
    /// Treat warnings as errors for the exit code (`--deny warnings`).
    #[arg(long, value_enum)]
    deny: Vec<Deny>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum EngineKind {
    /// Embedded and durable: the run is kept in the SQLite database (--db).
    Sqlite,
    /// In memory: nothing is kept (`runs`/`show` will not see the run).
    Memory,
}

/// The value of `run --engine`.
#[derive(Clone, Debug, PartialEq, Eq)]
enum EngineArg {
    Local(EngineKind),
    /// A NATS server URL (list), for the distributed engine.
    Nats(String),
}

fn parse_engine_arg(value: &str) -> Result<EngineArg, String> {
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
struct NatsArgs {
    /// Environment variable holding the NATS token.
    #[arg(long, value_name = "VAR")]
    nats_token_env: Option<String>,
    /// NATS user name (the password comes from --nats-password-env).
    #[arg(long, value_name = "USER")]
    nats_user: Option<String>,
    /// Environment variable holding the NATS password.
    #[arg(long, value_name = "VAR")]
    nats_password_env: Option<String>,
    /// File holding an nkey seed.
    #[arg(long, value_name = "FILE")]
    nats_nkey_seed_file: Option<PathBuf>,
    /// A NATS .creds file.
    #[arg(long, value_name = "FILE")]
    nats_creds: Option<PathBuf>,
    /// Extra CA certificate (PEM) to trust; repeatable.
    #[arg(long, value_name = "FILE")]
    nats_tls_ca: Vec<PathBuf>,
    /// Client certificate (PEM) for mutual TLS.
    #[arg(long, value_name = "FILE")]
    nats_tls_cert: Option<PathBuf>,
    /// Client key (PEM) for mutual TLS.
    #[arg(long, value_name = "FILE")]
    nats_tls_key: Option<PathBuf>,
    /// Require TLS.
    #[arg(long)]
    nats_tls_required: bool,
}

/// Where the step bodies of `run --engine nats://…` run (run only).
#[cfg(feature = "nats")]
#[derive(clap::Args)]
struct StepsArgs {
    /// With --engine nats://…: where step bodies run: local (on the run's owner, default) or shared (on any worker
    /// of the class through its work queue; every worker of a class must use the same).
    #[arg(long, value_name = "MODE", default_value = "local", value_parser = parse_steps)]
    steps: crate::nats::Steps,
    /// With --steps shared: bodies this worker runs at once before it hands started ones to
    /// the work queue (default: 64, a bound on bodies waiting on I/O, not on CPUs; 0: every body through the queue).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=4096))]
    local_slots: Option<u32>,
}

#[cfg(feature = "nats")]
fn parse_steps(value: &str) -> Result<crate::nats::Steps, String> {
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
fn worker_options(n: &StepsArgs) -> Result<crate::nats::WorkerOptions, Fail> {
    let mut opts = crate::nats::WorkerOptions {
        steps: n.steps,
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
struct StoreArgs {
    /// The database of runs (default: <state dir>/<agent>.db, see --help of the agent).
    #[arg(long, value_name = "PATH")]
    db: Option<PathBuf>,
}

#[derive(clap::Args)]
#[command(
    after_help = "The start event is either --message TEXT (a UserMessageEvent) or --event JSON: an object
with `_event_name` (a start event type of the agent) and the event's fields. --event @FILE reads
the JSON from a file, --event - from stdin. --config JSON (or @FILE) is the run's config: it
travels in the start event's `_config`, is merged over the agent's defaults and is checked
before the run starts (SAAP-C001/C002, exit 2).

Display events (chunks, thoughts, costs, questions) are printed as they arrive; chunks are
streamed as text. With --json every display event is one JSON line, and the last line is the
result: {run_id, status, result: {event, fields}, executions}.

Exit codes: 0 the run stopped, 1 it ended with an exception or still waits after --timeout
(it stays stored: see `show RUN`), 2 invalid start event, 3 database failure."
)]
struct RunArgs {
    /// Start with a UserMessageEvent carrying this message.
    #[arg(long, short, value_name = "TEXT", conflicts_with = "event")]
    message: Option<String>,
    /// Start with this event: JSON `{"_event_name": "...", ...fields}`, `@FILE` or `-`.
    #[arg(long, short, value_name = "JSON")]
    event: Option<String>,
    /// The run's config (JSON object, `@FILE` or `-`): put in the start event's `_config`,
    /// merged over the agent's defaults and checked before the run starts.
    #[arg(long, value_name = "JSON")]
    config: Option<String>,
    /// Continue a conversation: run in this thread (shares its ThreadContext).
    #[arg(long, value_name = "ID")]
    thread: Option<String>,
    /// Where runs are kept: sqlite (default, durable), memory, or nats://HOST:PORT (tls://…):
    /// serve the agent class as one worker of the distributed engine on NATS JetStream.
    #[arg(long, default_value = "sqlite", value_name = "ENGINE", value_parser = parse_engine_arg)]
    engine: EngineArg,
    #[command(flatten)]
    store: StoreArgs,
    #[cfg(feature = "nats")]
    #[command(flatten)]
    nats: NatsArgs,
    #[cfg(feature = "nats")]
    #[command(flatten)]
    steps: StepsArgs,
    /// Seconds to wait for the run to end before leaving it stored and live.
    #[arg(long, default_value_t = 60.0, value_name = "SECS")]
    timeout: f64,
    /// Print JSON lines (display events, then the result).
    #[arg(long)]
    json: bool,
}

/// Where `send`, `runs` and `show` find the runs.
#[derive(clap::Args)]
struct ReadArgs {
    /// Where the runs are: sqlite (default: the database --db) or nats://HOST:PORT (tls://…):
    /// the agent class's journal on NATS JetStream (the same credential and TLS flags as
    /// `run --engine nats://…`).
    #[arg(long, default_value = "sqlite", value_name = "ENGINE", value_parser = parse_engine_arg)]
    engine: EngineArg,
    #[command(flatten)]
    store: StoreArgs,
    #[cfg(feature = "nats")]
    #[command(flatten)]
    nats: NatsArgs,
}

#[derive(clap::Args)]
#[command(
    after_help = "With the embedded engine (default) the database is opened (its live runs are resumed in this
process), the event is appended to the run, and its display events are streamed until it ends
or --timeout passes, as with `run`. With --engine nats://HOST:PORT the event is published on the
agent class's stream for the run (Nats-Msg-Id = event id): the workers dispatch it, and this
command follows the run's journal until it ends or --timeout passes.

Examples (the approval agent waits for a human):
  send RUN --event '{\"_event_name\": \"ApprovalGiven\", \"approved\": true, \"by\": \"ann\"}'
  send RUN --event @answer.json --engine nats://127.0.0.1:4222 --timeout 10
  runs --status live                    which runs wait for an event

Exit codes: 0 the run stopped, 1 it failed or still waits, 2 unknown run, ended run or invalid
event, 3 database or server failure."
)]
struct SendArgs {
    /// The run id (or a unique prefix of it), as printed by `run` and `runs`.
    run: String,
    /// The event: JSON `{"_event_name": "...", ...fields}`, `@FILE` or `-`.
    #[arg(long, short, value_name = "JSON")]
    event: String,
    #[command(flatten)]
    from: ReadArgs,
    /// Seconds to wait for the run to end.
    #[arg(long, default_value_t = 60.0, value_name = "SECS")]
    timeout: f64,
    /// Print JSON lines (display events, then the result).
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum StatusArg {
    /// Not ended: waiting for events or running steps.
    Live,
    /// Ended (stopped or failed).
    Ended,
    /// Ended by a stop event.
    Stopped,
    /// Ended by an exception event.
    Failed,
}

impl StatusArg {
    fn filter(self) -> crate::backend::StatusFilter {
        use crate::backend::StatusFilter as F;
        match self {
            StatusArg::Live => F::Live,
            StatusArg::Ended => F::Ended,
            StatusArg::Stopped => F::Stopped,
            StatusArg::Failed => F::Failed,
        }
    }
}

#[derive(clap::Args)]
#[command(
    after_help = "Runs are listed newest first, one page at a time: each line comes from the store's run
record and the end of its journal, so a page costs the same however many runs are stored.

Examples:
  runs                                  the 20 newest runs
  runs --status live                    runs still waiting (continue one with `send RUN`)
  runs --status failed --limit 5        the 5 newest runs that ended with an exception
  runs --after RUN                      the next page: the runs older than RUN (the last listed)
  runs --offset 20                      the same by position
  runs --json | jq -r '.runs[].run_id'  ids for scripts (the shape: see --json above)
  runs --engine nats://127.0.0.1:4222   the runs of the agent class on NATS JetStream

Exit codes: 0 listed (an empty list too), 2 invalid flags, 3 database or server failure."
)]
struct RunsArgs {
    #[command(flatten)]
    from: ReadArgs,
    /// Only runs with this status.
    #[arg(long, value_enum)]
    status: Option<StatusArg>,
    /// How many runs to list (at most 10000).
    #[arg(long, default_value_t = 20, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    limit: u32,
    /// Skip this many (newest) matching runs: the next page starts at the previous offset
    /// plus the limit.
    #[arg(long, default_value_t = 0, value_name = "N")]
    offset: u64,
    /// List the runs after this one (older): the last run of the previous page. Costs the
    /// same on every page, where --offset grows with the runs skipped.
    #[arg(long, value_name = "RUN")]
    after: Option<String>,
    /// Print JSON: {runs: [{run_id, thread_id, status, started, events, journal_entries}],
    /// offset, more, next_offset, next_after}.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
#[command(
    after_help = "RUN is a run id as printed by `run` and `runs` (a unique prefix is enough). Only that run is
read: its journal is replayed through the dispatch core (no step runs) and checked against its
stored decision records.

Examples:
  show RUN                              the timeline of events and decisions
  show RUN --json                       events with fields, records, executions
  show RUN --history-out run.json       a History file for `saap explain SPEC --history run.json`
  show RUN --engine nats://127.0.0.1:4222   a run of the agent class on NATS JetStream

Exit codes: 0 shown, 2 unknown or ambiguous run id, 3 database or server failure, or a
journal that does not replay."
)]
struct ShowArgs {
    /// The run id (or a unique prefix of it).
    run: String,
    #[command(flatten)]
    from: ReadArgs,
    /// Print JSON: {run_id, thread_id, workflow, status, events, records, executions, result,
    /// execution_counts, owner (on NATS, the worker that owns a live run)}.
    #[arg(long)]
    json: bool,
    /// Also write the run as a History file (the input of `saap explain --history`).
    #[arg(long, value_name = "FILE")]
    history_out: Option<PathBuf>,
}

/// A failure with its exit code.
struct Fail {
    code: u8,
    message: String,
}

fn invalid(message: impl Into<String>) -> Fail {
    Fail {
        code: 2,
        message: message.into(),
    }
}

fn internal(message: impl Into<String>) -> Fail {
    Fail {
        code: 3,
        message: message.into(),
    }
}

fn io(e: std::io::Error) -> Fail {
    internal(format!("cannot write the output: {e}"))
}

fn engine_fail(e: EngineError) -> Fail {
    match e {
        EngineError::Store(_) | EngineError::Core { .. } | EngineError::Replay { .. } => {
            internal(e.to_string())
        }
        _ => invalid(e.to_string()),
    }
}

fn dispatch(workflow: &Workflow, command: Command) -> Result<u8, Fail> {
    match command {
        Command::Spec(a) => spec(workflow, &a),
        Command::Check(a) => check_cmd(workflow, &a),
        Command::Run(a) => block_on(run_cmd(workflow, a)),
        Command::Send(a) => block_on(send_cmd(workflow, a)),
        Command::Runs(a) => block_on(runs_cmd(workflow, a)),
        Command::Show(a) => block_on(show_cmd(workflow, a)),
    }
}

fn block_on<F: std::future::Future<Output = Result<u8, Fail>>>(f: F) -> Result<u8, Fail> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| internal(format!("cannot start the async runtime: {e}")))?
        .block_on(f)
}

fn spec(workflow: &Workflow, a: &SpecArgs) -> Result<u8, Fail> {
    let mut out = std::io::stdout().lock();
    if a.mermaid {
        out.write_all(crate::snapshot::mermaid(workflow.spec()).as_bytes())
            .map_err(io)?;
    } else {
        writeln!(out, "{}", workflow.spec_json()).map_err(io)?;
    }
    Ok(0)
}

fn check_cmd(workflow: &Workflow, a: &CheckArgs) -> Result<u8, Fail> {
    let spec = workflow.compiled();
    let findings = check(spec);
    let summary = summarize(&findings);
    let shown = format!("agent {}", workflow.name());
    let mut out = std::io::stdout().lock();
    if a.json {
        let doc = json!({
            "spec": shown,
            "name": spec.name,
            "findings": findings,
            "summary": summary,
        });
        serde_json::to_writer_pretty(&mut out, &doc)
            .map_err(|e| internal(format!("cannot write JSON: {e}")))?;
        writeln!(out).map_err(io)?;
    } else {
        out.write_all(render_check(&shown, spec.steps.len(), &findings, summary).as_bytes())
            .map_err(io)?;
    }
    let deny = a.deny.contains(&Deny::Warnings);
    let failed = summary.errors > 0 || (deny && summary.warnings > 0);
    if failed && deny && summary.errors == 0 {
        eprintln!("check: warnings are denied (--deny warnings)");
    }
    Ok(u8::from(failed))
}

/// The human report of `check`: errors, then warnings, each finding with indented `rule:`,
/// `why:` and `fix:` lines, and a summary line. `saap check` prints the same.
pub fn render_check(spec: &str, steps: usize, findings: &[Finding], summary: Summary) -> String {
    let mut s = String::new();
    for sev in [Severity::Error, Severity::Warning] {
        for f in findings.iter().filter(|f| f.severity == sev) {
            s.push_str(&format!("{}[{}]", f.severity.as_str(), f.code));
            if let Some(step) = &f.step {
                s.push_str(&format!(" step `{step}`"));
            }
            if let Some(param) = &f.param {
                s.push_str(&format!(" param `{param}`"));
            }
            s.push_str(&format!(": {}\n", f.message));
            s.push_str(&format!("  rule: {}\n", f.rule));
            s.push_str(&format!("  why: {}\n", f.why));
            s.push_str(&format!("  fix: {}\n\n", f.fix));
        }
    }
    let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    if findings.is_empty() {
        s.push_str(&format!(
            "{spec}: ok, no findings ({} checked)\n",
            plural(steps, "step")
        ));
    } else {
        s.push_str(&format!(
            "{spec}: {}, {} ({} checked)\n",
            plural(summary.errors, "error"),
            plural(summary.warnings, "warning"),
            plural(steps, "step")
        ));
    }
    s
}

/// The default database of an agent: `<state dir>/<agent>.db`.
pub fn default_db(workflow: &Workflow) -> PathBuf {
    let dir = if let Some(d) = std::env::var_os("SAAP_STATE_DIR").filter(|d| !d.is_empty()) {
        PathBuf::from(d)
    } else if let Some(d) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        PathBuf::from(d).join("saap")
    } else if let Some(h) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        PathBuf::from(h).join(".local/state/saap")
    } else {
        PathBuf::from(".saap")
    };
    let file: String = workflow
        .name()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    dir.join(format!("{file}.db"))
}

fn db_path(workflow: &Workflow, store: &StoreArgs) -> PathBuf {
    store.db.clone().unwrap_or_else(|| default_db(workflow))
}

fn open_store(path: &Path) -> Result<Arc<dyn Backend>, Fail> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| {
            internal(format!(
                "cannot create the state directory `{}`: {e}; pass --db PATH or set SAAP_STATE_DIR",
                dir.display()
            ))
        })?;
    }
    let backend = SqliteBackend::open(path).map_err(|e| internal(e.to_string()))?;
    Ok(Arc::new(backend))
}

/// Reads a JSON argument: literal text, `@FILE` or `-` (stdin), bounded.
fn json_arg(flag: &str, src: &str) -> Result<(String, Value), Fail> {
    let (what, text) = if src == "-" {
        let mut buf = String::new();
        std::io::stdin()
            .take(MAX_START_EVENT_BYTES + 1)
            .read_to_string(&mut buf)
            .map_err(|e| invalid(format!("cannot read {flag} from stdin: {e}")))?;
        ("stdin".to_string(), buf)
    } else if let Some(file) = src.strip_prefix('@') {
        let mut buf = String::new();
        std::fs::File::open(file)
            .map_err(|e| invalid(format!("cannot open {flag} file `{file}`: {e}")))?
            .take(MAX_START_EVENT_BYTES + 1)
            .read_to_string(&mut buf)
            .map_err(|e| invalid(format!("cannot read {flag} file `{file}`: {e}")))?;
        (file.to_string(), buf)
    } else {
        (flag.to_string(), src.to_string())
    };
    if text.len() as u64 > MAX_START_EVENT_BYTES {
        return Err(invalid(format!(
            "{what}: larger than {MAX_START_EVENT_BYTES} bytes; pass large data by reference"
        )));
    }
    let value: Value = serde_json::from_str(&text).map_err(|e| {
        invalid(format!(
            "{what}:{}:{}: not valid JSON: {e}",
            e.line(),
            e.column()
        ))
    })?;
    Ok((what, value))
}

/// The start event: (type name, fields), with `--config` in `_config`.
fn start_event(a: &RunArgs) -> Result<(String, Value), Fail> {
    let (name, mut fields) = if let Some(m) = &a.message {
        let mut f = serde_json::Map::new();
        f.insert("message".into(), Value::from(m.as_str()));
        ("UserMessageEvent".to_string(), f)
    } else if let Some(src) = &a.event {
        let (what, value) = json_arg("--event", src)?;
        let Value::Object(mut fields) = value else {
            return Err(invalid(format!(
                "{what}: the start event must be a JSON object like {{\"_event_name\": \"UserMessageEvent\", \"message\": \"hi\"}}"
            )));
        };
        let name = match fields.remove("_event_name") {
            Some(Value::String(n)) => n,
            _ => {
                return Err(invalid(format!(
                    "{what}: the start event needs `_event_name`, the name of a start event type, e.g. \"UserMessageEvent\""
                )));
            }
        };
        for envelope in ["_parent_event_names", "event_id", "created_at"] {
            fields.remove(envelope);
        }
        (name, fields)
    } else {
        return Err(invalid(
            "no start event: pass --message TEXT or --event JSON (e.g. --event '{\"_event_name\": \"UserMessageEvent\", \"message\": \"hi\"}')",
        ));
    };
    if let Some(src) = &a.config {
        let (what, value) = json_arg("--config", src)?;
        if !value.is_object() {
            return Err(invalid(format!(
                "{what}: the config must be a JSON object of the agent's config fields, e.g. {{\"top_k\": 3}}"
            )));
        }
        fields.insert(crate::config::CONFIG_FIELD.to_string(), value);
    }
    Ok((name, Value::Object(fields)))
}

async fn open_engine(
    workflow: &Workflow,
    kind: EngineKind,
    store: &StoreArgs,
) -> Result<Engine, Fail> {
    Ok(match kind {
        EngineKind::Memory => Engine::in_memory(workflow.clone()),
        EngineKind::Sqlite => {
            let path = db_path(workflow, store);
            let backend = open_store(&path)?;
            let (engine, recovery) =
                Engine::open(workflow.clone(), backend, EngineOptions::default())
                    .await
                    .map_err(|e| internal(e.to_string()))?;
            if recovery.resumed_runs > 0 {
                eprintln!(
                    "resumed {} live run(s) found in {} ({} execution(s) re-run)",
                    recovery.resumed_runs,
                    path.display(),
                    recovery.retried_executions
                );
            }
            for f in &recovery.failed {
                eprintln!("warning: {f}");
            }
            engine
        }
    })
}

async fn run_cmd(workflow: &Workflow, a: RunArgs) -> Result<u8, Fail> {
    let kind = match &a.engine {
        EngineArg::Local(kind) => *kind,
        #[cfg(feature = "nats")]
        EngineArg::Nats(url) => return serve_nats(workflow, url, &a).await,
        #[cfg(not(feature = "nats"))]
        EngineArg::Nats(_) => {
            return Err(invalid(
                "this agent was built without the `nats` feature of saap",
            ));
        }
    };
    let (name, fields) = start_event(&a)?;
    let engine = open_engine(workflow, kind, &a.store).await?;
    let run_id = engine
        .start_run_named(
            a.thread.as_deref(),
            &name,
            crate::event::Payload::from_json(fields),
        )
        .await
        .map_err(engine_fail)?;
    eprintln!("run {run_id} started ({name})");
    follow(&engine, &run_id, 0, None, a.timeout, a.json).await
}

/// The connection options of `--engine nats://…` and the credential/TLS flags.
#[cfg(feature = "nats")]
fn nats_options(url: &str, n: &NatsArgs) -> Result<crate::nats::NatsOptions, Fail> {
    crate::nats::EngineConnect {
        url: url.to_string(),
        token_env: n.nats_token_env.clone(),
        user: n.nats_user.clone(),
        password_env: n.nats_password_env.clone(),
        nkey_seed_file: n.nats_nkey_seed_file.clone(),
        creds_file: n.nats_creds.clone(),
        tls_ca: n.nats_tls_ca.clone(),
        tls_cert: n.nats_tls_cert.clone(),
        tls_key: n.nats_tls_key.clone(),
        tls_required: n.nats_tls_required,
    }
    .options()
    .map_err(|e| invalid(e.to_string()))
}

/// `run --engine nats://…`: one worker of the agent class on NATS JetStream, serving until
/// the process is stopped (runs stay in JetStream; another worker or a restart resumes them).
/// A start event given with --message/--event is published on the class stream first.
#[cfg(feature = "nats")]
async fn serve_nats(workflow: &Workflow, url: &str, a: &RunArgs) -> Result<u8, Fail> {
    use crate::nats::Worker;
    let opts = nats_options(url, &a.nats)?;
    let worker = Worker::connect(&opts, workflow.clone(), worker_options(&a.steps)?)
        .await
        .map_err(|e| internal(opts.sanitize(&e.to_string())))?;
    eprintln!(
        "worker {} of agent class {} serving on {}",
        worker.id(),
        workflow.name(),
        opts.redacted_servers()
    );
    if a.message.is_some() || a.event.is_some() {
        let (name, fields) = start_event(a)?;
        let id = saap_nats::ids::fresh_event_id();
        let mut env = saap_protocol::EventEnvelope::new(
            &workflow.compiled().hierarchy,
            &name,
            id,
            saap_nats::ids::now_ns(),
        )
        .ok_or_else(|| invalid(format!("`{name}` is not an event type of this agent")))?;
        if let Value::Object(fields) = fields {
            for (k, v) in fields {
                env = env.with_field(&k, v);
            }
        }
        let run_id = saap_nats::ids::fresh_event_id().to_string();
        let thread = a
            .thread
            .clone()
            .unwrap_or_else(|| saap_nats::ids::fresh_event_id().to_string());
        let address =
            saap_protocol::RunAddress::new(workflow.name(), "cli", &thread, &run_id, &run_id)
                .map_err(|e| invalid(e.to_string()))?;
        let nats = saap_nats::SaapNats::connect(&opts)
            .await
            .map_err(|e| internal(opts.sanitize(&e.to_string())))?;
        nats.publish_control(&address, &env)
            .await
            .map_err(|e| internal(opts.sanitize(&e.to_string())))?;
        eprintln!("run {run_id} started ({name}) on the class stream");
    }
    worker
        .serve()
        .await
        .map_err(|e| internal(opts.sanitize(&e.to_string())))?;
    Ok(0)
}

/// The event of `send --event`: (type name, fields).
fn send_event(a: &SendArgs) -> Result<(String, Value), Fail> {
    let (what, value) = json_arg("--event", &a.event)?;
    let Value::Object(mut fields) = value else {
        return Err(invalid(format!(
            "{what}: the event must be a JSON object like {{\"_event_name\": \"ApprovalGiven\", ...fields}}"
        )));
    };
    let Some(Value::String(name)) = fields.remove("_event_name") else {
        return Err(invalid(format!(
            "{what}: the event needs `_event_name`, the name of an event type of the agent"
        )));
    };
    for envelope in ["_parent_event_names", "event_id", "created_at"] {
        fields.remove(envelope);
    }
    Ok((name, Value::Object(fields)))
}

fn ended_run(run_id: &str, run: &saap_dispatch::Run) -> Fail {
    invalid(format!(
        "run {run_id} has ended ({}); an event sent now would only be kept as evidence, never dispatched: start a new run",
        RunOutcome::of(run).as_str()
    ))
}

async fn send_cmd(workflow: &Workflow, a: SendArgs) -> Result<u8, Fail> {
    let (name, fields) = send_event(&a)?;
    let kind = match &a.from.engine {
        EngineArg::Local(EngineKind::Memory) => return Err(memory_keeps_nothing("send")),
        EngineArg::Local(kind) => *kind,
        #[cfg(feature = "nats")]
        EngineArg::Nats(url) => return send_nats(workflow, url, &a, &name, fields).await,
        #[cfg(not(feature = "nats"))]
        EngineArg::Nats(_) => {
            return Err(invalid(
                "this agent was built without the `nats` feature of saap",
            ));
        }
    };
    let path = db_path(workflow, &a.from.store);
    if !path.exists() {
        return Err(invalid(format!(
            "no database {}; start a run first with `run`",
            path.display()
        )));
    }
    let engine = open_engine(workflow, kind, &a.from.store).await?;
    let place = path.display().to_string();
    let run_id = resolve_run(workflow, engine.backend(), &place, &a.run).await?;
    let snap = engine
        .stored_snapshot(&run_id)
        .await
        .map_err(engine_fail)?
        .ok_or_else(|| internal(format!("run `{run_id}` vanished from {place}")))?;
    if snap.run.is_terminated() {
        return Err(ended_run(&run_id, &snap.run));
    }
    let from = snap.run.log().len();
    let id = engine
        .send_named(&run_id, &name, crate::event::Payload::from_json(fields))
        .await
        .map_err(engine_fail)?;
    eprintln!("sent {name} {id} to run {run_id}");
    follow(&engine, &run_id, from, Some(id), a.timeout, a.json).await
}

fn memory_keeps_nothing(cmd: &str) -> Fail {
    invalid(format!(
        "`{cmd}` reads stored runs, and the memory engine keeps none: use --engine sqlite (the default) or --engine nats://HOST:PORT"
    ))
}

/// `send --engine nats://…`: publishes the event on the class stream for the run (the
/// workers dispatch it), then follows the run's journal.
#[cfg(feature = "nats")]
async fn send_nats(
    workflow: &Workflow,
    url: &str,
    a: &SendArgs,
    name: &str,
    fields: Value,
) -> Result<u8, Fail> {
    let (reader, opts) = open_nats_reader(workflow, url, &a.from).await?;
    let run_id = resolve_run(workflow, &reader.backend, &reader.place, &a.run).await?;
    let view = read_view(workflow, &reader, &run_id).await?;
    if view.run.is_terminated() {
        return Err(ended_run(&run_id, &view.run));
    }
    let from = view.run.log().len();
    let id = saap_nats::ids::fresh_event_id();
    let mut env = saap_protocol::EventEnvelope::new(
        &workflow.compiled().hierarchy,
        name,
        id,
        saap_nats::ids::now_ns(),
    )
    .ok_or_else(|| {
        invalid(format!(
            "`{name}` is not an event type of `{}`; see its types with `spec`",
            workflow.name()
        ))
    })?;
    if let Value::Object(fields) = fields {
        for (k, v) in fields {
            env = env.with_field(&k, v);
        }
    }
    let nats = reader.nats.nats();
    // The run's address as its owner published it; else (no owner now) the journal's.
    let owner = crate::nats::run_owner(nats, workflow.name(), &run_id)
        .await
        .map_err(|e| internal(opts.sanitize(&e.to_string())))?;
    let (agent, thread, display) = match owner {
        Some(o) => (o.agent_id, o.thread_id, o.display_id),
        None => ("cli".to_string(), view.thread_id.clone(), run_id.clone()),
    };
    let address =
        saap_protocol::RunAddress::new(workflow.name(), &agent, &thread, &display, &run_id)
            .map_err(|e| invalid(e.to_string()))?;
    nats.publish_control(&address, &env)
        .await
        .map_err(|e| internal(opts.sanitize(&e.to_string())))?;
    eprintln!("sent {name} {id} to run {run_id} on the class stream");
    follow_stored(workflow, &reader, &run_id, from, id, a.timeout, a.json).await
}

/// Follows a run by looking at its last journal message every 100 ms and reading the
/// journal again when it changed (the NATS engine: the run lives in worker processes), printing display events after `from` and the end as `follow` does.
#[cfg(feature = "nats")]
async fn follow_stored(
    workflow: &Workflow,
    reader: &NatsReader,
    run_id: &str,
    from: usize,
    sent: saap_dispatch::EventId,
    timeout: f64,
    json_lines: bool,
) -> Result<u8, Fail> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(timeout.max(0.0));
    let mut shown = from;
    let mut out = std::io::stdout();
    let mut mid_line = false;
    let mut last_seq = None;
    let mut current: Option<RunSnapshot> = None;
    loop {
        // Re-read and rebuild the run only when its journal has a new message.
        let seq = reader
            .nats
            .last_journal_seq(run_id)
            .await
            .map_err(|e| internal(e.to_string()))?;
        if current.is_none() || seq != last_seq {
            last_seq = seq;
            let snap = view_snapshot(read_view(workflow, reader, run_id).await?);
            for at in shown..snap.run.log().len() {
                if snap.run.log()[at].id == sent {
                    continue;
                }
                mid_line = show_display(&snap, at, json_lines, &mut out, mid_line).map_err(io)?;
            }
            shown = shown.max(snap.run.log().len());
            let ended = snap.run.is_terminated() && snap.running() == 0;
            current = Some(snap);
            if ended {
                break;
            }
        }
        if tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let snap = current.ok_or_else(|| internal(format!("run `{run_id}` vanished")))?;
    if mid_line {
        writeln!(out).map_err(io)?;
    }
    report(&snap, run_id, timeout, json_lines, &mut out)
}

/// A rebuilt stored run as a snapshot (payloads by position; the ExceptionEvent the core
/// made for a failed step carries the step's error).
#[cfg(feature = "nats")]
fn view_snapshot(view: StoredRunView) -> RunSnapshot {
    let payloads = (0..view.run.log().len())
        .map(|seq| {
            let id = view.run.log()[seq].id;
            view.payloads
                .get(&id)
                .cloned()
                .unwrap_or_else(|| crate::event::Payload::from_json(view.fields(seq as u32)))
        })
        .collect();
    RunSnapshot {
        run_id: view.run_id,
        thread_id: view.thread_id,
        run: view.run,
        payloads,
        failure: None,
        display_by: view.display_by,
    }
}

/// Streams a run's display events from `from` on until it ends or `timeout` passes, then
/// prints how it stands. Exit code: 0 stopped, 1 failed or still live.
async fn follow(
    engine: &Engine,
    run_id: &str,
    from: usize,
    sent: Option<saap_dispatch::EventId>,
    timeout: f64,
    json_lines: bool,
) -> Result<u8, Fail> {
    let mut watch = engine.watch(run_id).map_err(engine_fail)?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(timeout.max(0.0));
    let mut shown = from;
    let mut out = std::io::stdout();
    let mut mid_line = false;
    let snap = loop {
        let snap = engine
            .snapshot(run_id)
            .ok_or_else(|| internal(format!("run `{run_id}` vanished from the engine")))?;
        for seq in shown..snap.run.log().len() {
            if Some(snap.run.log()[seq].id) == sent {
                continue; // the event this command sent
            }
            mid_line = show_display(&snap, seq, json_lines, &mut out, mid_line).map_err(io)?;
        }
        shown = shown.max(snap.run.log().len());
        let ended = snap.run.is_terminated() && snap.running() == 0;
        if ended || snap.failure.is_some() {
            break snap;
        }
        match tokio::time::timeout_at(deadline, watch.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) | Err(_) => break snap,
        }
    };
    if mid_line {
        writeln!(out).map_err(io)?;
    }
    // The end is reported only once it is durable.
    if snap.run.is_terminated() {
        let _ = tokio::time::timeout_at(deadline, engine.wait_for_end(run_id)).await;
    }
    report(&snap, run_id, timeout, json_lines, &mut out)
}

/// Prints how a followed run stands (the result line, or what it waits for) and returns the
/// exit code: 0 stopped, 1 failed or still live.
fn report(
    snap: &RunSnapshot,
    run_id: &str,
    timeout: f64,
    json_lines: bool,
    out: &mut impl Write,
) -> Result<u8, Fail> {
    let outcome = RunOutcome::of(&snap.run);
    let result = terminal(snap);
    if json_lines {
        let line = json!({
            "run_id": run_id,
            "thread_id": snap.thread_id,
            "status": outcome.as_str(),
            "result": result.as_ref().map(|(n, f)| json!({"event": n, "fields": f})),
            "executions": counts_json(&snap.run),
            "waiting_for": (outcome == RunOutcome::Live).then(|| snap.waiting_for()),
        });
        writeln!(out, "{line}").map_err(io)?;
    } else {
        match &result {
            Some((n, f)) => {
                writeln!(out, "{n} {f}").map_err(io)?;
                eprintln!(
                    "run {run_id} {} ({}); executions: {}",
                    outcome.as_str(),
                    n,
                    counts_text(&snap.run)
                );
            }
            None => {
                eprintln!(
                    "run {run_id} is still live after {timeout}s; it stays stored: `show {run_id}` reads it, `send {run_id} --event JSON` continues it.\n{}",
                    snap.waiting_for()
                );
            }
        }
    }
    Ok(match outcome {
        RunOutcome::Stopped => 0,
        _ => 1,
    })
}

/// Prints the event at `seq` if it is a display event that does not end the run. Returns
/// whether the output is in the middle of a line (after streamed chunks).
fn show_display(
    snap: &RunSnapshot,
    seq: usize,
    json_lines: bool,
    out: &mut impl Write,
    mid_line: bool,
) -> std::io::Result<bool> {
    let e = snap.run.log()[seq];
    if !e.kind.is_display() || e.kind.is_terminal() || e.kind.is_start() {
        return Ok(mid_line);
    }
    let name = snap.run.type_name(e.ty);
    let fields = snap.payloads.get(seq).map(|p| (**p).clone());
    let fields = fields.unwrap_or(Value::Null);
    if json_lines {
        writeln!(
            out,
            "{}",
            json!({"display": {"event": name, "event_id": e.id.to_string(), "fields": fields}})
        )?;
        return Ok(false);
    }
    if name == "ChunkEvent"
        && let Some(chunk) = fields.get("chunk").and_then(Value::as_str)
    {
        write!(out, "{chunk}")?;
        out.flush()?;
        return Ok(true);
    }
    if mid_line {
        writeln!(out)?;
    }
    writeln!(out, "[{name}] {fields}")?;
    out.flush()?;
    Ok(false)
}

fn terminal(snap: &RunSnapshot) -> Option<(String, Value)> {
    match snap.run.status() {
        saap_dispatch::RunStatus::Terminated { by } => {
            let ty = snap.run.log()[by as usize].ty;
            let fields = snap
                .payloads
                .get(by as usize)
                .map(|p| (**p).clone())
                .unwrap_or(Value::Null);
            Some((snap.run.type_name(ty).to_string(), fields))
        }
        _ => None,
    }
}

fn counts(run: &saap_dispatch::Run) -> Vec<(String, usize)> {
    run.spec()
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.clone(), run.execution_count(i as u32)))
        .collect()
}

fn counts_text(run: &saap_dispatch::Run) -> String {
    counts(run)
        .iter()
        .map(|(n, c)| format!("{n} ×{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn counts_json(run: &saap_dispatch::Run) -> Value {
    Value::Object(
        counts(run)
            .into_iter()
            .map(|(n, c)| (n, Value::from(c)))
            .collect(),
    )
}

/// An open store to read runs from, and where it is (for messages).
struct Reader {
    backend: Arc<dyn Backend>,
    place: String,
    /// The connection, on NATS (to read a live run's owner record).
    #[cfg(feature = "nats")]
    nats: Option<saap_nats::SaapNats>,
}

#[cfg(feature = "nats")]
struct NatsReader {
    backend: Arc<dyn Backend>,
    place: String,
    nats: crate::nats::NatsBackend,
}

/// Opens the agent class's journal on NATS for reading.
#[cfg(feature = "nats")]
async fn open_nats_reader(
    workflow: &Workflow,
    url: &str,
    from: &ReadArgs,
) -> Result<(NatsReader, crate::nats::NatsOptions), Fail> {
    let opts = nats_options(url, &from.nats)?;
    let nats = saap_nats::SaapNats::connect(&opts)
        .await
        .map_err(|e| internal(opts.sanitize(&e.to_string())))?;
    let backend = crate::nats::NatsBackend::open(
        nats,
        workflow.name(),
        workflow.compiled().hierarchy.clone(),
        crate::nats::NatsBackendOptions {
            publish_outputs: false,
            ..Default::default()
        },
    )
    .await
    .map_err(|e| internal(opts.sanitize(&e.to_string())))?;
    let reader = NatsReader {
        backend: Arc::new(backend.clone()),
        place: format!(
            "the journal of class `{}` on {}",
            workflow.name(),
            opts.redacted_servers()
        ),
        nats: backend,
    };
    Ok((reader, opts))
}

#[cfg(feature = "nats")]
async fn read_view(
    workflow: &Workflow,
    reader: &NatsReader,
    run_id: &str,
) -> Result<StoredRunView, Fail> {
    let stored = reader
        .backend
        .read_run(workflow.name(), run_id)
        .wait()
        .await
        .map_err(|e| internal(e.to_string()))?
        .ok_or_else(|| internal(format!("run `{run_id}` vanished from {}", reader.place)))?;
    StoredRunView::rebuild(workflow, &stored).map_err(|e| internal(e.to_string()))
}

/// The store `runs`/`show` read; `None`: the database does not exist (no runs yet).
async fn open_reader(workflow: &Workflow, from: &ReadArgs) -> Result<Option<Reader>, Fail> {
    match &from.engine {
        EngineArg::Local(EngineKind::Memory) => Err(memory_keeps_nothing("runs/show")),
        EngineArg::Local(EngineKind::Sqlite) => {
            let path = db_path(workflow, &from.store);
            if !path.exists() {
                return Ok(None);
            }
            Ok(Some(Reader {
                backend: open_store(&path)?,
                place: path.display().to_string(),
                #[cfg(feature = "nats")]
                nats: None,
            }))
        }
        #[cfg(feature = "nats")]
        EngineArg::Nats(url) => {
            let (r, _) = open_nats_reader(workflow, url, from).await?;
            Ok(Some(Reader {
                backend: r.backend,
                place: r.place,
                nats: Some(r.nats.nats().clone()),
            }))
        }
        #[cfg(not(feature = "nats"))]
        EngineArg::Nats(_) => Err(invalid(
            "this agent was built without the `nats` feature of saap",
        )),
    }
}

fn where_runs(from: &ReadArgs, workflow: &Workflow) -> String {
    match &from.engine {
        EngineArg::Nats(url) => format!("the class `{}` on {url}", workflow.name()),
        EngineArg::Local(_) => db_path(workflow, &from.store).display().to_string(),
    }
}

/// The run id a user typed (the id or a unique prefix), looked up in the store.
async fn resolve_run(
    workflow: &Workflow,
    backend: &Arc<dyn Backend>,
    place: &str,
    given: &str,
) -> Result<String, Fail> {
    let shown: String = given.chars().take(64).collect();
    if given.is_empty() {
        return Err(invalid(
            "the run id is empty; list the runs with `runs` (`runs --status live` for waiting ones)",
        ));
    }
    let query = crate::backend::RunQuery {
        id_prefix: Some(given.to_string()),
        limit: 2,
        ..Default::default()
    };
    let page = backend
        .list_runs(workflow.name(), &query)
        .wait()
        .await
        .map_err(|e| internal(e.to_string()))?;
    match page.runs.as_slice() {
        [one] if !page.more => Ok(one.run_id.clone()),
        [] => Err(invalid(format!(
            "no stored run `{shown}` of `{}` in {place}; list the runs with `runs` (`runs --status live` for waiting ones)",
            workflow.name()
        ))),
        _ => Err(invalid(format!(
            "`{shown}` matches several runs of `{}` in {place}; give more of the run id (see `runs`)",
            workflow.name()
        ))),
    }
}

fn status_of(s: &crate::backend::RunSummary) -> &'static str {
    use crate::backend::Termination;
    match (s.ended, s.termination) {
        (false, _) => "live",
        (true, Some(Termination::Stop)) => "stopped",
        (true, Some(Termination::Exception)) => "failed",
        (true, None) => "ended",
    }
}

fn started_of(s: &crate::backend::RunSummary) -> Option<String> {
    let secs = s.started_ns.map(|ns| ns.div_euclid(1_000_000_000))?;
    u32::try_from(secs).ok().map(utc_time)
}

async fn runs_cmd(workflow: &Workflow, a: RunsArgs) -> Result<u8, Fail> {
    let offset = usize::try_from(a.offset).unwrap_or(usize::MAX);
    let query = crate::backend::RunQuery {
        status: a.status.map(StatusArg::filter),
        id_prefix: None,
        after: a.after.clone(),
        offset,
        limit: a.limit as usize,
    };
    let (page, place) = match open_reader(workflow, &a.from).await? {
        None => (
            crate::backend::RunPage::default(),
            where_runs(&a.from, workflow),
        ),
        Some(r) => {
            let page = r
                .backend
                .list_runs(workflow.name(), &query)
                .wait()
                .await
                .map_err(|e| internal(e.to_string()))?;
            r.backend.halt();
            (page, r.place)
        }
    };
    let next = offset.saturating_add(page.runs.len());
    let mut out = std::io::stdout().lock();
    if a.json {
        let runs: Vec<Value> = page
            .runs
            .iter()
            .map(|r| {
                json!({
                    "run_id": r.run_id,
                    "thread_id": r.thread_id,
                    "status": status_of(r),
                    "started": started_of(r),
                    "events": r.events,
                    "journal_entries": r.journal_entries,
                })
            })
            .collect();
        let doc = json!({
            "runs": runs,
            "offset": offset,
            "more": page.more,
            "next_offset": page.more.then_some(next),
            "next_after": page.runs.last().filter(|_| page.more).map(|r| r.run_id.clone()),
        });
        serde_json::to_writer_pretty(&mut out, &doc)
            .map_err(|e| internal(format!("cannot write JSON: {e}")))?;
        writeln!(out).map_err(io)?;
        return Ok(0);
    }
    if page.runs.is_empty() {
        if offset > 0 || a.status.is_some() {
            eprintln!(
                "no stored runs of `{}` in {place} match (offset {offset}{}); `runs` lists the newest",
                workflow.name(),
                a.status
                    .map(|s| format!(", status {}", status_of_arg(s)))
                    .unwrap_or_default()
            );
        } else {
            eprintln!(
                "no stored runs of `{}` in {place}; start one with `run --message TEXT`",
                workflow.name()
            );
        }
        return Ok(0);
    }
    writeln!(
        out,
        "{:<24}  {:<8}  {:<19}  {:>6}",
        "run", "status", "started (UTC)", "events"
    )
    .map_err(io)?;
    for r in &page.runs {
        writeln!(
            out,
            "{:<24}  {:<8}  {:<19}  {:>6}",
            r.run_id,
            status_of(r),
            started_of(r).unwrap_or_default(),
            r.events
        )
        .map_err(io)?;
    }
    if page.more
        && let Some(last) = page.runs.last()
    {
        let mut hint = format!("runs --after {}", last.run_id);
        if let Some(s) = a.status {
            hint.push_str(&format!(" --status {}", status_of_arg(s)));
        }
        if a.limit != 20 {
            hint.push_str(&format!(" --limit {}", a.limit));
        }
        eprintln!("more runs: `{hint}` (or --offset {next})");
    }
    Ok(0)
}

fn status_of_arg(s: StatusArg) -> &'static str {
    match s {
        StatusArg::Live => "live",
        StatusArg::Ended => "ended",
        StatusArg::Stopped => "stopped",
        StatusArg::Failed => "failed",
    }
}

async fn show_cmd(workflow: &Workflow, a: ShowArgs) -> Result<u8, Fail> {
    let Some(reader) = open_reader(workflow, &a.from).await? else {
        return Err(invalid(format!(
            "no stored run `{}` of `{}`: there is no database {}; start a run with `run`, or pass --db PATH",
            a.run.chars().take(64).collect::<String>(),
            workflow.name(),
            where_runs(&a.from, workflow)
        )));
    };
    let run_id = resolve_run(workflow, &reader.backend, &reader.place, &a.run).await?;
    let stored = reader
        .backend
        .read_run(workflow.name(), &run_id)
        .wait()
        .await
        .map_err(|e| internal(e.to_string()))?
        .ok_or_else(|| internal(format!("run `{run_id}` vanished from {}", reader.place)))?;
    reader.backend.halt();
    let view = &StoredRunView::rebuild(workflow, &stored).map_err(|e| internal(e.to_string()))?;
    // On NATS, the worker that owns a live run (its owner record).
    #[allow(unused_mut)]
    let mut owner: Option<String> = None;
    #[cfg(feature = "nats")]
    if let Some(nats) = &reader.nats
        && !view.run.is_terminated()
    {
        owner = crate::nats::run_owner(nats, workflow.name(), &run_id)
            .await
            .map_err(|e| internal(e.to_string()))?
            .map(|o| o.worker);
    }
    if let Some(file) = &a.history_out {
        let text = serde_json::to_string_pretty(&view.history())
            .map_err(|e| internal(format!("cannot encode the history: {e}")))?;
        std::fs::write(file, text + "\n").map_err(|e| {
            internal(format!(
                "cannot write the history to `{}`: {e}",
                file.display()
            ))
        })?;
        eprintln!(
            "history of run {} written to {}; explain it with `saap explain SPEC --history {}` (SPEC from `spec`)",
            view.run_id,
            file.display(),
            file.display()
        );
    }
    let mut out = std::io::stdout().lock();
    let run = &view.run;
    if a.json {
        let events: Vec<Value> = run
            .log()
            .iter()
            .enumerate()
            .map(|(seq, e)| {
                json!({
                    "seq": seq,
                    "event_id": e.id.to_string(),
                    "event": run.type_name(e.ty),
                    "kind": e.kind.label(),
                    "origin": match e.origin {
                        saap_dispatch::Origin::Outside => Value::Null,
                        saap_dispatch::Origin::Execution(x) => Value::from(x.to_string()),
                    },
                    "fields": view.fields(seq as u32),
                })
            })
            .collect();
        let executions: Vec<Value> = run
            .executions()
            .iter()
            .enumerate()
            .map(|(i, x)| {
                json!({
                    "execution": saap_dispatch::ExecutionId(i as u32).to_string(),
                    "step": run.spec().steps[x.step as usize].name,
                    "trigger": x.trigger,
                    "state": format!("{:?}", x.state),
                    "attempt": x.attempt,
                    "error": run.execution_error(saap_dispatch::ExecutionId(i as u32)),
                })
            })
            .collect();
        let doc = json!({
            "run_id": view.run_id,
            "thread_id": view.thread_id,
            "workflow": view.workflow,
            "status": view.outcome().as_str(),
            "result": view.result().map(|(n, f)| json!({"event": n, "fields": f})),
            "events": events,
            "records": run.records(),
            "executions": executions,
            "execution_counts": counts_json(run),
            "owner": owner,
        });
        serde_json::to_writer_pretty(&mut out, &doc)
            .map_err(|e| internal(format!("cannot write JSON: {e}")))?;
        writeln!(out).map_err(io)?;
        return Ok(0);
    }
    writeln!(
        out,
        "run {} of {} ({}), thread {}{}",
        view.run_id,
        view.workflow,
        view.outcome().as_str(),
        view.thread_id,
        view.started_unix()
            .map(|s| format!(", started {} UTC", utc_time(s)))
            .unwrap_or_default()
    )
    .map_err(io)?;
    writeln!(out).map_err(io)?;
    out.write_all(timeline_with(run, &view.display_by).as_bytes())
        .map_err(io)?;
    writeln!(out).map_err(io)?;
    writeln!(out, "executions: {}", counts_text(run)).map_err(io)?;
    if let Some(w) = &owner {
        writeln!(out, "owned by worker {w}").map_err(io)?;
    }
    match view.result() {
        Some((n, f)) => writeln!(out, "result: {n} {f}").map_err(io)?,
        None => writeln!(
            out,
            "still live:\n{}",
            crate::snapshot::waiting_for(run, None)
        )
        .map_err(io)?,
    }
    Ok(0)
}
