//! The one redactor. It runs on both ingest paths (HTTP and file) before anything is
//! persisted, and on every malformed-record preview.
//!
//! Two independent rules:
//! - **by key name**: values under secret key names are replaced wholesale. A name is
//!   compared without case and separators (`api_key`, `X-Api-Key`, `accessToken`): it is
//!   secret when it *is* a short secret word (`pwd`, `auth`, `jwt`, ...) or *ends with* a
//!   secret word (`password`, `token`, `secret`, `apikey`, `authorization`, ...). A key that
//!   merely starts with or contains such a word describes something else and is kept
//!   (`passwordPolicy`, `secretSauceName`, `tokenCount`);
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

/// Secret words a key name may end with (after normalization).
const SECRET_KEY_SUFFIXES: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "authorization",
    "cookie",
    "cookies",
    "privatekey",
    "accesskey",
    "credential",
    "credentials",
    "signature",
    "sessionid",
];
/// Short secret names, only as the whole (normalized) key.
const SECRET_KEYS_EXACT: &[&str] = &["pwd", "auth", "sid", "jwt", "otp", "pin"];

/// True when a normalized key (lowercase ASCII alphanumerics) names a secret.
fn is_secret_norm(norm: &[u8]) -> bool {
    SECRET_KEYS_EXACT.iter().any(|k| k.as_bytes() == norm)
        || SECRET_KEY_SUFFIXES
            .iter()
            .any(|k| norm.ends_with(k.as_bytes()))
}

