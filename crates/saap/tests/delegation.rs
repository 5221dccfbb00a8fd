//! Delegation between agents in one process (DESIGN §8, issue 21 §3–§4): a step returns an
//! `AgentInTheLoopRequestEvent`, the engine starts the named agent's run (the child, whose
//! run id is the request's event id), and the child's end comes back to the parent as an
//! `AgentInTheLoopResponseEvent` or `AgentInTheLoopExceptionEvent`. Cancelling a parent
//! cancels its children, detached ones included; an unknown agent and a cycle of
//! delegations fail the step with a code; a child's end reaches its parent across a
//! restart. On the in-memory store and on SQLite (both engines on one store, as a
//! process serving several agents would have them).
#![allow(clippy::unwrap_used)]

mod common;

use common::WAIT;
use saap::backend::Backend;
use saap::{
    AgentInTheLoopExceptionEvent, AgentInTheLoopRequestEvent, AgentInTheLoopResponseEvent, Either,
    Engine, EngineOptions, MemoryBackend, Required, SqliteBackend, Step, StepCtx, StepError,
    UserMessageEvent, Workflow,
};
use saap_dispatch::run::progress::Progress;
use std::sync::Arc;

use common::agents::{Answer, Go, Report, boss, decide, researcher};

/// Two engines on one store, the boss delegating to the researcher.
struct Agents {
    boss: Engine,
    researcher: Engine,
    _dir: Option<tempfile::TempDir>,
}

async fn agents(sqlite: bool, class: &'static str) -> Agents {
    let (backend, dir): (Arc<dyn Backend>, _) = if sqlite {
        let dir = tempfile::tempdir().unwrap();
        let b = SqliteBackend::open(dir.path().join("agents.db")).unwrap();
        (Arc::new(b), Some(dir))
    } else {
        (Arc::new(MemoryBackend::new()), None)
    };
    let boss = Engine::new(boss(class), backend.clone(), EngineOptions::default());
    let researcher = Engine::new(researcher(), backend, EngineOptions::default());
    boss.delegate_to(&researcher).await;
    Agents {
        boss,
        researcher,
        _dir: dir,
    }
}

/// The text of the boss's report, once its run has ended.
async fn report(engine: &Engine, run_id: &str) -> String {
    tokio::time::timeout(WAIT, engine.wait_for_end(run_id))
        .await
        .unwrap()
        .unwrap();
    let snap = engine.snapshot(run_id).unwrap();
    let reports: Vec<Report> = snap.events_of::<Report>();
    assert_eq!(reports.len(), 1, "{}", snap.timeline());
    reports[0].text.clone()
}

async fn an_awaited_child_answers_its_parent(sqlite: bool) {
    let a = agents(sqlite, "Researcher").await;
    let run = a
        .boss
        .start_run(UserMessageEvent::new("ants"))
        .await
        .unwrap();
    assert_eq!(report(&a.boss, &run).await, "about ants: 42");
    let children = a.boss.children(&run).unwrap();
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].agent_class, "Researcher");
    assert_eq!(children[0].state, "ended");
    // The child's run id is the request's event id; it ran in the boss's thread.
    let snap = a.boss.snapshot(&run).unwrap();
    let request = snap.run.children()[0].request.to_string();
    assert_eq!(children[0].run_id, request);
    let child = a
        .researcher
        .stored_snapshot(&request)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(child.run.progress(), Progress::Stopped);
    assert_eq!(child.thread_id, snap.thread_id);
    let timeline = snap.timeline();
    assert!(timeline.contains("delegated: child 0"), "{timeline}");
    assert!(timeline.contains("child 0 ended"), "{timeline}");
}

