//! Delegation between engines in one process (DESIGN §8, issue 21 §3–§4): a step's
//! [`AgentInTheLoopRequestEvent`] output starts a run of another workflow (the child), whose
//! end comes back to the parent as an [`AgentInTheLoopResponseEvent`] or
//! [`AgentInTheLoopExceptionEvent`]; a run that ends cancels the children the core
//! abandoned (its awaited ones, and every one when it was cancelled), so a cancel covers
//! the whole tree.
//!
//! The core decides (`Run::delegate`, `Run::child_ended`, abandoned children at the end);
//! this file does what it asks, each step only once what it follows is durable: a child is
//! started after the parent's request is in its journal, a child's end is delivered after
//! it is in the child's. A child's run id is its request's event id, so making sure of a
//! child (start it, or deliver its end if it has one) can be done again at any time: that
//! is what [`crate::Engine::delegate_to`] does for every child its runs still wait for,
//! which closes the crash windows between the two journals. Must not decide anything the
//! core decides, nor write to a store but through the engines' inputs.

use super::apply::Input;
use super::asked::Asked;
use super::error::EngineError;
use super::incoming::Incoming;
use super::shared::Shared;
use super::slot::{ParentEngine, ParentLink, RunSlot, RunState};
use crate::backend::{Pending, StoreError};
use crate::delegation::{
    AgentInTheLoopExceptionEvent, AgentInTheLoopRequestEvent, AgentInTheLoopResponseEvent,
};
use crate::event::{Event, Payload};
use crate::params::OutEvent;
use crate::process::AgentWorkEvent;
use saap_dispatch::run::timers::TimerRequest;
use saap_dispatch::run::{ChildRequest, ChildState, RunStatus};
use saap_dispatch::{EventId, ExecutionId, NewEvent, NewEventType, Seq};
use std::future::Future;
use std::sync::{Arc, Weak};

/// The output index a child's deadline event is made as: its request's index with the top
/// bit set, so that its id is derived like an output's and is no output's.
const DEADLINE_OUTPUT: u32 = 1 << 31;

/// A delegation request among a completion's outputs: its output index, the request, and
/// its deadline's due time.
pub(super) struct Delegation {
    pub(super) output: usize,
    pub(super) req: AgentInTheLoopRequestEvent,
    pub(super) asked: Asked,
    pub(super) deadline: Option<u64>,
}

/// A child a completion asks for: its request's event id, the request, and its deadline
/// (the event and its due time).
pub(super) type NewChild = (EventId, AgentInTheLoopRequestEvent, Option<(Incoming, u64)>);

/// A child to make sure of, as its parent's journal has it.
pub(super) struct ChildStart {
    child: u32,
    request: EventId,
    req: AgentInTheLoopRequestEvent,
}

/// Who is delegating: the parent run as its children need to know it.
#[derive(Clone)]
struct Parent {
    run_id: Arc<str>,
    thread_id: Arc<str>,
    depth: u32,
}

/// What a run's end asks of its tree, done once the end is durable.
pub(super) struct EndEffects {
    /// The event reporting the end, for the parent that awaits it.
    report: Option<ToParent>,
    /// Children to cancel (agent class, run id), and why.
    cancel: Vec<(String, String)>,
    reason: String,
}

/// A child's report and where it goes: its parent's engine (see [`ParentLink`]) and run.
struct ToParent {
    engine: ParentEngine,
    run_id: Arc<str>,
    report: Report,
}

/// The event that reports a child's end to its parent.
pub(super) struct Report {
    pub(super) name: &'static str,
    pub(super) payload: Payload,
}

impl Report {
    /// This report in the form the request `asked` for: a process's work request is
    /// answered by one `AgentWorkEvent`, whether the child stopped or not.
    pub(super) fn in_form_asked(self, asked: Asked) -> Report {
        if asked == Asked::InTheLoop || self.name == AgentWorkEvent::NAME {
            return self;
        }
        let work = if self.name == AgentInTheLoopResponseEvent::NAME {
            crate::event::from_payload::<AgentInTheLoopResponseEvent>(&self.payload)
                .map(AgentWorkEvent::from)
        } else {
            crate::event::from_payload::<AgentInTheLoopExceptionEvent>(&self.payload)
                .map(AgentWorkEvent::from)
        };
        match work {
            Ok(work) => Report {
                name: AgentWorkEvent::NAME,
                payload: Payload::typed(work),
            },
            Err(e) => {
                tracing::error!(error = %e, "a child's report could not be made a work event");
                self
            }
        }
    }
}

