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
//! A bare union enum is a required parameter that binds one event of any member type, and a
//! step result that returns one of them. Every other parameter kind takes a union too, and
//! binds events of all its member types, in arrival order (DESIGN §4.4):
//!
//! ```
//! # use saap::{EventUnion, FixedList, StepError, StopEvent, Workflow, step};
//! # use saap_dispatch::spec::ParamKind;
//! # #[derive(saap::Event, serde::Serialize, serde::Deserialize)]
//! # struct Approved { by: String }
//! # #[derive(saap::Event, serde::Serialize, serde::Deserialize)]
//! # struct Rejected { reason: String }
//! # #[derive(EventUnion)]
//! # enum Vote { Approved(Approved), Rejected(Rejected) }
//! #[step]
//! async fn tally(
//!     votes: FixedList<Vote, 3>,      // waits for 3 votes of either kind
//!     veto: Option<Vote>,             // never blocks
//!     log: Vec<Vote>,                 // all votes so far, in arrival order
//! ) -> Result<StopEvent, StepError> {
//!     let yes = votes.iter().filter(|v| matches!(v, Vote::Approved(_))).count();
//!     let _ = (yes, veto, log);
//!     Ok(StopEvent {})
//! }
//! let wf = Workflow::builder("Tally").step(tally_step()).build().expect("valid");
//! let p = &wf.spec().steps[0].params;
//! assert_eq!((p[0].kind, p[0].size), (ParamKind::FixedList, Some(3)));
//! assert_eq!(p[2].kind, ParamKind::List);
//! assert!(p.iter().all(|p| p.types == ["Approved", "Rejected"]));
//! ```
//!
//! A variant may hold another union; its members join the outer union's.

use crate::params::{BoundEvent, InputError, ParamDecl, ParamEvent};
use saap_dispatch::spec::ParamKind;

/// The declaration of a required union parameter (a bare union). Used by
/// `#[derive(EventUnion)]`.
#[doc(hidden)]
pub fn required<U: ParamEvent>() -> ParamDecl {
    crate::params::decl::<U>(ParamKind::Required, None)
}

/// The value of a required union parameter. Used by `#[derive(EventUnion)]`.
#[doc(hidden)]
pub fn extract_one<U: ParamEvent>(index: usize, bound: &[BoundEvent]) -> Result<U, InputError> {
    crate::params::extract_one(index, bound)
}

/// The error for a bound event of none of `U`'s member types. Used by
/// `#[derive(EventUnion)]`.
#[doc(hidden)]
pub fn not_a_member<U: ParamEvent>(index: usize, event: &BoundEvent) -> InputError {
    InputError::NotAMember {
        param: index,
        first: crate::params::main_name::<U>(),
        found: event.name.to_string(),
    }
}
