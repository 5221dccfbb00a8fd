//! The runners' durable consumer of a class's control events.
//!
//! As in the Python implementation (notes §2.5, §2.7): a durable push consumer named
//! `agent_runner_{Class}` whose deliver group (queue group) has the same name, filtered on
//! `agent.{Class}.*.*.*.*.control_event.*.*`, explicit acknowledgement. Every worker process
//! of the class binds to it; each message goes to one of them. Unlike the Python runner
//! (which acknowledges on receipt), nothing is acknowledged until the caller says so with
//! [`Delivery::ack`] — the engine acknowledges after the event is durable and processed; an
//! unacknowledged message is redelivered after the ack wait with a higher
//! [`DeliveryInfo::delivered`] count.

use std::collections::BTreeMap;
use std::time::Duration;

use async_nats::jetstream;
use async_nats::jetstream::AckKind;
use async_nats::jetstream::consumer::push;
use async_nats::jetstream::message::Acker;
use bytes::Bytes;
use futures_util::StreamExt;
use saap_protocol::subject::{ConsumerConfig, is_aihub_header, stream_name};
use saap_protocol::{
    AgentEventSubject, DecodeError, DecodeLimits, EventEnvelope, Hierarchy, SubjectError,
};
use tracing::{debug, info};

use crate::client::{SaapNats, is_consumer_not_found};
use crate::error::{NatsError, Result};

/// The subject the server pushes a class's runner consumer to, when this crate creates it.
/// Deterministic, so that concurrent workers creating the consumer agree on it. An existing
/// consumer (e.g. created by a Python runner) keeps its own deliver subject.
pub fn deliver_subject(durable_name: &str) -> String {
    format!("_SAAP.deliver.{durable_name}")
}

/// A bound runner consumer: a queue subscription on the consumer's deliver subject.
pub struct ControlConsumer {
    name: String,
    stream: String,
    max_deliver: i64,
    messages: push::Messages,
}

impl std::fmt::Debug for ControlConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlConsumer")
            .field("name", &self.name)
            .field("stream", &self.stream)
            .finish_non_exhaustive()
    }
}

/// Header the saap engine sets on step outputs it publishes after journaling them.
pub const JOURNALED_HEADER: &str = "Saap-Journaled";

/// JetStream delivery metadata of one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeliveryInfo {
    /// Sequence of the message in the stream (its arrival order in the class).
    pub stream_sequence: u64,
    /// Sequence of this delivery in the consumer.
    pub consumer_sequence: u64,
    /// How many times the message has been delivered (1 the first time; ≥ 2 is a redelivery).
    pub delivered: u64,
    /// True if the consumer will not deliver it again (its maximum number of deliveries is
    /// reached): unless it is acknowledged now, JetStream gives up on it silently, so the
    /// engine must record the failure (an ExceptionEvent) before letting go.
    pub last_attempt: bool,
    /// Messages still pending for the consumer.
    pub pending: u64,
}

/// One delivered control event. Dropping it without [`Delivery::ack`] leaves it
/// unacknowledged: the server redelivers it after the ack wait.
pub struct Delivery {
    /// The subject it was published on.
    pub subject: String,
    /// The raw payload (the event JSON).
    pub payload: Bytes,
    /// Its `X-AIHub-*` headers, names lower-cased (notes §2.6).
    pub aihub_headers: BTreeMap<String, String>,
    /// The `Nats-Msg-Id` header, if any.
    pub msg_id: Option<String>,
    /// The `Saap-Journaled` header is set: the engine that owns the event's run published it
    /// after journaling it (a step's output), so it needs no dispatch.
    pub journaled: bool,
    /// Delivery metadata.
    pub info: DeliveryInfo,
    acker: Acker,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("subject", &self.subject)
            .field("payload_len", &self.payload.len())
            .field("msg_id", &self.msg_id)
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl Delivery {
    /// The parsed subject (run address, event name, subject event id).
    pub fn parsed_subject(&self) -> std::result::Result<AgentEventSubject, SubjectError> {
        AgentEventSubject::parse(&self.subject)
    }

    /// Decodes the payload as an event.
    pub fn decode(
        &self,
        hierarchy: &Hierarchy,
        limits: &DecodeLimits,
    ) -> std::result::Result<EventEnvelope, DecodeError> {
        EventEnvelope::decode(&self.payload, hierarchy, limits)
    }

    /// Acknowledges the message and waits until the server confirms it (a double ack), so a
    /// returned `Ok` means the server recorded it and will not redeliver it while it runs and
    /// after a graceful stop. A crash of the server (kill -9) can still lose the
    /// acknowledgement, since the consumer state is written lazily: the message then comes
    /// again, possibly as a first delivery (`delivered == 1`); handlers stay idempotent.
    pub async fn ack(self) -> Result<()> {
        let seq = self.info.stream_sequence;
        self.acker.double_ack().await.map_err(|e| NatsError::Ack {
            stream_sequence: seq,
            reason: e.to_string(),
        })?;
        debug!(stream_sequence = seq, "acknowledged");
        Ok(())
    }

    /// Asks for redelivery, after `delay` if given (a negative acknowledgement).
    pub async fn nak(self, delay: Option<Duration>) -> Result<()> {
        let seq = self.info.stream_sequence;
        self.acker
            .ack_with(AckKind::Nak(delay))
            .await
            .map_err(|e| NatsError::Ack {
                stream_sequence: seq,
                reason: e.to_string(),
            })
    }

    /// Tells the server that processing goes on: resets the ack wait.
    pub async fn in_progress(&self) -> Result<()> {
        self.acker
            .ack_with(AckKind::Progress)
            .await
            .map_err(|e| NatsError::Ack {
                stream_sequence: self.info.stream_sequence,
                reason: e.to_string(),
            })
    }

    /// Stops redelivery for good (for a message that can never be processed, e.g. undecodable;
    /// the caller records the evidence first).
    pub async fn term(self) -> Result<()> {
        let seq = self.info.stream_sequence;
        self.acker
            .ack_with(AckKind::Term)
            .await
            .map_err(|e| NatsError::Ack {
                stream_sequence: seq,
                reason: e.to_string(),
            })
    }
}

impl ControlConsumer {
    /// The durable (and queue group) name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The stream name.
    pub fn stream(&self) -> &str {
        &self.stream
    }

