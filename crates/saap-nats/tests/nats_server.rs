//! saap-nats against a real nats-server (started per test on a free loopback port with a
//! temporary store, `sync_interval: always`). Waits are bounded; nothing asserts on timing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use async_nats::jetstream;
use bytes::Bytes;
use saap_nats::{
    Auth, BucketKind, ClassDescription, ConfigScope, FetchAgentConfigResponse, NatsError,
    NatsOptions, SaapNats, Secret,
};
use saap_protocol::subject::ConsumerConfig;
use saap_protocol::{DecodeLimits, EventEnvelope, EventId, Hierarchy, RunAddress};
use serde_json::{Value, json};
use support::{NatsServer, ServerOptions, connect, within};

const WAIT: Duration = Duration::from_secs(30);

fn hierarchy() -> Hierarchy {
    Hierarchy::builtin()
}

fn run(class: &str, run_id: &str) -> RunAddress {
    RunAddress::new(class, "agent1", "thread1", "display1", run_id).unwrap()
}

fn id(n: u32) -> EventId {
    EventId::object_id(1_700_000_000, [1, 2, 3, 4, 5], n)
}

fn event(name: &str, n: u32) -> EventEnvelope {
    EventEnvelope::new(
        &hierarchy(),
        name,
        id(n),
        1_700_000_000_000_000_000 + i64::from(n),
    )
    .unwrap()
    .with_field("n", json!(n))
}

fn python_fixture(name: &str) -> Vec<u8> {
    let path: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "..",
        "saap-protocol",
        "tests",
        "fixtures",
        "python",
        name,
    ]
    .iter()
    .collect();
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The runner consumer with a 1 s ack wait, so that messages delivered to a crashed worker
/// come back quickly (the Python default is 30 s).
fn short_ack_wait(class: &str) -> ConsumerConfig {
    let mut c = ConsumerConfig::for_agent_class(class).unwrap();
    c.ack_wait = Duration::from_secs(1);
    c
}

