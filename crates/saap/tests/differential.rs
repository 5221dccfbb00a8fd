//! Differential: the same seeded scenarios through the in-memory, the embedded (SQLite) and
//! the NATS JetStream engine give identical decision records, execution counts and payloads
//! (TESTING.md §6). Every event
//! type has one consumer and every step returns at most one event, so each outside event
//! causes one chain of executions and the log does not depend on scheduling.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Kind, WAIT, harness};
use saap::{FixedList, Required, Step, StepCtx, StepError, UserMessageEvent, Workflow};

event!(A, "ControlEvent");
event!(B, "ControlEvent");
event!(C, "ControlEvent");
event!(D, "ControlEvent");
event!(E, "ControlEvent");
event!(F, "ControlEvent");
event!(Done, "StopEvent");

fn workflow() -> Workflow {
    Workflow::builder("Differential")
        .step(Step::new(
            "begin",
            |_: Required<UserMessageEvent>, _: StepCtx| async { Ok::<_, StepError>(()) },
        ))
        .step(Step::new(
            "opt",
            |(a, b): (Required<A>, Option<B>), _: StepCtx| async move {
                Ok::<_, StepError>(D {
                    n: a.n * 10 + b.map(|b| b.n).unwrap_or(0),
                })
            },
        ))
        .step(
            Step::new("list", |cs: Vec<C>, _: StepCtx| async move {
                Ok::<_, StepError>(E {
                    n: cs.iter().map(|c| c.n).sum(),
                })
            })
            .precondition("two_or_more", |cs: &Vec<C>| cs.len() >= 2),
        )
        .step(Step::new(
            "pair",
            |ds: FixedList<D, 2>, _: StepCtx| async move {
                Ok::<_, StepError>(F {
                    n: ds[0].n + ds[1].n,
                })
            },
        ))
        .step(
            Step::new(
                "finish",
                |(e, f): (Required<E>, Option<F>), _: StepCtx| async move {
                    if e.n > 40 {
                        return Err(StepError::new("too big"));
                    }
                    Ok::<_, StepError>(
                        Some(Done {
                            n: e.n + f.map(|f| f.n).unwrap_or(0),
                        })
                        .filter(|d| d.n % 2 == 0),
                    )
                },
            )
            .max_executions_per_run(3)
            .stop_on_error(false),
        )
        .build()
        .unwrap()
}

/// What a run did, without ids: the records (indexes only), counts and payloads.
async fn outcome(
    kind: Kind,
    inputs: &[(u8, u32)],
) -> (String, Vec<(String, usize)>, Vec<(String, String)>) {
    let h = harness(kind, workflow());
    let run = h.runner.start(UserMessageEvent::new("go")).await.unwrap();
    run.wait_idle(WAIT).await.unwrap();
    for &(t, n) in inputs {
        match t {
            0 => run.send(A { n }).await.unwrap(),
            1 => run.send(B { n }).await.unwrap(),
            _ => run.send(C { n }).await.unwrap(),
        };
        run.wait_idle(WAIT).await.unwrap();
    }
    let snap = run.snapshot();
    let records = serde_json::to_string(snap.run.records()).unwrap();
    let payloads = snap
        .events()
        .into_iter()
        .map(|e| (e.name, e.payload.to_string()))
        .collect();
    (records, snap.execution_counts(), payloads)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_embedded_and_nats_engines_decide_the_same() {
    let seed = std::env::var("SAAP_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7u64);
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut stopped = 0;
    for case in 0..40 {
        let len = rng.usize(0..14);
        let inputs: Vec<(u8, u32)> = (0..len).map(|_| (rng.u8(0..3), rng.u32(1..20))).collect();
        let mem = outcome(Kind::Memory, &inputs).await;
        let sql = outcome(Kind::Sqlite, &inputs).await;
        assert_eq!(mem, sql, "seed {seed}, case {case}, inputs {inputs:?}");
        let nats = outcome(Kind::Nats, &inputs).await;
        assert_eq!(
            sql, nats,
            "NATS: seed {seed}, case {case}, inputs {inputs:?}"
        );
        if mem.2.iter().any(|(n, _)| n == "Done") {
            stopped += 1;
        }
    }
    assert!(
        stopped > 0,
        "no scenario reached a stop: the generator is too weak"
    );
}
