//! Config RPC (`aihub.rpc.config.agent.{class}.{id}`, request/reply on core NATS) and class
//! discovery (`class_discovery.agent.{class}.*.{request|response}.{call_id}`).
//!
//! Payloads follow the seeds (seed 002, "RPC Models"): a request
//! `{"agent_class", "agent_id"}`, a response
//! `{"agent_class", "agent_id", "config", "found", "error"}`; a responder that fails answers
//! `{"error", "error_type"}` so the requester never hangs. Discovery messages are events
//! (`ClassDiscoveryRequestEvent`, `AgentClassDiscoveryResponseEvent`) in the SAAP wire format.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_nats::{RequestErrorKind, Subject};
use bytes::Bytes;
use futures_util::StreamExt;
use saap_protocol::subject::{CONFIG_RPC_PREFIX, DISCOVERY_REQUEST_FILTER, DiscoveryDirection};
use saap_protocol::{ConfigRpcSubject, DiscoverySubject, EventEnvelope, Hierarchy};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use crate::client::SaapNats;
use crate::error::{NatsError, Result};
use crate::ids;

/// Name of the discovery request event.
pub const DISCOVERY_REQUEST_EVENT: &str = "ClassDiscoveryRequestEvent";
/// Name of an agent class's discovery response event.
pub const DISCOVERY_RESPONSE_EVENT: &str = "AgentClassDiscoveryResponseEvent";

/// A config RPC request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchAgentConfigRequest {
    /// Agent class.
    pub agent_class: String,
    /// Agent instance.
    pub agent_id: String,
}

fn default_true() -> bool {
    true
}

/// A config RPC response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FetchAgentConfigResponse {
    /// Agent class.
    pub agent_class: String,
    /// Agent instance.
    pub agent_id: String,
    /// The configuration (empty if not found).
    #[serde(default)]
    pub config: Map<String, Value>,
    /// Whether a configuration exists for the instance.
    #[serde(default = "default_true")]
    pub found: bool,
    /// An error message from the responder, if any.
    #[serde(default)]
    pub error: Option<String>,
}

/// The error reply of a responder whose handler failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpcErrorReply {
    /// Message.
    pub error: String,
    /// Error type name.
    pub error_type: String,
}

/// A running responder. Stops when dropped or by [`ServiceHandle::stop`].
#[derive(Debug)]
pub struct ServiceHandle {
    subject: String,
    task: JoinHandle<()>,
}

impl ServiceHandle {
    /// The subject (filter) it answers.
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// Stops answering (the subscription is dropped).
    pub fn stop(self) {
        self.task.abort();
    }
}

impl Drop for ServiceHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Which config RPC subjects a responder answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigScope {
    /// Every class and instance: `aihub.rpc.config.agent.*.*`.
    All,
    /// Every instance of one class: `aihub.rpc.config.agent.{class}.*`.
    Class(String),
    /// One instance.
    Instance(ConfigRpcSubject),
}

impl ConfigScope {
    fn filter(&self) -> Result<String> {
        Ok(match self {
            ConfigScope::All => format!("{CONFIG_RPC_PREFIX}.*.*"),
            ConfigScope::Class(c) => {
                saap_protocol::subject::validate_agent_class(c)?;
                format!("{CONFIG_RPC_PREFIX}.{c}.*")
            }
            ConfigScope::Instance(s) => s.to_string(),
        })
    }
}

/// What a discovery responder tells about its class.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClassDescription {
    /// Fields of the `AgentClassDiscoveryResponseEvent` besides the envelope and `agent_class`
    /// (e.g. `config_schema`, `description`). The Python field set is not in the reference;
    /// they are passed through as given.
    pub fields: Map<String, Value>,
}

/// One discovery response.
#[derive(Clone, Debug, PartialEq)]
pub struct DiscoveredClass {
    /// The responding class (from the subject).
    pub agent_class: String,
    /// The response event.
    pub event: EventEnvelope,
}