    /// The next delivery; `None` when the subscription ended (connection closed).
    pub async fn next(&mut self) -> Option<Result<Delivery>> {
        let msg = self.messages.next().await?;
        Some(match msg {
            Ok(m) => to_delivery(m, self.max_deliver),
            Err(e) => Err(NatsError::Receive {
                source_name: self.name.clone(),
                reason: e.to_string(),
            }),
        })
    }
}

fn to_delivery(m: jetstream::Message, max_deliver: i64) -> Result<Delivery> {
    let info = m.info().map_err(|e| NatsError::NotJetStream {
        subject: m.subject.to_string(),
        reason: e.to_string(),
    })?;
    let info = DeliveryInfo {
        stream_sequence: info.stream_sequence,
        consumer_sequence: info.consumer_sequence,
        delivered: u64::try_from(info.delivered).unwrap_or(0),
        last_attempt: max_deliver > 0 && info.delivered >= max_deliver,
        pending: info.pending,
    };
    let (msg, acker) = m.split();
    let mut aihub_headers = BTreeMap::new();
    let mut msg_id = None;
    let mut journaled = false;
    if let Some(h) = &msg.headers {
        for (name, values) in h.iter() {
            let n: &str = name.as_ref();
            if n.eq_ignore_ascii_case(JOURNALED_HEADER) {
                journaled = true;
            } else if n.eq_ignore_ascii_case(saap_protocol::subject::NATS_MSG_ID_HEADER) {
                msg_id = values.first().map(|v| v.as_str().to_owned());
            } else if is_aihub_header(n)
                && let Some(v) = values.first()
            {
                aihub_headers.insert(n.to_ascii_lowercase(), v.as_str().to_owned());
            }
        }
    }
    Ok(Delivery {
        subject: msg.subject.to_string(),
        payload: msg.payload,
        aihub_headers,
        msg_id,
        journaled,
        info,
        acker,
    })
}

impl SaapNats {
    /// Binds to the runner consumer of `agent_class` with the Python-compatible settings
    /// ([`ConsumerConfig::for_agent_class`]: ack wait 30 s, at most 5 deliveries), creating it
    /// if needed. The class's stream must exist ([`SaapNats::ensure_stream`]).
    pub async fn control_consumer(&self, agent_class: &str) -> Result<ControlConsumer> {
        let config = ConsumerConfig::for_agent_class(agent_class)?;
        self.control_consumer_with(agent_class, &config).await
    }

    /// [`SaapNats::control_consumer`] with explicit settings. An existing consumer keeps its
    /// deliver subject; its ack wait and maximum deliveries are brought to `config` (as the
    /// Python runner corrects drift on start).
    pub async fn control_consumer_with(
        &self,
        agent_class: &str,
        config: &ConsumerConfig,
    ) -> Result<ControlConsumer> {
        let stream_name = stream_name(agent_class)?;
        let err = |reason: String| NatsError::Consumer {
            consumer: config.durable_name.clone(),
            stream: stream_name.clone(),
            reason,
        };
        let stream = self.js.get_stream(&stream_name).await.map_err(|e| {
            err(format!(
                "cannot read the stream: {e}; call ensure_stream for {agent_class} first"
            ))
        })?;
        let existing_deliver = match stream.consumer_info(&config.durable_name).await {
            Ok(info) => match info.config.deliver_subject.clone() {
                Some(s) => Some(s),
                None => {
                    return Err(err(
                        "it exists as a pull consumer; delete it (nats consumer rm) or use another name"
                            .to_owned(),
                    ));
                }
            },
            Err(e) if is_consumer_not_found(&e.kind()) => None,
            Err(e) => return Err(err(format!("cannot read it: {e}"))),
        };
        let created = existing_deliver.is_none();
        let js_config = push::Config {
            deliver_subject: existing_deliver
                .unwrap_or_else(|| deliver_subject(&config.durable_name)),
            durable_name: Some(config.durable_name.clone()),
            deliver_group: Some(config.deliver_group.clone()),
            filter_subject: config.filter_subject.clone(),
            ack_policy: if config.ack_explicit {
                jetstream::consumer::AckPolicy::Explicit
            } else {
                jetstream::consumer::AckPolicy::None
            },
            ack_wait: config.ack_wait,
            max_deliver: config.max_deliver,
            deliver_policy: jetstream::consumer::DeliverPolicy::All,
            num_replicas: 0,
            ..Default::default()
        };
        let consumer: jetstream::consumer::Consumer<push::Config> = stream
            .create_consumer(js_config)
            .await
            .map_err(|e| err(format!("cannot create or update it: {e}")))?;
        let messages = consumer
            .messages()
            .await
            .map_err(|e| err(format!("cannot subscribe to its deliver subject: {e}")))?;
        // The queue subscription is registered at the server before we return.
        self.sync().await?;
        info!(consumer = %config.durable_name, stream = %stream_name, created, "bound to the runner consumer");
        Ok(ControlConsumer {
            name: config.durable_name.clone(),
            stream: stream_name,
            max_deliver: consumer.cached_info().config.max_deliver,
            messages,
        })
    }
}
