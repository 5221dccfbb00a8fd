//! NATS subjects, wildcard filters, stream and consumer names and configurations, and message
//! headers (notes §2, DESIGN §6).
//!
//! Subject families:
//!
//! | family | subject |
//! |---|---|
//! | agent event | `agent.{class}.{agent_id}.{thread_id}.{display_id}.{run_id}.{control_event\|display_event}.{event_name}.{event_id}` |
//! | config RPC | `aihub.rpc.config.agent.{class}.{agent_id}` |
//! | discovery | `class_discovery.agent.{class}.{instance or *}.{request\|response}.{call_id}` |
//!
//! Every token is checked by [`validate_token`]: non-empty, at most [`MAX_TOKEN_LEN`] bytes, no
//! dots, whitespace, control characters or the wildcards `*` and `>`. Agent class names must in
//! addition be usable in a stream name (no `/` or `\`).
//!
//! This module only builds and parses strings and plain configuration values; it must not talk
//! to NATS (the runtime's NATS backend turns [`StreamConfig`] / [`ConsumerConfig`] into
//! `async-nats` calls).

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::event::EventEnvelope;
use crate::event_id::EventId;

/// Longest accepted subject token, in bytes.
pub const MAX_TOKEN_LEN: usize = 256;
/// First token of every agent event subject.
pub const AGENT_PREFIX: &str = "agent";
/// Token of control events (JetStream, dispatched).
pub const CONTROL_EVENT_TOKEN: &str = "control_event";
/// Token of display events (core NATS, never dispatched).
pub const DISPLAY_EVENT_TOKEN: &str = "display_event";
/// Prefix of config RPC subjects.
pub const CONFIG_RPC_PREFIX: &str = "aihub.rpc.config.agent";
/// Prefix of discovery subjects.
pub const DISCOVERY_PREFIX: &str = "class_discovery.agent";
/// The JetStream deduplication header.
pub const NATS_MSG_ID_HEADER: &str = "Nats-Msg-Id";
/// The W3C trace-context header (`00-<trace id>-<span id>-<flags>`): a step output published
/// on a class stream names the span of the execution that returned it.
pub const TRACEPARENT_HEADER: &str = "traceparent";
/// Prefix (case-insensitive) of the platform headers forwarded with events.
pub const AIHUB_HEADER_PREFIX: &str = "x-aihub-";

/// What is wrong with a single subject token.
#[derive(thiserror::Error, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenError {
    /// Empty token.
    #[error("it is empty")]
    Empty,
    /// Longer than [`MAX_TOKEN_LEN`] bytes.
    #[error("it is longer than {MAX_TOKEN_LEN} bytes")]
    TooLong,
    /// Contains a character NATS gives a meaning to, or that would split or corrupt a subject.
    #[error(
        "it contains {0:?}; subject tokens cannot contain dots, whitespace, control characters, `*` or `>`"
    )]
    BadChar(char),
    /// An agent class containing `/` or `\`, which stream names forbid.
    #[error("it contains {0:?}, which a stream name cannot contain")]
    BadStreamChar(char),
}

/// Why a subject could not be built or parsed, or a configuration value was refused.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum SubjectError {
    /// A token is invalid. `field` names it (`agent_class`, `run_id`, …).
    #[error("{field} {token:?} cannot be used in a NATS subject: {reason}")]
    InvalidToken {
        /// Which part of the subject.
        field: &'static str,
        /// The offending value (truncated to 64 characters).
        token: String,
        /// What is wrong.
        reason: TokenError,
    },
    /// The subject does not have the expected number of tokens.
    #[error("subject {subject:?} has {found} tokens, a {family} subject has {expected}")]
    WrongTokenCount {
        /// The subject (truncated).
        subject: String,
        /// Which family was expected.
        family: &'static str,
        /// Expected count.
        expected: usize,
        /// Actual count.
        found: usize,
    },
    /// The subject does not start with the family's prefix.
    #[error("subject {subject:?} does not start with `{expected}`")]
    WrongPrefix {
        /// The subject (truncated).
        subject: String,
        /// The expected prefix.
        expected: &'static str,
    },
    /// The event-type token is neither `control_event` nor `display_event`.
    #[error("event type token {token:?} is neither `control_event` nor `display_event`")]
    UnknownEventKind {
        /// The token found (truncated).
        token: String,
    },
    /// The discovery direction token is neither `request` nor `response`.
    #[error("discovery direction {token:?} is neither `request` nor `response`")]
    UnknownDirection {
        /// The token found (truncated).
        token: String,
    },
    /// A stream's duplicate window shorter than 60 s.
    #[error(
        "duplicate window of {found:?} is shorter than the minimum of {min:?}; re-published outputs could slip through deduplication"
    )]
    DuplicateWindowTooShort {
        /// The requested window.
        found: Duration,
        /// The minimum.
        min: Duration,
    },
}

