//! Forking a stored run (issue 23 §2, [`Engine::fork`]): a new run made of the original's
//! journal up to an event from outside — written to the store under the new run's id, its
//! first entry naming the original ([`ForkOrigin`]), adopted through the core as a stored
//! run is after a restart, so those executions' outputs are reused, not run again — then
//! the changed or added event, and from there the run goes on: an execution whose step and
//! inputs the original also executed after that point takes its recorded outputs
//! (`fork_reuse`), the rest run live; the original's later events from outside are sent
//! again as the fork settles.
//!
//! Must not touch the original run, and must not fork where the copy would share something
//! live with it (a child run still awaited or detached).

use super::Engine;
use super::error::EngineError;
use super::fork_reuse::ForkReuse;
use super::ids::hex_id;
use super::shared::Shared;
use crate::backend::{ForkOrigin, JournalEntry, PersistBatch, RunMeta, StoredInput, StoredRun};
use crate::event::Payload;
use crate::fork::{ForkChange, ForkOptions, Forked, NotReapplied};
use crate::history::StoredRunView;
use saap_dispatch::Origin;
use saap_dispatch::run::ChildState;
use std::sync::Arc;
use std::time::Duration;

/// An event of the original sent to the fork: its id, type name and fields, and its place
/// in the original's log.
struct Resent {
    seq: u32,
    id: saap_dispatch::EventId,
    name: String,
    payload: Payload,
}

impl Engine {
    /// Forks stored run `run_id` at event `opts.at` of its log (see [`ForkOptions`] and
    /// [`ForkChange`]): returns once the fork's event is durable and the original's later
    /// events from outside were sent again (each once the fork had no step running, waiting
    /// up to `opts.settle`). Needs a store that keeps journals (the embedded one, NATS) and
    /// the workflow version that recorded the run. Refused (`SAAP-E024`) at the start event,
    /// past the log, at an event that is not from outside, after the run ended, or where the
    /// run has a child run awaited or detached.
    pub async fn fork(&self, run_id: &str, opts: ForkOptions) -> Result<Forked, EngineError> {
        let shared = &self.shared;
        let workflow = &shared.workflow;
        let bad = |detail: String| EngineError::BadForkPoint {
            run_id: run_id.to_string(),
            detail,
        };
        if !shared.backend.wants_journal() {
            return Err(bad(format!(
                "the {} store keeps no journal to fork from; fork a run of the embedded store or of NATS",
                shared.backend.name()
            )));
        }
        let stored = shared
            .backend
            .read_run(workflow.name(), run_id)
            .wait()
            .await?
            .ok_or_else(|| EngineError::unknown_run(run_id))?;
        let view = StoredRunView::rebuild(workflow, &stored).map_err(|e| EngineError::Replay {
            run_id: run_id.to_string(),
            detail: e.to_string(),
        })?;
        // A changed event that cannot be sent is refused before anything is written.
        if let ForkChange::Replace { name, payload } | ForkChange::Add { name, payload } =
            &opts.change
        {
            let size = payload.check_json()?;
            shared.incoming(name, payload.clone(), size, None)?;
        }
        let outside = outside_events(&stored, &view);
        let k = fork_entry(&view, &outside, &stored, &opts).map_err(bad)?;

        // The new run: the original's first `k` entries under a new id and thread.
        let ids = shared.ids.next_run();
        let new_id = hex_id(&ids.run);
        let thread: Arc<str> = match &opts.thread_id {
            Some(t) => t.as_str().into(),
            None => hex_id(&ids.thread),
        };
        let records: usize = stored.entry_records[..k].iter().map(|&n| n as usize).sum();
        let mut journal: Vec<JournalEntry> = stored.journal[..k].to_vec();
        journal[0].fork = Some(ForkOrigin {
            run_id: run_id.to_string(),
            at: opts.at,
            entries: k as u32,
            live: !opts.reuse,
        });
        let prefix = StoredRun {
            meta: RunMeta {
                run_id: new_id.clone(),
                thread_id: thread.clone(),
                workflow: workflow.name().to_string(),
                fingerprint: shared.fingerprint,
                parent: None,
            },
            ended: false,
            journal,
            records: stored.records[..records].to_vec(),
            entry_records: stored.entry_records[..k].to_vec(),
            damaged: None,
        };
        self.check_fork_prefix(&prefix, opts.at).map_err(bad)?;
        // What the original did after the copied entries, for the fork's executions whose
        // inputs it saw.
        let reuse = opts
            .reuse
            .then(|| ForkReuse::new(&stored, &view.run, &view.payloads, k))
            .flatten()
            .map(Box::new);
        self.persist_prefix(&prefix).await?;
        self.adopt_with(prefix, reuse).await?;

        // The fork point.
        let at_original = outside.iter().find(|e| e.seq == opts.at);
        let mut later: Vec<&Resent> = outside.iter().filter(|e| e.seq > opts.at).collect();
        match &opts.change {
            ForkChange::Same => {
                if let Some(e) = at_original {
                    self.resend(&new_id, e).await?;
                }
            }
            ForkChange::Replace { name, payload } => {
                self.send_named(&new_id, name, payload.clone()).await?;
            }
            ForkChange::Add { name, payload } => {
                self.send_named(&new_id, name, payload.clone()).await?;
                if let Some(e) = at_original {
                    later.insert(0, e);
                }
            }
        }
        let (reapplied, not_reapplied) = if opts.reapply {
            self.reapply(&new_id, &later, opts.settle).await
        } else {
            let skipped = later
                .iter()
                .map(|e| not_sent(e, "not sent again (reapply is off)"))
                .collect();
            (Vec::new(), skipped)
        };
        let executions_reused = stored.journal[..k]
            .iter()
            .filter(|e| matches!(e.input, StoredInput::Complete { .. }))
            .count() as u32;
        Ok(Forked {
            run_id: new_id.to_string(),
            thread_id: thread.to_string(),
            forked_from: run_id.to_string(),
            at: opts.at,
            entries_reused: k as u32,
            executions_reused,
            reapplied,
            not_reapplied,
        })
    }

