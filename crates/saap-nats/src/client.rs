//! The connection ([`SaapNats`]), per-class streams and publishing.

use std::time::Duration;

use async_nats::jetstream;
use async_nats::jetstream::ErrorCode;
use async_nats::jetstream::context::{
    ConsumerInfoErrorKind, CreateStreamErrorKind, GetStreamErrorKind, PublishErrorKind,
};
use async_nats::{ConnectOptions, HeaderMap, ServerAddr};
use bytes::Bytes;
use saap_protocol::subject::{
    DiscardPolicy, RetentionPolicy, StorageType, StreamConfig, is_aihub_header, nats_msg_id,
};
use saap_protocol::{EventEnvelope, EventKind, RunAddress};
use tracing::{debug, info, warn};

use crate::error::{NatsError, Result};
use crate::options::{Auth, NatsOptions};

/// A connection to NATS with JetStream, speaking SAAP.
///
/// Cheap to clone (the client and JetStream context are handles).
#[derive(Clone, Debug)]
pub struct SaapNats {
    pub(crate) client: async_nats::Client,
    pub(crate) js: jetstream::Context,
    pub(crate) settings: Settings,
}

/// Behaviour settings of a [`SaapNats`] (not connection options).
#[derive(Clone, Debug)]
pub struct Settings {
    /// Replicas of the streams and buckets this connection creates (1 for a single server, 3 for
    /// a 3-node cluster).
    pub replicas: usize,
    /// Attempts of a control-event publication before giving up (re-publication is safe: the
    /// `Nats-Msg-Id` is the event id).
    pub publish_attempts: u32,
    /// Timeout of RPC requests when the caller gives none (the Python default is 5 s).
    pub rpc_timeout: Duration,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            replicas: 1,
            publish_attempts: 3,
            rpc_timeout: Duration::from_secs(5),
        }
    }
}

/// What JetStream said about a published control event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublishReceipt {
    /// The subject published to.
    pub subject: String,
    /// The stream that stored it.
    pub stream: String,
    /// Its stream sequence (for a duplicate: the sequence of the stored original).
    pub sequence: u64,
    /// True if JetStream recognised the `Nats-Msg-Id` within the duplicate window and did not
    /// store the message again.
    pub duplicate: bool,
}

/// The result of [`SaapNats::ensure_stream`].
#[derive(Clone, Debug)]
pub struct EnsuredStream {
    /// True if this call created the stream.
    pub created: bool,
    /// The configuration as read back from the server.
    pub config: jetstream::stream::Config,
    /// Settings of an already existing stream that differ from the expected ones (the stream
    /// is never changed, as in the Python implementation; each difference is logged as a
    /// warning).
    pub differences: Vec<String>,
}

/// The expected `async-nats` configuration of a class stream.
pub fn js_stream_config(config: &StreamConfig, replicas: usize) -> jetstream::stream::Config {
    jetstream::stream::Config {
        name: config.name.clone(),
        subjects: config.subjects.clone(),
        storage: match config.storage {
            StorageType::File => jetstream::stream::StorageType::File,
            StorageType::Memory => jetstream::stream::StorageType::Memory,
        },
        retention: match config.retention {
            RetentionPolicy::Limits => jetstream::stream::RetentionPolicy::Limits,
            RetentionPolicy::Interest => jetstream::stream::RetentionPolicy::Interest,
            RetentionPolicy::WorkQueue => jetstream::stream::RetentionPolicy::WorkQueue,
        },
        max_messages: config.max_msgs,
        discard: match config.discard {
            DiscardPolicy::Old => jetstream::stream::DiscardPolicy::Old,
            DiscardPolicy::New => jetstream::stream::DiscardPolicy::New,
        },
        max_age: config.max_age,
        duplicate_window: config.duplicate_window,
        num_replicas: replicas.max(1),
        ..Default::default()
    }
}

