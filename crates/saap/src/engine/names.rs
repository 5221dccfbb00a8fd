//! An event type's name by the core's type id, as bound events carry it (a Rust type's
//! `&'static str`, no reference count). Shared by binding and preconditions.

use crate::params::EventName;
use saap_dispatch::run::EventTy;

pub(super) fn type_name(names: &[EventName], ty: EventTy) -> EventName {
    match ty {
        EventTy::Known(t) => names
            .get(t as usize)
            .cloned()
            .unwrap_or(EventName::Static("")),
        EventTy::Foreign(_) => EventName::Static(""),
    }
}