    /// Rebuilds the fork's first entries through the core (checked against the original's
    /// records) and refuses a prefix that ended or shares a child run with the original.
    fn check_fork_prefix(&self, prefix: &StoredRun, at: u32) -> Result<(), String> {
        let (slot, _) = self.shared.rebuild(prefix.clone())?;
        let st = slot.lock();
        // The copy is not marked ended: the core says whether the prefix ended the run.
        if st.run.is_terminated() {
            return Err(format!(
                "the run had ended before event [{at}]; fork at an earlier event from outside"
            ));
        }
        if let Some(c) = st
            .run
            .children()
            .iter()
            .find(|c| matches!(c.state, ChildState::Awaited | ChildState::Detached))
        {
            return Err(format!(
                "before event [{at}] the run has a child run ({}) that is still {}; a fork would share it with the original — fork at an event before the child was requested or after its end came back",
                hex_id(&c.request),
                if c.state == ChildState::Awaited {
                    "awaited"
                } else {
                    "running detached"
                }
            ));
        }
        Ok(())
    }

    /// Writes the fork's first entries and their records to the store, as the new run's.
    async fn persist_prefix(&self, prefix: &StoredRun) -> Result<(), EngineError> {
        let mut first_record = 0usize;
        for (i, entry) in prefix.journal.iter().enumerate() {
            let n = prefix.entry_records[i] as usize;
            let records = &prefix.records[first_record..first_record + n];
            first_record += n;
            let json = |v: Result<String, serde_json::Error>| {
                v.map_err(|e| EngineError::Replay {
                    run_id: prefix.meta.run_id.to_string(),
                    detail: format!("the copied journal cannot be written as JSON: {e}"),
                })
            };
            let batch = PersistBatch {
                run_id: prefix.meta.run_id.clone(),
                new_run: (i == 0).then(|| prefix.meta.clone()),
                index: i as u64,
                entry_json: json(serde_json::to_string(entry))?,
                records_json: json(serde_json::to_string(records))?,
                ended: false,
            };
            self.shared.backend.persist(batch).wait().await?;
        }
        Ok(())
    }

    /// Sends an event of the original to the fork under its own id.
    async fn resend(&self, fork: &str, e: &Resent) -> Result<(), EngineError> {
        let slot = self.shared.slot_or_ended(fork).await?;
        let size = e.payload.check_json()?;
        let ev = self
            .shared
            .incoming(&e.name, e.payload.clone(), size, Some(e.id))?;
        self.shared.submit_sent(&slot, ev).await.map(|_| ())
    }

    /// Sends the original's later events to the fork, each once it has no step running.
    async fn reapply(
        &self,
        fork: &str,
        later: &[&Resent],
        settle: Duration,
    ) -> (Vec<u32>, Vec<NotReapplied>) {
        let mut sent = Vec::new();
        let mut skipped = Vec::new();
        for (i, e) in later.iter().enumerate() {
            // An event for a fork that has ended is kept as evidence, as the original kept
            // the events it got after its own end.
            if let Settled::Busy = self.settled(fork, settle).await {
                let reason = format!("the fork still ran a step after {}s", settle.as_secs_f64());
                skipped.extend(later[i..].iter().map(|e| not_sent(e, &reason)));
                break;
            }
            match self.resend(fork, e).await {
                Ok(()) => sent.push(e.seq),
                Err(err) => skipped.push(not_sent(e, &err.to_string())),
            }
        }
        (sent, skipped)
    }

    /// Waits until run `run_id` has no step running (or has ended), up to `limit`.
    async fn settled(&self, run_id: &str, limit: Duration) -> Settled {
        let Ok(mut rx) = self.watch(run_id) else {
            return Settled::Ended;
        };
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            rx.borrow_and_update();
            if let Ok(slot) = self.shared.slot(run_id) {
                let st = slot.lock();
                if st.run.is_terminated() {
                    return Settled::Ended;
                }
                if st.run.running().next().is_none() {
                    return Settled::Quiet;
                }
            } else {
                return Settled::Ended;
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => continue,
                Ok(Err(_)) => return Settled::Ended,
                Err(_) => return Settled::Busy,
            }
        }
    }
}

