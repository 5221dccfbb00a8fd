//! What a step body can reach besides its events (the injectables of DESIGN §3): the run's
//! ids, RunContext (run-scoped key/value state, deleted when the run ends), ThreadContext
//! (thread-scoped, expires after its TTL) and the event displayer (display events: chunks,
//! thoughts, costs).

use crate::backend::{Backend, Scope, StoreError};
use crate::config::{
    AgentConfig, Config, ConfigError, StepConfig, agent_config, short_type, step_config,
};
use crate::engine::error::EngineError;
use crate::engine::ids::{RunIdText, hex_id};
use crate::engine::run_names::RunNames;
use crate::event::{Event, Payload, to_payload};
use crate::resource::{Res, ResourceError};
use saap_dispatch::{EventId, ExecutionId};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::any::{Any, TypeId};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

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
    Engine(#[from] Box<EngineError>),
    #[error(
        "the engine that ran this step is gone (dropped); a step's context is only usable while its engine exists — do not keep it beyond the step"
    )]
    EngineGone,
    #[error(
        "run `{run_id}` has ended and left the engine; a step's context shows events and reads the run's start event only while its run is held — do not keep the context beyond the step"
    )]
    RunGone { run_id: String },
    #[error(transparent)]
    Resource(#[from] ResourceError),
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

/// What a step's context asks of the engine that holds its run. The engine implements it;
/// this module knows none of the engine's types (the authoring API sits below the engine).
pub(crate) trait RunHost: Send + Sync {
    /// The store behind RunContext and ThreadContext.
    fn backend(&self) -> &Arc<dyn Backend>;
    /// Shows display event `name` of execution `execution` (attempt `attempt`) of the run
    /// `run_id` holds: numbered by the run, logged once even when shown again by a re-run.
    fn show_display(
        self: Arc<Self>,
        run_id: &str,
        execution: ExecutionId,
        attempt: u32,
        name: &'static str,
        payload: Payload,
    ) -> Pin<Box<dyn Future<Output = Result<(), ContextError>> + Send + 'static>>;
    /// The fields of the event that started run `run_id`, while the engine holds it.
    fn start_fields(&self, run_id: &str) -> Result<Payload, ContextError>;
    /// The workflow's resource of type `id`.
    fn resource(&self, id: TypeId) -> Option<Arc<dyn Any + Send + Sync>>;
    /// The signal cancelled when run `run_id` is cancelled (`None`: the engine no longer
    /// holds the run).
    fn cancellation(&self, run_id: &str) -> Option<tokio_util::sync::CancellationToken>;
    /// How much one run's effect journal may hold (`StepCtx::effect`).
    fn effect_limits(&self) -> crate::backend::EffectLimits;
    /// In a replay (`saap::replay`): what the recorded run got for effect `key` at `at`,
    /// served instead of calling out. `None`: not a replay, call out as usual.
    fn replayed_effect(
        &self,
        at: &crate::backend::EffectAt,
        key: &str,
    ) -> Option<crate::backend::effects::Replayed> {
        let _ = (at, key);
        None
    }
    /// Counts what a model call of `execution` (attempt `attempt`) of run `run_id` used,
    /// for the run's token and cost budget (taken with the execution's completion).
    fn report_usage(
        &self,
        run_id: &str,
        execution: ExecutionId,
        attempt: u32,
        tokens: u64,
        cost_micros: u64,
    );
}

/// The run an execution belongs to, as its body sees it.
#[derive(Clone)]
pub(crate) enum CtxRun {
    /// The body runs where the run is held.
    Local(LocalRun),
    /// The body runs on a worker that does not hold the run.
    Remote(Arc<RemoteRun>),
}

/// What a body running away from its run needs: ids, the start event's fields (configs) and
/// a display sink.
pub(crate) struct RemoteRun {
    pub host: Arc<dyn RunHost>,
    pub run_id: Arc<str>,
    pub thread_id: Arc<str>,
    pub start: Payload,
    pub display: Arc<dyn DisplaySink>,
    /// How many display events the execution showed (one `RemoteRun` per execution).
    pub displayed: AtomicU32,
    /// What its model calls used (tokens, cost in millionths), for the run's owner.
    pub usage: std::sync::Mutex<(u64, u64)>,
    /// Cancelled when the run is (see `crate::nats`'s body cancels).
    pub cancel: tokio_util::sync::CancellationToken,
}

impl RemoteRun {
    /// What the execution's model calls used so far: (tokens, cost in millionths).
    pub fn used(&self) -> (u64, u64) {
        *self.usage.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A run held by this process, as a step's context refers to it: by its id (unique in its
/// engine), not by a counted reference. Making and dropping one per step costs no atomic
/// operation (a reference to the run's slot cost two, ~15 ns); a body that uses its
/// context has the engine find the run by its id.
#[derive(Clone)]
pub(crate) struct LocalRun {
    engine: EngineRef,
    run_id: IdText,
    /// The thread's id: copied when given, else made from `new_thread` on first use (as
    /// the run's slot does).
    thread_id: OnceLock<IdText>,
    new_thread: EventId,
}

impl LocalRun {
    #[inline(always)]
    pub(crate) fn new(engine: EngineRef, names: &RunNames) -> LocalRun {
        let new_thread = names.new_thread();
        LocalRun {
            engine,
            run_id: IdText::from_run(names.id_text()),
            thread_id: match names.given_thread() {
                Some(t) => OnceLock::from(IdText::new(t)),
                None => OnceLock::new(),
            },
            new_thread,
        }
    }

    fn thread_id(&self) -> &str {
        self.thread_id
            .get_or_init(|| IdText::new(&hex_id(&self.new_thread)))
            .as_str()
    }

    /// The engine that holds the run, while it exists.
    fn host(&self) -> Result<Arc<dyn RunHost>, ContextError> {
        self.engine.get().ok_or(ContextError::EngineGone)
    }
}

/// A run's or thread's id, copied into a step's context: inline when short (the engine's
/// own ids are 24 characters), else shared.
#[derive(Clone)]
enum IdText {
    Inline { len: u8, bytes: [u8; INLINE_ID] },
    Shared(Arc<str>),
}

/// The longest id a context holds inline: the engine's own ids.
const INLINE_ID: usize = 24;

impl IdText {
    /// Out of line: the usual context has an engine-made run id and a made thread, and
    /// needs none of this.
    #[inline(never)]
    fn new(id: &Arc<str>) -> IdText {
        let src = id.as_bytes();
        // The engine's ids: a copy of fixed size.
        if let Ok(bytes) = <[u8; INLINE_ID]>::try_from(src) {
            return IdText::Inline {
                len: INLINE_ID as u8,
                bytes,
            };
        }
        if src.len() < INLINE_ID {
            let mut bytes = [0u8; INLINE_ID];
            bytes[..src.len()].copy_from_slice(src);
            IdText::Inline {
                len: src.len() as u8,
                bytes,
            }
        } else {
            IdText::Shared(id.clone())
        }
    }
    /// A run's id: an engine-made one copied, without making its shared text.
    #[inline(always)]
    fn from_run(id: &RunIdText) -> IdText {
        match id {
            RunIdText::Hex(bytes) => IdText::Inline {
                len: INLINE_ID as u8,
                bytes: *bytes.bytes(),
            },
            RunIdText::Other(s) => IdText::new(s),
        }
    }
    fn as_str(&self) -> &str {
        match self {
            // Copied whole from a `str`: always valid.
            IdText::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..*len as usize]).unwrap_or_default()
            }
            IdText::Shared(s) => s,
        }
    }
}

