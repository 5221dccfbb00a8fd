//! The search itself ([`explore`]): depth-first over the model's actions with the
//! reductions of the module docs, observing each state for findings. Must not decide
//! dispatch: the run does.

use super::findings::{
    AfterStop, BoundHit, BoundKind, ExceptionFinding, ExecRef, Exploration, ExploreError,
    ExploreOptions, MAX_REPORTED_STALLS, PROGRESS_EVERY, Progress, Stall, Stats, StepExecutions,
    TraceStep, Waiting,
};
use super::model::{Act, Model, Node, ROOT, State};
use super::naming::{Interner, KeyBuf, Naming, fingerprint};
use super::witness::{event_type, path_to};
use crate::compiled::CompiledSpec;
use crate::ids::{ExecutionId, FastMap, StepIdx};
use crate::record::{Origin, Record};
use crate::run::{ExecState, Outcome, RunStatus};
use crate::sim::{self};
use std::collections::HashSet;
use std::sync::Arc;

struct Frame {
    pub(super) node: u32,
    pub(super) state: State,
    pub(super) naming: Naming,
    pub(super) acts: Vec<Act>,
    pub(super) next: usize,
}

/// An exception's identity: (type, producing step, message, after stop).
type ExceptionKey = (String, Option<String>, Option<String>, bool);

/// Findings with their witness paths, before rendering.
#[derive(Default)]
struct Found {
    best: Vec<Option<usize>>,
    worst: Vec<Option<(usize, u32)>>,
    stall_keys: HashSet<(bool, Vec<Waiting>)>,
    stalls: Vec<(bool, Vec<Waiting>, u32)>,
    after_stop_keys: HashSet<(String, Option<String>)>,
    after_stop: Vec<(String, Option<String>, Vec<Act>)>,
    exception_keys: HashSet<ExceptionKey>,
    exceptions: Vec<(ExceptionKey, Vec<Act>)>,
}