impl SubjectError {
    /// A stable, machine-readable name of the error kind.
    pub fn kind(&self) -> &'static str {
        match self {
            SubjectError::InvalidToken { .. } => "invalid_token",
            SubjectError::WrongTokenCount { .. } => "wrong_token_count",
            SubjectError::WrongPrefix { .. } => "wrong_prefix",
            SubjectError::UnknownEventKind { .. } => "unknown_event_kind",
            SubjectError::UnknownDirection { .. } => "unknown_direction",
            SubjectError::DuplicateWindowTooShort { .. } => "duplicate_window_too_short",
        }
    }
}

fn truncate(s: &str) -> String {
    if s.len() <= 64 {
        return s.to_owned();
    }
    let mut end = 64;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Checks one subject token: non-empty, at most [`MAX_TOKEN_LEN`] bytes, no `.`, whitespace,
/// control characters, `*` or `>`.
pub fn validate_token(token: &str) -> Result<(), TokenError> {
    if token.is_empty() {
        return Err(TokenError::Empty);
    }
    if token.len() > MAX_TOKEN_LEN {
        return Err(TokenError::TooLong);
    }
    match token
        .chars()
        .find(|c| matches!(c, '.' | '*' | '>') || c.is_whitespace() || c.is_control())
    {
        Some(c) => Err(TokenError::BadChar(c)),
        None => Ok(()),
    }
}

fn check(field: &'static str, token: &str) -> Result<(), SubjectError> {
    validate_token(token).map_err(|reason| SubjectError::InvalidToken {
        field,
        token: truncate(token),
        reason,
    })
}

/// Checks an agent class name: a valid token that can also be part of a stream name.
pub fn validate_agent_class(class: &str) -> Result<(), SubjectError> {
    check("agent_class", class)?;
    if let Some(c) = class.chars().find(|c| matches!(c, '/' | '\\')) {
        return Err(SubjectError::InvalidToken {
            field: "agent_class",
            token: truncate(class),
            reason: TokenError::BadStreamChar(c),
        });
    }
    Ok(())
}

fn split_exact<'a>(
    subject: &'a str,
    family: &'static str,
    expected: usize,
) -> Result<Vec<&'a str>, SubjectError> {
    let parts: Vec<&str> = subject.split('.').collect();
    if parts.len() != expected {
        return Err(SubjectError::WrongTokenCount {
            subject: truncate(subject),
            family,
            expected,
            found: parts.len(),
        });
    }
    Ok(parts)
}

/// Control or display: which transport and which subjects an event goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// `control_event`: JetStream, acknowledged, dispatched.
    Control,
    /// `display_event`: core NATS, for UIs only.
    Display,
}

impl EventKind {
    /// The subject token.
    pub fn as_token(self) -> &'static str {
        match self {
            EventKind::Control => CONTROL_EVENT_TOKEN,
            EventKind::Display => DISPLAY_EVENT_TOKEN,
        }
    }

    /// Parses the subject token.
    pub fn from_token(token: &str) -> Result<EventKind, SubjectError> {
        match token {
            CONTROL_EVENT_TOKEN => Ok(EventKind::Control),
            DISPLAY_EVENT_TOKEN => Ok(EventKind::Display),
            other => Err(SubjectError::UnknownEventKind {
                token: truncate(other),
            }),
        }
    }
}

/// Where a run lives: the first six tokens of its event subjects (after `agent`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct RunAddress {
    agent_class: String,
    agent_id: String,
    thread_id: String,
    display_id: String,
    run_id: String,
}

impl RunAddress {
    /// Checks every token and builds the address.
    pub fn new(
        agent_class: &str,
        agent_id: &str,
        thread_id: &str,
        display_id: &str,
        run_id: &str,
    ) -> Result<RunAddress, SubjectError> {
        validate_agent_class(agent_class)?;
        check("agent_id", agent_id)?;
        check("thread_id", thread_id)?;
        check("display_id", display_id)?;
        check("run_id", run_id)?;
        Ok(RunAddress {
            agent_class: agent_class.to_owned(),
            agent_id: agent_id.to_owned(),
            thread_id: thread_id.to_owned(),
            display_id: display_id.to_owned(),
            run_id: run_id.to_owned(),
        })
    }

    /// The agent class (blueprint) name.
    pub fn agent_class(&self) -> &str {
        &self.agent_class
    }
    /// The agent instance id.
    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }
    /// The thread (conversation) id.
    pub fn thread_id(&self) -> &str {
        &self.thread_id
    }
    /// The display (UI grouping) id.
    pub fn display_id(&self) -> &str {
        &self.display_id
    }
    /// The run id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The subject of one event of this run.
    pub fn event_subject(
        &self,
        kind: EventKind,
        event_name: &str,
        event_id: &str,
    ) -> Result<AgentEventSubject, SubjectError> {
        check("event_name", event_name)?;
        check("event_id", event_id)?;
        Ok(AgentEventSubject {
            run: self.clone(),
            kind,
            event_name: event_name.to_owned(),
            event_id: event_id.to_owned(),
        })
    }

    /// Filter for every event of this run, of one kind or both.
    pub fn filter(&self, kind: Option<EventKind>) -> AgentEventFilter {
        AgentEventFilter {
            agent_class: Some(self.agent_class.clone()),
            agent_id: Some(self.agent_id.clone()),
            thread_id: Some(self.thread_id.clone()),
            display_id: Some(self.display_id.clone()),
            run_id: Some(self.run_id.clone()),
            kind,
            event_name: None,
        }
    }
}

