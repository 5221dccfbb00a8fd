//! The per-agent command line: one call gives every agent binary `spec`, `check`, `run`,
//! `send`, `cancel`, `resume`, `runs`, `show`, `diff`, `replay`, `fork`, `export` and
//! `studio`.
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

mod args;
mod cancel;
mod check;
mod diff;
#[cfg(feature = "otel")]
mod export;
mod fail;
mod follow;
mod fork;
mod input;
mod reader;
mod replay;
mod resume;
mod run;
mod runs;
mod send;
mod show;
mod spec;
mod store;
#[cfg(feature = "studio")]
mod studio;
mod tree;

use crate::workflow::Workflow;
use cancel::{CancelArgs, cancel_cmd};
pub use check::render_check;
use check::{CheckArgs, check_cmd};
use clap::{Parser, Subcommand};
use diff::{DiffArgs, diff_cmd};
use fail::{Fail, internal};
use fork::{ForkArgs, fork_cmd};
use replay::{ReplayArgs, replay_cmd};
use resume::{ResumeArgs, resume_cmd};
use run::{RunArgs, run_cmd};
use runs::{RunsArgs, runs_cmd};
use send::{SendArgs, send_cmd};
use show::{ShowArgs, show_cmd};
use spec::{SpecArgs, spec};
use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;
pub use store::default_db;

pub use input::MAX_START_EVENT_BYTES;

/// Runs the agent's command line with the process arguments; returns the exit code.
pub fn main(workflow: Workflow) -> ExitCode {
    main_with(workflow, std::env::args_os())
}
/// The per-agent command line for an `#[agent]` type: `fn main() -> ExitCode {
/// saap::agent_main::<MyAgent>() }`. An agent whose workflow cannot be built exits 3 with
/// the build error.
pub fn agent_main<A: crate::workflow::Agent>() -> std::process::ExitCode {
    match A::workflow() {
        Ok(w) => main(w),
        Err(e) => {
            eprintln!("error: agent `{}` cannot be built: {e}", A::NAME);
            std::process::ExitCode::from(3)
        }
    }
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

/// The studio of agents known by their specs alone (the generic `saap studio`): their runs
/// read from a store, read-only, or from an agent class on NATS JetStream, whose workers act
/// on runs (start, send, cancel; replay and fork need the agent's code). `specs`: the
/// studio's agent first, then the agents it delegates to. `args` as `<agent> studio` takes
/// them, the first the program name.
#[cfg(feature = "studio")]
pub fn studio_of_specs<I, T>(specs: Vec<saap_dispatch::CompiledSpec>, args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let mut specs = specs.into_iter().map(std::sync::Arc::new);
    let Some(first) = specs.next() else {
        eprintln!("error: the studio needs an agent's spec");
        return ExitCode::from(2);
    };
    let workflow = specs.fold(Workflow::from_spec(first), |w, other| {
        w.with_delegate(Workflow::from_spec(other))
    });
    let cmd = <studio::StudioArgs as clap::Args>::augment_args(clap::Command::new("saap studio"));
    let parsed = cmd
        .try_get_matches_from(args)
        .and_then(|m| <studio::StudioArgs as clap::FromArgMatches>::from_arg_matches(&m));
    let a = match parsed {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match block_on(studio::studio_cmd(&workflow, a)) {
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
  {bin} cancel RUN --reason TEXT            end a live run as cancelled
  {bin} runs                                the newest stored runs, 20 a page (--offset N)
  {bin} runs --status live                  the runs that wait for an event
  {bin} runs --tree RUN                     RUN and the runs it delegated to
  {bin} show RUN                            the run's timeline: events and decisions
  {bin} show RUN --history-out run.json     then: saap explain agent.json --history run.json
  {bin} export RUN --endpoint http://127.0.0.1:6006/v1/traces   the run as a trace (Phoenix)
  {bin} studio                              the runs in a web page on http://127.0.0.1:7878/
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
    /// Cancel a stored live run: it ends with a RunCancelledEvent and its steps are told.
    Cancel(CancelArgs),
    /// Grant more budget to a stored run paused on its own (waiting_budget) and follow it.
    Resume(ResumeArgs),
    /// List stored runs, newest first, a page at a time, with their status.
    Runs(RunsArgs),
    /// Show one stored run: its events and the dispatcher's decisions.
    Show(ShowArgs),
    /// Compare two stored runs: where they part ways, and how they differ in sum.
    Diff(DiffArgs),
    /// Re-run a stored run's steps against its record (no model or tool called): reproduced, or where it diverged.
    Replay(ReplayArgs),
    /// Start a new run from a stored run's log up to an event, with that event changed, added or sent again.
    Fork(ForkArgs),
    /// Send one stored run as an OpenTelemetry trace to an OTLP receiver (Phoenix, Langfuse…).
    #[cfg(feature = "otel")]
    Export(export::ExportArgs),
    /// Serve a web page on loopback: the runs, each run's timeline and graph, live; actions with a token.
    #[cfg(feature = "studio")]
    Studio(studio::StudioArgs),
}

fn dispatch(workflow: &Workflow, command: Command) -> Result<u8, Fail> {
    match command {
        Command::Spec(a) => spec(workflow, &a),
        Command::Check(a) => check_cmd(workflow, &a),
        Command::Run(a) => block_on(run_cmd(workflow, a)),
        Command::Send(a) => block_on(send_cmd(workflow, a)),
        Command::Cancel(a) => block_on(cancel_cmd(workflow, a)),
        Command::Resume(a) => block_on(resume_cmd(workflow, a)),
        Command::Runs(a) => block_on(runs_cmd(workflow, a)),
        Command::Show(a) => block_on(show_cmd(workflow, a)),
        Command::Diff(a) => block_on(diff_cmd(workflow, a)),
        Command::Replay(a) => block_on(replay_cmd(workflow, a)),
        Command::Fork(a) => block_on(fork_cmd(workflow, a)),
        #[cfg(feature = "otel")]
        Command::Export(a) => block_on(export::export_cmd(workflow, a)),
        #[cfg(feature = "studio")]
        Command::Studio(a) => block_on(studio::studio_cmd(workflow, a)),
    }
}

fn block_on<F: std::future::Future<Output = Result<u8, Fail>>>(f: F) -> Result<u8, Fail> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| internal(format!("cannot start the async runtime: {e}")))?
        .block_on(f)
}
