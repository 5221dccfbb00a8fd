//! Simulation: drive a run from a spec's `simulation` section (outside arrivals and what
//! each execution does) under a deterministic completion policy. Used by `saap simulate`,
//! by the explorer (which branches where the simulator picks) and by tests.
//!
//! Pure: ids come from counters and [`EventId::derived`]; nothing here reads a clock.

use crate::compiled::{CompiledSpec, TypeId};
use crate::ids::StepIdx;
use crate::ids::{EventId, ExecutionId, run_key};
use crate::ids::{counter_event_id, derived_event_id};
use crate::replay::RunInput;
use crate::run::timers::TimerRequest;
use crate::run::{
    CompleteError, DeclaredConditions, NewEvent, Outcome, PreconditionEvaluator, Run,
};
use crate::spec::{ExecutionBehaviour, ParamKind};
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
/// the step's declared results ([`declared_result`]).
///
/// Finds n by counting the step's earlier executions; a caller that drives many executions
/// counts them as they start and calls [`outcome_for_nth`] instead.
pub fn outcome_for(run: &Run, exec: ExecutionId) -> Outcome {
    let Some(x) = run.execution(exec) else {
        return Outcome::Failed(format!("no execution {exec}"));
    };
    let nth = run.executions()[..=exec.0 as usize]
        .iter()
        .filter(|e| e.step == x.step)
        .count() as u32;
    outcome_for_nth(run, exec, nth)
}

/// [`outcome_for`] for the `nth` execution (from 1) of its step. What it returns for later
/// delivery (its step's `delayed` outputs) is left out: [`timers_for_nth`] gives it.
pub fn outcome_for_nth(run: &Run, exec: ExecutionId, nth: u32) -> Outcome {
    match returned(run, exec, nth) {
        Err(m) => Outcome::Failed(m),
        Ok(all) => Outcome::Returned(
            all.into_iter()
                .filter(|(_, later)| !later)
                .map(|(e, _)| e)
                .collect(),
        ),
    }
}

/// The timers execution `exec` (the `nth` of its step) sets when it completes: the events of
/// its step's `delayed` outputs it returns, each due after every timer the run set before
/// (due times are their order: a clock reading of a timer's due time fires it and those
/// set before it, never one set after). Call it once the execution has completed.
pub fn timers_for_nth(run: &Run, exec: ExecutionId, nth: u32) -> Vec<TimerRequest> {
    let first = run.timers().len() as u64 + 1;
    match returned(run, exec, nth) {
        Err(_) => Vec::new(),
        Ok(all) => all
            .into_iter()
            .filter(|(_, later)| *later)
            .enumerate()
            .map(|(k, (event, _))| TimerRequest {
                event,
                due_ns: first + k as u64,
            })
            .collect(),
    }
}

/// [`timers_for_nth`], counting which execution of its step `exec` is.
pub fn timers_for(run: &Run, exec: ExecutionId) -> Vec<TimerRequest> {
    let Some(x) = run.execution(exec) else {
        return Vec::new();
    };
    let nth = run.executions()[..=exec.0 as usize]
        .iter()
        .filter(|e| e.step == x.step)
        .count() as u32;
    timers_for_nth(run, exec, nth)
}

/// Fires the run's earliest pending timer (and only it, see [`timers_for_nth`]) with a
/// clock reading of its due time; the input, or `None` when no timer is pending.
pub fn fire_next_timer(run: &mut Run, pre: &mut dyn PreconditionEvaluator) -> Option<RunInput> {
    let now_ns = run.next_timer_due()?;
    // A timer's event is appended like an output; a refusal cannot happen on a live run.
    let _ = run.fire_due(now_ns, pre);
    Some(RunInput::Clock { now_ns })
}