/// A parsed or built agent event subject (9 tokens). `Display` gives the subject string.
///
/// The last token is normally the payload's `event_id`, but not always (notes §2.1: delegation
/// and API copies mint a new one), so it is kept as text and never trusted as the event's id.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct AgentEventSubject {
    run: RunAddress,
    kind: EventKind,
    event_name: String,
    event_id: String,
}

impl AgentEventSubject {
    /// Parses `agent.{class}.{agent_id}.{thread_id}.{display_id}.{run_id}.{kind}.{name}.{id}`.
    pub fn parse(subject: &str) -> Result<AgentEventSubject, SubjectError> {
        let p = split_exact(subject, "agent event", 9)?;
        if p[0] != AGENT_PREFIX {
            return Err(SubjectError::WrongPrefix {
                subject: truncate(subject),
                expected: AGENT_PREFIX,
            });
        }
        let run = RunAddress::new(p[1], p[2], p[3], p[4], p[5])?;
        let kind = EventKind::from_token(p[6])?;
        run.event_subject(kind, p[7], p[8])
    }

    /// The run this event belongs to.
    pub fn run(&self) -> &RunAddress {
        &self.run
    }
    /// Control or display.
    pub fn kind(&self) -> EventKind {
        self.kind
    }
    /// The `_event_name` token.
    pub fn event_name(&self) -> &str {
        &self.event_name
    }
    /// The last token, as text.
    pub fn event_id_token(&self) -> &str {
        &self.event_id
    }
    /// The last token as an [`EventId`], if it is one.
    pub fn event_id(&self) -> Option<EventId> {
        EventId::parse(&self.event_id).ok()
    }
}

impl fmt::Display for AgentEventSubject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = &self.run;
        write!(
            f,
            "{AGENT_PREFIX}.{}.{}.{}.{}.{}.{}.{}.{}",
            r.agent_class,
            r.agent_id,
            r.thread_id,
            r.display_id,
            r.run_id,
            self.kind.as_token(),
            self.event_name,
            self.event_id
        )
    }
}

/// A wildcard filter over agent event subjects: each `None` part becomes `*`. Always nine
/// tokens (never `>`), like the Python subscriptions.
///
/// Build one with [`AgentEventFilter::all`] and the scope methods, or with the shorthands
/// ([`class_filter`], [`class_control_filter`], [`RunAddress::filter`], …); turn it into a
/// subject with [`AgentEventFilter::to_subject`], which validates every literal token.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AgentEventFilter {
    /// Agent class, or any.
    pub agent_class: Option<String>,
    /// Agent instance, or any.
    pub agent_id: Option<String>,
    /// Thread, or any.
    pub thread_id: Option<String>,
    /// Display, or any.
    pub display_id: Option<String>,
    /// Run, or any.
    pub run_id: Option<String>,
    /// Control or display, or both.
    pub kind: Option<EventKind>,
    /// Event name, or any.
    pub event_name: Option<String>,
}

impl AgentEventFilter {
    /// Every agent event of every class: `agent.*.*.*.*.*.*.*.*`.
    pub fn all() -> AgentEventFilter {
        AgentEventFilter::default()
    }
    /// Restrict to an agent class.
    pub fn class(mut self, agent_class: &str) -> Self {
        self.agent_class = Some(agent_class.to_owned());
        self
    }
    /// Restrict to an agent instance.
    pub fn instance(mut self, agent_id: &str) -> Self {
        self.agent_id = Some(agent_id.to_owned());
        self
    }
    /// Restrict to a thread.
    pub fn thread(mut self, thread_id: &str) -> Self {
        self.thread_id = Some(thread_id.to_owned());
        self
    }
    /// Restrict to a display.
    pub fn display(mut self, display_id: &str) -> Self {
        self.display_id = Some(display_id.to_owned());
        self
    }
    /// Restrict to a run.
    pub fn run(mut self, run_id: &str) -> Self {
        self.run_id = Some(run_id.to_owned());
        self
    }
    /// Restrict to control or display events.
    pub fn kind(mut self, kind: EventKind) -> Self {
        self.kind = Some(kind);
        self
    }
    /// Restrict to control events.
    pub fn control_only(self) -> Self {
        self.kind(EventKind::Control)
    }
    /// Restrict to one event name.
    pub fn event_name(mut self, event_name: &str) -> Self {
        self.event_name = Some(event_name.to_owned());
        self
    }

    /// The filter subject, after validating every literal token.
    pub fn to_subject(&self) -> Result<String, SubjectError> {
        fn part<'a>(field: &'static str, v: &'a Option<String>) -> Result<&'a str, SubjectError> {
            match v {
                Some(t) => {
                    check(field, t)?;
                    Ok(t)
                }
                None => Ok("*"),
            }
        }
        if let Some(c) = &self.agent_class {
            validate_agent_class(c)?;
        }
        Ok(format!(
            "{AGENT_PREFIX}.{}.{}.{}.{}.{}.{}.{}.*",
            part("agent_class", &self.agent_class)?,
            part("agent_id", &self.agent_id)?,
            part("thread_id", &self.thread_id)?,
            part("display_id", &self.display_id)?,
            part("run_id", &self.run_id)?,
            self.kind.map_or("*", EventKind::as_token),
            part("event_name", &self.event_name)?,
        ))
    }

