//! Resuming a run on NATS (DESIGN §8, budgets): the message `<agent> resume RUN --engine
//! nats://…` publishes on the class stream for the run, and the run's owner applies as a
//! grant ([`crate::Engine::resume_seen`]). Like any event of a run it reaches the owner
//! through the class's queue (another worker forwards it; a dead owner's run is taken over
//! first), but it is never logged as an event: what the journal keeps is the grant.
//!
//! The message says how many grants the run had when its sender saw it paused, so a message
//! delivered twice, or two people resuming one pause, grant once. Must not decide anything
//! about the budget itself: the core does, in the owner's engine.

use crate::engine::Raise;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The type name of the resume message on the class stream (saap's own; a child of
/// `ControlEvent`, never dispatched to a step).
pub const RUN_RESUME_REQUEST_EVENT: &str = "RunResumeRequestEvent";

/// What a resume message carries: the raise, in plain JSON fields, and the pause it resumes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResumeRequest {
    /// This many more executions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executions: Option<u32>,
    /// This much more wall time from when it is applied, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_ms: Option<u64>,
    /// This many more model tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// This much more model cost, in the price table's currency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// The grants the run had when the sender saw it paused.
    pub seen_grants: u32,
}

impl ResumeRequest {
    /// The request for `raise` of the pause seen after `seen_grants` grants.
    pub fn new(raise: Raise, seen_grants: u32) -> ResumeRequest {
        ResumeRequest {
            executions: raise.executions,
            time_ms: raise
                .time
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            tokens: raise.tokens,
            cost: raise.cost,
            seen_grants,
        }
    }

    /// The raise it asks for.
    pub fn raise(&self) -> Raise {
        Raise {
            executions: self.executions,
            time: self.time_ms.map(Duration::from_millis),
            tokens: self.tokens,
            cost: self.cost,
        }
    }

    /// Reads a resume message (an event envelope: its fields beside `_event_name` and the
    /// other envelope keys, which are ignored).
    pub fn from_message(bytes: &[u8]) -> Result<ResumeRequest, String> {
        serde_json::from_slice(bytes).map_err(|e| {
            format!("a {RUN_RESUME_REQUEST_EVENT} that cannot be read ({e}): it needs `seen_grants` and may give `executions`, `time_ms`, `tokens`, `cost`")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_carries_its_raise_and_the_pause_it_saw() {
        let raise = Raise {
            executions: Some(3),
            time: Some(Duration::from_secs(90)),
            tokens: None,
            cost: Some(2.5),
        };
        let req = ResumeRequest::new(raise, 2);
        let mut json = serde_json::to_value(&req).unwrap_or_default();
        // As it travels: inside an envelope.
        json["_event_name"] = RUN_RESUME_REQUEST_EVENT.into();
        json["event_id"] = "abc".into();
        let bytes = serde_json::to_vec(&json).unwrap_or_default();
        let back = ResumeRequest::from_message(&bytes).expect("read back");
        assert_eq!(back, req);
        assert_eq!(back.raise(), raise);
        let err = ResumeRequest::from_message(b"{\"executions\": 1}").expect_err("no seen_grants");
        assert!(err.contains("seen_grants"), "{err}");
    }
}