impl Shared {
    /// Whether events of type `ty` are delegation requests.
    pub(super) fn is_delegating(&self, ty: &NewEventType) -> Option<Asked> {
        match ty {
            NewEventType::Known(t) => self.delegating.get(*t as usize).copied().flatten(),
            NewEventType::Foreign { .. } => None,
        }
    }

    /// How child `child` of the run in `st` was asked for (read from its request's type).
    pub(super) fn asked(&self, st: &RunState, child: u32) -> Asked {
        st.run
            .children()
            .get(child as usize)
            .and_then(|c| st.run.log().get(c.request_seq as usize))
            .and_then(|e| match e.ty {
                saap_dispatch::run::EventTy::Known(t) => {
                    self.delegating.get(t as usize).copied().flatten()
                }
                saap_dispatch::run::EventTy::Foreign(_) => None,
            })
            .unwrap_or(Asked::InTheLoop)
    }

    /// The delegation requests among a completion's outputs (by output index), read and
    /// checked, each with its deadline's due time (nanoseconds since the Unix epoch) when it
    /// is awaited and has `timeout_seconds`; `Err` (the step's failure message) for a
    /// request that names no agent this engine knows, nests too deep, does not read as a
    /// request, or has a timeout that is not a number of seconds within the timer horizon.
    pub(super) fn delegations(
        &self,
        depth: u32,
        step: Option<u32>,
        outs: &[OutEvent],
    ) -> Result<Vec<Delegation>, String> {
        let step = step.and_then(|s| self.workflow.spec().steps.get(s as usize));
        let mut found = Vec::new();
        for (i, o) in outs.iter().enumerate() {
            let Some(asked) = o
                .due_ns
                .is_none()
                .then(|| self.is_delegating(&self.out_type(None, &o.name)))
                .flatten()
            else {
                continue;
            };
            let req: AgentInTheLoopRequestEvent =
                crate::event::from_payload(&o.payload).map_err(|e| {
                    format!(
                        "SAAP-E015: step output `{}` is a delegation request that cannot be read \
                         ({e}); give it `agent_class`, `start_event_name` and `start_event`",
                        o.name
                    )
                })?;
            if let Some(step) = step.filter(|s| {
                !s.delegates_to.is_empty() && !s.delegates_to.contains(&req.agent_class)
            }) {
                return Err(format!(
                    "SAAP-E013: step output `{}` delegates to agent `{}`, which step `{}` does \
                     not declare (it declares: {}); correct the name, or add it to the step's \
                     `delegates_to`",
                    o.name,
                    super::error::shown(&req.agent_class),
                    step.name,
                    step.delegates_to.join(", ")
                ));
            }
            if self.delegate(&req.agent_class).is_none() && self.remote().is_none() {
                return Err(format!(
                    "SAAP-E013: step output `{}` delegates to agent `{}`, which this engine does \
                     not know; register that agent's engine with `Engine::delegate_to` (known: {})",
                    o.name,
                    req.agent_class,
                    self.delegate_names().join(", ")
                ));
            }
            let depth = depth + 1;
            if depth > self.opts.max_delegation_depth {
                return Err(format!(
                    "SAAP-E014: step output `{}` would start a run {depth} delegations deep, past \
                     the limit of {} (EngineOptions::max_delegation_depth); agents that delegate \
                     to each other need a way to stop",
                    o.name, self.opts.max_delegation_depth
                ));
            }
            let deadline = match req.timeout_seconds {
                Some(secs) if !req.detached => Some(self.deadline_ns(&o.name, secs)?),
                _ => None,
            };
            found.push(Delegation {
                output: i,
                req,
                asked,
                deadline,
            });
        }
        Ok(found)
    }

    /// When a child given `secs` seconds must have ended.
    fn deadline_ns(&self, output: &str, secs: f64) -> Result<u64, String> {
        let horizon = self.opts.max_timer_horizon;
        if !secs.is_finite() || secs < 0.0 || secs > horizon.as_secs_f64() {
            return Err(format!(
                "SAAP-E019: step output `{output}` gives its child `timeout_seconds` {secs}, \
                 which is not a number of seconds from 0 to the engine's timer horizon of {} \
                 days (the engine option `max_timer_horizon`); give the child a time it can \
                 keep",
                horizon.as_secs() / 86_400
            ));
        }
        Ok(super::ids::unix_nanos().saturating_add((secs * 1e9) as u64))
    }

