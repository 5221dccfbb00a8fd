//! The authoring API without macros: a [`Workflow`] is built from typed [`Step`]s, and the
//! same declarations produce the `WorkflowSpec` that `saap check`/`explore` read and the
//! handlers that run — there is no second description to drift.
//!
//! ```
//! use saap::{Event, Required, Step, StepCtx, StepError, StopEvent, UserMessageEvent, Workflow};
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct Answered { text: String }
//! impl Event for Answered {
//!     const NAME: &'static str = "Answered";
//!     const PARENTS: &'static [&'static str] = &["StopEvent"];
//! }
//! let wf = Workflow::builder("EchoAgent")
//!     .step(Step::new("answer", |q: Required<UserMessageEvent>, _ctx: StepCtx| async move {
//!         Ok::<_, StepError>(Answered { text: q.message.clone() })
//!     }))
//!     .build()
//!     .expect("valid workflow");
//! assert_eq!(wf.spec().steps[0].params[0].types, vec!["UserMessageEvent".to_string()]);
//! ```
//!
//! With the `#[step]` attribute the parameter names come from the signature:
//!
//! ```
//! use saap::{Required, StepCtx, StepError, StopEvent, UserMessageEvent, Workflow, step};
//! #[step(max_executions_per_run = 1)]
//! async fn answer(question: Required<UserMessageEvent>, _ctx: StepCtx) -> Result<StopEvent, StepError> {
//!     Ok(StopEvent {})
//! }
//! let wf = Workflow::builder("A").step(answer_step()).build().expect("valid");
//! assert_eq!(wf.spec().steps[0].params[0].name, "question");
//! ```
//!
//! Unsupported signatures are compile errors that say what to write instead: a step that
//! takes `self` (steps are stateless), a step that is not `async`, a step with no event
//! parameter.
//!
//! ```compile_fail
//! struct Agent { seen: Vec<String> }
//! impl Agent {
//!     #[saap::step]
//!     async fn remember(&self, q: saap::Required<saap::UserMessageEvent>) -> Result<(), saap::StepError> { Ok(()) }
//! }
//! ```
//!
//! ```compile_fail
//! #[saap::step]
//! fn not_async(q: saap::Required<saap::UserMessageEvent>) -> Result<(), saap::StepError> { Ok(()) }
//! ```
//!
//! Steps are `Fn` closures: each execution gets its inputs and a fresh [`StepCtx`]; there is
//! no agent value to keep state on, so state between steps goes through events, RunContext
//! or ThreadContext (DESIGN §4.6).

use crate::config::{AgentConfig, ConfigCheck, ConfigError};
use crate::context::{NewCtx, StepCtx};
use crate::event::{Event, is_builtin};
use crate::params::{
    BoundEvent, BoundInputs, InputError, Inputs, OutEvent, OutputDecl, Outputs, ParamDecl,
};
use crate::resource::{Res, ResourceError, ResourceNeed, Resources};
use saap_dispatch::spec::{
    EventTypeSpec, OutputMax, ParamSpec, PreconditionSpec, StepSpec, WorkflowSpec,
};
use saap_dispatch::{CompiledSpec, SpecError};
use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A step's error. Any `std::error::Error` converts into it with `?`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepError {
    pub message: String,
}

impl StepError {
    pub fn new(message: impl Into<String>) -> StepError {
        StepError {
            message: message.into(),
        }
    }
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: std::error::Error> From<E> for StepError {
    fn from(e: E) -> StepError {
        StepError::new(e.to_string())
    }
}

/// A step's body run: the future of one execution's body and the vector its outputs go
/// to. An ended one is kept by its thread for the step's next execution ([`recycle_body`]),
/// which starts in place: an inline chain allocates no future per step.
pub(crate) trait StepRun: Future<Output = Result<Vec<OutEvent>, String>> + Send {
    /// Starts an execution in this run, which has ended (or never started): extracts the
    /// step's typed inputs from `bound`, makes the body's future in place and, given `cx`,
    /// polls it once (without `cx` the result is `Pending`: not polled yet). One dynamic
    /// call for all of it; no type-erased value goes in or out.
    fn start(
        self: Pin<&mut Self>,
        make: &BodyFn,
        bound: &[Vec<BoundEvent>],
        ctx: NewCtx<'_>,
        out: Vec<OutEvent>,
        cx: Option<&mut std::task::Context<'_>>,
    ) -> Result<std::task::Poll<Result<Vec<OutEvent>, String>>, InputError>;

