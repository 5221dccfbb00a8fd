//! Step parameters and results: how a Rust signature maps to the spec's parameter kinds
//! (DESIGN §3) and how bound events become typed values.
//!
//! | Rust type | spec kind |
//! |---|---|
//! | [`Required<T>`] (or a bare union `U`) | required: needs one `T`, binds the trigger or the latest |
//! | `Option<T>` | optional: never blocks |
//! | `Vec<T>` | list: never blocks, all `T` in arrival order |
//! | [`FixedList<T, N>`] | fixed list: needs N, binds the first N |
//!
//! `T` is an event type or a union of event types ([`Either<A, B>`] or a
//! `#[derive(EventUnion)]` enum, see [`crate::union`]): any [`ParamEvent`]. A union
//! parameter's spec lists all its member types, and its events bind in arrival order
//! whatever their member type (DESIGN §3, §4.4).
//!
//! A step takes one parameter or a tuple of up to six. Results implement [`Outputs`]: one
//! event, `Option`, `Vec`, a tuple (returned together), [`Either`], or `()`.

use crate::event::{Event, Payload, PayloadError, from_payload, to_payload};
use saap_dispatch::ids::Seq;
use saap_dispatch::run::{Bound, EventTy, LoggedEvent};
use saap_dispatch::spec::ParamKind;
use saap_dispatch::{EventId, Run, StepIdx};
use std::ops::Deref;

/// One event bound to a parameter: its id, type name and payload.
#[derive(Debug, Clone)]
pub struct BoundEvent {
    pub id: EventId,
    /// The event's type name (tells the members of a union parameter apart).
    pub name: EventName,
    pub payload: Payload,
}

/// An event type's name: the `NAME` of a Rust type, or a name known only at run time (an
/// event type declared in JSON). Derefs to `str`. Cloning the name of a Rust type copies a
/// reference: no reference count to update on every bound event.
#[derive(Debug, Clone)]
pub enum EventName {
    Static(&'static str),
    Shared(std::sync::Arc<str>),
}

impl Deref for EventName {
    type Target = str;
    fn deref(&self) -> &str {
        match self {
            EventName::Static(s) => s,
            EventName::Shared(s) => s,
        }
    }
}

impl PartialEq for EventName {
    fn eq(&self, other: &EventName) -> bool {
        **self == **other
    }
}

impl Eq for EventName {}

impl PartialEq<str> for EventName {
    fn eq(&self, other: &str) -> bool {
        &**self == other
    }
}

impl PartialEq<&str> for EventName {
    fn eq(&self, other: &&str) -> bool {
        &**self == *other
    }
}

impl std::fmt::Display for EventName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}

impl From<&str> for EventName {
    fn from(s: &str) -> EventName {
        EventName::Shared(s.into())
    }
}

impl From<String> for EventName {
    fn from(s: String) -> EventName {
        EventName::Shared(s.into())
    }
}

impl From<std::sync::Arc<str>> for EventName {
    fn from(s: std::sync::Arc<str>) -> EventName {
        EventName::Shared(s)
    }
}

/// One bound event borrowed from its run's tables: what the engine's local driver extracts
/// typed inputs from, under the run's lock, without a reference count per event.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct BoundRef<'a> {
    seq: Seq,
    tables: Tables<'a>,
}

impl<'a> BoundRef<'a> {
    pub fn id(&self) -> EventId {
        self.tables
            .log
            .get(self.seq as usize)
            .map_or(EventId::from_bytes([0; 12]), |e| e.id)
    }
    /// The event's type name (tells the members of a union parameter apart).
    pub fn name(&self) -> &'a EventName {
        match self.tables.log.get(self.seq as usize).map(|e| e.ty) {
            Some(EventTy::Known(t)) => self.tables.names.get(t as usize).unwrap_or(&UNNAMED),
            _ => &UNNAMED,
        }
    }
    pub fn payload(&self) -> &'a Payload {
        self.tables
            .payloads
            .get(self.seq as usize)
            // (Not `unwrap_or`: its argument would make the static on every call.)
            .unwrap_or_else(|| &MISSING)
    }
    /// The owned bound event (clones the payload's reference).
    pub fn to_owned(&self) -> BoundEvent {
        BoundEvent {
            id: self.id(),
            name: self.name().clone(),
            payload: self.payload().clone(),
        }
    }
}

/// The run's tables a bound event is read from.
#[derive(Clone, Copy)]
struct Tables<'a> {
    log: &'a [LoggedEvent],
    payloads: &'a [Payload],
    names: &'a [EventName],
}

/// The name of a type the workflow does not know, and the fields of an event the run's
/// table does not hold (neither happens: the engine logs a payload for every event).
static UNNAMED: EventName = EventName::Static("");
static MISSING: std::sync::LazyLock<Payload> =
    std::sync::LazyLock::new(|| Payload::from_json(serde_json::Value::Null));