    /// The event that takes a child's end's place when its deadline comes first: an
    /// exception its parent's failure path takes, made as output `index` of `execution`
    /// (an index no step output has).
    pub(super) fn deadline_event(
        &self,
        run_key: u64,
        execution: ExecutionId,
        index: u32,
        request: EventId,
        req: &AgentInTheLoopRequestEvent,
        asked: Asked,
    ) -> Incoming {
        let secs = req.timeout_seconds.unwrap_or_default();
        let timed_out = AgentInTheLoopExceptionEvent {
            exception_event_name: "ExceptionEvent".into(),
            exception_event: serde_json::json!({
                "message": format!(
                    "the child did not end within its timeout of {secs} s (timeout_seconds); \
                     its run is cancelled"
                ),
                "http_status_code": 504,
                "timeout_seconds": secs,
            }),
            request_event_id: request.to_string(),
            agent_class: req.agent_class.clone(),
            child_run_id: request.to_string(),
            unmet_obligation: owed_kind(req.expected_stop_event_name.as_deref()),
        };
        let out = match asked {
            Asked::InTheLoop => OutEvent::new(timed_out),
            Asked::Work => OutEvent::new(AgentWorkEvent::from(timed_out)),
        };
        self.output(None, run_key, execution, DEADLINE_OUTPUT | index, out)
    }

    /// Adds the children a completion asked for to the core (right after the completion,
    /// same lock, same journal entry); returns them numbered, to be started once durable.
    pub(super) fn set_children(
        &self,
        slot: &RunSlot,
        st: &mut RunState,
        execution: ExecutionId,
        requests: Vec<NewChild>,
    ) -> Result<Vec<ChildStart>, EngineError> {
        let first = st.run.children().len() as u32;
        let first_timer = st.run.timers().len();
        let mut deadline_payloads = Vec::new();
        let mut children = Vec::with_capacity(requests.len());
        let mut requests_kept = Vec::with_capacity(requests.len());
        for (request, req, deadline) in requests {
            let deadline = deadline.map(|(ev, due_ns)| {
                deadline_payloads.push(ev.payload);
                TimerRequest {
                    event: NewEvent {
                        id: ev.id,
                        ty: ev.ty,
                    },
                    due_ns,
                }
            });
            children.push(ChildRequest {
                request,
                detached: req.detached,
                deadline,
            });
            requests_kept.push((request, req));
        }
        let requests = requests_kept;
        let mut pre = self.pre(&st.payloads, &[], &mut st.pre_cache);
        st.run
            .handle(
                saap_dispatch::run::input::RunInput::Delegate {
                    execution,
                    children,
                },
                &mut pre,
            )
            .map_err(|e| EngineError::Core {
                run_id: slot.run_id().to_string(),
                detail: e.to_string(),
            })?;
        // The core set a timer for each deadline (awaited children only: a request that
        // runs detached is given none), numbered after the run's timers.
        if !deadline_payloads.is_empty() {
            super::slot::keep_timer_payloads(st, first_timer, deadline_payloads);
        }
        Ok(requests
            .into_iter()
            .enumerate()
            .map(|(i, (request, req))| ChildStart {
                child: first + i as u32,
                request,
                req,
            })
            .collect())
    }

    /// Starts the children once `durable` (the parent's entry that asked for them) is.
    #[cold]
    #[inline(never)]
    pub(super) fn start_children_after(
        self: &Arc<Self>,
        slot: &RunSlot,
        st: &RunState,
        starts: Vec<ChildStart>,
        durable: Pending<()>,
    ) -> Pending<()> {
        let parent = Parent {
            run_id: slot.run_id().clone(),
            thread_id: slot.thread_id().clone(),
            depth: st.delegation_depth(),
        };
        let shared = self.clone();
        after_durable(
            durable,
            Resolve::WhenDurable,
            "children are not started",
            async move {
                for c in starts {
                    shared.ensure_child(&parent, c).await;
                }
            },
        )
    }