async fn stream_messages(nats: &SaapNats, class: &str) -> u64 {
    let mut s = nats
        .jetstream()
        .get_stream(format!("agent_{class}_stream"))
        .await
        .unwrap();
    s.info().await.unwrap().state.messages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_is_created_exactly_as_designed_and_read_back() {
    let server = NatsServer::start();
    let nats = connect(&server).await;

    let ensured = nats.ensure_stream("RagAgent").await.unwrap();
    assert!(ensured.created);
    assert!(ensured.differences.is_empty());

    // Read it back with a separate plain client.
    let plain = async_nats::connect(server.url()).await.unwrap();
    let js = jetstream::new(plain);
    let mut stream = js.get_stream("agent_RagAgent_stream").await.unwrap();
    let c = stream.info().await.unwrap().config.clone();
    assert_eq!(c.name, "agent_RagAgent_stream");
    assert_eq!(c.subjects, vec!["agent.RagAgent.*.*.*.*.*.*.*".to_owned()]);
    assert_eq!(c.storage, jetstream::stream::StorageType::File);
    assert_eq!(c.retention, jetstream::stream::RetentionPolicy::Limits);
    assert_eq!(c.max_messages, 10_000_000);
    assert_eq!(c.discard, jetstream::stream::DiscardPolicy::Old);
    assert_eq!(c.max_age, Duration::from_secs(30 * 24 * 60 * 60));
    assert!(c.duplicate_window >= Duration::from_secs(60));
    assert_eq!(c.duplicate_window, Duration::from_secs(60));

    // Idempotent: the second call finds it unchanged.
    let again = nats.ensure_stream("RagAgent").await.unwrap();
    assert!(!again.created);
    assert!(again.differences.is_empty(), "{:?}", again.differences);

    // A stream created by someone else with other settings is left alone and reported.
    js.create_stream(jetstream::stream::Config {
        name: "agent_Other_stream".into(),
        subjects: vec!["agent.Other.*.*.*.*.*.*.*".into()],
        max_messages: 5,
        duplicate_window: Duration::from_secs(10),
        ..Default::default()
    })
    .await
    .unwrap();
    let other = nats.ensure_stream("Other").await.unwrap();
    assert!(!other.created);
    assert_eq!(other.config.max_messages, 5);
    let d = other.differences.join("; ");
    assert!(d.contains("max_msgs"), "{d}");
    assert!(d.contains("duplicate_window"), "{d}");
    assert!(d.contains("max_age"), "{d}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn republishing_the_same_event_is_acknowledged_as_duplicate() {
    let server = NatsServer::start();
    let nats = connect(&server).await;
    let r = run("DedupAgent", "run1");

    // No stream yet: a typed error telling to call ensure_stream.
    let e = nats
        .publish_control(&r, &event("UserMessageEvent", 1))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), "no_stream", "{e}");
    assert!(e.to_string().contains("ensure_stream"));

    nats.ensure_stream("DedupAgent").await.unwrap();
    let ev = event("UserMessageEvent", 1);
    let first = nats.publish_control(&r, &ev).await.unwrap();
    assert!(!first.duplicate);
    assert_eq!(first.stream, "agent_DedupAgent_stream");
    assert_eq!(
        first.subject,
        format!(
            "agent.DedupAgent.agent1.thread1.display1.run1.control_event.UserMessageEvent.{}",
            ev.event_id
        )
    );
    let second = nats.publish_control(&r, &ev).await.unwrap();
    assert!(second.duplicate, "second ack must say duplicate");
    assert_eq!(second.sequence, first.sequence);

    // A step output re-emitted after a crash carries the same deterministic id (the
    // engines derive it from the run and the execution): also a duplicate.
    let output_id = EventId::from_bytes([7; 12]);
    let out = |n| EventEnvelope::new(&hierarchy(), "StopEvent", output_id, n).unwrap();
    let o1 = nats.publish_control(&r, &out(10)).await.unwrap();
    let o2 = nats.publish_control(&r, &out(11)).await.unwrap();
    assert!(!o1.duplicate);
    assert!(o2.duplicate);
    assert_eq!(stream_messages(&nats, "DedupAgent").await, 2);

    // The stored message carries Nats-Msg-Id = event id.
    let stream = nats
        .jetstream()
        .get_stream("agent_DedupAgent_stream")
        .await
        .unwrap();
    let raw = stream.get_raw_message(first.sequence).await.unwrap();
    assert_eq!(
        raw.headers
            .get("Nats-Msg-Id")
            .map(|v| v.as_str().to_owned()),
        Some(ev.event_id.to_string())
    );

    // Kind checks.
    let display_only = event("ChunkEvent", 3);
    assert_eq!(
        nats.publish_control(&r, &display_only)
            .await
            .unwrap_err()
            .kind(),
        "wrong_event_kind"
    );
    let control_only = event("LanguageEvent", 4);
    assert_eq!(
        nats.publish_display(&r, &control_only)
            .await
            .unwrap_err()
            .kind(),
        "wrong_event_kind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn display_events_go_over_core_nats() {
    let server = NatsServer::start();
    let nats = connect(&server).await;
    let r = run("ShowAgent", "run1");
    let plain = async_nats::connect(server.url()).await.unwrap();
    let mut sub = plain
        .subscribe("agent.ShowAgent.*.*.*.*.display_event.*.*")
        .await
        .unwrap();
    support::sync_client(&plain).await;
    let chunk = event("ChunkEvent", 7);
    let subject = nats.publish_display(&r, &chunk).await.unwrap();
    nats.flush().await.unwrap();
    let got = within(
        WAIT,
        "the display event",
        futures_util::StreamExt::next(&mut sub),
    )
    .await
    .unwrap();
    assert_eq!(got.subject.as_str(), subject);
    assert!(got.headers.is_none(), "no Nats-Msg-Id on core publishes");
    let decoded =
        EventEnvelope::decode(&got.payload, &hierarchy(), &DecodeLimits::default()).unwrap();
    assert_eq!(decoded, chunk);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_user_message_published_by_a_plain_client_is_consumed_and_acked() {
    let server = NatsServer::start();
    let nats = connect(&server).await;
    nats.ensure_stream("PyAgent").await.unwrap();
    let mut consumer = nats.control_consumer("PyAgent").await.unwrap();
    assert_eq!(consumer.name(), "agent_runner_PyAgent");

    // Another client (as the Python platform API would) publishes the fixture on the seeds'
    // subject via JetStream, with a random Nats-Msg-Id and an X-AIHub header.
    let bytes = python_fixture("user_message_event.json");
    let raw: Value = serde_json::from_slice(&bytes).unwrap();
    let event_id = raw["event_id"].as_str().unwrap().to_owned();
    let subject = format!(
        "agent.PyAgent.wiki.t-65a0.d-65a0.r-65a0.control_event.UserMessageEvent.{event_id}"
    );
    let plain = async_nats::connect(server.url()).await.unwrap();
    let pjs = jetstream::new(plain.clone());
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Nats-Msg-Id", "3f1c2a9e-0b7d-4c55-9a43-1d2e3f4a5b6c");
    headers.insert("X-AIHub-User-Id", "u-1");
    let ack = pjs
        .publish_with_headers(subject.clone(), headers, Bytes::from(bytes.clone()))
        .await
        .unwrap()
        .await
        .unwrap();

    let d = within(WAIT, "the delivery", consumer.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.subject, subject);
    assert_eq!(d.info.stream_sequence, ack.sequence);
    assert_eq!(d.info.delivered, 1);
    assert_eq!(
        d.aihub_headers.get("x-aihub-user-id").map(String::as_str),
        Some("u-1")
    );
    let parsed = d.parsed_subject().unwrap();
    assert_eq!(parsed.run().run_id(), "r-65a0");
    assert_eq!(parsed.run().agent_id(), "wiki");
    let e = d.decode(&hierarchy(), &DecodeLimits::default()).unwrap();
    assert_eq!(e.event_name, "UserMessageEvent");
    assert_eq!(e.event_id.to_string(), event_id);
    assert!(e.classification().start && e.classification().control);
    assert_eq!(e.fields["locale"], "de");
    // Re-encoding gives the Python JSON back.
    assert_eq!(
        serde_json::from_slice::<Value>(&e.encode_bytes()).unwrap(),
        raw
    );
    d.ack().await.unwrap();

    // A control event sent with a core-NATS publish is stored by the stream and delivered too.
    let core_subject =
        "agent.PyAgent.wiki.t2.d2.r2.control_event.UserMessageEvent.6750f1c2a1b2c3d4e5f60719";
    plain
        .publish(core_subject, Bytes::from(bytes))
        .await
        .unwrap();
    support::sync_client(&plain).await;
    let d2 = within(WAIT, "the core-published delivery", consumer.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d2.subject, core_subject);
    let last_seq = d2.info.stream_sequence;
    d2.ack().await.unwrap();

    // Both acknowledged: nothing pending for the runners.
    let stream = nats
        .jetstream()
        .get_stream("agent_PyAgent_stream")
        .await
        .unwrap();
    let info = stream.consumer_info("agent_runner_PyAgent").await.unwrap();
    assert_eq!(info.num_ack_pending, 0);
    assert_eq!(info.ack_floor.stream_sequence, last_seq);
    assert_eq!(
        info.config.deliver_group.as_deref(),
        Some("agent_runner_PyAgent")
    );
    assert_eq!(
        info.config.filter_subject,
        "agent.PyAgent.*.*.*.*.control_event.*.*"
    );
    assert_eq!(
        info.config.ack_policy,
        jetstream::consumer::AckPolicy::Explicit
    );
    assert_eq!(info.config.max_deliver, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unacknowledged_message_is_redelivered_with_a_higher_count() {
    let server = NatsServer::start();
    let nats = connect(&server).await;
    nats.ensure_stream("RetryAgent").await.unwrap();
    let mut consumer = nats
        .control_consumer_with("RetryAgent", &short_ack_wait("RetryAgent"))
        .await
        .unwrap();
    let r = run("RetryAgent", "run1");
    let receipt = nats
        .publish_control(&r, &event("UserMessageEvent", 1))
        .await
        .unwrap();

    let first = within(WAIT, "first delivery", consumer.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.info.stream_sequence, receipt.sequence);
    assert_eq!(first.info.delivered, 1);
    drop(first); // crashed before acknowledging

    let second = within(WAIT, "redelivery after the ack wait", consumer.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(second.info.stream_sequence, receipt.sequence);
    assert!(second.info.delivered >= 2, "{:?}", second.info);

    // A negative acknowledgement asks for an immediate redelivery.
    let count = second.info.delivered;
    second.nak(None).await.unwrap();
    let third = within(WAIT, "redelivery after nak", consumer.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(third.info.stream_sequence, receipt.sequence);
    assert!(third.info.delivered > count);
    third.ack().await.unwrap();

    let stream = nats
        .jetstream()
        .get_stream("agent_RetryAgent_stream")
        .await
        .unwrap();
    let info = stream
        .consumer_info("agent_runner_RetryAgent")
        .await
        .unwrap();
    assert_eq!(info.num_ack_pending, 0);
    assert!(
        info.num_redelivered == 0,
        "acked: no longer counted as redelivered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_share_the_queue_group_each_message_once() {
    let server = NatsServer::start();
    let a = connect(&server).await;
    let b = connect(&server).await;
    a.ensure_stream("SharedAgent").await.unwrap();
    let ca = a.control_consumer("SharedAgent").await.unwrap();
    let cb = b.control_consumer("SharedAgent").await.unwrap();
    let total = 40u32;
    for n in 0..total {
        a.publish_control(
            &run("SharedAgent", &format!("run{}", n % 4)),
            &event("UserMessageEvent", n),
        )
        .await
        .unwrap();
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for (worker, mut c) in [("a", ca), ("b", cb)] {
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(Ok(d)) = c.next().await {
                let seq = d.info.stream_sequence;
                d.ack().await.unwrap();
                if tx.send((worker, seq)).is_err() {
                    break;
                }
            }
        }));
    }
    drop(tx);
    let mut seen = BTreeSet::new();
    let mut by_worker = std::collections::BTreeMap::<&str, usize>::new();
    while seen.len() < total as usize {
        let (w, seq) = within(WAIT, "all deliveries", rx.recv()).await.unwrap();
        assert!(seen.insert(seq), "stream sequence {seq} delivered twice");
        *by_worker.entry(w).or_default() += 1;
    }
    for t in tasks {
        t.abort();
    }
    assert_eq!(seen.len(), total as usize);
    // Both were bound to the same consumer (the server may still give all to one).
    let stream = a
        .jetstream()
        .get_stream("agent_SharedAgent_stream")
        .await
        .unwrap();
    let info = stream
        .consumer_info("agent_runner_SharedAgent")
        .await
        .unwrap();
    assert_eq!(info.delivered.stream_sequence, u64::from(total));
    assert_eq!(by_worker.values().sum::<usize>(), total as usize);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_compare_and_set_detects_conflicts() {
    let server = NatsServer::start();
    let nats = connect(&server).await;
    let other = connect(&server).await;
    let steps = nats
        .class_kv::<Value>("KvAgent", BucketKind::Steps)
        .await
        .unwrap();
    assert_eq!(steps.bucket(), "saap_KvAgent_steps");
    let steps_b = other
        .class_kv::<Value>("KvAgent", BucketKind::Steps)
        .await
        .unwrap();
    let key = saap_nats::kv::key(&["run", "r1", "owner"]).unwrap();

    assert!(steps.get(&key).await.unwrap().is_none());
    let r1 = steps
        .compare_and_set(&key, &json!({"worker": "a", "epoch": 1}), None)
        .await
        .unwrap();
    // A second creator loses.
    let e = steps_b
        .compare_and_set(&key, &json!({"worker": "b", "epoch": 1}), None)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), "key_exists", "{e}");
    // Both read revision r1; a takes over first, b's update at r1 conflicts.
    let seen_by_b = steps_b.get(&key).await.unwrap().unwrap();
    assert_eq!(seen_by_b.revision, r1);
    let r2 = steps
        .update(&key, &json!({"worker": "a", "epoch": 2}), r1)
        .await
        .unwrap();
    assert!(r2 > r1);
    let e = steps_b
        .update(
            &key,
            &json!({"worker": "b", "epoch": 2}),
            seen_by_b.revision,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e, NatsError::RevisionConflict { expected, .. } if expected == r1),
        "{e}"
    );
    let now = steps_b.get(&key).await.unwrap().unwrap();
    assert_eq!(now.value["worker"], "a");
    assert_eq!(now.revision, r2);

    // Racing updates at the same revision: exactly one wins.
    let (va, vb) = (
        json!({"worker": "a", "epoch": 3}),
        json!({"worker": "b", "epoch": 3}),
    );
    let (x, y) = tokio::join!(steps.update(&key, &va, r2), steps_b.update(&key, &vb, r2));
    assert_eq!(u8::from(x.is_ok()) + u8::from(y.is_ok()), 1, "{x:?} {y:?}");

    // Delete, then create again.
    steps.delete(&key).await.unwrap();
    assert!(steps.get(&key).await.unwrap().is_none());
    steps.create(&key, &json!({"worker": "b"})).await.unwrap();

    // Typed values and other buckets.
    let runs = nats
        .class_kv::<std::collections::BTreeMap<String, i64>>("KvAgent", BucketKind::RunContext)
        .await
        .unwrap();
    let k = saap_nats::kv::key(&["thread1", "run1", "counter"]).unwrap();
    runs.put(&k, &[("n".to_owned(), 3)].into_iter().collect())
        .await
        .unwrap();
    assert_eq!(runs.get(&k).await.unwrap().unwrap().value["n"], 3);
    assert_eq!(runs.get("bad key").await.unwrap_err().kind(), "invalid_key");
    let threads = nats
        .class_kv::<Value>("KvAgent", BucketKind::ThreadContext)
        .await
        .unwrap();
    assert_eq!(threads.bucket(), "saap_KvAgent_thread_context");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_rpc_round_trip_errors_and_timeout() {
    let server = NatsServer::start();
    let api = connect(&server).await;
    let agent = connect(&server).await;
    let _responder = api
        .serve_agent_config(
            ConfigScope::Class("RagAgent".to_owned()),
            |req| async move {
                match req.agent_id.as_str() {
                    "boom" => Err("database unavailable".to_owned()),
                    "wiki" => Ok(FetchAgentConfigResponse {
                        agent_class: req.agent_class,
                        agent_id: req.agent_id,
                        config: json!({"model": "gpt-x", "top_k": 5})
                            .as_object()
                            .cloned()
                            .unwrap(),
                        found: true,
                        error: None,
                    }),
                    _ => Ok(FetchAgentConfigResponse {
                        agent_class: req.agent_class,
                        agent_id: req.agent_id,
                        config: Default::default(),
                        found: false,
                        error: Some("no such agent".to_owned()),
                    }),
                }
            },
        )
        .await
        .unwrap();

    let ok = agent
        .fetch_agent_config("RagAgent", "wiki", Some(WAIT))
        .await
        .unwrap();
    assert!(ok.found);
    assert_eq!(ok.agent_class, "RagAgent");
    assert_eq!(ok.config["top_k"], 5);

    let missing = agent
        .fetch_agent_config("RagAgent", "nobody", Some(WAIT))
        .await
        .unwrap();
    assert!(!missing.found);
    assert_eq!(missing.error.as_deref(), Some("no such agent"));

    let e = agent
        .fetch_agent_config("RagAgent", "boom", Some(WAIT))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), "remote", "{e}");
    assert!(e.to_string().contains("database unavailable"));

    // A Python-style requester (plain client, raw JSON) gets the same answer.
    let plain = async_nats::connect(server.url()).await.unwrap();
    let reply = within(
        WAIT,
        "plain request",
        plain.request(
            "aihub.rpc.config.agent.RagAgent.wiki",
            Bytes::from_static(br#"{"agent_class": "RagAgent", "agent_id": "wiki"}"#),
        ),
    )
    .await
    .unwrap();
    let v: Value = serde_json::from_slice(&reply.payload).unwrap();
    assert_eq!(v["config"]["model"], "gpt-x");
    assert_eq!(v["found"], true);

    // A responder that never answers: the requester times out with a typed error.
    let _silent = plain
        .subscribe("aihub.rpc.config.agent.Slow.*")
        .await
        .unwrap();
    support::sync_client(&plain).await;
    let e = agent
        .fetch_agent_config("Slow", "x", Some(Duration::from_millis(300)))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), "request_timeout", "{e}");

    // Nobody listening at all: no responders.
    let lonely = NatsServer::start();
    let alone = connect(&lonely).await;
    let e = alone
        .fetch_agent_config("RagAgent", "wiki", Some(WAIT))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), "no_responders", "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn class_discovery_round_trip() {
    let server = NatsServer::start();
    let rag = connect(&server).await;
    let mail = connect(&server).await;
    let api = connect(&server).await;
    let mut fields = serde_json::Map::new();
    fields.insert("description".into(), json!("answers from the wiki"));
    let _h1 = rag
        .serve_class_discovery("RagAgent", ClassDescription { fields })
        .await
        .unwrap();
    let _h2 = mail
        .serve_class_discovery("MailAgent", ClassDescription::default())
        .await
        .unwrap();

    let one = api
        .discover_classes(Some("RagAgent"), "call1", Some(1), WAIT)
        .await
        .unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].agent_class, "RagAgent");
    assert_eq!(one[0].event.event_name, "AgentClassDiscoveryResponseEvent");
    assert_eq!(one[0].event.fields["agent_class"], "RagAgent");
    assert_eq!(one[0].event.fields["description"], "answers from the wiki");

    let all = api
        .discover_classes(None, "call2", Some(2), WAIT)
        .await
        .unwrap();
    let classes: BTreeSet<_> = all.iter().map(|d| d.agent_class.as_str()).collect();
    assert_eq!(classes, BTreeSet::from(["MailAgent", "RagAgent"]));

    // The Python request subject, sent by a plain client: answered on the response subject.
    let plain = async_nats::connect(server.url()).await.unwrap();
    let mut responses = plain
        .subscribe("class_discovery.agent.*.*.response.call3")
        .await
        .unwrap();
    support::sync_client(&plain).await;
    plain
        .publish(
            "class_discovery.agent.MailAgent.*.request.call3",
            Bytes::from_static(br#"{"event_id":"6750f1c2a1b2c3d4e5f60720","created_at":1,"_event_name":"ClassDiscoveryRequestEvent","_parent_event_names":["ClassDiscoveryRequestEvent"]}"#),
        )
        .await
        .unwrap();
    let m = within(
        WAIT,
        "discovery response",
        futures_util::StreamExt::next(&mut responses),
    )
    .await
    .unwrap();
    assert_eq!(
        m.subject.as_str(),
        "class_discovery.agent.MailAgent.*.response.call3"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_messages_survive_a_server_kill_and_restart() {
    let mut server = NatsServer::start();
    let class = "DurableAgent";
    let receipts = {
        let nats = connect(&server).await;
        nats.ensure_stream(class).await.unwrap();
        let mut receipts = Vec::new();
        for n in 0..5 {
            receipts.push(
                nats.publish_control(&run(class, "run1"), &event("UserMessageEvent", n))
                    .await
                    .unwrap(),
            );
        }
        // Process and acknowledge the first two.
        let mut consumer = nats
            .control_consumer_with(class, &short_ack_wait(class))
            .await
            .unwrap();
        for expected in &receipts[..2] {
            let d = within(WAIT, "delivery", consumer.next())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(d.info.stream_sequence, expected.sequence);
            d.ack().await.unwrap();
        }
        receipts
    };

    server.kill(); // kill -9
    assert!(!server.is_running());
    server.restart();

    let nats = connect(&server).await;
    let again = nats.ensure_stream(class).await.unwrap();
    assert!(!again.created, "the stream survived");
    assert_eq!(stream_messages(&nats, class).await, 5);
    let stream = nats
        .jetstream()
        .get_stream(format!("agent_{class}_stream"))
        .await
        .unwrap();
    for (n, r) in receipts.iter().enumerate() {
        let m = stream.get_raw_message(r.sequence).await.unwrap();
        let e = EventEnvelope::decode(&m.payload, &hierarchy(), &DecodeLimits::default()).unwrap();
        assert_eq!(e.event_id, id(u32::try_from(n).unwrap()));
    }
    // Still deduplicated after the restart (within the window).
    let dup = nats
        .publish_control(&run(class, "run1"), &event("UserMessageEvent", 0))
        .await
        .unwrap();
    assert!(dup.duplicate);

    // The consumer survives; after kill -9 its acknowledgement state may not (observed with
    // nats-server 2.15.1, single node, sync_interval: always: the ack floor is written lazily),
    // so acknowledged messages may be delivered again: at-least-once, never lost. The engine
    // deduplicates by event id. What must hold: every unacknowledged message is delivered
    // again, and nothing but stored messages is delivered.
    let mut consumer = nats
        .control_consumer_with(class, &short_ack_wait(class))
        .await
        .unwrap();
    let all: BTreeSet<u64> = receipts.iter().map(|r| r.sequence).collect();
    let mut missing: BTreeSet<u64> = receipts[2..].iter().map(|r| r.sequence).collect();
    let mut redelivered_acked = 0;
    while !missing.is_empty() {
        let d = within(WAIT, "delivery after restart", consumer.next())
            .await
            .unwrap()
            .unwrap();
        let seq = d.info.stream_sequence;
        assert!(all.contains(&seq), "unexpected {:?}", d.info);
        if !missing.remove(&seq) {
            redelivered_acked += 1;
        }
        d.ack().await.unwrap();
    }
    // Drain until the server itself reports nothing outstanding. This is the race behind the
    // test's flaky failure (CI about 1 run in 10): the consumer state is written lazily, so the
    // kill leaves whatever the last write saw. Measured over 100 kills: nothing delivered (66),
    // 5 delivered and unacknowledged (32), or 1 and 2 delivered and unacknowledged (2). In the
    // last case 3..5 arrive at once as new messages but 1 and 2 only when their ack wait
    // expires; a test that stopped at 3..5 and then stopped the server gracefully found that
    // state, correctly persisted: ack floor 0, 2 acks pending, nothing redelivered yet. Only
    // the server's own report fixes the starting point of the graceful-stop check below.
    loop {
        let info = runner_info(&nats, class).await;
        if info.num_ack_pending == 0 && info.num_pending == 0 {
            assert_eq!(
                info.ack_floor.stream_sequence, receipts[4].sequence,
                "{info:?}"
            );
            break;
        }
        let d = within(
            WAIT,
            "redelivery of an acknowledged message",
            consumer.next(),
        )
        .await
        .unwrap()
        .unwrap();
        assert!(
            all.contains(&d.info.stream_sequence),
            "unexpected {:?}",
            d.info
        );
        redelivered_acked += 1;
        d.ack().await.unwrap();
    }
    assert!(
        redelivered_acked <= 2,
        "{redelivered_acked} acknowledged messages came back"
    );

    // The state recovered after the crash and acknowledged since is written by a graceful stop:
    // after it nothing is pending, and the consumer goes on with new work, not old messages.
    drop(consumer);
    drop(nats);
    server.stop_gracefully();
    server.restart();
    let nats = connect(&server).await;
    let info = runner_info(&nats, class).await;
    assert_eq!(
        info.ack_floor.stream_sequence, receipts[4].sequence,
        "{info:?}"
    );
    assert_eq!(info.num_pending, 0, "{info:?}");
    assert_eq!(info.num_ack_pending, 0, "{info:?}");
    let mut consumer = nats
        .control_consumer_with(class, &short_ack_wait(class))
        .await
        .unwrap();
    let fresh = nats
        .publish_control(&run(class, "run1"), &event("UserMessageEvent", 5))
        .await
        .unwrap();
    let d = within(WAIT, "the new message", consumer.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.info.stream_sequence, fresh.sequence, "{:?}", d.info);
    assert_eq!(d.info.delivered, 1, "{:?}", d.info);
    d.ack().await.unwrap();
}

/// The runner consumer's state as the server reports it.
async fn runner_info(nats: &SaapNats, class: &str) -> jetstream::consumer::Info {
    nats.jetstream()
        .get_stream(format!("agent_{class}_stream"))
        .await
        .unwrap()
        .consumer_info(format!("agent_runner_{class}"))
        .await
        .unwrap()
}

/// What a graceful stop (SIGTERM) guarantees, on a server that never crashed, so that nothing
/// depends on what a kill -9 happened to lose: the server writes the consumer's state on stop,
/// so after the restart the acknowledged messages stay acknowledged, exactly the unacknowledged
/// ones come back (as redeliveries), and new messages are first deliveries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_restart_keeps_acknowledgements_and_redelivers_only_the_rest() {
    let mut server = NatsServer::start();
    let class = "GracefulAgent";
    let r = run(class, "run1");
    let receipts = {
        let nats = connect(&server).await;
        nats.ensure_stream(class).await.unwrap();
        let mut receipts = Vec::new();
        for n in 0..5 {
            receipts.push(
                nats.publish_control(&r, &event("UserMessageEvent", n))
                    .await
                    .unwrap(),
            );
        }
        let mut consumer = nats
            .control_consumer_with(class, &short_ack_wait(class))
            .await
            .unwrap();
        // All five are pushed in stream order; acknowledge the first two, hold the rest.
        let mut held = Vec::new();
        for (i, expected) in receipts.iter().enumerate() {
            let d = within(WAIT, "delivery", consumer.next())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(d.info.stream_sequence, expected.sequence, "{:?}", d.info);
            assert_eq!(d.info.delivered, 1, "{:?}", d.info);
            if i < 2 {
                d.ack().await.unwrap();
            } else {
                held.push(d);
            }
        }
        // The double acks are confirmed, so this is the server's state when it is stopped.
        let info = runner_info(&nats, class).await;
        assert_eq!(
            info.ack_floor.stream_sequence, receipts[1].sequence,
            "{info:?}"
        );
        assert_eq!(info.num_ack_pending, 3, "{info:?}");
        assert_eq!(info.num_pending, 0, "{info:?}");
        drop(held); // never acknowledged
        receipts
    };

    server.stop_gracefully();
    server.restart();

    let nats = connect(&server).await;
    let info = runner_info(&nats, class).await;
    assert_eq!(
        info.ack_floor.stream_sequence, receipts[1].sequence,
        "{info:?}"
    );
    assert_eq!(info.num_ack_pending, 3, "{info:?}");
    assert_eq!(info.num_pending, 0, "{info:?}");
    assert_eq!(
        info.delivered.stream_sequence, receipts[4].sequence,
        "{info:?}"
    );

    // Rebind and add new work. The held three come back when their ack wait expires and the new
    // message at once, in either order; the acknowledged two never.
    let mut consumer = nats
        .control_consumer_with(class, &short_ack_wait(class))
        .await
        .unwrap();
    let fresh = nats
        .publish_control(&r, &event("UserMessageEvent", 5))
        .await
        .unwrap();
    let held: BTreeSet<u64> = receipts[2..].iter().map(|r| r.sequence).collect();
    let mut expected: BTreeSet<u64> = held.iter().copied().chain([fresh.sequence]).collect();
    while !expected.is_empty() {
        let d = within(WAIT, "delivery after the restart", consumer.next())
            .await
            .unwrap()
            .unwrap();
        let seq = d.info.stream_sequence;
        assert!(
            held.contains(&seq) || seq == fresh.sequence,
            "an acknowledged message came back after a graceful restart: {:?}",
            d.info
        );
        if !expected.remove(&seq) {
            continue; // a second redelivery of a held one (ack wait expired again): already acked
        }
        if seq == fresh.sequence {
            assert_eq!(d.info.delivered, 1, "{:?}", d.info);
        } else {
            assert!(d.info.delivered >= 2, "{:?}", d.info);
        }
        d.ack().await.unwrap();
    }
    let info = runner_info(&nats, class).await;
    assert_eq!(info.ack_floor.stream_sequence, fresh.sequence, "{info:?}");
    assert_eq!(info.num_ack_pending, 0, "{info:?}");
    assert_eq!(info.num_pending, 0, "{info:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_authentication_is_passed_through_and_never_reported() {
    let token = "s3cret-token-value";
    let server = NatsServer::start_with(ServerOptions {
        token: Some(token.to_owned()),
        ..ServerOptions::default()
    });
    let e = SaapNats::connect(&NatsOptions::new(server.url()))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), "connect", "{e}");
    let e = SaapNats::connect(
        &NatsOptions::new(server.url()).with_auth(Auth::Token(Secret::new("wrong-token"))),
    )
    .await
    .unwrap_err();
    assert!(!e.to_string().contains("wrong-token"), "{e}");
    let options = NatsOptions::new(server.url()).with_auth(Auth::Token(Secret::new(token)));
    assert!(!format!("{options:?}").contains(token));
    let nats = SaapNats::connect(&options).await.unwrap();
    support::wait_jetstream(&nats).await;
    nats.ensure_stream("AuthAgent").await.unwrap();

    // A token in the URL's userinfo works too.
    let in_url = NatsOptions::new(format!("nats://{token}@127.0.0.1:{}", server.port()));
    assert!(!format!("{in_url:?}").contains(token));
    let nats = SaapNats::connect(&in_url).await.unwrap();
    support::wait_jetstream(&nats).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_returns_stored_control_events_in_stream_order_and_ends() {
    let server = NatsServer::start();
    let nats = connect(&server).await;
    let class = "ReplayAgent";
    nats.ensure_stream(class).await.unwrap();

    // Nothing stored: the replay ends at once.
    let empty = nats
        .replay_control(class, &saap_nats::ReplayScope::default())
        .await
        .unwrap();
    assert_eq!(empty.remaining(), 0);
    assert!(empty.collect().await.unwrap().is_empty());

    let (r1, r2) = (run(class, "run1"), run(class, "run2"));
    let mut seqs = Vec::new();
    for n in 0..6 {
        let r = if n % 2 == 0 { &r1 } else { &r2 };
        seqs.push((
            n,
            nats.publish_control(r, &event("UserMessageEvent", n))
                .await
                .unwrap()
                .sequence,
        ));
        // Display events are stored by the stream too (core publish) but never replayed.
        nats.publish_display(r, &event("ChunkEvent", 100 + n))
            .await
            .unwrap();
    }
    nats.sync().await.unwrap();

    let all = nats
        .replay_control(class, &saap_nats::ReplayScope::default())
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let got: Vec<u64> = all.iter().map(|e| e.sequence).collect();
    let want: Vec<u64> = seqs.iter().map(|(_, s)| *s).collect();
    assert_eq!(got, want);
    for (stored, (n, _)) in all.iter().zip(&seqs) {
        let e = stored
            .decode(&hierarchy(), &DecodeLimits::default())
            .unwrap();
        assert_eq!(e.event_id, id(*n));
        assert!(stored.subject.contains(".control_event."));
    }

    // One run only, from a sequence on.
    let run2 = nats
        .replay_control(
            class,
            &saap_nats::ReplayScope {
                run: Some(r2.clone()),
                from_sequence: None,
            },
        )
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let run2_ids: Vec<EventId> = run2
        .iter()
        .map(|s| {
            s.decode(&hierarchy(), &DecodeLimits::default())
                .unwrap()
                .event_id
        })
        .collect();
    assert_eq!(run2_ids, vec![id(1), id(3), id(5)]);
    assert!(
        run2.iter()
            .all(|s| s.parsed_subject().unwrap().run().run_id() == "run2")
    );

    let tail = nats
        .replay_control(
            class,
            &saap_nats::ReplayScope {
                run: None,
                from_sequence: Some(seqs[4].1),
            },
        )
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(
        tail.iter().map(|e| e.sequence).collect::<Vec<_>>(),
        vec![seqs[4].1, seqs[5].1]
    );

    // A run of another class is refused.
    let e = nats
        .replay_control(
            class,
            &saap_nats::ReplayScope {
                run: Some(run("OtherAgent", "x")),
                from_sequence: None,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), "invalid_options");
}

/// A user nkey generated for these tests only (nkeys 0.4 `KeyPair::new_user`).
const TEST_NKEY_SEED: &str = "SUAIXG5MCFDM2A6YUFMG4B5PFCXNYUS7OBCWCHS7BOM7DNFFJLJC5FHEKE";
const TEST_NKEY_PUBLIC: &str = "UCWPUINGEVP2U4EPV4NESOGGR2H4XQLQ6VEBW3F5WIUPWUSPEYN2HPNM";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nkey_and_user_password_authentication_are_passed_through() {
    let server = NatsServer::start_with(ServerOptions {
        authorization: Some(format!(
            "  users: [\n    {{ nkey: \"{TEST_NKEY_PUBLIC}\" }}\n    {{ user: \"alice\", password: \"pw-alice-1\" }}\n  ]"
        )),
        ..ServerOptions::default()
    });
    let anonymous = SaapNats::connect(&NatsOptions::new(server.url()))
        .await
        .unwrap_err();
    assert_eq!(anonymous.kind(), "connect", "{anonymous}");

    let nkey =
        NatsOptions::new(server.url()).with_auth(Auth::NkeySeed(Secret::new(TEST_NKEY_SEED)));
    assert!(!format!("{nkey:?}").contains(TEST_NKEY_SEED));
    let nats = SaapNats::connect(&nkey).await.unwrap();
    support::wait_jetstream(&nats).await;
    nats.ensure_stream("NkeyAgent").await.unwrap();

    let wrong = NatsOptions::new(server.url()).with_auth(Auth::UserPassword {
        user: "alice".into(),
        password: Secret::new("not-the-password"),
    });
    let e = SaapNats::connect(&wrong).await.unwrap_err();
    assert!(!e.to_string().contains("not-the-password"), "{e}");
    let alice = NatsOptions::new(server.url()).with_auth(Auth::UserPassword {
        user: "alice".into(),
        password: Secret::new("pw-alice-1"),
    });
    let nats = SaapNats::connect(&alice).await.unwrap();
    support::wait_jetstream(&nats).await;

    // Credentials in the URL are used by the client and never shown.
    let port = server.port();
    let in_url = NatsOptions::new(format!("nats://alice:pw-alice-1@127.0.0.1:{port}"));
    assert!(!format!("{in_url:?}").contains("pw-alice-1"));
    let nats = SaapNats::connect(&in_url).await.unwrap();
    support::wait_jetstream(&nats).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_publications_are_acknowledged_in_order_and_deduplicated() {
    let server = NatsServer::start();
    let nats = connect(&server).await;
    let class = "BatchAgent";
    nats.ensure_stream(class).await.unwrap();
    let batch: Vec<(RunAddress, EventEnvelope)> = (0..1500)
        .map(|n| {
            (
                run(class, &format!("run{}", n % 3)),
                event("UserMessageEvent", n),
            )
        })
        .collect();
    let receipts = nats.publish_controls(&batch).await;
    assert_eq!(receipts.len(), 1500);
    let seqs: Vec<u64> = receipts
        .iter()
        .map(|r| {
            let r = r.as_ref().unwrap();
            assert!(!r.duplicate);
            r.sequence
        })
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "stored in input order"
    );

    // The same batch again, plus one display-only event (refused) and one new event.
    let mut again = batch[..10].to_vec();
    again.push((run(class, "run0"), event("ChunkEvent", 5000)));
    again.push((run(class, "run0"), event("UserMessageEvent", 5001)));
    let r = nats.publish_controls(&again).await;
    assert!(r[..10].iter().all(|x| x.as_ref().unwrap().duplicate));
    assert_eq!(r[10].as_ref().unwrap_err().kind(), "wrong_event_kind");
    assert!(!r[11].as_ref().unwrap().duplicate);
    assert_eq!(stream_messages(&nats, class).await, 1501);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_allowed_delivery_is_flagged() {
    let server = NatsServer::start();
    let nats = connect(&server).await;
    let class = "PoisonAgent";
    nats.ensure_stream(class).await.unwrap();
    let mut config = short_ack_wait(class);
    config.max_deliver = 3;
    let mut consumer = nats.control_consumer_with(class, &config).await.unwrap();
    nats.publish_control(&run(class, "run1"), &event("UserMessageEvent", 1))
        .await
        .unwrap();
    for attempt in 1..=3u64 {
        let d = within(WAIT, "delivery", consumer.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(d.info.delivered, attempt);
        assert_eq!(d.info.last_attempt, attempt == 3, "{:?}", d.info);
        if attempt < 3 {
            d.nak(None).await.unwrap();
        } else {
            // The engine records the failure, then terminates the message.
            d.term().await.unwrap();
        }
    }
    let stream = nats
        .jetstream()
        .get_stream(format!("agent_{class}_stream"))
        .await
        .unwrap();
    let info = stream
        .consumer_info(format!("agent_runner_{class}"))
        .await
        .unwrap();
    assert_eq!(info.num_ack_pending, 0);
    assert_eq!(info.config.max_deliver, 3);
}
