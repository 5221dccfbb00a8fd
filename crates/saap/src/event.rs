//! Typed events: the [`Event`] trait that user event types implement, the built-in protocol
//! events the runtime needs, and the payload adapter between typed values and the stored
//! representation.
//!
//! A [`Payload`] holds an event's class fields. Inside the process it keeps the Rust value a
//! step returned and serializes it to JSON only when something reads the JSON form (a
//! durable store, the wire, a snapshot); a step that binds an event of the same Rust type
//! receives a clone of the value without a JSON round trip. Events that arrive as JSON
//! (the wire, a store being replayed) hold their JSON form only, and steps deserialize
//! them. The wire envelope keys (`event_id`, `created_at`, `_event_name`,
//! `_parent_event_names`) are added when an event leaves the runtime.

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::any::Any;
use std::fmt;
use std::sync::{Arc, OnceLock};

/// An event's fields: the typed Rust value (in-process) and/or its JSON form (serialized
/// on first use). Cheap to clone (one reference count).
#[derive(Clone)]
pub struct Payload(Arc<dyn PayloadData>);

/// The two representations behind a [`Payload`].
trait PayloadData: Any + Send + Sync + 'static {
    /// The JSON form, serialized on first call.
    fn json(&self) -> Result<&serde_json::Value, PayloadError>;
    /// Whether the JSON form exists already.
    fn has_json(&self) -> bool;
    /// Writes the JSON text (straight from the typed value when the JSON form was never
    /// needed: no intermediate `serde_json::Value`).
    fn write_json(&self, out: &mut dyn std::io::Write) -> Result<(), PayloadError>;
    /// Keeps the allocation of a payload nothing else refers to in `pools`, for a new
    /// payload of the same type (see [`Payload::recycle_all`]).
    fn into_pool(self: Arc<Self>, pools: &mut PayloadPools);
}

struct Typed<T: Event> {
    /// Always `Some` while the payload is in use. In [`ENDED_PAYLOADS`]: `None`, or the
    /// last value of a type without drop glue (see `into_pool`).
    value: Option<T>,
    /// Boxed: most payloads never need it, and a `Value` plus an error is ~100 bytes.
    json: OnceLock<Box<Result<serde_json::Value, PayloadError>>>,
}

thread_local! {
    /// Allocations of typed payloads that ended (their run was reset or forgotten), by
    /// event type, for new payloads of the same type: a run's outputs cost no allocation
    /// and no free once warm. A fresh run's events, hundreds of blocks of one size freed
    /// together, otherwise go through the allocator's slow paths.
    static ENDED_PAYLOADS: std::cell::RefCell<PayloadPools> =
        const {
            std::cell::RefCell::new(PayloadPools {
                pools: Vec::new(),
                taken: 0,
                kept: 0,
                bytes: 0,
                last_run: Vec::new(),
            })
        };
}

/// A thread's pools of ended payloads, with where the last take and the last keep found
/// their type: a run's events are made, and later recycled, in the same order of types
/// each time, so the next lookup usually finds its type there or one further.
struct PayloadPools {
    pools: Vec<PayloadPool>,
    taken: usize,
    kept: usize,
    /// Bytes held by the kept payloads past the first [`POOLED_PAYLOADS`] of their type
    /// (at most [`POOLED_BYTES`]).
    bytes: usize,
    /// The payloads of the last small run that ended on this thread (at most
    /// [`LAST_RUN_PAYLOADS`]), last event first, values and all: the thread's next run
    /// usually makes its events in the same order of types, so each new payload takes the
    /// allocation at the end and overwrites its value in place — no type lookup, and one
    /// atomic operation per payload instead of two (its value is not dropped when its run
    /// ends). The first new payload of another type sends them all to `pools` (see
    /// [`PayloadPools::sort_last_run`]), as does the end of the next run.
    last_run: Vec<Payload>,
}

/// The most payloads of one ended run a thread keeps whole (see `PayloadPools::last_run`):
/// what their values hold stays allocated until the thread's next payload or next ended run.
const LAST_RUN_PAYLOADS: usize = 64;

impl PayloadPools {
    /// Sends the last run's payloads not taken to their types' pools (their values go).
    fn sort_last_run(&mut self) {
        let mut last = std::mem::take(&mut self.last_run);
        for p in last.drain(..) {
            if Arc::strong_count(&p.0) == 1 {
                p.0.into_pool(self);
            }
        }
        // The vector stays (empty) for the next run's.
        if self.last_run.capacity() == 0 {
            self.last_run = last;
        }
    }

