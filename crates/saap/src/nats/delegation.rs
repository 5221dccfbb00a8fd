//! Delegation across agent classes on NATS (DESIGN §8): how a worker's engine reaches the
//! agents no engine of its process runs ([`crate::engine::RemoteAgents`]) — by publishing on
//! their class streams, where their own workers take it:
//!
//! - a child is started by its request: the `AgentInTheLoopRequestEvent` (its event id is the
//!   child's run id, so JetStream drops a re-publication) with the parent's run, class and
//!   depth, addressed to the child's run on the child's class stream;
//! - a child's end goes to its parent's class stream as the report event, addressed to the
//!   parent run (its owner's address when it has one);
//! - a cancel is a `RunCancelledEvent` on the child's class stream.
//!
//! What the receiving worker does with each is in `worker.rs` (it hands them to its engine);
//! every decision stays with the cores. Must not read or write a journal.

use super::owners::run_address;
use crate::backend::RunParent;
use crate::delegation::AgentInTheLoopRequestEvent;
use crate::engine::{RemoteAgents, RemoteChild};
use crate::event::{Event, RunCancelledEvent};
use futures_util::future::BoxFuture;
use saap_nats::SaapNats;
use saap_protocol::hierarchy::names::{CONTROL_AND_DISPLAY_EVENT, EXCEPTION_EVENT};
use saap_protocol::{EventEnvelope, Hierarchy};

/// [`RemoteAgents`] over a worker's NATS connection.
pub(super) struct NatsAgents {
    pub(super) nats: SaapNats,
    /// The worker's workflow's types, with the report and cancellation types added.
    pub(super) hierarchy: Hierarchy,
}

impl NatsAgents {
    pub(super) fn new(nats: SaapNats, workflow_types: &Hierarchy) -> NatsAgents {
        let mut hierarchy = workflow_types.clone();
        for (name, parent) in [
            (
                crate::delegation::AgentInTheLoopResponseEvent::NAME,
                CONTROL_AND_DISPLAY_EVENT,
            ),
            (
                crate::delegation::AgentInTheLoopExceptionEvent::NAME,
                CONTROL_AND_DISPLAY_EVENT,
            ),
            (AgentInTheLoopRequestEvent::NAME, "ControlEvent"),
            (RunCancelledEvent::NAME, EXCEPTION_EVENT),
        ] {
            if !hierarchy.contains(name)
                && let Err(e) = hierarchy.register(name, &[parent])
            {
                tracing::warn!(name, error = %e, "a delegation type cannot be registered");
            }
        }
        NatsAgents { nats, hierarchy }
    }
}

/// `name`'s envelope with id `id` and `fields` (an object; anything else adds none).
pub(crate) fn envelope(
    hierarchy: &Hierarchy,
    name: &str,
    id: saap_dispatch::EventId,
    fields: serde_json::Value,
) -> Result<EventEnvelope, String> {
    let mut env = EventEnvelope::new(hierarchy, name, id, saap_nats::ids::now_ns())
        .ok_or_else(|| format!("`{name}` has no lineage"))?;
    if let serde_json::Value::Object(fields) = fields {
        for (k, v) in fields {
            env = env.with_field(&k, v);
        }
    }
    Ok(env)
}

impl RemoteAgents for NatsAgents {
    fn start(&self, child: RemoteChild) -> BoxFuture<'static, Result<(), String>> {
        let nats = self.nats.clone();
        let hierarchy = self.hierarchy.clone();
        Box::pin(async move {
            let class = child.req.agent_class.clone();
            let run_id = child.request.to_string();
            let thread = child.thread_id.clone().unwrap_or_else(|| run_id.clone());
            let unreachable = |e: &dyn std::fmt::Display| {
                format!("agent class `{class}` cannot be reached on NATS: {e}")
            };
            let address = run_address(&nats, &class, &run_id, &thread)
                .await
                .map_err(|e| unreachable(&e))?;
            let mut fields = serde_json::to_value(&child.req).map_err(|e| unreachable(&e))?;
            fields["parent_run_id"] = child.parent.run_id.into();
            fields["parent_agent_class"] = child.parent.agent_class.into();
            fields["delegation_depth"] = child.depth.into();
            let env = envelope(
                &hierarchy,
                AgentInTheLoopRequestEvent::NAME,
                child.request,
                fields,
            )?;
            nats.publish_control(&address, &env)
                .await
                .map(|_| ())
                .map_err(|e| match e {
                    saap_nats::NatsError::NoStream { .. } => format!(
                        "no worker of agent class `{class}` has served on this NATS server (its class stream does not exist); start one (`<agent> run --engine nats://…`) or check the class name"
                    ),
                    e => unreachable(&e),
                })
        })
    }

    fn report(
        &self,
        to: RunParent,
        name: &'static str,
        fields: serde_json::Value,
    ) -> BoxFuture<'static, Result<(), String>> {
        let nats = self.nats.clone();
        let hierarchy = self.hierarchy.clone();
        Box::pin(async move {
            let address = run_address(&nats, &to.agent_class, &to.run_id, &to.run_id).await?;
            let env = envelope(&hierarchy, name, saap_nats::ids::fresh_event_id(), fields)?;
            nats.publish_control(&address, &env)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    }

    fn cancel(
        &self,
        class: String,
        run_id: String,
        reason: String,
    ) -> BoxFuture<'static, Result<(), String>> {
        let nats = self.nats.clone();
        let hierarchy = self.hierarchy.clone();
        Box::pin(async move {
            let address = run_address(&nats, &class, &run_id, &run_id).await?;
            let fields =
                serde_json::to_value(RunCancelledEvent::new(reason)).map_err(|e| e.to_string())?;
            let env = envelope(
                &hierarchy,
                RunCancelledEvent::NAME,
                saap_nats::ids::fresh_event_id(),
                fields,
            )?;
            nats.publish_control(&address, &env)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    }
}