    /// Whether `subject` is matched by this filter.
    pub fn matches(&self, subject: &AgentEventSubject) -> bool {
        fn eq(f: &Option<String>, v: &str) -> bool {
            f.as_deref().is_none_or(|f| f == v)
        }
        let r = &subject.run;
        eq(&self.agent_class, &r.agent_class)
            && eq(&self.agent_id, &r.agent_id)
            && eq(&self.thread_id, &r.thread_id)
            && eq(&self.display_id, &r.display_id)
            && eq(&self.run_id, &r.run_id)
            && self.kind.is_none_or(|k| k == subject.kind)
            && eq(&self.event_name, &subject.event_name)
    }
}

/// The subjects an event of `run` is published on, in publishing order (notes §1.4): the
/// control subject if it is a control event, then the display subject if it is a display event
/// (both for control-and-display events, JetStream first); none for an event that is neither.
/// The last token is the event's own id.
pub fn publish_subjects(
    run: &RunAddress,
    event: &EventEnvelope,
) -> Result<Vec<AgentEventSubject>, SubjectError> {
    let c = event.classification();
    let id = event.event_id.to_string();
    let mut out = Vec::with_capacity(2);
    if c.control {
        out.push(run.event_subject(EventKind::Control, &event.event_name, &id)?);
    }
    if c.display {
        out.push(run.event_subject(EventKind::Display, &event.event_name, &id)?);
    }
    Ok(out)
}

/// Every event of a class: `agent.{class}.*.*.*.*.*.*.*` (also the stream's subject).
pub fn class_filter(agent_class: &str) -> Result<String, SubjectError> {
    AgentEventFilter::all().class(agent_class).to_subject()
}

/// The control events of a class: `agent.{class}.*.*.*.*.control_event.*.*` (the dispatcher
/// feed and the runner consumer's filter).
pub fn class_control_filter(agent_class: &str) -> Result<String, SubjectError> {
    AgentEventFilter::all()
        .class(agent_class)
        .control_only()
        .to_subject()
}

/// Every event of an agent instance: `agent.{class}.{agent_id}.*.*.*.*.*.*`.
pub fn instance_filter(agent_class: &str, agent_id: &str) -> Result<String, SubjectError> {
    AgentEventFilter::all()
        .class(agent_class)
        .instance(agent_id)
        .to_subject()
}

/// Every event of a thread of an agent instance: `agent.{class}.{agent_id}.{thread_id}.*.*.*.*.*`.
pub fn thread_filter(
    agent_class: &str,
    agent_id: &str,
    thread_id: &str,
) -> Result<String, SubjectError> {
    AgentEventFilter::all()
        .class(agent_class)
        .instance(agent_id)
        .thread(thread_id)
        .to_subject()
}

/// A config RPC subject `aihub.rpc.config.agent.{class}.{agent_id}` (request/reply on core NATS).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ConfigRpcSubject {
    /// Agent class.
    pub agent_class: String,
    /// Agent instance.
    pub agent_id: String,
}

impl ConfigRpcSubject {
    /// Checks both tokens.
    pub fn new(agent_class: &str, agent_id: &str) -> Result<ConfigRpcSubject, SubjectError> {
        validate_agent_class(agent_class)?;
        check("agent_id", agent_id)?;
        Ok(ConfigRpcSubject {
            agent_class: agent_class.to_owned(),
            agent_id: agent_id.to_owned(),
        })
    }

    /// Parses `aihub.rpc.config.agent.{class}.{agent_id}`.
    pub fn parse(subject: &str) -> Result<ConfigRpcSubject, SubjectError> {
        let p = split_exact(subject, "config RPC", 6)?;
        if p[..4] != ["aihub", "rpc", "config", "agent"] {
            return Err(SubjectError::WrongPrefix {
                subject: truncate(subject),
                expected: CONFIG_RPC_PREFIX,
            });
        }
        ConfigRpcSubject::new(p[4], p[5])
    }
}

impl fmt::Display for ConfigRpcSubject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{CONFIG_RPC_PREFIX}.{}.{}",
            self.agent_class, self.agent_id
        )
    }
}

/// Request or response of a discovery call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiscoveryDirection {
    /// `request`.
    Request,
    /// `response`.
    Response,
}

impl DiscoveryDirection {
    /// The subject token.
    pub fn as_token(self) -> &'static str {
        match self {
            DiscoveryDirection::Request => "request",
            DiscoveryDirection::Response => "response",
        }
    }
}

