//! The run list: one agent's stored runs, newest first, a page at a time (a cursor, as
//! `runs --after`), filtered by status (`waiting` reads each live run to tell), with each
//! live run's progress as the core derives it. Must not change a run.

use super::super::runs::StatusArg;
use super::html::{badge, esc, query_value};
use super::state::{Action, Studio, StudioError};
use crate::backend::{RunQuery, RunSummary};
use crate::history::{StoredRunView, utc_time};
use crate::workflow::Workflow;
use clap::ValueEnum as _;
use std::collections::HashMap;
use std::fmt::Write as _;

/// The list's query string.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct ListQuery {
    /// live, waiting, ended, stopped, failed, cancelled.
    #[serde(default)]
    pub(super) status: Option<String>,
    /// The last run of the previous page.
    #[serde(default)]
    pub(super) after: Option<String>,
    #[serde(default)]
    pub(super) limit: Option<usize>,
    /// Another agent of the set (one this one delegates to).
    #[serde(default)]
    pub(super) agent: Option<String>,
    /// Only the runs of this thread.
    #[serde(default)]
    pub(super) thread: Option<String>,
    /// Only runs started at or after, and before, these times (as `runs --since/--until`
    /// take them: a UTC time or a time ago).
    #[serde(default)]
    pub(super) since: Option<String>,
    #[serde(default)]
    pub(super) until: Option<String>,
}

impl ListQuery {
    fn given(v: &Option<String>) -> Option<&str> {
        v.as_deref().map(str::trim).filter(|s| !s.is_empty())
    }
}

/// Runs per page by default, and at most.
const PAGE: usize = 50;
const MAX_PAGE: usize = 500;

/// A page of runs: each with its status (a live run's progress when it was read).
pub(super) struct ListPage {
    pub(super) agent: Workflow,
    pub(super) runs: Vec<(RunSummary, String)>,
    pub(super) next_after: Option<String>,
}

pub(super) async fn read(studio: &Studio, q: &ListQuery) -> Result<ListPage, StudioError> {
    let agent = studio.agent(q.agent.as_deref())?;
    // The statuses `runs --status` takes, parsed as it parses them.
    let status_arg = q
        .status
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(|s| {
            StatusArg::from_str(s, false).map_err(|_| {
                StudioError::bad(format!(
                    "`{}` is not a status: use one of {}",
                    s.chars().take(32).collect::<String>(),
                    statuses().join(", ")
                ))
            })
        })
        .transpose()?;
    let status = status_arg.map(StatusArg::filter);
    let limit = q.limit.unwrap_or(PAGE).clamp(1, MAX_PAGE);
    let when = |v: &Option<String>| {
        ListQuery::given(v)
            .map(super::super::args::parse_when)
            .transpose()
            .map_err(StudioError::bad)
    };
    let query = RunQuery {
        status,
        id_prefix: None,
        after: q.after.clone().filter(|a| !a.is_empty()),
        thread: ListQuery::given(&q.thread).map(str::to_string),
        started_from_ns: when(&q.since)?,
        started_before_ns: when(&q.until)?,
        offset: 0,
        limit,
    };
    let backend = studio.backend();
    let mut progress: HashMap<String, &'static str> = HashMap::new();
    let mut resume_after = None;
    let page = if status_arg == Some(StatusArg::Waiting) {
        super::super::runs::waiting_page(&agent, backend, &query, &mut progress, &mut resume_after)
            .await
            .map_err(|f| StudioError::internal(f.message))?
    } else {
        backend
            .list_runs(agent.name(), &query)
            .wait()
            .await
            .map_err(|e| StudioError::internal(e.to_string()))?
    };
    let mut runs = Vec::with_capacity(page.runs.len());
    for r in page.runs {
        let status = match progress.get(&r.run_id) {
            Some(p) => p.to_string(),
            None if !r.ended => live_progress(studio, &agent, &r.run_id).await,
            None => r.status().to_string(),
        };
        runs.push((r, status));
    }
    let next_after = page
        .more
        .then(|| resume_after.or_else(|| runs.last().map(|(r, _)| r.run_id.clone())))
        .flatten();
    Ok(ListPage {
        agent,
        runs,
        next_after,
    })
}

/// The names of the statuses a list can be filtered by.
fn statuses() -> Vec<String> {
    StatusArg::value_variants()
        .iter()
        .filter_map(|v| v.to_possible_value())
        .map(|p| p.get_name().to_string())
        .collect()
}

/// A live run's progress (`running`, `waiting_event`, …), read from its journal; `live` when
/// it cannot be read.
async fn live_progress(studio: &Studio, agent: &Workflow, run_id: &str) -> String {
    let Ok(Some(stored)) = studio.backend().read_run(agent.name(), run_id).wait().await else {
        return "live".to_string();
    };
    match StoredRunView::rebuild(agent, &stored) {
        Ok(view) => view.run.progress().as_str().to_string(),
        Err(_) => "live".to_string(),
    }
}

