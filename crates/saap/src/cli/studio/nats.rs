//! The studio's actions on an agent class on NATS JetStream: the studio is not a worker, so
//! an event is published on the class stream to the run (at its owner's address), as `send`
//! and `cancel --engine nats://…` do, and a run is started by publishing its start event;
//! the workers decide. Must not write the journal.

use super::super::reader::NatsReader;
use super::state::StudioError;
use crate::history::StoredRunView;
use crate::workflow::Workflow;
use serde_json::Value;

fn failed(f: super::super::fail::Fail) -> StudioError {
    match f.code {
        2 => StudioError::bad(f.message),
        _ => StudioError::internal(f.message),
    }
}

/// Publishes event `name` with `fields` to live run `view` of `agent`.
pub(super) async fn send(
    reader: &NatsReader,
    opts: &crate::nats::NatsOptions,
    agent: &Workflow,
    view: &StoredRunView,
    name: &str,
    fields: Value,
) -> Result<(), StudioError> {
    // The run's owner refuses an answer to no open work request; say so here.
    let logged = |seq: u32| Some(view.fields(seq));
    crate::process::check_answer(&view.run, logged, name, &fields).map_err(|detail| {
        StudioError {
            code: "SAAP-E022",
            ..StudioError::refused(format!("run {}: {detail}", view.run_id))
        }
    })?;
    let (_, env) =
        super::super::send::event_envelope(agent, name, fields).map_err(|f| StudioError {
            code: "SAAP-E004",
            ..StudioError::refused(f.message)
        })?;
    super::super::send::publish_to_run(agent, reader, opts, &view.thread_id, &view.run_id, &env)
        .await
        .map_err(failed)
}

/// Publishes a `RunCancelledEvent` with `reason` to live run `view` of `agent`.
pub(super) async fn cancel(
    reader: &NatsReader,
    opts: &crate::nats::NatsOptions,
    agent: &Workflow,
    view: &StoredRunView,
    reason: &str,
) -> Result<(), StudioError> {
    use crate::event::{Event, RunCancelledEvent};
    let (_, env) = super::super::send::saap_envelope(
        agent,
        RunCancelledEvent::NAME,
        saap_protocol::hierarchy::names::EXCEPTION_EVENT,
        &RunCancelledEvent::new(reason.to_string()),
    )
    .map_err(failed)?;
    super::super::send::publish_to_run(agent, reader, opts, &view.thread_id, &view.run_id, &env)
        .await
        .map_err(failed)
}

/// Publishes a start event of `agent`: a worker begins the run. Returns its id.
pub(super) async fn start(
    reader: &NatsReader,
    opts: &crate::nats::NatsOptions,
    agent: &Workflow,
    thread: Option<&str>,
    name: &str,
    fields: Value,
) -> Result<String, StudioError> {
    super::super::run::publish_start(agent, reader.nats.nats(), opts, thread, name, fields)
        .await
        .map_err(failed)
}
