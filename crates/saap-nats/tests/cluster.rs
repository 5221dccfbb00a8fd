//! saap-nats on a 3-node JetStream cluster on loopback (`sync_interval: always`), with the
//! node the client is connected to killed (`kill -9`) in the middle of a load: every
//! acknowledged control event is still stored and delivered. Waits are bounded.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use saap_nats::{PublishReceipt, SaapNats, Settings};
use saap_protocol::{EventEnvelope, EventId, Hierarchy, RunAddress};
use support::{NatsCluster, connect_ready, within};

const WAIT: Duration = Duration::from_secs(60);

fn event(n: u32) -> EventEnvelope {
    EventEnvelope::new(
        &Hierarchy::builtin(),
        "UserMessageEvent",
        EventId::object_id(1_700_000_000, [9, 9, 9, 9, 9], n),
        1,
    )
    .unwrap()
}

/// Publishes until acknowledged (bounded), as a worker would across a fail-over; re-publishing
/// is safe because the `Nats-Msg-Id` is the event id.
async fn publish_acked(nats: &SaapNats, run: &RunAddress, n: u32) -> PublishReceipt {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match nats.publish_control(run, &event(n)).await {
            Ok(r) => return r,
            Err(e) if tokio::time::Instant::now() > deadline => {
                panic!("event {n} not acknowledged within {WAIT:?}: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_events_survive_killing_a_node_of_a_three_node_cluster() {
    let mut cluster = NatsCluster::start(3);
    let settings = Settings {
        replicas: 3,
        publish_attempts: 2,
        ..Settings::default()
    };
    let nats = connect_ready(cluster.urls(), settings).await;

    // The stream needs all three peers known to the meta leader: poll until created.
    let deadline = tokio::time::Instant::now() + WAIT;
    let ensured = loop {
        match nats.ensure_stream("ClusterAgent").await {
            Ok(e) => break e,
            Err(e) if tokio::time::Instant::now() > deadline => panic!("R3 stream: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    assert_eq!(ensured.config.num_replicas, 3);

    let run = RunAddress::new("ClusterAgent", "a1", "t1", "d1", "r1").unwrap();
    let mut acked = BTreeSet::new();
    for n in 0..20 {
        let r = publish_acked(&nats, &run, n).await;
        assert!(!r.duplicate);
        acked.insert(n);
    }

    // kill -9 the node this client talks to.
    let port = nats.client().server_info().port;
    let victim = cluster
        .servers
        .iter()
        .position(|s| s.port() == port)
        .expect("connected to one of the nodes");
    cluster.servers[victim].kill();

    for n in 20..40 {
        publish_acked(&nats, &run, n).await;
        acked.insert(n);
    }

    // Every acknowledged event is delivered (at least once) by the runners' consumer.
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut consumer = loop {
        match nats.control_consumer("ClusterAgent").await {
            Ok(c) => break c,
            Err(e) if tokio::time::Instant::now() > deadline => panic!("consumer: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    let hierarchy = Hierarchy::builtin();
    let limits = saap_protocol::DecodeLimits::default();
    let mut seen = BTreeSet::new();
    while seen.len() < acked.len() {
        let d = within(WAIT, "deliveries from the surviving nodes", consumer.next())
            .await
            .unwrap()
            .unwrap();
        let e = d.decode(&hierarchy, &limits).unwrap();
        let b = e.event_id.as_bytes();
        let n = u32::from_be_bytes([0, b[9], b[10], b[11]]);
        seen.insert(n);
        d.ack().await.unwrap();
    }
    assert_eq!(seen, acked, "lost acknowledged events");

    let mut stream = nats
        .jetstream()
        .get_stream("agent_ClusterAgent_stream")
        .await
        .unwrap();
    assert_eq!(stream.info().await.unwrap().state.messages, 40);
}
