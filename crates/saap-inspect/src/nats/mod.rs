//! Inspecting a live NATS server: the server and its account, JetStream streams (list, state,
//! subjects by event type), messages in order ([`view`]), one message by sequence, KV buckets
//! ([`kv`]) and the runs of an agent class stream ([`runs`]).
//!
//! Read-only by construction: nothing here publishes, creates a stream or bucket, or acks. The
//! only server-side objects it creates are ephemeral pull consumers (no acks, memory storage,
//! a short inactivity threshold) that each call deletes when it is done; KV key listings use
//! the client's ordered consumer, which the server reaps. Every call is bounded: the connect
//! and request timeouts of [`saap_nats::NatsOptions`], and a limit on every list.

pub mod kv;
pub mod runs;
pub mod view;

use crate::error::{InspectError, Result, clip};
use crate::model::{
    ConsumerSummary, EventCount, ServerReport, SourceKind, StreamReport, StreamSummary,
};
use crate::query::MAX_SUBJECTS;
use crate::timefmt::format_time;
use async_nats::jetstream;
use async_nats::jetstream::ErrorCode;
use async_nats::jetstream::context::GetStreamErrorKind;
use futures_util::{StreamExt, TryStreamExt};
use saap_nats::{NatsError, NatsOptions, SaapNats};
use serde_json::{Value, json};
use std::collections::HashMap;

/// The most streams `streams` lists.
pub const MAX_STREAMS: usize = 10_000;
/// The most consumers `stream NAME` lists.
pub const MAX_CONSUMERS: usize = 100;

/// A read-only view of one NATS server.
#[derive(Clone, Debug)]
pub struct NatsInspector {
    nats: SaapNats,
    url: String,
    /// The longest wait for any one answer of the server (the request timeout).
    wait: std::time::Duration,
}

impl NatsInspector {
    /// Connects (bounded by `options.connect_timeout`) and checks that JetStream answers.
    pub async fn connect(options: &NatsOptions) -> Result<NatsInspector> {
        let url = options.redacted_servers();
        let connect = SaapNats::connect(options);
        // The client's own timeout covers one attempt; this bounds DNS and TLS as well.
        let bound = options.connect_timeout + options.request_timeout;
        let nats = match tokio::time::timeout(bound, connect).await {
            Ok(Ok(n)) => n,
            Ok(Err(NatsError::InvalidOptions { reason })) => {
                return Err(InspectError::InvalidArgument {
                    what: format!("the connection settings are not usable: {reason}"),
                });
            }
            Ok(Err(e)) => {
                return Err(InspectError::Unreachable {
                    url,
                    reason: options.sanitize(&connect_reason(&e)),
                });
            }
            Err(_) => {
                return Err(InspectError::Unreachable {
                    url,
                    reason: format!("no answer within {bound:?}"),
                });
            }
        };
        if let Err(e) = nats.check_jetstream().await {
            return Err(InspectError::NoJetStream {
                url,
                reason: options.sanitize(&e.to_string()),
            });
        }
        Ok(NatsInspector {
            nats,
            url,
            wait: options.request_timeout,
        })
    }

    /// The JetStream context.
    pub(crate) fn js(&self) -> &jetstream::Context {
        self.nats.jetstream()
    }

    /// The client.
    pub(crate) fn nats(&self) -> &SaapNats {
        &self.nats
    }

    /// The longest wait for one answer.
    pub(crate) fn wait(&self) -> std::time::Duration {
        self.wait
    }

