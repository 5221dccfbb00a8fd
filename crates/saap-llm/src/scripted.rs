//! A scripted model behind a real OpenAI-compatible endpoint (feature `scripted`): a server
//! on a free loopback port whose answers a Rust function writes, for demos, examples and tests
//! that must run offline and give the same answer every time, through the same client, SSE
//! stream, usage and price path as a hosted model.
//!
//! `POST {base_url}/chat/completions` answers every request with [`ScriptedReply`] of the
//! script: streamed (`"stream": true`: a role chunk, one chunk per word, the finish reason,
//! then a usage chunk) or whole. Tokens are counted as whitespace-separated words of the
//! messages' text (prompt) and of the answer (completion). A request that is not JSON gets a
//! 400 that says so. The server runs on its own thread (its own tokio runtime), so it can be
//! started outside an async context, and stops when the [`ScriptedServer`] is dropped.
//!
//! Must not be mistaken for a model: it answers only what its script says, and it must never
//! bind anything but loopback.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{Response, StatusCode};
use axum::routing::post;
use serde_json::{Value, json};

use crate::config::LlmConfig;

/// What the script sees of a request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScriptedRequest {
    /// The model asked for.
    pub model: String,
    /// The messages: (role, text) — a message's text parts joined, tool calls left out.
    pub messages: Vec<(String, String)>,
    /// The names of the tools offered.
    pub tools: Vec<String>,
}

impl ScriptedRequest {
    /// The text of the last message of `role`.
    pub fn last(&self, role: &str) -> Option<&str> {
        self.messages
            .iter()
            .rev()
            .find(|(r, _)| r == role)
            .map(|(_, t)| t.as_str())
    }
}

/// What the scripted model answers.
#[derive(Clone, Debug, PartialEq)]
pub enum ScriptedReply {
    /// An assistant message with this text (`finish_reason: "stop"`).
    Text(String),
    /// One tool call (`finish_reason: "tool_calls"`).
    ToolCall {
        /// The tool's name.
        name: String,
        /// Its arguments (sent as JSON text, as the API does).
        arguments: Value,
    },
}

type Script = Arc<dyn Fn(&ScriptedRequest) -> ScriptedReply + Send + Sync>;

struct ServerState {
    model: String,
    script: Script,
}

/// A running scripted model; stops when dropped.
pub struct ScriptedServer {
    base_url: String,
    model: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for ScriptedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedServer")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .finish()
    }
}

impl ScriptedServer {
    /// Starts a server on a free loopback port that answers as `model` with what `script`
    /// returns for each request.
    pub fn start(
        model: &str,
        script: impl Fn(&ScriptedRequest) -> ScriptedReply + Send + Sync + 'static,
    ) -> std::io::Result<ScriptedServer> {
        let state = Arc::new(ServerState {
            model: model.to_owned(),
            script: Arc::new(script),
        });
        let listener = std::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let thread = std::thread::Builder::new()
            .name("saap-scripted-model".to_owned())
            .spawn(move || {
                runtime.block_on(async move {
                    let app = Router::new()
                        .route("/v1/chat/completions", post(answer))
                        .route("/chat/completions", post(answer))
                        .with_state(state);
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            tracing::error!(error = %e, "the scripted model cannot listen");
                            return;
                        }
                    };
                    let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                        let _ = stopped.await;
                    });
                    if let Err(e) = serve.await {
                        tracing::error!(error = %e, "the scripted model stopped");
                    }
                });
            })?;
        Ok(ScriptedServer {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            model: model.to_owned(),
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The OpenAI-style base URL (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// A client configuration for this server and its model (no key).
    pub fn config(&self) -> LlmConfig {
        LlmConfig::new(self.base_url.clone()).with_model(self.model.clone())
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Words, as the scripted model counts tokens.
fn words(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

fn request_of(body: &Value, default_model: &str) -> ScriptedRequest {
    ScriptedRequest {
        model: body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or(default_model)
            .to_owned(),
        messages: body
            .get("messages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|m| {
                (
                    m.get("role")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    m.get("content").map(text_of).unwrap_or_default(),
                )
            })
            .collect(),
        tools: body
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
            .map(str::to_owned)
            .collect(),
    }
}

fn response(status: StatusCode, content_type: &str, body: String) -> Response<Body> {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    if let Ok(v) = content_type.parse() {
        r.headers_mut().insert("content-type", v);
    }
    r
}

async fn answer(State(state): State<Arc<ServerState>>, body: String) -> Response<Body> {
    let Ok(body) = serde_json::from_str::<Value>(&body) else {
        let error = json!({"error": {"message": "the request body is not JSON", "type": "invalid_request_error"}});
        return response(
            StatusCode::BAD_REQUEST,
            "application/json",
            error.to_string(),
        );
    };
    let request = request_of(&body, &state.model);
    let reply = (state.script)(&request);
    let model = request.model.clone();
    let prompt = request.messages.iter().map(|(_, t)| words(t)).sum::<u64>();
    let (message, finish, completion) = match &reply {
        ScriptedReply::Text(text) => (
            json!({"role": "assistant", "content": text}),
            "stop",
            words(text),
        ),
        ScriptedReply::ToolCall { name, arguments } => (
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": name, "arguments": arguments.to_string()}}]}),
            "tool_calls",
            1,
        ),
    };
    let usage = json!({"prompt_tokens": prompt, "completion_tokens": completion,
        "total_tokens": prompt + completion});
    let streamed = body.get("stream").and_then(Value::as_bool) == Some(true);
    if !streamed {
        let whole = json!({"id": "chatcmpl-scripted", "object": "chat.completion", "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage});
        return response(StatusCode::OK, "application/json", whole.to_string());
    }
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    match &reply {
        ScriptedReply::Text(text) => {
            // One chunk per word, each with the space before the next.
            let mut rest = text.as_str();
            while !rest.is_empty() {
                let end = rest
                    .char_indices()
                    .skip_while(|(_, c)| c.is_whitespace())
                    .find(|(_, c)| c.is_whitespace())
                    .map_or(rest.len(), |(i, _)| i);
                let end = rest[end..]
                    .char_indices()
                    .find(|(_, c)| !c.is_whitespace())
                    .map_or(rest.len(), |(i, _)| end + i);
                events.push(chunk(json!({"content": &rest[..end]}), Value::Null));
                rest = &rest[end..];
            }
        }
        ScriptedReply::ToolCall { .. } => {
            let mut call = message["tool_calls"][0].clone();
            call["index"] = json!(0);
            events.push(chunk(json!({"tool_calls": [call]}), Value::Null));
        }
    }
    events.push(chunk(json!({}), json!(finish)));
    events.push(
        json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk",
        "model": model, "choices": [], "usage": usage}),
    );
    let mut text: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    text.push_str("data: [DONE]\n\n");
    response(StatusCode::OK, "text/event-stream", text)
}
