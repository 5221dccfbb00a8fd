//! The studio's per-start token: 128 random bits the command prints once, without which no
//! action changes a run. A browser presents it as a cookie set by the printed link (SameSite
//! strict, so another site's page cannot post with it), a script as `Authorization: Bearer`.
//! Must not log or render the token.

use std::io::Read;

/// The cookie that carries the token: this, then the studio's port.
pub(super) const COOKIE_PREFIX: &str = "saap_studio_token_";

pub(super) struct Token(String);

impl Token {
    /// A new token from the operating system's random source.
    pub(super) fn generate() -> std::io::Result<Token> {
        let mut bytes = [0u8; 16];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
        Ok(Token(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// The token's text, for the command's one line that prints it.
    pub(super) fn reveal(&self) -> &str {
        &self.0
    }

    /// Whether `given` is the token, compared in time that does not depend on where they
    /// differ.
    pub(super) fn matches(&self, given: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), given.trim().as_bytes());
        if a.len() != b.len() {
            return false;
        }
        a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }

    /// Whether a request's headers carry the token: the cookie `cookie`, or a bearer header.
    pub(super) fn presented(&self, headers: &axum::http::HeaderMap, cookie: &str) -> bool {
        use axum::http::header::{AUTHORIZATION, COOKIE as COOKIE_HEADER};
        let bearer = headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if bearer.is_some_and(|t| self.matches(t)) {
            return true;
        }
        headers
            .get_all(COOKIE_HEADER)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|kv| kv.trim().split_once('='))
            .any(|(k, v)| k == cookie && self.matches(v))
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(…)")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use axum::http::{HeaderMap, HeaderValue};

    #[test]
    fn a_token_is_32_hex_characters_and_differs_per_start() {
        let (a, b) = (Token::generate().unwrap(), Token::generate().unwrap());
        assert_eq!(a.reveal().len(), 32);
        assert!(a.reveal().chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a.reveal(), b.reveal());
        assert_eq!(format!("{a:?}"), "Token(…)");
    }

    #[test]
    fn the_token_is_accepted_from_the_cookie_or_a_bearer_header_only() {
        let t = Token::generate().unwrap();
        let cookie = format!("{COOKIE_PREFIX}7878");
        let mut h = HeaderMap::new();
        assert!(!t.presented(&h, &cookie));
        h.insert(
            "cookie",
            HeaderValue::from_str(&format!("a=b; {cookie}={}", t.reveal())).unwrap(),
        );
        assert!(t.presented(&h, &cookie));
        // Another studio's cookie (another port) is not this one's.
        assert!(!t.presented(&h, &format!("{COOKIE_PREFIX}7879")));
        let mut wrong = HeaderMap::new();
        wrong.insert(
            "cookie",
            HeaderValue::from_str(&format!("{cookie}={}0", t.reveal())).unwrap(),
        );
        assert!(!t.presented(&wrong, &cookie));
        let mut bearer = HeaderMap::new();
        bearer.insert(
            "authorization",
            HeaderValue::from_str(&format!("Bearer {}", t.reveal())).unwrap(),
        );
        assert!(t.presented(&bearer, &cookie));
    }
}
