//! Delegation to agents that run in other processes (DESIGN §8; the NATS engine: a child on
//! another agent class's workers). The engine does what it does for a child in this process
//! (see `delegation`), but through [`RemoteAgents`], which a distributed engine provides: a
//! child is started by sending its request to its class, its end comes back as a report the
//! parent's owner hands to [`crate::Engine::child_report_json`], and a cancel is sent to the
//! child's class.
//!
//! Each side can make sure again at any time, so the windows between the two journals close:
//! a request sent again finds the child's run (it is the request's id) and re-links it, or
//! reports its end again; a report delivered twice is refused by the parent's core. Whether
//! the end is what the request is owed (`expecting`) is decided by the parent, which has the
//! request, before it journals the report. Must not publish anything itself, nor decide what
//! the core decides.

use super::apply::Input;
use super::error::EngineError;
pub use super::remote_agents::{RemoteAgents, RemoteChild};
use super::shared::Shared;
use super::slot::{ParentEngine, ParentLink};
use super::{Engine, delegation::Report};
use crate::backend::RunParent;
use crate::delegation::{
    AgentInTheLoopExceptionEvent, AgentInTheLoopRequestEvent, AgentInTheLoopResponseEvent,
};
use crate::event::{Event, Payload};
use saap_dispatch::EventId;
use saap_dispatch::run::ChildState;
use serde::Deserialize;
use std::sync::Arc;

/// A delegation request as it travels to the child's class: the request's fields and the
/// parent's (`parent_run_id`, `parent_agent_class`, `delegation_depth`).
#[derive(Deserialize)]
struct DelegatedRequest {
    #[serde(flatten)]
    pub req: AgentInTheLoopRequestEvent,
    pub parent_run_id: String,
    pub parent_agent_class: String,
    #[serde(default = "one")]
    pub delegation_depth: u32,
}

fn one() -> u32 {
    1
}

impl Shared {
    /// The remote agents, if this engine has them.
    pub(super) fn remote(&self) -> Option<&Arc<dyn RemoteAgents>> {
        self.remote.get()
    }

    /// A link to parent `by` on another process.
    fn remote_link(by: &RunParent, depth: u32) -> ParentLink {
        ParentLink {
            engine: ParentEngine::Remote {
                class: by.agent_class.as_str().into(),
            },
            run_id: by.run_id.as_str().into(),
            depth,
            // The parent decides what its request is owed.
            expects: None,
        }
    }

    /// After a run was adopted from its journal: a child of a parent on another process is
    /// linked to it again (the link is not journaled; the parent is) and, when it has ended,
    /// reports its end again (the report may not have been sent); a parent asks again for
    /// the children it waits for on other processes.
    pub(super) async fn relink_remote(
        self: &Arc<Self>,
        slot: &Arc<super::slot::RunSlot>,
        parent: Option<RunParent>,
    ) {
        if self.remote().is_none() {
            return;
        }
        let report = match parent.filter(|p| self.delegate(&p.agent_class).is_none()) {
            Some(by) => {
                let mut st = slot.lock();
                st.parent = Some(Box::new(Shared::remote_link(&by, 1)));
                st.delegated_by = Some(Box::new(by.clone()));
                self.report(slot, &st, None).map(|r| (by, r))
            }
            None => None,
        };
        if let Some((by, report)) = report {
            self.report_remote(by, report).await;
        }
        let waits = slot
            .lock()
            .run
            .children()
            .iter()
            .any(|c| c.state == ChildState::Awaited);
        if waits {
            let shared = self.clone();
            let run_id = slot.run_id().to_string();
            tokio::spawn(async move { shared.ensure_children(&run_id, true).await });
        }
    }

    /// Sends `report` of a child's end to parent `to` on another process.
    pub(super) async fn report_remote(&self, to: RunParent, report: Report) {
        let Some(remote) = self.remote().cloned() else {
            return;
        };
        let fields = match report.payload.try_json() {
            Ok(v) => v.clone(),
            Err(e) => {
                tracing::warn!(error = %e, "a child's end cannot be written as JSON");
                return;
            }
        };
        let parent = to.run_id.clone();
        if let Err(e) = remote.report(to, report.name, fields).await {
            tracing::warn!(parent, error = %e, "a child's end could not be reported to its parent; it is reported again when the parent makes sure of its children");
        }
    }
}

