//! `<agent> run`: start a run and follow it, or serve the agent's class as a NATS worker
//! (`--engine nats://…`).

use super::args::{BudgetArgs, EngineArg, StoreArgs, parse_engine_arg};
#[cfg(feature = "nats")]
use super::args::{NatsArgs, StepsArgs, worker_options};
#[cfg(feature = "nats")]
use super::fail::internal;
use super::fail::{Fail, engine_fail, invalid};
use super::follow::follow;
use super::input::json_arg;
#[cfg(feature = "nats")]
use super::store::nats_options;
use super::store::{engine_options, flush_telemetry, open_engine_with};
use crate::workflow::Workflow;
use serde_json::Value;
#[derive(clap::Args)]
#[command(
    after_help = "The start event is either --message TEXT (a UserMessageEvent) or --event JSON: an object
with `_event_name` (a start event type of the agent) and the event's fields. --event @FILE reads
the JSON from a file, --event - from stdin. --config JSON (or @FILE) is the run's config: it
travels in the start event's `_config`, is merged over the agent's defaults and is checked
before the run starts (SAAP-C001/C002, exit 2).

--max-executions N, --max-time DURATION, --max-tokens N and --max-cost AMOUNT give the run a
budget: once it is spent, what the run would run next is held (nothing is lost) and the run
waits as `waiting_budget` until `resume RUN` grants more (the same budget again, or
`--raise executions=N --raise time=1h`). With --engine nats://… they are the budget of every run
this worker starts: give all workers of the class the same flags.

Display events (chunks, thoughts, costs, questions) are printed as they arrive; chunks are
streamed as text. With --json every display event is one JSON line, and the last line is the
result: {run_id, status, result: {event, fields}, executions}.

Exit codes: 0 the run stopped, 1 it ended with an exception or still waits after --timeout
(it stays stored: see `show RUN`), 2 invalid start event, 3 database failure."
)]
pub(super) struct RunArgs {
    /// Start with a UserMessageEvent carrying this message.
    #[arg(long, short, value_name = "TEXT", conflicts_with = "event")]
    pub(super) message: Option<String>,
    /// Start with this event: JSON `{"_event_name": "...", ...fields}`, `@FILE` or `-`.
    #[arg(long, short, value_name = "JSON")]
    pub(super) event: Option<String>,
    /// The run's config (JSON object, `@FILE` or `-`): put in the start event's `_config`,
    /// merged over the agent's defaults and checked before the run starts.
    #[arg(long, value_name = "JSON")]
    pub(super) config: Option<String>,
    /// Continue a conversation: run in this thread (shares its ThreadContext).
    #[arg(long, value_name = "ID")]
    pub(super) thread: Option<String>,
    /// Where runs are kept: sqlite (default, durable), memory, or nats://HOST:PORT (tls://…):
    /// serve the agent class as one worker of the distributed engine on NATS JetStream.
    #[arg(long, default_value = "sqlite", value_name = "ENGINE", value_parser = parse_engine_arg)]
    pub(super) engine: EngineArg,
    #[command(flatten)]
    pub(super) store: StoreArgs,
    #[command(flatten)]
    pub(super) budget: BudgetArgs,
    #[cfg(feature = "nats")]
    #[command(flatten)]
    pub(super) nats: NatsArgs,
    #[cfg(feature = "nats")]
    #[command(flatten)]
    pub(super) steps: StepsArgs,
    /// Seconds to wait for the run to end before leaving it stored and live.
    #[arg(long, default_value_t = 60.0, value_name = "SECS")]
    pub(super) timeout: f64,
    /// Print JSON lines (display events, then the result).
    #[arg(long)]
    pub(super) json: bool,
}

pub(super) async fn run_cmd(workflow: &Workflow, a: RunArgs) -> Result<u8, Fail> {
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
    let opts = crate::EngineOptions {
        run_budget: a.budget.budget(),
        ..engine_options(workflow)?
    };
    let engine = open_engine_with(workflow, kind, &a.store, opts).await?;
    let run_id = engine
        .start_run_named(
            a.thread.as_deref(),
            &name,
            crate::event::Payload::from_json(fields),
        )
        .await
        .map_err(engine_fail)?;
    eprintln!("run {run_id} started ({name})");
    let code = follow(&engine, &run_id, 0, None, a.timeout, a.json).await;
    flush_telemetry(&engine);
    code
}

/// `run --engine nats://…`: one worker of the agent class on NATS JetStream, serving until
/// the process is stopped (runs stay in JetStream; another worker or a restart resumes them).
/// A start event given with --message/--event is published on the class stream first.
#[cfg(feature = "nats")]
pub(super) async fn serve_nats(workflow: &Workflow, url: &str, a: &RunArgs) -> Result<u8, Fail> {
    use crate::nats::Worker;
    let opts = nats_options(url, &a.nats)?;
    // The budget of every run this worker starts (give the class's workers the same).
    let engine = crate::EngineOptions {
        run_budget: a.budget.budget(),
        ..engine_options(workflow)?
    };
    let worker = Worker::connect(&opts, workflow.clone(), worker_options(&a.steps, engine)?)
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
        let nats = saap_nats::SaapNats::connect(&opts)
            .await
            .map_err(|e| internal(opts.sanitize(&e.to_string())))?;
        let run_id =
            publish_start(workflow, &nats, &opts, a.thread.as_deref(), &name, fields).await?;
        eprintln!("run {run_id} started ({name}) on the class stream");
    }
    worker
        .serve()
        .await
        .map_err(|e| internal(opts.sanitize(&e.to_string())))?;
    Ok(0)
}

/// Publishes a start event of `workflow` on its class stream, for a new run on `thread` (else
/// a new thread): a worker of the class begins the run. Returns the run's id.
#[cfg(feature = "nats")]
pub(super) async fn publish_start(
    workflow: &Workflow,
    nats: &saap_nats::SaapNats,
    opts: &crate::nats::NatsOptions,
    thread: Option<&str>,
    name: &str,
    fields: Value,
) -> Result<String, Fail> {
    let (_, env) = super::send::event_envelope(workflow, name, fields)?;
    let run_id = saap_nats::ids::fresh_event_id().to_string();
    let thread = thread
        .map(str::to_string)
        .unwrap_or_else(|| saap_nats::ids::fresh_event_id().to_string());
    let address = saap_protocol::RunAddress::new(workflow.name(), "cli", &thread, &run_id, &run_id)
        .map_err(|e| invalid(e.to_string()))?;
    nats.publish_control(&address, &env)
        .await
        .map_err(|e| internal(opts.sanitize(&e.to_string())))?;
    Ok(run_id)
}

/// The start event: (type name, fields), with `--config` in `_config`.
pub(super) fn start_event(a: &RunArgs) -> Result<(String, Value), Fail> {
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