/// The events bound to one parameter, borrowed from the run's tables (see [`BoundRef`]).
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct BoundRefs<'a> {
    seqs: Seqs<'a>,
    tables: Tables<'a>,
}

/// The sequence numbers of a parameter's bound events: one (a required or optional
/// parameter: no slice to look up) or a list.
#[derive(Clone, Copy)]
enum Seqs<'a> {
    One(Seq),
    List(&'a [Seq]),
}

impl<'a> BoundRefs<'a> {
    pub fn len(&self) -> usize {
        match self.seqs {
            Seqs::One(_) => 1,
            Seqs::List(l) => l.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn iter(&self) -> impl Iterator<Item = BoundRef<'a>> + 'a {
        let tables = self.tables;
        let (one, list): (Option<Seq>, &'a [Seq]) = match self.seqs {
            Seqs::One(seq) => (Some(seq), &[]),
            Seqs::List(l) => (None, l),
        };
        one.into_iter()
            .chain(list.iter().copied())
            .map(move |seq| BoundRef { seq, tables })
    }
    /// The only event, if exactly one is bound.
    #[inline]
    fn one(&self) -> Option<BoundRef<'a>> {
        let seq = match self.seqs {
            Seqs::One(seq) => seq,
            Seqs::List([seq]) => *seq,
            Seqs::List(_) => return None,
        };
        Some(BoundRef {
            seq,
            tables: self.tables,
        })
    }
    /// The owned bound events (clones each payload's reference).
    pub fn to_vec(&self) -> Vec<BoundEvent> {
        self.iter().map(|b| b.to_owned()).collect()
    }
}

/// An execution's bound events, one list per parameter, borrowed from its run's tables:
/// the engine's local driver extracts the typed inputs from them under the run's lock,
/// where the payloads are, instead of cloning a reference to each payload into a
/// [`BoundEvent`] and extracting after the lock (two atomic operations per event).
#[doc(hidden)]
pub struct BoundInputs<'a> {
    run: &'a Run,
    step: StepIdx,
    bindings: &'a [Bound],
    tables: Tables<'a>,
}

impl<'a> BoundInputs<'a> {
    /// The bindings of `step`'s execution in `run` (`bindings`), read from the run's log,
    /// its payloads (one per logged event) and the workflow's type names (by type id).
    pub(crate) fn new(
        run: &'a Run,
        step: StepIdx,
        bindings: &'a [Bound],
        payloads: &'a [Payload],
        names: &'a [EventName],
    ) -> BoundInputs<'a> {
        BoundInputs {
            run,
            step,
            bindings,
            tables: Tables {
                log: run.log(),
                payloads,
                names,
            },
        }
    }
    /// How many parameters are bound.
    pub fn len(&self) -> usize {
        self.bindings.len()
    }
    pub fn is_empty(&self) -> bool {
        self.bindings.is_empty()
    }
    /// The events bound to parameter `index` (none past the last parameter).
    #[inline]
    pub fn param(&self, index: usize) -> BoundRefs<'a> {
        let seqs = match self.bindings.get(index) {
            Some(Bound::One(seq)) => Seqs::One(*seq),
            Some(b) => Seqs::List(self.run.bound_seqs(self.step, index as u32, *b)),
            None => Seqs::List(&[]),
        };
        BoundRefs {
            seqs,
            tables: self.tables,
        }
    }
    /// The owned bound events, one list per parameter (clones each payload's reference).
    pub fn to_vecs(&self) -> Vec<Vec<BoundEvent>> {
        (0..self.len()).map(|i| self.param(i).to_vec()).collect()
    }
}

/// The static description of one parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamDecl {
    pub kind: ParamKind,
    pub type_name: &'static str,
    pub type_parents: &'static [&'static str],
    /// Further member types of a union parameter (name, parents).
    pub also: Vec<(&'static str, &'static [&'static str])>,
    pub size: Option<u32>,
}

/// Why bound events could not be turned into a step's typed inputs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    #[error(transparent)]
    Payload(#[from] PayloadError),
    #[error(
        "parameter {param} expected {expected} event(s) of type `{name}` but {found} were bound; this is an engine bug, please report it"
    )]
    Arity {
        param: usize,
        name: &'static str,
        expected: usize,
        found: usize,
    },
    #[error(
        "parameter {param} bound an event of type `{found}`, which is none of its union's types (the first is `{first}`); this is an engine bug, please report it"
    )]
    NotAMember {
        param: usize,
        first: &'static str,
        found: String,
    },
    #[error(
        "parameter {param}: {skipped} event(s) were said to be extracted already but {had} were; this is an engine bug, please report it"
    )]
    Stale {
        param: usize,
        skipped: usize,
        had: usize,
    },
}

