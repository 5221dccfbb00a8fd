//! `<agent> replay RUN`: re-runs a stored run's step bodies against its record — the
//! regression check after a code change. The replay is the engine's
//! (`Engine::replay_stored`); this reads the run and its effects and prints the report.

use super::args::ReadArgs;
use super::fail::{Fail, internal, io};
use super::reader::read_named_run;
use crate::Engine;
use crate::replay::{ReplayError, report_text};
use crate::workflow::Workflow;
use std::io::Write;

#[derive(clap::Args)]
#[command(
    after_help = "The run's journal goes through the dispatch core again, entry by entry. At each recorded
completion the execution's body runs again on the inputs the core binds, with this binary's
code: every outside call it makes through `ctx.effect` (every model and tool call of
`saap::llm`) gets the recorded result — nothing is called out, a call the record does not
hold fails the body (SAAP-E023) — and what it returns, the display events it shows and
every decision record are compared with the record. Preconditions are evaluated anew.
The first difference is reported with both sides; nothing is written.

A difference means the code changed since the run was recorded, or a body depends on
something the record does not hold: the clock, randomness, a call not made through
`ctx.effect`. A changed workflow (steps, types, parameters) is noted and diverges where it
decides otherwise.

Examples:
  replay RUN                        reproduced, or where it diverged and how
  replay RUN --json                 {run_id, reproduced, divergence: {kind, entry, execution, step, attempt, record, recorded, replayed, detail}, ...}
  replay RUN --engine nats://127.0.0.1:4222   a run of the agent class on NATS

Exit codes: 0 reproduced, 1 diverged, 2 an unknown run, 3 a damaged run or a database or
server failure."
)]
pub(super) struct ReplayArgs {
    /// The run id (or a unique prefix of it).
    pub(super) run: String,
    #[command(flatten)]
    pub(super) from: ReadArgs,
    /// Print JSON: {run_id, workflow, reproduced, workflow_changed, recorded_fingerprint,
    /// fingerprint, journal_entries, entries_reproduced, executions_run, effects_served,
    /// records, records_reproduced, divergence: null or {kind (outcome|display|decision|
    /// journal|stuck), entry, execution, step, attempt, record, recorded, replayed, detail}}.
    #[arg(long)]
    pub(super) json: bool,
}

pub(super) async fn replay_cmd(workflow: &Workflow, a: ReplayArgs) -> Result<u8, Fail> {
    let named = read_named_run(workflow, &a.from, &a.run).await?;
    let report = Engine::replay_stored(&named.agent, &named.stored, named.effects)
        .await
        .map_err(|e: ReplayError| internal(e.to_string()))?;
    let mut out = std::io::stdout().lock();
    if a.json {
        let mut doc = serde_json::to_value(&report)
            .map_err(|e| internal(format!("cannot encode the report: {e}")))?;
        doc["reproduced"] = serde_json::json!(report.reproduced());
        doc["workflow_changed"] = serde_json::json!(report.workflow_changed());
        serde_json::to_writer_pretty(&mut out, &doc)
            .map_err(|e| internal(format!("cannot write JSON: {e}")))?;
        writeln!(out).map_err(io)?;
    } else {
        out.write_all(report_text(&report).as_bytes()).map_err(io)?;
    }
    Ok(u8::from(!report.reproduced()))
}
