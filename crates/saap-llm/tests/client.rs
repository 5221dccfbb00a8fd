//! The client against an in-process OpenAI-compatible server: good streams, lenient servers,
//! retries, and every bad input the client must turn into a clear error — never a panic or a
//! hang (each test is bounded by an outer timeout).

mod support;

use std::time::{Duration, Instant};

use saap_llm::{
    CancellationToken, ChatRequest, FinishReason, LlmClient, LlmConfig, LlmError, Message,
    StreamEvent,
};
use support::TestServer;

const KEY: &str = "sk-test-SECRET-4242";

fn config(server: &TestServer, scenario: &str) -> LlmConfig {
    let mut config = LlmConfig::new(server.base_url(scenario))
        .with_api_key(KEY)
        .with_model("test-model");
    config.retry.initial_backoff = Duration::from_millis(20);
    config.retry.max_backoff = Duration::from_millis(50);
    config.request_timeout = Duration::from_secs(5);
    config.idle_timeout = Duration::from_secs(5);
    config
}

fn request() -> ChatRequest {
    ChatRequest::new(vec![Message::user("Say hello")])
}

/// Bounds a test step: a hang fails the test instead of blocking the suite.
async fn bounded<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(20), future).await {
        Ok(value) => value,
        Err(_) => panic!("{what} hung"),
    }
}

/// Runs a streamed call to the end, returning the text seen and the result.
async fn stream_all(config: LlmConfig) -> (String, Result<saap_llm::Completion, LlmError>) {
    let client = LlmClient::new(config).expect("client");
    let mut text = String::new();
    let result = bounded("stream", async {
        let stream = client.stream(&request(), CancellationToken::new()).await?;
        stream.collect(|delta| text.push_str(delta)).await
    })
    .await;
    (text, result)
}

fn assert_key_hidden(error: &LlmError) {
    let shown = format!("{error} {error:?}");
    assert!(!shown.contains(KEY), "the key leaked into {shown}");
}

async fn stream_error(
    server: &TestServer,
    scenario: &str,
    tweak: impl FnOnce(&mut LlmConfig),
) -> LlmError {
    let mut config = config(server, scenario);
    tweak(&mut config);
    let (_, result) = stream_all(config).await;
    let error = result.expect_err("this scenario must fail");
    assert_key_hidden(&error);
    error
}

#[tokio::test]
async fn streams_text_deltas_and_usage() {
    let server = TestServer::start().await;
    let (text, result) = stream_all(config(&server, "text")).await;
    let done = result.expect("stream succeeds");
    assert_eq!(text, "Hello, wörld");
    assert_eq!(done.message.content.as_deref(), Some("Hello, wörld"));
    assert_eq!(done.finish_reason, Some(FinishReason::Stop));
    let usage = done.usage.expect("usage from the final chunk");
    assert_eq!(
        (
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.total_tokens
        ),
        (11, 3, 14)
    );
    assert_eq!(done.model.as_deref(), Some("test-model"));

    let body = server.body("text");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["model"], "test-model");
    assert_eq!(
        server.auth("text").as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
}

#[tokio::test]
async fn stream_events_come_one_by_one() {
    let server = TestServer::start().await;
    let client = LlmClient::new(config(&server, "text")).expect("client");
    let mut stream = client
        .stream(&request(), CancellationToken::new())
        .await
        .expect("stream");
    let mut events = Vec::new();
    while let Some(event) = bounded("next", stream.next()).await.expect("no error") {
        events.push(event);
    }
    assert_eq!(events.len(), 4, "three text deltas and the end: {events:?}");
    assert_eq!(events[0], StreamEvent::Text("Hel".to_owned()));
    assert!(matches!(events[3], StreamEvent::Finished(_)));
    assert_eq!(stream.next().await.expect("fused"), None);
}