/// A discovery subject `class_discovery.agent.{class}.{instance}.{request|response}.{call_id}`.
/// The instance token is `*` ([`None`]) when the call addresses every instance of the class,
/// which is how the Python implementation writes it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct DiscoverySubject {
    /// Agent class.
    pub agent_class: String,
    /// A specific instance, or `None` for `*`.
    pub instance: Option<String>,
    /// Request or response.
    pub direction: DiscoveryDirection,
    /// Correlates a response with its request.
    pub call_id: String,
}

impl DiscoverySubject {
    /// A request to every instance of a class: `class_discovery.agent.{class}.*.request.{call_id}`.
    pub fn request(agent_class: &str, call_id: &str) -> Result<DiscoverySubject, SubjectError> {
        Self::new(agent_class, None, DiscoveryDirection::Request, call_id)
    }

    /// The matching response subject: `class_discovery.agent.{class}.*.response.{call_id}`.
    pub fn response(agent_class: &str, call_id: &str) -> Result<DiscoverySubject, SubjectError> {
        Self::new(agent_class, None, DiscoveryDirection::Response, call_id)
    }

    /// Checks every token.
    pub fn new(
        agent_class: &str,
        instance: Option<&str>,
        direction: DiscoveryDirection,
        call_id: &str,
    ) -> Result<DiscoverySubject, SubjectError> {
        validate_agent_class(agent_class)?;
        if let Some(i) = instance {
            check("instance", i)?;
        }
        check("call_id", call_id)?;
        Ok(DiscoverySubject {
            agent_class: agent_class.to_owned(),
            instance: instance.map(str::to_owned),
            direction,
            call_id: call_id.to_owned(),
        })
    }

    /// Parses a discovery subject; the instance token may be `*`.
    pub fn parse(subject: &str) -> Result<DiscoverySubject, SubjectError> {
        let p = split_exact(subject, "discovery", 6)?;
        if p[..2] != ["class_discovery", "agent"] {
            return Err(SubjectError::WrongPrefix {
                subject: truncate(subject),
                expected: DISCOVERY_PREFIX,
            });
        }
        let direction = match p[4] {
            "request" => DiscoveryDirection::Request,
            "response" => DiscoveryDirection::Response,
            other => {
                return Err(SubjectError::UnknownDirection {
                    token: truncate(other),
                });
            }
        };
        let instance = (p[3] != "*").then_some(p[3]);
        DiscoverySubject::new(p[2], instance, direction, p[5])
    }
}

impl fmt::Display for DiscoverySubject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{DISCOVERY_PREFIX}.{}.{}.{}.{}",
            self.agent_class,
            self.instance.as_deref().unwrap_or("*"),
            self.direction.as_token(),
            self.call_id
        )
    }
}

/// The discovery requests of every class: `class_discovery.agent.*.*.request.*`.
pub const DISCOVERY_REQUEST_FILTER: &str = "class_discovery.agent.*.*.request.*";

/// The stream of an agent class: `agent_{Class}_stream`.
pub fn stream_name(agent_class: &str) -> Result<String, SubjectError> {
    validate_agent_class(agent_class)?;
    Ok(format!("agent_{agent_class}_stream"))
}

/// The durable consumer of an agent class's runners, which is also their queue group:
/// `agent_runner_{Class}`.
pub fn consumer_name(agent_class: &str) -> Result<String, SubjectError> {
    validate_agent_class(agent_class)?;
    Ok(format!("agent_runner_{agent_class}"))
}

/// The queue group of an agent class's runners (same as [`consumer_name`]).
pub fn queue_group(agent_class: &str) -> Result<String, SubjectError> {
    consumer_name(agent_class)
}

/// The `Nats-Msg-Id` header value of an event: its id. Unlike the Python implementation (a
/// random UUID per publish call), this makes a re-publication of the same event — e.g. an
/// output re-emitted after a crash under its deterministic id — a duplicate that
/// JetStream drops within the window.
pub fn nats_msg_id(event_id: &EventId) -> String {
    event_id.to_string()
}

/// Whether a header is a platform header (`X-AIHub-*`, any case) that is forwarded with events.
pub fn is_aihub_header(name: &str) -> bool {
    name.len() >= AIHUB_HEADER_PREFIX.len()
        && name.as_bytes()[..AIHUB_HEADER_PREFIX.len()]
            .eq_ignore_ascii_case(AIHUB_HEADER_PREFIX.as_bytes())
}

/// JetStream storage backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StorageType {
    /// On disk.
    File,
    /// In memory.
    Memory,
}

/// JetStream retention policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RetentionPolicy {
    /// Keep messages until a limit (count, age, size) removes them.
    Limits,
    /// Keep messages until every consumer acknowledged them.
    Interest,
    /// Keep messages until one consumer acknowledged them.
    WorkQueue,
}

/// What JetStream drops when a limit is hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiscardPolicy {
    /// Drop the oldest messages.
    Old,
    /// Refuse new messages.
    New,
}

/// Minimum deduplication window of an agent stream.
pub const MIN_DUPLICATE_WINDOW: Duration = Duration::from_secs(60);
/// Maximum age of messages in an agent stream (30 days).
pub const STREAM_MAX_AGE: Duration = Duration::from_secs(30 * 24 * 60 * 60);
/// Maximum number of messages in an agent stream.
pub const STREAM_MAX_MSGS: i64 = 10_000_000;