/// What one bound event of a parameter becomes: an event type, or a union of event types
/// ([`Either<A, B>`], a `#[derive(EventUnion)]` enum). Every parameter kind takes one.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is neither an event type nor a union of event types",
    label = "not an event type",
    note = "derive `saap::Event` (with serde's `Serialize` and `Deserialize`) for an event type, or `saap::EventUnion` for an enum with one event type per variant; a parameter holds one of them: `Required<T>`, `Option<T>`, `Vec<T>` or `FixedList<T, N>`"
)]
pub trait ParamEvent: Sized + Send + 'static {
    /// The member event types (name, direct parents) in declaration order; the first is
    /// the parameter's main type. One for an event type.
    fn members() -> Vec<(&'static str, &'static [&'static str])>;
    /// Whether an event of type `name` is one of [`ParamEvent::members`].
    fn accepts(name: &str) -> bool;
    /// The typed value of one bound event (of a member type) of parameter `index`.
    fn from_bound(index: usize, event: &BoundEvent) -> Result<Self, InputError>;
    /// [`ParamEvent::from_bound`] of an event borrowed from its run's tables.
    #[doc(hidden)]
    fn from_ref(index: usize, event: BoundRef<'_>) -> Result<Self, InputError> {
        Self::from_bound(index, &event.to_owned())
    }
}

impl<T: Event> ParamEvent for T {
    fn members() -> Vec<(&'static str, &'static [&'static str])> {
        vec![(T::NAME, T::PARENTS)]
    }
    fn accepts(name: &str) -> bool {
        name == T::NAME
    }
    #[inline]
    fn from_bound(_index: usize, event: &BoundEvent) -> Result<Self, InputError> {
        // The core binds only this type's events here (DESIGN §4.1: exact names).
        Ok(from_payload(&event.payload)?)
    }
    #[inline]
    fn from_ref(_index: usize, event: BoundRef<'_>) -> Result<Self, InputError> {
        Ok(from_payload(event.payload())?)
    }
}

/// A step parameter type. Implemented for [`Required<T>`], `Option<T>`, `Vec<T>` and
/// [`FixedList<T, N>`] where `T` is a [`ParamEvent`] (an event type or a union), and for a
/// bare union (`Either<A, B>` or a `#[derive(EventUnion)]` enum, a required parameter).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a step's event parameter",
    label = "not an event parameter",
    note = "an event parameter is `Required<T>`, `Option<T>`, `Vec<T>` or `FixedList<T, N>` where `T` is a `#[derive(Event)]` type or a `#[derive(EventUnion)]` enum (a bare union is a required parameter); kinds do not nest: write `Vec<T>`, not `Vec<Option<T>>`"
)]
pub trait Param: Sized + Send + 'static {
    fn decl() -> ParamDecl;
    fn extract(index: usize, bound: &[BoundEvent]) -> Result<Self, InputError>;
    /// [`Param::extract`] of events borrowed from their run's tables.
    #[doc(hidden)]
    fn extract_refs(index: usize, bound: BoundRefs<'_>) -> Result<Self, InputError> {
        Self::extract(index, &bound.to_vec())
    }

    /// Extends `prev`, extracted earlier from the first `skipped` events of this parameter's
    /// binding, with `new`, the binding's events after them. The engine passes `skipped > 0`
    /// only for list parameters (a list binding is a prefix of its match list in arrival
    /// order, DESIGN §4.4), so that a precondition re-evaluated on every arrival extracts
    /// each event once; with `skipped == 0`, `new` is the whole binding.
    #[doc(hidden)]
    fn extend(
        prev: Option<Self>,
        index: usize,
        skipped: usize,
        new: &[BoundEvent],
    ) -> Result<Self, InputError> {
        match skipped {
            0 => <Self as Param>::extract(index, new),
            _ => Err(InputError::Stale {
                param: index,
                skipped,
                had: prev.map(|_| 1).unwrap_or(0),
            }),
        }
    }
}

/// A required event parameter (`T` in DESIGN §3). Derefs to the event.
#[derive(Debug, Clone, PartialEq)]
pub struct Required<T> {
    pub event: T,
    pub id: EventId,
}

impl<T> Required<T> {
    pub fn into_inner(self) -> T {
        self.event
    }
}

impl<T> Deref for Required<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.event
    }
}

/// A fixed-list parameter: waits for `N` events of type `T` and binds the first `N` in
/// arrival order. Derefs to a slice of exactly `N` events.
#[derive(Debug, Clone, PartialEq)]
pub struct FixedList<T, const N: usize> {
    items: Vec<T>,
}

impl<T, const N: usize> FixedList<T, N> {
    pub fn into_vec(self) -> Vec<T> {
        self.items
    }
}

impl<T, const N: usize> Deref for FixedList<T, N> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.items
    }
}

