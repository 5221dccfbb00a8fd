//! kill -9 chaos across timer firings and cancellations on NATS (issue 21 §7, the
//! distributed engine): worker processes of a class whose first step sets a timer of a few
//! milliseconds and whose second step takes the timer's event are SIGKILLed at random points
//! — before a timer is due, while it fires, between its firing and the step it wakes, while a
//! cancellation is applied — and the next worker takes their runs over when their lease ends
//! (a timer due meanwhile fires at takeover). Every third run waits an hour for its timer and
//! is cancelled after the first kill. Verified from the JetStream journal: every run ended
//! once; the others with their timer fired exactly once and their second step started once;
//! the cancelled ones by their cancellation, their timer dropped, never fired. 0 lost
//! wake-ups, 0 double deliveries, 0 lost cancellations. Bounded (10 kill cycles); no timed
//! assertions.
#![allow(clippy::unwrap_used)]

mod common;

use common::nats::{WorkerProcess, cancel, ended_runs, publish, reader};
use saap::nats::{NatsOptions, Worker, WorkerOptions};
use saap::{Delayed, Required, Step, StepCtx, StepError, UserMessageEvent, Workflow};
use saap_nats::testing::{NatsServer, connect};
use std::time::{Duration, Instant};

event!(Asked, "ControlEvent");
event!(Fired, "ControlEvent");
event!(Done, "StopEvent");

const RUNS: usize = 40;
const CYCLES: usize = 10;
/// Short, so that the next worker takes a killed one's runs over soon.
const LEASE: Duration = Duration::from_millis(1500);

/// `ask` sets a timer of 1–204 ms from the message's length (runs stay live across kills),
/// or of an hour for a message longer than 40 (a run only a cancellation ends); `done` takes
/// its event.
fn workflow() -> Workflow {
    Workflow::builder("NatsTimerChaos")
        .step(Step::new(
            "ask",
            |q: Required<UserMessageEvent>, _: StepCtx| async move {
                let n = q.message.len() as u32;
                let delay = if n > 40 {
                    Duration::from_secs(3600)
                } else {
                    Duration::from_millis(1 + 7 * u64::from(n % 30))
                };
                Ok::<_, StepError>((Asked { n }, Delayed::after(delay, Fired { n })))
            },
        ))
        .step(Step::new(
            "done",
            |(a, f): (Required<Asked>, Required<Fired>), _: StepCtx| async move {
                Ok::<_, StepError>(Done { n: a.n + f.n })
            },
        ))
        .build()
        .unwrap()
}

/// The child: a worker of the class, serving until it is killed.
#[test]
#[ignore = "run by kill_9_of_workers_across_timers_and_cancels_loses_no_wake_up_and_fires_once"]
fn nats_timer_worker_process() {
    let Ok(url) = std::env::var("SAAP_CHAOS_NATS") else {
        return;
    };
    common::kill::runtime().block_on(async {
        let opts = WorkerOptions {
            lease: LEASE,
            ..WorkerOptions::default()
        };
        let w = Worker::connect(&NatsOptions::new(url), workflow(), opts)
            .await
            .unwrap();
        w.serve().await.unwrap();
    });
}

fn spawn_worker(url: &str) -> WorkerProcess {
    WorkerProcess::spawn("nats_timer_worker_process", url, &[])
}

/// The journal's last sequence number over every run of the class (grows with each entry a
/// worker writes; read message by message, not through a consumer: cheap to poll).
async fn journal_seq(store: &saap::nats::NatsBackend) -> u64 {
    let mut last = 0;
    for i in 0..RUNS {
        if let Some(seq) = store.last_journal_seq(&format!("t{i}")).await.unwrap() {
            last = last.max(seq);
        }
    }
    last
}

/// How many of a run's records are of kind `kind` (and, for executions, of step `step`).
fn count(run: &saap::backend::StoredRun, kind: &str, step: Option<u64>) -> usize {
    run.records
        .iter()
        .filter(|r| r["record"] == kind && step.is_none_or(|s| r["step"] == s))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_workers_across_timers_and_cancels_loses_no_wake_up_and_fires_once() {
    let seed = common::kill::seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    let server = NatsServer::start();
    let wf = workflow();
    let client = connect(&server).await;
    client.ensure_stream(wf.name()).await.unwrap();
    for i in 0..RUNS {
        // Every third run waits an hour for its timer: only its cancellation ends it.
        let len = if i.is_multiple_of(3) { 41 } else { i % 40 + 1 };
        let start = UserMessageEvent::new("x".repeat(len));
        publish(&client, &wf, &format!("t{i}"), &start).await;
    }
    let store = reader(connect(&server).await, &wf).await;
    let mut killed = 0;
    for cycle in 0..CYCLES {
        if cycle == 1 {
            // After the first kill: every third run is cancelled (one that has ended by then
            // keeps the cancellation as evidence only).
            for i in (0..RUNS).step_by(3) {
                cancel(&client, &wf, &format!("t{i}")).await;
            }
        }
        // Killed a random moment after it first wrote (a worker still connecting would be
        // killed before any step ran).
        let before = journal_seq(&store).await;
        let mut w = spawn_worker(&server.url());
        let t0 = Instant::now();
        while journal_seq(&store).await == before
            && w.running()
            && t0.elapsed() < Duration::from_secs(5)
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(rng.u64(0..80))).await;
        if w.running() {
            killed += 1;
        }
        drop(w); // SIGKILL
    }
    eprintln!("{killed} of {CYCLES} workers were killed while serving (seed {seed})");
    let last = spawn_worker(&server.url());
    let runs = ended_runs(&store, wf.name(), RUNS).await;
    drop(last);
    assert_eq!(runs.len(), RUNS, "0 lost runs (seed {seed})");
    let mut ended_by_cancel = 0;
    for r in &runs {
        let text = || format!("seed {seed}: {}", common::nats::record_text(r));
        assert!(r.ended, "{}", text());
        assert_eq!(
            count(r, "run_terminated", None),
            1,
            "ended once: {}",
            text()
        );
        let cancelled = r
            .records
            .iter()
            .any(|x| x["record"] == "run_terminated" && x["by"] == "exception");
        let dones = r
            .journal
            .iter()
            .filter_map(|e| match &e.input {
                saap::backend::StoredInput::Complete {
                    outputs: Some(outs),
                    ..
                } => Some(outs.iter().filter(|o| o.name == "Done").count()),
                _ => None,
            })
            .sum::<usize>();
        let index: usize = r.meta.run_id[1..].parse().unwrap();
        if index.is_multiple_of(3) {
            // Waiting an hour: ended by its cancellation, its timer dropped, never done.
            assert!(cancelled, "ended by its cancellation: {}", text());
            ended_by_cancel += 1;
            assert_eq!(count(r, "timer_fired", None), 0, "{}", text());
            assert_eq!(count(r, "timer_dropped", None), 1, "{}", text());
            assert_eq!(count(r, "execution_started", Some(1)), 0, "{}", text());
            assert_eq!(dones, 0, "{}", text());
            continue;
        }
        assert!(!cancelled, "{}", text());
        assert_eq!(count(r, "timer_set", None), 1, "{}", text());
        assert_eq!(count(r, "timer_fired", None), 1, "fired once: {}", text());
        assert_eq!(
            count(r, "execution_started", Some(1)),
            1,
            "`done` started once: {}",
            text()
        );
        assert_eq!(dones, 1, "one Done: {}", text());
    }
    eprintln!("{ended_by_cancel} runs ended by their cancellation (seed {seed})");
}
