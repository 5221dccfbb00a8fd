//! Processes' events (seed 002's `ProcessDispatcher`, DESIGN §8): a process is a workflow
//! whose steps take [`WorkEvent`]s — work a human, a program or an agent finished — and
//! return work requests that hand the next piece to one of them. Its run (the seed's
//! walkthrough) begins with a [`ProcessStartEvent`] (or a subtype carrying the process's
//! input) and ends with a [`ProcessStopEvent`] or a [`ProcessExceptionEvent`].
//!
//! A process is plain saap, on the machinery agents use:
//! - an [`AgentWorkRequestEvent`] starts a child run of an agent exactly as an
//!   [`AgentInTheLoopRequestEvent`] does (awaited or detached, a deadline, `expecting`, the
//!   tree, cancellation), and the child's end comes back as one [`AgentWorkEvent`] (it
//!   stopped, or it failed, was cancelled or timed out);
//! - a [`HumanWorkRequestEvent`] or a [`ProgramWorkRequestEvent`] is a request the run
//!   shows and waits on: the person's [`HumanWorkEvent`] or the program's
//!   [`ProgramWorkEvent`] is sent to the run like any event (`send RUN HumanWorkEvent …`,
//!   [`crate::Engine::send`]), naming the request it answers; a deadline is a
//!   [`crate::Delayed`] output beside the request, as for any wait.
//!
//! The seed names these types but not their fields; the fields here are saap's (the
//! Python hierarchy's names and parents are kept, so a Python consumer reads each as its
//! class). Must not start or watch runs: the engine does.
//!
//! ```
//! use saap::process::{AgentWorkRequestEvent, HumanWorkRequestEvent};
//! use saap::UserMessageEvent;
//! let ask = HumanWorkRequestEvent::new("hr", "Fill in the new hire's details")
//!     .form(serde_json::json!({"fields": ["name", "start_date"]}));
//! assert_eq!(ask.assignee, "hr");
//! let delegate = AgentWorkRequestEvent::new("Writer", &UserMessageEvent::new("a welcome note"))?;
//! assert_eq!(delegate.0.agent_class, "Writer");
//! # Ok::<(), saap::event::PayloadError>(())
//! ```

use crate::delegation::{
    AgentInTheLoopExceptionEvent, AgentInTheLoopRequestEvent, AgentInTheLoopResponseEvent,
};
use crate::event::{Event, PayloadError};
use serde::{Deserialize, Serialize, de::DeserializeOwned};

macro_rules! process_event {
    ($name:ident, $parent:literal) => {
        impl Event for $name {
            const NAME: &'static str = stringify!($name);
            const PARENTS: &'static [&'static str] = &[$parent];
            fn try_clone_event(&self) -> Option<Self> {
                Some(self.clone())
            }
        }
    };
}

/// Begins a walkthrough (a process's run). A process usually takes a subtype of it that
/// carries its input (`#[event(parent = ProcessStartEvent)]`); this one carries any JSON.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ProcessStartEvent {
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub input: serde_json::Value,
}
process_event!(ProcessStartEvent, "WorkEvent");

/// Ends a walkthrough: the process is done (`result`: what it produced, if anything).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ProcessStopEvent {
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub result: serde_json::Value,
}
process_event!(ProcessStopEvent, "WorkEvent");

/// Ends a walkthrough with an error, as an `ExceptionEvent` ends an agent's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessExceptionEvent {
    pub message: String,
    #[serde(default = "server_error")]
    pub http_status_code: u16,
}
process_event!(ProcessExceptionEvent, "WorkEvent");

fn server_error() -> u16 {
    500
}

impl ProcessExceptionEvent {
    /// A failure with `message` (status 500).
    pub fn new(message: impl Into<String>) -> Self {
        ProcessExceptionEvent {
            message: message.into(),
            http_status_code: server_error(),
        }
    }
}

/// Asks a person for work: who (`assignee`: a user, a role, a queue — whatever the
/// people's side routes by), what (`title`, `instructions`) and the form to fill in
/// (`form`: its fields, a JSON Schema, or whatever the front end renders). Answered by a
/// [`HumanWorkEvent`] naming this request's event id.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HumanWorkRequestEvent {
    #[serde(default)]
    pub assignee: String,
    #[serde(default)]
    pub title: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instructions: String,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub form: serde_json::Value,
}
process_event!(HumanWorkRequestEvent, "WorkRequestEvent");

impl HumanWorkRequestEvent {
    /// Asks `assignee` for the work `title` says.
    pub fn new(assignee: impl Into<String>, title: impl Into<String>) -> Self {
        HumanWorkRequestEvent {
            assignee: assignee.into(),
            title: title.into(),
            ..HumanWorkRequestEvent::default()
        }
    }