/// The declaration of a parameter of `kind` over `T`'s member types (a type listed twice,
/// e.g. through a nested union, once).
pub(crate) fn decl<T: ParamEvent>(kind: ParamKind, size: Option<u32>) -> ParamDecl {
    let mut members = T::members();
    let mut i = 0;
    while i < members.len() {
        if members[..i].iter().any(|m| m.0 == members[i].0) {
            members.remove(i);
        } else {
            i += 1;
        }
    }
    let mut members = members.into_iter();
    let (type_name, type_parents) = members.next().unwrap_or(("", &[]));
    ParamDecl {
        kind,
        type_name,
        type_parents,
        also: members.collect(),
        size,
    }
}

/// `T`'s main type name (for error messages).
pub(crate) fn main_name<T: ParamEvent>() -> &'static str {
    T::members().first().map_or("", |m| m.0)
}

fn arity<T: ParamEvent>(index: usize, expected: usize, found: usize) -> InputError {
    InputError::Arity {
        param: index,
        name: main_name::<T>(),
        expected,
        found,
    }
}

/// Extraction of a required parameter (one event) over `T`.
pub(crate) fn extract_one<T: ParamEvent>(
    index: usize,
    bound: &[BoundEvent],
) -> Result<T, InputError> {
    match bound {
        [one] => T::from_bound(index, one),
        _ => Err(arity::<T>(index, 1, bound.len())),
    }
}

/// [`extract_one`] of events borrowed from their run's tables.
fn extract_one_ref<T: ParamEvent>(index: usize, bound: BoundRefs<'_>) -> Result<T, InputError> {
    match bound.one() {
        Some(one) => T::from_ref(index, one),
        None => Err(arity::<T>(index, 1, bound.len())),
    }
}

impl<T: ParamEvent> Param for Required<T> {
    fn decl() -> ParamDecl {
        decl::<T>(ParamKind::Required, None)
    }
    fn extract(index: usize, bound: &[BoundEvent]) -> Result<Self, InputError> {
        match bound {
            [one] => Ok(Required {
                event: T::from_bound(index, one)?,
                id: one.id,
            }),
            _ => Err(arity::<T>(index, 1, bound.len())),
        }
    }
    #[inline]
    fn extract_refs(index: usize, bound: BoundRefs<'_>) -> Result<Self, InputError> {
        match bound.one() {
            Some(one) => Ok(Required {
                event: T::from_ref(index, one)?,
                id: one.id(),
            }),
            None => Err(arity::<T>(index, 1, bound.len())),
        }
    }
}

impl<T: ParamEvent> Param for Option<T> {
    fn decl() -> ParamDecl {
        decl::<T>(ParamKind::Optional, None)
    }
    fn extract(index: usize, bound: &[BoundEvent]) -> Result<Self, InputError> {
        match bound {
            [] => Ok(None),
            [one] => Ok(Some(T::from_bound(index, one)?)),
            _ => Err(arity::<T>(index, 1, bound.len())),
        }
    }
    fn extract_refs(index: usize, bound: BoundRefs<'_>) -> Result<Self, InputError> {
        match bound.len() {
            0 => Ok(None),
            _ => extract_one_ref(index, bound).map(Some),
        }
    }
}

/// The typed values of a list's bound events, in one allocation of the list's size (a
/// `collect` into a `Result` cannot size its vector beforehand and grows it by doubling).
fn extract_all<T: ParamEvent>(index: usize, bound: &[BoundEvent]) -> Result<Vec<T>, InputError> {
    let mut items = Vec::with_capacity(bound.len());
    for b in bound {
        items.push(T::from_bound(index, b)?);
    }
    Ok(items)
}

/// [`extract_all`] of events borrowed from their run's tables.
fn extract_all_refs<T: ParamEvent>(
    index: usize,
    bound: BoundRefs<'_>,
) -> Result<Vec<T>, InputError> {
    let mut items = Vec::with_capacity(bound.len());
    for b in bound.iter() {
        items.push(T::from_ref(index, b)?);
    }
    Ok(items)
}

impl<T: ParamEvent> Param for Vec<T> {
    fn decl() -> ParamDecl {
        decl::<T>(ParamKind::List, None)
    }
    fn extract(index: usize, bound: &[BoundEvent]) -> Result<Self, InputError> {
        extract_all(index, bound)
    }
    fn extract_refs(index: usize, bound: BoundRefs<'_>) -> Result<Self, InputError> {
        extract_all_refs(index, bound)
    }
    fn extend(
        prev: Option<Self>,
        index: usize,
        skipped: usize,
        new: &[BoundEvent],
    ) -> Result<Self, InputError> {
        match prev {
            Some(mut items) if items.len() == skipped => {
                items.reserve(new.len());
                for b in new {
                    items.push(T::from_bound(index, b)?);
                }
                Ok(items)
            }
            _ if skipped == 0 => <Self as Param>::extract(index, new),
            prev => Err(InputError::Stale {
                param: index,
                skipped,
                had: prev.map_or(0, |v| v.len()),
            }),
        }
    }
}