/// The configuration of an agent class's stream, as plain data (notes §2.4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StreamConfig {
    /// `agent_{Class}_stream`.
    pub name: String,
    /// `["agent.{Class}.*.*.*.*.*.*.*"]`: both control and display events.
    pub subjects: Vec<String>,
    /// File.
    pub storage: StorageType,
    /// Limits.
    pub retention: RetentionPolicy,
    /// 10 000 000.
    pub max_msgs: i64,
    /// Old.
    pub discard: DiscardPolicy,
    /// 30 days.
    pub max_age: Duration,
    /// 60 s by default; never shorter.
    pub duplicate_window: Duration,
}

impl StreamConfig {
    /// The Python-compatible configuration of the stream of `agent_class`.
    pub fn for_agent_class(agent_class: &str) -> Result<StreamConfig, SubjectError> {
        Ok(StreamConfig {
            name: stream_name(agent_class)?,
            subjects: vec![class_filter(agent_class)?],
            storage: StorageType::File,
            retention: RetentionPolicy::Limits,
            max_msgs: STREAM_MAX_MSGS,
            discard: DiscardPolicy::Old,
            max_age: STREAM_MAX_AGE,
            duplicate_window: MIN_DUPLICATE_WINDOW,
        })
    }

    /// A longer deduplication window; refuses anything under [`MIN_DUPLICATE_WINDOW`].
    pub fn with_duplicate_window(mut self, window: Duration) -> Result<StreamConfig, SubjectError> {
        if window < MIN_DUPLICATE_WINDOW {
            return Err(SubjectError::DuplicateWindowTooShort {
                found: window,
                min: MIN_DUPLICATE_WINDOW,
            });
        }
        self.duplicate_window = window;
        Ok(self)
    }
}

/// The configuration of the runners' durable queue consumer of an agent class (notes §2.5).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConsumerConfig {
    /// `agent_runner_{Class}`, also the deliver group.
    pub durable_name: String,
    /// The queue group (same as `durable_name`).
    pub deliver_group: String,
    /// `agent.{Class}.*.*.*.*.control_event.*.*`.
    pub filter_subject: String,
    /// Explicit acknowledgement is required.
    pub ack_explicit: bool,
    /// 30 s.
    pub ack_wait: Duration,
    /// 5.
    pub max_deliver: i64,
}

