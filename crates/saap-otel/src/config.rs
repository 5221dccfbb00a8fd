//! Where spans go and how: [`OtlpConfig`], validated when made, from code, from Langfuse's
//! keys, or from the standard `OTEL_EXPORTER_OTLP_*` environment variables.
//!
//! Header values carry API keys: this module must never log them, put them in an error or
//! show them in `Debug` (it prints `<redacted>`). It must not do network I/O.

use std::fmt;
use std::time::Duration;

use base64::Engine as _;
use reqwest::Url;
use reqwest::header::{HeaderName, HeaderValue};

use crate::error::ConfigError;

/// The path of the traces endpoint under a collector's base URL.
const TRACES_PATH: &str = "/v1/traces";
/// The path of Langfuse's OTLP traces endpoint under its base URL.
const LANGFUSE_PATH: &str = "/api/public/otel/v1/traces";

/// Where and how to export spans.
#[derive(Clone)]
pub struct OtlpConfig {
    /// The full URL of the traces endpoint (e.g. `http://127.0.0.1:6006/v1/traces`).
    pub endpoint: String,
    /// Headers sent with every request (auth): never logged.
    pub headers: Vec<(String, String)>,
    /// The resource's `service.name` (default `saap`).
    pub service_name: String,
    /// Timeout of one HTTP request (default 10 s).
    pub timeout: Duration,
    /// Jobs the live exporter queues before it drops (default 8192).
    pub queue_capacity: usize,
    /// Spans per request (default 512).
    pub max_batch: usize,
    /// How long the live exporter waits to fill a batch (default 1 s).
    pub flush_interval: Duration,
}

impl fmt::Debug for OtlpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(name, _)| (name.as_str(), "<redacted>"))
            .collect();
        f.debug_struct("OtlpConfig")
            .field("endpoint", &self.endpoint)
            .field("headers", &headers)
            .field("service_name", &self.service_name)
            .field("timeout", &self.timeout)
            .field("queue_capacity", &self.queue_capacity)
            .field("max_batch", &self.max_batch)
            .field("flush_interval", &self.flush_interval)
            .finish()
    }
}

