//! The NATS credential and TLS flags of the read-only commands (`inspect`, `explain --run`):
//! the same flags as an agent's `--engine nats://…`, turned into connection options.
//!
//! Must not connect or read anything; secrets come from the environment or files only.

use crate::input::InvalidInput;
use std::path::PathBuf;
use std::time::Duration;

/// How to authenticate and secure a NATS connection.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct NatsFlags {
    /// Environment variable holding the NATS token.
    #[arg(long, global = true, value_name = "VAR")]
    pub nats_token_env: Option<String>,
    /// NATS user name (the password comes from --nats-password-env).
    #[arg(long, global = true, value_name = "USER")]
    pub nats_user: Option<String>,
    /// Environment variable holding the NATS password.
    #[arg(long, global = true, value_name = "VAR")]
    pub nats_password_env: Option<String>,
    /// File holding an nkey seed.
    #[arg(long, global = true, value_name = "FILE")]
    pub nats_nkey_seed_file: Option<PathBuf>,
    /// A NATS .creds file.
    #[arg(long, global = true, value_name = "FILE")]
    pub nats_creds: Option<PathBuf>,
    /// Extra CA certificate (PEM) to trust; repeatable.
    #[arg(long, global = true, value_name = "FILE")]
    pub nats_tls_ca: Vec<PathBuf>,
    /// Client certificate (PEM) for mutual TLS.
    #[arg(long, global = true, value_name = "FILE")]
    pub nats_tls_cert: Option<PathBuf>,
    /// Client key (PEM) for mutual TLS.
    #[arg(long, global = true, value_name = "FILE")]
    pub nats_tls_key: Option<PathBuf>,
    /// Require TLS.
    #[arg(long, global = true)]
    pub nats_tls_required: bool,
}

impl NatsFlags {
    /// Connection options for `url`, named `client`, with `timeout` for connecting and for
    /// every request. A flag that cannot be used (an unset variable, a missing file) is
    /// invalid input (`SAAP-I008`).
    pub fn options(
        &self,
        url: &str,
        client: &str,
        timeout: Duration,
    ) -> Result<saap::nats::NatsOptions, InvalidInput> {
        let connect = saap::nats::EngineConnect {
            url: url.to_owned(),
            token_env: self.nats_token_env.clone(),
            user: self.nats_user.clone(),
            password_env: self.nats_password_env.clone(),
            nkey_seed_file: self.nats_nkey_seed_file.clone(),
            creds_file: self.nats_creds.clone(),
            tls_ca: self.nats_tls_ca.clone(),
            tls_cert: self.nats_tls_cert.clone(),
            tls_key: self.nats_tls_key.clone(),
            tls_required: self.nats_tls_required,
        };
        let mut options = connect
            .options()
            .map_err(|e| InvalidInput(format!("SAAP-I008: {e}")))?;
        options.name = client.to_owned();
        options.connect_timeout = timeout;
        options.request_timeout = timeout;
        Ok(options)
    }
}
