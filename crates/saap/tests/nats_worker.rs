//! The distributed engine's reliability (issue 4): workers of one class on a real nats-server
//! (started per test on a free loopback port with a temporary store, `sync_interval: always`)
//! share runs, make every input set execute once under duplicate and delayed deliveries, and
//! finish every run of a worker killed with SIGKILL while its steps run.
#![allow(clippy::unwrap_used)]

mod common;

use common::nats::{
    address, ended_runs, envelope, publish, reader, record_text, serve, start_runs,
};

use saap::nats::{NatsBackend, Worker, WorkerOptions};
use saap::{Required, Step, StepCtx, StepError, UserMessageEvent, Workflow};
use saap_nats::testing::{NatsServer, connect, within};
use saap_nats::{NatsOptions, SaapNats};
use saap_protocol::{EventEnvelope, EventKind};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

event!(A, "ControlEvent");
event!(B, "ControlEvent");
event!(X, "ControlEvent");
event!(Y, "ControlEvent");
event!(Z, "ControlEvent");
event!(Done, "StopEvent");

/// Bounds every wait (a hung test fails; nothing is asserted about time).
const BOUND: Duration = Duration::from_secs(90);
const LEASE: Duration = Duration::from_millis(1500);

fn opts() -> WorkerOptions {
    WorkerOptions {
        lease: LEASE,
        ..WorkerOptions::default()
    }
}

