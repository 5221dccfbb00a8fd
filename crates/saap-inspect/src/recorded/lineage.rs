//! Where a forked run came from ([`lineage`]): the run it was forked from and the event it
//! departs at, as its first journal entry records them (`"fork": {"r", "at", "n"}`), and
//! which of its executions were reused from that run (completed within the `n` entries it
//! began with) and which ran live. `explain --run` says so; `<agent> show` reads the same.
//! Must not read anything (the rows are given).

use super::JournalRun;
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
    /// Executions completed within those entries: the original's outputs, not run again.
    pub reused: Vec<String>,
    /// Executions completed after them: run live in the fork.
    pub live: Vec<String>,
}

impl Lineage {
    /// One line, as `<agent> show` prints it.
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

/// The run's lineage, or `None` for a run that is not a fork.
pub fn lineage(j: &JournalRun) -> Option<Lineage> {
    let fork = j.entries.first()?.entry.get("fork")?;
    let run_id = fork.get("r")?.as_str()?.to_string();
    let at = fork.get("at")?.as_u64()?;
    let entries = fork.get("n")?.as_u64()?;
    let (mut reused, mut live) = (Vec::new(), Vec::new());
    for row in &j.entries {
        let input = &row.entry["i"];
        if input["in"] != "complete" {
            continue;
        }
        let Some(x) = input["execution"].as_u64() else {
            continue;
        };
        let list = if row.index < entries {
            &mut reused
        } else {
            &mut live
        };
        let name = format!("x{x}");
        if !list.contains(&name) {
            list.push(name);
        }
    }
    Some(Lineage {
        run_id,
        at,
        entries,
        reused,
        live,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::recorded::JournalRow;
    use serde_json::json;

    fn run(first: serde_json::Value) -> JournalRun {
        let rows = [
            first,
            json!({"i": {"in": "complete", "execution": 0, "attempt": 1}}),
            json!({"i": {"in": "append", "event": {"id": "6b12d41e2f4fba8f4beea300", "n": "Answer"}}}),
            json!({"i": {"in": "complete", "execution": 1, "attempt": 1}}),
            json!({"i": {"in": "complete", "execution": 1, "attempt": 2}}),
        ];
        JournalRun {
            workflow: "W".into(),
            thread_id: "t".into(),
            fingerprint: 1,
            entries: rows
                .into_iter()
                .enumerate()
                .map(|(i, entry)| JournalRow {
                    index: i as u64,
                    entry,
                    records: Vec::new(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_fork_names_its_origin_and_which_executions_it_reused_or_ran_live() {
        let start = json!({"i": {"in": "append", "event": {"id": "6b12d41e2f4fba8f4beea301", "n": "Go"}},
                           "fork": {"r": "6b12d41e2f4fba8f4beea300", "at": 2, "n": 2}});
        let l = lineage(&run(start)).unwrap();
        assert_eq!(l.reused, ["x0"]);
        assert_eq!(l.live, ["x1"]);
        assert_eq!(
            l.text(),
            "forked from run 6b12d41e2f4fba8f4beea300 at event [2]: executions reused from it (not run again): x0; run live: x1"
        );
        let plain =
            json!({"i": {"in": "append", "event": {"id": "6b12d41e2f4fba8f4beea301", "n": "Go"}}});
        assert_eq!(lineage(&run(plain)), None);
    }
}
