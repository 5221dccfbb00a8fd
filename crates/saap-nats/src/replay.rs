//! Replay of stored control events, in stream order, for rebuilding runs after a restart
//! (DESIGN §4.9; the Python event store drains a replay consumer at start, notes §2.5).
//!
//! A replay uses an ordered consumer (ephemeral, no acknowledgements, flow-controlled and
//! re-created by the client on gaps), reads what is stored at the moment it starts and ends
//! there: [`Replay::next`] returns `None` once the last message that was pending at creation
//! has been returned. Events stored later arrive through the runner consumer.

use async_nats::jetstream;
use async_nats::jetstream::consumer::{DeliverPolicy, pull};
use bytes::Bytes;
use futures_util::StreamExt;
use saap_protocol::subject::{class_control_filter, stream_name};
use saap_protocol::{
    AgentEventFilter, AgentEventSubject, DecodeError, DecodeLimits, EventEnvelope, EventKind,
    Hierarchy, RunAddress, SubjectError,
};

use crate::client::SaapNats;
use crate::error::{NatsError, Result};

/// Which stored control events to replay.
#[derive(Clone, Debug, Default)]
pub struct ReplayScope {
    /// Only this run's events (all runs of the class if `None`).
    pub run: Option<RunAddress>,
    /// Start at this stream sequence (the beginning if `None`).
    pub from_sequence: Option<u64>,
}

/// One stored control event.
#[derive(Clone, Debug)]
pub struct StoredEvent {
    /// Stream sequence (arrival order in the class).
    pub sequence: u64,
    /// The subject it was published on.
    pub subject: String,
    /// The payload (event JSON).
    pub payload: Bytes,
}

impl StoredEvent {
    /// The parsed subject.
    pub fn parsed_subject(&self) -> std::result::Result<AgentEventSubject, SubjectError> {
        AgentEventSubject::parse(&self.subject)
    }

    /// Decodes the payload.
    pub fn decode(
        &self,
        hierarchy: &Hierarchy,
        limits: &DecodeLimits,
    ) -> std::result::Result<EventEnvelope, DecodeError> {
        EventEnvelope::decode(&self.payload, hierarchy, limits)
    }
}

/// A running replay.
pub struct Replay {
    stream: String,
    remaining: u64,
    messages: Option<pull::Ordered>,
}

impl std::fmt::Debug for Replay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replay")
            .field("stream", &self.stream)
            .field("remaining", &self.remaining)
            .finish_non_exhaustive()
    }
}

impl Replay {
    /// How many stored events are still to come.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// The next stored event in stream order; `None` at the end of what was stored when the
    /// replay started.
    pub async fn next(&mut self) -> Option<Result<StoredEvent>> {
        if self.remaining == 0 {
            self.messages = None; // the server reaps the idle ephemeral consumer
            return None;
        }
        let messages = self.messages.as_mut()?;
        let m = match messages.next().await? {
            Ok(m) => m,
            Err(e) => {
                return Some(Err(NatsError::Receive {
                    source_name: format!("replay of {}", self.stream),
                    reason: e.to_string(),
                }));
            }
        };
        let info = match m.info() {
            Ok(i) => (i.stream_sequence, i.pending),
            Err(e) => {
                return Some(Err(NatsError::NotJetStream {
                    subject: m.subject.to_string(),
                    reason: e.to_string(),
                }));
            }
        };
        self.remaining = info.1;
        let (msg, _acker) = m.split();
        Some(Ok(StoredEvent {
            sequence: info.0,
            subject: msg.subject.to_string(),
            payload: msg.payload,
        }))
    }

    /// Reads the rest into a vector.
    pub async fn collect(mut self) -> Result<Vec<StoredEvent>> {
        let mut out = Vec::new();
        while let Some(e) = self.next().await {
            out.push(e?);
        }
        Ok(out)
    }
}

impl SaapNats {
    /// Starts a replay of `agent_class`'s stored control events in `scope`.
    pub async fn replay_control(&self, agent_class: &str, scope: &ReplayScope) -> Result<Replay> {
        let stream_name = stream_name(agent_class)?;
        let filter = match &scope.run {
            Some(run) => {
                if run.agent_class() != agent_class {
                    return Err(NatsError::InvalidOptions {
                        reason: format!(
                            "replay of class {agent_class} asked for a run of class {}",
                            run.agent_class()
                        ),
                    });
                }
                AgentEventFilter::all()
                    .class(agent_class)
                    .instance(run.agent_id())
                    .thread(run.thread_id())
                    .display(run.display_id())
                    .run(run.run_id())
                    .kind(EventKind::Control)
                    .to_subject()?
            }
            None => class_control_filter(agent_class)?,
        };
        let err = |reason: String| NatsError::Stream {
            stream: stream_name.clone(),
            reason,
        };
        let stream = self
            .js
            .get_stream(&stream_name)
            .await
            .map_err(|e| err(format!("cannot read it for a replay: {e}")))?;
        let mut consumer: jetstream::consumer::Consumer<pull::OrderedConfig> = stream
            .create_consumer(pull::OrderedConfig {
                filter_subject: filter,
                deliver_policy: match scope.from_sequence {
                    Some(start_sequence) => DeliverPolicy::ByStartSequence { start_sequence },
                    None => DeliverPolicy::All,
                },
                ..Default::default()
            })
            .await
            .map_err(|e| err(format!("cannot create a replay consumer: {e}")))?;
        let remaining = consumer
            .info()
            .await
            .map_err(|e| err(format!("cannot read the replay consumer: {e}")))?
            .num_pending;
        let messages = if remaining == 0 {
            None
        } else {
            Some(
                consumer
                    .messages()
                    .await
                    .map_err(|e| err(format!("cannot start the replay: {e}")))?,
            )
        };
        Ok(Replay {
            stream: stream_name,
            remaining,
            messages,
        })
    }
}