impl ConsumerConfig {
    /// The Python-compatible runner consumer of `agent_class`.
    pub fn for_agent_class(agent_class: &str) -> Result<ConsumerConfig, SubjectError> {
        let name = consumer_name(agent_class)?;
        Ok(ConsumerConfig {
            deliver_group: name.clone(),
            durable_name: name,
            filter_subject: class_control_filter(agent_class)?,
            ack_explicit: true,
            ack_wait: Duration::from_secs(30),
            max_deliver: 5,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn run() -> RunAddress {
        RunAddress::new("RagAgent", "a1", "t1", "d1", "r1").unwrap()
    }

    #[test]
    fn agent_event_subject_has_nine_tokens_in_order() {
        let s = run()
            .event_subject(
                EventKind::Control,
                "UserMessageEvent",
                "65a0c0ffee0000000000abcd",
            )
            .unwrap();
        assert_eq!(
            s.to_string(),
            "agent.RagAgent.a1.t1.d1.r1.control_event.UserMessageEvent.65a0c0ffee0000000000abcd"
        );
        let d = run()
            .event_subject(EventKind::Display, "ChunkEvent", "x")
            .unwrap();
        assert_eq!(
            d.to_string(),
            "agent.RagAgent.a1.t1.d1.r1.display_event.ChunkEvent.x"
        );
    }

    #[test]
    fn agent_event_subject_parse_inverts_display() {
        let text = "agent.RagAgent.a1.t1.d1.r1.display_event.ChunkEvent.65a0c0ffee0000000000abcd";
        let s = AgentEventSubject::parse(text).unwrap();
        assert_eq!(s.to_string(), text);
        assert_eq!(s.run(), &run());
        assert_eq!(s.kind(), EventKind::Display);
        assert_eq!(s.event_name(), "ChunkEvent");
        assert_eq!(
            s.event_id().unwrap().to_string(),
            "65a0c0ffee0000000000abcd"
        );
        // The last token need not be an event id.
        let s = AgentEventSubject::parse("agent.C.a.t.d.r.control_event.E.not-an-id").unwrap();
        assert_eq!(s.event_id(), None);
        assert_eq!(s.event_id_token(), "not-an-id");
    }

    #[test]
    fn agent_event_subject_parse_rejects_wrong_count_prefix_kind_and_tokens() {
        assert!(matches!(
            AgentEventSubject::parse("agent.C.a.t.d.r.control_event.E"),
            Err(SubjectError::WrongTokenCount {
                expected: 9,
                found: 8,
                ..
            })
        ));
        assert!(matches!(
            AgentEventSubject::parse("agent.C.a.t.d.r.control_event.E.i.j"),
            Err(SubjectError::WrongTokenCount { found: 10, .. })
        ));
        assert!(matches!(
            AgentEventSubject::parse("agents.C.a.t.d.r.control_event.E.i"),
            Err(SubjectError::WrongPrefix { .. })
        ));
        assert!(matches!(
            AgentEventSubject::parse("agent.C.a.t.d.r.other_event.E.i"),
            Err(SubjectError::UnknownEventKind { .. })
        ));
        assert!(matches!(
            AgentEventSubject::parse("agent.C.a..d.r.control_event.E.i"),
            Err(SubjectError::InvalidToken {
                field: "thread_id",
                reason: TokenError::Empty,
                ..
            })
        ));
        assert!(matches!(
            AgentEventSubject::parse("agent.C.*.t.d.r.control_event.E.i"),
            Err(SubjectError::InvalidToken {
                field: "agent_id",
                reason: TokenError::BadChar('*'),
                ..
            })
        ));
        assert!(AgentEventSubject::parse("").is_err());
    }

    #[test]
    fn tokens_reject_dots_whitespace_wildcards_control_and_overlong() {
        assert_eq!(validate_token(""), Err(TokenError::Empty));
        assert_eq!(validate_token("a.b"), Err(TokenError::BadChar('.')));
        assert_eq!(validate_token("a b"), Err(TokenError::BadChar(' ')));
        assert_eq!(validate_token("a\tb"), Err(TokenError::BadChar('\t')));
        assert_eq!(validate_token("*"), Err(TokenError::BadChar('*')));
        assert_eq!(validate_token("a>"), Err(TokenError::BadChar('>')));
        assert_eq!(validate_token("a\u{0}"), Err(TokenError::BadChar('\u{0}')));
        assert_eq!(
            validate_token("a\u{a0}"),
            Err(TokenError::BadChar('\u{a0}'))
        );
        assert_eq!(
            validate_token(&"x".repeat(MAX_TOKEN_LEN + 1)),
            Err(TokenError::TooLong)
        );
        assert!(validate_token(&"x".repeat(MAX_TOKEN_LEN)).is_ok());
        assert!(validate_token("65a0c0ffee0000000000abcd").is_ok());
        assert!(validate_token("Résumé-1_x[y]").is_ok());
        let e = RunAddress::new("C", "a.b", "t", "d", "r").unwrap_err();
        assert_eq!(e.kind(), "invalid_token");
        assert!(e.to_string().contains("agent_id"), "{e}");
    }

    #[test]
    fn agent_class_must_also_be_a_valid_stream_name_part() {
        assert!(matches!(
            RunAddress::new("a/b", "a", "t", "d", "r"),
            Err(SubjectError::InvalidToken {
                reason: TokenError::BadStreamChar('/'),
                ..
            })
        ));
        assert!(stream_name("a\\b").is_err());
    }

    #[test]
    fn filters_per_scope_use_nine_tokens_and_stars() {
        assert_eq!(
            AgentEventFilter::all().to_subject().unwrap(),
            "agent.*.*.*.*.*.*.*.*"
        );
        assert_eq!(class_filter("C").unwrap(), "agent.C.*.*.*.*.*.*.*");
        assert_eq!(
            class_control_filter("C").unwrap(),
            "agent.C.*.*.*.*.control_event.*.*"
        );
        assert_eq!(instance_filter("C", "a").unwrap(), "agent.C.a.*.*.*.*.*.*");
        assert_eq!(
            thread_filter("C", "a", "t").unwrap(),
            "agent.C.a.t.*.*.*.*.*"
        );
        assert_eq!(
            run().filter(None).to_subject().unwrap(),
            "agent.RagAgent.a1.t1.d1.r1.*.*.*"
        );
        assert_eq!(
            run().filter(Some(EventKind::Control)).to_subject().unwrap(),
            "agent.RagAgent.a1.t1.d1.r1.control_event.*.*"
        );
        assert_eq!(
            AgentEventFilter::all()
                .class("C")
                .thread("t")
                .kind(EventKind::Display)
                .event_name("ChunkEvent")
                .to_subject()
                .unwrap(),
            "agent.C.*.t.*.*.display_event.ChunkEvent.*"
        );
        assert!(AgentEventFilter::all().class("a.b").to_subject().is_err());
        assert!(AgentEventFilter::all().run("*").to_subject().is_err());
    }

    #[test]
    fn filter_matches_agrees_with_its_literal_parts() {
        let s = run().event_subject(EventKind::Control, "E", "i").unwrap();
        assert!(AgentEventFilter::all().matches(&s));
        assert!(run().filter(Some(EventKind::Control)).matches(&s));
        assert!(!run().filter(Some(EventKind::Display)).matches(&s));
        assert!(!AgentEventFilter::all().class("Other").matches(&s));
        assert!(AgentEventFilter::all().event_name("E").matches(&s));
    }

    #[test]
    fn publish_subjects_are_control_then_display_per_classification() {
        let h = crate::Hierarchy::builtin();
        let id = EventId::from_bytes([1; 12]);
        let subjects = |name: &str| {
            let e = EventEnvelope::new(&h, name, id, 0).unwrap();
            publish_subjects(&run(), &e)
                .unwrap()
                .iter()
                .map(|s| s.kind())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            subjects("StopEvent"),
            [EventKind::Control, EventKind::Display]
        );
        assert_eq!(subjects("BotInTheLoopRequestEvent"), [EventKind::Control]);
        assert_eq!(subjects("ChunkEvent"), [EventKind::Display]);
        assert!(subjects("ProcessEvent").is_empty());
        let e = EventEnvelope::new(&h, "StopEvent", id, 0).unwrap();
        let s = &publish_subjects(&run(), &e).unwrap()[0];
        assert_eq!(s.event_id(), Some(id));
        assert_eq!(s.event_name(), "StopEvent");
    }

    #[test]
    fn config_rpc_subject_builds_and_parses() {
        let s = ConfigRpcSubject::new("C", "a1").unwrap();
        assert_eq!(s.to_string(), "aihub.rpc.config.agent.C.a1");
        assert_eq!(
            ConfigRpcSubject::parse("aihub.rpc.config.agent.C.a1").unwrap(),
            s
        );
        assert!(matches!(
            ConfigRpcSubject::parse("aihub.rpc.config.agent.C"),
            Err(SubjectError::WrongTokenCount { .. })
        ));
        assert!(matches!(
            ConfigRpcSubject::parse("aihub.rpc.other.agent.C.a"),
            Err(SubjectError::WrongPrefix { .. })
        ));
        assert!(ConfigRpcSubject::new("C", "").is_err());
    }

    #[test]
    fn discovery_subjects_build_and_parse_with_star_instance() {
        let req = DiscoverySubject::request("C", "call1").unwrap();
        assert_eq!(req.to_string(), "class_discovery.agent.C.*.request.call1");
        let resp = DiscoverySubject::response("C", "call1").unwrap();
        assert_eq!(resp.to_string(), "class_discovery.agent.C.*.response.call1");
        assert_eq!(DiscoverySubject::parse(&req.to_string()).unwrap(), req);
        let specific = DiscoverySubject::parse("class_discovery.agent.C.a1.response.k").unwrap();
        assert_eq!(specific.instance.as_deref(), Some("a1"));
        assert!(matches!(
            DiscoverySubject::parse("class_discovery.agent.C.*.ask.k"),
            Err(SubjectError::UnknownDirection { .. })
        ));
        assert!(matches!(
            DiscoverySubject::parse("discovery.agent.C.*.request.k"),
            Err(SubjectError::WrongPrefix { .. })
        ));
        assert!(DiscoverySubject::parse("class_discovery.agent.C.*.request.*").is_err());
        assert_eq!(DISCOVERY_REQUEST_FILTER.split('.').count(), 6);
    }

    #[test]
    fn stream_config_matches_the_python_stream() {
        let c = StreamConfig::for_agent_class("RagAgent").unwrap();
        assert_eq!(c.name, "agent_RagAgent_stream");
        assert_eq!(c.subjects, ["agent.RagAgent.*.*.*.*.*.*.*"]);
        assert_eq!(c.storage, StorageType::File);
        assert_eq!(c.retention, RetentionPolicy::Limits);
        assert_eq!(c.max_msgs, 10_000_000);
        assert_eq!(c.discard, DiscardPolicy::Old);
        assert_eq!(c.max_age, Duration::from_secs(2_592_000));
        assert_eq!(c.duplicate_window, Duration::from_secs(60));
    }

    #[test]
    fn stream_duplicate_window_is_configurable_but_never_below_60_seconds() {
        let c = StreamConfig::for_agent_class("C").unwrap();
        let longer = c
            .clone()
            .with_duplicate_window(Duration::from_secs(600))
            .unwrap();
        assert_eq!(longer.duplicate_window, Duration::from_secs(600));
        assert!(matches!(
            c.with_duplicate_window(Duration::from_secs(59)),
            Err(SubjectError::DuplicateWindowTooShort { .. })
        ));
    }

    #[test]
    fn consumer_and_queue_group_are_per_class() {
        assert_eq!(consumer_name("C").unwrap(), "agent_runner_C");
        assert_eq!(queue_group("C").unwrap(), "agent_runner_C");
        let c = ConsumerConfig::for_agent_class("C").unwrap();
        assert_eq!(c.filter_subject, "agent.C.*.*.*.*.control_event.*.*");
        assert_eq!(c.deliver_group, c.durable_name);
        assert_eq!((c.ack_wait, c.max_deliver), (Duration::from_secs(30), 5));
        assert!(consumer_name("a b").is_err());
    }

    #[test]
    fn nats_msg_id_is_the_event_id_and_aihub_headers_match_any_case() {
        let id = EventId::from_bytes([0xab; 12]);
        assert_eq!(nats_msg_id(&id), "abababababababababababab");
        assert!(is_aihub_header("X-AIHub-Tenant"));
        assert!(is_aihub_header("x-aihub-user"));
        assert!(!is_aihub_header("X-AIHu"));
        assert!(!is_aihub_header("traceparent"));
        assert!(!is_aihub_header("X-AIHüb-a"));
    }
}
