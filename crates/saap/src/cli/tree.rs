//! `<agent> runs --tree RUN`: a run and the runs it delegated to, down the tree, each with its
//! agent, status and what became of it — read from the store's journals alone (no step runs,
//! no spec is needed for another agent's runs: a child's run id is its request's event id,
//! its agent the request's `agent_class`, its fate in the parent's journal and records).
//!
//! The children come from `backend::children`. Bounded: at most [`MAX_TREE_RUNS`] runs read, [`MAX_TREE_DEPTH`] levels; what lies beyond
//! is counted, not read.

use super::fail::{Fail, internal};
use crate::backend::children::delegated_runs;
use crate::backend::{Backend, summarize};
use serde::Serialize;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// The most runs one tree reads.
pub(super) const MAX_TREE_RUNS: usize = 10_000;
/// The deepest level read (the engine's default delegation depth is 8).
pub(super) const MAX_TREE_DEPTH: u32 = 16;

/// One run of the tree.
#[derive(Debug, Serialize)]
pub(super) struct TreeRun {
    pub run_id: String,
    pub agent_class: String,
    /// live, stopped, failed, cancelled, ended; `not stored` when the store has no such run (a child
    /// whose start did not commit, or one kept in another store).
    pub status: &'static str,
    /// How its parent asked for it: `root`, `awaited` or `detached`.
    pub relation: &'static str,
    /// Its end reached the parent (`AgentInTheLoopResponseEvent`/`…ExceptionEvent`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reported: bool,
    /// The parent ended first and gave it up (it was cancelled).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub abandoned: bool,
    /// Its deadline (`timeout_seconds`) came before its end: the parent stopped waiting
    /// and cancelled it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    pub children: Vec<TreeRun>,
    /// Children not read (past the bounds).
    #[serde(skip_serializing_if = "is_zero")]
    pub unread: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The tree under run `run_id` of agent `agent_class` in `backend`.
pub(super) async fn read_tree(
    backend: &Arc<dyn Backend>,
    agent_class: &str,
    run_id: &str,
) -> Result<TreeRun, Fail> {
    let mut budget = MAX_TREE_RUNS;
    subtree(backend, agent_class, run_id, "root", 0, &mut budget).await
}

/// One run and, depth first, the runs under it while the bounds allow.
fn subtree<'a>(
    backend: &'a Arc<dyn Backend>,
    agent_class: &'a str,
    run_id: &'a str,
    relation: &'static str,
    depth: u32,
    budget: &'a mut usize,
) -> Pin<Box<dyn Future<Output = Result<TreeRun, Fail>> + Send + 'a>> {
    Box::pin(async move {
        *budget = budget.saturating_sub(1);
        let stored = backend
            .read_run(agent_class, run_id)
            .wait()
            .await
            .map_err(|e| internal(e.to_string()))?;
        let mut node = TreeRun {
            run_id: run_id.to_string(),
            agent_class: agent_class.to_string(),
            status: match &stored {
                None => "not stored",
                Some(run) => summarize(run, None).status(),
            },
            relation,
            reported: false,
            abandoned: false,
            timed_out: false,
            children: Vec::new(),
            unread: 0,
        };
        let Some(run) = stored else {
            return Ok(node);
        };
        for c in delegated_runs(&run) {
            if *budget == 0 || depth >= MAX_TREE_DEPTH {
                node.unread += 1;
                continue;
            }
            let relation = if c.detached { "detached" } else { "awaited" };
            let mut child = subtree(
                backend,
                &c.agent_class,
                &c.run_id,
                relation,
                depth + 1,
                budget,
            )
            .await?;
            child.reported = c.reported;
            child.abandoned = c.abandoned;
            child.timed_out = c.timed_out;
            node.children.push(child);
        }
        Ok(node)
    })
}

/// The tree as lines: the root, then each child under its parent with box-drawing branches.
pub(super) fn render(root: &TreeRun) -> String {
    let mut out = String::new();
    line(&mut out, root, "", "");
    walk(&mut out, root, "");
    out
}

fn line(out: &mut String, r: &TreeRun, lead: &str, branch: &str) {
    let mut notes = Vec::new();
    if r.relation != "root" {
        notes.push(r.relation);
    }
    // An abandoned child's end may still reach its ended parent (as evidence): said once.
    if r.reported && !r.abandoned {
        notes.push("reported to the parent");
    }
    if r.abandoned {
        notes.push("abandoned by the parent");
    }
    if r.timed_out {
        notes.push("timed out: the parent stopped waiting");
    }
    let notes = if notes.is_empty() {
        String::new()
    } else {
        format!(" ({})", notes.join(", "))
    };
    out.push_str(&format!(
        "{lead}{branch}{} {} {}{notes}\n",
        r.agent_class, r.run_id, r.status
    ));
}

fn walk(out: &mut String, r: &TreeRun, lead: &str) {
    let n = r.children.len();
    for (i, c) in r.children.iter().enumerate() {
        let last = i + 1 == n && r.unread == 0;
        line(out, c, lead, if last { "└── " } else { "├── " });
        walk(
            out,
            c,
            &format!("{lead}{}", if last { "    " } else { "│   " }),
        );
    }
    if r.unread > 0 {
        out.push_str(&format!(
            "{lead}└── … {} more child run(s) not read (at most {MAX_TREE_RUNS} runs, {MAX_TREE_DEPTH} levels a tree)\n",
            r.unread
        ));
    }
}
