//! `<agent> studio`: a web page on loopback for the agent's stored runs — the run list, a
//! run's timeline of events and executions with payloads, waits, children, decisions,
//! `explain` and the graph with the run's path, live while the run goes on — and actions on
//! them (send an event, cancel, fork from an event, replay) that need the token printed at
//! start. Pages are rendered on the server from the same rebuilt runs `show` reads; a small
//! script only refreshes a live run's page. Must not listen beyond loopback unless told to.

mod actions;
mod graph;
mod html;
mod list;
mod live;
#[cfg(feature = "nats")]
mod nats;
mod run_facts;
mod run_page;
mod server;
mod state;
mod token;

use super::args::{EngineArg, EngineKind, ReadArgs};
use super::fail::{Fail, internal, invalid};
use super::store::{flush_telemetry, memory_keeps_nothing, open_engine};
use crate::workflow::Workflow;
use state::{Runs, Studio};
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use token::{COOKIE_PREFIX, Token};

#[derive(clap::Args)]
#[command(
    after_help = "The studio opens the agent's database as `send` does (its live runs go on in this process: a
timer due or a child's end is handled here) — or, with --engine nats://…, reads the agent
class's journal and publishes events on its stream for its workers (forking is not supported
there yet) — and serves, until Ctrl-C:

  /                  the runs, newest first: filter by status, page on
  /runs/RUN          a run: where it stands, the graph with its path, executions (attempts,
                     durations, inputs, outputs, errors, model tokens and cost), events with
                     payloads, child runs, timers, outside calls, explain for each step, the
                     decision records; live while the run goes on
  /graph             the agent's graph
  /api/runs, /api/runs/RUN   the same as JSON (a run as `show --json` prints it)

Reading needs nothing. Acting (start a run, send an event, cancel, fork from an event,
replay) needs the token printed at start: open the printed link (it sets a cookie in that browser),
paste the token at /login, or send `Authorization: Bearer TOKEN`. A new token is made at
every start. The studio listens on loopback; --listen with another address needs
--allow-remote (anyone who reaches it can read the runs).

Examples:
  studio                                serve on http://127.0.0.1:7878/
  studio --listen 127.0.0.1:0 --json    a free port; prints {\"url\", \"login_url\", \"token\", \"db\", \"read_only\"}
  studio --db runs.db
  studio --engine nats://127.0.0.1:4222   the agent class on NATS: its workers run the runs

Exit codes: 0 stopped by Ctrl-C, 2 invalid flags or an address in use, 3 a database failure."
)]
pub(super) struct StudioArgs {
    #[command(flatten)]
    from: ReadArgs,
    /// Where to listen (port 0: a free one).
    #[arg(long, default_value = "127.0.0.1:7878", value_name = "ADDR")]
    listen: SocketAddr,
    /// Allow --listen on an address other than loopback.
    #[arg(long)]
    allow_remote: bool,
    /// Print where the studio listens as one JSON line: {url, login_url, token, db, read_only}.
    #[arg(long)]
    json: bool,
}

pub(super) async fn studio_cmd(workflow: &Workflow, a: StudioArgs) -> Result<u8, Fail> {
    if !a.listen.ip().is_loopback() && !a.allow_remote {
        return Err(invalid(format!(
            "--listen {}: the studio serves loopback only unless told otherwise (anyone who reaches it can read the runs); add --allow-remote to listen there",
            a.listen
        )));
    }
    let listener = tokio::net::TcpListener::bind(a.listen).await.map_err(|e| {
        invalid(format!(
            "cannot listen on {}: {e}; pick another with --listen ADDR (port 0: a free one)",
            a.listen
        ))
    })?;
    let addr = listener
        .local_addr()
        .map_err(|e| internal(format!("cannot read the listening address: {e}")))?;
    let (runs, place) = match &a.from.engine {
        EngineArg::Local(EngineKind::Memory) => return Err(memory_keeps_nothing("studio")),
        // Without the agents' code the store is read only: never owned, never written.
        EngineArg::Local(_) if !workflow.has_code() => {
            let path = super::store::db_path(workflow, &a.from.store);
            let backend =
                crate::backend::sqlite::SqliteBackend::open_read_only(&path).map_err(|e| {
                    use crate::backend::StoreError as E;
                    match e {
                        E::Open { .. } | E::Corrupt { .. } | E::NotReadable { .. } => invalid(
                            format!("{e}; give the database an agent writes with --db PATH"),
                        ),
                        e => internal(e.to_string()),
                    }
                })?;
            (
                Runs::Stored(Arc::new(backend)),
                format!("{} (read-only)", path.display()),
            )
        }
        EngineArg::Local(kind) => (
            Runs::Embedded(open_engine(workflow, *kind, &a.from.store).await?),
            super::reader::where_runs(&a.from, workflow),
        ),
        #[cfg(feature = "nats")]
        EngineArg::Nats(url) => {
            let (reader, opts) = super::reader::open_nats_reader(workflow, url, &a.from).await?;
            let place = reader.place.clone();
            (
                Runs::Nats {
                    reader: Box::new(reader),
                    opts: Box::new(opts),
                },
                place,
            )
        }
        #[cfg(not(feature = "nats"))]
        EngineArg::Nats(_) => {
            return Err(invalid(
                "this agent was built without the `nats` feature of saap",
            ));
        }
    };
    let token = Token::generate()
        .map_err(|e| internal(format!("cannot make a token from /dev/urandom: {e}")))?;
    let mut hosts = vec![addr.to_string()];
    if addr.ip().is_loopback() {
        hosts.push(format!("localhost:{}", addr.port()));
    }
    let url = format!("http://{addr}/");
    let login_url = format!("{url}?token={}", token.reveal());
    let db = place;
    {
        let mut out = std::io::stdout().lock();
        let line = if a.json {
            serde_json::json!({"url": url, "login_url": login_url, "token": token.reveal(), "db": db,
                "read_only": matches!(runs, Runs::Stored(_))})
            .to_string()
        } else if matches!(runs, Runs::Stored(_)) {
            format!(
                "saap studio for `{}` ({db}) at {url}\nread-only: the agents' specs without their code; Ctrl-C stops",
                workflow.name()
            )
        } else {
            format!(
                "saap studio for `{}` ({db}) at {url}\nopen {login_url} to enable actions (send, cancel, fork, replay) in that browser; Ctrl-C stops",
                workflow.name()
            )
        };
        writeln!(out, "{line}").map_err(super::fail::io)?;
        out.flush().map_err(super::fail::io)?;
    }
    let shutdown = tokio_util::sync::CancellationToken::new();
    let studio = Arc::new(Studio {
        runs,
        workflow: workflow.clone(),
        token,
        cookie: format!("{COOKIE_PREFIX}{}", addr.port()),
        hosts,
        streams: AtomicUsize::new(0),
        shutdown: shutdown.clone(),
    });
    let app = server::router(studio.clone());
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = tokio::signal::ctrl_c().await;
            // Live streams end with the server, not when their page goes.
            shutdown.cancel();
        })
        .await
        .map_err(|e| internal(format!("the studio's server failed: {e}")))?;
    eprintln!("studio stopped");
    #[allow(irrefutable_let_patterns)]
    if let Runs::Embedded(engine) = &studio.runs {
        flush_telemetry(engine);
    }
    Ok(0)
}
