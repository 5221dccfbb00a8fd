//! An in-process OpenAI-compatible server on 127.0.0.1:0, scripted per scenario.
//!
//! The base URL `http://127.0.0.1:PORT/{scenario}/v1` selects the scenario; each scenario
//! counts its requests so "fail once, then succeed" can be scripted, and the last request's
//! body and `Authorization` header are kept for checks. It serves the good and the bad answers
//! the client must cope with; it must never be reached from outside the test.

#![allow(dead_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Response, StatusCode};
use axum::routing::post;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// What the server saw.
#[derive(Default)]
pub struct Seen {
    pub counts: HashMap<String, u32>,
    pub bodies: HashMap<String, serde_json::Value>,
    pub auth: HashMap<String, String>,
}

#[derive(Clone)]
pub struct TestServer {
    pub port: u16,
    pub seen: Arc<Mutex<Seen>>,
}

impl TestServer {
    pub async fn start() -> TestServer {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let app = Router::new()
            .route("/{scenario}/v1/chat/completions", post(handle))
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let port = listener.local_addr().expect("local addr").port();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        TestServer { port, seen }
    }

    pub fn base_url(&self, scenario: &str) -> String {
        format!("http://127.0.0.1:{}/{scenario}/v1", self.port)
    }

    pub fn count(&self, scenario: &str) -> u32 {
        self.seen
            .lock()
            .expect("lock")
            .counts
            .get(scenario)
            .copied()
            .unwrap_or(0)
    }

    pub fn body(&self, scenario: &str) -> serde_json::Value {
        self.seen
            .lock()
            .expect("lock")
            .bodies
            .get(scenario)
            .cloned()
            .unwrap_or_default()
    }

    pub fn auth(&self, scenario: &str) -> Option<String> {
        self.seen.lock().expect("lock").auth.get(scenario).cloned()
    }
}

/// A chunk with a text delta.
pub fn text_chunk(text: &str) -> String {
    serde_json::json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "test-model",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]
    })
    .to_string()
}

fn sse(events: &[String]) -> String {
    events.iter().map(|e| format!("data: {e}\n\n")).collect()
}

fn sse_response(body: impl Into<Body>) -> Response<Body> {
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(body.into())
        .expect("response")
}

fn json_response(status: StatusCode, body: serde_json::Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .expect("response")
}

