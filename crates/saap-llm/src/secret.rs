//! The API key as a value that cannot leak by accident.
//!
//! [`ApiKey`] holds the bearer token sent to the server. Its `Debug` and `Display` print a fixed
//! placeholder, it is not `Serialize`, and the only way to read it is
//! [`ApiKey::expose_to_header`], which the client calls when it builds the `Authorization`
//! header. This module must not offer any other way to get at the text.

use std::fmt;

/// A bearer token for the model server. Never printed, logged or serialized.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key. Leading and trailing whitespace (a newline from a file or an env var) is
    /// removed; an empty key is `None`.
    pub fn new(key: impl Into<String>) -> Option<ApiKey> {
        let key = key.into();
        let trimmed = key.trim();
        if trimmed.is_empty() {
            None
        } else {
            Some(ApiKey(trimmed.to_owned()))
        }
    }

    /// The key's text, for the `Authorization` header only.
    pub(crate) fn expose_to_header(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_hide_the_key() {
        let key = ApiKey::new("sk-very-secret\n").expect("non-empty");
        assert_eq!(format!("{key:?}"), "ApiKey(<redacted>)");
        assert_eq!(format!("{key}"), "<redacted>");
        assert_eq!(key.expose_to_header(), "sk-very-secret");
    }

    #[test]
    fn empty_key_is_none() {
        assert!(ApiKey::new("  ").is_none());
    }
}