    /// The server address (without credentials).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `server`: the server's INFO and the account's JetStream usage and limits.
    pub async fn server(&self) -> Result<ServerReport> {
        let info = self.nats.client().server_info();
        let account = self
            .js()
            .query_account()
            .await
            .map_err(|e| server_err("the account query", e))?;
        let limit = |v: Option<i64>| v.map_or(Value::Null, |v| json!(v));
        let facts = vec![
            ("url".to_owned(), json!(self.url)),
            (
                "host".to_owned(),
                json!(format!("{}:{}", info.host, info.port)),
            ),
            ("go".to_owned(), json!(info.go)),
            ("jetstream".to_owned(), json!(info.jetstream)),
            ("cluster".to_owned(), json!(info.cluster)),
            ("domain".to_owned(), json!(info.domain)),
            ("max_payload".to_owned(), json!(info.max_payload)),
            ("headers".to_owned(), json!(info.headers)),
            ("auth_required".to_owned(), json!(info.auth_required)),
            ("tls_required".to_owned(), json!(info.tls_required)),
            ("lame_duck_mode".to_owned(), json!(info.lame_duck_mode)),
            ("connect_urls".to_owned(), json!(info.connect_urls)),
            ("streams".to_owned(), json!(account.streams)),
            ("consumers".to_owned(), json!(account.consumers)),
            ("memory_bytes".to_owned(), json!(account.memory)),
            ("storage_bytes".to_owned(), json!(account.storage)),
            ("max_memory".to_owned(), limit(account.limits.max_memory)),
            ("max_storage".to_owned(), limit(account.limits.max_storage)),
            ("max_streams".to_owned(), limit(account.limits.max_streams)),
            (
                "max_consumers".to_owned(),
                limit(account.limits.max_consumers),
            ),
            ("api_requests".to_owned(), json!(account.requests.total)),
            ("api_errors".to_owned(), json!(account.requests.errors)),
        ];
        Ok(ServerReport {
            source: SourceKind::Nats,
            name: info.server_name.clone(),
            id: info.server_id.clone(),
            version: info.version.clone(),
            facts,
        })
    }

    /// `streams`: every stream (at most `limit`, at most [`MAX_STREAMS`]), sorted by name.
    pub async fn streams(&self, limit: usize) -> Result<(Vec<StreamSummary>, bool)> {
        let limit = limit.clamp(1, MAX_STREAMS);
        let mut list = self.js().streams();
        let mut out = Vec::new();
        let mut truncated = false;
        while let Some(info) = list.next().await {
            let info = info.map_err(|e| server_err("the stream listing", e))?;
            if out.len() == limit {
                truncated = true;
                break;
            }
            out.push(summary(&info));
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok((out, truncated))
    }

    /// The stream's current info, or `NoStream`.
    pub(crate) async fn stream(&self, name: &str) -> Result<jetstream::stream::Stream> {
        match self.js().get_stream(name).await {
            Ok(s) => Ok(s),
            Err(e) if is_not_found(e.kind()) => Err(InspectError::NoStream { stream: clip(name) }),
            Err(e)
                if matches!(
                    e.kind(),
                    GetStreamErrorKind::InvalidStreamName | GetStreamErrorKind::EmptyName
                ) =>
            {
                Err(InspectError::NoStream { stream: clip(name) })
            }
            Err(e) => Err(server_err(&format!("reading stream `{}`", clip(name)), e)),
        }
    }

    /// `stream NAME`: configuration, state, consumers, and the stored messages per event type
    /// (counted from at most `max_subjects` distinct subjects, at most [`MAX_SUBJECTS`]).
    pub async fn stream_report(&self, name: &str, max_subjects: u64) -> Result<StreamReport> {
        let max_subjects = max_subjects.clamp(1, MAX_SUBJECTS);
        let stream = self.stream(name).await?;
        let info = stream.cached_info().clone();
        let mut counts: HashMap<(String, String), u64> = HashMap::new();
        let mut scanned = 0u64;
        let mut truncated = false;
        if info.state.messages > 0 {
            let mut subjects = stream
                .info_with_subjects(">")
                .await
                .map_err(|e| server_err("the subject listing", e))?;
            loop {
                if scanned >= max_subjects {
                    truncated = true;
                    break;
                }
                match subjects.try_next().await {
                    Ok(Some((subject, count))) => {
                        scanned += 1;
                        *counts.entry(event_key(&subject)).or_default() += count as u64;
                    }
                    Ok(None) => break,
                    Err(e) => return Err(server_err("the subject listing", e)),
                }
            }
        }
        let mut events: Vec<EventCount> = counts
            .into_iter()
            .map(|((kind, event_name), count)| EventCount {
                kind,
                event_name,
                count,
            })
            .collect();
        events.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then_with(|| a.event_name.cmp(&b.event_name))
                .then_with(|| a.kind.cmp(&b.kind))
        });
        let mut consumer_list = Vec::new();
        let mut consumers = stream.consumers();
        while let Some(c) = consumers.next().await {
            let c = c.map_err(|e| server_err("the consumer listing", e))?;
            if consumer_list.len() == MAX_CONSUMERS {
                break;
            }
            let filter = if c.config.filter_subjects.is_empty() {
                c.config.filter_subject.clone()
            } else {
                c.config.filter_subjects.join(",")
            };
            consumer_list.push(ConsumerSummary {
                name: c.name.clone(),
                filter,
                pending: c.num_pending,
                ack_pending: c.num_ack_pending as u64,
                redelivered: c.num_redelivered as u64,
            });
        }
        consumer_list.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(StreamReport {
            summary: summary(&info),
            config: serde_json::to_value(&info.config).unwrap_or(Value::Null),
            deleted: info.state.deleted_count.unwrap_or(0),
            subjects_total: info.state.subjects_count,
            events,
            subjects_scanned: scanned,
            truncated,
            consumer_list,
        })
    }

    /// Streams that store `subject` (wildcards allowed), by name.
    pub(crate) async fn streams_for_subject(&self, subject: &str) -> Result<Vec<String>> {
        let answer: Value = self
            .js()
            .request("STREAM.NAMES", &json!({ "subject": subject }))
            .await
            .map_err(|e| server_err("the stream lookup", e))?;
        if let Some(err) = answer.get("error") {
            return Err(InspectError::Server {
                operation: "the stream lookup".to_owned(),
                reason: err.to_string(),
            });
        }
        let mut names: Vec<String> = answer
            .get("streams")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        Ok(names)
    }
}

