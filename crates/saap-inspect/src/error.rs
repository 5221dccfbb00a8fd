//! Why an inspection failed. Every variant has a stable code (`SAAP-I0xx`), says what was
//! wrong and what to do, and tells the caller whether the input was at fault (a usage or input
//! error: exit code 2 of `docs/cli.md`) or the server or store (exit code 3).
//!
//! Must not carry secrets: server addresses are given without userinfo and client error texts
//! pass through `NatsOptions::sanitize` before they get here.

/// The failure of one inspection call.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum InspectError {
    /// The server did not accept a connection within the connect timeout.
    #[error(
        "SAAP-I001: cannot reach NATS at {url}: {reason}; check the address (--server), that nats-server runs, and the credential and TLS flags"
    )]
    Unreachable {
        /// The address, without credentials.
        url: String,
        /// What the client said.
        reason: String,
    },
    /// Connected, but JetStream does not answer for this account.
    #[error(
        "SAAP-I002: JetStream is not available on {url}: {reason}; start nats-server with -js (or a jetstream block) and give the account JetStream access"
    )]
    NoJetStream {
        /// The address, without credentials.
        url: String,
        /// What the server said.
        reason: String,
    },
    /// The named stream does not exist.
    #[error(
        "SAAP-I003: stream `{stream}` does not exist; list the streams with `saap inspect streams` (an agent class's stream is agent_{{Class}}_stream)"
    )]
    NoStream {
        /// The name asked for.
        stream: String,
    },
    /// No message at that sequence (never stored, deleted, or outside the stream's range).
    #[error(
        "SAAP-I004: `{stream}` has no message at sequence {seq} (it holds sequences {first} to {last}); pick one from `saap inspect view {stream}`"
    )]
    NoMessage {
        /// Stream (or workflow of a store).
        stream: String,
        /// The sequence asked for.
        seq: u64,
        /// First stored sequence.
        first: u64,
        /// Last stored sequence.
        last: u64,
    },
    /// The KV bucket does not exist.
    #[error(
        "SAAP-I005: KV bucket `{bucket}` does not exist; list the buckets with `saap inspect kv`"
    )]
    NoBucket {
        /// The bucket asked for.
        bucket: String,
    },
    /// The key is not in the bucket (or was deleted).
    #[error(
        "SAAP-I006: key `{key}` is not in bucket `{bucket}` (never written, deleted or expired); list its keys with `saap inspect kv {bucket}`"
    )]
    NoKey {
        /// Bucket.
        bucket: String,
        /// Key.
        key: String,
    },
    /// No event or journal entry of that run was found where it was looked for.
    #[error(
        "SAAP-I007: run `{run}` was not found in {place}; list the runs with `saap inspect runs`"
    )]
    NoRun {
        /// The run id asked for.
        run: String,
        /// Where it was looked for.
        place: String,
    },
    /// An argument is not usable (a time that does not parse, a filter on a stream that has
    /// no agent subjects, a bound out of range).
    #[error("SAAP-I008: {what}")]
    InvalidArgument {
        /// What is wrong and what to give instead.
        what: String,
    },
    /// The server answered an API call with an error or not in time.
    #[error(
        "SAAP-I009: the NATS server failed {operation}: {reason}; retry, and if it persists check the server's log"
    )]
    Server {
        /// What was asked.
        operation: String,
        /// What the server or client said.
        reason: String,
    },
    /// The store file does not exist.
    #[error("SAAP-I010: no store at `{path}`; give the database an agent writes (its --db PATH)")]
    NoStore {
        /// The path given.
        path: String,
    },
    /// The file is not a saap store, or one of a schema this build does not read.
    #[error("SAAP-I011: `{path}` is not a saap store this version reads: {reason}")]
    NotAStore {
        /// The path given.
        path: String,
        /// Why.
        reason: String,
    },
    /// A running agent owns the store exclusively.
    #[error(
        "SAAP-I012: `{path}` is locked by the agent that owns it ({reason}); stop the agent, or inspect a copy of the file (cp it with its -wal file while the agent is stopped)"
    )]
    StoreBusy {
        /// The path given.
        path: String,
        /// What SQLite said.
        reason: String,
    },
    /// Reading the store failed.
    #[error(
        "SAAP-I013: reading `{path}` failed: {reason}; the file may be damaged: check it with `sqlite3 {path} 'PRAGMA integrity_check'`"
    )]
    StoreRead {
        /// The path given.
        path: String,
        /// What SQLite said.
        reason: String,
    },
    /// The run has more events or journal entries than a recorded run may have to be
    /// explained ([`crate::recorded::MAX_RUN_ENTRIES`]).
    #[error(
        "SAAP-I014: run `{run}` has more than {max} {what}, more than `explain --run` reads; look at it a page at a time with `saap inspect run {run}`"
    )]
    RunTooLarge {
        /// The run id.
        run: String,
        /// The bound.
        max: usize,
        /// What was counted (journal entries, events).
        what: String,
    },
    /// A message or journal entry of the run does not decode, so the run cannot be rebuilt.
    #[error(
        "SAAP-I015: run `{run}` cannot be rebuilt: {at} does not decode ({reason}); see it with `saap inspect run {run}`"
    )]
    UndecodableRun {
        /// The run id.
        run: String,
        /// Which message or entry.
        at: String,
        /// Why it does not decode.
        reason: String,
    },
    /// The spec given does not reproduce the recorded run.
    #[error("SAAP-I016: run `{run}` does not replay against this spec: {detail}")]
    SpecMismatch {
        /// The run id.
        run: String,
        /// Which event or step disagrees, and what to do.
        detail: String,
    },
    /// No spec was given and none could be found.
    #[error("SAAP-I017: no spec for agent class `{class}`: {reason}")]
    NoSpec {
        /// The agent class.
        class: String,
        /// Why none was found and what to give instead.
        reason: String,
    },
}

