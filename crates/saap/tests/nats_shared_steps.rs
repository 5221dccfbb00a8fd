//! Step bodies of one run on any worker (issue 4, `WorkerOptions::steps = Steps::Shared`), on
//! a real nats-server started per test (free loopback port, temporary store): one run's
//! fan-out runs on both workers while its owner decides once, in order; a worker killed with
//! SIGKILL in the middle of a body it took for a run owned by another worker → the body runs
//! again elsewhere with the same attempt, every run ends, no output twice; the owner killed
//! while another worker runs a body → the new owner finishes the run; every body run twice
//! (duplicated work items) → each output logged once. These use `local_slots: 0` (every body
//! through the work queue); adaptive placement (`local_slots > 0`): a saturated owner spills
//! bodies to another worker, an owner with free slots publishes no work item. Resources: a
//! body on another worker reads that worker's resource; a worker lacking one refuses to join.
#![allow(clippy::unwrap_used)]

mod common;

use common::nats::{ended_runs, load, publish_to, reader, serve};

use saap::nats::{Steps, Worker, WorkerOptions};
use saap::{Required, Step, StepCtx, StepError, UserMessageEvent, Workflow};
use saap_nats::testing::{NatsServer, connect, within};
use saap_nats::{NatsOptions, SaapNats};
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

event!(A, "ControlEvent");
event!(B, "ControlEvent");
event!(Done, "StopEvent");

/// Bounds every wait (a hung test fails; nothing is asserted about time).
const BOUND: Duration = Duration::from_secs(90);
const LEASE: Duration = Duration::from_millis(1500);

fn shared_opts() -> WorkerOptions {
    WorkerOptions {
        lease: LEASE,
        steps: Steps::Shared,
        work_ack_wait: Duration::from_secs(2),
        // One item per pull: a burst is spread over the workers.
        work_batch: 1,
        // Every body through the work queue: these tests move bodies between workers.
        local_slots: 0,
        ..WorkerOptions::default()
    }
}

/// (worker label, run id, step, input n) of every body run in this process.
#[derive(Clone, Default)]
struct BodyLog(Arc<Mutex<Vec<Body>>>);