async fn a_failed_child_reports_an_exception(sqlite: bool) {
    let a = agents(sqlite, "Researcher").await;
    let run = a
        .boss
        .start_run(UserMessageEvent::new("fail"))
        .await
        .unwrap();
    let text = report(&a.boss, &run).await;
    assert!(text.starts_with("failed: "), "{text}");
    assert!(text.contains("no sources found"), "{text}");
    // The parent ended normally: a child's failure is an event it handles, not its own.
    let snap = a.boss.snapshot(&run).unwrap();
    assert_eq!(snap.run.progress(), Progress::Stopped);
}

async fn a_delegation_to_an_unknown_agent_fails_the_step(sqlite: bool) {
    let a = agents(sqlite, "Nobody").await;
    let run = a.boss.start_run(UserMessageEvent::new("x")).await.unwrap();
    tokio::time::timeout(WAIT, a.boss.wait_for_end(&run))
        .await
        .unwrap()
        .unwrap();
    let snap = a.boss.snapshot(&run).unwrap();
    assert_eq!(snap.run.progress(), Progress::Failed);
    let timeline = snap.timeline();
    assert!(timeline.contains("SAAP-E013"), "{timeline}");
    assert!(timeline.contains("Nobody"), "{timeline}");
    assert!(timeline.contains("Researcher"), "{timeline}");
    assert!(snap.run.children().is_empty());
}