    /// The same request with instructions for the person.
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = text.into();
        self
    }

    /// The same request with the form to fill in.
    pub fn form(mut self, form: serde_json::Value) -> Self {
        self.form = form;
        self
    }
}

/// A person's answer to a [`HumanWorkRequestEvent`]: the form as they submitted it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HumanWorkEvent {
    /// The request answered (its event id, hex, as `show` lists it).
    #[serde(default)]
    pub request_event_id: String,
    /// Who submitted it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub submitted_by: String,
    #[serde(default)]
    pub form: serde_json::Value,
}
process_event!(HumanWorkEvent, "WorkEvent");

impl HumanWorkEvent {
    /// The submitted form read as a `T`.
    pub fn form_as<T: DeserializeOwned>(&self) -> Result<T, PayloadError> {
        read_as(&self.form, Self::NAME, "form")
    }
}

/// Asks a program for work: which (`program`, as the programs' side routes by) and its
/// input. Answered by a [`ProgramWorkEvent`] naming this request's event id.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ProgramWorkRequestEvent {
    #[serde(default)]
    pub program: String,
    #[serde(default)]
    pub input: serde_json::Value,
}
process_event!(ProgramWorkRequestEvent, "WorkRequestEvent");

impl ProgramWorkRequestEvent {
    /// Asks `program` to work on `input`.
    pub fn new<T: Serialize>(program: impl Into<String>, input: &T) -> Result<Self, PayloadError> {
        Ok(ProgramWorkRequestEvent {
            program: program.into(),
            input: serde_json::to_value(input).map_err(|e| PayloadError::Serialize {
                name: Self::NAME.to_string(),
                message: e.to_string(),
            })?,
        })
    }
}

/// A program's answer to a [`ProgramWorkRequestEvent`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ProgramWorkEvent {
    /// The request answered (its event id, hex).
    #[serde(default)]
    pub request_event_id: String,
    #[serde(default)]
    pub program: String,
    #[serde(default)]
    pub output: serde_json::Value,
}
process_event!(ProgramWorkEvent, "WorkEvent");

impl ProgramWorkEvent {
    /// The program's output read as a `T`.
    pub fn output_as<T: DeserializeOwned>(&self) -> Result<T, PayloadError> {
        read_as(&self.output, Self::NAME, "output")
    }
}

/// Hands work to an agent: the same request as [`AgentInTheLoopRequestEvent`] (its fields
/// on the wire, its builders here), answered by an [`AgentWorkEvent`] instead of the
/// agent-in-the-loop pair.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AgentWorkRequestEvent(pub AgentInTheLoopRequestEvent);
process_event!(AgentWorkRequestEvent, "WorkRequestEvent");

impl AgentWorkRequestEvent {
    /// Asks agent `agent_class` to run with `start` (awaited).
    pub fn new<T: Event>(agent_class: impl Into<String>, start: &T) -> Result<Self, PayloadError> {
        AgentInTheLoopRequestEvent::new(agent_class, start).map(AgentWorkRequestEvent)
    }

    /// See [`AgentInTheLoopRequestEvent::detached`].
    pub fn detached(self) -> Self {
        AgentWorkRequestEvent(self.0.detached())
    }

    /// See [`AgentInTheLoopRequestEvent::timeout`]: a child still running then is
    /// cancelled and answered by an [`AgentWorkEvent`] that failed (504).
    pub fn timeout(self, timeout: std::time::Duration) -> Self {
        AgentWorkRequestEvent(self.0.timeout(timeout))
    }

    /// See [`AgentInTheLoopRequestEvent::own_thread`].
    pub fn own_thread(self) -> Self {
        AgentWorkRequestEvent(self.0.own_thread())
    }

    /// See [`AgentInTheLoopRequestEvent::expecting`].
    pub fn expecting<T: Event>(self) -> Self {
        AgentWorkRequestEvent(self.0.expecting::<T>())
    }
}

/// An agent's work ended: it stopped (`stop_event_name` set), or it failed, was cancelled,
/// timed out or could not be started (`exception_event_name` set; `message()` says why).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AgentWorkEvent {
    /// The request answered (its event id, hex) — also the child's run id.
    #[serde(default)]
    pub request_event_id: String,
    #[serde(default)]
    pub agent_class: String,
    #[serde(default)]
    pub child_run_id: String,
    /// The type of the child's stop event; empty when it did not stop.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stop_event_name: String,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub stop_event: serde_json::Value,
    /// The type of the child's exception event; empty when it stopped.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub exception_event_name: String,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub exception_event: serde_json::Value,
    /// As [`AgentInTheLoopExceptionEvent::unmet_obligation`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unmet_obligation: Option<String>,
}
process_event!(AgentWorkEvent, "WorkEvent");

