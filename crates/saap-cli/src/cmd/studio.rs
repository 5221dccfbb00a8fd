//! `saap studio (--db PATH | --server URL) [SPEC…]`: the studio of agents known by their
//! specs alone. The generic `saap` has no agent's code, so it reads a store read-only, or an
//! agent class on NATS (whose workers start, answer and cancel runs; replay and fork need the
//! agent's binary: `<agent> studio`).
//!
//! Glue only: finds the specs (files, or a worker's class discovery answer on NATS) and hands
//! them, with the flags as `<agent> studio` takes them, to [`saap::cli::studio_of_specs`].
//! Must not serve anything itself.

use super::inspect::fail;
use super::nats_flags::NatsFlags;
use crate::input::{InvalidInput, load_spec};
use anyhow::Context;
use saap_dispatch::CompiledSpec;
use saap_dispatch::spec::WorkflowSpec;
use saap_inspect::NatsInspector;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
#[command(after_help = "Examples:
  saap studio --db agent.db agent.json                  a store's runs, read-only
  saap studio --db agent.db editor.json researcher.json an agent and the agent it delegates to
  saap studio --server nats://127.0.0.1:4222 --class EditorAgent
                                                        a class on NATS; the spec from its workers
  saap studio --db agent.db agent.json --listen 127.0.0.1:0 --json
                                                        a free port; prints {\"url\", \"login_url\", \"token\", \"db\", \"read_only\"}

A store keeps no spec: give the agents' spec files (`<agent> spec > agent.json`), the studio's
agent first, then those it delegates to (their child runs are read from the same store). The
store is opened read-only and never locked, written or migrated; nothing acts on its runs (use
the agent's own `<agent> studio --db PATH` for that). On NATS without SPEC, the spec comes from
a worker's class discovery answer (and those of the classes it delegates to); starting,
answering and cancelling runs publish on the class stream for its workers (with the token
printed at start), replay and fork need the agent's binary.

Pages: / the runs, /runs/RUN a run, /graph the agent's graph, /api/runs and /api/runs/RUN as JSON.
The studio listens on loopback; --listen elsewhere needs --allow-remote.

Exit codes: 0 stopped by Ctrl-C, 2 invalid input (no spec, an unreadable store, an address in
use), 3 the server or store failed.")]
pub struct StudioArgs {
    /// The agents' workflow specs (JSON or YAML), the studio's agent first. Needed with --db;
    /// with --server, when left out, the spec comes from a worker of --class.
    pub specs: Vec<PathBuf>,
    /// A saap store (the SQLite file an agent writes with --db), opened read-only.
    #[arg(
        long,
        value_name = "PATH",
        conflicts_with = "server",
        required_unless_present = "server"
    )]
    pub db: Option<PathBuf>,
    /// A NATS server: nats://HOST:PORT (tls://… for TLS; a comma-separated list for a cluster).
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// NATS: the agent class to show (default: the first SPEC's name).
    #[arg(long, value_name = "CLASS", requires = "server")]
    pub class: Option<String>,
    /// Where to listen (port 0: a free one).
    #[arg(long, default_value = "127.0.0.1:7878", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Allow --listen on an address other than loopback.
    #[arg(long)]
    pub allow_remote: bool,
    /// Print where the studio listens as one JSON line: {url, login_url, token, db, read_only}.
    #[arg(long)]
    pub json: bool,
    /// Seconds to wait for the server to answer a connection or class discovery (1-300).
    #[arg(long, value_name = "SECS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..=300))]
    pub timeout: u64,
    #[command(flatten)]
    pub nats: NatsFlags,
}

pub fn run(args: StudioArgs) -> anyhow::Result<ExitCode> {
    let specs = specs(&args)?;
    Ok(saap::cli::studio_of_specs(specs, agent_args(&args)))
}

