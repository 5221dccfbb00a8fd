//! [`LlmClient`]: sends chat completion requests, with retries, timeouts and cancellation.
//!
//! One client holds one HTTP connection pool; clone it (cheap) rather than building another.
//! [`LlmClient::complete`] returns a whole [`Completion`]; [`LlmClient::stream`] returns a
//! [`ChatStream`] of deltas. Both retry transient failures (connection refused, 408/409/429/5xx)
//! before any of the answer was handed out, waiting as the server's `Retry-After` asks or with
//! exponential backoff. Cancellation is explicit: every call takes a [`CancellationToken`], and
//! cancelling it ends the call (waits included) with [`LlmError::Cancelled`]; dropping the
//! future or the stream also ends it and closes the connection.
//!
//! This module must not log or return the API key: it is only ever put in the `Authorization`
//! header, and logs name the endpoint, the attempt and the status, never headers.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::ChatRequest;
use crate::config::LlmConfig;
use crate::error::{LlmError, chain, excerpt};
use crate::response::{Completion, WireCompletion};
use crate::retry::{backoff, is_retryable_status, retry_after};
use crate::stream::ChatStream;

/// A client of one OpenAI-compatible server.
#[derive(Clone)]
pub struct LlmClient {
    http: reqwest::Client,
    config: Arc<LlmConfig>,
    url: reqwest::Url,
    /// The URL for messages: no user info, no query.
    display_url: String,
}

impl fmt::Debug for LlmClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmClient")
            .field("url", &self.display_url)
            .field("model", &self.config.model)
            .finish_non_exhaustive()
    }
}

/// A successful response and when its attempt began.
pub(crate) struct Sent {
    pub response: reqwest::Response,
    pub started: Instant,
}