/// An engine as a step's context refers to it: its entry in [`ENGINES`], reused by a later
/// engine only with a new generation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EngineRef {
    index: u32,
    generation: u32,
}

/// The engines of this process, for contexts that refer to them without a counted
/// reference (see [`LocalRun`]). An engine is added when made and removed when dropped.
static ENGINES: Mutex<Engines> = Mutex::new(Engines {
    entries: Vec::new(),
    free: Vec::new(),
});

struct Engines {
    /// Per entry: its generation (bumped when its engine is dropped) and the engine (none
    /// once dropped).
    entries: Vec<(u32, Option<Weak<dyn RunHost>>)>,
    /// Entries of dropped engines.
    free: Vec<u32>,
}

fn engines() -> std::sync::MutexGuard<'static, Engines> {
    // Every change leaves the registry consistent: a panic elsewhere cannot break it.
    ENGINES.lock().unwrap_or_else(|p| p.into_inner())
}

impl EngineRef {
    /// Adds an engine being made (`Arc::new_cyclic`).
    pub(crate) fn register(engine: Weak<dyn RunHost>) -> EngineRef {
        let mut e = engines();
        match e.free.pop() {
            Some(index) => {
                let entry = &mut e.entries[index as usize];
                entry.1 = Some(engine);
                EngineRef {
                    index,
                    generation: entry.0,
                }
            }
            None => {
                let index = e.entries.len() as u32;
                e.entries.push((0, Some(engine)));
                EngineRef {
                    index,
                    generation: 0,
                }
            }
        }
    }

