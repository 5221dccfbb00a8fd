//! Simulation: drive a run from a spec's `simulation` section (outside arrivals and what
//! each execution does) under a deterministic completion policy. Used by `saap simulate`,
//! by the explorer (which branches where the simulator picks) and by tests.
//!
//! Pure: ids come from counters and [`EventId::derived`]; nothing here reads a clock.

use crate::compiled::{CompiledSpec, TypeId};
use crate::ids::{EventId, ExecutionId, run_key};
use crate::ids::{counter_event_id, derived_event_id};
use crate::replay::RunInput;
use crate::run::{
    CompleteError, DeclaredConditions, NewEvent, Outcome, PreconditionEvaluator, Run,
};
use crate::spec::ExecutionBehaviour;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// The run id used for simulated runs (it seeds derived output ids).
pub const SIM_RUN_ID: &str = "simulated-run";

/// One outside arrival, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    /// The label from the spec, or `Type#n` (n counts arrivals of that type from 1).
    pub label: String,
    /// Whether the spec gave the label.
    pub labelled: bool,
    pub event: NewEvent,
}

/// Resolves the spec's arrivals: a repeated label reuses the first arrival's id (a
/// re-delivery of the same event).
pub fn arrivals(spec: &CompiledSpec) -> Vec<Arrival> {
    let Some(sim) = &spec.source.simulation else {
        return Vec::new();
    };
    let mut by_label: BTreeMap<&str, EventId> = BTreeMap::new();
    let mut per_type: BTreeMap<&str, u32> = BTreeMap::new();
    let mut out = Vec::with_capacity(sim.arrivals.len());
    for (i, a) in sim.arrivals.iter().enumerate() {
        // The compiled spec has verified every arrival type.
        let Some(ty) = spec.type_id(&a.event) else {
            continue;
        };
        let n = per_type.entry(a.event.as_str()).or_insert(0);
        *n += 1;
        let (label, labelled) = match &a.label {
            Some(l) => (l.clone(), true),
            None => (format!("{}#{}", a.event, n), false),
        };
        let id = match &a.label {
            Some(l) => *by_label
                .entry(l.as_str())
                .or_insert_with(|| counter_event_id(i as u64 + 1)),
            None => counter_event_id(i as u64 + 1),
        };
        out.push(Arrival {
            label,
            labelled,
            event: NewEvent::known(id, ty),
        });
    }
    out
}

/// What execution `exec` of `run` does according to the spec's behaviour section: the
/// n-th execution of a step uses `executions[n]` if given, else `fail`, else `emit`, else
/// the step's declared outputs (each once).
pub fn outcome_for(run: &Run, exec: ExecutionId) -> Outcome {
    let spec = run.spec();
    let Some(x) = run.execution(exec) else {
        return Outcome::Failed(format!("no execution {exec}"));
    };
    let step = &spec.steps[x.step as usize];
    let nth = run.executions()[..=exec.0 as usize]
        .iter()
        .filter(|e| e.step == x.step)
        .count() as u32;
    let behaviour = spec
        .source
        .simulation
        .as_ref()
        .and_then(|s| s.behaviour.get(&step.name));
    let types: Vec<TypeId> = match behaviour {
        Some(b) => match b.executions.get(&nth) {
            Some(ExecutionBehaviour::Fail(m)) => return Outcome::Failed(m.clone()),
            Some(ExecutionBehaviour::Emit(list)) => names_to_types(spec, list),
            None => match (&b.fail, &b.emit) {
                (Some(m), _) => return Outcome::Failed(m.clone()),
                (None, Some(list)) => names_to_types(spec, list),
                (None, None) => step.outputs.clone(),
            },
        },
        None => step.outputs.clone(),
    };
    Outcome::Returned(
        types
            .into_iter()
            .enumerate()
            .map(|(i, t)| NewEvent::known(derived_event_id(run.run_key(), exec, i as u32), t))
            .collect(),
    )
}

fn names_to_types(spec: &CompiledSpec, names: &[String]) -> Vec<TypeId> {
    names.iter().filter_map(|n| spec.type_id(n)).collect()
}

/// The order in which the simulator completes running executions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// After each arrival, complete running executions oldest first until none runs.
    #[default]
    Fifo,
    /// After each arrival, complete the newest running execution first (depth first).
    Lifo,
    /// Deliver every arrival first, then complete oldest first.
    ArrivalsFirst,
}

impl Policy {
    pub fn parse(s: &str) -> Option<Policy> {
        match s {
            "fifo" => Some(Policy::Fifo),
            "lifo" => Some(Policy::Lifo),
            "arrivals-first" => Some(Policy::ArrivalsFirst),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Fifo => "fifo",
            Policy::Lifo => "lifo",
            Policy::ArrivalsFirst => "arrivals-first",
        }
    }
}

/// The result of a simulation.
#[derive(Debug, Clone)]
pub struct Simulation {
    pub run: Run,
    pub arrivals: Vec<Arrival>,
    /// The journal of inputs that drove the run (for replay and history files).
    pub journal: Vec<RunInput>,
    /// Executions still running at the end (the completion budget ran out).
    pub unfinished: Vec<ExecutionId>,
    pub policy: Policy,
}

/// Bounds a simulation: a workflow that loops forever is cut after this many completions.
pub const DEFAULT_MAX_COMPLETIONS: usize = 100_000;

/// Runs the simulation section of `spec` under `policy`.
pub fn simulate(
    spec: Arc<CompiledSpec>,
    policy: Policy,
    max_completions: usize,
) -> Result<Simulation, CompleteError> {
    let arrivals = arrivals(&spec);
    let mut run = Run::new(spec, run_key(SIM_RUN_ID));
    let mut pre = DeclaredConditions;
    let mut running: VecDeque<ExecutionId> = VecDeque::new();
    let mut journal = Vec::new();
    let mut completions = 0usize;

    let mut drain = |run: &mut Run,
                     running: &mut VecDeque<ExecutionId>,
                     journal: &mut Vec<RunInput>,
                     pre: &mut dyn PreconditionEvaluator|
     -> Result<(), CompleteError> {
        running.extend(run.take_started());
        while completions < max_completions {
            let next = match policy {
                Policy::Lifo => running.pop_back(),
                Policy::Fifo | Policy::ArrivalsFirst => running.pop_front(),
            };
            let Some(x) = next else { break };
            let outcome = outcome_for(run, x);
            journal.push(RunInput::Complete {
                execution: x,
                attempt: 1,
                outcome: outcome.clone(),
            });
            run.complete(x, 1, outcome, pre)?;
            completions += 1;
            running.extend(run.take_started());
        }
        Ok(())
    };

    for a in &arrivals {
        journal.push(RunInput::Append(a.event.clone()));
        // An arrival before the start is refused by the core, which records it as an
        // orphan: the timeline shows it, so the error itself is not kept.
        let _ = run.append(a.event.clone(), &mut pre);
        if policy != Policy::ArrivalsFirst {
            drain(&mut run, &mut running, &mut journal, &mut pre)?;
        }
    }
    drain(&mut run, &mut running, &mut journal, &mut pre)?;
    let unfinished = run.running().collect();
    Ok(Simulation {
        run,
        arrivals,
        journal,
        unfinished,
        policy,
    })
}