/// The agents' specs: the files given, else (on NATS) the class's workers' answers.
fn specs(args: &StudioArgs) -> anyhow::Result<Vec<CompiledSpec>> {
    let mut specs = args
        .specs
        .iter()
        .map(|p| load_spec(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if let (Some(class), false) = (&args.class, specs.is_empty()) {
        // The class asked for goes first: it is the studio's agent.
        let Some(at) = specs.iter().position(|s| &s.source.name == class) else {
            let names: Vec<&str> = specs.iter().map(|s| s.source.name.as_str()).collect();
            return Err(InvalidInput(format!(
                "--class {class}: none of the specs given is that agent ({}); give its spec, or leave out SPEC to ask its workers",
                names.join(", ")
            ))
            .into());
        };
        let first = specs.remove(at);
        specs.insert(0, first);
    }
    if !specs.is_empty() {
        return Ok(specs);
    }
    let (Some(url), Some(class)) = (&args.server, &args.class) else {
        return Err(InvalidInput(
            "SAAP-I008: say which agents to show: their spec files (`<agent> spec > agent.json`; a store keeps no spec), or on NATS --class NAME to ask its workers".to_owned(),
        )
        .into());
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the I/O runtime")?;
    rt.block_on(discover(args, url, class))
}

/// The spec of `class` from a worker's class discovery answer, then those of the classes it
/// delegates to that answer (a class no worker serves now is left out, with a warning).
async fn discover(args: &StudioArgs, url: &str, class: &str) -> anyhow::Result<Vec<CompiledSpec>> {
    let options = args
        .nats
        .options(url, "saap-studio", Duration::from_secs(args.timeout))?;
    let n = NatsInspector::connect(&options).await.map_err(fail)?;
    let Some(first) = discovered(&n, class).await? else {
        return Err(InvalidInput(format!(
            "SAAP-I017: no worker of class `{class}` answered class discovery with a workflow spec within {}s; start one, or give its spec file (`<agent> spec > agent.json`)",
            args.timeout
        ))
        .into());
    };
    let mut specs = vec![first];
    let mut i = 0;
    while i < specs.len() {
        let wanted: Vec<String> = specs[i].source.agents.clone();
        for other in wanted {
            if specs.iter().any(|s| s.source.name == other) {
                continue;
            }
            match discovered(&n, &other).await? {
                Some(spec) => specs.push(spec),
                None => eprintln!(
                    "warning: no worker of class `{other}` (which `{}` delegates to) answered with its spec: its child runs are not shown",
                    specs[i].source.name
                ),
            }
        }
        i += 1;
    }
    Ok(specs)
}

async fn discovered(n: &NatsInspector, class: &str) -> anyhow::Result<Option<CompiledSpec>> {
    let Some(value) = n.discover_spec(class).await.map_err(fail)? else {
        return Ok(None);
    };
    let bad = |e: String| {
        InvalidInput(format!(
            "SAAP-I017: the workflow spec in the class discovery answer of `{class}` {e}; give its spec file instead"
        ))
    };
    let spec: WorkflowSpec =
        serde_json::from_value(value).map_err(|e| bad(format!("does not read: {e}")))?;
    let compiled =
        CompiledSpec::compile(&spec).map_err(|e| bad(format!("does not compile: {e}")))?;
    Ok(Some(compiled))
}

/// The flags as `<agent> studio` takes them.
fn agent_args(args: &StudioArgs) -> Vec<OsString> {
    let mut out: Vec<OsString> = vec!["saap studio".into(), "--listen".into()];
    out.push(args.listen.to_string().into());
    if args.allow_remote {
        out.push("--allow-remote".into());
    }
    if args.json {
        out.push("--json".into());
    }
    if let Some(db) = &args.db {
        out.push("--db".into());
        out.push(db.into());
    }
    if let Some(url) = &args.server {
        out.push("--engine".into());
        out.push(url.into());
        let f = &args.nats;
        let mut flag = |name: &str, value: Option<OsString>| {
            if let Some(v) = value {
                out.push(format!("--{name}").into());
                out.push(v);
            }
        };
        flag("nats-token-env", f.nats_token_env.clone().map(Into::into));
        flag("nats-user", f.nats_user.clone().map(Into::into));
        flag(
            "nats-password-env",
            f.nats_password_env.clone().map(Into::into),
        );
        flag(
            "nats-nkey-seed-file",
            f.nats_nkey_seed_file.clone().map(Into::into),
        );
        flag("nats-creds", f.nats_creds.clone().map(Into::into));
        for ca in &f.nats_tls_ca {
            flag("nats-tls-ca", Some(ca.into()));
        }
        flag("nats-tls-cert", f.nats_tls_cert.clone().map(Into::into));
        flag("nats-tls-key", f.nats_tls_key.clone().map(Into::into));
        if f.nats_tls_required {
            out.push("--nats-tls-required".into());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        a: StudioArgs,
    }

    #[test]
    fn the_agent_studio_gets_the_same_place_and_nats_flags() {
        let cli = Cli::parse_from([
            "saap",
            "--server",
            "nats://127.0.0.1:4222",
            "--class",
            "A",
            "--nats-creds",
            "x.creds",
            "--nats-tls-ca",
            "a.pem",
            "--nats-tls-ca",
            "b.pem",
            "--nats-tls-required",
            "--listen",
            "127.0.0.1:0",
        ]);
        let args: Vec<String> = agent_args(&cli.a)
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args.join(" "),
            "saap studio --listen 127.0.0.1:0 --engine nats://127.0.0.1:4222 --nats-creds x.creds \
             --nats-tls-ca a.pem --nats-tls-ca b.pem --nats-tls-required"
        );
    }

    #[test]
    fn a_store_needs_the_agents_specs() {
        let cli = Cli::parse_from(["saap", "--db", "x.db"]);
        let e = specs(&cli.a).unwrap_err().to_string();
        assert!(e.contains("a store keeps no spec"), "{e}");
    }
}
