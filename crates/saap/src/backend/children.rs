//! The child runs a stored run delegated to, read from its journal and records alone (no
//! replay, no spec of the children's agents): a child's run id is its request's event id,
//! its agent the request's `agent_class`, its end the parent's `child_ended` input, and a
//! `child_abandoned` (or `child_timed_out`) record says the parent gave it up. What `runs --tree` draws and what
//! opening a store reconciles (a child whose parent ended while its process was down).

use super::{StoredInput, StoredRun};

/// A child as its parent's journal names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelegatedRun {
    /// Its number among the parent's children (the core's).
    pub child: u32,
    pub run_id: String,
    /// `?` when the request's payload does not say.
    pub agent_class: String,
    pub detached: bool,
    /// Its end reached the parent.
    pub reported: bool,
    /// The parent ended first and gave it up (a run's end abandons its awaited children,
    /// and a cancelled run's detached ones too).
    pub abandoned: bool,
    /// Its deadline came first: the parent, live or not, gave it up.
    pub timed_out: bool,
}

/// The children run `run` requested, in the core's order (the order of the requests in its
/// journal).
pub fn delegated_runs(run: &StoredRun) -> Vec<DelegatedRun> {
    let mut out: Vec<DelegatedRun> = Vec::new();
    for entry in &run.journal {
        match &entry.input {
            StoredInput::Complete {
                outputs, children, ..
            } => {
                for c in children {
                    let agent_class = outputs
                        .iter()
                        .flatten()
                        .find(|o| o.id == c.request)
                        .and_then(|o| {
                            o.payload
                                .json()
                                .get("agent_class")?
                                .as_str()
                                .map(String::from)
                        })
                        .unwrap_or_else(|| "?".to_string());
                    out.push(DelegatedRun {
                        child: out.len() as u32,
                        run_id: c.request.to_string(),
                        agent_class,
                        detached: c.detached,
                        reported: false,
                        abandoned: false,
                        timed_out: false,
                    });
                }
            }
            StoredInput::ChildEnded { child, .. } => {
                if let Some(c) = out.get_mut(*child as usize) {
                    c.reported = true;
                }
            }
            _ => {}
        }
    }
    for r in &run.records {
        let record = r.get("record").and_then(|v| v.as_str());
        if !matches!(record, Some("child_abandoned" | "child_timed_out")) {
            continue;
        }
        if let Some(c) = r
            .get("child")
            .and_then(|v| v.as_u64())
            .and_then(|i| out.get_mut(i as usize))
        {
            if record == Some("child_abandoned") {
                c.abandoned = true;
            } else {
                c.timed_out = true;
            }
        }
    }
    out
}
