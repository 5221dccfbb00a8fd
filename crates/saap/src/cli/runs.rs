//! `<agent> runs`: the stored runs, newest first, paged by cursor or offset, filtered by
//! status.

use super::args::ReadArgs;
use super::fail::{Fail, internal, invalid, io};
use super::reader::{open_reader, resolve_run, where_runs};
use super::tree::{read_tree, render};
use crate::history::{StoredRunView, utc_time};
use crate::workflow::Workflow;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::Write;
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum StatusArg {
    /// Not ended: waiting for events or running steps.
    Live,
    /// Ended (stopped, failed or cancelled).
    Ended,
    /// Ended by a stop event.
    Stopped,
    /// Ended by an exception event (not a cancellation).
    Failed,
    /// Ended by a cancellation (`cancel`, or its parent's).
    Cancelled,
    /// Live and not running: waiting for an event, a timer or child runs (each listed run
    /// is rebuilt from its journal to tell).
    Waiting,
}

impl StatusArg {
    pub(super) fn filter(self) -> crate::backend::StatusFilter {
        use crate::backend::StatusFilter as F;
        match self {
            StatusArg::Live => F::Live,
            StatusArg::Ended => F::Ended,
            StatusArg::Stopped => F::Stopped,
            StatusArg::Failed => F::Failed,
            StatusArg::Cancelled => F::Cancelled,
            // Among the live runs; `runs_cmd` keeps those that wait.
            StatusArg::Waiting => F::Live,
        }
    }
}

#[derive(clap::Args)]
#[command(
    after_help = "Runs are listed newest first, one page at a time: each line comes from the store's run
record and the end of its journal, so a page costs the same however many runs are stored.

Examples:
  runs                                  the 20 newest runs
  runs --status live                    runs not ended yet
  runs --status waiting                 live runs that wait (for an event, a timer or child runs;
                                        continue one with `send RUN`)
  runs --status cancelled               runs ended by `cancel` (or their parent's)
  runs --status failed --limit 5        the 5 newest runs that ended with an exception
  runs --after RUN                      the next page: the runs older than RUN (the last listed)
  runs --thread ID                      the runs of one conversation
  runs --since 2h                       runs started in the last two hours (--until: before)
  runs --since \"2026-12-04 09:00\" --until \"2026-12-04 12:00\"   a window, UTC
  runs --offset 20                      the same by position
  runs --json | jq -r '.runs[].run_id'  ids for scripts (the shape: see --json above)
  runs --tree RUN                       RUN and the runs it delegated to, each with its status
  runs --engine nats://127.0.0.1:4222   the runs of the agent class on NATS JetStream

Exit codes: 0 listed (an empty list too), 2 invalid flags, 3 database or server failure."
)]
pub(super) struct RunsArgs {
    #[command(flatten)]
    pub(super) from: ReadArgs,
    /// Only runs with this status (`waiting`: live runs not running a step, each read from
    /// its journal to tell; page with --after).
    #[arg(long, value_enum)]
    pub(super) status: Option<StatusArg>,
    /// How many runs to list (at most 10000).
    #[arg(long, default_value_t = 20, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub(super) limit: u32,
    /// Skip this many (newest) matching runs: the next page starts at the previous offset
    /// plus the limit.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub(super) offset: u64,
    /// List the runs after this one (older): the last run of the previous page. Costs the
    /// same on every page, where --offset grows with the runs skipped.
    #[arg(long, value_name = "RUN")]
    pub(super) after: Option<String>,
    /// Only the runs of this thread (a conversation: `show` prints a run's thread).
    #[arg(long, value_name = "ID")]
    pub(super) thread: Option<String>,
    /// Only runs started at or after WHEN: a UTC time (`2026-12-04 15:00`, RFC 3339) or a
    /// time ago (`2h`, `30m`, `1d`).
    #[arg(long, value_name = "WHEN", value_parser = super::args::parse_when)]
    pub(super) since: Option<i64>,
    /// Only runs started before WHEN (as --since).
    #[arg(long, value_name = "WHEN", value_parser = super::args::parse_when)]
    pub(super) until: Option<i64>,
    /// Print JSON: {runs: [{run_id, thread_id, status, started, events, journal_entries}],
    /// offset, more, next_offset, next_after}; with --tree, the tree: {run_id, agent_class,
    /// status, relation (root, awaited, detached), reported?, abandoned?, children, unread?}.
    #[arg(long)]
    pub(super) json: bool,
    /// Show RUN (an id or a unique prefix) and the runs it delegated to, down the tree: each
    /// one's agent, status, and whether it was awaited or detached, reported its end to its
    /// parent or was abandoned (embedded store; the delegates' runs in the same database).
    #[arg(long, value_name = "RUN", conflicts_with_all = ["status", "after", "offset", "thread", "since", "until"])]
    pub(super) tree: Option<String>,
}

