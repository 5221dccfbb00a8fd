//! Connection options: server addresses, credentials, TLS.
//!
//! Secrets (token, password, nkey seed) are held in [`Secret`], whose `Debug` and `Display`
//! print `<redacted>`; server addresses are logged and reported without their userinfo part
//! ([`redact_url`]). Nothing in this crate logs a secret.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::{NatsError, Result};

/// A secret string. Its `Debug`/`Display` never show the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The secret itself, to hand to the client library. Do not log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// How the client authenticates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Auth {
    /// No credentials, unless a server URL has userinfo: `nats://user:password@host` or
    /// `nats://token@host` (the first such URL is used).
    #[default]
    None,
    /// A token (`authorization { token: … }`).
    Token(Secret),
    /// User and password.
    UserPassword {
        /// User name (not secret).
        user: String,
        /// Password.
        password: Secret,
    },
    /// An nkey seed (`SU…`); the client signs the server's nonce with it.
    NkeySeed(Secret),
    /// A `.creds` file (JWT + nkey seed), read at connect time.
    CredentialsFile(PathBuf),
}

/// TLS settings, passed through to the client.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// Require TLS even if the server does not ask for it.
    pub required: bool,
    /// PEM file(s) of certificate authorities to trust in addition to the system roots.
    pub root_certificates: Vec<PathBuf>,
    /// Client certificate and key (PEM) for mutual TLS.
    pub client_certificate: Option<ClientCertificate>,
    /// Start the TLS handshake before the NATS protocol (server `handshake_first`).
    pub tls_first: bool,
}

/// A client certificate and its private key (PEM files).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientCertificate {
    /// Certificate chain.
    pub certificate: PathBuf,
    /// Private key. The path is not secret; the file's content is never read by this crate.
    pub key: PathBuf,
}

/// Everything needed to connect. `Debug` shows the servers without userinfo and no secret.
#[derive(Clone)]
pub struct NatsOptions {
    /// Server addresses (`nats://host:port`, `tls://host:port`, or `host:port`). At least one.
    pub servers: Vec<String>,
    /// Credentials.
    pub auth: Auth,
    /// TLS.
    pub tls: TlsOptions,
    /// Connection name shown by the server (`saap` by default).
    pub name: String,
    /// Timeout of one connection attempt.
    pub connect_timeout: Duration,
    /// Default timeout of requests and JetStream API calls (also the publish ack wait).
    pub request_timeout: Duration,
    /// Keep retrying the first connection instead of failing at once.
    pub retry_on_initial_connect: bool,
}

impl fmt::Debug for NatsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NatsOptions")
            .field("servers", &self.redacted_servers())
            .field("auth", &self.auth)
            .field("tls", &self.tls)
            .field("name", &self.name)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("retry_on_initial_connect", &self.retry_on_initial_connect)
            .finish()
    }
}

impl NatsOptions {
    /// Options for one server address with no credentials.
    pub fn new(url: impl Into<String>) -> NatsOptions {
        NatsOptions {
            servers: vec![url.into()],
            auth: Auth::None,
            tls: TlsOptions::default(),
            name: "saap".to_owned(),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(5),
            retry_on_initial_connect: false,
        }
    }

    /// Sets the credentials (builder style).
    pub fn with_auth(mut self, auth: Auth) -> NatsOptions {
        self.auth = auth;
        self
    }

    /// Sets the TLS options (builder style).
    pub fn with_tls(mut self, tls: TlsOptions) -> NatsOptions {
        self.tls = tls;
        self
    }

    /// Sets the request timeout (builder style).
    pub fn with_request_timeout(mut self, timeout: Duration) -> NatsOptions {
        self.request_timeout = timeout;
        self
    }

