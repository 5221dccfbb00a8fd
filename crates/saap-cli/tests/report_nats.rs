//! `saap report --server URL --run RUN`: run evidence from a live NATS server (a real
//! nats-server started per test). The class stream is written by a plain Python NATS client
//! with Python-format events (`crates/saap-inspect/tests/python/publish_python_events.py`): run
//! `…a1` of `QaAgent` has a control event stored after its stop event. The report on the
//! agent's Python source shows it as run evidence of `after-stop`; `wont-start` reads the class
//! stream (no consumer: no dispatcher subscribed; no stream: the agent never connected). Skips
//! with the reason when nats-py cannot be installed into the private test environment.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Output, nats_py, run, saap, workspace_root};
use saap_nats::testing::NatsServer;
use serde_json::Value;
use std::time::Duration;

const RUN_A: &str = "6650000000000000000000a1";

/// QaAgent as the Python events of the publisher imply it: a retrieval step and an answer
/// that stops the run.
const QA_AGENT: &str = r#"
from swiss_ai_hub.agent.agents.agent import Agent
from swiss_ai_hub.agent.workflow.decorators.step import step
from swiss_ai_hub.core.events import ControlEvent, StopEvent, UserMessageEvent


class RetrievedContext(ControlEvent):
    docs: list[str]


class AnswerStopEvent(StopEvent):
    answer: str


class QaAgent(Agent):
    @step()
    async def retrieve(self, message: UserMessageEvent) -> RetrievedContext:
        return RetrievedContext(docs=[])

    @step()
    async def answer(self, context: RetrievedContext) -> AnswerStopEvent:
        return AnswerStopEvent(answer="...")
"#;

fn report(args: &[&str]) -> Output {
    let mut all = vec!["report"];
    all.extend_from_slice(args);
    run(saap().args(&all).timeout(Duration::from_secs(60)))
}

#[test]
fn a_live_run_with_an_event_after_its_stop_is_evidence_of_after_stop() {
    let py = match nats_py() {
        Ok(p) => p,
        Err(reason) => {
            eprintln!(
                "SKIPPED: nats-py (PyPI) could not be installed, so no Python client can publish: {reason}"
            );
            return;
        }
    };
    let server = NatsServer::start();
    let url = server.url();
    let out = std::process::Command::new(py)
        .arg(workspace_root().join("crates/saap-inspect/tests/python/publish_python_events.py"))
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the Python publisher failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("qa.py");
    std::fs::write(&agent, QA_AGENT).unwrap();
    let agent = agent.to_str().unwrap();

    let out = report(&[
        "--symptom",
        "after-stop",
        agent,
        "--server",
        &url,
        "--run",
        RUN_A,
        "--json",
    ]);
    // The source itself is clean: the run is the only evidence, and it names no cause in the
    // code (an outside publisher sent the late event).
    assert_eq!(out.code, 1, "{}\n{}", out.stderr, out.stdout);
    let r: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(r["verdict"], "no_cause_found");
    let ev = r["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["tool"] == "run")
        .unwrap();
    assert_eq!(
        ev["summary"],
        format!("run {RUN_A}: 1 control event(s) after its stop").as_str()
    );
    let details: Vec<&str> = ev["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    assert!(
        details[0].starts_with("status stopped, ended by AnswerStopEvent;"),
        "{details:?}"
    );
    assert!(
        details.contains(&"after the stop: RetrievedContext"),
        "{details:?}"
    );

    // With a step: no records on NATS, so the step's output events are counted instead.
    let out = report(&[
        "--symptom",
        "runs-twice",
        "--step",
        "retrieve",
        agent,
        "--server",
        &url,
        "--run",
        RUN_A,
        "--json",
    ]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let r: Value = serde_json::from_str(&out.stdout).unwrap();
    let ev = r["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["tool"] == "run")
        .unwrap();
    assert!(
        ev["details"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d.as_str().unwrap().starts_with(
                "2 event(s) of `retrieve`'s output types were published (no dispatcher records"
            )),
        "{ev}"
    );

    // Won't start: the class stream holds the events but no dispatcher is subscribed.
    let out = report(&["--symptom", "wont-start", agent, "--server", &url, "--json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    let r: Value = serde_json::from_str(&out.stdout).unwrap();
    let cause = &r["root_causes"][0];
    assert_eq!(
        cause["constraint"],
        "Agent Won't Start: no dispatcher subscribed"
    );
    assert!(cause["code"].is_null());
    assert!(
        cause["message"]
            .as_str()
            .unwrap()
            .starts_with("`agent_QaAgent_stream` has zero consumers"),
        "{cause}"
    );
    assert!(
        r["fixes"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("start a dispatcher for the class"),
        "{}",
        r["fixes"]
    );
    // An agent whose class never connected: no stream, and the static cause beside it.
    let idle = workspace_root().join("examples/python/wont_start.py");
    let out = report(&[
        "--symptom",
        "wont-start",
        idle.to_str().unwrap(),
        "--server",
        &url,
        "--json",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r: Value = serde_json::from_str(&out.stdout).unwrap();
    let causes: Vec<&str> = r["root_causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["constraint"].as_str().unwrap())
        .collect();
    assert_eq!(
        causes,
        [
            "Agent Won't Start: no step takes a start event",
            "Agent Won't Start: stream not created"
        ]
    );
    let server_ev = r["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["tool"] == "server")
        .unwrap();
    assert_eq!(
        server_ev["summary"],
        "`agent_IdleAgent_stream` does not exist on the server"
    );

    // An unknown run on the server: exit 2 with inspect's code.
    let out = report(&[
        "--symptom",
        "after-stop",
        agent,
        "--server",
        &url,
        "--run",
        "6650000000000000000000ff",
    ]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("SAAP-I007"), "{}", out.stderr);
}
