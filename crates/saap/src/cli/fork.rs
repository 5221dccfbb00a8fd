//! `<agent> fork RUN --at SEQ`: a new run from a stored run's log up to an event from
//! outside, with that event sent again, replaced or preceded by another; then followed as
//! `run` does. The fork is the engine's (`Engine::fork`); this parses the change and prints
//! what the fork reused and sent again.

use super::args::{EngineArg, EngineKind, ReadArgs};
use super::fail::{Fail, engine_fail, internal, invalid, io};
use super::follow::follow;
use super::reader::engine_of_run;
use super::send::named_event;
use super::store::{flush_telemetry, memory_keeps_nothing};
use crate::event::Payload;
use crate::fork::{ForkChange, ForkOptions, Forked};
use crate::workflow::Workflow;
use std::io::Write;
use std::time::Duration;

#[derive(clap::Args)]
#[command(
    after_help = "The fork is a new run of the agent in the same store. It begins with the original's journal up
to event SEQ (an event sent from outside, as `show RUN` numbers them): those executions'
outputs are reused, not run again, and its first entry names the original. Then, at SEQ:

  (no --event/--replace)   event SEQ again, as it was: with unchanged code, the fork
                           reproduces the original (check with `diff RUN FORK`)
  --event JSON             this event first, then event SEQ and the ones after it
  --replace SEQ=JSON       this event instead of event SEQ

From there an execution whose step and inputs (event types and fields) the original also
executed after SEQ takes the outputs the original recorded for it, not run again (nor one
that failed, set timers or started child runs); the rest run live, with this binary's code,
calling out anew (--no-reuse: every execution after SEQ runs live, to try changed code on the
same events). `show FORK` and `explain --run FORK` list which executions were reused.
The original's later events from outside (a person's answers, say) are sent to the fork
again, in order, each once it has no step running; --no-reapply leaves them out. The fork
gets a thread of its own (--thread to choose one), so the original conversation's
ThreadContext is left alone. SEQ may be the log's length with --event: an event added after
everything the original received.

Refused (exit 2, SAAP-E024): the start event (start a new run instead), a SEQ past the log or
not sent from outside, a point after the run ended, or one where the run has a child run
awaited or detached. Needs the workflow version that recorded the run (SAAP-E007).

Examples:
  fork RUN --at 3                               event [3] again: the same run, anew
  fork RUN --replace 3='{\"_event_name\": \"ApprovalGiven\", \"approved\": false, \"by\": \"bob\"}'
  fork RUN --at 5 --event @extra.json --no-reapply
  diff RUN FORK                                 where the fork departs from the original

Exit codes: 0 the fork stopped, 1 it failed or still waits after --timeout, 2 an unknown run, a
fork point that cannot be forked at or an invalid event, 3 a database failure."
)]
pub(super) struct ForkArgs {
    /// The run to fork (its id or a unique prefix).
    pub(super) run: String,
    /// The event of the run's log to fork at (its number in `show RUN`).
    #[arg(long, value_name = "SEQ", required_unless_present = "replace")]
    pub(super) at: Option<u32>,
    /// An event to send first at SEQ: JSON `{"_event_name": "...", ...fields}`, `@FILE` or `-`.
    #[arg(long, value_name = "JSON", conflicts_with = "replace")]
    pub(super) event: Option<String>,
    /// Replace event SEQ with this one: `SEQ=JSON` (JSON as for --event).
    #[arg(long, value_name = "SEQ=JSON", conflicts_with = "at")]
    pub(super) replace: Option<String>,
    /// Do not send the original's later events from outside to the fork.
    #[arg(long)]
    pub(super) no_reapply: bool,
    /// Run every execution after the fork point live, even one whose inputs the original
    /// saw (default: it takes the original's recorded outputs).
    #[arg(long)]
    pub(super) no_reuse: bool,
    /// The fork's thread (default: a thread of its own).
    #[arg(long, value_name = "ID")]
    pub(super) thread: Option<String>,
    #[command(flatten)]
    pub(super) from: ReadArgs,
    /// Seconds to wait for the fork to end (and, for each event sent again, to settle).
    #[arg(long, default_value_t = 60.0, value_name = "SECS")]
    pub(super) timeout: f64,
    /// Print JSON lines: the fork ({"forked": {...}}), its display events, then the result.
    #[arg(long)]
    pub(super) json: bool,
}