/// Executions per step, counted by the step bodies of this process.
#[derive(Clone, Default)]
struct Counts(Arc<HashMap<&'static str, AtomicUsize>>);

impl Counts {
    fn new(steps: &[&'static str]) -> Counts {
        Counts(Arc::new(
            steps.iter().map(|s| (*s, AtomicUsize::new(0))).collect(),
        ))
    }
    fn hit(&self, step: &str) {
        self.0[step].fetch_add(1, Ordering::SeqCst);
    }
    fn get(&self, step: &str) -> usize {
        self.0[step].load(Ordering::SeqCst)
    }
}

/// `begin(UserMessage) -> A`, `middle(A) -> B` (sleeps `middle_sleep`), `finish(B) -> Done`.
fn relay(counts: Counts, middle_sleep: Duration) -> Workflow {
    let (c1, c2, c3) = (counts.clone(), counts.clone(), counts);
    Workflow::builder("Relay")
        .step(Step::new(
            "begin",
            move |_: Required<UserMessageEvent>, _: StepCtx| {
                c1.hit("begin");
                async { Ok::<_, StepError>(A { n: 1 }) }
            },
        ))
        .step(Step::new("middle", move |a: Required<A>, _: StepCtx| {
            c2.hit("middle");
            async move {
                tokio::time::sleep(middle_sleep).await;
                Ok::<_, StepError>(B { n: a.n + 1 })
            }
        }))
        .step(Step::new("finish", move |b: Required<B>, _: StepCtx| {
            c3.hit("finish");
            async move { Ok::<_, StepError>(Done { n: b.n + 1 }) }
        }))
        .build()
        .unwrap()
}

/// Publishes an already published event again *without* Msg-Id, so the stream stores and
/// delivers a second copy (a duplicate the stream's deduplication cannot catch).
async fn publish_copy(nats: &SaapNats, class: &str, run: &str, env: &EventEnvelope) {
    let subject = address(class, run)
        .event_subject(
            EventKind::Control,
            &env.event_name,
            &env.event_id.to_string(),
        )
        .unwrap()
        .to_string();
    nats.jetstream()
        .publish(subject, env.encode_bytes().into())
        .await
        .unwrap()
        .await
        .unwrap();
}

fn ended_with_done(run: &saap::backend::StoredRun) -> bool {
    run.journal.iter().any(|e| match &e.input {
        saap::backend::StoredInput::Complete {
            outputs: Some(outs),
            ..
        } => outs.iter().any(|o| o.name == "Done"),
        _ => false,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_share_runs_and_each_input_set_runs_once() {
    let server = NatsServer::start();
    let counts = Counts::new(&["begin", "middle", "finish"]);
    let wf = relay(counts.clone(), Duration::from_millis(5));
    let mut workers = Vec::new();
    for _ in 0..2 {
        let nats = connect(&server).await;
        let w = Worker::with_connection(nats, wf.clone(), opts())
            .await
            .unwrap();
        let serving = w.clone();
        tokio::spawn(async move { serving.serve().await.unwrap() });
        workers.push(w);
    }
    let client = connect(&server).await;
    const RUNS: usize = 40;
    start_runs(&client, &wf, "run", RUNS).await;
    let store = reader(connect(&server).await, &wf).await;
    let runs = ended_runs(&store, wf.name(), RUNS).await;
    assert_eq!(runs.len(), RUNS);
    assert!(runs.iter().all(ended_with_done), "every run ends with Done");
    for step in ["begin", "middle", "finish"] {
        assert_eq!(counts.get(step), RUNS, "{step} ran once per run");
    }
    // Every run's outputs are published on the class stream for other clients, the last
    // one (Done) included although the run is released as soon as it ended.
    within(BOUND, "every Done on the class stream", async {
        loop {
            let stored = client
                .replay_control("Relay", &Default::default())
                .await
                .unwrap()
                .collect()
                .await
                .unwrap();
            let done: std::collections::HashSet<String> = stored
                .iter()
                .filter_map(|m| m.parsed_subject().ok())
                .filter(|s| s.event_name() == "Done")
                .map(|s| s.run().run_id().to_string())
                .collect();
            if done.len() == RUNS {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    for w in &workers {
        w.shutdown();
    }
}

/// `on_x(X) -> Y`, `finish(Y, Z) -> Done`: X is delivered three times (twice at once, once
/// after the run moved on), and must execute `on_x` once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_and_delayed_deliveries_execute_each_input_set_once() {
    let server = NatsServer::start();
    let counts = Counts::new(&["begin", "on_x", "finish"]);
    let (c1, c2, c3) = (counts.clone(), counts.clone(), counts.clone());
    let wf = Workflow::builder("Dup")
        .step(Step::new(
            "begin",
            move |_: Required<UserMessageEvent>, _: StepCtx| {
                c1.hit("begin");
                async { Ok::<_, StepError>(()) }
            },
        ))
        .step(Step::new("on_x", move |x: Required<X>, _: StepCtx| {
            c2.hit("on_x");
            async move { Ok::<_, StepError>(Y { n: x.n }) }
        }))
        .step(Step::new(
            "finish",
            move |(y, z): (Required<Y>, Required<Z>), _: StepCtx| {
                c3.hit("finish");
                async move { Ok::<_, StepError>(Done { n: y.n + z.n }) }
            },
        ))
        .build()
        .unwrap();
    let mut workers = Vec::new();
    for _ in 0..2 {
        let w = serve(&server, wf.clone(), opts()).await;
        workers.push(w);
    }
    let client = connect(&server).await;
    publish(&client, &wf, "r1", &UserMessageEvent::new("go")).await;
    let x = publish(&client, &wf, "r1", &X { n: 3 }).await;
    // The same event id published again through the stream's Msg-Id dedup (dropped by
    // JetStream) and twice more without it (stored and delivered: only the engine can drop it).
    let again = client
        .publish_control(&address("Dup", "r1"), &x)
        .await
        .unwrap();
    assert!(
        again.duplicate,
        "JetStream drops a re-publication with the same Msg-Id"
    );
    publish_copy(&client, "Dup", "r1", &x).await;
    within(BOUND, "on_x to run", async {
        while counts.get("on_x") == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    // Delayed: another copy after the run moved on.
    tokio::time::sleep(Duration::from_millis(300)).await;
    publish_copy(&client, "Dup", "r1", &x).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    publish(&client, &wf, "r1", &Z { n: 4 }).await;
    let store = reader(connect(&server).await, &wf).await;
    let runs = ended_runs(&store, "Dup", 1).await;
    assert!(ended_with_done(&runs[0]));
    assert_eq!(counts.get("on_x"), 1, "one input set, one execution");
    assert_eq!(counts.get("finish"), 1);
    assert_eq!(counts.get("begin"), 1);
    for w in &workers {
        w.shutdown();
    }
}

/// The child process of `worker_killed_mid_step_another_finishes_every_run`: a worker of
/// `Relay` serving until killed. Runs only when that test starts it.
#[test]
#[ignore = "child process of worker_killed_mid_step_another_finishes_every_run"]
fn relay_worker_process() {
    let url = std::env::var("SAAP_TEST_WORKER_URL").expect("started by the kill test");
    let sleep_ms: u64 = std::env::var("SAAP_TEST_MIDDLE_MS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let wf = relay(
            Counts::new(&["begin", "middle", "finish"]),
            Duration::from_millis(sleep_ms),
        );
        let w = Worker::connect(&NatsOptions::new(url), wf, opts())
            .await
            .unwrap();
        w.serve().await.unwrap();
    });
}

fn spawn_worker(url: &str, middle_ms: u64) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "relay_worker_process",
            "--nocapture",
        ])
        .env("SAAP_TEST_WORKER_URL", url)
        .env("SAAP_TEST_MIDDLE_MS", middle_ms.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_killed_mid_step_another_finishes_every_run() {
    let server = NatsServer::start();
    let wf = relay(Counts::new(&["begin", "middle", "finish"]), Duration::ZERO);
    let client = connect(&server).await;
    client.ensure_stream(wf.name()).await.unwrap();
    // The first worker's `middle` never finishes in time: it is killed inside it.
    let mut first = spawn_worker(&server.url(), 600_000);
    const RUNS: usize = 10;
    for i in 0..RUNS {
        publish(&client, &wf, &format!("k{i}"), &UserMessageEvent::new("go")).await;
    }
    let store = reader(connect(&server).await, &wf).await;
    // Wait until every run's `middle` has started (begin completed: two journal entries).
    within(BOUND, "every run to reach `middle`", async {
        use saap::backend::Backend;
        loop {
            let runs = store.load_runs("Relay", false).wait().await.unwrap();
            if runs.len() == RUNS && runs.iter().all(|r| r.journal.len() >= 2) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    let mut second = spawn_worker(&server.url(), 0);
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    let runs = ended_runs(&store, "Relay", RUNS).await;
    second.kill().unwrap();
    second.wait().unwrap();
    assert_eq!(runs.len(), RUNS, "0 lost runs");
    for r in &runs {
        assert!(ended_with_done(r), "run {} ended with Done", r.meta.run_id);
        let text = record_text(r);
        assert!(
            text.contains("execution_retried"),
            "run {}: the killed execution ran again: {text}",
            r.meta.run_id
        );
    }
}

/// DESIGN §4.9 on the JetStream store without workers: an engine that stops mid-step (its
/// store halted, as by a crash) is reopened by another engine from the journal, which re-runs
/// the unfinished execution and finishes the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_reopened_on_the_journal_resumes_its_runs() {
    use saap::{Engine, EngineOptions};
    let server = NatsServer::start();
    let counts = Counts::new(&["begin", "middle", "finish"]);
    let wf = relay(counts.clone(), Duration::from_secs(600));
    let first = Engine::new(
        wf.clone(),
        Arc::new(reader(connect(&server).await, &wf).await),
        EngineOptions::default(),
    );
    let run = first.start_run(UserMessageEvent::new("go")).await.unwrap();
    within(BOUND, "middle to start", async {
        while counts.get("middle") == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    first.halt();
    let wf2 = relay(Counts::new(&["begin", "middle", "finish"]), Duration::ZERO);
    let store = reader(connect(&server).await, &wf2).await;
    let (second, recovery) = Engine::open(wf2, Arc::new(store), EngineOptions::default())
        .await
        .unwrap();
    assert_eq!(recovery.resumed_runs, 1);
    assert_eq!(recovery.retried_executions, 1);
    within(BOUND, "the resumed run to end", second.wait_for_end(&run))
        .await
        .unwrap();
    let snap = second.snapshot(&run).unwrap();
    assert!(snap.events().iter().any(|e| e.name == "Done"));
    assert_eq!(
        counts.get("finish"),
        0,
        "the halted engine finished nothing"
    );
}

/// `run --engine nats://…` with a token read from the environment: the worker connects to a
/// server that requires it and serves a run; a worker without it is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_connects_with_credentials_passed_through() {
    use saap::nats::{EngineChoice, EngineConnect, parse_engine};
    let server = NatsServer::start_with(saap_nats::testing::ServerOptions {
        token: Some("tok-123".into()),
        ..Default::default()
    });
    let EngineChoice::Nats(url) = parse_engine(&server.url()).unwrap() else {
        panic!("a nats URL")
    };
    let env = |v: &str| (v == "SAAP_NATS_TOKEN").then(|| "tok-123".to_string());
    let connect_opts = EngineConnect {
        url: url.clone(),
        token_env: Some("SAAP_NATS_TOKEN".into()),
        ..Default::default()
    }
    .options_with(&env)
    .unwrap();
    let counts = Counts::new(&["begin", "middle", "finish"]);
    let wf = relay(counts.clone(), Duration::ZERO);
    let worker = Worker::connect(&connect_opts, wf.clone(), opts())
        .await
        .unwrap();
    let serving = worker.clone();
    tokio::spawn(async move { serving.serve().await.unwrap() });
    let client = SaapNats::connect(&connect_opts).await.unwrap();
    publish(&client, &wf, "c1", &UserMessageEvent::new("go")).await;
    let store = reader(client.clone(), &wf).await;
    ended_runs(&store, "Relay", 1).await;
    assert_eq!(counts.get("finish"), 1);
    let refused = Worker::connect(&NatsOptions::new(url), wf, opts()).await;
    let e = refused.err().expect("no token, no connection").to_string();
    assert!(!e.contains("tok-123"), "{e}");
    worker.shutdown();
}

/// Fencing: once another process took a run over (loaded its journal and wrote to it), the
/// previous owner's next write to that run is refused by the server's sequence check, and
/// its engine stops the run instead of forking the journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_owner_cannot_write_after_a_takeover() {
    use saap::{Engine, EngineOptions};
    let server = NatsServer::start();
    let counts = Counts::new(&["begin", "on_x", "finish"]);
    let wf = {
        let (c1, c2, c3) = (counts.clone(), counts.clone(), counts.clone());
        Workflow::builder("Fence")
            .step(Step::new(
                "begin",
                move |_: Required<UserMessageEvent>, _: StepCtx| {
                    c1.hit("begin");
                    async { Ok::<_, StepError>(()) }
                },
            ))
            .step(Step::new("on_x", move |_: Required<X>, _: StepCtx| {
                c2.hit("on_x");
                async { Ok::<_, StepError>(()) }
            }))
            .step(Step::new("finish", move |_: Required<Z>, _: StepCtx| {
                c3.hit("finish");
                async { Ok::<_, StepError>(Done::default()) }
            }))
            .build()
            .unwrap()
    };
    let old = Engine::new(
        wf.clone(),
        Arc::new(reader(connect(&server).await, &wf).await),
        EngineOptions::default(),
    );
    let run = old.start_run(UserMessageEvent::new("go")).await.unwrap();
    // Another process takes the run over from the journal and writes to it.
    let store = reader(connect(&server).await, &wf).await;
    let stored = store.load_run(&run).await.unwrap().expect("journaled");
    let new = Engine::new(wf.clone(), Arc::new(store), EngineOptions::default());
    new.adopt(stored).await.unwrap();
    new.send(&run, X { n: 1 }).await.unwrap();
    // The old owner does not know and writes too: refused.
    let err = old.send(&run, X { n: 2 }).await.unwrap_err().to_string();
    assert!(err.contains("another worker"), "{err}");
    // The new owner goes on and finishes the run.
    new.send(&run, Z { n: 1 }).await.unwrap();
    within(BOUND, "the run to end", new.wait_for_end(&run))
        .await
        .unwrap();
    let reread = reader(connect(&server).await, &wf).await;
    let journal = reread.load_run(&run).await.unwrap().unwrap();
    assert!(journal.ended && ended_with_done(&journal));
    assert_eq!(
        counts.get("on_x"),
        1,
        "only the new owner's X was dispatched"
    );
}

/// Publishes until acknowledged (bounded), as any producer does across a fail-over
/// (re-publication is deduplicated by the event id).
async fn publish_acked(nats: &SaapNats, wf: &Workflow, run: &str) {
    let env = envelope(wf, &UserMessageEvent::new("go"));
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        match nats.publish_control(&address(wf.name(), run), &env).await {
            Ok(_) => return,
            Err(e) if tokio::time::Instant::now() > deadline => panic!("{run} not acked: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Issue 4's cluster case: a 3-node JetStream cluster on loopback (`sync_interval: always`,
/// everything replicated 3×), two workers, and the node the producer talks to killed with
/// SIGKILL in the middle of the load: every run whose start event was acknowledged ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_node_killed_under_load_loses_no_run() {
    use saap_nats::Settings;
    use saap_nats::testing::{NatsCluster, connect_ready};
    let mut cluster = NatsCluster::start(3);
    let settings = Settings {
        replicas: 3,
        publish_attempts: 3,
        ..Settings::default()
    };
    let counts = Counts::new(&["begin", "middle", "finish"]);
    let wf = relay(counts.clone(), Duration::from_millis(20));
    let cluster_opts = WorkerOptions {
        lease: Duration::from_secs(3),
        ..WorkerOptions::default()
    };
    let mut workers = Vec::new();
    for _ in 0..2 {
        let nats = connect_ready(cluster.urls(), settings.clone()).await;
        // Replicated streams need every peer known to the meta leader: retry (bounded).
        let w = within(BOUND, "a worker on the cluster", async {
            loop {
                match Worker::with_connection(nats.clone(), wf.clone(), cluster_opts.clone()).await
                {
                    Ok(w) => return w,
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        })
        .await;
        let serving = w.clone();
        tokio::spawn(async move {
            let _ = serving.serve().await;
        });
        workers.push(w);
    }
    let client = connect_ready(cluster.urls(), settings.clone()).await;
    const RUNS: usize = 30;
    for i in 0..RUNS / 2 {
        publish_acked(&client, &wf, &format!("c{i}")).await;
    }
    let port = client.client().server_info().port;
    let victim = cluster
        .servers
        .iter()
        .position(|s| s.port() == port)
        .expect("connected to one of the nodes");
    cluster.servers[victim].kill();
    for i in RUNS / 2..RUNS {
        publish_acked(&client, &wf, &format!("c{i}")).await;
    }
    let store = within(BOUND, "a journal reader", async {
        loop {
            match NatsBackend::open(
                client.clone(),
                wf.name(),
                wf.compiled().hierarchy.clone(),
                Default::default(),
            )
            .await
            {
                Ok(s) => return s,
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    })
    .await;
    let runs = within(BOUND, "every run to end", async {
        use saap::backend::Backend;
        loop {
            if let Ok(runs) = store.load_runs("Relay", false).wait().await
                && runs.iter().filter(|r| r.ended).count() >= RUNS
            {
                return runs;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    assert_eq!(runs.len(), RUNS, "0 lost runs");
    assert!(runs.iter().all(ended_with_done));
    for w in &workers {
        w.shutdown();
    }
}

/// Display events shown by a step reach core NATS on the run's display subject (DESIGN §6),
/// after the engine journaled them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn display_events_are_published_on_core_nats() {
    use futures_util::StreamExt;
    let server = NatsServer::start();
    let wf = Workflow::builder("Shows")
        .step(Step::new(
            "think",
            |_: Required<UserMessageEvent>, ctx: StepCtx| async move {
                ctx.display(&saap::ThoughtEvent {
                    thought: "hmm".into(),
                })
                .await
                .map_err(|e| StepError::new(e.to_string()))?;
                Ok::<_, StepError>(Done { n: 1 })
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
    let w = serve(&server, wf.clone(), opts()).await;
    publish(&client, &wf, "s1", &UserMessageEvent::new("go")).await;
    let m = within(BOUND, "the display event", shown.next())
        .await
        .unwrap();
    let subject = saap_protocol::AgentEventSubject::parse(&m.subject).unwrap();
    assert_eq!(subject.run().run_id(), "s1");
    assert_eq!(subject.event_name(), "ThoughtEvent");
    let body: serde_json::Value = serde_json::from_slice(&m.payload).unwrap();
    assert_eq!(body["thought"], "hmm");
    assert_eq!(body["_event_name"], "ThoughtEvent");
    w.shutdown();
}

/// Runs the `relay` agent's CLI with `args` on a thread of its own; it serves until the
/// process ends (the test harness exits after the tests).
fn spawn_cli(wf: &Workflow, args: &[&str]) {
    let wf = wf.clone();
    let args: Vec<String> = std::iter::once("relay")
        .chain(args.iter().copied())
        .map(String::from)
        .collect();
    std::thread::spawn(move || saap::cli::main_with(wf, args));
}

/// The agent CLI: `run --engine nats://HOST:PORT --message …` publishes the start event on
/// the class stream and serves the class as a worker, which runs it to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_cli_runs_as_a_worker_with_engine_nats() {
    let server = NatsServer::start();
    let counts = Counts::new(&["begin", "middle", "finish"]);
    let wf = relay(counts.clone(), Duration::ZERO);
    let url = server.url();
    spawn_cli(&wf, &["run", "--engine", &url, "--message", "go"]);
    let store = reader(connect(&server).await, &wf).await;
    let runs = ended_runs(&store, "Relay", 1).await;
    assert!(ended_with_done(&runs[0]));
    assert_eq!(counts.get("finish"), 1);
}

/// `run --engine nats://… --steps shared --local-slots 0`: the CLI worker runs every body
/// through the class's work queue (items were published) and the run ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_cli_runs_shared_step_bodies_through_the_work_queue() {
    let server = NatsServer::start();
    let counts = Counts::new(&["begin", "middle", "finish"]);
    let wf = relay(counts.clone(), Duration::ZERO);
    let url = server.url();
    let args = [
        "run",
        "--engine",
        &url,
        "--steps",
        "shared",
        "--local-slots",
        "0",
        "--message",
        "go",
    ];
    spawn_cli(&wf, &args);
    let store = reader(connect(&server).await, &wf).await;
    let runs = ended_runs(&store, "Relay", 1).await;
    assert!(ended_with_done(&runs[0]));
    assert_eq!(counts.get("finish"), 1);
    let client = connect(&server).await;
    let mut work = client
        .jetstream()
        .get_stream(saap::nats::work_stream("Relay"))
        .await
        .unwrap();
    // One work item per step of the relay (begin, middle, finish).
    assert_eq!(work.info().await.unwrap().state.last_sequence, 3);
}

/// `--local-slots` without `--steps shared` is refused before anything connects (exit 2).
#[test]
fn the_agent_cli_refuses_local_slots_without_shared_steps() {
    let wf = relay(Counts::new(&["begin", "middle", "finish"]), Duration::ZERO);
    let code = saap::cli::main_with(
        wf,
        [
            "relay",
            "run",
            "--engine",
            "nats://127.0.0.1:1",
            "--local-slots",
            "2",
        ],
    );
    assert_eq!(code, std::process::ExitCode::from(2));
}

/// Protocol services (issue 4 §3): a serving worker answers config RPC for its class
/// (`aihub.rpc.config.agent.{class}.{id}`: the configured agent id is found, another is not)
/// and class discovery addressed to its class or to every class.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_answers_config_rpc_and_class_discovery() {
    let server = NatsServer::start();
    let wf = Workflow::builder("Served")
        .description("answers protocol requests")
        .step(Step::new(
            "begin",
            |_: Required<UserMessageEvent>, _: StepCtx| async { Ok::<_, StepError>(Done { n: 1 }) },
        ))
        .build()
        .unwrap();
    let mut config = serde_json::Map::new();
    config.insert("top_k".into(), 3.into());
    let mut options = opts();
    options
        .agent_configs
        .insert("agent1".into(), config.clone());
    let w = serve(&server, wf.clone(), options).await;
    let client = connect(&server).await;
    // The responders start with `serve`: ask until one answers.
    let found = within(BOUND, "the config RPC responder", async {
        loop {
            match client
                .fetch_agent_config("Served", "agent1", Some(Duration::from_secs(2)))
                .await
            {
                Ok(r) => break r,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    })
    .await;
    assert!(found.found);
    assert_eq!(found.agent_class, "Served");
    assert_eq!(found.agent_id, "agent1");
    assert_eq!(found.config, config);
    let missing = client
        .fetch_agent_config("Served", "nobody", Some(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(!missing.found);
    assert!(missing.config.is_empty());

    let to_class = client
        .discover_classes(Some("Served"), "call1", Some(1), Duration::from_secs(5))
        .await
        .unwrap();
    let to_all = client
        .discover_classes(None, "call2", Some(1), Duration::from_secs(5))
        .await
        .unwrap();
    for found in [&to_class, &to_all] {
        assert_eq!(found.len(), 1, "one worker, one response: {found:?}");
        assert_eq!(found[0].agent_class, "Served");
        let body = serde_json::to_value(&found[0].event).unwrap();
        assert_eq!(body["_event_name"], "AgentClassDiscoveryResponseEvent");
        assert_eq!(body["agent_class"], "Served");
        assert_eq!(body["description"], "answers protocol requests");
        assert_eq!(body["workflow_spec"]["name"], "Served");
    }
    w.shutdown();
}

/// DESIGN §4.7/§4.10 on NATS: events for a run that ended and whose owner released it are
/// journaled as after-stop evidence (never dispatched), not refused — also when several
/// arrive at once at two workers that race to reopen the run — and the run is released again
/// afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_for_a_released_run_are_kept_as_after_stop_evidence() {
    let server = NatsServer::start();
    let counts = Counts::new(&["late"]);
    let hits = counts.clone();
    let wf = Workflow::builder("Afterwards")
        .step(Step::new(
            "begin",
            |_: Required<UserMessageEvent>, _: StepCtx| async { Ok::<_, StepError>(Done { n: 1 }) },
        ))
        .step(Step::new("late", move |_: Required<X>, _: StepCtx| {
            hits.hit("late");
            async { Ok::<_, StepError>(Y { n: 1 }) }
        }))
        .build()
        .unwrap();
    let mut workers = Vec::new();
    for _ in 0..2 {
        let w = serve(&server, wf.clone(), opts()).await;
        workers.push(w);
    }
    let released = || async {
        within(BOUND, "the run to be released", async {
            while workers.iter().any(|w| !w.owned_runs().is_empty()) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
    };
    let client = connect(&server).await;
    publish(&client, &wf, "r1", &UserMessageEvent::new("go")).await;
    let store = reader(connect(&server).await, &wf).await;
    ended_runs(&store, wf.name(), 1).await;
    released().await;
    let mut late = Vec::new();
    for n in 0..4 {
        late.push(publish(&client, &wf, "r1", &X { n }).await.event_id);
    }
    let run = within(BOUND, "the late events in the journal", async {
        loop {
            let run = store.load_run("r1").await.unwrap().unwrap();
            let journaled: Vec<_> = run
                .journal
                .iter()
                .filter_map(|e| match &e.input {
                    saap::backend::StoredInput::Append { event, .. }
                        if late.contains(&event.id) =>
                    {
                        Some(event.id)
                    }
                    _ => None,
                })
                .collect();
            if journaled.len() >= late.len() {
                return run;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let records = record_text(&run);
    assert_eq!(
        records.matches("\"event_after_stop\"").count(),
        late.len(),
        "each late event is after-stop evidence, once: {records}"
    );
    assert_eq!(
        counts.get("late"),
        0,
        "an event after the stop is never dispatched"
    );
    released().await;
    for w in &workers {
        w.shutdown();
    }
}

/// How many control events of each name the class stream holds for run `run`.
async fn stream_counts(nats: &SaapNats, class: &str, run: &str) -> HashMap<String, usize> {
    let stored = nats
        .replay_control(class, &Default::default())
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let mut counts = HashMap::new();
    for s in stored.iter().filter_map(|m| m.parsed_subject().ok()) {
        if s.run().run_id() == run {
            *counts.entry(s.event_name().to_string()).or_insert(0) += 1;
        }
    }
    counts
}

/// A first worker journals `begin`'s output and stops while `middle` runs (its first
/// execution never finishes); `first_publishes: false` simulates a crash between the journal
/// write and the publication. A second worker takes the run over after the lease, and every
/// output of the run (`A` from the first owner, `B` and `Done` from the second) is on the
/// class stream exactly once.
async fn takeover_publishes_each_output_once(first_publishes: bool) {
    let server = NatsServer::start();
    let middles = Arc::new(AtomicUsize::new(0));
    let wf = {
        let m = middles.clone();
        Workflow::builder("Republish")
            .step(Step::new(
                "begin",
                |_: Required<UserMessageEvent>, _: StepCtx| async {
                    Ok::<_, StepError>(A { n: 1 })
                },
            ))
            .step(Step::new("middle", move |a: Required<A>, _: StepCtx| {
                let first = m.fetch_add(1, Ordering::SeqCst) == 0;
                async move {
                    if first {
                        std::future::pending::<()>().await;
                    }
                    Ok::<_, StepError>(B { n: a.n + 1 })
                }
            }))
            .step(Step::new(
                "finish",
                |b: Required<B>, _: StepCtx| async move { Ok::<_, StepError>(Done { n: b.n + 1 }) },
            ))
            .build()
            .unwrap()
    };
    let first = Worker::with_connection(
        connect(&server).await,
        wf.clone(),
        WorkerOptions {
            publish_outputs: first_publishes,
            ..opts()
        },
    )
    .await
    .unwrap();
    let serving = first.clone();
    let first_served = tokio::spawn(async move { serving.serve().await });
    let client = connect(&server).await;
    publish(&client, &wf, "r1", &UserMessageEvent::new("go")).await;
    // `middle` started: `A` is in the journal.
    within(BOUND, "the first worker to start middle", async {
        while middles.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    first.shutdown();
    first_served.await.unwrap().unwrap();
    if first_publishes {
        within(BOUND, "A on the class stream", async {
            while !stream_counts(&client, wf.name(), "r1")
                .await
                .contains_key("A")
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
    } else {
        assert_eq!(stream_counts(&client, wf.name(), "r1").await.get("A"), None);
    }
    let second = serve(&server, wf.clone(), opts()).await;
    let store = reader(connect(&server).await, &wf).await;
    let runs = ended_runs(&store, wf.name(), 1).await;
    assert!(ended_with_done(&runs[0]));
    let counts = within(BOUND, "every output on the class stream", async {
        loop {
            let c = stream_counts(&client, wf.name(), "r1").await;
            if ["A", "B", "Done"].iter().all(|n| c.contains_key(*n)) {
                return c;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    second.shutdown();
    for name in ["A", "B", "Done"] {
        assert_eq!(
            counts[name], 1,
            "{name} once on the class stream: {counts:?}"
        );
    }
    assert_eq!(
        middles.load(Ordering::SeqCst),
        2,
        "middle re-ran on the new owner"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_journaled_but_not_published_is_published_by_the_new_owner() {
    takeover_publishes_each_output_once(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_already_published_is_not_published_again_on_takeover() {
    takeover_publishes_each_output_once(true).await;
}

/// Two workers of one class share the class's discovery queue group: a request addressed to
/// the class gets one response, and a request to every class one response per class (the
/// workers' class and a second class served next to it). Each worker tells its name in its
/// response, and both are seen answering, so both were subscribed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_is_answered_once_per_class_by_two_workers() {
    let server = NatsServer::start();
    let wf = Workflow::builder("Shared")
        .step(Step::new(
            "begin",
            |_: Required<UserMessageEvent>, _: StepCtx| async { Ok::<_, StepError>(Done { n: 1 }) },
        ))
        .build()
        .unwrap();
    let mut workers = Vec::new();
    for name in ["w1", "w2"] {
        let mut options = opts();
        options
            .discovery_fields
            .insert("worker".into(), name.into());
        let w = serve(&server, wf.clone(), options).await;
        workers.push(w);
    }
    let other = connect(&server).await;
    let _other_class = other
        .serve_class_discovery("Other", Default::default())
        .await
        .unwrap();
    let client = connect(&server).await;
    // Both workers' responders are up once each has answered a request (the server picks
    // one member of the group per request, at random).
    let mut seen = std::collections::HashSet::new();
    let mut call = 0;
    within(BOUND, "both workers answering discovery", async {
        while seen.len() < 2 {
            call += 1;
            let found = client
                .discover_classes(
                    Some("Shared"),
                    &format!("warm{call}"),
                    Some(1),
                    Duration::from_secs(2),
                )
                .await
                .unwrap();
            for f in found {
                let body = serde_json::to_value(&f.event).unwrap();
                seen.insert(body["worker"].as_str().unwrap_or_default().to_string());
            }
        }
    })
    .await;
    // Collect without a count (until the window closes), so a second answer would be seen.
    const WINDOW: Duration = Duration::from_millis(700);
    for i in 0..5 {
        let to_class = client
            .discover_classes(Some("Shared"), &format!("one{i}"), None, WINDOW)
            .await
            .unwrap();
        assert_eq!(
            to_class.len(),
            1,
            "one response for the class: {to_class:?}"
        );
        assert_eq!(to_class[0].agent_class, "Shared");
        let to_all = client
            .discover_classes(None, &format!("all{i}"), None, WINDOW)
            .await
            .unwrap();
        let mut classes: Vec<&str> = to_all.iter().map(|f| f.agent_class.as_str()).collect();
        classes.sort_unstable();
        assert_eq!(classes, ["Other", "Shared"], "one response per class");
    }
    for w in &workers {
        w.shutdown();
    }
}

/// Interop (issue 4): a UserMessageEvent in the Python implementation's JSON, published by a
/// plain NATS client on the seeds' subject (random `Nats-Msg-Id`, an `X-AIHub-*` header, as
/// the platform API does), starts a run of a Rust worker; the run ends and its outputs are on
/// the class stream under the same run address, in the wire JSON another client decodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_user_message_from_a_plain_client_starts_a_rust_run() {
    let server = NatsServer::start();
    let counts = Counts::new(&["begin", "middle", "finish"]);
    let wf = relay(counts.clone(), Duration::ZERO);
    let w = serve(&server, wf.clone(), opts()).await;

    let fixture = [
        env!("CARGO_MANIFEST_DIR"),
        "..",
        "saap-protocol",
        "tests",
        "fixtures",
        "python",
        "user_message_event.json",
    ]
    .iter()
    .collect::<std::path::PathBuf>();
    let bytes = std::fs::read(&fixture).unwrap();
    let raw: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let event_id = raw["event_id"].as_str().unwrap().to_owned();
    let subject =
        format!("agent.Relay.wiki.t-65a0.d-65a0.r-65a0.control_event.UserMessageEvent.{event_id}");
    let plain = async_nats::connect(server.url()).await.unwrap();
    let js = async_nats::jetstream::new(plain);
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Nats-Msg-Id", "3f1c2a9e-0b7d-4c55-9a43-1d2e3f4a5b6c");
    headers.insert("X-AIHub-User-Id", "u-1");
    js.publish_with_headers(subject, headers, bytes.into())
        .await
        .unwrap()
        .await
        .unwrap();

    let observer = connect(&server).await;
    let store = reader(observer.clone(), &wf).await;
    let runs = ended_runs(&store, "Relay", 1).await;
    let run = runs.iter().find(|r| &*r.meta.run_id == "r-65a0").unwrap();
    assert_eq!(&*run.meta.thread_id, "t-65a0");
    assert!(ended_with_done(run), "{}", record_text(run));
    assert_eq!(
        (
            counts.get("begin"),
            counts.get("middle"),
            counts.get("finish")
        ),
        (1, 1, 1)
    );
    // The journal holds the Python event as it arrived (its id, its fields).
    let start = serde_json::to_string(&run.journal[0]).unwrap();
    assert!(start.contains(&event_id), "{start}");

    // Every output is on the class stream at the run's address, decodable as wire JSON.
    let on_stream = within(BOUND, "the outputs on the class stream", async {
        loop {
            let c = stream_counts(&observer, "Relay", "r-65a0").await;
            if c.get("Done") == Some(&1) {
                return c;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert_eq!(on_stream.get("A"), Some(&1), "{on_stream:?}");
    assert_eq!(on_stream.get("B"), Some(&1), "{on_stream:?}");
    let stored = observer
        .replay_control("Relay", &Default::default())
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let done = stored
        .iter()
        .find(|m| {
            m.parsed_subject()
                .is_ok_and(|s| s.run().run_id() == "r-65a0" && s.event_name() == "Done")
        })
        .unwrap();
    let s = done.parsed_subject().unwrap();
    assert_eq!(
        (s.run().agent_id(), s.run().thread_id()),
        ("wiki", "t-65a0")
    );
    let body: serde_json::Value = serde_json::from_slice(&done.payload).unwrap();
    assert_eq!(body["_event_name"], "Done");
    assert_eq!(body["n"], 3);
    assert!(body["event_id"].is_string(), "{body}");
    assert!(body["_parent_event_names"].is_array(), "{body}");
    w.shutdown();
}

/// Every step output a worker publishes on the class stream carries the W3C `traceparent`
/// of the execution that returned it: the run's trace (its id starts with the run id) and
/// the execution's span, the ids live and stored trace export give (issue 20 §5).
#[cfg(feature = "otel")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn published_outputs_carry_the_traceparent_of_their_execution() {
    use saap::otel::{SpanId, TraceId, parse_traceparent, traceparent};
    let server = NatsServer::start();
    let wf = relay(Counts::new(&["begin", "middle", "finish"]), Duration::ZERO);
    let w = Worker::with_connection(connect(&server).await, wf.clone(), opts())
        .await
        .unwrap();
    let serving = w.clone();
    tokio::spawn(async move { serving.serve().await.unwrap() });
    let client = connect(&server).await;
    start_runs(&client, &wf, "traced", 1).await;
    let run = "traced0";
    let js = client.jetstream();
    let stream = js
        .get_stream(saap_protocol::subject::stream_name("Relay").unwrap())
        .await
        .unwrap();
    // begin (execution 0) returns A, middle (1) B, finish (2) Done.
    for (event, execution) in [("A", 0), ("B", 1), ("Done", 2)] {
        let subject = within(BOUND, "the output on the class stream", async {
            loop {
                let stored = client
                    .replay_control("Relay", &Default::default())
                    .await
                    .unwrap()
                    .collect()
                    .await
                    .unwrap();
                if let Some(s) = stored.iter().find(|m| {
                    m.parsed_subject()
                        .is_ok_and(|s| s.event_name() == event && s.run().run_id() == run)
                }) {
                    return s.subject.clone();
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        let msg = stream
            .get_last_raw_message_by_subject(&subject)
            .await
            .unwrap();
        let header = msg
            .headers
            .get(saap_protocol::subject::TRACEPARENT_HEADER)
            .unwrap_or_else(|| panic!("{event} has no traceparent: {:?}", msg.headers))
            .as_str()
            .to_string();
        let want = traceparent(
            TraceId::of_run(run),
            SpanId::of_execution(run, execution, 1),
        );
        assert_eq!(header, want, "{event}");
        assert_eq!(
            parse_traceparent(&header),
            Some((
                TraceId::of_run(run),
                SpanId::of_execution(run, execution, 1)
            ))
        );
    }
    w.shutdown();
}

/// A resume message (`<agent> resume --engine nats://…`, issue 21 §5) is applied by the run's
/// owner as a grant the core decides; a copy of it delivered again (the stream stores copies
/// published without Msg-Id) finds the pause it resumed gone and grants nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_delivered_twice_grants_once() {
    use saap::nats::{RUN_RESUME_REQUEST_EVENT, ResumeRequest};
    let server = NatsServer::start();
    let counts = Counts::new(&["begin", "middle", "finish"]);
    let wf = relay(counts.clone(), Duration::ZERO);
    let budgeted = WorkerOptions {
        engine: saap::EngineOptions {
            run_budget: saap::RunBudget {
                max_executions: Some(1),
                ..saap::RunBudget::default()
            },
            ..saap::EngineOptions::default()
        },
        ..opts()
    };
    let w = serve(&server, wf.clone(), budgeted).await;
    let client = connect(&server).await;
    publish(&client, &wf, "r1", &UserMessageEvent::new("go")).await;
    let grants = |w: &Worker| {
        w.engine()
            .snapshot("r1")
            .and_then(|s| s.run.budget().map(|b| (b.grants, s.run.budget_spent())))
    };
    let paused_after = |n: u32| {
        let w = w.clone();
        async move {
            within(BOUND, "the run to pause", async {
                while grants(&w) != Some((n, true)) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
            .await
        }
    };
    paused_after(1).await;
    assert_eq!(counts.get("middle"), 0, "held, not run");

    let mut hierarchy = wf.compiled().hierarchy.clone();
    hierarchy
        .register(RUN_RESUME_REQUEST_EVENT, &["ControlEvent"])
        .unwrap();
    let resume = |seen: u32, executions: u32| {
        let mut env = EventEnvelope::new(
            &hierarchy,
            RUN_RESUME_REQUEST_EVENT,
            saap_nats::ids::fresh_event_id(),
            saap_nats::ids::now_ns(),
        )
        .unwrap();
        let req = ResumeRequest::new(
            saap::Raise {
                executions: Some(executions),
                ..saap::Raise::default()
            },
            seen,
        );
        for (k, v) in serde_json::to_value(req).unwrap().as_object().unwrap() {
            env = env.with_field(k, v.clone());
        }
        env
    };
    let first = resume(1, 1);
    client
        .publish_control(&address("Relay", "r1"), &first)
        .await
        .unwrap();
    // `middle` runs, `finish` is held: paused again after the second grant.
    paused_after(2).await;
    assert_eq!(counts.get("middle"), 1);
    publish_copy(&client, "Relay", "r1", &first).await;
    // A resume of this pause, of 5, goes through the run's lane after the copy: had the copy
    // granted its 1 (finish runs, the run ends), this one would find the run ended.
    client
        .publish_control(&address("Relay", "r1"), &resume(2, 5))
        .await
        .unwrap();
    let store = reader(connect(&server).await, &wf).await;
    let runs = ended_runs(&store, "Relay", 1).await;
    assert!(ended_with_done(&runs[0]));
    // The journal: the start's grant, then one entry per resume granted: 1, then 5.
    let resumes: Vec<Option<u32>> = runs[0]
        .journal
        .iter()
        .filter_map(|e| match e.input {
            saap::backend::StoredInput::Budget(g) => Some(g.executions),
            _ => None,
        })
        .collect();
    assert_eq!(resumes, [Some(1), Some(5)], "the copy granted nothing");
    assert_eq!(counts.get("finish"), 1);
    w.shutdown();
}

/// The same cancellation when the worker that took the start event left an owner record
/// before it died (it claimed the run, then died before journaling the start): the worker
/// that gets the cancellation takes the run over, finds no journal, begins the run from the
/// start event waiting in the class stream and cancels it. Before, it gave the cancellation
/// back as "run not begun yet" until its deliveries ran out (~1.5 s), and the run began
/// when the start came back after the ack wait and waited forever (a lost cancellation of
/// `nats_timer_chaos.rs`, seed 3036784270435795875).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_for_a_run_taken_over_before_its_start_was_journaled_begins_and_cancels_it() {
    let server = NatsServer::start();
    let wf = Workflow::builder("Orphaned")
        .step(Step::new(
            "begin",
            |_: Required<UserMessageEvent>, _: StepCtx| async { Ok::<_, StepError>(A { n: 1 }) },
        ))
        .step(Step::new(
            "finish",
            |(_, _): (Required<A>, Required<X>), _: StepCtx| async {
                Ok::<_, StepError>(Done { n: 1 })
            },
        ))
        .build()
        .unwrap();
    let client = connect(&server).await;
    client.ensure_stream(wf.name()).await.unwrap();
    let run = "0123456789abcdef01234568";
    // A worker that takes the start event, claims the run and dies before journaling it.
    {
        let mut dying = client.control_consumer(wf.name()).await.unwrap();
        publish(&client, &wf, run, &UserMessageEvent::new("go")).await;
        let start = within(BOUND, "the start delivered", dying.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            start.parsed_subject().unwrap().event_name(),
            "UserMessageEvent"
        );
        let owners = client
            .jetstream()
            .create_key_value(async_nats::jetstream::kv::Config {
                bucket: "saap_Orphaned_steps".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        let a = start.parsed_subject().unwrap();
        let a = a.run();
        let record = serde_json::json!({
            "w": "w-dead",
            "a": [a.agent_id(), a.thread_id(), a.display_id()],
        });
        owners
            .put(format!("run.{run}"), record.to_string().into())
            .await
            .unwrap();
    }
    let worker = serve(&server, wf.clone(), opts()).await;
    common::nats::cancel(&client, &wf, run).await;
    let store = reader(connect(&server).await, &wf).await;
    let runs = ended_runs(&store, wf.name(), 1).await;
    let records = record_text(&runs[0]);
    assert!(
        records.contains("\"by\":\"exception\""),
        "ended by its cancellation: {records}"
    );
    worker.shutdown();
}

/// A run with no journal yet (issue 21 §1): `queued` while its start event waits in the
/// class stream with no worker to take it, `claimed` once a worker's owner record names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_no_worker_took_is_queued_and_one_a_worker_owns_is_claimed() {
    use saap::nats::{Unbegun, unbegun_run};
    let server = NatsServer::start();
    let counts = Counts::new(&["begin", "middle", "finish"]);
    let wf = relay(counts, Duration::ZERO);
    let client = connect(&server).await;
    client.ensure_stream(wf.name()).await.unwrap();
    let run = "0123456789abcdef01234567";
    assert_eq!(unbegun_run(&client, "Relay", run).await.unwrap(), None);
    let start = publish(&client, &wf, run, &UserMessageEvent::new("go")).await;
    match unbegun_run(&client, "Relay", run).await.unwrap() {
        Some(Unbegun::Queued {
            event_name,
            sequence,
        }) => {
            assert_eq!(event_name, "UserMessageEvent");
            assert!(sequence >= 1);
        }
        other => panic!("queued, not {other:?}"),
    }
    let _ = start;
    // A worker's owner record (as a worker writes it when it claims a run).
    let owners = client
        .jetstream()
        .create_key_value(async_nats::jetstream::kv::Config {
            bucket: "saap_Relay_steps".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    owners
        .put(
            format!("run.{run}"),
            r#"{"w":"w1","a":["agent1","t1","d1"]}"#.into(),
        )
        .await
        .unwrap();
    assert_eq!(
        unbegun_run(&client, "Relay", run).await.unwrap(),
        Some(Unbegun::Claimed {
            worker: "w1".into()
        })
    );
}

/// A cancellation that overtakes its run's start event: the start went to a worker that
/// died before journaling it (its delivery comes back only after the 30 s ack wait), so the
/// run has no journal when the cancellation arrives. The worker that gets the cancellation
/// begins the run from the start event waiting in the class stream and cancels it; before,
/// it refused the cancellation after a few deliveries as one for a run that never began,
/// and the run began later and waited forever (the lost cancellations of
/// `nats_timer_chaos.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_that_overtakes_an_unjournaled_start_begins_and_cancels_the_run() {
    let server = NatsServer::start();
    let wf = Workflow::builder("Overtaken")
        .step(Step::new(
            "begin",
            |_: Required<UserMessageEvent>, _: StepCtx| async { Ok::<_, StepError>(A { n: 1 }) },
        ))
        .step(Step::new(
            "finish",
            |(_, _): (Required<A>, Required<X>), _: StepCtx| async {
                Ok::<_, StepError>(Done { n: 1 })
            },
        ))
        .build()
        .unwrap();
    let client = connect(&server).await;
    client.ensure_stream(wf.name()).await.unwrap();
    // A worker that takes the start event and dies before journaling it.
    {
        let mut dying = client.control_consumer(wf.name()).await.unwrap();
        publish(&client, &wf, "r1", &UserMessageEvent::new("go")).await;
        let start = within(BOUND, "the start delivered", dying.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            start.parsed_subject().unwrap().event_name(),
            "UserMessageEvent"
        );
    }
    let worker = serve(&server, wf.clone(), opts()).await;
    common::nats::cancel(&client, &wf, "r1").await;
    let store = reader(connect(&server).await, &wf).await;
    let runs = ended_runs(&store, wf.name(), 1).await;
    let records = record_text(&runs[0]);
    assert!(
        records.contains("\"by\":\"exception\""),
        "ended by its cancellation: {records}"
    );
    worker.shutdown();
}