    /// Makes sure of one child: started if it is not, its end delivered if it has one
    /// (again harmlessly: the core refuses a second end).
    async fn ensure_child(self: &Arc<Self>, parent: &Parent, c: ChildStart) {
        let awaited = !c.req.detached;
        let this: Weak<dyn std::any::Any + Send + Sync> = self.this.clone();
        let link = awaited.then(|| ParentLink {
            engine: ParentEngine::Local {
                engine: this,
                child: c.child,
            },
            run_id: parent.run_id.clone(),
            depth: parent.depth + 1,
            expects: c.req.expected_stop_event_name.as_deref().map(Box::from),
        });
        let thread = c.req.share_thread_id.then(|| parent.thread_id.clone());
        let by = crate::backend::RunParent {
            run_id: parent.run_id.to_string(),
            agent_class: self.workflow.name().to_string(),
        };
        let adopted = match (self.delegate(&c.req.agent_class), self.remote()) {
            (Some(engine), _) => engine
                .adopt_child(c.request, link, by, thread, &c.req)
                .await
                .map_err(|e| e.to_string()),
            // On another process: its end comes back as a report (`remote`).
            (None, Some(remote)) => remote
                .start(super::remote::RemoteChild {
                    request: c.request,
                    req: c.req.clone(),
                    parent: by,
                    thread_id: thread.map(|t| t.to_string()),
                    depth: parent.depth + 1,
                })
                .await
                .map(|()| None),
            (None, None) => Err(format!(
                "agent `{}` is not known to this process (register its engine with \
                 `Engine::delegate_to`)",
                c.req.agent_class
            )),
        };
        match adopted {
            Ok(Some(report)) if awaited => self.deliver(&parent.run_id, c.child, report).await,
            // Started (or found live): the parent may have given it up while it was being
            // made (its deadline fired, or it ended), when a cancel found no run to cancel.
            Ok(None) if self.gave_up(&parent.run_id, c.child, awaited) => {
                let reason = format!(
                    "its parent run {} gave it up before it had started",
                    parent.run_id
                );
                let run_id = c.request.to_string();
                self.cancel_children(vec![(c.req.agent_class, run_id)], &reason)
                    .await;
            }
            Ok(_) => {}
            Err(why) => {
                tracing::warn!(parent = %parent.run_id, child = c.child, error = %why, "a child run could not be started");
                if awaited {
                    self.deliver(&parent.run_id, c.child, unstarted(&c, &why))
                        .await;
                }
            }
        }
    }

    /// Whether parent run `run_id` gave child `child` up (its deadline came first, or the
    /// parent ended or was cancelled first). A parent no longer held ended: it gave up its
    /// awaited children.
    fn gave_up(&self, run_id: &str, child: u32, awaited: bool) -> bool {
        let Some(slot) = self.held(run_id) else {
            return awaited;
        };
        let state = slot
            .lock()
            .run
            .children()
            .get(child as usize)
            .map(|c| c.state);
        self.release(slot);
        matches!(
            state,
            Some(ChildState::TimedOut { .. } | ChildState::Abandoned)
        )
    }

    /// In the child's engine: the run of request `request` linked to its parent, started
    /// when it does not exist; its end's report when it has ended already.
    pub(super) async fn adopt_child(
        self: &Arc<Self>,
        request: EventId,
        link: Option<ParentLink>,
        by: crate::backend::RunParent,
        thread: Option<Arc<str>>,
        req: &AgentInTheLoopRequestEvent,
    ) -> Result<Option<Report>, EngineError> {
        let run_id = request.to_string();
        let expected = req.expected_stop_event_name.as_deref();
        // One task at a time finds or makes a child (two may make sure of the same one at
        // once: a step re-run at open, and the registration's pass over waiting children).
        let making = self.child_starts.lock().await;
        if let Some(slot) = self.held(&run_id) {
            drop(making);
            {
                let mut st = slot.lock();
                if !st.run.is_terminated() {
                    st.parent = link.map(Box::new);
                    return Ok(None);
                }
            }
            // It ended without a link (it ended before the parent's engine was back):
            // reported once its end is durable.
            slot.until_quiet().await;
            let st = slot.lock();
            return Ok(self.report(&slot, &st, expected));
        }
        if let Some(slot) = self.read_stored(&run_id).await? {
            let st = slot.lock();
            if st.run.is_terminated() {
                return Ok(self.report(&slot, &st, expected));
            }
        }
        let payload = Payload::from_json(req.start_event.clone());
        let ev = payload
            .check_json()
            .map_err(EngineError::from)
            .and_then(|size| self.incoming(&req.start_event_name, payload, size, None))?;
        // Its id is its request's event id; it is linked to its parent before its start
        // event is applied, so that an end reached at once is reported.
        let mut ids = self.ids.next_run();
        ids.run = request;
        let slot = self.new_run(thread.as_deref(), &ev, ids)?;
        {
            let mut st = slot.lock();
            st.parent = link.map(Box::new);
            st.delegated_by = Some(Box::new(by));
        }
        let applied = match self.apply_to_launch(&slot, self.start_input(ev)) {
            Ok(a) => a,
            Err(e) => {
                self.release(slot);
                return Err(e);
            }
        };
        // Held by the run table now: another task finds it.
        drop(making);
        let launched = self.launch(&slot, applied).await;
        self.release(slot);
        launched.map(|_| None)
    }

