//! Differential (TESTING.md §6, issue 4): random workflows and random arrival orders, from
//! one seed, through the in-memory, the embedded (SQLite) and the NATS JetStream engine give
//! identical decision records, execution counts and payloads.
//!
//! The generator draws, per case, a workflow of 2–5 steps over the event types `A`..`F`:
//! each step takes one of the parameter shapes (required, required + optional, list with a
//! precondition, fixed list of 2, required + list), has a random execution budget and
//! `stop_on_error`, and its body derives one output (a control type, the `Done` stop event,
//! nothing, or a failure) from its inputs' payloads. Every event type has at most one
//! consuming step and every execution returns at most one event, so each outside event causes
//! one chain of executions and the log does not depend on scheduling; the test waits for the
//! run to be idle between outside events.
//!
//! A second test sends generated cases through two NATS workers sharing the class (the
//! intake, ownership and forwarding path) and compares the journal's records.
//!
//! The seed is printed; `SAAP_DIFF_SEED=<seed>` replays it, `SAAP_DIFF_CASES=<n>` changes the
//! number of cases (default 25). One nats-server serves every case (each case's workflow has
//! its own name, so its own streams).
#![allow(clippy::unwrap_used)]

mod common;

use common::{WAIT, nats_engine_on};
use saap::params::{OutEvent, OutputDecl, Outputs};
use saap::testing::TestRunner;
use saap::{
    Engine, EngineOptions, Event, FixedList, Required, SqliteBackend, Step, StepCtx, StepError,
    UserMessageEvent, Workflow, WorkflowBuilder,
};
use std::sync::Arc;

event!(A, "ControlEvent");
event!(B, "ControlEvent");
event!(C, "ControlEvent");
event!(D, "ControlEvent");
event!(E, "ControlEvent");
event!(F, "ControlEvent");
event!(Done, "StopEvent");

/// Control event types a step may consume (indexes into `A`..`F`).
const TYPES: usize = 6;
/// Output choices: `A`..`F`, then `Done`.
const OUTS: usize = TYPES + 1;

/// A step result chosen at run time: one of `A`..`F`, `Done`, or nothing.
struct Emit(Option<OutEvent>);

impl Outputs for Emit {
    fn declare(decl: &mut OutputDecl) {
        decl.add::<A>();
        decl.add::<B>();
        decl.add::<C>();
        decl.add::<D>();
        decl.add::<E>();
        decl.add::<F>();
        decl.add::<Done>();
    }
    fn collect(self, out: &mut Vec<OutEvent>) -> Result<(), saap::event::PayloadError> {
        out.extend(self.0);
        Ok(())
    }
}

/// What a step body does with the sum of its inputs' `n`.
#[derive(Debug, Clone, Copy)]
struct Body {
    salt: u32,
    /// Index into `A`..`F`, `Done`.
    out: usize,
    /// Fails when the derived value is divisible by this (0: never).
    fail_mod: u32,
    /// Returns nothing when the derived value is divisible by this (0: never).
    drop_mod: u32,
}

impl Body {
    fn run(self, n: u32) -> Result<Emit, StepError> {
        let v = n.wrapping_mul(31).wrapping_add(self.salt) % 97 + 1;
        if self.fail_mod > 0 && v.is_multiple_of(self.fail_mod) {
            return Err(StepError::new(format!("generated failure at {v}")));
        }
        if self.drop_mod > 0 && v.is_multiple_of(self.drop_mod) {
            return Ok(Emit(None));
        }
        let e = match self.out {
            0 => OutEvent::new(A { n: v }),
            1 => OutEvent::new(B { n: v }),
            2 => OutEvent::new(C { n: v }),
            3 => OutEvent::new(D { n: v }),
            4 => OutEvent::new(E { n: v }),
            5 => OutEvent::new(F { n: v }),
            _ => OutEvent::new(Done { n: v }),
        };
        Ok(Emit(Some(e)))
    }
}

/// The `n` of a control event of the generated types (all are `event!` structs).
trait N: Event + Clone {
    fn n(&self) -> u32;
}
macro_rules! impl_n {
    ($($t:ident)*) => { $(impl N for $t { fn n(&self) -> u32 { self.n } })* };
}
impl_n!(A B C D E F);