/// `endpoint` checked as an http(s) URL with a host; with `append_path`, a URL without a path
/// gets `/v1/traces`.
fn checked_endpoint(endpoint: &str, append_path: bool) -> Result<String, ConfigError> {
    let bad = |reason: &str| ConfigError::Endpoint {
        endpoint: endpoint.to_owned(),
        reason: reason.to_owned(),
    };
    let trimmed = endpoint.trim();
    let url = Url::parse(trimmed).map_err(|e| bad(&e.to_string()))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(bad(&format!(
            "the scheme is `{}`, not http or https",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("it has no host"));
    }
    if append_path && (url.path().is_empty() || url.path() == "/") && url.query().is_none() {
        return Ok(format!("{}{TRACES_PATH}", trimmed.trim_end_matches('/')));
    }
    Ok(trimmed.to_owned())
}

fn checked_header(name: &str, value: &str) -> Result<(String, String), ConfigError> {
    let name = name.trim();
    HeaderName::from_bytes(name.as_bytes()).map_err(|_| ConfigError::Header {
        name: name.to_owned(),
        reason: "the name is not a valid HTTP header name".to_owned(),
    })?;
    // The value's text is never put in the error.
    HeaderValue::from_str(value).map_err(|_| ConfigError::Header {
        name: name.to_owned(),
        reason: "the value has characters HTTP headers cannot carry".to_owned(),
    })?;
    Ok((name.to_owned(), value.to_owned()))
}

impl OtlpConfig {
    fn with_endpoint(endpoint: String) -> OtlpConfig {
        OtlpConfig {
            endpoint,
            headers: Vec::new(),
            service_name: "saap".to_owned(),
            timeout: Duration::from_secs(10),
            queue_capacity: 8192,
            max_batch: 512,
            flush_interval: Duration::from_secs(1),
        }
    }

    /// A configuration for `endpoint`: the full URL of the traces endpoint, or a base URL
    /// without a path, which gets `/v1/traces`.
    pub fn new(endpoint: impl Into<String>) -> Result<OtlpConfig, ConfigError> {
        let endpoint = checked_endpoint(&endpoint.into(), true)?;
        Ok(OtlpConfig::with_endpoint(endpoint))
    }

    /// Adds header `name: value` (replacing one of the same name, case-insensitively).
    pub fn header(mut self, name: &str, value: &str) -> Result<OtlpConfig, ConfigError> {
        let (name, value) = checked_header(name, value)?;
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(&name));
        self.headers.push((name, value));
        Ok(self)
    }

    /// Sets the resource's `service.name`.
    pub fn service_name(mut self, name: &str) -> OtlpConfig {
        self.service_name = name.to_owned();
        self
    }

    /// Langfuse at `base_url` (e.g. `https://cloud.langfuse.com`) with a project's keys:
    /// `<base>/api/public/otel/v1/traces`, Basic auth, ingestion version 4.
    pub fn langfuse(
        base_url: &str,
        public_key: &str,
        secret_key: &str,
    ) -> Result<OtlpConfig, ConfigError> {
        checked_endpoint(base_url, false)?;
        let endpoint = format!("{}{LANGFUSE_PATH}", base_url.trim().trim_end_matches('/'));
        let endpoint = checked_endpoint(&endpoint, false)?;
        let token =
            base64::engine::general_purpose::STANDARD.encode(format!("{public_key}:{secret_key}"));
        OtlpConfig::with_endpoint(endpoint)
            .header("Authorization", &format!("Basic {token}"))?
            .header("x-langfuse-ingestion-version", "4")
    }

    /// From the process environment: see [`OtlpConfig::from_vars`].
    pub fn from_env() -> Result<Option<OtlpConfig>, ConfigError> {
        OtlpConfig::from_vars(|name| std::env::var(name).ok())
    }

    /// From the standard OpenTelemetry variables, read through `var`:
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is) or `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// (+ `/v1/traces`); `OTEL_EXPORTER_OTLP_HEADERS` then `OTEL_EXPORTER_OTLP_TRACES_HEADERS`
    /// (`k=v,k2=v2`, values percent-decoded; the traces-specific ones win);
    /// `OTEL_SERVICE_NAME`; `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` / `OTEL_EXPORTER_OTLP_TIMEOUT`
    /// (milliseconds); `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL`,
    /// which if set must be `http/protobuf`. `None` when no endpoint is set.
    pub fn from_vars(
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<OtlpConfig>, ConfigError> {
        let get = |name: &str| {
            var(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let endpoint = if let Some(traces) = get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            checked_endpoint(&traces, false)?
        } else if let Some(base) = get("OTEL_EXPORTER_OTLP_ENDPOINT") {
            checked_endpoint(&base, false)?;
            format!("{}{TRACES_PATH}", base.trim_end_matches('/'))
        } else {
            return Ok(None);
        };
        let protocol = get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| get("OTEL_EXPORTER_OTLP_PROTOCOL"));
        if let Some(protocol) = protocol
            && protocol != "http/protobuf"
        {
            return Err(ConfigError::Protocol { protocol });
        }
        let mut config = OtlpConfig::with_endpoint(endpoint);
        for name in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        ] {
            if let Some(list) = get(name) {
                for (k, v) in parse_header_list(&list)? {
                    config = config.header(&k, &v)?;
                }
            }
        }
        if let Some(service) = get("OTEL_SERVICE_NAME") {
            config.service_name = service;
        }
        let timeout =
            get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT").or_else(|| get("OTEL_EXPORTER_OTLP_TIMEOUT"));
        if let Some(timeout) = timeout {
            match timeout.parse::<u64>() {
                Ok(ms) if ms > 0 => config.timeout = Duration::from_millis(ms),
                _ => tracing::warn!(
                    value = %timeout,
                    "the OTLP timeout is not a positive number of milliseconds; using 10 s"
                ),
            }
        }
        Ok(Some(config))
    }
}

/// `k=v,k2=v2` with percent-encoded values (the W3C baggage format OTel uses).
fn parse_header_list(list: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out = Vec::new();
    for item in list.split(',') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let Some((name, value)) = item.split_once('=') else {
            return Err(ConfigError::Header {
                name: item.chars().take(64).collect(),
                reason: "it has no `=`: write name=value".to_owned(),
            });
        };
        let name = name.trim();
        let value = percent_encoding::percent_decode_str(value.trim())
            .decode_utf8()
            .map_err(|_| ConfigError::Header {
                name: name.to_owned(),
                reason: "the percent-decoded value is not UTF-8".to_owned(),
            })?;
        out.push((name.to_owned(), value.into_owned()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn a_base_url_gets_the_traces_path_and_a_full_one_is_kept() {
        assert_eq!(
            OtlpConfig::new("http://127.0.0.1:4318")
                .expect("ok")
                .endpoint,
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            OtlpConfig::new("http://127.0.0.1:4318/")
                .expect("ok")
                .endpoint,
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            OtlpConfig::new("https://phoenix.example/v1/traces")
                .expect("ok")
                .endpoint,
            "https://phoenix.example/v1/traces"
        );
        let c = OtlpConfig::new("http://h:6006/v1/traces").expect("ok");
        assert_eq!(c.service_name, "saap");
        assert_eq!(c.timeout, Duration::from_secs(10));
        assert_eq!((c.queue_capacity, c.max_batch), (8192, 512));
        assert_eq!(c.flush_interval, Duration::from_secs(1));
    }

    #[test]
    fn bad_urls_are_refused_with_t001() {
        for bad in [
            "",
            "localhost:4318",
            "ftp://h/v1/traces",
            "http://",
            "not a url",
            "file:///tmp/x",
        ] {
            let e = OtlpConfig::new(bad).expect_err(bad);
            assert_eq!(e.code(), "SAAP-T001", "{bad}: {e}");
            assert!(e.to_string().contains("http://"), "{e}");
        }
    }

    #[test]
    fn headers_are_checked_and_never_shown() {
        let c = OtlpConfig::new("http://h:4318")
            .expect("ok")
            .header("api_key", "sk-SECRET-1")
            .expect("ok")
            .header("API_KEY", "sk-SECRET-2")
            .expect("ok");
        assert_eq!(
            c.headers,
            vec![("API_KEY".to_owned(), "sk-SECRET-2".to_owned())]
        );
        let debug = format!("{c:?}");
        assert!(!debug.contains("SECRET"), "{debug}");
        assert!(
            debug.contains("API_KEY") && debug.contains("<redacted>"),
            "{debug}"
        );

        let e = OtlpConfig::new("http://h:4318")
            .expect("ok")
            .header("bad name", "v")
            .expect_err("space in a name");
        assert_eq!(e.code(), "SAAP-T002");
        let e = OtlpConfig::new("http://h:4318")
            .expect("ok")
            .header("x-key", "SECRET\nline")
            .expect_err("newline in a value");
        assert_eq!(e.code(), "SAAP-T002");
        assert!(!e.to_string().contains("SECRET"), "{e}");
    }

    #[test]
    fn langfuse_endpoint_and_headers() {
        let c =
            OtlpConfig::langfuse("https://cloud.langfuse.com/", "pk-lf-1", "sk-lf-2").expect("ok");
        assert_eq!(
            c.endpoint,
            "https://cloud.langfuse.com/api/public/otel/v1/traces"
        );
        let get = |name: &str| {
            c.headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        // base64("pk-lf-1:sk-lf-2")
        assert_eq!(get("Authorization"), Some("Basic cGstbGYtMTpzay1sZi0y"));
        assert_eq!(get("x-langfuse-ingestion-version"), Some("4"));
        assert!(!format!("{c:?}").contains("cGstbGYtMTpzay1sZi0y"));
        assert_eq!(
            OtlpConfig::langfuse("cloud.langfuse.com", "a", "b")
                .expect_err("no scheme")
                .code(),
            "SAAP-T001"
        );
    }

    #[test]
    fn no_endpoint_in_the_environment_means_no_export() {
        assert!(OtlpConfig::from_vars(vars(&[])).expect("ok").is_none());
        assert!(
            OtlpConfig::from_vars(vars(&[("OTEL_EXPORTER_OTLP_HEADERS", "a=b")]))
                .expect("ok")
                .is_none()
        );
    }

    #[test]
    fn environment_endpoints_headers_and_service() {
        let c = OtlpConfig::from_vars(vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "Authorization=Basic%20abc%3D%3D, x-team = ml ,x-dup=general",
            ),
            ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-dup=traces"),
            ("OTEL_SERVICE_NAME", "qa-agent"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
        ]))
        .expect("ok")
        .expect("an endpoint");
        assert_eq!(c.endpoint, "http://collector:4318/v1/traces");
        assert_eq!(
            c.headers,
            vec![
                ("Authorization".to_owned(), "Basic abc==".to_owned()),
                ("x-team".to_owned(), "ml".to_owned()),
                ("x-dup".to_owned(), "traces".to_owned()),
            ]
        );
        assert_eq!(c.service_name, "qa-agent");
        assert_eq!(c.timeout, Duration::from_millis(2500));

        // The signal-specific endpoint is used as is, and wins.
        let c = OtlpConfig::from_vars(vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://phoenix:6006/custom/path",
            ),
        ]))
        .expect("ok")
        .expect("an endpoint");
        assert_eq!(c.endpoint, "http://phoenix:6006/custom/path");
    }

    #[test]
    fn environment_errors() {
        for protocol in ["grpc", "http/json"] {
            let e = OtlpConfig::from_vars(vars(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol),
            ]))
            .expect_err(protocol);
            assert_eq!(e.code(), "SAAP-T003");
            assert!(
                e.to_string()
                    .contains("OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"),
                "{e}"
            );
        }
        let e = OtlpConfig::from_vars(vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "novalue"),
        ]))
        .expect_err("no =");
        assert_eq!(e.code(), "SAAP-T002");
        let e = OtlpConfig::from_vars(vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "k=%FF%FE"),
        ]))
        .expect_err("not UTF-8");
        assert_eq!(e.code(), "SAAP-T002");
        let e = OtlpConfig::from_vars(vars(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "c:4318")]))
            .expect_err("no scheme");
        assert_eq!(e.code(), "SAAP-T001");
    }
}