/// Explores every interleaving of `spec`'s simulation section (see the module docs).
pub fn explore(
    spec: Arc<CompiledSpec>,
    options: &ExploreOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<Exploration, ExploreError> {
    let model = Model::new(spec);
    let opts = *options;
    let steps = model.spec.steps.len();
    let mut found = Found {
        best: vec![None; steps],
        worst: vec![None; steps],
        ..Found::default()
    };
    let mut stats = Stats::default();
    let mut bounds_hit = Vec::new();
    let mut names = Interner::default();
    // Keys are kept as 128-bit fingerprints (see `fingerprint`).
    let mut seen: FastMap<u128, u32> = FastMap::default();
    let mut keybuf = KeyBuf::default();
    let mut scratch = Vec::new();
    let mut nodes: Vec<Node> = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();

    let root = model.initial();
    // The root is node 0; its own action is never read (`path_to` stops there).
    nodes.push(Node {
        parent: ROOT,
        act: Act::Arrive(0),
        depth: 0,
    });
    let mut root_naming = Naming::default();
    if opts.dedup {
        model.extend_naming(&root.run, &mut root_naming, &mut names, &mut scratch);
        seen.insert(fingerprint(model.key(&root, &root_naming, &mut keybuf)), 0);
    }
    stats.states = 1;
    let (acts, reduced) = model.enabled(&root, &opts);
    stats.reduced += usize::from(reduced);
    if only_cancel(&acts) {
        on_final(&model, &root, 0, &mut found, &mut stats);
    }
    if !acts.is_empty() {
        stack.push(Frame {
            node: 0,
            state: root,
            naming: root_naming,
            acts,
            next: 0,
        });
    }
    let mut states_bound = false;
    let mut cycle = None;
    while let Some(frame) = stack.last_mut() {
        if frame.next == frame.acts.len() {
            stack.pop();
            continue;
        }
        let act = frame.acts[frame.next];
        frame.next += 1;
        let parent = frame.node;
        let mut child = frame.state.clone();
        model.apply(&mut child, act)?;
        stats.transitions += 1;
        let depth = nodes[parent as usize].depth + 1;
        if stats.transitions % PROGRESS_EVERY == 0 {
            progress(Progress {
                states: stats.states,
                transitions: stats.transitions,
                merged: stats.merged,
                final_states: stats.final_states,
                depth: depth as usize,
                max_states: opts.max_states,
                done: false,
            });
        }
        stats.longest_path = stats.longest_path.max(depth as usize);
        observe(
            &model,
            &frame.state,
            &child,
            act,
            parent,
            &nodes,
            &opts,
            &mut found,
        );
        let mut naming = Naming::default();
        if opts.dedup {
            naming.clone_from(&frame.naming);
            model.extend_naming(&child.run, &mut naming, &mut names, &mut scratch);
            let key = fingerprint(model.key(&child, &naming, &mut keybuf));
            if seen.contains_key(&key) {
                stats.merged += 1;
                continue;
            }
            if nodes.len() >= opts.max_states {
                states_bound = true;
                break;
            }
            seen.insert(key, nodes.len() as u32);
        } else if nodes.len() >= opts.max_states {
            states_bound = true;
            break;
        }
        let id = nodes.len() as u32;
        nodes.push(Node { parent, act, depth });
        stats.states += 1;
        let (acts, reduced) = model.enabled(&child, &opts);
        if only_cancel(&acts) {
            on_final(&model, &child, id, &mut found, &mut stats);
            if acts.is_empty() {
                continue;
            }
        }
        if depth as usize >= opts.max_depth {
            if stats.cut_at_depth == 0 {
                cycle = crate::explain::cycle_report(&child.run);
            }
            stats.cut_at_depth += 1;
            continue;
        }
        stats.reduced += usize::from(reduced);
        stack.push(Frame {
            node: id,
            state: child,
            naming,
            acts,
            next: 0,
        });
    }
    drop(stack);
    if states_bound {
        bounds_hit.push(BoundHit {
            bound: BoundKind::MaxStates,
            limit: opts.max_states,
            message: format!(
                "bound hit: results are partial — stopped after {} states (max_states); raise --max-states to explore further",
                opts.max_states
            ),
        });
    }
    if stats.cut_at_depth > 0 {
        let cause = match cycle.as_ref().map(|c| c.steps.as_slice()) {
            Some([one]) => format!("`{one}` keeps triggering itself"),
            Some(many @ [_, _, ..]) => format!(
                "steps {} keep triggering each other",
                many.iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => "a cycle without a bound".to_string(),
        };
        bounds_hit.push(BoundHit {
            bound: BoundKind::MaxDepth,
            limit: opts.max_depth,
            message: format!(
                "bound hit: results are partial — {} at depth {} {} not expanded (max_depth); {cause}, or raise --max-depth",
                if stats.cut_at_depth == 1 {
                    "1 state".to_string()
                } else {
                    format!("{} states", stats.cut_at_depth)
                },
                opts.max_depth,
                if stats.cut_at_depth == 1 { "was" } else { "were" }
            ),
        });
    }
    progress(Progress {
        states: stats.states,
        transitions: stats.transitions,
        merged: stats.merged,
        final_states: stats.final_states,
        depth: 0,
        max_states: opts.max_states,
        done: true,
    });

    let path = |id: u32| path_to(&nodes, id);
    let mut step_results = Vec::with_capacity(steps);
    for si in 0..steps {
        let worst_witness = match found.worst[si] {
            Some((_, id)) => model.trace(&path(id))?,
            None => Vec::new(),
        };
        let name = model.step_name(si as StepIdx).to_string();
        step_results.push(StepExecutions {
            reruns: reruns(&name, &worst_witness),
            step: name,
            best: found.best[si],
            worst: found.worst[si].map(|(n, _)| n),
            worst_witness,
        });
    }
    let mut stalls = Vec::new();
    for (never_started, waiting, id) in &found.stalls {
        stalls.push(Stall {
            never_started: *never_started,
            waiting: waiting.clone(),
            witness: model.trace(&path(*id))?,
        });
    }
    let mut after_stop = Vec::new();
    for (event, step, p) in &found.after_stop {
        after_stop.push(AfterStop {
            event: event.clone(),
            step: step.clone(),
            witness: model.trace(p)?,
        });
    }
    let mut exceptions = Vec::new();
    for ((event, step, message, after), p) in &found.exceptions {
        exceptions.push(ExceptionFinding {
            event: event.clone(),
            step: step.clone(),
            message: message.clone(),
            after_stop: *after,
            witness: model.trace(p)?,
        });
    }
    Ok(Exploration {
        workflow: model.spec.name.clone(),
        options: opts,
        bounds_hit,
        stats,
        steps: step_results,
        stalls,
        stalls_found: found.stall_keys.len(),
        after_stop,
        exceptions,
        cycle,
    })
}

/// Whether nothing but a cancellation can move a state (it is final: a stall when the run
/// is live; the cancellation is still explored).
fn only_cancel(acts: &[Act]) -> bool {
    acts.iter().all(|a| *a == Act::Cancel)
}

/// What changed between consecutive executions of `step` in a witness.
fn reruns(step: &str, witness: &[TraceStep]) -> Vec<String> {
    let runs: Vec<&ExecRef> = witness
        .iter()
        .flat_map(|t| &t.started)
        .filter(|e| e.step == step)
        .collect();
    runs.windows(2)
        .map(|w| {
            let changes: Vec<String> = w[0]
                .inputs
                .iter()
                .zip(&w[1].inputs)
                .filter(|(a, b)| a.1 != b.1)
                .map(|(a, b)| format!("`{}` {} → {}", a.0, a.1, b.1))
                .collect();
            let what = if changes.is_empty() {
                "the same events, bound differently".to_string()
            } else {
                changes.join(", ")
            };
            format!("{}#{}: {what}", w[1].step, w[1].execution)
        })
        .collect()
}

/// Records a final state.
fn on_final(model: &Model, st: &State, id: u32, found: &mut Found, stats: &mut Stats) {
    stats.final_states += 1;
    for si in 0..model.spec.steps.len() {
        let n = st.run.execution_count(si as StepIdx);
        if found.best[si].is_none_or(|b| n < b) {
            found.best[si] = Some(n);
        }
        if found.worst[si].is_none_or(|(w, _)| n > w) {
            found.worst[si] = Some((n, id));
        }
    }
    if !st.run.is_terminated() {
        let never_started = st.run.status() == RunStatus::NotStarted;
        let waiting = model.waiting(&st.run);
        let key = (never_started, waiting);
        if !found.stall_keys.contains(&key) {
            found.stall_keys.insert(key.clone());
            if found.stalls.len() < MAX_REPORTED_STALLS {
                found.stalls.push((key.0, key.1, id));
            }
        }
    }
}

/// Looks at what one transition appended: exceptions, events after stop, and (with
/// reduction 2) the events after stop of earlier invisible completions.
#[allow(clippy::too_many_arguments)]
fn observe(
    model: &Model,
    parent: &State,
    child: &State,
    act: Act,
    parent_id: u32,
    nodes: &[Node],
    opts: &ExploreOptions,
    found: &mut Found,
) {
    let run = &child.run;
    let witness = |extra: Option<ExecutionId>| -> Vec<Act> {
        let mut p = path_to(nodes, parent_id);
        p.push(act);
        if let Some(x) = extra {
            p.retain(|a| *a != Act::Complete(x));
            p.push(Act::Complete(x));
        }
        p
    };
    let origin_step = |o: &Origin| -> Option<String> {
        match o {
            Origin::Outside => None,
            Origin::Execution(x) => run
                .execution(*x)
                .map(|e| model.step_name(e.step).to_string()),
        }
    };
    let log_before = parent.run.log().len();
    let records = run.records().slice(parent.run.records().len()..);
    let after_stop_seqs: Vec<u32> = records
        .iter()
        .filter_map(|r| match r {
            Record::EventAfterStop { seq, .. } => Some(seq),
            _ => None,
        })
        .collect();
    for (k, e) in run.log()[log_before..].iter().enumerate() {
        let seq = (log_before + k) as u32;
        let event = run.type_name(e.ty).to_string();
        let step = origin_step(&e.origin);
        let after = after_stop_seqs.contains(&seq);
        if after {
            let key = (event.clone(), step.clone());
            if found.after_stop_keys.insert(key) {
                found
                    .after_stop
                    .push((event.clone(), step.clone(), witness(None)));
            }
        }
        if e.kind.is_exception() {
            let message = match e.origin {
                Origin::Execution(x) => run.execution_error(x).map(str::to_string),
                Origin::Outside => None,
            };
            let key = (event.clone(), step.clone(), message.clone(), after);
            if found.exception_keys.insert(key) {
                found
                    .exceptions
                    .push(((event, step, message, after), witness(None)));
            }
        }
    }
    // Reduction 2's deferred completions: had they waited, their events would follow the stop.
    if opts.partial_order && !parent.run.is_terminated() && run.is_terminated() {
        for (i, x) in run.executions().iter().enumerate() {
            let id = ExecutionId(i as u32);
            if x.state != ExecState::Completed || model.invisible(run, id) != Some(true) {
                continue;
            }
            let Outcome::Returned(events) = sim::outcome_for(run, id) else {
                continue;
            };
            let step = Some(model.step_name(x.step).to_string());
            for e in events {
                let event = model.type_name(event_type(&e)).to_string();
                let key = (event.clone(), step.clone());
                if found.after_stop_keys.insert(key) {
                    found
                        .after_stop
                        .push((event, step.clone(), witness(Some(id))));
                }
            }
        }
    }
}