/// `(kind, event name)` of a subject: the agent-subject tokens, else `("", subject)`.
fn event_key(subject: &str) -> (String, String) {
    let t: Vec<&str> = subject.split('.').collect();
    if t.len() == 9 && t[0] == "agent" {
        (t[6].to_owned(), t[7].to_owned())
    } else if t.len() == 4 && t[0] == "saap" && t[1] == "journal" {
        ("journal".to_owned(), format!("saap.journal.{}.*", t[2]))
    } else {
        (String::new(), subject.to_owned())
    }
}

/// What saap knows a stream as, and its agent class.
pub fn role_of(name: &str) -> (String, Option<String>) {
    if let Some(class) = name
        .strip_prefix("agent_")
        .and_then(|r| r.strip_suffix("_stream"))
    {
        return ("agent_class".to_owned(), Some(class.to_owned()));
    }
    if let Some(class) = name.strip_prefix("saap_journal_") {
        return ("journal".to_owned(), Some(class.to_owned()));
    }
    if let Some(class) = name.strip_prefix("saap_work_") {
        return ("work_queue".to_owned(), Some(class.to_owned()));
    }
    if name.starts_with("KV_") {
        return ("kv".to_owned(), None);
    }
    ("other".to_owned(), None)
}

fn summary(info: &jetstream::stream::Info) -> StreamSummary {
    let (role, agent_class) = role_of(&info.config.name);
    let s = &info.state;
    let empty = s.messages == 0;
    StreamSummary {
        name: info.config.name.clone(),
        role,
        agent_class,
        subjects: info.config.subjects.clone(),
        messages: s.messages,
        bytes: s.bytes,
        first_seq: if empty { 0 } else { s.first_sequence },
        last_seq: s.last_sequence,
        first_time: (!empty).then(|| format_time(s.first_timestamp)),
        last_time: (!empty).then(|| format_time(s.last_timestamp)),
        consumers: s.consumer_count as u64,
    }
}

fn is_not_found(kind: GetStreamErrorKind) -> bool {
    matches!(kind, GetStreamErrorKind::JetStream(e) if e.error_code() == ErrorCode::STREAM_NOT_FOUND)
}

/// A server failure of `operation`.
pub(crate) fn server_err(operation: &str, e: impl std::fmt::Display) -> InspectError {
    InspectError::Server {
        operation: operation.to_owned(),
        reason: e.to_string(),
    }
}

fn connect_reason(e: &NatsError) -> String {
    match e {
        NatsError::Connect { reason, .. } => reason.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_and_event_keys_follow_saap_names() {
        assert_eq!(
            role_of("agent_RagAgent_stream"),
            ("agent_class".to_owned(), Some("RagAgent".to_owned()))
        );
        assert_eq!(role_of("saap_journal_Rag").0, "journal");
        assert_eq!(role_of("KV_x").0, "kv");
        assert_eq!(role_of("orders").0, "other");
        assert_eq!(
            event_key("agent.A.a.t.d.r.control_event.Q.0123"),
            ("control_event".to_owned(), "Q".to_owned())
        );
        assert_eq!(
            event_key("orders.new"),
            (String::new(), "orders.new".to_owned())
        );
    }
}
