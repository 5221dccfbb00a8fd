//! Messages of a stream in order, one page at a time, and one message by sequence.
//!
//! A page is read through an ephemeral pull consumer created for it (no acks, memory storage,
//! filtered on the server by subject: run, thread, kind and event name are subject tokens) and
//! deleted afterwards; it never reads more than the page plus one message (to know whether more
//! follow), except when a time bound skips messages, and then at most [`MAX_SCAN`]. One message
//! that does not decode is returned raw with its reason; the rest of the page still comes.
//!
//! Must not publish, ack, or create anything durable.

use super::{NatsInspector, server_err};
use crate::decode::{MAX_HEADERS, clip_header, stream_message};
use crate::error::{InspectError, Result, invalid};
use crate::model::{Message, Page};
use crate::query::{MAX_SCAN, ViewQuery};
use crate::timefmt::{datetime_of, format_time, nanos_of};
use async_nats::jetstream;
use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, PullConsumer, pull};
use async_nats::jetstream::stream::RawMessageErrorKind;
use futures_util::StreamExt;
use std::time::Duration;

/// How long the server keeps a page's consumer if this process dies before deleting it.
const CONSUMER_IDLE: Duration = Duration::from_secs(30);
/// Messages asked for per pull request.
const FETCH_BATCH: usize = 1000;

/// Where a read starts.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Start {
    All,
    Seq(u64),
    Time(i64),
}

impl NatsInspector {
    /// `view STREAM`: a page of messages in stream order, decoded.
    pub async fn view(&self, name: &str, q: &ViewQuery) -> Result<Page> {
        q.check()?;
        let limit = q.page_size()?;
        let stream = self.stream(name).await?;
        let info = stream.cached_info().clone();
        let filter = filter_subject(&info.config, q)?;
        let last_seq = info.state.last_sequence;
        let start = match (q.last, q.from_seq, q.since_ns) {
            (Some(n), _, _) => {
                if filter.is_some() {
                    return Err(invalid(
                        "--last counts back over the whole stream; with a filter, use --since or --from",
                    ));
                }
                Start::Seq(
                    last_seq
                        .saturating_sub(n.max(1))
                        .saturating_add(1)
                        .max(info.state.first_sequence),
                )
            }
            (None, Some(seq), _) => Start::Seq(seq.max(1)),
            (None, None, Some(ns)) => Start::Time(ns),
            (None, None, None) => Start::All,
        };
        let mut messages = Vec::with_capacity(limit.min(1024) + 1);
        let mut more = false;
        let mut next_seq = None;
        if info.state.messages > 0 {
            let want = limit + 1;
            let mut scanned = 0u64;
            self.read(
                &stream,
                filter.as_deref(),
                start,
                |m| {
                    scanned += 1;
                    let ns = m.info().map(|i| nanos_of(i.published)).unwrap_or(0);
                    if q.since_ns.is_some_and(|s| ns < s) {
                        return if scanned >= MAX_SCAN {
                            Flow::StopMore(seq_of(m))
                        } else {
                            Flow::Skip
                        };
                    }
                    if q.until_ns.is_some_and(|u| ns > u) {
                        return Flow::Stop;
                    }
                    if messages.len() + 1 == want {
                        return Flow::StopMore(seq_of(m));
                    }
                    messages.push(to_message(m));
                    Flow::Continue
                },
                want,
            )
            .await
            .map(|cut| {
                if let Some(seq) = cut {
                    more = true;
                    next_seq = Some(seq);
                }
            })?;
        }
        let undecodable = messages.iter().filter(|m| m.undecodable.is_some()).count() as u64;
        Ok(Page {
            stream: info.config.name.clone(),
            filter,
            messages,
            undecodable,
            more,
            next_seq,
            last_seq,
        })
    }