/// Everything execution `exec` returns, each with whether it is delivered later (a type
/// its step declares `delayed`), or the message it fails with.
fn returned(run: &Run, exec: ExecutionId, nth: u32) -> Result<Vec<(NewEvent, bool)>, String> {
    let spec = run.spec();
    let Some(x) = run.execution(exec) else {
        return Err(format!("no execution {exec}"));
    };
    let step = &spec.steps[x.step as usize];
    let behaviour = spec
        .source
        .simulation
        .as_ref()
        .and_then(|s| s.behaviour.get(&step.name));
    let types: Vec<TypeId> = match behaviour {
        Some(b) => match b.executions.get(&nth) {
            Some(ExecutionBehaviour::Fail(m)) => return Err(m.clone()),
            Some(ExecutionBehaviour::Emit(list)) => names_to_types(spec, list),
            None => match (&b.fail, &b.emit) {
                (Some(m), _) => return Err(m.clone()),
                (None, Some(list)) => names_to_types(spec, list),
                (None, None) => declared_result(spec, x.step),
            },
        },
        None => declared_result(spec, x.step),
    };
    let delayed = &step.delayed;
    Ok(types
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let e = NewEvent::known(derived_event_id(run.run_key(), exec, i as u32), t);
            (e, delayed.contains(&t))
        })
        .collect())
}

/// What an execution of `step` returns in simulation when the spec says nothing else: what
/// the step declares, said once in `outputs` and `returns_together` — each type it returns
/// (in the order first declared) as many times as one execution may return it, the count
/// `saap check` uses: once for a plain output, k times when a `returns_together` group lists
/// it k times, N for `max: N`, and for `max: unbounded` as many as the largest fixed list
/// that takes it (at least once).
pub fn declared_result(spec: &CompiledSpec, step: StepIdx) -> Vec<TypeId> {
    let s = &spec.steps[step as usize];
    let mut types: Vec<TypeId> = Vec::new();
    for &t in s.outputs.iter().chain(s.returns_together.iter().flatten()) {
        if !types.contains(&t) {
            types.push(t);
        }
    }
    let mut out = Vec::new();
    for t in types {
        let n = match s.max_per_execution(t) {
            Some(n) => n.max(1),
            None => spec
                .consumers(t)
                .iter()
                .map(|&(c, p)| {
                    let param = &spec.steps[c as usize].params[p as usize];
                    if param.kind == ParamKind::FixedList {
                        u64::from(param.size)
                    } else {
                        1
                    }
                })
                .max()
                .unwrap_or(1),
        };
        out.extend(std::iter::repeat_n(t, n as usize));
    }
    out
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
    /// Completions made.
    pub completions: usize,
    /// The bound it was given (see [`Simulation::cut_off`]).
    pub max_completions: usize,
}

impl Simulation {
    /// True when the completion bound stopped the simulation with executions still running
    /// (the workflow may loop forever): what follows from them is not in the run.
    pub fn cut_off(&self) -> bool {
        !self.unfinished.is_empty()
    }
}

/// Which execution of its step each execution is, counted as executions start.
struct NthCounter {
    /// By execution id: its number among its step's executions (from 1).
    nth_of: Vec<u32>,
    /// By step: executions started so far.
    per_step: Vec<u32>,
}

impl NthCounter {
    /// Takes the executions `run` started, numbers them and queues them in `running`.
    fn started(&mut self, run: &mut Run, running: &mut VecDeque<ExecutionId>) {
        for x in run.take_started() {
            if let Some(e) = run.execution(x) {
                let n = &mut self.per_step[e.step as usize];
                *n += 1;
                let i = x.0 as usize;
                if self.nth_of.len() <= i {
                    self.nth_of.resize(i + 1, 0);
                }
                self.nth_of[i] = *n;
            }
            running.push_back(x);
        }
    }

    fn nth(&self, x: ExecutionId) -> u32 {
        match self.nth_of.get(x.0 as usize) {
            Some(&n) if n > 0 => n,
            _ => 1,
        }
    }
}