impl LlmClient {
    /// A client for `config`. Fails when the base URL is not an http(s) URL or the HTTP stack
    /// cannot be set up.
    pub fn new(config: LlmConfig) -> Result<LlmClient, LlmError> {
        let url = config.completions_url()?;
        let mut display = url.clone();
        let _ = display.set_username("");
        let _ = display.set_password(None);
        display.set_query(None);
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|e| LlmError::InvalidConfig {
                what: format!("the HTTP client could not be set up: {}", chain(e)),
            })?;
        Ok(LlmClient {
            http,
            config: Arc::new(config),
            url,
            display_url: display.to_string(),
        })
    }

    /// The configuration this client was built with.
    pub fn config(&self) -> &LlmConfig {
        &self.config
    }

    /// Asks for a whole answer (no streaming).
    pub async fn complete(
        &self,
        request: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<Completion, LlmError> {
        let body = self.body(request, false)?;
        let Sent { response, started } = self.send(body, false, cancel).await?;
        let deadline = started + self.config.request_timeout;
        check_not_html(&response, self.config.limits.max_error_excerpt)?;
        let limits = &self.config.limits;
        let bytes = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(LlmError::Cancelled),
            _ = tokio::time::sleep_until(deadline) => {
                return Err(LlmError::Timeout { after: self.config.request_timeout })
            }
            read = read_bounded(response, limits.max_response_bytes) => read?,
        };
        let wire: WireCompletion = serde_json::from_slice(&bytes).map_err(|e| {
            LlmError::malformed(
                format!("the body is not a chat completion: {e}"),
                &bytes,
                limits.max_error_excerpt,
            )
        })?;
        let choice = wire
            .choices
            .into_iter()
            .find(|c| c.index == 0)
            .ok_or_else(|| {
                LlmError::malformed("the answer has no choice", &bytes, limits.max_error_excerpt)
            })?;
        if choice.message.tool_calls.len() > limits.max_tool_calls {
            return Err(LlmError::TooManyToolCalls {
                limit: limits.max_tool_calls,
            });
        }
        Ok(Completion {
            id: wire.id,
            model: wire.model,
            message: choice.message,
            finish_reason: choice.finish_reason,
            usage: wire.usage.map(|u| u.normalized()),
        })
    }

    /// Asks for a streamed answer. The returned stream hands out deltas as they arrive and the
    /// whole answer at the end; `cancel` ends it at any point.
    pub async fn stream(
        &self,
        request: &ChatRequest,
        cancel: CancellationToken,
    ) -> Result<ChatStream, LlmError> {
        let body = self.body(request, true)?;
        let Sent { response, .. } = self.send(body, true, &cancel).await?;
        check_not_html(&response, self.config.limits.max_error_excerpt)?;
        Ok(ChatStream::new(response, cancel, &self.config))
    }

    fn body(&self, request: &ChatRequest, stream: bool) -> Result<Bytes, LlmError> {
        let model = request
            .model
            .as_deref()
            .or(self.config.model.as_deref())
            .ok_or_else(|| LlmError::InvalidConfig {
                what: "no model is named; set it on the request, in the config or in OPENAI_MODEL"
                    .to_owned(),
            })?;
        let body = request
            .body(model, stream)
            .map_err(|e| LlmError::InvalidConfig {
                what: format!("the request cannot be written as JSON: {e}"),
            })?;
        Ok(Bytes::from(body))
    }

    /// Sends until a success status, retrying what is transient.
    pub(crate) async fn send(
        &self,
        body: Bytes,
        stream: bool,
        cancel: &CancellationToken,
    ) -> Result<Sent, LlmError> {
        let policy = &self.config.retry;
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let started = Instant::now();
            let mut request = self
                .http
                .post(self.url.clone())
                .header(CONTENT_TYPE, "application/json")
                .header(
                    ACCEPT,
                    if stream {
                        "text/event-stream"
                    } else {
                        "application/json"
                    },
                )
                .body(body.clone());
            if let Some(key) = &self.config.api_key {
                let mut value = HeaderValue::from_str(&format!(
                    "Bearer {}",
                    key.expose_to_header()
                ))
                .map_err(|_| LlmError::InvalidConfig {
                    what: "the API key has characters a header cannot carry; check OPENAI_API_KEY"
                        .to_owned(),
                })?;
                value.set_sensitive(true);
                request = request.header(AUTHORIZATION, value);
            }
            tracing::debug!(url = %self.display_url, attempt, stream, "model request");
            let outcome = tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(LlmError::Cancelled),
                sent = tokio::time::timeout(self.config.request_timeout, request.send()) => sent,
            };
            let retry_wait = match outcome {
                Err(_elapsed) => {
                    return Err(LlmError::Timeout {
                        after: self.config.request_timeout,
                    });
                }
                Ok(Err(e)) if e.is_timeout() => {
                    return Err(LlmError::Timeout {
                        after: self.config.request_timeout,
                    });
                }
                Ok(Err(e)) => {
                    let is_connect = e.is_connect();
                    let error = if is_connect {
                        LlmError::Connect {
                            url: self.display_url.clone(),
                            reason: chain(e),
                        }
                    } else {
                        LlmError::Transport { reason: chain(e) }
                    };
                    if attempt > policy.max_retries || !is_connect {
                        return Err(error);
                    }
                    tracing::warn!(url = %self.display_url, attempt, code = error.code(), "model server unreachable; retrying");
                    backoff(policy, attempt, jitter())
                }
                Ok(Ok(response)) if response.status().is_success() => {
                    return Ok(Sent { response, started });
                }
                Ok(Ok(response)) => {
                    let status = response.status().as_u16();
                    let asked = retry_after(response.headers(), SystemTime::now());
                    let text = read_excerpt(response, self.config.limits.max_error_excerpt).await;
                    if attempt > policy.max_retries || !is_retryable_status(status) {
                        return Err(LlmError::Status {
                            status,
                            attempts: attempt,
                            body: text,
                        });
                    }
                    match asked {
                        Some(wait) if wait > policy.max_retry_after => {
                            return Err(LlmError::RetryAfterTooLong {
                                retry_after: wait,
                                max: policy.max_retry_after,
                            });
                        }
                        Some(wait) => wait,
                        None => backoff(policy, attempt, jitter()),
                    }
                }
            };
            tracing::warn!(url = %self.display_url, attempt, wait_ms = retry_wait.as_millis() as u64, "model request failed transiently; retrying");
            tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(LlmError::Cancelled),
                _ = tokio::time::sleep(retry_wait) => {}
            }
        }
    }
}

/// A 200 answer with an HTML body is a proxy or login page, not the API.
fn check_not_html(response: &reqwest::Response, max_excerpt: usize) -> Result<(), LlmError> {
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if content_type.to_ascii_lowercase().contains("text/html") {
        return Err(LlmError::malformed(
            "the server answered with an HTML page",
            content_type.as_bytes(),
            max_excerpt,
        ));
    }
    Ok(())
}

/// Reads a whole body, refusing more than `limit` bytes (before reading, when the length is
/// announced).
async fn read_bounded(mut response: reqwest::Response, limit: usize) -> Result<Vec<u8>, LlmError> {
    if response
        .content_length()
        .is_some_and(|len| len > limit as u64)
    {
        return Err(LlmError::TooLarge { limit });
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| LlmError::Transport { reason: chain(e) })?
    {
        if bytes.len() + chunk.len() > limit {
            return Err(LlmError::TooLarge { limit });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// The start of an error body, for the message; never fails (an unreadable body says so).
async fn read_excerpt(mut response: reqwest::Response, max: usize) -> String {
    let mut bytes = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), async {
        while bytes.len() <= max {
            match response.chunk().await {
                Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
                _ => break,
            }
        }
    })
    .await;
    if read.is_err() && bytes.is_empty() {
        return "(the body did not arrive)".to_owned();
    }
    excerpt(&bytes, max)
}

fn jitter() -> u32 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0)
}
