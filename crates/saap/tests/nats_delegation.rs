//! Delegation across agent classes on NATS (DESIGN §8, issue 21 §3): a run of class `Boss`
//! delegates to class `Researcher`, whose workers run in other processes (here: other
//! workers on other connections to one real nats-server). The child is started by the
//! request on the researcher's class stream, its end comes back on the boss's, a cancel of
//! the boss reaches the child, a class nobody serves answers with an exception, and a child
//! whose worker is replaced midway still reports its end.
#![allow(clippy::unwrap_used)]

mod common;

use common::agents::{Go, boss, researcher};
use common::nats::{publish, reader, serve};
use saap::nats::{NatsBackend, Worker, WorkerOptions};
use saap::{EngineOptions, UserMessageEvent};
use saap_dispatch::run::progress::Progress;
use saap_nats::testing::{NatsServer, connect, within};
use std::time::Duration;

const BOUND: Duration = Duration::from_secs(60);

fn opts() -> WorkerOptions {
    WorkerOptions {
        lease: Duration::from_millis(1500),
        engine: EngineOptions::default(),
        ..WorkerOptions::default()
    }
}

/// The boss's and the researcher's workers, each on its own connection.
async fn workers(server: &NatsServer, class: &'static str) -> (Worker, Worker) {
    let child = serve(server, researcher(), opts()).await;
    let parent = serve(server, boss(class), opts()).await;
    (parent, child)
}

