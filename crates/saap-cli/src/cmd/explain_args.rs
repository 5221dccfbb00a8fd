//! The command line of `saap explain`: the spec, the run to explain (simulated, a history
//! file, or a stored or live run by id) and the report options. Shared by [`super::explain`]
//! and [`super::explain_run`], so neither imports the other.

use super::nats_flags::NatsFlags;
use saap_dispatch::sim::DEFAULT_MAX_COMPLETIONS;
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(after_help = "Examples:
  saap explain examples/specs/optional-trap.yaml --step translate
  saap explain examples/specs/missing-upstream.yaml
  saap simulate examples/specs/rag.yaml --history-out run.json && saap explain examples/specs/rag.yaml --history run.json
  saap explain agent.json --run RUN --db agent.db           a stored run of an agent
  saap explain --run RUN --server nats://127.0.0.1:4222     a live run; the spec from its worker
  saap explain agent.py --run RUN --server nats://127.0.0.1:4222   a Python-recorded run

With --run, the run is read (read-only) from a saap store (--db) or a NATS server (--server:
a saap worker's journal, else the events of the agent class stream as the Python platform
writes them) and explained through the core; a Python-recorded run also lists where the
Python dispatcher would have behaved differently. Exit codes: 0 explained, 2 invalid input
(unknown run, a spec that does not replay the run, an undecodable message, no spec), 3 the
server or store failed.")]
pub struct ExplainArgs {
    /// The workflow spec (JSON or YAML; `-` for stdin), or Python agent source (a `.py` file
    /// or a folder; with --run only). With --run on NATS it may be left out: a saap worker's
    /// class discovery answer carries the spec.
    #[arg(required_unless_present = "run")]
    pub spec: Option<PathBuf>,
    /// Explain only this step (repeatable). Without it, every step: one line for steps that
    /// ran once, details for steps that ran more than once or never.
    #[arg(long = "step", value_name = "NAME")]
    pub steps: Vec<String>,
    /// A recorded run (History JSON) to explain instead of simulating the spec.
    #[arg(long, value_name = "FILE", conflicts_with = "run")]
    pub history: Option<PathBuf>,
    /// Completion policy of the simulation: fifo, lifo or arrivals-first.
    #[arg(long, default_value = "fifo")]
    pub policy: String,
    /// Stop the simulation after this many completions (as `simulate`: guards against
    /// workflows that loop forever; the report says when it was hit and names the loop).
    #[arg(long, default_value_t = DEFAULT_MAX_COMPLETIONS)]
    pub max_completions: usize,
    /// Print JSON: `{spec, source, cut_off, cycle, steps}`, `steps` a list of step
    /// explanations; with --run also `run`, `recorded_by`, `events_from`, `spec_from`,
    /// `notes` and `python_differences`.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub recorded: RunArgs,
}

/// Where a run by id is read (`--run`).
#[derive(clap::Args)]
pub struct RunArgs {
    /// Explain this stored or live run (its id) instead of a simulation; needs --db or --server.
    #[arg(long, value_name = "RUN")]
    pub run: Option<String>,
    /// A saap store (the SQLite file an agent writes with --db), opened read-only.
    #[arg(long, value_name = "PATH", requires = "run", conflicts_with = "server")]
    pub db: Option<PathBuf>,
    /// A NATS server: nats://HOST:PORT (tls://… for TLS; a comma-separated list for a cluster).
    #[arg(long, value_name = "URL", requires = "run")]
    pub server: Option<String>,
    /// NATS: the agent class stream or saap journal stream of the run (found from the run's
    /// subjects if not given).
    #[arg(long, value_name = "STREAM", requires = "server")]
    pub stream: Option<String>,
    /// The agent class to take from Python source that defines several (default: the one
    /// named like the run's agent class, or the only one).
    #[arg(long, value_name = "CLASS", requires = "run")]
    pub agent: Option<String>,
    /// Seconds to wait for the server to answer a connection or a request (1-300).
    #[arg(long, value_name = "SECS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..=300))]
    pub timeout: u64,
    #[command(flatten)]
    pub nats: NatsFlags,
}
