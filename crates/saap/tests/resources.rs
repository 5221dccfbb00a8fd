//! Long-lived resources injected by type (issue 20 §2): registered once on the workflow,
//! shared by every run and execution (never rebuilt), taken as `Res<T>` through `#[agent]`
//! or `ctx.resource::<T>()` through the builder; a workflow missing a resource a step takes
//! refuses to start a run (SAAP-E009) before anything is stored, and a resource asked for
//! without being registered fails the step with SAAP-E010.
#![allow(clippy::unwrap_used)]

use saap::testing::TestRunner;
use saap::{
    Agent, Engine, ExceptionEvent, Required, Res, Step, StepCtx, StepError, StopEvent,
    UserMessageEvent, Workflow, agent,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

/// Stands for a client with a connection pool: counts how often it was made and used.
struct Pool {
    calls: AtomicU32,
}

static POOLS_MADE: AtomicU32 = AtomicU32::new(0);

impl Pool {
    fn new() -> Pool {
        POOLS_MADE.fetch_add(1, Ordering::SeqCst);
        Pool {
            calls: AtomicU32::new(0),
        }
    }
    fn query(&self, q: &str) -> String {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        format!("{q}#{n}")
    }
}

#[derive(saap::Event, serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
#[event(parent = StopEvent)]
struct Answered {
    text: String,
}

struct PoolAgent;

#[agent]
impl PoolAgent {
    #[step]
    async fn answer(
        q: Required<UserMessageEvent>,
        pool: Res<Pool>,
        _ctx: StepCtx,
    ) -> Result<Answered, StepError> {
        Ok(Answered {
            text: pool.query(&q.message),
        })
    }
}

#[tokio::test]
async fn a_resource_is_made_once_and_shared_by_every_run() {
    let pool = Arc::new(Pool::new());
    let made = POOLS_MADE.load(Ordering::SeqCst);
    let workflow = PoolAgent::workflow()
        .unwrap()
        .with_shared_resource(Arc::clone(&pool));
    let runner = TestRunner::in_memory(workflow);
    let mut answers = Vec::new();
    for q in ["a", "b", "c"] {
        let run = runner
            .run(UserMessageEvent {
                message: q.to_string(),
            })
            .await
            .unwrap();
        let snap = run.wait_for_end(WAIT).await.unwrap();
        assert!(!snap.has_exception(), "{}", snap.timeline());
        answers.extend(snap.events_of::<Answered>().into_iter().map(|a| a.text));
    }
    assert_eq!(answers, ["a#1", "b#2", "c#3"]);
    // Every execution used the one registered value; nothing made another.
    assert_eq!(pool.calls.load(Ordering::SeqCst), 3);
    assert_eq!(POOLS_MADE.load(Ordering::SeqCst), made);
}

#[tokio::test]
async fn a_missing_resource_refuses_the_run_before_it_starts() {
    let engine = Engine::in_memory(PoolAgent::workflow().unwrap());
    let err = engine
        .start_run(UserMessageEvent {
            message: "q".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), "SAAP-E009");
    let text = err.to_string();
    assert!(
        text.contains("step `answer`") && text.contains("`Pool`") && text.contains(".resource("),
        "{text}"
    );
    assert!(engine.run_ids().is_empty(), "no run was created");
}

fn builder_step() -> Step<Required<UserMessageEvent>> {
    Step::new(
        "answer",
        |q: Required<UserMessageEvent>, ctx: StepCtx| async move {
            let pool = ctx.resource::<Pool>()?;
            Ok::<_, StepError>(Answered {
                text: pool.query(&q.message),
            })
        },
    )
    .uses_resource::<Pool>()
}

#[tokio::test]
async fn the_builder_registers_a_resource_that_ctx_resource_reads() {
    let workflow = Workflow::builder("Pooled")
        .resource(Pool::new())
        .step(builder_step())
        .build()
        .unwrap();
    assert!(workflow.resource::<Pool>().is_some());
    assert!(workflow.check_resources().is_ok());
    let run = TestRunner::in_memory(workflow)
        .run(UserMessageEvent {
            message: "q".into(),
        })
        .await
        .unwrap();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    assert_eq!(
        snap.events_of::<Answered>(),
        [Answered { text: "q#1".into() }]
    );
}

#[tokio::test]
async fn a_resource_read_without_being_registered_fails_the_step_and_says_why() {
    // Declared nowhere, registered nowhere: the engine cannot refuse the run up front, so
    // the step fails with the reason.
    let workflow = Workflow::builder("Undeclared")
        .step(Step::new(
            "answer",
            |_: Required<UserMessageEvent>, ctx: StepCtx| async move {
                ctx.resource::<Pool>()?;
                Ok::<_, StepError>(StopEvent {})
            },
        ))
        .build()
        .unwrap();
    let run = TestRunner::in_memory(workflow)
        .run(UserMessageEvent {
            message: "q".into(),
        })
        .await
        .unwrap();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    let failed = snap.events_of::<ExceptionEvent>();
    assert_eq!(failed.len(), 1, "{}", snap.timeline());
    assert!(
        failed[0].message.contains("SAAP-E010") && failed[0].message.contains("`Pool`"),
        "{}",
        failed[0].message
    );
}

#[test]
fn with_resource_leaves_the_spec_as_it_was() {
    let bare = PoolAgent::workflow().unwrap();
    let with = bare.clone().with_resource(Pool::new());
    assert_eq!(bare.spec_json(), with.spec_json());
    assert!(bare.resource::<Pool>().is_none());
    assert!(with.resource::<Pool>().is_some());
    assert_eq!(
        bare.check_resources().unwrap_err().code(),
        "SAAP-E009",
        "the original workflow is unchanged"
    );
}
