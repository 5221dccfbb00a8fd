//! `<agent> cancel RUN`: ends a live run with a `RunCancelledEvent` (DESIGN §8) — on the
//! embedded store through `Engine::cancel`, on NATS by publishing the event on the class
//! stream for the run's owner to apply. Must not end a run any other way.

use super::args::{EngineArg, EngineKind, ReadArgs};
use super::fail::{Fail, engine_fail, io};
#[cfg(feature = "nats")]
use super::follow::follow_stored;
use super::reader::engine_of_run;
#[cfg(feature = "nats")]
use super::reader::resolve_run;
#[cfg(feature = "nats")]
use super::reader::{open_nats_reader, read_view};
#[cfg(feature = "nats")]
use super::send::ended_run;
use super::store::memory_keeps_nothing;
use crate::workflow::Workflow;
use std::io::Write;

#[derive(clap::Args)]
#[command(
    after_help = "The run ends with a RunCancelledEvent (an ExceptionEvent subtype that carries the reason):
its pending timers never fire, steps still running are told (StepCtx::cancellation; a model
call through saap::llm stops), and what they return afterwards is kept as evidence only.
`show RUN` and `runs` then report it as cancelled (`runs --status failed` lists it too).

With the embedded engine (default) the database is opened and the run cancelled in this
process. With --engine nats://HOST:PORT the event is published on the agent class's stream for
the run; its owner applies it, and this command follows the run's journal until it ends or
--timeout passes.

Examples:
  cancel RUN --reason \"the customer withdrew the request\"
  cancel RUN --engine nats://127.0.0.1:4222 --json

Exit codes: 0 the run is cancelled, 1 (NATS) not ended within --timeout, 2 unknown run or a
run that has already ended, 3 database or server failure."
)]
pub(super) struct CancelArgs {
    /// The run id (or a unique prefix of it), as printed by `run` and `runs`.
    pub(super) run: String,
    /// Why: kept in the cancellation event (at most 4 KiB).
    #[arg(long, default_value = "", value_name = "TEXT")]
    pub(super) reason: String,
    #[command(flatten)]
    pub(super) from: ReadArgs,
    /// Seconds to wait for the run's owner to apply the cancellation (NATS).
    #[arg(long, default_value_t = 10.0, value_name = "SECS")]
    pub(super) timeout: f64,
    /// Print JSON: {run_id, status, event_id}.
    #[arg(long)]
    pub(super) json: bool,
}

pub(super) async fn cancel_cmd(workflow: &Workflow, a: CancelArgs) -> Result<u8, Fail> {
    let kind = match &a.from.engine {
        EngineArg::Local(EngineKind::Memory) => return Err(memory_keeps_nothing("cancel")),
        EngineArg::Local(kind) => *kind,
        #[cfg(feature = "nats")]
        EngineArg::Nats(url) => return cancel_nats(workflow, url, &a).await,
        #[cfg(not(feature = "nats"))]
        EngineArg::Nats(_) => {
            return Err(super::fail::invalid(
                "this agent was built without the `nats` feature of saap",
            ));
        }
    };
    let (engine, _, run_id) = engine_of_run(
        workflow,
        kind,
        &a.from.store,
        &a.run,
        "there is no run to cancel",
    )
    .await?;
    let id = engine
        .cancel(&run_id, &a.reason)
        .await
        .map_err(engine_fail)?;
    let status = engine
        .stored_snapshot(&run_id)
        .await
        .map_err(engine_fail)?
        .map(|s| s.run.progress().as_str())
        .unwrap_or("cancelled");
    let mut out = std::io::stdout().lock();
    if a.json {
        let line =
            serde_json::json!({ "run_id": run_id, "status": status, "event_id": id.to_string() });
        writeln!(out, "{line}").map_err(io)?;
    } else {
        writeln!(out, "run {run_id} {status} (RunCancelledEvent {id})").map_err(io)?;
    }
    Ok(0)
}

/// `cancel --engine nats://…`: publishes the cancellation on the class stream for the run
/// (its owner applies it), then follows the run's journal until it ends.
#[cfg(feature = "nats")]
async fn cancel_nats(workflow: &Workflow, url: &str, a: &CancelArgs) -> Result<u8, Fail> {
    use crate::event::{Event, RunCancelledEvent};
    use saap_protocol::hierarchy::names::EXCEPTION_EVENT;

    let (reader, opts) = open_nats_reader(workflow, url, &a.from).await?;
    let run_id = resolve_run(workflow, &reader.backend, &reader.place, &a.run).await?;
    let view = read_view(workflow, &reader, &run_id).await?;
    if view.run.is_terminated() {
        return Err(ended_run(&run_id, &view.run));
    }
    let from = view.run.log().len();
    let (id, env) = super::send::saap_envelope(
        workflow,
        RunCancelledEvent::NAME,
        EXCEPTION_EVENT,
        &RunCancelledEvent::new(a.reason.clone()),
    )?;
    super::send::publish_to_run(workflow, &reader, &opts, &view.thread_id, &run_id, &env).await?;
    eprintln!("sent RunCancelledEvent {id} to run {run_id} on the class stream");
    let code = follow_stored(workflow, &reader, &run_id, from, id, a.timeout, a.json).await?;
    // A cancelled run "fails" for `follow` (an exception ended it): here that is success.
    let view = read_view(workflow, &reader, &run_id).await?;
    Ok(match view.run.progress() {
        saap_dispatch::run::progress::Progress::Cancelled => 0,
        _ => code.max(1),
    })
}
