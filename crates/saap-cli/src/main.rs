//! `saap`: the command-line face of the dispatch core and (later) the runtime.
//!
//! Data goes to stdout, diagnostics to stderr. Exit codes: 0 success, 1 the command found
//! problems (check errors, an explored bad state with `--fail-on`), 2 invalid input or
//! usage, 3 an internal or I/O failure.

mod cmd;
mod input;
mod mcp;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// saap — dispatchable AI-agent workflows, and the tools to see why they behave as they do.
#[derive(Parser)]
#[command(
    name = "saap",
    version,
    about = "saap: event-driven AI-agent workflows, and the tools that show why they behave as they do"
)]
#[command(after_help = "Examples:
  saap demo                                   run the guided demo
  saap check examples/specs/optional-trap.yaml
  saap simulate examples/specs/race-condition.yaml --json
  saap explore examples/specs/list-reruns.yaml
  saap explain examples/specs/optional-trap.yaml --step translate
  saap diff examples/specs/race-condition.yaml a.json b.json   (two recorded runs)
  saap inspect --server nats://127.0.0.1:4222 streams
  saap report --symptom runs-twice --step translate examples/specs/optional-trap.yaml
  saap mcp --server nats://127.0.0.1:4222 --root .   (MCP server for coding agents)
  saap studio --db agent.db agent.json         (a store's runs in a web page, read-only)

Exit codes: 0 ok, 1 problems found, 2 invalid input or usage, 3 internal or I/O failure.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check a workflow spec for constraint violations before anything runs.
    Check(cmd::check::CheckArgs),
    /// Run a spec's dispatch over one arrival order and print the timeline.
    Simulate(cmd::simulate::SimulateArgs),
    /// Explore every interleaving of a spec's arrivals and completions.
    Explore(cmd::explore::ExploreArgs),
    /// Explain why each step fired, fired more than once, or never fired.
    Explain(Box<cmd::explain::ExplainArgs>),
    /// Compare two recorded runs of a spec: where they part ways, and how they differ in sum.
    Diff(cmd::diff::DiffArgs),
    /// Run the guided demo (no setup needed).
    Demo(cmd::demo::DemoArgs),
    /// Look at a live NATS server (--server) or a saap store (--db), read-only.
    Inspect(Box<cmd::inspect::InspectArgs>),
    /// Write the debugging guide's report for a symptom: root cause, evidence, fix, verification.
    Report(Box<cmd::report::ReportArgs>),
    /// Serve the debugger to coding agents over the Model Context Protocol (stdio), read-only.
    Mcp(Box<mcp::McpArgs>),
    /// A web page of an agent's runs (a store read-only, or a class on NATS), from its spec.
    Studio(Box<cmd::studio::StudioArgs>),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let result = match cli.command {
        Command::Check(a) => cmd::check::run(a),
        Command::Simulate(a) => cmd::simulate::run(a),
        Command::Explore(a) => cmd::explore::run(a),
        Command::Explain(a) => cmd::explain::run(*a),
        Command::Diff(a) => cmd::diff::run(a),
        Command::Demo(a) => cmd::demo::run(a),
        Command::Inspect(a) => cmd::inspect::run(*a),
        Command::Report(a) => cmd::report::run(*a),
        Command::Mcp(a) => mcp::run(*a),
        Command::Studio(a) => cmd::studio::run(*a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(input::exit_code_for(&e))
        }
    }
}