/// The settings of `actual` that differ from `expected` (only those SAAP sets).
pub fn stream_differences(
    expected: &jetstream::stream::Config,
    actual: &jetstream::stream::Config,
) -> Vec<String> {
    let mut d = Vec::new();
    let mut cmp = |what: &str, e: String, a: String| {
        if e != a {
            d.push(format!("{what}: expected {e}, found {a}"));
        }
    };
    cmp(
        "subjects",
        format!("{:?}", expected.subjects),
        format!("{:?}", actual.subjects),
    );
    cmp(
        "storage",
        format!("{:?}", expected.storage),
        format!("{:?}", actual.storage),
    );
    cmp(
        "retention",
        format!("{:?}", expected.retention),
        format!("{:?}", actual.retention),
    );
    cmp(
        "max_msgs",
        expected.max_messages.to_string(),
        actual.max_messages.to_string(),
    );
    cmp(
        "discard",
        format!("{:?}", expected.discard),
        format!("{:?}", actual.discard),
    );
    cmp(
        "max_age",
        format!("{:?}", expected.max_age),
        format!("{:?}", actual.max_age),
    );
    if actual.duplicate_window < expected.duplicate_window {
        d.push(format!(
            "duplicate_window: expected at least {:?}, found {:?}",
            expected.duplicate_window, actual.duplicate_window
        ));
    }
    d
}

impl SaapNats {
    /// Connects with `options` and default [`Settings`].
    pub async fn connect(options: &NatsOptions) -> Result<SaapNats> {
        SaapNats::connect_with(options, Settings::default()).await
    }

    /// Connects with `options` and `settings`.
    pub async fn connect_with(options: &NatsOptions, settings: Settings) -> Result<SaapNats> {
        options.validate()?;
        let url = options.redacted_servers();
        let mut addrs = Vec::with_capacity(options.servers.len());
        for s in &options.servers {
            let addr: ServerAddr = s.parse().map_err(|e: std::io::Error| NatsError::Connect {
                url: url.clone(),
                reason: format!("invalid server address: {}", e.kind()),
            })?;
            addrs.push(addr);
        }
        // async-nats ignores userinfo in server URLs: with no explicit credentials, take them
        // from the first URL that has some (`user:password@` or `token@`).
        let url_auth = addrs.iter().find_map(|a| {
            a.username()
                .map(|u| (u.to_owned(), a.password().map(str::to_owned)))
        });
        let mut co = match &options.auth {
            Auth::None => match url_auth {
                Some((user, Some(password))) => {
                    ConnectOptions::with_user_and_password(user, password)
                }
                Some((token, None)) => ConnectOptions::with_token(token),
                None => ConnectOptions::new(),
            },
            Auth::Token(t) => ConnectOptions::with_token(t.expose().to_owned()),
            Auth::UserPassword { user, password } => {
                ConnectOptions::with_user_and_password(user.clone(), password.expose().to_owned())
            }
            Auth::NkeySeed(seed) => ConnectOptions::with_nkey(seed.expose().to_owned()),
            Auth::CredentialsFile(path) => ConnectOptions::with_credentials_file(path)
                .await
                .map_err(|e| NatsError::InvalidOptions {
                    // Only the error kind: the parser's message could quote the file.
                    reason: format!(
                        "cannot read credentials file {}: {}",
                        path.display(),
                        e.kind()
                    ),
                })?,
        };
        co = co
            .name(&options.name)
            .connection_timeout(options.connect_timeout)
            .request_timeout(Some(options.request_timeout))
            .require_tls(options.tls.required);
        for ca in &options.tls.root_certificates {
            co = co.add_root_certificates(ca.clone());
        }
        if let Some(c) = &options.tls.client_certificate {
            co = co.add_client_certificate(c.certificate.clone(), c.key.clone());
        }
        if options.tls.tls_first {
            co = co.tls_first();
        }
        if options.retry_on_initial_connect {
            co = co.retry_on_initial_connect();
        }
        let client = co.connect(addrs).await.map_err(|e| NatsError::Connect {
            url: url.clone(),
            // The client's text, with anything secret it might echo removed.
            reason: options.sanitize(&e.to_string()),
        })?;
        let js = jetstream::ContextBuilder::new()
            .timeout(options.request_timeout)
            .build(client.clone());
        info!(servers = %url, "connected to NATS");
        Ok(SaapNats {
            client,
            js,
            settings,
        })
    }