    /// At open: a live child run whose parent gave it up while no process had both (the
    /// parent's end, or the clock reading that passed the child's deadline, is durable; the
    /// cancel it asked of this child was not) is cancelled now, when the parent's journal
    /// says so (`child_abandoned` or `child_timed_out`: the core's decisions). A parent that
    /// still waits for it, or that let a detached child run on, leaves it be. Returns whether
    /// it was cancelled.
    pub(super) async fn reconcile_child(
        self: &Arc<Self>,
        run_id: &str,
        by: &crate::backend::RunParent,
    ) -> Result<bool, EngineError> {
        let Some(parent) = self
            .backend
            .read_run(&by.agent_class, &by.run_id)
            .wait()
            .await?
        else {
            return Ok(false);
        };
        let ended = crate::backend::summarize(&parent, None).ended;
        let children = crate::backend::children::delegated_runs(&parent);
        let Some(c) = children.iter().find(|c| c.run_id == run_id) else {
            return Ok(false);
        };
        let reason = if c.timed_out {
            format!(
                "its parent run {} ({}) stopped waiting for it (its timeout passed) while this \
                 run's process was down",
                by.run_id, by.agent_class
            )
        } else if ended && c.abandoned {
            format!(
                "its parent run {} ({}) ended and gave it up while this run's process was down",
                by.run_id, by.agent_class
            )
        } else {
            return Ok(false);
        };
        match self.cancel_run(run_id, &reason).await {
            Ok(_) => Ok(true),
            // It ended meanwhile: nothing to reconcile.
            Err(EngineError::RunEnded { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The event reporting the end of run `slot` to its parent (`None` while it runs).
    /// `expected`: the stop event type the request is owed (`expecting`); any other end is
    /// reported as an exception marked `typed_result` (a stop event of another type kept in
    /// its fields, so nothing the child said is lost). Decided before the parent journals
    /// the report, so that a replay of the parent reads the same decision.
    pub(super) fn report(
        &self,
        slot: &RunSlot,
        st: &RunState,
        expected: Option<&str>,
    ) -> Option<Report> {
        let RunStatus::Terminated { by } = st.run.status() else {
            return None;
        };
        let e = &st.run.log()[by as usize];
        let name = st.run.type_name(e.ty).to_string();
        let fields = end_fields(st, by);
        let (request_event_id, agent_class, child_run_id) = (
            slot.run_id().to_string(),
            self.workflow.name().to_string(),
            slot.run_id().to_string(),
        );
        let wrong_type = !e.kind.is_exception() && expected.is_some_and(|t| t != name);
        Some(if e.kind.is_exception() || wrong_type {
            let (exception_event_name, exception_event) = match expected {
                Some(t) if wrong_type => (
                    "ExceptionEvent".to_string(),
                    serde_json::json!({
                        "message": format!(
                            "unmet obligation: the child stopped with `{name}`, not the `{t}` \
                             its request expected"
                        ),
                        "stop_event_name": name,
                        "stop_event": fields,
                    }),
                ),
                _ => (name, fields),
            };
            Report {
                name: AgentInTheLoopExceptionEvent::NAME,
                payload: Payload::typed(AgentInTheLoopExceptionEvent {
                    exception_event_name,
                    exception_event,
                    request_event_id,
                    agent_class,
                    child_run_id,
                    unmet_obligation: owed_kind(expected),
                }),
            }
        } else {
            Report {
                name: AgentInTheLoopResponseEvent::NAME,
                payload: Payload::typed(AgentInTheLoopResponseEvent {
                    stop_event_name: name,
                    stop_event: fields,
                    request_event_id,
                    agent_class,
                    child_run_id,
                }),
            }
        })
    }

    /// In the parent's engine: hands the core child `child`'s end. A parent this engine no
    /// longer holds (it ended and left memory) needs nothing.
    async fn deliver(self: &Arc<Self>, run_id: &str, child: u32, report: Report) {
        let Ok(slot) = self.slot(run_id) else {
            tracing::debug!(run_id, child, "a child ended after its parent left memory");
            return;
        };
        let report = report.in_form_asked(self.asked(&slot.lock(), child));
        // The report types are the protocol's, so every workflow's types include them; the
        // core ignores a second end of one child (a delivery made sure of again).
        let delivered = match report.payload.check_json() {
            Ok(size) => self.incoming(report.name, report.payload, size, None),
            Err(e) => Err(e.into()),
        };
        let delivered = match delivered {
            Ok(ev) => self.submit(&slot, Input::ChildEnded { child, ev }).await,
            Err(e) => Err(e),
        };
        if let Err(e) = delivered {
            tracing::error!(run_id, child, error = %e, "a child's end could not be delivered");
        }
        self.release(slot);
    }

    /// What the end of run `slot` (just ended) asks of its tree: its report to an awaiting
    /// parent, the cancellation of the children the core abandoned.
    #[cold]
    #[inline(never)]
    pub(super) fn end_effects(&self, slot: &RunSlot, st: &RunState) -> Option<EndEffects> {
        let report = st.parent.as_ref().and_then(|p| {
            Some(ToParent {
                engine: p.engine.clone(),
                run_id: p.run_id.clone(),
                report: self.report(slot, st, p.expects.as_deref())?,
            })
        });
        let cancelled = st.run.progress() == saap_dispatch::run::progress::Progress::Cancelled;
        let cancel = st
            .run
            .children()
            .iter()
            .filter(|c| c.state == ChildState::Abandoned)
            .filter_map(|c| {
                let req = self.request_of(st, c.request_seq)?;
                Some((req.agent_class, c.request.to_string()))
            })
            .collect();
        let reason = if cancelled {
            format!("its parent run {} was cancelled", slot.run_id())
        } else {
            format!("its parent run {} ended", slot.run_id())
        };
        Some(EndEffects {
            report,
            cancel,
            reason,
        })
    }

    /// Does what a run's end asks of its tree once `durable` (the end) is.
    #[cold]
    #[inline(never)]
    pub(super) fn end_effects_after(
        &self,
        effects: EndEffects,
        durable: Pending<()>,
    ) -> Pending<()> {
        let Some(shared) = self.this.upgrade() else {
            return durable;
        };
        // Awaited: whoever waits for the run's end (`Engine::cancel`, a command that exits
        // after it) waits for its tree too; a cut cascade is reconciled at the next open.
        let what = "a run's end does not reach its tree";
        after_durable(durable, Resolve::WhenDone, what, async move {
            let EndEffects {
                report,
                cancel,
                reason,
            } = effects;
            if let Some(to) = report {
                match to.engine {
                    ParentEngine::Local { engine, child } => {
                        if let Some(parent) = engine.upgrade()
                            && let Ok(parent) = parent.downcast::<Shared>()
                        {
                            parent.deliver(&to.run_id, child, to.report).await;
                        }
                    }
                    ParentEngine::Remote { class } => {
                        let to_parent = crate::backend::RunParent {
                            run_id: to.run_id.to_string(),
                            agent_class: class.to_string(),
                        };
                        shared.report_remote(to_parent, to.report).await;
                    }
                }
            }
            shared.cancel_children(cancel, &reason).await;
        })
    }

    /// Cancels the runs of children whose deadline came first (`timed_out`, just recorded
    /// by the core) once `durable` (the clock reading that passed it) is. A cancel cut by a
    /// crash is made at the next open ([`Shared::reconcile_child`]).
    #[cold]
    #[inline(never)]
    pub(super) fn cancel_timed_out_after(
        &self,
        slot: &RunSlot,
        st: &RunState,
        timed_out: &[u32],
        durable: Pending<()>,
    ) -> Pending<()> {
        let Some(shared) = self.this.upgrade() else {
            return durable;
        };
        let cancel: Vec<(String, String)> = timed_out
            .iter()
            .filter_map(|&child| {
                let c = st.run.children().get(child as usize)?;
                let req = self.request_of(st, c.request_seq)?;
                Some((req.agent_class, c.request.to_string()))
            })
            .collect();
        let reason = format!(
            "its parent run {} stopped waiting for it: its timeout (timeout_seconds) passed",
            slot.run_id()
        );
        let what = "a timed-out child is not cancelled";
        after_durable(durable, Resolve::WhenDurable, what, async move {
            shared.cancel_children(cancel, &reason).await;
        })
    }

    /// Cancels child runs (agent class, run id), each on its agent's engine; one that ended
    /// meanwhile or is unknown needs nothing.
    async fn cancel_children(&self, cancel: Vec<(String, String)>, reason: &str) {
        for (class, run_id) in cancel {
            let Some(engine) = self.delegate(&class) else {
                if let Some(remote) = self.remote()
                    && let Err(e) = remote
                        .cancel(class, run_id.clone(), reason.to_string())
                        .await
                {
                    tracing::warn!(run_id, error = %e, "a child run on another process could not be cancelled");
                }
                continue;
            };
            match engine.cancel_run(&run_id, reason).await {
                Ok(_) | Err(EngineError::RunEnded { .. } | EngineError::UnknownRun { .. }) => {}
                Err(e) => {
                    tracing::warn!(run_id, error = %e, "a child run could not be cancelled")
                }
            }
        }
    }

    /// The request a child was started by, read from the parent's log.
    pub(super) fn request_of(&self, st: &RunState, seq: Seq) -> Option<AgentInTheLoopRequestEvent> {
        let payload = st.payloads.get(seq as usize)?;
        crate::event::from_payload(payload).ok()
    }

    /// The engine of agent `class`, if registered and alive.
    pub(super) fn delegate(&self, class: &str) -> Option<Arc<Shared>> {
        let delegates = self.delegates.read().unwrap_or_else(|p| p.into_inner());
        delegates
            .iter()
            .find(|(name, _)| &**name == class)
            .and_then(|(_, engine)| engine.upgrade())
    }

    fn delegate_names(&self) -> Vec<String> {
        let delegates = self.delegates.read().unwrap_or_else(|p| p.into_inner());
        delegates.iter().map(|(name, _)| name.to_string()).collect()
    }

    /// Registers `other` as the engine of its workflow's agent class (in place of an
    /// earlier one); returns the class.
    pub(super) fn register_delegate(&self, other: &Arc<Shared>) -> Arc<str> {
        let class: Arc<str> = other.workflow.name().into();
        let mut delegates = self.delegates.write().unwrap_or_else(|p| p.into_inner());
        delegates.retain(|(name, _)| *name != class);
        delegates.push((class.clone(), Arc::downgrade(other)));
        class
    }

    /// Registers `other` as the engine of its workflow's agent class, then makes sure of
    /// every child of that class the runs held here still wait for (started, or their end
    /// delivered): after a restart, what was between the two journals is done now.
    pub(super) async fn add_delegate(self: &Arc<Self>, other: &Arc<Shared>) {
        let class = self.register_delegate(other);
        let held: Vec<Arc<RunSlot>> = {
            let runs = self.runs.read().unwrap_or_else(|p| p.into_inner());
            runs.held.iter().map(|h| h.0.clone()).collect()
        };
        for slot in held {
            self.ensure_children_of(&slot, |c| *c == *class).await;
        }
    }

    /// Makes sure of every child run `run_id` still waits for (with `remote_only`, those
    /// of classes no engine of this process runs).
    pub(super) async fn ensure_children(self: &Arc<Self>, run_id: &str, remote_only: bool) {
        let Ok(slot) = self.slot(run_id) else { return };
        self.ensure_children_of(&slot, |c| !remote_only || self.delegate(c).is_none())
            .await;
        self.release(slot);
    }

    /// Makes sure of the awaited children of run `slot` whose agent class `class` takes.
    async fn ensure_children_of(self: &Arc<Self>, slot: &RunSlot, class: impl Fn(&str) -> bool) {
        let (parent, starts) = {
            let st = slot.lock();
            let starts: Vec<ChildStart> = st
                .run
                .children()
                .iter()
                .enumerate()
                .filter(|(_, c)| c.state == ChildState::Awaited)
                .filter_map(|(i, c)| {
                    let req = self.request_of(&st, c.request_seq)?;
                    class(&req.agent_class).then_some(ChildStart {
                        child: i as u32,
                        request: c.request,
                        req,
                    })
                })
                .collect();
            let parent = Parent {
                run_id: slot.run_id().clone(),
                thread_id: slot.thread_id().clone(),
                depth: st.delegation_depth(),
            };
            (parent, starts)
        };
        for c in starts {
            self.ensure_child(&parent, c).await;
        }
    }
}

/// The report of a child that could not be started.
fn unstarted(c: &ChildStart, why: &str) -> Report {
    Report {
        name: AgentInTheLoopExceptionEvent::NAME,
        payload: Payload::typed(AgentInTheLoopExceptionEvent {
            exception_event_name: "ExceptionEvent".into(),
            exception_event: serde_json::json!({
                "message": format!("the delegated run could not be started: {why}"),
                "http_status_code": 502,
            }),
            request_event_id: c.request.to_string(),
            agent_class: c.req.agent_class.clone(),
            child_run_id: String::new(),
            unmet_obligation: owed_kind(c.req.expected_stop_event_name.as_deref()),
        }),
    }
}

/// The unmet obligation of a child owed a stop event type (`expected`) that it did not
/// deliver: `typed_result`; none when nothing was owed.
pub(super) fn owed_kind(expected: Option<&str>) -> Option<String> {
    expected.map(|_| TYPED_RESULT.to_string())
}

/// The kind of unmet obligation of a child that ended without the stop event type its
/// request expected (seed 004's `typed-result`).
pub(crate) const TYPED_RESULT: &str = "typed_result";

/// The kind of unmet obligation of a child whose reported end no step of its parent takes.
pub(crate) const UNTAKEN: &str = "untaken";

/// The fields of the event that ended a run (an empty object when its payload is gone).
fn end_fields(st: &RunState, seq: Seq) -> serde_json::Value {
    st.payloads
        .get(seq as usize)
        .and_then(|p| p.try_json().ok())
        .cloned()
        .unwrap_or_else(|| serde_json::Value::Object(Default::default()))
}

/// What the [`Pending`] that [`after_durable`] returns waits for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Resolve {
    /// The entry being durable (children start on their own meanwhile).
    WhenDurable,
    /// The entry being durable and `then` done (a run's end reaching its tree: whoever
    /// waits for the end waits for that too).
    WhenDone,
}

/// `durable`, with `then` run (on a task of its own) once it is: at once when it is already,
/// never when it failed. Needs a tokio runtime (`what` says what is lost without one).
fn after_durable(
    durable: Pending<()>,
    resolve: Resolve,
    what: &str,
    then: impl Future<Output = ()> + Send + 'static,
) -> Pending<()> {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        tracing::error!("delegation needs a tokio runtime: {what}");
        return durable;
    };
    if resolve == Resolve::WhenDurable
        && let Pending::Ready(r) = durable
    {
        if r.is_ok() {
            rt.spawn(then);
        }
        return Pending::Ready(r);
    }
    let (tx, waited) = tokio::sync::oneshot::channel();
    rt.spawn(async move {
        let r = match durable {
            Pending::Ready(r) => r,
            Pending::Wait(rx) => rx.await.unwrap_or(Err(StoreError::Halted)),
        };
        let ok = r.is_ok();
        if resolve == Resolve::WhenDurable {
            let _ = tx.send(r);
            if ok {
                then.await;
            }
        } else {
            if ok {
                then.await;
            }
            let _ = tx.send(r);
        }
    });
    Pending::Wait(waited)
}

/// One child of a run, as [`crate::Engine::children`] and `show` report it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ChildView {
    /// Its number in its parent (the order it was requested in).
    pub child: u32,
    /// The agent it runs (its workflow's name), as the request named it.
    pub agent_class: String,
    /// Its run id: the request's event id.
    pub run_id: String,
    /// `awaited` (the parent waits for its end), `detached`, `ended` (its end was
    /// delivered), `unmet` (its end was delivered and no step takes it: an unmet
    /// obligation), `timed_out` (its deadline came first: the deadline's event took its
    /// end's place and the child was cancelled), or `abandoned` (the parent ended first, or
    /// was cancelled; the child was cancelled).
    pub state: &'static str,
    /// The execution of the parent that requested it.
    pub requested_by: String,
    /// Why it left its parent without what the parent needed: `untaken` (no step takes
    /// the event reporting its end), `typed_result` (its request expected a stop event
    /// type it did not deliver).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unmet_obligation: Option<&'static str>,
}

/// The children of `run`; `payload` gives a logged event's payload (by sequence number and
/// id), from which each request's agent is read.
pub(crate) fn child_views<'a>(
    run: &saap_dispatch::Run,
    payload: impl Fn(Seq, EventId) -> Option<&'a Payload>,
) -> Vec<ChildView> {
    run.children()
        .iter()
        .enumerate()
        .map(|(i, c)| ChildView {
            child: i as u32,
            unmet_obligation: match c.state {
                ChildState::Unmet { .. } => Some(UNTAKEN),
                ChildState::Ended { seq: Some(seq) } => run
                    .log()
                    .get(seq as usize)
                    .and_then(|e| payload(seq, e.id))
                    .and_then(|p| {
                        crate::event::from_payload::<AgentInTheLoopExceptionEvent>(p).ok()
                    })
                    .and_then(|e| e.unmet_obligation)
                    .filter(|kind| kind == TYPED_RESULT)
                    .map(|_| TYPED_RESULT),
                _ => None,
            },
            agent_class: payload(c.request_seq, c.request)
                .and_then(|p| crate::event::from_payload::<AgentInTheLoopRequestEvent>(p).ok())
                .map(|r| r.agent_class)
                .unwrap_or_default(),
            run_id: c.request.to_string(),
            state: match c.state {
                ChildState::Awaited => "awaited",
                ChildState::Detached => "detached",
                ChildState::Ended { .. } => "ended",
                ChildState::Unmet { .. } => "unmet",
                ChildState::TimedOut { .. } => "timed_out",
                ChildState::Abandoned => "abandoned",
            },
            requested_by: c.requested_by.to_string(),
        })
        .collect()
}