impl SaapNats {
    /// Asks the platform for the configuration of an agent instance and waits up to `timeout`
    /// (the Python default is 5 s; `None` uses [`crate::Settings::rpc_timeout`]).
    pub async fn fetch_agent_config(
        &self,
        agent_class: &str,
        agent_id: &str,
        timeout: Option<Duration>,
    ) -> Result<FetchAgentConfigResponse> {
        let subject = ConfigRpcSubject::new(agent_class, agent_id)?.to_string();
        let timeout = timeout.unwrap_or(self.settings.rpc_timeout);
        let body = serde_json::to_vec(&FetchAgentConfigRequest {
            agent_class: agent_class.to_owned(),
            agent_id: agent_id.to_owned(),
        })
        .map_err(|e| NatsError::Decode {
            what: "config request".to_owned(),
            reason: e.to_string(),
        })?;
        let request = async_nats::Request::new()
            .payload(Bytes::from(body))
            .timeout(Some(timeout));
        let reply = self
            .client
            .send_request(subject.clone(), request)
            .await
            .map_err(|e| match e.kind() {
                RequestErrorKind::TimedOut => NatsError::RequestTimeout {
                    subject: subject.clone(),
                    timeout,
                },
                RequestErrorKind::NoResponders => NatsError::NoResponders {
                    subject: subject.clone(),
                },
                _ => NatsError::Request {
                    subject: subject.clone(),
                    reason: e.to_string(),
                },
            })?;
        parse_config_reply(&subject, &reply.payload)
    }

