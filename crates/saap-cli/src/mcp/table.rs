//! The tool table: every tool's name, what it is for (the description the coding agent reads
//! to choose it), its argument schema (generated from [`super::params`]), how to narrow an
//! answer that was too long, and which function answers it.
//!
//! Adding a tool is a row in [`TOOLS`], a variant of [`ToolId`], an argument type and an arm in
//! [`call`]. Must not do the work itself; it only routes.

use super::answer::{Answer, ToolError};
use super::context::Context;
use super::params::*;
use super::{inspect_tools as inspect, spec_tools as spec};
use rmcp::handler::server::common::schema_for_type;
use rmcp::model::JsonObject;
use serde::de::DeserializeOwned;
use std::sync::Arc;

/// Which tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolId {
    Check,
    Simulate,
    Explore,
    Explain,
    Report,
    ServerInfo,
    StreamList,
    StreamReport,
    StreamInfo,
    StreamState,
    StreamSubjects,
    StreamView,
    StreamGet,
    KvLs,
    KvGet,
    Runs,
    RunTimeline,
}

/// One tool of the table.
pub struct ToolDef {
    /// Which tool.
    pub id: ToolId,
    /// Its MCP name.
    pub name: &'static str,
    /// A short title.
    pub title: &'static str,
    /// What it is for and when to call it.
    pub description: &'static str,
    /// Its argument schema.
    pub schema: fn() -> Arc<JsonObject>,
    /// How to get the rest when the answer was cut.
    pub narrow: &'static str,
}

const PAGE: &str = "Ask for fewer messages (`limit`), filter (`run`, `event`, `kind`, `since`), or read the next page with `from` set to the last `seq` shown + 1.";