impl AgentWorkEvent {
    /// Whether the agent stopped (did its work); `false` when it failed, was cancelled,
    /// timed out or was never started.
    pub fn stopped(&self) -> bool {
        !self.stop_event_name.is_empty() && self.exception_event_name.is_empty()
    }

    /// The agent's stop event as a `T`; an error when it did not stop.
    pub fn stop_event<T: Event>(&self) -> Result<T, PayloadError> {
        if !self.stopped() {
            return Err(PayloadError::Deserialize {
                name: T::NAME.to_string(),
                message: format!("the agent's work did not stop: {}", self.message()),
            });
        }
        read_as(&self.stop_event, T::NAME, "stop_event")
    }

    /// Why the work did not stop (its exception event's `message`), or empty.
    pub fn message(&self) -> &str {
        self.exception_event
            .get("message")
            .and_then(|m| m.as_str())
            .unwrap_or("")
    }
}

impl From<AgentInTheLoopResponseEvent> for AgentWorkEvent {
    fn from(r: AgentInTheLoopResponseEvent) -> Self {
        AgentWorkEvent {
            request_event_id: r.request_event_id,
            agent_class: r.agent_class,
            child_run_id: r.child_run_id,
            stop_event_name: r.stop_event_name,
            stop_event: r.stop_event,
            ..AgentWorkEvent::default()
        }
    }
}

impl From<AgentInTheLoopExceptionEvent> for AgentWorkEvent {
    fn from(e: AgentInTheLoopExceptionEvent) -> Self {
        AgentWorkEvent {
            request_event_id: e.request_event_id,
            agent_class: e.agent_class,
            child_run_id: e.child_run_id,
            exception_event_name: e.exception_event_name,
            exception_event: e.exception_event,
            unmet_obligation: e.unmet_obligation,
            ..AgentWorkEvent::default()
        }
    }
}

/// Each kind of answer and the kind of request it answers.
pub const ANSWERS: [(&str, &str); 2] = [
    (HumanWorkEvent::NAME, HumanWorkRequestEvent::NAME),
    (ProgramWorkEvent::NAME, ProgramWorkRequestEvent::NAME),
];

/// A person's or a program's work request of a run that no answer took yet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpenWorkRequest {
    /// Its place in the run's log.
    pub seq: u32,
    /// What an answer names in `request_event_id`.
    pub request_event_id: String,
    /// Its type.
    pub event: String,
    /// The type that answers it (`HumanWorkEvent` or `ProgramWorkEvent`).
    pub answer: &'static str,
    /// Whom it asks: the person's `assignee` or the `program`.
    pub asks: String,
    /// The person's `title`, empty for a program.
    pub title: String,
}

/// The work requests of `run` that no answer took yet (`fields`: a logged event's fields
/// by sequence number), in log order. An answer takes the request its `request_event_id`
/// names when it is of the kind that answers it.
pub fn open_work_requests(
    run: &saap_dispatch::Run,
    fields: impl Fn(u32) -> Option<serde_json::Value>,
) -> Vec<OpenWorkRequest> {
    let h = &run.spec().hierarchy;
    let kind_of = |seq: usize| {
        let name = run.type_name(run.log()[seq].ty);
        ANSWERS.iter().find_map(|(answer, request)| {
            if h.is_subtype_of(name, request) {
                Some((false, *answer, *request))
            } else if h.is_subtype_of(name, answer) {
                Some((true, *answer, *request))
            } else {
                None
            }
        })
    };
    let text = |v: &serde_json::Value, key: &str| v[key].as_str().unwrap_or_default().to_string();
    let mut answered = std::collections::HashSet::new();
    let mut requests = Vec::new();
    for seq in 0..run.log().len() {
        match kind_of(seq) {
            Some((true, answer, _)) => {
                if let Some(f) = fields(seq as u32) {
                    answered.insert((answer, text(&f, "request_event_id")));
                }
            }
            Some((false, answer, _)) => requests.push((seq, answer)),
            None => {}
        }
    }
    requests
        .into_iter()
        .filter_map(|(seq, answer)| {
            let id = run.log()[seq].id.to_string();
            if answered.contains(&(answer, id.clone())) {
                return None;
            }
            let f = fields(seq as u32).unwrap_or_default();
            let asks = match text(&f, "assignee") {
                a if a.is_empty() => text(&f, "program"),
                a => a,
            };
            Some(OpenWorkRequest {
                seq: seq as u32,
                request_event_id: id,
                event: run.type_name(run.log()[seq].ty).to_string(),
                answer,
                title: text(&f, "title"),
                asks,
            })
        })
        .collect()
}

