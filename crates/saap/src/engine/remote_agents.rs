//! What an engine needs of the agents that run in other processes ([`RemoteAgents`]; see
//! `remote` for what the engine does with them, `crate::nats` for the NATS workers' own).
//! Plain declarations: must not import the engine.

use crate::backend::RunParent;
use crate::delegation::AgentInTheLoopRequestEvent;
use futures_util::future::BoxFuture;
use saap_dispatch::EventId;

/// How an engine reaches the agents of classes no engine of its process runs.
pub trait RemoteAgents: Send + Sync + 'static {
    /// Starts child run `child.request` of class `child.req.agent_class` (or makes sure of
    /// it: a child that exists is linked to its parent again, one that ended reports its end
    /// again). `Err`: it cannot be reached (said for a person; the parent gets an exception).
    fn start(&self, child: RemoteChild) -> BoxFuture<'static, Result<(), String>>;
    /// Hands the report of a child's end (`name`: `AgentInTheLoopResponseEvent` or
    /// `AgentInTheLoopExceptionEvent`, `fields`: its fields) to the owner of parent run `to`.
    fn report(
        &self,
        to: RunParent,
        name: &'static str,
        fields: serde_json::Value,
    ) -> BoxFuture<'static, Result<(), String>>;
    /// Cancels run `run_id` of agent class `class`.
    fn cancel(
        &self,
        class: String,
        run_id: String,
        reason: String,
    ) -> BoxFuture<'static, Result<(), String>>;
}

/// A child to start on another process: its request (whose event id is the child's run id),
/// its parent, the thread it runs in (`None`: its own) and how deep it is.
#[derive(Debug, Clone)]
pub struct RemoteChild {
    pub request: EventId,
    pub req: AgentInTheLoopRequestEvent,
    pub parent: RunParent,
    pub thread_id: Option<String>,
    pub depth: u32,
}
