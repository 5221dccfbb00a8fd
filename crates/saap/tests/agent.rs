//! `#[agent]` on an impl block: the spec it generates, options, preconditions over the step's
//! own inputs, config injection by type (agent config and step config) and config
//! validation when a run starts.
#![allow(clippy::unwrap_used)]

use saap::testing::TestRunner;
use saap::{
    Agent, AgentConfig, ChunkEvent, Config, Engine, ExceptionEvent, Required, RunContext,
    StepConfig, StepCtx, StepError, UserMessageEvent, agent,
};
use saap_dispatch::spec::ParamKind;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

#[derive(saap::Event, serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Retrieved {
    docs: Vec<String>,
}

#[derive(saap::Event, serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Hints {
    text: String,
}

#[derive(saap::Event, serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
#[event(parent = StopEvent)]
struct Answered {
    text: String,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
struct RagConfig {
    top_k: usize,
    greeting: String,
}

impl Default for RagConfig {
    fn default() -> Self {
        RagConfig {
            top_k: 2,
            greeting: "hello".into(),
        }
    }
}

impl AgentConfig for RagConfig {
    fn validate(&self) -> Result<(), String> {
        if self.top_k == 0 || self.top_k > 5 {
            return Err(format!(
                "top_k is {}; write a value from 1 to 5",
                self.top_k
            ));
        }
        Ok(())
    }
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Default, PartialEq)]
struct AnswerStyle {
    shout: bool,
}

impl AgentConfig for AnswerStyle {}

/// Stateless: a unit struct, never instantiated by saap.
struct RagAgent;

#[agent(config = RagConfig, events = [ChunkEvent], description = "retrieve, then answer")]
impl RagAgent {
    #[step(max_executions_per_run = 1)]
    async fn retrieve(
        q: Required<UserMessageEvent>,
        cfg: Config<RagConfig>,
    ) -> Result<Retrieved, StepError> {
        let docs = ["a", "b", "c", "d", "e"]
            .iter()
            .take(cfg.top_k)
            .map(|d| format!("{d}:{}", q.message))
            .collect();
        Ok(Retrieved { docs })
    }

    #[step(precondition = Self::hints_arrived, max_executions_per_run = 1)]
    async fn answer(
        r: Required<Retrieved>,
        hints: Option<Hints>,
        cfg: Config<RagConfig>,
        style: StepConfig<AnswerStyle>,
        ctx: StepCtx,
        run: RunContext,
    ) -> Result<Answered, StepError> {
        run.set("answered_by", &ctx.execution().to_string()).await?;
        ctx.display(&ChunkEvent {
            chunk: "thinking".into(),
        })
        .await?;
        let hint = hints.map(|h| h.text.clone()).unwrap_or_default();
        let text = format!("{} {} ({hint})", cfg.greeting, r.docs.join(","));
        Ok(Answered {
            text: if style.shout {
                text.to_uppercase()
            } else {
                text
            },
        })
    }

    /// Sees only the step's own bound inputs, one reference per event parameter.
    fn hints_arrived(_r: &Required<Retrieved>, hints: &Option<Hints>) -> bool {
        hints.is_some()
    }
}