    /// The underlying core NATS client.
    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }

    /// The underlying JetStream context.
    pub fn jetstream(&self) -> &jetstream::Context {
        &self.js
    }

    /// The behaviour settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Checks that JetStream answers for this account.
    pub async fn check_jetstream(&self) -> Result<()> {
        self.js
            .query_account()
            .await
            .map(|_| ())
            .map_err(|e| NatsError::JetStreamUnavailable {
                reason: e.to_string(),
            })
    }

    /// Waits until the server has processed everything this connection sent before (a round
    /// trip through the server on a private inbox). After it, subscriptions made on this
    /// connection receive what other connections publish. Bounded by the request timeout.
    pub async fn sync(&self) -> Result<()> {
        round_trip(&self.client, self.settings.rpc_timeout).await
    }

    /// Flushes pending core-NATS publications to the server.
    pub async fn flush(&self) -> Result<()> {
        self.client.flush().await.map_err(|e| NatsError::Publish {
            subject: "(flush)".to_owned(),
            attempts: 1,
            reason: e.to_string(),
        })
    }

    /// Creates the stream of `agent_class` if it does not exist, exactly as
    /// [`StreamConfig::for_agent_class`] describes (DESIGN §6). An existing stream is not
    /// changed; settings that differ are reported in [`EnsuredStream::differences`].
    pub async fn ensure_stream(&self, agent_class: &str) -> Result<EnsuredStream> {
        self.ensure_stream_config(&StreamConfig::for_agent_class(agent_class)?)
            .await
    }

    /// [`SaapNats::ensure_stream`] for an explicit configuration (e.g. a longer duplicate
    /// window).
    pub async fn ensure_stream_config(&self, config: &StreamConfig) -> Result<EnsuredStream> {
        let expected = js_stream_config(config, self.settings.replicas);
        let stream_err = |reason: String| NatsError::Stream {
            stream: config.name.clone(),
            reason,
        };
        let (created, actual) = match self.js.get_stream(&config.name).await {
            Ok(mut s) => {
                let info = s.info().await.map_err(|e| stream_err(e.to_string()))?;
                (false, info.config.clone())
            }
            Err(e) if is_stream_not_found(e.kind()) => {
                match self.js.create_stream(expected.clone()).await {
                    Ok(mut s) => {
                        let info = s.info().await.map_err(|e| stream_err(e.to_string()))?;
                        info!(stream = %config.name, "created stream");
                        (true, info.config.clone())
                    }
                    // Another worker created it in between: read it.
                    Err(ce) if matches!(ce.kind(), CreateStreamErrorKind::JetStream(_)) => {
                        let mut s = self.js.get_stream(&config.name).await.map_err(|e| {
                            stream_err(format!("creating failed ({ce}) and reading failed ({e})"))
                        })?;
                        let info = s.info().await.map_err(|e| stream_err(e.to_string()))?;
                        (false, info.config.clone())
                    }
                    Err(ce) if matches!(ce.kind(), CreateStreamErrorKind::JetStreamUnavailable) => {
                        return Err(NatsError::JetStreamUnavailable {
                            reason: ce.to_string(),
                        });
                    }
                    Err(ce) => return Err(stream_err(format!("cannot create it: {ce}"))),
                }
            }
            Err(e) => {
                return Err(stream_err(format!(
                    "cannot read it: {e}; is JetStream enabled (nats-server -js)?"
                )));
            }
        };
        let differences = if created {
            Vec::new()
        } else {
            stream_differences(&expected, &actual)
        };
        for d in &differences {
            warn!(stream = %config.name, difference = %d, "existing stream differs from the SAAP configuration; it is left unchanged");
        }
        Ok(EnsuredStream {
            created,
            config: actual,
            differences,
        })
    }

    /// Publishes a control event of `run` to JetStream on its control subject, with
    /// `Nats-Msg-Id` = the event id, and waits for the acknowledgement. A re-publication of the
    /// same event within the stream's duplicate window is acknowledged with
    /// [`PublishReceipt::duplicate`] set and not stored again.
    pub async fn publish_control(
        &self,
        run: &RunAddress,
        event: &EventEnvelope,
    ) -> Result<PublishReceipt> {
        self.publish_control_with_headers(run, event, &[]).await
    }

    /// [`SaapNats::publish_control`] with extra headers; only `X-AIHub-*` headers are sent
    /// (others are dropped, as in the Python implementation).
    pub async fn publish_control_with_headers(
        &self,
        run: &RunAddress,
        event: &EventEnvelope,
        headers: &[(String, String)],
    ) -> Result<PublishReceipt> {
        let msg = prepare_control(run, event, headers)?;
        self.publish_prepared(run, msg, 0, String::new()).await
    }

    /// Publishes several control events pipelined: up to 1 000 are sent, then their
    /// acknowledgements are awaited. Results are in input order; a failed one is retried
    /// individually with the same `Nats-Msg-Id`, so a retry never stores a copy.
    ///
    /// Measured with `tests/probe.rs`: on a server with default syncing it is ~8× faster than
    /// sequential [`SaapNats::publish_control`]; with `sync_interval: always` (one fsync per
    /// message) it was *slower* than sequential, as was raw async-nats pipelining.
    pub async fn publish_controls(
        &self,
        events: &[(RunAddress, EventEnvelope)],
    ) -> Vec<Result<PublishReceipt>> {
        // Each unacknowledged publication holds one of the context's in-flight permits
        // (5 000): send at most this many before awaiting their acks.
        const CHUNK: usize = 1000;
        let mut out = Vec::with_capacity(events.len());
        for chunk in events.chunks(CHUNK) {
            out.extend(self.publish_chunk(chunk).await);
        }
        out
    }

    async fn publish_chunk(
        &self,
        events: &[(RunAddress, EventEnvelope)],
    ) -> Vec<Result<PublishReceipt>> {
        let mut pending = Vec::with_capacity(events.len());
        for (run, event) in events {
            let msg = match prepare_control(run, event, &[]) {
                Ok(m) => m,
                Err(e) => {
                    pending.push(Err(e));
                    continue;
                }
            };
            let sent = self
                .js
                .publish_with_headers(
                    msg.subject.clone(),
                    msg.headers.clone(),
                    msg.payload.clone(),
                )
                .await;
            pending.push(Ok((msg, sent)));
        }
        let mut out = Vec::with_capacity(events.len());
        for (item, (run, _)) in pending.into_iter().zip(events) {
            let (msg, sent) = match item {
                Ok(x) => x,
                Err(e) => {
                    out.push(Err(e));
                    continue;
                }
            };
            let acked = match sent {
                Ok(ack) => ack.await,
                Err(e) => Err(e),
            };
            out.push(match acked {
                Ok(ack) => Ok(receipt(msg.subject, ack)),
                Err(e) => match classify(run, &msg.subject, &e, 1) {
                    Some(fatal) => Err(fatal),
                    None => self.publish_prepared(run, msg, 1, e.to_string()).await,
                },
            });
        }
        out
    }

    /// Publishes a prepared control message, `done` attempts having failed already.
    async fn publish_prepared(
        &self,
        run: &RunAddress,
        msg: ControlMessage,
        done: u32,
        mut last: String,
    ) -> Result<PublishReceipt> {
        let attempts = self.settings.publish_attempts.max(1).max(done + 1);
        for attempt in done + 1..=attempts {
            let sent = self
                .js
                .publish_with_headers(
                    msg.subject.clone(),
                    msg.headers.clone(),
                    msg.payload.clone(),
                )
                .await;
            let result = match sent {
                Ok(ack) => ack.await,
                Err(e) => Err(e),
            };
            match result {
                Ok(ack) => return Ok(receipt(msg.subject, ack)),
                Err(e) => {
                    if let Some(fatal) = classify(run, &msg.subject, &e, attempt) {
                        return Err(fatal);
                    }
                    warn!(subject = %msg.subject, attempt, error = %e, "publishing a control event failed; retrying with the same Nats-Msg-Id");
                    last = e.to_string();
                }
            }
        }
        Err(NatsError::Publish {
            subject: msg.subject,
            attempts,
            reason: last,
        })
    }

    /// Publishes a display event of `run` on core NATS (fire and forget; call
    /// [`SaapNats::flush`] to push it out now). No `Nats-Msg-Id`, as in the Python
    /// implementation.
    pub async fn publish_display(&self, run: &RunAddress, event: &EventEnvelope) -> Result<String> {
        if !event.classification().display {
            return Err(wrong_kind(event, "display", "DisplayEvent"));
        }
        let subject = run
            .event_subject(
                EventKind::Display,
                &event.event_name,
                &event.event_id.to_string(),
            )?
            .to_string();
        self.client
            .publish(subject.clone(), Bytes::from(event.encode_bytes()))
            .await
            .map_err(|e| NatsError::Publish {
                subject: subject.clone(),
                attempts: 1,
                reason: e.to_string(),
            })?;
        debug!(%subject, "display event published");
        Ok(subject)
    }

    /// Publishes `event` the way the Python dispatcher does (notes §1.4): JetStream first if it
    /// is a control event, then core NATS if it is a display event. Returns the control
    /// receipt, if any.
    pub async fn publish_event(
        &self,
        run: &RunAddress,
        event: &EventEnvelope,
    ) -> Result<Option<PublishReceipt>> {
        let c = event.dispatch_classification();
        let receipt = if c.control {
            Some(self.publish_control(run, event).await?)
        } else {
            None
        };
        if c.display {
            self.publish_display(run, event).await?;
        }
        Ok(receipt)
    }
}

