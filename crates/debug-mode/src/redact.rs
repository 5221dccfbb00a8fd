//! The one redactor. It runs on both ingest paths (HTTP and file) before anything is
//! persisted, and on every malformed-record preview.
//!
//! Two independent rules:
//! - **by key name**: values under keys such as `password`, `token`, `authorization`,
//!   `cookie`, `apiKey`, `privateKey` are replaced wholesale;
//! - **by value pattern**: inside every string (including `message` and `location`), bearer
//!   and basic credentials, private-key blocks, `key=value` secrets, URL credentials, JWTs and
//!   common API key formats (AWS, GitHub, Slack, OpenAI-style `sk-`, Stripe, Google) are
//!   replaced.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// What replaces a secret.
pub const REDACTED: &str = "[REDACTED]";

const SECRET_KEY_PARTS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "authorization",
    "cookie",
    "privatekey",
    "accesskey",
    "credential",
    "signature",
    "sessionid",
];
const SECRET_KEYS_EXACT: &[&str] = &["pwd", "auth", "sid", "jwt", "otp", "pin"];

/// True when a value stored under `key` must be redacted whatever it looks like.
pub fn is_secret_key(key: &str) -> bool {
    let norm: String = key
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    SECRET_KEYS_EXACT.contains(&norm.as_str()) || SECRET_KEY_PARTS.iter().any(|p| norm.contains(p))
}

struct Rule {
    re: Regex,
    with: &'static str,
}

const KEYWORDS: &str = r"password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key|client[_-]?secret|authorization|cookie|session[_-]?id";

fn rule(re: &str, with: &'static str) -> Rule {
    Rule {
        re: Regex::new(re).expect("redaction patterns are constant and valid"),
        with,
    }
}

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    vec![
        rule(
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY-----|$)",
            "[REDACTED PRIVATE KEY]",
        ),
        rule(
            r"(?i)(?-u:\b)(bearer|basic|token)\s+[A-Za-z0-9\-._~+/]{8,}=*",
            "$1 [REDACTED]",
        ),
        rule(
            &format!(r#"(?i)("(?:{KEYWORDS})"\s*:\s*)"(?:[^"\\]|\\.)*""#),
            "$1\"[REDACTED]\"",
        ),
        rule(
            &format!(r#"(?i)(?-u:\b)((?:{KEYWORDS})\s*[=:]\s*)[^\s&,;"'}}]+"#),
            "${1}[REDACTED]",
        ),
        rule(
            r"(?i)(?-u:\b)([a-z][a-z0-9+.\-]*://)[^/\s:@]+:[^/\s@]+@",
            "${1}[REDACTED]@",
        ),
        rule(
            r"(?-u:\b)eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
            REDACTED,
        ),
        rule(r"(?-u:\b)(?:AKIA|ASIA)[0-9A-Z]{16}(?-u:\b)", REDACTED),
        rule(r"(?-u:\b)gh[pousr]_[A-Za-z0-9]{36,}(?-u:\b)", REDACTED),
        rule(r"(?-u:\b)github_pat_[A-Za-z0-9_]{22,}", REDACTED),
        rule(r"(?-u:\b)xox[abprs]-[A-Za-z0-9-]{10,}", REDACTED),
        rule(r"(?-u:\b)sk-[A-Za-z0-9_\-]{20,}", REDACTED),
        rule(r"(?-u:\b)[rs]k_(?:live|test)_[A-Za-z0-9]{16,}", REDACTED),
        rule(r"(?-u:\b)AIza[0-9A-Za-z_\-]{35}", REDACTED),
    ]
});

/// A cheap pre-filter: one scan that tells whether any rule could apply.
static ANY: LazyLock<Regex> = LazyLock::new(|| {
    let all: Vec<String> = RULES
        .iter()
        .map(|r| format!("(?:{})", r.re.as_str()))
        .collect();
    Regex::new(&all.join("|")).expect("union of valid patterns is valid")
});