#[test]
fn the_macro_generates_the_spec_from_the_signatures() {
    let wf = RagAgent::workflow().unwrap();
    assert_eq!(RagAgent::NAME, "RagAgent");
    let spec = wf.spec();
    assert_eq!(spec.name, "RagAgent");
    assert_eq!(spec.description.as_deref(), Some("retrieve, then answer"));
    let names: Vec<&str> = spec.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["retrieve", "answer"]);
    let answer = &spec.steps[1];
    let params: Vec<(&str, ParamKind)> = answer
        .params
        .iter()
        .map(|p| (p.name.as_str(), p.kind))
        .collect();
    // Injectables (config, step config, ctx, run context) are not event parameters.
    assert_eq!(
        params,
        [("r", ParamKind::Required), ("hints", ParamKind::Optional)]
    );
    assert_eq!(answer.max_executions_per_run, Some(1));
    let pre = answer.precondition.as_ref().unwrap();
    assert_eq!(pre.name, "hints_arrived");
    assert_eq!(pre.reads, ["Retrieved", "Hints"]);
    assert_eq!(answer.outputs, ["Answered"]);
    assert!(spec.events.iter().any(|e| e.name == "Hints"));
    // The events = [...] option declares events no signature names.
    assert!(
        wf.compiled().type_id("ChunkEvent").is_some(),
        "declared display event"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configs_are_injected_by_type_with_defaults_and_step_entries() {
    let engine = Engine::in_memory(RagAgent::workflow().unwrap());
    let runner = TestRunner::new(engine.clone());
    let run_id = engine
        .start_run_with_config(
            None,
            UserMessageEvent::new("q"),
            &serde_json::json!({"top_k": 3, "steps": {"answer": {"shout": true}}}),
        )
        .await
        .unwrap();
    let run = runner.attach(&run_id).unwrap();
    run.wait_for_event::<Retrieved>(WAIT).await.unwrap();
    run.send(Hints { text: "h".into() }).await.unwrap();
    let answered = run.wait_for_event::<Answered>(WAIT).await.unwrap();
    // greeting from the default, top_k from the run's config, shout from the step's.
    assert_eq!(answered.text, "HELLO A:Q,B:Q,C:Q (H)");
    assert_eq!(run.executions_of("answer"), 1);
}

#[tokio::test]
async fn a_run_without_config_gets_the_defaults() {
    let runner = TestRunner::in_memory(RagAgent::workflow().unwrap());
    let run = runner.start(UserMessageEvent::new("q")).await.unwrap();
    run.wait_for_event::<Retrieved>(WAIT).await.unwrap();
    run.send(Hints { text: "h".into() }).await.unwrap();
    let answered = run.wait_for_event::<Answered>(WAIT).await.unwrap();
    assert_eq!(answered.text, "hello a:q,b:q (h)");
}

#[tokio::test]
async fn a_start_event_whose_config_fails_validation_is_refused_before_the_run_exists() {
    let engine = Engine::in_memory(RagAgent::workflow().unwrap());
    for (config, code, says) in [
        (
            serde_json::json!({"top_k": 9}),
            "SAAP-C001",
            "top_k is 9; write a value from 1 to 5",
        ),
        (
            serde_json::json!({"top_k": "many"}),
            "SAAP-C001",
            "fields of `RagConfig`",
        ),
        (
            serde_json::json!({"steps": {"answer": {"shout": "yes"}}}),
            "SAAP-C002",
            "_config.steps.answer",
        ),
    ] {
        let err = engine
            .start_run_with_config(None, UserMessageEvent::new("q"), &config)
            .await
            .unwrap_err();
        assert_eq!(err.code(), code, "{err}");
        assert!(err.to_string().contains(says), "{err}");
    }
    assert!(engine.run_ids().is_empty(), "no run was created");
}

/// A config type no start-time check knows (read with `ctx.config` in the body) that does
/// not fit fails the execution: the run ends with an ExceptionEvent that names it.
#[tokio::test]
async fn a_config_that_fails_inside_a_step_ends_the_run_with_an_exception() {
    #[derive(serde::Serialize, serde::Deserialize, Default)]
    struct Strict {
        level: u8,
    }
    impl AgentConfig for Strict {}
    let wf = saap::Workflow::builder("Strict")
        .step(saap::Step::new(
            "go",
            |_q: Required<UserMessageEvent>, ctx: StepCtx| async move {
                let c = ctx.config::<Strict>()?;
                Ok::<_, StepError>(Answered {
                    text: c.level.to_string(),
                })
            },
        ))
        .build()
        .unwrap();
    let engine = Engine::in_memory(wf);
    let run_id = engine
        .start_run_with_config(
            None,
            UserMessageEvent::new("q"),
            &serde_json::json!({"level": 300}),
        )
        .await
        .unwrap();
    let run = TestRunner::new(engine).attach(&run_id).unwrap();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    assert!(snap.has_exception());
    let ex = snap.events_of::<ExceptionEvent>();
    assert!(ex[0].message.contains("SAAP-C001"), "{}", ex[0].message);
}

struct Tolerant;

#[agent(name = "TolerantAgent")]
impl Tolerant {
    /// Fails; with `stop_on_error = false` the run goes on.
    #[step(name = "flaky_lookup", stop_on_error = false)]
    async fn lookup(_q: Required<UserMessageEvent>) -> Result<Retrieved, StepError> {
        Err(StepError::new("the index is down"))
    }

    #[step]
    async fn fallback(q: Required<UserMessageEvent>) -> Result<Answered, StepError> {
        Ok(Answered {
            text: format!("no lookup for {}", q.message),
        })
    }
}

#[tokio::test]
async fn step_options_name_and_stop_on_error_reach_the_spec_and_the_run() {
    let wf = Tolerant::workflow().unwrap();
    assert_eq!(Tolerant::NAME, "TolerantAgent");
    assert_eq!(wf.spec().name, "TolerantAgent");
    let lookup = &wf.spec().steps[0];
    assert_eq!(lookup.name, "flaky_lookup");
    assert!(!lookup.stop_on_error);
    assert!(wf.spec().steps[1].stop_on_error, "the default is true");
    let run = TestRunner::in_memory(wf)
        .start(UserMessageEvent::new("q"))
        .await
        .unwrap();
    let snap = run.wait_for_end(WAIT).await.unwrap();
    assert!(
        snap.has_stop() && !snap.has_exception(),
        "{}",
        snap.timeline()
    );
    assert_eq!(snap.executions_of("flaky_lookup"), 1);
    assert!(snap.timeline().contains("the index is down"));
}

#[derive(saap::Event, serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Draft {
    text: String,
}

