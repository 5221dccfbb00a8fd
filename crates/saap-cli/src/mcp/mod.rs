//! `saap mcp`: the debugger served to coding agents over the Model Context Protocol (stdio).
//!
//! The server's data sources are fixed when it starts (`--server` with the inspect auth flags,
//! `--db`, `--root`); tools never take credentials, and nothing it answers or logs shows one.
//! Layout: [`table`] lists the tools (name, description, argument schema) and routes a call;
//! [`params`] holds the argument types the schemas come from; [`spec_tools`] runs check,
//! simulate, explore and explain as a child `saap … --json` ([`child`]) on files under the
//! root ([`paths`]); [`inspect_tools`] reads the live system in-process through
//! [`sources`]; [`limits`] bounds time and output, [`answer`] is what a call returns (cut to
//! the output bound) or the tool error it reports; [`context`] is what every call may use;
//! [`server`] speaks the protocol.
//!
//! Must not write anything (no file, stream, bucket or store), print to stdout outside the
//! protocol (logs go to stderr), or let bad tool input become a protocol failure or a panic.

mod answer;
mod child;
mod context;
mod inspect_tools;
mod limits;
mod params;
mod paths;
mod server;
mod sources;
mod spec_tools;
mod table;

use crate::input::InvalidInput;
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args)]
#[command(
    after_help = "Serves saap's debugger as MCP tools on stdin/stdout (the protocol), logs on stderr.
Data sources are fixed here, never in tool arguments: the live system (--server with the
inspect credential flags, or --db) and the folder spec and Python files are read from
(--root, default: the current directory; paths outside it are refused).

Tools: check, simulate, explore, explain (specs and Python agent source; explain also a
stored or live run by id), report (the debugging guide's report for a symptom), server_info,
stream_list, stream_report, stream_info, stream_state, stream_subjects, stream_view,
stream_get, kv_ls, kv_get, runs, run_timeline. All read-only; every call bounded by
--tool-timeout and --max-output. See docs/cli.md#saap-mcp and skills/saap-debug/SKILL.md.

Examples:
  saap mcp --root .
  saap mcp --server nats://127.0.0.1:4222 --nats-token-env NATS_TOKEN
  saap mcp --db rag.db --tool-timeout 60
  claude mcp add saap -- saap mcp --server nats://127.0.0.1:4222 --root .

Exit codes: 0 the client closed the connection, 2 invalid flags, 3 the transport failed."
)]
pub struct McpArgs {
    /// A NATS server the inspect tools read: nats://HOST:PORT (tls://… for TLS; a
    /// comma-separated list for a cluster). Connected on first use, kept open.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// A saap store (the SQLite file an agent writes with --db) the inspect tools read,
    /// opened read-only for each call.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// The folder spec files and Python agent source are read from; tool paths are relative
    /// to it and may not leave it (no `..`, no symlink out).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub root: PathBuf,
    /// Seconds one tool call may take before it is stopped (a child process is killed).
    #[arg(long, value_name = "SECS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub tool_timeout: u64,
    /// Bytes of one tool answer; a longer answer is cut with a marker that says how to page
    /// or narrow.
    #[arg(long, value_name = "BYTES", default_value_t = limits::DEFAULT_MAX_OUTPUT,
          value_parser = clap::value_parser!(u64).range(4096..=16 * 1024 * 1024))]
    pub max_output: u64,
    /// Seconds to wait for the NATS server to answer a connection or a request (1-300).
    #[arg(long, value_name = "SECS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..=300))]
    pub nats_timeout: u64,
    /// Environment variable holding the NATS token.
    #[arg(long, value_name = "VAR")]
    pub nats_token_env: Option<String>,
    /// NATS user name (the password comes from --nats-password-env).
    #[arg(long, value_name = "USER")]
    pub nats_user: Option<String>,
    /// Environment variable holding the NATS password.
    #[arg(long, value_name = "VAR")]
    pub nats_password_env: Option<String>,
    /// File holding an nkey seed.
    #[arg(long, value_name = "FILE")]
    pub nats_nkey_seed_file: Option<PathBuf>,
    /// A NATS .creds file.
    #[arg(long, value_name = "FILE")]
    pub nats_creds: Option<PathBuf>,
    /// Extra CA certificate (PEM) to trust; repeatable.
    #[arg(long, value_name = "FILE")]
    pub nats_tls_ca: Vec<PathBuf>,
    /// Client certificate (PEM) for mutual TLS.
    #[arg(long, value_name = "FILE")]
    pub nats_tls_cert: Option<PathBuf>,
    /// Client key (PEM) for mutual TLS.
    #[arg(long, value_name = "FILE")]
    pub nats_tls_key: Option<PathBuf>,
    /// Require TLS.
    #[arg(long)]
    pub nats_tls_required: bool,
}

