//! Delegation at scale (issue 21's targets), in memory, measured in one run:
//!
//! * round trip: a parent run whose one step delegates to a child agent (a run of one
//!   step), resumed by the child's answer and ended — per parent run, minus the same
//!   parent answering itself without delegating (target ≤ 5 µs for the delegation);
//! * cancelling a tree: a root whose step delegates to 999 children that all wait, then
//!   cancelled: the time until every child has ended cancelled (target ≤ 50 ms).
//!
//! `cargo bench -p saap --bench delegation` (optional args: round trips, tree size). Prints
//! one JSON line.
#![allow(clippy::unwrap_used)]

use saap::{
    AgentInTheLoopRequestEvent, AgentInTheLoopResponseEvent, Engine, EngineOptions, Required, Step,
    StepCtx, StepError, UserMessageEvent, Workflow,
};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Answer {
    n: u32,
}
impl saap::Event for Answer {
    const NAME: &'static str = "Answer";
    const PARENTS: &'static [&'static str] = &["StopEvent"];
}
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Asked {
    n: u32,
}
impl saap::Event for Asked {
    const NAME: &'static str = "Asked";
    const PARENTS: &'static [&'static str] = &["ControlEvent"];
}
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Go {
    n: u32,
}
impl saap::Event for Go {
    const NAME: &'static str = "Go";
    const PARENTS: &'static [&'static str] = &["ControlEvent"];
}

/// The child: answers at once, or ("wait") waits for `Go`.
fn child() -> Workflow {
    Workflow::builder("Child")
        .step(Step::new(
            "answer",
            |q: Required<UserMessageEvent>, _: StepCtx| async move {
                Ok::<_, StepError>(if q.message == "wait" {
                    saap::Either::Right(Asked { n: 1 })
                } else {
                    saap::Either::Left(Answer { n: 1 })
                })
            },
        ))
        .step(Step::new(
            "go",
            |_: (Required<Asked>, Required<Go>), _: StepCtx| async move {
                Ok::<_, StepError>(Answer { n: 2 })
            },
        ))
        .build()
        .unwrap()
}

/// The parent: delegates its message to the child `fan` times (one request when 1), ends
/// on the first answer.
fn parent(fan: usize) -> Workflow {
    Workflow::builder("Parent")
        .step(Step::new(
            "ask",
            move |q: Required<UserMessageEvent>, _: StepCtx| async move {
                let req = AgentInTheLoopRequestEvent::new("Child", &*q)?;
                Ok::<_, StepError>(vec![req; fan])
            },
        ))
        .step(Step::new(
            "done",
            |_: Required<AgentInTheLoopResponseEvent>, _: StepCtx| async move {
                Ok::<_, StepError>(Answer { n: 3 })
            },
        ))
        .build()
        .unwrap()
}

/// The same parent answering itself: its cost without the delegation.
fn alone() -> Workflow {
    Workflow::builder("Alone")
        .step(Step::new(
            "ask",
            |_: Required<UserMessageEvent>, _: StepCtx| async move {
                Ok::<_, StepError>(Asked { n: 1 })
            },
        ))
        .step(Step::new(
            "done",
            |_: Required<Asked>, _: StepCtx| async move { Ok::<_, StepError>(Answer { n: 3 }) },
        ))
        .build()
        .unwrap()
}

fn opts() -> EngineOptions {
    EngineOptions {
        keep_ended_runs: false,
        ..EngineOptions::default()
    }
}

/// Wall time per run of `n` runs started one after the other and waited for together (a
/// run in flight is not waited for before the next starts: the cost of a run, not the
/// latency of waking its waiter).
async fn per_run(engine: &Engine, n: usize) -> f64 {
    let t = Instant::now();
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        ids.push(engine.start_run(UserMessageEvent::new("q")).await.unwrap());
    }
    for id in &ids {
        // An ended run leaves memory (`keep_ended_runs: false`): unknown means ended.
        match engine.wait_for_end(id).await {
            Ok(()) | Err(saap::EngineError::UnknownRun { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let tree: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let children = Engine::new(
            child(),
            std::sync::Arc::new(saap::MemoryBackend::new()),
            opts(),
        );
        let parents = Engine::new(
            parent(1),
            std::sync::Arc::new(saap::MemoryBackend::new()),
            opts(),
        );
        parents.delegate_to(&children).await;
        let single = Engine::new(
            alone(),
            std::sync::Arc::new(saap::MemoryBackend::new()),
            opts(),
        );
        // Warm up both, then measure them one after the other.
        per_run(&parents, n / 10).await;
        per_run(&single, n / 10).await;
        let with = per_run(&parents, n).await;
        let without = per_run(&single, n).await;

        // A root with `tree - 1` waiting children, cancelled.
        let root = Engine::new(
            parent(tree - 1),
            std::sync::Arc::new(saap::MemoryBackend::new()),
            EngineOptions::default(),
        );
        let waiting = Engine::new(
            child(),
            std::sync::Arc::new(saap::MemoryBackend::new()),
            EngineOptions::default(),
        );
        root.delegate_to(&waiting).await;
        let id = root.start_run(UserMessageEvent::new("wait")).await.unwrap();
        let ids: Vec<String> = loop {
            let c = root.children(&id).unwrap();
            let started = c.len() == tree - 1
                && c.iter().all(|c| {
                    waiting
                        .snapshot(&c.run_id)
                        .is_some_and(|s| s.run.progress().as_str() == "waiting_event")
                });
            if started {
                break c.into_iter().map(|c| c.run_id).collect();
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        let t = Instant::now();
        root.cancel(&id, "bench").await.unwrap();
        for c in &ids {
            waiting.wait_for_end(c).await.unwrap();
        }
        let cancel_ms = t.elapsed().as_secs_f64() * 1e3;
        println!(
            "{{\"round_trips\":{n},\"parent_with_delegation_us\":{:.2},\"parent_alone_us\":{:.2},\"delegation_round_trip_us\":{:.2},\"tree_runs\":{tree},\"cancel_tree_ms\":{cancel_ms:.2}}}",
            with / 1e3,
            without / 1e3,
            (with - without) / 1e3,
        );
    });
}