#[derive(saap::Event, serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Notes {
    text: String,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Default, PartialEq)]
struct ReviewConfig {
    wait_for_notes: bool,
}

impl AgentConfig for ReviewConfig {}

struct Reviewer;

/// The seeds' "config lie", fixed: whether to wait for the notes is decided by the
/// precondition (where the dispatcher can still wait), reading the run's config.
#[agent(config = ReviewConfig)]
impl Reviewer {
    #[step]
    async fn draft(q: Required<UserMessageEvent>) -> Result<Draft, StepError> {
        Ok(Draft {
            text: q.message.clone(),
        })
    }

    #[step(config_precondition = Self::ready, max_executions_per_run = 1)]
    async fn publish(d: Required<Draft>, notes: Option<Notes>) -> Result<Answered, StepError> {
        Ok(Answered {
            text: format!(
                "{} [{}]",
                d.text,
                notes.map(|n| n.text.clone()).unwrap_or_default()
            ),
        })
    }

    fn ready(_d: &Required<Draft>, notes: &Option<Notes>, cfg: &ReviewConfig) -> bool {
        !cfg.wait_for_notes || notes.is_some()
    }
}

#[tokio::test]
async fn a_config_precondition_reads_the_run_config_and_waits_only_when_configured() {
    let wf = Reviewer::workflow().unwrap();
    let pre = wf.spec().steps[1].precondition.as_ref().unwrap();
    assert_eq!(pre.name, "ready");
    let engine = Engine::in_memory(wf);
    let runner = TestRunner::new(engine.clone());

    let waiting = engine
        .start_run_with_config(
            None,
            UserMessageEvent::new("doc"),
            &ReviewConfig {
                wait_for_notes: true,
            },
        )
        .await
        .unwrap();
    let run = runner.attach(&waiting).unwrap();
    run.wait_idle(WAIT).await.unwrap();
    assert_eq!(run.executions_of("publish"), 0, "{}", run.timeline());
    run.send(Notes { text: "ok".into() }).await.unwrap();
    let answered = run.wait_for_event::<Answered>(WAIT).await.unwrap();
    assert_eq!(answered.text, "doc [ok]");

    let eager = runner.start(UserMessageEvent::new("doc")).await.unwrap();
    let answered = eager.wait_for_event::<Answered>(WAIT).await.unwrap();
    assert_eq!(answered.text, "doc []", "the default config does not wait");
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Default, PartialEq)]
struct GateConfig {
    open: bool,
}

impl AgentConfig for GateConfig {}

struct Gate;

#[agent(config = GateConfig)]
impl Gate {
    #[step(config_precondition = Self::is_open)]
    async fn pass(q: Required<UserMessageEvent>) -> Result<Answered, StepError> {
        Ok(Answered {
            text: q.message.clone(),
        })
    }

    fn is_open(_q: &Required<UserMessageEvent>, cfg: &GateConfig) -> bool {
        cfg.open
    }
}

/// The precondition of a step triggered by the start event itself sees that event's config.
#[tokio::test]
async fn a_config_precondition_on_the_start_event_sees_its_config() {
    let engine = Engine::in_memory(Gate::workflow().unwrap());
    let runner = TestRunner::new(engine.clone());
    for (open, runs) in [(true, 1), (false, 0)] {
        let id = engine
            .start_run_with_config(None, UserMessageEvent::new("in"), &GateConfig { open })
            .await
            .unwrap();
        let run = runner.attach(&id).unwrap();
        run.wait_idle(WAIT).await.unwrap();
        assert_eq!(run.executions_of("pass"), runs, "open = {open}");
    }
}