#[tokio::test]
async fn joins_tool_call_arguments_split_across_chunks() {
    let server = TestServer::start().await;
    let (text, result) = stream_all(config(&server, "tools")).await;
    let done = result.expect("stream succeeds");
    assert_eq!(text, "");
    assert_eq!(done.finish_reason, Some(FinishReason::ToolCalls));
    let calls = &done.message.tool_calls;
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].id.as_str(), calls[0].function.name.as_str()),
        ("call_a", "get_weather")
    );
    assert_eq!(calls[0].function.arguments, r#"{"city": "Zürich"}"#);
    assert_eq!(
        (calls[1].id.as_str(), calls[1].function.name.as_str()),
        ("call_b", "get_time")
    );
    assert_eq!(calls[1].function.arguments, r#"{"tz": "CET"}"#);
    assert_eq!(done.usage.map(|u| u.total_tokens), Some(29));
}

#[tokio::test]
async fn lenient_server_still_works() {
    let server = TestServer::start().await;
    let (text, result) = stream_all(config(&server, "lenient")).await;
    let done = result.expect("empty finish reasons, unknown fields and no [DONE] are accepted");
    assert_eq!(text, "ab");
    assert_eq!(done.finish_reason, Some(FinishReason::Stop));
    assert_eq!(done.usage, None);
    assert_eq!(done.id, None);
}

#[tokio::test]
async fn non_streamed_completion_with_tool_calls() {
    let server = TestServer::start().await;
    let client = LlmClient::new(config(&server, "nonstream")).expect("client");
    let done = bounded(
        "complete",
        client.complete(&request(), &CancellationToken::new()),
    )
    .await
    .expect("completes");
    assert_eq!(done.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(
        done.message.tool_calls[0].function.arguments,
        r#"{"a":1,"b":2}"#
    );
    assert_eq!(done.usage.map(|u| u.total_tokens), Some(12));
    assert_eq!(server.body("nonstream")["stream"], false);
}

#[tokio::test]
async fn retries_429_honouring_retry_after() {
    let server = TestServer::start().await;
    let started = Instant::now();
    let (text, result) = stream_all(config(&server, "rate_limited")).await;
    result.expect("succeeds on the second attempt");
    assert_eq!(text, "Hello, wörld");
    assert_eq!(server.count("rate_limited"), 2);
    // Retry-After: 1 was honoured (the computed backoff is 20 ms).
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "waited {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn retry_after_beyond_the_ceiling_fails_at_once() {
    let server = TestServer::start().await;
    let error = stream_error(&server, "rate_limited_long", |_| {}).await;
    assert_eq!(error.code(), "LLM_RETRY_AFTER_TOO_LONG");
    assert!(error.to_string().contains("3600s"), "{error}");
    assert_eq!(server.count("rate_limited_long"), 1);
}

#[tokio::test]
async fn retries_500_then_succeeds() {
    let server = TestServer::start().await;
    let (_, result) = stream_all(config(&server, "error500")).await;
    result.expect("succeeds on the second attempt");
    assert_eq!(server.count("error500"), 2);
}

#[tokio::test]
async fn client_errors_are_not_retried_and_show_the_server_message() {
    let server = TestServer::start().await;
    let error = stream_error(&server, "bad_request", |_| {}).await;
    assert_eq!(error.code(), "LLM_STATUS");
    assert!(error.to_string().contains("does not exist"), "{error}");
    assert_eq!(server.count("bad_request"), 1);
}

#[tokio::test]
async fn html_answers_are_malformed() {
    let server = TestServer::start().await;
    let error = stream_error(&server, "html", |_| {}).await;
    assert_eq!(error.code(), "LLM_MALFORMED");
    assert!(error.to_string().contains("HTML"), "{error}");

    let error = stream_error(&server, "html_502", |c| c.retry.max_retries = 1).await;
    assert_eq!(error.code(), "LLM_STATUS");
    assert!(error.to_string().contains("502 Bad Gateway"), "{error}");
    assert!(error.to_string().contains("2 attempt"), "{error}");
}

#[tokio::test]
async fn non_json_chunk_is_malformed_and_says_what_arrived() {
    let server = TestServer::start().await;
    let error = stream_error(&server, "non_json", |_| {}).await;
    assert_eq!(error.code(), "LLM_MALFORMED");
    assert!(error.to_string().contains("this is not json"), "{error}");
}

#[tokio::test]
async fn json_instead_of_a_stream_is_malformed() {
    let server = TestServer::start().await;
    let error = stream_error(&server, "not_sse", |_| {}).await;
    assert_eq!(error.code(), "LLM_MALFORMED");
    assert!(error.to_string().contains("unexpected"), "{error}");
}

#[tokio::test]
async fn mid_stream_errors_are_reported() {
    let server = TestServer::start().await;
    let error = stream_error(&server, "midstream_error", |_| {}).await;
    assert_eq!(error.code(), "LLM_SERVER_ERROR");
    assert!(error.to_string().contains("had an error"), "{error}");

    let error = stream_error(&server, "error_event", |_| {}).await;
    assert_eq!(error.code(), "LLM_SERVER_ERROR");
    assert!(
        error.to_string().contains("context length exceeded"),
        "{error}"
    );
}

#[tokio::test]
async fn truncated_and_cut_streams() {
    let server = TestServer::start().await;
    let error = stream_error(&server, "truncated", |_| {}).await;
    assert_eq!(error.code(), "LLM_TRUNCATED");
    assert!(
        error.to_string().contains("\\\"content\\\":\\\"lo\\\""),
        "says what arrived last: {error}"
    );

    let error = stream_error(&server, "cut", |_| {}).await;
    assert!(
        matches!(error.code(), "LLM_TRANSPORT" | "LLM_TRUNCATED"),
        "a cut connection is a transport error or a truncation: {error}"
    );
}

#[tokio::test]
async fn oversized_answers_are_refused() {
    let server = TestServer::start().await;
    let error = stream_error(&server, "oversized", |c| {
        c.limits.max_response_bytes = 64 * 1024
    })
    .await;
    assert_eq!(error, LlmError::TooLarge { limit: 64 * 1024 });

    let mut config = config(&server, "oversized_json");
    config.limits.max_response_bytes = 64 * 1024;
    let client = LlmClient::new(config).expect("client");
    let error = bounded(
        "complete",
        client.complete(&request(), &CancellationToken::new()),
    )
    .await
    .expect_err("too large");
    assert_eq!(error.code(), "LLM_TOO_LARGE");

    let error = stream_error(&server, "long_line", |c| c.limits.max_line_bytes = 1024).await;
    assert_eq!(error.code(), "LLM_LINE_TOO_LONG");

    let error = stream_error(&server, "many_tools", |c| c.limits.max_tool_calls = 10).await;
    assert_eq!(error.code(), "LLM_TOO_MANY_TOOL_CALLS");
}

#[tokio::test]
async fn malformed_non_streamed_body() {
    let server = TestServer::start().await;
    let client = LlmClient::new(config(&server, "nonstream_bad")).expect("client");
    let error = bounded(
        "complete",
        client.complete(&request(), &CancellationToken::new()),
    )
    .await
    .expect_err("truncated JSON");
    assert_eq!(error.code(), "LLM_MALFORMED");
    assert!(error.to_string().contains("{\\\"choices\\\""), "{error}");
}

#[tokio::test]
async fn idle_stream_times_out() {
    let server = TestServer::start().await;
    let started = Instant::now();
    let error = stream_error(&server, "slow", |c| {
        c.idle_timeout = Duration::from_millis(200)
    })
    .await;
    assert_eq!(error.code(), "LLM_IDLE_TIMEOUT");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn whole_stream_times_out() {
    let server = TestServer::start().await;
    let error = stream_error(&server, "slow", |c| {
        c.stream_timeout = Duration::from_millis(200)
    })
    .await;
    assert_eq!(error.code(), "LLM_STREAM_TIMEOUT");
}

#[tokio::test]
async fn cancellation_ends_a_stream_in_flight() {
    let server = TestServer::start().await;
    let client = LlmClient::new(config(&server, "slow")).expect("client");
    let cancel = CancellationToken::new();
    let mut stream = client
        .stream(&request(), cancel.clone())
        .await
        .expect("stream");
    let first = bounded("first delta", stream.next()).await.expect("first");
    assert_eq!(first, Some(StreamEvent::Text("first".to_owned())));
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        canceller.cancel();
    });
    let error = bounded("cancelled stream", stream.next())
        .await
        .expect_err("cancelled");
    assert_eq!(error, LlmError::Cancelled);
    assert_eq!(stream.next().await.expect("fused"), None);
}

#[tokio::test]
async fn cancellation_ends_a_retry_wait() {
    let server = TestServer::start().await;
    let mut config = config(&server, "rate_limited_long");
    config.retry.max_retry_after = Duration::from_secs(7200);
    let client = LlmClient::new(config).expect("client");
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        canceller.cancel();
    });
    let error = bounded("cancelled wait", client.complete(&request(), &cancel))
        .await
        .expect_err("cancelled");
    assert_eq!(error, LlmError::Cancelled);
}