/// A non-streamed completion with one choice.
fn completion(message: serde_json::Value, finish_reason: &str) -> Response<Body> {
    json_response(
        StatusCode::OK,
        serde_json::json!({"id": "chatcmpl-t", "model": "test-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}),
    )
}

/// A body sent piece by piece with pauses; `Err` at the end cuts the connection.
fn paced(pieces: Vec<(Duration, Result<String, ()>)>) -> Body {
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    tokio::spawn(async move {
        for (pause, piece) in pieces {
            tokio::time::sleep(pause).await;
            let item = piece
                .map(Bytes::from)
                .map_err(|()| std::io::Error::other("connection cut by the test"));
            if tx.send(item).await.is_err() {
                return; // the client went away
            }
        }
    });
    Body::from_stream(ReceiverStream::new(rx))
}

fn stream_ok() -> Vec<String> {
    vec![
        serde_json::json!({"id": "chatcmpl-1", "model": "test-model",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]})
        .to_string(),
        text_chunk("Hel"),
        text_chunk("lo, "),
        text_chunk("wörld"),
        serde_json::json!({"id": "chatcmpl-1", "model": "test-model",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        .to_string(),
        serde_json::json!({"id": "chatcmpl-1", "model": "test-model", "choices": [],
            "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}})
        .to_string(),
        "[DONE]".to_owned(),
    ]
}

async fn handle(
    Path(scenario): Path<String>,
    State(seen): State<Arc<Mutex<Seen>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response<Body>, Infallible> {
    let count = {
        let mut seen = seen.lock().expect("lock");
        let count = seen.counts.entry(scenario.clone()).or_insert(0);
        *count += 1;
        let count = *count;
        if let Ok(value) = serde_json::from_slice(&body) {
            seen.bodies.insert(scenario.clone(), value);
        }
        if let Some(auth) = headers.get("authorization").and_then(|v| v.to_str().ok()) {
            seen.auth.insert(scenario.clone(), auth.to_owned());
        }
        count
    };
    let ms = Duration::from_millis;
    Ok(match scenario.as_str() {
        "text" => sse_response(sse(&stream_ok())),
        "tools" => sse_response(sse(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}"#.to_owned(),
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}"#.to_owned(),
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{\"tz\""}}]},"finish_reason":null}]}"#.to_owned(),
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":" \"Zürich\"}"}}]},"finish_reason":null}]}"#.to_owned(),
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":": \"CET\"}"}}]},"finish_reason":null}]}"#.to_owned(),
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#.to_owned(),
            r#"{"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":9,"total_tokens":29}}"#.to_owned(),
            "[DONE]".to_owned(),
        ])),
        // llama.cpp/Ollama-style oddities: empty finish reasons, unknown fields, no ids, no
        // usage, CRLF line ends, a comment, no [DONE] after the finish reason.
        "lenient" => sse_response(
            ": ping\r\n\r\n".to_owned()
                + &[
                    r#"{"choices":[{"delta":{"content":"a"},"finish_reason":"","logprobs":null,"x_extra":{"k":1}}],"timings":{}}"#,
                    r#"{"choices":[{"delta":{"content":"b"},"finish_reason":""}]}"#,
                    r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
                ]
                .iter()
                .map(|e| format!("data:{e}\r\n\r\n"))
                .collect::<String>(),
        ),
        "midstream_error" => sse_response(sse(&[
            text_chunk("partial"),
            r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}"#.to_owned(),
        ])),
        "error_event" => sse_response(format!(
            "data: {}\n\nevent: error\ndata: {{\"error\": {{\"message\": \"context length exceeded\"}}}}\n\n",
            text_chunk("x")
        )),
        "slow" => sse_response(paced(vec![
            (ms(0), Ok(format!("data: {}\n\n", text_chunk("first")))),
            (ms(30_000), Ok(format!("data: {}\n\n", text_chunk("late")))),
        ])),
        "rate_limited" if count == 1 => Response::builder()
            .status(429)
            .header("retry-after", "1")
            .header("content-type", "application/json")
            .body(Body::from(r#"{"error":{"message":"Rate limit reached"}}"#))
            .expect("response"),
        "rate_limited" => sse_response(sse(&stream_ok())),
        "rate_limited_long" => Response::builder()
            .status(429)
            .header("retry-after", "3600")
            .body(Body::from("slow down"))
            .expect("response"),
        "error500" if count == 1 => json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            serde_json::json!({"error": {"message": "boom"}}),
        ),
        "error500" => sse_response(sse(&stream_ok())),
        "bad_request" => json_response(
            StatusCode::BAD_REQUEST,
            serde_json::json!({"error": {"message": "model `nope` does not exist"}}),
        ),
        "html" => Response::builder()
            .header("content-type", "text/html; charset=utf-8")
            .body(Body::from("<!DOCTYPE html><html><body>Sign in</body></html>"))
            .expect("response"),
        "html_502" => Response::builder()
            .status(502)
            .header("content-type", "text/html")
            .body(Body::from("<html><head><title>502 Bad Gateway</title></head></html>"))
            .expect("response"),
        "non_json" => sse_response(format!(
            "data: {}\n\ndata: this is not json\n\n",
            text_chunk("ok")
        )),
        "not_sse" => json_response(StatusCode::OK, serde_json::json!({"unexpected": true})),
        "truncated" => sse_response(sse(&[text_chunk("Hel"), text_chunk("lo")])),
        "cut" => sse_response(paced(vec![
            (ms(0), Ok(format!("data: {}\n\n", text_chunk("Hel")))),
            (ms(10), Err(())),
        ])),
        "oversized" => sse_response(paced(
            (0..2_000)
                .map(|_| (ms(0), Ok(format!("data: {}\n\n", text_chunk(&"x".repeat(1000))))))
                .collect(),
        )),
        "oversized_json" => json_response(
            StatusCode::OK,
            serde_json::json!({"choices": [{"message": {"role": "assistant", "content": "x".repeat(200_000)}}]}),
        ),
        "long_line" => sse_response(format!("data: {}", "y".repeat(100_000))),
        "many_tools" => sse_response(sse(&[format!(
            r#"{{"choices":[{{"delta":{{"tool_calls":[{}]}}}}]}}"#,
            (0..50)
                .map(|i| format!(r#"{{"index":{i},"id":"c{i}","function":{{"name":"f","arguments":"{{}}"}}}}"#))
                .collect::<Vec<_>>()
                .join(",")
        )])),
        "nonstream" => json_response(
            StatusCode::OK,
            serde_json::json!({
                "id": "chatcmpl-9", "object": "chat.completion", "model": "test-model",
                "system_fingerprint": null,
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": null, "refusal": null,
                        "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "add", "arguments": "{\"a\":1,\"b\":2}"}}]},
                    "logprobs": null,
                    "finish_reason": "tool_calls"
                }],
                "usage": {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12,
                          "prompt_tokens_details": {"cached_tokens": 0}}
            }),
        ),
        "nonstream_bad" => Response::builder()
            .header("content-type", "application/json")
            .body(Body::from("{\"choices\": [ {\"message\": "))
            .expect("response"),
        // The tool loop: tool calls until the request carries tool answers, then a final answer.
        "agent" => {
            let request = serde_json::from_slice::<serde_json::Value>(&body).unwrap_or_default();
            let answered = request["messages"]
                .as_array()
                .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
            if request["stream"] == true {
                // Streamed: the calls' arguments split in two, or the answer in two deltas.
                let mut events = Vec::new();
                if answered {
                    events.push(text_chunk("All "));
                    events.push(text_chunk("done."));
                } else {
                    for (i, (id, name, args)) in [
                        ("c1", "get_weather", r#"{"city": "Zürich"}"#),
                        ("c2", "add", r#"{"a": 1, "b": 2}"#),
                    ]
                    .into_iter()
                    .enumerate()
                    {
                        let (head, tail) = args.split_at(args.len() / 2);
                        events.push(serde_json::json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                            {"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": head}}]}}]}).to_string());
                        events.push(serde_json::json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                            {"index": i, "function": {"arguments": tail}}]}}]}).to_string());
                    }
                }
                let reason = if answered { "stop" } else { "tool_calls" };
                events.push(serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}).to_string());
                events.push("[DONE]".to_owned());
                return Ok(sse_response(sse(&events)));
            }
            if answered {
                completion(serde_json::json!({"role": "assistant", "content": "All done."}), "stop")
            } else {
                let call = |id: &str, name: &str, args: &str| {
                    serde_json::json!({"id": id, "type": "function",
                        "function": {"name": name, "arguments": args}})
                };
                completion(
                    serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
                        call("c1", "get_weather", r#"{"city": "Zürich"}"#),
                        call("c2", "add", r#"{"a": "one", "b": 2}"#),
                        call("c3", "launch_rockets", "{}"),
                        call("c4", "big", ""),
                        call("c5", "fail", "{}"),
                        call("c6", "add", r#"{"a": 1, "b": 2}"#),
                        call("c7", "add", "{not json"),
                    ]}),
                    "tool_calls",
                )
            }
        }
        "loop_forever" => completion(
            serde_json::json!({"role": "assistant", "tool_calls": [{"id": format!("c{count}"),
                "type": "function", "function": {"name": "add", "arguments": "{\"a\":1,\"b\":1}"}}]}),
            "tool_calls",
        ),
        other => json_response(
            StatusCode::NOT_FOUND,
            serde_json::json!({"error": {"message": format!("no scenario {other}")}}),
        ),
    })
}