    /// A kept allocation for a payload of type `T`, holding `value` (taken); `None` (and
    /// `value` untouched) when there is none.
    fn reuse<T: Event>(&mut self, value: &mut Option<T>) -> Option<Payload> {
        // The next of the last run's, or the one after: an event made out of order (a
        // run's start event is made before the previous run's end is recycled) goes to its
        // type's pool; past that the order is not the last run's, and all go there.
        let mut skipped = 0;
        while let Some(mut next) = self.last_run.pop() {
            // One dynamic call: unique first (a payload is never referred to weakly), then
            // of type `T`.
            match Arc::get_mut(&mut next.0).map(|d| (d as &mut dyn Any).downcast_mut::<Typed<T>>())
            {
                Some(Some(typed)) => {
                    typed.value = value.take();
                    if typed.json.get().is_some() {
                        typed.json = OnceLock::new();
                    }
                    return Some(next);
                }
                // Shared since (not by the engine's runs): left to its other holders.
                None => {}
                // Unique (`get_mut` said so), of another type.
                Some(None) => {
                    next.0.into_pool(self);
                    if skipped == 2 {
                        self.sort_last_run();
                        break;
                    }
                }
            }
            skipped += 1;
        }
        let mut ended = self.pooled::<T>()?;
        let typed = Arc::get_mut(&mut ended)?;
        typed.value = value.take();
        Some(Payload(ended))
    }

    /// An ended payload of type `T` from its type's pool, if any.
    fn pooled<T: Event>(&mut self) -> Option<Arc<Typed<T>>> {
        let ty = std::any::TypeId::of::<T>();
        let i = self.find(ty, self.taken)?;
        self.taken = i;
        let free = &mut self.pools[i].free;
        let ended = free.pop()?;
        if free.len() >= POOLED_PAYLOADS {
            self.bytes -= pooled_bytes::<T>();
        }
        ended.downcast::<Typed<T>>().ok()
    }

    /// The index of `ty`'s pool, looked for from `hint` on.
    fn find(&self, ty: std::any::TypeId, hint: usize) -> Option<usize> {
        // The hint's pool or the next one (a chain's next event type), else a scan.
        if self.pools.get(hint).is_some_and(|p| p.ty == ty) {
            return Some(hint);
        }
        if self.pools.get(hint + 1).is_some_and(|p| p.ty == ty) {
            return Some(hint + 1);
        }
        self.pools.iter().position(|p| p.ty == ty)
    }
}

/// The ended payloads of one event type (each an `Arc<Typed<T>>` holding no value).
struct PayloadPool {
    ty: std::any::TypeId,
    free: Vec<Arc<dyn Any + Send + Sync>>,
}

/// How many ended payloads a thread keeps per event type, for how many types, and how many
/// bytes more it keeps past those (all types together). The budget in bytes lets a fan-out
/// of 10,000 items and their results (~20,000 small payloads, under 1 MiB) reuse its
/// allocations from one run to the next, as a run of a few events does, instead of
/// allocating and freeing each (the allocator's slow paths once its per-thread cache is
/// exhausted: ~500 instructions per item, measured), while large events are kept by the
/// hundred, not by the ten thousand. The first ones of each type are not counted: the
/// common case (a run of a few events) pays no accounting.
const POOLED_PAYLOADS: usize = 256;
const POOLED_TYPES: usize = 64;
const POOLED_BYTES: usize = 2 << 20;

/// What one kept payload of type `T` holds: its allocation (two reference counts and the
/// `Typed<T>`) and its entry in the pool.
const fn pooled_bytes<T: Event>() -> usize {
    2 * std::mem::size_of::<usize>()
        + std::mem::size_of::<Typed<T>>()
        + std::mem::size_of::<Arc<dyn Any + Send + Sync>>()
}

/// How many ended payloads of type `T` this thread keeps, and the bytes counted against
/// [`POOLED_BYTES`] (tests).
#[cfg(test)]
pub(crate) fn pooled_payloads<T: Event>() -> (usize, usize) {
    ENDED_PAYLOADS.with(|p| {
        let p = p.borrow();
        let ty = std::any::TypeId::of::<T>();
        let count = p
            .pools
            .iter()
            .find(|pool| pool.ty == ty)
            .map_or(0, |pool| pool.free.len());
        (count, p.bytes)
    })
}

