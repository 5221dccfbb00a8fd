//! `<agent> send`: an event for a live run (answering a human's request, for example),
//! then the run followed as `run` does.

use super::args::{EngineArg, EngineKind, ReadArgs};
use super::fail::{Fail, engine_fail, internal, invalid};
use super::follow::follow;
#[cfg(feature = "nats")]
use super::follow::follow_stored;
use super::input::json_arg;
use super::reader::engine_of_run;
#[cfg(feature = "nats")]
use super::reader::resolve_agent_run;
#[cfg(feature = "nats")]
use super::reader::{open_nats_reader, read_view};
use super::store::{db_path, flush_telemetry, memory_keeps_nothing};
use crate::history::RunOutcome;
use crate::workflow::Workflow;
use serde_json::Value;
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
pub(super) struct SendArgs {
    /// The run id (or a unique prefix of it), as printed by `run` and `runs`.
    pub(super) run: String,
    /// The event: JSON `{"_event_name": "...", ...fields}`, `@FILE` or `-`.
    #[arg(long, short, value_name = "JSON")]
    pub(super) event: String,
    #[command(flatten)]
    pub(super) from: ReadArgs,
    /// Seconds to wait for the run to end.
    #[arg(long, default_value_t = 60.0, value_name = "SECS")]
    pub(super) timeout: f64,
    /// Print JSON lines (display events, then the result).
    #[arg(long)]
    pub(super) json: bool,
}

pub(super) fn ended_run(run_id: &str, run: &saap_dispatch::Run) -> Fail {
    invalid(format!(
        "run {run_id} has ended ({}); an event sent now would only be kept as evidence, never dispatched: start a new run",
        RunOutcome::of(run).as_str()
    ))
}

pub(super) async fn send_cmd(workflow: &Workflow, a: SendArgs) -> Result<u8, Fail> {
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
    let (engine, opened, run_id) = engine_of_run(
        workflow,
        kind,
        &a.from.store,
        &a.run,
        "start a run first with `run`",
    )
    .await?;
    let place = db_path(workflow, &a.from.store).display().to_string();
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
    let code = follow(&engine, &run_id, from, Some(id), a.timeout, a.json).await;
    flush_telemetry(&opened);
    code
}

/// `send --engine nats://…`: publishes the event on the class stream for the run (the
/// workers dispatch it), then follows the run's journal.
#[cfg(feature = "nats")]
pub(super) async fn send_nats(
    workflow: &Workflow,
    url: &str,
    a: &SendArgs,
    name: &str,
    fields: Value,
) -> Result<u8, Fail> {
    let (reader, opts) = open_nats_reader(workflow, url, &a.from).await?;
    // A run of this agent, or of one it runs in process (`with_delegate`): its events go
    // through this agent's class stream to the worker that holds it.
    let (agent, run_id) =
        resolve_agent_run(workflow, &reader.backend, &reader.place, &a.run).await?;
    let view = read_view(&agent, &reader, &run_id).await?;
    if view.run.is_terminated() {
        return Err(ended_run(&run_id, &view.run));
    }
    // The run's owner refuses an answer to no open work request; say so here, where the
    // sender sees it (the owner checks again, under the run's lock).
    let logged = |seq: u32| Some(view.fields(seq));
    crate::process::check_answer(&view.run, logged, name, &fields)
        .map_err(|detail| invalid(format!("SAAP-E022: run {run_id}: {detail}")))?;
    let from = view.run.log().len();
    let (id, env) = event_envelope(&agent, name, fields)?;
    publish_to_run(workflow, &reader, &opts, &view.thread_id, &run_id, &env).await?;
    eprintln!("sent {name} {id} to run {run_id} on the class stream");
    follow_stored(&agent, &reader, &run_id, from, id, a.timeout, a.json).await
}

/// An event of `workflow` named `name` with `fields`, as a fresh envelope to publish: its id
/// and the envelope. Refuses a name that is not an event type of the workflow.
#[cfg(feature = "nats")]
pub(super) fn event_envelope(
    workflow: &Workflow,
    name: &str,
    fields: Value,
) -> Result<(saap_dispatch::EventId, saap_protocol::EventEnvelope), Fail> {
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
    Ok((id, env))
}

/// An envelope of one of saap's own messages to a run (`name`, a child of `parent`; the
/// workflow need not declare it: its lineage comes from the protocol's) with `fields`.
#[cfg(feature = "nats")]
pub(super) fn saap_envelope(
    workflow: &Workflow,
    name: &str,
    parent: &str,
    fields: &impl serde::Serialize,
) -> Result<(saap_dispatch::EventId, saap_protocol::EventEnvelope), Fail> {
    let mut hierarchy = workflow.compiled().hierarchy.clone();
    if !hierarchy.contains(name) {
        hierarchy
            .register(name, &[parent])
            .map_err(|e| internal(e.to_string()))?;
    }
    let id = saap_nats::ids::fresh_event_id();
    let fields = serde_json::to_value(fields).map_err(|e| internal(e.to_string()))?;
    let env = crate::nats::envelope(&hierarchy, name, id, fields).map_err(internal)?;
    Ok((id, env))
}

/// Publishes `env` on the class stream to run `run_id`, at the address its owner published
/// (else, with no owner now, the journal's thread `thread_id`): the workers dispatch it.
#[cfg(feature = "nats")]
pub(super) async fn publish_to_run(
    workflow: &Workflow,
    reader: &super::reader::NatsReader,
    opts: &crate::nats::NatsOptions,
    thread_id: &str,
    run_id: &str,
    env: &saap_protocol::EventEnvelope,
) -> Result<(), Fail> {
    let nats = reader.nats.nats();
    let address = crate::nats::run_address(nats, workflow.name(), run_id, thread_id)
        .await
        .map_err(|e| internal(opts.sanitize(&e)))?;
    nats.publish_control(&address, env)
        .await
        .map_err(|e| internal(opts.sanitize(&e.to_string())))?;
    Ok(())
}

/// The event of `send --event`: (type name, fields).
pub(super) fn send_event(a: &SendArgs) -> Result<(String, Value), Fail> {
    named_event("--event", &a.event)
}

/// An event given on the command line as `{"_event_name": "...", ...fields}` (or `@FILE`,
/// `-`) to flag `flag`: (type name, fields).
pub(super) fn named_event(flag: &str, text: &str) -> Result<(String, Value), Fail> {
    let (what, value) = json_arg(flag, text)?;
    event_fields(&what, value)
}

/// An event as parsed JSON `{"_event_name": "...", ...fields}` (`what` names where it came
/// from, for messages): (type name, fields), the envelope's own keys dropped.
pub(super) fn event_fields(what: &str, value: Value) -> Result<(String, Value), Fail> {
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
