//! The API key never reaches the logs, even at TRACE level of every crate (reqwest and hyper
//! included) through a retried call and an error.

mod support;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use saap_llm::{CancellationToken, ChatRequest, LlmClient, LlmConfig, Message};

const KEY: &str = "sk-test-SECRET-LOGS-77";

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn the_key_is_never_logged() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let server = support::TestServer::start().await;
    for scenario in ["error500", "bad_request"] {
        let mut config = LlmConfig::new(server.base_url(scenario))
            .with_api_key(KEY)
            .with_model("m");
        config.retry.initial_backoff = Duration::from_millis(10);
        let client = LlmClient::new(config).expect("client");
        let request = ChatRequest::new(vec![Message::user("hi")]);
        let _ = client.stream(&request, CancellationToken::new()).await;
    }
    let logs = String::from_utf8_lossy(&captured.0.lock().expect("lock")).into_owned();
    assert!(logs.contains("retrying"), "the retry was logged: {logs}");
    assert!(!logs.contains(KEY), "the key was logged");
}