    /// Removes a dropped engine; its entry is free for another.
    pub(crate) fn unregister(self) {
        let mut e = engines();
        if let Some(entry) = e.entries.get_mut(self.index as usize)
            && entry.0 == self.generation
        {
            // A reference to the dropped engine matches no later one.
            entry.0 = entry.0.wrapping_add(1);
            entry.1 = None;
            e.free.push(self.index);
        }
    }

    /// The engine, while it exists.
    fn get(self) -> Option<Arc<dyn RunHost>> {
        let e = engines();
        let (generation, engine) = e.entries.get(self.index as usize)?;
        if *generation != self.generation {
            return None;
        }
        engine.as_ref()?.upgrade()
    }
}

impl CtxRun {
    /// The engine the run belongs to.
    pub(crate) fn host(&self) -> Result<Arc<dyn RunHost>, ContextError> {
        match self {
            CtxRun::Local(run) => run.host(),
            CtxRun::Remote(r) => Ok(r.host.clone()),
        }
    }
}

/// A step's context about to be made: from what identifies its run, in the body's own
/// frame (a context is ~100 bytes; handing a made one through the engine's calls copies it
/// at each), or made already (a body run away from its run).
pub(crate) enum NewCtx<'a> {
    Local {
        engine: EngineRef,
        names: &'a RunNames,
        execution: ExecutionId,
        attempt: u32,
    },
    Made(Box<StepCtx>),
}

impl NewCtx<'_> {
    #[inline(always)]
    pub(crate) fn make(self) -> StepCtx {
        match self {
            NewCtx::Local {
                engine,
                names,
                execution,
                attempt,
            } => StepCtx {
                run: std::mem::ManuallyDrop::new(CtxRun::Local(LocalRun::new(engine, names))),
                execution,
                attempt,
            },
            NewCtx::Made(ctx) => *ctx,
        }
    }
}

/// The injectables of one execution. Cloning is cheap.
#[derive(Clone)]
pub struct StepCtx {
    /// Dropped by `StepCtx`'s `Drop` (out of line) when it owns anything, else left as is.
    pub(crate) run: std::mem::ManuallyDrop<CtxRun>,
    pub(crate) execution: ExecutionId,
    pub(crate) attempt: u32,
}

/// What a dropped context leaves behind when it owned something: nothing to drop.
fn no_run() -> CtxRun {
    CtxRun::Local(LocalRun {
        engine: EngineRef {
            index: 0,
            generation: 0,
        },
        run_id: IdText::Inline {
            len: 0,
            bytes: [0; INLINE_ID],
        },
        thread_id: OnceLock::new(),
        new_thread: EventId::from_bytes([0; 12]),
    })
}