impl<T: Event> PayloadData for Typed<T> {
    fn json(&self) -> Result<&serde_json::Value, PayloadError> {
        self.json
            .get_or_init(|| {
                Box::new(serde_json::to_value(self.value.as_ref()).map_err(|e| {
                    PayloadError::Serialize {
                        name: T::NAME.to_string(),
                        message: e.to_string(),
                    }
                }))
            })
            .as_ref()
            .as_ref()
            .map_err(Clone::clone)
    }
    fn has_json(&self) -> bool {
        self.json.get().is_some()
    }
    fn write_json(&self, out: &mut dyn std::io::Write) -> Result<(), PayloadError> {
        let r = match self.json.get().map(|b| b.as_ref()) {
            Some(Ok(v)) => serde_json::to_writer(out, v),
            Some(Err(e)) => return Err(e.clone()),
            None => serde_json::to_writer(out, &self.value),
        };
        r.map_err(|e| PayloadError::Serialize {
            name: T::NAME.to_string(),
            message: e.to_string(),
        })
    }
    fn into_pool(mut self: Arc<Self>, pools: &mut PayloadPools) {
        // A value without drop glue owns nothing more than its bytes: it stays until the
        // next payload of its type overwrites it, and a payload that never had a JSON form
        // needs no change at all (no atomic operation to make sure it is unique: the caller
        // holds its only reference, and a payload is never referred to weakly).
        if std::mem::needs_drop::<T>() || self.json.get().is_some() {
            let Some(typed) = Arc::get_mut(&mut self) else {
                return;
            };
            // The value goes now (it may own much); the allocation stays.
            typed.value = None;
            if typed.json.get().is_some() {
                typed.json = OnceLock::new();
            }
        }
        let ty = std::any::TypeId::of::<T>();
        let i = match pools.find(ty, pools.kept) {
            Some(i) => i,
            None if pools.pools.len() < POOLED_TYPES => {
                pools.pools.push(PayloadPool {
                    ty,
                    free: Vec::new(),
                });
                pools.pools.len() - 1
            }
            None => return,
        };
        pools.kept = i;
        if pools.pools[i].free.len() < POOLED_PAYLOADS {
            pools.pools[i].free.push(self);
        } else if pools.bytes + pooled_bytes::<T>() <= POOLED_BYTES {
            pools.bytes += pooled_bytes::<T>();
            pools.pools[i].free.push(self);
        }
    }
}

struct Json(serde_json::Value);

impl PayloadData for Json {
    fn json(&self) -> Result<&serde_json::Value, PayloadError> {
        Ok(&self.0)
    }
    fn has_json(&self) -> bool {
        true
    }
    fn write_json(&self, out: &mut dyn std::io::Write) -> Result<(), PayloadError> {
        serde_json::to_writer(out, &self.0).map_err(|e| PayloadError::Serialize {
            name: "(json)".to_string(),
            message: e.to_string(),
        })
    }
    fn into_pool(self: Arc<Self>, _: &mut PayloadPools) {}
}

static NULL: serde_json::Value = serde_json::Value::Null;

/// Counts bytes written without keeping them.
pub(crate) struct ByteCount(pub usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Payload {
    /// A payload holding a typed event (serialized only if its JSON form is read).
    pub fn typed<T: Event>(value: T) -> Payload {
        let mut value = Some(value);
        if let Ok(Some(p)) = ENDED_PAYLOADS.try_with(|pools| {
            // Busy: a value dropped while the pools are at work makes a payload.
            pools.try_borrow_mut().ok()?.reuse(&mut value)
        }) {
            return p;
        }
        Payload(Arc::new(Typed {
            value,
            json: OnceLock::new(),
        }))
    }

    /// Drops `payloads` (left empty, its allocation kept), a run's in the order of its log;
    /// the allocation of each that nothing else refers to is kept by this thread for the
    /// next payload of its type (see `ENDED_PAYLOADS`): a small run's whole, in order,
    /// with their values until they are reused (`PayloadPools::last_run`), a larger run's
    /// in their types' pools. The pools are looked up once for all. A value dropped here
    /// that makes or drops payloads itself finds the pools busy: its payloads are plain
    /// allocations.
    pub(crate) fn recycle_all(payloads: &mut Vec<Payload>) {
        if payloads.is_empty() {
            return;
        }
        let _ = ENDED_PAYLOADS.try_with(|pools| {
            if let Ok(mut pools) = pools.try_borrow_mut() {
                // Usually all taken by this run's payloads: nothing to sort (not even a
                // call, which costs more than the look).
                if !pools.last_run.is_empty() {
                    pools.sort_last_run();
                }
                if payloads.len() <= LAST_RUN_PAYLOADS {
                    // Kept whole, last first: the vectors trade places (the run gets the
                    // emptied one of the run before: no allocation).
                    // (`last_run` is empty here: sorted just above if it was not.)
                    payloads.reverse();
                    std::mem::swap(&mut pools.last_run, payloads);
                    return;
                }
                for p in payloads.drain(..) {
                    if Arc::strong_count(&p.0) == 1 {
                        p.0.into_pool(&mut pools);
                    }
                }
            }
        });
        // The thread's pools are gone (it is exiting) or busy: plain drops.
        payloads.clear();
    }
    /// A payload holding a JSON object of fields (an event from the wire or a store).
    pub fn from_json(value: serde_json::Value) -> Payload {
        Payload(Arc::new(Json(value)))
    }
    /// The JSON form (serialized on first use); an error when the typed value cannot be
    /// serialized.
    pub fn try_json(&self) -> Result<&serde_json::Value, PayloadError> {
        self.0.json()
    }
    /// The JSON form, or `null` when the typed value cannot be serialized (see
    /// [`Payload::try_json`] for the error).
    pub fn json(&self) -> &serde_json::Value {
        self.0.json().unwrap_or(&NULL)
    }
    /// The typed value when this payload holds a `T` (not its JSON form).
    pub fn get<T: Event>(&self) -> Option<&T> {
        // One dynamic call (the payload's type id), not two (the typed value, then its id).
        let data: &dyn Any = &*self.0;
        data.downcast_ref::<Typed<T>>()?.value.as_ref()
    }
    /// Appends the JSON text of the fields to `out` (without building a
    /// `serde_json::Value` when the payload is typed).
    pub fn write_json(&self, out: &mut Vec<u8>) -> Result<(), PayloadError> {
        self.0.write_json(out)
    }
    /// The size of the JSON text in bytes, or why the payload cannot be serialized (a
    /// serialization pass that keeps nothing).
    pub fn check_json(&self) -> Result<usize, PayloadError> {
        let mut n = ByteCount(0);
        self.0.write_json(&mut n)?;
        Ok(n.0)
    }
    /// Whether the JSON form has been computed (or the payload was made from JSON).
    pub fn has_json(&self) -> bool {
        self.0.has_json()
    }
}

impl std::ops::Deref for Payload {
    type Target = serde_json::Value;
    /// The JSON form (see [`Payload::json`]).
    fn deref(&self) -> &serde_json::Value {
        self.json()
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.json(), f)
    }
}

