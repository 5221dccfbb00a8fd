//! Helpers of the tests that run workers on a real nats-server: addressing a run, publishing an
//! event as any client does, and reading the journals the workers wrote.

use saap::Workflow;
use saap::backend::{Backend, StoredRun};
use saap::event::to_payload;
use saap::nats::{NatsBackend, Worker, WorkerOptions};
use saap_nats::SaapNats;
use saap_nats::testing::{NatsServer, connect};
use saap_protocol::{EventEnvelope, RunAddress};
use std::time::Duration;

/// Bounds every wait on the workers (a hung test fails; nothing is asserted about time).
pub const NATS_BOUND: Duration = Duration::from_secs(90);

/// The address of run `run` of `class` (agent `agent1`, thread `t{run}`).
pub fn address(class: &str, run: &str) -> RunAddress {
    RunAddress::new(class, "agent1", &format!("t{run}"), "d1", run).unwrap()
}

/// `ev` as a wire envelope with a fresh id.
pub fn envelope<T: saap::Event>(wf: &Workflow, ev: &T) -> EventEnvelope {
    let mut env = EventEnvelope::new(
        &wf.compiled().hierarchy,
        T::NAME,
        saap_nats::ids::fresh_event_id(),
        saap_nats::ids::now_ns(),
    )
    .unwrap();
    if let serde_json::Value::Object(fields) = &*to_payload(ev).unwrap() {
        for (k, v) in fields {
            env = env.with_field(k, v.clone());
        }
    }
    env
}

/// Publishes `ev` to run `run` of `class` the way any client does (JetStream, Msg-Id = event id).
pub async fn publish_to<T: saap::Event>(
    nats: &SaapNats,
    class: &str,
    wf: &Workflow,
    run: &str,
    ev: &T,
) -> EventEnvelope {
    let env = envelope(wf, ev);
    nats.publish_control(&address(class, run), &env)
        .await
        .unwrap();
    env
}

/// Publishes `ev` to run `run` of the workflow's class the way any client does.
pub async fn publish<T: saap::Event>(
    nats: &SaapNats,
    wf: &Workflow,
    run: &str,
    ev: &T,
) -> EventEnvelope {
    publish_to(nats, wf.name(), wf, run, ev).await
}

/// Publishes a `RunCancelledEvent` to run `run` as `<agent> cancel` does (the workflow need
/// not declare it: its lineage comes from the protocol).
#[allow(dead_code)]
pub async fn cancel(client: &SaapNats, wf: &Workflow, run: &str) {
    use saap::Event;
    use saap_protocol::hierarchy::names::{EXCEPTION_EVENT, RUN_CANCELLED_EVENT};
    let mut hierarchy = wf.compiled().hierarchy.clone();
    if !hierarchy.contains(RUN_CANCELLED_EVENT) {
        hierarchy
            .register(RUN_CANCELLED_EVENT, &[EXCEPTION_EVENT])
            .unwrap();
    }
    let mut env = EventEnvelope::new(
        &hierarchy,
        saap::RunCancelledEvent::NAME,
        saap_nats::ids::fresh_event_id(),
        saap_nats::ids::now_ns(),
    )
    .unwrap();
    let fields = serde_json::to_value(saap::RunCancelledEvent::new("chaos")).unwrap();
    if let serde_json::Value::Object(fields) = fields {
        for (k, v) in fields {
            env = env.with_field(&k, v);
        }
    }
    client
        .publish_control(&address(wf.name(), run), &env)
        .await
        .unwrap();
}

/// Starts runs `{prefix}0` … `{prefix}{n - 1}` of the workflow's class with a message.
pub async fn start_runs(nats: &SaapNats, wf: &Workflow, prefix: &str, n: usize) {
    for i in 0..n {
        publish(
            nats,
            wf,
            &format!("{prefix}{i}"),
            &saap::UserMessageEvent::new("go"),
        )
        .await;
    }
}

/// A store handle of the test itself, to read the journals the workers wrote.
pub async fn reader(nats: SaapNats, wf: &Workflow) -> NatsBackend {
    NatsBackend::open(
        nats,
        wf.name(),
        wf.compiled().hierarchy.clone(),
        Default::default(),
    )
    .await
    .unwrap()
}

/// Every stored run of workflow `wf`, ended ones included.
pub async fn load(store: &NatsBackend, wf: &str) -> Vec<StoredRun> {
    store.load_runs(wf, false).wait().await.unwrap()
}

/// Waits until `n` runs of the workflow have ended in the journal; returns them. Giving up,
/// it names the runs that had not ended and their last records (a stuck run is then told
/// from a slow machine).
pub async fn ended_runs(store: &NatsBackend, wf: &str, n: usize) -> Vec<StoredRun> {
    let last: std::sync::Mutex<Vec<StoredRun>> = Default::default();
    let waited = tokio::time::timeout(NATS_BOUND, async {
        loop {
            let runs = load(store, wf).await;
            if runs.iter().filter(|r| r.ended).count() >= n {
                return runs;
            }
            *last.lock().unwrap() = runs;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    waited.unwrap_or_else(|_| {
        let runs = last.lock().unwrap();
        let live: Vec<String> = runs
            .iter()
            .filter(|r| !r.ended)
            .take(10)
            .map(|r| {
                let tail = r.records.len().saturating_sub(3);
                format!(
                    "{} ({} journal entries; last records {})",
                    r.meta.run_id,
                    r.journal.len(),
                    serde_json::to_string(&r.records[tail..]).unwrap()
                )
            })
            .collect();
        panic!(
            "gave up waiting for every run to end after {NATS_BOUND:?}: {} of {n} ended ({} stored); not ended:\n  {}",
            runs.iter().filter(|r| r.ended).count(),
            runs.len(),
            live.join("\n  ")
        )
    })
}

/// A run's decision records as one JSON text (for failure messages and substring checks).
pub fn record_text(run: &StoredRun) -> String {
    serde_json::to_string(&run.records).unwrap()
}

/// A worker of `wf` on its own connection, serving in the background until shut down.
pub async fn serve(server: &NatsServer, wf: Workflow, opts: WorkerOptions) -> Worker {
    let w = Worker::with_connection(connect(server).await, wf, opts)
        .await
        .unwrap();
    let serving = w.clone();
    tokio::spawn(async move { serving.serve().await.unwrap() });
    w
}

/// A worker process (this test binary running the ignored test `test`, which serves on the
/// nats-server at `SAAP_CHAOS_NATS`), killed (SIGKILL) when dropped: a test that fails
/// midway leaves none behind (one left serving could reach a later test's nats-server on a
/// reused port).
pub struct WorkerProcess(pub std::process::Child);

impl WorkerProcess {
    /// Starts `test` with `SAAP_CHAOS_NATS` = `url` and the variables of `env`.
    pub fn spawn(test: &str, url: &str, env: &[(&str, &str)]) -> WorkerProcess {
        let mut c = super::kill::test_child(test);
        c.env("SAAP_CHAOS_NATS", url);
        for (k, v) in env {
            c.env(k, v);
        }
        WorkerProcess(c.spawn().unwrap())
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill(); // SIGKILL on Unix
        let _ = self.0.wait();
    }
}