/// Runs `$body` with `$t` bound to the event type with index `$i` (`A`..`F`).
macro_rules! with_type {
    ($i:expr, $t:ident => $body:expr) => {
        match $i {
            0 => {
                type $t = A;
                $body
            }
            1 => {
                type $t = B;
                $body
            }
            2 => {
                type $t = C;
                $body
            }
            3 => {
                type $t = D;
                $body
            }
            4 => {
                type $t = E;
                $body
            }
            _ => {
                type $t = F;
                $body
            }
        }
    };
}

fn required<T: N>(name: &str, b: Body) -> Step<Required<T>> {
    Step::new(name, move |t: Required<T>, _: StepCtx| async move {
        b.run(t.n())
    })
}

fn with_optional<T: N, U: N>(name: &str, b: Body) -> Step<(Required<T>, Option<U>)> {
    Step::new(
        name,
        move |(t, u): (Required<T>, Option<U>), _: StepCtx| async move {
            b.run(t.n() * 3 + u.map(|u| u.n()).unwrap_or(0))
        },
    )
}

fn list<T: N>(name: &str, b: Body) -> Step<Vec<T>> {
    Step::new(name, move |ts: Vec<T>, _: StepCtx| async move {
        b.run(ts.iter().map(N::n).sum())
    })
    .precondition("two_or_more", |ts: &Vec<T>| ts.len() >= 2)
}

fn fixed_pair<T: N>(name: &str, b: Body) -> Step<FixedList<T, 2>> {
    Step::new(name, move |ts: FixedList<T, 2>, _: StepCtx| async move {
        b.run(ts[0].n() * 7 + ts[1].n())
    })
}

fn with_list<T: N, U: N>(name: &str, b: Body) -> Step<(Required<T>, Vec<U>)> {
    Step::new(
        name,
        move |(t, us): (Required<T>, Vec<U>), _: StepCtx| async move {
            b.run(t.n() + 5 * us.len() as u32 + us.iter().map(N::n).sum::<u32>())
        },
    )
}

/// One generated step, described for the failure message.
#[derive(Debug)]
struct StepPlan {
    shape: usize,
    types: Vec<usize>,
    body: Body,
    budget: u32,
    stop_on_error: bool,
}

/// A generated case: the workflow's plan and the outside events (type index, `n`).
#[derive(Debug)]
struct Case {
    begin: Body,
    steps: Vec<StepPlan>,
    inputs: Vec<(usize, u32)>,
}

fn body(rng: &mut fastrand::Rng) -> Body {
    Body {
        salt: rng.u32(0..1000),
        // `Done` one time in six.
        out: if rng.u8(0..6) == 0 {
            OUTS - 1
        } else {
            rng.usize(0..TYPES)
        },
        fail_mod: [0, 0, 5, 9][rng.usize(0..4)],
        drop_mod: [0, 0, 4, 7][rng.usize(0..4)],
    }
}

fn generate(rng: &mut fastrand::Rng) -> Case {
    let mut free: Vec<usize> = (0..TYPES).collect();
    rng.shuffle(&mut free);
    let mut steps = Vec::new();
    let count = rng.usize(2..6);
    while steps.len() < count && !free.is_empty() {
        let shape = rng.usize(0..5);
        let arity = if matches!(shape, 1 | 4) { 2 } else { 1 };
        if free.len() < arity {
            break;
        }
        let types: Vec<usize> = free.drain(..arity).collect();
        steps.push(StepPlan {
            shape,
            types,
            body: body(rng),
            budget: rng.u32(1..5),
            stop_on_error: rng.bool(),
        });
    }
    let len = rng.usize(0..12);
    let inputs = (0..len)
        .map(|_| (rng.usize(0..TYPES), rng.u32(1..20)))
        .collect();
    Case {
        begin: body(rng),
        steps,
        inputs,
    }
}

