//! Long-lived resources injected into steps by type (DESIGN §3, §9): a model client and its
//! connection pool, a tool's database handle, anything a step needs that is expensive to make
//! and safe to share. A workflow holds one value per type, registered once
//! ([`crate::WorkflowBuilder::resource`] or [`crate::Workflow::with_resource`]); a step takes
//! it as a [`Res<T>`] parameter (or `ctx.resource::<T>()`), which shares the value, never
//! rebuilds it. Steps stay stateless: a resource is the same for every run and execution, so
//! it must not carry a run's state (keep that in events or RunContext).
//!
//! ```
//! use saap::testing::TestRunner;
//! use saap::{Agent, Required, Res, StepError, UserMessageEvent, agent};
//! # use std::time::Duration;
//!
//! /// Made once (say, a client with its connection pool), shared by every execution.
//! struct Lookup {
//!     prefix: String,
//! }
//!
//! #[derive(saap::Event, serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
//! #[event(parent = StopEvent)]
//! struct Answered {
//!     text: String,
//! }
//!
//! struct Answerer;
//!
//! #[agent]
//! impl Answerer {
//!     #[step]
//!     async fn answer(q: Required<UserMessageEvent>, lookup: Res<Lookup>) -> Result<Answered, StepError> {
//!         Ok(Answered { text: format!("{}{}", lookup.prefix, q.message) })
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let workflow = Answerer::workflow()?.with_resource(Lookup { prefix: "re: ".into() });
//! let run = TestRunner::in_memory(workflow).run(UserMessageEvent { message: "hi".into() }).await?;
//! let ended = run.wait_for_end(Duration::from_secs(5)).await?;
//! assert_eq!(ended.events_of::<Answered>(), [Answered { text: "re: hi".into() }]);
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! What this module must not do: make or configure a resource (the application does), or
//! know any engine type; a missing resource is found when the engine starts a run
//! ([`ResourceError`]), before any step of it runs.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// A resource of type `T`, shared with the workflow that holds it. Derefs to `T`.
pub struct Res<T: ?Sized>(Arc<T>);

impl<T: Any + Send + Sync> Res<T> {
    /// The resource if `any` holds a `T`.
    pub(crate) fn from_any(any: Arc<dyn Any + Send + Sync>) -> Option<Res<T>> {
        any.downcast::<T>().ok().map(Res)
    }

    /// The name of `T` as the user writes it, for errors.
    pub(crate) fn type_label() -> String {
        ResourceNeed::of::<T>().name()
    }
}

impl<T: ?Sized> Res<T> {
    /// The shared value (for handing to a task that outlives the step's borrow).
    pub fn arc(&self) -> &Arc<T> {
        &self.0
    }
}

impl<T: ?Sized> Clone for Res<T> {
    fn clone(&self) -> Res<T> {
        Res(Arc::clone(&self.0))
    }
}

impl<T: ?Sized> Deref for Res<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Res<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Res").field(&&*self.0).finish()
    }
}

/// Why a resource could not be found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceError {
    #[error(
        "SAAP-E009: step `{step}` takes the resource `{resource}`, but workflow `{workflow}` has none registered; register one value of it once, before starting the engine: `Workflow::builder(..).resource(value)` or `workflow.with_resource(value)`"
    )]
    Missing {
        workflow: String,
        step: String,
        resource: String,
    },
    #[error(
        "SAAP-E010: no resource `{resource}` is registered with this step's workflow; register one with `.resource(value)` on the workflow builder (or `workflow.with_resource(value)`), and declare the step's use with `Step::uses_resource` so that a missing one stops the run before it starts"
    )]
    NotHeld { resource: String },
}

impl ResourceError {
    pub fn code(&self) -> &'static str {
        match self {
            ResourceError::Missing { .. } => "SAAP-E009",
            ResourceError::NotHeld { .. } => "SAAP-E010",
        }
    }
}

