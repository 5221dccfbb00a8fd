//! Events entering a run ([`Incoming`]): a typed or JSON event checked against the workflow
//! (known type, start or not, size), given its type id and id; a step's outputs turned into
//! the core's terms. Must not touch a run's state: it prepares inputs for `apply`.

use super::error::EngineError;
use super::shared::Shared;
use crate::backend::StoredEvent;
use crate::event::Payload;
use crate::params::{EventName, OutEvent};
use saap_dispatch::derived_event_id;
use saap_dispatch::{EventId, EventKind, ExecutionId, NewEventType, StepIdx};

/// An event entering a run.
pub(super) struct Incoming {
    pub(super) id: EventId,
    pub(super) ty: NewEventType,
    pub(super) kind: EventKind,
    pub(super) name: std::borrow::Cow<'static, str>,
    pub(super) payload: Payload,
    /// The execution that showed this display event, if any.
    pub(super) by: Option<ExecutionId>,
}

pub(super) fn stored(ev: &Incoming) -> StoredEvent {
    StoredEvent {
        id: ev.id,
        name: ev.name.to_string(),
        kind: ev.kind.bits(),
        payload: ev.payload.clone(),
    }
}

impl Shared {
    /// An outside event of `size` bytes of JSON.
    pub(super) fn incoming(
        &self,
        name: &str,
        payload: Payload,
        size: usize,
        id: Option<EventId>,
    ) -> Result<Incoming, EngineError> {
        self.incoming_named(name.to_string().into(), payload, size, id)
    }

    /// [`Shared::incoming`] with the name as it is kept (a typed event's name is static: no
    /// copy), looked up in the engine's FNV type table. Inlined: a typed event's lookup is
    /// a few comparisons, and the 96-byte `Incoming` is then made in the caller's frame
    /// (`always`: with a plain `#[inline]`, `Engine::run`'s instances, in the caller's
    /// crate, still called it: ~90 instructions per run more).
    #[inline(always)]
    pub(super) fn incoming_named(
        &self,
        name: std::borrow::Cow<'static, str>,
        payload: Payload,
        size: usize,
        id: Option<EventId>,
    ) -> Result<Incoming, EngineError> {
        let spec = self.workflow.compiled();
        let t = match &name {
            // A typed start event: one address comparison per start type, no hashing.
            std::borrow::Cow::Borrowed(n) => self
                .start_types
                .iter()
                .find(|(s, _)| std::ptr::eq(*s, *n))
                .map(|&(_, t)| t),
            std::borrow::Cow::Owned(_) => None,
        };
        let Some(t) = t.or_else(|| self.type_ids.get(&*name).copied()) else {
            return Err(EngineError::UnknownEventType {
                name: name.to_string(),
                workflow: self.workflow.name().to_string(),
            });
        };
        if size > self.opts.max_event_bytes {
            return Err(EngineError::EventTooLarge {
                name: name.to_string(),
                size,
                max: self.opts.max_event_bytes,
            });
        }
        Ok(Incoming {
            id: id.unwrap_or_else(|| self.ids.next()),
            ty: NewEventType::Known(t),
            kind: spec.type_info(t).kind,
            name,
            payload,
            by: None,
        })
    }

    /// An output of execution `x` (of `step`, when known: its declared types are tried
    /// first).
    pub(super) fn output(
        &self,
        step: Option<StepIdx>,
        run_key: u64,
        x: ExecutionId,
        index: u32,
        out: OutEvent,
    ) -> Incoming {
        let ty = self.out_type(step, &out.name);
        let kind = match &ty {
            NewEventType::Known(t) => self.workflow.compiled().type_info(*t).kind,
            NewEventType::Foreign { kind, .. } => *kind,
        };
        Incoming {
            id: derived_event_id(run_key, x, index),
            ty,
            kind,
            name: out.name,
            payload: out.payload,
            by: None,
        }
    }

    /// The type of an output named `name` of `step`: one the step declares (a Rust type's
    /// name is compared by address first), another type of the workflow, or a foreign one.
    #[inline]
    pub(super) fn out_type(&self, step: Option<StepIdx>, name: &str) -> NewEventType {
        // Most steps return the type they declare first: one address comparison.
        if let Some(ts) = step.and_then(|s| self.out_types.get(s as usize))
            && let Some((EventName::Static(d), t)) = ts.first()
            && std::ptr::eq(*d, name)
        {
            return NewEventType::Known(*t);
        }
        self.out_type_searched(step, name)
    }

    /// The type of an output named `name` of `step` when it is the type the step declares
    /// first, by address (a Rust type's name): most steps' one output.
    #[inline(always)]
    pub(super) fn out_type_declared_first(
        &self,
        step: StepIdx,
        name: &str,
    ) -> Option<saap_dispatch::TypeId> {
        match self.out_types.get(step as usize)?.first() {
            Some((EventName::Static(d), t)) if std::ptr::eq(*d, name) => Some(*t),
            _ => None,
        }
    }

    /// [`Shared::out_type`] by searching the step's declared types, then the workflow's.
    #[inline(never)]
    pub(super) fn out_type_searched(&self, step: Option<StepIdx>, name: &str) -> NewEventType {
        let declared = step.and_then(|s| self.out_types.get(s as usize));
        let same = |declared: &EventName| match declared {
            EventName::Static(d) => *d == name,
            EventName::Shared(d) => **d == *name,
        };
        let declared = declared
            .and_then(|ts| ts.iter().find(|(n, _)| same(n)))
            .map(|(_, t)| *t);
        match declared.or_else(|| self.type_ids.get(name).copied()) {
            Some(t) => NewEventType::Known(t),
            None => NewEventType::Foreign {
                name: name.to_string(),
                kind: EventKind::from_bits(EventKind::CONTROL),
            },
        }
    }
}
