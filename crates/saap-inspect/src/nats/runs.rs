//! The runs of an agent class stream (`runs`) and one run's timeline (`run RUN`).
//!
//! NATS keeps no index of runs, so `runs` scans a bounded window of the stream — the control
//! events among the last `--scan N` messages before `--before SEQ` (the end by default) — and
//! groups them by the run id of their subjects; a run's status is what the window shows (a stop
//! event: stopped, an exception event: failed, neither: live), and a run whose first event lies
//! before the window is marked `partial`. `run RUN` reads only that run's subjects (a server-side
//! filter), in order, paged.
//!
//! Must not read a stream whole or publish anything.

use super::NatsInspector;
use super::view::{Flow, Start, agent_class_of, to_message};
use crate::error::{InspectError, Result, clip, invalid};
use crate::model::{Message, RunList, RunStatus, RunSummary, RunTimeline};
use crate::query::{RunsQuery, ViewQuery, check_token};
use std::collections::HashMap;

impl NatsInspector {
    /// `runs --stream NAME`: runs seen in a window of the stream's control events, most
    /// recently active first.
    pub async fn runs(&self, name: &str, q: &RunsQuery) -> Result<RunList> {
        let limit = q.page_size()?;
        let scan = q.scan_size()?;
        let status = q.status_filter()?;
        let stream = self.stream(name).await?;
        let info = stream.cached_info().clone();
        let Some(class) = agent_class_of(&info.config) else {
            return Err(invalid(format!(
                "stream `{}` does not store agent event subjects; runs are found in an agent class stream (agent_{{Class}}_stream)",
                info.config.name
            )));
        };
        let end = q
            .before
            .map_or(info.state.last_sequence, |b| b.saturating_sub(1))
            .min(info.state.last_sequence);
        let first = info.state.first_sequence.max(1);
        let from = end.saturating_sub(scan.saturating_sub(1)).max(first);
        let mut acc: HashMap<String, Acc> = HashMap::new();
        let mut order = 0u64;
        if info.state.messages > 0 && end >= from {
            let filter = format!("agent.{class}.*.*.*.*.control_event.*.*");
            self.read(
                &stream,
                Some(&filter),
                Start::Seq(from),
                |m| {
                    let msg = to_message(m);
                    if msg.seq > end {
                        return Flow::Stop;
                    }
                    order += 1;
                    let run = msg.address.run_id.clone().unwrap_or_default();
                    acc.entry(run).or_default().add(&msg, order);
                    Flow::Continue
                },
                scan.min(usize::MAX as u64) as usize,
            )
            .await?;
        }
        let mut runs: Vec<(u64, RunSummary)> = acc
            .into_iter()
            .map(|(run_id, a)| (a.last_order, a.summary(run_id, from > first)))
            .filter(|(_, r)| status.is_none_or(|s| r.status == s))
            .collect();
        runs.sort_by_key(|r| std::cmp::Reverse(r.0));
        let total = runs.len();
        let runs: Vec<RunSummary> = runs.into_iter().take(limit).map(|(_, r)| r).collect();
        let older = from > first;
        Ok(RunList {
            stream: info.config.name.clone(),
            more: total > limit || older,
            next: older.then(|| from.to_string()),
            scanned: Some((from, end)),
            runs,
        })
    }

    /// `run RUN`: the run's messages in order (a page from `from_seq`), with its summary. The
    /// stream is found by the run's subjects when `stream` is `None`.
    pub async fn run(
        &self,
        run_id: &str,
        stream: Option<&str>,
        from_seq: Option<u64>,
        limit: usize,
    ) -> Result<RunTimeline> {
        check_token("RUN", run_id)?;
        let name = match stream {
            Some(s) => s.to_owned(),
            None => {
                let found = self
                    .streams_for_subject(&format!("agent.*.*.*.*.{run_id}.*.*.*"))
                    .await?;
                match found.as_slice() {
                    [] => {
                        return Err(InspectError::NoRun {
                            run: clip(run_id),
                            place: format!("any stream of {}", self.url()),
                        });
                    }
                    [one] => one.clone(),
                    many => {
                        // Several streams could store it: the first that has an event of it.
                        let mut hit = None;
                        for s in many {
                            let q = ViewQuery {
                                run: Some(run_id.to_owned()),
                                limit: 1,
                                ..Default::default()
                            };
                            if self.view(s, &q).await.is_ok_and(|p| !p.messages.is_empty()) {
                                hit = Some(s.clone());
                                break;
                            }
                        }
                        hit.unwrap_or_else(|| many[0].clone())
                    }
                }
            }
        };
        let q = ViewQuery {
            run: Some(run_id.to_owned()),
            from_seq,
            limit,
            ..Default::default()
        };
        let mut page = self.view(&name, &q).await?;
        if page.messages.is_empty() && from_seq.is_none() {
            return Err(InspectError::NoRun {
                run: clip(run_id),
                place: format!("stream `{name}`"),
            });
        }
        let mut acc = Acc::default();
        for (i, m) in page.messages.iter_mut().enumerate() {
            let is_control = m.address.kind.as_deref() == Some("control_event");
            if is_control && acc.ended_by.is_some() {
                m.after_stop = true;
            }
            acc.add(m, i as u64 + 1);
        }
        Ok(RunTimeline {
            run: acc.summary(run_id.to_owned(), from_seq.is_some_and(|s| s > 1)),
            stream: page.stream,
            messages: page.messages,
            more: page.more,
            next_seq: page.next_seq,
        })
    }
}

/// What the messages of one run say.
#[derive(Default)]
struct Acc {
    thread_id: Option<String>,
    agent_class: Option<String>,
    started: Option<String>,
    saw_start: bool,
    last: Option<String>,
    events: u64,
    after_stop: u64,
    ended_by: Option<String>,
    status: Option<RunStatus>,
    last_event: Option<String>,
    last_order: u64,
}

impl Acc {
    fn add(&mut self, m: &Message, order: u64) {
        let control = m.address.kind.as_deref() != Some("display_event");
        if self.thread_id.is_none() {
            self.thread_id = m.address.thread_id.clone();
            self.agent_class = m.address.agent_class.clone();
        }
        if self.started.is_none() {
            self.started = m.time.clone();
        }
        self.last = m.time.clone();
        self.last_order = order;
        let name = m
            .event
            .as_ref()
            .map(|e| e.event_name.clone())
            .or_else(|| m.address.event_name.clone());
        if control {
            self.events += 1;
            if self.ended_by.is_some() {
                self.after_stop += 1;
            }
        }
        if let Some(e) = &m.event {
            if e.flags.start && self.events <= 1 {
                self.saw_start = true;
            }
            if control && self.ended_by.is_none() && e.flags.is_terminal() {
                self.ended_by = Some(e.event_name.clone());
                self.status = Some(if e.flags.exception {
                    RunStatus::Failed
                } else {
                    RunStatus::Stopped
                });
            }
        }
        self.last_event = name;
    }

    fn summary(self, run_id: String, window_cut: bool) -> RunSummary {
        RunSummary {
            run_id,
            thread_id: self.thread_id,
            agent_class: self.agent_class,
            status: self.status.unwrap_or(RunStatus::Live),
            ended_by: self.ended_by,
            started: self.started,
            last: self.last,
            events: self.events,
            after_stop: self.after_stop,
            last_event: self.last_event,
            partial: window_cut && !self.saw_start,
        }
    }
}