pub(super) async fn fork_cmd(workflow: &Workflow, a: ForkArgs) -> Result<u8, Fail> {
    let kind = match &a.from.engine {
        EngineArg::Local(EngineKind::Memory) => return Err(memory_keeps_nothing("fork")),
        EngineArg::Local(kind) => *kind,
        EngineArg::Nats(_) => {
            return Err(invalid(
                "forking a run of the NATS engine is not supported yet; fork a run of the embedded store",
            ));
        }
    };
    let (at, change) = fork_change(&a)?;
    let (engine, opened, run_id) = engine_of_run(
        workflow,
        kind,
        &a.from.store,
        &a.run,
        "start a run first with `run`",
    )
    .await?;
    let opts = ForkOptions {
        at,
        change,
        reapply: !a.no_reapply,
        thread_id: a.thread.clone(),
        settle: Duration::from_secs_f64(a.timeout.clamp(0.0, 86_400.0)),
        reuse: !a.no_reuse,
    };
    let forked = engine.fork(&run_id, opts).await.map_err(engine_fail)?;
    report(&forked, a.json)?;
    let code = follow(&engine, &forked.run_id, 0, None, a.timeout, a.json).await;
    if !a.json {
        // Which executions took the original's outputs and which ran, now that it settled.
        if let Ok(Some(stored)) = engine
            .backend()
            .read_run(workflow.name(), &forked.run_id)
            .wait()
            .await
            && let Some(l) = lineage(&stored)
        {
            eprintln!("{}", l.text());
        }
    }
    flush_telemetry(&opened);
    code
}

/// The fork point and the change from the flags.
fn fork_change(a: &ForkArgs) -> Result<(u32, ForkChange), Fail> {
    if let Some(r) = &a.replace {
        let Some((seq, json)) = r.split_once('=') else {
            return Err(invalid(format!(
                "--replace {r}: write SEQ=JSON, e.g. --replace 3='{{\"_event_name\": \"ApprovalGiven\", ...}}'"
            )));
        };
        let at: u32 = seq.trim().parse().map_err(|_| {
            invalid(format!(
                "--replace {seq}=…: SEQ must be an event's number in `show RUN` (0, 1, 2, …)"
            ))
        })?;
        let (name, fields) = named_event("--replace", json)?;
        let payload = Payload::from_json(fields);
        return Ok((at, ForkChange::Replace { name, payload }));
    }
    let at =
        a.at.ok_or_else(|| invalid("say where to fork: --at SEQ or --replace SEQ=JSON"))?;
    let change = match &a.event {
        Some(text) => {
            let (name, fields) = named_event("--event", text)?;
            ForkChange::Add {
                name,
                payload: Payload::from_json(fields),
            }
        }
        None => ForkChange::Same,
    };
    Ok((at, change))
}

/// What the fork reused and sent again: on stderr, or as the first JSON line.
fn report(f: &Forked, json: bool) -> Result<(), Fail> {
    if json {
        let line = serde_json::json!({ "forked": f });
        let mut out = std::io::stdout().lock();
        serde_json::to_writer(&mut out, &line)
            .map_err(|e| internal(format!("cannot write JSON: {e}")))?;
        writeln!(out).map_err(io)?;
        return Ok(());
    }
    eprintln!(
        "forked run {} at event [{}] as run {} ({} journal entries and the {} executions completed in them copied; {} later event(s) sent again)",
        f.forked_from,
        f.at,
        f.run_id,
        f.entries_reused,
        f.executions_reused,
        f.reapplied.len()
    );
    for n in &f.not_reapplied {
        eprintln!("not sent again: [{}] {}: {}", n.seq, n.name, n.reason);
    }
    Ok(())
}

/// Where a forked run came from and which of its executions were reused or ran live; `None`
/// for a run that is not a fork. `show` prints it (`forked_from` in `--json`), as does the
/// studio's run page.
pub(super) fn lineage(
    stored: &crate::backend::StoredRun,
) -> Option<saap_dispatch::lineage::Lineage> {
    let origin = stored.journal.first()?.fork.clone()?;
    let completions = stored
        .journal
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match &e.input {
            crate::backend::StoredInput::Complete {
                execution, reused, ..
            } => Some((i as u64, *execution, *reused)),
            _ => None,
        });
    Some(saap_dispatch::lineage::Lineage::new(
        origin.run_id,
        u64::from(origin.at),
        u64::from(origin.entries),
        completions,
    ))
}