/// True when a value stored under `key` must be redacted whatever it looks like.
pub fn is_secret_key(key: &str) -> bool {
    let norm: Vec<u8> = key
        .bytes()
        .filter(u8::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    is_secret_norm(&norm)
}

/// [`is_secret_key`] on raw key bytes without allocating (same normalization: ASCII
/// alphanumerics only, lowercased; non-ASCII bytes are never alphanumeric).
pub fn is_secret_key_bytes(key: &[u8]) -> bool {
    // Only the last 64 normalized bytes can matter: the longest secret word is shorter.
    let mut norm = [0u8; 64];
    let mut n = 0;
    for &c in key {
        if c.is_ascii_alphanumeric() {
            if n == norm.len() {
                norm.copy_within(1.., 0);
                n -= 1;
            }
            norm[n] = c.to_ascii_lowercase();
            n += 1;
        }
    }
    // A shifted window only drops leading bytes; exact names are short, so a long key is
    // never one of them.
    is_secret_norm(&norm[..n])
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
        // Short bearer tokens (`Bearer abc.def`): a token character other than a letter
        // tells them from prose ("bearer of").
        rule(
            r"(?i)(?-u:\b)(bearer)\s+[A-Za-z]*[0-9\-._~+/][A-Za-z0-9\-._~+/]*=*",
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

/// Literals (ASCII case-insensitive) at least one of which occurs in any text that a rule
/// matches, when that text is ASCII: each rule's pattern starts with or contains one of
/// them (`KEYWORDS` spelled out, `bearer|basic|token`, `-----BEGIN`, `://`, `eyJ`,
/// `AKIA|ASIA`, `gh?_`, `github_pat_`, `xox`, `sk-`, `k_live_|k_test_`, `AIza`). Non-ASCII
/// text can match the Unicode case-insensitive rules without these literals (`ſ`, the
/// Kelvin sign), so it always takes the full regex scan.
const PREFILTER_LITERALS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "api_key",
    "api-key",
    "accesskey",
    "access_key",
    "access-key",
    "authorization",
    "cookie",
    "sessionid",
    "session_id",
    "session-id",
    "bearer",
    "basic",
    "-----begin",
    "://",
    "eyj",
    "akia",
    "asia",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "xox",
    "sk-",
    "k_live_",
    "k_test_",
    "aiza",
];

/// Searched in an ASCII-lowercased copy of the text with the vectorized (Teddy) literal
/// searcher, which is case-sensitive; `None` if it cannot be built (then every text takes
/// the full regex scan).
static PREFILTER: LazyLock<Option<aho_corasick::packed::Searcher>> =
    LazyLock::new(|| aho_corasick::packed::Searcher::new(PREFILTER_LITERALS));

/// True when some rule might match `s`: false guarantees that none does. `scratch` holds
/// the lowercased copy.
fn might_match_with(s: &str, scratch: &mut Vec<u8>) -> bool {
    if !s.is_ascii() {
        return true;
    }
    let Some(pre) = PREFILTER.as_ref() else {
        return true;
    };
    scratch.clear();
    scratch.extend_from_slice(s.as_bytes());
    scratch.make_ascii_lowercase();
    pre.find(&scratch[..]).is_some()
}

/// Fast-path line scan: false guarantees that no redaction rule matches anywhere in `line`.
/// `scratch` holds the lowercased copy of an ASCII line; non-ASCII lines run the rules.
pub fn line_is_clean(line: &[u8], scratch: &mut Vec<u8>) -> bool {
    if line.is_ascii() {
        let Some(pre) = PREFILTER.as_ref() else {
            return std::str::from_utf8(line).is_ok_and(|t| !ANY.is_match(t));
        };
        scratch.clear();
        scratch.extend_from_slice(line);
        scratch.make_ascii_lowercase();
        if pre.find(&scratch[..]).is_none() {
            return true;
        }
    }
    std::str::from_utf8(line).is_ok_and(|t| !ANY.is_match(t))
}

fn might_match(s: &str) -> bool {
    might_match_with(s, &mut Vec::new())
}

/// Redacts secret-looking substrings of one string.
pub fn redact_str(s: &str) -> Cow<'_, str> {
    if !might_match(s) || !ANY.is_match(s) {
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
                "cookies": REDACTED, "tokenCount": 3, "ok": true, "auth": null})
        );
    }

    #[test]
    fn exact_secret_key_names_are_redacted_and_descriptive_keys_kept() {
        for secret in [
            "password",
            "PASSWORD",
            "pass_word",
            "api_key",
            "apiKey",
            "x-api-key",
            "X-API-KEY",
            "accessToken",
            "access_token",
            "refresh-token",
            "secret",
            "client_secret",
            "token",
            "authorization",
            "Proxy-Authorization",
            "cookie",
            "Set-Cookie",
            "privateKey",
            "aws_secret_access_key",
            "dbPassword",
            "pwd",
            "jwt",
            "credentials",
            "sessionId",
        ] {
            assert!(is_secret_key(secret), "{secret}");
            assert!(is_secret_key_bytes(secret.as_bytes()), "{secret}");
        }
        for kept in [
            "passwordPolicy",
            "secretSauceName",
            "tokenCount",
            "maxTokens",
            "tokenizer",
            "authorName",
            "cookieConsentShown",
            "pinned",
            "sidebar",
            "apiKeyId",
            "userId",
        ] {
            assert!(!is_secret_key(kept), "{kept}");
            assert!(!is_secret_key_bytes(kept.as_bytes()), "{kept}");
        }
        let mut v = json!({"passwordPolicy": "visible-password-policy", "secretSauceName": "ketchup",
            "tokenCount": 7, "password": "hunter2", "api_key": "k", "x-api-key": "k", "accessToken": "t"});
        assert!(redact_value(&mut v));
        assert_eq!(
            v,
            json!({"passwordPolicy": "visible-password-policy", "secretSauceName": "ketchup",
                "tokenCount": 7, "password": REDACTED, "api_key": REDACTED, "x-api-key": REDACTED,
                "accessToken": REDACTED})
        );
    }

    #[test]
    fn short_bearer_tokens_are_redacted_prose_is_not() {
        assert_eq!(
            redact_str("Authorization: Bearer abc.def"),
            "Authorization: [REDACTED] [REDACTED]"
        );
        assert_eq!(redact_str("bearer x-1"), "bearer [REDACTED]");
        assert!(matches!(
            redact_str("the bearer of bad news"),
            Cow::Borrowed(_)
        ));
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

    #[test]
    fn key_name_check_without_allocation_agrees() {
        let mut keys: Vec<String> = SECRET_KEY_SUFFIXES
            .iter()
            .chain(SECRET_KEYS_EXACT)
            .flat_map(|k| {
                [
                    k.to_string(),
                    k.to_uppercase(),
                    format!("x_{k}-Y"),
                    k[1..].to_string(),
                ]
            })
            .collect();
        keys.extend(
            [
                "cacheKey",
                "n",
                "hit",
                "",
                "ПарольToken",
                "a".repeat(70).as_str(),
                &format!("{}token", "b".repeat(70)),
            ]
            .map(String::from),
        );
        for k in keys {
            assert_eq!(is_secret_key_bytes(k.as_bytes()), is_secret_key(&k), "{k}");
        }
    }

    proptest::proptest! {
        #[test]
        fn key_name_check_agrees_on_generated_keys(k in "[a-zA-Z_ -]{0,12}(token|pass|cookie|sid|auth|key)?[a-zA-Z_é-]{0,6}") {
            proptest::prop_assert_eq!(is_secret_key_bytes(k.as_bytes()), is_secret_key(&k));
        }

        /// The literal prefilter never hides a match: whenever any rule matches, it says so.
        #[test]
        fn prefilter_is_conservative(
            parts in proptest::collection::vec(proptest::prop_oneof![
                proptest::strategy::Just("Bearer ".to_owned()),
                proptest::strategy::Just("BASIC\t".to_owned()),
                proptest::strategy::Just("toKen ".to_owned()),
                proptest::strategy::Just("baſic ".to_owned()),
                proptest::strategy::Just("PassWord=".to_owned()),
                proptest::strategy::Just("\"Api-Key\": \"".to_owned()),
                proptest::strategy::Just("session_ID:".to_owned()),
                proptest::strategy::Just("https://u:p@h".to_owned()),
                proptest::strategy::Just("-----BEGIN EC PRIVATE KEY-----".to_owned()),
                proptest::strategy::Just("eyJabcdefghij.eyJabcdefghij.abcdefghij".to_owned()),
                proptest::strategy::Just("AKIAIOSFODNN7EXAMPLE".to_owned()),
                proptest::strategy::Just("ghs_0123456789abcdefghijklmnopqrstuvwxyz".to_owned()),
                proptest::strategy::Just("github_pat_0123456789abcdefghijklmn".to_owned()),
                proptest::strategy::Just("xoxp-0123456789".to_owned()),
                proptest::strategy::Just("sk-abcdefghijklmnopqrstuvwxyz".to_owned()),
                proptest::strategy::Just("rk_test_0123456789abcdef".to_owned()),
                proptest::strategy::Just("AIza0123456789abcdefghijklmnopqrstuvwxy".to_owned()),
                "[ -~]{0,6}",
                "[a-zA-Z0-9_=:/-]{0,20}",
                "\\PC{0,3}",
            ], 0..6)
        ) {
            let s = parts.concat();
            if ANY.is_match(&s) {
                proptest::prop_assert!(might_match(&s), "{:?}", s);
            }
            proptest::prop_assert_eq!(redact_str(&s).into_owned(), {
                let mut out = s.clone();
                for r in RULES.iter() {
                    out = r.re.replace_all(&out, r.with).into_owned();
                }
                out
            });
        }
    }
}
