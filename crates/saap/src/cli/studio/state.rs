//! The studio's state and its errors: the opened engine, the agents whose runs it shows,
//! the token, and how a run named in a URL is found and read; [`StudioError`], what a
//! request gets when it cannot be answered as asked (a status, a stable code, what to do).
//! Must not know the routes.

use super::html::{self, Shell, esc};
use super::token::Token;
use crate::backend::{Backend, EffectRecord, StoredRun};
use crate::engine::Engine;
use crate::workflow::Workflow;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

/// Where the runs are, and what acts on them.
pub(super) enum Runs {
    /// The embedded store, through the engine opened over it as `send` opens it (its live
    /// runs go on in this process).
    Embedded(Engine),
    /// An agent class on NATS JetStream: its journal read, events published on its stream
    /// for its workers (the studio is not one).
    #[cfg(feature = "nats")]
    Nats {
        reader: Box<super::super::reader::NatsReader>,
        opts: Box<crate::nats::NatsOptions>,
    },
    /// A store read without the agents' code (the generic `saap studio --db`): nothing acts
    /// on its runs here.
    Stored(Arc<dyn Backend>),
}

/// What a studio may be asked to do to runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Action {
    Start,
    Send,
    Cancel,
    Fork,
    Replay,
}

/// Why a store read without code acts on nothing.
const READ_ONLY: &str = "this studio reads the store with the agents' specs, not their code (`saap studio --db`), so nothing acts on its runs here; run the agent's own `<agent> studio --db PATH` to start, answer, cancel, fork or replay runs";
/// Why a studio without code does not replay.
const NO_CODE_REPLAY: &str = "replay re-runs step bodies, and this studio has the agents' specs, not their code (`saap studio`); run `<agent> replay RUN` with the agent's binary";
/// Why a studio on NATS does not fork.
#[cfg(feature = "nats")]
const NATS_FORK: &str =
    "forking a run of the NATS engine is not supported yet; fork a run of the embedded store";

/// What a run's page offers: for each action, why it cannot be done here (`None`: it can).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Offers {
    /// Whether this browser holds the token (actions that can be done are usable).
    pub(super) signed_in: bool,
    /// Sending an event and cancelling (they go together).
    pub(super) send: Option<&'static str>,
    pub(super) fork: Option<&'static str>,
    pub(super) replay: Option<&'static str>,
}

pub(super) struct Studio {
    pub(super) runs: Runs,
    pub(super) workflow: Workflow,
    pub(super) token: Token,
    /// The cookie that carries the token: named after the port, so that two studios on one
    /// host do not overwrite each other's.
    pub(super) cookie: String,
    /// The `Host` header values the studio answers to.
    pub(super) hosts: Vec<String>,
    /// Live streams open now (bounded: `live::MAX_STREAMS`).
    pub(super) streams: AtomicUsize,
    /// Cancelled when the studio stops: live streams end then.
    pub(super) shutdown: tokio_util::sync::CancellationToken,
}

pub(super) type Shared = Arc<Studio>;

impl Studio {
    pub(super) fn backend(&self) -> &Arc<dyn Backend> {
        match &self.runs {
            Runs::Embedded(engine) => engine.backend(),
            #[cfg(feature = "nats")]
            Runs::Nats { reader, .. } => &reader.backend,
            Runs::Stored(backend) => backend,
        }
    }

    /// Whether anything can act on runs here (not a store read without code).
    pub(super) fn acts(&self) -> bool {
        !matches!(self.runs, Runs::Stored(_))
    }