fn add_step(wf: WorkflowBuilder, i: usize, p: &StepPlan) -> WorkflowBuilder {
    let name = format!("s{i}");
    let (b, budget, stop) = (p.body, p.budget, p.stop_on_error);
    macro_rules! finish {
        ($step:expr) => {
            wf.step($step.max_executions_per_run(budget).stop_on_error(stop))
        };
    }
    match p.shape {
        0 => with_type!(p.types[0], T => finish!(required::<T>(&name, b))),
        1 => with_type!(p.types[0], T => with_type!(p.types[1], U =>
            finish!(with_optional::<T, U>(&name, b)))),
        2 => with_type!(p.types[0], T => finish!(list::<T>(&name, b))),
        3 => with_type!(p.types[0], T => finish!(fixed_pair::<T>(&name, b))),
        _ => with_type!(p.types[0], T => with_type!(p.types[1], U =>
            finish!(with_list::<T, U>(&name, b)))),
    }
}

fn workflow(name: &str, case: &Case) -> Workflow {
    let begin = case.begin;
    let mut wf = Workflow::builder(name).step(Step::new(
        "begin",
        move |u: Required<UserMessageEvent>, _: StepCtx| async move {
            begin.run(u.message.len() as u32)
        },
    ));
    for (i, p) in case.steps.iter().enumerate() {
        wf = add_step(wf, i, p);
    }
    wf.build().unwrap()
}

async fn send(run: &saap::testing::TestRun, t: usize, n: u32) {
    match t {
        0 => run.send(A { n }).await,
        1 => run.send(B { n }).await,
        2 => run.send(C { n }).await,
        3 => run.send(D { n }).await,
        4 => run.send(E { n }).await,
        _ => run.send(F { n }).await,
    }
    .unwrap();
}

/// What a run did, without ids: the records (indexes only), counts and payloads.
type Outcome = (String, Vec<(String, usize)>, Vec<(String, String)>);

/// Starts a run and sends it the case's outside events, each once the run is idle.
async fn drive(engine: Engine, inputs: &[(usize, u32)]) -> saap::testing::TestRun {
    let runner = TestRunner::new(engine);
    let run = runner.start(UserMessageEvent::new("go")).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    for &(t, n) in inputs {
        send(&run, t, n).await;
        run.wait_idle(WAIT).await.unwrap();
    }
    run
}

async fn outcome(engine: Engine, inputs: &[(usize, u32)]) -> Outcome {
    facts(&drive(engine, inputs).await.snapshot())
}