/// Every tool, in the order `tools/list` shows them.
pub const TOOLS: &[ToolDef] = &[
    ToolDef {
        id: ToolId::Check,
        name: "check",
        title: "Check an agent statically",
        description: "Static checks of an agent before anything runs: every constraint of the SAAP dispatch rules (unreachable step, required input nothing produces, dangling stop, optional-parameter trap, list re-runs, FixedList larger than its producers, double-dip, unbounded cycle, …) with a stable code (SAAP001…), the step and parameter, why it breaks at runtime and the fix. Give `path` to a workflow spec (JSON/YAML) or to Python agent source (a `.py` file or a package folder: adds context smuggle, config lie, form/field mismatch, SAAP101…, each at file:line:column), relative to the server's root, or `spec` with a spec's text. Call this FIRST for any 'step runs twice / never runs / events after stop / agent won't start' report. Answer (spec): {spec, name, findings: [{code, severity, rule, step, param, message, why, fix}], summary: {errors, warnings}}; (Python): {input, files, agents: [{name, location, findings (each with location file/line/column), summary}], …}.",
        schema: schema_for_type::<CheckParams>,
        narrow: "Check a smaller part of the package (one .py file).",
    },
    ToolDef {
        id: ToolId::Simulate,
        name: "simulate",
        title: "Simulate one run of a spec",
        description: "Runs the spec's dispatch over the arrival order in its `simulation:` section with a deterministic completion policy and returns the timeline: every event, every dispatch decision (candidate, skipped and why, precondition result, execution started with the events bound to each parameter, completed), executions per step and how the run ended. Use it to SEE a suspected race (optional-parameter trap, list re-runs) happen once; try `policy` lifo or arrivals-first for other orders; use `explore` for all orders. Answer: {events, records, executions, executions_per_step, status, unfinished}.",
        schema: schema_for_type::<SimulateParams>,
        narrow: "Lower `max_completions`, or call `explain` with `steps` for the steps you care about.",
    },
    ToolDef {
        id: ToolId::Explore,
        name: "explore",
        title: "Explore every interleaving",
        description: "Tries every order in which the spec's arrivals come and running executions finish (state merging and partial-order reduction keep it small) and reports, per step, the fewest and most executions with a witness trace for the worst, plus reachable stalls (run never ends), events after stop and exceptions. Use it to prove a step CAN run more than once or a run CAN hang, and to confirm a fix holds in every order. CPU-bound: bounded by `max_states`/`max_depth` and the server's time bound (the exploration is stopped, not left running). Answer: {complete, bounds_hit, stats, steps: [{step, best, worst, worst_witness, reruns}], stalls, after_stop, exceptions}.",
        schema: schema_for_type::<ExploreParams>,
        narrow: "Lower `max_states` or `max_depth`, or drop `permute_arrivals`.",
    },
    ToolDef {
        id: ToolId::Explain,
        name: "explain",
        title: "Explain why steps fired or never fired",
        description: "Why each step fired, fired more than once (which parameter made the repeat a new input set, under which rule R1-R6) or never fired (each skip, what it still lacked, which step should have produced it), with the fix — in a simulated run of the spec, in a recorded run (`history`: a History JSON file under the root, from `saap simulate --history-out` or an agent's `show RUN --history-out`), or in a stored or live run by id (`run`, read from the server's store or NATS server: a saap journal replayed and checked, or a run the Python platform recorded rebuilt from its events with `python_differences`, where the Python dispatcher would have behaved differently; on NATS the spec may be left out). Name `steps` to focus. Use after `check`/`simulate`/`runs` have shown the symptom, to get the causal chain. Answer: {spec, source, cut_off, cycle, steps: [{step, summary, executions, fired, skipped, still_missing, advice}]} (+ run, recorded_by, events_from, spec_from, python_differences for a run).",
        schema: schema_for_type::<ExplainParams>,
        narrow: "Name fewer `steps`.",
    },
    ToolDef {
        id: ToolId::Report,
        name: "report",
        title: "Write the debug report for a symptom",
        description: "The debugging guide's report for one symptom (runs-twice, never-runs, after-stop, precondition, wont-start, config) and step, filled from check, explain, explore and, with `run`, a stored or live run (its status, the step's executions and skips, events after stop, the step explained on the run): agent, event DAG, root cause with the rule R1-R6 and the constraint (file:line for Python source), evidence with the commands that show it, the fix (before/after code for the optional trap), and the commands that verify it. Call it when you have a symptom and a step, to get the diagnosis in one answer; 'no cause found' says what was checked. Answer: {report_format, agent, dag, symptom, verdict, conclusion, root_causes, evidence, fixes, verification, checked}.",
        schema: schema_for_type::<ReportParams>,
        narrow: "Give `step`, or drop `run`.",
    },
    ToolDef {
        id: ToolId::ServerInfo,
        name: "server_info",
        title: "NATS server (or store) health",
        description: "The live system the server was started with: NATS server name, id, version, JetStream account usage and limits; or the store file (schema, size, run counts). Call it first when an agent 'won't start' or nothing happens: if this fails, NATS is down or unreachable (the error says which). Read-only.",
        schema: schema_for_type::<SourceParams>,
        narrow: "",
    },
    ToolDef {
        id: ToolId::StreamList,
        name: "stream_list",
        title: "List streams",
        description: "Every JetStream stream (a store: every workflow's journal) with its role (agent_class = agent_{Class}_stream, journal, work_queue, kv), agent class, message and consumer counts. Use it to find an agent's stream; a missing agent_{Class}_stream means the agent never connected. Read-only.",
        schema: schema_for_type::<StreamsParams>,
        narrow: "Lower `limit`.",
    },
    ToolDef {
        id: ToolId::StreamReport,
        name: "stream_report",
        title: "All streams with their state",
        description: "Every stream with its full state: subjects, messages, bytes, first/last sequence and time, consumers. The summary view over all streams; `stream_list` is the compact one. Read-only.",
        schema: schema_for_type::<StreamsParams>,
        narrow: "Lower `limit`, or use `stream_list`.",
    },
    ToolDef {
        id: ToolId::StreamInfo,
        name: "stream_info",
        title: "One stream: config, state, consumers, event types",
        description: "One stream's configuration, state, consumers (with pending and ack-pending counts) and messages per event type. Zero consumers on agent_{Class}_stream = no dispatcher is subscribed; pending piling up = the agent is not keeping up. Read-only.",
        schema: schema_for_type::<StreamParams>,
        narrow: "Use `stream_state` or `stream_subjects`, or lower `max_subjects`.",
    },
    ToolDef {
        id: ToolId::StreamState,
        name: "stream_state",
        title: "One stream's state",
        description: "One stream's state only: first/last sequence and time, messages, bytes, deleted messages, consumers. Cheap; use it for the sequence range before `stream_view`/`stream_get`. Read-only.",
        schema: schema_for_type::<StreamParams>,
        narrow: "",
    },
    ToolDef {
        id: ToolId::StreamSubjects,
        name: "stream_subjects",
        title: "Event types published on a stream",
        description: "Which event types were published on a stream and how many of each (control and display). Use it when a step never runs: is the event it waits for there at all? Compare with the step's required inputs from `check`. Read-only.",
        schema: schema_for_type::<StreamParams>,
        narrow: "Lower `max_subjects`.",
    },
    ToolDef {
        id: ToolId::StreamView,
        name: "stream_view",
        title: "Read events in stream order",
        description: "One page of messages in stream order, decoded into SAAP events (saap's and the Python implementation's alike; an undecodable message comes back raw with its reason): sequence, stored time, subject parts (run, thread, kind, event name), headers, the event JSON; journal streams show the dispatcher's decision records. Filter by `run`, `thread`, `event`, `kind`, `since`/`until` (applied by the server), or read the last `count` messages. Page with `from` = the answer's `next_seq`. Use it to see duplicates (same event type twice for one run), events after the stop event, or the last event before a stall. Read-only.",
        schema: schema_for_type::<ViewParams>,
        narrow: PAGE,
    },
    ToolDef {
        id: ToolId::StreamGet,
        name: "stream_get",
        title: "One message by sequence",
        description: "One stored message by its stream sequence (as `stream_view` shows it), decoded, with headers; raw with the reason when it is not a valid SAAP event. Read-only.",
        schema: schema_for_type::<GetParams>,
        narrow: "",
    },
    ToolDef {
        id: ToolId::KvLs,
        name: "kv_ls",
        title: "List KV buckets or keys",
        description: "Without `bucket`: the KV buckets (saap workers keep run contexts, step bookkeeping and ownership there; a store: run_context and thread_context). With `bucket`: its keys. Read-only.",
        schema: schema_for_type::<KvLsParams>,
        narrow: "Lower `limit`.",
    },
    ToolDef {
        id: ToolId::KvGet,
        name: "kv_get",
        title: "Read one KV entry",
        description: "One KV value (JSON when it is JSON), with its revision and time. Use it to read a run's context or a step's bookkeeping. Read-only.",
        schema: schema_for_type::<KvGetParams>,
        narrow: "The value is cut by the server at 64 KiB; read a narrower key.",
    },
    ToolDef {
        id: ToolId::Runs,
        name: "runs",
        title: "List runs with status",
        description: "The runs found in an agent class stream (NATS: `stream_name` required, e.g. agent_RagAgent_stream) or a store, most recent first, each with status (live, stopped, failed), what ended it, event count and control events stored after the stop. Filter by `status`; page with `before` (NATS) or `after` (store) = the answer's `next`. Use it to pick the failing run before `run_timeline`. Read-only.",
        schema: schema_for_type::<RunsParams>,
        narrow: "Lower `limit` or `scan`, or filter by `status`.",
    },
    ToolDef {
        id: ToolId::RunTimeline,
        name: "run_timeline",
        title: "One run's timeline",
        description: "One run's events in order (NATS: found from its subjects, or give `stream_name`; a store: its journal with the dispatcher's decision records — which steps were candidates, skipped and why, started, completed), flagging control events after the stop. Page with `from` = `next_seq`. The runtime view of one run; `explain` gives the why on a spec. Read-only.",
        schema: schema_for_type::<RunParams>,
        narrow: "Lower `limit` and page with `from` = the last `seq` shown + 1.",
    },
];

