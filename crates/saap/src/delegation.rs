//! Delegation's events (seed 002's agent-in-the-loop, DESIGN §8): a step hands work to
//! another agent by returning an [`AgentInTheLoopRequestEvent`]; the engine starts that
//! agent's run (the child), and delivers the child's end to the parent as an
//! [`AgentInTheLoopResponseEvent`] (the child stopped) or an [`AgentInTheLoopExceptionEvent`]
//! (it failed or was cancelled). The parent takes them as any other event, e.g.
//! `Either<AgentInTheLoopResponseEvent, AgentInTheLoopExceptionEvent>`.
//!
//! The field names follow the Python implementation where it has them (`start_event`,
//! `share_thread_id`, `timeout_seconds`, `stop_event`, `exception_event`,
//! `request_event_id`); saap adds what a receiver needs to read a nested event without the
//! sender's classes (`*_event_name`) and says whom and how (`agent_class`, `detached`). Must
//! not start or watch runs: the engine does (`engine/delegation.rs`).
//!
//! ```
//! use saap::{AgentInTheLoopRequestEvent, UserMessageEvent};
//! let ask = AgentInTheLoopRequestEvent::new("Researcher", &UserMessageEvent::new("why?"))?;
//! assert_eq!(ask.start_event_name, "UserMessageEvent");
//! assert!(!ask.detached);
//! # Ok::<(), saap::event::PayloadError>(())
//! ```

use crate::event::{Event, PayloadError};
use serde::{Deserialize, Serialize};

/// Asks another agent (`agent_class`: its workflow's name) to run with `start_event`. Awaited
/// by default: the run waits for the child's end; [`AgentInTheLoopRequestEvent::detached`]
/// lets the child run on its own (it only joins the run's tree, and is cancelled with it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentInTheLoopRequestEvent {
    /// The agent to delegate to: the name of a workflow the engine knows
    /// ([`crate::Engine::delegate_to`]).
    #[serde(default)]
    pub agent_class: String,
    /// The type of the child's start event.
    #[serde(default)]
    pub start_event_name: String,
    /// The child's start event's fields.
    #[serde(default)]
    pub start_event: serde_json::Value,
    /// Whether the child runs on its own (its end is not delivered).
    #[serde(default)]
    pub detached: bool,
    /// The child's run joins the parent's thread (its `ThreadContext`), as in the Python
    /// implementation; `false` gives it a thread of its own.
    #[serde(default = "yes")]
    pub share_thread_id: bool,
    /// Kept for the Python implementation (display ids are not saap's).
    #[serde(default = "yes")]
    pub share_display_id: bool,
    /// Kept for the Python implementation; saap always gives the child a run of its own
    /// (its id is the request's event id).
    #[serde(default)]
    pub share_run_id: bool,
    /// How long the parent waits for an awaited child (seconds, from the request's
    /// completion). If the child has not ended by then, an [`AgentInTheLoopExceptionEvent`]
    /// (message "the child did not end within its timeout …", `http_status_code` 504) takes
    /// its end's place, the child's run is cancelled, and its end, when it comes, is not
    /// delivered. A deadline is a durable timer of the parent: it fires after a restart too.
    /// Not a number of seconds from 0 to `EngineOptions::max_timer_horizon`: the step fails
    /// (`SAAP-E019`). Ignored on a detached request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<f64>,
    /// The delegate's topic, as the Python implementation fills it in; saap leaves it empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub other_agent_topic: String,
    /// The type of stop event the parent needs from the child
    /// ([`AgentInTheLoopRequestEvent::expecting`]); a child that ends any other way is
    /// reported as an [`AgentInTheLoopExceptionEvent`] marked as an unmet obligation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_stop_event_name: Option<String>,
}

fn yes() -> bool {
    true
}

impl Default for AgentInTheLoopRequestEvent {
    fn default() -> Self {
        AgentInTheLoopRequestEvent {
            agent_class: String::new(),
            start_event_name: String::new(),
            start_event: serde_json::Value::Object(Default::default()),
            detached: false,
            share_thread_id: true,
            share_display_id: true,
            share_run_id: false,
            timeout_seconds: None,
            other_agent_topic: String::new(),
            expected_stop_event_name: None,
        }
    }
}

impl Event for AgentInTheLoopRequestEvent {
    const NAME: &'static str = "AgentInTheLoopRequestEvent";
    const PARENTS: &'static [&'static str] = &["ControlEvent", "DisplayEvent"];
    fn try_clone_event(&self) -> Option<Self> {
        Some(self.clone())
    }
}

impl AgentInTheLoopRequestEvent {
    /// Asks agent `agent_class` to run with `start` (awaited).
    pub fn new<T: Event>(agent_class: impl Into<String>, start: &T) -> Result<Self, PayloadError> {
        let start_event = serde_json::to_value(start).map_err(|e| PayloadError::Serialize {
            name: T::NAME.to_string(),
            message: e.to_string(),
        })?;
        Ok(AgentInTheLoopRequestEvent {
            agent_class: agent_class.into(),
            start_event_name: T::NAME.to_string(),
            start_event,
            ..AgentInTheLoopRequestEvent::default()
        })
    }

    /// The same request, with the child running on its own: the run does not wait for it
    /// and is not told of its end.
    pub fn detached(mut self) -> Self {
        self.detached = true;
        self
    }

