//! What a caller asks for: which page of which messages ([`ViewQuery`]), which runs
//! ([`RunsQuery`]), with the bounds every answer respects.
//!
//! Must not talk to a server or a store; it only checks and normalises arguments, so that the
//! same checks hold for the CLI and the MCP tools.

use crate::error::{Result, clip, invalid};

/// The most messages one page holds.
pub const MAX_PAGE: usize = 10_000;
/// Messages per page when none is given.
pub const DEFAULT_PAGE: usize = 50;
/// The most runs one `runs` page lists.
pub const MAX_RUNS: usize = 10_000;
/// The most messages `runs` scans on a stream in one call.
pub const MAX_SCAN: u64 = 1_000_000;
/// Messages `runs` scans when no bound is given.
pub const DEFAULT_SCAN: u64 = 10_000;
/// The most subjects `stream NAME` counts.
pub const MAX_SUBJECTS: u64 = 1_000_000;
/// Subjects `stream NAME` counts when no bound is given.
pub const DEFAULT_SUBJECTS: u64 = 100_000;
/// The most keys `kv BUCKET` lists.
pub const MAX_KEYS: usize = 100_000;

/// Which messages of a stream, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ViewQuery {
    /// Start at this sequence (the first stored if `None`).
    pub from_seq: Option<u64>,
    /// The last `n` messages instead (unfiltered views only).
    pub last: Option<u64>,
    /// Messages per page (default [`DEFAULT_PAGE`], at most [`MAX_PAGE`]).
    pub limit: usize,
    /// Only this run.
    pub run: Option<String>,
    /// Only this thread.
    pub thread: Option<String>,
    /// Only events of this `_event_name`.
    pub event_name: Option<String>,
    /// Only `control_event` or `display_event` subjects.
    pub kind: Option<String>,
    /// Only messages stored (store: created) at or after this time, ns.
    pub since_ns: Option<i64>,
    /// Only messages stored (store: created) at or before this time, ns.
    pub until_ns: Option<i64>,
    /// A raw subject filter (NATS only), instead of the agent-subject filters.
    pub subject: Option<String>,
}

impl ViewQuery {
    /// The page size, checked.
    pub fn page_size(&self) -> Result<usize> {
        match self.limit {
            0 => Ok(DEFAULT_PAGE),
            n if n > MAX_PAGE => Err(invalid(format!(
                "a page holds at most {MAX_PAGE} messages (asked for {n}); page with --from instead"
            ))),
            n => Ok(n),
        }
    }

    /// True when any agent-subject filter is set.
    pub fn has_agent_filter(&self) -> bool {
        self.run.is_some()
            || self.thread.is_some()
            || self.event_name.is_some()
            || self.kind.is_some()
    }

    /// Checks the combination and each token.
    pub fn check(&self) -> Result<()> {
        self.page_size()?;
        for (what, v) in [
            ("--run", &self.run),
            ("--thread", &self.thread),
            ("--event", &self.event_name),
        ] {
            if let Some(v) = v {
                check_token(what, v)?;
            }
        }
        if let Some(k) = &self.kind
            && k != "control_event"
            && k != "display_event"
        {
            return Err(invalid(format!(
                "--kind `{}` is not a kind; use control or display",
                clip(k)
            )));
        }
        if self.subject.is_some() && self.has_agent_filter() {
            return Err(invalid(
                "--subject replaces --run/--thread/--event/--kind; give one or the other",
            ));
        }
        if self.last.is_some() && (self.from_seq.is_some() || self.since_ns.is_some()) {
            return Err(invalid(
                "--last reads the end of the stream; drop --from/--since or --last",
            ));
        }
        if let (Some(a), Some(b)) = (self.since_ns, self.until_ns)
            && a > b
        {
            return Err(invalid("--since is after --until; swap them"));
        }
        Ok(())
    }
}

/// A subject token given by a user: no dots, spaces or wildcards, at most 256 bytes.
pub fn check_token(what: &str, v: &str) -> Result<()> {
    if v.is_empty() || v.len() > 256 || v.contains(['.', '*', '>', ' ', '\t', '\r', '\n']) {
        return Err(invalid(format!(
            "{what} `{}` is not a subject token; ids and event names have no dots, spaces or wildcards",
            clip(v)
        )));
    }
    Ok(())
}

/// Which runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunsQuery {
    /// Runs per page (default 20, at most [`MAX_RUNS`]).
    pub limit: usize,
    /// NATS: scan this many messages back from `before` (default [`DEFAULT_SCAN`]).
    pub scan: u64,
    /// NATS: scan messages before this sequence (the end of the stream if `None`).
    pub before: Option<u64>,
    /// Store: runs older than this run (the cursor `next` of the previous page).
    pub after: Option<String>,
    /// Only runs with this status (`live`, `stopped`, `failed`).
    pub status: Option<String>,
}

impl RunsQuery {
    /// The page size, checked.
    pub fn page_size(&self) -> Result<usize> {
        match self.limit {
            0 => Ok(20),
            n if n > MAX_RUNS => Err(invalid(format!(
                "a page lists at most {MAX_RUNS} runs (asked for {n})"
            ))),
            n => Ok(n),
        }
    }

    /// The scan bound, checked.
    pub fn scan_size(&self) -> Result<u64> {
        match self.scan {
            0 => Ok(DEFAULT_SCAN),
            n if n > MAX_SCAN => Err(invalid(format!(
                "--scan is at most {MAX_SCAN} messages (asked for {n}); page back with --before"
            ))),
            n => Ok(n),
        }
    }

    /// The status filter, checked.
    pub fn status_filter(&self) -> Result<Option<crate::model::RunStatus>> {
        use crate::model::RunStatus;
        match self.status.as_deref() {
            None => Ok(None),
            Some("live") => Ok(Some(RunStatus::Live)),
            Some("stopped") => Ok(Some(RunStatus::Stopped)),
            Some("failed") => Ok(Some(RunStatus::Failed)),
            Some(s) => Err(invalid(format!(
                "--status `{}` is not a status; use live, stopped or failed",
                clip(s)
            ))),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn bad_combinations_and_tokens_are_refused_with_what_to_do() {
        let q = ViewQuery {
            run: Some("a.b".into()),
            ..Default::default()
        };
        assert!(
            q.check()
                .unwrap_err()
                .to_string()
                .contains("not a subject token")
        );
        let q = ViewQuery {
            limit: MAX_PAGE + 1,
            ..Default::default()
        };
        assert!(q.check().is_err());
        let q = ViewQuery {
            subject: Some("x.>".into()),
            run: Some("r".into()),
            ..Default::default()
        };
        assert!(q.check().is_err());
        assert!(ViewQuery::default().check().is_ok());
        assert_eq!(ViewQuery::default().page_size().unwrap(), DEFAULT_PAGE);
    }
}