/// A run's records (indexes only), execution counts and payloads, without ids.
fn facts(snap: &saap::RunSnapshot) -> Outcome {
    let records = serde_json::to_string(&snap.run.records()).unwrap();
    let payloads = snap
        .events()
        .into_iter()
        .map(|e| (e.name, e.payload.to_string()))
        .collect();
    (records, snap.execution_counts(), payloads)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_workflows_decide_the_same_on_memory_embedded_and_nats() {
    let seed = std::env::var("SAAP_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    let cases: usize = std::env::var("SAAP_DIFF_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(25);
    eprintln!("differential seed {seed} (replay: SAAP_DIFF_SEED={seed})");
    let server = saap_nats::testing::NatsServer::start();
    let mut rng = fastrand::Rng::with_seed(seed);
    for i in 0..cases {
        let case = generate(&mut rng);
        let why = format!("seed {seed} (SAAP_DIFF_SEED={seed}), case {i}: {case:#?}");
        let name = format!("Diff{i}");
        let mem = outcome(in_memory(&name, &case), &case.inputs).await;
        let dir = tempfile::tempdir().unwrap();
        let sqlite = SqliteBackend::open(dir.path().join("saap.db")).unwrap();
        let sql = outcome(
            Engine::new(
                workflow(&name, &case),
                Arc::new(sqlite),
                EngineOptions::default(),
            ),
            &case.inputs,
        )
        .await;
        assert_eq!(mem, sql, "memory vs SQLite: {why}");
        let nats = outcome(
            nats_engine_on(&server, workflow(&name, &case)),
            &case.inputs,
        )
        .await;
        assert_eq!(sql, nats, "SQLite vs NATS: {why}");
    }
}

/// Replay (issue 23 §1) as a property over the generated workflows: a run stored on SQLite,
/// replayed with its workflow (its bodies run again, through the core, preconditions
/// evaluated anew), reproduces every decision record; replayed with the first step's body
/// changed (its salt), it diverges at that step's first completion and names the step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_workflows_replay_to_their_record_and_a_changed_body_diverges() {
    let seed = std::env::var("SAAP_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("replay seed {seed} (replay: SAAP_DIFF_SEED={seed})");
    let mut rng = fastrand::Rng::with_seed(seed);
    for i in 0..40 {
        let mut case = generate(&mut rng);
        let why = format!("seed {seed} (SAAP_DIFF_SEED={seed}), case {i}: {case:#?}");
        let name = format!("Replay{i}");
        let dir = tempfile::tempdir().unwrap();
        let sqlite = SqliteBackend::open(dir.path().join("saap.db")).unwrap();
        let engine = Engine::new(
            workflow(&name, &case),
            Arc::new(sqlite),
            EngineOptions::default(),
        );
        let run_id = drive(engine.clone(), &case.inputs)
            .await
            .run_id()
            .to_string();
        let report = engine.replay(&run_id).await.unwrap();
        assert!(report.reproduced(), "{why}\n{report:#?}");
        assert_eq!(report.records_reproduced, report.records, "{why}");
        assert!(report.records > 0 && report.executions_run >= 1, "{why}");
        assert_eq!(report.entries_reproduced, report.journal_entries, "{why}");

        let stored = engine
            .backend()
            .read_run(&name, &run_id)
            .wait()
            .await
            .unwrap()
            .unwrap();
        case.begin.salt += 1;
        let changed = Engine::replay_stored(&workflow(&name, &case), &stored, Vec::new())
            .await
            .unwrap();
        let d = changed.divergence.expect("a changed body diverges");
        assert_eq!(
            d.kind,
            saap::replay::DivergenceKind::Outcome,
            "{why}\n{d:#?}"
        );
        assert_eq!(d.step.as_deref(), Some("begin"), "{why}");
        assert_eq!(d.execution, Some(0), "{why}");
        assert_eq!(changed.executions_run, 1, "{why}");
    }
}

/// Fork (issue 23 §2) as a property over the generated workflows: a run stored on SQLite,
/// forked at any of its events from outside with that same event (the original's later
/// events sent again), reproduces the run — records, execution counts and payloads —
/// whether the executions after the fork point take the original's outputs or run; forked
/// with that event's fields changed, it departs from the original exactly there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_workflows_forked_with_the_same_event_reproduce_and_a_changed_one_departs_there() {
    use saap::fork::{ForkChange, ForkOptions};
    use saap_dispatch::diff::{DivergenceKind, Side, diff_runs};
    let seed = std::env::var("SAAP_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("fork seed {seed} (replay: SAAP_DIFF_SEED={seed})");
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut forks = 0;
    for i in 0..30 {
        let case = generate(&mut rng);
        let why = format!("seed {seed} (SAAP_DIFF_SEED={seed}), case {i}: {case:#?}");
        let name = format!("Fork{i}");
        let dir = tempfile::tempdir().unwrap();
        let sqlite = SqliteBackend::open(dir.path().join("saap.db")).unwrap();
        let engine = Engine::new(
            workflow(&name, &case),
            Arc::new(sqlite),
            EngineOptions::default(),
        );
        let run = drive(engine.clone(), &case.inputs).await;
        let snap = run.snapshot();
        let original = facts(&snap);
        // The events from outside a fork may depart at: before the run's end, if it ended.
        let end = match snap.run.status() {
            saap_dispatch::RunStatus::Terminated { by } => by,
            _ => u32::MAX,
        };
        let points: Vec<u32> = snap
            .events()
            .iter()
            .filter(|e| e.seq > 0 && e.seq < end && e.origin == saap_dispatch::Origin::Outside)
            .map(|e| e.seq)
            .collect();
        let runner = TestRunner::new(engine.clone());
        for &at in &points {
            // Reusing the original's outputs after the fork point or running those
            // executions live (the same code, so the same outputs): the same run.
            for reuse in [true, false] {
                let opts = ForkOptions {
                    reuse,
                    ..ForkOptions::new(at, ForkChange::Same)
                };
                let forked = engine
                    .fork(run.run_id(), opts)
                    .await
                    .unwrap_or_else(|e| panic!("fork at [{at}] (reuse {reuse}): {e}\n{why}"));
                assert_eq!(forked.forked_from, run.run_id());
                assert!(forked.not_reapplied.is_empty(), "{forked:#?}\n{why}");
                let fork = runner.attach(&forked.run_id).unwrap();
                fork.wait_idle(WAIT).await.unwrap();
                assert_eq!(
                    facts(&fork.snapshot()),
                    original,
                    "fork at [{at}] (reuse {reuse}): {why}"
                );
                forks += 1;
            }
        }
        let Some(&at) = points.first() else { continue };
        let events = snap.events();
        let changed = ForkChange::Replace {
            name: events[at as usize].name.clone(),
            payload: saap::event::Payload::from_json(serde_json::json!({ "n": 1000 })),
        };
        let forked = engine
            .fork(run.run_id(), ForkOptions::new(at, changed))
            .await
            .unwrap();
        let fork = runner.attach(&forked.run_id).unwrap();
        let fsnap = fork.wait_idle(WAIT).await.unwrap();
        let fevents = fsnap.events();
        let fa = |seq: u32| events.get(seq as usize).map(|e| (*e.payload).clone());
        let fb = |seq: u32| fevents.get(seq as usize).map(|e| (*e.payload).clone());
        let d = diff_runs(
            &Side {
                run: &snap.run,
                fields: Some(&fa),
            },
            &Side {
                run: &fsnap.run,
                fields: Some(&fb),
            },
        );
        let first = d.first.expect("a changed event departs");
        assert_eq!(first.kind, DivergenceKind::Event, "{first:#?}\n{why}");
        assert!(
            first.detail.starts_with(&format!("event [{at}]")),
            "{first:#?}\n{why}"
        );
    }
    assert!(forks >= 20, "too few fork points over 30 cases: {forks}");
}

fn in_memory(name: &str, case: &Case) -> Engine {
    TestRunner::in_memory(workflow(name, case)).engine().clone()
}

/// The generator is strong enough to matter: over a fixed seed, some cases stop, some fail
/// and some re-run a step (checked on the in-memory engine only; the comparison test above
/// uses the same generator).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_generator_reaches_stops_failures_and_reruns() {
    let mut rng = fastrand::Rng::with_seed(7);
    let (mut stopped, mut failed, mut reran) = (0, 0, 0);
    for i in 0..100 {
        let case = generate(&mut rng);
        let out = outcome(in_memory(&format!("Gen{i}"), &case), &case.inputs).await;
        stopped += usize::from(out.2.iter().any(|(n, _)| n == "Done"));
        failed += usize::from(out.2.iter().any(|(n, _)| n == "ExceptionEvent"));
        reran += usize::from(out.1.iter().any(|(_, c)| *c > 1));
    }
    assert!(
        stopped >= 10 && failed >= 5 && reran >= 10,
        "the generator is too weak: of 100 cases {stopped} stopped, {failed} failed, {reran} re-ran"
    );
}

/// An event as any client publishes it on the class stream (wire JSON, fresh id).
fn envelope<T: Event>(wf: &Workflow, ev: &T) -> saap_protocol::EventEnvelope {
    let mut env = saap_protocol::EventEnvelope::new(
        &wf.compiled().hierarchy,
        T::NAME,
        saap_nats::ids::fresh_event_id(),
        saap_nats::ids::now_ns(),
    )
    .unwrap();
    if let serde_json::Value::Object(fields) = &*saap::event::to_payload(ev).unwrap() {
        for (k, v) in fields {
            env = env.with_field(k, v.clone());
        }
    }
    env
}

fn typed_envelope(wf: &Workflow, t: usize, n: u32) -> saap_protocol::EventEnvelope {
    match t {
        0 => envelope(wf, &A { n }),
        1 => envelope(wf, &B { n }),
        2 => envelope(wf, &C { n }),
        3 => envelope(wf, &D { n }),
        4 => envelope(wf, &E { n }),
        _ => envelope(wf, &F { n }),
    }
}

/// Waits until event `id` is in run `run`'s journal and no execution is in flight; returns
/// the run's records as JSON text.
async fn settled(store: &saap::nats::NatsBackend, run: &str, id: saap_dispatch::EventId) -> String {
    use saap::backend::StoredInput;
    saap_nats::testing::within(WAIT, "the run to settle", async {
        loop {
            if let Some(stored) = store.load_run(run).await.unwrap() {
                let has = stored.journal.iter().any(
                    |e| matches!(&e.input, StoredInput::Append { event, .. } if event.id == id),
                );
                let count =
                    |tag: &str| stored.records.iter().filter(|r| r["record"] == tag).count();
                let started = count("execution_started") + count("execution_retried");
                let finished = count("execution_completed") + count("execution_failed");
                if has && started == finished {
                    return serde_json::to_string(&stored.records).unwrap();
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
}

/// The same generated cases through two [`saap::nats::Worker`]s sharing the class (events
/// published on the class stream, taken by the queue consumer, forwarded to the run's owner,
/// events after the stop reopened from the journal): the journal's decision records equal
/// the in-memory engine's. Fewer cases (`SAAP_DIFF_WORKER_CASES`, default 8): each starts
/// two workers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_workflows_decide_the_same_through_nats_workers() {
    through_workers(saap::nats::Steps::Local, "Work").await;
}

/// The same with step bodies on any worker (`Steps::Shared`: every execution goes through
/// the work queue and may run on either worker while the run's owner decides): the decision
/// records still equal the in-memory engine's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_workflows_decide_the_same_with_bodies_on_any_worker() {
    through_workers(saap::nats::Steps::Shared, "Shared").await;
}

async fn through_workers(steps: saap::nats::Steps, prefix: &str) {
    use saap::nats::{NatsBackend, Worker, WorkerOptions};
    let seed = std::env::var("SAAP_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    let cases: usize = std::env::var("SAAP_DIFF_WORKER_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    eprintln!("differential (workers, {steps:?}) seed {seed} (replay: SAAP_DIFF_SEED={seed})");
    let server = saap_nats::testing::NatsServer::start();
    let client = saap_nats::testing::connect(&server).await;
    let mut rng = fastrand::Rng::with_seed(seed);
    for i in 0..cases {
        let case = generate(&mut rng);
        let why = format!("seed {seed} (SAAP_DIFF_SEED={seed}), case {i}: {case:#?}");
        let name = format!("{prefix}{i}");
        let mem = outcome(in_memory(&name, &case), &case.inputs).await;
        let wf = workflow(&name, &case);
        let mut workers = Vec::new();
        for _ in 0..2 {
            let nats = saap_nats::testing::connect(&server).await;
            let opts = WorkerOptions {
                steps,
                work_batch: 1,
                // With Shared: every body through the work queue (no local placement).
                local_slots: 0,
                ..WorkerOptions::default()
            };
            let w = Worker::with_connection(nats, wf.clone(), opts)
                .await
                .unwrap();
            let serving = w.clone();
            tokio::spawn(async move { serving.serve().await.unwrap() });
            workers.push(w);
        }
        let store = NatsBackend::open(
            saap_nats::testing::connect(&server).await,
            &name,
            wf.compiled().hierarchy.clone(),
            Default::default(),
        )
        .await
        .unwrap();
        let address = saap_protocol::RunAddress::new(&name, "agent1", "t1", "d1", "r1").unwrap();
        let start = envelope(&wf, &UserMessageEvent::new("go"));
        client.publish_control(&address, &start).await.unwrap();
        let mut records = settled(&store, "r1", start.event_id).await;
        for &(t, n) in &case.inputs {
            let env = typed_envelope(&wf, t, n);
            client.publish_control(&address, &env).await.unwrap();
            records = settled(&store, "r1", env.event_id).await;
        }
        assert_eq!(mem.0, records, "memory vs NATS workers: {why}");
        for w in &workers {
            w.shutdown();
        }
    }
}