/// (worker label, run id, step, input n).
type Body = (String, String, &'static str, u32);

impl BodyLog {
    fn push(&self, label: &str, ctx: &StepCtx, step: &'static str, n: u32) {
        self.0
            .lock()
            .unwrap()
            .push((label.to_string(), ctx.run_id().to_string(), step, n));
    }
    fn all(&self) -> Vec<Body> {
        self.0.lock().unwrap().clone()
    }
    fn count(&self, step: &str) -> usize {
        self.all().iter().filter(|e| e.2 == step).count()
    }
}

const FAN: u32 = 6;

/// `split(UserMessage) -> [A; 6]`, `work(A) -> B` (records which worker ran it), `join([B; 6])
/// -> Done`. Every worker gets its own instance (its label in the closures); the spec, and so
/// the fingerprint, is the same.
fn fan(label: &str, log: BodyLog) -> Workflow {
    fan_with("Fan", label, log, None, 30)
}

/// `begin(UserMessage) -> A` (waits until `gate` is set, then `begin_ms`), `middle(A) -> B` (appends
/// `label run` to `mark` when set, then sleeps `middle_ms`), `finish(B) -> Done`.
fn relay(
    label: &str,
    log: BodyLog,
    gate: Arc<AtomicBool>,
    begin_ms: u64,
    middle_ms: u64,
    mark: Option<String>,
) -> Workflow {
    let (l1, l2, l3) = (label.to_string(), label.to_string(), label.to_string());
    let (g1, g2, g3) = (log.clone(), log.clone(), log);
    Workflow::builder("Hop")
        .step(Step::new(
            "begin",
            move |_: Required<UserMessageEvent>, ctx: StepCtx| {
                g1.push(&l1, &ctx, "begin", 0);
                let gate = gate.clone();
                async move {
                    while !gate.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    tokio::time::sleep(Duration::from_millis(begin_ms)).await;
                    Ok::<_, StepError>(A { n: 1 })
                }
            },
        ))
        .step(Step::new("middle", move |a: Required<A>, ctx: StepCtx| {
            g2.push(&l2, &ctx, "middle", a.n);
            if let Some(path) = &mark {
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(path)
                    .unwrap();
                writeln!(f, "{} {}", l2, ctx.run_id()).unwrap();
            }
            async move {
                tokio::time::sleep(Duration::from_millis(middle_ms)).await;
                Ok::<_, StepError>(B { n: a.n + 1 })
            }
        }))
        .step(Step::new("finish", move |b: Required<B>, ctx: StepCtx| {
            g3.push(&l3, &ctx, "finish", b.n);
            async move { Ok::<_, StepError>(Done { n: b.n + 1 }) }
        }))
        .build()
        .unwrap()
}

async fn publish_start(nats: &SaapNats, class: &str, wf: &Workflow, run: &str) {
    publish_to(nats, class, wf, run, &UserMessageEvent::new("go")).await;
}

/// How many journaled completions of `run` returned an event named `name`.
fn completions_with(run: &saap::backend::StoredRun, name: &str) -> usize {
    run.journal
        .iter()
        .filter(|e| match &e.input {
            saap::backend::StoredInput::Complete {
                outputs: Some(outs),
                ..
            } => outs.iter().any(|o| o.name == name),
            _ => false,
        })
        .count()
}

fn records(run: &saap::backend::StoredRun) -> String {
    serde_json::to_string(&run.records).unwrap()
}

/// Waiting pull requests on the class's work consumer (one per serving worker at least).
async fn work_pullers(nats: &SaapNats, class: &str) -> usize {
    let Ok(stream) = nats
        .jetstream()
        .get_stream(saap::nats::work_stream(class))
        .await
    else {
        return 0;
    };
    match stream.consumer_info(saap::nats::work_consumer(class)).await {
        Ok(info) => info.num_waiting,
        Err(_) => 0,
    }
}

/// Workers of the class with a live heartbeat.
async fn live_workers(nats: &SaapNats, class: &str) -> usize {
    use futures_util::StreamExt;
    let Ok(kv) = nats
        .jetstream()
        .get_key_value(format!("saap_{class}_live"))
        .await
    else {
        return 0;
    };
    match kv.keys().await {
        Ok(keys) => keys.filter(|k| std::future::ready(k.is_ok())).count().await,
        Err(_) => 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_runs_fan_out_runs_on_both_workers_and_each_input_set_once() {
    let server = NatsServer::start();
    let log = BodyLog::default();
    let w1 = serve(&server, fan("w1", log.clone()), shared_opts()).await;
    let w2 = serve(&server, fan("w2", log.clone()), shared_opts()).await;
    let client = connect(&server).await;
    within(BOUND, "both workers to pull work", async {
        while work_pullers(&client, "Fan").await < 2 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let wf = fan("client", BodyLog::default());
    const RUNS: usize = 8;
    for i in 0..RUNS {
        publish_start(&client, "Fan", &wf, &format!("f{i}")).await;
    }
    let store = reader(connect(&server).await, &wf).await;
    let runs = ended_runs(&store, "Fan", RUNS).await;
    assert_eq!(runs.len(), RUNS);

    // Each input set executed once: one `work` body per (run, input), one split per run.
    let all = log.all();
    let works: Vec<_> = all.iter().filter(|e| e.2 == "work").collect();
    let distinct: HashSet<(&str, u32)> = works.iter().map(|e| (e.1.as_str(), e.3)).collect();
    assert_eq!(works.len(), RUNS * FAN as usize, "{works:?}");
    assert_eq!(distinct.len(), RUNS * FAN as usize);
    assert_eq!(log.count("split"), RUNS);

    // One run's fan-out ran on both workers (so on a worker that does not own the run).
    let mut by_run: HashMap<&str, HashSet<&str>> = HashMap::new();
    for e in &works {
        by_run.entry(e.1.as_str()).or_default().insert(e.0.as_str());
    }
    let on_both = by_run.values().filter(|w| w.len() == 2).count();
    eprintln!("runs whose fan-out ran on both workers: {on_both} of {RUNS}");
    assert!(
        on_both >= 1,
        "no run's fan-out ran on both workers: {by_run:?}"
    );

    // Decisions once and in order: one join, one Done per run, no retried execution.
    for r in &runs {
        assert_eq!(completions_with(r, "Done"), 1, "run {}", r.meta.run_id);
        assert_eq!(completions_with(r, "B"), FAN as usize);
        let text = records(r);
        assert!(!text.contains("execution_retried"), "{text}");
    }
    w1.shutdown();
    w2.shutdown();
}

/// `split(UserMessage) -> [A; 6]` (waits until `gate` is set), `work(A) -> B` (records which
/// worker ran it, then sleeps `work_ms`), `join([B; 6]) -> Done`.
fn gated_fan(label: &str, log: BodyLog, gate: Arc<AtomicBool>, work_ms: u64) -> Workflow {
    fan_with("Spill", label, log, Some(gate), work_ms)
}

/// The fan-out workflow `name`: `split` (after `gate`, if any), `work` (sleeps `work_ms`),
/// `join`.
fn fan_with(
    name: &str,
    label: &str,
    log: BodyLog,
    gate: Option<Arc<AtomicBool>>,
    work_ms: u64,
) -> Workflow {
    let (l1, l2) = (label.to_string(), label.to_string());
    let (g1, g2) = (log.clone(), log);
    Workflow::builder(name)
        .step(Step::new(
            "split",
            move |_: Required<UserMessageEvent>, ctx: StepCtx| {
                g1.push(&l1, &ctx, "split", 0);
                let gate = gate.clone();
                async move {
                    while gate.as_ref().is_some_and(|g| !g.load(Ordering::SeqCst)) {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    Ok::<_, StepError>((0..FAN).map(|n| A { n }).collect::<Vec<_>>())
                }
            },
        ))
        .step(Step::new("work", move |a: Required<A>, ctx: StepCtx| {
            g2.push(&l2, &ctx, "work", a.n);
            async move {
                tokio::time::sleep(Duration::from_millis(work_ms)).await;
                Ok::<_, StepError>(B { n: a.n })
            }
        }))
        .step(
            Step::new("join", |bs: saap::FixedList<B, 6>, _: StepCtx| async move {
                Ok::<_, StepError>(Done {
                    n: bs.iter().map(|b| b.n).sum(),
                })
            })
            .max_executions_per_run(1),
        )
        .build()
        .unwrap()
}

/// How many work items were ever published to the class's work queue (its last sequence; a
/// work-queue stream deletes acknowledged items, its sequence stays).
async fn work_items_published(nats: &SaapNats, class: &str) -> u64 {
    let mut stream = nats
        .jetstream()
        .get_stream(saap::nats::work_stream(class))
        .await
        .unwrap();
    stream.info().await.unwrap().state.last_sequence
}

fn adaptive_opts(local_slots: usize) -> WorkerOptions {
    WorkerOptions {
        local_slots,
        ..shared_opts()
    }
}

/// Adaptive placement, saturated owner: one worker owns the run (it was the only one
/// serving when the start event came), its 2 local slots hold 2 slow bodies of the fan-out,
/// the others go through the work queue and the second worker runs some of them; each
/// input set still runs once and the run decides once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_owner_spills_bodies_to_another_worker() {
    let server = NatsServer::start();
    let log = BodyLog::default();
    let gate = Arc::new(AtomicBool::new(false));
    let wf1 = gated_fan("w1", log.clone(), gate.clone(), 400);
    let w1 = serve(&server, wf1.clone(), adaptive_opts(2)).await;
    let client = connect(&server).await;
    publish_start(&client, "Spill", &wf1, "s1").await;
    within(BOUND, "w1 to own the run", async {
        while w1.owned_runs().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let w2 = serve(
        &server,
        gated_fan("w2", log.clone(), gate.clone(), 400),
        adaptive_opts(2),
    )
    .await;
    within(BOUND, "both workers to pull work", async {
        while work_pullers(&client, "Spill").await < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    gate.store(true, Ordering::SeqCst);
    let store = reader(connect(&server).await, &wf1).await;
    let runs = ended_runs(&store, "Spill", 1).await;

    let works: Vec<Body> = log.all().into_iter().filter(|e| e.2 == "work").collect();
    let on = |w: &str| works.iter().filter(|e| e.0 == w).count();
    eprintln!("work bodies: w1 {}, w2 {}", on("w1"), on("w2"));
    assert_eq!(works.len(), FAN as usize, "{works:?}");
    let distinct: HashSet<u32> = works.iter().map(|e| e.3).collect();
    assert_eq!(distinct.len(), FAN as usize);
    assert_eq!(
        log.all()
            .iter()
            .filter(|e| e.2 == "split" && e.0 == "w1")
            .count(),
        1
    );
    assert!(on("w1") >= 1, "the owner ran no body itself: {works:?}");
    assert!(
        on("w2") >= 1,
        "no body spilled to the other worker: {works:?}"
    );
    assert!(work_items_published(&client, "Spill").await >= 1);
    assert_eq!(completions_with(&runs[0], "Done"), 1);
    assert_eq!(completions_with(&runs[0], "B"), FAN as usize);
    w1.shutdown();
    w2.shutdown();
}

/// Adaptive placement, free slots: the owner runs every body of the fan-out itself and not
/// one work item is published, although another worker is serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_with_free_slots_publishes_no_work_item() {
    let server = NatsServer::start();
    let log = BodyLog::default();
    let gate = Arc::new(AtomicBool::new(true));
    let w1 = serve(
        &server,
        gated_fan("w1", log.clone(), gate.clone(), 30),
        adaptive_opts(8),
    )
    .await;
    let w2 = serve(
        &server,
        gated_fan("w2", log.clone(), gate.clone(), 30),
        adaptive_opts(8),
    )
    .await;
    let client = connect(&server).await;
    within(BOUND, "both workers to pull work", async {
        while work_pullers(&client, "Spill").await < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let wf = gated_fan("client", BodyLog::default(), gate, 30);
    publish_start(&client, "Spill", &wf, "s1").await;
    let store = reader(connect(&server).await, &wf).await;
    let runs = ended_runs(&store, "Spill", 1).await;

    let all = log.all();
    let owner = &all.iter().find(|e| e.2 == "split").unwrap().0;
    let works: Vec<&Body> = all.iter().filter(|e| e.2 == "work").collect();
    assert_eq!(works.len(), FAN as usize, "{works:?}");
    assert!(
        works.iter().all(|e| &e.0 == owner),
        "a body ran off its owner {owner}: {works:?}"
    );
    assert_eq!(work_items_published(&client, "Spill").await, 0);
    assert_eq!(completions_with(&runs[0], "Done"), 1);
    w1.shutdown();
    w2.shutdown();
}

/// The child process of the kill tests: a `Hop` worker with shared bodies serving until
/// killed. Runs only when a test starts it.
#[test]
#[ignore = "child process of the shared-steps kill tests"]
fn shared_hop_worker_process() {
    let url = std::env::var("SAAP_TEST_WORKER_URL").expect("started by a kill test");
    let ms = |v: &str| -> u64 {
        std::env::var(v)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    };
    let mark = std::env::var("SAAP_TEST_MARK").ok();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let wf = relay(
            "child",
            BodyLog::default(),
            Arc::new(AtomicBool::new(true)),
            ms("SAAP_TEST_BEGIN_MS"),
            ms("SAAP_TEST_MIDDLE_MS"),
            mark,
        );
        let w = Worker::connect(&NatsOptions::new(url), wf, shared_opts())
            .await
            .unwrap();
        w.serve().await.unwrap();
    });
}

fn spawn_child(
    url: &str,
    begin_ms: u64,
    middle_ms: u64,
    mark: &std::path::Path,
) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "shared_hop_worker_process",
            "--nocapture",
        ])
        .env("SAAP_TEST_WORKER_URL", url)
        .env("SAAP_TEST_BEGIN_MS", begin_ms.to_string())
        .env("SAAP_TEST_MIDDLE_MS", middle_ms.to_string())
        .env("SAAP_TEST_MARK", mark)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

fn marked(mark: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(mark)
        .unwrap_or_default()
        .lines()
        .map(|l| l.to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_in_a_body_it_took_for_another_owner_runs_it_again_elsewhere() {
    let server = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("child-bodies");
    let log = BodyLog::default();
    let gate = Arc::new(AtomicBool::new(false));
    // The owner: this process. Its `begin` bodies wait for the gate, so that the child is
    // pulling work before any `middle` is started.
    let owner = serve(
        &server,
        relay("owner", log.clone(), gate.clone(), 0, 0, None),
        shared_opts(),
    )
    .await;
    let client = connect(&server).await;
    let wf = relay("client", BodyLog::default(), gate.clone(), 0, 0, None);
    const RUNS: usize = 6;
    for i in 0..RUNS {
        publish_start(&client, "Hop", &wf, &format!("k{i}")).await;
    }
    within(BOUND, "the owner to own every run", async {
        while owner.owned_runs().len() < RUNS {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    // Every `begin` held here before the child serves: a child that took a `begin` item
    // would run it where this process's log cannot see it.
    within(BOUND, "every begin to wait at the gate", async {
        while log.count("begin") < RUNS {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    // The child's `middle` never finishes in time: it is killed inside it.
    let mut child = spawn_child(&server.url(), 0, 600_000, &mark);
    within(BOUND, "the child to pull work", async {
        while live_workers(&client, "Hop").await < 2 || work_pullers(&client, "Hop").await < 2 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    gate.store(true, Ordering::SeqCst);
    within(BOUND, "the child to take a middle", async {
        while marked(&mark).is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    // Let the remaining items be taken too, then kill the child inside its bodies.
    tokio::time::sleep(Duration::from_millis(300)).await;
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let taken_by_child = marked(&mark);
    eprintln!("middles the killed worker had taken: {taken_by_child:?}");

    let store = reader(connect(&server).await, &wf).await;
    let runs = ended_runs(&store, "Hop", RUNS).await;
    assert_eq!(runs.len(), RUNS, "0 lost runs");
    // The child never owned a run: every run stayed with this process.
    assert!(taken_by_child.iter().all(|l| l.starts_with("child ")));
    // Every middle the child took ran again here (the owner ran all of them in the end).
    assert_eq!(log.count("middle"), RUNS, "{:?}", log.all());
    for r in &runs {
        assert_eq!(completions_with(r, "Done"), 1, "run {}", r.meta.run_id);
        assert_eq!(
            completions_with(r, "B"),
            1,
            "run {}: one output of middle",
            r.meta.run_id
        );
        // Same attempt (the owner never changed): a redelivery, not a retry.
        let text = records(r);
        assert!(!text.contains("execution_retried"), "{text}");
    }
    owner.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_killed_while_another_worker_runs_a_body_is_replaced() {
    let server = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("child-bodies");
    let client = connect(&server).await;
    // The owner: a child process alone at first, so it takes every start event. Its `begin`
    // takes 2 s (this process starts meanwhile) and its `middle` never finishes.
    let mut child = spawn_child(&server.url(), 2_000, 600_000, &mark);
    within(BOUND, "the child to pull work", async {
        while work_pullers(&client, "Hop").await < 1 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let wf = relay(
        "client",
        BodyLog::default(),
        Arc::new(AtomicBool::new(true)),
        0,
        0,
        None,
    );
    const RUNS: usize = 4;
    for i in 0..RUNS {
        publish_start(&client, "Hop", &wf, &format!("o{i}")).await;
    }
    let store = reader(connect(&server).await, &wf).await;
    within(BOUND, "the child to journal every start", async {
        while load(&store, "Hop").await.len() < RUNS {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let log = BodyLog::default();
    let other = serve(
        &server,
        relay(
            "other",
            log.clone(),
            Arc::new(AtomicBool::new(true)),
            0,
            1_500,
            None,
        ),
        shared_opts(),
    )
    .await;
    within(BOUND, "this worker to run a middle", async {
        while log.count("middle") == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(other.owned_runs().is_empty(), "the child owns every run");
    eprintln!(
        "bodies running here when the owner is killed: {:?}",
        log.all()
    );
    child.kill().unwrap(); // SIGKILL, while this process runs a body of its run
    child.wait().unwrap();

    let runs = ended_runs(&store, "Hop", RUNS).await;
    assert_eq!(runs.len(), RUNS, "0 lost runs");
    for r in &runs {
        assert_eq!(completions_with(r, "Done"), 1, "run {}", r.meta.run_id);
        assert_eq!(completions_with(r, "B"), 1, "run {}", r.meta.run_id);
        let text = records(r);
        assert!(
            text.contains("execution_retried"),
            "run {}: the new owner retried the unfinished execution: {text}",
            r.meta.run_id
        );
    }
    other.shutdown();
}

/// A body run from the work queue reaches what a local body reaches: the start event's fields
/// (configs), RunContext (KV), and the displayer — its display event is journaled once by the
/// run's owner, attributed to the execution, and published on core NATS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_from_the_work_queue_reaches_config_contexts_and_the_displayer() {
    use futures_util::StreamExt;
    let server = NatsServer::start();
    let wf = Workflow::builder("Shows")
        .step(Step::new(
            "think",
            |q: Required<UserMessageEvent>, ctx: StepCtx| async move {
                let fail = |e: saap::ContextError| StepError::new(e.to_string());
                ctx.display(&saap::ThoughtEvent {
                    thought: format!("thinking about {}", q.message),
                })
                .await
                .map_err(fail)?;
                let run = ctx.run_context();
                run.set("seen", &7u32).await.map_err(fail)?;
                let seen: u32 = run.get("seen").await.map_err(fail)?.unwrap_or(0);
                let start = ctx.start_fields();
                let len = start.json()["message"].as_str().unwrap_or("").len() as u32;
                Ok::<_, StepError>(Done { n: seen + len })
            },
        ))
        .build()
        .unwrap();
    let client = connect(&server).await;
    let mut shown = client
        .client()
        .subscribe("agent.Shows.*.*.*.*.display_event.>")
        .await
        .unwrap();
    client.sync().await.unwrap();
    let w1 = serve(&server, wf.clone(), shared_opts()).await;
    let w2 = serve(&server, wf.clone(), shared_opts()).await;
    const RUNS: usize = 6;
    for i in 0..RUNS {
        publish_start(&client, "Shows", &wf, &format!("s{i}")).await;
    }
    let store = reader(connect(&server).await, &wf).await;
    let runs = ended_runs(&store, "Shows", RUNS).await;
    for r in &runs {
        let done: Vec<_> = r
            .journal
            .iter()
            .filter_map(|e| match &e.input {
                saap::backend::StoredInput::Complete {
                    outputs: Some(outs),
                    ..
                } => outs.iter().find(|o| o.name == "Done").cloned(),
                _ => None,
            })
            .collect();
        assert_eq!(done.len(), 1, "run {}", r.meta.run_id);
        // 7 from RunContext + "go".len() from the start event's fields.
        assert_eq!(done[0].payload.json()["n"], 9, "run {}", r.meta.run_id);
        let thoughts: Vec<_> = r
            .journal
            .iter()
            .filter(|e| {
                matches!(&e.input, saap::backend::StoredInput::Append { event, by: Some(_), .. }
                    if event.name == "ThoughtEvent")
            })
            .collect();
        assert_eq!(
            thoughts.len(),
            1,
            "run {}: one display event, attributed",
            r.meta.run_id
        );
    }
    let mut seen = HashSet::new();
    within(BOUND, "every display event on core NATS", async {
        while seen.len() < RUNS {
            let m = shown.next().await.unwrap();
            let s = saap_protocol::AgentEventSubject::parse(&m.subject).unwrap();
            seen.insert(s.run().run_id().to_string());
        }
    })
    .await;
    w1.shutdown();
    w2.shutdown();
}

/// Duplicate completions are harmless: every work item is stored twice in the work queue (a
/// copy under another Msg-Id, as a publisher retrying without deduplication would), so every
/// body runs twice, on either worker, and both completions reach the owner. The core keeps
/// the first: one completion per execution in the journal, no retry, one Done per run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_work_item_run_twice_still_logs_each_output_once() {
    use futures_util::StreamExt;
    let server = NatsServer::start();
    let log = BodyLog::default();
    let open = Arc::new(AtomicBool::new(true));
    let wf = |label: &str| relay(label, log.clone(), open.clone(), 0, 20, None);
    let client = connect(&server).await;
    let mut items = client.client().subscribe("saap.work.Hop.>").await.unwrap();
    client.sync().await.unwrap();
    let copier = client.clone();
    tokio::spawn(async move {
        while let Some(m) = items.next().await {
            let mut headers = async_nats::HeaderMap::new();
            headers.insert("Nats-Msg-Id", format!("copy-{}", m.subject).as_str());
            copier
                .jetstream()
                .publish_with_headers(m.subject.to_string(), headers, m.payload.clone())
                .await
                .unwrap()
                .await
                .unwrap();
        }
    });
    let w1 = serve(&server, wf("w1"), shared_opts()).await;
    let w2 = serve(&server, wf("w2"), shared_opts()).await;
    const RUNS: usize = 4;
    for i in 0..RUNS {
        publish_start(&client, "Hop", &wf("client"), &format!("d{i}")).await;
    }
    let store = reader(connect(&server).await, &wf("client")).await;
    let runs = ended_runs(&store, "Hop", RUNS).await;
    within(BOUND, "every copy to run", async {
        while ["begin", "middle", "finish"]
            .iter()
            .any(|s| log.count(s) < 2 * RUNS)
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    for step in ["begin", "middle", "finish"] {
        assert_eq!(log.count(step), 2 * RUNS, "{step}: each body ran twice");
    }
    for r in &runs {
        assert_eq!(completions_with(r, "A"), 1, "run {}", r.meta.run_id);
        assert_eq!(completions_with(r, "B"), 1, "run {}", r.meta.run_id);
        assert_eq!(completions_with(r, "Done"), 1, "run {}", r.meta.run_id);
        let text = records(r);
        assert!(!text.contains("execution_retried"), "{text}");
        assert_eq!(text.matches("execution_completed").count(), 3, "{text}");
    }
    w1.shutdown();
    w2.shutdown();
}

/// The resource a worker registers: which worker's it is.
struct WorkerLabel(String);

/// `split` → 6 × `work` (reads `Res<WorkerLabel>`, logs `worker:label`) → `join`.
fn labelled_fan(label: &str, log: BodyLog) -> Workflow {
    let (l1, l2) = (label.to_string(), label.to_string());
    let g1 = log.clone();
    Workflow::builder("Labelled")
        .resource(WorkerLabel(label.to_string()))
        .step(Step::new(
            "split",
            move |_: Required<UserMessageEvent>, ctx: StepCtx| {
                g1.push(&l1, &ctx, "split", 0);
                async move { Ok::<_, StepError>((0..FAN).map(|n| A { n }).collect::<Vec<_>>()) }
            },
        ))
        .step(
            Step::new("work", move |a: Required<A>, ctx: StepCtx| {
                let (log, runs_here) = (log.clone(), l2.clone());
                async move {
                    // The resource of the worker that runs the body, not of the run's owner.
                    let label = ctx.resource::<WorkerLabel>()?;
                    log.push(&format!("{runs_here}:{}", label.0), &ctx, "work", a.n);
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    Ok::<_, StepError>(B { n: a.n })
                }
            })
            .uses_resource::<WorkerLabel>(),
        )
        .step(
            Step::new("join", |bs: saap::FixedList<B, 6>, _: StepCtx| async move {
                Ok::<_, StepError>(Done {
                    n: bs.iter().map(|b| b.n).sum(),
                })
            })
            .max_executions_per_run(1),
        )
        .build()
        .unwrap()
}

/// A body taken from the work queue reads the resources of the worker that runs it; a
/// worker that lacks a resource its steps take refuses to join the class (it could be
/// handed any body).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_on_another_worker_takes_that_workers_resource() {
    let server = NatsServer::start();
    let log = BodyLog::default();

    let bare = Workflow::builder("Labelled")
        .step(
            Step::new("work", |a: Required<A>, _: StepCtx| async move {
                Ok::<_, StepError>(B { n: a.n })
            })
            .uses_resource::<WorkerLabel>(),
        )
        .build()
        .unwrap();
    let refused = Worker::with_connection(connect(&server).await, bare, shared_opts())
        .await
        .err()
        .unwrap();
    assert!(refused.to_string().contains("SAAP-E009"), "{refused}");

    let w1 = serve(&server, labelled_fan("w1", log.clone()), shared_opts()).await;
    let w2 = serve(&server, labelled_fan("w2", log.clone()), shared_opts()).await;
    let client = connect(&server).await;
    within(BOUND, "both workers to pull work", async {
        while work_pullers(&client, "Labelled").await < 2 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let wf = labelled_fan("client", BodyLog::default());
    const RUNS: usize = 4;
    for i in 0..RUNS {
        publish_start(&client, "Labelled", &wf, &format!("l{i}")).await;
    }
    let store = reader(connect(&server).await, &wf).await;
    let runs = ended_runs(&store, "Labelled", RUNS).await;
    assert_eq!(runs.len(), RUNS);
    for r in &runs {
        assert_eq!(completions_with(r, "Done"), 1, "run {}", r.meta.run_id);
    }
    let works: Vec<Body> = log.all().into_iter().filter(|e| e.2 == "work").collect();
    assert_eq!(works.len(), RUNS * FAN as usize, "{works:?}");
    // (worker that ran the body):(label of the resource it read)
    let pairs: HashSet<&str> = works.iter().map(|e| e.0.as_str()).collect();
    assert!(
        pairs.iter().all(|p| *p == "w1:w1" || *p == "w2:w2"),
        "every body read the resource of the worker that ran it: {pairs:?}"
    );
    eprintln!("bodies ran on: {pairs:?}");
    w1.shutdown();
    w2.shutdown();
}

/// A body run through the work queue reports what its model calls used
/// (`StepCtx::report_usage`) with its completion, and the run's owner counts it against the
/// run's token budget as it counts a body run where the run is held (issue 21 §5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_on_the_work_queue_spends_its_runs_token_budget() {
    let server = NatsServer::start();
    let wf = Workflow::builder("Metered")
        .step(Step::new(
            "begin",
            |_: Required<UserMessageEvent>, ctx: StepCtx| async move {
                ctx.report_usage(100, 0.0);
                Ok::<_, StepError>(A { n: 1 })
            },
        ))
        .step(Step::new(
            "middle",
            |_: Required<A>, ctx: StepCtx| async move {
                ctx.report_usage(100, 0.0);
                Ok::<_, StepError>(B { n: 2 })
            },
        ))
        .step(Step::new(
            "finish",
            |_: Required<B>, ctx: StepCtx| async move {
                ctx.report_usage(100, 0.0);
                Ok::<_, StepError>(Done { n: 3 })
            },
        ))
        .build()
        .unwrap();
    let opts = WorkerOptions {
        engine: saap::EngineOptions {
            run_budget: saap::RunBudget {
                max_tokens: Some(150),
                ..saap::RunBudget::default()
            },
            ..saap::EngineOptions::default()
        },
        ..shared_opts()
    };
    let w = serve(&server, wf.clone(), opts).await;
    let client = connect(&server).await;
    publish_to(&client, "Metered", &wf, "m1", &UserMessageEvent::new("go")).await;
    // begin (100) and middle (200 in all) ran on the queue; finish is held.
    within(BOUND, "the run to pause on its tokens", async {
        loop {
            if let Some(s) = w.engine().snapshot("m1")
                && s.run.progress().as_str() == "waiting_budget"
            {
                let b = s.run.budget().unwrap();
                assert_eq!(b.tokens.used, 200);
                assert_eq!(s.run.held().count(), 1);
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    })
    .await;
    assert!(work_items_published(&client, "Metered").await >= 2);
    w.shutdown();
}

/// A body run through the work queue is told when its run is cancelled
/// (`StepCtx::cancellation`, issue 21 §4): the owner announces the cancel to the class's
/// workers, the one running the body cancels its token, and the body stops waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_on_the_work_queue_is_told_its_run_was_cancelled() {
    let server = NatsServer::start();
    let started = Arc::new(AtomicBool::new(false));
    let told = Arc::new(AtomicBool::new(false));
    let (s, t) = (started.clone(), told.clone());
    let wf = Workflow::builder("Patient")
        .step(Step::new(
            "wait",
            move |_: Required<UserMessageEvent>, ctx: StepCtx| {
                let (s, t) = (s.clone(), t.clone());
                async move {
                    s.store(true, Ordering::SeqCst);
                    // Waits for ever unless told.
                    ctx.cancellation().cancelled().await;
                    t.store(true, Ordering::SeqCst);
                    Ok::<_, StepError>(Done { n: 1 })
                }
            },
        ))
        .build()
        .unwrap();
    let owner = serve(&server, wf.clone(), shared_opts()).await;
    let other = serve(&server, wf.clone(), shared_opts()).await;
    let client = connect(&server).await;
    publish_to(&client, "Patient", &wf, "p1", &UserMessageEvent::new("go")).await;
    within(BOUND, "the body to start on the queue", async {
        while !started.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    // Cancelled by whichever worker owns the run.
    let holder = if owner.engine().has_run("p1") {
        &owner
    } else {
        &other
    };
    holder.engine().cancel("p1", "not needed").await.unwrap();
    within(BOUND, "the body to be told", async {
        while !told.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    owner.shutdown();
    other.shutdown();
}
