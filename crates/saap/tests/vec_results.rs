//! Issue 19, item 1: a step that returns a `Vec` (here of a union) is an unbounded producer
//! of each member type in the spec it exports, so `check` does not report SAAP009 against a
//! fixed list it fills; an `Option` result is at most one. The agent below fans out a Ticket
//! and three Opinions from one execution and joins the Opinions with a `FixedList<Opinion, 3>`.
#![allow(clippy::unwrap_used)]

use saap::testing::TestRunner;
use saap::{
    Agent, EventUnion, FixedList, Required, Step, StepCtx, StepError, UserMessageEvent, Workflow,
    agent,
};
use saap_dispatch::check::{Severity, check};
use saap_dispatch::spec::OutputMax;
use std::process::ExitCode;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

#[derive(saap::Event, serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
struct Ticket {
    text: String,
}
#[derive(saap::Event, serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
struct Opinion {
    by: String,
}
#[derive(saap::Event, serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
struct Priority {
    level: u8,
}
#[derive(saap::Event, serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
#[event(parent = StopEvent)]
struct Triaged {
    opinions: Vec<String>,
    priority: u8,
}

#[derive(EventUnion)]
enum Intake {
    Ticket(Ticket),
    Opinion(Opinion),
}

struct Triage;

#[agent]
impl Triage {
    #[step(max_executions_per_run = 1)]
    async fn intake(q: Required<UserMessageEvent>) -> Result<Vec<Intake>, StepError> {
        let mut out = vec![Intake::Ticket(Ticket {
            text: q.message.clone(),
        })];
        out.extend(["ann", "bob", "cid"].map(|by| Intake::Opinion(Opinion { by: by.into() })));
        Ok(out)
    }

    #[step(max_executions_per_run = 1)]
    async fn prioritize(t: Required<Ticket>) -> Result<Option<Priority>, StepError> {
        Ok((!t.text.is_empty()).then_some(Priority { level: 2 }))
    }

    #[step(precondition = Self::has_priority, max_executions_per_run = 1)]
    async fn decide(
        ops: FixedList<Opinion, 3>,
        prio: Option<Priority>,
        ctx: StepCtx,
    ) -> Result<Triaged, StepError> {
        let _ = ctx.execution();
        Ok(Triaged {
            opinions: ops.iter().map(|o| o.by.clone()).collect(),
            priority: prio.map_or(0, |p| p.level),
        })
    }

    fn has_priority(_ops: &FixedList<Opinion, 3>, prio: &Option<Priority>) -> bool {
        prio.is_some()
    }
}

#[test]
fn a_vec_of_a_union_is_unbounded_in_the_spec_and_an_option_at_most_one() {
    let wf = Triage::workflow().unwrap();
    let intake = &wf.spec().steps[0];
    assert_eq!(intake.outputs, ["Ticket", "Opinion"]);
    assert_eq!(intake.output_max.get("Ticket"), Some(&OutputMax::Unbounded));
    assert_eq!(
        intake.output_max.get("Opinion"),
        Some(&OutputMax::Unbounded)
    );
    let prioritize = &wf.spec().steps[1];
    assert_eq!(prioritize.outputs, ["Priority"]);
    assert!(prioritize.output_max.is_empty(), "an Option is at most one");
    assert_eq!(prioritize.max_per_execution("Priority"), Some(1));
    // What `spec` prints: the bound is part of the exported spec.
    let json = serde_json::to_value(wf.spec()).unwrap();
    assert_eq!(
        json["steps"][0]["outputs"],
        serde_json::json!([
            {"event": "Ticket", "max": "unbounded"},
            {"event": "Opinion", "max": "unbounded"}
        ])
    );
    assert_eq!(json["steps"][1]["outputs"], serde_json::json!(["Priority"]));
}

#[test]
fn check_reports_no_error_for_the_fan_out_agent() {
    let wf = Triage::workflow().unwrap();
    let findings = check(wf.compiled());
    let errors: Vec<_> = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    // The agent's own command line: `check` exits 0.
    let code = saap::cli::main_with(Triage::workflow().unwrap(), ["triage", "check"]);
    assert_eq!(code, ExitCode::SUCCESS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fan_out_agent_runs_and_decide_gets_three_opinions() {
    let runner = TestRunner::in_memory(Triage::workflow().unwrap());
    let run = runner
        .start(UserMessageEvent::new("printer on fire"))
        .await
        .unwrap();
    let t = run.wait_for_event::<Triaged>(WAIT).await.unwrap();
    assert_eq!(t.opinions, ["ann", "bob", "cid"]);
    assert_eq!(t.priority, 2);
    assert_eq!(run.executions_of("decide"), 1);
}

/// The builder writes the same for a closure step returning a `Vec` of one event type.
#[test]
fn the_builder_marks_a_vec_result_unbounded() {
    let wf = Workflow::builder("Fan")
        .step(Step::new(
            "fan",
            |_: Required<UserMessageEvent>, _: StepCtx| async {
                Ok::<_, StepError>(vec![Opinion { by: "a".into() }, Opinion { by: "b".into() }])
            },
        ))
        .step(Step::new(
            "join",
            |ops: FixedList<Opinion, 2>, _: StepCtx| async move {
                Ok::<_, StepError>(Triaged {
                    opinions: ops.iter().map(|o| o.by.clone()).collect(),
                    priority: 0,
                })
            },
        ))
        .build()
        .unwrap();
    assert_eq!(
        wf.spec().steps[0].output_max.get("Opinion"),
        Some(&OutputMax::Unbounded)
    );
    assert!(
        check(wf.compiled())
            .iter()
            .all(|f| f.severity != Severity::Error)
    );
}