    /// Extracts the step's typed inputs from events borrowed from their run's tables and
    /// keeps them for [`StepRun::start_extracted`] (the engine's local driver calls it under
    /// the run's lock: no reference to a payload is counted per bound event). Runs no user
    /// code but the events' `Clone` or `Deserialize`. The error is boxed: what the dynamic
    /// call returns on every step is one word, not the error's six.
    fn extract(self: Pin<&mut Self>, bound: &BoundInputs<'_>) -> Result<(), Box<InputError>>;

    /// [`StepRun::start`] with the inputs [`StepRun::extract`] kept (an error if there are
    /// none: an engine bug). A body that ends at this poll leaves its outputs in `out` (an
    /// empty vector, its caller's: no vector is moved in and out); one that waits takes
    /// `out` along, and its future returns it.
    fn start_extracted(
        self: Pin<&mut Self>,
        make: &BodyFn,
        ctx: NewCtx<'_>,
        out: &mut Vec<OutEvent>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), String>>;
}

pub(crate) type StepFuture = Pin<Box<dyn StepRun>>;

/// A step's body function (the `F` of [`Step::new`]), type-erased. Held by the workflow's
/// step only: a body run kept by a thread after its workflow is gone holds none of what the
/// function captured.
pub(crate) type BodyFn = Arc<dyn std::any::Any + Send + Sync>;

thread_local! {
    /// Ended body runs, kept for the next execution of their step on this thread: entry
    /// `key % BODY_CACHE_SLOTS` holds one of the step with that key (see [`Step::new`]).
    /// Per thread, taking one and giving it back costs no lock and no atomic operation (a
    /// per-step pool behind a mutex cost six).
    static ENDED_BODIES: std::cell::RefCell<Vec<Option<(u32, StepFuture)>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Entries of a thread's cache of ended bodies. Steps get consecutive keys, so the steps
/// of a workflow of up to this many share no entry.
const BODY_CACHE_SLOTS: usize = 256;

/// Keys of steps' bodies in [`ENDED_BODIES`], in order of creation.
static NEXT_BODY_KEY: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The ended body run of the step with `key` kept by this thread, if any.
fn ended_body(key: u32) -> Option<StepFuture> {
    ENDED_BODIES
        .try_with(|cache| {
            let mut cache = cache.try_borrow_mut().ok()?;
            let entry = cache.get_mut(key as usize % BODY_CACHE_SLOTS)?;
            match entry {
                Some((k, _)) if *k == key => entry.take().map(|(_, body)| body),
                _ => None,
            }
        })
        .ok()
        .flatten()
}

/// A body run for an execution of `step`: its ended one kept by this thread, or a new one.
/// Start it with [`StepRun::start`].
pub(crate) fn body_run(step: &StepImpl) -> StepFuture {
    match ended_body(step.key) {
        Some(body) => body,
        None => (step.handler)(),
    }
}

/// How many ended body runs this thread keeps.
#[cfg(test)]
pub(crate) fn kept_bodies() -> usize {
    ENDED_BODIES.with(|c| c.borrow().iter().flatten().count())
}

/// Keeps `body`, a run of the step with `key` that has ended (its future is gone), in this
/// thread's cache for the step's next execution. Freed instead when the thread is exiting
/// (no cache), or when the entry holds a body of another step (a workflow of more than
/// `BODY_CACHE_SLOTS` steps).
pub(crate) fn recycle_body(key: u32, body: StepFuture) {
    // The usual case, an entry that exists and is free, calls nothing: what may allocate
    // or free is out of line (the function saves fewer registers).
    let left = ENDED_BODIES.try_with(move |cache| {
        let Ok(mut cache) = cache.try_borrow_mut() else {
            return Some(body);
        };
        match cache.get_mut(key as usize % BODY_CACHE_SLOTS) {
            Some(entry @ None) => {
                *entry = Some((key, body));
                None
            }
            _ => Some(body),
        }
    });
    if let Ok(Some(body)) = left {
        recycle_body_slow(key, body);
    }
}

/// [`recycle_body`] where the entry is missing (the cache grows) or taken (`body` is freed).
#[cold]
#[inline(never)]
fn recycle_body_slow(key: u32, body: StepFuture) {
    let _ = ENDED_BODIES.try_with(move |cache| {
        if let Ok(mut cache) = cache.try_borrow_mut() {
            let i = key as usize % BODY_CACHE_SLOTS;
            if cache.len() <= i {
                cache.resize_with(i + 1, || None);
            }
            if cache[i].is_none() {
                cache[i] = Some((key, body));
            }
        }
    });
}

pin_project_lite::pin_project! {
    /// A step body's future and the vector its outputs go to. Reused through
    /// [`ENDED_BODIES`]: [`Pin::set`] replaces an ended future in place, so no allocation is
    /// unpinned. The step's body function `B` is handed to [`StepRun::start`] by the
    /// workflow's step, not kept here.
    struct BodyRun<B, I, Fut, O> {
        #[pin]
        body: Option<Fut>,
        out: Vec<OutEvent>,
        // The inputs [`StepRun::extract`] made, until the body is started with them.
        inputs: Option<I>,
        types: std::marker::PhantomData<fn(B, I) -> O>,
    }
}

impl<B, I, Fut, O> Future for BodyRun<B, I, Fut, O>
where
    Fut: Future<Output = Result<O, StepError>>,
    O: Outputs,
{
    type Output = Result<Vec<OutEvent>, String>;
    fn poll(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let mut this = self.project();
        let Some(body) = this.body.as_mut().as_pin_mut() else {
            return std::task::Poll::Ready(Err("a step's future was polled after it ended".into()));
        };
        let result = std::task::ready!(body.poll(cx));
        // The body's future (with the context it holds) is dropped as soon as it ends.
        this.body.set(None);
        let mut out = std::mem::take(this.out);
        std::task::Poll::Ready(collect(result, &mut out).map(|()| out))
    }
}

/// A body's result, its outputs added to `out` (emptied first). Inlined: a call of its own
/// costs a frame per step.
#[inline(always)]
fn collect<O: Outputs>(
    result: Result<O, StepError>,
    out: &mut Vec<OutEvent>,
) -> Result<(), String> {
    match result {
        Ok(o) => {
            out.clear();
            o.collect(out).map_err(|e| e.to_string())
        }
        Err(e) => Err(e.message),
    }
}

impl<B, I, Fut, O> StepRun for BodyRun<B, I, Fut, O>
where
    B: Fn(I, StepCtx) -> Fut + Send + Sync + 'static,
    I: Inputs,
    Fut: Future<Output = Result<O, StepError>> + Send + 'static,
    O: Outputs,
{
    #[inline]
    fn start(
        mut self: Pin<&mut Self>,
        make: &BodyFn,
        bound: &[Vec<BoundEvent>],
        ctx: NewCtx<'_>,
        out: Vec<OutEvent>,
        cx: Option<&mut std::task::Context<'_>>,
    ) -> Result<std::task::Poll<Result<Vec<OutEvent>, String>>, InputError> {
        let Some(make) = make.downcast_ref::<B>() else {
            // A run is only started with its own step's function (a key is one step's).
            return Ok(std::task::Poll::Ready(Err(
                "a step's body run was started with another step's function; this is an engine bug, please report it".into(),
            )));
        };
        let inputs = I::extract(bound)?;
        let mut this = self.as_mut().project();
        let body = make(inputs, ctx.make());
        this.body.set(Some(body));
        *this.out = out;
        Ok(match cx {
            Some(cx) => self.poll(cx),
            None => std::task::Poll::Pending,
        })
    }

    #[inline]
    fn extract(self: Pin<&mut Self>, bound: &BoundInputs<'_>) -> Result<(), Box<InputError>> {
        *self.project().inputs = Some(I::extract_refs(bound).map_err(Box::new)?);
        Ok(())
    }

    #[inline]
    fn start_extracted(
        self: Pin<&mut Self>,
        make: &BodyFn,
        ctx: NewCtx<'_>,
        out: &mut Vec<OutEvent>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), String>> {
        let mut this = self.project();
        let (Some(make), Some(inputs)) = (make.downcast_ref::<B>(), this.inputs.take()) else {
            return std::task::Poll::Ready(Err(
                "a step's body run was started without its inputs or with another step's function; this is an engine bug, please report it".into(),
            ));
        };
        // Two calls of the body function: a context made here is not merged with a made
        // one, so its drop's checks fold (it owns nothing) where the body ignores it.
        let body = match ctx {
            NewCtx::Local { .. } => make(inputs, ctx.make()),
            NewCtx::Made(_) => make(inputs, ctx.make()),
        };
        this.body.set(Some(body));
        let Some(body) = this.body.as_mut().as_pin_mut() else {
            return std::task::Poll::Ready(Err("a step's future was polled after it ended".into()));
        };
        let std::task::Poll::Ready(result) = body.poll(cx) else {
            // It waits: its outputs go to the vector it returns when it ends.
            *this.out = std::mem::take(out);
            return std::task::Poll::Pending;
        };
        // The body's future (with the context it holds) is dropped as soon as it ends.
        this.body.set(None);
        std::task::Poll::Ready(collect(result, out))
    }
}

/// Makes a new (not started) body run of a step: called when its thread keeps no ended
/// one.
pub(crate) type ErasedHandler = Arc<dyn Fn() -> StepFuture + Send + Sync>;
/// A precondition over the bound inputs. `bound[i]` holds the events of parameter `i` after
/// the first `skipped[i]`, which are already in the typed inputs kept in `cache` by the
/// previous evaluation for this run and step (see [`PreCacheSlot`]); the last argument yields
/// the start event's fields (for preconditions that read the run's config).
pub(crate) type ErasedPrecondition = Arc<
    dyn Fn(
            &[Vec<BoundEvent>],
            &[usize],
            &mut PreCacheSlot,
            &dyn Fn() -> crate::event::Payload,
        ) -> Result<bool, InputError>
        + Send
        + Sync,
>;

/// The typed inputs a precondition was last evaluated on (an `Option<I>` with `I: Inputs`,
/// always `Some` while cached), kept so that the
/// next evaluation only extracts the events bound since. Empty after a failed or panicking
/// evaluation, which makes the engine pass the whole bindings again.
pub(crate) type PreCacheSlot = Option<Box<dyn std::any::Any + Send>>;

/// Brings the cached inputs up to date with the new events and evaluates `check` on them.
fn cached_check<I: Inputs>(
    bound: &[Vec<BoundEvent>],
    skipped: &[usize],
    cache: &mut PreCacheSlot,
    check: impl FnOnce(&I) -> Result<bool, InputError>,
) -> Result<bool, InputError> {
    // Taken out while evaluating: a failed or panicking evaluation leaves the cache empty.
    // The box (an `Option<I>`) is kept for the new inputs: no allocation per evaluation.
    let mut boxed = cache.take().and_then(|b| b.downcast::<Option<I>>().ok());
    let prev = boxed.as_mut().and_then(|b| b.take());
    let inputs = I::extend(prev, skipped, bound)?;
    let result = check(&inputs)?;
    *cache = Some(match boxed {
        Some(mut b) => {
            *b = Some(inputs);
            b
        }
        None => Box::new(Some(inputs)),
    });
    Ok(result)
}

/// One typed step, before it is added to a workflow.
pub struct Step<I: Inputs> {
    name: String,
    decls: Vec<ParamDecl>,
    names: Option<Vec<String>>,
    outputs: OutputDecl,
    max_executions_per_run: Option<u32>,
    stop_on_error: bool,
    description: Option<String>,
    delegates_to: Vec<String>,
    precondition: Option<(String, ErasedPrecondition)>,
    config_checks: Vec<ConfigCheck>,
    resources: Vec<ResourceNeed>,
    handler: ErasedHandler,
    body_fn: BodyFn,
    // The step's key in `ENDED_BODIES`.
    key: u32,
    _inputs: std::marker::PhantomData<fn(I)>,
}

impl<I: Inputs> Step<I> {
    /// A step named `name` running `body` with inputs `I` (one parameter or a tuple).
    pub fn new<F, Fut, O>(name: &str, body: F) -> Step<I>
    where
        F: Fn(I, StepCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, StepError>> + Send + 'static,
        O: Outputs,
    {
        let mut outputs = OutputDecl::default();
        O::declare(&mut outputs);
        let body_fn: BodyFn = Arc::new(body);
        let key = NEXT_BODY_KEY.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let handler: ErasedHandler = Arc::new(move || {
            Box::pin(BodyRun {
                body: None,
                out: Vec::new(),
                inputs: None,
                types: std::marker::PhantomData::<fn(F, I) -> O>,
            })
        });
        Step {
            name: name.to_string(),
            decls: I::decls(),
            names: None,
            outputs,
            max_executions_per_run: None,
            stop_on_error: true,
            description: None,
            delegates_to: Vec::new(),
            precondition: None,
            config_checks: Vec::new(),
            resources: Vec::new(),
            handler,
            body_fn,
            key,
            _inputs: std::marker::PhantomData,
        }
    }

    /// A precondition over the step's own bound inputs (DESIGN §4.3): the step runs only when
    /// it returns true. It is user code: its result is recorded and reused on replay.
    pub fn precondition(
        mut self,
        name: &str,
        check: impl Fn(&I) -> bool + Send + Sync + 'static,
    ) -> Step<I> {
        let f: ErasedPrecondition = Arc::new(move |bound, skipped, cache, _| {
            cached_check::<I>(bound, skipped, cache, |inputs| Ok(check(inputs)))
        });
        self.precondition = Some((name.to_string(), f));
        self
    }

    /// A precondition over the step's own inputs and the run's agent config `C` (the seeds'
    /// "config lie" fix: decide whether to wait for an optional input in the precondition,
    /// where the dispatcher can still wait, not in the body). `C` is checked at start like
    /// [`Step::uses_config`].
    pub fn precondition_with_config<C: AgentConfig>(
        mut self,
        name: &str,
        check: impl Fn(&I, &C) -> bool + Send + Sync + 'static,
    ) -> Step<I> {
        let f: ErasedPrecondition = Arc::new(move |bound, skipped, cache, start| {
            cached_check::<I>(bound, skipped, cache, |inputs| {
                let config = crate::config::agent_config::<C>(&start()).map_err(|e| {
                    InputError::Payload(crate::event::PayloadError::Deserialize {
                        name: crate::config::CONFIG_FIELD.to_string(),
                        message: e.to_string(),
                    })
                })?;
                Ok(check(inputs, &config))
            })
        });
        self.precondition = Some((name.to_string(), f));
        self.uses_config::<C>()
    }

    /// At most `n` executions per run.
    pub fn max_executions_per_run(mut self, n: u32) -> Step<I> {
        self.max_executions_per_run = Some(n);
        self
    }

    /// Whether a failure ends the run with an ExceptionEvent (default true).
    pub fn stop_on_error(mut self, stop: bool) -> Step<I> {
        self.stop_on_error = stop;
        self
    }

    /// Names for the parameters in the spec (default: the event type name in snake case).
    pub fn param_names(mut self, names: &[&str]) -> Step<I> {
        self.names = Some(names.iter().map(|s| s.to_string()).collect());
        self
    }

    /// Declares an extra output type (for outputs the return type cannot name).
    pub fn emits<T: Event>(mut self) -> Step<I> {
        self.outputs.add::<T>();
        self
    }

    pub fn description(mut self, text: &str) -> Step<I> {
        self.description = Some(text.to_string());
        self
    }

    /// Declares the agents (workflow names) the step's delegation requests name. `check`
    /// then warns of one the workflow does not know (SAAP022: neither itself, nor declared
    /// with [`Workflow::with_delegate`] or [`Workflow::knows_agents`]), and the engine fails
    /// a request of this step that names an agent not declared here (SAAP-E013), so a
    /// misspelt name is found before a run waits on a child that never starts.
    pub fn delegates_to<S: Into<String>>(mut self, agents: impl IntoIterator<Item = S>) -> Step<I> {
        for a in agents {
            let a = a.into();
            if !self.delegates_to.contains(&a) {
                self.delegates_to.push(a);
            }
        }
        self
    }

    /// Declares that the step reads the agent config `C` (`ctx.config::<C>()`, or a
    /// `Config<C>` parameter with the macros): a run whose start event carries a config
    /// that does not fit `C` is refused at start (`SAAP-C001`).
    pub fn uses_config<C: AgentConfig>(mut self) -> Step<I> {
        self.config_checks.push(crate::config::agent_check::<C>());
        self
    }

    /// Declares that the step reads its own config `S` (`_config.steps.<step>`): checked
    /// at start like [`Step::uses_config`] (`SAAP-C002`).
    pub fn uses_step_config<S: AgentConfig>(mut self) -> Step<I> {
        self.config_checks
            .push(crate::config::step_check::<S>(self.name.clone()));
        self
    }

    /// Declares that the step takes the resource `T` (`ctx.resource::<T>()`, or a `Res<T>`
    /// parameter with the macros): the engine refuses to start a run of a workflow that
    /// holds no `T` (`SAAP-E009`), before any step runs.
    pub fn uses_resource<T: Any + Send + Sync>(mut self) -> Step<I> {
        let need = ResourceNeed::of::<T>();
        if !self.resources.contains(&need) {
            self.resources.push(need);
        }
        self
    }
}

/// The runtime side of a step.
#[derive(Clone)]
pub(crate) struct StepImpl {
    pub handler: ErasedHandler,
    /// The step's body function, handed to [`StepRun::start`].
    pub body_fn: BodyFn,
    /// The step's key in [`ENDED_BODIES`].
    pub key: u32,
    pub precondition: Option<ErasedPrecondition>,
}

#[derive(Clone)]
pub(crate) struct WorkflowInner {
    pub spec: WorkflowSpec,
    /// Checks of a start event's `_config`, one per injected config type.
    pub config_checks: Vec<ConfigCheck>,
    /// The long-lived values steps take by type.
    pub resources: Resources,
    /// The resources each step takes: (step index, type).
    pub resource_needs: Vec<(usize, ResourceNeed)>,
    pub compiled: Arc<CompiledSpec>,
    pub steps: Vec<StepImpl>,
    /// The names of the Rust event types the workflow was built from.
    pub rust_names: Vec<&'static str>,
    /// The agents its steps delegate to ([`Workflow::with_delegate`]), one per name.
    pub delegates: Vec<Workflow>,
}

/// An agent: its steps and the spec generated from them. Cheap to clone.
#[derive(Clone)]
pub struct Workflow {
    pub(crate) inner: Arc<WorkflowInner>,
}

impl fmt::Debug for Workflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Workflow")
            .field("name", &self.inner.spec.name)
            .field("steps", &self.inner.spec.steps.len())
            .field("resources", &self.inner.resources.len())
            .finish()
    }
}

/// Why a workflow could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BuildError {
    #[error("SAAP-B001: two steps are named `{0}`; step names must be unique: rename one")]
    DuplicateStep(String),
    #[error(
        "SAAP-B002: event `{name}` is declared with parents {a:?} and {b:?}; one Rust type per event name"
    )]
    ConflictingEvent {
        name: String,
        a: Vec<String>,
        b: Vec<String>,
    },
    #[error(
        "SAAP-B003: step `{step}` has {given} parameter names for {expected} parameters; pass one name per parameter"
    )]
    ParamNames {
        step: String,
        given: usize,
        expected: usize,
    },
    #[error(
        "SAAP-B004: step `{step}` takes no event parameter, so nothing can ever trigger it; give it at least one event input"
    )]
    NoParams { step: String },
    #[error("SAAP-B005: the generated spec is invalid: {0}")]
    Spec(#[from] SpecError),
}