impl Engine {
    /// Lets this engine's runs delegate to agent classes no engine of this process runs,
    /// through `remote` (a distributed engine's workers). Returns false if it had some.
    pub fn set_remote_agents(&self, remote: Arc<dyn RemoteAgents>) -> bool {
        self.shared.remote.set(remote).is_ok()
    }

    /// In the child's class: starts (or makes sure of) the child run `run_id` a delegation
    /// request in wire JSON asks for (`bytes`: its envelope, whose event id is `run_id`), in
    /// thread `thread_id`, linked to its parent on another process; a child that ended
    /// already reports its end again. Returns once the child's start is durable.
    pub async fn start_delegated_json(
        &self,
        run_id: &str,
        thread_id: &str,
        bytes: &[u8],
    ) -> Result<(), EngineError> {
        let shared = &self.shared;
        if bytes.len() > shared.opts.max_event_bytes {
            return Err(EngineError::EventTooLarge {
                name: AgentInTheLoopRequestEvent::NAME.into(),
                size: bytes.len(),
                max: shared.opts.max_event_bytes,
            });
        }
        let d: DelegatedRequest = serde_json::from_slice(bytes).map_err(|e| {
            EngineError::BadDelegation(format!(
                "a delegation request that cannot be read ({e}); it needs the request's fields and `parent_run_id`, `parent_agent_class`"
            ))
        })?;
        let request: EventId = run_id.parse().map_err(|_| EngineError::UnknownRun {
            run_id: run_id.to_string(),
        })?;
        let by = RunParent {
            run_id: d.parent_run_id,
            agent_class: d.parent_agent_class,
        };
        let link = (!d.req.detached).then(|| Shared::remote_link(&by, d.delegation_depth));
        let awaited = link.is_some();
        let thread: Option<Arc<str>> = Some(thread_id.into());
        let report = shared
            .adopt_child(request, link, by.clone(), thread, &d.req)
            .await?;
        if let Some(report) = report
            && awaited
        {
            shared.report_remote(by, report).await;
        }
        Ok(())
    }

    /// In the parent's class: a child's report in wire JSON (`bytes`) for run `run_id`, if
    /// it is one — an `AgentInTheLoopResponseEvent` or `…ExceptionEvent` whose
    /// `request_event_id` names an awaited child of the run — handed to the core as that
    /// child's end, after the parent decides whether it is what its request is owed.
    /// `Ok(false)`: not a report of a child of this run (an ordinary event).
    pub async fn child_report_json(
        &self,
        run_id: &str,
        name: &str,
        bytes: &[u8],
    ) -> Result<bool, EngineError> {
        let shared = &self.shared;
        if bytes.len() > shared.opts.max_event_bytes {
            return Ok(false);
        }
        let Ok(slot) = shared.slot(run_id) else {
            return Ok(false);
        };
        let Ok(fields) = serde_json::from_slice::<serde_json::Value>(bytes) else {
            shared.release(slot);
            return Ok(false);
        };
        let request_id = fields["request_event_id"].as_str().unwrap_or_default();
        let found = {
            let st = slot.lock();
            st.run
                .children()
                .iter()
                .enumerate()
                .find(|(_, c)| c.request.to_string() == request_id)
                .map(|(i, c)| (i as u32, c.state, c.request_seq))
                .map(|(i, state, seq)| {
                    let expected = shared
                        .request_of(&st, seq)
                        .and_then(|r| r.expected_stop_event_name);
                    (i, state, expected, shared.asked(&st, i))
                })
        };
        let Some((child, state, expected, asked)) = found else {
            shared.release(slot);
            return Ok(false);
        };
        if state != ChildState::Awaited {
            // Delivered already, timed out, abandoned or detached: the first end counts.
            shared.release(slot);
            return Ok(true);
        }
        let report = owed_report(name, fields, expected.as_deref());
        let delivered = match report.map(|r| r.in_form_asked(asked)) {
            Ok(report) => match report.payload.check_json() {
                Ok(size) => shared.incoming(report.name, report.payload, size, None),
                Err(e) => Err(e.into()),
            },
            Err(e) => Err(e),
        };
        let delivered = match delivered {
            Ok(ev) => shared.submit(&slot, Input::ChildEnded { child, ev }).await,
            Err(e) => Err(e),
        };
        shared.release(slot);
        delivered.map(|_| true)
    }
}

