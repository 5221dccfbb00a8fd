//! The dead-worker sweep reads what changed, not every owner record: with live runs owned by
//! live workers, sweeps read no owner record at all (the old sweep read every one each
//! lease/3), and a stopped worker's runs are still taken over by the other worker and
//! finish there. (The kill -9 takeover tests are in `nats_worker.rs`.)
#![allow(clippy::unwrap_used)]

mod common;

use common::nats::{publish, start_runs};

use saap::nats::{Worker, WorkerOptions};
use saap::{Required, Step, StepCtx, StepError, UserMessageEvent, Workflow};
use saap_nats::testing::{NatsServer, connect, within};
use std::time::Duration;

event!(Answer, "ControlEvent");
event!(Done, "StopEvent");

const BOUND: Duration = Duration::from_secs(90);
const LEASE: Duration = Duration::from_millis(900);
const RUNS: usize = 20;

/// A run waits after its start for an `Answer`, then stops.
fn held() -> Workflow {
    Workflow::builder("Held")
        .step(Step::new(
            "ask",
            |_: Required<UserMessageEvent>, _: StepCtx| async { Ok::<_, StepError>(()) },
        ))
        .step(Step::new(
            "answered",
            |a: Required<Answer>, _: StepCtx| async move { Ok::<_, StepError>(Done { n: a.n }) },
        ))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweeps_read_no_owner_record_while_owners_live_and_still_take_over_a_stopped_worker() {
    let server = NatsServer::start();
    let wf = held();
    let opts = || WorkerOptions {
        lease: LEASE,
        ..WorkerOptions::default()
    };
    let mut workers = Vec::new();
    for _ in 0..2 {
        let w = Worker::with_connection(connect(&server).await, wf.clone(), opts())
            .await
            .unwrap();
        let serving = w.clone();
        tokio::spawn(async move { serving.serve().await.unwrap() });
        workers.push(w);
    }
    let client = connect(&server).await;
    start_runs(&client, &wf, "run", RUNS).await;
    let owned = |ws: &[Worker]| ws.iter().map(|w| w.owned_runs().len()).sum::<usize>();
    within(BOUND, "every run owned", async {
        while owned(&workers) < RUNS {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    // Ten leases: thirty sweeps per worker over 20 live runs.
    let before: Vec<u64> = workers.iter().map(Worker::sweep_reads).collect();
    tokio::time::sleep(LEASE * 10).await;
    let after: Vec<u64> = workers.iter().map(Worker::sweep_reads).collect();
    assert_eq!(
        before, after,
        "no owner record is read while every owner beats (the old sweep read {} per sweep)",
        RUNS
    );

    // Stop the worker that owns more runs; the other takes them over and finishes them all.
    let (stopped, other) = if workers[0].owned_runs().len() >= workers[1].owned_runs().len() {
        (workers[0].clone(), workers[1].clone())
    } else {
        (workers[1].clone(), workers[0].clone())
    };
    let moved = stopped.owned_runs().len();
    assert!(moved > 0);
    stopped.shutdown();
    within(BOUND, "the stopped worker's runs taken over", async {
        while other.owned_runs().len() < RUNS {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let reads = other.sweep_reads() - after[if other.id() == workers[0].id() { 0 } else { 1 }];
    assert!(
        reads >= moved as u64,
        "each taken-over run's owner record was read: {reads} < {moved}"
    );
    for i in 0..RUNS {
        publish(&client, &wf, &format!("run{i}"), &Answer { n: i as u32 }).await;
    }
    within(BOUND, "every run to end on the remaining worker", async {
        while !other.owned_runs().is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    other.shutdown();
}
