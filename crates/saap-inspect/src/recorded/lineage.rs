//! Where a forked run came from ([`lineage`]), read from stored journal rows: the origin its
//! first entry records (`"fork": {"r", "at", "n"}`) and its completions, made into the
//! core's [`Lineage`] (which `<agent> show` makes from the same journal). `explain --run`
//! says it. Must not read anything (the rows are given).

use super::JournalRun;
pub use saap_dispatch::lineage::Lineage;

/// The run's lineage, or `None` for a run that is not a fork.
pub fn lineage(j: &JournalRun) -> Option<Lineage> {
    let fork = j.entries.first()?.entry.get("fork")?;
    let run_id = fork.get("r")?.as_str()?.to_string();
    let at = fork.get("at")?.as_u64()?;
    let entries = fork.get("n")?.as_u64()?;
    let completions = j.entries.iter().filter_map(|row| {
        let input = &row.entry["i"];
        (input["in"] == "complete")
            .then(|| input["execution"].as_u64())
            .flatten()
            .and_then(|x| u32::try_from(x).ok())
            .map(|x| {
                let from = input["reused"].as_u64().and_then(|o| u32::try_from(o).ok());
                (row.index, x, from)
            })
    });
    Some(Lineage::new(run_id, at, entries, completions))
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
            json!({"i": {"in": "complete", "execution": 2, "attempt": 1, "reused": 3}}),
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
    fn a_fork_names_its_origin_and_which_executions_it_reused_before_or_after_its_fork_point_or_ran_live()
     {
        let start = json!({"i": {"in": "append", "event": {"id": "6b12d41e2f4fba8f4beea301", "n": "Go"}},
                           "fork": {"r": "6b12d41e2f4fba8f4beea300", "at": 2, "n": 2}});
        let l = lineage(&run(start)).unwrap();
        assert_eq!(l.reused, ["x0", "x2"]);
        assert_eq!(l.live, ["x1"]);
        assert_eq!(
            l.text(),
            "forked from run 6b12d41e2f4fba8f4beea300 at event [2]: executions reused from it (not run again): x0, x2 (its x3); run live: x1"
        );
        let plain =
            json!({"i": {"in": "append", "event": {"id": "6b12d41e2f4fba8f4beea301", "n": "Go"}}});
        assert_eq!(lineage(&run(plain)), None);
    }
}