/// A round trip through the server: subscribe to a fresh inbox, publish to it, wait for it.
/// The server handles one connection's commands in order, so this returns after every earlier
/// command (e.g. a SUB) was processed. `client.flush()` alone only empties the socket buffer.
pub async fn round_trip(client: &async_nats::Client, timeout: Duration) -> Result<()> {
    use futures_util::StreamExt;
    let inbox = client.new_inbox();
    let err = |reason: String| NatsError::Request {
        subject: "(round trip)".to_owned(),
        reason,
    };
    let mut sub = client
        .subscribe(inbox.clone())
        .await
        .map_err(|e| err(e.to_string()))?;
    client
        .publish(inbox, Bytes::new())
        .await
        .map_err(|e| err(e.to_string()))?;
    client.flush().await.map_err(|e| err(e.to_string()))?;
    match tokio::time::timeout(timeout, sub.next()).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(err("the connection closed".to_owned())),
        Err(_) => Err(NatsError::RequestTimeout {
            subject: "(round trip)".to_owned(),
            timeout,
        }),
    }
}

/// A control event ready to publish.
struct ControlMessage {
    subject: String,
    headers: HeaderMap,
    payload: Bytes,
}

fn prepare_control(
    run: &RunAddress,
    event: &EventEnvelope,
    headers: &[(String, String)],
) -> Result<ControlMessage> {
    if !event.dispatch_classification().control {
        return Err(wrong_kind(event, "control", "ControlEvent"));
    }
    let id = event.event_id.to_string();
    let subject = run
        .event_subject(EventKind::Control, &event.event_name, &id)?
        .to_string();
    let mut map = HeaderMap::new();
    for (k, v) in headers.iter().filter(|(k, _)| is_aihub_header(k)) {
        map.insert(k.as_str(), v.as_str());
    }
    map.insert(
        saap_protocol::subject::NATS_MSG_ID_HEADER,
        nats_msg_id(&event.event_id).as_str(),
    );
    Ok(ControlMessage {
        subject,
        headers: map,
        payload: Bytes::from(event.encode_bytes()),
    })
}