    /// The same request, with the parent waiting at most `timeout` for the child's end
    /// (see [`AgentInTheLoopRequestEvent::timeout_seconds`]).
    pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
        self.timeout_seconds = Some(timeout.as_secs_f64());
        self
    }

    /// The same request, with the child in a thread of its own.
    pub fn own_thread(mut self) -> Self {
        self.share_thread_id = false;
        self
    }

    /// The same request, owed a typed result: the child must stop with a `T`. A child that
    /// stops with another event (or fails, or is cancelled) is reported as an
    /// [`AgentInTheLoopExceptionEvent`] whose `unmet_obligation` is `typed_result`, so the
    /// parent's failure path takes it instead of its success path choking on the wrong type.
    ///
    /// ```
    /// use saap::{AgentInTheLoopRequestEvent, StopEvent, UserMessageEvent};
    /// let ask = AgentInTheLoopRequestEvent::new("Researcher", &UserMessageEvent::new("why?"))?
    ///     .expecting::<StopEvent>();
    /// assert_eq!(ask.expected_stop_event_name.as_deref(), Some("StopEvent"));
    /// # Ok::<(), saap::event::PayloadError>(())
    /// ```
    pub fn expecting<T: Event>(mut self) -> Self {
        self.expected_stop_event_name = Some(T::NAME.to_string());
        self
    }
}

/// A child run stopped: `stop_event` is the event that ended it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AgentInTheLoopResponseEvent {
    /// The type of the child's stop event.
    #[serde(default)]
    pub stop_event_name: String,
    /// The child's stop event's fields.
    #[serde(default)]
    pub stop_event: serde_json::Value,
    /// The request this answers (its event id, hex).
    #[serde(default)]
    pub request_event_id: String,
    /// The agent that answered and its run.
    #[serde(default)]
    pub agent_class: String,
    #[serde(default)]
    pub child_run_id: String,
}

impl Event for AgentInTheLoopResponseEvent {
    const NAME: &'static str = "AgentInTheLoopResponseEvent";
    const PARENTS: &'static [&'static str] = &["ControlAndDisplayEvent"];
    fn try_clone_event(&self) -> Option<Self> {
        Some(self.clone())
    }
}

impl AgentInTheLoopResponseEvent {
    /// The child's stop event as a typed event (its fields read as `T`'s).
    pub fn stop_event<T: Event>(&self) -> Result<T, PayloadError> {
        T::deserialize(&self.stop_event).map_err(|e| PayloadError::Deserialize {
            name: T::NAME.to_string(),
            message: format!(
                "the child's stop event ({}) does not read as {}: {e}",
                self.stop_event_name,
                T::NAME
            ),
        })
    }
}

/// A child run failed, was cancelled, or could not be started: `exception_event` is the
/// event that ended it (or says why it never ran).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AgentInTheLoopExceptionEvent {
    /// The type of the child's exception event.
    #[serde(default)]
    pub exception_event_name: String,
    /// The child's exception event's fields (`message`, `http_status_code`, …).
    #[serde(default)]
    pub exception_event: serde_json::Value,
    /// The request this answers (its event id, hex).
    #[serde(default)]
    pub request_event_id: String,
    /// The agent that was asked and its run (empty when it could not be started).
    #[serde(default)]
    pub agent_class: String,
    #[serde(default)]
    pub child_run_id: String,
    /// Set when the child ended without what its request was owed: `typed_result` (the
    /// request was [`AgentInTheLoopRequestEvent::expecting`] a stop event type, and the
    /// child stopped with another one, failed or was cancelled; a child that stopped is
    /// reported here with its stop event in `exception_event`'s `stop_event_name` and
    /// `stop_event`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unmet_obligation: Option<String>,
}

impl Event for AgentInTheLoopExceptionEvent {
    const NAME: &'static str = "AgentInTheLoopExceptionEvent";
    const PARENTS: &'static [&'static str] = &["ControlAndDisplayEvent"];
    fn try_clone_event(&self) -> Option<Self> {
        Some(self.clone())
    }
}

impl AgentInTheLoopExceptionEvent {
    /// The child's error message (its exception event's `message`), or empty.
    pub fn message(&self) -> &str {
        self.exception_event
            .get("message")
            .and_then(|m| m.as_str())
            .unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{StopEvent, UserMessageEvent};

    #[test]
    fn a_request_reads_a_python_shaped_one_with_saap_defaults() {
        let python = serde_json::json!({
            "start_event": {"message": "hi"},
            "other_agent_topic": "agent.Researcher.x",
            "share_thread_id": false,
            "timeout_seconds": 30.0
        });
        let r: AgentInTheLoopRequestEvent = serde_json::from_value(python).expect("reads");
        assert!(!r.share_thread_id);
        assert!(r.share_display_id);
        assert!(!r.detached);
        assert_eq!(r.timeout_seconds, Some(30.0));
        assert_eq!(r.start_event["message"], "hi");
    }

    #[test]
    fn a_response_gives_the_childs_stop_event_typed() {
        let r = AgentInTheLoopResponseEvent {
            stop_event_name: "UserMessageEvent".into(),
            stop_event: serde_json::json!({"message": "done"}),
            ..Default::default()
        };
        assert_eq!(
            r.stop_event::<UserMessageEvent>().expect("typed").message,
            "done"
        );
        let wrong = AgentInTheLoopResponseEvent {
            stop_event: serde_json::json!(3),
            ..Default::default()
        };
        assert!(wrong.stop_event::<StopEvent>().is_err());
    }

    #[test]
    fn an_exception_gives_the_childs_message() {
        let e = AgentInTheLoopExceptionEvent {
            exception_event: serde_json::json!({"message": "boom", "http_status_code": 500}),
            ..Default::default()
        };
        assert_eq!(e.message(), "boom");
        assert_eq!(AgentInTheLoopExceptionEvent::default().message(), "");
    }
}