/// A context usually owns nothing (a local run's ids inline): its drop
/// is then three checks, inline where it is dropped, and what it owns is dropped out of
/// line. `run` is a `ManuallyDrop`, so no drop glue of its own follows: before, the glue
/// (`drop_in_place<StepCtx>`) was never inlined, a call on every step for which the context
/// was first copied whole.
impl Drop for StepCtx {
    #[inline(always)]
    fn drop(&mut self) {
        let owns = match &mut *self.run {
            CtxRun::Remote(_) => true,
            CtxRun::Local(run) => {
                matches!(run.run_id, IdText::Shared(_))
                    || matches!(run.thread_id.get_mut(), Some(IdText::Shared(_)))
            }
        };
        // Otherwise it owns no allocation and no reference: left as it is, nothing leaks.
        if owns {
            let run = std::mem::replace(&mut self.run, std::mem::ManuallyDrop::new(no_run()));
            drop_owned(std::mem::ManuallyDrop::into_inner(run));
        }
    }
}

/// Drops what a context owned (see `StepCtx`'s `Drop`).
#[cold]
#[inline(never)]
fn drop_owned(run: CtxRun) {
    drop(run);
}

impl StepCtx {
    /// The context of execution `execution` (attempt `attempt`) of the run named `names`,
    /// held by the engine `engine`.
    #[cfg(test)]
    pub(crate) fn local(
        engine: EngineRef,
        names: &RunNames,
        execution: ExecutionId,
        attempt: u32,
    ) -> StepCtx {
        NewCtx::Local {
            engine,
            names,
            execution,
            attempt,
        }
        .make()
    }

    pub fn run_id(&self) -> &str {
        match &*self.run {
            CtxRun::Local(run) => run.run_id.as_str(),
            CtxRun::Remote(r) => &r.run_id,
        }
    }
    pub fn thread_id(&self) -> &str {
        match &*self.run {
            CtxRun::Local(run) => run.thread_id(),
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
            run: CtxRun::clone(&self.run),
            scope: Scope::Run(match &*self.run {
                CtxRun::Local(run) => run.run_id.as_str().into(),
                CtxRun::Remote(r) => r.run_id.clone(),
            }),
        }
    }
    pub fn thread_context(&self) -> ThreadContext {
        ThreadContext(RunContext {
            run: CtxRun::clone(&self.run),
            scope: Scope::Thread(match &*self.run {
                CtxRun::Local(run) => run.thread_id().into(),
                CtxRun::Remote(r) => r.thread_id.clone(),
            }),
        })
    }
    /// Shows a display event (never dispatched; stored in the run's log as evidence). Ids
    /// are derived from the execution, so a re-run after a crash does not show it twice.
    /// Fails with [`ContextError::RunGone`] once the run has left its engine.
    pub async fn display<T: Event>(&self, event: &T) -> Result<(), ContextError> {
        // The JSON form is made here, so an event that cannot be serialized is this call's
        // error rather than the journal's.
        let payload = to_payload(event).map_err(|e| ContextError::Type {
            key: T::NAME.to_string(),
            message: e.to_string(),
        })?;
        self.display_payload(T::NAME, payload).await
    }

    /// Shows a display event of a type whose JSON form cannot fail (the protocol's own, such
    /// as a model's `ChunkEvent`s), kept typed: no JSON value is made per event, the store
    /// writes its text straight from the value.
    #[cfg_attr(not(feature = "llm"), allow(dead_code))]
    pub(crate) async fn display_owned<T: Event>(&self, event: T) -> Result<(), ContextError> {
        self.display_payload(T::NAME, Payload::typed(event)).await
    }

