//! A run page's live updates: a server-sent event stream that says `changed` (with the
//! journal's new length) each time the run's journal grows, and `ended` once it has ended.
//! The stream looks at the store's summary of the run (one indexed row) a few times a
//! second rather than at the engine: the store is where every driver of a run leaves its
//! trace (the studio's engine, or a timer it fires). Streams are bounded in number and in
//! time. Must not read the whole run.

use super::state::{Shared, StudioError};
use axum::extract::{Path, Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Live streams open at once, across pages.
pub(super) const MAX_STREAMS: usize = 32;
/// How often a stream looks at the run.
const TICK: Duration = Duration::from_millis(250);
/// A stream ends after this long; the page opens a new one.
const LIFETIME: Duration = Duration::from_secs(30 * 60);

#[derive(serde::Deserialize)]
pub(super) struct LiveQuery {
    /// The journal length the page shows.
    #[serde(default)]
    entries: u64,
}

/// Gives the slot back when the stream ends, however it ends.
struct Slot(Shared);
impl Drop for Slot {
    fn drop(&mut self) {
        self.0.streams.fetch_sub(1, Ordering::Relaxed);
    }
}

pub(super) async fn stream(
    State(studio): State<Shared>,
    Path(id): Path<String>,
    Query(q): Query<LiveQuery>,
) -> Response {
    let (agent, run_id) = match studio.find_run(&id).await {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    if studio.streams.fetch_add(1, Ordering::Relaxed) >= MAX_STREAMS {
        studio.streams.fetch_sub(1, Ordering::Relaxed);
        return StudioError {
            status: axum::http::StatusCode::SERVICE_UNAVAILABLE,
            code: "SAAP-U007",
            message: format!(
                "{MAX_STREAMS} pages already follow runs live; close some, or reload this one later"
            ),
        }
        .into_response();
    }
    let slot = Slot(studio.clone());
    let state = (
        slot,
        agent,
        run_id,
        q.entries,
        tokio::time::Instant::now(),
        false,
    );
    let events = futures_util::stream::unfold(
        state,
        |(slot, agent, run_id, mut seen, born, done)| async move {
            if done || born.elapsed() > LIFETIME {
                return None;
            }
            loop {
                tokio::select! {
                    () = tokio::time::sleep(TICK) => {}
                    () = slot.0.shutdown.cancelled() => return None,
                }
                let query = crate::backend::RunQuery {
                    id_prefix: Some(run_id.clone()),
                    limit: 1,
                    ..Default::default()
                };
                let summary = match slot
                    .0
                    .backend()
                    .list_runs(agent.name(), &query)
                    .wait()
                    .await
                {
                    Ok(page) => page.runs.into_iter().next(),
                    Err(e) => {
                        let event = Event::default().event("error").data(e.to_string());
                        return Some((
                            Ok::<_, std::convert::Infallible>(event),
                            (slot, agent, run_id, seen, born, true),
                        ));
                    }
                };
                let Some(s) = summary else {
                    let event = Event::default()
                        .event("error")
                        .data("the run is no longer stored");
                    return Some((Ok(event), (slot, agent, run_id, seen, born, true)));
                };
                if s.journal_entries != seen || s.ended {
                    seen = s.journal_entries;
                    let name = if s.ended { "ended" } else { "changed" };
                    let event = Event::default().event(name).data(seen.to_string());
                    return Some((Ok(event), (slot, agent, run_id, seen, born, s.ended)));
                }
                if born.elapsed() > LIFETIME {
                    return None;
                }
            }
        },
    );
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}