impl Shared {
    /// For a live fork being rebuilt from its journal (at open, or taken over on NATS): the
    /// outputs its executions may still take from its original (the original read from the
    /// store again, minus those its journal says were taken). `None` for a run that is not
    /// a fork, one forked with reuse off, or an original that cannot be read (then the
    /// fork's executions run live, which is said in the log).
    pub(super) async fn fork_reuse(&self, journal: &[JournalEntry]) -> Option<Box<ForkReuse>> {
        let origin = journal.first()?.fork.as_ref().filter(|o| !o.live)?;
        let original_id = origin.run_id.as_str();
        let original = match self
            .backend
            .read_run(self.workflow.name(), &origin.run_id)
            .wait()
            .await
        {
            Ok(Some(original)) => original,
            Ok(None) => {
                tracing::warn!(
                    original = original_id,
                    "a fork's original run is gone: its executions run live"
                );
                return None;
            }
            Err(e) => {
                tracing::warn!(original = original_id, error = %e, "a fork's original run cannot be read: its executions run live");
                return None;
            }
        };
        let view = match StoredRunView::rebuild(&self.workflow, &original) {
            Ok(view) => view,
            Err(e) => {
                tracing::warn!(original = original_id, error = %e, "a fork's original run cannot be rebuilt: its executions run live");
                return None;
            }
        };
        let mut table = ForkReuse::new(
            &original,
            &view.run,
            &view.payloads,
            origin.entries as usize,
        )?;
        for entry in journal {
            if let StoredInput::Complete {
                reused: Some(o), ..
            } = &entry.input
            {
                table.taken(*o);
            }
        }
        Some(Box::new(table))
    }
}

enum Settled {
    Quiet,
    Ended,
    Busy,
}

fn not_sent(e: &Resent, reason: &str) -> NotReapplied {
    NotReapplied {
        seq: e.seq,
        name: e.name.clone(),
        reason: reason.to_string(),
    }
}

/// The original's events from outside (not display events), each with its place in the
/// log, in log order.
fn outside_events(stored: &StoredRun, view: &StoredRunView) -> Vec<Resent> {
    let mut out: Vec<Resent> = stored
        .journal
        .iter()
        .filter_map(|entry| match &entry.input {
            StoredInput::Append {
                event, by: None, ..
            } => {
                let seq = view.run.seq_of(&event.id)?;
                matches!(view.run.log()[seq as usize].origin, Origin::Outside).then(|| Resent {
                    seq,
                    id: event.id,
                    name: event.name.clone(),
                    payload: event.payload.clone(),
                })
            }
            _ => None,
        })
        .collect();
    out.sort_by_key(|e| e.seq);
    out
}

/// The journal entry the fork departs at: the one that logged event `opts.at` (or the
/// journal's end, for a fork after the whole log); what is wrong with the fork point
/// otherwise.
fn fork_entry(
    view: &StoredRunView,
    outside: &[Resent],
    stored: &StoredRun,
    opts: &ForkOptions,
) -> Result<usize, String> {
    let at = opts.at;
    let len = view.run.log().len() as u32;
    let choices = || {
        let list: Vec<String> = outside
            .iter()
            .filter(|e| e.seq > 0)
            .map(|e| format!("[{}] {}", e.seq, e.name))
            .collect();
        if list.is_empty() {
            format!(
                "it has no later event from outside, so only its end, [{len}], with an event added"
            )
        } else {
            format!(
                "its events from outside are {}; or its end, [{len}], with an event added",
                list.join(", ")
            )
        }
    };
    if at == 0 {
        return Err(format!(
            "event [0] starts the run and a fork keeps it; to start over with another start event, start a new run ({})",
            choices()
        ));
    }
    if at > len {
        return Err(format!(
            "its log has {len} events ([0]–[{}]); {}",
            len.saturating_sub(1),
            choices()
        ));
    }
    if at == len {
        if !matches!(opts.change, ForkChange::Add { .. }) {
            return Err(format!(
                "[{len}] is the end of its log: there is no event there to send again or replace; add one (--event JSON)"
            ));
        }
        return Ok(stored.journal.len());
    }
    let Some(e) = outside.iter().find(|e| e.seq == at) else {
        let ev = &view.run.log()[at as usize];
        let origin = match ev.origin {
            Origin::Execution(x) => format!(
                "an output of execution {x} (step `{}`)",
                view.run
                    .execution(x)
                    .and_then(|e| view.run.spec().steps.get(e.step as usize))
                    .map_or("?", |s| s.name.as_str())
            ),
            _ => "not an event sent from outside".to_string(),
        };
        return Err(format!(
            "event [{at}] ({}) is {origin}; a fork departs at an event from outside: {}",
            view.run.type_name(ev.ty),
            choices()
        ));
    };
    stored
        .journal
        .iter()
        .position(|entry| {
            matches!(&entry.input, StoredInput::Append { event, by: None, .. } if event.id == e.id)
        })
        .ok_or_else(|| format!("event [{at}] is not in the run's journal"))
}
