//! What the studio does to runs, each a form posted with the token (the guard checked it):
//! start a run, send an event (a person's answer), cancel, fork from an event, replay. Each goes through
//! the engine exactly as the command of the same name does; a refusal comes back as the
//! engine's own error and code, with nothing written. Must not act without the guard.

use super::html::esc;
#[cfg(feature = "nats")]
use super::state::Runs;
use super::state::{Action, Shared, StudioError};
use crate::engine::{Engine, EngineError};
use crate::event::Payload;
use crate::fork::{ForkChange, ForkOptions};
use crate::history::StoredRunView;
use crate::workflow::Workflow;
use axum::extract::{Form, Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use std::time::Duration;

/// The longest cancellation reason kept.
const MAX_REASON: usize = 4096;
/// How long a fork waits for each later event it sends again to settle.
const FORK_SETTLE: Duration = Duration::from_secs(10);

fn refused(e: EngineError) -> StudioError {
    match e {
        EngineError::Store(_) | EngineError::Core { .. } | EngineError::Replay { .. } => {
            StudioError::internal(e.to_string())
        }
        EngineError::UnknownRun { .. } => StudioError::not_found(e.to_string()),
        _ => StudioError {
            code: e.code(),
            ..StudioError::refused(e.to_string())
        },
    }
}

/// An event typed in a form: `{"_event_name": …, …fields}`, as `send --event` takes it
/// (never a file: `@FILE` is the command line's only).
fn typed_event(what: &str, text: &str) -> Result<(String, Payload), StudioError> {
    let value: serde_json::Value = serde_json::from_str(text.trim()).map_err(|e| {
        StudioError::bad(format!(
            "{what} is not JSON ({e}); write it as {{\"_event_name\": \"ApprovalGiven\", ...fields}}"
        ))
    })?;
    let (name, fields) =
        super::super::send::event_fields(what, value).map_err(|f| StudioError::bad(f.message))?;
    Ok((name, Payload::from_json(fields)))
}

/// Run `id` (its id or a unique prefix) rebuilt from the store, with its agent; refused
/// when it has ended.
async fn live_run(studio: &Shared, id: &str) -> Result<(Workflow, StoredRunView), StudioError> {
    let (agent, stored, _) = studio.read_run(id).await?;
    let view = StoredRunView::rebuild(&agent, &stored)
        .map_err(|e| StudioError::internal(e.to_string()))?;
    if view.run.is_terminated() {
        let ended = super::super::send::ended_run(&view.run_id, &view.run);
        return Err(StudioError::refused(ended.message));
    }
    Ok((agent, view))
}

fn to_run(run_id: &str, note: &str) -> Response {
    Redirect::to(&format!("/runs/{run_id}?note={note}")).into_response()
}

#[derive(serde::Deserialize)]
pub(super) struct SendForm {
    event: String,
}

pub(super) async fn send(
    State(studio): State<Shared>,
    Path(id): Path<String>,
    Form(form): Form<SendForm>,
) -> Response {
    let result = async {
        studio.allow(Action::Send)?;
        let (name, payload) = typed_event("the event", &form.event)?;
        let (agent, view) = live_run(&studio, &id).await?;
        let run_id = view.run_id.clone();
        match (&studio.runs, studio.engine_for(&agent)) {
            (_, Some(engine)) => {
                engine
                    .send_named(&run_id, &name, payload)
                    .await
                    .map_err(refused)?;
            }
            #[cfg(feature = "nats")]
            (Runs::Nats { reader, opts }, None) => {
                let fields = payload.try_json().cloned().unwrap_or_default();
                super::nats::send(reader, opts, &agent, &view, &name, fields).await?;
            }
            #[allow(unreachable_patterns)]
            _ => return Err(StudioError::internal("no engine acts on this run")),
        }
        tracing::info!(run = %run_id, event = %name, "studio: event sent");
        Ok::<_, StudioError>(to_run(&run_id, "sent"))
    }
    .await;
    result.unwrap_or_else(IntoResponse::into_response)
}

#[derive(serde::Deserialize)]
pub(super) struct StartForm {
    /// A message: the run starts with a UserMessageEvent.
    #[serde(default)]
    message: String,
    /// Or a start event, as `run --event` takes it.
    #[serde(default)]
    event: String,
    /// The run's thread (default: a new one).
    #[serde(default)]
    thread: String,
    /// The agent, when it is not the studio's own.
    #[serde(default)]
    agent: String,
}

/// Starts a run, as `run --message` or `run --event` does, and goes to its page.
pub(super) async fn start(State(studio): State<Shared>, Form(form): Form<StartForm>) -> Response {
    let result = async {
        studio.allow(Action::Start)?;
        let agent = studio.agent(Some(form.agent.as_str()))?;
        let (name, payload) = if !form.event.trim().is_empty() {
            typed_event("the start event", &form.event)?
        } else if !form.message.trim().is_empty() {
            (
                "UserMessageEvent".to_string(),
                Payload::from_json(serde_json::json!({ "message": form.message })),
            )
        } else {
            return Err(StudioError::bad(
                "say what the run starts with: a message, or a start event as JSON",
            ));
        };
        let thread = Some(form.thread.trim()).filter(|t| !t.is_empty());
        if thread.is_some_and(|t| t.len() > 128) {
            return Err(StudioError::bad("a thread id is at most 128 characters"));
        }
        let run_id = match (&studio.runs, studio.engine_for(&agent)) {
            (_, Some(engine)) => engine
                .start_run_named(thread, &name, payload)
                .await
                .map_err(refused)?,
            #[cfg(feature = "nats")]
            (Runs::Nats { reader, opts }, None) => {
                let fields = payload.try_json().cloned().unwrap_or_default();
                super::nats::start(reader, opts, &agent, thread, &name, fields).await?
            }
            #[allow(unreachable_patterns)]
            _ => return Err(StudioError::internal("no engine acts on this run")),
        };
        tracing::info!(run = %run_id, event = %name, "studio: run started");
        Ok(to_run(&run_id, "started"))
    }
    .await;
    result.unwrap_or_else(IntoResponse::into_response)
}

#[derive(serde::Deserialize)]
pub(super) struct CancelForm {
    #[serde(default)]
    reason: String,
}

pub(super) async fn cancel(
    State(studio): State<Shared>,
    Path(id): Path<String>,
    Form(form): Form<CancelForm>,
) -> Response {
    let result = async {
        studio.allow(Action::Cancel)?;
        let (agent, view) = live_run(&studio, &id).await?;
        let run_id = view.run_id.clone();
        let reason: String = match form.reason.trim() {
            "" => "cancelled from the studio".to_string(),
            r => r.chars().take(MAX_REASON).collect(),
        };
        match (&studio.runs, studio.engine_for(&agent)) {
            (_, Some(engine)) => {
                engine.cancel(&run_id, &reason).await.map_err(refused)?;
            }
            #[cfg(feature = "nats")]
            (Runs::Nats { reader, opts }, None) => {
                super::nats::cancel(reader, opts, &agent, &view, &reason).await?;
            }
            #[allow(unreachable_patterns)]
            _ => return Err(StudioError::internal("no engine acts on this run")),
        }
        tracing::info!(run = %run_id, "studio: run cancelled");
        Ok::<_, StudioError>(to_run(&run_id, "cancelled"))
    }
    .await;
    result.unwrap_or_else(IntoResponse::into_response)
}

#[derive(serde::Deserialize)]
pub(super) struct ForkForm {
    at: u32,
    /// same, replace or add.
    #[serde(default)]
    mode: String,
    #[serde(default)]
    event: String,
    #[serde(default)]
    no_reapply: Option<String>,
    #[serde(default)]
    no_reuse: Option<String>,
}

pub(super) async fn fork(
    State(studio): State<Shared>,
    Path(id): Path<String>,
    Form(form): Form<ForkForm>,
) -> Response {
    let result = async {
        let change = match form.mode.as_str() {
            "" | "same" => ForkChange::Same,
            "replace" => {
                let (name, payload) = typed_event("the replacing event", &form.event)?;
                ForkChange::Replace { name, payload }
            }
            "add" => {
                let (name, payload) = typed_event("the added event", &form.event)?;
                ForkChange::Add { name, payload }
            }
            m => {
                return Err(StudioError::bad(format!(
                    "`{}` is not a way to fork: same, replace or add",
                    m.chars().take(32).collect::<String>()
                )));
            }
        };
        studio.allow(Action::Fork)?;
        let (agent, run_id) = studio.find_run(&id).await?;
        let Some(engine) = studio.engine_for(&agent) else {
            return Err(StudioError::internal("no engine acts on this run"));
        };
        let opts = ForkOptions {
            reapply: form.no_reapply.is_none(),
            reuse: form.no_reuse.is_none(),
            settle: FORK_SETTLE,
            ..ForkOptions::new(form.at, change)
        };
        let forked = engine.fork(&run_id, opts).await.map_err(refused)?;
        tracing::info!(run = %run_id, fork = %forked.run_id, at = forked.at, "studio: run forked");
        Ok(to_run(&forked.run_id, "forked"))
    }
    .await;
    result.unwrap_or_else(IntoResponse::into_response)
}

pub(super) async fn replay(
    State(studio): State<Shared>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let result = async {
        studio.allow(Action::Replay)?;
        let (agent, stored, effects) = studio.read_run(&id).await?;
        let report = Engine::replay_stored(&agent, &stored, effects)
            .await
            .map_err(|e| StudioError::internal(e.to_string()))?;
        let verdict = if report.reproduced() {
            "<p class=\"notice ok\" data-replay=\"reproduced\">Reproduced: every step body gave what the record holds.</p>"
        } else {
            "<p class=\"notice bad\" data-replay=\"diverged\">Diverged: see where below.</p>"
        };
        let body = format!(
            "<h1>Replay of run <a href=\"/runs/{id}\"><code>{id}</code></a></h1>{verdict}<pre>{}</pre>\
             <p><a href=\"/runs/{id}\">back to the run</a></p>",
            esc(&crate::replay::report_text(&report)),
            id = esc(&report.run_id),
        );
        Ok::<_, StudioError>(studio.page(&headers, "replay", &body))
    }
    .await;
    result.unwrap_or_else(IntoResponse::into_response)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_typed_event_needs_json_with_a_type_and_never_reads_a_file() {
        let (name, _) = typed_event("the event", "{\"_event_name\": \"Go\", \"n\": 1}")
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(name, "Go");
        let file = typed_event("the event", "@/etc/passwd").unwrap_err();
        assert!(file.message.contains("is not JSON"), "{}", file.message);
        let untyped = typed_event("the event", "{\"n\": 1}").unwrap_err();
        assert!(
            untyped.message.contains("_event_name"),
            "{}",
            untyped.message
        );
    }
}