#[tokio::test]
async fn a_server_that_is_down() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let mut config = LlmConfig::new(format!("http://127.0.0.1:{port}/v1"))
        .with_api_key(KEY)
        .with_model("m");
    config.retry.max_retries = 1;
    config.retry.initial_backoff = Duration::from_millis(10);
    let client = LlmClient::new(config).expect("client");
    let error = bounded(
        "down",
        client.complete(&request(), &CancellationToken::new()),
    )
    .await
    .expect_err("nothing listens");
    assert_eq!(error.code(), "LLM_CONNECT");
    assert!(
        error.to_string().contains(&format!("127.0.0.1:{port}")),
        "{error}"
    );
    assert_key_hidden(&error);
}

#[tokio::test]
async fn no_model_is_a_config_error() {
    let client = LlmClient::new(LlmConfig::new("http://127.0.0.1:9/v1")).expect("client");
    let error = client
        .complete(&request(), &CancellationToken::new())
        .await
        .expect_err("no model");
    assert_eq!(error.code(), "LLM_CONFIG");
    assert!(error.to_string().contains("OPENAI_MODEL"));
}

#[test]
fn the_key_is_not_in_debug_output() {
    let config = LlmConfig::new("http://127.0.0.1:9/v1").with_api_key(KEY);
    assert!(!format!("{config:?}").contains(KEY));
    let client = LlmClient::new(config).expect("client");
    assert!(!format!("{client:?}").contains(KEY));
}