/// The NATS server as flags of a child `saap explain --run` / `saap report --run`: the URL
/// and the credential flags as given (environment variable names and file paths; a child
/// inherits the environment, so no secret is ever put on a command line).
fn child_nats_flags(url: &str, a: &McpArgs) -> Vec<String> {
    let mut f = vec![
        "--server".to_owned(),
        url.to_owned(),
        "--timeout".to_owned(),
        a.nats_timeout.to_string(),
    ];
    let mut add = |flag: &str, v: Option<String>| {
        if let Some(v) = v {
            f.push(format!("--{flag}={v}"));
        }
    };
    add("nats-token-env", a.nats_token_env.clone());
    add("nats-user", a.nats_user.clone());
    add("nats-password-env", a.nats_password_env.clone());
    let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.to_string_lossy().into_owned());
    add("nats-nkey-seed-file", path(&a.nats_nkey_seed_file));
    add("nats-creds", path(&a.nats_creds));
    for ca in &a.nats_tls_ca {
        add("nats-tls-ca", Some(ca.to_string_lossy().into_owned()));
    }
    add("nats-tls-cert", path(&a.nats_tls_cert));
    add("nats-tls-key", path(&a.nats_tls_key));
    if a.nats_tls_required {
        f.push("--nats-tls-required".to_owned());
    }
    f
}

pub fn run(a: McpArgs) -> Result<ExitCode> {
    // stdout is the protocol: every log line goes to stderr.
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SAAP_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn")),
        )
        .try_init();
    let root = paths::Root::new(&a.root).map_err(InvalidInput)?;
    let nats = match &a.server {
        Some(url) => {
            let connect = saap::nats::EngineConnect {
                url: url.clone(),
                token_env: a.nats_token_env.clone(),
                user: a.nats_user.clone(),
                password_env: a.nats_password_env.clone(),
                nkey_seed_file: a.nats_nkey_seed_file.clone(),
                creds_file: a.nats_creds.clone(),
                tls_ca: a.nats_tls_ca.clone(),
                tls_cert: a.nats_tls_cert.clone(),
                tls_key: a.nats_tls_key.clone(),
                tls_required: a.nats_tls_required,
            };
            let mut options = connect
                .options()
                .map_err(|e| InvalidInput(format!("SAAP-I008: {e}")))?;
            options.name = "saap-mcp".to_owned();
            options.connect_timeout = Duration::from_secs(a.nats_timeout);
            options.request_timeout = Duration::from_secs(a.nats_timeout);
            Some((options, child_nats_flags(url, &a)))
        }
        None => None,
    };
    let exe = std::env::current_exe().context("finding the saap executable to run tools with")?;
    let ctx = context::Context {
        limits: limits::Limits {
            call: Duration::from_secs(a.tool_timeout),
            max_output: a.max_output as usize,
        },
        root,
        exe,
        sources: sources::Sources::new(nats, a.db.clone()),
        children: tokio::sync::Semaphore::new(limits::MAX_CHILDREN),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the I/O runtime")?;
    rt.block_on(server::serve(ctx))?;
    // A pending read of stdin cannot be cancelled; do not wait for it.
    rt.shutdown_timeout(Duration::from_millis(100));
    Ok(ExitCode::SUCCESS)
}