/// The JSON text of the fields.
impl fmt::Display for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.json(), f)
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Payload) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.json() == other.json()
    }
}

impl Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.try_json()
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for Payload {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Payload, D::Error> {
        serde_json::Value::deserialize(d).map(Payload::from_json)
    }
}

/// A typed event. `NAME` is the wire name (`_event_name`); `PARENTS` are its direct parents
/// (`ControlEvent` for a plain control event, `StopEvent` for an event that ends the run,
/// `DisplayEvent` for display-only, `ControlAndDisplayEvent` for both).
///
/// ```
/// use saap::Event;
/// #[derive(Clone, serde::Serialize, serde::Deserialize)]
/// struct Retrieved { docs: Vec<String> }
/// impl Event for Retrieved {
///     const NAME: &'static str = "Retrieved";
///     const PARENTS: &'static [&'static str] = &["ControlEvent"];
///     // Optional: lets steps receive a clone instead of a JSON round trip.
///     fn try_clone_event(&self) -> Option<Self> { Some(self.clone()) }
/// }
/// ```
///
/// Or with the derive (`parent` defaults to `ControlEvent`; `try_clone_event` clones when
/// the type implements `Clone`):
///
/// ```
/// #[derive(saap::Event, serde::Serialize, serde::Deserialize)]
/// #[event(parent = StopEvent)]
/// struct Answered { text: String }
/// assert_eq!(<Answered as saap::Event>::PARENTS, &["StopEvent"]);
/// ```
///
/// An event type cannot be generic (its wire name is one fixed string):
///
/// ```compile_fail
/// #[derive(saap::Event, serde::Serialize, serde::Deserialize)]
/// struct Wrapped<T> { inner: T }
/// ```
///
/// Unknown attributes are compile errors that say what to write:
///
/// ```compile_fail
/// #[derive(saap::Event, serde::Serialize, serde::Deserialize)]
/// #[event(parent_type = StopEvent)]
/// struct Answered { text: String }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an event type",
    label = "not an event type",
    note = "derive it: `#[derive(saap::Event, serde::Serialize, serde::Deserialize)]`; a union of event types is a `#[derive(saap::EventUnion)]` enum; parameter kinds do not nest: write `Vec<T>`, not `Vec<Option<T>>`"
)]
pub trait Event: Serialize + DeserializeOwned + Send + Sync + 'static {
    const NAME: &'static str;
    const PARENTS: &'static [&'static str];
    /// A copy of this event for a step that binds it, so that the step does not read it
    /// back from JSON. `None` (the default) makes the runtime deserialize the event from
    /// its JSON form; `#[derive(Event)]` returns a clone when the type implements `Clone`.
    fn try_clone_event(&self) -> Option<Self> {
        None
    }
}