impl BuildError {
    pub fn code(&self) -> &'static str {
        match self {
            BuildError::DuplicateStep(_) => "SAAP-B001",
            BuildError::ConflictingEvent { .. } => "SAAP-B002",
            BuildError::ParamNames { .. } => "SAAP-B003",
            BuildError::NoParams { .. } => "SAAP-B004",
            BuildError::Spec(_) => "SAAP-B005",
        }
    }
}

/// Builds a [`Workflow`].
pub struct WorkflowBuilder {
    name: String,
    description: Option<String>,
    events: BTreeMap<&'static str, &'static [&'static str]>,
    event_order: Vec<&'static str>,
    conflicts: Vec<BuildError>,
    steps: Vec<(StepSpec, StepImpl)>,
    config_checks: Vec<ConfigCheck>,
    resources: Resources,
    resource_needs: Vec<(usize, ResourceNeed)>,
}

impl Workflow {
    pub fn builder(name: &str) -> WorkflowBuilder {
        WorkflowBuilder {
            name: name.to_string(),
            description: None,
            events: BTreeMap::new(),
            event_order: Vec::new(),
            conflicts: Vec::new(),
            steps: Vec::new(),
            config_checks: Vec::new(),
            resources: Resources::default(),
            resource_needs: Vec::new(),
        }
    }
    /// A workflow known by its spec alone, without step code: what a tool that only reads
    /// runs (the generic `saap studio`) needs to rebuild and show them. It must never reach
    /// an engine, which would have no body to run ([`Workflow::has_code`] tells the kinds
    /// apart).
    #[cfg_attr(not(feature = "studio"), allow(dead_code))]
    pub(crate) fn from_spec(compiled: Arc<CompiledSpec>) -> Workflow {
        Workflow {
            inner: Arc::new(WorkflowInner {
                spec: compiled.source.clone(),
                config_checks: Vec::new(),
                resources: Resources::default(),
                resource_needs: Vec::new(),
                compiled,
                steps: Vec::new(),
                rust_names: Vec::new(),
                delegates: Vec::new(),
            }),
        }
    }