async fn cancelling_a_parent_cancels_its_waiting_child(sqlite: bool) {
    let a = agents(sqlite, "Researcher").await;
    let run = a
        .boss
        .start_run(UserMessageEvent::new("wait"))
        .await
        .unwrap();
    let child = wait_for_child(&a.boss, &run).await;
    wait_for_progress(&a.researcher, &child, "waiting_event").await;
    assert_eq!(
        a.boss.snapshot(&run).unwrap().run.progress().as_str(),
        "waiting_children"
    );
    a.boss.cancel(&run, "not needed").await.unwrap();
    tokio::time::timeout(WAIT, a.researcher.wait_for_end(&child))
        .await
        .unwrap()
        .unwrap();
    let c = a.researcher.snapshot(&child).unwrap();
    assert_eq!(c.run.progress(), Progress::Cancelled);
    let why = c.events_of::<saap::RunCancelledEvent>();
    assert!(why[0].reason.contains("was cancelled"), "{:?}", why[0]);
    let snap = a.boss.snapshot(&run).unwrap();
    assert_eq!(snap.run.progress(), Progress::Cancelled);
    assert!(snap.timeline().contains("child 0 abandoned"));
    // The child's end still comes back, as evidence after the parent's stop.
    tokio::time::timeout(WAIT, async {
        while !a
            .boss
            .snapshot(&run)
            .unwrap()
            .timeline()
            .contains("child 0 ended")
        {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    assert!(
        a.boss
            .snapshot(&run)
            .unwrap()
            .timeline()
            .contains("AgentInTheLoopExceptionEvent after the stop")
    );
}

async fn a_detached_child_runs_on_its_own_and_is_cancelled_with_its_parent(sqlite: bool) {
    let a = agents(sqlite, "Researcher").await;
    let run = a
        .boss
        .start_run(UserMessageEvent::new("detached wait"))
        .await
        .unwrap();
    let child = wait_for_child(&a.boss, &run).await;
    wait_for_progress(&a.researcher, &child, "waiting_event").await;
    // The boss waits for an event, not for its detached child.
    wait_for_progress(&a.boss, &run, "waiting_event").await;
    assert_eq!(a.boss.children(&run).unwrap()[0].state, "detached");
    a.boss.cancel(&run, "stop everything").await.unwrap();
    tokio::time::timeout(WAIT, a.researcher.wait_for_end(&child))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        a.researcher.snapshot(&child).unwrap().run.progress(),
        Progress::Cancelled
    );
}

/// An agent that delegates to itself: each run asks the next, until the depth limit fails
/// the innermost step; every run above it then reports that failure.
async fn a_cycle_of_delegations_ends_at_the_depth_limit(sqlite: bool) {
    let (backend, _dir): (Arc<dyn Backend>, _) = if sqlite {
        let dir = tempfile::tempdir().unwrap();
        let b = SqliteBackend::open(dir.path().join("loop.db")).unwrap();
        (Arc::new(b), Some(dir))
    } else {
        (Arc::new(MemoryBackend::new()), None)
    };
    let opts = EngineOptions {
        max_delegation_depth: 3,
        ..EngineOptions::default()
    };
    let wf = Workflow::builder("Boss")
        .step(Step::new(
            "ask",
            |q: Required<UserMessageEvent>, _: StepCtx| async move {
                Ok::<_, StepError>(AgentInTheLoopRequestEvent::new("Boss", &*q)?)
            },
        ))
        .step(Step::new(
            "decide",
            |r: Required<Either<AgentInTheLoopResponseEvent, AgentInTheLoopExceptionEvent>>,
             _: StepCtx| async move {
                Ok::<_, StepError>(Report {
                    text: match &*r {
                        Either::Left(_) => "answered".to_string(),
                        Either::Right(e) => e.message().to_string(),
                    },
                })
            },
        ))
        .build()
        .unwrap();
    let engine = Engine::new(wf, backend, opts);
    engine.delegate_to(&engine).await;
    let run = engine
        .start_run(UserMessageEvent::new("loop"))
        .await
        .unwrap();
    // Root → 1 → 2 → 3: the third child's step is refused; its parent reports why, and
    // every run above that one got an answer.
    assert_eq!(report(&engine, &run).await, "answered");
    let mut chain = vec![run.clone()];
    while let Some(c) = engine.children(chain.last().unwrap()).unwrap().first() {
        chain.push(c.run_id.clone());
    }
    assert_eq!(chain.len(), 4, "{chain:?}");
    let deepest = engine.stored_snapshot(&chain[3]).await.unwrap().unwrap();
    assert_eq!(deepest.run.progress(), Progress::Failed);
    assert!(
        deepest.timeline().contains("SAAP-E014"),
        "{}",
        deepest.timeline()
    );
    let above = report(&engine, &chain[2]).await;
    assert!(above.contains("SAAP-E014"), "{above}");
}

/// Asks the researcher, owed a `T`: the request says `expecting::<T>()`.
fn owed_boss<T: saap::Event>() -> Workflow {
    Workflow::builder("Boss")
        .step(Step::new(
            "ask",
            |q: Required<UserMessageEvent>, _: StepCtx| async move {
                Ok::<_, StepError>(
                    AgentInTheLoopRequestEvent::new("Researcher", &*q)?.expecting::<T>(),
                )
            },
        ))
        .step(Step::new(
            "decide",
            |r: Required<Either<AgentInTheLoopResponseEvent, AgentInTheLoopExceptionEvent>>,
             _: StepCtx| async move {
                let text = match &*r {
                    Either::Left(ok) => ok.stop_event::<Answer>()?.text,
                    Either::Right(e) => format!(
                        "{}: {}",
                        e.unmet_obligation.as_deref().unwrap_or("failed"),
                        e.message()
                    ),
                };
                Ok::<_, StepError>(Report { text })
            },
        ))
        .build()
        .unwrap()
}

/// `boss` delegating to the researcher, both on a new store.
async fn with_researcher(sqlite: bool, boss: Workflow) -> (Engine, Engine, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn Backend> = if sqlite {
        Arc::new(SqliteBackend::open(dir.path().join("agents.db")).unwrap())
    } else {
        Arc::new(MemoryBackend::new())
    };
    let boss = Engine::new(boss, backend.clone(), EngineOptions::default());
    let researcher = Engine::new(researcher(), backend, EngineOptions::default());
    boss.delegate_to(&researcher).await;
    (boss, researcher, dir)
}

async fn a_child_that_ends_without_the_type_it_owes_is_an_unmet_obligation(sqlite: bool) {
    // Owed an `Answer`, the researcher gives one: a plain answer.
    let (owed, _researcher, _dir) = with_researcher(sqlite, owed_boss::<Answer>()).await;
    let run = owed.start_run(UserMessageEvent::new("bees")).await.unwrap();
    assert_eq!(report(&owed, &run).await, "about bees: 42");
    assert_eq!(owed.children(&run).unwrap()[0].unmet_obligation, None);

    // Owed a `Report`, it stops with an `Answer`: the parent's failure path gets it,
    // marked, with the child's stop event kept.
    let (owed, _researcher, _dir) = with_researcher(sqlite, owed_boss::<Report>()).await;
    let run = owed.start_run(UserMessageEvent::new("bees")).await.unwrap();
    let text = report(&owed, &run).await;
    assert_eq!(
        text,
        "typed_result: unmet obligation: the child stopped with `Answer`, not the `Report` its \
         request expected"
    );
    let snap = owed.snapshot(&run).unwrap();
    let failed = snap.events_of::<AgentInTheLoopExceptionEvent>();
    assert_eq!(
        failed[0].exception_event["stop_event"]["text"],
        "about bees: 42"
    );
    let children = owed.children(&run).unwrap();
    assert_eq!(children[0].state, "ended");
    assert_eq!(children[0].unmet_obligation, Some("typed_result"));
    // A failure of a child owed a type is marked too.
    let run = owed.start_run(UserMessageEvent::new("fail")).await.unwrap();
    let text = report(&owed, &run).await;
    assert!(text.starts_with("typed_result: "), "{text}");
    assert!(text.contains("no sources found"), "{text}");
}

async fn a_child_end_no_step_takes_leaves_an_unmet_obligation_not_a_silent_stall(sqlite: bool) {
    // This boss takes only the answer: the researcher's failure reaches no step.
    let answer_only = Workflow::builder("Boss")
        .step(Step::new(
            "ask",
            |q: Required<UserMessageEvent>, _: StepCtx| async move {
                Ok::<_, StepError>(AgentInTheLoopRequestEvent::new("Researcher", &*q)?)
            },
        ))
        .step(Step::new(
            "use",
            |r: Required<AgentInTheLoopResponseEvent>, _: StepCtx| async move {
                Ok::<_, StepError>(Report {
                    text: r.stop_event::<Answer>()?.text,
                })
            },
        ))
        .build()
        .unwrap();
    let (boss, _researcher, _dir) = with_researcher(sqlite, answer_only).await;
    let run = boss.start_run(UserMessageEvent::new("fail")).await.unwrap();
    wait_for_progress(&boss, &run, "waiting_unmet").await;
    let children = boss.children(&run).unwrap();
    assert_eq!(children[0].state, "unmet");
    assert_eq!(children[0].unmet_obligation, Some("untaken"));
    let snap = boss.snapshot(&run).unwrap();
    let why = snap.waiting_for();
    assert!(why.contains("unmet obligation: child 0"), "{why}");
    assert!(why.contains("AgentInTheLoopExceptionEvent"), "{why}");
    assert!(
        snap.timeline().contains("unmet obligation"),
        "{}",
        snap.timeline()
    );
    // It is still a live run: a cancel ends it.
    boss.cancel(&run, "stuck").await.unwrap();
    assert_eq!(
        boss.snapshot(&run).unwrap().run.progress(),
        Progress::Cancelled
    );
}

/// Asks the researcher, giving it `secs` seconds (`timeout_seconds`), and reports its
/// answer or why there is none.
fn timed_boss(secs: f64) -> Workflow {
    Workflow::builder("Boss")
        .step(Step::new(
            "ask",
            move |q: Required<UserMessageEvent>, _: StepCtx| async move {
                let mut req = AgentInTheLoopRequestEvent::new("Researcher", &*q)?;
                req.timeout_seconds = Some(secs);
                Ok::<_, StepError>(req)
            },
        ))
        .step(decide())
        .build()
        .unwrap()
}

async fn a_child_past_its_timeout_is_cancelled_and_its_parent_told(sqlite: bool) {
    // In time: the answer, and the deadline dropped with it.
    let (boss, _researcher, _dir) = with_researcher(sqlite, timed_boss(30.0)).await;
    let run = boss.start_run(UserMessageEvent::new("ants")).await.unwrap();
    assert_eq!(report(&boss, &run).await, "about ants: 42");
    assert_eq!(boss.children(&run).unwrap()[0].state, "ended");
    let timeline = boss.snapshot(&run).unwrap().timeline();
    assert!(!timeline.contains("timed out"), "{timeline}");

    // Too late: the deadline's event takes the answer's place, the child is cancelled.
    let (boss, researcher, _dir) = with_researcher(sqlite, timed_boss(0.05)).await;
    let run = boss.start_run(UserMessageEvent::new("wait")).await.unwrap();
    let text = report(&boss, &run).await;
    assert!(
        text.starts_with("failed: the child did not end within its timeout of 0.05 s"),
        "{text}"
    );
    let children = boss.children(&run).unwrap();
    assert_eq!(children[0].state, "timed_out");
    tokio::time::timeout(WAIT, researcher.wait_for_end(&children[0].run_id))
        .await
        .unwrap()
        .unwrap();
    let child = researcher.snapshot(&children[0].run_id).unwrap();
    assert_eq!(child.run.progress(), Progress::Cancelled);
    let why = child.events_of::<saap::RunCancelledEvent>();
    assert!(why[0].reason.contains("timeout"), "{:?}", why[0]);
    let timeline = boss.snapshot(&run).unwrap().timeline();
    assert!(timeline.contains("child 0 timed out"), "{timeline}");
    // The child's cancelled end never reaches the parent's steps: one report.
    assert_eq!(report(&boss, &run).await, text);
}

async fn a_child_that_starts_after_its_deadline_fired_is_cancelled(sqlite: bool) {
    // No time at all: the deadline fires as soon as the clock is read, which races the
    // child's start (made once the request is durable). Whichever comes first, the child
    // must not be left waiting.
    let (boss, researcher, _dir) = with_researcher(sqlite, timed_boss(0.0)).await;
    let mut runs = Vec::new();
    for _ in 0..20 {
        runs.push(boss.start_run(UserMessageEvent::new("wait")).await.unwrap());
    }
    for run in &runs {
        let text = report(&boss, run).await;
        assert!(text.starts_with("failed: the child did not end"), "{text}");
    }
    tokio::time::timeout(WAIT, async {
        while researcher.run_ids().iter().any(|id| {
            researcher
                .snapshot(id)
                .is_some_and(|s| !s.run.is_terminated())
        }) {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("every child that started was cancelled");
}

async fn a_timeout_that_is_not_a_time_fails_the_step(sqlite: bool) {
    for secs in [-1.0, f64::NAN, 1e12] {
        let (boss, _researcher, _dir) = with_researcher(sqlite, timed_boss(secs)).await;
        let run = boss.start_run(UserMessageEvent::new("ants")).await.unwrap();
        tokio::time::timeout(WAIT, boss.wait_for_end(&run))
            .await
            .unwrap()
            .unwrap();
        let snap = boss.snapshot(&run).unwrap();
        assert_eq!(snap.run.progress(), Progress::Failed);
        let timeline = snap.timeline();
        assert!(timeline.contains("SAAP-E019"), "{timeline}");
        assert!(snap.run.children().is_empty());
    }
}

/// The run id of the first child of `run`, once it has one.
async fn wait_for_child(engine: &Engine, run: &str) -> String {
    tokio::time::timeout(WAIT, async {
        loop {
            if let Some(c) = engine.children(run).unwrap().first() {
                return c.run_id.clone();
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap()
}

async fn wait_for_progress(engine: &Engine, run: &str, state: &str) {
    tokio::time::timeout(WAIT, async {
        loop {
            if let Some(s) = engine.snapshot(run)
                && s.run.progress().as_str() == state
            {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("run {run} never reached {state}"))
}

macro_rules! on_memory_and_sqlite {
    ($($name:ident;)*) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(false).await
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(true).await
                }
            )*
        }
    };
}

on_memory_and_sqlite! {
    an_awaited_child_answers_its_parent;
    a_failed_child_reports_an_exception;
    a_delegation_to_an_unknown_agent_fails_the_step;
    cancelling_a_parent_cancels_its_waiting_child;
    a_detached_child_runs_on_its_own_and_is_cancelled_with_its_parent;
    a_cycle_of_delegations_ends_at_the_depth_limit;
    a_child_that_ends_without_the_type_it_owes_is_an_unmet_obligation;
    a_child_end_no_step_takes_leaves_an_unmet_obligation_not_a_silent_stall;
    a_child_past_its_timeout_is_cancelled_and_its_parent_told;
    a_timeout_that_is_not_a_time_fails_the_step;
    a_child_that_starts_after_its_deadline_fired_is_cancelled;
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Opens both agents on the store at `path`; the boss registers the researcher only when
/// `register`.
async fn reopen(path: &std::path::Path, register: bool) -> (Engine, Engine) {
    reopen_with(path, register, boss("Researcher")).await
}

/// [`reopen`] with the boss's workflow `boss`.
async fn reopen_with(path: &std::path::Path, register: bool, boss: Workflow) -> (Engine, Engine) {
    let backend: Arc<dyn Backend> = Arc::new(SqliteBackend::open(path).unwrap());
    let (researcher, rr) = Engine::open(researcher(), backend.clone(), EngineOptions::default())
        .await
        .unwrap();
    assert!(rr.failed.is_empty(), "{:?}", rr.failed);
    let delegates: &[&Engine] = if register { &[&researcher] } else { &[] };
    let (boss, rb) =
        Engine::open_with_delegates(boss, backend, EngineOptions::default(), delegates)
            .await
            .unwrap();
    assert!(rb.failed.is_empty(), "{:?}", rb.failed);
    (boss, researcher)
}

/// Opens both agents on the store at `path` (the boss running `boss`), starts a boss run
/// whose child waits for `Go`, and stops the processes once it does: `(run, child)`.
fn left_waiting(path: &std::path::Path, boss: Workflow) -> (String, String) {
    runtime().block_on(async {
        let (boss, researcher) = reopen_with(path, true, boss).await;
        let run = boss.start_run(UserMessageEvent::new("wait")).await.unwrap();
        let child = wait_for_child(&boss, &run).await;
        wait_for_progress(&researcher, &child, "waiting_event").await;
        (run, child)
    })
}

/// The processes stop while the child waits; at the next open, registering the researcher
/// links the child to its parent again, and its end is delivered.
#[test]
fn a_waiting_child_reports_to_its_parent_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agents.db");
    let (run, child) = left_waiting(&path, boss("Researcher"));
    runtime().block_on(async {
        let (boss, researcher) = reopen(&path, true).await;
        researcher.send(&child, Go { n: 1 }).await.unwrap();
        assert_eq!(report(&boss, &run).await, "after waiting");
    });
}

/// The child ends while its parent's agent is not open (its end cannot be delivered): when
/// the parent's agent opens and registers the researcher, the end is found and delivered.
#[test]
fn a_child_that_ended_while_its_parent_was_away_is_delivered_at_registration() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agents.db");
    let (run, child) = left_waiting(&path, boss("Researcher"));
    runtime().block_on(async {
        // Only the researcher's side: the child ends with nobody to tell.
        let (_boss, researcher) = reopen(&path, false).await;
        researcher.send(&child, Go { n: 1 }).await.unwrap();
        tokio::time::timeout(WAIT, researcher.wait_for_end(&child))
            .await
            .unwrap()
            .unwrap();
    });
    runtime().block_on(async {
        let (boss, _researcher) = reopen(&path, true).await;
        assert_eq!(report(&boss, &run).await, "after waiting");
    });
}

/// A child's deadline passes while no process runs: it fires when the boss opens, and the
/// boss's answer is the timeout. The researcher was not open to be cancelled (the crash
/// window between the deadline's journal entry and the child's cancel): when it opens, it
/// finds that its parent gave the child up, and cancels it.
#[test]
fn a_timeout_that_passed_while_the_processes_were_down_fires_at_open_and_the_child_is_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agents.db");
    let (run, child) = left_waiting(&path, timed_boss(0.2));
    std::thread::sleep(std::time::Duration::from_millis(300));
    runtime().block_on(async {
        let (boss, researcher) = reopen_with(&path, false, timed_boss(0.2)).await;
        let text = report(&boss, &run).await;
        assert!(
            text.starts_with("failed: the child did not end within"),
            "{text}"
        );
        assert_eq!(
            researcher.snapshot(&child).unwrap().run.progress().as_str(),
            "waiting_event"
        );
    });
    runtime().block_on(async {
        let (_boss, researcher) = reopen_with(&path, true, timed_boss(0.2)).await;
        tokio::time::timeout(WAIT, researcher.wait_for_end(&child))
            .await
            .unwrap()
            .unwrap();
        let c = researcher.snapshot(&child).unwrap();
        assert_eq!(c.run.progress(), Progress::Cancelled);
        let why = c.events_of::<saap::RunCancelledEvent>();
        assert!(why[0].reason.contains("timeout passed"), "{:?}", why[0]);
    });
}

/// Agents declared on the workflow (`with_delegate`) are made and opened with it: one engine
/// per agent name, even when the declarations loop back (the researcher declares the boss),
/// every agent registered before any recovers, and a child waiting across a restart reports
/// to its parent.
#[test]
fn declared_agents_are_opened_with_the_workflow_even_when_they_loop_back() {
    let declared =
        || boss("Researcher").with_delegate(researcher().with_delegate(boss("Researcher")));
    let wf = declared();
    let set = wf.agent_set();
    let names: Vec<&str> = set.iter().map(|w| w.name()).collect();
    assert_eq!(names, ["Boss", "Researcher"]);
    assert!(
        researcher()
            .with_delegate(researcher())
            .delegates()
            .is_empty(),
        "an agent needs no declaration of itself"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("declared.db");
    let open = |path: std::path::PathBuf| async move {
        let backend: Arc<dyn Backend> = Arc::new(SqliteBackend::open(&path).unwrap());
        let (boss, rec) = Engine::open(declared(), backend, EngineOptions::default())
            .await
            .unwrap();
        assert!(rec.failed.is_empty(), "{:?}", rec.failed);
        let researcher = boss.agent("Researcher").expect("made with the boss");
        assert!(boss.agent("Boss").is_some() && boss.agent("Nobody").is_none());
        (boss, researcher, rec)
    };
    let (run, child) = runtime().block_on(async {
        let (boss, researcher, _) = open(path.clone()).await;
        let run = boss.start_run(UserMessageEvent::new("wait")).await.unwrap();
        let child = wait_for_child(&boss, &run).await;
        wait_for_progress(&researcher, &child, "waiting_event").await;
        (run, child)
    });
    runtime().block_on(async {
        let (boss, researcher, rec) = open(path.clone()).await;
        assert_eq!(rec.resumed_runs, 2, "the boss's run and the child: {rec:?}");
        researcher.send(&child, Go { n: 1 }).await.unwrap();
        assert_eq!(report(&boss, &run).await, "after waiting");
    });
}

/// The crash window of a cancel cascade (issue 21 §7): the parent's cancellation is durable
/// but the cancel it asks of its child is not applied (here the child's agent is not
/// registered with the parent's, as when its process is down). The child's run record names
/// its parent; the next open of the child's agent finds the parent ended with the child
/// abandoned, and cancels it.
#[test]
fn a_child_whose_parent_was_cancelled_while_its_agent_was_away_is_cancelled_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("orphan.db");
    let (run, child) = left_waiting(&path, boss("Researcher"));
    runtime().block_on(async {
        // The boss alone: its cancel cannot reach the child.
        let (boss, researcher) = reopen(&path, false).await;
        boss.cancel(&run, "enough").await.unwrap();
        wait_for_progress(&boss, &run, "cancelled").await;
        assert_eq!(
            researcher.snapshot(&child).unwrap().run.progress().as_str(),
            "waiting_event",
            "the child is left behind"
        );
    });
    runtime().block_on(async {
        let backend: Arc<dyn Backend> = Arc::new(SqliteBackend::open(&path).unwrap());
        let (researcher, rec) = Engine::open(researcher(), backend, EngineOptions::default())
            .await
            .unwrap();
        assert_eq!(rec.orphans_cancelled, 1, "{rec:?}");
        assert!(rec.failed.is_empty(), "{rec:?}");
        wait_for_progress(&researcher, &child, "cancelled").await;
        let snap = researcher.stored_snapshot(&child).await.unwrap().unwrap();
        let cancelled = snap.events_of::<saap::RunCancelledEvent>();
        assert!(
            cancelled[0]
                .reason
                .contains(&format!("its parent run {run}")),
            "{:?}",
            cancelled[0].reason
        );
    });
    // Opened again, nothing is left to reconcile.
    runtime().block_on(async {
        let backend: Arc<dyn Backend> = Arc::new(SqliteBackend::open(&path).unwrap());
        let (_researcher, rec) = Engine::open(researcher(), backend, EngineOptions::default())
            .await
            .unwrap();
        assert_eq!((rec.resumed_runs, rec.orphans_cancelled), (0, 0), "{rec:?}");
    });
}

/// A step that declares the agents it delegates to (`Step::delegates_to`) keeps to them: a
/// request naming another fails the step with what it declared, before any child starts;
/// `check` warns of a declared agent the workflow does not know (SAAP022).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_naming_an_agent_its_step_did_not_declare_fails_the_step() {
    let boss = |declared: &'static str| {
        Workflow::builder("Boss")
            .step(
                Step::new(
                    "ask",
                    |q: Required<UserMessageEvent>, _: StepCtx| async move {
                        Ok::<_, StepError>(AgentInTheLoopRequestEvent::new("Researcher", &*q)?)
                    },
                )
                .delegates_to([declared]),
            )
            .step(decide())
            .build()
            .unwrap()
            .with_delegate(researcher())
    };
    let findings = |w: &Workflow| {
        saap_dispatch::check::check(w.compiled())
            .into_iter()
            .filter(|f| f.code == "SAAP022")
            .map(|f| f.message)
            .collect::<Vec<_>>()
    };
    assert_eq!(findings(&boss("Researcher")), Vec::<String>::new());
    let misspelt = boss("Reseacher");
    let found = findings(&misspelt);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("it knows `Boss`, `Researcher`"),
        "{}",
        found[0]
    );
    assert_eq!(misspelt.spec().agents, ["Researcher"]);

    let engine = Engine::in_memory(misspelt);
    let run = engine
        .start_run(UserMessageEvent::new("ants"))
        .await
        .unwrap();
    tokio::time::timeout(WAIT, engine.wait_for_end(&run))
        .await
        .unwrap()
        .unwrap();
    let snap = engine.snapshot(&run).unwrap();
    assert_eq!(snap.run.progress(), Progress::Failed);
    let timeline = snap.timeline();
    assert!(timeline.contains("SAAP-E013"), "{timeline}");
    assert!(
        timeline.contains("which step `ask` does not declare (it declares: Reseacher)"),
        "{timeline}"
    );
    assert!(snap.run.children().is_empty());
}