impl<T: ParamEvent, const N: usize> Param for FixedList<T, N> {
    fn decl() -> ParamDecl {
        decl::<T>(ParamKind::FixedList, Some(N as u32))
    }
    fn extract(index: usize, bound: &[BoundEvent]) -> Result<Self, InputError> {
        if bound.len() != N {
            return Err(arity::<T>(index, N, bound.len()));
        }
        Ok(FixedList {
            items: extract_all(index, bound)?,
        })
    }
    fn extract_refs(index: usize, bound: BoundRefs<'_>) -> Result<Self, InputError> {
        if bound.len() != N {
            return Err(arity::<T>(index, N, bound.len()));
        }
        Ok(FixedList {
            items: extract_all_refs(index, bound)?,
        })
    }
}

/// A step's event inputs: one [`Param`] or a tuple of them.
pub trait Inputs: Sized + Send + 'static {
    fn decls() -> Vec<ParamDecl>;
    fn extract(bound: &[Vec<BoundEvent>]) -> Result<Self, InputError>;
    /// [`Inputs::extract`] of events borrowed from their run's tables.
    #[doc(hidden)]
    fn extract_refs(bound: &BoundInputs<'_>) -> Result<Self, InputError> {
        Self::extract(&bound.to_vecs())
    }
    /// [`Param::extend`] for each parameter: `skipped[i]` events of parameter `i` are
    /// already in `prev`, `bound[i]` holds the ones after them.
    #[doc(hidden)]
    fn extend(
        prev: Option<Self>,
        skipped: &[usize],
        bound: &[Vec<BoundEvent>],
    ) -> Result<Self, InputError>;
}

impl<P: Param> Inputs for P {
    fn decls() -> Vec<ParamDecl> {
        vec![P::decl()]
    }
    fn extract(bound: &[Vec<BoundEvent>]) -> Result<Self, InputError> {
        P::extract(0, bound.first().map(Vec::as_slice).unwrap_or(&[]))
    }
    #[inline]
    fn extract_refs(bound: &BoundInputs<'_>) -> Result<Self, InputError> {
        P::extract_refs(0, bound.param(0))
    }
    fn extend(
        prev: Option<Self>,
        skipped: &[usize],
        bound: &[Vec<BoundEvent>],
    ) -> Result<Self, InputError> {
        P::extend(
            prev,
            0,
            skipped.first().copied().unwrap_or(0),
            bound.first().map(Vec::as_slice).unwrap_or(&[]),
        )
    }
}

macro_rules! tuple_inputs {
    ($($p:ident $i:tt),+) => {
        impl<$($p: Param),+> Inputs for ($($p,)+) {
            fn decls() -> Vec<ParamDecl> {
                vec![$($p::decl()),+]
            }
            fn extract(bound: &[Vec<BoundEvent>]) -> Result<Self, InputError> {
                Ok(($($p::extract($i, bound.get($i).map(Vec::as_slice).unwrap_or(&[]))?,)+))
            }
            fn extract_refs(bound: &BoundInputs<'_>) -> Result<Self, InputError> {
                Ok(($($p::extract_refs($i, bound.param($i))?,)+))
            }
            fn extend(
                prev: Option<Self>,
                skipped: &[usize],
                bound: &[Vec<BoundEvent>],
            ) -> Result<Self, InputError> {
                let prev = match prev {
                    Some(t) => ($(Some(t.$i),)+),
                    None => ($(None::<$p>,)+),
                };
                Ok(($($p::extend(
                    prev.$i,
                    $i,
                    skipped.get($i).copied().unwrap_or(0),
                    bound.get($i).map(Vec::as_slice).unwrap_or(&[]),
                )?,)+))
            }
        }
    };
}
tuple_inputs!(A 0, B 1);
tuple_inputs!(A 0, B 1, C 2);
tuple_inputs!(A 0, B 1, C 2, D 3);
tuple_inputs!(A 0, B 1, C 2, D 3, E 4);
tuple_inputs!(A 0, B 1, C 2, D 3, E 4, F 5);

/// An event a step returned, ready to append.
#[derive(Debug, Clone)]
pub struct OutEvent {
    /// The event's type name (borrowed for a Rust type; owned for an output that arrived as
    /// JSON from a body run on another worker).
    pub name: std::borrow::Cow<'static, str>,
    pub payload: Payload,
    /// When to deliver it (nanoseconds since the Unix epoch), for an event returned as
    /// [`crate::Delayed`]; `None`: with the step's completion.
    pub due_ns: Option<std::num::NonZeroU64>,
}