/// Whether an event of type `name` with `fields`, sent to `run`, may be taken: `Ok` for an
/// event that answers no work request (any other event) and for an answer naming an open
/// request of its kind; `Err` (what is wrong and what the run does ask) for an answer that
/// names no request, one that is not of its kind in this run, or one answered already.
/// `logged`: a logged event's fields by sequence number.
pub fn check_answer(
    run: &saap_dispatch::Run,
    logged: impl Fn(u32) -> Option<serde_json::Value>,
    name: &str,
    fields: &serde_json::Value,
) -> Result<(), String> {
    let h = &run.spec().hierarchy;
    let Some((answer, request)) = ANSWERS
        .into_iter()
        .find(|(answer, _)| h.is_subtype_of(name, answer))
    else {
        return Ok(());
    };
    let wanted = fields["request_event_id"].as_str().unwrap_or_default();
    let open: Vec<String> = open_work_requests(run, logged)
        .into_iter()
        .filter(|r| r.answer == answer)
        .map(|r| r.request_event_id)
        .collect();
    let open_said = if open.is_empty() {
        format!("it has no {request} waiting for an answer")
    } else {
        format!("its open {request}s: {}", open.join(", "))
    };
    if wanted.is_empty() {
        return Err(format!(
            "`{name}` names no request in `request_event_id`; set it to the id of the {request} it answers ({open_said})"
        ));
    }
    let asked = run
        .log()
        .iter()
        .any(|e| e.id.to_string() == wanted && h.is_subtype_of(run.type_name(e.ty), request));
    if !asked {
        let shown: String = wanted.chars().take(128).collect();
        return Err(format!(
            "`{name}` answers request {shown}, which is not a {request} of this run ({open_said})"
        ));
    }
    if !open.iter().any(|id| id == wanted) {
        return Err(format!(
            "request {wanted} was answered already; a second `{name}` is not taken ({open_said})"
        ));
    }
    Ok(())
}

/// [`open_work_requests`] as lines for a person: whom each asks, and how to answer it.
pub fn open_work_requests_text(open: &[OpenWorkRequest]) -> String {
    let mut out = String::new();
    for r in open {
        let title = if r.title.is_empty() {
            String::new()
        } else {
            format!(": {}", r.title)
        };
        out.push_str(&format!(
            "work request #{} {} asks `{}`{title} — answer with a {} whose request_event_id is {}\n",
            r.seq, r.event, r.asks, r.answer, r.request_event_id
        ));
    }
    out
}

fn read_as<T: DeserializeOwned>(
    value: &serde_json::Value,
    event: &str,
    field: &str,
) -> Result<T, PayloadError> {
    T::deserialize(value).map_err(|e| PayloadError::Deserialize {
        name: event.to_string(),
        message: format!("its `{field}` does not read as the type asked for: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{StopEvent, UserMessageEvent};

    #[test]
    fn an_agent_work_request_is_a_delegation_request_on_the_wire() {
        let req = AgentWorkRequestEvent::new("Writer", &UserMessageEvent::new("hi"))
            .unwrap_or_default()
            .timeout(std::time::Duration::from_secs(5));
        let json = serde_json::to_value(&req).unwrap_or_default();
        assert_eq!(json["agent_class"], "Writer");
        assert_eq!(json["timeout_seconds"], 5.0);
        let back: AgentInTheLoopRequestEvent = serde_json::from_value(json).unwrap_or_default();
        assert_eq!(back, req.0);
    }

    #[test]
    fn an_agent_work_event_says_whether_the_agent_stopped() {
        let stopped = AgentWorkEvent::from(AgentInTheLoopResponseEvent {
            stop_event_name: "StopEvent".into(),
            stop_event: serde_json::json!({"result": "done"}),
            ..AgentInTheLoopResponseEvent::default()
        });
        assert!(stopped.stopped());
        assert!(stopped.stop_event::<StopEvent>().is_ok());
        let failed = AgentWorkEvent::from(AgentInTheLoopExceptionEvent {
            exception_event_name: "ExceptionEvent".into(),
            exception_event: serde_json::json!({"message": "boom"}),
            ..AgentInTheLoopExceptionEvent::default()
        });
        assert!(!failed.stopped());
        assert_eq!(failed.message(), "boom");
        let err = failed
            .stop_event::<StopEvent>()
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("did not stop: boom")));
    }

    #[test]
    fn a_humans_form_reads_as_a_type_or_says_why_not() {
        #[derive(Deserialize)]
        struct Hire {
            name: String,
        }
        let answer = HumanWorkEvent {
            form: serde_json::json!({"name": "Ada"}),
            ..HumanWorkEvent::default()
        };
        assert_eq!(
            answer.form_as::<Hire>().map(|h| h.name).ok().as_deref(),
            Some("Ada")
        );
        let wrong = HumanWorkEvent::default()
            .form_as::<Hire>()
            .err()
            .map(|e| e.to_string());
        assert!(
            wrong.is_some_and(|e| e.contains("`form` does not read")),
            ""
        );
    }
}