    async fn display_payload(
        &self,
        name: &'static str,
        payload: Payload,
    ) -> Result<(), ContextError> {
        match &*self.run {
            CtxRun::Local(run) => {
                // Numbered by the run, not the context: a step's context costs no counter.
                run.host()?
                    .show_display(
                        run.run_id.as_str(),
                        self.execution,
                        self.attempt,
                        name,
                        payload,
                    )
                    .await
            }
            CtxRun::Remote(r) => {
                let n = r.displayed.fetch_add(1, Ordering::Relaxed);
                r.display.show(self.execution, n, name, payload).await
            }
        }
    }
}

impl StepCtx {
    /// The fields of the event that started this run (with its `_config`); null once the
    /// run has left its engine (`config` and `step_config` fail then).
    pub fn start_fields(&self) -> Payload {
        self.held_start_fields()
            .unwrap_or_else(|_| Payload::from_json(serde_json::Value::Null))
    }

    /// The start event's fields, or why the run cannot be read any more.
    fn held_start_fields(&self) -> Result<Payload, ContextError> {
        match &*self.run {
            CtxRun::Local(run) => run.host()?.start_fields(run.run_id.as_str()),
            CtxRun::Remote(r) => Ok(r.start.clone()),
        }
    }

    /// The workflow's resource of type `T` (what `r: Res<T>` injects): shared, never
    /// rebuilt per execution.
    pub fn resource<T: Any + Send + Sync>(&self) -> Result<Res<T>, ContextError> {
        let host = match &*self.run {
            CtxRun::Local(run) => run.host()?,
            CtxRun::Remote(r) => Arc::clone(&r.host),
        };
        host.resource(TypeId::of::<T>())
            .and_then(Res::from_any)
            .ok_or_else(|| {
                ContextError::Resource(ResourceError::NotHeld {
                    resource: Res::<T>::type_label(),
                })
            })
    }

    /// A signal cancelled when this run is cancelled (`Engine::cancel`, `<agent> cancel`):
    /// a long body selects on `token.cancelled()` to stop early — what it returns after the
    /// run ended is only kept as evidence. `Llm::chat` stops its model call on it. A body
    /// run on another worker (NATS `Steps::Shared`) is told through the class's cancel
    /// notices (best effort: one that starts after the notice passed is not).
    pub fn cancellation(&self) -> tokio_util::sync::CancellationToken {
        let token = match &*self.run {
            CtxRun::Local(run) => run
                .host()
                .ok()
                .and_then(|h| h.cancellation(run.run_id.as_str())),
            CtxRun::Remote(run) => Some(run.cancel.clone()),
        };
        token.unwrap_or_default()
    }

    /// Reports what a model call of this execution used — `tokens`, and `cost` in the price
    /// table's currency — for the run's token and cost budget (`RunBudget::max_tokens`,
    /// `max_cost`): counted when the execution completes; once a budget is used up, what
    /// the run would run next waits for `resume`. `saap::llm` reports every call it makes
    /// (replayed calls too: a re-run execution's count replaces the lost attempt's); a body
    /// that calls a model another way reports its calls itself. A body run on another
    /// worker (NATS `Steps::Shared`) sends it to the run's owner with its completion.
    pub fn report_usage(&self, tokens: u64, cost: f64) {
        match &*self.run {
            CtxRun::Local(run) => {
                if let Ok(host) = run.host() {
                    host.report_usage(
                        run.run_id.as_str(),
                        self.execution,
                        self.attempt,
                        tokens,
                        cost_micros(cost),
                    );
                }
            }
            // Sent to the run's owner with the completion.
            CtxRun::Remote(run) => {
                let mut used = run.usage.lock().unwrap_or_else(|p| p.into_inner());
                used.0 = used.0.saturating_add(tokens);
                used.1 = used.1.saturating_add(cost_micros(cost));
            }
        }
    }