pub(super) fn started_of(s: &crate::backend::RunSummary) -> Option<String> {
    let secs = s.started_ns.map(|ns| ns.div_euclid(1_000_000_000))?;
    u32::try_from(secs).ok().map(utc_time)
}

pub(super) async fn runs_cmd(workflow: &Workflow, a: RunsArgs) -> Result<u8, Fail> {
    if let Some(run) = &a.tree {
        return tree_cmd(workflow, &a, run).await;
    }
    let offset = usize::try_from(a.offset).unwrap_or(usize::MAX);
    let query = crate::backend::RunQuery {
        status: a.status.map(StatusArg::filter),
        id_prefix: None,
        after: a.after.clone(),
        thread: a.thread.clone(),
        started_from_ns: a.since,
        started_before_ns: a.until,
        offset,
        limit: a.limit as usize,
    };
    let waiting = a.status == Some(StatusArg::Waiting);
    if waiting && a.offset > 0 {
        return Err(invalid(
            "--offset does not page `--status waiting` (each live run is read to tell whether it waits); page with --after RUN, the last run listed",
        ));
    }
    // The progress of each listed run that waits (`--status waiting`).
    let mut progress: HashMap<String, &'static str> = HashMap::new();
    let mut resume_after: Option<String> = None;
    let (page, place) = match open_reader(workflow, &a.from).await? {
        None => (
            crate::backend::RunPage::default(),
            where_runs(&a.from, workflow),
        ),
        Some(r) => {
            let page = if waiting {
                waiting_page(
                    workflow,
                    &r.backend,
                    &query,
                    &mut progress,
                    &mut resume_after,
                )
                .await
            } else {
                r.backend
                    .list_runs(workflow.name(), &query)
                    .wait()
                    .await
                    .map_err(|e| internal(e.to_string()))
            };
            r.backend.halt();
            (page?, r.place)
        }
    };
    let status = |r: &crate::backend::RunSummary| -> &'static str {
        progress
            .get(&r.run_id)
            .copied()
            .unwrap_or_else(|| r.status())
    };
    let next = offset.saturating_add(page.runs.len());
    // Where the next page starts: after the last run listed, or (waiting runs) read.
    let next_after = page
        .more
        .then(|| resume_after.or_else(|| page.runs.last().map(|r| r.run_id.clone())))
        .flatten();
    let mut out = std::io::stdout().lock();
    if a.json {
        let runs: Vec<Value> = page
            .runs
            .iter()
            .map(|r| {
                json!({
                    "run_id": r.run_id,
                    "thread_id": r.thread_id,
                    "status": status(r),
                    "started": started_of(r),
                    "events": r.events,
                    "journal_entries": r.journal_entries,
                })
            })
            .collect();
        let doc = json!({
            "runs": runs,
            "offset": offset,
            "more": page.more,
            "next_offset": page.more.then_some(next),
            "next_after": next_after,
        });
        serde_json::to_writer_pretty(&mut out, &doc)
            .map_err(|e| internal(format!("cannot write JSON: {e}")))?;
        writeln!(out).map_err(io)?;
        return Ok(0);
    }
    if page.runs.is_empty() {
        if offset > 0
            || a.status.is_some()
            || a.thread.is_some()
            || a.since.is_some()
            || a.until.is_some()
        {
            eprintln!(
                "no stored runs of `{}` in {place} match (offset {offset}{}); `runs` lists the newest",
                workflow.name(),
                a.status
                    .map(|s| format!(", status {}", status_of_arg(s)))
                    .unwrap_or_default()
            );
        } else {
            eprintln!(
                "no stored runs of `{}` in {place}; start one with `run --message TEXT`",
                workflow.name()
            );
        }
        return Ok(0);
    }
    let width = page
        .runs
        .iter()
        .map(|r| status(r).len())
        .max()
        .unwrap_or(0)
        .max(8);
    writeln!(
        out,
        "{:<24}  {:<width$}  {:<19}  {:>6}",
        "run", "status", "started (UTC)", "events"
    )
    .map_err(io)?;
    for r in &page.runs {
        writeln!(
            out,
            "{:<24}  {:<width$}  {:<19}  {:>6}",
            r.run_id,
            status(r),
            started_of(r).unwrap_or_default(),
            r.events
        )
        .map_err(io)?;
    }
    if let Some(after) = &next_after {
        let mut hint = format!("runs --after {after}");
        if let Some(s) = a.status {
            hint.push_str(&format!(" --status {}", status_of_arg(s)));
        }
        if a.limit != 20 {
            hint.push_str(&format!(" --limit {}", a.limit));
        }
        if let Some(t) = &a.thread {
            hint.push_str(&format!(" --thread {t}"));
        }
        // A time ago is given again as the time it meant, so the next page is of the same
        // window.
        for (flag, ns) in [("--since", a.since), ("--until", a.until)] {
            if let Some(ns) = ns {
                hint.push_str(&format!(" {flag} {}", super::args::when_text(ns)));
            }
        }
        if waiting {
            eprintln!("more runs: `{hint}`");
        } else {
            eprintln!("more runs: `{hint}` (or --offset {next})");
        }
    }
    Ok(0)
}