    /// Whether the workflow has its steps' code (every workflow but one made by
    /// [`Workflow::from_spec`]).
    pub(crate) fn has_code(&self) -> bool {
        self.inner.steps.len() == self.inner.spec.steps.len()
    }

    /// The workflow spec (exactly what runs).
    pub fn spec(&self) -> &WorkflowSpec {
        &self.inner.spec
    }
    /// The spec as JSON text (the input of `saap check`).
    pub fn spec_json(&self) -> String {
        serde_json::to_string_pretty(&self.inner.spec).unwrap_or_default()
    }
    pub fn compiled(&self) -> &Arc<CompiledSpec> {
        &self.inner.compiled
    }
    pub fn name(&self) -> &str {
        &self.inner.spec.name
    }
    /// Checks a start event's fields against every config type the workflow injects.
    pub fn validate_start(&self, fields: &crate::event::Payload) -> Result<(), ConfigError> {
        // The JSON form of a typed start event is made only when a config is checked.
        if self.inner.config_checks.is_empty() {
            return Ok(());
        }
        let fields = fields.json();
        self.inner.config_checks.iter().try_for_each(|c| c(fields))
    }

    /// This workflow with `value` as its resource of type `T` (replacing an earlier one):
    /// for workflows made by `#[agent]`, whose builder the application does not see.
    /// Register resources before handing the workflow to an engine.
    pub fn with_resource<T: Any + Send + Sync>(self, value: T) -> Workflow {
        self.with_shared_resource(Arc::new(value))
    }