/// A child's plain report, as its parent's request is owed it (`expected`: the stop event
/// type of `expecting`): a stop of another type becomes an exception marked `typed_result`
/// (the stop event kept in it), an exception is marked with what was owed.
fn owed_report(
    name: &str,
    fields: serde_json::Value,
    expected: Option<&str>,
) -> Result<Report, EngineError> {
    let unreadable = |e: serde_json::Error| {
        EngineError::BadDelegation(format!("a child's report that cannot be read: {e}"))
    };
    if name == AgentInTheLoopResponseEvent::NAME {
        let r: AgentInTheLoopResponseEvent = serde_json::from_value(fields).map_err(unreadable)?;
        return Ok(match expected {
            Some(t) if t != r.stop_event_name => Report {
                name: AgentInTheLoopExceptionEvent::NAME,
                payload: Payload::typed(AgentInTheLoopExceptionEvent {
                    exception_event_name: "ExceptionEvent".into(),
                    exception_event: serde_json::json!({
                        "message": format!(
                            "unmet obligation: the child stopped with `{}`, not the `{t}` its request expected",
                            r.stop_event_name
                        ),
                        "stop_event_name": r.stop_event_name,
                        "stop_event": r.stop_event,
                    }),
                    request_event_id: r.request_event_id,
                    agent_class: r.agent_class,
                    child_run_id: r.child_run_id,
                    unmet_obligation: super::delegation::owed_kind(expected),
                }),
            },
            _ => Report {
                name: AgentInTheLoopResponseEvent::NAME,
                payload: Payload::typed(r),
            },
        });
    }
    let mut e: AgentInTheLoopExceptionEvent = serde_json::from_value(fields).map_err(unreadable)?;
    e.unmet_obligation = super::delegation::owed_kind(expected);
    Ok(Report {
        name: AgentInTheLoopExceptionEvent::NAME,
        payload: Payload::typed(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(stop: &str) -> serde_json::Value {
        serde_json::to_value(AgentInTheLoopResponseEvent {
            stop_event_name: stop.into(),
            stop_event: serde_json::json!({"text": "42"}),
            request_event_id: "r".into(),
            agent_class: "Researcher".into(),
            child_run_id: "r".into(),
        })
        .unwrap_or_default()
    }

    #[test]
    fn a_parent_decides_whether_a_remote_child_gave_what_it_was_owed() {
        let kept = owed_report(
            AgentInTheLoopResponseEvent::NAME,
            response("Answer"),
            Some("Answer"),
        )
        .expect("read");
        assert_eq!(kept.name, AgentInTheLoopResponseEvent::NAME);
        let plain =
            owed_report(AgentInTheLoopResponseEvent::NAME, response("Other"), None).expect("read");
        assert_eq!(plain.name, AgentInTheLoopResponseEvent::NAME);
        // Another stop type than the one owed: an exception marked typed_result, the stop
        // event kept in it.
        let unmet = owed_report(
            AgentInTheLoopResponseEvent::NAME,
            response("Other"),
            Some("Answer"),
        )
        .expect("read");
        assert_eq!(unmet.name, AgentInTheLoopExceptionEvent::NAME);
        let json = unmet.payload.try_json().expect("json").clone();
        assert_eq!(json["unmet_obligation"], "typed_result");
        assert_eq!(json["exception_event"]["stop_event_name"], "Other");
        assert_eq!(json["exception_event"]["stop_event"]["text"], "42");
        // An exception is marked with what was owed.
        let failed = serde_json::json!({
            "exception_event_name": "ExceptionEvent",
            "exception_event": {"message": "no sources"},
            "request_event_id": "r",
        });
        let e =
            owed_report(AgentInTheLoopExceptionEvent::NAME, failed, Some("Answer")).expect("read");
        let json = e.payload.try_json().expect("json").clone();
        assert_eq!(json["unmet_obligation"], "typed_result");
        assert!(
            owed_report(
                AgentInTheLoopResponseEvent::NAME,
                serde_json::json!([1]),
                None
            )
            .is_err()
        );
    }
}