/// The most live runs `--status waiting` reads for one page.
const MAX_WAITING_SCAN: usize = 10_000;

/// A page of the live runs that wait, newest first: live runs are listed and each rebuilt from
/// its journal through the dispatch core (no step runs) until `query.limit` wait or
/// [`MAX_WAITING_SCAN`] were read; `progress` gets each one's (`waiting_event`,
/// `waiting_timer`, `waiting_children`, `waiting_unmet`), `resume_after` the run the next
/// page reads on from.
pub(super) async fn waiting_page(
    workflow: &Workflow,
    backend: &std::sync::Arc<dyn crate::backend::Backend>,
    query: &crate::backend::RunQuery,
    progress: &mut HashMap<String, &'static str>,
    resume_after: &mut Option<String>,
) -> Result<crate::backend::RunPage, Fail> {
    let limit = query.page_size();
    let mut found = Vec::new();
    let mut cursor = query.after.clone();
    let mut scanned = 0usize;
    loop {
        let batch = crate::backend::RunQuery {
            status: Some(crate::backend::StatusFilter::Live),
            after: cursor.clone(),
            offset: 0,
            limit: 256,
            ..query.clone()
        };
        let page = backend
            .list_runs(workflow.name(), &batch)
            .wait()
            .await
            .map_err(|e| internal(e.to_string()))?;
        let listed = page.runs.len();
        for (i, r) in page.runs.into_iter().enumerate() {
            scanned += 1;
            cursor = Some(r.run_id.clone());
            let stored = backend
                .read_run(workflow.name(), &r.run_id)
                .wait()
                .await
                .map_err(|e| internal(e.to_string()))?;
            let Some(stored) = stored else { continue };
            match StoredRunView::rebuild(workflow, &stored) {
                Ok(view) => {
                    let p = view.run.progress();
                    if matches!(p, saap_dispatch::run::progress::Progress::Waiting { .. }) {
                        progress.insert(r.run_id.clone(), p.as_str());
                        found.push(r);
                    }
                }
                Err(e) => eprintln!("warning: run {} cannot be read: {e}", r.run_id),
            }
            let left = i + 1 < listed || page.more;
            if found.len() == limit || (scanned >= MAX_WAITING_SCAN && left) {
                // The next page reads on from the last run read, listed or not.
                *resume_after = cursor;
                return Ok(crate::backend::RunPage {
                    runs: found,
                    more: left,
                });
            }
        }
        if !page.more {
            return Ok(crate::backend::RunPage {
                runs: found,
                more: false,
            });
        }
    }
}

/// `runs --tree RUN`.
async fn tree_cmd(workflow: &Workflow, a: &RunsArgs, given: &str) -> Result<u8, Fail> {
    let Some(reader) = open_reader(workflow, &a.from).await? else {
        return Err(invalid(format!(
            "no stored run `{}` of `{}`: there is no database {}; start a run with `run`, or pass --db PATH",
            given.chars().take(64).collect::<String>(),
            workflow.name(),
            where_runs(&a.from, workflow)
        )));
    };
    let run_id = resolve_run(workflow, &reader.backend, &reader.place, given).await?;
    let tree = read_tree(&reader.backend, workflow.name(), &run_id).await;
    reader.backend.halt();
    let tree = tree?;
    let mut out = std::io::stdout().lock();
    if a.json {
        serde_json::to_writer_pretty(&mut out, &tree)
            .map_err(|e| internal(format!("cannot write JSON: {e}")))?;
        writeln!(out).map_err(io)?;
    } else {
        out.write_all(render(&tree).as_bytes()).map_err(io)?;
    }
    Ok(0)
}

pub(super) fn status_of_arg(s: StatusArg) -> &'static str {
    match s {
        StatusArg::Live => "live",
        StatusArg::Ended => "ended",
        StatusArg::Stopped => "stopped",
        StatusArg::Failed => "failed",
        StatusArg::Cancelled => "cancelled",
        StatusArg::Waiting => "waiting",
    }
}
