//! Each broken agent shows its symptom; its fixed twin does not. `saap check` names the
//! cause of each statically.
#![allow(clippy::unwrap_used)]

use saap::UserMessageEvent;
use saap::testing::{TestRunner, WaitError};
use saap_examples::broken::{self, Combined, Published, ReviewClosed, ReviewNotes};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

fn codes(wf: &saap::Workflow) -> Vec<&'static str> {
    saap_dispatch::check::check(wf.compiled())
        .iter()
        .map(|f| f.code)
        .collect()
}

async fn review(wf: saap::Workflow) -> (usize, Vec<Published>) {
    let run = TestRunner::in_memory(wf)
        .start(UserMessageEvent::new("release notes"))
        .await
        .unwrap();
    run.wait_idle(WAIT).await.unwrap();
    run.send(ReviewNotes {
        notes: "fix the typo".into(),
    })
    .await
    .unwrap();
    run.wait_idle(WAIT).await.unwrap();
    run.send(ReviewClosed {}).await.unwrap();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    (snap.executions_of("publish"), snap.events_of::<Published>())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn optional_trap_publishes_twice_and_the_fix_once() {
    let (n, published) = review(broken::optional_trap()).await;
    assert_eq!(n, 2, "symptom: publish runs before and after the notes");
    assert!(published[0].text.ends_with("[not reviewed]"));
    let (n, published) = review(broken::optional_trap_fixed()).await;
    assert_eq!(n, 1);
    assert!(published[0].text.ends_with("[reviewed: fix the typo]"));
}

#[test]
fn check_names_the_optional_trap_and_not_in_the_fix() {
    let broken = codes(&broken::optional_trap());
    let fixed = codes(&broken::optional_trap_fixed());
    let trap = saap_dispatch::check::check(broken::optional_trap().compiled())
        .into_iter()
        .find(|f| f.rule == "optional-trap")
        .expect("the optional trap is reported");
    assert!(!fixed.contains(&trap.code), "{fixed:?}");
    assert!(broken.contains(&trap.code));
}

async fn panel(wf: saap::Workflow) -> (usize, Vec<Combined>) {
    let run = TestRunner::in_memory(wf)
        .start(UserMessageEvent::new("new vendor contract"))
        .await
        .unwrap();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    (snap.executions_of("combine"), snap.events_of::<Combined>())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_parameter_reruns_per_arrival_and_the_fix_runs_once() {
    let (n, combined) = panel(broken::list_reruns()).await;
    assert_eq!(n, 3, "symptom: one execution per expert answer");
    assert_eq!(
        combined.len(),
        3,
        "every execution's answer is in the log (after the stop: as evidence)"
    );
    assert!(
        combined.iter().any(|c| c.experts == vec!["legal"]),
        "one answer saw a single expert"
    );
    let (n, combined) = panel(broken::list_reruns_fixed()).await;
    assert_eq!(n, 1);
    assert_eq!(
        combined,
        vec![Combined {
            experts: vec!["legal".into(), "finance".into(), "security".into()]
        }]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_list_larger_than_the_fan_out_never_runs_and_the_fix_does() {
    let run = TestRunner::in_memory(broken::fixed_list_short())
        .start(UserMessageEvent::new("audit"))
        .await
        .unwrap();
    run.wait_idle(WAIT).await.unwrap();
    let err = run
        .wait_for_event::<Combined>(Duration::from_millis(20))
        .await
        .err()
        .unwrap();
    let WaitError::Timeout { waiting, .. } = &err else {
        panic!("{err}")
    };
    assert!(
        waiting.contains("fixed list `expert_answer` (ExpertAnswer) has 3 of 4"),
        "{waiting}"
    );
    let (n, _) = panel(broken::fixed_list_short_fixed()).await;
    assert_eq!(n, 1);
}
