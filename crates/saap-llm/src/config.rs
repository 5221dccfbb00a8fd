//! How to reach the model server and how much to accept from it.
//!
//! [`LlmConfig`] is plain data: base URL, key, default model, timeouts, the retry policy and the
//! [`Limits`] on everything the server sends. [`LlmConfig::from_env`] reads the usual
//! `OPENAI_BASE_URL`, `OPENAI_API_KEY` and `OPENAI_MODEL`. This module must not do I/O beyond
//! reading those variables, and must not make the key visible (see [`crate::ApiKey`]).

use std::time::Duration;

use crate::error::LlmError;
use crate::secret::ApiKey;

/// The base URL used when neither the config nor `OPENAI_BASE_URL` gives one.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Bounds on what the client accepts from a server. Every one is checked; going past one is an
/// error that names the limit, never an allocation without end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest non-streamed response body, and largest total of a streamed one, in bytes.
    pub max_response_bytes: usize,
    /// Longest line of a server-sent event stream, in bytes.
    pub max_line_bytes: usize,
    /// Most tool calls in one response.
    pub max_tool_calls: usize,
    /// Longest error body kept for the error message, in bytes (the rest is cut).
    pub max_error_excerpt: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_response_bytes: 16 * 1024 * 1024,
            max_line_bytes: 1024 * 1024,
            max_tool_calls: 128,
            max_error_excerpt: 300,
        }
    }
}

/// When and how often a failed request is tried again.
///
/// Retried: connection failures, 408, 409, 429 and 5xx answers, before any byte of the answer
/// was handed to the caller (a stream that failed midway is never retried: its deltas were
/// already seen). The wait doubles from `initial_backoff` up to `max_backoff`, with jitter; a
/// `Retry-After` header replaces it, up to `max_retry_after`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries after the first one (0: no retry).
    pub max_retries: u32,
    /// Wait before the first retry.
    pub initial_backoff: Duration,
    /// Longest computed wait.
    pub max_backoff: Duration,
    /// Longest `Retry-After` honoured; a server asking for more fails the call at once with
    /// the wait it asked for.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

/// Everything the client needs to talk to one OpenAI-compatible server.
#[derive(Clone, Debug)]
pub struct LlmConfig {
    /// Base URL up to and including the API version, e.g. `http://127.0.0.1:8080/v1`; the
    /// client appends `/chat/completions`.
    pub base_url: String,
    /// Bearer token; `None` sends no `Authorization` header (local servers).
    pub api_key: Option<ApiKey>,
    /// Model used when a request names none.
    pub model: Option<String>,
    /// Time to establish a connection.
    pub connect_timeout: Duration,
    /// Time for a whole non-streamed call, or until a stream's response headers arrive.
    pub request_timeout: Duration,
    /// Longest gap between two pieces of a stream.
    pub idle_timeout: Duration,
    /// Longest time a whole stream may take.
    pub stream_timeout: Duration,
    /// Retries on transient failures.
    pub retry: RetryPolicy,
    /// Bounds on what the server sends.
    pub limits: Limits,
}

impl LlmConfig {
    /// A config for `base_url` with no key, no default model and the default timeouts, retry
    /// policy and limits.
    pub fn new(base_url: impl Into<String>) -> LlmConfig {
        LlmConfig {
            base_url: base_url.into(),
            api_key: None,
            model: None,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(120),
            idle_timeout: Duration::from_secs(60),
            stream_timeout: Duration::from_secs(600),
            retry: RetryPolicy::default(),
            limits: Limits::default(),
        }
    }

    /// Reads `OPENAI_BASE_URL` (default [`DEFAULT_BASE_URL`]), `OPENAI_API_KEY` and
    /// `OPENAI_MODEL`; everything else as [`LlmConfig::new`].
    pub fn from_env() -> LlmConfig {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// As [`LlmConfig::from_env`], reading the variables through `lookup` (for tests and for
    /// callers with their own configuration source).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> LlmConfig {
        let base_url = lookup("OPENAI_BASE_URL")
            .map(|url| url.trim().to_owned())
            .filter(|url| !url.is_empty())
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
        let mut config = LlmConfig::new(base_url);
        config.api_key = lookup("OPENAI_API_KEY").and_then(ApiKey::new);
        config.model = lookup("OPENAI_MODEL")
            .map(|m| m.trim().to_owned())
            .filter(|m| !m.is_empty());
        config
    }

    /// Sets the key.
    pub fn with_api_key(mut self, key: impl Into<String>) -> LlmConfig {
        self.api_key = ApiKey::new(key);
        self
    }

    /// Sets the default model.
    pub fn with_model(mut self, model: impl Into<String>) -> LlmConfig {
        self.model = Some(model.into());
        self
    }

    /// The URL of the chat completions endpoint, checked.
    pub(crate) fn completions_url(&self) -> Result<reqwest::Url, LlmError> {
        let base = self.base_url.trim_end_matches('/');
        let url = format!("{base}/chat/completions");
        let parsed = reqwest::Url::parse(&url).map_err(|e| LlmError::InvalidConfig {
            what: format!("base URL {:?} is not a URL ({e})", self.base_url),
        })?;
        match parsed.scheme() {
            "http" | "https" => Ok(parsed),
            other => Err(LlmError::InvalidConfig {
                what: format!(
                    "base URL {:?} has scheme {other:?}; use http:// or https://",
                    self.base_url
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_values_are_read_and_trimmed() {
        let config = LlmConfig::from_lookup(|name| match name {
            "OPENAI_BASE_URL" => Some("http://127.0.0.1:8080/v1/ ".to_owned()),
            "OPENAI_API_KEY" => Some("sk-x\n".to_owned()),
            "OPENAI_MODEL" => Some("smollm2".to_owned()),
            _ => None,
        });
        assert_eq!(config.base_url, "http://127.0.0.1:8080/v1/");
        assert_eq!(
            config.completions_url().expect("valid").as_str(),
            "http://127.0.0.1:8080/v1/chat/completions"
        );
        assert!(config.api_key.is_some());
        assert_eq!(config.model.as_deref(), Some("smollm2"));
        assert!(!format!("{config:?}").contains("sk-x"));
    }

    #[test]
    fn defaults_without_env() {
        let config = LlmConfig::from_lookup(|_| None);
        assert_eq!(config.base_url, DEFAULT_BASE_URL);
        assert!(config.api_key.is_none());
    }

    #[test]
    fn bad_scheme_is_a_config_error() {
        let err = LlmConfig::new("ftp://x/v1")
            .completions_url()
            .expect_err("ftp is refused");
        assert_eq!(err.code(), "LLM_CONFIG");
    }
}