/// Support for `#[derive(Event)]`: picks `Clone` when the (concrete) type has it.
#[doc(hidden)]
pub mod __clone {
    pub struct Probe<'a, T>(pub &'a T);
    pub trait ViaClone<T> {
        fn probe_clone(&self) -> Option<T>;
    }
    impl<T: Clone> ViaClone<T> for &Probe<'_, T> {
        fn probe_clone(&self) -> Option<T> {
            Some(self.0.clone())
        }
    }
    pub trait NoClone<T> {
        fn probe_clone(&self) -> Option<T>;
    }
    impl<T> NoClone<T> for Probe<'_, T> {
        fn probe_clone(&self) -> Option<T> {
            None
        }
    }
}

/// Why a payload could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error(
        "event `{name}` could not be serialized: {message}; make its fields plain data (no maps with non-string keys)"
    )]
    Serialize { name: String, message: String },
    #[error(
        "event `{name}` does not have the fields its Rust type expects: {message}; check that the producer and the step agree on the event's fields"
    )]
    Deserialize { name: String, message: String },
}

/// Typed event → payload in its JSON form (serialized now; for events that are only
/// borrowed).
pub fn to_payload<T: Event>(event: &T) -> Result<Payload, PayloadError> {
    serde_json::to_value(event)
        .map(Payload::from_json)
        .map_err(|e| PayloadError::Serialize {
            name: T::NAME.to_string(),
            message: e.to_string(),
        })
}

/// Payload → typed event: a clone of the typed value when the payload holds a `T` and `T`
/// can be cloned, otherwise deserialized from the JSON form.
#[inline]
pub fn from_payload<T: Event>(payload: &Payload) -> Result<T, PayloadError> {
    // The clone inline (a step's usual input), the JSON form out of line.
    if let Some(v) = payload.get::<T>().and_then(T::try_clone_event) {
        return Ok(v);
    }
    from_json_form(payload)
}

/// [`from_payload`] through the JSON form.
#[inline(never)]
fn from_json_form<T: Event>(payload: &Payload) -> Result<T, PayloadError> {
    T::deserialize(payload.try_json()?).map_err(|e| PayloadError::Deserialize {
        name: T::NAME.to_string(),
        message: e.to_string(),
    })
}