    /// `get STREAM SEQ`: one message.
    pub async fn get(&self, name: &str, seq: u64) -> Result<Message> {
        let stream = self.stream(name).await?;
        let st = &stream.cached_info().state;
        match stream.get_raw_message(seq).await {
            Ok(m) => {
                let mut headers: Vec<(String, String)> = m
                    .headers
                    .iter()
                    .take(MAX_HEADERS)
                    .map(|(k, v)| {
                        let v: Vec<&str> = v.iter().map(|h| h.as_str()).collect();
                        (k.to_string(), clip_header(&v.join(",")))
                    })
                    .collect();
                headers.sort();
                Ok(stream_message(
                    m.sequence,
                    Some(format_time(m.time)),
                    m.subject.as_str(),
                    headers,
                    &m.payload,
                ))
            }
            Err(e) if matches!(e.kind(), RawMessageErrorKind::NoMessageFound) => {
                Err(InspectError::NoMessage {
                    stream: stream.cached_info().config.name.clone(),
                    seq,
                    first: st.first_sequence,
                    last: st.last_sequence,
                })
            }
            Err(e) if matches!(&e.kind(), RawMessageErrorKind::JetStream(j) if j.error_code() == jetstream::ErrorCode::NO_MESSAGE_FOUND) => {
                Err(InspectError::NoMessage {
                    stream: stream.cached_info().config.name.clone(),
                    seq,
                    first: st.first_sequence,
                    last: st.last_sequence,
                })
            }
            Err(e) => Err(server_err(&format!("reading message {seq}"), e)),
        }
    }

    /// Reads messages of `stream` matching `filter` from `start` through a page consumer,
    /// handing each to `each` until it says stop or nothing more matches. Returns the sequence
    /// `each` stopped at with more to come (`Flow::StopMore`). `hint` is how many messages the
    /// caller expects to need (the pull batch size). The consumer is deleted before returning.
    pub(crate) async fn read(
        &self,
        stream: &jetstream::stream::Stream,
        filter: Option<&str>,
        start: Start,
        mut each: impl FnMut(&jetstream::Message) -> Flow,
        hint: usize,
    ) -> Result<Option<u64>> {
        let deliver_policy = match start {
            Start::All => DeliverPolicy::All,
            Start::Seq(s) => DeliverPolicy::ByStartSequence { start_sequence: s },
            Start::Time(ns) => DeliverPolicy::ByStartTime {
                start_time: datetime_of(ns),
            },
        };
        let config = pull::Config {
            deliver_policy,
            ack_policy: AckPolicy::None,
            filter_subject: filter.unwrap_or_default().to_owned(),
            inactive_threshold: CONSUMER_IDLE,
            memory_storage: true,
            num_replicas: 1,
            description: Some("saap inspect (read-only page)".to_owned()),
            ..Default::default()
        };
        let consumer: PullConsumer = stream.create_consumer(config).await.map_err(|e| {
            let text = e.to_string();
            if text.contains("filter") || text.contains("subject") {
                invalid(format!(
                    "the stream does not store the subjects asked for ({text}); check the filters against `saap inspect stream {}`",
                    stream.cached_info().config.name
                ))
            } else {
                server_err("creating a read-only page consumer", e)
            }
        })?;
        let name = consumer.cached_info().name.clone();
        let result = drain(&consumer, &mut each, hint, self.wait()).await;
        // Best effort: the inactivity threshold removes it anyway.
        let _ = stream.delete_consumer(&name).await;
        result
    }
}

/// What the reader does after a message.
pub(crate) enum Flow {
    /// Keep reading.
    Continue,
    /// Not wanted; keep reading.
    Skip,
    /// Done; nothing more is wanted.
    Stop,
    /// Done; more messages exist from this sequence on.
    StopMore(u64),
}

async fn drain(
    consumer: &PullConsumer,
    each: &mut impl FnMut(&jetstream::Message) -> Flow,
    hint: usize,
    wait: Duration,
) -> Result<Option<u64>> {
    let batch = hint.clamp(1, FETCH_BATCH);
    loop {
        let mut got = 0usize;
        let mut msgs = consumer
            .fetch()
            .max_messages(batch)
            .messages()
            .await
            .map_err(|e| server_err("fetching a page", e))?;
        // A server that stops answering ends the page with an error, never a hang.
        while let Some(m) = tokio::time::timeout(wait, msgs.next())
            .await
            .map_err(|_| server_err("fetching a page", format!("no answer within {wait:?}")))?
        {
            let m = m.map_err(|e| server_err("fetching a page", e))?;
            got += 1;
            match each(&m) {
                Flow::Continue | Flow::Skip => {}
                Flow::Stop => return Ok(None),
                Flow::StopMore(seq) => return Ok(Some(seq)),
            }
        }
        if got == 0 {
            return Ok(None);
        }
    }
}

