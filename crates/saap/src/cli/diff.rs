//! `<agent> diff RUN_A RUN_B`: where two stored runs of the agent part ways — the first
//! decision record that differs (an event, a decision, a binding, an output, the end) —
//! and how they differ in sum (executions per step, events per type, how each ended).
//! The comparison is saap-dispatch's (`diff`); this reads the runs and prints it.

use super::args::ReadArgs;
use super::fail::{Fail, internal, invalid, io};
use super::reader::read_named_run;
use crate::history::StoredRunView;
use crate::workflow::Workflow;
use saap_dispatch::diff::{Side, diff_runs, diff_text};
use serde_json::json;
use std::io::Write;

#[derive(clap::Args)]
#[command(
    after_help = "Each run is read from its journal and rebuilt through the dispatch core (no step runs), then
the two are compared record by record: runs that took the same path have the same decision
records, naming the same positions (event [3], execution x2), so the first record that differs
— or names an event of another type or other fields — is where they part. Fields are compared
without the keys that name ids (`*_id`), which differ between any two runs.

Examples:
  diff RUN_A RUN_B                      the first divergence, then the counts that differ
  diff RUN_A RUN_B --json               {same, first: {record, kind, a, b, detail}, executions, events, end_a, end_b}
  diff RUN_A RUN_B --engine nats://127.0.0.1:4222   two runs of the agent class on NATS

Exit codes: 0 the runs are the same, 1 they differ, 2 an unknown run or runs of two different
workflows (or versions of one), 3 database or server failure."
)]
pub(super) struct DiffArgs {
    /// The first run id (or a unique prefix of it).
    pub(super) run_a: String,
    /// The second.
    pub(super) run_b: String,
    #[command(flatten)]
    pub(super) from: ReadArgs,
    /// Print JSON: {same, run_a, run_b, first: {record, kind (event|output|decision|binding|end),
    /// a, b, detail} or null, executions: [{name, a, b}], events: [{name, a, b}], end_a, end_b,
    /// records_a, records_b}.
    #[arg(long)]
    pub(super) json: bool,
}

pub(super) async fn diff_cmd(workflow: &Workflow, a: DiffArgs) -> Result<u8, Fail> {
    let (fa, va) = read(workflow, &a.from, &a.run_a).await?;
    let (fb, vb) = read(workflow, &a.from, &a.run_b).await?;
    if va.workflow != vb.workflow || fa != fb {
        return Err(invalid(format!(
            "run {} is a run of {} (workflow fingerprint {fa:016x}) and run {} of {} ({fb:016x}): \
             diff compares runs of one workflow as one version of it recorded them",
            va.run_id, va.workflow, vb.run_id, vb.workflow
        )));
    }
    let fields_a = |seq: u32| Some(va.fields(seq));
    let fields_b = |seq: u32| Some(vb.fields(seq));
    let d = diff_runs(
        &Side {
            run: &va.run,
            fields: Some(&fields_a),
        },
        &Side {
            run: &vb.run,
            fields: Some(&fields_b),
        },
    );
    let mut out = std::io::stdout().lock();
    if a.json {
        let mut doc = serde_json::to_value(&d)
            .map_err(|e| internal(format!("cannot encode the diff: {e}")))?;
        doc["same"] = json!(d.is_same());
        doc["run_a"] = json!(va.run_id);
        doc["run_b"] = json!(vb.run_id);
        serde_json::to_writer_pretty(&mut out, &doc)
            .map_err(|e| internal(format!("cannot write JSON: {e}")))?;
        writeln!(out).map_err(io)?;
    } else {
        out.write_all(diff_text(&d, &va.run_id, &vb.run_id).as_bytes())
            .map_err(io)?;
    }
    Ok(u8::from(!d.is_same()))
}

/// Run `given` (an id or a unique prefix) rebuilt from its journal, with the fingerprint of
/// the workflow version that recorded it.
async fn read(
    workflow: &Workflow,
    from: &ReadArgs,
    given: &str,
) -> Result<(u64, StoredRunView), Fail> {
    let named = read_named_run(workflow, from, given).await?;
    let view =
        StoredRunView::rebuild(&named.agent, &named.stored).map_err(|e| internal(e.to_string()))?;
    Ok((named.stored.meta.fingerprint, view))
}