    /// Answers config RPC requests in `scope` with `handler` (a spawned task; stops when the
    /// handle is dropped). A handler error is answered as `{"error", "error_type": "HandlerError"}`;
    /// an undecodable request as `{"error", "error_type": "BadRequest"}`.
    pub async fn serve_agent_config<F, Fut>(
        &self,
        scope: ConfigScope,
        handler: F,
    ) -> Result<ServiceHandle>
    where
        F: Fn(FetchAgentConfigRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<FetchAgentConfigResponse, String>> + Send,
    {
        let filter = scope.filter()?;
        let mut sub =
            self.client
                .subscribe(filter.clone())
                .await
                .map_err(|e| NatsError::Subscribe {
                    subject: filter.clone(),
                    reason: e.to_string(),
                })?;
        // Registered at the server before we return: requests sent from now on reach it.
        self.sync().await?;
        let client = self.client.clone();
        let handler = Arc::new(handler);
        let task = tokio::spawn(async move {
            while let Some(msg) = sub.next().await {
                let Some(reply) = msg.reply.clone() else {
                    warn!(subject = %msg.subject, "config request without a reply subject; ignored");
                    continue;
                };
                let answer = match serde_json::from_slice::<FetchAgentConfigRequest>(&msg.payload) {
                    Ok(req) => match handler(req).await {
                        Ok(resp) => serde_json::to_vec(&resp),
                        Err(message) => serde_json::to_vec(&RpcErrorReply {
                            error: message,
                            error_type: "HandlerError".to_owned(),
                        }),
                    },
                    Err(e) => serde_json::to_vec(&RpcErrorReply {
                        error: format!("bad config request: {e}"),
                        error_type: "BadRequest".to_owned(),
                    }),
                };
                respond(&client, reply, answer).await;
            }
        });
        Ok(ServiceHandle {
            subject: filter,
            task,
        })
    }

    /// Answers discovery requests addressed to `agent_class` or to every class (`*`) with an
    /// `AgentClassDiscoveryResponseEvent` on `class_discovery.agent.{class}.*.response.{call_id}`.
    ///
    /// The responders of one class share the queue group [`discovery_queue_group`], so with
    /// several responders (workers) of a class each request is answered once per class: the
    /// server hands a request to one member of every group, and a request to every class
    /// therefore still reaches every class.
    pub async fn serve_class_discovery(
        &self,
        agent_class: &str,
        description: ClassDescription,
    ) -> Result<ServiceHandle> {
        saap_protocol::subject::validate_agent_class(agent_class)?;
        let filter = DISCOVERY_REQUEST_FILTER.to_owned();
        let mut sub = self
            .client
            .queue_subscribe(filter.clone(), discovery_queue_group(agent_class))
            .await
            .map_err(|e| NatsError::Subscribe {
                subject: filter.clone(),
                reason: e.to_string(),
            })?;
        // Registered at the server before we return: requests sent from now on reach it.
        self.sync().await?;
        let client = self.client.clone();
        let class = agent_class.to_owned();
        let hierarchy = Hierarchy::builtin();
        let task = tokio::spawn(async move {
            while let Some(msg) = sub.next().await {
                let target = msg.subject.split('.').nth(2).unwrap_or_default();
                if target != "*" && target != class {
                    continue;
                }
                let call_id = match DiscoverySubject::parse(&msg.subject) {
                    Ok(s) if s.direction == DiscoveryDirection::Request => s.call_id,
                    Ok(_) => continue,
                    // A request to every class has `*` as class token, which the strict parser
                    // refuses as a class name: take the call id from the last token.
                    Err(_) => match msg.subject.rsplit('.').next() {
                        Some(id) if target == "*" => id.to_owned(),
                        _ => {
                            warn!(subject = %msg.subject, "malformed discovery request; ignored");
                            continue;
                        }
                    },
                };
                let subject = match DiscoverySubject::response(&class, &call_id) {
                    Ok(s) => s.to_string(),
                    Err(e) => {
                        warn!(error = %e, "cannot build the discovery response subject");
                        continue;
                    }
                };
                let Some(mut event) = EventEnvelope::new(
                    &hierarchy,
                    DISCOVERY_RESPONSE_EVENT,
                    ids::fresh_event_id(),
                    ids::now_ns(),
                ) else {
                    warn!("the builtin hierarchy lacks {DISCOVERY_RESPONSE_EVENT}");
                    continue;
                };
                event = event.with_field("agent_class", Value::String(class.clone()));
                for (k, v) in &description.fields {
                    event = event.with_field(k, v.clone());
                }
                if let Err(e) = client
                    .publish(subject.clone(), Bytes::from(event.encode_bytes()))
                    .await
                {
                    warn!(%subject, error = %e, "cannot publish the discovery response");
                }
                debug!(%subject, "answered a discovery request");
            }
        });
        Ok(ServiceHandle {
            subject: filter,
            task,
        })
    }

    /// Sends a discovery request to `agent_class` (or every class if `None`) and collects the
    /// responses until `expected` have arrived or `timeout` has passed, whichever comes first.
    /// Returns them in arrival order (possibly none).
    pub async fn discover_classes(
        &self,
        agent_class: Option<&str>,
        call_id: &str,
        expected: Option<usize>,
        timeout: Duration,
    ) -> Result<Vec<DiscoveredClass>> {
        // Validate the call id and class through the protocol type.
        let probe = DiscoverySubject::request(agent_class.unwrap_or("any"), call_id)?;
        let request_subject = match agent_class {
            Some(_) => probe.to_string(),
            None => format!(
                "{}.*.*.request.{call_id}",
                saap_protocol::subject::DISCOVERY_PREFIX
            ),
        };
        let response_filter = format!(
            "{}.*.*.response.{call_id}",
            saap_protocol::subject::DISCOVERY_PREFIX
        );
        let mut sub = self
            .client
            .subscribe(response_filter.clone())
            .await
            .map_err(|e| NatsError::Subscribe {
                subject: response_filter.clone(),
                reason: e.to_string(),
            })?;
        let hierarchy = Hierarchy::builtin();
        let request = EventEnvelope::new(
            &hierarchy,
            DISCOVERY_REQUEST_EVENT,
            ids::fresh_event_id(),
            ids::now_ns(),
        )
        .ok_or_else(|| NatsError::Decode {
            what: DISCOVERY_REQUEST_EVENT.to_owned(),
            reason: "not in the builtin hierarchy".to_owned(),
        })?;
        self.client
            .publish(request_subject.clone(), Bytes::from(request.encode_bytes()))
            .await
            .map_err(|e| NatsError::Publish {
                subject: request_subject.clone(),
                attempts: 1,
                reason: e.to_string(),
            })?;
        self.flush().await?;
        let mut found = Vec::new();
        let deadline = tokio::time::Instant::now() + timeout;
        while expected.is_none_or(|n| found.len() < n) {
            let msg = match tokio::time::timeout_at(deadline, sub.next()).await {
                Ok(Some(m)) => m,
                Ok(None) | Err(_) => break,
            };
            let class = msg.subject.split('.').nth(2).unwrap_or_default().to_owned();
            match EventEnvelope::decode(
                &msg.payload,
                &hierarchy,
                &saap_protocol::DecodeLimits::default(),
            ) {
                Ok(event) => found.push(DiscoveredClass {
                    agent_class: class,
                    event,
                }),
                Err(e) => {
                    warn!(subject = %msg.subject, error = %e, "undecodable discovery response; ignored")
                }
            }
        }
        Ok(found)
    }
}

/// The queue group shared by the discovery responders of `agent_class` (one answer per class).
pub fn discovery_queue_group(agent_class: &str) -> String {
    format!("saap_discovery_{agent_class}")
}

async fn respond(
    client: &async_nats::Client,
    reply: Subject,
    body: std::result::Result<Vec<u8>, serde_json::Error>,
) {
    let body = match body {
        Ok(b) => b,
        Err(e) => {
            // Always answer, so the requester does not hang.
            format!(r#"{{"error":"cannot encode the reply: {e}","error_type":"EncodeError"}}"#)
                .into_bytes()
        }
    };
    if let Err(e) = client.publish(reply, Bytes::from(body)).await {
        warn!(error = %e, "cannot publish an RPC reply");
    }
}

fn parse_config_reply(subject: &str, payload: &[u8]) -> Result<FetchAgentConfigResponse> {
    let value: Value = serde_json::from_slice(payload).map_err(|e| NatsError::Decode {
        what: format!("config reply on {subject}"),
        reason: e.to_string(),
    })?;
    if let Value::Object(m) = &value
        && !m.contains_key("agent_class")
        && m.contains_key("error")
    {
        let reply: RpcErrorReply =
            serde_json::from_value(value.clone()).unwrap_or_else(|_| RpcErrorReply {
                error: value.to_string(),
                error_type: "Unknown".to_owned(),
            });
        return Err(NatsError::Remote {
            subject: subject.to_owned(),
            error_type: reply.error_type,
            message: reply.error,
        });
    }
    serde_json::from_value(value).map_err(|e| NatsError::Decode {
        what: format!("config reply on {subject}"),
        reason: e.to_string(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn config_reply_shapes() {
        let ok = parse_config_reply(
            "s",
            br#"{"agent_class":"A","agent_id":"x","config":{"k":1}}"#,
        )
        .unwrap();
        assert!(ok.found);
        assert_eq!(ok.config["k"], 1);
        let not_found = parse_config_reply(
            "s",
            br#"{"agent_class":"A","agent_id":"x","config":{},"found":false,"error":"none"}"#,
        )
        .unwrap();
        assert!(!not_found.found);
        let e =
            parse_config_reply("s", br#"{"error":"boom","error_type":"KeyError"}"#).unwrap_err();
        assert_eq!(e.kind(), "remote");
        assert!(e.to_string().contains("KeyError: boom"));
        assert_eq!(
            parse_config_reply("s", b"nope").unwrap_err().kind(),
            "decode"
        );
    }
}
