//! How a run asked for a child (DESIGN §8): an agent's `AgentInTheLoopRequestEvent` or a
//! process's `AgentWorkRequestEvent`, known per event type when the engine is made, so that
//! the child's end is told back in the form the request asked for. Must not start or
//! report children (`delegation.rs` does).

use crate::delegation::AgentInTheLoopRequestEvent;
use crate::event::Event;
use crate::process::AgentWorkRequestEvent;

/// How a run asked for a child, which says how the child's end is told back to it. A type
/// whose lineage holds one of the protocol's request names starts a child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Asked {
    /// An agent's `AgentInTheLoopRequestEvent`: the end comes back as an
    /// `AgentInTheLoopResponseEvent` or `AgentInTheLoopExceptionEvent`.
    InTheLoop,
    /// A process's `AgentWorkRequestEvent`: the end comes back as an `AgentWorkEvent`.
    Work,
}

impl Asked {
    /// How a request of type `name` (with its `lineage`) asks, if it delegates at all.
    pub(super) fn by<S: AsRef<str>>(name: &str, lineage: &[S]) -> Option<Asked> {
        let has = |wanted: &str| name == wanted || lineage.iter().any(|n| n.as_ref() == wanted);
        if has(AgentWorkRequestEvent::NAME) {
            Some(Asked::Work)
        } else if has(AgentInTheLoopRequestEvent::NAME) {
            Some(Asked::InTheLoop)
        } else {
            None
        }
    }
}
