//! The library against a real nats-server: a larger stream is read a page at a time (never
//! whole), `runs` scans a bounded window and says which runs began before it, no consumer is
//! left behind, and a server that accepts connections but never answers is given up on within
//! the connect bound instead of hanging.
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use saap_inspect::{InspectError, NatsInspector, RunsQuery, ViewQuery};
use saap_nats::NatsOptions;
use saap_nats::testing::{NatsServer, ServerOptions, connect};
use std::time::Duration;

const RUNS: u64 = 50;
const PER_RUN: u64 = 100;

fn event(i: u64) -> (String, String) {
    let r = i / PER_RUN;
    let (name, parents) = match i % PER_RUN {
        0 => (
            "UserMessageEvent",
            r#"["UserMessageEvent","StartEvent","ControlAndDisplayEvent","ControlEvent","DisplayEvent"]"#,
        ),
        99 => (
            "StopEvent",
            r#"["StopEvent","ControlAndDisplayEvent","ControlEvent","DisplayEvent"]"#,
        ),
        _ => ("Step", r#"["Step","ControlEvent"]"#),
    };
    let id = format!("{:024x}", i + 1);
    (
        format!("agent.Big.a.t{}.d.r{r:04}.control_event.{name}.{id}", r % 2),
        format!(
            r#"{{"event_id":"{id}","created_at":{},"_event_name":"{name}","_parent_event_names":{parents}}}"#,
            1_000 + i
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_stream_is_read_page_by_page_and_runs_from_a_window() {
    // Not a durability test: the server's default syncing keeps publishing quick.
    let server = NatsServer::start_with(ServerOptions {
        default_sync: true,
        ..Default::default()
    });
    let nats = connect(&server).await;
    nats.ensure_stream("Big").await.unwrap();
    let js = nats.jetstream().clone();
    let mut acks = Vec::new();
    for i in 0..RUNS * PER_RUN {
        let (subject, payload) = event(i);
        acks.push(js.publish(subject, Bytes::from(payload)).await.unwrap());
        if acks.len() == 500 {
            for a in acks.drain(..) {
                a.await.unwrap();
            }
        }
    }
    for a in acks {
        a.await.unwrap();
    }
    let ins = NatsInspector::connect(&NatsOptions::new(server.url()))
        .await
        .unwrap();
    let stream = "agent_Big_stream";

    let page = ins
        .view(
            stream,
            &ViewQuery {
                from_seq: Some(2500),
                limit: 10,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let seqs: Vec<u64> = page.messages.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, (2500..2510).collect::<Vec<_>>());
    assert!(page.more);
    assert_eq!(page.next_seq, Some(2510));
    assert_eq!(page.last_seq, RUNS * PER_RUN);

    // Server-side filters: one run, one thread, one event type.
    let run = ins
        .view(
            stream,
            &ViewQuery {
                run: Some("r0007".into()),
                limit: 1000,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(run.messages.len(), PER_RUN as usize);
    assert!(!run.more);
    let stops = ins
        .view(
            stream,
            &ViewQuery {
                event_name: Some("StopEvent".into()),
                thread: Some("t1".into()),
                limit: 1000,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(stops.messages.len(), (RUNS / 2) as usize);

    // A window of 950 control events: runs 40..49, run 40 began before it.
    let runs = ins
        .runs(
            stream,
            &RunsQuery {
                scan: 950,
                limit: 100,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(runs.runs.len(), 10);
    assert_eq!(runs.runs[0].run_id, "r0049");
    assert!(
        runs.runs
            .iter()
            .all(|r| r.status == saap_inspect::model::RunStatus::Stopped)
    );
    let r40 = runs.runs.iter().find(|r| r.run_id == "r0040").unwrap();
    assert!(r40.partial);
    assert!(!runs.runs[0].partial);
    assert!(runs.more);
    let before: u64 = runs.next.as_deref().unwrap().parse().unwrap();
    let older = ins
        .runs(
            stream,
            &RunsQuery {
                scan: 100,
                before: Some(before),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(older.scanned, Some((before - 100, before - 1)));

    // Nothing left behind: every page consumer was deleted.
    let report = ins.stream_report(stream, 10).await.unwrap();
    assert_eq!(report.summary.consumers, 0, "{:?}", report.consumer_list);
    assert!(report.truncated, "10 subjects of 5,000 counted");
    assert_eq!(report.summary.messages, RUNS * PER_RUN);
}

#[tokio::test]
async fn a_server_that_never_answers_is_given_up_on() {
    // Accepts TCP connections and says nothing (no INFO line).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut options = NatsOptions::new(format!("nats://127.0.0.1:{port}"));
    options.connect_timeout = Duration::from_millis(500);
    options.request_timeout = Duration::from_millis(500);
    let bound =
        tokio::time::timeout(Duration::from_secs(30), NatsInspector::connect(&options)).await;
    let err = bound
        .expect("connect must give up within its own bound")
        .unwrap_err();
    assert!(matches!(err, InspectError::Unreachable { .. }), "{err}");
    assert!(!err.is_input_error());
    drop(listener);
}