fn seq_of(m: &jetstream::Message) -> u64 {
    m.info().map(|i| i.stream_sequence).unwrap_or(0)
}

/// A delivered message as a [`Message`].
pub(crate) fn to_message(m: &jetstream::Message) -> Message {
    let (seq, time) = match m.info() {
        Ok(i) => (i.stream_sequence, Some(format_time(i.published))),
        Err(_) => (0, None),
    };
    let headers = m
        .headers
        .as_ref()
        .map(|h| {
            h.iter()
                .take(MAX_HEADERS)
                .map(|(k, v)| {
                    let v: Vec<&str> = v.iter().map(|h| h.as_str()).collect();
                    (k.to_string(), clip_header(&v.join(",")))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut headers: Vec<(String, String)> = headers;
    headers.sort();
    stream_message(seq, time, m.subject.as_str(), headers, &m.payload)
}

/// The agent class a stream's subjects name (`agent.{Class}.…`), `*` if they do not name one.
pub(crate) fn agent_class_of(config: &jetstream::stream::Config) -> Option<String> {
    config.subjects.iter().find_map(|s| {
        let t: Vec<&str> = s.split('.').collect();
        (t.len() == 9 && t[0] == "agent").then(|| t[1].to_owned())
    })
}

/// The server-side filter of a query on a stream with `config`.
pub(crate) fn filter_subject(
    config: &jetstream::stream::Config,
    q: &ViewQuery,
) -> Result<Option<String>> {
    if let Some(s) = &q.subject {
        if s.is_empty() || s.len() > 1024 || s.contains([' ', '\t', '\r', '\n']) {
            return Err(invalid(
                "--subject must be a NATS subject (no spaces, at most 1,024 bytes)",
            ));
        }
        return Ok(Some(s.clone()));
    }
    if !q.has_agent_filter() {
        return Ok(None);
    }
    if let Some(class) = config.name.strip_prefix("saap_journal_") {
        return match (
            &q.run,
            q.thread.is_none() && q.event_name.is_none() && q.kind.is_none(),
        ) {
            (Some(run), true) => Ok(Some(format!("saap.journal.{class}.{run}"))),
            _ => Err(invalid(
                "a saap journal stream is filtered by --run only (its entries carry no thread, kind or event name in the subject)",
            )),
        };
    }
    let Some(class) = agent_class_of(config) else {
        return Err(invalid(format!(
            "stream `{}` does not store agent event subjects (agent.{{Class}}.…), so --run/--thread/--event/--kind cannot select in it; use --subject",
            config.name
        )));
    };
    let tok = |v: &Option<String>| v.clone().unwrap_or_else(|| "*".to_owned());
    Ok(Some(format!(
        "agent.{class}.*.{}.*.{}.{}.{}.*",
        tok(&q.thread),
        tok(&q.run),
        tok(&q.kind),
        tok(&q.event_name)
    )))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn filters_become_subject_tokens() {
        let config = jetstream::stream::Config {
            name: "agent_Rag_stream".into(),
            subjects: vec!["agent.Rag.*.*.*.*.*.*.*".into()],
            ..Default::default()
        };
        let q = ViewQuery {
            run: Some("r1".into()),
            event_name: Some("Q".into()),
            ..Default::default()
        };
        assert_eq!(
            filter_subject(&config, &q).unwrap().unwrap(),
            "agent.Rag.*.*.*.r1.*.Q.*"
        );
        assert_eq!(
            filter_subject(&config, &ViewQuery::default()).unwrap(),
            None
        );
        let other = jetstream::stream::Config {
            name: "orders".into(),
            subjects: vec!["orders.>".into()],
            ..Default::default()
        };
        assert!(filter_subject(&other, &q).is_err());
        let journal = jetstream::stream::Config {
            name: "saap_journal_Rag".into(),
            subjects: vec!["saap.journal.Rag.*".into()],
            ..Default::default()
        };
        let run_only = ViewQuery {
            run: Some("r1".into()),
            ..Default::default()
        };
        assert_eq!(
            filter_subject(&journal, &run_only).unwrap().unwrap(),
            "saap.journal.Rag.r1"
        );
    }
}
