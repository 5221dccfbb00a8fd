//! Typed errors of the NATS layer. Every variant says what went wrong and what to do; no
//! variant carries a secret (tokens, passwords, seeds are never part of an error).

use std::time::Duration;

use saap_protocol::SubjectError;

/// Why a NATS operation failed.
#[derive(thiserror::Error, Debug)]
pub enum NatsError {
    /// The connection options are inconsistent or incomplete.
    #[error("invalid NATS options: {reason}; fix the connection settings")]
    InvalidOptions {
        /// What is wrong.
        reason: String,
    },
    /// Connecting failed (server down, wrong address, TLS or authentication problem).
    #[error(
        "cannot connect to NATS at {url}: {reason}; check that nats-server runs with JetStream (-js), the address, the credentials and the TLS settings"
    )]
    Connect {
        /// The server address, with any credentials removed.
        url: String,
        /// The client's reason (never contains the credentials).
        reason: String,
    },
    /// JetStream is not enabled on the server or not reachable for this account.
    #[error(
        "JetStream is not available: {reason}; start nats-server with -js (or a jetstream block) and give the account JetStream access"
    )]
    JetStreamUnavailable {
        /// The client's reason.
        reason: String,
    },
    /// A name could not be turned into a subject, stream or bucket name.
    #[error(transparent)]
    Subject(#[from] SubjectError),
    /// Creating, reading or checking a stream failed.
    #[error("stream {stream}: {reason}")]
    Stream {
        /// Stream name.
        stream: String,
        /// What went wrong and what to do.
        reason: String,
    },
    /// Nothing stores the subject: the class's stream does not exist.
    #[error(
        "no JetStream stream stores {subject}; call ensure_stream for agent class {agent_class} before publishing"
    )]
    NoStream {
        /// The subject published to.
        subject: String,
        /// The class whose stream is missing.
        agent_class: String,
    },
    /// The event is not of the kind the call publishes.
    #[error(
        "event {event_name} ({event_id}) is not a {expected} event (its _parent_event_names lack {expected_parent}); publish it with the matching call"
    )]
    WrongEventKind {
        /// `_event_name`.
        event_name: String,
        /// `event_id`.
        event_id: String,
        /// `control` or `display`.
        expected: &'static str,
        /// `ControlEvent` or `DisplayEvent`.
        expected_parent: &'static str,
    },
    /// Publishing failed or its acknowledgement did not arrive. Re-publishing the same event is
    /// safe: its `Nats-Msg-Id` makes JetStream drop the copy within the duplicate window.
    #[error(
        "publishing to {subject} failed after {attempts} attempt(s): {reason}; the event may or may not be stored, re-publish it (same event id, deduplicated)"
    )]
    Publish {
        /// The subject.
        subject: String,
        /// Attempts made.
        attempts: u32,
        /// The client's reason.
        reason: String,
    },
    /// Creating or binding the runners' consumer failed.
    #[error("consumer {consumer} on stream {stream}: {reason}")]
    Consumer {
        /// Durable name.
        consumer: String,
        /// Stream name.
        stream: String,
        /// What went wrong and what to do.
        reason: String,
    },
    /// Receiving from a consumer or subscription failed.
    #[error(
        "receiving from {source_name} failed: {reason}; the subscription is re-established by reconnecting, retry"
    )]
    Receive {
        /// Consumer or subject.
        source_name: String,
        /// The client's reason.
        reason: String,
    },
    /// Acknowledging (ack, nak, progress, term) failed. The message will be redelivered after
    /// the consumer's ack wait, so the handler must be idempotent (it is: deduplication by event
    /// id).
    #[error(
        "acknowledging stream sequence {stream_sequence} failed: {reason}; it will be redelivered after the ack wait"
    )]
    Ack {
        /// The message's stream sequence.
        stream_sequence: u64,
        /// The client's reason.
        reason: String,
    },
    /// A delivered message is not usable (no JetStream metadata).
    #[error("message on {subject} is not a JetStream delivery: {reason}")]
    NotJetStream {
        /// The subject.
        subject: String,
        /// Why.
        reason: String,
    },
    /// A KV bucket could not be created or opened.
    #[error("KV bucket {bucket}: {reason}")]
    Bucket {
        /// Bucket name.
        bucket: String,
        /// What went wrong and what to do.
        reason: String,
    },
    /// A KV key is not valid (allowed: letters, digits, `-`, `_`, `/`, `=`, and `.` between
    /// non-empty parts).
    #[error(
        "KV key {key:?} is invalid: use letters, digits, '-', '_', '/', '=' and '.' between non-empty parts"
    )]
    InvalidKey {
        /// The key (truncated to 64 characters).
        key: String,
    },
    /// `create` found the key already present.
    #[error("KV key {key} in {bucket} already exists; read it and update with its revision")]
    KeyExists {
        /// Bucket name.
        bucket: String,
        /// Key.
        key: String,
    },
    /// Compare-and-set lost: the key's revision is not the expected one (someone else wrote it).
    #[error(
        "KV key {key} in {bucket} was changed by someone else (expected revision {expected}); re-read it and decide again"
    )]
    RevisionConflict {
        /// Bucket name.
        bucket: String,
        /// Key.
        key: String,
        /// The revision the caller expected.
        expected: u64,
    },
    /// Another KV operation failed.
    #[error("KV {operation} of {key} in {bucket} failed: {reason}; retry")]
    Kv {
        /// Bucket name.
        bucket: String,
        /// Key.
        key: String,
        /// `get`, `put`, `create`, `update` or `delete`.
        operation: &'static str,
        /// The client's reason.
        reason: String,
    },
    /// A stored value or a message payload is not the expected JSON.
    #[error("cannot decode {what}: {reason}")]
    Decode {
        /// What was decoded.
        what: String,
        /// The decoder's reason.
        reason: String,
    },
    /// Nobody listens on an RPC subject.
    #[error(
        "no responder on {subject}; start the service that answers it (for config RPC: the platform API)"
    )]
    NoResponders {
        /// The request subject.
        subject: String,
    },
    /// An RPC got no answer in time.
    #[error(
        "request to {subject} timed out after {timeout:?}; the responder is slow or down, retry later"
    )]
    RequestTimeout {
        /// The request subject.
        subject: String,
        /// The timeout.
        timeout: Duration,
    },
    /// An RPC responder answered with an error (`{"error", "error_type"}`).
    #[error("responder on {subject} failed: {error_type}: {message}")]
    Remote {
        /// The request subject.
        subject: String,
        /// The responder's error type.
        error_type: String,
        /// The responder's error message.
        message: String,
    },
    /// A request failed for another reason.
    #[error("request to {subject} failed: {reason}")]
    Request {
        /// The request subject.
        subject: String,
        /// The client's reason.
        reason: String,
    },
    /// Subscribing failed.
    #[error("subscribing to {subject} failed: {reason}; check the connection and permissions")]
    Subscribe {
        /// The subject.
        subject: String,
        /// The client's reason.
        reason: String,
    },
}