impl InspectError {
    /// The stable code, e.g. `SAAP-I003`.
    pub fn code(&self) -> &'static str {
        match self {
            InspectError::Unreachable { .. } => "SAAP-I001",
            InspectError::NoJetStream { .. } => "SAAP-I002",
            InspectError::NoStream { .. } => "SAAP-I003",
            InspectError::NoMessage { .. } => "SAAP-I004",
            InspectError::NoBucket { .. } => "SAAP-I005",
            InspectError::NoKey { .. } => "SAAP-I006",
            InspectError::NoRun { .. } => "SAAP-I007",
            InspectError::InvalidArgument { .. } => "SAAP-I008",
            InspectError::Server { .. } => "SAAP-I009",
            InspectError::NoStore { .. } => "SAAP-I010",
            InspectError::NotAStore { .. } => "SAAP-I011",
            InspectError::StoreBusy { .. } => "SAAP-I012",
            InspectError::StoreRead { .. } => "SAAP-I013",
            InspectError::RunTooLarge { .. } => "SAAP-I014",
            InspectError::UndecodableRun { .. } => "SAAP-I015",
            InspectError::SpecMismatch { .. } => "SAAP-I016",
            InspectError::NoSpec { .. } => "SAAP-I017",
        }
    }

    /// True when the input was at fault (exit code 2): a name, sequence, key, run, argument or
    /// file that does not exist or is not usable. False for server and store failures (exit
    /// code 3).
    pub fn is_input_error(&self) -> bool {
        matches!(
            self,
            InspectError::NoStream { .. }
                | InspectError::NoMessage { .. }
                | InspectError::NoBucket { .. }
                | InspectError::NoKey { .. }
                | InspectError::NoRun { .. }
                | InspectError::InvalidArgument { .. }
                | InspectError::NoStore { .. }
                | InspectError::NotAStore { .. }
                | InspectError::RunTooLarge { .. }
                | InspectError::UndecodableRun { .. }
                | InspectError::SpecMismatch { .. }
                | InspectError::NoSpec { .. }
        )
    }
}

/// Result alias of this crate.
pub type Result<T, E = InspectError> = std::result::Result<T, E>;

/// `InvalidArgument` from a message.
pub(crate) fn invalid(what: impl Into<String>) -> InspectError {
    InspectError::InvalidArgument { what: what.into() }
}

/// Cuts user-given text to 64 characters for error messages.
pub(crate) fn clip(s: &str) -> String {
    if s.chars().count() <= 64 {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(61).collect();
        t.push_str("...");
        t
    }
}
