//! Where a forked run came from, and which of its executions were reused from that run
//! (completed within the journal entries the fork began with: the original's outputs, not
//! run again) and which ran live. The engine records the origin on the fork's first journal
//! entry; `show`, `explain --run` and the studio read it through [`Lineage::new`], so all
//! three say it the same way. Must not read a store.

use crate::ExecutionId;
use serde::Serialize;

/// A forked run's origin and its executions, reused or live.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Lineage {
    /// The run it was forked from.
    pub run_id: String,
    /// The event (its position in that run's log) the fork departs at.
    pub at: u64,
    /// The original's journal entries the fork began with.
    pub entries: u64,
    /// Executions completed within those entries, in order of completion.
    pub reused: Vec<String>,
    /// Executions completed after them.
    pub live: Vec<String>,
}

impl Lineage {
    /// The lineage of a fork of `run_id` at event `at` that began with `entries` of its
    /// journal entries, from the fork's completions: (journal entry index, execution).
    pub fn new(
        run_id: String,
        at: u64,
        entries: u64,
        completions: impl IntoIterator<Item = (u64, u32)>,
    ) -> Lineage {
        let (mut reused, mut live) = (Vec::new(), Vec::new());
        for (index, x) in completions {
            let list = if index < entries {
                &mut reused
            } else {
                &mut live
            };
            let name = ExecutionId(x).to_string();
            if !list.contains(&name) {
                list.push(name);
            }
        }
        Lineage {
            run_id,
            at,
            entries,
            reused,
            live,
        }
    }

    /// One line: `forked from run R at event [n]: executions reused from it (not run
    /// again): x0, x1; run live: x2`.
    pub fn text(&self) -> String {
        let list = |xs: &[String]| {
            if xs.is_empty() {
                "none".to_string()
            } else {
                xs.join(", ")
            }
        };
        format!(
            "forked from run {} at event [{}]: executions reused from it (not run again): {}; run live: {}",
            self.run_id,
            self.at,
            list(&self.reused),
            list(&self.live)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executions_completed_before_the_forks_entries_are_reused_the_rest_live() {
        // x1 completed twice (a retry) after the fork point: listed once.
        let l = Lineage::new("r".into(), 2, 2, [(1, 0), (3, 1), (4, 1)]);
        assert_eq!(l.reused, ["x0"]);
        assert_eq!(l.live, ["x1"]);
        assert_eq!(
            l.text(),
            "forked from run r at event [2]: executions reused from it (not run again): x0; run live: x1"
        );
        let fresh = Lineage::new("r".into(), 1, 1, []);
        assert!(
            fresh
                .text()
                .ends_with("(not run again): none; run live: none")
        );
    }
}
