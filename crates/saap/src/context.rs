//! What a step body can reach besides its events (the injectables of DESIGN §3): the run's
//! ids, RunContext (run-scoped key/value state, deleted when the run ends), ThreadContext
//! (thread-scoped, expires after its TTL) and the event displayer (display events: chunks,
//! thoughts, costs).

use crate::backend::{Scope, StoreError};
use crate::engine::{RunSlot, Shared};
use crate::event::{Event, Payload, to_payload};
use saap_dispatch::ExecutionId;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// Errors of context and displayer calls.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ContextError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "context value `{key}` does not have the expected type: {message}; read it with the type it was written with"
    )]
    Type { key: String, message: String },
    #[error(
        "`{name}` is not a display-only event; the displayer only shows display events (parents `DisplayEvent`), return control events from the step instead"
    )]
    NotDisplay { name: String },
    #[error(transparent)]
    Engine(#[from] Box<crate::engine::EngineError>),
    #[error(
        "the engine that ran this step is gone (dropped); a step's context is only usable while its engine exists — do not keep it beyond the step"
    )]
    EngineGone,
}

/// Where a step's display events go when its body runs away from the run's owner (a
/// worker that took the execution from the work queue): the sink delivers them to the owner,
/// which derives their ids from execution and counter as for a local body.
pub trait DisplaySink: Send + Sync {
    /// Shows display event `n` (0, 1, …) of execution `execution`.
    fn show(
        &self,
        execution: ExecutionId,
        n: u32,
        name: &'static str,
        payload: Payload,
    ) -> Pin<Box<dyn Future<Output = Result<(), ContextError>> + Send + 'static>>;
}

/// The run an execution belongs to, as its body sees it.
#[derive(Clone)]
pub(crate) enum CtxRun {
    /// The body runs where the run is held.
    Local(Arc<RunSlot>),
    /// The body runs on a worker that does not hold the run.
    Remote(Arc<RemoteRun>),
}

/// What a body running away from its run needs: ids, the start event's fields (configs) and
/// a display sink.
pub(crate) struct RemoteRun {
    pub shared: Arc<Shared>,
    pub run_id: Arc<str>,
    pub thread_id: Arc<str>,
    pub start: Payload,
    pub display: Arc<dyn DisplaySink>,
    /// How many display events the execution showed (one `RemoteRun` per execution).
    pub displayed: AtomicU32,
}

impl CtxRun {
    /// The engine the run belongs to. A local run's slot refers to its engine weakly, so
    /// that a step's context costs one reference count (its run), not two.
    fn shared(&self) -> Result<Arc<Shared>, ContextError> {
        match self {
            CtxRun::Local(slot) => slot.engine().ok_or(ContextError::EngineGone),
            CtxRun::Remote(r) => Ok(r.shared.clone()),
        }
    }
}

/// The injectables of one execution. Cloning is cheap.
#[derive(Clone)]
pub struct StepCtx {
    pub(crate) run: CtxRun,
    pub(crate) execution: ExecutionId,
    pub(crate) attempt: u32,
}

impl StepCtx {
    pub fn run_id(&self) -> &str {
        match &self.run {
            CtxRun::Local(slot) => &slot.run_id,
            CtxRun::Remote(r) => &r.run_id,
        }
    }
    pub fn thread_id(&self) -> &str {
        match &self.run {
            CtxRun::Local(slot) => slot.thread_id(),
            CtxRun::Remote(r) => &r.thread_id,
        }
    }
    /// This execution's id within the run.
    pub fn execution(&self) -> ExecutionId {
        self.execution
    }
    /// 1 on the first attempt; higher when the execution is re-run after a crash.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }
    pub fn run_context(&self) -> RunContext {
        RunContext {
            run: self.run.clone(),
            scope: Scope::Run(match &self.run {
                CtxRun::Local(slot) => slot.run_id.clone(),
                CtxRun::Remote(r) => r.run_id.clone(),
            }),
        }
    }
    pub fn thread_context(&self) -> ThreadContext {
        ThreadContext(RunContext {
            run: self.run.clone(),
            scope: Scope::Thread(match &self.run {
                CtxRun::Local(slot) => slot.thread_id().clone(),
                CtxRun::Remote(r) => r.thread_id.clone(),
            }),
        })
    }
    /// Shows a display event (never dispatched; stored in the run's log as evidence). Ids
    /// are derived from the execution, so a re-run after a crash does not show it twice.
    pub async fn display<T: Event>(&self, event: &T) -> Result<(), ContextError> {
        let payload = to_payload(event).map_err(|e| ContextError::Type {
            key: T::NAME.to_string(),
            message: e.to_string(),
        })?;
        match &self.run {
            CtxRun::Local(slot) => {
                // Numbered by the run, not the context: a step's context costs no counter.
                let n = slot.lock().next_display(self.execution, self.attempt);
                self.run
                    .shared()?
                    .display(slot, self.execution, n, T::NAME.into(), payload)
                    .await
            }
            CtxRun::Remote(r) => {
                let n = r.displayed.fetch_add(1, Ordering::Relaxed);
                r.display.show(self.execution, n, T::NAME, payload).await
            }
        }
    }
}

/// Run-scoped state (DESIGN §4.6): for control-flow state such as loop counters, not for
/// passing data between steps (use events for that). Deleted when the run ends.
#[derive(Clone)]
pub struct RunContext {
    run: CtxRun,
    scope: Scope,
}

impl RunContext {
    pub async fn get<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, ContextError> {
        let v = self
            .run
            .shared()?
            .backend
            .ctx_get(self.scope.clone(), key)
            .wait()
            .await?;
        match v {
            None => Ok(None),
            Some(v) => T::deserialize(&v)
                .map(Some)
                .map_err(|e| ContextError::Type {
                    key: key.to_string(),
                    message: e.to_string(),
                }),
        }
    }
    pub async fn set<T: Serialize>(&self, key: &str, value: &T) -> Result<(), ContextError> {
        let v = serde_json::to_value(value).map_err(|e| ContextError::Type {
            key: key.to_string(),
            message: e.to_string(),
        })?;
        Ok(self
            .run
            .shared()?
            .backend
            .ctx_set(self.scope.clone(), key, v)
            .wait()
            .await?)
    }
    pub async fn delete(&self, key: &str) -> Result<(), ContextError> {
        Ok(self
            .run
            .shared()?
            .backend
            .ctx_delete(self.scope.clone(), key)
            .wait()
            .await?)
    }
}

/// Thread-scoped state: outlives runs, expires after the backend's TTL (default 30 days).
#[derive(Clone)]
pub struct ThreadContext(RunContext);

impl ThreadContext {
    pub async fn get<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, ContextError> {
        self.0.get(key).await
    }
    pub async fn set<T: Serialize>(&self, key: &str, value: &T) -> Result<(), ContextError> {
        self.0.set(key, value).await
    }
    pub async fn delete(&self, key: &str) -> Result<(), ContextError> {
        self.0.delete(key).await
    }
}