impl NatsError {
    /// A stable, machine-readable name of the error kind.
    pub fn kind(&self) -> &'static str {
        match self {
            NatsError::InvalidOptions { .. } => "invalid_options",
            NatsError::Connect { .. } => "connect",
            NatsError::JetStreamUnavailable { .. } => "jetstream_unavailable",
            NatsError::Subject(_) => "subject",
            NatsError::Stream { .. } => "stream",
            NatsError::NoStream { .. } => "no_stream",
            NatsError::WrongEventKind { .. } => "wrong_event_kind",
            NatsError::Publish { .. } => "publish",
            NatsError::Consumer { .. } => "consumer",
            NatsError::Receive { .. } => "receive",
            NatsError::Ack { .. } => "ack",
            NatsError::NotJetStream { .. } => "not_jetstream",
            NatsError::Bucket { .. } => "bucket",
            NatsError::InvalidKey { .. } => "invalid_key",
            NatsError::KeyExists { .. } => "key_exists",
            NatsError::RevisionConflict { .. } => "revision_conflict",
            NatsError::Kv { .. } => "kv",
            NatsError::Decode { .. } => "decode",
            NatsError::NoResponders { .. } => "no_responders",
            NatsError::RequestTimeout { .. } => "request_timeout",
            NatsError::Remote { .. } => "remote",
            NatsError::Request { .. } => "request",
            NatsError::Subscribe { .. } => "subscribe",
        }
    }

    /// Whether retrying the same operation later may succeed (network, timeouts), as opposed to
    /// errors that need a change (configuration, conflict, invalid input).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            NatsError::Connect { .. }
                | NatsError::Publish { .. }
                | NatsError::Receive { .. }
                | NatsError::Ack { .. }
                | NatsError::Kv { .. }
                | NatsError::RequestTimeout { .. }
                | NatsError::NoResponders { .. }
                | NatsError::Request { .. }
        )
    }
}

/// Result alias of this crate.
pub type Result<T, E = NatsError> = std::result::Result<T, E>;

/// Cuts a value to 64 characters for error messages.
pub(crate) fn truncate(s: &str) -> String {
    if s.chars().count() <= 64 {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(61).collect();
        t.push_str("...");
        t
    }
}