impl OutEvent {
    /// An output holding the typed value (serialized only when a store or the wire needs
    /// it; steps of the same type receive a clone).
    pub fn new<T: Event>(event: T) -> OutEvent {
        OutEvent {
            name: std::borrow::Cow::Borrowed(T::NAME),
            payload: Payload::typed(event),
            due_ns: None,
        }
    }
    /// An output serialized from a borrowed event.
    pub fn of<T: Event>(event: &T) -> Result<OutEvent, PayloadError> {
        Ok(OutEvent {
            name: std::borrow::Cow::Borrowed(T::NAME),
            payload: to_payload(event)?,
            due_ns: None,
        })
    }
}

/// The static description of what a step may return.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutputDecl {
    /// Each possible output type with its direct parents.
    pub types: Vec<(&'static str, &'static [&'static str])>,
    /// Groups of types returned together in one result.
    pub together: Vec<Vec<&'static str>>,
    /// Types one result may hold any number of (a `Vec` result): the spec says
    /// `max: unbounded` for them. The others are at most one per result (or as many as a
    /// group lists).
    pub unbounded: Vec<&'static str>,
    /// Types returned for later delivery (`Delayed<T>`): the spec marks them `delayed`, and
    /// `simulate`/`explore` deliver them as timers.
    pub delayed: Vec<&'static str>,
}

impl OutputDecl {
    pub fn add<T: Event>(&mut self) {
        if !self.types.iter().any(|(n, _)| *n == T::NAME) {
            self.types.push((T::NAME, T::PARENTS));
        }
    }

    /// Declares `T` as returned for later delivery (a timer), and as an output.
    pub fn add_delayed<T: Event>(&mut self) {
        self.add::<T>();
        if !self.delayed.contains(&T::NAME) {
            self.delayed.push(T::NAME);
        }
    }
}

/// What a step returns.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a step's result",
    label = "not a step result",
    note = "a step returns (in `Result<_, StepError>`) an event type, a union of event types (`Either<A, B>`, a `#[derive(EventUnion)]` enum), `Option` or `Vec` of one, a tuple of up to four events, or `()`"
)]
pub trait Outputs: Send + 'static {
    fn declare(decl: &mut OutputDecl);
    fn collect(self, out: &mut Vec<OutEvent>) -> Result<(), PayloadError>;
}

impl Outputs for () {
    fn declare(_decl: &mut OutputDecl) {}
    fn collect(self, _out: &mut Vec<OutEvent>) -> Result<(), PayloadError> {
        Ok(())
    }
}

impl<T: Event> Outputs for T {
    fn declare(decl: &mut OutputDecl) {
        decl.add::<T>();
    }
    fn collect(self, out: &mut Vec<OutEvent>) -> Result<(), PayloadError> {
        out.push(OutEvent::new(self));
        Ok(())
    }
}

/// Nothing or what `T` returns (`T` is an event, a union or a tuple of events): at most
/// one of each, as a plain output says.
impl<T: Outputs> Outputs for Option<T> {
    fn declare(decl: &mut OutputDecl) {
        T::declare(decl);
    }
    fn collect(self, out: &mut Vec<OutEvent>) -> Result<(), PayloadError> {
        match self {
            Some(e) => e.collect(out),
            None => Ok(()),
        }
    }
}

/// What each `T` returns, in order (`T` is an event, a union or a tuple of events): any
/// number of each of `T`'s types (`max: unbounded` in the spec).
impl<T: Outputs> Outputs for Vec<T> {
    fn declare(decl: &mut OutputDecl) {
        let mut each = OutputDecl::default();
        T::declare(&mut each);
        for (name, parents) in each.types {
            if !decl.types.iter().any(|(n, _)| *n == name) {
                decl.types.push((name, parents));
            }
            if !decl.unbounded.contains(&name) {
                decl.unbounded.push(name);
            }
        }
        decl.together.extend(each.together);
    }
    fn collect(self, out: &mut Vec<OutEvent>) -> Result<(), PayloadError> {
        out.reserve(self.len());
        for e in self {
            e.collect(out)?;
        }
        Ok(())
    }
}

/// One member of a tuple a step returns: an event, or an event delivered later
/// ([`crate::Delayed`]).
pub trait TupleOutput: Send + 'static {
    /// The member's event type name.
    const NAME: &'static str;
    fn declare(decl: &mut OutputDecl);
    fn push(self, out: &mut Vec<OutEvent>) -> Result<(), PayloadError>;
}

impl<T: Event> TupleOutput for T {
    const NAME: &'static str = T::NAME;
    fn declare(decl: &mut OutputDecl) {
        decl.add::<T>();
    }
    fn push(self, out: &mut Vec<OutEvent>) -> Result<(), PayloadError> {
        out.push(OutEvent::new(self));
        Ok(())
    }
}

