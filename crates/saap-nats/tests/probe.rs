//! A rough probe of the raw NATS costs the engine builds on (not a benchmark and not part of
//! the default run): `cargo test -p saap-nats --release --test probe -- --ignored --nocapture`.
//! Prints latencies of acknowledged control publications (sequential, pipelined through
//! `publish_controls` in chunks of `$PROBE_CHUNK`, raw async-nats pipelining) and the rate of
//! consume + double ack, on one nats-server with `sync_interval: always`. No assertions on
//! the numbers.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use saap_protocol::{EventEnvelope, EventId, Hierarchy, RunAddress};
use support::{NatsServer, connect, within};

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a manual probe that prints numbers"]
async fn probe_publish_and_consume_costs() {
    // PROBE_URL: probe an already running server instead (e.g. one with other settings).
    let server;
    let nats = match std::env::var("PROBE_URL") {
        Ok(url) => support::connect_ready(vec![url], saap_nats::Settings::default()).await,
        Err(_) => {
            server = NatsServer::start();
            connect(&server).await
        }
    };
    nats.ensure_stream("ProbeAgent").await.unwrap();
    let run = RunAddress::new("ProbeAgent", "a", "t", "d", "r").unwrap();
    let h = Hierarchy::builtin();
    let n = 2000u32;
    let mut lat = Vec::with_capacity(n as usize);
    let start = Instant::now();
    for i in 0..n {
        let e = EventEnvelope::new(&h, "UserMessageEvent", EventId::object_id(1, [0; 5], i), 1)
            .unwrap();
        let t = Instant::now();
        nats.publish_control(&run, &e).await.unwrap();
        lat.push(t.elapsed());
    }
    let total = start.elapsed();
    lat.sort();
    eprintln!(
        "publish_control (awaited ack, sequential): {n} in {total:?} = {:.0}/s, p50 {:?}, p99 {:?}",
        f64::from(n) / total.as_secs_f64(),
        pct(&lat, 0.5),
        pct(&lat, 0.99)
    );

    let batch: Vec<_> = (n..2 * n)
        .map(|i| {
            let e = EventEnvelope::new(&h, "UserMessageEvent", EventId::object_id(1, [0; 5], i), 1)
                .unwrap();
            (run.clone(), e)
        })
        .collect();
    let start = Instant::now();
    let chunk: usize = std::env::var("PROBE_CHUNK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(batch.len());
    for part in batch.chunks(chunk) {
        for r in nats.publish_controls(part).await {
            r.unwrap();
        }
    }
    let total = start.elapsed();
    eprintln!(
        "publish_controls (pipelined): {n} in {total:?} = {:.0}/s",
        f64::from(n) / total.as_secs_f64()
    );

    // Raw async-nats pipelining, no headers, for comparison.
    let js = nats.jetstream();
    let start = Instant::now();
    let mut acks = Vec::new();
    for i in 0..n {
        acks.push(
            js.publish(
                format!("agent.ProbeAgent.a.t.d.r.display_event.X.{i}"),
                "x".into(),
            )
            .await
            .unwrap(),
        );
    }
    for a in acks {
        a.await.unwrap();
    }
    let total = start.elapsed();
    eprintln!(
        "raw js.publish pipelined: {n} in {total:?} = {:.0}/s",
        f64::from(n) / total.as_secs_f64()
    );

    let mut consumer = nats.control_consumer("ProbeAgent").await.unwrap();
    let start = Instant::now();
    for _ in 0..2 * n {
        let d = within(Duration::from_secs(30), "delivery", consumer.next())
            .await
            .unwrap()
            .unwrap();
        d.ack().await.unwrap();
    }
    let total = start.elapsed();
    eprintln!(
        "consume + double ack (sequential): {} in {total:?} = {:.0}/s",
        2 * n,
        f64::from(2 * n) / total.as_secs_f64()
    );
}