/// The page's body.
pub(super) fn render(studio: &Studio, q: &ListQuery, page: &ListPage, signed_in: bool) -> String {
    let agent = page.agent.name();
    let mut out = String::new();
    let _ = write!(out, "<h1>Runs of <b>{}</b></h1>", esc(agent));
    let agents = studio.agent_names();
    if agents.len() > 1 {
        out.push_str("<p class=\"agents\">agents: ");
        for a in &agents {
            let _ = write!(
                out,
                "<a class=\"{}\" href=\"/?agent={}\">{}</a> ",
                if a == agent { "current" } else { "" },
                query_value(a),
                esc(a)
            );
        }
        out.push_str("</p>");
    }
    out.push_str(&start_form(agent, signed_in, studio.cannot(Action::Start)));
    let current = q.status.as_deref().unwrap_or("");
    let _ = write!(
        out,
        "<form class=\"filters\" method=\"get\" action=\"/\"><input type=\"hidden\" name=\"agent\" value=\"{}\">\
         <label>status <select name=\"status\"><option value=\"\">any</option>",
        esc(agent)
    );
    for s in statuses() {
        let _ = write!(
            out,
            "<option{}>{s}</option>",
            if s == current { " selected" } else { "" }
        );
    }
    let value = |v: &Option<String>| esc(ListQuery::given(v).unwrap_or(""));
    let _ = write!(
        out,
        "</select></label> <label>thread <input name=\"thread\" value=\"{}\" size=\"26\"></label> \
         <label>since <input name=\"since\" value=\"{}\" placeholder=\"2h or 2026-12-04 09:00\" size=\"18\"></label> \
         <label>until <input name=\"until\" value=\"{}\" placeholder=\"UTC, or a time ago\" size=\"18\"></label> \
         <button type=\"submit\">Filter</button></form>",
        value(&q.thread),
        value(&q.since),
        value(&q.until)
    );
    if page.runs.is_empty() {
        let _ = write!(
            out,
            "<p class=\"empty\">No runs{} yet. Start one with <code>{} run --message TEXT</code>.</p>",
            if current.is_empty() && q.thread.is_none() && q.since.is_none() && q.until.is_none() {
                String::new()
            } else {
                " match these filters".to_string()
            },
            esc(agent)
        );
        return out;
    }
    out.push_str(
        "<table class=\"runs\"><thead><tr><th>run</th><th>status</th><th>started (UTC)</th>\
         <th>thread</th><th>events</th></tr></thead><tbody>",
    );
    for (r, status) in &page.runs {
        let started = r
            .started_ns
            .and_then(|ns| u32::try_from(ns.div_euclid(1_000_000_000)).ok())
            .map(utc_time)
            .unwrap_or_default();
        let _ = write!(
            out,
            "<tr data-run=\"{id}\"><td><a href=\"/runs/{id}\"><code>{id}</code></a></td><td>{}</td>\
             <td>{}</td><td><code>{}</code></td><td class=\"num\">{}</td></tr>",
            badge(status),
            started,
            esc(&r.thread_id),
            r.events,
            id = esc(&r.run_id),
        );
    }
    out.push_str("</tbody></table>");
    if let Some(after) = &page.next_after {
        let mut link = format!(
            "/?agent={}&after={}",
            query_value(agent),
            query_value(after)
        );
        if !current.is_empty() {
            let _ = write!(link, "&status={}", query_value(current));
        }
        for (key, v) in [
            ("thread", &q.thread),
            ("since", &q.since),
            ("until", &q.until),
        ] {
            if let Some(v) = ListQuery::given(v) {
                let _ = write!(link, "&{key}={}", query_value(v));
            }
        }
        if let Some(l) = q.limit {
            let _ = write!(link, "&limit={l}");
        }
        let _ = write!(
            out,
            "<p class=\"pager\"><a rel=\"next\" href=\"{}\">older runs →</a></p>",
            esc(&link)
        );
    }
    out
}

/// The form that starts a run of `agent`: a message, or a start event as JSON; disabled
/// (with why) when this studio starts nothing.
fn start_form(agent: &str, signed_in: bool, cannot: Option<&str>) -> String {
    if let Some(why) = cannot {
        return format!(
            "<p class=\"hint cannot\" data-cannot=\"start\">{}</p>",
            esc(why)
        );
    }
    format!(
        "<details class=\"start\"><summary>Start a run</summary>\
         <form method=\"post\" action=\"/runs\"><input type=\"hidden\" name=\"agent\" value=\"{a}\">\
         <label>message <input name=\"message\" size=\"60\" placeholder=\"what the run is about (a UserMessageEvent)\"></label>\
         <label>or a start event <textarea name=\"event\" rows=\"2\" spellcheck=\"false\" \
         placeholder=\"{{&quot;_event_name&quot;: &quot;UserMessageEvent&quot;, &quot;message&quot;: &quot;…&quot;}}\"></textarea></label>\
         <label>thread <input name=\"thread\" size=\"26\" placeholder=\"a new one\"></label>\
         <button type=\"submit\"{d}>Start</button></form></details>",
        a = esc(agent),
        d = if signed_in { "" } else { " disabled" },
    )
}

/// The page as JSON (`/api/runs`): as `runs --json` prints it, with a cursor.
pub(super) fn json(page: &ListPage) -> serde_json::Value {
    let runs: Vec<serde_json::Value> = page
        .runs
        .iter()
        .map(|(r, status)| {
            serde_json::json!({
                "run_id": r.run_id,
                "thread_id": r.thread_id,
                "status": status,
                "started_ns": r.started_ns,
                "events": r.events,
                "journal_entries": r.journal_entries,
            })
        })
        .collect();
    serde_json::json!({
        "agent": page.agent.name(),
        "runs": runs,
        "next_after": page.next_after,
    })
}