    /// As [`Workflow::with_resource`], for a value shared with other workflows.
    pub fn with_shared_resource<T: Any + Send + Sync>(self, value: Arc<T>) -> Workflow {
        let mut inner = Arc::unwrap_or_clone(self.inner);
        inner.resources.insert(value);
        Workflow {
            inner: Arc::new(inner),
        }
    }

    /// Declares an agent this one's steps delegate to (`AgentInTheLoopRequestEvent` naming
    /// `other`'s name): an engine made or opened for this workflow makes one for `other` on
    /// the same store, and for the agents `other` declares in turn — one engine per agent
    /// name (the first workflow given for a name is kept; an agent that delegates to itself
    /// needs no declaration). What the per-agent command line of a delegating agent needs:
    /// `saap::main(editor().with_delegate(researcher()))` runs the children in process, and
    /// `runs --tree` shows them.
    pub fn with_delegate(self, other: Workflow) -> Workflow {
        let name = other.name().to_string();
        let mut inner = Arc::unwrap_or_clone(self.inner);
        if name != inner.spec.name && !inner.delegates.iter().any(|d| d.name() == name) {
            inner.delegates.push(other);
        }
        Workflow {
            inner: Arc::new(inner),
        }
        .knows_agents([name])
    }

    /// Declares agents this one's steps delegate to that other processes serve (workers of
    /// those classes on NATS): the agents `check` knows beside those of
    /// [`Workflow::with_delegate`] (the spec's `agents`). Changes nothing the engine does.
    pub fn knows_agents<S: Into<String>>(self, agents: impl IntoIterator<Item = S>) -> Workflow {
        let mut inner = Arc::unwrap_or_clone(self.inner);
        for a in agents {
            let a = a.into();
            if a != inner.spec.name && !inner.spec.agents.contains(&a) {
                inner.spec.agents.push(a.clone());
                Arc::make_mut(&mut inner.compiled).source.agents.push(a);
            }
        }
        Workflow {
            inner: Arc::new(inner),
        }
    }