/// Redacts secret-looking substrings of one string.
pub fn redact_str(s: &str) -> Cow<'_, str> {
    if !ANY.is_match(s) {
        return Cow::Borrowed(s);
    }
    let mut out = s.to_owned();
    for r in RULES.iter() {
        if let Cow::Owned(o) = r.re.replace_all(&out, r.with) {
            out = o;
        }
    }
    Cow::Owned(out)
}

/// True when no value pattern matches anywhere in a raw record without JSON escapes (so
/// no string in it would be changed by [`redact_str`]). Key names are checked separately
/// by the caller with [`is_secret_key`]. Used by the ingest fast path.
pub fn raw_text_is_clean(line: &str) -> bool {
    !ANY.is_match(line)
}

/// Redacts a JSON value in place (key names and string contents, recursively).
/// Returns true when anything was redacted.
pub fn redact_value(v: &mut Value) -> bool {
    match v {
        Value::String(s) => {
            if let Cow::Owned(o) = redact_str(s) {
                *s = o;
                true
            } else {
                false
            }
        }
        Value::Array(items) => items.iter_mut().fold(false, |acc, i| redact_value(i) | acc),
        Value::Object(map) => {
            let mut changed = false;
            for (k, val) in map.iter_mut() {
                if is_secret_key(k) && !matches!(val, Value::Null | Value::Bool(_)) {
                    if *val != Value::String(REDACTED.into()) {
                        *val = Value::String(REDACTED.into());
                        changed = true;
                    }
                } else {
                    changed |= redact_value(val);
                }
            }
            changed
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn redacts_by_key_name_recursively() {
        let mut v = json!({"user": "ann", "Password": "hunter2", "headers": {"Authorization": "x", "X-Api-Key": 42},
            "cookies": ["a=b"], "tokenCount": 3, "ok": true, "auth": null});
        assert!(redact_value(&mut v));
        assert_eq!(
            v,
            json!({"user": "ann", "Password": REDACTED, "headers": {"Authorization": REDACTED, "X-Api-Key": REDACTED},
                "cookies": REDACTED, "tokenCount": REDACTED, "ok": true, "auth": null})
        );
    }

    #[test]
    fn redacts_by_value_pattern() {
        let cases = [
            ("Authorization: Bearer abc.def-ghi_123456", "[REDACTED]"),
            (
                "use bearer eyJhbGciOiJIUzI1NiJ9abc now",
                "bearer [REDACTED]",
            ),
            ("key AKIAIOSFODNN7EXAMPLE here", "key [REDACTED] here"),
            ("ghp_0123456789abcdefghijklmnopqrstuvwxyzAB", "[REDACTED]"),
            ("sk-proj-abcdefghijklmnopqrstuvwxyz012345", "[REDACTED]"),
            ("xoxb-1234567890-abcdefghij", "[REDACTED]"),
            ("sk_live_0123456789abcdefABCD", "[REDACTED]"),
            ("AIzaSyA-0123456789abcdefghijklmnopqrstuv", "[REDACTED]"),
            (
                "https://bob:s3cret@example.com/x",
                "https://[REDACTED]@example.com/x",
            ),
            (
                "/login?user=a&password=hunter2&x=1",
                "/login?user=a&password=[REDACTED]&x=1",
            ),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
                "[REDACTED PRIVATE KEY]",
            ),
            (
                r#"{"password": "hunter2", "a": 1}"#,
                r#"{"password": "[REDACTED]", "a": 1}"#,
            ),
        ];
        for (input, want) in cases {
            let got = redact_str(input);
            assert!(
                got.contains(want) && !got.contains("hunter2") && !got.contains("s3cret"),
                "{input:?} -> {got:?}, want it to contain {want:?}"
            );
        }
        assert!(matches!(
            redact_str("cache miss for cart:42"),
            Cow::Borrowed(_)
        ));
    }
}