macro_rules! tuple_outputs {
    ($($p:ident $i:tt),+) => {
        impl<$($p: TupleOutput),+> Outputs for ($($p,)+) {
            fn declare(decl: &mut OutputDecl) {
                $($p::declare(decl);)+
                decl.together.push(vec![$($p::NAME),+]);
            }
            fn collect(self, out: &mut Vec<OutEvent>) -> Result<(), PayloadError> {
                $(self.$i.push(out)?;)+
                Ok(())
            }
        }
    };
}
tuple_outputs!(A 0, B 1);
tuple_outputs!(A 0, B 1, C 2);
tuple_outputs!(A 0, B 1, C 2, D 3);

/// One of two event types (e.g. `Approved` or `Rejected`).
#[derive(Debug, Clone, PartialEq)]
pub enum Either<A, B> {
    Left(A),
    Right(B),
}

/// A union of two event types (or unions): `Option<Either<A, B>>`, `Vec<Either<A, B>>`
/// and `FixedList<Either<A, B>, N>` bind events of both.
impl<A: ParamEvent, B: ParamEvent> ParamEvent for Either<A, B> {
    fn members() -> Vec<(&'static str, &'static [&'static str])> {
        let mut m = A::members();
        m.extend(B::members());
        m
    }
    fn accepts(name: &str) -> bool {
        A::accepts(name) || B::accepts(name)
    }
    fn from_bound(index: usize, event: &BoundEvent) -> Result<Self, InputError> {
        if A::accepts(&event.name) {
            Ok(Either::Left(A::from_bound(index, event)?))
        } else if B::accepts(&event.name) {
            Ok(Either::Right(B::from_bound(index, event)?))
        } else {
            Err(InputError::NotAMember {
                param: index,
                first: main_name::<Self>(),
                found: event.name.to_string(),
            })
        }
    }
    fn from_ref(index: usize, event: BoundRef<'_>) -> Result<Self, InputError> {
        let name = event.name();
        if A::accepts(name) {
            Ok(Either::Left(A::from_ref(index, event)?))
        } else if B::accepts(name) {
            Ok(Either::Right(B::from_ref(index, event)?))
        } else {
            Err(InputError::NotAMember {
                param: index,
                first: main_name::<Self>(),
                found: name.to_string(),
            })
        }
    }
}

/// A required parameter that takes an `A` or a `B` (a union of event types, DESIGN §3).
impl<A: ParamEvent, B: ParamEvent> Param for Either<A, B> {
    fn decl() -> ParamDecl {
        decl::<Self>(ParamKind::Required, None)
    }
    fn extract(index: usize, bound: &[BoundEvent]) -> Result<Self, InputError> {
        extract_one(index, bound)
    }
    fn extract_refs(index: usize, bound: BoundRefs<'_>) -> Result<Self, InputError> {
        extract_one_ref(index, bound)
    }
}

impl<A: Outputs, B: Outputs> Outputs for Either<A, B> {
    fn declare(decl: &mut OutputDecl) {
        A::declare(decl);
        B::declare(decl);
    }
    fn collect(self, out: &mut Vec<OutEvent>) -> Result<(), PayloadError> {
        match self {
            Either::Left(a) => a.collect(out),
            Either::Right(b) => b.collect(out),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::event::{StopEvent, UserMessageEvent};

    fn bound(msg: &str, n: u64) -> BoundEvent {
        BoundEvent {
            id: saap_dispatch::counter_event_id(n),
            name: "UserMessageEvent".into(),
            payload: Payload::from_json(serde_json::json!({ "message": msg })),
        }
    }

    #[test]
    fn kinds_map_to_spec_kinds() {
        assert_eq!(
            <Required<UserMessageEvent>>::decl().kind,
            ParamKind::Required
        );
        assert_eq!(<Option<UserMessageEvent>>::decl().kind, ParamKind::Optional);
        assert_eq!(<Vec<UserMessageEvent>>::decl().kind, ParamKind::List);
        let f = <FixedList<UserMessageEvent, 4> as Param>::decl();
        assert_eq!((f.kind, f.size), (ParamKind::FixedList, Some(4)));
    }

    #[test]
    fn a_lists_typed_values_are_extracted_in_order_into_one_allocation_of_its_size() {
        let events: Vec<BoundEvent> = (0..37).map(|i| bound(&i.to_string(), i)).collect();
        let list = <Vec<UserMessageEvent> as Param>::extract(0, &events).unwrap();
        assert_eq!(list.capacity(), 37, "no room left over from doubling");
        let fixed = <FixedList<UserMessageEvent, 37> as Param>::extract(0, &events)
            .unwrap()
            .into_vec();
        assert_eq!(fixed.capacity(), 37);
        for items in [&list, &fixed] {
            let texts: Vec<&str> = items.iter().map(|m| m.message.as_str()).collect();
            let want: Vec<String> = (0..37).map(|i| i.to_string()).collect();
            assert_eq!(texts, want);
        }
        // A bad event still fails the whole list.
        let mut bad = events.clone();
        bad[5].payload = Payload::from_json(serde_json::json!({ "message": 5 }));
        assert!(<Vec<UserMessageEvent> as Param>::extract(0, &bad).is_err());
    }

    #[test]
    fn extraction_checks_arity_and_fields() {
        let r = <Required<UserMessageEvent> as Param>::extract(0, &[bound("a", 1)]).unwrap();
        assert_eq!(
            (r.message.as_str(), r.id),
            ("a", saap_dispatch::counter_event_id(1))
        );
        assert!(matches!(
            <Required<UserMessageEvent> as Param>::extract(0, &[]),
            Err(InputError::Arity {
                expected: 1,
                found: 0,
                ..
            })
        ));
        assert_eq!(
            <Option<UserMessageEvent> as Param>::extract(0, &[]).unwrap(),
            None
        );
        let l =
            <Vec<UserMessageEvent> as Param>::extract(0, &[bound("a", 1), bound("b", 2)]).unwrap();
        assert_eq!(l.len(), 2);
        assert!(<FixedList<UserMessageEvent, 3> as Param>::extract(0, &[bound("a", 1)]).is_err());
        let bad = BoundEvent {
            id: saap_dispatch::counter_event_id(9),
            name: "UserMessageEvent".into(),
            payload: Payload::from_json(serde_json::json!({ "message": 5 })),
        };
        assert!(matches!(
            <Required<UserMessageEvent> as Param>::extract(0, &[bad]),
            Err(InputError::Payload(PayloadError::Deserialize { .. }))
        ));
    }

    #[test]
    fn a_union_element_picks_its_member_by_name_in_every_kind() {
        type U = Either<StopEvent, UserMessageEvent>;
        let b = |name: &str, n: u64| BoundEvent {
            id: saap_dispatch::counter_event_id(n),
            name: name.into(),
            payload: Payload::from_json(serde_json::json!({ "message": "m" })),
        };
        let list =
            <Vec<U> as Param>::extract(0, &[b("UserMessageEvent", 1), b("StopEvent", 2)]).unwrap();
        assert!(matches!(list[..], [Either::Right(_), Either::Left(_)]));
        let fixed = <FixedList<U, 2> as Param>::extract(0, &[b("StopEvent", 3), b("StopEvent", 4)]);
        assert!(matches!(
            fixed.unwrap()[..],
            [Either::Left(_), Either::Left(_)]
        ));
        assert!(matches!(
            <Option<U> as Param>::extract(0, &[b("UserMessageEvent", 5)]),
            Ok(Some(Either::Right(_)))
        ));
        assert!(matches!(
            <Vec<U> as Param>::extract(2, &[b("ThoughtEvent", 6)]),
            Err(InputError::NotAMember {
                param: 2,
                first: "StopEvent",
                ..
            })
        ));
        let d = <FixedList<U, 2> as Param>::decl();
        assert_eq!((d.kind, d.size), (ParamKind::FixedList, Some(2)));
        assert_eq!(
            (d.type_name, d.also[0].0),
            ("StopEvent", "UserMessageEvent")
        );
        // A member listed twice (a nested union repeating a type) is declared once.
        let twice = <Vec<Either<U, StopEvent>> as Param>::decl();
        assert_eq!((twice.type_name, twice.also.len()), ("StopEvent", 1));
    }

    #[test]
    fn a_vec_result_declares_any_number_and_an_option_at_most_one() {
        let mut d = OutputDecl::default();
        <Vec<Either<UserMessageEvent, StopEvent>>>::declare(&mut d);
        assert_eq!(d.unbounded, ["UserMessageEvent", "StopEvent"]);
        let mut d = OutputDecl::default();
        <Option<StopEvent>>::declare(&mut d);
        assert!(d.unbounded.is_empty());
        assert_eq!(d.types.len(), 1);
        let mut d = OutputDecl::default();
        <Option<Vec<StopEvent>>>::declare(&mut d);
        assert_eq!(d.unbounded, ["StopEvent"]);
    }

    #[test]
    fn outputs_declare_what_they_return() {
        let mut d = OutputDecl::default();
        <(UserMessageEvent, StopEvent)>::declare(&mut d);
        assert_eq!(d.types.len(), 2);
        assert_eq!(d.together, vec![vec!["UserMessageEvent", "StopEvent"]]);
        let mut out = Vec::new();
        Either::<UserMessageEvent, StopEvent>::Right(StopEvent {})
            .collect(&mut out)
            .unwrap();
        assert_eq!(out[0].name, "StopEvent");
        let mut out = Vec::new();
        None::<StopEvent>.collect(&mut out).unwrap();
        assert!(out.is_empty());
    }
}
