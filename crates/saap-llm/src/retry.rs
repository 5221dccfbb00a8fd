//! When to try a request again and how long to wait first.
//!
//! Pure functions over the [`RetryPolicy`], the status and the headers: which statuses are
//! transient, the exponential backoff with jitter, and the server's own wish (`retry-after-ms`,
//! then `Retry-After` as seconds or as an HTTP date). This module must not sleep or do I/O; the
//! client does the waiting.

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

use crate::config::RetryPolicy;

/// Statuses worth another try: timeout, conflict, rate limit and server errors.
pub(crate) fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || (500..=599).contains(&status)
}

/// The computed wait before retry number `retry` (1 for the first retry): doubling from the
/// initial backoff, capped, with up to a quarter taken off at random so that clients that
/// failed together do not retry together.
pub(crate) fn backoff(policy: &RetryPolicy, retry: u32, jitter_source: u32) -> Duration {
    let factor = 1u32 << retry.saturating_sub(1).min(20);
    let base = policy
        .initial_backoff
        .saturating_mul(factor)
        .min(policy.max_backoff);
    let jitter = f64::from(jitter_source % 1000) / 1000.0 * 0.25;
    base.mul_f64(1.0 - jitter)
}

/// The wait the server asks for, if it says.
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    if let Some(ms) = header_text(headers, "retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return finite_secs(ms / 1000.0);
    }
    let value = header_text(headers, "retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return finite_secs(secs);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name)?.to_str().ok().map(str::trim)
}

fn finite_secs(secs: f64) -> Option<Duration> {
    (secs.is_finite() && secs >= 0.0).then(|| Duration::try_from_secs_f64(secs).ok())?
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(name: &'static str, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_str(value).expect("valid header"));
        h
    }

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert_eq!(
            retry_after(&headers("retry-after", "2"), now),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            retry_after(&headers("retry-after-ms", "150"), now),
            Some(Duration::from_millis(150))
        );
        let date = httpdate::fmt_http_date(now + Duration::from_secs(5));
        assert_eq!(
            retry_after(&headers("retry-after", &date), now),
            Some(Duration::from_secs(5))
        );
        assert_eq!(retry_after(&headers("retry-after", "soon"), now), None);
        assert_eq!(retry_after(&headers("retry-after", "-1"), now), None);
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let p = RetryPolicy {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(350),
            ..RetryPolicy::default()
        };
        assert_eq!(backoff(&p, 1, 0), Duration::from_millis(100));
        assert_eq!(backoff(&p, 2, 0), Duration::from_millis(200));
        assert_eq!(backoff(&p, 3, 0), Duration::from_millis(350));
        assert_eq!(backoff(&p, 40, 0), Duration::from_millis(350));
        assert!(backoff(&p, 1, 999) >= Duration::from_millis(75));
    }

    #[test]
    fn retryable_statuses() {
        assert!(is_retryable_status(429));
        assert!(is_retryable_status(503));
        assert!(!is_retryable_status(400));
        assert!(!is_retryable_status(401));
    }
}
