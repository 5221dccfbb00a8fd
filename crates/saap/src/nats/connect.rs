//! What an agent binary's `run --engine nats://HOST:PORT` needs: the engine URL, and
//! credentials and TLS settings passed through to the client. Secrets are read from the
//! environment or from files, never from the command line (where `ps` shows them), and are
//! never logged: [`NatsOptions`]'s `Debug` redacts them and the URL's userinfo.

use super::options::WorkerError;
use saap_nats::{Auth, ClientCertificate, NatsError, NatsOptions, Secret};
use std::path::PathBuf;

/// The engine an agent binary runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineChoice {
    /// One process, SQLite (`--engine embedded`, the default).
    Embedded,
    /// NATS JetStream at this URL (`--engine nats://HOST:PORT` or `tls://HOST:PORT`).
    Nats(String),
}

/// Parses an `--engine` value.
pub fn parse_engine(value: &str) -> Result<EngineChoice, WorkerError> {
    let v = value.trim();
    if v.is_empty() || v == "embedded" {
        return Ok(EngineChoice::Embedded);
    }
    if let Some(rest) = v
        .strip_prefix("nats://")
        .or_else(|| v.strip_prefix("tls://"))
        && !rest.is_empty()
    {
        return Ok(EngineChoice::Nats(v.to_string()));
    }
    Err(WorkerError::Nats(NatsError::InvalidOptions {
        reason: format!(
            "`--engine {}` is not an engine; use `embedded` or `nats://HOST:PORT` (tls://HOST:PORT for TLS)",
            saap_nats::options::redact_url(v)
        ),
    }))
}

/// Credentials and TLS for the NATS engine (the flags of `run --engine nats://…`).
#[derive(Debug, Clone, Default)]
pub struct EngineConnect {
    /// Server URL(s), comma-separated (`nats://a:4222,nats://b:4222`).
    pub url: String,
    /// Name of the environment variable holding a token (e.g. `SAAP_NATS_TOKEN`).
    pub token_env: Option<String>,
    /// User name, with the password in the environment variable `password_env`.
    pub user: Option<String>,
    /// Name of the environment variable holding the password.
    pub password_env: Option<String>,
    /// File holding an nkey seed (`SU…`).
    pub nkey_seed_file: Option<PathBuf>,
    /// A `.creds` file (JWT + seed).
    pub creds_file: Option<PathBuf>,
    /// Extra CA certificates (PEM).
    pub tls_ca: Vec<PathBuf>,
    /// Client certificate and key (PEM) for mutual TLS.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// Require TLS.
    pub tls_required: bool,
}

fn invalid(reason: String) -> WorkerError {
    WorkerError::Nats(NatsError::InvalidOptions { reason })
}

fn env_secret(
    env: &dyn Fn(&str) -> Option<String>,
    var: &str,
    what: &str,
) -> Result<Secret, WorkerError> {
    match env(var) {
        Some(v) if !v.is_empty() => Ok(Secret::new(v)),
        _ => Err(invalid(format!(
            "the {what} environment variable `{var}` is not set or empty; export it before starting the worker"
        ))),
    }
}

impl EngineConnect {
    /// The client options (checked, without connecting); secrets from the process
    /// environment.
    pub fn options(&self) -> Result<NatsOptions, WorkerError> {
        self.options_with(&|var| std::env::var(var).ok())
    }

    /// [`EngineConnect::options`] with the environment given as a lookup function.
    pub fn options_with(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<NatsOptions, WorkerError> {
        let servers: Vec<String> = self
            .url
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        let mut opts = NatsOptions::new(servers.first().cloned().unwrap_or_default());
        opts.servers = servers;
        let mut auths = Vec::new();
        if let Some(var) = &self.token_env {
            auths.push(Auth::Token(env_secret(env, var, "token")?));
        }
        if let Some(user) = &self.user {
            let var = self.password_env.as_deref().ok_or_else(|| {
                invalid(
                    "a user name needs --nats-password-env (the variable holding the password)"
                        .into(),
                )
            })?;
            auths.push(Auth::UserPassword {
                user: user.clone(),
                password: env_secret(env, var, "password")?,
            });
        }
        if let Some(path) = &self.nkey_seed_file {
            let seed = std::fs::read_to_string(path).map_err(|e| {
                invalid(format!(
                    "cannot read the nkey seed file {}: {e}",
                    path.display()
                ))
            })?;
            auths.push(Auth::NkeySeed(Secret::new(seed.trim())));
        }
        if let Some(path) = &self.creds_file {
            auths.push(Auth::CredentialsFile(path.clone()));
        }
        if auths.len() > 1 {
            return Err(invalid(
                "more than one kind of credentials given (token, user/password, nkey seed, creds file); keep one"
                    .into(),
            ));
        }
        opts.auth = auths.pop().unwrap_or_default();
        opts.tls.required =
            self.tls_required || opts.servers.iter().any(|s| s.starts_with("tls://"));
        opts.tls.root_certificates = self.tls_ca.clone();
        opts.tls.client_certificate = match (&self.tls_cert, &self.tls_key) {
            (Some(c), Some(k)) => Some(ClientCertificate {
                certificate: c.clone(),
                key: k.clone(),
            }),
            (None, None) => None,
            _ => {
                return Err(invalid(
                    "mutual TLS needs both the client certificate and its key".into(),
                ));
            }
        };
        opts.validate()?;
        Ok(opts)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn engine_values_parse_and_bad_ones_say_what_to_use() {
        assert_eq!(parse_engine("embedded").unwrap(), EngineChoice::Embedded);
        assert_eq!(
            parse_engine("nats://127.0.0.1:4222").unwrap(),
            EngineChoice::Nats("nats://127.0.0.1:4222".into())
        );
        let e = parse_engine("redis://u:pw@h").unwrap_err().to_string();
        assert!(e.contains("nats://HOST:PORT"), "{e}");
        assert!(!e.contains("pw"), "the password must not be echoed: {e}");
    }

    #[test]
    fn a_token_comes_from_the_environment_and_is_never_shown() {
        let env = |v: &str| (v == "TOKEN").then(|| "s3cr3t-token".to_string());
        let c = EngineConnect {
            url: "nats://127.0.0.1:4222".into(),
            token_env: Some("TOKEN".into()),
            ..Default::default()
        };
        let opts = c.options_with(&env).unwrap();
        assert_eq!(opts.auth, Auth::Token(Secret::new("s3cr3t-token")));
        assert!(!format!("{opts:?}").contains("s3cr3t"));
        let missing = EngineConnect {
            token_env: Some("UNSET".into()),
            ..c.clone()
        };
        let e = missing.options_with(&env).unwrap_err().to_string();
        assert!(e.contains("not set"), "{e}");
    }

    #[test]
    fn two_kinds_of_credentials_are_refused() {
        let env = |_: &str| Some("t".to_string());
        let c = EngineConnect {
            url: "nats://h:1".into(),
            token_env: Some("T".into()),
            user: Some("u".into()),
            password_env: Some("P".into()),
            ..Default::default()
        };
        let e = c.options_with(&env).unwrap_err().to_string();
        assert!(e.contains("keep one"), "{e}");
    }
}
