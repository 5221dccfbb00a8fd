//! Unions of event types as derived enums (DESIGN §3: a parameter `T` may be a union):
//!
//! ```
//! use saap::{EventUnion, Required, StepCtx, StepError, StopEvent, UserMessageEvent, Workflow, step};
//! #[derive(saap::Event, serde::Serialize, serde::Deserialize)]
//! struct Approved { by: String }
//! #[derive(saap::Event, serde::Serialize, serde::Deserialize)]
//! struct Rejected { reason: String }
//! #[derive(saap::Event, serde::Serialize, serde::Deserialize)]
//! struct Deferred {}
//!
//! #[derive(EventUnion)]
//! enum Decision { Approved(Approved), Rejected(Rejected), Deferred(Deferred) }
//!
//! #[step]
//! async fn act(decision: Decision) -> Result<StopEvent, StepError> {
//!     match decision {
//!         Decision::Approved(a) => { let _ = a.by; }
//!         Decision::Rejected(_) | Decision::Deferred(_) => {}
//!     }
//!     Ok(StopEvent {})
//! }
//! let wf = Workflow::builder("Decider").step(act_step()).build().expect("valid");
//! assert_eq!(wf.spec().steps[0].params[0].types, ["Approved", "Rejected", "Deferred"]);
//! ```
//!
//! A union enum is a required parameter that binds one event of any member type, and a
//! step result that returns one of them. `Option`/`Vec`/`FixedList` of a union are not
//! supported yet.

use crate::params::{InputError, ParamDecl};
use saap_dispatch::spec::ParamKind;

/// The declaration of a required union parameter; `members` are (name, parents), the first
/// is the parameter's main type. Used by `#[derive(EventUnion)]`.
#[doc(hidden)]
pub fn decl(members: &[(&'static str, &'static [&'static str])]) -> ParamDecl {
    let (name, parents) = members.first().copied().unwrap_or(("", &[]));
    ParamDecl {
        kind: ParamKind::Required,
        type_name: name,
        type_parents: parents,
        also: members.iter().skip(1).copied().collect(),
        size: None,
    }
}

/// The error for bound events that fit no member. Used by `#[derive(EventUnion)]`.
#[doc(hidden)]
pub fn mismatch(index: usize, first: &'static str, found: usize) -> InputError {
    InputError::Arity {
        param: index,
        name: first,
        expected: 1,
        found,
    }
}