/// Waits until run `run` has ended in its class's journal; returns it.
async fn ended(store: &NatsBackend, run: &str) -> saap::backend::StoredRun {
    within(BOUND, "the run to end", async {
        loop {
            if let Some(r) = store.load_run(run).await.unwrap()
                && r.ended
            {
                return r;
            }
            // Each read is a consumer on the journal stream: not too often.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
}

/// The fields of the event that ended stored run `run` (its last output or event).
fn report_text(run: &saap::backend::StoredRun) -> String {
    run.journal
        .iter()
        .rev()
        .find_map(|e| match &e.input {
            saap::backend::StoredInput::Complete {
                outputs: Some(outs),
                ..
            } => outs
                .iter()
                .find(|o| o.name == "Report")
                .map(|o| o.payload["text"].as_str().unwrap_or_default().to_string()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The child run a parent's journal started: its request's event id.
fn child_of(run: &saap::backend::StoredRun) -> String {
    run.journal
        .iter()
        .find_map(|e| match &e.input {
            saap::backend::StoredInput::Complete { children, .. } => {
                children.first().map(|c| c.request.to_string())
            }
            _ => None,
        })
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_on_another_class_answers_its_parent() {
    let server = NatsServer::start();
    let (parent, child) = workers(&server, "Researcher").await;
    let client = connect(&server).await;
    let wf = boss("Researcher");
    publish(&client, &wf, "r1", &UserMessageEvent::new("owls")).await;
    let bosses = reader(connect(&server).await, &wf).await;
    let run = ended(&bosses, "r1").await;
    assert_eq!(report_text(&run), "about owls: 42");
    // The child ran on the researcher's workers, linked to its parent.
    let researchers = reader(connect(&server).await, &researcher()).await;
    let child_run = ended(&researchers, &child_of(&run)).await;
    let by = child_run.meta.parent.clone().unwrap();
    assert_eq!(
        (by.run_id.as_str(), by.agent_class.as_str()),
        ("r1", "Boss")
    );
    let answered: Vec<&str> = child_run
        .journal
        .iter()
        .filter_map(|e| match &e.input {
            saap::backend::StoredInput::Complete {
                outputs: Some(outs),
                ..
            } => outs.first().map(|o| o.name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(answered, ["Answer"]);
    // The boss's store reads the child from the researcher's journal: `runs --tree` on NATS.
    use saap::backend::Backend;
    let read = bosses
        .read_run("Researcher", &child_of(&run))
        .wait()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.meta.workflow, "Researcher");
    let url = server.url();
    let tree = tokio::task::spawn_blocking(move || {
        let args = ["boss", "runs", "--tree", "r1", "--engine", &url, "--json"];
        saap::cli::main_with(boss("Researcher"), args)
    })
    .await
    .unwrap();
    assert_eq!(
        format!("{tree:?}"),
        format!("{:?}", std::process::ExitCode::SUCCESS)
    );
    parent.shutdown();
    child.shutdown();
}

/// The report of boss run `r1` that asked `message` of agent class `class`, once it ended.
async fn boss_report(class: &'static str, message: &str) -> String {
    let server = NatsServer::start();
    let (parent, child) = workers(&server, class).await;
    let client = connect(&server).await;
    let wf = boss(class);
    publish(&client, &wf, "r1", &UserMessageEvent::new(message)).await;
    let bosses = reader(connect(&server).await, &wf).await;
    let run = ended(&bosses, "r1").await;
    parent.shutdown();
    child.shutdown();
    report_text(&run)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_child_reaches_its_parent_as_an_exception() {
    let text = boss_report("Researcher", "fail").await;
    assert!(text.starts_with("failed: "), "{text}");
    assert!(text.contains("no sources found"), "{text}");
}

/// A class no worker ever served has no stream: the parent gets an exception saying so,
/// instead of waiting for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_class_nobody_serves_answers_with_an_exception() {
    let text = boss_report("Nobody", "owls").await;
    assert!(text.contains("no worker of agent class `Nobody`"), "{text}");
}

/// Cancelling the parent cancels its child on the other class's workers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_parent_cancels_its_child_on_another_class() {
    let server = NatsServer::start();
    let (parent, child) = workers(&server, "Researcher").await;
    let client = connect(&server).await;
    let wf = boss("Researcher");
    publish(&client, &wf, "r1", &UserMessageEvent::new("wait")).await;
    // The child waits for `Go`; the parent for the child.
    let child_id = child_started(&parent, &child).await;
    assert!(matches!(
        parent.engine().snapshot("r1").unwrap().run.progress(),
        Progress::Waiting { .. }
    ));
    parent.engine().cancel("r1", "not needed").await.unwrap();
    let researchers = reader(connect(&server).await, &researcher()).await;
    let child_run = ended(&researchers, &child_id).await;
    let cancelled = child_run.journal.iter().any(|e| match &e.input {
        saap::backend::StoredInput::Append { event, .. } => event.name == "RunCancelledEvent",
        _ => false,
    });
    assert!(
        cancelled,
        "the child was cancelled: {:?}",
        child_run.journal
    );
    parent.shutdown();
    child.shutdown();
}

/// The child's worker is replaced while the child waits: the new one adopts the child from
/// its journal, links it to its parent again, and the child's end still reaches the parent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_taken_over_by_another_worker_still_reports_its_end() {
    let server = NatsServer::start();
    let (parent, child) = workers(&server, "Researcher").await;
    let client = connect(&server).await;
    let wf = boss("Researcher");
    publish(&client, &wf, "r1", &UserMessageEvent::new("wait")).await;
    let child_id = child_started(&parent, &child).await;
    // The first researcher worker stops (its lease runs out); a second one takes over.
    child.shutdown();
    drop(child);
    let second = serve(&server, researcher(), opts()).await;
    // `Go` for the child: delivered once the second worker owns it.
    let go = common::nats::envelope(&researcher(), &Go { n: 1 });
    client
        .publish_control(&address_of(&child_id), &go)
        .await
        .unwrap();
    let bosses = reader(connect(&server).await, &wf).await;
    let run = ended(&bosses, "r1").await;
    assert_eq!(report_text(&run), "after waiting");
    parent.shutdown();
    second.shutdown();
}

/// The run id of boss run `r1`'s child, once the child's worker holds it.
async fn child_started(parent: &Worker, child: &Worker) -> String {
    within(BOUND, "the child to start", async {
        loop {
            if let Some(s) = parent.engine().snapshot("r1")
                && let Some(c) = s.run.children().first()
                && child.engine().has_run(&c.request.to_string())
            {
                return c.request.to_string();
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    })
    .await
}

/// An address for child run `run` of the researcher's class (its owner routes by run id).
fn address_of(run: &str) -> saap_protocol::RunAddress {
    saap_protocol::RunAddress::new("Researcher", "agent1", run, run, run).unwrap()
}
