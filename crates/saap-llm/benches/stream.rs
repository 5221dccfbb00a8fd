//! The client's added cost per streamed chunk, side by side with a plain reqwest loop reading
//! the same stream from the same loopback server in the same run.
//!
//! `cargo bench -p saap-llm --bench stream` (optional args: chunks per stream, rounds).
//! Three readers of one pre-rendered SSE body of N chat completion chunks, interleaved round by
//! round so machine noise hits all alike; the median per reader is reported:
//!
//! * `plain`     — reqwest, `response.chunk()` until the end, bytes counted (the floor);
//! * `plain+json`— the same, plus splitting lines and `serde_json::from_str::<Value>` on each
//!   `data:` payload (what a hand-written client does at least);
//! * `saap-llm`  — `LlmClient::stream` then `ChatStream::next` until `Finished` (SSE framing,
//!   typed chunk decoding, accumulation, one `StreamEvent` per delta).
//!
//! Time to first token: a 1-chunk-then-pause stream, request sent to first byte (plain) vs to
//! the first `StreamEvent::Text` (saap-llm).

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::Response;
use axum::routing::post;
use axum::serve::ListenerExt;
use saap_llm::{CancellationToken, ChatRequest, LlmClient, LlmConfig, Message, StreamEvent};

fn chunk(i: usize) -> String {
    format!(
        "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"bench\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"tok{i} \"}},\"finish_reason\":null}}]}}\n\n"
    )
}

fn body(n: usize) -> Bytes {
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&chunk(i));
    }
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

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(20_000);
    let rounds = args.get(1).copied().unwrap_or(15);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(n, rounds));
}

async fn run(n: usize, rounds: usize) {
    let full = body(n);
    let app = Router::new()
        .route(
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
        )
        .route(
            "/first/v1/chat/completions",
            post(|| async {
                let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(1);
                tokio::spawn(async move {
                    let _ = tx.send(Ok(Bytes::from(chunk(0)))).await;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let _ = tx.send(Ok(Bytes::from_static(b"data: [DONE]\n\n"))).await;
                });
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Body::from_stream(
                        tokio_stream::wrappers::ReceiverStream::new(rx),
                    ))
                    .expect("response")
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    // No Nagle delay on the server's writes: a lone first chunk goes out at once.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    let url = |s: &str| format!("http://127.0.0.1:{port}/{s}/v1");
    let plain = reqwest::Client::new();
    let mut config = LlmConfig::new(url("full")).with_model("bench");
    config.limits.max_response_bytes = 1 << 30;
    let client = LlmClient::new(config).expect("client");
    let first_client =
        LlmClient::new(LlmConfig::new(url("first")).with_model("bench")).expect("client");
    let request = ChatRequest::new(vec![Message::user("bench")]);
    let body_json =
        r#"{"model":"bench","messages":[{"role":"user","content":"bench"}],"stream":true}"#;

    let (mut t_plain, mut t_json, mut t_client) = (Vec::new(), Vec::new(), Vec::new());
    let (mut ttft_plain, mut ttft_client) = (Vec::new(), Vec::new());
    for round in 0..=rounds {
        // plain
        let start = Instant::now();
        let mut resp = plain
            .post(format!("{}/chat/completions", url("full")))
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

        // plain + json
        let start = Instant::now();
        let mut resp = plain
            .post(format!("{}/chat/completions", url("full")))
            .body(body_json)
            .send()
            .await
            .expect("json send");
        let mut buf: Vec<u8> = Vec::new();
        let mut parsed = 0usize;
        while let Some(c) = resp.chunk().await.expect("json chunk") {
            buf.extend_from_slice(&c);
            let mut start_line = 0;
            while let Some(off) = buf[start_line..].iter().position(|&b| b == b'\n') {
                let line = &buf[start_line..start_line + off];
                if let Some(data) = line.strip_prefix(b"data: ")
                    && data != b"[DONE]"
                {
                    let v: serde_json::Value = serde_json::from_slice(data).expect("json");
                    parsed += usize::from(v.is_object());
                }
                start_line += off + 1;
            }
            buf.drain(..start_line);
        }
        let json_s = start.elapsed().as_secs_f64();
        assert!(parsed >= n);

        // saap-llm
        let start = Instant::now();
        let mut stream = client
            .stream(&request, CancellationToken::new())
            .await
            .expect("stream");
        let mut deltas = 0usize;
        while let Some(event) = stream.next().await.expect("next") {
            if let StreamEvent::Text(_) = event {
                deltas += 1;
            }
        }
        let client_s = start.elapsed().as_secs_f64();
        assert_eq!(deltas, n);

        // time to first token
        let start = Instant::now();
        let mut resp = plain
            .post(format!("{}/chat/completions", url("first")))
            .body(body_json)
            .send()
            .await
            .expect("first send");
        let _ = resp.chunk().await.expect("first chunk");
        let ttft_p = start.elapsed().as_secs_f64();
        drop(resp);
        let start = Instant::now();
        let mut stream = first_client
            .stream(&request, CancellationToken::new())
            .await
            .expect("stream");
        let first = stream.next().await.expect("first event");
        let ttft_c = start.elapsed().as_secs_f64();
        assert!(matches!(first, Some(StreamEvent::Text(_))));
        drop(stream);

        if round > 0 {
            // round 0 warms up connections and caches
            t_plain.push(plain_s);
            t_json.push(json_s);
            t_client.push(client_s);
            ttft_plain.push(ttft_p);
            ttft_client.push(ttft_c);
        }
    }
    let per_chunk = |s: f64| s / n as f64 * 1e9;
    let (p, j, c) = (median(t_plain), median(t_json), median(t_client));
    println!("saap-llm stream bench: {n} chunks per stream, {rounds} rounds, medians");
    println!(
        "  plain reqwest loop      {:>9.1} ns/chunk  ({:.2} ms/stream)",
        per_chunk(p),
        p * 1e3
    );
    println!(
        "  plain + serde_json      {:>9.1} ns/chunk  ({:.2} ms/stream)",
        per_chunk(j),
        j * 1e3
    );
    println!(
        "  saap-llm ChatStream     {:>9.1} ns/chunk  ({:.2} ms/stream)",
        per_chunk(c),
        c * 1e3
    );
    println!(
        "  added over plain        {:>9.1} ns/chunk  (ratio {:.2})",
        per_chunk(c - p),
        c / p
    );
    println!(
        "  added over plain+json   {:>9.1} ns/chunk  (ratio {:.2})",
        per_chunk(c - j),
        c / j
    );
    let (tp, tc) = (median(ttft_plain), median(ttft_client));
    println!(
        "  time to first token     plain {:.1} µs, saap-llm {:.1} µs, added {:.1} µs",
        tp * 1e6,
        tc * 1e6,
        (tc - tp) * 1e6
    );
}
