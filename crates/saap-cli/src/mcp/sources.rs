//! The live system the inspect tools read, fixed when the server starts: a NATS server
//! (connected on first use and kept, so a server that is down when `saap mcp` starts can come
//! up later) and/or a saap store (opened read-only for each call, so a store an agent is
//! still writing is seen as it is now).
//!
//! Must not show credentials (the options' `Debug` has none, errors are the inspect
//! library's sanitized ones) or write anything.

use super::answer::ToolError;
use super::params::SourceChoice;
use saap_inspect::{InspectError, NatsInspector, StoreInspector};
use saap_nats::NatsOptions;
use std::path::{Path, PathBuf};
use tokio::sync::Mutex;

/// Where inspect tools read.
pub struct Sources {
    nats: Option<NatsSource>,
    db: Option<PathBuf>,
}

struct NatsSource {
    options: NatsOptions,
    /// The same server as `saap` flags for a child (`--server URL` and the credential flags,
    /// which name environment variables and files, never a secret's value).
    flags: Vec<String>,
    conn: Mutex<Option<NatsInspector>>,
}

/// The source one call reads.
pub enum Picked<'a> {
    /// The NATS server.
    Nats(Box<NatsInspector>),
    /// The store file.
    Store(&'a Path),
}

/// How to start the server with a source, for error messages.
const HOW: &str = "start `saap mcp` with --server nats://HOST:PORT (a live NATS server, with the --nats-* credential flags it needs) or --db PATH (a saap store an agent wrote), e.g. in your MCP client's configuration";

impl Sources {
    /// The configured sources.
    pub fn new(nats: Option<(NatsOptions, Vec<String>)>, db: Option<PathBuf>) -> Sources {
        Sources {
            nats: nats.map(|(options, flags)| NatsSource {
                options,
                flags,
                conn: Mutex::new(None),
            }),
            db,
        }
    }

    /// Whether a NATS server is configured.
    pub fn has_nats(&self) -> bool {
        self.nats.is_some()
    }

    /// The source a call asked for as flags of a child `saap` command (`--db PATH`, or
    /// `--server URL` with the credential flags the server was started with).
    pub fn cli_args(&self, choice: Option<SourceChoice>) -> Result<Vec<String>, ToolError> {
        match self.choose(choice)? {
            SourceChoice::Nats => match &self.nats {
                Some(n) => Ok(n.flags.clone()),
                None => Err(no_nats()),
            },
            SourceChoice::Store => match &self.db {
                Some(p) => Ok(vec!["--db".into(), p.to_string_lossy().into_owned()]),
                None => Err(no_store()),
            },
        }
    }

    /// Which source a call reads: the one asked for, the only one, or NATS when both are
    /// configured.
    fn choose(&self, choice: Option<SourceChoice>) -> Result<SourceChoice, ToolError> {
        Ok(match choice {
            Some(c) => c,
            None if self.nats.is_some() => SourceChoice::Nats,
            None if self.db.is_some() => SourceChoice::Store,
            None => {
                return Err(ToolError::new(format!(
                    "this saap mcp server has no live system to inspect: {HOW}. check, simulate, explore and explain work without one"
                )));
            }
        })
    }

    /// The source a call asked for (see [`Sources::choose`]), connecting to NATS if needed.
    pub async fn pick(&self, choice: Option<SourceChoice>) -> Result<Picked<'_>, ToolError> {
        match self.choose(choice)? {
            SourceChoice::Nats => {
                let Some(n) = &self.nats else {
                    return Err(no_nats());
                };
                let mut conn = n.conn.lock().await;
                if let Some(c) = conn.as_ref() {
                    return Ok(Picked::Nats(Box::new(c.clone())));
                }
                let c = NatsInspector::connect(&n.options).await.map_err(fail)?;
                tracing::info!(server = c.url(), "connected to NATS");
                *conn = Some(c.clone());
                Ok(Picked::Nats(Box::new(c)))
            }
            SourceChoice::Store => match &self.db {
                Some(p) => Ok(Picked::Store(p.as_path())),
                None => Err(no_store()),
            },
        }
    }
}

fn no_nats() -> ToolError {
    ToolError::new(format!(
        "`source: nats` asked for, but this server was started without --server; {HOW}"
    ))
}

fn no_store() -> ToolError {
    ToolError::new(format!(
        "`source: store` asked for, but this server was started without --db; {HOW}"
    ))
}

/// Runs `f` on the store at `path`, opened read-only for this call, off the async threads.
pub async fn with_store<T, F>(path: &Path, f: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce(&StoreInspector) -> Result<T, InspectError> + Send + 'static,
{
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let s = StoreInspector::open(&path)?;
        f(&s)
    })
    .await
    .map_err(|e| {
        ToolError::new(format!(
            "internal: reading the store failed ({e}); report this as a saap bug"
        ))
    })?
    .map_err(fail)
}

/// An inspection error as a tool error: the library's message (with its stable code and
/// what to do), plus which tool to call next where the message names a CLI command.
pub fn fail(e: InspectError) -> ToolError {
    let next = match &e {
        InspectError::NoStream { .. } => " Over MCP: call `stream_list` to see the streams.",
        InspectError::NoMessage { .. } => {
            " Over MCP: call `stream_view` (or `stream_state` for the range)."
        }
        InspectError::NoBucket { .. } => " Over MCP: call `kv_ls` to see the buckets.",
        InspectError::NoKey { .. } => " Over MCP: call `kv_ls` with the bucket to see its keys.",
        InspectError::NoRun { .. } => {
            " Over MCP: call `runs` (with the agent class stream) to list the runs."
        }
        InspectError::Unreachable { .. } => {
            " The server's address and credentials are fixed when `saap mcp` starts: fix its --server/--nats-* flags in the MCP client's configuration, or start nats-server; the next call connects again."
        }
        _ => "",
    };
    ToolError::new(format!("{e}{next}"))
}