/// Sets the timers a completed execution returned (journaled), firing the earliest pending
/// ones first when the run already has as many as it may (it would have waited for them).
fn schedule(
    run: &mut Run,
    x: ExecutionId,
    timers: Vec<TimerRequest>,
    journal: &mut Vec<RunInput>,
    pre: &mut dyn PreconditionEvaluator,
) -> Result<(), CompleteError> {
    use crate::run::timers::{MAX_PENDING_TIMERS, TimerError};
    while run.pending_timer_count() + timers.len() > MAX_PENDING_TIMERS {
        match fire_next_timer(run, pre) {
            Some(clock) => journal.push(clock),
            None => break,
        }
    }
    journal.push(RunInput::Schedule {
        execution: x,
        timers: timers.clone(),
    });
    match run.schedule(x, timers) {
        Ok(_) => Ok(()),
        Err(TimerError::Complete(e)) => Err(e),
        // Not completed (it failed: it set nothing) or still too many (more than the limit
        // in one completion): the simulation goes on without them, as an engine would
        // fail that step.
        Err(TimerError::NotCompleted { .. } | TimerError::TooManyTimers) => {
            journal.pop();
            Ok(())
        }
    }
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
    let spec_steps = spec.steps.len();
    let mut run = Run::new(spec, run_key(SIM_RUN_ID));
    let mut pre = DeclaredConditions;
    let mut running: VecDeque<ExecutionId> = VecDeque::new();
    let mut journal = Vec::new();
    let mut completions = 0usize;
    // Which execution of its step each execution is (from 1), counted as they start, so
    // that a completion costs the same however long the run is.
    let mut counts = NthCounter {
        nth_of: Vec::new(),
        per_step: vec![0; spec_steps],
    };

    let mut drain = |run: &mut Run,
                     running: &mut VecDeque<ExecutionId>,
                     journal: &mut Vec<RunInput>,
                     pre: &mut dyn PreconditionEvaluator|
     -> Result<(), CompleteError> {
        counts.started(run, running);
        while completions < max_completions {
            let next = match policy {
                Policy::Lifo => running.pop_back(),
                Policy::Fifo | Policy::ArrivalsFirst => running.pop_front(),
            };
            let Some(x) = next else { break };
            let outcome = outcome_for_nth(run, x, counts.nth(x));
            journal.push(RunInput::Complete {
                execution: x,
                attempt: 1,
                outcome: outcome.clone(),
            });
            run.complete(x, 1, outcome, pre)?;
            let timers = timers_for_nth(run, x, counts.nth(x));
            if !timers.is_empty() {
                schedule(run, x, timers, journal, pre)?;
            }
            completions += 1;
            counts.started(run, running);
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
    // Time passes last: the timers still pending fire one at a time, in order, each when
    // the run has nothing else to do (the answers came in time; `explore` tries every order).
    // (Bounded: once the completions are spent, firing starts executions but sets no timer.)
    while let Some(clock) = fire_next_timer(&mut run, &mut pre) {
        journal.push(clock);
        drain(&mut run, &mut running, &mut journal, &mut pre)?;
    }
    let unfinished = run.running().collect();
    Ok(Simulation {
        run,
        arrivals,
        journal,
        unfinished,
        policy,
        completions,
        max_completions,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::{SpecSyntax, compile_spec_text};

    fn sim(yaml: &str) -> Simulation {
        let spec = Arc::new(compile_spec_text(yaml, SpecSyntax::Yaml).unwrap());
        simulate(spec, Policy::Fifo, DEFAULT_MAX_COMPLETIONS).unwrap()
    }

    fn emitted(s: &Simulation, ty: &str) -> usize {
        let t = s.run.spec().type_id(ty).unwrap();
        s.run
            .log()
            .iter()
            .filter(|e| e.ty == crate::run::EventTy::Known(t))
            .count()
    }

    /// What a step returns is said once: `returns_together` without a behaviour is what
    /// `simulate` returns, as `check` counts it.
    #[test]
    fn a_step_without_behaviour_returns_its_declared_results() {
        let s = sim("name: T
events: [{name: W}]
steps:
  - {name: a, params: [{name: q, kind: required, types: [StartEvent]}], returns_together: [[W, W, W]]}
  - {name: join, params: [{name: w, kind: fixed_list, size: 3, types: [W]}], outputs: [StopEvent]}
simulation: {arrivals: [StartEvent]}
");
        assert_eq!(emitted(&s, "W"), 3);
        assert!(s.run.is_terminated(), "join got its three");
        let spec = s.run.spec();
        let w = spec.type_id("W").unwrap();
        assert_eq!(declared_result(spec, 0), [w, w, w]);
    }

    #[test]
    fn an_unbounded_output_fills_the_largest_fixed_list_that_takes_it() {
        let s = sim("name: T
events: [{name: Ticket}, {name: Opinion}, {name: Done, kind: stop}]
steps:
  - name: intake
    params: [{name: q, kind: required, types: [StartEvent]}]
    outputs: [{event: Ticket, max: unbounded}, {event: Opinion, max: unbounded}]
  - {name: file, params: [{name: t, kind: required, types: [Ticket]}]}
  - {name: decide, params: [{name: o, kind: fixed_list, size: 3, types: [Opinion]}], outputs: [Done]}
simulation: {arrivals: [StartEvent]}
");
        assert_eq!((emitted(&s, "Ticket"), emitted(&s, "Opinion")), (1, 3));
        assert!(s.run.is_terminated());
        let spec = s.run.spec();
        assert_eq!(
            declared_result(spec, 0)
                .iter()
                .map(|t| spec.types[*t as usize].name.as_str())
                .collect::<Vec<_>>(),
            ["Ticket", "Opinion", "Opinion", "Opinion"]
        );
    }

    #[test]
    fn an_output_max_is_returned_that_many_times_and_a_behaviour_still_wins() {
        let yaml = "name: T
events: [{name: W}]
steps:
  - {name: a, params: [{name: q, kind: required, types: [StartEvent]}], outputs: [{event: W, max: 2}]}
simulation: {arrivals: [StartEvent]}
";
        assert_eq!(emitted(&sim(yaml), "W"), 2);
        let with_emit = format!("{yaml}  behaviour: {{a: {{emit: [W]}}}}\n").replace(
            "simulation: {arrivals: [StartEvent]}\n",
            "simulation:\n  arrivals: [StartEvent]\n",
        );
        assert_eq!(emitted(&sim(&with_emit), "W"), 1);
    }

    #[test]
    fn the_nth_execution_is_counted_as_executions_start() {
        // `executions: {3: ...}` picks the third execution of `again`; the simulator knows
        // which one it is without scanning the run's executions.
        let s = sim("name: T
events: [{name: Tick}]
steps:
  - {name: begin, params: [{name: q, kind: required, types: [StartEvent]}], outputs: [Tick]}
  - {name: again, params: [{name: t, kind: required, types: [Tick]}], outputs: [Tick]}
simulation:
  arrivals: [StartEvent]
  behaviour:
    again: {executions: {3: {fail: stop here}}}
");
        assert_eq!(s.run.execution_count(1), 3);
        assert!(s.run.is_terminated(), "the third failed with stop_on_error");
        for x in 0..s.run.executions().len() as u32 {
            let id = ExecutionId(x);
            let step = s.run.execution(id).unwrap().step;
            let nth = s.run.executions()[..=x as usize]
                .iter()
                .filter(|e| e.step == step)
                .count() as u32;
            assert_eq!(outcome_for(&s.run, id), outcome_for_nth(&s.run, id, nth));
        }
    }

    #[test]
    fn a_loop_is_cut_at_the_bound_and_says_so() {
        let spec = Arc::new(
            compile_spec_text(
                "name: T
events: [{name: Tick}]
steps:
  - {name: begin, params: [{name: q, kind: required, types: [StartEvent]}], outputs: [Tick]}
  - {name: again, params: [{name: t, kind: required, types: [Tick]}], outputs: [Tick]}
simulation: {arrivals: [StartEvent]}
",
                SpecSyntax::Yaml,
            )
            .unwrap(),
        );
        let s = simulate(spec, Policy::Fifo, 1000).unwrap();
        assert_eq!((s.completions, s.max_completions), (1000, 1000));
        assert!(s.cut_off());
        assert_eq!(s.unfinished.len(), 1);
    }
}