    /// The server addresses with any userinfo removed, for logs and errors.
    pub fn redacted_servers(&self) -> String {
        self.servers
            .iter()
            .map(|s| redact_url(s))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Checks the options without connecting.
    pub fn validate(&self) -> Result<()> {
        if self.servers.is_empty() || self.servers.iter().any(|s| s.trim().is_empty()) {
            return Err(NatsError::InvalidOptions {
                reason: "no server address given (expected e.g. nats://127.0.0.1:4222)".to_owned(),
            });
        }
        match &self.auth {
            Auth::Token(t) if t.expose().is_empty() => Err(NatsError::InvalidOptions {
                reason: "the token is empty".to_owned(),
            }),
            Auth::UserPassword { user, .. } if user.is_empty() => Err(NatsError::InvalidOptions {
                reason: "the user name is empty".to_owned(),
            }),
            Auth::NkeySeed(s) if !s.expose().starts_with('S') => Err(NatsError::InvalidOptions {
                reason: "the nkey seed does not look like a seed (it starts with 'S')".to_owned(),
            }),
            Auth::CredentialsFile(p) if !p.is_file() => Err(NatsError::InvalidOptions {
                reason: format!("credentials file {} does not exist", p.display()),
            }),
            _ => Ok(()),
        }?;
        for ca in &self.tls.root_certificates {
            if !ca.is_file() {
                return Err(NatsError::InvalidOptions {
                    reason: format!("TLS CA file {} does not exist", ca.display()),
                });
            }
        }
        if let Some(c) = &self.tls.client_certificate {
            for p in [&c.certificate, &c.key] {
                if !p.is_file() {
                    return Err(NatsError::InvalidOptions {
                        reason: format!(
                            "TLS client certificate file {} does not exist",
                            p.display()
                        ),
                    });
                }
            }
        }
        Ok(())
    }
}

impl NatsOptions {
    /// `text` with every secret of these options and every raw server address replaced by
    /// `<redacted>` / the redacted address (for client error messages that might echo them).
    pub fn sanitize(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for s in &self.servers {
            if s.contains('@') {
                out = out.replace(s.as_str(), &redact_url(s));
            }
        }
        let secrets: Vec<&str> = match &self.auth {
            Auth::Token(t) => vec![t.expose()],
            Auth::UserPassword { password, .. } => vec![password.expose()],
            Auth::NkeySeed(s) => vec![s.expose()],
            Auth::None | Auth::CredentialsFile(_) => Vec::new(),
        };
        for s in secrets.into_iter().filter(|s| !s.is_empty()) {
            out = out.replace(s, "<redacted>");
        }
        out
    }
}

/// A server address without its userinfo (`nats://user:pass@host:4222` → `nats://host:4222`).
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => (&url[..i + 3], &url[i + 3..]),
        None => ("", url),
    };
    match rest.rfind('@') {
        Some(at) => format!("{scheme}<redacted>@{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let o =
            NatsOptions::new("nats://alice:hunter2@127.0.0.1:4222").with_auth(Auth::UserPassword {
                user: "alice".into(),
                password: Secret::new("hunter2"),
            });
        let dbg = format!("{o:?}");
        assert!(dbg.contains("<redacted>"));
        assert!(!dbg.contains("hunter2"), "{dbg}");
        assert!(!o.redacted_servers().contains("hunter2"));
        assert!(!format!("{:?}", o.auth).contains("hunter2"));
        assert_eq!(format!("{}", Secret::new("x")), "<redacted>");
        let t = Auth::Token(Secret::new("tok-123"));
        assert!(!format!("{t:?}").contains("tok-123"));
    }

    #[test]
    fn sanitize_removes_secrets_and_userinfo() {
        let o = NatsOptions::new("nats://u:pw1@h:4222").with_auth(Auth::Token(Secret::new("tok9")));
        let t = o.sanitize("failed nats://u:pw1@h:4222 with tok9");
        assert!(!t.contains("pw1") && !t.contains("tok9"), "{t}");
        assert!(t.contains("nats://<redacted>@h:4222"));
    }

    #[test]
    fn redact_url_removes_userinfo_only() {
        assert_eq!(redact_url("nats://u:p@h:4222"), "nats://<redacted>@h:4222");
        assert_eq!(redact_url("tok@h:4222"), "<redacted>@h:4222");
        assert_eq!(redact_url("nats://h:4222"), "nats://h:4222");
    }

    #[test]
    fn validate_reports_missing_pieces() {
        assert_eq!(
            NatsOptions::new("").validate().unwrap_err().kind(),
            "invalid_options"
        );
        let o = NatsOptions::new("nats://h:1").with_auth(Auth::Token(Secret::new("")));
        assert!(o.validate().is_err());
        let o = NatsOptions::new("nats://h:1").with_auth(Auth::NkeySeed(Secret::new("UABC")));
        let e = o.validate().unwrap_err().to_string();
        assert!(!e.contains("UABC"), "{e}");
        let o = NatsOptions::new("nats://h:1")
            .with_auth(Auth::CredentialsFile("/nonexistent/x.creds".into()));
        assert!(o.validate().is_err());
        assert!(NatsOptions::new("nats://h:1").validate().is_ok());
    }
}
