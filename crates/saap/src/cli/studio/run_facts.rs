//! What a run's page shows besides the core's own tables, computed once per page from the
//! stored run: when each event was logged, when each execution attempt started and ended
//! (from the times the journal entries were applied), which execution showed or returned
//! each event, and the model tokens and cost each execution recorded. Must not render HTML.

use crate::backend::StoredRun;
use crate::history::StoredRunView;
use saap_dispatch::record::Record;
use saap_dispatch::{ExecutionId, Origin};
use std::collections::HashMap;

/// One attempt of an execution, with its times (ns since the epoch).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Attempt {
    pub(super) attempt: u32,
    pub(super) start_ns: u64,
    /// `None` while it runs (or when a crash cut it off and no retry came yet).
    pub(super) end_ns: Option<u64>,
}

/// The model calls an execution recorded: tokens from its `LLMEvent`s, cost from its
/// `LLMCostEvent`s.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Usage {
    pub(super) calls: u32,
    pub(super) prompt_tokens: i64,
    pub(super) completion_tokens: i64,
    pub(super) cost: f64,
}

impl Usage {
    pub(super) fn add(&mut self, other: &Usage) {
        self.calls += other.calls;
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cost += other.cost;
    }
}

pub(super) struct RunFacts {
    /// When the run began (its first entry), for offsets.
    pub(super) start_ns: u64,
    /// When the last entry was applied.
    pub(super) last_ns: u64,
    /// When each logged event was appended, by sequence number.
    pub(super) event_ns: Vec<u64>,
    /// The execution that returned or showed each event; `None`: from outside.
    pub(super) event_by: Vec<Option<ExecutionId>>,
    /// Each execution's attempts, by execution id.
    pub(super) attempts: Vec<Vec<Attempt>>,
    /// Model calls, by execution id (only those that recorded one).
    pub(super) usage: HashMap<ExecutionId, Usage>,
}

impl RunFacts {
    pub(super) fn of(view: &StoredRunView, stored: &StoredRun) -> RunFacts {
        let run = &view.run;
        let times = stored.entry_times();
        let mut record_ns: Vec<u64> = Vec::with_capacity(run.records().len());
        for (entry, &n) in stored.entry_records.iter().enumerate() {
            let t = times.get(entry).copied().unwrap_or(0);
            record_ns.extend(std::iter::repeat_n(t, n as usize));
        }
        let last_ns = times.last().copied().unwrap_or(0);
        let at = |r: usize| record_ns.get(r).copied().unwrap_or(last_ns);
        let mut event_ns = vec![last_ns; run.log().len()];
        let mut attempts: Vec<Vec<Attempt>> = vec![Vec::new(); run.executions().len()];
        for (r, record) in run.records().iter().enumerate() {
            match record {
                Record::RunStarted { seq }
                | Record::EventAppended { seq, .. }
                | Record::EventAfterStop { seq, .. }
                | Record::OrphanEvent { seq } => {
                    if let Some(slot) = event_ns.get_mut(seq as usize) {
                        *slot = at(r);
                    }
                }
                Record::ExecutionStarted { execution, .. } => {
                    if let Some(list) = attempts.get_mut(execution.0 as usize) {
                        list.push(Attempt {
                            attempt: 1,
                            start_ns: at(r),
                            end_ns: None,
                        });
                    }
                }
                Record::ExecutionRetried { execution, attempt } => {
                    if let Some(list) = attempts.get_mut(execution.0 as usize) {
                        // The attempt a crash cut off ends where its retry begins.
                        if let Some(last) = list.last_mut().filter(|a| a.end_ns.is_none()) {
                            last.end_ns = Some(at(r));
                        }
                        list.push(Attempt {
                            attempt,
                            start_ns: at(r),
                            end_ns: None,
                        });
                    }
                }
                Record::ExecutionCompleted { execution, .. }
                | Record::ExecutionFailed { execution, .. } => {
                    if let Some(last) = attempts
                        .get_mut(execution.0 as usize)
                        .and_then(|l| l.last_mut())
                    {
                        last.end_ns = Some(at(r));
                    }
                }
                _ => {}
            }
        }
        let mut event_by: Vec<Option<ExecutionId>> = run
            .log()
            .iter()
            .map(|e| match e.origin {
                Origin::Execution(x) => Some(x),
                Origin::Outside => None,
            })
            .collect();
        for &(seq, x) in &view.display_by {
            if let Some(slot) = event_by.get_mut(seq as usize) {
                *slot = Some(x);
            }
        }
        let mut usage: HashMap<ExecutionId, Usage> = HashMap::new();
        for (seq, e) in run.log().iter().enumerate() {
            let Some(x) = event_by[seq] else { continue };
            let name = run.type_name(e.ty);
            let fields = || view.fields(seq as u32);
            let n = |v: &serde_json::Value, k: &str| v.get(k).and_then(|t| t.as_i64()).unwrap_or(0);
            let f =
                |v: &serde_json::Value, k: &str| v.get(k).and_then(|t| t.as_f64()).unwrap_or(0.0);
            match name {
                "LLMEvent" | "LLMStopEvent" => {
                    let v = fields();
                    let u = usage.entry(x).or_default();
                    u.calls += 1;
                    u.prompt_tokens += n(&v, "token_count_prompt");
                    u.completion_tokens += n(&v, "token_count_completion");
                }
                "LLMCostEvent" => {
                    let v = fields();
                    usage.entry(x).or_default().cost += f(&v, "prompt_tokens_costs")
                        + f(&v, "completion_tokens_costs")
                        + f(&v, "embedding_tokens_costs");
                }
                _ => {}
            }
        }
        RunFacts {
            start_ns: times.first().copied().unwrap_or(0),
            last_ns,
            event_ns,
            event_by,
            attempts,
            usage,
        }
    }

    /// The run's length so far: from its first entry to its last.
    pub(super) fn span_ns(&self) -> u64 {
        self.last_ns.saturating_sub(self.start_ns)
    }
}
