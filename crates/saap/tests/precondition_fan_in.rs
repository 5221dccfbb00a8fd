//! A list parameter with a precondition (the S2 "list + precondition" fan-in): the
//! precondition is evaluated on every arrival, yet each bound event is turned into its typed
//! value once, not once per later arrival (issue 3), and the precondition still sees every
//! bound event in arrival order.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Kind, WAIT, harness};
use saap::{Required, Step, StepCtx, StepError, UserMessageEvent, Workflow};
use serde::Deserialize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

event!(Done, "StopEvent");

/// Deserializations of `Part` (each is one extraction of a bound event).
static EXTRACTED: AtomicUsize = AtomicUsize::new(0);

fn counted<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    EXTRACTED.fetch_add(1, Ordering::SeqCst);
    u32::deserialize(d)
}

#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Part {
    #[serde(deserialize_with = "counted")]
    pub n: u32,
}
impl saap::Event for Part {
    const NAME: &'static str = "Part";
    const PARENTS: &'static [&'static str] = &["ControlEvent"];
}

const N: u32 = 60;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_precondition_extracts_each_event_once_and_sees_all_in_order() {
    let seen: Arc<Mutex<Vec<Vec<u32>>>> = Arc::default();
    let seen_in = seen.clone();
    let wf = Workflow::builder("FanIn")
        .step(Step::new(
            "start",
            |_: Required<UserMessageEvent>, _: StepCtx| async { Ok::<_, StepError>(()) },
        ))
        .step(
            Step::new("collect", |parts: Vec<Part>, _: StepCtx| async move {
                Ok::<_, StepError>(Done {
                    n: parts.iter().map(|p| p.n).sum(),
                })
            })
            .precondition("all_arrived", move |parts: &Vec<Part>| {
                seen_in
                    .lock()
                    .unwrap()
                    .push(parts.iter().map(|p| p.n).collect());
                parts.len() as u32 == N
            }),
        )
        .build()
        .unwrap();
    let h = harness(Kind::Memory, wf);
    let run = h.runner.start(UserMessageEvent::new("go")).await.unwrap();
    for n in 0..N {
        run.send(Part { n }).await.unwrap();
    }
    let done = run.wait_for_event::<Done>(WAIT).await.unwrap();
    assert_eq!(done.n, (0..N).sum::<u32>());
    assert_eq!(run.executions_of("collect"), 1);

    // Evaluated on every arrival, each time on all events so far in arrival order.
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), N as usize);
    for (k, parts) in seen.iter().enumerate() {
        assert_eq!(*parts, (0..=k as u32).collect::<Vec<_>>());
    }
    // One extraction per event for the precondition plus one for the body: linear. Before
    // the cache this was 1 + 2 + … + N = 1,830 for the precondition alone.
    let extracted = EXTRACTED.load(Ordering::SeqCst);
    assert!(
        (N as usize..=2 * N as usize).contains(&extracted),
        "{extracted} extractions for {N} events"
    );
}