    /// The agents declared with [`Workflow::with_delegate`].
    pub fn delegates(&self) -> &[Workflow] {
        &self.inner.delegates
    }

    /// This workflow and every agent it delegates to, directly or through another, one per
    /// name, this one first.
    pub fn agent_set(&self) -> Vec<Workflow> {
        let mut set = vec![self.clone()];
        let mut i = 0;
        while i < set.len() {
            let next: Vec<Workflow> = set[i]
                .delegates()
                .iter()
                .filter(|d| !set.iter().any(|w| w.name() == d.name()))
                .cloned()
                .collect();
            for d in next {
                if !set.iter().any(|w| w.name() == d.name()) {
                    set.push(d);
                }
            }
            i += 1;
        }
        set
    }

    /// The resource of type `T`, if the workflow holds one.
    pub fn resource<T: Any + Send + Sync>(&self) -> Option<Res<T>> {
        self.inner.resources.get::<T>()
    }

    /// Checks that the workflow holds every resource its steps take; the engine calls it
    /// before starting a run.
    pub fn check_resources(&self) -> Result<(), ResourceError> {
        let inner = &*self.inner;
        match inner
            .resource_needs
            .iter()
            .find(|(_, need)| !inner.resources.contains(need.id))
        {
            None => Ok(()),
            Some((step, need)) => Err(ResourceError::Missing {
                workflow: inner.spec.name.clone(),
                step: inner
                    .spec
                    .steps
                    .get(*step)
                    .map_or_else(String::new, |s| s.name.clone()),
                resource: need.name(),
            }),
        }
    }
}

fn snake(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

impl WorkflowBuilder {
    pub fn description(mut self, text: &str) -> WorkflowBuilder {
        self.description = Some(text.to_string());
        self
    }

    /// Declares the agent config `C`: every start event's `_config` is checked against it
    /// (even when no step reads it).
    pub fn config<C: AgentConfig>(mut self) -> WorkflowBuilder {
        self.config_checks.push(crate::config::agent_check::<C>());
        self
    }

    /// Registers `value` as the workflow's resource of type `T` (one per type; a later
    /// value replaces an earlier one): made once, shared by every run and execution, taken
    /// by steps as `Res<T>`.
    pub fn resource<T: Any + Send + Sync>(self, value: T) -> WorkflowBuilder {
        self.shared_resource(Arc::new(value))
    }

    /// As [`WorkflowBuilder::resource`], for a value shared with other workflows.
    pub fn shared_resource<T: Any + Send + Sync>(mut self, value: Arc<T>) -> WorkflowBuilder {
        self.resources.insert(value);
        self
    }

    /// Declares an event type not named by any step signature (e.g. a display event).
    pub fn event<T: Event>(mut self) -> WorkflowBuilder {
        self.declare(T::NAME, T::PARENTS);
        self
    }

    fn declare(&mut self, name: &'static str, parents: &'static [&'static str]) {
        match self.events.get(name) {
            Some(p) if *p != parents => self.conflicts.push(BuildError::ConflictingEvent {
                name: name.to_string(),
                a: p.iter().map(|s| s.to_string()).collect(),
                b: parents.iter().map(|s| s.to_string()).collect(),
            }),
            Some(_) => {}
            None => {
                self.events.insert(name, parents);
                self.event_order.push(name);
            }
        }
    }

    /// Adds a step (steps are evaluated in the order they are added).
    pub fn step<I: Inputs>(mut self, step: Step<I>) -> WorkflowBuilder {
        for d in &step.decls {
            self.declare(d.type_name, d.type_parents);
            for (n, p) in &d.also {
                self.declare(n, p);
            }
        }
        for (n, p) in &step.outputs.types {
            self.declare(n, p);
        }
        let names: Vec<String> = match &step.names {
            Some(n) => n.clone(),
            None => {
                let mut names = Vec::new();
                for d in &step.decls {
                    let base = snake(d.type_name);
                    let mut n = base.clone();
                    let mut k = 2;
                    while names.contains(&n) {
                        n = format!("{base}_{k}");
                        k += 1;
                    }
                    names.push(n);
                }
                names
            }
        };
        if names.len() != step.decls.len() {
            self.conflicts.push(BuildError::ParamNames {
                step: step.name.clone(),
                given: names.len(),
                expected: step.decls.len(),
            });
        }
        let params: Vec<ParamSpec> = step
            .decls
            .iter()
            .zip(names)
            .map(|(d, name)| ParamSpec {
                name,
                kind: d.kind,
                types: std::iter::once(d.type_name)
                    .chain(d.also.iter().map(|(n, _)| *n))
                    .map(str::to_string)
                    .collect(),
                size: d.size,
            })
            .collect();
        let mut reads: Vec<String> = Vec::new();
        for d in &step.decls {
            for n in std::iter::once(d.type_name).chain(d.also.iter().map(|(n, _)| *n)) {
                if !reads.iter().any(|r| r == n) {
                    reads.push(n.to_string());
                }
            }
        }
        let spec = StepSpec {
            name: step.name.clone(),
            params,
            outputs: step
                .outputs
                .types
                .iter()
                .map(|(n, _)| n.to_string())
                .collect(),
            // A `Vec` result returns any number of its types (SAAP009 counts on it).
            output_max: step
                .outputs
                .unbounded
                .iter()
                .map(|n| (n.to_string(), OutputMax::Unbounded))
                .collect(),
            delayed: step.outputs.delayed.iter().map(|n| n.to_string()).collect(),
            returns_together: step
                .outputs
                .together
                .iter()
                .map(|g| g.iter().map(|s| s.to_string()).collect())
                .collect(),
            max_executions_per_run: step.max_executions_per_run,
            stop_on_error: step.stop_on_error,
            precondition: step
                .precondition
                .as_ref()
                .map(|(name, _)| PreconditionSpec {
                    name: name.clone(),
                    reads,
                    when: None,
                }),
            description: step.description.clone(),
            delegates_to: step.delegates_to.clone(),
        };
        self.config_checks.extend(step.config_checks);
        let index = self.steps.len();
        self.resource_needs
            .extend(step.resources.into_iter().map(|need| (index, need)));
        self.steps.push((
            spec,
            StepImpl {
                handler: step.handler,
                body_fn: step.body_fn,
                key: step.key,
                precondition: step.precondition.map(|(_, f)| f),
            },
        ));
        self
    }

    pub fn build(self) -> Result<Workflow, BuildError> {
        if let Some(e) = self.conflicts.into_iter().next() {
            return Err(e);
        }
        let mut seen = std::collections::HashSet::new();
        for (s, _) in &self.steps {
            if !seen.insert(s.name.clone()) {
                return Err(BuildError::DuplicateStep(s.name.clone()));
            }
            if s.params.is_empty() {
                return Err(BuildError::NoParams {
                    step: s.name.clone(),
                });
            }
        }
        let events = self
            .event_order
            .iter()
            .filter(|n| !is_builtin(n))
            .map(|n| EventTypeSpec {
                name: n.to_string(),
                parents: self.events[n].iter().map(|p| p.to_string()).collect(),
                description: None,
            })
            .collect();
        let (specs, impls): (Vec<_>, Vec<_>) = self.steps.into_iter().unzip();
        let spec = WorkflowSpec {
            format: saap_dispatch::spec::SPEC_FORMAT_VERSION,
            name: self.name,
            description: self.description,
            events,
            steps: specs,
            agents: Vec::new(),
            simulation: None,
        };
        let compiled = Arc::new(CompiledSpec::compile(&spec)?);
        Ok(Workflow {
            inner: Arc::new(WorkflowInner {
                spec,
                config_checks: self.config_checks,
                resources: self.resources,
                resource_needs: self.resource_needs,
                compiled,
                steps: impls,
                rust_names: self.event_order,
                delegates: Vec::new(),
            }),
        })
    }
}

/// An agent written with `#[agent]` on its `impl` block: a name and the workflow generated
/// from its `#[step]` functions. The agent type is never instantiated by saap: steps take no
/// `self`, so no state can live on it between executions (the "context smuggle" cannot
/// compile); settings come from an injected `Config<C>`, run state from events or RunContext.
pub trait Agent {
    /// The workflow's name.
    const NAME: &'static str;
    /// The agent's workflow (and spec), exactly what runs.
    fn workflow() -> Result<Workflow, BuildError>;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::event::UserMessageEvent;
    use crate::params::Required;

    #[test]
    fn parameter_names_default_to_snake_case_type_names() {
        assert_eq!(snake("UserMessageEvent"), "user_message_event");
        assert_eq!(snake("A"), "a");
    }

    #[test]
    fn duplicate_step_names_are_refused() {
        let s = || {
            Step::new("same", |_: Required<UserMessageEvent>, _: StepCtx| async {
                Ok::<_, StepError>(())
            })
        };
        let err = Workflow::builder("W")
            .step(s())
            .step(s())
            .build()
            .err()
            .unwrap();
        assert_eq!(err.code(), "SAAP-B001");
    }

    #[test]
    fn wrong_number_of_param_names_is_refused() {
        let err = Workflow::builder("W")
            .step(
                Step::new("s", |_: Required<UserMessageEvent>, _: StepCtx| async {
                    Ok::<_, StepError>(())
                })
                .param_names(&["a", "b"]),
            )
            .build()
            .err()
            .unwrap();
        assert_eq!(err.code(), "SAAP-B003");
    }
}
