//! Step parameters and results: how a Rust signature maps to the spec's parameter kinds
//! (DESIGN §3) and how bound events become typed values.
//!
//! | Rust type | spec kind |
//! |---|---|
//! | [`Required<T>`] | required: needs one `T`, binds the trigger or the latest |
//! | `Option<T>` | optional: never blocks |
//! | `Vec<T>` | list: never blocks, all `T` in arrival order |
//! | [`FixedList<T, N>`] | fixed list: needs N, binds the first N |
//!
//! A step takes one parameter or a tuple of up to six. Results implement [`Outputs`]: one
//! event, `Option`, `Vec`, a tuple (returned together), [`Either`], or `()`.

use crate::event::{Event, Payload, PayloadError, from_payload, to_payload};
use saap_dispatch::EventId;
use saap_dispatch::spec::ParamKind;
use std::ops::Deref;

/// One event bound to a parameter: its id, type name and payload.
#[derive(Debug, Clone)]
pub struct BoundEvent {
    pub id: EventId,
    /// The event's type name (tells the members of a union parameter apart).
    pub name: std::sync::Arc<str>,
    pub payload: Payload,
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
        "parameter {param}: {skipped} event(s) were said to be extracted already but {had} were; this is an engine bug, please report it"
    )]
    Stale {
        param: usize,
        skipped: usize,
        had: usize,
    },
}

/// A step parameter type. Implemented for [`Required<T>`], `Option<T>`, `Vec<T>` and
/// [`FixedList<T, N>`] where `T: Event`.
pub trait Param: Sized + Send + 'static {
    fn decl() -> ParamDecl;
    fn extract(index: usize, bound: &[BoundEvent]) -> Result<Self, InputError>;

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

fn decl<T: Event>(kind: ParamKind, size: Option<u32>) -> ParamDecl {
    ParamDecl {
        kind,
        type_name: T::NAME,
        type_parents: T::PARENTS,
        also: Vec::new(),
        size,
    }
}

fn arity<T: Event>(index: usize, expected: usize, found: usize) -> InputError {
    InputError::Arity {
        param: index,
        name: T::NAME,
        expected,
        found,
    }
}

impl<T: Event> Param for Required<T> {
    fn decl() -> ParamDecl {
        decl::<T>(ParamKind::Required, None)
    }
    fn extract(index: usize, bound: &[BoundEvent]) -> Result<Self, InputError> {
        match bound {
            [one] => Ok(Required {
                event: from_payload(&one.payload)?,
                id: one.id,
            }),
            _ => Err(arity::<T>(index, 1, bound.len())),
        }
    }
}

impl<T: Event> Param for Option<T> {
    fn decl() -> ParamDecl {
        decl::<T>(ParamKind::Optional, None)
    }
    fn extract(index: usize, bound: &[BoundEvent]) -> Result<Self, InputError> {
        match bound {
            [] => Ok(None),
            [one] => Ok(Some(from_payload(&one.payload)?)),
            _ => Err(arity::<T>(index, 1, bound.len())),
        }
    }
}

impl<T: Event> Param for Vec<T> {
    fn decl() -> ParamDecl {
        decl::<T>(ParamKind::List, None)
    }
    fn extract(_index: usize, bound: &[BoundEvent]) -> Result<Self, InputError> {
        bound
            .iter()
            .map(|b| from_payload(&b.payload).map_err(InputError::from))
            .collect()
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
                    items.push(from_payload(&b.payload)?);
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

impl<T: Event, const N: usize> Param for FixedList<T, N> {
    fn decl() -> ParamDecl {
        decl::<T>(ParamKind::FixedList, Some(N as u32))
    }
    fn extract(index: usize, bound: &[BoundEvent]) -> Result<Self, InputError> {
        if bound.len() != N {
            return Err(arity::<T>(index, N, bound.len()));
        }
        let items = bound
            .iter()
            .map(|b| from_payload(&b.payload).map_err(InputError::from))
            .collect::<Result<Vec<T>, _>>()?;
        Ok(FixedList { items })
    }
}

/// A step's event inputs: one [`Param`] or a tuple of them.
pub trait Inputs: Sized + Send + 'static {
    fn decls() -> Vec<ParamDecl>;
    fn extract(bound: &[Vec<BoundEvent>]) -> Result<Self, InputError>;
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
    pub name: &'static str,
    pub payload: Payload,
}

impl OutEvent {
    /// An output holding the typed value (serialized only when a store or the wire needs
    /// it; steps of the same type receive a clone).
    pub fn new<T: Event>(event: T) -> OutEvent {
        OutEvent {
            name: T::NAME,
            payload: Payload::typed(event),
        }
    }
    /// An output serialized from a borrowed event.
    pub fn of<T: Event>(event: &T) -> Result<OutEvent, PayloadError> {
        Ok(OutEvent {
            name: T::NAME,
            payload: to_payload(event)?,
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
}

impl OutputDecl {
    pub fn add<T: Event>(&mut self) {
        if !self.types.iter().any(|(n, _)| *n == T::NAME) {
            self.types.push((T::NAME, T::PARENTS));
        }
    }
}

/// What a step returns.
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

impl<T: Event> Outputs for Option<T> {
    fn declare(decl: &mut OutputDecl) {
        decl.add::<T>();
    }
    fn collect(self, out: &mut Vec<OutEvent>) -> Result<(), PayloadError> {
        if let Some(e) = self {
            out.push(OutEvent::new(e));
        }
        Ok(())
    }
}

impl<T: Event> Outputs for Vec<T> {
    fn declare(decl: &mut OutputDecl) {
        decl.add::<T>();
    }
    fn collect(self, out: &mut Vec<OutEvent>) -> Result<(), PayloadError> {
        out.reserve(self.len());
        for e in self {
            out.push(OutEvent::new(e));
        }
        Ok(())
    }
}

macro_rules! tuple_outputs {
    ($($p:ident $i:tt),+) => {
        impl<$($p: Event),+> Outputs for ($($p,)+) {
            fn declare(decl: &mut OutputDecl) {
                $(decl.add::<$p>();)+
                decl.together.push(vec![$($p::NAME),+]);
            }
            fn collect(self, out: &mut Vec<OutEvent>) -> Result<(), PayloadError> {
                $(out.push(OutEvent::new(self.$i));)+
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

/// A required parameter that takes an `A` or a `B` (a union of event types, DESIGN §3).
impl<A: Event, B: Event> Param for Either<A, B> {
    fn decl() -> ParamDecl {
        let mut d = decl::<A>(ParamKind::Required, None);
        d.also.push((B::NAME, B::PARENTS));
        d
    }
    fn extract(index: usize, bound: &[BoundEvent]) -> Result<Self, InputError> {
        match bound {
            [one] if &*one.name == A::NAME => Ok(Either::Left(from_payload(&one.payload)?)),
            [one] if &*one.name == B::NAME => Ok(Either::Right(from_payload(&one.payload)?)),
            _ => Err(arity::<A>(index, 1, bound.len())),
        }
    }
}

impl<A: Event, B: Event> Outputs for Either<A, B> {
    fn declare(decl: &mut OutputDecl) {
        decl.add::<A>();
        decl.add::<B>();
    }
    fn collect(self, out: &mut Vec<OutEvent>) -> Result<(), PayloadError> {
        out.push(match self {
            Either::Left(a) => OutEvent::new(a),
            Either::Right(b) => OutEvent::new(b),
        });
        Ok(())
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