fn receipt(subject: String, ack: jetstream::publish::PublishAck) -> PublishReceipt {
    debug!(%subject, stream = %ack.stream, sequence = ack.sequence, duplicate = ack.duplicate, "control event stored");
    PublishReceipt {
        subject,
        stream: ack.stream,
        sequence: ack.sequence,
        duplicate: ack.duplicate,
    }
}

/// The error to return at once for a publish failure, or `None` if retrying may help.
fn classify(
    run: &RunAddress,
    subject: &str,
    e: &jetstream::context::PublishError,
    attempt: u32,
) -> Option<NatsError> {
    match e.kind() {
        PublishErrorKind::StreamNotFound => Some(NatsError::NoStream {
            subject: subject.to_owned(),
            agent_class: run.agent_class().to_owned(),
        }),
        PublishErrorKind::MaxPayloadExceeded
        | PublishErrorKind::WrongLastMessageId
        | PublishErrorKind::WrongLastSequence => Some(NatsError::Publish {
            subject: subject.to_owned(),
            attempts: attempt,
            reason: e.to_string(),
        }),
        _ => None,
    }
}

fn wrong_kind(
    event: &EventEnvelope,
    expected: &'static str,
    expected_parent: &'static str,
) -> NatsError {
    NatsError::WrongEventKind {
        event_name: crate::error::truncate(&event.event_name),
        event_id: event.event_id.to_string(),
        expected,
        expected_parent,
    }
}

fn is_stream_not_found(kind: GetStreamErrorKind) -> bool {
    matches!(kind, GetStreamErrorKind::JetStream(e) if e.error_code() == ErrorCode::STREAM_NOT_FOUND)
}

pub(crate) fn is_consumer_not_found(kind: &ConsumerInfoErrorKind) -> bool {
    match kind {
        ConsumerInfoErrorKind::NotFound => true,
        ConsumerInfoErrorKind::JetStream(e) => e.error_code() == ErrorCode::CONSUMER_NOT_FOUND,
        _ => false,
    }
}