macro_rules! builtin_event {
    ($(#[$m:meta])* $name:ident, $parent:literal { $($(#[$fm:meta])* pub $f:ident : $t:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Default, Serialize, serde::Deserialize)]
        pub struct $name { $($(#[$fm])* pub $f: $t),* }
        impl Event for $name {
            const NAME: &'static str = stringify!($name);
            const PARENTS: &'static [&'static str] = &[$parent];
            fn try_clone_event(&self) -> Option<Self> {
                Some(self.clone())
            }
        }
    };
}

builtin_event!(
    /// The generic start event (begins a run).
    StartEvent, "ControlAndDisplayEvent" {}
);
builtin_event!(
    /// A user's message: the usual start event of a conversational agent.
    UserMessageEvent, "StartEvent" {
        #[serde(default)]
        pub message: String,
    }
);
builtin_event!(
    /// Ends a run successfully.
    StopEvent, "ControlAndDisplayEvent" {}
);
builtin_event!(
    /// Ends a run with an error (a failed step with `stop_on_error`, or an engine failure).
    ExceptionEvent, "SemanticEvent" {
        pub message: String,
        #[serde(default = "default_status")]
        pub http_status_code: u16,
    }
);
builtin_event!(
    /// Ends a run because someone cancelled it (`Engine::cancel`, `<agent> cancel RUN`): an
    /// `ExceptionEvent` subtype (saap's; a Python consumer reads it as an `ExceptionEvent`).
    /// A run that ends this way reports `cancelled`.
    RunCancelledEvent, "ExceptionEvent" {
        pub message: String,
        #[serde(default = "cancelled_status")]
        pub http_status_code: u16,
        /// Why, as the canceller said.
        #[serde(default)]
        pub reason: String,
    }
);
builtin_event!(
    /// A chunk of streamed text (display only).
    ChunkEvent, "DisplayEvent" {
        #[serde(default)]
        pub chunk: String,
    }
);
builtin_event!(
    /// A model's thought shown to the user (display only).
    ThoughtEvent, "DisplayEvent" {
        #[serde(default)]
        pub thought: String,
    }
);
builtin_event!(
    /// A cost report (display only).
    CostEvent, "DisplayEvent" {
        #[serde(default)]
        pub cost: f64,
    }
);
builtin_event!(
    /// A question to a human; the run waits for the response event.
    HumanInTheLoopRequestEvent, "ControlAndDisplayEvent" {
        #[serde(default)]
        pub question: String,
    }
);
builtin_event!(
    /// A human's answer to a [`HumanInTheLoopRequestEvent`].
    HumanInTheLoopResponseEvent, "ControlAndDisplayEvent" {
        #[serde(default)]
        pub response: serde_json::Value,
    }
);

fn default_status() -> u16 {
    500
}

/// "Client closed request": the run was ended by its caller, not by a failure.
fn cancelled_status() -> u16 {
    499
}

impl RunCancelledEvent {
    /// A cancellation with its reason (the message says it too).
    pub fn new(reason: impl Into<String>) -> RunCancelledEvent {
        let reason = reason.into();
        RunCancelledEvent {
            message: if reason.is_empty() {
                "the run was cancelled".to_string()
            } else {
                format!("the run was cancelled: {reason}")
            },
            http_status_code: cancelled_status(),
            reason,
        }
    }
}

impl ExceptionEvent {
    /// An exception event with status 500.
    pub fn new(message: impl Into<String>) -> ExceptionEvent {
        ExceptionEvent {
            message: message.into(),
            http_status_code: 500,
        }
    }
}

impl UserMessageEvent {
    pub fn new(message: impl Into<String>) -> UserMessageEvent {
        UserMessageEvent {
            message: message.into(),
        }
    }
}

/// Whether a name is built into the protocol hierarchy (and so needs no declaration).
pub(crate) fn is_builtin(name: &str) -> bool {
    // Built once: building the hierarchy dominated the setup of short workflows.
    static BUILTIN: std::sync::OnceLock<saap_protocol::Hierarchy> = std::sync::OnceLock::new();
    BUILTIN
        .get_or_init(saap_protocol::Hierarchy::builtin)
        .contains(name)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn an_ended_payload_lends_its_allocation_to_the_next_of_its_type() {
        let address = |p: &Payload| Arc::as_ptr(&p.0) as *const u8 as usize;
        // A thread of its own: the pool is per thread.
        std::thread::spawn(move || {
            let first = Payload::typed(UserMessageEvent::new("first"));
            let at = address(&first);
            assert_eq!(first.json()["message"], "first");
            Payload::recycle_all(&mut vec![first]);
            // Another type does not take it.
            let other = Payload::typed(StopEvent::default());
            assert_ne!(address(&other), at);
            let second = Payload::typed(UserMessageEvent::new("second"));
            assert_eq!(address(&second), at, "the allocation is reused");
            assert_eq!(
                second.get::<UserMessageEvent>().map(|m| m.message.as_str()),
                Some("second")
            );
            assert_eq!(
                second.json()["message"],
                "second",
                "no JSON form of the old value"
            );

            // A payload something else still refers to is not pooled.
            let held = second.clone();
            Payload::recycle_all(&mut vec![second]);
            let third = Payload::typed(UserMessageEvent::new("third"));
            assert_ne!(address(&third), at);
            assert_eq!(
                held.get::<UserMessageEvent>().map(|m| m.message.as_str()),
                Some("second")
            );
        })
        .join()
        .unwrap();
    }

    /// A small run's ended payloads are kept whole, values and all, in the order of its log:
    /// the next payload of the same type takes the next allocation and its value replaces
    /// the old one in place; one of another type sends the rest to their types' pools,
    /// which drops their values; a large run's values are dropped when it ends.
    #[test]
    fn an_ended_runs_values_go_when_their_allocations_are_reused_or_pooled() {
        static DROPPED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let dropped = || DROPPED.load(std::sync::atomic::Ordering::Relaxed);
        #[derive(Serialize, serde::Deserialize, saap::Event)]
        struct Owns {
            v: u32,
        }
        impl Drop for Owns {
            fn drop(&mut self) {
                DROPPED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let address = |p: &Payload| Arc::as_ptr(&p.0) as *const u8 as usize;
        std::thread::spawn(move || {
            let first = Payload::typed(Owns { v: 1 });
            let at = address(&first);
            Payload::recycle_all(&mut vec![first]);
            assert_eq!(dropped(), 0, "kept with its run");
            let second = Payload::typed(Owns { v: 2 });
            assert_eq!(address(&second), at, "the allocation is reused");
            assert_eq!(dropped(), 1, "the old value is replaced");
            assert_eq!(second.get::<Owns>().map(|o| o.v), Some(2));

            Payload::recycle_all(&mut vec![second]);
            let other = Payload::typed(StopEvent {});
            assert_ne!(address(&other), at);
            assert_eq!(dropped(), 2, "pooled: its value is gone");
            let third = Payload::typed(Owns { v: 3 });
            assert_eq!(address(&third), at, "taken from its type's pool");
            drop(third);
            assert_eq!(dropped(), 3);

            let mut large: Vec<_> = (0..LAST_RUN_PAYLOADS as u32 + 1)
                .map(|v| Payload::typed(Owns { v }))
                .collect();
            Payload::recycle_all(&mut large);
            assert_eq!(
                dropped(),
                3 + LAST_RUN_PAYLOADS + 1,
                "a large run's values go"
            );

            // Plain data: a JSON form made for the old value is not the new one's.
            let plain = Payload::typed(Cloneable { v: 1 });
            let at = address(&plain);
            assert_eq!(plain.json()["v"], 1);
            Payload::recycle_all(&mut vec![plain]);
            let again = Payload::typed(Cloneable { v: 2 });
            assert_eq!(address(&again), at, "the allocation is reused");
            assert!(!again.has_json(), "the old JSON form is gone");
            assert_eq!(from_payload::<Cloneable>(&again), Ok(Cloneable { v: 2 }));
            assert_eq!(again.json()["v"], 2);
        })
        .join()
        .unwrap();
    }

    /// The next run on a thread makes its events in the order the last one did: each takes
    /// the last run's allocation of its place, past a start event made before the last run
    /// ended.
    #[test]
    fn a_run_takes_the_allocations_of_the_last_run_in_order() {
        let address = |p: &Payload| Arc::as_ptr(&p.0) as *const u8 as usize;
        std::thread::spawn(move || {
            let run = |start: Option<Payload>| {
                let mut run = vec![start.unwrap_or_else(|| Payload::typed(StopEvent {}))];
                run.push(Payload::typed(Cloneable { v: 1 }));
                run.push(Payload::typed(Other { v: 2 }));
                run.push(Payload::typed(Cloneable { v: 3 }));
                run
            };
            let mut last = run(None);
            let at: Vec<_> = last.iter().map(address).collect();
            // The next run's start event is made before the last run's end is recycled.
            let start = Payload::typed(StopEvent {});
            Payload::recycle_all(&mut last);
            let next = run(Some(start));
            let now: Vec<_> = next.iter().map(address).collect();
            assert_eq!(now[1..], at[1..], "each event in its place");
            assert_eq!(next[3].get::<Cloneable>(), Some(&Cloneable { v: 3 }));
            assert_eq!(next[2].get::<Other>(), Some(&Other { v: 2 }));
        })
        .join()
        .unwrap();
    }

    /// A thread keeps ended payloads up to a budget in bytes, whatever their type: a large
    /// fan-out's thousands of small events are all kept for the next run (a count of 256 per
    /// type kept a few), and what is taken again leaves the budget.
    #[test]
    fn ended_payloads_are_kept_up_to_a_byte_budget_not_a_count_per_type() {
        std::thread::spawn(|| {
            let each = pooled_bytes::<Cloneable>();
            let fit = POOLED_PAYLOADS + POOLED_BYTES / each;
            assert!(fit > 10_000, "{fit} small payloads fit");
            let mut all: Vec<_> = (0..5_000)
                .map(|v| Payload::typed(Cloneable { v }))
                .collect();
            Payload::recycle_all(&mut all);
            let counted = (5_000 - POOLED_PAYLOADS) * each;
            assert_eq!(pooled_payloads::<Cloneable>(), (5_000, counted));
            // More than the budget holds: kept up to it, the rest freed.
            let mut all: Vec<_> = (0..fit + 5_000)
                .map(|v| Payload::typed(Cloneable { v: v as u32 }))
                .collect();
            assert_eq!(pooled_payloads::<Cloneable>(), (0, 0), "all 5,000 reused");
            Payload::recycle_all(&mut all);
            let (kept, bytes) = pooled_payloads::<Cloneable>();
            assert_eq!(kept, fit);
            assert!(bytes <= POOLED_BYTES && bytes + each > POOLED_BYTES);
            let again = Payload::typed(Cloneable { v: 7 });
            assert_eq!(pooled_payloads::<Cloneable>(), (fit - 1, bytes - each));
            assert_eq!(again.get::<Cloneable>(), Some(&Cloneable { v: 7 }));
        })
        .join()
        .unwrap();
    }

    /// An event whose value makes and drops payloads when dropped.
    #[derive(Debug, PartialEq, saap::Event, Serialize, serde::Deserialize)]
    struct MakesPayloadsOnDrop {
        v: u32,
    }
    impl Drop for MakesPayloadsOnDrop {
        fn drop(&mut self) {
            let made = Payload::typed(UserMessageEvent::new("made while dropping"));
            Payload::recycle_all(&mut vec![made]);
        }
    }

    #[test]
    fn recycling_a_payload_whose_value_makes_payloads_when_dropped_neither_panics_nor_pools_them() {
        std::thread::spawn(|| {
            let mut all = vec![
                Payload::typed(MakesPayloadsOnDrop { v: 1 }),
                Payload::typed(MakesPayloadsOnDrop { v: 2 }),
            ];
            Payload::recycle_all(&mut all);
            assert!(all.is_empty());
            // Kept with their run; a payload of another type sends them to their pool,
            // dropping their values.
            drop(Payload::typed(StopEvent {}));
            // The two allocations are pooled; the ones made while dropping were not (the
            // pools were busy): a new `UserMessageEvent` payload is a fresh allocation, and
            // two `MakesPayloadsOnDrop` payloads reuse the pooled ones.
            let pooled = ENDED_PAYLOADS.with(|p| {
                let p = p.borrow();
                let count = |ty| {
                    p.pools
                        .iter()
                        .find(|pool| pool.ty == ty)
                        .map_or(0, |pool| pool.free.len())
                };
                (
                    count(std::any::TypeId::of::<MakesPayloadsOnDrop>()),
                    count(std::any::TypeId::of::<UserMessageEvent>()),
                )
            });
            assert_eq!(pooled, (2, 0));
        })
        .join()
        .unwrap();
    }

    #[derive(Debug, PartialEq, saap::Event, Serialize, serde::Deserialize)]
    struct NotClone {
        v: u32,
    }

    #[derive(Debug, Clone, PartialEq, saap::Event, Serialize, serde::Deserialize)]
    struct Cloneable {
        v: u32,
    }

    /// Same fields as `Cloneable`, another Rust type (e.g. a parent-type binding).
    #[derive(Debug, Clone, PartialEq, saap::Event, Serialize, serde::Deserialize)]
    struct Other {
        v: u32,
    }

    #[derive(Clone, saap::Event, Serialize, serde::Deserialize)]
    struct BadKeys {
        m: HashMap<(u8, u8), u8>,
    }

    #[test]
    fn derive_clones_exactly_the_types_that_implement_clone() {
        assert_eq!(
            Cloneable { v: 1 }.try_clone_event(),
            Some(Cloneable { v: 1 })
        );
        assert_eq!(NotClone { v: 1 }.try_clone_event(), None);
    }

    #[test]
    fn a_typed_payload_is_not_serialized_until_its_json_is_read() {
        let p = Payload::typed(Cloneable { v: 7 });
        assert!(!p.has_json());
        assert_eq!(from_payload::<Cloneable>(&p).unwrap(), Cloneable { v: 7 });
        assert!(!p.has_json(), "same-type extraction is a clone, no JSON");
        assert_eq!(p.check_json(), Ok(r#"{"v":7}"#.len()));
        let mut text = Vec::new();
        p.write_json(&mut text).unwrap();
        assert_eq!(text, br#"{"v":7}"#);
        assert!(!p.has_json(), "checking and writing the text keep no Value");
        assert_eq!(p.json(), &serde_json::json!({ "v": 7 }));
        assert!(p.has_json());
    }

    #[test]
    fn other_types_and_non_clone_types_read_the_json_form() {
        let p = Payload::typed(Cloneable { v: 3 });
        assert_eq!(from_payload::<Other>(&p).unwrap(), Other { v: 3 });
        let q = Payload::typed(NotClone { v: 4 });
        assert_eq!(from_payload::<NotClone>(&q).unwrap(), NotClone { v: 4 });
        let j = Payload::from_json(serde_json::json!({ "v": 5 }));
        assert_eq!(from_payload::<Cloneable>(&j).unwrap(), Cloneable { v: 5 });
        assert!(matches!(
            from_payload::<Cloneable>(&Payload::from_json(serde_json::json!({ "v": "x" }))),
            Err(PayloadError::Deserialize { .. })
        ));
    }

    #[test]
    fn a_payload_that_cannot_be_serialized_reports_why() {
        let mut m = HashMap::new();
        m.insert((1, 2), 3);
        let p = Payload::typed(BadKeys { m });
        assert!(matches!(
            p.check_json(),
            Err(PayloadError::Serialize { .. })
        ));
        assert!(matches!(p.try_json(), Err(PayloadError::Serialize { .. })));
        assert!(p.json().is_null());
        assert!(serde_json::to_string(&p).is_err());
    }

    #[test]
    fn payloads_compare_and_print_by_their_json() {
        let a = Payload::typed(Cloneable { v: 1 });
        let b = Payload::from_json(serde_json::json!({ "v": 1 }));
        assert_eq!(a, b);
        assert_eq!(a.to_string(), r#"{"v":1}"#);
        let back: Payload = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert_eq!(back, a);
    }
}
