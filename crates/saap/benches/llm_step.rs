//! What a model call inside a step adds per streamed chunk (issue 20's budget: parse +
//! `ChunkEvent` + journal ≤ 2 µs per chunk over a plain client loop), side by side in one run
//! against one loopback server streaming a pre-rendered body of N chat completion chunks.
//!
//! `cargo bench -p saap --bench llm_step` (optional args: chunks per stream, rounds).
//! Readers, interleaved round by round so machine noise hits all alike; medians reported:
//!
//! * `plain`          — reqwest, `response.chunk()` until the end (the floor);
//! * `saap-llm`       — `LlmClient::stream` + `ChatStream::next` until `Finished` (no step);
//! * `step, memory`   — `Llm::chat` inside a step of an in-memory engine (`Engine::run`): each
//!   delta a `ChunkEvent` shown by the execution and appended to the run's log;
//! * `step, sqlite`   — the same on the embedded SQLite store (WAL), where each shown chunk is
//!   journaled durably before the next is read.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::Response;
use axum::routing::post;
use saap::llm::{CancellationToken, ChatRequest, Llm, LlmClient, LlmConfig, Message, StreamEvent};
use saap::{
    Engine, EngineOptions, Required, SqliteBackend, Step, StepCtx, StepError, StopEvent,
    UserMessageEvent, Workflow,
};
use std::sync::Arc;
use std::time::Instant;

fn chunk(i: usize) -> String {
    format!(
        "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"bench\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"tok{i} \"}},\"finish_reason\":null}}]}}\n\n"
    )
}

fn body(n: usize) -> Bytes {
    let mut text: String = (0..n).map(chunk).collect();
    text.push_str(
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    );
    text.push_str("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}\n\n");
    text.push_str("data: [DONE]\n\n");
    Bytes::from(text)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// One step that asks the model and ends the run.
fn workflow(llm: Llm) -> Workflow {
    Workflow::builder("Streamer")
        .resource(llm)
        .step(
            Step::new(
                "answer",
                |_: Required<UserMessageEvent>, ctx: StepCtx| async move {
                    let llm = ctx.resource::<Llm>()?;
                    let request = ChatRequest::new(vec![Message::user("bench")]);
                    let answer = llm
                        .chat(&ctx, &request)
                        .await
                        .map_err(|e| StepError::new(e.to_string()))?;
                    assert!(!answer.text().is_empty());
                    Ok::<_, StepError>(StopEvent {})
                },
            )
            .uses_resource::<Llm>(),
        )
        .build()
        .expect("workflow")
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without it
    // (a debug build): then a short smoke run of every reader.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let n = args
        .first()
        .copied()
        .unwrap_or(if smoke { 100 } else { 5_000 });
    let rounds = args.get(1).copied().unwrap_or(if smoke { 1 } else { 9 });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(n, rounds));
}

async fn run(n: usize, rounds: usize) {
    let full = body(n);
    let app = Router::new().route(
        "/full/v1/chat/completions",
        post(move || {
            let full = full.clone();
            async move {
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Body::from(full))
                    .expect("response")
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let url = format!("http://127.0.0.1:{port}/full/v1");
    let plain = reqwest::Client::new();
    let mut config = LlmConfig::new(url.clone()).with_model("bench");
    config.limits.max_response_bytes = 1 << 30;
    let client = LlmClient::new(config).expect("client");
    let request = ChatRequest::new(vec![Message::user("bench")]);
    let body_json =
        r#"{"model":"bench","messages":[{"role":"user","content":"bench"}],"stream":true}"#;

    let memory = Engine::in_memory(workflow(Llm::new(client.clone())));
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteBackend::open(dir.path().join("bench.db")).expect("sqlite store");
    let sqlite = Engine::new(
        workflow(Llm::new(client.clone())),
        Arc::new(store),
        EngineOptions::default(),
    );

    let (mut t_plain, mut t_client, mut t_memory, mut t_sqlite) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..=rounds {
        let start = Instant::now();
        let mut resp = plain
            .post(format!("{url}/chat/completions"))
            .body(body_json)
            .send()
            .await
            .expect("plain send");
        let mut bytes = 0usize;
        while let Some(c) = resp.chunk().await.expect("plain chunk") {
            bytes += c.len();
        }
        let plain_s = start.elapsed().as_secs_f64();
        assert!(bytes > 0);

        let start = Instant::now();
        let mut stream = client
            .stream(&request, CancellationToken::new())
            .await
            .expect("stream");
        let mut deltas = 0usize;
        while let Some(event) = stream.next().await.expect("next") {
            deltas += usize::from(matches!(event, StreamEvent::Text(_)));
        }
        let client_s = start.elapsed().as_secs_f64();
        assert_eq!(deltas, n);

        let start = Instant::now();
        memory
            .run(UserMessageEvent::new("go"))
            .await
            .expect("memory run");
        let memory_s = start.elapsed().as_secs_f64();

        let start = Instant::now();
        let run_id = sqlite
            .run(UserMessageEvent::new("go"))
            .await
            .expect("sqlite run");
        let sqlite_s = start.elapsed().as_secs_f64();
        let stored = sqlite
            .stored_snapshot(&run_id)
            .await
            .expect("read")
            .expect("stored run");
        assert!(stored.has_stop() && !stored.has_exception());
        assert_eq!(stored.events_of::<saap::ChunkEvent>().len(), n);

        if round > 0 {
            t_plain.push(plain_s);
            t_client.push(client_s);
            t_memory.push(memory_s);
            t_sqlite.push(sqlite_s);
        }
    }
    let per_chunk = |s: f64| s / n as f64 * 1e9;
    let (p, c, m, s) = (
        median(t_plain),
        median(t_client),
        median(t_memory),
        median(t_sqlite),
    );
    println!("saap llm step bench: {n} chunks per stream, {rounds} rounds, medians");
    for (name, t) in [
        ("plain reqwest loop", p),
        ("saap-llm ChatStream", c),
        ("step, in-memory engine", m),
        ("step, SQLite engine", s),
    ] {
        println!(
            "  {name:<24} {:>9.1} ns/chunk  ({:.2} ms/stream)  added over plain {:>9.1} ns/chunk",
            per_chunk(t),
            t * 1e3,
            per_chunk(t - p)
        );
    }
}