    /// Why this studio cannot do `action` to any run, whoever asks; `None`: it can.
    pub(super) fn cannot(&self, action: Action) -> Option<&'static str> {
        match (&self.runs, action) {
            (Runs::Stored(_), _) => Some(READ_ONLY),
            (_, Action::Replay) if !self.workflow.has_code() => Some(NO_CODE_REPLAY),
            #[cfg(feature = "nats")]
            (Runs::Nats { .. }, Action::Fork) => Some(NATS_FORK),
            _ => None,
        }
    }

    /// [`Studio::cannot`] as a refusal (`SAAP-U008`).
    pub(super) fn allow(&self, action: Action) -> Result<(), StudioError> {
        match self.cannot(action) {
            None => Ok(()),
            Some(why) => Err(StudioError {
                status: StatusCode::CONFLICT,
                code: "SAAP-U008",
                message: why.to_string(),
            }),
        }
    }

    /// What a page shown with `headers` offers.
    pub(super) fn offers(&self, headers: &HeaderMap) -> Offers {
        Offers {
            signed_in: self.signed_in(headers),
            send: self.cannot(Action::Send),
            fork: self.cannot(Action::Fork),
            replay: self.cannot(Action::Replay),
        }
    }

    /// The agents whose runs the studio shows: this one and those it delegates to.
    pub(super) fn agent_names(&self) -> Vec<String> {
        self.workflow
            .agent_set()
            .iter()
            .map(|w| w.name().to_string())
            .collect()
    }

    /// The agent named (default: the studio's own).
    pub(super) fn agent(&self, name: Option<&str>) -> Result<Workflow, StudioError> {
        let Some(name) = name.filter(|n| !n.is_empty()) else {
            return Ok(self.workflow.clone());
        };
        self.workflow
            .agent_set()
            .into_iter()
            .find(|w| w.name() == name)
            .ok_or_else(|| {
                StudioError::bad(format!(
                    "`{}` is not an agent of this studio: {}",
                    name.chars().take(64).collect::<String>(),
                    self.agent_names().join(", ")
                ))
            })
    }

    /// The engine that acts on runs of `agent`: `None` on NATS (its workers do).
    pub(super) fn engine_for(&self, agent: &Workflow) -> Option<Engine> {
        match &self.runs {
            Runs::Embedded(engine) => {
                Some(engine.agent(agent.name()).unwrap_or_else(|| engine.clone()))
            }
            #[cfg(feature = "nats")]
            Runs::Nats { .. } => None,
            Runs::Stored(_) => None,
        }
    }

    /// A run named in a URL (its id or a unique prefix), among the agents' runs: its agent
    /// and full id.
    pub(super) async fn find_run(&self, given: &str) -> Result<(Workflow, String), StudioError> {
        if given.is_empty()
            || given.len() > 128
            || !given
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(StudioError::not_found(format!(
                "`{}` is not a run id: run ids are letters and digits (the list shows them)",
                given.chars().take(64).collect::<String>()
            )));
        }
        super::super::reader::resolve_agent_run(
            &self.workflow,
            self.backend(),
            "the studio's store",
            given,
        )
        .await
        .map_err(|f| match f.code {
            2 => StudioError::not_found(f.message),
            _ => StudioError::internal(f.message),
        })
    }

    /// A run read whole: its agent, stored journal and effects.
    pub(super) async fn read_run(
        &self,
        given: &str,
    ) -> Result<(Workflow, StoredRun, Vec<EffectRecord>), StudioError> {
        let (agent, run_id) = self.find_run(given).await?;
        let stored = self
            .backend()
            .read_run(agent.name(), &run_id)
            .wait()
            .await
            .map_err(|e| StudioError::internal(e.to_string()))?
            .ok_or_else(|| StudioError::not_found(format!("run {run_id} is no longer stored")))?;
        let effects = self
            .backend()
            .effects(&run_id)
            .wait()
            .await
            .map_err(|e| StudioError::internal(e.to_string()))?;
        Ok((agent, stored, effects))
    }

    pub(super) fn signed_in(&self, headers: &HeaderMap) -> bool {
        self.token.presented(headers, &self.cookie)
    }

    /// A page in the shell.
    pub(super) fn page(&self, headers: &HeaderMap, title: &str, body: &str) -> Response {
        let html = html::page(
            &Shell {
                title,
                agent: self.workflow.name(),
                signed_in: self.signed_in(headers),
                acts: self.acts(),
            },
            body,
        );
        ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()
    }
}

/// A request the studio cannot answer as asked: the status, a stable code and what to do.
#[derive(Debug)]
pub(super) struct StudioError {
    pub(super) status: StatusCode,
    pub(super) code: &'static str,
    pub(super) message: String,
}

impl StudioError {
    pub(super) fn bad(message: impl Into<String>) -> Self {
        StudioError {
            status: StatusCode::BAD_REQUEST,
            code: "SAAP-U002",
            message: message.into(),
        }
    }
    pub(super) fn not_found(message: impl Into<String>) -> Self {
        StudioError {
            status: StatusCode::NOT_FOUND,
            code: "SAAP-U001",
            message: message.into(),
        }
    }
    pub(super) fn internal(message: impl Into<String>) -> Self {
        StudioError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            code: "SAAP-U005",
            message: message.into(),
        }
    }
    /// The engine refused the action (an ended run, a fork point it cannot fork at…).
    pub(super) fn refused(message: impl Into<String>) -> Self {
        StudioError {
            status: StatusCode::CONFLICT,
            code: "SAAP-U006",
            message: message.into(),
        }
    }
}

impl IntoResponse for StudioError {
    fn into_response(self) -> Response {
        let body = format!(
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{code} · saap studio</title>\
             <link rel=\"stylesheet\" href=\"/static/studio.css\"></head><body><main>\
             <h1>{status}</h1><p class=\"error\" data-code=\"{code}\">error[{code}]: {msg}</p>\
             <p><a href=\"/\">the run list</a></p></main></body></html>\n",
            code = self.code,
            status = self.status,
            msg = esc(&self.message),
        );
        (
            self.status,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            body,
        )
            .into_response()
    }
}