/// A step's need for a resource type, declared by its signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceNeed {
    pub(crate) id: TypeId,
    /// The type's full name (`std::any::type_name`).
    type_name: &'static str,
}

impl ResourceNeed {
    pub(crate) fn of<T: Any>() -> ResourceNeed {
        ResourceNeed {
            id: TypeId::of::<T>(),
            type_name: std::any::type_name::<T>(),
        }
    }

    /// The type as its user writes it: every path left out (`Arc<Pool>`, not
    /// `alloc::sync::Arc<my_agent::Pool>`).
    pub(crate) fn name(&self) -> String {
        let mut out = String::with_capacity(self.type_name.len());
        // Where the path segment being copied began in `out`.
        let mut segment = 0;
        let mut chars = self.type_name.chars().peekable();
        while let Some(c) = chars.next() {
            if c == ':' && chars.peek() == Some(&':') {
                chars.next();
                out.truncate(segment);
            } else {
                out.push(c);
                if !(c.is_alphanumeric() || c == '_') {
                    segment = out.len();
                }
            }
        }
        out
    }
}

/// The resources a workflow holds: one value per type.
#[derive(Clone, Default)]
pub(crate) struct Resources {
    by_type: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl Resources {
    /// Holds `value` as the resource of its type, replacing an earlier one.
    pub(crate) fn insert<T: Any + Send + Sync>(&mut self, value: Arc<T>) {
        self.by_type.insert(TypeId::of::<T>(), value);
    }

    pub(crate) fn contains(&self, id: TypeId) -> bool {
        self.by_type.contains_key(&id)
    }

    /// The resource of type `T`, shared.
    pub(crate) fn get<T: Any + Send + Sync>(&self) -> Option<Res<T>> {
        Res::from_any(self.get_any(TypeId::of::<T>())?)
    }

    /// The resource of a type, shared and untyped (how a step's context reaches it through
    /// the engine, which knows no step's types).
    pub(crate) fn get_any(&self, id: TypeId) -> Option<Arc<dyn Any + Send + Sync>> {
        self.by_type.get(&id).map(Arc::clone)
    }

    pub(crate) fn len(&self) -> usize {
        self.by_type.len()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Pool(u32);

    #[test]
    fn a_resource_is_shared_not_copied() {
        let mut r = Resources::default();
        let pool = Arc::new(Pool(7));
        r.insert(Arc::clone(&pool));
        let a = r.get::<Pool>().unwrap();
        let b = a.clone();
        assert_eq!(*a, Pool(7));
        assert!(Arc::ptr_eq(a.arc(), &pool) && Arc::ptr_eq(b.arc(), &pool));
        assert!(r.get::<String>().is_none());
        assert!(r.contains(TypeId::of::<Pool>()));
    }

    #[test]
    fn a_later_value_replaces_the_earlier_one_of_its_type() {
        let mut r = Resources::default();
        r.insert(Arc::new(Pool(1)));
        r.insert(Arc::new(Pool(2)));
        assert_eq!(r.len(), 1);
        assert_eq!(*r.get::<Pool>().unwrap(), Pool(2));
    }

    #[test]
    fn a_resource_type_is_named_without_its_paths() {
        assert_eq!(ResourceNeed::of::<Pool>().name(), "Pool");
        assert_eq!(
            ResourceNeed::of::<Arc<std::collections::HashMap<String, Pool>>>().name(),
            "Arc<HashMap<String, Pool>>"
        );
    }

    #[test]
    fn the_missing_resource_error_says_how_to_register_it() {
        let e = ResourceError::Missing {
            workflow: "W".into(),
            step: "answer".into(),
            resource: ResourceNeed::of::<Pool>().name(),
        };
        let text = e.to_string();
        assert!(text.starts_with("SAAP-E009"), "{text}");
        assert!(
            text.contains("`Pool`") && text.contains(".resource(value)"),
            "{text}"
        );
    }
}
