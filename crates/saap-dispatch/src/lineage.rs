//! Where a forked run came from, and which of its executions were reused from that run
//! (completed within the journal entries the fork began with, or after them with the inputs
//! of an execution of the original whose recorded outputs they took: not run again) and
//! which ran live. The engine records the origin on the fork's first journal entry and the
//! original's execution on a reused completion's; `show`, `explain --run` and the studio
//! read them through [`Lineage::new`], so all three say it the same way. Must not read a
//! store.

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
    /// Executions not run (completed within those entries, or matched after them), in
    /// order of completion.
    pub reused: Vec<String>,
    /// Of those, the ones after the fork's entries, each with the original's execution whose
    /// outputs it took.
    pub matched: Vec<Matched>,
    /// Executions that ran.
    pub live: Vec<String>,
}

/// An execution of a fork that took the recorded outputs of an execution of the original.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Matched {
    pub execution: String,
    pub original: String,
}

/// One completion in a fork's journal: its entry's index, its execution, and the
/// original's execution whose outputs it brings, if it was reused after the fork point.
pub type Completion = (u64, u32, Option<u32>);

impl Lineage {
    /// The lineage of a fork of `run_id` at event `at` that began with `entries` of its
    /// journal entries, from the fork's completions.
    pub fn new(
        run_id: String,
        at: u64,
        entries: u64,
        completions: impl IntoIterator<Item = Completion>,
    ) -> Lineage {
        let (mut reused, mut matched, mut live) = (Vec::new(), Vec::new(), Vec::new());
        for (index, x, from) in completions {
            let name = ExecutionId(x).to_string();
            if let Some(original) = from {
                matched.push(Matched {
                    execution: name.clone(),
                    original: ExecutionId(original).to_string(),
                });
            }
            let list = if index < entries || from.is_some() {
                &mut reused
            } else {
                &mut live
            };
            if !list.contains(&name) {
                list.push(name);
            }
        }
        Lineage {
            run_id,
            at,
            entries,
            reused,
            matched,
            live,
        }
    }

    /// One line: `forked from run R at event [n]: executions reused from it (not run
    /// again): x0, x1, x3 (its x4); run live: x2` (an execution matched under another id
    /// than the original's says which it took).
    pub fn text(&self) -> String {
        let list = |xs: &[String]| {
            if xs.is_empty() {
                "none".to_string()
            } else {
                xs.join(", ")
            }
        };
        let reused: Vec<String> = self
            .reused
            .iter()
            .map(|x| {
                match self
                    .matched
                    .iter()
                    .find(|m| m.execution == *x && m.original != *x)
                {
                    Some(m) => format!("{x} (its {})", m.original),
                    None => x.clone(),
                }
            })
            .collect();
        format!(
            "forked from run {} at event [{}]: executions reused from it (not run again): {}; run live: {}",
            self.run_id,
            self.at,
            list(&reused),
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
        let l = Lineage::new("r".into(), 2, 2, [(1, 0, None), (3, 1, None), (4, 1, None)]);
        assert_eq!(l.reused, ["x0"]);
        assert_eq!(l.live, ["x1"]);
        assert!(l.matched.is_empty());
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

    #[test]
    fn executions_after_the_forks_entries_that_took_recorded_outputs_are_reused_too() {
        let l = Lineage::new(
            "r".into(),
            2,
            2,
            [(1, 0, None), (3, 1, Some(1)), (4, 2, None), (5, 3, Some(4))],
        );
        assert_eq!(l.reused, ["x0", "x1", "x3"]);
        assert_eq!(l.live, ["x2"]);
        assert_eq!(
            l.matched,
            [
                Matched {
                    execution: "x1".into(),
                    original: "x1".into()
                },
                Matched {
                    execution: "x3".into(),
                    original: "x4".into()
                }
            ]
        );
        assert_eq!(
            l.text(),
            "forked from run r at event [2]: executions reused from it (not run again): x0, x1, x3 (its x4); run live: x2"
        );
    }
}
