//! A run on NATS that has no journal yet (DESIGN §8, run status): `claimed` when a worker
//! of its class owns it (its owner record) but has not journaled its start, `queued` when
//! its first event waits in the class stream and no worker has taken it. Read-only: looks
//! at the owner record and the class stream, never changes either.

use super::owners::run_owner;
use futures_util::StreamExt;
use saap_nats::SaapNats;
use saap_protocol::subject::stream_name;
use saap_protocol::{AgentEventFilter, AgentEventSubject, EventKind};
use std::time::Duration;

/// Where a run that has not begun stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unbegun {
    /// A worker owns it (`worker`) and has not journaled its start yet.
    Claimed { worker: String },
    /// Its first event (`event_name`, stream sequence `sequence`) waits in the class stream,
    /// and no worker owns the run.
    Queued { event_name: String, sequence: u64 },
}

impl Unbegun {
    /// `claimed` or `queued`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Unbegun::Claimed { .. } => "claimed",
            Unbegun::Queued { .. } => "queued",
        }
    }
}

/// Where run `run_id` of agent class `class` stands when its journal has nothing:
/// `None` when no worker owns it and the class stream has no event for it either.
pub async fn unbegun_run(
    nats: &SaapNats,
    class: &str,
    run_id: &str,
) -> Result<Option<Unbegun>, String> {
    if let Some(owner) = run_owner(nats, class, run_id)
        .await
        .map_err(|e| e.to_string())?
    {
        return Ok(Some(Unbegun::Claimed {
            worker: owner.worker,
        }));
    }
    let filter = AgentEventFilter::all()
        .class(class)
        .run(run_id)
        .kind(EventKind::Control)
        .to_subject()
        .map_err(|e| e.to_string())?;
    let name = stream_name(class).map_err(|e| e.to_string())?;
    let Ok(stream) = nats.jetstream().get_stream(&name).await else {
        return Ok(None);
    };
    let mut consumer: async_nats::jetstream::consumer::Consumer<
        async_nats::jetstream::consumer::pull::OrderedConfig,
    > = stream
        .create_consumer(async_nats::jetstream::consumer::pull::OrderedConfig {
            filter_subject: filter,
            ..Default::default()
        })
        .await
        .map_err(|e| format!("cannot read the class stream {name}: {e}"))?;
    let pending = consumer
        .info()
        .await
        .map_err(|e| format!("cannot read the class stream {name}: {e}"))?
        .num_pending;
    if pending == 0 {
        return Ok(None);
    }
    let mut messages = consumer
        .messages()
        .await
        .map_err(|e| format!("cannot read the class stream {name}: {e}"))?;
    // The run's first event (bounded: a stream that stops answering is not waited on).
    let first = tokio::time::timeout(Duration::from_secs(5), messages.next()).await;
    let Ok(Some(Ok(m))) = first else {
        return Err(format!(
            "the class stream {name} did not hand over the run's first event"
        ));
    };
    let sequence = m.info().map(|i| i.stream_sequence).unwrap_or_default();
    let event_name = AgentEventSubject::parse(&m.subject)
        .map(|s| s.event_name().to_string())
        .unwrap_or_default();
    Ok(Some(Unbegun::Queued {
        event_name,
        sequence,
    }))
}