/// The row of `name`.
pub fn find(name: &str) -> Option<&'static ToolDef> {
    TOOLS.iter().find(|t| t.name == name)
}

/// Reads a call's arguments into `T`, or a tool error naming what is wrong.
fn parse<T: DeserializeOwned>(tool: &str, args: Option<JsonObject>) -> Result<T, ToolError> {
    let value = serde_json::Value::Object(args.unwrap_or_default());
    serde_json::from_value(value).map_err(|e| {
        ToolError::new(format!(
            "invalid arguments for `{tool}`: {e}; see the tool's input schema (tools/list)"
        ))
    })
}

/// Answers one call of `tool`.
pub async fn call(ctx: &Context, tool: &ToolDef, args: Option<JsonObject>) -> Answer {
    let n = tool.name;
    match tool.id {
        ToolId::Check => spec::check(ctx, parse(n, args)?).await,
        ToolId::Simulate => spec::simulate(ctx, parse(n, args)?).await,
        ToolId::Explore => spec::explore(ctx, parse(n, args)?).await,
        ToolId::Explain => spec::explain(ctx, parse(n, args)?).await,
        ToolId::Report => spec::report(ctx, parse(n, args)?).await,
        ToolId::ServerInfo => inspect::server_info(ctx, parse(n, args)?).await,
        ToolId::StreamList => inspect::stream_list(ctx, parse(n, args)?).await,
        ToolId::StreamReport => inspect::stream_report(ctx, parse(n, args)?).await,
        ToolId::StreamInfo => inspect::stream_info(ctx, parse(n, args)?).await,
        ToolId::StreamState => inspect::stream_state(ctx, parse(n, args)?).await,
        ToolId::StreamSubjects => inspect::stream_subjects(ctx, parse(n, args)?).await,
        ToolId::StreamView => inspect::stream_view(ctx, parse(n, args)?).await,
        ToolId::StreamGet => inspect::stream_get(ctx, parse(n, args)?).await,
        ToolId::KvLs => inspect::kv_ls(ctx, parse(n, args)?).await,
        ToolId::KvGet => inspect::kv_get(ctx, parse(n, args)?).await,
        ToolId::Runs => inspect::runs(ctx, parse(n, args)?).await,
        ToolId::RunTimeline => inspect::run_timeline(ctx, parse(n, args)?).await,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_a_unique_name_a_description_and_an_object_schema() {
        let mut names: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TOOLS.len());
        for t in TOOLS {
            assert!(t.description.len() > 80, "{}", t.name);
            let s = (t.schema)();
            assert_eq!(s.get("type").unwrap(), "object", "{}", t.name);
            assert!(find(t.name).is_some());
        }
    }

    #[test]
    fn the_skill_file_and_the_cli_docs_name_every_tool() {
        let skill = include_str!("../../../../skills/saap-debug/SKILL.md");
        let docs = include_str!("../../../../docs/cli.md");
        for t in TOOLS {
            let quoted = format!("`{}`", t.name);
            assert!(
                skill.contains(&quoted),
                "skills/saap-debug/SKILL.md does not name {quoted}"
            );
            assert!(
                docs.contains(&format!("| {quoted} |")),
                "docs/cli.md's `saap mcp` table has no row for {quoted}"
            );
        }
    }
}