    /// The run's agent config (what `cfg: Config<C>` injects).
    pub fn config<C: AgentConfig>(&self) -> Result<Config<C>, ConfigError> {
        let fields = self.held_start_fields().map_err(|e| ConfigError::Agent {
            config: short_type::<C>(),
            message: e.to_string(),
        })?;
        agent_config(&fields).map(Config::new)
    }

    /// The run's config of step `step` (what `s: StepConfig<S>` injects).
    pub fn step_config<S: AgentConfig>(&self, step: &str) -> Result<StepConfig<S>, ConfigError> {
        let fields = self.held_start_fields().map_err(|e| ConfigError::Step {
            step: step.to_string(),
            config: short_type::<S>(),
            message: e.to_string(),
        })?;
        step_config(&fields, step).map(StepConfig::new)
    }
}

/// A cost in millionths of its currency (negative and non-numbers count as nothing).
pub(crate) fn cost_micros(cost: f64) -> u64 {
    if cost.is_finite() && cost > 0.0 {
        (cost * 1e6).round().min(u64::MAX as f64) as u64
    } else {
        0
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
            .host()?
            .backend()
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
            .host()?
            .backend()
            .ctx_set(self.scope.clone(), key, v)
            .wait()
            .await?)
    }
    pub async fn delete(&self, key: &str) -> Result<(), ContextError> {
        Ok(self
            .run
            .host()?
            .backend()
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::engine::Engine;
    use crate::event::{ChunkEvent, StopEvent, UserMessageEvent};
    use crate::params::Required;
    use crate::workflow::{Step, StepError, Workflow};

    /// A workflow whose one step keeps its context in `kept` and, with `display`, shows a
    /// chunk from a task of its own (the context moved there) before it ends.
    fn keeper(kept: Arc<Mutex<Option<StepCtx>>>, display: bool) -> Workflow {
        Workflow::builder("Keeper")
            .step(Step::new(
                "keep",
                move |_: Required<UserMessageEvent>, ctx: StepCtx| {
                    let kept = kept.clone();
                    async move {
                        *kept.lock().unwrap_or_else(|p| p.into_inner()) = Some(ctx.clone());
                        if display {
                            let moved = ctx.clone();
                            tokio::spawn(
                                async move { moved.display(&ChunkEvent::default()).await },
                            )
                            .await
                            .map_err(|e| StepError::new(e.to_string()))??;
                        }
                        Ok::<_, StepError>(StopEvent::default())
                    }
                },
            ))
            .build()
            .expect("valid workflow")
    }

    fn take(kept: &Mutex<Option<StepCtx>>) -> StepCtx {
        kept.lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .expect("the step kept its context")
    }

    #[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
    struct Cfg {
        n: u32,
    }
    impl crate::config::AgentConfig for Cfg {}

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_context_moved_to_another_task_reaches_its_run_while_the_run_is_held() {
        let kept: Arc<Mutex<Option<StepCtx>>> = Arc::default();
        let engine = Engine::in_memory(keeper(kept.clone(), true));
        let run_id = engine.run(UserMessageEvent::new("go")).await.expect("run");
        let ctx = take(&kept);
        assert_eq!(ctx.run_id(), run_id);
        let shown = engine
            .stored_snapshot(&run_id)
            .await
            .expect("store")
            .expect("the run is stored");
        assert_eq!(shown.display_by.len(), 1, "the chunk shown from the task");
        assert_eq!(ctx.thread_id(), shown.thread_id);
    }

    #[tokio::test]
    async fn a_context_tells_the_thread_its_run_was_started_in_short_or_long() {
        let long = "t".repeat(INLINE_ID + 7);
        for thread in ["conversation-42", long.as_str()] {
            let kept: Arc<Mutex<Option<StepCtx>>> = Arc::default();
            let engine = Engine::in_memory(keeper(kept.clone(), false));
            let run_id = engine
                .start_run_in(Some(thread), UserMessageEvent::new("go"))
                .await
                .expect("start");
            engine.wait_for_end(&run_id).await.expect("end");
            let ctx = take(&kept);
            assert_eq!((ctx.run_id(), ctx.thread_id()), (run_id.as_str(), thread));
        }
    }

    #[tokio::test]
    async fn a_context_kept_after_its_run_left_the_engine_says_the_run_is_gone() {
        let kept: Arc<Mutex<Option<StepCtx>>> = Arc::default();
        let engine = Engine::new(
            keeper(kept.clone(), false),
            Arc::new(crate::backend::memory::MemoryBackend::new()),
            crate::engine::EngineOptions {
                keep_ended_runs: false,
                ..Default::default()
            },
        );
        let run_id = engine.run(UserMessageEvent::new("go")).await.expect("run");
        let ctx = take(&kept);
        assert!(
            engine.snapshot(&run_id).is_none(),
            "the ended run was evicted"
        );
        // Its ids are still what they were.
        assert_eq!(ctx.run_id(), run_id);
        assert_eq!(ctx.thread_id().len(), 24, "{}", ctx.thread_id());
        // What needs the run itself fails, saying why.
        let gone = ContextError::RunGone {
            run_id: run_id.clone(),
        };
        assert_eq!(ctx.display(&ChunkEvent::default()).await, Err(gone));
        let e = ctx
            .config::<Cfg>()
            .expect_err("no run to read the config of");
        assert!(
            e.to_string().contains("has ended and left the engine"),
            "{e}"
        );
        assert!(ctx.step_config::<Cfg>("keep").is_err());
        // Thread state outlives runs: reachable while the engine exists.
        assert!(ctx.thread_context().get::<u32>("x").await.is_ok());
    }

    #[tokio::test]
    async fn a_context_of_a_dropped_engine_does_not_reach_an_engine_made_after_it() {
        let kept: Arc<Mutex<Option<StepCtx>>> = Arc::default();
        let engine = Engine::in_memory(keeper(kept.clone(), false));
        engine.run(UserMessageEvent::new("go")).await.expect("run");
        let ctx = take(&kept);
        drop(engine);
        // A new engine may take the dropped one's entry in the registry.
        let later = Engine::in_memory(keeper(kept.clone(), false));
        later
            .run(UserMessageEvent::new("again"))
            .await
            .expect("run");
        assert_eq!(
            ctx.run_context().get::<u32>("x").await,
            Err(ContextError::EngineGone)
        );
        assert_eq!(
            ctx.display(&ChunkEvent::default()).await,
            Err(ContextError::EngineGone)
        );
    }

    #[test]
    fn a_registry_entry_given_to_another_engine_is_not_the_first_ones_any_more() {
        let a = EngineRef::register(Weak::<crate::engine::Shared>::new());
        a.unregister();
        // Unregistering twice (or an old reference) frees nothing else's entry.
        a.unregister();
        let b = EngineRef::register(Weak::<crate::engine::Shared>::new());
        let c = EngineRef::register(Weak::<crate::engine::Shared>::new());
        assert!(a.get().is_none() && b.get().is_none());
        if b.index == a.index {
            assert_ne!(b.generation, a.generation);
        }
        assert_ne!(b.index, c.index, "a freed entry is given once");
        b.unregister();
        c.unregister();
    }

    #[test]
    fn ids_are_held_inline_up_to_their_limit_and_shared_beyond() {
        let short: Arc<str> = "0123456789abcdef01234567".into();
        let long: Arc<str> = "x".repeat(INLINE_ID + 1).into();
        let edge: Arc<str> = "é".repeat(INLINE_ID / 2 - 1).into();
        assert!(matches!(IdText::new(&short), IdText::Inline { .. }));
        assert!(matches!(IdText::new(&long), IdText::Shared(_)));
        for id in [short, long, edge] {
            assert_eq!(IdText::new(&id).as_str(), &*id);
        }
    }
}
